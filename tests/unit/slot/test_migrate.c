/* test_migrate.c - CUnit tests of the hash-slot migration entries of the slot FSM: fence, rows
 * chunks, accept, release, abort, their persisted record and the row checksum. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/slot.h"
#include "store/keys.h"

#define CMD(name) SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_##name
#define KEY_TRIES_MAX 1000000 /* bound on the search for a key of a given hash slot */
#define ROWS_MAX 256          /* bound on the rows a test copies */

/* One replica of one slot group on its own node (store). */
struct grp {
    struct store *st;
    struct slot_fsm *fsm;
    struct slot_group_state gs;
    uint64_t next_index;
};

/* Group id of 2 owns the hash slots route_split_ranges(2) gives it: 1 owns 0..127, 2 owns
 * 128..255. */
static void grp_open(struct grp *g, uint32_t id)
{
    uint32_t table[256];
    memset(g, 0, sizeof(*g));
    CU_ASSERT_FATAL(store_open_memory(&g->st) == 0);
    CU_ASSERT_FATAL(slot_fsm_new(g->st, &g->fsm) == 0);
    CU_ASSERT_FATAL(route_split_ranges(2, table) == 0);
    CU_ASSERT_FATAL(slot_fsm_load_group(g->fsm, id, &g->gs) == 0);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_group_init(id, table, &data, &len) == 0);
    slot_fsm_begin(g->fsm);
    CU_ASSERT_FATAL(slot_fsm_apply(g->fsm, &g->gs, 1, 1, data, len, NULL) == 0);
    slot_fsm_set_applied(g->fsm, id, 1);
    CU_ASSERT_FATAL(slot_fsm_commit(g->fsm) == 0);
    free(data);
    g->next_index = 2;
}

static void grp_close(struct grp *g)
{
    slot_fsm_free(g->fsm);
    store_close(g->st);
}

static bool gs_equal(const struct slot_group_state *a, const struct slot_group_state *b)
{
    return a->group == b->group && a->initialized == b->initialized &&
           memcmp(a->owned, b->owned, 32) == 0 && memcmp(a->fenced, b->fenced, 32) == 0 &&
           memcmp(a->incoming, b->incoming, 32) == 0 && a->migration_task == b->migration_task &&
           a->migration_chunks == b->migration_chunks && a->migration_rows == b->migration_rows &&
           a->migration_crc == b->migration_crc;
}

/* The group state reloaded from the store equals the in-memory one. */
static void check_reload(struct grp *g)
{
    struct slot_group_state re;
    CU_ASSERT_FATAL(slot_fsm_load_group(g->fsm, g->gs.group, &re) == 0);
    CU_ASSERT(gs_equal(&re, &g->gs));
}

/* Applies cmd as the next entry (in the open batch when !own_batch) and returns the error code
 * (the whole error in *err_out when not NULL). A fresh answer names this entry's index. */
static int apply_cmd(struct grp *g, const Slotd__Internal__V1__LogCommand *cmd, bool own_batch,
                     struct slotd_error *err_out)
{
    size_t len = slotd__internal__v1__log_command__get_packed_size(cmd);
    uint8_t *data = malloc(len ? len : 1);
    CU_ASSERT_FATAL(data != NULL);
    slotd__internal__v1__log_command__pack(cmd, data);
    struct slot_result res;
    if (own_batch)
        slot_fsm_begin(g->fsm);
    uint64_t index = g->next_index++;
    CU_ASSERT_FATAL(slot_fsm_apply(g->fsm, &g->gs, index, 7, data, len, &res) == 0);
    slot_fsm_set_applied(g->fsm, g->gs.group, index);
    if (own_batch)
        CU_ASSERT_FATAL(slot_fsm_commit(g->fsm) == 0);
    free(data);
    if (err_out != NULL)
        *err_out = res.err;
    if (res.err.code == SLOTD_OK) {
        Slotd__V1__ProposeResponse *r =
            slotd__v1__propose_response__unpack(NULL, res.resp_len, res.resp);
        CU_ASSERT_FATAL(r != NULL);
        CU_ASSERT(r->deduplicated || r->applied_index == index);
        CU_ASSERT(r->group_id == g->gs.group || r->deduplicated);
        slotd__v1__propose_response__free_unpacked(r, NULL);
    } else {
        CU_ASSERT(res.resp == NULL);
    }
    free(res.resp);
    return res.err.code;
}

static int put_kv(struct grp *g, const char *key, const char *value, const char *rid,
                  struct slotd_error *err)
{
    Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.value.data = (uint8_t *)value;
    p.value.len = strlen(value);
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.hash_slot = route_hash_slot(key, strlen(key));
    cmd.command_case = CMD(PUT);
    cmd.put = &p;
    if (rid != NULL) {
        cmd.request_id.data = (uint8_t *)rid;
        cmd.request_id.len = strlen(rid);
    }
    return apply_cmd(g, &cmd, true, err);
}

/* The stored value of a KV key ("" when absent); returns whether it is stored. */
static bool get_kv(struct grp *g, const char *key, char *value_out)
{
    bool found;
    void *v;
    size_t vl;
    uint64_t version;
    CU_ASSERT_FATAL(slot_fsm_get(g->st, route_hash_slot(key, strlen(key)), key, strlen(key), &found,
                                 &v, &vl, &version) == 0);
    value_out[0] = '\0';
    if (found) {
        memcpy(value_out, v, vl);
        value_out[vl] = '\0';
    }
    free(v);
    return found;
}

