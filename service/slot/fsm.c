/* fsm.c - the slot state machine: applies a group's committed LogCommand entries into one fsm write
 * batch. */
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"
#include "service/slot/migrate.h"
#include "service/slot/slot.h"
#include "store/keys.h"

#define VALUE_VERSION 1
#define KV_LEASE_VERSION 2 /* a KV row attached to a lease: [2][version][lease][value] */
#define OVERLAY_BUCKETS 4096u

/* A key written by the current batch: later entries of the same batch must
 * read it (LevelDB batches are not readable before they are written). */
struct overlay_item {
    struct overlay_item *next;     /* in its bucket */
    struct overlay_item *all_next; /* every item of the batch, for clearing */
    uint32_t bucket;
    bool deleted;
    size_t key_len;
    size_t val_len;
    uint8_t *key;
    uint8_t *val;
};

struct slot_fsm {
    struct store *store;
    struct store_fsm_batch *batch;
    struct overlay_item *buckets[OVERLAY_BUCKETS];
    struct overlay_item *all;
    size_t n_items;
    /* Hash slots whose stored rows the batch deleted (slot__fsm_wipe): a read that misses the
     * overlay finds nothing there instead of reading the store. */
    uint8_t wiped[32];
    /* Key rows' version and lease as a read through the overlay would find them (vcache.h):
     * fsm_write keeps it current, a wipe and slot_fsm_forget_rows clear it. */
    struct slot_vcache *vcache;
    slot_claim_cb claimed; /* NULL: no other hosted group shares rows */
    void *claimed_ctx;
    /* Key events (slot_fsm_set_events): recorded by the entry being applied, in apply order. */
    bool events_on;
    uint32_t ev_group;
    uint64_t ev_index;
    struct slot_event *ev_head, **ev_tail;
    /* Lease rows: written by the current batch (apply thread); batches with such writes that
     * were committed (any thread reads it: slot_fsm_lease_commits). */
    bool lease_written;
    _Atomic uint64_t lease_commits;
};

