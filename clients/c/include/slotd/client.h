/* client.h - libslotd 1.0: route-aware synchronous C client for slotd.v1.Metadata and Admin. */
#ifndef SLOTD_CLIENT_H
#define SLOTD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * How this header stays stable (ABI SLOTD_1.0, libslotd.so.1):
 * - The client, its options, every request builder and the error are opaque: a caller holds a
 *   pointer, never a struct, so a field added later changes no compiled caller.
 * - Results are structs libslotd allocates; a caller reads their fields through the pointer it
 *   gets and never allocates, copies by value or takes the size of one. Later 1.x versions only
 *   append fields. Where a result holds a list, it is an array of pointers (or an opaque object
 *   with _count/_at getters), so an element can grow too.
 * - Names: slotd_<object>_<verb>. slotd_X_create() makes an object, slotd_X_destroy() frees an
 *   object and what it owns (NULL is a no-op). No function frees only the contents of a struct.
 * - Every call that can fail returns an enum slotd_client_err (0 = SLOTD_CLIENT_OK) and, when
 *   err is not NULL, stores a new error object in *err on failure (caller frees with
 *   slotd_error_destroy(); an object already in *err is destroyed first). On success *err is
 *   left alone. There is no last error: each call reports its own.
 */

/* ---- errors ------------------------------------------------------------------------------ */

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

#define SLOTD_ADDRESS_LEN 255

/* What one failed call says: the client error, the gRPC status of its last attempt and the
 * server's ErrorDetail. Opaque; read it with the getters below. */
struct slotd_error;

/* e: ownership transfers. NULL is a no-op. */
void slotd_error_destroy(struct slotd_error *e);
/* The getters take e borrowed for the call; strings point into e (valid until it is destroyed)
 * and are "" when absent; numbers are 0 when absent. */
int slotd_error_code(const struct slotd_error *e); /* enum slotd_client_err */
/* A sentence: "put: INVALID_ARGUMENT: put.key: must be 1..1024 bytes, got 0 (field put.key,
 * limit 1024) [127.0.0.1:7700, 1 attempt]". */
const char *slotd_error_message(const struct slotd_error *e);
int slotd_error_grpc_status(const struct slotd_error *e); /* -1 when no call was made */
unsigned slotd_error_attempts(const struct slotd_error *e); /* calls made, 0 = refused before */
const char *slotd_error_address(const struct slotd_error *e); /* node of the last attempt */
bool slotd_error_has_detail(const struct slotd_error *e); /* an ErrorDetail came back */
int slotd_error_detail_code(const struct slotd_error *e); /* enum slotd_error_code */
/* INVALID_FIELD (or a client-side check): the request field ("put.key") and its limit. */
const char *slotd_error_field(const struct slotd_error *e);
uint64_t slotd_error_limit(const struct slotd_error *e);
uint32_t slotd_error_retry_after_ms(const struct slotd_error *e);
/* NOT_LEADER: the leader hint (node 0 = none). */
uint64_t slotd_error_leader_node_id(const struct slotd_error *e);
const char *slotd_error_leader_address(const struct slotd_error *e);
uint32_t slotd_error_leader_group_id(const struct slotd_error *e);
uint64_t slotd_error_leader_term(const struct slotd_error *e);
/* COMPACTED (a watch resumed behind a group's history): the group and the oldest position a
 * watch can resume from in it. */
uint32_t slotd_error_compacted_group_id(const struct slotd_error *e);
uint64_t slotd_error_compacted_index(const struct slotd_error *e);

/* ---- options and the client ---------------------------------------------------------------- */

/* Largest PEM file slotd_client_create reads; longest tls_server_name. */
#define SLOTD_CLIENT_PEM_MAX (1 << 20)
#define SLOTD_CLIENT_SERVER_NAME_MAX 255
#define SLOTD_CLIENT_DEADLINE_MS_DEFAULT 5000
#define SLOTD_CLIENT_MAX_RETRIES_DEFAULT 3
#define SLOTD_CLIENT_DEADLINE_MS_MAX 3600000
#define SLOTD_CLIENT_MAX_RETRIES_MAX 100
/* At most this many seed endpoints, and this many distinct node addresses (channels). */
#define SLOTD_CLIENT_ENDPOINTS_MAX 16
#define SLOTD_CLIENT_NODES_MAX 64

/* Client options. Opaque: made by slotd_options_create() with the defaults below, changed by
 * the setters, read by slotd_client_create() (which checks them and names a bad one). */
struct slotd_options;

/* NULL when out of memory. Caller frees with slotd_options_destroy(). */
struct slotd_options *slotd_options_create(void);
/* o: ownership transfers. NULL is a no-op. */
void slotd_options_destroy(struct slotd_options *o);
/* o: borrowed for the call. Per attempt, 1..SLOTD_CLIENT_DEADLINE_MS_MAX (default 5000). */
void slotd_options_set_deadline_ms(struct slotd_options *o, int deadline_ms);
/* Retries of retriable failures, 0..SLOTD_CLIENT_MAX_RETRIES_MAX (default 3). */
void slotd_options_set_max_retries(struct slotd_options *o, int max_retries);
/* Refetch the route when older than this (ms); 0 (default) = only when a call fails. */
void slotd_options_set_route_refresh_ms(struct slotd_options *o, int route_refresh_ms);
/*
 * TLS (gRPC SSL channel credentials) for every channel once a CA or client certificate is set;
 * none (default): plaintext. path: borrowed for the call (copied), NULL unsets. The files are
 * read by slotd_client_create. ca_file verifies the servers (unset: gRPC's default roots);
 * cert_file and key_file (both or neither) are the client certificate for servers requiring
 * one (mTLS); server_name (unset: the host of each address) is the name checked in the
 * servers' certificates. Return SLOTD_CLIENT_OK or SLOTD_CLIENT_ENOMEM.
 */
int slotd_options_set_tls_ca_file(struct slotd_options *o, const char *path);
int slotd_options_set_tls_cert_file(struct slotd_options *o, const char *path);
int slotd_options_set_tls_key_file(struct slotd_options *o, const char *path);
int slotd_options_set_tls_server_name(struct slotd_options *o, const char *server_name);

struct slotd_client;

/*
 * endpoints: borrowed for the call, "host:port[,host:port...]" (1..SLOTD_CLIENT_ENDPOINTS_MAX
 * entries). o: borrowed for the call, NULL for the defaults. *out: caller frees with
 * slotd_client_destroy(). No network traffic happens here: the route is fetched by the first
 * call. Returns SLOTD_CLIENT_OK or SLOTD_CLIENT_EINVAL (bad endpoints or options, or a TLS file
 * that cannot be read: the error names the option and the file) / SLOTD_CLIENT_ENOMEM. The
 * client is safe to use from many threads at once.
 */
int slotd_client_create(const char *endpoints, const struct slotd_options *o,
                        struct slotd_client **out, struct slotd_error **err);

/* c: ownership transfers (closes every channel). NULL is a no-op. */
void slotd_client_destroy(struct slotd_client *c);

/* ---- read your admin writes ----------------------------------------------------------------- */

/* c: borrowed for the call. The highest controller revision this client has seen (0: none):
 * from admin writes, cluster states, task lists and routes. Its RouteSnapshot, ClusterState and
 * TaskStatus calls send it as min_revision, so the node asked answers only from that cluster
 * state or a newer one (it waits up to 3 s, then the call fails SLOTD_CLIENT_EUNAVAILABLE). */
uint64_t slotd_client_last_revision(const struct slotd_client *c);
/* c: borrowed for the call. Raises the client's last revision to revision (never lowers it). */
void slotd_client_observe_revision(struct slotd_client *c, uint64_t revision);

/* ---- writes --------------------------------------------------------------------------------- */

#define SLOTD_REQUEST_ID_LEN_MAX 64
#define SLOTD_REQUEST_ID_LEN_DEFAULT 16

/* Per-write options (opaque). NULL where a call takes one: a random 16-byte request id, no
 * lease. */
struct slotd_write_options;

/* NULL when out of memory. Caller frees with slotd_write_options_destroy(). */
struct slotd_write_options *slotd_write_options_create(void);
/* wo: ownership transfers. NULL is a no-op. */
void slotd_write_options_destroy(struct slotd_write_options *wo);
/* id: borrowed for the call (copied), 1..SLOTD_REQUEST_ID_LEN_MAX bytes (checked by the call,
 * error field "request_id"); NULL = a random id chosen per call (retries reuse it). Returns
 * SLOTD_CLIENT_OK or SLOTD_CLIENT_EINVAL (longer than SLOTD_REQUEST_ID_LEN_MAX). */
int slotd_write_options_set_request_id(struct slotd_write_options *wo, const void *id,
                                       size_t len);
/* true: send no request id at all; then an ambiguous failure (UNAVAILABLE, deadline) is
 * returned, never retried, since the write might have been applied. */
void slotd_write_options_set_no_request_id(struct slotd_write_options *wo, bool no_request_id);
/* PUT: attach the key to this lease (slotd_client_lease_grant(); it must live in the key's hash
 * slot, else SLOTD_CLIENT_EPRECONDITION and nothing is written); 0 = none, which also detaches
 * the key from a lease it had. Other writes refuse a lease (SLOTD_CLIENT_EINVAL, field
 * "lease"). */
