/* slotctl.c - slotctl: put/get/delete/cas, route and health over libslotd; main() and dispatch. */
#include "slotctl_cli.h"
#include "slotctl_cmds.h"
#include "slotctl_mcp.h"

#include "slotd/client.h"

#include <jansson.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- key-value commands ---------------------------------------------------------------- */

static json_t *json_write_common(const struct slotctl_args *a, const struct slotd_write_result *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "command", json_string(slotctl_cmd_name(a->cmd)));
    json_object_set_new(j, "ok", json_true());
    slotctl_json_set_bytes(j, "key", (const uint8_t *)a->pos[0], strlen(a->pos[0]));
    slotctl_json_set_write(j, r->group_id, r->applied_index, r->term, r->deduplicated,
                           r->request_id, r->request_id_len, r->attempts);
    return j;
}

/* The write a command makes: put (with --lease), delete or cas; *out NULL when it failed. */
static int write_send(struct slotd_client *c, const struct slotctl_args *a, uint64_t expected,
                      struct slotd_write_result **out, struct slotd_error **err)
{
    const char *key = a->pos[0];
    if (a->cmd == SLOTCTL_CMD_DELETE)
        return slotd_client_delete(c, key, strlen(key), NULL, out, err);
    if (a->cmd != SLOTCTL_CMD_PUT)
        return slotd_client_cas(c, key, strlen(key), expected, a->cas_delete ? "" : a->pos[2],
                                a->cas_delete ? 0 : strlen(a->pos[2]), a->cas_delete, NULL, out,
                                err);
    struct slotd_write_options *wo = slotd_write_options_create();
    if (!wo)
        return SLOTD_CLIENT_ENOMEM;
    slotd_write_options_set_lease(wo, a->lease_id); /* --lease (0 = none) */
    int rc = slotd_client_put(c, key, strlen(key), a->pos[1], strlen(a->pos[1]), wo, out, err);
    slotd_write_options_destroy(wo);
    return rc;
}

static int cmd_write(struct slotd_client *c, const struct slotctl_args *a)
{
    uint64_t expected = 0;
    if (a->cmd != SLOTCTL_CMD_PUT && a->cmd != SLOTCTL_CMD_DELETE)
        expected = strtoull(a->pos[1], NULL, 10); /* checked by the parser */
    struct slotd_write_result *rp = NULL;
    struct slotd_error *err = NULL;
    int rc = write_send(c, a, expected, &rp, &err);
    int code = slotctl_exit_of(rc);
    if (rc != SLOTD_CLIENT_OK && rc != SLOTD_CLIENT_ECAS_MISMATCH) {
        code = slotctl_error_report(a, rc, err);
        goto done;
    }
    const struct slotd_write_result *r = rp;
    if (a->json) {
        json_t *j = json_write_common(a, r);
        if (a->cmd == SLOTCTL_CMD_PUT) {
            json_object_set_new(j, "version", json_integer((json_int_t)r->version));
            json_object_set_new(j, "prev_version", json_integer((json_int_t)r->prev_version));
            json_object_set_new(j, "lease", json_integer((json_int_t)a->lease_id));
        } else if (a->cmd == SLOTCTL_CMD_DELETE) {
            json_object_set_new(j, "deleted", json_boolean(r->deleted));
            json_object_set_new(j, "prev_version", json_integer((json_int_t)r->prev_version));
        } else {
            json_object_set_new(j, "ok", json_boolean(r->cas_succeeded));
            json_object_set_new(j, "succeeded", json_boolean(r->cas_succeeded));
            json_object_set_new(j, "expected_version", json_integer((json_int_t)expected));
            json_object_set_new(j, "version", json_integer((json_int_t)r->version));
            if (!r->cas_succeeded) {
                slotctl_json_set_bytes(j, "current_value", r->current_value, r->current_value_len);
                json_object_set_new(j, "exit_code", json_integer(code));
            }
        }
        slotctl_json_print(j);
    } else if (a->cmd == SLOTCTL_CMD_PUT) {
        printf("OK  version %llu  prev_version %llu  group %u", (unsigned long long)r->version,
               (unsigned long long)r->prev_version, r->group_id);
        if (a->lease_id)
            printf("  lease %llu (0x%llx)", (unsigned long long)a->lease_id,
                   (unsigned long long)a->lease_id);
        printf("\n");
    } else if (a->cmd == SLOTCTL_CMD_DELETE) {
        printf("%s  prev_version %llu  group %u\n", r->deleted ? "DELETED" : "ABSENT",
               (unsigned long long)r->prev_version, r->group_id);
    } else if (r->cas_succeeded) {
        printf("OK  version %llu  group %u\n", (unsigned long long)r->version, r->group_id);
    } else {
        printf("MISMATCH  expected %llu  current version %llu\n", (unsigned long long)expected,
               (unsigned long long)r->version);
    }
    if (rc == SLOTD_CLIENT_ECAS_MISMATCH)
        fprintf(stderr, "slotctl: %s\n", err ? slotd_error_message(err) : "cas: mismatch");
done:
    slotd_write_result_destroy(rp);
    slotd_error_destroy(err);
    return code;
}

