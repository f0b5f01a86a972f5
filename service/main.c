/* main.c - the slotd binary: flags, store, route, gRPC server, runtime, and clean SIGTERM shutdown.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "service/log/log.h"
#include "service/auth/auth.h"
#include "service/auth/token.h"
#include "service/config.h"
#include "service/metrics/metrics.h"
#include "service/net/net.h"
#include "service/backup/restore.h"
#include "service/notify.h"
#include "service/node/api.h"
#include "service/node/authz.h"
#include "service/route/route.h"
#include "service/rpc/rpc.h"
#include "service/executor/executor.h"
#include "service/runtime/runtime.h"
#include "service/transport/transport.h"
#include "store/store.h"

/* How long SIGTERM waits for led groups to move to other voters. */
#define SHUTDOWN_TRANSFER_MS 3000

static int parse_id(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *s == '\0' || *end != '\0' || v < 1 || v > (UINT64_MAX >> 1))
        return -1;
    *out = v;
    return 0;
}

/* Parses "1=host:port,2=host:port" into o->nodes. */
static int parse_peers(const char *spec, struct runtime_options *o)
{
    char buf[4096];
    if (strlen(spec) >= sizeof(buf)) {
        fprintf(stderr, "slotd: --peers: longer than %zu bytes\n", sizeof(buf) - 1);
        return -1;
    }
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        unsigned long long id;
        if (eq == NULL || eq[1] == '\0') {
            fprintf(stderr, "slotd: --peers: '%s' is not ID=HOST:PORT\n", tok);
            return -1;
        }
        *eq = '\0';
        if (parse_id(tok, &id) != 0) {
            fprintf(stderr, "slotd: --peers: '%s' is not a node id >= 1\n", tok);
            return -1;
        }
        if (o->n_nodes == RUNTIME_NODES_MAX) {
            fprintf(stderr, "slotd: --peers: more than %d nodes\n", RUNTIME_NODES_MAX);
            return -1;
        }
        if (strlen(eq + 1) >= sizeof(o->nodes[0].address)) {
            fprintf(stderr, "slotd: --peers: address '%s' is too long\n", eq + 1);
            return -1;
        }
        o->nodes[o->n_nodes].id = id;
        snprintf(o->nodes[o->n_nodes].address, sizeof(o->nodes[0].address), "%s", eq + 1);
        o->n_nodes++;
    }
    return 0;
}

static struct runtime *g_runtime; /* for the transport's callback */

static void on_peer_unreachable(void *ctx, uint64_t peer, const char *why)
{
    (void)ctx;
    (void)why;
    if (g_runtime != NULL)
        runtime_peer_unreachable(g_runtime, peer);
}

/* Tells systemd (Type=notify, $NOTIFY_SOCKET) state; a failure is a warning, never fatal. */
static void notify_systemd(const char *state)
{
    if (slotd_notify_send(state) < 0)
        slog("warn", "main", "msg=\"cannot notify systemd\" notify_socket=\"%s\" err=\"%s\"",
             getenv("NOTIFY_SOCKET"), strerror(errno));
}

/* Blocks until SIGINT or SIGTERM (blocked in every thread before any starts). */
static int wait_signal(const sigset_t *set)
{
    int sig = 0;
    sigwait(set, &sig);
    return sig;
}

/* /metrics is optional: a busy or bad address is a warning and slotd serves gRPC anyway. */
static void start_metrics_http(struct metrics_registry *m, const char *listen,
                               struct metrics_http **out)
{
    char err[512];
    int port = 0;
    if (listen[0] == '\0')
        return;
    if (metrics_http_start(m, listen, out, &port, err, sizeof(err)) != METRICS_OK) {
        slog("warn", "main",
             "msg=\"metrics listener not started\" "
             "metrics_listen=%s err=\"%s\"",
             listen, err);
        return;
    }
    slog("info", "main",
         "msg=\"metrics serving\" metrics_listen=%s port=%d "
         "path=/metrics",
         listen, port);
}

/* The PEM text of the TLS options, read once at startup. */
struct tls_pems {
    char *cert, *key, *ca; /* NULL when the option is empty */
};

static void tls_pems_free(struct tls_pems *p)
{
    free(p->cert);
    free(p->key);
    free(p->ca);
    p->cert = p->key = p->ca = NULL;
}

