/* controller.h - the controller's replicated state machine: cluster state, commands, placement. */
#ifndef SLOTD_CONTROLLER_H
#define SLOTD_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds of the state model. Every array in struct ctl_state is fixed-size, so a state is plain
 * data: copy it with memcpy or plain assignment (no pointers inside, nothing to free). */
#define CTL_SCHEMA_VERSION 1
#define CTL_HASH_SLOTS 256
#define CTL_HASH_SLOT_BYTES (CTL_HASH_SLOTS / 8) /* a hash-slot bitmap: bit s%8 of byte s/8 */
#define CTL_GROUPS_MAX 64
#define CTL_NODES_MAX 64
#define CTL_ZONE_MAX 32 /* bytes of a node's zone label */
#define CTL_TASKS_MAX 64
#define CTL_REPLICAS_MAX 7
#define CTL_PARTICIPANTS_MAX 8
#define CTL_CLUSTER_ID_MAX 64  /* bytes, [A-Za-z0-9._-] */
#define CTL_ADDRESS_MAX 127    /* bytes of "host:port" */
#define CTL_LAST_ERROR_MAX 256 /* bytes of a task's last_error (UTF-8) */
#define CTL_WEIGHT_MIN 1
#define CTL_WEIGHT_MAX 1000
#define CTL_WEIGHT_DEFAULT 100
#define CTL_TASK_PHASES_MAX 16 /* phase_index < CTL_TASK_PHASES_MAX */
#define CTL_TASK_ATTEMPTS_MAX 1000
#define CTL_HEALTH_TTL_MS_MAX 86400000u         /* one day */
#define CTL_U64_JSON_MAX 9223372036854775807ull /* JSON integers are signed 64-bit */
#define CTL_FILE_BYTES_MAX (4u << 20)           /* encoded state and state file bound */
#define CTL_CMD_BYTES_MAX (64u << 10)           /* a command larger than this is rejected */
#define CTL_REASON_MAX 256                      /* bytes of an outcome reason, NUL included */

/* X(name, value, message) */
#define CTL_ERRORS(X)                                                                              \
    X(CTL_OK, 0, "ok")                                                                             \
    X(CTL_EINVALID, 1, "invalid argument")                                                         \
    X(CTL_ENOMEM, 2, "out of memory")                                                              \
    X(CTL_EDECODE, 3, "malformed cluster state")                                                   \
    X(CTL_ECHECKSUM, 4, "cluster state checksum mismatch")                                         \
    X(CTL_ESTATE, 5, "cluster state breaks a rule")                                                \
    X(CTL_ENOT_FOUND, 6, "cluster state file not found")                                           \
    X(CTL_ETOO_BIG, 7, "cluster state too big")                                                    \
    X(CTL_EIO, 8, "I/O error")                                                                     \
    X(CTL_EORDER, 9, "raft index not after applied_raft_index")                                    \
    X(CTL_EFACT, 10, "a fact the controller leader observed does not hold")

enum ctl_err {
#define CTL__ENUM(name, value, msg) name = value,
    CTL_ERRORS(CTL__ENUM)
#undef CTL__ENUM
};

/* Static message for a ctl_err ("unknown error" for other values). */
const char *ctl_strerror(int err);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): ctl_crc32c("123456789") = 0xE3069283.
 * data is borrowed for the call; NULL is allowed when len is 0. */
uint32_t ctl_crc32c(const void *data, size_t len);

/* ---- state model ---------------------------------------------------------------------------- */

enum ctl_role { CTL_ROLE_CONTROLLER_VOTER = 1u << 0, CTL_ROLE_DATA = 1u << 1 };

enum ctl_join_state { CTL_JOIN_JOINING, CTL_JOIN_ACTIVE, CTL_JOIN_LEAVING, CTL_JOIN_REMOVED };

enum ctl_node_status { CTL_STATUS_ALIVE, CTL_STATUS_SUSPECT, CTL_STATUS_DOWN };

enum ctl_task_kind {
    CTL_TASK_REPLICA_MOVE,
    CTL_TASK_LEADER_TRANSFER,
    CTL_TASK_HASH_SLOT_MIGRATION,
    CTL_TASK_CONTROLLER_VOTER_PROMOTION,
    CTL_TASK_NODE_DRAIN,
};

enum ctl_task_status { CTL_TASK_PENDING, CTL_TASK_RUNNING, CTL_TASK_FAILED, CTL_TASK_DONE };

/* JSON names ("joining", "suspect", "replica_move", ...); NULL for a value out of range. */
const char *ctl_join_state_name(enum ctl_join_state v);
const char *ctl_node_status_name(enum ctl_node_status v);
const char *ctl_task_kind_name(enum ctl_task_kind v);
const char *ctl_task_status_name(enum ctl_task_status v);

struct ctl_config {
    uint32_t slot_groups;      /* 1..CTL_GROUPS_MAX */
    uint32_t hash_slots;       /* always CTL_HASH_SLOTS */
    uint32_t replicas;         /* 1..CTL_REPLICAS_MAX */
    uint32_t bootstrap_expect; /* active data nodes needed before placement, 1..CTL_NODES_MAX */
};

struct ctl_node {
    uint64_t id;                       /* >= 1, unique */
    char address[CTL_ADDRESS_MAX + 1]; /* peer port (--peer-listen) "host:port", unique */
    /* client port (--listen) "host:port" clients reach, unique when set; "" until known (the
     * node reports it itself: node_address) */
    char client_address[CTL_ADDRESS_MAX + 1];
    uint32_t roles; /* non-empty set of enum ctl_role bits */
    enum ctl_join_state join_state;
    enum ctl_node_status status;
    uint32_t weight; /* capacity weight, CTL_WEIGHT_MIN..CTL_WEIGHT_MAX */
    /* failure domain (--zone), "" = none; ctl_zone_valid. Set by the node's own node_zone
     * report: no two replicas of a group in one zone where the balancer and repair choose. */
    char zone[CTL_ZONE_MAX + 1];
};

struct ctl_group {
    uint32_t id;                              /* invariant: groups[i].id == i + 1 */
    uint32_t n_peers;                         /* 1..config.replicas */
    uint64_t desired_peers[CTL_REPLICAS_MAX]; /* sorted set of non-removed data nodes */
    uint64_t config_epoch;                    /* >= 1 */
    uint64_t preferred_leader;                /* a member of desired_peers */
};

