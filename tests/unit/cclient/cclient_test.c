/* cclient_test.c - CUnit tests for libslotd (hash slots, route, errors, retries, options, admin
 * and task encoding, ControllerStatus decoding, ProposeStream bounds) and slotctl's parser. */
#include "client_internal.h"
#include "slotctl_cli.h"

#include "google/rpc/status.pb-c.h"
#include "slotd/v1/admin.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#include <CUnit/Basic.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- crc32 / hash slots ---------------------------------------------------------------- */

static void test_crc32_known_values(void)
{
    /* zlib.crc32(key) % 256 */
    CU_ASSERT_EQUAL(slotd_hash_slot("", 0), 0u);
    CU_ASSERT_EQUAL(slotd_hash_slot("hello", 5), 0x3610a686u % 256);
    CU_ASSERT_EQUAL(slotd_hash_slot("123456789", 9), 0x26u); /* CRC-32 check value 0xcbf43926 */
    CU_ASSERT_EQUAL(slotd_hash_slot("a", 1), 0xe8b7be43u % 256);
    CU_ASSERT_EQUAL(slotd_hash_slot("The quick brown fox jumps over the lazy dog", 43),
                    0x414fa339u % 256);
    /* zlib.crc32(b"key-" + b"0" * 57 + b"123") % 256 == 140: slotbench's 64-byte key 123 */
    char key[65];
    snprintf(key, sizeof(key), "key-%060d", 123);
    CU_ASSERT_EQUAL(slotd_hash_slot(key, 64), 140u);
}

/* ---- route ----------------------------------------------------------------------------- */

/* Packs a route: 2 groups over 256 slots (1 owns 0..127), 3 nodes; group 1 led by node 2,
 * group 2 leaderless. *len receives the size; caller frees. */
static uint8_t *route_bytes(size_t *len, size_t table_len)
{
    uint32_t table[SLOTD_HASH_SLOTS];
    for (unsigned s = 0; s < SLOTD_HASH_SLOTS; s++)
        table[s] = s < 128 ? 1 : 2;
    uint64_t voters1[] = {1, 2, 3}, voters2[] = {2, 3, 1};
    Slotd__V1__GroupRoute g1 = SLOTD__V1__GROUP_ROUTE__INIT, g2 = SLOTD__V1__GROUP_ROUTE__INIT;
    g1.group_id = 1;
    g1.n_voters = 3;
    g1.voters = voters1;
    g1.preferred_leader = 1;
    g1.leader = 2;
    g1.leader_term = 7;
    /* group 1 mid-move: the group has learner 4, the controller intends 4 as a voter */
    uint64_t learners1[] = {4}, intended1[] = {1, 2, 3, 4};
    g1.n_learners = 1;
    g1.learners = learners1;
    g1.n_intended_voters = 4;
    g1.intended_voters = intended1;
    Slotd__V1__ReplicaStatus r2 = SLOTD__V1__REPLICA_STATUS__INIT,
                             r4 = SLOTD__V1__REPLICA_STATUS__INIT;
    r2.node_id = 2;
    r2.role = "voter";
    r2.leader = 2;
    r2.term = 7;
    r2.commit_index = 90;
    r2.applied_index = 88;
    r2.age_ms = 120;
    r4.node_id = 4;
    r4.role = "learner";
    r4.leader = 2;
    r4.term = 7;
    r4.commit_index = 60;
    r4.applied_index = 60;
    r4.age_ms = 400;
    Slotd__V1__ReplicaStatus *reps1[] = {&r2, &r4};
    g1.n_replicas = 2;
    g1.replicas = reps1;
    g2.group_id = 2;
    g2.n_voters = 3;
    g2.voters = voters2;
    g2.n_intended_voters = 3;
    g2.intended_voters = voters1;                 /* the same set in another order */
    Slotd__V1__GroupRoute *groups[] = {&g2, &g1}; /* unsorted on purpose */
    Slotd__V1__NodeInfo n1 = SLOTD__V1__NODE_INFO__INIT, n2 = SLOTD__V1__NODE_INFO__INIT,
                        n3 = SLOTD__V1__NODE_INFO__INIT;
    n1.node_id = 1;
    n1.address = "127.0.0.1:7701";
    n2.node_id = 2;
    n2.address = "127.0.0.1:7702";
    n3.node_id = 3;
    n3.address = "127.0.0.1:7703";
    Slotd__V1__NodeInfo *nodes[] = {&n3, &n1, &n2};
    Slotd__V1__RouteSnapshotResponse m = SLOTD__V1__ROUTE_SNAPSHOT_RESPONSE__INIT;
    m.route_revision = 42;
    m.n_hash_slot_table = table_len;
    m.hash_slot_table = table;
    m.n_groups = 2;
    m.groups = groups;
    m.n_nodes = 3;
    m.nodes = nodes;
    *len = slotd__v1__route_snapshot_response__get_packed_size(&m);
    uint8_t *buf = malloc(*len);
    slotd__v1__route_snapshot_response__pack(&m, buf);
    return buf;
}

/* A key whose hash slot is in [lo, hi]. */
static void key_in_slots(unsigned lo, unsigned hi, char *key)
{
    for (unsigned i = 0; i < 100000; i++) {
        snprintf(key, 32, "k%u", i);
        unsigned s = slotd_hash_slot(key, strlen(key));
        if (s >= lo && s <= hi)
            return;
    }
    CU_FAIL_FATAL("no key found");
}