static uint32_t hash_bytes(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* Frees the batch's items and empties only the buckets they used. */
static void overlay_clear(struct slot_fsm *f)
{
    struct overlay_item *it = f->all;
    while (it != NULL) {
        struct overlay_item *next = it->all_next;
        f->buckets[it->bucket] = NULL;
        free(it);
        it = next;
    }
    f->all = NULL;
    f->n_items = 0;
    memset(f->wiped, 0, sizeof(f->wiped));
}

static bool bitmap_has(const uint8_t bm[32], uint16_t hash_slot)
{
    return hash_slot < 256 && (bm[hash_slot / 8] >> (hash_slot % 8)) & 1;
}

static struct overlay_item *overlay_find(struct slot_fsm *f, const uint8_t *k, size_t kl)
{
    struct overlay_item *it = f->buckets[hash_bytes(k, kl) % OVERLAY_BUCKETS];
    for (; it != NULL; it = it->next)
        if (it->key_len == kl && memcmp(it->key, k, kl) == 0)
            return it;
    return NULL;
}

/* Records a put (val != NULL) or delete in both the batch and the overlay. A
 * key written twice keeps its item; the newer value replaces the older. */
static int fsm_write(struct slot_fsm *f, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
    struct overlay_item *old = overlay_find(f, k, kl);
    struct overlay_item *it = malloc(sizeof(*it) + kl + (v ? vl : 0));
    if (it == NULL)
        return STORE_ENOMEM;
    it->key = (uint8_t *)(it + 1);
    it->key_len = kl;
    memcpy(it->key, k, kl);
    it->deleted = v == NULL;
    it->val = it->key + kl;
    it->val_len = v ? vl : 0;
    if (v != NULL && vl > 0)
        memcpy(it->val, v, vl);
    it->bucket = hash_bytes(k, kl) % OVERLAY_BUCKETS;
    /* The new item goes first in its bucket, so lookups find it before an
     * older one; the older stays on the batch list until the clear. */
    if (old != NULL)
        old->key_len = 0; /* never matches again */
    it->next = f->buckets[it->bucket];
    f->buckets[it->bucket] = it;
    it->all_next = f->all;
    f->all = it;
    f->n_items++;
    if (v != NULL)
        store_fsm_batch_put(f->batch, k, kl, v, vl);
    else
        store_fsm_batch_delete(f->batch, k, kl);
    if (kl >= 3 && k[2] == SLOT_TABLE_KV) {
        uint64_t version, lease;
        size_t off;
        if (v == NULL)
            slot_vcache_put(f->vcache, k, kl, false, 0, 0);
        else if (slot_kv_decode(v, vl, &version, &lease, &off) == 0)
            slot_vcache_put(f->vcache, k, kl, true, version, lease);
        else
            slot_vcache_clear(f->vcache); /* a row a read would call corrupt: never cached */
    }
    return 0;
}

/* Reads through the overlay. *val is malloc'ed (free()) when *found. */
static int fsm_read(struct slot_fsm *f, const uint8_t *k, size_t kl, bool *found, uint8_t **val,
                    size_t *vl)
{
    struct overlay_item *it = overlay_find(f, k, kl);
    *found = false;
    *val = NULL;
    *vl = 0;
    if (it != NULL) {
        if (it->deleted)
            return 0;
        *val = malloc(it->val_len ? it->val_len : 1);
        if (*val == NULL)
            return STORE_ENOMEM;
        memcpy(*val, it->val, it->val_len);
        *vl = it->val_len;
        *found = true;
        return 0;
    }
    if (kl >= 2 && bitmap_has(f->wiped, store_get_u16(k)))
        return 0;
    void *v = NULL;
    int rc = store_fsm_get(f->store, k, kl, &v, vl);
    if (rc == STORE_ENOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    *val = v;
    *found = true;
    return 0;
}

int slot_fsm_new(struct store *store, struct slot_fsm **out)
{
    struct slot_fsm *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return STORE_ENOMEM;
    f->store = store;
    f->ev_tail = &f->ev_head;
    int rc = store_fsm_batch_new(&f->batch);
    if (rc != 0)
        goto err_after_alloc;
    if (slot_vcache_new(&f->vcache) != 0) {
        rc = STORE_ENOMEM;
        goto err_after_batch;
    }
    *out = f;
    return 0;

err_after_batch:
    store_fsm_batch_free(f->batch);
err_after_alloc:
    free(f);
    return rc;
}

void slot_fsm_forget_rows(struct slot_fsm *f)
{
    slot_vcache_clear(f->vcache);
}

void slot_fsm_cache_stats(const struct slot_fsm *f, struct slot_vcache_stats *out)
{
    slot_vcache_stats(f->vcache, out);
}

void slot_fsm_set_claim_cb(struct slot_fsm *f, slot_claim_cb cb, void *ctx)
{
    f->claimed = cb;
    f->claimed_ctx = ctx;
}

void slot_fsm_free(struct slot_fsm *f)
{
    if (f == NULL)
        return;
    overlay_clear(f);
    store_fsm_batch_free(f->batch);
    slot_vcache_free(f->vcache);
    slot_events_free(f->ev_head);
    free(f);
}

bool slot_group_owns(const struct slot_group_state *gs, uint16_t hash_slot)
{
    return bitmap_has(gs->owned, hash_slot);
}

bool slot_group_fenced(const struct slot_group_state *gs, uint16_t hash_slot)
{
    return bitmap_has(gs->fenced, hash_slot);
}

bool slot_group_incoming(const struct slot_group_state *gs, uint16_t hash_slot)
{
    return bitmap_has(gs->incoming, hash_slot);
}

/* The group's sub record (caller frees *v with free()); absent: 0 with *v NULL. */
static int group_meta_get(struct slot_fsm *f, uint32_t group, uint8_t sub, void **v, size_t *vl)
{
    uint8_t key[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(key, group, sub);
    *v = NULL;
    *vl = 0;
    int rc = store_fsm_get(f->store, key, sizeof(key), v, vl);
    if (rc == STORE_ENOTFOUND) {
        *v = NULL;
        return 0;
    }
    return rc;
}

/* The owned record: absent leaves gs uninitialized. */
static int load_owned(struct slot_fsm *f, struct slot_group_state *gs)
{
    void *v;
    size_t vl;
    int rc = group_meta_get(f, gs->group, SLOT_GROUP_META_OWNED, &v, &vl);
    if (rc != 0 || v == NULL)
        return rc;
    if (vl != 1 + sizeof(gs->owned) || ((uint8_t *)v)[0] != VALUE_VERSION) {
        free(v);
        return STORE_ECORRUPT;
    }
    memcpy(gs->owned, (uint8_t *)v + 1, sizeof(gs->owned));
    gs->initialized = true;
    free(v);
    return 0;
}

/* The migration record: absent leaves the migration fields zero. */
static int load_migration(struct slot_fsm *f, struct slot_group_state *gs)
{
    void *v;
    size_t vl;
    int rc = group_meta_get(f, gs->group, SLOT_GROUP_META_MIGRATION, &v, &vl);
    if (rc != 0 || v == NULL)
        return rc;
    rc = slot_group_migration_decode(v, vl, gs);
    free(v);
    return rc;
}

int slot_fsm_load_group(struct slot_fsm *f, uint32_t group, struct slot_group_state *gs)
{
    memset(gs, 0, sizeof(*gs));
    gs->group = group;
    int rc = load_owned(f, gs);
    if (rc == 0)
        rc = load_migration(f, gs);
    return rc;
}

/* Counts the stored rows of the hash slots in slots, stopping past max. */
static int wipe_count(struct slot_fsm *f, const uint8_t slots[32], size_t max, size_t *n)
{
    *n = 0;
    for (unsigned s = 0; s < 256 && *n <= max; s++) {
        if (!bitmap_has(slots, (uint16_t)s) || bitmap_has(f->wiped, (uint16_t)s))
            continue;
        uint8_t lo[2], hi[2];
        store_put_u16(lo, (uint16_t)s);
        store_put_u16(hi, s == 255 ? 0xFFFF : (uint16_t)(s + 1)); /* 0xFFFF: group metadata */
        struct store_iter *it;
        int rc = store_fsm_iter_new(f->store, lo, 2, hi, 2, &it);
        if (rc != 0)
            return rc;
        for (; store_iter_valid(it) && *n <= max; store_iter_next(it))
            (*n)++;
        rc = store_iter_status(it);
        store_iter_free(it);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int slot__fsm_wipe(struct slot_fsm *f, uint32_t group, const uint8_t in_slots[32], bool *over)
{
    uint8_t slots[32]; /* in_slots without those another hosted group claims */
    memcpy(slots, in_slots, sizeof(slots));
    for (unsigned s = 0; s < 256 && f->claimed != NULL; s++)
        if (bitmap_has(slots, (uint16_t)s) && f->claimed(f->claimed_ctx, group, (uint16_t)s))
            slots[s / 8] &= (uint8_t) ~(1u << (s % 8));
    size_t n;
    *over = false;
    slot_vcache_clear(f->vcache); /* the range deletes below bypass fsm_write */
    int rc = wipe_count(f, slots, SLOT_MIGRATION_WIPE_ROWS_MAX, &n);
    if (rc != 0)
        return rc;
    if (n > SLOT_MIGRATION_WIPE_ROWS_MAX) {
        *over = true;
        return 0;
    }
    /* Rows the batch put: new overlay items go in front of f->all, so this walk sees only the
     * items that were there when it started; superseded items have key_len 0. */
    for (struct overlay_item *it = f->all; it != NULL && rc == 0; it = it->all_next) {
        if (it->key_len >= 2 && !it->deleted && bitmap_has(slots, store_get_u16(it->key)))
            rc = fsm_write(f, it->key, it->key_len, NULL, 0);
    }
    for (unsigned s = 0; s < 256 && rc == 0; s++) {
        if (!bitmap_has(slots, (uint16_t)s) || bitmap_has(f->wiped, (uint16_t)s))
            continue;
        uint8_t lo[2], hi[2];
        store_put_u16(lo, (uint16_t)s);
        store_put_u16(hi, s == 255 ? 0xFFFF : (uint16_t)(s + 1)); /* 0xFFFF: group metadata */
        rc = store_fsm_batch_delete_range(f->store, f->batch, lo, 2, hi, 2,
                                          SLOT_MIGRATION_WIPE_ROWS_MAX);
        if (rc == 0)
            f->wiped[s / 8] |= (uint8_t)(1u << (s % 8));
    }
    return rc;
}

void slot_fsm_begin(struct slot_fsm *f)
{
    overlay_clear(f);
    store_fsm_batch_clear(f->batch);
    f->lease_written = false;
}

void slot__fsm_lease_written(struct slot_fsm *f)
{
    f->lease_written = true;
}

uint64_t slot_fsm_lease_commits(struct slot_fsm *f)
{
    return atomic_load_explicit(&f->lease_commits, memory_order_acquire);
}

void slot_fsm_set_applied(struct slot_fsm *f, uint32_t group, uint64_t index)
{
    store_fsm_batch_set_applied(f->batch, group, index);
}

int slot_fsm_commit(struct slot_fsm *f)
{
    return slot_fsm_commit_sync(f, false);
}

int slot_fsm_commit_sync(struct slot_fsm *f, bool sync)
{
    int rc = store_fsm_write(f->store, f->batch, sync);
    overlay_clear(f);
    store_fsm_batch_clear(f->batch);
    if (rc == 0 && f->lease_written)
        atomic_fetch_add_explicit(&f->lease_commits, 1, memory_order_release);
    f->lease_written = false;
    return rc;
}

size_t slot_fsm_batch_bytes(const struct slot_fsm *f)
{
    return store_fsm_batch_bytes(f->batch);
}

int slot__fsm_read(struct slot_fsm *f, const uint8_t *k, size_t kl, bool *found, uint8_t **val,
                   size_t *vl)
{
    return fsm_read(f, k, kl, found, val, vl);
}

int slot__fsm_read_fixed(struct slot_fsm *f, const uint8_t *k, size_t kl, uint8_t version,
                         uint8_t *out, size_t len, bool *found)
{
    uint8_t *raw;
    size_t rl;
    int rc = fsm_read(f, k, kl, found, &raw, &rl);
    if (rc != 0 || !*found)
        return rc;
    if (rl != len || raw[0] != version)
        rc = STORE_ECORRUPT;
    else
        memcpy(out, raw, len);
    free(raw);
    return rc;
}

int slot__fsm_write(struct slot_fsm *f, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
    return fsm_write(f, k, kl, v, vl);
}

/* Every live row key under prefix p (pl bytes) as the batch reads it, the batch's own rows
 * first; cb gets each key once (borrowed for the call). At most max keys: *over says whether
 * there were more. */
int slot__fsm_prefix_keys(struct slot_fsm *f, const uint8_t *p, size_t pl, size_t max,
                          slot__key_cb cb, void *ctx, bool *over)
{
    size_t n = 0;
    int rc = 0;
    *over = false;
    for (struct overlay_item *it = f->all; it != NULL && rc == 0; it = it->all_next) {
        if (it->key_len < pl || it->deleted || memcmp(it->key, p, pl) != 0)
            continue;
        if (n++ == max) {
            *over = true;
            return 0;
        }
        rc = cb(ctx, it->key, it->key_len);
    }
    if (rc != 0 || pl < 2 || bitmap_has(f->wiped, store_get_u16(p)))
        return rc;
    uint8_t hi[STORE_FSM_KEY_MAX + 1];
    size_t hl = pl;
    memcpy(hi, p, pl);
    while (hl > 0 && hi[hl - 1] == 0xFF)
        hl--;
    if (hl == 0)
        return STORE_EINVAL;
    hi[hl - 1]++;
    struct store_iter *iter;
    rc = store_fsm_iter_new(f->store, p, pl, hi, hl, &iter);
    if (rc != 0)
        return rc;
    for (; rc == 0 && store_iter_valid(iter); store_iter_next(iter)) {
        size_t kl;
        const uint8_t *k = store_iter_key(iter, &kl);
        if (overlay_find(f, k, kl) != NULL)
            continue; /* the batch wrote it: counted above if it is live */
        if (n++ == max) {
            *over = true;
            break;
        }
        rc = cb(ctx, k, kl);
    }
    store_iter_free(iter);
    return rc;
}

/* ---- KV rows ---- */

static size_t kv_key(uint8_t *out, uint16_t hs, const void *key, size_t len)
{
    return store_key_fsm(out, hs, SLOT_TABLE_KV, key, len);
}

int slot_kv_decode(const uint8_t *raw, size_t len, uint64_t *version, uint64_t *lease,
                   size_t *value_off)
{
    if (len >= 9 && raw[0] == VALUE_VERSION) {
        *lease = 0;
        *value_off = 9;
    } else if (len >= 17 && raw[0] == KV_LEASE_VERSION) {
        *lease = store_get_u64(raw + 9);
        *value_off = 17;
    } else {
        return STORE_ECORRUPT;
    }
    *version = store_get_u64(raw + 1);
    return 0;
}

/* Current version (0 = absent), lease (0 = none; lease may be NULL) and, if val != NULL, the
 * value (malloc'ed). */
static int kv_lookup_lease(struct slot_fsm *f, const uint8_t *k, size_t kl, uint64_t *version,
                           uint64_t *lease, uint8_t **val, size_t *vl)
{
    bool found;
    uint8_t *raw;
    size_t rl, off;
    uint64_t l = 0;
    *version = 0;
    if (lease != NULL)
        *lease = 0;
    if (val != NULL) {
        *val = NULL;
        *vl = 0;
    } else if (slot_vcache_get(f->vcache, k, kl, &found, version, &l)) {
        if (lease != NULL)
            *lease = l;
        return 0;
    }
    int rc = fsm_read(f, k, kl, &found, &raw, &rl);
    if (rc == 0 && !found)
        slot_vcache_put(f->vcache, k, kl, false, 0, 0);
    if (rc != 0 || !found)
        return rc;
    if (slot_kv_decode(raw, rl, version, &l, &off) != 0) {
        free(raw);
        *version = 0;
        return STORE_ECORRUPT;
    }
    slot_vcache_put(f->vcache, k, kl, true, *version, l);
    if (lease != NULL)
        *lease = l;
    if (val != NULL) {
        *vl = rl - off;
        *val = malloc(*vl ? *vl : 1);
        if (*val == NULL) {
            free(raw);
            return STORE_ENOMEM;
        }
        memcpy(*val, raw + off, *vl);
    }
    free(raw);
    return 0;
}

static int kv_lookup(struct slot_fsm *f, const uint8_t *k, size_t kl, uint64_t *version,
                     uint8_t **val, size_t *vl)
{
    return kv_lookup_lease(f, k, kl, version, NULL, val, vl);
}

/* Records a change of the row k (kl bytes: [hash slot][table][key]) for watchers: value vl
 * bytes, deleted when the row went. */
static int row_event(struct slot_fsm *f, const uint8_t *k, size_t kl, uint64_t version,
                     const uint8_t *value, size_t vl, bool deleted)
{
    struct slot_event *e = malloc(sizeof(*e) + (kl - 3) + vl);
    if (e == NULL)
        return STORE_ENOMEM;
    e->next = NULL;
    e->group = f->ev_group;
    e->index = f->ev_index;
    e->version = version;
    e->deleted = deleted;
    e->table = k[2];
    e->key_len = (uint32_t)(kl - 3);
    e->value_len = (uint32_t)vl;
    e->key = e->data;
    e->value = e->data + e->key_len;
    memcpy(e->key, k + 3, e->key_len);
    if (vl > 0)
        memcpy(e->value, value, vl);
    *f->ev_tail = e;
    f->ev_tail = &e->next;
    return 0;
}

static int kv_event(struct slot_fsm *f, const uint8_t *k, size_t kl, uint64_t version,
                    const ProtobufCBinaryData *value)
{
    if (!f->events_on)
        return 0;
    return row_event(f, k, kl, version, value != NULL ? value->data : NULL,
                     value != NULL ? value->len : 0, value == NULL);
}

bool slot__fsm_events_on(const struct slot_fsm *f)
{
    return f->events_on;
}

int slot__fsm_typed_event(struct slot_fsm *f, const uint8_t *k, size_t kl, const uint8_t *v,
                          size_t vl)
{
    if (!f->events_on || kl < 3 || !slot_typed_table_watched(k[2]))
        return 0;
    /* a stored row is [1][message], a set member [1]: the event carries the message */
    return row_event(f, k, kl, v != NULL ? f->ev_index : 0, v != NULL && vl > 1 ? v + 1 : NULL,
                     v != NULL && vl > 1 ? vl - 1 : 0, v == NULL);
}

static int kv_delete(struct slot_fsm *f, const uint8_t *k, size_t kl)
{
    int rc = fsm_write(f, k, kl, NULL, 0);
    return rc != 0 ? rc : kv_event(f, k, kl, 0, NULL);
}

static int kv_put(struct slot_fsm *f, const uint8_t *k, size_t kl, uint64_t version,
                  const ProtobufCBinaryData *value, uint64_t lease)
{
    size_t off = lease != 0 ? 17 : 9;
    uint8_t *v = malloc(off + value->len);
    if (v == NULL)
        return STORE_ENOMEM;
    v[0] = lease != 0 ? KV_LEASE_VERSION : VALUE_VERSION;
    store_put_u64(v + 1, version);
    if (lease != 0)
        store_put_u64(v + 9, lease);
    if (value->len > 0)
        memcpy(v + off, value->data, value->len);
    int rc = fsm_write(f, k, kl, v, off + value->len);
    free(v);
    return rc != 0 ? rc : kv_event(f, k, kl, version, value);
}

int slot__kv_delete(struct slot_fsm *f, const uint8_t *k, size_t kl)
{
    return kv_delete(f, k, kl);
}

/* Moves key k (kl bytes, [hs][KV][key]) from lease old to lease new (0 = none) in its index. */
static int kv_relink(struct slot_fsm *f, const uint8_t *k, size_t kl, uint64_t old, uint64_t new)
{
    if (old == new)
        return 0;
    uint16_t hs = store_get_u16(k);
    int rc = old != 0 ? slot__lease_detach(f, hs, old, k + 3, kl - 3) : 0;
    return rc == 0 && new != 0 ? slot__lease_attach(f, hs, new, k + 3, kl - 3) : rc;
}

/* ---- Commands ---- */

static int pack_response(const Slotd__V1__ProposeResponse *resp, uint8_t **buf, size_t *len)
{
    size_t n = slotd__v1__propose_response__get_packed_size(resp);
    *buf = malloc(n ? n : 1);
    if (*buf == NULL)
        return STORE_ENOMEM;
    slotd__v1__propose_response__pack(resp, *buf);
    *len = n;
    return 0;
}

/* A put whose lease fails slot__lease_check fills err and writes nothing. */
static int apply_put(struct slot_fsm *f, uint16_t hs, uint64_t index,
                     const Slotd__V1__PutCommand *put, Slotd__V1__PutResult *res, const char *field,
                     struct slotd_error *err)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = kv_key(k, hs, put->key.data, put->key.len);
    uint64_t old_lease;
    int rc = kv_lookup_lease(f, k, kl, &res->prev_version, &old_lease, NULL, NULL);
    if (rc == 0 && put->lease != 0 && put->lease != old_lease)
        rc = slot__lease_check(f, hs, put->lease, 1, field, err);
    if (rc != 0 || err->code != SLOTD_OK)
        return rc;
    res->version = index;
    rc = kv_relink(f, k, kl, old_lease, put->lease);
    return rc != 0 ? rc : kv_put(f, k, kl, index, &put->value, put->lease);
}

static int apply_delete(struct slot_fsm *f, uint16_t hs, const Slotd__V1__DeleteCommand *del,
                        Slotd__V1__DeleteResult *res)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = kv_key(k, hs, del->key.data, del->key.len);
    uint64_t lease;
    int rc = kv_lookup_lease(f, k, kl, &res->prev_version, &lease, NULL, NULL);
    if (rc != 0 || res->prev_version == 0)
        return rc;
    res->deleted = true;
    rc = kv_relink(f, k, kl, lease, 0);
    return rc != 0 ? rc : kv_delete(f, k, kl);
}

/* On failure res->current_value is malloc'ed (the caller frees it). */
static int apply_cas(struct slot_fsm *f, uint16_t hs, uint64_t index,
                     const Slotd__V1__CompareAndSetCommand *cas,
                     Slotd__V1__CompareAndSetResult *res)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = kv_key(k, hs, cas->key.data, cas->key.len);
    uint64_t cur, lease;
    uint8_t *val;
    size_t vl;
    int rc = kv_lookup_lease(f, k, kl, &cur, &lease, &val, &vl);
    if (rc != 0)
        return rc;
    if (cur != cas->expected_version) {
        res->succeeded = false;
        res->version = cur;
        res->current_value.data = val;
        res->current_value.len = vl;
        return 0;
    }
    free(val);
    res->succeeded = true;
    rc = kv_relink(f, k, kl, lease, 0); /* a write without a lease detaches the key */
    if (rc != 0)
        return rc;
    if (cas->delete_) {
        res->version = 0;
        return cur == 0 ? 0 : kv_delete(f, k, kl);
    }
    res->version = index;
    return kv_put(f, k, kl, index, &cas->value, 0);
}

/* ---- Txn: compares, then one branch of put/delete/get ops, in one entry ---- */

static size_t txn_kv_key(uint8_t *out, const ProtobufCBinaryData *key)
{
    return kv_key(out, route_hash_slot(key->data, key->len), key->data, key->len);
}

static int cmp_bytes(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c < 0 ? -1 : 1;
    return al == bl ? 0 : (al < bl ? -1 : 1);
}

static bool cmp_holds(int c, Slotd__V1__TxnCompareOp op)
{
    switch (op) {
    case SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_EQUAL:
        return c == 0;
    case SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_NOT_EQUAL:
        return c != 0;
    case SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_GREATER:
        return c > 0;
    case SLOTD__V1__TXN_COMPARE_OP__TXN_COMPARE_OP_LESS:
        return c < 0;
    default:
        return false; /* refused by slot_validate_txn */
    }
}

static int txn_compare(struct slot_fsm *f, const Slotd__V1__TxnCompare *c, bool *holds)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = txn_kv_key(k, &c->key);
    bool want_value = c->target == SLOTD__V1__TXN_TARGET__TXN_TARGET_VALUE;
    uint64_t version;
    uint8_t *val = NULL;
    size_t vl = 0;
    int rc = kv_lookup(f, k, kl, &version, want_value ? &val : NULL, &vl);
    if (rc != 0)
        return rc;
    switch (c->target) {
    case SLOTD__V1__TXN_TARGET__TXN_TARGET_VERSION:
        *holds = cmp_holds(version == c->version ? 0 : (version < c->version ? -1 : 1), c->op);
        break;
    case SLOTD__V1__TXN_TARGET__TXN_TARGET_VALUE:
        *holds = version != 0 && cmp_holds(cmp_bytes(val, vl, c->value.data, c->value.len), c->op);
        break;
    case SLOTD__V1__TXN_TARGET__TXN_TARGET_EXISTS:
        *holds = version != 0;
        break;
    default:
        *holds = version == 0;
        break;
    }
    free(val);
    return 0;
}

static bool same_key(const ProtobufCBinaryData *a, const ProtobufCBinaryData *b)
{
    return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

/* Checks that the value bytes the branch's get ops would return stay within
 * SLOT_TXN_RESULT_BYTES_MAX, before anything is written: a get reads the last earlier put or
 * delete of its key in the branch, else the stored value. Fills err when over. */
static int txn_check_result_bytes(struct slot_fsm *f, Slotd__V1__TxnOp **ops, size_t n,
                                  const char *branch, struct slotd_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i]->op_case != SLOTD__V1__TXN_OP__OP_GET)
            continue;
        const ProtobufCBinaryData *key = &ops[i]->get->key;
        size_t j = i, len = 0;
        bool known = false;
        while (j-- > 0 && !known) {
            if (ops[j]->op_case == SLOTD__V1__TXN_OP__OP_PUT && same_key(&ops[j]->put->key, key)) {
                len = ops[j]->put->value.len;
                known = true;
            } else if (ops[j]->op_case == SLOTD__V1__TXN_OP__OP_DELETE &&
                       same_key(&ops[j]->delete_->key, key))
                known = true;
        }
        if (!known) {
            uint8_t k[STORE_FSM_KEY_MAX];
            size_t kl = txn_kv_key(k, key);
            uint64_t version;
            uint8_t *val;
            int rc = kv_lookup(f, k, kl, &version, &val, &len);
            if (rc != 0)
                return rc;
            free(val);
        }
        total += len;
        if (total > SLOT_TXN_RESULT_BYTES_MAX) {
            char field[64];
            snprintf(field, sizeof(field), "txn.%s[%zu].get", branch, i);
            slotd_error_field(err, field, SLOT_TXN_RESULT_BYTES_MAX,
                              "%s: the txn's get ops would return more than %u value bytes; "
                              "nothing was applied",
                              field, SLOT_TXN_RESULT_BYTES_MAX);
            return 0;
        }
    }
    return 0;
}

