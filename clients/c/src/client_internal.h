/* client_internal.h - libslotd internals shared by its sources and its unit test. */
#ifndef SLOTD_CLIENT_INTERNAL_H
#define SLOTD_CLIENT_INTERNAL_H

#include "call.h"
#include "slotd/client.h"

#include <grpc/grpc.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

_Static_assert(SLOTD_CALL_ADDRESS_LEN == SLOTD_ADDRESS_LEN, "one address bound");

/* The options (slotd_options_create); the tls_* strings are owned copies (NULL = unset). */
struct slotd_options {
    int deadline_ms;      /* per attempt; 0 = 5000 */
    int max_retries;      /* retries of retriable failures; 0 = 3, negative = none */
    int route_refresh_ms; /* refetch the route when older than this; 0 = only when a call fails */
    /* TLS (gRPC SSL channel credentials) for every channel when tls_ca_file or tls_cert_file is
     * set; all NULL (default): plaintext. PEM file paths, read by slotd_client_create.
     * tls_ca_file verifies the servers (NULL: gRPC's default roots);
     * tls_cert_file and tls_key_file (both or neither) are the client certificate for servers
     * that require one (mTLS). tls_server_name (NULL: the host of each address) is the name
     * checked in the servers' certificates. */
    const char *tls_ca_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_server_name;
};

enum slotd_write_kind { SLOTD_WRITE_PUT, SLOTD_WRITE_DELETE, SLOTD_WRITE_CAS };

/* One Propose, built by the put/delete/cas calls. Pointers are borrowed for the call. */
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

/* One Read range query (slotd_range_query_create); the byte fields are owned copies.
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

struct slotd_txn_compare {
    const void *key;
    size_t key_len;
    int target;       /* enum slotd_txn_target */
    int op;           /* enum slotd_txn_cmp */
    uint64_t version; /* TARGET_VERSION */
    const void *value; /* TARGET_VALUE */
    size_t value_len;
};

struct slotd_txn_op {
    int kind; /* enum slotd_txn_op_kind */
    const void *key;
    size_t key_len;
    const void *value; /* PUT */
    size_t value_len;
    uint64_t lease; /* PUT: as slotd_write.lease (0 = none); other kinds: must be 0 */
};

/* One txn (slotd_txn_create): the compares and both branches, keys and values owned copies.
 * bad: the first add that was refused (a sentence; field in bad_field), reported by the call. */
struct slotd_txn {
    struct slotd_txn_compare compares[SLOTD_TXN_COMPARES_MAX];
    size_t compare_count;
    struct slotd_txn_op success[SLOTD_TXN_OPS_MAX];
    size_t success_count;
    struct slotd_txn_op failure[SLOTD_TXN_OPS_MAX];
    size_t failure_count;
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX];
    size_t request_id_len;
    bool has_request_id; /* false: a random 16-byte id (retries reuse it) */
    bool no_request_id;
    char bad[SLOTD_STATUS_MESSAGE_LEN];
    char bad_field[SLOTD_FIELD_LEN];
    uint64_t bad_limit;
};

/* A watch (slotd_watch_request_create); key, prefix, typed_id and resume are owned copies. key (one key), or prefix (key empty), or
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

/* One Admin command (slotd_admin_command_create); address, hash_slots and feature are owned
 * copies. */
struct slotd_admin_command {
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
    bool enabled;        /* SET_FEATURE, SET_BALANCE */
    /* SET_BACKUP_PLAN: interval, destination (owned copy, NULL with delete), retention */
    uint64_t interval_s;
    const char *destination;
    uint32_t retention;
    bool delete_plan;
};


/* A failed call's error (slotd_error_destroy). */
struct slotd_error {
    int code; /* enum slotd_client_err */
    unsigned attempts;
    struct slotd_status st;
};

/* The options of a write (slotd_write_options_create). */
struct slotd_write_options {
    uint8_t request_id[SLOTD_REQUEST_ID_LEN_MAX];
    size_t request_id_len;
    bool has_request_id;
    bool no_request_id;
    uint64_t lease;
};

