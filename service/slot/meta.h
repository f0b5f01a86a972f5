/* meta.h - internals shared by the typed metadata files of the slot layer (not a public API). */
#ifndef SLOTD_SLOT_META_H
#define SLOTD_SLOT_META_H

#include <stddef.h>

#include "service/slot/slot.h"
#include "store/keys.h"

/* ---- Generic access to a oneof alternative by field number (meta_common.c). ---- */

/* The message of outer's field `number` (NULL when unset or not a message field). outer is
 * borrowed for the call; the result is borrowed from outer. */
const ProtobufCMessage *slot__oneof_get(const ProtobufCMessage *outer, unsigned number);
/* Sets outer's oneof alternative `number` to m (borrowed: it must outlive outer's packing). */
void slot__oneof_set(ProtobufCMessage *outer, unsigned number, const ProtobufCMessage *m);

/* ---- Keys: [hash_slot u16][table u8][parts] (meta_common.c). ---- */

struct slot__key {
    uint8_t b[STORE_FSM_KEY_MAX];
    size_t n; /* invariant: n <= STORE_FSM_KEY_MAX (validated lengths keep keys far below) */
};

void slot__key_init(struct slot__key *k, uint16_t hs, uint8_t table);
/* A string prefixed by its length (u8); s is borrowed for the call, at most 255 bytes. */
void slot__key_str(struct slot__key *k, const char *s);
/* A string that ends the key (no length prefix). */
void slot__key_tail(struct slot__key *k, const char *s);
void slot__key_u8(struct slot__key *k, uint8_t v);
/* A channel reference: [s channel_id][channel_type u8] (every channel-owned row starts so). */
void slot__key_channel(struct slot__key *k, const char *channel_id, uint32_t channel_type);
/* Reads [s channel_id][channel_type u8] at the start of p (n bytes) into id (SLOT_CHANNEL_ID_MAX
 * + 1 bytes, NUL-terminated); returns the bytes read, 0 when p does not hold one. */
size_t slot__key_channel_parse(const uint8_t *p, size_t n, char *id, uint32_t *channel_type);
void slot__key_u64(struct slot__key *k, uint64_t v);

/* ---- Rows through the fsm batch overlay (apply) and from the store (reads). ---- */

/* Reads a row stored as [1][packed message of d]: *out is NULL when absent, else caller frees
 * with protobuf_c_message_free_unpacked(*out, NULL). Returns 0 or a store error
 * (STORE_ECORRUPT on a bad version byte or an undecodable message). */
int slot__row_get(struct slot_fsm *f, const struct slot__key *k,
                  const ProtobufCMessageDescriptor *d, ProtobufCMessage **out);
/* Writes the row as [1][packed m]; m is borrowed for the call. */
int slot__row_put(struct slot_fsm *f, const struct slot__key *k, const ProtobufCMessage *m);
/* Set members: the value is [1]. */
int slot__flag_get(struct slot_fsm *f, const struct slot__key *k, bool *present);
int slot__flag_put(struct slot_fsm *f, const struct slot__key *k);
/* Whether row k exists (any value) as the batch reads it. */
int slot__flag_present(struct slot_fsm *f, const struct slot__key *k, bool *present);
int slot__key_delete(struct slot_fsm *f, const struct slot__key *k);

/* fsm.c: the batch overlay (later entries of a batch read earlier ones). *val is malloc'ed
 * (caller frees with free()) when *found; v == NULL deletes. */
int slot__fsm_read(struct slot_fsm *f, const uint8_t *k, size_t kl, bool *found, uint8_t **val,
                   size_t *vl);
/* fsm.c: reads row k, which must be exactly len bytes with first byte version, into out (len
 * bytes, caller's buffer); *found false (out untouched) when absent, STORE_ECORRUPT when the row
 * has another length or version. */
int slot__fsm_read_fixed(struct slot_fsm *f, const uint8_t *k, size_t kl, uint8_t version,
                         uint8_t *out, size_t len, bool *found);
