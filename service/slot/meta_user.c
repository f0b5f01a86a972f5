/* meta_user.c - uid-owned tables: users, devices, the system uid registry and plugin bindings
 * (with the per-hash-slot reverse index plugin -> uids): their applies and serves. */
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

int slot__apply_create_user(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__User *u = ((const Slotd__V1__CreateUserCommand *)m)->user;
    Slotd__V1__UserResult *res = (void *)r;
    struct slot__key k;
    uid_key(&k, a->hs, SLOT_TABLE_USER, u->uid);
    ProtobufCMessage *old;
    int rc = slot__apply_row(a, &k, &slotd__v1__user__descriptor, &old);
    res->changed = old == NULL; /* creating an existing user changes nothing */
    res->user = old != NULL ? (Slotd__V1__User *)old : (Slotd__V1__User *)u;
    return rc != 0 || old != NULL ? rc : slot__row_put(a->f, &k, &u->base);
}

int slot__apply_update_user(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__User *u = ((const Slotd__V1__UpdateUserCommand *)m)->user;
    Slotd__V1__UserResult *res = (void *)r;
    struct slot__key k;
    uid_key(&k, a->hs, SLOT_TABLE_USER, u->uid);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, &k, &slotd__v1__user__descriptor, &raw);
    if (rc != 0 || raw == NULL) {
        if (rc == 0)
            slot__not_found(a->err, "user", u->uid);
        return rc;
    }
    const Slotd__V1__User *old = (const Slotd__V1__User *)raw;
    res->changed = strcmp(old->token, u->token) != 0 || old->device_flag != u->device_flag ||
                   old->device_level != u->device_level;
    res->user = (Slotd__V1__User *)u;
    return res->changed ? slot__row_put(a->f, &k, &u->base) : 0;
}

/* ---- devices ---- */

int slot__apply_put_device(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__Device *d = ((const Slotd__V1__PutDeviceCommand *)m)->device;
    Slotd__V1__DeviceResult *res = (void *)r;
    struct slot__key k;
    device_key(&k, a->hs, d->uid, d->device_flag);
    ProtobufCMessage *old;
    int rc = slot__apply_row(a, &k, &slotd__v1__device__descriptor, &old);
    res->created = old == NULL;
    res->device = (Slotd__V1__Device *)d;
    return rc != 0 ? rc : slot__row_put(a->f, &k, &d->base);
}

int slot__apply_remove_device(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__RemoveDeviceCommand *c = (const void *)m;
    Slotd__V1__RemoveResult *res = (void *)r;
    struct slot__key k;
    device_key(&k, a->hs, c->uid, c->device_flag);
    ProtobufCMessage *old;
    int rc = slot__apply_row(a, &k, &slotd__v1__device__descriptor, &old);
    res->removed = old != NULL;
    res->device = (Slotd__V1__Device *)old; /* what was removed */
    return rc != 0 || old == NULL ? rc : slot__key_delete(a->f, &k);
}

/* ---- system uids ---- */

int slot__apply_set_system_uid(struct slot__apply *a, const ProtobufCMessage *m,
                               ProtobufCMessage *r)
{
    const Slotd__V1__SetSystemUidCommand *c = (const void *)m;
    Slotd__V1__SystemUidResult *res = (void *)r;
    struct slot__key k;
    uid_key(&k, a->hs, SLOT_TABLE_SYSTEM_UID, c->uid);
    bool present;
    int rc = slot__flag_get(a->f, &k, &present);
    if (rc != 0)
        return rc;
    res->changed = present != c->system;
    res->system = c->system;
    if (!res->changed)
        return 0;
    return c->system ? slot__flag_put(a->f, &k) : slot__key_delete(a->f, &k);
}

/* ---- plugin bindings: [S uid] -> PluginBinding, reverse [s plugin_no][S uid] ---- */

/* Loads uid's binding (NULL when unbound) and points res->binding at a fresh one for uid. */
static int load_binding(struct slot__apply *a, const char *uid, struct slot__key *k,
                        const Slotd__V1__PluginBinding **old, Slotd__V1__PluginBindingResult *res)
{
    uid_key(k, a->hs, SLOT_TABLE_PLUGIN, uid);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, k, &slotd__v1__plugin_binding__descriptor, &raw);
    *old = (const void *)raw;
    res->binding = slot__apply_scratch(a, sizeof(*res->binding));
    slotd__v1__plugin_binding__init(res->binding);
    res->binding->uid = (char *)uid;
    return rc;
}

int slot__apply_bind_plugin(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__BindPluginCommand *c = (const void *)m;
    Slotd__V1__PluginBindingResult *res = (void *)r;
    struct slot__key k, rk;
    const Slotd__V1__PluginBinding *old;
    int rc = load_binding(a, c->uid, &k, &old, res);
    res->binding->plugin_no = c->plugin_no;
    res->changed = old == NULL || strcmp(old->plugin_no, c->plugin_no) != 0;
    if (rc != 0 || !res->changed)
        return rc;
    if (old != NULL) { /* re-binding moves the reverse index entry */
        plugin_user_key(&rk, a->hs, old->plugin_no, c->uid);
        rc = slot__key_delete(a->f, &rk);
    }
    plugin_user_key(&rk, a->hs, c->plugin_no, c->uid);
    if (rc == 0)
        rc = slot__flag_put(a->f, &rk);
    return rc != 0 ? rc : slot__row_put(a->f, &k, &res->binding->base);
}

