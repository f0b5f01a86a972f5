/* test_slot.c - CUnit tests of the slot layer: request validation, FSM apply, ownership and dedupe.
 */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/slot.h"
#include "store/keys.h"

static struct store *st;
static struct slot_fsm *fsm;
static struct slot_group_state gs;
static uint64_t next_index;

/* Group 1 of 2 owns hash slots 0..127. */
static void setup(void)
{
    uint32_t table[256];
    CU_ASSERT_FATAL(store_open_memory(&st) == 0);
    CU_ASSERT_FATAL(slot_fsm_new(st, &fsm) == 0);
    CU_ASSERT_FATAL(route_split_ranges(2, table) == 0);
    CU_ASSERT_FATAL(slot_fsm_load_group(fsm, 1, &gs) == 0);
    CU_ASSERT(!gs.initialized);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_group_init(1, table, &data, &len) == 0);
    slot_fsm_begin(fsm);
    CU_ASSERT(slot_fsm_apply(fsm, &gs, 1, 1, data, len, NULL) == 0);
    slot_fsm_set_applied(fsm, 1, 1);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    free(data);
    next_index = 2;
}

static void teardown(void)
{
    slot_fsm_free(fsm);
    store_close(st);
}

/* A key whose hash slot is owned (want_owned) or not by group 1. */
static void pick_key(bool want_owned, int n, char *out)
{
    for (int i = 0;; i++) {
        sprintf(out, "key-%d-%d", n, i);
        uint16_t hs = route_hash_slot(out, strlen(out));
        if ((hs < 128) == want_owned)
            return;
    }
}

/* Applies one ProposeRequest as the next entry; returns the unpacked response (or NULL with
 * *code set to the error). */
static Slotd__V1__ProposeResponse *apply_req(Slotd__V1__ProposeRequest *req, int *code,
                                             bool own_batch)
{
    const ProtobufCBinaryData *key;
    struct slotd_error err;
    CU_ASSERT_FATAL(slot_validate_propose(req, &key, &err) == 0);
    uint16_t hs = route_hash_slot(key->data, key->len);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_command(req, hs, &data, &len) == 0);
    struct slot_result res;
    if (own_batch)
        slot_fsm_begin(fsm);
    uint64_t index = next_index++;
    CU_ASSERT_FATAL(slot_fsm_apply(fsm, &gs, index, 3, data, len, &res) == 0);
    slot_fsm_set_applied(fsm, 1, index);
    if (own_batch)
        CU_ASSERT_FATAL(slot_fsm_commit(fsm) == 0);
    free(data);
    *code = res.err.code;
    if (res.err.code != SLOTD_OK)
        return NULL;
    Slotd__V1__ProposeResponse *resp =
        slotd__v1__propose_response__unpack(NULL, res.resp_len, res.resp);
    free(res.resp);
    CU_ASSERT_FATAL(resp != NULL);
    return resp;
}

static Slotd__V1__ProposeResponse *put(const char *key, const char *value, const char *rid,
                                       int *code, bool own_batch)
{
    Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.value.data = (uint8_t *)value;
    p.value.len = strlen(value);
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    req.put = &p;
    if (rid) {
        req.request_id.data = (uint8_t *)rid;
        req.request_id.len = strlen(rid);
    }
    return apply_req(&req, code, own_batch);
}

static Slotd__V1__ProposeResponse *cas(const char *key, uint64_t expected, const char *value,
                                       bool del, bool own_batch)
{
    Slotd__V1__CompareAndSetCommand c = SLOTD__V1__COMPARE_AND_SET_COMMAND__INIT;
    c.key.data = (uint8_t *)key;
    c.key.len = strlen(key);
    c.expected_version = expected;
    c.value.data = (uint8_t *)value;
    c.value.len = strlen(value);
    c.delete_ = del;
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_COMPARE_AND_SET;
    req.compare_and_set = &c;
    int code;
    Slotd__V1__ProposeResponse *r = apply_req(&req, &code, own_batch);
    CU_ASSERT(code == SLOTD_OK);
    return r;
}

