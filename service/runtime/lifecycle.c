/* lifecycle.c - runtime_new .. runtime_free, the stages wired together, the loop's callbacks. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>

#include "service/runtime/apply.h"
#include "service/runtime/ctl.h"
#include "service/runtime/ctl_members.h"
#include "service/runtime/engine_int.h"
#include "service/runtime/group.h"
#include "service/runtime/internal.h"
#include "service/runtime/keylease.h"
#include "service/runtime/loop.h"
#include "service/runtime/metrics.h"
#include "service/runtime/peer.h"
#include "service/runtime/routes.h"
#include "service/runtime/snapshot.h"
#include "service/runtime/watch.h"

void runtime_options_default(struct runtime_options *o)
{
    memset(o, 0, sizeof(*o));
    o->node_id = 1;
    o->n_groups = 8;
    o->advertise = "127.0.0.1:7700";
    o->peer_advertise = "127.0.0.1:7701";
    o->tick_ms = 100;
    o->election_tick = 10;
    o->heartbeat_tick = 1;
    o->queue_len_max = 65536;
    o->queue_bytes_max = (size_t)256 << 20;
    o->group_proposals_max = 1024;
    o->compact_entries = 10000;
    o->compact_tail = 1000;
    o->snap_chunk_bytes = (size_t)1 << 20;
    o->snap_sends_max = 8;
    o->snap_recv_idle_ms = 90000;
    o->watch_history_bytes = 4u << 20;
    o->task_phase_timeout_ms = 60000;
    o->down_replace_after_ms = 600000;
    o->repair_max_moves = 2;
    o->balance = true;
    o->balance_max_moves = 2;
}

static int cmp_peer(const void *a, const void *b)
{
    const struct runtime_peer *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The initial controller voters, sorted by id; a node started with neither --peers nor --join
 * is a cluster of one. A joining node has none. */
static int init_nodes(struct runtime *rt, char *err, size_t errlen)
{
    struct runtime_options *o = &rt->opts;
    bool joining = o->join != NULL && o->join[0] != '\0';
    if (joining && o->n_nodes > 0) {
        snprintf(err, errlen, "join: a joining node takes no --peers (the cluster has them)");
        return -1;
    }
    if (o->n_nodes == 0 && !joining) {
        o->n_nodes = 1;
        o->nodes[0].id = o->node_id;
        snprintf(o->nodes[0].address, sizeof(o->nodes[0].address), "%s", o->peer_advertise);
    }
    qsort(o->nodes, o->n_nodes, sizeof(o->nodes[0]), cmp_peer);
    bool self = joining;
    for (size_t i = 0; i < o->n_nodes; i++) {
        if (o->nodes[i].id == 0 || (i > 0 && o->nodes[i].id == o->nodes[i - 1].id)) {
            snprintf(err, errlen, "peers: node ids must be unique and >= 1");
            return -1;
        }
        self = self || o->nodes[i].id == o->node_id;
        rt->node_ids[i] = o->nodes[i].id;
    }
    rt->n_nodes = o->n_nodes;
    if (!self) {
        snprintf(err, errlen, "peers: the list does not include this node (--node-id %llu)",
                 (unsigned long long)o->node_id);
        return -1;
    }
    size_t data_nodes = o->bootstrap_expect > o->n_nodes ? o->bootstrap_expect : o->n_nodes;
    if (o->replicas == 0)
        o->replicas = data_nodes < 3 ? (unsigned)(data_nodes ? data_nodes : 1) : 3;
    if (!joining && (o->replicas > data_nodes || o->replicas > RAFT_MEMBERS_MAX)) {
        snprintf(err, errlen, "replicas: %u is more than the %zu data nodes", o->replicas,
                 data_nodes);
        return -1;
    }
    return 0;
}

/* ---- Loop thread ---- */

