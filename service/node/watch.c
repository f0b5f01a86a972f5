/* watch.c - slotd.v1.Metadata/Watch: one stream fed from the slot groups' watch histories (keys, or one id's typed rows), and Peer/WatchPoll. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/status.h>
#include <sys/prctl.h>

#include "google/rpc/status.pb-c.h"
#include "service/log/log.h"
#include "service/node/api.h"
#include "service/node/authz.h"
#include "service/runtime/runtime.h"
#include "service/slot/slot.h"
#include "service/transport/transport.h"
#include "slotd/internal/v1/peer.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#define WATCH_METHOD "/slotd.v1.Metadata/Watch"
#define PEER_WATCH_POLL "/slotd.internal.v1.Peer/WatchPoll"

#define WATCH_RESUME_MAX 256u         /* WatchRequest.resume entries */
#define WATCH_PROGRESS_MIN_MS 100u    /* progress_interval_ms, when not 0 */
#define WATCH_PROGRESS_MAX_MS 60000u
#define WATCH_POLL_WAIT_MS 1000u      /* a poll's wait for changes */
#define WATCH_POLL_MAX_BYTES (256u * 1024u)
#define WATCH_POLL_BYTES_LIMIT (4u << 20) /* WatchPollRequest.max_bytes accepted */
#define WATCH_POLL_WAIT_LIMIT_MS 60000u   /* WatchPollRequest.wait_ms accepted */
#define WATCH_RETRY_MS 200                /* after a failed poll, the group's next one */
#define WATCH_TICK_MS 50                  /* the hub's longest sleep */
#define WATCH_STREAMS_MAX 1024u           /* Watch streams served at once; more: QUEUE_FULL */

#define WLOG(level, fmt, ...) slog(level, "watch", fmt, ##__VA_ARGS__)

/* One watched group of a stream. */
struct watch_group {
    uint32_t id;
    uint64_t pos;     /* changes through pos were delivered (or skipped: none matched) */
    bool known;       /* pos is set: from resume, or from the first answer (from now) */
    bool polling;     /* a poll is out */
    unsigned attempt; /* failed polls in a row: picks the next replica */
    unsigned compacted; /* COMPACTED answers in a row */
    int64_t retry_at_ms;
};

/* One Watch stream. mu guards everything below it; refs counts the stream (until it is
 * finished) and every poll out. */
struct watch_session {
    struct watch_session *next; /* the hub's list (hub->mu) */
    pthread_mutex_t mu;
    unsigned refs;
    struct node_watch *hub;
    struct rpc_stream *st;
    bool closed;   /* the client went away, or we end it: no more polls */
    bool finished; /* rpc_stream_finish was called */
    struct slotd_error end; /* what closed it (code OK: the client left) */
    bool created;  /* the created message went out */
    uint32_t typed_kind; /* 0: key / prefix; else a typed watch of the id held in key */
    uint8_t key[SLOT_KEY_MAX], prefix[SLOT_KEY_MAX];
    size_t key_len, prefix_len;
    bool keys_only;
    uint32_t progress_ms;
    int64_t last_sent_ms;
    size_t n_groups;
    struct watch_group *groups;
};

struct node_watch {
    struct node_api *api;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t thread;
    bool started, stopping, kick;
    struct watch_session *sessions;
    size_t n_sessions;
};

static void hub_kick(struct node_watch *hub)
{
    pthread_mutex_lock(&hub->mu);
    hub->kick = true;
    pthread_cond_signal(&hub->cond);
    pthread_mutex_unlock(&hub->mu);
}

/* Under s->mu: drops a reference; the hub frees a session with none left. */
static void session_unref_locked(struct watch_session *s)
{
    assert(s->refs > 0);
    s->refs--;
}

/* Under s->mu: ends the stream with e (NULL: OK). */
static void session_end_locked(struct watch_session *s, const struct slotd_error *e)
{
    if (s->closed)
        return;
    s->closed = true;
    if (e != NULL)
        s->end = *e;
    else
        s->end.code = SLOTD_OK;
}

