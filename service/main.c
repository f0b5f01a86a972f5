/* main.c - the slotd binary: flags, store, route, gRPC server, runtime, and clean SIGTERM shutdown. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "service/node/api.h"
#include "service/route/route.h"
#include "service/rpc/rpc.h"
#include "service/runtime/runtime.h"
#include "service/transport/transport.h"
#include "store/store.h"

/* How long SIGTERM waits for led groups to move to other voters. */
#define SHUTDOWN_TRANSFER_MS 3000

struct flags {
    const char *listen;
    const char *data_dir;
    unsigned long long node_id;
    unsigned long slot_groups;
    unsigned long long max_request_bytes;
    unsigned long long max_inflight_calls;
    const char *peers;
    unsigned long long replicas;
    unsigned long long compact_entries;
    unsigned long long compact_tail;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: slotd [options]\n"
            "  --listen ADDR             gRPC listen address (default 127.0.0.1:7700)\n"
            "  --data-dir DIR            data directory (default ./slotd-data)\n"
            "  --node-id N               this node's id, >= 1 (default 1)\n"
            "  --slot-groups G           slot groups, 1..256 (default 8)\n"
            "  --max-request-bytes B     largest accepted request (default 4194304)\n"
            "  --max-inflight-calls N    calls in progress before RESOURCE_EXHAUSTED (default 4096)\n"
            "  --peers ID=ADDR,...       every cluster member incl. this node (default: single node)\n"
            "  --replicas R              voters per slot group (default min(3, nodes))\n"
            "  --compact-entries N       compact a group's log after N applied entries (default 10000)\n"
            "  --compact-tail N          entries kept behind the compaction point (default 1000)\n"
            "  --help                    this text\n");
}

