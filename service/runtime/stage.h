/* stage.h - a pipeline stage: one named thread running the loop's jobs of one kind in order. */
#ifndef SLOTD_RUNTIME_STAGE_H
#define SLOTD_RUNTIME_STAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* Embedded in a job; the stage links it through its queues. */
struct rt_stage_item {
    struct rt_stage_item *next;
};

typedef void (*rt_stage_fn)(struct rt_stage_item *item);

/* The loop submits items; the stage's thread runs `work` on each, one at a time in submission
 * order, and hands it back; the loop runs `done` on it, in the same order. The thread takes the
 * next item as soon as it finished one: jobs run back to back, never waiting for the loop. The
 * finished items that gather while the loop is busy come back in one wake-up (one uv_async). */
struct rt_stage {
    char name[16]; /* the thread's name (PR_SET_NAME: at most 15 characters) */
    rt_stage_fn work; /* the stage's thread */
    rt_stage_fn done; /* the loop thread */
    /* -- guarded by mu -- */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct rt_stage_item *head, *tail;           /* submitted, not yet taken */
    struct rt_stage_item *done_head, *done_tail; /* finished, not yet back on the loop */
    bool stop;
    /* -- loop thread -- */
    uv_async_t done_async;
    size_t pending; /* submitted and not yet through `done` */
    bool closed;    /* done_async closed: nothing may be submitted any more */
    bool thread_started;
    pthread_t thread;
};

/* Loop thread, before the stage is used: sets up the queues and the loop's handle. */
int rt_stage_init(struct rt_stage *s, uv_loop_t *loop, const char *name, rt_stage_fn work,
                  rt_stage_fn done);
/* Starts the stage's thread. 0, or -1 when the thread cannot be created. */
int rt_stage_start(struct rt_stage *s);
/* Loop thread. */
void rt_stage_submit(struct rt_stage *s, struct rt_stage_item *item);
static inline size_t rt_stage_pending(const struct rt_stage *s)
{
    return s->pending;
}
/* Loop thread, at stop, with nothing pending: closes the loop's handle (uv_run can end). */
void rt_stage_close(struct rt_stage *s);
/* After the loop ended (or when it never ran): stops and joins the thread, frees the locks. */
void rt_stage_destroy(struct rt_stage *s);

#endif
