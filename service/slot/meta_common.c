/* meta_common.c - shared machinery of the typed metadata tables: oneof access, keys, row codec,
 * cursors, scans and the collections listings fill (meta_table.c dispatches). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"

#define ROW_VERSION 1
#define CURSOR_VERSION 1
#define CURSOR_HEADER 5 /* version u8 + crc32 u32 */

/* ---- oneof access ---- */

const ProtobufCMessage *slot__oneof_get(const ProtobufCMessage *outer, unsigned number)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field(outer->descriptor, number);
    if (fd == NULL || fd->type != PROTOBUF_C_TYPE_MESSAGE)
        return NULL;
    return *(const ProtobufCMessage *const *)((const char *)outer + fd->offset);
}

void slot__oneof_set(ProtobufCMessage *outer, unsigned number, const ProtobufCMessage *m)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field(outer->descriptor, number);
    assert(fd != NULL && fd->type == PROTOBUF_C_TYPE_MESSAGE &&
           (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && fd->descriptor == m->descriptor);
    *(const ProtobufCMessage **)((char *)outer + fd->offset) = m;
    *(uint32_t *)((char *)outer + fd->quantifier_offset) = number;
}

/* ---- keys ---- */

void slot__key_init(struct slot__key *k, uint16_t hs, uint8_t table)
{
    store_put_u16(k->b, hs);
    k->b[2] = table;
    k->n = 3;
}

static void key_bytes(struct slot__key *k, const void *p, size_t n)
{
    assert(k->n + n <= sizeof(k->b)); /* lengths are validated before keys are built */
    memcpy(k->b + k->n, p, n);
    k->n += n;
}

void slot__key_str(struct slot__key *k, const char *s)
{
    size_t n = strlen(s);
    assert(n <= 255);
    slot__key_u8(k, (uint8_t)n);
    key_bytes(k, s, n);
}

void slot__key_tail(struct slot__key *k, const char *s)
{
    key_bytes(k, s, strlen(s));
}

void slot__key_u8(struct slot__key *k, uint8_t v)
{
    key_bytes(k, &v, 1);
}

void slot__key_channel(struct slot__key *k, const char *channel_id, uint32_t channel_type)
{
    slot__key_str(k, channel_id);
    slot__key_u8(k, (uint8_t)channel_type);
}

size_t slot__key_channel_parse(const uint8_t *p, size_t n, char *id, uint32_t *channel_type)
{
    if (n < 2 || p[0] == 0 || p[0] > SLOT_CHANNEL_ID_MAX || n < 2u + p[0])
        return 0;
    memcpy(id, p + 1, p[0]);
    id[p[0]] = '\0';
    *channel_type = p[1 + p[0]];
    return 2u + p[0];
}

void slot__key_u64(struct slot__key *k, uint64_t v)
{
    uint8_t b[8];
    store_put_u64(b, v);
    key_bytes(k, b, 8);
}

/* ---- rows ---- */

static int row_decode(uint8_t *raw, size_t rl, const ProtobufCMessageDescriptor *d,
                      ProtobufCMessage **out)
{
    int rc = 0;
    if (rl < 1 || raw[0] != ROW_VERSION)
        rc = STORE_ECORRUPT;
    else if ((*out = protobuf_c_message_unpack(d, NULL, rl - 1, raw + 1)) == NULL)
        rc = STORE_ECORRUPT;
    free(raw);
    return rc;
}

int slot__row_get(struct slot_fsm *f, const struct slot__key *k,
                  const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    bool found;
    uint8_t *raw;
    size_t rl;
    *out = NULL;
    int rc = slot__fsm_read(f, k->b, k->n, &found, &raw, &rl);
    if (rc != 0 || !found)
        return rc;
    return row_decode(raw, rl, d, out);
}

int slot__row_put(struct slot_fsm *f, const struct slot__key *k, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *v = malloc(1 + n);
    if (v == NULL)
        return STORE_ENOMEM;
    v[0] = ROW_VERSION;
    protobuf_c_message_pack(m, v + 1);
    int rc = slot__fsm_write(f, k->b, k->n, v, 1 + n);
    if (rc == 0)
        rc = slot__fsm_typed_event(f, k->b, k->n, v, 1 + n);
    free(v);
    return rc;
}

int slot__flag_get(struct slot_fsm *f, const struct slot__key *k, bool *present)
{
    uint8_t *raw;
    size_t rl;
    int rc = slot__fsm_read(f, k->b, k->n, present, &raw, &rl);
    if (rc != 0 || !*present)
        return rc;
    rc = rl == 1 && raw[0] == ROW_VERSION ? 0 : STORE_ECORRUPT;
    free(raw);
    return rc;
}

