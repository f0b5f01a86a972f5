/* test_misc.c - store unit tests: key encodings, errors, open/reopen, batch accounting, threads. */
#include "store_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static int sign(int v)
{
    return (v > 0) - (v < 0);
}

static void test_keys_big_endian_order(void)
{
    uint8_t a[8], b[8];
    for (int i = 0; i < 20000; i++) {
        uint64_t x = rng_next(), y = rng_next();
        if (i % 4 == 1)
            y = x + 1; /* neighbours, including carries */
        if (i % 4 == 2)
            x >>= rng_next() % 64, y >>= rng_next() % 64;
        store_put_u64(a, x);
        store_put_u64(b, y);
        CU_ASSERT_EQUAL_FATAL(sign(memcmp(a, b, 8)), (x > y) - (x < y));
        CU_ASSERT_EQUAL_FATAL(store_get_u64(a), x);
        store_put_u32(a, (uint32_t)x);
        store_put_u32(b, (uint32_t)y);
        CU_ASSERT_EQUAL_FATAL(sign(memcmp(a, b, 4)),
                              ((uint32_t)x > (uint32_t)y) - ((uint32_t)x < (uint32_t)y));
        CU_ASSERT_EQUAL_FATAL(store_get_u32(a), (uint32_t)x);
        store_put_u16(a, (uint16_t)x);
        store_put_u16(b, (uint16_t)y);
        CU_ASSERT_EQUAL_FATAL(sign(memcmp(a, b, 2)),
                              ((uint16_t)x > (uint16_t)y) - ((uint16_t)x < (uint16_t)y));
        CU_ASSERT_EQUAL_FATAL(store_get_u16(a), (uint16_t)x);
    }
}

static void test_keys_layout(void)
{
    uint8_t k[STORE_FSM_KEY_MAX + 8];
    static uint8_t pk[STORE_FSM_PK_MAX + 1];
    const uint8_t entry[] = {0, 0, 1, 2, 1, 0, 0, 0, 0, 0, 0, 1, 0};
    store_key_log_entry(k, 258, 256);
    CU_ASSERT(memcmp(k, entry, sizeof(entry)) == 0);
    const uint8_t hs[] = {0xAB, 0xCD, 0xEF, 0x01, 2};
    store_key_log(k, 0xABCDEF01u, STORE_LOG_KIND_HARD_STATE);
    CU_ASSERT(memcmp(k, hs, sizeof(hs)) == 0);
    const uint8_t row[] = {0x00, 0xFF, 3, 'a', 'b'};
    CU_ASSERT_EQUAL(store_key_fsm(k, 255, 3, "ab", 2), 5);
    CU_ASSERT(memcmp(k, row, sizeof(row)) == 0);
    CU_ASSERT_EQUAL(store_key_fsm(k, 0, 0, NULL, 0), 3);
    CU_ASSERT_EQUAL(store_key_fsm(k, 1, 1, pk, STORE_FSM_PK_MAX), STORE_FSM_KEY_MAX);
    k[0] = 0x55;
    CU_ASSERT_EQUAL(store_key_fsm(k, 1, 1, pk, STORE_FSM_PK_MAX + 1), 0);
    CU_ASSERT_EQUAL(store_key_fsm(k, STORE_HASH_SLOT_GROUP, 1, pk, 1), 0);
    CU_ASSERT_EQUAL(k[0], 0x55); /* nothing written on refusal */
    const uint8_t meta[] = {0xFF, 0xFF, 0, 0, 0, 7, 1};
    store_key_group_meta(k, 7, 1);
    CU_ASSERT(memcmp(k, meta, sizeof(meta)) == 0);
    store_key_group_applied(k, 7);
    CU_ASSERT(memcmp(k, meta, 6) == 0); /* the applied key prefixes the group's metadata */
    /* Every row key sorts before every group record. */
    CU_ASSERT_EQUAL(store_key_fsm(k, 255, 255, pk, STORE_FSM_PK_MAX), STORE_FSM_KEY_MAX);
    CU_ASSERT(memcmp(k, meta, 2) < 0);
}

