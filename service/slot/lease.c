/* lease.c - leases (TTL keys): a hash slot's lease rows, grant / keep-alive / revoke / expiry
 * applied in the fsm batch, and the scan the group leader's expiry reads (no clock here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"
#include "service/slot/slot.h"
#include "store/keys.h"

#define ROW_VERSION 1
#define SEQ_MASK ((UINT64_C(1) << SLOT_LEASE_ID_SHIFT) - 1)
#define META_LEN 13u

/* The routing key of the last lease command this thread validated (keep-alive, revoke and
 * expiry route by a key of their id's hash slot). */
static _Thread_local char id_keybuf[32];

struct lease_row {
    uint32_t ttl;
    uint64_t refreshed; /* index of the grant or last keep-alive */
    uint32_t keys;
};

static size_t row_key(uint8_t *out, uint16_t hs, uint64_t id)
{
    uint8_t b[8];
    store_put_u64(b, id);
    return store_key_fsm(out, hs, SLOT_TABLE_LEASE, b, 8);
}

/* [hs][LEASE_KEY][id] and, when key != NULL, the key after it. */
static size_t index_key(uint8_t *out, uint16_t hs, uint64_t id, const uint8_t *key, size_t kl)
{
    uint8_t b[8 + SLOT_KEY_MAX];
    store_put_u64(b, id);
    if (kl > 0)
        memcpy(b + 8, key, kl);
    return store_key_fsm(out, hs, SLOT_TABLE_LEASE_KEY, b, 8 + kl);
}

static int row_decode(const uint8_t *v, size_t vl, struct lease_row *r)
{
    if (vl != SLOT_LEASE_ROW_LEN || v[0] != ROW_VERSION)
        return STORE_ECORRUPT;
    r->ttl = store_get_u32(v + 1);
    r->refreshed = store_get_u64(v + 5);
    r->keys = store_get_u32(v + 13);
    return 0;
}

static int row_get(struct slot_fsm *f, uint16_t hs, uint64_t id, bool *found, struct lease_row *r)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = row_key(k, hs, id);
    uint8_t *v;
    size_t vl;
    int rc = slot__fsm_read(f, k, kl, found, &v, &vl);
    if (rc != 0 || !*found)
        return rc;
    rc = row_decode(v, vl, r);
    free(v);
    return rc;
}

static int row_put(struct slot_fsm *f, uint16_t hs, uint64_t id, const struct lease_row *r)
{
    uint8_t k[STORE_FSM_KEY_MAX], v[SLOT_LEASE_ROW_LEN];
    size_t kl = row_key(k, hs, id);
    v[0] = ROW_VERSION;
    store_put_u32(v + 1, r->ttl);
    store_put_u64(v + 5, r->refreshed);
    store_put_u32(v + 13, r->keys);
    slot__fsm_lease_written(f);
    return slot__fsm_write(f, k, kl, v, sizeof(v));
}

/* The hash slot's next lease sequence (1 when none was granted) and live lease count. */
static int meta_get(struct slot_fsm *f, uint16_t hs, uint64_t *next_seq, uint32_t *count)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = store_key_fsm(k, hs, SLOT_TABLE_LEASE_META, NULL, 0);
    bool found;
    uint8_t v[META_LEN];
    *next_seq = 1;
    *count = 0;
    int rc = slot__fsm_read_fixed(f, k, kl, ROW_VERSION, v, sizeof(v), &found);
    if (rc != 0 || !found)
        return rc;
    *next_seq = store_get_u64(v + 1);
    *count = store_get_u32(v + 9);
    return 0;
}

static int meta_put(struct slot_fsm *f, uint16_t hs, uint64_t next_seq, uint32_t count)
{
    uint8_t k[STORE_FSM_KEY_MAX], v[META_LEN];
    size_t kl = store_key_fsm(k, hs, SLOT_TABLE_LEASE_META, NULL, 0);
    v[0] = ROW_VERSION;
    store_put_u64(v + 1, next_seq);
    store_put_u32(v + 9, count);
    return slot__fsm_write(f, k, kl, v, sizeof(v));
}

static void not_found(struct slotd_error *err, const char *field, uint64_t id)
{
    slotd_error_set(err, SLOTD_ENOT_FOUND, "%s: lease %llu does not exist (expired or revoked)",
                    field, (unsigned long long)id);
    snprintf(err->field, sizeof(err->field), "%s", field);
}

