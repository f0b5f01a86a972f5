/* fsm.c - the fsm database: fsm batches with applied indexes, point reads, snapshot iterators. */
#include "store/store_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

STORE__BATCH_TYPE(store_fsm_batch)

#define APPLIED_VALUE_LEN (1 + 8) /* ver, index */

/* ---- batches ---- */

static bool fsm_key_ok(struct store_fsm_batch *b, const char *what, size_t kl)
{
    if (kl > 0 && kl <= STORE_FSM_KEY_MAX)
        return true;
    store__batch_fail(&b->b, STORE_EINVAL, "fsm %s: key of %zu bytes, want 1 to %d", what, kl,
                      STORE_FSM_KEY_MAX);
    return false;
}

void store_fsm_batch_put(struct store_fsm_batch *b, const void *k, size_t kl, const void *v,
                         size_t vl)
{
    if (fsm_key_ok(b, "put", kl))
        store__batch_put(&b->b, k, kl, v, vl);
}

void store_fsm_batch_delete(struct store_fsm_batch *b, const void *k, size_t kl)
{
    if (fsm_key_ok(b, "delete", kl))
        store__batch_delete(&b->b, k, kl);
}

void store_fsm_batch_set_applied(struct store_fsm_batch *b, uint32_t group, uint64_t index)
{
    uint8_t key[STORE_GROUP_APPLIED_KEY_LEN], v[APPLIED_VALUE_LEN];
    store_key_group_applied(key, group);
    v[0] = STORE_VALUE_VERSION;
    store_put_u64(v + 1, index);
    store__batch_put(&b->b, key, sizeof(key), v, sizeof(v));
}

/* Scans [lo, hi) into tmp, at most max_keys deletes. STORE_ELIMIT when more keys exist. */
static int fsm_scan_range(struct store *s, struct store__batch *tmp, const void *lo, size_t lol,
                          const void *hi, size_t hil, size_t max_keys)
{
    struct store__cursor c;
    size_t n = 0;
    int rc = STORE_OK;

    store__cursor_open(s, STORE__DB_FSM, false, &c);
    for (store__cursor_seek(&c, lo, lo ? lol : 0); store__cursor_valid(&c);
         store__cursor_next(&c)) {
        size_t kl;
        const uint8_t *k = store__cursor_key(&c, &kl);
        if (hi && store__key_cmp(k, kl, hi, hil) >= 0)
            break;
        if (n == max_keys) {
            rc = store__fail(s, STORE_ELIMIT, "fsm delete range: more than %zu keys in the range",
                             max_keys);
            break;
        }
        store__batch_delete(tmp, k, kl);
        n++;
    }
    int st = store__cursor_status(&c, "fsm delete range");
    if (st != STORE_OK)
        rc = st;
    store__cursor_close(&c);
    if ((rc == STORE_OK || rc == STORE_ELIMIT) && tmp->err != STORE_OK)
        rc = store__fail(s, tmp->err, "fsm delete range: %s", tmp->errmsg);
    return rc;
}

int store_fsm_batch_delete_range(struct store *s, struct store_fsm_batch *b, const void *lo,
                                 size_t lol, const void *hi, size_t hil, size_t max_keys)
{
    struct store__batch tmp;
    int rc;

    if (b->b.err != STORE_OK)
        return store__fail(s, b->b.err, "fsm delete range: batch already failed: %s", b->b.errmsg);
    rc = store__batch_init(&tmp);
    if (rc != STORE_OK) {
        store__fail(s, rc, "fsm delete range: out of memory");
        goto err;
    }
    rc = fsm_scan_range(s, &tmp, lo, lol, hi, hil, max_keys);
    if (rc != STORE_OK && rc != STORE_ELIMIT)
        goto err_after_tmp;
    store__batch_append(&b->b, &tmp);
    if (b->b.err != STORE_OK)
        rc = store__fail(s, b->b.err, "fsm delete range: %s", b->b.errmsg);
    store__batch_destroy(&tmp);
    return rc;

err_after_tmp:
    store__batch_destroy(&tmp);
err:
    return rc;
}

int store_fsm_write(struct store *s, struct store_fsm_batch *b, bool sync)
{
    return store__batch_write(s, STORE__DB_FSM, &b->b, sync, "fsm write");
}

/* ---- reads ---- */

int store_fsm_get(struct store *s, const void *k, size_t kl, void **val, size_t *vl)
{
    if (kl == 0 || kl > STORE_FSM_KEY_MAX)
        return store__fail(s, STORE_EINVAL, "fsm get: key of %zu bytes, want 1 to %d", kl,
                           STORE_FSM_KEY_MAX);
    return store__get(s, STORE__DB_FSM, k, kl, val, vl);
}