/* Checks, before anything is written, that the branch's puts may attach their keys to their
 * leases (each put counted as one more key of its lease). Fills err when one may not. */
static int txn_check_leases(struct slot_fsm *f, Slotd__V1__TxnOp **ops, size_t n,
                            const char *branch, struct slotd_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (ops[i]->op_case != SLOTD__V1__TXN_OP__OP_PUT || ops[i]->put->lease == 0)
            continue;
        uint32_t extra = 0;
        for (size_t j = 0; j <= i; j++)
            extra += ops[j]->op_case == SLOTD__V1__TXN_OP__OP_PUT &&
                     ops[j]->put->lease == ops[i]->put->lease;
        char field[64];
        snprintf(field, sizeof(field), "txn.%s[%zu].put.lease", branch, i);
        const ProtobufCBinaryData *key = &ops[i]->put->key;
        int rc = slot__lease_check(f, route_hash_slot(key->data, key->len), ops[i]->put->lease,
                                   extra, field, err);
        if (rc != 0 || err->code != SLOTD_OK)
            return rc;
    }
    return 0;
}

/* The results of one op: the TxnOpResult points at one of the others. */
struct txn_op_out {
    Slotd__V1__TxnOpResult r;
    Slotd__V1__PutResult put;
    Slotd__V1__DeleteResult del;
    Slotd__V1__GetResult get; /* get.value.data is malloc'ed */
};

