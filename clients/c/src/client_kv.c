/* client_kv.c - libslotd range pages and txns (Read range queries, Propose txn commands). */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <grpc/slice.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_METHOD_PROPOSE "/slotd.v1.Metadata/Propose"
#define KV_METHOD_READ "/slotd.v1.Metadata/Read"

/* A malloc'd copy of len bytes at p (NULL for len 0); false on ENOMEM. */
static bool kv_dup(const uint8_t *p, size_t len, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (len == 0)
        return true;
    *out = malloc(len);
    if (!*out)
        return false;
    memcpy(*out, p, len);
    *out_len = len;
    return true;
}

static bool kv_bad_bytes(const void *p, size_t len)
{
    return p == NULL && len != 0;
}

/* ---- range ------------------------------------------------------------------------------- */

/* Allocates an array of n pointers to n zeroed elements of size each, the elements in one block
 * (ptrs[0] is the block). NULL on ENOMEM; n 0 gives NULL too (nothing to allocate). */
static void **kv_ptr_array(size_t n, size_t size)
{
    if (n == 0)
        return NULL;
    void **ptrs = malloc(n * sizeof(*ptrs));
    char *block = calloc(n, size);
    if (!ptrs || !block) {
        free(ptrs);
        free(block);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        ptrs[i] = block + i * size;
    return ptrs;
}

/* Frees what kv_ptr_array allocated. */
static void kv_ptr_array_free(void **ptrs)
{
    if (ptrs)
        free(ptrs[0]);
    free(ptrs);
}

void slotd_range_page_destroy(struct slotd_range_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->entry_count; i++) {
        free(p->entries[i]->key);
        free(p->entries[i]->value);
    }
    kv_ptr_array_free((void **)p->entries);
    free(p->cursor);
    free(p);
}

static int kv_range_decode(grpc_slice body, struct slotd_range_page *out)
{
    Slotd__V1__ReadResponse *m =
        slotd__v1__read_response__unpack(NULL, GRPC_SLICE_LENGTH(body), GRPC_SLICE_START_PTR(body));
    if (!m)
        return SLOTD_CLIENT_EMALFORMED;
    int rc = SLOTD_CLIENT_OK;
    if (m->result_case != SLOTD__V1__READ_RESPONSE__RESULT_RANGE ||
        m->range->n_entries > SLOTD_RANGE_LIMIT_MAX) {
        rc = SLOTD_CLIENT_EMALFORMED;
        goto done;
    }
    const Slotd__V1__RangeResult *r = m->range;
    out->applied_index = m->applied_index;
    out->group_id = m->group_id;
    out->term = m->term;
    out->count = r->count;
    out->more = r->more;
    if (r->n_entries > 0) {
        out->entries =
            (struct slotd_range_entry **)kv_ptr_array(r->n_entries, sizeof(**out->entries));
        if (!out->entries) {
            rc = SLOTD_CLIENT_ENOMEM;
            goto done;
        }
    }
    for (size_t i = 0; i < r->n_entries; i++) {
        struct slotd_range_entry *e = out->entries[i];
        out->entry_count = i + 1;
        e->version = r->entries[i]->version;
        if (!kv_dup(r->entries[i]->key.data, r->entries[i]->key.len, &e->key, &e->key_len) ||
            !kv_dup(r->entries[i]->value.data, r->entries[i]->value.len, &e->value,
                    &e->value_len)) {
            rc = SLOTD_CLIENT_ENOMEM;
            goto done;
        }
    }
    if (r->more && !kv_dup(r->cursor.data, r->cursor.len, &out->cursor, &out->cursor_len))
        rc = SLOTD_CLIENT_ENOMEM;
done:
    slotd__v1__read_response__free_unpacked(m, NULL);
    return rc;
}