void slotd_write_options_set_lease(struct slotd_write_options *wo, uint64_t lease);

/* What a write did. Allocated by libslotd; caller frees with slotd_write_result_destroy(). */
struct slotd_write_result {
    uint64_t applied_index; /* raft index of the entry that carried the command */
    uint32_t group_id;
    uint64_t term;
    bool deduplicated;      /* the server returned the stored result of this request id */
    uint64_t version;       /* put/cas: the key's version afterwards (cas: 0 if absent) */
    uint64_t prev_version;  /* put/delete */
    bool deleted;           /* delete: the key existed */
    bool cas_succeeded;     /* cas */
    uint8_t *current_value; /* cas mismatch: the current value (may be NULL) */
    size_t current_value_len;
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX]; /* the id sent (empty with no_request_id) */
    size_t request_id_len;
    unsigned attempts; /* calls made, redirects and retries included */
    char address[SLOTD_ADDRESS_LEN + 1]; /* the node that answered */
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_write_result_destroy(struct slotd_write_result *r);

/*
 * c, key, val, wo (NULL: defaults), err: borrowed for the call; *out: caller frees with
 * slotd_write_result_destroy() (set on SLOTD_CLIENT_OK, and on SLOTD_CLIENT_ECAS_MISMATCH where
 * out says what is stored; NULL otherwise). Each goes to the leader of its key's slot group
 * (no_forward), following NOT_LEADER hints, refreshing the route and retrying retriable failures
 * up to max_retries times when the call carries a request id.
 */
int slotd_client_put(struct slotd_client *c, const void *key, size_t klen, const void *val,
                     size_t vlen, const struct slotd_write_options *wo,
                     struct slotd_write_result **out, struct slotd_error **err);
int slotd_client_delete(struct slotd_client *c, const void *key, size_t klen,
                        const struct slotd_write_options *wo, struct slotd_write_result **out,
                        struct slotd_error **err);
/* Writes val (or, del true, deletes the key) only if the key's version is expected_version
 * (0 = the key must be absent); else SLOTD_CLIENT_ECAS_MISMATCH. */
int slotd_client_cas(struct slotd_client *c, const void *key, size_t klen,
                     uint64_t expected_version, const void *val, size_t vlen, bool del,
                     const struct slotd_write_options *wo, struct slotd_write_result **out,
                     struct slotd_error **err);

/* ---- reads ---------------------------------------------------------------------------------- */

enum slotd_consistency {
    SLOTD_CONSISTENCY_LINEARIZABLE = 0, /* leader, after a ReadIndex round */
    SLOTD_CONSISTENCY_LEADER_LOCAL = 1, /* leader's applied state */
    SLOTD_CONSISTENCY_LOCAL = 2,        /* a replica's applied state (sent to the leader) */
};

/* Per-read options (opaque). NULL where a call takes one: linearizable. */
struct slotd_read_options;

/* NULL when out of memory. Caller frees with slotd_read_options_destroy(). */
struct slotd_read_options *slotd_read_options_create(void);
/* ro: ownership transfers. NULL is a no-op. */
void slotd_read_options_destroy(struct slotd_read_options *ro);
/* An enum slotd_consistency (another value fails the read with SLOTD_CLIENT_EINVAL). */
void slotd_read_options_set_consistency(struct slotd_read_options *ro, int consistency);
/* LOCAL reads: the replica must have applied at least this raft index. */
void slotd_read_options_set_min_applied_index(struct slotd_read_options *ro, uint64_t index);

/* A get's answer. Allocated by libslotd; caller frees with slotd_value_destroy(). */
struct slotd_value {
    bool found;
    uint8_t *value; /* NULL when not found or empty */
    size_t value_len;
    uint64_t version;
    uint64_t applied_index;
    uint32_t group_id;
    uint64_t term;
    unsigned attempts;
    char address[SLOTD_ADDRESS_LEN + 1]; /* the node that answered */
};

/* v: ownership transfers. NULL is a no-op. */
void slotd_value_destroy(struct slotd_value *v);

/* c, key, ro (NULL: linearizable), err: borrowed for the call; *out: caller frees with
 * slotd_value_destroy() (NULL on failure). A missing key is SLOTD_CLIENT_OK with found false.
 * Reads are retried like writes. */
int slotd_client_get(struct slotd_client *c, const void *key, size_t klen,
                     const struct slotd_read_options *ro, struct slotd_value **out,
                     struct slotd_error **err);

/* ---- range: pages of keys across slot groups ------------------------------------------------ */

/* Entries per page when the query's limit is 0, and the most a page may ask for. */
#define SLOTD_RANGE_LIMIT_DEFAULT 100
#define SLOTD_RANGE_LIMIT_MAX 1000

/* One range query (opaque): prefix, or [start, end) (end empty: no upper bound), or neither:
 * every key. Pages come in hash-slot order (0..255), then in key byte order within a hash slot:
 * not global key order. The byte setters copy their argument (borrowed for the call) and return
 * SLOTD_CLIENT_OK, SLOTD_CLIENT_EINVAL (NULL with a length) or SLOTD_CLIENT_ENOMEM. */
struct slotd_range_query;

/* NULL when out of memory. Caller frees with slotd_range_query_destroy(). */
struct slotd_range_query *slotd_range_query_create(void);
/* q: ownership transfers. NULL is a no-op. */
void slotd_range_query_destroy(struct slotd_range_query *q);
int slotd_range_query_set_prefix(struct slotd_range_query *q, const void *prefix, size_t len);
int slotd_range_query_set_start(struct slotd_range_query *q, const void *start, size_t len);
int slotd_range_query_set_end(struct slotd_range_query *q, const void *end, size_t len);
/* The previous page's cursor (slotd_range_page.cursor); len 0 = from the first hash slot. */
int slotd_range_query_set_cursor(struct slotd_range_query *q, const void *cursor, size_t len);
/* Entries per page: 0 = SLOTD_RANGE_LIMIT_DEFAULT, at most SLOTD_RANGE_LIMIT_MAX. */
void slotd_range_query_set_limit(struct slotd_range_query *q, uint32_t limit);
void slotd_range_query_set_keys_only(struct slotd_range_query *q, bool keys_only);
void slotd_range_query_set_count_only(struct slotd_range_query *q, bool count_only);
void slotd_range_query_set_consistency(struct slotd_range_query *q, int consistency);

/* One entry of a page (reached through slotd_range_page.entries). */
struct slotd_range_entry {
    uint8_t *key;
    size_t key_len;
    uint8_t *value; /* NULL with keys_only or an empty value */
    size_t value_len;
    uint64_t version; /* raft index that last wrote the key */
};

/* One page. Allocated by libslotd; caller frees with slotd_range_page_destroy(). */
struct slotd_range_page {
    struct slotd_range_entry **entries; /* entry_count pointers */
    size_t entry_count;
    uint32_t count; /* entries of the page (also with count_only) */
    bool more;      /* more pages may follow: set cursor on the query and ask again */
    uint8_t *cursor; /* NULL when more is false */
    size_t cursor_len;
    uint64_t applied_index; /* of the replica that served the page */
    uint32_t group_id;
    uint64_t term;
    unsigned attempts;
};

/* p: ownership transfers. NULL is a no-op. */
void slotd_range_page_destroy(struct slotd_range_page *p);

/*
 * c, q, err: borrowed for the call; *out: caller frees with slotd_range_page_destroy() (NULL on
 * failure). Reads one page: the node asked merges it from the slot groups of the next runs of
 * hash slots from the cursor's (forwarding to their leaders). A page may hold fewer than limit
 * entries, even none, while more is true. The server checks the query (INVALID_ARGUMENT names
 * the field: range.limit, range.prefix, ...). Retried like a get.
 */
int slotd_client_range(struct slotd_client *c, const struct slotd_range_query *q,
                       struct slotd_range_page **out, struct slotd_error **err);

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

enum slotd_txn_op_kind { SLOTD_TXN_PUT = 1, SLOTD_TXN_DELETE = 2, SLOTD_TXN_GET = 3 };

/* The branch an op runs in. */
enum slotd_txn_branch { SLOTD_TXN_SUCCESS = 0, SLOTD_TXN_FAILURE = 1 };

/* Server limits (slotd.v1.TxnCommand): compares, and ops of each branch. */
#define SLOTD_TXN_COMPARES_MAX 16
#define SLOTD_TXN_OPS_MAX 64

/* One txn (opaque): compares, then the success or the failure branch. Every key must map to the
 * slot group of the first key (the first compare's, else the first success op's, else the first
 * failure op's); keys in two groups are refused with INVALID_ARGUMENT naming both. The add
 * functions copy key and value (borrowed for the call) and return SLOTD_CLIENT_OK,
 * SLOTD_CLIENT_EINVAL (a bound passed, a NULL key or value with a length, an unknown target,
 * comparison, kind or branch, a lease on an op that is not a put) or SLOTD_CLIENT_ENOMEM. */
struct slotd_txn;

/* NULL when out of memory. Caller frees with slotd_txn_destroy(). */
struct slotd_txn *slotd_txn_create(void);
/* t: ownership transfers. NULL is a no-op. */
void slotd_txn_destroy(struct slotd_txn *t);
/* key's target (enum slotd_txn_target) <op> (enum slotd_txn_cmp) version (TARGET_VERSION) or
 * value (TARGET_VALUE); at most SLOTD_TXN_COMPARES_MAX. */
