/* bench_wire.c - keys and protobuf encoding/decoding of slotd and etcd requests for slotbench. */
#include "bench_wire.h"

#include "bench_err.h"
#include "call.h"
#include "etcd_rpc.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

enum bench_req bench_wire_req_of(enum bench_op op)
{
    switch (op) {
    case BENCH_OP_PUT:
        return BENCH_REQ_PUT;
    case BENCH_OP_GET:
        return BENCH_REQ_GET_LINEARIZABLE;
    case BENCH_OP_GET_LEADER_LOCAL:
        return BENCH_REQ_GET_LEADER_LOCAL;
    case BENCH_OP_GET_LOCAL:
        return BENCH_REQ_GET_LOCAL;
    default:
        assert(!"bench_wire_req_of: MIXED has no single request kind");
        return BENCH_REQ_PUT;
    }
}

const char *bench_wire_method(enum bench_target target, enum bench_req req)
{
    if (target == BENCH_TARGET_ETCD)
        return req == BENCH_REQ_PUT ? "/etcdserverpb.KV/Put" : "/etcdserverpb.KV/Range";
    if (target == BENCH_TARGET_ECHO)
        return BENCH_WIRE_ECHO_METHOD;
    return req == BENCH_REQ_PUT ? "/slotd.v1.Metadata/Propose" : "/slotd.v1.Metadata/Read";
}

void bench_wire_key_format(char *buf, unsigned key_size, uint64_t index)
{
    assert(key_size >= 5);
    int n = snprintf(buf, (size_t)key_size + 1, "key-%0*llu", (int)(key_size - 4),
                     (unsigned long long)index);
    assert(n == (int)key_size);
    (void)n;
}

static size_t wire_pack(const ProtobufCMessage *m, uint8_t *buf, size_t buf_len)
{
    size_t size = protobuf_c_message_get_packed_size(m);
    if (size <= buf_len)
        protobuf_c_message_pack(m, buf);
    return size;
}

static size_t wire_encode_slotd(enum bench_req req, bool no_forward, ProtobufCBinaryData key,
                                ProtobufCBinaryData value, uint8_t *buf, size_t buf_len)
{
    if (req == BENCH_REQ_PUT) {
        Slotd__V1__PutCommand put = SLOTD__V1__PUT_COMMAND__INIT;
        Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
        put.key = key;
        put.value = value;
        m.no_forward = no_forward;
        m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
        m.put = &put;
        return wire_pack(&m.base, buf, buf_len);
    }
    Slotd__V1__GetQuery get = SLOTD__V1__GET_QUERY__INIT;
    Slotd__V1__ReadRequest m = SLOTD__V1__READ_REQUEST__INIT;
    get.key = key;
    m.consistency = req == BENCH_REQ_GET_LOCAL ? SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL
                    : req == BENCH_REQ_GET_LEADER_LOCAL
                        ? SLOTD__V1__CONSISTENCY__CONSISTENCY_LEADER_LOCAL
                        : SLOTD__V1__CONSISTENCY__CONSISTENCY_LINEARIZABLE;
    m.no_forward = no_forward;
    m.query_case = SLOTD__V1__READ_REQUEST__QUERY_GET;
    m.get = &get;
    return wire_pack(&m.base, buf, buf_len);
}

static size_t wire_encode_etcd(enum bench_req req, ProtobufCBinaryData key,
                               ProtobufCBinaryData value, uint8_t *buf, size_t buf_len)
{
    if (req == BENCH_REQ_PUT) {
        Etcdserverpb__PutRequest m = ETCDSERVERPB__PUT_REQUEST__INIT;
        m.key = key;
        m.value = value;
        return wire_pack(&m.base, buf, buf_len);
    }
    assert(req != BENCH_REQ_GET_LEADER_LOCAL);
    Etcdserverpb__RangeRequest m = ETCDSERVERPB__RANGE_REQUEST__INIT;
    m.key = key;
    m.serializable = req == BENCH_REQ_GET_LOCAL;
    return wire_pack(&m.base, buf, buf_len);
}

size_t bench_wire_request_encode(enum bench_target target, enum bench_req req, bool no_forward,
                                 const uint8_t *key, size_t key_len, const uint8_t *value,
                                 size_t value_len, uint8_t *buf, size_t buf_len)
{
    ProtobufCBinaryData k = {key_len, (uint8_t *)key};
    ProtobufCBinaryData v = {value_len, (uint8_t *)value};
    if (target == BENCH_TARGET_ETCD)
        return wire_encode_etcd(req, k, v, buf, buf_len);
    return wire_encode_slotd(req, no_forward, k, v, buf, buf_len);
}

