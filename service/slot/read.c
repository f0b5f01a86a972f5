/* read.c - serves a validated ReadRequest's query against a group's applied state. */
#include <stdlib.h>

#include "service/slot/meta.h"
#include "service/slot/slot.h"

/* Serves a typed query (validated again: the request was re-decoded). */
static int serve_typed(struct store *store, const uint8_t *owned, uint16_t hash_slot,
                       const Slotd__V1__ReadRequest *r, Slotd__V1__ReadResponse *resp,
                       uint8_t **out, size_t *out_len, struct slotd_error *err)
{
    const ProtobufCMessage *q = slot__oneof_get(&r->base, r->query_case);
    ProtobufCBinaryData key;
    char keybuf[32];
    if (slot__meta_validate_query(r->query_case, q, &key, keybuf, err) != 0)
        return -1;
    struct slot__serve s = {.st = store,
                            .hs = hash_slot,
                            .owned = owned,
                            .number = r->query_case,
                            .resp = resp,
                            .err = err};
    int rc = slot__meta_serve(&s, q);
    if (rc != 0) {
        free(s.buf);
        slotd_error_set(err, SLOTD_ESTORAGE, "read: %s", store_strerror(rc));
        return -1;
    }
    *out = s.buf;
    *out_len = s.len;
    return 0;
}

static int serve_get(struct store *store, uint16_t hash_slot, const Slotd__V1__GetQuery *q,
                     Slotd__V1__ReadResponse *resp, Slotd__V1__GetResult *get, void **value,
                     struct slotd_error *err)
{
    bool found;
    size_t vlen;
    uint64_t version, lease;
    int rc = slot_fsm_get_lease(store, hash_slot, q->key.data, q->key.len, &found, value, &vlen,
                                &version, &lease);
    if (rc != 0) {
        slotd_error_set(err, SLOTD_ESTORAGE, "read: %s", store_strerror(rc));
        return -1;
    }
    get->found = found;
    get->value.data = *value;
    get->value.len = vlen;
    get->version = version;
    get->lease = lease;
    resp->result_case = SLOTD__V1__READ_RESPONSE__RESULT_GET;
    resp->get = get;
    return 0;
}

int slot_serve_read(struct store *store, const uint8_t *owned, uint16_t hash_slot,
                    const uint8_t *req, size_t len, uint32_t group, uint64_t applied_index,
                    uint64_t term, uint8_t **out, size_t *out_len, struct slotd_error *err)
{
    Slotd__V1__ReadRequest *r = slotd__v1__read_request__unpack(NULL, len, req);
    if (r == NULL) {
        slotd_error_set(err, SLOTD_EINTERNAL, "read: request no longer decodes");
        return -1;
    }
    Slotd__V1__ReadResponse resp = SLOTD__V1__READ_RESPONSE__INIT;
    resp.applied_index = applied_index;
    resp.group_id = group;
    resp.term = term;
    Slotd__V1__GetResult get = SLOTD__V1__GET_RESULT__INIT;
    Slotd__V1__RangeResult range = SLOTD__V1__RANGE_RESULT__INIT;
    void *value = NULL;
    int rc;
    if (slot__meta_is_query(r->query_case)) {
        rc = serve_typed(store, owned, hash_slot, r, &resp, out, out_len, err);
        slotd__v1__read_request__free_unpacked(r, NULL);
        return rc;
    }
    switch (r->query_case) {
    case SLOTD__V1__READ_REQUEST__QUERY_GET:
        rc = serve_get(store, hash_slot, r->get, &resp, &get, &value, err);
        break;
    case SLOTD__V1__READ_REQUEST__QUERY_RANGE:
        rc = slot_serve_range(store, owned, hash_slot, r->range, &range, err);
        resp.result_case = SLOTD__V1__READ_RESPONSE__RESULT_RANGE;
        resp.range = &range;
        break;
    default:
        slotd_error_set(err, SLOTD_EINVALID_FIELD, "query: not set or unknown");
        rc = -1;
        break;
    }
    if (rc == 0) {
        *out_len = slotd__v1__read_response__get_packed_size(&resp);
        *out = malloc(*out_len ? *out_len : 1);
        if (*out == NULL) {
            slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
            rc = -1;
        } else {
            slotd__v1__read_response__pack(&resp, *out);
        }
    }
    free(value);
    slot_range_result_free(&range);
    slotd__v1__read_request__free_unpacked(r, NULL);
    return rc;
}