static void test_route_decode_and_leader(void)
{
    size_t len;
    uint8_t *buf = route_bytes(&len, SLOTD_HASH_SLOTS);
    struct slotd_route *r = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(slotd__route_decode(buf, len, &r, err, sizeof(err)), SLOTD_CLIENT_OK);
    free(buf);
    CU_ASSERT_EQUAL(r->revision, 42);
    CU_ASSERT_EQUAL(r->group_count, 2);
    CU_ASSERT_EQUAL(r->groups[0].group_id, 1); /* sorted */
    CU_ASSERT_EQUAL(r->groups[0].hash_slot_count, 128);
    CU_ASSERT_EQUAL(r->groups[1].voter_count, 3);
    /* intent and fact: group 1 differs (learner 4 intended as a voter), group 2 agrees */
    CU_ASSERT_EQUAL(r->groups[0].learner_count, 1);
    CU_ASSERT_EQUAL(r->groups[0].intended_voter_count, 4);
    CU_ASSERT_EQUAL(r->groups[0].intended_voters[3], 4);
    CU_ASSERT_FALSE(slotd_route_group_agrees(&r->groups[0]));
    CU_ASSERT_TRUE(slotd_route_group_agrees(&r->groups[1]));
    CU_ASSERT_EQUAL_FATAL(r->groups[0].replica_count, 2);
    CU_ASSERT_EQUAL(r->groups[0].replicas[0].role, SLOTD_REPLICA_VOTER);
    CU_ASSERT_EQUAL(r->groups[0].replicas[0].commit_index, 90);
    CU_ASSERT_EQUAL(r->groups[0].replicas[0].applied_index, 88);
    CU_ASSERT_EQUAL(r->groups[0].replicas[1].node_id, 4);
    CU_ASSERT_EQUAL(r->groups[0].replicas[1].role, SLOTD_REPLICA_LEARNER);
    CU_ASSERT_EQUAL(r->groups[0].replicas[1].leader, 2);
    CU_ASSERT_EQUAL(r->groups[0].replicas[1].age_ms, 400);
    CU_ASSERT_EQUAL(r->node_count, 3);
    CU_ASSERT_EQUAL(r->nodes[0].node_id, 1);
    CU_ASSERT_STRING_EQUAL(slotd_route_node_address(r, 3), "127.0.0.1:7703");
    CU_ASSERT_PTR_NULL(slotd_route_node_address(r, 9));

    char k1[32], k2[32];
    key_in_slots(0, 127, k1);
    key_in_slots(128, 255, k2);
    CU_ASSERT_EQUAL(slotd_route_group_of(r, k1, strlen(k1)), 1);
    CU_ASSERT_EQUAL(slotd_route_group_of(r, k2, strlen(k2)), 2);
    /* group 1: leader node 2; group 2: no leader known */
    const char *a1 = slotd_route_leader_address(r, k1, strlen(k1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(a1);
    CU_ASSERT_STRING_EQUAL(a1, "127.0.0.1:7702");
    CU_ASSERT_PTR_NULL(slotd_route_leader_address(r, k2, strlen(k2)));

    /* a NOT_LEADER hint moves group 2's leader; an older term than known is ignored */
    CU_ASSERT_TRUE(slotd__route_apply_hint(r, 2, 3, "127.0.0.1:7703", 4));
    CU_ASSERT_STRING_EQUAL(slotd_route_leader_address(r, k2, strlen(k2)), "127.0.0.1:7703");
    CU_ASSERT_FALSE(slotd__route_apply_hint(r, 1, 3, "127.0.0.1:7703", 6));
    CU_ASSERT_STRING_EQUAL(slotd_route_leader_address(r, k1, strlen(k1)), "127.0.0.1:7702");
    /* a hint naming a node the route does not know adds it */
    CU_ASSERT_TRUE(slotd__route_apply_hint(r, 1, 9, "10.0.0.9:7700", 8));
    CU_ASSERT_STRING_EQUAL(slotd_route_leader_address(r, k1, strlen(k1)), "10.0.0.9:7700");
    CU_ASSERT_FALSE(slotd__route_apply_hint(r, 77, 1, "x:1", 9)); /* unknown group */

    struct slotd_route *copy = slotd__route_copy(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
    CU_ASSERT_EQUAL(copy->node_count, 4);
    CU_ASSERT_STRING_EQUAL(slotd_route_leader_address(copy, k1, strlen(k1)), "10.0.0.9:7700");
    slotd_route_destroy(copy);
    slotd_route_destroy(r);
}

static void test_route_decode_rejects_bad_input(void)
{
    size_t len;
    uint8_t *buf = route_bytes(&len, 255);
    struct slotd_route *r = (struct slotd_route *)1;
    char err[256] = "";
    CU_ASSERT_EQUAL(slotd__route_decode(buf, len, &r, err, sizeof(err)), SLOTD_CLIENT_EMALFORMED);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "255 entries"));
    free(buf);
    uint8_t junk[] = {0xff, 0xff, 0xff};
    CU_ASSERT_EQUAL(slotd__route_decode(junk, sizeof(junk), &r, err, sizeof(err)),
                    SLOTD_CLIENT_EMALFORMED);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "do not decode"));
}

/* ---- ErrorDetail decoding -------------------------------------------------------------- */

/* Packs google.rpc.Status{code, details: [Any{type_url, ErrorDetail d}]}; caller frees. */
static uint8_t *status_bytes(const char *type_url, const Slotd__V1__ErrorDetail *d, size_t *len)
{
    size_t dlen = slotd__v1__error_detail__get_packed_size(d);
    uint8_t *dbuf = malloc(dlen ? dlen : 1);
    slotd__v1__error_detail__pack(d, dbuf);
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
    any.type_url = (char *)type_url;
    any.value.len = dlen;
    any.value.data = dbuf;
    Google__Protobuf__Any *details[] = {&any};
    Google__Rpc__Status s = GOOGLE__RPC__STATUS__INIT;
    s.code = 9;
    s.message = "not the leader";
    s.n_details = 1;
    s.details = details;
    *len = google__rpc__status__get_packed_size(&s);
    uint8_t *buf = malloc(*len);
    google__rpc__status__pack(&s, buf);
    free(dbuf);
    return buf;
}

static void test_error_detail_decode(void)
{
    Slotd__V1__LeaderHint hint = SLOTD__V1__LEADER_HINT__INIT;
    hint.node_id = 3;
    hint.address = "127.0.0.1:7703";
    hint.group_id = 5;
    hint.term = 11;
    Slotd__V1__ErrorDetail d = SLOTD__V1__ERROR_DETAIL__INIT;
    d.code = SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER;
    d.leader_hint = &hint;
    d.retry_after_ms = 25;
    size_t len;
    uint8_t *buf = status_bytes("type.googleapis.com/slotd.v1.ErrorDetail", &d, &len);
    struct slotd_status st;
    memset(&st, 0, sizeof(st));
    CU_ASSERT_EQUAL(slotd_call_detail_decode(buf, len, &st), 0);
    free(buf);
    CU_ASSERT_TRUE(st.has_detail);
    CU_ASSERT_EQUAL(st.detail_code, SLOTD_ERROR_CODE_NOT_LEADER);
    CU_ASSERT_EQUAL(st.leader_node_id, 3);
    CU_ASSERT_STRING_EQUAL(st.leader_address, "127.0.0.1:7703");
    CU_ASSERT_EQUAL(st.leader_group_id, 5);
    CU_ASSERT_EQUAL(st.leader_term, 11);
    CU_ASSERT_EQUAL(st.retry_after_ms, 25);
    CU_ASSERT_STRING_EQUAL(slotd_error_code_name(st.detail_code), "NOT_LEADER");

    Slotd__V1__ErrorDetail f = SLOTD__V1__ERROR_DETAIL__INIT;
    f.code = SLOTD__V1__ERROR_CODE__ERROR_CODE_INVALID_FIELD;
    f.field = "put.key";
    f.limit = 1024;
    buf = status_bytes("type.googleapis.com/slotd.v1.ErrorDetail", &f, &len);
    memset(&st, 0, sizeof(st));
    CU_ASSERT_EQUAL(slotd_call_detail_decode(buf, len, &st), 0);
    free(buf);
    CU_ASSERT_STRING_EQUAL(st.field, "put.key");
    CU_ASSERT_EQUAL(st.limit, 1024);
    CU_ASSERT_EQUAL(st.leader_node_id, 0);

    /* another type URL is not an ErrorDetail; junk does not decode */
    buf = status_bytes("type.googleapis.com/other.Detail", &f, &len);
    memset(&st, 0, sizeof(st));
    CU_ASSERT_EQUAL(slotd_call_detail_decode(buf, len, &st), -1);
    CU_ASSERT_FALSE(st.has_detail);
    free(buf);
    uint8_t junk[] = {0x0a, 0x7f};
    CU_ASSERT_EQUAL(slotd_call_detail_decode(junk, sizeof(junk), &st), -1);
}

/* ---- retry policy and errors ----------------------------------------------------------- */

static struct slotd_status status_of(int grpc_status, bool has_detail, int code)
{
    struct slotd_status st;
    memset(&st, 0, sizeof(st));
    st.grpc_status = grpc_status;
    st.has_detail = has_detail;
    st.detail_code = code;
    return st;
}

