/* slotctl_test.c - CUnit test of slotctl admin, status, task, kv and lease commands: parser,
 * tables, calls. */
#include "slotctl_cli.h"
#include "slotctl_cmds.h"

#include "client_internal.h" /* route and status structs to build fixtures from */

#include <CUnit/Basic.h>
#include <jansson.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGV(...) ((char *[]){"slotctl", __VA_ARGS__, NULL})
#define ARGC(argv) ((int)(sizeof(argv) / sizeof(argv[0])) - 1)

/* Parses a NULL-terminated argv; returns the parser's exit code and fills a and err. */
static int parse(char **argv, struct slotctl_args *a, char *err, size_t errlen)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    err[0] = '\0';
    return slotctl_args_parse(argc, argv, a, err, errlen);
}

/* ---- parser ------------------------------------------------------------------------------ */

static void test_parse_backup(void)
{
    struct slotctl_args a;
    char err[256];
    const char *subs[] = {"save", "verify", "inspect"};
    for (size_t i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(
            parse(ARGV("--json", "backup", (char *)subs[i], "/tmp/x.bak"), &a, err, sizeof(err)),
            SLOTCTL_EXIT_OK);
        CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_BACKUP);
        CU_ASSERT_STRING_EQUAL(a.pos[0], subs[i]);
        CU_ASSERT_STRING_EQUAL(a.pos[1], "/tmp/x.bak");
    }
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(SLOTCTL_CMD_BACKUP), "backup");
    CU_ASSERT_EQUAL(parse(ARGV("backup", "plan", "set", "60", "/b", "3"), &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.pos_count, 5);
    CU_ASSERT_STRING_EQUAL(a.pos[3], "/b");
    CU_ASSERT_EQUAL(parse(ARGV("backup", "plan", "show"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(parse(ARGV("backup", "plan", "delete"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    char **bad[] = {ARGV("backup"),
                    ARGV("backup", "save"),
                    ARGV("backup", "restore", "f"),
                    ARGV("backup", "save", "a", "b"),
                    ARGV("backup", "plan"),
                    ARGV("backup", "plan", "set", "60", "/b"),
                    ARGV("backup", "plan", "show", "x"),
                    ARGV("backup", "plan", "drop"),
                    ARGV("backup", "save", "a", "b", "c", "d")};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CU_ASSERT_EQUAL(parse(bad[i], &a, err, sizeof(err)), SLOTCTL_EXIT_USAGE);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "backup"));
    }
}

static void test_parse_admin_commands(void)
{
    struct slotctl_args a;
    char err[256];
    CU_ASSERT_EQUAL(parse(ARGV("transfer-leader", "--group", "3", "--to", "2", "--wait", "5",
                               "--expected-revision", "7"),
                          &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_TRANSFER_LEADER);
    CU_ASSERT_EQUAL(a.group_id, 3);
    CU_ASSERT_EQUAL(a.to_node, 2);
    CU_ASSERT_EQUAL(a.wait_s, 5);
    CU_ASSERT_EQUAL(a.expected_revision, 7);

    CU_ASSERT_EQUAL(parse(ARGV("--json", "join", "--node-id", "9", "--address", "10.0.0.9:7700",
                               "--weight", "1000"),
                          &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_JOIN);
    CU_ASSERT_EQUAL(a.node_id, 9);
    CU_ASSERT_STRING_EQUAL(a.address, "10.0.0.9:7700");
    CU_ASSERT_EQUAL(a.weight, 1000);
    CU_ASSERT_TRUE(a.json);

    CU_ASSERT_EQUAL(
        parse(ARGV("activate", "--node-id", "18446744073709551615"), &a, err, sizeof(err)),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_ACTIVATE);
    CU_ASSERT_EQUAL(a.node_id, UINT64_MAX);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(SLOTCTL_CMD_TRANSFER_LEADER), "transfer-leader");
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(SLOTCTL_CMD_ACTIVATE), "activate");
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(99), "");
}

static void test_parse_admin_errors(void)
{
    static const struct {
        char *argv[12];
        const char *err;
    } cases[] = {
        {{"slotctl", "transfer-leader", "--group", "1", NULL},
         "transfer-leader: needs --group G and --to NODE"},
        {{"slotctl", "transfer-leader", "--to", "1", NULL},
         "transfer-leader: needs --group G and --to NODE"},
        {{"slotctl", "transfer-leader", "--group", "0", "--to", "1", NULL},
         "--group: '0' is not a group id in 1..4294967295"},
        {{"slotctl", "transfer-leader", "--group", "4294967296", "--to", "1", NULL},
         "--group: '4294967296' is not a group id in 1..4294967295"},
        {{"slotctl", "transfer-leader", "--group", "1", "--to", "0", NULL},
         "--to: '0' is not a node id (an integer >= 1)"},
        {{"slotctl", "transfer-leader", "--group", "1", "--to", "2", "--wait", "3601", NULL},
         "--wait: '3601' is not a number of seconds in 1..3600"},
        {{"slotctl", "transfer-leader", "--group", "1", "--to", "2", "--expected-revision", "x",
          NULL},
         "--expected-revision: 'x' is not an integer >= 1"},
        {{"slotctl", "join", "--node-id", "4", NULL},
         "join: needs --node-id N and --address HOST:PEER_PORT"},
        {{"slotctl", "join", "--node-id", "4", "--address", "a:1,b:2", NULL},
         "--address: 'a:1,b:2' is not one host:port of 1..255 bytes"},
        {{"slotctl", "join", "--node-id", "4", "--address", "a:1", "--weight", "0", NULL},
         "--weight: '0' is not an integer in 1..1000"},
        {{"slotctl", "activate", NULL}, "activate: needs --node-id N"},
        {{"slotctl", "activate", "--node-id", "4", "--address", "a:1", NULL},
         "--address: only for join"},
        {{"slotctl", "cluster", "--group", "1", NULL},
         "--group: only for transfer-leader, move-replica"},
        {{"slotctl", "get", "k", "--node-id", "1", NULL}, "--node-id: only for join, activate"},
        {{"slotctl", "put", "k", "v", "--expected-revision", "3", NULL},
         "--expected-revision: only for transfer-leader, join, activate, move-replica, drain, "
         "promote, retry, migrate-slots, feature, abort, balance, remove-node, demote"},
        {{"slotctl", "activate", "--node-id", "4", "extra", NULL},
         "activate: takes 0 arguments, got 1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct slotctl_args a;
        char err[256];
        int rc = parse((char **)cases[i].argv, &a, err, sizeof(err));
        CU_ASSERT_EQUAL(rc, SLOTCTL_EXIT_USAGE);
        if (strcmp(err, cases[i].err) != 0)
            fprintf(stderr, "\ncase %zu: got '%s', want '%s'\n", i, err, cases[i].err);
        CU_ASSERT_STRING_EQUAL(err, cases[i].err);
    }
}

static void test_exit_codes(void)
{
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_ESTALE_REVISION), SLOTCTL_EXIT_PRECONDITION);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_EINVAL), SLOTCTL_EXIT_INVALID);
    CU_ASSERT_EQUAL(SLOTCTL_EXIT_WAIT_TIMEOUT, 7);
    CU_ASSERT_STRING_EQUAL(slotd_client_strerror(SLOTD_CLIENT_ESTALE_REVISION),
                           "stale expected revision");
    CU_ASSERT_STRING_EQUAL(slotd_admin_outcome_name(SLOTD_ADMIN_OUTCOME_CHANGED), "CHANGED");
    CU_ASSERT_STRING_EQUAL(slotd_admin_outcome_name(SLOTD_ADMIN_OUTCOME_UPDATED), "UPDATED");
    CU_ASSERT_STRING_EQUAL(slotd_admin_outcome_name(SLOTD_ADMIN_OUTCOME_NOOP), "NOOP");
    CU_ASSERT_STRING_EQUAL(slotd_admin_outcome_name(42), "UNSPECIFIED");
}

/* ---- cluster tables -------------------------------------------------------------------- */

#define NOW_MS 1800000000000LL

static const char *const fixture_json =
    "{\"applied_raft_index\":40,\"checksum\":\"0216f515\",\"cluster_id\":\"demo\","
    "\"config\":{\"bootstrap_expect\":3,\"hash_slots\":256,\"replicas\":2,\"slot_groups\":3},"
    "\"groups\":[{\"config_epoch\":1,\"desired_peers\":[1,2],\"id\":1,\"preferred_leader\":1},"
    "{\"config_epoch\":2,\"desired_peers\":[2,3],\"id\":2,\"preferred_leader\":3},"
    "{\"config_epoch\":1,\"desired_peers\":[1,3],\"id\":3,\"preferred_leader\":3}],"
    "\"hash_slot_table\":{\"ranges\":[{\"first\":0,\"group\":1,\"last\":85},"
    "{\"first\":86,\"group\":2,\"last\":170},{\"first\":171,\"group\":3,\"last\":255}],"
    "\"version\":2},"
    "\"health\":[{\"node\":1,\"reported_at_ms\":1799999998500,\"ttl_ms\":10000},"
    "{\"node\":3,\"reported_at_ms\":1799999970000,\"ttl_ms\":10000}],"
    "\"nodes\":[{\"address\":\"10.0.0.1:7701\",\"client_address\":\"10.0.0.1:7700\",\"id\":1,"
    "\"join_state\":\"active\",\"roles\":[\"controller_voter\",\"data\"],\"status\":\"alive\","
    "\"weight\":100,\"zone\":\"rack-a\"},"
    "{\"address\":\"10.0.0.2:7701\",\"id\":2,\"join_state\":\"joining\",\"roles\":[\"data\"],"
    "\"status\":\"alive\",\"weight\":50},"
    "{\"address\":\"10.0.0.3:7701\",\"client_address\":\"10.0.0.3:7700\",\"id\":3,"
    "\"join_state\":\"active\",\"roles\":[\"controller_voter\",\"data\"],\"status\":\"suspect\","
    "\"weight\":100}],"
    "\"revision\":12,\"schema_version\":1,"
    "\"tasks\":[{\"attempt\":2,\"config_epoch\":2,\"created_ms\":1,\"group\":2,\"id\":5,"
    "\"kind\":\"replica_move\",\"last_error\":\"node 3 unreachable\",\"participants\":[2,3],"
    "\"phase_index\":1,\"status\":\"running\",\"updated_ms\":2},"
    "{\"attempt\":1,\"config_epoch\":0,\"created_ms\":1,\"group\":0,\"id\":6,"
    "\"kind\":\"node_drain\",\"last_error\":\"\",\"participants\":[2],"
    "\"phase_index\":0,\"status\":\"pending\",\"updated_ms\":1}]}";

