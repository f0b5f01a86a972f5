/* bench_test.c - CUnit checks of slotbench: histogram, options, wire, report, engine. */
#include "bench_err.h"
#include "bench_fake_server.h"
#include "bench_hist.h"
#include "bench_opts.h"
#include "bench_report.h"
#include "bench_route.h"
#include "slotd/client.h"
#include "bench_run.h"
#include "bench_stream.h"
#include "bench_wire.h"
#include "etcd_rpc.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#include <CUnit/Basic.h>
#include <grpc/status.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t test_rng(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- histogram ------------------------------------------------------------------------ */

static void test_strerror(void)
{
    CU_ASSERT_STRING_EQUAL(bench_strerror(BENCH_OK), "ok");
    CU_ASSERT_STRING_EQUAL(bench_strerror(BENCH_EMALFORMED), "malformed response");
    CU_ASSERT_STRING_EQUAL(bench_strerror(BENCH_ERR_COUNT), "unknown error");
    CU_ASSERT_STRING_EQUAL(bench_strerror(-1), "unknown error");
}

static void test_hist_buckets(void)
{
    CU_ASSERT_EQUAL(bench_hist_bucket_of(0), 0);
    CU_ASSERT_EQUAL(bench_hist_bucket_of(255), 255);
    CU_ASSERT_EQUAL(bench_hist_bucket_of(256), 256);
    CU_ASSERT_EQUAL(bench_hist_bucket_of(UINT64_MAX), BENCH_HIST_BUCKETS - 1);
    CU_ASSERT_EQUAL(bench_hist_bucket_high(BENCH_HIST_BUCKETS - 1), UINT64_MAX);
    uint64_t x = 7;
    for (int i = 0; i < 100000; i++) {
        uint64_t v = test_rng(&x) >> (test_rng(&x) % 64);
        unsigned b = bench_hist_bucket_of(v);
        uint64_t high = bench_hist_bucket_high(b);
        CU_ASSERT_FATAL(b < BENCH_HIST_BUCKETS);
        CU_ASSERT_FATAL(high >= v);
        CU_ASSERT_FATAL(high - v <= v / 128);
        CU_ASSERT_FATAL(bench_hist_bucket_of(high) == b);
        if (b > 0)
            CU_ASSERT_FATAL(bench_hist_bucket_high(b - 1) < v);
    }
}

static void test_hist_small_exact(void)
{
    struct bench_hist *h = malloc(sizeof(*h));
    bench_hist_init(h);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 50), 0);
    CU_ASSERT_EQUAL(bench_hist_mean(h), 0.0);
    for (uint64_t v = 1; v <= 200; v++)
        bench_hist_record(h, v);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 50), 100);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 90), 180);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 99), 198);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 99.9), 200);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 100), 200);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 0.1), 1);
    CU_ASSERT_DOUBLE_EQUAL(bench_hist_mean(h), 100.5, 1e-9);
    CU_ASSERT_EQUAL(h->min, 1);
    CU_ASSERT_EQUAL(h->max, 200);
    free(h);
}

static void test_hist_constant_clamped(void)
{
    struct bench_hist *h = malloc(sizeof(*h));
    bench_hist_init(h);
    for (int i = 0; i < 1000; i++)
        bench_hist_record(h, 123456789);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 50), 123456789);
    CU_ASSERT_EQUAL(bench_hist_percentile(h, 99.9), 123456789);
    CU_ASSERT_EQUAL(h->count, 1000);
    free(h);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Against exact percentiles of a sorted copy: never below, at most 1/128 above. */
static void test_hist_vs_sorted_and_merge(void)
{
    enum { N = 200000 };
    uint64_t *vals = malloc(N * sizeof(*vals));
    struct bench_hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)), *all = malloc(sizeof(*all));
    bench_hist_init(a);
    bench_hist_init(b);
    bench_hist_init(all);
    uint64_t x = 42;
    for (int i = 0; i < N; i++) {
        /* a long tail: 20 us .. ~80 ms */
        uint64_t v = 20000 + (test_rng(&x) % 1000000) * (1 + test_rng(&x) % 80) / 1;
        vals[i] = v;
        bench_hist_record(i % 2 ? a : b, v);
        bench_hist_record(all, v);
    }
    bench_hist_merge(a, b);
    CU_ASSERT_EQUAL(memcmp(a->buckets, all->buckets, sizeof(a->buckets)), 0);
    CU_ASSERT_EQUAL(a->count, N);
    CU_ASSERT_EQUAL(a->min, all->min);
    CU_ASSERT_EQUAL(a->max, all->max);
    qsort(vals, N, sizeof(*vals), cmp_u64);
    const double pcts[] = {1, 50, 90, 99, 99.9, 100};
    for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++) {
        uint64_t exact = vals[(size_t)((pcts[i] / 100.0) * N + 0.999999) - 1];
        uint64_t got = bench_hist_percentile(a, pcts[i]);
        CU_ASSERT(got >= exact);
        CU_ASSERT(got - exact <= exact / 128);
    }
    free(vals);
    free(a);
    free(b);
    free(all);
}

/* ---- options -------------------------------------------------------------------------- */

static int parse(struct bench_opts *o, char *errmsg, const char *const *args)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "slotbench";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    return bench_opts_parse(o, argc, argv, errmsg, 256);
}

#define PARSE(...) parse(&o, errmsg, (const char *const[]){__VA_ARGS__, NULL})

static void test_opts_defaults_and_values(void)
{
    struct bench_opts o;
    char errmsg[256];
    CU_ASSERT_EQUAL(parse(&o, errmsg, (const char *const[]){NULL}), BENCH_OK);
    CU_ASSERT_EQUAL(o.target, BENCH_TARGET_SLOTD);
    CU_ASSERT_EQUAL(o.op, BENCH_OP_PUT);
    CU_ASSERT_EQUAL(o.key_size, 64);
    CU_ASSERT_EQUAL(o.value_size, 256);
    CU_ASSERT_EQUAL(o.deadline_ms, 5000);
    CU_ASSERT_DOUBLE_EQUAL(o.duration_s, 10.0, 0);
    CU_ASSERT_EQUAL(o.endpoint_count, 1);
    CU_ASSERT_STRING_EQUAL(o.endpoints[0], "127.0.0.1:7700");

    CU_ASSERT_EQUAL(PARSE("--target", "etcd", "--op=mixed", "--read-op", "get-local",
                          "--read-ratio", "0.9", "--concurrency", "256", "--connections=4",
                          "--threads", "2", "--keys", "1000", "--key-size", "16", "--value-size",
                          "0", "--duration", "2.5", "--ops", "12345", "--warmup", "1", "--seed",
                          "99", "--populate", "--deadline-ms", "100", "--json", "--endpoints",
                          "10.0.0.1:2379,localhost:2380"),
                    BENCH_OK);
    CU_ASSERT_EQUAL(o.target, BENCH_TARGET_ETCD);
    CU_ASSERT_EQUAL(o.op, BENCH_OP_MIXED);
    CU_ASSERT_EQUAL(o.read_op, BENCH_OP_GET_LOCAL);
    CU_ASSERT_DOUBLE_EQUAL(o.read_ratio, 0.9, 1e-12);
    CU_ASSERT_EQUAL(o.concurrency, 256);
    CU_ASSERT_EQUAL(o.connections, 4);
    CU_ASSERT_EQUAL(o.threads, 2);
    CU_ASSERT_EQUAL(o.keys, 1000);
    CU_ASSERT_EQUAL(o.key_size, 16);
    CU_ASSERT_EQUAL(o.value_size, 0);
    CU_ASSERT_DOUBLE_EQUAL(o.duration_s, 2.5, 0);
    CU_ASSERT_EQUAL(o.ops, 12345);
    CU_ASSERT_DOUBLE_EQUAL(o.warmup_s, 1.0, 0);
    CU_ASSERT_EQUAL(o.seed, 99);
    CU_ASSERT(o.populate && o.json);
    CU_ASSERT_EQUAL(o.deadline_ms, 100);
    CU_ASSERT_EQUAL(o.endpoint_count, 2);
    CU_ASSERT_STRING_EQUAL(o.endpoints[1], "localhost:2380");

    CU_ASSERT_EQUAL(PARSE("--target", "etcd"), BENCH_OK);
    CU_ASSERT_STRING_EQUAL(o.endpoints[0], "127.0.0.1:2379");
    CU_ASSERT_EQUAL(PARSE("--op", "get-linearizable"), BENCH_OK);
    CU_ASSERT_EQUAL(o.op, BENCH_OP_GET);
    CU_ASSERT_FALSE(o.route_aware);
    CU_ASSERT_EQUAL(PARSE("--route-aware", "--endpoints", "127.0.0.1:1,127.0.0.1:2"), BENCH_OK);
    CU_ASSERT(o.route_aware);
    CU_ASSERT_FALSE(o.stream);
    CU_ASSERT_EQUAL(PARSE("--stream", "--op", "put", "--route-aware"), BENCH_OK);
    CU_ASSERT(o.stream);
    CU_ASSERT_EQUAL(PARSE("--help"), BENCH_OK);
    CU_ASSERT(o.help);
    /* the smallest key that holds 'key-' + 6 digits */
    CU_ASSERT_EQUAL(PARSE("--keys", "1000000", "--key-size", "10"), BENCH_OK);
    CU_ASSERT_PTR_NULL(o.tls.ca_file);
    CU_ASSERT_PTR_NULL(o.tls_pem); /* main() loads the files; the parser never does */
    CU_ASSERT_EQUAL(PARSE("--tls-ca", "ca.pem", "--tls-cert=c.pem", "--tls-key", "c.key",
                          "--tls-server-name", "localhost"),
                    BENCH_OK);
    CU_ASSERT_STRING_EQUAL(o.tls.ca_file, "ca.pem");
    CU_ASSERT_STRING_EQUAL(o.tls.cert_file, "c.pem");
    CU_ASSERT_STRING_EQUAL(o.tls.key_file, "c.key");
    CU_ASSERT_STRING_EQUAL(o.tls.server_name, "localhost");
    CU_ASSERT_PTR_NULL(o.tls_pem);
    CU_ASSERT_EQUAL(PARSE("--op", "put"), BENCH_OK);
    CU_ASSERT_EQUAL(o.watchers, 0);
    CU_ASSERT_EQUAL(PARSE("--watchers", "1000"), BENCH_OK);
    CU_ASSERT_EQUAL(o.watchers, 1000);
    CU_ASSERT_EQUAL(PARSE("--target", "etcd", "--watchers=100"), BENCH_OK);
    CU_ASSERT_EQUAL(o.watchers, 100);
    CU_ASSERT_EQUAL(PARSE("--watchers", "0"), BENCH_OK);
    CU_ASSERT_EQUAL(o.watchers, 0);
}

