/* client_meta.c - libslotd typed metadata helpers: users, devices, channels, members,
 * conversations, CMD bindings, runtime meta, plugin bindings and events (typed Propose/Read). */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <grpc/slice.h>

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_METHOD_PROPOSE "/slotd.v1.Metadata/Propose"
#define META_METHOD_READ "/slotd.v1.Metadata/Read"
/* replicas and isr of one runtime update */
#define META_RUNTIME_NODES_MAX 64

/* A result and what its pointers point into. */
struct meta_box {
    struct slotd_meta_result pub;
    Slotd__V1__ProposeResponse *propose;
    Slotd__V1__ReadResponse *read;
    struct slotd_meta_user user;
    struct slotd_meta_device device;
    struct slotd_meta_channel channel;
    struct slotd_meta_membership membership;
    struct slotd_meta_cmd_binding cmd_binding;
    struct slotd_meta_runtime runtime;
    struct slotd_meta_plugin_binding plugin_binding;
    char *label; /* runtime get/set: the channel id asked for (runtime.channel_id) */
};

/* A page, its unpacked answer, the pointer array and the rows it points at. */
struct meta_page_box {
    struct slotd_meta_page pub;
    Slotd__V1__ReadResponse *read;
    void **ptrs;
    void *rows;
};

struct slotd_runtime_update {
    uint64_t expected_channel_epoch, expected_leader_epoch, expected_leader;
    uint64_t leader;
    uint64_t replicas[META_RUNTIME_NODES_MAX];
    size_t replica_count;
    uint64_t isr[META_RUNTIME_NODES_MAX];
    size_t isr_count;
    uint64_t channel_epoch, leader_epoch, write_fence, retention_through_seq, lease_until_ms;
    uint32_t min_isr;
    int status;
    uint64_t features;
};

void slotd_meta_result_destroy(struct slotd_meta_result *r)
{
    if (!r)
        return;
    struct meta_box *b = (struct meta_box *)r;
    if (b->propose)
        slotd__v1__propose_response__free_unpacked(b->propose, NULL);
    if (b->read)
        slotd__v1__read_response__free_unpacked(b->read, NULL);
    free(b->label);
    free(b);
}

void slotd_meta_page_destroy(struct slotd_meta_page *p)
{
    if (!p)
        return;
    struct meta_page_box *b = (struct meta_page_box *)p;
    if (b->read)
        slotd__v1__read_response__free_unpacked(b->read, NULL);
    free(b->ptrs);
    free(b->rows);
    free(b);
}

/* ---- rows ---------------------------------------------------------------------------------- */

static uint32_t meta_flags_of(const Slotd__V1__ChannelFlags *f)
{
    if (!f)
        return 0;
    return (f->ban ? SLOTD_CHANNEL_FLAG_BAN : 0) | (f->disband ? SLOTD_CHANNEL_FLAG_DISBAND : 0) |
           (f->send_ban ? SLOTD_CHANNEL_FLAG_SEND_BAN : 0) |
           (f->allow_stranger ? SLOTD_CHANNEL_FLAG_ALLOW_STRANGER : 0) |
           (f->large ? SLOTD_CHANNEL_FLAG_LARGE : 0);
}

static void meta_flags_to(uint32_t flags, Slotd__V1__ChannelFlags *f)
{
    f->ban = flags & SLOTD_CHANNEL_FLAG_BAN;
    f->disband = flags & SLOTD_CHANNEL_FLAG_DISBAND;
    f->send_ban = flags & SLOTD_CHANNEL_FLAG_SEND_BAN;
    f->allow_stranger = flags & SLOTD_CHANNEL_FLAG_ALLOW_STRANGER;
    f->large = flags & SLOTD_CHANNEL_FLAG_LARGE;
}

static void meta_user_of(const Slotd__V1__User *m, struct slotd_meta_user *o)
{
    *o = (struct slotd_meta_user){m->uid, m->token, m->device_flag, m->device_level};
}

static void meta_device_of(const Slotd__V1__Device *m, struct slotd_meta_device *o)
{
    *o = (struct slotd_meta_device){m->uid, m->device_flag, m->token, m->device_level};
}

static void meta_channel_of(const Slotd__V1__Channel *m, struct slotd_meta_channel *o)
{
    *o = (struct slotd_meta_channel){
        m->channel_id,         m->channel_type,   meta_flags_of(m->flags), m->subscriber_count,
        m->subscriber_version, m->event_capacity, m->event_next_seq};
}

static void meta_membership_of(const Slotd__V1__Membership *m, struct slotd_meta_membership *o)
{
    *o = (struct slotd_meta_membership){
        m->uid,      m->channel_id,       m->channel_type,    m->join_seq,
        m->read_seq, m->hide_through_seq, m->activated_at_ms, m->hidden,
        m->left};
}

static void meta_cmd_of(const Slotd__V1__CmdBinding *m, struct slotd_meta_cmd_binding *o)
{
    *o = (struct slotd_meta_cmd_binding){m->uid,       m->channel_id, m->channel_type,
                                         m->start_seq, m->ack_seq,    m->unbound};
}

static void meta_runtime_of(const Slotd__V1__ChannelRuntimeMeta *m, const char *channel_id,
                            uint32_t channel_type, struct slotd_meta_runtime *o)
{
    *o = (struct slotd_meta_runtime){.channel_id = channel_id,
                                     .channel_type = channel_type,
                                     .leader = m->leader,
                                     .replicas = m->replicas,
                                     .replica_count = m->n_replicas,
                                     .isr = m->isr,
                                     .isr_count = m->n_isr,
                                     .channel_epoch = m->channel_epoch,
                                     .leader_epoch = m->leader_epoch,
                                     .write_fence = m->write_fence,
                                     .retention_through_seq = m->retention_through_seq,
                                     .lease_until_ms = m->lease_until_ms,
                                     .min_isr = m->min_isr,
                                     .status = (int)m->status,
                                     .features = m->features};
}

static void meta_event_of(const Slotd__V1__ChannelEvent *m, struct slotd_meta_event *o)
{
    *o = (struct slotd_meta_event){m->channel_id, m->channel_type, m->event_seq,  m->message_seq,
                                   m->event_type, m->payload.data, m->payload.len};
}

/* ---- answers ------------------------------------------------------------------------------- */

/* User-owned answers: users, devices, the system-uid flag, delete_user. */
static void meta_fill_user(struct meta_box *b)
{
    Slotd__V1__ProposeResponse *m = b->propose;
    struct slotd_meta_result *r = &b->pub;
    switch (m->result_case) {
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_CREATE_USER:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UPDATE_USER: {
        /* both results are UserResult in one union slot */
        Slotd__V1__UserResult *u = m->create_user;
        r->changed = u->changed;
        if (u->user) {
            meta_user_of(u->user, &b->user);
            r->user = &b->user;
        }
        break;
    }
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT_DEVICE:
        r->changed = m->put_device->created;
        if (m->put_device->device) {
            meta_device_of(m->put_device->device, &b->device);
            r->device = &b->device;
        }
        break;
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_REMOVE_DEVICE:
        r->changed = m->remove_device->removed;
        if (m->remove_device->device) {
            meta_device_of(m->remove_device->device, &b->device);
            r->device = &b->device;
        }
        break;
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_SET_SYSTEM_UID:
        r->changed = m->set_system_uid->changed;
        break;
    default: { /* SLOTD__V1__PROPOSE_RESPONSE__RESULT_DELETE_USER */
        Slotd__V1__DeleteUserResult *d = m->delete_user;
        r->removed = d->removed;
        r->changed = d->removed || d->devices || d->memberships || d->cmd_bindings ||
                     d->plugin_binding || d->system_uid;
        r->removed_devices = d->devices;
        r->removed_memberships = d->memberships;
        r->removed_cmd_bindings = d->cmd_bindings;
        r->removed_plugin_binding = d->plugin_binding;
        r->removed_system_uid = d->system_uid;
        r->more = d->more;
        break;
    }
    }
}

