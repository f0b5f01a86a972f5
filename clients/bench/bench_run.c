/* bench_run.c - closed-loop load: each completion on a thread's queue issues the next call. */
#include "bench_run.h"

#include "bench_err.h"
#include "bench_route.h"
#include "bench_stream.h"
#include "bench_watch.h"
#include "bench_wire.h"
#include "call.h"
#include "slotd/client.h"
#include "slotd/v1/metadata.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* --populate gives up after this long (it is reported as incomplete, not as a failure). */
#define RUN_POPULATE_S_MAX 600.0
/* How often an idle worker wakes to check the clock. */
#define RUN_POLL_MS 50
#define RUN_REQ_KINDS 4
/* --route-aware: at most one RouteSnapshot fetch per this interval, all threads together. */
#define RUN_ROUTE_REFETCH_NS (200 * 1000000ll)
#define RUN_ROUTE_METHOD "/slotd.v1.Metadata/RouteSnapshot"

enum { RUN_METHOD_PUT, RUN_METHOD_READ, RUN_METHODS };

struct run_channel {
    grpc_channel *channel;
    void *method[RUN_METHODS]; /* registered call handles, owned by the channel */
};

/* A node some route named as a leader, with its channels (--route-aware). */
struct run_node {
    char address[BENCH_ENDPOINT_LEN_MAX + 1];
    struct run_channel *channels; /* o->connections of them; live until the run ends */
};

/* The route every worker of a --route-aware run shares. Workers copy slot_node when version
 * changes and then read nodes[i].channels without the lock: a node is complete before the
 * route that names it is installed, and is never changed afterwards. */
struct run_router {
    pthread_mutex_t lock;
    /* guarded by lock: */
    uint16_t slot_node[BENCH_HASH_SLOTS]; /* index into nodes[], or BENCH_ROUTE_NONE */
    struct run_node nodes[BENCH_ROUTE_ADDRESSES_MAX];
    unsigned node_count;   /* nodes only grow; invariant: <= BENCH_ROUTE_ADDRESSES_MAX */
    int64_t last_fetch_ns; /* start of the latest fetch (rate limit) */
    uint64_t fetches, fetch_failures;
    char last_error[BENCH_ROUTE_ERROR_LEN];
    _Atomic uint64_t version; /* bumped (under lock) by every install */
};

/* One RouteSnapshot call in flight on some completion queue (its tag is the struct). */
struct run_fetch {
    struct slotd_call_io u;
    bool abandoned; /* cancelled by us at the end of a phase: not counted */
};

/* What every worker of one phase reads; only the atomics change while workers run. */
struct run_shared {
    const struct bench_opts *o;
    struct run_channel *channels;
    size_t channel_count;
    const uint8_t *value;
    /* encoded size per request kind, without and with no_forward: keys have a fixed size */
    size_t req_size[RUN_REQ_KINDS][2];
    struct run_router *router; /* NULL without --route-aware; has its own lock */
    bool populate;             /* this phase puts key 0..keys-1 once each */
    uint64_t issue_limit;      /* measured calls to issue (populate: keys), 0 = unbounded */
    int64_t measure_start_ns;
    _Atomic int64_t measure_end_ns; /* set to 0 to stop early */
    _Atomic uint64_t issued;        /* measured calls issued (populate: next key index) */
    /* "authorization: Bearer <token>" sent with every call when has_token (slices alive for
     * the whole run, shared read-only by every call) */
    bool has_token;
    grpc_metadata token_md;
    struct bench_watch *watch; /* --watchers during the measured phase; NULL otherwise */
};

struct run_worker;

/* One in-flight request slot; reused for the next call when its call completes. */
struct run_call {
    struct run_worker *w;
    struct slotd_call_io u; /* u.call NULL while the slot is idle */
    enum bench_req req;
    bool measured;
    bool direct; /* sent to the leader the route names (--route-aware) */
    int64_t start_ns;
};

struct run_worker {
    struct run_shared *s;
    pthread_t thread;
    grpc_completion_queue *cq;
    struct run_call *calls;
    unsigned call_count;
    unsigned inflight; /* invariant: inflight == number of calls[i].u.call != NULL */
    uint64_t rng;
    size_t next_channel;
    char *key; /* key_size + 1 bytes */
    int64_t last_done_ns;
    struct bench_phase phase;
    /* --route-aware: */
    uint64_t route_version;               /* of slot_node; UINT64_MAX before the first copy */
    uint16_t slot_node[BENCH_HASH_SLOTS]; /* copy of the router's */
    size_t next_node_channel;
    bool want_fetch; /* a call failed in a way a newer route may fix */
    struct run_fetch fetch;
    /* --stream: the worker's ProposeStream calls (endpoint channels first, then one per route
     * node) and its call_count items; has_streams false otherwise */
    bool has_streams;
    bool streams_cancelled; /* the phase ended: finished items are not issued again */
    unsigned index;
    int64_t now_ns; /* the time of the completion being handled (item latency) */
    struct bench_stream_set streams;
};

static int64_t run_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double run_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t run_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- channels and the route (--route-aware) ------------------------------------------- */

/* Opens one channel to target. A local subchannel pool gives each channel its own TCP
 * connection; no retries, so each call is exactly one RPC on the wire. With o->tls_pem the
 * channel uses SSL credentials (and the --tls-server-name override). */
