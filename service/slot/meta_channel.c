/* meta_channel.c - channel-owned tables: channels, subscribers (fenced, counted), allowlist and
 * denylist, runtime meta (compare-and-set), migration task records and the bounded message-event
 * projection: their commands and queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/slot/meta.h"

static void channel_key(struct slot__key *k, uint16_t hs, uint8_t table, const char *id)
{
    slot__key_init(k, hs, table);
    slot__key_tail(k, id);
}

static void member_prefix(struct slot__key *k, uint16_t hs, const char *channel, uint8_t list)
{
    slot__key_init(k, hs, SLOT_TABLE_CHANNEL_MEMBER);
    slot__key_str(k, channel);
    slot__key_u8(k, list);
}

static void event_key(struct slot__key *k, uint16_t hs, const char *channel, uint64_t seq)
{
    slot__key_init(k, hs, SLOT_TABLE_EVENT);
    slot__key_str(k, channel);
    if (seq != 0)
        slot__key_u64(k, UINT64_MAX - seq); /* newest first in key order */
}

static void task_key(struct slot__key *k, uint16_t hs, const char *channel, uint64_t task_id)
{
    slot__key_init(k, hs, SLOT_TABLE_MIGRATION);
    slot__key_str(k, channel);
    if (task_id != 0)
        slot__key_u64(k, task_id);
}

static int load_channel(struct slot__apply *a, const char *id, struct slot__key *k,
                        Slotd__V1__Channel **out)
{
    channel_key(k, a->hs, SLOT_TABLE_CHANNEL, id);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, k, &slotd__v1__channel__descriptor, &raw);
    *out = (Slotd__V1__Channel *)raw;
    if (rc == 0 && raw == NULL)
        slot__not_found(a->err, "channel", id);
    return rc;
}

/* ---- channels ---- */