/* Channel-owned answers: channels, delete_channel, member lists, runtime meta, events. */
static void meta_fill_channel(struct meta_box *b)
{
    Slotd__V1__ProposeResponse *m = b->propose;
    struct slotd_meta_result *r = &b->pub;
    switch (m->result_case) {
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_CREATE_CHANNEL:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UPDATE_CHANNEL_FLAGS: {
        Slotd__V1__ChannelResult *ch = m->create_channel; /* one union slot, one type */
        r->changed = ch->changed;
        if (ch->channel) {
            meta_channel_of(ch->channel, &b->channel);
            r->channel = &b->channel;
        }
        break;
    }
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_DELETE_CHANNEL: {
        Slotd__V1__DeleteChannelResult *d = m->delete_channel;
        r->removed = d->removed;
        r->changed = d->removed || d->subscribers || d->allowlist || d->denylist ||
                     d->runtime_meta || d->migration_tasks || d->events;
        r->removed_subscribers = d->subscribers;
        r->removed_allowlist = d->allowlist;
        r->removed_denylist = d->denylist;
        r->removed_runtime_meta = d->runtime_meta;
        r->removed_migration_tasks = d->migration_tasks;
        r->removed_events = d->events;
        r->more = d->more;
        break;
    }
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UPDATE_RUNTIME_META:
        r->changed = m->update_runtime_meta->changed;
        if (m->update_runtime_meta->meta) {
            meta_runtime_of(m->update_runtime_meta->meta, "", 0, &b->runtime);
            r->runtime = &b->runtime;
        }
        break;
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_APPEND_EVENT:
        r->changed = true;
        r->event_seq = m->append_event->event_seq;
        r->evicted = m->append_event->evicted;
        break;
    default: { /* the six member-list results share one message type and one union slot */
        Slotd__V1__MembersResult *mr = m->add_subscribers;
        r->members_changed = mr->changed;
        r->changed = mr->changed > 0;
        r->subscriber_count = mr->subscriber_count;
        r->subscriber_version = mr->subscriber_version;
        break;
    }
    }
}

/* Answers of a uid's commands about a channel: memberships, CMD bindings; plugin bindings. */
static void meta_fill_binding(struct meta_box *b)
{
    Slotd__V1__ProposeResponse *m = b->propose;
    struct slotd_meta_result *r = &b->pub;
    switch (m->result_case) {
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_BIND_CMD:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_ACK_CMD:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UNBIND_CMD: {
        Slotd__V1__CmdBindingResult *cr = m->bind_cmd;
        r->changed = cr->changed;
        if (cr->binding) {
            meta_cmd_of(cr->binding, &b->cmd_binding);
            r->cmd_binding = &b->cmd_binding;
        }
        break;
    }
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_BIND_PLUGIN:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UNBIND_PLUGIN: {
        Slotd__V1__PluginBindingResult *pr = m->bind_plugin;
        r->changed = pr->changed;
        if (pr->binding) {
            b->plugin_binding =
                (struct slotd_meta_plugin_binding){pr->binding->uid, pr->binding->plugin_no};
            r->plugin_binding = &b->plugin_binding;
        }
        break;
    }
    default: { /* the five membership results: MembershipResult in one union slot */
        Slotd__V1__MembershipResult *mr = m->join_channel;
        r->changed = mr->changed;
        if (mr->membership) {
            meta_membership_of(mr->membership, &b->membership);
            r->membership = &b->membership;
        }
        break;
    }
    }
}

/* The ProposeResponse rows and counts of b->propose (result_case already checked). */
static void meta_propose_fill(struct meta_box *b)
{
    Slotd__V1__ProposeResponse *m = b->propose;
    struct slotd_meta_result *r = &b->pub;
    r->applied_index = m->applied_index;
    r->group_id = m->group_id;
    r->term = m->term;
    r->deduplicated = m->deduplicated;
    switch (m->result_case) {
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_CREATE_USER:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UPDATE_USER:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT_DEVICE:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_REMOVE_DEVICE:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_SET_SYSTEM_UID:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_DELETE_USER:
        meta_fill_user(b);
        break;
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_CREATE_CHANNEL:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UPDATE_CHANNEL_FLAGS:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_DELETE_CHANNEL:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_ADD_SUBSCRIBERS:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_REMOVE_SUBSCRIBERS:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_ADD_ALLOWLIST:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_REMOVE_ALLOWLIST:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_ADD_DENYLIST:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_REMOVE_DENYLIST:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UPDATE_RUNTIME_META:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_APPEND_EVENT:
        meta_fill_channel(b);
        break;
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_JOIN_CHANNEL:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEAVE_CHANNEL:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_MARK_READ:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_HIDE_CONVERSATION:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_ACTIVATE_CONVERSATION:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_BIND_CMD:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_ACK_CMD:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UNBIND_CMD:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_BIND_PLUGIN:
    case SLOTD__V1__PROPOSE_RESPONSE__RESULT_UNBIND_PLUGIN:
        meta_fill_binding(b);
        break;
    default: /* not a typed command's result: nothing to fill */
        break;
    }
}

/* The ReadResponse row of a get or check in b->read (result_case already checked). */
static void meta_read_fill(struct meta_box *b)
{
    Slotd__V1__ReadResponse *m = b->read;
    struct slotd_meta_result *r = &b->pub;
    r->applied_index = m->applied_index;
    r->group_id = m->group_id;
    r->term = m->term;
    switch (m->result_case) {
    case SLOTD__V1__READ_RESPONSE__RESULT_GET_USER:
        if ((r->found = m->get_user->found && m->get_user->user)) {
            meta_user_of(m->get_user->user, &b->user);
            r->user = &b->user;
        }
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_GET_CHANNEL:
        if ((r->found = m->get_channel->found && m->get_channel->channel)) {
            meta_channel_of(m->get_channel->channel, &b->channel);
            r->channel = &b->channel;
        }
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_CHECK_MEMBER:
        r->found = r->member = m->check_member->member;
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_GET_MEMBERSHIP:
        if ((r->found = m->get_membership->found && m->get_membership->membership)) {
            meta_membership_of(m->get_membership->membership, &b->membership);
            r->membership = &b->membership;
        }
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_GET_RUNTIME_META:
        if ((r->found = m->get_runtime_meta->found && m->get_runtime_meta->meta)) {
            meta_runtime_of(m->get_runtime_meta->meta, "", 0, &b->runtime);
            r->runtime = &b->runtime;
        }
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_GET_PLUGIN_BINDING:
        if ((r->found = m->get_plugin_binding->found && m->get_plugin_binding->binding)) {
            Slotd__V1__PluginBinding *p = m->get_plugin_binding->binding;
            b->plugin_binding = (struct slotd_meta_plugin_binding){p->uid, p->plugin_no};
            r->plugin_binding = &b->plugin_binding;
        }
        break;
    default:
        break;
    }
}

/* Allocates the pointer array and n rows of size each for a page. */
static int meta_page_alloc(struct meta_page_box *b, size_t n, size_t size)
{
    b->ptrs = calloc(n ? n : 1, sizeof(void *));
    b->rows = size ? calloc(n ? n : 1, size) : NULL;
    if (!b->ptrs || (size && !b->rows))
        return SLOTD_CLIENT_ENOMEM;
    for (size_t i = 0; size && i < n; i++)
        b->ptrs[i] = (char *)b->rows + i * size;
    b->pub.count = n;
    return SLOTD_CLIENT_OK;
}

