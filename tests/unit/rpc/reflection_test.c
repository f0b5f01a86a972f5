/* reflection_test.c - CUnit suite for server reflection: the descriptor-set index and
 * grpc.reflection.v1/v1alpha ServerReflectionInfo streams served by an in-process rpc server. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "descset.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rpc.h"
#include "slotd/internal/v1/peer.pb-c.h"

#define WAIT_MS 5000 /* bound on every wait in this file */
#define V1 "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
#define V1ALPHA "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
#define NOT_FOUND 5

typedef Grpc__Reflection__V1__ServerReflectionRequest refl_request;
typedef Grpc__Reflection__V1__ServerReflectionResponse refl_response;

static gpr_timespec in_ms(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* ---- an independent reader for FileDescriptorProto bytes (not descset.c's) ---------------- */

static bool rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return true;
        }
    }
    return false;
}

/* Copies the k-th (0-based) length-delimited field `number` of buf into out; false if absent or
 * the bytes are not valid protobuf wire format. */
static bool pb_field(const uint8_t *buf, size_t len, uint32_t number, int k, char *out,
                     size_t outlen, const uint8_t **sub, size_t *sublen)
{
    const uint8_t *p = buf, *end = buf + len;
    bool found = false;
    while (p < end) {
        uint64_t key, v;
        if (!rd_varint(&p, end, &key)) {
            return false;
        }
        switch (key & 7) {
        case 0:
            if (!rd_varint(&p, end, &v)) {
                return false;
            }
            break;
        case 1:
        case 5:
            if ((size_t)(end - p) < ((key & 7) == 1 ? 8u : 4u)) {
                return false;
            }
            p += (key & 7) == 1 ? 8 : 4;
            break;
        case 2:
            if (!rd_varint(&p, end, &v) || v > (uint64_t)(end - p)) {
                return false;
            }
            if ((key >> 3) == number && k-- == 0) {
                found = true;
                if (out != NULL) {
                    snprintf(out, outlen, "%.*s", (int)v, (const char *)p);
                }
                if (sub != NULL) {
                    *sub = p;
                    *sublen = (size_t)v;
                }
            }
            p += v;
            break;
        default:
            return false;
        }
    }
    return found;
}

static bool pb_file_name(const ProtobufCBinaryData *b, char *out, size_t outlen)
{
    return pb_field(b->data, b->len, 1, 0, out, outlen, NULL, NULL);
}

/* ---- the descriptor-set index -------------------------------------------------------------- */

static void test_descset_embedded(void)
{
    struct rpc_descset *d = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(
        rpc_descset_parse(rpc_descriptor_set, rpc_descriptor_set_len, &d, err, sizeof(err)),
        SLOTD_OK);
    CU_ASSERT_EQUAL(d->n_files, 9); /* the 8 reflected files + google/protobuf/any.proto */
    static const struct {
        const char *symbol, *file;
        enum rpc_descset_kind kind;
    } want[] = {
        {"slotd.v1.Metadata", "slotd/v1/metadata.proto", RPC_DESCSET_SERVICE},
        {"slotd.v1.Metadata.Propose", "slotd/v1/metadata.proto", RPC_DESCSET_METHOD},
        {"slotd.v1.Admin", "slotd/v1/admin.proto", RPC_DESCSET_SERVICE},
        {"slotd.v1.ProposeRequest", "slotd/v1/metadata.proto", RPC_DESCSET_MESSAGE},
        {"slotd.internal.v1.Peer", "slotd/internal/v1/peer.proto", RPC_DESCSET_SERVICE},
        {"slotd.internal.v1.LogCommand", "slotd/internal/v1/log.proto", RPC_DESCSET_MESSAGE},
        {"grpc.health.v1.Health", "grpc/health/v1/health.proto", RPC_DESCSET_SERVICE},
        {"grpc.health.v1.HealthCheckResponse.ServingStatus", "grpc/health/v1/health.proto",
         RPC_DESCSET_ENUM},
        {"grpc.health.v1.HealthCheckResponse.SERVING", "grpc/health/v1/health.proto",
         RPC_DESCSET_ENUM_VALUE},
        {"grpc.health.v1.HealthCheckRequest.service", "grpc/health/v1/health.proto",
         RPC_DESCSET_FIELD},
        {"grpc.reflection.v1alpha.ServerReflection", "grpc/reflection/v1alpha/reflection.proto",
         RPC_DESCSET_SERVICE},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct rpc_descset_symbol *s = rpc_descset_find_symbol(d, want[i].symbol);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_STRING_EQUAL(d->files[s->file].name, want[i].file);
        CU_ASSERT_EQUAL(s->kind, want[i].kind);
    }
    CU_ASSERT_PTR_NULL(rpc_descset_find_symbol(d, "slotd.v1.NoSuchThing"));
    CU_ASSERT_PTR_NULL(rpc_descset_find_symbol(d, "slotd.v1"));
    /* log.proto imports metadata.proto: the closure names both, log.proto first. */
    long log = rpc_descset_find_file(d, "slotd/internal/v1/log.proto");
    CU_ASSERT_FATAL(log >= 0);
    size_t order[RPC_DESCSET_FILES_MAX];
    CU_ASSERT_EQUAL_FATAL(rpc_descset_closure(d, (size_t)log, order), 2);
    CU_ASSERT_EQUAL(order[0], (size_t)log);
    CU_ASSERT_STRING_EQUAL(d->files[order[1]].name, "slotd/v1/metadata.proto");
    CU_ASSERT_EQUAL(rpc_descset_find_file(d, "nope.proto"), -1);
    rpc_descset_free(d);
}

