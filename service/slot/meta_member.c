/* meta_member.c - uid-owned channel memberships (conversations: join/read/hide-through sequences,
 * activation index newest first, tombstones) and CMD bindings: their applies and serves. */
#include <stdlib.h>
#include <string.h>

#include "service/slot/meta.h"

/* [s uid][s channel_id][channel_type u8] (membership and CMD binding rows). */
static void pair_key(struct slot__key *k, uint16_t hs, uint8_t table, const char *uid,
                     const char *channel, uint32_t type)
{
    slot__key_init(k, hs, table);
    slot__key_str(k, uid);
    slot__key_channel(k, channel, type);
}

/* [s uid][~activated_at_ms u64][s channel_id][channel_type u8]: ascending key order is newest
 * activation first. */
static void conversation_key(struct slot__key *k, uint16_t hs, const char *uid, uint64_t at_ms,
                             const char *channel, uint32_t type)
{
    slot__key_init(k, hs, SLOT_TABLE_CONVERSATION);
    slot__key_str(k, uid);
    if (channel == NULL)
        return;
    slot__key_u64(k, UINT64_MAX - at_ms);
    slot__key_channel(k, channel, type);
}

static int index_put(struct slot__apply *a, const Slotd__V1__Membership *m)
{
    struct slot__key k;
    conversation_key(&k, a->hs, m->uid, m->activated_at_ms, m->channel_id, m->channel_type);
    return slot__flag_put(a->f, &k);
}

static int index_delete(struct slot__apply *a, const Slotd__V1__Membership *m)
{
    struct slot__key k;
    conversation_key(&k, a->hs, m->uid, m->activated_at_ms, m->channel_id, m->channel_type);
    return slot__key_delete(a->f, &k);
}

/* Loads the membership row (held until the reply); *old is NULL when absent. */
static int load_membership(struct slot__apply *a, const char *uid, const char *channel,
                           uint32_t type, struct slot__key *k, Slotd__V1__Membership **old)
{
    pair_key(k, a->hs, SLOT_TABLE_MEMBERSHIP, uid, channel, type);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, k, &slotd__v1__membership__descriptor, &raw);
    *old = (Slotd__V1__Membership *)raw;
    return rc;
}

static void not_member(struct slot__apply *a, const char *uid, const char *channel, uint32_t type)
{
    slotd_error_set(a->err, SLOTD_ENOT_FOUND, "uid %s is not a member of channel %s (type %u)", uid,
                    channel, type);
}

/* A live (joined, not left) membership, or a NOT_FOUND rejection (*old NULL). */
static int load_live(struct slot__apply *a, const char *uid, const char *channel, uint32_t type,
                     struct slot__key *k, Slotd__V1__Membership **old)
{
    int rc = load_membership(a, uid, channel, type, k, old);
    if (rc != 0 || (*old != NULL && !(*old)->left))
        return rc;
    not_member(a, uid, channel, type);
    *old = NULL; /* (a tombstone stays held and is freed with the others) */
    return 0;
}

/* The result's membership: a scratch copy of old (shallow: old owns its strings) or a new one. */
static Slotd__V1__Membership *next_of(struct slot__apply *a, const Slotd__V1__Membership *old,
                                      Slotd__V1__MembershipResult *res)
{
    res->membership = slot__apply_scratch(a, sizeof(*res->membership));
    if (old != NULL)
        *res->membership = *old;
    else
        slotd__v1__membership__init(res->membership);
    return res->membership;
}

/* A live membership a command changes: its key, the stored row and the result's scratch copy. */
struct member_edit {
    Slotd__V1__MembershipResult *res;
    struct slot__key k;
    Slotd__V1__Membership *old, *next;
};

/* load_live into e (r is the command's MembershipResult), and for a live membership the result's
 * scratch copy of it in e->next (next_of). */