int slot__lease_check(struct slot_fsm *f, uint16_t hs, uint64_t id, uint32_t extra,
                      const char *field, struct slotd_error *err)
{
    if ((id >> SLOT_LEASE_ID_SHIFT) != hs) {
        slotd_error_set(err, SLOTD_EPRECONDITION,
                        "%s: lease %llu lives in hash slot %llu but the key is in hash slot %u; "
                        "attach only keys of the lease's hash slot",
                        field, (unsigned long long)id,
                        (unsigned long long)(id >> SLOT_LEASE_ID_SHIFT), hs);
        snprintf(err->field, sizeof(err->field), "%s", field);
        return 0;
    }
    bool found;
    struct lease_row r;
    int rc = row_get(f, hs, id, &found, &r);
    if (rc != 0)
        return rc;
    if (!found) {
        not_found(err, field, id);
        return 0;
    }
    if ((uint64_t)r.keys + extra > SLOT_LEASE_KEYS_MAX) {
        slotd_error_set(err, SLOTD_EPRECONDITION,
                        "%s: lease %llu has %u keys; a lease holds at most %u keys", field,
                        (unsigned long long)id, r.keys, SLOT_LEASE_KEYS_MAX);
        snprintf(err->field, sizeof(err->field), "%s", field);
        err->limit = SLOT_LEASE_KEYS_MAX;
    }
    return 0;
}

static int relink(struct slot_fsm *f, uint16_t hs, uint64_t id, const uint8_t *key, size_t kl,
                  bool attach)
{
    bool found;
    struct lease_row r;
    int rc = row_get(f, hs, id, &found, &r);
    if (rc != 0)
        return rc;
    if (found) {
        if (attach)
            r.keys++;
        else if (r.keys > 0)
            r.keys--;
        rc = row_put(f, hs, id, &r);
    } else if (attach) {
        return STORE_EINVAL; /* slot__lease_check allowed it: not reached */
    }
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t ikl = index_key(k, hs, id, key, kl);
    static const uint8_t member = ROW_VERSION;
    return rc != 0 ? rc : slot__fsm_write(f, k, ikl, attach ? &member : NULL, 1);
}

int slot__lease_attach(struct slot_fsm *f, uint16_t hs, uint64_t id, const uint8_t *key, size_t kl)
{
    return relink(f, hs, id, key, kl, true);
}

int slot__lease_detach(struct slot_fsm *f, uint16_t hs, uint64_t id, const uint8_t *key, size_t kl)
{
    return relink(f, hs, id, key, kl, false);
}

bool slot__lease_is_command(unsigned number)
{
    return number == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_GRANT ||
           number == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_KEEP_ALIVE ||
           number == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_REVOKE ||
           number == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_EXPIRE;
}

int slot_lease_id_check(uint64_t id, const char *field, uint16_t *hs, struct slotd_error *err)
{
    if ((id >> SLOT_LEASE_ID_SHIFT) >= 256 || (id & SEQ_MASK) == 0) {
        slotd_error_field(err, field, 0, "%s: %llu is not a lease id (hash slot << %d | seq >= 1)",
                          field, (unsigned long long)id, SLOT_LEASE_ID_SHIFT);
        return -1;
    }
    *hs = (uint16_t)(id >> SLOT_LEASE_ID_SHIFT);
    return 0;
}

/* The lease command numbers are the same in ProposeRequest and LogCommand (14..16); 75, the
 * expiry, exists only in LogCommand. */
int slot_lease_validate(unsigned number, const ProtobufCMessage *msg, ProtobufCBinaryData *key,
                        char keybuf[32], struct slotd_error *err)
{
    uint64_t id;
    const char *field;
    if (msg == NULL) {
        slotd_error_field(err, "command", 0, "command: exactly one command must be set");
        return -1;
    }
    switch (number) {
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT: {
        const Slotd__V1__LeaseGrantCommand *g = (const Slotd__V1__LeaseGrantCommand *)msg;
        if (g->key.len == 0 || g->key.len > SLOT_KEY_MAX) {
            slotd_error_field(err, "lease_grant.key", SLOT_KEY_MAX,
                              "lease_grant.key: must be 1..%u bytes, got %zu", SLOT_KEY_MAX,
                              g->key.len);
            return -1;
        }
        if (g->ttl_seconds == 0 || g->ttl_seconds > SLOT_LEASE_TTL_MAX) {
            slotd_error_field(err, "lease_grant.ttl_seconds", SLOT_LEASE_TTL_MAX,
                              "lease_grant.ttl_seconds: must be 1..%u, got %u", SLOT_LEASE_TTL_MAX,
                              g->ttl_seconds);
            return -1;
        }
        *key = g->key;
        return 0;
    }
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE:
        id = ((const Slotd__V1__LeaseKeepAliveCommand *)msg)->id;
        field = "lease_keep_alive.id";
        break;
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE:
        id = ((const Slotd__V1__LeaseRevokeCommand *)msg)->id;
        field = "lease_revoke.id";
        break;
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_EXPIRE:
        id = ((const Slotd__Internal__V1__LeaseExpire *)msg)->id;
        field = "lease_expire.id";
        break;
    default:
        slotd_error_field(err, "command", 0, "command: not a lease command");
        return -1;
    }
    uint16_t hs;
    if (slot_lease_id_check(id, field, &hs, err) != 0)
        return -1;
    slot__hash_slot_key(hs, keybuf);
    key->data = (uint8_t *)keybuf;
    key->len = strlen(keybuf);
    return 0;
}