int slot__fsm_write(struct slot_fsm *f, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl);

/* fsm.c: calls cb for every live row key under prefix p as the batch reads it (the batch's own
 * rows first), at most max keys (*over: more remained). */
typedef int (*slot__key_cb)(void *ctx, const uint8_t *k, size_t kl);
int slot__fsm_prefix_keys(struct slot_fsm *f, const uint8_t *p, size_t pl, size_t max,
                          slot__key_cb cb, void *ctx, bool *over);
/* fsm.c: deletes KV row k ([hs][KV][key]), recording its watch event. */
int slot__kv_delete(struct slot_fsm *f, const uint8_t *k, size_t kl);

/* fsm.c: the batch wrote a lease row (slot_fsm_lease_commits counts it at commit). */
void slot__fsm_lease_written(struct slot_fsm *f);

/* lease.c: whether lease id of hash slot hs exists and may take `extra` more keys; else err
 * (NOT_FOUND, or FAILED_PRECONDITION naming field and the limit). */
int slot__lease_check(struct slot_fsm *f, uint16_t hs, uint64_t id, uint32_t extra,
                      const char *field, struct slotd_error *err);
/* lease.c: adds / removes key (the KV primary key) in lease id's key index and count. */
int slot__lease_attach(struct slot_fsm *f, uint16_t hs, uint64_t id, const uint8_t *key, size_t kl);
int slot__lease_detach(struct slot_fsm *f, uint16_t hs, uint64_t id, const uint8_t *key, size_t kl);
/* lease.c: LogCommand lease_grant .. lease_revoke and lease_expire. */
bool slot__lease_is_command(unsigned number);
int slot__lease_command_key(const Slotd__Internal__V1__LogCommand *cmd, ProtobufCBinaryData *key,
                            struct slotd_error *err);
int slot__lease_apply(struct slot_fsm *f, const struct slot_group_state *gs, uint64_t index,
                      uint64_t term, const Slotd__Internal__V1__LogCommand *cmd, uint8_t **buf,
                      size_t *len, struct slotd_error *err);

/* fsm.c: with events on, records the change of typed row k (v NULL: deleted; else the stored
 * [1][message] value) when its table is watched. */
int slot__fsm_typed_event(struct slot_fsm *f, const uint8_t *k, size_t kl, const uint8_t *v,
                          size_t vl);
bool slot__fsm_events_on(const struct slot_fsm *f);

/* A delete's bound: the rows one entry may still delete. */
struct slot__budget {
    uint32_t left;
    bool over; /* a prefix had more rows than the budget allowed: the caller sets `more` */
};

/* Called with each row key (borrowed) before slot__delete_prefix deletes it: deletes what the row
 * owns besides (an index entry). Returns 0 or a store error. */
typedef int (*slot__delete_cb)(void *ctx, const struct slot__key *k);

/* Deletes the live rows under prefix p (through the batch, with their watch events), each one
 * costing `cost` of b (its own row and what cb deletes with it); stops when b runs out (b->over).
 * *deleted (when not NULL) is increased by the rows deleted. */
int slot__delete_prefix(struct slot_fsm *f, const struct slot__key *p, uint32_t cost,
                        struct slot__budget *b, slot__delete_cb cb, void *ctx, uint32_t *deleted);

/* The same reads against the applied state (read path). */
int slot__store_row_get(struct store *st, const struct slot__key *k,
                        const ProtobufCMessageDescriptor *d, ProtobufCMessage **out);
int slot__store_flag_get(struct store *st, const struct slot__key *k, bool *present);

/* ---- Cursors and scans (read path). ---- */

/* A cursor is [1][crc32 u32 of suffix][suffix]: the key suffix (after the listed prefix) of
 * the last row returned. Returns 0 when c is empty or well formed, else -1. */
int slot__cursor_check(const ProtobufCBinaryData *c);

/* A scan callback gets a row's key suffix and value (borrowed for the call) and returns 0 (the
 * row was listed), SLOT__SCAN_SKIP (filtered out) or a store error that stops the scan. */