/* The n-th key ("m-<n>-<i>") whose hash slot is hs. */
static void key_of_slot(uint16_t hs, int n, char *out)
{
    for (int i = 0; i < KEY_TRIES_MAX; i++) {
        sprintf(out, "m-%d-%d", n, i);
        if (route_hash_slot(out, strlen(out)) == hs)
            return;
    }
    CU_FAIL_FATAL("no key found for the hash slot");
}

static void bitmap_of(uint8_t bm[32], const uint16_t *slots, size_t n)
{
    memset(bm, 0, 32);
    for (size_t i = 0; i < n; i++)
        bm[slots[i] / 8] |= (uint8_t)(1u << (slots[i] % 8));
}

/* CRC of every row of the hash slots 0..255 (group records excluded) and the row count. */
static uint64_t keyspace_digest(struct store *st)
{
    uint8_t hi[2] = {0xFF, 0xFF};
    struct store_iter *it;
    CU_ASSERT_FATAL(store_fsm_iter_new(st, NULL, 0, hi, 2, &it) == 0);
    uint32_t crc = 0;
    uint64_t n = 0;
    for (; store_iter_valid(it); store_iter_next(it)) {
        size_t kl, vl;
        const void *k = store_iter_key(it, &kl);
        const void *v = store_iter_value(it, &vl);
        crc = slot_migration_row_crc(crc, k, kl, v, vl);
        n++;
    }
    store_iter_free(it);
    return n << 32 | crc;
}

/* Rows stored in hash slot hs. */
static size_t rows_in_slot(struct store *st, uint16_t hs)
{
    uint8_t lo[2], hi[2];
    store_put_u16(lo, hs);
    store_put_u16(hi, (uint16_t)(hs + 1));
    struct store_iter *it;
    CU_ASSERT_FATAL(store_fsm_iter_new(st, lo, 2, hi, 2, &it) == 0);
    size_t n = 0;
    for (; store_iter_valid(it); store_iter_next(it))
        n++;
    store_iter_free(it);
    return n;
}

/* The rows of two stores in hash slot hs are identical (keys and values, in order). */
static void check_same_rows(struct store *a, struct store *b, uint16_t hs)
{
    uint8_t lo[2], hi[2];
    store_put_u16(lo, hs);
    store_put_u16(hi, (uint16_t)(hs + 1));
    struct store_iter *ia, *ib;
    CU_ASSERT_FATAL(store_fsm_iter_new(a, lo, 2, hi, 2, &ia) == 0);
    CU_ASSERT_FATAL(store_fsm_iter_new(b, lo, 2, hi, 2, &ib) == 0);
    size_t n = 0;
    for (; store_iter_valid(ia) && store_iter_valid(ib); store_iter_next(ia), store_iter_next(ib)) {
        size_t kal, kbl, val, vbl;
        const void *ka = store_iter_key(ia, &kal), *kb = store_iter_key(ib, &kbl);
        const void *va = store_iter_value(ia, &val), *vb = store_iter_value(ib, &vbl);
        CU_ASSERT(kal == kbl && memcmp(ka, kb, kal) == 0);
        CU_ASSERT(val == vbl && memcmp(va, vb, val) == 0);
        n++;
    }
    CU_ASSERT(!store_iter_valid(ia) && !store_iter_valid(ib));
    CU_ASSERT(n > 0);
    store_iter_free(ia);
    store_iter_free(ib);
}

/* ---- Migration entries ---- */

static int fence(struct grp *g, uint64_t task, const uint8_t *bm, size_t bml,
                 struct slotd_error *err)
{
    Slotd__Internal__V1__MigrationFence c = SLOTD__INTERNAL__V1__MIGRATION_FENCE__INIT;
    c.task_id = task;
    c.hash_slots.data = (uint8_t *)bm;
    c.hash_slots.len = bml;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.command_case = CMD(MIGRATION_FENCE);
    cmd.migration_fence = &c;
    return apply_cmd(g, &cmd, true, err);
}

static int accept_copy(struct grp *g, uint64_t task, const uint8_t bm[32], uint32_t chunks,
                       uint64_t rows, uint32_t crc, struct slotd_error *err, bool own_batch)
{
    Slotd__Internal__V1__MigrationAccept c = SLOTD__INTERNAL__V1__MIGRATION_ACCEPT__INIT;
    c.task_id = task;
    c.hash_slots.data = (uint8_t *)bm;
    c.hash_slots.len = 32;
    c.chunks = chunks;
    c.rows = rows;
    c.checksum = crc;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.command_case = CMD(MIGRATION_ACCEPT);
    cmd.migration_accept = &c;
    return apply_cmd(g, &cmd, own_batch, err);
}

static int release(struct grp *g, uint64_t task, const uint8_t bm[32], struct slotd_error *err)
{
    Slotd__Internal__V1__MigrationRelease c = SLOTD__INTERNAL__V1__MIGRATION_RELEASE__INIT;
    c.task_id = task;
    c.hash_slots.data = (uint8_t *)bm;
    c.hash_slots.len = 32;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.command_case = CMD(MIGRATION_RELEASE);
    cmd.migration_release = &c;
    return apply_cmd(g, &cmd, true, err);
}