static void test_descset_bad_input(void)
{
    struct rpc_descset *d = NULL;
    char err[256];
    /* Truncated: the first file's length runs past the end. */
    CU_ASSERT_EQUAL(rpc_descset_parse(rpc_descriptor_set, 40, &d, err, sizeof(err)),
                    SLOTD_EMALFORMED);
    CU_ASSERT(strstr(err, "malformed") != NULL);
    /* A set holding only log.proto: its import is missing. */
    struct rpc_descset *full = NULL;
    CU_ASSERT_EQUAL_FATAL(
        rpc_descset_parse(rpc_descriptor_set, rpc_descriptor_set_len, &full, NULL, 0), SLOTD_OK);
    long log = rpc_descset_find_file(full, "slotd/internal/v1/log.proto");
    CU_ASSERT_FATAL(log >= 0);
    size_t flen = full->files[log].len;
    uint8_t *one = malloc(flen + 8);
    size_t n = 0;
    one[n++] = 0x0a;
    for (size_t v = flen;; v >>= 7) {
        one[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80) {
            break;
        }
    }
    memcpy(one + n, full->files[log].buf, flen);
    CU_ASSERT_EQUAL(rpc_descset_parse(one, n + flen, &d, err, sizeof(err)), SLOTD_EMALFORMED);
    CU_ASSERT(strstr(err, "slotd/v1/metadata.proto") != NULL);
    free(one);
    rpc_descset_free(full);
    /* Empty input is an empty set. */
    CU_ASSERT_EQUAL_FATAL(rpc_descset_parse(rpc_descriptor_set, 0, &d, NULL, 0), SLOTD_OK);
    CU_ASSERT_EQUAL(d->n_files, 0);
    CU_ASSERT_PTR_NULL(rpc_descset_find_symbol(d, "x"));
    rpc_descset_free(d);
}

/* ---- a bidi reflection client ------------------------------------------------------------- */

struct client {
    grpc_channel *channel;
    grpc_completion_queue *cq;
};

struct stream {
    grpc_call *call;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    bool init_done;                                           /* tag_init already collected */
    char tag_init, tag_send, tag_recv, tag_close, tag_status; /* addresses are the tags */
};

static void client_open(struct client *c, int port)
{
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_arg arg = {
        .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, .value.integer = 1};
    grpc_channel_args args = {1, &arg};
    c->channel = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    c->cq = grpc_completion_queue_create_for_pluck(NULL);
}

static void client_close(struct client *c)
{
    grpc_channel_destroy(c->channel);
    grpc_completion_queue_shutdown(c->cq);
    while (
        grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
        GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(c->cq);
}

static bool wait_tag(struct client *c, void *tag, bool *success)
{
    grpc_event ev = grpc_completion_queue_pluck(c->cq, tag, in_ms(WAIT_MS), NULL);
    if (success != NULL) {
        *success = ev.type == GRPC_OP_COMPLETE && ev.success;
    }
    return ev.type == GRPC_OP_COMPLETE;
}

/* Opens a stream on path; its status is collected by stream_close. */
static void stream_open(struct client *c, struct stream *s, const char *path)
{
    memset(s, 0, sizeof(*s));
    grpc_slice m = grpc_slice_from_static_string(path);
    s->call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, m, NULL,
                                       in_ms(4 * WAIT_MS), NULL);
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[1].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    CU_ASSERT_EQUAL(grpc_call_start_batch(s->call, ops, 2, &s->tag_init, NULL), GRPC_CALL_OK);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &s->trail_md;
    ops[0].data.recv_status_on_client.status = &s->status;
    ops[0].data.recv_status_on_client.status_details = &s->details;
    ops[0].data.recv_status_on_client.error_string = &s->error_string;
    CU_ASSERT_EQUAL(grpc_call_start_batch(s->call, ops, 1, &s->tag_status, NULL), GRPC_CALL_OK);
}