#define SLOT__SCAN_SKIP (-1)
typedef int (*slot__scan_cb)(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                             size_t vl);

/* One page being scanned: its bounds (limit entries, SLOT_LIST_PAGE_BYTES of key suffix and
 * value bytes, SLOT_LIST_SCAN_ROWS_MAX rows visited) and where it stands. */
struct slot__page {
    uint32_t limit;
    uint32_t n;        /* rows listed; invariant: n <= limit */
    size_t bytes;      /* their key suffix and value bytes */
    uint32_t examined; /* rows visited, listed or skipped; invariant: <= SLOT_LIST_SCAN_ROWS_MAX */
    bool full;         /* stopped by a bound with a row left after `last` */
    uint8_t last[STORE_FSM_KEY_MAX]; /* key suffix of the last row consumed (empty: none) */
    size_t last_len;
};

/* Visits the rows under prefix p after pg->last (empty: from the first), below end (NULL: to
 * the prefix's end), into pg until a bound stops it (pg->full) or the rows end. */
int slot__scan_page(struct store *st, const struct slot__key *p, const struct slot__key *end,
                    struct slot__page *pg, slot__scan_cb cb, void *ctx);
/* Visits rows under prefix p (below end, NULL: all of them) after the cursor (borrowed), at
 * most limit listed, within the page bounds. On success *next is the cursor of the last visited
 * row when more rows may follow (caller frees with free()), else empty. */
int slot__scan_until(struct store *st, const struct slot__key *p, const struct slot__key *end,
                     const ProtobufCBinaryData *cursor, uint32_t limit, slot__scan_cb cb, void *ctx,
                     ProtobufCBinaryData *next);
int slot__scan(struct store *st, const struct slot__key *p, const ProtobufCBinaryData *cursor,
               uint32_t limit, slot__scan_cb cb, void *ctx, ProtobufCBinaryData *next);

/* Collects scanned rows: key suffixes as strings (uids, d NULL, slot__collect_suffix) or row
 * values decoded as messages of d (slot__collect_row); init allocates v for `cap` entries. */
struct slot__rows {
    const ProtobufCMessageDescriptor *d;
    void **v; /* char * when d is NULL, else ProtobufCMessage * */
    size_t n;
    size_t cap;
};
int slot__rows_init(struct slot__rows *r, const ProtobufCMessageDescriptor *d, size_t cap);
int slot__collect_suffix(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                         size_t vl);
int slot__collect_row(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val, size_t vl);
/* Frees each entry (as a string or a message of d) and v. */
void slot__rows_free(struct slot__rows *r);

/* ---- Validation (meta_validate.c). ---- */

/* Where a violation is reported: the oneof alternative's name is the field path's root. */
struct slot__vctx {
    const char *root; /* "create_user" */
    struct slotd_error *err;
    char *keybuf; /* queries: 32 bytes for a routing key the validator makes (hash slot keys) */
};

/* Checks a typed command or query (borrowed) and points *key at its routing key (borrowed from
 * the message). Returns 0, or -1 with err set (INVALID_FIELD naming the field and its limit). */
typedef int (*slot__validate_fn)(struct slot__vctx *v, const ProtobufCMessage *m,
                                 ProtobufCBinaryData *key);

/* Whether number is a typed alternative of ProposeRequest.command / ReadRequest.query. */
bool slot__meta_is_command(unsigned number);
bool slot__meta_is_query(unsigned number);
/* Validates typed command `number` (msg borrowed) and fills *key with its routing key (borrowed
 * from msg). `field` names the oneof alternative ("add_subscribers"). */
int slot__meta_validate_command(unsigned number, const ProtobufCMessage *msg,
                                ProtobufCBinaryData *key, struct slotd_error *err);
/* As above for a typed query; a query routed by a hash slot keeps its routing key in keybuf. */
int slot__meta_validate_query(unsigned number, const ProtobufCMessage *msg,
                              ProtobufCBinaryData *key, char keybuf[32], struct slotd_error *err);