/* Checks the TLS option combination and reads the files. Returns 0 or -1 with err set. */
static int tls_pems_load(const struct slotd_config *f, struct tls_pems *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    if ((f->tls_cert[0] == '\0') != (f->tls_key[0] == '\0')) {
        snprintf(err, errlen, "--tls-cert and --tls-key: set both (TLS) or neither (plaintext)");
        return -1;
    }
    if (f->tls_cert[0] == '\0') {
        if (f->tls_client_auth || f->tls_ca[0] != '\0' || f->tls_server_name[0] != '\0') {
            snprintf(err, errlen,
                     "--tls-ca, --tls-client-auth and --tls-server-name need "
                     "--tls-cert and --tls-key");
            return -1;
        }
        return 0;
    }
    if (f->tls_client_auth && f->tls_ca[0] == '\0') {
        snprintf(err, errlen, "--tls-client-auth 1 needs --tls-ca (the CA of client certificates)");
        return -1;
    }
    if (slotd_config_read_pem("tls_cert", f->tls_cert, &p->cert, err, errlen) != 0 ||
        slotd_config_read_pem("tls_key", f->tls_key, &p->key, err, errlen) != 0 ||
        (f->tls_ca[0] != '\0' &&
         slotd_config_read_pem("tls_ca", f->tls_ca, &p->ca, err, errlen) != 0)) {
        tls_pems_free(p);
        return -1;
    }
    return 0;
}

/* --peer-listen's default: the --listen host with its port + 1 (port 0 stays 0: any free port).
 * Returns 0, or -1 with err set. */
static int default_peer_listen(const char *listen, char *out, size_t len, char *err, size_t errlen)
{
    char host[256], port[16];
    char *end = NULL;
    if (net_addr_split(listen, host, sizeof(host), port, sizeof(port)) != 0) {
        snprintf(err, errlen, "--listen: \"%s\" is not HOST:PORT", listen);
        return -1;
    }
    unsigned long p = strtoul(port, &end, 10);
    if (end == port || *end != '\0' || p >= 65535) {
        snprintf(err, errlen,
                 "--listen: port %s leaves no port + 1 for the peer port; set "
                 "--peer-listen",
                 port);
        return -1;
    }
    int n = snprintf(out, len, strchr(host, ':') ? "[%s]:%lu" : "%s:%lu", host, p ? p + 1 : 0);
    if (n < 0 || (size_t)n >= len) {
        snprintf(err, errlen, "--listen: \"%s\" is too long", listen);
        return -1;
    }
    return 0;
}

/* --auth: the users-and-roles state of this node (service/node/authz.c), NULL when off. A cluster
 * of several nodes needs peer authentication too, or anyone could call as a node. Returns 0 or -1
 * with err set. */
static int auth_setup(const struct slotd_config *f, bool peers_authenticated, bool several,
                      struct node_authz **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!f->auth)
        return 0;
    if (several && !peers_authenticated) {
        snprintf(err, errlen,
                 "--auth 1 on several nodes needs --cluster-secret-file or --tls-client-auth 1 "
                 "(nodes call each other's client port; without peer proofs anyone could call "
                 "as a node)");
        return -1;
    }
    char pw[AUTH_PASSWORD_MAX + 3];
    size_t n = 0;
    if (f->root_password_file[0] != '\0') {
        FILE *fp = fopen(f->root_password_file, "rb");
        if (fp == NULL) {
            snprintf(err, errlen, "--root-password-file %.200s: %s", f->root_password_file,
                     strerror(errno));
            return -1;
        }
        n = fread(pw, 1, sizeof(pw), fp);
        fclose(fp);
        if (n > 0 && pw[n - 1] == '\n')
            n--;
        if (n > 0 && pw[n - 1] == '\r')
            n--;
        if (n < 1 || n > AUTH_PASSWORD_MAX) {
            snprintf(err, errlen, "--root-password-file %.200s: the password must be 1..%d bytes",
                     f->root_password_file, AUTH_PASSWORD_MAX);
            return -1;
        }
    }
    struct node_authz_options ao = {.enabled = true,
                                    .token_ttl_ms = f->auth_token_ttl_s * 1000,
                                    .root_password = n > 0 ? pw : NULL,
                                    .root_password_len = n};
    int rc = node_authz_new(&ao, out, err, errlen);
    memset(pw, 0, sizeof(pw));
    return rc;
}

/* --echo-only 1: the request path's ceiling. The client port's rpc server with the echo method
 * (service/rpc/echo.c) and nothing behind it, until SIGINT/SIGTERM. Returns the exit code. */
