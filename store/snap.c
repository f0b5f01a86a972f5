/* snap.c - a point-in-time view of the fsm database read in bounded chunks (backups). */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(STORE_FSM_SNAP_KEY_MAX == STORE_FSM_KEY_MAX, "cursor buffers hold any fsm key");

/* invariant: s->memory ? (pairs, n) hold the copy : (snap, ro) are set */
struct store_fsm_snap {
    struct store *s;
    const leveldb_snapshot_t *snap;
    leveldb_readoptions_t *ro;
    struct store__mem_pair *pairs; /* memory twin: the whole fsm, copied at creation */
    size_t n;
};

int store_fsm_snap_new(struct store *s, struct store_fsm_snap **out)
{
    struct store_fsm_snap *sn = calloc(1, sizeof(*sn));
    int rc = STORE_ENOMEM;
    if (sn == NULL)
        goto err;
    sn->s = s;
    if (s->memory) {
        rc = store__mem_copy_range(s->mem[STORE__DB_FSM], NULL, 0, NULL, 0, &sn->pairs, &sn->n);
        if (rc != STORE_OK)
            goto err_after_sn;
    } else {
        sn->ro = leveldb_readoptions_create();
        if (sn->ro == NULL)
            goto err_after_sn;
        sn->snap = leveldb_create_snapshot(s->db[STORE__DB_FSM]);
        leveldb_readoptions_set_snapshot(sn->ro, sn->snap);
        leveldb_readoptions_set_fill_cache(sn->ro, 0); /* one pass over everything */
        leveldb_readoptions_set_verify_checksums(sn->ro, 1);
    }
    atomic_fetch_add(&s->iters_open, 1);
    *out = sn;
    return STORE_OK;

err_after_sn:
    free(sn);
err:
    return store__fail(s, rc, "fsm snapshot: out of memory");
}

void store_fsm_snap_free(struct store_fsm_snap *sn)
{
    if (sn == NULL)
        return;
    if (sn->snap != NULL)
        leveldb_release_snapshot(sn->s->db[STORE__DB_FSM], sn->snap);
    if (sn->ro != NULL)
        leveldb_readoptions_destroy(sn->ro);
    store__mem_pairs_free(sn->pairs, sn->n);
    atomic_fetch_sub(&sn->s->iters_open, 1);
    free(sn);
}

