/* test_log.c - store unit tests of the raftlog: round trips, batches, deletes, gaps, corruption. */
#include "store_test.h"

#include <leveldb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct store_conf_state conf_of(uint32_t nv, uint32_t nl, uint64_t base)
{
    struct store_conf_state cs = {.n_voters = nv, .n_learners = nl};
    for (uint32_t i = 0; i < nv && i < STORE_MEMBERS_MAX; i++)
        cs.voters[i] = base + i;
    for (uint32_t i = 0; i < nl && i < STORE_MEMBERS_MAX; i++)
        cs.learners[i] = (base << 8) + i;
    return cs;
}

static bool conf_eq(const struct store_conf_state *a, const struct store_conf_state *b)
{
    if (a->n_voters != b->n_voters || a->n_learners != b->n_learners)
        return false;
    return memcmp(a->voters, b->voters, a->n_voters * sizeof(uint64_t)) == 0 &&
           memcmp(a->learners, b->learners, a->n_learners * sizeof(uint64_t)) == 0;
}

struct entries_check {
    struct store_entry want[3];
    size_t seen, bad;
};

static int entries_check_cb(void *arg, const struct store_entry *e)
{
    struct entries_check *c = arg;
    if (c->seen >= 3)
        return -1;
    const struct store_entry *w = &c->want[c->seen++];
    if (e->index != w->index || e->term != w->term || e->type != w->type || e->len != w->len ||
        (w->len && memcmp(e->data, w->data, w->len) != 0))
        c->bad++;
    return 0;
}

static void test_log_round_trip(void)
{
    struct store *s = test_open();
    struct store_log_batch *b;
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    static uint8_t big[70000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 7);
    struct store_entry e1 = {.index = 1, .term = 3, .type = 0, .data = NULL, .len = 0};
    struct store_entry e2 = {.index = 2, .term = 3, .type = 2, .data = big, .len = sizeof(big)};
    struct store_entry e3 = {.index = 3, .term = UINT64_MAX, .type = 255, .data = "x", .len = 1};
    store_log_batch_put_entry(b, 7, &e1);
    store_log_batch_put_entry(b, 7, &e2);
    store_log_batch_put_entry(b, 7, &e3);
    struct store_hard_state hs = {
        .term = UINT64_MAX - 1, .vote = 0x0102030405060708ull, .commit = 2};
    store_log_batch_put_hard_state(b, 7, &hs);
    struct store_conf_state cs = conf_of(STORE_MEMBERS_MAX, 2, 100);
    store_log_batch_put_conf_state(b, 7, &cs);
    struct store_snapshot_meta m = {
        .index = 0xFFFFFFFF01ull, .term = 9, .conf = conf_of(3, STORE_MEMBERS_MAX, 5)};
    store_log_batch_put_snapshot_meta(b, 7, &m);
    CU_ASSERT_EQUAL(store_log_batch_count(b), 6);
    CU_ASSERT(store_log_batch_bytes(b) > sizeof(big));
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_OK);

    s = test_reopen(s);
    struct store_group_state gs;
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 7, &gs), STORE_OK);
    CU_ASSERT(gs.hs.term == hs.term && gs.hs.vote == hs.vote && gs.hs.commit == hs.commit);
    CU_ASSERT(gs.has_conf && conf_eq(&gs.conf, &cs));
    CU_ASSERT(gs.has_snapshot && gs.snapshot.index == m.index && gs.snapshot.term == m.term);
    CU_ASSERT(conf_eq(&gs.snapshot.conf, &m.conf));
    CU_ASSERT_EQUAL(gs.first_index, 1);
    CU_ASSERT_EQUAL(gs.last_index, 3);

    /* Check every field of the iterated entries. */
    struct entries_check ctx = {.want = {e1, e2, e3}};
    CU_ASSERT_EQUAL(store_log_iterate(s, 7, 0, UINT64_MAX, entries_check_cb, &ctx), STORE_OK);
    CU_ASSERT_EQUAL(ctx.seen, 3);
    CU_ASSERT_EQUAL(ctx.bad, 0);

    /* A group without a hard state is not found; one of its neighbours is untouched. */
    CU_ASSERT_EQUAL(store_log_load(s, 6, &gs), STORE_ENOTFOUND);
    CU_ASSERT_EQUAL(store_log_load(s, 8, &gs), STORE_ENOTFOUND);
    store_log_batch_free(b);
    test_close(s);
}

