/* log.c - the raftlog database: log batches for many groups, group state load, entry replay. */
#include "store/store_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

STORE__BATCH_TYPE(store_log_batch)

#define ENTRY_HEADER_LEN (1 + 8 + 1)      /* ver, term, type */
#define HARD_STATE_LEN (1 + 8 + 8 + 8)    /* ver, term, vote, commit */
#define TOMBSTONE_LEN (1 + 8 + 8 + 8 + 8) /* ver, term, vote, floor index, floor term */
#define CONF_BODY_MAX (4 + 8 * STORE_MEMBERS_MAX + 4 + 8 * STORE_MEMBERS_MAX)
#define SNAPSHOT_HEADER_LEN (1 + 8 + 8) /* ver, index, term; conf body follows */

static const char *const kind_names[] = {
    "", "entry", "hard state", "conf state", "snapshot metadata", "tombstone"};

/* ---- value codecs ---- */

static size_t conf_body_encode(uint8_t *p, const struct store_conf_state *cs)
{
    uint8_t *start = p;
    store_put_u32(p, cs->n_voters);
    p += 4;
    for (uint32_t i = 0; i < cs->n_voters; i++, p += 8)
        store_put_u64(p, cs->voters[i]);
    store_put_u32(p, cs->n_learners);
    p += 4;
    for (uint32_t i = 0; i < cs->n_learners; i++, p += 8)
        store_put_u64(p, cs->learners[i]);
    return (size_t)(p - start);
}

/* Decodes a conf body that must fill exactly len bytes. Returns false when it does not. */
static bool conf_body_decode(const uint8_t *p, size_t len, struct store_conf_state *cs)
{
    memset(cs, 0, sizeof(*cs));
    if (len < 4)
        return false;
    uint32_t nv = store_get_u32(p);
    if (nv > STORE_MEMBERS_MAX || len < 4 + 8 * (size_t)nv + 4)
        return false;
    p += 4;
    for (uint32_t i = 0; i < nv; i++, p += 8)
        cs->voters[i] = store_get_u64(p);
    uint32_t nl = store_get_u32(p);
    p += 4;
    if (nl > STORE_MEMBERS_MAX || len != 4 + 8 * (size_t)nv + 4 + 8 * (size_t)nl)
        return false;
    for (uint32_t i = 0; i < nl; i++, p += 8)
        cs->learners[i] = store_get_u64(p);
    cs->n_voters = nv;
    cs->n_learners = nl;
    return true;
}

static int corrupt_value(struct store *s, uint32_t group, uint8_t kind, const uint8_t *v, size_t vl)
{
    if (vl > 0 && v[0] != STORE_VALUE_VERSION)
        return store__fail(s, STORE_ECORRUPT,
                           "raftlog: group %" PRIu32 " %s: version byte %u, want %u", group,
                           kind_names[kind], v[0], STORE_VALUE_VERSION);
    return store__fail(s, STORE_ECORRUPT,
                       "raftlog: group %" PRIu32 " %s: value of %zu bytes does not decode", group,
                       kind_names[kind], vl);
}

static int decode_hard_state(struct store *s, uint32_t group, const uint8_t *v, size_t vl,
                             struct store_hard_state *hs)
{
    if (vl != HARD_STATE_LEN || v[0] != STORE_VALUE_VERSION)
        return corrupt_value(s, group, STORE_LOG_KIND_HARD_STATE, v, vl);
    hs->term = store_get_u64(v + 1);
    hs->vote = store_get_u64(v + 9);
    hs->commit = store_get_u64(v + 17);
    return STORE_OK;
}

static int decode_conf_state(struct store *s, uint32_t group, const uint8_t *v, size_t vl,
                             struct store_conf_state *cs)
{
    if (vl < 1 || v[0] != STORE_VALUE_VERSION || !conf_body_decode(v + 1, vl - 1, cs))
        return corrupt_value(s, group, STORE_LOG_KIND_CONF_STATE, v, vl);
    return STORE_OK;
}