int slotd_txn_add_compare(struct slotd_txn *t, const void *key, size_t klen, int target, int op,
                          uint64_t version, const void *value, size_t vlen);
/* An op (enum slotd_txn_op_kind) in branch (enum slotd_txn_branch); value for puts, lease for
 * puts (0 = none); at most SLOTD_TXN_OPS_MAX per branch. */
int slotd_txn_add_op(struct slotd_txn *t, int branch, int kind, const void *key, size_t klen,
                     const void *value, size_t vlen, uint64_t lease);
/* As slotd_write_options_set_request_id / _set_no_request_id. */
int slotd_txn_set_request_id(struct slotd_txn *t, const void *id, size_t len);
void slotd_txn_set_no_request_id(struct slotd_txn *t, bool no_request_id);

/* The result of one op of the branch that ran. */
struct slotd_txn_op_result {
    int kind;              /* enum slotd_txn_op_kind of the op */
    uint64_t version;      /* PUT: the new version; GET: the key's version */
    uint64_t prev_version; /* PUT, DELETE */
    bool deleted;          /* DELETE: the key existed */
    bool found;            /* GET */
    uint8_t *value;        /* GET: NULL when absent or empty */
    size_t value_len;
};

/* Allocated by libslotd; caller frees with slotd_txn_result_destroy(). */
struct slotd_txn_result {
    bool succeeded; /* every compare held: the success branch ran; else the failure branch */
    struct slotd_txn_op_result **results; /* result_count pointers, one per op of the branch */
    size_t result_count;
    uint64_t applied_index;
    uint32_t group_id;
    uint64_t term;
    bool deduplicated;
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX];
    size_t request_id_len;
    unsigned attempts;
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_txn_result_destroy(struct slotd_txn_result *r);

/* c, t, err: borrowed for the call; *out: caller frees with slotd_txn_result_destroy() (NULL on
 * failure). Sends the txn to the leader of the first key's group, following hints and retrying
 * like a put (only with a request id). A failed compare is SLOTD_CLIENT_OK with succeeded
 * false. */
int slotd_client_txn(struct slotd_client *c, const struct slotd_txn *t,
                     struct slotd_txn_result **out, struct slotd_error **err);

/* ---- leases: keys deleted when their lease expires or is revoked ---------------------------- */

/* A lease lives in one hash slot: its id is hash_slot << SLOTD_LEASE_ID_SHIFT | a sequence
 * number (>= 1) of that hash slot, never reused. Only keys of that hash slot can be attached. */
#define SLOTD_LEASE_ID_SHIFT 48
/* ttl_seconds of a grant: 1..SLOTD_LEASE_TTL_MAX (365 days). */
#define SLOTD_LEASE_TTL_MAX 31536000u

/* The hash slot lease id lives in (id >> SLOTD_LEASE_ID_SHIFT), or -1 when id is not a lease id
 * (a hash slot above 255, or sequence number 0). */
int slotd_lease_hash_slot(uint64_t id);

/* The answer to a lease command. Allocated by libslotd; caller frees with
 * slotd_lease_result_destroy(). */
struct slotd_lease_result {
    uint64_t id;            /* grant: the new lease's id; keep-alive, revoke: the id given */
    uint32_t ttl_seconds;   /* grant: the TTL granted; keep-alive: the TTL restarted */
    uint32_t keys;          /* keep-alive: keys attached to the lease */
    uint32_t keys_deleted;  /* revoke: keys deleted with the lease */
    uint64_t applied_index; /* raft index of the entry that carried the command */
    uint32_t group_id;
    uint64_t term;
    bool deduplicated;
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX]; /* the random id sent (retries reuse it) */
    size_t request_id_len;
    unsigned attempts;
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_lease_result_destroy(struct slotd_lease_result *r);

/*
 * c, key, err: borrowed for the call; *out: caller frees with slotd_lease_result_destroy() (NULL
 * on failure). Grants a lease of ttl_seconds in the hash slot of key (the key is not written),
 * sent to that group's leader like a put, with a random request id. The lease expires
 * ttl_seconds after its grant or last keep-alive; its keys are then deleted. Checked first
 * (SLOTD_CLIENT_EINVAL, no call): a TTL outside 1..SLOTD_LEASE_TTL_MAX (field
 * "lease_grant.ttl_seconds"), a NULL key with a length ("lease_grant.key").
 */
int slotd_client_lease_grant(struct slotd_client *c, const void *key, size_t klen,
                             uint32_t ttl_seconds, struct slotd_lease_result **out,
                             struct slotd_error **err);
/* Restarts lease id's TTL (routed to the group owning id's hash slot): ttl_seconds and keys.
 * SLOTD_CLIENT_ENOTFOUND: it expired or was revoked; SLOTD_CLIENT_EINVAL: not a lease id (no
 * call, field "lease_keep_alive.id"). */
int slotd_client_lease_keepalive(struct slotd_client *c, uint64_t id,
                                 struct slotd_lease_result **out, struct slotd_error **err);
/* Deletes lease id and every key attached to it in one entry: keys_deleted. Errors as for
 * keep-alive (field "lease_revoke.id"). */
int slotd_client_lease_revoke(struct slotd_client *c, uint64_t id,
                              struct slotd_lease_result **out, struct slotd_error **err);

/* ---- watch: a stream of key changes that resumes by itself ---------------------------------- */

/* A watch position: the index through which a group's changes were seen. Two fields, fixed for
 * the 1.x ABI (callers keep arrays of them to resume). */
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
    SLOTD_TYPED_TABLE_CHANNEL_MEMBER = 9, /* key [len u8][channel id][type u8][list u8][uid] */
    SLOTD_TYPED_TABLE_MEMBERSHIP = 10,
    SLOTD_TYPED_TABLE_CMD_BINDING = 12,
    SLOTD_TYPED_TABLE_RUNTIME_META = 13,
    SLOTD_TYPED_TABLE_MIGRATION = 14,
    SLOTD_TYPED_TABLE_PLUGIN = 15,
    SLOTD_TYPED_TABLE_EVENT = 17,
};

/* One change. Valid during the callback only. */
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

/* One WatchResponse as the callback sees it. Valid during the callback only. */
struct slotd_watch_message {
    const struct slotd_watch_event *const *events; /* event_count, in each group's apply order */
    size_t event_count;
    /* the watch's position in every group it has seen, through this message: resume here */
    const struct slotd_watch_position *positions;
    size_t position_count;
    bool created;     /* the first message of a stream (no events) */
    bool progress;    /* a progress notification (no events) */
    unsigned resumes; /* streams restarted so far */
};

/* Returns 0 to go on watching, anything else to stop (the watch then returns OK). */
typedef int (*slotd_watch_cb)(void *arg, const struct slotd_watch_message *m);

#define SLOTD_HASH_SLOTS 256
#define SLOTD_ROUTE_REPLICAS_MAX 16
#define SLOTD_ROUTE_GROUPS_MAX 4096
/* Most groups a watch tracks positions of, most positions in a resume. */
#define SLOTD_WATCH_GROUPS_MAX SLOTD_ROUTE_GROUPS_MAX
/* Resumes in a row without a message in between before a watch gives up (max_resumes 0). */
#define SLOTD_WATCH_RESUMES_DEFAULT 10

/* A watch (opaque): one key, or a prefix, or neither (every key); or a typed watch (no key, no
 * prefix) of typed_id's rows (a uid or channel id, served by the group owning its hash slot).
 * The byte and string setters copy (borrowed for the call) and return SLOTD_CLIENT_OK,
 * SLOTD_CLIENT_EINVAL (NULL with a length; more than SLOTD_WATCH_GROUPS_MAX positions) or
 * SLOTD_CLIENT_ENOMEM. */
struct slotd_watch_request;

/* NULL when out of memory. Caller frees with slotd_watch_request_destroy(). */
struct slotd_watch_request *slotd_watch_request_create(void);
/* w: ownership transfers. NULL is a no-op. */
void slotd_watch_request_destroy(struct slotd_watch_request *w);
int slotd_watch_request_set_key(struct slotd_watch_request *w, const void *key, size_t len);
int slotd_watch_request_set_prefix(struct slotd_watch_request *w, const void *prefix, size_t len);
/* kind: enum slotd_typed_watch_kind (0 = keys); id NUL-terminated. */
int slotd_watch_request_set_typed(struct slotd_watch_request *w, int kind, const char *id);
/* Where to continue (a result's positions). */
int slotd_watch_request_set_resume(struct slotd_watch_request *w,
                                   const struct slotd_watch_position *positions, size_t count);
void slotd_watch_request_set_progress_interval_ms(struct slotd_watch_request *w, uint32_t ms);
void slotd_watch_request_set_keys_only(struct slotd_watch_request *w, bool keys_only);
/* Stop after this long (the watch returns OK with timed_out); 0 (default) = no limit. */
void slotd_watch_request_set_timeout_ms(struct slotd_watch_request *w, int timeout_ms);
/* Restarts in a row without a message: 0 = SLOTD_WATCH_RESUMES_DEFAULT, negative = no limit. */
void slotd_watch_request_set_max_resumes(struct slotd_watch_request *w, int max_resumes);

