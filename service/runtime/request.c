/* request.c - a request's list and its failure answer, and the runtime's monotonic clock. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/rpc/rpc.h"
#include "service/rpc/status.h"
#include "service/runtime/request.h"

int64_t rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rt_list_push(struct rt_list *l, struct rt_request *r)
{
    r->next = NULL;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    l->len++;
}

struct rt_request *rt_list_pop(struct rt_list *l)
{
    struct rt_request *r = l->head;
    if (r == NULL)
        return NULL;
    l->head = r->next;
    if (l->head == NULL)
        l->tail = NULL;
    l->len--;
    r->next = NULL;
    return r;
}

void rt_list_concat(struct rt_list *dst, struct rt_list *src)
{
    if (src->head == NULL)
        return;
    if (dst->tail)
        dst->tail->next = src->head;
    else
        dst->head = src->head;
    dst->tail = src->tail;
    dst->len += src->len;
    memset(src, 0, sizeof(*src));
}

void rt_fail(struct rt_request *r, int code, const char *fmt, ...)
{
    struct slotd_error e;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    slotd_error_set(&e, code, "%s", msg);
    if (code == SLOTD_EQUEUE_FULL || code == SLOTD_ENO_LEADER)
        e.retry_after_ms = 100;
    rpc_call_fail(r->call, &e);
    free(r);
}

void rt_fail_list(struct rt_list *l, int code, const char *msg)
{
    struct rt_request *r;
    while ((r = rt_list_pop(l)) != NULL)
        rt_fail(r, code, "group %u: %s", r->group, msg);
}

/* ---- Initial voters and the route ---- */