static void expect_usage(const char *const *args, const char *needle)
{
    struct bench_opts o;
    char errmsg[256] = "";
    CU_ASSERT_EQUAL(parse(&o, errmsg, args), BENCH_EUSAGE);
    if (!strstr(errmsg, needle)) {
        fprintf(stderr, "\nerrmsg '%s' lacks '%s'\n", errmsg, needle);
        CU_FAIL("usage message");
    }
}

#define EXPECT_USAGE(needle, ...) expect_usage((const char *const[]){__VA_ARGS__, NULL}, needle)

static void test_opts_errors(void)
{
    EXPECT_USAGE("unknown option '--bogus'", "--bogus");
    EXPECT_USAGE("unexpected argument 'put'", "put");
    EXPECT_USAGE("--concurrency needs a value", "--concurrency");
    EXPECT_USAGE("--concurrency: '0' is not an integer in 1..10000", "--concurrency", "0");
    EXPECT_USAGE("--concurrency: '10001'", "--concurrency", "10001");
    EXPECT_USAGE("--keys: '-5'", "--keys", "-5");
    EXPECT_USAGE("--keys: '12x'", "--keys", "12x");
    EXPECT_USAGE("--read-ratio: '1.5' is not a number in 0..1", "--read-ratio", "1.5");
    EXPECT_USAGE("--duration: 'nan'", "--duration", "nan");
    EXPECT_USAGE("--duration: '0'", "--duration", "0");
    EXPECT_USAGE("--value-size: '1048577'", "--value-size", "1048577");
    EXPECT_USAGE("--target: 'redis' is not slotd, etcd or echo", "--target", "redis");
    EXPECT_USAGE("--route-aware: slotd only (the echo target", "--target", "echo", "--route-aware");
    EXPECT_USAGE("--op: 'scan'", "--op", "scan");
    EXPECT_USAGE("--read-op: 'put'", "--read-op", "put");
    EXPECT_USAGE("--json takes no value", "--json=1");
    EXPECT_USAGE("need >= 11", "--keys", "1000001", "--key-size", "10");
    EXPECT_USAGE("etcd has no leader-local read", "--target", "etcd", "--op", "get-leader-local");
    EXPECT_USAGE("etcd has no leader-local read", "--target", "etcd", "--op", "mixed", "--read-op",
                 "get-leader-local");
    EXPECT_USAGE("--route-aware: slotd only", "--target", "etcd", "--route-aware");
    EXPECT_USAGE("--route-aware takes no value", "--route-aware=1");
    EXPECT_USAGE("--stream: slotd only", "--target", "etcd", "--stream");
    EXPECT_USAGE("--stream: slotd only", "--target", "echo", "--stream");
    EXPECT_USAGE("--stream: --op put only (ProposeStream carries writes; --op get reads)",
                 "--stream", "--op", "get");
    EXPECT_USAGE("--stream: --op put only", "--stream", "--op", "mixed");
    EXPECT_USAGE("--stream takes no value", "--stream=1");
    EXPECT_USAGE("--watchers: '1001' is not an integer in 0..1000", "--watchers", "1001");
    EXPECT_USAGE("--watchers: '-1' is not an integer in 0..1000", "--watchers", "-1");
    EXPECT_USAGE("--watchers needs a value", "--watchers");
    EXPECT_USAGE("--watchers: slotd or etcd only (the echo target has no Watch)", "--target",
                 "echo", "--watchers", "1");
    EXPECT_USAGE("more threads than --concurrency 1", "--threads", "2", "--concurrency", "1");
    EXPECT_USAGE("each endpoint is host:port", "--endpoints", "a:1,,b:2");
    EXPECT_USAGE("each endpoint is host:port", "--endpoints", "nocolon");
    EXPECT_USAGE("character 0x22", "--endpoints", "a\":1");
    EXPECT_USAGE("--tls-cert and --tls-key: give both or neither", "--tls-cert", "c.pem");
    EXPECT_USAGE("--tls-cert and --tls-key: give both or neither", "--tls-ca", "ca.pem",
                 "--tls-key", "c.key");
    EXPECT_USAGE("--tls-server-name: needs --tls-ca or --tls-cert", "--tls-server-name", "x");
    EXPECT_USAGE("--tls-ca: empty", "--tls-ca=");
    EXPECT_USAGE("--tls-key needs a value", "--tls-key");
    EXPECT_USAGE("at most 16 endpoints", "--endpoints",
                 "a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1,a:1");
}

/* ---- wire ----------------------------------------------------------------------------- */

static void test_wire_keys_and_methods(void)
{
    char key[65];
    bench_wire_key_format(key, 64, 123);
    CU_ASSERT_EQUAL(strlen(key), 64);
    CU_ASSERT_EQUAL(strncmp(key, "key-000", 7), 0);
    CU_ASSERT_STRING_EQUAL(key + 61, "123");
    bench_wire_key_format(key, 8, 9999);
    CU_ASSERT_STRING_EQUAL(key, "key-9999");
    CU_ASSERT_STRING_EQUAL(bench_wire_method(BENCH_TARGET_SLOTD, BENCH_REQ_PUT),
                           "/slotd.v1.Metadata/Propose");
    CU_ASSERT_STRING_EQUAL(bench_wire_method(BENCH_TARGET_SLOTD, BENCH_REQ_GET_LOCAL),
                           "/slotd.v1.Metadata/Read");
    CU_ASSERT_STRING_EQUAL(bench_wire_method(BENCH_TARGET_ETCD, BENCH_REQ_PUT),
                           "/etcdserverpb.KV/Put");
    CU_ASSERT_STRING_EQUAL(bench_wire_method(BENCH_TARGET_ETCD, BENCH_REQ_GET_LINEARIZABLE),
                           "/etcdserverpb.KV/Range");
    CU_ASSERT_STRING_EQUAL(bench_wire_method(BENCH_TARGET_ECHO, BENCH_REQ_PUT),
                           "/slotd.bench.v1.Echo/Echo");
    CU_ASSERT_STRING_EQUAL(bench_wire_method(BENCH_TARGET_ECHO, BENCH_REQ_GET_LOCAL),
                           "/slotd.bench.v1.Echo/Echo");
    CU_ASSERT_STRING_EQUAL(bench_target_name(BENCH_TARGET_ECHO), "echo");
}

/* The echo target sends slotd's requests and accepts only the same request back. */
static void test_wire_echo(void)
{
    uint8_t buf[512], other[512];
    const uint8_t key[] = "key-0001";
    const uint8_t value[] = "vvvv";
    bool found = false;
    for (int k = BENCH_REQ_PUT; k <= BENCH_REQ_GET_LOCAL; k++) {
        size_t n = bench_wire_request_encode(BENCH_TARGET_ECHO, (enum bench_req)k, false, key, 8,
                                             value, 4, buf, sizeof(buf));
        size_t m = bench_wire_request_encode(BENCH_TARGET_SLOTD, (enum bench_req)k, false, key, 8,
                                             value, 4, other, sizeof(other));
        CU_ASSERT_EQUAL(n, m);
        CU_ASSERT_EQUAL(memcmp(buf, other, n), 0);
        found = false;
        CU_ASSERT_EQUAL(
            bench_wire_response_check(BENCH_TARGET_ECHO, (enum bench_req)k, buf, n, &found),
            BENCH_OK);
        CU_ASSERT_TRUE(found);
        /* an empty answer is not the request */
        CU_ASSERT_EQUAL(
            bench_wire_response_check(BENCH_TARGET_ECHO, (enum bench_req)k, buf, 0, &found),
            BENCH_EMALFORMED);
    }
    /* a read request answered to a put is not its echo */
    size_t n = bench_wire_request_encode(BENCH_TARGET_ECHO, BENCH_REQ_GET_LOCAL, false, key, 8,
                                         NULL, 0, buf, sizeof(buf));
    CU_ASSERT_EQUAL(bench_wire_response_check(BENCH_TARGET_ECHO, BENCH_REQ_PUT, buf, n, &found),
                    BENCH_EMALFORMED);
}