static int cmd_get(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_value *vp = NULL;
    struct slotd_error *err = NULL;
    struct slotd_read_options *ro = slotd_read_options_create();
    int rc = SLOTD_CLIENT_ENOMEM;
    if (ro) {
        slotd_read_options_set_consistency(ro, a->consistency);
        slotd_read_options_set_min_applied_index(ro, a->min_applied_index);
        rc = slotd_client_get(c, a->pos[0], strlen(a->pos[0]), ro, &vp, &err);
        slotd_read_options_destroy(ro);
    }
    int code;
    if (rc != SLOTD_CLIENT_OK) {
        code = slotctl_error_report(a, rc, err);
        goto done;
    }
    const struct slotd_value *v = vp;
    code = v->found ? SLOTCTL_EXIT_OK : SLOTCTL_EXIT_NOT_FOUND;
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string("get"));
        json_object_set_new(j, "ok", json_true());
        slotctl_json_set_bytes(j, "key", (const uint8_t *)a->pos[0], strlen(a->pos[0]));
        json_object_set_new(j, "found", json_boolean(v->found));
        if (v->found) {
            slotctl_json_set_bytes(j, "value", v->value, v->value_len);
            json_object_set_new(j, "version", json_integer((json_int_t)v->version));
        }
        json_object_set_new(j, "consistency",
                            json_string(slotctl_consistency_name(a->consistency)));
        json_object_set_new(j, "group_id", json_integer(v->group_id));
        json_object_set_new(j, "applied_index", json_integer((json_int_t)v->applied_index));
        json_object_set_new(j, "term", json_integer((json_int_t)v->term));
        json_object_set_new(j, "attempts", json_integer(v->attempts));
        json_object_set_new(j, "exit_code", json_integer(code));
        slotctl_json_print(j);
    } else if (v->found) {
        char *hex = NULL;
        if (!slotctl_printable(v->value, v->value_len) && (hex = malloc(2 * v->value_len + 1)))
            slotctl_hex_of(v->value, v->value_len, hex);
        printf("KEY      %s\nVALUE    %s%.*s\nVERSION  %llu\nGROUP    %u\n", a->pos[0],
               hex ? "0x" : "", hex ? (int)strlen(hex) : (int)v->value_len,
               hex        ? hex
               : v->value ? (const char *)v->value
                          : "",
               (unsigned long long)v->version, v->group_id);
        free(hex);
    } else {
        fprintf(stderr, "slotctl get: %s: not found\n", a->pos[0]);
    }
done:
    slotd_value_destroy(vp);
    slotd_error_destroy(err);
    return code;
}

/* ---- route, cluster, health ------------------------------------------------------------ */

static json_t *json_u64_array(const uint64_t *v, unsigned n)
{
    json_t *arr = json_array();
    for (unsigned i = 0; i < n; i++)
        json_array_append_new(arr, json_integer((json_int_t)v[i]));
    return arr;
}

static const char *replica_role_name(enum slotd_replica_role role)
{
    switch (role) {
    case SLOTD_REPLICA_VOTER:
        return "voter";
    case SLOTD_REPLICA_LEARNER:
        return "learner";
    default:
        return "none";
    }
}

/* "1,2,3" or "-" into buf. */
static const char *id_list(char *buf, size_t len, const uint64_t *v, unsigned n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n && at < len; i++)
        at +=
            (size_t)snprintf(buf + at, len - at, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    return n ? buf : "-";
}