static int edit_begin(struct slot__apply *a, const char *uid, const char *channel, uint32_t type,
                      ProtobufCMessage *r, struct member_edit *e)
{
    e->res = (void *)r;
    int rc = load_live(a, uid, channel, type, &e->k, &e->old);
    if (rc == 0 && e->old != NULL)
        e->next = next_of(a, e->old, e->res);
    return rc;
}

/* Writes the result's membership when it changed. */
static int finish(struct slot__apply *a, const struct slot__key *k,
                  Slotd__V1__MembershipResult *res, bool changed, int rc)
{
    res->changed = changed;
    return rc == 0 && changed ? slot__row_put(a->f, k, &res->membership->base) : rc;
}

int slot__apply_join_channel(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__JoinChannelCommand *c = (const void *)m;
    Slotd__V1__MembershipResult *res = (void *)r;
    struct slot__key k;
    Slotd__V1__Membership *old;
    int rc = load_membership(a, c->uid, c->channel_id, c->channel_type, &k, &old);
    Slotd__V1__Membership *next = next_of(a, old, res);
    if (rc != 0 || (old != NULL && !old->left))
        return rc; /* joining twice changes nothing */
    /* A new membership, or a re-join of a tombstone: read and hide-through keep their floors. */
    next->uid = c->uid;
    next->channel_id = c->channel_id;
    next->channel_type = c->channel_type;
    next->join_seq = c->join_seq;
    next->left = false;
    next->hidden = false;
    if (c->activated_at_ms > next->activated_at_ms)
        next->activated_at_ms = c->activated_at_ms;
    return finish(a, &k, res, true, index_put(a, next));
}

int slot__apply_leave_channel(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__LeaveChannelCommand *c = (const void *)m;
    Slotd__V1__MembershipResult *res = (void *)r;
    struct slot__key k;
    Slotd__V1__Membership *old;
    int rc = load_membership(a, c->uid, c->channel_id, c->channel_type, &k, &old);
    if (rc != 0 || old == NULL) {
        if (rc == 0)
            not_member(a, c->uid, c->channel_id, c->channel_type);
        return rc;
    }
    Slotd__V1__Membership *next = next_of(a, old, res);
    if (old->left)
        return 0; /* leaving twice changes nothing */
    if (!old->hidden)
        rc = index_delete(a, old);
    next->left = true; /* the tombstone */
    return finish(a, &k, res, true, rc);
}

int slot__apply_mark_read(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__MarkReadCommand *c = (const void *)m;
    struct member_edit e;
    int rc = edit_begin(a, c->uid, c->channel_id, c->channel_type, r, &e);
    if (rc != 0 || e.old == NULL)
        return rc;
    bool advanced = c->read_seq > e.old->read_seq; /* a regression is ignored */
    if (advanced)
        e.next->read_seq = c->read_seq;
    return finish(a, &e.k, e.res, advanced, 0);
}

int slot__apply_hide_conversation(struct slot__apply *a, const ProtobufCMessage *m,
                                  ProtobufCMessage *r)
{
    const Slotd__V1__HideConversationCommand *c = (const void *)m;
    struct member_edit e;
    int rc = edit_begin(a, c->uid, c->channel_id, c->channel_type, r, &e);
    if (rc != 0 || e.old == NULL)
        return rc;
    bool advanced = c->hide_through_seq > e.old->hide_through_seq;
    if (advanced)
        e.next->hide_through_seq = c->hide_through_seq;
    if (!e.old->hidden)
        rc = index_delete(a, e.old);
    e.next->hidden = true;
    return finish(a, &e.k, e.res, advanced || !e.old->hidden, rc);
}

int slot__apply_activate_conversation(struct slot__apply *a, const ProtobufCMessage *m,
                                      ProtobufCMessage *r)
{
    const Slotd__V1__ActivateConversationCommand *c = (const void *)m;
    struct member_edit e;
    int rc = edit_begin(a, c->uid, c->channel_id, c->channel_type, r, &e);
    if (rc != 0 || e.old == NULL)
        return rc;
    if (c->activated_at_ms > e.old->activated_at_ms)
        e.next->activated_at_ms = c->activated_at_ms; /* activation time only moves forward */
    e.next->hidden = false;
    bool changed = e.old->hidden || e.next->activated_at_ms != e.old->activated_at_ms;
    if (changed && !e.old->hidden)
        rc = index_delete(a, e.old); /* the index entry moves in the same batch */
    if (rc == 0 && changed)
        rc = index_put(a, e.next);
    return finish(a, &e.k, e.res, changed, rc);
}

