/* api.c - the slotd.v1.Metadata handlers: decode, validate, route, hand to the runtime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/node/api.h"
#include "service/slot/slot.h"

static void fail_malformed(struct rpc_call *call, const char *what)
{
    struct slotd_error e;
    slotd_error_set(&e, SLOTD_EMALFORMED, "request: does not decode as %s", what);
    snprintf(e.field, sizeof(e.field), "request");
    rpc_call_fail(call, &e);
}

/* Resolves the key's hash slot and group on the current route snapshot. */
static int resolve(struct node_api *api, const ProtobufCBinaryData *key, uint16_t *hash_slot,
                   uint32_t *group, struct slotd_error *err)
{
    struct route_snapshot *s = route_table_acquire(api->routes);
    const struct route_group *g = NULL;
    int rc = route_snapshot_lookup(s, key->data, key->len, hash_slot, &g);
    if (rc == ROUTE_ENOT_READY || g == NULL) {
        route_snapshot_release(s);
        slotd_error_set(err, SLOTD_EROUTE_NOT_READY, "hash slot %u: route not ready",
                        (unsigned)*hash_slot);
        err->retry_after_ms = 100;
        return -1;
    }
    /* A missing leader is decided by the runtime, which knows it first. */
    *group = g->id;
    route_snapshot_release(s);
    return 0;
}

static void on_propose(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    Slotd__V1__ProposeRequest *p = slotd__v1__propose_request__unpack(NULL, len, req);
    if (p == NULL) {
        fail_malformed(call, "slotd.v1.ProposeRequest");
        return;
    }
    const ProtobufCBinaryData *key = NULL;
    uint16_t hs = 0;
    uint32_t group = 0;
    uint8_t *entry = NULL;
    size_t entry_len = 0;
    if (slot_validate_propose(p, &key, &err) != 0 || resolve(api, key, &hs, &group, &err) != 0)
        goto fail;
    if (slot_encode_command(p, hs, &entry, &entry_len) != 0) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        goto fail;
    }
    if (runtime_submit_propose(api->rt, group, entry, entry_len, call, &err) != 0)
        goto fail;
    free(entry);
    slotd__v1__propose_request__free_unpacked(p, NULL);
    return;

fail:
    free(entry);
    slotd__v1__propose_request__free_unpacked(p, NULL);
    rpc_call_fail(call, &err);
}

static void on_read(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    Slotd__V1__ReadRequest *r = slotd__v1__read_request__unpack(NULL, len, req);
    if (r == NULL) {
        fail_malformed(call, "slotd.v1.ReadRequest");
        return;
    }
    const ProtobufCBinaryData *key = NULL;
    uint16_t hs = 0;
    uint32_t group = 0;
    if (slot_validate_read(r, &key, &err) != 0 || resolve(api, key, &hs, &group, &err) != 0 ||
        runtime_submit_read(api->rt, group, hs, key->data, key->len, (int)r->consistency,
                            r->min_applied_index, call, &err) != 0) {
        slotd__v1__read_request__free_unpacked(r, NULL);
        rpc_call_fail(call, &err);
        return;
    }
    slotd__v1__read_request__free_unpacked(r, NULL);
}

static void on_route_snapshot(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    Slotd__V1__RouteSnapshotRequest *r = slotd__v1__route_snapshot_request__unpack(NULL, len, req);
    if (r == NULL) {
        fail_malformed(call, "slotd.v1.RouteSnapshotRequest");
        return;
    }
    slotd__v1__route_snapshot_request__free_unpacked(r, NULL);
    struct route_snapshot *s = route_table_acquire(api->routes);
    if (s == NULL) {
        slotd_error_set(&err, SLOTD_EROUTE_NOT_READY, "route not ready");
        rpc_call_fail(call, &err);
        return;
    }
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc = route_snapshot_encode(s, &buf, &blen);
    route_snapshot_release(s);
    if (rc != 0) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "route encode: %s", route_strerror(rc));
        rpc_call_fail(call, &err);
        return;
    }
    rpc_call_reply_bytes(call, buf, blen);
    free(buf);
}

static void on_task_status(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct slotd_error err;
    Slotd__V1__TaskStatusRequest *r = slotd__v1__task_status_request__unpack(NULL, len, req);
    if (r == NULL) {
        fail_malformed(call, "slotd.v1.TaskStatusRequest");
        return;
    }
    /* This node runs no controller, so it has no tasks to report. */
    slotd_error_set(&err, SLOTD_ENOT_FOUND, "task %llu not found",
                    (unsigned long long)r->task_id);
    slotd__v1__task_status_request__free_unpacked(r, NULL);
    rpc_call_fail(call, &err);
}

int node_api_register(struct node_api *api, struct rpc_server *s)
{
    static const struct {
        const char *path;
        rpc_unary_cb cb;
    } methods[] = {
        {"/slotd.v1.Metadata/Propose", on_propose},
        {"/slotd.v1.Metadata/Read", on_read},
        {"/slotd.v1.Metadata/RouteSnapshot", on_route_snapshot},
        {"/slotd.v1.Metadata/TaskStatus", on_task_status},
    };
    int rc = rpc_server_add_service(s, &slotd__v1__metadata__descriptor);
    for (size_t i = 0; rc == 0 && i < sizeof(methods) / sizeof(methods[0]); i++)
        rc = rpc_server_add_unary(s, methods[i].path, methods[i].cb, api);
    return rc;
}