/* Writes into keybuf (32 bytes) a short key whose hash slot is hs (< 256). */
void slot__hash_slot_key(uint16_t hs, char keybuf[32]);
/* The effective page size of a validated limit. */
static inline uint32_t slot__page(uint32_t limit)
{
    return limit == 0 ? SLOT_PAGE_DEFAULT : limit;
}

/* ---- Apply and serve (meta_user.c, meta_channel.c, meta_member.c). ---- */

#define SLOT__HELD_MAX 4          /* rows an apply or serve keeps until the reply is packed */
#define SLOT__SCRATCH_BYTES 1024u /* messages an apply builds for its result */

struct slot__apply {
    struct slot_fsm *f;
    uint16_t hs;
    uint64_t index;
    unsigned number;                  /* the command's oneof number */
    Slotd__V1__ProposeResponse *resp; /* applied_index, group, term already set */
    uint8_t *buf;                     /* on success: the packed response (free()) */
    size_t len;
    struct slotd_error *err; /* a rejection: code != SLOTD_OK, nothing written */
    /* Freed by the generic handler after the reply is packed (the result may point into them). */
    ProtobufCMessage *held[SLOT__HELD_MAX];
    size_t n_held;
    _Alignas(max_align_t) uint8_t scratch[SLOT__SCRATCH_BYTES];
    size_t scratch_used;
};

struct slot__serve {
    struct store *st;
    uint16_t hs;
    const uint8_t *owned; /* the group's owned hash slots (NULL: hs alone), for spanning lists */
    unsigned number;
    Slotd__V1__ReadResponse *resp;
    uint8_t *buf; /* on success: the packed response (free()) */
    size_t len;
    struct slotd_error *err;
    /* Freed by the generic handler after the reply is packed. */
    ProtobufCMessage *held[SLOT__HELD_MAX];
    size_t n_held;
    struct slot__rows strs;   /* a listing's uids (d NULL) */
    struct slot__rows rows;   /* a listing's rows */
    ProtobufCBinaryData next; /* a listing's next cursor (malloc'ed) */
};

/* An apply changes rows through the batch and fills result (an initialised message of the row's
 * result type); a query's serve fills result from the store. Both return 0 (result filled, or
 * err->code != SLOTD_OK for a rejection: nothing written) or a store error. */
typedef int (*slot__apply_fn)(struct slot__apply *a, const ProtobufCMessage *cmd,
                              ProtobufCMessage *result);
typedef int (*slot__serve_fn)(struct slot__serve *s, const ProtobufCMessage *query,
                              ProtobufCMessage *result);

/* The typed commands, declared once (meta_table.c builds the dispatch table from this list):
 * X(ONEOF NAME, validator, apply, result message). Validators are slot__v_<validator>
 * (meta_validate.c), applies slot__apply_<apply> (meta_user.c, meta_channel.c, meta_member.c).
 * Adding a kind: one row here, its validator and its apply. */