static int abort_copy(struct grp *g, uint64_t task, const uint8_t bm[32], struct slotd_error *err)
{
    Slotd__Internal__V1__MigrationAbort c = SLOTD__INTERNAL__V1__MIGRATION_ABORT__INIT;
    c.task_id = task;
    c.hash_slots.data = (uint8_t *)bm;
    c.hash_slots.len = 32;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.command_case = CMD(MIGRATION_ABORT);
    cmd.migration_abort = &c;
    return apply_cmd(g, &cmd, true, err);
}

/* Rows read from a source store, as the executor sends them. */
struct copy {
    size_t n;
    Slotd__Internal__V1__MigrationRow rows[ROWS_MAX];
    Slotd__Internal__V1__MigrationRow *ptrs[ROWS_MAX];
    uint32_t crc; /* slot_migration_row_crc over rows[0..n) */
};

static void copy_read(struct copy *c, struct store *st, const uint8_t bm[32])
{
    memset(c, 0, sizeof(*c));
    for (unsigned s = 0; s < 256; s++) {
        if (!((bm[s / 8] >> (s % 8)) & 1))
            continue;
        uint8_t lo[2], hi[2];
        store_put_u16(lo, (uint16_t)s);
        store_put_u16(hi, (uint16_t)(s + 1));
        struct store_iter *it;
        CU_ASSERT_FATAL(store_fsm_iter_new(st, lo, 2, hi, 2, &it) == 0);
        for (; store_iter_valid(it); store_iter_next(it)) {
            CU_ASSERT_FATAL(c->n < ROWS_MAX);
            Slotd__Internal__V1__MigrationRow *r = &c->rows[c->n];
            slotd__internal__v1__migration_row__init(r);
            const void *k = store_iter_key(it, &r->key.len);
            const void *v = store_iter_value(it, &r->value.len);
            r->key.data = malloc(r->key.len);
            r->value.data = malloc(r->value.len ? r->value.len : 1);
            memcpy(r->key.data, k, r->key.len);
            memcpy(r->value.data, v, r->value.len);
            c->crc = slot_migration_row_crc(c->crc, k, r->key.len, v, r->value.len);
            c->ptrs[c->n] = r;
            c->n++;
        }
        store_iter_free(it);
    }
}

static void copy_free(struct copy *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->rows[i].key.data);
        free(c->rows[i].value.data);
    }
}

/* Sends rows [first, first + n) of c as chunk seq of task. */
static int send_chunk(struct grp *g, uint64_t task, const uint8_t bm[32], uint32_t seq,
                      struct copy *c, size_t first, size_t n, struct slotd_error *err,
                      bool own_batch)
{
    Slotd__Internal__V1__MigrationRows r = SLOTD__INTERNAL__V1__MIGRATION_ROWS__INIT;
    r.task_id = task;
    r.source_group = 1;
    r.hash_slots.data = (uint8_t *)bm;
    r.hash_slots.len = 32;
    r.seq = seq;
    r.n_rows = n;
    r.rows = n > 0 ? &c->ptrs[first] : NULL;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.command_case = CMD(MIGRATION_ROWS);
    cmd.migration_rows = &r;
    return apply_cmd(g, &cmd, own_batch, err);
}

/* Fills hash slots 5 and 9 of g with KV rows (some with request ids, so dedupe rows too). */
static void fill_source(struct grp *g, int n_keys)
{
    char k[64], v[64], rid[32];
    for (int i = 0; i < n_keys; i++) {
        key_of_slot(i % 2 ? 9 : 5, i, k);
        sprintf(v, "value-%d", i);
        sprintf(rid, "rid-%d", i);
        CU_ASSERT(put_kv(g, k, v, i % 3 == 0 ? rid : NULL, NULL) == SLOTD_OK);
    }
}

static const uint16_t moved[] = {5, 9};

