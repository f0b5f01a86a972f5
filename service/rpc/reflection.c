/* reflection.c - grpc.reflection.v1 and v1alpha ServerReflection/ServerReflectionInfo (bidi
 * streaming) answered from the FileDescriptorSet embedded at build time (descset.h).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descset.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rpc_internal.h"

/* v1alpha's messages are v1's with another package name: identical on the wire, so both paths
 * use the v1 protobuf-c code. */
#define REFL_V1_PATH "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
#define REFL_V1ALPHA_PATH "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"

typedef Grpc__Reflection__V1__ServerReflectionRequest refl_request;
typedef Grpc__Reflection__V1__ServerReflectionResponse refl_response;

/* One ServerReflectionInfo stream. Requests are answered one at a time: a receive is armed, its
 * answer sent, and only when the send completed is the next receive armed, so at most one batch
 * per op type is outstanding and a client cannot make the stream buffer. The close batch is armed
 * from the start. When the client half-closes, the stream breaks or a request is refused, the
 * status batch goes out once neither a receive nor a send is outstanding; the stream is freed once
 * both the status and the close batch completed. */
struct rpc__refl {
    struct rpc__tag recv_tag, send_tag, close_tag, status_tag;
    struct rpc_server *server;
    grpc_call *call;
    pthread_mutex_t mu; /* guards everything below: events may arrive on several CQ threads */
    grpc_byte_buffer *in, *out;
    bool recv_pending, send_pending;
    bool ended;  /* no more requests will be read */
    bool closed; /* the close batch completed */
    bool status_started, status_done;
    int cancelled; /* RECV_CLOSE_ON_SERVER output */
    grpc_status_code code;
    grpc_slice status_details;
};

int rpc__reflection_register(struct rpc_server *s)
{
    char err[256];
    if (rpc_descset_parse(rpc_descriptor_set, rpc_descriptor_set_len, &s->descset, err,
                          sizeof(err)) != SLOTD_OK) {
        fprintf(stderr, "rpc: embedded %s\n", err);
        return SLOTD_EINTERNAL;
    }
    if (rpc_server_add_unary(s, REFL_V1_PATH, NULL, NULL) != SLOTD_OK ||
        rpc_server_add_unary(s, REFL_V1ALPHA_PATH, NULL, NULL) != SLOTD_OK) {
        return SLOTD_EINTERNAL; /* s->descset is freed with the server */
    }
    for (size_t i = 0; i < s->n_methods; i++) {
        if (strcmp(s->methods[i].path, REFL_V1_PATH) == 0 ||
            strcmp(s->methods[i].path, REFL_V1ALPHA_PATH) == 0) {
            s->methods[i].kind = RPC__METHOD_REFLECTION;
            s->methods[i].counted = false;
        }
    }
    return SLOTD_OK;
}

/* ---- answers ----------------------------------------------------------------------------- */

static void answer_error(refl_response *out, Grpc__Reflection__V1__ErrorResponse *er,
                         grpc_status_code code, char *msg)
{
    er->error_code = (int32_t)code;
    er->error_message = msg;
    out->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
    out->error_response = er;
}

/* Every distinct service of the server's method table, in registration order. */
static size_t services_list(const struct rpc_server *s,
                            char names[RPC_METHODS_MAX][RPC_METHOD_PATH_MAX])
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_methods; i++) {
        const char *path = s->methods[i].path + 1; /* past the leading '/' */
        const char *slash = strchr(path, '/');
        if (slash == NULL) {
            continue;
        }
        int len = (int)(slash - path);
        size_t k = 0;
        while (k < n && !(strncmp(names[k], path, (size_t)len) == 0 && names[k][len] == '\0')) {
            k++;
        }
        if (k == n) {
            snprintf(names[n++], RPC_METHOD_PATH_MAX, "%.*s", len, path);
        }
    }
    return n;
}

