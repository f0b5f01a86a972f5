/* meta_channel.c - channel-owned tables: channels, subscribers (fenced, counted), allowlist and
 * denylist, runtime meta (compare-and-set), migration task records and the bounded message-event
 * projection: their applies and serves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/slot/meta.h"

/* Every channel-owned row starts [hs][table][s channel_id][channel_type u8]. */
static void channel_key(struct slot__key *k, uint16_t hs, uint8_t table, const char *id,
                        uint32_t type)
{
    slot__key_init(k, hs, table);
    slot__key_channel(k, id, type);
}

static void member_prefix(struct slot__key *k, uint16_t hs, const char *channel, uint32_t type,
                          uint8_t list)
{
    channel_key(k, hs, SLOT_TABLE_CHANNEL_MEMBER, channel, type);
    slot__key_u8(k, list);
}

static void event_key(struct slot__key *k, uint16_t hs, const char *channel, uint32_t type,
                      uint64_t seq)
{
    channel_key(k, hs, SLOT_TABLE_EVENT, channel, type);
    if (seq != 0)
        slot__key_u64(k, UINT64_MAX - seq); /* newest first in key order */
}

static void task_key(struct slot__key *k, uint16_t hs, const char *channel, uint32_t type,
                     uint64_t task_id)
{
    channel_key(k, hs, SLOT_TABLE_MIGRATION, channel, type);
    if (task_id != 0)
        slot__key_u64(k, task_id);
}

void slot__channel_not_found(struct slotd_error *err, const char *what, const char *id,
                             uint32_t type)
{
    slotd_error_set(err, SLOTD_ENOT_FOUND, "%s %s (type %u) does not exist", what, id, type);
}

/* The channel row (held until the reply), or a NOT_FOUND rejection (*out NULL). */
static int load_channel(struct slot__apply *a, const char *id, uint32_t type, struct slot__key *k,
                        Slotd__V1__Channel **out)
{
    channel_key(k, a->hs, SLOT_TABLE_CHANNEL, id, type);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, k, &slotd__v1__channel__descriptor, &raw);
    *out = (Slotd__V1__Channel *)raw;
    if (rc == 0 && raw == NULL)
        slot__channel_not_found(a->err, "channel", id, type);
    return rc;
}

/* ---- channels ---- */

int slot__apply_create_channel(struct slot__apply *a, const ProtobufCMessage *m,
                               ProtobufCMessage *r)
{
    const Slotd__V1__CreateChannelCommand *c = (const void *)m;
    Slotd__V1__ChannelResult *res = (void *)r;
    struct slot__key k;
    channel_key(&k, a->hs, SLOT_TABLE_CHANNEL, c->channel_id, c->channel_type);
    ProtobufCMessage *old;
    int rc = slot__apply_row(a, &k, &slotd__v1__channel__descriptor, &old);
    res->changed = old == NULL; /* creating an existing channel changes nothing */
    res->channel = (Slotd__V1__Channel *)old;
    if (rc != 0 || old != NULL)
        return rc;
    Slotd__V1__ChannelFlags *flags = slot__apply_scratch(a, sizeof(*flags));
    Slotd__V1__Channel *ch = slot__apply_scratch(a, sizeof(*ch));
    slotd__v1__channel_flags__init(flags);
    if (c->flags != NULL)
        *flags = *c->flags;
    slotd__v1__channel__init(ch);
    ch->channel_id = c->channel_id;
    ch->channel_type = c->channel_type;
    ch->flags = flags;
    ch->event_capacity = c->event_capacity ? c->event_capacity : SLOT_EVENT_CAPACITY_DEFAULT;
    ch->event_next_seq = 1;
    res->channel = ch;
    return slot__row_put(a->f, &k, &ch->base);
}

static bool flags_equal(const Slotd__V1__ChannelFlags *x, const Slotd__V1__ChannelFlags *y)
{
    return x->ban == y->ban && x->disband == y->disband && x->send_ban == y->send_ban &&
           x->allow_stranger == y->allow_stranger && x->large == y->large;
}