/* The entries of the listing in b->read (result_case already checked). */
static int meta_page_fill(struct meta_page_box *b)
{
    Slotd__V1__ReadResponse *m = b->read;
    struct slotd_meta_page *p = &b->pub;
    ProtobufCBinaryData next = {0, NULL};
    int rc = SLOTD_CLIENT_OK;
    p->applied_index = m->applied_index;
    p->group_id = m->group_id;
    switch (m->result_case) {
    case SLOTD__V1__READ_RESPONSE__RESULT_LIST_DEVICES:
        rc = meta_page_alloc(b, m->list_devices->n_devices, sizeof(struct slotd_meta_device));
        for (size_t i = 0; rc == 0 && i < p->count; i++)
            meta_device_of(m->list_devices->devices[i], b->ptrs[i]);
        p->devices = (const struct slotd_meta_device *const *)b->ptrs;
        next = m->list_devices->next_cursor;
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_LIST_SYSTEM_UIDS:
        rc = meta_page_alloc(b, m->list_system_uids->n_uids, 0);
        for (size_t i = 0; rc == 0 && i < p->count; i++)
            b->ptrs[i] = m->list_system_uids->uids[i];
        p->uids = (const char *const *)b->ptrs;
        next = m->list_system_uids->next_cursor;
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_LIST_MEMBERS:
        rc = meta_page_alloc(b, m->list_members->n_uids, 0);
        for (size_t i = 0; rc == 0 && i < p->count; i++)
            b->ptrs[i] = m->list_members->uids[i];
        p->uids = (const char *const *)b->ptrs;
        next = m->list_members->next_cursor;
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_LIST_CHANNELS:
        rc = meta_page_alloc(b, m->list_channels->n_channels, sizeof(struct slotd_meta_channel));
        for (size_t i = 0; rc == 0 && i < p->count; i++)
            meta_channel_of(m->list_channels->channels[i], b->ptrs[i]);
        p->channels = (const struct slotd_meta_channel *const *)b->ptrs;
        next = m->list_channels->next_cursor;
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_LIST_CONVERSATIONS:
        rc = meta_page_alloc(b, m->list_conversations->n_conversations,
                             sizeof(struct slotd_meta_membership));
        for (size_t i = 0; rc == 0 && i < p->count; i++)
            meta_membership_of(m->list_conversations->conversations[i], b->ptrs[i]);
        p->conversations = (const struct slotd_meta_membership *const *)b->ptrs;
        next = m->list_conversations->next_cursor;
        break;
    case SLOTD__V1__READ_RESPONSE__RESULT_LIST_RUNTIME_META: {
        Slotd__V1__ListRuntimeMetaResult *l = m->list_runtime_meta;
        rc = meta_page_alloc(b, l->n_entries, sizeof(struct slotd_meta_runtime));
        for (size_t i = 0; rc == 0 && i < p->count; i++) {
            Slotd__V1__RuntimeMetaEntry *e = l->entries[i];
            Slotd__V1__ChannelRuntimeMeta empty = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
            meta_runtime_of(e->meta ? e->meta : &empty, e->channel_id, e->channel_type, b->ptrs[i]);
            if (!e->meta) /* nothing of empty may be kept */
                ((struct slotd_meta_runtime *)b->ptrs[i])->replicas = NULL;
        }
        p->runtimes = (const struct slotd_meta_runtime *const *)b->ptrs;
        next = l->next_cursor;
        break;
    }
    case SLOTD__V1__READ_RESPONSE__RESULT_LIST_EVENTS:
        rc = meta_page_alloc(b, m->list_events->n_events, sizeof(struct slotd_meta_event));
        for (size_t i = 0; rc == 0 && i < p->count; i++)
            meta_event_of(m->list_events->events[i], b->ptrs[i]);
        p->events = (const struct slotd_meta_event *const *)b->ptrs;
        next = m->list_events->next_cursor;
        break;
    default:
        return SLOTD_CLIENT_EMALFORMED;
    }
    p->next_cursor = next.data;
    p->next_cursor_len = next.len;
    return rc;
}

/* ---- calls --------------------------------------------------------------------------------- */

/* A check made before any call: "OP: no call: FIELD: WHAT". */
static int meta_refuse(const char *op, const char *field, const char *what,
                       struct slotd_error **err)
{
    char msg[SLOTD_STATUS_MESSAGE_LEN];
    snprintf(msg, sizeof(msg), "%s: no call: %s: %s", op, field, what);
    return slotd__refuse(SLOTD_CLIENT_EINVAL, msg, field, err);
}

/* Sends req to the leader of route's group (NULL: a seed endpoint) and unpacks the answer into
 * *propose or *read (whichever is not NULL); st describes a failure. */
static int meta_call(struct slotd_client *c, const char *op, const char *route, bool is_propose,
                     const uint8_t *req, size_t req_len, bool idempotent, unsigned *attempts,
                     Slotd__V1__ProposeResponse **propose, Slotd__V1__ReadResponse **read,
                     struct slotd_status *st)
{
    grpc_slice body;
    int rc = slotd__client_routed_call(c, op, is_propose ? META_METHOD_PROPOSE : META_METHOD_READ,
                                       route, route ? strlen(route) : 0, req, req_len, idempotent,
                                       &body, attempts, st);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    if (is_propose)
        *propose = slotd__v1__propose_response__unpack(NULL, GRPC_SLICE_LENGTH(body),
                                                       GRPC_SLICE_START_PTR(body));
    else
        *read = slotd__v1__read_response__unpack(NULL, GRPC_SLICE_LENGTH(body),
                                                 GRPC_SLICE_START_PTR(body));
    grpc_slice_unref(body);
    if (is_propose ? !*propose : !*read) {
        snprintf(st->message, sizeof(st->message), "%s: response does not decode", op);
        return SLOTD_CLIENT_EMALFORMED;
    }
    return SLOTD_CLIENT_OK;
}

int slotd__meta_propose_encode(Slotd__V1__ProposeRequest *m, const struct slotd_write_options *wo,
                               const uint8_t *random_id, uint8_t **buf, size_t *len)
{
    m->no_forward = true;
    m->request_id = (ProtobufCBinaryData){0, NULL};
    if (wo && wo->has_request_id && !wo->no_request_id)
        m->request_id = (ProtobufCBinaryData){wo->request_id_len, (uint8_t *)wo->request_id};
    else if (!wo || !wo->no_request_id)
        m->request_id = (ProtobufCBinaryData){SLOTD_REQUEST_ID_LEN_DEFAULT, (uint8_t *)random_id};
    return slotd__pack(&m->base, buf, len);
}

/* One typed command: m's command is set by the caller; routed by route (the owner's id). */
static int meta_propose(struct slotd_client *c, const char *op, const char *route,
                        Slotd__V1__ProposeRequest *m, const struct slotd_write_options *wo,
                        struct slotd_meta_result **out, struct slotd_error **err)
{
    *out = NULL;
    struct meta_box *b = calloc(1, sizeof(*b));
    if (!b)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "meta: out of memory", NULL, err);
    struct slotd_status st;
    slotd_call_status_reset(&st);
    uint8_t id[SLOTD_REQUEST_ID_LEN_DEFAULT];
    slotd__client_request_id(c, id, sizeof(id));
    uint8_t *req;
    size_t req_len;
    int rc = slotd__meta_propose_encode(m, wo, id, &req, &req_len);
    if (rc == SLOTD_CLIENT_OK) {
        rc = meta_call(c, op, route, true, req, req_len, m->request_id.len > 0, &b->pub.attempts,
                       &b->propose, NULL, &st);
        free(req);
    } else {
        snprintf(st.message, sizeof(st.message), "%s: out of memory", op);
    }
    if (rc == SLOTD_CLIENT_OK && (int)b->propose->result_case != (int)m->command_case) {
        snprintf(st.message, sizeof(st.message),
                 "%s: response is not a ProposeResponse with a matching result", op);
        rc = SLOTD_CLIENT_EMALFORMED;
    }
    slotd__finish(rc, &st, b->pub.attempts, err);
    if (rc != SLOTD_CLIENT_OK) {
        slotd_meta_result_destroy(&b->pub);
        return rc;
    }
    meta_propose_fill(b);
    *out = &b->pub;
    return SLOTD_CLIENT_OK;
}

