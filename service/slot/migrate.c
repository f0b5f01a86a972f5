/* migrate.c - hash-slot migration entries of the slot state machine (fence, rows, accept,
 * release, abort) and the group's migration record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/route/route.h"
#include "service/slot/meta.h"
#include "service/slot/migrate.h"
#include "store/keys.h"

#define VALUE_VERSION 1
#define BITMAP_LEN 32

/* One migration entry being applied. Handlers check everything before they write, so a
 * refusal (err->code != SLOTD_OK) leaves the batch untouched; ns is the state on success. */
struct mig {
    struct slot_fsm *f;
    const struct slot_group_state *gs; /* the state before the entry */
    struct slot_group_state ns;        /* the state after it */
    uint8_t slots[BITMAP_LEN];         /* the entry's hash_slots */
    struct slotd_error *err;
};

static bool bm_has(const uint8_t bm[BITMAP_LEN], unsigned s)
{
    return s < 256 && (bm[s / 8] >> (s % 8)) & 1;
}

static bool bm_is_zero(const uint8_t bm[BITMAP_LEN])
{
    for (unsigned i = 0; i < BITMAP_LEN; i++)
        if (bm[i] != 0)
            return false;
    return true;
}

bool slot__migration_is_command(unsigned number)
{
    return number >= SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_FENCE &&
           number <= SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ABORT;
}

/* ---- The group's migration record ---- */

void slot_group_migration_encode(const struct slot_group_state *gs,
                                 uint8_t out[SLOT_GROUP_META_MIGRATION_LEN])
{
    out[0] = VALUE_VERSION;
    memcpy(out + 1, gs->fenced, BITMAP_LEN);
    memcpy(out + 33, gs->incoming, BITMAP_LEN);
    store_put_u64(out + 65, gs->migration_task);
    store_put_u32(out + 73, gs->migration_chunks);
    store_put_u64(out + 77, gs->migration_rows);
    store_put_u32(out + 85, gs->migration_crc);
}

int slot_group_migration_decode(const void *v, size_t len, struct slot_group_state *gs)
{
    const uint8_t *p = v;
    if (len != SLOT_GROUP_META_MIGRATION_LEN || p[0] != VALUE_VERSION)
        return STORE_ECORRUPT;
    memcpy(gs->fenced, p + 1, BITMAP_LEN);
    memcpy(gs->incoming, p + 33, BITMAP_LEN);
    gs->migration_task = store_get_u64(p + 65);
    gs->migration_chunks = store_get_u32(p + 73);
    gs->migration_rows = store_get_u64(p + 77);
    gs->migration_crc = store_get_u32(p + 85);
    return 0;
}

uint32_t slot_migration_row_crc(uint32_t crc, const void *key, size_t kl, const void *value,
                                size_t vl)
{
    uint8_t n[4];
    store_put_u32(n, (uint32_t)kl);
    crc = route_crc32_update(crc, n, sizeof(n));
    crc = route_crc32_update(crc, key, kl);
    store_put_u32(n, (uint32_t)vl);
    crc = route_crc32_update(crc, n, sizeof(n));
    return route_crc32_update(crc, value, vl);
}

/* Writes the owned and migration records that differ between old and ns. */
static int write_state(struct slot_fsm *f, const struct slot_group_state *old,
                       const struct slot_group_state *ns)
{
    uint8_t key[STORE_GROUP_META_KEY_LEN];
    int rc = 0;
    if (memcmp(old->owned, ns->owned, BITMAP_LEN) != 0) {
        uint8_t v[1 + BITMAP_LEN];
        v[0] = VALUE_VERSION;
        memcpy(v + 1, ns->owned, BITMAP_LEN);
        store_key_group_meta(key, ns->group, SLOT_GROUP_META_OWNED);
        rc = slot__fsm_write(f, key, sizeof(key), v, sizeof(v));
    }
    uint8_t a[SLOT_GROUP_META_MIGRATION_LEN], b[SLOT_GROUP_META_MIGRATION_LEN];
    slot_group_migration_encode(old, a);
    slot_group_migration_encode(ns, b);
    if (rc == 0 && memcmp(a, b, sizeof(a)) != 0) {
        store_key_group_meta(key, ns->group, SLOT_GROUP_META_MIGRATION);
        rc = slot__fsm_write(f, key, sizeof(key), b, sizeof(b));
    }
    return rc;
}

/* ---- Checks shared by the entries ---- */

