/* client.c - the libslotd client: channels, route cache, routed calls, writes, get, health. */
#include "client_internal.h"

#include "client_tls.h"

#include "grpc/health/v1/health.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Error sentences are cut to their fixed-size buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define CLIENT_METHOD_PROPOSE "/slotd.v1.Metadata/Propose"
#define CLIENT_METHOD_READ "/slotd.v1.Metadata/Read"
#define CLIENT_METHOD_ROUTE "/slotd.v1.Metadata/RouteSnapshot"
#define CLIENT_METHOD_HEALTH "/grpc.health.v1.Health/Check"
/* NOT_LEADER redirects per call (each one is answered before anything is proposed). */
#define CLIENT_REDIRECTS_MAX 8
/* A stale route is refetched at most this often (all threads together). */
#define CLIENT_ROUTE_REFETCH_MIN_MS 20
#define CLIENT_CHANNELS_MAX (SLOTD_CLIENT_NODES_MAX + SLOTD_CLIENT_ENDPOINTS_MAX)

struct client_channel {
    char address[SLOTD_ADDRESS_LEN + 1];
    grpc_channel *channel; /* lives until slotd_client_free */
};

struct slotd_client {
    struct slotd_options o;                             /* its tls_* pointers are NULL (not kept) */
    grpc_channel_credentials *creds;                    /* every channel's: SSL or insecure */
    char server_name[SLOTD_CLIENT_SERVER_NAME_MAX + 1]; /* "" = no target name override */
    char endpoints[SLOTD_CLIENT_ENDPOINTS_MAX][SLOTD_ADDRESS_LEN + 1];
    size_t endpoint_count;
    pthread_mutex_t lock;
    /* guarded by lock: */
    struct client_channel channels[CLIENT_CHANNELS_MAX];
    size_t channel_count;      /* invariant: <= CLIENT_CHANNELS_MAX; channels only grow */
    struct slotd_route *route; /* NULL until the first fetch succeeds */
    int64_t route_fetched_ns;  /* when route was installed */
    int64_t route_attempt_ns;  /* when the latest fetch started */
    bool route_stale;          /* a call failed in a way a newer route may fix */
    size_t next_endpoint;      /* endpoint that answered the latest fetch */
    uint64_t last_revision;    /* atomic: the highest controller revision seen (any thread) */
    uint64_t rng;
    /* "Bearer <token>" sent as "authorization" on every call; "" = none (guarded by lock) */
    char authorization[SLOTD_CLIENT_TOKEN_MAX + 8];
};

static int64_t client_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void client_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- object ---------------------------------------------------------------------------- */

_Static_assert(SLOTD_CLIENT_PEM_MAX == CLIENT_TLS_PEM_MAX, "one PEM bound");

/* c->creds from c's options o (after grpc_init): the PEM files read by clients/tls, named by
 * their option in a failure. Returns SLOTD_CLIENT_OK or an error with a sentence in err. */
static int client_creds_new(struct slotd_client *c, const struct slotd_options *o, char *err,
                            size_t errlen)
{
    struct client_tls_pem pem = {0};
    int rc = client_tls_pem_read("tls_ca_file", o->tls_ca_file, &pem.ca, err, errlen);
    if (rc == CLIENT_TLS_OK)
        rc = client_tls_pem_read("tls_cert_file", o->tls_cert_file, &pem.cert, err, errlen);
    if (rc == CLIENT_TLS_OK)
        rc = client_tls_pem_read("tls_key_file", o->tls_key_file, &pem.key, err, errlen);
    if (rc == CLIENT_TLS_OK) {
        c->creds = client_tls_creds_new(&pem); /* insecure without a CA or certificate */
        if (!c->creds) {
            snprintf(err, errlen, "tls: gRPC refused the SSL credentials");
            rc = CLIENT_TLS_EINVAL;
        }
    }
    if (rc == CLIENT_TLS_OK && o->tls_server_name)
        snprintf(c->server_name, sizeof(c->server_name), "%s", o->tls_server_name);
    client_tls_pem_free(&pem);
    return rc == CLIENT_TLS_OK       ? SLOTD_CLIENT_OK
           : rc == CLIENT_TLS_ENOMEM ? SLOTD_CLIENT_ENOMEM
                                     : SLOTD_CLIENT_EINVAL;
}