/* Packs a ReadRequest with ro's consistency, sends it, checks the result matches its query. */
static int meta_read_send(struct slotd_client *c, const char *op, const char *route,
                          Slotd__V1__ReadRequest *m, const struct slotd_read_options *ro,
                          unsigned *attempts, Slotd__V1__ReadResponse **read,
                          struct slotd_status *st)
{
    slotd_call_status_reset(st);
    m->consistency =
        (Slotd__V1__Consistency)(ro ? ro->consistency : SLOTD_CONSISTENCY_LINEARIZABLE);
    m->min_applied_index = ro ? ro->min_applied_index : 0;
    m->no_forward = route != NULL;
    uint8_t *req;
    size_t len;
    if (slotd__pack(&m->base, &req, &len) != SLOTD_CLIENT_OK) {
        snprintf(st->message, sizeof(st->message), "%s: out of memory", op);
        return SLOTD_CLIENT_ENOMEM;
    }
    int rc = meta_call(c, op, route, false, req, len, true, attempts, NULL, read, st);
    free(req);
    if (rc == SLOTD_CLIENT_OK && (int)(*read)->result_case != (int)m->query_case) {
        snprintf(st->message, sizeof(st->message),
                 "%s: response is not a ReadResponse with a matching result", op);
        rc = SLOTD_CLIENT_EMALFORMED;
    }
    return rc;
}

/* One get or check. */
static int meta_get(struct slotd_client *c, const char *op, const char *route,
                    Slotd__V1__ReadRequest *m, const struct slotd_read_options *ro,
                    struct slotd_meta_result **out, struct slotd_error **err)
{
    *out = NULL;
    struct meta_box *b = calloc(1, sizeof(*b));
    if (!b)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "meta: out of memory", NULL, err);
    struct slotd_status st;
    int rc = meta_read_send(c, op, route, m, ro, &b->pub.attempts, &b->read, &st);
    slotd__finish(rc, &st, b->pub.attempts, err);
    if (rc != SLOTD_CLIENT_OK) {
        slotd_meta_result_destroy(&b->pub);
        return rc;
    }
    meta_read_fill(b);
    *out = &b->pub;
    return SLOTD_CLIENT_OK;
}

/* One page of a listing. */
static int meta_list(struct slotd_client *c, const char *op, const char *route,
                     Slotd__V1__ReadRequest *m, const struct slotd_read_options *ro,
                     struct slotd_meta_page **out, struct slotd_error **err)
{
    *out = NULL;
    struct meta_page_box *b = calloc(1, sizeof(*b));
    if (!b)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "meta: out of memory", NULL, err);
    struct slotd_status st;
    int rc = meta_read_send(c, op, route, m, ro, &b->pub.attempts, &b->read, &st);
    if (rc == SLOTD_CLIENT_OK) {
        rc = meta_page_fill(b);
        if (rc != SLOTD_CLIENT_OK)
            snprintf(st.message, sizeof(st.message), "%s: %s", op, slotd_client_strerror(rc));
    }
    slotd__finish(rc, &st, b->pub.attempts, err);
    if (rc != SLOTD_CLIENT_OK) {
        slotd_meta_page_destroy(&b->pub);
        return rc;
    }
    *out = &b->pub;
    return SLOTD_CLIENT_OK;
}

#define META_NEED(str, op, field)                                                                  \
    do {                                                                                           \
        if (!(str))                                                                                \
            return (*out = NULL, meta_refuse(op, field, "NULL", err));                             \
    } while (0)

#define META_CURSOR(cursor, len) ((ProtobufCBinaryData){(cursor) ? (len) : 0, (uint8_t *)(cursor)})

/* ---- flat commands and queries ------------------------------------------------------------- */

/* One field of a flat command or query (one whose fields are strings, numbers, enums, bools and
 * bytes), set by its proto name: str for a string (NULL is refused), num for a number, enum or
 * bool, data and len for bytes. Borrowed for the call. */
struct meta_arg {
    const char *name;
    const char *str;
    uint64_t num;
    const void *data;
    size_t len;
};

#define META_STR(name, v)                                                                          \
    {                                                                                              \
        name, (v), 0, NULL, 0                                                                      \
    }
#define META_NUM(name, v)                                                                          \
    {                                                                                              \
        name, NULL, (uint64_t)(v), NULL, 0                                                         \
    }
#define META_PAGE(cursor, cursor_len, limit)                                                       \
    {"cursor", NULL, 0, (cursor), (cursor) ? (cursor_len) : 0}, META_NUM("limit", limit)
#define META_ARGS(a) (a), (sizeof(a) / sizeof((a)[0]))

/* Storage for the one flat message of a call; every flat message fits (meta_build asserts it). */
typedef union {
    max_align_t align;
    unsigned char bytes[256];
} meta_sub;

/* Fills sub with the message of req's oneof field number oneof_case, sets args in it and points
 * req's oneof at it. Returns 0, or refuses the first NULL string: "OP: no call: ONEOF.FIELD: NULL".
 */
static int meta_build(ProtobufCMessage *req, int oneof_case, meta_sub *sub, const char *op,
                      const struct meta_arg *args, size_t n, struct slotd_error **err)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(req->descriptor, (unsigned)oneof_case);
    assert(f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f->type == PROTOBUF_C_TYPE_MESSAGE);
    const ProtobufCMessageDescriptor *d = f->descriptor;
    assert(d->sizeof_message <= sizeof(*sub));
    protobuf_c_message_init(d, sub);
    for (size_t i = 0; i < n; i++) {
        const ProtobufCFieldDescriptor *a =
            protobuf_c_message_descriptor_get_field_by_name(d, args[i].name);
        assert(a && a->label != PROTOBUF_C_LABEL_REPEATED);
        char *at = (char *)sub + a->offset;
        switch (a->type) {
        case PROTOBUF_C_TYPE_STRING:
            if (!args[i].str) {
                char field[SLOTD_FIELD_LEN];
                snprintf(field, sizeof(field), "%s.%s", f->name, a->name);
                return meta_refuse(op, field, "NULL", err);
            }
            *(char **)at = (char *)args[i].str;
            break;
        case PROTOBUF_C_TYPE_UINT32:
            *(uint32_t *)at = (uint32_t)args[i].num;
            break;
        case PROTOBUF_C_TYPE_UINT64:
            *(uint64_t *)at = args[i].num;
            break;
        case PROTOBUF_C_TYPE_ENUM:
            *(int *)at = (int)args[i].num;
            break;
        case PROTOBUF_C_TYPE_BOOL:
            *(protobuf_c_boolean *)at = args[i].num != 0;
            break;
        default:
            assert(a->type == PROTOBUF_C_TYPE_BYTES);
            *(ProtobufCBinaryData *)at =
                (ProtobufCBinaryData){args[i].len, (uint8_t *)args[i].data};
            break;
        }
    }
    *(uint32_t *)((char *)req + f->quantifier_offset) = (uint32_t)oneof_case;
    *(ProtobufCMessage **)((char *)req + f->offset) = (ProtobufCMessage *)sub;
    return SLOTD_CLIENT_OK;
}