static void run_channel_init(struct run_channel *ch, const struct bench_opts *o, const char *target)
{
    grpc_arg args[4] = {
        {.type = GRPC_ARG_INTEGER,
         .key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
         .value.integer = 1},
        {.type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
        /* a watch message batches many events; unary answers are small either way */
        {.type = GRPC_ARG_INTEGER,
         .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = -1},
        {.type = GRPC_ARG_STRING,
         .key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
         .value.string = (char *)(o->tls_pem ? o->tls_pem->server_name : NULL)},
    };
    grpc_channel_args channel_args = {args[3].value.string ? 4 : 3, args};
    /* NULL creds (gRPC refused the PEM text; main() checks that first) give a lame channel
     * that fails the connect check */
    grpc_channel_credentials *creds = client_tls_creds_new(o->tls_pem);
    ch->channel = grpc_channel_create(target, creds, &channel_args);
    if (creds)
        grpc_channel_credentials_release(creds);
    ch->method[RUN_METHOD_PUT] = grpc_channel_register_call(
        ch->channel, bench_wire_method(o->target, BENCH_REQ_PUT), NULL, NULL);
    ch->method[RUN_METHOD_READ] = grpc_channel_register_call(
        ch->channel, bench_wire_method(o->target, BENCH_REQ_GET_LINEARIZABLE), NULL, NULL);
}

/* rt: borrowed for the call. */
static void run_router_init(struct run_router *rt)
{
    memset(rt, 0, sizeof(*rt));
    pthread_mutex_init(&rt->lock, NULL);
    for (unsigned i = 0; i < BENCH_HASH_SLOTS; i++)
        rt->slot_node[i] = BENCH_ROUTE_NONE;
    atomic_init(&rt->version, 0);
}

/* rt: borrowed for the call. Closes every node channel; workers are gone. */
static void run_router_free(struct run_router *rt, unsigned connections)
{
    for (unsigned i = 0; i < rt->node_count; i++) {
        for (unsigned k = 0; k < connections; k++)
            grpc_channel_destroy(rt->nodes[i].channels[k].channel);
        free(rt->nodes[i].channels);
    }
    pthread_mutex_destroy(&rt->lock);
}

/* Index of the node at address, opening its channels when it is new; BENCH_ROUTE_NONE when
 * the node table is full or out of memory. Called with rt->lock held. */
static uint16_t run_router_node(struct run_router *rt, const struct bench_opts *o,
                                const char *address)
{
    for (unsigned i = 0; i < rt->node_count; i++)
        if (strcmp(rt->nodes[i].address, address) == 0)
            return (uint16_t)i;
    if (rt->node_count == BENCH_ROUTE_ADDRESSES_MAX) {
        snprintf(rt->last_error, sizeof(rt->last_error),
                 "route: more than %d leader addresses seen; %s is served round robin",
                 BENCH_ROUTE_ADDRESSES_MAX, address);
        return BENCH_ROUTE_NONE;
    }
    struct run_node *n = &rt->nodes[rt->node_count];
    n->channels = calloc(o->connections, sizeof(*n->channels));
    if (!n->channels) {
        snprintf(rt->last_error, sizeof(rt->last_error), "route: out of memory for %s", address);
        return BENCH_ROUTE_NONE;
    }
    snprintf(n->address, sizeof(n->address), "%s", address);
    for (unsigned k = 0; k < o->connections; k++)
        run_channel_init(&n->channels[k], o, address);
    return (uint16_t)rt->node_count++;
}

/* r: borrowed for the call. Makes r the route every worker uses from its next call on. */
static void run_router_install(struct run_router *rt, const struct bench_opts *o,
                               const struct bench_route *r)
{
    uint16_t node_of[BENCH_ROUTE_ADDRESSES_MAX];
    pthread_mutex_lock(&rt->lock);
    for (unsigned i = 0; i < r->address_count; i++)
        node_of[i] = run_router_node(rt, o, r->addresses[i]);
    for (unsigned slot = 0; slot < BENCH_HASH_SLOTS; slot++) {
        uint16_t a = r->slot_leader[slot];
        rt->slot_node[slot] = a == BENCH_ROUTE_NONE ? BENCH_ROUTE_NONE : node_of[a];
    }
    atomic_fetch_add(&rt->version, 1);
    pthread_mutex_unlock(&rt->lock);
}

/* Brings the worker's copy of the route up to date (cheap when nothing changed). */
static void run_route_sync(struct run_worker *w)
{
    struct run_router *rt = w->s->router;
    if (atomic_load(&rt->version) == w->route_version)
        return;
    pthread_mutex_lock(&rt->lock);
    memcpy(w->slot_node, rt->slot_node, sizeof(w->slot_node));
    w->route_version = atomic_load(&rt->version);
    pthread_mutex_unlock(&rt->lock);
}

/* Starts u->call (created by the caller, with u->send set) with s's token metadata; u and tag
 * borrowed until the completion tagged tag arrives, then slotd_call_io_release. */
static void run_unary_start(struct run_shared *s, struct slotd_call_io *u, void *tag)
{
    u->recv = NULL;
    grpc_metadata_array_init(&u->initial_md);
    grpc_metadata_array_init(&u->trailing_md);
    u->details = grpc_empty_slice();
    grpc_call_error rc =
        slotd_call_unary_start(u->call, &s->token_md, s->has_token ? 1 : 0, u->send, &u->initial_md,
                               &u->recv, &u->trailing_md, &u->status, &u->details, tag);
    assert(rc == GRPC_CALL_OK); /* only a malformed batch fails here: a programmer error */
    (void)rc;
}

/* True when this caller may fetch now: no fetch started in the last RUN_ROUTE_REFETCH_NS. */
static bool run_fetch_claim(struct run_router *rt, int64_t now)
{
    pthread_mutex_lock(&rt->lock);
    bool mine = rt->last_fetch_ns == 0 || now - rt->last_fetch_ns >= RUN_ROUTE_REFETCH_NS;
    if (mine)
        rt->last_fetch_ns = now;
    pthread_mutex_unlock(&rt->lock);
    return mine;
}

/* f: borrowed until its completion arrives on cq (tag f). Asks the first endpoint. */
static void run_fetch_start(struct run_shared *s, struct run_fetch *f, grpc_completion_queue *cq)
{
    memset(f, 0, sizeof(*f));
    grpc_slice empty = grpc_empty_slice(); /* RouteSnapshotRequest has no fields */
    f->u.send = grpc_raw_byte_buffer_create(&empty, 1);
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(s->o->deadline_ms, GPR_TIMESPAN));
    f->u.call = grpc_channel_create_call(s->channels[0].channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                         grpc_slice_from_static_string(RUN_ROUTE_METHOD), NULL,
                                         deadline, NULL);
    run_unary_start(s, &f->u, f);
}