static void test_retry_policy(void)
{
    struct slotd_status st = status_of(9, true, SLOTD_ERROR_CODE_NOT_LEADER);
    /* NOT_LEADER was never proposed: redirect even without a request id */
    CU_ASSERT_EQUAL(slotd__action_decide(&st, false), SLOTD__ACTION_REDIRECT);
    CU_ASSERT_EQUAL(slotd__action_decide(&st, true), SLOTD__ACTION_REDIRECT);
    st = status_of(9, false, 0); /* other failed preconditions are final */
    CU_ASSERT_EQUAL(slotd__action_decide(&st, true), SLOTD__ACTION_DONE);
    /* UNAVAILABLE (maybe applied) and deadline: retried only when idempotent */
    st = status_of(14, true, SLOTD_ERROR_CODE_UNKNOWN_OUTCOME);
    CU_ASSERT_EQUAL(slotd__action_decide(&st, true), SLOTD__ACTION_RETRY);
    CU_ASSERT_EQUAL(slotd__action_decide(&st, false), SLOTD__ACTION_DONE);
    st = status_of(4, false, 0);
    CU_ASSERT_EQUAL(slotd__action_decide(&st, true), SLOTD__ACTION_RETRY);
    CU_ASSERT_EQUAL(slotd__action_decide(&st, false), SLOTD__ACTION_DONE);
    st = status_of(8, true, SLOTD_ERROR_CODE_QUEUE_FULL);
    CU_ASSERT_EQUAL(slotd__action_decide(&st, true), SLOTD__ACTION_RETRY);
    st = status_of(3, true, SLOTD_ERROR_CODE_INVALID_FIELD);
    CU_ASSERT_EQUAL(slotd__action_decide(&st, true), SLOTD__ACTION_DONE);
    CU_ASSERT_EQUAL(slotd__err_of_status(&st), SLOTD_CLIENT_EINVAL);
    st = status_of(14, false, 0);
    CU_ASSERT_EQUAL(slotd__err_of_status(&st), SLOTD_CLIENT_EUNAVAILABLE);
    st = status_of(4, false, 0);
    CU_ASSERT_EQUAL(slotd__err_of_status(&st), SLOTD_CLIENT_ETIMEOUT);
    st = status_of(13, false, 0);
    CU_ASSERT_EQUAL(slotd__err_of_status(&st), SLOTD_CLIENT_ERPC);

    CU_ASSERT_EQUAL(slotd__backoff_ms(1, 0), 50);
    CU_ASSERT_EQUAL(slotd__backoff_ms(2, 0), 100);
    CU_ASSERT_EQUAL(slotd__backoff_ms(30, 0), 1000); /* capped */
    CU_ASSERT_EQUAL(slotd__backoff_ms(1, 300), 300); /* server hint wins when longer */
    CU_ASSERT_EQUAL(slotd__backoff_ms(1, 999999), 5000);

    CU_ASSERT_STRING_EQUAL(slotd_client_strerror(SLOTD_CLIENT_EUNAVAILABLE), "unavailable");
    CU_ASSERT_STRING_EQUAL(slotd_client_strerror(-1), "unknown error");
    CU_ASSERT_STRING_EQUAL(slotd_client_strerror(SLOTD_CLIENT_ERR_COUNT), "unknown error");
    CU_ASSERT_STRING_EQUAL(slotd_grpc_status_name(9), "FAILED_PRECONDITION");
    CU_ASSERT_STRING_EQUAL(slotd_grpc_status_name(99), "UNKNOWN_STATUS");
}

/* ---- options --------------------------------------------------------------------------- */

static void test_endpoints_and_options(void)
{
    char eps[4][SLOTD_ADDRESS_LEN + 1];
    size_t n;
    char err[256];
    CU_ASSERT_EQUAL(slotd__endpoints_parse("a:1,b:2,c:3", eps, 4, &n, err, sizeof(err)),
                    SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_STRING_EQUAL(eps[2], "c:3");
    CU_ASSERT_EQUAL(slotd__endpoints_parse("a:1,,b:2", eps, 4, &n, err, sizeof(err)),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "empty entry"));
    CU_ASSERT_EQUAL(slotd__endpoints_parse("", eps, 4, &n, err, sizeof(err)), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd__endpoints_parse("nocolon", eps, 4, &n, err, sizeof(err)),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd__endpoints_parse("a:1,b:2,c:3,d:4,e:5", eps, 4, &n, err, sizeof(err)),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "more than 4"));

    struct slotd_options o;
    CU_ASSERT_EQUAL(slotd__options_resolve(NULL, &o, err, sizeof(err)), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(o.deadline_ms, 5000);
    CU_ASSERT_EQUAL(o.max_retries, 3);
    CU_ASSERT_EQUAL(o.route_refresh_ms, 0);
    struct slotd_options *in = slotd_options_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    slotd_options_set_deadline_ms(in, 250);
    slotd_options_set_max_retries(in, 0);
    slotd_options_set_route_refresh_ms(in, 10);
    CU_ASSERT_EQUAL(slotd__options_resolve(in, &o, err, sizeof(err)), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(o.deadline_ms, 250);
    CU_ASSERT_EQUAL(o.max_retries, 0);
    CU_ASSERT_EQUAL(o.route_refresh_ms, 10);
    slotd_options_set_deadline_ms(in, -5);
    CU_ASSERT_EQUAL(slotd__options_resolve(in, &o, err, sizeof(err)), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "deadline_ms: -5 is not in 1..3600000"));
    slotd_options_set_deadline_ms(in, 100);
    slotd_options_set_max_retries(in, 1000);
    CU_ASSERT_EQUAL(slotd__options_resolve(in, &o, err, sizeof(err)), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "max_retries: 1000 is not in 0..100"));
    slotd_options_set_max_retries(in, -1);
    CU_ASSERT_EQUAL(slotd__options_resolve(in, &o, err, sizeof(err)), SLOTD_CLIENT_EINVAL);

    /* slotd_client_create names the bad option in its error object; nothing is made */
    struct slotd_client *c = NULL;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_client_create("127.0.0.1:1", in, &c, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(slotd_error_code(e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "max_retries"));
    CU_ASSERT_EQUAL(slotd_error_grpc_status(e), -1);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    /* a TLS file that cannot be read is named with its option */
    slotd_options_set_max_retries(in, 1);
    CU_ASSERT_EQUAL(slotd_options_set_tls_ca_file(in, "/nonexistent/ca.pem"), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_client_create("127.0.0.1:1", in, &c, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "tls_ca_file: cannot open"));
    CU_ASSERT_EQUAL(slotd_options_set_tls_ca_file(in, NULL), SLOTD_CLIENT_OK);
    slotd_options_destroy(in);
    CU_ASSERT_EQUAL(slotd_client_create("x", NULL, &c, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "endpoints"));
    slotd_error_destroy(e);
}

