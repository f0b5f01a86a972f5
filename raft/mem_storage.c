/* mem_storage.c - in-memory stable storage for the core (tests, simulator, log cache). */
#include "raft_int.h"

struct raft_mem_storage {
    struct raft_storage vt;
    struct raft_hard_state hs;
    struct raft_conf_state cs;
    struct raft_snapshot_meta snap; /* the latest snapshot (index 0: none) */
    void *snap_data;                /* owned copy, snap_len bytes */
    size_t snap_len;
    raft_index base;         /* entries <= base are compacted; invariant: base >= snap.index */
    raft_term base_term;     /* term of entry `base` */
    struct raft_entry *ents; /* live entries are ents[head .. head + n), index base + 1 ... */
    size_t head;
    size_t n;
    size_t cap;
    size_t live_bytes; /* data bytes of live entries */
    struct raft__chunks data;
};

static raft_index raft__ms_last(const struct raft_mem_storage *s)
{
    return s->base + s->n;
}

static int raft__ms_initial_state(void *ctx, struct raft_hard_state *hs, struct raft_conf_state *cs)
{
    struct raft_mem_storage *s = ctx;
    *hs = s->hs;
    *cs = s->cs;
    return 0;
}

static int raft__ms_entries(void *ctx, raft_index lo, raft_index hi, size_t max_bytes,
                            const struct raft_entry **out, size_t *n_out)
{
    struct raft_mem_storage *s = ctx;
    RAFT_ASSERT(lo < hi && out != NULL && n_out != NULL);
    if (lo <= s->base) {
        return RAFT_ECOMPACTED;
    }
    if (hi > raft__ms_last(s) + 1) {
        return RAFT_EUNAVAILABLE;
    }
    const struct raft_entry *e = s->ents + s->head + (lo - s->base - 1);
    size_t k = 0;
    size_t bytes = 0;
    while (lo + k < hi && (k == 0 || bytes + e[k].data.len <= max_bytes)) {
        bytes += e[k].data.len;
        k++;
    }
    *out = e;
    *n_out = k;
    return 0;
}

static int raft__ms_term(void *ctx, raft_index i, raft_term *out)
{
    struct raft_mem_storage *s = ctx;
    if (i < s->base) {
        return RAFT_ECOMPACTED;
    }
    if (i > raft__ms_last(s)) {
        return RAFT_EUNAVAILABLE;
    }
    *out = i == s->base ? s->base_term : s->ents[s->head + (i - s->base - 1)].term;
    return 0;
}

static int raft__ms_first_index(void *ctx, raft_index *out)
{
    struct raft_mem_storage *s = ctx;
    *out = s->base + 1;
    return 0;
}

static int raft__ms_last_index(void *ctx, raft_index *out)
{
    *out = raft__ms_last(ctx);
    return 0;
}

static int raft__ms_snapshot(void *ctx, struct raft_snapshot *out)
{
    struct raft_mem_storage *s = ctx;
    out->meta = s->snap;
    out->data.base = s->snap_data;
    out->data.len = s->snap_len;
    return 0;
}

int raft_mem_storage_new(struct raft_mem_storage **out)
{
    struct raft_mem_storage *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return RAFT_ENOMEM;
    }
    s->vt.ctx = s;
    s->vt.initial_state = raft__ms_initial_state;
    s->vt.entries = raft__ms_entries;
    s->vt.term = raft__ms_term;
    s->vt.first_index = raft__ms_first_index;
    s->vt.last_index = raft__ms_last_index;
    s->vt.snapshot = raft__ms_snapshot;
    *out = s;
    return 0;
}

void raft_mem_storage_free(struct raft_mem_storage *s)
{
    if (s == NULL) {
        return;
    }
    raft__chunks_free(&s->data);
    free(s->ents);
    free(s->snap_data);
    free(s);
}

const struct raft_storage *raft_mem_storage_get(struct raft_mem_storage *s)
{
    return &s->vt;
}

void raft_mem_storage_set_hard_state(struct raft_mem_storage *s, const struct raft_hard_state *hs)
{
    s->hs = *hs;
}

void raft_mem_storage_set_conf_state(struct raft_mem_storage *s, const struct raft_conf_state *cs)
{
    s->cs = *cs;
}