static void test_wire_slotd_requests(void)
{
    uint8_t buf[512];
    const uint8_t key[] = "key-0042", value[] = "vvvv";
    size_t n = bench_wire_request_encode(BENCH_TARGET_SLOTD, BENCH_REQ_PUT, false, key, 8, value, 4,
                                         NULL, 0);
    CU_ASSERT(n > 12 && n < sizeof(buf));
    CU_ASSERT_EQUAL(bench_wire_request_encode(BENCH_TARGET_SLOTD, BENCH_REQ_PUT, false, key, 8,
                                              value, 4, buf, sizeof(buf)),
                    n);
    Slotd__V1__ProposeRequest *p = slotd__v1__propose_request__unpack(NULL, n, buf);
    CU_ASSERT_FATAL(p != NULL);
    CU_ASSERT_EQUAL(p->command_case, SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT);
    CU_ASSERT_EQUAL(p->put->key.len, 8);
    CU_ASSERT_EQUAL(memcmp(p->put->key.data, key, 8), 0);
    CU_ASSERT_EQUAL(p->put->value.len, 4);
    CU_ASSERT_FALSE(p->no_forward);
    slotd__v1__propose_request__free_unpacked(p, NULL);
    size_t n_direct = bench_wire_request_encode(BENCH_TARGET_SLOTD, BENCH_REQ_PUT, true, key, 8,
                                                value, 4, buf, sizeof(buf));
    CU_ASSERT_EQUAL(n_direct, n + 2); /* field 2, varint 1 */
    p = slotd__v1__propose_request__unpack(NULL, n_direct, buf);
    CU_ASSERT_FATAL(p != NULL);
    CU_ASSERT_TRUE(p->no_forward);
    CU_ASSERT_EQUAL(p->put->key.len, 8);
    slotd__v1__propose_request__free_unpacked(p, NULL);

    const enum bench_req reqs[] = {BENCH_REQ_GET_LINEARIZABLE, BENCH_REQ_GET_LEADER_LOCAL,
                                   BENCH_REQ_GET_LOCAL};
    const Slotd__V1__Consistency want[] = {SLOTD__V1__CONSISTENCY__CONSISTENCY_LINEARIZABLE,
                                           SLOTD__V1__CONSISTENCY__CONSISTENCY_LEADER_LOCAL,
                                           SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL};
    for (int i = 0; i < 3; i++) {
        n = bench_wire_request_encode(BENCH_TARGET_SLOTD, reqs[i], false, key, 8, value, 4, buf,
                                      sizeof(buf));
        Slotd__V1__ReadRequest *r = slotd__v1__read_request__unpack(NULL, n, buf);
        CU_ASSERT_FATAL(r != NULL);
        CU_ASSERT_EQUAL(r->consistency, want[i]);
        CU_ASSERT_EQUAL(r->query_case, SLOTD__V1__READ_REQUEST__QUERY_GET);
        CU_ASSERT_EQUAL(r->get->key.len, 8);
        CU_ASSERT_FALSE(r->no_forward);
        slotd__v1__read_request__free_unpacked(r, NULL);
        n = bench_wire_request_encode(BENCH_TARGET_SLOTD, reqs[i], true, key, 8, value, 4, buf,
                                      sizeof(buf));
        r = slotd__v1__read_request__unpack(NULL, n, buf);
        CU_ASSERT_FATAL(r != NULL);
        CU_ASSERT_TRUE(r->no_forward);
        CU_ASSERT_EQUAL(r->consistency, want[i]);
        slotd__v1__read_request__free_unpacked(r, NULL);
    }
}

/* --stream: one ProposeStreamRequest.items entry per put; entries concatenated are the
 * message; the size query matches; the id and no_forward come back. */
static void test_wire_stream_items(void)
{
    const uint8_t value[3] = {'a', 'b', 'c'};
    uint8_t buf[512];
    size_t used = 0;
    uint64_t ids[3] = {0, 300, UINT64_MAX};
    for (int i = 0; i < 3; i++) {
        size_t need = bench_stream_item_encode(ids[i], i == 1, (const uint8_t *)"key-7", 5, value,
                                               3, NULL, 0);
        CU_ASSERT_EQUAL(bench_stream_item_encode(ids[i], i == 1, (const uint8_t *)"key-7", 5, value,
                                                 3, buf + used, sizeof(buf) - used),
                        need);
        used += need;
    }
    Slotd__V1__ProposeStreamRequest *m = slotd__v1__propose_stream_request__unpack(NULL, used, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(m->n_items, 3);
    for (int i = 0; i < 3; i++) {
        const Slotd__V1__ProposeRequest *r = m->items[i]->request;
        CU_ASSERT_EQUAL(m->items[i]->id, ids[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        CU_ASSERT_EQUAL(r->no_forward, i == 1);
        CU_ASSERT_EQUAL(r->command_case, SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT);
        CU_ASSERT_EQUAL(r->put->key.len, 5);
        CU_ASSERT_EQUAL(memcmp(r->put->value.data, "abc", 3), 0);
        CU_ASSERT_EQUAL(r->request_id.len, 0);
    }
    slotd__v1__propose_stream_request__free_unpacked(m, NULL);
    /* too small a buffer: the size, nothing written */
    memset(buf, 0x55, sizeof(buf));
    CU_ASSERT_EQUAL(
        bench_stream_item_encode(1, false, (const uint8_t *)"key-7", 5, value, 3, buf, 4),
        bench_stream_item_encode(1, false, (const uint8_t *)"key-7", 5, value, 3, NULL, 0));
    CU_ASSERT_EQUAL(buf[0], 0x55);
}

static void test_wire_etcd_requests(void)
{
    uint8_t buf[512];
    const uint8_t key[] = "key-0042", value[] = "vvvv";
    size_t n = bench_wire_request_encode(BENCH_TARGET_ETCD, BENCH_REQ_PUT, false, key, 8, value, 4,
                                         buf, sizeof(buf));
    /* PutRequest{key=1 (tag 0x0a), value=2 (tag 0x12)}: etcd's field numbers on the wire */
    const uint8_t want[] = {0x0a, 8,   'k',  'e', 'y', '-', '0', '0',
                            '4',  '2', 0x12, 4,   'v', 'v', 'v', 'v'};
    CU_ASSERT_EQUAL(n, sizeof(want));
    CU_ASSERT_EQUAL(memcmp(buf, want, sizeof(want)), 0);
    n = bench_wire_request_encode(BENCH_TARGET_ETCD, BENCH_REQ_GET_LOCAL, false, key, 8, value, 4,
                                  buf, sizeof(buf));
    /* RangeRequest{key=1, serializable=7 (tag 0x38) = 1} */
    CU_ASSERT_EQUAL(n, 12);
    CU_ASSERT_EQUAL(buf[10], 0x38);
    CU_ASSERT_EQUAL(buf[11], 1);
    n = bench_wire_request_encode(BENCH_TARGET_ETCD, BENCH_REQ_GET_LINEARIZABLE, false, key, 8,
                                  value, 4, buf, sizeof(buf));
    CU_ASSERT_EQUAL(n, 10); /* serializable=false is not on the wire */
    CU_ASSERT_EQUAL(bench_wire_request_encode(BENCH_TARGET_ETCD, BENCH_REQ_PUT, true, key, 8, value,
                                              4, NULL, 0),
                    sizeof(want)); /* etcd has no no_forward */
}

static void test_wire_responses(void)
{
    uint8_t buf[256];
    bool found = false;
    Slotd__V1__GetResult get = SLOTD__V1__GET_RESULT__INIT;
    Slotd__V1__ReadResponse rr = SLOTD__V1__READ_RESPONSE__INIT;
    rr.result_case = SLOTD__V1__READ_RESPONSE__RESULT_GET;
    rr.get = &get;
    get.found = 1;
    size_t n = slotd__v1__read_response__pack(&rr, buf);
    CU_ASSERT_EQUAL(
        bench_wire_response_check(BENCH_TARGET_SLOTD, BENCH_REQ_GET_LOCAL, buf, n, &found),
        BENCH_OK);
    CU_ASSERT_TRUE(found);
    get.found = 0;
    n = slotd__v1__read_response__pack(&rr, buf);
    CU_ASSERT_EQUAL(
        bench_wire_response_check(BENCH_TARGET_SLOTD, BENCH_REQ_GET_LOCAL, buf, n, &found),
        BENCH_OK);
    CU_ASSERT_FALSE(found);
    /* an empty ProposeResponse has no put result: malformed */
    CU_ASSERT_EQUAL(bench_wire_response_check(BENCH_TARGET_SLOTD, BENCH_REQ_PUT, buf, 0, &found),
                    BENCH_EMALFORMED);
    const uint8_t junk[] = {0xff, 0xff, 0xff};
    CU_ASSERT_EQUAL(
        bench_wire_response_check(BENCH_TARGET_SLOTD, BENCH_REQ_GET_LINEARIZABLE, junk, 3, &found),
        BENCH_EMALFORMED);
    CU_ASSERT_EQUAL(bench_wire_response_check(BENCH_TARGET_ETCD, BENCH_REQ_PUT, junk, 3, &found),
                    BENCH_EMALFORMED);
    CU_ASSERT_EQUAL(
        bench_wire_response_check(BENCH_TARGET_ETCD, BENCH_REQ_GET_LOCAL, buf, 0, &found),
        BENCH_OK);
    CU_ASSERT_FALSE(found); /* no kvs */
}

static void test_wire_watch_requests(void)
{
    uint8_t buf[64];
    const uint8_t *prefix = (const uint8_t *)BENCH_WIRE_WATCH_PREFIX;
    CU_ASSERT_STRING_EQUAL(bench_wire_watch_method(BENCH_TARGET_SLOTD), "/slotd.v1.Metadata/Watch");
    CU_ASSERT_STRING_EQUAL(bench_wire_watch_method(BENCH_TARGET_ETCD), "/etcdserverpb.Watch/Watch");
    /* slotd WatchRequest{prefix = 2 (tag 0x12) "key-"} */
    size_t n = bench_wire_watch_request_encode(BENCH_TARGET_SLOTD, prefix, 4, buf, sizeof(buf));
    const uint8_t want_slotd[] = {0x12, 4, 'k', 'e', 'y', '-'};
    CU_ASSERT_EQUAL(n, sizeof(want_slotd));
    CU_ASSERT_EQUAL(memcmp(buf, want_slotd, sizeof(want_slotd)), 0);
    /* etcd WatchRequest{create_request = 1 {key = 1 "key-", range_end = 2 "key."}} */
    n = bench_wire_watch_request_encode(BENCH_TARGET_ETCD, prefix, 4, buf, sizeof(buf));
    const uint8_t want_etcd[] = {0x0a, 12,   0x0a, 4,   'k', 'e', 'y',
                                 '-',  0x12, 4,    'k', 'e', 'y', '.'};
    CU_ASSERT_EQUAL(n, sizeof(want_etcd));
    CU_ASSERT_EQUAL(memcmp(buf, want_etcd, sizeof(want_etcd)), 0);
    CU_ASSERT_EQUAL(bench_wire_watch_request_encode(BENCH_TARGET_ETCD, prefix, 4, NULL, 0), n);
}

static void test_wire_watch_decode(void)
{
    uint8_t buf[1024];
    struct bench_watch_msg m;
    /* slotd: 3 events with keys, positions; then created; then progress */
    Slotd__V1__WatchEvent ev[3];
    Slotd__V1__WatchEvent *evp[3];
    for (int i = 0; i < 3; i++) {
        slotd__v1__watch_event__init(&ev[i]);
        ev[i].type = SLOTD__V1__WATCH_EVENT_TYPE__WATCH_EVENT_TYPE_PUT;
        ev[i].key.data = (uint8_t *)"key-1";
        ev[i].key.len = 5;
        ev[i].value.data = (uint8_t *)"value";
        ev[i].value.len = 5;
        ev[i].version = 10 + i;
        ev[i].group_id = 3;
        ev[i].index = 300 + i;
        evp[i] = &ev[i];
    }
    Slotd__V1__WatchPosition pos = SLOTD__V1__WATCH_POSITION__INIT;
    Slotd__V1__WatchPosition *posp[1] = {&pos};
    pos.group_id = 3;
    pos.index = 302;
    Slotd__V1__WatchResponse sr = SLOTD__V1__WATCH_RESPONSE__INIT;
    sr.n_events = 3;
    sr.events = evp;
    sr.n_positions = 1;
    sr.positions = posp;
    size_t n = slotd__v1__watch_response__pack(&sr, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_SLOTD, buf, n, &m), BENCH_OK);
    CU_ASSERT_EQUAL(m.events, 3);
    CU_ASSERT(!m.created && !m.progress && !m.canceled);
    /* a truncated message is malformed and counts nothing */
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_SLOTD, buf, n - 1, &m), BENCH_EMALFORMED);
    CU_ASSERT_EQUAL(m.events, 0);
    /* an event without its key is malformed */
    ev[1].key.len = 0;
    n = slotd__v1__watch_response__pack(&sr, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_SLOTD, buf, n, &m), BENCH_EMALFORMED);
    CU_ASSERT_EQUAL(m.events, 0);
    sr.n_events = 0;
    sr.created = 1;
    n = slotd__v1__watch_response__pack(&sr, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_SLOTD, buf, n, &m), BENCH_OK);
    CU_ASSERT(m.created && m.events == 0 && !m.progress);
    sr.created = 0;
    sr.progress = 1;
    n = slotd__v1__watch_response__pack(&sr, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_SLOTD, buf, n, &m), BENCH_OK);
    CU_ASSERT(m.progress && m.events == 0);

    /* etcd: events at field 11, key inside kv; prev_kv and the header are skipped */
    Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT, prev = ETCDSERVERPB__KEY_VALUE__INIT;
    kv.key.data = (uint8_t *)"key-2";
    kv.key.len = 5;
    kv.value.data = (uint8_t *)"v";
    kv.value.len = 1;
    kv.mod_revision = 99;
    Etcdserverpb__Event ee[2];
    Etcdserverpb__Event *eep[2];
    for (int i = 0; i < 2; i++) {
        etcdserverpb__event__init(&ee[i]);
        ee[i].kv = &kv;
        ee[i].prev_kv = &prev;
        eep[i] = &ee[i];
    }
    Etcdserverpb__ResponseHeader header = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    header.revision = 99;
    header.cluster_id = 0xffffffffffffull;
    Etcdserverpb__WatchResponse er = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    er.header = &header;
    er.watch_id = 1;
    er.n_events = 2;
    er.events = eep;
    n = etcdserverpb__watch_response__pack(&er, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_ETCD, buf, n, &m), BENCH_OK);
    CU_ASSERT_EQUAL(m.events, 2);
    CU_ASSERT(!m.created && !m.progress && !m.canceled);
    /* slotd's reading of the same bytes: field 1 is a header, not an event */
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_SLOTD, buf, n, &m), BENCH_EMALFORMED);
    ee[1].kv = NULL; /* an event without kv has no key */
    n = etcdserverpb__watch_response__pack(&er, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_ETCD, buf, n, &m), BENCH_EMALFORMED);
    er.n_events = 0;
    er.created = 1;
    n = etcdserverpb__watch_response__pack(&er, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_ETCD, buf, n, &m), BENCH_OK);
    CU_ASSERT(m.created && !m.progress && m.events == 0);
    er.created = 0;
    n = etcdserverpb__watch_response__pack(&er, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_ETCD, buf, n, &m), BENCH_OK);
    CU_ASSERT(m.progress && m.events == 0); /* header only */
    er.canceled = 1;
    er.compact_revision = 5;
    er.cancel_reason = "mvcc: required revision has been compacted";
    n = etcdserverpb__watch_response__pack(&er, buf);
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_ETCD, buf, n, &m), BENCH_OK);
    CU_ASSERT(m.canceled && !m.progress);
    CU_ASSERT_STRING_EQUAL(m.cancel_reason, "mvcc: required revision has been compacted");
    CU_ASSERT_EQUAL(bench_wire_watch_decode(BENCH_TARGET_ETCD, buf, 0, &m), BENCH_OK);
    CU_ASSERT(m.progress && m.events == 0); /* an empty message decodes as all defaults */
}

