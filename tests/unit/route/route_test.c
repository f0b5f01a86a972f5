/* route_test.c - unit tests for service/route: CRC-32, range split, lookup, publication, encode. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "route.h"
#include "slotd/v1/metadata.pb-c.h"

/* xorshift64*: deterministic inputs from a printed seed. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_crc32_vectors(void)
{
    CU_ASSERT_EQUAL(route_crc32("123456789", 9), 0xCBF43926u);
    CU_ASSERT_EQUAL(route_crc32(NULL, 0), 0u);
    CU_ASSERT_EQUAL(route_crc32("", 0), 0u);
    CU_ASSERT_EQUAL(route_crc32("a", 1), 0xE8B7BE43u);
    CU_ASSERT_EQUAL(route_crc32("The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
    CU_ASSERT_EQUAL(route_hash_slot("123456789", 9), 0xCBF43926u % 256);
}

static void test_crc32_matches_zlib(void)
{
    uint64_t seed = 0x5107d5eedull;
    uint8_t buf[512];
    int mismatches = 0;
    for (int i = 0; i < 2000; i++) {
        size_t len = rng_next(&seed) % sizeof(buf);
        for (size_t k = 0; k < len; k++) {
            buf[k] = (uint8_t)rng_next(&seed);
        }
        uint32_t want = (uint32_t)crc32(0L, buf, (uInt)len);
        if (route_crc32(buf, len) != want || route_hash_slot(buf, len) != want % 256) {
            mismatches++;
        }
    }
    CU_ASSERT_EQUAL(mismatches, 0);
}

static void check_split(unsigned n)
{
    uint32_t table[ROUTE_HASH_SLOTS];
    memset(table, 0, sizeof(table));
    CU_ASSERT_EQUAL_FATAL(route_split_ranges(n, table), ROUTE_OK);
    unsigned base = ROUTE_HASH_SLOTS / n, extra = ROUTE_HASH_SLOTS % n;
    unsigned slot = 0;
    for (uint32_t g = 1; g <= n; g++) {
        struct route_range r[2];
        size_t count = route_ranges_of(table, g, r, 2);
        CU_ASSERT_EQUAL(count, 1); /* contiguous */
        CU_ASSERT_EQUAL(r[0].first, slot);
        unsigned size = (unsigned)(r[0].last - r[0].first + 1);
        CU_ASSERT_EQUAL(size, base + (g <= extra ? 1u : 0u));
        slot += size;
    }
    CU_ASSERT_EQUAL(slot, ROUTE_HASH_SLOTS);
    CU_ASSERT_EQUAL(route_ranges_of(table, n + 1, NULL, 0), 0);
    CU_ASSERT_EQUAL(route_ranges_of(table, 0, NULL, 0), 0);
}

static void test_split_ranges(void)
{
    check_split(1);
    check_split(3);
    check_split(8);
    check_split(255);
    check_split(256);
    uint32_t table[ROUTE_HASH_SLOTS];
    CU_ASSERT_EQUAL(route_split_ranges(0, table), ROUTE_EINVALID);
    CU_ASSERT_EQUAL(route_split_ranges(257, table), ROUTE_EINVALID);
    /* G = 3: 86, 85, 85. */
    CU_ASSERT_EQUAL(route_split_ranges(3, table), ROUTE_OK);
    CU_ASSERT_EQUAL(table[0], 1);
    CU_ASSERT_EQUAL(table[85], 1);
    CU_ASSERT_EQUAL(table[86], 2);
    CU_ASSERT_EQUAL(table[170], 2);
    CU_ASSERT_EQUAL(table[171], 3);
    CU_ASSERT_EQUAL(table[255], 3);
}