/* ---- CMD bindings ---- */

/* Loads the binding (held; *old NULL when absent) and points res->binding at a scratch copy. */
static int load_cmd(struct slot__apply *a, const char *uid, const char *channel, uint32_t type,
                    struct slot__key *k, Slotd__V1__CmdBinding **old,
                    Slotd__V1__CmdBindingResult *res)
{
    pair_key(k, a->hs, SLOT_TABLE_CMD_BINDING, uid, channel, type);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, k, &slotd__v1__cmd_binding__descriptor, &raw);
    *old = (Slotd__V1__CmdBinding *)raw;
    res->binding = slot__apply_scratch(a, sizeof(*res->binding));
    if (*old != NULL)
        *res->binding = **old;
    else
        slotd__v1__cmd_binding__init(res->binding);
    return rc;
}

static void no_binding(struct slot__apply *a, const char *uid, const char *channel, uint32_t type)
{
    slotd_error_set(a->err, SLOTD_ENOT_FOUND, "uid %s has no CMD binding to channel %s (type %u)",
                    uid, channel, type);
}

static int cmd_finish(struct slot__apply *a, const struct slot__key *k,
                      Slotd__V1__CmdBindingResult *res, bool changed)
{
    res->changed = changed;
    return changed ? slot__row_put(a->f, k, &res->binding->base) : 0;
}

int slot__apply_bind_cmd(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__BindCmdCommand *c = (const void *)m;
    Slotd__V1__CmdBindingResult *res = (void *)r;
    struct slot__key k;
    Slotd__V1__CmdBinding *old;
    int rc = load_cmd(a, c->uid, c->channel_id, c->channel_type, &k, &old, res);
    if (rc != 0 || (old != NULL && !old->unbound))
        return rc; /* binding twice changes nothing */
    res->binding->uid = c->uid;
    res->binding->channel_id = c->channel_id;
    res->binding->channel_type = c->channel_type;
    res->binding->start_seq = c->start_seq;
    res->binding->unbound = false; /* a re-bind keeps the ack floor */
    return cmd_finish(a, &k, res, true);
}

int slot__apply_ack_cmd(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__AckCmdCommand *c = (const void *)m;
    Slotd__V1__CmdBindingResult *res = (void *)r;
    struct slot__key k;
    Slotd__V1__CmdBinding *old;
    int rc = load_cmd(a, c->uid, c->channel_id, c->channel_type, &k, &old, res);
    if (rc != 0 || old == NULL || old->unbound) {
        if (rc == 0)
            no_binding(a, c->uid, c->channel_id, c->channel_type);
        return rc;
    }
    bool advanced = c->ack_seq > old->ack_seq;
    if (advanced)
        res->binding->ack_seq = c->ack_seq;
    return cmd_finish(a, &k, res, advanced);
}

int slot__apply_unbind_cmd(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__UnbindCmdCommand *c = (const void *)m;
    Slotd__V1__CmdBindingResult *res = (void *)r;
    struct slot__key k;
    Slotd__V1__CmdBinding *old;
    int rc = load_cmd(a, c->uid, c->channel_id, c->channel_type, &k, &old, res);
    if (rc != 0 || old == NULL) {
        if (rc == 0)
            no_binding(a, c->uid, c->channel_id, c->channel_type);
        return rc;
    }
    res->binding->unbound = true; /* the tombstone */
    return cmd_finish(a, &k, res, !old->unbound);
}

/* ---- delete user ---- */