static json_t *json_route(const struct slotd_route *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "revision", json_integer((json_int_t)slotd_route_revision(r)));
    json_object_set_new(j, "source", json_string(slotd_route_source(r)));
    json_t *table = json_array();
    for (unsigned s = 0; s < SLOTD_HASH_SLOTS; s++)
        json_array_append_new(table, json_integer(slotd_route_hash_slot_group(r, s)));
    json_object_set_new(j, "hash_slot_table", table);
    json_t *groups = json_array();
    for (size_t i = 0; i < slotd_route_group_count(r); i++) {
        const struct slotd_route_group *g = slotd_route_group_at(r, i);
        json_t *o = json_object();
        json_object_set_new(o, "group_id", json_integer(g->group_id));
        json_object_set_new(o, "voters", json_u64_array(g->voters, g->voter_count));
        json_object_set_new(o, "learners", json_u64_array(g->learners, g->learner_count));
        json_object_set_new(o, "intended_voters",
                            json_u64_array(g->intended_voters, g->intended_voter_count));
        json_object_set_new(o, "intended_learners",
                            json_u64_array(g->intended_learners, g->intended_learner_count));
        json_object_set_new(o, "agrees", json_boolean(slotd_route_group_agrees(g)));
        json_t *reps = json_array();
        for (unsigned k = 0; k < g->replica_count; k++) {
            const struct slotd_route_replica *x = &g->replicas[k];
            json_t *rj = json_object();
            json_object_set_new(rj, "node_id", json_integer((json_int_t)x->node_id));
            json_object_set_new(rj, "role", json_string(replica_role_name(x->role)));
            json_object_set_new(rj, "leader", json_integer((json_int_t)x->leader));
            json_object_set_new(rj, "term", json_integer((json_int_t)x->term));
            json_object_set_new(rj, "commit_index", json_integer((json_int_t)x->commit_index));
            json_object_set_new(rj, "applied_index", json_integer((json_int_t)x->applied_index));
            json_object_set_new(rj, "age_ms", json_integer((json_int_t)x->age_ms));
            json_array_append_new(reps, rj);
        }
        json_object_set_new(o, "replicas", reps);
        json_object_set_new(o, "config_epoch", json_integer((json_int_t)g->config_epoch));
        json_object_set_new(o, "preferred_leader", json_integer((json_int_t)g->preferred_leader));
        json_object_set_new(o, "leader", json_integer((json_int_t)g->leader));
        json_object_set_new(o, "leader_term", json_integer((json_int_t)g->leader_term));
        json_object_set_new(o, "hash_slots", json_integer(g->hash_slot_count));
        const char *addr = slotd_route_node_address(r, g->leader);
        json_object_set_new(o, "leader_address", addr ? json_string(addr) : json_null());
        json_array_append_new(groups, o);
    }
    json_object_set_new(j, "groups", groups);
    json_t *nodes = json_array();
    for (size_t i = 0; i < slotd_route_node_count(r); i++) {
        const struct slotd_route_node *node = slotd_route_node_at(r, i);
        json_t *o = json_object();
        json_object_set_new(o, "node_id", json_integer((json_int_t)node->node_id));
        json_object_set_new(o, "address", json_string(node->address));
        json_array_append_new(nodes, o);
    }
    json_object_set_new(j, "nodes", nodes);
    return j;
}

static void print_route_table(const struct slotd_route *r)
{
    printf("route revision %llu (from %s)\n\n", (unsigned long long)slotd_route_revision(r),
           slotd_route_source(r));
    printf("%-11s  %5s  %6s  %-6s  %s\n", "HASH SLOTS", "GROUP", "LEADER", "TERM", "ADDRESS");
    unsigned start = 0;
    for (unsigned s = 1; s <= SLOTD_HASH_SLOTS; s++) {
        if (s < SLOTD_HASH_SLOTS &&
            slotd_route_hash_slot_group(r, s) == slotd_route_hash_slot_group(r, start))
            continue;
        uint32_t gid = slotd_route_hash_slot_group(r, start);
        const struct slotd_route_group *g = slotd_route_group_find(r, gid);
        const char *addr = g ? slotd_route_node_address(r, g->leader) : NULL;
        char range[32], leader[24], term[24];
        snprintf(range, sizeof(range), "%u-%u", start, s - 1);
        snprintf(leader, sizeof(leader), "%llu", g ? (unsigned long long)g->leader : 0ull);
        snprintf(term, sizeof(term), "%llu", g ? (unsigned long long)g->leader_term : 0ull);
        printf("%-11s  %5u  %6s  %-6s  %s\n", range, gid, g && g->leader ? leader : "-",
               g && g->leader ? term : "-", addr ? addr : "(no leader)");
        start = s;
    }
}