int store_fsm_applied(struct store *s, uint32_t group, uint64_t *index)
{
    uint8_t key[STORE_GROUP_APPLIED_KEY_LEN];
    uint8_t *v = NULL;
    size_t vl = 0;

    store_key_group_applied(key, group);
    int rc = store__get(s, STORE__DB_FSM, key, sizeof(key), (void **)&v, &vl);
    if (rc == STORE_ENOTFOUND) {
        *index = 0;
        return STORE_OK;
    }
    if (rc != STORE_OK)
        return rc;
    if (vl != APPLIED_VALUE_LEN || v[0] != STORE_VALUE_VERSION) {
        if (vl > 0 && v[0] != STORE_VALUE_VERSION)
            rc = store__fail(s, STORE_ECORRUPT,
                             "fsm: group %" PRIu32 " applied index: version byte %u, want %u",
                             group, v[0], STORE_VALUE_VERSION);
        else
            rc = store__fail(s, STORE_ECORRUPT,
                             "fsm: group %" PRIu32 " applied index: value of %zu bytes, want %d",
                             group, vl, APPLIED_VALUE_LEN);
    } else {
        *index = store_get_u64(v + 1);
    }
    free(v);
    return rc;
}

/* ---- iterators ---- */

struct store_iter {
    struct store *s;
    bool valid;
    int status;
    /* LevelDB: an iterator (an implicit snapshot) and a copy of the upper bound */
    leveldb_iterator_t *it;
    uint8_t *hi; /* NULL = no upper bound */
    size_t hil;
    /* memory: a copy of the range taken at creation */
    struct store__mem_pair *pairs;
    size_t n, pos; /* invariant: pos <= n */
};

static void iter_settle(struct store_iter *it)
{
    if (it->it == NULL) {
        it->valid = it->pos < it->n;
        return;
    }
    it->valid = leveldb_iter_valid(it->it) != 0;
    if (it->valid && it->hi) {
        size_t kl;
        const char *k = leveldb_iter_key(it->it, &kl);
        it->valid = store__key_cmp(k, kl, it->hi, it->hil) < 0;
    }
    if (!it->valid) {
        char *lerr = NULL;
        leveldb_iter_get_error(it->it, &lerr);
        if (lerr != NULL) {
            it->status = store__fail(it->s, STORE_EIO, "fsm iterator: %s", lerr);
            leveldb_free(lerr);
        }
    }
}

int store_fsm_iter_new(struct store *s, const void *lo, size_t lol, const void *hi, size_t hil,
                       struct store_iter **out)
{
    int rc = STORE_ENOMEM;
    struct store_iter *it = calloc(1, sizeof(*it));
    if (it == NULL)
        goto err;
    it->s = s;
    if (s->memory) {
        rc = store__mem_copy_range(s->mem[STORE__DB_FSM], lo, lol, hi, hil, &it->pairs, &it->n);
        if (rc != STORE_OK)
            goto err_after_alloc;
    } else {
        if (hi) {
            it->hi = malloc(hil ? hil : 1);
            if (it->hi == NULL)
                goto err_after_alloc;
            if (hil)
                memcpy(it->hi, hi, hil);
            it->hil = hil;
        }
        it->it = leveldb_create_iterator(s->db[STORE__DB_FSM], s->ro_fill);
        if (lo)
            leveldb_iter_seek(it->it, lo, lol);
        else
            leveldb_iter_seek_to_first(it->it);
    }
    iter_settle(it);
    atomic_fetch_add(&s->iters_open, 1);
    *out = it;
    return STORE_OK;

err_after_alloc:
    free(it->hi);
    free(it);
err:
    return store__fail(s, rc, "fsm iterator: out of memory");
}

bool store_iter_valid(const struct store_iter *it)
{
    return it->valid;
}

void store_iter_next(struct store_iter *it)
{
    assert(it->valid);
    if (it->it)
        leveldb_iter_next(it->it);
    else
        it->pos++;
    iter_settle(it);
}

const void *store_iter_key(const struct store_iter *it, size_t *len)
{
    assert(it->valid);
    if (it->it)
        return leveldb_iter_key(it->it, len);
    *len = it->pairs[it->pos].klen;
    return it->pairs[it->pos].key;
}

const void *store_iter_value(const struct store_iter *it, size_t *len)
{
    assert(it->valid);
    if (it->it)
        return leveldb_iter_value(it->it, len);
    *len = it->pairs[it->pos].vlen;
    return it->pairs[it->pos].val;
}

int store_iter_status(const struct store_iter *it)
{
    return it->status;
}

void store_iter_free(struct store_iter *it)
{
    if (it == NULL)
        return;
    if (it->it)
        leveldb_iter_destroy(it->it);
    free(it->hi);
    store__mem_pairs_free(it->pairs, it->n);
    atomic_fetch_sub(&it->s->iters_open, 1);
    free(it);
}

int store_fsm_scan(struct store *s, const void *lo, size_t lol, const void *hi, size_t hil,
                   store_row_cb cb, void *ctx)
{
    struct store_iter *it;
    int rc = store_fsm_iter_new(s, lo, lol, hi, hil, &it);
    if (rc != 0)
        return rc;
    for (; rc == 0 && store_iter_valid(it); store_iter_next(it)) {
        size_t kl, vl;
        const void *k = store_iter_key(it, &kl);
        const void *v = store_iter_value(it, &vl);
        rc = cb(ctx, k, kl, v, vl);
    }
    if (rc == STORE_SCAN_STOP)
        rc = STORE_OK;
    if (rc == STORE_OK)
        rc = store_iter_status(it);
    store_iter_free(it);
    return rc;
}
