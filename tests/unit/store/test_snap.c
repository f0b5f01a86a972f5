/* test_snap.c - store unit tests of fsm snapshots: isolation from later writes, bounded chunked
 * scans. */
#include "store_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t snap_row_key(uint8_t *out, unsigned i)
{
    char pk[32];
    int n = snprintf(pk, sizeof(pk), "k%06u", i);
    return store_key_fsm(out, (uint16_t)(i % 256), 1, pk, (size_t)n);
}

static void snap_put_rows(struct store *s, unsigned lo, unsigned hi, uint32_t group,
                          uint64_t applied)
{
    struct store_fsm_batch *b;
    uint8_t k[STORE_FSM_KEY_MAX];
    char v[32];
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    for (unsigned i = lo; i < hi; i++) {
        int vl = snprintf(v, sizeof(v), "v%u", i);
        store_fsm_batch_put(b, k, snap_row_key(k, i), v, (size_t)vl);
    }
    store_fsm_batch_set_applied(b, group, applied);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    store_fsm_batch_free(b);
}

/* Collects a scan: rows in order, bytes of the chunk, keys checked ascending. */
struct snap_seen {
    unsigned rows, chunk_rows, out_of_order;
    uint8_t last[STORE_FSM_KEY_MAX];
    size_t last_len;
    unsigned stop_at; /* 0 = never */
};

static int snap_cb(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct snap_seen *s = arg;
    if (s->stop_at && s->rows + 1 == s->stop_at)
        return 77;
    size_t n = kl < s->last_len ? kl : s->last_len;
    int c = memcmp(s->last, k, n);
    if (s->last_len && (c > 0 || (c == 0 && s->last_len >= kl)))
        s->out_of_order++; /* not strictly ascending bytewise */
    memcpy(s->last, k, kl);
    s->last_len = kl;
    s->rows++;
    s->chunk_rows++;
    (void)v;
    (void)vl;
    return 0;
}

/* Scans [lo, hi) of sn in chunks of max_bytes; returns the rows, *chunks the calls made. */
static unsigned snap_scan_all(struct store_fsm_snap *sn, const void *lo, size_t lol, const void *hi,
                              size_t hil, size_t max_bytes, unsigned *chunks,
                              struct snap_seen *seen)
{
    struct store_fsm_snap_cursor *c = malloc(sizeof(*c));
    CU_ASSERT_EQUAL_FATAL(store_fsm_snap_cursor_init(c, lo, lol, hi, hil), STORE_OK);
    *chunks = 0;
    while (!c->done && *chunks < 100000) {
        seen->chunk_rows = 0;
        CU_ASSERT_EQUAL_FATAL(store_fsm_snap_scan(sn, c, max_bytes, snap_cb, seen), STORE_OK);
        (*chunks)++;
        if (!c->done)
            CU_ASSERT(seen->chunk_rows >= 1);
    }
    free(c);
    return seen->rows;
}

static void test_snap_isolation(void)
{
    struct store *s = test_open();
    struct store_fsm_snap *sn;
    struct store_fsm_batch *b;
    uint8_t k[STORE_FSM_KEY_MAX], lo[2], hi[2];
    uint64_t applied = 0;
    void *v = NULL;
    size_t vl = 0;
    unsigned chunks;
    struct snap_seen *seen = calloc(1, sizeof(*seen));

    snap_put_rows(s, 0, 256 * 4, 3, 5); /* 4 rows per hash slot, group 3 applied 5 */
    CU_ASSERT_EQUAL_FATAL(store_fsm_snap_new(s, &sn), STORE_OK);
    /* After the snapshot: row 10 deleted, two rows added in hash slots 10..11, applied 6. */
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == STORE_OK);
    store_fsm_batch_delete(b, k, snap_row_key(k, 10));
    store_fsm_batch_put(b, k, snap_row_key(k, 10 + 256 * 10), "n", 1);
    store_fsm_batch_put(b, k, snap_row_key(k, 11 + 256 * 10), "n", 1);
    store_fsm_batch_set_applied(b, 3, 6);
    CU_ASSERT_EQUAL(store_fsm_write(s, b, false), STORE_OK);
    store_fsm_batch_free(b);

    CU_ASSERT_EQUAL(store_fsm_snap_applied(sn, 3, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 5);
    CU_ASSERT_EQUAL(store_fsm_applied(s, 3, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 6);
    CU_ASSERT_EQUAL(store_fsm_snap_applied(sn, 4, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 0);
    CU_ASSERT_EQUAL(store_fsm_snap_get(sn, k, snap_row_key(k, 10), &v, &vl), STORE_OK);
    CU_ASSERT(vl == 3 && memcmp(v, "v10", 3) == 0);
    free(v);
    CU_ASSERT_EQUAL(store_fsm_snap_get(sn, k, snap_row_key(k, 10 + 256 * 10), &v, &vl),
                    STORE_ENOTFOUND);

    store_put_u16(lo, 10);
    store_put_u16(hi, 12);
    /* ~15 bytes per row: 20-byte chunks hold 2 rows, so the 8 rows take several chunks */
    CU_ASSERT_EQUAL(snap_scan_all(sn, lo, 2, hi, 2, 20, &chunks, seen), 8);
    CU_ASSERT(chunks >= 4);
    CU_ASSERT_EQUAL(seen->out_of_order, 0);
    store_fsm_snap_free(sn);

    /* A new snapshot sees the writes. */
    memset(seen, 0, sizeof(*seen));
    CU_ASSERT_EQUAL_FATAL(store_fsm_snap_new(s, &sn), STORE_OK);
    CU_ASSERT_EQUAL(snap_scan_all(sn, lo, 2, hi, 2, 1 << 20, &chunks, seen), 9);
    CU_ASSERT_EQUAL(chunks, 1);
    store_fsm_snap_free(sn);
    free(seen);
    test_close(s);
}

static void test_snap_whole_db_one_row_chunks(void)
{
    struct store *s = test_open();
    struct store_fsm_snap *sn;
    unsigned chunks;
    struct snap_seen *seen = calloc(1, sizeof(*seen));
    snap_put_rows(s, 0, 3000, 1, 1);
    CU_ASSERT_EQUAL_FATAL(store_fsm_snap_new(s, &sn), STORE_OK);
    /* every row and the applied-index record, one per chunk */
    CU_ASSERT_EQUAL(snap_scan_all(sn, NULL, 0, NULL, 0, 1, &chunks, seen), 3001);
    CU_ASSERT(chunks == 3001 || chunks == 3002);
    CU_ASSERT_EQUAL(seen->out_of_order, 0);

    /* a callback's non-zero value stops the scan and comes back as is */
    struct store_fsm_snap_cursor *c = malloc(sizeof(*c));
    memset(seen, 0, sizeof(*seen));
    seen->stop_at = 5;
    CU_ASSERT_EQUAL(store_fsm_snap_cursor_init(c, NULL, 0, NULL, 0), STORE_OK);
    CU_ASSERT_EQUAL(store_fsm_snap_scan(sn, c, 1 << 20, snap_cb, seen), 77);
    CU_ASSERT_EQUAL(seen->rows, 4);
    uint8_t big[STORE_FSM_KEY_MAX + 1] = {0};
    CU_ASSERT_EQUAL(store_fsm_snap_cursor_init(c, big, sizeof(big), NULL, 0), STORE_EINVAL);
    free(c);
    store_fsm_snap_free(sn);
    free(seen);
    test_close(s);
}

void test_snap_register(CU_pSuite suite)
{
    TEST_ADD(suite, test_snap_isolation);
    TEST_ADD(suite, test_snap_whole_db_one_row_chunks);
}
