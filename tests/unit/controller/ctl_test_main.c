/* ctl_test_main.c - CUnit runner and shared helpers for the service/controller suites. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"

enum ctl_outcome ctl_test_apply(struct ctl_state *s, const char *cmd, struct ctl_result *res)
{
    struct ctl_result local = {0};
    res = res ? res : &local;
    int rc = ctl_apply(s, s->applied_raft_index + 1, cmd, strlen(cmd), res);
    CU_ASSERT_EQUAL(rc, CTL_OK);
    return res->outcome;
}

const char *ctl_test_expect(struct ctl_state *s, char *cmd, enum ctl_outcome want)
{
    static struct ctl_result res;
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    enum ctl_outcome got = ctl_test_apply(s, cmd, &res);
    if (got != want) {
        printf("\n  command %s: got %s (%s), want %s\n", cmd, ctl_outcome_name(got), res.reason,
               ctl_outcome_name(want));
    }
    CU_ASSERT_EQUAL(got, want);
    ctl_free(cmd);
    return res.reason;
}

void ctl_test_check(struct ctl_state *s, char *cmd, enum ctl_outcome want, const char *reason)
{
    struct ctl_state *before = malloc(sizeof(*before));
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);
    *before = *s;
    uint64_t index = s->applied_raft_index;
    const char *got = ctl_test_expect(s, cmd, want);
    if (strstr(got, reason) == NULL) {
        printf("\n  reason \"%s\", want \"%s\"\n", got, reason);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(got, reason));
    CU_ASSERT_EQUAL(s->applied_raft_index, index + 1);
    if (want == CTL_OUTCOME_NOOP || want == CTL_OUTCOME_REJECTED) {
        CU_ASSERT_TRUE(ctl_test_same_but_index(before, s));
    }
    if (want == CTL_OUTCOME_CHANGED) {
        CU_ASSERT_EQUAL(s->revision, before->revision + 1);
    } else {
        CU_ASSERT_EQUAL(s->revision, before->revision);
    }
    if (want == CTL_OUTCOME_UPDATED) {
        CU_ASSERT_FALSE(ctl_test_same_but_index(before, s));
    }
    free(before);
}

/* The command a builder just wrote to *out (read after the call, not as a sibling argument). */
static char *cmd_or_die(int rc, char **out)
{
    CU_ASSERT_EQUAL_FATAL(rc, CTL_OK);
    return *out;
}

struct ctl_state *ctl_test_fixture(uint32_t slot_groups)
{
    struct ctl_state *s = malloc(sizeof(*s));
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ctl_state_init(s);
    struct ctl_config cfg = {.slot_groups = slot_groups, .replicas = 3, .bootstrap_expect = 3};
    struct ctl_cmd_node nodes[] = {
        {3, "10.0.0.3:7700", 0}, {1, "10.0.0.1:7700", 0}, {2, "10.0.0.2:7700", 200}};
    char *c;
    /* hash-slot migration on from the bootstrap (the switch itself: migration_test.c) */
    struct ctl_features on = {.hash_slot_migration = true};
    ctl_test_expect(
        s, cmd_or_die(ctl_cmd_bootstrap_features("test-cluster", &cfg, &on, nodes, 3, 0, &c), &c),
        CTL_OUTCOME_CHANGED);
    for (uint64_t id = 4; id <= 5; id++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "10.0.0.%llu:7700", (unsigned long long)id);
        ctl_test_expect(s, cmd_or_die(ctl_cmd_join_node(id, addr, NULL, 50, 0, &c), &c),
                        CTL_OUTCOME_CHANGED);
        ctl_test_expect(s, cmd_or_die(ctl_cmd_activate_node(id, 0, &c), &c), CTL_OUTCOME_CHANGED);
    }
    ctl_test_expect(s, cmd_or_die(ctl_cmd_health_report(2, 1000, 5000, 0, &c), &c),
                    CTL_OUTCOME_UPDATED);
    /* Two tasks written by hand (a valid state; task commands are tested in task_test.c). */
    s->tasks[0] = (struct ctl_task){.id = 7,
                                    .kind = CTL_TASK_REPLICA_MOVE,
                                    .group = 1,
                                    .phase_index = 2,
                                    .config_epoch = 1,
                                    .attempt = 1,
                                    .status = CTL_TASK_RUNNING,
                                    .n_participants = 2,
                                    .participants = {1, 4},
                                    .created_ms = 10,
                                    .updated_ms = 20,
                                    .source = 1,
                                    .target = 4};
    s->tasks[1] = (struct ctl_task){.id = 9,
                                    .kind = CTL_TASK_NODE_DRAIN,
                                    .group = 0,
                                    .attempt = 3,
                                    .status = CTL_TASK_FAILED,
                                    .n_participants = 1,
                                    .participants = {5},
                                    .created_ms = 30,
                                    .updated_ms = 40,
                                    .source = 5};
    snprintf(s->tasks[1].last_error, sizeof(s->tasks[1].last_error), "drain: node 5 \"busy\"");
    s->n_tasks = 2;
    s->next_task_id = 10;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ctl_state_validate(s, err, sizeof(err)), CTL_OK);
    return s;
}

char *ctl_test_encode(const struct ctl_state *s)
{
    char *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(ctl_state_encode(s, &buf, &len), CTL_OK);
    CU_ASSERT_EQUAL(strlen(buf), len);
    return buf;
}

int ctl_test_same_but_index(const struct ctl_state *a, const struct ctl_state *b)
{
    struct ctl_state *x = malloc(sizeof(*x)), *y = malloc(sizeof(*y));
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    *x = *a;
    *y = *b;
    x->applied_raft_index = y->applied_raft_index = 0;
    char *ex = ctl_test_encode(x), *ey = ctl_test_encode(y);
    int same = strcmp(ex, ey) == 0;
    ctl_free(ex);
    ctl_free(ey);
    free(x);
    free(y);
    return same;
}

int ctl_test_decode_json(json_t *root, int fix_checksum, struct ctl_state *out, char *err,
                         size_t errlen)
{
    if (fix_checksum) {
        json_object_del(root, "checksum");
        char *body = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
        char hex[9];
        snprintf(hex, sizeof(hex), "%08x", ctl_crc32c(body, strlen(body)));
        free(body);
        json_object_set_new(root, "checksum", json_string(hex));
    }
    char *text = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
    int rc = ctl_state_decode(text, strlen(text), out, err, errlen);
    free(text);
    return rc;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 2;
    }
    ctl_test_add_codec();
    ctl_test_add_apply();
    ctl_test_add_placement_file();
    ctl_test_add_task();
    ctl_test_add_auth();
    ctl_test_add_vet();
    ctl_test_add_balance();
    ctl_test_add_backup_plan();
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0 || CU_get_error() != CUE_SUCCESS;
    CU_cleanup_registry();
    return failed;
}