static int txn_apply_op(struct slot_fsm *f, uint64_t index, const Slotd__V1__TxnOp *op,
                        struct txn_op_out *o)
{
    slotd__v1__txn_op_result__init(&o->r);
    slotd__v1__put_result__init(&o->put);
    slotd__v1__delete_result__init(&o->del);
    slotd__v1__get_result__init(&o->get);
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl;
    switch (op->op_case) {
    case SLOTD__V1__TXN_OP__OP_PUT:
        o->r.result_case = SLOTD__V1__TXN_OP_RESULT__RESULT_PUT;
        o->r.put = &o->put;
        struct slotd_error perr = {.code = SLOTD_OK};
        int prc = apply_put(f, route_hash_slot(op->put->key.data, op->put->key.len), index, op->put,
                            &o->put, "txn put.lease", &perr);
        /* txn_check_leases allowed every lease before the first write */
        return prc != 0 ? prc : (perr.code != SLOTD_OK ? STORE_EINVAL : 0);
    case SLOTD__V1__TXN_OP__OP_DELETE:
        o->r.result_case = SLOTD__V1__TXN_OP_RESULT__RESULT_DELETE;
        o->r.delete_ = &o->del;
        return apply_delete(f, route_hash_slot(op->delete_->key.data, op->delete_->key.len),
                            op->delete_, &o->del);
    default:
        o->r.result_case = SLOTD__V1__TXN_OP_RESULT__RESULT_GET;
        o->r.get = &o->get;
        kl = txn_kv_key(k, &op->get->key);
        int rc = kv_lookup_lease(f, k, kl, &o->get.version, &o->get.lease, &o->get.value.data,
                                 &o->get.value.len);
        o->get.found = rc == 0 && o->get.version != 0;
        if (!o->get.found) {
            free(o->get.value.data);
            o->get.value.data = NULL;
            o->get.value.len = 0;
        }
        return rc;
    }
}