/* Decodes a finished fetch into *route; BENCH_OK or an error sentence in errmsg. */
static int run_fetch_decode(const struct run_shared *s, const struct run_fetch *f, bool success,
                            struct bench_route *route, char *errmsg, size_t errmsg_len)
{
    const char *endpoint = s->o->endpoints[0];
    if (!success || f->u.status != GRPC_STATUS_OK || !f->u.recv) {
        unsigned code = success ? (unsigned)f->u.status : (unsigned)GRPC_STATUS_UNKNOWN;
        return slotd_call_fail(
            errmsg, errmsg_len, BENCH_EMALFORMED, "RouteSnapshot from %s: %s: %.*s", endpoint,
            bench_status_name(code < BENCH_STATUS_OTHER ? code : BENCH_STATUS_OTHER),
            (int)GRPC_SLICE_LENGTH(f->u.details), (const char *)GRPC_SLICE_START_PTR(f->u.details));
    }
    grpc_slice slice;
    if (!slotd_call_flatten(f->u.recv, &slice))
        return slotd_call_fail(errmsg, errmsg_len, BENCH_EMALFORMED,
                               "RouteSnapshot from %s: unreadable response", endpoint);
    int rc = bench_route_decode(route, GRPC_SLICE_START_PTR(slice), GRPC_SLICE_LENGTH(slice),
                                errmsg, errmsg_len);
    grpc_slice_unref(slice);
    return rc;
}

/* f: borrowed for the call. Installs the route a finished fetch got (or counts its failure)
 * and frees the call. */
static void run_fetch_finish(struct run_shared *s, struct run_fetch *f, bool success)
{
    struct run_router *rt = s->router;
    char errmsg[BENCH_ROUTE_ERROR_LEN] = "";
    struct bench_route *route = malloc(sizeof(*route));
    int rc = BENCH_ENOMEM;
    if (!route)
        snprintf(errmsg, sizeof(errmsg), "RouteSnapshot: out of memory");
    else
        rc = run_fetch_decode(s, f, success, route, errmsg, sizeof(errmsg));
    if (rc == BENCH_OK)
        run_router_install(rt, s->o, route);
    if (!f->abandoned) {
        pthread_mutex_lock(&rt->lock);
        rt->fetches++;
        if (rc != BENCH_OK) {
            rt->fetch_failures++;
            snprintf(rt->last_error, sizeof(rt->last_error), "%s", errmsg);
        }
        pthread_mutex_unlock(&rt->lock);
    }
    free(route);
    slotd_call_io_release(&f->u);
}

/* The first fetch, before any load: waits for its answer (bounded by --deadline-ms). */
static void run_fetch_initial(struct run_shared *s)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    struct run_fetch f;
    run_fetch_claim(s->router, run_now_ns());
    run_fetch_start(s, &f, cq);
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    assert(ev.type == GRPC_OP_COMPLETE && ev.tag == &f);
    run_fetch_finish(s, &f, ev.success != 0);
    slotd_call_cq_destroy(cq);
}

/* ---- one call ------------------------------------------------------------------------- */

/* Chooses the next call of this slot; false when the phase issues no more. */
static bool run_next(struct run_worker *w, int64_t now, struct run_call *c, uint64_t *key_index)
{
    struct run_shared *s = w->s;
    const struct bench_opts *o = s->o;
    if (now >= atomic_load(&s->measure_end_ns))
        return false;
    c->measured = now >= s->measure_start_ns;
    if (s->populate) {
        *key_index = atomic_fetch_add(&s->issued, 1);
        c->req = BENCH_REQ_PUT;
        return *key_index < s->issue_limit;
    }
    if (c->measured && s->issue_limit && atomic_fetch_add(&s->issued, 1) >= s->issue_limit)
        return false;
    *key_index = run_splitmix(&w->rng) % o->keys;
    if (o->op != BENCH_OP_MIXED) {
        c->req = bench_wire_req_of(o->op);
    } else {
        double draw = (double)(run_splitmix(&w->rng) >> 11) / 9007199254740992.0; /* [0,1) */
        c->req = draw < o->read_ratio ? bench_wire_req_of(o->read_op) : BENCH_REQ_PUT;
    }
    return true;
}

