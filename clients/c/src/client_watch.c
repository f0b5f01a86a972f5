/* client_watch.c - libslotd Metadata/Watch: one server stream at a time, restarted on the next
 * endpoint from the positions reached, so the callback sees every change once. */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WATCH_METHOD "/slotd.v1.Metadata/Watch"
#define WATCH_BACKOFF_FIRST_MS 50
#define WATCH_BACKOFF_MAX_MS 1000
/* How long past the call's own deadline the stream may take to report it before it is
 * cancelled here. */
#define WATCH_CQ_GRACE_MS 2000

/* How one stream ended. */
enum watch_end {
    WATCH_END_STOPPED, /* the callback asked to stop */
    WATCH_END_CLOSED,  /* status OK: the server ended the stream */
    WATCH_END_FAILED,  /* a status in st */
};

static int64_t watch_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void slotd_watch_result_destroy(struct slotd_watch_result *r)
{
    if (!r)
        return;
    free(r->positions);
    free(r);
}

/* Raises group's position in out to index (adding the group). False when the table is full or
 * out of memory. */
static bool watch_position_set(struct slotd_watch_result *out, size_t *cap, uint32_t group,
                               uint64_t index)
{
    for (size_t i = 0; i < out->position_count; i++)
        if (out->positions[i].group_id == group) {
            if (index > out->positions[i].index)
                out->positions[i].index = index;
            return true;
        }
    if (out->position_count == SLOTD_WATCH_GROUPS_MAX)
        return false;
    if (out->position_count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct slotd_watch_position *p = realloc(out->positions, ncap * sizeof(*p));
        if (!p)
            return false;
        out->positions = p;
        *cap = ncap;
    }
    out->positions[out->position_count++] = (struct slotd_watch_position){group, index};
    return true;
}

/* The WatchRequest for the next stream: w's selection, resume = the positions reached. */
static int watch_encode(const struct slotd_watch_request *w, const struct slotd_watch_result *out,
                        uint8_t **buf, size_t *len)
{
    Slotd__V1__WatchRequest m = SLOTD__V1__WATCH_REQUEST__INIT;
    m.key = (ProtobufCBinaryData){w->key_len, (uint8_t *)w->key};
    m.prefix = (ProtobufCBinaryData){w->prefix_len, (uint8_t *)w->prefix};
    m.progress_interval_ms = w->progress_interval_ms;
    m.keys_only = w->keys_only;
    Slotd__V1__TypedWatch typed = SLOTD__V1__TYPED_WATCH__INIT;
    if (w->typed_kind != 0) {
        typed.kind = (Slotd__V1__TypedWatchKind)w->typed_kind;
        typed.id = (char *)w->typed_id;
        m.typed = &typed;
    }
    Slotd__V1__WatchPosition *pos = NULL, **ptrs = NULL;
    if (out->position_count > 0) {
        pos = calloc(out->position_count, sizeof(*pos));
        ptrs = calloc(out->position_count, sizeof(*ptrs));
        if (!pos || !ptrs) {
            free(pos);
            free(ptrs);
            return SLOTD_CLIENT_ENOMEM;
        }
    }
    for (size_t i = 0; i < out->position_count; i++) {
        slotd__v1__watch_position__init(&pos[i]);
        pos[i].group_id = out->positions[i].group_id;
        pos[i].index = out->positions[i].index;
        ptrs[i] = &pos[i];
    }
    m.n_resume = out->position_count;
    m.resume = ptrs;
    int rc = slotd__pack(&m.base, buf, len);
    free(pos);
    free(ptrs);
    return rc;
}

/* Decodes one WatchResponse, folds its positions into out and hands it to cb. Returns
 * SLOTD_CLIENT_OK with *stop set from cb, or EMALFORMED / ENOMEM with st->message set. */
