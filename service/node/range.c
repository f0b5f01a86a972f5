/* range.c - a Read range page served by fanning out to the slot groups of the next runs of hash slots at once, merged in hash-slot order. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/status.h>

#include "service/node/api.h"
#include "service/route/route.h"
#include "service/slot/slot.h"
#include "slotd/v1/metadata.pb-c.h"

#define RANGE_READ_PATH "/slotd.v1.Metadata/Read"
#define RANGE_DEFAULT_DEADLINE_MS 10000

/* One run of hash slots owned by one group, asked as a single-group page. */
struct fan_part {
    uint16_t start; /* its first hash slot */
    int status;     /* grpc_status_code of the answer */
    char *message;
    uint8_t *resp, *details;
    size_t resp_len, details_len;
    Slotd__V1__ReadResponse *m; /* decoded at merge time */
};

struct fanout {
    pthread_mutex_t mu;
    unsigned left; /* parts not answered yet (mu) */
    struct rpc_call *call;
    Slotd__V1__RangeQuery q; /* the bounds (into bounds) and limit, for cursors */
    uint8_t *bounds;
    size_t n;
    struct fan_part parts[];
};

static int64_t range_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fanout_free(struct fanout *f)
{
    for (size_t i = 0; i < f->n; i++) {
        struct fan_part *p = &f->parts[i];
        free(p->message);
        free(p->resp);
        free(p->details);
        if (p->m != NULL)
            slotd__v1__read_response__free_unpacked(p->m, NULL);
    }
    free(f->bounds);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* Whether cursor c is exactly the start of hash slot hs for f's bounds. */
static bool cursor_is_start(const struct fanout *f, const ProtobufCBinaryData *c, uint16_t hs)
{
    ProtobufCBinaryData want = {0};
    if (slot_range_cursor_make(&f->q, hs, NULL, 0, &want) != 0)
        return false;
    bool same = want.len == c->len && memcmp(want.data, c->data, c->len) == 0;
    free(want.data);
    return same;
}

/* Builds the merged page from the answers, in part order, and answers the call. */
static void fanout_merge(struct fanout *f)
{
    uint32_t limit = f->q.limit ? f->q.limit : SLOT_PAGE_DEFAULT;
    Slotd__V1__RangeEntry **ptrs = calloc(limit, sizeof(*ptrs));
    Slotd__V1__ReadResponse out = SLOTD__V1__READ_RESPONSE__INIT;
    Slotd__V1__RangeResult rr = SLOTD__V1__RANGE_RESULT__INIT;
    struct slotd_error err;
    size_t n = 0, bytes = 0;
    const Slotd__V1__RangeEntry *last = NULL;
    bool more = false;
    int rc = ptrs != NULL ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        struct fan_part *p = &f->parts[i];
        if (p->status == GRPC_STATUS_OK)
            p->m = slotd__v1__read_response__unpack(NULL, p->resp_len, p->resp);
        bool ok = p->m != NULL && p->m->result_case == SLOTD__V1__READ_RESPONSE__RESULT_RANGE;
        if (!ok && i == 0) {
            /* nothing before it: the first run's failure is the answer */
            if (p->status != GRPC_STATUS_OK)
                rpc_call_fail_raw(f->call, p->status, p->message ? p->message : "",
                                  p->details, p->details_len);
            else {
                slotd_error_set(&err, SLOTD_EINTERNAL,
                                "range: group page for hash slot %u did not decode", p->start);
                rpc_call_fail(f->call, &err);
            }
            free(ptrs);
            return;
        }
        if (!ok) { /* the page ends before this run: the client asks for it next */
            more = true;
            rc = slot_range_cursor_make(&f->q, p->start, NULL, 0, &rr.cursor);
            break;
        }
        if (i == 0) {
            out.applied_index = p->m->applied_index;
            out.group_id = p->m->group_id;
            out.term = p->m->term;
        }
        const Slotd__V1__RangeResult *r = p->m->range;
        bool full = false;
        for (size_t k = 0; k < r->n_entries; k++) {
            const Slotd__V1__RangeEntry *e = r->entries[k];
            size_t cost = e->key.len + e->value.len;
            if (n == limit || (n > 0 && bytes + cost > SLOT_RANGE_PAGE_BYTES)) {
                full = true;
                break;
            }
            ptrs[n++] = (Slotd__V1__RangeEntry *)e;
            bytes += cost;
            last = e;
        }
        if (full) { /* continue after the last entry taken */
            more = true;
            rc = slot_range_cursor_make(&f->q, route_hash_slot(last->key.data, last->key.len),
                                        last->key.data, last->key.len, &rr.cursor);
            break;
        }
        if (!r->more)
            break; /* the last hash slot was scanned */
        /* The run ended exactly where the next part starts: go on with it. Anything else (the
         * group's page filled up, or it owns other hash slots than the route said): stop here
         * with its cursor. */
        if (i + 1 < f->n && cursor_is_start(f, &r->cursor, f->parts[i + 1].start))
            continue;
        more = true;
        rr.cursor.data = malloc(r->cursor.len ? r->cursor.len : 1);
        if (rr.cursor.data == NULL)
            rc = -1;
        else {
            memcpy(rr.cursor.data, r->cursor.data, r->cursor.len);
            rr.cursor.len = r->cursor.len;
        }
        break;
    }
    if (rc != 0) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "range: out of memory");
        rpc_call_fail(f->call, &err);
    } else {
        rr.entries = ptrs;
        rr.n_entries = n;
        rr.count = (uint32_t)n;
        rr.more = more;
        out.result_case = SLOTD__V1__READ_RESPONSE__RESULT_RANGE;
        out.range = &rr;
        rpc_call_reply(f->call, &out.base);
    }
    free(rr.cursor.data);
    free(ptrs);
}

