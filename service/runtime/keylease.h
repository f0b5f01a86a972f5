/* keylease.h - expiry of key leases on each slot group's leader (keylease.c, loop thread). */
#ifndef SLOTD_RUNTIME_KEYLEASE_H
#define SLOTD_RUNTIME_KEYLEASE_H

#include "service/runtime/internal.h"

void rt_keylease_tick(struct runtime *rt, int64_t now); /* loop, every tick (keylease.c) */
void rt_keyleases_free(struct runtime *rt);

#endif /* SLOTD_RUNTIME_KEYLEASE_H */