static void test_log_hard_state_only(void)
{
    struct store *s = test_open();
    struct store_log_batch *b;
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    struct store_hard_state hs = {.term = 1, .vote = 2, .commit = 0};
    store_log_batch_put_hard_state(b, 0, &hs);
    CU_ASSERT_EQUAL(store_log_write(s, b, false), STORE_OK);
    struct store_group_state gs;
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 0, &gs), STORE_OK);
    CU_ASSERT(!gs.has_conf && !gs.has_snapshot);
    CU_ASSERT(gs.first_index == 0 && gs.last_index == 0);
    CU_ASSERT(gs.hs.vote == 2);
    store_log_batch_free(b);
    test_close(s);
}

/* A removed group's keys go, its tombstone stays: put after the delete in one batch, it survives
 * it, and a later removal replaces it. */
static void test_log_tombstone(void)
{
    struct store *s = test_open();
    struct store_log_batch *b;
    struct store_tombstone t;
    CU_ASSERT_EQUAL(store_log_load_tombstone(s, 3, &t), STORE_ENOTFOUND);
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    struct store_hard_state hs = {.term = 4, .vote = 2, .commit = 9};
    store_log_batch_put_hard_state(b, 3, &hs);
    CU_ASSERT_EQUAL(store_log_write(s, b, false), STORE_OK);
    for (uint64_t round = 1; round <= 2; round++) {
        store_log_batch_clear(b);
        store_log_batch_delete_group(s, b, 3);
        struct store_tombstone put = {.term = 4 * round, .vote = 2, .floor_index = 9 * round,
                                      .floor_term = 4 * round};
        store_log_batch_put_tombstone(b, 3, &put);
        CU_ASSERT_EQUAL(store_log_write(s, b, false), STORE_OK);
        struct store_group_state gs;
        CU_ASSERT_EQUAL(store_log_load(s, 3, &gs), STORE_ENOTFOUND); /* no hard state */
        CU_ASSERT_EQUAL_FATAL(store_log_load_tombstone(s, 3, &t), STORE_OK);
        CU_ASSERT(t.term == 4 * round && t.vote == 2 && t.floor_index == 9 * round &&
                  t.floor_term == 4 * round);
    }
    uint32_t *groups = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(store_log_groups(s, &groups, &n), STORE_OK);
    CU_ASSERT_EQUAL(n, 0); /* a tombstone is not a hosted group */
    free(groups);
    store_log_batch_free(b);
    test_close(s);
}

static void test_log_batch_across_groups(void)
{
    enum { GROUPS = 50, ENTRIES = 20 };
    struct store *s = test_open();
    struct store_log_batch *b;
    char data[64];
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    /* Groups in descending order: the store must not care about insertion order. */
    for (uint32_t g = GROUPS; g >= 1; g--) {
        uint32_t group = g * 1000;
        for (uint64_t i = 1; i <= ENTRIES; i++) {
            struct store_entry e = {.index = g + i,
                                    .term = (g + i) / 10 + 1,
                                    .type = (uint8_t)((g + i) % 3),
                                    .data = data};
            e.len = test_entry_data(data, sizeof(data), group, g + i);
            store_log_batch_put_entry(b, group, &e);
        }
        struct store_hard_state hs = {.term = g, .vote = g % 3, .commit = g + 5};
        store_log_batch_put_hard_state(b, group, &hs);
    }
    CU_ASSERT_EQUAL(store_log_batch_count(b), (size_t)GROUPS * (ENTRIES + 1));
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_OK);
    store_log_batch_free(b);

    for (int round = 0; round < 2; round++) {
        uint32_t *groups = NULL;
        size_t n = 0;
        CU_ASSERT_EQUAL_FATAL(store_log_groups(s, &groups, &n), STORE_OK);
        CU_ASSERT_EQUAL_FATAL(n, GROUPS);
        for (size_t i = 0; i < n; i++)
            CU_ASSERT_EQUAL(groups[i], (i + 1) * 1000);
        free(groups);
        for (uint32_t g = 1; g <= GROUPS; g++) {
            struct store_group_state gs;
            CU_ASSERT_EQUAL_FATAL(store_log_load(s, g * 1000, &gs), STORE_OK);
            CU_ASSERT(gs.hs.term == g && gs.hs.commit == g + 5);
            CU_ASSERT(gs.first_index == g + 1 && gs.last_index == g + ENTRIES);
            struct test_collect c = {.group = g * 1000};
            CU_ASSERT_EQUAL(store_log_iterate(s, g * 1000, 0, UINT64_MAX, test_collect_cb, &c),
                            STORE_OK);
            CU_ASSERT(c.n == ENTRIES && c.bad == 0 && c.indexes[0] == g + 1);
        }
        s = test_reopen(s);
    }
    test_close(s);
}

