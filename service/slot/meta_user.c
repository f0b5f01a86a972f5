/* meta_user.c - uid-owned tables: users, devices, the system uid registry and plugin bindings
 * (with the per-hash-slot reverse index plugin -> uids): their commands and queries. */
#include <stdlib.h>
#include <string.h>

#include "service/slot/meta.h"

static void uid_key(struct slot__key *k, uint16_t hs, uint8_t table, const char *uid)
{
    slot__key_init(k, hs, table);
    slot__key_tail(k, uid);
}

static void device_key(struct slot__key *k, uint16_t hs, const char *uid, uint32_t flag)
{
    slot__key_init(k, hs, SLOT_TABLE_DEVICE);
    slot__key_str(k, uid);
    slot__key_u8(k, (uint8_t)flag);
}

static void plugin_user_key(struct slot__key *k, uint16_t hs, const char *plugin, const char *uid)
{
    slot__key_init(k, hs, SLOT_TABLE_PLUGIN_USER);
    slot__key_str(k, plugin);
    if (uid != NULL)
        slot__key_tail(k, uid);
}

/* ---- users ---- */

static int apply_create_user(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__User *u = ((const Slotd__V1__CreateUserCommand *)m)->user;
    struct slot__key k;
    uid_key(&k, a->hs, SLOT_TABLE_USER, u->uid);
    ProtobufCMessage *old;
    int rc = slot__row_get(a->f, &k, &slotd__v1__user__descriptor, &old);
    if (rc != 0)
        return rc;
    Slotd__V1__UserResult res = SLOTD__V1__USER_RESULT__INIT;
    res.changed = old == NULL; /* creating an existing user changes nothing */
    res.user = old != NULL ? (Slotd__V1__User *)old : (Slotd__V1__User *)u;
    if (old == NULL)
        rc = slot__row_put(a->f, &k, &u->base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (old != NULL)
        protobuf_c_message_free_unpacked(old, NULL);
    return rc;
}

static int apply_update_user(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__User *u = ((const Slotd__V1__UpdateUserCommand *)m)->user;
    struct slot__key k;
    uid_key(&k, a->hs, SLOT_TABLE_USER, u->uid);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, &k, &slotd__v1__user__descriptor, &raw);
    if (rc != 0)
        return rc;
    if (raw == NULL) {
        slot__not_found(a->err, "user", u->uid);
        return 0;
    }
    const Slotd__V1__User *old = (const Slotd__V1__User *)raw;
    Slotd__V1__UserResult res = SLOTD__V1__USER_RESULT__INIT;
    res.changed = strcmp(old->token, u->token) != 0 || old->device_flag != u->device_flag ||
                  old->device_level != u->device_level;
    res.user = (Slotd__V1__User *)u;
    if (res.changed)
        rc = slot__row_put(a->f, &k, &u->base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    protobuf_c_message_free_unpacked(raw, NULL);
    return rc;
}

/* ---- devices ---- */

static int apply_put_device(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__Device *d = ((const Slotd__V1__PutDeviceCommand *)m)->device;
    struct slot__key k;
    device_key(&k, a->hs, d->uid, d->device_flag);
    ProtobufCMessage *old;
    int rc = slot__row_get(a->f, &k, &slotd__v1__device__descriptor, &old);
    if (rc != 0)
        return rc;
    Slotd__V1__DeviceResult res = SLOTD__V1__DEVICE_RESULT__INIT;
    res.created = old == NULL;
    res.device = (Slotd__V1__Device *)d;
    rc = slot__row_put(a->f, &k, &d->base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (old != NULL)
        protobuf_c_message_free_unpacked(old, NULL);
    return rc;
}

static int apply_remove_device(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__RemoveDeviceCommand *c = (const void *)m;
    struct slot__key k;
    device_key(&k, a->hs, c->uid, c->device_flag);
    ProtobufCMessage *old;
    int rc = slot__row_get(a->f, &k, &slotd__v1__device__descriptor, &old);
    if (rc != 0)
        return rc;
    Slotd__V1__RemoveResult res = SLOTD__V1__REMOVE_RESULT__INIT;
    res.removed = old != NULL;
    if (old != NULL)
        rc = slot__key_delete(a->f, &k);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (old != NULL)
        protobuf_c_message_free_unpacked(old, NULL);
    return rc;
}

/* ---- system uids ---- */

static int apply_set_system_uid(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__SetSystemUidCommand *c = (const void *)m;
    struct slot__key k;
    uid_key(&k, a->hs, SLOT_TABLE_SYSTEM_UID, c->uid);
    bool present;
    int rc = slot__flag_get(a->f, &k, &present);
    if (rc != 0)
        return rc;
    Slotd__V1__SystemUidResult res = SLOTD__V1__SYSTEM_UID_RESULT__INIT;
    res.changed = present != c->system;
    res.system = c->system;
    if (res.changed)
        rc = c->system ? slot__flag_put(a->f, &k) : slot__key_delete(a->f, &k);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    return rc;
}

/* ---- plugin bindings: [S uid] -> PluginBinding, reverse [s plugin_no][S uid] ---- */

static int apply_bind_plugin(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__BindPluginCommand *c = (const void *)m;
    struct slot__key k, rk;
    uid_key(&k, a->hs, SLOT_TABLE_PLUGIN, c->uid);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, &k, &slotd__v1__plugin_binding__descriptor, &raw);
    if (rc != 0)
        return rc;
    const Slotd__V1__PluginBinding *old = (const void *)raw;
    Slotd__V1__PluginBinding b = SLOTD__V1__PLUGIN_BINDING__INIT;
    b.uid = c->uid;
    b.plugin_no = c->plugin_no;
    Slotd__V1__PluginBindingResult res = SLOTD__V1__PLUGIN_BINDING_RESULT__INIT;
    res.changed = old == NULL || strcmp(old->plugin_no, c->plugin_no) != 0;
    res.binding = &b;
    if (res.changed && old != NULL) { /* re-binding moves the reverse index entry */
        plugin_user_key(&rk, a->hs, old->plugin_no, c->uid);
        rc = slot__key_delete(a->f, &rk);
    }
    if (rc == 0 && res.changed) {
        plugin_user_key(&rk, a->hs, c->plugin_no, c->uid);
        rc = slot__flag_put(a->f, &rk);
    }
    if (rc == 0 && res.changed)
        rc = slot__row_put(a->f, &k, &b.base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (raw != NULL)
        protobuf_c_message_free_unpacked(raw, NULL);
    return rc;
}

static int apply_unbind_plugin(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__UnbindPluginCommand *c = (const void *)m;
    struct slot__key k, rk;
    uid_key(&k, a->hs, SLOT_TABLE_PLUGIN, c->uid);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, &k, &slotd__v1__plugin_binding__descriptor, &raw);
    if (rc != 0)
        return rc;
    const Slotd__V1__PluginBinding *old = (const void *)raw;
    Slotd__V1__PluginBinding b = SLOTD__V1__PLUGIN_BINDING__INIT;
    b.uid = c->uid;
    Slotd__V1__PluginBindingResult res = SLOTD__V1__PLUGIN_BINDING_RESULT__INIT;
    res.changed = old != NULL;
    res.binding = &b;
    if (old != NULL) {
        plugin_user_key(&rk, a->hs, old->plugin_no, c->uid);
        rc = slot__key_delete(a->f, &rk);
        if (rc == 0)
            rc = slot__key_delete(a->f, &k);
    }
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (raw != NULL)
        protobuf_c_message_free_unpacked(raw, NULL);
    return rc;
}

const struct slot__meta_op slot__user_ops[] = {
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_CREATE_USER, apply_create_user, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_UPDATE_USER, apply_update_user, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT_DEVICE, apply_put_device, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_DEVICE, apply_remove_device, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_SET_SYSTEM_UID, apply_set_system_uid, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_BIND_PLUGIN, apply_bind_plugin, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_UNBIND_PLUGIN, apply_unbind_plugin, NULL},
};
const size_t slot__user_ops_len = sizeof(slot__user_ops) / sizeof(slot__user_ops[0]);

