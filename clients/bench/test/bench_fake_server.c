/* bench_fake_server.c - gRPC core server that decodes, counts and answers slotbench calls. */
#include "bench_fake_server.h"

#include "bench_route.h"
#include "slotd/client.h"

#include "etcd_rpc.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_ARMED 16 /* generic call requests kept armed */

enum fake_stage { FAKE_REQUESTED, FAKE_RECEIVING, FAKE_FINISHING, FAKE_WATCHING, FAKE_PSTREAM };

/* The first member of every completion queue tag (the shutdown tag aside) says what it is. */
enum fake_tag_kind { FAKE_TAG_CALL, FAKE_TAG_CLOSE };

struct fake_call;

/* A Watch stream's RECV_CLOSE_ON_SERVER, outstanding beside its sends. */
struct fake_close_tag {
    enum fake_tag_kind kind; /* FAKE_TAG_CLOSE */
    struct fake_call *fc;
};

struct fake_call {
    enum fake_tag_kind kind; /* FAKE_TAG_CALL */
    enum fake_stage stage;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array request_md;
    grpc_byte_buffer *recv;
    grpc_byte_buffer *send;
    grpc_slice status_details;
    grpc_metadata trailer; /* grpc-status-details-bin of an UNAVAILABLE answer */
    size_t trailer_count;
    int cancelled;
    /* Watch streams (stage FAKE_WATCHING): */
    bool etcd;
    struct fake_close_tag close_tag;
    unsigned pending; /* batches in flight: invariant <= 2 (one send, the close) */
    bool sending;     /* a SEND_MESSAGE or the status is in flight */
    bool closed;      /* RECV_CLOSE_ON_SERVER completed */
    bool broken;      /* a send failed: nothing more is sent */
    bool header_sent;
    bool finished;           /* the status went out */
    unsigned sent;           /* messages after the header (event and progress ones alternate) */
    unsigned sending_events; /* events in the message in flight */
    /* ProposeStream calls (stage FAKE_PSTREAM): one batch at a time, a receive or a send */
    bool pstream_sending;
};

struct fake_server {
    struct fake_server_config cfg;
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t thread;
    atomic_bool stop;
    bool shutting_down;
    unsigned live_calls; /* fake_call objects not yet freed */
    struct fake_server_stats stats;
    bool watch_triggered;                        /* a put arrived: streams send their events */
    struct fake_call *watches[FAKE_WATCHES_MAX]; /* open Watch streams; NULL slots are free */
};

static void fake_watch_trigger(struct fake_server *f);

static int fake_shutdown_tag;

static void fake_call_free(struct fake_server *f, struct fake_call *fc)
{
    if (fc->call)
        grpc_call_unref(fc->call);
    grpc_call_details_destroy(&fc->details);
    grpc_metadata_array_destroy(&fc->request_md);
    if (fc->recv)
        grpc_byte_buffer_destroy(fc->recv);
    if (fc->send)
        grpc_byte_buffer_destroy(fc->send);
    grpc_slice_unref(fc->status_details);
    if (fc->trailer_count) {
        grpc_slice_unref(fc->trailer.key);
        grpc_slice_unref(fc->trailer.value);
    }
    free(fc);
    f->live_calls--;
}

static void fake_arm(struct fake_server *f)
{
    struct fake_call *fc = calloc(1, sizeof(*fc));
    if (!fc)
        abort(); /* test helper: no way to continue */
    grpc_call_details_init(&fc->details);
    grpc_metadata_array_init(&fc->request_md);
    fc->status_details = grpc_empty_slice();
    f->live_calls++;
    grpc_server_request_call(f->server, &fc->call, &fc->details, &fc->request_md, f->cq, f->cq, fc);
}

static bool fake_method_is(const struct fake_call *fc, const char *m)
{
    return grpc_slice_str_cmp(fc->details.method, m) == 0;
}

