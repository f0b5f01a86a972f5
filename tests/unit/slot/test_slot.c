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

/* ---- Txn ---- */

/* A txn under construction: ops point into the fixed arrays. */
struct txn_build {
    Slotd__V1__TxnCommand txn;
    Slotd__V1__TxnCompare cmp[SLOT_TXN_COMPARES_MAX + 1];
    Slotd__V1__TxnCompare *cmpp[SLOT_TXN_COMPARES_MAX + 1];
    Slotd__V1__TxnOp op[2][SLOT_TXN_OPS_MAX + 1];
    Slotd__V1__TxnOp *opp[2][SLOT_TXN_OPS_MAX + 1];
    Slotd__V1__PutCommand put[2][SLOT_TXN_OPS_MAX + 1];
    Slotd__V1__DeleteCommand del[2][SLOT_TXN_OPS_MAX + 1];
    Slotd__V1__GetQuery get[2][SLOT_TXN_OPS_MAX + 1];
    Slotd__V1__ProposeRequest req;
};

static void tb_init(struct txn_build *b)
{
    memset(b, 0, sizeof(*b));
    slotd__v1__txn_command__init(&b->txn);
    slotd__v1__propose_request__init(&b->req);
    b->req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_TXN;
    b->req.txn = &b->txn;
    b->txn.compares = b->cmpp;
    b->txn.success = b->opp[0];
    b->txn.failure = b->opp[1];
}

static void bin(ProtobufCBinaryData *d, const char *s)
{
    d->data = (uint8_t *)s;
    d->len = strlen(s);
}

static Slotd__V1__TxnCompare *tb_cmp(struct txn_build *b, const char *key, int target, int op,
                                     uint64_t version, const char *value)
{
    size_t i = b->txn.n_compares++;
    Slotd__V1__TxnCompare *c = &b->cmp[i];
    slotd__v1__txn_compare__init(c);
    bin(&c->key, key);
    c->target = (Slotd__V1__TxnTarget)target;
    c->op = (Slotd__V1__TxnCompareOp)op;
    c->version = version;
    bin(&c->value, value ? value : "");
    b->cmpp[i] = c;
    return c;
}

/* Adds an op to branch br (0 success, 1 failure): 'p' put, 'd' delete, 'g' get. */
static Slotd__V1__TxnOp *tb_op(struct txn_build *b, int br, char kind, const char *key,
                               const char *value)
{
    size_t *n = br ? &b->txn.n_failure : &b->txn.n_success;
    size_t i = (*n)++;
    Slotd__V1__TxnOp *o = &b->op[br][i];
    slotd__v1__txn_op__init(o);
    if (kind == 'p') {
        slotd__v1__put_command__init(&b->put[br][i]);
        bin(&b->put[br][i].key, key);
        bin(&b->put[br][i].value, value);
        o->op_case = SLOTD__V1__TXN_OP__OP_PUT;
        o->put = &b->put[br][i];
    } else if (kind == 'd') {
        slotd__v1__delete_command__init(&b->del[br][i]);
        bin(&b->del[br][i].key, key);
        o->op_case = SLOTD__V1__TXN_OP__OP_DELETE;
        o->delete_ = &b->del[br][i];
    } else {
        slotd__v1__get_query__init(&b->get[br][i]);
        bin(&b->get[br][i].key, key);
        o->op_case = SLOTD__V1__TXN_OP__OP_GET;
        o->get = &b->get[br][i];
    }
    b->opp[br][i] = o;
    return o;
}

/* Validates b's request and expects field (and limit) in the error. */
static void expect_invalid(struct txn_build *b, const char *field, uint64_t limit)
{
    const ProtobufCBinaryData *key;
    struct slotd_error err;
    memset(&err, 0, sizeof(err));
    CU_ASSERT(slot_validate_propose(&b->req, &key, &err) != 0);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD);
    CU_ASSERT_STRING_EQUAL(err.field, field);
    CU_ASSERT(err.limit == limit);
}