/* The channel for the key in w->key: its leader's (*direct) with --route-aware when the route
 * names one, else the next endpoint channel round robin. */
static struct run_channel *run_channel_of(struct run_worker *w, bool *direct)
{
    struct run_shared *s = w->s;
    *direct = false;
    if (s->router) {
        run_route_sync(w);
        uint16_t node = w->slot_node[slotd_hash_slot(w->key, s->o->key_size)];
        if (node != BENCH_ROUTE_NONE) {
            *direct = true;
            return &s->router->nodes[node].channels[w->next_node_channel++ % s->o->connections];
        }
    }
    return &s->channels[w->next_channel++ % s->channel_count];
}

/* Starts the slot's next call, or leaves the slot idle when the phase is over. */
static void run_issue(struct run_worker *w, struct run_call *c, int64_t now)
{
    struct run_shared *s = w->s;
    const struct bench_opts *o = s->o;
    uint64_t key_index = 0;
    if (!run_next(w, now, c, &key_index))
        return;

    bench_wire_key_format(w->key, o->key_size, key_index);
    struct run_channel *ch = run_channel_of(w, &c->direct);
    size_t size = s->req_size[c->req][c->direct];
    grpc_slice slice = grpc_slice_malloc(size);
    size_t n = bench_wire_request_encode(o->target, c->req, c->direct, (const uint8_t *)w->key,
                                         o->key_size, s->value, o->value_size,
                                         GRPC_SLICE_START_PTR(slice), size);
    assert(n == size);
    (void)n;
    c->u.send = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);

    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(o->deadline_ms, GPR_TIMESPAN));
    c->u.call = grpc_channel_create_registered_call(
        ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
        ch->method[c->req == BENCH_REQ_PUT ? RUN_METHOD_PUT : RUN_METHOD_READ], deadline, NULL);
    c->start_ns = now;
    run_unary_start(s, &c->u, c);
    w->inflight++;
}

/* Decodes an OK response; false when it is missing or not the expected message. */
static bool run_response_ok(const struct run_worker *w, const struct run_call *c, bool *found)
{
    grpc_slice slice;
    if (!slotd_call_flatten(c->u.recv, &slice))
        return false;
    int rc = bench_wire_response_check(w->s->o->target, c->req, GRPC_SLICE_START_PTR(slice),
                                       GRPC_SLICE_LENGTH(slice), found);
    grpc_slice_unref(slice);
    return rc == BENCH_OK;
}

/* The slotd.v1.ErrorCode a failed call carries in its trailer; false when it has none. */
static bool run_detail_of(const struct run_call *c, unsigned *detail)
{
    struct slotd_status st;
    slotd_call_status_reset(&st);
    slotd_call_trailer_detail(&c->u.trailing_md, &st); /* libslotd's call layer */
    if (!st.has_detail)
        return false;
    *detail = bench_wire_detail_bucket(st.detail_code);
    return true;
}

/* What one finished call or stream item says, for run_count. */
struct run_outcome {
    bool measured, direct;
    enum bench_req req;
    unsigned code; /* < BENCH_STATUS_SLOTS */
    bool ok, found;
    bool has_detail;
    unsigned detail;
    int64_t start_ns;
};

/* Counts a finished call or item when it belongs to the measured window. */
static void run_count(struct run_worker *w, const struct run_outcome *r, int64_t now)
{
    struct bench_phase *p = &w->phase;
    if (!r->measured || now > atomic_load(&w->s->measure_end_ns))
        return;
    p->status[r->code]++;
    if (w->s->router) {
        if (r->direct)
            p->direct++;
        else
            p->fallback++;
    }
    if (r->ok) {
        p->ok++;
        bench_hist_record(&p->latency_ns, (uint64_t)(now - r->start_ns));
        if (r->req == BENCH_REQ_PUT)
            p->writes++;
        else
            p->reads++;
        if (!r->found)
            p->not_found++;
    } else {
        p->errors++;
        if (r->code == GRPC_STATUS_OK)
            p->malformed++;
        else if (r->has_detail)
            p->error_detail[r->detail]++;
    }
    w->last_done_ns = now;
}

/* --route-aware: whether a failure says the route is stale (NOT_LEADER) or a node is gone
 * (UNAVAILABLE), so that a fresh RouteSnapshot may help. */
static bool run_outcome_suspect(const struct run_outcome *r)
{
    return r->code == GRPC_STATUS_UNAVAILABLE ||
           (r->code == GRPC_STATUS_FAILED_PRECONDITION && r->has_detail &&
            r->detail == SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER);
}

/* Counts a finished call (when it belongs to the measured window) and frees it. */
static void run_complete(struct run_worker *w, struct run_call *c, bool success, int64_t now)
{
    unsigned code = success ? (unsigned)c->u.status : (unsigned)GRPC_STATUS_UNKNOWN;
    if (code >= BENCH_STATUS_OTHER)
        code = BENCH_STATUS_OTHER;
    struct run_outcome r = {.measured = c->measured,
                            .direct = c->direct,
                            .req = c->req,
                            .code = code,
                            .found = true,
                            .start_ns = c->start_ns};
    r.ok = code == GRPC_STATUS_OK && run_response_ok(w, c, &r.found);
    if (!r.ok && code != GRPC_STATUS_OK)
        r.has_detail = run_detail_of(c, &r.detail);
    run_count(w, &r, now);
    if (w->s->router && run_outcome_suspect(&r))
        w->want_fetch = true;

    slotd_call_io_release(&c->u);
    w->inflight--;
}