int slot__lease_command_key(const Slotd__Internal__V1__LogCommand *cmd, ProtobufCBinaryData *key,
                            struct slotd_error *err)
{
    return slot_lease_validate(cmd->command_case, slot__oneof_get(&cmd->base, cmd->command_case),
                               key, id_keybuf, err);
}

/* ---- Apply ---- */

struct key_list {
    uint8_t **keys;
    size_t *lens;
    size_t n, cap;
};

static int collect_key(void *ctx, const uint8_t *k, size_t kl)
{
    struct key_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        uint8_t **keys = realloc(l->keys, cap * sizeof(*keys));
        if (keys == NULL)
            return STORE_ENOMEM;
        l->keys = keys;
        size_t *lens = realloc(l->lens, cap * sizeof(*lens));
        if (lens == NULL)
            return STORE_ENOMEM;
        l->lens = lens;
        l->cap = cap;
    }
    l->keys[l->n] = malloc(kl);
    if (l->keys[l->n] == NULL)
        return STORE_ENOMEM;
    memcpy(l->keys[l->n], k, kl);
    l->lens[l->n++] = kl;
    return 0;
}

static void key_list_free(struct key_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->keys[i]);
    free(l->keys);
    free(l->lens);
}

/* Deletes lease id (its row exists) and every key attached to it; *deleted counts the keys. */
static int revoke(struct slot_fsm *f, uint16_t hs, uint64_t id, uint32_t *deleted)
{
    uint8_t p[STORE_FSM_KEY_MAX];
    size_t pl = index_key(p, hs, id, NULL, 0);
    struct key_list l = {0};
    bool over;
    int rc =
        slot__fsm_prefix_keys(f, p, pl, 2 * (size_t)SLOT_LEASE_KEYS_MAX, collect_key, &l, &over);
    if (rc == 0 && over)
        rc = STORE_ECORRUPT; /* attach keeps at most SLOT_LEASE_KEYS_MAX */
    *deleted = 0;
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        const uint8_t *key = l.keys[i] + pl;
        size_t kl = l.lens[i] - pl;
        rc = slot__fsm_write(f, l.keys[i], l.lens[i], NULL, 0);
        if (rc != 0 || kl == 0 || kl > SLOT_KEY_MAX)
            continue;
        uint8_t kv[STORE_FSM_KEY_MAX];
        size_t kvl = store_key_fsm(kv, hs, SLOT_TABLE_KV, key, kl);
        bool found;
        uint8_t *v;
        size_t vl, off;
        uint64_t version, lease = 0;
        rc = slot__fsm_read(f, kv, kvl, &found, &v, &vl);
        if (rc != 0 || !found)
            continue;
        rc = slot_kv_decode(v, vl, &version, &lease, &off);
        free(v);
        if (rc == 0 && lease == id) { /* the index names only keys whose row names the lease */
            rc = slot__kv_delete(f, kv, kvl);
            (*deleted)++;
        }
    }
    key_list_free(&l);
    if (rc != 0)
        return rc;
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = row_key(k, hs, id);
    rc = slot__fsm_write(f, k, kl, NULL, 0);
    uint64_t next_seq;
    uint32_t count;
    if (rc == 0)
        rc = meta_get(f, hs, &next_seq, &count);
    return rc != 0 ? rc : meta_put(f, hs, next_seq, count > 0 ? count - 1 : 0);
}