/* ---- queries ---- */

static int serve_get_user(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__GetUserQuery *q = (const void *)m;
    struct slot__key k;
    uid_key(&k, s->hs, SLOT_TABLE_USER, q->uid);
    ProtobufCMessage *row;
    int rc = slot__store_row_get(s->st, &k, &slotd__v1__user__descriptor, &row);
    if (rc != 0)
        return rc;
    Slotd__V1__GetUserResult res = SLOTD__V1__GET_USER_RESULT__INIT;
    res.found = row != NULL;
    res.user = (Slotd__V1__User *)row;
    rc = slot__serve_reply(s, &res.base);
    if (row != NULL)
        protobuf_c_message_free_unpacked(row, NULL);
    return rc;
}

static int serve_get_device(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__GetDeviceQuery *q = (const void *)m;
    struct slot__key k;
    device_key(&k, s->hs, q->uid, q->device_flag);
    ProtobufCMessage *row;
    int rc = slot__store_row_get(s->st, &k, &slotd__v1__device__descriptor, &row);
    if (rc != 0)
        return rc;
    Slotd__V1__GetDeviceResult res = SLOTD__V1__GET_DEVICE_RESULT__INIT;
    res.found = row != NULL;
    res.device = (Slotd__V1__Device *)row;
    rc = slot__serve_reply(s, &res.base);
    if (row != NULL)
        protobuf_c_message_free_unpacked(row, NULL);
    return rc;
}

