/* ctl.h - the controller group (id 0): state machine, publication, mirror, liveness (ctl.c). */
#ifndef SLOTD_RUNTIME_CTL_H
#define SLOTD_RUNTIME_CTL_H

#include "service/runtime/internal.h"

struct ctl_state;
int rt_ctl_open(struct runtime *rt, char *err, size_t errlen);
void rt_ctl_close(struct runtime *rt);
int rt_ctl_apply_entry(struct runtime *rt, uint64_t index, const uint8_t *data, size_t len,
                       struct slot_result *out);
void rt_ctl_apply_conf(struct runtime *rt, uint64_t index);
int rt_ctl_apply_finish(struct runtime *rt, struct ctl_state **pub);
int rt_ctl_capture(struct runtime *rt, uint8_t **data, size_t *len);
int rt_ctl_install(struct runtime *rt, struct rt_group *g, const uint8_t *data, size_t len,
                   const struct raft_snapshot_meta *meta);
/* Takes ownership of s. */
void rt_ctl_publish(struct runtime *rt, struct ctl_state *s);
void rt_ctl_mirror_reply(struct runtime *rt, const uint8_t *data, size_t len);
void rt_ctl_poll(struct runtime *rt);
/* Loop thread, every tick: refreshes ctl_view from group 0's raft core. */
void rt_ctl_view_refresh(struct runtime *rt);
/* Loop thread: calls the min_revision waiters that are due (reached, expired, or all at
 * shutdown). */
void rt_ctl_waiters_run(struct runtime *rt, bool shutdown);
void rt_ctl_converge(struct runtime *rt);
void rt_ctl_liveness(struct runtime *rt);
/* Sends a controller command (ownership of cmd transfers; NULL is a no-op): proposed here when
 * this node leads the controller, else sent to the leader (voters) or a voter (mirrors). No
 * answer is awaited: the executor re-derives what to do from the next published state. */
void rt_ctl_submit(struct runtime *rt, char *cmd, const char *what);
uint64_t rt_wall_ms(void); /* CLOCK_REALTIME in ms (controller timestamps) */
/* ctl.c: saves the published state as a mirror's copy (no applied index); 0 or a store error */
int rt_ctl_save_mirror(struct runtime *rt);

#endif /* SLOTD_RUNTIME_CTL_H */