static void test_txn_validation(void)
{
    static struct txn_build b;
    static char big[SLOT_VALUE_MAX / 2 + 1];
    memset(big, 'v', sizeof(big) - 1);
    const ProtobufCBinaryData *key;
    struct slotd_error err;
    tb_init(&b);
    expect_invalid(&b, "txn", 0); /* nothing in it */
    tb_init(&b);
    tb_op(&b, 0, 'p', "", "v");
    expect_invalid(&b, "txn.success[0].put.key", SLOT_KEY_MAX);
    tb_init(&b);
    for (unsigned i = 0; i <= SLOT_TXN_COMPARES_MAX; i++)
        tb_cmp(&b, "k", SLOTD__V1__TXN_TARGET__TXN_TARGET_EXISTS, 0, 0, NULL);
    expect_invalid(&b, "txn.compares", SLOT_TXN_COMPARES_MAX);
    tb_init(&b);
    for (unsigned i = 0; i <= SLOT_TXN_OPS_MAX; i++)
        tb_op(&b, 1, 'g', "k", NULL);
    expect_invalid(&b, "txn.failure", SLOT_TXN_OPS_MAX);
    tb_init(&b);
    tb_cmp(&b, "k", 0, SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_EQUAL, 1, NULL);
    expect_invalid(&b, "txn.compares[0].target", SLOTD__V1__TXN_TARGET__TXN_TARGET_ABSENT);
    b.cmp[0].target = (Slotd__V1__TxnTarget)9;
    expect_invalid(&b, "txn.compares[0].target", SLOTD__V1__TXN_TARGET__TXN_TARGET_ABSENT);
    b.cmp[0].target = SLOTD__V1__TXN_TARGET__TXN_TARGET_VERSION;
    b.cmp[0].op = (Slotd__V1__TxnCompareOp)7;
    expect_invalid(&b, "txn.compares[0].op", SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_LESS);
    b.cmp[0].op = SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_UNSPECIFIED;
    expect_invalid(&b, "txn.compares[0].op", SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_LESS);
    b.cmp[0].target = SLOTD__V1__TXN_TARGET__TXN_TARGET_ABSENT;
    b.cmp[0].op = SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_EQUAL;
    expect_invalid(&b, "txn.compares[0].op", 0);
    b.cmp[0].op = SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_UNSPECIFIED;
    CU_ASSERT(slot_validate_propose(&b.req, &key, &err) == 0);
    CU_ASSERT(key == &b.cmp[0].key); /* routed by the first compare's key */
    Slotd__V1__TxnOp *o = tb_op(&b, 0, 'g', "k", NULL);
    o->op_case = SLOTD__V1__TXN_OP__OP__NOT_SET;
    expect_invalid(&b, "txn.success[0]", 0);
    /* Two puts of half the txn byte limit each: over it. */
    tb_init(&b);
    tb_op(&b, 0, 'p', "a", big);
    CU_ASSERT(slot_validate_propose(&b.req, &key, &err) == 0);
    CU_ASSERT(key == &b.put[0][0].key);
    tb_op(&b, 1, 'p', "b", big);
    expect_invalid(&b, "txn", SLOT_TXN_BYTES_MAX);
}

static Slotd__V1__ProposeResponse *apply_txn_req(struct txn_build *b, int *code)
{
    return apply_req(&b->req, code, true);
}