/* One range page for q; fills out (borrowed for the call) and st. */
static int kv_range(struct slotd_client *c, const struct slotd_range_query *q,
                    struct slotd_range_page *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    if (q->consistency < SLOTD_CONSISTENCY_LINEARIZABLE ||
        q->consistency > SLOTD_CONSISTENCY_LOCAL || kv_bad_bytes(q->prefix, q->prefix_len) ||
        kv_bad_bytes(q->start, q->start_len) || kv_bad_bytes(q->end, q->end_len) ||
        kv_bad_bytes(q->cursor, q->cursor_len)) {
        snprintf(st->message, sizeof(st->message),
                 "range: consistency %d is not 0..2, or a NULL prefix/start/end/cursor has a "
                 "length",
                 q->consistency);
        return SLOTD_CLIENT_EINVAL;
    }
    Slotd__V1__ReadRequest m = SLOTD__V1__READ_REQUEST__INIT;
    Slotd__V1__RangeQuery range = SLOTD__V1__RANGE_QUERY__INIT;
    range.prefix = (ProtobufCBinaryData){q->prefix_len, (uint8_t *)q->prefix};
    range.start = (ProtobufCBinaryData){q->start_len, (uint8_t *)q->start};
    range.end = (ProtobufCBinaryData){q->end_len, (uint8_t *)q->end};
    range.limit = q->limit;
    range.keys_only = q->keys_only;
    range.count_only = q->count_only;
    range.cursor = (ProtobufCBinaryData){q->cursor_len, (uint8_t *)q->cursor};
    m.consistency = (Slotd__V1__Consistency)q->consistency;
    /* The cursor is opaque: the node asked merges the page from the next runs' groups. */
    m.no_forward = false;
    m.query_case = SLOTD__V1__READ_REQUEST__QUERY_RANGE;
    m.range = &range;
    uint8_t *req;
    size_t len;
    if (slotd__pack(&m.base, &req, &len) != SLOTD_CLIENT_OK)
        return SLOTD_CLIENT_ENOMEM;
    grpc_slice body;
    int rc = slotd__client_routed_call(c, "range", KV_METHOD_READ, NULL, 0, req, len, true, &body,
                                       &out->attempts, st);
    free(req);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    rc = kv_range_decode(body, out);
    grpc_slice_unref(body);
    if (rc == SLOTD_CLIENT_EMALFORMED)
        snprintf(st->message, sizeof(st->message),
                 "range: response is not a ReadResponse with a range result of at most %d "
                 "entries",
                 SLOTD_RANGE_LIMIT_MAX);
    return rc;
}

int slotd_client_range(struct slotd_client *c, const struct slotd_range_query *q,
                       struct slotd_range_page **out, struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_range_page, "range", slotd_range_page_destroy, out, err,
                       kv_range(c, q, r, &st));
}

/* ---- txn --------------------------------------------------------------------------------- */

void slotd_txn_result_destroy(struct slotd_txn_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->result_count; i++)
        free(r->results[i]->value);
    kv_ptr_array_free((void **)r->results);
    free(r);
}

/* The key the txn is routed by: the first compare's, else the first success op's, else the
 * first failure op's (the server's rule); NULL when the txn has none. */
static const void *kv_txn_first_key(const struct slotd_txn *t, size_t *len)
{
    const void *key = NULL;
    *len = 0;
    if (t->compare_count > 0) {
        key = t->compares[0].key;
        *len = t->compares[0].key_len;
    } else if (t->success_count > 0) {
        key = t->success[0].key;
        *len = t->success[0].key_len;
    } else if (t->failure_count > 0) {
        key = t->failure[0].key;
        *len = t->failure[0].key_len;
    }
    return key;
}

/* Reports the first add the builder refused (the bounds and pointers are checked there). */
static int kv_txn_check(const struct slotd_txn *t, struct slotd_status *st)
{
    if (t->bad[0] == '\0')
        return SLOTD_CLIENT_OK;
    snprintf(st->message, sizeof(st->message), "%s", t->bad);
    snprintf(st->field, sizeof(st->field), "%s", t->bad_field);
    st->limit = t->bad_limit;
    return SLOTD_CLIENT_EINVAL;
}

/* The n ops of one branch as protobuf-c messages in the caller's arrays (msgs[i] and the
 * command it points to back ptrs[i]). */
