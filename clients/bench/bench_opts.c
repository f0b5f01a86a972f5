/* bench_opts.c - parses and validates slotbench's command line into struct bench_opts. */
#include "bench_opts.h"

#include "bench_err.h"
#include "call.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum opt_kind {
    OPT_FLAG,
    OPT_UINT,
    OPT_U64,
    OPT_DOUBLE,
    OPT_TARGET,
    OPT_OP,
    OPT_READ_OP,
    OPT_ENDPOINTS,
    OPT_STRING /* a const char * into argv, non-empty */
};

struct opt_def {
    const char *name;
    enum opt_kind kind;
    size_t offset; /* of the field in struct bench_opts */
    double min, max;
};

#define OFF(field) offsetof(struct bench_opts, field)

static const struct opt_def opt_defs[] = {
    {"target", OPT_TARGET, OFF(target), 0, 0},
    {"endpoints", OPT_ENDPOINTS, OFF(endpoints), 0, 0},
    {"op", OPT_OP, OFF(op), 0, 0},
    {"read-op", OPT_READ_OP, OFF(read_op), 0, 0},
    {"read-ratio", OPT_DOUBLE, OFF(read_ratio), 0.0, 1.0},
    {"concurrency", OPT_UINT, OFF(concurrency), 1, BENCH_CONCURRENCY_MAX},
    {"connections", OPT_UINT, OFF(connections), 1, BENCH_CONNECTIONS_MAX},
    {"threads", OPT_UINT, OFF(threads), 1, BENCH_THREADS_MAX},
    {"keys", OPT_U64, OFF(keys), 1, (double)BENCH_KEYS_MAX},
    {"key-size", OPT_UINT, OFF(key_size), 1, BENCH_KEY_SIZE_MAX},
    {"value-size", OPT_UINT, OFF(value_size), 0, BENCH_VALUE_SIZE_MAX},
    {"duration", OPT_DOUBLE, OFF(duration_s), 0.001, BENCH_DURATION_S_MAX},
    {"ops", OPT_U64, OFF(ops), 1, (double)BENCH_OPS_MAX},
    {"warmup", OPT_DOUBLE, OFF(warmup_s), 0.0, BENCH_WARMUP_S_MAX},
    {"seed", OPT_U64, OFF(seed), 0, 18446744073709551615.0},
    {"populate", OPT_FLAG, OFF(populate), 0, 0},
    {"deadline-ms", OPT_UINT, OFF(deadline_ms), 1, BENCH_DEADLINE_MS_MAX},
    {"connect-timeout-ms", OPT_UINT, OFF(connect_timeout_ms), 1, BENCH_CONNECT_TIMEOUT_MS_MAX},
    {"json", OPT_FLAG, OFF(json), 0, 0},
    {"route-aware", OPT_FLAG, OFF(route_aware), 0, 0},
    {"stream", OPT_FLAG, OFF(stream), 0, 0},
    {"watchers", OPT_UINT, OFF(watchers), 0, BENCH_WATCHERS_MAX},
    {"help", OPT_FLAG, OFF(help), 0, 0},
    {"tls-ca", OPT_STRING, OFF(tls.ca_file), 0, 0},
    {"tls-cert", OPT_STRING, OFF(tls.cert_file), 0, 0},
    {"tls-key", OPT_STRING, OFF(tls.key_file), 0, 0},
    {"tls-server-name", OPT_STRING, OFF(tls.server_name), 0, 0},
    {"token-file", OPT_STRING, OFF(token_file), 0, 0},
};

static const char *const op_names[] = {
    [BENCH_OP_PUT] = "put",
    [BENCH_OP_GET] = "get",
    [BENCH_OP_GET_LEADER_LOCAL] = "get-leader-local",
    [BENCH_OP_GET_LOCAL] = "get-local",
    [BENCH_OP_MIXED] = "mixed",
};

const char *bench_op_name(enum bench_op op)
{
    return op <= BENCH_OP_MIXED ? op_names[op] : "?";
}

