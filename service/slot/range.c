/* range.c - the Range query: validation, cursors and one page of KV rows of a group's hash slots.
 */
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/slot.h"
#include "store/keys.h"

#define RANGE_CURSOR_VERSION 1
#define RANGE_CURSOR_HEADER 11 /* [ver][crc32 u32 of the rest][bounds crc u32][hash slot u16] */

/* CRC of the query's bounds: a cursor only continues the range it was made for. */
static uint32_t bounds_crc(const Slotd__V1__RangeQuery *q)
{
    const ProtobufCBinaryData *parts[3] = {&q->prefix, &q->start, &q->end};
    uint32_t crc = 0;
    for (int i = 0; i < 3; i++) {
        uint8_t n[4];
        store_put_u32(n, (uint32_t)parts[i]->len);
        crc = route_crc32_update(crc, n, 4);
        crc = route_crc32_update(crc, parts[i]->data, parts[i]->len);
    }
    return crc;
}

int slot_range_cursor_decode(const Slotd__V1__RangeQuery *q, uint16_t *hash_slot,
                             ProtobufCBinaryData *last)
{
    const ProtobufCBinaryData *c = &q->cursor;
    *hash_slot = 0;
    last->data = NULL;
    last->len = 0;
    if (c->len == 0)
        return 0;
    if (c->len < RANGE_CURSOR_HEADER || c->len > RANGE_CURSOR_HEADER + SLOT_KEY_MAX ||
        c->data[0] != RANGE_CURSOR_VERSION ||
        store_get_u32(c->data + 1) != route_crc32(c->data + 5, c->len - 5) ||
        store_get_u32(c->data + 5) != bounds_crc(q) || store_get_u16(c->data + 9) >= 256)
        return -1;
    *hash_slot = store_get_u16(c->data + 9);
    last->data = c->data + RANGE_CURSOR_HEADER;
    last->len = c->len - RANGE_CURSOR_HEADER;
    return 0;
}

int slot_range_cursor_make(const Slotd__V1__RangeQuery *q, uint16_t hs, const uint8_t *last,
                           size_t ll, ProtobufCBinaryData *out)
{
    uint8_t fields[RANGE_CURSOR_HEADER - 5];
    store_put_u32(fields, bounds_crc(q));
    store_put_u16(fields + 4, hs);
    return slot__cursor_make(RANGE_CURSOR_VERSION, fields, sizeof(fields), last, ll, out);
}

static int cmp_bytes(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return al == bl ? 0 : (al < bl ? -1 : 1);
}

int slot_validate_range(const Slotd__V1__RangeQuery *q, uint16_t *hash_slot,
                        struct slotd_error *err)
{
    const struct {
        const char *name;
        const ProtobufCBinaryData *v;
    } f[3] = {{"range.prefix", &q->prefix}, {"range.start", &q->start}, {"range.end", &q->end}};
    for (int i = 0; i < 3; i++)
        if (f[i].v->len > SLOT_KEY_MAX) {
            slotd_error_field(err, f[i].name, SLOT_KEY_MAX, "%s: %zu bytes > %u", f[i].name,
                              f[i].v->len, SLOT_KEY_MAX);
            return -1;
        }
    if (q->prefix.len > 0 && (q->start.len > 0 || q->end.len > 0)) {
        slotd_error_field(err, "range.prefix", 0,
                          "range.prefix: not allowed together with range.start or range.end");
        return -1;
    }
    if (q->end.len > 0 && cmp_bytes(q->start.data, q->start.len, q->end.data, q->end.len) >= 0) {
        slotd_error_field(err, "range.end", 0, "range.end: must sort after range.start");
        return -1;
    }
    if (q->limit > SLOT_PAGE_MAX) {
        slotd_error_field(err, "range.limit", SLOT_PAGE_MAX, "range.limit: %u > %u", q->limit,
                          SLOT_PAGE_MAX);
        return -1;
    }
    ProtobufCBinaryData last;
    if (slot_range_cursor_decode(q, hash_slot, &last) != 0) {
        slotd_error_field(err, "range.cursor", 0,
                          "range.cursor: not a cursor this server returned for this range");
        return -1;
    }
    return 0;
}

/* The page being built. */
struct page {
    const Slotd__V1__RangeQuery *q;
    uint32_t limit;
    Slotd__V1__RangeEntry **ptrs; /* limit of them; each malloc'ed with its key and value */
    size_t n;
    size_t bytes;
    bool full; /* stopped at limit or the byte bound */
    uint16_t next_hs;
    uint8_t last[SLOT_KEY_MAX]; /* the last entry's key, in hash slot last_hs */
    size_t last_len;
    uint16_t last_hs;
};

/* Whether the key pk (of the KV table) is inside the query's bounds. */
static bool in_bounds(const Slotd__V1__RangeQuery *q, const uint8_t *pk, size_t pl)
{
    if (q->prefix.len > 0)
        return pl >= q->prefix.len && memcmp(pk, q->prefix.data, q->prefix.len) == 0;
    if (q->start.len > 0 && cmp_bytes(pk, pl, q->start.data, q->start.len) < 0)
        return false;
    return q->end.len == 0 || cmp_bytes(pk, pl, q->end.data, q->end.len) < 0;
}

/* A scan_slot in progress: the page and the hash slot being scanned. */
struct slot_scan {
    struct page *pg;
    uint16_t hs;
};

