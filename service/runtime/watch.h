/* watch.h - each hosted group's watch history (watch.c). */
#ifndef SLOTD_RUNTIME_WATCH_H
#define SLOTD_RUNTIME_WATCH_H

#include "service/runtime/internal.h"

#define RT_WATCH_WAITERS_MAX 4096u       /* polls waiting on one group; more: QUEUE_FULL */
int rt_watch_init(struct runtime *rt);   /* after rt->fsm; turns the fsm's events on */
void rt_watch_close(struct runtime *rt); /* waiting polls fail SHUTTING_DOWN */
void rt_watch_free(struct runtime *rt);  /* close, then the memory (no poll may run) */
void rt_watch_reset(struct runtime *rt, uint32_t group, uint64_t index, bool hosted);
void rt_watch_publish(struct runtime *rt, struct rt_apply_job *job); /* APPLY, after commit */
/* One group's new changes (list consumed, in index order) through `through` (publish's step). */
void rt_watch_append(struct runtime *rt, uint32_t group, struct slot_event *list, uint64_t through);
void rt_watch_expire(struct runtime *rt, int64_t now); /* loop, every tick */

#endif /* SLOTD_RUNTIME_WATCH_H */