/* ---- one worker thread ---------------------------------------------------------------- */

/* --route-aware: starts a RouteSnapshot fetch a failed call asked for (when the rate limit
 * allows; else the request is dropped and the next failure asks again), and abandons one still
 * in flight once this worker has nothing else left to do. */
static void run_worker_refetch(struct run_worker *w, int64_t now, bool cancelled)
{
    struct run_shared *s = w->s;
    if (w->fetch.u.call) {
        if ((cancelled || w->inflight == 0) && !w->fetch.abandoned) {
            w->fetch.abandoned = true;
            grpc_call_cancel(w->fetch.u.call, NULL);
        }
        return;
    }
    if (!w->want_fetch)
        return;
    w->want_fetch = false;
    if (!cancelled && w->inflight > 0 && run_fetch_claim(s->router, now))
        run_fetch_start(s, &w->fetch, w->cq);
}

static void *run_worker_main(void *arg)
{
    struct run_worker *w = arg;
    struct run_shared *s = w->s;
    int64_t now = run_now_ns();
    for (unsigned i = 0; i < w->call_count; i++)
        run_issue(w, &w->calls[i], now);

    bool cancelled = false;
    while (w->inflight > 0 || w->fetch.u.call) {
        gpr_timespec wake = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(RUN_POLL_MS, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(w->cq, wake, NULL);
        now = run_now_ns();
        if (ev.type == GRPC_OP_COMPLETE && ev.tag == &w->fetch) {
            run_fetch_finish(s, &w->fetch, ev.success != 0);
        } else if (ev.type == GRPC_OP_COMPLETE) {
            struct run_call *c = ev.tag;
            run_complete(w, c, ev.success != 0, now);
            run_issue(w, c, now);
        }
        run_worker_refetch(w, now, cancelled);
        /* Past the end: calls still in flight are not counted; cancel them to finish now. */
        if (!cancelled && now >= atomic_load(&s->measure_end_ns)) {
            for (unsigned i = 0; i < w->call_count; i++)
                if (w->calls[i].u.call)
                    grpc_call_cancel(w->calls[i].u.call, NULL);
            cancelled = true;
        }
    }
    return NULL;
}

/* ---- --stream: items on ProposeStream calls -------------------------------------------- */

/* Submits item (a free entry) as the next put of the phase, or leaves it free when the phase
 * issues no more. */
static void run_stream_issue(struct run_worker *w, unsigned item, int64_t now)
{
    struct run_shared *s = w->s;
    struct run_call next = {.w = w};
    uint64_t key_index = 0;
    if (w->streams_cancelled || !run_next(w, now, &next, &key_index))
        return;
    struct bench_stream_item *it = &w->streams.items[item];
    it->key_index = key_index;
    it->start_ns = now;
    it->measured = next.measured;
    it->direct = false;
    unsigned stream = (unsigned)(w->next_channel++ % s->channel_count);
    grpc_channel *channel = s->channels[stream].channel;
    if (s->router) {
        bench_wire_key_format(w->key, s->o->key_size, key_index);
        run_route_sync(w);
        uint16_t node = w->slot_node[slotd_hash_slot(w->key, s->o->key_size)];
        if (node != BENCH_ROUTE_NONE) {
            it->direct = true;
            stream = (unsigned)s->channel_count + node;
            channel = s->router->nodes[node].channels[w->index % s->o->connections].channel;
        }
    }
    bench_stream_submit(&w->streams, item, stream, channel);
}

/* bench_stream_done_cb: counts the item, asks for a route on NOT_LEADER / UNAVAILABLE, and
 * issues the item's next put (closed loop). */
static void run_stream_done(void *ctx, unsigned item, const struct bench_stream_outcome *out)
{
    struct run_worker *w = ctx;
    const struct bench_stream_item *it = &w->streams.items[item];
    struct run_outcome r = {
        .measured = it->measured && !w->streams_cancelled,
        .direct = it->direct,
        .req = BENCH_REQ_PUT,
        .code = out->code < BENCH_STATUS_OTHER ? out->code : BENCH_STATUS_OTHER,
        .ok = out->code == GRPC_STATUS_OK && out->response_ok,
        .found = true,
        .has_detail = out->has_detail,
        .detail = out->detail,
        .start_ns = it->start_ns,
    };
    if (w->now_ns - it->start_ns > (int64_t)w->s->o->deadline_ms * 1000000ll) {
        /* past --deadline-ms: what a unary call would have ended with */
        r.code = GRPC_STATUS_DEADLINE_EXCEEDED;
        r.ok = false;
        r.has_detail = false;
    }
    run_count(w, &r, w->now_ns);
    if (w->s->router && run_outcome_suspect(&r))
        w->want_fetch = true;
    run_stream_issue(w, item, w->now_ns);
}

static void run_stream_event(struct run_worker *w, grpc_event ev)
{
    w->now_ns = run_now_ns();
    if (ev.tag == &w->fetch) {
        run_fetch_finish(w->s, &w->fetch, ev.success != 0);
        return;
    }
    bool mine = bench_stream_event(&w->streams, ev.tag, ev.success != 0);
    assert(mine); /* nothing else runs on this queue */
    (void)mine;
}

/* The worker loop of --stream: handles every completion that is ready, then sends what the
 * turn made ready, one message per stream (coalescing). */
static void *run_stream_worker_main(void *arg)
{
    struct run_worker *w = arg;
    struct run_shared *s = w->s;
    struct bench_stream_set *set = &w->streams;
    int64_t now = run_now_ns();
    int64_t next_expire_ns = now + RUN_POLL_MS * 1000000ll;
    w->now_ns = now;
    for (unsigned i = 0; i < set->item_count; i++)
        run_stream_issue(w, i, now);
    bench_stream_flush(set);
    while (bench_stream_busy(set) || w->fetch.u.call) {
        gpr_timespec wake = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(RUN_POLL_MS, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(w->cq, wake, NULL);
        while (ev.type == GRPC_OP_COMPLETE) {
            run_stream_event(w, ev);
            ev = grpc_completion_queue_next(w->cq, gpr_inf_past(GPR_CLOCK_MONOTONIC), NULL);
        }
        now = run_now_ns();
        w->now_ns = now;
        w->inflight = set->inflight;
        run_worker_refetch(w, now, w->streams_cancelled);
        if (!w->streams_cancelled &&
            (now >= atomic_load(&s->measure_end_ns) || set->inflight == 0)) {
            /* Past the end: items still in flight are not counted; cancel to finish now. With
             * nothing in flight the phase issues no more (--ops, populate): close the calls. */
            w->streams_cancelled = true;
            bench_stream_cancel_all(set);
        }
        if (w->streams_cancelled)
            continue;
        if (now >= next_expire_ns) {
            bench_stream_expire(set, now, (int64_t)s->o->deadline_ms * 1000000ll);
            next_expire_ns = now + RUN_POLL_MS * 1000000ll;
        }
        bench_stream_flush(set);
    }
    struct bench_phase *p = &w->phase;
    p->streams_opened = set->streams_opened;
    p->stream_messages_sent = set->messages_sent;
    p->stream_items_sent = set->items_sent;
    p->stream_messages_received = set->messages_received;
    p->malformed += set->unknown_results;
    p->errors += set->unknown_results;
    return NULL;
}

static void run_worker_free(struct run_worker *w)
{
    if (w->has_streams)
        bench_stream_set_free(&w->streams);
    if (w->cq) {
        slotd_call_cq_destroy(w->cq);
    }
    free(w->calls);
    free(w->key);
}

static int run_worker_init(struct run_worker *w, struct run_shared *s, unsigned index,
                           unsigned call_count, uint64_t seed)
{
    memset(w, 0, sizeof(*w));
    w->s = s;
    w->call_count = call_count;
    w->next_channel = index;
    w->next_node_channel = index;
    w->route_version = UINT64_MAX;
    w->rng = seed;
    bench_hist_init(&w->phase.latency_ns);
    w->calls = calloc(call_count, sizeof(*w->calls));
    w->key = malloc((size_t)s->o->key_size + 1);
    if (!w->calls || !w->key)
        return BENCH_ENOMEM;
    for (unsigned i = 0; i < call_count; i++)
        w->calls[i].w = w;
    w->cq = grpc_completion_queue_create_for_next(NULL);
    w->index = index;
    if (!s->o->stream)
        return BENCH_OK;
    /* one stream per endpoint channel, and one per node a route may name */
    unsigned streams = (unsigned)s->channel_count + (s->router ? BENCH_ROUTE_ADDRESSES_MAX : 0);
    int rc = bench_stream_set_init(&w->streams, s->o, w->cq, s->has_token ? &s->token_md : NULL,
                                   s->has_token ? 1 : 0, s->value, call_count, streams,
                                   run_stream_done, w);
    w->has_streams = rc == BENCH_OK;
    return rc;
}

/* ---- one phase ------------------------------------------------------------------------ */

static void run_phase_merge(struct bench_phase *dst, const struct run_worker *w)
{
    const struct bench_phase *p = &w->phase;
    bench_hist_merge(&dst->latency_ns, &p->latency_ns);
    dst->ok += p->ok;
    dst->reads += p->reads;
    dst->writes += p->writes;
    dst->not_found += p->not_found;
    dst->malformed += p->malformed;
    dst->errors += p->errors;
    dst->direct += p->direct;
    dst->fallback += p->fallback;
    dst->streams_opened += p->streams_opened;
    dst->stream_messages_sent += p->stream_messages_sent;
    dst->stream_items_sent += p->stream_items_sent;
    dst->stream_messages_received += p->stream_messages_received;
    for (unsigned i = 0; i < BENCH_STATUS_SLOTS; i++)
        dst->status[i] += p->status[i];
    for (unsigned i = 0; i < BENCH_DETAIL_SLOTS; i++)
        dst->error_detail[i] += p->error_detail[i];
}

/* Starts the threads, waits for them and fills *out. Phase timing is set by the caller. */
static int run_phase_threads(struct run_shared *s, struct run_worker *workers, unsigned threads,
                             struct bench_phase *out, char *errmsg, size_t errmsg_len)
{
    unsigned started = 0;
    int rc = BENCH_OK;
    for (; started < threads; started++) {
        void *(*main_fn)(void *) = s->o->stream ? run_stream_worker_main : run_worker_main;
        if (pthread_create(&workers[started].thread, NULL, main_fn, &workers[started]) != 0) {
            atomic_store(&s->measure_end_ns, 0); /* stop the threads already running */
            rc = slotd_call_fail(errmsg, errmsg_len, BENCH_ETHREAD,
                                 "client thread %u: pthread_create failed", started);
            break;
        }
    }
    int64_t now = run_now_ns();
    if (rc == BENCH_OK && now < s->measure_start_ns) {
        struct timespec until = {(time_t)(s->measure_start_ns / 1000000000),
                                 (long)(s->measure_start_ns % 1000000000)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
        }
    }
    int64_t cpu_from_ns = run_now_ns();
    double cpu_from = run_cpu_s();
    int64_t last_done = s->measure_start_ns;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
        run_phase_merge(out, &workers[i]);
        if (workers[i].last_done_ns > last_done)
            last_done = workers[i].last_done_ns;
    }
    out->cpu_s = run_cpu_s() - cpu_from;
    out->cpu_wall_s = (double)(run_now_ns() - cpu_from_ns) / 1e9;
    /* Ended by count: the time to the last counted completion; else the whole window. */
    bool by_count = s->issue_limit && atomic_load(&s->issued) >= s->issue_limit;
    int64_t end = by_count ? last_done : atomic_load(&s->measure_end_ns);
    if (s->watch) /* watch events count over the same window as the calls */
        bench_watch_window(s->watch, s->measure_start_ns, end);
    out->elapsed_s = end > s->measure_start_ns ? (double)(end - s->measure_start_ns) / 1e9 : 0.0;
    return rc;
}

static int run_phase(struct run_shared *s, double warmup_s, double duration_s, uint64_t seed_salt,
                     struct bench_phase *out, char *errmsg, size_t errmsg_len)
{
    const struct bench_opts *o = s->o;
    unsigned threads = o->threads;
    memset(out, 0, sizeof(*out));
    bench_hist_init(&out->latency_ns);
    struct run_worker *workers = calloc(threads, sizeof(*workers));
    if (!workers)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_ENOMEM, "out of memory for %u workers",
                               threads);

    int rc = BENCH_OK;
    unsigned ready = 0;
    uint64_t seed = o->seed ^ seed_salt;
    for (; ready < threads; ready++) {
        unsigned share = o->concurrency / threads + (ready < o->concurrency % threads ? 1 : 0);
        rc = run_worker_init(&workers[ready], s, ready, share, run_splitmix(&seed));
        if (rc != BENCH_OK) {
            slotd_call_fail(errmsg, errmsg_len, rc, "client thread %u: out of memory", ready);
            ready++; /* its partial allocations are freed below */
            goto err_after_workers;
        }
    }
    atomic_store(&s->issued, 0);
    s->measure_start_ns = run_now_ns() + (int64_t)(warmup_s * 1e9);
    atomic_store(&s->measure_end_ns, s->measure_start_ns + (int64_t)(duration_s * 1e9));
    if (s->watch)
        bench_watch_window(s->watch, s->measure_start_ns, atomic_load(&s->measure_end_ns));
    rc = run_phase_threads(s, workers, threads, out, errmsg, errmsg_len);

err_after_workers:
    for (unsigned i = 0; i < ready; i++)
        run_worker_free(&workers[i]);
    free(workers);
    return rc;
}

