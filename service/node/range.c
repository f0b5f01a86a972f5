/* range.c - a listing page that spans hash slots (a Read range, a spanning typed listing) served by
 * fanning out to the slot groups of the next runs of hash slots at once, merged in hash-slot order.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/status.h>

#include "service/node/api.h"
#include "service/route/route.h"
#include "service/slot/slot.h"
#include "slotd/v1/metadata.pb-c.h"

#define FANOUT_READ_PATH "/slotd.v1.Metadata/Read"
#define FANOUT_DEFAULT_DEADLINE_MS 10000

struct fanout;

/* What differs between the listings merged here; everything else goes by the descriptors:
 * the query is ReadRequest's oneof alternative, it has a `cursor` field, and its result (the
 * ReadResponse alternative of the same number) lists its entries in field 1. */
struct fan_kind {
    const char *what; /* "range", or the listing's name, for messages */
    /* The cursor at the start of hash slot hs / right after entry e (out->data malloc'ed). */
    int (*cursor_at)(const struct fanout *f, uint16_t hs, ProtobufCBinaryData *out);
    int (*cursor_after)(const struct fanout *f, const void *e, ProtobufCBinaryData *out);
    /* The bytes entry e counts against bytes_max. */
    size_t (*cost)(const struct fanout *f, const void *e);
    /* A part's result: whether more follows and from which cursor (borrowed from res). */
    void (*page_next)(const ProtobufCMessage *res, bool *more, ProtobufCBinaryData *cursor);
    /* Sets the merged result's paging fields (n entries; cursor borrowed until it is packed). */
    void (*set_next)(ProtobufCMessage *res, size_t n, bool more, ProtobufCBinaryData cursor);
    size_t bytes_max;
};

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
    const struct fan_kind *kind;
    Slotd__V1__ReadRequest *req; /* a copy of the client's request (the bounds, for cursors) */
    const ProtobufCMessage *q;   /* its query */
    const ProtobufCFieldDescriptor *result_fd, *entries_fd; /* ReadResponse alternative, field 1 */
    size_t n;
    struct fan_part parts[];
};

