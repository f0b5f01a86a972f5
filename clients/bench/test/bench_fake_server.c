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

enum fake_stage { FAKE_REQUESTED, FAKE_RECEIVING, FAKE_FINISHING };

struct fake_call {
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
};

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

/* Attaches google.rpc.Status{UNAVAILABLE, [slotd.v1.ErrorDetail{NO_LEADER}]} as the trailer. */
static void fake_attach_no_leader(struct fake_call *fc)
{
    uint8_t detail_buf[64], status_buf[256];
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
    size_t n = google__rpc__status__pack(&st, status_buf);
    fc->trailer.key = grpc_slice_from_static_string("grpc-status-details-bin");
    fc->trailer.value = grpc_slice_from_copied_buffer((const char *)status_buf, n);
    fc->trailer_count = 1;
}

/* The request arrived: answer it (or, for a hung call, only wait for the client to go). */
static void fake_reply(struct fake_server *f, struct fake_call *fc)
{
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
            if (ev.tag == &fake_shutdown_tag)
                shutdown_done = true;
            else
                fake_step(f, ev.tag, ev.success != 0);
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
