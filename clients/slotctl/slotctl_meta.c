/* slotctl_meta.c - slotctl's typed metadata commands over libslotd's typed helpers: tables by
 * default, one JSON object with --json. */
#include "slotctl_cmds.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The row kinds a command prints. */
enum meta_kind {
    K_USER,
    K_DEVICE,
    K_CHANNEL,
    K_MEMBERSHIP,
    K_CMD,
    K_RUNTIME,
    K_PLUGIN,
    K_EVENT,
    K_UID
};

#define META_COLS_MAX 13
#define META_CELL_LEN 96

static const char *const meta_headers[][META_COLS_MAX] = {
    [K_USER] = {"UID", "TOKEN", "DEVICE_FLAG", "DEVICE_LEVEL"},
    [K_DEVICE] = {"UID", "DEVICE_FLAG", "DEVICE_LEVEL", "TOKEN"},
    [K_CHANNEL] = {"CHANNEL", "TYPE", "FLAGS", "SUBSCRIBERS", "SUBSCRIBER_VERSION",
                   "EVENT_CAPACITY", "EVENT_NEXT_SEQ"},
    [K_MEMBERSHIP] = {"UID", "CHANNEL", "TYPE", "JOIN_SEQ", "READ_SEQ", "HIDE_THROUGH_SEQ",
                      "ACTIVATED_AT_MS", "HIDDEN", "LEFT"},
    [K_CMD] = {"UID", "CHANNEL", "TYPE", "START_SEQ", "ACK_SEQ", "UNBOUND"},
    [K_RUNTIME] = {"CHANNEL", "TYPE", "LEADER", "REPLICAS", "ISR", "CHANNEL_EPOCH", "LEADER_EPOCH",
                   "WRITE_FENCE", "LEASE_UNTIL_MS", "MIN_ISR", "STATUS", "FEATURES",
                   "RETENTION_THROUGH_SEQ"},
    [K_PLUGIN] = {"UID", "PLUGIN_NO"},
    [K_EVENT] = {"CHANNEL", "TYPE", "EVENT_SEQ", "MESSAGE_SEQ", "EVENT_TYPE", "PAYLOAD"},
    [K_UID] = {"UID"},
};

static const char *meta_status_name(int status)
{
    switch (status) {
    case SLOTD_CHANNEL_STATUS_CREATING:
        return "creating";
    case SLOTD_CHANNEL_STATUS_ACTIVE:
        return "active";
    case SLOTD_CHANNEL_STATUS_DELETING:
        return "deleting";
    default:
        return "unspecified";
    }
}

static const char *meta_list_name(int list)
{
    return list == SLOTD_MEMBER_LIST_ALLOWLIST  ? "allowlist"
           : list == SLOTD_MEMBER_LIST_DENYLIST ? "denylist"
                                                : "subscribers";
}

/* "1,2,3" ("-" when empty). */
static void meta_nodes_text(const uint64_t *v, size_t n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%" PRIu64, i ? "," : "", v[i]);
    if (n == 0)
        snprintf(out, len, "-");
}

static json_t *meta_nodes_json(const uint64_t *v, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_integer((json_int_t)v[i]));
    return arr;
}

#define CELL(i, ...) snprintf(cells[i], META_CELL_LEN, __VA_ARGS__)

