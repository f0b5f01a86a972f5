/* validate.c - validation of public requests (every violation names the field and limit) and log
 * command encoding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"
#include "service/slot/slot.h"

/* The routing key of the last typed request validated by this thread (slot.h). */
static _Thread_local ProtobufCBinaryData routing_key;
static _Thread_local char routing_keybuf[32];

static int check_key(const ProtobufCBinaryData *key, const char *field, struct slotd_error *err)
{
    if (key->len == 0 || key->len > SLOT_KEY_MAX) {
        slotd_error_field(err, field, SLOT_KEY_MAX, "%s: must be 1..%u bytes, got %zu", field,
                          SLOT_KEY_MAX, key->len);
        return -1;
    }
    return 0;
}

static int check_value(const ProtobufCBinaryData *v, const char *field, struct slotd_error *err)
{
    if (v->len > SLOT_VALUE_MAX) {
        slotd_error_field(err, field, SLOT_VALUE_MAX, "%s: %zu bytes exceeds the limit of %u",
                          field, v->len, SLOT_VALUE_MAX);
        return -1;
    }
    return 0;
}

/* A put's lease: 0, or an id of the key's hash slot (FAILED_PRECONDITION otherwise). */
static int check_put_lease(const Slotd__V1__PutCommand *put, const char *field,
                           struct slotd_error *err)
{
    if (put->lease == 0)
        return 0;
    uint16_t hs, key_hs = route_hash_slot(put->key.data, put->key.len);
    if (slot_lease_id_check(put->lease, field, &hs, err) != 0)
        return -1;
    if (hs != key_hs) {
        slotd_error_set(err, SLOTD_EPRECONDITION,
                        "%s: lease %llu lives in hash slot %u but the key is in hash slot %u; "
                        "attach only keys of the lease's hash slot",
                        field, (unsigned long long)put->lease, hs, key_hs);
        snprintf(err->field, sizeof(err->field), "%s", field);
        return -1;
    }
    return 0;
}

/* The key of a txn op, its field name in buf; NULL when no op is set. */
static const ProtobufCBinaryData *txn_op_key(const Slotd__V1__TxnOp *op, const char *branch,
                                             size_t i, char *buf, size_t n, bool *writes)
{
    switch (op->op_case) {
    case SLOTD__V1__TXN_OP__OP_PUT:
        snprintf(buf, n, "txn.%s[%zu].put.key", branch, i);
        *writes = true;
        return &op->put->key;
    case SLOTD__V1__TXN_OP__OP_DELETE:
        snprintf(buf, n, "txn.%s[%zu].delete.key", branch, i);
        *writes = true;
        return &op->delete_->key;
    case SLOTD__V1__TXN_OP__OP_GET:
        snprintf(buf, n, "txn.%s[%zu].get.key", branch, i);
        *writes = false;
        return &op->get->key;
    default:
        snprintf(buf, n, "txn.%s[%zu]", branch, i);
        return NULL;
    }
}

int slot_txn_each_key(const Slotd__V1__TxnCommand *txn, slot_txn_key_cb cb, void *ctx)
{
    char field[64];
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < txn->n_compares; i++) {
        snprintf(field, sizeof(field), "txn.compares[%zu].key", i);
        rc = cb(ctx, &txn->compares[i]->key, field, false);
    }
    for (int b = 0; b < 2; b++) {
        size_t n = b ? txn->n_failure : txn->n_success;
        Slotd__V1__TxnOp **ops = b ? txn->failure : txn->success;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            bool writes = false;
            const ProtobufCBinaryData *k =
                txn_op_key(ops[i], b ? "failure" : "success", i, field, sizeof(field), &writes);
            if (k != NULL)
                rc = cb(ctx, k, field, writes);
        }
    }
    return rc;
}

static int check_compare(const Slotd__V1__TxnCompare *c, size_t i, size_t *bytes,
                         struct slotd_error *err)
{
    char field[64];
    snprintf(field, sizeof(field), "txn.compares[%zu].key", i);
    if (check_key(&c->key, field, err) != 0)
        return -1;
    snprintf(field, sizeof(field), "txn.compares[%zu].target", i);
    if (c->target < SLOTD__V1__TXN_TARGET__TXN_TARGET_VERSION ||
        c->target > SLOTD__V1__TXN_TARGET__TXN_TARGET_ABSENT) {
        slotd_error_field(err, field, SLOTD__V1__TXN_TARGET__TXN_TARGET_ABSENT,
                          "%s: unknown or unset value %d (known values are 1..%d)", field,
                          (int)c->target, SLOTD__V1__TXN_TARGET__TXN_TARGET_ABSENT);
        return -1;
    }
    bool needs_op = c->target == SLOTD__V1__TXN_TARGET__TXN_TARGET_VERSION ||
                    c->target == SLOTD__V1__TXN_TARGET__TXN_TARGET_VALUE;
    snprintf(field, sizeof(field), "txn.compares[%zu].op", i);
    if ((unsigned)c->op > SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_LESS ||
        (needs_op && c->op == SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_UNSPECIFIED)) {
        slotd_error_field(err, field, SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_LESS,
                          "%s: unknown or unset value %d (known values are 1..%d)", field,
                          (int)c->op, SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_LESS);
        return -1;
    }
    if (!needs_op && c->op != SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_UNSPECIFIED) {
        slotd_error_field(err, field, 0, "%s: must be unset for target EXISTS or ABSENT", field);
        return -1;
    }
    snprintf(field, sizeof(field), "txn.compares[%zu].value", i);
    if (check_value(&c->value, field, err) != 0)
        return -1;
    *bytes += c->key.len + c->value.len;
    return 0;
}

