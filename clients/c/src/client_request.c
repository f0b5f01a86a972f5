/* client_request.c - libslotd's opaque inputs (options, queries, txn, watch, admin command). */
#include "client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Replaces *slot by a copy of len bytes at p (NULL for p NULL). EINVAL for NULL with a length,
 * ENOMEM when the copy fails (then *slot is unchanged). */
static int request_bytes_set(const void **slot, size_t *slot_len, const void *p, size_t len)
{
    if (!p && len)
        return SLOTD_CLIENT_EINVAL;
    void *copy = NULL;
    if (p) {
        copy = malloc(len ? len : 1);
        if (!copy)
            return SLOTD_CLIENT_ENOMEM;
        memcpy(copy, p, len);
    }
    free((void *)*slot);
    *slot = copy;
    if (slot_len)
        *slot_len = p ? len : 0;
    return SLOTD_CLIENT_OK;
}

/* Replaces *slot by a copy of count elements of size bytes at p (count 0 unsets) and sets
 * *slot_count. EINVAL for more than max or NULL with a count, ENOMEM when the copy fails (then
 * both are unchanged). */
static int request_array_set(const void **slot, size_t *slot_count, const void *p, size_t count,
                             size_t size, size_t max)
{
    if (count > max)
        return SLOTD_CLIENT_EINVAL;
    const void *copy = *slot;
    int rc = request_bytes_set(&copy, NULL, count ? p : NULL, count * size);
    if (rc == SLOTD_CLIENT_OK) {
        *slot = copy;
        *slot_count = count;
    }
    return rc;
}

/* Copies a caller's request id (len <= SLOTD_REQUEST_ID_LEN_MAX bytes; NULL: none) into buf and
 * sets *has and *buf_len. EINVAL (nothing changed) for NULL with a length or a longer id. */
static int request_id_set(uint8_t *buf, size_t *buf_len, bool *has, const void *id, size_t len)
{
    if ((!id && len) || len > SLOTD_REQUEST_ID_LEN_MAX)
        return SLOTD_CLIENT_EINVAL;
    *has = id != NULL;
    *buf_len = id ? len : 0;
    if (len)
        memcpy(buf, id, len);
    return SLOTD_CLIENT_OK;
}

/* As request_bytes_set for a NUL-terminated string (NULL unsets). */
static int request_string_set(const char **slot, const char *s)
{
    return request_bytes_set((const void **)slot, NULL, s, s ? strlen(s) + 1 : 0);
}

/* ---- client options ------------------------------------------------------------------------- */

struct slotd_options *slotd_options_create(void)
{
    struct slotd_options *o = malloc(sizeof(*o));
    if (o)
        slotd__options_init(o);
    return o;
}

void slotd_options_destroy(struct slotd_options *o)
{
    if (!o)
        return;
    free((void *)o->tls_ca_file);
    free((void *)o->tls_cert_file);
    free((void *)o->tls_key_file);
    free((void *)o->tls_server_name);
    free(o);
}

void slotd_options_set_deadline_ms(struct slotd_options *o, int deadline_ms)
{
    o->deadline_ms = deadline_ms;
}

void slotd_options_set_max_retries(struct slotd_options *o, int max_retries)
{
    o->max_retries = max_retries;
}

void slotd_options_set_route_refresh_ms(struct slotd_options *o, int route_refresh_ms)
{
    o->route_refresh_ms = route_refresh_ms;
}

int slotd_options_set_tls_ca_file(struct slotd_options *o, const char *path)
{
    return request_string_set(&o->tls_ca_file, path);
}

int slotd_options_set_tls_cert_file(struct slotd_options *o, const char *path)
{
    return request_string_set(&o->tls_cert_file, path);
}

int slotd_options_set_tls_key_file(struct slotd_options *o, const char *path)
{
    return request_string_set(&o->tls_key_file, path);
}

int slotd_options_set_tls_server_name(struct slotd_options *o, const char *server_name)
{
    return request_string_set(&o->tls_server_name, server_name);
}

/* ---- write and read options ----------------------------------------------------------------- */

struct slotd_write_options *slotd_write_options_create(void)
{
    return calloc(1, sizeof(struct slotd_write_options));
}

void slotd_write_options_destroy(struct slotd_write_options *wo)
{
    free(wo);
}

