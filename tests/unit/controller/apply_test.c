/* apply_test.c - every command's outcomes, expected_revision, bad commands, builders, determinism.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"

/* The command a builder just wrote to *cmd, after checking the builder succeeded. */
static char *built(int rc, char **cmd)
{
    CU_ASSERT_EQUAL_FATAL(rc, CTL_OK);
    return *cmd;
}
#define OK(expr) built((expr), &cmd)

#define expect ctl_test_check

static struct ctl_state *empty_state(void)
{
    struct ctl_state *s = malloc(sizeof(*s));
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ctl_state_init(s);
    return s;
}

static void test_bootstrap(void)
{
    struct ctl_state *s = empty_state();
    char *cmd;
    struct ctl_config cfg = {.slot_groups = 4, .replicas = 3, .bootstrap_expect = 3};
    struct ctl_cmd_node nodes[] = {{2, "b:1", 0}, {1, "a:1", 0}};
    /* Not bootstrapped yet: other commands are refused. */
    expect(s, OK(ctl_cmd_join_node(9, "z:9", NULL, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "cluster not bootstrapped");
    cfg.replicas = 9;
    expect(s, OK(ctl_cmd_bootstrap("c1", &cfg, nodes, 2, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "config.replicas: 9 not in 1..7");
    cfg.replicas = 3;
    expect(s, OK(ctl_cmd_bootstrap("c 1", &cfg, nodes, 2, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "cluster_id: \"c 1\" is not");
    expect(s, OK(ctl_cmd_bootstrap("c1", &cfg, nodes, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "nodes: empty");
    struct ctl_cmd_node dup[] = {{1, "a:1", 0}, {1, "b:1", 0}};
    expect(s, OK(ctl_cmd_bootstrap("c1", &cfg, dup, 2, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "nodes[1].id: 1 is listed twice");
    /* Two nodes, bootstrap_expect 3: nodes are voters, no placement yet. */
    expect(s, OK(ctl_cmd_bootstrap("c1", &cfg, nodes, 2, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(s->revision, 1);
    CU_ASSERT_STRING_EQUAL(s->cluster_id, "c1");
    CU_ASSERT_EQUAL(s->n_nodes, 2);
    CU_ASSERT_EQUAL(s->nodes[0].id, 1);
    CU_ASSERT_EQUAL(s->nodes[0].roles, CTL_ROLE_CONTROLLER_VOTER | CTL_ROLE_DATA);
    CU_ASSERT_EQUAL(s->nodes[1].join_state, CTL_JOIN_ACTIVE);
    CU_ASSERT_EQUAL(s->nodes[1].weight, CTL_WEIGHT_DEFAULT);
    CU_ASSERT_EQUAL(s->n_groups, 0);
    CU_ASSERT_EQUAL(s->table.version, 0);
    expect(s, OK(ctl_cmd_bootstrap("c1", &cfg, nodes, 2, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "cluster already bootstrapped (revision 1)");
    /* A third node joins; activating it reaches bootstrap_expect and places in the same apply. */
    expect(s, OK(ctl_cmd_join_node(3, "c:1", NULL, 0, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(s->n_groups, 0);
    expect(s, OK(ctl_cmd_activate_node(3, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(s->revision, 3);
    CU_ASSERT_EQUAL(s->n_groups, 4);
    CU_ASSERT_EQUAL(s->table.version, 1);
    CU_ASSERT_EQUAL(s->groups[0].n_peers, 3);
    free(s);

    /* Enough nodes at bootstrap: placement in the bootstrap apply itself. */
    s = empty_state();
    cfg.bootstrap_expect = 2;
    expect(s, OK(ctl_cmd_bootstrap("c1", &cfg, nodes, 2, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(s->revision, 1);
    CU_ASSERT_EQUAL(s->n_groups, 4);
    CU_ASSERT_EQUAL(s->groups[3].n_peers, 2); /* min(replicas, active data nodes) */
    free(s);
}

/* Client addresses: carried by join_node, reported by the node itself with node_address, unique,
 * kept across an encode/decode of the state. */
static void test_node_addresses(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.6:7701", "10.0.0.6:7700", 0, 0, &cmd)),
           CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_STRING_EQUAL(ctl_state_node(s, 6)->client_address, "10.0.0.6:7700");
    expect(s, OK(ctl_cmd_join_node(7, "10.0.0.7:7701", "10.0.0.6:7700", 0, 0, &cmd)),
           CTL_OUTCOME_REJECTED, "client_address 10.0.0.6:7700 is already used by node 6");
    expect(s, OK(ctl_cmd_join_node(7, "10.0.0.7:7701", "10.0.0.7", 0, 0, &cmd)),
           CTL_OUTCOME_REJECTED, "client_address: \"10.0.0.7\" is not host:port");
    CU_ASSERT_PTR_NULL(ctl_state_node(s, 7));
    CU_ASSERT_STRING_EQUAL(ctl_state_node(s, 1)->client_address, "");
    expect(s, OK(ctl_cmd_node_address(1, "10.0.0.1:7700", "10.0.0.1:7800", 0, &cmd)),
           CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_STRING_EQUAL(ctl_state_node(s, 1)->client_address, "10.0.0.1:7800");
    expect(s, OK(ctl_cmd_node_address(1, "10.0.0.1:7700", "10.0.0.1:7800", 0, &cmd)),
           CTL_OUTCOME_NOOP, "already has address");
    uint64_t rev = s->revision;
    expect(s, OK(ctl_cmd_node_address(2, "10.0.0.2:7700", "10.0.0.1:7800", 0, &cmd)),
           CTL_OUTCOME_REJECTED, "client_address 10.0.0.1:7800 is already used by node 1");
    expect(s, OK(ctl_cmd_node_address(2, "10.0.0.1:7700", "10.0.0.2:7800", 0, &cmd)),
           CTL_OUTCOME_REJECTED, "address 10.0.0.1:7700 is already used by node 1");
    expect(s, OK(ctl_cmd_node_address(2, "10.0.0.2:7700", "", 0, &cmd)), CTL_OUTCOME_REJECTED,
           "client_address: \"\" is not host:port");
    expect(s, OK(ctl_cmd_node_address(99, "10.0.0.99:7700", "10.0.0.99:7800", 0, &cmd)),
           CTL_OUTCOME_REJECTED, "id: node 99 is unknown");
    CU_ASSERT_EQUAL(s->revision, rev);
    CU_ASSERT_STRING_EQUAL(ctl_state_node(s, 2)->client_address, "");
    /* a peer port move is reported the same way */
    expect(s, OK(ctl_cmd_node_address(2, "10.0.0.2:7711", "10.0.0.2:7800", 0, &cmd)),
           CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_STRING_EQUAL(ctl_state_node(s, 2)->address, "10.0.0.2:7711");
    char *json = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(ctl_state_encode(s, &json, &len), CTL_OK);
    struct ctl_state *d = malloc(sizeof(*d));
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(json, len, d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_STRING_EQUAL(ctl_state_node(d, 1)->client_address, "10.0.0.1:7800");
    CU_ASSERT_STRING_EQUAL(ctl_state_node(d, 3)->client_address, "");
    ctl_free(json);
    free(d);
    free(s);
}

/* Zones: reported by the node itself with node_zone, checked where applied (charset, length, an
 * existing node that is not removed), kept across an encode/decode of the state. */
static void test_node_zone(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    expect(s, OK(ctl_cmd_node_zone(1, "rack-a.1", &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_STRING_EQUAL(ctl_state_node(s, 1)->zone, "rack-a.1");
    expect(s, OK(ctl_cmd_node_zone(1, "rack-a.1", &cmd)), CTL_OUTCOME_NOOP,
           "already in zone \"rack-a.1\"");
    CU_ASSERT_EQUAL(ctl_cmd_node_zone(1, "Rack A", &cmd), CTL_EINVALID); /* the builder checks */
    uint64_t rev = s->revision;
    /* and so does the apply, for a command built elsewhere */
    expect(s, strdup("{\"id\":2,\"op\":\"node_zone\",\"zone\":\"Rack A\"}"), CTL_OUTCOME_REJECTED,
           "zone: \"Rack A\" is not 0..32 bytes of [a-z0-9._-]");
    expect(s,
           strdup("{\"id\":2,\"op\":\"node_zone\",\"zone\":"
                  "\"abcdefghijklmnopqrstuvwxyz0123456\"}"),
           CTL_OUTCOME_REJECTED, "zone");
    expect(s, strdup("{\"id\":99,\"op\":\"node_zone\",\"zone\":\"b\"}"), CTL_OUTCOME_REJECTED,
           "id: node 99 is unknown");
    expect(s, strdup("{\"id\":2,\"op\":\"node_zone\",\"zone\":7}"), CTL_OUTCOME_REJECTED, "zone");
    CU_ASSERT_EQUAL(s->revision, rev);
    CU_ASSERT_STRING_EQUAL(ctl_state_node(s, 2)->zone, "");
    expect(s, OK(ctl_cmd_node_zone(2, "b", &cmd)), CTL_OUTCOME_CHANGED, "");
    char *json = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(ctl_state_encode(s, &json, &len), CTL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"zone\":\"rack-a.1\""));
    struct ctl_state *d = malloc(sizeof(*d));
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(json, len, d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_STRING_EQUAL(ctl_state_node(d, 1)->zone, "rack-a.1");
    CU_ASSERT_STRING_EQUAL(ctl_state_node(d, 2)->zone, "b");
    CU_ASSERT_STRING_EQUAL(ctl_state_node(d, 3)->zone, "");
    /* a state holding a bad zone does not validate (so it is never encoded or decoded) */
    snprintf(d->nodes[0].zone, sizeof(d->nodes[0].zone), "Rack A");
    CU_ASSERT_NOT_EQUAL(ctl_state_validate(d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nodes[0].zone: not 0..32 bytes of [a-z0-9._-]"));
    ctl_free(json);
    free(d);
    free(s);
}

static void test_join_node(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.6:7700", NULL, 0, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    const struct ctl_node *n = ctl_state_node(s, 6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_EQUAL(n->roles, CTL_ROLE_DATA);
    CU_ASSERT_EQUAL(n->join_state, CTL_JOIN_JOINING);
    CU_ASSERT_EQUAL(n->status, CTL_STATUS_ALIVE);
    CU_ASSERT_EQUAL(n->weight, 100);
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.6:7700", NULL, 0, 0, &cmd)), CTL_OUTCOME_NOOP,
           "already joined");
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.66:7700", NULL, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "node 6 already joined with another address (10.0.0.6:7700)");
    expect(s, OK(ctl_cmd_join_node(7, "10.0.0.6:7700", NULL, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "address 10.0.0.6:7700 is already used by node 6");
    expect(s, OK(ctl_cmd_join_node(7, "10.0.0.7", NULL, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "address: \"10.0.0.7\" is not host:port");
    expect(s, OK(ctl_cmd_join_node(7, "10.0.0.7:1", NULL, 1001, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "weight: 1001 not in 1..1000");
    expect(s, OK(ctl_cmd_join_node(0, "10.0.0.7:1", NULL, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "id: 0 not in 1..");
    for (uint64_t id = 7; s->n_nodes < CTL_NODES_MAX; id++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "10.0.1.%llu:7700", (unsigned long long)id);
        expect(s, OK(ctl_cmd_join_node(id, addr, NULL, 0, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    }
    expect(s, OK(ctl_cmd_join_node(1000, "10.9.9.9:1", NULL, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "nodes: already 64, the limit (CTL_NODES_MAX)");
    free(s);
}

static void test_activate_node(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.6:7700", NULL, 0, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_activate_node(6, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_node(s, 6)->join_state, CTL_JOIN_ACTIVE);
    expect(s, OK(ctl_cmd_activate_node(6, 0, &cmd)), CTL_OUTCOME_NOOP, "node 6 is already active");
    expect(s, OK(ctl_cmd_activate_node(42, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "id: node 42 is unknown");
    /* No command sets leaving/removed yet: write them by hand (still valid states). */
    expect(s, OK(ctl_cmd_join_node(8, "10.0.0.8:7700", NULL, 0, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    ((struct ctl_node *)ctl_state_node(s, 8))->join_state = CTL_JOIN_LEAVING;
    expect(s, OK(ctl_cmd_activate_node(8, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "node 8 is leaving, only a joining node can be activated");
    ((struct ctl_node *)ctl_state_node(s, 8))->join_state = CTL_JOIN_REMOVED;
    expect(s, OK(ctl_cmd_activate_node(8, 0, &cmd)), CTL_OUTCOME_REJECTED, "node 8 is removed");
    /* An existing placement is not redone by later activations. */
    struct ctl_group g1 = s->groups[0];
    expect(s, OK(ctl_cmd_join_node(9, "10.0.0.9:7700", NULL, 0, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_activate_node(9, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(memcmp(&g1, &s->groups[0], sizeof(g1)), 0);
    free(s);
}

static void test_set_preferred_leader(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    const struct ctl_group *g = ctl_state_group(s, 2);
    uint64_t other =
        g->desired_peers[0] == g->preferred_leader ? g->desired_peers[1] : g->desired_peers[0];
    expect(s, OK(ctl_cmd_set_preferred_leader(2, other, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_group(s, 2)->preferred_leader, other);
    CU_ASSERT_EQUAL(ctl_state_group(s, 2)->config_epoch, 1);
    expect(s, OK(ctl_cmd_set_preferred_leader(2, other, 0, &cmd)), CTL_OUTCOME_NOOP,
           "already the preferred leader of group 2");
    expect(s, OK(ctl_cmd_set_preferred_leader(2, 5, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "node 5 is not a desired peer of group 2");
    expect(s, OK(ctl_cmd_set_preferred_leader(5, 1, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "group 5 does not exist (groups are 1..4)");
    expect(s, OK(ctl_cmd_set_preferred_leader(0, 1, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "group: 0 not in 1..");
    free(s);
    s = empty_state();
    struct ctl_config cfg = {.slot_groups = 2, .replicas = 1, .bootstrap_expect = 2};
    struct ctl_cmd_node one[] = {{1, "a:1", 0}};
    expect(s, OK(ctl_cmd_bootstrap("c", &cfg, one, 1, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_set_preferred_leader(1, 1, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "group 1: no placement yet");
    free(s);
}

static void test_set_node_status_and_weight(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    expect(s, OK(ctl_cmd_set_node_status(3, CTL_STATUS_SUSPECT, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_node(s, 3)->status, CTL_STATUS_SUSPECT);
    expect(s, OK(ctl_cmd_set_node_status(3, CTL_STATUS_SUSPECT, 0, &cmd)), CTL_OUTCOME_NOOP,
           "node 3 is already suspect");
    expect(s, OK(ctl_cmd_set_node_status(77, CTL_STATUS_DOWN, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "node 77 is unknown");
    expect(s, strdup("{\"id\":3,\"op\":\"set_node_status\",\"status\":\"dead\"}"),
           CTL_OUTCOME_REJECTED, "status: \"dead\" is not alive|suspect|down");
    expect(s, OK(ctl_cmd_set_weight(4, 300, 0, &cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_node(s, 4)->weight, 300);
    expect(s, OK(ctl_cmd_set_weight(4, 300, 0, &cmd)), CTL_OUTCOME_NOOP,
           "node 4 already has weight 300");
    expect(s, OK(ctl_cmd_set_weight(4, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "weight: 0 not in 1..1000");
    expect(s, OK(ctl_cmd_set_weight(40, 10, 0, &cmd)), CTL_OUTCOME_REJECTED, "node 40 is unknown");
    free(s);
}

static void test_health_report(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    uint64_t rev = s->revision;
    expect(s, OK(ctl_cmd_health_report(4, 5000, 3000, 0, &cmd)), CTL_OUTCOME_UPDATED, "");
    expect(s, OK(ctl_cmd_health_report(1, 5000, 3000, 0, &cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(s->revision, rev);
    CU_ASSERT_EQUAL(s->n_health, 3);
    CU_ASSERT_EQUAL(s->health[0].node, 1);
    CU_ASSERT_EQUAL(s->health[2].node, 4);
    CU_ASSERT_EQUAL(s->health[2].reported_at_ms, 5000);
    expect(s, OK(ctl_cmd_health_report(4, 6000, 3000, 0, &cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(s->n_health, 3);
    CU_ASSERT_EQUAL(s->health[2].reported_at_ms, 6000);
    expect(s, OK(ctl_cmd_health_report(4, 6000, 3000, 0, &cmd)), CTL_OUTCOME_NOOP,
           "same health report");
    expect(s, OK(ctl_cmd_health_report(4, 5999, 3000, 0, &cmd)), CTL_OUTCOME_NOOP,
           "node 4: report at 5999 is older than the stored one at 6000");
    expect(s, OK(ctl_cmd_health_report(4, 6000, 4000, 0, &cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(s->health[2].ttl_ms, 4000);
    expect(s, OK(ctl_cmd_health_report(99, 6000, 3000, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "node: node 99 is unknown");
    expect(s, OK(ctl_cmd_health_report(4, 6000, 0, 0, &cmd)), CTL_OUTCOME_REJECTED,
           "ttl_ms: 0 not in 1..86400000");
    expect(s, strdup("{\"node\":4,\"op\":\"health_report\",\"ttl_ms\":5}"), CTL_OUTCOME_REJECTED,
           "missing field \"now_ms\"");
    CU_ASSERT_EQUAL(s->revision, rev);
    free(s);
}

static void test_expected_revision(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd;
    uint64_t rev = s->revision;
    char want[96];
    snprintf(want, sizeof(want), "stale expected_revision: have %llu, want %llu",
             (unsigned long long)rev, (unsigned long long)rev - 1);
    expect(s, OK(ctl_cmd_set_weight(4, 321, rev - 1, &cmd)), CTL_OUTCOME_REJECTED, want);
    expect(s, OK(ctl_cmd_health_report(4, 1, 1, rev + 5, &cmd)), CTL_OUTCOME_REJECTED,
           "stale expected_revision");
    expect(s, OK(ctl_cmd_set_weight(4, 321, rev, &cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_set_weight(4, 322, rev, &cmd)), CTL_OUTCOME_REJECTED,
           "stale expected_revision");
    expect(s, OK(ctl_cmd_health_report(4, 1, 1, rev + 1, &cmd)), CTL_OUTCOME_UPDATED, "");
    /* expected_revision 0 in a command fences bootstrap to an empty state. */
    expect(s, strdup("{\"expected_revision\":0,\"id\":4,\"op\":\"activate_node\"}"),
           CTL_OUTCOME_REJECTED, "stale expected_revision: have");
    free(s);
}

static void test_bad_commands(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    static const struct {
        const char *cmd, *reason;
    } bad[] = {
        {"{", "command: not JSON"},
        {"[1,2]", "command: expected a JSON object"},
        {"null", "command: not JSON"},
        {"\"set_weight\"", "command: not JSON"},
        {"{\"op\":5}", "op: expected a string"},
        {"{\"id\":1}", "op: expected a string"},
        {"{\"op\":\"drop_table\"}", "op: \"drop_table\" is not a command"},
        {"{\"op\":\"set_weight\",\"id\":1,\"weight\":5,\"color\":1}",
         "top level: unknown field \"color\""},
        {"{\"op\":\"set_weight\",\"id\":1}", "missing field \"weight\""},
        {"{\"op\":\"set_weight\",\"id\":\"1\",\"weight\":5}", "id: expected an integer"},
        {"{\"op\":\"set_weight\",\"id\":1,\"weight\":5.0}", "weight: expected an integer"},
        {"{\"op\":\"set_weight\",\"id\":-1,\"weight\":5}", "id: -1 not in 1.."},
        {"{\"op\":\"set_weight\",\"id\":1,\"id\":2,\"weight\":5}", "duplicate"},
        {"{\"op\":\"set_weight\",\"id\":1,\"weight\":5} x", "command: not JSON"},
        {"{\"op\":\"set_weight\",\"id\":1,\"weight\":5,\"expected_revision\":\"3\"}",
         "expected_revision: expected an integer"},
        {"{\"op\":\"set_weight\",\"id\":1,\"weight\":5,\"now_ms\":-4}", "now_ms: -4 not in"},
        {"{\"op\":\"set_weight\",\"id\":18446744073709551615,\"weight\":5}", "too big"},
        {"{\"op\":\"join_node\",\"id\":9,\"address\":\"x\\u0000:1\"}", "command: not JSON"},
        {"{\"op\":\"bootstrap\",\"cluster_id\":\"c\",\"config\":{},\"nodes\":[]}",
         "cluster already bootstrapped"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect(s, strdup(bad[i].cmd), CTL_OUTCOME_REJECTED, bad[i].reason);
    }
    struct ctl_state *before = malloc(sizeof(*before));
    *before = *s;
    struct ctl_result res;
    /* Embedded NUL, empty and oversized commands; a NULL command of length 0. */
    const char nul[] = "{\"op\":\"set_weight\",\"id\":1,\0\"weight\":5}";
    CU_ASSERT_EQUAL(ctl_apply(s, s->applied_raft_index + 1, nul, sizeof(nul) - 1, &res), CTL_OK);
    CU_ASSERT_EQUAL(res.outcome, CTL_OUTCOME_REJECTED);
    CU_ASSERT_EQUAL(ctl_apply(s, s->applied_raft_index + 1, NULL, 0, &res), CTL_OK);
    CU_ASSERT_STRING_EQUAL(res.reason, "command: empty");
    size_t big_len = CTL_CMD_BYTES_MAX + 1;
    char *big = malloc(big_len);
    memset(big, ' ', big_len);
    CU_ASSERT_EQUAL(ctl_apply(s, s->applied_raft_index + 1, big, big_len, &res), CTL_OK);
    CU_ASSERT_STRING_EQUAL(res.reason, "command: 65537 bytes, the limit is 65536");
    free(big);
    CU_ASSERT_TRUE(ctl_test_same_but_index(before, s));
    /* Raft indexes must advance: errors leave everything, applied index included, untouched. */
    uint64_t index = s->applied_raft_index;
    CU_ASSERT_EQUAL(ctl_apply(s, index, "{}", 2, &res), CTL_EORDER);
    CU_ASSERT_EQUAL(ctl_apply(s, index - 1, "{}", 2, &res), CTL_EORDER);
    CU_ASSERT_EQUAL(ctl_apply(s, CTL_U64_JSON_MAX + 1, "{}", 2, &res), CTL_EORDER);
    CU_ASSERT_EQUAL(s->applied_raft_index, index);
    /* Gaps in raft indexes are fine (entries of other kinds may sit between). */
    CU_ASSERT_EQUAL(ctl_apply(s, index + 10, "{}", 2, &res), CTL_OK);
    CU_ASSERT_EQUAL(s->applied_raft_index, index + 10);
    free(before);
    free(s);
}

static void test_builders(void)
{
    char *cmd;
    CU_ASSERT_EQUAL(ctl_cmd_join_node(4, "h:1", NULL, 0, 7, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"address\":\"h:1\",\"expected_revision\":7,\"id\":4,"
                                "\"op\":\"join_node\"}");
    ctl_free(cmd);
    CU_ASSERT_EQUAL(ctl_cmd_set_node_status(2, CTL_STATUS_DOWN, 0, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"id\":2,\"op\":\"set_node_status\",\"status\":\"down\"}");
    ctl_free(cmd);
    struct ctl_config cfg = {.slot_groups = 2, .replicas = 1, .bootstrap_expect = 1};
    struct ctl_cmd_node n[] = {{1, "a:1", 5}};
    CU_ASSERT_EQUAL(ctl_cmd_bootstrap("c", &cfg, n, 1, 0, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"cluster_id\":\"c\",\"config\":{\"bootstrap_expect\":1,"
                                "\"replicas\":1,\"slot_groups\":2},\"nodes\":[{\"address\":"
                                "\"a:1\",\"id\":1,\"weight\":5}],\"op\":\"bootstrap\"}");
    ctl_free(cmd);
    cmd = NULL;
    CU_ASSERT_EQUAL(ctl_cmd_join_node(1, NULL, NULL, 0, 0, &cmd), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_cmd_join_node(1, "\xff:1", NULL, 0, 0, &cmd), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_cmd_activate_node(CTL_U64_JSON_MAX + 1, 0, &cmd), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_cmd_set_weight(1, 5, CTL_U64_JSON_MAX + 1, &cmd), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_cmd_set_node_status(1, (enum ctl_node_status)7, 0, &cmd), CTL_EINVALID);
    CU_ASSERT_PTR_NULL(cmd);
}

/* ---- determinism ---- */

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

/* A random command: mostly valid, some invalid, over a small id space so hits and misses mix. */
static char *random_command(uint64_t *rng, uint64_t revision)
{
    char *cmd = NULL, addr[32];
    uint64_t id = 1 + rng_next(rng) % 10, r = rng_next(rng) % 100;
    uint64_t expected = r < 10 && revision > 0 ? revision + (r % 3) - 1 : 0; /* some stale */
    snprintf(addr, sizeof(addr), "10.1.0.%llu:%llu", (unsigned long long)id,
             (unsigned long long)(7700 + rng_next(rng) % 2));
    switch (rng_next(rng) % 9) {
    case 0:
        CU_ASSERT_EQUAL(
            ctl_cmd_join_node(id, addr, NULL, (uint32_t)(rng_next(rng) % 300), expected, &cmd),
            CTL_OK);
        break;
    case 1:
    case 2:
        CU_ASSERT_EQUAL(ctl_cmd_activate_node(id, expected, &cmd), CTL_OK);
        break;
    case 3:
        CU_ASSERT_EQUAL(
            ctl_cmd_set_preferred_leader((uint32_t)(1 + rng_next(rng) % 7), id, expected, &cmd),
            CTL_OK);
        break;
    case 4:
        CU_ASSERT_EQUAL(
            ctl_cmd_set_node_status(id, (enum ctl_node_status)(rng_next(rng) % 3), expected, &cmd),
            CTL_OK);
        break;
    case 5:
    case 6:
        CU_ASSERT_EQUAL(ctl_cmd_health_report(id, rng_next(rng) % 100000, 1 + rng_next(rng) % 10000,
                                              expected, &cmd),
                        CTL_OK);
        break;
    case 7:
        CU_ASSERT_EQUAL(ctl_cmd_set_weight(id, (uint32_t)(rng_next(rng) % 1100), expected, &cmd),
                        CTL_OK);
        break;
    default:
        cmd = strdup(r < 50 ? "{\"op\":\"set_weight\",\"id\":1" : "{\"op\":\"noise\"}");
        break;
    }
    return cmd;
}

static void test_determinism(void)
{
    uint64_t seed = 0x5eed0c7105ull;
    const char *env = getenv("CTL_TEST_SEED");
    if (env != NULL) {
        seed = strtoull(env, NULL, 0);
    }
    uint64_t rng = seed;
    struct ctl_state *a = empty_state(), *b = empty_state(), *c = empty_state();
    struct ctl_config cfg = {.slot_groups = 6, .replicas = 3, .bootstrap_expect = 4};
    struct ctl_cmd_node boot[] = {{1, "10.1.0.1:7700", 0}, {2, "10.1.0.2:7700", 150}};
    char *cmd;
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_bootstrap("det", &cfg, boot, 2, 0, &cmd), CTL_OK);
    int counts[4] = {0}, mismatches = 0;
    for (int step = 0; step < 200; step++) {
        struct ctl_result ra, rb, rc;
        CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
        int ea = ctl_apply(a, a->applied_raft_index + 1, cmd, strlen(cmd), &ra);
        int eb = ctl_apply(b, b->applied_raft_index + 1, cmd, strlen(cmd), &rb);
        /* c goes through the file encoding at every step, as a restarted voter would. */
        int ec = ctl_apply(c, c->applied_raft_index + 1, cmd, strlen(cmd), &rc);
        char *ta = ctl_test_encode(a), *tb = ctl_test_encode(b), *tc = ctl_test_encode(c);
        char err[256];
        CU_ASSERT_EQUAL(ctl_state_decode(tc, strlen(tc), c, err, sizeof(err)), CTL_OK);
        if (ea || eb || ec || ra.outcome != rb.outcome || strcmp(ra.reason, rb.reason) ||
            strcmp(ta, tb) || strcmp(ta, tc)) {
            mismatches++;
        }
        counts[ra.outcome]++;
        ctl_free(ta), ctl_free(tb), ctl_free(tc);
        ctl_free(cmd);
        cmd = random_command(&rng, a->revision);
    }
    ctl_free(cmd);
    if (mismatches != 0) {
        printf("\n  determinism failed; replay: CTL_TEST_SEED=0x%llx bin/controller_test\n",
               (unsigned long long)seed);
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    printf("\n  outcomes: %d changed, %d updated, %d noop, %d rejected\n",
           counts[CTL_OUTCOME_CHANGED], counts[CTL_OUTCOME_UPDATED], counts[CTL_OUTCOME_NOOP],
           counts[CTL_OUTCOME_REJECTED]);
    /* The sequence exercises every outcome, including a placement. */
    CU_ASSERT_TRUE(counts[CTL_OUTCOME_CHANGED] > 3 && counts[CTL_OUTCOME_UPDATED] > 3 &&
                   counts[CTL_OUTCOME_NOOP] > 3 && counts[CTL_OUTCOME_REJECTED] > 3);
    CU_ASSERT_EQUAL(a->n_groups, 6);
    free(a), free(b), free(c);
}

/* Mutated commands (flipped, dropped and inserted bytes of valid ones) never crash, never leave an
 * invalid state, and a rejected or noop one never changes the state. */
static void test_mutated_commands(void)
{
    uint64_t seed = 0xbadc0ffeeull;
    const char *env = getenv("CTL_TEST_SEED");
    if (env != NULL) {
        seed = strtoull(env, NULL, 0);
    }
    uint64_t rng = seed;
    struct ctl_state *s = ctl_test_fixture(4), *before = malloc(sizeof(*before));
    struct ctl_state *start = malloc(sizeof(*start));
    char *seeds[8], buf[512];
    const size_t n_seeds = sizeof(seeds) / sizeof(seeds[0]);
    *start = *s;
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_join_node(6, "10.0.0.6:7700", NULL, 20, 0, &seeds[0]), CTL_OK);
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_set_preferred_leader(1, 2, 0, &seeds[1]), CTL_OK);
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_health_report(3, 77, 99, 0, &seeds[2]), CTL_OK);
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_set_node_status(4, CTL_STATUS_DOWN, 0, &seeds[3]), CTL_OK);
    /* Task commands that succeed on the fixture (task 7: replica_move 1 -> 4 at phase promote). */
    struct ctl_task_proof proof = {.n_voters = 4, .voters = {1, 2, 3, 4}, .leader = 1, .commit = 9};
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_task_advance(7, 1, 1, 1, 2, &proof, 0, 0, 50, 0, &seeds[4]),
                          CTL_OK);
    struct ctl_task_spec spec = {CTL_TASK_LEADER_TRANSFER, 2, 0, 2, 0};
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_task_create(&spec, 60, 0, &seeds[5]), CTL_OK);
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_task_retry(9, 70, 0, &seeds[6]), CTL_OK);
    struct ctl_task_spec migration = {.kind = CTL_TASK_HASH_SLOT_MIGRATION, .to_group = 4};
    migration.hash_slots[130 / 8] = 0x0C; /* hash slots 130, 131: group 3 */
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_task_create(&migration, 80, 0, &seeds[7]), CTL_OK);
    for (size_t k = 4; k < n_seeds; k++) { /* unmutated, each task seed applies */
        struct ctl_result res;
        *before = *start;
        CU_ASSERT_EQUAL(
            ctl_apply(before, before->applied_raft_index + 1, seeds[k], strlen(seeds[k]), &res),
            CTL_OK);
        CU_ASSERT_EQUAL(res.outcome, CTL_OUTCOME_CHANGED);
    }
    int bad = 0, counts[4] = {0};
    for (int i = 0; i < 3000; i++) {
        const char *valid = seeds[rng_next(&rng) % n_seeds];
        size_t len = strlen(valid);
        memcpy(buf, valid, len);
        for (int m = 0, n = 1 + (int)(rng_next(&rng) % 3); m < n && len > 1; m++) {
            size_t at = rng_next(&rng) % len;
            switch (rng_next(&rng) % 3) {
            case 0:
                buf[at] = (char)rng_next(&rng);
                break;
            case 1:
                memmove(buf + at, buf + at + 1, len - at - 1);
                len--;
                break;
            default:
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = "{}[]:,\"0123456789-"[rng_next(&rng) % 19];
                len++;
                break;
            }
        }
        *before = *s;
        struct ctl_result res;
        if (ctl_apply(s, s->applied_raft_index + 1, buf, len, &res) != CTL_OK ||
            ctl_state_validate(s, NULL, 0) != CTL_OK) {
            bad++;
            continue;
        }
        counts[res.outcome]++;
        if ((res.outcome == CTL_OUTCOME_REJECTED || res.outcome == CTL_OUTCOME_NOOP) &&
            !ctl_test_same_but_index(before, s)) {
            bad++;
        }
        if (res.outcome == CTL_OUTCOME_REJECTED && res.reason[0] == '\0') {
            bad++;
        }
        if (i % 50 == 0) { /* keep exploring from states close to the fixture */
            uint64_t index = s->applied_raft_index;
            *s = *start;
            s->applied_raft_index = index;
        }
    }
    if (bad != 0) {
        printf("\n  %d bad applies; replay: CTL_TEST_SEED=0x%llx bin/controller_test\n", bad,
               (unsigned long long)seed);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(counts[CTL_OUTCOME_REJECTED] > 1000);
    for (size_t k = 0; k < n_seeds; k++) {
        ctl_free(seeds[k]);
    }
    free(start);
    free(before);
    free(s);
}

void ctl_test_add_apply(void)
{
    CU_pSuite s = CU_add_suite("controller apply", NULL, NULL);
    CU_add_test(s, "bootstrap and placement at bootstrap_expect", test_bootstrap);
    CU_add_test(s, "join_node", test_join_node);
    CU_add_test(s, "client and peer addresses (node_address)", test_node_addresses);
    CU_add_test(s, "zones (node_zone)", test_node_zone);
    CU_add_test(s, "activate_node", test_activate_node);
    CU_add_test(s, "set_preferred_leader", test_set_preferred_leader);
    CU_add_test(s, "set_node_status and set_weight", test_set_node_status_and_weight);
    CU_add_test(s, "health_report keeps revision", test_health_report);
    CU_add_test(s, "expected_revision", test_expected_revision);
    CU_add_test(s, "unparseable and malformed commands", test_bad_commands);
    CU_add_test(s, "command builders", test_builders);
    CU_add_test(s, "determinism over 200 seeded commands", test_determinism);
    CU_add_test(s, "3000 mutated commands: no crash, no partial change", test_mutated_commands);
}
