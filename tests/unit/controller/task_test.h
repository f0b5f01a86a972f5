/* task_test.h - helpers shared by the task suites (task_test.c, task_codec_test.c). */
#ifndef SLOTD_CTL_TASK_TEST_H
#define SLOTD_CTL_TASK_TEST_H

#include <jansson.h>

#include "controller.h"

/* ctl_test_fixture(groups) without its hand-written tasks (next_task_id stays 10). Caller frees
 * with free(). */
struct ctl_state *task_fixture(uint32_t groups);

/* Asserts a builder returned CTL_OK and returns the command it wrote to *out (read after the
 * builder ran; caller frees with ctl_free()). */
char *task_built(int rc, char **out);

/* Creates a task through task_create, asserts CHANGED and result.task_id; returns the id. */
uint64_t task_create(struct ctl_state *s, enum ctl_task_kind kind, uint32_t group, uint64_t source,
                     uint64_t target, uint64_t node, uint64_t now_ms);

/* task_advance for task id with the task's current fence (group, epoch, attempt, phase). p is
 * borrowed for the call; caller frees the result with ctl_free(). */
char *task_advance_cmd(const struct ctl_state *s, uint64_t id, const struct ctl_task_proof *p,
                       uint64_t now_ms);

/* A proof from sets (borrowed for the call; may be NULL when their count is 0). */
struct ctl_task_proof task_proof(const uint64_t *voters, uint32_t n_voters,
                                 const uint64_t *learners, uint32_t n_learners, uint64_t leader,
                                 uint64_t commit, uint64_t target_match);

/* The lowest active, not down data node outside group's desired peers other than skip. */
uint64_t task_outsider(const struct ctl_state *s, uint32_t group, uint64_t skip);

/* Runs replica move id through its four phases with right proofs; asserts each CHANGED. */
void task_run_move(struct ctl_state *s, uint64_t id, uint64_t now_ms);

/* Decodes s's encoding (s borrowed for the call) after mutate(root) with the checksum fixed;
 * checks the return code and that the message contains want. */
void task_expect_decode(const struct ctl_state *s, void (*mutate)(json_t *), int want_rc,
                        const char *want);

void ctl_test_add_task_codec(void);
void ctl_test_add_migration(void);

#endif