static void on_stream_close(void *arg)
{
    struct watch_session *s = arg;
    struct node_watch *hub = s->hub;
    pthread_mutex_lock(&s->mu);
    s->closed = true; /* the client left: nothing to tell it */
    s->end.code = SLOTD_OK;
    pthread_mutex_unlock(&s->mu);
    hub_kick(hub);
}

/* ---- Messages ---- */

/* Under s->mu: packs and queues one WatchResponse with events (may be 0) and every known
 * position. Returns 0, or ends the session (too slow, gone). */
static int send_response(struct watch_session *s, Slotd__V1__WatchEvent **events, size_t n_events,
                         bool created, bool progress)
{
    Slotd__V1__WatchResponse resp = SLOTD__V1__WATCH_RESPONSE__INIT;
    Slotd__V1__WatchPosition *pos = calloc(s->n_groups ? s->n_groups : 1, sizeof(*pos));
    Slotd__V1__WatchPosition **pp = calloc(s->n_groups ? s->n_groups : 1, sizeof(*pp));
    if (pos == NULL || pp == NULL) {
        free(pos);
        free(pp);
        struct slotd_error e;
        slotd_error_set(&e, SLOTD_EINTERNAL, "watch: out of memory");
        session_end_locked(s, &e);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < s->n_groups; i++) {
        if (!s->groups[i].known)
            continue;
        slotd__v1__watch_position__init(&pos[n]);
        pos[n].group_id = s->groups[i].id;
        pos[n].index = s->groups[i].pos;
        pp[n] = &pos[n];
        n++;
    }
    resp.events = events;
    resp.n_events = n_events;
    resp.positions = pp;
    resp.n_positions = n;
    resp.created = created;
    resp.progress = progress;
    int rc = rpc_stream_send(s->st, &resp.base);
    free(pos);
    free(pp);
    if (rc == RPC_STREAM_EFULL) {
        struct slotd_error e;
        slotd_error_set(&e, SLOTD_EQUEUE_FULL,
                        "watch: the client reads too slowly (%zu bytes wait to be sent); resume "
                        "from the positions of the last message received",
                        rpc_stream_queued_bytes(s->st));
        session_end_locked(s, &e);
        return -1;
    }
    if (rc != 0) {
        session_end_locked(s, NULL);
        return -1;
    }
    s->last_sent_ms = node_mono_ms();
    return 0;
}

/* ---- Polls ---- */

struct watch_poll {
    struct watch_session *s;
    size_t gi;
};

/* A poll's answer (any thread): events into the stream, the group's position moves. */
static void poll_done(struct watch_poll *p, const struct slotd_error *err,
                      const Slotd__Internal__V1__WatchPollResponse *resp)
{
    struct watch_session *s = p->s;
    struct node_watch *hub = s->hub; /* outlives s, which the hub may free once unlocked */
    pthread_mutex_lock(&s->mu);
    struct watch_group *g = &s->groups[p->gi];
    g->polling = false;
    session_unref_locked(s);
    if (s->closed) {
        pthread_mutex_unlock(&s->mu);
        hub_kick(hub);
        free(p);
        return;
    }
    if (err != NULL) {
        g->attempt++;
        g->retry_at_ms = node_mono_ms() + (err->code == SLOTD_ECOMPACTED ? 0 : WATCH_RETRY_MS);
        if (err->code == SLOTD_ECOMPACTED && ++g->compacted >= 3)
            session_end_locked(s, err); /* every replica asked said so */
        pthread_mutex_unlock(&s->mu);
        hub_kick(hub);
        free(p);
        return;
    }
    g->attempt = 0;
    g->compacted = 0;
    if (!g->known) {
        g->pos = resp->through_index;
        g->known = true;
    } else if (resp->through_index > g->pos) {
        g->pos = resp->through_index;
        if (resp->n_events > 0)
            send_response(s, resp->events, resp->n_events, false, false);
    }
    pthread_mutex_unlock(&s->mu);
    hub_kick(hub);
    free(p);
}

static void on_local_poll(void *arg, const struct slotd_error *err,
                          const Slotd__Internal__V1__WatchPollResponse *resp)
{
    poll_done(arg, err, resp);
}

