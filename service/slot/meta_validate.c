/* meta_validate.c - validation and routing keys of the typed metadata commands and queries: every
 * violation is INVALID_FIELD naming the field ("add_subscribers.uids") and its limit. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"

static void routing_str(ProtobufCBinaryData *key, const char *s)
{
    key->data = (uint8_t *)s;
    key->len = strlen(s);
}

static int v_str(struct slot__vctx *v, const char *path, const char *s, size_t min, size_t max)
{
    size_t n = strlen(s);
    if (n >= min && n <= max)
        return 0;
    char field[64];
    snprintf(field, sizeof(field), "%s.%s", v->root, path);
    slotd_error_field(v->err, field, max, "%s: must be %zu..%zu bytes, got %zu", field, min, max,
                      n);
    return -1;
}

static int v_max(struct slot__vctx *v, const char *path, uint64_t val, uint64_t min, uint64_t max)
{
    if (val >= min && val <= max)
        return 0;
    char field[64];
    snprintf(field, sizeof(field), "%s.%s", v->root, path);
    slotd_error_field(v->err, field, max, "%s: %llu is outside %llu..%llu", field,
                      (unsigned long long)val, (unsigned long long)min, (unsigned long long)max);
    return -1;
}

static int v_required(struct slot__vctx *v, const char *path, const void *p)
{
    if (p != NULL)
        return 0;
    char field[64];
    snprintf(field, sizeof(field), "%s.%s", v->root, path);
    slotd_error_field(v->err, field, 0, "%s: required", field);
    return -1;
}

static int v_uid(struct slot__vctx *v, const char *path, const char *uid)
{
    return v_str(v, path, uid, 1, SLOT_UID_MAX);
}

static int v_channel(struct slot__vctx *v, const char *path, const char *id)
{
    return v_str(v, path, id, 1, SLOT_CHANNEL_ID_MAX);
}

/* A channel reference: <at>channel_id 1..128 bytes and <at>channel_type 1..255 ("" or "task."). */
static int v_channel_ref(struct slot__vctx *v, const char *at, const char *id, uint32_t type)
{
    char id_path[32], type_path[32];
    snprintf(id_path, sizeof(id_path), "%schannel_id", at);
    snprintf(type_path, sizeof(type_path), "%schannel_type", at);
    return v_channel(v, id_path, id) || v_max(v, type_path, type, 1, SLOT_SMALL_INT_MAX) ? -1 : 0;
}

/* The string / uint32 field `name` of m (a programmer error when m has none). */
static const char *str_field(const ProtobufCMessage *m, const char *name)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    return *(char *const *)((const char *)m + fd->offset);
}

static uint32_t u32_field(const ProtobufCMessage *m, const char *name)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    return *(const uint32_t *)((const char *)m + fd->offset);
}

/* A batch of uids: 1..1000 entries, each a valid uid, 64 KiB in all. */
static int v_uids(struct slot__vctx *v, size_t n, char *const *uids)
{
    char field[64];
    snprintf(field, sizeof(field), "%s.uids", v->root);
    if (n == 0 || n > SLOT_BATCH_UIDS_MAX) {
        slotd_error_field(v->err, field, SLOT_BATCH_UIDS_MAX, "%s: %zu entries, want 1..%u", field,
                          n, SLOT_BATCH_UIDS_MAX);
        return -1;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(uids[i]);
        if (len == 0 || len > SLOT_UID_MAX) {
            slotd_error_field(v->err, field, SLOT_UID_MAX,
                              "%s: entry %zu must be 1..%u bytes, got %zu", field, i, SLOT_UID_MAX,
                              len);
            return -1;
        }
        total += len;
    }
    if (total > SLOT_BATCH_BYTES_MAX) {
        slotd_error_field(v->err, field, SLOT_BATCH_BYTES_MAX, "%s: %zu bytes > %u", field, total,
                          SLOT_BATCH_BYTES_MAX);
        return -1;
    }
    return 0;
}

static int v_page(struct slot__vctx *v, const ProtobufCBinaryData *cursor, uint32_t limit)
{
    char field[64];
    if (slot__cursor_check(cursor) != 0) {
        snprintf(field, sizeof(field), "%s.cursor", v->root);
        slotd_error_field(v->err, field, 0, "%s: not a cursor this server returned", field);
        return -1;
    }
    return v_max(v, "limit", limit, 0, SLOT_PAGE_MAX);
}