int slot__apply_update_channel_flags(struct slot__apply *a, const ProtobufCMessage *m,
                                     ProtobufCMessage *r)
{
    const Slotd__V1__UpdateChannelFlagsCommand *c = (const void *)m;
    Slotd__V1__ChannelResult *res = (void *)r;
    struct slot__key k;
    Slotd__V1__Channel *ch;
    int rc = load_channel(a, c->channel_id, c->channel_type, &k, &ch);
    if (rc != 0 || ch == NULL)
        return rc;
    Slotd__V1__ChannelFlags none = SLOTD__V1__CHANNEL_FLAGS__INIT;
    Slotd__V1__ChannelFlags *flags = slot__apply_scratch(a, sizeof(*flags));
    *flags = c->flags != NULL ? *c->flags : none;
    res->changed = !flags_equal(ch->flags != NULL ? ch->flags : &none, flags);
    res->channel = slot__apply_scratch(a, sizeof(*res->channel));
    *res->channel = *ch; /* shallow: the held row owns the strings */
    res->channel->flags = flags;
    return res->changed ? slot__row_put(a->f, &k, &res->channel->base) : 0;
}

/* ---- subscribers, allowlist, denylist ---- */

struct members_cmd {
    const char *channel_id;
    uint32_t channel_type;
    size_t n_uids;
    char **uids;
    uint8_t list; /* Slotd__V1__MemberList */
    bool add;
    bool fenced;
    uint64_t expected_version;
};

static void fence_failed(struct slot__apply *a, const struct members_cmd *c,
                         const Slotd__V1__Channel *ch)
{
    slotd_error_set(a->err, SLOTD_ESTALE_FENCE,
                    "channel %s (type %u): expected_version %llu != subscriber_version %llu",
                    c->channel_id, c->channel_type, (unsigned long long)c->expected_version,
                    (unsigned long long)ch->subscriber_version);
    a->err->has_current_version = true;
    a->err->current_version = ch->subscriber_version;
}