/* ---- channels ------------------------------------------------------------------------- */

static int run_channels_open(struct run_shared *s)
{
    const struct bench_opts *o = s->o;
    s->channel_count = (size_t)o->endpoint_count * o->connections;
    s->channels = calloc(s->channel_count, sizeof(*s->channels));
    if (!s->channels)
        return BENCH_ENOMEM;
    /* Endpoints alternate, so round robin over channels is round robin over endpoints. */
    for (size_t i = 0; i < s->channel_count; i++)
        run_channel_init(&s->channels[i], o, o->endpoints[i % o->endpoint_count]);
    return BENCH_OK;
}

static void run_channels_close(struct run_shared *s)
{
    for (size_t i = 0; i < s->channel_count; i++)
        grpc_channel_destroy(s->channels[i].channel);
    free(s->channels);
    s->channels = NULL;
}

static const char *run_state_name(grpc_connectivity_state st)
{
    switch (st) {
    case GRPC_CHANNEL_IDLE:
        return "idle";
    case GRPC_CHANNEL_CONNECTING:
        return "connecting";
    case GRPC_CHANNEL_READY:
        return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
        return "transient failure";
    default:
        return "shut down";
    }
}

/* Waits until every channel is READY; a failed attempt or the timeout is BENCH_ECONNECT. */
static int run_channels_connect(struct run_shared *s, char *errmsg, size_t errmsg_len)
{
    const struct bench_opts *o = s->o;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(o->connect_timeout_ms, GPR_TIMESPAN));
    int rc = BENCH_OK;
    for (size_t i = 0; i < s->channel_count && rc == BENCH_OK; i++) {
        grpc_channel *ch = s->channels[i].channel;
        grpc_connectivity_state st = grpc_channel_check_connectivity_state(ch, 1);
        while (st != GRPC_CHANNEL_READY) {
            if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) {
                rc = slotd_call_fail(errmsg, errmsg_len, BENCH_ECONNECT, "connect %s: %s",
                                     o->endpoints[i % o->endpoint_count], run_state_name(st));
                break;
            }
            grpc_channel_watch_connectivity_state(ch, st, deadline, cq, NULL);
            grpc_event ev =
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (!ev.success) {
                rc = slotd_call_fail(
                    errmsg, errmsg_len, BENCH_ECONNECT, "connect %s: still %s after %u ms",
                    o->endpoints[i % o->endpoint_count], run_state_name(st), o->connect_timeout_ms);
                break;
            }
            st = grpc_channel_check_connectivity_state(ch, 0);
        }
    }
    slotd_call_cq_destroy(cq);
    return rc;
}

