/* ctl_test.h - helpers shared by the CUnit suites of service/controller. */
#ifndef SLOTD_CTL_TEST_H
#define SLOTD_CTL_TEST_H

#include <CUnit/Basic.h>
#include <jansson.h>

#include "controller.h"

/* Applies cmd at the next raft index; asserts CTL_OK and returns the outcome. */
enum ctl_outcome ctl_test_apply(struct ctl_state *s, const char *cmd, struct ctl_result *res);

/* Applies cmd (a builder result, freed here) and asserts the outcome; returns the reason. */
const char *ctl_test_expect(struct ctl_state *s, char *cmd, enum ctl_outcome want);

/* Applies cmd (a builder result, freed here) and checks the outcome, the reason (substring; "" =
 * any), applied_raft_index + 1, the revision (+1 only for changed) and, for noop and rejected,
 * that the encoded state is unchanged except applied_raft_index. */
void ctl_test_check(struct ctl_state *s, char *cmd, enum ctl_outcome want, const char *reason);

/* A bootstrapped state: nodes 1..3 (controller voters) and 4..5 (joined data nodes, active),
 * config {slot_groups, replicas 3, bootstrap_expect 3}, features.hash_slot_migration on (set by
 * the bootstrap), placement made, one health report and two tasks. Caller frees with free(). */
struct ctl_state *ctl_test_fixture(uint32_t slot_groups);

/* Canonical encoding; asserts success. Caller frees with ctl_free(). */
char *ctl_test_encode(const struct ctl_state *s);

/* Encodings of a and b are equal when applied_raft_index is ignored. */
int ctl_test_same_but_index(const struct ctl_state *a, const struct ctl_state *b);

/* Dumps root canonically after replacing "checksum" by the right value (when fix_checksum) and
 * decodes it into *out; returns the decode result, err gets the message. */
int ctl_test_decode_json(json_t *root, int fix_checksum, struct ctl_state *out, char *err,
                         size_t errlen);

void ctl_test_add_codec(void);
void ctl_test_add_apply(void);
void ctl_test_add_placement_file(void);
void ctl_test_add_task(void);
void ctl_test_add_auth(void);
void ctl_test_add_vet(void);
void ctl_test_add_balance(void);
void ctl_test_add_backup_plan(void);

#endif