static void test_txn_apply(void)
{
    static struct txn_build b;
    setup();
    char a[32], c[32], d[32], v[64];
    pick_key(true, 1, a);
    pick_key(true, 2, c);
    pick_key(true, 3, d);
    int code;
    Slotd__V1__ProposeResponse *r = put(a, "1", NULL, &code, true);
    uint64_t v1 = r->put->version;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    /* Compares hold: put, get of the put's value, delete of an absent key. */
    tb_init(&b);
    tb_cmp(&b, a, SLOTD__V1__TXN_TARGET__TXN_TARGET_VERSION,
           SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_EQUAL, v1, NULL);
    tb_cmp(&b, a, SLOTD__V1__TXN_TARGET__TXN_TARGET_VALUE,
           SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_LESS, 0, "2");
    tb_cmp(&b, c, SLOTD__V1__TXN_TARGET__TXN_TARGET_ABSENT, 0, 0, NULL);
    tb_op(&b, 0, 'p', a, "2");
    tb_op(&b, 0, 'g', a, NULL);
    tb_op(&b, 0, 'd', c, NULL);
    tb_op(&b, 1, 'p', d, "failure");
    r = apply_txn_req(&b, &code);
    CU_ASSERT_FATAL(code == SLOTD_OK && r != NULL);
    CU_ASSERT_FATAL(r->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_TXN);
    CU_ASSERT(r->txn->succeeded);
    CU_ASSERT_FATAL(r->txn->n_results == 3);
    CU_ASSERT(r->txn->results[0]->put->version == r->applied_index);
    CU_ASSERT(r->txn->results[0]->put->prev_version == v1);
    CU_ASSERT(r->txn->results[1]->get->found);
    CU_ASSERT(r->txn->results[1]->get->value.len == 1 &&
              r->txn->results[1]->get->value.data[0] == '2');
    CU_ASSERT(r->txn->results[1]->get->version == r->applied_index);
    CU_ASSERT(!r->txn->results[2]->delete_->deleted);
    uint64_t v2 = r->applied_index;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(a, v) == v2);
    CU_ASSERT_STRING_EQUAL(v, "2");
    CU_ASSERT(get(d, v) == 0); /* the failure branch did not run */

    /* A stale version: nothing of success, only the failure ops. */
    b.cmp[0].version = v1;
    b.put[0][0].value.data = (uint8_t *)"3";
    b.put[0][2].key = b.put[0][0].key;
    b.op[0][2] = b.op[0][0]; /* a second put in success */
    b.op[1][0].op_case = SLOTD__V1__TXN_OP__OP_GET;
    slotd__v1__get_query__init(&b.get[1][0]);
    bin(&b.get[1][0].key, a);
    b.op[1][0].get = &b.get[1][0];
    r = apply_txn_req(&b, &code);
    CU_ASSERT_FATAL(code == SLOTD_OK && r != NULL);
    CU_ASSERT(!r->txn->succeeded);
    CU_ASSERT_FATAL(r->txn->n_results == 1);
    CU_ASSERT(r->txn->results[0]->result_case == SLOTD__V1__TXN_OP_RESULT__RESULT_GET);
    CU_ASSERT(r->txn->results[0]->get->version == v2);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(a, v) == v2);
    CU_ASSERT_STRING_EQUAL(v, "2");
    CU_ASSERT(get(c, v) == 0);

    /* VALUE on an absent key is false whatever the operator; EXISTS on a present key holds. */
    tb_init(&b);
    tb_cmp(&b, c, SLOTD__V1__TXN_TARGET__TXN_TARGET_VALUE,
           SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_NOT_EQUAL, 0, "x");
    tb_op(&b, 0, 'p', c, "yes");
    r = apply_txn_req(&b, &code);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT(!r->txn->succeeded && r->txn->n_results == 0);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(c, v) == 0);
    b.cmp[0].key = b.put[0][0].key;
    bin(&b.cmp[0].key, a);
    b.cmp[0].target = SLOTD__V1__TXN_TARGET__TXN_TARGET_EXISTS;
    b.cmp[0].op = 0;
    r = apply_txn_req(&b, &code);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT(r->txn->succeeded && r->txn->n_results == 1);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(get(c, v) != 0);
    CU_ASSERT_STRING_EQUAL(v, "yes");
    teardown();
}

