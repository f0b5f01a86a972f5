/* slotctl_admin.c - slotctl's controller commands: cluster, transfer-leader, join, activate,
 * remove-node, demote, feature. */
#include "slotctl_cmds.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* transfer-leader --wait polls the route this often. */
#define SLOTCTL_WAIT_POLL_MS 200

static int64_t admin_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t admin_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void admin_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- cluster-state JSON accessors (absent or mistyped fields read as 0 / "") ------------ */

static uint64_t js_u64(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static const char *js_str(json_t *o, const char *name)
{
    const char *s = json_string_value(json_object_get(o, name));
    return s ? s : "";
}

static json_t *js_arr(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);
    return json_is_array(v) ? v : NULL;
}

/* "a,b,c" of an array of integers or strings (cut to len); "-" when empty. */
static void js_list_text(json_t *arr, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(arr) && used < len; i++) {
        json_t *v = json_array_get(arr, i);
        const char *sep = i ? "," : "";
        if (json_is_integer(v))
            used += (size_t)snprintf(out + used, len - used, "%s%" PRId64, sep,
                                     (int64_t)json_integer_value(v));
        else
            used += (size_t)snprintf(out + used, len - used, "%s%s", sep,
                                     json_string_value(v) ? json_string_value(v) : "?");
    }
    if (!out[0])
        snprintf(out, len, "-");
}

/* The controller's health entry for node id, or NULL. */
static json_t *js_health_of(json_t *state, uint64_t id)
{
    size_t i;
    json_t *h;
    json_array_foreach(js_arr(state, "health"), i, h)
    {
        if (js_u64(h, "node") == id)
            return h;
    }
    return NULL;
}

/* ---- cluster: tables -------------------------------------------------------------------- */

static void cluster_print_nodes(FILE *out, json_t *state, int64_t now_ms)
{
    fprintf(out, "\nNODES\n%6s  %-22s  %-22s  %-21s  %-8s  %-7s  %6s  %-8s  %s\n", "NODE",
            "CLIENT ADDRESS", "PEER ADDRESS", "ROLES", "JOIN", "STATUS", "WEIGHT", "ZONE",
            "LAST HEALTH REPORT");
    size_t i;
    json_t *n;
    json_array_foreach(js_arr(state, "nodes"), i, n)
    {
        char roles[64], age[48] = "never";
        js_list_text(js_arr(n, "roles"), roles, sizeof(roles));
        json_t *h = js_health_of(state, js_u64(n, "id"));
        if (h) {
            int64_t ms = now_ms - (int64_t)js_u64(h, "reported_at_ms");
            snprintf(age, sizeof(age), "%.1f s ago", (double)(ms > 0 ? ms : 0) / 1000.0);
        }
        const char *client = js_str(n, "client_address"), *zone = js_str(n, "zone");
        fprintf(out, "%6" PRIu64 "  %-22s  %-22s  %-21s  %-8s  %-7s  %6" PRIu64 "  %-8s  %s\n",
                js_u64(n, "id"), client[0] ? client : "-", js_str(n, "address"), roles,
                js_str(n, "join_state"), js_str(n, "status"), js_u64(n, "weight"),
                zone[0] ? zone : "-", age);
    }
}

static void cluster_print_groups(FILE *out, json_t *state, const struct slotd_route *route)
{
    json_t *groups = js_arr(state, "groups");
    fprintf(out, "\nGROUPS\n");
    if (json_array_size(groups) == 0) {
        fprintf(out, "none (not placed yet)\n");
        return;
    }
    fprintf(out, "%5s  %-14s  %5s  %9s  %8s  %5s\n", "GROUP", "DESIRED PEERS", "EPOCH", "PREFERRED",
            "OBSERVED", "TERM");
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g)
    {
        char peers[128], leader[24] = "?", term[24] = "?";
        const char *mark = route ? "" : "  (observed leader unknown: no route)";
        js_list_text(js_arr(g, "desired_peers"), peers, sizeof(peers));
        uint64_t id = js_u64(g, "id"), preferred = js_u64(g, "preferred_leader");
        const struct slotd_route_group *rg =
            route && id <= UINT32_MAX ? slotd_route_group_find(route, (uint32_t)id) : NULL;
        if (route && (!rg || rg->leader == 0)) {
            snprintf(leader, sizeof(leader), "-");
            snprintf(term, sizeof(term), "-");
            mark = "  (no leader)";
        } else if (rg) {
            snprintf(leader, sizeof(leader), "%" PRIu64, rg->leader);
            snprintf(term, sizeof(term), "%" PRIu64, rg->leader_term);
            if (rg->leader != preferred)
                mark = "  * observed != preferred";
        }
        fprintf(out, "%5" PRIu64 "  %-14s  %5" PRIu64 "  %9" PRIu64 "  %8s  %5s%s\n", id, peers,
                js_u64(g, "config_epoch"), preferred, leader, term, mark);
    }
}