/* Applies a validated txn whose keys the group owns; fills *buf with the packed response, or
 * err when the txn is refused (then nothing was written). */
static int apply_txn(struct slot_fsm *f, const struct slot_group_state *gs, uint64_t index,
                     uint64_t term, const Slotd__V1__TxnCommand *txn, uint8_t **buf, size_t *len,
                     struct slotd_error *err)
{
    bool holds = true;
    int rc = 0;
    for (size_t i = 0; rc == 0 && holds && i < txn->n_compares; i++)
        rc = txn_compare(f, txn->compares[i], &holds);
    size_t n = holds ? txn->n_success : txn->n_failure;
    Slotd__V1__TxnOp **ops = holds ? txn->success : txn->failure;
    if (rc == 0)
        rc = txn_check_result_bytes(f, ops, n, holds ? "success" : "failure", err);
    if (rc == 0 && err->code == SLOTD_OK)
        rc = txn_check_leases(f, ops, n, holds ? "success" : "failure", err);
    if (rc != 0 || err->code != SLOTD_OK)
        return rc;
    struct txn_op_out *outs = calloc(n ? n : 1, sizeof(*outs));
    Slotd__V1__TxnOpResult **rp = calloc(n ? n : 1, sizeof(*rp));
    if (outs == NULL || rp == NULL) {
        rc = STORE_ENOMEM;
        goto out;
    }
    size_t done = 0;
    for (; rc == 0 && done < n; done++) {
        rc = txn_apply_op(f, index, ops[done], &outs[done]);
        rp[done] = &outs[done].r;
    }
    if (rc == 0) {
        Slotd__V1__TxnResult res = SLOTD__V1__TXN_RESULT__INIT;
        res.succeeded = holds;
        res.n_results = n;
        res.results = rp;
        Slotd__V1__ProposeResponse resp = SLOTD__V1__PROPOSE_RESPONSE__INIT;
        resp.applied_index = index;
        resp.group_id = gs->group;
        resp.term = term;
        resp.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_TXN;
        resp.txn = &res;
        rc = pack_response(&resp, buf, len);
    }
    for (size_t i = 0; i < done; i++)
        free(outs[i].get.value.data);
out:
    free(outs);
    free(rp);
    return rc;
}

