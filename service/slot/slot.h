/* slot.h - the slot layer: request limits and validation, and the slot state machine (FSM). */
#ifndef SLOTD_SLOT_H
#define SLOTD_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/rpc/status.h"
#include "service/slot/vcache.h"
#include "slotd/internal/v1/log.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"
#include "store/store.h"

/* Limits of the public API (store/FORMAT.md, README). */
#define SLOT_KEY_MAX 1024u
#define SLOT_VALUE_MAX (1u << 20)
#define SLOT_REQUEST_ID_MAX 64u
/* Limits of a txn (api/slotd/v1/metadata.proto, "Txn"). */
#define SLOT_TXN_COMPARES_MAX 16u
#define SLOT_TXN_OPS_MAX 64u                 /* per branch: success, failure */
#define SLOT_TXN_BYTES_MAX (1u << 20)        /* summed key and value bytes of compares and ops */
#define SLOT_TXN_RESULT_BYTES_MAX (2u << 20) /* summed value bytes get ops return (at apply) */
/* Request ids remembered per hash slot; the oldest is forgotten first. */
#define SLOT_DEDUPE_WINDOW 4096u
/* Leases: ttl_seconds 1..SLOT_LEASE_TTL_MAX; at most SLOT_LEASES_PER_SLOT_MAX live leases per
 * hash slot and SLOT_LEASE_KEYS_MAX keys per lease (a revoke deletes them in one entry). A lease
 * id is hash_slot << SLOT_LEASE_ID_SHIFT | seq (seq >= 1, per hash slot, never reused). */
#define SLOT_LEASE_TTL_MAX 31536000u
#define SLOT_LEASES_PER_SLOT_MAX 1024u
#define SLOT_LEASE_KEYS_MAX 10000u
#define SLOT_LEASE_ID_SHIFT 48
#define SLOT_LEASE_ROW_LEN 17u

/* Limits of the typed metadata commands and queries (docs/api.md). */
#define SLOT_UID_MAX 64u                   /* uid: 1..64 bytes */
#define SLOT_CHANNEL_ID_MAX 128u           /* channel_id: 1..128 bytes */
#define SLOT_TOKEN_MAX 256u                /* token, last_error: <= 256 bytes */
#define SLOT_NAME_MAX 64u                  /* plugin_no, event_type: 1..64 bytes */
#define SLOT_SMALL_INT_MAX 255u            /* device_flag, device_level, channel_type */
#define SLOT_BATCH_UIDS_MAX 1000u          /* uids per subscriber/allowlist/denylist command */
#define SLOT_BATCH_BYTES_MAX (64u * 1024u) /* summed uid bytes per such command */
#define SLOT_PAGE_MAX 1000u                /* list limit */
#define SLOT_PAGE_DEFAULT 100u             /* list limit 0 */
#define SLOT_LIST_PAGE_BYTES (1u << 20)    /* key and value bytes of the rows of one list page */
#define SLOT_LIST_SCAN_ROWS_MAX 10000u     /* rows one group visits (listed or not) for a page */
#define SLOT_EVENT_CAPACITY_MAX 1000u
#define SLOT_EVENT_CAPACITY_DEFAULT 100u
#define SLOT_EVENT_PAYLOAD_MAX 4096u
#define SLOT_DELETE_ROWS_MAX 10000u /* rows one delete_user / delete_channel entry deletes */
#define SLOT_REPLICAS_MAX 16u       /* replicas and isr of a channel's runtime meta */

