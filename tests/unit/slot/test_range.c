/* test_range.c - CUnit tests of the Range query: scans of a group's hash slots, pages, cursors. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/slot.h"

static struct store *st;
static struct slot_fsm *fsm;
static struct slot_group_state gs;
static uint64_t next_index;
static uint64_t versions[400]; /* version of key i (0..299 "p/<i>", 300..399 "q/<i>") */
static char names[400][32];

/* Group 1 of 2 owns hash slots 0..127; it holds 300 keys under "p/" and 100 under "q/" (only
 * keys of its hash slots). */
static void setup(void)
{
    uint32_t table[256];
    CU_ASSERT_FATAL(store_open_memory(&st) == 0);
    CU_ASSERT_FATAL(slot_fsm_new(st, &fsm) == 0);
    CU_ASSERT_FATAL(route_split_ranges(2, table) == 0);
    CU_ASSERT_FATAL(slot_fsm_load_group(fsm, 1, &gs) == 0);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_group_init(1, table, &data, &len) == 0);
    slot_fsm_begin(fsm);
    CU_ASSERT(slot_fsm_apply(fsm, &gs, 1, 1, data, len, NULL) == 0);
    free(data);
    next_index = 2;
    int n = 0;
    for (int i = 0; n < 400; i++) {
        char k[32];
        snprintf(k, sizeof(k), "%s/%05d", n < 300 ? "p" : "q", i);
        if (route_hash_slot(k, strlen(k)) >= 128)
            continue;
        strcpy(names[n], k);
        char v[32];
        snprintf(v, sizeof(v), "value-%d", n);
        Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
        p.key.data = (uint8_t *)names[n];
        p.key.len = strlen(k);
        p.value.data = (uint8_t *)v;
        p.value.len = strlen(v);
        Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
        req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
        req.put = &p;
        CU_ASSERT_FATAL(slot_encode_command(&req, route_hash_slot(k, strlen(k)), &data, &len) == 0);
        struct slot_result res;
        versions[n] = next_index;
        CU_ASSERT_FATAL(slot_fsm_apply(fsm, &gs, next_index++, 3, data, len, &res) == 0);
        CU_ASSERT_FATAL(res.err.code == SLOTD_OK);
        free(res.resp);
        free(data);
        n++;
    }
    slot_fsm_set_applied(fsm, 1, next_index - 1);
    CU_ASSERT_FATAL(slot_fsm_commit(fsm) == 0);
}

static void teardown(void)
{
    slot_fsm_free(fsm);
    store_close(st);
}

static int find_name(const ProtobufCBinaryData *k)
{
    for (int i = 0; i < 400; i++)
        if (strlen(names[i]) == k->len && memcmp(names[i], k->data, k->len) == 0)
            return i;
    return -1;
}

/* Serves one page through slot_serve_read (the cursor's hash slot, owned bitmap); NULL with
 * *code on error. */
static Slotd__V1__ReadResponse *page(Slotd__V1__RangeQuery *q, const uint8_t *owned, int *code,
                                     char *field)
{
    Slotd__V1__ReadRequest req = SLOTD__V1__READ_REQUEST__INIT;
    req.query_case = SLOTD__V1__READ_REQUEST__QUERY_RANGE;
    req.range = q;
    const ProtobufCBinaryData *key;
    struct slotd_error err = {.code = SLOTD_OK};
    *code = SLOTD_OK;
    if (slot_validate_read(&req, &key, &err) != 0) {
        *code = err.code;
        if (field)
            strcpy(field, err.field);
        return NULL;
    }
    uint16_t hs = route_hash_slot(key->data, key->len);
    ProtobufCBinaryData last;
    CU_ASSERT_FATAL(slot_range_cursor_decode(q, &hs, &last) == 0);
    CU_ASSERT(route_hash_slot(key->data, key->len) == hs); /* routed by the cursor's hash slot */
    size_t len = slotd__v1__read_request__get_packed_size(&req);
    uint8_t *buf = malloc(len + 1);
    slotd__v1__read_request__pack(&req, buf);
    uint8_t *out;
    size_t out_len;
    int rc = slot_serve_read(st, owned, hs, buf, len, 1, next_index - 1, 3, &out, &out_len, &err);
    free(buf);
    if (rc != 0) {
        *code = err.code;
        return NULL;
    }
    Slotd__V1__ReadResponse *r = slotd__v1__read_response__unpack(NULL, out_len, out);
    free(out);
    CU_ASSERT_FATAL(r != NULL && r->result_case == SLOTD__V1__READ_RESPONSE__RESULT_RANGE);
    return r;
}

