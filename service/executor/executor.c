/* executor.c - the executor's lifecycle and the poll hook the runtime's loop thread runs. */
#include <stdlib.h>

#include "service/executor/executor_internal.h"

/* Loop thread, every poll: the steps in the order they always ran in. */
static void on_poll(void *ctx)
{
    struct executor *ex = ctx;
    executor__task_step(ex);
    executor__repair_step(ex);
    executor__backup_step(ex);
    executor__balance_step(ex);
}

/* Main thread, once the loop thread ended. */
static void on_stop(void *ctx)
{
    executor__backup_stop(ctx);
}

int executor_new(struct runtime *rt, struct executor **out)
{
    struct executor *ex = calloc(1, sizeof(*ex));
    if (ex == NULL)
        return -1;
    ex->rt = rt;
    ex->opts = engine_options(rt);
    executor__migrations_init(ex);
    engine_executor_series(rt, &ex->series);
    ex->ops.poll = on_poll;
    ex->ops.stop = on_stop;
    runtime_set_executor(rt, &ex->ops, ex);
    *out = ex;
    return 0;
}

void executor_free(struct executor *ex)
{
    if (ex == NULL)
        return;
    executor__migrations_destroy(ex);
    free(ex);
}