/* The table cells of one row; returns the number of columns. */
static size_t meta_cells(enum meta_kind k, const void *row, char cells[][META_CELL_LEN])
{
    switch (k) {
    case K_USER: {
        const struct slotd_meta_user *u = row;
        CELL(0, "%s", u->uid), CELL(1, "%s", u->token[0] ? u->token : "-");
        CELL(2, "%u", u->device_flag), CELL(3, "%u", u->device_level);
        return 4;
    }
    case K_DEVICE: {
        const struct slotd_meta_device *d = row;
        CELL(0, "%s", d->uid), CELL(1, "%u", d->device_flag), CELL(2, "%u", d->device_level);
        CELL(3, "%s", d->token[0] ? d->token : "-");
        return 4;
    }
    case K_CHANNEL: {
        const struct slotd_meta_channel *ch = row;
        CELL(0, "%s", ch->channel_id), CELL(1, "%u", ch->channel_type);
        slotctl_meta_flags_name(ch->flags, cells[2], META_CELL_LEN);
        CELL(3, "%" PRIu64, ch->subscriber_count), CELL(4, "%" PRIu64, ch->subscriber_version);
        CELL(5, "%u", ch->event_capacity), CELL(6, "%" PRIu64, ch->event_next_seq);
        return 7;
    }
    case K_MEMBERSHIP: {
        const struct slotd_meta_membership *m = row;
        CELL(0, "%s", m->uid), CELL(1, "%s", m->channel_id), CELL(2, "%u", m->channel_type);
        CELL(3, "%" PRIu64, m->join_seq), CELL(4, "%" PRIu64, m->read_seq);
        CELL(5, "%" PRIu64, m->hide_through_seq), CELL(6, "%" PRIu64, m->activated_at_ms);
        CELL(7, "%s", m->hidden ? "yes" : "no"), CELL(8, "%s", m->left ? "yes" : "no");
        return 9;
    }
    case K_CMD: {
        const struct slotd_meta_cmd_binding *b = row;
        CELL(0, "%s", b->uid), CELL(1, "%s", b->channel_id), CELL(2, "%u", b->channel_type);
        CELL(3, "%" PRIu64, b->start_seq), CELL(4, "%" PRIu64, b->ack_seq);
        CELL(5, "%s", b->unbound ? "yes" : "no");
        return 6;
    }
    case K_RUNTIME: {
        const struct slotd_meta_runtime *r = row;
        CELL(0, "%s", r->channel_id[0] ? r->channel_id : "-");
        CELL(1, "%u", r->channel_type), CELL(2, "%" PRIu64, r->leader);
        meta_nodes_text(r->replicas, r->replica_count, cells[3], META_CELL_LEN);
        meta_nodes_text(r->isr, r->isr_count, cells[4], META_CELL_LEN);
        CELL(5, "%" PRIu64, r->channel_epoch), CELL(6, "%" PRIu64, r->leader_epoch);
        CELL(7, "%" PRIu64, r->write_fence), CELL(8, "%" PRIu64, r->lease_until_ms);
        CELL(9, "%u", r->min_isr), CELL(10, "%s", meta_status_name(r->status));
        CELL(11, "0x%" PRIx64, r->features), CELL(12, "%" PRIu64, r->retention_through_seq);
        return 13;
    }
    case K_PLUGIN: {
        const struct slotd_meta_plugin_binding *p = row;
        CELL(0, "%s", p->uid), CELL(1, "%s", p->plugin_no);
        return 2;
    }
    case K_EVENT: {
        const struct slotd_meta_event *e = row;
        CELL(0, "%s", e->channel_id), CELL(1, "%u", e->channel_type);
        CELL(2, "%" PRIu64, e->event_seq), CELL(3, "%" PRIu64, e->message_seq);
        CELL(4, "%s", e->event_type);
        if (slotctl_printable(e->payload, e->payload_len))
            CELL(5, "%.*s", (int)e->payload_len, (const char *)e->payload);
        else if (e->payload_len * 2 + 3 <= META_CELL_LEN) {
            cells[5][0] = '0', cells[5][1] = 'x';
            slotctl_hex_of(e->payload, e->payload_len, cells[5] + 2);
        } else
            CELL(5, "(%zu bytes)", e->payload_len);
        return 6;
    }
    default:
        CELL(0, "%s", (const char *)row);
        return 1;
    }
}

/* The JSON object of one row (caller owns it). */
static json_t *meta_row_json(enum meta_kind k, const void *row)
{
    json_t *j = json_object();
#define JS(name, v) json_object_set_new(j, name, json_string(v))
#define JI(name, v) json_object_set_new(j, name, json_integer((json_int_t)(v)))
#define JB(name, v) json_object_set_new(j, name, json_boolean(v))
    switch (k) {
    case K_USER: {
        const struct slotd_meta_user *u = row;
        JS("uid", u->uid), JS("token", u->token);
        JI("device_flag", u->device_flag), JI("device_level", u->device_level);
        break;
    }
    case K_DEVICE: {
        const struct slotd_meta_device *d = row;
        JS("uid", d->uid), JI("device_flag", d->device_flag), JS("token", d->token);
        JI("device_level", d->device_level);
        break;
    }
    case K_CHANNEL: {
        const struct slotd_meta_channel *ch = row;
        char flags[META_CELL_LEN];
        slotctl_meta_flags_name(ch->flags, flags, sizeof(flags));
        JS("channel_id", ch->channel_id), JI("channel_type", ch->channel_type);
        JS("flags", flags), JI("subscriber_count", ch->subscriber_count);
        JI("subscriber_version", ch->subscriber_version);
        JI("event_capacity", ch->event_capacity), JI("event_next_seq", ch->event_next_seq);
        break;
    }
    case K_MEMBERSHIP: {
        const struct slotd_meta_membership *m = row;
        JS("uid", m->uid), JS("channel_id", m->channel_id), JI("channel_type", m->channel_type);
        JI("join_seq", m->join_seq), JI("read_seq", m->read_seq);
        JI("hide_through_seq", m->hide_through_seq), JI("activated_at_ms", m->activated_at_ms);
        JB("hidden", m->hidden), JB("left", m->left);
        break;
    }
    case K_CMD: {
        const struct slotd_meta_cmd_binding *b = row;
        JS("uid", b->uid), JS("channel_id", b->channel_id), JI("channel_type", b->channel_type);
        JI("start_seq", b->start_seq), JI("ack_seq", b->ack_seq), JB("unbound", b->unbound);
        break;
    }
    case K_RUNTIME: {
        const struct slotd_meta_runtime *r = row;
        if (r->channel_id[0])
            JS("channel_id", r->channel_id), JI("channel_type", r->channel_type);
        JI("leader", r->leader);
        json_object_set_new(j, "replicas", meta_nodes_json(r->replicas, r->replica_count));
        json_object_set_new(j, "isr", meta_nodes_json(r->isr, r->isr_count));
        JI("channel_epoch", r->channel_epoch), JI("leader_epoch", r->leader_epoch);
        JI("write_fence", r->write_fence), JI("lease_until_ms", r->lease_until_ms);
        JI("min_isr", r->min_isr), JS("status", meta_status_name(r->status));
        JI("features", r->features), JI("retention_through_seq", r->retention_through_seq);
        break;
    }
    case K_PLUGIN: {
        const struct slotd_meta_plugin_binding *p = row;
        JS("uid", p->uid), JS("plugin_no", p->plugin_no);
        break;
    }
    case K_EVENT: {
        const struct slotd_meta_event *e = row;
        JS("channel_id", e->channel_id), JI("channel_type", e->channel_type);
        JI("event_seq", e->event_seq), JI("message_seq", e->message_seq);
        JS("event_type", e->event_type);
        slotctl_json_set_bytes(j, "payload", e->payload, e->payload_len);
        break;
    }
    default:
        json_decref(j);
        return json_string((const char *)row);
    }
    return j;
}

