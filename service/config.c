/* config.c - slotd's options: one table gives each option's flag, environment variable, config-file
 * name, default and range. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "service/config.h"

#define CONFIG_LINE_MAX 8192
#define CONFIG_LINES_MAX 1000

enum opt_kind { OPT_STR, OPT_U64 };

struct opt {
    const char *name; /* flag "--name", env SLOTD_NAME, config "name" */
    enum opt_kind kind;
    size_t off;
    size_t size; /* OPT_STR buffer size */
    uint64_t lo, hi;
    const char *def;
    const char *help;
};

#define STR(field, def, help)                                                                      \
    {                                                                                              \
#field, OPT_STR, offsetof(struct slotd_config, field),                                     \
            sizeof(((struct slotd_config *)0)->field), 0, 0, def, help                             \
    }
#define U64(field, lo, hi, def, help)                                                              \
    {                                                                                              \
#field, OPT_U64, offsetof(struct slotd_config, field), 0, lo, hi, def, help                \
    }

static const struct opt opts[] = {
    STR(listen, "127.0.0.1:7700",
        "client port: slotd.v1.Metadata, slotd.v1.Admin, health and reflection"),
    STR(peer_listen, "",
        "peer port: slotd.internal.v1.Peer only, what --peers and --join name (empty: the "
        "--listen host with its port + 1, e.g. 127.0.0.1:7701)"),
    STR(advertise, "",
        "HOST:PORT clients are given for this node in routes and leader hints (empty: --listen; "
        "set it when --listen is 0.0.0.0 or behind NAT)"),
    STR(peer_advertise, "",
        "HOST:PORT other nodes reach this node's peer port at (empty: --peer-listen)"),
    STR(data_dir, "./slotd-data", "data directory (raftlog/ and fsm/ LevelDB databases)"),
    U64(node_id, 1, UINT64_MAX >> 1, "1", "this node's id"),
    U64(slot_groups, 1, 64, "8", "slot groups the 256 hash slots are split over (at bootstrap)"),
    STR(peers, "",
        "the initial controller voters incl. this node, ID=HOST:PEER_PORT,... (their "
        "--peer-listen; empty: one node)"),
    STR(join, "", "host:peer_port of any member: register as a data node instead of bootstrapping"),
    STR(cluster_id, "slotd", "the cluster's name (at bootstrap)"),
    U64(bootstrap_expect, 0, 64, "0",
        "active data nodes before slot groups are placed (0: the --peers count)"),
    U64(weight, 1, 1000, "100", "this node's capacity weight for placement"),
    STR(zone, "",
        "this node's failure domain (rack, zone): 1..32 of [a-z0-9._-]; the balancer and repair "
        "put no two replicas of a group in one zone while another zone has room; \"\" = none"),
    U64(task_phase_timeout_ms, 1000, 3600000, "60000",
        "a controller task phase this node drives fails after this long without progress"),
    U64(down_replace_after_ms, 0, 86400000, "600000",
        "as controller leader, replace the replicas of a node down and silent this long with "
        "replica moves (0: never)"),
    U64(repair_max_moves, 1, 64, "2",
        "as controller leader, at most this many replica moves active at once for repairs"),
    U64(balance, 0, 1, "1",
        "1: as controller leader, move replicas so that each active node holds its weighted "
        "share (paused cluster-wide by Admin.SetBalance / slotctl balance off)"),
    U64(balance_max_moves, 1, 64, "2",
        "as controller leader, at most this many replica moves active at once for balance"),
    U64(enable_hash_slot_migration, 0, 1, "0",
        "1: the cluster this node bootstraps starts with hash-slot migration on (read only at "
        "bootstrap, the same on every initial node; later: Admin.SetFeature / slotctl feature)"),
    U64(auth, 0, 1, "0",
        "1: clients must authenticate (users and roles, docs/security.md; required in "
        "production; several nodes also need cluster_secret_file or tls_client_auth)"),
    STR(root_password_file, "",
        "file holding user root's password, read when this node enables auth (empty: a random "
        "one is printed once to the log)"),
    U64(auth_token_ttl_s, 1, 604800, "3600", "lifetime of a token from Admin.Authenticate"),
    U64(replicas, 0, 7, "0", "voters per slot group (0: min(3, data nodes))"),
    U64(max_request_bytes, 1024, 1ull << 30, "4194304", "largest accepted request"),
    U64(max_inflight_calls, 1, 1u << 20, "4096", "calls in progress before RESOURCE_EXHAUSTED"),
    U64(max_streams_per_conn, 1, 1u << 20, "1024",
        "calls in progress on one connection before RESOURCE_EXHAUSTED"),
    U64(max_connections, 1, 1u << 20, "1024",
        "connections served at once; a call on one more gets RESOURCE_EXHAUSTED"),
    U64(conn_idle_ms, 1000, 86400000, "60000", "a connection without calls is closed after this"),
    U64(group_proposals_max, 1, 1u << 20, "1024",
        "proposals of one slot group waiting to commit on its leader before more get "
        "RESOURCE_EXHAUSTED (QUEUE_FULL): a hot group is refused while the others keep their rate"),
    U64(propose_stream_inflight, 1024, 65536, "4096",
        "items of one Metadata/ProposeStream begun and not yet answered; at the bound the "
        "stream's next message is not read (at least 1024, the items of one message)"),
    U64(compact_entries, 10, 1ull << 32, "10000",
        "compact a group's log after this many applied entries"),
    U64(compact_tail, 1, 1ull << 32, "1000", "entries kept behind the compaction point"),
    U64(snapshot_chunk_bytes, 256, 16u << 20, "1048576",
        "row bytes per snapshot chunk a leader reads from its fsm snapshot and sends (one chunk "
        "per transfer in memory)"),
    U64(snapshot_sends_max, 1, 64, "8",
        "snapshot transfers a node sends at once; one more is refused and retried later"),
    U64(snapshot_recv_idle_ms, 1000, 3600000, "90000",
        "a snapshot being received that has had no chunk for this long is discarded and its "
        "memory freed (a sender gives up on a chunk after 30 s: below that a slow but live "
        "transfer may be dropped)"),
    U64(snapshot_recv_max_bytes, 1u << 20, 1ull << 50, "68719476736",
        "the largest slot-group snapshot this node receives (spooled to <data-dir>/snap-recv, "
        "so that much free disk is needed); a larger one is refused at its first chunk"),
    U64(snapshot_install_batch_bytes, 4096, 1u << 30, "4194304",
        "row bytes per LevelDB batch when a received snapshot is installed"),
    U64(watch_history_bytes, 0, 1ull << 32, "4194304",
        "bytes of recent key changes each hosted slot group keeps for Watch (older ones: "
        "COMPACTED; 0: Watch disabled)"),
    STR(log_level, "info", "lines below this level are not logged: debug, info, warn or error"),
    STR(log_format, "text",
        "log line format: text (ts=... level=... component=... logfmt) or json (one object a "
        "line)"),
    STR(metrics_listen, "127.0.0.1:9700",
        "Prometheus /metrics HTTP address (empty: disabled; a busy port is logged, not fatal)"),
    STR(tls_cert, "",
        "server certificate chain PEM file (set with tls_key: TLS; empty: plaintext)"),
    STR(tls_key, "", "private key PEM file of tls_cert"),
    STR(tls_ca, "", "CA bundle PEM file verifying peer nodes and, with tls_client_auth, clients"),
    U64(tls_client_auth, 0, 1, "0",
        "1: require and verify client certificates (mTLS; needs tls_ca); nodes present tls_cert"),
    STR(tls_server_name, "", "name expected in peer nodes' certificates (empty: their host)"),
    U64(echo_only, 0, 1, "0",
        "1: serve only the echo ceiling (slotd.bench.v1.Echo/Echo, health, reflection) on "
        "--listen: no data directory, raft or runtime (slotbench --target echo)"),
    STR(cluster_secret_file, "",
        "file holding the cluster secret (16..4096 bytes, the same on every node): every peer "
        "call carries a proof of it (empty: peers are not authenticated by a secret)"),
};
#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