/* How a flat call is sent. */
enum meta_send { META_SEND_PROPOSE, META_SEND_GET, META_SEND_LIST };

/* One flat command (wo, into *out), get (ro, into *out) or listing (ro, into *page): oneof_case
 * of the ProposeRequest or ReadRequest, args set by meta_build, routed by route (NULL: a seed). */
static int meta_flat(struct slotd_client *c, const char *op, enum meta_send send, int oneof_case,
                     const char *route, const struct meta_arg *args, size_t n,
                     const struct slotd_read_options *ro, const struct slotd_write_options *wo,
                     struct slotd_meta_result **out, struct slotd_meta_page **page,
                     struct slotd_error **err)
{
    Slotd__V1__ProposeRequest p = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__ReadRequest r = SLOTD__V1__READ_REQUEST__INIT;
    meta_sub sub;
    if (out)
        *out = NULL;
    if (page)
        *page = NULL;
    bool propose = send == META_SEND_PROPOSE;
    int rc = meta_build(propose ? &p.base : &r.base, oneof_case, &sub, op, args, n, err);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    if (propose)
        return meta_propose(c, op, route, &p, wo, out, err);
    if (send == META_SEND_GET)
        return meta_get(c, op, route, &r, ro, out, err);
    return meta_list(c, op, route, &r, ro, page, err);
}

#define META_PROPOSE(cc) META_SEND_PROPOSE, SLOTD__V1__PROPOSE_REQUEST__COMMAND_##cc
#define META_GET(qc) META_SEND_GET, SLOTD__V1__READ_REQUEST__QUERY_##qc
#define META_LIST(qc) META_SEND_LIST, SLOTD__V1__READ_REQUEST__QUERY_##qc

/* ---- users and devices --------------------------------------------------------------------- */

static int meta_user_write(struct slotd_client *c, bool create, const char *uid, const char *token,
                           uint32_t device_flag, uint32_t device_level,
                           const struct slotd_write_options *wo, struct slotd_meta_result **out,
                           struct slotd_error **err)
{
    const char *op = create ? "user create" : "user update";
    META_NEED(uid, op, create ? "create_user.user.uid" : "update_user.user.uid");
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__CreateUserCommand cu = SLOTD__V1__CREATE_USER_COMMAND__INIT;
    Slotd__V1__UpdateUserCommand uu = SLOTD__V1__UPDATE_USER_COMMAND__INIT;
    Slotd__V1__User u = SLOTD__V1__USER__INIT;
    u.uid = (char *)uid;
    u.token = (char *)(token ? token : "");
    u.device_flag = device_flag;
    u.device_level = device_level;
    if (create) {
        cu.user = &u;
        m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_CREATE_USER;
        m.create_user = &cu;
    } else {
        uu.user = &u;
        m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_UPDATE_USER;
        m.update_user = &uu;
    }
    return meta_propose(c, op, uid, &m, wo, out, err);
}

int slotd_client_user_create(struct slotd_client *c, const char *uid, const char *token,
                             uint32_t device_flag, uint32_t device_level,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err)
{
    return meta_user_write(c, true, uid, token, device_flag, device_level, wo, out, err);
}

int slotd_client_user_update(struct slotd_client *c, const char *uid, const char *token,
                             uint32_t device_flag, uint32_t device_level,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err)
{
    return meta_user_write(c, false, uid, token, device_flag, device_level, wo, out, err);
}

int slotd_client_user_get(struct slotd_client *c, const char *uid,
                          const struct slotd_read_options *ro, struct slotd_meta_result **out,
                          struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid)};
    return meta_flat(c, "user get", META_GET(GET_USER), uid, META_ARGS(a), ro, NULL, out, NULL,
                     err);
}

int slotd_client_user_delete(struct slotd_client *c, const char *uid,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid)};
    return meta_flat(c, "user delete", META_PROPOSE(DELETE_USER), uid, META_ARGS(a), NULL, wo, out,
                     NULL, err);
}

int slotd_client_user_set_system(struct slotd_client *c, const char *uid, bool system,
                                 const struct slotd_write_options *wo,
                                 struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_NUM("system", system)};
    return meta_flat(c, "user set system", META_PROPOSE(SET_SYSTEM_UID), uid, META_ARGS(a), NULL,
                     wo, out, NULL, err);
}

int slotd_client_system_uids_list(struct slotd_client *c, const void *cursor, size_t cursor_len,
                                  uint32_t limit, const struct slotd_read_options *ro,
                                  struct slotd_meta_page **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_PAGE(cursor, cursor_len, limit)};
    return meta_flat(c, "user list", META_LIST(LIST_SYSTEM_UIDS), NULL, META_ARGS(a), ro, NULL,
                     NULL, out, err);
}

int slotd_client_device_put(struct slotd_client *c, const char *uid, uint32_t device_flag,
                            const char *token, uint32_t device_level,
                            const struct slotd_write_options *wo, struct slotd_meta_result **out,
                            struct slotd_error **err)
{
    META_NEED(uid, "device put", "put_device.device.uid");
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__PutDeviceCommand p = SLOTD__V1__PUT_DEVICE_COMMAND__INIT;
    Slotd__V1__Device d = SLOTD__V1__DEVICE__INIT;
    d.uid = (char *)uid;
    d.device_flag = device_flag;
    d.token = (char *)(token ? token : "");
    d.device_level = device_level;
    p.device = &d;
    m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT_DEVICE;
    m.put_device = &p;
    return meta_propose(c, "device put", uid, &m, wo, out, err);
}

int slotd_client_device_list(struct slotd_client *c, const char *uid, const void *cursor,
                             size_t cursor_len, uint32_t limit, const struct slotd_read_options *ro,
                             struct slotd_meta_page **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_PAGE(cursor, cursor_len, limit)};
    return meta_flat(c, "device list", META_LIST(LIST_DEVICES), uid, META_ARGS(a), ro, NULL, NULL,
                     out, err);
}

int slotd_client_device_delete(struct slotd_client *c, const char *uid, uint32_t device_flag,
                               const struct slotd_write_options *wo, struct slotd_meta_result **out,
                               struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_NUM("device_flag", device_flag)};
    return meta_flat(c, "device delete", META_PROPOSE(REMOVE_DEVICE), uid, META_ARGS(a), NULL, wo,
                     out, NULL, err);
}

/* ---- channels and members ------------------------------------------------------------------ */

int slotd_client_channel_create(struct slotd_client *c, const char *channel_id,
                                uint32_t channel_type, uint32_t flags, uint32_t event_capacity,
                                const struct slotd_write_options *wo,
                                struct slotd_meta_result **out, struct slotd_error **err)
{
    META_NEED(channel_id, "channel create", "create_channel.channel_id");
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__CreateChannelCommand cc = SLOTD__V1__CREATE_CHANNEL_COMMAND__INIT;
    Slotd__V1__ChannelFlags f = SLOTD__V1__CHANNEL_FLAGS__INIT;
    meta_flags_to(flags, &f);
    cc.channel_id = (char *)channel_id;
    cc.channel_type = channel_type;
    cc.flags = &f;
    cc.event_capacity = event_capacity;
    m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_CREATE_CHANNEL;
    m.create_channel = &cc;
    return meta_propose(c, "channel create", channel_id, &m, wo, out, err);
}

int slotd_client_channel_get(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                             const struct slotd_read_options *ro, struct slotd_meta_result **out,
                             struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type)};
    return meta_flat(c, "channel get", META_GET(GET_CHANNEL), channel_id, META_ARGS(a), ro, NULL,
                     out, NULL, err);
}