/* Prints rows[0..n) as a table: a header, then one aligned line per row. */
static void meta_table(enum meta_kind k, const void *const *rows, size_t n)
{
    size_t ncol = 0, width[META_COLS_MAX] = {0};
    while (ncol < META_COLS_MAX && meta_headers[k][ncol])
        width[ncol] = strlen(meta_headers[k][ncol]), ncol++;
    char(*cells)[META_COLS_MAX][META_CELL_LEN] = calloc(n ? n : 1, sizeof(*cells));
    if (!cells) {
        fprintf(stderr, "slotctl: out of memory\n");
        return;
    }
    for (size_t r = 0; r < n; r++) {
        meta_cells(k, rows[r], cells[r]);
        for (size_t col = 0; col < ncol; col++)
            if (strlen(cells[r][col]) > width[col])
                width[col] = strlen(cells[r][col]);
    }
    for (size_t col = 0; col < ncol; col++)
        printf("%-*s%s", col + 1 < ncol ? (int)width[col] : 0, meta_headers[k][col],
               col + 1 < ncol ? "  " : "\n");
    for (size_t r = 0; r < n; r++)
        for (size_t col = 0; col < ncol; col++)
            printf("%-*s%s", col + 1 < ncol ? (int)width[col] : 0, cells[r][col],
                   col + 1 < ncol ? "  " : "\n");
    free(cells);
}

/* The command's JSON object with command and ok set (caller owns it). */
static json_t *meta_json_head(const struct slotctl_args *a)
{
    json_t *j = json_object();
    json_object_set_new(j, "command", json_string(a->meta.name));
    json_object_set_new(j, "ok", json_true());
    return j;
}

/* The row of a result and its kind (NULL when it carries none). */
static const void *meta_result_row(const struct slotd_meta_result *r, enum meta_kind *k)
{
    const void *rows[] = {r->user,        r->device,  r->channel,       r->membership,
                          r->cmd_binding, r->runtime, r->plugin_binding};
    const enum meta_kind kinds[] = {K_USER, K_DEVICE,  K_CHANNEL, K_MEMBERSHIP,
                                    K_CMD,  K_RUNTIME, K_PLUGIN};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i]) {
            *k = kinds[i];
            return rows[i];
        }
    return NULL;
}

static const char *meta_row_key(enum meta_kind k)
{
    static const char *const keys[] = {[K_USER] = "user",
                                       [K_DEVICE] = "device",
                                       [K_CHANNEL] = "channel",
                                       [K_MEMBERSHIP] = "membership",
                                       [K_CMD] = "cmd_binding",
                                       [K_RUNTIME] = "runtime_meta",
                                       [K_PLUGIN] = "plugin_binding"};
    return keys[k];
}

/* A write's answer: "OK  changed yes  group G  applied index I" (plus what the command says)
 * and its row's table, or one JSON object. */
static int meta_write_print(const struct slotctl_args *a, const struct slotd_meta_result *r)
{
    enum meta_kind k;
    const void *row = meta_result_row(r, &k);
    bool members =
        a->meta.verb == SLOTCTL_META_MEMBER_ADD || a->meta.verb == SLOTCTL_META_MEMBER_REMOVE;
    bool event = a->meta.verb == SLOTCTL_META_EVENT_APPEND;
    if (a->json) {
        json_t *j = meta_json_head(a);
        json_object_set_new(j, "changed", json_boolean(r->changed));
        if (members) {
            json_object_set_new(j, "list", json_string(meta_list_name(a->meta.list)));
            json_object_set_new(j, "members_changed", json_integer(r->members_changed));
            json_object_set_new(j, "subscriber_count",
                                json_integer((json_int_t)r->subscriber_count));
            json_object_set_new(j, "subscriber_version",
                                json_integer((json_int_t)r->subscriber_version));
        }
        if (event) {
            json_object_set_new(j, "event_seq", json_integer((json_int_t)r->event_seq));
            json_object_set_new(j, "evicted", json_integer(r->evicted));
        }
        if (row)
            json_object_set_new(j, meta_row_key(k), meta_row_json(k, row));
        json_object_set_new(j, "group_id", json_integer(r->group_id));
        json_object_set_new(j, "applied_index", json_integer((json_int_t)r->applied_index));
        json_object_set_new(j, "deduplicated", json_boolean(r->deduplicated));
        json_object_set_new(j, "attempts", json_integer(r->attempts));
        slotctl_json_print(j);
        return SLOTCTL_EXIT_OK;
    }
    printf("OK  changed %s", r->changed ? "yes" : "no");
    if (members)
        printf("  %s changed %u  subscribers %" PRIu64 "  subscriber version %" PRIu64,
               meta_list_name(a->meta.list), r->members_changed, r->subscriber_count,
               r->subscriber_version);
    if (event)
        printf("  event seq %" PRIu64 "  evicted %u", r->event_seq, r->evicted);
    printf("  group %u  applied index %" PRIu64 "\n", r->group_id, r->applied_index);
    if (row)
        meta_table(k, &row, 1);
    return SLOTCTL_EXIT_OK;
}

