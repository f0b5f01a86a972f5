/* meta_span.c - the typed listings that span hash slots (list_system_uids, list_channels,
 * list_runtime_meta, every channel's list_migration_tasks): their cursors, the page one group
 * serves over its run of owned hash slots, and the cursor after a listed entry (the node merges
 * the groups' pages: service/node/range.c). */
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"

#define SPAN_CURSOR_VERSION 2
#define SPAN_CURSOR_HEADER 7 /* [2][crc32 u32 of the rest][hash slot u16] */

int slot_list_cursor_decode(const ProtobufCBinaryData *c, uint16_t *hs, const uint8_t **suffix,
                            size_t *sl)
{
    *hs = 0;
    *suffix = NULL;
    *sl = 0;
    if (c->len == 0)
        return 0;
    if (c->len < SPAN_CURSOR_HEADER || c->len > SPAN_CURSOR_HEADER + STORE_FSM_PK_MAX ||
        c->data[0] != SPAN_CURSOR_VERSION ||
        store_get_u32(c->data + 1) != route_crc32(c->data + 5, c->len - 5) ||
        store_get_u16(c->data + 5) >= ROUTE_HASH_SLOTS)
        return -1;
    *hs = store_get_u16(c->data + 5);
    *suffix = c->data + SPAN_CURSOR_HEADER;
    *sl = c->len - SPAN_CURSOR_HEADER;
    return 0;
}

int slot_list_cursor_make(uint16_t hs, const uint8_t *suffix, size_t sl, ProtobufCBinaryData *out)
{
    uint8_t fields[SPAN_CURSOR_HEADER - 5];
    store_put_u16(fields, hs);
    return slot__cursor_make(SPAN_CURSOR_VERSION, fields, sizeof(fields), suffix, sl, out);
}

bool slot_list_spans(const Slotd__V1__ReadRequest *r)
{
    const ProtobufCMessage *q = slot__oneof_get(&r->base, (unsigned)r->query_case);
    switch ((unsigned)r->query_case) {
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_SYSTEM_UIDS:
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_CHANNELS:
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_RUNTIME_META:
        return true;
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_MIGRATION_TASKS:
        return q != NULL && ((const Slotd__V1__ListMigrationTasksQuery *)q)->channel_id[0] == '\0';
    default:
        return false;
    }
}

/* The row key of a listed entry of query_case (a uid string, or a message): its hash slot and
 * key. Returns -1 for an entry of another listing. */
static int entry_key(unsigned query_case, const void *entry, struct slot__key *k)
{
    const char *id;
    switch (query_case) {
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_SYSTEM_UIDS:
        id = entry;
        slot__key_init(k, route_hash_slot(id, strlen(id)), SLOT_TABLE_SYSTEM_UID);
        slot__key_tail(k, id);
        return 0;
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_CHANNELS: {
        const Slotd__V1__Channel *c = entry;
        slot__key_init(k, route_hash_slot(c->channel_id, strlen(c->channel_id)),
                       SLOT_TABLE_CHANNEL);
        slot__key_channel(k, c->channel_id, c->channel_type);
        return 0;
    }
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_RUNTIME_META: {
        const Slotd__V1__RuntimeMetaEntry *e = entry;
        slot__key_init(k, route_hash_slot(e->channel_id, strlen(e->channel_id)),
                       SLOT_TABLE_RUNTIME_META);
        slot__key_channel(k, e->channel_id, e->channel_type);
        return 0;
    }
    case SLOTD__V1__READ_REQUEST__QUERY_LIST_MIGRATION_TASKS: {
        const Slotd__V1__ChannelMigrationTask *t = entry;
        slot__key_init(k, route_hash_slot(t->channel_id, strlen(t->channel_id)),
                       SLOT_TABLE_MIGRATION);
        slot__key_channel(k, t->channel_id, t->channel_type);
        slot__key_u64(k, t->task_id);
        return 0;
    }
    default:
        return -1;
    }
}

int slot_list_entry_cursor(unsigned query_case, const void *entry, ProtobufCBinaryData *out)
{
    struct slot__key k;
    if (entry_key(query_case, entry, &k) != 0)
        return STORE_EINVAL;
    return slot_list_cursor_make(store_get_u16(k.b), k.b + 3, k.n - 3, out);
}

static bool owns(const uint8_t *owned, unsigned hs)
{
    return owned != NULL && (owned[hs / 8] >> (hs % 8)) & 1;
}

int slot__serve_span(struct slot__serve *s, uint8_t table, const ProtobufCBinaryData *cursor,
                     uint32_t limit, const ProtobufCMessageDescriptor *d, slot__scan_cb cb,
                     void *ctx, ProtobufCMessage *result)
{
    struct slot__page pg = {.limit = slot__page(limit)};
    int rc = d != NULL ? slot__rows_init(&s->rows, d, pg.limit)
                       : slot__rows_init(&s->strs, NULL, pg.limit);
    uint16_t hs;
    const uint8_t *after;
    if (rc != 0 || slot_list_cursor_decode(cursor, &hs, &after, &pg.last_len) != 0)
        return rc != 0 ? rc : STORE_EINVAL; /* (validated: the cursor decodes) */
    if (pg.last_len > sizeof(pg.last))
        return STORE_EINVAL;
    if (pg.last_len > 0)
        memcpy(pg.last, after, pg.last_len);
    /* The page starts at s->hs, the cursor's hash slot the request was routed by, and goes on
     * through the group's contiguous run of owned hash slots (owned NULL: s->hs alone). */
    unsigned at = s->hs;
    bool more = false;
    for (;;) {
        struct slot__key p;
        slot__key_init(&p, (uint16_t)at, table);
        rc = slot__scan_page(s->st, &p, NULL, &pg, cb, ctx);
        if (rc != 0 || pg.full) {
            more = pg.full;
            break;
        }
        if (at + 1 >= ROUTE_HASH_SLOTS)
            break;
        at++;
        pg.last_len = 0;
        if (!owns(s->owned, at)) {
            more = true; /* the next run belongs to another group: the cursor names its start */
            break;
        }
    }
    if (rc == 0 && more)
        rc = slot_list_cursor_make((uint16_t)at, pg.last, pg.last_len, &s->next);
    if (rc == 0)
        slot__serve_list_result(s, result, d != NULL);
    return rc;
}

