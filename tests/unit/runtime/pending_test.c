/* pending_test.c - unit tests for service/runtime/pending.c: deciding waiting proposals. */
#include <CUnit/Basic.h>
#include <stdlib.h>

#include "service/runtime/pending.h"

static struct rt_request *req(uint64_t index, uint64_t term)
{
    struct rt_request *r = calloc(1, sizeof(*r));
    CU_ASSERT_FATAL(r != NULL);
    r->index = index;
    r->term = term;
    return r;
}

static void free_list(struct rt_list *l)
{
    struct rt_request *r;
    while ((r = rt_list_pop(l)) != NULL)
        free(r);
}

/* The list's (index, term) pairs in order, compared with want[0..2n). */
static int list_is(const struct rt_list *l, const uint64_t *want, size_t n)
{
    size_t i = 0;
    for (const struct rt_request *r = l->head; r != NULL; r = r->next, i++)
        if (i >= n || r->index != want[2 * i] || r->term != want[2 * i + 1])
            return 0;
    return i == n && l->len == n && (n == 0 || (l->tail->index == want[2 * n - 2] &&
                                                l->tail->term == want[2 * n - 1]));
}

static void test_in_order(void)
{
    struct rt_list l = {0}, lost = {0}, unknown = {0};
    rt_pending_add(&l, req(5, 2));
    rt_pending_add(&l, req(6, 2));
    rt_pending_add(&l, req(7, 2));
    struct rt_request *w = rt_pending_match(&l, 5, 2, &lost, &unknown);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->index, 5);
    free(w);
    CU_ASSERT_PTR_NULL(rt_pending_match(&l, 4, 2, &lost, &unknown)); /* below every proposal */
    CU_ASSERT_EQUAL(lost.len + unknown.len, 0);
    const uint64_t left[] = {6, 2, 7, 2};
    CU_ASSERT(list_is(&l, left, 2));
    free_list(&l);
}

/* A leader of term 2 appends at 172 and is deposed before it commits; a leader of term 3 cuts
 * the log back to 170; the first node wins term 4 and appends at 171. Entry (171, 4) commits
 * first: it must be answered as applied, not as "superseded" by the older proposal ahead of
 * it. Then (172, 4) commits: the term-2 proposal certainly did not. */
static void test_reelected_below_older_proposal(void)
{
    struct rt_list l = {0}, lost = {0}, unknown = {0};
    rt_pending_add(&l, req(172, 2));
    rt_pending_add(&l, req(171, 4));
    rt_pending_add(&l, req(172, 4));
    rt_pending_add(&l, req(173, 4));
    const uint64_t sorted[] = {171, 4, 172, 2, 172, 4, 173, 4};
    CU_ASSERT(list_is(&l, sorted, 4));

    struct rt_request *w = rt_pending_match(&l, 171, 4, &lost, &unknown);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->index, 171);
    CU_ASSERT_EQUAL(w->term, 4);
    free(w);
    CU_ASSERT_EQUAL(lost.len + unknown.len, 0);

    w = rt_pending_match(&l, 172, 4, &lost, &unknown);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->term, 4);
    free(w);
    const uint64_t lost_want[] = {172, 2};
    CU_ASSERT(list_is(&lost, lost_want, 1));
    CU_ASSERT_EQUAL(unknown.len, 0);
    const uint64_t left[] = {173, 4};
    CU_ASSERT(list_is(&l, left, 1));
    free_list(&l);
    free_list(&lost);
}

/* The older proposal is the one that commits (another node that had it won later). */
static void test_older_term_commits(void)
{
    struct rt_list l = {0}, lost = {0}, unknown = {0};
    rt_pending_add(&l, req(172, 2));
    rt_pending_add(&l, req(172, 4));
    struct rt_request *w = rt_pending_match(&l, 172, 2, &lost, &unknown);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->term, 2);
    free(w);
    const uint64_t lost_want[] = {172, 4};
    CU_ASSERT(list_is(&lost, lost_want, 1));
    CU_ASSERT_EQUAL(l.len, 0);
    CU_ASSERT_PTR_NULL(l.head);
    CU_ASSERT_PTR_NULL(l.tail);
    free_list(&lost);
}

static void test_conf_change_rules_out(void)
{
    struct rt_list l = {0}, lost = {0}, unknown = {0};
    rt_pending_add(&l, req(9, 3));
    rt_pending_add(&l, req(10, 3));
    CU_ASSERT_PTR_NULL(rt_pending_match(&l, 9, 0, &lost, &unknown));
    const uint64_t lost_want[] = {9, 3};
    CU_ASSERT(list_is(&lost, lost_want, 1));
    CU_ASSERT_EQUAL(l.len, 1);
    free_list(&l);
    free_list(&lost);
}

/* Indexes a snapshot skipped: nothing committed at them was seen here. */
static void test_skipped_indexes_are_unknown(void)
{
    struct rt_list l = {0}, lost = {0}, unknown = {0};
    rt_pending_add(&l, req(10, 3));
    rt_pending_add(&l, req(11, 3));
    rt_pending_add(&l, req(20, 3));
    rt_pending_add(&l, req(30, 3));
    rt_pending_passed(&l, 15, &unknown);
    const uint64_t unknown_want[] = {10, 3, 11, 3};
    CU_ASSERT(list_is(&unknown, unknown_want, 2));
    free_list(&unknown);

    /* An entry committed past a proposal's index without it being seen: unknown too. */
    struct rt_request *w = rt_pending_match(&l, 25, 3, &lost, &unknown);
    CU_ASSERT_PTR_NULL(w);
    const uint64_t unknown_want2[] = {20, 3};
    CU_ASSERT(list_is(&unknown, unknown_want2, 1));
    CU_ASSERT_EQUAL(lost.len, 0);
    const uint64_t left[] = {30, 3};
    CU_ASSERT(list_is(&l, left, 1));
    free_list(&unknown);
    free_list(&l);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite suite = CU_add_suite("runtime pending proposals", NULL, NULL);
    CU_add_test(suite, "in order", test_in_order);
    CU_add_test(suite, "re-elected leader below an older proposal", test_reelected_below_older_proposal);
    CU_add_test(suite, "the older term's proposal commits", test_older_term_commits);
    CU_add_test(suite, "a conf change rules out a proposal", test_conf_change_rules_out);
    CU_add_test(suite, "indexes skipped by a snapshot are unknown", test_skipped_indexes_are_unknown);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