static const ProtobufCMessageDescriptor *wire_response_descriptor(enum bench_target target,
                                                                  enum bench_req req)
{
    if (target == BENCH_TARGET_ECHO) /* the request itself comes back */
        return req == BENCH_REQ_PUT ? &slotd__v1__propose_request__descriptor
                                    : &slotd__v1__read_request__descriptor;
    if (target == BENCH_TARGET_ETCD)
        return req == BENCH_REQ_PUT ? &etcdserverpb__put_response__descriptor
                                    : &etcdserverpb__range_response__descriptor;
    return req == BENCH_REQ_PUT ? &slotd__v1__propose_response__descriptor
                                : &slotd__v1__read_response__descriptor;
}

/* Whether a decoded response carries what the request asked for; sets *found for reads. */
static bool wire_response_valid(enum bench_target target, enum bench_req req,
                                const ProtobufCMessage *m, bool *found)
{
    *found = true;
    if (target == BENCH_TARGET_ECHO) {
        if (req == BENCH_REQ_PUT) {
            const Slotd__V1__ProposeRequest *p = (const Slotd__V1__ProposeRequest *)m;
            return p->command_case == SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT &&
                   p->put->key.len > 0;
        }
        const Slotd__V1__ReadRequest *r = (const Slotd__V1__ReadRequest *)m;
        return r->query_case == SLOTD__V1__READ_REQUEST__QUERY_GET && r->get->key.len > 0;
    }
    if (target == BENCH_TARGET_ETCD) {
        if (req != BENCH_REQ_PUT)
            *found = ((const Etcdserverpb__RangeResponse *)m)->n_kvs > 0;
        return true;
    }
    if (req == BENCH_REQ_PUT)
        return ((const Slotd__V1__ProposeResponse *)m)->result_case ==
               SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT;
    const Slotd__V1__ReadResponse *r = (const Slotd__V1__ReadResponse *)m;
    if (r->result_case != SLOTD__V1__READ_RESPONSE__RESULT_GET)
        return false;
    *found = r->get->found;
    return true;
}

int bench_wire_response_check(enum bench_target target, enum bench_req req, const uint8_t *buf,
                              size_t len, bool *found)
{
    ProtobufCMessage *m =
        protobuf_c_message_unpack(wire_response_descriptor(target, req), NULL, len, buf);
    if (!m)
        return BENCH_EMALFORMED;
    bool valid = wire_response_valid(target, req, m, found);
    protobuf_c_message_free_unpacked(m, NULL);
    return valid ? BENCH_OK : BENCH_EMALFORMED;
}

unsigned bench_wire_detail_bucket(int code)
{
    return code >= 0 && code < BENCH_DETAIL_OTHER ? (unsigned)code : BENCH_DETAIL_OTHER;
}

int bench_wire_error_detail(const uint8_t *buf, size_t len, unsigned *code)
{
    struct slotd_status st; /* libslotd's call layer decodes google.rpc.Status */
    slotd_call_status_reset(&st);
    if (slotd_call_detail_decode(buf, len, &st) != 0)
        return BENCH_EMALFORMED;
    *code = bench_wire_detail_bucket(st.detail_code);
    return BENCH_OK;
}

const char *bench_wire_error_code_name(unsigned code)
{
    const ProtobufCEnumValue *v =
        code < BENCH_DETAIL_OTHER
            ? protobuf_c_enum_descriptor_get_value(&slotd__v1__error_code__descriptor, (int)code)
            : NULL;
    if (!v)
        return "OTHER";
    const char *prefix = "ERROR_CODE_";
    size_t n = strlen(prefix);
    return strncmp(v->name, prefix, n) == 0 ? v->name + n : v->name;
}

/* ---- Watch ---------------------------------------------------------------------------- */

const char *bench_wire_watch_method(enum bench_target target)
{
    return target == BENCH_TARGET_ETCD ? "/etcdserverpb.Watch/Watch" : "/slotd.v1.Metadata/Watch";
}