static void on_wake(uv_async_t *h)
{
    struct runtime *rt = h->data;
    struct rt_list reqs = {0};
    pthread_mutex_lock(&rt->mu);
    reqs = rt->inbound;
    memset(&rt->inbound, 0, sizeof(rt->inbound));
    rt->client_len = rt->client_bytes = rt->peer_len = rt->peer_bytes = 0;
    metrics_gauge_set(rt->metrics.queue_client, 0);
    metrics_gauge_set(rt->metrics.queue_peer, 0);
    pthread_mutex_unlock(&rt->mu);
    rt_handle_requests(rt, &reqs);
    rt_pump(rt);
}

static void on_tick(uv_timer_t *h)
{
    struct runtime *rt = h->data;
    rt_tick(rt);
    rt_pump(rt);
}

static void on_poll(uv_timer_t *h)
{
    rt_poll_peers(h->data);
    rt_ctl_poll(h->data);
    rt_ctl_converge(h->data);
    rt_ctl_liveness(h->data);
    rt_exec_poll(h->data);
    rt_ctl_members_step(h->data);
    rt_pump(h->data); /* what the controller proposed */
}

static void on_close(uv_handle_t *h)
{
    (void)h;
}

/* Stops accepting work, waits for in-flight storage/apply jobs (they finish
 * their calls), fails what is still queued, then closes the handles. */
static void on_stop(uv_async_t *h)
{
    struct runtime *rt = h->data;
    on_wake(&rt->wake); /* queued requests: handled or failed below */
    uv_timer_stop(&rt->ticker);
    uv_timer_stop(&rt->poller);
    rt_fail_everything(rt);
    uv_close((uv_handle_t *)&rt->wake, on_close);
    uv_close((uv_handle_t *)&rt->stop_async, on_close);
    uv_close((uv_handle_t *)&rt->ticker, on_close);
    uv_close((uv_handle_t *)&rt->poller, on_close);
    rt->loop_stopping = true;
    rt_stages_close_idle(rt); /* else when their last job is through */
}

static void *loop_main(void *arg)
{
    struct runtime *rt = arg;
    prctl(PR_SET_NAME, "slotd-loop");
    rt->loop_thread = pthread_self();
    atomic_store_explicit(&rt->loop_running, true, memory_order_release);
    struct ctl_state *pending = rt->ctl_pending;
    rt->ctl_pending = NULL;
    if (pending != NULL)
        rt_ctl_publish(rt, pending); /* the state this node had when it stopped */
    rt_publish_route(rt);
    rt_pump(rt);
    uv_run(&rt->loop, UV_RUN_DEFAULT);
    atomic_store_explicit(&rt->loop_running, false, memory_order_release); /* main takes over */
    return NULL;
}

/* slot_claim_cb: rows of a hash slot shared with another group hosted here (snapshot.c). */
static bool claimed_elsewhere(void *ctx, uint32_t group, uint16_t hash_slot)
{
    return rt_slot_claimed_elsewhere(ctx, group, hash_slot);
}

/* The groups, the controller and the state runtime_new made, then rt (runtime_new's failure and
 * runtime_free, with no thread but the caller's left). */
static void release(struct runtime *rt)
{
    rt_groups_close(rt);
    rt_ctl_close(rt);
    store_log_batch_free(rt->log_batch);
    slot_fsm_free(rt->fsm);
    route_snapshot_release(rt->route_base);
    pthread_mutex_destroy(&rt->mu);
    free(rt);
}

