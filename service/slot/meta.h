/* meta.h - internals shared by the typed metadata files of the slot layer (not a public API). */
#ifndef SLOTD_SLOT_META_H
#define SLOTD_SLOT_META_H

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
int slot__key_delete(struct slot_fsm *f, const struct slot__key *k);

/* fsm.c: the batch overlay (later entries of a batch read earlier ones). *val is malloc'ed
 * (caller frees with free()) when *found; v == NULL deletes. */
int slot__fsm_read(struct slot_fsm *f, const uint8_t *k, size_t kl, bool *found, uint8_t **val,
                   size_t *vl);
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

/* The same reads against the applied state (read path). */
int slot__store_row_get(struct store *st, const struct slot__key *k,
                        const ProtobufCMessageDescriptor *d, ProtobufCMessage **out);
int slot__store_flag_get(struct store *st, const struct slot__key *k, bool *present);

/* ---- Cursors and scans (read path). ---- */

/* A cursor is [1][crc32 u32 of suffix][suffix]: the key suffix (after the listed prefix) of
 * the last row returned. Returns 0 when c is empty or well formed, else -1. */
int slot__cursor_check(const ProtobufCBinaryData *c);

/* Visits rows under prefix p after the cursor (borrowed), at most limit; cb gets the key suffix
 * and value (borrowed for the call) and returns 0 or an error that stops the scan. On success
 * *next is the cursor of the last visited row when more rows follow (caller frees with free()),
 * else NULL. */
typedef int (*slot__scan_cb)(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                             size_t vl);
int slot__scan(struct store *st, const struct slot__key *p, const ProtobufCBinaryData *cursor,
               uint32_t limit, slot__scan_cb cb, void *ctx, ProtobufCBinaryData *next);

/* Collects scanned key suffixes as strings (uids); allocate v for `limit` entries first. */
struct slot__strs {
    char **v;
    size_t n;
    size_t cap;
};
int slot__strs_init(struct slot__strs *s, size_t cap);
int slot__collect_suffix(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val,
                         size_t vl);
void slot__strs_free(struct slot__strs *s);

/* Collects scanned row values decoded as messages of d. */
struct slot__rows {
    const ProtobufCMessageDescriptor *d;
    ProtobufCMessage **v;
    size_t n;
    size_t cap;
};
int slot__rows_init(struct slot__rows *r, const ProtobufCMessageDescriptor *d, size_t cap);
int slot__collect_row(void *ctx, const uint8_t *suffix, size_t sl, const uint8_t *val, size_t vl);
void slot__rows_free(struct slot__rows *r);

/* ---- Validation (meta_validate.c). ---- */

/* Whether number is a typed alternative of ProposeRequest.command / ReadRequest.query. */
bool slot__meta_is_command(unsigned number);
bool slot__meta_is_query(unsigned number);
/* Validates typed command `number` (msg borrowed) and fills *key with its routing key (borrowed
 * from msg). `field` names the oneof alternative ("add_subscribers"). */
int slot__meta_validate_command(unsigned number, const ProtobufCMessage *msg,
                                ProtobufCBinaryData *key, struct slotd_error *err);
/* As above for a typed query; list_plugin_users' routing key is held in keybuf. */
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

struct slot__apply {
    struct slot_fsm *f;
    uint16_t hs;
    uint64_t index;
    unsigned number;                  /* the command's oneof number */
    Slotd__V1__ProposeResponse *resp; /* applied_index, group, term already set */
    uint8_t *buf;                     /* on success: the packed response (free()) */
    size_t len;
    struct slotd_error *err; /* a rejection: code != SLOTD_OK, nothing written */
};

struct slot__serve {
    struct store *st;
    uint16_t hs;
    unsigned number;
    Slotd__V1__ReadResponse *resp;
    uint8_t *buf; /* on success: the packed response (free()) */
    size_t len;
    struct slotd_error *err;
};

/* Handlers return 0 (a->buf set, or a->err->code != SLOTD_OK for a rejection) or a store error. */
struct slot__meta_op {
    unsigned number;
    int (*apply)(struct slot__apply *a, const ProtobufCMessage *cmd);
    int (*serve)(struct slot__serve *s, const ProtobufCMessage *query);
};

extern const struct slot__meta_op slot__user_ops[];
extern const size_t slot__user_ops_len;
extern const struct slot__meta_op slot__channel_ops[];
extern const size_t slot__channel_ops_len;
extern const struct slot__meta_op slot__member_ops[];
extern const size_t slot__member_ops_len;
/* Queries of the same files (serve set, apply NULL). */
extern const struct slot__meta_op slot__user_queries[];
extern const size_t slot__user_queries_len;
extern const struct slot__meta_op slot__channel_queries[];
extern const size_t slot__channel_queries_len;
extern const struct slot__meta_op slot__member_queries[];
extern const size_t slot__member_queries_len;

/* Sets result as the response's alternative a->number and packs it into a->buf. */
int slot__apply_reply(struct slot__apply *a, const ProtobufCMessage *result);
int slot__serve_reply(struct slot__serve *s, const ProtobufCMessage *result);

/* Dispatch (meta_common.c): apply typed command `number`; serve typed query `number`. */
int slot__meta_apply(struct slot__apply *a, const ProtobufCMessage *cmd);
int slot__meta_serve(struct slot__serve *s, const ProtobufCMessage *query);

/* A rejection with SLOTD_ENOT_FOUND naming what is missing. */
void slot__not_found(struct slotd_error *err, const char *what, const char *id);

#endif /* SLOTD_SLOT_META_H */