static int apply_members(struct slot__apply *a, const struct members_cmd *c,
                         Slotd__V1__MembersResult *res)
{
    struct slot__key ck, k;
    Slotd__V1__Channel *ch;
    int rc = load_channel(a, c->channel_id, c->channel_type, &ck, &ch);
    if (rc != 0 || ch == NULL)
        return rc;
    if (c->fenced && c->expected_version != ch->subscriber_version) {
        fence_failed(a, c, ch);
        return 0;
    }
    uint32_t changed = 0;
    for (size_t i = 0; rc == 0 && i < c->n_uids; i++) {
        bool present;
        member_prefix(&k, a->hs, c->channel_id, c->channel_type, c->list);
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
    res->changed = changed;
    res->subscriber_count = ch->subscriber_count;
    res->subscriber_version = ch->subscriber_version;
    return rc;
}

int slot__apply_subscribers(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__SubscribersCommand *s = (const void *)m;
    struct members_cmd c = {s->channel_id,
                            s->channel_type,
                            s->n_uids,
                            s->uids,
                            SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS,
                            a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_SUBSCRIBERS,
                            true,
                            s->expected_version};
    return apply_members(a, &c, (void *)r);
}

int slot__apply_channel_list(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__ChannelListCommand *l = (const void *)m;
    bool allow = a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_ALLOWLIST ||
                 a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_ALLOWLIST;
    struct members_cmd c = {l->channel_id,
                            l->channel_type,
                            l->n_uids,
                            l->uids,
                            allow ? SLOTD__V1__MEMBER_LIST__MEMBER_LIST_ALLOWLIST
                                  : SLOTD__V1__MEMBER_LIST__MEMBER_LIST_DENYLIST,
                            a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_ALLOWLIST ||
                                a->number == SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_DENYLIST,
                            false,
                            0};
    return apply_members(a, &c, (void *)r);
}

/* ---- runtime meta ---- */

static bool meta_equal(const Slotd__V1__ChannelRuntimeMeta *x,
                       const Slotd__V1__ChannelRuntimeMeta *y)
{
    return x->leader == y->leader && x->channel_epoch == y->channel_epoch &&
           x->leader_epoch == y->leader_epoch && x->write_fence == y->write_fence &&
           x->retention_through_seq == y->retention_through_seq &&
           x->lease_until_ms == y->lease_until_ms && x->min_isr == y->min_isr &&
           x->status == y->status && x->features == y->features && x->n_replicas == y->n_replicas &&
           x->n_isr == y->n_isr &&
           (x->n_replicas == 0 ||
            memcmp(x->replicas, y->replicas, x->n_replicas * sizeof(uint64_t)) == 0) &&
           (x->n_isr == 0 || memcmp(x->isr, y->isr, x->n_isr * sizeof(uint64_t)) == 0);
}

/* A monotonic field that would move back: FAILED_PRECONDITION naming it and both values. */
static void meta_backwards(struct slot__apply *a, const Slotd__V1__UpdateRuntimeMetaCommand *c,
                           const char *name, uint64_t want, uint64_t cur, const char *rule)
{
    slotd_error_set(a->err, SLOTD_EPRECONDITION,
                    "update_runtime_meta.meta.%s: channel %s (type %u): %llu, current %llu (%s)",
                    name, c->channel_id, c->channel_type, (unsigned long long)want,
                    (unsigned long long)cur, rule);
    snprintf(a->err->field, sizeof(a->err->field), "update_runtime_meta.meta.%s", name);
}

/* The rules written beside ChannelRuntimeMeta's fields in metadata.proto (the epochs are checked
 * at validation: at least the expected ones, which the compare-and-set made the current ones).
 * Returns false with a->err set when next breaks one against cur. */
static bool meta_rules_hold(struct slot__apply *a, const Slotd__V1__UpdateRuntimeMetaCommand *c,
                            const Slotd__V1__ChannelRuntimeMeta *cur,
                            const Slotd__V1__ChannelRuntimeMeta *next)
{
    if (next->write_fence < cur->write_fence)
        meta_backwards(a, c, "write_fence", next->write_fence, cur->write_fence,
                       "only moves forward");
    else if ((unsigned)next->status < (unsigned)cur->status)
        meta_backwards(a, c, "status", (unsigned)next->status, (unsigned)cur->status,
                       "only moves forward: creating -> active -> deleting");
    else if (next->leader_epoch == cur->leader_epoch && next->lease_until_ms < cur->lease_until_ms)
        meta_backwards(a, c, "lease_until_ms", next->lease_until_ms, cur->lease_until_ms,
                       "only moves forward within a leader_epoch");
    else if ((cur->features & ~next->features) != 0)
        meta_backwards(a, c, "features", next->features, cur->features, "bits are only added");
    else
        return true;
    return false;
}

static void meta_stale(struct slot__apply *a, const Slotd__V1__UpdateRuntimeMetaCommand *c,
                       const Slotd__V1__ChannelRuntimeMeta *cur)
{
    slotd_error_set(a->err, SLOTD_ESTALE_FENCE,
                    "channel %s (type %u): expected channel_epoch %llu leader_epoch %llu leader "
                    "%llu, current %llu %llu %llu",
                    c->channel_id, c->channel_type, (unsigned long long)c->expected_channel_epoch,
                    (unsigned long long)c->expected_leader_epoch,
                    (unsigned long long)c->expected_leader, (unsigned long long)cur->channel_epoch,
                    (unsigned long long)cur->leader_epoch, (unsigned long long)cur->leader);
    size_t n = slotd__v1__channel_runtime_meta__get_packed_size(cur);
    if (n <= SLOTD_ERROR_CURRENT_MAX) { /* validated bounds keep it near 400 bytes */
        slotd__v1__channel_runtime_meta__pack(cur, a->err->current_runtime_meta);
        a->err->current_runtime_meta_len = n;
    }
}

int slot__apply_update_runtime_meta(struct slot__apply *a, const ProtobufCMessage *m,
                                    ProtobufCMessage *r)
{
    const Slotd__V1__UpdateRuntimeMetaCommand *c = (const void *)m;
    Slotd__V1__RuntimeMetaResult *res = (void *)r;
    struct slot__key k;
    channel_key(&k, a->hs, SLOT_TABLE_RUNTIME_META, c->channel_id, c->channel_type);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, &k, &slotd__v1__channel_runtime_meta__descriptor, &raw);
    if (rc != 0)
        return rc;
    Slotd__V1__ChannelRuntimeMeta none = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    const Slotd__V1__ChannelRuntimeMeta *cur = raw != NULL ? (const void *)raw : &none;
    if (cur->channel_epoch != c->expected_channel_epoch ||
        cur->leader_epoch != c->expected_leader_epoch || cur->leader != c->expected_leader) {
        meta_stale(a, c, cur);
        return 0;
    }
    Slotd__V1__ChannelRuntimeMeta *next = slot__apply_scratch(a, sizeof(*next));
    *next = *c->meta;
    if (!meta_rules_hold(a, c, cur, next))
        return 0;
    res->retention_advanced = next->retention_through_seq > cur->retention_through_seq;
    if (!res->retention_advanced)
        next->retention_through_seq = cur->retention_through_seq; /* only moves forward */
    res->changed = raw == NULL || !meta_equal(cur, next);
    res->meta = next;
    return res->changed ? slot__row_put(a->f, &k, &next->base) : 0;
}