static void cluster_print_slots(FILE *out, json_t *state)
{
    json_t *table = json_object_get(state, "hash_slot_table");
    json_t *ranges = js_arr(table, "ranges");
    fprintf(out, "\nHASH SLOTS (table version %" PRIu64 ")\n", js_u64(table, "version"));
    if (json_array_size(ranges) == 0) {
        fprintf(out, "none (not placed yet)\n");
        return;
    }
    fprintf(out, "%-9s  %5s\n", "RANGE", "GROUP");
    size_t i;
    json_t *r;
    json_array_foreach(ranges, i, r)
    {
        char range[48];
        snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, js_u64(r, "first"),
                 js_u64(r, "last"));
        fprintf(out, "%-9s  %5" PRIu64 "\n", range, js_u64(r, "group"));
    }
}

static void cluster_print_tasks(FILE *out, json_t *state)
{
    json_t *tasks = js_arr(state, "tasks");
    fprintf(out, "\nTASKS\n");
    if (json_array_size(tasks) == 0) {
        fprintf(out, "none\n");
        return;
    }
    fprintf(out, "%5s  %-27s  %5s  %5s  %-7s  %s\n", "TASK", "KIND", "GROUP", "PHASE", "STATUS",
            "LAST ERROR");
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t)
    {
        char group[24] = "-";
        if (js_u64(t, "group"))
            snprintf(group, sizeof(group), "%" PRIu64, js_u64(t, "group"));
        const char *last = js_str(t, "last_error");
        fprintf(out, "%5" PRIu64 "  %-27s  %5s  %5" PRIu64 "  %-7s  %s\n", js_u64(t, "id"),
                js_str(t, "kind"), group, js_u64(t, "phase_index"), js_str(t, "status"),
                last[0] ? last : "-");
    }
}

void slotctl_cluster_print(FILE *out, json_t *state, const struct slotd_cluster_state *cs,
                           const struct slotd_route *route, int64_t now_ms)
{
    const char *id = js_str(state, "cluster_id");
    fprintf(out,
            "cluster %s  revision %" PRIu64 "  checksum %s  applied index %" PRIu64
            "  served by %s (%s)\n",
            id[0] ? id : "(not bootstrapped)", cs->revision, cs->checksum, cs->applied_raft_index,
            cs->source, cs->from_voter ? "controller voter" : "mirror");
    cluster_print_nodes(out, state, now_ms);
    cluster_print_groups(out, state, route);
    cluster_print_slots(out, state);
    cluster_print_tasks(out, state);
}

/* ---- cluster: JSON ------------------------------------------------------------------------ */

static json_t *cluster_observed_json(json_t *state, const struct slotd_route *route)
{
    json_t *arr = json_array();
    size_t i;
    json_t *g;
    json_array_foreach(js_arr(state, "groups"), i, g)
    {
        uint64_t id = js_u64(g, "id"), preferred = js_u64(g, "preferred_leader");
        const struct slotd_route_group *rg =
            id <= UINT32_MAX ? slotd_route_group_find(route, (uint32_t)id) : NULL;
        uint64_t leader = rg ? rg->leader : 0;
        const char *addr = leader ? slotd_route_node_address(route, leader) : NULL;
        json_t *o = json_object();
        json_object_set_new(o, "group_id", json_integer((json_int_t)id));
        json_object_set_new(o, "leader", json_integer((json_int_t)leader));
        json_object_set_new(o, "leader_term", json_integer(rg ? (json_int_t)rg->leader_term : 0));
        json_object_set_new(o, "leader_address", addr ? json_string(addr) : json_null());
        json_object_set_new(o, "preferred_leader", json_integer((json_int_t)preferred));
        json_object_set_new(o, "leader_is_preferred", json_boolean(leader && leader == preferred));
        json_array_append_new(arr, o);
    }
    return arr;
}