static int apply_create_channel(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__CreateChannelCommand *c = (const void *)m;
    struct slot__key k;
    channel_key(&k, a->hs, SLOT_TABLE_CHANNEL, c->channel_id);
    ProtobufCMessage *old;
    int rc = slot__row_get(a->f, &k, &slotd__v1__channel__descriptor, &old);
    if (rc != 0)
        return rc;
    Slotd__V1__ChannelFlags flags = SLOTD__V1__CHANNEL_FLAGS__INIT;
    if (c->flags != NULL)
        flags = *c->flags;
    Slotd__V1__Channel ch = SLOTD__V1__CHANNEL__INIT;
    ch.channel_id = c->channel_id;
    ch.channel_type = c->channel_type;
    ch.flags = &flags;
    ch.event_capacity = c->event_capacity ? c->event_capacity : SLOT_EVENT_CAPACITY_DEFAULT;
    ch.event_next_seq = 1;
    Slotd__V1__ChannelResult res = SLOTD__V1__CHANNEL_RESULT__INIT;
    res.changed = old == NULL; /* creating an existing channel changes nothing */
    res.channel = old != NULL ? (Slotd__V1__Channel *)old : &ch;
    if (old == NULL)
        rc = slot__row_put(a->f, &k, &ch.base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (old != NULL)
        protobuf_c_message_free_unpacked(old, NULL);
    return rc;
}

static bool flags_equal(const Slotd__V1__ChannelFlags *x, const Slotd__V1__ChannelFlags *y)
{
    return x->ban == y->ban && x->disband == y->disband && x->send_ban == y->send_ban &&
           x->allow_stranger == y->allow_stranger && x->large == y->large;
}

static int apply_update_channel_flags(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__UpdateChannelFlagsCommand *c = (const void *)m;
    struct slot__key k;
    Slotd__V1__Channel *old;
    int rc = load_channel(a, c->channel_id, &k, &old);
    if (rc != 0 || old == NULL)
        return rc;
    Slotd__V1__ChannelFlags none = SLOTD__V1__CHANNEL_FLAGS__INIT;
    Slotd__V1__ChannelFlags flags = c->flags != NULL ? *c->flags : none;
    Slotd__V1__Channel ch = *old; /* shallow: old owns the strings */
    ch.flags = &flags;
    Slotd__V1__ChannelResult res = SLOTD__V1__CHANNEL_RESULT__INIT;
    res.changed = !flags_equal(old->flags != NULL ? old->flags : &none, &flags);
    res.channel = &ch;
    if (res.changed)
        rc = slot__row_put(a->f, &k, &ch.base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    protobuf_c_message_free_unpacked(&old->base, NULL);
    return rc;
}

/* ---- subscribers, allowlist, denylist ---- */

struct members_cmd {
    const char *channel_id;
    size_t n_uids;
    char **uids;
    uint8_t list; /* Slotd__V1__MemberList */
    bool add;
    bool fenced;
    uint64_t expected_version;
};

static int fence_failed(struct slot__apply *a, const struct members_cmd *c,
                        const Slotd__V1__Channel *ch)
{
    slotd_error_set(a->err, SLOTD_ESTALE_FENCE,
                    "channel %s: expected_version %llu != subscriber_version %llu", c->channel_id,
                    (unsigned long long)c->expected_version,
                    (unsigned long long)ch->subscriber_version);
    a->err->has_current_version = true;
    a->err->current_version = ch->subscriber_version;
    return 0;
}

static int apply_members(struct slot__apply *a, const struct members_cmd *c)
{
    struct slot__key ck, k;
    Slotd__V1__Channel *ch;
    int rc = load_channel(a, c->channel_id, &ck, &ch);
    if (rc != 0 || ch == NULL)
        return rc;
    if (c->fenced && c->expected_version != ch->subscriber_version) {
        rc = fence_failed(a, c, ch);
        goto done;
    }
    uint32_t changed = 0;
    for (size_t i = 0; rc == 0 && i < c->n_uids; i++) {
        bool present;
        member_prefix(&k, a->hs, c->channel_id, c->list);
        slot__key_tail(&k, c->uids[i]);
        rc = slot__flag_get(a->f, &k, &present);
        if (rc != 0 || present == c->add)
            continue; /* adding a present uid or removing an absent one changes nothing */
        rc = c->add ? slot__flag_put(a->f, &k) : slot__key_delete(a->f, &k);
        changed++;
    }
    if (rc == 0 && changed > 0 && c->list == SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS) {
        /* invariant: subscriber_count == number of subscriber rows of the channel */
        ch->subscriber_count =
            c->add ? ch->subscriber_count + changed : ch->subscriber_count - changed;
        ch->subscriber_version++;
        rc = slot__row_put(a->f, &ck, &ch->base);
    }
    Slotd__V1__MembersResult res = SLOTD__V1__MEMBERS_RESULT__INIT;
    res.changed = changed;
    res.subscriber_count = ch->subscriber_count;
    res.subscriber_version = ch->subscriber_version;
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
done:
    protobuf_c_message_free_unpacked(&ch->base, NULL);
    return rc;
}

static int apply_subscribers(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__SubscribersCommand *s = (const void *)m;
    struct members_cmd c = {s->channel_id,
                            s->n_uids,
                            s->uids,
                            SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS,
                            a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_SUBSCRIBERS,
                            true,
                            s->expected_version};
    return apply_members(a, &c);
}

static int apply_channel_list(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__ChannelListCommand *l = (const void *)m;
    bool allow = a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_ALLOWLIST ||
                 a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_ALLOWLIST;
    struct members_cmd c = {l->channel_id,
                            l->n_uids,
                            l->uids,
                            allow ? SLOTD__V1__MEMBER_LIST__MEMBER_LIST_ALLOWLIST
                                  : SLOTD__V1__MEMBER_LIST__MEMBER_LIST_DENYLIST,
                            a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_ALLOWLIST ||
                                a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_DENYLIST,
                            false,
                            0};
    return apply_members(a, &c);
}

/* ---- runtime meta ---- */

static bool meta_equal(const Slotd__V1__ChannelRuntimeMeta *x,
                       const Slotd__V1__ChannelRuntimeMeta *y)
{
    return x->leader == y->leader && x->channel_epoch == y->channel_epoch &&
           x->leader_epoch == y->leader_epoch && x->write_fence == y->write_fence &&
           x->retention_through_seq == y->retention_through_seq && x->n_replicas == y->n_replicas &&
           x->n_isr == y->n_isr &&
           (x->n_replicas == 0 ||
            memcmp(x->replicas, y->replicas, x->n_replicas * sizeof(uint64_t)) == 0) &&
           (x->n_isr == 0 || memcmp(x->isr, y->isr, x->n_isr * sizeof(uint64_t)) == 0);
}

static void meta_stale(struct slot__apply *a, const Slotd__V1__UpdateRuntimeMetaCommand *c,
                       const Slotd__V1__ChannelRuntimeMeta *cur)
{
    slotd_error_set(a->err, SLOTD_ESTALE_FENCE,
                    "channel %s: expected channel_epoch %llu leader_epoch %llu leader %llu, "
                    "current %llu %llu %llu",
                    c->channel_id, (unsigned long long)c->expected_channel_epoch,
                    (unsigned long long)c->expected_leader_epoch,
                    (unsigned long long)c->expected_leader, (unsigned long long)cur->channel_epoch,
                    (unsigned long long)cur->leader_epoch, (unsigned long long)cur->leader);
    size_t n = slotd__v1__channel_runtime_meta__get_packed_size(cur);
    if (n <= SLOTD_ERROR_CURRENT_MAX) { /* validated bounds keep it near 400 bytes */
        slotd__v1__channel_runtime_meta__pack(cur, a->err->current_runtime_meta);
        a->err->current_runtime_meta_len = n;
    }
}

static int apply_update_runtime_meta(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__UpdateRuntimeMetaCommand *c = (const void *)m;
    struct slot__key k;
    channel_key(&k, a->hs, SLOT_TABLE_RUNTIME_META, c->channel_id);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, &k, &slotd__v1__channel_runtime_meta__descriptor, &raw);
    if (rc != 0)
        return rc;
    Slotd__V1__ChannelRuntimeMeta none = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    const Slotd__V1__ChannelRuntimeMeta *cur = raw != NULL ? (const void *)raw : &none;
    if (cur->channel_epoch != c->expected_channel_epoch ||
        cur->leader_epoch != c->expected_leader_epoch || cur->leader != c->expected_leader) {
        meta_stale(a, c, cur);
        goto done;
    }
    Slotd__V1__ChannelRuntimeMeta next = *c->meta;
    Slotd__V1__RuntimeMetaResult res = SLOTD__V1__RUNTIME_META_RESULT__INIT;
    res.retention_advanced = next.retention_through_seq > cur->retention_through_seq;
    if (!res.retention_advanced)
        next.retention_through_seq = cur->retention_through_seq; /* only moves forward */
    res.changed = raw == NULL || !meta_equal(cur, &next);
    res.meta = &next;
    if (res.changed)
        rc = slot__row_put(a->f, &k, &next.base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
done:
    if (raw != NULL)
        protobuf_c_message_free_unpacked(raw, NULL);
    return rc;
}

static int apply_advance_retention(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__AdvanceRetentionCommand *c = (const void *)m;
    struct slot__key k;
    channel_key(&k, a->hs, SLOT_TABLE_RUNTIME_META, c->channel_id);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, &k, &slotd__v1__channel_runtime_meta__descriptor, &raw);
    if (rc != 0)
        return rc;
    if (raw == NULL) {
        slot__not_found(a->err, "runtime meta of channel", c->channel_id);
        return 0;
    }
    Slotd__V1__ChannelRuntimeMeta *meta = (void *)raw;
    Slotd__V1__RuntimeMetaResult res = SLOTD__V1__RUNTIME_META_RESULT__INIT;
    res.retention_advanced = c->retention_through_seq > meta->retention_through_seq;
    res.changed = res.retention_advanced;
    res.meta = meta;
    if (res.retention_advanced) {
        meta->retention_through_seq = c->retention_through_seq;
        rc = slot__row_put(a->f, &k, &meta->base);
    }
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    protobuf_c_message_free_unpacked(raw, NULL);
    return rc;
}

/* ---- migration task records ---- */

static int status_rank(Slotd__V1__MigrationStatus s)
{
    switch (s) {
    case SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING:
        return 1;
    case SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_RUNNING:
        return 2;
    case SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_DONE:
    case SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_FAILED:
        return 3; /* terminal */
    default:
        return 0;
    }
}

static int apply_put_migration_task(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__ChannelMigrationTask *t =
        ((const Slotd__V1__PutMigrationTaskCommand *)m)->task;
    struct slot__key k;
    task_key(&k, a->hs, t->channel_id, t->task_id);
    ProtobufCMessage *raw;
    int rc = slot__row_get(a->f, &k, &slotd__v1__channel_migration_task__descriptor, &raw);
    if (rc != 0)
        return rc;
    const Slotd__V1__ChannelMigrationTask *old = (const void *)raw;
    Slotd__V1__ChannelMigrationTask next = old != NULL ? *old : *t;
    Slotd__V1__MigrationTaskResult res = SLOTD__V1__MIGRATION_TASK_RESULT__INIT;
    res.changed = old == NULL || status_rank(t->status) > status_rank(old->status);
    if (old != NULL && res.changed) { /* nodes are fixed at creation; status moves forward */
        next.status = t->status;
        next.last_error = t->last_error;
    }
    res.task = &next;
    if (res.changed)
        rc = slot__row_put(a->f, &k, &next.base);
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    if (raw != NULL)
        protobuf_c_message_free_unpacked(raw, NULL);
    return rc;
}

/* ---- message-event projection ---- */

static int apply_append_event(struct slot__apply *a, const ProtobufCMessage *m)
{
    const Slotd__V1__AppendEventCommand *c = (const void *)m;
    struct slot__key ck, k;
    Slotd__V1__Channel *ch;
    int rc = load_channel(a, c->channel_id, &ck, &ch);
    if (rc != 0 || ch == NULL)
        return rc;
    uint64_t seq = ch->event_next_seq ? ch->event_next_seq : 1;
    uint32_t cap = ch->event_capacity ? ch->event_capacity : SLOT_EVENT_CAPACITY_DEFAULT;
    Slotd__V1__ChannelEvent ev = SLOTD__V1__CHANNEL_EVENT__INIT;
    ev.channel_id = c->channel_id;
    ev.event_seq = seq;
    ev.message_seq = c->message_seq;
    ev.event_type = c->event_type;
    ev.payload = c->payload;
    event_key(&k, a->hs, c->channel_id, seq);
    rc = slot__row_put(a->f, &k, &ev.base);
    Slotd__V1__AppendEventResult res = SLOTD__V1__APPEND_EVENT_RESULT__INIT;
    res.event_seq = seq;
    /* invariant: the kept events are exactly seq - cap + 1 .. seq; evict the one that fell out */
    if (rc == 0 && seq > cap) {
        event_key(&k, a->hs, c->channel_id, seq - cap);
        rc = slot__key_delete(a->f, &k);
        res.evicted = 1;
    }
    if (rc == 0) {
        ch->event_next_seq = seq + 1;
        rc = slot__row_put(a->f, &ck, &ch->base);
    }
    if (rc == 0)
        rc = slot__apply_reply(a, &res.base);
    protobuf_c_message_free_unpacked(&ch->base, NULL);
    return rc;
}

const struct slot__meta_op slot__channel_ops[] = {
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_CREATE_CHANNEL, apply_create_channel, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_UPDATE_CHANNEL_FLAGS, apply_update_channel_flags, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_SUBSCRIBERS, apply_subscribers, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_SUBSCRIBERS, apply_subscribers, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_ALLOWLIST, apply_channel_list, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_ALLOWLIST, apply_channel_list, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_DENYLIST, apply_channel_list, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_DENYLIST, apply_channel_list, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_UPDATE_RUNTIME_META, apply_update_runtime_meta, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADVANCE_RETENTION, apply_advance_retention, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT_MIGRATION_TASK, apply_put_migration_task, NULL},
    {SLOTD__V1__PROPOSE_REQUEST__COMMAND_APPEND_EVENT, apply_append_event, NULL},
};
const size_t slot__channel_ops_len = sizeof(slot__channel_ops) / sizeof(slot__channel_ops[0]);

