/* meta_table.c - the typed metadata commands and queries as one table each (built from the lists
 * in meta.h) and the generic handlers that validate, apply and serve them through it. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"

struct meta_command {
    unsigned number;
    slot__validate_fn validate;
    slot__apply_fn apply;
    const ProtobufCMessageDescriptor *result;
};

struct meta_query {
    unsigned number;
    slot__validate_fn validate;
    slot__serve_fn serve;
    const ProtobufCMessageDescriptor *result;
};

#define COMMAND_ROW(NAME, v, fn, r)                                                                \
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_##NAME, slot__v_##v, slot__apply_##fn,                    \
     &slotd__v1__##r##__descriptor},
#define QUERY_ROW(NAME, v, fn, r)                                                                  \
    {SLOTD__V1__READ_REQUEST__QUERY_##NAME, slot__v_##v, slot__serve_##fn,                         \
     &slotd__v1__##r##__descriptor},

static const struct meta_command commands[] = {SLOT__META_COMMANDS(COMMAND_ROW)};
static const struct meta_query queries[] = {SLOT__META_QUERIES(QUERY_ROW)};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const struct meta_command *find_command(unsigned number)
{
    for (size_t i = 0; i < N_OF(commands); i++)
        if (commands[i].number == number)
            return &commands[i];
    return NULL;
}

static const struct meta_query *find_query(unsigned number)
{
    for (size_t i = 0; i < N_OF(queries); i++)
        if (queries[i].number == number)
            return &queries[i];
    return NULL;
}

bool slot__meta_is_command(unsigned number)
{
    return find_command(number) != NULL;
}

bool slot__meta_is_query(unsigned number)
{
    return find_query(number) != NULL;
}

int slot__meta_validate_command(unsigned number, const ProtobufCMessage *msg,
                                ProtobufCBinaryData *key, struct slotd_error *err)
{
    const struct meta_command *op = find_command(number);
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field(&slotd__v1__propose_request__descriptor, number);
    if (op == NULL || fd == NULL || msg == NULL) {
        slotd_error_field(err, "command", 0, "command: exactly one command must be set");
        return -1;
    }
    struct slot__vctx v = {fd->name, err, NULL};
    return op->validate(&v, msg, key);
}

int slot__meta_validate_query(unsigned number, const ProtobufCMessage *msg,
                              ProtobufCBinaryData *key, char keybuf[32], struct slotd_error *err)
{
    const struct meta_query *op = find_query(number);
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field(&slotd__v1__read_request__descriptor, number);
    if (op == NULL || fd == NULL || msg == NULL) {
        slotd_error_field(err, "query", 0, "query: exactly one query must be set");
        return -1;
    }
    struct slot__vctx v = {fd->name, err, keybuf};
    return op->validate(&v, msg, key);
}

/* A zeroed message of descriptor d in buf (d->sizeof_message bytes). */
static ProtobufCMessage *result_init(const ProtobufCMessageDescriptor *d, void *buf)
{
    memset(buf, 0, d->sizeof_message);
    d->message_init((ProtobufCMessage *)buf);
    return buf;
}

static void held_free(ProtobufCMessage **held, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (held[i] != NULL)
            protobuf_c_message_free_unpacked(held[i], NULL);
}

/* Sets result as outer's alternative number and packs outer into *buf (caller frees). */
static int reply(ProtobufCMessage *outer, unsigned number, const ProtobufCMessage *result,
                 uint8_t **buf, size_t *len)
{
    slot__oneof_set(outer, number, result);
    *len = protobuf_c_message_get_packed_size(outer);
    *buf = malloc(*len ? *len : 1);
    if (*buf == NULL)
        return STORE_ENOMEM;
    protobuf_c_message_pack(outer, *buf);
    return 0;
}

/* Every result message is a handful of fields: 128 bytes hold the largest. */
#define RESULT_BYTES_MAX 128

int slot__meta_apply(struct slot__apply *a, const ProtobufCMessage *cmd)
{
    const struct meta_command *op = find_command(a->number);
    assert(op != NULL); /* slot__meta_is_command() said so */
    _Alignas(max_align_t) uint8_t buf[RESULT_BYTES_MAX];
    assert(op->result->sizeof_message <= sizeof(buf));
    ProtobufCMessage *result = result_init(op->result, buf);
    int rc = op->apply(a, cmd, result);
    if (rc == 0 && a->err->code == SLOTD_OK)
        rc = reply(&a->resp->base, a->number, result, &a->buf, &a->len);
    held_free(a->held, a->n_held);
    a->n_held = 0;
    return rc;
}

