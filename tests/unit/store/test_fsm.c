/* test_fsm.c - store unit tests of the fsm: put/get/delete, range deletes, applied, iterators. */
#include "store_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Key of row i of table 1 in hash slot (i % 256): [slot][1]["k<i>"]. */
static size_t row_key(uint8_t *out, unsigned i)
{
    char pk[32];
    int n = snprintf(pk, sizeof(pk), "k%06u", i);
    return store_key_fsm(out, (uint16_t)(i % 256), 1, pk, (size_t)n);
}

static void put_rows(struct store *s, unsigned lo, unsigned hi)
{
    struct store_fsm_batch *b;
    uint8_t k[STORE_FSM_KEY_MAX];
    char v[32];
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    for (unsigned i = lo; i < hi; i++) {
        int vl = snprintf(v, sizeof(v), "v%u", i);
        store_fsm_batch_put(b, k, row_key(k, i), v, (size_t)vl);
    }
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    store_fsm_batch_free(b);
}

/* 1 when row i holds "v<i>", 0 when absent, -1 on anything else. */
static int row_state(struct store *s, unsigned i)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    char want[32];
    void *v = NULL;
    size_t vl = 0;
    int rc = store_fsm_get(s, k, row_key(k, i), &v, &vl);
    if (rc == STORE_ENOTFOUND)
        return 0;
    if (rc != STORE_OK)
        return -1;
    int n = snprintf(want, sizeof(want), "v%u", i);
    int same = vl == (size_t)n && memcmp(v, want, vl) == 0;
    free(v);
    return same ? 1 : -1;
}

static void test_fsm_put_get_delete(void)
{
    struct store *s = test_open();
    struct store_fsm_batch *b;
    uint8_t k[STORE_FSM_KEY_MAX];
    void *v = NULL;
    size_t vl = 99;
    put_rows(s, 0, 100);
    for (unsigned i = 0; i < 100; i++)
        CU_ASSERT_EQUAL(row_state(s, i), 1);
    CU_ASSERT_EQUAL(row_state(s, 100), 0);

    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    store_fsm_batch_delete(b, k, row_key(k, 10));
    store_fsm_batch_put(b, k, row_key(k, 11), "", 0); /* an empty value is a value */
    store_fsm_batch_put(b, k, row_key(k, 12), "old", 3);
    store_fsm_batch_put(b, k, row_key(k, 12), "new", 3); /* the later op wins */
    store_fsm_batch_put(b, k, row_key(k, 13), "x", 1);
    store_fsm_batch_delete(b, k, row_key(k, 13));
    CU_ASSERT_EQUAL(store_fsm_batch_count(b), 6);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, true), STORE_OK);
    CU_ASSERT_EQUAL(row_state(s, 10), 0);
    CU_ASSERT_EQUAL(row_state(s, 13), 0);
    CU_ASSERT_EQUAL_FATAL(store_fsm_get(s, k, row_key(k, 11), &v, &vl), STORE_OK);
    CU_ASSERT(v != NULL && vl == 0);
    free(v);
    CU_ASSERT_EQUAL_FATAL(store_fsm_get(s, k, row_key(k, 12), &v, &vl), STORE_OK);
    CU_ASSERT(vl == 3 && memcmp(v, "new", 3) == 0);
    free(v);
    CU_ASSERT_EQUAL(row_state(s, 14), 1);

    /* Bad keys: a clear error, and nothing of the batch is written. */
    CU_ASSERT_EQUAL(store_fsm_get(s, k, 0, &v, &vl), STORE_EINVAL);
    CU_ASSERT_EQUAL(store_fsm_get(s, k, STORE_FSM_KEY_MAX + 1, &v, &vl), STORE_EINVAL);
    store_fsm_batch_clear(b);
    store_fsm_batch_delete(b, k, row_key(k, 20));
    store_fsm_batch_put(b, k, STORE_FSM_KEY_MAX + 1, "v", 1);
    CU_ASSERT_EQUAL(store_fsm_batch_error(b), STORE_EINVAL);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, true), STORE_EINVAL);
    CU_ASSERT(strstr(store_errmsg(s), "key of 1104 bytes") != NULL);
    CU_ASSERT_EQUAL(row_state(s, 20), 1);
    store_fsm_batch_free(b);
    test_close(s);
}