int slotd_client_create(const char *endpoints, const struct slotd_options *o,
                        struct slotd_client **out, struct slotd_error **err)
{
    *out = NULL;
    char msg[SLOTD_STATUS_MESSAGE_LEN];
    struct slotd_client *c = calloc(1, sizeof(*c));
    if (!c)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "client: out of memory", NULL, err);
    int rc = slotd__options_resolve(o, &c->o, msg, sizeof(msg));
    if (rc == SLOTD_CLIENT_OK)
        rc = slotd__endpoints_parse(endpoints, c->endpoints, SLOTD_CLIENT_ENDPOINTS_MAX,
                                    &c->endpoint_count, msg, sizeof(msg));
    if (rc != SLOTD_CLIENT_OK) {
        free(c);
        return slotd__refuse(rc, msg, NULL, err);
    }
    grpc_init();
    rc = client_creds_new(c, &c->o, msg, sizeof(msg));
    c->o.tls_ca_file = c->o.tls_cert_file = c->o.tls_key_file = c->o.tls_server_name = NULL;
    if (rc != SLOTD_CLIENT_OK) {
        grpc_shutdown();
        free(c);
        return slotd__refuse(rc, msg, NULL, err);
    }
    pthread_mutex_init(&c->lock, NULL);
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
        seed = (uint64_t)client_now_ns() ^ ((uint64_t)getpid() << 32);
    c->rng = seed;
    *out = c;
    return SLOTD_CLIENT_OK;
}

void slotd_client_destroy(struct slotd_client *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->channel_count; i++)
        grpc_channel_destroy(c->channels[i].channel);
    grpc_channel_credentials_release(c->creds);
    slotd_route_destroy(c->route);
    pthread_mutex_destroy(&c->lock);
    free(c);
    grpc_shutdown();
}

uint64_t slotd_client_last_revision(const struct slotd_client *c)
{
    return __atomic_load_n(&c->last_revision, __ATOMIC_ACQUIRE);
}

void slotd_client_observe_revision(struct slotd_client *c, uint64_t revision)
{
    uint64_t have = __atomic_load_n(&c->last_revision, __ATOMIC_ACQUIRE);
    while (revision > have && !__atomic_compare_exchange_n(&c->last_revision, &have, revision, true,
                                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
}

/* The channel to address, opened on first use; NULL when the channel table is full. */
static grpc_channel *client_channel(struct slotd_client *c, const char *address)
{
    grpc_channel *ch = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->channel_count && !ch; i++)
        if (strcmp(c->channels[i].address, address) == 0)
            ch = c->channels[i].channel;
    if (!ch && c->channel_count < CLIENT_CHANNELS_MAX) {
        ch = slotd_call_channel_create(address, c->creds, c->server_name, true);
        struct client_channel *slot = &c->channels[c->channel_count++];
        snprintf(slot->address, sizeof(slot->address), "%s", address);
        slot->channel = ch;
    }
    pthread_mutex_unlock(&c->lock);
    return ch;
}

/* ---- one unary call -------------------------------------------------------------------- */

/* address, method, req, st: borrowed for the call. One unary call bounded by deadline_ms.
 * Returns SLOTD_CLIENT_OK with *body set (caller frees with grpc_slice_unref()), or the error
 * its status means with st filled in (st->message holds the server's text only). */
static int client_unary(struct slotd_client *c, const char *address, const char *method,
                        const uint8_t *req, size_t req_len, grpc_slice *body,
                        struct slotd_status *st)
{
    slotd_call_status_reset(st);
    snprintf(st->address, sizeof(st->address), "%s", address);
    *body = grpc_empty_slice();
    grpc_channel *ch = client_channel(c, address);
    if (!ch) {
        st->grpc_status = GRPC_STATUS_UNAVAILABLE;
        snprintf(st->message, sizeof(st->message), "more than %d node addresses in use",
                 CLIENT_CHANNELS_MAX);
        return SLOTD_CLIENT_EUNAVAILABLE;
    }
    char authorization[sizeof(c->authorization)];
    pthread_mutex_lock(&c->lock);
    memcpy(authorization, c->authorization, sizeof(authorization));
    pthread_mutex_unlock(&c->lock);
    grpc_byte_buffer *recv = NULL;
    slotd_call_unary(ch, method, req, req_len, c->o.deadline_ms, authorization, &recv, st);
    memset(authorization, 0, sizeof(authorization));
    int rc = slotd__err_of_status(st);
    if (rc == SLOTD_CLIENT_OK) {
        if (!slotd_call_flatten(recv, body)) {
            rc = SLOTD_CLIENT_EMALFORMED;
            snprintf(st->message, sizeof(st->message), "OK status without a response message");
        }
    }
    if (recv)
        grpc_byte_buffer_destroy(recv);
    return rc;
}

/* ---- route ----------------------------------------------------------------------------- */

/* The endpoints, starting at the one that answered last, into out (at most max). c->lock held. */
static size_t client_endpoints_locked(struct slotd_client *c, char (*out)[SLOTD_ADDRESS_LEN + 1],
                                      size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < c->endpoint_count && n < max; i++)
        snprintf(out[n++], SLOTD_ADDRESS_LEN + 1, "%s",
                 c->endpoints[(c->next_endpoint + i) % c->endpoint_count]);
    return n;
}

/* Candidate addresses for a RouteSnapshot: endpoints (starting at the one that answered last)
 * then the cached route's nodes. Returns how many were written to out. */
