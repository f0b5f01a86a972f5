/* config.h - slotd's options: flags, SLOTD_* environment variables and an optional config file,
 * with the same names. */
#ifndef SLOTD_CONFIG_H
#define SLOTD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct slotd_config {
    char listen[256];         /* the client port: Metadata, Admin, health, reflection */
    char peer_listen[256];    /* the peer port: slotd.internal.v1.Peer; "" = listen's port + 1 */
    char advertise[256];      /* client address clients are given; "" = listen */
    char peer_advertise[256]; /* peer address other nodes are given; "" = peer_listen */
    char data_dir[1024];
    char peers[4096];
    char metrics_listen[256];       /* "" disables /metrics */
    char log_level[8];              /* debug, info, warn or error */
    char log_format[8];             /* text (logfmt) or json */
    char tls_cert[1024];            /* server certificate chain PEM file; "" = plaintext */
    char tls_key[1024];             /* its private key PEM file */
    char tls_ca[1024];              /* CA bundle PEM file verifying peers (and clients with auth) */
    char tls_server_name[256];      /* name checked in peers' certificates; "" = the peer's host */
    char join[256];                 /* host:port of a member to join through; "" = bootstrap */
    char cluster_secret_file[1024]; /* the cluster secret proven on peer calls; "" = none */
    char cluster_id[65];            /* the cluster's name, set at bootstrap */
    uint64_t node_id;
    uint64_t slot_groups;
    uint64_t max_request_bytes;
    uint64_t max_inflight_calls;
    uint64_t max_streams_per_conn; /* calls in progress on one connection */
    uint64_t max_connections;      /* connections served at once */
    uint64_t conn_idle_ms;         /* a connection without calls is closed after this */
    uint64_t replicas;             /* 0 = min(3, nodes) */
    uint64_t compact_entries;
    uint64_t compact_tail;
    uint64_t snapshot_chunk_bytes;
    uint64_t snapshot_sends_max;
    uint64_t snapshot_recv_idle_ms;
    uint64_t snapshot_recv_max_bytes;
    uint64_t snapshot_install_batch_bytes;
    uint64_t group_proposals_max;
    uint64_t propose_stream_inflight; /* ProposeStream items in flight per stream */
    uint64_t watch_history_bytes;   /* per hosted group; 0 = Watch disabled */
    uint64_t tls_client_auth;       /* 1: require and verify client certificates (mTLS) */
    uint64_t bootstrap_expect;      /* active data nodes before placement; 0 = the --peers count */
    uint64_t weight;                /* capacity weight for placement */
    char zone[33];                  /* failure domain label; "" = none (ctl_zone_valid) */
    uint64_t task_phase_timeout_ms; /* a task phase without progress fails after this long */
    uint64_t down_replace_after_ms; /* repair: replace a down node's replicas (0: never) */
    uint64_t repair_max_moves;      /* repair: replica moves active at once, at most */
    uint64_t balance;               /* 1: the controller leader balances replicas */
    uint64_t balance_max_moves;     /* balance: replica moves active at once, at most */
    uint64_t enable_hash_slot_migration; /* 1: seeds features.hash_slot_migration at bootstrap */
    uint64_t auth;                       /* 1: clients authenticate (service/node/authz.c) */
    char root_password_file[1024];       /* user root's password at auth_init; "" = random */
    uint64_t auth_token_ttl_s;           /* token lifetime */
    uint64_t echo_only; /* 1: only the echo ceiling on listen (main.c run_echo_only) */
};

/*
 * Fills *c from, in increasing precedence: the defaults, the config file
 * (--config FILE or SLOTD_CONFIG; lines "name = value", '#' comments), the
 * environment (SLOTD_<NAME>, e.g. SLOTD_DATA_DIR) and the flags (--name
 * value or --name=value). Returns 0, 1 when --help or --version was printed to
 * out, or -1 with one sentence in err naming the option, its source and the
 * allowed range (an unknown flag: its name and "see slotd --help"). An
 * environment variable SLOTD_<X> that names no option (and is none of
 * slotd_config_foreign_env) gets one warning line on warn (NULL: none), with the
 * nearest option's variable when one is close. argv and env are borrowed for the
 * call; env may be NULL (no environment).
 */
int slotd_config_load(int argc, char **argv, char **env, struct slotd_config *c, FILE *out,
                      FILE *warn, char *err, size_t errlen);

/* SLOTD_* variables that are not options but are read by someone else on purpose (the config
 * file name, the fault build, deploy/entrypoint.sh, the test harnesses): no warning. NULL-ended. */
extern const char *const slotd_config_foreign_env[];

/* The version slotd was built from (`git describe` at configure time, "unknown" without git). */
extern const char slotd_version[];

/*
 * Reads the whole PEM file path (borrowed for the call; option names it in errors, e.g.
 * "tls_cert") into *out, NUL-terminated (caller frees with free()). Returns 0, or -1 with a
 * sentence naming the option and the file in err. Files larger than SLOTD_CONFIG_PEM_MAX bytes
 * are refused.
 */
#define SLOTD_CONFIG_PEM_MAX (1u << 20)
int slotd_config_read_pem(const char *option, const char *path, char **out, char *err,
                          size_t errlen);

/* Prints every option with its environment variable and default. */
void slotd_config_usage(FILE *f);

#endif /* SLOTD_CONFIG_H */