/* A get's answer: the row's table (or JSON with found), exit 1 when absent. */
static int meta_get_print(const struct slotctl_args *a, const struct slotd_meta_result *r,
                          const char *what)
{
    enum meta_kind k;
    const void *row = meta_result_row(r, &k);
    if (a->json) {
        json_t *j = meta_json_head(a);
        json_object_set_new(j, "found", json_boolean(r->found));
        if (row)
            json_object_set_new(j, meta_row_key(k), meta_row_json(k, row));
        json_object_set_new(j, "group_id", json_integer(r->group_id));
        json_object_set_new(j, "applied_index", json_integer((json_int_t)r->applied_index));
        slotctl_json_print(j);
    } else if (row) {
        meta_table(k, &row, 1);
    }
    if (!r->found || !row) {
        fprintf(stderr, "slotctl: %s: %s: not found\n", a->meta.name, what);
        return SLOTCTL_EXIT_NOT_FOUND;
    }
    return SLOTCTL_EXIT_OK;
}

/* ---- deletes ------------------------------------------------------------------------------- */

/* What repeated user or channel deletes removed in all. */
struct meta_removed {
    unsigned commands;
    bool row, plugin_binding, system_uid, runtime_meta;
    uint64_t devices, memberships, cmd_bindings, subscribers, allowlist, denylist, migration_tasks,
        events;
};

static void meta_removed_add(struct meta_removed *t, const struct slotd_meta_result *r)
{
    t->commands++;
    t->row = t->row || r->removed;
    t->plugin_binding = t->plugin_binding || r->removed_plugin_binding;
    t->system_uid = t->system_uid || r->removed_system_uid;
    t->runtime_meta = t->runtime_meta || r->removed_runtime_meta;
    t->devices += r->removed_devices;
    t->memberships += r->removed_memberships;
    t->cmd_bindings += r->removed_cmd_bindings;
    t->subscribers += r->removed_subscribers;
    t->allowlist += r->removed_allowlist;
    t->denylist += r->removed_denylist;
    t->migration_tasks += r->removed_migration_tasks;
    t->events += r->removed_events;
}

static void meta_removed_print(const struct slotctl_args *a, const struct meta_removed *t)
{
    bool user = a->meta.verb == SLOTCTL_META_USER_DELETE;
    if (a->json) {
        json_t *j = meta_json_head(a);
        json_object_set_new(j, "removed", json_boolean(t->row));
        if (user) {
            json_object_set_new(j, "uid", json_string(a->meta.uid));
            json_object_set_new(j, "devices", json_integer((json_int_t)t->devices));
            json_object_set_new(j, "memberships", json_integer((json_int_t)t->memberships));
            json_object_set_new(j, "cmd_bindings", json_integer((json_int_t)t->cmd_bindings));
            json_object_set_new(j, "plugin_binding", json_boolean(t->plugin_binding));
            json_object_set_new(j, "system_uid", json_boolean(t->system_uid));
        } else {
            json_object_set_new(j, "channel_id", json_string(a->meta.channel_id));
            json_object_set_new(j, "channel_type", json_integer(a->meta.channel_type));
            json_object_set_new(j, "subscribers", json_integer((json_int_t)t->subscribers));
            json_object_set_new(j, "allowlist", json_integer((json_int_t)t->allowlist));
            json_object_set_new(j, "denylist", json_integer((json_int_t)t->denylist));
            json_object_set_new(j, "runtime_meta", json_boolean(t->runtime_meta));
            json_object_set_new(j, "migration_tasks", json_integer((json_int_t)t->migration_tasks));
            json_object_set_new(j, "events", json_integer((json_int_t)t->events));
        }
        json_object_set_new(j, "commands", json_integer(t->commands));
        slotctl_json_print(j);
    } else if (user) {
        printf("%s user %s: devices %" PRIu64 ", memberships %" PRIu64 ", cmd bindings %" PRIu64
               ", plugin binding %s, system uid %s  (%u command%s)\n",
               t->row ? "removed" : "no such", a->meta.uid, t->devices, t->memberships,
               t->cmd_bindings, t->plugin_binding ? "yes" : "no", t->system_uid ? "yes" : "no",
               t->commands, t->commands == 1 ? "" : "s");
    } else {
        printf("%s channel %s (type %u): subscribers %" PRIu64 ", allowlist %" PRIu64
               ", denylist %" PRIu64 ", runtime meta %s, migration tasks %" PRIu64
               ", events %" PRIu64 "  (%u command%s)\n",
               t->row ? "removed" : "no such", a->meta.channel_id, a->meta.channel_type,
               t->subscribers, t->allowlist, t->denylist, t->runtime_meta ? "yes" : "no",
               t->migration_tasks, t->events, t->commands, t->commands == 1 ? "" : "s");
    }
}