/* Where a watch stopped. Allocated by libslotd; caller frees with slotd_watch_result_destroy(). */
struct slotd_watch_result {
    struct slotd_watch_position *positions; /* position_count: where the watch stopped */
    size_t position_count;
    unsigned resumes;  /* streams restarted (after UNAVAILABLE, QUEUE_FULL, a lost node) */
    unsigned messages; /* messages passed to the callback */
    bool timed_out;    /* timeout_ms passed */
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_watch_result_destroy(struct slotd_watch_result *r);

/*
 * c, w, err: borrowed for the call; *out: caller frees with slotd_watch_result_destroy() (set
 * whenever the watch ran, also when it failed: resume from its positions; NULL when w was
 * refused or memory ran out). Runs a Metadata/Watch on the seed endpoints, calling cb(arg,
 * message) from this thread for every message, until cb returns non-zero or timeout_ms passes
 * (both SLOTD_CLIENT_OK). A stream that ends UNAVAILABLE, RESOURCE_EXHAUSTED (a slow reader),
 * DEADLINE_EXCEEDED, CANCELLED, UNKNOWN or INTERNAL is restarted on the next endpoint with
 * resume = the positions reached, so no event is lost or repeated. Anything else ends the watch
 * with the error: a resume behind a group's history is OUT_OF_RANGE (SLOTD_CLIENT_ERPC) with
 * detail code SLOTD_ERROR_CODE_COMPACTED and slotd_error_compacted_*() naming the oldest
 * position left.
 */
int slotd_client_watch(struct slotd_client *c, const struct slotd_watch_request *w,
                       slotd_watch_cb cb, void *arg, struct slotd_watch_result **out,
                       struct slotd_error **err);

/* ---- backup --------------------------------------------------------------------------------- */

/* Receives one record of the backup file (docs/backup-format.md) in file order; record is
 * borrowed for the call. groups_done of groups_total slot groups are complete so far. Return 0
 * to go on, non-zero to cancel the backup. */
typedef int (*slotd_backup_cb)(void *arg, const uint8_t *record, size_t len, uint32_t groups_done,
                               uint32_t groups_total);

/*
 * c, err: borrowed for the call. Runs Admin/Backup (admin permission with --auth) on the first
 * seed endpoint that answers, calling cb from this thread with every record; the file is the
 * records' concatenation. A node that fails UNAVAILABLE before sending anything is left for the
 * next endpoint; once records arrived the backup is not restarted elsewhere (it is one
 * consistent stream). timeout_ms 0 = no deadline. SLOTD_CLIENT_OK once the server ended the
 * stream OK; cb's stop is SLOTD_CLIENT_ERPC (CANCELLED). The caller checks the file it wrote
 * (the records carry their own checksums).
 */
int slotd_admin_backup(struct slotd_client *c, int64_t timeout_ms, slotd_backup_cb cb, void *arg,
                       struct slotd_error **err);

/* ---- route ---------------------------------------------------------------------------------- */

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

/* One slot group of a route (reached through slotd_route_group_at / _find). */
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

/* One node of a route (reached through slotd_route_node_at). */
struct slotd_route_node {
    uint64_t node_id;
    char address[SLOTD_ADDRESS_LEN + 1];
};

/* A decoded RouteSnapshotResponse (opaque). Every getter takes r borrowed for the call; the
 * pointers they return point into r. */
struct slotd_route;

/* r: ownership transfers. NULL is a no-op. */
void slotd_route_destroy(struct slotd_route *r);
uint64_t slotd_route_revision(const struct slotd_route *r);
const char *slotd_route_source(const struct slotd_route *r); /* the endpoint that answered */
/* The group owning hash_slot (0..255); 0 for a hash slot outside 0..255. */
uint32_t slotd_route_hash_slot_group(const struct slotd_route *r, unsigned hash_slot);
/* Groups sorted by group_id: i in 0..count-1, NULL outside. */
size_t slotd_route_group_count(const struct slotd_route *r);
const struct slotd_route_group *slotd_route_group_at(const struct slotd_route *r, size_t i);
/* The group's entry, or NULL when the route does not list it. */
const struct slotd_route_group *slotd_route_group_find(const struct slotd_route *r,
                                                       uint32_t group_id);
/* Nodes sorted by node_id (at most SLOTD_CLIENT_NODES_MAX): i in 0..count-1, NULL outside. */
size_t slotd_route_node_count(const struct slotd_route *r);
const struct slotd_route_node *slotd_route_node_at(const struct slotd_route *r, size_t i);
/* The address of node_id, or NULL when unknown. */
const char *slotd_route_node_address(const struct slotd_route *r, uint64_t node_id);
/* key: borrowed for the call. The group owning key's hash slot. */
uint32_t slotd_route_group_of(const struct slotd_route *r, const void *key, size_t klen);
/* key: borrowed for the call. The address of the leader of key's group, or NULL when that
 * group, its leader or the leader's address is unknown. */
const char *slotd_route_leader_address(const struct slotd_route *r, const void *key, size_t klen);
/* g: borrowed for the call. 1 when the observed voters and learners are the intended ones (as
 * sets), 0 when they disagree. */
int slotd_route_group_agrees(const struct slotd_route_group *g);

/* c, err: borrowed for the call. Fetches a fresh route (trying every endpoint and known node in
 * turn), installs it as the client's cache and returns a copy in *out (caller frees with
 * slotd_route_destroy(); NULL on failure). */
int slotd_client_route_fetch(struct slotd_client *c, struct slotd_route **out,
                             struct slotd_error **err);

/* zlib crc32(key) % 256 (CRC-32/IEEE), the hash slot of key (borrowed for the call). */
unsigned slotd_hash_slot(const void *key, size_t klen);

/* ---- health --------------------------------------------------------------------------------- */

/* grpc.health.v1 serving status values. */
enum slotd_health_status {
    SLOTD_HEALTH_UNKNOWN = 0,
    SLOTD_HEALTH_SERVING = 1,
    SLOTD_HEALTH_NOT_SERVING = 2,
    SLOTD_HEALTH_SERVICE_UNKNOWN = 3,
};

/* c, address, serving, err: borrowed for the call. One grpc.health.v1.Health/Check("") to
 * address, bounded by the deadline; no retries. *serving: an enum slotd_health_status. */
int slotd_client_health_check(struct slotd_client *c, const char *address, int *serving,
                              struct slotd_error **err);

/* Static name of a health status ("SERVING"). */
const char *slotd_health_status_name(int serving);

/* ---- admin: the controller's cluster state and commands (slotd.v1.Admin) ------------------ */

/* An Admin.ClusterState answer. Allocated by libslotd; caller frees with
 * slotd_cluster_state_destroy(). */
struct slotd_cluster_state {
    bool not_modified; /* known_revision and known_checksum matched: state_json is NULL */
    uint64_t revision;
    char checksum[16]; /* 8 hex digits, CRC-32C of the canonical encoding */
    uint64_t applied_raft_index;
    bool from_voter;  /* answered by a controller voter (false: a mirror's copy) */
    char *state_json; /* cluster-state.json, NUL-terminated (NULL when not_modified) */
    size_t state_json_len;
    char source[SLOTD_ADDRESS_LEN + 1]; /* the endpoint that answered */
    unsigned attempts;
};

/* s: ownership transfers. NULL is a no-op. */
void slotd_cluster_state_destroy(struct slotd_cluster_state *s);

/* Largest state_json accepted from a server. */
#define SLOTD_ADMIN_STATE_JSON_MAX (4 << 20)

/*
 * c, known_checksum (may be NULL), err: borrowed for the call; *out: caller frees with
 * slotd_cluster_state_destroy() (NULL on failure). Asks the endpoints in turn (starting at the
 * one that answered the latest route fetch) until one answers; a node that is UNAVAILABLE, past
 * its deadline or overloaded is skipped. known_revision/known_checksum: when both match the
 * answering node's state, not_modified is set and no JSON is sent.
 */
int slotd_client_cluster_state(struct slotd_client *c, uint64_t known_revision,
                               const char *known_checksum, struct slotd_cluster_state **out,
                               struct slotd_error **err);

/* Admin commands. The task commands (MOVE_REPLICA .. MIGRATE_HASH_SLOTS) answer the new task's
 * id in slotd_admin_result.task_id; follow it with slotd_client_task_status(). */
enum slotd_admin_kind {
    SLOTD_ADMIN_JOIN_NODE,                /* node_id, address, weight (0 = the server's 100) */
    SLOTD_ADMIN_ACTIVATE_NODE,            /* node_id */
    SLOTD_ADMIN_SET_PREFERRED_LEADER,     /* group_id, node_id */
    SLOTD_ADMIN_MOVE_REPLICA,             /* group_id, from_node, to_node (Admin/MoveReplica) */
    SLOTD_ADMIN_TRANSFER_LEADER,          /* group_id, to_node (the Admin/TransferLeader task) */
    SLOTD_ADMIN_PROMOTE_CONTROLLER_VOTER, /* node_id */
    SLOTD_ADMIN_DRAIN_NODE,               /* node_id */
    SLOTD_ADMIN_RETRY_TASK,               /* task_id */
    SLOTD_ADMIN_MIGRATE_HASH_SLOTS,       /* hash_slots, to_group */
    SLOTD_ADMIN_SET_FEATURE,              /* feature, enabled (Admin/SetFeature) */
    SLOTD_ADMIN_ABORT_TASK,  /* task_id (Admin/AbortTask: a running task ends failed at a safe
                              * point; the controller refuses one past it, naming its state) */
    SLOTD_ADMIN_SET_BALANCE, /* enabled (Admin/SetBalance: false pauses the balancer
                              * cluster-wide, true resumes it) */
    SLOTD_ADMIN_SET_BACKUP_PLAN, /* backup plan (Admin/SetBackupPlan; the server checks it) */
    SLOTD_ADMIN_REMOVE_NODE,     /* node_id (Admin/RemoveNode: a node that is down becomes a
                                  * tombstone; the server refuses a live one) */
    SLOTD_ADMIN_DEMOTE_CONTROLLER_VOTER, /* node_id (Admin/DemoteControllerVoter: the voter
                                          * becomes a mirror; the server checks the quorum) */
};

/* One Admin command (opaque): a kind and the fields it uses (above; the others are ignored).
 * The string and array setters copy (borrowed for the call) and return SLOTD_CLIENT_OK,
 * SLOTD_CLIENT_EINVAL (more than SLOTD_HASH_SLOTS hash slots) or SLOTD_CLIENT_ENOMEM; the call
 * checks the values and names a bad field. */
struct slotd_admin_command;

/* kind: an enum slotd_admin_kind. NULL when out of memory. Caller frees with
 * slotd_admin_command_destroy(). */
struct slotd_admin_command *slotd_admin_command_create(int kind);
/* cmd: ownership transfers. NULL is a no-op. */
void slotd_admin_command_destroy(struct slotd_admin_command *cmd);
void slotd_admin_command_set_node_id(struct slotd_admin_command *cmd, uint64_t node_id);
/* JOIN_NODE: "host:port" others reach the node at. */
int slotd_admin_command_set_address(struct slotd_admin_command *cmd, const char *address);
/* JOIN_NODE: 1..1000, 0 = default. */
void slotd_admin_command_set_weight(struct slotd_admin_command *cmd, uint32_t weight);
void slotd_admin_command_set_group_id(struct slotd_admin_command *cmd, uint32_t group_id);
void slotd_admin_command_set_from_node(struct slotd_admin_command *cmd, uint64_t node_id);
void slotd_admin_command_set_to_node(struct slotd_admin_command *cmd, uint64_t node_id);
void slotd_admin_command_set_task_id(struct slotd_admin_command *cmd, uint64_t task_id);
/* MIGRATE_HASH_SLOTS: 1..SLOTD_HASH_SLOTS distinct hash slots, each 0..255 (checked by the call:
 * SLOTD_CLIENT_EINVAL with field "hash_slots"; sent ascending), moved to to_group. */
int slotd_admin_command_set_hash_slots(struct slotd_admin_command *cmd, const uint32_t *slots,
                                       size_t count);
void slotd_admin_command_set_to_group(struct slotd_admin_command *cmd, uint32_t to_group);
/* SET_FEATURE: a cluster-state feature ("hash_slot_migration", "operations_mcp") and its new
 * value. */
int slotd_admin_command_set_feature(struct slotd_admin_command *cmd, const char *feature,
                                    bool enabled);
/* SET_BALANCE: whether the balancer runs (default false: pause). */
void slotd_admin_command_set_enabled(struct slotd_admin_command *cmd, bool enabled);
/* SET_BACKUP_PLAN: every interval_s one node writes a backup into destination (an absolute
 * directory on that node; borrowed, copied) and keeps retention files; delete_plan removes the
 * plan instead (destination NULL, the numbers 0). */
int slotd_admin_command_set_backup_plan(struct slotd_admin_command *cmd, uint64_t interval_s,
                                        const char *destination, uint32_t retention,
                                        bool delete_plan);
/* 0 = unconditional (default); else the command is refused (SLOTD_CLIENT_ESTALE_REVISION, gRPC
 * ABORTED) unless the controller's revision equals it. */
void slotd_admin_command_set_expected_revision(struct slotd_admin_command *cmd,
                                               uint64_t revision);

/* slotd.v1.Outcome values. */
enum slotd_admin_outcome {
    SLOTD_ADMIN_OUTCOME_UNSPECIFIED = 0,
    SLOTD_ADMIN_OUTCOME_CHANGED = 1, /* the cluster state changed; revision + 1 */
    SLOTD_ADMIN_OUTCOME_UPDATED = 2, /* applied without a business change */
    SLOTD_ADMIN_OUTCOME_NOOP = 3,    /* nothing to do; reason says why */
};

/* Static name of an outcome ("CHANGED"); "UNSPECIFIED" for other values. */
const char *slotd_admin_outcome_name(int outcome);

#define SLOTD_ADMIN_REASON_LEN 512

/* An admin command's answer. Allocated by libslotd; caller frees with
 * slotd_admin_result_destroy(). */
struct slotd_admin_result {
    int outcome; /* enum slotd_admin_outcome */
    char reason[SLOTD_ADMIN_REASON_LEN];
    uint64_t revision;      /* controller revision after the command */
    uint64_t applied_index; /* controller raft index of the entry that carried it */
    uint64_t task_id;       /* the task a task command made (0 for the other commands) */
    unsigned attempts;
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_admin_result_destroy(struct slotd_admin_result *r);

/*
 * c, cmd, err: borrowed for the call; *out: caller frees with slotd_admin_result_destroy() (NULL
 * on failure). Sends the command to an endpoint (any node relays it to the controller leader).
 * An endpoint answering UNAVAILABLE (down, or no controller leader) is skipped for the next one;
 * after a whole pass of UNAVAILABLE answers the client backs off and tries another pass, at
 * most max_retries more passes. Nothing else is retried: a command that timed out may have been
 * applied (repeating it is harmless without an expected revision: it answers NOOP). Returns
 * SLOTD_CLIENT_OK, SLOTD_CLIENT_ESTALE_REVISION (ABORTED: nothing changed), SLOTD_CLIENT_EINVAL
 * (INVALID_ARGUMENT, the error names the field) or another error.
 */
int slotd_client_admin_command(struct slotd_client *c, const struct slotd_admin_command *cmd,
                               struct slotd_admin_result **out, struct slotd_error **err);

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
                              uint64_t *expires_at_ms, struct slotd_error **err);

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

/* Admin.UserWrite: op (enum slotd_user_op) on user name; password for ADD and PASSWD, role for
 * GRANT_ROLE and REVOKE_ROLE (NULL = ""); sent like an admin command. Strings borrowed for the
 * call; *out as for slotd_client_admin_command(). */
int slotd_client_user_write(struct slotd_client *c, int op, const char *name,
                            const char *password, const char *role, uint64_t expected_revision,
                            struct slotd_admin_result **out, struct slotd_error **err);
/* Admin.RoleWrite: op (enum slotd_role_op) on role name; the permission (type, access, value)
 * for GRANT and REVOKE (NULL = ""). */
int slotd_client_role_write(struct slotd_client *c, int op, const char *name,
                            const char *perm_type, const char *perm_access,
                            const char *perm_value, uint64_t expected_revision,
                            struct slotd_admin_result **out, struct slotd_error **err);

#define SLOTD_AUTH_USERS_MAX 64
#define SLOTD_AUTH_ROLES_MAX 32

struct slotd_auth_user {
    char name[33];
    char roles[8 * 34]; /* comma-separated */
    uint64_t revision;
};

struct slotd_auth_role {
    char name[33];
    char permissions[16 * 150]; /* "read key_prefix \"b/\", ..." */
};

/* An Admin.AuthList answer. Allocated by libslotd; caller frees with slotd_auth_list_destroy(). */
struct slotd_auth_list {
    bool enabled;
    uint64_t revision;
    struct slotd_auth_user **users; /* user_count pointers (at most SLOTD_AUTH_USERS_MAX) */
    size_t user_count;
    struct slotd_auth_role **roles; /* role_count pointers (at most SLOTD_AUTH_ROLES_MAX) */
    size_t role_count;
};

/* l: ownership transfers. NULL is a no-op. */
void slotd_auth_list_destroy(struct slotd_auth_list *l);

/* Admin.AuthList from the first endpoint that answers; *out: caller frees with
 * slotd_auth_list_destroy() (NULL on failure). */
int slotd_client_auth_list(struct slotd_client *c, struct slotd_auth_list **out,
                           struct slotd_error **err);

/* ---- controller status: slotd.v1.Admin/ControllerStatus ------------------------------------ */

#define SLOTD_CONTROLLER_ROLE_LEN 32 /* role names, cut to this many bytes with the NUL */
#define SLOTD_BALANCE_NODES_MAX 64   /* scores kept from a ControllerStatus answer */
#define SLOTD_BALANCE_MOVES_MAX 64   /* planned moves kept */
#define SLOTD_BALANCE_WHY_LEN 256    /* a move's reason, cut to this many bytes with the NUL */

/* One node's own view of the controller, read from that node's local state without a quorum.
 * Allocated by libslotd; caller frees with slotd_controller_status_destroy(). */
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
    char source[SLOTD_ADDRESS_LEN + 1]; /* the endpoint asked */
    unsigned attempts;
    /* The balancer's plan as the answering node computes it from its copy of the cluster state
     * (ControllerStatusResponse.balance): its --balance, the state's pause (Admin.SetBalance),
     * its --balance-max-moves, the replicas and weights of active alive data nodes, a score per
     * such node and the moves it would propose, each with why; balanced: with them done every
     * node is within 1 of its share. */
    bool balance_enabled, balance_paused, balance_balanced;
    uint32_t balance_max_moves, balance_total_replicas, balance_total_weight;
    size_t n_balance_scores;
    struct slotd_balance_score {
        uint64_t node;
        uint32_t weight, replicas;
        uint32_t share_x10; /* the weighted share times 10, rounded */
    } balance_scores[SLOTD_BALANCE_NODES_MAX];
    size_t n_balance_moves;
    struct slotd_balance_move {
        uint32_t group;
        uint64_t source, target;
        char why[SLOTD_BALANCE_WHY_LEN];
    } balance_moves[SLOTD_BALANCE_MOVES_MAX];
};