int slot__apply_advance_retention(struct slot__apply *a, const ProtobufCMessage *m,
                                  ProtobufCMessage *r)
{
    const Slotd__V1__AdvanceRetentionCommand *c = (const void *)m;
    Slotd__V1__RuntimeMetaResult *res = (void *)r;
    struct slot__key k;
    channel_key(&k, a->hs, SLOT_TABLE_RUNTIME_META, c->channel_id, c->channel_type);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, &k, &slotd__v1__channel_runtime_meta__descriptor, &raw);
    if (rc != 0 || raw == NULL) {
        if (rc == 0)
            slot__channel_not_found(a->err, "runtime meta of channel", c->channel_id,
                                    c->channel_type);
        return rc;
    }
    Slotd__V1__ChannelRuntimeMeta *meta = (void *)raw;
    res->retention_advanced = c->retention_through_seq > meta->retention_through_seq;
    res->changed = res->retention_advanced;
    res->meta = meta;
    if (!res->retention_advanced)
        return 0;
    meta->retention_through_seq = c->retention_through_seq;
    return slot__row_put(a->f, &k, &meta->base);
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

int slot__apply_put_migration_task(struct slot__apply *a, const ProtobufCMessage *m,
                                   ProtobufCMessage *r)
{
    const Slotd__V1__ChannelMigrationTask *t =
        ((const Slotd__V1__PutMigrationTaskCommand *)m)->task;
    Slotd__V1__MigrationTaskResult *res = (void *)r;
    struct slot__key k;
    task_key(&k, a->hs, t->channel_id, t->channel_type, t->task_id);
    ProtobufCMessage *raw;
    int rc = slot__apply_row(a, &k, &slotd__v1__channel_migration_task__descriptor, &raw);
    const Slotd__V1__ChannelMigrationTask *old = (const void *)raw;
    Slotd__V1__ChannelMigrationTask *next = slot__apply_scratch(a, sizeof(*next));
    *next = old != NULL ? *old : *t;
    res->changed = old == NULL || status_rank(t->status) > status_rank(old->status);
    if (old != NULL && res->changed) { /* nodes are fixed at creation; status moves forward */
        next->status = t->status;
        next->last_error = t->last_error;
    }
    res->task = next;
    return rc != 0 || !res->changed ? rc : slot__row_put(a->f, &k, &next->base);
}

/* ---- message-event projection ---- */