/* ---- queries ---- */

static int serve_get_channel(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__GetChannelQuery *q = (const void *)m;
    struct slot__key k;
    channel_key(&k, s->hs, SLOT_TABLE_CHANNEL, q->channel_id);
    ProtobufCMessage *row;
    int rc = slot__store_row_get(s->st, &k, &slotd__v1__channel__descriptor, &row);
    if (rc != 0)
        return rc;
    Slotd__V1__GetChannelResult res = SLOTD__V1__GET_CHANNEL_RESULT__INIT;
    res.found = row != NULL;
    res.channel = (Slotd__V1__Channel *)row;
    rc = slot__serve_reply(s, &res.base);
    if (row != NULL)
        protobuf_c_message_free_unpacked(row, NULL);
    return rc;
}

static int serve_list_members(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__ListMembersQuery *q = (const void *)m;
    struct slot__key p;
    member_prefix(&p, s->hs, q->channel_id, (uint8_t)q->list);
    struct slot__strs uids;
    uint32_t limit = slot__page(q->limit);
    int rc = slot__strs_init(&uids, limit);
    if (rc != 0)
        return rc;
    Slotd__V1__ListMembersResult res = SLOTD__V1__LIST_MEMBERS_RESULT__INIT;
    rc = slot__scan(s->st, &p, &q->cursor, limit, slot__collect_suffix, &uids, &res.next_cursor);
    if (rc == 0) {
        res.n_uids = uids.n;
        res.uids = uids.v;
        rc = slot__serve_reply(s, &res.base);
    }
    free(res.next_cursor.data);
    slot__strs_free(&uids);
    return rc;
}