static void test_fsm_delete_range(void)
{
    struct store *s = test_open();
    struct store_fsm_batch *b;
    uint8_t lo[3], hi[3], k[STORE_FSM_KEY_MAX];
    /* Rows 0..2559: ten rows in each of the 256 hash slots. */
    put_rows(s, 0, 2560);
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);

    /* Hash slots [5, 8), no limit reached: 30 rows. */
    store_put_u16(lo, 5);
    lo[2] = 0;
    store_put_u16(hi, 8);
    hi[2] = 0;
    store_fsm_batch_put(b, k, row_key(k, 5), "mine", 4); /* the batch's own keys are not seen */
    CU_ASSERT_EQUAL(store_fsm_batch_delete_range(s, b, lo, 3, hi, 3, 1000), STORE_OK);
    CU_ASSERT_EQUAL(store_fsm_batch_count(b), 1 + 30);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    for (unsigned i = 0; i < 2560; i++) {
        unsigned slot = i % 256;
        int want = slot >= 5 && slot < 8 ? 0 : 1;
        if (row_state(s, i) != want && i != 5) {
            CU_FAIL("row outside the deleted range changed, or a row inside survived");
            break;
        }
    }
    CU_ASSERT_EQUAL(row_state(s, 5), 0); /* deleted after the put: the delete came later */

    /* Hash slot 9 with a limit of 4: three rounds (4 + 4 + 2), ELIMIT until the last. */
    store_put_u16(lo, 9);
    store_put_u16(hi, 10);
    int rounds = 0, rc;
    do {
        store_fsm_batch_clear(b);
        rc = store_fsm_batch_delete_range(s, b, lo, 3, hi, 3, 4);
        CU_ASSERT(rc == STORE_OK || rc == STORE_ELIMIT);
        CU_ASSERT_EQUAL(store_fsm_batch_count(b), rc == STORE_ELIMIT ? 4 : 2);
        CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
        rounds++;
    } while (rc == STORE_ELIMIT && rounds < 10);
    CU_ASSERT_EQUAL(rounds, 3);
    for (unsigned i = 9; i < 2560; i += 256)
        CU_ASSERT_EQUAL(row_state(s, i), 0);
    CU_ASSERT_EQUAL(row_state(s, 8), 1);
    CU_ASSERT_EQUAL(row_state(s, 10), 1);

    /* A limit of zero with keys present adds nothing. */
    store_fsm_batch_clear(b);
    store_put_u16(lo, 20);
    CU_ASSERT_EQUAL(store_fsm_batch_delete_range(s, b, lo, 2, NULL, 0, 0), STORE_ELIMIT);
    CU_ASSERT_EQUAL(store_fsm_batch_count(b), 0);
    CU_ASSERT(strstr(store_errmsg(s), "more than 0 keys") != NULL);

    /* To the end (hi NULL) from hash slot 250: 6 slots x 10 rows. */
    store_put_u16(lo, 250);
    CU_ASSERT_EQUAL(store_fsm_batch_delete_range(s, b, lo, 2, NULL, 0, 60), STORE_OK);
    CU_ASSERT_EQUAL(store_fsm_batch_count(b), 60);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    CU_ASSERT_EQUAL(row_state(s, 255), 0);
    CU_ASSERT_EQUAL(row_state(s, 249), 1);
    store_fsm_batch_free(b);
    test_close(s);
}