static void fake_count_put(struct fake_server *f, const ProtobufCBinaryData *key,
                           const ProtobufCBinaryData *value)
{
    if (key->len != f->cfg.key_size || value->len != f->cfg.value_size) {
        f->stats.bad_requests++;
        return;
    }
    char digits[32];
    size_t n = key->len - 4 < sizeof(digits) - 1 ? key->len - 4 : sizeof(digits) - 1;
    memcpy(digits, key->data + key->len - n, n);
    digits[n] = '\0';
    unsigned long long idx = strtoull(digits, NULL, 10);
    if (idx < FAKE_KEYS_TRACKED)
        f->stats.put_count_by_key[idx]++;
}

/* Counts no_forward and keys outside the configured hash slot parity. */
static void fake_count_route(struct fake_server *f, bool no_forward, const ProtobufCBinaryData *key)
{
    if (no_forward)
        f->stats.no_forward++;
    unsigned slot = slotd_hash_slot(key->data, key->len);
    if (f->cfg.slot_parity && slot % 2 != f->cfg.slot_parity - 1)
        f->stats.wrong_slot++;
}

/* Packs the RouteSnapshotResponse route_leader_address describes (see the config). */
static size_t fake_route(const struct fake_server *f, uint8_t *out)
{
    uint32_t table[BENCH_HASH_SLOTS];
    for (unsigned s = 0; s < BENCH_HASH_SLOTS; s++)
        table[s] = 1 + s % 2;
    Slotd__V1__GroupRoute g1 = SLOTD__V1__GROUP_ROUTE__INIT, g2 = SLOTD__V1__GROUP_ROUTE__INIT;
    g1.group_id = 1;
    g1.leader = 2;
    g2.group_id = 2;
    Slotd__V1__GroupRoute *groups[2] = {&g1, &g2};
    Slotd__V1__NodeInfo n1 = SLOTD__V1__NODE_INFO__INIT, n2 = SLOTD__V1__NODE_INFO__INIT;
    n1.node_id = 1;
    n1.address = "127.0.0.1:1";
    n2.node_id = 2;
    n2.address = (char *)f->cfg.route_leader_address;
    Slotd__V1__NodeInfo *nodes[2] = {&n1, &n2};
    Slotd__V1__RouteSnapshotResponse r = SLOTD__V1__ROUTE_SNAPSHOT_RESPONSE__INIT;
    r.route_revision = 7;
    r.n_hash_slot_table = BENCH_HASH_SLOTS;
    r.hash_slot_table = table;
    r.n_groups = 2;
    r.groups = groups;
    r.n_nodes = 2;
    r.nodes = nodes;
    return slotd__v1__route_snapshot_response__pack(&r, out);
}

/* Decodes the request, counts it and packs the answer into out (NULL: status not OK). */
static grpc_status_code fake_answer_slotd(struct fake_server *f, struct fake_call *fc,
                                          const uint8_t *buf, size_t len, uint8_t *out,
                                          size_t *out_len)
{
    if (fake_method_is(fc, "/slotd.v1.Metadata/Propose")) {
        Slotd__V1__ProposeRequest *m = slotd__v1__propose_request__unpack(NULL, len, buf);
        if (!m || m->command_case != SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT) {
            f->stats.bad_requests++;
        } else {
            f->stats.propose++;
            fake_count_put(f, &m->put->key, &m->put->value);
            fake_watch_trigger(f);
            fake_count_route(f, m->no_forward, &m->put->key);
        }
        if (m)
            slotd__v1__propose_request__free_unpacked(m, NULL);
        Slotd__V1__PutResult put = SLOTD__V1__PUT_RESULT__INIT;
        Slotd__V1__ProposeResponse r = SLOTD__V1__PROPOSE_RESPONSE__INIT;
        put.version = f->stats.calls;
        r.applied_index = f->stats.calls;
        r.group_id = 1;
        r.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT;
        r.put = &put;
        *out_len = slotd__v1__propose_response__pack(&r, out);
        return GRPC_STATUS_OK;
    }
    Slotd__V1__ReadRequest *m = slotd__v1__read_request__unpack(NULL, len, buf);
    if (!m || m->query_case != SLOTD__V1__READ_REQUEST__QUERY_GET || m->consistency > 2 ||
        m->get->key.len != f->cfg.key_size)
        f->stats.bad_requests++;
    else {
        f->stats.read_by_consistency[m->consistency]++;
        fake_count_route(f, m->no_forward, &m->get->key);
    }
    if (m)
        slotd__v1__read_request__free_unpacked(m, NULL);
    Slotd__V1__GetResult get = SLOTD__V1__GET_RESULT__INIT;
    Slotd__V1__ReadResponse r = SLOTD__V1__READ_RESPONSE__INIT;
    get.found = f->cfg.read_found;
    get.value.data = (uint8_t *)"v";
    get.value.len = f->cfg.read_found ? 1 : 0;
    r.result_case = SLOTD__V1__READ_RESPONSE__RESULT_GET;
    r.get = &get;
    *out_len = slotd__v1__read_response__pack(&r, out);
    return GRPC_STATUS_OK;
}