static const uint8_t all_owned[32] = {[0 ... 31] = 0xFF};

/* Drains q; counts[i] is how often key i was returned; returns the pages. */
static int drain(Slotd__V1__RangeQuery *q, int counts[400], int *others, bool values)
{
    int pages = 0;
    uint8_t cur[2048];
    q->cursor.len = 0;
    for (;;) {
        int code;
        Slotd__V1__ReadResponse *r = page(q, all_owned, &code, NULL);
        CU_ASSERT_FATAL(r != NULL);
        pages++;
        uint32_t lim = q->limit ? q->limit : 100;
        CU_ASSERT(r->range->count <= lim);
        if (!q->count_only) {
            CU_ASSERT(r->range->n_entries == r->range->count);
        }
        int prev_hs = -1;
        for (size_t i = 0; i < r->range->n_entries; i++) {
            Slotd__V1__RangeEntry *e = r->range->entries[i];
            int hs = route_hash_slot(e->key.data, e->key.len);
            CU_ASSERT(hs >= prev_hs); /* hash-slot order */
            prev_hs = hs;
            int n = find_name(&e->key);
            if (n < 0) {
                (*others)++;
                continue;
            }
            counts[n]++;
            CU_ASSERT(e->version == versions[n]);
            char v[32];
            snprintf(v, sizeof(v), "value-%d", n);
            if (values) {
                CU_ASSERT(e->value.len == strlen(v) && memcmp(e->value.data, v, e->value.len) == 0);
            } else {
                CU_ASSERT(e->value.len == 0);
            }
        }
        if (q->count_only)
            *others += (int)r->range->count; /* counted, not listed */
        bool more = r->range->more;
        CU_ASSERT_FATAL(r->range->cursor.len <= sizeof(cur));
        if (r->range->cursor.len > 0)
            memcpy(cur, r->range->cursor.data, r->range->cursor.len);
        q->cursor.data = cur;
        q->cursor.len = r->range->cursor.len;
        CU_ASSERT(more == (q->cursor.len > 0));
        slotd__v1__read_response__free_unpacked(r, NULL);
        if (!more || pages > 2000)
            break;
    }
    return pages;
}

static void bin(ProtobufCBinaryData *d, const char *s)
{
    d->data = (uint8_t *)s;
    d->len = strlen(s);
}

static void test_prefix_pages(void)
{
    setup();
    Slotd__V1__RangeQuery q = SLOTD__V1__RANGE_QUERY__INIT;
    bin(&q.prefix, "p/");
    q.limit = 7;
    int counts[400] = {0}, others = 0;
    int pages = drain(&q, counts, &others, true);
    CU_ASSERT(pages >= 300 / 7);
    CU_ASSERT(others == 0);
    for (int i = 0; i < 400; i++)
        CU_ASSERT(counts[i] == (i < 300 ? 1 : 0));

    /* keys_only: the same keys without values; count_only: only counts, summing to 300. */
    memset(counts, 0, sizeof(counts));
    q.keys_only = true;
    drain(&q, counts, &others, false);
    for (int i = 0; i < 400; i++)
        CU_ASSERT(counts[i] == (i < 300 ? 1 : 0));
    q.keys_only = false;
    q.count_only = true;
    q.limit = 0;
    memset(counts, 0, sizeof(counts));
    drain(&q, counts, &others, false);
    CU_ASSERT(others == 300);
    teardown();
}

static void test_start_end(void)
{
    setup();
    /* [start, end): "p/" keys from the 100th name to the 200th (names sort by number). */
    Slotd__V1__RangeQuery q = SLOTD__V1__RANGE_QUERY__INIT;
    bin(&q.start, names[100]);
    bin(&q.end, names[200]);
    q.limit = 13;
    int counts[400] = {0}, others = 0;
    drain(&q, counts, &others, true);
    CU_ASSERT(others == 0);
    for (int i = 0; i < 400; i++)
        CU_ASSERT(counts[i] == (i >= 100 && i < 200 ? 1 : 0));
    /* end empty: to the end of the keyspace; no bounds: every key. */
    q.end.len = 0;
    memset(counts, 0, sizeof(counts));
    drain(&q, counts, &others, true);
    for (int i = 0; i < 400; i++)
        CU_ASSERT(counts[i] == (i >= 100 ? 1 : 0));
    q.start.len = 0;
    q.limit = 1000;
    memset(counts, 0, sizeof(counts));
    drain(&q, counts, &others, true);
    for (int i = 0; i < 400; i++)
        CU_ASSERT(counts[i] == 1);
    teardown();
}