/* The slotd error a relayed failure carries (its ErrorDetail), else one from the status. */
static void relayed_error(int status, const char *message, const uint8_t *details, size_t dlen,
                          struct slotd_error *err)
{
    slotd_error_set(err, SLOTD_ENO_LEADER, "watch poll: %s", message);
    Google__Rpc__Status *st = details ? google__rpc__status__unpack(NULL, dlen, details) : NULL;
    for (size_t i = 0; st != NULL && i < st->n_details; i++) {
        Slotd__V1__ErrorDetail *d = slotd__v1__error_detail__unpack(NULL, st->details[i]->value.len,
                                                                    st->details[i]->value.data);
        if (d != NULL && d->code == SLOTD__V1__ERROR_CODE__ERROR_CODE_COMPACTED &&
            d->compacted != NULL)
            slotd_error_compacted(err, d->compacted->group_id, d->compacted->index, "%s",
                                  message);
        if (d != NULL)
            slotd__v1__error_detail__free_unpacked(d, NULL);
    }
    if (st != NULL)
        google__rpc__status__free_unpacked(st, NULL);
    (void)status;
}

static void on_peer_poll(void *arg, int status, const char *message, const uint8_t *resp,
                         size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct slotd_error err;
    if (status != GRPC_STATUS_OK) {
        relayed_error(status, message, details, details_len, &err);
        poll_done(arg, &err, NULL);
        return;
    }
    Slotd__Internal__V1__WatchPollResponse *r =
        slotd__internal__v1__watch_poll_response__unpack(NULL, resp_len, resp);
    if (r == NULL) {
        slotd_error_set(&err, SLOTD_EMALFORMED, "watch poll: a malformed answer");
        poll_done(arg, &err, NULL);
        return;
    }
    poll_done(arg, NULL, r);
    slotd__internal__v1__watch_poll_response__free_unpacked(r, NULL);
}

/* The replica of group id to ask on attempt n: this node's own, else the observed leader first,
 * then the other members in turn. 0 = none known. */
static uint64_t pick_replica(struct node_api *api, uint32_t id, unsigned n)
{
    if (runtime_hosts_group(api->rt, id))
        return api->node_id;
    struct route_snapshot *rs = route_table_acquire(api->routes);
    const struct route_group *g = rs != NULL ? route_snapshot_group(rs, id) : NULL;
    uint64_t cand[2 * ROUTE_MEMBERS_MAX + 1];
    size_t k = 0;
    if (g != NULL && g->leader != 0)
        cand[k++] = g->leader;
    for (uint32_t i = 0; g != NULL && i < g->n_voters; i++)
        if (g->voters[i] != g->leader)
            cand[k++] = g->voters[i];
    for (uint32_t i = 0; g != NULL && i < g->n_learners; i++)
        cand[k++] = g->learners[i];
    route_snapshot_release(rs);
    return k > 0 ? cand[n % k] : 0;
}