static void cluster_print_json(json_t *state, const struct slotd_cluster_state *cs,
                               const struct slotd_route *route, const struct slotd_error *rerr,
                               int code)
{
    json_t *j = json_object();
    json_object_set_new(j, "command", json_string("cluster"));
    json_object_set_new(j, "ok", json_boolean(code == SLOTCTL_EXIT_OK));
    json_object_set_new(j, "served_by", json_string(cs->source));
    json_object_set_new(j, "from_voter", json_boolean(cs->from_voter));
    json_object_set_new(j, "revision", json_integer((json_int_t)cs->revision));
    json_object_set_new(j, "checksum", json_string(cs->checksum));
    json_object_set_new(j, "applied_raft_index", json_integer((json_int_t)cs->applied_raft_index));
    json_object_set(j, "state", state);
    if (route) {
        json_object_set_new(j, "route_revision",
                            json_integer((json_int_t)slotd_route_revision(route)));
        json_object_set_new(j, "route_source", json_string(slotd_route_source(route)));
        json_object_set_new(j, "observed_leaders", cluster_observed_json(state, route));
    } else {
        json_object_set_new(j, "observed_leaders", json_null());
        json_object_set_new(j, "route_error",
                            json_string(rerr ? slotd_error_message(rerr) : "out of memory"));
    }
    json_object_set_new(j, "exit_code", json_integer(code));
    slotctl_json_print(j);
}

int slotctl_cluster_run(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_cluster_state *cs = NULL;
    struct slotd_error *err = NULL;
    int rc = slotd_client_cluster_state(c, 0, NULL, &cs, &err);
    int code;
    if (rc != SLOTD_CLIENT_OK) {
        code = slotctl_error_report(a, rc, err);
        goto err_after_state;
    }
    json_error_t jerr;
    json_t *state = json_loadb(cs->state_json, cs->state_json_len, 0, &jerr);
    if (!json_is_object(state)) {
        char msg[600];
        snprintf(msg, sizeof(msg), "cluster state from %s: state_json is not a JSON object: %s",
                 cs->source, jerr.text);
        code = slotctl_error_report_text(a, SLOTD_CLIENT_EMALFORMED, msg, NULL);
        goto err_after_json;
    }
    struct slotd_route *route = NULL;
    code = SLOTCTL_EXIT_OK;
    if (slotd_client_route_fetch(c, &route, &err) != SLOTD_CLIENT_OK) {
        code = SLOTCTL_EXIT_UNAVAILABLE;
        fprintf(stderr, "slotctl cluster: observed leaders unknown: %s\n",
                err ? slotd_error_message(err) : "out of memory");
    }
    if (a->json)
        cluster_print_json(state, cs, route, err, code);
    else
        slotctl_cluster_print(stdout, state, cs, route, admin_wall_ms());
    slotd_route_destroy(route);
err_after_json:
    json_decref(state);
err_after_state:
    slotd_cluster_state_destroy(cs);
    slotd_error_destroy(err);
    return code;
}

/* ---- transfer-leader, join, activate ------------------------------------------------------ */

json_t *slotctl_admin_result_json(const struct slotctl_args *a, const struct slotd_admin_result *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "command", json_string(slotctl_cmd_name(a->cmd)));
    json_object_set_new(j, "ok", json_true());
    json_object_set_new(j, "outcome", json_string(slotd_admin_outcome_name(r->outcome)));
    json_object_set_new(j, "reason", json_string(r->reason));
    json_object_set_new(j, "revision", json_integer((json_int_t)r->revision));
    json_object_set_new(j, "applied_index", json_integer((json_int_t)r->applied_index));
    json_object_set_new(j, "attempts", json_integer(r->attempts));
    return j;
}

void slotctl_admin_result_print(const struct slotd_admin_result *r, const char *what)
{
    printf("%s  %s  revision %" PRIu64 "  applied index %" PRIu64 "%s%s\n",
           slotd_admin_outcome_name(r->outcome), what, r->revision, r->applied_index,
           r->reason[0] ? "  reason: " : "", r->reason);
}