/* A client of endpoints with the given deadline and retries (the test fails without one). */
static struct slotd_client *client_at(const char *endpoints, int deadline_ms, int max_retries)
{
    struct slotd_options *o = slotd_options_create();
    struct slotd_client *c = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    slotd_options_set_deadline_ms(o, deadline_ms);
    slotd_options_set_max_retries(o, max_retries);
    CU_ASSERT_EQUAL(slotd_client_create(endpoints, o, &c, NULL), SLOTD_CLIENT_OK);
    slotd_options_destroy(o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

/* A client pointed at a closed port fails fast with UNAVAILABLE after bounded retries. */
/* The last revision only rises; a failed call leaves it where it was. */
static void test_last_revision(void)
{
    struct slotd_client *c = client_at("127.0.0.1:1", 200, 0);
    CU_ASSERT_EQUAL(slotd_client_last_revision(c), 0);
    slotd_client_observe_revision(c, 31);
    slotd_client_observe_revision(c, 12);
    CU_ASSERT_EQUAL(slotd_client_last_revision(c), 31);
    struct slotd_task_list *ts = (struct slotd_task_list *)1;
    CU_ASSERT_NOT_EQUAL(slotd_client_task_status(c, 7, false, &ts, NULL), SLOTD_CLIENT_OK);
    CU_ASSERT_PTR_NULL(ts);
    CU_ASSERT_EQUAL(slotd_client_last_revision(c), 31);
    slotd_client_observe_revision(c, 32);
    CU_ASSERT_EQUAL(slotd_client_last_revision(c), 32);
    slotd_client_destroy(c);
}

/* Tokens: printable and bounded; authenticate against nothing fails UNAVAILABLE, sets none. */
static void test_token(void)
{
    struct slotd_client *c = client_at("127.0.0.1:1", 200, 0);
    char big[SLOTD_CLIENT_TOKEN_MAX + 2];
    CU_ASSERT_EQUAL(slotd_client_set_token(c, "t1.bob.3.99.abcdef"), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_client_set_token(c, "has space"), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_client_set_token(c, "new\nline"), SLOTD_CLIENT_EINVAL);
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CU_ASSERT_EQUAL(slotd_client_set_token(c, big), SLOTD_CLIENT_EINVAL);
    big[SLOTD_CLIENT_TOKEN_MAX] = '\0';
    CU_ASSERT_EQUAL(slotd_client_set_token(c, big), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_client_set_token(c, NULL), SLOTD_CLIENT_OK);
    struct slotd_error *e = NULL;
    uint64_t expires = 7;
    CU_ASSERT_EQUAL(slotd_client_authenticate(c, "bob", "pw", &expires, &e),
                    SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_EQUAL(expires, 7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "authenticate: UNAVAILABLE"));
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

static void test_client_unreachable(void)
{
    struct slotd_client *c = client_at("127.0.0.1:1", 500, 2);
    struct slotd_write_result *r = (struct slotd_write_result *)1;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_client_put(c, "k", 1, "v", 1, NULL, &r, &e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(slotd_error_code(e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 3);
    CU_ASSERT_EQUAL(slotd_error_grpc_status(e), 14);
    CU_ASSERT_STRING_EQUAL(slotd_error_address(e), "127.0.0.1:1");
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "put: UNAVAILABLE"));
    struct slotd_error *first = e;
    /* without a request id an ambiguous failure is not retried; the old error is replaced */
    struct slotd_write_options *wo = slotd_write_options_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wo);
    slotd_write_options_set_no_request_id(wo, true);
    CU_ASSERT_EQUAL(slotd_client_put(c, "k", 1, "v", 1, wo, &r, &e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 1);
    (void)first; /* destroyed by the call that replaced it (ASan would see a leak otherwise) */
    slotd_write_options_set_no_request_id(wo, false);
    CU_ASSERT_EQUAL(slotd_write_options_set_request_id(wo, "", 0), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_client_put(c, "k", 1, "v", 1, wo, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "request_id");
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_EQUAL(slotd_write_options_set_request_id(wo, "x", SLOTD_REQUEST_ID_LEN_MAX + 1),
                    SLOTD_CLIENT_EINVAL);
    /* a lease only goes with a put */
    CU_ASSERT_EQUAL(slotd_write_options_set_request_id(wo, NULL, 0), SLOTD_CLIENT_OK);
    slotd_write_options_set_lease(wo, 5);
    CU_ASSERT_EQUAL(slotd_client_delete(c, "k", 1, wo, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "lease");
    slotd_write_options_destroy(wo);
    /* a bad consistency is refused before any call, naming the option */
    struct slotd_read_options *ro = slotd_read_options_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ro);
    slotd_read_options_set_consistency(ro, 7);
    struct slotd_value *v = (struct slotd_value *)1;
    CU_ASSERT_EQUAL(slotd_client_get(c, "k", 1, ro, &v, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(v);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "consistency");
    slotd_read_options_destroy(ro);
    /* err NULL: the caller does not want the error object */
    CU_ASSERT_EQUAL(slotd_client_get(c, "k", 1, NULL, &v, NULL), SLOTD_CLIENT_EUNAVAILABLE);
    struct slotd_route *route = (struct slotd_route *)1;
    CU_ASSERT_EQUAL(slotd_client_route_fetch(c, &route, &e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NULL(route);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "route: "));
    int serving = 9;
    CU_ASSERT_EQUAL(slotd_client_health_check(c, "127.0.0.1:1", &serving, &e),
                    SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_EQUAL(serving, SLOTD_HEALTH_UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "health: UNAVAILABLE"));
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

/* Lease ids: hash slot << 48 | sequence >= 1; anything else names no hash slot. */
static void test_lease_hash_slot(void)
{
    CU_ASSERT_EQUAL(slotd_lease_hash_slot((UINT64_C(0) << 48) | 1), 0);
    CU_ASSERT_EQUAL(slotd_lease_hash_slot((UINT64_C(77) << 48) | 5), 77);
    CU_ASSERT_EQUAL(slotd_lease_hash_slot((UINT64_C(255) << 48) | ((UINT64_C(1) << 48) - 1)), 255);
    CU_ASSERT_EQUAL(slotd_lease_hash_slot(0), -1);
    CU_ASSERT_EQUAL(slotd_lease_hash_slot(UINT64_C(9) << 48), -1);
    CU_ASSERT_EQUAL(slotd_lease_hash_slot((UINT64_C(256) << 48) | 1), -1);
    CU_ASSERT_EQUAL(slotd_lease_hash_slot(UINT64_MAX), -1);
}

/* ---- slotctl's command line ------------------------------------------------------------ */

static int parse(struct slotctl_args *a, char *err, int argc, ...)
{
    char *argv[16] = {"slotctl"};
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i + 1] = va_arg(ap, char *);
    va_end(ap);
    return slotctl_args_parse(argc + 1, argv, a, err, 256);
}

static void test_slotctl_args(void)
{
    struct slotctl_args a;
    char err[256];
    unsetenv("SLOTD_ENDPOINTS");
    CU_ASSERT_EQUAL(parse(&a, err, 3, "put", "k", "v"), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_PUT);
    CU_ASSERT_STRING_EQUAL(a.endpoints, SLOTCTL_ENDPOINTS_DEFAULT);
    CU_ASSERT_EQUAL(
        parse(&a, err, 7, "--json", "--endpoints", "a:1,b:2", "get", "k", "--consistency", "local"),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_TRUE(a.json);
    CU_ASSERT_STRING_EQUAL(a.endpoints, "a:1,b:2");
    CU_ASSERT_EQUAL(a.consistency, SLOTD_CONSISTENCY_LOCAL);
    CU_ASSERT_STRING_EQUAL(a.pos[0], "k");
    CU_ASSERT_EQUAL(parse(&a, err, 4, "get", "k", "--consistency", "eventual"), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "eventual"));
    CU_ASSERT_EQUAL(parse(&a, err, 4, "cas", "k", "7", "v"), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(parse(&a, err, 4, "cas", "--delete", "k", "7"), SLOTCTL_EXIT_OK);
    CU_ASSERT_TRUE(a.cas_delete);
    CU_ASSERT_EQUAL(parse(&a, err, 4, "cas", "k", "x7", "v"), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_EQUAL(parse(&a, err, 2, "put", "k"), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "takes 2 arguments"));
    CU_ASSERT_EQUAL(parse(&a, err, 2, "frob", "k"), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_EQUAL(parse(&a, err, 0), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_EQUAL(parse(&a, err, 3, "--deadline-ms", "0", "route"), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_EQUAL(parse(&a, err, 3, "--deadline-ms", "250", "route"), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.deadline_ms, 250);
    CU_ASSERT_EQUAL(parse(&a, err, 4, "put", "--", "-k", "-v"), SLOTCTL_EXIT_OK);
    CU_ASSERT_STRING_EQUAL(a.pos[0], "-k");
    CU_ASSERT_EQUAL(parse(&a, err, 4, "bench", "--op", "put", "--json"), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_BENCH);
    CU_ASSERT_EQUAL(a.bench_argc, 3);
    CU_ASSERT_FALSE(a.json); /* bench's arguments are slotbench's */
    CU_ASSERT_EQUAL(parse(&a, err, 1, "--help"), SLOTCTL_EXIT_OK);
    CU_ASSERT_TRUE(a.help);
    setenv("SLOTD_ENDPOINTS", "e:9", 1);
    CU_ASSERT_EQUAL(parse(&a, err, 1, "route"), SLOTCTL_EXIT_OK);
    CU_ASSERT_STRING_EQUAL(a.endpoints, "e:9");
    unsetenv("SLOTD_ENDPOINTS");

    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_OK), 0);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_ECAS_MISMATCH), 3);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_EPRECONDITION), 3);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_EUNAVAILABLE), 4);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_ETIMEOUT), 4);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_EINVAL), 5);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_EMALFORMED), 6);
}

/* ---- admin task commands and TaskStatus ------------------------------------------------- */