/* Stored value of key ("" and version 0 when absent). */
static uint64_t get(const char *key, char *value_out)
{
    bool found;
    void *v;
    size_t vl;
    uint64_t version;
    CU_ASSERT_FATAL(slot_fsm_get(st, route_hash_slot(key, strlen(key)), key, strlen(key), &found,
                                 &v, &vl, &version) == 0);
    value_out[0] = '\0';
    if (found) {
        memcpy(value_out, v, vl);
        value_out[vl] = '\0';
    }
    free(v);
    return found ? version : 0;
}

static void test_put_get_delete(void)
{
    setup();
    char k[64], v[64];
    int code;
    pick_key(true, 1, k);
    Slotd__V1__ProposeResponse *r = put(k, "v1", NULL, &code, true);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT(r->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT);
    CU_ASSERT(r->put->version == r->applied_index);
    CU_ASSERT(r->put->prev_version == 0);
    CU_ASSERT(r->group_id == 1 && r->term == 3);
    uint64_t v1 = r->put->version;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(k, v) == v1);
    CU_ASSERT_STRING_EQUAL(v, "v1");
    r = put(k, "v2", NULL, &code, true);
    CU_ASSERT(r->put->prev_version == v1);
    slotd__v1__propose_response__free_unpacked(r, NULL);

    Slotd__V1__DeleteCommand d = SLOTD__V1__DELETE_COMMAND__INIT;
    d.key.data = (uint8_t *)k;
    d.key.len = strlen(k);
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_DELETE;
    req.delete_ = &d;
    r = apply_req(&req, &code, true);
    CU_ASSERT(r->delete_->deleted && r->delete_->prev_version > v1);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(k, v) == 0);
    r = apply_req(&req, &code, true);
    CU_ASSERT(!r->delete_->deleted && r->delete_->prev_version == 0);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    uint64_t applied = 0;
    CU_ASSERT(store_fsm_applied(st, 1, &applied) == 0);
    CU_ASSERT(applied == next_index - 1);
    teardown();
}

static void test_cas(void)
{
    setup();
    char k[64], v[64];
    pick_key(true, 2, k);
    Slotd__V1__ProposeResponse *r = cas(k, 0, "a", false, true); /* create */
    CU_ASSERT(r->compare_and_set->succeeded);
    uint64_t ver = r->compare_and_set->version;
    CU_ASSERT(ver == r->applied_index);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    r = cas(k, 0, "b", false, true); /* wrong: exists */
    CU_ASSERT(!r->compare_and_set->succeeded);
    CU_ASSERT(r->compare_and_set->version == ver);
    CU_ASSERT(r->compare_and_set->current_value.len == 1 &&
              r->compare_and_set->current_value.data[0] == 'a');
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(k, v) == ver);
    CU_ASSERT_STRING_EQUAL(v, "a");
    r = cas(k, ver, "c", false, true);
    CU_ASSERT(r->compare_and_set->succeeded && r->compare_and_set->version > ver);
    uint64_t ver2 = r->compare_and_set->version;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    r = cas(k, ver2, "", true, true); /* delete */
    CU_ASSERT(r->compare_and_set->succeeded && r->compare_and_set->version == 0);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(k, v) == 0);
    teardown();
}

/* Later entries of one batch see earlier ones (the overlay). */
static void test_same_batch(void)
{
    setup();
    char k[64], v[64];
    int code;
    pick_key(true, 3, k);
    slot_fsm_begin(fsm);
    Slotd__V1__ProposeResponse *r = put(k, "x", NULL, &code, false);
    uint64_t ver = r->put->version;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    r = cas(k, ver, "y", false, false);
    CU_ASSERT(r->compare_and_set->succeeded);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(k, v) == 0); /* nothing written before commit */
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    CU_ASSERT(get(k, v) > ver);
    CU_ASSERT_STRING_EQUAL(v, "y");
    teardown();
}