/* FSM tables under [hash_slot u16][table u8] (store/FORMAT.md). */
enum slot_table {
    SLOT_TABLE_KV = 1,           /* [key] -> [ver][version u64][value] */
    SLOT_TABLE_DEDUPE = 2,       /* [request_id] -> [ver][seq u64][ProposeResponse] */
    SLOT_TABLE_DEDUPE_ORDER = 3, /* [seq u64] -> request_id */
    SLOT_TABLE_DEDUPE_META = 4,  /* [] -> [ver][next_seq u64][oldest_seq u64] */
    /* Typed metadata; a value is [ver][packed slotd.v1 row message] or [ver] for a set member.
     * [s] is a string prefixed by its length (u8), [S] a string that ends the key. */
    SLOT_TABLE_USER = 5,           /* [S uid] -> User */
    SLOT_TABLE_DEVICE = 6,         /* [s uid][device_flag u8] -> Device */
    SLOT_TABLE_SYSTEM_UID = 7,     /* [S uid] -> [ver] */
    SLOT_TABLE_CHANNEL = 8,        /* [S channel_id] -> Channel */
    SLOT_TABLE_CHANNEL_MEMBER = 9, /* [s channel_id][list u8][S uid] -> [ver] */
    SLOT_TABLE_MEMBERSHIP = 10,    /* [s uid][S channel_id] -> Membership */
    SLOT_TABLE_CONVERSATION = 11,  /* [s uid][~activated_at_ms u64][S channel_id] -> [ver] */
    SLOT_TABLE_CMD_BINDING = 12,   /* [s uid][S channel_id] -> CmdBinding */
    SLOT_TABLE_RUNTIME_META = 13,  /* [S channel_id] -> ChannelRuntimeMeta */
    SLOT_TABLE_MIGRATION = 14,     /* [s channel_id][task_id u64] -> ChannelMigrationTask */
    SLOT_TABLE_PLUGIN = 15,        /* [S uid] -> PluginBinding */
    SLOT_TABLE_PLUGIN_USER = 16,   /* [s plugin_no][S uid] -> [ver] */
    SLOT_TABLE_EVENT = 17,         /* [s channel_id][~event_seq u64] -> ChannelEvent */
    /* Leases (lease.c): a lease lives in one hash slot with the keys attached to it. */
    SLOT_TABLE_LEASE = 18,      /* [id u64] -> [ver][ttl_s u32][refreshed_index u64][keys u32] */
    SLOT_TABLE_LEASE_KEY = 19,  /* [id u64][S key] -> [ver]: key is attached to lease id */
    SLOT_TABLE_LEASE_META = 20, /* [] -> [ver][next_seq u64][leases u32] */
};
/* Per-group metadata under [0xFFFF][group u32][sub u8]. */
#define SLOT_GROUP_META_OWNED 1 /* -> [ver][256-bit owned hash slot bitmap] */
#define SLOT_GROUP_META_SNAPSHOT                                                                   \
    2 /* -> [ver][index u64][term u64] of the last installed snapshot */
/* -> [ver][fenced 32][incoming 32][task u64][chunks u32][rows u64][crc u32] (absent = all 0) */
#define SLOT_GROUP_META_MIGRATION 3
#define SLOT_GROUP_META_MIGRATION_LEN 89
/* Group 0 only: -> [ver][canonical cluster-state JSON], the controller state machine at the
 * applied index stored in the same batch (service/runtime/ctl.c). */
#define SLOT_GROUP_META_CTL_STATE 4
/* A data group's snapshot install in progress (service/runtime/snapshot.c spool_pass): present from
 * the install's first batch to its last; a restart finishes the install from the spool file. */
#define SLOT_GROUP_META_INSTALL 5
/* Rows one migration entry may delete (hash slots wiped by MigrationRows seq 0, release, abort);
 * an entry over it is refused (INVALID_FIELD hash_slots) and changes nothing. */
#define SLOT_MIGRATION_WIPE_ROWS_MAX ((size_t)1 << 24)

/* ---- Validation (validate.c): every violation names the field and limit. ---- */

/* Validates a decoded ProposeRequest; returns 0 or fills err. The routing key
 * is returned borrowed from req: for a typed command (a uid or channel id string, or the hash
 * slot of list_plugin_users) it is held by a per-thread holder that stays valid until the
 * calling thread's next slot_validate_propose()/slot_validate_read(). */
int slot_validate_propose(const Slotd__V1__ProposeRequest *req, const ProtobufCBinaryData **key,
                          struct slotd_error *err);
/* Validates a txn (borrowed for the call): counts, bytes, keys, values, enum values. *first is
 * the routing key (borrowed from txn): the first compare's key, else the first success op's,
 * else the first failure op's. Returns 0 or fills err. The FSM calls it again at apply. */
int slot_validate_txn(const Slotd__V1__TxnCommand *txn, const ProtobufCBinaryData **first,
                      struct slotd_error *err);
/* Calls cb for every key of a validated txn (compares, then success, then failure ops) with the
 * key (borrowed), its field name ("txn.compares[0].key") and whether the op writes it; stops and
 * returns cb's first non-zero answer. */
typedef int (*slot_txn_key_cb)(void *ctx, const ProtobufCBinaryData *key, const char *field,
                               bool writes);
int slot_txn_each_key(const Slotd__V1__TxnCommand *txn, slot_txn_key_cb cb, void *ctx);
int slot_validate_read(const Slotd__V1__ReadRequest *req, const ProtobufCBinaryData **key,
                       struct slotd_error *err);

/* Encodes the log entry for a validated request (caller frees *buf with free()). */
int slot_encode_command(const Slotd__V1__ProposeRequest *req, uint16_t hash_slot, uint8_t **buf,
                        size_t *len);
