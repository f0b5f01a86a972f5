/* runtime.c - runtime lifecycle, the bounded inbound queue, and the loop thread's callbacks. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>

#include "service/runtime/internal.h"

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

int64_t rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rt_list_push(struct rt_list *l, struct rt_request *r)
{
    r->next = NULL;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    l->len++;
}

struct rt_request *rt_list_pop(struct rt_list *l)
{
    struct rt_request *r = l->head;
    if (r == NULL)
        return NULL;
    l->head = r->next;
    if (l->head == NULL)
        l->tail = NULL;
    l->len--;
    r->next = NULL;
    return r;
}

void rt_list_concat(struct rt_list *dst, struct rt_list *src)
{
    if (src->head == NULL)
        return;
    if (dst->tail)
        dst->tail->next = src->head;
    else
        dst->head = src->head;
    dst->tail = src->tail;
    dst->len += src->len;
    memset(src, 0, sizeof(*src));
}

void rt_fail(struct rt_request *r, int code, const char *fmt, ...)
{
    struct slotd_error e;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    slotd_error_set(&e, code, "%s", msg);
    if (code == SLOTD_EQUEUE_FULL || code == SLOTD_ENO_LEADER)
        e.retry_after_ms = 100;
    rpc_call_fail(r->call, &e);
    free(r);
}

void rt_fail_list(struct rt_list *l, int code, const char *msg)
{
    struct rt_request *r;
    while ((r = rt_list_pop(l)) != NULL)
        rt_fail(r, code, "group %u: %s", r->group, msg);
}

/* ---- Initial voters and the route ---- */

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

#define OBS_KEEP_MS 60000 /* a replica's answer is shown for this long */

static bool conf_lists(const uint64_t *ids, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* rg's observed side: the configuration (this node's replica's, else what a peer reported) and
 * every replica's own last answer, this node's own replica live. */
static void fill_observed(struct runtime *rt, struct rt_group *g, struct route_group *rg,
                          int64_t now)
{
    struct route_replica self = {0};
    bool have_self = false;
    if (g->hosted && g->raft != NULL) {
        struct raft_status st;
        raft_status(g->raft, &st);
        uint32_t nv = st.conf.n_voters < ROUTE_MEMBERS_MAX ? st.conf.n_voters : ROUTE_MEMBERS_MAX;
        uint32_t nl =
            st.conf.n_learners < ROUTE_MEMBERS_MAX ? st.conf.n_learners : ROUTE_MEMBERS_MAX;
        rg->n_voters = nv;
        memcpy(rg->voters, st.conf.voters, nv * sizeof(uint64_t));
        rg->n_learners = nl;
        memcpy(rg->learners, st.conf.learners, nl * sizeof(uint64_t));
        self = (struct route_replica){
            .node = rt->opts.node_id,
            .role = conf_lists(rg->voters, nv, rt->opts.node_id)     ? ROUTE_ROLE_VOTER
                    : conf_lists(rg->learners, nl, rt->opts.node_id) ? ROUTE_ROLE_LEARNER
                                                                     : ROUTE_ROLE_NONE,
            .leader = g->leader,
            .term = st.term,
            .commit = st.commit, /* raft's own: g->commit follows only the durable hard state */
            .applied = g->applied,
            .heard_ms = now};
        have_self = true;
    } else if (g->obs_conf_ms > 0) {
        rg->n_voters = g->n_obs_voters;
        memcpy(rg->voters, g->obs_voters, g->n_obs_voters * sizeof(uint64_t));
        rg->n_learners = g->n_obs_learners;
        memcpy(rg->learners, g->obs_learners, g->n_obs_learners * sizeof(uint64_t));
    }
    /* drop answers too old to mean anything, then merge this node's own in node order */
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->n_obs; i++)
        if (now - g->obs[i].heard_ms <= OBS_KEEP_MS && g->obs[i].node != rt->opts.node_id)
            g->obs[k++] = g->obs[i];
    g->n_obs = k;
    rg->n_replicas = 0;
    for (uint32_t i = 0; i <= g->n_obs && rg->n_replicas < ROUTE_MEMBERS_MAX; i++) {
        if (have_self && (i == g->n_obs || g->obs[i].node > self.node)) {
            rg->replicas[rg->n_replicas++] = self;
            have_self = false;
            if (rg->n_replicas == ROUTE_MEMBERS_MAX)
                break;
        }
        if (i < g->n_obs)
            rg->replicas[rg->n_replicas++] = g->obs[i];
    }
}

void rt_publish_route(struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    int64_t now = rt_now_ms();
    struct route_snapshot *s;
    if (route_snapshot_clone(rt->route_base, &s) != 0) {
        RT_LOG("error", "msg=\"route publish: out of memory\"");
        return;
    }
    bool all_led = s->table_ready;
    size_t led = 0;
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        struct route_group *rg = route_snapshot_group_mut(s, g->id);
        if (rg == NULL)
            continue;
        rg->leader = g->leader;
        rg->leader_term = g->leader ? g->term : 0;
        rg->silent_term = g->leader ? 0 : g->term;
        fill_observed(rt, g, rg, now);
        if (g->hosted) {
            all_led = all_led && g->leader != 0;
            led += g->leader == rt->opts.node_id;
        }
    }
    led += rt->groups[0].hosted && rt->groups[0].leader == rt->opts.node_id;
    atomic_store(&rt->led_groups, led);
    metrics_gauge_set(rt->metrics.route_revision, (int64_t)s->revision);
    route_table_publish(rt->routes, s);
    if (all_led != rt->health_serving) {
        rt->health_serving = all_led;
        rpc_server_set_health(rt->server, "", all_led ? 1 : 2); /* SERVING : NOT_SERVING */
        rpc_server_set_health(rt->server, "slotd.v1.Metadata", all_led ? 1 : 2);
        RT_LOG("info", "msg=\"health changed\" serving=%s", all_led ? "true" : "false");
    }
}

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

/* ---- Loop thread ---- */

void rt_drain_inbound(struct runtime *rt, struct rt_list *out);
void rt_handle_requests(struct runtime *rt, struct rt_list *reqs);
void rt_tick(struct runtime *rt);
void rt_fail_everything(struct runtime *rt);

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

/* slot_claim_cb: rows of a hash slot shared with another group hosted here (peer.c). */
static bool claimed_elsewhere(void *ctx, uint32_t group, uint16_t hash_slot)
{
    return rt_slot_claimed_elsewhere(ctx, group, hash_slot);
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
    rt_groups_close(rt);
    rt_ctl_close(rt);
    store_log_batch_free(rt->log_batch);
    slot_fsm_free(rt->fsm);
    route_snapshot_release(rt->route_base);
    pthread_mutex_destroy(&rt->mu);
    free(rt);
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
    rt_groups_close(rt);
    rt_ctl_close(rt);
    store_log_batch_free(rt->log_batch);
    slot_fsm_free(rt->fsm);
    route_snapshot_release(rt->route_base);
    pthread_mutex_destroy(&rt->mu);
    free(rt);
}

bool runtime_hosts_group(const struct runtime *rt, uint32_t group)
{
    return group < RT_GROUPS_CAP &&
           atomic_load_explicit(&rt->groups[group].hosted, memory_order_acquire);
}

uint64_t runtime_node_id(const struct runtime *rt)
{
    return rt->opts.node_id;
}