static int run_echo_only(const struct slotd_config *f, const sigset_t *set)
{
    char err[512] = "";
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = f->listen;
    o.max_request_bytes = f->max_request_bytes;
    o.max_inflight_calls = f->max_inflight_calls;
    o.max_streams_per_conn = f->max_streams_per_conn;
    o.max_connections = f->max_connections;
    o.conn_idle_ms = f->conn_idle_ms;
    struct rpc_server *server = NULL;
    int port = 0;
    int code = 1;
    if (rpc_server_new(&o, &server) != SLOTD_OK) {
        fprintf(stderr, "slotd: --echo-only: cannot create the gRPC server\n");
        goto err_after_nothing;
    }
    if (rpc_server_add_echo(server) != SLOTD_OK ||
        rpc_server_start(server, &port, err, sizeof(err)) != SLOTD_OK) {
        fprintf(stderr, "slotd: --echo-only: --listen %s: %s\n", f->listen, err);
        goto err_after_server;
    }
    slog("info", "main", "msg=\"echo only\" listen=%s port=%d method=%s", f->listen, port,
         RPC_ECHO_METHOD);
    int sig = wait_signal(set);
    slog("info", "main", "msg=\"shutting down\" signal=%d", sig);
    code = 0;
err_after_server:
    rpc_server_free(server);
err_after_nothing:
    return code;
}

