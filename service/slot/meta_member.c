/* meta_member.c - uid-owned channel memberships (conversations: join/read/hide-through sequences,
 * activation index newest first, tombstones) and CMD bindings: their commands and queries. */
#include <stdlib.h>
#include <string.h>

#include "service/slot/meta.h"

static void pair_key(struct slot__key *k, uint16_t hs, uint8_t table, const char *uid,
                     const char *channel)
{
    slot__key_init(k, hs, table);
    slot__key_str(k, uid);
    slot__key_tail(k, channel);
}

/* [s uid][~activated_at_ms u64][S channel]: ascending key order is newest activation first. */
static void conversation_key(struct slot__key *k, uint16_t hs, const char *uid, uint64_t at_ms,
                             const char *channel)
{
    slot__key_init(k, hs, SLOT_TABLE_CONVERSATION);
    slot__key_str(k, uid);
    if (channel == NULL)
        return;
    slot__key_u64(k, UINT64_MAX - at_ms);
    slot__key_tail(k, channel);
}

static int index_put(struct slot__apply *a, const Slotd__V1__Membership *m)
{
    struct slot__key k;
    conversation_key(&k, a->hs, m->uid, m->activated_at_ms, m->channel_id);
    return slot__flag_put(a->f, &k);
}

static int index_delete(struct slot__apply *a, const Slotd__V1__Membership *m)
{
    struct slot__key k;
    conversation_key(&k, a->hs, m->uid, m->activated_at_ms, m->channel_id);
    return slot__key_delete(a->f, &k);
}

/* Loads the membership row; *old is NULL when absent. */
static int load_membership(struct slot__apply *a, const char *uid, const char *channel,
                           struct slot__key *k, Slotd__V1__Membership **old)
{
    pair_key(k, a->hs, SLOT_TABLE_MEMBERSHIP, uid, channel);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, k, &slotd__v1__membership__descriptor, &raw);
    *old = (Slotd__V1__Membership *)raw;
    return rc;
}

/* A live (joined, not left) membership, or a NOT_FOUND rejection. */
static int load_live(struct slot__apply *a, const char *uid, const char *channel,
                     struct slot__key *k, Slotd__V1__Membership **old)
{
    int rc = load_membership(a, uid, channel, k, old);
    if (rc != 0 || (*old != NULL && !(*old)->left))
        return rc;
    slotd_error_set(a->err, SLOTD_ENOT_FOUND, "uid %s is not a member of channel %s", uid, channel);
    if (*old != NULL)
        protobuf_c_message_free_unpacked(&(*old)->base, NULL);
    *old = NULL;
    return 0;
}