static size_t client_route_sources(struct slotd_client *c, char (*out)[SLOTD_ADDRESS_LEN + 1],
                                   size_t max)
{
    pthread_mutex_lock(&c->lock);
    size_t n = client_endpoints_locked(c, out, max);
    for (size_t i = 0; c->route && i < c->route->node_count && n < max; i++) {
        bool dup = false;
        for (size_t k = 0; k < n && !dup; k++)
            dup = strcmp(out[k], c->route->nodes[i].address) == 0;
        if (!dup && c->route->nodes[i].address[0])
            snprintf(out[n++], SLOTD_ADDRESS_LEN + 1, "%s", c->route->nodes[i].address);
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* Installs r (ownership transfers) as the route cache; r->source names the node that sent it. */
static void client_route_install(struct slotd_client *c, struct slotd_route *r)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->endpoint_count; i++)
        if (strcmp(c->endpoints[i], r->source) == 0)
            c->next_endpoint = i;
    slotd_route_destroy(c->route);
    c->route = r;
    c->route_fetched_ns = client_now_ns();
    c->route_stale = false;
    pthread_mutex_unlock(&c->lock);
}

/* Fetches the route from the first source that answers and installs it. On success *copy (if
 * not NULL) receives a copy (caller frees with slotd_route_destroy()). */
static int client_route_refresh(struct slotd_client *c, struct slotd_route **copy,
                                struct slotd_status *st)
{
    char(*sources)[SLOTD_ADDRESS_LEN + 1] = malloc(CLIENT_CHANNELS_MAX * sizeof(*sources));
    if (!sources) {
        slotd_call_status_reset(st);
        snprintf(st->message, sizeof(st->message), "route: out of memory");
        return SLOTD_CLIENT_ENOMEM;
    }
    size_t n = client_route_sources(c, sources, CLIENT_CHANNELS_MAX);
    int rc = SLOTD_CLIENT_EUNAVAILABLE;
    char failures[SLOTD_STATUS_MESSAGE_LEN] = "";
    /* a route built from the newest cluster state this client has seen, or later */
    Slotd__V1__RouteSnapshotRequest req = SLOTD__V1__ROUTE_SNAPSHOT_REQUEST__INIT;
    req.min_revision = slotd_client_last_revision(c);
    uint8_t req_buf[16];
    size_t req_len = slotd__v1__route_snapshot_request__pack(&req, req_buf);
    for (size_t i = 0; i < n; i++) {
        grpc_slice body;
        rc = client_unary(c, sources[i], CLIENT_METHOD_ROUTE, req_buf, req_len, &body, st);
        if (rc == SLOTD_CLIENT_OK) {
            struct slotd_route *r = NULL;
            rc = slotd__route_decode(GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), &r,
                                     st->message, sizeof(st->message));
            grpc_slice_unref(body);
            if (rc == SLOTD_CLIENT_OK) {
                snprintf(r->source, sizeof(r->source), "%s", sources[i]);
                slotd_client_observe_revision(c, r->revision);
                if (copy && !(*copy = slotd__route_copy(r)))
                    rc = SLOTD_CLIENT_ENOMEM;
                client_route_install(c, r);
                break;
            }
        }
        size_t used = strlen(failures);
        snprintf(failures + used, sizeof(failures) - used, "%s%s: %s%s%s", used ? "; " : "",
                 sources[i], slotd_grpc_status_name(st->grpc_status), st->message[0] ? " " : "",
                 st->message);
    }
    if (rc != SLOTD_CLIENT_OK)
        snprintf(st->message, sizeof(st->message), "route snapshot from every endpoint failed: %s",
                 failures);
    free(sources);
    return rc;
}

/* Whether the cache should be refetched before routing a call (lock held). */
static bool client_route_due(struct slotd_client *c, int64_t now)
{
    if (!c->route)
        return now - c->route_attempt_ns >= (int64_t)CLIENT_ROUTE_REFETCH_MIN_MS * 1000000;
    if (c->route_stale)
        return now - c->route_attempt_ns >= (int64_t)CLIENT_ROUTE_REFETCH_MIN_MS * 1000000;
    return c->o.route_refresh_ms > 0 &&
           now - c->route_fetched_ns >= (int64_t)c->o.route_refresh_ms * 1000000;
}

/* Writes into address where a call for hash_slot goes: its group's leader per the route
 * (fetched or refreshed when due), else (no route, or hash_slot < 0: a call any node serves) an
 * endpoint chosen round robin. */