extern char **environ;

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "restore") == 0) /* service/backup/restore.c */
        return backup_restore_main(argc - 1, argv + 1);
    static struct slotd_config f;
    char err[512] = "";
    char *warnings = NULL;
    size_t warnings_len = 0;
    FILE *warn = open_memstream(&warnings, &warnings_len);
    int rc = slotd_config_load(argc, argv, environ, &f, stdout, warn, err, sizeof(err));
    if (warn != NULL)
        fclose(warn);
    enum slog_level level = SLOG_INFO;
    if (rc == 0 && slog_level_parse(f.log_level, &level) != 0) {
        snprintf(err, sizeof(err), "--log-level: \"%s\" is not debug, info, warn or error",
                 f.log_level);
        rc = -1;
    }
    enum slog_format format = SLOG_FORMAT_TEXT;
    if (rc == 0 && slog_format_parse(f.log_format, &format) != 0) {
        snprintf(err, sizeof(err), "--log-format: \"%s\" is not text or json", f.log_format);
        rc = -1;
    }
    if (rc == 0 && !ctl_zone_valid(f.zone)) {
        snprintf(err, sizeof(err), "--zone: \"%s\" is not 1..%d bytes of [a-z0-9._-]", f.zone,
                 CTL_ZONE_MAX);
        rc = -1;
    }
    slog_set_level(level);
    slog_set_format(format);
    for (char *line = warnings, *nl; rc == 0 && line != NULL && *line != '\0'; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl == NULL)
            break;
        slog("warn", "config", "%.*s", (int)(nl - line), line);
    }
    free(warnings);
    if (rc == 1)
        return 0;
    if (rc != 0) { /* one line naming the option, and where to read about them */
        fprintf(stderr, "slotd: %s%s\n", err,
                strstr(err, "slotd --help") ? "" : " (see slotd --help)");
        return 2;
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (f.echo_only)
        return run_echo_only(&f, &set);

    int code = 1;
    struct store *store = NULL;
    struct route_table *routes = NULL;
    struct rpc_server *server = NULL;
    struct rpc_server *peer_server = NULL;
    struct transport *transport = NULL;
    struct runtime *rt = NULL;
    struct executor *exec = NULL;
    struct metrics_registry *metrics = NULL;
    struct metrics_http *metrics_http = NULL;
    struct auth_key *secret = NULL;
    struct auth_verifier *verifier = NULL;
    if (f.peer_listen[0] == '\0' &&
        default_peer_listen(f.listen, f.peer_listen, sizeof(f.peer_listen), err, sizeof(err)) !=
            0) {
        fprintf(stderr, "slotd: %s\n", err);
        return 2;
    }
    size_t ll = strlen(f.listen); /* port 0 twice is two free ports */
    if (strcmp(f.peer_listen, f.listen) == 0 &&
        !(ll >= 2 && strcmp(f.listen + ll - 2, ":0") == 0)) {
        fprintf(stderr, "slotd: --peer-listen: %s is also --listen; the planes need two ports\n",
                f.listen);
        return 2;
    }
    struct node_authz *authz = NULL;
    /* Before anything is opened: a port another process serves is one line and exit 1, and the
     * data directory is left as it was. */
    if (net_listen_check(f.listen, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: --listen: %s\n", err);
        return 1;
    }
    if (net_listen_check(f.peer_listen, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: --peer-listen: %s\n", err);
        return 1;
    }
    struct tls_pems pems;
    if (tls_pems_load(&f, &pems, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: %s\n", err);
        return 2;
    }
    if (f.cluster_secret_file[0] != '\0' &&
        (auth_key_load(f.cluster_secret_file, &secret, err, sizeof(err)) != AUTH_OK ||
         auth_verifier_new(secret, &verifier) != AUTH_OK)) {
        fprintf(stderr, "slotd: --cluster-secret-file: %s\n",
                err[0] != '\0' ? err : "out of memory");
        code = 2;
        goto err_after_pems;
    }
    if (mkdir(f.data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "slotd: data dir %s: %s\n", f.data_dir, strerror(errno));
        goto err_after_pems;
    }
    if (store_open(f.data_dir, NULL, &store, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: open store: %s\n", err);
        goto err_after_pems;
    }
    if (route_table_new(&routes) != 0)
        goto err_after_store;
    if (metrics_registry_new(&metrics) != METRICS_OK)
        goto err_after_routes;
    if (metrics_build_info_register(metrics, slotd_version, metrics_build_commit) != METRICS_OK ||
        metrics_process_enable(metrics, f.data_dir) != METRICS_OK)
        goto err_after_metrics;

    struct rpc_server_options so;
    rpc_server_options_default(&so);
    so.listen_addr = f.listen;
    so.max_request_bytes = f.max_request_bytes;
    so.max_inflight_calls = f.max_inflight_calls;
    so.max_streams_per_conn = f.max_streams_per_conn;
    so.max_connections = f.max_connections;
    so.conn_idle_ms = f.conn_idle_ms;
    so.metrics = metrics;
    so.tls_cert_pem = pems.cert;
    so.tls_key_pem = pems.key;
    so.tls_ca_pem = pems.ca;
    so.tls_client_auth = f.tls_client_auth != 0;
    if (rpc_server_new(&so, &server) != 0) {
        fprintf(stderr, "slotd: cannot create the gRPC server\n");
        goto err_after_metrics;
    }
    /* The peer plane: the same limits and TLS, only slotd.internal.v1.Peer. */
    so.listen_addr = f.peer_listen;
    so.peer_plane = true;
    if (rpc_server_new(&so, &peer_server) != 0) {
        fprintf(stderr, "slotd: cannot create the peer gRPC server\n");
        goto err_after_server;
    }
    rpc_server_set_health(server, "", 2); /* NOT_SERVING until every group has a leader */
    /* "liveness": SERVING while the process serves calls, whatever its groups (a Kubernetes
     * liveness probe must not restart a healthy node during an election). */
    rpc_server_set_health(server, "liveness", 1);

    struct runtime_options ro;
    runtime_options_default(&ro);
    ro.node_id = f.node_id;
    ro.n_groups = (unsigned)f.slot_groups;
    ro.advertise = f.advertise[0] != '\0' ? f.advertise : f.listen;
    ro.peer_advertise = f.peer_advertise[0] != '\0' ? f.peer_advertise : f.peer_listen;
    ro.replicas = (unsigned)f.replicas;
    ro.metrics = metrics;
    char state_path[1100];
    snprintf(state_path, sizeof(state_path), "%s/cluster-state.json", f.data_dir);
    ro.state_path = state_path;
    ro.cluster_id = f.cluster_id;
    ro.bootstrap_expect = (unsigned)f.bootstrap_expect;
    ro.join = f.join;
    ro.weight = (unsigned)f.weight;
    ro.zone = f.zone;
    ro.task_phase_timeout_ms = (unsigned)f.task_phase_timeout_ms;
    ro.down_replace_after_ms = f.down_replace_after_ms;
    ro.repair_max_moves = (unsigned)f.repair_max_moves;
    ro.balance = f.balance != 0;
    ro.balance_max_moves = (unsigned)f.balance_max_moves;
    ro.enable_hash_slot_migration = f.enable_hash_slot_migration != 0;
    if (f.compact_entries)
        ro.compact_entries = f.compact_entries;
    if (f.compact_tail)
        ro.compact_tail = f.compact_tail;
    if (f.snapshot_chunk_bytes)
        ro.snap_chunk_bytes = f.snapshot_chunk_bytes;
    if (f.snapshot_sends_max)
        ro.snap_sends_max = f.snapshot_sends_max;
    if (f.snapshot_recv_idle_ms)
        ro.snap_recv_idle_ms = f.snapshot_recv_idle_ms;
    if (f.snapshot_recv_max_bytes)
        ro.snap_recv_max_bytes = f.snapshot_recv_max_bytes;
    if (f.snapshot_install_batch_bytes)
        ro.snap_install_batch_bytes = (size_t)f.snapshot_install_batch_bytes;
    ro.group_proposals_max = f.group_proposals_max;
    ro.watch_history_bytes = f.watch_history_bytes;
    const char *pa = ro.peer_advertise;
    if (f.join[0] != '\0' && net_addr_wildcard(pa)) {
        fprintf(stderr,
                "slotd: --join: this node's peer address %s is no address other nodes "
                "can dial; set --peer-advertise HOST:PORT\n",
                pa);
        code = 2;
        goto err_after_server;
    }
    if (f.peers[0] != '\0' && parse_peers(f.peers, &ro) != 0)
        goto err_after_server;
    struct auth_signer signer = {.key = secret, .node = f.node_id};
    bool peer_mtls = pems.cert != NULL && f.tls_client_auth;
    if (auth_setup(&f, secret != NULL || peer_mtls, ro.n_nodes > 1 || f.join[0] != '\0', &authz,
                   err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: %s\n", err);
        code = 2;
        goto err_after_server;
    }
    ro.on_ctl_state = authz != NULL ? node_authz_on_ctl_state : NULL;
    ro.on_ctl_state_ctx = authz;
    if (ro.n_nodes > 1 || f.join[0] != '\0') {
        if (secret == NULL && !peer_mtls)
            slog("warn", "main",
                 "msg=\"PEERS ARE NOT AUTHENTICATED: any client "
                 "that reaches this node's port can act as a node; set --cluster-secret-file "
                 "on every node, or TLS with --tls-client-auth 1 and node-<id> "
                 "certificates\"");
        struct transport_options to;
        transport_options_default(&to);
        to.node_id = f.node_id;
        to.tls = pems.cert != NULL; /* nodes speak TLS to each other iff they serve it */
        to.tls_ca_pem = pems.ca;
        to.tls_cert_pem = pems.cert;
        to.tls_key_pem = pems.key;
        to.tls_server_name = f.tls_server_name;
        if (secret != NULL) {
            to.sign = auth_signer_sign;
            to.sign_ctx = &signer;
            to.sign_header = AUTH_PROOF_HEADER;
            /* every call: forwarded Metadata and relayed Admin calls prove the node too */
            to.sign_prefix = "/slotd.internal.v1.Peer/";
        }
        struct transport_callbacks cb = {.peer_unreachable = on_peer_unreachable};
        if (transport_new(&to, &cb, &transport) != 0) {
            fprintf(stderr, "slotd: cannot create the peer transport\n");
            goto err_after_server;
        }
        for (size_t i = 0; i < ro.n_nodes; i++) {
            if (ro.nodes[i].id != f.node_id &&
                transport_add_peer(transport, ro.nodes[i].id, ro.nodes[i].address) != 0) {
                fprintf(stderr, "slotd: --peers: cannot add node %llu at %s\n",
                        (unsigned long long)ro.nodes[i].id, ro.nodes[i].address);
                goto err_after_transport;
            }
        }
    }
    if (runtime_new(&ro, store, routes, server, transport, &rt, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: %s\n", err);
        goto err_after_transport;
    }
    g_runtime = rt;
    if (authz != NULL)
        node_authz_set_runtime(authz, rt, f.node_id);
    struct node_api api = {.rt = rt,
                           .routes = routes,
                           .transport = transport,
                           .client = server,
                           .node_id = f.node_id,
                           .propose_stream_inflight = f.propose_stream_inflight,
                           .peer_verifier = verifier,
                           .peer_mtls = peer_mtls,
                           .authz = authz,
                           .store = store};
    if (executor_new(rt, &exec) != 0) { /* the controller's executors run on the loop */
        fprintf(stderr, "slotd: cannot create the executor: out of memory\n");
        goto err_after_runtime;
    }
    if (node_backup_metrics_register(&api, metrics) != METRICS_OK)
        slog("warn", "main", "msg=\"backup metrics not registered\"");
    if (node_api_metrics_register(&api, metrics) != METRICS_OK)
        slog("warn", "main", "msg=\"forward metrics not registered\"");
    if (node_api_register(&api, server, peer_server) != 0) {
        fprintf(stderr, "slotd: cannot register the API\n");
        goto err_after_runtime;
    }
    int port = 0, peer_port = 0;
    /* the client port first: Peer/Forward hands calls to its handlers */
    if (rpc_server_start(server, &port, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: listen %s: %s\n", f.listen, err);
        goto err_after_runtime;
    }
    /* The client port's thread polls for the peer port too (rpc.h: one polling thread, no call
     * handed between threads); the peer port is shut down first. */
    rpc_server_poll_by(peer_server, server);
    if (rpc_server_start(peer_server, &peer_port, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: --peer-listen %s: %s\n", f.peer_listen, err);
        rpc_server_shutdown(server);
        goto err_after_runtime;
    }
    if (transport != NULL && transport_start(transport) != 0) {
        fprintf(stderr, "slotd: cannot start the peer transport\n");
        rpc_server_shutdown(peer_server);
        rpc_server_shutdown(server);
        goto err_after_runtime;
    }
    if (runtime_start(rt) != 0) {
        fprintf(stderr, "slotd: cannot start the runtime thread\n");
        rpc_server_shutdown(peer_server);
        rpc_server_shutdown(server);
        goto err_after_runtime;
    }
    slog("info", "main",
         "msg=\"slotd serving\" node=%llu listen=%s port=%d peer_listen=%s peer_port=%d "
         "data_dir=%s slot_groups=%llu tls=%s peer_auth=%s auth=%s",
         (unsigned long long)f.node_id, f.listen, port, f.peer_listen, peer_port, f.data_dir,
         (unsigned long long)f.slot_groups,
         pems.cert == NULL   ? "off"
         : f.tls_client_auth ? "mtls"
                             : "on",
         secret != NULL && peer_mtls ? "secret+mtls"
         : secret != NULL            ? "secret"
         : peer_mtls                 ? "mtls"
                                     : "none",
         authz != NULL ? "on" : "off");
    start_metrics_http(metrics, f.metrics_listen, &metrics_http);
    notify_systemd("READY=1\nSTATUS=serving");

    int sig = wait_signal(&set);
    slog("info", "main", "msg=\"shutting down\" signal=%d", sig);
    notify_systemd("STOPPING=1\nSTATUS=handing off led groups and shutting down");
    metrics_http_stop(metrics_http);
    metrics_http = NULL;
    size_t still = transport != NULL ? runtime_transfer_leadership(rt, SHUTDOWN_TRANSFER_MS) : 0;
    if (still > 0)
        slog("warn", "main", "msg=\"groups still led at shutdown\" n=%zu", still);
    runtime_stop(rt); /* every call the runtime holds gets an answer */
    if (transport != NULL)
        transport_stop(transport); /* forwarded calls get theirs */
    rpc_server_shutdown(peer_server); /* first: the client port's thread polls for it */
    rpc_server_shutdown(server);      /* then no call is left in flight */
    code = 0;
    if (runtime_ctl_removed(rt)) {
        slog("error", "main", "msg=\"exiting: this node is removed from the cluster\" node=%llu",
             (unsigned long long)f.node_id);
        code = 3;
    }

err_after_runtime:
    runtime_stop(rt);
    if (transport != NULL)
        transport_stop(transport);
    rpc_server_shutdown(peer_server);
    rpc_server_shutdown(server); /* idempotent: watch streams end before their thread stops */
    node_watch_stop(&api);
    node_backup_stop(&api); /* before the store closes: the capture reads it */
    node_authz_free(authz); /* its worker's last jobs see a stopped runtime */
    authz = NULL;
    if (transport != NULL)
        transport_stop(transport);
    g_runtime = NULL;
    runtime_free(rt);
    executor_free(exec);
err_after_transport:
    transport_free(transport);
err_after_server:
    rpc_server_free(peer_server);
    node_authz_free(authz);
    rpc_server_free(server);
err_after_metrics:
    metrics_registry_free(metrics); /* after every user of its series */
err_after_routes:
    route_table_free(routes);
err_after_store:
    store_close(store);
err_after_pems:
    tls_pems_free(&pems);
    auth_verifier_free(verifier);
    auth_key_free(secret);
    if (code == 0)
        slog("info", "main", "msg=\"stopped\"");
    return code;
}
