/* client.h - libslotd: route-aware synchronous C client for slotd.v1.Metadata. */
#ifndef SLOTD_CLIENT_H
#define SLOTD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------------------------ */

/* Every libslotd function returns one of these; 0 is success. */
#define SLOTD_CLIENT_ERRORS(X)                                                                     \
    X(SLOTD_CLIENT_OK, "ok")                                                                       \
    X(SLOTD_CLIENT_EINVAL, "invalid argument")                                                     \
    X(SLOTD_CLIENT_ECAS_MISMATCH, "compare-and-set version mismatch")                              \
    X(SLOTD_CLIENT_EPRECONDITION, "failed precondition")                                           \
    X(SLOTD_CLIENT_EUNAVAILABLE, "unavailable")                                                    \
    X(SLOTD_CLIENT_ETIMEOUT, "deadline exceeded")                                                  \
    X(SLOTD_CLIENT_EEXHAUSTED, "resource exhausted")                                               \
    X(SLOTD_CLIENT_ENOTFOUND, "not found")                                                         \
    X(SLOTD_CLIENT_EMALFORMED, "malformed response")                                               \
    X(SLOTD_CLIENT_ENOMEM, "out of memory")                                                        \
    X(SLOTD_CLIENT_ERPC, "rpc failed")                                                             \
    X(SLOTD_CLIENT_ESTALE_REVISION, "stale expected revision")

enum slotd_client_err {
#define SLOTD_CLIENT__ENUM(name, text) name,
    SLOTD_CLIENT_ERRORS(SLOTD_CLIENT__ENUM)
#undef SLOTD_CLIENT__ENUM
        SLOTD_CLIENT_ERR_COUNT
};

/* Static text of err ("unavailable"); "unknown error" for values outside the enum. */
const char *slotd_client_strerror(int err);

/* slotd.v1.ErrorCode values (the ErrorDetail a server attaches to a failed call). */
enum slotd_error_code {
    SLOTD_ERROR_CODE_UNSPECIFIED = 0,
    SLOTD_ERROR_CODE_INVALID_FIELD = 1,
    SLOTD_ERROR_CODE_NOT_LEADER = 2,
    SLOTD_ERROR_CODE_NO_LEADER = 3,
    SLOTD_ERROR_CODE_ROUTE_NOT_READY = 4,
    SLOTD_ERROR_CODE_QUEUE_FULL = 5,
    SLOTD_ERROR_CODE_UNKNOWN_OUTCOME = 6,
    SLOTD_ERROR_CODE_WRONG_GROUP = 7,
    SLOTD_ERROR_CODE_STALE_FENCE = 8,
    SLOTD_ERROR_CODE_HASH_SLOT_FENCED = 9,
    SLOTD_ERROR_CODE_NOT_FOUND = 10,
    SLOTD_ERROR_CODE_SHUTTING_DOWN = 11,
    SLOTD_ERROR_CODE_STORAGE = 12,
    SLOTD_ERROR_CODE_MALFORMED = 13,
    SLOTD_ERROR_CODE_COMPACTED = 14,
};

/* Static name of a slotd.v1.ErrorCode without its prefix ("NOT_LEADER"); "UNKNOWN" otherwise. */
const char *slotd_error_code_name(int code);

/* Static name of a gRPC status code ("UNAVAILABLE"); "UNKNOWN_STATUS" outside 0..16. */
const char *slotd_grpc_status_name(int status);

#define SLOTD_STATUS_MESSAGE_LEN 512
#define SLOTD_FIELD_LEN 64
#define SLOTD_ADDRESS_LEN 255

/* The outcome of the last attempt of a call: its gRPC status and the server's ErrorDetail. */
struct slotd_status {
    int grpc_status;                        /* 0 (OK) on success; -1 when no call was made */
    char message[SLOTD_STATUS_MESSAGE_LEN]; /* a sentence: "put: UNAVAILABLE: ..." ("" on ok) */
    bool has_detail;                        /* a slotd.v1.ErrorDetail came with the status */
    int detail_code;                        /* enum slotd_error_code */
    char field[SLOTD_FIELD_LEN];            /* INVALID_FIELD: the request field ("put.key") */
    uint64_t limit;                         /* INVALID_FIELD: the field's limit */
    uint32_t retry_after_ms;                /* retriable errors: the server's suggested wait */
    uint64_t leader_node_id;                /* NOT_LEADER: leader hint (0 = none) */
    char leader_address[SLOTD_ADDRESS_LEN + 1];
    uint32_t leader_group_id;
    uint64_t leader_term;
    char address[SLOTD_ADDRESS_LEN + 1]; /* the node the last attempt went to */
    /* COMPACTED (a watch resumed behind a group's history): that group and the oldest
     * position a watch can resume from in it */
    uint32_t compacted_group_id;
    uint64_t compacted_index;
};

/* ---- the client ---------------------------------------------------------------------------- */

struct slotd_client_options {
    int deadline_ms;      /* per attempt; 0 = 5000 */
    int max_retries;      /* retries of retriable failures; 0 = 3, negative = none */
    int route_refresh_ms; /* refetch the route when older than this; 0 = only when a call fails */
    /* TLS (gRPC SSL channel credentials) for every channel when tls_ca_file or tls_cert_file is
     * set; all NULL (default): plaintext. PEM file paths, read by slotd_client_new (borrowed for
     * that call). tls_ca_file verifies the servers (NULL: gRPC's default roots);
     * tls_cert_file and tls_key_file (both or neither) are the client certificate for servers
     * that require one (mTLS). tls_server_name (NULL: the host of each address) is the name
     * checked in the servers' certificates. */
    const char *tls_ca_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_server_name;
};

/* Largest PEM file slotd_client_new reads; longest tls_server_name. */
#define SLOTD_CLIENT_PEM_MAX (1 << 20)
#define SLOTD_CLIENT_SERVER_NAME_MAX 255

/* Defaults: deadline_ms 5000, max_retries 3, route_refresh_ms 0. */
#define SLOTD_CLIENT_DEADLINE_MS_DEFAULT 5000
#define SLOTD_CLIENT_MAX_RETRIES_DEFAULT 3
#define SLOTD_CLIENT_DEADLINE_MS_MAX 3600000
#define SLOTD_CLIENT_MAX_RETRIES_MAX 100
/* At most this many seed endpoints, and this many distinct node addresses (channels). */
#define SLOTD_CLIENT_ENDPOINTS_MAX 16
#define SLOTD_CLIENT_NODES_MAX 64