const char *bench_target_name(enum bench_target target)
{
    return target == BENCH_TARGET_ETCD ? "etcd" : target == BENCH_TARGET_ECHO ? "echo" : "slotd";
}

const char *bench_opts_usage(void)
{
    return "usage: slotbench [options]\n"
           "  --target slotd|etcd|echo     service to load (default slotd; echo: slotd "
           "--echo-only)\n"
           "  --endpoints H:P[,H:P...]     servers, requests spread round robin (default "
           "127.0.0.1:7700; etcd 127.0.0.1:2379)\n"
           "  --op put|get|get-linearizable|get-leader-local|get-local|mixed   (default put)\n"
           "  --read-op OP                 the read kind of --op mixed (default get)\n"
           "  --read-ratio R               share of reads in --op mixed, 0..1 (default 0.5)\n"
           "  --concurrency N              requests always in flight (default 16, max 10000)\n"
           "  --connections C              channels per endpoint (default 1, max 256)\n"
           "  --threads T                  client threads, one completion queue each (default 1, "
           "max 8)\n"
           "  --keys K                     key space size (default 100000)\n"
           "  --key-size B                 key bytes, 'key-' + zero padded index (default 64)\n"
           "  --value-size B               value bytes (default 256, max 1048576)\n"
           "  --duration S                 measured seconds (default 10, max 3600)\n"
           "  --ops N                      stop after N measured requests (whichever first)\n"
           "  --warmup S                   seconds run before measuring, not counted (default 0)\n"
           "  --seed N                     key choice and value bytes (default 1)\n"
           "  --populate                   put every key once before the run\n"
           "  --deadline-ms MS             per request deadline (default 5000)\n"
           "  --connect-timeout-ms MS      wait for every connection (default 5000)\n"
           "  --json                       print one JSON object instead of text\n"
           "  --route-aware                slotd: send each request straight to its group's "
           "leader\n"
           "                               (RouteSnapshot from the first endpoint, no_forward "
           "set);\n"
           "                               round robin over --endpoints when the leader is "
           "unknown\n"
           "  --stream                     slotd, --op put: puts as items of ProposeStream calls "
           "(one\n"
           "                               per endpoint channel, or per leader with "
           "--route-aware)\n"
           "  --watchers W                 watch streams on the prefix 'key-' open during warmup "
           "and\n"
           "                               the run (0..1000, default 0): events/s delivered\n"
           "  --tls-ca FILE                TLS: CA bundle PEM verifying the servers (default: "
           "plaintext)\n"
           "  --tls-cert FILE              TLS: client certificate PEM for servers requiring one "
           "(mTLS)\n"
           "  --tls-key FILE               TLS: private key PEM of --tls-cert\n"
           "  --tls-server-name NAME       TLS: name expected in the server certificates "
           "(default: host)\n"
           "  --token-file F               send the token in F (first line, from "
           "Admin.Authenticate)\n"
           "                               as \"authorization: Bearer <token>\" on every call\n"
           "exit: 0 run completed (even with errors), 1 could not connect, 2 usage error\n";
}

void bench_opts_defaults(struct bench_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->target = BENCH_TARGET_SLOTD;
    o->op = BENCH_OP_PUT;
    o->read_op = BENCH_OP_GET;
    o->read_ratio = 0.5;
    o->concurrency = 16;
    o->connections = 1;
    o->threads = 1;
    o->keys = 100000;
    o->key_size = 64;
    o->value_size = 256;
    o->duration_s = 10.0;
    o->seed = 1;
    o->deadline_ms = 5000;
    o->connect_timeout_ms = 5000;
}

static int opt_parse_op(const char *s, enum bench_op *op)
{
    if (strcmp(s, "get-linearizable") == 0) {
        *op = BENCH_OP_GET;
        return 0;
    }
    for (int i = 0; i <= BENCH_OP_MIXED; i++) {
        if (strcmp(s, op_names[i]) == 0) {
            *op = (enum bench_op)i;
            return 0;
        }
    }
    return -1;
}

