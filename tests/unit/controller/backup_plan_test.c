/* backup_plan_test.c - the backup plan: set/delete checks, runs fenced by id and node, codec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"
#include "task_test.h"

#define expect ctl_test_check
#define OK(expr) task_built((expr), cmd)

/* Every bad value of backup_plan_set is rejected naming the field and its limit, and changes
 * nothing (ctl_test_check compares the encodings); a good one is CHANGED, the same one NOOP. */
static void test_plan_set_and_delete(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd[1];
    expect(s, OK(ctl_cmd_backup_plan_set(4, "/var/backups", 3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "interval_s: 4 not in 5..2592000");
    expect(s, OK(ctl_cmd_backup_plan_set(2592001, "/var/backups", 3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "interval_s: 2592001 not in 5..2592000");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "/var/backups", 0, 0, cmd)), CTL_OUTCOME_REJECTED,
           "retention: 0 not in 1..1000");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "/var/backups", 1001, 0, cmd)), CTL_OUTCOME_REJECTED,
           "retention: 1001 not in 1..1000");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "backups", 3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "destination: \"backups\" must be an absolute path");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "/var/../etc", 3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "must have no . or .. component");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "/var/b\tx", 3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "must be printable ASCII");
    char long_path[300];
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    long_path[sizeof(long_path) - 1] = '\0';
    expect(s, OK(ctl_cmd_backup_plan_set(60, long_path, 3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "destination: ");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "/var/backups", 3, s->revision + 5, cmd)),
           CTL_OUTCOME_REJECTED, "stale expected_revision");
    CU_ASSERT_FALSE(s->backup.set);
    expect(s, OK(ctl_cmd_backup_plan_delete(0, cmd)), CTL_OUTCOME_NOOP, "there is no backup plan");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "/var/backups", 3, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_TRUE(s->backup.set);
    CU_ASSERT_EQUAL(s->backup.interval_s, 60);
    CU_ASSERT_EQUAL(s->backup.retention, 3);
    CU_ASSERT_STRING_EQUAL(s->backup.destination, "/var/backups");
    expect(s, OK(ctl_cmd_backup_plan_set(60, "/var/backups", 3, 0, cmd)), CTL_OUTCOME_NOOP,
           "the backup plan is already so");
    expect(s, OK(ctl_cmd_backup_plan_delete(0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_FALSE(s->backup.set);
    CU_ASSERT_EQUAL(s->backup.interval_s, 0);
    free(s);
}

/* Runs: the next id only, on an active data node, when due; the report must name the running run
 * and its node; a run without a report for two intervals is replaced and recorded as failed. */
static void test_runs(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *cmd[1];
    expect(s, OK(ctl_cmd_backup_run_start(1, 1, 1000, cmd)), CTL_OUTCOME_REJECTED,
           "there is no backup plan");
    expect(s, OK(ctl_cmd_backup_plan_set(10, "/b", 2, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_backup_run_start(2, 1, 1000, cmd)), CTL_OUTCOME_NOOP,
           "stale run: run 2, the next run is 1");
    expect(s, OK(ctl_cmd_backup_run_start(1, 99, 1000, cmd)), CTL_OUTCOME_REJECTED,
           "node: 99 is not an active data node that is up");
    uint64_t rev = s->revision;
    expect(s, OK(ctl_cmd_backup_run_start(1, 1, 1000, cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(s->revision, rev);
    CU_ASSERT_TRUE(s->backup.running);
    CU_ASSERT_EQUAL(s->backup.run_id, 1);
    CU_ASSERT_EQUAL(s->backup.run_node, 1);
    /* forged or stale reports change nothing */
    expect(s, OK(ctl_cmd_backup_run_report(1, 2, true, 100, NULL, 2000, cmd)), CTL_OUTCOME_NOOP,
           "stale run: run 1 on node 2; the current run is 1 on node 1 (running)");
    expect(s, OK(ctl_cmd_backup_run_report(7, 1, true, 100, NULL, 2000, cmd)), CTL_OUTCOME_NOOP,
           "stale run: run 7");
    expect(s, OK(ctl_cmd_backup_run_report(1, 1, false, 0, NULL, 2000, cmd)), CTL_OUTCOME_REJECTED,
           "error: required");
    expect(s, OK(ctl_cmd_backup_run_start(2, 1, 5000, cmd)), CTL_OUTCOME_NOOP, "is not due");
    expect(s, OK(ctl_cmd_backup_run_report(1, 1, true, 4096, NULL, 2000, cmd)), CTL_OUTCOME_UPDATED,
           "");
    CU_ASSERT_FALSE(s->backup.running);
    CU_ASSERT_EQUAL(s->backup.last_success_run, 1);
    CU_ASSERT_EQUAL(s->backup.last_success_ms, 2000);
    CU_ASSERT_EQUAL(s->backup.last_success_bytes, 4096);
    expect(s, OK(ctl_cmd_backup_run_report(1, 1, true, 4096, NULL, 2500, cmd)), CTL_OUTCOME_NOOP,
           "(not running)");
    /* run 2 fails; run 3 gets no report and is replaced by run 4 after two intervals */
    expect(s, OK(ctl_cmd_backup_run_start(2, 4, 11000, cmd)), CTL_OUTCOME_UPDATED, "");
    expect(s,
           OK(ctl_cmd_backup_run_report(2, 4, false, 0, "mkdir /b: Permission denied", 11500, cmd)),
           CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(s->backup.last_failure_run, 2);
    CU_ASSERT_STRING_EQUAL(s->backup.last_error, "mkdir /b: Permission denied");
    expect(s, OK(ctl_cmd_backup_run_start(3, 1, 21000, cmd)), CTL_OUTCOME_UPDATED, "");
    expect(s, OK(ctl_cmd_backup_run_start(4, 1, 31000, cmd)), CTL_OUTCOME_NOOP,
           "run 3 is still running on node 1");
    expect(s, OK(ctl_cmd_backup_run_start(4, 2, 41000, cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(s->backup.last_failure_run, 3);
    CU_ASSERT_STRING_EQUAL(s->backup.last_error, "run 3 on node 1: no report within two intervals");
    /* delete stops the run; ids go on after a new set, so run 4's report stays stale */
    expect(s, OK(ctl_cmd_backup_plan_delete(0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_backup_plan_set(10, "/b", 2, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_backup_run_report(4, 2, true, 1, NULL, 42000, cmd)), CTL_OUTCOME_NOOP,
           "stale run");
    expect(s, OK(ctl_cmd_backup_run_start(5, 2, 52000, cmd)), CTL_OUTCOME_UPDATED, "");
    free(s);
}

static void bad_interval(json_t *root)
{
    json_object_set_new(json_object_get(root, "backup"), "interval_s", json_integer(1));
}

static void unknown_field(json_t *root)
{
    json_object_set_new(json_object_get(root, "backup"), "color", json_string("red"));
}

static void running_without_run(json_t *root)
{
    json_t *b = json_object_get(root, "backup");
    json_object_set_new(b, "run_id", json_integer(0));
    json_object_set_new(b, "run_node", json_integer(0));
    json_object_set_new(b, "last_success_run", json_integer(0));
}

/* The plan round-trips through the canonical encoding; a state without it encodes without
 * "backup"; strict decode refuses bad values and unknown fields. */
static void test_codec(void)
{
    struct ctl_state *s = ctl_test_fixture(4), *back = malloc(sizeof(*back));
    char *cmd[1], err[256];
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    char *json = ctl_test_encode(s);
    CU_ASSERT_PTR_NULL(strstr(json, "\"backup\""));
    ctl_free(json);
    expect(s, OK(ctl_cmd_backup_plan_set(10, "/b", 2, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_backup_run_start(1, 1, 1000, cmd)), CTL_OUTCOME_UPDATED, "");
    expect(s, OK(ctl_cmd_backup_run_report(1, 1, true, 77, NULL, 2000, cmd)), CTL_OUTCOME_UPDATED,
           "");
    expect(s, OK(ctl_cmd_backup_run_start(2, 1, 12000, cmd)), CTL_OUTCOME_UPDATED, "");
    json = ctl_test_encode(s);
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(json, strlen(json), back, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(memcmp(&back->backup, &s->backup, sizeof(s->backup)), 0);
    ctl_free(json);
    task_expect_decode(s, bad_interval, CTL_ESTATE, "backup.interval_s: 1 not in 5..2592000");
    task_expect_decode(s, unknown_field, CTL_EDECODE, "color");
    task_expect_decode(s, running_without_run, CTL_ESTATE, "backup: run ids");
    free(back);
    free(s);
}

void ctl_test_add_backup_plan(void)
{
    CU_pSuite s = CU_add_suite("controller backup plan", NULL, NULL);
    CU_add_test(s, "backup_plan_set and delete: every bad value rejected",
                test_plan_set_and_delete);
    CU_add_test(s, "runs fenced by run id and node, due by interval", test_runs);
    CU_add_test(s, "the plan round-trips; strict decode", test_codec);
}