int slot__flag_present(struct slot_fsm *f, const struct slot__key *k, bool *present)
{
    uint8_t *raw = NULL;
    size_t rl;
    int rc = slot__fsm_read(f, k->b, k->n, present, &raw, &rl);
    free(raw);
    return rc;
}

int slot__flag_put(struct slot_fsm *f, const struct slot__key *k)
{
    const uint8_t v = ROW_VERSION;
    int rc = slot__fsm_write(f, k->b, k->n, &v, 1);
    return rc != 0 ? rc : slot__fsm_typed_event(f, k->b, k->n, &v, 1);
}

int slot__key_delete(struct slot_fsm *f, const struct slot__key *k)
{
    bool found = false;
    if (slot__fsm_events_on(f) && slot_typed_table_watched(k->b[2])) {
        uint8_t *old = NULL; /* watchers hear of a row that went, not of one that never was */
        size_t ol = 0;
        int rc = slot__fsm_read(f, k->b, k->n, &found, &old, &ol);
        free(old);
        if (rc != 0)
            return rc;
    }
    int rc = slot__fsm_write(f, k->b, k->n, NULL, 0);
    return rc != 0 || !found ? rc : slot__fsm_typed_event(f, k->b, k->n, NULL, 0);
}

bool slot_typed_table_watched(uint8_t table)
{
    switch (table) {
    case SLOT_TABLE_USER:
    case SLOT_TABLE_DEVICE:
    case SLOT_TABLE_SYSTEM_UID:
    case SLOT_TABLE_CHANNEL:
    case SLOT_TABLE_CHANNEL_MEMBER:
    case SLOT_TABLE_MEMBERSHIP:
    case SLOT_TABLE_CMD_BINDING:
    case SLOT_TABLE_RUNTIME_META:
    case SLOT_TABLE_MIGRATION:
    case SLOT_TABLE_PLUGIN:
    case SLOT_TABLE_EVENT:
        return true;
    default:
        return false;
    }
}

bool slot_typed_watch_match(uint32_t kind, const uint8_t *id, size_t id_len, uint8_t table,
                            const uint8_t *k, size_t kl)
{
    /* A uid's rows are [S uid] (whole) or start with [s uid]; a channel's rows all start with
     * [s channel_id][channel_type u8]: a channel watch follows every type of the id. */
    bool whole;
    switch (kind) {
    case SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_USER:
        if (table == SLOT_TABLE_USER || table == SLOT_TABLE_SYSTEM_UID ||
            table == SLOT_TABLE_PLUGIN)
            whole = true;
        else if (table == SLOT_TABLE_DEVICE || table == SLOT_TABLE_MEMBERSHIP ||
                 table == SLOT_TABLE_CMD_BINDING)
            whole = false;
        else
            return false;
        break;
    case SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_CHANNEL:
        if (table != SLOT_TABLE_CHANNEL && table != SLOT_TABLE_RUNTIME_META &&
            table != SLOT_TABLE_CHANNEL_MEMBER && table != SLOT_TABLE_MIGRATION &&
            table != SLOT_TABLE_EVENT)
            return false;
        whole = false;
        break;
    case SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_SUBSCRIBERS:
        if (table != SLOT_TABLE_CHANNEL_MEMBER)
            return false;
        whole = false;
        break;
    default:
        return false;
    }
    if (whole)
        return kl == id_len && memcmp(k, id, id_len) == 0;
    if (id_len > 255 || kl < 1 + id_len || k[0] != id_len || memcmp(k + 1, id, id_len) != 0)
        return false;
    if (kind == SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_SUBSCRIBERS) /* [type][list] */
        return kl > 2 + id_len && k[2 + id_len] == SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS;
    return true;
}

/* The stored value of k into *raw (caller frees) with *found true, or *found false and 0 when
 * there is none. */
static int store_value_get(struct store *st, const struct slot__key *k, void **raw, size_t *rl,
                           bool *found)
{
    *raw = NULL;
    *rl = 0;
    int rc = store_fsm_get(st, k->b, k->n, raw, rl);
    *found = rc == 0;
    return rc == STORE_ENOTFOUND ? 0 : rc;
}

int slot__store_row_get(struct store *st, const struct slot__key *k,
                        const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    void *raw;
    size_t rl;
    bool found;
    *out = NULL;
    int rc = store_value_get(st, k, &raw, &rl, &found);
    if (rc != 0 || !found)
        return rc;
    return row_decode(raw, rl, d, out);
}