struct ctl_range {
    uint32_t first, last; /* inclusive hash slots, first <= last */
    uint32_t group;       /* an existing group */
};

struct ctl_hash_slot_table {
    uint64_t version;  /* 0 = no table yet (then n_ranges == 0) */
    uint32_t n_ranges; /* invariant: ranges sorted, contiguous, cover 0..255 when version > 0 */
    struct ctl_range ranges[CTL_HASH_SLOTS];
};

/* The last live raft facts a phase advance carried (task_advance "proof"). For a group task they
 * describe the group's raft configuration; for controller_voter_promotion the controller group's.
 * For hash_slot_migration, config_index is the raft index at which the phase's entry was applied
 * (fence and release: in the source group; copy: the accept entry in to_group) and leader the node
 * that observed it as that group's leader; voters and learners are not checked.
 * voters and learners are sorted sets of node ids, disjoint. */
struct ctl_task_proof {
    uint64_t config_index; /* raft index of the observed configuration (migration: see above) */
    uint32_t n_voters, n_learners;
    uint64_t voters[CTL_REPLICAS_MAX];
    uint64_t learners[CTL_REPLICAS_MAX];
    uint64_t leader;       /* observed leader, 0 = none */
    uint64_t commit;       /* leader's commit index */
    uint64_t target_match; /* leader's match index of the task's target (catch-up phases) */
};

/* What the executor last reported for the current phase (task_progress). Not reset by an advance:
 * it always shows the last report. */
struct ctl_task_progress {
    uint64_t bytes_sent, bytes_total; /* bytes sent / to send (snapshot or rows), 0 = unknown */
    uint64_t target_match, commit;    /* learner catch-up as last seen by the group leader */
};

/* Phases of each task kind (phase_index values). A task that reaches the last phase of its kind
 * ("done") has status done. */
enum ctl_task_phase {
    CTL_PHASE_MOVE_ADD_LEARNER = 0, /* replica_move */
    CTL_PHASE_MOVE_CATCH_UP = 1,
    CTL_PHASE_MOVE_PROMOTE = 2,
    CTL_PHASE_MOVE_REMOVE_SOURCE = 3,
    CTL_PHASE_MOVE_DONE = 4,
    CTL_PHASE_TRANSFER = 0, /* leader_transfer */
    CTL_PHASE_TRANSFER_DONE = 1,
    CTL_PHASE_MIGRATION_FENCE = 0,   /* hash_slot_migration: source refuses writes to the slots */
    CTL_PHASE_MIGRATION_COPY = 1,    /* rows copied to to_group, which accepts the slots */
    CTL_PHASE_MIGRATION_RELEASE = 2, /* the table says to_group; the source drops its copy */
    CTL_PHASE_MIGRATION_DONE = 3,
    CTL_PHASE_PROMOTION_ADD_LEARNER = 0, /* controller_voter_promotion */
    CTL_PHASE_PROMOTION_CATCH_UP = 1,
    CTL_PHASE_PROMOTION_PROMOTE = 2,
    CTL_PHASE_PROMOTION_DONE = 3,
    CTL_PHASE_DRAIN_MOVING_REPLICAS = 0, /* node_drain */
    CTL_PHASE_DRAIN_DONE = 1,
};

/* Phase name ("add_learner", "catch_up", "promote", "remove_source", "transfer", "fence", "copy",
 * "release", "moving_replicas", "done"); NULL for a kind or a phase out of range. */
const char *ctl_task_phase_name(enum ctl_task_kind kind, uint32_t phase);

/* A task. Who is who, by kind:
 *   replica_move:               group, source = the replica leaving, target = the replica coming.
 *   leader_transfer:            group, source = the leader the creator observed (0 = unknown),
 *                               target = the new preferred leader.
 *   controller_voter_promotion: group 0, target = the node being promoted, source 0,
 *                               previous_voters = the controller voters at creation.
 *   node_drain:                 group 0, source = the node being drained, target 0.
 *   hash_slot_migration:        group = the source group (the one that owned the slots at
 *                               creation), to_group = where they go, hash_slots = the slots;
 *                               source, target 0. It occupies both groups while active.
 * participants is the sorted set of the nonzero source and target. */
struct ctl_task {
    uint64_t id; /* >= 1, unique, below ctl_state.next_task_id */
    enum ctl_task_kind kind;
    uint32_t group;        /* 0 = no group (voter promotion, drain); else an existing group */
    uint32_t phase_index;  /* < CTL_TASK_PHASES_MAX; <= the kind's done phase */
    uint64_t config_epoch; /* the group's config_epoch at creation (0 without a group) */
    uint32_t attempt;      /* 1..CTL_TASK_ATTEMPTS_MAX, +1 per task_retry */
    enum ctl_task_status status;
    char last_error[CTL_LAST_ERROR_MAX + 1]; /* NUL-terminated UTF-8, "" = none */
    uint32_t n_participants;
    uint64_t participants[CTL_PARTICIPANTS_MAX]; /* sorted set of existing node ids */
    uint64_t created_ms, updated_ms;             /* invariant: created_ms <= updated_ms */
    uint64_t source, target;                     /* existing node ids, 0 = none (see above) */
    uint32_t n_previous_voters;
    uint64_t previous_voters[CTL_REPLICAS_MAX]; /* sorted set; promotion only, else empty */
    struct ctl_task_proof proof;                /* all zero until the first advance */
    struct ctl_task_progress progress;          /* all zero until the first task_progress */
    uint32_t to_group; /* hash_slot_migration: an existing group != group; else 0 */
    /* hash_slot_migration: the slots moved, non-empty (bit s%8 of byte s/8 = hash slot s); all zero
     * for other kinds. invariant (while active): every slot maps to group in the table at phases
     * fence and copy, to to_group from release on */
    uint8_t hash_slots[CTL_HASH_SLOT_BYTES];
};

/* Cluster-wide switches, replicated like the rest of the state, so every node and the controller
 * itself honour the same value whichever node a call goes through. Set by bootstrap's optional
 * "features" and by set_feature. */
struct ctl_features {
    bool hash_slot_migration; /* Admin.MigrateHashSlots accepted; default false */
    bool operations_mcp; /* `slotctl mcp` offers its mutating tools (to admins); default false */
    /* the controller leader plans no balance moves (Admin.SetBalance enabled=false); default
     * false: nodes started with --balance 1 balance */
    bool balance_paused;
};