/* Before a membership row goes: its conversation index entry, when it has one (visible). */
static int drop_index_entry(void *ctx, const struct slot__key *k)
{
    struct slot__apply *a = ctx;
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, k, &slotd__v1__membership__descriptor, &raw);
    const Slotd__V1__Membership *m = (const void *)raw;
    if (rc == 0 && m != NULL && !m->left && !m->hidden)
        rc = index_delete(a, m);
    if (raw != NULL)
        protobuf_c_message_free_unpacked(raw, NULL);
    return rc;
}

int slot__delete_user_memberships(struct slot__apply *a, const char *uid, struct slot__budget *b,
                                  uint32_t *memberships, uint32_t *cmd_bindings)
{
    struct slot__key p;
    slot__key_init(&p, a->hs, SLOT_TABLE_MEMBERSHIP);
    slot__key_str(&p, uid);
    /* cost 2: the row and its index entry go together, so the index invariant holds between
     * the entries of a bounded delete */
    int rc = slot__delete_prefix(a->f, &p, 2, b, drop_index_entry, a, memberships);
    slot__key_init(&p, a->hs, SLOT_TABLE_CMD_BINDING);
    slot__key_str(&p, uid);
    return rc != 0 ? rc : slot__delete_prefix(a->f, &p, 1, b, NULL, NULL, cmd_bindings);
}

/* ---- queries ---- */

int slot__serve_get_membership(struct slot__serve *s, const ProtobufCMessage *m,
                               ProtobufCMessage *r)
{
    const Slotd__V1__GetMembershipQuery *q = (const void *)m;
    struct slot__key k;
    pair_key(&k, s->hs, SLOT_TABLE_MEMBERSHIP, q->uid, q->channel_id, q->channel_type);
    return slot__serve_get(s, &k, &slotd__v1__membership__descriptor, r);
}

int slot__serve_get_cmd_binding(struct slot__serve *s, const ProtobufCMessage *m,
                                ProtobufCMessage *r)
{
    const Slotd__V1__GetCmdBindingQuery *q = (const void *)m;
    struct slot__key k;
    pair_key(&k, s->hs, SLOT_TABLE_CMD_BINDING, q->uid, q->channel_id, q->channel_type);
    return slot__serve_get(s, &k, &slotd__v1__cmd_binding__descriptor, r);
}

struct conversations {
    struct slot__serve *s;
    const char *uid;
};

/* An index entry [~at u64][s channel_id][channel_type u8]: its membership row. */
static int collect_conversation(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                                size_t vl)
{
    struct conversations *c = ctx;
    struct slot__rows *rows = &c->s->rows;
    char channel[SLOT_CHANNEL_ID_MAX + 1];
    uint32_t type;
    if (vl != 1 || sl <= 8 || slot__key_channel_parse(suffix + 8, sl - 8, channel, &type) != sl - 8)
        return STORE_ECORRUPT;
    if (rows->n == rows->cap)
        return STORE_ELIMIT;
    struct slot__key k;
    pair_key(&k, c->s->hs, SLOT_TABLE_MEMBERSHIP, c->uid, channel, type);
    ProtobufCMessage *row;
    int rc = slot__store_row_get(c->s->st, &k, &slotd__v1__membership__descriptor, &row);
    if (rc != 0)
        return rc;
    if (row == NULL)
        return STORE_ECORRUPT; /* invariant: every index entry has its membership row */
    rows->v[rows->n++] = row;
    return 0;
}

int slot__serve_list_conversations(struct slot__serve *s, const ProtobufCMessage *m,
                                   ProtobufCMessage *r)
{
    const Slotd__V1__ListConversationsQuery *q = (const void *)m;
    struct slot__key p;
    conversation_key(&p, s->hs, q->uid, 0, NULL, 0);
    struct conversations c = {s, q->uid};
    uint32_t limit = slot__page(q->limit);
    int rc = slot__rows_init(&s->rows, &slotd__v1__membership__descriptor, limit);
    if (rc == 0)
        rc = slot__scan(s->st, &p, &q->cursor, limit, collect_conversation, &c, &s->next);
    if (rc == 0)
        slot__serve_list_result(s, r, true);
    return rc;
}
