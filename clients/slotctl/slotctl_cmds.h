/* slotctl_cmds.h - slotctl's output helpers and the admin commands (slotctl_admin.c). */
#ifndef SLOTD_SLOTCTL_CMDS_H
#define SLOTD_SLOTCTL_CMDS_H

#include "slotctl_cli.h"

#include "slotd/client.h"

#include <jansson.h>

/* j: ownership transfers. Prints j as one compact line on stdout. */
void slotctl_json_print(json_t *j);

/* a, st: borrowed for the call. Reports a failed command (a sentence on stderr and, with --json,
 * an error object on stdout); returns the exit code for rc (enum slotd_client_err). */
int slotctl_error_report(const struct slotctl_args *a, int rc, const struct slotd_status *st);

/* Static name of a command ("transfer-leader"); "" when out of range. */
const char *slotctl_cmd_name(int cmd);

/* c, a: borrowed for the call. `cluster`: Admin.ClusterState plus observed leaders from
 * RouteSnapshot, as tables or one JSON object. Returns the exit code. */
int slotctl_cluster_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `transfer-leader`: SetPreferredLeader, then with --wait polls
 * RouteSnapshot until the node leads the group. Returns the exit code. */
int slotctl_transfer_leader_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `join` (JoinNode) and `activate` (ActivateNode). */
int slotctl_node_admin_run(struct slotd_client *c, const struct slotctl_args *a);

/* state: borrowed for the call (the cluster-state object); route: borrowed, may be NULL.
 * Writes the human tables of `cluster` to out; now_ms is the wall clock used for health ages. */
void slotctl_cluster_print(FILE *out, json_t *state, const struct slotd_cluster_state *cs,
                           const struct slotd_route *route, int64_t now_ms);

#endif /* SLOTD_SLOTCTL_CMDS_H */