int slotctl_admin_send(struct slotd_client *c, const struct slotctl_args *a,
                       struct slotd_admin_command *cmd, int built, struct slotd_admin_result **out)
{
    struct slotd_error *err = NULL;
    *out = NULL;
    int rc = !cmd                       ? SLOTD_CLIENT_ENOMEM
             : built != SLOTD_CLIENT_OK ? built
                                        : slotd_client_admin_command(c, cmd, out, &err);
    int code = rc == SLOTD_CLIENT_OK ? SLOTCTL_EXIT_OK : slotctl_error_report_free(a, rc, err);
    slotd_admin_command_destroy(cmd);
    return code;
}

int slotctl_admin_result_report(const struct slotctl_args *a, const struct slotd_admin_result *r,
                                const char *what, json_t *fields)
{
    if (a->json) {
        json_t *j = slotctl_admin_result_json(a, r);
        if (fields != NULL)
            json_object_update(j, fields);
        slotctl_json_print(j);
    } else {
        slotctl_admin_result_print(r, what);
    }
    json_decref(fields);
    return SLOTCTL_EXIT_OK;
}

int slotctl_admin_apply(struct slotd_client *c, const struct slotctl_args *a,
                        struct slotd_admin_command *cmd, int built, const char *what,
                        json_t *fields)
{
    struct slotd_admin_result *r;
    int code = slotctl_admin_send(c, a, cmd, built, &r);
    if (code != SLOTCTL_EXIT_OK) {
        json_decref(fields);
        return code;
    }
    slotctl_admin_result_report(a, r, what, fields);
    slotd_admin_result_destroy(r);
    return SLOTCTL_EXIT_OK;
}

int slotctl_node_admin_run(struct slotd_client *c, const struct slotctl_args *a)
{
    bool join = a->cmd == SLOTCTL_CMD_JOIN;
    enum slotd_admin_kind kind = join                                ? SLOTD_ADMIN_JOIN_NODE
                                 : a->cmd == SLOTCTL_CMD_REMOVE_NODE ? SLOTD_ADMIN_REMOVE_NODE
                                 : a->cmd == SLOTCTL_CMD_DEMOTE
                                     ? SLOTD_ADMIN_DEMOTE_CONTROLLER_VOTER
                                     : SLOTD_ADMIN_ACTIVATE_NODE;
    struct slotd_admin_command *cmd = slotd_admin_command_create(kind);
    int built = cmd ? slotd_admin_command_set_address(cmd, a->address) : SLOTD_CLIENT_ENOMEM;
    if (cmd) {
        slotd_admin_command_set_node_id(cmd, a->node_id);
        slotd_admin_command_set_weight(cmd, a->weight);
        slotd_admin_command_set_expected_revision(cmd, a->expected_revision);
    }
    char what[SLOTD_ADDRESS_LEN + 64];
    if (join)
        snprintf(what, sizeof(what), "node %" PRIu64 " at %s", a->node_id, a->address);
    else
        snprintf(what, sizeof(what), "node %" PRIu64 " %s", a->node_id,
                 a->cmd == SLOTCTL_CMD_REMOVE_NODE ? "removed"
                 : a->cmd == SLOTCTL_CMD_DEMOTE    ? "demoted to a controller mirror"
                                                   : "active");
    json_t *fields = json_object();
    json_object_set_new(fields, "node_id", json_integer((json_int_t)a->node_id));
    if (join)
        json_object_set_new(fields, "address", json_string(a->address));
    return slotctl_admin_apply(c, a, cmd, built, what, fields);
}

/* Polls the route until a->to_node leads a->group_id or a->wait_s pass. Returns true when it
 * does; *leader and *term hold the last observation, err the last route failure ("" if none). */