int slot__apply_unbind_plugin(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__UnbindPluginCommand *c = (const void *)m;
    Slotd__V1__PluginBindingResult *res = (void *)r;
    struct slot__key k, rk;
    const Slotd__V1__PluginBinding *old;
    int rc = load_binding(a, c->uid, &k, &old, res);
    res->changed = old != NULL;
    if (rc != 0 || old == NULL)
        return rc;
    res->binding->plugin_no = old->plugin_no; /* the binding removed */
    plugin_user_key(&rk, a->hs, old->plugin_no, c->uid);
    rc = slot__key_delete(a->f, &rk);
    return rc != 0 ? rc : slot__key_delete(a->f, &k);
}

/* ---- delete user ---- */

/* Deletes the uid's row of table (a [S uid] row) when present and b allows; *gone says so. */
static int delete_uid_row(struct slot__apply *a, uint8_t table, const char *uid,
                          struct slot__budget *b, protobuf_c_boolean *gone)
{
    struct slot__key k;
    uid_key(&k, a->hs, table, uid);
    bool present;
    int rc = slot__flag_present(a->f, &k, &present);
    if (rc != 0 || !present)
        return rc;
    if (b->left == 0) {
        b->over = true;
        return 0;
    }
    b->left--;
    *gone = true;
    return slot__key_delete(a->f, &k);
}

int slot__apply_delete_user(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const char *uid = ((const Slotd__V1__DeleteUserCommand *)m)->uid;
    Slotd__V1__DeleteUserResult *res = (void *)r;
    struct slot__budget b = {SLOT_DELETE_ROWS_MAX, false};
    struct slot__key p;
    slot__key_init(&p, a->hs, SLOT_TABLE_DEVICE);
    slot__key_str(&p, uid);
    int rc = slot__delete_prefix(a->f, &p, 1, &b, NULL, NULL, &res->devices);
    if (rc == 0)
        rc = slot__delete_user_memberships(a, uid, &b, &res->memberships, &res->cmd_bindings);
    struct slot__key k;
    const Slotd__V1__PluginBinding *old = NULL;
    Slotd__V1__PluginBindingResult unused = SLOTD__V1__PLUGIN_BINDING_RESULT__INIT;
    if (rc == 0)
        rc = load_binding(a, uid, &k, &old, &unused);
    if (rc == 0 && old != NULL && b.left < 2)
        b.over = true;
    if (rc == 0 && old != NULL && b.left >= 2) { /* the binding and its reverse index entry */
        struct slot__key rk;
        plugin_user_key(&rk, a->hs, old->plugin_no, uid);
        rc = slot__key_delete(a->f, &rk);
        if (rc == 0)
            rc = slot__key_delete(a->f, &k);
        b.left -= 2;
        res->plugin_binding = true;
    }
    if (rc == 0)
        rc = delete_uid_row(a, SLOT_TABLE_SYSTEM_UID, uid, &b, &res->system_uid);
    if (rc == 0 && !b.over) /* the user row goes last: a repeat continues from the rest */
        rc = delete_uid_row(a, SLOT_TABLE_USER, uid, &b, &res->removed);
    res->more = b.over;
    return rc;
}

/* ---- queries ---- */

int slot__serve_get_user(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    struct slot__key k;
    uid_key(&k, s->hs, SLOT_TABLE_USER, ((const Slotd__V1__GetUserQuery *)m)->uid);
    return slot__serve_get(s, &k, &slotd__v1__user__descriptor, r);
}

int slot__serve_get_device(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__GetDeviceQuery *q = (const void *)m;
    struct slot__key k;
    device_key(&k, s->hs, q->uid, q->device_flag);
    return slot__serve_get(s, &k, &slotd__v1__device__descriptor, r);
}

int slot__serve_is_system_uid(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    struct slot__key k;
    uid_key(&k, s->hs, SLOT_TABLE_SYSTEM_UID, ((const Slotd__V1__IsSystemUidQuery *)m)->uid);
    bool present;
    int rc = slot__store_flag_get(s->st, &k, &present);
    ((Slotd__V1__IsSystemUidResult *)r)->system = present;
    return rc;
}

int slot__serve_get_plugin_binding(struct slot__serve *s, const ProtobufCMessage *m,
                                   ProtobufCMessage *r)
{
    struct slot__key k;
    uid_key(&k, s->hs, SLOT_TABLE_PLUGIN, ((const Slotd__V1__GetPluginBindingQuery *)m)->uid);
    return slot__serve_get(s, &k, &slotd__v1__plugin_binding__descriptor, r);
}

/* Served at the hash slot the query names (the request was routed by it). */
int slot__serve_list_plugin_users(struct slot__serve *s, const ProtobufCMessage *m,
                                  ProtobufCMessage *r)
{
    const Slotd__V1__ListPluginUsersQuery *q = (const void *)m;
    struct slot__key p;
    plugin_user_key(&p, (uint16_t)q->hash_slot, q->plugin_no, NULL);
    return slot__serve_list(s, &p, &q->cursor, q->limit, NULL, r);
}

int slot__serve_list_devices(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__ListDevicesQuery *q = (const void *)m;
    struct slot__key p;
    slot__key_init(&p, s->hs, SLOT_TABLE_DEVICE);
    slot__key_str(&p, q->uid);
    return slot__serve_list(s, &p, &q->cursor, q->limit, &slotd__v1__device__descriptor, r);
}