/* Space for the sub-messages of one response; lives on the stack while it is packed. */
struct answer {
    refl_response out;
    Grpc__Reflection__V1__ErrorResponse error;
    Grpc__Reflection__V1__FileDescriptorResponse files;
    ProtobufCBinaryData file_bytes[RPC_DESCSET_FILES_MAX];
    Grpc__Reflection__V1__ListServiceResponse list;
    Grpc__Reflection__V1__ServiceResponse service[RPC_METHODS_MAX];
    Grpc__Reflection__V1__ServiceResponse *service_ptr[RPC_METHODS_MAX];
    char service_names[RPC_METHODS_MAX][RPC_METHOD_PATH_MAX];
    Grpc__Reflection__V1__ExtensionNumberResponse ext;
    char message[320];
};

/* A file_descriptor_response with files[file] and its transitive imports. */
static void answer_files(const struct rpc_descset *d, size_t file, struct answer *a)
{
    size_t order[RPC_DESCSET_FILES_MAX];
    size_t n = rpc_descset_closure(d, file, order);
    for (size_t i = 0; i < n; i++) {
        a->file_bytes[i].data = (uint8_t *)d->files[order[i]].buf;
        a->file_bytes[i].len = d->files[order[i]].len;
    }
    a->files.n_file_descriptor_proto = n;
    a->files.file_descriptor_proto = a->file_bytes;
    a->out.message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
    a->out.file_descriptor_response = &a->files;
}

static void answer_list(const struct rpc_server *s, struct answer *a)
{
    size_t n = services_list(s, a->service_names);
    for (size_t i = 0; i < n; i++) {
        grpc__reflection__v1__service_response__init(&a->service[i]);
        a->service[i].name = a->service_names[i];
        a->service_ptr[i] = &a->service[i];
    }
    a->list.n_service = n;
    a->list.service = a->service_ptr;
    a->out.message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
    a->out.list_services_response = &a->list;
}

/* A symbol as clients send it, without a leading dot. */
static const char *symbol_name(const char *name)
{
    return name[0] == '.' ? name + 1 : name;
}

/* Fills a->out with the answer to in (borrowed; a->out points into it and into s). */
static void answer_build(const struct rpc_server *s, const refl_request *in, struct answer *a)
{
    const struct rpc_descset *d = s->descset;
    const struct rpc_descset_symbol *sym;
    long file;
    a->out.valid_host = in->host;
    a->out.original_request = (refl_request *)in;
    switch (in->message_request_case) {
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
        answer_list(s, a);
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
        file = rpc_descset_find_file(d, in->file_by_filename);
        if (file >= 0) {
            answer_files(d, (size_t)file, a);
        } else {
            snprintf(a->message, sizeof(a->message), "file %.200s not found", in->file_by_filename);
            answer_error(&a->out, &a->error, GRPC_STATUS_NOT_FOUND, a->message);
        }
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL:
        sym = rpc_descset_find_symbol(d, symbol_name(in->file_containing_symbol));
        if (sym != NULL) {
            answer_files(d, sym->file, a);
        } else {
            snprintf(a->message, sizeof(a->message), "symbol %.200s not found",
                     in->file_containing_symbol);
            answer_error(&a->out, &a->error, GRPC_STATUS_NOT_FOUND, a->message);
        }
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION:
        snprintf(
            a->message, sizeof(a->message), "extension %d of %.200s not found",
            in->file_containing_extension != NULL ? in->file_containing_extension->extension_number
                                                  : 0,
            in->file_containing_extension != NULL ? in->file_containing_extension->containing_type
                                                  : "");
        answer_error(&a->out, &a->error, GRPC_STATUS_NOT_FOUND, a->message);
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE:
        sym = rpc_descset_find_symbol(d, symbol_name(in->all_extension_numbers_of_type));
        if (sym != NULL && sym->kind == RPC_DESCSET_MESSAGE) {
            /* slotd's protos declare no extensions: a known message has none. */
            a->ext.base_type_name = sym->name;
            a->out.message_response_case =
                GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE;
            a->out.all_extension_numbers_response = &a->ext;
        } else {
            snprintf(a->message, sizeof(a->message), "message type %.200s not found",
                     in->all_extension_numbers_of_type);
            answer_error(&a->out, &a->error, GRPC_STATUS_NOT_FOUND, a->message);
        }
        break;
    default:
        snprintf(a->message, sizeof(a->message), "reflection request kind not supported");
        answer_error(&a->out, &a->error, GRPC_STATUS_UNIMPLEMENTED, a->message);
        break;
    }
}