/* Records part i's answer (copies: the arguments are borrowed) and, for the last one, merges
 * and frees f. */
static void part_done(struct fanout *f, size_t i, int status, const char *message,
                      const uint8_t *resp, size_t resp_len, const uint8_t *details,
                      size_t details_len)
{
    struct fan_part *p = &f->parts[i];
    p->status = status;
    p->message = message != NULL ? strdup(message) : NULL;
    if (resp_len > 0 && (p->resp = malloc(resp_len)) != NULL) {
        memcpy(p->resp, resp, resp_len);
        p->resp_len = resp_len;
    } else if (status == GRPC_STATUS_OK) {
        p->status = GRPC_STATUS_RESOURCE_EXHAUSTED; /* no answer kept: a failed part */
    }
    if (details_len > 0 && (p->details = malloc(details_len)) != NULL) {
        memcpy(p->details, details, details_len);
        p->details_len = details_len;
    }
    pthread_mutex_lock(&f->mu);
    bool last = --f->left == 0;
    pthread_mutex_unlock(&f->mu);
    if (last) {
        fanout_merge(f);
        fanout_free(f);
    }
}

/* The callback argument of a part's local call. */
struct part_ref {
    struct fanout *f;
    size_t i;
};

static void on_part(void *arg, int status, const char *message, const uint8_t *resp,
                    size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct part_ref ref = *(struct part_ref *)arg;
    free(arg);
    part_done(ref.f, ref.i, status, message, resp, resp_len, details, details_len);
}