/* s: ownership transfers. NULL is a no-op. */
void slotd_controller_status_destroy(struct slotd_controller_status *s);

/*
 * c, address, err: borrowed for the call; *out: caller frees with
 * slotd_controller_status_destroy() (NULL on failure). One Admin.ControllerStatus call to
 * address (one "host:port", any node), bounded by the client's deadline; never routed, retried
 * or sent to another node. SLOTD_CLIENT_EINVAL: address empty, longer than SLOTD_ADDRESS_LEN or a
 * list (no call made).
 */
int slotd_client_controller_status(struct slotd_client *c, const char *address,
                                   struct slotd_controller_status **out,
                                   struct slotd_error **err);

/* ---- tasks: slotd.v1.Metadata/TaskStatus ---------------------------------------------------- */

/* Bounds of a decoded task list and of one task's arrays; a larger answer is
 * SLOTD_CLIENT_EMALFORMED naming the field and the bound. */
#define SLOTD_TASKS_MAX 64
#define SLOTD_TASK_PARTICIPANTS_MAX 16
#define SLOTD_TASK_NAME_LEN 32        /* kind, status and phase names */
#define SLOTD_TASK_LAST_ERROR_LEN 512 /* last_error, cut to this many bytes */

/* One slotd.v1.Task (reached through slotd_task_list_at). */
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
    const uint64_t *participants; /* participant_count (at most SLOTD_TASK_PARTICIPANTS_MAX) */
    size_t participant_count;
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
    const uint32_t *hash_slots; /* hash_slot_count (at most SLOTD_HASH_SLOTS) */
    size_t hash_slot_count;
};