int slot__apply_append_event(struct slot__apply *a, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__AppendEventCommand *c = (const void *)m;
    Slotd__V1__AppendEventResult *res = (void *)r;
    struct slot__key ck, k;
    Slotd__V1__Channel *ch;
    int rc = load_channel(a, c->channel_id, c->channel_type, &ck, &ch);
    if (rc != 0 || ch == NULL)
        return rc;
    uint64_t seq = ch->event_next_seq ? ch->event_next_seq : 1;
    uint32_t cap = ch->event_capacity ? ch->event_capacity : SLOT_EVENT_CAPACITY_DEFAULT;
    Slotd__V1__ChannelEvent ev = SLOTD__V1__CHANNEL_EVENT__INIT;
    ev.channel_id = c->channel_id;
    ev.channel_type = c->channel_type;
    ev.event_seq = seq;
    ev.message_seq = c->message_seq;
    ev.event_type = c->event_type;
    ev.payload = c->payload;
    event_key(&k, a->hs, c->channel_id, c->channel_type, seq);
    rc = slot__row_put(a->f, &k, &ev.base);
    res->event_seq = seq;
    /* invariant: the kept events are exactly seq - cap + 1 .. seq; evict the one that fell out */
    if (rc == 0 && seq > cap) {
        event_key(&k, a->hs, c->channel_id, c->channel_type, seq - cap);
        rc = slot__key_delete(a->f, &k);
        res->evicted = 1;
    }
    ch->event_next_seq = seq + 1;
    return rc != 0 ? rc : slot__row_put(a->f, &ck, &ch->base);
}

/* ---- delete channel ---- */

int slot__apply_delete_channel(struct slot__apply *a, const ProtobufCMessage *m,
                               ProtobufCMessage *r)
{
    const Slotd__V1__DeleteChannelCommand *c = (const void *)m;
    Slotd__V1__DeleteChannelResult *res = (void *)r;
    struct slot__key ck, k;
    Slotd__V1__Channel *ch;
    int rc = load_channel(a, c->channel_id, c->channel_type, &ck, &ch);
    if (rc != 0 || ch == NULL)
        return rc;
    struct slot__budget b = {SLOT_DELETE_ROWS_MAX, false};
    event_key(&k, a->hs, c->channel_id, c->channel_type, 0);
    rc = slot__delete_prefix(a->f, &k, 1, &b, NULL, NULL, &res->events);
    task_key(&k, a->hs, c->channel_id, c->channel_type, 0);
    if (rc == 0)
        rc = slot__delete_prefix(a->f, &k, 1, &b, NULL, NULL, &res->migration_tasks);
    uint32_t meta = 0;
    channel_key(&k, a->hs, SLOT_TABLE_RUNTIME_META, c->channel_id, c->channel_type);
    if (rc == 0) /* the one runtime meta row: a prefix of itself */
        rc = slot__delete_prefix(a->f, &k, 1, &b, NULL, NULL, &meta);
    res->runtime_meta = meta > 0;
    const uint8_t lists[] = {SLOTD__V1__MEMBER_LIST__MEMBER_LIST_DENYLIST,
                             SLOTD__V1__MEMBER_LIST__MEMBER_LIST_ALLOWLIST,
                             SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS};
    uint32_t *counts[] = {&res->denylist, &res->allowlist, &res->subscribers};
    for (size_t i = 0; rc == 0 && i < 3; i++) {
        member_prefix(&k, a->hs, c->channel_id, c->channel_type, lists[i]);
        rc = slot__delete_prefix(a->f, &k, 1, &b, NULL, NULL, counts[i]);
    }
    res->more = b.over;
    if (rc != 0 || !b.over) { /* the channel row goes last: a repeat continues from the rest */
        res->removed = rc == 0;
        return rc != 0 ? rc : slot__key_delete(a->f, &ck);
    }
    /* Rows remain: the channel stays, disbanded, its count following the subscribers removed. */
    Slotd__V1__ChannelFlags *flags = slot__apply_scratch(a, sizeof(*flags));
    Slotd__V1__Channel *next = slot__apply_scratch(a, sizeof(*next));
    slotd__v1__channel_flags__init(flags);
    if (ch->flags != NULL)
        *flags = *ch->flags;
    flags->disband = true;
    *next = *ch;
    next->flags = flags;
    next->subscriber_count -= res->subscribers; /* invariant: count == subscriber rows */
    next->subscriber_version += res->subscribers > 0;
    return slot__row_put(a->f, &ck, &next->base);
}