static int parse_u64(const char *name, const char *s, unsigned long long lo, unsigned long long hi,
                     unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "slotd: --%s: '%s' is not a number in %llu..%llu\n", name, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_flags(int argc, char **argv, struct flags *f)
{
    static const struct option opts[] = {
        {"listen", required_argument, 0, 'l'},
        {"data-dir", required_argument, 0, 'd'},
        {"node-id", required_argument, 0, 'n'},
        {"slot-groups", required_argument, 0, 'g'},
        {"max-request-bytes", required_argument, 0, 'm'},
        {"max-inflight-calls", required_argument, 0, 'i'},
        {"peers", required_argument, 0, 'p'},
        {"replicas", required_argument, 0, 'r'},
        {"compact-entries", required_argument, 0, 'c'},
        {"compact-tail", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    unsigned long long v;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            f->listen = optarg;
            break;
        case 'd':
            f->data_dir = optarg;
            break;
        case 'n':
            if (parse_u64("node-id", optarg, 1, UINT64_MAX >> 1, &f->node_id))
                return -1;
            break;
        case 'g':
            if (parse_u64("slot-groups", optarg, 1, 256, &v))
                return -1;
            f->slot_groups = (unsigned long)v;
            break;
        case 'm':
            if (parse_u64("max-request-bytes", optarg, 1024, 1ull << 30, &f->max_request_bytes))
                return -1;
            break;
        case 'i':
            if (parse_u64("max-inflight-calls", optarg, 1, 1u << 20, &f->max_inflight_calls))
                return -1;
            break;
        case 'p':
            f->peers = optarg;
            break;
        case 'r':
            if (parse_u64("replicas", optarg, 1, 16, &f->replicas))
                return -1;
            break;
        case 'c':
            if (parse_u64("compact-entries", optarg, 10, 1ull << 32, &f->compact_entries))
                return -1;
            break;
        case 't':
            if (parse_u64("compact-tail", optarg, 1, 1ull << 32, &f->compact_tail))
                return -1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "slotd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
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
        if (parse_u64("peers", tok, 1, UINT64_MAX >> 1, &id))
            return -1;
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

/* Blocks until SIGINT or SIGTERM (blocked in every thread before any starts). */
static int wait_signal(const sigset_t *set)
{
    int sig = 0;
    sigwait(set, &sig);
    return sig;
}

int main(int argc, char **argv)
{
    struct flags f = {.listen = "127.0.0.1:7700", .data_dir = "./slotd-data", .node_id = 1,
                      .slot_groups = 8, .max_request_bytes = 4u << 20,
                      .max_inflight_calls = 4096};
    if (parse_flags(argc, argv, &f) != 0)
        return 2;

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[512] = "";
    int code = 1;
    struct store *store = NULL;
    struct route_table *routes = NULL;
    struct rpc_server *server = NULL;
    struct transport *transport = NULL;
    struct runtime *rt = NULL;
    if (mkdir(f.data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "slotd: data dir %s: %s\n", f.data_dir, strerror(errno));
        return 1;
    }
    if (store_open(f.data_dir, NULL, &store, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: open store: %s\n", err);
        return 1;
    }
    if (route_table_new(&routes) != 0)
        goto err_after_store;

    struct rpc_server_options so;
    rpc_server_options_default(&so);
    so.listen_addr = f.listen;
    so.max_request_bytes = f.max_request_bytes;
    so.max_inflight_calls = f.max_inflight_calls;
    if (rpc_server_new(&so, &server) != 0) {
        fprintf(stderr, "slotd: cannot create the gRPC server\n");
        goto err_after_routes;
    }
    rpc_server_set_health(server, "", 2); /* NOT_SERVING until every group has a leader */

    struct runtime_options ro;
    runtime_options_default(&ro);
    ro.node_id = f.node_id;
    ro.n_groups = (unsigned)f.slot_groups;
    ro.advertise = f.listen;
    ro.replicas = (unsigned)f.replicas;
    if (f.compact_entries)
        ro.compact_entries = f.compact_entries;
    if (f.compact_tail)
        ro.compact_tail = f.compact_tail;
    if (f.peers != NULL && parse_peers(f.peers, &ro) != 0)
        goto err_after_server;
    if (ro.n_nodes > 1) {
        struct transport_options to;
        transport_options_default(&to);
        to.node_id = f.node_id;
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
    struct node_api api = {.rt = rt, .routes = routes, .transport = transport,
                           .node_id = f.node_id};
    if (node_api_register(&api, server) != 0) {
        fprintf(stderr, "slotd: cannot register the API\n");
        goto err_after_runtime;
    }
    int port = 0;
    if (rpc_server_start(server, &port, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: listen %s: %s\n", f.listen, err);
        goto err_after_runtime;
    }
    if (transport != NULL && transport_start(transport) != 0) {
        fprintf(stderr, "slotd: cannot start the peer transport\n");
        rpc_server_shutdown(server);
        goto err_after_runtime;
    }
    if (runtime_start(rt) != 0) {
        fprintf(stderr, "slotd: cannot start the runtime thread\n");
        rpc_server_shutdown(server);
        goto err_after_runtime;
    }
    fprintf(stderr,
            "level=info component=main msg=\"slotd serving\" node=%llu listen=%s port=%d "
            "data_dir=%s slot_groups=%lu\n",
            f.node_id, f.listen, port, f.data_dir, f.slot_groups);

    int sig = wait_signal(&set);
    fprintf(stderr, "level=info component=main msg=\"shutting down\" signal=%d\n", sig);
    size_t still = ro.n_nodes > 1 ? runtime_transfer_leadership(rt, SHUTDOWN_TRANSFER_MS) : 0;
    if (still > 0)
        fprintf(stderr, "level=warn component=main msg=\"groups still led at shutdown\" n=%zu\n",
                still);
    runtime_stop(rt); /* every call the runtime holds gets an answer */
    if (transport != NULL)
        transport_stop(transport); /* forwarded calls get theirs */
    rpc_server_shutdown(server);   /* then no call is left in flight */
    code = 0;

err_after_runtime:
    runtime_stop(rt);
    if (transport != NULL)
        transport_stop(transport);
    g_runtime = NULL;
    runtime_free(rt);
err_after_transport:
    transport_free(transport);
err_after_server:
    rpc_server_free(server);
err_after_routes:
    route_table_free(routes);
err_after_store:
    store_close(store);
    if (code == 0)
        fprintf(stderr, "level=info component=main msg=\"stopped\"\n");
    return code;
}
