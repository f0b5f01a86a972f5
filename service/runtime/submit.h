/* submit.h - the inbound queue's internal submissions (submit.c; public ones: runtime.h). */
#ifndef SLOTD_RUNTIME_SUBMIT_H
#define SLOTD_RUNTIME_SUBMIT_H

#include "service/runtime/internal.h"

/* A GroupStatus answer from a peer (transport thread), queued as peer traffic for the loop. */
void rt_submit_group_status(struct runtime *rt, const uint8_t *resp, size_t len);
/* A snapshot chunk RPC finished (transport thread), queued as peer traffic for the loop. */
void rt_submit_snap_sent(struct runtime *rt, uint64_t transfer_id, bool ok);

#endif /* SLOTD_RUNTIME_SUBMIT_H */