/* ---- queries ---- */

int slot__serve_get_channel(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    struct slot__key k;
    const Slotd__V1__GetChannelQuery *q = (const void *)m;
    channel_key(&k, s->hs, SLOT_TABLE_CHANNEL, q->channel_id, q->channel_type);
    return slot__serve_get(s, &k, &slotd__v1__channel__descriptor, r);
}

int slot__serve_list_members(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__ListMembersQuery *q = (const void *)m;
    struct slot__key p;
    member_prefix(&p, s->hs, q->channel_id, q->channel_type, (uint8_t)q->list);
    return slot__serve_list(s, &p, &q->cursor, q->limit, NULL, r);
}

int slot__serve_check_member(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__CheckMemberQuery *q = (const void *)m;
    struct slot__key k;
    member_prefix(&k, s->hs, q->channel_id, q->channel_type, (uint8_t)q->list);
    slot__key_tail(&k, q->uid);
    bool present;
    int rc = slot__store_flag_get(s->st, &k, &present);
    ((Slotd__V1__CheckMemberResult *)r)->member = present;
    return rc;
}

int slot__serve_get_runtime_meta(struct slot__serve *s, const ProtobufCMessage *m,
                                 ProtobufCMessage *r)
{
    struct slot__key k;
    const Slotd__V1__GetRuntimeMetaQuery *q = (const void *)m;
    channel_key(&k, s->hs, SLOT_TABLE_RUNTIME_META, q->channel_id, q->channel_type);
    return slot__serve_get(s, &k, &slotd__v1__channel_runtime_meta__descriptor, r);
}

int slot__serve_list_migration_tasks(struct slot__serve *s, const ProtobufCMessage *m,
                                     ProtobufCMessage *r)
{
    const Slotd__V1__ListMigrationTasksQuery *q = (const void *)m;
    const ProtobufCMessageDescriptor *d = &slotd__v1__channel_migration_task__descriptor;
    struct slot__task_filter tf = {s, (unsigned)q->status};
    if (q->channel_id[0] == '\0') /* every channel's: spans hash slots */
        return slot__serve_span(s, SLOT_TABLE_MIGRATION, &q->cursor, q->limit, d,
                                slot__collect_task, &tf, r);
    struct slot__key p;
    task_key(&p, s->hs, q->channel_id, q->channel_type, 0);
    uint32_t limit = slot__page(q->limit);
    int rc = slot__rows_init(&s->rows, d, limit);
    if (rc == 0)
        rc = slot__scan(s->st, &p, &q->cursor, limit, slot__collect_task, &tf, &s->next);
    if (rc == 0)
        slot__serve_list_result(s, r, true);
    return rc;
}

int slot__serve_list_events(struct slot__serve *s, const ProtobufCMessage *m, ProtobufCMessage *r)
{
    const Slotd__V1__ListEventsQuery *q = (const void *)m;
    struct slot__key p, end;
    event_key(&p, s->hs, q->channel_id, q->channel_type, 0);
    if (q->after_seq == 0)
        return slot__serve_list(s, &p, &q->cursor, q->limit, &slotd__v1__channel_event__descriptor,
                                r);
    /* Newest first, the events after after_seq: the keys below after_seq's own ([~seq]). */
    event_key(&end, s->hs, q->channel_id, q->channel_type, q->after_seq);
    uint32_t limit = slot__page(q->limit);
    int rc = slot__rows_init(&s->rows, &slotd__v1__channel_event__descriptor, limit);
    if (rc == 0)
        rc = slot__scan_until(s->st, &p, &end, &q->cursor, limit, slot__collect_row, &s->rows,
                              &s->next);
    if (rc == 0)
        slot__serve_list_result(s, r, true);
    return rc;
}