/* Per group: what the group has next to what the controller intends ("*" where they differ),
 * then each replica's own answer. */
static void print_route_groups(const struct slotd_route *r)
{
    printf("\n%-5s  %-11s  %-11s  %-15s  %-17s  %s\n", "GROUP", "VOTERS", "LEARNERS",
           "INTENDED VOTERS", "INTENDED LEARNERS", "REPLICAS (node role term commit/applied age)");
    unsigned differ = 0;
    for (size_t i = 0; i < slotd_route_group_count(r); i++) {
        const struct slotd_route_group *g = slotd_route_group_at(r, i);
        char v[96], l[96], iv[96], il[96];
        int agrees = slotd_route_group_agrees(g);
        differ += !agrees;
        printf("%-5u  %-11s  %-11s  %-15s  %-17s %s", g->group_id,
               id_list(v, sizeof(v), g->voters, g->voter_count),
               id_list(l, sizeof(l), g->learners, g->learner_count),
               id_list(iv, sizeof(iv), g->intended_voters, g->intended_voter_count),
               id_list(il, sizeof(il), g->intended_learners, g->intended_learner_count),
               agrees ? " " : "*");
        for (unsigned k = 0; k < g->replica_count; k++) {
            const struct slotd_route_replica *x = &g->replicas[k];
            printf(" %llu:%s%s t%llu %llu/%llu %llums", (unsigned long long)x->node_id,
                   replica_role_name(x->role), x->leader == x->node_id ? "(leader)" : "",
                   (unsigned long long)x->term, (unsigned long long)x->commit_index,
                   (unsigned long long)x->applied_index, (unsigned long long)x->age_ms);
        }
        printf("\n");
    }
    if (differ)
        printf("\n* %u group(s): the group's members are not the controller's intent yet (a move "
               "running, or one that failed half-way)\n",
               differ);
}

static int cmd_route(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_route *r;
    struct slotd_error *err = NULL;
    int rc = slotd_client_route_fetch(c, &r, &err);
    if (rc != SLOTD_CLIENT_OK) {
        return slotctl_error_report_free(a, rc, err);
    }
    if (a->json) {
        json_t *j = json_route(r);
        json_object_set_new(j, "command", json_string("route"));
        json_object_set_new(j, "ok", json_true());
        slotctl_json_print(j);
    } else {
        print_route_table(r);
        print_route_groups(r);
    }
    slotd_route_destroy(r);
    return SLOTCTL_EXIT_OK;
}