/* Sends raw request bytes and waits for one response message; NULL when the stream ended.
 * Caller frees the result with free(). */
static uint8_t *stream_exchange_raw(struct client *c, struct stream *s, const uint8_t *req,
                                    size_t len, size_t *out_len)
{
    grpc_slice sl = grpc_slice_from_copied_buffer((const char *)req, len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    grpc_byte_buffer *recv = NULL;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = send;
    CU_ASSERT_EQUAL(grpc_call_start_batch(s->call, &op, 1, &s->tag_send, NULL), GRPC_CALL_OK);
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &recv;
    CU_ASSERT_EQUAL(grpc_call_start_batch(s->call, &op, 1, &s->tag_recv, NULL), GRPC_CALL_OK);
    CU_ASSERT(wait_tag(c, &s->tag_send, NULL));
    CU_ASSERT(wait_tag(c, &s->tag_recv, NULL));
    grpc_byte_buffer_destroy(send);
    if (recv == NULL) {
        return NULL;
    }
    grpc_byte_buffer_reader r;
    grpc_byte_buffer_reader_init(&r, recv);
    grpc_slice body = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    grpc_byte_buffer_destroy(recv);
    *out_len = GRPC_SLICE_LENGTH(body);
    uint8_t *out = malloc(*out_len + 1);
    memcpy(out, GRPC_SLICE_START_PTR(body), *out_len);
    grpc_slice_unref(body);
    return out;
}

/* Sends req and returns the decoded response (caller frees with ..._free_unpacked), or NULL. */
static refl_response *stream_ask(struct client *c, struct stream *s, const refl_request *req)
{
    size_t len = grpc__reflection__v1__server_reflection_request__get_packed_size(req);
    uint8_t *buf = malloc(len + 1);
    grpc__reflection__v1__server_reflection_request__pack(req, buf);
    size_t out_len = 0;
    uint8_t *out = stream_exchange_raw(c, s, buf, len, &out_len);
    free(buf);
    if (out == NULL) {
        return NULL;
    }
    refl_response *resp =
        grpc__reflection__v1__server_reflection_response__unpack(NULL, out_len, out);
    CU_ASSERT_PTR_NOT_NULL(resp);
    free(out);
    return resp;
}

/* Half-closes (or cancels) s and returns its status; frees s's resources. */
static grpc_status_code stream_close(struct client *c, struct stream *s, bool cancel)
{
    if (cancel) {
        grpc_call_cancel(s->call, NULL);
    } else {
        grpc_op op;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        CU_ASSERT_EQUAL(grpc_call_start_batch(s->call, &op, 1, &s->tag_close, NULL), GRPC_CALL_OK);
        CU_ASSERT(wait_tag(c, &s->tag_close, NULL));
    }
    if (!wait_tag(c, &s->tag_status, NULL)) {
        CU_FAIL("stream status did not arrive in time");
        grpc_call_cancel(s->call, NULL);
        wait_tag(c, &s->tag_status, NULL);
    }
    if (!s->init_done) {
        CU_ASSERT(wait_tag(c, &s->tag_init, NULL));
    }
    grpc_status_code st = s->status;
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    grpc_slice_unref(s->details);
    gpr_free((void *)s->error_string);
    grpc_call_unref(s->call);
    return st;
}

static refl_request req_init(void)
{
    refl_request r = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__INIT;
    return r;
}

static refl_response *ask_list(struct client *c, struct stream *s)
{
    refl_request r = req_init();
    r.message_request_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES;
    r.list_services = "*";
    return stream_ask(c, s, &r);
}

static refl_response *ask_symbol(struct client *c, struct stream *s, const char *symbol)
{
    refl_request r = req_init();
    r.host = "localhost";
    r.message_request_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL;
    r.file_containing_symbol = (char *)symbol;
    return stream_ask(c, s, &r);
}

static refl_response *ask_file(struct client *c, struct stream *s, const char *file)
{
    refl_request r = req_init();
    r.message_request_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME;
    r.file_by_filename = (char *)file;
    return stream_ask(c, s, &r);
}

/* ---- fixture: a server with slotd.v1.Metadata (default) and slotd.internal.v1.Peer -------- */

static struct rpc_server *server;
static int port;

static int suite_init(void)
{
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "127.0.0.1:0";
    if (rpc_server_new(&o, &server) != SLOTD_OK) {
        return 1;
    }
    if (rpc_server_add_service(server, &slotd__internal__v1__peer__descriptor) != SLOTD_OK) {
        return 1;
    }
    char err[256];
    return rpc_server_start(server, &port, err, sizeof(err)) == SLOTD_OK ? 0 : 1;
}

static int suite_clean(void)
{
    rpc_server_free(server);
    server = NULL;
    return 0;
}

static bool has_service(const refl_response *r, const char *name)
{
    for (size_t i = 0; i < r->list_services_response->n_service; i++) {
        if (strcmp(r->list_services_response->service[i]->name, name) == 0) {
            return true;
        }
    }
    return false;
}

static void check_list(const char *path)
{
    struct client c;
    struct stream s;
    client_open(&c, port);
    stream_open(&c, &s, path);
    refl_response *r = ask_list(&c, &s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(
        r->message_response_case,
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE);
    CU_ASSERT_EQUAL(r->list_services_response->n_service, 5);
    CU_ASSERT(has_service(r, "slotd.v1.Metadata"));
    CU_ASSERT(has_service(r, "slotd.internal.v1.Peer"));
    CU_ASSERT(has_service(r, "grpc.health.v1.Health"));
    CU_ASSERT(has_service(r, "grpc.reflection.v1.ServerReflection"));
    CU_ASSERT(has_service(r, "grpc.reflection.v1alpha.ServerReflection"));
    CU_ASSERT_PTR_NOT_NULL(r->original_request);
    if (r->original_request != NULL) {
        CU_ASSERT_STRING_EQUAL(r->original_request->list_services, "*");
    }
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(stream_close(&c, &s, false), GRPC_STATUS_OK);
    client_close(&c);
}

static void test_list_services_v1(void)
{
    check_list(V1);
}

static void test_list_services_v1alpha(void)
{
    check_list(V1ALPHA);
}

/* Checks that r is a file_descriptor_response whose files are exactly names[] in that order. */
static void check_files(const refl_response *r, const char *const *names, size_t n)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(
        r->message_response_case,
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE);
    CU_ASSERT_EQUAL_FATAL(r->file_descriptor_response->n_file_descriptor_proto, n);
    for (size_t i = 0; i < n; i++) {
        char name[256];
        CU_ASSERT(pb_file_name(&r->file_descriptor_response->file_descriptor_proto[i], name,
                               sizeof(name)));
        CU_ASSERT_STRING_EQUAL(name, names[i]);
    }
}

static void check_not_found(refl_response *r)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(
        r->message_response_case,
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE);
    CU_ASSERT_EQUAL(r->error_response->error_code, NOT_FOUND);
    CU_ASSERT(strstr(r->error_response->error_message, "not found") != NULL);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
}