struct slotd_client;

/*
 * endpoints: borrowed for the call, "host:port[,host:port...]" (1..SLOTD_CLIENT_ENDPOINTS_MAX
 * entries). o: borrowed for the call, NULL for the defaults. *out: caller frees with
 * slotd_client_free(). err: borrowed for the call, receives a sentence on failure. No network
 * traffic happens here: the route is fetched by the first call. Returns SLOTD_CLIENT_OK or
 * SLOTD_CLIENT_EINVAL (bad endpoints or options, or a TLS file that cannot be read; err names
 * the option and the file) / SLOTD_CLIENT_ENOMEM. The client is safe to
 * use from many threads at once.
 */
int slotd_client_new(const char *endpoints, const struct slotd_client_options *o,
                     struct slotd_client **out, char *err, size_t errlen);

/* c: ownership transfers (closes every channel). NULL is a no-op. */
void slotd_client_free(struct slotd_client *c);

/* c, out: borrowed for the call. Copies the status of the client's most recently failed call
 * (any thread); grpc_status -1 when no call has failed yet. */
void slotd_client_last_error(struct slotd_client *c, struct slotd_status *out);

/* ---- read your admin writes ----------------------------------------------------------------- */

/* c: borrowed for the call. The highest controller revision this client has seen (0: none):
 * from admin writes, cluster states, task lists and routes it received. Its RouteSnapshot,
 * ClusterState and TaskStatus calls send it as min_revision, so the node asked answers only
 * from that cluster state or a newer one (it waits up to 3 s, then the call fails
 * SLOTD_CLIENT_EUNAVAILABLE naming the revision it reached). */
uint64_t slotd_client_last_revision(const struct slotd_client *c);
/* c: borrowed for the call. Raises the client's last revision to revision (never lowers it):
 * carries what another client or process saw to this one. */
void slotd_client_observe_revision(struct slotd_client *c, uint64_t revision);

/* ---- writes --------------------------------------------------------------------------------- */

enum slotd_write_kind { SLOTD_WRITE_PUT, SLOTD_WRITE_DELETE, SLOTD_WRITE_CAS };

#define SLOTD_REQUEST_ID_LEN_MAX 64
#define SLOTD_REQUEST_ID_LEN_DEFAULT 16

/* One Propose. Pointers are borrowed for the call. */
struct slotd_write {
    enum slotd_write_kind kind;
    const void *key;
    size_t key_len;
    const void *value; /* PUT and CAS */
    size_t value_len;
    uint64_t expected_version; /* CAS: 0 = the key must be absent */
    bool cas_delete;           /* CAS: delete instead of writing value */
    /* 1..64 bytes; NULL = a random 16-byte id chosen by the client (retries reuse it) */
    const void *request_id;
    size_t request_id_len;
    /* send no request id at all: then an ambiguous failure (UNAVAILABLE, deadline) is
     * returned to the caller, never retried, since the write might have been applied */
    bool no_request_id;
    /* PUT: attach the key to this lease (slotd_lease_grant(); it must live in the key's hash
     * slot, else SLOTD_CLIENT_EPRECONDITION and nothing is written); 0 = none, which also
     * detaches the key from a lease it had. Other kinds: must be 0. */
    uint64_t lease;
};

struct slotd_write_result {
    uint64_t applied_index; /* raft index of the entry that carried the command */
    uint32_t group_id;
    uint64_t term;
    bool deduplicated;      /* the server returned the stored result of this request id */
    uint64_t version;       /* PUT/CAS: the key's version afterwards (CAS: 0 if absent) */
    uint64_t prev_version;  /* PUT/DELETE */
    bool deleted;           /* DELETE: the key existed */
    bool cas_succeeded;     /* CAS */
    uint8_t *current_value; /* CAS mismatch: the current value (malloc'd, may be NULL) */
    size_t current_value_len;
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX]; /* the id sent (empty with no_request_id) */
    size_t request_id_len;
    unsigned attempts; /* calls made, redirects and retries included */
    struct slotd_status status;
};

/* r: borrowed for the call. Frees what a result owns (current_value) and clears it. */
void slotd_write_result_free(struct slotd_write_result *r);

/*
 * c, w, out: borrowed for the call; out must be freed with slotd_write_result_free() whatever
 * the return value. Sends w to the leader of its key's slot group (no_forward), following
 * NOT_LEADER hints, refreshing the route and retrying retriable failures up to max_retries
 * times when the call is idempotent (it carries a request id). Returns SLOTD_CLIENT_OK,
 * SLOTD_CLIENT_ECAS_MISMATCH (CAS only; out->version and out->current_value say what is
 * stored), or an error with out->status describing the last attempt.
 */
int slotd_write(struct slotd_client *c, const struct slotd_write *w,
                struct slotd_write_result *out);

/* Shorthands for slotd_write() with a client-chosen request id; same ownership. */
int slotd_put(struct slotd_client *c, const void *key, size_t klen, const void *val, size_t vlen,
              struct slotd_write_result *out);
/* A put attached to lease (0 = none: as slotd_put, detaching the key from its lease). */
int slotd_put_lease(struct slotd_client *c, const void *key, size_t klen, const void *val,
                    size_t vlen, uint64_t lease, struct slotd_write_result *out);
int slotd_delete(struct slotd_client *c, const void *key, size_t klen,
                 struct slotd_write_result *out);
int slotd_cas(struct slotd_client *c, const void *key, size_t klen, uint64_t expected_version,
              const void *val, size_t vlen, bool del, struct slotd_write_result *out);

/* ---- reads ---------------------------------------------------------------------------------- */

enum slotd_consistency {
    SLOTD_CONSISTENCY_LINEARIZABLE = 0, /* leader, after a ReadIndex round */
    SLOTD_CONSISTENCY_LEADER_LOCAL = 1, /* leader's applied state */
    SLOTD_CONSISTENCY_LOCAL = 2,        /* a replica's applied state (sent to the leader) */
};