int raft_mem_storage_append(struct raft_mem_storage *s, const struct raft_entry *entries, size_t n)
{
    RAFT_ASSERT(s != NULL && (n == 0 || entries != NULL));
    for (size_t i = 1; i < n; i++) {
        RAFT_ASSERT(entries[i].index == entries[0].index + i); /* one slice of a ready */
    }
    size_t skip = 0;
    while (skip < n && entries[skip].index <= s->base) {
        skip++; /* already compacted */
    }
    if (skip == n) {
        return 0;
    }
    entries += skip;
    n -= skip;
    if (entries[0].index > raft__ms_last(s) + 1) {
        return RAFT_EINVAL; /* would leave a gap */
    }
    size_t keep = (size_t)(entries[0].index - s->base - 1);
    if (s->head > 0 && (s->head >= s->n || s->head + keep + n > s->cap)) {
        memmove(s->ents, s->ents + s->head, s->n * sizeof(*s->ents));
        s->head = 0;
    }
    int rv = raft__grow((void **)&s->ents, &s->cap, s->head + keep + n, sizeof(*s->ents));
    if (rv == 0) {
        rv = raft__chunks_reserve(&s->data, raft__entries_bytes(entries, n));
    }
    if (rv != 0) {
        return rv;
    }
    s->live_bytes -= raft__entries_bytes(s->ents + s->head + keep, s->n - keep);
    s->n = keep;
    for (size_t i = 0; i < n; i++) {
        struct raft_entry *e = &s->ents[s->head + s->n++];
        *e = entries[i];
        e->data.base =
            raft__chunks_put(&s->data, entries[i].data.base, entries[i].data.len, e->index);
        s->live_bytes += e->data.len;
    }
    return 0;
}

/* Drops entries <= index (base <= index <= last). */
static void raft__ms_drop_to(struct raft_mem_storage *s, raft_index index, raft_term term)
{
    RAFT_ASSERT(index >= s->base);
    size_t drop = (size_t)(index - s->base);
    if (drop > s->n) {
        drop = s->n;
    }
    s->live_bytes -= raft__entries_bytes(s->ents + s->head, drop);
    s->head += drop;
    s->n -= drop;
    if (s->n == 0) {
        s->head = 0;
    }
    s->base = index;
    s->base_term = term;
    raft__chunks_release(&s->data, index);
}

int raft_mem_storage_compact(struct raft_mem_storage *s, raft_index index)
{
    if (index < s->base) {
        return RAFT_ECOMPACTED;
    }
    if (index > raft__ms_last(s)) {
        return RAFT_EUNAVAILABLE;
    }
    raft_term t = 0;
    raft__ms_term(s, index, &t);
    raft__ms_drop_to(s, index, t);
    return 0;
}

static int raft__ms_set_snapshot(struct raft_mem_storage *s, const struct raft_snapshot_meta *m,
                                 const void *data, size_t len)
{
    void *copy = NULL;
    if (len > 0) {
        copy = malloc(len);
        if (copy == NULL) {
            return RAFT_ENOMEM;
        }
        memcpy(copy, data, len);
    }
    free(s->snap_data);
    s->snap_data = copy;
    s->snap_len = len;
    s->snap = *m;
    return 0;
}

int raft_mem_storage_apply_snapshot(struct raft_mem_storage *s, const struct raft_snapshot *snap)
{
    RAFT_ASSERT(s != NULL && snap != NULL);
    if (snap->meta.index < s->snap.index) {
        return RAFT_ESTALE;
    }
    int rv = raft__ms_set_snapshot(s, &snap->meta, snap->data.base, snap->data.len);
    if (rv != 0) {
        return rv;
    }
    /* the snapshot replaces the whole log */
    s->live_bytes = 0;
    s->head = 0;
    s->n = 0;
    s->base = snap->meta.index;
    s->base_term = snap->meta.term;
    raft__chunks_release(&s->data, (raft_index)-1);
    s->cs = snap->meta.conf;
    return 0;
}

int raft_mem_storage_create_snapshot(struct raft_mem_storage *s, raft_index index,
                                     const struct raft_conf_state *cs, const void *data, size_t len)
{
    if (index <= s->snap.index || index < s->base) {
        return RAFT_ESTALE;
    }
    if (index > raft__ms_last(s)) {
        return RAFT_EUNAVAILABLE;
    }
    struct raft_snapshot_meta m = {.index = index, .conf = cs != NULL ? *cs : s->cs};
    raft__ms_term(s, index, &m.term);
    int rv = raft__ms_set_snapshot(s, &m, data, len);
    if (rv != 0) {
        return rv;
    }
    raft__ms_drop_to(s, index, m.term);
    return 0;
}

size_t raft_mem_storage_bytes(const struct raft_mem_storage *s)
{
    return s->live_bytes + s->n * sizeof(struct raft_entry) + s->snap_len;
}