/* The serialized answer to the request bytes, or NULL with *code/msg set when the request is
 * refused (the stream then ends with that status). */
static grpc_byte_buffer *answer_bytes(const struct rpc_server *s, grpc_byte_buffer *in_bb,
                                      grpc_status_code *code, char *msg, size_t msglen)
{
    size_t in_len = grpc_byte_buffer_length(in_bb);
    if (in_len > RPC_REFLECTION_REQUEST_BYTES_MAX) {
        *code = GRPC_STATUS_INVALID_ARGUMENT;
        snprintf(msg, msglen, "reflection: request of %zu bytes exceeds the limit of %d", in_len,
                 RPC_REFLECTION_REQUEST_BYTES_MAX);
        return NULL;
    }
    grpc_slice body;
    if (!rpc__bytes_flatten(in_bb, &body)) {
        *code = GRPC_STATUS_INVALID_ARGUMENT;
        snprintf(msg, msglen, "reflection: cannot read the request");
        return NULL;
    }
    refl_request *in = grpc__reflection__v1__server_reflection_request__unpack(
        NULL, GRPC_SLICE_LENGTH(body), GRPC_SLICE_START_PTR(body));
    grpc_slice_unref(body);
    if (in == NULL) {
        *code = GRPC_STATUS_INVALID_ARGUMENT;
        snprintf(msg, msglen, "reflection: cannot decode ServerReflectionRequest");
        return NULL;
    }
    struct answer *a = calloc(1, sizeof(*a));
    grpc_byte_buffer *bb = NULL;
    if (a == NULL) {
        *code = GRPC_STATUS_RESOURCE_EXHAUSTED;
        snprintf(msg, msglen, "reflection: out of memory");
        goto out;
    }
    grpc__reflection__v1__server_reflection_response__init(&a->out);
    grpc__reflection__v1__error_response__init(&a->error);
    grpc__reflection__v1__file_descriptor_response__init(&a->files);
    grpc__reflection__v1__list_service_response__init(&a->list);
    grpc__reflection__v1__extension_number_response__init(&a->ext);
    answer_build(s, in, a);
    size_t size = grpc__reflection__v1__server_reflection_response__get_packed_size(&a->out);
    grpc_slice slice = grpc_slice_malloc(size);
    grpc__reflection__v1__server_reflection_response__pack(&a->out, GRPC_SLICE_START_PTR(slice));
    bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    free(a);
out:
    grpc__reflection__v1__server_reflection_request__free_unpacked(in, NULL);
    return bb;
}

/* ---- the stream -------------------------------------------------------------------------- */