int slotd_write_options_set_request_id(struct slotd_write_options *wo, const void *id, size_t len)
{
    return request_id_set(wo->request_id, &wo->request_id_len, &wo->has_request_id, id, len);
}

void slotd_write_options_set_no_request_id(struct slotd_write_options *wo, bool no_request_id)
{
    wo->no_request_id = no_request_id;
}

void slotd_write_options_set_lease(struct slotd_write_options *wo, uint64_t lease)
{
    wo->lease = lease;
}

struct slotd_read_options *slotd_read_options_create(void)
{
    return calloc(1, sizeof(struct slotd_read_options));
}

void slotd_read_options_destroy(struct slotd_read_options *ro)
{
    free(ro);
}

void slotd_read_options_set_consistency(struct slotd_read_options *ro, int consistency)
{
    ro->consistency = consistency;
}

void slotd_read_options_set_min_applied_index(struct slotd_read_options *ro, uint64_t index)
{
    ro->min_applied_index = index;
}

/* ---- range query ---------------------------------------------------------------------------- */

struct slotd_range_query *slotd_range_query_create(void)
{
    return calloc(1, sizeof(struct slotd_range_query));
}

void slotd_range_query_destroy(struct slotd_range_query *q)
{
    if (!q)
        return;
    free((void *)q->prefix);
    free((void *)q->start);
    free((void *)q->end);
    free((void *)q->cursor);
    free(q);
}

int slotd_range_query_set_prefix(struct slotd_range_query *q, const void *prefix, size_t len)
{
    return request_bytes_set(&q->prefix, &q->prefix_len, prefix, len);
}

int slotd_range_query_set_start(struct slotd_range_query *q, const void *start, size_t len)
{
    return request_bytes_set(&q->start, &q->start_len, start, len);
}

int slotd_range_query_set_end(struct slotd_range_query *q, const void *end, size_t len)
{
    return request_bytes_set(&q->end, &q->end_len, end, len);
}

int slotd_range_query_set_cursor(struct slotd_range_query *q, const void *cursor, size_t len)
{
    return request_bytes_set(&q->cursor, &q->cursor_len, len ? cursor : NULL, len);
}

void slotd_range_query_set_limit(struct slotd_range_query *q, uint32_t limit)
{
    q->limit = limit;
}

void slotd_range_query_set_keys_only(struct slotd_range_query *q, bool keys_only)
{
    q->keys_only = keys_only;
}

void slotd_range_query_set_count_only(struct slotd_range_query *q, bool count_only)
{
    q->count_only = count_only;
}

void slotd_range_query_set_consistency(struct slotd_range_query *q, int consistency)
{
    q->consistency = consistency;
}

/* ---- txn ------------------------------------------------------------------------------------ */

struct slotd_txn *slotd_txn_create(void)
{
    return calloc(1, sizeof(struct slotd_txn));
}

static void txn_op_clear(struct slotd_txn_op *op)
{
    free((void *)op->key);
    free((void *)op->value);
}

void slotd_txn_destroy(struct slotd_txn *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->compare_count; i++) {
        free((void *)t->compares[i].key);
        free((void *)t->compares[i].value);
    }
    for (size_t i = 0; i < t->success_count; i++)
        txn_op_clear(&t->success[i]);
    for (size_t i = 0; i < t->failure_count; i++)
        txn_op_clear(&t->failure[i]);
    free(t);
}

/* Records the first refused add of t (reported by slotd_client_txn) and returns EINVAL. */
static int txn_refuse(struct slotd_txn *t, const char *field, uint64_t limit, const char *what)
{
    if (t->bad[0] == '\0') {
        snprintf(t->bad, sizeof(t->bad), "txn: %s: %s", field, what);
        snprintf(t->bad_field, sizeof(t->bad_field), "%s", field);
        t->bad_limit = limit;
    }
    return SLOTD_CLIENT_EINVAL;
}

/* Copies key and value into *key_out / *value_out (both or neither). */
static int txn_copy(const void *key, size_t klen, const void *value, size_t vlen,
                    const void **key_out, const void **value_out)
{
    const void *k = NULL, *v = NULL;
    size_t unused;
    int rc = request_bytes_set(&k, &unused, key ? key : "", key ? klen : 0);
    if (rc == SLOTD_CLIENT_OK && value)
        rc = request_bytes_set(&v, &unused, value, vlen);
    if (rc != SLOTD_CLIENT_OK) {
        free((void *)k);
        return rc;
    }
    *key_out = k;
    *value_out = v;
    return SLOTD_CLIENT_OK;
}