int slot__lease_apply(struct slot_fsm *f, const struct slot_group_state *gs, uint64_t index,
                      uint64_t term, const Slotd__Internal__V1__LogCommand *cmd, uint8_t **buf,
                      size_t *len, struct slotd_error *err)
{
    uint16_t hs = (uint16_t)cmd->hash_slot;
    Slotd__V1__ProposeResponse resp = SLOTD__V1__PROPOSE_RESPONSE__INIT;
    Slotd__V1__LeaseGrantResult grant = SLOTD__V1__LEASE_GRANT_RESULT__INIT;
    Slotd__V1__LeaseKeepAliveResult keep = SLOTD__V1__LEASE_KEEP_ALIVE_RESULT__INIT;
    Slotd__V1__LeaseRevokeResult rev = SLOTD__V1__LEASE_REVOKE_RESULT__INIT;
    resp.applied_index = index;
    resp.group_id = gs->group;
    resp.term = term;
    struct lease_row r;
    bool found;
    uint64_t id;
    int rc = 0;
    switch (cmd->command_case) {
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_GRANT: {
        uint64_t next_seq;
        uint32_t count;
        rc = meta_get(f, hs, &next_seq, &count);
        if (rc != 0)
            return rc;
        if (count >= SLOT_LEASES_PER_SLOT_MAX || next_seq > SEQ_MASK) {
            slotd_error_set(err, SLOTD_EPRECONDITION,
                            "lease_grant: hash slot %u holds %u leases; at most %u live leases "
                            "per hash slot",
                            hs, count, SLOT_LEASES_PER_SLOT_MAX);
            snprintf(err->field, sizeof(err->field), "lease_grant");
            err->limit = SLOT_LEASES_PER_SLOT_MAX;
            return 0;
        }
        id = (uint64_t)hs << SLOT_LEASE_ID_SHIFT | next_seq;
        r.ttl = cmd->lease_grant->ttl_seconds;
        r.refreshed = index;
        r.keys = 0;
        rc = row_put(f, hs, id, &r);
        if (rc == 0)
            rc = meta_put(f, hs, next_seq + 1, count + 1);
        grant.id = id;
        grant.ttl_seconds = r.ttl;
        resp.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEASE_GRANT;
        resp.lease_grant = &grant;
        break;
    }
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_KEEP_ALIVE:
        id = cmd->lease_keep_alive->id;
        rc = row_get(f, hs, id, &found, &r);
        if (rc != 0)
            return rc;
        if (!found) {
            not_found(err, "lease_keep_alive.id", id);
            return 0;
        }
        r.refreshed = index;
        rc = row_put(f, hs, id, &r);
        keep.ttl_seconds = r.ttl;
        keep.keys = r.keys;
        resp.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEASE_KEEP_ALIVE;
        resp.lease_keep_alive = &keep;
        break;
    default: { /* revoke, or the leader's expiry */
        bool expire = cmd->command_case == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_EXPIRE;
        id = expire ? cmd->lease_expire->id : cmd->lease_revoke->id;
        rc = row_get(f, hs, id, &found, &r);
        if (rc != 0)
            return rc;
        if (!found) {
            not_found(err, expire ? "lease_expire.id" : "lease_revoke.id", id);
            return 0;
        }
        if (expire && r.refreshed != cmd->lease_expire->refreshed_index) {
            slotd_error_set(err, SLOTD_EPRECONDITION,
                            "lease_expire: lease %llu was refreshed at index %llu, after the "
                            "leader's look at index %llu; it stays",
                            (unsigned long long)id, (unsigned long long)r.refreshed,
                            (unsigned long long)cmd->lease_expire->refreshed_index);
            snprintf(err->field, sizeof(err->field), "lease_expire.refreshed_index");
            return 0;
        }
        rc = revoke(f, hs, id, &rev.keys_deleted);
        resp.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEASE_REVOKE;
        resp.lease_revoke = &rev;
        break;
    }
    }
    if (rc != 0)
        return rc;
    size_t n = slotd__v1__propose_response__get_packed_size(&resp);
    *buf = malloc(n ? n : 1);
    if (*buf == NULL)
        return STORE_ENOMEM;
    slotd__v1__propose_response__pack(&resp, *buf);
    *len = n;
    return 0;
}

/* ---- The leader's scan ---- */

int slot_lease_scan(struct store *store, uint16_t hs, uint64_t from_id, size_t max,
                    slot_lease_cb cb, void *ctx, bool *more)
{
    uint8_t lo[STORE_FSM_KEY_MAX], hi[STORE_FSM_KEY_MAX];
    size_t lol = row_key(lo, hs, from_id);
    size_t hil = store_key_fsm(hi, hs, SLOT_TABLE_LEASE + 1, NULL, 0);
    struct store_iter *it;
    *more = false;
    int rc = store_fsm_iter_new(store, lo, lol, hi, hil, &it);
    if (rc != 0)
        return rc;
    size_t n = 0;
    for (; rc == 0 && store_iter_valid(it); store_iter_next(it)) {
        size_t kl, vl;
        const uint8_t *k = store_iter_key(it, &kl);
        const uint8_t *v = store_iter_value(it, &vl);
        struct lease_row r;
        if (kl != 3 + 8 || k[2] != SLOT_TABLE_LEASE || row_decode(v, vl, &r) != 0) {
            rc = STORE_ECORRUPT;
            break;
        }
        if (n == max) {
            *more = true;
            break;
        }
        struct slot_lease_info l = {
            .id = store_get_u64(k + 3), .ttl_seconds = r.ttl, .refreshed_index = r.refreshed};
        n++;
        if (cb(ctx, &l) != 0)
            break;
    }
    if (rc == 0)
        rc = store_iter_status(it); /* a read error ends the walk like its end would */
    store_iter_free(it);
    return rc;
}