/* Names of the features set_feature takes ("hash_slot_migration", "operations_mcp",
 * "balance_paused"), in ctl_features order; CTL_FEATURE_NAMES_TEXT lists them for error
 * messages. */
#define CTL_FEATURE_NAMES_MAX 3
#define CTL_FEATURE_NAMES_TEXT "hash_slot_migration, operations_mcp, balance_paused"
extern const char *const ctl_feature_names[CTL_FEATURE_NAMES_MAX];

/* The switch of features f named name (one of ctl_feature_names), or NULL. Borrowed from f. */
bool *ctl_feature_get(struct ctl_features *f, const char *name);

struct ctl_health {
    uint64_t node; /* an existing node; one entry per node at most */
    uint64_t reported_at_ms;
    uint64_t ttl_ms; /* 1..CTL_HEALTH_TTL_MS_MAX */
};

/* ---- users and roles (RBAC, service/controller/auth.c) -------------------------------------
 * The "auth" section exists once auth_init applied (enabled): the token key every node signs and
 * checks client tokens with, the users (password hashes from crypto_pwhash_str) and the roles.
 * Password hashes and the token key are secrets: ctl_state_encode writes them (the raft snapshot,
 * the fsm copy, cluster-state.json in the data directory and the copy mirrors fetch as nodes);
 * Admin.ClusterState answers clients without them (service/node/admin.c). */
#define CTL_USERS_MAX 64
#define CTL_AUTH_ROLES_MAX 32
#define CTL_USER_ROLES_MAX 8
#define CTL_ROLE_PERMS_MAX 16
#define CTL_AUTH_NAME_MAX 32      /* bytes of a user or role name: [A-Za-z0-9._-], not node-<n> */
#define CTL_KEY_PREFIX_MAX 128    /* bytes of a key prefix grant: printable ASCII 0x20..0x7e */
#define CTL_PASSWORD_HASH_MAX 127 /* a crypto_pwhash_str string ("$argon2id$..."), NUL excluded */
#define CTL_TOKEN_KEY_BYTES 32
#define CTL_AUTH_ROOT "root" /* the built-in role (everything) and the user auth_init creates */
/* Typed metadata kinds a role can be granted (ProposeRequest commands / ReadRequest queries
 * 14..16 lease, 20..29 user, 30..39 channel, 40..44 conversation, 45..49 cmd, 51..54 runtime_meta,
 * 55..59 migration_task, 60..64 plugin, 65.. event). */
#define CTL_AUTH_KINDS                                                                             \
    "user", "channel", "conversation", "cmd", "runtime_meta", "migration_task", "plugin", "event", \
        "lease"

enum ctl_perm_type { CTL_PERM_KEY_PREFIX, CTL_PERM_KIND, CTL_PERM_ADMIN };
enum ctl_access { CTL_ACCESS_READ = 1u << 0, CTL_ACCESS_WRITE = 1u << 1 };

/* "key_prefix", "kind", "admin" / "read", "write", "readwrite"; NULL out of range. */
const char *ctl_perm_type_name(enum ctl_perm_type v);
const char *ctl_access_name(uint32_t access);

struct ctl_perm {
    enum ctl_perm_type type;
    uint32_t access;                    /* non-empty set of ctl_access bits; admin: both */
    char value[CTL_KEY_PREFIX_MAX + 1]; /* key prefix ("" = every key), kind name, "" for admin */
};

struct ctl_auth_role {
    char name[CTL_AUTH_NAME_MAX + 1]; /* unique, never "root" */
    uint32_t n_perms;
    struct ctl_perm perms[CTL_ROLE_PERMS_MAX]; /* sorted by (type, value), one per (type, value) */
};

struct ctl_user {
    char name[CTL_AUTH_NAME_MAX + 1];              /* unique */
    char password_hash[CTL_PASSWORD_HASH_MAX + 1]; /* "$argon2id$..." */
    uint64_t revision; /* the state revision of the user's last change: tokens carry it */
    uint32_t n_roles;
    char roles[CTL_USER_ROLES_MAX][CTL_AUTH_NAME_MAX + 1]; /* sorted; "root" or existing roles */
};

struct ctl_auth {
    bool enabled; /* auth_init applied: token_key set, user root exists */
    uint8_t token_key[CTL_TOKEN_KEY_BYTES];
    uint32_t n_users;
    struct ctl_user users[CTL_USERS_MAX]; /* sorted by name */
    uint32_t n_roles;
    struct ctl_auth_role roles[CTL_AUTH_ROLES_MAX]; /* sorted by name */
};

/* User / role with this name, NULL if absent. Borrowed from a. */
const struct ctl_user *ctl_auth_user(const struct ctl_auth *a, const char *name);
const struct ctl_auth_role *ctl_auth_role(const struct ctl_auth *a, const char *name);

/* What one call needs: access (one ctl_access bit) on a key (KEY_PREFIX: key[0..key_len)), on a
 * kind (KIND: kind, one of CTL_AUTH_KINDS), or ADMIN. Borrowed for the call. */
struct ctl_need {
    enum ctl_perm_type type;
    uint32_t access;
    const uint8_t *key;
    size_t key_len;
    const char *kind;
};

/* 0 when user u (borrowed from a) holds the need through role root or a granted permission (a
 * key_prefix grant covers every key starting with its prefix); else -1 with a sentence in why
 * (borrowed, errlen > 0) naming what was needed and what the user has, e.g. 'write on key "a/1"
 * needed (a key_prefix grant covering it); user bob has read key_prefix "b/"'. */
int ctl_auth_check(const struct ctl_auth *a, const struct ctl_user *u, const struct ctl_need *need,
                   char *why, size_t whylen);

/* ---- backup plan (service/controller/backup_plan.c) ----------------------------------------
 * At most one plan: every interval_s the controller leader starts a run (backup_run_start) on one
 * data node, which writes one backup file into destination on its own disk, keeps the newest
 * retention files and reports the result (backup_run_report, fenced by run id and node). */
#define CTL_BACKUP_INTERVAL_S_MIN 5
#define CTL_BACKUP_INTERVAL_S_MAX 2592000u /* 30 days */
#define CTL_BACKUP_RETENTION_MAX 1000
#define CTL_BACKUP_DESTINATION_MAX 255 /* bytes of an absolute directory path */

/* NULL when d (borrowed for the call) is a good backup destination, else why not (a static
 * string, e.g. "must be an absolute path (start with /)"). */