int node_range_fanout(struct node_api *api, struct rpc_call *call, const Slotd__V1__ReadRequest *r,
                      struct slotd_error *err)
{
    const Slotd__V1__RangeQuery *q = r->range;
    uint16_t first;
    ProtobufCBinaryData after;
    if (slot_range_cursor_decode(q, &first, &after) != 0) {
        slotd_error_field(err, "range.cursor", 0,
                          "range.cursor: not a cursor this server returned for this range");
        return -1;
    }
    struct route_snapshot *rs = route_table_acquire(api->routes);
    if (rs == NULL || !rs->table_ready) {
        route_snapshot_release(rs);
        slotd_error_set(err, SLOTD_EROUTE_NOT_READY, "range: route not ready");
        err->retry_after_ms = 100;
        return -1;
    }
    /* The runs from the cursor's hash slot on: a new part where the owning group changes. */
    uint16_t starts[NODE_RANGE_FANOUT_RUNS];
    size_t n = 0;
    for (unsigned s = first; s < ROUTE_HASH_SLOTS && n < NODE_RANGE_FANOUT_RUNS; s++)
        if (s == first || rs->slot_group[s] != rs->slot_group[s - 1])
            starts[n++] = (uint16_t)s;
    route_snapshot_release(rs);
    struct fanout *f = calloc(1, sizeof(*f) + n * sizeof(f->parts[0]));
    size_t blen = q->prefix.len + q->start.len + q->end.len;
    if (f == NULL || (f->bounds = malloc(blen ? blen : 1)) == NULL) {
        free(f);
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    pthread_mutex_init(&f->mu, NULL);
    f->call = call;
    f->n = n;
    slotd__v1__range_query__init(&f->q);
    f->q.limit = q->limit;
    const ProtobufCBinaryData *src[3] = {&q->prefix, &q->start, &q->end};
    ProtobufCBinaryData *dst[3] = {&f->q.prefix, &f->q.start, &f->q.end};
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        if (src[i]->len > 0)
            memcpy(f->bounds + at, src[i]->data, src[i]->len);
        *dst[i] = (ProtobufCBinaryData){.len = src[i]->len, .data = f->bounds + at};
        at += src[i]->len;
    }
    /* Each part is a single-group page of the same query from its run's first hash slot (the
     * first one from the client's cursor), sent through this node's own Read handler: routed,
     * forwarded and consistent like any page. */
    uint8_t *reqs[NODE_RANGE_FANOUT_RUNS] = {0};
    size_t lens[NODE_RANGE_FANOUT_RUNS] = {0};
    Slotd__V1__ReadRequest sub = *r;
    Slotd__V1__RangeQuery subq = *q;
    sub.range = &subq;
    sub.no_forward = false;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        f->parts[i].start = starts[i];
        ProtobufCBinaryData c = {0};
        if (i > 0)
            rc = slot_range_cursor_make(&f->q, starts[i], NULL, 0, &c);
        subq.cursor = i == 0 ? q->cursor : c;
        lens[i] = slotd__v1__read_request__get_packed_size(&sub);
        if (rc == 0 && (reqs[i] = malloc(lens[i] ? lens[i] : 1)) == NULL)
            rc = -1;
        if (rc == 0)
            slotd__v1__read_request__pack(&sub, reqs[i]);
        free(c.data);
    }
    if (rc != 0) {
        for (size_t i = 0; i < n; i++)
            free(reqs[i]);
        fanout_free(f);
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    int64_t d = rpc_call_deadline_ms(call);
    int64_t deadline = d == INT64_MAX ? range_now_ms() + RANGE_DEFAULT_DEADLINE_MS : d;
    f->left = (unsigned)n;
    for (size_t i = 0; i < n; i++) {
        /* (the last part's answer merges and frees f: nothing touches f after it is started) */
        uint8_t *req = reqs[i];
        size_t len = lens[i];
        struct part_ref *ref = malloc(sizeof(*ref));
        if (ref == NULL) {
            part_done(f, i, GRPC_STATUS_RESOURCE_EXHAUSTED, "range: out of memory", NULL, 0,
                      NULL, 0);
        } else {
            *ref = (struct part_ref){f, i};
            if (rpc_server_call_local(api->client, RANGE_READ_PATH, deadline, req, len, on_part,
                                      ref) != SLOTD_OK)
                on_part(ref, GRPC_STATUS_INTERNAL, "range: cannot start the group page", NULL, 0,
                        NULL, 0);
        }
        free(req);
    }
    return 0;
}