static int opt_parse_endpoints(struct bench_opts *o, const char *s, char *errmsg, size_t errmsg_len)
{
    unsigned n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len > BENCH_ENDPOINT_LEN_MAX || memchr(p, ':', len) == NULL)
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                                   "--endpoints: each endpoint is host:port, 1..%d bytes, in '%s'",
                                   BENCH_ENDPOINT_LEN_MAX, s);
        for (size_t k = 0; k < len; k++) {
            unsigned char ch = (unsigned char)p[k];
            if (ch <= ' ' || ch >= 0x7f || ch == '"' || ch == '\\')
                return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                                       "--endpoints: character 0x%02x is not allowed in '%s'", ch,
                                       s);
        }
        if (n == BENCH_ENDPOINTS_MAX)
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                                   "--endpoints: at most %d endpoints", BENCH_ENDPOINTS_MAX);
        memcpy(o->endpoints[n], p, len);
        o->endpoints[n][len] = '\0';
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    o->endpoint_count = n;
    return 0;
}

/* The field d describes, typed by d->kind (the table's offsetof guarantees the type). */
static void *opt_field(struct bench_opts *o, const struct opt_def *d)
{
    return (char *)o + d->offset;
}

/* A number that is all digits (u64) or a finite decimal (double) within [min, max]. */
static int opt_parse_number(const struct opt_def *d, const char *s, struct bench_opts *o,
                            char *errmsg, size_t errmsg_len)
{
    char *end = NULL;
    errno = 0;
    if (d->kind == OPT_DOUBLE) {
        double v = strtod(s, &end);
        if (errno || end == s || *end || !isfinite(v) || v < d->min || v > d->max)
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                                   "--%s: '%s' is not a number in %g..%g", d->name, s, d->min,
                                   d->max);
        double *dst = opt_field(o, d);
        *dst = v;
        return 0;
    }
    unsigned long long v = (s[0] >= '0' && s[0] <= '9') ? strtoull(s, &end, 10) : 0;
    if (!(s[0] >= '0' && s[0] <= '9') || errno || *end || (double)v < d->min || (double)v > d->max)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                               "--%s: '%s' is not an integer in %.0f..%.0f", d->name, s, d->min,
                               d->max);
    if (d->kind == OPT_UINT) {
        unsigned *dst = opt_field(o, d);
        *dst = (unsigned)v;
    } else {
        uint64_t *dst = opt_field(o, d);
        *dst = v;
    }
    return 0;
}

static int opt_apply(const struct opt_def *d, const char *val, struct bench_opts *o, char *errmsg,
                     size_t errmsg_len)
{
    switch (d->kind) {
    case OPT_FLAG: {
        bool *flag = opt_field(o, d);
        *flag = true;
        return 0;
    }
    case OPT_TARGET:
        if (strcmp(val, "slotd") == 0)
            o->target = BENCH_TARGET_SLOTD;
        else if (strcmp(val, "etcd") == 0)
            o->target = BENCH_TARGET_ETCD;
        else if (strcmp(val, "echo") == 0)
            o->target = BENCH_TARGET_ECHO;
        else
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                                   "--target: '%s' is not slotd, etcd or echo", val);
        return 0;
    case OPT_OP:
        if (opt_parse_op(val, &o->op) != 0)
            return slotd_call_fail(
                errmsg, errmsg_len, BENCH_EUSAGE,
                "--op: '%s' is not put, get, get-linearizable, get-leader-local, "
                "get-local or mixed",
                val);
        return 0;
    case OPT_READ_OP:
        if (opt_parse_op(val, &o->read_op) != 0 || o->read_op == BENCH_OP_PUT ||
            o->read_op == BENCH_OP_MIXED)
            return slotd_call_fail(
                errmsg, errmsg_len, BENCH_EUSAGE,
                "--read-op: '%s' is not get, get-linearizable, get-leader-local or "
                "get-local",
                val);
        return 0;
    case OPT_ENDPOINTS:
        return opt_parse_endpoints(o, val, errmsg, errmsg_len);
    case OPT_STRING:
        if (!*val)
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE, "--%s: empty", d->name);
        *(const char **)((char *)o + d->offset) = val;
        return 0;
    default:
        return opt_parse_number(d, val, o, errmsg, errmsg_len);
    }
}