static bool transfer_wait(struct slotd_client *c, const struct slotctl_args *a, uint64_t *leader,
                          uint64_t *term, double *waited_s, char *err, size_t errlen)
{
    int64_t start = admin_mono_ms(), end = start + (int64_t)a->wait_s * 1000;
    bool done = false;
    *leader = *term = 0;
    err[0] = '\0';
    for (;;) {
        struct slotd_route *r;
        struct slotd_error *rerr = NULL;
        if (slotd_client_route_fetch(c, &r, &rerr) == SLOTD_CLIENT_OK) {
            const struct slotd_route_group *g = slotd_route_group_find(r, a->group_id);
            *leader = g ? g->leader : 0;
            *term = g ? g->leader_term : 0;
            done = g && g->leader == a->to_node;
            err[0] = '\0';
            slotd_route_destroy(r);
        } else {
            snprintf(err, errlen, "%s", rerr ? slotd_error_message(rerr) : "out of memory");
        }
        slotd_error_destroy(rerr);
        int64_t now = admin_mono_ms();
        *waited_s = (double)(now - start) / 1000.0;
        if (done || now >= end)
            return done;
        int64_t left = end - now;
        admin_sleep_ms(left < SLOTCTL_WAIT_POLL_MS ? (int)left : SLOTCTL_WAIT_POLL_MS);
    }
}

/* transfer-leader after its SetPreferredLeader answered r (borrowed for the call): prints it
 * and with --wait follows the route. Returns the exit code. */
static int transfer_leader_report(struct slotd_client *c, const struct slotctl_args *a,
                                  const struct slotd_admin_result *r)
{
    char what[96];
    snprintf(what, sizeof(what), "group %u preferred leader is node %" PRIu64, a->group_id,
             a->to_node);
    if (!a->json)
        slotctl_admin_result_print(r, what);
    if (a->wait_s == 0) {
        if (a->json) {
            json_t *j = slotctl_admin_result_json(a, r);
            json_object_set_new(j, "group_id", json_integer(a->group_id));
            json_object_set_new(j, "node_id", json_integer((json_int_t)a->to_node));
            slotctl_json_print(j);
        }
        return SLOTCTL_EXIT_OK;
    }
    uint64_t leader, term;
    double waited;
    char err[600];
    fflush(stdout);
    bool done = transfer_wait(c, a, &leader, &term, &waited, err, sizeof(err));
    int code = done ? SLOTCTL_EXIT_OK : SLOTCTL_EXIT_WAIT_TIMEOUT;
    char msg[1200];
    if (done)
        snprintf(msg, sizeof(msg),
                 "node %" PRIu64 " leads group %u (term %" PRIu64 ") after %.1f s", a->to_node,
                 a->group_id, term, waited);
    else
        snprintf(msg, sizeof(msg),
                 "timed out after %d s: group %u is led by %s%" PRIu64 " (term %" PRIu64
                 "), not node %" PRIu64 "; the leader hands over only when no task is active "
                 "for the group, its voters equal its desired peers, node %" PRIu64
                 " is active and caught up, and the group is outside its 10 s cooldown "
                 "(docs/operations.md)%s%s",
                 a->wait_s, a->group_id, leader ? "node " : "no node ", leader, term, a->to_node,
                 a->to_node, err[0] ? "; last route error: " : "", err);
    if (a->json) {
        json_t *j = slotctl_admin_result_json(a, r);
        json_object_set_new(j, "ok", json_boolean(done));
        json_object_set_new(j, "group_id", json_integer(a->group_id));
        json_object_set_new(j, "node_id", json_integer((json_int_t)a->to_node));
        json_object_set_new(j, "waited_s", json_real(waited));
        json_object_set_new(j, "leader", json_integer((json_int_t)leader));
        json_object_set_new(j, "leader_term", json_integer((json_int_t)term));
        if (!done) {
            json_object_set_new(j, "error", json_string("timeout"));
            json_object_set_new(j, "message", json_string(msg));
        }
        json_object_set_new(j, "exit_code", json_integer(code));
        slotctl_json_print(j);
    } else if (done) {
        printf("%s\n", msg);
    }
    if (!done)
        fprintf(stderr, "slotctl transfer-leader: %s\n", msg);
    return code;
}

int slotctl_transfer_leader_run(struct slotd_client *c, const struct slotctl_args *a)
{
    if (a->as_task)
        return slotctl_task_cmd_run(c, a);
    struct slotd_admin_command *cmd = slotd_admin_command_create(SLOTD_ADMIN_SET_PREFERRED_LEADER);
    if (cmd) {
        slotd_admin_command_set_group_id(cmd, a->group_id);
        slotd_admin_command_set_node_id(cmd, a->to_node);
        slotd_admin_command_set_expected_revision(cmd, a->expected_revision);
    }
    struct slotd_admin_result *rp;
    int sent = slotctl_admin_send(c, a, cmd, SLOTD_CLIENT_OK, &rp);
    if (sent != SLOTCTL_EXIT_OK)
        return sent;
    int code = transfer_leader_report(c, a, rp);
    slotd_admin_result_destroy(rp);
    return code;
}