static int v_list(struct slot__vctx *v, Slotd__V1__MemberList list)
{
    return v_max(v, "list", (uint64_t)(unsigned)list,
                 SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS,
                 SLOTD__V1__MEMBER_LIST__MEMBER_LIST_DENYLIST);
}

/* ---- commands ---- */

static int v_user_row(struct slot__vctx *v, const Slotd__V1__User *u, ProtobufCBinaryData *key)
{
    if (v_required(v, "user", u) || v_uid(v, "user.uid", u->uid) ||
        v_str(v, "user.token", u->token, 0, SLOT_TOKEN_MAX) ||
        v_max(v, "user.device_flag", u->device_flag, 0, SLOT_SMALL_INT_MAX) ||
        v_max(v, "user.device_level", u->device_level, 0, SLOT_SMALL_INT_MAX))
        return -1;
    routing_str(key, u->uid);
    return 0;
}

int slot__v_create_user(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    return v_user_row(v, ((const Slotd__V1__CreateUserCommand *)m)->user, key);
}

int slot__v_update_user(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    return v_user_row(v, ((const Slotd__V1__UpdateUserCommand *)m)->user, key);
}

int slot__v_put_device(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__Device *d = ((const Slotd__V1__PutDeviceCommand *)m)->device;
    if (v_required(v, "device", d) || v_uid(v, "device.uid", d->uid) ||
        v_max(v, "device.device_flag", d->device_flag, 0, SLOT_SMALL_INT_MAX) ||
        v_str(v, "device.token", d->token, 0, SLOT_TOKEN_MAX) ||
        v_max(v, "device.device_level", d->device_level, 0, SLOT_SMALL_INT_MAX))
        return -1;
    routing_str(key, d->uid);
    return 0;
}

int slot__v_remove_device(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__RemoveDeviceCommand *c = (const void *)m;
    if (v_uid(v, "uid", c->uid) || v_max(v, "device_flag", c->device_flag, 0, SLOT_SMALL_INT_MAX))
        return -1;
    routing_str(key, c->uid);
    return 0;
}

int slot__v_set_system_uid(struct slot__vctx *v, const ProtobufCMessage *m,
                           ProtobufCBinaryData *key)
{
    const Slotd__V1__SetSystemUidCommand *c = (const void *)m;
    if (v_uid(v, "uid", c->uid))
        return -1;
    routing_str(key, c->uid);
    return 0;
}

int slot__v_create_channel(struct slot__vctx *v, const ProtobufCMessage *m,
                           ProtobufCBinaryData *key)
{
    const Slotd__V1__CreateChannelCommand *c = (const void *)m;
    if (v_channel(v, "channel_id", c->channel_id) ||
        v_max(v, "channel_type", c->channel_type, 1, SLOT_SMALL_INT_MAX) ||
        v_max(v, "event_capacity", c->event_capacity, 0, SLOT_EVENT_CAPACITY_MAX))
        return -1;
    routing_str(key, c->channel_id);
    return 0;
}

int slot__v_update_channel_flags(struct slot__vctx *v, const ProtobufCMessage *m,
                                 ProtobufCBinaryData *key)
{
    const Slotd__V1__UpdateChannelFlagsCommand *c = (const void *)m;
    if (v_channel_ref(v, "", c->channel_id, c->channel_type))
        return -1;
    routing_str(key, c->channel_id);
    return 0;
}

int slot__v_subscribers(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__SubscribersCommand *c = (const void *)m;
    if (v_channel_ref(v, "", c->channel_id, c->channel_type) || v_uids(v, c->n_uids, c->uids))
        return -1;
    routing_str(key, c->channel_id);
    return 0;
}

int slot__v_channel_list(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__ChannelListCommand *c = (const void *)m;
    if (v_channel_ref(v, "", c->channel_id, c->channel_type) || v_uids(v, c->n_uids, c->uids))
        return -1;
    routing_str(key, c->channel_id);
    return 0;
}

/* The commands of the (uid, channel_id) rows share their first two fields. */
static int v_uid_channel(struct slot__vctx *v, const char *uid, const char *channel, uint32_t type,
                         ProtobufCBinaryData *key)
{
    if (v_uid(v, "uid", uid) || v_channel_ref(v, "", channel, type))
        return -1;
    routing_str(key, uid);
    return 0;
}