const char *ctl_backup_destination_check(const char *d);

struct ctl_backup_plan {
    bool set;            /* a plan exists (backup_plan_set; backup_plan_delete clears it) */
    uint64_t interval_s; /* CTL_BACKUP_INTERVAL_S_MIN..MAX when set, else 0 */
    /* absolute path: starts with '/', printable ASCII, no "." or ".." component; "" when not set */
    char destination[CTL_BACKUP_DESTINATION_MAX + 1];
    uint32_t retention; /* files kept, 1..CTL_BACKUP_RETENTION_MAX when set, else 0 */
    /* runs: ids never go back, also across delete and set (a stale report never matches) */
    uint64_t run_id;         /* the last run started, 0 = none yet */
    uint64_t run_node;       /* the node of run_id (0 iff run_id is 0) */
    uint64_t run_started_ms; /* now_ms of its backup_run_start */
    bool running;            /* run_id started and not reported; invariant: running => run_id */
    uint64_t last_success_run, last_success_ms, last_success_bytes; /* 0 = none yet */
    uint64_t last_failure_run, last_failure_ms;                     /* 0 = none yet */
    char last_error[CTL_LAST_ERROR_MAX + 1]; /* of last_failure_run, "" = none */
};

/* The whole controller state (about 160 KiB with the auth section). Plain data: copy with memcpy or
 * assignment. revision == 0 means "not bootstrapped": then cluster_id is "", config is all zeros
 * and every list is empty. Every u64 is <= CTL_U64_JSON_MAX. Arrays that are sets are kept sorted.
 */
struct ctl_state {
    uint32_t schema_version; /* CTL_SCHEMA_VERSION */
    char cluster_id[CTL_CLUSTER_ID_MAX + 1];
    uint64_t revision;           /* business version: +1 per CHANGED command */
    uint64_t applied_raft_index; /* last controller raft entry applied */
    uint64_t next_task_id;       /* id of the next task_create; >= 1 once bootstrapped */
    struct ctl_config config;
    uint32_t n_nodes;
    struct ctl_node nodes[CTL_NODES_MAX]; /* sorted by id */
    uint32_t n_groups;                    /* 0 (no placement yet) or config.slot_groups */
    struct ctl_group groups[CTL_GROUPS_MAX];
    struct ctl_hash_slot_table table;
    uint32_t n_tasks;
    /* sorted by id; one pending|running task per group, one active promotion, one active drain
     * per node; done and failed tasks are history (evicted oldest first when full) */
    struct ctl_task tasks[CTL_TASKS_MAX];
    uint32_t n_health;
    struct ctl_health health[CTL_NODES_MAX]; /* sorted by node */
    struct ctl_auth auth;                    /* users and roles; disabled = absent from JSON */
    struct ctl_features features;  /* all false until set (and in a state written before them) */
    struct ctl_backup_plan backup; /* absent from JSON while !set and run_id == 0 */
};

/* Resets *state (borrowed for the call) to the empty, not bootstrapped state. */
void ctl_state_init(struct ctl_state *state);

/* CTL_OK when state (borrowed for the call) keeps every rule of the model, including cross
 * references; else CTL_ESTATE with a sentence naming the field and the limit written to err
 * (borrowed for the call, may be NULL when errlen is 0), e.g. "nodes[2].weight: 0 not in
 * 1..1000". */
int ctl_state_validate(const struct ctl_state *state, char *err, size_t errlen);

/* Node / group with this id, NULL if absent. Borrowed from state. */
const struct ctl_node *ctl_state_node(const struct ctl_state *state, uint64_t id);
const struct ctl_group *ctl_state_group(const struct ctl_state *state, uint32_t id);

/* Task with this id, NULL if absent (never created, or evicted from the history). Borrowed from
 * state. */
const struct ctl_task *ctl_state_task(const struct ctl_state *state, uint64_t id);

/* The pending or running task of this group, NULL if none: a task whose group is this one, or a
 * hash_slot_migration whose to_group is (a migration occupies both groups). Borrowed from state.
 * group 0 gives the oldest active task without a group (there may be several: one promotion,
 * drains). */
const struct ctl_task *ctl_state_active_task(const struct ctl_state *state, uint32_t group);

/* ---- canonical encoding ---------------------------------------------------------------------- */

/* Writes the canonical JSON of state (borrowed for the call): sorted keys, compact, sets sorted,
 * "checksum" = 8 lowercase hex digits of the CRC-32C of the canonical encoding without the
 * checksum field. *buf (NUL-terminated, *len excludes the NUL): caller frees with ctl_free().
 * Returns CTL_ESTATE when the state is invalid (ctl_state_validate says why), CTL_ENOMEM. */
int ctl_state_encode(const struct ctl_state *state, char **buf, size_t *len);

/* The CRC-32C that ctl_state_encode would store as "checksum". state is borrowed for the call.
 * Returns CTL_ESTATE / CTL_ENOMEM like ctl_state_encode. */
int ctl_state_checksum(const struct ctl_state *state, uint32_t *crc);

/* Strict decode of buf (borrowed for the call): unknown fields anywhere, duplicate keys, wrong
 * types, missing fields, out-of-range numbers, a bad checksum and every ctl_state_validate rule
 * are errors. *state (borrowed for the call) is written only on success. Returns CTL_ETOO_BIG
 * (len > CTL_FILE_BYTES_MAX), CTL_EDECODE, CTL_ECHECKSUM, CTL_ESTATE, CTL_ENOMEM, each with a
 * sentence in err (borrowed, may be NULL when errlen is 0). */
int ctl_state_decode(const void *buf, size_t len, struct ctl_state *state, char *err,
                     size_t errlen);

/* Frees a buffer returned by ctl_state_encode or a ctl_cmd_* builder. NULL is a no-op. */
void ctl_free(void *p);

/* ---- commands ---------------------------------------------------------------------------------
 */

enum ctl_outcome {
    CTL_OUTCOME_CHANGED,  /* business state changed, revision += 1 */
    CTL_OUTCOME_UPDATED,  /* non-business change (health), revision unchanged */
    CTL_OUTCOME_NOOP,     /* nothing to do; reason says why */
    CTL_OUTCOME_REJECTED, /* refused; reason says why */
};

/* "changed", "updated", "noop", "rejected"; NULL for a value out of range. */
const char *ctl_outcome_name(enum ctl_outcome v);

