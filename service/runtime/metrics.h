/* metrics.h - the runtime's own Prometheus series (metrics.c). */
#ifndef SLOTD_RUNTIME_METRICS_H
#define SLOTD_RUNTIME_METRICS_H

#include "service/runtime/internal.h"

/* Registers the runtime's families and the series of every hosted group (after the groups are
 * open). Without opts.metrics, or when registering fails (logged), every series stays NULL. */
void rt_metrics_init(struct runtime *rt);
/* Publishes g's term, commit index, applied index and leadership (loop thread). */
void rt_metrics_group(struct runtime *rt, const struct rt_group *g);
/* Counts one preferred-leader convergence decision by reason (loop thread). */
void rt_metrics_converge(struct runtime *rt, const char *reason);
/* Adds g's per-group series as it opens (a no-op without a registry). */
void rt_metrics_group_register(struct runtime *rt, struct rt_group *g);

#endif /* SLOTD_RUNTIME_METRICS_H */
