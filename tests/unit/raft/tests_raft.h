/* tests_raft.h - the suites of the raft unit test binary, registered by main.c. */
#ifndef SLOTD_TESTS_RAFT_H
#define SLOTD_TESTS_RAFT_H

#include <CUnit/CUnit.h>

void tests_storage_add(CU_pSuite s);
void tests_scenarios_add(CU_pSuite s);
void tests_conf_snapshot_add(CU_pSuite s);
void tests_contract_add(CU_pSuite s);

#endif /* SLOTD_TESTS_RAFT_H */