/* user delete / channel delete: one command at a time while the server says more. */
static int meta_delete_run(struct slotd_client *c, const struct slotctl_args *a)
{
    const struct slotctl_meta_args *m = &a->meta;
    struct meta_removed t = {0};
    bool more = true;
    for (unsigned i = 0; more && i < SLOTCTL_META_DELETE_REPEATS_MAX; i++) {
        struct slotd_meta_result *r;
        struct slotd_error *e = NULL;
        int rc = m->verb == SLOTCTL_META_USER_DELETE
                     ? slotd_client_user_delete(c, m->uid, NULL, &r, &e)
                     : slotd_client_channel_delete(c, m->channel_id, m->channel_type, NULL, &r, &e);
        if (rc != SLOTD_CLIENT_OK)
            return slotctl_error_report_free(a, rc, e);
        meta_removed_add(&t, r);
        more = r->more;
        slotd_meta_result_destroy(r);
    }
    if (more) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s: rows remain after %d commands; run it again", m->name,
                 SLOTCTL_META_DELETE_REPEATS_MAX);
        return slotctl_error_report_text(a, SLOTD_CLIENT_ERPC, msg, NULL);
    }
    meta_removed_print(a, &t);
    return SLOTCTL_EXIT_OK;
}

/* ---- listings ------------------------------------------------------------------------------ */

/* Largest number of pages one listing follows. */
#define META_PAGES_MAX 100000

/* One page of the listing a->meta names. */
static int meta_page_get(struct slotd_client *c, const struct slotctl_meta_args *m,
                         const uint8_t *cursor, size_t cursor_len, uint32_t limit,
                         struct slotd_meta_page **out, struct slotd_error **err)
{
    switch (m->verb) {
    case SLOTCTL_META_USER_LIST:
        return slotd_client_system_uids_list(c, cursor, cursor_len, limit, NULL, out, err);
    case SLOTCTL_META_DEVICE_LIST:
        return slotd_client_device_list(c, m->uid, cursor, cursor_len, limit, NULL, out, err);
    case SLOTCTL_META_CHANNEL_LIST:
        return slotd_client_channel_list(c, m->prefix, m->channel_type, cursor, cursor_len, limit,
                                         NULL, out, err);
    case SLOTCTL_META_MEMBER_LIST:
        return slotd_client_members_list(c, m->channel_id, m->channel_type, m->list, cursor,
                                         cursor_len, limit, NULL, out, err);
    case SLOTCTL_META_CONV_LIST:
        return slotd_client_conversation_list(c, m->uid, cursor, cursor_len, limit, NULL, out, err);
    case SLOTCTL_META_RUNTIME_LIST:
        return slotd_client_runtime_list(c, m->leader, cursor, cursor_len, limit, NULL, out, err);
    default:
        return slotd_client_event_list(c, m->channel_id, m->channel_type, m->after_seq, cursor,
                                       cursor_len, limit, NULL, out, err);
    }
}

static enum meta_kind meta_list_kind(enum slotctl_meta_verb v)
{
    switch (v) {
    case SLOTCTL_META_DEVICE_LIST:
        return K_DEVICE;
    case SLOTCTL_META_CHANNEL_LIST:
        return K_CHANNEL;
    case SLOTCTL_META_CONV_LIST:
        return K_MEMBERSHIP;
    case SLOTCTL_META_RUNTIME_LIST:
        return K_RUNTIME;
    case SLOTCTL_META_EVENT_LIST:
        return K_EVENT;
    default:
        return K_UID;
    }
}

static const void *const *meta_page_rows(const struct slotd_meta_page *p, enum meta_kind k)
{
    switch (k) {
    case K_DEVICE:
        return (const void *const *)p->devices;
    case K_CHANNEL:
        return (const void *const *)p->channels;
    case K_MEMBERSHIP:
        return (const void *const *)p->conversations;
    case K_RUNTIME:
        return (const void *const *)p->runtimes;
    case K_EVENT:
        return (const void *const *)p->events;
    default:
        return (const void *const *)p->uids;
    }
}

/* The collected pages of one listing. */
struct meta_pages {
    struct slotd_meta_page **pages;
    size_t count;
    const void **rows;
    size_t row_count;
};

