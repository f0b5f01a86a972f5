/* task_holds_test.c - unit tests for service/executor/task_cleanup.c: which tasks hold a replica.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "service/controller/controller.h"
#include "service/executor/executor_internal.h"

static struct ctl_task task(enum ctl_task_kind kind, enum ctl_task_status status, uint32_t phase)
{
    struct ctl_task t;
    memset(&t, 0, sizeof(t));
    t.kind = kind;
    t.status = status;
    t.phase_index = phase;
    return t;
}

/* A pending or running task of any kind still needs the replica. */
static void test_active_tasks_hold(void)
{
    struct ctl_task t = task(CTL_TASK_REPLICA_MOVE, CTL_TASK_RUNNING, 0);
    CU_ASSERT_TRUE(executor__task_holds_replica(&t));
    t = task(CTL_TASK_REPLICA_MOVE, CTL_TASK_PENDING, 0);
    CU_ASSERT_TRUE(executor__task_holds_replica(&t));
    t = task(CTL_TASK_HASH_SLOT_MIGRATION, CTL_TASK_RUNNING, 1);
    CU_ASSERT_TRUE(executor__task_holds_replica(&t));
}

/* A move that failed before promote restarts at add_learner (its learner goes); one that failed
 * from promote on is continued by a retry with the same learner. */
static void test_failed_move_by_phase(void)
{
    struct ctl_task t = task(CTL_TASK_REPLICA_MOVE, CTL_TASK_FAILED, CTL_PHASE_MOVE_CATCH_UP);
    CU_ASSERT_FALSE(executor__task_holds_replica(&t));
    t = task(CTL_TASK_REPLICA_MOVE, CTL_TASK_FAILED, CTL_PHASE_MOVE_ADD_LEARNER);
    CU_ASSERT_FALSE(executor__task_holds_replica(&t));
    t = task(CTL_TASK_REPLICA_MOVE, CTL_TASK_FAILED, CTL_PHASE_MOVE_PROMOTE);
    CU_ASSERT_TRUE(executor__task_holds_replica(&t));
}

/* A failed task of another kind holds it (a retry continues); a finished one never does. */
static void test_other_kinds_and_done(void)
{
    struct ctl_task t = task(CTL_TASK_LEADER_TRANSFER, CTL_TASK_FAILED, 0);
    CU_ASSERT_TRUE(executor__task_holds_replica(&t));
    t = task(CTL_TASK_REPLICA_MOVE, CTL_TASK_DONE, 3);
    CU_ASSERT_FALSE(executor__task_holds_replica(&t));
    t = task(CTL_TASK_HASH_SLOT_MIGRATION, CTL_TASK_DONE, 3);
    CU_ASSERT_FALSE(executor__task_holds_replica(&t));
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