/* ---- the spanning listings ---- */

int slot__serve_list_system_uids(struct slot__serve *s, const ProtobufCMessage *m,
                                 ProtobufCMessage *r)
{
    const Slotd__V1__ListSystemUidsQuery *q = (const void *)m;
    return slot__serve_span(s, SLOT_TABLE_SYSTEM_UID, &q->cursor, q->limit, NULL,
                            slot__collect_suffix, &s->strs, r);
}

struct channel_filter {
    struct slot__serve *s;
    const char *prefix;
    size_t prefix_len;
    uint32_t type; /* 0 = any */
};

/* A channel row [ch]: listed when its id and type match (checked on the key, before decoding). */
static int collect_channel(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                           size_t vl)
{
    struct channel_filter *cf = ctx;
    char id[SLOT_CHANNEL_ID_MAX + 1];
    uint32_t type;
    if (slot__key_channel_parse(suffix, sl, id, &type) != sl)
        return STORE_ECORRUPT;
    if ((cf->type != 0 && type != cf->type) || strncmp(id, cf->prefix, cf->prefix_len) != 0)
        return SLOT__SCAN_SKIP;
    return slot__collect_row(&cf->s->rows, suffix, sl, val, vl);
}

int slot__serve_list_channels(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__ListChannelsQuery *q = (const void *)m;
    struct channel_filter cf = {s, q->id_prefix, strlen(q->id_prefix), q->channel_type};
    return slot__serve_span(s, SLOT_TABLE_CHANNEL, &q->cursor, q->limit,
                            &slotd__v1__channel__descriptor, collect_channel, &cf, r);
}

struct meta_filter {
    struct slot__serve *s;
    uint64_t leader; /* 0 = any */
};

/* A runtime meta row [ch] -> ChannelRuntimeMeta: listed as a RuntimeMetaEntry when its leader
 * matches. The entry is packed and unpacked again, so the collection frees it like any row. */
static int collect_runtime_meta(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                                size_t vl)
{
    struct meta_filter *mf = ctx;
    struct slot__rows *rows = &mf->s->rows;
    char id[SLOT_CHANNEL_ID_MAX + 1];
    Slotd__V1__RuntimeMetaEntry e = SLOTD__V1__RUNTIME_META_ENTRY__INIT;
    if (slot__key_channel_parse(suffix, sl, id, &e.channel_type) != sl || vl < 1 || val[0] != 1)
        return STORE_ECORRUPT;
    if (rows->n == rows->cap)
        return STORE_ELIMIT;
    e.meta = slotd__v1__channel_runtime_meta__unpack(NULL, vl - 1, val + 1);
    if (e.meta == NULL)
        return STORE_ECORRUPT;
    int rc = SLOT__SCAN_SKIP;
    if (mf->leader == 0 || e.meta->leader == mf->leader) {
        e.channel_id = id;
        size_t n = slotd__v1__runtime_meta_entry__get_packed_size(&e);
        uint8_t *buf = malloc(n ? n : 1);
        rc = buf != NULL ? 0 : STORE_ENOMEM;
        if (rc == 0) {
            slotd__v1__runtime_meta_entry__pack(&e, buf);
            rows->v[rows->n] = protobuf_c_message_unpack(rows->d, NULL, n, buf);
            rc = rows->v[rows->n] != NULL ? 0 : STORE_ENOMEM;
            rows->n += rc == 0;
            free(buf);
        }
    }
    slotd__v1__channel_runtime_meta__free_unpacked(e.meta, NULL);
    return rc;
}

int slot__serve_list_runtime_meta(struct slot__serve *s, const ProtobufCMessage *m,
                                  ProtobufCMessage *r)
{
    const Slotd__V1__ListRuntimeMetaQuery *q = (const void *)m;
    struct meta_filter mf = {s, q->leader};
    return slot__serve_span(s, SLOT_TABLE_RUNTIME_META, &q->cursor, q->limit,
                            &slotd__v1__runtime_meta_entry__descriptor, collect_runtime_meta, &mf,
                            r);
}

int slot__collect_task(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val, size_t vl)
{
    struct slot__task_filter *tf = ctx;
    struct slot__rows *rows = &tf->s->rows;
    int rc = slot__collect_row(rows, suffix, sl, val, vl);
    if (rc != 0 || tf->status == 0)
        return rc;
    const Slotd__V1__ChannelMigrationTask *t = (const void *)rows->v[rows->n - 1];
    if ((unsigned)t->status == tf->status)
        return 0;
    protobuf_c_message_free_unpacked(rows->v[--rows->n], NULL);
    return SLOT__SCAN_SKIP;
}
