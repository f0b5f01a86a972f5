/* watch_test.c - unit tests for service/runtime/watch.c: a group's watch history and its polls. */
#include <CUnit/Basic.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/runtime/request.h"
#include "service/runtime/watch.h"

#define G 3 /* the group every test uses */

static struct runtime *rt;
static struct store *st;

/* What one poll answered. calls is counted last (the notifier thread answers waiting polls). */
struct answer {
    _Atomic int calls;
    int code; /* SLOTD_OK or the error's */
    uint64_t through, compacted_index;
    size_t n;
    char keys[16][32];
    uint64_t index[16];
};

static void on_answer(void *arg, const struct slotd_error *err,
                      const Slotd__Internal__V1__WatchPollResponse *resp)
{
    struct answer *a = arg;
    a->code = err ? err->code : SLOTD_OK;
    if (err != NULL) {
        a->compacted_index = err->compacted_index;
        atomic_fetch_add(&a->calls, 1);
        return;
    }
    a->through = resp->through_index;
    a->n = resp->n_events;
    for (size_t i = 0; i < resp->n_events && i < 16; i++) {
        snprintf(a->keys[i], sizeof(a->keys[i]), "%.*s", (int)resp->events[i]->key.len,
                 (const char *)resp->events[i]->key.data);
        a->index[i] = resp->events[i]->index;
    }
    atomic_fetch_add(&a->calls, 1);
}

/* The calls of a once they reach n, waiting at most 2 s: a poll that waits is answered by the
 * notifier thread after the append that matches it. */
static int wait_calls(struct answer *a, int n)
{
    for (int i = 0; i < 2000 && atomic_load(&a->calls) < n; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&a->calls);
}

/* Gives the notifier time to answer what it wrongly would (a check that nothing came). */
static void settle(void)
{
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
}

static struct slot_event *ev(uint64_t index, const char *key, size_t value_len)
{
    size_t kl = strlen(key);
    struct slot_event *e = calloc(1, sizeof(*e) + kl + value_len);
    CU_ASSERT_FATAL(e != NULL);
    e->group = G;
    e->index = index;
    e->version = index;
    e->table = SLOT_TABLE_KV;
    e->key_len = (uint32_t)kl;
    e->value_len = (uint32_t)value_len;
    e->key = e->data;
    e->value = e->data + kl;
    memcpy(e->key, key, kl);
    memset(e->value, 'v', value_len);
    return e;
}

/* A list of events in order (NULL-terminated arguments). */
static struct slot_event *list(struct slot_event *first, ...)
{
    va_list ap;
    va_start(ap, first);
    struct slot_event *tail = first;
    for (struct slot_event *e = va_arg(ap, struct slot_event *); e != NULL;
         e = va_arg(ap, struct slot_event *)) {
        tail->next = e;
        tail = e;
    }
    va_end(ap);
    return first;
}

static int poll(uint64_t after, const char *prefix, const char *key, uint32_t wait_ms,
                uint32_t max_bytes, struct answer *a, struct slotd_error *err)
{
    memset(a, 0, sizeof(*a));
    struct runtime_watch_query q = {.group = G,
                                    .after = after,
                                    .prefix = (const uint8_t *)(prefix ? prefix : ""),
                                    .prefix_len = prefix ? strlen(prefix) : 0,
                                    .key = (const uint8_t *)(key ? key : ""),
                                    .key_len = key ? strlen(key) : 0,
                                    .wait_ms = wait_ms,
                                    .max_bytes = max_bytes ? max_bytes : 1u << 20};
    return runtime_watch_poll(rt, &q, on_answer, a, err);
}

static void setup(size_t history_bytes)
{
    rt = calloc(1, sizeof(*rt));
    CU_ASSERT_FATAL(rt != NULL);
    rt->opts.node_id = 1;
    rt->opts.watch_history_bytes = history_bytes;
    CU_ASSERT_FATAL(store_open_memory(&st) == 0);
    CU_ASSERT_FATAL(slot_fsm_new(st, &rt->fsm) == 0);
    CU_ASSERT_FATAL(rt_watch_init(rt) == 0);
    rt_watch_reset(rt, G, 10, true);
    /* 11: a; 12: b1 and b2 (one txn); 13: x */
    rt_watch_append(rt, G, list(ev(11, "p/a", 4), ev(12, "p/b1", 4), ev(12, "p/b2", 4), NULL),
                    12);
    rt_watch_append(rt, G, list(ev(13, "x", 4), NULL), 13);
}