static void test_errors_strerror(void)
{
    CU_ASSERT_STRING_EQUAL(store_strerror(STORE_OK), "ok");
    CU_ASSERT_STRING_EQUAL(store_strerror(STORE_ECORRUPT), "stored data is corrupt");
    CU_ASSERT_STRING_EQUAL(store_strerror(STORE_ELIMIT), "limit reached");
    CU_ASSERT_STRING_EQUAL(store_strerror(-5), "unknown store error");
    CU_ASSERT_STRING_EQUAL(store_strerror(STORE_ERR_COUNT_), "unknown store error");
    struct store *s = test_open();
    CU_ASSERT_STRING_EQUAL(store_errmsg(s), "");
    test_close(s);
}

static void test_open_errors(void)
{
    if (test_backend != TEST_LEVELDB)
        return; /* the memory backend has no files */
    struct store *s = test_open(), *t = NULL;
    char path[256], err[256];
    /* The same directory twice: LevelDB's lock refuses the second open. */
    err[0] = 'x';
    CU_ASSERT_EQUAL(store_open(test_dir(), NULL, &t, err, sizeof(err)), STORE_EIO);
    CU_ASSERT(strstr(err, "store open: ") == err && strstr(err, "lock") != NULL);
    /* A data directory below a regular file. */
    snprintf(path, sizeof(path), "%s/raftlog/CURRENT/sub", test_dir());
    CU_ASSERT_EQUAL(store_open(path, NULL, &t, err, sizeof(err)), STORE_EIO);
    CU_ASSERT(strstr(err, "mkdir") != NULL);
    CU_ASSERT_EQUAL(store_open("", NULL, &t, NULL, 0), STORE_EINVAL);
    CU_ASSERT(t == NULL);
    test_close(s);
}

static void test_reopen_keeps_everything(void)
{
    struct store *s = test_open();
    struct store_fsm_batch *fb;
    struct store_group_state gs;
    uint8_t k[STORE_FSM_KEY_MAX];
    test_put_entries(s, 1, 1, 101);
    test_put_entries(s, 2, 5, 8);
    CU_ASSERT_FATAL(store_fsm_batch_new(&fb) == STORE_OK);
    for (unsigned i = 0; i < 300; i++) {
        char pk[16];
        int n = snprintf(pk, sizeof(pk), "row%u", i);
        store_fsm_batch_put(fb, k, store_key_fsm(k, (uint16_t)(i % 256), 2, pk, (size_t)n), pk,
                            (size_t)n);
    }
    store_fsm_batch_set_applied(fb, 1, 100);
    uint8_t meta[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(meta, 1, 1);
    store_fsm_batch_put(fb, meta, sizeof(meta), "ranges", 6);
    CU_ASSERT_EQUAL(store_fsm_write(s, fb, false), STORE_OK); /* unsynced: a clean close keeps it */
    store_fsm_batch_free(fb);

    s = test_reopen(s);
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 1, &gs), STORE_OK);
    CU_ASSERT(gs.first_index == 1 && gs.last_index == 100 && gs.hs.commit == 1);
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 2, &gs), STORE_OK);
    CU_ASSERT(gs.first_index == 5 && gs.last_index == 7);
    uint64_t applied = 0;
    CU_ASSERT_EQUAL(store_fsm_applied(s, 1, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, 100);
    void *v = NULL;
    size_t vl = 0;
    CU_ASSERT_EQUAL_FATAL(store_fsm_get(s, meta, sizeof(meta), &v, &vl), STORE_OK);
    CU_ASSERT(vl == 6 && memcmp(v, "ranges", 6) == 0);
    free(v);
    struct store_iter *it;
    CU_ASSERT_EQUAL_FATAL(store_fsm_iter_new(s, NULL, 0, meta, 2, &it), STORE_OK);
    size_t rows = 0;
    for (; store_iter_valid(it); store_iter_next(it))
        rows++;
    CU_ASSERT_EQUAL(rows, 300);
    store_iter_free(it);
    test_close(s);
}