static void test_admin_task_encoding(void)
{
    uint8_t buf[SLOTD__ADMIN_REQUEST_MAX];
    size_t len = 0;
    const char *method = NULL, *op = NULL;
    struct slotd_status st;

    struct slotd_admin_command w = {.kind = SLOTD_ADMIN_MOVE_REPLICA,
                                  .group_id = 3,
                                  .from_node = 2,
                                  .to_node = 5,
                                  .expected_revision = 11};
    slotd_call_status_reset(&st);
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/MoveReplica");
    CU_ASSERT_STRING_EQUAL(op, "move replica");
    Slotd__V1__MoveReplicaRequest *mv = slotd__v1__move_replica_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mv);
    CU_ASSERT_EQUAL(mv->group_id, 3);
    CU_ASSERT_EQUAL(mv->from_node, 2);
    CU_ASSERT_EQUAL(mv->to_node, 5);
    CU_ASSERT_EQUAL(mv->expected_revision, 11);
    CU_ASSERT_FALSE(mv->no_forward);
    slotd__v1__move_replica_request__free_unpacked(mv, NULL);

    w = (struct slotd_admin_command){
        .kind = SLOTD_ADMIN_TRANSFER_LEADER, .group_id = 4, .to_node = 1};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/TransferLeader");
    Slotd__V1__TransferLeaderRequest *tl =
        slotd__v1__transfer_leader_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tl);
    CU_ASSERT_EQUAL(tl->group_id, 4);
    CU_ASSERT_EQUAL(tl->to_node, 1);
    slotd__v1__transfer_leader_request__free_unpacked(tl, NULL);

    w = (struct slotd_admin_command){.kind = SLOTD_ADMIN_RETRY_TASK, .task_id = 42};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/RetryTask");
    Slotd__V1__RetryTaskRequest *rt = slotd__v1__retry_task_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_EQUAL(rt->task_id, 42);
    slotd__v1__retry_task_request__free_unpacked(rt, NULL);

    w = (struct slotd_admin_command){.kind = SLOTD_ADMIN_DRAIN_NODE, .node_id = 5};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/DrainNode");
    w.kind = SLOTD_ADMIN_PROMOTE_CONTROLLER_VOTER;
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/PromoteControllerVoter");
    Slotd__V1__PromoteControllerVoterRequest *pv =
        slotd__v1__promote_controller_voter_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pv);
    CU_ASSERT_EQUAL(pv->node_id, 5);
    slotd__v1__promote_controller_voter_request__free_unpacked(pv, NULL);

    /* the other table-encoded kinds: each field from the command, no_forward false */
    w = (struct slotd_admin_command){
        .kind = SLOTD_ADMIN_ABORT_TASK, .task_id = 43, .node_id = 9, .expected_revision = 8};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/AbortTask");
    CU_ASSERT_STRING_EQUAL(op, "abort task");
    Slotd__V1__AbortTaskRequest *at = slotd__v1__abort_task_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    CU_ASSERT_EQUAL(at->task_id, 43);
    CU_ASSERT_EQUAL(at->expected_revision, 8);
    CU_ASSERT_FALSE(at->no_forward);
    slotd__v1__abort_task_request__free_unpacked(at, NULL);
    w = (struct slotd_admin_command){.kind = SLOTD_ADMIN_ACTIVATE_NODE, .node_id = 6};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/ActivateNode");
    Slotd__V1__ActivateNodeRequest *an = slotd__v1__activate_node_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(an);
    CU_ASSERT_EQUAL(an->node_id, 6);
    slotd__v1__activate_node_request__free_unpacked(an, NULL);
    w = (struct slotd_admin_command){
        .kind = SLOTD_ADMIN_SET_BALANCE, .enabled = true, .expected_revision = 2};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/SetBalance");
    Slotd__V1__SetBalanceRequest *sb = slotd__v1__set_balance_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sb);
    CU_ASSERT_TRUE(sb->enabled);
    CU_ASSERT_EQUAL(sb->expected_revision, 2);
    slotd__v1__set_balance_request__free_unpacked(sb, NULL);
    w = (struct slotd_admin_command){
        .kind = SLOTD_ADMIN_SET_PREFERRED_LEADER, .group_id = 7, .node_id = 3};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/SetPreferredLeader");
    CU_ASSERT_STRING_EQUAL(op, "set preferred leader");
    Slotd__V1__SetPreferredLeaderRequest *sp =
        slotd__v1__set_preferred_leader_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    CU_ASSERT_EQUAL(sp->group_id, 7);
    CU_ASSERT_EQUAL(sp->node_id, 3);
    slotd__v1__set_preferred_leader_request__free_unpacked(sp, NULL);

    /* all 256 hash slots, given in descending order: sent ascending, and they fit */
    uint32_t slots[SLOTD_HASH_SLOTS];
    for (uint32_t i = 0; i < SLOTD_HASH_SLOTS; i++)
        slots[i] = SLOTD_HASH_SLOTS - 1 - i;
    w = (struct slotd_admin_command){.kind = SLOTD_ADMIN_MIGRATE_HASH_SLOTS,
                                   .hash_slots = slots,
                                   .hash_slot_count = SLOTD_HASH_SLOTS,
                                   .to_group = 9,
                                   .expected_revision = 3};
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_STRING_EQUAL(method, "/slotd.v1.Admin/MigrateHashSlots");
    CU_ASSERT(len <= SLOTD__ADMIN_REQUEST_MAX);
    Slotd__V1__MigrateHashSlotsRequest *mg =
        slotd__v1__migrate_hash_slots_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mg);
    CU_ASSERT_EQUAL(mg->to_group, 9);
    CU_ASSERT_EQUAL(mg->expected_revision, 3);
    CU_ASSERT_EQUAL_FATAL(mg->n_hash_slots, SLOTD_HASH_SLOTS);
    for (uint32_t i = 0; i < SLOTD_HASH_SLOTS; i++)
        CU_ASSERT_EQUAL(mg->hash_slots[i], i);
    slotd__v1__migrate_hash_slots_request__free_unpacked(mg, NULL);

    /* bad lists: each names the field and the value, no bytes are produced */
    static const struct {
        uint32_t slots[3];
        size_t n;
        const char *msg;
    } bad[] = {
        {{1, 2, 256}, 3, "hash_slots: 256 not in 0..255"},
        {{7, 1, 7}, 3, "hash_slots: 7 given twice"},
        {{0}, 0, "hash_slots: 0 given, must be 1..256"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        w.hash_slots = bad[i].slots;
        w.hash_slot_count = bad[i].n;
        slotd_call_status_reset(&st);
        len = 0;
        CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st),
                        SLOTD_CLIENT_EINVAL);
        CU_ASSERT_STRING_EQUAL(st.message, bad[i].msg);
        CU_ASSERT_STRING_EQUAL(st.field, "hash_slots");
        CU_ASSERT_EQUAL(st.limit, SLOTD_HASH_SLOTS);
        CU_ASSERT_EQUAL(len, 0);
    }
    w.hash_slots = NULL;
    w.hash_slot_count = 2;
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st),
                    SLOTD_CLIENT_EINVAL);
    w.kind = (enum slotd_admin_kind)99;
    CU_ASSERT_EQUAL(slotd__admin_write_encode(&w, buf, &len, &method, &op, &st),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(st.message, "unknown admin command kind 99");
}