/* Starts one poll of group gi (no lock held; the caller took the reference). */
static void poll_start(struct watch_session *s, size_t gi, uint64_t after, bool from_now,
                       unsigned attempt)
{
    struct node_api *api = s->hub->api;
    uint32_t id = s->groups[gi].id;
    struct watch_poll *p = malloc(sizeof(*p));
    struct slotd_error err;
    if (p == NULL) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "watch: out of memory");
        struct watch_poll tmp = {s, gi};
        struct watch_poll *tp = malloc(sizeof(*tp));
        if (tp != NULL) {
            *tp = tmp;
            poll_done(tp, &err, NULL);
        }
        return;
    }
    p->s = s;
    p->gi = gi;
    uint64_t to = pick_replica(api, id, attempt);
    if (to == 0) {
        slotd_error_set(&err, SLOTD_ENO_LEADER, "group %u: no replica known", id);
        poll_done(p, &err, NULL);
        return;
    }
    if (to == api->node_id) {
        struct runtime_watch_query q = {.group = id,
                                        .after = after,
                                        .from_now = from_now,
                                        .typed_kind = s->typed_kind,
                                        .key = s->key,
                                        .key_len = s->key_len,
                                        .prefix = s->prefix,
                                        .prefix_len = s->prefix_len,
                                        .keys_only = s->keys_only,
                                        .wait_ms = WATCH_POLL_WAIT_MS,
                                        .max_bytes = WATCH_POLL_MAX_BYTES};
        if (runtime_watch_poll(api->rt, &q, on_local_poll, p, &err) != 0)
            poll_done(p, &err, NULL);
        return;
    }
    Slotd__Internal__V1__WatchPollRequest rq = SLOTD__INTERNAL__V1__WATCH_POLL_REQUEST__INIT;
    rq.group_id = id;
    rq.after_index = after;
    rq.from_now = from_now;
    rq.key = (ProtobufCBinaryData){.len = s->key_len, .data = s->key};
    rq.prefix = (ProtobufCBinaryData){.len = s->prefix_len, .data = s->prefix};
    rq.keys_only = s->keys_only;
    char typed_id[SLOT_CHANNEL_ID_MAX + 1];
    if (s->typed_kind != 0) {
        /* the id travels as the typed_id string, not as a key */
        snprintf(typed_id, sizeof(typed_id), "%.*s", (int)s->key_len, (const char *)s->key);
        rq.typed_kind = s->typed_kind;
        rq.typed_id = typed_id;
        rq.key = (ProtobufCBinaryData){0};
    }
    rq.wait_ms = WATCH_POLL_WAIT_MS;
    rq.max_bytes = WATCH_POLL_MAX_BYTES;
    size_t len = slotd__internal__v1__watch_poll_request__get_packed_size(&rq);
    uint8_t *buf = malloc(len ? len : 1);
    int rc = TRANSPORT_ENOMEM;
    if (buf != NULL && api->transport != NULL) {
        slotd__internal__v1__watch_poll_request__pack(&rq, buf);
        rc = transport_call(api->transport, to, PEER_WATCH_POLL, buf, len,
                            node_mono_ms() + WATCH_POLL_WAIT_MS + 5000, on_peer_poll, p);
    }
    free(buf);
    if (rc != TRANSPORT_OK) {
        slotd_error_set(&err, SLOTD_ENO_LEADER, "group %u: cannot ask node %llu: %s", id,
                        (unsigned long long)to, transport_strerror(rc));
        poll_done(p, &err, NULL);
    }
}

/* ---- The hub: starts polls, sends created and progress messages, ends streams ---- */

struct poll_todo {
    size_t gi;
    uint64_t after;
    bool from_now;
    unsigned attempt;
};

/* One session's turn; returns true when it can be freed (finished, nothing out). */
static bool session_turn(struct watch_session *s, int64_t now)
{
    struct poll_todo *todo = NULL;
    size_t n_todo = 0;
    pthread_mutex_lock(&s->mu);
    if (s->closed) {
        if (!s->finished) {
            s->finished = true;
            struct rpc_stream *st = s->st;
            struct slotd_error end = s->end;
            session_unref_locked(s);
            pthread_mutex_unlock(&s->mu);
            rpc_stream_finish(st, end.code == SLOTD_OK ? NULL : &end);
            pthread_mutex_lock(&s->mu);
        }
        bool done = s->refs == 0;
        pthread_mutex_unlock(&s->mu);
        return done;
    }
    bool all_known = true;
    for (size_t i = 0; i < s->n_groups; i++)
        all_known = all_known && s->groups[i].known;
    if (all_known && !s->created) {
        s->created = true;
        send_response(s, NULL, 0, true, false);
    } else if (s->created && s->progress_ms > 0 && now - s->last_sent_ms >= s->progress_ms) {
        send_response(s, NULL, 0, false, true);
    }
    todo = calloc(s->n_groups ? s->n_groups : 1, sizeof(*todo));
    for (size_t i = 0; todo != NULL && !s->closed && i < s->n_groups; i++) {
        struct watch_group *g = &s->groups[i];
        if (g->polling || g->retry_at_ms > now || (g->known && !s->created))
            continue; /* a resumed group's changes wait for the created message */
        g->polling = true;
        s->refs++;
        todo[n_todo++] =
            (struct poll_todo){.gi = i, .after = g->pos, .from_now = !g->known, .attempt = g->attempt};
    }
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < n_todo; i++)
        poll_start(s, todo[i].gi, todo[i].after, todo[i].from_now, todo[i].attempt);
    free(todo);
    return false;
}