static int serve_check_member(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__CheckMemberQuery *q = (const void *)m;
    struct slot__key k;
    member_prefix(&k, s->hs, q->channel_id, (uint8_t)q->list);
    slot__key_tail(&k, q->uid);
    bool present;
    int rc = slot__store_flag_get(s->st, &k, &present);
    if (rc != 0)
        return rc;
    Slotd__V1__CheckMemberResult res = SLOTD__V1__CHECK_MEMBER_RESULT__INIT;
    res.member = present;
    return slot__serve_reply(s, &res.base);
}

static int serve_get_runtime_meta(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__GetRuntimeMetaQuery *q = (const void *)m;
    struct slot__key k;
    channel_key(&k, s->hs, SLOT_TABLE_RUNTIME_META, q->channel_id);
    ProtobufCMessage *row;
    int rc = slot__store_row_get(s->st, &k, &slotd__v1__channel_runtime_meta__descriptor, &row);
    if (rc != 0)
        return rc;
    Slotd__V1__GetRuntimeMetaResult res = SLOTD__V1__GET_RUNTIME_META_RESULT__INIT;
    res.found = row != NULL;
    res.meta = (Slotd__V1__ChannelRuntimeMeta *)row;
    rc = slot__serve_reply(s, &res.base);
    if (row != NULL)
        protobuf_c_message_free_unpacked(row, NULL);
    return rc;
}