static void test_ranges_of_scattered(void)
{
    uint32_t table[ROUTE_HASH_SLOTS];
    for (unsigned i = 0; i < ROUTE_HASH_SLOTS; i++) {
        table[i] = 1;
    }
    table[0] = 7;
    table[10] = 7;
    table[11] = 7;
    table[255] = 7;
    struct route_range r[4];
    CU_ASSERT_EQUAL(route_ranges_of(table, 7, r, 4), 3);
    CU_ASSERT(r[0].first == 0 && r[0].last == 0);
    CU_ASSERT(r[1].first == 10 && r[1].last == 11);
    CU_ASSERT(r[2].first == 255 && r[2].last == 255);
    /* Truncated output still reports the total count. */
    memset(r, 0xAA, sizeof(r));
    CU_ASSERT_EQUAL(route_ranges_of(table, 7, r, 1), 3);
    CU_ASSERT(r[0].first == 0 && r[0].last == 0);
    CU_ASSERT_EQUAL(r[1].first, 0xAAAA);
    CU_ASSERT_EQUAL(route_ranges_of(table, 1, r, 4), 2);
    CU_ASSERT(r[0].first == 1 && r[0].last == 9);
    CU_ASSERT(r[1].first == 12 && r[1].last == 254);
}

/* Snapshot with groups 1..n_groups over split ranges, group g led by node g (0 = none). */
static struct route_snapshot *make_snapshot(unsigned n_groups, uint64_t revision)
{
    struct route_snapshot *s = NULL;
    CU_ASSERT_FATAL(route_snapshot_new(n_groups, n_groups, &s) == ROUTE_OK);
    s->revision = revision;
    s->table_ready = true;
    route_split_ranges(n_groups, s->slot_group);
    for (unsigned i = 0; i < n_groups; i++) {
        struct route_group *g = &s->groups[i];
        g->id = i + 1;
        g->n_voters = 3;
        for (unsigned v = 0; v < 3; v++) {
            g->voters[v] = (i + v) % n_groups + 1;
        }
        g->n_learners = 1;
        g->learners[0] = 100 + i;
        g->config_epoch = revision * 10 + i;
        g->preferred_leader = i + 1;
        g->leader = i + 1;
        g->leader_term = revision + i;
        s->nodes[i].id = i + 1;
        snprintf(s->nodes[i].address, sizeof(s->nodes[i].address), "10.0.0.%u:7700", i + 1);
    }
    CU_ASSERT(route_snapshot_validate(s) == ROUTE_OK);
    return s;
}

static void test_lookup(void)
{
    uint16_t slot = 0;
    const struct route_group *g = (const void *)1;
    CU_ASSERT_EQUAL(route_snapshot_lookup(NULL, "k", 1, &slot, &g), ROUTE_ENOT_READY);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_EQUAL(slot, route_hash_slot("k", 1));

    struct route_snapshot *s = make_snapshot(4, 1);
    s->table_ready = false;
    CU_ASSERT_EQUAL(route_snapshot_lookup(s, "k", 1, &slot, &g), ROUTE_ENOT_READY);
    s->table_ready = true;

    CU_ASSERT_EQUAL(route_snapshot_lookup(s, "123456789", 9, &slot, &g), ROUTE_OK);
    CU_ASSERT_EQUAL(slot, 0xCBF43926u % 256); /* 38 */
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(g->id, s->slot_group[slot]);
    CU_ASSERT_EQUAL(g->leader, g->id);

    /* Leader unknown: the group is still returned, with ENO_LEADER. */
    route_snapshot_group_mut(s, g->id)->leader = 0;
    CU_ASSERT_EQUAL(route_snapshot_lookup(s, "123456789", 9, &slot, &g), ROUTE_ENO_LEADER);
    CU_ASSERT_PTR_NOT_NULL(g);

    /* Hash slot pointing at a group that is not in the snapshot, and an unassigned slot. */
    s->slot_group[slot] = 99;
    CU_ASSERT_EQUAL(route_snapshot_lookup(s, "123456789", 9, &slot, &g), ROUTE_ENOT_READY);
    CU_ASSERT_PTR_NULL(g);
    s->slot_group[slot] = 0;
    CU_ASSERT_EQUAL(route_snapshot_lookup(s, "123456789", 9, &slot, &g), ROUTE_ENOT_READY);

    CU_ASSERT_PTR_NULL(route_snapshot_group(s, 0));
    CU_ASSERT_PTR_NULL(route_snapshot_group(s, 5));
    CU_ASSERT_EQUAL(route_snapshot_group(s, 4)->id, 4);
    CU_ASSERT_STRING_EQUAL(route_snapshot_node(s, 3)->address, "10.0.0.3:7700");
    CU_ASSERT_PTR_NULL(route_snapshot_node(s, 77));
    route_snapshot_release(s);
}