static size_t pack_status(uint8_t *buf, const char *type_url, int code)
{
    uint8_t detail_buf[64];
    Slotd__V1__ErrorDetail detail = SLOTD__V1__ERROR_DETAIL__INIT;
    detail.code = code;
    Google__Protobuf__Any other = GOOGLE__PROTOBUF__ANY__INIT;
    other.type_url = "type.googleapis.com/google.rpc.RetryInfo";
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
    any.type_url = (char *)type_url;
    any.value.data = detail_buf;
    any.value.len = slotd__v1__error_detail__pack(&detail, detail_buf);
    Google__Protobuf__Any *details[2] = {&other, &any};
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    st.code = 9;
    st.n_details = 2;
    st.details = details;
    return google__rpc__status__pack(&st, buf);
}

static void test_wire_error_detail(void)
{
    uint8_t buf[256];
    unsigned code = 99;
    size_t n = pack_status(buf, "type.googleapis.com/slotd.v1.ErrorDetail",
                           SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER);
    CU_ASSERT_EQUAL(bench_wire_error_detail(buf, n, &code), BENCH_OK);
    CU_ASSERT_EQUAL(code, SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER);
    CU_ASSERT_STRING_EQUAL(bench_wire_error_code_name(code), "NOT_LEADER");
    n = pack_status(buf, "type.googleapis.com/slotd.v1.ErrorDetail", 1000);
    CU_ASSERT_EQUAL(bench_wire_error_detail(buf, n, &code), BENCH_OK);
    CU_ASSERT_EQUAL(code, BENCH_DETAIL_OTHER);
    CU_ASSERT_STRING_EQUAL(bench_wire_error_code_name(code), "OTHER");
    n = pack_status(buf, "type.googleapis.com/other.Detail", 2);
    CU_ASSERT_EQUAL(bench_wire_error_detail(buf, n, &code), BENCH_EMALFORMED);
    const uint8_t junk[] = {0xff, 0xff, 0xff};
    CU_ASSERT_EQUAL(bench_wire_error_detail(junk, 3, &code), BENCH_EMALFORMED);
    CU_ASSERT_STRING_EQUAL(bench_wire_error_code_name(SLOTD__V1__ERROR_CODE__ERROR_CODE_MALFORMED),
                           "MALFORMED");
}

/* ---- route ---------------------------------------------------------------------------- */

static void test_route_hash_slot(void)
{
    /* slotbench's keys hash with libslotd's slotd_hash_slot() (zlib crc32 % 256) */
    CU_ASSERT_EQUAL(slotd_hash_slot("123456789", 9), 0xCBF43926u % 256); /* CRC-32 check value */
    CU_ASSERT_EQUAL(slotd_hash_slot("a", 1), 0xE8B7BE43u % 256);
    /* zlib.crc32(b"key-" + b"0" * 57 + b"123") % 256 == 140: slotbench's 64-byte key 123 */
    char key[65];
    bench_wire_key_format(key, 64, 123);
    CU_ASSERT_EQUAL(slotd_hash_slot(key, 64), 140);
    for (uint64_t i = 0; i < 1000; i++) {
        bench_wire_key_format(key, 64, i);
        CU_ASSERT_FATAL(slotd_hash_slot(key, 64) < BENCH_HASH_SLOTS);
    }
}

/* A RouteSnapshotResponse: hash slot s belongs to group 1 + s % 4. Group 1 is led by node 11,
 * group 2 by node 12, group 3 by node 13 (which has no address), group 4 has no leader.
 * table_len != 256 builds a malformed table. */
static size_t route_pack(uint8_t *buf, size_t table_len)
{
    uint32_t table[BENCH_HASH_SLOTS + 1];
    for (unsigned s = 0; s < table_len; s++)
        table[s] = 1 + s % 4;
    Slotd__V1__GroupRoute g[4];
    Slotd__V1__GroupRoute *groups[4];
    const uint64_t leaders[4] = {11, 12, 13, 0};
    for (int i = 0; i < 4; i++) {
        slotd__v1__group_route__init(&g[i]);
        g[i].group_id = (uint32_t)(4 - i); /* listed in reverse: lookup is by id, not position */
        g[i].leader = leaders[3 - i];
        groups[i] = &g[i];
    }
    Slotd__V1__NodeInfo n[3];
    Slotd__V1__NodeInfo *nodes[3];
    const char *addresses[3] = {"10.0.0.1:7700", "10.0.0.2:7700", ""};
    for (int i = 0; i < 3; i++) {
        slotd__v1__node_info__init(&n[i]);
        n[i].node_id = (uint64_t)(11 + i);
        n[i].address = (char *)addresses[i];
        nodes[i] = &n[i];
    }
    Slotd__V1__RouteSnapshotResponse r = SLOTD__V1__ROUTE_SNAPSHOT_RESPONSE__INIT;
    r.route_revision = 42;
    r.n_hash_slot_table = table_len;
    r.hash_slot_table = table;
    r.n_groups = 4;
    r.groups = groups;
    r.n_nodes = 3;
    r.nodes = nodes;
    return slotd__v1__route_snapshot_response__pack(&r, buf);
}