/* Reads the entry's 32-byte bitmap into m->slots; refuses a wrong length or an empty set. */
static bool parse_slots(struct mig *m, const ProtobufCBinaryData *b, const char *field)
{
    if (b->len != BITMAP_LEN) {
        slotd_error_field(m->err, field, BITMAP_LEN,
                          "group %u: %s: %zu bytes, want a %u-byte hash-slot bitmap", m->gs->group,
                          field, b->len, BITMAP_LEN);
        return false;
    }
    memcpy(m->slots, b->data, BITMAP_LEN);
    if (bm_is_zero(m->slots)) {
        slotd_error_field(m->err, field, BITMAP_LEN, "group %u: %s: no hash slot is set",
                          m->gs->group, field);
        return false;
    }
    return true;
}

/* Deletes every row of the hash slots in slots; refuses when there are too many. */
static int wipe(struct mig *m, const uint8_t slots[BITMAP_LEN], const char *what, bool *ok)
{
    bool over;
    *ok = false;
    if (bm_is_zero(slots)) {
        *ok = true;
        return 0;
    }
    int rc = slot__fsm_wipe(m->f, m->gs->group, slots, &over);
    if (rc != 0)
        return rc;
    if (over) {
        slotd_error_field(m->err, "hash_slots", SLOT_MIGRATION_WIPE_ROWS_MAX,
                          "group %u: %s: the hash slots hold more than %zu rows, the limit of "
                          "one entry",
                          m->gs->group, what, SLOT_MIGRATION_WIPE_ROWS_MAX);
        return 0;
    }
    *ok = true;
    return 0;
}

/* ---- The entries ---- */

static int apply_fence(struct mig *m, const Slotd__Internal__V1__MigrationFence *c)
{
    if (!parse_slots(m, &c->hash_slots, "migration_fence.hash_slots"))
        return 0;
    for (unsigned s = 0; s < 256; s++) {
        if (bm_has(m->slots, s) && !slot_group_owns(m->gs, (uint16_t)s)) {
            slotd_error_set(m->err, SLOTD_EWRONG_GROUP,
                            "group %u: migration fence: hash slot %u is not owned by the group",
                            m->gs->group, s);
            return 0;
        }
    }
    for (unsigned i = 0; i < BITMAP_LEN; i++)
        m->ns.fenced[i] |= m->slots[i];
    m->ns.migration_task = c->task_id;
    return 0;
}

/* A chunk after the first continues the copy in progress exactly where it stands. */
static bool rows_in_order(struct mig *m, const Slotd__Internal__V1__MigrationRows *c)
{
    const struct slot_group_state *gs = m->gs;
    if (c->task_id != gs->migration_task) {
        slotd_error_set(m->err, SLOTD_ESTALE_FENCE,
                        "group %u: migration rows: chunk %u of task %llu, the copy in progress "
                        "is task %llu",
                        gs->group, c->seq, (unsigned long long)c->task_id,
                        (unsigned long long)gs->migration_task);
        return false;
    }
    if (memcmp(gs->incoming, m->slots, BITMAP_LEN) != 0) {
        slotd_error_set(m->err, SLOTD_ESTALE_FENCE,
                        "group %u: migration rows: chunk %u names other hash slots than the "
                        "copy in progress",
                        gs->group, c->seq);
        return false;
    }
    if (c->seq != gs->migration_chunks) {
        slotd_error_set(m->err, SLOTD_ESTALE_FENCE,
                        "group %u: migration rows: chunk %u out of order, expected %u", gs->group,
                        c->seq, gs->migration_chunks);
        return false;
    }
    return true;
}

/* Every row's key is a row of one of the chunk's hash slots. */
static bool rows_valid(struct mig *m, const Slotd__Internal__V1__MigrationRows *c)
{
    char field[48];
    for (size_t i = 0; i < c->n_rows; i++) {
        const ProtobufCBinaryData *k = &c->rows[i]->key;
        snprintf(field, sizeof(field), "rows[%zu].key", i);
        if (k->len < 3 || k->len > STORE_FSM_KEY_MAX) {
            slotd_error_field(m->err, field, STORE_FSM_KEY_MAX,
                              "group %u: migration rows: %s: %zu bytes, want 3..%u", m->gs->group,
                              field, k->len, (unsigned)STORE_FSM_KEY_MAX);
            return false;
        }
        uint16_t hs = store_get_u16(k->data);
        if (!bm_has(m->slots, hs)) {
            slotd_error_field(m->err, field, 0,
                              "group %u: migration rows: %s: hash slot %u is not in the chunk's "
                              "hash slots",
                              m->gs->group, field, hs);
            return false;
        }
    }
    return true;
}