static int serve_list_migration_tasks(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__ListMigrationTasksQuery *q = (const void *)m;
    struct slot__key p;
    task_key(&p, s->hs, q->channel_id, 0);
    struct slot__rows rows;
    uint32_t limit = slot__page(q->limit);
    int rc = slot__rows_init(&rows, &slotd__v1__channel_migration_task__descriptor, limit);
    if (rc != 0)
        return rc;
    Slotd__V1__ListMigrationTasksResult res = SLOTD__V1__LIST_MIGRATION_TASKS_RESULT__INIT;
    rc = slot__scan(s->st, &p, &q->cursor, limit, slot__collect_row, &rows, &res.next_cursor);
    if (rc == 0) {
        res.n_tasks = rows.n;
        res.tasks = (Slotd__V1__ChannelMigrationTask **)rows.v;
        rc = slot__serve_reply(s, &res.base);
    }
    free(res.next_cursor.data);
    slot__rows_free(&rows);
    return rc;
}

static int serve_list_events(struct slot__serve *s, const ProtobufCMessage *m)
{
    const Slotd__V1__ListEventsQuery *q = (const void *)m;
    struct slot__key p;
    event_key(&p, s->hs, q->channel_id, 0);
    struct slot__rows rows;
    uint32_t limit = slot__page(q->limit);
    int rc = slot__rows_init(&rows, &slotd__v1__channel_event__descriptor, limit);
    if (rc != 0)
        return rc;
    Slotd__V1__ListEventsResult res = SLOTD__V1__LIST_EVENTS_RESULT__INIT;
    rc = slot__scan(s->st, &p, &q->cursor, limit, slot__collect_row, &rows, &res.next_cursor);
    if (rc == 0) {
        res.n_events = rows.n;
        res.events = (Slotd__V1__ChannelEvent **)rows.v;
        rc = slot__serve_reply(s, &res.base);
    }
    free(res.next_cursor.data);
    slot__rows_free(&rows);
    return rc;
}

const struct slot__meta_op slot__channel_queries[] = {
    {SLOTD__V1__READ_REQUEST__QUERY_GET_CHANNEL, NULL, serve_get_channel},
    {SLOTD__V1__READ_REQUEST__QUERY_LIST_MEMBERS, NULL, serve_list_members},
    {SLOTD__V1__READ_REQUEST__QUERY_CHECK_MEMBER, NULL, serve_check_member},
    {SLOTD__V1__READ_REQUEST__QUERY_GET_RUNTIME_META, NULL, serve_get_runtime_meta},
    {SLOTD__V1__READ_REQUEST__QUERY_LIST_MIGRATION_TASKS, NULL, serve_list_migration_tasks},
    {SLOTD__V1__READ_REQUEST__QUERY_LIST_EVENTS, NULL, serve_list_events},
};
const size_t slot__channel_queries_len =
    sizeof(slot__channel_queries) / sizeof(slot__channel_queries[0]);