static void test_route_leader_lookup(void)
{
    uint8_t buf[2048];
    char errmsg[256] = "";
    struct bench_route *r = malloc(sizeof(*r));
    size_t n = route_pack(buf, BENCH_HASH_SLOTS);
    CU_ASSERT_FATAL(n < sizeof(buf));
    CU_ASSERT_EQUAL_FATAL(bench_route_decode(r, buf, n, errmsg, sizeof(errmsg)), BENCH_OK);
    CU_ASSERT_EQUAL(r->revision, 42);
    CU_ASSERT_EQUAL(r->address_count, 2);
    unsigned seen[4] = {0, 0, 0, 0};
    char key[65];
    for (uint64_t i = 0; i < 2000; i++) {
        bench_wire_key_format(key, 64, i);
        unsigned group = 1 + slotd_hash_slot(key, 64) % 4;
        const char *want = group == 1 ? "10.0.0.1:7700" : group == 2 ? "10.0.0.2:7700" : NULL;
        const char *got = bench_route_leader_address(r, key, 64);
        seen[group - 1]++;
        /* groups 3 and 4: a leader without an address, no leader */
        CU_ASSERT_FATAL(want ? got != NULL && strcmp(got, want) == 0 : got == NULL);
    }
    for (int g = 0; g < 4; g++)
        CU_ASSERT(seen[g] > 300); /* every group's case was exercised */
    /* "123456789" hashes to slot 0xCBF43926 % 256 = 0x26 = 38: group 3, no address */
    CU_ASSERT_PTR_NULL(bench_route_leader_address(r, "123456789", 9));
    CU_ASSERT_EQUAL(r->slot_leader[38], BENCH_ROUTE_NONE);
    CU_ASSERT_STRING_EQUAL(r->addresses[r->slot_leader[36]], "10.0.0.1:7700");
    CU_ASSERT_STRING_EQUAL(r->addresses[r->slot_leader[37]], "10.0.0.2:7700");
    CU_ASSERT_EQUAL(r->slot_leader[39], BENCH_ROUTE_NONE);
    free(r);
}

static void test_route_decode_errors(void)
{
    uint8_t buf[2048];
    char errmsg[256] = "";
    struct bench_route *r = malloc(sizeof(*r));
    size_t n = route_pack(buf, BENCH_HASH_SLOTS - 1);
    CU_ASSERT_EQUAL(bench_route_decode(r, buf, n, errmsg, sizeof(errmsg)), BENCH_EMALFORMED);
    CU_ASSERT_PTR_NOT_NULL(strstr(errmsg, "hash_slot_table has 255 entries, expected 256"));
    CU_ASSERT_PTR_NULL(bench_route_leader_address(r, "123456789", 9));
    const uint8_t junk[] = {0xff, 0xff, 0xff};
    CU_ASSERT_EQUAL(bench_route_decode(r, junk, 3, errmsg, sizeof(errmsg)), BENCH_EMALFORMED);
    CU_ASSERT_PTR_NOT_NULL(strstr(errmsg, "do not decode"));

    /* 256 groups each led by its own node: more leader addresses than the bound */
    enum { G = BENCH_HASH_SLOTS };
    uint32_t table[G];
    Slotd__V1__GroupRoute *g = calloc(G, sizeof(*g));
    Slotd__V1__GroupRoute **groups = calloc(G, sizeof(*groups));
    Slotd__V1__NodeInfo *nodes_v = calloc(G, sizeof(*nodes_v));
    Slotd__V1__NodeInfo **nodes = calloc(G, sizeof(*nodes));
    char(*addr)[32] = calloc(G, sizeof(*addr));
    for (unsigned i = 0; i < G; i++) {
        table[i] = i + 1;
        slotd__v1__group_route__init(&g[i]);
        g[i].group_id = i + 1;
        g[i].leader = i + 1;
        groups[i] = &g[i];
        slotd__v1__node_info__init(&nodes_v[i]);
        nodes_v[i].node_id = i + 1;
        snprintf(addr[i], sizeof(addr[i]), "10.0.%u.%u:7700", i / 200, i % 200);
        nodes_v[i].address = addr[i];
        nodes[i] = &nodes_v[i];
    }
    Slotd__V1__RouteSnapshotResponse m = SLOTD__V1__ROUTE_SNAPSHOT_RESPONSE__INIT;
    m.n_hash_slot_table = G;
    m.hash_slot_table = table;
    m.n_groups = G;
    m.groups = groups;
    m.n_nodes = G;
    m.nodes = nodes;
    size_t big_len = slotd__v1__route_snapshot_response__get_packed_size(&m);
    uint8_t *big = malloc(big_len);
    slotd__v1__route_snapshot_response__pack(&m, big);
    CU_ASSERT_EQUAL(bench_route_decode(r, big, big_len, errmsg, sizeof(errmsg)), BENCH_EMALFORMED);
    CU_ASSERT_PTR_NOT_NULL(strstr(errmsg, "256 nodes, more than 64"));
    /* 64 distinct leaders fit */
    for (unsigned i = 0; i < G; i++)
        table[i] = 1 + i % BENCH_ROUTE_ADDRESSES_MAX;
    m.n_groups = BENCH_ROUTE_ADDRESSES_MAX;
    m.n_nodes = BENCH_ROUTE_ADDRESSES_MAX;
    big_len = slotd__v1__route_snapshot_response__pack(&m, big); /* smaller ids: fewer bytes */
    CU_ASSERT_EQUAL_FATAL(bench_route_decode(r, big, big_len, errmsg, sizeof(errmsg)), BENCH_OK);
    CU_ASSERT_EQUAL(r->address_count, BENCH_ROUTE_ADDRESSES_MAX);
    CU_ASSERT_STRING_EQUAL(r->addresses[r->slot_leader[65]], "10.0.0.1:7700");
    free(big);
    free(addr);
    free(nodes);
    free(nodes_v);
    free(groups);
    free(g);
    free(r);
}

/* ---- report --------------------------------------------------------------------------- */

