/* log.c - the raft log: unstable entries (not yet persisted) in front of read-only storage. */
#include "raft_int.h"

/* Bound on entries returned by one slice (one APPEND, one ready's committed batch). */
#define RAFT__SLICE_MAX_ENTRIES 65536u

/* ---- unstable part (etcd's log_unstable.go) ---- */

static bool raft__unstable_last(const struct raft__unstable *u, raft_index *out)
{
    if (u->n > 0) {
        *out = u->offset + u->n - 1;
        return true;
    }
    if (u->snap != NULL) {
        *out = u->snap->meta.index;
        return true;
    }
    return false;
}

static bool raft__unstable_term(const struct raft__unstable *u, raft_index i, raft_term *out)
{
    if (i < u->offset) {
        if (u->snap != NULL && u->snap->meta.index == i) {
            *out = u->snap->meta.term;
            return true;
        }
        return false;
    }
    if (i - u->offset >= u->n) {
        return false;
    }
    *out = u->ents[i - u->offset].term;
    return true;
}

/* Replaces unstable entries from ents[0].index on. All allocations happen before any change. */
static int raft__unstable_truncate_append(struct raft__unstable *u, const struct raft_entry *ents,
                                          size_t n)
{
    RAFT_ASSERT(n > 0 && ents[0].index > 0);
    raft_index after = ents[0].index - 1;
    size_t keep = 0;
    if (after >= u->offset) {
        keep = (size_t)(after - u->offset + 1);
        if (keep > u->n) {
            keep = u->n; /* caller guarantees contiguity; see raft__log_append */
        }
    }
    int rv = raft__grow((void **)&u->ents, &u->cap, keep + n, sizeof(*u->ents));
    if (rv != 0) {
        return rv;
    }
    rv = raft__chunks_reserve(&u->data, raft__entries_bytes(ents, n));
    if (rv != 0) {
        return rv;
    }
    if (after < u->offset) {
        u->offset = after + 1;
    }
    u->n = keep;
    for (size_t i = 0; i < n; i++) {
        RAFT_ASSERT(ents[i].index == u->offset + u->n); /* contiguous after what is kept */
        struct raft_entry *e = &u->ents[u->n++];
        *e = ents[i];
        e->data.base = raft__chunks_put(&u->data, ents[i].data.base, ents[i].data.len, e->index);
    }
    return 0;
}

static void raft__unstable_free_snap(struct raft__log *l, struct raft_snapshot *s)
{
    if (s != NULL && s != l->snap_in_ready) {
        free(s);
    }
}

/* ---- log ---- */

int raft__log_init(struct raft__log *l, const struct raft_storage *st, raft_index committed,
                   raft_index applied)
{
    memset(l, 0, sizeof(*l));
    l->st = st;
    raft_index first = 0;
    raft_index last = 0;
    if (st->first_index(st->ctx, &first) != 0 || st->last_index(st->ctx, &last) != 0) {
        return RAFT_ESTORAGE;
    }
    /* the snapshot's entries are committed and applied: its state is in the state machine */
    raft_index snap = first - 1;
    committed = committed > snap ? committed : snap;
    if (committed > last) {
        return RAFT_ESTORAGE; /* storage is behind its own hard state */
    }
    if (applied > committed) {
        return RAFT_EINVAL;
    }
    l->u.offset = last + 1;
    l->committed = committed;
    l->applied = applied > snap ? applied : snap;
    return 0;
}

void raft__log_free(struct raft__log *l)
{
    raft__unstable_free_snap(l, l->u.snap);
    free(l->snap_in_ready);
    free(l->u.ents);
    raft__chunks_free(&l->u.data);
    memset(l, 0, sizeof(*l));
}

raft_index raft__log_first_index(struct raft__log *l)
{
    if (l->u.snap != NULL) {
        return l->u.snap->meta.index + 1;
    }
    raft_index i = 0;
    if (l->st->first_index(l->st->ctx, &i) != 0) {
        l->storage_err = RAFT_ESTORAGE;
        return l->u.offset;
    }
    return i;
}