struct txn_owned {
    const struct slot_group_state *gs;
    uint64_t index;
    struct slotd_error *err;
};

/* Every key of a txn must be in a hash slot the group owns and that is not fenced. */
static int txn_key_owned(void *ctx, const ProtobufCBinaryData *key, const char *field, bool writes)
{
    struct txn_owned *o = ctx;
    uint16_t hs = route_hash_slot(key->data, key->len);
    (void)writes;
    if (!slot_group_owns(o->gs, hs)) {
        slotd_error_set(o->err, SLOTD_EWRONG_GROUP,
                        "group %u index %llu: %s: hash slot %u is not owned by this group; "
                        "nothing of the txn was applied",
                        o->gs->group, (unsigned long long)o->index, field, hs);
        return 1;
    }
    if (slot_group_fenced(o->gs, hs)) {
        slotd_error_set(o->err, SLOTD_EHASH_SLOT_FENCED,
                        "group %u: %s: hash slot %u is fenced by hash-slot migration task %llu; "
                        "retry after the route changes",
                        o->gs->group, field, hs, (unsigned long long)o->gs->migration_task);
        return 1;
    }
    return 0;
}

/* ---- Dedupe table: the last SLOT_DEDUPE_WINDOW request ids per hash slot. ---- */

static int dedupe_find(struct slot_fsm *f, uint16_t hs, const ProtobufCBinaryData *rid,
                       uint8_t **resp, size_t *resp_len, bool *found)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = store_key_fsm(k, hs, SLOT_TABLE_DEDUPE, rid->data, rid->len);
    uint8_t *raw;
    size_t rl;
    int rc = fsm_read(f, k, kl, found, &raw, &rl);
    if (rc != 0 || !*found)
        return rc;
    if (rl < 9 || raw[0] != VALUE_VERSION) {
        free(raw);
        return STORE_ECORRUPT;
    }
    *resp_len = rl - 9;
    memmove(raw, raw + 9, *resp_len);
    *resp = raw;
    return 0;
}

static int dedupe_meta(struct slot_fsm *f, uint16_t hs, uint64_t *next, uint64_t *oldest)
{
    uint8_t k[8];
    size_t kl = store_key_fsm(k, hs, SLOT_TABLE_DEDUPE_META, NULL, 0);
    bool found;
    uint8_t raw[17];
    *next = *oldest = 0;
    int rc = slot__fsm_read_fixed(f, k, kl, VALUE_VERSION, raw, sizeof(raw), &found);
    if (rc != 0 || !found)
        return rc;
    *next = store_get_u64(raw + 1);
    *oldest = store_get_u64(raw + 9);
    return 0;
}

/* Forgets the oldest request id of the hash slot. */
static int dedupe_evict(struct slot_fsm *f, uint16_t hs, uint64_t seq)
{
    uint8_t sk[8], k[STORE_FSM_KEY_MAX];
    store_put_u64(sk, seq);
    size_t kl = store_key_fsm(k, hs, SLOT_TABLE_DEDUPE_ORDER, sk, 8);
    bool found;
    uint8_t *rid;
    size_t rl;
    int rc = fsm_read(f, k, kl, &found, &rid, &rl);
    if (rc != 0 || !found)
        return rc;
    rc = fsm_write(f, k, kl, NULL, 0);
    if (rc == 0 && rl <= SLOT_REQUEST_ID_MAX) {
        uint8_t dk[STORE_FSM_KEY_MAX];
        size_t dkl = store_key_fsm(dk, hs, SLOT_TABLE_DEDUPE, rid, rl);
        rc = fsm_write(f, dk, dkl, NULL, 0);
    }
    free(rid);
    return rc;
}

static int dedupe_remember(struct slot_fsm *f, uint16_t hs, const ProtobufCBinaryData *rid,
                           const uint8_t *resp, size_t resp_len)
{
    uint64_t next, oldest;
    int rc = dedupe_meta(f, hs, &next, &oldest);
    if (rc != 0)
        return rc;
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = store_key_fsm(k, hs, SLOT_TABLE_DEDUPE, rid->data, rid->len);
    uint8_t *v = malloc(9 + resp_len);
    if (v == NULL)
        return STORE_ENOMEM;
    v[0] = VALUE_VERSION;
    store_put_u64(v + 1, next);
    memcpy(v + 9, resp, resp_len);
    rc = fsm_write(f, k, kl, v, 9 + resp_len);
    free(v);
    if (rc != 0)
        return rc;
    uint8_t sk[8];
    store_put_u64(sk, next);
    kl = store_key_fsm(k, hs, SLOT_TABLE_DEDUPE_ORDER, sk, 8);
    if ((rc = fsm_write(f, k, kl, rid->data, rid->len)) != 0)
        return rc;
    next++;
    while (next - oldest > SLOT_DEDUPE_WINDOW) {
        if ((rc = dedupe_evict(f, hs, oldest)) != 0)
            return rc;
        oldest++;
    }
    uint8_t m[17];
    m[0] = VALUE_VERSION;
    store_put_u64(m + 1, next);
    store_put_u64(m + 9, oldest);
    kl = store_key_fsm(k, hs, SLOT_TABLE_DEDUPE_META, NULL, 0);
    return fsm_write(f, k, kl, m, sizeof(m));
}