static int check_ops(Slotd__V1__TxnOp **ops, size_t n, const char *branch, size_t *bytes,
                     struct slotd_error *err)
{
    char field[64];
    if (n > SLOT_TXN_OPS_MAX) {
        snprintf(field, sizeof(field), "txn.%s", branch);
        slotd_error_field(err, field, SLOT_TXN_OPS_MAX, "%s: %zu ops exceeds the limit of %u",
                          field, n, SLOT_TXN_OPS_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        bool writes;
        const ProtobufCBinaryData *k = txn_op_key(ops[i], branch, i, field, sizeof(field), &writes);
        if (k == NULL) {
            slotd_error_field(err, field, 0, "%s: exactly one of put, delete, get must be set",
                              field);
            return -1;
        }
        if (check_key(k, field, err) != 0)
            return -1;
        *bytes += k->len;
        if (ops[i]->op_case == SLOTD__V1__TXN_OP__OP_PUT) {
            snprintf(field, sizeof(field), "txn.%s[%zu].put.value", branch, i);
            if (check_value(&ops[i]->put->value, field, err) != 0)
                return -1;
            snprintf(field, sizeof(field), "txn.%s[%zu].put.lease", branch, i);
            if (check_put_lease(ops[i]->put, field, err) != 0)
                return -1;
            *bytes += ops[i]->put->value.len;
        }
    }
    return 0;
}

int slot_validate_txn(const Slotd__V1__TxnCommand *txn, const ProtobufCBinaryData **first,
                      struct slotd_error *err)
{
    size_t bytes = 0;
    if (txn->n_compares > SLOT_TXN_COMPARES_MAX) {
        slotd_error_field(err, "txn.compares", SLOT_TXN_COMPARES_MAX,
                          "txn.compares: %zu compares exceeds the limit of %u", txn->n_compares,
                          SLOT_TXN_COMPARES_MAX);
        return -1;
    }
    for (size_t i = 0; i < txn->n_compares; i++)
        if (check_compare(txn->compares[i], i, &bytes, err) != 0)
            return -1;
    if (check_ops(txn->success, txn->n_success, "success", &bytes, err) != 0 ||
        check_ops(txn->failure, txn->n_failure, "failure", &bytes, err) != 0)
        return -1;
    if (bytes > SLOT_TXN_BYTES_MAX) {
        slotd_error_field(err, "txn", SLOT_TXN_BYTES_MAX,
                          "txn: %zu key and value bytes exceeds the limit of %u", bytes,
                          SLOT_TXN_BYTES_MAX);
        return -1;
    }
    bool w;
    char field[64];
    if (txn->n_compares > 0)
        *first = &txn->compares[0]->key;
    else if (txn->n_success > 0)
        *first = txn_op_key(txn->success[0], "success", 0, field, sizeof(field), &w);
    else if (txn->n_failure > 0)
        *first = txn_op_key(txn->failure[0], "failure", 0, field, sizeof(field), &w);
    else {
        slotd_error_field(err, "txn", 0, "txn: needs at least one compare or op");
        return -1;
    }
    return 0;
}

int slot_validate_propose(const Slotd__V1__ProposeRequest *req, const ProtobufCBinaryData **key,
                          struct slotd_error *err)
{
    if (req->request_id.len > SLOT_REQUEST_ID_MAX) {
        slotd_error_field(err, "request_id", SLOT_REQUEST_ID_MAX,
                          "request_id: %zu bytes exceeds the limit of %u", req->request_id.len,
                          SLOT_REQUEST_ID_MAX);
        return -1;
    }
    switch (req->command_case) {
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT:
        *key = &req->put->key;
        if (check_key(*key, "put.key", err) || check_value(&req->put->value, "put.value", err) ||
            check_put_lease(req->put, "put.lease", err))
            return -1;
        return 0;
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_DELETE:
        *key = &req->delete_->key;
        return check_key(*key, "delete.key", err);
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_TXN:
        return slot_validate_txn(req->txn, key, err);
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE:
        if (slot_lease_validate(req->command_case, slot__oneof_get(&req->base, req->command_case),
                                &routing_key, routing_keybuf, err) != 0)
            return -1;
        *key = &routing_key;
        return 0;
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_COMPARE_AND_SET:
        *key = &req->compare_and_set->key;
        if (check_key(*key, "compare_and_set.key", err) ||
            check_value(&req->compare_and_set->value, "compare_and_set.value", err))
            return -1;
        return 0;
    default:
        if (!slot__meta_is_command(req->command_case)) {
            slotd_error_field(err, "command", 0, "command: exactly one command must be set");
            return -1;
        }
        if (slot__meta_validate_command(req->command_case,
                                        slot__oneof_get(&req->base, req->command_case),
                                        &routing_key, err) != 0)
            return -1;
        *key = &routing_key;
        return 0;
    }
}

int slot_validate_read(const Slotd__V1__ReadRequest *req, const ProtobufCBinaryData **key,
                       struct slotd_error *err)
{
    if ((unsigned)req->consistency > SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL) {
        slotd_error_field(err, "consistency", SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL,
                          "consistency: unknown value %d (known values are 0..%d)",
                          (int)req->consistency, SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL);
        return -1;
    }
    if (req->min_applied_index != 0 &&
        req->consistency != SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL) {
        slotd_error_field(err, "min_applied_index", 0,
                          "min_applied_index: only allowed with CONSISTENCY_LOCAL");
        return -1;
    }
    if (slot__meta_is_query(req->query_case)) {
        if (slot__meta_validate_query(req->query_case, slot__oneof_get(&req->base, req->query_case),
                                      &routing_key, routing_keybuf, err) != 0)
            return -1;
        *key = &routing_key;
        return 0;
    }
    if (req->query_case == SLOTD__V1__READ_REQUEST__QUERY_RANGE) {
        uint16_t hs;
        if (slot_validate_range(req->range, &hs, err) != 0)
            return -1;
        slot__hash_slot_key(hs, routing_keybuf); /* routed like a Get of that hash slot */
        routing_key.data = (uint8_t *)routing_keybuf;
        routing_key.len = strlen(routing_keybuf);
        *key = &routing_key;
        return 0;
    }
    if (req->query_case != SLOTD__V1__READ_REQUEST__QUERY_GET) {
        slotd_error_field(err, "query", 0, "query: exactly one query must be set");
        return -1;
    }
    *key = &req->get->key;
    return check_key(*key, "get.key", err);
}

static int pack_log_command(const Slotd__Internal__V1__LogCommand *cmd, uint8_t **buf, size_t *len)
{
    size_t n = slotd__internal__v1__log_command__get_packed_size(cmd);
    uint8_t *p = malloc(n ? n : 1);
    if (p == NULL)
        return -1;
    slotd__internal__v1__log_command__pack(cmd, p);
    *buf = p;
    *len = n;
    return 0;
}

int slot_encode_command(const Slotd__V1__ProposeRequest *req, uint16_t hash_slot, uint8_t **buf,
                        size_t *len)
{
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.hash_slot = hash_slot;
    cmd.request_id = req->request_id;
    switch (req->command_case) {
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_DELETE:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_COMPARE_AND_SET:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_TXN:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE:
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE: {
        /* the same field numbers in LogCommand */
        const ProtobufCMessage *m = slot__oneof_get(&req->base, req->command_case);
        if (m == NULL)
            return -1;
        slot__oneof_set(&cmd.base, req->command_case, m);
        break;
    }
    default: {
        /* A typed command travels at the same field number in LogCommand. */
        const ProtobufCMessage *m = slot__oneof_get(&req->base, req->command_case);
        if (!slot__meta_is_command(req->command_case) || m == NULL)
            return -1;
        slot__oneof_set(&cmd.base, req->command_case, m);
        break;
    }
    }
    return pack_log_command(&cmd, buf, len);
}

int slot_encode_lease_expire(uint64_t id, uint64_t refreshed_index, uint8_t **buf, size_t *len)
{
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    Slotd__Internal__V1__LeaseExpire ex = SLOTD__INTERNAL__V1__LEASE_EXPIRE__INIT;
    ex.id = id;
    ex.refreshed_index = refreshed_index;
    cmd.hash_slot = (uint32_t)(id >> SLOT_LEASE_ID_SHIFT);
    cmd.command_case = SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_EXPIRE;
    cmd.lease_expire = &ex;
    return pack_log_command(&cmd, buf, len);
}

int slot_encode_group_init(uint32_t group, const uint32_t slot_group[256], uint8_t **buf,
                           size_t *len)
{
    struct route_range ranges[ROUTE_HASH_SLOTS];
    size_t n = route_ranges_of(slot_group, group, ranges, ROUTE_HASH_SLOTS);
    Slotd__Internal__V1__HashSlotRange r[ROUTE_HASH_SLOTS];
    Slotd__Internal__V1__HashSlotRange *rp[ROUTE_HASH_SLOTS];
    for (size_t i = 0; i < n; i++) {
        slotd__internal__v1__hash_slot_range__init(&r[i]);
        r[i].first = ranges[i].first;
        r[i].last = ranges[i].last;
        rp[i] = &r[i];
    }
    Slotd__Internal__V1__GroupInit init = SLOTD__INTERNAL__V1__GROUP_INIT__INIT;
    init.group_id = group;
    init.n_ranges = n;
    init.ranges = rp;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.command_case = SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_GROUP_INIT;
    cmd.group_init = &init;
    return pack_log_command(&cmd, buf, len);
}
