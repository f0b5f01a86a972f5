/* capture_test.c - unit tests for service/backup/capture.c: the replica order and the paged group
 * reader. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "store/keys.h"

static void expect_order(const uint64_t *peers, size_t n, uint64_t self, uint64_t leader,
                         const uint64_t *want)
{
    uint64_t out[8] = {0};
    CU_ASSERT_EQUAL(backup_source_order(peers, n, self, leader, out), n);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(out[i], want[i]);
}

static void test_source_order(void)
{
    const uint64_t p3[] = {1, 2, 3};
    expect_order(p3, 3, 2, 1, (const uint64_t[]){2, 3, 1}); /* self follows: self first */
    expect_order(p3, 3, 1, 1, (const uint64_t[]){2, 3, 1}); /* self leads: followers, then self */
    expect_order(p3, 3, 4, 2, (const uint64_t[]){1, 3, 2}); /* no replica here: leader last */
    expect_order(p3, 3, 3, 0, (const uint64_t[]){3, 1, 2}); /* leader unknown: self first */
    expect_order(p3, 3, 4, 0, (const uint64_t[]){1, 2, 3});
    expect_order(p3, 3, 2, 9, (const uint64_t[]){2, 1, 3}); /* a leader outside the peers */
    const uint64_t p1[] = {5};
    expect_order(p1, 1, 5, 5, (const uint64_t[]){5}); /* one replica: the leader it is */
    expect_order(p1, 1, 1, 5, (const uint64_t[]){5});
    uint64_t out[1];
    CU_ASSERT_EQUAL(backup_source_order(NULL, 0, 1, 1, out), 0);
}

/* Group 3 owns hash slots 0, 7 and 255; rows of slot 8 (another group's) must not be read. */
static struct store *reader_store(unsigned rows_per_slot)
{
    struct store *s = NULL;
    CU_ASSERT_FATAL(store_open_memory(&s) == STORE_OK);
    struct store_fsm_batch *b;
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    const unsigned slots[] = {0, 7, 8, 255};
    uint8_t k[STORE_FSM_KEY_MAX];
    char pk[32], v[64];
    for (size_t i = 0; i < 4; i++)
        for (unsigned r = 0; r < rows_per_slot; r++) {
            int n = snprintf(pk, sizeof(pk), "s%03u-r%04u", slots[i], r);
            int vl = snprintf(v, sizeof(v), "value of %s", pk);
            store_fsm_batch_put(b, k, store_key_fsm(k, (uint16_t)slots[i], 1, pk, (size_t)n), v,
                                (size_t)vl);
        }
    uint8_t owned[1 + 32] = {STORE_VALUE_VERSION};
    owned[1 + 0] |= 1u << 0;
    owned[1 + 0] |= 1u << 7;
    owned[1 + 31] |= 1u << 7;
    uint8_t mk[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(mk, 3, 1 /* OWNED */);
    store_fsm_batch_put(b, mk, sizeof(mk), owned, sizeof(owned));
    store_fsm_batch_set_applied(b, 3, 42);
    store_fsm_batch_set_applied(b, 4, 7); /* the next group's records: not group 3's */
    CU_ASSERT_FATAL(store_fsm_write(s, b, false) == STORE_OK);
    store_fsm_batch_free(b);
    return s;
}

struct seen {
    unsigned rows, slot_rows[256], meta_rows, foreign, out_of_order;
    uint8_t last[STORE_FSM_KEY_MAX];
    size_t last_len;
    size_t page_bytes;
};

static int seen_row(void *arg, const void *key, size_t kl, const void *v, size_t vl)
{
    struct seen *s = arg;
    const uint8_t *k = key;
    size_t n = kl < s->last_len ? kl : s->last_len;
    int c = memcmp(s->last, k, n);
    if (s->last_len && (c > 0 || (c == 0 && s->last_len >= kl)))
        s->out_of_order++;
    memcpy(s->last, k, kl);
    s->last_len = kl;
    s->rows++;
    s->page_bytes += kl + vl;
    uint16_t hs = store_get_u16(k);
    if (hs == 0xFFFF) {
        if (store_get_u32(k + 2) == 3)
            s->meta_rows++;
        else
            s->foreign++;
    } else if (hs == 0 || hs == 7 || hs == 255) {
        s->slot_rows[hs]++;
    } else {
        s->foreign++;
    }
    return 0;
}

static void test_reader_pages(void)
{
    struct store *st = reader_store(50);
    struct store_fsm_snap *sn;
    CU_ASSERT_FATAL(store_fsm_snap_new(st, &sn) == STORE_OK);
    struct backup_group_reader *r = malloc(sizeof(*r));
    char err[128];
    CU_ASSERT_FATAL(backup_group_reader_init(r, sn, 3, err, sizeof(err)) == BACKUP_OK);
    struct seen s;
    memset(&s, 0, sizeof(s));
    unsigned pages = 0;
    size_t max = 300; /* a few rows per page; pages cross slot ranges */
    while (!r->done && pages < 1000) {
        s.page_bytes = 0;
        CU_ASSERT_EQUAL(backup_group_reader_next(r, max, seen_row, &s), STORE_OK);
        CU_ASSERT(s.page_bytes < max + 64); /* the budget plus at most one row */
        pages++;
    }
    CU_ASSERT(r->done);
    CU_ASSERT(pages > 10);
    CU_ASSERT_EQUAL(s.slot_rows[0], 50);
    CU_ASSERT_EQUAL(s.slot_rows[7], 50);
    CU_ASSERT_EQUAL(s.slot_rows[255], 50);
    CU_ASSERT_EQUAL(s.meta_rows, 2); /* the applied index and the OWNED record */
    CU_ASSERT_EQUAL(s.foreign, 0);
    CU_ASSERT_EQUAL(s.out_of_order, 0);
    CU_ASSERT_EQUAL(s.rows, 152);
    /* one more call after the end passes nothing */
    unsigned before = s.rows;
    CU_ASSERT_EQUAL(backup_group_reader_next(r, max, seen_row, &s), STORE_OK);
    CU_ASSERT_EQUAL(s.rows, before);
    /* a bad OWNED record is named */
    uint8_t mk[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(mk, 5, 1);
    struct store_fsm_batch *b;
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    store_fsm_batch_put(b, mk, sizeof(mk), "\x01\x02", 2);
    CU_ASSERT_EQUAL(store_fsm_write(st, b, false), STORE_OK);
    store_fsm_batch_free(b);
    struct store_fsm_snap *sn2;
    CU_ASSERT_FATAL(store_fsm_snap_new(st, &sn2) == STORE_OK);
    CU_ASSERT_EQUAL(backup_group_reader_init(r, sn2, 5, err, sizeof(err)), BACKUP_ECORRUPT);
    CU_ASSERT(strstr(err, "group 5 owned hash slots") != NULL);
    /* a group with no OWNED record: its own records only */
    memset(&s, 0, sizeof(s));
    CU_ASSERT_FATAL(backup_group_reader_init(r, sn, 4, err, sizeof(err)) == BACKUP_OK);
    while (!r->done)
        CU_ASSERT_EQUAL(backup_group_reader_next(r, 1 << 20, seen_row, &s), STORE_OK);
    CU_ASSERT_EQUAL(s.rows, 1);
    free(r);
    store_fsm_snap_free(sn2);
    store_fsm_snap_free(sn);
    store_close(st);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("backup_capture", NULL, NULL);
    CU_add_test(s, "source order", test_source_order);
    CU_add_test(s, "reader pages", test_reader_pages);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