static int apply_rows(struct mig *m, const Slotd__Internal__V1__MigrationRows *c)
{
    if (!parse_slots(m, &c->hash_slots, "migration_rows.hash_slots"))
        return 0;
    for (unsigned s = 0; s < 256; s++) {
        if (bm_has(m->slots, s) && slot_group_owns(m->gs, (uint16_t)s)) {
            slotd_error_set(m->err, SLOTD_EWRONG_GROUP,
                            "group %u: migration rows: hash slot %u is owned by the group",
                            m->gs->group, s);
            return 0;
        }
    }
    if ((c->seq > 0 && !rows_in_order(m, c)) || !rows_valid(m, c))
        return 0;
    int rc = 0;
    if (c->seq == 0) { /* a new copy: drop what an earlier attempt (or another task) left */
        uint8_t drop[BITMAP_LEN];
        for (unsigned i = 0; i < BITMAP_LEN; i++)
            drop[i] = m->slots[i] | (m->gs->incoming[i] & (uint8_t)~m->gs->owned[i]);
        bool ok;
        rc = wipe(m, drop, "migration rows", &ok);
        if (rc != 0 || !ok)
            return rc;
        memcpy(m->ns.incoming, m->slots, BITMAP_LEN);
        m->ns.migration_task = c->task_id;
        m->ns.migration_chunks = 0;
        m->ns.migration_rows = 0;
        m->ns.migration_crc = 0;
    }
    static const uint8_t empty[1] = {0};
    for (size_t i = 0; i < c->n_rows && rc == 0; i++) {
        const Slotd__Internal__V1__MigrationRow *r = c->rows[i];
        const uint8_t *v = r->value.len > 0 ? r->value.data : empty; /* NULL would delete */
        rc = slot__fsm_write(m->f, r->key.data, r->key.len, v, r->value.len);
        m->ns.migration_crc =
            slot_migration_row_crc(m->ns.migration_crc, r->key.data, r->key.len, v, r->value.len);
    }
    m->ns.migration_chunks++;
    m->ns.migration_rows += c->n_rows;
    return rc;
}

/* The copy in progress is exactly what the accept says was sent. */
static bool accept_matches(struct mig *m, const Slotd__Internal__V1__MigrationAccept *c)
{
    const struct slot_group_state *gs = m->gs;
    char why[160];
    if (c->task_id != gs->migration_task)
        snprintf(why, sizeof(why), "task %llu, the copy in progress is task %llu",
                 (unsigned long long)c->task_id, (unsigned long long)gs->migration_task);
    else if (memcmp(gs->incoming, m->slots, BITMAP_LEN) != 0)
        snprintf(why, sizeof(why), "the hash slots differ from the copy in progress");
    else if (c->chunks != gs->migration_chunks)
        snprintf(why, sizeof(why), "%u chunks received, %u sent", gs->migration_chunks, c->chunks);
    else if (c->rows != gs->migration_rows)
        snprintf(why, sizeof(why), "%llu rows received, %llu sent",
                 (unsigned long long)gs->migration_rows, (unsigned long long)c->rows);
    else if (c->checksum != gs->migration_crc)
        snprintf(why, sizeof(why), "checksum %08x received, %08x sent", gs->migration_crc,
                 c->checksum);
    else
        return true;
    slotd_error_set(m->err, SLOTD_ESTALE_FENCE, "group %u: migration accept: %s", gs->group, why);
    return false;
}

static int apply_accept(struct mig *m, const Slotd__Internal__V1__MigrationAccept *c)
{
    if (!parse_slots(m, &c->hash_slots, "migration_accept.hash_slots"))
        return 0;
    bool all_owned = true;
    for (unsigned s = 0; s < 256; s++)
        if (bm_has(m->slots, s) && !slot_group_owns(m->gs, (uint16_t)s))
            all_owned = false;
    if (all_owned && c->task_id == m->gs->migration_task)
        return 0; /* applied before */
    if (!accept_matches(m, c))
        return 0;
    for (unsigned i = 0; i < BITMAP_LEN; i++)
        m->ns.owned[i] |= m->slots[i];
    memset(m->ns.incoming, 0, BITMAP_LEN);
    m->ns.migration_chunks = 0;
    m->ns.migration_rows = 0;
    m->ns.migration_crc = 0;
    return 0;
}