int slotd_client_channel_set_flags(struct slotd_client *c, const char *channel_id,
                                   uint32_t channel_type, uint32_t flags,
                                   const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err)
{
    META_NEED(channel_id, "channel flags", "update_channel_flags.channel_id");
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__UpdateChannelFlagsCommand u = SLOTD__V1__UPDATE_CHANNEL_FLAGS_COMMAND__INIT;
    Slotd__V1__ChannelFlags f = SLOTD__V1__CHANNEL_FLAGS__INIT;
    meta_flags_to(flags, &f);
    u.channel_id = (char *)channel_id;
    u.channel_type = channel_type;
    u.flags = &f;
    m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_UPDATE_CHANNEL_FLAGS;
    m.update_channel_flags = &u;
    return meta_propose(c, "channel flags", channel_id, &m, wo, out, err);
}

int slotd_client_channel_delete(struct slotd_client *c, const char *channel_id,
                                uint32_t channel_type, const struct slotd_write_options *wo,
                                struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type)};
    return meta_flat(c, "channel delete", META_PROPOSE(DELETE_CHANNEL), channel_id, META_ARGS(a),
                     NULL, wo, out, NULL, err);
}

int slotd_client_channel_list(struct slotd_client *c, const char *id_prefix, uint32_t channel_type,
                              const void *cursor, size_t cursor_len, uint32_t limit,
                              const struct slotd_read_options *ro, struct slotd_meta_page **out,
                              struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("id_prefix", id_prefix ? id_prefix : ""),
                                 META_NUM("channel_type", channel_type),
                                 META_PAGE(cursor, cursor_len, limit)};
    return meta_flat(c, "channel list", META_LIST(LIST_CHANNELS), NULL, META_ARGS(a), ro, NULL,
                     NULL, out, err);
}

/* The command case of adding to or removing from list, and its name ("add_subscribers"). */
static int meta_members_case(enum slotd_member_list list, bool add, const char **name)
{
    switch (list) {
    case SLOTD_MEMBER_LIST_SUBSCRIBERS:
        *name = add ? "add_subscribers" : "remove_subscribers";
        return add ? SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_SUBSCRIBERS
                   : SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_SUBSCRIBERS;
    case SLOTD_MEMBER_LIST_ALLOWLIST:
        *name = add ? "add_allowlist" : "remove_allowlist";
        return add ? SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_ALLOWLIST
                   : SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_ALLOWLIST;
    case SLOTD_MEMBER_LIST_DENYLIST:
        *name = add ? "add_denylist" : "remove_denylist";
        return add ? SLOTD__V1__PROPOSE_REQUEST__COMMAND_ADD_DENYLIST
                   : SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_DENYLIST;
    default:
        *name = add ? "members add" : "members remove";
        return 0;
    }
}

/* Builds the add/remove command of list into m (its parts in sub and cl, uids borrowed).
 * Returns 0, or SLOTD_CLIENT_EINVAL with the field and a sentence in field/what. */
int slotd__meta_members_build(Slotd__V1__ProposeRequest *m, Slotd__V1__SubscribersCommand *sub,
                              Slotd__V1__ChannelListCommand *cl, const char *channel_id,
                              uint32_t channel_type, enum slotd_member_list list, bool add,
                              const char *const *uids, size_t uid_count, uint64_t expected_version,
                              char *field, size_t field_len, char *what, size_t what_len)
{
    const char *name;
    int command_case = meta_members_case(list, add, &name);
    if (command_case == 0) {
        snprintf(field, field_len, "list");
        snprintf(what, what_len, "%d is not a member list (1 subscribers, 2 allowlist, 3 denylist)",
                 (int)list);
        return SLOTD_CLIENT_EINVAL;
    }
    if (!channel_id) {
        snprintf(field, field_len, "%s.channel_id", name);
        snprintf(what, what_len, "NULL");
        return SLOTD_CLIENT_EINVAL;
    }
    if (uid_count == 0 || uid_count > SLOTD_META_UIDS_MAX || !uids) {
        snprintf(field, field_len, "%s.uids", name);
        snprintf(what, what_len, "%zu entries, want 1..%d", uid_count, SLOTD_META_UIDS_MAX);
        return SLOTD_CLIENT_EINVAL;
    }
    for (size_t i = 0; i < uid_count; i++)
        if (!uids[i]) {
            snprintf(field, field_len, "%s.uids", name);
            snprintf(what, what_len, "entry %zu is NULL", i);
            return SLOTD_CLIENT_EINVAL;
        }
    if (expected_version && list != SLOTD_MEMBER_LIST_SUBSCRIBERS) {
        snprintf(field, field_len, "%s.expected_version", name);
        snprintf(what, what_len, "only subscriber lists are versioned (got %llu)",
                 (unsigned long long)expected_version);
        return SLOTD_CLIENT_EINVAL;
    }
    m->command_case = (Slotd__V1__ProposeRequest__CommandCase)command_case;
    if (list == SLOTD_MEMBER_LIST_SUBSCRIBERS) {
        sub->channel_id = (char *)channel_id;
        sub->channel_type = channel_type;
        sub->expected_version = expected_version;
        sub->uids = (char **)uids;
        sub->n_uids = uid_count;
        if (add)
            m->add_subscribers = sub;
        else
            m->remove_subscribers = sub;
    } else {
        cl->channel_id = (char *)channel_id;
        cl->channel_type = channel_type;
        cl->uids = (char **)uids;
        cl->n_uids = uid_count;
        /* the four list commands share one message and one union slot */
        m->add_allowlist = cl;
    }
    return SLOTD_CLIENT_OK;
}

static int meta_members_change(struct slotd_client *c, bool add, const char *channel_id,
                               uint32_t channel_type, enum slotd_member_list list,
                               const char *const *uids, size_t uid_count, uint64_t expected_version,
                               const struct slotd_write_options *wo, struct slotd_meta_result **out,
                               struct slotd_error **err)
{
    const char *op = add ? "member add" : "member remove";
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__SubscribersCommand sub = SLOTD__V1__SUBSCRIBERS_COMMAND__INIT;
    Slotd__V1__ChannelListCommand cl = SLOTD__V1__CHANNEL_LIST_COMMAND__INIT;
    char field[SLOTD_FIELD_LEN], what[SLOTD_STATUS_MESSAGE_LEN / 2];
    *out = NULL;
    if (slotd__meta_members_build(&m, &sub, &cl, channel_id, channel_type, list, add, uids,
                                  uid_count, expected_version, field, sizeof(field), what,
                                  sizeof(what)) != SLOTD_CLIENT_OK) {
        int rc = meta_refuse(op, field, what, err);
        return rc;
    }
    return meta_propose(c, op, channel_id, &m, wo, out, err);
}

int slotd_client_members_add(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                             enum slotd_member_list list, const char *const *uids, size_t uid_count,
                             uint64_t expected_version, const struct slotd_write_options *wo,
                             struct slotd_meta_result **out, struct slotd_error **err)
{
    return meta_members_change(c, true, channel_id, channel_type, list, uids, uid_count,
                               expected_version, wo, out, err);
}

int slotd_client_members_remove(struct slotd_client *c, const char *channel_id,
                                uint32_t channel_type, enum slotd_member_list list,
                                const char *const *uids, size_t uid_count,
                                uint64_t expected_version, const struct slotd_write_options *wo,
                                struct slotd_meta_result **out, struct slotd_error **err)
{
    return meta_members_change(c, false, channel_id, channel_type, list, uids, uid_count,
                               expected_version, wo, out, err);
}