static int decode_snapshot_meta(struct store *s, uint32_t group, const uint8_t *v, size_t vl,
                                struct store_snapshot_meta *m)
{
    if (vl < SNAPSHOT_HEADER_LEN || v[0] != STORE_VALUE_VERSION ||
        !conf_body_decode(v + SNAPSHOT_HEADER_LEN, vl - SNAPSHOT_HEADER_LEN, &m->conf))
        return corrupt_value(s, group, STORE_LOG_KIND_SNAPSHOT_META, v, vl);
    m->index = store_get_u64(v + 1);
    m->term = store_get_u64(v + 9);
    return STORE_OK;
}

static int decode_entry(struct store *s, uint32_t group, uint64_t index, const uint8_t *v,
                        size_t vl, struct store_entry *e)
{
    if (vl < ENTRY_HEADER_LEN || v[0] != STORE_VALUE_VERSION) {
        if (vl > 0 && v[0] != STORE_VALUE_VERSION)
            return store__fail(s, STORE_ECORRUPT,
                               "raftlog: group %" PRIu32 " entry %" PRIu64
                               ": version byte %u, want %u",
                               group, index, v[0], STORE_VALUE_VERSION);
        return store__fail(s, STORE_ECORRUPT,
                           "raftlog: group %" PRIu32 " entry %" PRIu64
                           ": value of %zu bytes is shorter than %d",
                           group, index, vl, ENTRY_HEADER_LEN);
    }
    e->index = index;
    e->term = store_get_u64(v + 1);
    e->type = v[9];
    e->data = v + ENTRY_HEADER_LEN;
    e->len = vl - ENTRY_HEADER_LEN;
    return STORE_OK;
}

/* ---- batches ---- */

void store_log_batch_put_entry(struct store_log_batch *b, uint32_t group,
                               const struct store_entry *e)
{
    uint8_t key[STORE_LOG_ENTRY_KEY_LEN];
    if (b->b.err != STORE_OK)
        return;
    if (e->len > STORE_BATCH_BYTES_MAX) {
        store__batch_fail(&b->b, STORE_ELIMIT,
                          "raftlog: group %" PRIu32 " entry %" PRIu64 ": %zu bytes exceed %zu",
                          group, e->index, e->len, STORE_BATCH_BYTES_MAX);
        return;
    }
    uint8_t *v = store__batch_scratch(&b->b, ENTRY_HEADER_LEN + e->len);
    if (v == NULL)
        return;
    store_key_log_entry(key, group, e->index);
    v[0] = STORE_VALUE_VERSION;
    store_put_u64(v + 1, e->term);
    v[9] = e->type;
    if (e->len)
        memcpy(v + ENTRY_HEADER_LEN, e->data, e->len);
    store__batch_put(&b->b, key, sizeof(key), v, ENTRY_HEADER_LEN + e->len);
}

void store_log_batch_put_hard_state(struct store_log_batch *b, uint32_t group,
                                    const struct store_hard_state *hs)
{
    uint8_t key[STORE_LOG_KEY_PREFIX_LEN], v[HARD_STATE_LEN];
    store_key_log(key, group, STORE_LOG_KIND_HARD_STATE);
    v[0] = STORE_VALUE_VERSION;
    store_put_u64(v + 1, hs->term);
    store_put_u64(v + 9, hs->vote);
    store_put_u64(v + 17, hs->commit);
    store__batch_put(&b->b, key, sizeof(key), v, sizeof(v));
}

void store_log_batch_put_tombstone(struct store_log_batch *b, uint32_t group,
                                   const struct store_tombstone *t)
{
    uint8_t key[STORE_LOG_KEY_PREFIX_LEN], v[TOMBSTONE_LEN];
    store_key_log(key, group, STORE_LOG_KIND_TOMBSTONE);
    v[0] = STORE_VALUE_VERSION;
    store_put_u64(v + 1, t->term);
    store_put_u64(v + 9, t->vote);
    store_put_u64(v + 17, t->floor_index);
    store_put_u64(v + 25, t->floor_term);
    store__batch_put(&b->b, key, sizeof(key), v, sizeof(v));
}

static bool conf_state_ok(struct store_log_batch *b, uint32_t group, const char *what,
                          const struct store_conf_state *cs)
{
    if (cs->n_voters <= STORE_MEMBERS_MAX && cs->n_learners <= STORE_MEMBERS_MAX)
        return true;
    store__batch_fail(&b->b, STORE_EINVAL,
                      "raftlog: group %" PRIu32 " %s: %" PRIu32 " voters and %" PRIu32
                      " learners, at most %d each",
                      group, what, cs->n_voters, cs->n_learners, STORE_MEMBERS_MAX);
    return false;
}

