/* api.c - the slotd.v1.Metadata handlers: decode, validate, route, hand to the runtime. */
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include <grpc/grpc.h>

#include "google/rpc/status.pb-c.h"
#include "service/node/api.h"
#include "service/node/authz.h"
#include "service/slot/slot.h"
#include "slotd/internal/v1/peer.pb-c.h"

/* A forwarded request must be answered before the caller's deadline. */
#define NODE_FORWARD_MARGIN_MS 100
#define NODE_FORWARD_DEFAULT_MS 10000

int64_t node_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t node_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void node_fail_malformed(struct rpc_call *call, const char *what)
{
    struct slotd_error e;
    slotd_error_set(&e, SLOTD_EMALFORMED, "request: does not decode as %s", what);
    snprintf(e.field, sizeof(e.field), "request");
    rpc_call_fail(call, &e);
}

void *node_request_decode(struct rpc_call *call, const ProtobufCMessageDescriptor *d,
                          const uint8_t *req, size_t len)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, req);
    if (m == NULL)
        node_fail_malformed(call, d->name);
    return m;
}

/* What a Propose (write) or Read (read) of command / query field number f on key needs: the
 * key's prefix for Put, Delete, CompareAndSet and Get, else the typed kind. */
static struct ctl_need need_of(unsigned f, uint32_t access, const ProtobufCBinaryData *key)
{
    struct ctl_need n = {.access = access};
    const char *kind = node_authz_kind(f);
    if (kind != NULL) {
        n.type = CTL_PERM_KIND;
        n.kind = kind;
    } else {
        n.type = CTL_PERM_KEY_PREFIX;
        n.key = key->data;
        n.key_len = key->len;
    }
    return n;
}

/* Where a request for a key goes, resolved on one route snapshot. */
struct target {
    uint16_t hash_slot;
    uint32_t group;
    uint64_t leader; /* observed; 0 = unknown */
    uint64_t term;
    char leader_address[128];
    uint64_t ask;         /* no leader known: a voter to ask (it names its leader), 0 = none */
    uint64_t silent_term; /* no leader known: the term whose leader went silent here */
};

/* The voter of g other than self whose own answer is the newest (else the first listed): with
 * no leader known here, it is asked, and its NOT_LEADER hint is followed. A node that dropped
 * an expired or unreachable leader thus finds the next one at once instead of failing until
 * its next GroupStatus poll. */
static uint64_t voter_to_ask(const struct route_group *g, uint64_t self)
{
    uint64_t best = 0;
    int64_t heard = -1;
    for (uint32_t i = 0; i < g->n_replicas; i++) {
        const struct route_replica *r = &g->replicas[i];
        if (r->node != self && r->role == ROUTE_ROLE_VOTER && r->heard_ms > heard) {
            best = r->node;
            heard = r->heard_ms;
        }
    }
    for (uint32_t i = 0; best == 0 && i < g->n_voters; i++)
        if (g->voters[i] != self)
            best = g->voters[i];
    return best;
}

static int resolve(struct node_api *api, const ProtobufCBinaryData *key, struct target *t,
                   struct slotd_error *err)
{
    struct route_snapshot *s = route_table_acquire(api->routes);
    const struct route_group *g = NULL;
    memset(t, 0, sizeof(*t));
    int rc = route_snapshot_lookup(s, key->data, key->len, &t->hash_slot, &g);
    if (rc == ROUTE_ENOT_READY || g == NULL) {
        route_snapshot_release(s);
        slotd_error_set(err, SLOTD_EROUTE_NOT_READY, "hash slot %u: route not ready",
                        (unsigned)t->hash_slot);
        err->retry_after_ms = 100;
        return -1;
    }
    t->group = g->id;
    t->leader = g->leader;
    t->term = g->leader_term;
    if (g->leader == 0) {
        t->ask = voter_to_ask(g, api->node_id);
        t->silent_term = g->silent_term;
    }
    const struct route_node *n = g->leader ? route_snapshot_node(s, g->leader) : NULL;
    if (n != NULL)
        snprintf(t->leader_address, sizeof(t->leader_address), "%s", n->address);
    route_snapshot_release(s);
    return 0;
}

static void no_leader(struct slotd_error *err, const struct target *t)
{
    slotd_error_set(err, SLOTD_ENO_LEADER, "group %u: no leader known", t->group);
    err->retry_after_ms = 100;
}

static void not_leader(struct node_api *api, struct slotd_error *err, const struct target *t)
{
    slotd_error_set(err, SLOTD_ENOT_LEADER, "group %u: node %llu is not the leader; node %llu is",
                    t->group, (unsigned long long)api->node_id, (unsigned long long)t->leader);
    slotd_error_leader_hint(err, t->leader, t->leader_address, t->group, t->term);
}

/* ---- Forwarding: once to the observed leader, following newer hints ---- */

struct forward {
    struct node_api *api;
    struct rpc_call *call;
    const char *method;
    bool propose;
    uint32_t group;
    uint64_t to;
    uint64_t silent_term; /* a write's ask: hints at this term or older name a leader
                           * dropped here (0 for reads) */
    int hops;
    int64_t deadline_ms;
    size_t len;
    uint8_t req[];
};

static void forward_send(struct forward *f);