static void client_pick_address(struct slotd_client *c, int hash_slot, char *address)
{
    int64_t now = client_now_ns();
    pthread_mutex_lock(&c->lock);
    bool due = client_route_due(c, now);
    if (due)
        c->route_attempt_ns = now;
    pthread_mutex_unlock(&c->lock);
    if (due) {
        struct slotd_status ignored;
        client_route_refresh(c, NULL, &ignored); /* the call itself reports what fails */
    }
    pthread_mutex_lock(&c->lock);
    const char *leader = c->route && hash_slot >= 0
                             ? slotd__route_slot_leader_address(c->route, (unsigned)hash_slot)
                             : NULL;
    if (leader)
        snprintf(address, SLOTD_ADDRESS_LEN + 1, "%s", leader);
    else
        snprintf(address, SLOTD_ADDRESS_LEN + 1, "%s",
                 c->endpoints[(c->next_endpoint + (c->rng++)) % c->endpoint_count]);
    pthread_mutex_unlock(&c->lock);
}

static void client_route_mark_stale(struct slotd_client *c, const struct slotd_status *st)
{
    pthread_mutex_lock(&c->lock);
    if (c->route && st->has_detail && st->leader_node_id != 0 &&
        slotd__route_apply_hint(c->route, st->leader_group_id, st->leader_node_id,
                                st->leader_address, st->leader_term))
        ; /* the hint is newer than what we had: use it, no refetch needed */
    else
        c->route_stale = true;
    pthread_mutex_unlock(&c->lock);
}

int slotd_client_route_fetch(struct slotd_client *c, struct slotd_route **out,
                             struct slotd_error **err)
{
    struct slotd_status st;
    *out = NULL;
    pthread_mutex_lock(&c->lock);
    c->route_attempt_ns = client_now_ns();
    pthread_mutex_unlock(&c->lock);
    int rc = client_route_refresh(c, out, &st);
    if (rc != SLOTD_CLIENT_OK) {
        char text[SLOTD_STATUS_MESSAGE_LEN];
        snprintf(text, sizeof(text), "route: %s", st.message);
        snprintf(st.message, sizeof(st.message), "%s", text);
    }
    return slotd__finish(rc, &st, 1, err);
}

/* ---- routed calls ---------------------------------------------------------------------- */

/* Sends req (borrowed) to the leader of the group owning hash_slot (< 0: to an endpoint) with
 * redirects and retries. On success *body holds the response (caller frees with
 * grpc_slice_unref()). op names the call in messages ("put"). */
static int client_routed_call(struct slotd_client *c, const char *op, const char *method,
                              int hash_slot, const uint8_t *req, size_t req_len, bool idempotent,
                              grpc_slice *body, unsigned *attempts, struct slotd_status *st)
{
    unsigned retries = 0, redirects = 0;
    char address[SLOTD_ADDRESS_LEN + 1];
    char hint[SLOTD_ADDRESS_LEN + 1] = "";
    int rc;
    *attempts = 0;
    for (;;) {
        if (hint[0])
            snprintf(address, sizeof(address), "%s", hint);
        else
            client_pick_address(c, hash_slot, address);
        hint[0] = '\0';
        (*attempts)++;
        rc = client_unary(c, address, method, req, req_len, body, st);
        if (rc == SLOTD_CLIENT_OK || rc == SLOTD_CLIENT_EMALFORMED)
            break;
        enum slotd__action action = slotd__action_decide(st, idempotent);
        if (action == SLOTD__ACTION_REDIRECT && redirects < CLIENT_REDIRECTS_MAX) {
            redirects++;
            client_route_mark_stale(c, st);
            if (st->leader_address[0] && strcmp(st->leader_address, address) != 0)
                snprintf(hint, sizeof(hint), "%s", st->leader_address);
            else
                client_sleep_ms(slotd__backoff_ms(redirects, st->retry_after_ms));
            continue;
        }
        if (action == SLOTD__ACTION_RETRY && retries < (unsigned)c->o.max_retries) {
            retries++;
            client_route_mark_stale(c, st);
            client_sleep_ms(slotd__backoff_ms(retries, st->retry_after_ms));
            continue;
        }
        break;
    }
    char text[SLOTD_STATUS_MESSAGE_LEN];
    if (rc != SLOTD_CLIENT_OK) {
        snprintf(text, sizeof(text), "%s: %s: %s", op, slotd_grpc_status_name(st->grpc_status),
                 st->message[0] ? st->message : slotd_client_strerror(rc));
        size_t used = strlen(text);
        if (st->has_detail && st->field[0])
            snprintf(text + used, sizeof(text) - used, " (field %s, limit %llu)", st->field,
                     (unsigned long long)st->limit);
        used = strlen(text);
        snprintf(text + used, sizeof(text) - used, " [%s, %u attempt%s]", address, *attempts,
                 *attempts == 1 ? "" : "s");
        snprintf(st->message, sizeof(st->message), "%s", text);
    }
    return rc;
}

/* ---- writes ---------------------------------------------------------------------------- */

void slotd_write_result_destroy(struct slotd_write_result *r)
{
    if (!r)
        return;
    free(r->current_value);
    free(r);
}