/* Many requests of every kind on one stream, answered in order; errors do not end the stream. */
static void run_stream_session(const char *path)
{
    struct client c;
    struct stream s;
    client_open(&c, port);
    stream_open(&c, &s, path);

    refl_response *r = ask_symbol(&c, &s, "slotd.v1.Metadata");
    static const char *const metadata[] = {"slotd/v1/metadata.proto"};
    check_files(r, metadata, 1);
    /* The bytes are a FileDescriptorProto: package slotd.v1, first service Metadata, with
     * Propose among its methods. */
    const ProtobufCBinaryData *fd = &r->file_descriptor_response->file_descriptor_proto[0];
    char text[256];
    const uint8_t *svc, *m;
    size_t svc_len, m_len;
    CU_ASSERT(pb_field(fd->data, fd->len, 2, 0, text, sizeof(text), NULL, NULL));
    CU_ASSERT_STRING_EQUAL(text, "slotd.v1");
    CU_ASSERT_FATAL(pb_field(fd->data, fd->len, 6, 0, NULL, 0, &svc, &svc_len));
    CU_ASSERT(pb_field(svc, svc_len, 1, 0, text, sizeof(text), NULL, NULL));
    CU_ASSERT_STRING_EQUAL(text, "Metadata");
    CU_ASSERT_FATAL(pb_field(svc, svc_len, 2, 0, NULL, 0, &m, &m_len));
    CU_ASSERT(pb_field(m, m_len, 1, 0, text, sizeof(text), NULL, NULL));
    CU_ASSERT_STRING_EQUAL(text, "Propose");
    CU_ASSERT_STRING_EQUAL(r->valid_host, "localhost");
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);

    /* A method, a nested name and a leading dot all resolve. */
    check_files(r = ask_symbol(&c, &s, "slotd.v1.Metadata.Propose"), metadata, 1);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    check_files(r = ask_symbol(&c, &s, ".slotd.v1.ProposeRequest"), metadata, 1);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);

    check_not_found(ask_symbol(&c, &s, "slotd.v1.NoSuchService"));

    /* Transitive imports follow the file itself. */
    static const char *const log[] = {"slotd/internal/v1/log.proto", "slotd/v1/metadata.proto"};
    check_files(r = ask_file(&c, &s, "slotd/internal/v1/log.proto"), log, 2);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    check_files(r = ask_symbol(&c, &s, "slotd.internal.v1.LogCommand"), log, 2);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    static const char *const health[] = {"grpc/health/v1/health.proto"};
    check_files(r = ask_symbol(&c, &s, "grpc.health.v1.Health"), health, 1);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    check_not_found(ask_file(&c, &s, "nope/none.proto"));

    /* Extensions: none declared. */
    refl_request q = req_init();
    Grpc__Reflection__V1__ExtensionRequest ext = GRPC__REFLECTION__V1__EXTENSION_REQUEST__INIT;
    ext.containing_type = "slotd.v1.ProposeRequest";
    ext.extension_number = 100;
    q.message_request_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION;
    q.file_containing_extension = &ext;
    check_not_found(stream_ask(&c, &s, &q));
    q = req_init();
    q.message_request_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE;
    q.all_extension_numbers_of_type = "slotd.v1.ProposeRequest";
    r = stream_ask(&c, &s, &q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(
        r->message_response_case,
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE);
    CU_ASSERT_STRING_EQUAL(r->all_extension_numbers_response->base_type_name,
                           "slotd.v1.ProposeRequest");
    CU_ASSERT_EQUAL(r->all_extension_numbers_response->n_extension_number, 0);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    q.all_extension_numbers_of_type = "slotd.v1.Metadata"; /* a service, not a message */
    check_not_found(stream_ask(&c, &s, &q));

    /* No request kind set: an error response, the stream goes on. */
    q = req_init();
    r = stream_ask(&c, &s, &q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(
        r->message_response_case,
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);

    r = ask_list(&c, &s);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r != NULL) {
        grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    }
    CU_ASSERT_EQUAL(stream_close(&c, &s, false), GRPC_STATUS_OK);
    client_close(&c);
}