struct ctl_result {
    enum ctl_outcome outcome;
    char reason[CTL_REASON_MAX]; /* "" for changed and updated */
    uint64_t task_id;            /* the new task's id after a CHANGED task_create, else 0 */
};

/* Applies the command cmd[0..cmd_len) (borrowed for the call), the JSON object of the raft entry
 * at raft_index, to state (borrowed for the call), and fills result (borrowed for the call).
 * Deterministic: the outcome depends only on state and the command bytes (time comes from the
 * command's "now_ms"). CHANGED and UPDATED write the new state (which passed ctl_state_validate);
 * NOOP and REJECTED leave it unchanged. In all four cases state->applied_raft_index = raft_index
 * and the call returns CTL_OK.
 * Commands (field "op"; each may also carry "expected_revision" and "now_ms"):
 *   bootstrap {cluster_id, config{slot_groups,replicas,bootstrap_expect}, nodes[{id,address,
 *     client_address?,weight?}]}, join_node {id,address,client_address?,weight?},
 *   node_address {id,address,client_address} (a node's own report of where it serves),
 *   activate_node {id}, set_preferred_leader
 *   {group,node}, set_node_status {id,status}, health_report {node,now_ms,ttl_ms},
 *   set_weight {id,weight}, set_feature {name,enabled} (CHANGED, or NOOP when already so;
 *   bootstrap takes an optional "features" {hash_slot_migration}), and the task commands
 *   task_create, task_advance, task_progress, task_fail, task_retry (see "tasks" below and
 * README.md). Unknown fields, wrong types and unparseable bytes are REJECTED. Errors leave *state
 * untouched, applied_raft_index included: CTL_EORDER when raft_index <= state->applied_raft_index
 * or raft_index > CTL_U64_JSON_MAX (replay only the log suffix), CTL_ENOMEM (retry the same entry;
 * never treat it as a rejection). */
int ctl_apply(struct ctl_state *state, uint64_t raft_index, const void *cmd, size_t cmd_len,
              struct ctl_result *result);

/* Command builders: canonical JSON for one op, so callers never hand-write commands.
 * expected_revision 0 = field omitted (no compare-and-set). In ctl_cmd_bootstrap and
 * ctl_cmd_join_node a weight of 0 omits the field (ctl_apply then uses CTL_WEIGHT_DEFAULT);
 * ctl_cmd_set_weight always writes its weight. Values are range-checked by ctl_apply, not here.
 * *out (NUL-terminated): caller frees with ctl_free(). Return CTL_EINVALID (NULL string, invalid
 * UTF-8, a u64 above CTL_U64_JSON_MAX, an enum out of range), CTL_ENOMEM. String arguments are
 * borrowed for the call. */
struct ctl_cmd_node {
    uint64_t id;
    const char *address;        /* peer address, borrowed */
    uint32_t weight;            /* 0 = default */
    const char *client_address; /* borrowed; NULL or "" = not known yet (field omitted) */
};

/* config->hash_slots is not part of the command (it is always CTL_HASH_SLOTS). config and nodes
 * are borrowed for the call. */
int ctl_cmd_bootstrap(const char *cluster_id, const struct ctl_config *config,
                      const struct ctl_cmd_node *nodes, size_t n_nodes, uint64_t expected_revision,
                      char **out);
/* ctl_cmd_bootstrap with the cluster's initial features (features NULL: omitted, all off). */
int ctl_cmd_bootstrap_features(const char *cluster_id, const struct ctl_config *config,
                               const struct ctl_features *features,
                               const struct ctl_cmd_node *nodes, size_t n_nodes,
                               uint64_t expected_revision, char **out);
/* set_feature: name is one of ctl_feature_names (borrowed for the call; others are REJECTED by
 * ctl_apply, naming the known ones). */
int ctl_cmd_set_feature(const char *name, bool enabled, uint64_t expected_revision, char **out);
/* backup_plan_set {interval_s, destination, retention} (CHANGED; NOOP when the plan is so;
 * REJECTED naming the field and its limit) and backup_plan_delete {} (CHANGED; NOOP without a
 * plan). destination is borrowed for the call. */
int ctl_cmd_backup_plan_set(uint64_t interval_s, const char *destination, uint32_t retention,
                            uint64_t expected_revision, char **out);
int ctl_cmd_backup_plan_delete(uint64_t expected_revision, char **out);
/* backup_run_start {run, node, now_ms}: the controller leader's start of run `run` (the plan's
 * run_id + 1, else NOOP "stale run") on node (an active data node that is not down). NOOP while
 * the previous run started less than interval_s ago, or is running and started less than two
 * intervals ago (after that the new run replaces it and the old one is recorded as failed).
 * UPDATED (revision unchanged). */
int ctl_cmd_backup_run_start(uint64_t run, uint64_t node, uint64_t now_ms, char **out);
/* backup_run_report {run, node, ok, bytes, error?, now_ms}: what the run's node did. NOOP ("stale
 * run: ...") unless run is the plan's running run_id and node its run_node; ok without error,
 * !ok with error (1..CTL_LAST_ERROR_MAX bytes of UTF-8, borrowed). UPDATED. */
int ctl_cmd_backup_run_report(uint64_t run, uint64_t node, bool ok, uint64_t bytes,
                              const char *error, uint64_t now_ms, char **out);
int ctl_cmd_join_node(uint64_t id, const char *address, const char *client_address, uint32_t weight,
                      uint64_t expected_revision, char **out);
int ctl_cmd_node_address(uint64_t id, const char *address, const char *client_address,
                         uint64_t expected_revision, char **out);
int ctl_cmd_activate_node(uint64_t id, uint64_t expected_revision, char **out);
/* node_zone {id, zone}: a node's own report of its --zone ("" clears it); zone must pass
 * ctl_zone_valid (CTL_EINVALID otherwise). */
int ctl_cmd_node_zone(uint64_t id, const char *zone, char **out);
/* True when zone is "" or 1..CTL_ZONE_MAX bytes of [a-z0-9._-] (a label as Kubernetes' topology
 * zones are written). zone not NULL. */
bool ctl_zone_valid(const char *zone);
int ctl_cmd_set_preferred_leader(uint32_t group, uint64_t node, uint64_t expected_revision,
                                 char **out);
int ctl_cmd_set_node_status(uint64_t id, enum ctl_node_status status, uint64_t expected_revision,
                            char **out);