static unsigned digits_of(uint64_t v)
{
    unsigned n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Checks that span several options, after all of them are known. */
static int opt_check_combined(struct bench_opts *o, char *errmsg, size_t errmsg_len)
{
    if (o->endpoint_count == 0) {
        strcpy(o->endpoints[0],
               o->target == BENCH_TARGET_ETCD ? "127.0.0.1:2379" : "127.0.0.1:7700");
        o->endpoint_count = 1;
    }
    unsigned need = 4 + digits_of(o->keys - 1);
    if (o->key_size < need)
        return slotd_call_fail(
            errmsg, errmsg_len, BENCH_EUSAGE,
            "--key-size: %u bytes cannot hold 'key-' and %u digits for --keys %llu "
            "(need >= %u)",
            o->key_size, need - 4, (unsigned long long)o->keys, need);
    if (o->target == BENCH_TARGET_ETCD &&
        (o->op == BENCH_OP_GET_LEADER_LOCAL ||
         (o->op == BENCH_OP_MIXED && o->read_op == BENCH_OP_GET_LEADER_LOCAL)))
        return slotd_call_fail(
            errmsg, errmsg_len, BENCH_EUSAGE,
            "--op get-leader-local: etcd has no leader-local read (use get or get-local)");
    if (o->target == BENCH_TARGET_ETCD && o->route_aware)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                               "--route-aware: slotd only (etcd has no RouteSnapshot)");
    if (o->target == BENCH_TARGET_ECHO && o->route_aware)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                               "--route-aware: slotd only (the echo target has no RouteSnapshot)");
    if (o->stream && o->target != BENCH_TARGET_SLOTD)
        return slotd_call_fail(
            errmsg, errmsg_len, BENCH_EUSAGE,
            "--stream: slotd only (ProposeStream is slotd's Metadata/ProposeStream)");
    if (o->stream && o->op != BENCH_OP_PUT)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                               "--stream: --op put only (ProposeStream carries "
                               "writes; --op %s reads)",
                               bench_op_name(o->op));
    if (o->target == BENCH_TARGET_ECHO && o->watchers)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                               "--watchers: slotd or etcd only (the echo target has no Watch)");
    if (client_tls_opts_check(&o->tls, errmsg, errmsg_len) != CLIENT_TLS_OK)
        return BENCH_EUSAGE;
    if (o->threads > o->concurrency)
        return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                               "--threads %u: more threads than --concurrency %u", o->threads,
                               o->concurrency);
    return 0;
}

int bench_opts_parse(struct bench_opts *o, int argc, char *const argv[], char *errmsg,
                     size_t errmsg_len)
{
    bench_opts_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0)
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                                   "unexpected argument '%s' (options start with --)", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const struct opt_def *d = NULL;
        for (size_t k = 0; k < sizeof(opt_defs) / sizeof(opt_defs[0]); k++) {
            if (strlen(opt_defs[k].name) == name_len &&
                strncmp(opt_defs[k].name, name, name_len) == 0)
                d = &opt_defs[k];
        }
        if (!d)
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE,
                                   "unknown option '%s' (see --help)", arg);
        const char *val = NULL;
        if (d->kind == OPT_FLAG) {
            if (eq)
                return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE, "--%s takes no value",
                                       d->name);
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            return slotd_call_fail(errmsg, errmsg_len, BENCH_EUSAGE, "--%s needs a value", d->name);
        }
        int rc = opt_apply(d, val, o, errmsg, errmsg_len);
        if (rc != 0)
            return rc;
    }
    if (o->help)
        return BENCH_OK;
    return opt_check_combined(o, errmsg, errmsg_len) ? BENCH_EUSAGE : BENCH_OK;
}