/* A txn with one key outside the group, or gets over the result bound, changes nothing. */
static void test_txn_refused(void)
{
    static struct txn_build b;
    static char big[SLOT_VALUE_MAX + 1];
    memset(big, 'v', SLOT_VALUE_MAX);
    setup();
    char a[32], c[32], out[32], v[64];
    pick_key(true, 4, a);
    pick_key(true, 6, c);
    pick_key(false, 5, out);
    int code;
    tb_init(&b);
    tb_op(&b, 0, 'p', a, "mine");
    tb_op(&b, 0, 'p', out, "theirs");
    Slotd__V1__ProposeResponse *r = apply_txn_req(&b, &code);
    CU_ASSERT(r == NULL && code == SLOTD_EWRONG_GROUP);
    CU_ASSERT(get(a, v) == 0);

    r = put(a, big, NULL, &code, true);
    CU_ASSERT_FATAL(r != NULL);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    /* A get after a put of its key reads the put: 1 MiB + 5 bytes, within the bound. */
    tb_init(&b);
    tb_op(&b, 0, 'g', a, NULL);
    tb_op(&b, 0, 'p', a, "small");
    tb_op(&b, 0, 'g', a, NULL);
    r = apply_txn_req(&b, &code);
    CU_ASSERT_FATAL(r != NULL && r->txn->n_results == 3);
    CU_ASSERT(r->txn->results[0]->get->value.len == SLOT_VALUE_MAX);
    CU_ASSERT(r->txn->results[2]->get->value.len == 5);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    r = put(a, big, NULL, &code, true);
    CU_ASSERT_FATAL(r != NULL);
    uint64_t vbig = r->put->version;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    /* A put, then three gets of the stored MiB: over the bound, and the put is not applied. */
    tb_init(&b);
    tb_op(&b, 0, 'p', c, "lost");
    tb_op(&b, 0, 'g', a, NULL);
    tb_op(&b, 0, 'g', a, NULL);
    tb_op(&b, 0, 'g', a, NULL);
    const ProtobufCBinaryData *key;
    struct slotd_error err;
    CU_ASSERT(slot_validate_propose(&b.req, &key, &err) == 0);
    r = apply_txn_req(&b, &code);
    CU_ASSERT(r == NULL && code == SLOTD_EINVALID_FIELD);
    CU_ASSERT(get(c, v) == 0);
    CU_ASSERT(get(a, big) == vbig); /* big holds the 1 MiB value (+ NUL) */
    teardown();
}

/* ---- Leases ---- */

/* A key of hash slot hs (owned by group 1 when hs < 128). */
static void key_in_slot(uint16_t hs, int n, char *out)
{
    for (int i = 0;; i++) {
        sprintf(out, "lk-%d-%d", n, i);
        if (route_hash_slot(out, strlen(out)) == hs)
            return;
    }
}

static Slotd__V1__ProposeResponse *lease_req(unsigned which, const char *key, uint64_t id,
                                             uint32_t ttl, int *code, bool own_batch)
{
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__LeaseGrantCommand g = SLOTD__V1__LEASE_GRANT_COMMAND__INIT;
    Slotd__V1__LeaseKeepAliveCommand k = SLOTD__V1__LEASE_KEEP_ALIVE_COMMAND__INIT;
    Slotd__V1__LeaseRevokeCommand r = SLOTD__V1__LEASE_REVOKE_COMMAND__INIT;
    req.command_case = which;
    if (which == SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT) {
        g.key.data = (uint8_t *)key;
        g.key.len = strlen(key);
        g.ttl_seconds = ttl;
        req.lease_grant = &g;
    } else if (which == SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE) {
        k.id = id;
        req.lease_keep_alive = &k;
    } else {
        r.id = id;
        req.lease_revoke = &r;
    }
    return apply_req(&req, code, own_batch);
}

static uint64_t grant(const char *key, uint32_t ttl, bool own_batch)
{
    int code;
    Slotd__V1__ProposeResponse *r =
        lease_req(SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT, key, 0, ttl, &code, own_batch);
    CU_ASSERT_FATAL(code == SLOTD_OK &&
                    r->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEASE_GRANT);
    uint64_t id = r->lease_grant->id;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    return id;
}

static int put_lease(const char *key, const char *value, uint64_t lease, bool own_batch)
{
    Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
    p.key.data = (uint8_t *)key;
    p.key.len = strlen(key);
    p.value.data = (uint8_t *)value;
    p.value.len = strlen(value);
    p.lease = lease;
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    req.put = &p;
    int code;
    Slotd__V1__ProposeResponse *r = apply_req(&req, &code, own_batch);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    return code;
}

/* Applies the leader's LeaseExpire as the next entry; the error code. */
static int expire(uint64_t id, uint64_t refreshed, uint32_t *deleted)
{
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_lease_expire(id, refreshed, &data, &len) == 0);
    struct slot_result res;
    slot_fsm_begin(fsm);
    uint64_t index = next_index++;
    CU_ASSERT_FATAL(slot_fsm_apply(fsm, &gs, index, 3, data, len, &res) == 0);
    slot_fsm_set_applied(fsm, 1, index);
    CU_ASSERT_FATAL(slot_fsm_commit(fsm) == 0);
    free(data);
    if (res.err.code == SLOTD_OK) {
        Slotd__V1__ProposeResponse *r =
            slotd__v1__propose_response__unpack(NULL, res.resp_len, res.resp);
        CU_ASSERT_FATAL(r != NULL);
        *deleted = r->lease_revoke->keys_deleted;
        slotd__v1__propose_response__free_unpacked(r, NULL);
    }
    free(res.resp);
    return res.err.code;
}