static const char *const fixture_head =
    "cluster demo  revision 12  checksum 0216f515  applied index 40  served by "
    "127.0.0.1:7702 (mirror)\n"
    "\n"
    "NODES\n"
    "  NODE  CLIENT ADDRESS          PEER ADDRESS            ROLES                  JOIN      "
    "STATUS   WEIGHT  ZONE      LAST HEALTH REPORT\n"
    "     1  10.0.0.1:7700           10.0.0.1:7701           controller_voter,data  active    "
    "alive       100  rack-a    1.5 s ago\n"
    "     2  -                       10.0.0.2:7701           data                   joining   "
    "alive        50  -         never\n"
    "     3  10.0.0.3:7700           10.0.0.3:7701           controller_voter,data  active    "
    "suspect     100  -         30.0 s ago\n"
    "\n"
    "GROUPS\n"
    "GROUP  DESIRED PEERS   EPOCH  PREFERRED  OBSERVED   TERM\n";

static const char *const fixture_tail =
    "\n"
    "HASH SLOTS (table version 2)\n"
    "RANGE      GROUP\n"
    "0-85           1\n"
    "86-170         2\n"
    "171-255        3\n"
    "\n"
    "TASKS\n"
    " TASK  KIND                         GROUP  PHASE  STATUS   LAST ERROR\n"
    "    5  replica_move                     2      1  running  node 3 unreachable\n"
    "    6  node_drain                       -      0  pending  -\n";