size_t bench_wire_watch_request_encode(enum bench_target target, const uint8_t *prefix,
                                       size_t prefix_len, uint8_t *buf, size_t buf_len)
{
    assert(prefix_len >= 1 && prefix_len <= 255 && prefix[prefix_len - 1] != 0xff);
    if (target != BENCH_TARGET_ETCD) {
        Slotd__V1__WatchRequest m = SLOTD__V1__WATCH_REQUEST__INIT;
        m.prefix.data = (uint8_t *)prefix;
        m.prefix.len = prefix_len;
        return wire_pack(&m.base, buf, buf_len);
    }
    uint8_t end[255];
    memcpy(end, prefix, prefix_len);
    end[prefix_len - 1]++; /* "key-" -> "key.": [key-, key.) is every key with the prefix */
    Etcdserverpb__WatchCreateRequest create = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    create.key.data = (uint8_t *)prefix;
    create.key.len = prefix_len;
    create.range_end.data = end;
    create.range_end.len = prefix_len;
    Etcdserverpb__WatchRequest m = ETCDSERVERPB__WATCH_REQUEST__INIT;
    m.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    m.create_request = &create;
    return wire_pack(&m.base, buf, buf_len);
}

/* One field of a protobuf message: its number, and its varint value or its bytes. */
struct wire_field {
    uint32_t number;
    unsigned type;  /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
    uint64_t value; /* type 0 */
    const uint8_t *data;
    size_t len; /* type 2 */
};

/* Reads a varint (at most 10 bytes); false when it runs past end or is too long. */
static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The next field at *p: 1, 0 at the end of the message, -1 when the bytes are malformed. */
static int wire_next(const uint8_t **p, const uint8_t *end, struct wire_field *f)
{
    if (*p == end)
        return 0;
    uint64_t tag = 0;
    if (!wire_varint(p, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return -1;
    f->number = (uint32_t)(tag >> 3);
    f->type = (unsigned)(tag & 7);
    switch (f->type) {
    case 0:
        return wire_varint(p, end, &f->value) ? 1 : -1;
    case 1:
    case 5: {
        size_t n = f->type == 1 ? 8 : 4;
        if ((size_t)(end - *p) < n)
            return -1;
        *p += n;
        return 1;
    }
    case 2: {
        uint64_t n = 0;
        if (!wire_varint(p, end, &n) || n > (uint64_t)(end - *p))
            return -1;
        f->data = *p;
        f->len = (size_t)n;
        *p += n;
        return 1;
    }
    default: /* groups (3, 4) are not in these messages */
        return -1;
    }
}

/* The length-delimited field number of the message in buf, non-empty: true when found (the
 * last occurrence wins, as in protobuf) and the message is well formed. */
static bool wire_find_bytes(const uint8_t *buf, size_t len, uint32_t number, struct wire_field *out)
{
    const uint8_t *p = buf, *end = buf + len;
    struct wire_field f;
    bool found = false;
    int rc;
    while ((rc = wire_next(&p, end, &f)) == 1) {
        if (f.number == number && f.type == 2) {
            *out = f;
            found = true;
        }
    }
    return rc == 0 && found && out->len > 0;
}

/* Whether an event carries a key: slotd WatchEvent.key (2); etcd Event.kv (2) -> key (1). */
static bool wire_event_has_key(enum bench_target target, const struct wire_field *ev)
{
    struct wire_field kv, key;
    if (target != BENCH_TARGET_ETCD)
        return wire_find_bytes(ev->data, ev->len, 2, &key);
    return wire_find_bytes(ev->data, ev->len, 2, &kv) && wire_find_bytes(kv.data, kv.len, 1, &key);
}

int bench_wire_watch_decode(enum bench_target target, const uint8_t *buf, size_t len,
                            struct bench_watch_msg *m)
{
    memset(m, 0, sizeof(*m));
    bool etcd = target == BENCH_TARGET_ETCD;
    uint32_t events_field = etcd ? 11 : 1;
    const uint8_t *p = buf, *end = buf + len;
    struct wire_field f;
    int rc;
    while ((rc = wire_next(&p, end, &f)) == 1) {
        if (f.number == events_field && f.type == 2) {
            if (!wire_event_has_key(target, &f))
                break;
            m->events++;
        } else if (f.number == 3 && f.type == 0) {
            m->created = f.value != 0; /* both: created = 3 */
        } else if (!etcd && f.number == 4 && f.type == 0) {
            m->progress = f.value != 0;
        } else if (etcd && f.number == 4 && f.type == 0) {
            m->canceled = f.value != 0;
        } else if (etcd && f.number == 6 && f.type == 2) {
            size_t n = f.len < sizeof(m->cancel_reason) - 1 ? f.len : sizeof(m->cancel_reason) - 1;
            memcpy(m->cancel_reason, f.data, n);
            m->cancel_reason[n] = '\0';
        }
    }
    if (rc != 0) {
        memset(m, 0, sizeof(*m));
        return BENCH_EMALFORMED;
    }
    if (etcd && m->events == 0 && !m->created && !m->canceled)
        m->progress = true; /* a header-only message: a progress notification */
    return BENCH_OK;
}