static int collect_lease(void *ctx, const struct slot_lease_info *l)
{
    struct slot_lease_info *out = ctx;
    *out = *l;
    return 0;
}

/* The stored lease row of id (found = refreshed_index != 0). */
static struct slot_lease_info scan_one(uint64_t id)
{
    struct slot_lease_info l = {0};
    bool more;
    CU_ASSERT_FATAL(slot_lease_scan(st, (uint16_t)(id >> SLOT_LEASE_ID_SHIFT), id, 1, collect_lease,
                                    &l, &more) == 0);
    if (l.id != id)
        memset(&l, 0, sizeof(l));
    return l;
}

static void test_lease_apply(void)
{
    setup();
    char k1[64], k2[64], k3[64], other[64], v[64];
    key_in_slot(7, 1, k1);
    key_in_slot(7, 2, k2);
    key_in_slot(7, 3, k3);
    key_in_slot(8, 4, other);
    uint64_t id = grant(k1, 5, true);
    CU_ASSERT(id >> SLOT_LEASE_ID_SHIFT == 7 && (id & 0xFFFF) == 1);
    struct slot_lease_info l = scan_one(id);
    CU_ASSERT(l.ttl_seconds == 5 && l.refreshed_index == next_index - 1);
    CU_ASSERT(put_lease(k1, "a", id, true) == SLOTD_OK);
    CU_ASSERT(put_lease(k2, "b", id, true) == SLOTD_OK);
    CU_ASSERT(put_lease(k3, "c", id, true) == SLOTD_OK);
    CU_ASSERT(get(k1, v) != 0 && strcmp(v, "a") == 0); /* a leased row reads like any other */
    /* a key of another hash slot, or an unknown lease: refused, nothing written */
    struct slotd_error err;
    Slotd__V1__PutCommand p = SLOTD__V1__PUT_COMMAND__INIT;
    p.key.data = (uint8_t *)other;
    p.key.len = strlen(other);
    p.lease = id;
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    req.put = &p;
    const ProtobufCBinaryData *key;
    CU_ASSERT(slot_validate_propose(&req, &key, &err) == -1 && err.code == SLOTD_EPRECONDITION);
    CU_ASSERT_STRING_EQUAL(err.field, "put.lease");
    CU_ASSERT(put_lease(k1, "z", id + 1, true) == SLOTD_ENOT_FOUND);
    CU_ASSERT(get(k1, v) != 0 && strcmp(v, "a") == 0);
    /* a plain put detaches k3; keep-alive moves refreshed_index */
    int code;
    Slotd__V1__ProposeResponse *r = put(k3, "plain", NULL, &code, true);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    r = lease_req(SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE, NULL, id, 0, &code, true);
    CU_ASSERT_FATAL(code == SLOTD_OK);
    CU_ASSERT(r->lease_keep_alive->keys == 2 && r->lease_keep_alive->ttl_seconds == 5);
    uint64_t kept_at = r->applied_index;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(scan_one(id).refreshed_index == kept_at);
    /* an expiry decided before the keep-alive changes nothing */
    uint32_t deleted = 0;
    CU_ASSERT(expire(id, l.refreshed_index, &deleted) == SLOTD_EPRECONDITION);
    CU_ASSERT(get(k1, v) != 0 && get(k2, v) != 0 && scan_one(id).id == id);
    /* the current one deletes the lease and its keys, not the detached one */
    slot_fsm_set_events(fsm, true);
    CU_ASSERT(expire(id, kept_at, &deleted) == SLOTD_OK);
    CU_ASSERT(deleted == 2);
    struct slot_event *ev = slot_fsm_take_events(fsm);
    int n_del = 0;
    for (struct slot_event *e = ev; e != NULL; e = e->next)
        n_del += e->deleted && e->table == SLOT_TABLE_KV;
    CU_ASSERT(n_del == 2);
    slot_events_free(ev);
    slot_fsm_set_events(fsm, false);
    CU_ASSERT(get(k1, v) == 0 && get(k2, v) == 0);
    CU_ASSERT(get(k3, v) != 0 && strcmp(v, "plain") == 0);
    CU_ASSERT(scan_one(id).id == 0);
    CU_ASSERT(expire(id, kept_at, &deleted) == SLOTD_ENOT_FOUND);
    /* ids are never reused */
    CU_ASSERT(grant(k1, 5, true) == id + 1);
    teardown();
}