static void client_request_id(struct slotd_client *c, uint8_t *id, size_t len)
{
    if (getrandom(id, len, 0) == (ssize_t)len)
        return;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < len; i++) {
        uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        id[i] = (uint8_t)(z ^ (z >> 31));
    }
    pthread_mutex_unlock(&c->lock);
}

int slotd__pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    *buf = malloc(*len ? *len : 1);
    if (!*buf)
        return SLOTD_CLIENT_ENOMEM;
    protobuf_c_message_pack(m, *buf);
    return SLOTD_CLIENT_OK;
}

Slotd__V1__ProposeResponse *slotd__propose_response_unpack(grpc_slice body, uint64_t *applied_index,
                                                           uint32_t *group_id, uint64_t *term,
                                                           bool *deduplicated)
{
    Slotd__V1__ProposeResponse *m = slotd__v1__propose_response__unpack(
        NULL, GRPC_SLICE_LENGTH(body), GRPC_SLICE_START_PTR(body));
    if (!m)
        return NULL;
    *applied_index = m->applied_index;
    *group_id = m->group_id;
    *term = m->term;
    *deduplicated = m->deduplicated;
    return m;
}

void slotd__client_request_id_pick(struct slotd_client *c, bool none, const uint8_t *id,
                                   size_t id_len, uint8_t *out, size_t *out_len)
{
    if (none) {
        *out_len = 0;
    } else if (id) {
        memcpy(out, id, id_len);
        *out_len = id_len;
    } else {
        client_request_id(c, out, SLOTD_REQUEST_ID_LEN_DEFAULT);
        *out_len = SLOTD_REQUEST_ID_LEN_DEFAULT;
    }
}

/* Packs w as a ProposeRequest (no_forward) into *buf (caller frees with free()). */
static int client_write_encode(const struct slotd_write *w, const struct slotd_write_result *r,
                               uint8_t **buf, size_t *len)
{
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__PutCommand put = SLOTD__V1__PUT_COMMAND__INIT;
    Slotd__V1__DeleteCommand del = SLOTD__V1__DELETE_COMMAND__INIT;
    Slotd__V1__CompareAndSetCommand cas = SLOTD__V1__COMPARE_AND_SET_COMMAND__INIT;
    ProtobufCBinaryData key = {w->key_len, (uint8_t *)w->key};
    ProtobufCBinaryData value = {w->value_len, (uint8_t *)w->value};
    m.no_forward = true;
    m.request_id.len = r->request_id_len;
    m.request_id.data = (uint8_t *)r->request_id;
    switch (w->kind) {
    case SLOTD_WRITE_PUT:
        put.key = key;
        put.value = value;
        put.lease = w->lease;
        m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
        m.put = &put;
        break;
    case SLOTD_WRITE_DELETE:
        del.key = key;
        m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_DELETE;
        m.delete_ = &del;
        break;
    default:
        cas.key = key;
        cas.value = value;
        cas.expected_version = w->expected_version;
        cas.delete_ = w->cas_delete;
        m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_COMPARE_AND_SET;
        m.compare_and_set = &cas;
        break;
    }
    return slotd__pack(&m.base, buf, len);
}

/* Fills out from a ProposeResponse in body; ECAS_MISMATCH for a failed compare-and-set. */
static int client_write_decode(const struct slotd_write *w, grpc_slice body,
                               struct slotd_write_result *out)
{
    Slotd__V1__ProposeResponse *m = slotd__propose_response_unpack(
        body, &out->applied_index, &out->group_id, &out->term, &out->deduplicated);
    if (!m)
        return SLOTD_CLIENT_EMALFORMED;
    int rc = SLOTD_CLIENT_OK;
    if (w->kind == SLOTD_WRITE_PUT && m->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT) {
        out->version = m->put->version;
        out->prev_version = m->put->prev_version;
    } else if (w->kind == SLOTD_WRITE_DELETE &&
               m->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_DELETE) {
        out->deleted = m->delete_->deleted;
        out->prev_version = m->delete_->prev_version;
    } else if (w->kind == SLOTD_WRITE_CAS &&
               m->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_COMPARE_AND_SET) {
        const Slotd__V1__CompareAndSetResult *r = m->compare_and_set;
        out->cas_succeeded = r->succeeded;
        out->version = r->version;
        if (!r->succeeded && r->current_value.len > 0) {
            out->current_value = malloc(r->current_value.len);
            if (!out->current_value)
                rc = SLOTD_CLIENT_ENOMEM;
            else {
                memcpy(out->current_value, r->current_value.data, r->current_value.len);
                out->current_value_len = r->current_value.len;
            }
        }
        if (rc == SLOTD_CLIENT_OK && !r->succeeded)
            rc = SLOTD_CLIENT_ECAS_MISMATCH;
    } else {
        rc = SLOTD_CLIENT_EMALFORMED;
    }
    slotd__v1__propose_response__free_unpacked(m, NULL);
    return rc;
}

