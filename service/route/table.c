/* table.c - route_table: publishes route snapshots by pointer swap, readers take a reference. */
#include "route.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

/* See route.h for why this is safe. The mutex guards only `current` and the increment of its
 * refcount; it is never held across an allocation, a free or a wait for other work. */
struct route_table {
    pthread_mutex_t mu;
    struct route_snapshot *current; /* one reference owned by the table; NULL before publish */
};

int route_table_new(struct route_table **out)
{
    struct route_table *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return ROUTE_ENOMEM;
    }
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        goto err_after_alloc;
    }
    *out = t;
    return ROUTE_OK;

err_after_alloc:
    free(t);
    return ROUTE_ENOMEM;
}

void route_table_free(struct route_table *t)
{
    if (t == NULL) {
        return;
    }
    route_snapshot_release(t->current);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void route_table_publish(struct route_table *t, struct route_snapshot *s)
{
    assert(s != NULL && !s->published__);
    assert(route_snapshot_validate(s) == ROUTE_OK);
    s->published__ = true;
    pthread_mutex_lock(&t->mu);
    struct route_snapshot *old = t->current;
    t->current = s;
    pthread_mutex_unlock(&t->mu);
    route_snapshot_release(old);
}

struct route_snapshot *route_table_acquire(struct route_table *t)
{
    pthread_mutex_lock(&t->mu);
    struct route_snapshot *s = t->current;
    if (s != NULL) {
        atomic_fetch_add_explicit(&s->refs__, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&t->mu);
    return s;
}