static void test_fsm_applied_with_batch(void)
{
    struct store *s = test_open();
    struct store_fsm_batch *b;
    uint8_t k[STORE_FSM_KEY_MAX];
    uint64_t applied = 99;
    CU_ASSERT_EQUAL(store_fsm_applied(s, 3, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 0);
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    store_fsm_batch_put(b, k, row_key(k, 1), "v1", 2);
    store_fsm_batch_set_applied(b, 3, 17);
    store_fsm_batch_set_applied(b, 4, 1ull << 40);
    CU_ASSERT_EQUAL(store_fsm_applied(s, 3, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 0); /* not before the write */
    CU_ASSERT_EQUAL(row_state(s, 1), 0);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    CU_ASSERT_EQUAL(store_fsm_applied(s, 3, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 17);
    CU_ASSERT_EQUAL(store_fsm_applied(s, 4, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 1ull << 40);
    CU_ASSERT_EQUAL(row_state(s, 1), 1);

    /* The applied index is an ordinary fsm key with a strictly decoded value. */
    uint8_t ak[STORE_GROUP_APPLIED_KEY_LEN];
    store_key_group_applied(ak, 3);
    void *v = NULL;
    size_t vl = 0;
    CU_ASSERT_EQUAL_FATAL(store_fsm_get(s, ak, sizeof(ak), &v, &vl), STORE_OK);
    CU_ASSERT(vl == 9 && ((uint8_t *)v)[0] == 1 && store_get_u64((uint8_t *)v + 1) == 17);
    free(v);
    store_fsm_batch_clear(b);
    const uint8_t bad_version[9] = {7, 0, 0, 0, 0, 0, 0, 0, 1};
    store_fsm_batch_put(b, ak, sizeof(ak), bad_version, sizeof(bad_version));
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    CU_ASSERT_EQUAL(store_fsm_applied(s, 3, &applied), STORE_ECORRUPT);
    CU_ASSERT(strstr(store_errmsg(s), "group 3 applied index: version byte 7") != NULL);
    store_fsm_batch_clear(b);
    store_fsm_batch_put(b, ak, sizeof(ak), "\1\0\0", 3);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    CU_ASSERT_EQUAL(store_fsm_applied(s, 3, &applied), STORE_ECORRUPT);
    CU_ASSERT(strstr(store_errmsg(s), "value of 3 bytes") != NULL);
    store_fsm_batch_free(b);
    test_close(s);
}

/* Walks it, checking keys ascend, and returns how many pairs it saw. */
static size_t iter_count(struct store_iter *it, const void *lo, size_t lol, const void *hi,
                         size_t hil, size_t *bad)
{
    size_t n = 0;
    uint8_t prev[STORE_FSM_KEY_MAX] = {0};
    size_t prevl = 0;
    for (; store_iter_valid(it); store_iter_next(it)) {
        size_t kl, vl;
        const uint8_t *k = store_iter_key(it, &kl);
        (void)store_iter_value(it, &vl);
        size_t m = kl < prevl ? kl : prevl;
        int c = memcmp(k, prev, m);
        if (n > 0 && (c < 0 || (c == 0 && kl <= prevl)))
            (*bad)++; /* not strictly ascending */
        m = kl < lol ? kl : lol;
        if (lo && (memcmp(k, lo, m) < 0 || (memcmp(k, lo, m) == 0 && kl < lol)))
            (*bad)++; /* below lo */
        m = kl < hil ? kl : hil;
        if (hi && (memcmp(k, hi, m) > 0 || (memcmp(k, hi, m) == 0 && kl >= hil)))
            (*bad)++; /* at or above hi */
        if (kl <= sizeof(prev)) {
            memcpy(prev, k, kl);
            prevl = kl;
        }
        n++;
    }
    return n;
}

static void test_fsm_iterator_order_and_bounds(void)
{
    struct store *s = test_open();
    struct store_iter *it;
    uint8_t lo[3], hi[3];
    size_t bad = 0;
    /* Rows in a scrambled order: 1000 rows, ~4 per hash slot. */
    for (unsigned i = 0; i < 1000; i++) {
        unsigned r = (i * 7919u) % 1000u;
        put_rows(s, r, r + 1);
    }
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, NULL, 0, NULL, 0, &it), STORE_OK);
    CU_ASSERT_EQUAL(iter_count(it, NULL, 0, NULL, 0, &bad), 1000);
    CU_ASSERT_EQUAL(store_iter_status(it), STORE_OK);
    store_iter_free(it);

    store_put_u16(lo, 256 - 1); /* hash slot 255 only: rows 255, 511, 767 */
    lo[2] = 1;
    store_put_u16(hi, 256 - 1);
    hi[2] = 2;
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, lo, 3, hi, 3, &it), STORE_OK);
    CU_ASSERT_EQUAL(iter_count(it, lo, 3, hi, 3, &bad), 3);
    store_iter_free(it);

    /* The first key of hash slot 1 is row 1 ("k000001"): check the exact pair. */
    store_put_u16(lo, 1);
    store_put_u16(hi, 2);
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, lo, 2, hi, 2, &it), STORE_OK);
    CU_ASSERT_FATAL(store_iter_valid(it));
    size_t kl, vl;
    const uint8_t *k = store_iter_key(it, &kl);
    const char *v = store_iter_value(it, &vl);
    CU_ASSERT(kl == 3 + 7 && memcmp(k + 3, "k000001", 7) == 0);
    CU_ASSERT(vl == 2 && memcmp(v, "v1", 2) == 0);
    CU_ASSERT_EQUAL(iter_count(it, lo, 2, hi, 2, &bad), 4);
    store_iter_free(it);

    /* Bounds that are stored keys: lo is included, hi is excluded. */
    uint8_t klo[STORE_FSM_KEY_MAX], khi[STORE_FSM_KEY_MAX];
    size_t klol = row_key(klo, 1), khil = row_key(khi, 513); /* hash slot 1: 1, 257, 513, 769 */
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, klo, klol, khi, khil, &it), STORE_OK);
    CU_ASSERT_EQUAL(iter_count(it, klo, klol, khi, khil, &bad), 2);
    store_iter_free(it);

    /* Empty ranges. */
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, hi, 2, lo, 2, &it), STORE_OK);
    CU_ASSERT(!store_iter_valid(it));
    store_iter_free(it);
    store_put_u16(lo, 300);
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, lo, 2, NULL, 0, &it), STORE_OK);
    CU_ASSERT(!store_iter_valid(it));
    store_iter_free(it);
    CU_ASSERT_EQUAL(bad, 0);
    test_close(s);
}

