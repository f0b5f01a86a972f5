/* api.h - the slotd.v1.Metadata handlers (decode, validate, route, forward or submit), the
 * slotd.v1.Admin handlers and the slotd.internal.v1.Peer handlers. */
#ifndef SLOTD_NODE_API_H
#define SLOTD_NODE_API_H

#include "service/metrics/metrics.h"
#include "service/route/route.h"
#include "service/rpc/rpc.h"
#include "service/runtime/runtime.h"
#include "service/transport/transport.h"

/* Times a forwarded request follows a NOT_LEADER hint to a newer leader. */
#define NODE_FORWARD_HOPS_MAX 3

struct auth_verifier;

/* How a Propose or Read forwarded to a leader ended (slotd_forward_total's outcome label). */
enum node_forward_outcome {
    NODE_FORWARD_OK,            /* the leader answered OK */
    NODE_FORWARD_ERROR,         /* the leader answered an error, relayed as it is */
    NODE_FORWARD_NOT_SENT,      /* it could not be sent (no connection, refused): NO_LEADER */
    NODE_FORWARD_NO_ANSWER,     /* sent, no answer in time: UNKNOWN_OUTCOME (write), NO_LEADER */
    NODE_FORWARD_SILENT_LEADER, /* the asked voter named a leader gone silent here: NO_LEADER */
    NODE_FORWARD_OUTCOMES
};

/* ProposeStream bounds: items of one request message, items in flight per stream (results not
 * yet sent); at the second bound the stream is not read (gRPC flow control holds the client). */
#define NODE_PROPOSE_STREAM_ITEMS_MAX 1024u
#define NODE_PROPOSE_STREAM_INFLIGHT_MAX 4096u

struct node_api {
    struct runtime *rt;          /* borrowed */
    struct route_table *routes;  /* borrowed */
    struct transport *transport; /* borrowed; NULL on a single node */
    struct rpc_server *client;   /* borrowed: the client port, where Peer/Forward calls land */
    uint64_t node_id;
    /* ProposeStream items in flight per stream (--propose-stream-inflight); 0: the default */
    uint64_t propose_stream_inflight;
    /* Peer authentication (peer_auth.c). peer_verifier (borrowed; NULL: no
     * --cluster-secret-file) checks the proof every Peer call carries; peer_mtls: the peers'
     * verified client certificates name them ("node-<id>"). Neither: Peer calls are not
     * authenticated (one node, or a cluster started with a warning). */
    struct auth_verifier *peer_verifier;
    bool peer_mtls;
    /* Users and roles (authz.c; borrowed, NULL = auth off and no Authenticate). With --auth,
     * Metadata and Admin calls need a caller (node_authz_caller) with the grant. */
    struct node_authz *authz;
    struct node_watch *watch; /* watch.c: Metadata/Watch streams (node_watch_register) */
    /* slotd_forward_total{method,outcome} by [read = 0, propose = 1][outcome]; owned by the
     * registry node_api_metrics_register was given; NULL: not counted */
    struct metrics_counter *forwards[2][NODE_FORWARD_OUTCOMES];
    struct store *store;        /* borrowed: this node's store, read by Admin/Backup */
    struct node_backup *backup; /* backup.c: the Admin/Backup capture (node_backup_register) */
    /* slotd_backup_runs_total{result} ([0] ok, [1] failed), slotd_backup_last_success_timestamp_
     * seconds and slotd_backup_last_bytes (node_backup_metrics_register); NULL: not kept */
    struct metrics_counter *backup_runs[2];
    struct metrics_gauge *backup_last_success_s, *backup_last_bytes;
    /* slotd_propose_stream_inflight_peak: the most items one ProposeStream had in flight at
     * once (node_api_metrics_register; NULL: not kept); stream_peak is its value */
    struct metrics_gauge *stream_peak_gauge;
    _Atomic int64_t stream_peak;
};

/* m: borrowed (may be NULL: nothing is counted); the series stay the registry's. Registers
 * slotd_forward_total{method,outcome} and slotd_propose_stream_inflight_peak and points
 * api->forwards and api->stream_peak_gauge at their series. Returns a
 * METRICS_* code. Call before node_api_register. */
int node_api_metrics_register(struct node_api *api, struct metrics_registry *m);

/* Runs of hash slots (parts) one range or spanning listing page asks at once: at most this many
 * group pages of at most SLOT_RANGE_PAGE_BYTES (SLOT_LIST_PAGE_BYTES) each are held while a page
 * is merged. */