static void test_lease_same_batch(void)
{
    setup();
    char k1[64], k2[64], v[64];
    key_in_slot(9, 1, k1);
    key_in_slot(9, 2, k2);
    slot_fsm_begin(fsm);
    uint64_t id = grant(k1, 5, false);
    CU_ASSERT(put_lease(k1, "a", id, false) == SLOTD_OK);
    CU_ASSERT(put_lease(k2, "b", id, false) == SLOTD_OK);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    slot_fsm_begin(fsm);
    CU_ASSERT(put_lease(k2, "c", 0, false) == SLOTD_OK); /* detached in the batch */
    int code;
    Slotd__V1__ProposeResponse *r =
        lease_req(SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE, NULL, id, 0, &code, false);
    CU_ASSERT_FATAL(code == SLOTD_OK);
    CU_ASSERT(r->lease_revoke->keys_deleted == 1);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    CU_ASSERT(get(k1, v) == 0);
    CU_ASSERT(get(k2, v) != 0 && strcmp(v, "c") == 0);
    teardown();
}

static void test_lease_limits(void)
{
    setup();
    char k[64];
    key_in_slot(11, 1, k);
    uint64_t first = 0;
    slot_fsm_begin(fsm);
    for (unsigned i = 0; i < SLOT_LEASES_PER_SLOT_MAX; i++) {
        uint64_t id = grant(k, 5, false);
        if (i == 0)
            first = id;
    }
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    int code;
    Slotd__V1__ProposeResponse *r =
        lease_req(SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT, k, 0, 5, &code, true);
    CU_ASSERT(r == NULL && code == SLOTD_EPRECONDITION);
    r = lease_req(SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE, NULL, first, 0, &code, true);
    CU_ASSERT(code == SLOTD_OK);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT(grant(k, 5, true) == first + SLOT_LEASES_PER_SLOT_MAX); /* room again, new id */
    /* keys per lease */
    uint64_t id = first + 1;
    slot_fsm_begin(fsm);
    for (unsigned i = 0; i < SLOT_LEASE_KEYS_MAX; i++) {
        char kk[64];
        key_in_slot(11, 100 + (int)i, kk);
        CU_ASSERT_FATAL(put_lease(kk, "v", id, false) == SLOTD_OK);
    }
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    char kk[64];
    key_in_slot(11, 99, kk);
    CU_ASSERT(put_lease(kk, "v", id, true) == SLOTD_EPRECONDITION);
    r = lease_req(SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE, NULL, id, 0, &code, true);
    CU_ASSERT_FATAL(code == SLOTD_OK);
    CU_ASSERT(r->lease_revoke->keys_deleted == SLOT_LEASE_KEYS_MAX);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    teardown();
}

/* The fsm's version cache (vcache.h): a put's prev_version comes from it once the key was seen,
 * and a row written around the fsm (as a snapshot install does) is read again after
 * slot_fsm_forget_rows, never answered from the cache. */