/* t: borrowed for the call. True when t->status is "done" or "failed" (final until a retry). */
bool slotd_task_finished(const struct slotd_task *t);

/* A TaskStatus answer (opaque): one task (asked by id) or the list. Getters take l borrowed for
 * the call; returned pointers point into l. */
struct slotd_task_list;

/* l: ownership transfers. NULL is a no-op. */
void slotd_task_list_destroy(struct slotd_task_list *l);
uint64_t slotd_task_list_revision(const struct slotd_task_list *l); /* read at this revision */
const char *slotd_task_list_source(const struct slotd_task_list *l); /* the endpoint */
unsigned slotd_task_list_attempts(const struct slotd_task_list *l);
/* by id: 1; listing: 0..SLOTD_TASKS_MAX, oldest first. */
size_t slotd_task_list_count(const struct slotd_task_list *l);
/* i in 0..count-1; NULL outside. */
const struct slotd_task *slotd_task_list_at(const struct slotd_task_list *l, size_t i);

/*
 * c, err: borrowed for the call; *out: caller frees with slotd_task_list_destroy() (NULL on
 * failure). task_id > 0: that task (SLOTD_CLIENT_ENOTFOUND when the answering node's copy of the
 * cluster state does not hold it; a mirror's copy may lag about 500 ms behind a new task).
 * task_id 0: every task the controller keeps, oldest first (active_only: pending and running
 * ones). Asks the endpoints in turn like slotd_client_cluster_state().
 */
int slotd_client_task_status(struct slotd_client *c, uint64_t task_id, bool active_only,
                             struct slotd_task_list **out, struct slotd_error **err);

/* ---- typed metadata (docs/api.md; client_meta.c) ------------------------------------------ */

/*
 * Typed helpers for the slotd.v1 typed commands and queries. A channel is named by (channel_id,
 * channel_type). Writes go to the leader of the owner's group (the uid for user-owned rows, the
 * channel id for channel-owned ones) with a request id from wo (NULL: a random one, so retries
 * are safe); reads are routed the same way with ro's consistency (NULL: linearizable). Listings
 * that span hash slots (channels, system uids) go to a seed endpoint, which merges the groups.
 * Every call takes c and its string and array arguments borrowed for the call; a NULL string is
 * SLOTD_CLIENT_EINVAL naming the field, with no call made. Results are library-allocated: *out
 * is NULL on failure, else caller frees with slotd_meta_result_destroy() or
 * slotd_meta_page_destroy(). Strings in a result point into it and are "" when absent.
 */

/* uids per subscriber/allowlist/denylist command; entries per listing page (0 = 100). */
#define SLOTD_META_UIDS_MAX 1000
#define SLOTD_META_PAGE_LIMIT_MAX 1000

/* ChannelFlags as a bit set. */
#define SLOTD_CHANNEL_FLAG_BAN 0x1u
#define SLOTD_CHANNEL_FLAG_DISBAND 0x2u
#define SLOTD_CHANNEL_FLAG_SEND_BAN 0x4u
#define SLOTD_CHANNEL_FLAG_ALLOW_STRANGER 0x8u
#define SLOTD_CHANNEL_FLAG_LARGE 0x10u

/* slotd.v1.MemberList. */
enum slotd_member_list {
    SLOTD_MEMBER_LIST_SUBSCRIBERS = 1,
    SLOTD_MEMBER_LIST_ALLOWLIST = 2,
    SLOTD_MEMBER_LIST_DENYLIST = 3,
};

/* slotd.v1.ChannelStatus. */
enum slotd_channel_status {
    SLOTD_CHANNEL_STATUS_UNSPECIFIED = 0,
    SLOTD_CHANNEL_STATUS_CREATING = 1,
    SLOTD_CHANNEL_STATUS_ACTIVE = 2,
    SLOTD_CHANNEL_STATUS_DELETING = 3,
};

/* The rows (slotd.v1.User, Device, Channel, Membership, CmdBinding, ChannelRuntimeMeta,
 * PluginBinding, ChannelEvent), read through a result. */
struct slotd_meta_user {
    const char *uid;
    const char *token;
    uint32_t device_flag;
    uint32_t device_level;
};

struct slotd_meta_device {
    const char *uid;
    uint32_t device_flag;
    const char *token;
    uint32_t device_level;
};

struct slotd_meta_channel {
    const char *channel_id;
    uint32_t channel_type;
    uint32_t flags; /* SLOTD_CHANNEL_FLAG_* */
    uint64_t subscriber_count;
    uint64_t subscriber_version;
    uint32_t event_capacity;
    uint64_t event_next_seq;
};

struct slotd_meta_membership {
    const char *uid;
    const char *channel_id;
    uint32_t channel_type;
    uint64_t join_seq;
    uint64_t read_seq;
    uint64_t hide_through_seq;
    uint64_t activated_at_ms;
    bool hidden;
    bool left;
};

struct slotd_meta_cmd_binding {
    const char *uid;
    const char *channel_id;
    uint32_t channel_type;
    uint64_t start_seq;
    uint64_t ack_seq;
    bool unbound;
};

struct slotd_meta_runtime {
    const char *channel_id; /* the channel (a get or set: the one asked for) */
    uint32_t channel_type;
    uint64_t leader;
    const uint64_t *replicas;
    size_t replica_count;
    const uint64_t *isr;
    size_t isr_count;
    uint64_t channel_epoch;
    uint64_t leader_epoch;
    uint64_t write_fence;
    uint64_t retention_through_seq;
    uint64_t lease_until_ms;
    uint32_t min_isr;
    int status; /* enum slotd_channel_status */
    uint64_t features;
};

struct slotd_meta_plugin_binding {
    const char *uid;
    const char *plugin_no;
};

struct slotd_meta_event {
    const char *channel_id;
    uint32_t channel_type;
    uint64_t event_seq;
    uint64_t message_seq;
    const char *event_type;
    const uint8_t *payload;
    size_t payload_len;
};

/* What a typed command's or get's answer says; the fields its command does not answer are 0 and
 * its row pointers NULL. */