#define NODE_RANGE_FANOUT_RUNS 8

/* range.c: serves the validated, authorized range query r (not count_only) of call as one page
 * merged from the single-group pages of the next NODE_RANGE_FANOUT_RUNS runs of hash slots from
 * the cursor's, asked at once through this node's own Read handler (as local calls: routed and
 * forwarded like any page), in hash-slot order, up to the query's limit and
 * SLOT_RANGE_PAGE_BYTES. A run's failure ends the page before it (the first run's is the
 * answer). Returns 0 (the call is or will be answered) or -1 with err. */
int node_range_fanout(struct node_api *api, struct rpc_call *call, const Slotd__V1__ReadRequest *r,
                      struct slotd_error *err);
/* range.c: the same for a validated, authorized typed listing that spans hash slots
 * (slot_list_spans), from hash slot `first` (its cursor's), up to the query's limit and
 * SLOT_LIST_PAGE_BYTES. */
int node_list_fanout(struct node_api *api, struct rpc_call *call, const Slotd__V1__ReadRequest *r,
                     uint16_t first, struct slotd_error *err);

/* Metadata/Watch on the client port and Peer/WatchPoll on the peer port, and the thread that
 * drives the streams (node_api_register calls it). */
int node_watch_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer);
/* After the servers are shut down: ends the streams left and stops the thread. */
void node_watch_stop(struct node_api *api);

/* backup.c: Admin/Backup on the client port (one capture thread at a time per node; it reads
 * groups this node has no follower replica of from other nodes) and Peer/BackupOpen, BackupRead,
 * BackupClose on the peer port (the sessions other nodes' captures read through). */
int node_backup_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer);
/* Registers the Admin/Backup metrics of this node in m (borrowed; NULL: none). Before the
 * servers start. Returns a METRICS_E* code. */
int node_backup_metrics_register(struct node_api *api, struct metrics_registry *m);
/* After the servers are shut down and before the store closes: waits for the capture thread
 * (its stream is closed by then, so it stops at its next record) and frees the state. */
void node_backup_stop(struct node_api *api);

/* Fails call with SLOTD_EMALFORMED, field "request": "request: does not decode as <what>" (what,
 * a message's full name, borrowed for the call). */
/* CLOCK_MONOTONIC and CLOCK_REALTIME in ms, for the node's deadlines, timeouts and timestamps. */
int64_t node_mono_ms(void);
uint64_t node_wall_ms(void);

void node_fail_malformed(struct rpc_call *call, const char *what);
/* req (len bytes, borrowed) decoded as a message of d; NULL once call is failed as
 * node_fail_malformed(call, d->name) does. Caller frees with protobuf_c_message_free_unpacked(). */
void *node_request_decode(struct rpc_call *call, const ProtobufCMessageDescriptor *d,
                          const uint8_t *req, size_t len);

/* The node calling Peer method (its path, borrowed) with request body req (len bytes, borrowed):
 * *caller is the node the cluster-secret proof and/or the client certificate prove, 0 when this
 * node authenticates no peer. remember: the proof is refused when replayed (state-changing, low
 * rate methods; raft traffic tolerates duplicates). Returns 0, or -1 with err UNAUTHENTICATED
 * (or RESOURCE_EXHAUSTED when the replay memory is full) naming what failed. Any thread. */
int node_peer_caller(struct node_api *api, struct rpc_call *call, const char *method,
                     const uint8_t *req, size_t len, bool remember, uint64_t *caller,
                     struct slotd_error *err);
/* Same, also accepting a proof made for no particular receiver (transport_forward_addr: a
 * joining node that knows only an address). Only for idempotent calls (see on_peer_forward). */
int node_peer_caller_unaddressed(struct node_api *api, struct rpc_call *call, const char *method,
                                 const uint8_t *req, size_t len, bool remember, uint64_t *caller,
                                 struct slotd_error *err);
/* The caller of one frame of a Peer stream (method, borrowed) whose body is body (len bytes,
 * borrowed): as node_peer_caller without replay memory, with the frame's own proof (plen bytes,
 * borrowed; plen 0: none) and cert, the node the stream's client certificate names
 * (node_peer_cert_node, looked up once per stream; used only with peer_mtls). Any thread. */