/* Encodes the first entry of a group (GroupInit with the owned ranges of slot_group[]). */
int slot_encode_group_init(uint32_t group, const uint32_t slot_group[256], uint8_t **buf,
                           size_t *len);

/* ---- The state machine (fsm.c). ---- */

/* Replicated per-group state the FSM decides with (every replica identical). */
struct slot_group_state {
    uint32_t group;
    bool initialized;  /* GroupInit applied */
    uint8_t owned[32]; /* bitmap of owned hash slots (bit s % 8 of byte s / 8) */
    /* Hash-slot migration (migrate.c), persisted as SLOT_GROUP_META_MIGRATION. */
    uint8_t fenced[32];   /* source side: writes refused; invariant: fenced is within owned */
    uint8_t incoming[32]; /* target side: slots being copied in; invariant: disjoint from owned */
    uint64_t migration_task;   /* task of the last fence or copy (0 = none) */
    uint32_t migration_chunks; /* MigrationRows chunks received for incoming (next seq) */
    uint64_t migration_rows;   /* rows received in those chunks */
    uint32_t migration_crc;    /* slot_migration_row_crc chained over those rows */
};

bool slot_group_owns(const struct slot_group_state *gs, uint16_t hash_slot);
bool slot_group_fenced(const struct slot_group_state *gs, uint16_t hash_slot);
bool slot_group_incoming(const struct slot_group_state *gs, uint16_t hash_slot);

/* The SLOT_GROUP_META_MIGRATION record of gs (borrowed for the call) into out. */
void slot_group_migration_encode(const struct slot_group_state *gs,
                                 uint8_t out[SLOT_GROUP_META_MIGRATION_LEN]);
/* Decodes such a record (v borrowed for the call) into the migration fields of gs; returns 0,
 * or STORE_ECORRUPT (gs unchanged) unless len is exactly 89 and the version byte is 1. */
int slot_group_migration_decode(const void *v, size_t len, struct slot_group_state *gs);

/* CRC-32/IEEE (zlib crc32 semantics, start from 0) chained from crc over one migrated row:
 * be32(kl) | key | be32(vl) | value. key and value are borrowed for the call. */
uint32_t slot_migration_row_crc(uint32_t crc, const void *key, size_t kl, const void *value,
                                size_t vl);

/* Result of one applied entry for the caller waiting on it. */
struct slot_result {
    struct slotd_error err; /* err.code == SLOTD_OK on success */
    uint8_t *resp;          /* packed ProposeResponse; caller frees with free() */
    size_t resp_len;
};

struct slot_fsm; /* one per applying thread: a write batch plus an overlay of its writes */

int slot_fsm_new(struct store *store, struct slot_fsm **out);
void slot_fsm_free(struct slot_fsm *f);
/* Every writer of fsm rows other than this fsm (a snapshot install, a removed replica's
 * deletion) calls this after its write: the fsm forgets the key rows' versions it cached
 * (vcache.h) and reads them from the store again. Same thread rule as the apply. */
void slot_fsm_forget_rows(struct slot_fsm *f);
/* Hits, misses and clears of that cache since slot_fsm_new(). */
void slot_fsm_cache_stats(const struct slot_fsm *f, struct slot_vcache_stats *out);

/* Whether a group other than `group` hosted on this node owns hash_slot or is receiving it
 * (incoming): the node's fsm rows of a hash slot are shared by the groups hosted on it. */
typedef bool (*slot_claim_cb)(void *ctx, uint32_t group, uint16_t hash_slot);
/* Registers cb (ctx borrowed until slot_fsm_free; cb NULL = no other group shares rows). A
 * migration entry that deletes a hash slot's rows (MigrationRows seq 0, release, abort) leaves
 * them alone where cb says another hosted group claims the slot; the replicated group state
 * changes the same on every replica either way. */
void slot_fsm_set_claim_cb(struct slot_fsm *f, slot_claim_cb cb, void *ctx);

/* Loads a group's replicated state from the store: the owned and migration records (STORE_ECORRUPT
 * when either has a wrong length or version). */
int slot_fsm_load_group(struct slot_fsm *f, uint32_t group, struct slot_group_state *gs);

/* Starts a new batch (drops the previous batch and overlay). */
void slot_fsm_begin(struct slot_fsm *f);
/* Applies one committed entry (data borrowed for the call) into the batch.
 * When out != NULL it receives the result for a waiting caller. Returns 0,
 * or a store error (the batch is then unusable). A command the group must
 * reject (wrong hash slot, fenced hash slot, undecodable, a migration entry
 * out of order) is not an error: it changes nothing and its result says why,
 * identically on every replica. */