static void test_version_cache(void)
{
    setup();
    char k[64];
    int code;
    pick_key(true, 7, k);
    Slotd__V1__ProposeResponse *r = put(k, "a", NULL, &code, true);
    uint64_t v1 = r->put->version;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    struct slot_vcache_stats before, after;
    slot_fsm_cache_stats(fsm, &before);
    r = put(k, "b", NULL, &code, true);
    CU_ASSERT(r->put->prev_version == v1);
    uint64_t v2 = r->put->version;
    slotd__v1__propose_response__free_unpacked(r, NULL);
    slot_fsm_cache_stats(fsm, &after);
    CU_ASSERT(after.hits == before.hits + 1);

    /* the row replaced behind the fsm's back, at version 77 */
    uint8_t sk[STORE_FSM_KEY_MAX], row[10] = {0};
    size_t skl = store_key_fsm(sk, route_hash_slot(k, strlen(k)), SLOT_TABLE_KV, k, strlen(k));
    struct store_fsm_batch *b;
    CU_ASSERT_FATAL(store_fsm_batch_new(&b) == 0);
    row[0] = 1; /* the plain value format: [1][version u64][value] */
    store_put_u64(row + 1, 77);
    row[9] = 'x';
    store_fsm_batch_put(b, sk, skl, row, sizeof(row));
    CU_ASSERT_FATAL(store_fsm_write(st, b, false) == 0);
    store_fsm_batch_free(b);
    slot_fsm_forget_rows(fsm);
    r = put(k, "c", NULL, &code, true);
    CU_ASSERT(r->put->prev_version == 77 && r->put->prev_version != v2);
    slotd__v1__propose_response__free_unpacked(r, NULL);

    /* a delete is cached as absent: the next put has no previous version */
    Slotd__V1__DeleteCommand d = SLOTD__V1__DELETE_COMMAND__INIT;
    d.key.data = (uint8_t *)k;
    d.key.len = strlen(k);
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_DELETE;
    req.delete_ = &d;
    r = apply_req(&req, &code, true);
    CU_ASSERT(r->delete_->deleted);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    r = put(k, "d", NULL, &code, true);
    CU_ASSERT(r->put->prev_version == 0);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    teardown();
}

/* vcache.c alone: a slot holds the last key that hashes there, long keys are never cached, a
 * clear forgets everything. */
static void test_vcache(void)
{
    struct slot_vcache *c;
    CU_ASSERT_FATAL(slot_vcache_new(&c) == 0);
    bool found;
    uint64_t version, lease;
    const uint8_t a[] = "key-a", bk[] = "key-b";
    CU_ASSERT(!slot_vcache_get(c, a, sizeof(a), &found, &version, &lease));
    slot_vcache_put(c, a, sizeof(a), true, 5, 9);
    CU_ASSERT(slot_vcache_get(c, a, sizeof(a), &found, &version, &lease));
    CU_ASSERT(found && version == 5 && lease == 9);
    CU_ASSERT(!slot_vcache_get(c, bk, sizeof(bk), &found, &version, &lease));
    slot_vcache_put(c, bk, sizeof(bk), false, 0, 0);
    CU_ASSERT(slot_vcache_get(c, bk, sizeof(bk), &found, &version, &lease) && !found);
    uint8_t longkey[SLOT_VCACHE_KEY_MAX + 1];
    memset(longkey, 'k', sizeof(longkey));
    slot_vcache_put(c, longkey, sizeof(longkey), true, 1, 0);
    CU_ASSERT(!slot_vcache_get(c, longkey, sizeof(longkey), &found, &version, &lease));
    /* enough keys that some share a slot: every hit still names its own key's version */
    for (uint64_t i = 0; i < 3 * SLOT_VCACHE_ENTRIES / 2; i++)
        slot_vcache_put(c, (const uint8_t *)&i, sizeof(i), true, i + 1, 0);
    size_t hits = 0;
    for (uint64_t i = 0; i < 3 * SLOT_VCACHE_ENTRIES / 2; i++)
        if (slot_vcache_get(c, (const uint8_t *)&i, sizeof(i), &found, &version, &lease)) {
            hits++;
            CU_ASSERT_FATAL(found && version == i + 1);
        }
    CU_ASSERT(hits > 0 && hits < 3 * SLOT_VCACHE_ENTRIES / 2);
    slot_vcache_clear(c);
    CU_ASSERT(!slot_vcache_get(c, a, sizeof(a), &found, &version, &lease));
    struct slot_vcache_stats stats;
    slot_vcache_stats(c, &stats);
    CU_ASSERT(stats.clears == 1 && stats.hits >= 3);
    slot_vcache_free(c);
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
    CU_add_test(s, "txn_validation", test_txn_validation);
    CU_add_test(s, "txn_apply", test_txn_apply);
    CU_add_test(s, "txn_refused", test_txn_refused);
    CU_add_test(s, "lease_apply", test_lease_apply);
    CU_add_test(s, "lease_same_batch", test_lease_same_batch);
    CU_add_test(s, "lease_limits", test_lease_limits);
    CU_add_test(s, "version_cache", test_version_cache);
    CU_add_test(s, "vcache", test_vcache);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