/* Field fd of message m, as a pointer into m. */
static void *field_at(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
    return (char *)m + fd->offset;
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
    if (f->req != NULL)
        slotd__v1__read_request__free_unpacked(f->req, NULL);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* ---- the kinds ---- */

static int range_cursor_at(const struct fanout *f, uint16_t hs, ProtobufCBinaryData *out)
{
    return slot_range_cursor_make(f->req->range, hs, NULL, 0, out);
}

static int range_cursor_after(const struct fanout *f, const void *e, ProtobufCBinaryData *out)
{
    const Slotd__V1__RangeEntry *r = e;
    return slot_range_cursor_make(f->req->range, route_hash_slot(r->key.data, r->key.len),
                                  r->key.data, r->key.len, out);
}

static size_t range_cost(const struct fanout *f, const void *e)
{
    (void)f;
    const Slotd__V1__RangeEntry *r = e;
    return r->key.len + r->value.len;
}

static void range_page_next(const ProtobufCMessage *res, bool *more, ProtobufCBinaryData *cursor)
{
    const Slotd__V1__RangeResult *r = (const void *)res;
    *more = r->more;
    *cursor = r->cursor;
}

static void range_set_next(ProtobufCMessage *res, size_t n, bool more, ProtobufCBinaryData cursor)
{
    Slotd__V1__RangeResult *r = (void *)res;
    r->count = (uint32_t)n;
    r->more = more;
    r->cursor = cursor;
}

static const struct fan_kind range_kind = {
    "range",         range_cursor_at, range_cursor_after,   range_cost,
    range_page_next, range_set_next,  SLOT_RANGE_PAGE_BYTES};

static int list_cursor_at(const struct fanout *f, uint16_t hs, ProtobufCBinaryData *out)
{
    (void)f;
    return slot_list_cursor_make(hs, NULL, 0, out);
}

static int list_cursor_after(const struct fanout *f, const void *e, ProtobufCBinaryData *out)
{
    return slot_list_entry_cursor((unsigned)f->req->query_case, e, out);
}

static size_t list_cost(const struct fanout *f, const void *e)
{
    if (f->entries_fd->type == PROTOBUF_C_TYPE_STRING)
        return strlen(e);
    return protobuf_c_message_get_packed_size(e);
}

/* Typed listings: next_cursor (field 2) is set while more may follow. */
static const ProtobufCFieldDescriptor *next_cursor_fd(const ProtobufCMessage *res)
{
    return protobuf_c_message_descriptor_get_field(res->descriptor, 2);
}

static void list_page_next(const ProtobufCMessage *res, bool *more, ProtobufCBinaryData *cursor)
{
    *cursor = *(const ProtobufCBinaryData *)field_at(res, next_cursor_fd(res));
    *more = cursor->len > 0;
}

static void list_set_next(ProtobufCMessage *res, size_t n, bool more, ProtobufCBinaryData cursor)
{
    (void)n;
    ProtobufCBinaryData none = {0};
    *(ProtobufCBinaryData *)field_at(res, next_cursor_fd(res)) = more ? cursor : none;
}

static const struct fan_kind list_kind = {"listing",           list_cursor_at, list_cursor_after,
                                          list_cost,           list_page_next, list_set_next,
                                          SLOT_LIST_PAGE_BYTES};

/* ---- the merge ---- */

/* Whether cursor c is exactly the start of hash slot hs for f's query. */
static bool cursor_is_start(const struct fanout *f, const ProtobufCBinaryData *c, uint16_t hs)
{
    ProtobufCBinaryData want = {0};
    if (f->kind->cursor_at(f, hs, &want) != 0)
        return false;
    bool same = want.len == c->len && memcmp(want.data, c->data, c->len) == 0;
    free(want.data);
    return same;
}

static int copy_cursor(const ProtobufCBinaryData *from, ProtobufCBinaryData *to)
{
    to->data = malloc(from->len ? from->len : 1);
    if (to->data == NULL)
        return -1;
    memcpy(to->data, from->data, from->len);
    to->len = from->len;
    return 0;
}

/* The first part failed: nothing comes before it, so its failure is the answer. */
static void fail_first(struct fanout *f, const struct fan_part *p)
{
    struct slotd_error err;
    if (p->status != GRPC_STATUS_OK) {
        rpc_call_fail_raw(f->call, p->status, p->message ? p->message : "", p->details,
                          p->details_len);
        return;
    }
    slotd_error_set(&err, SLOTD_EINTERNAL, "%s: group page for hash slot %u did not decode",
                    f->kind->what, p->start);
    rpc_call_fail(f->call, &err);
}

/* Where the merged page stands. */
struct merged {
    void **ptrs; /* borrowed from the parts' results; at most limit */
    size_t n, bytes, limit;
    bool more;
    ProtobufCBinaryData cursor; /* malloc'ed when more */
};

/* Adds part i's entries to mp. Returns 1 when the page is complete, 0 to go on with the next
 * part, -1 when out of memory. */
static int merge_part(struct fanout *f, size_t i, const ProtobufCMessage *res, struct merged *mp)
{
    const struct fan_kind *k = f->kind;
    size_t n = *(const size_t *)((const char *)res + f->entries_fd->quantifier_offset);
    void *const *v = *(void *const *)field_at(res, f->entries_fd);
    for (size_t j = 0; j < n; j++) {
        size_t cost = k->cost(f, v[j]);
        if (mp->n == mp->limit || (mp->n > 0 && mp->bytes + cost > k->bytes_max)) {
            mp->more = true; /* continue after the last entry taken */
            return k->cursor_after(f, mp->ptrs[mp->n - 1], &mp->cursor) == 0 ? 1 : -1;
        }
        mp->ptrs[mp->n++] = v[j];
        mp->bytes += cost;
    }
    bool more;
    ProtobufCBinaryData next;
    k->page_next(res, &more, &next);
    if (!more)
        return 1; /* the last hash slot was scanned */
    /* The run ended exactly where the next part starts: go on with it. Anything else (the
     * group's page filled up, or it owns other hash slots than the route said): stop here with
     * its cursor. */
    if (i + 1 < f->n && cursor_is_start(f, &next, f->parts[i + 1].start))
        return 0;
    mp->more = true;
    return copy_cursor(&next, &mp->cursor) == 0 ? 1 : -1;
}

/* Answers the call with the merged page (ptrs[0..n), more, cursor). */
static void reply_merged(struct fanout *f, const Slotd__V1__ReadResponse *first, struct merged *mp)
{
    const ProtobufCMessageDescriptor *rd = f->result_fd->descriptor;
    _Alignas(max_align_t) uint8_t buf[256];
    struct slotd_error err;
    if (rd->sizeof_message > sizeof(buf)) { /* result messages are a handful of fields */
        slotd_error_set(&err, SLOTD_EINTERNAL, "%s: result too large", f->kind->what);
        rpc_call_fail(f->call, &err);
        return;
    }
    memset(buf, 0, rd->sizeof_message);
    rd->message_init((ProtobufCMessage *)buf);
    ProtobufCMessage *res = (ProtobufCMessage *)buf;
    *(size_t *)((char *)res + f->entries_fd->quantifier_offset) = mp->n;
    *(void ***)field_at(res, f->entries_fd) = mp->ptrs;
    f->kind->set_next(res, mp->n, mp->more, mp->cursor);
    Slotd__V1__ReadResponse out = SLOTD__V1__READ_RESPONSE__INIT;
    out.applied_index = first->applied_index;
    out.group_id = first->group_id;
    out.term = first->term;
    out.result_case = (Slotd__V1__ReadResponse__ResultCase)f->result_fd->id;
    *(ProtobufCMessage **)field_at(&out.base, f->result_fd) = res;
    rpc_call_reply(f->call, &out.base);
}

/* Builds the merged page from the answers, in part order, and answers the call. */
static void fanout_merge(struct fanout *f)
{
    uint32_t limit = *(const uint32_t *)field_at(
        f->q, protobuf_c_message_descriptor_get_field_by_name(f->q->descriptor, "limit"));
    struct merged mp = {.limit = limit ? limit : SLOT_PAGE_DEFAULT};
    mp.ptrs = calloc(mp.limit, sizeof(*mp.ptrs));
    int rc = mp.ptrs != NULL ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        struct fan_part *p = &f->parts[i];
        if (p->status == GRPC_STATUS_OK)
            p->m = slotd__v1__read_response__unpack(NULL, p->resp_len, p->resp);
        bool ok = p->m != NULL && (unsigned)p->m->result_case == f->result_fd->id;
        if (!ok && i == 0) {
            fail_first(f, p);
            free(mp.ptrs);
            return;
        }
        if (!ok) { /* the page ends before this run: the client asks for it next */
            mp.more = true;
            rc = f->kind->cursor_at(f, p->start, &mp.cursor) == 0 ? 1 : -1;
            break;
        }
        rc = merge_part(f, i, *(const ProtobufCMessage **)field_at(&p->m->base, f->result_fd), &mp);
    }
    if (rc < 0) {
        struct slotd_error err;
        slotd_error_set(&err, SLOTD_EINTERNAL, "%s: out of memory", f->kind->what);
        rpc_call_fail(f->call, &err);
    } else {
        reply_merged(f, f->parts[0].m, &mp);
    }
    free(mp.cursor.data);
    free(mp.ptrs);
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
    } else if (status == GRPC_STATUS_OK && resp_len > 0) {
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

/* ---- the fan-out ---- */

/* The first hash slots of the runs from `first` on: a new part where the owning group changes. */
static int runs_from(struct node_api *api, uint16_t first, uint16_t *starts, size_t *n,
                     struct slotd_error *err)
{
    struct route_snapshot *rs = route_table_acquire(api->routes);
    if (rs == NULL || !rs->table_ready) {
        route_snapshot_release(rs);
        slotd_error_set(err, SLOTD_EROUTE_NOT_READY, "listing: route not ready");
        err->retry_after_ms = 100;
        return -1;
    }
    *n = 0;
    for (unsigned s = first; s < ROUTE_HASH_SLOTS && *n < NODE_RANGE_FANOUT_RUNS; s++)
        if (s == first || rs->slot_group[s] != rs->slot_group[s - 1])
            starts[(*n)++] = (uint16_t)s;
    route_snapshot_release(rs);
    return 0;
}

/* Packs part i's request: the client's request with its query's cursor at the run's start (the
 * first part keeps the client's cursor) and forwarding allowed. */
static int part_request(struct fanout *f, size_t i, uint8_t **buf, size_t *len)
{
    const ProtobufCMessageDescriptor *qd = f->q->descriptor;
    _Alignas(max_align_t) uint8_t qbuf[256];
    if (qd->sizeof_message > sizeof(qbuf))
        return -1;
    memcpy(qbuf, f->q, qd->sizeof_message); /* shallow: f->req owns what it points to */
    ProtobufCMessage *q = (ProtobufCMessage *)qbuf;
    ProtobufCBinaryData c = {0};
    if (i > 0 && f->kind->cursor_at(f, f->parts[i].start, &c) != 0)
        return -1;
    if (i > 0)
        *(ProtobufCBinaryData *)field_at(
            q, protobuf_c_message_descriptor_get_field_by_name(qd, "cursor")) = c;
    Slotd__V1__ReadRequest sub = *f->req;
    sub.no_forward = false;
    *(ProtobufCMessage **)field_at(
        &sub.base, protobuf_c_message_descriptor_get_field(&slotd__v1__read_request__descriptor,
                                                           (unsigned)f->req->query_case)) = q;
    *len = slotd__v1__read_request__get_packed_size(&sub);
    *buf = malloc(*len ? *len : 1);
    if (*buf != NULL)
        slotd__v1__read_request__pack(&sub, *buf);
    free(c.data);
    return *buf != NULL ? 0 : -1;
}

/* Fans r out over the runs from hash slot `first` and answers call with the merged page. */
static int fanout_start(struct node_api *api, struct rpc_call *call,
                        const Slotd__V1__ReadRequest *r, const struct fan_kind *kind,
                        uint16_t first, struct slotd_error *err)
{
    uint16_t starts[NODE_RANGE_FANOUT_RUNS];
    size_t n;
    if (runs_from(api, first, starts, &n, err) != 0)
        return -1;
    struct fanout *f = calloc(1, sizeof(*f) + n * sizeof(f->parts[0]));
    size_t rlen = slotd__v1__read_request__get_packed_size(r);
    uint8_t *rbuf = malloc(rlen ? rlen : 1);
    if (f != NULL && rbuf != NULL) { /* a copy the parts' cursors can be made from later */
        slotd__v1__read_request__pack(r, rbuf);
        f->req = slotd__v1__read_request__unpack(NULL, rlen, rbuf);
    }
    free(rbuf);
    if (f == NULL || f->req == NULL) {
        if (f != NULL)
            free(f);
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    pthread_mutex_init(&f->mu, NULL);
    f->call = call;
    f->kind = kind;
    f->n = n;
    unsigned number = (unsigned)r->query_case;
    f->q = *(const ProtobufCMessage **)field_at(
        &f->req->base,
        protobuf_c_message_descriptor_get_field(&slotd__v1__read_request__descriptor, number));
    f->result_fd =
        protobuf_c_message_descriptor_get_field(&slotd__v1__read_response__descriptor, number);
    f->entries_fd = protobuf_c_message_descriptor_get_field(f->result_fd->descriptor, 1);
    uint8_t *reqs[NODE_RANGE_FANOUT_RUNS] = {0};
    size_t lens[NODE_RANGE_FANOUT_RUNS] = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        f->parts[i].start = starts[i];
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = part_request(f, i, &reqs[i], &lens[i]);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++)
            free(reqs[i]);
        fanout_free(f);
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    /* Each part is a single-group page of the same query from its run's first hash slot, sent
     * through this node's own Read handler: routed, forwarded and consistent like any page. */
    int64_t d = rpc_call_deadline_ms(call);
    int64_t deadline = d == INT64_MAX ? node_mono_ms() + FANOUT_DEFAULT_DEADLINE_MS : d;
    f->left = (unsigned)n;
    for (size_t i = 0; i < n; i++) {
        /* (the last part's answer merges and frees f: nothing touches f after it is started) */
        uint8_t *req = reqs[i];
        size_t len = lens[i];
        struct part_ref *ref = malloc(sizeof(*ref));
        if (ref == NULL) {
            part_done(f, i, GRPC_STATUS_RESOURCE_EXHAUSTED, "listing: out of memory", NULL, 0, NULL,
                      0);
        } else {
            *ref = (struct part_ref){f, i};
            if (rpc_server_call_local(api->client, FANOUT_READ_PATH, deadline, req, len, on_part,
                                      ref) != SLOTD_OK)
                on_part(ref, GRPC_STATUS_INTERNAL, "listing: cannot start the group page", NULL, 0,
                        NULL, 0);
        }
        free(req);
    }
    return 0;
}

int node_range_fanout(struct node_api *api, struct rpc_call *call, const Slotd__V1__ReadRequest *r,
                      struct slotd_error *err)
{
    uint16_t first;
    ProtobufCBinaryData after;
    if (slot_range_cursor_decode(r->range, &first, &after) != 0) {
        slotd_error_field(err, "range.cursor", 0,
                          "range.cursor: not a cursor this server returned for this range");
        return -1;
    }
    return fanout_start(api, call, r, &range_kind, first, err);
}

int node_list_fanout(struct node_api *api, struct rpc_call *call, const Slotd__V1__ReadRequest *r,
                     uint16_t first, struct slotd_error *err)
{
    return fanout_start(api, call, r, &list_kind, first, err);
}
