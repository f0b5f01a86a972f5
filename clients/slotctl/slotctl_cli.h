/* slotctl_cli.h - slotctl's command line: parsed arguments, usage text and exit codes. */
#ifndef SLOTD_SLOTCTL_CLI_H
#define SLOTD_SLOTCTL_CLI_H

#include "slotd/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes scripts can rely on (also in --help and README.md). */
#define SLOTCTL_EXITS(X)                                                                           \
    X(SLOTCTL_EXIT_OK, 0, "success")                                                               \
    X(SLOTCTL_EXIT_NOT_FOUND, 1, "get: the key does not exist")                                    \
    X(SLOTCTL_EXIT_USAGE, 2, "usage error (bad command line)")                                     \
    X(SLOTCTL_EXIT_PRECONDITION, 3, "failed precondition (CAS version mismatch, ...)")             \
    X(SLOTCTL_EXIT_UNAVAILABLE, 4, "unavailable, deadline exceeded, overloaded, not healthy")      \
    X(SLOTCTL_EXIT_INVALID, 5, "invalid argument (the message names the field)")                   \
    X(SLOTCTL_EXIT_OTHER, 6, "any other error")                                                    \
    X(SLOTCTL_EXIT_WAIT_TIMEOUT, 7, "transfer-leader --wait: the node did not take over in time")

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
};

#define SLOTCTL_ENDPOINTS_DEFAULT "127.0.0.1:7700"
#define SLOTCTL_POSITIONALS_MAX 3
/* transfer-leader --wait bound (seconds) and join --weight bounds. */
#define SLOTCTL_WAIT_S_MAX 3600
#define SLOTCTL_WEIGHT_MAX 1000

struct slotctl_args {
    const char *endpoints; /* points into argv or the environment */
    bool json;
    bool help;
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
    /* admin commands (0 = not given): transfer-leader --group/--to, join/activate --node-id,
     * join --address/--weight, --expected-revision for all three, transfer-leader --wait */
    uint32_t group_id;
    uint64_t to_node;
    uint64_t node_id;
    const char *address; /* points into argv */
    uint32_t weight;
    uint64_t expected_revision;
    int wait_s;
    int bench_argc; /* bench: the arguments after "bench" */
    char **bench_argv;
};

/*
 * argv, a, err: borrowed for the call (a's strings point into argv). Parses
 * "slotctl [options] COMMAND ARGS..."; options may come anywhere before "--", except after
 * "bench" whose arguments pass through untouched. SLOTD_ENDPOINTS sets the default endpoints.
 * Returns SLOTCTL_EXIT_OK or SLOTCTL_EXIT_USAGE with a sentence in err.
 */
int slotctl_args_parse(int argc, char **argv, struct slotctl_args *a, char *err, size_t errlen);

/* out: borrowed for the call. Writes the --help text. */
void slotctl_usage(FILE *out);

/* The exit code for a libslotd result (enum slotd_client_err). */
int slotctl_exit_of(int client_err);

/* Static name of a consistency ("linearizable"). */
const char *slotctl_consistency_name(int consistency);

#endif /* SLOTD_SLOTCTL_CLI_H */