static void session_free(struct watch_session *s)
{
    pthread_mutex_destroy(&s->mu);
    free(s->groups);
    free(s);
}

static void *hub_main(void *arg)
{
    struct node_watch *hub = arg;
    prctl(PR_SET_NAME, "slotd-watchhub");
    pthread_mutex_lock(&hub->mu);
    for (;;) {
        if (!hub->kick) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += WATCH_TICK_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&hub->cond, &hub->mu, &ts);
        }
        hub->kick = false;
        if (hub->stopping && hub->sessions == NULL)
            break;
        struct watch_session *list = hub->sessions;
        hub->sessions = NULL;
        pthread_mutex_unlock(&hub->mu);
        /* sessions added meanwhile go to hub->sessions; the turned ones are put back */
        struct watch_session *keep = NULL;
        int64_t now = node_mono_ms();
        while (list != NULL) {
            struct watch_session *s = list;
            list = s->next;
            if (hub->stopping) {
                pthread_mutex_lock(&s->mu);
                struct slotd_error e;
                slotd_error_set(&e, SLOTD_ESHUTTING_DOWN, "the node is shutting down");
                session_end_locked(s, &e);
                pthread_mutex_unlock(&s->mu);
            }
            if (session_turn(s, now)) {
                session_free(s);
                pthread_mutex_lock(&hub->mu);
                hub->n_sessions--;
                pthread_mutex_unlock(&hub->mu);
                continue;
            }
            s->next = keep;
            keep = s;
        }
        pthread_mutex_lock(&hub->mu);
        while (keep != NULL) {
            struct watch_session *s = keep;
            keep = s->next;
            s->next = hub->sessions;
            hub->sessions = s;
        }
        if (hub->stopping && hub->sessions != NULL)
            hub->kick = true; /* polls still out: look again soon */
        if (hub->stopping && hub->sessions != NULL) {
            pthread_mutex_unlock(&hub->mu);
            struct timespec d = {0, 10 * 1000000L};
            nanosleep(&d, NULL);
            pthread_mutex_lock(&hub->mu);
        }
    }
    pthread_mutex_unlock(&hub->mu);
    return NULL;
}

/* ---- Metadata/Watch ---- */

static int validate(const Slotd__V1__WatchRequest *r, const struct route_snapshot *rs,
                    struct slotd_error *err)
{
    if (r->key.len > SLOT_KEY_MAX || r->prefix.len > SLOT_KEY_MAX) {
        const char *f = r->key.len > SLOT_KEY_MAX ? "key" : "prefix";
        slotd_error_field(err, f, SLOT_KEY_MAX, "%s: %zu bytes exceeds the limit of %u", f,
                          r->key.len > SLOT_KEY_MAX ? r->key.len : r->prefix.len, SLOT_KEY_MAX);
        return -1;
    }
    if (r->key.len > 0 && r->prefix.len > 0) {
        slotd_error_field(err, "prefix", 0, "prefix: set key or prefix, not both");
        return -1;
    }
    if (r->typed != NULL) {
        size_t id_len = r->typed->id != NULL ? strlen(r->typed->id) : 0;
        uint32_t max = r->typed->kind == SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_USER
                           ? SLOT_UID_MAX
                           : SLOT_CHANNEL_ID_MAX;
        if (r->key.len > 0 || r->prefix.len > 0) {
            slotd_error_field(err, "typed", 0, "typed: a typed watch takes no key or prefix");
            return -1;
        }
        if (r->typed->kind < SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_USER ||
            r->typed->kind > SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_SUBSCRIBERS) {
            slotd_error_field(err, "typed.kind",
                              SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_SUBSCRIBERS,
                              "typed.kind: %d is not USER, CHANNEL or SUBSCRIBERS",
                              (int)r->typed->kind);
            return -1;
        }
        if (id_len == 0 || id_len > max) {
            slotd_error_field(err, "typed.id", max, "typed.id: %zu bytes is not 1..%u", id_len,
                              max);
            return -1;
        }
    }
    if (r->progress_interval_ms != 0 && (r->progress_interval_ms < WATCH_PROGRESS_MIN_MS ||
                                         r->progress_interval_ms > WATCH_PROGRESS_MAX_MS)) {
        slotd_error_field(err, "progress_interval_ms", WATCH_PROGRESS_MAX_MS,
                          "progress_interval_ms: %u is not 0 or %u..%u", r->progress_interval_ms,
                          WATCH_PROGRESS_MIN_MS, WATCH_PROGRESS_MAX_MS);
        return -1;
    }
    if (r->n_resume > WATCH_RESUME_MAX) {
        slotd_error_field(err, "resume", WATCH_RESUME_MAX,
                          "resume: %zu positions exceeds the limit of %u", r->n_resume,
                          WATCH_RESUME_MAX);
        return -1;
    }
    for (size_t i = 0; i < r->n_resume; i++) {
        uint32_t id = r->resume[i]->group_id;
        if (route_snapshot_group(rs, id) == NULL) {
            slotd_error_field(err, "resume.group_id", rs->n_groups,
                              "resume[%zu].group_id: %u is not a slot group", i, id);
            return -1;
        }
        for (size_t j = 0; j < i; j++)
            if (r->resume[j]->group_id == id) {
                slotd_error_field(err, "resume.group_id", 0,
                                  "resume[%zu].group_id: group %u is listed twice", i, id);
                return -1;
            }
    }
    return 0;
}