static void test_report_json(void)
{
    struct bench_opts o;
    bench_opts_defaults(&o);
    strcpy(o.endpoints[0], "127.0.0.1:7700");
    o.endpoint_count = 1;
    struct bench_result *r = calloc(1, sizeof(*r));
    bench_hist_init(&r->run.latency_ns);
    for (uint64_t i = 1; i <= 100; i++)
        bench_hist_record(&r->run.latency_ns, i * 1000); /* 1..100 us */
    r->run.ok = 100;
    r->run.writes = 100;
    r->run.elapsed_s = 2.0;
    r->run.status[0] = 101;
    r->run.status[14] = 3;
    r->run.status[4] = 2;
    r->run.malformed = 1;
    r->run.errors = 6;
    r->run.error_detail[SLOTD__V1__ERROR_CODE__ERROR_CODE_QUEUE_FULL] = 3;
    r->run.cpu_s = 0.5;
    r->run.cpu_wall_s = 2.0;
    r->run.direct = 75;
    r->run.fallback = 25;
    r->run.streams_opened = 2;
    r->run.stream_messages_sent = 10;
    r->run.stream_items_sent = 105;
    r->run.stream_messages_received = 40;
    o.route_aware = true;
    o.stream = true;
    r->route_fetches = 3;
    r->route_fetch_failures = 1;
    strcpy(r->route_error, "RouteSnapshot from a: \"x\"\n");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bench_report_json(&o, r, f);
    fclose(f);
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    CU_ASSERT_FATAL(root != NULL);
    json_t *run = json_object_get(root, "run");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "target")), "slotd");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "op")), "put");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(run, "ops_per_s")), 50.0, 1e-9);
    json_t *lat = json_object_get(run, "latency_us");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(lat, "p50")), 50.0, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(lat, "p99")), 99.0, 1.0);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(lat, "max")), 100.0, 1e-9);
    json_t *errs = json_object_get(run, "errors");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(errs, "UNAVAILABLE")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(errs, "DEADLINE_EXCEEDED")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(errs, "MALFORMED_RESPONSE")), 1);
    CU_ASSERT_EQUAL(json_object_get(errs, "OK"), NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(run, "errors_total")), 6);
    CU_ASSERT_EQUAL(
        json_integer_value(json_object_get(json_object_get(run, "error_details"), "QUEUE_FULL")),
        3);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(run, "client_cpu_pct")), 25.0, 1e-9);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(run, "direct")), 75);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(run, "fallback")), 25);
    CU_ASSERT(json_is_true(json_object_get(root, "route_aware")));
    CU_ASSERT(json_is_true(json_object_get(root, "stream")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(run, "streams_opened")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(run, "stream_messages_sent")), 10);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(run, "stream_items_sent")), 105);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(run, "stream_messages_received")), 40);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "route_fetches")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "route_fetch_failures")), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "route_error")),
                           "RouteSnapshot from a: ?x??");
    json_decref(root);
    free(text);

    text = NULL;
    f = open_memstream(&text, &len);
    bench_report_text(&o, r, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "throughput:  50 ops/s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "UNAVAILABLE 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "p50 50 us"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "slotd codes: QUEUE_FULL 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "op put (ProposeStream)"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(text, "stream:      2 ProposeStream call(s), 105 items in 10 messages (10.5 per "
                     "message), 40 response messages"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text,
                                  "routing:     75 direct to the leader (75.0%), 25 round "
                                  "robin (leader unknown); route fetched 3 time(s), 1 failed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "route error: RouteSnapshot from a:"));
    free(text);
    /* without --route-aware and --stream: no routing and stream lines, both false */
    o.route_aware = false;
    o.stream = false;
    text = NULL;
    f = open_memstream(&text, &len);
    bench_report_text(&o, r, f);
    fclose(f);
    CU_ASSERT_PTR_NULL(strstr(text, "routing:"));
    CU_ASSERT_PTR_NULL(strstr(text, "stream:"));
    CU_ASSERT_PTR_NULL(strstr(text, "ProposeStream"));
    free(text);
    text = NULL;
    f = open_memstream(&text, &len);
    bench_report_json(&o, r, f);
    fclose(f);
    root = json_loads(text, 0, &jerr);
    CU_ASSERT_FATAL(root != NULL);
    CU_ASSERT(json_is_false(json_object_get(root, "route_aware")));
    CU_ASSERT(json_is_false(json_object_get(root, "stream")));
    CU_ASSERT_PTR_NULL(json_object_get(root, "route_fetches"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "watchers")), 0);
    CU_ASSERT_PTR_NULL(json_object_get(root, "watch"));
    json_decref(root);
    free(text);

    /* --watchers: the watch object and the text lines */
    o.watchers = 100;
    struct bench_watch_result *w = &r->watch;
    w->watchers = 100;
    w->created = 100;
    w->events = 50000;
    w->events_total = 60000;
    w->messages = 700;
    w->elapsed_s = 2.0;
    w->events_per_s = 25000.0;
    w->per_watcher_median = 250.0;
    w->per_watcher_min = 100.0;
    w->per_watcher_max = 300.0;
    w->ended_early = 3;
    w->ended_by_status[GRPC_STATUS_RESOURCE_EXHAUSTED] = 3;
    w->first_end_s = 1.25;
    strcpy(w->first_end_error, "RESOURCE_EXHAUSTED: watch: the client reads too slowly");
    text = NULL;
    f = open_memstream(&text, &len);
    bench_report_json(&o, r, f);
    fclose(f);
    root = json_loads(text, 0, &jerr);
    CU_ASSERT_FATAL(root != NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "watchers")), 100);
    json_t *wj = json_object_get(root, "watch");
    CU_ASSERT_FATAL(wj != NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(wj, "events")), 50000);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(wj, "events_total")), 60000);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(wj, "events_per_s")), 25000.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(
        json_number_value(json_object_get(wj, "events_per_s_per_watcher_median")), 250.0, 1e-9);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(wj, "ended_early")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(wj, "ended_by_status"),
                                                       "RESOURCE_EXHAUSTED")),
                    3);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(wj, "first_end_s")), 1.25, 1e-9);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(wj, "first_end_error")),
                           "RESOURCE_EXHAUSTED: watch: the client reads too slowly");
    json_decref(root);
    free(text);
    text = NULL;
    f = open_memstream(&text, &len);
    bench_report_text(&o, r, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "100 streams on 'key-' (100 created): 50000 events in "
                                        "2.00 s = 25000 events/s delivered"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "per watcher median 250 events/s (min 100, max 300)"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(text, "watch ends:  3 of 100 streams ended early (RESOURCE_EXHAUSTED 3)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "first at 1.25 s into the measured phase: "
                                        "RESOURCE_EXHAUSTED: watch: the client reads too slowly"));
    free(text);
    free(r);
}

/* ---- engine against the fake server --------------------------------------------------- */

struct engine_case {
    struct fake_server_config cfg;
    struct fake_server_stats *stats;
    struct bench_result *r;
    int rc;
};

/* Runs slotbench's engine with "--endpoints endpoint", "--route-aware" when route_aware, then args
 * into *r (caller frees); returns bench_run_execute's code and prints its error if it failed. */
static int engine_execute(const char *endpoint, bool route_aware, const char *const *args,
                          struct bench_result **r)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "slotbench";
    argv[argc++] = "--endpoints";
    argv[argc++] = (char *)endpoint;
    if (route_aware)
        argv[argc++] = "--route-aware";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    struct bench_opts o;
    char errmsg[256];
    CU_ASSERT_EQUAL_FATAL(bench_opts_parse(&o, argc, argv, errmsg, sizeof(errmsg)), BENCH_OK);
    *r = calloc(1, sizeof(**r));
    int rc = bench_run_execute(&o, *r, errmsg, sizeof(errmsg));
    if (rc != BENCH_OK)
        fprintf(stderr, "\nbench_run_execute: %s\n", errmsg);
    return rc;
}

/* Runs slotbench's engine with args (after "--endpoints 127.0.0.1:PORT") against a fake. */
static void engine_run(struct engine_case *ec, const char *const *args)
{
    int port = 0;
    struct fake_server *f = fake_server_start(&ec->cfg, &port);
    CU_ASSERT_FATAL(f != NULL);
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", port);
    ec->stats = calloc(1, sizeof(*ec->stats));
    ec->rc = engine_execute(endpoint, false, args, &ec->r);
    fake_server_stop(f, ec->stats);
}

static void engine_free(struct engine_case *ec)
{
    free(ec->r);
    free(ec->stats);
}

#define ENGINE_RUN(ec, ...) engine_run(ec, (const char *const[]){__VA_ARGS__, NULL})

static void test_engine_put_errors_counted(void)
{
    struct engine_case ec = {.cfg = {.fail_every = 10, .key_size = 64, .value_size = 256}};
    ENGINE_RUN(&ec, "--op", "put", "--concurrency", "8", "--connections", "2", "--threads", "2",
               "--ops", "2000", "--keys", "1000");
    const struct bench_phase *p = &ec.r->run;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_EQUAL(ec.stats->calls, 2000);
    CU_ASSERT_EQUAL(ec.stats->propose, 2000);
    CU_ASSERT_EQUAL(ec.stats->bad_requests, 0);
    CU_ASSERT_EQUAL(p->ok, 1800);
    CU_ASSERT_EQUAL(p->writes, 1800);
    CU_ASSERT_EQUAL(p->status[14], 200); /* UNAVAILABLE */
    CU_ASSERT_EQUAL(p->error_detail[SLOTD__V1__ERROR_CODE__ERROR_CODE_NO_LEADER], 200);
    CU_ASSERT_EQUAL(p->errors, 200);
    CU_ASSERT_EQUAL(p->latency_ns.count, 1800);
    CU_ASSERT(p->elapsed_s > 0.0 && p->elapsed_s < 10.0);
    CU_ASSERT(bench_hist_percentile(&p->latency_ns, 50) > 0);
    engine_free(&ec);
}

/* --stream against the fake's ProposeStream: every item answered once, results counted like
 * unary calls (UNAVAILABLE with its NO_LEADER detail, code 0 without a put result as
 * MALFORMED_RESPONSE), items coalesced (fewer messages than items), one call per endpoint
 * channel and thread, --ops exact. */
static void test_engine_stream_counted(void)
{
    struct engine_case ec = {
        .cfg = {.fail_every = 10, .malformed_every = 7, .key_size = 64, .value_size = 256}};
    ENGINE_RUN(&ec, "--stream", "--op", "put", "--concurrency", "64", "--connections", "2",
               "--threads", "2", "--ops", "7000", "--keys", "1000");
    const struct bench_phase *p = &ec.r->run;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_EQUAL(ec.stats->calls, 7000);
    CU_ASSERT_EQUAL(ec.stats->propose, 7000);
    CU_ASSERT_EQUAL(ec.stats->bad_requests, 0);
    CU_ASSERT_EQUAL(ec.stats->no_forward, 0);
    /* 700 multiples of 10 fail; of the multiples of 7 that are not, 1000 - 100 are malformed */
    CU_ASSERT_EQUAL(p->status[14], 700); /* UNAVAILABLE */
    CU_ASSERT_EQUAL(p->error_detail[SLOTD__V1__ERROR_CODE__ERROR_CODE_NO_LEADER], 700);
    CU_ASSERT_EQUAL(p->malformed, 900);
    CU_ASSERT_EQUAL(p->errors, 1600);
    CU_ASSERT_EQUAL(p->ok, 5400);
    CU_ASSERT_EQUAL(p->writes, 5400);
    CU_ASSERT_EQUAL(p->latency_ns.count, 5400);
    CU_ASSERT_EQUAL(p->stream_items_sent, 7000);
    CU_ASSERT(p->stream_messages_sent > 0 && p->stream_messages_sent < 7000);
    CU_ASSERT(p->stream_messages_received > 0);
    CU_ASSERT_EQUAL(p->streams_opened, 4); /* 2 threads x 2 channels (1 endpoint) */
    engine_free(&ec);
}

static void test_engine_mixed_slotd(void)
{
    struct engine_case ec = {.cfg = {.read_found = false, .key_size = 32, .value_size = 10}};
    ENGINE_RUN(&ec, "--op", "mixed", "--read-op", "get-leader-local", "--read-ratio", "0.5",
               "--concurrency", "16", "--ops", "2000", "--key-size", "32", "--value-size", "10");
    const struct bench_phase *p = &ec.r->run;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_EQUAL(ec.stats->bad_requests, 0);
    CU_ASSERT_EQUAL(p->ok, 2000);
    CU_ASSERT_EQUAL(p->reads + p->writes, 2000);
    CU_ASSERT_EQUAL(ec.stats->read_by_consistency[1], p->reads);
    CU_ASSERT_EQUAL(ec.stats->read_by_consistency[0] + ec.stats->read_by_consistency[2], 0);
    CU_ASSERT_EQUAL(ec.stats->propose, p->writes);
    CU_ASSERT(p->reads > 800 && p->writes > 800);
    CU_ASSERT_EQUAL(p->not_found, p->reads);
    engine_free(&ec);
}

