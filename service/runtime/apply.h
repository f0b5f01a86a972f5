/* apply.h - the apply stage: committed entries into the fsm, answers (apply.c). */
#ifndef SLOTD_RUNTIME_APPLY_H
#define SLOTD_RUNTIME_APPLY_H

#include "service/runtime/internal.h"
#include "service/runtime/request.h"

struct rt_apply_job *rt_apply_job_new(struct runtime *rt);
int rt_apply_job_add(struct rt_apply_job *job, struct rt_group *g, const struct raft_entry *e,
                     struct rt_request *waiter, const struct raft_conf_state *conf);
void rt_apply_submit(struct runtime *rt, struct rt_apply_job *job);
int rt_apply_init(struct runtime *rt); /* runtime_new: the stage on rt->loop */
void rt_apply_job_free(struct rt_apply_job *job);

#endif /* SLOTD_RUNTIME_APPLY_H */