static void test_fence(void)
{
    struct grp a;
    grp_open(&a, 1);
    char k5[64], k6[64], v[64];
    struct slotd_error err;
    key_of_slot(5, 0, k5);
    key_of_slot(6, 0, k6);
    CU_ASSERT(put_kv(&a, k5, "before", NULL, NULL) == SLOTD_OK);
    uint8_t bm[32];
    bitmap_of(bm, moved, 2);
    CU_ASSERT(fence(&a, 9, bm, 32, NULL) == SLOTD_OK);
    CU_ASSERT(slot_group_fenced(&a.gs, 5) && slot_group_fenced(&a.gs, 9));
    CU_ASSERT(!slot_group_fenced(&a.gs, 6) && a.gs.migration_task == 9);
    check_reload(&a);

    uint64_t before = keyspace_digest(a.st);
    CU_ASSERT(put_kv(&a, k5, "during", NULL, &err) == SLOTD_EHASH_SLOT_FENCED);
    CU_ASSERT(strstr(err.message, "group 1: hash slot 5 is fenced by hash-slot migration task 9; "
                                  "retry after the route changes") != NULL);
    CU_ASSERT(put_kv(&a, k5, "during", "rid-x", &err) == SLOTD_EHASH_SLOT_FENCED);
    CU_ASSERT(keyspace_digest(a.st) == before);
    CU_ASSERT(get_kv(&a, k5, v) && strcmp(v, "before") == 0); /* reads go on */
    CU_ASSERT(put_kv(&a, k6, "other", NULL, NULL) == SLOTD_OK);

    struct slot_group_state was = a.gs;
    CU_ASSERT(fence(&a, 9, bm, 32, NULL) == SLOTD_OK); /* applied twice: same state */
    CU_ASSERT(gs_equal(&was, &a.gs));
    uint16_t foreign[] = {5, 200};
    uint8_t bad[32];
    bitmap_of(bad, foreign, 2);
    before = keyspace_digest(a.st);
    CU_ASSERT(fence(&a, 10, bad, 32, &err) == SLOTD_EWRONG_GROUP);
    CU_ASSERT(strstr(err.message, "hash slot 200 is not owned") != NULL);
    CU_ASSERT(fence(&a, 10, bm, 31, &err) == SLOTD_EINVALID_FIELD);
    CU_ASSERT(strcmp(err.field, "migration_fence.hash_slots") == 0 && err.limit == 32);
    memset(bad, 0, sizeof(bad));
    CU_ASSERT(fence(&a, 10, bad, 32, &err) == SLOTD_EINVALID_FIELD);
    CU_ASSERT(gs_equal(&was, &a.gs) && keyspace_digest(a.st) == before);
    check_reload(&a);
    grp_close(&a);
}