int slotd_txn_add_compare(struct slotd_txn *t, const void *key, size_t klen, int target, int op,
                          uint64_t version, const void *value, size_t vlen)
{
    if (t->compare_count == SLOTD_TXN_COMPARES_MAX)
        return txn_refuse(t, "txn.compares", SLOTD_TXN_COMPARES_MAX, "more than 16 compares");
    if ((!key && klen) || (!value && vlen))
        return txn_refuse(t, "txn.compares", 0, "a NULL key or value with a length");
    if (target < SLOTD_TXN_TARGET_VERSION || target > SLOTD_TXN_TARGET_ABSENT ||
        op < SLOTD_TXN_CMP_NONE || op > SLOTD_TXN_CMP_LESS)
        return txn_refuse(t, "txn.compares", 0, "an unknown target or comparison");
    struct slotd_txn_compare *c = &t->compares[t->compare_count];
    memset(c, 0, sizeof(*c));
    int rc = txn_copy(key, klen, value, vlen, &c->key, &c->value);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    c->key_len = klen;
    c->value_len = value ? vlen : 0;
    c->target = target;
    c->op = op;
    c->version = version;
    t->compare_count++;
    return SLOTD_CLIENT_OK;
}

int slotd_txn_add_op(struct slotd_txn *t, int branch, int kind, const void *key, size_t klen,
                     const void *value, size_t vlen, uint64_t lease)
{
    if (branch != SLOTD_TXN_SUCCESS && branch != SLOTD_TXN_FAILURE)
        return txn_refuse(t, "txn.branch", 0, "not SLOTD_TXN_SUCCESS or SLOTD_TXN_FAILURE");
    const char *field = branch == SLOTD_TXN_SUCCESS ? "txn.success" : "txn.failure";
    struct slotd_txn_op *ops = branch == SLOTD_TXN_SUCCESS ? t->success : t->failure;
    size_t *count = branch == SLOTD_TXN_SUCCESS ? &t->success_count : &t->failure_count;
    if (*count == SLOTD_TXN_OPS_MAX)
        return txn_refuse(t, field, SLOTD_TXN_OPS_MAX, "more than 64 ops");
    if (kind < SLOTD_TXN_PUT || kind > SLOTD_TXN_GET || (!key && klen) || (!value && vlen) ||
        (lease != 0 && kind != SLOTD_TXN_PUT))
        return txn_refuse(t, field, 0,
                          "an op kind that is not put/delete/get, a NULL key or value with a "
                          "length, or a lease on an op that is not a put");
    struct slotd_txn_op *op = &ops[*count];
    memset(op, 0, sizeof(*op));
    int rc = txn_copy(key, klen, kind == SLOTD_TXN_PUT ? value : NULL, vlen, &op->key, &op->value);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    op->kind = kind;
    op->key_len = klen;
    op->value_len = op->value ? vlen : 0;
    op->lease = lease;
    (*count)++;
    return SLOTD_CLIENT_OK;
}

int slotd_txn_set_request_id(struct slotd_txn *t, const void *id, size_t len)
{
    if (request_id_set(t->request_id, &t->request_id_len, &t->has_request_id, id, len) != 0)
        return txn_refuse(t, "request_id", SLOTD_REQUEST_ID_LEN_MAX, "not 1..64 bytes");
    return SLOTD_CLIENT_OK;
}

void slotd_txn_set_no_request_id(struct slotd_txn *t, bool no_request_id)
{
    t->no_request_id = no_request_id;
}

/* ---- watch request -------------------------------------------------------------------------- */

struct slotd_watch_request *slotd_watch_request_create(void)
{
    return calloc(1, sizeof(struct slotd_watch_request));
}

void slotd_watch_request_destroy(struct slotd_watch_request *w)
{
    if (!w)
        return;
    free((void *)w->key);
    free((void *)w->prefix);
    free((void *)w->typed_id);
    free((void *)w->resume);
    free(w);
}

int slotd_watch_request_set_key(struct slotd_watch_request *w, const void *key, size_t len)
{
    return request_bytes_set(&w->key, &w->key_len, key, len);
}

int slotd_watch_request_set_prefix(struct slotd_watch_request *w, const void *prefix, size_t len)
{
    return request_bytes_set(&w->prefix, &w->prefix_len, prefix, len);
}