int slot_fsm_apply(struct slot_fsm *f, struct slot_group_state *gs, uint64_t index, uint64_t term,
                   const void *data, size_t len, struct slot_result *out);
/* Records the group's applied index in the batch. */
void slot_fsm_set_applied(struct slot_fsm *f, uint32_t group, uint64_t index);
/* Writes the batch (unsynced: the raft log is the durable record). */
int slot_fsm_commit(struct slot_fsm *f);

/* A change of a key row made by an applied entry (put, delete, cas, txn ops), for watchers.
 * Typed metadata rows and migration rows make none. */
struct slot_event {
    struct slot_event *next;
    uint32_t group;
    uint64_t index;   /* the entry that made it; a txn makes several with one index */
    uint64_t version; /* put: the new version (= index); delete: 0 */
    bool deleted;
    uint8_t table; /* SLOT_TABLE_KV, or the typed table of the row (slot_typed_table_watched) */
    uint32_t key_len, value_len;
    /* into data: the key (KV), or the row's primary key after its table byte (typed); the
     * value (KV), or the packed message of a typed row (none for a set member or a delete) */
    uint8_t *key, *value;
    uint8_t data[];
};
/* Off (the default): nothing is recorded. On: slot_fsm_apply records every key change and
 * every change of a typed row in a table slot_typed_table_watched() names (a delete only when
 * the row existed). */
void slot_fsm_set_events(struct slot_fsm *f, bool on);
/* Whether changes of typed table `table` are recorded as events (the tables a typed watch
 * kind covers: not the conversation index nor the plugin reverse index). */
bool slot_typed_table_watched(uint8_t table);
/* Whether a typed row event of `table` with primary key k (kl bytes, after the table byte)
 * belongs to what a typed watch of kind (slotd.v1.TypedWatchKind) on id (id_len bytes)
 * follows: USER the uid's rows, CHANNEL the channel's rows, SUBSCRIBERS its list-1 members. */
bool slot_typed_watch_match(uint32_t kind, const uint8_t *id, size_t id_len, uint8_t table,
                            const uint8_t *k, size_t kl);
/* The events recorded since the last take, in apply order; the caller frees the list. */
struct slot_event *slot_fsm_take_events(struct slot_fsm *f);
void slot_events_free(struct slot_event *e);
/* The same; with sync, the write (and every earlier fsm write) is on disk when it returns. */
int slot_fsm_commit_sync(struct slot_fsm *f, bool sync);
size_t slot_fsm_batch_bytes(const struct slot_fsm *f);

/* Reads a key from the applied state. On success *value is malloc'ed (caller
 * frees with free()) or NULL when !*found. */
int slot_fsm_get(struct store *store, uint16_t hash_slot, const void *key, size_t len, bool *found,
                 void **value, size_t *value_len, uint64_t *version);
/* The same, with the key's lease (0 = none). */
int slot_fsm_get_lease(struct store *store, uint16_t hash_slot, const void *key, size_t len,
                       bool *found, void **value, size_t *value_len, uint64_t *version,
                       uint64_t *lease);

/* Decodes a stored KV row value: [1][version u64][value] (no lease) or
 * [2][version u64][lease u64][value]. Returns 0 with the value at raw + *value_off, or
 * STORE_ECORRUPT. */
int slot_kv_decode(const uint8_t *raw, size_t len, uint64_t *version, uint64_t *lease,
                   size_t *value_off);

/* ---- Leases (lease.c) ---- */

struct slot_lease_info {
    uint64_t id;
    uint32_t ttl_seconds;
    uint64_t refreshed_index; /* the entry of its grant or last keep-alive */
};
/* Calls cb for each lease stored in hash slot hs with id >= from_id, in id order, at most max
 * times; *more says whether more leases follow. Reads the applied state of the store (any
 * thread). cb returns non-zero to stop. */
typedef int (*slot_lease_cb)(void *ctx, const struct slot_lease_info *l);
int slot_lease_scan(struct store *store, uint16_t hs, uint64_t from_id, size_t max,
                    slot_lease_cb cb, void *ctx, bool *more);
/* Validates a lease command (ProposeRequest field number lease_grant .. lease_revoke, msg its
 * message): the routing key is the grant's key (borrowed) or a key of the id's hash slot (in
 * keybuf). */
int slot_lease_validate(unsigned number, const ProtobufCMessage *msg, ProtobufCBinaryData *key,
                        char keybuf[32], struct slotd_error *err);
/* A lease id's hash slot; INVALID_FIELD naming field when id is not a lease id. */
int slot_lease_id_check(uint64_t id, const char *field, uint16_t *hs, struct slotd_error *err);
/* How many committed batches of f wrote lease rows (grants, keep-alives; any thread): a
 * leader's timer scans again when it moves. */