int slot__store_flag_get(struct store *st, const struct slot__key *k, bool *present)
{
    void *raw;
    size_t rl;
    bool found;
    *present = false;
    int rc = store_value_get(st, k, &raw, &rl, &found);
    if (rc != 0 || !found)
        return rc;
    rc = rl == 1 && ((uint8_t *)raw)[0] == ROW_VERSION ? 0 : STORE_ECORRUPT;
    *present = rc == 0;
    free(raw);
    return rc;
}

/* ---- deletes by prefix ---- */

struct key_list {
    struct slot__key *v;
    size_t n, cap;
};

static int key_list_add(void *ctx, const uint8_t *k, size_t kl)
{
    struct key_list *l = ctx;
    if (kl > sizeof(l->v[0].b))
        return STORE_ECORRUPT;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        struct slot__key *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return STORE_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    memcpy(l->v[l->n].b, k, kl);
    l->v[l->n++].n = kl;
    return 0;
}

int slot__delete_prefix(struct slot_fsm *f, const struct slot__key *p, uint32_t cost,
                        struct slot__budget *b, slot__delete_cb cb, void *ctx, uint32_t *deleted)
{
    struct key_list l = {0};
    bool over = false;
    int rc = slot__fsm_prefix_keys(f, p->b, p->n, b->left / cost, key_list_add, &l, &over);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        if (cb != NULL)
            rc = cb(ctx, &l.v[i]);
        if (rc == 0)
            rc = slot__key_delete(f, &l.v[i]);
    }
    if (rc == 0) {
        b->left -= (uint32_t)l.n * cost;
        b->over = b->over || over;
        if (deleted != NULL)
            *deleted += (uint32_t)l.n;
    }
    free(l.v);
    return rc;
}

/* ---- cursors and scans ---- */

int slot__cursor_check(const ProtobufCBinaryData *c)
{
    if (c->len == 0)
        return 0;
    if (c->len <= CURSOR_HEADER || c->len > CURSOR_HEADER + STORE_FSM_PK_MAX ||
        c->data[0] != CURSOR_VERSION)
        return -1;
    uint32_t crc = route_crc32(c->data + CURSOR_HEADER, c->len - CURSOR_HEADER);
    return store_get_u32(c->data + 1) == crc ? 0 : -1;
}

int slot__cursor_make(uint8_t version, const uint8_t *fields, size_t fl, const uint8_t *tail,
                      size_t tl, ProtobufCBinaryData *out)
{
    out->len = 1 + 4 + fl + tl;
    out->data = malloc(out->len);
    if (out->data == NULL) {
        out->len = 0;
        return STORE_ENOMEM;
    }
    out->data[0] = version;
    if (fl > 0)
        memcpy(out->data + 5, fields, fl);
    if (tl > 0)
        memcpy(out->data + 5 + fl, tail, tl);
    store_put_u32(out->data + 1, route_crc32(out->data + 5, out->len - 5));
    return 0;
}

/* The first key after every key that starts with p: p with its last byte incremented (carrying).
 * Never overflows: p starts with a hash slot < 256, so its first byte is 0. */
static void prefix_end(const struct slot__key *p, struct slot__key *end)
{
    *end = *p;
    while (end->n > 0 && end->b[end->n - 1] == 0xFF)
        end->n--;
    assert(end->n > 0);
    end->b[end->n - 1]++;
}

/* A slot__scan_page in progress: the prefix, the page and the caller's row callback. */
struct scan_page {
    const struct slot__key *p;
    struct slot__page *pg;
    slot__scan_cb cb;
    void *ctx;
};

static int scan_page_row(void *arg, const void *key, size_t kl, const void *val, size_t vl)
{
    const uint8_t *k = key, *v = val;
    struct scan_page *sp = arg;
    const struct slot__key *p = sp->p;
    struct slot__page *pg = sp->pg;
    if (kl < p->n || memcmp(k, p->b, p->n) != 0)
        return STORE_SCAN_STOP;
    size_t sl = kl - p->n, cost = sl + vl;
    if (sl > sizeof(pg->last))
        return STORE_ECORRUPT;
    if (pg->n == pg->limit || (pg->n > 0 && pg->bytes + cost > SLOT_LIST_PAGE_BYTES) ||
        pg->examined == SLOT_LIST_SCAN_ROWS_MAX) {
        pg->full = true; /* a row remains after pg->last */
        return STORE_SCAN_STOP;
    }
    int rc = sp->cb(sp->ctx, k + p->n, sl, v, vl);
    pg->examined++;
    if (rc == SLOT__SCAN_SKIP) {
        rc = 0;
    } else if (rc == 0) {
        pg->n++;
        pg->bytes += cost;
    }
    memcpy(pg->last, k + p->n, sl);
    pg->last_len = sl;
    return rc;
}

