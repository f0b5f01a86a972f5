/* main.c - runs the raft core's CUnit suites; exits non-zero if any test failed. */
#include "tests_raft.h"

#include <CUnit/Basic.h>

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 2;
    }
    CU_pSuite storage = CU_add_suite("raft_storage", NULL, NULL);
    CU_pSuite scenarios = CU_add_suite("raft_scenarios", NULL, NULL);
    if (storage == NULL || scenarios == NULL) {
        CU_cleanup_registry();
        return 2;
    }
    tests_storage_add(storage);
    tests_scenarios_add(scenarios);
    tests_conf_snapshot_add(scenarios);
    tests_contract_add(scenarios);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