int ctl_cmd_health_report(uint64_t node, uint64_t now_ms, uint64_t ttl_ms,
                          uint64_t expected_revision, char **out);
int ctl_cmd_set_weight(uint64_t id, uint32_t weight, uint64_t expected_revision, char **out);

/* Auth commands (auth.c). auth_init {token_key (64 hex digits), root_hash}: REJECTED once
 * enabled; creates user root with role root. user_add {name, password_hash}, user_delete {name}
 * (never root), user_passwd {name, password_hash}, user_grant_role / user_revoke_role {name,
 * role}, role_add {name}, role_delete {name} (REJECTED while a user holds it), role_grant /
 * role_revoke {role, type, access, value}. Every change to a user sets its revision to the new
 * state revision (old tokens stop verifying). All are REJECTED before auth_init. */
int ctl_cmd_auth_init(const uint8_t token_key[CTL_TOKEN_KEY_BYTES], const char *root_hash,
                      char **out);
/* op: "user_add", "user_passwd" (password_hash set) or "user_delete" (password_hash NULL). */
int ctl_cmd_user(const char *op, const char *name, const char *password_hash,
                 uint64_t expected_revision, char **out);
/* op: "user_grant_role" or "user_revoke_role". */
int ctl_cmd_user_role(const char *op, const char *name, const char *role,
                      uint64_t expected_revision, char **out);
/* op: "role_add" or "role_delete" (perm NULL), "role_grant" or "role_revoke" (perm set). */
int ctl_cmd_role(const char *op, const char *name, const struct ctl_perm *perm,
                 uint64_t expected_revision, char **out);

/* ---- tasks ------------------------------------------------------------------------------------
 * A task moves through the phases of its kind. The executor proves each phase with live raft facts
 * through task_advance, fenced by (task, group, config_epoch, attempt, phase): a command whose
 * fence does not match the task (another attempt, a phase already advanced, a task no longer
 * running or unknown) is NOOP with a reason starting "stale fence:", so retries are harmless. A
 * matching fence with a proof that does not satisfy the phase is REJECTED with "proof: ...". For
 * task_advance, task_progress and task_fail the fence is checked before expected_revision, so a
 * repeated command is NOOP, never "stale expected_revision". Every command needs "now_ms".
 *
 * task_create (CHANGED; result.task_id = the new id): kind replica_move {group, source, target},
 * leader_transfer {group, source (0 = unknown), target} (also sets the group's preferred_leader =
 * target), controller_voter_promotion {node}, node_drain {node} (also sets the node's join_state =
 * leaving), hash_slot_migration {hash_slots (1..256 distinct slots, all owned by one group, the
 * source), to_group (another existing group)}: task.group = the source group; REJECTED without a
 * hash-slot table or while the source or to_group has an active task. When CTL_TASKS_MAX tasks
 * exist, the oldest done task (else the oldest failed one) is evicted; when all are active the
 * command is REJECTED.
 * task_advance (CHANGED): moves the task to the next phase, records proof and updated_ms, clears
 * last_error; reaching the done phase completes the task (replica_move: desired_peers =
 * proof.voters, config_epoch + 1, preferred_leader moves to target if it was source;
 * controller_voter_promotion: the node gains the controller_voter role and the command must carry
 * expected_revision; node_drain: join_state = removed, a tombstone). hash_slot_migration: each
 * phase needs proof.config_index and proof.leader nonzero (see struct ctl_task_proof); the advance
 * from copy to release switches the hash-slot table: the slots map to to_group, ranges re-merged,
 * table.version + 1.
 * task_progress (UPDATED, revision unchanged; NOOP when nothing would change): records progress.
 * task_fail (CHANGED): status failed, last_error = error; nothing else changes.
 * task_retry (CHANGED): a failed task runs again with attempt + 1 from the phase it failed in;
 * a hash_slot_migration that failed at fence or copy restarts at fence (the table was not switched
 * yet), one that failed at release stays there (the switch is never undone); a replica_move that
 * failed at add_learner or catch_up restarts at add_learner (the group's leader removed the
 * learner it left, service/runtime/task_cleanup.c).
 * task_abort (CHANGED): a running replica_move at add_learner or catch_up, a leader_transfer or a
 * node_drain (its node goes back from leaving to active) becomes failed with last_error "aborted
 * (Admin.AbortTask) at phase P"; REJECTED for a task that is not running, a move from promote on
 * (the target may already vote), and the other kinds. The fence is the task's live state in the
 * replicated state, checked here, before expected_revision.
 * -------------------------------------------------------------------------------------------- */

struct ctl_task_spec {
    enum ctl_task_kind kind;
    uint32_t group;                          /* replica_move, leader_transfer */
    uint64_t source, target;                 /* replica_move, leader_transfer */
    uint64_t node;                           /* controller_voter_promotion, node_drain */
    uint32_t to_group;                       /* hash_slot_migration */
    uint8_t hash_slots[CTL_HASH_SLOT_BYTES]; /* hash_slot_migration: bitmap as in struct ctl_task */
};

/* task_create: writes the fields the kind uses (group, source, target for replica_move and
 * leader_transfer; hash_slots (a sorted array) and to_group for hash_slot_migration; node for the
 * others), even when 0 or empty. spec is borrowed for the call. */
int ctl_cmd_task_create(const struct ctl_task_spec *spec, uint64_t now_ms,
                        uint64_t expected_revision, char **out);

/* task_advance: proof is borrowed for the call; NULL writes an all-zero proof (node_drain needs no
 * raft facts). replicas_on_node and leading are always written; a node_drain's advance needs
 * ctl_cmd_drain_advance (its tasks_on_node and groups_observed too). Voters and learners may be in
 * any order (ctl_apply sorts them; duplicates are REJECTED). */
int ctl_cmd_task_advance(uint64_t task, uint32_t group, uint64_t config_epoch, uint32_t attempt,
                         uint32_t phase, const struct ctl_task_proof *proof,
                         uint64_t replicas_on_node, uint64_t leading, uint64_t now_ms,
                         uint64_t expected_revision, char **out);

/* What the controller leader observed about a node being drained, the proof of node_drain's
 * last phase (vet.c fills it; ctl_apply accepts the tombstone only when the counts are 0 and
 * groups_observed is every group). */
