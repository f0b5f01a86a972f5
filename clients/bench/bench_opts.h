/* bench_opts.h - slotbench's command line: the options, their bounds and the parser. */
#ifndef SLOTD_BENCH_OPTS_H
#define SLOTD_BENCH_OPTS_H

#include "client_tls.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ECHO: slotd --echo-only (slotd.bench.v1.Echo/Echo answers the request bytes): the same slotd
 * requests as SLOTD, each answered unchanged by the rpc layer alone, the request path's ceiling. */
enum bench_target { BENCH_TARGET_SLOTD, BENCH_TARGET_ETCD, BENCH_TARGET_ECHO };

/* What --op asks for. MIXED draws a read (--read-op) with probability --read-ratio. */
enum bench_op {
    BENCH_OP_PUT,
    BENCH_OP_GET,              /* linearizable read (etcd: serializable=false) */
    BENCH_OP_GET_LEADER_LOCAL, /* slotd only */
    BENCH_OP_GET_LOCAL,        /* any replica (etcd: serializable=true) */
    BENCH_OP_MIXED,
};

/* Bounds: a value outside them is a usage error, never silently clamped. */
#define BENCH_ENDPOINTS_MAX 16
#define BENCH_ENDPOINT_LEN_MAX 255
#define BENCH_CONCURRENCY_MAX 10000u
#define BENCH_CONNECTIONS_MAX 256u /* per endpoint */
#define BENCH_THREADS_MAX 8u
#define BENCH_KEYS_MAX 1000000000ull
#define BENCH_KEY_SIZE_MAX 4096u
#define BENCH_VALUE_SIZE_MAX (1u << 20)
#define BENCH_DURATION_S_MAX 3600.0
#define BENCH_WARMUP_S_MAX 600.0
#define BENCH_OPS_MAX 1000000000000ull
#define BENCH_DEADLINE_MS_MAX 600000u
#define BENCH_CONNECT_TIMEOUT_MS_MAX 60000u
#define BENCH_WATCHERS_MAX 1000u /* watch streams (slotd serves 1024 per node) */

#define BENCH_TOKEN_MAX 255 /* bytes of the token in --token-file */

struct bench_opts {
    enum bench_target target;
    enum bench_op op;
    enum bench_op read_op; /* the read kind of MIXED; never PUT or MIXED */
    double read_ratio;     /* 0..1, MIXED only */
    char endpoints[BENCH_ENDPOINTS_MAX][BENCH_ENDPOINT_LEN_MAX + 1];
    unsigned endpoint_count; /* >= 1 */
    unsigned concurrency;    /* requests in flight, all threads together */
    unsigned connections;    /* channels (TCP connections) per endpoint */
    unsigned threads;        /* client threads, each with its own completion queue */
    uint64_t keys;           /* key space: key-0 .. key-(keys-1), zero padded */
    unsigned key_size;       /* bytes per key, >= 4 + digits of keys-1 */
    unsigned value_size;
    double duration_s; /* measured phase; the run ends at this or at ops, whichever first */
    uint64_t ops;      /* 0 = no count bound */
    double warmup_s;   /* before the measured phase, not counted */
    uint64_t seed;
    bool populate;        /* put every key once before the run */
    unsigned deadline_ms; /* per request */
    unsigned connect_timeout_ms;
    bool json;
    bool route_aware; /* slotd: send each request to its group's leader (RouteSnapshot) */
    /* slotd, --op put: puts as items of Metadata/ProposeStream calls instead of unary Proposes */
    bool stream;
    /* watch streams on the prefix "key-" kept open over warmup and the measured phase
     * (slotd Metadata/Watch, etcd Watch/Watch); 0 = none */
    unsigned watchers;
    bool help; /* --help: print bench_opts_usage() and exit 0 */
    /* --tls-ca/--tls-cert/--tls-key/--tls-server-name (point into argv; all NULL: plaintext) */
    struct client_tls_opts tls;
    /* the PEM text of tls, loaded by main() before the run (NULL: plaintext channels) */
    const struct client_tls_pem *tls_pem;
    /* --token-file F (points into argv; NULL: none): a token from Admin.Authenticate, sent as
     * "authorization: Bearer <token>" on every call (servers started with --auth 1) */
    const char *token_file;
    char token[BENCH_TOKEN_MAX + 1]; /* read by main() before the run; "" = none */
};

/* o: borrowed for the call. Fills the defaults (the values --help shows). */
void bench_opts_defaults(struct bench_opts *o);

/*
 * o, argv, errmsg: borrowed for the call. Parses argv[1..argc-1] ("--name value" or
 * "--name=value") over the defaults. Returns BENCH_OK, or BENCH_EUSAGE with a sentence in
 * errmsg naming the option and its bound.
 */
int bench_opts_parse(struct bench_opts *o, int argc, char *const argv[], char *errmsg,
                     size_t errmsg_len);

/* Static names of an op and a target, as spelled on the command line. */
const char *bench_op_name(enum bench_op op);
const char *bench_target_name(enum bench_target target);

/* Static usage text. */
const char *bench_opts_usage(void);

#endif /* SLOTD_BENCH_OPTS_H */