static void test_validate_and_clone(void)
{
    struct route_snapshot *s = make_snapshot(3, 5), *c = NULL;
    CU_ASSERT_EQUAL_FATAL(route_snapshot_clone(s, &c), ROUTE_OK);
    CU_ASSERT_EQUAL(c->revision, 5);
    CU_ASSERT_EQUAL(memcmp(c->slot_group, s->slot_group, sizeof(s->slot_group)), 0);
    CU_ASSERT_EQUAL(memcmp(c->groups, s->groups, 3 * sizeof(*s->groups)), 0);
    CU_ASSERT_PTR_NOT_EQUAL(c->groups, s->groups);
    route_snapshot_group_mut(c, 2)->leader = 3;
    CU_ASSERT_EQUAL(route_snapshot_group(s, 2)->leader, 2); /* the original is untouched */

    c->groups[1].id = 1; /* duplicate id */
    CU_ASSERT_EQUAL(route_snapshot_validate(c), ROUTE_EINVALID);
    c->groups[1].id = 2;
    c->groups[0].n_voters = ROUTE_MEMBERS_MAX + 1;
    CU_ASSERT_EQUAL(route_snapshot_validate(c), ROUTE_EINVALID);
    c->groups[0].n_voters = 3;
    c->nodes[2].id = 1; /* unsorted nodes */
    CU_ASSERT_EQUAL(route_snapshot_validate(c), ROUTE_EINVALID);
    c->nodes[2].id = 3;
    CU_ASSERT_EQUAL(route_snapshot_validate(c), ROUTE_OK);

    struct route_snapshot *big = NULL;
    CU_ASSERT_EQUAL(route_snapshot_new(ROUTE_GROUPS_MAX + 1, 0, &big), ROUTE_EINVALID);
    CU_ASSERT_PTR_NULL(big);
    route_snapshot_release(c);
    route_snapshot_release(s);
}

/* ---- publication stress ------------------------------------------------------------------ */

#define STRESS_READERS 3
#define STRESS_PUBLISHES 20000
#define STRESS_TIME_MS 10000

struct stress {
    struct route_table *table;
    atomic_bool done;
    atomic_ulong acquires, errors;
    atomic_int started;
};

/* Every field of a stress snapshot is a function of its revision; a reader that sees a mix of
 * versions or freed memory (ASan) fails. */
static bool stress_consistent(const struct route_snapshot *s)
{
    uint64_t r = s->revision;
    if (s->n_groups != 2 || s->groups[0].config_epoch != r || s->groups[1].config_epoch != r ||
        s->groups[0].leader_term != r * 3) {
        return false;
    }
    for (unsigned i = 0; i < ROUTE_HASH_SLOTS; i++) {
        if (s->slot_group[i] != 1 + (i + r) % 2) {
            return false;
        }
    }
    return true;
}

static struct route_snapshot *stress_snapshot(uint64_t r)
{
    struct route_snapshot *s = NULL;
    if (route_snapshot_new(2, 0, &s) != ROUTE_OK) {
        return NULL;
    }
    s->revision = r;
    s->table_ready = true;
    for (unsigned i = 0; i < ROUTE_HASH_SLOTS; i++) {
        s->slot_group[i] = 1 + (uint32_t)((i + r) % 2);
    }
    for (unsigned g = 0; g < 2; g++) {
        s->groups[g].id = g + 1;
        s->groups[g].config_epoch = r;
        s->groups[g].leader = 1;
        s->groups[g].leader_term = r * 3;
    }
    return s;
}

static void *stress_reader(void *arg)
{
    struct stress *st = arg;
    uint64_t last = 0;
    uint64_t deadline = now_ms() + STRESS_TIME_MS;
    atomic_fetch_add(&st->started, 1);
    while (!atomic_load(&st->done) && now_ms() < deadline) {
        struct route_snapshot *s = route_table_acquire(st->table);
        if (s == NULL) {
            continue;
        }
        if (!stress_consistent(s) || s->revision < last) {
            atomic_fetch_add(&st->errors, 1);
        }
        last = s->revision;
        atomic_fetch_add(&st->acquires, 1);
        route_snapshot_release(s);
    }
    return NULL;
}