raft_index raft__log_last_index(struct raft__log *l)
{
    raft_index i = 0;
    if (raft__unstable_last(&l->u, &i)) {
        return i;
    }
    if (l->st->last_index(l->st->ctx, &i) != 0) {
        l->storage_err = RAFT_ESTORAGE;
        return l->u.offset - 1;
    }
    return i;
}

raft_index raft__log_stable_last(struct raft__log *l)
{
    raft_index i = 0;
    if (l->st->last_index(l->st->ctx, &i) != 0) {
        l->storage_err = RAFT_ESTORAGE;
        return 0;
    }
    if (l->u.n > 0 && l->u.offset - 1 < i) {
        i = l->u.offset - 1; /* stored entries from offset on are being replaced */
    }
    return i;
}

int raft__log_term(struct raft__log *l, raft_index i, raft_term *out)
{
    *out = 0;
    if (raft__unstable_term(&l->u, i, out)) {
        return 0;
    }
    if (i + 1 < raft__log_first_index(l)) {
        return RAFT_ECOMPACTED;
    }
    if (i > raft__log_last_index(l)) {
        return RAFT_EUNAVAILABLE;
    }
    int rv = l->st->term(l->st->ctx, i, out);
    if (rv == RAFT_ECOMPACTED || rv == RAFT_EUNAVAILABLE) {
        *out = 0;
        return rv;
    }
    if (rv != 0) {
        *out = 0;
        return RAFT_ESTORAGE;
    }
    return 0;
}

raft_term raft__log_term_or_zero(struct raft__log *l, raft_index i)
{
    raft_term t = 0;
    (void)raft__log_term(l, i, &t);
    return t;
}

raft_term raft__log_last_term(struct raft__log *l)
{
    return raft__log_term_or_zero(l, raft__log_last_index(l));
}

bool raft__log_match_term(struct raft__log *l, raft_index i, raft_term t)
{
    raft_term got = 0;
    return raft__log_term(l, i, &got) == 0 && got == t;
}

/* thesis 3.6.1: a voter denies its vote if its own log is more up-to-date than the candidate's:
 * later last term wins; with equal last terms the longer log wins. */
bool raft__log_up_to_date(struct raft__log *l, raft_index lasti, raft_term term)
{
    raft_term my_term = raft__log_last_term(l);
    return term > my_term || (term == my_term && lasti >= raft__log_last_index(l));
}

/* First index whose term differs from ours (or that we lack); 0 when all match. */
static raft_index raft__log_find_conflict(struct raft__log *l, const struct raft_entry *ents,
                                          size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!raft__log_match_term(l, ents[i].index, ents[i].term)) {
            return ents[i].index;
        }
    }
    return 0;
}

int raft__log_append(struct raft__log *l, const struct raft_entry *ents, size_t n)
{
    if (n == 0) {
        return 0;
    }
    /* thesis 3.5: never overwrite committed entries (callers check conflicts first) */
    raft_index last = raft__log_last_index(l);
    RAFT_ASSERT(ents[0].index > l->committed);
    RAFT_ASSERT(ents[0].index <= last + 1);
    return raft__unstable_truncate_append(&l->u, ents, n);
}

int raft__log_append_new(struct raft__log *l, raft_term term, uint8_t type,
                         const struct raft_buf *data, size_t n, raft_index *first)
{
    struct raft__unstable *u = &l->u;
    raft_index next = raft__log_last_index(l) + 1;
    /* thesis 3.6.2: a leader appends in its own term, never below the terms it holds */
    RAFT_ASSERT(n > 0 && term >= raft__log_last_term(l));
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += data[i].len;
    }
    if (u->n == 0 && u->offset != next) {
        /* nothing unstable: the next entry starts the unstable part */
        RAFT_ASSERT(u->snap == NULL || u->snap->meta.index + 1 == next);
        u->offset = next;
    }
    int rv = raft__grow((void **)&u->ents, &u->cap, u->n + n, sizeof(*u->ents));
    if (rv == 0) {
        rv = raft__chunks_reserve(&u->data, bytes);
    }
    if (rv != 0) {
        return rv;
    }
    for (size_t i = 0; i < n; i++) {
        struct raft_entry *e = &u->ents[u->n++];
        e->term = term;
        e->index = next + i;
        e->type = type;
        e->data.len = data[i].len;
        e->data.base = raft__chunks_put(&u->data, data[i].base, data[i].len, e->index);
    }
    if (first != NULL) {
        *first = next;
    }
    return 0;
}