/* A typed watch of kind needs read on every typed kind whose rows it returns. */
static int typed_allowed(const struct node_caller *caller, int kind, struct slotd_error *err)
{
    static const char *const user_kinds[] = {"user", "conversation", "cmd", "plugin", NULL};
    static const char *const channel_kinds[] = {"channel", "runtime_meta", "migration_task",
                                                "event", NULL};
    static const char *const subscriber_kinds[] = {"channel", NULL};
    const char *const *kinds = kind == SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_USER
                                   ? user_kinds
                               : kind == SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_CHANNEL
                                   ? channel_kinds
                                   : subscriber_kinds;
    for (size_t i = 0; kinds[i] != NULL; i++) {
        struct ctl_need need = {.type = CTL_PERM_KIND, .access = CTL_ACCESS_READ,
                                .kind = kinds[i]};
        if (node_authz_allowed(caller, &need, err) != 0)
            return -1;
    }
    return 0;
}

static void on_watch(void *ctx, struct rpc_stream *st, const uint8_t *req, size_t len)
{
    struct node_watch *hub = ctx;
    struct node_api *api = hub->api;
    struct slotd_error err;
    struct node_caller caller;
    if (node_authz_caller(api->authz, api->peer_mtls, rpc_stream_call(st), WATCH_METHOD, req, len,
                          &caller, &err) != 0) {
        rpc_stream_finish(st, &err);
        return;
    }
    Slotd__V1__WatchRequest *r = slotd__v1__watch_request__unpack(NULL, len, req);
    if (r == NULL) {
        node_caller_release(&caller);
        slotd_error_set(&err, SLOTD_EMALFORMED, "request is not a valid slotd.v1.WatchRequest");
        rpc_stream_finish(st, &err);
        return;
    }
    struct watch_session *s = NULL;
    struct route_snapshot *rs = route_table_acquire(api->routes);
    if (r->typed == NULL) {
        /* every key the watch can return: read on the key, or on the prefix */
        struct ctl_need need = {.type = CTL_PERM_KEY_PREFIX,
                                .access = CTL_ACCESS_READ,
                                .key = r->key.len > 0 ? r->key.data : r->prefix.data,
                                .key_len = r->key.len > 0 ? r->key.len : r->prefix.len};
        if (node_authz_allowed(&caller, &need, &err) != 0)
            goto fail;
    } else if (typed_allowed(&caller, r->typed->kind, &err) != 0) {
        goto fail;
    }
    if (rs == NULL || !rs->table_ready || rs->n_groups == 0) {
        slotd_error_set(&err, SLOTD_EROUTE_NOT_READY, "watch: route not ready");
        err.retry_after_ms = 100;
        goto fail;
    }
    if (validate(r, rs, &err) != 0)
        goto fail;
    /* a typed watch: the one group owning the id's hash slot (now) */
    uint32_t only_group = 0;
    if (r->typed != NULL) {
        uint16_t hs = 0;
        const struct route_group *g = NULL;
        route_snapshot_lookup(rs, r->typed->id, strlen(r->typed->id), &hs, &g);
        if (g == NULL) { /* (a group without a known leader is fine: any replica answers) */
            slotd_error_set(&err, SLOTD_EROUTE_NOT_READY, "watch: no group owns the hash slot of "
                                                          "typed.id");
            err.retry_after_ms = 100;
            goto fail;
        }
        only_group = g->id;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL || (s->groups = calloc(rs->n_groups, sizeof(*s->groups))) == NULL) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->refs = 1;
    s->hub = hub;
    s->st = st;
    s->key_len = r->key.len;
    if (r->key.len > 0)
        memcpy(s->key, r->key.data, r->key.len);
    if (r->typed != NULL) {
        s->typed_kind = (uint32_t)r->typed->kind;
        s->key_len = strlen(r->typed->id);
        memcpy(s->key, r->typed->id, s->key_len);
    }
    s->prefix_len = r->prefix.len;
    if (r->prefix.len > 0)
        memcpy(s->prefix, r->prefix.data, r->prefix.len);
    s->keys_only = r->keys_only;
    s->progress_ms = r->progress_interval_ms;
    s->n_groups = 0;
    for (size_t i = 0; i < rs->n_groups; i++) {
        if (only_group != 0 && rs->groups[i].id != only_group)
            continue;
        struct watch_group *g = &s->groups[s->n_groups++];
        g->id = rs->groups[i].id;
        for (size_t j = 0; j < r->n_resume; j++)
            if (r->resume[j]->group_id == g->id) {
                g->pos = r->resume[j]->index;
                g->known = true;
            }
    }
    route_snapshot_release(rs);
    rs = NULL;
    node_caller_release(&caller);
    slotd__v1__watch_request__free_unpacked(r, NULL);
    pthread_mutex_lock(&hub->mu);
    if (hub->stopping || hub->n_sessions >= WATCH_STREAMS_MAX) {
        bool stopping = hub->stopping;
        pthread_mutex_unlock(&hub->mu);
        if (stopping)
            slotd_error_set(&err, SLOTD_ESHUTTING_DOWN, "the node is shutting down");
        else
            slotd_error_set(&err, SLOTD_EQUEUE_FULL, "node %llu serves %u watches already",
                            (unsigned long long)api->node_id, WATCH_STREAMS_MAX);
        session_free(s);
        rpc_stream_finish(st, &err);
        return;
    }
    rpc_stream_set_on_close(st, on_stream_close, s);
    s->next = hub->sessions;
    hub->sessions = s;
    hub->n_sessions++;
    hub->kick = true;
    pthread_cond_signal(&hub->cond);
    pthread_mutex_unlock(&hub->mu);
    return;

fail:
    if (s != NULL)
        free(s->groups);
    free(s);
    route_snapshot_release(rs);
    node_caller_release(&caller);
    slotd__v1__watch_request__free_unpacked(r, NULL);
    rpc_stream_finish(st, &err);
}