static void test_publish_acquire_stress(void)
{
    struct stress st;
    CU_ASSERT_EQUAL_FATAL(route_table_new(&st.table), ROUTE_OK);
    atomic_init(&st.done, false);
    atomic_init(&st.acquires, 0);
    atomic_init(&st.errors, 0);
    atomic_init(&st.started, 0);
    CU_ASSERT_PTR_NULL(route_table_acquire(st.table));

    pthread_t readers[STRESS_READERS];
    for (int i = 0; i < STRESS_READERS; i++) {
        CU_ASSERT_FATAL(pthread_create(&readers[i], NULL, stress_reader, &st) == 0);
    }
    /* A snapshot held across many publications stays valid. */
    route_table_publish(st.table, stress_snapshot(1));
    struct route_snapshot *held = route_table_acquire(st.table);
    uint64_t deadline = now_ms() + STRESS_TIME_MS;
    while (atomic_load(&st.started) < STRESS_READERS && now_ms() < deadline) {
        sched_yield();
    }
    int published = 1;
    for (uint64_t r = 2; r <= STRESS_PUBLISHES && now_ms() < deadline; r++) {
        struct route_snapshot *s = stress_snapshot(r);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        route_table_publish(st.table, s);
        published++;
        if (r % 16 == 0) {
            sched_yield(); /* let readers interleave on a 2-core machine */
        }
    }
    atomic_store(&st.done, true);
    for (int i = 0; i < STRESS_READERS; i++) {
        pthread_join(readers[i], NULL);
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(held);
    CU_ASSERT_EQUAL(held->revision, 1);
    CU_ASSERT(stress_consistent(held));
    route_snapshot_release(held);

    struct route_snapshot *last = route_table_acquire(st.table);
    CU_ASSERT_EQUAL(last->revision, (uint64_t)published);
    route_snapshot_release(last);
    CU_ASSERT_EQUAL(atomic_load(&st.errors), 0);
    CU_ASSERT(atomic_load(&st.acquires) > 0);
    printf("\n    stress: %d publications, %lu acquires by %d readers\n", published,
           atomic_load(&st.acquires), STRESS_READERS);
    route_table_free(st.table);
}

static void test_encode_round_trip(void)
{
    struct route_snapshot *s = make_snapshot(3, 42);
    route_snapshot_group_mut(s, 2)->leader = 0;
    struct route_group *g3 = route_snapshot_group_mut(s, 3);
    g3->n_intended_voters = 2;
    g3->intended_voters[0] = 1;
    g3->intended_voters[1] = 2;
    g3->n_intended_learners = 1;
    g3->intended_learners[0] = 4;
    g3->n_replicas = 2;
    g3->replicas[0] = (struct route_replica){.node = 1, .role = ROUTE_ROLE_VOTER, .leader = 1,
                                             .term = 3, .commit = 9, .applied = 8, .heard_ms = 0};
    g3->replicas[1] = (struct route_replica){.node = 4, .role = ROUTE_ROLE_NONE, .heard_ms = 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(route_snapshot_encode(s, &buf, &len), ROUTE_OK);
    Slotd__V1__RouteSnapshotResponse *m =
        slotd__v1__route_snapshot_response__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->route_revision, 42);
    CU_ASSERT_EQUAL_FATAL(m->n_hash_slot_table, ROUTE_HASH_SLOTS);
    CU_ASSERT_EQUAL(memcmp(m->hash_slot_table, s->slot_group, sizeof(s->slot_group)), 0);
    CU_ASSERT_EQUAL_FATAL(m->n_groups, 3);
    for (size_t i = 0; i < 3; i++) {
        const struct route_group *g = &s->groups[i];
        const Slotd__V1__GroupRoute *r = m->groups[i];
        CU_ASSERT_EQUAL(r->group_id, g->id);
        CU_ASSERT_EQUAL_FATAL(r->n_voters, g->n_voters);
        CU_ASSERT_EQUAL(memcmp(r->voters, g->voters, g->n_voters * sizeof(uint64_t)), 0);
        CU_ASSERT_EQUAL_FATAL(r->n_learners, g->n_learners);
        CU_ASSERT_EQUAL(r->learners[0], g->learners[0]);
        CU_ASSERT_EQUAL(r->config_epoch, g->config_epoch);
        CU_ASSERT_EQUAL(r->preferred_leader, g->preferred_leader);
        CU_ASSERT_EQUAL(r->leader, g->leader);
        CU_ASSERT_EQUAL(r->leader_term, g->leader_term);
    }
    CU_ASSERT_EQUAL(m->groups[1]->leader, 0);
    CU_ASSERT_EQUAL(m->groups[0]->n_replicas, 0);
    const Slotd__V1__GroupRoute *r3 = m->groups[2];
    CU_ASSERT_EQUAL_FATAL(r3->n_intended_voters, 2);
    CU_ASSERT_EQUAL(r3->intended_voters[1], 2);
    CU_ASSERT_EQUAL_FATAL(r3->n_intended_learners, 1);
    CU_ASSERT_EQUAL(r3->intended_learners[0], 4);
    CU_ASSERT_EQUAL_FATAL(r3->n_replicas, 2);
    CU_ASSERT_EQUAL(r3->replicas[0]->node_id, 1);
    CU_ASSERT_STRING_EQUAL(r3->replicas[0]->role, "voter");
    CU_ASSERT_EQUAL(r3->replicas[0]->term, 3);
    CU_ASSERT_EQUAL(r3->replicas[0]->commit_index, 9);
    CU_ASSERT_EQUAL(r3->replicas[0]->applied_index, 8);
    CU_ASSERT(r3->replicas[0]->age_ms > 0); /* heard at monotonic time 0: long ago */
    CU_ASSERT_STRING_EQUAL(r3->replicas[1]->role, "none");
    CU_ASSERT_EQUAL_FATAL(m->n_nodes, 3);
    CU_ASSERT_EQUAL(m->nodes[2]->node_id, 3);
    CU_ASSERT_STRING_EQUAL(m->nodes[2]->address, "10.0.0.3:7700");
    slotd__v1__route_snapshot_response__free_unpacked(m, NULL);
    free(buf);

    /* Not ready and empty: 256 zeros, no groups or nodes. */
    struct route_snapshot *empty = NULL;
    CU_ASSERT_EQUAL_FATAL(route_snapshot_new(0, 0, &empty), ROUTE_OK);
    empty->revision = 7;
    CU_ASSERT_EQUAL_FATAL(route_snapshot_encode(empty, &buf, &len), ROUTE_OK);
    m = slotd__v1__route_snapshot_response__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->route_revision, 7);
    CU_ASSERT_EQUAL(m->n_hash_slot_table, ROUTE_HASH_SLOTS);
    CU_ASSERT_EQUAL(m->hash_slot_table[100], 0);
    CU_ASSERT_EQUAL(m->n_groups, 0);
    CU_ASSERT_EQUAL(m->n_nodes, 0);
    slotd__v1__route_snapshot_response__free_unpacked(m, NULL);
    free(buf);
    route_snapshot_release(empty);
    route_snapshot_release(s);
}

static void test_strerror(void)
{
    CU_ASSERT_STRING_EQUAL(route_strerror(ROUTE_OK), "ok");
    CU_ASSERT_STRING_EQUAL(route_strerror(ROUTE_ENO_LEADER), "no leader");
    CU_ASSERT_STRING_EQUAL(route_strerror(ROUTE_ENOT_READY), "route not ready");
    CU_ASSERT_STRING_EQUAL(route_strerror(999), "unknown error");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite suite = CU_add_suite("route", NULL, NULL);
    CU_add_test(suite, "crc32 known vectors", test_crc32_vectors);
    CU_add_test(suite, "crc32 equals zlib on random inputs", test_crc32_matches_zlib);
    CU_add_test(suite, "split ranges G=1,3,8,255,256", test_split_ranges);
    CU_add_test(suite, "ranges_of scattered table", test_ranges_of_scattered);
    CU_add_test(suite, "lookup and its errors", test_lookup);
    CU_add_test(suite, "validate and clone", test_validate_and_clone);
    CU_add_test(suite, "publish/acquire/release stress", test_publish_acquire_stress);
    CU_add_test(suite, "encode round trip", test_encode_round_trip);
    CU_add_test(suite, "strerror", test_strerror);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