/* Memory twin: index of the first pair with key >= k (or > k when after). */
static size_t mem_lower_bound(const struct store_fsm_snap *sn, const void *k, size_t kl, bool after)
{
    size_t lo = 0, hi = sn->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = store__key_cmp(sn->pairs[mid].key, sn->pairs[mid].klen, k, kl);
        if (c < 0 || (after && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int store_fsm_snap_get(struct store_fsm_snap *sn, const void *k, size_t kl, void **val, size_t *vl)
{
    struct store *s = sn->s;
    if (kl == 0 || kl > STORE_FSM_KEY_MAX)
        return store__fail(s, STORE_EINVAL, "fsm snapshot get: key of %zu bytes, want 1 to %d", kl,
                           STORE_FSM_KEY_MAX);
    if (s->memory) {
        size_t i = mem_lower_bound(sn, k, kl, false);
        if (i == sn->n || store__key_cmp(sn->pairs[i].key, sn->pairs[i].klen, k, kl) != 0)
            return STORE_ENOTFOUND;
        *val = malloc(sn->pairs[i].vlen + 1);
        if (*val == NULL)
            return store__fail(s, STORE_ENOMEM, "fsm snapshot get: out of memory");
        memcpy(*val, sn->pairs[i].val, sn->pairs[i].vlen);
        *vl = sn->pairs[i].vlen;
        return STORE_OK;
    }
    char *lerr = NULL;
    size_t n = 0;
    char *v = leveldb_get(s->db[STORE__DB_FSM], sn->ro, k, kl, &n, &lerr);
    if (lerr != NULL) {
        int rc = store__fail(s, STORE_EIO, "fsm snapshot get: %s", lerr);
        leveldb_free(lerr);
        return rc;
    }
    if (v == NULL)
        return STORE_ENOTFOUND;
    *val = malloc(n + 1);
    if (*val == NULL) {
        leveldb_free(v);
        return store__fail(s, STORE_ENOMEM, "fsm snapshot get: out of memory");
    }
    memcpy(*val, v, n);
    *vl = n;
    leveldb_free(v);
    return STORE_OK;
}

int store_fsm_snap_applied(struct store_fsm_snap *sn, uint32_t group, uint64_t *index)
{
    uint8_t key[STORE_GROUP_APPLIED_KEY_LEN];
    uint8_t *v = NULL;
    size_t vl = 0;
    store_key_group_applied(key, group);
    int rc = store_fsm_snap_get(sn, key, sizeof(key), (void **)&v, &vl);
    if (rc == STORE_ENOTFOUND) {
        *index = 0;
        return STORE_OK;
    }
    if (rc != STORE_OK)
        return rc;
    if (vl != 9 || v[0] != STORE_VALUE_VERSION)
        rc = store__fail(sn->s, STORE_ECORRUPT,
                         "fsm snapshot: group %" PRIu32 " applied index: value of %zu bytes "
                         "(version %u), want 9 bytes of version %u",
                         group, vl, vl ? v[0] : 0, STORE_VALUE_VERSION);
    else
        *index = store_get_u64(v + 1);
    free(v);
    return rc;
}

/* Where the next chunk starts: lo, or just after the cursor's last key. */
static void leveldb_seek_start(leveldb_iterator_t *it, const struct store_fsm_snap_cursor *c)
{
    if (c->last_len == 0) {
        if (c->lol > 0)
            leveldb_iter_seek(it, (const char *)c->lo, c->lol);
        else
            leveldb_iter_seek_to_first(it);
        return;
    }
    leveldb_iter_seek(it, (const char *)c->last, c->last_len);
    if (leveldb_iter_valid(it)) {
        size_t kl;
        const char *k = leveldb_iter_key(it, &kl);
        if (store__key_cmp(k, kl, c->last, c->last_len) == 0)
            leveldb_iter_next(it);
    }
}

static bool past_end(const struct store_fsm_snap_cursor *c, const void *k, size_t kl)
{
    return c->has_hi && store__key_cmp(k, kl, c->hi, c->hil) >= 0;
}

/* Remembers k as the cursor's last key and counts the row. */
static void cursor_note(struct store_fsm_snap_cursor *c, const void *k, size_t kl, size_t vl,
                        size_t *bytes)
{
    memcpy(c->last, k, kl);
    c->last_len = kl;
    *bytes += kl + vl;
}

static int scan_memory(struct store_fsm_snap *sn, struct store_fsm_snap_cursor *c, size_t max_bytes,
                       store_row_cb cb, void *arg)
{
    size_t bytes = 0;
    size_t i = c->last_len ? mem_lower_bound(sn, c->last, c->last_len, true)
                           : mem_lower_bound(sn, c->lo, c->lol, false);
    for (; i < sn->n && bytes < max_bytes; i++) {
        const struct store__mem_pair *p = &sn->pairs[i];
        if (past_end(c, p->key, p->klen))
            break;
        if (p->klen > STORE_FSM_KEY_MAX)
            return store__fail(sn->s, STORE_ECORRUPT, "fsm snapshot: key of %zu bytes", p->klen);
        int rc = cb(arg, p->key, p->klen, p->val, p->vlen);
        if (rc != 0)
            return rc;
        cursor_note(c, p->key, p->klen, p->vlen, &bytes);
    }
    c->done = i == sn->n || past_end(c, sn->pairs[i].key, sn->pairs[i].klen);
    return STORE_OK;
}

static int scan_leveldb(struct store_fsm_snap *sn, struct store_fsm_snap_cursor *c,
                        size_t max_bytes, store_row_cb cb, void *arg)
{
    size_t bytes = 0;
    int rc = STORE_OK;
    leveldb_iterator_t *it = leveldb_create_iterator(sn->s->db[STORE__DB_FSM], sn->ro);
    for (leveldb_seek_start(it, c); leveldb_iter_valid(it) && bytes < max_bytes;
         leveldb_iter_next(it)) {
        size_t kl, vl;
        const char *k = leveldb_iter_key(it, &kl);
        if (past_end(c, k, kl))
            break;
        const char *v = leveldb_iter_value(it, &vl);
        if (kl > STORE_FSM_KEY_MAX) {
            rc = store__fail(sn->s, STORE_ECORRUPT, "fsm snapshot: key of %zu bytes", kl);
            goto out;
        }
        rc = cb(arg, k, kl, v, vl);
        if (rc != 0)
            goto out;
        cursor_note(c, k, kl, vl, &bytes);
    }
    if (!leveldb_iter_valid(it)) {
        char *lerr = NULL;
        leveldb_iter_get_error(it, &lerr);
        if (lerr != NULL) {
            rc = store__fail(sn->s, STORE_EIO, "fsm snapshot scan: %s", lerr);
            leveldb_free(lerr);
            goto out;
        }
        c->done = true;
    } else {
        size_t kl;
        const char *k = leveldb_iter_key(it, &kl);
        c->done = past_end(c, k, kl);
    }
out:
    leveldb_iter_destroy(it);
    return rc;
}

int store_fsm_snap_cursor_init(struct store_fsm_snap_cursor *c, const void *lo, size_t lol,
                               const void *hi, size_t hil)
{
    memset(c, 0, sizeof(*c));
    if (lol > STORE_FSM_KEY_MAX || hil > STORE_FSM_KEY_MAX)
        return STORE_EINVAL;
    if (lo != NULL && lol > 0)
        memcpy(c->lo, lo, lol);
    c->lol = lo ? lol : 0;
    if (hi != NULL) {
        memcpy(c->hi, hi, hil);
        c->hil = hil;
        c->has_hi = true;
    }
    return STORE_OK;
}

int store_fsm_snap_scan(struct store_fsm_snap *sn, struct store_fsm_snap_cursor *c,
                        size_t max_bytes, store_row_cb cb, void *arg)
{
    if (c->done)
        return STORE_OK;
    if (sn->s->memory)
        return scan_memory(sn, c, max_bytes, cb, arg);
    return scan_leveldb(sn, c, max_bytes, cb, arg);
}