void store_log_batch_put_conf_state(struct store_log_batch *b, uint32_t group,
                                    const struct store_conf_state *cs)
{
    uint8_t key[STORE_LOG_KEY_PREFIX_LEN], v[1 + CONF_BODY_MAX];
    if (!conf_state_ok(b, group, "conf state", cs))
        return;
    store_key_log(key, group, STORE_LOG_KIND_CONF_STATE);
    v[0] = STORE_VALUE_VERSION;
    size_t n = 1 + conf_body_encode(v + 1, cs);
    store__batch_put(&b->b, key, sizeof(key), v, n);
}

void store_log_batch_put_snapshot_meta(struct store_log_batch *b, uint32_t group,
                                       const struct store_snapshot_meta *m)
{
    uint8_t key[STORE_LOG_KEY_PREFIX_LEN], v[SNAPSHOT_HEADER_LEN + CONF_BODY_MAX];
    if (!conf_state_ok(b, group, "snapshot metadata", &m->conf))
        return;
    store_key_log(key, group, STORE_LOG_KIND_SNAPSHOT_META);
    v[0] = STORE_VALUE_VERSION;
    store_put_u64(v + 1, m->index);
    store_put_u64(v + 9, m->term);
    size_t n = SNAPSHOT_HEADER_LEN + conf_body_encode(v + SNAPSHOT_HEADER_LEN, &m->conf);
    store__batch_put(&b->b, key, sizeof(key), v, n);
}

void store_log_batch_delete_entries(struct store_log_batch *b, uint32_t group, uint64_t lo,
                                    uint64_t hi)
{
    uint8_t key[STORE_LOG_ENTRY_KEY_LEN];
    if (hi <= lo)
        return;
    if (hi - lo > STORE_LOG_DELETE_SPAN_MAX) {
        store__batch_fail(&b->b, STORE_ELIMIT,
                          "raftlog: group %" PRIu32 " delete entries [%" PRIu64 ", %" PRIu64
                          "): span over %" PRIu64 " indexes",
                          group, lo, hi, STORE_LOG_DELETE_SPAN_MAX);
        return;
    }
    store_key_log_entry(key, group, lo);
    for (uint64_t i = lo; i < hi && b->b.err == STORE_OK; i++) {
        store_put_u64(key + 5, i);
        store__batch_delete(&b->b, key, sizeof(key));
    }
}

void store_log_batch_delete_group(struct store *s, struct store_log_batch *b, uint32_t group)
{
    uint8_t prefix[4];
    struct store__cursor c;
    size_t kl;

    if (b->b.err != STORE_OK)
        return;
    store_put_u32(prefix, group);
    store__cursor_open(s, STORE__DB_RAFTLOG, false, &c);
    for (store__cursor_seek(&c, prefix, sizeof(prefix)); store__cursor_valid(&c);
         store__cursor_next(&c)) {
        const uint8_t *k = store__cursor_key(&c, &kl);
        if (kl < sizeof(prefix) || memcmp(k, prefix, sizeof(prefix)) != 0)
            break;
        store__batch_delete(&b->b, k, kl);
    }
    /* A failed scan leaves some deletes in b; the recorded error keeps b from being written. */
    if (store__cursor_status(&c, "raftlog delete group") != STORE_OK)
        store__batch_fail(&b->b, STORE_EIO, "raftlog: group %" PRIu32 " delete: %s", group,
                          store_errmsg(s));
    store__cursor_close(&c);
}

int store_log_write(struct store *s, struct store_log_batch *b, bool sync)
{
    return store__batch_write(s, STORE__DB_RAFTLOG, &b->b, sync, "raftlog write");
}

/* ---- reads ---- */

/* Reads [group][kind]. STORE_ENOTFOUND when absent; on STORE_OK caller frees *v with free(). */
static int log_get(struct store *s, uint32_t group, uint8_t kind, uint8_t **v, size_t *vl)
{
    uint8_t key[STORE_LOG_KEY_PREFIX_LEN];
    store_key_log(key, group, kind);
    return store__get(s, STORE__DB_RAFTLOG, key, sizeof(key), (void **)v, vl);
}