/* Packs a TaskStatusResponse holding n tasks (listed) or one (by id) into a malloc'd buffer. */
static uint8_t *task_response(size_t n, bool by_id, size_t participants, size_t *len)
{
    static uint64_t parts[SLOTD_TASK_PARTICIPANTS_MAX + 2];
    static uint32_t slots[] = {3, 7, 10};
    Slotd__V1__Task *tasks = calloc(n, sizeof(*tasks));
    Slotd__V1__Task **ptrs = calloc(n, sizeof(*ptrs));
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        parts[i] = i + 1;
    for (size_t i = 0; i < n; i++) {
        slotd__v1__task__init(&tasks[i]);
        tasks[i].task_id = i + 1;
        tasks[i].kind = (char *)(i ? "replica_move" : "hash_slot_migration");
        tasks[i].status = (char *)"running";
        tasks[i].phase = (char *)"catch_up";
        tasks[i].phase_index = 1;
        tasks[i].attempt = 2;
        tasks[i].last_error = (char *)"slow";
        tasks[i].group_id = 4;
        tasks[i].source_node = 2;
        tasks[i].target_node = 5;
        tasks[i].n_participants = participants;
        tasks[i].participants = parts;
        tasks[i].bytes_sent = 10;
        tasks[i].bytes_total = 20;
        tasks[i].target_match = 30;
        tasks[i].commit = 40;
        tasks[i].created_ms = 50;
        tasks[i].updated_ms = 60;
        tasks[i].revision = 70;
        tasks[i].to_group = i ? 0 : 6;
        tasks[i].n_hash_slots = i ? 0 : 3;
        tasks[i].hash_slots = slots;
        ptrs[i] = &tasks[i];
    }
    Slotd__V1__TaskStatusResponse resp = SLOTD__V1__TASK_STATUS_RESPONSE__INIT;
    resp.revision = 77;
    if (by_id) {
        resp.task = n ? ptrs[0] : NULL;
    } else {
        resp.n_tasks = n;
        resp.tasks = ptrs;
    }
    *len = slotd__v1__task_status_response__get_packed_size(&resp);
    uint8_t *buf = malloc(*len + 1);
    slotd__v1__task_status_response__pack(&resp, buf);
    free(ptrs);
    free(tasks);
    return buf;
}

static void test_task_status_decode(void)
{
    struct slotd_task_list *ts = calloc(1, sizeof(*ts));
    struct slotd_status st;
    size_t len;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    uint8_t *buf = task_response(1, true, 2, &len);
    memset(ts, 0, sizeof(*ts));
    CU_ASSERT_EQUAL(slotd__task_status_decode(buf, len, true, ts, &st), SLOTD_CLIENT_OK);
    free(buf);
    CU_ASSERT_EQUAL_FATAL(slotd_task_list_count(ts), 1);
    CU_ASSERT_EQUAL(slotd_task_list_revision(ts), 77);
    const struct slotd_task *t = slotd_task_list_at(ts, 0);
    CU_ASSERT_PTR_NULL(slotd_task_list_at(ts, 1));
    CU_ASSERT_EQUAL(t->task_id, 1);
    CU_ASSERT_STRING_EQUAL(t->kind, "hash_slot_migration");
    CU_ASSERT_STRING_EQUAL(t->status, "running");
    CU_ASSERT_STRING_EQUAL(t->phase, "catch_up");
    CU_ASSERT_STRING_EQUAL(t->last_error, "slow");
    CU_ASSERT_EQUAL(t->phase_index, 1);
    CU_ASSERT_EQUAL(t->attempt, 2);
    CU_ASSERT_EQUAL(t->group_id, 4);
    CU_ASSERT_EQUAL(t->source_node, 2);
    CU_ASSERT_EQUAL(t->target_node, 5);
    CU_ASSERT_EQUAL(t->participant_count, 2);
    CU_ASSERT_EQUAL(t->participants[1], 2);
    CU_ASSERT_EQUAL(t->bytes_sent, 10);
    CU_ASSERT_EQUAL(t->bytes_total, 20);
    CU_ASSERT_EQUAL(t->target_match, 30);
    CU_ASSERT_EQUAL(t->commit, 40);
    CU_ASSERT_EQUAL(t->created_ms, 50);
    CU_ASSERT_EQUAL(t->updated_ms, 60);
    CU_ASSERT_EQUAL(t->revision, 70);
    CU_ASSERT_EQUAL(t->to_group, 6);
    CU_ASSERT_EQUAL(t->hash_slot_count, 3);
    CU_ASSERT_EQUAL(t->hash_slots[2], 10);
    CU_ASSERT_FALSE(slotd_task_finished(t));
    slotd_task_list_destroy(ts);

    /* a full list (the controller keeps at most 64), oldest first */
    buf = task_response(SLOTD_TASKS_MAX, false, 1, &len);
    ts = calloc(1, sizeof(*ts));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    CU_ASSERT_EQUAL(slotd__task_status_decode(buf, len, false, ts, &st), SLOTD_CLIENT_OK);
    free(buf);
    CU_ASSERT_EQUAL(slotd_task_list_count(ts), SLOTD_TASKS_MAX);
    CU_ASSERT_EQUAL(slotd_task_list_at(ts, SLOTD_TASKS_MAX - 1)->task_id, SLOTD_TASKS_MAX);
    CU_ASSERT_STRING_EQUAL(slotd_task_list_at(ts, 1)->kind, "replica_move");
    slotd_task_list_destroy(ts);
    buf = task_response(0, false, 0, &len); /* no tasks */
    ts = calloc(1, sizeof(*ts));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ts);
    CU_ASSERT_EQUAL(slotd__task_status_decode(buf, len, false, ts, &st), SLOTD_CLIENT_OK);
    free(buf);
    CU_ASSERT_EQUAL(slotd_task_list_count(ts), 0);
    CU_ASSERT_EQUAL(slotd_task_list_revision(ts), 77);

    /* bounds and shape errors name what is wrong and leave nothing allocated */
    static const struct {
        size_t n;
        bool by_id;
        size_t participants;
        const char *msg;
    } bad[] = {
        {SLOTD_TASKS_MAX + 1, false, 0, "tasks: 65 listed, more than 64"},
        {1, false, SLOTD_TASK_PARTICIPANTS_MAX + 1, "task 1: 17 participants exceed 16"},
        {0, true, 0, "task: missing from the answer"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        buf = task_response(bad[i].n, bad[i].by_id, bad[i].participants, &len);
        memset(ts, 0, sizeof(*ts));
        CU_ASSERT_EQUAL(slotd__task_status_decode(buf, len, bad[i].by_id, ts, &st),
                        SLOTD_CLIENT_EMALFORMED);
        free(buf);
        CU_ASSERT_STRING_EQUAL(st.message, bad[i].msg);
        CU_ASSERT_PTR_NULL(ts->tasks);
        CU_ASSERT_EQUAL(slotd_task_list_count(ts), 0);
    }
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    memset(ts, 0, sizeof(*ts));
    CU_ASSERT_EQUAL(slotd__task_status_decode(junk, sizeof(junk), true, ts, &st),
                    SLOTD_CLIENT_EMALFORMED);
    CU_ASSERT_STRING_EQUAL(st.message, "response is not a TaskStatusResponse");
    struct slotd_task done = {.status = "done"}, failed = {.status = "failed"};
    CU_ASSERT_TRUE(slotd_task_finished(&done));
    CU_ASSERT_TRUE(slotd_task_finished(&failed));
    slotd_task_list_destroy(ts);
}