/* ---- feature ------------------------------------------------------------------------------ */

static int feature_list(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_cluster_state *csp = NULL;
    struct slotd_error *err = NULL;
    int rc = slotd_client_cluster_state(c, 0, NULL, &csp, &err);
    int code = SLOTCTL_EXIT_OK;
    json_t *state = NULL;
    if (rc != SLOTD_CLIENT_OK) {
        code = slotctl_error_report(a, rc, err);
        goto done;
    }
    const struct slotd_cluster_state *cs = csp;
    state = json_loadb(cs->state_json, cs->state_json_len, 0, NULL);
    /* a state written before features existed has none: every feature is off */
    json_t *features = json_object_get(state, "features");
    if (!json_is_object(state) || (features != NULL && !json_is_object(features))) {
        char msg[600];
        snprintf(msg, sizeof(msg), "cluster state from %s: \"features\" is not a JSON object",
                 cs->source);
        code = slotctl_error_report_text(a, SLOTD_CLIENT_EMALFORMED, msg, NULL);
        goto done;
    }
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string("feature list"));
        json_object_set_new(j, "ok", json_true());
        json_object_set_new(j, "features", features ? json_incref(features) : json_object());
        json_object_set_new(j, "revision", json_integer((json_int_t)cs->revision));
        slotctl_json_print(j);
    } else {
        const char *name;
        json_t *v;
        printf("%-24s %s\n", "FEATURE", "VALUE");
        json_object_foreach(features, name, v)
        {
            printf("%-24s %s\n", name, json_is_true(v) ? "on" : "off");
        }
        printf("(revision %" PRIu64 ", from %s)\n", cs->revision, cs->source);
    }
done:
    json_decref(state);
    slotd_cluster_state_destroy(csp);
    slotd_error_destroy(err);
    return code;
}

int slotctl_feature_run(struct slotd_client *c, const struct slotctl_args *a)
{
    if (strcmp(a->pos[0], "list") == 0)
        return feature_list(c, a);
    const char *feature = a->pos[1];
    bool enabled = strcmp(a->pos[2], "on") == 0;
    struct slotd_admin_command *cmd = slotd_admin_command_create(SLOTD_ADMIN_SET_FEATURE);
    int built = cmd ? slotd_admin_command_set_feature(cmd, feature, enabled) : SLOTD_CLIENT_ENOMEM;
    if (cmd)
        slotd_admin_command_set_expected_revision(cmd, a->expected_revision);
    char what[128];
    snprintf(what, sizeof(what), "feature %s %s", feature, enabled ? "on" : "off");
    json_t *fields = json_object();
    json_object_set_new(fields, "command", json_string("feature set"));
    json_object_set_new(fields, "feature", json_string(feature));
    json_object_set_new(fields, "enabled", json_boolean(enabled));
    return slotctl_admin_apply(c, a, cmd, built, what, fields);
}

/* ---- balance ------------------------------------------------------------------------------ */

static json_t *balance_json(const struct slotd_controller_status *s)
{
    json_t *j = json_object(), *scores = json_array(), *moves = json_array();
    json_object_set_new(j, "command", json_string("balance status"));
    json_object_set_new(j, "ok", json_true());
    json_object_set_new(j, "node_id", json_integer((json_int_t)s->node_id));
    json_object_set_new(j, "role", json_string(s->role));
    json_object_set_new(j, "enabled", json_boolean(s->balance_enabled));
    json_object_set_new(j, "paused", json_boolean(s->balance_paused));
    json_object_set_new(j, "balanced", json_boolean(s->balance_balanced));
    json_object_set_new(j, "max_moves", json_integer(s->balance_max_moves));
    json_object_set_new(j, "total_replicas", json_integer(s->balance_total_replicas));
    json_object_set_new(j, "total_weight", json_integer(s->balance_total_weight));
    json_object_set_new(j, "revision", json_integer((json_int_t)s->revision));
    for (size_t i = 0; i < s->n_balance_scores; i++) {
        const struct slotd_balance_score *sc = &s->balance_scores[i];
        json_array_append_new(scores, json_pack("{s:I,s:i,s:i,s:f}", "node", (json_int_t)sc->node,
                                                "weight", (int)sc->weight, "replicas",
                                                (int)sc->replicas, "share", sc->share_x10 / 10.0));
    }
    for (size_t i = 0; i < s->n_balance_moves; i++) {
        const struct slotd_balance_move *m = &s->balance_moves[i];
        json_array_append_new(moves, json_pack("{s:i,s:I,s:I,s:s}", "group", (int)m->group, "from",
                                               (json_int_t)m->source, "to", (json_int_t)m->target,
                                               "why", m->why));
    }
    json_object_set_new(j, "scores", scores);
    json_object_set_new(j, "moves", moves);
    return j;
}