uint64_t slot_fsm_lease_commits(struct slot_fsm *f);
/* Packs a LogCommand LeaseExpire for lease id (malloc'ed *buf). */
int slot_encode_lease_expire(uint64_t id, uint64_t refreshed_index, uint8_t **buf, size_t *len);

/* ---- Range (range.c). ---- */

/* Key and value bytes of one Range page; the page stops before the entry that would pass it. */
#define SLOT_RANGE_PAGE_BYTES (4u << 20)

/* Validates a range query (borrowed): bounds, limit, cursor. *hash_slot is the hash slot the page
 * starts at (the cursor's, else 0). Returns 0 or fills err (field range.*). */
int slot_validate_range(const Slotd__V1__RangeQuery *q, uint16_t *hash_slot,
                        struct slotd_error *err);
/* A cursor as every listing writes it: [version][crc32 u32 of the rest][fields][tail], into
 * out->data (malloc'ed; caller frees with free()). Returns 0 or STORE_ENOMEM. */
int slot__cursor_make(uint8_t version, const uint8_t *fields, size_t fl, const uint8_t *tail,
                      size_t tl, ProtobufCBinaryData *out);
/* Decodes q's cursor: its hash slot and last key (borrowed from q; empty = the hash slot's first
 * key). An empty cursor is hash slot 0. Returns 0, or -1 when malformed or made for other bounds.
 */
int slot_range_cursor_decode(const Slotd__V1__RangeQuery *q, uint16_t *hash_slot,
                             ProtobufCBinaryData *last);
/* The cursor (out->data malloc'ed; free()) that continues q's bounds (q->cursor unused) in hash
 * slot hs after key last (ll bytes; 0 = from hs's first key). Returns 0 or STORE_ENOMEM. */
int slot_range_cursor_make(const Slotd__V1__RangeQuery *q, uint16_t hs, const uint8_t *last,
                           size_t ll, ProtobufCBinaryData *out);
/* Fills res with one page of q from hash slot hash_slot (the cursor's) through the contiguous run
 * of hash slots set in owned (NULL: hash_slot alone). Free res with slot_range_result_free(). */
int slot_serve_range(struct store *st, const uint8_t owned[32], uint16_t hash_slot,
                     const Slotd__V1__RangeQuery *q, Slotd__V1__RangeResult *res,
                     struct slotd_error *err);
void slot_range_result_free(Slotd__V1__RangeResult *res);

/* ---- Typed listings that span hash slots (meta_span.c). ---- */

/* Whether the (validated) query of r lists rows of every hash slot: list_system_uids,
 * list_channels, list_runtime_meta, list_migration_tasks without channel_id. The node merges
 * such a page from the groups of the next runs of hash slots. */
bool slot_list_spans(const Slotd__V1__ReadRequest *r);
/* A spanning listing's cursor: [2][crc32 u32][hash slot u16][key suffix of the last row]. An
 * empty cursor is hash slot 0's first row. Returns 0 (*suffix borrowed from c) or -1. */
int slot_list_cursor_decode(const ProtobufCBinaryData *c, uint16_t *hs, const uint8_t **suffix,
                            size_t *sl);
/* The cursor at hash slot hs after key suffix (sl bytes; 0 = from hs's first row); out->data is
 * malloc'ed (free()). Returns 0 or STORE_ENOMEM. */
int slot_list_cursor_make(uint16_t hs, const uint8_t *suffix, size_t sl, ProtobufCBinaryData *out);
/* The cursor right after `entry` (borrowed: a uid string of list_system_uids, else the listed
 * message) of spanning listing query_case. Returns 0, STORE_ENOMEM or STORE_EINVAL. */
int slot_list_entry_cursor(unsigned query_case, const void *entry, ProtobufCBinaryData *out);

/* ---- Reads (read.c). ---- */

/* Serves a packed, validated ReadRequest (borrowed for the call) against the applied state of
 * `group` at hash slot hash_slot; a range query scans on through the run of hash slots set in
 * owned (the group's owned bitmap, NULL = hash_slot alone). On success *out is a packed
 * ReadResponse carrying group, applied_index and term (caller frees with free()); on error err is
 * filled. */
int slot_serve_read(struct store *store, const uint8_t *owned, uint16_t hash_slot,
                    const uint8_t *req, size_t len, uint32_t group, uint64_t applied_index,
                    uint64_t term, uint8_t **out, size_t *out_len, struct slotd_error *err);

#endif /* SLOTD_SLOT_H */