static void teardown(void)
{
    rt_watch_free(rt);
    slot_fsm_free(rt->fsm);
    store_close(st);
    free(rt);
}

static void test_reads(void)
{
    setup(1 << 20);
    struct answer a;
    struct slotd_error err;
    struct runtime_watch_query now = {.group = G, .from_now = true, .max_bytes = 1};
    memset(&a, 0, sizeof(a));
    CU_ASSERT_EQUAL(runtime_watch_poll(rt, &now, on_answer, &a, &err), 0);
    CU_ASSERT_EQUAL(a.calls, 1);
    CU_ASSERT_EQUAL(a.through, 13);
    CU_ASSERT_EQUAL(a.n, 0);

    CU_ASSERT_EQUAL(poll(10, "", NULL, 0, 0, &a, &err), 0);
    CU_ASSERT_EQUAL(a.n, 4);
    CU_ASSERT_EQUAL(a.through, 13);
    CU_ASSERT_STRING_EQUAL(a.keys[0], "p/a");
    CU_ASSERT_STRING_EQUAL(a.keys[3], "x");

    CU_ASSERT_EQUAL(poll(11, "p/", NULL, 0, 0, &a, &err), 0);
    CU_ASSERT_EQUAL(a.n, 2);
    CU_ASSERT_EQUAL(a.index[0], 12);
    CU_ASSERT_EQUAL(a.through, 13);

    CU_ASSERT_EQUAL(poll(10, NULL, "p/b2", 0, 0, &a, &err), 0);
    CU_ASSERT_EQUAL(a.n, 1);
    CU_ASSERT_STRING_EQUAL(a.keys[0], "p/b2");

    /* max_bytes: whole entries only, at least one; through stops at the last one sent */
    CU_ASSERT_EQUAL(poll(10, "p/", NULL, 0, 8, &a, &err), 0);
    CU_ASSERT_EQUAL(a.n, 1);
    CU_ASSERT_EQUAL(a.through, 11);
    CU_ASSERT_EQUAL(poll(11, "p/", NULL, 0, 1, &a, &err), 0);
    CU_ASSERT_EQUAL(a.n, 2); /* entry 12's two changes are never split */
    CU_ASSERT_EQUAL(a.through, 13); /* and nothing after them matches */

    /* not a hosted group */
    struct runtime_watch_query other = {.group = G + 1, .max_bytes = 1};
    CU_ASSERT_EQUAL(runtime_watch_poll(rt, &other, on_answer, &a, &err), -1);
    CU_ASSERT_EQUAL(err.code, SLOTD_EWRONG_GROUP);
    teardown();
}

/* A typed row event: table, primary key k (kl bytes). */
static struct slot_event *tev(uint64_t index, uint8_t table, const char *k, size_t kl)
{
    struct slot_event *e = calloc(1, sizeof(*e) + kl);
    CU_ASSERT_FATAL(e != NULL);
    e->group = G;
    e->index = index;
    e->version = index;
    e->table = table;
    e->key_len = (uint32_t)kl;
    e->key = e->data;
    e->value = e->data + kl;
    memcpy(e->key, k, kl);
    return e;
}

static int typed_poll(uint32_t kind, const char *id, struct answer *a, struct slotd_error *err)
{
    memset(a, 0, sizeof(*a));
    struct runtime_watch_query q = {.group = G,
                                    .after = 10,
                                    .typed_kind = kind,
                                    .key = (const uint8_t *)id,
                                    .key_len = strlen(id),
                                    .max_bytes = 1u << 20};
    return runtime_watch_poll(rt, &q, on_answer, a, err);
}