static const char *const forward_outcome_names[NODE_FORWARD_OUTCOMES] = {
    "ok", "error", "not_sent", "no_answer", "silent_leader"};

int node_api_metrics_register(struct node_api *api, struct metrics_registry *m)
{
    const char *labels[] = {"method", "outcome"};
    const char *methods[] = {"slotd.v1.Metadata/Read", "slotd.v1.Metadata/Propose"};
    struct metrics_family *fam = NULL;
    if (m == NULL)
        return METRICS_OK;
    int rc = metrics_counter_family_new(
        m, "slotd_forward_total",
        "Reads and proposals this node forwarded to a slot group's leader, by how they ended: ok, "
        "error (the leader's error relayed), not_sent, no_answer, silent_leader.",
        2, labels, &fam);
    if (rc != METRICS_OK)
        return rc;
    for (int p = 0; p < 2; p++) {
        for (int o = 0; o < NODE_FORWARD_OUTCOMES; o++) {
            const char *v[] = {methods[p], forward_outcome_names[o]};
            api->forwards[p][o] = metrics_counter_get(fam, v);
        }
    }
    rc = metrics_gauge_family_new(m, "slotd_propose_stream_inflight_peak",
                                  "The most items one ProposeStream call had in flight at once "
                                  "(submitted, result not yet sent); bounded by 4096.",
                                  0, NULL, &fam);
    if (rc != METRICS_OK)
        return rc;
    api->stream_peak_gauge = metrics_gauge_get(fam, NULL);
    return METRICS_OK;
}

/* Counts how f ended. */
static void forward_count(const struct forward *f, enum node_forward_outcome o)
{
    metrics_counter_add(f->api->forwards[f->propose ? 1 : 0][o], 1);
}

/* The NOT_LEADER hint in a relayed error, if any, and its term. */
static uint64_t hinted_leader(const uint8_t *details, size_t len, uint64_t *term)
{
    uint64_t node = 0;
    *term = 0;
    Google__Rpc__Status *st = details ? google__rpc__status__unpack(NULL, len, details) : NULL;
    if (st == NULL)
        return 0;
    for (size_t i = 0; i < st->n_details && node == 0; i++) {
        Slotd__V1__ErrorDetail *d = slotd__v1__error_detail__unpack(NULL, st->details[i]->value.len,
                                                                    st->details[i]->value.data);
        if (d != NULL && d->code == SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER &&
            d->leader_hint != NULL) {
            node = d->leader_hint->node_id;
            *term = d->leader_hint->term;
        }
        if (d != NULL)
            slotd__v1__error_detail__free_unpacked(d, NULL);
    }
    google__rpc__status__free_unpacked(st, NULL);
    return node;
}

static void forward_done(void *arg, int status, const char *message, const uint8_t *resp,
                         size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct forward *f = arg;
    struct slotd_error err;
    if (status == GRPC_STATUS_OK) {
        forward_count(f, NODE_FORWARD_OK);
        rpc_call_reply_bytes(f->call, resp ? resp : (const uint8_t *)"", resp ? resp_len : 0);
        free(f);
        return;
    }
    uint64_t hint_term = 0;
    uint64_t hint = status == GRPC_STATUS_FAILED_PRECONDITION
                        ? hinted_leader(details, details_len, &hint_term)
                        : 0;
    if (hint != 0 && hint != f->to && f->silent_term != 0 && hint_term <= f->silent_term) {
        /* The asked voter has not yet noticed what this node did: its leader went silent (a
         * follower keeps its leader until its own election timeout). Following the hint would
         * wait on a stopped node and turn a clean retryable failure into an unknown outcome. */
        slotd_error_set(&err, SLOTD_ENO_LEADER,
                        "group %u: node %llu names node %llu (term %llu) as leader, which went "
                        "silent here; no leader known",
                        f->group, (unsigned long long)f->to, (unsigned long long)hint,
                        (unsigned long long)hint_term);
        err.retry_after_ms = 100;
        forward_count(f, NODE_FORWARD_SILENT_LEADER);
        rpc_call_fail(f->call, &err);
        free(f);
        return;
    }
    if (hint != 0 && hint != f->to && f->hops < NODE_FORWARD_HOPS_MAX) {
        f->to = hint;
        f->hops++;
        forward_send(f);
        return;
    }
    if (details == NULL &&
        (status == GRPC_STATUS_UNAVAILABLE || status == GRPC_STATUS_DEADLINE_EXCEEDED ||
         status == GRPC_STATUS_CANCELLED)) {
        /* The leader did not answer: a write may or may not have reached it, unless gRPC never
         * sent it (nothing could be connected to): then it is a definite, retryable failure. */
        bool unsent = transport_reply_unsent(status, message);
        forward_count(f, unsent ? NODE_FORWARD_NOT_SENT : NODE_FORWARD_NO_ANSWER);
        if (unsent) {
            runtime_peer_unreachable(f->api->rt, f->to); /* drop it from the route at once */
            slotd_error_set(&err, SLOTD_ENO_LEADER,
                            "group %u: node %llu cannot be reached (%s); the request was not sent",
                            f->group, (unsigned long long)f->to, message);
        } else if (f->propose)
            slotd_error_set(&err, SLOTD_EUNKNOWN_OUTCOME,
                            "group %u: forwarded to node %llu: %s; the write may or may not "
                            "have been applied",
                            f->group, (unsigned long long)f->to, message ? message : "no answer");
        else
            slotd_error_set(&err, SLOTD_ENO_LEADER, "group %u: forwarded to node %llu: %s",
                            f->group, (unsigned long long)f->to, message ? message : "no answer");
        err.retry_after_ms = 100;
        rpc_call_fail(f->call, &err);
        free(f);
        return;
    }
    forward_count(f, NODE_FORWARD_ERROR);
    rpc_call_fail_raw(f->call, status, message, details, details_len);
    free(f);
}