/* Checks what the server cannot see (the request id the client would send). */
static int client_write_check(const struct slotd_write *w, struct slotd_status *st)
{
    if (w->kind != SLOTD_WRITE_PUT && w->kind != SLOTD_WRITE_DELETE && w->kind != SLOTD_WRITE_CAS) {
        snprintf(st->message, sizeof(st->message), "write: unknown kind %d", (int)w->kind);
        return SLOTD_CLIENT_EINVAL;
    }
    if (w->request_id && !w->no_request_id &&
        (w->request_id_len == 0 || w->request_id_len > SLOTD_REQUEST_ID_LEN_MAX)) {
        snprintf(st->message, sizeof(st->message), "write: request id of %zu bytes is not in 1..%d",
                 w->request_id_len, SLOTD_REQUEST_ID_LEN_MAX);
        snprintf(st->field, sizeof(st->field), "request_id");
        return SLOTD_CLIENT_EINVAL;
    }
    if (w->lease != 0 && w->kind != SLOTD_WRITE_PUT) {
        snprintf(st->message, sizeof(st->message),
                 "%s: a lease is only for puts (lease %llu given)",
                 w->kind == SLOTD_WRITE_DELETE ? "delete" : "cas", (unsigned long long)w->lease);
        snprintf(st->field, sizeof(st->field), "lease");
        return SLOTD_CLIENT_EINVAL;
    }
    if ((!w->key && w->key_len) || (!w->value && w->value_len)) {
        snprintf(st->message, sizeof(st->message),
                 "write: NULL key or value with a non-zero length");
        return SLOTD_CLIENT_EINVAL;
    }
    return SLOTD_CLIENT_OK;
}

static const char *client_write_op(enum slotd_write_kind kind)
{
    return kind == SLOTD_WRITE_PUT ? "put" : kind == SLOTD_WRITE_DELETE ? "delete" : "cas";
}

/* Sends w; fills out (borrowed for the call) and st. */
static int client_write(struct slotd_client *c, const struct slotd_write *w,
                        struct slotd_write_result *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    int rc = client_write_check(w, st);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    slotd__client_request_id_pick(c, w->no_request_id, w->request_id, w->request_id_len,
                                  out->request_id, &out->request_id_len);
    uint8_t *req;
    size_t req_len;
    rc = client_write_encode(w, out, &req, &req_len);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    grpc_slice body;
    rc = client_routed_call(c, client_write_op(w->kind), CLIENT_METHOD_PROPOSE,
                            (int)slotd_hash_slot(w->key, w->key_len), req, req_len,
                            out->request_id_len > 0, &body, &out->attempts, st);
    free(req);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    snprintf(out->address, sizeof(out->address), "%s", st->address);
    rc = client_write_decode(w, body, out);
    grpc_slice_unref(body);
    if (rc == SLOTD_CLIENT_ECAS_MISMATCH)
        snprintf(st->message, sizeof(st->message),
                 "cas: version mismatch: expected %llu, current version %llu",
                 (unsigned long long)w->expected_version, (unsigned long long)out->version);
    else if (rc == SLOTD_CLIENT_EMALFORMED)
        snprintf(st->message, sizeof(st->message), "%s: response is not a matching ProposeResponse",
                 client_write_op(w->kind));
    return rc;
}

/* Applies wo (NULL: defaults) to w, allocates *out and sends w. */
static int client_write_run(struct slotd_client *c, struct slotd_write *w,
                            const struct slotd_write_options *wo, struct slotd_write_result **out,
                            struct slotd_error **err)
{
    *out = NULL;
    if (wo) {
        w->request_id = wo->has_request_id ? wo->request_id : NULL;
        w->request_id_len = wo->request_id_len;
        w->no_request_id = wo->no_request_id;
        w->lease = wo->lease;
    }
    struct slotd_write_result *r = calloc(1, sizeof(*r));
    if (!r)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "write: out of memory", NULL, err);
    struct slotd_status st;
    int rc = client_write(c, w, r, &st);
    slotd__finish(rc, &st, r->attempts, err);
    if (rc == SLOTD_CLIENT_OK || rc == SLOTD_CLIENT_ECAS_MISMATCH)
        *out = r;
    else
        slotd_write_result_destroy(r);
    return rc;
}

int slotd_client_put(struct slotd_client *c, const void *key, size_t klen, const void *val,
                     size_t vlen, const struct slotd_write_options *wo,
                     struct slotd_write_result **out, struct slotd_error **err)
{
    struct slotd_write w = {
        .kind = SLOTD_WRITE_PUT, .key = key, .key_len = klen, .value = val, .value_len = vlen};
    return client_write_run(c, &w, wo, out, err);
}

int slotd_client_delete(struct slotd_client *c, const void *key, size_t klen,
                        const struct slotd_write_options *wo, struct slotd_write_result **out,
                        struct slotd_error **err)
{
    struct slotd_write w = {.kind = SLOTD_WRITE_DELETE, .key = key, .key_len = klen};
    return client_write_run(c, &w, wo, out, err);
}