/* ---- Entry dispatch ---- */

static int apply_group_init(struct slot_fsm *f, struct slot_group_state *gs,
                            const Slotd__Internal__V1__GroupInit *init, struct slot_result *out)
{
    if (gs->initialized || init->group_id != gs->group) {
        /* Deterministic no-op: ownership changes only through migration. */
        if (out)
            slotd_error_set(&out->err, SLOTD_EWRONG_GROUP, "group %u: group init ignored",
                            gs->group);
        return 0;
    }
    uint8_t owned[32] = {0};
    for (size_t i = 0; i < init->n_ranges; i++) {
        const Slotd__Internal__V1__HashSlotRange *r = init->ranges[i];
        for (uint32_t s = r->first; s <= r->last && s < 256; s++)
            owned[s / 8] |= (uint8_t)(1u << (s % 8));
    }
    uint8_t key[STORE_GROUP_META_KEY_LEN], val[1 + sizeof(owned)];
    size_t kl = STORE_GROUP_META_KEY_LEN;
    store_key_group_meta(key, gs->group, SLOT_GROUP_META_OWNED);
    val[0] = VALUE_VERSION;
    memcpy(val + 1, owned, sizeof(owned));
    int rc = fsm_write(f, key, kl, val, sizeof(val));
    if (rc == 0) {
        memcpy(gs->owned, owned, sizeof(owned));
        gs->initialized = true;
    }
    return rc;
}

/* The entry's routing key (borrowed from cmd). A typed command is validated again, so a bad
 * entry is rejected identically on every replica; the error is filled otherwise. */
static int command_key(const Slotd__Internal__V1__LogCommand *cmd, ProtobufCBinaryData *key,
                       struct slotd_error *err)
{
    const ProtobufCBinaryData *k = NULL;
    switch (cmd->command_case) {
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_PUT:
        k = &cmd->put->key;
        break;
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_DELETE:
        k = &cmd->delete_->key;
        break;
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_COMPARE_AND_SET:
        k = &cmd->compare_and_set->key;
        break;
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_TXN:
        if (slot_validate_txn(cmd->txn, &k, err) != 0)
            return -1;
        break;
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_GRANT:
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_KEEP_ALIVE:
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_REVOKE:
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_LEASE_EXPIRE:
        return slot__lease_command_key(cmd, key, err);
    default:
        if (slot__meta_is_command(cmd->command_case))
            return slot__meta_validate_command(
                cmd->command_case, slot__oneof_get(&cmd->base, cmd->command_case), key, err);
        break;
    }
    if (k == NULL || k->len == 0 || k->len > SLOT_KEY_MAX) {
        slotd_error_set(err, SLOTD_EINTERNAL, "entry has no valid key command");
        return -1;
    }
    *key = *k;
    return 0;
}

/* Applies a typed metadata command: fills *buf with the packed response, or err when the
 * command fails its fence or invariant (then nothing was written). */
static int apply_typed_command(struct slot_fsm *f, const struct slot_group_state *gs,
                               uint64_t index, uint64_t term,
                               const Slotd__Internal__V1__LogCommand *cmd, uint8_t **buf,
                               size_t *len, struct slotd_error *err)
{
    Slotd__V1__ProposeResponse resp = SLOTD__V1__PROPOSE_RESPONSE__INIT;
    resp.applied_index = index;
    resp.group_id = gs->group;
    resp.term = term;
    struct slot__apply a = {.f = f,
                            .hs = (uint16_t)cmd->hash_slot,
                            .index = index,
                            .number = cmd->command_case,
                            .resp = &resp,
                            .err = err};
    int rc = slot__meta_apply(&a, slot__oneof_get(&cmd->base, cmd->command_case));
    if (rc != 0 || err->code != SLOTD_OK) {
        free(a.buf);
        return rc;
    }
    *buf = a.buf;
    *len = a.len;
    return 0;
}

/* Applies a key command; fills *buf with the packed response. */
static int apply_kv_command(struct slot_fsm *f, const struct slot_group_state *gs, uint64_t index,
                            uint64_t term, const Slotd__Internal__V1__LogCommand *cmd,
                            uint8_t **buf, size_t *len, struct slotd_error *err)
{
    Slotd__V1__ProposeResponse resp = SLOTD__V1__PROPOSE_RESPONSE__INIT;
    Slotd__V1__PutResult put = SLOTD__V1__PUT_RESULT__INIT;
    Slotd__V1__DeleteResult del = SLOTD__V1__DELETE_RESULT__INIT;
    Slotd__V1__CompareAndSetResult cas = SLOTD__V1__COMPARE_AND_SET_RESULT__INIT;
    uint16_t hs = (uint16_t)cmd->hash_slot;
    int rc;
    resp.applied_index = index;
    resp.group_id = gs->group;
    resp.term = term;
    switch (cmd->command_case) {
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_PUT:
        rc = apply_put(f, hs, index, cmd->put, &put, "put.lease", err);
        resp.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT;
        resp.put = &put;
        break;
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_DELETE:
        rc = apply_delete(f, hs, cmd->delete_, &del);
        resp.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_DELETE;
        resp.delete_ = &del;
        break;
    default:
        rc = apply_cas(f, hs, index, cmd->compare_and_set, &cas);
        resp.result_case = SLOTD__V1__PROPOSE_RESPONSE__RESULT_COMPARE_AND_SET;
        resp.compare_and_set = &cas;
        break;
    }
    if (rc == 0 && err->code == SLOTD_OK)
        rc = pack_response(&resp, buf, len);
    free(cas.current_value.data);
    return rc;
}

/* Marks a stored response as a duplicate answer. */
static int mark_deduplicated(uint8_t **buf, size_t *len)
{
    Slotd__V1__ProposeResponse *r = slotd__v1__propose_response__unpack(NULL, *len, *buf);
    if (r == NULL)
        return STORE_ECORRUPT;
    r->deduplicated = true;
    uint8_t *nb;
    size_t nl;
    int rc = pack_response(r, &nb, &nl);
    slotd__v1__propose_response__free_unpacked(r, NULL);
    if (rc == 0) {
        free(*buf);
        *buf = nb;
        *len = nl;
    }
    return rc;
}