static void forward_send(struct forward *f)
{
    int rc = transport_forward(f->api->transport, f->to, f->method, f->req, f->len, f->deadline_ms,
                               forward_done, f);
    if (rc != 0) {
        struct slotd_error err;
        slotd_error_set(&err, SLOTD_ENO_LEADER, "group %u: cannot forward to node %llu: %s",
                        f->group, (unsigned long long)f->to, transport_strerror(rc));
        forward_count(f, NODE_FORWARD_NOT_SENT);
        rpc_call_fail(f->call, &err);
        free(f);
    }
}

/* Forwards the packed request (no_forward already set) to the leader. The
 * relayed answer arrives before the caller's deadline. */
static int forward(struct node_api *api, struct rpc_call *call, const char *method, bool propose,
                   const struct target *t, const uint8_t *req, size_t len, struct slotd_error *err)
{
    if (api->transport == NULL) {
        no_leader(err, t);
        return -1;
    }
    struct forward *f = malloc(sizeof(*f) + len);
    if (f == NULL) {
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    memset(f, 0, sizeof(*f));
    f->api = api;
    f->call = call;
    f->method = method;
    f->propose = propose;
    f->group = t->group;
    f->to = t->leader != 0 ? t->leader : t->ask;
    /* Only a write refuses a hint naming the leader that went silent here: following it could
     * leave the write queued on a stopped node (an unknown outcome). A read has no such
     * outcome, and the hinted leader may well be alive (this node was cut off from it, as in
     * a healed partition), so a read follows the hint. */
    f->silent_term = t->leader != 0 || !propose ? 0 : t->silent_term;
    int64_t d = rpc_call_deadline_ms(call);
    f->deadline_ms =
        d == INT64_MAX ? node_mono_ms() + NODE_FORWARD_DEFAULT_MS : d - NODE_FORWARD_MARGIN_MS;
    f->len = len;
    memcpy(f->req, req, len);
    forward_send(f);
    return 0;
}

/* Decides where a request goes: 1 = submit here, 0 = forwarded (or failed
 * into err with -1). */
static int route_request(struct node_api *api, struct rpc_call *call, const char *method,
                         bool propose, bool no_forward, bool local_ok, const struct target *t,
                         const ProtobufCMessage *msg, struct slotd_error *err)
{
    bool hosted = runtime_hosts_group(api->rt, t->group);
    if (hosted && (t->leader == api->node_id || local_ok))
        return 1;
    bool ask = t->leader == 0 && !hosted && t->ask != 0 && !no_forward;
    if (!ask && (t->leader == 0 || t->leader == api->node_id)) {
        no_leader(err, t);
        return -1;
    }
    if (no_forward) {
        not_leader(api, err, t);
        return -1;
    }
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL) {
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    protobuf_c_message_pack(msg, buf);
    int rc = forward(api, call, method, propose, t, buf, len, err);
    free(buf);
    return rc;
}

/* ---- Txn: every key in the first key's slot group, and allowed to the caller ---- */

struct txn_keys {
    struct node_caller *caller;
    struct route_snapshot *snap;
    const ProtobufCBinaryData *first;
    uint32_t first_group;
    uint16_t first_hash_slot;
    struct slotd_error *err;
};

static int txn_key_check(void *ctx, const ProtobufCBinaryData *key, const char *field, bool writes)
{
    struct txn_keys *tk = ctx;
    struct ctl_need need = {.type = CTL_PERM_KEY_PREFIX,
                            .access = writes ? CTL_ACCESS_WRITE : CTL_ACCESS_READ,
                            .key = key->data,
                            .key_len = key->len};
    if (node_authz_allowed(tk->caller, &need, tk->err) != 0)
        return -1;
    uint16_t hs = 0;
    const struct route_group *g = NULL;
    int rc = route_snapshot_lookup(tk->snap, key->data, key->len, &hs, &g);
    if (rc == ROUTE_ENOT_READY || g == NULL) {
        slotd_error_set(tk->err, SLOTD_EROUTE_NOT_READY, "%s: hash slot %u: route not ready", field,
                        (unsigned)hs);
        tk->err->retry_after_ms = 100;
        return -1;
    }
    if (tk->first == NULL) {
        tk->first = key;
        tk->first_group = g->id;
        tk->first_hash_slot = hs;
        return 0;
    }
    if (g->id != tk->first_group) {
        slotd_error_field(tk->err, field, 0,
                          "%s: key \"%.*s\" (hash slot %u, group %u) and the first key \"%.*s\" "
                          "(hash slot %u, group %u) are in different slot groups; a txn is "
                          "atomic within one slot group only",
                          field, (int)(key->len > 64 ? 64 : key->len), (const char *)key->data,
                          (unsigned)hs, g->id, (int)(tk->first->len > 64 ? 64 : tk->first->len),
                          (const char *)tk->first->data, (unsigned)tk->first_hash_slot,
                          tk->first_group);
        return -1;
    }
    return 0;
}

/* Checks every key of a validated txn on one route snapshot: the caller's grant (write for put
 * and delete, read for compares and get) and the first key's slot group. 0, or -1 with err. */
static int txn_check_keys(struct node_api *api, struct node_caller *caller,
                          const Slotd__V1__TxnCommand *txn, struct slotd_error *err)
{
    struct txn_keys tk = {.caller = caller, .err = err};
    tk.snap = route_table_acquire(api->routes);
    int rc = slot_txn_each_key(txn, txn_key_check, &tk);
    route_snapshot_release(tk.snap);
    return rc != 0 ? -1 : 0;
}

/* Validates, authorizes (caller: who made the request), routes and submits the Propose p for
 * call, the one path of a unary Propose and of every ProposeStream item. 0: call is answered by
 * whoever it went to (runtime, forward); -1 with err: the caller fails call. */
static int propose_submit(struct node_api *api, struct rpc_call *call, struct node_caller *caller,
                          Slotd__V1__ProposeRequest *p, struct slotd_error *err)
{
    const ProtobufCBinaryData *key = NULL;
    struct target t;
    uint8_t *entry = NULL;
    size_t entry_len = 0;
    if (slot_validate_propose(p, &key, err) != 0)
        return -1;
    bool txn = p->command_case == SLOTD__V1__PROPOSE_REQUEST__COMMAND_TXN;
    struct ctl_need need = need_of((unsigned)p->command_case, CTL_ACCESS_WRITE, key);
    if (txn ? txn_check_keys(api, caller, p->txn, err) != 0
            : node_authz_allowed(caller, &need, err) != 0)
        return -1;
    if (resolve(api, key, &t, err) != 0)
        return -1;
    bool no_forward = p->no_forward;
    p->no_forward = true; /* a forwarded request is forwarded at most once */
    int where = route_request(api, call, "/slotd.v1.Metadata/Propose", true, no_forward, false, &t,
                              &p->base, err);
    if (where <= 0)
        return where;
    if (slot_encode_command(p, t.hash_slot, &entry, &entry_len) != 0) {
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    int rc = runtime_submit_propose(api->rt, t.group, entry, entry_len, call, err);
    free(entry);
    return rc != 0 ? -1 : 0;
}

static void on_propose(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    struct node_caller caller; /* before decoding: no validation answers without credentials */
    if (node_authz_caller(api->authz, api->peer_mtls, call, "/slotd.v1.Metadata/Propose", req, len,
                          &caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__V1__ProposeRequest *p =
        node_request_decode(call, &slotd__v1__propose_request__descriptor, req, len);
    if (p == NULL) {
        node_caller_release(&caller);
        return;
    }
    int rc = propose_submit(api, call, &caller, p, &err);
    node_caller_release(&caller);
    slotd__v1__propose_request__free_unpacked(p, NULL);
    if (rc != 0)
        rpc_call_fail(call, &err);
}

/* ---- ProposeStream: many Proposes on one bidirectional call ---- */

/* One item in flight: its local call's answer becomes its ProposeStreamResult. */
struct stream_item {
    struct rpc_bstream *st;
    uint64_t id;
};

static size_t varint_put(uint8_t *b, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return n;
}

/* Appends field f (length-delimited) of len bytes to b. */
static size_t bytes_put(uint8_t *b, unsigned f, const void *p, size_t len)
{
    size_t n = varint_put(b, (uint64_t)f << 3 | 2);
    n += varint_put(b + n, len);
    memcpy(b + n, p, len);
    return n + len;
}

/* The local call's answer: one `results` field of a ProposeStreamResponse, coalesced by the rpc
 * layer with the others that are ready. Runs on the thread that finished the call. */
static void on_stream_item_done(void *arg, int status, const char *message, const uint8_t *resp,
                                size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct stream_item *it = arg;
    size_t mlen = strlen(message);
    size_t cap = 64 + resp_len + mlen + details_len;
    uint8_t *inner = malloc(cap), *outer = malloc(cap + 16);
    if (inner == NULL || outer == NULL) {
        free(inner);
        free(outer);
        rpc_bstream_item_done(it->st, NULL, SIZE_MAX); /* ends the stream INTERNAL */
        free(it);
        return;
    }
    size_t n = varint_put(inner, 1 << 3);
    n += varint_put(inner + n, it->id);
    if (status == 0) {
        n += bytes_put(inner + n, 2, resp != NULL ? resp : (const uint8_t *)"", resp_len);
    } else {
        n += varint_put(inner + n, 3 << 3);
        n += varint_put(inner + n, (uint64_t)status);
        n += bytes_put(inner + n, 4, message, mlen);
        if (details != NULL)
            n += bytes_put(inner + n, 5, details, details_len);
    }
    size_t m = bytes_put(outer, 1, inner, n);
    rpc_bstream_item_done(it->st, outer, m);
    free(inner);
    free(outer);
    free(it);
}

static int on_propose_stream_frame(void *ctx, struct rpc_bstream *st, const uint8_t *frame,
                                   size_t len, struct slotd_error *err)
{
    struct node_api *api = ctx;
    struct rpc_call *call = rpc_bstream_call(st);
    struct node_caller caller; /* per request message, exactly like a unary Propose's */
    if (node_authz_caller(api->authz, api->peer_mtls, call, "/slotd.v1.Metadata/Propose", frame,
                          len, &caller, err) != 0)
        return -1;
    Slotd__V1__ProposeStreamRequest *r =
        slotd__v1__propose_stream_request__unpack(NULL, len, frame);
    if (r == NULL) {
        node_caller_release(&caller);
        slotd_error_set(err, SLOTD_EMALFORMED,
                        "request: does not decode as slotd.v1.ProposeStreamRequest");
        snprintf(err->field, sizeof(err->field), "request");
        return -1;
    }
    if (rpc_bstream_items_check(st, r->n_items, err) != 0) { /* the method's frame_items_max */
        node_caller_release(&caller);
        slotd__v1__propose_stream_request__free_unpacked(r, NULL);
        return -1;
    }
    int64_t deadline = rpc_call_deadline_ms(call);
    int rc = 0;
    for (size_t i = 0; i < r->n_items; i++) {
        struct stream_item *it = malloc(sizeof(*it));
        if (it == NULL || rpc_bstream_item_begin(st) != 0) {
            free(it);
            slotd_error_set(err, SLOTD_EINTERNAL, "items[%zu]: cannot take an in-flight slot", i);
            rc = -1;
            break;
        }
        it->st = st;
        it->id = r->items[i]->id;
        struct rpc_call *lc =
            rpc_call_new_local("/slotd.v1.Metadata/Propose", deadline, on_stream_item_done, it);
        if (lc == NULL) {
            on_stream_item_done(it, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0,
                                NULL, 0);
            continue;
        }
        Slotd__V1__ProposeRequest empty = SLOTD__V1__PROPOSE_REQUEST__INIT;
        Slotd__V1__ProposeRequest *p = r->items[i]->request ? r->items[i]->request : &empty;
        struct slotd_error e;
        if (propose_submit(api, lc, &caller, p, &e) != 0)
            rpc_call_fail(lc, &e);
    }
    node_caller_release(&caller);
    slotd__v1__propose_stream_request__free_unpacked(r, NULL);
    int64_t peak = (int64_t)rpc_bstream_inflight_peak(st);
    int64_t seen = atomic_load(&api->stream_peak);
    while (peak > seen && !atomic_compare_exchange_weak(&api->stream_peak, &seen, peak)) {
    }
    if (peak > seen && api->stream_peak_gauge != NULL)
        metrics_gauge_set(api->stream_peak_gauge, atomic_load(&api->stream_peak));
    return rc;
}

static void on_read(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    struct node_caller caller; /* before decoding: no validation answers without credentials */
    if (node_authz_caller(api->authz, api->peer_mtls, call, "/slotd.v1.Metadata/Read", req, len,
                          &caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__V1__ReadRequest *r =
        node_request_decode(call, &slotd__v1__read_request__descriptor, req, len);
    if (r == NULL) {
        node_caller_release(&caller);
        return;
    }
    const ProtobufCBinaryData *key = NULL;
    struct target t;
    if (slot_validate_read(r, &key, &err) != 0)
        goto fail;
    struct ctl_need need = need_of((unsigned)r->query_case, CTL_ACCESS_READ, key);
    if (r->query_case == SLOTD__V1__READ_REQUEST__QUERY_RANGE) {
        /* Every key the range can return: a prefix range needs read on the prefix; a [start,
         * end) range (or all keys) needs a grant on the empty prefix, or admin. */
        need.key = r->range->prefix.data;
        need.key_len = r->range->prefix.len;
    }
    if (node_authz_allowed(&caller, &need, &err) != 0 || resolve(api, key, &t, &err) != 0)
        goto fail;
    bool local = r->consistency == SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL;
    bool no_forward = r->no_forward;
    /* A client's range page or spanning listing page (forwarding allowed) is merged from the
     * next runs' group pages, asked at once; those come back here as local calls and are served
     * one group each. */
    bool range = r->query_case == SLOTD__V1__READ_REQUEST__QUERY_RANGE;
    if (!no_forward && !rpc_call_is_local(call) &&
        ((range && !r->range->count_only) || (!range && slot_list_spans(r)))) {
        /* (a spanning listing is routed by its cursor's hash slot: t.hash_slot) */
        if ((range ? node_range_fanout(api, call, r, &err)
                   : node_list_fanout(api, call, r, t.hash_slot, &err)) != 0)
            goto fail;
        node_caller_release(&caller);
        slotd__v1__read_request__free_unpacked(r, NULL);
        return;
    }
    r->no_forward = true;
    int where = route_request(api, call, "/slotd.v1.Metadata/Read", false, no_forward, local, &t,
                              &r->base, &err);
    if (where < 0)
        goto fail;
    /* A Get is served on this gRPC thread when the runtime can (read_local.c: one LevelDB get is
     * atomic; typed queries read several rows and keep the loop's apply-stage view): a
     * serializable one from any replica, a linearizable one by a leader under its lease;
     * otherwise through the loop (a linearizable one with a ReadIndex round). */
    if (where == 1 && r->query_case == SLOTD__V1__READ_REQUEST__QUERY_GET &&
        runtime_read_local(api->rt, t.group, t.hash_slot, req, len, r->min_applied_index, !local,
                           call))
        where = 0;
    if (where == 1 &&
        runtime_submit_read(api->rt, t.group, t.hash_slot, req, len, (int)r->consistency,
                            r->min_applied_index, call, &err) != 0)
        goto fail;
    node_caller_release(&caller);
    slotd__v1__read_request__free_unpacked(r, NULL);
    return;

fail:
    node_caller_release(&caller);
    slotd__v1__read_request__free_unpacked(r, NULL);
    rpc_call_fail(call, &err);
}

/* ---- Read-your-admin-writes gate ---- */

static void gate_done(void *arg, bool reached, uint64_t revision)
{
    struct node_gated *g = arg;
    if (reached) {
        g->answer(g);
    } else {
        struct slotd_error err;
        slotd_error_set(&err, SLOTD_EROUTE_NOT_READY,
                        "min_revision %llu not reached within %u ms: node %llu is at controller "
                        "revision %llu",
                        (unsigned long long)g->min_revision, RUNTIME_CTL_WAIT_MS,
                        (unsigned long long)g->api->node_id, (unsigned long long)revision);
        snprintf(err.field, sizeof(err.field), "min_revision");
        err.retry_after_ms = 200;
        rpc_call_fail(g->call, &err);
    }
    free(g);
}

void node_gate(const struct node_gated *g)
{
    struct slotd_error err;
    if (g->min_revision == 0) {
        g->answer(g);
        return;
    }
    struct node_gated *held = malloc(sizeof(*held));
    if (held == NULL) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        rpc_call_fail(g->call, &err);
        return;
    }
    *held = *g;
    int rc = runtime_ctl_wait(g->api->rt, g->min_revision, gate_done, held, &err);
    if (rc == 0)
        return; /* gate_done answers and frees it */
    free(held);
    if (rc == 1)
        g->answer(g);
    else
        rpc_call_fail(g->call, &err);
}

/* ---- Route and tasks ---- */

static void answer_route(const struct node_gated *g)
{
    struct slotd_error err;
    struct route_snapshot *s = route_table_acquire(g->api->routes);
    if (s == NULL) {
        slotd_error_set(&err, SLOTD_EROUTE_NOT_READY, "route not ready");
        rpc_call_fail(g->call, &err);
        return;
    }
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc = route_snapshot_encode(s, &buf, &blen);
    route_snapshot_release(s);
    if (rc != 0) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "route encode: %s", route_strerror(rc));
        rpc_call_fail(g->call, &err);
        return;
    }
    rpc_call_reply_bytes(g->call, buf, blen);
    free(buf);
}

static void on_route_snapshot(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    if (node_authz_require(api->authz, api->peer_mtls, call, "/slotd.v1.Metadata/RouteSnapshot",
                           req, len, NULL, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__V1__RouteSnapshotRequest *r =
        node_request_decode(call, &slotd__v1__route_snapshot_request__descriptor, req, len);
    if (r == NULL)
        return;
    struct node_gated g = {
        .api = ctx, .call = call, .min_revision = r->min_revision, .answer = answer_route};
    slotd__v1__route_snapshot_request__free_unpacked(r, NULL);
    node_gate(&g);
}

static void answer_task_status(const struct node_gated *g)
{
    node_admin_task_status(g->api, g->call, g->task_id, g->active_only);
}

static void on_task_status(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    if (node_authz_require(api->authz, api->peer_mtls, call, "/slotd.v1.Metadata/TaskStatus", req,
                           len, NULL, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__V1__TaskStatusRequest *r =
        node_request_decode(call, &slotd__v1__task_status_request__descriptor, req, len);
    if (r == NULL)
        return;
    struct node_gated g = {.api = ctx,
                           .call = call,
                           .min_revision = r->min_revision,
                           .answer = answer_task_status,
                           .task_id = r->task_id,
                           .active_only = r->active_only};
    slotd__v1__task_status_request__free_unpacked(r, NULL);
    node_gate(&g);
}

/* ---- slotd.internal.v1.Peer ---- */

#define PEER_RAFT "/slotd.internal.v1.Peer/Raft"
#define PEER_RAFT_STREAM "/slotd.internal.v1.Peer/RaftStream"
#define PEER_SNAPSHOT "/slotd.internal.v1.Peer/Snapshot"
#define PEER_GROUP_STATUS "/slotd.internal.v1.Peer/GroupStatus"

/* The authenticated caller of a Peer call whose body (of message type, field 1 from_node) names
 * its sender: 0 with *caller set, or -1 with err filled (no proof, a bad one, or a sender that is
 * not the caller). */
static int peer_sender(struct node_api *api, struct rpc_call *call, const char *method,
                       const char *type, const uint8_t *req, size_t len, uint64_t *caller,
                       struct slotd_error *err)
{
    uint64_t from = 0;
    if (node_peer_caller(api, call, method, req, len, false, caller, err) != 0)
        return -1;
    if (*caller == 0)
        return 0; /* not authenticated: the runtime checks messages against from_node only */
    if (node_peer_from_node(req, len, &from) != 0) {
        slotd_error_set(err, SLOTD_EMALFORMED, "request is not a valid %s", type);
        return -1;
    }
    return node_peer_sender(api, method, *caller, from, err);
}

static void on_peer_raft(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    uint64_t caller = 0;
    if (peer_sender(api, call, PEER_RAFT, "slotd.internal.v1.RaftBatch", req, len, &caller, &err) !=
            0 ||
        runtime_submit_raft_batch(api->rt, req, len, caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__Internal__V1__RaftBatchAck ack = SLOTD__INTERNAL__V1__RAFT_BATCH_ACK__INIT;
    rpc_call_reply(call, &ack.base);
}

/* What one Peer/RaftStream keeps between its frames. */
struct peer_raft_stream {
    uint64_t cert_node; /* the node its client certificate names (with peer_mtls), 0: none */
};

/* One frame of a Peer/RaftStream: verified on its own (its proof over its batch, the batch's
 * from_node against the proven node) exactly as a Peer/Raft call, then submitted. A refused
 * frame ends the stream with its error and changes nothing; so does a full raft queue
 * (RESOURCE_EXHAUSTED: the sender backs off). */
static int on_peer_raft_frame(void *ctx, struct rpc_cstream *st, const uint8_t *frame, size_t len,
                              struct slotd_error *err)
{
    struct node_api *api = ctx;
    const char *proof = NULL;
    const uint8_t *batch = NULL;
    size_t plen = 0, blen = 0;
    uint64_t caller = 0, from = 0;
    if (node_peer_frame_parse(frame, len, &proof, &plen, &batch, &blen) != 0) {
        slotd_error_set(err, SLOTD_EMALFORMED, "frame is not a valid slotd.internal.v1.RaftStreamFrame");
        return -1;
    }
    struct peer_raft_stream *ps = rpc_cstream_data(st);
    if (ps == NULL) {
        ps = malloc(sizeof(*ps));
        if (ps == NULL) {
            slotd_error_set(err, SLOTD_EINTERNAL, "%s: out of memory", PEER_RAFT_STREAM);
            return -1;
        }
        ps->cert_node = api->peer_mtls ? node_peer_cert_node(rpc_cstream_call(st)) : 0;
        rpc_cstream_set_data(st, ps);
    }
    if (batch == NULL)
        batch = (const uint8_t *)"";
    if (node_peer_frame_caller(api, PEER_RAFT_STREAM, proof, plen, batch, blen, ps->cert_node,
                               &caller, err) != 0)
        return -1;
    if (caller != 0) {
        if (node_peer_from_node(batch, blen, &from) != 0) {
            slotd_error_set(err, SLOTD_EMALFORMED, "batch is not a valid slotd.internal.v1.RaftBatch");
            return -1;
        }
        if (node_peer_sender(api, PEER_RAFT_STREAM, caller, from, err) != 0)
            return -1;
    }
    return runtime_submit_raft_batch(api->rt, batch, blen, caller, err) != 0 ? -1 : 0;
}

static void on_peer_raft_stream_end(void *ctx, struct rpc_cstream *st)
{
    (void)ctx;
    free(rpc_cstream_data(st));
}

/* The runtime checks the chunk's raft message against from_node (which is the caller here). */
static void on_peer_snapshot(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    uint64_t caller = 0;
    if (peer_sender(api, call, PEER_SNAPSHOT, "slotd.internal.v1.SnapshotChunk", req, len, &caller,
                    &err) != 0 ||
        runtime_submit_snapshot_chunk(api->rt, req, len, call, &err) != 0)
        rpc_call_fail(call, &err);
}

static void on_peer_group_status(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    uint8_t *buf;
    size_t blen;
    uint64_t caller;
    if (node_peer_caller(api, call, PEER_GROUP_STATUS, req, len, false, &caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    if (runtime_group_status(api->rt, &buf, &blen) != 0) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        rpc_call_fail(call, &err);
        return;
    }
    rpc_call_reply_bytes(call, buf, blen);
    free(buf);
}

#define PEER_FORWARD "/slotd.internal.v1.Peer/Forward"
#define METADATA_PREFIX "/slotd.v1.Metadata/"
#define ADMIN_PREFIX "/slotd.v1.Admin/"

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* What a joining node sends before it knows any member by id (transport_forward_addr), so its
 * proof names no receiver: idempotent (a replayed JoinNode or ActivateNode is a no-op). */
static bool unaddressed_ok(const char *method)
{
    return strcmp(method, ADMIN_PREFIX "JoinNode") == 0 ||
           strcmp(method, ADMIN_PREFIX "ActivateNode") == 0 ||
           strcmp(method, ADMIN_PREFIX "ClusterState") == 0;
}

/* Admin calls that change nothing; every other Admin call is a command. */
static bool admin_read(const char *method)
{
    return strcmp(method, ADMIN_PREFIX "ClusterState") == 0 ||
           strcmp(method, ADMIN_PREFIX "ControllerStatus") == 0;
}

/* The inner call's answer, wrapped for the node that forwarded it. */
static void on_forward_done(void *arg, int status, const char *message, const uint8_t *resp,
                            size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct rpc_call *call = arg;
    if (status != GRPC_STATUS_OK) {
        rpc_call_fail_raw(call, status, message, details, details_len);
        return;
    }
    Slotd__Internal__V1__ForwardResponse r = SLOTD__INTERNAL__V1__FORWARD_RESPONSE__INIT;
    r.response.data = (uint8_t *)resp;
    r.response.len = resp_len;
    rpc_call_reply(call, &r.base);
}

/* slotd.internal.v1.Peer/Forward: a Metadata or Admin request another node passes on (a write
 * or read for a group this node leads, an Admin command for the controller leader, a mirror's
 * ClusterState poll, a joining node's JoinNode). From an authenticated node when the cluster
 * authenticates peers; served by this node's client-port handler as a local call. Admin
 * commands are replay-checked; reads and Metadata traffic are not (their rate is a client's). */
static void on_peer_forward(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    uint64_t caller;
    Slotd__Internal__V1__ForwardRequest *r =
        slotd__internal__v1__forward_request__unpack(NULL, len, req);
    if (r == NULL) {
        slotd_error_set(&err, SLOTD_EMALFORMED, "request is not a valid %s",
                        "slotd.internal.v1.ForwardRequest");
        rpc_call_fail(call, &err);
        return;
    }
    bool admin = has_prefix(r->method, ADMIN_PREFIX);
    bool remember = admin && !admin_read(r->method);
    int rc = -1;
    if (!admin && !has_prefix(r->method, METADATA_PREFIX))
        slotd_error_field(&err, "method", RPC_METHOD_PATH_MAX,
                          "method: \"%.*s\" is not a slotd.v1.Metadata or slotd.v1.Admin method",
                          RPC_METHOD_PATH_MAX, r->method);
    else if (unaddressed_ok(r->method))
        rc = node_peer_caller_unaddressed(api, call, PEER_FORWARD, req, len, remember, &caller,
                                          &err);
    else
        rc = node_peer_caller(api, call, PEER_FORWARD, req, len, remember, &caller, &err);
    if (rc == 0) {
        rc = rpc_server_call_local(api->client, r->method, rpc_call_deadline_ms(call),
                                   r->request.data, r->request.len, on_forward_done, call);
        if (rc == SLOTD_EUNIMPLEMENTED)
            slotd_error_set(&err, SLOTD_EUNIMPLEMENTED, "method %.*s is not served here",
                            RPC_METHOD_PATH_MAX, r->method);
        else if (rc != 0)
            slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
    slotd__internal__v1__forward_request__free_unpacked(r, NULL);
}

const char *node_client_address(struct node_api *api, uint64_t id, char *buf, size_t len)
{
    struct route_snapshot *s = route_table_acquire(api->routes);
    const struct route_node *n = s != NULL ? route_snapshot_node(s, id) : NULL;
    snprintf(buf, len, "%s", n != NULL ? n->address : "");
    route_snapshot_release(s);
    return buf;
}

int node_api_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer)
{
    static const struct {
        bool peer;
        const char *path;
        rpc_unary_cb cb;
    } methods[] = {
        {false, "/slotd.v1.Metadata/Propose", on_propose},
        {false, "/slotd.v1.Metadata/Read", on_read},
        {false, "/slotd.v1.Metadata/RouteSnapshot", on_route_snapshot},
        {false, "/slotd.v1.Metadata/TaskStatus", on_task_status},
        {true, PEER_RAFT, on_peer_raft},
        {true, PEER_SNAPSHOT, on_peer_snapshot},
        {true, PEER_GROUP_STATUS, on_peer_group_status},
        {true, PEER_FORWARD, on_peer_forward},
    };
    assert(api->client == client);
    int rc = rpc_server_add_service(client, &slotd__v1__metadata__descriptor);
    if (rc == 0)
        rc = rpc_server_add_service(peer, &slotd__internal__v1__peer__descriptor);
    for (size_t i = 0; rc == 0 && i < sizeof(methods) / sizeof(methods[0]); i++)
        rc = rpc_server_add_unary(methods[i].peer ? peer : client, methods[i].path, methods[i].cb,
                                  api);
    /* --propose-stream-inflight (config.c keeps it in 1024..65536, >= the items of a message) */
    const struct rpc_bstream_limits stream_limits = {
        .inflight_max = api->propose_stream_inflight != 0 ? api->propose_stream_inflight
                                                          : NODE_PROPOSE_STREAM_INFLIGHT_MAX,
        .frame_items_max = NODE_PROPOSE_STREAM_ITEMS_MAX,
    };
    if (rc == 0)
        rc = rpc_server_add_bidi_stream(client, "/slotd.v1.Metadata/ProposeStream",
                                        on_propose_stream_frame, &stream_limits, api);
    if (rc == 0)
        rc = rpc_server_add_client_stream(peer, PEER_RAFT_STREAM, on_peer_raft_frame,
                                          on_peer_raft_stream_end, api);
    if (rc == 0)
        rc = node_watch_register(api, client, peer);
    if (rc == 0)
        rc = node_backup_register(api, client, peer);
    return rc == 0 ? node_admin_register(api, client, peer) : rc;
}
