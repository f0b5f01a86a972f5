/* slotctl_cli.h - slotctl's command line: parsed arguments, usage text and exit codes. */
#ifndef SLOTD_SLOTCTL_CLI_H
#define SLOTD_SLOTCTL_CLI_H

#include "slotctl_meta_cli.h"
#include "slotctl_num.h"
#include "slotd/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes scripts can rely on (also in --help and README.md). */
#define SLOTCTL_EXITS(X)                                                                           \
    X(SLOTCTL_EXIT_OK, 0, "success")                                                               \
    X(SLOTCTL_EXIT_NOT_FOUND, 1,                                                                   \
      "get: the key does not exist; task status: no such task; lease: no such lease; typed "   \
      "gets: no such row; member check: not a member")              \
    X(SLOTCTL_EXIT_USAGE, 2, "usage error (bad command line)")                                     \
    X(SLOTCTL_EXIT_PRECONDITION, 3, "failed precondition (CAS version mismatch, ...)")             \
    X(SLOTCTL_EXIT_UNAVAILABLE, 4,                                                                 \
      "unavailable, deadline exceeded, overloaded; health: not healthy; status: no answer")        \
    X(SLOTCTL_EXIT_INVALID, 5, "invalid argument (the message names the field)")                   \
    X(SLOTCTL_EXIT_OTHER, 6, "any other error")                                                    \
    X(SLOTCTL_EXIT_WAIT_TIMEOUT, 7,                                                                \
      "--wait/--watch timed out (transfer-leader: the node did not take over; task not finished)") \
    X(SLOTCTL_EXIT_TASK_FAILED, 8, "--wait/--watch: the task ended with status failed")

enum slotctl_exit {
#define SLOTCTL__EXIT_ENUM(name, value, text) name = value,
    SLOTCTL_EXITS(SLOTCTL__EXIT_ENUM)
#undef SLOTCTL__EXIT_ENUM
};

enum slotctl_cmd {
    SLOTCTL_CMD_NONE,
    SLOTCTL_CMD_PUT,
    SLOTCTL_CMD_GET,
    SLOTCTL_CMD_DELETE,
    SLOTCTL_CMD_CAS,
    SLOTCTL_CMD_ROUTE,
    SLOTCTL_CMD_CLUSTER,
    SLOTCTL_CMD_HEALTH,
    SLOTCTL_CMD_BENCH,
    SLOTCTL_CMD_TRANSFER_LEADER,
    SLOTCTL_CMD_JOIN,
    SLOTCTL_CMD_ACTIVATE,
    SLOTCTL_CMD_MOVE_REPLICA,
    SLOTCTL_CMD_DRAIN,
    SLOTCTL_CMD_PROMOTE,
    SLOTCTL_CMD_RETRY,
    SLOTCTL_CMD_MIGRATE_SLOTS,
    SLOTCTL_CMD_TASK_STATUS,
    SLOTCTL_CMD_STATUS,
    SLOTCTL_CMD_USER, /* user add|delete|passwd|grant|revoke|list */
    SLOTCTL_CMD_ROLE, /* role add|delete|grant|revoke|list */
    SLOTCTL_CMD_FEATURE,
    SLOTCTL_CMD_WATCH,       /* watch KEY | watch --prefix P */
    SLOTCTL_CMD_TXN,         /* txn: compares and ops from stdin */
    SLOTCTL_CMD_LEASE,       /* "lease SUB ...": the parser resolves it to one of the three below */
    SLOTCTL_CMD_LEASE_GRANT, /* lease grant KEY TTL */
    SLOTCTL_CMD_LEASE_KEEPALIVE, /* lease keepalive ID [--count N] [--interval S] */
    SLOTCTL_CMD_LEASE_REVOKE,    /* lease revoke ID */
    SLOTCTL_CMD_META,            /* a typed metadata command (a->meta; slotctl_meta_cli.h) */
    SLOTCTL_CMD_MCP,             /* mcp [--metrics URL,URL]: the operations MCP server */
    SLOTCTL_CMD_BACKUP,          /* backup save|verify|inspect FILE */
    SLOTCTL_CMD_ABORT,           /* abort --task T: Admin.AbortTask */
    SLOTCTL_CMD_BALANCE,         /* balance status | balance on|off: the balancer */
    SLOTCTL_CMD_REMOVE_NODE,     /* remove-node --node N: Admin.RemoveNode */
    SLOTCTL_CMD_DEMOTE,          /* demote --node N: Admin.DemoteControllerVoter */
};
#define SLOTCTL_CMD_LAST SLOTCTL_CMD_DEMOTE

#define SLOTCTL_ENDPOINTS_DEFAULT "127.0.0.1:7700"
#define SLOTCTL_POSITIONALS_MAX 5
/* --wait and --timeout bound (seconds) and join --weight bounds. */
#define SLOTCTL_WAIT_S_MAX 3600
#define SLOTCTL_WEIGHT_MAX 1000
/* task status --watch: poll interval bounds and default, default timeout (seconds) */
#define SLOTCTL_INTERVAL_MS_MIN 50
#define SLOTCTL_INTERVAL_MS_MAX 60000
#define SLOTCTL_INTERVAL_MS_DEFAULT 500
#define SLOTCTL_WATCH_TIMEOUT_S_DEFAULT 600
/* get --prefix --limit and watch --count bounds; longest --resume token */
#define SLOTCTL_LIMIT_MAX 100000000
#define SLOTCTL_RESUME_MAX 65536
/* lease keepalive --interval bounds (ms; given in seconds, e.g. 0.5) */
#define SLOTCTL_LEASE_INTERVAL_MS_MIN 50
#define SLOTCTL_LEASE_INTERVAL_MS_MAX 3600000

