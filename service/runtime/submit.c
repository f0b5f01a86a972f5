/* submit.c - the bounded inbound queue: gRPC and transport threads hand requests to the loop. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/runtime/internal.h"
#include "service/runtime/request.h"
#include "service/runtime/submit.h"

/* ---- Submission (gRPC threads) ---- */

/* Client requests and peer traffic have separate bounds, so a flood of
 * client requests cannot starve the raft messages that keep leaders alive. */
static int submit(struct runtime *rt, struct rt_request *r, struct slotd_error *err)
{
    size_t bytes = sizeof(*r) + r->len;
    bool client = r->kind == RT_PROPOSE || r->kind == RT_READ;
    size_t *len = client ? &rt->client_len : &rt->peer_len;
    size_t *qbytes = client ? &rt->client_bytes : &rt->peer_bytes;
    size_t len_max = client ? rt->opts.queue_len_max : RT_PEER_QUEUE_LEN_MAX;
    size_t bytes_max = client ? rt->opts.queue_bytes_max : RT_PEER_QUEUE_BYTES_MAX;
    pthread_mutex_lock(&rt->mu);
    if (rt->stopping) {
        pthread_mutex_unlock(&rt->mu);
        slotd_error_set(err, SLOTD_ESHUTTING_DOWN, "node is shutting down");
        return -1;
    }
    if (*len >= len_max || *qbytes + bytes > bytes_max) {
        size_t n = *len, qb = *qbytes;
        pthread_mutex_unlock(&rt->mu);
        slotd_error_set(err, SLOTD_EQUEUE_FULL,
                        "%s queue full (%zu requests, %zu bytes; limits %zu, %zu)",
                        client ? "request" : "peer", n, qb, len_max, bytes_max);
        err->retry_after_ms = 50;
        return -1;
    }
    rt_list_push(&rt->inbound, r);
    (*len)++;
    *qbytes += bytes;
    metrics_gauge_set(client ? rt->metrics.queue_client : rt->metrics.queue_peer, (int64_t)*len);
    pthread_mutex_unlock(&rt->mu);
    uv_async_send(&rt->wake);
    return 0;
}

static struct rt_request *request_alloc(uint32_t group, const void *data, size_t len,
                                        struct rpc_call *call, struct slotd_error *err)
{
    struct rt_request *r = malloc(sizeof(*r) + len);
    if (r == NULL) {
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return NULL;
    }
    memset(r, 0, sizeof(*r));
    r->group = group;
    r->call = call;
    r->deadline_ms = call ? rpc_call_deadline_ms(call) : INT64_MAX;
    r->len = len;
    if (len > 0)
        memcpy(r->data, data, len);
    return r;
}

static struct rt_request *request_new(struct runtime *rt, uint32_t group, const void *data,
                                      size_t len, struct rpc_call *call, struct slotd_error *err)
{
    if (!runtime_hosts_group(rt, group)) {
        slotd_error_set(err, SLOTD_EWRONG_GROUP, "group %u is not hosted by node %llu", group,
                        (unsigned long long)rt->opts.node_id);
        return NULL;
    }
    return request_alloc(group, data, len, call, err);
}

/* Queues a peer/internal request (no group check). */
static int submit_internal(struct runtime *rt, uint8_t kind, const void *data, size_t len,
                           struct rpc_call *call, uint64_t arg, struct slotd_error *err)
{
    struct slotd_error scratch;
    struct slotd_error *e = err ? err : &scratch;
    struct rt_request *r = request_alloc(0, data, len, call, e);
    if (r == NULL)
        return -1;
    r->kind = kind;
    r->min_applied = arg;
    if (submit(rt, r, e) != 0) {
        free(r);
        return -1;
    }
    return 0;
}

int runtime_submit_raft_batch(struct runtime *rt, const uint8_t *batch, size_t len, uint64_t caller,
                              struct slotd_error *err)
{
    return submit_internal(rt, RT_RAFT_BATCH, batch, len, NULL, caller, err);
}

int runtime_submit_ctl_state(struct runtime *rt, const uint8_t *resp, size_t len)
{
    return submit_internal(rt, RT_CTL_STATE, resp, len, NULL, 0, NULL);
}

void runtime_peer_unreachable(struct runtime *rt, uint64_t peer)
{
    submit_internal(rt, RT_UNREACHABLE, NULL, 0, NULL, peer, NULL);
}

int runtime_submit_snapshot_chunk(struct runtime *rt, const uint8_t *chunk, size_t len,
                                  struct rpc_call *call, struct slotd_error *err)
{
    return submit_internal(rt, RT_SNAP_CHUNK, chunk, len, call, 0, err);
}

/* Called from the transport's thread with a peer's GroupStatus answer. */
void rt_submit_group_status(struct runtime *rt, const uint8_t *resp, size_t len)
{
    submit_internal(rt, RT_GROUP_STATUS, resp, len, NULL, 0, NULL);
}

/* Called from the transport's thread when a snapshot chunk RPC finished. */
void rt_submit_snap_sent(struct runtime *rt, uint64_t transfer_id, bool ok)
{
    struct slotd_error e;
    struct rt_request *r = request_alloc(0, NULL, 0, NULL, &e);
    if (r == NULL)
        return;
    r->kind = RT_SNAP_SENT;
    r->index = transfer_id;
    r->min_applied = ok;
    /* Not subject to the queue bound: the transfer would stall forever otherwise. */
    pthread_mutex_lock(&rt->mu);
    if (rt->stopping) {
        pthread_mutex_unlock(&rt->mu);
        free(r);
        return;
    }
    rt_list_push(&rt->inbound, r);
    rt->peer_len++;
    rt->peer_bytes += sizeof(*r);
    metrics_gauge_set(rt->metrics.queue_peer, (int64_t)rt->peer_len);
    pthread_mutex_unlock(&rt->mu);
    uv_async_send(&rt->wake);
}

size_t runtime_transfer_leadership(struct runtime *rt, unsigned timeout_ms)
{
    if (!rt->started || rt->transport == NULL)
        return atomic_load(&rt->led_groups);
    submit_internal(rt, RT_TRANSFER, NULL, 0, NULL, 0, NULL);
    int64_t until = rt_now_ms() + timeout_ms;
    while (atomic_load(&rt->led_groups) > 0 && rt_now_ms() < until) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&rt->led_groups);
}

int runtime_submit_propose(struct runtime *rt, uint32_t group, const uint8_t *entry, size_t len,
                           struct rpc_call *call, struct slotd_error *err)
{
    struct rt_request *r = request_new(rt, group, entry, len, call, err);
    if (r == NULL)
        return -1;
    r->kind = RT_PROPOSE;
    if (submit(rt, r, err) != 0) {
        free(r);
        return -1;
    }
    return 0;
}

int runtime_submit_read(struct runtime *rt, uint32_t group, uint16_t hash_slot, const void *req,
                        size_t len, int consistency, uint64_t min_applied_index,
                        struct rpc_call *call, struct slotd_error *err)
{
    struct rt_request *r = request_new(rt, group, req, len, call, err);
    if (r == NULL)
        return -1;
    r->kind = RT_READ;
    r->hash_slot = hash_slot;
    r->consistency = (uint8_t)consistency;
    r->min_applied = min_applied_index;
    if (submit(rt, r, err) != 0) {
        free(r);
        return -1;
    }
    return 0;
}

bool runtime_hosts_group(const struct runtime *rt, uint32_t group)
{
    return group < RT_GROUPS_CAP &&
           atomic_load_explicit(&rt->groups[group].hosted, memory_order_acquire);
}