#define SLOT__META_COMMANDS(X)                                                                     \
    X(CREATE_USER, create_user, create_user, user_result)                                          \
    X(UPDATE_USER, update_user, update_user, user_result)                                          \
    X(PUT_DEVICE, put_device, put_device, device_result)                                           \
    X(REMOVE_DEVICE, remove_device, remove_device, remove_result)                                  \
    X(SET_SYSTEM_UID, set_system_uid, set_system_uid, system_uid_result)                           \
    X(DELETE_USER, uid_only, delete_user, delete_user_result)                                      \
    X(CREATE_CHANNEL, create_channel, create_channel, channel_result)                              \
    X(UPDATE_CHANNEL_FLAGS, update_channel_flags, update_channel_flags, channel_result)            \
    X(ADD_SUBSCRIBERS, subscribers, subscribers, members_result)                                   \
    X(REMOVE_SUBSCRIBERS, subscribers, subscribers, members_result)                                \
    X(ADD_ALLOWLIST, channel_list, channel_list, members_result)                                   \
    X(REMOVE_ALLOWLIST, channel_list, channel_list, members_result)                                \
    X(ADD_DENYLIST, channel_list, channel_list, members_result)                                    \
    X(REMOVE_DENYLIST, channel_list, channel_list, members_result)                                 \
    X(DELETE_CHANNEL, channel_only, delete_channel, delete_channel_result)                         \
    X(JOIN_CHANNEL, join_channel, join_channel, membership_result)                                 \
    X(LEAVE_CHANNEL, uid_channel, leave_channel, membership_result)                                \
    X(MARK_READ, uid_channel, mark_read, membership_result)                                        \
    X(HIDE_CONVERSATION, uid_channel, hide_conversation, membership_result)                        \
    X(ACTIVATE_CONVERSATION, activate, activate_conversation, membership_result)                   \
    X(BIND_CMD, uid_channel, bind_cmd, cmd_binding_result)                                         \
    X(ACK_CMD, uid_channel, ack_cmd, cmd_binding_result)                                           \
    X(UNBIND_CMD, uid_channel, unbind_cmd, cmd_binding_result)                                     \
    X(UPDATE_RUNTIME_META, update_runtime_meta, update_runtime_meta, runtime_meta_result)          \
    X(ADVANCE_RETENTION, advance_retention, advance_retention, runtime_meta_result)                \
    X(PUT_MIGRATION_TASK, put_migration_task, put_migration_task, migration_task_result)           \
    X(BIND_PLUGIN, bind_plugin, bind_plugin, plugin_binding_result)                                \
    X(UNBIND_PLUGIN, unbind_plugin, unbind_plugin, plugin_binding_result)                          \
    X(APPEND_EVENT, append_event, append_event, append_event_result)

/* The typed queries, the same way: X(ONEOF NAME, validator, serve, result message); serves are
 * slot__serve_<serve>. */
#define SLOT__META_QUERIES(X)                                                                      \
    X(GET_USER, uid_only, get_user, get_user_result)                                               \
    X(GET_DEVICE, get_device, get_device, get_device_result)                                       \
    X(IS_SYSTEM_UID, uid_only, is_system_uid, is_system_uid_result)                                \
    X(LIST_DEVICES, list_devices, list_devices, list_devices_result)                               \
    X(LIST_SYSTEM_UIDS, list_system_uids, list_system_uids, list_system_uids_result)               \
    X(GET_CHANNEL, channel_only, get_channel, get_channel_result)                                  \
    X(LIST_MEMBERS, list_members, list_members, list_members_result)                               \
    X(CHECK_MEMBER, check_member, check_member, check_member_result)                               \
    X(LIST_CHANNELS, list_channels, list_channels, list_channels_result)                           \
    X(GET_MEMBERSHIP, uid_channel, get_membership, get_membership_result)                          \
    X(LIST_CONVERSATIONS, list_conversations, list_conversations, list_conversations_result)       \
    X(GET_CMD_BINDING, uid_channel, get_cmd_binding, get_cmd_binding_result)                       \
    X(GET_RUNTIME_META, channel_only, get_runtime_meta, get_runtime_meta_result)                   \
    X(LIST_RUNTIME_META, list_runtime_meta, list_runtime_meta, list_runtime_meta_result)           \
    X(LIST_MIGRATION_TASKS, list_migration_tasks, list_migration_tasks,                            \
      list_migration_tasks_result)                                                                 \
    X(GET_PLUGIN_BINDING, uid_only, get_plugin_binding, get_plugin_binding_result)                 \
    X(LIST_PLUGIN_USERS, list_plugin_users, list_plugin_users, list_plugin_users_result)           \
    X(LIST_EVENTS, list_events, list_events, list_events_result)

#define SLOT__META_DECLARE_COMMAND(NAME, v, fn, r)                                                 \
    int slot__v_##v(struct slot__vctx *vc, const ProtobufCMessage *m, ProtobufCBinaryData *key);   \
    int slot__apply_##fn(struct slot__apply *a, const ProtobufCMessage *cmd,                       \
                         ProtobufCMessage *result);