/* Typed watches see the rows of their id only, and key watches never see typed rows. */
static void test_typed(void)
{
    setup(1 << 20);
    /* Channel rows are [s channel_id][channel_type u8]... (store/FORMAT.md). 14: subscriber u1
     * of (c1, type 2) and that channel's row; 15: an allowlist member of (c1, type 3), another
     * channel of the same id; 16: a subscriber of c12 (a longer id sharing the prefix); 17: user
     * c1's device (a uid that happens to equal the channel id) */
    rt_watch_append(rt, G,
                    list(tev(14, SLOT_TABLE_CHANNEL_MEMBER, "\x02" "c1\x02\x01u1", 7),
                         tev(14, SLOT_TABLE_CHANNEL, "\x02" "c1\x02", 4), NULL),
                    14);
    rt_watch_append(rt, G,
                    list(tev(15, SLOT_TABLE_CHANNEL_MEMBER, "\x02" "c1\x03\x02u2", 7), NULL), 15);
    rt_watch_append(rt, G,
                    list(tev(16, SLOT_TABLE_CHANNEL_MEMBER, "\x03" "c12\x02\x01u3", 8), NULL), 16);
    rt_watch_append(rt, G, list(tev(17, SLOT_TABLE_DEVICE, "\x02" "c1\x01", 4), NULL), 17);
    struct answer a;
    struct slotd_error err;
    CU_ASSERT_EQUAL(typed_poll(SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_SUBSCRIBERS, "c1", &a,
                               &err),
                    0);
    CU_ASSERT_EQUAL(a.n, 1);
    CU_ASSERT_EQUAL(a.index[0], 14);
    CU_ASSERT_EQUAL(a.through, 17);
    CU_ASSERT_EQUAL(typed_poll(SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_CHANNEL, "c1", &a,
                               &err),
                    0);
    CU_ASSERT_EQUAL(a.n, 3); /* the member, the channel row, the allowlist member (every type) */
    CU_ASSERT_EQUAL(a.index[2], 15);
    CU_ASSERT_EQUAL(typed_poll(SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_USER, "c1", &a, &err),
                    0);
    CU_ASSERT_EQUAL(a.n, 1);
    CU_ASSERT_EQUAL(a.index[0], 17);
    CU_ASSERT_EQUAL(typed_poll(SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_CHANNEL, "c12", &a,
                               &err),
                    0);
    CU_ASSERT_EQUAL(a.n, 1);
    CU_ASSERT_EQUAL(a.index[0], 16);
    /* every key: the key-value events 11..13 only */
    CU_ASSERT_EQUAL(poll(10, "", NULL, 0, 0, &a, &err), 0);
    CU_ASSERT_EQUAL(a.n, 4);
    CU_ASSERT_EQUAL(a.index[3], 13);
    CU_ASSERT_TRUE(slot_typed_table_watched(SLOT_TABLE_CHANNEL_MEMBER));
    CU_ASSERT_FALSE(slot_typed_table_watched(SLOT_TABLE_CONVERSATION));
    CU_ASSERT_FALSE(slot_typed_table_watched(SLOT_TABLE_KV));
    teardown();
}

