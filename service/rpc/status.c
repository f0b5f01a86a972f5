/* status.c - slotd error setters and the single slotd_err -> gRPC status / ErrorDetail mapping. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "google/protobuf/any.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

SLOTD_ERRLIST_STRERROR(slotd_strerror, SLOTD_ERRORS, "unknown error")

/* Clears e, then code and the formatted message: the start of every slotd_error_* setter. */
static void error_vset(struct slotd_error *e, int code, const char *fmt, va_list ap)
{
    memset(e, 0, sizeof(*e));
    e->code = code;
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
}

void slotd_error_set(struct slotd_error *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, code, fmt, ap);
    va_end(ap);
}

void slotd_error_field(struct slotd_error *e, const char *field, uint64_t limit, const char *fmt,
                       ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, SLOTD_EINVALID_FIELD, fmt, ap);
    va_end(ap);
    snprintf(e->field, sizeof(e->field), "%s", field);
    e->limit = limit;
}

void slotd_error_compacted(struct slotd_error *e, uint32_t group, uint64_t oldest, const char *fmt,
                           ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(e, SLOTD_ECOMPACTED, fmt, ap);
    va_end(ap);
    e->compacted_group = group;
    e->compacted_index = oldest;
}

void slotd_error_leader_hint(struct slotd_error *e, uint64_t node, const char *address,
                             uint32_t group, uint64_t term)
{
    e->has_leader_hint = true;
    e->leader_node = node;
    snprintf(e->leader_address, sizeof(e->leader_address), "%s", address ? address : "");
    e->group = group;
    e->term = term;
}

grpc_status_code slotd_error_grpc_code(int code)
{
    switch ((enum slotd_err)code) {
    case SLOTD_OK:
        return GRPC_STATUS_OK;
    case SLOTD_EINVALID_FIELD:
    case SLOTD_EMALFORMED:
        return GRPC_STATUS_INVALID_ARGUMENT;
    case SLOTD_ENOT_LEADER:
        return GRPC_STATUS_FAILED_PRECONDITION;
    case SLOTD_ENO_LEADER:
    case SLOTD_EROUTE_NOT_READY:
    case SLOTD_EUNKNOWN_OUTCOME:
    case SLOTD_ESHUTTING_DOWN:
    case SLOTD_EHASH_SLOT_FENCED:
        return GRPC_STATUS_UNAVAILABLE;
    case SLOTD_EQUEUE_FULL:
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case SLOTD_EWRONG_GROUP:
    case SLOTD_ESTALE_FENCE:
        return GRPC_STATUS_ABORTED;
    case SLOTD_ENOT_FOUND:
        return GRPC_STATUS_NOT_FOUND;
    case SLOTD_ESTORAGE:
    case SLOTD_EINTERNAL:
        return GRPC_STATUS_INTERNAL;
    case SLOTD_ETIMEOUT:
        return GRPC_STATUS_DEADLINE_EXCEEDED;
    case SLOTD_EUNIMPLEMENTED:
        return GRPC_STATUS_UNIMPLEMENTED;
    case SLOTD_EUNAUTHENTICATED:
        return GRPC_STATUS_UNAUTHENTICATED;
    case SLOTD_EPRECONDITION:
        return GRPC_STATUS_FAILED_PRECONDITION;
    case SLOTD_EPERMISSION_DENIED:
        return GRPC_STATUS_PERMISSION_DENIED;
    case SLOTD_ECOMPACTED:
        return GRPC_STATUS_OUT_OF_RANGE;
    }
    return GRPC_STATUS_INTERNAL;
}