static void meta_pages_clear(struct meta_pages *ps)
{
    for (size_t i = 0; i < ps->count; i++)
        slotd_meta_page_destroy(ps->pages[i]);
    free(ps->pages);
    free(ps->rows);
}

/* Keeps page p (ownership transfers) and its first take rows. */
static int meta_pages_add(struct meta_pages *ps, struct slotd_meta_page *p, enum meta_kind k,
                          size_t take)
{
    struct slotd_meta_page **pages = realloc(ps->pages, (ps->count + 1) * sizeof(*pages));
    if (!pages) {
        slotd_meta_page_destroy(p);
        return SLOTD_CLIENT_ENOMEM;
    }
    ps->pages = pages;
    ps->pages[ps->count++] = p;
    const void **rows = realloc(ps->rows, (ps->row_count + take + 1) * sizeof(*rows));
    if (!rows)
        return SLOTD_CLIENT_ENOMEM;
    ps->rows = rows;
    const void *const *src = meta_page_rows(p, k);
    for (size_t i = 0; i < take; i++)
        ps->rows[ps->row_count++] = src[i];
    return SLOTD_CLIENT_OK;
}

static void meta_list_print(const struct slotctl_args *a, enum meta_kind k,
                            const struct meta_pages *ps, const struct slotd_meta_page *last)
{
    bool more = last && last->next_cursor_len > 0;
    if (!a->json) {
        meta_table(k, ps->rows, ps->row_count);
        if (more)
            printf("(stopped at --limit %" PRIu64 "; more follow)\n", a->meta.limit);
        return;
    }
    json_t *j = meta_json_head(a);
    json_t *arr = json_array();
    for (size_t i = 0; i < ps->row_count; i++)
        json_array_append_new(arr, meta_row_json(k, ps->rows[i]));
    json_object_set_new(j, "entries", arr);
    json_object_set_new(j, "count", json_integer((json_int_t)ps->row_count));
    json_object_set_new(j, "pages", json_integer((json_int_t)ps->count));
    json_object_set_new(j, "more", json_boolean(more));
    char *hex = malloc(2 * (last ? last->next_cursor_len : 0) + 1);
    if (hex) {
        slotctl_hex_of(last ? last->next_cursor : NULL, last ? last->next_cursor_len : 0, hex);
        json_object_set_new(j, "next_cursor", json_string(more ? hex : ""));
        free(hex);
    }
    slotctl_json_print(j);
}

/* Every page of a listing (until --limit entries), then one table or JSON object. */
static int meta_list_run(struct slotd_client *c, const struct slotctl_args *a)
{
    const struct slotctl_meta_args *m = &a->meta;
    enum meta_kind k = meta_list_kind(m->verb);
    struct meta_pages ps = {0};
    const struct slotd_meta_page *last = NULL;
    int code = SLOTCTL_EXIT_OK;
    for (;;) {
        uint64_t left = m->limit ? m->limit - ps.row_count : SLOTD_META_PAGE_LIMIT_MAX;
        uint32_t page_limit =
            (uint32_t)(left < SLOTD_META_PAGE_LIMIT_MAX ? left : SLOTD_META_PAGE_LIMIT_MAX);
        struct slotd_meta_page *p;
        struct slotd_error *e = NULL;
        int rc = meta_page_get(c, m, last ? last->next_cursor : NULL,
                               last ? last->next_cursor_len : 0, page_limit, &p, &e);
        if (rc != SLOTD_CLIENT_OK) {
            code = slotctl_error_report_free(a, rc, e);
            break;
        }
        size_t take = p->count < page_limit ? p->count : page_limit;
        if (meta_pages_add(&ps, p, k, take) != SLOTD_CLIENT_OK) {
            code = slotctl_error_report_text(a, SLOTD_CLIENT_ENOMEM, NULL, NULL);
            break;
        }
        last = p;
        bool full = m->limit && ps.row_count >= m->limit;
        if (p->next_cursor_len == 0 || full)
            break;
        if (ps.count == META_PAGES_MAX) {
            char msg[160];
            snprintf(msg, sizeof(msg), "%s: stopped after %d pages (give --limit)", m->name,
                     META_PAGES_MAX);
            code = slotctl_error_report_text(a, SLOTD_CLIENT_EEXHAUSTED, msg, NULL);
            break;
        }
    }
    if (code == SLOTCTL_EXIT_OK)
        meta_list_print(a, k, &ps, last);
    meta_pages_clear(&ps);
    return code;
}

/* ---- the rest ------------------------------------------------------------------------------ */

static int meta_runtime_set(struct slotd_client *c, const struct slotctl_meta_args *m,
                            struct slotd_meta_result **r, struct slotd_error **e)
{
    struct slotd_runtime_update *u = slotd_runtime_update_create();
    if (!u)
        return SLOTD_CLIENT_ENOMEM;
    slotd_runtime_update_set_expected(u, m->expect_channel_epoch, m->expect_leader_epoch,
                                      m->expect_leader);
    int rc = slotd_runtime_update_set_members(u, m->leader, m->replicas, m->replica_count, m->isr,
                                              m->isr_count);
    slotd_runtime_update_set_epochs(u, m->channel_epoch, m->leader_epoch, m->write_fence);
    slotd_runtime_update_set_lease(u, m->lease_until_ms, m->min_isr);
    slotd_runtime_update_set_status(u, m->status, m->features);
    slotd_runtime_update_set_retention(u, m->retention_through_seq);
    if (rc == SLOTD_CLIENT_OK)
        rc = slotd_client_runtime_set(c, m->channel_id, m->channel_type, u, NULL, r, e);
    slotd_runtime_update_destroy(u);
    return rc;
}