/* Big-endian keys: index 255 < 256 < 65536 and group 1 < 256 < 2^24, with no interleaving. */
static void test_log_key_order(void)
{
    static const uint32_t groups[] = {1, 2, 255, 256, 0x01000000u, UINT32_MAX};
    static const uint64_t indexes[] = {
        1, 2, 255, 256, 257, 65535, 65536, 1ull << 32, (1ull << 56) + 1};
    size_t ni = sizeof(indexes) / sizeof(indexes[0]);
    struct store *s = test_open();
    struct store_log_batch *b;
    char data[64];
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        for (size_t i = ni; i-- > 0;) {
            struct store_entry e = {.index = indexes[i],
                                    .term = indexes[i] / 10 + 1,
                                    .type = (uint8_t)(indexes[i] % 3),
                                    .data = data};
            e.len = test_entry_data(data, sizeof(data), groups[g], indexes[i]);
            store_log_batch_put_entry(b, groups[g], &e);
        }
        struct store_hard_state hs = {.term = 1};
        store_log_batch_put_hard_state(b, groups[g], &hs);
    }
    CU_ASSERT_EQUAL(store_log_write(s, b, false), STORE_OK);
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        /* The indexes are not consecutive: stop after each one to avoid the gap check. */
        for (size_t i = 0; i < ni; i++) {
            struct test_collect c = {.group = groups[g], .stop_after = 1};
            CU_ASSERT_EQUAL(
                store_log_iterate(s, groups[g], indexes[i], UINT64_MAX, test_collect_cb, &c), 42);
            CU_ASSERT(c.n == 1 && c.bad == 0 && c.indexes[0] == indexes[i]);
        }
        struct store_group_state gs;
        CU_ASSERT_EQUAL_FATAL(store_log_load(s, groups[g], &gs), STORE_OK);
        CU_ASSERT_EQUAL(gs.first_index, indexes[0]);
        CU_ASSERT_EQUAL(gs.last_index, indexes[ni - 1]);
    }
    uint32_t *got = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(store_log_groups(s, &got, &n), STORE_OK);
    CU_ASSERT_EQUAL_FATAL(n, sizeof(groups) / sizeof(groups[0]));
    CU_ASSERT(memcmp(got, groups, sizeof(groups)) == 0);
    free(got);
    store_log_batch_free(b);
    test_close(s);
}

static void test_log_iterate_bounds_and_stop(void)
{
    struct store *s = test_open();
    test_put_entries(s, 3, 1, 101);
    test_put_entries(s, 4, 1, 11);
    struct test_collect c = {.group = 3};
    CU_ASSERT_EQUAL(store_log_iterate(s, 3, 10, 20, test_collect_cb, &c), STORE_OK);
    CU_ASSERT(c.n == 10 && c.indexes[0] == 10 && c.indexes[9] == 19 && c.bad == 0);
    memset(&c, 0, sizeof(c));
    c.group = 3;
    c.stop_after = 5;
    CU_ASSERT_EQUAL(store_log_iterate(s, 3, 1, 101, test_collect_cb, &c), 42);
    CU_ASSERT_EQUAL(c.n, 5);
    memset(&c, 0, sizeof(c));
    c.group = 3;
    CU_ASSERT_EQUAL(store_log_iterate(s, 3, 50, 50, test_collect_cb, &c), STORE_OK);
    CU_ASSERT_EQUAL(store_log_iterate(s, 3, 200, 300, test_collect_cb, &c), STORE_OK);
    CU_ASSERT_EQUAL(c.n, 0);
    test_close(s);
}

