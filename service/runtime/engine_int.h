/* engine_int.h - the runtime's side of engine.c: the executor's hooks (engine.c). */
#ifndef SLOTD_RUNTIME_ENGINE_INT_H
#define SLOTD_RUNTIME_ENGINE_INT_H

struct runtime;

/* engine.c: the executor's hooks, when one is registered (runtime_set_executor): poll on the
 * loop thread (on_poll), stop on the main thread once the loop thread ended (runtime_stop). */
void rt_exec_poll(struct runtime *rt);
void rt_exec_stop(struct runtime *rt);

#endif /* SLOTD_RUNTIME_ENGINE_INT_H */