static void test_batch_accounting(void)
{
    struct store_log_batch *lb;
    struct store_fsm_batch *fb;
    CU_ASSERT_FATAL(store_log_batch_new(&lb) == STORE_OK);
    CU_ASSERT_FATAL(store_fsm_batch_new(&fb) == STORE_OK);
    struct store_entry e = {.index = 1, .term = 1, .data = "0123456789", .len = 10};
    store_log_batch_put_entry(lb, 1, &e);
    CU_ASSERT_EQUAL(store_log_batch_bytes(lb), 13 + 10 + 10);
    struct store_hard_state hs = {0};
    store_log_batch_put_hard_state(lb, 1, &hs);
    CU_ASSERT_EQUAL(store_log_batch_bytes(lb), 33 + 5 + 25);
    store_log_batch_delete_entries(lb, 1, 10, 12);
    CU_ASSERT_EQUAL(store_log_batch_bytes(lb), 63 + 26);
    CU_ASSERT_EQUAL(store_log_batch_count(lb), 4);
    store_log_batch_clear(lb);
    CU_ASSERT(store_log_batch_bytes(lb) == 0 && store_log_batch_count(lb) == 0);
    store_fsm_batch_put(fb, "abc", 3, "de", 2);
    store_fsm_batch_delete(fb, "xy", 2);
    store_fsm_batch_set_applied(fb, 1, 1);
    CU_ASSERT_EQUAL(store_fsm_batch_bytes(fb), 5 + 2 + 6 + 9);
    CU_ASSERT_EQUAL(store_fsm_batch_count(fb), 3);
    store_fsm_batch_delete(fb, "", 0);
    CU_ASSERT_EQUAL(store_fsm_batch_error(fb), STORE_EINVAL);
    CU_ASSERT_EQUAL(store_fsm_batch_count(fb), 3);
    store_fsm_batch_clear(fb);
    CU_ASSERT_EQUAL(store_fsm_batch_error(fb), STORE_OK);
    store_log_batch_free(lb);
    store_fsm_batch_free(fb);
    store_log_batch_free(NULL);
    store_fsm_batch_free(NULL);
    store_close(NULL);
}

/* ---- three threads: log writer, fsm writer, reader ---- */

enum { CONC_BATCHES = 200, CONC_GROUPS = 4, CONC_READS_MAX = 200000, CONC_WAIT_MAX = 1000000 };

struct conc {
    struct store *s;
    int log_rc, fsm_rc;
    _Atomic int writers_done;
    _Atomic int reader_started; /* writers start after the reader, so the three overlap */
    size_t reads, violations;
};

static void conc_wait_reader(struct conc *c)
{
    for (int i = 0; i < CONC_WAIT_MAX && !c->reader_started; i++)
        sched_yield();
}

static void *conc_log_writer(void *arg)
{
    struct conc *c = arg;
    conc_wait_reader(c);
    struct store_log_batch *b;
    char data[64];
    if (store_log_batch_new(&b) != STORE_OK) {
        c->log_rc = STORE_ENOMEM;
        goto out;
    }
    for (unsigned i = 0; i < CONC_BATCHES && c->log_rc == STORE_OK; i++) {
        uint32_t group = i % CONC_GROUPS + 1;
        uint64_t index = i / CONC_GROUPS + 1;
        struct store_entry e = {
            .index = index, .term = index / 10 + 1, .type = (uint8_t)(index % 3), .data = data};
        e.len = test_entry_data(data, sizeof(data), group, index);
        store_log_batch_clear(b);
        store_log_batch_put_entry(b, group, &e);
        struct store_hard_state hs = {.term = 1, .vote = 1, .commit = index};
        store_log_batch_put_hard_state(b, group, &hs);
        c->log_rc = store_log_write(c->s, b, i % 50 == 0);
    }
    store_log_batch_free(b);
out:
    c->writers_done++;
    return NULL;
}

static void *conc_fsm_writer(void *arg)
{
    struct conc *c = arg;
    conc_wait_reader(c);
    struct store_fsm_batch *b;
    uint8_t k[STORE_FSM_KEY_MAX];
    if (store_fsm_batch_new(&b) != STORE_OK) {
        c->fsm_rc = STORE_ENOMEM;
        goto out;
    }
    for (unsigned i = 0; i < CONC_BATCHES && c->fsm_rc == STORE_OK; i++) {
        char pk[16];
        int n = snprintf(pk, sizeof(pk), "c%05u", i);
        store_fsm_batch_clear(b);
        store_fsm_batch_put(b, k, store_key_fsm(k, 9, 1, pk, (size_t)n), pk, (size_t)n);
        store_fsm_batch_set_applied(b, 1, i + 1);
        c->fsm_rc = store_fsm_write(c->s, b, false);
    }
    store_fsm_batch_free(b);
out:
    c->writers_done++;
    return NULL;
}