int raft__log_maybe_append(struct raft__log *l, raft_index index, raft_term log_term,
                           raft_index commit, const struct raft_entry *ents, size_t n, bool *ok,
                           raft_index *last_new)
{
    *ok = false;
    RAFT_ASSERT(n == 0 || ents[0].index == index + 1); /* raft_step checked the message */
    /* thesis 3.5: the follower refuses entries unless it holds the preceding entry */
    if (!raft__log_match_term(l, index, log_term)) {
        return 0;
    }
    raft_index lastn = index + n;
    raft_index ci = raft__log_find_conflict(l, ents, n);
    if (ci != 0) {
        if (ci <= l->committed) {
            return RAFT_EINVAL; /* a committed entry conflicts: the sender is broken */
        }
        RAFT_ASSERT(ci > index && ci <= lastn);
        /* thesis 3.5: delete the conflicting entry and all that follow it, then append */
        int rv = raft__log_append(l, ents + (ci - index - 1), n - (size_t)(ci - index - 1));
        if (rv != 0) {
            return rv;
        }
    }
    raft__log_commit_to(l, commit < lastn ? commit : lastn);
    *ok = true;
    *last_new = lastn;
    return 0;
}

void raft__log_find_conflict_by_term(struct raft__log *l, raft_index index, raft_term term,
                                     raft_index *out_index, raft_term *out_term)
{
    if (index > raft__log_last_index(l)) {
        *out_index = index;
        *out_term = 0;
        return;
    }
    for (;;) {
        raft_term t = 0;
        int rv = raft__log_term(l, index, &t);
        if (rv != 0 || t <= term || index == 0) {
            *out_index = index;
            *out_term = rv != 0 ? 0 : t;
            return;
        }
        index--;
    }
}

static int raft__slice_storage(struct raft__log *l, raft_index lo, raft_index hi, size_t max_bytes,
                               struct raft__arena *a, struct raft_entry *out, size_t *n,
                               size_t *bytes)
{
    const struct raft_entry *p = NULL;
    size_t k = 0;
    int rv = l->st->entries(l->st->ctx, lo, hi, max_bytes, &p, &k);
    if (rv == RAFT_ECOMPACTED || rv == RAFT_EUNAVAILABLE) {
        return rv;
    }
    if (rv != 0 || k > hi - lo) {
        return RAFT_ESTORAGE;
    }
    for (size_t i = 0; i < k; i++) {
        if (p[i].index != lo + i) {
            return RAFT_ESTORAGE; /* gap or disorder in stored entries */
        }
        out[*n] = p[i];
        if (p[i].data.len > 0) {
            void *d = raft__arena_alloc(a, p[i].data.len);
            if (d == NULL) {
                return RAFT_ENOMEM;
            }
            memcpy(d, p[i].data.base, p[i].data.len);
            out[*n].data.base = d;
        }
        *bytes += p[i].data.len;
        (*n)++;
    }
    return 0;
}