struct ctl_drain_facts {
    uint64_t replicas_on_node; /* groups whose observed configuration holds the node */
    uint64_t leading;          /* groups the node is the observed leader of */
    uint64_t tasks_on_node;    /* active tasks other than the drain naming the node */
    uint32_t groups_observed;  /* groups whose fresh configuration was read */
};

/* task_advance of a node_drain (group 0, epoch 0, phase moving_replicas) carrying the facts:
 * f is borrowed for the call. */
int ctl_cmd_drain_advance(uint64_t task, uint32_t attempt, const struct ctl_drain_facts *f,
                          uint64_t now_ms, uint64_t expected_revision, char **out);

/* task_progress: progress is borrowed for the call (must not be NULL). */
int ctl_cmd_task_progress(uint64_t task, uint32_t attempt, uint32_t phase,
                          const struct ctl_task_progress *progress, uint64_t now_ms,
                          uint64_t expected_revision, char **out);

/* task_fail: error (borrowed for the call, UTF-8) is cut at a character boundary to at most
 * CTL_LAST_ERROR_MAX bytes; an empty error is REJECTED by ctl_apply. */
int ctl_cmd_task_fail(uint64_t task, uint32_t attempt, uint32_t phase, const char *error,
                      uint64_t now_ms, uint64_t expected_revision, char **out);

int ctl_cmd_task_retry(uint64_t task, uint64_t now_ms, uint64_t expected_revision, char **out);

/* node_remove {id} (CHANGED): a node that is down (status, set by the controller leader from
 * its health reports), not a controller voter and named by no active task becomes removed (a
 * tombstone; its id is never reused) and leaves the desired peers of its groups (config_epoch
 * + 1; a preferred leader moves to the first remaining peer). REJECTED, naming the reason, when
 * any group of it would keep fewer live (not down) desired peers than a quorum of its current
 * ones. On the controller leader ctl_vet also needs every such group's fresh observed leader to
 * be another node. */
int ctl_cmd_node_remove(uint64_t id, uint64_t expected_revision, char **out);

/* controller_voter_demote {node} (CHANGED): the node loses the controller_voter role (it keeps
 * its data role and replicas) and becomes a mirror: the controller leader removes it from group
 * 0 once it stopped answering there (service/runtime/ctl_members.c). REJECTED for an unknown node,
 * one that is not a voter, the only voter, or while a promotion is active. On the controller
 * leader ctl_vet also needs live proof that a quorum remains: voters other than the node that
 * are the leader itself or alive in the state and hold the leader's commit index, as many as a
 * quorum of the current voters. */
int ctl_cmd_controller_voter_demote(uint64_t node, uint64_t expected_revision, char **out);

/* ---- repair (repair.c) ------------------------------------------------------------------------
 * A data node whose status is down and whose last health report is at least down_after_ms old
 * (now_ms: the caller's wall clock) has each replica replaced by an ordinary replica_move task
 * (source: the dead node; target: an active, alive data node outside the group, in a zone no
 * other peer of the group is in when there is such a node, with the fewest replicas per weight,
 * then the lowest id), at most one per group, none for a group with an active
 * task, and at most max_moves replica moves active cluster-wide (the ones already active count).
 * A group whose desired peers that are not down are fewer than a quorum of them is listed in
 * lost[] and never gets a move: it is reported, never forced. down_after_ms 0: no moves (lost[]
 * is still filled). */
struct ctl_repair_move {
    uint32_t group;
    uint64_t source, target;
};
struct ctl_repair_plan {
    uint32_t n_moves;
    struct ctl_repair_move moves[CTL_GROUPS_MAX];
    uint32_t n_lost;
    uint32_t lost[CTL_GROUPS_MAX]; /* group ids without a quorum of live desired peers */
    uint32_t n_waiting; /* replicas of dead nodes not planned now (busy, budget, no target, lost) */
};
/* s and out are borrowed for the call. */
void ctl_repair_plan(const struct ctl_state *s, uint64_t now_ms, uint64_t down_after_ms,
                     uint32_t max_moves, struct ctl_repair_plan *out);
/* Whether g's desired peers that are not down are a quorum of them (s, g borrowed). */
bool ctl_group_has_quorum(const struct ctl_state *s, const struct ctl_group *g);

/* ---- balance (balance.c) ----------------------------------------------------------------------
 * Nodes the balancer places on: active, alive data nodes ("eligible"). Each holds a share of the
 * replicas on eligible nodes proportional to its weight (share = total * weight / sum of weights);
 * a running replica move counts as done (its target holds the replica, its source does not).
 * Each planned move is an ordinary replica_move from the node with the most replicas above its
 * share to the one with the fewest, among pairs whose excesses differ by more than one replica,
 * so every plan lowers the sum of squared excesses and a balanced cluster plans nothing; when no
 * such pair is left every eligible node is within 1 of its share. A group is moved only when it
 * has no active task and no other move in the plan, keeps a quorum of live peers, the alive
 * peers other than the source are a quorum of it (the source is never the only up-to-date copy),
 * and the target's zone, when set, is no zone of another peer (no two replicas of a group in one
 * zone). Before those, a group with two peers in one zone (placed before the zones were known,
 * or by a node that changed zone) gets a move of the one with more excess to the eligible node
 * with the least excess that no other peer's zone holds, when one can take it. At most
 * max_moves replica moves are active cluster-wide, counting the running ones.
 * Replicas on nodes that are not eligible (down, leaving) are left to repair and drain. A share
 * above one replica per group cannot be reached (shares are not capped): such a node stays below
 * it and balanced stays false. */
#define CTL_BALANCE_WHY_MAX 200
struct ctl_balance_move {
    uint32_t group;
    uint64_t source, target;
    char why[CTL_BALANCE_WHY_MAX]; /* the two nodes' counts and shares, and the group */
};
struct ctl_balance_score {
    uint64_t node;
    uint32_t weight;
    uint32_t replicas;  /* desired replicas now, running moves counted as done */
    uint32_t share_x10; /* the weighted share, times 10, rounded */
};
struct ctl_balance_plan {
    uint32_t total_replicas, total_weight; /* over eligible nodes */
    uint32_t n_scores;
    struct ctl_balance_score scores[CTL_NODES_MAX]; /* eligible nodes, by id */
    uint32_t n_moves;
    struct ctl_balance_move moves[CTL_GROUPS_MAX];
    bool balanced; /* with the planned moves done, every eligible node is within 1 of its share */
};
/* s, out and zones are borrowed for the call. zones: NULL (each node record's zone) or one
 * label per index of s->nodes, NULL or "" for a node without a zone. */