static void test_fsm_iterator_snapshot(void)
{
    struct store *s = test_open();
    struct store_iter *it;
    struct store_fsm_batch *b;
    uint8_t k[STORE_FSM_KEY_MAX], lo[2], hi[2];
    size_t bad = 0;
    put_rows(s, 0, 256 * 4); /* 4 rows in each hash slot */
    store_put_u16(lo, 10);
    store_put_u16(hi, 12);
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, lo, 2, hi, 2, &it), STORE_OK);
    /* Writes after the iterator was created: one row deleted, two added in the range. */
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    store_fsm_batch_delete(b, k, row_key(k, 10));
    store_fsm_batch_put(b, k, row_key(k, 10 + 256 * 10), "n", 1);
    store_fsm_batch_put(b, k, row_key(k, 11 + 256 * 10), "n", 1);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    CU_ASSERT_EQUAL(iter_count(it, lo, 2, hi, 2, &bad), 8);
    store_iter_free(it);
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, lo, 2, hi, 2, &it), STORE_OK);
    CU_ASSERT_EQUAL(iter_count(it, lo, 2, hi, 2, &bad), 9);
    store_iter_free(it);
    CU_ASSERT_EQUAL(bad, 0);
    store_fsm_batch_free(b);
    test_close(s);
}

/* store_fsm_scan callback: counts rows in key order, stops or fails at row `stop_at`. */
struct scan_count {
    size_t n, stop_at;
    int stop_rc;
    uint8_t prev[STORE_FSM_KEY_MAX];
    size_t prevl;
    size_t out_of_order;
};

static int scan_count_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct scan_count *c = arg;
    (void)v;
    (void)vl;
    int cmp = memcmp(c->prev, k, kl < c->prevl ? kl : c->prevl);
    if (c->n > 0 && (cmp > 0 || (cmp == 0 && c->prevl >= kl)))
        c->out_of_order++; /* not strictly after the previous key */
    memcpy(c->prev, k, kl);
    c->prevl = kl;
    if (++c->n == c->stop_at)
        return c->stop_rc;
    return 0;
}

static void test_fsm_scan_stop_and_error(void)
{
    struct store *s = test_open();
    uint8_t lo[2], hi[2];
    put_rows(s, 0, 256 * 4); /* 4 rows in each hash slot */
    store_put_u16(lo, 10);
    store_put_u16(hi, 13);
    struct scan_count all = {0};
    CU_ASSERT_EQUAL(store_fsm_scan(s, lo, 2, hi, 2, scan_count_row, &all), STORE_OK);
    CU_ASSERT_EQUAL(all.n, 12); /* hash slots 10, 11, 12 */
    CU_ASSERT_EQUAL(all.out_of_order, 0);
    struct scan_count stop = {.stop_at = 5, .stop_rc = STORE_SCAN_STOP};
    CU_ASSERT_EQUAL(store_fsm_scan(s, lo, 2, hi, 2, scan_count_row, &stop), STORE_OK);
    CU_ASSERT_EQUAL(stop.n, 5);
    struct scan_count fail = {.stop_at = 2, .stop_rc = STORE_ECORRUPT};
    CU_ASSERT_EQUAL(store_fsm_scan(s, lo, 2, hi, 2, scan_count_row, &fail), STORE_ECORRUPT);
    CU_ASSERT_EQUAL(fail.n, 2);
    struct scan_count none = {0};
    CU_ASSERT_EQUAL(store_fsm_scan(s, hi, 2, lo, 2, scan_count_row, &none), STORE_OK);
    CU_ASSERT_EQUAL(none.n, 0);
    test_close(s);
}

void test_fsm_register(CU_pSuite suite)
{
    TEST_ADD(suite, test_fsm_scan_stop_and_error);
    TEST_ADD(suite, test_fsm_put_get_delete);
    TEST_ADD(suite, test_fsm_delete_range);
    TEST_ADD(suite, test_fsm_applied_with_batch);
    TEST_ADD(suite, test_fsm_iterator_order_and_bounds);
    TEST_ADD(suite, test_fsm_iterator_snapshot);
}