/* Adds one KV row (k, v: borrowed) of the scanned hash slot to the page, or stops the scan. */
static int scan_slot_row(void *arg, const void *key, size_t kl, const void *val, size_t vl)
{
    const uint8_t *k = key, *v = val;
    struct slot_scan *ss = arg;
    struct page *pg = ss->pg;
    const Slotd__V1__RangeQuery *q = pg->q;
    uint64_t version, lease;
    size_t off;
    if (kl <= 3 || kl - 3 > SLOT_KEY_MAX || slot_kv_decode(v, vl, &version, &lease, &off))
        return STORE_ECORRUPT;
    const uint8_t *pk = k + 3;
    size_t pl = kl - 3;
    if (!in_bounds(q, pk, pl))
        return q->prefix.len > 0 ? STORE_SCAN_STOP : 0; /* past the prefix's keys, or before */
    size_t cost = q->count_only ? 0 : pl + (q->keys_only ? 0 : vl - off);
    if (pg->n == pg->limit || (pg->n > 0 && pg->bytes + cost > SLOT_RANGE_PAGE_BYTES)) {
        pg->full = true; /* a row remains after last in this hash slot */
        pg->next_hs = ss->hs;
        return STORE_SCAN_STOP;
    }
    if (!q->count_only) {
        size_t val_len = q->keys_only ? 0 : vl - off;
        Slotd__V1__RangeEntry *e = malloc(sizeof(*e) + pl + val_len);
        if (e == NULL)
            return STORE_ENOMEM;
        slotd__v1__range_entry__init(e);
        e->key.data = (uint8_t *)(e + 1);
        memcpy(e->key.data, pk, pl);
        e->key.len = pl;
        if (val_len > 0) {
            e->value.data = e->key.data + pl;
            memcpy(e->value.data, v + off, val_len);
            e->value.len = val_len;
        }
        e->version = version;
        e->lease = lease;
        pg->ptrs[pg->n] = e;
    }
    pg->n++;
    pg->bytes += cost;
    memcpy(pg->last, pk, pl);
    pg->last_len = pl;
    pg->last_hs = ss->hs;
    return 0;
}

/* Scans the KV rows of hash slot hs after `after` (NULL = from its first key) into pg. */
static int scan_slot(struct store *st, struct page *pg, uint16_t hs,
                     const ProtobufCBinaryData *after)
{
    const Slotd__V1__RangeQuery *q = pg->q;
    uint8_t lo[STORE_FSM_KEY_MAX + 1], hi[STORE_FSM_KEY_MAX];
    size_t lol, hil;
    const ProtobufCBinaryData *from = q->prefix.len > 0 ? &q->prefix : &q->start;
    if (after != NULL && after->len > 0 &&
        cmp_bytes(after->data, after->len, from->data, from->len) >= 0) {
        lol = store_key_fsm(lo, hs, SLOT_TABLE_KV, after->data, after->len);
        lo[lol++] = 0; /* the smallest key after it */
    } else {
        lol = store_key_fsm(lo, hs, SLOT_TABLE_KV, from->data, from->len);
    }
    if (q->end.len > 0)
        hil = store_key_fsm(hi, hs, SLOT_TABLE_KV, q->end.data, q->end.len);
    else
        hil = store_key_fsm(hi, hs, SLOT_TABLE_KV + 1, NULL, 0);
    struct slot_scan ss = {.pg = pg, .hs = hs};
    return store_fsm_scan(st, lo, lol, hi, hil, scan_slot_row, &ss);
}

int slot_serve_range(struct store *st, const uint8_t owned[32], uint16_t hash_slot,
                     const Slotd__V1__RangeQuery *q, Slotd__V1__RangeResult *res,
                     struct slotd_error *err)
{
    uint16_t hs;
    ProtobufCBinaryData after;
    if (slot_range_cursor_decode(q, &hs, &after) != 0 || hs != hash_slot) {
        slotd_error_field(err, "range.cursor", 0,
                          "range.cursor: not a cursor this server returned for this range");
        return -1;
    }
    struct page pg = {.q = q, .limit = q->limit ? q->limit : SLOT_PAGE_DEFAULT};
    pg.ptrs = calloc(pg.limit, sizeof(*pg.ptrs));
    int rc = pg.ptrs ? 0 : STORE_ENOMEM;
    unsigned s = hs;
    bool more = false, at_start = false;
    for (; rc == 0; s++) {
        rc = scan_slot(st, &pg, (uint16_t)s, s == hs ? &after : NULL);
        if (rc != 0 || pg.full) {
            more = true;
            break;
        }
        /* The group serves its contiguous run of owned hash slots (owned NULL: only hash_slot). */
        if (s + 1 >= 256)
            break;
        if (owned == NULL || !((owned[(s + 1) / 8] >> ((s + 1) % 8)) & 1)) {
            more = true;
            at_start = true;
            s++;
            break;
        }
    }
    /* A page that filled up in hash slot s before any entry of s resumes at s's first key. */
    if (more && !at_start && (pg.n == 0 || pg.last_hs != s))
        at_start = true;
    if (rc == 0 && more)
        rc = slot_range_cursor_make(q, (uint16_t)s, pg.last, at_start ? 0 : pg.last_len,
                                    &res->cursor);
    if (rc != 0) {
        for (size_t i = 0; pg.ptrs && i < pg.n; i++)
            free(pg.ptrs[i]);
        free(pg.ptrs);
        slotd_error_set(err, SLOTD_ESTORAGE, "read: %s", store_strerror(rc));
        return -1;
    }
    res->count = (uint32_t)pg.n;
    res->more = more;
    res->n_entries = q->count_only ? 0 : pg.n;
    res->entries = pg.ptrs;
    return 0;
}

void slot_range_result_free(Slotd__V1__RangeResult *res)
{
    for (size_t i = 0; i < res->n_entries; i++)
        free(res->entries[i]);
    free(res->entries);
    free(res->cursor.data);
    res->entries = NULL;
    res->n_entries = 0;
    res->cursor.data = NULL;
    res->cursor.len = 0;
}
