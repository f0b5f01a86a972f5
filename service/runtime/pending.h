/* pending.h - proposals of one group waiting for their index to commit (loop thread). */
#ifndef SLOTD_RUNTIME_PENDING_H
#define SLOTD_RUNTIME_PENDING_H

#include "service/runtime/request.h"

/* Proposals waiting for their index to commit (pending.c), kept in index order. A proposal is
 * decided only by what commits at its index: the same term is this proposal, another term (or a
 * conf change, passed as term 0) means it certainly did not commit. */
void rt_pending_add(struct rt_list *l, struct rt_request *r);
/* The committed entry (index, term): returns the proposal it is, if any; moves the proposals it
 * rules out to lost, and those whose index was passed unseen (only a snapshot skips indexes) to
 * unknown. */
struct rt_request *rt_pending_match(struct rt_list *l, uint64_t index, uint64_t term,
                                    struct rt_list *lost, struct rt_list *unknown);
/* A snapshot through index replaced the log: proposals at or below it may or may not be in it. */
void rt_pending_passed(struct rt_list *l, uint64_t index, struct rt_list *unknown);

#endif /* SLOTD_RUNTIME_PENDING_H */