int slot__scan_page(struct store *st, const struct slot__key *p, const struct slot__key *end,
                    struct slot__page *pg, slot__scan_cb cb, void *ctx)
{
    struct slot__key lo = *p, hi;
    if (pg->last_len > 0) {
        if (lo.n + pg->last_len + 1 > sizeof(lo.b))
            return STORE_EINVAL;
        memcpy(lo.b + lo.n, pg->last, pg->last_len);
        lo.n += pg->last_len;
        lo.b[lo.n++] = 0; /* the smallest key after the last row consumed */
    }
    if (end != NULL)
        hi = *end;
    else
        prefix_end(p, &hi);
    struct scan_page sp = {.p = p, .pg = pg, .cb = cb, .ctx = ctx};
    return store_fsm_scan(st, lo.b, lo.n, hi.b, hi.n, scan_page_row, &sp);
}

int slot__scan_until(struct store *st, const struct slot__key *p, const struct slot__key *end,
                     const ProtobufCBinaryData *cursor, uint32_t limit, slot__scan_cb cb, void *ctx,
                     ProtobufCBinaryData *next)
{
    struct slot__page pg = {.limit = limit};
    next->data = NULL;
    next->len = 0;
    if (cursor->len > CURSOR_HEADER) {
        pg.last_len = cursor->len - CURSOR_HEADER;
        if (pg.last_len > sizeof(pg.last))
            return STORE_EINVAL;
        memcpy(pg.last, cursor->data + CURSOR_HEADER, pg.last_len);
    }
    int rc = slot__scan_page(st, p, end, &pg, cb, ctx);
    if (rc == 0 && pg.full) /* (a full page consumed a row: pg.last is set) */
        rc = slot__cursor_make(CURSOR_VERSION, NULL, 0, pg.last, pg.last_len, next);
    return rc;
}

int slot__scan(struct store *st, const struct slot__key *p, const ProtobufCBinaryData *cursor,
               uint32_t limit, slot__scan_cb cb, void *ctx, ProtobufCBinaryData *next)
{
    return slot__scan_until(st, p, NULL, cursor, limit, cb, ctx, next);
}

/* ---- rejections ---- */

void slot__not_found(struct slotd_error *err, const char *what, const char *id)
{
    slotd_error_set(err, SLOTD_ENOT_FOUND, "%s %s does not exist", what, id);
}

/* ---- row collections (uid lists and listed rows) ---- */

int slot__rows_init(struct slot__rows *r, const ProtobufCMessageDescriptor *d, size_t cap)
{
    r->d = d;
    r->n = 0;
    r->cap = cap;
    r->v = calloc(cap ? cap : 1, sizeof(*r->v));
    return r->v == NULL ? STORE_ENOMEM : 0;
}

int slot__collect_suffix(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val, size_t vl)
{
    struct slot__rows *s = ctx;
    if (vl != 1 || val[0] != ROW_VERSION || sl == 0 || sl > 255)
        return STORE_ECORRUPT;
    if (s->n == s->cap)
        return STORE_ELIMIT; /* slot__scan visits at most the limit it was given */
    char *str = malloc(sl + 1);
    if (str == NULL)
        return STORE_ENOMEM;
    memcpy(str, suffix, sl);
    str[sl] = '\0';
    s->v[s->n++] = str;
    return 0;
}

int slot__collect_row(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val, size_t vl)
{
    struct slot__rows *r = ctx;
    (void)suffix;
    (void)sl;
    if (r->n == r->cap)
        return STORE_ELIMIT;
    if (vl < 1 || val[0] != ROW_VERSION)
        return STORE_ECORRUPT;
    r->v[r->n] = protobuf_c_message_unpack(r->d, NULL, vl - 1, val + 1);
    if (r->v[r->n] == NULL)
        return STORE_ECORRUPT;
    r->n++;
    return 0;
}

void slot__rows_free(struct slot__rows *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->d != NULL)
            protobuf_c_message_free_unpacked(r->v[i], NULL);
        else
            free(r->v[i]);
    }
    free(r->v);
    r->v = NULL;
    r->n = 0;
}
