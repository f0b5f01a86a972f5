/* ctl_members.h - group 0's members follow the state's controller voters (ctl_members.c). */
#ifndef SLOTD_RUNTIME_CTL_MEMBERS_H
#define SLOTD_RUNTIME_CTL_MEMBERS_H

#include "service/runtime/internal.h"

/* Loop thread, on every poll. */
void rt_ctl_members_step(struct runtime *rt);

#endif /* SLOTD_RUNTIME_CTL_MEMBERS_H */