static void kv_txn_ops(const struct slotd_txn_op *ops, size_t n, Slotd__V1__TxnOp *msgs,
                       Slotd__V1__PutCommand *puts, Slotd__V1__DeleteCommand *dels,
                       Slotd__V1__GetQuery *gets, Slotd__V1__TxnOp **ptrs)
{
    for (size_t i = 0; i < n; i++) {
        ProtobufCBinaryData key = {ops[i].key_len, (uint8_t *)ops[i].key};
        slotd__v1__txn_op__init(&msgs[i]);
        switch (ops[i].kind) {
        case SLOTD_TXN_PUT:
            slotd__v1__put_command__init(&puts[i]);
            puts[i].key = key;
            puts[i].value = (ProtobufCBinaryData){ops[i].value_len, (uint8_t *)ops[i].value};
            puts[i].lease = ops[i].lease;
            msgs[i].op_case = SLOTD__V1__TXN_OP__OP_PUT;
            msgs[i].put = &puts[i];
            break;
        case SLOTD_TXN_DELETE:
            slotd__v1__delete_command__init(&dels[i]);
            dels[i].key = key;
            msgs[i].op_case = SLOTD__V1__TXN_OP__OP_DELETE;
            msgs[i].delete_ = &dels[i];
            break;
        default:
            slotd__v1__get_query__init(&gets[i]);
            gets[i].key = key;
            msgs[i].op_case = SLOTD__V1__TXN_OP__OP_GET;
            msgs[i].get = &gets[i];
            break;
        }
        ptrs[i] = &msgs[i];
    }
}

/* Packs t as a ProposeRequest (no_forward) into *buf (caller frees with free()). */
static int kv_txn_encode(const struct slotd_txn *t, const struct slotd_txn_result *r,
                         uint8_t **buf, size_t *len)
{
    Slotd__V1__TxnCompare cmps[SLOTD_TXN_COMPARES_MAX];
    Slotd__V1__TxnCompare *cmp_ptrs[SLOTD_TXN_COMPARES_MAX];
    Slotd__V1__TxnOp ops[2][SLOTD_TXN_OPS_MAX];
    Slotd__V1__TxnOp *op_ptrs[2][SLOTD_TXN_OPS_MAX];
    Slotd__V1__PutCommand puts[2][SLOTD_TXN_OPS_MAX];
    Slotd__V1__DeleteCommand dels[2][SLOTD_TXN_OPS_MAX];
    Slotd__V1__GetQuery gets[2][SLOTD_TXN_OPS_MAX];
    for (size_t i = 0; i < t->compare_count; i++) {
        const struct slotd_txn_compare *c = &t->compares[i];
        slotd__v1__txn_compare__init(&cmps[i]);
        cmps[i].key = (ProtobufCBinaryData){c->key_len, (uint8_t *)c->key};
        cmps[i].target = (Slotd__V1__TxnTarget)c->target;
        cmps[i].op = (Slotd__V1__TxnCompareOp)c->op;
        cmps[i].version = c->version;
        cmps[i].value = (ProtobufCBinaryData){c->value_len, (uint8_t *)c->value};
        cmp_ptrs[i] = &cmps[i];
    }
    kv_txn_ops(t->success, t->success_count, ops[0], puts[0], dels[0], gets[0], op_ptrs[0]);
    kv_txn_ops(t->failure, t->failure_count, ops[1], puts[1], dels[1], gets[1], op_ptrs[1]);
    Slotd__V1__TxnCommand txn = SLOTD__V1__TXN_COMMAND__INIT;
    txn.n_compares = t->compare_count;
    txn.compares = cmp_ptrs;
    txn.n_success = t->success_count;
    txn.success = op_ptrs[0];
    txn.n_failure = t->failure_count;
    txn.failure = op_ptrs[1];
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    m.no_forward = true;
    m.request_id = (ProtobufCBinaryData){r->request_id_len, (uint8_t *)r->request_id};
    m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_TXN;
    m.txn = &txn;
    return slotd__pack(&m.base, buf, len);
}