static int cmd_health(struct slotd_client *c, const struct slotctl_args *a)
{
    /* the nodes the route names, else the endpoints as given */
    char addrs[SLOTD_CLIENT_NODES_MAX][SLOTD_ADDRESS_LEN + 1];
    uint64_t ids[SLOTD_CLIENT_NODES_MAX] = {0};
    size_t n = 0;
    struct slotd_route *r = NULL;
    if (slotd_client_route_fetch(c, &r, NULL) == SLOTD_CLIENT_OK) {
        for (size_t i = 0; i < slotd_route_node_count(r) && n < SLOTD_CLIENT_NODES_MAX; i++, n++) {
            ids[n] = slotd_route_node_at(r, i)->node_id;
            snprintf(addrs[n], sizeof(addrs[n]), "%s", slotd_route_node_at(r, i)->address);
        }
        slotd_route_destroy(r);
    } else {
        for (const char *p = a->endpoints; *p && n < SLOTD_CLIENT_NODES_MAX; n++) {
            size_t len = strcspn(p, ",");
            snprintf(addrs[n], sizeof(addrs[n]), "%.*s", (int)len, p);
            p += len + (p[len] == ',');
        }
    }
    int code = SLOTCTL_EXIT_OK;
    json_t *nodes = json_array();
    if (!a->json)
        printf("%6s  %-24s  %s\n", "NODE", "ADDRESS", "STATUS");
    for (size_t i = 0; i < n; i++) {
        int serving;
        struct slotd_error *err = NULL;
        int rc = slotd_client_health_check(c, addrs[i], &serving, &err);
        char what[600];
        if (rc == SLOTD_CLIENT_OK)
            snprintf(what, sizeof(what), "%s", slotd_health_status_name(serving));
        else
            snprintf(what, sizeof(what), "%s %s",
                     slotd_grpc_status_name(err ? slotd_error_grpc_status(err) : -1),
                     err ? slotd_error_message(err) : slotd_client_strerror(rc));
        slotd_error_destroy(err);
        if (rc != SLOTD_CLIENT_OK || serving != SLOTD_HEALTH_SERVING)
            code = SLOTCTL_EXIT_UNAVAILABLE;
        if (a->json) {
            json_t *o = json_object();
            json_object_set_new(o, "node_id",
                                ids[i] ? json_integer((json_int_t)ids[i]) : json_null());
            json_object_set_new(o, "address", json_string(addrs[i]));
            json_object_set_new(o, "status",
                                json_string(rc == SLOTD_CLIENT_OK
                                                ? slotd_health_status_name(serving)
                                                : "UNREACHABLE"));
            if (rc != SLOTD_CLIENT_OK)
                json_object_set_new(o, "message", json_string(what));
            json_array_append_new(nodes, o);
        } else {
            char id[24] = "-";
            if (ids[i])
                snprintf(id, sizeof(id), "%llu", (unsigned long long)ids[i]);
            printf("%6s  %-24s  %s\n", id, addrs[i], what);
        }
    }
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string("health"));
        json_object_set_new(j, "ok", json_boolean(code == SLOTCTL_EXIT_OK));
        json_object_set_new(j, "nodes", nodes);
        json_object_set_new(j, "exit_code", json_integer(code));
        slotctl_json_print(j);
    } else {
        json_decref(nodes);
    }
    return code;
}

/* The client a's options ask for; NULL (after a sentence on stderr) when they are refused. */
static struct slotd_client *slotctl_client_create(const struct slotctl_args *a)
{
    struct slotd_options *o = slotd_options_create();
    struct slotd_client *c = NULL;
    struct slotd_error *err = NULL;
    if (!o) {
        fprintf(stderr, "slotctl: out of memory\n");
        return NULL;
    }
    if (a->deadline_ms)
        slotd_options_set_deadline_ms(o, a->deadline_ms);
    if (a->max_retries) /* --max-retries 0 is parsed as -1: none */
        slotd_options_set_max_retries(o, a->max_retries < 0 ? 0 : a->max_retries);
    int rc = slotd_options_set_tls_ca_file(o, a->tls_ca);
    if (rc == SLOTD_CLIENT_OK)
        rc = slotd_options_set_tls_cert_file(o, a->tls_cert);
    if (rc == SLOTD_CLIENT_OK)
        rc = slotd_options_set_tls_key_file(o, a->tls_key);
    if (rc == SLOTD_CLIENT_OK)
        rc = slotd_options_set_tls_server_name(o, a->tls_server_name);
    if (rc == SLOTD_CLIENT_OK)
        rc = slotd_client_create(a->endpoints, o, &c, &err);
    if (rc != SLOTD_CLIENT_OK)
        fprintf(stderr, "slotctl: %s\n",
                err ? slotd_error_message(err) : slotd_client_strerror(rc));
    slotd_error_destroy(err);
    slotd_options_destroy(o);
    return c;
}

/* Replaces slotctl with slotbench from the same directory; returns only on failure. */
static int cmd_bench(const struct slotctl_args *a)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "slotctl bench: cannot find slotctl's own path\n");
        return SLOTCTL_EXIT_OTHER;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%.*s/slotbench", slash ? (int)(slash - self) : 1,
             slash ? self : ".");
    char **argv = calloc((size_t)a->bench_argc + 2, sizeof(*argv));
    if (!argv)
        return SLOTCTL_EXIT_OTHER;
    argv[0] = (char *)"slotbench";
    for (int i = 0; i < a->bench_argc; i++)
        argv[i + 1] = a->bench_argv[i];
    execv(path, argv);
    fprintf(stderr, "slotctl bench: cannot run %s: %m\n", path);
    free(argv);
    return SLOTCTL_EXIT_OTHER;
}