struct slotd_value {
    bool found;
    uint8_t *value; /* malloc'd (NULL when not found or empty) */
    size_t value_len;
    uint64_t version;
    uint64_t applied_index;
    uint32_t group_id;
    uint64_t term;
    unsigned attempts;
    struct slotd_status status;
};

/* v: borrowed for the call. Frees v->value and clears v. */
void slotd_value_free(struct slotd_value *v);

/*
 * c, key, out: borrowed for the call; free out with slotd_value_free() whatever the return
 * value. consistency is an enum slotd_consistency; min_applied_index applies to LOCAL reads.
 * A missing key is SLOTD_CLIENT_OK with out->found false. Reads are retried like writes.
 */
int slotd_get(struct slotd_client *c, const void *key, size_t klen, int consistency,
              uint64_t min_applied_index, struct slotd_value *out);

/* ---- range: pages of keys across slot groups ------------------------------------------------ */

/* Entries per page when the query's limit is 0, and the most a page may ask for. */
#define SLOTD_RANGE_LIMIT_DEFAULT 100
#define SLOTD_RANGE_LIMIT_MAX 1000

/* One page of a Read range query (slotd.v1.RangeQuery). Pointers are borrowed for the call.
 * prefix, or [start, end) (end empty: no upper bound), or none of them: every key. Pages come
 * in hash-slot order (0..255), then in key byte order within a hash slot: not global key
 * order. */
struct slotd_range_query {
    const void *prefix;
    size_t prefix_len;
    const void *start;
    size_t start_len;
    const void *end;
    size_t end_len;
    uint32_t limit; /* entries per page: 0 = SLOTD_RANGE_LIMIT_DEFAULT, <= SLOTD_RANGE_LIMIT_MAX */
    bool keys_only;  /* entries carry no value */
    bool count_only; /* no entries, only the page's count */
    int consistency; /* enum slotd_consistency */
    /* the previous page's cursor (same prefix/start/end); NULL = from the first hash slot */
    const void *cursor;
    size_t cursor_len;
};

struct slotd_range_entry {
    uint8_t *key; /* malloc'd */
    size_t key_len;
    uint8_t *value; /* malloc'd (NULL with keys_only or an empty value) */
    size_t value_len;
    uint64_t version; /* raft index that last wrote the key */
};

struct slotd_range_page {
    struct slotd_range_entry *entries; /* malloc'd array of entry_count */
    size_t entry_count;
    uint32_t count; /* entries of the page (also with count_only) */
    bool more;      /* more pages may follow: ask again with cursor */
    /* malloc'd (NULL when more is false); a caller may keep it (free() it later) by setting
     * cursor to NULL before slotd_range_page_free() */
    uint8_t *cursor;
    size_t cursor_len;
    uint64_t applied_index; /* of the replica that served the page */
    uint32_t group_id;
    uint64_t term;
    unsigned attempts;
    struct slotd_status status;
};

/* p: borrowed for the call. Frees what the page owns and clears it. */
void slotd_range_page_free(struct slotd_range_page *p);

/*
 * c, q, out: borrowed for the call; free out with slotd_range_page_free() whatever the return
 * value. Reads one page: the node asked merges it from the slot groups of the next runs of
 * hash slots from the cursor's (forwarding to their leaders). A page may hold fewer than limit
 * entries, even none, while more is true. The server checks the query (INVALID_ARGUMENT names
 * the field: range.limit, range.prefix, ...). Retried like a get.
 */
int slotd_range(struct slotd_client *c, const struct slotd_range_query *q,
                struct slotd_range_page *out);

/* ---- txn: compares, then one branch of ops, atomic in one slot group ------------------------ */

/* What a compare reads of its key (slotd.v1.TxnTarget). */
enum slotd_txn_target {
    SLOTD_TXN_TARGET_VERSION = 1, /* the key's version (0 when absent) */
    SLOTD_TXN_TARGET_VALUE = 2,   /* the value, bytewise; false on an absent key */
    SLOTD_TXN_TARGET_EXISTS = 3,  /* op must be SLOTD_TXN_CMP_NONE */
    SLOTD_TXN_TARGET_ABSENT = 4,  /* op must be SLOTD_TXN_CMP_NONE */
};

/* current <op> given (slotd.v1.TxnCompareOp). */
enum slotd_txn_cmp {
    SLOTD_TXN_CMP_NONE = 0,
    SLOTD_TXN_CMP_EQUAL = 1,
    SLOTD_TXN_CMP_NOT_EQUAL = 2,
    SLOTD_TXN_CMP_GREATER = 3,
    SLOTD_TXN_CMP_LESS = 4,
};

struct slotd_txn_compare {
    const void *key;
    size_t key_len;
    int target;       /* enum slotd_txn_target */
    int op;           /* enum slotd_txn_cmp */
    uint64_t version; /* TARGET_VERSION */
    const void *value; /* TARGET_VALUE */
    size_t value_len;
};

enum slotd_txn_op_kind { SLOTD_TXN_PUT = 1, SLOTD_TXN_DELETE = 2, SLOTD_TXN_GET = 3 };

struct slotd_txn_op {
    int kind; /* enum slotd_txn_op_kind */
    const void *key;
    size_t key_len;
    const void *value; /* PUT */
    size_t value_len;
    uint64_t lease; /* PUT: as slotd_write.lease (0 = none); other kinds: must be 0 */
};

/* Server limits (slotd.v1.TxnCommand): compares, and ops of each branch. */
#define SLOTD_TXN_COMPARES_MAX 16
#define SLOTD_TXN_OPS_MAX 64

/* One txn Propose. Pointers are borrowed for the call. Every key must map to the slot group of
 * the first key (the first compare's, else the first success op's, else the first failure
 * op's); keys in two groups are refused with INVALID_ARGUMENT naming both. */
struct slotd_txn {
    const struct slotd_txn_compare *compares;
    size_t compare_count;
    const struct slotd_txn_op *success;
    size_t success_count;
    const struct slotd_txn_op *failure;
    size_t failure_count;
    /* as in struct slotd_write: NULL = a random 16-byte id (retries reuse it) */
    const void *request_id;
    size_t request_id_len;
    bool no_request_id;
};