static grpc_status_code fake_answer_etcd(struct fake_server *f, struct fake_call *fc,
                                         const uint8_t *buf, size_t len, uint8_t *out,
                                         size_t *out_len)
{
    Etcdserverpb__ResponseHeader header = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    header.revision = (int64_t)f->stats.calls;
    if (fake_method_is(fc, "/etcdserverpb.KV/Put")) {
        Etcdserverpb__PutRequest *m = etcdserverpb__put_request__unpack(NULL, len, buf);
        if (!m) {
            f->stats.bad_requests++;
        } else {
            f->stats.etcd_put++;
            fake_count_put(f, &m->key, &m->value);
            fake_watch_trigger(f);
            etcdserverpb__put_request__free_unpacked(m, NULL);
        }
        Etcdserverpb__PutResponse r = ETCDSERVERPB__PUT_RESPONSE__INIT;
        r.header = &header;
        *out_len = etcdserverpb__put_response__pack(&r, out);
        return GRPC_STATUS_OK;
    }
    Etcdserverpb__RangeRequest *m = etcdserverpb__range_request__unpack(NULL, len, buf);
    if (!m || m->key.len != f->cfg.key_size)
        f->stats.bad_requests++;
    else if (m->serializable)
        f->stats.etcd_range_serializable++;
    else
        f->stats.etcd_range_linearizable++;
    if (m)
        etcdserverpb__range_request__free_unpacked(m, NULL);
    Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT;
    Etcdserverpb__KeyValue *kvs[1] = {&kv};
    Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    r.header = &header;
    r.n_kvs = f->cfg.read_found ? 1 : 0;
    r.kvs = kvs;
    r.count = (int64_t)r.n_kvs;
    *out_len = etcdserverpb__range_response__pack(&r, out);
    return GRPC_STATUS_OK;
}

static bool fake_every(unsigned every, uint64_t n)
{
    return every && n % every == 0;
}

/* Packs google.rpc.Status{UNAVAILABLE, [slotd.v1.ErrorDetail{NO_LEADER}]} into buf (256 bytes). */
static size_t fake_no_leader_status(uint8_t *buf)
{
    uint8_t detail_buf[64];
    Slotd__V1__ErrorDetail detail = SLOTD__V1__ERROR_DETAIL__INIT;
    detail.code = SLOTD__V1__ERROR_CODE__ERROR_CODE_NO_LEADER;
    detail.retry_after_ms = 5;
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
    any.type_url = "type.googleapis.com/slotd.v1.ErrorDetail";
    any.value.data = detail_buf;
    any.value.len = slotd__v1__error_detail__pack(&detail, detail_buf);
    Google__Protobuf__Any *details[1] = {&any};
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    st.code = GRPC_STATUS_UNAVAILABLE;
    st.message = "no leader";
    st.n_details = 1;
    st.details = details;
    return google__rpc__status__pack(&st, buf);
}

/* Attaches the NO_LEADER status above as the trailer. */
static void fake_attach_no_leader(struct fake_call *fc)
{
    uint8_t status_buf[256];
    size_t n = fake_no_leader_status(status_buf);
    fc->trailer.key = grpc_slice_from_static_string("grpc-status-details-bin");
    fc->trailer.value = grpc_slice_from_copied_buffer((const char *)status_buf, n);
    fc->trailer_count = 1;
}