/* Source group 1 copies hash slots 5 and 9 into target group 2 in three chunks. */
static void test_copy_accept_release(void)
{
    struct grp a, b;
    grp_open(&a, 1);
    grp_open(&b, 2);
    struct slotd_error err;
    char k[64], v[64];
    fill_source(&a, 24);
    uint8_t bm[32];
    bitmap_of(bm, moved, 2);
    CU_ASSERT(fence(&a, 9, bm, 32, NULL) == SLOTD_OK);
    struct copy c;
    copy_read(&c, a.st, bm);
    CU_ASSERT_FATAL(c.n > 24); /* KV rows plus dedupe rows */
    size_t third = c.n / 3;
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 0, third, NULL, true) == SLOTD_OK);
    CU_ASSERT(slot_group_incoming(&b.gs, 5) && slot_group_incoming(&b.gs, 9));
    check_reload(&b);
    CU_ASSERT(send_chunk(&b, 9, bm, 1, &c, third, third, NULL, true) == SLOTD_OK);
    CU_ASSERT(send_chunk(&b, 9, bm, 2, &c, 2 * third, c.n - 2 * third, NULL, true) == SLOTD_OK);
    CU_ASSERT(b.gs.migration_chunks == 3 && b.gs.migration_rows == c.n);
    CU_ASSERT(b.gs.migration_crc == c.crc);
    check_reload(&b);

    /* Re-sent and skipped chunks are refused; nothing changes. */
    uint64_t before = keyspace_digest(b.st);
    struct slot_group_state was = b.gs;
    CU_ASSERT(send_chunk(&b, 9, bm, 1, &c, third, third, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(strstr(err.message, "migration rows: chunk 1 out of order, expected 3") != NULL);
    CU_ASSERT(send_chunk(&b, 9, bm, 4, &c, 0, 1, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(strstr(err.message, "chunk 4 out of order, expected 3") != NULL);
    CU_ASSERT(send_chunk(&b, 8, bm, 3, &c, 0, 1, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(keyspace_digest(b.st) == before && gs_equal(&was, &b.gs));

    /* Accept with a wrong count or checksum: refused, nothing owned. */
    CU_ASSERT(accept_copy(&b, 9, bm, 3, c.n + 1, c.crc, &err, true) == SLOTD_ESTALE_FENCE);
    char want[96];
    sprintf(want, "migration accept: %zu rows received, %zu sent", c.n, c.n + 1);
    CU_ASSERT(strstr(err.message, want) != NULL);
    CU_ASSERT(accept_copy(&b, 9, bm, 3, c.n, c.crc ^ 1, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(strstr(err.message, "checksum") != NULL);
    CU_ASSERT(accept_copy(&b, 9, bm, 2, c.n, c.crc, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(strstr(err.message, "3 chunks received, 2 sent") != NULL);
    CU_ASSERT(accept_copy(&b, 7, bm, 3, c.n, c.crc, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(!slot_group_owns(&b.gs, 5) && !slot_group_owns(&b.gs, 9));
    CU_ASSERT(gs_equal(&was, &b.gs) && keyspace_digest(b.st) == before);
    key_of_slot(5, 0, k);
    CU_ASSERT(put_kv(&b, k, "too early", NULL, &err) == SLOTD_EWRONG_GROUP);

    /* The right accept: the target owns the slots and holds the source's exact rows. */
    CU_ASSERT(accept_copy(&b, 9, bm, 3, c.n, c.crc, NULL, true) == SLOTD_OK);
    CU_ASSERT(slot_group_owns(&b.gs, 5) && slot_group_owns(&b.gs, 9));
    CU_ASSERT(!slot_group_incoming(&b.gs, 5) && b.gs.migration_rows == 0);
    CU_ASSERT(b.gs.migration_task == 9);
    check_reload(&b);
    check_same_rows(a.st, b.st, 5);
    check_same_rows(a.st, b.st, 9);
    was = b.gs;
    CU_ASSERT(accept_copy(&b, 9, bm, 3, c.n, c.crc, NULL, true) == SLOTD_OK); /* repeat */
    CU_ASSERT(gs_equal(&was, &b.gs));
    CU_ASSERT(get_kv(&b, k, v) && strcmp(v, "value-0") == 0);
    CU_ASSERT(put_kv(&b, k, "after", "rid-0", NULL) == SLOTD_OK); /* rid-0 was copied: dedupe */
    CU_ASSERT(get_kv(&b, k, v) && strcmp(v, "value-0") == 0);
    CU_ASSERT(put_kv(&b, k, "after", NULL, NULL) == SLOTD_OK);
    CU_ASSERT(get_kv(&b, k, v) && strcmp(v, "after") == 0);
    /* Chunks after the accept are refused: the slots are owned now. */
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 0, 1, &err, true) == SLOTD_EWRONG_GROUP);

    /* The source, still fenced, releases: ownership and rows go, repeats are fine. */
    CU_ASSERT(put_kv(&a, k, "stale", NULL, NULL) == SLOTD_EHASH_SLOT_FENCED);
    CU_ASSERT(release(&a, 9, bm, NULL) == SLOTD_OK);
    CU_ASSERT(!slot_group_owns(&a.gs, 5) && !slot_group_fenced(&a.gs, 5));
    CU_ASSERT(rows_in_slot(a.st, 5) == 0 && rows_in_slot(a.st, 9) == 0);
    CU_ASSERT(slot_group_owns(&a.gs, 6));
    check_reload(&a);
    CU_ASSERT(release(&a, 9, bm, NULL) == SLOTD_OK);
    CU_ASSERT(put_kv(&a, k, "stale", NULL, &err) == SLOTD_EWRONG_GROUP);
    CU_ASSERT(!get_kv(&a, k, v));
    copy_free(&c);
    grp_close(&a);
    grp_close(&b);
}

static void test_release_refused(void)
{
    struct grp a;
    grp_open(&a, 1);
    struct slotd_error err;
    fill_source(&a, 6);
    uint8_t bm[32];
    bitmap_of(bm, moved, 2);
    uint64_t before = keyspace_digest(a.st);
    CU_ASSERT(release(&a, 9, bm, &err) == SLOTD_ESTALE_FENCE); /* owned, not fenced */
    CU_ASSERT(strstr(err.message, "hash slot 5 is not fenced") != NULL);
    uint16_t mixed[] = {5, 130};
    uint8_t mb[32];
    bitmap_of(mb, mixed, 2);
    CU_ASSERT(release(&a, 9, mb, &err) == SLOTD_EWRONG_GROUP);
    CU_ASSERT(strstr(err.message, "hash slot 130 is not owned") != NULL);
    CU_ASSERT(keyspace_digest(a.st) == before && slot_group_owns(&a.gs, 5));
    check_reload(&a);
    grp_close(&a);
}

/* Bad chunks are refused whole. */
static void test_rows_refused(void)
{
    struct grp b;
    grp_open(&b, 2);
    struct slotd_error err;
    uint8_t bm[32];
    bitmap_of(bm, moved, 2);
    struct copy c;
    memset(&c, 0, sizeof(c));
    uint8_t k0[3] = {0, 5, 1}, k1[4] = {0, 6, 1, 'x'}, k2[2] = {0, 5}, val[2] = {1, 2};
    uint8_t *keys[] = {k0, k1, k2};
    size_t lens[] = {3, 4, 2};
    for (size_t i = 0; i < 3; i++) {
        slotd__internal__v1__migration_row__init(&c.rows[i]);
        c.rows[i].key.data = keys[i];
        c.rows[i].key.len = lens[i];
        c.rows[i].value.data = val;
        c.rows[i].value.len = sizeof(val);
        c.ptrs[i] = &c.rows[i];
    }
    uint64_t before = keyspace_digest(b.st);
    struct slot_group_state was = b.gs;
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 0, 2, &err, true) == SLOTD_EINVALID_FIELD);
    CU_ASSERT(strcmp(err.field, "rows[1].key") == 0); /* hash slot 6 is not in the chunk */
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 2, 1, &err, true) == SLOTD_EINVALID_FIELD);
    CU_ASSERT(strcmp(err.field, "rows[0].key") == 0 && err.limit == STORE_FSM_KEY_MAX);
    uint16_t owned[] = {5, 140};
    uint8_t ob[32];
    bitmap_of(ob, owned, 2);
    CU_ASSERT(send_chunk(&b, 9, ob, 0, &c, 0, 1, &err, true) == SLOTD_EWRONG_GROUP);
    CU_ASSERT(strstr(err.message, "hash slot 140 is owned") != NULL);
    CU_ASSERT(send_chunk(&b, 9, bm, 1, &c, 0, 1, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(keyspace_digest(b.st) == before && gs_equal(&was, &b.gs));
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 0, 1, NULL, true) == SLOTD_OK);
    CU_ASSERT(rows_in_slot(b.st, 5) == 1);
    check_reload(&b);
    grp_close(&b);
}

/* Chunk 0 of a new attempt drops what the previous attempt left, in the store and in the same
 * batch; later reads of that batch see the drop. */
static void test_second_attempt(void)
{
    struct grp a, b;
    grp_open(&a, 1);
    grp_open(&b, 2);
    fill_source(&a, 12);
    uint8_t bm[32];
    bitmap_of(bm, moved, 2);
    struct copy c;
    copy_read(&c, a.st, bm);
    CU_ASSERT_FATAL(c.n >= 4);
    /* Attempt 1 (task 9) commits two chunks. */
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 0, 2, NULL, true) == SLOTD_OK);
    CU_ASSERT(send_chunk(&b, 9, bm, 1, &c, 2, c.n - 2, NULL, true) == SLOTD_OK);
    CU_ASSERT(rows_in_slot(b.st, 5) + rows_in_slot(b.st, 9) == c.n);
    /* Attempt 2 (task 10) in one batch: chunk 0 with one row, then chunk 0 again (attempt 3,
     * task 11) with none, then the accept and a KV put on a key attempt 1 stored. */
    slot_fsm_begin(b.fsm);
    CU_ASSERT(send_chunk(&b, 10, bm, 0, &c, 0, 1, NULL, false) == SLOTD_OK);
    CU_ASSERT(b.gs.migration_task == 10 && b.gs.migration_chunks == 1);
    CU_ASSERT(send_chunk(&b, 11, bm, 0, &c, 0, 0, NULL, false) == SLOTD_OK);
    CU_ASSERT(accept_copy(&b, 11, bm, 1, 0, 0, NULL, false) == SLOTD_OK);
    char k[64], v[64];
    key_of_slot(9, 1, k); /* value-1: stored by attempt 1 only (attempt 2 sent a row of 5) */
    Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
    p.key.data = (uint8_t *)k;
    p.key.len = strlen(k);
    p.value.data = (uint8_t *)"new";
    p.value.len = 3;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.hash_slot = 9;
    cmd.command_case = CMD(PUT);
    cmd.put = &p;
    size_t len = slotd__internal__v1__log_command__get_packed_size(&cmd);
    uint8_t data[256];
    CU_ASSERT_FATAL(len <= sizeof(data));
    slotd__internal__v1__log_command__pack(&cmd, data);
    struct slot_result res;
    CU_ASSERT(slot_fsm_apply(b.fsm, &b.gs, b.next_index++, 7, data, len, &res) == 0);
    CU_ASSERT_FATAL(res.err.code == SLOTD_OK);
    Slotd__V1__ProposeResponse *r =
        slotd__v1__propose_response__unpack(NULL, res.resp_len, res.resp);
    CU_ASSERT_FATAL(r != NULL && r->put != NULL);
    CU_ASSERT(r->put->prev_version == 0); /* the drop hides the stored row in the batch */
    slotd__v1__propose_response__free_unpacked(r, NULL);
    free(res.resp);
    CU_ASSERT(slot_fsm_commit(b.fsm) == 0);
    CU_ASSERT(rows_in_slot(b.st, 5) == 0 && rows_in_slot(b.st, 9) == 1);
    CU_ASSERT(get_kv(&b, k, v) && strcmp(v, "new") == 0);
    check_reload(&b);
    copy_free(&c);
    grp_close(&a);
    grp_close(&b);
}

/* A failed migration: the source lifts its fence, the target drops its copy. */
static void test_abort(void)
{
    struct grp a, b;
    grp_open(&a, 1);
    grp_open(&b, 2);
    struct slotd_error err;
    fill_source(&a, 10);
    uint8_t bm[32];
    bitmap_of(bm, moved, 2);
    CU_ASSERT(fence(&a, 9, bm, 32, NULL) == SLOTD_OK);
    struct copy c;
    copy_read(&c, a.st, bm);
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 0, 3, NULL, true) == SLOTD_OK);
    CU_ASSERT(send_chunk(&b, 9, bm, 1, &c, 3, c.n - 3, NULL, true) == SLOTD_OK);
    uint64_t source_rows = keyspace_digest(a.st);

    /* Source side. */
    CU_ASSERT(abort_copy(&a, 9, bm, NULL) == SLOTD_OK);
    CU_ASSERT(!slot_group_fenced(&a.gs, 5) && !slot_group_fenced(&a.gs, 9));
    CU_ASSERT(slot_group_owns(&a.gs, 5) && keyspace_digest(a.st) == source_rows);
    check_reload(&a);
    CU_ASSERT(abort_copy(&a, 9, bm, NULL) == SLOTD_OK); /* repeat */
    char k[64], v[64];
    key_of_slot(5, 0, k);
    CU_ASSERT(put_kv(&a, k, "writable", NULL, NULL) == SLOTD_OK);
    CU_ASSERT(get_kv(&a, k, v) && strcmp(v, "writable") == 0);

    /* Target side: another task's abort changes nothing, this task's drops the copy. */
    uint64_t target_rows = keyspace_digest(b.st);
    struct slot_group_state was = b.gs;
    CU_ASSERT(abort_copy(&b, 8, bm, NULL) == SLOTD_OK);
    CU_ASSERT(gs_equal(&was, &b.gs) && keyspace_digest(b.st) == target_rows);
    CU_ASSERT(abort_copy(&b, 9, bm, NULL) == SLOTD_OK);
    CU_ASSERT(rows_in_slot(b.st, 5) == 0 && rows_in_slot(b.st, 9) == 0);
    CU_ASSERT(!slot_group_incoming(&b.gs, 5) && b.gs.migration_chunks == 0);
    CU_ASSERT(b.gs.migration_rows == 0 && b.gs.migration_crc == 0);
    check_reload(&b);
    CU_ASSERT(abort_copy(&b, 9, bm, NULL) == SLOTD_OK);
    CU_ASSERT(accept_copy(&b, 9, bm, 2, c.n, c.crc, &err, true) == SLOTD_ESTALE_FENCE);
    CU_ASSERT(!slot_group_owns(&b.gs, 5));
    copy_free(&c);
    grp_close(&a);
    grp_close(&b);
}

/* Both groups on one node: the claim callback of the runtime, over the two group states. */
static struct grp *hosted[2];

static bool claimed_elsewhere(void *ctx, uint32_t group, uint16_t hash_slot)
{
    CU_ASSERT(ctx == (void *)hosted);
    for (int i = 0; i < 2; i++) {
        const struct slot_group_state *o = &hosted[i]->gs;
        if (o->group != group &&
            (slot_group_owns(o, hash_slot) || slot_group_incoming(o, hash_slot)))
            return true;
    }
    return false;
}

/* Two groups hosted on one node share its rows of a hash slot: the copy's chunk 0, an abort on
 * the target and the release on the source leave the rows the other group claims alone. */
static void test_shared_node(void)
{
    struct grp a, b;
    grp_open(&a, 1);
    b = a; /* the same store and fsm, as in the runtime */
    b.gs.group = 2;
    uint32_t table[256];
    CU_ASSERT_FATAL(route_split_ranges(2, table) == 0);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_group_init(2, table, &data, &len) == 0);
    memset(&b.gs, 0, sizeof(b.gs));
    b.gs.group = 2;
    slot_fsm_begin(b.fsm);
    CU_ASSERT_FATAL(slot_fsm_apply(b.fsm, &b.gs, 1, 1, data, len, NULL) == 0);
    CU_ASSERT_FATAL(slot_fsm_commit(b.fsm) == 0);
    free(data);
    hosted[0] = &a;
    hosted[1] = &b;
    slot_fsm_set_claim_cb(a.fsm, claimed_elsewhere, hosted);
    fill_source(&a, 10);
    uint8_t bm[32];
    bitmap_of(bm, moved, 2);
    CU_ASSERT(fence(&a, 9, bm, 32, NULL) == SLOTD_OK);
    struct copy c;
    copy_read(&c, a.st, bm);
    uint64_t rows_at_fence = keyspace_digest(a.st);

    /* Attempt 1 is aborted on the target: the source's rows stay. */
    CU_ASSERT(send_chunk(&b, 9, bm, 0, &c, 0, c.n, NULL, true) == SLOTD_OK);
    CU_ASSERT(abort_copy(&b, 9, bm, NULL) == SLOTD_OK);
    CU_ASSERT(!slot_group_incoming(&b.gs, 5) && keyspace_digest(a.st) == rows_at_fence);

    /* Attempt 2 completes; the source's release leaves the rows the target now owns. */
    CU_ASSERT(send_chunk(&b, 10, bm, 0, &c, 0, 2, NULL, true) == SLOTD_OK);
    CU_ASSERT(send_chunk(&b, 10, bm, 1, &c, 2, c.n - 2, NULL, true) == SLOTD_OK);
    CU_ASSERT(keyspace_digest(a.st) == rows_at_fence);
    CU_ASSERT(accept_copy(&b, 10, bm, 2, c.n, c.crc, NULL, true) == SLOTD_OK);
    char k[64], v[64];
    key_of_slot(5, 0, k);
    CU_ASSERT(put_kv(&b, k, "by target", NULL, NULL) == SLOTD_OK);
    CU_ASSERT(release(&a, 9, bm, NULL) == SLOTD_OK);
    CU_ASSERT(!slot_group_owns(&a.gs, 5) && slot_group_owns(&b.gs, 5));
    CU_ASSERT(get_kv(&b, k, v) && strcmp(v, "by target") == 0);
    key_of_slot(9, 1, k);
    CU_ASSERT(get_kv(&b, k, v) && strcmp(v, "value-1") == 0);
    CU_ASSERT(rows_in_slot(a.st, 5) + rows_in_slot(a.st, 9) == c.n);

    /* Without another claim the release deletes: hash slot 9 back to group 1 and out again. */
    uint16_t nine[] = {9};
    uint8_t b9[32];
    bitmap_of(b9, nine, 1);
    CU_ASSERT(fence(&b, 11, b9, 32, NULL) == SLOTD_OK);
    CU_ASSERT(release(&b, 11, b9, NULL) == SLOTD_OK);
    CU_ASSERT(rows_in_slot(a.st, 9) == 0 && rows_in_slot(a.st, 5) > 0);
    copy_free(&c);
    grp_close(&a); /* b shares a's store and fsm */
}