int node_peer_frame_caller(struct node_api *api, const char *method, const char *proof,
                           size_t plen, const uint8_t *body, size_t len, uint64_t cert,
                           uint64_t *caller, struct slotd_error *err);
/* The node call's verified client certificate names (CN or SAN node-<id>), 0 if none or if
 * several disagree. */
uint64_t node_peer_cert_node(struct rpc_call *call);
/* The fields of a packed slotd.internal.v1.RaftStreamFrame (frame, len bytes, borrowed): proof
 * (*plen bytes, not NUL-terminated; NULL when absent) and batch (*blen bytes; NULL when absent),
 * both pointing into frame. Returns 0, or -1 when frame is not well formed. */
int node_peer_frame_parse(const uint8_t *frame, size_t len, const char **proof, size_t *plen,
                          const uint8_t **batch, size_t *blen);
/* 0 when caller is 0 (no authentication) or the sender the body claims (claimed) is caller;
 * else -1 with err UNAUTHENTICATED naming both. */
int node_peer_sender(struct node_api *api, const char *method, uint64_t caller, uint64_t claimed,
                     struct slotd_error *err);
/* Field 1 (from_node, a varint) of the encoded top-level message msg (len bytes, borrowed),
 * without decoding nested messages: *from is 0 when absent. Returns 0, -1 when msg is not a
 * well-formed protobuf message at the top level. */
int node_peer_from_node(const uint8_t *msg, size_t len, uint64_t *from);

/* Proposes cmd (borrowed) on the controller leader for call: proposes here when this node
 * leads, else relays msg (the decoded request, packed again; no_forward set) once to the leader
 * (voters) or to a voter (mirrors). Returns 0 when the call is taken care of, -1 with err. */
int node_admin_submit(struct node_api *api, struct rpc_call *call, const char *method,
                      const char *cmd, ProtobufCMessage *msg, protobuf_c_boolean *no_forward,
                      struct slotd_error *err);
/* 0 when the caller of this Admin call may use the Admin service (admin permission, a node, or
 * auth off); else -1 after failing the call (UNAUTHENTICATED / PERMISSION_DENIED). */
int node_admin_gate(struct node_api *api, struct rpc_call *call, const uint8_t *req, size_t len);
/* Registers Admin.Authenticate, UserWrite, RoleWrite and AuthList (admin_auth.c). */
int node_admin_auth_register(struct node_api *api, struct rpc_server *s);

/* The client address ("host:port" clients dial) of node id as this node's route has it, copied
 * into buf (len bytes); "" when unknown. Returns buf. Any thread. */
const char *node_client_address(struct node_api *api, uint64_t id, char *buf, size_t len);

/* Registers slotd.v1.Metadata and slotd.v1.Admin on the client port `client`, and
 * slotd.internal.v1.Peer on the peer port `peer` (a server made with peer_plane), before either
 * starts; api->client must be `client`. api is borrowed for the servers' lifetime. */
int node_api_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer);
/* Registers slotd.v1.Admin on client and Peer/ControllerCommand and Peer/MigrationPropose on peer
 * (admin.c); node_api_register calls it. */
int node_admin_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer);
/* Answers slotd.v1.Metadata/TaskStatus from the cluster state this node holds (admin.c). */
void node_admin_task_status(struct node_api *api, struct rpc_call *call, uint64_t task_id,
                            bool active_only);

/* A read of the cluster state held until this node serves min_revision or later (read your
 * admin writes on any node). The fields are the decoded request's, copied. */
struct node_gated {
    struct node_api *api;
    struct rpc_call *call;
    uint64_t min_revision;
    void (*answer)(const struct node_gated *g); /* answers g->call from the state held */
    uint64_t task_id;                           /* TaskStatus */
    bool active_only;                           /* TaskStatus */
    uint64_t known_revision;                    /* ClusterState */
    char known_checksum[72];                    /* ClusterState */
    bool secrets; /* ClusterState: the caller is a node (password hashes and token key kept) */
};
/* g: copied. Answers now when min_revision is 0 or reached; else holds the call (at most
 * RUNTIME_CTL_WAIT_MS, on a heap copy) and answers it from the loop thread when the state gets
 * there, or fails it UNAVAILABLE (ROUTE_NOT_READY, field min_revision) naming the revision
 * reached. A full wait list fails it RESOURCE_EXHAUSTED. */
void node_gate(const struct node_gated *g);

#endif /* SLOTD_NODE_API_H */