/* --route-aware: the shared route and its first fetch (a failed fetch is not fatal: every
 * call then goes round robin until a failure triggers the next fetch). */
static int run_router_open(struct run_shared *s, char *errmsg, size_t errmsg_len)
{
    if (!s->o->route_aware)
        return BENCH_OK;
    s->router = malloc(sizeof(*s->router));
    if (!s->router)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_ENOMEM, "out of memory for the route");
    run_router_init(s->router);
    run_fetch_initial(s);
    return BENCH_OK;
}

/* Copies the fetch counters into *r and closes the node channels. */
static void run_router_close(struct run_shared *s, struct bench_result *r)
{
    if (!s->router)
        return;
    r->route_fetches = s->router->fetches;
    r->route_fetch_failures = s->router->fetch_failures;
    snprintf(r->route_error, sizeof(r->route_error), "%s", s->router->last_error);
    run_router_free(s->router, s->o->connections);
    free(s->router);
    s->router = NULL;
}

/* ---- the whole run -------------------------------------------------------------------- */

/* --watchers: the streams open on the endpoint channels (round robin) before warmup. */
static int run_watch_open(struct run_shared *s, char *errmsg, size_t errmsg_len)
{
    grpc_channel **channels = malloc(s->channel_count * sizeof(*channels));
    if (!channels)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_ENOMEM,
                               "out of memory for watch channels");
    for (size_t i = 0; i < s->channel_count; i++)
        channels[i] = s->channels[i].channel;
    int rc = bench_watch_open(&s->watch, s->o, channels, s->channel_count,
                              s->has_token ? &s->token_md : NULL, errmsg, errmsg_len);
    free(channels);
    return rc;
}