/* ---- ProposeStream ---- */

/* Ends a ProposeStream call with code (after the client's half-close: OK). */
static void fake_pstream_finish(struct fake_call *fc, grpc_status_code code)
{
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[0].data.send_status_from_server.status = code;
    ops[0].data.send_status_from_server.status_details = &fc->status_details;
    ops[1].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[1].data.recv_close_on_server.cancelled = &fc->cancelled;
    fc->stage = FAKE_FINISHING;
    grpc_call_start_batch(fc->call, ops, 2, fc, NULL);
}

/* The result of the stream's nth item (1-based over the server): every fail_every-th is
 * UNAVAILABLE with the NO_LEADER detail, every malformed_every-th has code 0 and no response,
 * the others a put result. */
static void fake_pstream_result(struct fake_server *f, const Slotd__V1__ProposeStreamItem *it,
                                Slotd__V1__ProposeStreamResult *r, Slotd__V1__ProposeResponse *resp,
                                Slotd__V1__PutResult *put, uint8_t *status_buf)
{
    uint64_t n = ++f->stats.calls;
    const Slotd__V1__ProposeRequest *m = it->request;
    if (!m || m->command_case != SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT) {
        f->stats.bad_requests++;
    } else {
        f->stats.propose++;
        fake_count_put(f, &m->put->key, &m->put->value);
        fake_count_route(f, m->no_forward, &m->put->key);
    }
    r->id = it->id;
    if (fake_every(f->cfg.fail_every, n)) {
        r->code = GRPC_STATUS_UNAVAILABLE;
        r->message = "no leader";
        r->details.data = status_buf;
        r->details.len = fake_no_leader_status(status_buf);
    } else if (!fake_every(f->cfg.malformed_every, n)) {
        put->version = n;
        resp->applied_index = n;
        resp->group_id = 1;
        resp->result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT;
        resp->put = put;
        r->response = resp;
    }
}

/* A request message of a ProposeStream arrived (fc->recv NULL: the half-close): answer all its
 * items in one response message. */
static void fake_pstream_recv(struct fake_server *f, struct fake_call *fc)
{
    fc->stage = FAKE_PSTREAM;
    if (!fc->recv) {
        fake_pstream_finish(fc, GRPC_STATUS_OK);
        return;
    }
    grpc_byte_buffer_reader reader;
    grpc_byte_buffer_reader_init(&reader, fc->recv);
    grpc_slice in = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    grpc_byte_buffer_destroy(fc->recv);
    fc->recv = NULL;
    Slotd__V1__ProposeStreamRequest *m = slotd__v1__propose_stream_request__unpack(
        NULL, GRPC_SLICE_LENGTH(in), GRPC_SLICE_START_PTR(in));
    grpc_slice_unref(in);
    if (!m || m->n_items == 0 || m->n_items > 1024) {
        f->stats.bad_requests++;
        if (m)
            slotd__v1__propose_stream_request__free_unpacked(m, NULL);
        fake_pstream_finish(fc, GRPC_STATUS_INVALID_ARGUMENT);
        return;
    }
    size_t n = m->n_items;
    Slotd__V1__ProposeStreamResult *res = calloc(n, sizeof(*res));
    Slotd__V1__ProposeStreamResult **resp_of = calloc(n, sizeof(*resp_of));
    Slotd__V1__ProposeResponse *resp = calloc(n, sizeof(*resp));
    Slotd__V1__PutResult *put = calloc(n, sizeof(*put));
    uint8_t *status_bufs = calloc(n, 256);
    if (!res || !resp_of || !resp || !put || !status_bufs)
        abort(); /* test helper: no way to continue */
    for (size_t i = 0; i < n; i++) {
        slotd__v1__propose_stream_result__init(&res[i]);
        slotd__v1__propose_response__init(&resp[i]);
        slotd__v1__put_result__init(&put[i]);
        fake_pstream_result(f, m->items[i], &res[i], &resp[i], &put[i], status_bufs + 256 * i);
        resp_of[i] = &res[i];
    }
    Slotd__V1__ProposeStreamResponse out = SLOTD__V1__PROPOSE_STREAM_RESPONSE__INIT;
    out.n_results = n;
    out.results = resp_of;
    grpc_slice s = grpc_slice_malloc(slotd__v1__propose_stream_response__get_packed_size(&out));
    slotd__v1__propose_stream_response__pack(&out, GRPC_SLICE_START_PTR(s));
    fc->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    free(status_bufs);
    free(put);
    free(resp);
    free(resp_of);
    free(res);
    slotd__v1__propose_stream_request__free_unpacked(m, NULL);
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = fc->send;
    fc->pstream_sending = true;
    grpc_call_start_batch(fc->call, &op, 1, fc, NULL);
}