int slotd_client_cas(struct slotd_client *c, const void *key, size_t klen,
                     uint64_t expected_version, const void *val, size_t vlen, bool del,
                     const struct slotd_write_options *wo, struct slotd_write_result **out,
                     struct slotd_error **err)
{
    struct slotd_write w = {.kind = SLOTD_WRITE_CAS,
                            .key = key,
                            .key_len = klen,
                            .value = val,
                            .value_len = vlen,
                            .expected_version = expected_version,
                            .cas_delete = del};
    return client_write_run(c, &w, wo, out, err);
}

/* ---- reads ----------------------------------------------------------------------------- */

void slotd_value_destroy(struct slotd_value *v)
{
    if (!v)
        return;
    free(v->value);
    free(v);
}

static int client_read_decode(grpc_slice body, struct slotd_value *out)
{
    Slotd__V1__ReadResponse *m =
        slotd__v1__read_response__unpack(NULL, GRPC_SLICE_LENGTH(body), GRPC_SLICE_START_PTR(body));
    if (!m)
        return SLOTD_CLIENT_EMALFORMED;
    int rc = SLOTD_CLIENT_OK;
    if (m->result_case != SLOTD__V1__READ_RESPONSE__RESULT_GET) {
        rc = SLOTD_CLIENT_EMALFORMED;
        goto done;
    }
    out->applied_index = m->applied_index;
    out->group_id = m->group_id;
    out->term = m->term;
    out->found = m->get->found;
    out->version = m->get->version;
    if (m->get->value.len > 0) {
        out->value = malloc(m->get->value.len);
        if (!out->value) {
            rc = SLOTD_CLIENT_ENOMEM;
            goto done;
        }
        memcpy(out->value, m->get->value.data, m->get->value.len);
        out->value_len = m->get->value.len;
    }
done:
    slotd__v1__read_response__free_unpacked(m, NULL);
    return rc;
}

/* One get of key; fills out (borrowed for the call) and st. */
static int client_get(struct slotd_client *c, const void *key, size_t klen, int consistency,
                      uint64_t min_applied_index, struct slotd_value *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    if (consistency < SLOTD_CONSISTENCY_LINEARIZABLE || consistency > SLOTD_CONSISTENCY_LOCAL ||
        (!key && klen)) {
        snprintf(st->message, sizeof(st->message),
                 "get: consistency %d is not 0..2 or the key is NULL", consistency);
        snprintf(st->field, sizeof(st->field), "%s", key || !klen ? "consistency" : "key");
        return SLOTD_CLIENT_EINVAL;
    }
    Slotd__V1__ReadRequest m = SLOTD__V1__READ_REQUEST__INIT;
    Slotd__V1__GetQuery get = SLOTD__V1__GET_QUERY__INIT;
    get.key.len = klen;
    get.key.data = (uint8_t *)key;
    m.consistency = (Slotd__V1__Consistency)consistency;
    m.min_applied_index = min_applied_index;
    m.no_forward = true;
    m.query_case = SLOTD__V1__READ_REQUEST__QUERY_GET;
    m.get = &get;
    uint8_t *req;
    size_t len;
    if (slotd__pack(&m.base, &req, &len) != SLOTD_CLIENT_OK)
        return SLOTD_CLIENT_ENOMEM;
    grpc_slice body;
    int rc = client_routed_call(c, "get", CLIENT_METHOD_READ, (int)slotd_hash_slot(key, klen), req,
                                len, true, &body, &out->attempts, st);
    free(req);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    snprintf(out->address, sizeof(out->address), "%s", st->address);
    rc = client_read_decode(body, out);
    grpc_slice_unref(body);
    if (rc == SLOTD_CLIENT_EMALFORMED)
        snprintf(st->message, sizeof(st->message),
                 "get: response is not a ReadResponse with a get result");
    return rc;
}

int slotd_client_get(struct slotd_client *c, const void *key, size_t klen,
                     const struct slotd_read_options *ro, struct slotd_value **out,
                     struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_value, "get", slotd_value_destroy, out, err,
                       client_get(c, key, klen,
                                  ro ? ro->consistency : SLOTD_CONSISTENCY_LINEARIZABLE,
                                  ro ? ro->min_applied_index : 0, r, &st));
}

/* ---- health ---------------------------------------------------------------------------- */

const char *slotd_health_status_name(int serving)
{
    return slotd_call_health_status_name(serving, "UNKNOWN");
}