void ctl_balance_plan(const struct ctl_state *s, const char *const *zones, uint32_t max_moves,
                      struct ctl_balance_plan *out);
/* Leaders: preferred leaders spread evenly (unweighted) over eligible nodes, through the
 * existing preferred-leader convergence. Fills out[0..n) (n returned, at most max_changes) with
 * set_preferred_leader changes, each from the node preferred in the most groups to a desired peer
 * of the group preferred in fewer by more than one, one per group, none for a group with an
 * active task or without a quorum of live peers. When none is left, preferred-leader counts of
 * the eligible nodes a group can choose differ by at most one. s and out borrowed. */
struct ctl_balance_leader {
    uint32_t group;
    uint64_t from, to;
};
uint32_t ctl_balance_leaders(const struct ctl_state *s, uint32_t max_changes,
                             struct ctl_balance_leader *out);

/* task_abort: the operator stops a running task at a safe point (see "task_abort" above). */
int ctl_cmd_task_abort(uint64_t task, uint64_t now_ms, uint64_t expected_revision, char **out);

/* ---- facts the controller leader observed (task_advance) ---------------------------------------
 * A task_advance is checked on the controller leader, before it is proposed, against what that
 * leader observed itself within max_age_ms; the proof the command carries is never trusted. The
 * runtime answers `observe` from its own raft cores and the GroupStatus answers it collected;
 * ctl_vet rebuilds the command with the observed proof (and, for node_drain, the observed
 * replicas_on_node and leading), so the replicated entry records what the leader saw and
 * ctl_apply's phase checks run on it. */

/* One replica's own progress, paired with the leader commit index it has to reach. */
struct ctl_obs_member {
    uint64_t node;
    bool known;         /* false: no pair of observations yet */
    bool from_progress; /* match is the observer's own raft progress (it leads the group) */
    uint64_t match;     /* the group leader's match index of it (the observer leads the group), else
                         * the applied index it reported itself */
    uint64_t commit;    /* the leader's commit index observed no later than match was */
    uint64_t age_ms;    /* age of the older of the two observations */
};

/* A raft group as the controller leader observed it (group 0: the controller group, which the
 * controller leader leads itself). */
struct ctl_obs_group {
    bool known;      /* a configuration was observed */
    uint64_t age_ms; /* age of the configuration and leader facts */
    uint32_t n_voters, n_learners;
    uint64_t voters[CTL_REPLICAS_MAX], learners[CTL_REPLICAS_MAX]; /* any order */
    uint64_t leader;                                               /* 0 = none observed */
    uint64_t commit;         /* the leader's commit index, 0 = unknown */
    uint64_t leader_applied; /* the leader's applied index, 0 = unknown */
    /* the leader's applied hash-slot state (slot groups): owned and fenced bitmaps (as in
     * struct ctl_task) and the task of its last migration fence or copy */
    bool slots_known;
    uint8_t owned[CTL_HASH_SLOT_BYTES], fenced[CTL_HASH_SLOT_BYTES];
    uint64_t migration_task;
    uint32_t n_members;
    struct ctl_obs_member members[CTL_REPLICAS_MAX * 2];
};

/* Fills *out (zeroed by the caller) with what the observer knows of group. */
typedef void (*ctl_observe_cb)(void *arg, uint32_t group, struct ctl_obs_group *out);

/* Checks cmd[0..len) (borrowed) against state and the observer's facts no older than max_age_ms.
 * Returns CTL_OK with *out NULL when the command goes to raft as it is (not a task_advance, or a
 * fence that does not match the task: ctl_apply answers it), CTL_OK with *out a rebuilt
 * task_advance (caller frees with ctl_free()) whose proof is the observed one, CTL_EFACT with a
 * sentence naming the fact in why (e.g. "group 3: node 4 applied 12 < leader commit 57 as
 * observed by the controller leader (node 1) 400 ms ago"), or CTL_ENOMEM. observer is the
 * controller leader's node id (for the sentences). Reads no clock. */
int ctl_vet(const struct ctl_state *state, const void *cmd, size_t len, ctl_observe_cb observe,
            void *arg, uint64_t observer, uint64_t max_age_ms, char **out, char *why,
            size_t whylen);

/* ---- placement --------------------------------------------------------------------------------
 */

struct ctl_placement_node {
    uint64_t id;     /* >= 1, unique */
    uint32_t weight; /* CTL_WEIGHT_MIN..CTL_WEIGHT_MAX */
};

/* Pure, deterministic placement of slot groups 1..slot_groups over nodes[0..n_nodes) (any order;
 * borrowed for the call). For each group in order it picks min(replicas, n_nodes) distinct nodes
 * with the lowest (assigned_replicas + 1) / weight (ties: lower id); the preferred leader is the
 * picked node with the fewest preferred leaderships so far (ties: lowest (leaders + 1) / weight,
 * then lower id); config_epoch = 1. The hash-slot table (version 1) splits the 256 hash slots into
 * slot_groups contiguous ranges, the first 256 % slot_groups one slot bigger, range i -> group
 * i + 1. Writes groups[0..slot_groups) and *table (both borrowed for the call). Returns
 * CTL_EINVALID for counts, weights or ids out of range or duplicate ids. */
int ctl_placement_make(const struct ctl_placement_node *nodes, size_t n_nodes, uint32_t slot_groups,
                       uint32_t replicas, struct ctl_group *groups,
                       struct ctl_hash_slot_table *table);

/* ---- cluster-state.json ---------------------------------------------------------------------- */

/* Encodes state (borrowed for the call) and replaces path (borrowed) atomically: writes
 * "<path>.tmp", fsyncs it, renames it over path, fsyncs the directory. Returns CTL_ESTATE,
 * CTL_ENOMEM, CTL_EINVALID (path too long), CTL_EIO, each with a sentence in err (borrowed). */
int ctl_file_save(const char *path, const struct ctl_state *state, char *err, size_t errlen);

/* Reads path (borrowed) and strictly decodes it into *state (borrowed; written only on success).
 * Returns CTL_ENOT_FOUND when the file does not exist (start from ctl_state_init), CTL_ETOO_BIG
 * above CTL_FILE_BYTES_MAX, CTL_EIO, or any ctl_state_decode error, with a sentence in err. */
int ctl_file_load(const char *path, struct ctl_state *state, char *err, size_t errlen);

#endif