struct slotd_txn_op_result {
    int kind;              /* enum slotd_txn_op_kind of the op */
    uint64_t version;      /* PUT: the new version; GET: the key's version */
    uint64_t prev_version; /* PUT, DELETE */
    bool deleted;          /* DELETE: the key existed */
    bool found;            /* GET */
    uint8_t *value;        /* GET: malloc'd (NULL when absent or empty) */
    size_t value_len;
};

struct slotd_txn_result {
    bool succeeded; /* every compare held: the success branch ran; else the failure branch */
    struct slotd_txn_op_result *results; /* malloc'd, one per op of the branch that ran */
    size_t result_count;
    uint64_t applied_index;
    uint32_t group_id;
    uint64_t term;
    bool deduplicated;
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX];
    size_t request_id_len;
    unsigned attempts;
    struct slotd_status status;
};

/* r: borrowed for the call. Frees what the result owns and clears it. */
void slotd_txn_result_free(struct slotd_txn_result *r);

/*
 * c, t, out: borrowed for the call; free out with slotd_txn_result_free() whatever the return
 * value. Sends the txn to the leader of the first key's group, following hints and retrying
 * like slotd_write() (only with a request id). A failed compare is SLOTD_CLIENT_OK with
 * out->succeeded false.
 */
int slotd_txn(struct slotd_client *c, const struct slotd_txn *t, struct slotd_txn_result *out);

/* ---- leases: keys deleted when their lease expires or is revoked ---------------------------- */

/* A lease lives in one hash slot: its id is hash_slot << SLOTD_LEASE_ID_SHIFT | a sequence
 * number (>= 1) of that hash slot, never reused. Only keys of that hash slot can be attached to
 * it (slotd_put_lease(), slotd_write.lease, slotd_txn_op.lease). */
#define SLOTD_LEASE_ID_SHIFT 48
/* ttl_seconds of a grant: 1..SLOTD_LEASE_TTL_MAX (365 days). */
#define SLOTD_LEASE_TTL_MAX 31536000u

/* The hash slot lease id lives in (id >> SLOTD_LEASE_ID_SHIFT), or -1 when id is not a lease id
 * (a hash slot above 255, or sequence number 0). */
int slotd_lease_hash_slot(uint64_t id);

/* The answer to a lease command. Owns no memory (nothing to free). */
struct slotd_lease_result {
    uint64_t id;            /* grant: the new lease's id; keep-alive, revoke: the id given */
    uint32_t ttl_seconds;   /* grant: the TTL granted; keep-alive: the TTL restarted */
    uint32_t keys;          /* keep-alive: keys attached to the lease */
    uint32_t keys_deleted;  /* revoke: keys deleted with the lease */
    uint64_t applied_index; /* raft index of the entry that carried the command */
    uint32_t group_id;
    uint64_t term;
    bool deduplicated; /* the server returned the stored result of this request id */
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX]; /* the random id sent (retries reuse it) */
    size_t request_id_len;
    unsigned attempts; /* 0 when the arguments were refused before any call */
    struct slotd_status status;
};

/*
 * c, key, out: borrowed for the call. Grants a lease of ttl_seconds (1..SLOTD_LEASE_TTL_MAX) in
 * the hash slot of key (the key itself is not written), sent to that group's leader like a put,
 * with a random request id so retries are safe. The lease expires ttl_seconds after its grant
 * or last keep-alive (as the group's leader measures it); its keys are then deleted. Returns
 * SLOTD_CLIENT_OK with out->id and out->ttl_seconds, SLOTD_CLIENT_EINVAL (a TTL out of range or
 * a NULL key with a length: no call, out->status.field "lease_grant.ttl_seconds" /
 * "lease_grant.key"; or the server's INVALID_ARGUMENT) or another error in out->status.
 */
int slotd_lease_grant(struct slotd_client *c, const void *key, size_t klen, uint32_t ttl_seconds,
                      struct slotd_lease_result *out);

/*
 * c, out: borrowed for the call. Restarts lease id's TTL; routed to the leader of the group
 * owning the id's hash slot. Returns SLOTD_CLIENT_OK with out->ttl_seconds and out->keys,
 * SLOTD_CLIENT_ENOTFOUND (gRPC NOT_FOUND: the lease expired or was revoked),
 * SLOTD_CLIENT_EINVAL (id is not a lease id: no call, out->status.field "lease_keep_alive.id")
 * or another error in out->status.
 */
int slotd_lease_keepalive(struct slotd_client *c, uint64_t id, struct slotd_lease_result *out);

/*
 * c, out: borrowed for the call. Deletes lease id and every key attached to it in one entry;
 * routed like slotd_lease_keepalive(). Returns SLOTD_CLIENT_OK with out->keys_deleted,
 * SLOTD_CLIENT_ENOTFOUND (already expired or revoked), SLOTD_CLIENT_EINVAL (not a lease id:
 * no call, out->status.field "lease_revoke.id") or another error in out->status.
 */
int slotd_lease_revoke(struct slotd_client *c, uint64_t id, struct slotd_lease_result *out);

/* ---- watch: a stream of key changes that resumes by itself ---------------------------------- */

/* A watch position: the index through which a group's changes were seen. */
struct slotd_watch_position {
    uint32_t group_id;
    uint64_t index;
};

enum slotd_watch_event_type { SLOTD_WATCH_PUT = 1, SLOTD_WATCH_DELETE = 2 };

/* What a typed watch follows instead of keys (slotd.v1.TypedWatchKind). */
enum slotd_typed_watch_kind {
    SLOTD_TYPED_WATCH_USER = 1,        /* every row of a uid */
    SLOTD_TYPED_WATCH_CHANNEL = 2,     /* every row of a channel */
    SLOTD_TYPED_WATCH_SUBSCRIBERS = 3, /* a channel's subscriber list */
};

/* The table of a typed row (slotd.v1.TypedTable; store/FORMAT.md): the event's key is the
 * row's primary key there, its value the row's packed slotd.v1 message (none for a member). */