static int run_populate_and_measure(struct run_shared *s, struct bench_result *r, char *errmsg,
                                    size_t errmsg_len)
{
    const struct bench_opts *o = s->o;
    if (o->populate) {
        s->populate = true;
        s->issue_limit = o->keys;
        int rc = run_phase(s, 0.0, RUN_POPULATE_S_MAX, 0x706f70756c617465ull, &r->populate, errmsg,
                           errmsg_len);
        if (rc != BENCH_OK)
            return rc;
        r->populate_keys = r->populate.ok;
    }
    s->populate = false;
    s->issue_limit = o->ops;
    if (!o->watchers)
        return run_phase(s, o->warmup_s, o->duration_s, 0, &r->run, errmsg, errmsg_len);
    int rc = run_watch_open(s, errmsg, errmsg_len);
    if (rc != BENCH_OK)
        return rc;
    rc = run_phase(s, o->warmup_s, o->duration_s, 0, &r->run, errmsg, errmsg_len);
    bench_watch_close(s->watch, &r->watch);
    s->watch = NULL;
    return rc;
}

int bench_run_execute(const struct bench_opts *o, struct bench_result *r, char *errmsg,
                      size_t errmsg_len)
{
    memset(r, 0, sizeof(*r));
    bench_hist_init(&r->run.latency_ns);
    bench_hist_init(&r->populate.latency_ns);
    struct run_shared s;
    memset(&s, 0, sizeof(s));
    s.o = o;
    char bearer[BENCH_TOKEN_MAX + 8];
    if (o->token[0] != '\0') {
        snprintf(bearer, sizeof(bearer), "Bearer %s", o->token);
        s.has_token = true;
        s.token_md.key = grpc_slice_from_static_string("authorization");
        s.token_md.value = grpc_slice_from_static_string(bearer); /* lives until we return */
    }
    for (int k = 0; k < RUN_REQ_KINDS; k++) {
        if (o->target == BENCH_TARGET_ETCD && k == BENCH_REQ_GET_LEADER_LOCAL)
            continue; /* never sent to etcd */
        for (int no_forward = 0; no_forward < 2; no_forward++)
            s.req_size[k][no_forward] =
                bench_wire_request_encode(o->target, (enum bench_req)k, no_forward, NULL,
                                          o->key_size, NULL, o->value_size, NULL, 0);
    }
    int rc = BENCH_ENOMEM;
    uint8_t *value = malloc(o->value_size ? o->value_size : 1);
    if (!value) {
        slotd_call_fail(errmsg, errmsg_len, rc, "out of memory for a %u byte value", o->value_size);
        goto err_after_nothing;
    }
    uint64_t x = o->seed;
    for (unsigned i = 0; i < o->value_size; i++)
        value[i] = (uint8_t)('a' + run_splitmix(&x) % 26);
    s.value = value;

    grpc_init();
    rc = run_channels_open(&s);
    if (rc != BENCH_OK) {
        slotd_call_fail(errmsg, errmsg_len, rc, "out of memory for channels");
        goto err_after_init;
    }
    rc = run_channels_connect(&s, errmsg, errmsg_len);
    if (rc != BENCH_OK)
        goto err_after_channels;
    rc = run_router_open(&s, errmsg, errmsg_len);
    if (rc != BENCH_OK)
        goto err_after_channels;
    rc = run_populate_and_measure(&s, r, errmsg, errmsg_len);
    run_router_close(&s, r);

err_after_channels:
    run_channels_close(&s);
err_after_init:
    /* Blocking: gRPC 1.51's grpc_shutdown may finish its clean-up (joining the executor
     * threads) on another thread after it returns, and slotbench exits right after this. */
    grpc_shutdown_blocking();
    free(value);
err_after_nothing:
    return rc;
}
