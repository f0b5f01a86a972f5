/* loop.h - the loop's work: requests into the cores, ticks, group commit (loop.c). */
#ifndef SLOTD_RUNTIME_LOOP_H
#define SLOTD_RUNTIME_LOOP_H

#include "service/runtime/internal.h"
#include "service/runtime/request.h"

/* Takes every ready group's ready into one raftlog batch (or waits for the one in flight). */
void rt_pump(struct runtime *rt);
int rt_raft_err_code(int rc);
void rt_fail_not_leader(struct runtime *rt, struct rt_group *g, struct rt_request *r,
                        const char *what);
/* Loop: at stop, closes the stages' handles once neither has work (uv_run can then end). */
void rt_stages_close_idle(struct runtime *rt);
int rt_storage_init(struct runtime *rt); /* runtime_new: the stage on rt->loop */
/* lifecycle.c's loop callbacks: the drained inbound queue, a tick, at stop failing what is left. */
void rt_handle_requests(struct runtime *rt, struct rt_list *reqs);
void rt_tick(struct runtime *rt);
void rt_fail_everything(struct runtime *rt);

#endif /* SLOTD_RUNTIME_LOOP_H */