static void test_wrong_group(void)
{
    setup();
    char k[64], v[64];
    int code;
    pick_key(false, 4, k);
    CU_ASSERT(put(k, "nope", NULL, &code, true) == NULL);
    CU_ASSERT(code == SLOTD_EWRONG_GROUP);
    CU_ASSERT(get(k, v) == 0);
    /* An entry whose hash slot does not match its key is rejected too. */
    pick_key(true, 5, k);
    Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
    p.key.data = (uint8_t *)k;
    p.key.len = strlen(k);
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    req.put = &p;
    uint16_t hs = route_hash_slot(k, strlen(k));
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_command(&req, (uint16_t)((hs + 1) % 128), &data, &len) == 0);
    struct slot_result res;
    slot_fsm_begin(fsm);
    CU_ASSERT(slot_fsm_apply(fsm, &gs, next_index++, 3, data, len, &res) == 0);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    CU_ASSERT(res.err.code == SLOTD_EWRONG_GROUP);
    CU_ASSERT(get(k, v) == 0);
    free(data);
    /* Garbage entry data: rejected, nothing stored. */
    uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};
    slot_fsm_begin(fsm);
    CU_ASSERT(slot_fsm_apply(fsm, &gs, next_index++, 3, junk, sizeof(junk), &res) == 0);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    CU_ASSERT(res.err.code == SLOTD_EINTERNAL);
    /* A second GroupInit does not change ownership. */
    uint32_t table[256];
    for (int i = 0; i < 256; i++)
        table[i] = 1;
    CU_ASSERT(slot_encode_group_init(1, table, &data, &len) == 0);
    slot_fsm_begin(fsm);
    CU_ASSERT(slot_fsm_apply(fsm, &gs, next_index++, 3, data, len, NULL) == 0);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    free(data);
    struct slot_group_state reloaded;
    CU_ASSERT(slot_fsm_load_group(fsm, 1, &reloaded) == 0);
    CU_ASSERT(reloaded.initialized && !slot_group_owns(&reloaded, 200) &&
              slot_group_owns(&reloaded, 5));
    teardown();
}

static void test_dedupe(void)
{
    setup();
    char k[64], v[64], rid[32];
    int code;
    pick_key(true, 6, k);
    Slotd__V1__ProposeResponse *r1 = put(k, "first", "req-1", &code, true);
    CU_ASSERT(!r1->deduplicated);
    Slotd__V1__ProposeResponse *r2 = put(k, "second", "req-1", &code, true);
    CU_ASSERT(r2->deduplicated);
    CU_ASSERT(r2->applied_index == r1->applied_index);
    CU_ASSERT(r2->put->version == r1->put->version);
    CU_ASSERT(get(k, v) == r1->put->version);
    CU_ASSERT_STRING_EQUAL(v, "first");
    slotd__v1__propose_response__free_unpacked(r2, NULL);
    /* Fill the hash slot's window: req-1 is forgotten, a retry applies anew. */
    for (unsigned i = 0; i < SLOT_DEDUPE_WINDOW; i++) {
        if (i % 64 == 0) { /* batches of 64 entries: eviction works inside a batch too */
            if (i > 0)
                CU_ASSERT(slot_fsm_commit(fsm) == 0);
            slot_fsm_begin(fsm);
        }
        sprintf(rid, "fill-%u", i);
        Slotd__V1__ProposeResponse *r = put(k, "fill", rid, &code, false);
        slotd__v1__propose_response__free_unpacked(r, NULL);
    }
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    Slotd__V1__ProposeResponse *r3 = put(k, "third", "req-1", &code, true);
    CU_ASSERT(!r3->deduplicated);
    CU_ASSERT(r3->put->version > r1->put->version);
    CU_ASSERT(get(k, v) == r3->put->version);
    CU_ASSERT_STRING_EQUAL(v, "third");
    slotd__v1__propose_response__free_unpacked(r1, NULL);
    slotd__v1__propose_response__free_unpacked(r3, NULL);
    /* The window is bounded: at most SLOT_DEDUPE_WINDOW order rows in the hash slot. */
    uint16_t hs = route_hash_slot(k, strlen(k));
    uint8_t lo[8], hi[8];
    size_t lol = store_key_fsm(lo, hs, SLOT_TABLE_DEDUPE_ORDER, NULL, 0);
    size_t hil = store_key_fsm(hi, hs, SLOT_TABLE_DEDUPE_ORDER + 1, NULL, 0);
    struct store_iter *it;
    CU_ASSERT_FATAL(store_fsm_iter_new(st, lo, lol, hi, hil, &it) == 0);
    size_t n = 0;
    for (; store_iter_valid(it); store_iter_next(it))
        n++;
    store_iter_free(it);
    CU_ASSERT(n == SLOT_DEDUPE_WINDOW);
    teardown();
}