/* A page stops at the end of the group's run of owned hash slots: the cursor names the next. */
static void test_owned_run(void)
{
    setup();
    Slotd__V1__RangeQuery q = SLOTD__V1__RANGE_QUERY__INIT;
    q.limit = 1000;
    int code;
    Slotd__V1__ReadResponse *r = page(&q, gs.owned, &code, NULL);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT(r->range->count == 400);
    CU_ASSERT(r->range->more);
    uint16_t hs;
    ProtobufCBinaryData last;
    q.cursor = r->range->cursor;
    CU_ASSERT(slot_range_cursor_decode(&q, &hs, &last) == 0);
    CU_ASSERT(hs == 128 && last.len == 0);
    slotd__v1__read_response__free_unpacked(r, NULL);
    /* owned NULL: the cursor's hash slot alone. */
    q.cursor.len = 0;
    r = page(&q, NULL, &code, NULL);
    CU_ASSERT_FATAL(r != NULL);
    int in0 = 0;
    for (int i = 0; i < 400; i++)
        in0 += route_hash_slot(names[i], strlen(names[i])) == 0;
    CU_ASSERT(r->range->count == (uint32_t)in0);
    CU_ASSERT(r->range->more);
    slotd__v1__read_response__free_unpacked(r, NULL);
    teardown();
}

static void expect_invalid(Slotd__V1__RangeQuery *q, const char *field)
{
    int code;
    char f[64] = "";
    Slotd__V1__ReadResponse *r = page(q, all_owned, &code, f);
    CU_ASSERT(r == NULL);
    CU_ASSERT(code == SLOTD_EINVALID_FIELD);
    CU_ASSERT_STRING_EQUAL(f, field);
    if (r != NULL)
        slotd__v1__read_response__free_unpacked(r, NULL);
}

static void test_bad_input(void)
{
    setup();
    Slotd__V1__RangeQuery q = SLOTD__V1__RANGE_QUERY__INIT;
    q.limit = 1001;
    expect_invalid(&q, "range.limit");
    q.limit = 1000;
    bin(&q.prefix, "p/");
    bin(&q.start, "a");
    expect_invalid(&q, "range.prefix");
    q.prefix.len = 0;
    bin(&q.end, "a");
    expect_invalid(&q, "range.end"); /* end not after start */
    q.start.len = q.end.len = 0;
    /* Forged cursors: garbage, a flipped byte, a hash slot >= 256, another range's cursor. */
    bin(&q.cursor, "not a cursor");
    expect_invalid(&q, "range.cursor");
    Slotd__V1__RangeQuery p = SLOTD__V1__RANGE_QUERY__INIT;
    bin(&p.prefix, "p/");
    p.limit = 3;
    int code;
    Slotd__V1__ReadResponse *r = page(&p, all_owned, &code, NULL);
    CU_ASSERT_FATAL(r != NULL && r->range->more);
    uint8_t c[2048];
    size_t cl = r->range->cursor.len;
    memcpy(c, r->range->cursor.data, cl);
    slotd__v1__read_response__free_unpacked(r, NULL);
    p.cursor.data = c;
    p.cursor.len = cl;
    r = page(&p, all_owned, &code, NULL); /* the genuine cursor continues */
    CU_ASSERT(r != NULL);
    if (r != NULL) {
        slotd__v1__read_response__free_unpacked(r, NULL);
    }
    c[cl - 1] ^= 1;
    expect_invalid(&p, "range.cursor");
    c[cl - 1] ^= 1;
    q.cursor = p.cursor; /* made for prefix "p/", sent with no bounds */
    expect_invalid(&q, "range.cursor");
    p.cursor.len = 5;
    expect_invalid(&p, "range.cursor");
    teardown();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("slot_range", NULL, NULL);
    CU_add_test(s, "prefix_pages", test_prefix_pages);
    CU_add_test(s, "start_end", test_start_end);
    CU_add_test(s, "owned_run", test_owned_run);
    CU_add_test(s, "bad_input", test_bad_input);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