/* One read round: the applied index and its row come from one batch, so both must be seen;
 * an fsm iterator over hash slot 9 sees at least `applied` rows; log bounds only grow. */
static void conc_read_once(struct conc *c, uint64_t *last_seen)
{
    uint8_t lo[2], hi[2];
    uint64_t applied = 0;
    if (store_fsm_applied(c->s, 1, &applied) != STORE_OK) {
        c->violations++;
        return;
    }
    if (applied > 0) {
        uint8_t k[STORE_FSM_KEY_MAX];
        char pk[16];
        int n = snprintf(pk, sizeof(pk), "c%05u", (unsigned)(applied - 1));
        void *v = NULL;
        size_t vl;
        if (store_fsm_get(c->s, k, store_key_fsm(k, 9, 1, pk, (size_t)n), &v, &vl) != STORE_OK)
            c->violations++;
        free(v);
    }
    store_put_u16(lo, 9);
    store_put_u16(hi, 10);
    struct store_iter *it;
    if (store_fsm_iter_new(c->s, lo, 2, hi, 2, &it) == STORE_OK) {
        uint64_t rows = 0;
        for (; store_iter_valid(it); store_iter_next(it))
            rows++;
        if (rows < applied || store_iter_status(it) != STORE_OK)
            c->violations++;
        store_iter_free(it);
    } else {
        c->violations++;
    }
    struct store_group_state gs;
    int rc = store_log_load(c->s, 1, &gs);
    if (rc == STORE_OK) {
        if (gs.last_index < *last_seen || gs.first_index != 1)
            c->violations++;
        *last_seen = gs.last_index;
    } else if (rc != STORE_ENOTFOUND) {
        c->violations++;
    }
}

static void *conc_reader(void *arg)
{
    struct conc *c = arg;
    uint64_t last_seen = 0;
    c->reader_started = 1;
    do {
        conc_read_once(c, &last_seen);
        c->reads++;
        /* at least two rounds: how many overlap the writes is up to the scheduler (a loaded
         * machine may finish both writers during the first round) */
    } while ((c->writers_done < 2 || c->reads < 2) && c->reads < CONC_READS_MAX);
    return NULL;
}

static void test_concurrent_writers_and_reader(void)
{
    struct conc c = {.s = test_open()};
    pthread_t t[3];
    CU_ASSERT_FATAL(pthread_create(&t[0], NULL, conc_log_writer, &c) == 0);
    CU_ASSERT_FATAL(pthread_create(&t[1], NULL, conc_fsm_writer, &c) == 0);
    CU_ASSERT_FATAL(pthread_create(&t[2], NULL, conc_reader, &c) == 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(c.log_rc, STORE_OK);
    CU_ASSERT_EQUAL(c.fsm_rc, STORE_OK);
    CU_ASSERT_EQUAL(c.violations, 0);
    CU_ASSERT(c.reads > 1);
    printf(" [%zu read rounds during the writes] ", c.reads);
    for (uint32_t g = 1; g <= CONC_GROUPS; g++) {
        struct store_group_state gs;
        CU_ASSERT_EQUAL_FATAL(store_log_load(c.s, g, &gs), STORE_OK);
        CU_ASSERT(gs.first_index == 1 && gs.last_index == CONC_BATCHES / CONC_GROUPS);
        struct test_collect col = {.group = g};
        CU_ASSERT_EQUAL(store_log_iterate(c.s, g, 1, UINT64_MAX, test_collect_cb, &col), STORE_OK);
        CU_ASSERT(col.n == CONC_BATCHES / CONC_GROUPS && col.bad == 0);
    }
    uint64_t applied = 0;
    CU_ASSERT_EQUAL(store_fsm_applied(c.s, 1, &applied), STORE_OK);
    CU_ASSERT_EQUAL(applied, CONC_BATCHES);
    test_close(c.s);
}

void test_misc_register(CU_pSuite suite)
{
    TEST_ADD(suite, test_keys_big_endian_order);
    TEST_ADD(suite, test_keys_layout);
    TEST_ADD(suite, test_errors_strerror);
    TEST_ADD(suite, test_open_errors);
    TEST_ADD(suite, test_reopen_keeps_everything);
    TEST_ADD(suite, test_batch_accounting);
    TEST_ADD(suite, test_concurrent_writers_and_reader);
}