/* The options of a read (slotd_read_options_create). */
struct slotd_read_options {
    int consistency;
    uint64_t min_applied_index;
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

/* A TaskStatus answer: one task (asked by id) or the list (task_id 0). */
struct slotd_task_list {
    uint64_t revision;        /* the controller revision the answer was read at */
    struct slotd_task *tasks; /* task_count entries (oldest first when listing) */
    size_t task_count;        /* by id: 1; listing: 0..SLOTD_TASKS_MAX */
    char source[SLOTD_ADDRESS_LEN + 1]; /* the endpoint that answered */
    unsigned attempts;
    /* what tasks[i].participants and .hash_slots point at (task_count rows each) */
    uint64_t (*participants)[SLOTD_TASK_PARTICIPANTS_MAX];
    uint32_t (*hash_slots)[SLOTD_HASH_SLOTS];
};


/*
 * buf, err: borrowed for the call. Decodes a RouteSnapshotResponse into *out (caller frees with
 * slotd_route_destroy()). SLOTD_CLIENT_EMALFORMED with a sentence in err when the bytes do not
 * decode, the table does not have 256 entries or a bound is exceeded.
 */
int slotd__route_decode(const uint8_t *buf, size_t len, struct slotd_route **out, char *err,
                        size_t errlen);

/* r: borrowed for the call. The address of the leader of the group owning hash_slot (pointer
 * into r), or NULL when hash_slot is not 0..255 or that group, its leader or the leader's
 * address is unknown. */
const char *slotd__route_slot_leader_address(const struct slotd_route *r, unsigned hash_slot);

/* r: borrowed for the call. A deep copy (caller frees with slotd_route_destroy()), NULL on ENOMEM. */
struct slotd_route *slotd__route_copy(const struct slotd_route *r);

/* r: borrowed for the call. Records a NOT_LEADER hint: group_id's leader becomes node_id at
 * address (added to the node table when new and there is room). Returns true when r changed. */
bool slotd__route_apply_hint(struct slotd_route *r, uint32_t group_id, uint64_t node_id,
                             const char *address, uint64_t term);

/* st: borrowed for the call. The client error a failed status means (OK for grpc_status 0). */
int slotd__err_of_status(const struct slotd_status *st);

/* What a call does after one attempt. */
enum slotd__action {
    SLOTD__ACTION_DONE,     /* success, or a failure no retry can fix */
    SLOTD__ACTION_REDIRECT, /* NOT_LEADER: send again (the write was not applied) */
    SLOTD__ACTION_RETRY,    /* retriable failure: refresh the route, back off, send again */
};

/* st: borrowed for the call. The decision after an attempt that ended with st; idempotent
 * says whether repeating the call is safe (a read, or a write carrying a request id). */
enum slotd__action slotd__action_decide(const struct slotd_status *st, bool idempotent);

/* Back-off before retry number attempt (1-based), honouring the server's retry hint. */
int slotd__backoff_ms(unsigned attempt, uint32_t retry_after_ms);

/* s, out, err: borrowed for the call. Splits "h:p,h:p" into out[0..*count) (each non-empty,
 * at most SLOTD_ADDRESS_LEN bytes, no spaces), at most max of them. SLOTD_CLIENT_EINVAL and a
 * sentence in err otherwise. */
int slotd__endpoints_parse(const char *s, char (*out)[SLOTD_ADDRESS_LEN + 1], size_t max,
                           size_t *count, char *err, size_t errlen);

/* o: borrowed for the call. Sets the defaults (deadline_ms 5000, max_retries 3, no TLS). */
void slotd__options_init(struct slotd_options *o);

/* in (may be NULL: the defaults), out, err: borrowed for the call. Checks ranges and
 * combinations; out gets in's numbers (its tls_* pointers borrowed from in). */
int slotd__options_resolve(const struct slotd_options *in, struct slotd_options *out, char *err,
                           size_t errlen);

/* Ends a call: when rc is a failure and err is not NULL, replaces *err by a new error holding
 * rc, attempts and st (borrowed for the call). Returns rc (SLOTD_CLIENT_ENOMEM when the error
 * itself cannot be allocated is still reported as rc, with *err NULL). */
int slotd__finish(int rc, const struct slotd_status *st, unsigned attempts,
                  struct slotd_error **err);

/* As slotd__finish for a failure found before any call: message (and field, may be NULL). */
int slotd__refuse(int rc, const char *message, const char *field, struct slotd_error **err);

/* The body of a public call that hands out one result: a new T (calloc) named r, then call (an
 * int expression on r and the struct slotd_status st), reported through slotd__finish with
 * r->attempts; *out = r on SLOTD_CLIENT_OK (caller frees with destroy), else destroy(r). what
 * names the call in the out-of-memory error. Returns from the enclosing function. */
#define SLOTD__RESULT_CALL(T, what, destroy, out, err, call)                                       \
    do {                                                                                           \
        *(out) = NULL;                                                                             \
        T *r = calloc(1, sizeof(*r));                                                              \
        if (!r)                                                                                    \
            return slotd__refuse(SLOTD_CLIENT_ENOMEM, what ": out of memory", NULL, err);          \
        struct slotd_status st;                                                                    \
        int rc = (call);                                                                           \
        slotd__finish(rc, &st, r->attempts, err);                                                  \
        if (rc == SLOTD_CLIENT_OK)                                                                 \
            *(out) = r;                                                                            \
        else                                                                                       \
            destroy(r);                                                                            \
        return rc;                                                                                 \
    } while (0)

/* ---- what client_admin.c uses from client.c ---- */

/* c, address, method, req, st: borrowed for the call. One unary call bounded by the client's
 * deadline. On SLOTD_CLIENT_OK *body holds the response bytes plus a NUL (caller frees with
 * free()); otherwise *body is NULL and st describes the failure (server text only). */
int slotd__client_unary(struct slotd_client *c, const char *address, const char *method,
                        const uint8_t *req, size_t req_len, uint8_t **body, size_t *body_len,
                        struct slotd_status *st);

/* c, out: borrowed for the call. The seed endpoints, starting at the one that answered the
 * latest route fetch; returns how many were written (at most max). */
size_t slotd__client_endpoints(struct slotd_client *c, char (*out)[SLOTD_ADDRESS_LEN + 1],
                               size_t max);

/* c: borrowed for the call. The resolved max_retries (negative = none). */
int slotd__client_max_retries(const struct slotd_client *c);

/* Sleeps ms milliseconds (restarts after signals). */
void slotd__sleep_ms(int ms);

/* ---- what client_task.c and the unit test use from client_admin.c ---- */

/* op, st: borrowed for the call. Rewrites st->message as "op: STATUS: text (field F)
 * [address, N attempts]". */
void slotd__admin_fail_text(const char *op, int rc, unsigned attempts, struct slotd_status *st);

/* Whether a failed read-only admin call is worth asking the next endpoint (UNAVAILABLE, past
 * its deadline, overloaded). */
bool slotd__admin_skippable(int rc);

/* c, method, req, body_len, attempts, source, st: borrowed for the call. One call on c's
 * endpoints in turn (one attempt each; *attempts counts them), the skippable failures moving on;
 * with retry, up to the client's max retries more passes after a backoff (as slotd_admin_write
 * does). Returns the first other result; on SLOTD_CLIENT_OK *body is the answer (caller frees
 * with free()) and source (NULL: not wanted; SLOTD_ADDRESS_LEN + 1 bytes) the endpoint that
 * gave it. */
int slotd__call_endpoints(struct slotd_client *c, const char *method, const uint8_t *req,
                          size_t len, bool retry, uint8_t **body, size_t *body_len,
                          unsigned *attempts, char *source, struct slotd_status *st);

/* Largest packed admin request: an address of <= 255 bytes, or 256 hash slots of at most 2
 * varint bytes each, plus the other fields. */
#define SLOTD__ADMIN_REQUEST_MAX 1024

/* w, buf, len, method, op, st: borrowed for the call. Packs w into buf (at least
 * SLOTD__ADMIN_REQUEST_MAX bytes) and sets *method (gRPC path) and *op (its name in messages).
 * SLOTD_CLIENT_EINVAL with a sentence in st->message for a bad kind, address or hash slot
 * list (no call is to be made then). */
int slotd__admin_write_encode(const struct slotd_admin_command *w, uint8_t *buf, size_t *len,
                              const char **method, const char **op, struct slotd_status *st);

/* buf, out, st: borrowed for the call. Decodes a TaskStatusResponse into out->tasks (freed by
 * slotd_task_list_destroy()) and out->revision. by_id: the answer to a task_id > 0 request
 * (exactly one task expected). SLOTD_CLIENT_EMALFORMED with a sentence in st->message when it
 * does not decode or exceeds a bound (SLOTD_TASKS_MAX tasks, SLOTD_TASK_PARTICIPANTS_MAX
 * participants, SLOTD_HASH_SLOTS hash slots). */
int slotd__task_status_decode(const uint8_t *buf, size_t len, bool by_id,
                              struct slotd_task_list *out, struct slotd_status *st);

/* buf, out, st: borrowed for the call. Fills out's answer fields from a
 * ControllerStatusResponse (role cut to SLOTD_CONTROLLER_ROLE_LEN - 1 bytes);
 * SLOTD_CLIENT_EMALFORMED with a sentence in st->message when the bytes do not decode. */
int slotd__controller_status_decode(const uint8_t *buf, size_t len,
                                    struct slotd_controller_status *out, struct slotd_status *st);

/* ---- what client_kv.c and client_watch.c use from client.c ---- */

/* c, op, key, req, st: borrowed for the call. Sends req to the leader of key's slot group (key
 * NULL: to a seed endpoint, for calls any node serves), following NOT_LEADER hints and retrying
 * retriable failures when idempotent. On SLOTD_CLIENT_OK *body holds the response (caller frees
 * with grpc_slice_unref()); otherwise st->message is a sentence starting with op. */
int slotd__client_routed_call(struct slotd_client *c, const char *op, const char *method,
                              const void *key, size_t klen, const uint8_t *req, size_t req_len,
                              bool idempotent, grpc_slice *body, unsigned *attempts,
                              struct slotd_status *st);

/* As slotd__client_routed_call, but routed by a hash slot (0..255) instead of a key: the calls
 * naming a lease id, whose hash slot is id >> SLOTD_LEASE_ID_SHIFT. */
int slotd__client_slot_call(struct slotd_client *c, const char *op, const char *method,
                            unsigned hash_slot, const uint8_t *req, size_t req_len, bool idempotent,
                            grpc_slice *body, unsigned *attempts, struct slotd_status *st);

/* Fills id[0..len) with random bytes (a request id). */
void slotd__client_request_id(struct slotd_client *c, uint8_t *id, size_t len);

/* The client's channel to address (opened on first use, owned by the client); NULL when its
 * channel table is full. */
grpc_channel *slotd__client_channel(struct slotd_client *c, const char *address);

/* Copies the "authorization" value every call sends ("" = none) into out. */
void slotd__client_authorization(struct slotd_client *c, char *out, size_t len);

/* ---- protobuf helpers every call of the library shares ---- */

struct ProtobufCMessage;
struct Slotd__V1__ProposeResponse;

/* m: borrowed for the call. Packs m into *buf (caller frees with free()). SLOTD_CLIENT_OK or
 * SLOTD_CLIENT_ENOMEM. */
int slotd__pack(const struct ProtobufCMessage *m, uint8_t **buf, size_t *len);

/* body: borrowed for the call. Unpacks the ProposeResponse in body and copies the raft position
 * every write result carries (applied index, group, term, deduplicated) into the four outs.
 * Returns the message (caller frees with slotd__v1__propose_response__free_unpacked()), or NULL
 * when body does not decode (outs untouched). */
struct Slotd__V1__ProposeResponse *
slotd__propose_response_unpack(grpc_slice body, uint64_t *applied_index, uint32_t *group_id,
                               uint64_t *term, bool *deduplicated);

/* c, id, out, out_len: borrowed for the call. The request id a write sends into out and
 * *out_len: none (none true), the caller's id[0..id_len) (id not NULL), else
 * SLOTD_REQUEST_ID_LEN_DEFAULT random bytes. out holds SLOTD_REQUEST_ID_LEN_MAX bytes. */
void slotd__client_request_id_pick(struct slotd_client *c, bool none, const uint8_t *id,
                                   size_t id_len, uint8_t *out, size_t *out_len);

/* ---- server-stream calls (client_stream.c): Watch and Backup ---- */

/* One server-stream call on its own completion queue, read one message at a time. */
struct slotd__stream {
    grpc_completion_queue *cq;
    grpc_call *call;
    gpr_timespec wait; /* how long a wait on cq may last: the deadline plus a grace */
    char authorization[SLOTD_CLIENT_TOKEN_MAX + 8];
    grpc_metadata md;
    grpc_metadata_array initial_md, trailing_md;
    grpc_status_code status; /* with details and trailing_md: valid once next() returned NULL */
    grpc_slice details;
    grpc_byte_buffer *send, *recv;
    int pending; /* batches started and not completed */
    bool open;
};

/*
 * s, c, address, method, what, req, st: borrowed for the call. Opens a method call on address
 * with req and c's authorization, bounded (when bounded) by timeout_ms from now (a wait on its
 * queue gives up grace_ms after that: the call is cancelled), and starts its batches. Returns
 * SLOTD_CLIENT_OK; SLOTD_CLIENT_EUNAVAILABLE with st when there is no channel for address
 * (nothing opened); SLOTD_CLIENT_ERPC with st ("cannot start the <what> call") when the status
 * batch did not start (the call is cancelled). Read it with slotd__stream_next() in every case,
 * then slotd__stream_close().
 */
int slotd__stream_open(struct slotd__stream *s, struct slotd_client *c, const char *address,
                       const char *method, const char *what, const uint8_t *req, size_t req_len,
                       bool bounded, int64_t timeout_ms, int grace_ms, struct slotd_status *st);

/* The next message (caller frees with grpc_byte_buffer_destroy(), then calls
 * slotd__stream_more()), or NULL once every batch has completed: s->status, s->details and
 * s->trailing_md then say how the call ended. */
grpc_byte_buffer *slotd__stream_next(struct slotd__stream *s);

/* After a message: asks for the next one (more), or cancels the call (!more). */
void slotd__stream_more(struct slotd__stream *s, bool more);

/* Frees what slotd__stream_open made (nothing when it opened nothing). */
void slotd__stream_close(struct slotd__stream *s);

/* ---- what the unit test and slotbench use from client_pstream.c ---- */

/* Protobuf base-128 varints (client_pstream.c): slotd__varint_put writes v at p (at most 10
 * bytes) and returns the byte after it; slotd__varint_len is how many bytes that takes. Also used
 * by slotbench --stream's item encoder. */
uint8_t *slotd__varint_put(uint8_t *p, uint64_t v);
size_t slotd__varint_len(uint64_t v);

/* request, buf: borrowed for the call. Encodes one ProposeStreamRequest.items entry (field 1):
 * ProposeStreamItem{id, request = the len bytes of an encoded ProposeRequest}. Returns the
 * encoded size; writes buf only when that size is <= buf_len. */
size_t slotd__pstream_item_encode(uint64_t id, const uint8_t *request, size_t len, uint8_t *buf,
                                  size_t buf_len);

struct Slotd__V1__ProposeStreamResponse;

/* bb: borrowed for the call. A ProposeStreamResponse message read whole and unpacked (caller
 * frees with slotd__v1__propose_stream_response__free_unpacked()), NULL when it does not decode
 * (also used by slotbench --stream). */
struct Slotd__V1__ProposeStreamResponse *slotd__pstream_response_unpack(grpc_byte_buffer *bb);

/* ---- what the unit test uses from client_meta.c ---- */

struct Slotd__V1__ProposeRequest;
struct Slotd__V1__SubscribersCommand;
struct Slotd__V1__ChannelListCommand;

/* m, wo (NULL: defaults), random_id (SLOTD_REQUEST_ID_LEN_DEFAULT bytes): borrowed for the
 * call. Sets m's no_forward and request id (wo's, none with no_request_id, else random_id) and
 * packs m into *buf (caller frees with free()). SLOTD_CLIENT_OK or SLOTD_CLIENT_ENOMEM. */
int slotd__meta_propose_encode(struct Slotd__V1__ProposeRequest *m,
                               const struct slotd_write_options *wo, const uint8_t *random_id,
                               uint8_t **buf, size_t *len);

/* All borrowed for the call (m points at sub or cl afterwards). Builds the add (add true) or
 * remove command of list for uids[0..uid_count) into m. SLOTD_CLIENT_EINVAL with the request
 * field in field and a sentence in what for a bad list, a NULL channel id or uid, 0 or more
 * than SLOTD_META_UIDS_MAX uids, or an expected_version on an allowlist or denylist. */
int slotd__meta_members_build(struct Slotd__V1__ProposeRequest *m,
                              struct Slotd__V1__SubscribersCommand *sub,
                              struct Slotd__V1__ChannelListCommand *cl, const char *channel_id,
                              uint32_t channel_type, enum slotd_member_list list, bool add,
                              const char *const *uids, size_t uid_count,
                              uint64_t expected_version, char *field, size_t field_len,
                              char *what, size_t what_len);

#endif /* SLOTD_CLIENT_INTERNAL_H */