int slotd_client_health_check(struct slotd_client *c, const char *address, int *serving,
                              struct slotd_error **err)
{
    struct slotd_status local;
    struct slotd_status *st = &local;
    *serving = SLOTD_HEALTH_UNKNOWN;
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    req.service = (char *)"";
    uint8_t buf[16];
    size_t len = grpc__health__v1__health_check_request__pack(&req, buf);
    grpc_slice body;
    int rc = client_unary(c, address, CLIENT_METHOD_HEALTH, buf, len, &body, st);
    if (rc != SLOTD_CLIENT_OK) {
        char text[SLOTD_STATUS_MESSAGE_LEN];
        snprintf(text, sizeof(text), "health: %s: %s [%s]", slotd_grpc_status_name(st->grpc_status),
                 st->message[0] ? st->message : slotd_client_strerror(rc), address);
        snprintf(st->message, sizeof(st->message), "%s", text);
        return slotd__finish(rc, st, 1, err);
    }
    Grpc__Health__V1__HealthCheckResponse *m = grpc__health__v1__health_check_response__unpack(
        NULL, GRPC_SLICE_LENGTH(body), GRPC_SLICE_START_PTR(body));
    grpc_slice_unref(body);
    if (!m) {
        snprintf(st->message, sizeof(st->message), "health: response does not decode [%s]",
                 address);
        return slotd__finish(SLOTD_CLIENT_EMALFORMED, st, 1, err);
    }
    *serving = (int)m->status;
    grpc__health__v1__health_check_response__free_unpacked(m, NULL);
    return SLOTD_CLIENT_OK;
}

/* ---- hooks for client_admin.c ---------------------------------------------------------- */

int slotd__client_unary(struct slotd_client *c, const char *address, const char *method,
                        const uint8_t *req, size_t req_len, uint8_t **body, size_t *body_len,
                        struct slotd_status *st)
{
    grpc_slice s;
    *body = NULL;
    *body_len = 0;
    int rc = client_unary(c, address, method, req, req_len, &s, st);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    size_t n = GRPC_SLICE_LENGTH(s);
    uint8_t *copy = malloc(n + 1); /* + 1: callers may treat the body as a C string */
    if (!copy) {
        grpc_slice_unref(s);
        snprintf(st->message, sizeof(st->message), "out of memory for a %zu-byte response", n);
        return SLOTD_CLIENT_ENOMEM;
    }
    memcpy(copy, GRPC_SLICE_START_PTR(s), n);
    copy[n] = '\0';
    grpc_slice_unref(s);
    *body = copy;
    *body_len = n;
    return SLOTD_CLIENT_OK;
}

size_t slotd__client_endpoints(struct slotd_client *c, char (*out)[SLOTD_ADDRESS_LEN + 1],
                               size_t max)
{
    pthread_mutex_lock(&c->lock);
    size_t n = client_endpoints_locked(c, out, max);
    pthread_mutex_unlock(&c->lock);
    return n;
}

int slotd__client_max_retries(const struct slotd_client *c)
{
    return c->o.max_retries;
}

void slotd__sleep_ms(int ms)
{
    client_sleep_ms(ms);
}

int slotd_client_set_token(struct slotd_client *c, const char *token)
{
    size_t n = token ? strlen(token) : 0;
    if (n > SLOTD_CLIENT_TOKEN_MAX)
        return SLOTD_CLIENT_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (token[i] < 0x21 || token[i] > 0x7e)
            return SLOTD_CLIENT_EINVAL;
    pthread_mutex_lock(&c->lock);
    if (n == 0)
        c->authorization[0] = '\0';
    else
        snprintf(c->authorization, sizeof(c->authorization), "Bearer %s", token);
    pthread_mutex_unlock(&c->lock);
    return SLOTD_CLIENT_OK;
}

/* ---- what client_kv.c and client_watch.c use from client.c ---- */

int slotd__client_routed_call(struct slotd_client *c, const char *op, const char *method,
                              const void *key, size_t klen, const uint8_t *req, size_t req_len,
                              bool idempotent, grpc_slice *body, unsigned *attempts,
                              struct slotd_status *st)
{
    return client_routed_call(c, op, method, key ? (int)slotd_hash_slot(key, klen) : -1, req,
                              req_len, idempotent, body, attempts, st);
}

int slotd__client_slot_call(struct slotd_client *c, const char *op, const char *method,
                            unsigned hash_slot, const uint8_t *req, size_t req_len, bool idempotent,
                            grpc_slice *body, unsigned *attempts, struct slotd_status *st)
{
    assert(hash_slot < SLOTD_HASH_SLOTS);
    return client_routed_call(c, op, method, (int)hash_slot, req, req_len, idempotent, body,
                              attempts, st);
}

void slotd__client_request_id(struct slotd_client *c, uint8_t *id, size_t len)
{
    client_request_id(c, id, len);
}

grpc_channel *slotd__client_channel(struct slotd_client *c, const char *address)
{
    return client_channel(c, address);
}

void slotd__client_authorization(struct slotd_client *c, char *out, size_t len)
{
    pthread_mutex_lock(&c->lock);
    snprintf(out, len, "%s", c->authorization);
    pthread_mutex_unlock(&c->lock);
}