static bool meta_list_ok(enum slotd_member_list list)
{
    return list >= SLOTD_MEMBER_LIST_SUBSCRIBERS && list <= SLOTD_MEMBER_LIST_DENYLIST;
}

int slotd_client_members_list(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                              enum slotd_member_list list, const void *cursor, size_t cursor_len,
                              uint32_t limit, const struct slotd_read_options *ro,
                              struct slotd_meta_page **out, struct slotd_error **err)
{
    META_NEED(channel_id, "member list", "list_members.channel_id");
    if (!meta_list_ok(list))
        return meta_refuse("member list", "list_members.list", "not 1..3", err);
    Slotd__V1__ReadRequest m = SLOTD__V1__READ_REQUEST__INIT;
    Slotd__V1__ListMembersQuery q = SLOTD__V1__LIST_MEMBERS_QUERY__INIT;
    q.channel_id = (char *)channel_id;
    q.channel_type = channel_type;
    q.list = (Slotd__V1__MemberList)list;
    q.cursor = META_CURSOR(cursor, cursor_len);
    q.limit = limit;
    m.query_case = SLOTD__V1__READ_REQUEST__QUERY_LIST_MEMBERS;
    m.list_members = &q;
    return meta_list(c, "member list", channel_id, &m, ro, out, err);
}

int slotd_client_member_check(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                              enum slotd_member_list list, const char *uid,
                              const struct slotd_read_options *ro, struct slotd_meta_result **out,
                              struct slotd_error **err)
{
    META_NEED(channel_id, "member check", "check_member.channel_id");
    META_NEED(uid, "member check", "check_member.uid");
    if (!meta_list_ok(list))
        return meta_refuse("member check", "check_member.list", "not 1..3", err);
    Slotd__V1__ReadRequest m = SLOTD__V1__READ_REQUEST__INIT;
    Slotd__V1__CheckMemberQuery q = SLOTD__V1__CHECK_MEMBER_QUERY__INIT;
    q.channel_id = (char *)channel_id;
    q.channel_type = channel_type;
    q.list = (Slotd__V1__MemberList)list;
    q.uid = (char *)uid;
    m.query_case = SLOTD__V1__READ_REQUEST__QUERY_CHECK_MEMBER;
    m.check_member = &q;
    return meta_get(c, "member check", channel_id, &m, ro, out, err);
}

/* ---- conversations and CMD bindings -------------------------------------------------------- */

int slotd_client_conversation_join(struct slotd_client *c, const char *uid, const char *channel_id,
                                   uint32_t channel_type, uint64_t join_seq,
                                   uint64_t activated_at_ms, const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type),
                                 META_NUM("join_seq", join_seq),
                                 META_NUM("activated_at_ms", activated_at_ms)};
    return meta_flat(c, "conversation join", META_PROPOSE(JOIN_CHANNEL), uid, META_ARGS(a), NULL,
                     wo, out, NULL, err);
}

int slotd_client_conversation_leave(struct slotd_client *c, const char *uid, const char *channel_id,
                                    uint32_t channel_type, const struct slotd_write_options *wo,
                                    struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type)};
    return meta_flat(c, "conversation leave", META_PROPOSE(LEAVE_CHANNEL), uid, META_ARGS(a), NULL,
                     wo, out, NULL, err);
}

int slotd_client_conversation_read(struct slotd_client *c, const char *uid, const char *channel_id,
                                   uint32_t channel_type, uint64_t read_seq,
                                   const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type),
                                 META_NUM("read_seq", read_seq)};
    return meta_flat(c, "conversation read", META_PROPOSE(MARK_READ), uid, META_ARGS(a), NULL, wo,
                     out, NULL, err);
}

int slotd_client_conversation_hide(struct slotd_client *c, const char *uid, const char *channel_id,
                                   uint32_t channel_type, uint64_t hide_through_seq,
                                   const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type),
                                 META_NUM("hide_through_seq", hide_through_seq)};
    return meta_flat(c, "conversation hide", META_PROPOSE(HIDE_CONVERSATION), uid, META_ARGS(a),
                     NULL, wo, out, NULL, err);
}

int slotd_client_conversation_activate(struct slotd_client *c, const char *uid,
                                       const char *channel_id, uint32_t channel_type,
                                       uint64_t activated_at_ms,
                                       const struct slotd_write_options *wo,
                                       struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type),
                                 META_NUM("activated_at_ms", activated_at_ms)};
    return meta_flat(c, "conversation activate", META_PROPOSE(ACTIVATE_CONVERSATION), uid,
                     META_ARGS(a), NULL, wo, out, NULL, err);
}

int slotd_client_conversation_get(struct slotd_client *c, const char *uid, const char *channel_id,
                                  uint32_t channel_type, const struct slotd_read_options *ro,
                                  struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type)};
    return meta_flat(c, "conversation get", META_GET(GET_MEMBERSHIP), uid, META_ARGS(a), ro, NULL,
                     out, NULL, err);
}

int slotd_client_conversation_list(struct slotd_client *c, const char *uid, const void *cursor,
                                   size_t cursor_len, uint32_t limit,
                                   const struct slotd_read_options *ro,
                                   struct slotd_meta_page **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_PAGE(cursor, cursor_len, limit)};
    return meta_flat(c, "conversation list", META_LIST(LIST_CONVERSATIONS), uid, META_ARGS(a), ro,
                     NULL, NULL, out, err);
}

int slotd_client_cmd_bind(struct slotd_client *c, const char *uid, const char *channel_id,
                          uint32_t channel_type, uint64_t start_seq,
                          const struct slotd_write_options *wo, struct slotd_meta_result **out,
                          struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type),
                                 META_NUM("start_seq", start_seq)};
    return meta_flat(c, "cmd bind", META_PROPOSE(BIND_CMD), uid, META_ARGS(a), NULL, wo, out, NULL,
                     err);
}

int slotd_client_cmd_ack(struct slotd_client *c, const char *uid, const char *channel_id,
                         uint32_t channel_type, uint64_t ack_seq,
                         const struct slotd_write_options *wo, struct slotd_meta_result **out,
                         struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type),
                                 META_NUM("ack_seq", ack_seq)};
    return meta_flat(c, "cmd ack", META_PROPOSE(ACK_CMD), uid, META_ARGS(a), NULL, wo, out, NULL,
                     err);
}

int slotd_client_cmd_unbind(struct slotd_client *c, const char *uid, const char *channel_id,
                            uint32_t channel_type, const struct slotd_write_options *wo,
                            struct slotd_meta_result **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type)};
    return meta_flat(c, "cmd unbind", META_PROPOSE(UNBIND_CMD), uid, META_ARGS(a), NULL, wo, out,
                     NULL, err);
}

/* ---- runtime meta -------------------------------------------------------------------------- */

struct slotd_runtime_update *slotd_runtime_update_create(void)
{
    return calloc(1, sizeof(struct slotd_runtime_update));
}

void slotd_runtime_update_destroy(struct slotd_runtime_update *u)
{
    free(u);
}

void slotd_runtime_update_set_expected(struct slotd_runtime_update *u, uint64_t channel_epoch,
                                       uint64_t leader_epoch, uint64_t leader)
{
    u->expected_channel_epoch = channel_epoch;
    u->expected_leader_epoch = leader_epoch;
    u->expected_leader = leader;
}