static void test_log_delete_entries(void)
{
    struct store *s = test_open();
    struct store_log_batch *b;
    struct store_group_state gs;
    test_put_entries(s, 5, 1, 21);
    test_put_entries(s, 6, 1, 21);
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    store_log_batch_delete_entries(b, 5, 1, 11);  /* compaction of a prefix */
    store_log_batch_delete_entries(b, 5, 15, 21); /* truncation of a suffix */
    store_log_batch_delete_entries(b, 5, 9, 9);   /* empty */
    CU_ASSERT_EQUAL(store_log_batch_count(b), 16);
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_OK);
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 5, &gs), STORE_OK);
    CU_ASSERT(gs.first_index == 11 && gs.last_index == 14);
    struct test_collect c = {.group = 5};
    CU_ASSERT_EQUAL(store_log_iterate(s, 5, 0, UINT64_MAX, test_collect_cb, &c), STORE_OK);
    CU_ASSERT(c.n == 4 && c.indexes[0] == 11 && c.bad == 0);
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 6, &gs), STORE_OK);
    CU_ASSERT(gs.first_index == 1 && gs.last_index == 20);

    /* A span over the bound is an error of the whole batch: nothing of it is written. */
    store_log_batch_clear(b);
    CU_ASSERT_EQUAL(store_log_batch_count(b), 0);
    store_log_batch_delete_entries(b, 6, 1, 2);
    store_log_batch_delete_entries(b, 6, 1, 2 + STORE_LOG_DELETE_SPAN_MAX);
    CU_ASSERT_EQUAL(store_log_batch_error(b), STORE_ELIMIT);
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_ELIMIT);
    CU_ASSERT(strstr(store_errmsg(s), "group 6") != NULL);
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 6, &gs), STORE_OK);
    CU_ASSERT(gs.first_index == 1 && gs.last_index == 20);
    store_log_batch_clear(b);
    CU_ASSERT_EQUAL(store_log_batch_error(b), STORE_OK);
    store_log_batch_free(b);
    test_close(s);
}

static void test_log_delete_group(void)
{
    struct store *s = test_open();
    struct store_log_batch *b;
    struct store_group_state gs;
    for (uint32_t g = 1; g <= 3; g++)
        test_put_entries(s, g, 1, 31);
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    struct store_conf_state cs = conf_of(3, 0, 1);
    store_log_batch_put_conf_state(b, 2, &cs);
    struct store_snapshot_meta m = {.index = 1, .term = 1, .conf = cs};
    store_log_batch_put_snapshot_meta(b, 2, &m);
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_OK);
    store_log_batch_clear(b);

    store_log_batch_delete_group(s, b, 2);
    CU_ASSERT_EQUAL(store_log_batch_count(b), 30 + 3);
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_OK);
    CU_ASSERT_EQUAL(store_log_load(s, 2, &gs), STORE_ENOTFOUND);
    struct test_collect c = {.group = 2};
    CU_ASSERT_EQUAL(store_log_iterate(s, 2, 0, UINT64_MAX, test_collect_cb, &c), STORE_OK);
    CU_ASSERT_EQUAL(c.n, 0);
    for (uint32_t g = 1; g <= 3; g += 2) {
        CU_ASSERT_EQUAL_FATAL(store_log_load(s, g, &gs), STORE_OK);
        CU_ASSERT(gs.first_index == 1 && gs.last_index == 30);
    }
    uint32_t *groups = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(store_log_groups(s, &groups, &n), STORE_OK);
    CU_ASSERT(n == 2 && groups[0] == 1 && groups[1] == 3);
    free(groups);

    /* Deleting a group with nothing stored adds nothing. */
    store_log_batch_clear(b);
    store_log_batch_delete_group(s, b, 2);
    CU_ASSERT_EQUAL(store_log_batch_count(b), 0);
    store_log_batch_free(b);
    test_close(s);
}

static void test_log_gap_is_corrupt(void)
{
    struct store *s = test_open();
    struct store_log_batch *b;
    test_put_entries(s, 7, 1, 11);
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    store_log_batch_delete_entries(b, 7, 5, 6);
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_OK);
    struct test_collect c = {.group = 7};
    CU_ASSERT_EQUAL(store_log_iterate(s, 7, 1, 11, test_collect_cb, &c), STORE_ECORRUPT);
    CU_ASSERT_EQUAL(c.n, 4);
    const char *msg = store_errmsg(s);
    CU_ASSERT(strstr(msg, "group 7") != NULL && strstr(msg, "index 4") != NULL);
    CU_ASSERT(strstr(msg, "index is 6") != NULL);
    /* Ranges that do not span the gap read fine. */
    memset(&c, 0, sizeof(c));
    c.group = 7;
    CU_ASSERT_EQUAL(store_log_iterate(s, 7, 6, 11, test_collect_cb, &c), STORE_OK);
    CU_ASSERT_EQUAL(c.n, 5);
    store_log_batch_free(b);
    test_close(s);
}