struct slotd_meta_result {
    uint64_t applied_index;
    uint32_t group_id;
    uint64_t term;
    bool deduplicated; /* writes: the stored result of an earlier request with the same id */
    unsigned attempts;
    bool found;   /* gets: the row exists */
    bool changed; /* writes: something changed (put_device: created; remove/unbind: removed) */
    bool more;    /* user/channel delete: rows remain, send the delete again */
    bool member;  /* member check */
    const struct slotd_meta_user *user;
    const struct slotd_meta_device *device;
    const struct slotd_meta_channel *channel;
    const struct slotd_meta_membership *membership;
    const struct slotd_meta_cmd_binding *cmd_binding;
    const struct slotd_meta_runtime *runtime;
    const struct slotd_meta_plugin_binding *plugin_binding;
    /* user and channel deletes: what this command removed */
    bool removed; /* the user or channel row itself */
    uint32_t removed_devices, removed_memberships, removed_cmd_bindings;
    bool removed_plugin_binding, removed_system_uid;
    uint32_t removed_subscribers, removed_allowlist, removed_denylist;
    bool removed_runtime_meta;
    uint32_t removed_migration_tasks, removed_events;
    /* member add/remove */
    uint32_t members_changed;
    uint64_t subscriber_count;
    uint64_t subscriber_version;
    /* event append */
    uint64_t event_seq;
    uint32_t evicted;
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_meta_result_destroy(struct slotd_meta_result *r);

/* One page of a listing: count entries in the array of its kind (the others NULL), and the
 * cursor of the next page (next_cursor_len 0: this was the last page). */
struct slotd_meta_page {
    size_t count;
    const char *const *uids; /* members, system uids */
    const struct slotd_meta_device *const *devices;
    const struct slotd_meta_channel *const *channels;
    const struct slotd_meta_membership *const *conversations;
    const struct slotd_meta_runtime *const *runtimes;
    const struct slotd_meta_event *const *events;
    const uint8_t *next_cursor;
    size_t next_cursor_len;
    uint64_t applied_index;
    uint32_t group_id;
    unsigned attempts;
};

/* p: ownership transfers. NULL is a no-op. */
void slotd_meta_page_destroy(struct slotd_meta_page *p);

/* Every listing takes cursor (NULL/0: the first page; else a page's next_cursor) and limit
 * (0 = 100, at most SLOTD_META_PAGE_LIMIT_MAX; the server names the field beyond). */

/* Users (create is idempotent for the same row; update replaces token and device fields). */
int slotd_client_user_create(struct slotd_client *c, const char *uid, const char *token,
                             uint32_t device_flag, uint32_t device_level,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err);
int slotd_client_user_update(struct slotd_client *c, const char *uid, const char *token,
                             uint32_t device_flag, uint32_t device_level,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err);
int slotd_client_user_get(struct slotd_client *c, const char *uid,
                          const struct slotd_read_options *ro, struct slotd_meta_result **out,
                          struct slotd_error **err);
/* One delete_user command (at most 10,000 rows); out->more: send it again. */
int slotd_client_user_delete(struct slotd_client *c, const char *uid,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err);
int slotd_client_user_set_system(struct slotd_client *c, const char *uid, bool system,
                                 const struct slotd_write_options *wo,
                                 struct slotd_meta_result **out, struct slotd_error **err);
/* out->uids: the system uids (spans hash slots). */
int slotd_client_system_uids_list(struct slotd_client *c, const void *cursor, size_t cursor_len,
                                  uint32_t limit, const struct slotd_read_options *ro,
                                  struct slotd_meta_page **out, struct slotd_error **err);

/* Devices of a user (put: out->changed = created). */
int slotd_client_device_put(struct slotd_client *c, const char *uid, uint32_t device_flag,
                            const char *token, uint32_t device_level,
                            const struct slotd_write_options *wo, struct slotd_meta_result **out,
                            struct slotd_error **err);
int slotd_client_device_list(struct slotd_client *c, const char *uid, const void *cursor,
                             size_t cursor_len, uint32_t limit,
                             const struct slotd_read_options *ro, struct slotd_meta_page **out,
                             struct slotd_error **err);
/* out->changed: removed; out->device: the device removed. */
int slotd_client_device_delete(struct slotd_client *c, const char *uid, uint32_t device_flag,
                               const struct slotd_write_options *wo,
                               struct slotd_meta_result **out, struct slotd_error **err);

/* Channels. flags: SLOTD_CHANNEL_FLAG_*; event_capacity 0 = 100. */
int slotd_client_channel_create(struct slotd_client *c, const char *channel_id,
                                uint32_t channel_type, uint32_t flags, uint32_t event_capacity,
                                const struct slotd_write_options *wo,
                                struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_channel_get(struct slotd_client *c, const char *channel_id,
                             uint32_t channel_type, const struct slotd_read_options *ro,
                             struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_channel_set_flags(struct slotd_client *c, const char *channel_id,
                                   uint32_t channel_type, uint32_t flags,
                                   const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err);
/* One delete_channel command (at most 10,000 rows); out->more: send it again. */
int slotd_client_channel_delete(struct slotd_client *c, const char *channel_id,
                                uint32_t channel_type, const struct slotd_write_options *wo,
                                struct slotd_meta_result **out, struct slotd_error **err);
/* id_prefix "" = every id; channel_type 0 = every type (spans hash slots). */
int slotd_client_channel_list(struct slotd_client *c, const char *id_prefix,
                              uint32_t channel_type, const void *cursor, size_t cursor_len,
                              uint32_t limit, const struct slotd_read_options *ro,
                              struct slotd_meta_page **out, struct slotd_error **err);

/* A channel's subscribers, allowlist or denylist: 1..SLOTD_META_UIDS_MAX uids per command,
 * applied atomically. Subscriber commands are fenced: they apply only when expected_version is
 * the channel's subscriber_version (read it with slotd_client_channel_get()), else
 * the call fails with gRPC ABORTED, nothing written; allowlist and denylist commands take
 * expected_version 0. */
int slotd_client_members_add(struct slotd_client *c, const char *channel_id,
                             uint32_t channel_type, enum slotd_member_list list,
                             const char *const *uids, size_t uid_count, uint64_t expected_version,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err);
int slotd_client_members_remove(struct slotd_client *c, const char *channel_id,
                                uint32_t channel_type, enum slotd_member_list list,
                                const char *const *uids, size_t uid_count,
                                uint64_t expected_version, const struct slotd_write_options *wo,
                                struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_members_list(struct slotd_client *c, const char *channel_id,
                              uint32_t channel_type, enum slotd_member_list list,
                              const void *cursor, size_t cursor_len, uint32_t limit,
                              const struct slotd_read_options *ro, struct slotd_meta_page **out,
                              struct slotd_error **err);
/* out->member */
int slotd_client_member_check(struct slotd_client *c, const char *channel_id,
                              uint32_t channel_type, enum slotd_member_list list, const char *uid,
                              const struct slotd_read_options *ro, struct slotd_meta_result **out,
                              struct slotd_error **err);

/* A user's conversations (memberships; out->membership). */
int slotd_client_conversation_join(struct slotd_client *c, const char *uid,
                                   const char *channel_id, uint32_t channel_type,
                                   uint64_t join_seq, uint64_t activated_at_ms,
                                   const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_conversation_leave(struct slotd_client *c, const char *uid,
                                    const char *channel_id, uint32_t channel_type,
                                    const struct slotd_write_options *wo,
                                    struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_conversation_read(struct slotd_client *c, const char *uid,
                                   const char *channel_id, uint32_t channel_type,
                                   uint64_t read_seq, const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_conversation_hide(struct slotd_client *c, const char *uid,
                                   const char *channel_id, uint32_t channel_type,
                                   uint64_t hide_through_seq, const struct slotd_write_options *wo,
                                   struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_conversation_activate(struct slotd_client *c, const char *uid,
                                       const char *channel_id, uint32_t channel_type,
                                       uint64_t activated_at_ms,
                                       const struct slotd_write_options *wo,
                                       struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_conversation_get(struct slotd_client *c, const char *uid,
                                  const char *channel_id, uint32_t channel_type,
                                  const struct slotd_read_options *ro,
                                  struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_conversation_list(struct slotd_client *c, const char *uid, const void *cursor,
                                   size_t cursor_len, uint32_t limit,
                                   const struct slotd_read_options *ro,
                                   struct slotd_meta_page **out, struct slotd_error **err);

/* CMD bindings (out->cmd_binding). */
int slotd_client_cmd_bind(struct slotd_client *c, const char *uid, const char *channel_id,
                          uint32_t channel_type, uint64_t start_seq,
                          const struct slotd_write_options *wo, struct slotd_meta_result **out,
                          struct slotd_error **err);
int slotd_client_cmd_ack(struct slotd_client *c, const char *uid, const char *channel_id,
                         uint32_t channel_type, uint64_t ack_seq,
                         const struct slotd_write_options *wo, struct slotd_meta_result **out,
                         struct slotd_error **err);
int slotd_client_cmd_unbind(struct slotd_client *c, const char *uid, const char *channel_id,
                            uint32_t channel_type, const struct slotd_write_options *wo,
                            struct slotd_meta_result **out, struct slotd_error **err);

/* A runtime meta update (UpdateRuntimeMetaCommand), opaque: the expected values it is fenced by
 * and the new ChannelRuntimeMeta. NULL when out of memory; caller frees with
 * slotd_runtime_update_destroy(). */
struct slotd_runtime_update;
struct slotd_runtime_update *slotd_runtime_update_create(void);
/* u: ownership transfers. NULL is a no-op. */
void slotd_runtime_update_destroy(struct slotd_runtime_update *u);
/* u: borrowed for the call. The fence: the stored channel epoch, leader epoch and leader. */
void slotd_runtime_update_set_expected(struct slotd_runtime_update *u, uint64_t channel_epoch,
                                       uint64_t leader_epoch, uint64_t leader);
/* replicas, isr: borrowed for the call (copied), at most 64 each. SLOTD_CLIENT_EINVAL beyond,
 * SLOTD_CLIENT_ENOMEM. */
int slotd_runtime_update_set_members(struct slotd_runtime_update *u, uint64_t leader,
                                     const uint64_t *replicas, size_t replica_count,
                                     const uint64_t *isr, size_t isr_count);
void slotd_runtime_update_set_epochs(struct slotd_runtime_update *u, uint64_t channel_epoch,
                                     uint64_t leader_epoch, uint64_t write_fence);
void slotd_runtime_update_set_lease(struct slotd_runtime_update *u, uint64_t lease_until_ms,
                                    uint32_t min_isr);
/* status: enum slotd_channel_status; features: bits only ever added. */
void slotd_runtime_update_set_status(struct slotd_runtime_update *u, int status,
                                     uint64_t features);
void slotd_runtime_update_set_retention(struct slotd_runtime_update *u,
                                        uint64_t retention_through_seq);

/* Runtime meta (out->runtime). set: FAILED_PRECONDITION (SLOTD_CLIENT_EPRECONDITION) naming the
 * field and both values when the fence is stale. */
int slotd_client_runtime_get(struct slotd_client *c, const char *channel_id,
                             uint32_t channel_type, const struct slotd_read_options *ro,
                             struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_runtime_set(struct slotd_client *c, const char *channel_id,
                             uint32_t channel_type, const struct slotd_runtime_update *u,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err);
/* out->runtimes: the runtime meta of the channels led by node leader (0: every channel; spans
 * hash slots). */
int slotd_client_runtime_list(struct slotd_client *c, uint64_t leader, const void *cursor,
                              size_t cursor_len, uint32_t limit,
                              const struct slotd_read_options *ro, struct slotd_meta_page **out,
                              struct slotd_error **err);

/* Plugin bindings (out->plugin_binding; unbind: out->changed = removed). */
int slotd_client_plugin_bind(struct slotd_client *c, const char *uid, const char *plugin_no,
                             const struct slotd_write_options *wo, struct slotd_meta_result **out,
                             struct slotd_error **err);
int slotd_client_plugin_get(struct slotd_client *c, const char *uid,
                            const struct slotd_read_options *ro, struct slotd_meta_result **out,
                            struct slotd_error **err);
int slotd_client_plugin_unbind(struct slotd_client *c, const char *uid,
                               const struct slotd_write_options *wo,
                               struct slotd_meta_result **out, struct slotd_error **err);

/* Message-event projection (append: out->event_seq, out->evicted; list: events after
 * after_seq). payload: borrowed for the call, may be NULL with len 0. */
int slotd_client_event_append(struct slotd_client *c, const char *channel_id,
                              uint32_t channel_type, uint64_t message_seq, const char *event_type,
                              const void *payload, size_t payload_len,
                              const struct slotd_write_options *wo,
                              struct slotd_meta_result **out, struct slotd_error **err);
int slotd_client_event_list(struct slotd_client *c, const char *channel_id,
                            uint32_t channel_type, uint64_t after_seq, const void *cursor,
                            size_t cursor_len, uint32_t limit,
                            const struct slotd_read_options *ro, struct slotd_meta_page **out,
                            struct slotd_error **err);

/* ---- propose stream: many writes on one Metadata/ProposeStream call ------------------------- */

/* Items submitted whose result the caller has not taken yet, at most (the server keeps at most
 * 4096 in flight per stream); items per request message (the server's limit); bytes of one
 * item's encoded ProposeRequest; bytes of items coalesced into one request message. */
#define SLOTD_PROPOSE_STREAM_OUTSTANDING_MAX 4096
#define SLOTD_PROPOSE_STREAM_BATCH_MAX 1024
#define SLOTD_PROPOSE_STREAM_REQUEST_MAX (2 << 20)
#define SLOTD_PROPOSE_STREAM_MESSAGE_BYTES (1 << 20)

/*
 * One ProposeStream call to one node (opaque), for one thread at a time. Items are independent
 * writes, each handled by the node exactly like a unary Propose (validated, forwarded by a
 * non-leader unless its request has no_forward, committed); no retries, no redirects. Items
 * submitted while a request message is being sent go together in the next one (at most
 * SLOTD_PROPOSE_STREAM_BATCH_MAX items and about SLOTD_PROPOSE_STREAM_MESSAGE_BYTES).
 */
struct slotd_propose_stream;

/* One item's outcome (allocated by libslotd; caller frees with
 * slotd_propose_stream_result_destroy()). */
struct slotd_propose_stream_result {
    uint64_t id;               /* the id the item was submitted with */
    struct slotd_error *error; /* NULL: applied; else why the item failed (code, detail) */
    /* when applied: the ProposeResponse's raft position and, for a put, the new version */
    uint64_t applied_index;
    uint32_t group_id;
    uint64_t term;
    bool deduplicated;
    uint64_t version;
    /* the encoded slotd.v1.ProposeResponse (response_len bytes; NULL when failed), for
     * commands other than put */
    const uint8_t *response;
    size_t response_len;
};

/* r: ownership transfers. NULL is a no-op. */
void slotd_propose_stream_result_destroy(struct slotd_propose_stream_result *r);

/*
 * c, address, err: borrowed for the call; *out: caller frees with
 * slotd_propose_stream_destroy() (set on SLOTD_CLIENT_OK). Opens a ProposeStream to address
 * (NULL: the client's first endpoint) with the client's credentials and token.
 * max_outstanding: 1..SLOTD_PROPOSE_STREAM_OUTSTANDING_MAX (0 = the max). timeout_ms: the
 * whole call's deadline, 0 = none, else 1..SLOTD_CLIENT_DEADLINE_MS_MAX. SLOTD_CLIENT_EINVAL
 * names a bad argument; SLOTD_CLIENT_EUNAVAILABLE when the client has no channel left.
 */
int slotd_propose_stream_open(struct slotd_client *c, const char *address, int max_outstanding,
                              int timeout_ms, struct slotd_propose_stream **out,
                              struct slotd_error **err);

/*
 * s, request, err: borrowed for the call. Queues one item: id (the caller's, echoed in its
 * result) and an encoded slotd.v1.ProposeRequest (1..SLOTD_PROPOSE_STREAM_REQUEST_MAX bytes),
 * and sends it at once unless a request message is already on its way. SLOTD_CLIENT_EEXHAUSTED
 * (field "items", limit max_outstanding) when max_outstanding items await their result: take
 * results first; SLOTD_CLIENT_EINVAL (field "request") for a bad length;
 * SLOTD_CLIENT_EPRECONDITION after slotd_propose_stream_close_send(); once the call ended, its
 * failure (as slotd_propose_stream_next reports it).
 */
int slotd_propose_stream_submit(struct slotd_propose_stream *s, uint64_t id, const void *request,
                                size_t len, struct slotd_error **err);

/*
 * s, key, val, wo (NULL: defaults), err: borrowed for the call. Submits a put of key and val
 * (a Propose with a PutCommand; wo's lease and request id; without one a random request id,
 * none with slotd_write_options_set_no_request_id). The node forwards it when it does not lead
 * the key's group. Errors as slotd_propose_stream_submit (key NULL or empty: EINVAL, field
 * "put.key").
 */
int slotd_propose_stream_put(struct slotd_propose_stream *s, uint64_t id, const void *key,
                             size_t klen, const void *val, size_t vlen,
                             const struct slotd_write_options *wo, struct slotd_error **err);

/*
 * s, err: borrowed for the call; *out: caller frees with slotd_propose_stream_result_destroy().
 * The next item's result, in the order the node finished them, waiting at most timeout_ms
 * (0: only what has arrived; < 0: no limit). SLOTD_CLIENT_OK with *out set; SLOTD_CLIENT_OK
 * with *out NULL once the call ended cleanly after slotd_propose_stream_close_send() and every
 * result was taken; SLOTD_CLIENT_ETIMEOUT when nothing came in time; SLOTD_CLIENT_EPRECONDITION
 * when nothing is outstanding and the send side is open; the call's own failure (its status and
 * detail, e.g. UNAUTHENTICATED, a lost connection, the deadline) once it ended with items
 * outstanding: their results are lost (slotd_propose_stream_outstanding() says how many).
 */
int slotd_propose_stream_next(struct slotd_propose_stream *s, int timeout_ms,
                              struct slotd_propose_stream_result **out, struct slotd_error **err);

/* s: borrowed for the call. Items submitted whose result was not taken yet. */
size_t slotd_propose_stream_outstanding(const struct slotd_propose_stream *s);

/* s: borrowed for the call. Half-closes once the queued items are sent: the node finishes the
 * items in flight, sends their results and ends the call OK. Further submits are refused. */
void slotd_propose_stream_close_send(struct slotd_propose_stream *s);

/* s: ownership transfers. Cancels the call if it has not ended (items in flight still complete
 * in raft; their results are dropped), waits for its batches and frees it. NULL is a no-op. */
void slotd_propose_stream_destroy(struct slotd_propose_stream *s);

#ifdef __cplusplus
}
#endif

#endif /* SLOTD_CLIENT_H */