enum slotd_typed_table {
    SLOTD_TYPED_TABLE_NONE = 0, /* a key of the key-value space */
    SLOTD_TYPED_TABLE_USER = 5,
    SLOTD_TYPED_TABLE_DEVICE = 6,
    SLOTD_TYPED_TABLE_SYSTEM_UID = 7,
    SLOTD_TYPED_TABLE_CHANNEL = 8,
    SLOTD_TYPED_TABLE_CHANNEL_MEMBER = 9, /* key [len u8][channel id][list u8][uid] */
    SLOTD_TYPED_TABLE_MEMBERSHIP = 10,
    SLOTD_TYPED_TABLE_CMD_BINDING = 12,
    SLOTD_TYPED_TABLE_RUNTIME_META = 13,
    SLOTD_TYPED_TABLE_MIGRATION = 14,
    SLOTD_TYPED_TABLE_PLUGIN = 15,
    SLOTD_TYPED_TABLE_EVENT = 17,
};

/* One change. Pointers are valid during the callback only. */
struct slotd_watch_event {
    int type; /* enum slotd_watch_event_type */
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value; /* PUT, unless keys_only */
    size_t value_len;
    uint64_t version; /* PUT: the new version; DELETE: 0 */
    uint32_t group_id;
    uint64_t index; /* the raft entry that made the change */
    int table;      /* enum slotd_typed_table: typed watches; 0 for keys */
};

/* One WatchResponse as the callback sees it. Pointers are valid during the callback only. */
struct slotd_watch_message {
    const struct slotd_watch_event *events; /* in each group's apply order */
    size_t event_count;
    /* the watch's position in every group it has seen, through this message: resume here */
    const struct slotd_watch_position *positions;
    size_t position_count;
    bool created;  /* the first message of a stream (no events) */
    bool progress; /* a progress notification (no events) */
    unsigned resumes; /* streams restarted so far */
};

/* Returns 0 to go on watching, anything else to stop (slotd_watch then returns OK). */
typedef int (*slotd_watch_cb)(void *arg, const struct slotd_watch_message *m);

/* Most groups a watch tracks positions of, most positions in a resume. */
#define SLOTD_WATCH_GROUPS_MAX SLOTD_ROUTE_GROUPS_MAX
/* Resumes in a row without a message in between before slotd_watch gives up (max_resumes 0). */
#define SLOTD_WATCH_RESUMES_DEFAULT 10

/* A watch. Pointers are borrowed for the call. key (one key), or prefix (key empty), or
 * neither: every key; or, with typed_kind set (no key, no prefix), the typed rows of typed_id
 * (a uid or channel id, served by the group owning its hash slot). */
struct slotd_watch_request {
    const void *key;
    size_t key_len;
    const void *prefix;
    size_t prefix_len;
    int typed_kind;       /* enum slotd_typed_watch_kind; 0 = keys */
    const char *typed_id; /* NUL-terminated */
    const struct slotd_watch_position *resume; /* where to continue (a result's positions) */
    size_t resume_count;
    uint32_t progress_interval_ms; /* 0: the server's default */
    bool keys_only;
    int timeout_ms;  /* stop after this long (returns OK, timed_out); 0 = no limit */
    int max_resumes; /* 0 = SLOTD_WATCH_RESUMES_DEFAULT, negative = no limit */
};

struct slotd_watch_result {
    struct slotd_watch_position *positions; /* malloc'd: where the watch stopped */
    size_t position_count;
    unsigned resumes;   /* streams restarted (after UNAVAILABLE, QUEUE_FULL, a lost node) */
    unsigned messages;  /* messages passed to the callback */
    bool timed_out;     /* timeout_ms passed */
    struct slotd_status status; /* the failure that ended the watch */
};

/* r: borrowed for the call. Frees what the result owns and clears it. */
void slotd_watch_result_free(struct slotd_watch_result *r);

/*
 * c, w, out: borrowed for the call; free out with slotd_watch_result_free() whatever the return
 * value. Runs a Metadata/Watch on the seed endpoints, calling cb(arg, message) from this thread
 * for every message, until cb returns non-zero or timeout_ms passes (both SLOTD_CLIENT_OK). A
 * stream that ends UNAVAILABLE, RESOURCE_EXHAUSTED (a slow reader), DEADLINE_EXCEEDED,
 * CANCELLED, UNKNOWN or INTERNAL is restarted on the next endpoint with resume = the positions
 * reached, so no event is lost or repeated. Anything else ends the watch with the error: a
 * resume behind a group's history is OUT_OF_RANGE (SLOTD_CLIENT_ERPC) with detail_code
 * SLOTD_ERROR_CODE_COMPACTED and status.compacted_* naming the oldest position left.
 */
int slotd_watch(struct slotd_client *c, const struct slotd_watch_request *w, slotd_watch_cb cb,
                void *arg, struct slotd_watch_result *out);

/* ---- route and health ----------------------------------------------------------------------- */

#define SLOTD_HASH_SLOTS 256
#define SLOTD_ROUTE_REPLICAS_MAX 16
#define SLOTD_ROUTE_GROUPS_MAX 4096

/* One replica's own answer to the serving node (RouteSnapshot ReplicaStatus). */
enum slotd_replica_role {
    SLOTD_REPLICA_NONE = 0, /* answered, but not in the configuration it reported */
    SLOTD_REPLICA_VOTER = 1,
    SLOTD_REPLICA_LEARNER = 2
};

struct slotd_route_replica {
    uint64_t node_id;
    enum slotd_replica_role role;
    uint64_t leader; /* the leader this replica believes in, 0 = none */
    uint64_t term;
    uint64_t commit_index;
    uint64_t applied_index;
    uint64_t age_ms; /* how old the answer was when the route was served */
};

struct slotd_route_group {
    uint32_t group_id;
    /* Observed: the configuration the group itself has (the leader's, as the serving node last
     * heard it); the controller's intent is intended_*. They differ while a move runs and when
     * one failed half-way. */
    uint64_t voters[SLOTD_ROUTE_REPLICAS_MAX];
    unsigned voter_count;
    uint64_t learners[SLOTD_ROUTE_REPLICAS_MAX];
    unsigned learner_count;
    uint64_t intended_voters[SLOTD_ROUTE_REPLICAS_MAX];
    unsigned intended_voter_count;
    uint64_t intended_learners[SLOTD_ROUTE_REPLICAS_MAX];
    unsigned intended_learner_count;
    struct slotd_route_replica replicas[SLOTD_ROUTE_REPLICAS_MAX]; /* sorted by node_id */
    unsigned replica_count;
    uint64_t config_epoch;
    uint64_t preferred_leader;
    uint64_t leader; /* observed leader node, 0 = unknown */
    uint64_t leader_term;
    unsigned hash_slot_count; /* entries of the hash-slot table naming this group */
};