static void test_engine_etcd_populate(void)
{
    struct engine_case ec = {.cfg = {.read_found = true, .key_size = 64, .value_size = 256}};
    ENGINE_RUN(&ec, "--target", "etcd", "--op", "get-local", "--populate", "--keys", "300",
               "--concurrency", "32", "--threads", "2", "--ops", "500");
    const struct bench_phase *p = &ec.r->run;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_EQUAL(ec.r->populate_keys, 300);
    CU_ASSERT_EQUAL(ec.r->populate.errors, 0);
    CU_ASSERT_EQUAL(ec.stats->etcd_put, 300);
    unsigned once = 0;
    for (unsigned i = 0; i < 300; i++)
        once += ec.stats->put_count_by_key[i] == 1;
    CU_ASSERT_EQUAL(once, 300); /* every key written exactly once */
    CU_ASSERT_EQUAL(ec.stats->etcd_range_serializable, 500);
    CU_ASSERT_EQUAL(ec.stats->etcd_range_linearizable, 0);
    CU_ASSERT_EQUAL(p->reads, 500);
    CU_ASSERT_EQUAL(p->not_found, 0);
    CU_ASSERT_EQUAL(ec.stats->bad_requests, 0);
    engine_free(&ec);
}

static void test_engine_duration_warmup_malformed(void)
{
    struct engine_case ec = {.cfg = {.malformed_every = 7, .key_size = 64, .value_size = 256}};
    ENGINE_RUN(&ec, "--target", "etcd", "--op", "get", "--duration", "0.4", "--warmup", "0.2",
               "--concurrency", "4");
    const struct bench_phase *p = &ec.r->run;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_DOUBLE_EQUAL(p->elapsed_s, 0.4, 1e-6);
    CU_ASSERT(p->ok > 50);
    CU_ASSERT_EQUAL(p->errors, p->malformed);
    CU_ASSERT(p->malformed > 0);
    CU_ASSERT_EQUAL(p->status[0], p->ok + p->malformed);
    /* warmup calls reached the server but were not counted */
    CU_ASSERT(ec.stats->calls > p->ok + p->malformed);
    CU_ASSERT_EQUAL(ec.stats->etcd_range_linearizable, ec.stats->calls);
    CU_ASSERT(p->cpu_wall_s > 0.3);
    engine_free(&ec);
}

static void test_engine_deadline(void)
{
    /* Every 5th call never gets an answer: exactly those end DEADLINE_EXCEEDED. */
    struct engine_case ec = {.cfg = {.hang_every = 5, .key_size = 64, .value_size = 256}};
    ENGINE_RUN(&ec, "--op", "put", "--deadline-ms", "300", "--concurrency", "20", "--ops", "100");
    const struct bench_phase *p = &ec.r->run;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_EQUAL(p->status[4], 20); /* DEADLINE_EXCEEDED */
    CU_ASSERT_EQUAL(p->ok, 80);
    CU_ASSERT(bench_hist_percentile(&p->latency_ns, 100) < 300000000ull);
    engine_free(&ec);
}

/* --route-aware against two fakes: A (the endpoint) serves the route, which names B as the
 * leader of the even hash slots; odd slots have no leader and go round robin to A. */
struct route_case {
    struct fake_server_stats *a, *b;
    struct bench_result *r;
    int rc;
};

static void route_run(struct route_case *rc, struct fake_server_config a_cfg,
                      struct fake_server_config b_cfg, bool route_served, const char *const *args)
{
    int a_port = 0, b_port = 0;
    b_cfg.slot_parity = 1; /* even slots only */
    struct fake_server *b = fake_server_start(&b_cfg, &b_port);
    CU_ASSERT_FATAL(b != NULL);
    char b_endpoint[64], a_endpoint[64];
    snprintf(b_endpoint, sizeof(b_endpoint), "127.0.0.1:%d", b_port);
    a_cfg.route_leader_address = route_served ? b_endpoint : NULL;
    a_cfg.slot_parity = route_served ? 2 : 0; /* with the route, A only sees odd slots */
    struct fake_server *a = fake_server_start(&a_cfg, &a_port);
    CU_ASSERT_FATAL(a != NULL);
    snprintf(a_endpoint, sizeof(a_endpoint), "127.0.0.1:%d", a_port);
    rc->a = calloc(1, sizeof(*rc->a));
    rc->b = calloc(1, sizeof(*rc->b));
    rc->rc = engine_execute(a_endpoint, true, args, &rc->r);
    fake_server_stop(a, rc->a);
    fake_server_stop(b, rc->b);
}

static void route_free(struct route_case *rc)
{
    free(rc->r);
    free(rc->a);
    free(rc->b);
}

#define ROUTE_RUN(rc, a_cfg, b_cfg, served, ...)                                                   \
    route_run(rc, a_cfg, b_cfg, served, (const char *const[]){__VA_ARGS__, NULL})

static uint64_t data_calls(const struct fake_server_stats *st)
{
    return st->propose + st->read_by_consistency[0] + st->read_by_consistency[1] +
           st->read_by_consistency[2];
}

static void test_engine_route_aware_direct(void)
{
    struct fake_server_config cfg = {.read_found = true, .key_size = 64, .value_size = 256};
    struct route_case rc;
    ROUTE_RUN(&rc, cfg, cfg, true, "--op", "get", "--concurrency", "8", "--threads", "2",
              "--connections", "2", "--ops", "2000", "--populate", "--keys", "500");
    const struct bench_phase *p = &rc.r->run;
    CU_ASSERT_EQUAL(rc.rc, BENCH_OK);
    CU_ASSERT_EQUAL(p->ok, 2000);
    CU_ASSERT_EQUAL(p->direct + p->fallback, 2000);
    CU_ASSERT(p->direct > 700 && p->fallback > 700);
    /* populate (the only puts) went the same way: every key once, split by hash slot parity */
    CU_ASSERT_EQUAL(rc.r->populate_keys, 500);
    CU_ASSERT_EQUAL(rc.r->populate.direct + rc.r->populate.fallback, 500);
    unsigned once = 0;
    for (unsigned i = 0; i < 500; i++)
        once += rc.a->put_count_by_key[i] + rc.b->put_count_by_key[i] == 1;
    CU_ASSERT_EQUAL(once, 500);
    /* the leader got exactly the direct calls, all no_forward and all in its hash slots */
    CU_ASSERT_EQUAL(data_calls(rc.b), p->direct + rc.r->populate.direct);
    CU_ASSERT_EQUAL(rc.b->no_forward, data_calls(rc.b));
    CU_ASSERT_EQUAL(rc.b->wrong_slot, 0);
    CU_ASSERT_EQUAL(rc.b->route_snapshots, 0);
    /* the endpoint got the route call and the fallback calls, which may be forwarded */
    CU_ASSERT_EQUAL(data_calls(rc.a), p->fallback + rc.r->populate.fallback);
    CU_ASSERT_EQUAL(rc.a->no_forward, 0);
    CU_ASSERT_EQUAL(rc.a->wrong_slot, 0);
    CU_ASSERT_EQUAL(rc.a->route_snapshots, 1); /* nothing failed: no refetch */
    CU_ASSERT_EQUAL(rc.r->route_fetches, 1);
    CU_ASSERT_EQUAL(rc.r->route_fetch_failures, 0);
    CU_ASSERT_STRING_EQUAL(rc.r->route_error, "");
    CU_ASSERT_EQUAL(rc.a->bad_requests + rc.b->bad_requests, 0);
    route_free(&rc);
}

/* --stream --route-aware: puts of the even hash slots go on a stream to the leader the route
 * names (all no_forward, all in its slots), the others on the endpoint's stream; --populate
 * and --ops exact. */
static void test_engine_route_aware_stream(void)
{
    struct fake_server_config cfg = {.key_size = 64, .value_size = 256};
    struct route_case rc;
    ROUTE_RUN(&rc, cfg, cfg, true, "--stream", "--op", "put", "--concurrency", "32", "--threads",
              "2", "--ops", "3000", "--populate", "--keys", "500");
    const struct bench_phase *p = &rc.r->run;
    CU_ASSERT_EQUAL(rc.rc, BENCH_OK);
    CU_ASSERT_EQUAL(p->ok, 3000);
    CU_ASSERT_EQUAL(p->errors, 0);
    CU_ASSERT_EQUAL(p->direct + p->fallback, 3000);
    CU_ASSERT(p->direct > 1000 && p->fallback > 1000);
    CU_ASSERT_EQUAL(rc.r->populate_keys, 500);
    /* the measured puts go to keys populate wrote: every key seen, 3500 puts in all */
    unsigned seen = 0;
    uint64_t puts = 0;
    for (unsigned i = 0; i < 500; i++) {
        seen += rc.a->put_count_by_key[i] + rc.b->put_count_by_key[i] >= 1;
        puts += rc.a->put_count_by_key[i] + rc.b->put_count_by_key[i];
    }
    CU_ASSERT_EQUAL(seen, 500);
    CU_ASSERT_EQUAL(puts, 3500);
    CU_ASSERT_EQUAL(rc.b->propose, p->direct + rc.r->populate.direct);
    CU_ASSERT_EQUAL(rc.b->no_forward, rc.b->propose);
    CU_ASSERT_EQUAL(rc.b->wrong_slot, 0);
    CU_ASSERT_EQUAL(rc.a->propose, p->fallback + rc.r->populate.fallback);
    CU_ASSERT_EQUAL(rc.a->no_forward, 0);
    CU_ASSERT_EQUAL(rc.a->wrong_slot, 0);
    CU_ASSERT_EQUAL(rc.a->bad_requests + rc.b->bad_requests, 0);
    /* each thread: one stream to the endpoint, one to the leader */
    CU_ASSERT_EQUAL(p->streams_opened, 4);
    route_free(&rc);
}