static int watch_deliver(grpc_byte_buffer *recv, struct slotd_watch_result *out, size_t *cap,
                         slotd_watch_cb cb, void *arg, bool *stop, struct slotd_status *st)
{
    grpc_slice body;
    if (!slotd_call_flatten(recv, &body)) {
        snprintf(st->message, sizeof(st->message), "a watch message that cannot be read");
        return SLOTD_CLIENT_EMALFORMED;
    }
    Slotd__V1__WatchResponse *m = slotd__v1__watch_response__unpack(NULL, GRPC_SLICE_LENGTH(body),
                                                                    GRPC_SLICE_START_PTR(body));
    grpc_slice_unref(body);
    if (!m) {
        snprintf(st->message, sizeof(st->message), "a watch message is not a WatchResponse");
        return SLOTD_CLIENT_EMALFORMED;
    }
    int rc = SLOTD_CLIENT_OK;
    struct slotd_watch_event *events = NULL;
    const struct slotd_watch_event **event_ptrs = NULL;
    for (size_t i = 0; i < m->n_positions; i++)
        if (!watch_position_set(out, cap, m->positions[i]->group_id, m->positions[i]->index)) {
            snprintf(st->message, sizeof(st->message),
                     "a watch message names more than %d groups (or out of memory)",
                     SLOTD_WATCH_GROUPS_MAX);
            rc = SLOTD_CLIENT_EMALFORMED;
            goto done;
        }
    if (m->n_events > 0) {
        events = calloc(m->n_events, sizeof(*events));
        event_ptrs = malloc(m->n_events * sizeof(*event_ptrs));
        if (!events || !event_ptrs) {
            rc = SLOTD_CLIENT_ENOMEM;
            goto done;
        }
    }
    for (size_t i = 0; i < m->n_events; i++) {
        const Slotd__V1__WatchEvent *e = m->events[i];
        events[i] = (struct slotd_watch_event){
            .type = (int)e->type,
            .key = e->key.data,
            .key_len = e->key.len,
            .value = e->value.data,
            .value_len = e->value.len,
            .version = e->version,
            .group_id = e->group_id,
            .index = e->index,
            .table = (int)e->table,
        };
        event_ptrs[i] = &events[i];
    }
    struct slotd_watch_message msg = {
        .events = event_ptrs,
        .event_count = m->n_events,
        .positions = out->positions,
        .position_count = out->position_count,
        .created = m->created,
        .progress = m->progress,
        .resumes = out->resumes,
    };
    out->messages++;
    *stop = cb(arg, &msg) != 0;
done:
    free(event_ptrs);
    free(events);
    slotd__v1__watch_response__free_unpacked(m, NULL);
    return rc;
}

/* One stream on address until it ends, the callback stops it or deadline_ms (monotonic, 0 =
 * none) passes. *got says whether any message arrived. st describes a failed end. */
static enum watch_end watch_stream(struct slotd_client *c, const char *address, const uint8_t *req,
                                   size_t req_len, int64_t deadline_ms, slotd_watch_cb cb,
                                   void *arg, struct slotd_watch_result *out, size_t *cap,
                                   bool *got, struct slotd_status *st)
{
    *got = false;
    struct slotd__stream s;
    int rc =
        slotd__stream_open(&s, c, address, WATCH_METHOD, "watch", req, req_len, deadline_ms != 0,
                           deadline_ms - watch_now_ms(), WATCH_CQ_GRACE_MS, st);
    if (rc == SLOTD_CLIENT_EUNAVAILABLE)
        return WATCH_END_FAILED;
    bool stopped = false, undecodable = false;
    grpc_byte_buffer *recv;
    while ((recv = slotd__stream_next(&s)) != NULL) {
        if (!stopped) {
            *got = true;
            if (watch_deliver(recv, out, cap, cb, arg, &stopped, st) != SLOTD_CLIENT_OK) {
                undecodable = true; /* st->message says why; the call is ended below */
                stopped = true;
            }
        }
        grpc_byte_buffer_destroy(recv);
        slotd__stream_more(&s, !stopped);
    }
    enum watch_end end = WATCH_END_FAILED;
    if (undecodable) {
        st->grpc_status = GRPC_STATUS_OK; /* the server said nothing wrong; the bytes were */
    } else if (stopped) {
        end = WATCH_END_STOPPED;
    } else if (st->grpc_status == -1) {
        slotd_call_status_set(st, s.status, s.details, &s.trailing_md);
        end = s.status == GRPC_STATUS_OK ? WATCH_END_CLOSED : WATCH_END_FAILED;
    }
    slotd__stream_close(&s);
    return end;
}

/* Whether a stream that ended with status is restarted (from the positions reached). */
static bool watch_resumable(int status)
{
    return status == GRPC_STATUS_UNAVAILABLE || status == GRPC_STATUS_RESOURCE_EXHAUSTED ||
           status == GRPC_STATUS_UNKNOWN || status == GRPC_STATUS_CANCELLED ||
           status == GRPC_STATUS_DEADLINE_EXCEEDED || status == GRPC_STATUS_INTERNAL;
}

static int watch_check(const struct slotd_watch_request *w, struct slotd_status *st)
{
    const char *bad = NULL;
    if ((!w->key && w->key_len) || (!w->prefix && w->prefix_len))
        bad = "a NULL key or prefix with a length";
    else if (w->key_len && w->prefix_len)
        bad = "both a key and a prefix (a watch takes one)";
    else if (w->typed_kind != 0 && (!w->typed_id || w->key_len || w->prefix_len))
        bad = "a typed watch needs typed_id and takes no key or prefix";
    else if (w->resume_count > SLOTD_WATCH_GROUPS_MAX || (w->resume_count && !w->resume))
        bad = "a NULL resume array with a count, or more positions than SLOTD_WATCH_GROUPS_MAX";
    else if (w->timeout_ms < 0)
        bad = "a negative timeout_ms";
    if (!bad)
        return SLOTD_CLIENT_OK;
    snprintf(st->message, sizeof(st->message), "watch: %s", bad);
    return SLOTD_CLIENT_EINVAL;
}