static void test_controller_status_decode(void)
{
    Slotd__V1__ControllerStatusResponse m = SLOTD__V1__CONTROLLER_STATUS_RESPONSE__INIT;
    m.node_id = 4;
    m.role = (char *)"mirror";
    m.term = 0;
    m.commit_index = 0;
    m.revision = 31;
    m.applied_index = 110;
    m.snapshot_index = 7;
    m.state_file_revision = 30;
    m.state_file_age_ms = -1;
    m.mirror_lag_ms = 450;
    m.leader = 2;
    uint8_t buf[256];
    size_t len = slotd__v1__controller_status_response__pack(&m, buf);
    struct slotd_controller_status cs;
    struct slotd_status st;
    memset(&cs, 0, sizeof(cs));
    CU_ASSERT_EQUAL(slotd__controller_status_decode(buf, len, &cs, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(cs.node_id, 4);
    CU_ASSERT_STRING_EQUAL(cs.role, "mirror");
    CU_ASSERT_EQUAL(cs.term, 0);
    CU_ASSERT_EQUAL(cs.revision, 31);
    CU_ASSERT_EQUAL(cs.applied_index, 110);
    CU_ASSERT_EQUAL(cs.snapshot_index, 7);
    CU_ASSERT_EQUAL(cs.state_file_revision, 30);
    CU_ASSERT_EQUAL(cs.state_file_age_ms, -1);
    CU_ASSERT_EQUAL(cs.mirror_lag_ms, 450);
    CU_ASSERT_EQUAL(cs.leader, 2);

    /* a voter's answer; a role longer than the buffer is cut, not overrun */
    char role[64];
    memset(role, 'r', sizeof(role) - 1);
    role[sizeof(role) - 1] = '\0';
    m.role = role;
    m.term = 9;
    m.commit_index = 120;
    m.mirror_lag_ms = -1;
    len = slotd__v1__controller_status_response__pack(&m, buf);
    memset(&cs, 0, sizeof(cs));
    CU_ASSERT_EQUAL(slotd__controller_status_decode(buf, len, &cs, &st), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(strlen(cs.role), SLOTD_CONTROLLER_ROLE_LEN - 1);
    CU_ASSERT_EQUAL(cs.term, 9);
    CU_ASSERT_EQUAL(cs.commit_index, 120);
    CU_ASSERT_EQUAL(cs.mirror_lag_ms, -1);

    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    memset(&cs, 0, sizeof(cs));
    CU_ASSERT_EQUAL(slotd__controller_status_decode(junk, sizeof(junk), &cs, &st),
                    SLOTD_CLIENT_EMALFORMED);
    CU_ASSERT_STRING_EQUAL(st.message, "response is not a ControllerStatusResponse");
    CU_ASSERT_EQUAL(cs.node_id, 0);
}

/* Typed helpers: the members command's bounds name the field, the packed request carries the
 * command, the request id and no_forward, and a NULL id is refused with no call. */
static void test_meta_request_building(void)
{
    static const char *uids[SLOTD_META_UIDS_MAX + 1];
    for (size_t i = 0; i <= SLOTD_META_UIDS_MAX; i++)
        uids[i] = "u";
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__SubscribersCommand sub = SLOTD__V1__SUBSCRIBERS_COMMAND__INIT;
    Slotd__V1__ChannelListCommand cl = SLOTD__V1__CHANNEL_LIST_COMMAND__INIT;
    char field[SLOTD_FIELD_LEN], what[128];
    CU_ASSERT_EQUAL(slotd__meta_members_build(&m, &sub, &cl, "g", 2, SLOTD_MEMBER_LIST_SUBSCRIBERS,
                                              true, uids, SLOTD_META_UIDS_MAX + 1, 0, field,
                                              sizeof(field), what, sizeof(what)),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(field, "add_subscribers.uids");
    CU_ASSERT_PTR_NOT_NULL(strstr(what, "1001 entries, want 1..1000"));
    CU_ASSERT_EQUAL(slotd__meta_members_build(&m, &sub, &cl, "g", 2, SLOTD_MEMBER_LIST_DENYLIST,
                                              false, uids, 0, 0, field, sizeof(field), what,
                                              sizeof(what)),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(field, "remove_denylist.uids");
    CU_ASSERT_EQUAL(slotd__meta_members_build(&m, &sub, &cl, "g", 2, SLOTD_MEMBER_LIST_ALLOWLIST,
                                              true, uids, 1, 7, field, sizeof(field), what,
                                              sizeof(what)),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(field, "add_allowlist.expected_version");
    CU_ASSERT_EQUAL(slotd__meta_members_build(&m, &sub, &cl, "g", 2, (enum slotd_member_list)9,
                                              true, uids, 1, 0, field, sizeof(field), what,
                                              sizeof(what)),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(field, "list");
    CU_ASSERT_EQUAL(m.command_case, SLOTD__V1__PROPOSE_REQUEST__COMMAND__NOT_SET);

    CU_ASSERT_EQUAL(slotd__meta_members_build(&m, &sub, &cl, "g", 2, SLOTD_MEMBER_LIST_DENYLIST,
                                              false, uids, 3, 0, field, sizeof(field), what,
                                              sizeof(what)),
                    SLOTD_CLIENT_OK);
    struct slotd_write_options *wo = slotd_write_options_create();
    CU_ASSERT_EQUAL(slotd_write_options_set_request_id(wo, "rid-1", 5), SLOTD_CLIENT_OK);
    static const uint8_t random_id[SLOTD_REQUEST_ID_LEN_DEFAULT] = {1};
    uint8_t *buf;
    size_t len;
    CU_ASSERT_EQUAL(slotd__meta_propose_encode(&m, wo, random_id, &buf, &len), SLOTD_CLIENT_OK);
    Slotd__V1__ProposeRequest *back = slotd__v1__propose_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(back->command_case, SLOTD__V1__PROPOSE_REQUEST__COMMAND_REMOVE_DENYLIST);
    CU_ASSERT_STRING_EQUAL(back->remove_denylist->channel_id, "g");
    CU_ASSERT_EQUAL(back->remove_denylist->channel_type, 2);
    CU_ASSERT_EQUAL(back->remove_denylist->n_uids, 3);
    CU_ASSERT_TRUE(back->no_forward);
    CU_ASSERT_EQUAL(back->request_id.len, 5);
    CU_ASSERT_EQUAL(memcmp(back->request_id.data, "rid-1", 5), 0);
    slotd__v1__propose_request__free_unpacked(back, NULL);
    free(buf);
    slotd_write_options_set_no_request_id(wo, true);
    CU_ASSERT_EQUAL(slotd__meta_propose_encode(&m, wo, random_id, &buf, &len), SLOTD_CLIENT_OK);
    back = slotd__v1__propose_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(back->request_id.len, 0);
    slotd__v1__propose_request__free_unpacked(back, NULL);
    free(buf);
    CU_ASSERT_EQUAL(slotd__meta_propose_encode(&m, NULL, random_id, &buf, &len), SLOTD_CLIENT_OK);
    back = slotd__v1__propose_request__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(back->request_id.len, SLOTD_REQUEST_ID_LEN_DEFAULT);
    CU_ASSERT_EQUAL(back->request_id.data[0], 1);
    slotd__v1__propose_request__free_unpacked(back, NULL);
    free(buf);
    slotd_write_options_destroy(wo);

    /* NULL ids: refused naming the field, no attempt (the endpoint would not answer anyway) */
    struct slotd_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(slotd_client_create("127.0.0.1:1", NULL, &c, NULL), SLOTD_CLIENT_OK);
    struct slotd_meta_result *r = (struct slotd_meta_result *)1;
    struct slotd_meta_page *p = (struct slotd_meta_page *)1;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_client_user_get(c, NULL, NULL, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "get_user.uid");
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_EQUAL(slotd_client_conversation_join(c, "alice", NULL, 2, 0, 0, NULL, &r, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "join_channel.channel_id");
    CU_ASSERT_EQUAL(slotd_client_members_add(c, "g", 2, SLOTD_MEMBER_LIST_SUBSCRIBERS, uids, 0, 0,
                                             NULL, &r, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "add_subscribers.uids");
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "member add: no call"));
    CU_ASSERT_EQUAL(slotd_client_event_list(c, NULL, 2, 0, NULL, 0, 0, NULL, &p, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "list_events.channel_id");
    slotd_error_destroy(e);
    slotd_client_destroy(c);
    slotd_meta_result_destroy(NULL);
    slotd_meta_page_destroy(NULL);
}

/* ---- propose stream ------------------------------------------------------------------- */

/* An item entry decodes back as a ProposeStreamRequest with the id and the request bytes; two
 * entries one after the other are two items (the message is their concatenation). */
static void test_propose_stream_encoding(void)
{
    Slotd__V1__PutCommand put = SLOTD__V1__PUT_COMMAND__INIT;
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    put.key = (ProtobufCBinaryData){5, (uint8_t *)"key-1"};
    put.value = (ProtobufCBinaryData){300, (uint8_t *)calloc(1, 300)};
    CU_ASSERT_PTR_NOT_NULL_FATAL(put.value.data);
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    req.put = &put;
    uint8_t rbuf[512];
    size_t rlen = slotd__v1__propose_request__pack(&req, rbuf);
    uint64_t ids[2] = {0, UINT64_MAX};
    uint8_t msg[1200];
    size_t used = 0;
    for (int i = 0; i < 2; i++) {
        size_t need = slotd__pstream_item_encode(ids[i], rbuf, rlen, NULL, 0);
        CU_ASSERT_EQUAL(slotd__pstream_item_encode(ids[i], rbuf, rlen, msg + used, need - 1),
                        need); /* too small: size only, nothing written */
        CU_ASSERT_EQUAL(slotd__pstream_item_encode(ids[i], rbuf, rlen, msg + used, need), need);
        used += need;
    }
    Slotd__V1__ProposeStreamRequest *m = slotd__v1__propose_stream_request__unpack(NULL, used, msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(m->n_items, 2);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(m->items[i]->id, ids[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m->items[i]->request);
        CU_ASSERT_EQUAL(m->items[i]->request->command_case,
                        SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT);
        CU_ASSERT_EQUAL(m->items[i]->request->put->key.len, 5);
        CU_ASSERT_EQUAL(memcmp(m->items[i]->request->put->key.data, "key-1", 5), 0);
        CU_ASSERT_EQUAL(m->items[i]->request->put->value.len, 300);
    }
    slotd__v1__propose_stream_request__free_unpacked(m, NULL);
    free(put.value.data);
}

/* Arguments refused before anything is sent, naming the field; the outstanding bound is an
 * explicit RESOURCE_EXHAUSTED error. The node is a listening socket that never accepts, so the
 * call gets no answer: its connection attempt fails after about 100 ms (the client's fast
 * reconnect), and the call ends UNAVAILABLE with its items unanswered. */
static void test_propose_stream_bounds(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sa_len = sizeof(sa);
    CU_ASSERT_FATAL(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
                    listen(fd, 16) == 0 && getsockname(fd, (struct sockaddr *)&sa, &sa_len) == 0);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
    struct slotd_client *c = client_at(addr, 200, 0);
    struct slotd_propose_stream *s = (struct slotd_propose_stream *)1;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_propose_stream_open(c, NULL, 4097, 0, &s, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "max_outstanding");
    CU_ASSERT_EQUAL(slotd_propose_stream_open(c, NULL, 4, -1, &s, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "timeout_ms");
    CU_ASSERT_EQUAL(slotd_propose_stream_open(c, "", 4, 0, &s, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "address");
    CU_ASSERT_EQUAL(slotd_propose_stream_open(NULL, NULL, 4, 0, &s, &e), SLOTD_CLIENT_EINVAL);

    CU_ASSERT_EQUAL_FATAL(slotd_propose_stream_open(c, NULL, 3, 0, &s, &e), SLOTD_CLIENT_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(slotd_propose_stream_outstanding(s), 0);
    struct slotd_propose_stream_result *none = (struct slotd_propose_stream_result *)1;
    CU_ASSERT_EQUAL(slotd_propose_stream_next(s, 0, &none, &e), SLOTD_CLIENT_EPRECONDITION);
    CU_ASSERT_PTR_NULL(none);
    CU_ASSERT_EQUAL(slotd_propose_stream_put(s, 1, NULL, 0, "v", 1, NULL, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "put.key");
    CU_ASSERT_EQUAL(slotd_propose_stream_put(s, 1, "k", 1, NULL, 4, NULL, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "put.value");
    CU_ASSERT_EQUAL(slotd_propose_stream_submit(s, 1, "x", 0, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "request");
    CU_ASSERT_EQUAL(
        slotd_propose_stream_submit(s, 1, "x", SLOTD_PROPOSE_STREAM_REQUEST_MAX + 1, &e),
        SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_error_limit(e), SLOTD_PROPOSE_STREAM_REQUEST_MAX);
    CU_ASSERT_EQUAL(slotd_propose_stream_outstanding(s), 0);

    for (uint64_t id = 0; id < 3; id++)
        CU_ASSERT_EQUAL(slotd_propose_stream_put(s, id, "key-1", 5, "v", 1, NULL, &e),
                        SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_propose_stream_outstanding(s), 3);
    CU_ASSERT_EQUAL(slotd_propose_stream_put(s, 3, "key-1", 5, "v", 1, NULL, &e),
                    SLOTD_CLIENT_EEXHAUSTED);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "items");
    CU_ASSERT_EQUAL(slotd_error_limit(e), 3);
    CU_ASSERT_EQUAL(slotd_propose_stream_outstanding(s), 3);
    struct slotd_propose_stream_result *r = (struct slotd_propose_stream_result *)1;
    CU_ASSERT_EQUAL(slotd_propose_stream_next(s, 0, &r, &e), SLOTD_CLIENT_ETIMEOUT);
    CU_ASSERT_PTR_NULL(r);
    int rc = slotd_propose_stream_next(s, 5000, &r, &e);
    CU_ASSERT_PTR_NULL(r);
    /* the call to a node that never answers ends UNAVAILABLE; its three items have no result */
    CU_ASSERT_EQUAL(rc, SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "3 items without a result"));
    CU_ASSERT_EQUAL(slotd_propose_stream_submit(s, 9, "x", 1, &e), SLOTD_CLIENT_EUNAVAILABLE);
    slotd_propose_stream_close_send(s);
    slotd_propose_stream_destroy(s);

    /* a stream that never got anywhere: destroy cancels it with items queued */
    CU_ASSERT_EQUAL_FATAL(slotd_propose_stream_open(c, addr, 0, 100, &s, &e), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_propose_stream_put(s, 7, "k", 1, "", 0, NULL, &e), SLOTD_CLIENT_OK);
    slotd_propose_stream_close_send(s);
    CU_ASSERT_EQUAL(slotd_propose_stream_submit(s, 8, "x", 1, &e), SLOTD_CLIENT_EPRECONDITION);
    slotd_propose_stream_destroy(s);
    slotd_propose_stream_destroy(NULL);
    slotd_propose_stream_result_destroy(NULL);
    slotd_error_destroy(e);
    slotd_client_destroy(c);
    close(fd);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("cclient", NULL, NULL);
    CU_add_test(s, "hash slots match zlib crc32 % 256", test_crc32_known_values);
    CU_add_test(s, "route decode, leader lookup, hints", test_route_decode_and_leader);
    CU_add_test(s, "route decode rejects bad input", test_route_decode_rejects_bad_input);
    CU_add_test(s, "ErrorDetail decode", test_error_detail_decode);
    CU_add_test(s, "retry policy, backoff, error names", test_retry_policy);
    CU_add_test(s, "endpoints and options", test_endpoints_and_options);
    CU_add_test(s, "unreachable endpoint: bounded retries", test_client_unreachable);
    CU_add_test(s, "last revision only rises", test_last_revision);
    CU_add_test(s, "lease ids name their hash slot", test_lease_hash_slot);
    CU_add_test(s, "tokens: bounds, authenticate against nothing", test_token);
    CU_add_test(s, "slotctl arguments and exit codes", test_slotctl_args);
    CU_add_test(s, "admin task commands encode", test_admin_task_encoding);
    CU_add_test(s, "TaskStatus decode and bounds", test_task_status_decode);
    CU_add_test(s, "ControllerStatus decode", test_controller_status_decode);
    CU_add_test(s, "typed helpers build and refuse requests", test_meta_request_building);
    CU_add_test(s, "propose stream item encoding", test_propose_stream_encoding);
    CU_add_test(s, "propose stream bounds and argument errors", test_propose_stream_bounds);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed() + CU_get_number_of_failures();
    CU_cleanup_registry();
    return failed != 0;
}