static void test_engine_route_refetch_rate_limited(void)
{
    /* Every 4th call on the leader fails UNAVAILABLE: each asks for a new route, but at most
     * one fetch starts per 200 ms. */
    struct fake_server_config cfg = {.key_size = 64, .value_size = 256};
    struct fake_server_config b_cfg = cfg;
    b_cfg.fail_every = 4;
    struct route_case rc;
    ROUTE_RUN(&rc, cfg, b_cfg, true, "--op", "put", "--concurrency", "8", "--duration", "0.7",
              "--keys", "1000");
    const struct bench_phase *p = &rc.r->run;
    CU_ASSERT_EQUAL(rc.rc, BENCH_OK);
    CU_ASSERT(p->status[GRPC_STATUS_UNAVAILABLE] > 20);
    CU_ASSERT(p->direct > 0 && p->fallback > 0);
    /* the initial fetch, then one per 200 ms at most over the 0.7 s run (+1 for timing) */
    CU_ASSERT(rc.a->route_snapshots >= 2);
    CU_ASSERT(rc.a->route_snapshots <= 5);
    CU_ASSERT(rc.r->route_fetches >= 2 && rc.r->route_fetches <= rc.a->route_snapshots);
    CU_ASSERT_EQUAL(rc.r->route_fetch_failures, 0);
    CU_ASSERT_EQUAL(rc.b->wrong_slot + rc.a->wrong_slot, 0);
    route_free(&rc);
}

static void test_engine_route_unavailable_falls_back(void)
{
    /* RouteSnapshot answers UNIMPLEMENTED: every call goes round robin, forwarding allowed. */
    struct fake_server_config cfg = {.key_size = 64, .value_size = 256};
    struct route_case rc;
    ROUTE_RUN(&rc, cfg, cfg, false, "--op", "get", "--concurrency", "4", "--ops", "300");
    const struct bench_phase *p = &rc.r->run;
    CU_ASSERT_EQUAL(rc.rc, BENCH_OK);
    CU_ASSERT_EQUAL(p->ok, 300);
    CU_ASSERT_EQUAL(p->direct, 0);
    CU_ASSERT_EQUAL(p->fallback, 300);
    CU_ASSERT_EQUAL(rc.a->read_by_consistency[0], 300);
    CU_ASSERT_EQUAL(rc.a->no_forward, 0);
    CU_ASSERT_EQUAL(data_calls(rc.b), 0);
    CU_ASSERT_EQUAL(rc.a->route_snapshots, 1);
    CU_ASSERT_EQUAL(rc.r->route_fetches, 1);
    CU_ASSERT_EQUAL(rc.r->route_fetch_failures, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(rc.r->route_error, "UNIMPLEMENTED"));
    route_free(&rc);
}

static void test_engine_watch_slotd(void)
{
    /* 3 streams; after the first put each gets 5 messages of 4 events, each followed by a
     * progress message: 60 events, all in the window (they start with the load) */
    struct engine_case ec = {
        .cfg = {.key_size = 64, .value_size = 256, .watch_messages = 5, .watch_events = 4}};
    ENGINE_RUN(&ec, "--op", "put", "--watchers", "3", "--concurrency", "4", "--connections", "2",
               "--duration", "0.8", "--keys", "1000");
    const struct bench_watch_result *w = &ec.r->watch;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_EQUAL(ec.stats->watches, 3);
    CU_ASSERT_EQUAL(ec.stats->bad_requests, 0);
    CU_ASSERT_EQUAL(ec.stats->watch_events_sent, 60);
    CU_ASSERT_EQUAL(w->watchers, 3);
    CU_ASSERT_EQUAL(w->created, 3);
    CU_ASSERT_EQUAL(w->events, 60);
    CU_ASSERT_EQUAL(w->events_total, 60);
    CU_ASSERT_EQUAL(w->messages, 30); /* 10 per stream; the created message came before */
    CU_ASSERT_EQUAL(w->malformed, 0);
    CU_ASSERT_EQUAL(w->ended_early, 0);
    CU_ASSERT_STRING_EQUAL(w->first_end_error, "");
    CU_ASSERT_DOUBLE_EQUAL(w->elapsed_s, 0.8, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(w->events_per_s, 60 / 0.8, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(w->per_watcher_median, 20 / 0.8, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(w->per_watcher_min, 20 / 0.8, 1e-6);
    /* the puts ran beside them as usual */
    CU_ASSERT(ec.r->run.ok > 0);
    CU_ASSERT_EQUAL(ec.r->run.errors, 0);
    engine_free(&ec);
}

static void test_engine_watch_etcd_cut_off(void)
{
    /* 4 etcd streams, each cut off with RESOURCE_EXHAUSTED after 3 messages of 5 events */
    struct engine_case ec = {.cfg = {.key_size = 64,
                                     .value_size = 256,
                                     .watch_messages = 3,
                                     .watch_events = 5,
                                     .watch_end_code = GRPC_STATUS_RESOURCE_EXHAUSTED}};
    ENGINE_RUN(&ec, "--target", "etcd", "--op", "put", "--watchers", "4", "--concurrency", "2",
               "--duration", "0.8", "--keys", "1000");
    const struct bench_watch_result *w = &ec.r->watch;
    CU_ASSERT_EQUAL(ec.rc, BENCH_OK);
    CU_ASSERT_EQUAL(ec.stats->watches, 4);
    CU_ASSERT_EQUAL(ec.stats->bad_requests, 0);
    CU_ASSERT_EQUAL(w->created, 4);
    CU_ASSERT_EQUAL(w->events, 60);
    CU_ASSERT_EQUAL(w->malformed, 0);
    CU_ASSERT_EQUAL(w->ended_early, 4);
    CU_ASSERT_EQUAL(w->ended_by_status[GRPC_STATUS_RESOURCE_EXHAUSTED], 4);
    CU_ASSERT_EQUAL(w->etcd_canceled, 0);
    CU_ASSERT(w->first_end_s >= 0.0 && w->first_end_s < 0.8);
    CU_ASSERT_STRING_EQUAL(w->first_end_error, "RESOURCE_EXHAUSTED: fake: watch cut off");
    CU_ASSERT(ec.r->run.ok > 0);
    engine_free(&ec);
}

static void test_engine_connect_fails(void)
{
    /* bind a port, then close it: nothing listens there */
    struct fake_server_config cfg = {.key_size = 64};
    int port = 0;
    struct fake_server *f = fake_server_start(&cfg, &port);
    CU_ASSERT_FATAL(f != NULL);
    struct fake_server_stats *st = calloc(1, sizeof(*st));
    fake_server_stop(f, st);
    free(st);
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", port);
    struct bench_opts o;
    char errmsg[256];
    char *argv[] = {"slotbench", "--endpoints", endpoint, "--connect-timeout-ms", "2000"};
    CU_ASSERT_EQUAL_FATAL(bench_opts_parse(&o, 5, argv, errmsg, sizeof(errmsg)), BENCH_OK);
    struct bench_result *r = calloc(1, sizeof(*r));
    CU_ASSERT_EQUAL(bench_run_execute(&o, r, errmsg, sizeof(errmsg)), BENCH_ECONNECT);
    CU_ASSERT_PTR_NOT_NULL(strstr(errmsg, endpoint));
    free(r);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("slotbench", NULL, NULL);
    CU_add_test(s, "bench_strerror", test_strerror);
    CU_add_test(s, "hist buckets", test_hist_buckets);
    CU_add_test(s, "hist small values exact", test_hist_small_exact);
    CU_add_test(s, "hist constant clamped", test_hist_constant_clamped);
    CU_add_test(s, "hist vs sorted, merge", test_hist_vs_sorted_and_merge);
    CU_add_test(s, "opts defaults and values", test_opts_defaults_and_values);
    CU_add_test(s, "opts errors", test_opts_errors);
    CU_add_test(s, "wire keys and methods", test_wire_keys_and_methods);
    CU_add_test(s, "wire slotd requests", test_wire_slotd_requests);
    CU_add_test(s, "wire etcd requests", test_wire_etcd_requests);
    CU_add_test(s, "wire stream items", test_wire_stream_items);
    CU_add_test(s, "wire responses", test_wire_responses);
    CU_add_test(s, "wire echo", test_wire_echo);
    CU_add_test(s, "wire error detail", test_wire_error_detail);
    CU_add_test(s, "wire watch requests", test_wire_watch_requests);
    CU_add_test(s, "wire watch decode", test_wire_watch_decode);
    CU_add_test(s, "route hash slots", test_route_hash_slot);
    CU_add_test(s, "route leader lookup", test_route_leader_lookup);
    CU_add_test(s, "route decode errors", test_route_decode_errors);
    CU_add_test(s, "report json and text", test_report_json);
    CU_add_test(s, "engine put, errors counted", test_engine_put_errors_counted);
    CU_add_test(s, "engine mixed slotd", test_engine_mixed_slotd);
    CU_add_test(s, "engine stream: items counted like calls", test_engine_stream_counted);
    CU_add_test(s, "engine etcd populate", test_engine_etcd_populate);
    CU_add_test(s, "engine duration, warmup, malformed", test_engine_duration_warmup_malformed);
    CU_add_test(s, "engine deadline", test_engine_deadline);
    CU_add_test(s, "engine connect fails", test_engine_connect_fails);
    CU_add_test(s, "engine watchers: slotd events counted", test_engine_watch_slotd);
    CU_add_test(s, "engine watchers: etcd streams cut off", test_engine_watch_etcd_cut_off);
    CU_add_test(s, "engine route-aware: direct to the leader", test_engine_route_aware_direct);
    CU_add_test(s, "engine route-aware stream: items to the leader",
                test_engine_route_aware_stream);
    CU_add_test(s, "engine route-aware: refetch rate limited",
                test_engine_route_refetch_rate_limited);
    CU_add_test(s, "engine route-aware: no route, round robin",
                test_engine_route_unavailable_falls_back);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