static void test_validation(void)
{
    struct slotd_error err;
    const ProtobufCBinaryData *key;
    uint8_t big[SLOT_KEY_MAX + 1];
    memset(big, 'k', sizeof(big));
    Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    CU_ASSERT(slot_validate_propose(&req, &key, &err) != 0);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && strcmp(err.field, "command") == 0);
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    req.put = &p;
    CU_ASSERT(slot_validate_propose(&req, &key, &err) != 0); /* empty key */
    CU_ASSERT(strcmp(err.field, "put.key") == 0 && err.limit == SLOT_KEY_MAX);
    p.key.data = big;
    p.key.len = SLOT_KEY_MAX + 1;
    CU_ASSERT(slot_validate_propose(&req, &key, &err) != 0);
    CU_ASSERT(strcmp(err.field, "put.key") == 0 && err.limit == SLOT_KEY_MAX);
    p.key.len = SLOT_KEY_MAX;
    CU_ASSERT(slot_validate_propose(&req, &key, &err) == 0);
    p.value.len = SLOT_VALUE_MAX + 1;
    p.value.data = big; /* never read past len by the validator */
    CU_ASSERT(slot_validate_propose(&req, &key, &err) != 0);
    CU_ASSERT(strcmp(err.field, "put.value") == 0 && err.limit == SLOT_VALUE_MAX);
    p.value.len = 0;
    req.request_id.len = SLOT_REQUEST_ID_MAX + 1;
    req.request_id.data = big;
    CU_ASSERT(slot_validate_propose(&req, &key, &err) != 0);
    CU_ASSERT(strcmp(err.field, "request_id") == 0 && err.limit == SLOT_REQUEST_ID_MAX);

    Slotd__V1__GetQuery g = SLOTD__V1__GET_QUERY__INIT;
    Slotd__V1__ReadRequest rr = SLOTD__V1__READ_REQUEST__INIT;
    CU_ASSERT(slot_validate_read(&rr, &key, &err) != 0);
    CU_ASSERT(strcmp(err.field, "query") == 0);
    rr.query_case = SLOTD__V1__READ_REQUEST__QUERY_GET;
    rr.get = &g;
    g.key.data = big;
    g.key.len = 3;
    CU_ASSERT(slot_validate_read(&rr, &key, &err) == 0);
    rr.consistency = (Slotd__V1__Consistency)7;
    CU_ASSERT(slot_validate_read(&rr, &key, &err) != 0);
    CU_ASSERT(strcmp(err.field, "consistency") == 0 && err.limit == 2);
    rr.consistency = SLOTD__V1__CONSISTENCY__CONSISTENCY_LINEARIZABLE;
    rr.min_applied_index = 5;
    CU_ASSERT(slot_validate_read(&rr, &key, &err) != 0);
    CU_ASSERT(strcmp(err.field, "min_applied_index") == 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("slot", NULL, NULL);
    CU_add_test(s, "put_get_delete", test_put_get_delete);
    CU_add_test(s, "compare_and_set", test_cas);
    CU_add_test(s, "same_batch_visibility", test_same_batch);
    CU_add_test(s, "wrong_group_and_bad_entries", test_wrong_group);
    CU_add_test(s, "dedupe_window", test_dedupe);
    CU_add_test(s, "validation", test_validation);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