static int serve_is_system_uid(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__IsSystemUidQuery *q = (const void *)m;
    struct slot__key k;
    uid_key(&k, s->hs, SLOT_TABLE_SYSTEM_UID, q->uid);
    Slotd__V1__IsSystemUidResult res = SLOTD__V1__IS_SYSTEM_UID_RESULT__INIT;
    bool present;
    int rc = slot__store_flag_get(s->st, &k, &present);
    if (rc != 0)
        return rc;
    res.system = present;
    return slot__serve_reply(s, &res.base);
}

static int serve_get_plugin_binding(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__GetPluginBindingQuery *q = (const void *)m;
    struct slot__key k;
    uid_key(&k, s->hs, SLOT_TABLE_PLUGIN, q->uid);
    ProtobufCMessage *row;
    int rc = slot__store_row_get(s->st, &k, &slotd__v1__plugin_binding__descriptor, &row);
    if (rc != 0)
        return rc;
    Slotd__V1__GetPluginBindingResult res = SLOTD__V1__GET_PLUGIN_BINDING_RESULT__INIT;
    res.found = row != NULL;
    res.binding = (Slotd__V1__PluginBinding *)row;
    rc = slot__serve_reply(s, &res.base);
    if (row != NULL)
        protobuf_c_message_free_unpacked(row, NULL);
    return rc;
}

/* Served at the hash slot the query names (the request was routed by it). */
static int serve_list_plugin_users(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__ListPluginUsersQuery *q = (const void *)m;
    struct slot__key p;
    plugin_user_key(&p, (uint16_t)q->hash_slot, q->plugin_no, NULL);
    struct slot__strs uids;
    uint32_t limit = slot__page(q->limit);
    int rc = slot__strs_init(&uids, limit);
    if (rc != 0)
        return rc;
    Slotd__V1__ListPluginUsersResult res = SLOTD__V1__LIST_PLUGIN_USERS_RESULT__INIT;
    rc = slot__scan(s->st, &p, &q->cursor, limit, slot__collect_suffix, &uids, &res.next_cursor);
    if (rc == 0) {
        res.n_uids = uids.n;
        res.uids = uids.v;
        rc = slot__serve_reply(s, &res.base);
    }
    free(res.next_cursor.data);
    slot__strs_free(&uids);
    return rc;
}

const struct slot__meta_op slot__user_queries[] = {
    {SLOTD__V1__READ_REQUEST__QUERY_GET_USER, NULL, serve_get_user},
    {SLOTD__V1__READ_REQUEST__QUERY_GET_DEVICE, NULL, serve_get_device},
    {SLOTD__V1__READ_REQUEST__QUERY_IS_SYSTEM_UID, NULL, serve_is_system_uid},
    {SLOTD__V1__READ_REQUEST__QUERY_GET_PLUGIN_BINDING, NULL, serve_get_plugin_binding},
    {SLOTD__V1__READ_REQUEST__QUERY_LIST_PLUGIN_USERS, NULL, serve_list_plugin_users},
};
const size_t slot__user_queries_len = sizeof(slot__user_queries) / sizeof(slot__user_queries[0]);