int runtime_new(const struct runtime_options *o, struct store *store, struct route_table *routes,
                struct rpc_server *server, struct transport *transport, struct runtime **out,
                char *err, size_t errlen)
{
    struct runtime *rt = calloc(1, sizeof(*rt));
    if (rt == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rt->opts = *o;
    rt->hooks = (struct rt_hooks){
        .pump = rt_pump,
        .stages_close_idle = rt_stages_close_idle,
        .ctl_capture = rt_ctl_capture,
        .ctl_install = rt_ctl_install,
        .ctl_mirror_reply = rt_ctl_mirror_reply,
    };
    if (rt->opts.seed == 0)
        rt->opts.seed = o->node_id * 0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL);
    rt->store = store;
    rt->routes = routes;
    rt->server = server;
    rt->transport = transport;
    rt->n_groups = 0; /* until a cluster state places slot groups */
    pthread_mutex_init(&rt->mu, NULL);
    if (o->n_groups < 1 || o->n_groups > 64) {
        snprintf(err, errlen, "slot groups: %u is outside 1..64", o->n_groups);
        goto err_after_alloc;
    }
    if (o->state_path == NULL || o->state_path[0] == '\0') {
        snprintf(err, errlen, "state path: not set");
        goto err_after_alloc;
    }
    snprintf(rt->data_dir, sizeof(rt->data_dir), "%s", o->state_path);
    char *slash = strrchr(rt->data_dir, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        snprintf(rt->data_dir, sizeof(rt->data_dir), ".");
    if (init_nodes(rt, err, errlen) != 0)
        goto err_after_alloc;
    if (route_snapshot_new(0, 0, &rt->route_base) != 0 || slot_fsm_new(store, &rt->fsm) != 0 ||
        store_log_batch_new(&rt->log_batch) != 0) {
        snprintf(err, errlen, "out of memory");
        goto err_after_alloc;
    }
    slot_fsm_set_claim_cb(rt->fsm, claimed_elsewhere, rt);
    if (rt_watch_init(rt) != 0) {
        snprintf(err, errlen, "out of memory");
        goto err_after_alloc;
    }
    if (rt_groups_open(rt, err, errlen) != 0 || rt_snap_spool_init(rt, err, errlen) != 0)
        goto err_after_alloc;
    rt_metrics_init(rt);
    if (rt_ctl_open(rt, err, errlen) != 0)
        goto err_after_alloc;
    if (uv_loop_init(&rt->loop) != 0) {
        snprintf(err, errlen, "uv_loop_init failed");
        goto err_after_alloc;
    }
    if (rt_storage_init(rt) != 0 || rt_apply_init(rt) != 0) {
        snprintf(err, errlen, "uv_async_init failed");
        goto err_after_alloc;
    }
    rt->stages_ready = true;
    uv_async_init(&rt->loop, &rt->wake, on_wake);
    uv_async_init(&rt->loop, &rt->stop_async, on_stop);
    uv_timer_init(&rt->loop, &rt->ticker);
    uv_timer_init(&rt->loop, &rt->poller);
    rt->wake.data = rt->stop_async.data = rt->ticker.data = rt->poller.data = rt;
    rt->loop.data = rt;
    *out = rt;
    return 0;

err_after_alloc:
    if (rt->stages_ready) {
        rt_stage_destroy(&rt->storage);
        rt_stage_destroy(&rt->apply);
    }
    rt_watch_free(rt);
    release(rt);
    return -1;
}

int runtime_start(struct runtime *rt)
{
    uv_timer_start(&rt->ticker, on_tick, rt->opts.tick_ms, rt->opts.tick_ms);
    uv_timer_start(&rt->poller, on_poll, 200, 500); /* peers, controller, liveness */
    if (rt_stage_start(&rt->storage) != 0 || rt_stage_start(&rt->apply) != 0)
        return -1;
    if (pthread_create(&rt->thread, NULL, loop_main, rt) != 0)
        return -1;
    rt->started = true;
    return 0;
}

void runtime_stop(struct runtime *rt)
{
    pthread_mutex_lock(&rt->mu);
    bool was = rt->stopping;
    rt->stopping = true;
    pthread_mutex_unlock(&rt->mu);
    if (was || !rt->started)
        return;
    uv_async_send(&rt->stop_async);
    pthread_join(rt->thread, NULL);
    rt_exec_stop(rt); /* the executor's own threads (a backup run) */
    rt_watch_close(rt);
}

void runtime_free(struct runtime *rt)
{
    if (rt == NULL)
        return;
    if (rt->started)
        uv_loop_close(&rt->loop);
    if (rt->stages_ready) { /* idle: the loop ended with no job left (rt_stages_close_idle) */
        rt_stage_destroy(&rt->storage);
        rt_stage_destroy(&rt->apply);
    }
    rt_snap_free_all(rt);
    rt_watch_free(rt);
    rt_keyleases_free(rt);
    release(rt);
}

uint64_t runtime_node_id(const struct runtime *rt)
{
    return rt->opts.node_id;
}
