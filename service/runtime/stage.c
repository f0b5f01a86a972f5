/* stage.c - a pipeline stage: one named thread running the loop's jobs of one kind in order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "service/runtime/stage.h"

static void on_done(uv_async_t *h)
{
    struct rt_stage *s = h->data;
    pthread_mutex_lock(&s->mu);
    struct rt_stage_item *it = s->done_head;
    s->done_head = s->done_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    while (it != NULL) {
        struct rt_stage_item *next = it->next;
        s->pending--;
        s->done(it); /* may submit again, to this stage or another */
        it = next;
    }
}

static void *stage_main(void *arg)
{
    struct rt_stage *s = arg;
    prctl(PR_SET_NAME, s->name); /* shown by top -H, perf and /proc/PID/task/TID/comm */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stop)
            pthread_cond_wait(&s->cond, &s->mu);
        struct rt_stage_item *it = s->head;
        if (it == NULL)
            break; /* stopping, nothing left */
        s->head = it->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        s->work(it);
        pthread_mutex_lock(&s->mu);
        it->next = NULL;
        if (s->done_tail != NULL)
            s->done_tail->next = it;
        else
            s->done_head = it;
        s->done_tail = it;
        /* Under mu: the loop takes this item only under mu, so it cannot see it done, find the
         * stage idle and close the handle before this send is over. */
        uv_async_send(&s->done_async);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int rt_stage_init(struct rt_stage *s, uv_loop_t *loop, const char *name, rt_stage_fn work,
                  rt_stage_fn done)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->work = work;
    s->done = done;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (uv_async_init(loop, &s->done_async, on_done) != 0) {
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->mu);
        return -1;
    }
    s->done_async.data = s;
    return 0;
}

int rt_stage_start(struct rt_stage *s)
{
    if (pthread_create(&s->thread, NULL, stage_main, s) != 0)
        return -1;
    s->thread_started = true;
    return 0;
}

void rt_stage_submit(struct rt_stage *s, struct rt_stage_item *item)
{
    /* A closed stage has no way back to the loop; the caller's stop order rules it out. */
    if (s->closed)
        abort();
    s->pending++;
    item->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail != NULL)
        s->tail->next = item;
    else
        s->head = item;
    s->tail = item;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void rt_stage_close(struct rt_stage *s)
{
    if (s->closed)
        return;
    s->closed = true;
    uv_close((uv_handle_t *)&s->done_async, NULL);
}

void rt_stage_destroy(struct rt_stage *s)
{
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        s->thread_started = false;
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
}