static int cmd_get_run(struct slotd_client *c, const struct slotctl_args *a)
{
    return a->has_prefix ? slotctl_range_run(c, a) : cmd_get(c, a);
}

/* What each command runs once connected and logged in; NULL: cmd_write (put, delete, cas).
 * bench and mcp run before connecting (main). */
static int (*const cmd_runs[SLOTCTL_CMD_LAST + 1])(struct slotd_client *,
                                                   const struct slotctl_args *) = {
    [SLOTCTL_CMD_META] = slotctl_meta_run,
    [SLOTCTL_CMD_BACKUP] = slotctl_backup_run,
    [SLOTCTL_CMD_USER] = slotctl_auth_run,
    [SLOTCTL_CMD_ROLE] = slotctl_auth_run,
    [SLOTCTL_CMD_GET] = cmd_get_run,
    [SLOTCTL_CMD_TXN] = slotctl_txn_run,
    [SLOTCTL_CMD_WATCH] = slotctl_watch_run,
    [SLOTCTL_CMD_ROUTE] = cmd_route,
    [SLOTCTL_CMD_CLUSTER] = slotctl_cluster_run,
    [SLOTCTL_CMD_TRANSFER_LEADER] = slotctl_transfer_leader_run,
    [SLOTCTL_CMD_JOIN] = slotctl_node_admin_run,
    [SLOTCTL_CMD_ACTIVATE] = slotctl_node_admin_run,
    [SLOTCTL_CMD_REMOVE_NODE] = slotctl_node_admin_run,
    [SLOTCTL_CMD_DEMOTE] = slotctl_node_admin_run,
    [SLOTCTL_CMD_HEALTH] = cmd_health,
    [SLOTCTL_CMD_MOVE_REPLICA] = slotctl_task_cmd_run,
    [SLOTCTL_CMD_DRAIN] = slotctl_task_cmd_run,
    [SLOTCTL_CMD_PROMOTE] = slotctl_task_cmd_run,
    [SLOTCTL_CMD_RETRY] = slotctl_task_cmd_run,
    [SLOTCTL_CMD_ABORT] = slotctl_task_cmd_run,
    [SLOTCTL_CMD_MIGRATE_SLOTS] = slotctl_task_cmd_run,
    [SLOTCTL_CMD_TASK_STATUS] = slotctl_task_status_run,
    [SLOTCTL_CMD_STATUS] = slotctl_status_run,
    [SLOTCTL_CMD_FEATURE] = slotctl_feature_run,
    [SLOTCTL_CMD_BALANCE] = slotctl_balance_run,
    [SLOTCTL_CMD_LEASE_GRANT] = slotctl_lease_run,
    [SLOTCTL_CMD_LEASE_KEEPALIVE] = slotctl_lease_run,
    [SLOTCTL_CMD_LEASE_REVOKE] = slotctl_lease_run,
};

int main(int argc, char **argv)
{
    struct slotctl_args a;
    char err[256];
    if (slotctl_args_parse(argc, argv, &a, err, sizeof(err)) != SLOTCTL_EXIT_OK) {
        fprintf(stderr, "slotctl: %s\n", err);
        if (a.cmd != SLOTCTL_CMD_META) /* a typed command's message carries its usage */
            slotctl_usage(stderr);
        return SLOTCTL_EXIT_USAGE;
    }
    if (a.help) {
        slotctl_usage(stdout);
        return SLOTCTL_EXIT_OK;
    }
    if (a.version) {
        printf("slotctl %s\n", SLOTD_VERSION_TEXT);
        return SLOTCTL_EXIT_OK;
    }
    if (a.cmd == SLOTCTL_CMD_BENCH)
        return cmd_bench(&a);
    if (a.cmd == SLOTCTL_CMD_MCP) /* its tools run slotctl's commands as children */
        return slotctl_mcp_run(&a);
    struct slotd_client *c = slotctl_client_create(&a);
    if (!c)
        return SLOTCTL_EXIT_USAGE;
    int code = slotctl_login(c, &a);
    if (code != SLOTCTL_EXIT_OK) {
        slotd_client_destroy(c);
        return code;
    }
    int (*run)(struct slotd_client *, const struct slotctl_args *) = cmd_runs[a.cmd];
    code = run ? run(c, &a) : cmd_write(c, &a);
    slotd_client_destroy(c);
    fflush(stdout);
    return code;
}