int slotd_error_detail_code(int code)
{
    switch ((enum slotd_err)code) {
    case SLOTD_EINVALID_FIELD:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_INVALID_FIELD;
    case SLOTD_EMALFORMED:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_MALFORMED;
    case SLOTD_ENOT_LEADER:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER;
    case SLOTD_ENO_LEADER:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_NO_LEADER;
    case SLOTD_EROUTE_NOT_READY:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_ROUTE_NOT_READY;
    case SLOTD_EQUEUE_FULL:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_QUEUE_FULL;
    case SLOTD_EUNKNOWN_OUTCOME:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_UNKNOWN_OUTCOME;
    case SLOTD_EWRONG_GROUP:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_WRONG_GROUP;
    case SLOTD_ESTALE_FENCE:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_STALE_FENCE;
    case SLOTD_EHASH_SLOT_FENCED:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_HASH_SLOT_FENCED;
    case SLOTD_ENOT_FOUND:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_FOUND;
    case SLOTD_ESHUTTING_DOWN:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_SHUTTING_DOWN;
    case SLOTD_ESTORAGE:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_STORAGE;
    case SLOTD_ECOMPACTED:
        return SLOTD__V1__ERROR_CODE__ERROR_CODE_COMPACTED;
    case SLOTD_OK:
    case SLOTD_ETIMEOUT:
    case SLOTD_EINTERNAL:
    case SLOTD_EUNIMPLEMENTED:
    case SLOTD_EUNAUTHENTICATED:
    case SLOTD_EPRECONDITION:
    case SLOTD_EPERMISSION_DENIED:
        break;
    }
    return SLOTD__V1__ERROR_CODE__ERROR_CODE_UNSPECIFIED;
}

const char *slotd_error_message(const struct slotd_error *e)
{
    return e->message[0] != '\0' ? e->message : slotd_strerror(e->code);
}

int slotd_error_encode_details(const struct slotd_error *e, uint8_t **buf, size_t *len)
{
    Slotd__V1__LeaderHint hint = SLOTD__V1__LEADER_HINT__INIT;
    Slotd__V1__ErrorDetail detail = SLOTD__V1__ERROR_DETAIL__INIT;
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
    Google__Protobuf__Any *anys[1] = {&any};
    Google__Rpc__Status status = GOOGLE__RPC__STATUS__INIT;
    char field[sizeof(e->field) + 1];
    char address[sizeof(e->leader_address) + 1];

    /* Copies, so a struct filled without the setters still encodes a terminated string. */
    snprintf(field, sizeof(field), "%.*s", (int)sizeof(e->field), e->field);
    snprintf(address, sizeof(address), "%.*s", (int)sizeof(e->leader_address), e->leader_address);
    detail.code = (Slotd__V1__ErrorCode)slotd_error_detail_code(e->code);
    detail.field = field;
    detail.limit = e->limit;
    detail.retry_after_ms = e->retry_after_ms;
    if (e->has_current_version)
        detail.current_version = e->current_version;
    if (e->current_runtime_meta_len > 0 && e->current_runtime_meta_len <= SLOTD_ERROR_CURRENT_MAX)
        detail.current_runtime_meta = slotd__v1__channel_runtime_meta__unpack(
            NULL, e->current_runtime_meta_len, e->current_runtime_meta);
    Slotd__V1__WatchPosition compacted = SLOTD__V1__WATCH_POSITION__INIT;
    if (e->compacted_group != 0) {
        compacted.group_id = e->compacted_group;
        compacted.index = e->compacted_index;
        detail.compacted = &compacted;
    }
    if (e->has_leader_hint) {
        hint.node_id = e->leader_node;
        hint.address = address;
        hint.group_id = e->group;
        hint.term = e->term;
        detail.leader_hint = &hint;
    }
    size_t detail_len = slotd__v1__error_detail__get_packed_size(&detail);
    uint8_t *detail_buf = malloc(detail_len > 0 ? detail_len : 1);
    if (detail_buf != NULL)
        slotd__v1__error_detail__pack(&detail, detail_buf);
    if (detail.current_runtime_meta != NULL)
        slotd__v1__channel_runtime_meta__free_unpacked(detail.current_runtime_meta, NULL);
    if (detail_buf == NULL) {
        goto err;
    }
    any.type_url = SLOTD_ERROR_DETAIL_TYPE_URL;
    any.value.data = detail_buf;
    any.value.len = detail_len;

    status.code = (int32_t)slotd_error_grpc_code(e->code);
    status.message = (char *)slotd_error_message(e);
    status.n_details = 1;
    status.details = anys;
    size_t status_len = google__rpc__status__get_packed_size(&status);
    uint8_t *status_buf = malloc(status_len > 0 ? status_len : 1);
    if (status_buf == NULL) {
        goto err_after_detail;
    }
    *len = google__rpc__status__pack(&status, status_buf);
    *buf = status_buf;
    free(detail_buf);
    return SLOTD_OK;

err_after_detail:
    free(detail_buf);
err:
    return SLOTD_EINTERNAL;
}