int raft__log_slice(struct raft__log *l, raft_index lo, raft_index hi, size_t max_bytes,
                    struct raft__arena *a, bool copy_unstable, struct raft_entry **out, size_t *n)
{
    RAFT_ASSERT(out != NULL && n != NULL && max_bytes > 0);
    *out = NULL;
    *n = 0;
    if (lo >= hi) {
        return 0;
    }
    if (lo < raft__log_first_index(l)) {
        return RAFT_ECOMPACTED;
    }
    if (hi > raft__log_last_index(l) + 1) {
        return RAFT_EUNAVAILABLE;
    }
    if (hi - lo > RAFT__SLICE_MAX_ENTRIES) {
        hi = lo + RAFT__SLICE_MAX_ENTRIES;
    }
    struct raft_entry *ents = raft__arena_alloc(a, (size_t)(hi - lo) * sizeof(*ents));
    if (ents == NULL) {
        return RAFT_ENOMEM;
    }
    size_t k = 0;
    size_t bytes = 0;
    struct raft__unstable *u = &l->u;
    if (lo < u->offset) {
        raft_index shi = hi < u->offset ? hi : u->offset;
        int rv = raft__slice_storage(l, lo, shi, max_bytes, a, ents, &k, &bytes);
        if (rv != 0) {
            return rv;
        }
        if (k < shi - lo) {
            goto done; /* size limit reached inside storage */
        }
    }
    for (raft_index i = lo > u->offset ? lo : u->offset; i < hi; i++) {
        RAFT_ASSERT(i - u->offset < u->n);
        const struct raft_entry *e = &u->ents[i - u->offset];
        if (k > 0 && bytes + e->data.len > max_bytes) {
            break;
        }
        ents[k] = *e;
        if (copy_unstable && e->data.len > 0) {
            void *d = raft__arena_alloc(a, e->data.len);
            if (d == NULL) {
                return RAFT_ENOMEM;
            }
            memcpy(d, e->data.base, e->data.len);
            ents[k].data.base = d;
        }
        bytes += e->data.len;
        k++;
    }
done:
    *out = ents;
    *n = k;
    return 0;
}

void raft__log_commit_to(struct raft__log *l, raft_index c)
{
    if (c > l->committed) {
        RAFT_ASSERT(c <= raft__log_last_index(l)); /* invariant: committed <= last index */
        l->committed = c;
    }
}

bool raft__log_maybe_commit(struct raft__log *l, raft_index max_index, raft_term term)
{
    if (max_index <= l->committed) {
        return false;
    }
#ifndef SLOTD_RAFT_BUG_COMMIT_PREV_TERM
    /* thesis 3.6.2: only entries of the leader's current term commit by counting replicas */
    if (raft__log_term_or_zero(l, max_index) != term) {
        return false;
    }
#endif
    raft__log_commit_to(l, max_index);
    return true;
}

int raft__log_restore(struct raft__log *l, const struct raft_snapshot *s)
{
    RAFT_ASSERT(s->meta.index > l->committed); /* an older snapshot is ignored by the caller */
    struct raft_snapshot *copy = malloc(sizeof(*copy) + s->data.len);
    if (copy == NULL) {
        return RAFT_ENOMEM;
    }
    copy->meta = s->meta;
    copy->data.len = s->data.len;
    copy->data.base = s->data.len > 0 ? (const void *)(copy + 1) : NULL;
    if (s->data.len > 0) {
        memcpy(copy + 1, s->data.base, s->data.len);
    }
    raft__unstable_free_snap(l, l->u.snap);
    l->u.snap = copy;
    l->u.offset = s->meta.index + 1;
    l->u.n = 0;
    l->committed = s->meta.index;
    return 0;
}

void raft__log_stable_to(struct raft__log *l, raft_index i, raft_term t)
{
    struct raft__unstable *u = &l->u;
    raft_term got = 0;
    if (i < u->offset || !raft__unstable_term(u, i, &got) || got != t) {
        return; /* the entry was replaced after it was handed out: it stays unstable */
    }
    size_t drop = (size_t)(i - u->offset + 1);
    RAFT_ASSERT(drop <= u->n);
    memmove(u->ents, u->ents + drop, (u->n - drop) * sizeof(*u->ents));
    u->n -= drop;
    u->offset = i + 1;
}

void raft__log_stable_snap_to(struct raft__log *l, raft_index i)
{
    if (l->u.snap != NULL && l->u.snap->meta.index == i) {
        raft__unstable_free_snap(l, l->u.snap);
        l->u.snap = NULL;
    }
}