static void test_waits(void)
{
    setup(1 << 20);
    struct answer a, b, c;
    struct slotd_error err;
    CU_ASSERT_EQUAL(poll(13, "p/", NULL, 60000, 0, &a, &err), 0);
    CU_ASSERT_EQUAL(a.calls, 0);
    rt_watch_append(rt, G, list(ev(14, "x2", 1), NULL), 14); /* no match: keeps waiting */
    settle();
    CU_ASSERT_EQUAL(a.calls, 0);
    rt_watch_append(rt, G, list(ev(15, "p/c", 1), NULL), 15);
    CU_ASSERT_EQUAL(wait_calls(&a, 1), 1);
    CU_ASSERT_EQUAL(a.n, 1);
    CU_ASSERT_STRING_EQUAL(a.keys[0], "p/c");
    CU_ASSERT_EQUAL(a.through, 15);

    /* the deadline answers with the position, no events */
    CU_ASSERT_EQUAL(poll(15, "p/", NULL, 10, 0, &b, &err), 0);
    rt_watch_append(rt, G, list(ev(16, "y", 1), NULL), 16);
    rt_watch_expire(rt, rt_now_ms() + 1000);
    CU_ASSERT_EQUAL(b.calls, 1);
    CU_ASSERT_EQUAL(b.n, 0);
    CU_ASSERT_EQUAL(b.through, 16);

    /* a watch ahead of this replica (it saw 20 elsewhere): nothing at or below 20 again, and
     * its position never goes back */
    CU_ASSERT_EQUAL(poll(20, "", NULL, 60000, 0, &c, &err), 0);
    rt_watch_append(rt, G, list(ev(17, "p/old", 1), NULL), 17);
    settle();
    CU_ASSERT_EQUAL(c.calls, 0);
    rt_watch_append(rt, G, list(ev(21, "p/new", 1), NULL), 21);
    CU_ASSERT_EQUAL(wait_calls(&c, 1), 1);
    CU_ASSERT_EQUAL(c.n, 1);
    CU_ASSERT_STRING_EQUAL(c.keys[0], "p/new");
    CU_ASSERT_EQUAL(poll(25, "", NULL, 10, 0, &c, &err), 0);
    rt_watch_expire(rt, rt_now_ms() + 1000);
    CU_ASSERT_EQUAL(c.through, 25);

    /* a snapshot install: waiters behind it fail COMPACTED; a removal: WRONG_GROUP */
    CU_ASSERT_EQUAL(poll(21, "", NULL, 60000, 0, &a, &err), 0);
    rt_watch_reset(rt, G, 100, true);
    CU_ASSERT_EQUAL(a.calls, 1);
    CU_ASSERT_EQUAL(a.code, SLOTD_ECOMPACTED);
    CU_ASSERT_EQUAL(a.compacted_index, 100);
    CU_ASSERT_EQUAL(poll(100, "", NULL, 60000, 0, &b, &err), 0);
    rt_watch_reset(rt, G, 0, false);
    CU_ASSERT_EQUAL(b.calls, 1);
    CU_ASSERT_EQUAL(b.code, SLOTD_EWRONG_GROUP);
    CU_ASSERT_EQUAL(poll(100, "", NULL, 0, 0, &b, &err), -1);
    CU_ASSERT_EQUAL(err.code, SLOTD_EWRONG_GROUP);

    /* close: a waiting poll fails SHUTTING_DOWN */
    rt_watch_reset(rt, G, 200, true);
    CU_ASSERT_EQUAL(poll(200, "", NULL, 60000, 0, &c, &err), 0);
    rt_watch_close(rt);
    CU_ASSERT_EQUAL(c.calls, 1);
    CU_ASSERT_EQUAL(c.code, SLOTD_ESHUTTING_DOWN);
    teardown();
}

static void test_bound(void)
{
    setup(2048); /* about 20 changes of 40 bytes with their headers */
    for (uint64_t i = 14; i < 200; i++)
        rt_watch_append(rt, G, list(ev(i, "p/k", 40), NULL), i);
    struct answer a;
    struct slotd_error err;
    CU_ASSERT_EQUAL(poll(10, "", NULL, 0, 0, &a, &err), -1);
    CU_ASSERT_EQUAL(err.code, SLOTD_ECOMPACTED);
    CU_ASSERT_EQUAL(err.compacted_group, G);
    uint64_t start = err.compacted_index;
    CU_ASSERT(start > 100 && start < 199);
    CU_ASSERT_EQUAL(poll(start, "", NULL, 0, 0, &a, &err), 0);
    CU_ASSERT_EQUAL(a.through, 199);
    CU_ASSERT_EQUAL(a.index[0], start + 1); /* nothing between the start and the first kept */
    teardown();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("runtime_watch", NULL, NULL);
    CU_add_test(s, "reads: from now, prefix, key, whole entries, not hosted", test_reads);
    CU_add_test(s, "waits: match, deadline, ahead of the replica, reset, removal, close",
                test_waits);
    CU_add_test(s, "bound: the oldest entries go, COMPACTED names the start", test_bound);
    CU_add_test(s, "typed: one id's rows by kind, never mixed with keys", test_typed);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