/* "data-dir" and "data_dir" name the same option. */
static const struct opt *find(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTS; i++) {
        const char *o = opts[i].name;
        if (strlen(o) != len)
            continue;
        size_t k = 0;
        while (k < len && (o[k] == name[k] || (o[k] == '_' && name[k] == '-')))
            k++;
        if (k == len)
            return &opts[i];
    }
    return NULL;
}

static void flag_name(const struct opt *o, char *out, size_t n)
{
    snprintf(out, n, "--%s", o->name);
    for (char *p = out; *p; p++)
        if (*p == '_')
            *p = '-';
}

static void env_name(const struct opt *o, char *out, size_t n)
{
    snprintf(out, n, "SLOTD_%s", o->name);
    for (char *p = out; *p; p++)
        *p = (char)toupper((unsigned char)*p);
}

static int set(struct slotd_config *c, const struct opt *o, const char *value, const char *source,
               char *err, size_t errlen)
{
    char *field = (char *)c + o->off;
    if (o->kind == OPT_STR) {
        if (strlen(value) >= o->size) {
            snprintf(err, errlen, "%s: value is longer than %zu bytes", source, o->size - 1);
            return -1;
        }
        memcpy(field, value, strlen(value) + 1);
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno != 0 || *value == '\0' || *value == '-' || *end != '\0' || v < o->lo || v > o->hi) {
        snprintf(err, errlen, "%s: '%s' is not a number in %llu..%llu", source, value,
                 (unsigned long long)o->lo, (unsigned long long)o->hi);
        return -1;
    }
    *(uint64_t *)(void *)field = v;
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static int load_file(struct slotd_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "config file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[CONFIG_LINE_MAX], source[1200];
    int rc = 0;
    for (unsigned n = 1; rc == 0 && fgets(line, sizeof(line), f) != NULL; n++) {
        if (n > CONFIG_LINES_MAX) {
            snprintf(err, errlen, "config file %s: more than %d lines", path, CONFIG_LINES_MAX);
            rc = -1;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *eq = strchr(s, '=');
        snprintf(source, sizeof(source), "config file %s line %u", path, n);
        if (eq == NULL) {
            snprintf(err, errlen, "%s: expected 'name = value'", source);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *name = trim(s), *value = trim(eq + 1);
        const struct opt *o = find(name, strlen(name));
        if (o == NULL) {
            snprintf(err, errlen, "%s: unknown option '%s'", source, name);
            rc = -1;
            break;
        }
        snprintf(source + strlen(source), sizeof(source) - strlen(source), " (%s)", o->name);
        rc = set(c, o, value, source, err, errlen);
    }
    fclose(f);
    return rc;
}

int slotd_config_read_pem(const char *option, const char *path, char **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open %s: %s", option, path, strerror(errno));
        return -1;
    }
    char *buf = malloc(SLOTD_CONFIG_PEM_MAX + 1);
    if (buf == NULL) {
        snprintf(err, errlen, "%s: %s: out of memory", option, path);
        goto err_after_open;
    }
    size_t n = fread(buf, 1, SLOTD_CONFIG_PEM_MAX + 1, f);
    if (ferror(f)) {
        snprintf(err, errlen, "%s: cannot read %s: %s", option, path, strerror(errno));
        goto err_after_alloc;
    }
    if (n > SLOTD_CONFIG_PEM_MAX) {
        snprintf(err, errlen, "%s: %s is larger than %u bytes", option, path, SLOTD_CONFIG_PEM_MAX);
        goto err_after_alloc;
    }
    buf[n] = '\0';
    if (n == 0 || strstr(buf, "-----BEGIN ") == NULL) {
        snprintf(err, errlen, "%s: %s holds no PEM block", option, path);
        goto err_after_alloc;
    }
    fclose(f);
    *out = buf;
    return 0;

err_after_alloc:
    free(buf);
err_after_open:
    fclose(f);
    return -1;
}

#ifndef SLOTD_VERSION
#define SLOTD_VERSION "unknown"
#endif
const char slotd_version[] = SLOTD_VERSION;

const char *const slotd_config_foreign_env[] = {
    "SLOTD_CONFIG",
    "SLOTD_FAULT_",
    "SLOTD_CRASH_AT",
    "SLOTD_CLUSTER_SIZE",
    "SLOTD_HEADLESS_SERVICE",
    "SLOTD_CLUSTER_DOMAIN",
    "SLOTD_PEER_PORT",
    "SLOTD_CLIENT_PORT",
    "SLOTD_BIN",
    "SLOTD_E2E_",
    "SLOTD_TSAN_",
    "SLOTD_HEALTH_",
    NULL,
};

/* Levenshtein distance of a[0..n) and b[0..m) (short names only: both under 64 bytes). */
static size_t edit_distance(const char *a, size_t n, const char *b, size_t m)
{
    size_t row[64];
    if (n >= 64 || m >= 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= m; j++)
        row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

/* One warning for each SLOTD_* variable of env that names no option. */
static void warn_unknown_env(char **env, FILE *warn)
{
    for (char **e = env; warn != NULL && e != NULL && *e != NULL; e++) {
        if (strncmp(*e, "SLOTD_", 6) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        bool known = false;
        for (size_t i = 0; i < N_OPTS && !known; i++) {
            char name[64];
            env_name(&opts[i], name, sizeof(name));
            known = strlen(name) == len && strncmp(name, *e, len) == 0;
        }
        for (size_t i = 0; slotd_config_foreign_env[i] != NULL && !known; i++) {
            const char *f = slotd_config_foreign_env[i];
            size_t fl = strlen(f);
            known = f[fl - 1] == '_' ? len >= fl && strncmp(*e, f, fl) == 0
                                     : fl == len && strncmp(*e, f, len) == 0;
        }
        if (known)
            continue;
        char best[64] = "";
        size_t best_d = SIZE_MAX;
        for (size_t i = 0; i < N_OPTS; i++) {
            char name[64];
            env_name(&opts[i], name, sizeof(name));
            size_t d = edit_distance(*e, len, name, strlen(name));
            if (d < best_d) {
                best_d = d;
                snprintf(best, sizeof(best), "%s", name);
            }
        }
        if (best_d <= 3)
            fprintf(warn,
                    "msg=\"environment variable %.*s is no option; "
                    "ignored\" nearest=%s\n",
                    (int)(len < 64 ? len : 64), *e, best);
        else
            fprintf(warn,
                    "msg=\"environment variable %.*s is no option; "
                    "ignored (slotd --help lists them)\"\n",
                    (int)(len < 64 ? len : 64), *e);
    }
}

static const char *getenv_in(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

void slotd_config_usage(FILE *f)
{
    fprintf(f, "usage: slotd [--name value]...\n\n"
               "Every option is also read from the environment (SLOTD_NAME) and from an optional\n"
               "config file (--config FILE or SLOTD_CONFIG; lines 'name = value', '#' comments);\n"
               "flags override the environment, which overrides the file.\n\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        char flag[64], env[64];
        flag_name(&opts[i], flag, sizeof(flag));
        env_name(&opts[i], env, sizeof(env));
        fprintf(f, "  %-22s %-26s %s (default %s)\n", flag, env, opts[i].help,
                *opts[i].def ? opts[i].def : "empty");
    }
    fprintf(f, "  %-22s %-26s %s\n", "--config", "SLOTD_CONFIG", "config file (default none)");
    fprintf(f, "  %-22s %-26s %s\n", "--help", "", "this text");
    fprintf(f, "  %-22s %-26s %s\n", "--version", "", "the version slotd was built from");
    fprintf(
        f,
        "\n       slotd restore --from FILE --data-dir DIR --node-id N [--peers ID=HOST:PORT,...]\n"
        "             [--keep-cluster-id]\n"
        "  builds node N's data directory of a new cluster from a backup file (slotctl\n"
        "  backup save); then start slotd on DIR with the same --node-id and --peers\n");
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncmp(name, want, len) == 0;
}

/* The value of "--name value" or "--name=value" at argv[*i]; advances *i. */
static int flag_value(int argc, char **argv, int *i, const char **name, size_t *name_len,
                      const char **value, char *err, size_t errlen)
{
    const char *a = argv[*i];
    if (strncmp(a, "--", 2) != 0) {
        snprintf(err, errlen, "unexpected argument '%s'", a);
        return -1;
    }
    *name = a + 2;
    const char *eq = strchr(*name, '=');
    *name_len = eq ? (size_t)(eq - *name) : strlen(*name);
    if (eq != NULL) {
        *value = eq + 1;
        return 0;
    }
    if ((*name_len == 4 && strncmp(*name, "help", 4) == 0) ||
        (*name_len == 7 && strncmp(*name, "version", 7) == 0)) {
        *value = NULL;
        return 0;
    }
    if (find(*name, *name_len) == NULL && !(*name_len == 6 && strncmp(*name, "config", 6) == 0)) {
        snprintf(err, errlen, "unknown option '--%.*s' (see slotd --help)", (int)*name_len, *name);
        return -1;
    }
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "%s: missing value", a);
        return -1;
    }
    *value = argv[++*i];
    return 0;
}

int slotd_config_load(int argc, char **argv, char **env, struct slotd_config *c, FILE *out,
                      FILE *warn, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < N_OPTS; i++)
        if (set(c, &opts[i], opts[i].def, "default", err, errlen) != 0)
            return -1;
    /* The config file first: its name may come from a flag or the environment. */
    const char *file = getenv_in(env, "SLOTD_CONFIG");
    for (int i = 1; i < argc; i++) {
        const char *name, *value;
        size_t len;
        if (flag_value(argc, argv, &i, &name, &len, &value, err, errlen) != 0)
            return -1;
        if (value == NULL && name_is(name, len, "version")) {
            fprintf(out, "slotd %s\n", slotd_version);
            return 1;
        }
        if (value == NULL) {
            slotd_config_usage(out);
            return 1;
        }
        if (len == 6 && strncmp(name, "config", 6) == 0)
            file = value;
    }
    if (file != NULL && *file != '\0' && load_file(c, file, err, errlen) != 0)
        return -1;
    warn_unknown_env(env, warn);
    for (size_t i = 0; i < N_OPTS; i++) {
        char name[64], source[96];
        env_name(&opts[i], name, sizeof(name));
        const char *v = getenv_in(env, name);
        snprintf(source, sizeof(source), "environment %s", name);
        if (v != NULL && set(c, &opts[i], v, source, err, errlen) != 0)
            return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *name, *value;
        size_t len;
        if (flag_value(argc, argv, &i, &name, &len, &value, err, errlen) != 0)
            return -1;
        if (len == 6 && strncmp(name, "config", 6) == 0)
            continue;
        const struct opt *o = find(name, len);
        if (o == NULL) {
            snprintf(err, errlen, "unknown option '--%.*s' (see slotd --help)", (int)len, name);
            return -1;
        }
        char source[64];
        flag_name(o, source, sizeof(source));
        if (set(c, o, value, source, err, errlen) != 0)
            return -1;
    }
    return 0;
}