/* Writes next when changed and replies; frees old. */
static int finish(struct slot__apply *a, const struct slot__key *k, Slotd__V1__Membership *old,
                  Slotd__V1__Membership *next, bool changed, int rc)
{
    Slotd__V1__MembershipResult res = SLOTD__V1__MEMBERSHIP_RESULT__INIT;
    res.changed = changed;
    res.membership = next;
    if (rc == 0 && changed)
        rc = slot__row_put(a->f, k, &next->base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (old != NULL)
        protobuf_c_message_free_unpacked(&old->base, NULL);
    return rc;
}

static int apply_join_channel(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__JoinChannelCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__Membership *old;
    int rc = load_membership(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0)
        return rc;
    Slotd__V1__Membership next = SLOTD__V1__MEMBERSHIP__INIT;
    if (old != NULL)
        next = *old; /* shallow: old owns its strings until finish() */
    if (old != NULL && !old->left)
        return finish(a, &k, old, &next, false, 0); /* joining twice changes nothing */
    /* A new membership, or a re-join of a tombstone: read and hide-through keep their floors. */
    next.uid = c->uid;
    next.channel_id = c->channel_id;
    next.join_seq = c->join_seq;
    next.left = false;
    next.hidden = false;
    if (c->activated_at_ms > next.activated_at_ms)
        next.activated_at_ms = c->activated_at_ms;
    rc = index_put(a, &next);
    return finish(a, &k, old, &next, true, rc);
}

static int apply_leave_channel(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__LeaveChannelCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__Membership *old;
    int rc = load_membership(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0)
        return rc;
    if (old == NULL) {
        slotd_error_set(a->err, SLOTD_ENOT_FOUND, "uid %s is not a member of channel %s", c->uid,
                        c->channel_id);
        return 0;
    }
    Slotd__V1__Membership next = *old;
    if (old->left)
        return finish(a, &k, old, &next, false, 0); /* leaving twice changes nothing */
    if (!old->hidden)
        rc = index_delete(a, old);
    next.left = true; /* the tombstone */
    return finish(a, &k, old, &next, true, rc);
}

static int apply_mark_read(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__MarkReadCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__Membership *old;
    int rc = load_live(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0 || old == NULL)
        return rc;
    Slotd__V1__Membership next = *old;
    bool advanced = c->read_seq > old->read_seq; /* a regression is ignored */
    if (advanced)
        next.read_seq = c->read_seq;
    return finish(a, &k, old, &next, advanced, 0);
}

static int apply_hide_conversation(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__HideConversationCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__Membership *old;
    int rc = load_live(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0 || old == NULL)
        return rc;
    Slotd__V1__Membership next = *old;
    bool advanced = c->hide_through_seq > old->hide_through_seq;
    if (advanced)
        next.hide_through_seq = c->hide_through_seq;
    if (!old->hidden)
        rc = index_delete(a, old);
    next.hidden = true;
    return finish(a, &k, old, &next, advanced || !old->hidden, rc);
}

static int apply_activate_conversation(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__ActivateConversationCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__Membership *old;
    int rc = load_live(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0 || old == NULL)
        return rc;
    Slotd__V1__Membership next = *old;
    if (c->activated_at_ms > old->activated_at_ms)
        next.activated_at_ms = c->activated_at_ms; /* activation time only moves forward */
    next.hidden = false;
    bool changed = old->hidden || next.activated_at_ms != old->activated_at_ms;
    if (changed && !old->hidden)
        rc = index_delete(a, old); /* the index entry moves in the same batch */
    if (rc == 0 && changed)
        rc = index_put(a, &next);
    return finish(a, &k, old, &next, changed, rc);
}

/* ---- CMD bindings ---- */

static int cmd_finish(struct slot__apply *a, const struct slot__key *k, Slotd__V1__CmdBinding *old,
                      Slotd__V1__CmdBinding *next, bool changed)
{
    Slotd__V1__CmdBindingResult res = SLOTD__V1__CMD_BINDING_RESULT__INIT;
    res.changed = changed;
    res.binding = next;
    int rc = changed ? slot__row_put(a->f, k, &next->base) : 0;
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (old != NULL)
        protobuf_c_message_free_unpacked(&old->base, NULL);
    return rc;
}

static int load_cmd(struct slot__apply *a, const char *uid, const char *channel,
                    struct slot__key *k, Slotd__V1__CmdBinding **old)
{
    pair_key(k, a->hs, SLOT_TABLE_CMD_BINDING, uid, channel);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, k, &slotd__v1__cmd_binding__descriptor, &raw);
    *old = (Slotd__V1__CmdBinding *)raw;
    return rc;
}

static int apply_bind_cmd(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__BindCmdCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__CmdBinding *old;
    int rc = load_cmd(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0)
        return rc;
    Slotd__V1__CmdBinding next = SLOTD__V1__CMD_BINDING__INIT;
    if (old != NULL)
        next = *old;
    if (old != NULL && !old->unbound)
        return cmd_finish(a, &k, old, &next, false); /* binding twice changes nothing */
    next.uid = c->uid;
    next.channel_id = c->channel_id;
    next.start_seq = c->start_seq;
    next.unbound = false; /* a re-bind keeps the ack floor */
    return cmd_finish(a, &k, old, &next, true);
}

static int apply_ack_cmd(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__AckCmdCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__CmdBinding *old;
    int rc = load_cmd(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0)
        return rc;
    if (old == NULL || old->unbound) {
        slotd_error_set(a->err, SLOTD_ENOT_FOUND, "uid %s has no CMD binding to channel %s", c->uid,
                        c->channel_id);
        if (old != NULL)
            protobuf_c_message_free_unpacked(&old->base, NULL);
        return 0;
    }
    Slotd__V1__CmdBinding next = *old;
    bool advanced = c->ack_seq > old->ack_seq;
    if (advanced)
        next.ack_seq = c->ack_seq;
    return cmd_finish(a, &k, old, &next, advanced);
}

static int apply_unbind_cmd(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__UnbindCmdCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__CmdBinding *old;
    int rc = load_cmd(a, c->uid, c->channel_id, &k, &old);
    if (rc != 0)
        return rc;
    if (old == NULL) {
        slotd_error_set(a->err, SLOTD_ENOT_FOUND, "uid %s has no CMD binding to channel %s", c->uid,
                        c->channel_id);
        return 0;
    }
    Slotd__V1__CmdBinding next = *old;
    next.unbound = true; /* the tombstone */
    return cmd_finish(a, &k, old, &next, !old->unbound);
}

const struct slot__meta_op slot__member_ops[] = {
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_JOIN_CHANNEL, apply_join_channel, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEAVE_CHANNEL, apply_leave_channel, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_MARK_READ, apply_mark_read, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_HIDE_CONVERSATION, apply_hide_conversation, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_ACTIVATE_CONVERSATION, apply_activate_conversation, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_BIND_CMD, apply_bind_cmd, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_ACK_CMD, apply_ack_cmd, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_UNBIND_CMD, apply_unbind_cmd, NULL},
};
const size_t slot__member_ops_len = sizeof(slot__member_ops) / sizeof(slot__member_ops[0]);

