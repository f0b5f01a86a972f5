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
#include "store/store.h"

struct flags {
    const char *listen;
    const char *data_dir;
    unsigned long long node_id;
    unsigned long slot_groups;
    unsigned long long max_request_bytes;
    unsigned long long max_inflight_calls;
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
    if (runtime_new(&ro, store, routes, server, &rt, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: %s\n", err);
        goto err_after_server;
    }
    struct node_api api = {.rt = rt, .routes = routes};
    if (node_api_register(&api, server) != 0) {
        fprintf(stderr, "slotd: cannot register the API\n");
        goto err_after_runtime;
    }
    int port = 0;
    if (rpc_server_start(server, &port, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd: listen %s: %s\n", f.listen, err);
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
    runtime_stop(rt);          /* every held call gets an answer */
    rpc_server_shutdown(server); /* then no call is left in flight */
    code = 0;

err_after_runtime:
    runtime_stop(rt);
    runtime_free(rt);
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