/* The stream's one batch completed: after a send, read the next request message. */
static void fake_pstream_step(struct fake_server *f, struct fake_call *fc, bool success)
{
    if (!fc->pstream_sending) {
        if (!success) { /* cancelled by the client */
            fake_call_free(f, fc);
            return;
        }
        fake_pstream_recv(f, fc);
        return;
    }
    fc->pstream_sending = false;
    grpc_byte_buffer_destroy(fc->send);
    fc->send = NULL;
    if (!success) {
        fake_call_free(f, fc);
        return;
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &fc->recv;
    grpc_call_start_batch(fc->call, &op, 1, fc, NULL);
}

/* The request arrived: answer it (or, for a hung call, only wait for the client to go). */
/* ---- Watch streams ---- */

/* Packs the next message of a Watch stream (see the config) into *out (malloc'd); 0 when
 * there is nothing to send now. */
static size_t fake_watch_next(struct fake_server *f, struct fake_call *fc, uint8_t **out,
                              unsigned *events)
{
    enum { HEADER, EVENTS, PROGRESS } what;
    *events = 0;
    if (!fc->header_sent)
        what = HEADER;
    else if (!f->watch_triggered || fc->sent >= 2 * f->cfg.watch_messages)
        return 0;
    else
        what = fc->sent % 2 == 0 ? EVENTS : PROGRESS;
    unsigned n = what == EVENTS ? f->cfg.watch_events : 0;
    if (n > FAKE_WATCH_EVENTS_MAX)
        n = FAKE_WATCH_EVENTS_MAX;
    char key[32];
    snprintf(key, sizeof(key), "key-%010u", fc->sent);
    ProtobufCBinaryData k = {strlen(key), (uint8_t *)key}, v = {1, (uint8_t *)"v"};
    ProtobufCMessage *msg;
    /* slotd */
    Slotd__V1__WatchEvent sev[FAKE_WATCH_EVENTS_MAX];
    Slotd__V1__WatchEvent *sevp[FAKE_WATCH_EVENTS_MAX];
    Slotd__V1__WatchPosition pos = SLOTD__V1__WATCH_POSITION__INIT;
    Slotd__V1__WatchPosition *posp[1] = {&pos};
    Slotd__V1__WatchResponse sr = SLOTD__V1__WATCH_RESPONSE__INIT;
    /* etcd */
    Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT;
    Etcdserverpb__Event eev[FAKE_WATCH_EVENTS_MAX];
    Etcdserverpb__Event *eevp[FAKE_WATCH_EVENTS_MAX];
    Etcdserverpb__ResponseHeader header = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    Etcdserverpb__WatchResponse er = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    if (fc->etcd) {
        kv.key = k;
        kv.value = v;
        kv.mod_revision = 7;
        for (unsigned i = 0; i < n; i++) {
            etcdserverpb__event__init(&eev[i]);
            eev[i].kv = &kv;
            eevp[i] = &eev[i];
        }
        header.revision = 7;
        er.header = &header;
        er.created = what == HEADER;
        er.n_events = n;
        er.events = eevp;
        msg = &er.base;
    } else {
        for (unsigned i = 0; i < n; i++) {
            slotd__v1__watch_event__init(&sev[i]);
            sev[i].type = SLOTD__V1__WATCH_EVENT_TYPE__WATCH_EVENT_TYPE_PUT;
            sev[i].key = k;
            sev[i].value = v;
            sev[i].group_id = 1;
            sev[i].index = fc->sent + 1;
            sevp[i] = &sev[i];
        }
        pos.group_id = 1;
        pos.index = fc->sent + 1;
        sr.n_positions = 1;
        sr.positions = posp;
        sr.created = what == HEADER;
        sr.progress = what == PROGRESS;
        sr.n_events = n;
        sr.events = sevp;
        msg = &sr.base;
    }
    size_t len = protobuf_c_message_get_packed_size(msg);
    *out = malloc(len ? len : 1);
    if (!*out)
        abort(); /* test helper */
    protobuf_c_message_pack(msg, *out);
    if (what == HEADER)
        fc->header_sent = true;
    else
        fc->sent++;
    *events = n;
    return len;
}

/* Starts the stream's next send (a message, or its status once every message is out). */
static void fake_watch_send(struct fake_server *f, struct fake_call *fc)
{
    if (fc->sending || fc->closed || fc->broken || fc->finished)
        return;
    uint8_t *buf = NULL;
    unsigned events = 0;
    size_t len = fake_watch_next(f, fc, &buf, &events);
    grpc_op op;
    memset(&op, 0, sizeof(op));
    if (buf) {
        grpc_slice s = grpc_slice_from_copied_buffer((const char *)buf, len);
        free(buf);
        if (fc->send)
            grpc_byte_buffer_destroy(fc->send);
        fc->send = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = fc->send;
    } else if (f->watch_triggered && f->cfg.watch_end_code) {
        grpc_slice_unref(fc->status_details);
        fc->status_details = grpc_slice_from_static_string("fake: watch cut off");
        op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        op.data.send_status_from_server.status = (grpc_status_code)f->cfg.watch_end_code;
        op.data.send_status_from_server.status_details = &fc->status_details;
        fc->finished = true;
    } else {
        return; /* idle until the trigger or the client's cancel */
    }
    fc->sending = true;
    fc->sending_events = events;
    fc->pending++;
    grpc_call_start_batch(fc->call, &op, 1, fc, NULL);
}

static void fake_watch_trigger(struct fake_server *f)
{
    if (f->watch_triggered)
        return;
    f->watch_triggered = true;
    for (unsigned i = 0; i < FAKE_WATCHES_MAX; i++)
        if (f->watches[i])
            fake_watch_send(f, f->watches[i]);
}

/* Frees a Watch stream once its close and its last send are done. */
static void fake_watch_maybe_free(struct fake_server *f, struct fake_call *fc)
{
    if (fc->pending > 0 || !fc->closed)
        return;
    for (unsigned i = 0; i < FAKE_WATCHES_MAX; i++)
        if (f->watches[i] == fc)
            f->watches[i] = NULL;
    fake_call_free(f, fc);
}

/* A Watch request arrived: check it, then serve the stream (see the config). */
static void fake_watch_begin(struct fake_server *f, struct fake_call *fc, const uint8_t *in,
                             size_t in_len)
{
    fc->etcd = fake_method_is(fc, "/etcdserverpb.Watch/Watch");
    bool good = false;
    if (fc->etcd) {
        Etcdserverpb__WatchRequest *m = etcdserverpb__watch_request__unpack(NULL, in_len, in);
        good = m &&
               m->request_union_case == ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST &&
               m->create_request->key.len == 4 &&
               memcmp(m->create_request->key.data, "key-", 4) == 0 &&
               m->create_request->range_end.len == 4 &&
               memcmp(m->create_request->range_end.data, "key.", 4) == 0;
        if (m)
            etcdserverpb__watch_request__free_unpacked(m, NULL);
    } else {
        Slotd__V1__WatchRequest *m = slotd__v1__watch_request__unpack(NULL, in_len, in);
        good = m && m->key.len == 0 && m->prefix.len == 4 && memcmp(m->prefix.data, "key-", 4) == 0;
        if (m)
            slotd__v1__watch_request__free_unpacked(m, NULL);
    }
    if (good)
        f->stats.watches++;
    else
        f->stats.bad_requests++;
    fc->stage = FAKE_WATCHING;
    fc->close_tag = (struct fake_close_tag){FAKE_TAG_CLOSE, fc};
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &fc->cancelled;
    fc->pending++;
    grpc_call_start_batch(fc->call, &op, 1, &fc->close_tag, NULL);
    unsigned slot = 0;
    while (slot < FAKE_WATCHES_MAX && f->watches[slot])
        slot++;
    if (slot == FAKE_WATCHES_MAX || !good) {
        fc->broken = true; /* no room, or a bad request: wait for the client to go */
        return;
    }
    f->watches[slot] = fc;
    fake_watch_send(f, fc);
}

/* A send of a Watch stream completed. */
static void fake_watch_sent(struct fake_server *f, struct fake_call *fc, bool success)
{
    fc->pending--;
    fc->sending = false;
    if (success)
        f->stats.watch_events_sent += fc->sending_events;
    else
        fc->broken = true;
    fake_watch_send(f, fc);
    fake_watch_maybe_free(f, fc);
}

static void fake_reply(struct fake_server *f, struct fake_call *fc)
{
    if (fake_method_is(fc, "/slotd.v1.Metadata/ProposeStream")) {
        fake_pstream_recv(f, fc); /* counts each item as a call */
        return;
    }
    uint64_t n = ++f->stats.calls;
    uint8_t in[8192], out[1024];
    size_t in_len = 0, out_len = 0;
    if (fc->recv) {
        grpc_byte_buffer_reader reader;
        grpc_byte_buffer_reader_init(&reader, fc->recv);
        grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
        grpc_byte_buffer_reader_destroy(&reader);
        in_len = GRPC_SLICE_LENGTH(s) < sizeof(in) ? GRPC_SLICE_LENGTH(s) : 0;
        memcpy(in, GRPC_SLICE_START_PTR(s), in_len);
        grpc_slice_unref(s);
    }
    if (fake_method_is(fc, "/slotd.v1.Metadata/Watch") ||
        fake_method_is(fc, "/etcdserverpb.Watch/Watch")) {
        fake_watch_begin(f, fc, in, in_len);
        return;
    }
    grpc_status_code code = GRPC_STATUS_UNIMPLEMENTED;
    if (fake_method_is(fc, "/slotd.v1.Metadata/Propose") ||
        fake_method_is(fc, "/slotd.v1.Metadata/Read"))
        code = fake_answer_slotd(f, fc, in, in_len, out, &out_len);
    else if (fake_method_is(fc, "/slotd.v1.Metadata/RouteSnapshot")) {
        f->stats.route_snapshots++;
        if (f->cfg.route_leader_address) {
            out_len = fake_route(f, out);
            code = GRPC_STATUS_OK;
        }
    } else if (fake_method_is(fc, "/etcdserverpb.KV/Put") ||
               fake_method_is(fc, "/etcdserverpb.KV/Range"))
        code = fake_answer_etcd(f, fc, in, in_len, out, &out_len);
    else
        f->stats.bad_requests++;

    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    size_t nops = 0;
    fc->stage = FAKE_FINISHING;
    if (!fake_every(f->cfg.hang_every, n)) {
        if (fake_every(f->cfg.fail_every, n)) {
            code = GRPC_STATUS_UNAVAILABLE;
            fake_attach_no_leader(fc);
        } else if (code == GRPC_STATUS_OK) {
            if (fake_every(f->cfg.malformed_every, n)) {
                memset(out, 0xff, 3); /* a truncated varint: never decodes */
                out_len = 3;
            }
            grpc_slice s = grpc_slice_from_copied_buffer((const char *)out, out_len);
            fc->send = grpc_raw_byte_buffer_create(&s, 1);
            grpc_slice_unref(s);
            ops[nops].op = GRPC_OP_SEND_MESSAGE;
            ops[nops++].data.send_message.send_message = fc->send;
        }
        ops[nops].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[nops].data.send_status_from_server.status = code;
        ops[nops].data.send_status_from_server.trailing_metadata_count = fc->trailer_count;
        ops[nops].data.send_status_from_server.trailing_metadata = &fc->trailer;
        ops[nops++].data.send_status_from_server.status_details = &fc->status_details;
    }
    ops[nops].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[nops++].data.recv_close_on_server.cancelled = &fc->cancelled;
    grpc_call_start_batch(fc->call, ops, nops, fc, NULL);
}

static void fake_step(struct fake_server *f, struct fake_call *fc, bool success)
{
    switch (fc->stage) {
    case FAKE_REQUESTED: {
        if (!success) { /* server shutting down */
            fake_call_free(f, fc);
            return;
        }
        if (!f->shutting_down)
            fake_arm(f);
        grpc_op ops[2];
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_RECV_MESSAGE;
        ops[1].data.recv_message.recv_message = &fc->recv;
        fc->stage = FAKE_RECEIVING;
        grpc_call_start_batch(fc->call, ops, 2, fc, NULL);
        return;
    }
    case FAKE_RECEIVING:
        if (!success) {
            fake_call_free(f, fc);
            return;
        }
        fake_reply(f, fc);
        return;
    case FAKE_FINISHING:
        fake_call_free(f, fc);
        return;
    case FAKE_WATCHING:
        fake_watch_sent(f, fc, success);
        return;
    case FAKE_PSTREAM:
        fake_pstream_step(f, fc, success);
        return;
    }
}

static void *fake_main(void *arg)
{
    struct fake_server *f = arg;
    bool shutdown_done = false;
    while (!shutdown_done || f->live_calls > 0) {
        gpr_timespec wake =
            gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(20, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(f->cq, wake, NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            if (ev.tag == &fake_shutdown_tag) {
                shutdown_done = true;
            } else if (*(enum fake_tag_kind *)ev.tag == FAKE_TAG_CLOSE) {
                struct fake_call *fc = ((struct fake_close_tag *)ev.tag)->fc;
                fc->pending--;
                fc->closed = true;
                fake_watch_maybe_free(f, fc);
            } else {
                fake_step(f, ev.tag, ev.success != 0);
            }
        }
        if (!f->shutting_down && atomic_load(&f->stop)) {
            f->shutting_down = true;
            grpc_server_shutdown_and_notify(f->server, f->cq, &fake_shutdown_tag);
            grpc_server_cancel_all_calls(f->server);
        }
    }
    return NULL;
}

struct fake_server *fake_server_start(const struct fake_server_config *cfg, int *port)
{
    grpc_init();
    struct fake_server *f = calloc(1, sizeof(*f));
    if (!f)
        goto err_after_init;
    f->cfg = *cfg;
    f->cq = grpc_completion_queue_create_for_next(NULL);
    f->server = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(f->server, f->cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    *port = grpc_server_add_http2_port(f->server, "127.0.0.1:0", creds);
    grpc_server_credentials_release(creds);
    if (*port == 0)
        goto err_after_server;
    grpc_server_start(f->server);
    for (int i = 0; i < FAKE_ARMED; i++)
        fake_arm(f);
    if (pthread_create(&f->thread, NULL, fake_main, f) != 0) {
        atomic_store(&f->stop, true);
        fake_main(f); /* shuts down in this thread */
        goto err_after_server;
    }
    return f;

err_after_server:
    grpc_server_destroy(f->server);
    grpc_completion_queue_shutdown(f->cq);
    while (grpc_completion_queue_next(f->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(f->cq);
    free(f);
err_after_init:
    grpc_shutdown();
    return NULL;
}

void fake_server_stop(struct fake_server *f, struct fake_server_stats *out)
{
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    grpc_server_destroy(f->server);
    grpc_completion_queue_shutdown(f->cq);
    while (grpc_completion_queue_next(f->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(f->cq);
    *out = f->stats;
    free(f);
    grpc_shutdown();
}