static void balance_print(const struct slotd_controller_status *s)
{
    printf("balancer: %s%s, at most %u moves; node %" PRIu64 " (%s) at revision %" PRIu64 "\n",
           s->balance_enabled ? "on" : "off (--balance 0 on this node)",
           s->balance_paused ? ", paused cluster-wide (slotctl balance on resumes)" : "",
           s->balance_max_moves, s->node_id, s->role, s->revision);
    printf("%-6s %-6s %-8s %-6s %s\n", "NODE", "WEIGHT", "REPLICAS", "SHARE", "DIFF");
    for (size_t i = 0; i < s->n_balance_scores; i++) {
        const struct slotd_balance_score *sc = &s->balance_scores[i];
        printf("%-6" PRIu64 " %-6u %-8u %-6.1f %+.1f\n", sc->node, sc->weight, sc->replicas,
               sc->share_x10 / 10.0, sc->replicas - sc->share_x10 / 10.0);
    }
    printf("(%u replicas over weight %u on active nodes)\n", s->balance_total_replicas,
           s->balance_total_weight);
    if (s->n_balance_moves == 0)
        printf("plan: no move (%s)\n", s->balance_balanced ? "balanced: every node within 1 of "
                                                             "its share"
                                                           : "nothing movable now");
    for (size_t i = 0; i < s->n_balance_moves; i++) {
        const struct slotd_balance_move *m = &s->balance_moves[i];
        printf("plan: group %u %" PRIu64 " -> %" PRIu64 ": %s\n", m->group, m->source, m->target,
               m->why);
    }
}

static int balance_status(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotctl_status_row rows[SLOTD_CLIENT_ENDPOINTS_MAX];
    size_t n = slotctl_status_collect(c, a->endpoints, rows, SLOTD_CLIENT_ENDPOINTS_MAX);
    int pick = -1;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].rc != SLOTD_CLIENT_OK)
            continue;
        if (pick < 0 || strcmp(rows[i].cs->role, "leader") == 0)
            pick = (int)i;
        if (strcmp(rows[i].cs->role, "leader") == 0)
            break;
    }
    int code = SLOTCTL_EXIT_OK;
    if (pick < 0) {
        code = n > 0 ? slotctl_error_report(a, rows[0].rc, rows[0].err)
                     : slotctl_error_report_text(a, SLOTD_CLIENT_EINVAL, "no endpoints", NULL);
    } else if (a->json) {
        slotctl_json_print(balance_json(rows[pick].cs));
    } else {
        balance_print(rows[pick].cs);
    }
    slotctl_status_rows_clear(rows, n);
    return code;
}

int slotctl_balance_run(struct slotd_client *c, const struct slotctl_args *a)
{
    if (strcmp(a->pos[0], "status") == 0)
        return balance_status(c, a);
    bool enabled = strcmp(a->pos[0], "on") == 0;
    struct slotd_admin_command *cmd = slotd_admin_command_create(SLOTD_ADMIN_SET_BALANCE);
    if (cmd) {
        slotd_admin_command_set_enabled(cmd, enabled);
        slotd_admin_command_set_expected_revision(cmd, a->expected_revision);
    }
    const char *what = enabled ? "balance on" : "balance off";
    return slotctl_admin_apply(c, a, cmd, cmd ? SLOTD_CLIENT_OK : SLOTD_CLIENT_ENOMEM, what,
                               json_pack("{s:s}", "command", what));
}