void slot_events_free(struct slot_event *e)
{
    while (e != NULL) {
        struct slot_event *next = e->next;
        free(e);
        e = next;
    }
}

/* Forgets the events recorded after *mark (an entry refused after it wrote nothing). */
static void events_drop_after(struct slot_fsm *f, struct slot_event **mark)
{
    slot_events_free(*mark);
    *mark = NULL;
    f->ev_tail = mark;
}

void slot_fsm_set_events(struct slot_fsm *f, bool on)
{
    f->events_on = on;
}

struct slot_event *slot_fsm_take_events(struct slot_fsm *f)
{
    struct slot_event *e = f->ev_head;
    f->ev_head = NULL;
    f->ev_tail = &f->ev_head;
    return e;
}

static void reject(struct slot_result *out, int code, const char *what, uint32_t group,
                   uint64_t index)
{
    if (out)
        slotd_error_set(&out->err, code, "group %u index %llu: %s", group,
                        (unsigned long long)index, what);
}

static int apply_command(struct slot_fsm *f, struct slot_group_state *gs, uint64_t index,
                         uint64_t term, const Slotd__Internal__V1__LogCommand *cmd,
                         struct slot_result *out)
{
    ProtobufCBinaryData routing;
    const ProtobufCBinaryData *key = &routing;
    struct slotd_error err = {.code = SLOTD_OK};
    if (command_key(cmd, &routing, &err) != 0) {
        if (err.code == SLOTD_EINTERNAL)
            reject(out, SLOTD_EINTERNAL, "entry has no valid key command", gs->group, index);
        else if (out)
            out->err = err;
        return 0;
    }
    /* The entry's hash slot must be the key's and owned by this group per the
     * group's replicated state, so every replica decides identically. */
    if (cmd->hash_slot >= 256 || route_hash_slot(key->data, key->len) != cmd->hash_slot ||
        !slot_group_owns(gs, (uint16_t)cmd->hash_slot)) {
        reject(out, SLOTD_EWRONG_GROUP, "hash slot is not owned by this group", gs->group, index);
        return 0;
    }
    uint16_t hs = (uint16_t)cmd->hash_slot;
    if (slot_group_fenced(gs, hs)) { /* the source of a hash-slot migration: writes wait */
        if (out)
            slotd_error_set(&out->err, SLOTD_EHASH_SLOT_FENCED,
                            "group %u: hash slot %u is fenced by hash-slot migration task %llu; "
                            "retry after the route changes",
                            gs->group, hs, (unsigned long long)gs->migration_task);
        return 0;
    }
    bool txn = cmd->command_case == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_TXN;
    struct txn_owned owned = {gs, index, &err};
    if (txn && slot_txn_each_key(cmd->txn, txn_key_owned, &owned) != 0) {
        if (out)
            out->err = err;
        return 0;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    bool dup = false;
    int rc = 0;
    if (cmd->request_id.len > 0) {
        rc = dedupe_find(f, hs, &cmd->request_id, &buf, &len, &dup);
        if (rc == 0 && dup && out != NULL)
            rc = mark_deduplicated(&buf, &len);
    }
    struct slot_event **ev_mark = f->ev_tail;
    if (rc == 0 && !dup) {
        if (slot__meta_is_command(cmd->command_case))
            rc = apply_typed_command(f, gs, index, term, cmd, &buf, &len, &err);
        else if (txn)
            rc = apply_txn(f, gs, index, term, cmd->txn, &buf, &len, &err);
        else if (slot__lease_is_command(cmd->command_case))
            rc = slot__lease_apply(f, gs, index, term, cmd, &buf, &len, &err);
        else
            rc = apply_kv_command(f, gs, index, term, cmd, &buf, &len, &err);
        if (rc == 0 && err.code != SLOTD_OK) { /* failed its fence: nothing changed */
            events_drop_after(f, ev_mark);
            if (out)
                out->err = err;
            return 0;
        }
        if (rc == 0 && cmd->request_id.len > 0)
            rc = dedupe_remember(f, hs, &cmd->request_id, buf, len);
    }
    if (rc == 0 && out != NULL) {
        out->resp = buf;
        out->resp_len = len;
        buf = NULL;
    }
    free(buf);
    return rc;
}

int slot_fsm_apply(struct slot_fsm *f, struct slot_group_state *gs, uint64_t index, uint64_t term,
                   const void *data, size_t len, struct slot_result *out)
{
    if (out != NULL) {
        memset(out, 0, sizeof(*out));
        out->err.code = SLOTD_OK;
    }
    if (len == 0)
        return 0; /* a leader's no-op entry */
    Slotd__Internal__V1__LogCommand *cmd =
        slotd__internal__v1__log_command__unpack(NULL, len, data);
    if (cmd == NULL) {
        reject(out, SLOTD_EINTERNAL, "entry does not decode as a LogCommand", gs->group, index);
        return 0;
    }
    int rc;
    f->ev_group = gs->group;
    f->ev_index = index;
    if (cmd->command_case == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_GROUP_INIT)
        rc = apply_group_init(f, gs, cmd->group_init, out);
    else if (slot__migration_is_command(cmd->command_case))
        rc = slot__migration_apply(f, gs, index, term, cmd, out);
    else
        rc = apply_command(f, gs, index, term, cmd, out);
    slotd__internal__v1__log_command__free_unpacked(cmd, NULL);
    return rc;
}

int slot_fsm_get(struct store *store, uint16_t hash_slot, const void *key, size_t len, bool *found,
                 void **value, size_t *value_len, uint64_t *version)
{
    uint64_t lease;
    return slot_fsm_get_lease(store, hash_slot, key, len, found, value, value_len, version,
                              &lease);
}

int slot_fsm_get_lease(struct store *store, uint16_t hash_slot, const void *key, size_t len,
                       bool *found, void **value, size_t *value_len, uint64_t *version,
                       uint64_t *lease)
{
    uint8_t k[STORE_FSM_KEY_MAX];
    size_t kl = kv_key(k, hash_slot, key, len);
    void *raw = NULL;
    size_t rl = 0;
    *found = false;
    *value = NULL;
    *value_len = 0;
    *version = 0;
    *lease = 0;
    int rc = store_fsm_get(store, k, kl, &raw, &rl);
    if (rc == STORE_ENOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    uint8_t *p = raw;
    size_t off;
    if (slot_kv_decode(p, rl, version, lease, &off) != 0) {
        free(raw);
        *version = 0;
        return STORE_ECORRUPT;
    }
    *value_len = rl - off;
    memmove(p, p + off, *value_len);
    *value = p;
    *found = true;
    return 0;
}