static void test_log_conf_state_too_big(void)
{
    struct store *s = test_open();
    struct store_log_batch *b;
    struct store_group_state gs;
    test_put_entries(s, 1, 1, 3);
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    struct store_conf_state cs = conf_of(3, 0, 1);
    store_log_batch_put_conf_state(b, 1, &cs);
    cs.n_learners = STORE_MEMBERS_MAX + 1;
    store_log_batch_put_conf_state(b, 1, &cs);
    struct store_hard_state hs = {.term = 99};
    store_log_batch_put_hard_state(b, 1, &hs); /* ignored after the error */
    CU_ASSERT_EQUAL(store_log_batch_error(b), STORE_EINVAL);
    CU_ASSERT_EQUAL(store_log_write(s, b, true), STORE_EINVAL);
    CU_ASSERT(strstr(store_errmsg(s), "17 learners") != NULL);
    CU_ASSERT_EQUAL_FATAL(store_log_load(s, 1, &gs), STORE_OK);
    CU_ASSERT(!gs.has_conf && gs.hs.term != 99);
    store_log_batch_free(b);
    test_close(s);
}

/* Writes key -> value straight into <dir>/raftlog with the LevelDB C API (store closed). */
static void raw_put(const char *db, const void *k, size_t kl, const void *v, size_t vl)
{
    char path[256], *err = NULL;
    snprintf(path, sizeof(path), "%s/%s", test_dir(), db);
    leveldb_options_t *o = leveldb_options_create();
    leveldb_t *d = leveldb_open(o, path, &err);
    CU_ASSERT_FATAL(err == NULL);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_put(d, wo, k, kl, v, vl, &err);
    CU_ASSERT(err == NULL);
    leveldb_writeoptions_destroy(wo);
    leveldb_close(d);
    leveldb_options_destroy(o);
}

static void test_log_corrupt_values(void)
{
    if (test_backend != TEST_LEVELDB)
        return; /* raw writes need the LevelDB files; test_fsm covers the memory backend */
    struct store *s = test_open();
    struct store_group_state gs;
    test_put_entries(s, 9, 1, 6);
    store_close(s);

    uint8_t key[STORE_LOG_ENTRY_KEY_LEN];
    store_key_log_entry(key, 9, 3);
    const uint8_t bad_version[] = {2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 'x'};
    raw_put("raftlog", key, sizeof(key), bad_version, sizeof(bad_version));
    s = test_reopen(NULL);
    struct test_collect c = {.group = 9};
    CU_ASSERT_EQUAL(store_log_iterate(s, 9, 1, 6, test_collect_cb, &c), STORE_ECORRUPT);
    CU_ASSERT_EQUAL(c.n, 2);
    CU_ASSERT(strstr(store_errmsg(s), "group 9 entry 3: version byte 2") != NULL);
    store_close(s);

    uint8_t hkey[STORE_LOG_KEY_PREFIX_LEN];
    store_key_log(hkey, 9, STORE_LOG_KIND_HARD_STATE);
    const uint8_t short_hs[] = {1, 0, 0, 0};
    raw_put("raftlog", hkey, sizeof(hkey), short_hs, sizeof(short_hs));
    s = test_reopen(NULL);
    CU_ASSERT_EQUAL(store_log_load(s, 9, &gs), STORE_ECORRUPT);
    CU_ASSERT(strstr(store_errmsg(s), "group 9 hard state") != NULL);
    store_close(s);

    store_key_log(hkey, 9, STORE_LOG_KIND_HARD_STATE);
    uint8_t hs_ok[25] = {1};
    raw_put("raftlog", hkey, sizeof(hkey), hs_ok, sizeof(hs_ok));
    store_key_log(hkey, 9, STORE_LOG_KIND_CONF_STATE);
    const uint8_t conf_17[] = {1, 0, 0, 0, 17};
    raw_put("raftlog", hkey, sizeof(hkey), conf_17, sizeof(conf_17));
    s = test_reopen(NULL);
    CU_ASSERT_EQUAL(store_log_load(s, 9, &gs), STORE_ECORRUPT);
    CU_ASSERT(strstr(store_errmsg(s), "group 9 conf state") != NULL);
    test_close(s);
}

void test_log_register(CU_pSuite suite)
{
    TEST_ADD(suite, test_log_round_trip);
    TEST_ADD(suite, test_log_hard_state_only);
    TEST_ADD(suite, test_log_tombstone);
    TEST_ADD(suite, test_log_batch_across_groups);
    TEST_ADD(suite, test_log_key_order);
    TEST_ADD(suite, test_log_iterate_bounds_and_stop);
    TEST_ADD(suite, test_log_delete_entries);
    TEST_ADD(suite, test_log_delete_group);
    TEST_ADD(suite, test_log_gap_is_corrupt);
    TEST_ADD(suite, test_log_conf_state_too_big);
    TEST_ADD(suite, test_log_corrupt_values);
}