/* Reads [group][kind] (hard state, conf state or snapshot meta) and decodes it into its field of
 * out, setting has_conf / has_snapshot when that record exists. STORE_ENOTFOUND when absent. */
static int log_load_record(struct store *s, uint32_t group, uint8_t kind,
                           struct store_group_state *out)
{
    uint8_t *v;
    size_t vl;
    int rc = log_get(s, group, kind, &v, &vl);
    if (rc != STORE_OK)
        return rc;
    switch (kind) {
    case STORE_LOG_KIND_HARD_STATE:
        rc = decode_hard_state(s, group, v, vl, &out->hs);
        break;
    case STORE_LOG_KIND_CONF_STATE:
        out->has_conf = true;
        rc = decode_conf_state(s, group, v, vl, &out->conf);
        break;
    default:
        assert(kind == STORE_LOG_KIND_SNAPSHOT_META);
        out->has_snapshot = true;
        rc = decode_snapshot_meta(s, group, v, vl, &out->snapshot);
        break;
    }
    free(v);
    return rc;
}

/* Fills first_index/last_index from the lowest and highest entry keys of the group. */
static int log_load_bounds(struct store *s, uint32_t group, struct store_group_state *out)
{
    uint8_t lo[STORE_LOG_KEY_PREFIX_LEN], hi[STORE_LOG_KEY_PREFIX_LEN];
    struct store__cursor c;
    const uint8_t *k;
    size_t kl;
    int rc = STORE_OK;

    store_key_log(lo, group, STORE_LOG_KIND_ENTRY);
    store_key_log(hi, group, STORE_LOG_KIND_ENTRY + 1);
    store__cursor_open(s, STORE__DB_RAFTLOG, true, &c);
    store__cursor_seek(&c, lo, sizeof(lo));
    if (!store__cursor_valid(&c))
        goto done;
    k = store__cursor_key(&c, &kl);
    if (kl < sizeof(lo) || memcmp(k, lo, sizeof(lo)) != 0)
        goto done;
    if (kl != STORE_LOG_ENTRY_KEY_LEN)
        goto bad_key;
    out->first_index = store_get_u64(k + 5);
    store__cursor_seek_before(&c, hi, sizeof(hi));
    if (!store__cursor_valid(&c))
        goto done;
    k = store__cursor_key(&c, &kl);
    if (kl != STORE_LOG_ENTRY_KEY_LEN || memcmp(k, lo, sizeof(lo)) != 0)
        goto bad_key;
    out->last_index = store_get_u64(k + 5);
done:
    rc = store__cursor_status(&c, "raftlog load");
    store__cursor_close(&c);
    return rc;

bad_key:
    rc =
        store__fail(s, STORE_ECORRUPT, "raftlog: group %" PRIu32 " entry key of %zu bytes, want %d",
                    group, kl, STORE_LOG_ENTRY_KEY_LEN);
    store__cursor_close(&c);
    return rc;
}

int store_log_load_tombstone(struct store *s, uint32_t group, struct store_tombstone *out)
{
    uint8_t *v = NULL;
    size_t vl;
    memset(out, 0, sizeof(*out));
    int rc = log_get(s, group, STORE_LOG_KIND_TOMBSTONE, &v, &vl);
    if (rc != STORE_OK)
        return rc;
    if (vl != TOMBSTONE_LEN || v[0] != STORE_VALUE_VERSION) {
        rc = corrupt_value(s, group, STORE_LOG_KIND_TOMBSTONE, v, vl);
        free(v);
        return rc;
    }
    out->term = store_get_u64(v + 1);
    out->vote = store_get_u64(v + 9);
    out->floor_index = store_get_u64(v + 17);
    out->floor_term = store_get_u64(v + 25);
    free(v);
    return STORE_OK;
}

int store_log_load(struct store *s, uint32_t group, struct store_group_state *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    rc = log_load_record(s, group, STORE_LOG_KIND_HARD_STATE, out);
    if (rc != STORE_OK)
        return rc;
    rc = log_load_record(s, group, STORE_LOG_KIND_CONF_STATE, out);
    if (rc != STORE_OK && rc != STORE_ENOTFOUND)
        return rc;
    rc = log_load_record(s, group, STORE_LOG_KIND_SNAPSHOT_META, out);
    if (rc != STORE_OK && rc != STORE_ENOTFOUND)
        return rc;
    return log_load_bounds(s, group, out);
}