static char *render(const char *state_json, const struct slotd_route *route)
{
    json_error_t jerr;
    json_t *state = json_loads(state_json, 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(state);
    struct slotd_cluster_state cs = {.revision = 12, .applied_raft_index = 40, .from_voter = false};
    snprintf(cs.checksum, sizeof(cs.checksum), "0216f515");
    snprintf(cs.source, sizeof(cs.source), "127.0.0.1:7702");
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    slotctl_cluster_print(out, state, &cs, route, NOW_MS);
    fclose(out);
    json_decref(state);
    return buf;
}

static void check_render(const char *got, const char *groups)
{
    size_t want_len = strlen(fixture_head) + strlen(groups) + strlen(fixture_tail) + 1;
    char *want = malloc(want_len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    snprintf(want, want_len, "%s%s%s", fixture_head, groups, fixture_tail);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "\n--- got ---\n%s--- want ---\n%s", got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(want);
}

static void test_cluster_tables_with_route(void)
{
    /* group 1 led by its preferred leader, group 2 by another node, group 3 without a leader */
    struct slotd_route_group groups[3] = {
        {.group_id = 1, .leader = 1, .leader_term = 4},
        {.group_id = 2, .leader = 2, .leader_term = 7},
        {.group_id = 3, .leader = 0},
    };
    struct slotd_route_node nodes[1] = {{.node_id = 1, .address = "10.0.0.1:7700"}};
    struct slotd_route route = {
        .revision = 9, .groups = groups, .group_count = 3, .nodes = nodes, .node_count = 1};
    /* the route object's getters see what the fixture holds */
    CU_ASSERT_EQUAL(slotd_route_group_count(&route), 3);
    CU_ASSERT_EQUAL(slotd_route_group_at(&route, 1)->leader, 2);
    CU_ASSERT_PTR_NULL(slotd_route_group_at(&route, 3));
    CU_ASSERT_STRING_EQUAL(slotd_route_node_at(&route, 0)->address, "10.0.0.1:7700");
    char *got = render(fixture_json, &route);
    check_render(got, "    1  1,2                 1          1         1      4\n"
                      "    2  2,3                 2          3         2      7  * observed != "
                      "preferred\n"
                      "    3  1,3                 1          3         -      -  (no leader)\n");
    free(got);
}

static void test_cluster_tables_without_route(void)
{
    char *got = render(fixture_json, NULL);
    check_render(got, "    1  1,2                 1          1         ?      ?  (observed leader "
                      "unknown: no route)\n"
                      "    2  2,3                 2          3         ?      ?  (observed leader "
                      "unknown: no route)\n"
                      "    3  1,3                 1          3         ?      ?  (observed leader "
                      "unknown: no route)\n");
    free(got);
}

static void test_cluster_tables_before_placement(void)
{
    char *got = render("{\"cluster_id\":\"\",\"groups\":[],\"hash_slot_table\":{\"ranges\":[],"
                       "\"version\":0},\"health\":[],\"nodes\":[],\"revision\":0,\"tasks\":[]}",
                       NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "cluster (not bootstrapped)  revision 12"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\nGROUPS\nnone (not placed yet)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\nHASH SLOTS (table version 0)\nnone (not placed yet)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\nTASKS\nnone\n"));
    free(got);
}

/* ---- task commands: parser ---------------------------------------------------------------- */

static void test_parse_task_commands(void)
{
    struct slotctl_args a;
    char err[256];
    CU_ASSERT_EQUAL(parse(ARGV("move-replica", "--group", "2", "--from", "3", "--to", "5",
                               "--expected-revision", "9", "--wait", "60", "--json"),
                          &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_MOVE_REPLICA);
    CU_ASSERT_EQUAL(a.group_id, 2);
    CU_ASSERT_EQUAL(a.from_node, 3);
    CU_ASSERT_EQUAL(a.to_node, 5);
    CU_ASSERT_EQUAL(a.expected_revision, 9);
    CU_ASSERT_EQUAL(a.wait_s, 60);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(a.cmd), "move-replica");

    CU_ASSERT_EQUAL(parse(ARGV("drain", "--node", "5", "--wait", "30"), &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_DRAIN);
    CU_ASSERT_EQUAL(a.node_id, 5);
    CU_ASSERT_EQUAL(parse(ARGV("promote", "--node", "4"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_PROMOTE);
    CU_ASSERT_EQUAL(a.node_id, 4);
    CU_ASSERT_EQUAL(parse(ARGV("remove-node", "--node", "4", "--expected-revision", "7"), &a, err,
                          sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_REMOVE_NODE);
    CU_ASSERT_EQUAL(a.node_id, 4);
    CU_ASSERT_EQUAL(a.expected_revision, 7);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(a.cmd), "remove-node");
    CU_ASSERT_EQUAL(parse(ARGV("demote", "--node", "2"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_DEMOTE);
    CU_ASSERT_EQUAL(a.node_id, 2);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(a.cmd), "demote");
    CU_ASSERT_EQUAL(parse(ARGV("retry", "--task", "12"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_RETRY);
    CU_ASSERT_EQUAL(a.task_id, 12);
    CU_ASSERT_EQUAL(
        parse(ARGV("abort", "--task", "7", "--expected-revision", "9"), &a, err, sizeof(err)),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_ABORT);
    CU_ASSERT_EQUAL(a.task_id, 7);
    CU_ASSERT_EQUAL(a.expected_revision, 9);
    CU_ASSERT_EQUAL(parse(ARGV("transfer-leader", "--group", "1", "--to", "2", "--as-task"), &a,
                          err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_TRUE(a.as_task);

    CU_ASSERT_EQUAL(parse(ARGV("migrate-slots", "--slots", "12,3,7,10-11", "--to-group", "4"), &a,
                          err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_MIGRATE_SLOTS);
    CU_ASSERT_EQUAL(a.to_group, 4);
    CU_ASSERT_EQUAL_FATAL(a.hash_slot_count, 5);
    static const uint32_t want[] = {3, 7, 10, 11, 12};
    CU_ASSERT_EQUAL(memcmp(a.hash_slots, want, sizeof(want)), 0);

    CU_ASSERT_EQUAL(parse(ARGV("feature", "list"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_FEATURE);
    CU_ASSERT_EQUAL(
        parse(ARGV("feature", "set", "hash_slot_migration", "on", "--expected-revision", "9"), &a,
              err, sizeof(err)),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.pos_count, 3);
    CU_ASSERT_EQUAL(a.expected_revision, 9);

    CU_ASSERT_EQUAL(parse(ARGV("task", "status"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_TASK_STATUS);
    CU_ASSERT_EQUAL(a.task_id, 0);
    CU_ASSERT_FALSE(a.watch);
    CU_ASSERT_EQUAL(parse(ARGV("task", "status", "--active"), &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_TRUE(a.active_only);
    CU_ASSERT_EQUAL(
        parse(ARGV("task", "status", "17", "--watch", "--interval-ms", "50", "--timeout", "90"), &a,
              err, sizeof(err)),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.task_id, 17);
    CU_ASSERT_TRUE(a.watch);
    CU_ASSERT_EQUAL(a.interval_ms, 50);
    CU_ASSERT_EQUAL(a.timeout_s, 90);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(a.cmd), "task status");
    CU_ASSERT_EQUAL(SLOTCTL_EXIT_TASK_FAILED, 8);
}

static void test_parse_task_errors(void)
{
    static const struct {
        char *argv[12];
        const char *err;
    } cases[] = {
        {{"slotctl", "migrate-slots", "--slots", "3,256", "--to-group", "2", NULL},
         "--slots: hash slot 256 is out of range 0..255"},
        {{"slotctl", "migrate-slots", "--slots", "250-300", "--to-group", "2", NULL},
         "--slots: hash slot 300 is out of range 0..255"},
        {{"slotctl", "migrate-slots", "--slots", "3,7,5-8", "--to-group", "2", NULL},
         "--slots: hash slot 7 given twice"},
        {{"slotctl", "migrate-slots", "--slots", "12-10", "--to-group", "2", NULL},
         "--slots: range '12-10' runs backwards (FIRST > LAST)"},
        {{"slotctl", "migrate-slots", "--slots", "3,,4", "--to-group", "2", NULL},
         "--slots: empty item in '3,,4' (give e.g. 3,7,10-12)"},
        {{"slotctl", "migrate-slots", "--slots", "3,", "--to-group", "2", NULL},
         "--slots: empty item in '3,' (give e.g. 3,7,10-12)"},
        {{"slotctl", "migrate-slots", "--slots", "", "--to-group", "2", NULL},
         "--slots: empty (give e.g. 3,7,10-12)"},
        {{"slotctl", "migrate-slots", "--slots", "x7", "--to-group", "2", NULL},
         "--slots: 'x7' is not a hash slot (0..255) or a range FIRST-LAST"},
        {{"slotctl", "migrate-slots", "--slots", "-3", "--to-group", "2", NULL},
         "--slots: '-3' is not a hash slot (0..255) or a range FIRST-LAST"},
        {{"slotctl", "migrate-slots", "--slots", "1-2-3", "--to-group", "2", NULL},
         "--slots: '1-2-3' is not a hash slot (0..255) or a range FIRST-LAST"},
        {{"slotctl", "migrate-slots", "--slots", "3", NULL},
         "migrate-slots: needs --slots LIST and --to-group G"},
        {{"slotctl", "migrate-slots", "--slots", "3", "--to-group", "0", NULL},
         "--to-group: '0' is not a group id in 1..4294967295"},
        {{"slotctl", "move-replica", "--group", "1", "--to", "2", NULL},
         "move-replica: needs --group G, --from N and --to M"},
        {{"slotctl", "drain", NULL}, "drain: needs --node N"},
        {{"slotctl", "remove-node", NULL}, "remove-node: needs --node N"},
        {{"slotctl", "demote", "--node-id", "3", NULL}, "--node-id: only for join, activate"},
        {{"slotctl", "demote", "--node", "3", "--wait", "5", NULL},
         "--wait: only for transfer-leader, move-replica, drain, promote, retry, migrate-slots"},
        {{"slotctl", "remove-node", "--node", "3", "extra", NULL},
         "remove-node: takes 0 arguments, got 1"},
        {{"slotctl", "promote", "--node-id", "4", NULL}, "--node-id: only for join, activate"},
        {{"slotctl", "activate", "--node", "4", NULL}, "--node: only for drain, promote, remove-node, demote"},
        {{"slotctl", "retry", NULL}, "retry: needs --task T"},
        {{"slotctl", "abort", NULL}, "abort: needs --task T"},
        {{"slotctl", "abort", "--task", "3", "--wait", "5", NULL},
         "--wait: only for transfer-leader, move-replica, drain, promote, retry, migrate-slots"},
        {{"slotctl", "route", "--task", "3", NULL}, "--task: only for retry, abort"},
        {{"slotctl", "retry", "--task", "0", NULL},
         "--task: '0' is not a task id (an integer >= 1)"},
        {{"slotctl", "drain", "--node", "4", "--from", "3", NULL}, "--from: only for move-replica"},
        {{"slotctl", "join", "--node-id", "4", "--address", "a:1", "--wait", "3", NULL},
         "--wait: only for transfer-leader, move-replica, drain, promote, retry, migrate-slots"},
        {{"slotctl", "move-replica", "--group", "1", "--from", "2", "--to", "3", "--as-task", NULL},
         "--as-task: only for transfer-leader"},
        {{"slotctl", "task", NULL}, "task: usage: task status [TASK_ID]"},
        {{"slotctl", "task", "list", NULL},
         "task: unknown subcommand 'list' (try: task status [TASK_ID])"},
        {{"slotctl", "task", "status", "abc", NULL},
         "task status: 'abc' is not a task id (an integer >= 1)"},
        {{"slotctl", "task", "status", "3", "4", NULL}, "task: usage: task status [TASK_ID]"},
        {{"slotctl", "task", "status", "3", "--active", NULL},
         "--active: only when listing (no TASK_ID)"},
        {{"slotctl", "task", "status", "--watch", NULL}, "task status --watch: needs a TASK_ID"},
        {{"slotctl", "task", "status", "3", "--timeout", "5", NULL},
         "--interval-ms and --timeout: only with --watch"},
        {{"slotctl", "task", "status", "3", "--watch", "--interval-ms", "49", NULL},
         "--interval-ms: '49' is not an integer in 50..60000"},
        {{"slotctl", "task", "status", "3", "--watch", "--timeout", "0", NULL},
         "--timeout: '0' is not a number of seconds in 1..3600"},
        {{"slotctl", "task", "status", "--task", "3", NULL}, "--task: only for retry, abort"},
        {{"slotctl", "get", "k", "--watch", NULL}, "--watch: only for task status"},
        {{"slotctl", "feature", NULL}, "feature: usage: feature list | feature set NAME on|off"},
        {{"slotctl", "feature", "set", "hash_slot_migration", "yes", NULL},
         "feature: usage: feature list | feature set NAME on|off"},
        {{"slotctl", "feature", "list", "--expected-revision", "3", NULL},
         "--expected-revision: only for feature set"},
        {{"slotctl", "balance", NULL}, "balance: usage: balance status|on|off"},
        {{"slotctl", "balance", "pause", NULL}, "balance: usage: balance status|on|off"},
        {{"slotctl", "balance", "on", "now", NULL}, "balance: usage: balance status|on|off"},
        {{"slotctl", "balance", "status", "--expected-revision", "3", NULL},
         "--expected-revision: only for balance on|off"},
        {{"slotctl", "balance", "status", "--task", "3", NULL}, "--task: only for retry, abort"},
        {{"slotctl", "feature", "list", "--wait", "3", NULL},
         "--wait: only for transfer-leader, move-replica, drain, promote, retry, migrate-slots"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct slotctl_args a;
        char err[256];
        int rc = parse((char **)cases[i].argv, &a, err, sizeof(err));
        CU_ASSERT_EQUAL(rc, SLOTCTL_EXIT_USAGE);
        if (strcmp(err, cases[i].err) != 0)
            fprintf(stderr, "\ncase %zu: got '%s', want '%s'\n", i, err, cases[i].err);
        CU_ASSERT_STRING_EQUAL(err, cases[i].err);
    }
}

static void test_slot_lists(void)
{
    uint32_t slots[SLOTD_HASH_SLOTS];
    unsigned n = 99;
    char err[256], text[1024];
    CU_ASSERT_EQUAL(slotctl_slots_parse("0-255", slots, &n, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(n, 256);
    CU_ASSERT_EQUAL(slots[0], 0);
    CU_ASSERT_EQUAL(slots[255], 255);
    slotctl_slots_text(slots, n, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "0-255");
    CU_ASSERT_EQUAL(slotctl_slots_parse("255,0,9-9", slots, &n, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(n, 3);
    slotctl_slots_text(slots, n, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "0,9,255");
    CU_ASSERT_EQUAL(slotctl_slots_parse("3,7,10-12,13", slots, &n, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    slotctl_slots_text(slots, n, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "3,7,10-13");
    CU_ASSERT_EQUAL(slotctl_slots_parse("0-255,4", slots, &n, err, sizeof(err)),
                    SLOTCTL_EXIT_USAGE);
    CU_ASSERT_STRING_EQUAL(err, "--slots: hash slot 4 given twice");
    CU_ASSERT_EQUAL(slotctl_slots_parse("99999999999999999999", slots, &n, err, sizeof(err)),
                    SLOTCTL_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is not a hash slot (0..255)"));
    slotctl_slots_text(slots, 0, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "-");
}

/* ---- task output ------------------------------------------------------------------------- */

static void test_progress_bar(void)
{
    char buf[128];
    slotctl_bytes_text(0, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "0 B");
    slotctl_bytes_text(1023, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "1023 B");
    slotctl_bytes_text(1536, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "1.5 KiB");
    slotctl_bytes_text(5557452, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "5.3 MiB");
    slotctl_bytes_text(3ull << 30, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "3.0 GiB");

    slotctl_progress_bar(3250586, 5557452, true, buf, sizeof(buf)); /* 58.49% */
    CU_ASSERT_STRING_EQUAL(buf, "[#######.....] 58%  3.1 MiB / 5.3 MiB");
    slotctl_progress_bar(1520, 2610, false, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "[#######.....] 58%  match 1520 / commit 2610");
    slotctl_progress_bar(0, 0, false, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "[............] 0%  match 0 / commit 0");
    slotctl_progress_bar(99, 100, false, buf, sizeof(buf)); /* full only at 100% */
    CU_ASSERT_STRING_EQUAL(buf, "[###########.] 99%  match 99 / commit 100");
    slotctl_progress_bar(120, 100, false, buf, sizeof(buf)); /* capped */
    CU_ASSERT_STRING_EQUAL(buf, "[############] 100%  match 120 / commit 100");
    slotctl_progress_bar(UINT64_MAX / 2, UINT64_MAX, true, buf, sizeof(buf)); /* no overflow */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "[######......] 49%  8.0 EiB / 16.0 EiB"));

    /* catch_up: the snapshot's bytes while it is being sent, then the log position */
    struct slotd_task t = {.task_id = 7,
                           .kind = "replica_move",
                           .status = "running",
                           .phase = "catch_up",
                           .bytes_sent = 1024,
                           .bytes_total = 4096,
                           .target_match = 10,
                           .commit = 40};
    CU_ASSERT_TRUE(slotctl_task_progress(&t, false, buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "[###.........] 25%  1.0 KiB / 4.0 KiB");
    t.bytes_sent = 4096;
    CU_ASSERT_TRUE(slotctl_task_progress(&t, false, buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "[###.........] 25%  match 10 / commit 40");
    snprintf(t.phase, sizeof(t.phase), "promote"); /* no bar outside copy and catch-up */
    CU_ASSERT_FALSE(slotctl_task_progress(&t, false, buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_TRUE(slotctl_task_progress(&t, true, buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "[###.........] 25%  match 10 / commit 40");
    snprintf(t.phase, sizeof(t.phase), "copy_rows"); /* a copy phase: bytes */
    CU_ASSERT_TRUE(slotctl_task_progress(&t, false, buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "[############] 100%  4.0 KiB / 4.0 KiB");
    struct slotd_task none = {.phase = "catch_up"};
    CU_ASSERT_FALSE(slotctl_task_progress(&none, true, buf, sizeof(buf)));

    char line[768];
    t.bytes_sent = 1024;
    snprintf(t.phase, sizeof(t.phase), "catch_up");
    t.attempt = 2;
    snprintf(t.last_error, sizeof(t.last_error), "node 4 unreachable");
    slotctl_task_line(&t, line, sizeof(line));
    CU_ASSERT_STRING_EQUAL(line, "task 7 replica_move  running  phase catch_up  attempt 2  "
                                 "[###.........] 25%  1.0 KiB / 4.0 KiB  last error: node 4 "
                                 "unreachable");
}

/* Three tasks: a move in catch-up, a pending drain, a failed hash slot migration. */
static const uint64_t task_participants[] = {3, 4};
static const uint32_t task_hash_slots[] = {3, 7, 10, 11, 12};

static void task_fixture(struct slotd_task *t)
{
    memset(t, 0, 3 * sizeof(*t));
    t[0] = (struct slotd_task){.task_id = 5,
                               .kind = "replica_move",
                               .status = "running",
                               .phase = "catch_up",
                               .phase_index = 1,
                               .attempt = 1,
                               .group_id = 2,
                               .source_node = 3,
                               .target_node = 4,
                               .participants = task_participants,
                               .participant_count = 2,
                               .config_epoch = 6,
                               .target_match = 1520,
                               .commit = 2610,
                               .created_ms = 1000,
                               .updated_ms = 2000,
                               .revision = 12};
    t[1] = (struct slotd_task){.task_id = 6,
                               .kind = "node_drain",
                               .status = "pending",
                               .phase = "moving_replicas",
                               .attempt = 1,
                               .source_node = 5};
    t[2] = (struct slotd_task){.task_id = 9,
                               .kind = "hash_slot_migration",
                               .status = "failed",
                               .phase = "copy",
                               .phase_index = 1,
                               .attempt = 3,
                               .group_id = 1,
                               .to_group = 2,
                               .bytes_sent = 3250586,
                               .bytes_total = 5557452,
                               .hash_slots = task_hash_slots,
                               .hash_slot_count = 5,
                               .last_error = "group 2: no leader"};
}

/* Renders fn of a task list holding t[0..n) (the list the library would have decoded). */
static char *render_with(void (*fn)(FILE *, const struct slotd_task_list *, bool),
                         struct slotd_task *t, size_t n, bool active)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    struct slotd_task_list l = {.tasks = t, .task_count = n};
    fn(out, &l, active);
    fclose(out);
    return buf;
}

static void test_task_table(void)
{
    struct slotd_task t[3];
    task_fixture(t);
    char *got = render_with(slotctl_tasks_print, t, 3, false);
    const char *want =
        "   ID  KIND                        STATUS   PHASE            ATTEMPT   GROUP  SOURCE  "
        "TARGET  PROGRESS           LAST_ERROR\n"
        "    5  replica_move                running  catch_up               1       2       3  "
        "     4  1520/2610          -\n"
        "    6  node_drain                  pending  moving_replicas        1       -       5  "
        "     -  -                  -\n"
        "    9  hash_slot_migration         failed   copy                   3    1->2       -  "
        "     -  3.1 MiB/5.3 MiB    group 2: no leader\n";
    if (strcmp(got, want) != 0)
        fprintf(stderr, "\n--- got ---\n%s--- want ---\n%s", got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(got);
    got = render_with(slotctl_tasks_print, t, 0, true);
    CU_ASSERT_STRING_EQUAL(got, "no active tasks\n");
    free(got);
    got = render_with(slotctl_tasks_print, t, 0, false);
    CU_ASSERT_STRING_EQUAL(got, "no tasks\n");
    free(got);
}

static void print_one(FILE *out, const struct slotd_task_list *l, bool active)
{
    (void)active;
    slotctl_task_print(out, slotd_task_list_at(l, 0));
}

static void test_task_detail_and_json(void)
{
    struct slotd_task t[3];
    task_fixture(t);
    char *got = render_with(print_one, &t[2], 1, false);
    const char *want = "task 9  hash_slot_migration  failed\n"
                       "  phase         copy (index 1)\n"
                       "  attempt       3\n"
                       "  group         1->2\n"
                       "  source node   -\n"
                       "  target node   -\n"
                       "  participants  -\n"
                       "  hash slots    3,7,10-12 (5) to group 2\n"
                       "  progress      [#######.....] 58%  3.1 MiB / 5.3 MiB\n"
                       "  last error    group 2: no leader\n"
                       "  config epoch  0\n"
                       "  created_ms    0  updated_ms 0\n"
                       "  revision      0\n";
    if (strcmp(got, want) != 0)
        fprintf(stderr, "\n--- got ---\n%s--- want ---\n%s", got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(got);
    got = render_with(print_one, &t[0], 1, false);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "  participants  3,4\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "  progress      [#######.....] 58%  match 1520 / "
                                       "commit 2610\n"));
    CU_ASSERT_PTR_NULL(strstr(got, "hash slots"));
    free(got);

    json_t *j = slotctl_task_json(&t[2]);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    CU_ASSERT_STRING_EQUAL(
        s, "{\"attempt\":3,\"bytes_sent\":3250586,\"bytes_total\":5557452,\"commit\":0,"
           "\"config_epoch\":0,\"created_ms\":0,\"group_id\":1,\"hash_slots\":[3,7,10,11,12],"
           "\"kind\":\"hash_slot_migration\",\"last_error\":\"group 2: no leader\","
           "\"participants\":[],\"phase\":\"copy\",\"phase_index\":1,\"revision\":0,"
           "\"source_node\":0,\"status\":\"failed\",\"target_match\":0,\"target_node\":0,"
           "\"task_id\":9,\"to_group\":2,\"updated_ms\":0}");
    free(s);
    json_decref(j);
}

/* ---- libslotd admin calls without a server ------------------------------------------------ */

static struct slotd_client *dead_client(int max_retries)
{
    /* ports 1 and 2 on loopback: nothing listens, connections are refused at once */
    struct slotd_options *o = slotd_options_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    slotd_options_set_deadline_ms(o, 2000);
    slotd_options_set_max_retries(o, max_retries);
    struct slotd_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(slotd_client_create("127.0.0.1:1,127.0.0.1:2", o, &c, NULL),
                          SLOTD_CLIENT_OK);
    slotd_options_destroy(o);
    return c;
}

/* Sends cmd (ownership transfers) and checks that it failed with want; returns its error
 * (caller frees). */
static struct slotd_error *admin_fails(struct slotd_client *c, struct slotd_admin_command *cmd,
                                       int want)
{
    struct slotd_admin_result *r = (struct slotd_admin_result *)1;
    struct slotd_error *e = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    CU_ASSERT_EQUAL(slotd_client_admin_command(c, cmd, &r, &e), want);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(slotd_error_code(e), want);
    slotd_admin_command_destroy(cmd);
    return e;
}

static void test_admin_write_fails_over_then_gives_up(void)
{
    struct slotd_client *c = dead_client(1);
    struct slotd_admin_command *cmd = slotd_admin_command_create(SLOTD_ADMIN_SET_PREFERRED_LEADER);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    slotd_admin_command_set_group_id(cmd, 1);
    slotd_admin_command_set_node_id(cmd, 2);
    struct slotd_error *e = admin_fails(c, cmd, SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 4); /* two endpoints, two passes (max_retries 1) */
    CU_ASSERT_EQUAL(slotd_error_grpc_status(e), 14);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "set preferred leader: UNAVAILABLE: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "[127.0.0.1:2, 4 attempts]"));

    struct slotd_cluster_state *cs = (struct slotd_cluster_state *)1;
    CU_ASSERT_EQUAL(slotd_client_cluster_state(c, 0, NULL, &cs, &e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NULL(cs);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 2); /* one pass over the endpoints */
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "cluster state: UNAVAILABLE: "));
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

static void test_admin_bad_arguments_make_no_call(void)
{
    struct slotd_client *c = dead_client(0);
    struct slotd_admin_command *cmd = slotd_admin_command_create(SLOTD_ADMIN_JOIN_NODE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    slotd_admin_command_set_node_id(cmd, 4);
    CU_ASSERT_EQUAL(slotd_admin_command_set_address(cmd, ""), SLOTD_CLIENT_OK);
    struct slotd_error *e = admin_fails(c, cmd, SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_EQUAL(slotd_error_grpc_status(e), -1);
    CU_ASSERT_STRING_EQUAL(slotd_error_message(e),
                           "join node: no call: address must be 1..255 bytes [no endpoint, 0 "
                           "attempts]");
    slotd_error_destroy(e);
    e = admin_fails(c, slotd_admin_command_create(17), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "unknown admin command kind 17"));
    struct slotd_cluster_state *cs = NULL;
    CU_ASSERT_EQUAL(slotd_client_cluster_state(c, 3, "0123456789abcdef", &cs, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "known_checksum longer than 15"));
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

static void test_task_calls_without_server(void)
{
    struct slotd_client *c = dead_client(0);
    struct slotd_task_list *ts = (struct slotd_task_list *)1;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_client_task_status(c, 7, false, &ts, &e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NULL(ts);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 2); /* one pass over the endpoints */
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "task status 7: UNAVAILABLE: "));
    CU_ASSERT_EQUAL(slotd_client_task_status(c, 0, true, &ts, &e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "task status (active): UNAVAILABLE: "));
    slotd_error_destroy(e);

    /* a bad hash slot list makes no call */
    uint32_t slots[] = {4, 9, 4};
    struct slotd_admin_command *cmd = slotd_admin_command_create(SLOTD_ADMIN_MIGRATE_HASH_SLOTS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    CU_ASSERT_EQUAL(slotd_admin_command_set_hash_slots(cmd, slots, 3), SLOTD_CLIENT_OK);
    slotd_admin_command_set_to_group(cmd, 2);
    e = admin_fails(c, cmd, SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_STRING_EQUAL(slotd_error_message(e), "migrate hash slots: no call: hash_slots: 4 "
                                                   "given twice [no endpoint, 0 attempts]");
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "hash_slots");
    slotd_error_destroy(e);
    /* more hash slots than there are is refused by the setter */
    cmd = slotd_admin_command_create(SLOTD_ADMIN_MIGRATE_HASH_SLOTS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    CU_ASSERT_EQUAL(slotd_admin_command_set_hash_slots(cmd, slots, SLOTD_HASH_SLOTS + 1),
                    SLOTD_CLIENT_EINVAL);
    slotd_admin_command_destroy(cmd);
    cmd = slotd_admin_command_create(SLOTD_ADMIN_DRAIN_NODE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    slotd_admin_command_set_node_id(cmd, 5);
    e = admin_fails(c, cmd, SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "drain node: UNAVAILABLE: "));
    slotd_error_destroy(e);
    cmd = slotd_admin_command_create(SLOTD_ADMIN_REMOVE_NODE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    slotd_admin_command_set_node_id(cmd, 5);
    e = admin_fails(c, cmd, SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "remove node: UNAVAILABLE: "));
    slotd_error_destroy(e);
    cmd = slotd_admin_command_create(SLOTD_ADMIN_DEMOTE_CONTROLLER_VOTER);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    slotd_admin_command_set_node_id(cmd, 2);
    e = admin_fails(c, cmd, SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "demote controller voter: UNAVAILABLE: "));
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

/* ---- status: parser, table, disagreements, JSON, calls without a server -------------------- */

static void test_parse_status(void)
{
    struct slotctl_args a;
    char err[256];
    CU_ASSERT_EQUAL(parse(ARGV("--json", "status"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_STATUS);
    CU_ASSERT_TRUE(a.json);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(a.cmd), "status");
    CU_ASSERT_EQUAL(parse(ARGV("status", "extra"), &a, err, sizeof(err)), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_STRING_EQUAL(err, "status: takes 0 arguments, got 1");
    CU_ASSERT_EQUAL(parse(ARGV("status", "--node", "1"), &a, err, sizeof(err)), SLOTCTL_EXIT_USAGE);
    CU_ASSERT_STRING_EQUAL(err, "--node: only for drain, promote, remove-node, demote");
}

/* An answering row (the fields in table order). */
static struct slotctl_status_row status_ok(const char *endpoint, uint64_t node, const char *role,
                                           uint64_t term, uint64_t commit, uint64_t applied,
                                           uint64_t revision, uint64_t snapshot,
                                           uint64_t file_revision, int64_t file_age_ms,
                                           int64_t mirror_lag_ms, uint64_t leader)
{
    struct slotctl_status_row r;
    memset(&r, 0, sizeof(r));
    snprintf(r.endpoint, sizeof(r.endpoint), "%s", endpoint);
    r.rc = SLOTD_CLIENT_OK;
    r.cs = malloc(sizeof(*r.cs));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.cs);
    *r.cs = (struct slotd_controller_status){.node_id = node,
                                             .term = term,
                                             .commit_index = commit,
                                             .applied_index = applied,
                                             .revision = revision,
                                             .snapshot_index = snapshot,
                                             .state_file_revision = file_revision,
                                             .state_file_age_ms = file_age_ms,
                                             .mirror_lag_ms = mirror_lag_ms,
                                             .leader = leader,
                                             .attempts = 1};
    snprintf(r.cs->role, sizeof(r.cs->role), "%s", role);
    snprintf(r.cs->source, sizeof(r.cs->source), "%s", endpoint);
    return r;
}

static struct slotctl_status_row status_failed(const char *endpoint)
{
    struct slotctl_status_row r;
    memset(&r, 0, sizeof(r));
    snprintf(r.endpoint, sizeof(r.endpoint), "%s", endpoint);
    r.rc = SLOTD_CLIENT_EUNAVAILABLE;
    struct slotd_status st;
    memset(&st, 0, sizeof(st));
    st.grpc_status = 14;
    snprintf(st.address, sizeof(st.address), "%s", endpoint);
    snprintf(st.message, sizeof(st.message),
             "controller status: UNAVAILABLE: connection refused [%s, 1 attempt]", endpoint);
    slotd__finish(r.rc, &st, 1, &r.err);
    CU_ASSERT_PTR_NOT_NULL(r.err);
    return r;
}

/* Three voters and a mirror: node 4's mirror lags two revisions and names another leader,
 * node 9 does not answer. */
static size_t status_fixture(struct slotctl_status_row *rows)
{
    rows[0] = status_ok("127.0.0.1:7701", 1, "leader", 3, 120, 120, 33, 100, 33, 1200, -1, 1);
    rows[1] = status_ok("127.0.0.1:7702", 2, "follower", 3, 120, 118, 33, 0, 33, 800, -1, 1);
    rows[2] = status_ok("127.0.0.1:7704", 4, "mirror", 0, 0, 110, 31, 0, 0, -1, 450, 2);
    rows[3] = status_failed("node9.example:7700");
    rows[4] = status_ok("127.0.0.1:7703", 3, "candidate", 4, 120, 120, 33, 0, 33, 61000, -1, 0);
    return 5;
}

static char *render_status(const struct slotctl_status_row *rows, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    slotctl_status_print(out, rows, n);
    fclose(out);
    return buf;
}

static void check_text(const char *got, const char *want)
{
    if (strcmp(got, want) != 0)
        fprintf(stderr, "\n--- got ---\n%s--- want ---\n%s", got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
}

static void test_status_table(void)
{
    struct slotctl_status_row rows[SLOTD_CLIENT_ENDPOINTS_MAX];
    size_t n = status_fixture(rows);
    char *got = render_status(rows, n);
    check_text(got, "ENDPOINT            NODE  ROLE             TERM   COMMIT  APPLIED  REVISION  "
                    "SNAPSHOT  FILE REV  FILE AGE  MIRROR LAG  LEADER\n"
                    "127.0.0.1:7701         1  leader              3      120      120        33  "
                    "     100        33     1.2 s           -       1\n"
                    "127.0.0.1:7702         2  follower            3      120      118        33  "
                    "       0        33     0.8 s           -       1\n"
                    "127.0.0.1:7704         4  mirror              0        0      110        31  "
                    "       0         -         -       0.5 s       2\n"
                    "node9.example:7700     -  error: controller status: UNAVAILABLE: connection "
                    "refused [node9.example:7700, 1 attempt]\n"
                    "127.0.0.1:7703         3  candidate           4      120      120        33  "
                    "       0        33    61.0 s           -       -\n"
                    "\n"
                    "revisions differ: node 4 at 31, others at 33\n"
                    "leaders differ: node 4 names node 2, others name node 1\n"
                    "4 of 5 endpoints answered\n");
    free(got);

    /* the voters alone agree (node 3 names no leader: it neither agrees nor disagrees) */
    struct slotctl_status_row agree[3] = {rows[0], rows[1], rows[4]};
    got = render_status(agree, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\n\nagree: revision 33, leader node 1\n"));
    CU_ASSERT_PTR_NULL(strstr(got, "differ"));
    CU_ASSERT_PTR_NULL(strstr(got, "endpoints answered"));
    free(got);
    got = render_status(&rows[4], 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(got, "\n\nagree: revision 33, no node names a controller leader\n"));
    free(got);
    got = render_status(&rows[3], 1);
    check_text(got, "ENDPOINT            NODE  ROLE             TERM   COMMIT  APPLIED  REVISION  "
                    "SNAPSHOT  FILE REV  FILE AGE  MIRROR LAG  LEADER\n"
                    "node9.example:7700     -  error: controller status: UNAVAILABLE: "
                    "connection refused [node9.example:7700, 1 attempt]\n"
                    "\n"
                    "no endpoint answered (1 asked)\n");
    free(got);
    slotctl_status_rows_clear(rows, n);
}

static void test_status_judge(void)
{
    struct slotctl_status_row rows[SLOTD_CLIENT_ENDPOINTS_MAX];
    size_t n = status_fixture(rows);
    struct slotctl_status_verdict v;
    slotctl_status_judge(rows, n, &v);
    CU_ASSERT_EQUAL(v.asked, 5);
    CU_ASSERT_EQUAL(v.answered, 4);
    CU_ASSERT_FALSE(v.agree);
    CU_ASSERT_EQUAL(v.revision, 33);
    CU_ASSERT_EQUAL(v.leader, 1);

    /* two nodes, one each: the tie goes to the higher value, named as a node, not "others" */
    struct slotctl_status_row two[2] = {rows[2], rows[0]};
    slotctl_status_judge(two, 2, &v);
    CU_ASSERT_EQUAL(v.revision, 33);
    CU_ASSERT_STRING_EQUAL(v.revisions, "revisions differ: node 4 at 31, node 1 at 33");
    CU_ASSERT_STRING_EQUAL(v.leaders, "leaders differ: node 1 names node 1, node 4 names node 2");
    CU_ASSERT_EQUAL(v.leader, 2);
    CU_ASSERT_FALSE(v.agree);

    /* three revisions, the most common one last; a minority leader named by two nodes */
    struct slotctl_status_row many[5] = {rows[0], rows[1], rows[2], rows[4], rows[0]};
    struct slotd_controller_status copies[3] = {*rows[1].cs, *rows[4].cs, *rows[0].cs};
    many[1].cs = &copies[0];
    many[1].cs->revision = 30;
    many[3].cs = &copies[1];
    many[3].cs->leader = 2;
    many[4].cs = &copies[2];
    many[4].cs->node_id = 5;
    slotctl_status_judge(many, 5, &v);
    CU_ASSERT_STRING_EQUAL(v.revisions, "revisions differ: node 2 at 30, node 4 at 31, others at "
                                        "33");
    CU_ASSERT_STRING_EQUAL(v.leaders, "leaders differ: node 4 names node 2, node 3 names node 2, "
                                      "others name node 1");
    CU_ASSERT_EQUAL(v.leader, 1);

    /* nothing answered: no agreement to claim */
    slotctl_status_judge(&rows[3], 1, &v);
    CU_ASSERT_EQUAL(v.answered, 0);
    CU_ASSERT_FALSE(v.agree);
    CU_ASSERT_STRING_EQUAL(v.revisions, "");
    slotctl_status_judge(rows, 0, &v);
    CU_ASSERT_FALSE(v.agree);
    CU_ASSERT_EQUAL(v.asked, 0);
    slotctl_status_rows_clear(rows, n);
}

static void test_status_json(void)
{
    struct slotctl_status_row rows[2] = {
        status_ok("127.0.0.1:7704", 4, "mirror", 0, 0, 110, 31, 0, 0, -1, 450, 2),
        status_failed("127.0.0.1:7709")};
    json_t *j = slotctl_status_json(rows, 2, SLOTCTL_EXIT_UNAVAILABLE);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    CU_ASSERT_STRING_EQUAL(
        s, "{\"agree\":true,\"command\":\"status\",\"disagreements\":[],\"exit_code\":4,"
           "\"nodes\":[{\"applied_index\":110,\"commit_index\":0,\"endpoint\":\"127.0.0.1:7704\","
           "\"leader\":2,\"mirror_lag_ms\":450,\"node_id\":4,\"ok\":true,\"revision\":31,"
           "\"role\":\"mirror\",\"snapshot_index\":0,\"state_file_age_ms\":-1,"
           "\"state_file_revision\":0,\"term\":0},"
           "{\"endpoint\":\"127.0.0.1:7709\",\"error\":\"unavailable\",\"message\":\"controller "
           "status: UNAVAILABLE: connection refused [127.0.0.1:7709, 1 attempt]\",\"ok\":false,"
           "\"status\":{\"address\":\"127.0.0.1:7709\",\"grpc_status\":\"UNAVAILABLE\"}}],"
           "\"ok\":false}");
    free(s);
    json_decref(j);
    slotctl_status_rows_clear(rows, 2);

    struct slotctl_status_row fx[SLOTD_CLIENT_ENDPOINTS_MAX];
    size_t n = status_fixture(fx);
    j = slotctl_status_json(fx, n, SLOTCTL_EXIT_UNAVAILABLE);
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "agree")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "nodes")), 5);
    json_t *d = json_object_get(j, "disagreements");
    CU_ASSERT_EQUAL_FATAL(json_array_size(d), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(d, 0)),
                           "revisions differ: node 4 at 31, others at 33");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(d, 1)),
                           "leaders differ: node 4 names node 2, others name node 1");
    json_decref(j);
    slotctl_status_rows_clear(fx, n);
}

static void test_status_without_server(void)
{
    struct slotd_client *c = dead_client(3);
    struct slotd_controller_status *cs = (struct slotd_controller_status *)1;
    struct slotd_error *e = NULL;
    /* an address the client was not given: asked as is, once, and no endpoint is tried */
    CU_ASSERT_EQUAL(slotd_client_controller_status(c, "127.0.0.1:3", &cs, &e),
                    SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NULL(cs);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 1);
    CU_ASSERT_EQUAL(slotd_error_grpc_status(e), 14);
    CU_ASSERT_STRING_EQUAL(slotd_error_address(e), "127.0.0.1:3");
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "controller status: UNAVAILABLE: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "[127.0.0.1:3, 1 attempt]"));

    /* not one host:port: no call */
    const char *bad[] = {NULL, "", "127.0.0.1:1,127.0.0.1:2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CU_ASSERT_EQUAL(slotd_client_controller_status(c, bad[i], &cs, &e), SLOTD_CLIENT_EINVAL);
        CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
        CU_ASSERT_EQUAL(slotd_error_grpc_status(e), -1);
        CU_ASSERT_STRING_EQUAL(slotd_error_message(e),
                               "controller status: no call: address must be one host:port of "
                               "1..255 bytes [no endpoint, 0 attempts]");
    }
    slotd_error_destroy(e);

    /* slotctl status: each endpoint asked on its own, each row with its own error */
    struct slotctl_status_row rows[SLOTD_CLIENT_ENDPOINTS_MAX];
    size_t n = slotctl_status_collect(c, "127.0.0.1:1,127.0.0.1:2", rows, 16);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    for (size_t i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "127.0.0.1:%zu", i + 1);
        CU_ASSERT_STRING_EQUAL(rows[i].endpoint, want);
        CU_ASSERT_EQUAL(rows[i].rc, SLOTD_CLIENT_EUNAVAILABLE);
        CU_ASSERT_PTR_NULL(rows[i].cs);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rows[i].err);
        CU_ASSERT_EQUAL(slotd_error_attempts(rows[i].err), 1);
        CU_ASSERT_STRING_EQUAL(slotd_error_address(rows[i].err), want);
    }
    char *got = render_status(rows, n);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\n127.0.0.1:1     -  error: controller status: "
                                       "UNAVAILABLE: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\n\nno endpoint answered (2 asked)\n"));
    free(got);
    slotctl_status_rows_clear(rows, n);
    slotd_client_destroy(c);
}

/* ---- get --prefix, txn and watch ----------------------------------------------------------- */

static void test_parse_kv_commands(void)
{
    struct slotctl_args a;
    char err[256];
    CU_ASSERT_EQUAL(
        parse(ARGV("get", "--prefix", "", "--limit", "10", "--keys-only"), &a, err, sizeof(err)),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_TRUE(a.has_prefix);
    CU_ASSERT_STRING_EQUAL(a.prefix, "");
    CU_ASSERT_EQUAL(a.limit, 10);
    CU_ASSERT_TRUE(a.keys_only);
    CU_ASSERT_EQUAL(parse(ARGV("watch", "--prefix", "u/", "--resume", "1:5,2:7", "--count", "3",
                               "--timeout", "9"),
                          &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_WATCH);
    CU_ASSERT_EQUAL(a.count, 3);
    CU_ASSERT_EQUAL(a.timeout_s, 9);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(SLOTCTL_CMD_WATCH), "watch");
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(SLOTCTL_CMD_TXN), "txn");
    CU_ASSERT_EQUAL(parse(ARGV("txn"), &a, err, sizeof(err)), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(parse(ARGV("watch", "--subscribers", "g1"), &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.typed_kind, SLOTD_TYPED_WATCH_SUBSCRIBERS);
    CU_ASSERT_STRING_EQUAL(a.typed_id, "g1");
    static const struct {
        char *argv[8];
        const char *err;
    } cases[] = {
        {{"slotctl", "get", NULL}, "get: give KEY or --prefix P (one of them)"},
        {{"slotctl", "get", "k", "--prefix", "p", NULL},
         "get: give KEY or --prefix P (one of them)"},
        {{"slotctl", "get", "k", "--limit", "3", NULL},
         "--limit, --keys-only and --count-only: only with get --prefix"},
        {{"slotctl", "get", "--prefix", "p", "--limit", "0", NULL},
         "--limit: '0' is not an integer in 1..100000000"},
        {{"slotctl", "get", "--prefix", "p", "--keys-only", "--count-only", NULL},
         "--keys-only and --count-only: give one"},
        {{"slotctl", "watch", NULL}, "watch: give KEY or --prefix P (one of them)"},
        {{"slotctl", "watch", "k", "--limit", "3", NULL}, "--limit: only for get"},
        {{"slotctl", "put", "k", "v", "--resume", "1:1", NULL}, "--resume: only for watch"},
        {{"slotctl", "txn", "x", NULL}, "txn: takes 0 arguments, got 1"},
        {{"slotctl", "watch", "--subscribers", "c", "--prefix", "p", NULL},
         "watch: a typed watch (--user-rows, --channel-rows, --subscribers) takes no KEY or "
         "--prefix"},
        {{"slotctl", "watch", "--subscribers", "c", "--user-rows", "u", NULL},
         "--user-rows: give one of --user-rows, --channel-rows and --subscribers"},
        {{"slotctl", "get", "--channel-rows", "c", NULL},
         "--user-rows, --channel-rows and --subscribers: only for watch"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse((char **)cases[i].argv, &a, err, sizeof(err));
        CU_ASSERT_EQUAL(rc, SLOTCTL_EXIT_USAGE);
        if (strcmp(err, cases[i].err) != 0)
            fprintf(stderr, "\ncase %zu: got '%s', want '%s'\n", i, err, cases[i].err);
        CU_ASSERT_STRING_EQUAL(err, cases[i].err);
    }
}

static void test_txn_text(void)
{
    struct slotctl_txn_text *t = malloc(sizeof(*t));
    char err[256];
    char text[] = "# a comment\n"
                  "value(\"a b\") = \"x\\\"y\"\n"
                  "version(k1) > 3\r\n"
                  "mod(\"k1\") != \"0\"\n"
                  "exists(k2)\n"
                  "absent(\"k\\x00z\")\n"
                  "\n"
                  "put k1 \"v 1\"\n"
                  "del k2\n"
                  "\n"
                  "get k1\n";
    CU_ASSERT_EQUAL_FATAL(slotctl_txn_parse(text, t, err, sizeof(err)), 0);
    CU_ASSERT_EQUAL(t->compare_count, 5);
    CU_ASSERT_EQUAL(t->success_count, 2);
    CU_ASSERT_EQUAL(t->failure_count, 1);
    const struct slotctl_txn_compare *c = t->compares;
    CU_ASSERT_EQUAL(c[0].target, SLOTD_TXN_TARGET_VALUE);
    CU_ASSERT_EQUAL(c[0].op, SLOTD_TXN_CMP_EQUAL);
    CU_ASSERT_EQUAL(c[0].key_len, 3);
    CU_ASSERT_EQUAL(memcmp(c[0].key, "a b", 3), 0);
    CU_ASSERT_EQUAL(c[0].value_len, 3);
    CU_ASSERT_EQUAL(memcmp(c[0].value, "x\"y", 3), 0);
    CU_ASSERT_EQUAL(c[1].target, SLOTD_TXN_TARGET_VERSION);
    CU_ASSERT_EQUAL(c[1].op, SLOTD_TXN_CMP_GREATER);
    CU_ASSERT_EQUAL(c[1].version, 3);
    CU_ASSERT_EQUAL(c[2].op, SLOTD_TXN_CMP_NOT_EQUAL);
    CU_ASSERT_EQUAL(c[3].target, SLOTD_TXN_TARGET_EXISTS);
    CU_ASSERT_EQUAL(c[4].target, SLOTD_TXN_TARGET_ABSENT);
    CU_ASSERT_EQUAL(c[4].key_len, 3);
    CU_ASSERT_EQUAL(memcmp(c[4].key, "k\0z", 3), 0);
    CU_ASSERT_EQUAL(t->success[0].kind, SLOTD_TXN_PUT);
    CU_ASSERT_EQUAL(t->success[0].value_len, 3);
    CU_ASSERT_EQUAL(t->success[1].kind, SLOTD_TXN_DELETE);
    CU_ASSERT_EQUAL(t->failure[0].kind, SLOTD_TXN_GET);
    static const struct {
        const char *text;
        const char *err;
    } bad[] = {
        {"", "the txn has no compare and no op"},
        {"size(k) = 1\n", "line 1: a compare is value(K), version(K), mod(K), exists(K) or "
                          "absent(K)"},
        {"value(\"k) = 1\n", "line 1: compare key: no closing quote"},
        {"value(k = 1\n", "line 1: compare key: no closing ')'"},
        {"version(k) = x\n", "line 1: version 'x' is not an integer"},
        {"exists(k) = 1\n", "line 1: unexpected text '= 1'"},
        {"\nput k\n", "line 2: value: missing"},
        {"\nmove k\n", "line 2: an op is put K V, del K or get K"},
        {"\n\n\nget k\n", "line 3: more than three sections (compares, success ops, failure ops)"},
        {"value(k) = \"a\\q\"\n", "line 1: compare value: unknown escape \\q"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", bad[i].text);
        CU_ASSERT_EQUAL(slotctl_txn_parse(buf, t, err, sizeof(err)), -1);
        if (strcmp(err, bad[i].err) != 0)
            fprintf(stderr, "\ntxn case %zu: got '%s', want '%s'\n", i, err, bad[i].err);
        CU_ASSERT_STRING_EQUAL(err, bad[i].err);
    }
    /* 17 compares: one over the limit */
    char many[17 * 16 + 1] = "";
    for (int i = 0; i < 17; i++)
        strcat(many, "exists(k)\n");
    CU_ASSERT_EQUAL(slotctl_txn_parse(many, t, err, sizeof(err)), -1);
    CU_ASSERT_STRING_EQUAL(err, "line 17: more than 16 compares");
    free(t);
}

static void test_resume_tokens(void)
{
    struct slotd_watch_position p[4];
    size_t n;
    char err[256];
    CU_ASSERT_EQUAL(slotctl_resume_parse("1:0,7:18446744073709551615", p, 4, &n, err, sizeof(err)),
                    0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(p[1].group_id, 7);
    CU_ASSERT_EQUAL(p[1].index, UINT64_MAX);
    static const struct {
        const char *token;
        const char *err;
    } bad[] = {
        {"x", "--resume: 'x' is not GROUP:INDEX"},
        {"0:1", "--resume: '0:1' is not GROUP:INDEX (group 1..4294967295)"},
        {"1:", "--resume: group 1: no index"},
        {"1:2:3", "--resume: group 1: '2:3' is not an index"},
        {"1:2,1:3", "--resume: group 1 given twice"},
        {"1:1,2:2,3:3,4:4,5:5", "--resume: more than 4 positions"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CU_ASSERT_EQUAL(slotctl_resume_parse(bad[i].token, p, 4, &n, err, sizeof(err)), -1);
        if (strcmp(err, bad[i].err) != 0)
            fprintf(stderr, "\nresume case %zu: got '%s', want '%s'\n", i, err, bad[i].err);
        CU_ASSERT_STRING_EQUAL(err, bad[i].err);
    }
}

static int kv_never_called(void *arg, const struct slotd_watch_message *m)
{
    (void)m;
    (*(int *)arg)++;
    return 1;
}

/* What libslotd refuses before any call: no attempt is made. */
static void test_kv_bad_arguments_make_no_call(void)
{
    struct slotd_client *c = dead_client(0);
    struct slotd_error *e = NULL;
    struct slotd_range_query *q = slotd_range_query_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    CU_ASSERT_EQUAL(slotd_range_query_set_prefix(q, NULL, 3), SLOTD_CLIENT_EINVAL);
    slotd_range_query_set_consistency(q, 9);
    struct slotd_range_page *p = (struct slotd_range_page *)1;
    CU_ASSERT_EQUAL(slotd_client_range(c, q, &p, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "consistency 9 is not 0..2"));
    slotd_range_query_destroy(q);
    /* a refused add is reported by the call, naming the field, and nothing is sent */
    struct slotd_txn *t = slotd_txn_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(slotd_txn_add_op(t, SLOTD_TXN_SUCCESS, 9, "k", 1, NULL, 0, 0),
                    SLOTD_CLIENT_EINVAL);
    struct slotd_txn_result *r = (struct slotd_txn_result *)1;
    CU_ASSERT_EQUAL(slotd_client_txn(c, t, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "txn.success");
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    slotd_txn_destroy(t);
    t = slotd_txn_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    for (int i = 0; i < SLOTD_TXN_OPS_MAX; i++)
        CU_ASSERT_EQUAL(slotd_txn_add_op(t, SLOTD_TXN_FAILURE, SLOTD_TXN_GET, "k", 1, NULL, 0, 0),
                        SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_txn_add_op(t, SLOTD_TXN_FAILURE, SLOTD_TXN_GET, "k", 1, NULL, 0, 0),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_client_txn(c, t, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_error_limit(e), SLOTD_TXN_OPS_MAX);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "txn.failure");
    slotd_txn_destroy(t);
    int calls = 0;
    struct slotd_watch_request *w = slotd_watch_request_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(slotd_watch_request_set_key(w, "k", 1), SLOTD_CLIENT_OK);
    CU_ASSERT_EQUAL(slotd_watch_request_set_prefix(w, "p", 1), SLOTD_CLIENT_OK);
    struct slotd_watch_result *wr = (struct slotd_watch_result *)1;
    CU_ASSERT_EQUAL(slotd_client_watch(c, w, kv_never_called, &calls, &wr, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(wr);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "both a key and a prefix"));
    slotd_watch_request_destroy(w);
    CU_ASSERT_EQUAL(calls, 0);
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

/* A watch on endpoints that do not answer gives up after max_resumes restarts; the result
 * still says where it stopped. */
static void test_watch_gives_up_on_dead_endpoints(void)
{
    struct slotd_client *c = dead_client(0);
    int calls = 0;
    struct slotd_watch_request *w = slotd_watch_request_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(slotd_watch_request_set_prefix(w, "p", 1), SLOTD_CLIENT_OK);
    struct slotd_watch_position from[1] = {{.group_id = 3, .index = 40}};
    CU_ASSERT_EQUAL(slotd_watch_request_set_resume(w, from, 1), SLOTD_CLIENT_OK);
    slotd_watch_request_set_max_resumes(w, 2);
    struct slotd_watch_result *wr = NULL;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_client_watch(c, w, kv_never_called, &calls, &wr, &e),
                    SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wr);
    CU_ASSERT_EQUAL(wr->resumes, 2);
    CU_ASSERT_EQUAL_FATAL(wr->position_count, 1);
    CU_ASSERT_EQUAL(wr->positions[0].index, 40);
    CU_ASSERT_EQUAL(calls, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "watch: UNAVAILABLE"));
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "2 resumes]"));
    slotd_watch_result_destroy(wr);
    slotd_watch_request_destroy(w);
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

/* ---- leases ------------------------------------------------------------------------------- */

static void test_parse_lease_commands(void)
{
    struct slotctl_args a;
    char err[256];
    CU_ASSERT_EQUAL(parse(ARGV("lease", "grant", "k", "10"), &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_LEASE_GRANT);
    CU_ASSERT_STRING_EQUAL(a.pos[1], "k");
    CU_ASSERT_EQUAL(a.ttl_seconds, 10);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(a.cmd), "lease grant");
    CU_ASSERT_EQUAL(
        parse(ARGV("lease", "keepalive", "0x4d000000000001", "--count", "3", "--interval", "0.5"),
              &a, err, sizeof(err)),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_LEASE_KEEPALIVE);
    CU_ASSERT_EQUAL(a.lease_id, (UINT64_C(0x4d) << 48) | 1);
    CU_ASSERT_EQUAL(a.count, 3);
    CU_ASSERT_EQUAL(a.lease_interval_ms, 500);
    CU_ASSERT_STRING_EQUAL(slotctl_cmd_name(a.cmd), "lease keepalive");
    CU_ASSERT_EQUAL(parse(ARGV("lease", "keep-alive", "21673573206720513"), &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.lease_id, (UINT64_C(0x4d) << 48) | 1);
    CU_ASSERT_EQUAL(a.count, 0); /* one keep-alive */
    CU_ASSERT_EQUAL(parse(ARGV("lease", "revoke", "0X1000000000002"), &a, err, sizeof(err)),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_LEASE_REVOKE);
    CU_ASSERT_EQUAL(a.lease_id, (UINT64_C(1) << 48) | 2);
    CU_ASSERT_EQUAL(
        parse(ARGV("put", "k", "v", "--lease", "0x1000000000002"), &a, err, sizeof(err)),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_TRUE(a.has_lease);
    CU_ASSERT_EQUAL(a.lease_id, (UINT64_C(1) << 48) | 2);
    uint64_t id = 0;
    CU_ASSERT_TRUE(slotctl_lease_id_parse("18446744073709551615", &id));
    CU_ASSERT_EQUAL(id, UINT64_MAX);
    CU_ASSERT_FALSE(slotctl_lease_id_parse("18446744073709551616", &id));
    CU_ASSERT_FALSE(slotctl_lease_id_parse("0x10000000000000000", &id));
    CU_ASSERT_FALSE(slotctl_lease_id_parse("0x-1", &id));
    CU_ASSERT_FALSE(slotctl_lease_id_parse(" 1", &id));
    static const struct {
        char *argv[10];
        const char *err;
    } cases[] = {
        {{"slotctl", "lease", NULL},
         "lease: usage: lease grant KEY TTL | lease keepalive ID | lease revoke ID"},
        {{"slotctl", "lease", "grant", "k", NULL}, "lease grant: usage: lease grant KEY TTL"},
        {{"slotctl", "lease", "grant", "k", "0", NULL},
         "lease grant: TTL '0' is not a number of seconds in 1..31536000"},
        {{"slotctl", "lease", "grant", "k", "31536001", NULL},
         "lease grant: TTL '31536001' is not a number of seconds in 1..31536000"},
        {{"slotctl", "lease", "grant", "k", "10s", NULL},
         "lease grant: TTL '10s' is not a number of seconds in 1..31536000"},
        {{"slotctl", "lease", "renew", "1", NULL},
         "lease: unknown subcommand 'renew' (try: lease grant KEY TTL | lease keepalive ID | "
         "lease revoke ID)"},
        {{"slotctl", "lease", "revoke", NULL},
         "lease: usage: lease grant KEY TTL | lease keepalive ID | lease revoke ID"},
        {{"slotctl", "lease", "revoke", "1", "2", NULL}, "lease revoke: usage: lease revoke ID"},
        {{"slotctl", "lease", "keepalive", "0x", NULL},
         "lease keepalive: ID '0x' is not a lease id (decimal or 0x hex)"},
        {{"slotctl", "lease", "revoke", "--", "-1", NULL},
         "lease revoke: ID '-1' is not a lease id (decimal or 0x hex)"},
        {{"slotctl", "lease", "revoke", "12ab", NULL},
         "lease revoke: ID '12ab' is not a lease id (decimal or 0x hex)"},
        {{"slotctl", "lease", "keepalive", "1", "--interval", "0.01", NULL},
         "--interval: '0.01' is not a number of seconds in 0.05..3600"},
        {{"slotctl", "lease", "keepalive", "1", "--interval", "x", NULL},
         "--interval: 'x' is not a number of seconds in 0.05..3600"},
        {{"slotctl", "lease", "revoke", "1", "--count", "2", NULL},
         "--count: only for watch, lease keepalive"},
        {{"slotctl", "lease", "grant", "k", "5", "--interval", "1", NULL},
         "--interval: only for lease keepalive"},
        {{"slotctl", "get", "k", "--lease", "1", NULL}, "--lease: only for put"},
        {{"slotctl", "put", "k", "v", "--lease", "zz", NULL},
         "--lease: 'zz' is not a lease id (decimal or 0x hex)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse((char **)cases[i].argv, &a, err, sizeof(err));
        CU_ASSERT_EQUAL(rc, SLOTCTL_EXIT_USAGE);
        if (strcmp(err, cases[i].err) != 0)
            fprintf(stderr, "\nlease case %zu: got '%s', want '%s'\n", i, err, cases[i].err);
        CU_ASSERT_STRING_EQUAL(err, cases[i].err);
    }
}

/* What libslotd refuses before any call: a TTL out of range, an id that names no hash slot,
 * a lease on a write that is not a put; nothing is sent (attempts 0). */
static void test_lease_bad_arguments_make_no_call(void)
{
    struct slotd_client *c = dead_client(0);
    struct slotd_lease_result *r = (struct slotd_lease_result *)1;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_client_lease_grant(c, "k", 1, 0, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "lease_grant.ttl_seconds");
    CU_ASSERT_EQUAL(slotd_error_limit(e), SLOTD_LEASE_TTL_MAX);
    CU_ASSERT_STRING_EQUAL(slotd_error_message(e),
                           "lease grant: no call: lease_grant.ttl_seconds: 0 is not in "
                           "1..31536000");
    CU_ASSERT_EQUAL(slotd_client_lease_grant(c, "k", 1, SLOTD_LEASE_TTL_MAX + 1, &r, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_EQUAL(slotd_client_lease_grant(c, NULL, 3, 10, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "lease_grant.key");
    /* sequence 0, and hash slot 256: not lease ids */
    CU_ASSERT_EQUAL(slotd_client_lease_keepalive(c, 0, &r, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "lease_keep_alive.id");
    CU_ASSERT_EQUAL(slotd_client_lease_keepalive(c, UINT64_C(7) << 48, &r, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_EQUAL(slotd_client_lease_revoke(c, (UINT64_C(256) << 48) | 1, &r, &e),
                    SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "lease_revoke.id");
    CU_ASSERT_STRING_EQUAL(slotd_error_message(e),
                           "lease revoke: no call: lease_revoke.id: 72057594037927937 "
                           "(0x100000000000001) is not a lease id (hash slot 0..255 << 48 | "
                           "sequence >= 1)");
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_EQUAL(slotd_error_grpc_status(e), -1);
    struct slotd_write_options *wo = slotd_write_options_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(wo);
    slotd_write_options_set_lease(wo, 5);
    struct slotd_write_result *wr = (struct slotd_write_result *)1;
    CU_ASSERT_EQUAL(slotd_client_delete(c, "k", 1, wo, &wr, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_PTR_NULL(wr);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    CU_ASSERT_STRING_EQUAL(slotd_error_message(e),
                           "delete: a lease is only for puts (lease 5 given)");
    slotd_write_options_destroy(wo);
    struct slotd_txn *t = slotd_txn_create();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(slotd_txn_add_op(t, SLOTD_TXN_SUCCESS, SLOTD_TXN_DELETE, "k", 1, NULL, 0, 5),
                    SLOTD_CLIENT_EINVAL);
    struct slotd_txn_result *tr = (struct slotd_txn_result *)1;
    CU_ASSERT_EQUAL(slotd_client_txn(c, t, &tr, &e), SLOTD_CLIENT_EINVAL);
    CU_ASSERT_STRING_EQUAL(slotd_error_field(e), "txn.success");
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 0);
    slotd_txn_destroy(t);
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

/* A lease call to endpoints that do not answer: retried (it carries a request id), then
 * UNAVAILABLE with the call's name and attempts; slotctl maps it to exit 4. */
static void test_lease_calls_without_server(void)
{
    struct slotd_client *c = dead_client(1);
    struct slotd_lease_result *r = NULL;
    struct slotd_error *e = NULL;
    CU_ASSERT_EQUAL(slotd_client_lease_keepalive(c, (UINT64_C(3) << 48) | 9, &r, &e),
                    SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_EQUAL(slotd_error_attempts(e), 2); /* the first try and one retry (max_retries 1) */
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "lease keepalive: UNAVAILABLE: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "2 attempts]"));
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_EUNAVAILABLE), SLOTCTL_EXIT_UNAVAILABLE);
    CU_ASSERT_EQUAL(slotctl_exit_of(SLOTD_CLIENT_ENOTFOUND), SLOTCTL_EXIT_NOT_FOUND);
    CU_ASSERT_EQUAL(slotd_client_lease_grant(c, "k", 1, 10, &r, &e), SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "lease grant: UNAVAILABLE: "));
    CU_ASSERT_EQUAL(slotd_client_lease_revoke(c, (UINT64_C(3) << 48) | 9, &r, &e),
                    SLOTD_CLIENT_EUNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(slotd_error_message(e), "lease revoke: UNAVAILABLE: "));
    CU_ASSERT_PTR_NULL(r);
    slotd_error_destroy(e);
    slotd_client_destroy(c);
}

/* argv for slotctl_args_parse: "slotctl" then the words. */
static int meta_args(struct slotctl_args *a, char *err, size_t errlen, int n, ...)
{
    static char *argv[16];
    va_list ap;
    va_start(ap, n);
    argv[0] = "slotctl";
    for (int i = 0; i < n; i++)
        argv[i + 1] = va_arg(ap, char *);
    va_end(ap);
    return slotctl_args_parse(n + 1, argv, a, err, errlen);
}

static void test_parse_meta_commands(void)
{
    static struct slotctl_args a;
    char err[512];
    CU_ASSERT_EQUAL(meta_args(&a, err, sizeof(err), 8, "channel", "create", "g1", "--type", "2",
                              "--flags", "ban,large", "--json"),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_META);
    CU_ASSERT_TRUE(a.json); /* slotctl's own option, taken among the command's */
    CU_ASSERT_EQUAL(a.meta.verb, SLOTCTL_META_CHANNEL_CREATE);
    CU_ASSERT_STRING_EQUAL(a.meta.name, "channel create");
    CU_ASSERT_STRING_EQUAL(a.meta.channel_id, "g1");
    CU_ASSERT_EQUAL(a.meta.channel_type, 2);
    CU_ASSERT_EQUAL(a.meta.flags, SLOTD_CHANNEL_FLAG_BAN | SLOTD_CHANNEL_FLAG_LARGE);
    CU_ASSERT_EQUAL(
        meta_args(&a, err, sizeof(err), 8, "member", "add", "g1", "--type", "2", "a", "b", "c"),
        SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.meta.uid_count, 3);
    CU_ASSERT_EQUAL(a.meta.list, SLOTD_MEMBER_LIST_SUBSCRIBERS);
    CU_ASSERT_FALSE(a.meta.has_expected_version);
    CU_ASSERT_EQUAL(meta_args(&a, err, sizeof(err), 7, "conversation", "read", "alice", "g1",
                              "--seq", "42", "--type=2"),
                    SLOTCTL_EXIT_USAGE); /* no --opt=value form */
    CU_ASSERT_EQUAL(meta_args(&a, err, sizeof(err), 8, "conversation", "read", "alice", "g1",
                              "--seq", "42", "--type", "2"),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.meta.seq, 42);
    CU_ASSERT_STRING_EQUAL(a.meta.uid, "alice");
    /* user delete|list are the auth commands unless --meta is given */
    CU_ASSERT_EQUAL(meta_args(&a, err, sizeof(err), 3, "user", "delete", "bob"), SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_USER);
    CU_ASSERT_EQUAL(meta_args(&a, err, sizeof(err), 4, "user", "delete", "bob", "--meta"),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.cmd, SLOTCTL_CMD_META);
    CU_ASSERT_EQUAL(a.meta.verb, SLOTCTL_META_USER_DELETE);
    CU_ASSERT_EQUAL(meta_args(&a, err, sizeof(err), 13, "runtime", "set", "g1", "--type", "2",
                              "--replicas", "1,2,3", "--isr", "1,2", "--status", "active",
                              "--expect-leader", "4"),
                    SLOTCTL_EXIT_OK);
    CU_ASSERT_EQUAL(a.meta.replica_count, 3);
    CU_ASSERT_EQUAL(a.meta.isr[1], 2);
    CU_ASSERT_EQUAL(a.meta.status, SLOTD_CHANNEL_STATUS_ACTIVE);
    CU_ASSERT_EQUAL(a.meta.expect_leader, 4);
}

static void test_parse_meta_errors(void)
{
    static struct slotctl_args a;
    char err[512];
    static const struct {
        int n;
        char *w[6];
        const char *want;
    } cases[] = {
        {3, {"channel", "get", "g1"}, "channel get: --type: required"},
        {5, {"channel", "get", "g1", "--type", "256"}, "--type: '256' is not a channel type"},
        {5, {"channel", "get", "g1", "--tpye", "2"}, "channel get: --tpye: unknown option"},
        {6, {"channel", "flags", "g1", "--type", "2", "--flags"}, "--flags: needs a value"},
        {4, {"device", "put", "u", "x"}, "DEVICE_FLAG 'x'"},
        {2, {"device", "list"}, "device list: missing arguments"},
        {4, {"plugin", "get", "u", "extra"}, "unexpected argument 'extra'"},
        {2, {"channel", "explode"}, "channel: unknown subcommand 'explode'"},
        {5, {"conversation", "read", "u", "g", "--type"}, "--type: needs a value"},
        {6, {"conversation", "hide", "u", "g", "--type", "2"}, "--seq: required"},
        {3, {"user", "update", "u"}, "nothing to update"},
        {6, {"runtime", "set", "g", "--type", "2", "--status"}, "--status: needs a value"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *argv[8] = {"slotctl"};
        for (int k = 0; k < cases[i].n; k++)
            argv[k + 1] = cases[i].w[k];
        CU_ASSERT_EQUAL(slotctl_args_parse(cases[i].n + 1, argv, &a, err, sizeof(err)),
                        SLOTCTL_EXIT_USAGE);
        if (!strstr(err, cases[i].want))
            fprintf(stderr, "case %zu: want '%s' in '%s'\n", i, cases[i].want, err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].want));
        CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    }
    uint32_t flags;
    CU_ASSERT_FALSE(slotctl_meta_flags_parse("ban,", &flags));
    CU_ASSERT_TRUE(slotctl_meta_flags_parse("none", &flags));
    CU_ASSERT_EQUAL(flags, 0);
    char names[64];
    slotctl_meta_flags_name(SLOTD_CHANNEL_FLAG_DISBAND | SLOTD_CHANNEL_FLAG_ALLOW_STRANGER, names,
                            sizeof(names));
    CU_ASSERT_STRING_EQUAL(names, "disband,allow_stranger");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("slotctl_admin", NULL, NULL);
    CU_add_test(s, "parse admin commands", test_parse_admin_commands);
    CU_add_test(s, "parse backup", test_parse_backup);
    CU_add_test(s, "parse admin errors", test_parse_admin_errors);
    CU_add_test(s, "exit codes and names", test_exit_codes);
    CU_add_test(s, "cluster tables with route", test_cluster_tables_with_route);
    CU_add_test(s, "cluster tables without route", test_cluster_tables_without_route);
    CU_add_test(s, "cluster tables before placement", test_cluster_tables_before_placement);
    CU_add_test(s, "admin write fails over then gives up",
                test_admin_write_fails_over_then_gives_up);
    CU_add_test(s, "admin bad arguments make no call", test_admin_bad_arguments_make_no_call);
    CU_add_test(s, "parse task commands", test_parse_task_commands);
    CU_add_test(s, "parse task errors", test_parse_task_errors);
    CU_add_test(s, "hash slot lists", test_slot_lists);
    CU_add_test(s, "progress bars and watch lines", test_progress_bar);
    CU_add_test(s, "task table", test_task_table);
    CU_add_test(s, "task detail and JSON", test_task_detail_and_json);
    CU_add_test(s, "task calls without a server", test_task_calls_without_server);
    CU_add_test(s, "parse status", test_parse_status);
    CU_add_test(s, "status table and disagreement lines", test_status_table);
    CU_add_test(s, "status verdicts", test_status_judge);
    CU_add_test(s, "status JSON", test_status_json);
    CU_add_test(s, "status calls without a server", test_status_without_server);
    CU_add_test(s, "parse get --prefix, watch and txn", test_parse_kv_commands);
    CU_add_test(s, "txn text", test_txn_text);
    CU_add_test(s, "watch resume tokens", test_resume_tokens);
    CU_add_test(s, "range, txn and watch bad arguments make no call",
                test_kv_bad_arguments_make_no_call);
    CU_add_test(s, "watch gives up on dead endpoints", test_watch_gives_up_on_dead_endpoints);
    CU_add_test(s, "parse lease commands", test_parse_lease_commands);
    CU_add_test(s, "lease bad arguments make no call", test_lease_bad_arguments_make_no_call);
    CU_add_test(s, "lease calls without a server", test_lease_calls_without_server);
    CU_add_test(s, "parse typed metadata commands", test_parse_meta_commands);
    CU_add_test(s, "parse typed metadata errors", test_parse_meta_errors);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