int slot__meta_serve(struct slot__serve *s, const ProtobufCMessage *query)
{
    const struct meta_query *op = find_query(s->number);
    assert(op != NULL);
    _Alignas(max_align_t) uint8_t buf[RESULT_BYTES_MAX];
    assert(op->result->sizeof_message <= sizeof(buf));
    ProtobufCMessage *result = result_init(op->result, buf);
    int rc = op->serve(s, query, result); /* a query is never refused once validated */
    if (rc == 0)
        rc = reply(&s->resp->base, s->number, result, &s->buf, &s->len);
    held_free(s->held, s->n_held);
    s->n_held = 0;
    slot__rows_free(&s->strs);
    slot__rows_free(&s->rows);
    free(s->next.data);
    s->next.data = NULL;
    s->next.len = 0;
    return rc;
}

int slot__apply_row(struct slot__apply *a, const struct slot__key *k,
                    const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    assert(a->n_held < SLOT__HELD_MAX);
    int rc = slot__row_get(a->f, k, d, out);
    if (rc == 0 && *out != NULL)
        a->held[a->n_held++] = *out;
    return rc;
}

int slot__serve_row(struct slot__serve *s, const struct slot__key *k,
                    const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    assert(s->n_held < SLOT__HELD_MAX);
    int rc = slot__store_row_get(s->st, k, d, out);
    if (rc == 0 && *out != NULL)
        s->held[s->n_held++] = *out;
    return rc;
}

void *slot__apply_scratch(struct slot__apply *a, size_t size)
{
    size_t at = (a->scratch_used + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    assert(at + size <= sizeof(a->scratch)); /* a few messages per command */
    a->scratch_used = at + size;
    memset(a->scratch + at, 0, size);
    return a->scratch + at;
}

/* Field n of message m (a programmer error when absent). */
static const ProtobufCFieldDescriptor *field(const ProtobufCMessage *m, unsigned n)
{
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(m->descriptor, n);
    assert(fd != NULL);
    return fd;
}

int slot__serve_get(struct slot__serve *s, const struct slot__key *k,
                    const ProtobufCMessageDescriptor *d, ProtobufCMessage *result)
{
    ProtobufCMessage *row;
    int rc = slot__serve_row(s, k, d, &row);
    if (rc != 0)
        return rc;
    const ProtobufCFieldDescriptor *found = field(result, 1), *msg = field(result, 2);
    assert(found->type == PROTOBUF_C_TYPE_BOOL && msg->descriptor == d);
    *(protobuf_c_boolean *)((char *)result + found->offset) = row != NULL;
    *(ProtobufCMessage **)((char *)result + msg->offset) = row;
    return 0;
}

void slot__serve_list_result(struct slot__serve *s, ProtobufCMessage *result, bool rows)
{
    const ProtobufCFieldDescriptor *list = field(result, 1), *next = field(result, 2);
    assert(list->label == PROTOBUF_C_LABEL_REPEATED && next->type == PROTOBUF_C_TYPE_BYTES);
    *(size_t *)((char *)result + list->quantifier_offset) = rows ? s->rows.n : s->strs.n;
    *(void **)((char *)result + list->offset) = rows ? (void *)s->rows.v : (void *)s->strs.v;
    *(ProtobufCBinaryData *)((char *)result + next->offset) = s->next;
}

int slot__serve_list(struct slot__serve *s, const struct slot__key *p,
                     const ProtobufCBinaryData *cursor, uint32_t limit,
                     const ProtobufCMessageDescriptor *d, ProtobufCMessage *result)
{
    limit = slot__page(limit);
    int rc =
        d != NULL ? slot__rows_init(&s->rows, d, limit) : slot__rows_init(&s->strs, NULL, limit);
    if (rc != 0)
        return rc;
    rc = d != NULL ? slot__scan(s->st, p, cursor, limit, slot__collect_row, &s->rows, &s->next)
                   : slot__scan(s->st, p, cursor, limit, slot__collect_suffix, &s->strs, &s->next);
    if (rc == 0)
        slot__serve_list_result(s, result, d != NULL);
    return rc;
}