int slotd_runtime_update_set_members(struct slotd_runtime_update *u, uint64_t leader,
                                     const uint64_t *replicas, size_t replica_count,
                                     const uint64_t *isr, size_t isr_count)
{
    if (replica_count > META_RUNTIME_NODES_MAX || isr_count > META_RUNTIME_NODES_MAX ||
        (!replicas && replica_count) || (!isr && isr_count))
        return SLOTD_CLIENT_EINVAL;
    u->leader = leader;
    if (replica_count)
        memcpy(u->replicas, replicas, replica_count * sizeof(uint64_t));
    if (isr_count)
        memcpy(u->isr, isr, isr_count * sizeof(uint64_t));
    u->replica_count = replica_count;
    u->isr_count = isr_count;
    return SLOTD_CLIENT_OK;
}

void slotd_runtime_update_set_epochs(struct slotd_runtime_update *u, uint64_t channel_epoch,
                                     uint64_t leader_epoch, uint64_t write_fence)
{
    u->channel_epoch = channel_epoch;
    u->leader_epoch = leader_epoch;
    u->write_fence = write_fence;
}

void slotd_runtime_update_set_lease(struct slotd_runtime_update *u, uint64_t lease_until_ms,
                                    uint32_t min_isr)
{
    u->lease_until_ms = lease_until_ms;
    u->min_isr = min_isr;
}

void slotd_runtime_update_set_status(struct slotd_runtime_update *u, int status, uint64_t features)
{
    u->status = status;
    u->features = features;
}

void slotd_runtime_update_set_retention(struct slotd_runtime_update *u,
                                        uint64_t retention_through_seq)
{
    u->retention_through_seq = retention_through_seq;
}

/* Labels r's runtime meta with the channel it was asked for; SLOTD_CLIENT_ENOMEM destroys r. */
static int meta_runtime_label(struct slotd_meta_result **r, const char *channel_id,
                              uint32_t channel_type, struct slotd_error **err)
{
    struct meta_box *b = (struct meta_box *)*r;
    if (!b->pub.runtime)
        return SLOTD_CLIENT_OK;
    b->label = strdup(channel_id);
    if (!b->label) {
        slotd_meta_result_destroy(*r);
        *r = NULL;
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "runtime: out of memory", NULL, err);
    }
    b->runtime.channel_id = b->label;
    b->runtime.channel_type = channel_type;
    return SLOTD_CLIENT_OK;
}

int slotd_client_runtime_get(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                             const struct slotd_read_options *ro, struct slotd_meta_result **out,
                             struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("channel_id", channel_id),
                                 META_NUM("channel_type", channel_type)};
    int rc = meta_flat(c, "runtime get", META_GET(GET_RUNTIME_META), channel_id, META_ARGS(a), ro,
                       NULL, out, NULL, err);
    return rc == SLOTD_CLIENT_OK ? meta_runtime_label(out, channel_id, channel_type, err) : rc;
}

int slotd_client_runtime_set(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                             const struct slotd_runtime_update *u,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err)
{
    META_NEED(channel_id, "runtime set", "update_runtime_meta.channel_id");
    META_NEED(u, "runtime set", "update_runtime_meta.meta");
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__UpdateRuntimeMetaCommand cmd = SLOTD__V1__UPDATE_RUNTIME_META_COMMAND__INIT;
    Slotd__V1__ChannelRuntimeMeta meta = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    meta.leader = u->leader;
    meta.replicas = (uint64_t *)u->replicas;
    meta.n_replicas = u->replica_count;
    meta.isr = (uint64_t *)u->isr;
    meta.n_isr = u->isr_count;
    meta.channel_epoch = u->channel_epoch;
    meta.leader_epoch = u->leader_epoch;
    meta.write_fence = u->write_fence;
    meta.retention_through_seq = u->retention_through_seq;
    meta.lease_until_ms = u->lease_until_ms;
    meta.min_isr = u->min_isr;
    meta.status = (Slotd__V1__ChannelStatus)u->status;
    meta.features = u->features;
    cmd.channel_id = (char *)channel_id;
    cmd.channel_type = channel_type;
    cmd.expected_channel_epoch = u->expected_channel_epoch;
    cmd.expected_leader_epoch = u->expected_leader_epoch;
    cmd.expected_leader = u->expected_leader;
    cmd.meta = &meta;
    m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_UPDATE_RUNTIME_META;
    m.update_runtime_meta = &cmd;
    int rc = meta_propose(c, "runtime set", channel_id, &m, wo, out, err);
    return rc == SLOTD_CLIENT_OK ? meta_runtime_label(out, channel_id, channel_type, err) : rc;
}

int slotd_client_runtime_list(struct slotd_client *c, uint64_t leader, const void *cursor,
                              size_t cursor_len, uint32_t limit,
                              const struct slotd_read_options *ro, struct slotd_meta_page **out,
                              struct slotd_error **err)
{
    const struct meta_arg a[] = {META_NUM("leader", leader), META_PAGE(cursor, cursor_len, limit)};
    return meta_flat(c, "runtime list", META_LIST(LIST_RUNTIME_META), NULL, META_ARGS(a), ro, NULL,
                     NULL, out, err);
}

/* ---- plugin bindings and events ------------------------------------------------------------ */

int slotd_client_plugin_bind(struct slotd_client *c, const char *uid, const char *plugin_no,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid), META_STR("plugin_no", plugin_no)};
    return meta_flat(c, "plugin bind", META_PROPOSE(BIND_PLUGIN), uid, META_ARGS(a), NULL, wo, out,
                     NULL, err);
}

int slotd_client_plugin_get(struct slotd_client *c, const char *uid,
                            const struct slotd_read_options *ro, struct slotd_meta_result **out,
                            struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid)};
    return meta_flat(c, "plugin get", META_GET(GET_PLUGIN_BINDING), uid, META_ARGS(a), ro, NULL,
                     out, NULL, err);
}

int slotd_client_plugin_unbind(struct slotd_client *c, const char *uid,
                               const struct slotd_write_options *wo, struct slotd_meta_result **out,
                               struct slotd_error **err)
{
    const struct meta_arg a[] = {META_STR("uid", uid)};
    return meta_flat(c, "plugin unbind", META_PROPOSE(UNBIND_PLUGIN), uid, META_ARGS(a), NULL, wo,
                     out, NULL, err);
}

int slotd_client_event_append(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                              uint64_t message_seq, const char *event_type, const void *payload,
                              size_t payload_len, const struct slotd_write_options *wo,
                              struct slotd_meta_result **out, struct slotd_error **err)
{
    META_NEED(channel_id, "event append", "append_event.channel_id");
    META_NEED(event_type, "event append", "append_event.event_type");
    if (!payload && payload_len)
        return (*out = NULL, meta_refuse("event append", "append_event.payload",
                                         "NULL with a non-zero length", err));
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__AppendEventCommand a = SLOTD__V1__APPEND_EVENT_COMMAND__INIT;
    a.channel_id = (char *)channel_id;
    a.channel_type = channel_type;
    a.message_seq = message_seq;
    a.event_type = (char *)event_type;
    a.payload = (ProtobufCBinaryData){payload_len, (uint8_t *)payload};
    m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_APPEND_EVENT;
    m.append_event = &a;
    return meta_propose(c, "event append", channel_id, &m, wo, out, err);
}

int slotd_client_event_list(struct slotd_client *c, const char *channel_id, uint32_t channel_type,
                            uint64_t after_seq, const void *cursor, size_t cursor_len,
                            uint32_t limit, const struct slotd_read_options *ro,
                            struct slotd_meta_page **out, struct slotd_error **err)
{
    const struct meta_arg a[] = {
        META_STR("channel_id", channel_id), META_NUM("channel_type", channel_type),
        META_NUM("after_seq", after_seq), META_PAGE(cursor, cursor_len, limit)};
    return meta_flat(c, "event list", META_LIST(LIST_EVENTS), channel_id, META_ARGS(a), ro, NULL,
                     NULL, out, err);
}