struct slotctl_args {
    const char *endpoints; /* points into argv or the environment */
    bool json;
    bool help;
    bool version; /* --version: print slotctl's version and exit */
    int deadline_ms; /* 0 = the library default */
    int max_retries; /* 0 = the library default */
    /* TLS: PEM file paths and the expected server name (NULL = unset; point into argv) */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    const char *tls_server_name;
    enum slotctl_cmd cmd;
    const char *pos[SLOTCTL_POSITIONALS_MAX]; /* point into argv */
    int pos_count;
    int consistency; /* enum slotd_consistency */
    uint64_t min_applied_index;
    bool cas_delete;
    /* admin commands (0 = not given): --group, --to, --from, --node-id (join, activate) or
     * --node (drain, promote, remove-node, demote), --address, --weight, --expected-revision, --wait, --task,
     * --slots, --to-group; which command takes which is checked by the parser */
    uint32_t group_id;
    uint64_t to_node;
    uint64_t from_node;
    uint64_t node_id;
    const char *node_opt; /* "--node-id" or "--node": the option that set node_id */
    const char *address;  /* points into argv */
    uint32_t weight;
    uint64_t expected_revision;
    int wait_s;
    bool as_task; /* transfer-leader --as-task: the Admin/TransferLeader task */
    uint64_t task_id;
    uint32_t hash_slots[SLOTD_HASH_SLOTS]; /* --slots, ascending */
    unsigned hash_slot_count;
    uint32_t to_group;
    /* task status [TASK_ID] [--active] [--watch [--interval-ms N] [--timeout S]] */
    bool active_only;
    bool watch;
    int interval_ms; /* 0 = SLOTCTL_INTERVAL_MS_DEFAULT */
    int timeout_s;   /* 0 = SLOTCTL_WATCH_TIMEOUT_S_DEFAULT */
    /* --user NAME --password-file F: authenticate first (Admin.Authenticate) and send the token;
     * --new-password-file F: the password of user add / user passwd (point into argv) */
    const char *user;
    const char *password_file;
    const char *new_password_file;
    /* get --prefix P [--limit N] [--keys-only] [--count-only]; watch KEY | --prefix P
     * [--resume TOKEN] [--count N] [--timeout S] [--keys-only] (point into argv) */
    const char *prefix;
    bool has_prefix; /* --prefix given (it may be empty: every key) */
    uint64_t limit;  /* get --prefix: entries in all (0 = every one) */
    bool keys_only;
    bool count_only;
    const char *resume; /* "GROUP:INDEX,..." */
    /* watch --user-rows / --channel-rows / --subscribers: enum slotd_typed_watch_kind */
    int typed_kind;
    const char *typed_id; /* their value */
    uint64_t count;       /* watch: stop after this many events (0 = no limit); lease
                           * keepalive: keep-alives to send (0 = one) */
    /* lease grant KEY TTL, lease keepalive|revoke ID, put KEY VALUE --lease ID (IDs decimal
     * or 0x hex) */
    uint32_t ttl_seconds;
    uint64_t lease_id;
    bool has_lease;        /* put --lease given */
    int lease_interval_ms; /* lease keepalive --interval (0: a third of the TTL) */
    struct slotctl_meta_args meta; /* SLOTCTL_CMD_META: the typed command */
    const char *metrics_urls; /* mcp --metrics: comma-separated http://HOST:PORT/metrics */
    int bench_argc;  /* bench: the arguments after "bench" */
    char **bench_argv;
};

/*
 * argv, a, err: borrowed for the call (a's strings point into argv). Parses
 * "slotctl [options] COMMAND ARGS..."; options may come anywhere before "--", except after
 * "bench" whose arguments pass through untouched. SLOTD_ENDPOINTS sets the default endpoints.
 * Returns SLOTCTL_EXIT_OK or SLOTCTL_EXIT_USAGE with a sentence in err.
 */
int slotctl_args_parse(int argc, char **argv, struct slotctl_args *a, char *err, size_t errlen);

/*
 * s, out, count, err: borrowed for the call. Parses a hash slot list such as "3,7,10-12"
 * (values and inclusive ranges 0..255, comma-separated) into out (SLOTD_HASH_SLOTS entries,
 * ascending) and *count. Returns SLOTCTL_EXIT_OK, or SLOTCTL_EXIT_USAGE with a sentence naming
 * the bad value in err (out of range, duplicate, reversed range, not a number, empty).
 */
int slotctl_slots_parse(const char *s, uint32_t *out, unsigned *count, char *err, size_t errlen);

/* out: borrowed for the call. Writes the --help text. */
void slotctl_usage(FILE *out);

/* The exit code for a libslotd result (enum slotd_client_err). */
int slotctl_exit_of(int client_err);

/* s, out: borrowed for the call. Parses a lease id: decimal, or hex after 0x/0X. Returns false
 * when s is not one (empty, signs, junk, more than 64 bits). */
bool slotctl_lease_id_parse(const char *s, uint64_t *out);

/* Static name of a consistency ("linearizable"). */
const char *slotctl_consistency_name(int consistency);

#endif /* SLOTD_SLOTCTL_CLI_H */