int slotd_watch_request_set_typed(struct slotd_watch_request *w, int kind, const char *id)
{
    int rc = request_string_set(&w->typed_id, id);
    if (rc == SLOTD_CLIENT_OK)
        w->typed_kind = kind;
    return rc;
}

int slotd_watch_request_set_resume(struct slotd_watch_request *w,
                                   const struct slotd_watch_position *positions, size_t count)
{
    return request_array_set((const void **)&w->resume, &w->resume_count, positions, count,
                             sizeof(*positions), SLOTD_WATCH_GROUPS_MAX);
}

void slotd_watch_request_set_progress_interval_ms(struct slotd_watch_request *w, uint32_t ms)
{
    w->progress_interval_ms = ms;
}

void slotd_watch_request_set_keys_only(struct slotd_watch_request *w, bool keys_only)
{
    w->keys_only = keys_only;
}

void slotd_watch_request_set_timeout_ms(struct slotd_watch_request *w, int timeout_ms)
{
    w->timeout_ms = timeout_ms;
}

void slotd_watch_request_set_max_resumes(struct slotd_watch_request *w, int max_resumes)
{
    w->max_resumes = max_resumes;
}

/* ---- admin command -------------------------------------------------------------------------- */

struct slotd_admin_command *slotd_admin_command_create(int kind)
{
    struct slotd_admin_command *cmd = calloc(1, sizeof(*cmd));
    if (cmd)
        cmd->kind = (enum slotd_admin_kind)kind;
    return cmd;
}

void slotd_admin_command_destroy(struct slotd_admin_command *cmd)
{
    if (!cmd)
        return;
    free((void *)cmd->address);
    free((void *)cmd->hash_slots);
    free((void *)cmd->feature);
    free((void *)cmd->destination);
    free(cmd);
}

void slotd_admin_command_set_node_id(struct slotd_admin_command *cmd, uint64_t node_id)
{
    cmd->node_id = node_id;
}

int slotd_admin_command_set_address(struct slotd_admin_command *cmd, const char *address)
{
    return request_string_set(&cmd->address, address);
}

void slotd_admin_command_set_weight(struct slotd_admin_command *cmd, uint32_t weight)
{
    cmd->weight = weight;
}

void slotd_admin_command_set_group_id(struct slotd_admin_command *cmd, uint32_t group_id)
{
    cmd->group_id = group_id;
}

void slotd_admin_command_set_from_node(struct slotd_admin_command *cmd, uint64_t node_id)
{
    cmd->from_node = node_id;
}

void slotd_admin_command_set_to_node(struct slotd_admin_command *cmd, uint64_t node_id)
{
    cmd->to_node = node_id;
}

void slotd_admin_command_set_task_id(struct slotd_admin_command *cmd, uint64_t task_id)
{
    cmd->task_id = task_id;
}

int slotd_admin_command_set_hash_slots(struct slotd_admin_command *cmd, const uint32_t *slots,
                                       size_t count)
{
    return request_array_set((const void **)&cmd->hash_slots, &cmd->hash_slot_count, slots, count,
                             sizeof(*slots), SLOTD_HASH_SLOTS);
}

void slotd_admin_command_set_to_group(struct slotd_admin_command *cmd, uint32_t to_group)
{
    cmd->to_group = to_group;
}

int slotd_admin_command_set_feature(struct slotd_admin_command *cmd, const char *feature,
                                    bool enabled)
{
    int rc = request_string_set(&cmd->feature, feature);
    if (rc == SLOTD_CLIENT_OK)
        cmd->enabled = enabled;
    return rc;
}

void slotd_admin_command_set_enabled(struct slotd_admin_command *cmd, bool enabled)
{
    cmd->enabled = enabled;
}

int slotd_admin_command_set_backup_plan(struct slotd_admin_command *cmd, uint64_t interval_s,
                                        const char *destination, uint32_t retention,
                                        bool delete_plan)
{
    int rc = destination ? request_string_set(&cmd->destination, destination) : SLOTD_CLIENT_OK;
    if (rc == SLOTD_CLIENT_OK) {
        cmd->interval_s = interval_s;
        cmd->retention = retention;
        cmd->delete_plan = delete_plan;
    }
    return rc;
}

void slotd_admin_command_set_expected_revision(struct slotd_admin_command *cmd, uint64_t revision)
{
    cmd->expected_revision = revision;
}