/* user update: update_user when a user field is given, set_system_uid when --system is. */
static int meta_user_update(struct slotd_client *c, const struct slotctl_meta_args *m,
                            struct slotd_meta_result **r, struct slotd_error **e)
{
    *r = NULL;
    if (m->system >= 0) {
        int rc = slotd_client_user_set_system(c, m->uid, m->system == 1, NULL, r, e);
        if (rc != SLOTD_CLIENT_OK || !m->user_fields)
            return rc;
        slotd_meta_result_destroy(*r);
    }
    return slotd_client_user_update(c, m->uid, m->token, m->device_flag, m->device_level, NULL, r,
                                    e);
}

/* The wall clock in ms (conversation join's default activated_at_ms). */
static uint64_t meta_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* member add/remove; a subscriber command without --expected-version is fenced on the version
 * the channel has now (read first, as the Python and Node helpers do). */
static int meta_members_change(struct slotd_client *c, const struct slotctl_meta_args *m,
                               struct slotd_meta_result **r, struct slotd_error **e)
{
    uint64_t version = m->expected_version;
    if (m->list == SLOTD_MEMBER_LIST_SUBSCRIBERS && !m->has_expected_version) {
        int rc = slotd_client_channel_get(c, m->channel_id, m->channel_type, NULL, r, e);
        if (rc != SLOTD_CLIENT_OK)
            return rc;
        version = (*r)->channel ? (*r)->channel->subscriber_version : 0;
        slotd_meta_result_destroy(*r);
        *r = NULL;
    }
    return (m->verb == SLOTCTL_META_MEMBER_ADD ? slotd_client_members_add
                                               : slotd_client_members_remove)(
        c, m->channel_id, m->channel_type, (enum slotd_member_list)m->list, m->uids, m->uid_count,
        version, NULL, r, e);
}

/* Sends the single write a->meta names. */
static int meta_write(struct slotd_client *c, const struct slotctl_meta_args *m,
                      struct slotd_meta_result **r, struct slotd_error **e)
{
    const char *u = m->uid, *ch = m->channel_id;
    uint32_t t = m->channel_type;
    switch (m->verb) {
    case SLOTCTL_META_USER_CREATE:
        return slotd_client_user_create(c, u, m->token, m->device_flag, m->device_level, NULL, r,
                                        e);
    case SLOTCTL_META_USER_UPDATE:
        return meta_user_update(c, m, r, e);
    case SLOTCTL_META_DEVICE_PUT:
        return slotd_client_device_put(c, u, m->device_flag, m->token, m->device_level, NULL, r, e);
    case SLOTCTL_META_DEVICE_DELETE:
        return slotd_client_device_delete(c, u, m->device_flag, NULL, r, e);
    case SLOTCTL_META_CHANNEL_CREATE:
        return slotd_client_channel_create(c, ch, t, m->flags, m->event_capacity, NULL, r, e);
    case SLOTCTL_META_CHANNEL_FLAGS:
        return slotd_client_channel_set_flags(c, ch, t, m->flags, NULL, r, e);
    case SLOTCTL_META_MEMBER_ADD:
    case SLOTCTL_META_MEMBER_REMOVE:
        return meta_members_change(c, m, r, e);
    case SLOTCTL_META_CONV_JOIN:
        return slotd_client_conversation_join(c, u, ch, t, m->seq,
                                              m->has_at_ms ? m->at_ms : meta_now_ms(), NULL, r, e);
    case SLOTCTL_META_CONV_LEAVE:
        return slotd_client_conversation_leave(c, u, ch, t, NULL, r, e);
    case SLOTCTL_META_CONV_READ:
        return slotd_client_conversation_read(c, u, ch, t, m->seq, NULL, r, e);
    case SLOTCTL_META_CONV_HIDE:
        return slotd_client_conversation_hide(c, u, ch, t, m->seq, NULL, r, e);
    case SLOTCTL_META_CONV_ACTIVATE:
        return slotd_client_conversation_activate(c, u, ch, t, m->at_ms, NULL, r, e);
    case SLOTCTL_META_CMD_BIND:
        return slotd_client_cmd_bind(c, u, ch, t, m->seq, NULL, r, e);
    case SLOTCTL_META_CMD_ACK:
        return slotd_client_cmd_ack(c, u, ch, t, m->seq, NULL, r, e);
    case SLOTCTL_META_CMD_UNBIND:
        return slotd_client_cmd_unbind(c, u, ch, t, NULL, r, e);
    case SLOTCTL_META_RUNTIME_SET:
        return meta_runtime_set(c, m, r, e);
    case SLOTCTL_META_PLUGIN_BIND:
        return slotd_client_plugin_bind(c, u, m->plugin_no, NULL, r, e);
    case SLOTCTL_META_PLUGIN_UNBIND:
        return slotd_client_plugin_unbind(c, u, NULL, r, e);
    default: /* SLOTCTL_META_EVENT_APPEND */
        return slotd_client_event_append(c, ch, t, m->message_seq, m->event_type, m->payload,
                                         m->payload ? strlen(m->payload) : 0, NULL, r, e);
    }
}

