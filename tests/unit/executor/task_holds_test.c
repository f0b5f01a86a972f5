/* task_holds_test.c - unit tests for service/executor/task_cleanup.c: which tasks hold a replica.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "service/controller/controller.h"
#include "service/executor/executor_internal.h"

struct holds_case {
    enum ctl_task_kind kind;
    enum ctl_task_status status;
    uint32_t phase;
    bool holds;
};

static void check(const struct holds_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct ctl_task t;
        memset(&t, 0, sizeof(t));
        t.kind = c[i].kind;
        t.status = c[i].status;
        t.phase_index = c[i].phase;
        CU_ASSERT_EQUAL(executor__task_holds_replica(&t), c[i].holds);
    }
}

/* A pending or running task of any kind still needs the replica. */
static void test_active_tasks_hold(void)
{
    const struct holds_case c[] = {
        {CTL_TASK_REPLICA_MOVE, CTL_TASK_RUNNING, CTL_PHASE_MOVE_ADD_LEARNER, true},
        {CTL_TASK_REPLICA_MOVE, CTL_TASK_PENDING, CTL_PHASE_MOVE_ADD_LEARNER, true},
        {CTL_TASK_HASH_SLOT_MIGRATION, CTL_TASK_RUNNING, 1, true},
    };
    check(c, sizeof(c) / sizeof(c[0]));
}

/* A move that failed before promote restarts at add_learner (its learner goes); one that failed
 * from promote on is continued by a retry with the same learner. */
static void test_failed_move_by_phase(void)
{
    const struct holds_case c[] = {
        {CTL_TASK_REPLICA_MOVE, CTL_TASK_FAILED, CTL_PHASE_MOVE_ADD_LEARNER, false},
        {CTL_TASK_REPLICA_MOVE, CTL_TASK_FAILED, CTL_PHASE_MOVE_CATCH_UP, false},
        {CTL_TASK_REPLICA_MOVE, CTL_TASK_FAILED, CTL_PHASE_MOVE_PROMOTE, true},
        {CTL_TASK_REPLICA_MOVE, CTL_TASK_FAILED, CTL_PHASE_MOVE_REMOVE_SOURCE, true},
    };
    check(c, sizeof(c) / sizeof(c[0]));
}

/* A failed task of another kind holds it (a retry continues); a finished one never does. */
static void test_other_kinds_and_done(void)
{
    const struct holds_case c[] = {
        {CTL_TASK_LEADER_TRANSFER, CTL_TASK_FAILED, 0, true},
        {CTL_TASK_REPLICA_MOVE, CTL_TASK_DONE, CTL_PHASE_MOVE_DONE, false},
        {CTL_TASK_HASH_SLOT_MIGRATION, CTL_TASK_DONE, 3, false},
    };
    check(c, sizeof(c) / sizeof(c[0]));
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite suite = CU_add_suite("executor: tasks holding a replica", NULL, NULL);
    CU_add_test(suite, "pending and running tasks hold it", test_active_tasks_hold);
    CU_add_test(suite, "a failed move holds it from promote on", test_failed_move_by_phase);
    CU_add_test(suite, "other kinds failed hold it, done ones never", test_other_kinds_and_done);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