static void refl_start_recv_locked(struct rpc__refl *r)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &r->in;
    r->recv_pending = true;
    grpc_call_error e = grpc_call_start_batch(r->call, &op, 1, &r->recv_tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

/* Starts the status batch once nothing else but the close batch is outstanding. */
static void refl_maybe_finish_locked(struct rpc__refl *r)
{
    if (!(r->ended || r->closed) || r->recv_pending || r->send_pending || r->status_started) {
        return;
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op.data.send_status_from_server.status = r->code;
    op.data.send_status_from_server.status_details = &r->status_details;
    r->status_started = true;
    grpc_call_error e = grpc_call_start_batch(r->call, &op, 1, &r->status_tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

static void refl_end_locked(struct rpc__refl *r, grpc_status_code code, const char *msg)
{
    r->ended = true;
    r->code = code;
    grpc_slice_unref(r->status_details);
    r->status_details = grpc_slice_from_copied_string(msg);
}

static void refl_on_recv_locked(struct rpc__refl *r, bool ok)
{
    r->recv_pending = false;
    if (!ok || r->in == NULL || r->closed) {
        r->ended = true; /* half-close (status OK) or a broken stream */
        if (r->in != NULL) {
            grpc_byte_buffer_destroy(r->in);
            r->in = NULL;
        }
        return;
    }
    grpc_status_code code = GRPC_STATUS_OK;
    char msg[160];
    r->out = answer_bytes(r->server, r->in, &code, msg, sizeof(msg));
    grpc_byte_buffer_destroy(r->in);
    r->in = NULL;
    if (r->out == NULL) {
        refl_end_locked(r, code, msg);
        return;
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = r->out;
    r->send_pending = true;
    grpc_call_error e = grpc_call_start_batch(r->call, &op, 1, &r->send_tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

static void refl_free(struct rpc__refl *r)
{
    struct rpc_server *s = r->server;
    grpc_call_unref(r->call);
    grpc_slice_unref(r->status_details);
    pthread_mutex_destroy(&r->mu);
    free(r);
    pthread_mutex_lock(&s->mu);
    assert(s->n_reflections > 0 && s->live_calls > 0);
    s->n_reflections--;
    s->live_calls--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void rpc__reflection_on_event(struct rpc__tag *t, bool ok)
{
    struct rpc__refl *r = t->owner;
    pthread_mutex_lock(&r->mu);
    switch (t->kind) {
    case RPC__TAG_REFL_RECV:
        refl_on_recv_locked(r, ok);
        break;
    case RPC__TAG_REFL_SEND:
        r->send_pending = false;
        grpc_byte_buffer_destroy(r->out);
        r->out = NULL;
        if (!ok) {
            r->ended = true; /* broken stream: the close batch tells the rest */
        } else if (!r->ended && !r->closed) {
            refl_start_recv_locked(r);
        }
        break;
    case RPC__TAG_REFL_CLOSE:
        r->closed = true;
        break;
    case RPC__TAG_REFL_STATUS:
        r->status_done = true;
        break;
    default:
        assert(!"not a reflection tag");
    }
    refl_maybe_finish_locked(r);
    bool done = r->status_done && r->closed;
    pthread_mutex_unlock(&r->mu);
    if (done) {
        refl_free(r); /* nothing else is outstanding: no other thread can see r */
    }
}

static void refl_tag_init(struct rpc__tag *t, enum rpc__tag_kind kind, struct rpc__refl *r)
{
    t->kind = kind;
    t->owner = r;
    t->on_event = rpc__reflection_on_event;
}

void rpc__reflection_start(struct rpc_server *s, struct rpc_call *c)
{
    struct slotd_error e;
    struct rpc__refl *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        slotd_error_set(&e, SLOTD_EINTERNAL, "reflection: out of memory");
        goto err;
    }
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        slotd_error_set(&e, SLOTD_EINTERNAL, "reflection: cannot create a mutex");
        goto err_after_alloc;
    }
    r->server = s;
    r->code = GRPC_STATUS_OK;
    r->status_details = grpc_empty_slice();
    refl_tag_init(&r->recv_tag, RPC__TAG_REFL_RECV, r);
    refl_tag_init(&r->send_tag, RPC__TAG_REFL_SEND, r);
    refl_tag_init(&r->close_tag, RPC__TAG_REFL_CLOSE, r);
    refl_tag_init(&r->status_tag, RPC__TAG_REFL_STATUS, r);

    pthread_mutex_lock(&s->mu);
    if (s->n_reflections >= RPC_REFLECTION_STREAMS_MAX) {
        pthread_mutex_unlock(&s->mu);
        slotd_error_set(&e, SLOTD_EQUEUE_FULL, "reflection: %d streams open, the limit",
                        RPC_REFLECTION_STREAMS_MAX);
        e.retry_after_ms = 1000;
        goto err_after_mutex;
    }
    s->n_reflections++;
    s->live_calls++; /* the stream's own; c's is dropped by rpc__call_take below */
    pthread_mutex_unlock(&s->mu);
    r->call = rpc__call_take(c);

    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[0].data.recv_close_on_server.cancelled = &r->cancelled;
    ops[1].op = GRPC_OP_SEND_INITIAL_METADATA;
    pthread_mutex_lock(&r->mu);
    grpc_call_error ce = grpc_call_start_batch(r->call, ops, 2, &r->close_tag, NULL);
    assert(ce == GRPC_CALL_OK);
    (void)ce;
    refl_start_recv_locked(r);
    pthread_mutex_unlock(&r->mu);
    return;

err_after_mutex:
    pthread_mutex_destroy(&r->mu);
err_after_alloc:
    free(r);
err:
    rpc_call_fail(c, &e);
}