int slot__v_join_channel(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__JoinChannelCommand *c = (const void *)m;
    if (v_uid_channel(v, c->uid, c->channel_id, c->channel_type, key))
        return -1;
    return v_max(v, "activated_at_ms", c->activated_at_ms, 1, INT64_MAX);
}

int slot__v_activate(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__ActivateConversationCommand *c = (const void *)m;
    if (v_uid_channel(v, c->uid, c->channel_id, c->channel_type, key))
        return -1;
    return v_max(v, "activated_at_ms", c->activated_at_ms, 1, INT64_MAX);
}

/* Node ids: non-zero, distinct, at most 16. */
static int v_nodes(struct slot__vctx *v, const char *path, size_t n, const uint64_t *ids)
{
    char field[64];
    snprintf(field, sizeof(field), "%s.%s", v->root, path);
    if (n > SLOT_REPLICAS_MAX) {
        slotd_error_field(v->err, field, SLOT_REPLICAS_MAX, "%s: %zu entries > %u", field, n,
                          SLOT_REPLICAS_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < i; j++)
            dup = dup || ids[j] == ids[i];
        if (ids[i] == 0 || dup) {
            slotd_error_field(v->err, field, SLOT_REPLICAS_MAX,
                              "%s: entry %zu (%llu) is 0 or repeated", field, i,
                              (unsigned long long)ids[i]);
            return -1;
        }
    }
    return 0;
}