static void test_record(void)
{
    struct slot_group_state gs, out;
    memset(&gs, 0, sizeof(gs));
    for (int i = 0; i < 32; i++) {
        gs.fenced[i] = (uint8_t)(i * 7 + 1);
        gs.incoming[i] = (uint8_t)(255 - i);
    }
    gs.migration_task = 0x0102030405060708ull;
    gs.migration_chunks = 0xA1B2C3D4u;
    gs.migration_rows = 0x1112131415161718ull;
    gs.migration_crc = 0xDEADBEEFu;
    uint8_t rec[SLOT_GROUP_META_MIGRATION_LEN + 1];
    slot_group_migration_encode(&gs, rec);
    CU_ASSERT(rec[0] == 1 && rec[65] == 0x01 && rec[72] == 0x08 && rec[88] == 0xEF);
    memset(&out, 0, sizeof(out));
    CU_ASSERT(slot_group_migration_decode(rec, SLOT_GROUP_META_MIGRATION_LEN, &out) == 0);
    CU_ASSERT(gs_equal(&gs, &out));
    struct slot_group_state zero;
    memset(&zero, 0, sizeof(zero));
    memset(&out, 0, sizeof(out));
    CU_ASSERT(slot_group_migration_decode(rec, 88, &out) == STORE_ECORRUPT);
    CU_ASSERT(slot_group_migration_decode(rec, 90, &out) == STORE_ECORRUPT);
    rec[0] = 2;
    CU_ASSERT(slot_group_migration_decode(rec, SLOT_GROUP_META_MIGRATION_LEN, &out) ==
              STORE_ECORRUPT);
    CU_ASSERT(gs_equal(&zero, &out)); /* unchanged on error */

    /* A corrupt stored record stops the load. */
    struct grp g;
    grp_open(&g, 1);
    uint8_t key[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(key, 1, SLOT_GROUP_META_MIGRATION);
    struct store_fsm_batch *batch;
    CU_ASSERT_FATAL(store_fsm_batch_new(&batch) == 0);
    store_fsm_batch_put(batch, key, sizeof(key), rec, SLOT_GROUP_META_MIGRATION_LEN);
    CU_ASSERT(store_fsm_write(g.st, batch, false) == 0);
    CU_ASSERT(slot_fsm_load_group(g.fsm, 1, &out) == STORE_ECORRUPT);
    rec[0] = 1;
    store_fsm_batch_clear(batch);
    store_fsm_batch_put(batch, key, sizeof(key), rec, 40);
    CU_ASSERT(store_fsm_write(g.st, batch, false) == 0);
    CU_ASSERT(slot_fsm_load_group(g.fsm, 1, &out) == STORE_ECORRUPT);
    store_fsm_batch_clear(batch);
    store_fsm_batch_put(batch, key, sizeof(key), rec, SLOT_GROUP_META_MIGRATION_LEN);
    CU_ASSERT(store_fsm_write(g.st, batch, false) == 0);
    CU_ASSERT(slot_fsm_load_group(g.fsm, 1, &out) == 0);
    CU_ASSERT(out.migration_crc == 0xDEADBEEFu && out.initialized);
    store_fsm_batch_free(batch);
    grp_close(&g);
}

static void test_row_crc(void)
{
    CU_ASSERT(route_crc32("123456789", 9) == 0xCBF43926u);
    CU_ASSERT(route_crc32_update(0, "123456789", 9) == 0xCBF43926u);
    CU_ASSERT(route_crc32_update(route_crc32_update(0, "1234", 4), "56789", 5) == 0xCBF43926u);
    CU_ASSERT(route_crc32_update(0, NULL, 0) == 0);
    /* be32(kl) | key | be32(vl) | value, chained over two rows. */
    uint8_t flat[64];
    size_t n = 0;
    const char *rows[2][2] = {{"key-a", "v1"}, {"kb", ""}};
    uint32_t chained = 0;
    for (int i = 0; i < 2; i++) {
        size_t kl = strlen(rows[i][0]), vl = strlen(rows[i][1]);
        store_put_u32(flat + n, (uint32_t)kl);
        memcpy(flat + n + 4, rows[i][0], kl);
        n += 4 + kl;
        store_put_u32(flat + n, (uint32_t)vl);
        memcpy(flat + n + 4, rows[i][1], vl);
        n += 4 + vl;
        chained = slot_migration_row_crc(chained, rows[i][0], kl, rows[i][1], vl);
    }
    CU_ASSERT(chained == route_crc32(flat, n));
    CU_ASSERT(slot_migration_row_crc(0, "a", 1, "b", 1) !=
              slot_migration_row_crc(0, "ab", 2, "", 0));
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("slot_migrate", NULL, NULL);
    CU_add_test(s, "fence_refuses_writes", test_fence);
    CU_add_test(s, "copy_accept_release", test_copy_accept_release);
    CU_add_test(s, "release_refused", test_release_refused);
    CU_add_test(s, "rows_refused", test_rows_refused);
    CU_add_test(s, "second_attempt_drops_first", test_second_attempt);
    CU_add_test(s, "abort_both_sides", test_abort);
    CU_add_test(s, "shared_node_rows", test_shared_node);
    CU_add_test(s, "migration_record", test_record);
    CU_add_test(s, "row_crc", test_row_crc);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