/* Runs w into out (borrowed for the call); st describes a failure. */
static int watch_run(struct slotd_client *c, const struct slotd_watch_request *w, slotd_watch_cb cb,
                     void *arg, struct slotd_watch_result *out, struct slotd_status *st_out)
{
    slotd_call_status_reset(st_out);
    int rc = watch_check(w, st_out);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    size_t cap = 0;
    for (size_t i = 0; i < w->resume_count; i++)
        if (!watch_position_set(out, &cap, w->resume[i].group_id, w->resume[i].index))
            return SLOTD_CLIENT_ENOMEM;
    int64_t deadline_ms = w->timeout_ms > 0 ? watch_now_ms() + w->timeout_ms : 0;
    int max_resumes = w->max_resumes == 0 ? SLOTD_WATCH_RESUMES_DEFAULT : w->max_resumes;
    char addrs[SLOTD_CLIENT_ENDPOINTS_MAX][SLOTD_ADDRESS_LEN + 1];
    size_t n = slotd__client_endpoints(c, addrs, SLOTD_CLIENT_ENDPOINTS_MAX);
    unsigned in_a_row = 0;
    int backoff = WATCH_BACKOFF_FIRST_MS;
    struct slotd_status st;
    slotd_call_status_reset(&st);
    for (size_t at = 0;; at++) {
        const char *address = addrs[at % n];
        uint8_t *req;
        size_t req_len;
        rc = watch_encode(w, out, &req, &req_len);
        if (rc != SLOTD_CLIENT_OK)
            return rc;
        bool got;
        enum watch_end end =
            watch_stream(c, address, req, req_len, deadline_ms, cb, arg, out, &cap, &got, &st);
        free(req);
        if (end == WATCH_END_STOPPED || end == WATCH_END_CLOSED)
            return SLOTD_CLIENT_OK;
        if (deadline_ms && watch_now_ms() >= deadline_ms &&
            st.grpc_status == GRPC_STATUS_DEADLINE_EXCEEDED) {
            out->timed_out = true;
            return SLOTD_CLIENT_OK;
        }
        if (got) {
            in_a_row = 0;
            backoff = WATCH_BACKOFF_FIRST_MS;
        }
        bool again = watch_resumable(st.grpc_status) &&
                     (max_resumes < 0 || in_a_row < (unsigned)max_resumes) &&
                     (!deadline_ms || watch_now_ms() + backoff < deadline_ms);
        if (!again)
            break;
        in_a_row++;
        out->resumes++;
        slotd__sleep_ms(backoff);
        backoff = backoff * 2 > WATCH_BACKOFF_MAX_MS ? WATCH_BACKOFF_MAX_MS : backoff * 2;
    }
    if (deadline_ms && watch_now_ms() + backoff >= deadline_ms && watch_resumable(st.grpc_status)) {
        out->timed_out = true; /* no time left for another stream */
        return SLOTD_CLIENT_OK;
    }
    rc = slotd__err_of_status(&st);
    if (rc == SLOTD_CLIENT_OK)
        rc = SLOTD_CLIENT_EMALFORMED; /* status OK here: a message that did not decode */
    char text[SLOTD_STATUS_MESSAGE_LEN];
    snprintf(text, sizeof(text), "watch: %s: %.400s", slotd_grpc_status_name(st.grpc_status),
             st.message[0] ? st.message : slotd_client_strerror(rc));
    size_t used = strlen(text);
    if (st.has_detail && st.field[0])
        snprintf(text + used, sizeof(text) - used, " (field %s, limit %llu)", st.field,
                 (unsigned long long)st.limit);
    used = strlen(text);
    snprintf(text + used, sizeof(text) - used, " [%s, %u resume%s]", st.address, out->resumes,
             out->resumes == 1 ? "" : "s");
    memcpy(st.message, text, sizeof(st.message));
    *st_out = st;
    return rc;
}

int slotd_client_watch(struct slotd_client *c, const struct slotd_watch_request *w,
                       slotd_watch_cb cb, void *arg, struct slotd_watch_result **out,
                       struct slotd_error **err)
{
    *out = NULL;
    struct slotd_watch_result *r = calloc(1, sizeof(*r));
    if (!r)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "watch: out of memory", NULL, err);
    struct slotd_status st;
    int rc = watch_run(c, w, cb, arg, r, &st);
    slotd__finish(rc, &st, r->resumes + 1, err);
    if (rc == SLOTD_CLIENT_EINVAL || rc == SLOTD_CLIENT_ENOMEM)
        slotd_watch_result_destroy(r);
    else
        *out = r;
    return rc;
}