static void test_session_v1(void)
{
    run_stream_session(V1);
}

static void test_session_v1alpha(void)
{
    run_stream_session(V1ALPHA);
}

static void test_bad_requests(void)
{
    struct client c;
    struct stream s;
    client_open(&c, port);

    /* Bytes that are not a ServerReflectionRequest end the stream with INVALID_ARGUMENT. */
    stream_open(&c, &s, V1);
    static const uint8_t junk[] = {0x22, 0x7f, 0x01};
    size_t out_len;
    CU_ASSERT_PTR_NULL(stream_exchange_raw(&c, &s, junk, sizeof(junk), &out_len));
    CU_ASSERT_EQUAL(stream_close(&c, &s, false), GRPC_STATUS_INVALID_ARGUMENT);

    /* A request above RPC_REFLECTION_REQUEST_BYTES_MAX likewise. */
    stream_open(&c, &s, V1);
    char *big = malloc(RPC_REFLECTION_REQUEST_BYTES_MAX + 2);
    memset(big, 'a', RPC_REFLECTION_REQUEST_BYTES_MAX + 1);
    big[RPC_REFLECTION_REQUEST_BYTES_MAX + 1] = '\0';
    CU_ASSERT_PTR_NULL(ask_symbol(&c, &s, big));
    CU_ASSERT_EQUAL(stream_close(&c, &s, false), GRPC_STATUS_INVALID_ARGUMENT);
    free(big);

    /* A stream the client cancels mid-way leaves the server serving. */
    stream_open(&c, &s, V1);
    refl_response *r = ask_list(&c, &s);
    CU_ASSERT_PTR_NOT_NULL(r);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(stream_close(&c, &s, true), GRPC_STATUS_CANCELLED);
    stream_open(&c, &s, V1);
    r = ask_list(&c, &s);
    CU_ASSERT_PTR_NOT_NULL(r);
    grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(stream_close(&c, &s, false), GRPC_STATUS_OK);
    client_close(&c);
}