int store_log_iterate(struct store *s, uint32_t group, uint64_t lo, uint64_t hi, store_entry_cb cb,
                      void *arg)
{
    uint8_t key[STORE_LOG_ENTRY_KEY_LEN];
    struct store__cursor c;
    struct store_entry e;
    uint64_t prev = 0;
    bool have_prev = false;
    int rc = STORE_OK;

    if (hi <= lo)
        return STORE_OK;
    store_key_log_entry(key, group, lo);
    store__cursor_open(s, STORE__DB_RAFTLOG, false, &c);
    for (store__cursor_seek(&c, key, sizeof(key)); store__cursor_valid(&c);
         store__cursor_next(&c)) {
        size_t kl, vl;
        const uint8_t *k = store__cursor_key(&c, &kl);
        if (kl < STORE_LOG_KEY_PREFIX_LEN || memcmp(k, key, STORE_LOG_KEY_PREFIX_LEN) != 0)
            break;
        if (kl != STORE_LOG_ENTRY_KEY_LEN) {
            rc = store__fail(s, STORE_ECORRUPT,
                             "raftlog: group %" PRIu32 " entry key of %zu bytes, want %d", group,
                             kl, STORE_LOG_ENTRY_KEY_LEN);
            break;
        }
        uint64_t index = store_get_u64(k + 5);
        if (index >= hi)
            break;
        if (have_prev && index != prev + 1) {
            rc = store__fail(s, STORE_ECORRUPT,
                             "raftlog: group %" PRIu32 " entries: gap after index %" PRIu64
                             ", next stored index is %" PRIu64,
                             group, prev, index);
            break;
        }
        const uint8_t *v = store__cursor_value(&c, &vl);
        rc = decode_entry(s, group, index, v, vl, &e);
        if (rc != STORE_OK)
            break;
        rc = cb(arg, &e);
        if (rc != 0)
            break;
        prev = index;
        have_prev = true;
    }
    if (rc == STORE_OK)
        rc = store__cursor_status(&c, "raftlog iterate");
    store__cursor_close(&c);
    return rc;
}

int store_log_groups(struct store *s, uint32_t **groups, size_t *n)
{
    uint8_t key[STORE_LOG_KEY_PREFIX_LEN];
    struct store__cursor c;
    uint32_t *out = NULL;
    size_t count = 0, cap = 0;
    uint64_t next = 0; /* lowest group id not yet examined */
    int rc = STORE_OK;

    store__cursor_open(s, STORE__DB_RAFTLOG, true, &c);
    while (next <= UINT32_MAX) {
        store_key_log(key, (uint32_t)next, STORE_LOG_KIND_HARD_STATE);
        store__cursor_seek(&c, key, sizeof(key));
        if (!store__cursor_valid(&c))
            break;
        size_t kl;
        const uint8_t *k = store__cursor_key(&c, &kl);
        if (kl < 4) { /* raftlog keys start with a 4-byte group */
            rc = store__fail(s, STORE_ECORRUPT, "raftlog: key of %zu bytes has no group", kl);
            break;
        }
        uint32_t g = store_get_u32(k);
        if (g == next && kl == sizeof(key) && k[4] == STORE_LOG_KIND_HARD_STATE) {
            if (count == cap) {
                size_t ncap = cap ? cap * 2 : 16;
                uint32_t *p = realloc(out, ncap * sizeof(*p));
                if (p == NULL) {
                    rc = store__fail(s, STORE_ENOMEM, "raftlog groups: out of memory");
                    break;
                }
                out = p;
                cap = ncap;
            }
            out[count++] = g;
        }
        next = g == next ? next + 1 : g;
    }
    if (rc == STORE_OK)
        rc = store__cursor_status(&c, "raftlog groups");
    store__cursor_close(&c);
    if (rc != STORE_OK) {
        free(out);
        return rc;
    }
    *groups = out;
    *n = count;
    return STORE_OK;
}