struct slotd_route_node {
    uint64_t node_id;
    char address[SLOTD_ADDRESS_LEN + 1];
};

/* A decoded RouteSnapshotResponse. */
struct slotd_route {
    uint64_t revision;
    uint32_t hash_slot_table[SLOTD_HASH_SLOTS];
    struct slotd_route_group *groups; /* sorted by group_id */
    size_t group_count;
    struct slotd_route_node *nodes; /* sorted by node_id; at most SLOTD_CLIENT_NODES_MAX */
    size_t node_count;
    char source[SLOTD_ADDRESS_LEN + 1]; /* the endpoint that answered */
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_route_free(struct slotd_route *r);

/*
 * c, status: borrowed for the call (status may be NULL). Fetches a fresh route (trying every
 * endpoint and known node in turn), installs it as the client's cache and returns a copy in
 * *out (caller frees with slotd_route_free()).
 */
int slotd_route_fetch(struct slotd_client *c, struct slotd_route **out,
                      struct slotd_status *status);

/* crc32_ieee(key) % 256, the hash slot of key (borrowed for the call). */
unsigned slotd_hash_slot(const void *key, size_t klen);

/* r, key: borrowed for the call. The group owning key's hash slot. */
uint32_t slotd_route_group_of(const struct slotd_route *r, const void *key, size_t klen);

/* g: borrowed for the call. 1 when the observed voters and learners are the intended ones (as
 * sets), 0 when they disagree. */
int slotd_route_group_agrees(const struct slotd_route_group *g);

/* r: borrowed for the call. The group's entry, or NULL when the route does not list it. */
const struct slotd_route_group *slotd_route_group_find(const struct slotd_route *r,
                                                       uint32_t group_id);

/* r: borrowed for the call. The address of node_id (pointer into r), or NULL when unknown. */
const char *slotd_route_node_address(const struct slotd_route *r, uint64_t node_id);

/* r, key: borrowed for the call. The address of the leader of key's group (pointer into r), or
 * NULL when that group, its leader or the leader's address is unknown. */
const char *slotd_route_leader_address(const struct slotd_route *r, const void *key, size_t klen);

/* grpc.health.v1 serving status values. */
enum slotd_health_status {
    SLOTD_HEALTH_UNKNOWN = 0,
    SLOTD_HEALTH_SERVING = 1,
    SLOTD_HEALTH_NOT_SERVING = 2,
    SLOTD_HEALTH_SERVICE_UNKNOWN = 3,
};

/* c, address, serving, status: borrowed for the call (status may be NULL). One
 * grpc.health.v1.Health/Check("") to address, bounded by the deadline; no retries. */
int slotd_health_check(struct slotd_client *c, const char *address, int *serving,
                       struct slotd_status *status);

/* Static name of a health status ("SERVING"). */
const char *slotd_health_status_name(int serving);

/* ---- admin: the controller's cluster state and commands (slotd.v1.Admin) ------------------ */

/* An Admin.ClusterState answer. */
struct slotd_cluster_state {
    bool not_modified; /* known_revision and known_checksum matched: state_json is NULL */
    uint64_t revision;
    char checksum[16]; /* 8 hex digits, CRC-32C of the canonical encoding */
    uint64_t applied_raft_index;
    bool from_voter;  /* answered by a controller voter (false: a mirror's copy) */
    char *state_json; /* cluster-state.json, NUL-terminated (malloc'd; NULL when not_modified) */
    size_t state_json_len;
    char source[SLOTD_ADDRESS_LEN + 1]; /* the endpoint that answered */
    unsigned attempts;
    struct slotd_status status;
};

/* s: borrowed for the call. Frees s->state_json and clears s. */
void slotd_admin_cluster_state_free(struct slotd_cluster_state *s);

/* Largest state_json accepted from a server (64 nodes, 64 groups, 64 tasks fit easily). */
#define SLOTD_ADMIN_STATE_JSON_MAX (4 << 20)

/*
 * c, known_checksum (may be NULL), out: borrowed for the call; free out with
 * slotd_admin_cluster_state_free() whatever the return value. Asks the endpoints in turn
 * (starting at the one that answered the latest route fetch) until one answers; a node that is
 * UNAVAILABLE, past its deadline or overloaded is skipped. known_revision/known_checksum: when
 * both match the answering node's state, out->not_modified is set and no JSON is sent.
 */
int slotd_admin_cluster_state(struct slotd_client *c, uint64_t known_revision,
                              const char *known_checksum, struct slotd_cluster_state *out);

/* Admin commands. The task commands (MOVE_REPLICA .. MIGRATE_HASH_SLOTS) answer the new task's
 * id in slotd_admin_result.task_id; follow it with slotd_task_status(). */
enum slotd_admin_kind {
    SLOTD_ADMIN_JOIN_NODE,                /* node_id, address, weight (0 = the server's 100) */
    SLOTD_ADMIN_ACTIVATE_NODE,            /* node_id */
    SLOTD_ADMIN_SET_PREFERRED_LEADER,     /* group_id, node_id */
    SLOTD_ADMIN_MOVE_REPLICA,             /* group_id, from_node, to_node (Admin/MoveReplica) */
    SLOTD_ADMIN_TRANSFER_LEADER,          /* group_id, to_node (the Admin/TransferLeader task) */
    SLOTD_ADMIN_PROMOTE_CONTROLLER_VOTER, /* node_id */
    SLOTD_ADMIN_DRAIN_NODE,               /* node_id */
    SLOTD_ADMIN_RETRY_TASK,               /* task_id */
    SLOTD_ADMIN_MIGRATE_HASH_SLOTS,       /* hash_slots[0..hash_slot_count), to_group */
    SLOTD_ADMIN_SET_FEATURE,              /* feature, enabled (Admin/SetFeature) */
};

/* One Admin command. Pointers are borrowed for the call. */
struct slotd_admin_write {
    enum slotd_admin_kind kind;
    uint64_t node_id;    /* JOIN/ACTIVATE/SET_PREFERRED_LEADER/PROMOTE_CONTROLLER_VOTER/DRAIN */
    const char *address; /* JOIN_NODE: "host:port" others reach the node at */
    uint32_t weight;     /* JOIN_NODE: 1..1000, 0 = default */
    uint32_t group_id;   /* SET_PREFERRED_LEADER, MOVE_REPLICA, TRANSFER_LEADER */
    /* 0 = unconditional; else the command is refused (SLOTD_CLIENT_ESTALE_REVISION, gRPC
     * ABORTED) unless the controller's revision equals it */
    uint64_t expected_revision;
    uint64_t from_node; /* MOVE_REPLICA: the node giving up its replica */
    uint64_t to_node;   /* MOVE_REPLICA, TRANSFER_LEADER */
    uint64_t task_id;   /* RETRY_TASK */
    /* MIGRATE_HASH_SLOTS: 1..SLOTD_HASH_SLOTS distinct hash slots, each 0..255 (checked before
     * any call: SLOTD_CLIENT_EINVAL with status.field "hash_slots"), moved to to_group */
    const uint32_t *hash_slots;
    size_t hash_slot_count;
    uint32_t to_group;
    const char *feature; /* SET_FEATURE: a cluster-state feature ("hash_slot_migration") */
    bool enabled;        /* SET_FEATURE */
};

/* slotd.v1.Outcome values. */
enum slotd_admin_outcome {
    SLOTD_ADMIN_OUTCOME_UNSPECIFIED = 0,
    SLOTD_ADMIN_OUTCOME_CHANGED = 1, /* the cluster state changed; revision + 1 */
    SLOTD_ADMIN_OUTCOME_UPDATED = 2, /* applied without a business change */
    SLOTD_ADMIN_OUTCOME_NOOP = 3,    /* nothing to do; reason says why */
};

/* Static name of an outcome ("CHANGED"); "UNSPECIFIED" for other values. */
const char *slotd_admin_outcome_name(int outcome);

struct slotd_admin_result {
    int outcome; /* enum slotd_admin_outcome */
    char reason[SLOTD_STATUS_MESSAGE_LEN];
    uint64_t revision;      /* controller revision after the command */
    uint64_t applied_index; /* controller raft index of the entry that carried it */
    uint64_t task_id;       /* the task a task command made (0 for the other commands) */
    unsigned attempts;
    struct slotd_status status;
};

/*
 * c, w, out: borrowed for the call. Sends the command to an endpoint (any node relays it to the
 * controller leader). An endpoint answering UNAVAILABLE (down, or no controller leader) is
 * skipped for the next one; after a whole pass of UNAVAILABLE answers the client backs off and
 * tries another pass, at most max_retries more passes. Nothing else is retried: a command that
 * timed out may have been applied (repeating it is harmless without expected_revision: it
 * answers NOOP). Returns SLOTD_CLIENT_OK with the outcome, SLOTD_CLIENT_ESTALE_REVISION
 * (ABORTED: expected_revision is not the current revision; nothing changed),
 * SLOTD_CLIENT_EINVAL (INVALID_ARGUMENT, the detail names the field) or another error, with
 * out->status describing the last attempt.
 */
int slotd_admin_write(struct slotd_client *c, const struct slotd_admin_write *w,
                      struct slotd_admin_result *out);

/* ---- controller status: slotd.v1.Admin/ControllerStatus ------------------------------------ */

#define SLOTD_CONTROLLER_ROLE_LEN 32 /* role names, cut to this many bytes with the NUL */

/* ---- users and roles (servers started with --auth 1; docs/security.md) ----------------- */

#define SLOTD_CLIENT_TOKEN_MAX 159 /* bytes of a token from Admin.Authenticate */

/* Sends "authorization: Bearer <token>" on every later call of c (token borrowed for the call,
 * copied; NULL or "" stops sending one). Returns SLOTD_CLIENT_OK or SLOTD_CLIENT_EINVAL (longer
 * than SLOTD_CLIENT_TOKEN_MAX or not printable ASCII). Thread-safe. */
int slotd_client_set_token(struct slotd_client *c, const char *token);

/* Admin.Authenticate(user, password) on the endpoints in turn (UNAVAILABLE goes to the next);
 * on success the token is set as by slotd_client_set_token and, when expires_at_ms is not NULL,
 * *expires_at_ms gets its expiry (ms since the Unix epoch). A wrong user or password is
 * SLOTD_CLIENT_ERPC with status UNAUTHENTICATED. All pointers borrowed for the call. */
int slotd_client_authenticate(struct slotd_client *c, const char *user, const char *password,
                              uint64_t *expires_at_ms, struct slotd_status *st);

enum slotd_user_op {
    SLOTD_USER_ADD = 1,
    SLOTD_USER_DELETE = 2,
    SLOTD_USER_PASSWD = 3,
    SLOTD_USER_GRANT_ROLE = 4,
    SLOTD_USER_REVOKE_ROLE = 5,
};
enum slotd_role_op {
    SLOTD_ROLE_ADD = 1,
    SLOTD_ROLE_DELETE = 2,
    SLOTD_ROLE_GRANT = 3,
    SLOTD_ROLE_REVOKE = 4
};

/* One Admin.UserWrite / Admin.RoleWrite; strings borrowed for the call, NULL = "". */
struct slotd_auth_write {
    bool role; /* false: UserWrite (op is a slotd_user_op); true: RoleWrite */
    int op;
    const char *name;      /* the user or the role */
    const char *password;  /* SLOTD_USER_ADD, SLOTD_USER_PASSWD */
    const char *role_name; /* SLOTD_USER_GRANT_ROLE, SLOTD_USER_REVOKE_ROLE */
    const char *perm_type, *perm_access, *perm_value; /* SLOTD_ROLE_GRANT, SLOTD_ROLE_REVOKE */
    uint64_t expected_revision;
};

/* Sends w like slotd_admin_write sends its commands (endpoints in turn, retries of
 * UNAVAILABLE). out as for slotd_admin_write. */
int slotd_admin_auth_write(struct slotd_client *c, const struct slotd_auth_write *w,
                           struct slotd_admin_result *out);

#define SLOTD_AUTH_USERS_MAX 64
#define SLOTD_AUTH_ROLES_MAX 32
struct slotd_auth_list {
    bool enabled;
    uint64_t revision;
    size_t n_users, n_roles;
    struct {
        char name[33];
        char roles[8 * 34]; /* comma-separated */
        uint64_t revision;
    } users[SLOTD_AUTH_USERS_MAX];
    struct {
        char name[33];
        char permissions[16 * 150]; /* "read key_prefix \"b/\", ..." */
    } roles[SLOTD_AUTH_ROLES_MAX];
};

/* Admin.AuthList from the first endpoint that answers; *out (borrowed) filled. */
int slotd_admin_auth_list(struct slotd_client *c, struct slotd_auth_list *out,
                          struct slotd_status *st);

/* One node's own view of the controller (an Admin.ControllerStatus answer), read from that
 * node's local state without a quorum: it answers during an election and when cut off. */
struct slotd_controller_status {
    uint64_t node_id; /* the node that answered */
    /* "leader", "follower", "pre_candidate", "candidate" or "learner" on a node hosting the
     * controller group; "mirror" on one copying the state from voters; "none" before either */
    char role[SLOTD_CONTROLLER_ROLE_LEN];
    uint64_t term;                /* group 0's raft term (0 on mirrors) */
    uint64_t commit_index;        /* group 0's commit index (0 on mirrors) */
    uint64_t revision;            /* the published cluster state's revision (0: none yet) */
    uint64_t applied_index;       /* the controller raft index that state reflects */
    uint64_t snapshot_index;      /* the log starts after it (0: whole log kept, or a mirror) */
    uint64_t state_file_revision; /* last cluster-state.json written or found exact (0: none) */
    int64_t state_file_age_ms;    /* its age (-1: not written by this process) */
    int64_t mirror_lag_ms;        /* mirrors: since a voter last answered its poll (-1: never) */
    uint64_t leader;              /* the controller leader this node believes in (0: unknown) */
    char source[SLOTD_ADDRESS_LEN + 1]; /* the endpoint asked ("" when the address was bad) */
    unsigned attempts;                  /* 1, or 0 when no call was made */
    struct slotd_status status;
};

/*
 * c, address, out: borrowed for the call; out owns no memory (nothing to free). One
 * Admin.ControllerStatus call to address (one "host:port", any node, not necessarily one of
 * the client's endpoints), bounded by the client's deadline. It is never routed, retried or
 * sent to another node: the answer describes the node asked. Returns SLOTD_CLIENT_OK,
 * SLOTD_CLIENT_EINVAL (address empty, longer than SLOTD_ADDRESS_LEN or a list; no call made),
 * SLOTD_CLIENT_EMALFORMED or the call's error, with out->status describing it
 * ("controller status: UNAVAILABLE: ... [127.0.0.1:7701, 1 attempt]").
 */
int slotd_controller_status(struct slotd_client *c, const char *address,
                            struct slotd_controller_status *out);

/* ---- tasks: slotd.v1.Metadata/TaskStatus ---------------------------------------------------- */

/* Bounds of a decoded task list and of one task's arrays (the controller keeps at most 64
 * tasks); a larger answer is SLOTD_CLIENT_EMALFORMED naming the field and the bound. */
#define SLOTD_TASKS_MAX 64
#define SLOTD_TASK_PARTICIPANTS_MAX 16
#define SLOTD_TASK_NAME_LEN 32        /* kind, status and phase names */
#define SLOTD_TASK_LAST_ERROR_LEN 512 /* last_error, cut to this many bytes */

/* One slotd.v1.Task. */
struct slotd_task {
    uint64_t task_id;
    /* replica_move, leader_transfer, hash_slot_migration, controller_voter_promotion,
     * node_drain */
    char kind[SLOTD_TASK_NAME_LEN];
    char status[SLOTD_TASK_NAME_LEN]; /* pending, running, failed, done */
    char phase[SLOTD_TASK_NAME_LEN];  /* add_learner, catch_up, ..., done ("" when unnamed) */
    uint32_t phase_index;
    uint32_t attempt;
    uint32_t group_id;                          /* 0 for tasks without a group (promotion, drain) */
    char last_error[SLOTD_TASK_LAST_ERROR_LEN]; /* "" = none */
    uint64_t source_node;
    uint64_t target_node;
    uint64_t participants[SLOTD_TASK_PARTICIPANTS_MAX];
    unsigned participant_count;
    uint64_t config_epoch;
    /* last reported progress: snapshot/copy bytes, and the target's match index against the
     * group's commit index (catch-up) */
    uint64_t bytes_sent;
    uint64_t bytes_total;
    uint64_t target_match;
    uint64_t commit;
    uint64_t created_ms;
    uint64_t updated_ms;
    uint64_t revision; /* the controller revision the task was read at */
    /* hash_slot_migration: the group the slots move to (group_id is the source) and the hash
     * slots, ascending */
    uint32_t to_group;
    uint32_t hash_slots[SLOTD_HASH_SLOTS];
    unsigned hash_slot_count;
};

/* A TaskStatus answer: one task (asked by id) or the list (task_id 0). */
struct slotd_task_status {
    uint64_t revision;        /* the controller revision the answer was read at */
    struct slotd_task *tasks; /* malloc'd, task_count entries (oldest first when listing) */
    size_t task_count;        /* by id: 1; listing: 0..SLOTD_TASKS_MAX */
    char source[SLOTD_ADDRESS_LEN + 1]; /* the endpoint that answered */
    unsigned attempts;
    struct slotd_status status;
};

/* s: borrowed for the call. Frees s->tasks and clears s. */
void slotd_task_status_free(struct slotd_task_status *s);

/* t: borrowed for the call. True when t->status is "done" or "failed" (final until a retry). */
bool slotd_task_finished(const struct slotd_task *t);

/*
 * c, out: borrowed for the call; free out with slotd_task_status_free() whatever the return
 * value. task_id > 0: that task (SLOTD_CLIENT_ENOTFOUND when the answering node's copy of the
 * cluster state does not hold it; a mirror's copy may lag about 500 ms behind a new task).
 * task_id 0: every task the controller keeps, oldest first (active_only: pending and running
 * ones). Asks the endpoints in turn like slotd_admin_cluster_state(): one pass, skipping a node
 * that is UNAVAILABLE, past its deadline or overloaded.
 */
int slotd_task_status(struct slotd_client *c, uint64_t task_id, bool active_only,
                      struct slotd_task_status *out);

#ifdef __cplusplus
}
#endif

#endif /* SLOTD_CLIENT_H */