static int apply_release(struct mig *m, const Slotd__Internal__V1__MigrationRelease *c)
{
    if (!parse_slots(m, &c->hash_slots, "migration_release.hash_slots"))
        return 0;
    bool any_owned = false;
    for (unsigned s = 0; s < 256; s++)
        if (bm_has(m->slots, s) && slot_group_owns(m->gs, (uint16_t)s))
            any_owned = true;
    if (!any_owned)
        return 0; /* applied before */
    for (unsigned s = 0; s < 256; s++) {
        if (bm_has(m->slots, s) && !slot_group_owns(m->gs, (uint16_t)s)) {
            slotd_error_set(m->err, SLOTD_EWRONG_GROUP,
                            "group %u: migration release: hash slot %u is not owned by the group",
                            m->gs->group, s);
            return 0;
        }
    }
    for (unsigned s = 0; s < 256; s++) {
        if (bm_has(m->slots, s) && !slot_group_fenced(m->gs, (uint16_t)s)) {
            slotd_error_set(m->err, SLOTD_ESTALE_FENCE,
                            "group %u: migration release: hash slot %u is not fenced", m->gs->group,
                            s);
            return 0;
        }
    }
    bool ok;
    int rc = wipe(m, m->slots, "migration release", &ok);
    if (rc != 0 || !ok)
        return rc;
    for (unsigned i = 0; i < BITMAP_LEN; i++) {
        m->ns.owned[i] &= (uint8_t)~m->slots[i];
        m->ns.fenced[i] &= (uint8_t)~m->slots[i];
    }
    return 0;
}

static int apply_abort(struct mig *m, const Slotd__Internal__V1__MigrationAbort *c)
{
    if (!parse_slots(m, &c->hash_slots, "migration_abort.hash_slots"))
        return 0;
    uint8_t drop[BITMAP_LEN] = {0};
    if (c->task_id == m->gs->migration_task) /* target side: the copy of this task */
        for (unsigned i = 0; i < BITMAP_LEN; i++)
            drop[i] = m->gs->incoming[i] & m->slots[i];
    bool ok;
    int rc = wipe(m, drop, "migration abort", &ok);
    if (rc != 0 || !ok)
        return rc;
    if (c->task_id == m->gs->migration_task) /* source side: only this task's fence */
        for (unsigned i = 0; i < BITMAP_LEN; i++)
            m->ns.fenced[i] &= (uint8_t)~m->slots[i];
    if (!bm_is_zero(drop)) {
        for (unsigned i = 0; i < BITMAP_LEN; i++)
            m->ns.incoming[i] &= (uint8_t)~m->slots[i];
        m->ns.migration_chunks = 0;
        m->ns.migration_rows = 0;
        m->ns.migration_crc = 0;
    }
    return 0;
}

static int dispatch(struct mig *m, const Slotd__Internal__V1__LogCommand *cmd)
{
    switch (cmd->command_case) {
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_FENCE:
        return apply_fence(m, cmd->migration_fence);
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ROWS:
        return apply_rows(m, cmd->migration_rows);
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ACCEPT:
        return apply_accept(m, cmd->migration_accept);
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_RELEASE:
        return apply_release(m, cmd->migration_release);
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ABORT:
        return apply_abort(m, cmd->migration_abort);
    default:
        slotd_error_set(m->err, SLOTD_EINTERNAL, "group %u: command %u is not a migration entry",
                        m->gs->group, (unsigned)cmd->command_case);
        return 0;
    }
}

static int pack_reply(const struct slot_group_state *gs, uint64_t index, uint64_t term,
                      struct slot_result *out)
{
    Slotd__V1__ProposeResponse resp = SLOTD__V1__PROPOSE_RESPONSE__INIT;
    resp.applied_index = index;
    resp.group_id = gs->group;
    resp.term = term;
    size_t n = slotd__v1__propose_response__get_packed_size(&resp);
    out->resp = malloc(n ? n : 1);
    if (out->resp == NULL)
        return STORE_ENOMEM;
    slotd__v1__propose_response__pack(&resp, out->resp);
    out->resp_len = n;
    return 0;
}

int slot__migration_apply(struct slot_fsm *f, struct slot_group_state *gs, uint64_t index,
                          uint64_t term, const Slotd__Internal__V1__LogCommand *cmd,
                          struct slot_result *out)
{
    struct slotd_error err = {.code = SLOTD_OK};
    struct mig m = {.f = f, .gs = gs, .ns = *gs, .err = &err};
    int rc = 0;
    if (!gs->initialized)
        slotd_error_set(&err, SLOTD_EWRONG_GROUP,
                        "group %u: migration entry before the group's GroupInit", gs->group);
    else
        rc = dispatch(&m, cmd);
    if (rc != 0)
        return rc;
    if (err.code != SLOTD_OK) { /* refused: nothing was written */
        if (out != NULL)
            out->err = err;
        return 0;
    }
    rc = write_state(f, gs, &m.ns);
    if (rc != 0)
        return rc;
    *gs = m.ns;
    return out != NULL ? pack_reply(gs, index, term, out) : 0;
}