/* ---- Peer/WatchPoll ---- */

static void on_poll_answer(void *arg, const struct slotd_error *err,
                           const Slotd__Internal__V1__WatchPollResponse *resp)
{
    struct rpc_call *call = arg;
    if (err != NULL)
        rpc_call_fail(call, err);
    else
        rpc_call_reply(call, &resp->base);
}

static void on_peer_watch_poll(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_watch *hub = ctx;
    struct node_api *api = hub->api;
    struct slotd_error err;
    uint64_t caller;
    if (node_peer_caller(api, call, PEER_WATCH_POLL, req, len, false, &caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__Internal__V1__WatchPollRequest *r =
        slotd__internal__v1__watch_poll_request__unpack(NULL, len, req);
    if (r == NULL) {
        slotd_error_set(&err, SLOTD_EMALFORMED,
                        "request is not a valid slotd.internal.v1.WatchPollRequest");
        rpc_call_fail(call, &err);
        return;
    }
    int rc = -1;
    size_t typed_len = r->typed_id != NULL ? strlen(r->typed_id) : 0;
    if (r->key.len > SLOT_KEY_MAX || r->prefix.len > SLOT_KEY_MAX)
        slotd_error_field(&err, r->key.len > SLOT_KEY_MAX ? "key" : "prefix", SLOT_KEY_MAX,
                          "watch poll: key or prefix over %u bytes", SLOT_KEY_MAX);
    else if (r->typed_kind > SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_SUBSCRIBERS ||
             (r->typed_kind != 0 && (typed_len == 0 || typed_len > SLOT_CHANNEL_ID_MAX ||
                                     r->key.len > 0 || r->prefix.len > 0)))
        slotd_error_field(&err, "typed_id", SLOT_CHANNEL_ID_MAX,
                          "watch poll: typed_kind %u needs a typed_id of 1..%u bytes and no key "
                          "or prefix",
                          r->typed_kind, SLOT_CHANNEL_ID_MAX);
    else if (r->wait_ms > WATCH_POLL_WAIT_LIMIT_MS)
        slotd_error_field(&err, "wait_ms", WATCH_POLL_WAIT_LIMIT_MS,
                          "wait_ms: %u exceeds the limit of %u", r->wait_ms,
                          WATCH_POLL_WAIT_LIMIT_MS);
    else if (r->max_bytes == 0 || r->max_bytes > WATCH_POLL_BYTES_LIMIT)
        slotd_error_field(&err, "max_bytes", WATCH_POLL_BYTES_LIMIT,
                          "max_bytes: %u is not 1..%u", r->max_bytes, WATCH_POLL_BYTES_LIMIT);
    else {
        bool typed = r->typed_kind != 0;
        struct runtime_watch_query q = {.group = r->group_id,
                                        .after = r->after_index,
                                        .from_now = r->from_now,
                                        .typed_kind = r->typed_kind,
                                        .key = typed ? (const uint8_t *)r->typed_id : r->key.data,
                                        .key_len = typed ? typed_len : r->key.len,
                                        .prefix = r->prefix.data,
                                        .prefix_len = r->prefix.len,
                                        .keys_only = r->keys_only,
                                        .wait_ms = r->wait_ms,
                                        .max_bytes = r->max_bytes};
        rc = runtime_watch_poll(api->rt, &q, on_poll_answer, call, &err);
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
    slotd__internal__v1__watch_poll_request__free_unpacked(r, NULL);
}

/* ---- Registration ---- */

int node_watch_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer)
{
    struct node_watch *hub = calloc(1, sizeof(*hub));
    if (hub == NULL)
        return -1;
    hub->api = api;
    pthread_mutex_init(&hub->mu, NULL);
    pthread_cond_init(&hub->cond, NULL);
    if (pthread_create(&hub->thread, NULL, hub_main, hub) != 0) {
        pthread_cond_destroy(&hub->cond);
        pthread_mutex_destroy(&hub->mu);
        free(hub);
        return -1;
    }
    hub->started = true;
    api->watch = hub;
    int rc = rpc_server_add_server_stream(client, WATCH_METHOD, on_watch, hub);
    if (rc == 0)
        rc = rpc_server_add_unary(peer, PEER_WATCH_POLL, on_peer_watch_poll, hub);
    return rc;
}

void node_watch_stop(struct node_api *api)
{
    struct node_watch *hub = api->watch;
    if (hub == NULL)
        return;
    pthread_mutex_lock(&hub->mu);
    hub->stopping = true;
    hub->kick = true;
    pthread_cond_signal(&hub->cond);
    pthread_mutex_unlock(&hub->mu);
    pthread_join(hub->thread, NULL);
    pthread_cond_destroy(&hub->cond);
    pthread_mutex_destroy(&hub->mu);
    free(hub);
    api->watch = NULL;
}