/* ---- queries ---- */

static int serve_pair_row(struct slot__serve *s, const char *uid, const char *channel,
                          uint8_t table, const ProtobufCMessageDescriptor *d,
                          ProtobufCMessage **row)
{
    struct slot__key k;
    pair_key(&k, s->hs, table, uid, channel);
    return slot__store_row_get(s->st, &k, d, row);
}

static int serve_get_membership(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__GetMembershipQuery *q = (const void *)m;
    ProtobufCMessage *row;
    int rc = serve_pair_row(s, q->uid, q->channel_id, SLOT_TABLE_MEMBERSHIP,
                            &slotd__v1__membership__descriptor, &row);
    if (rc != 0)
        return rc;
    Slotd__V1__GetMembershipResult res = SLOTD__V1__GET_MEMBERSHIP_RESULT__INIT;
    res.found = row != NULL;
    res.membership = (Slotd__V1__Membership *)row;
    rc = slot__serve_reply(s, &res.base);
    if (row != NULL)
        protobuf_c_message_free_unpacked(row, NULL);
    return rc;
}

static int serve_get_cmd_binding(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__GetCmdBindingQuery *q = (const void *)m;
    ProtobufCMessage *row;
    int rc = serve_pair_row(s, q->uid, q->channel_id, SLOT_TABLE_CMD_BINDING,
                            &slotd__v1__cmd_binding__descriptor, &row);
    if (rc != 0)
        return rc;
    Slotd__V1__GetCmdBindingResult res = SLOTD__V1__GET_CMD_BINDING_RESULT__INIT;
    res.found = row != NULL;
    res.binding = (Slotd__V1__CmdBinding *)row;
    rc = slot__serve_reply(s, &res.base);
    if (row != NULL)
        protobuf_c_message_free_unpacked(row, NULL);
    return rc;
}

struct conversations {
    struct slot__serve *s;
    const char *uid;
    struct slot__rows rows;
};

/* An index entry [~at u64][channel]: its membership row. */
static int collect_conversation(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                                size_t vl)
{
    struct conversations *c = ctx;
    char channel[SLOT_CHANNEL_ID_MAX + 1];
    if (vl != 1 || sl <= 8 || sl - 8 > SLOT_CHANNEL_ID_MAX)
        return STORE_ECORRUPT;
    if (c->rows.n == c->rows.cap)
        return STORE_ELIMIT;
    memcpy(channel, suffix + 8, sl - 8);
    channel[sl - 8] = '\0';
    ProtobufCMessage *row;
    int rc = serve_pair_row(c->s, c->uid, channel, SLOT_TABLE_MEMBERSHIP,
                            &slotd__v1__membership__descriptor, &row);
    if (rc != 0)
        return rc;
    if (row == NULL)
        return STORE_ECORRUPT; /* invariant: every index entry has its membership row */
    c->rows.v[c->rows.n++] = row;
    return 0;
}

static int serve_list_conversations(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__ListConversationsQuery *q = (const void *)m;
    struct slot__key p;
    conversation_key(&p, s->hs, q->uid, 0, NULL);
    struct conversations c = {s, q->uid, {0}};
    uint32_t limit = slot__page(q->limit);
    int rc = slot__rows_init(&c.rows, &slotd__v1__membership__descriptor, limit);
    if (rc != 0)
        return rc;
    Slotd__V1__ListConversationsResult res = SLOTD__V1__LIST_CONVERSATIONS_RESULT__INIT;
    rc = slot__scan(s->st, &p, &q->cursor, limit, collect_conversation, &c, &res.next_cursor);
    if (rc == 0) {
        res.n_conversations = c.rows.n;
        res.conversations = (Slotd__V1__Membership **)c.rows.v;
        rc = slot__serve_reply(s, &res.base);
    }
    free(res.next_cursor.data);
    slot__rows_free(&c.rows);
    return rc;
}

const struct slot__meta_op slot__member_queries[] = {
    {SLOTD__V1__READ_REQUEST__QUERY_GET_MEMBERSHIP, NULL, serve_get_membership},
    {SLOTD__V1__READ_REQUEST__QUERY_LIST_CONVERSATIONS, NULL, serve_list_conversations},
    {SLOTD__V1__READ_REQUEST__QUERY_GET_CMD_BINDING, NULL, serve_get_cmd_binding},
};
const size_t slot__member_queries_len =
    sizeof(slot__member_queries) / sizeof(slot__member_queries[0]);