static void test_stream_limit(void)
{
    struct client c;
    static struct stream s[RPC_REFLECTION_STREAMS_MAX + 1];
    client_open(&c, port);
    /* Each open stream answers once, so the server holds it before the next one is opened. */
    for (int i = 0; i < RPC_REFLECTION_STREAMS_MAX; i++) {
        stream_open(&c, &s[i], i % 2 ? V1 : V1ALPHA);
        refl_response *r = ask_list(&c, &s[i]);
        CU_ASSERT_PTR_NOT_NULL(r);
        if (r != NULL) {
            grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
        }
    }
    struct stream *extra = &s[RPC_REFLECTION_STREAMS_MAX];
    stream_open(&c, extra, V1);
    CU_ASSERT_EQUAL(stream_close(&c, extra, false), GRPC_STATUS_RESOURCE_EXHAUSTED);
    for (int i = 0; i < RPC_REFLECTION_STREAMS_MAX; i++) {
        CU_ASSERT_EQUAL(stream_close(&c, &s[i], false), GRPC_STATUS_OK);
    }
    /* The slots are free again (the server frees a stream shortly after its status is sent). */
    bool served = false;
    for (int attempt = 0; attempt < 50 && !served; attempt++) {
        stream_open(&c, extra, V1);
        refl_response *r = ask_list(&c, extra);
        served = r != NULL;
        if (r != NULL) {
            grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
        }
        grpc_status_code st = stream_close(&c, extra, false);
        CU_ASSERT(served ? st == GRPC_STATUS_OK : st == GRPC_STATUS_RESOURCE_EXHAUSTED);
        if (!served) {
            struct timespec ts = {0, 20 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    CU_ASSERT(served);
    client_close(&c);
}

/* Open streams (one idle between requests, one never asked anything) end when the server shuts
 * down; shutdown returns and ASan finds nothing left. */
static void test_shutdown_with_open_streams(void)
{
    struct rpc_server *srv;
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "127.0.0.1:0";
    o.cq_threads = 2;
    int p;
    CU_ASSERT_EQUAL_FATAL(rpc_server_new(&o, &srv), SLOTD_OK);
    CU_ASSERT_EQUAL_FATAL(rpc_server_start(srv, &p, NULL, 0), SLOTD_OK);
    struct client c;
    struct stream s[3];
    client_open(&c, p);
    for (int i = 0; i < 3; i++) {
        stream_open(&c, &s[i], i == 1 ? V1ALPHA : V1);
        if (i < 2) {
            refl_response *r = ask_symbol(&c, &s[i], "slotd.v1.Metadata");
            CU_ASSERT_PTR_NOT_NULL(r);
            if (r != NULL) {
                grpc__reflection__v1__server_reflection_response__free_unpacked(r, NULL);
            }
        }
    }
    /* The third stream's call reaches the server before shutdown: wait for its headers. */
    CU_ASSERT(wait_tag(&c, &s[2].tag_init, NULL));
    s[2].init_done = true;
    rpc_server_free(srv);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_NOT_EQUAL(stream_close(&c, &s[i], false), GRPC_STATUS_OK);
    }
    client_close(&c);
}

int main(void)
{
    grpc_init(); /* the clients' own reference; servers take and drop theirs */
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite idx = CU_add_suite("descset", NULL, NULL);
    CU_add_test(idx, "embedded descriptor set indexes every symbol", test_descset_embedded);
    CU_add_test(idx, "malformed set and missing import are refused", test_descset_bad_input);
    CU_pSuite srv = CU_add_suite("reflection", suite_init, suite_clean);
    CU_add_test(srv, "v1 list_services", test_list_services_v1);
    CU_add_test(srv, "v1alpha list_services", test_list_services_v1alpha);
    CU_add_test(srv, "v1 many requests on one stream", test_session_v1);
    CU_add_test(srv, "v1alpha many requests on one stream", test_session_v1alpha);
    CU_add_test(srv, "malformed, oversized and cancelled streams", test_bad_requests);
    CU_add_test(srv, "stream limit -> RESOURCE_EXHAUSTED", test_stream_limit);
    CU_pSuite down = CU_add_suite("reflection shutdown", NULL, NULL);
    CU_add_test(down, "shutdown with open streams", test_shutdown_with_open_streams);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed() + CU_get_number_of_failure_records();
    CU_cleanup_registry();
    grpc_shutdown();
    return failed != 0;
}
