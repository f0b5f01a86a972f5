/* conn.c - the server's connection table: calls in flight per connection (max_streams_per_conn)
 * and the number of connections served at once (max_connections), both answered RESOURCE_EXHAUSTED.
 *
 * gRPC core 1.51 has no connection limit (grpc.max_allowed_incoming_connections came in 1.62) and
 * its public API says nothing when a connection opens or closes; grpc_server_add_channel_from_fd
 * would let us accept() ourselves, but only for plaintext. So connections are counted where calls
 * are dispatched: a connection is the peer address gRPC gives each call ("ipv4:10.0.0.7:51234",
 * one per TCP connection), live while it has a call in flight and for conn_idle_ms after its last
 * one. The server closes a connection idle that long itself (GRPC_ARG_MAX_CONNECTION_IDLE_MS), so
 * an entry never outlives its connection by more than conn_idle_ms + RPC__CONN_GRACE_MS; it may
 * count a connection the client already closed for that long. A call on a connection the table
 * cannot take is refused; the TCP connection itself was already accepted by gRPC. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/support/alloc.h>

#include "rpc_internal.h"

#define RPC__CONN_GRACE_MS 1000

struct rpc__conn {
    char peer[RPC__CONN_PEER_MAX]; /* "" = free */
    uint32_t calls;                /* calls holding this entry (not yet freed) */
    int64_t last_ms;               /* monotonic ms of its last call's start or end */
    int32_t next;                  /* bucket chain / free list, -1 = end */
};

struct rpc__conns {
    pthread_mutex_t mu; /* guards everything below */
    size_t cap;         /* max_connections entries */
    size_t n_buckets;   /* a power of two >= 2 * cap */
    int32_t *buckets;   /* n_buckets chain heads, -1 = empty */
    int32_t free_list;
    size_t n_used; /* invariant: n_used <= cap */
    struct rpc__conn entries[];
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t peer_hash(const char *p, size_t mask)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *p; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    }
    return (size_t)h & mask;
}

int rpc__conns_new(size_t cap, struct rpc__conns **out)
{
    if (cap == 0 || cap > INT32_MAX / 4) {
        return -1;
    }
    struct rpc__conns *t = calloc(1, sizeof(*t) + cap * sizeof(t->entries[0]));
    if (t == NULL) {
        return -1;
    }
    t->cap = cap;
    t->n_buckets = 1;
    while (t->n_buckets < 2 * cap) {
        t->n_buckets *= 2;
    }
    t->buckets = malloc(t->n_buckets * sizeof(t->buckets[0]));
    if (t->buckets == NULL || pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t->buckets);
        free(t);
        return -1;
    }
    for (size_t i = 0; i < t->n_buckets; i++) {
        t->buckets[i] = -1;
    }
    for (size_t i = 0; i < cap; i++) {
        t->entries[i].next = i + 1 < cap ? (int32_t)(i + 1) : -1;
    }
    t->free_list = 0;
    *out = t;
    return 0;
}

void rpc__conns_free(struct rpc__conns *t)
{
    if (t == NULL) {
        return;
    }
    pthread_mutex_destroy(&t->mu);
    free(t->buckets);
    free(t);
}

/* Frees every entry idle past the window (t->mu held): its connection is surely closed. */
static void reclaim(struct rpc__conns *t, int64_t idle_ms, int64_t now)
{
    for (size_t b = 0; b < t->n_buckets; b++) {
        int32_t *link = &t->buckets[b];
        while (*link >= 0) {
            struct rpc__conn *e = &t->entries[*link];
            if (e->calls == 0 && now - e->last_ms > idle_ms + RPC__CONN_GRACE_MS) {
                int32_t idx = *link;
                *link = e->next;
                e->peer[0] = '\0';
                e->next = t->free_list;
                t->free_list = idx;
                t->n_used--;
            } else {
                link = &e->next;
            }
        }
    }
}

int rpc__conn_acquire(struct rpc_server *s, struct rpc_call *c, struct slotd_error *err)
{
    struct rpc__conns *t = s->conns;
    char *peer = grpc_call_get_peer(c->call);
    char key[RPC__CONN_PEER_MAX];
    snprintf(key, sizeof(key), "%s", peer != NULL ? peer : "unknown");
    gpr_free(peer);
    int64_t now = mono_ms();
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    size_t b = peer_hash(key, t->n_buckets - 1);
    int32_t idx = t->buckets[b];
    while (idx >= 0 && strcmp(t->entries[idx].peer, key) != 0) {
        idx = t->entries[idx].next;
    }
    if (idx < 0 && t->free_list < 0) {
        reclaim(t, (int64_t)s->opts.conn_idle_ms, now);
    }
    if (idx < 0 && t->free_list >= 0) {
        idx = t->free_list;
        struct rpc__conn *e = &t->entries[idx];
        t->free_list = e->next;
        memcpy(e->peer, key, sizeof(key));
        e->calls = 0;
        e->next = t->buckets[b];
        t->buckets[b] = idx;
        t->n_used++;
    }
    if (idx < 0) {
        slotd_error_set(err, SLOTD_EQUEUE_FULL,
                        "server: %zu connections served, the limit is %zu (max_connections); "
                        "reuse one connection for many calls",
                        t->n_used, t->cap);
        err->retry_after_ms = RPC_QUEUE_FULL_RETRY_MS;
        rc = -1;
    } else if (t->entries[idx].calls >= s->opts.max_streams_per_conn) {
        slotd_error_set(err, SLOTD_EQUEUE_FULL,
                        "server: %u calls in flight on this connection (%s), the limit is %zu "
                        "(max_streams_per_conn)",
                        t->entries[idx].calls, key, s->opts.max_streams_per_conn);
        err->retry_after_ms = RPC_QUEUE_FULL_RETRY_MS;
        t->entries[idx].last_ms = now;
        rc = -1;
    } else {
        t->entries[idx].calls++;
        t->entries[idx].last_ms = now;
        c->conn = idx + 1;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void rpc__conn_release(struct rpc_server *s, struct rpc_call *c)
{
    if (c->conn == 0) {
        return;
    }
    struct rpc__conns *t = s->conns;
    pthread_mutex_lock(&t->mu);
    struct rpc__conn *e = &t->entries[c->conn - 1];
    e->calls--;
    e->last_ms = mono_ms();
    pthread_mutex_unlock(&t->mu);
    c->conn = 0;
}

size_t rpc_server_connections(const struct rpc_server *s)
{
    struct rpc__conns *t = s->conns;
    if (t == NULL) {
        return 0;
    }
    pthread_mutex_lock(&t->mu);
    size_t n = t->n_used;
    pthread_mutex_unlock(&t->mu);
    return n;
}