#define SLOT__META_DECLARE_QUERY(NAME, v, fn, r)                                                   \
    int slot__v_##v(struct slot__vctx *vc, const ProtobufCMessage *m, ProtobufCBinaryData *key);   \
    int slot__serve_##fn(struct slot__serve *s, const ProtobufCMessage *query,                     \
                         ProtobufCMessage *result);
SLOT__META_COMMANDS(SLOT__META_DECLARE_COMMAND)
SLOT__META_QUERIES(SLOT__META_DECLARE_QUERY)

/* meta_member.c: deletes uid's memberships with their conversation index entries and its CMD
 * bindings (delete_user), within b. */
int slot__delete_user_memberships(struct slot__apply *a, const char *uid, struct slot__budget *b,
                                  uint32_t *memberships, uint32_t *cmd_bindings);

/* Dispatch (meta_table.c): validate, apply or serve typed command / query `number` through its
 * table row; the generic handlers build the result message, call the row's function and pack
 * the reply (a->buf / s->buf) unless it was refused. */
int slot__meta_apply(struct slot__apply *a, const ProtobufCMessage *cmd);
int slot__meta_serve(struct slot__serve *s, const ProtobufCMessage *query);

/* Reads row k through the batch (apply) or from the store (serve); *out (NULL when absent) is
 * kept until the reply is packed (at most SLOT__HELD_MAX rows per command). */
int slot__apply_row(struct slot__apply *a, const struct slot__key *k,
                    const ProtobufCMessageDescriptor *d, ProtobufCMessage **out);
int slot__serve_row(struct slot__serve *s, const struct slot__key *k,
                    const ProtobufCMessageDescriptor *d, ProtobufCMessage **out);
/* size bytes of zeroed memory that live until the reply is packed (for messages a result points
 * to); the bound is a programmer-error assert. */
void *slot__apply_scratch(struct slot__apply *a, size_t size);

/* A get's result: {found = 1, row = 2} filled from row k. */
int slot__serve_get(struct slot__serve *s, const struct slot__key *k,
                    const ProtobufCMessageDescriptor *d, ProtobufCMessage *result);
/* A listing's result: {repeated = 1, next_cursor = 2} from the rows under prefix p after cursor,
 * at most slot__page(limit): uids taken from the key suffixes (d NULL) or rows of type d. */
int slot__serve_list(struct slot__serve *s, const struct slot__key *p,
                     const ProtobufCBinaryData *cursor, uint32_t limit,
                     const ProtobufCMessageDescriptor *d, ProtobufCMessage *result);
/* A spanning listing's result (meta_span.c): the rows of `table` from the cursor's position (a
 * slot_list_cursor) through the group's run of owned hash slots, listed by cb (into s->rows of
 * type d, or s->strs when d is NULL), within the page bounds; next_cursor names where the next
 * page starts (the next run's first hash slot when this run ended), empty after hash slot 255. */
int slot__serve_span(struct slot__serve *s, uint8_t table, const ProtobufCBinaryData *cursor,
                     uint32_t limit, const ProtobufCMessageDescriptor *d, slot__scan_cb cb,
                     void *ctx, ProtobufCMessage *result);
/* Lists migration task rows into tf->s->rows, only those of tf->status when it is not 0. */
struct slot__task_filter {
    struct slot__serve *s;
    unsigned status;
};
int slot__collect_task(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val, size_t vl);
/* Sets result's repeated field 1 and next_cursor (field 2) to what s collected. */
void slot__serve_list_result(struct slot__serve *s, ProtobufCMessage *result, bool rows);

/* A rejection with SLOTD_ENOT_FOUND naming the missing row of channel (id, type). */
void slot__channel_not_found(struct slotd_error *err, const char *what, const char *id,
                             uint32_t type);
/* A rejection with SLOTD_ENOT_FOUND naming what is missing. */
void slot__not_found(struct slotd_error *err, const char *what, const char *id);

#endif /* SLOTD_SLOT_META_H */