/* Sends the get a->meta names; what: the row asked for, in the not-found message. */
static int meta_get(struct slotd_client *c, const struct slotctl_meta_args *m,
                    struct slotd_meta_result **r, struct slotd_error **e, char *what, size_t len)
{
    switch (m->verb) {
    case SLOTCTL_META_USER_GET:
        snprintf(what, len, "user '%s'", m->uid);
        return slotd_client_user_get(c, m->uid, NULL, r, e);
    case SLOTCTL_META_CHANNEL_GET:
        snprintf(what, len, "channel '%s' (type %u)", m->channel_id, m->channel_type);
        return slotd_client_channel_get(c, m->channel_id, m->channel_type, NULL, r, e);
    case SLOTCTL_META_CONV_GET:
        snprintf(what, len, "membership of '%s' in '%s' (type %u)", m->uid, m->channel_id,
                 m->channel_type);
        return slotd_client_conversation_get(c, m->uid, m->channel_id, m->channel_type, NULL, r, e);
    case SLOTCTL_META_RUNTIME_GET:
        snprintf(what, len, "runtime meta of '%s' (type %u)", m->channel_id, m->channel_type);
        return slotd_client_runtime_get(c, m->channel_id, m->channel_type, NULL, r, e);
    default: /* SLOTCTL_META_PLUGIN_GET */
        snprintf(what, len, "plugin binding of '%s'", m->uid);
        return slotd_client_plugin_get(c, m->uid, NULL, r, e);
    }
}

/* member check: "UID is a member of LIST of CHANNEL (type T)"; exit 1 when not. */
static int meta_check_run(struct slotd_client *c, const struct slotctl_args *a)
{
    const struct slotctl_meta_args *m = &a->meta;
    struct slotd_meta_result *r;
    struct slotd_error *e = NULL;
    int rc = slotd_client_member_check(c, m->channel_id, m->channel_type,
                                       (enum slotd_member_list)m->list, m->uids[0], NULL, &r, &e);
    if (rc != SLOTD_CLIENT_OK)
        return slotctl_error_report_free(a, rc, e);
    bool member = r->member;
    if (a->json) {
        json_t *j = meta_json_head(a);
        json_object_set_new(j, "uid", json_string(m->uids[0]));
        json_object_set_new(j, "list", json_string(meta_list_name(m->list)));
        json_object_set_new(j, "member", json_boolean(member));
        slotctl_json_print(j);
    } else {
        printf("%s is %sin the %s of %s (type %u)\n", m->uids[0], member ? "" : "not ",
               meta_list_name(m->list), m->channel_id, m->channel_type);
    }
    slotd_meta_result_destroy(r);
    return member ? SLOTCTL_EXIT_OK : SLOTCTL_EXIT_NOT_FOUND;
}

int slotctl_meta_run(struct slotd_client *c, const struct slotctl_args *a)
{
    const struct slotctl_meta_args *m = &a->meta;
    struct slotd_meta_result *r = NULL;
    struct slotd_error *e = NULL;
    char what[512];
    int rc, code;
    switch (m->verb) {
    case SLOTCTL_META_USER_DELETE:
    case SLOTCTL_META_CHANNEL_DELETE:
        return meta_delete_run(c, a);
    case SLOTCTL_META_USER_LIST:
    case SLOTCTL_META_DEVICE_LIST:
    case SLOTCTL_META_CHANNEL_LIST:
    case SLOTCTL_META_MEMBER_LIST:
    case SLOTCTL_META_CONV_LIST:
    case SLOTCTL_META_RUNTIME_LIST:
    case SLOTCTL_META_EVENT_LIST:
        return meta_list_run(c, a);
    case SLOTCTL_META_MEMBER_CHECK:
        return meta_check_run(c, a);
    case SLOTCTL_META_USER_GET:
    case SLOTCTL_META_CHANNEL_GET:
    case SLOTCTL_META_CONV_GET:
    case SLOTCTL_META_RUNTIME_GET:
    case SLOTCTL_META_PLUGIN_GET:
        rc = meta_get(c, m, &r, &e, what, sizeof(what));
        if (rc != SLOTD_CLIENT_OK)
            return slotctl_error_report_free(a, rc, e);
        code = meta_get_print(a, r, what);
        break;
    default:
        rc = meta_write(c, m, &r, &e);
        if (rc != SLOTD_CLIENT_OK)
            return slotctl_error_report_free(a, rc, e);
        code = meta_write_print(a, r);
        break;
    }
    slotd_meta_result_destroy(r);
    return code;
}
