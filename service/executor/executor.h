/* executor.h - the controller's executors: tasks, migrations, repair, balance, backup runs. */
#ifndef SLOTD_EXECUTOR_EXECUTOR_H
#define SLOTD_EXECUTOR_EXECUTOR_H

struct runtime;
struct executor;

/* Creates the executor of rt and registers its hooks (runtime_set_executor): from
 * runtime_start on, the runtime's loop thread runs it every poll. Main thread, after runtime_new
 * and before runtime_start; rt is borrowed and must stay until executor_free. 0, or -1 (out of
 * memory). Caller frees with executor_free() after runtime_free(rt). */
int executor_new(struct runtime *rt, struct executor **out);
/* Frees ex (NULL: no-op). Only once the runtime it served is freed: no hook and no reply to one
 * of its calls can run any more. */
void executor_free(struct executor *ex);

#endif /* SLOTD_EXECUTOR_EXECUTOR_H */