static bool has_node(size_t n, const uint64_t *ids, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

int slot__v_update_runtime_meta(struct slot__vctx *v, const ProtobufCMessage *m,
                                ProtobufCBinaryData *key)
{
    const Slotd__V1__UpdateRuntimeMetaCommand *c = (const void *)m;
    const Slotd__V1__ChannelRuntimeMeta *meta = c->meta;
    if (v_channel_ref(v, "", c->channel_id, c->channel_type) || v_required(v, "meta", meta) ||
        v_nodes(v, "meta.replicas", meta->n_replicas, meta->replicas) ||
        v_nodes(v, "meta.isr", meta->n_isr, meta->isr))
        return -1;
    char field[64];
    for (size_t i = 0; i < meta->n_isr; i++) {
        if (!has_node(meta->n_replicas, meta->replicas, meta->isr[i])) {
            snprintf(field, sizeof(field), "%s.meta.isr", v->root);
            slotd_error_field(v->err, field, 0, "%s: node %llu is not in meta.replicas", field,
                              (unsigned long long)meta->isr[i]);
            return -1;
        }
    }
    if (meta->leader != 0 && !has_node(meta->n_replicas, meta->replicas, meta->leader)) {
        snprintf(field, sizeof(field), "%s.meta.leader", v->root);
        slotd_error_field(v->err, field, 0, "%s: node %llu is not in meta.replicas", field,
                          (unsigned long long)meta->leader);
        return -1;
    }
    if (v_max(v, "meta.min_isr", meta->min_isr, 0, meta->n_replicas) ||
        v_max(v, "meta.status", (uint64_t)(unsigned)meta->status, 0,
              SLOTD__V1__CHANNEL_STATUS__CHANNEL_STATUS_DELETING))
        return -1;
    /* Epochs never go back: the new ones are at least the expected (current) ones. */
    if (v_max(v, "meta.channel_epoch", meta->channel_epoch, c->expected_channel_epoch,
              UINT64_MAX) ||
        v_max(v, "meta.leader_epoch", meta->leader_epoch, c->expected_leader_epoch, UINT64_MAX))
        return -1;
    routing_str(key, c->channel_id);
    return 0;
}

int slot__v_advance_retention(struct slot__vctx *v, const ProtobufCMessage *m,
                              ProtobufCBinaryData *key)
{
    const Slotd__V1__AdvanceRetentionCommand *c = (const void *)m;
    if (v_channel_ref(v, "", c->channel_id, c->channel_type))
        return -1;
    routing_str(key, c->channel_id);
    return 0;
}

int slot__v_put_migration_task(struct slot__vctx *v, const ProtobufCMessage *m,
                               ProtobufCBinaryData *key)
{
    const Slotd__V1__ChannelMigrationTask *t =
        ((const Slotd__V1__PutMigrationTaskCommand *)m)->task;
    if (v_required(v, "task", t) || v_channel_ref(v, "task.", t->channel_id, t->channel_type) ||
        v_max(v, "task.task_id", t->task_id, 1, UINT64_MAX) ||
        v_max(v, "task.status", (uint64_t)(unsigned)t->status,
              SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING,
              SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_FAILED) ||
        v_str(v, "task.last_error", t->last_error, 0, SLOT_TOKEN_MAX))
        return -1;
    routing_str(key, t->channel_id);
    return 0;
}

int slot__v_bind_plugin(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__BindPluginCommand *c = (const void *)m;
    if (v_uid(v, "uid", c->uid) || v_str(v, "plugin_no", c->plugin_no, 1, SLOT_NAME_MAX))
        return -1;
    routing_str(key, c->uid);
    return 0;
}

int slot__v_unbind_plugin(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__UnbindPluginCommand *c = (const void *)m;
    if (v_uid(v, "uid", c->uid))
        return -1;
    routing_str(key, c->uid);
    return 0;
}

int slot__v_append_event(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__AppendEventCommand *c = (const void *)m;
    if (v_channel_ref(v, "", c->channel_id, c->channel_type) ||
        v_str(v, "event_type", c->event_type, 1, SLOT_NAME_MAX) ||
        v_max(v, "payload", c->payload.len, 0, SLOT_EVENT_PAYLOAD_MAX))
        return -1;
    routing_str(key, c->channel_id);
    return 0;
}

/* ---- queries ---- */

int slot__v_uid_only(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    /* The messages of a uid alone (get_user, is_system_uid, get_plugin_binding, delete_user):
     * uid is field 1. */
    const char *uid =
        *(char *const *)((const char *)m +
                         protobuf_c_message_descriptor_get_field(m->descriptor, 1)->offset);
    if (v_uid(v, "uid", uid))
        return -1;
    routing_str(key, uid);
    return 0;
}

int slot__v_get_device(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__GetDeviceQuery *q = (const void *)m;
    if (v_uid(v, "uid", q->uid) || v_max(v, "device_flag", q->device_flag, 0, SLOT_SMALL_INT_MAX))
        return -1;
    routing_str(key, q->uid);
    return 0;
}

int slot__v_channel_only(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    /* The messages of a channel alone (get_channel, get_runtime_meta, delete_channel). */
    const char *id = str_field(m, "channel_id");
    if (v_channel_ref(v, "", id, u32_field(m, "channel_type")))
        return -1;
    routing_str(key, id);
    return 0;
}

int slot__v_list_members(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__ListMembersQuery *q = (const void *)m;
    if (v_channel_ref(v, "", q->channel_id, q->channel_type) || v_list(v, q->list) ||
        v_page(v, &q->cursor, q->limit))
        return -1;
    routing_str(key, q->channel_id);
    return 0;
}

int slot__v_check_member(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__CheckMemberQuery *q = (const void *)m;
    if (v_channel_ref(v, "", q->channel_id, q->channel_type) || v_list(v, q->list) ||
        v_uid(v, "uid", q->uid))
        return -1;
    routing_str(key, q->channel_id);
    return 0;
}

int slot__v_uid_channel(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    /* Commands and queries of the (uid, channel) rows. */
    return v_uid_channel(v, str_field(m, "uid"), str_field(m, "channel_id"),
                         u32_field(m, "channel_type"), key);
}

int slot__v_list_conversations(struct slot__vctx *v, const ProtobufCMessage *m,
                               ProtobufCBinaryData *key)
{
    const Slotd__V1__ListConversationsQuery *q = (const void *)m;
    if (v_uid(v, "uid", q->uid) || v_page(v, &q->cursor, q->limit))
        return -1;
    routing_str(key, q->uid);
    return 0;
}

/* A listing that spans hash slots: its cursor (a spanning one) names the hash slot it is
 * routed by (v->keybuf holds a key of that hash slot). */
static int v_span(struct slot__vctx *v, const ProtobufCBinaryData *cursor, uint32_t limit,
                  ProtobufCBinaryData *key)
{
    uint16_t hs;
    const uint8_t *suffix;
    size_t sl;
    char field[64];
    if (slot_list_cursor_decode(cursor, &hs, &suffix, &sl) != 0) {
        snprintf(field, sizeof(field), "%s.cursor", v->root);
        slotd_error_field(v->err, field, 0, "%s: not a cursor this server returned", field);
        return -1;
    }
    if (v_max(v, "limit", limit, 0, SLOT_PAGE_MAX))
        return -1;
    slot__hash_slot_key(hs, v->keybuf);
    routing_str(key, v->keybuf);
    return 0;
}

int slot__v_list_migration_tasks(struct slot__vctx *v, const ProtobufCMessage *m,
                                 ProtobufCBinaryData *key)
{
    const Slotd__V1__ListMigrationTasksQuery *q = (const void *)m;
    if (v_max(v, "status", (uint64_t)(unsigned)q->status, 0,
              SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_FAILED))
        return -1;
    if (q->channel_id[0] == '\0') /* every channel's tasks */
        return v_max(v, "channel_type", q->channel_type, 0, 0)
                   ? -1
                   : v_span(v, &q->cursor, q->limit, key);
    if (v_channel_ref(v, "", q->channel_id, q->channel_type) || v_page(v, &q->cursor, q->limit))
        return -1;
    routing_str(key, q->channel_id);
    return 0;
}

int slot__v_list_devices(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__ListDevicesQuery *q = (const void *)m;
    if (v_uid(v, "uid", q->uid) || v_page(v, &q->cursor, q->limit))
        return -1;
    routing_str(key, q->uid);
    return 0;
}

int slot__v_list_system_uids(struct slot__vctx *v, const ProtobufCMessage *m,
                             ProtobufCBinaryData *key)
{
    const Slotd__V1__ListSystemUidsQuery *q = (const void *)m;
    return v_span(v, &q->cursor, q->limit, key);
}

int slot__v_list_channels(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__ListChannelsQuery *q = (const void *)m;
    if (v_str(v, "id_prefix", q->id_prefix, 0, SLOT_CHANNEL_ID_MAX) ||
        v_max(v, "channel_type", q->channel_type, 0, SLOT_SMALL_INT_MAX))
        return -1;
    return v_span(v, &q->cursor, q->limit, key);
}

int slot__v_list_runtime_meta(struct slot__vctx *v, const ProtobufCMessage *m,
                              ProtobufCBinaryData *key)
{
    const Slotd__V1__ListRuntimeMetaQuery *q = (const void *)m;
    return v_span(v, &q->cursor, q->limit, key);
}

int slot__v_list_events(struct slot__vctx *v, const ProtobufCMessage *m, ProtobufCBinaryData *key)
{
    const Slotd__V1__ListEventsQuery *q = (const void *)m;
    if (v_channel_ref(v, "", q->channel_id, q->channel_type) || v_page(v, &q->cursor, q->limit))
        return -1;
    routing_str(key, q->channel_id);
    return 0;
}

static char hash_slot_keys[256][32];
static pthread_once_t hash_slot_keys_once = PTHREAD_ONCE_INIT;

static void hash_slot_keys_init(void)
{
    /* crc32 spreads "hash-slot-<n>" over all 256 values within a few thousand n; the bound
     * is a programmer-error guard (tests/unit/slot checks every hash slot). */
    unsigned left = 256;
    for (unsigned n = 0; n < (1u << 20) && left > 0; n++) {
        char k[32];
        snprintf(k, sizeof(k), "hash-slot-%u", n);
        uint16_t hs = route_hash_slot(k, strlen(k));
        if (hash_slot_keys[hs][0] == '\0') {
            memcpy(hash_slot_keys[hs], k, sizeof(k));
            left--;
        }
    }
}

void slot__hash_slot_key(uint16_t hs, char keybuf[32])
{
    pthread_once(&hash_slot_keys_once, hash_slot_keys_init);
    memcpy(keybuf, hs < 256 ? hash_slot_keys[hs] : "", hs < 256 ? 32 : 1);
}

/* Routed by the hash slot it names (v->keybuf holds a key of that hash slot). */
int slot__v_list_plugin_users(struct slot__vctx *v, const ProtobufCMessage *m,
                              ProtobufCBinaryData *key)
{
    const Slotd__V1__ListPluginUsersQuery *q = (const void *)m;
    if (v_max(v, "hash_slot", q->hash_slot, 0, ROUTE_HASH_SLOTS - 1) ||
        v_str(v, "plugin_no", q->plugin_no, 1, SLOT_NAME_MAX) || v_page(v, &q->cursor, q->limit))
        return -1;
    slot__hash_slot_key((uint16_t)q->hash_slot, v->keybuf);
    routing_str(key, v->keybuf);
    return 0;
}