static int kv_txn_decode(grpc_slice body, struct slotd_txn_result *out)
{
    Slotd__V1__ProposeResponse *m = slotd__v1__propose_response__unpack(
        NULL, GRPC_SLICE_LENGTH(body), GRPC_SLICE_START_PTR(body));
    if (!m)
        return SLOTD_CLIENT_EMALFORMED;
    int rc = SLOTD_CLIENT_OK;
    if (m->result_case != SLOTD__V1__PROPOSE_RESPONSE__RESULT_TXN ||
        m->txn->n_results > SLOTD_TXN_OPS_MAX) {
        rc = SLOTD_CLIENT_EMALFORMED;
        goto done;
    }
    out->applied_index = m->applied_index;
    out->group_id = m->group_id;
    out->term = m->term;
    out->deduplicated = m->deduplicated;
    out->succeeded = m->txn->succeeded;
    if (m->txn->n_results > 0) {
        out->results = (struct slotd_txn_op_result **)kv_ptr_array(m->txn->n_results,
                                                                   sizeof(**out->results));
        if (!out->results) {
            rc = SLOTD_CLIENT_ENOMEM;
            goto done;
        }
    }
    for (size_t i = 0; i < m->txn->n_results; i++) {
        const Slotd__V1__TxnOpResult *r = m->txn->results[i];
        struct slotd_txn_op_result *o = out->results[i];
        out->result_count = i + 1;
        switch (r->result_case) {
        case SLOTD__V1__TXN_OP_RESULT__RESULT_PUT:
            o->kind = SLOTD_TXN_PUT;
            o->version = r->put->version;
            o->prev_version = r->put->prev_version;
            break;
        case SLOTD__V1__TXN_OP_RESULT__RESULT_DELETE:
            o->kind = SLOTD_TXN_DELETE;
            o->deleted = r->delete_->deleted;
            o->prev_version = r->delete_->prev_version;
            break;
        case SLOTD__V1__TXN_OP_RESULT__RESULT_GET:
            o->kind = SLOTD_TXN_GET;
            o->found = r->get->found;
            o->version = r->get->version;
            if (!kv_dup(r->get->value.data, r->get->value.len, &o->value, &o->value_len)) {
                rc = SLOTD_CLIENT_ENOMEM;
                goto done;
            }
            break;
        default:
            rc = SLOTD_CLIENT_EMALFORMED;
            goto done;
        }
    }
done:
    slotd__v1__propose_response__free_unpacked(m, NULL);
    return rc;
}

/* Sends t; fills out (borrowed for the call) and st. */
static int kv_txn(struct slotd_client *c, const struct slotd_txn *t, struct slotd_txn_result *out,
                  struct slotd_status *st)
{
    slotd_call_status_reset(st);
    int rc = kv_txn_check(t, st);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    slotd__client_request_id_pick(c, t->no_request_id, t->has_request_id ? t->request_id : NULL,
                                  t->request_id_len, out->request_id, &out->request_id_len);
    uint8_t *req;
    size_t req_len;
    rc = kv_txn_encode(t, out, &req, &req_len);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    size_t klen;
    const void *key = kv_txn_first_key(t, &klen);
    /* An empty txn still goes out (routed by the empty key): the server names the field. */
    grpc_slice body;
    rc = slotd__client_routed_call(c, "txn", KV_METHOD_PROPOSE, key ? key : "", key ? klen : 0,
                                   req, req_len, out->request_id_len > 0, &body, &out->attempts, st);
    free(req);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    rc = kv_txn_decode(body, out);
    grpc_slice_unref(body);
    if (rc == SLOTD_CLIENT_EMALFORMED)
        snprintf(st->message, sizeof(st->message),
                 "txn: response is not a ProposeResponse with a txn result of at most %d "
                 "results",
                 SLOTD_TXN_OPS_MAX);
    return rc;
}

int slotd_client_txn(struct slotd_client *c, const struct slotd_txn *t,
                     struct slotd_txn_result **out, struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_txn_result, "txn", slotd_txn_result_destroy, out, err,
                       kv_txn(c, t, r, &st));
}
