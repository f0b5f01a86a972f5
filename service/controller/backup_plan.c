/* backup_plan.c - the backup plan in the cluster state: its rules, JSON, commands and builders. */
#include <string.h>

#include "internal.h"

const char *ctl_backup_destination_check(const char *d)
{
    size_t n = strnlen(d, CTL_BACKUP_DESTINATION_MAX + 1);
    if (n < 2 || n > CTL_BACKUP_DESTINATION_MAX) {
        return "must be 2..255 bytes";
    }
    if (d[0] != '/') {
        return "must be an absolute path (start with /)";
    }
    for (size_t i = 0; i < n; i++) {
        if (d[i] < 0x20 || d[i] > 0x7e) {
            return "must be printable ASCII";
        }
    }
    for (const char *c = d; c != NULL && *c != '\0'; c = strchr(c + 1, '/')) {
        const char *p = c + 1; /* one component: p up to the next '/' or the end */
        size_t len = strcspn(p, "/");
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
            return "must have no . or .. component";
        }
    }
    return NULL;
}

int ctl__backup_validate(const struct ctl_state *s, char *err, size_t errlen)
{
    const struct ctl_backup_plan *b = &s->backup;
    const char *why;
    if (b->set) {
        if (b->interval_s < CTL_BACKUP_INTERVAL_S_MIN ||
            b->interval_s > CTL_BACKUP_INTERVAL_S_MAX) {
            ctl__errf(err, errlen, "backup.interval_s: %llu not in %u..%u", CTL__ULL(b->interval_s),
                      CTL_BACKUP_INTERVAL_S_MIN, CTL_BACKUP_INTERVAL_S_MAX);
            return CTL_ESTATE;
        }
        if (b->retention < 1 || b->retention > CTL_BACKUP_RETENTION_MAX) {
            ctl__errf(err, errlen, "backup.retention: %u not in 1..%u", b->retention,
                      CTL_BACKUP_RETENTION_MAX);
            return CTL_ESTATE;
        }
        if ((why = ctl_backup_destination_check(b->destination)) != NULL) {
            ctl__errf(err, errlen, "backup.destination: %s", why);
            return CTL_ESTATE;
        }
    } else if (b->interval_s || b->retention || b->destination[0] || b->running) {
        ctl__errf(err, errlen,
                  "backup: interval_s, retention, destination, running must be "
                  "empty without a plan");
        return CTL_ESTATE;
    }
    if ((b->run_id == 0) != (b->run_node == 0) || (b->running && b->run_id == 0) ||
        b->last_success_run > b->run_id || b->last_failure_run > b->run_id) {
        ctl__errf(err, errlen,
                  "backup: run ids: run_id %llu, run_node %llu, last_success_run "
                  "%llu, last_failure_run %llu disagree",
                  CTL__ULL(b->run_id), CTL__ULL(b->run_node), CTL__ULL(b->last_success_run),
                  CTL__ULL(b->last_failure_run));
        return CTL_ESTATE;
    }
    if (b->run_node != 0 && ctl_state_node(s, b->run_node) == NULL) {
        ctl__errf(err, errlen, "backup.run_node: node %llu is unknown", CTL__ULL(b->run_node));
        return CTL_ESTATE;
    }
    if (!ctl__utf8_ok(b->last_error)) {
        ctl__errf(err, errlen, "backup.last_error: not UTF-8 text");
        return CTL_ESTATE;
    }
    return CTL_OK;
}

json_t *ctl__backup_encode(const struct ctl_backup_plan *b)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "set", json_boolean(b->set));
    bad |= ctl__json_set(o, "interval_s", ctl__json_u64_new(b->interval_s));
    bad |= ctl__json_set(o, "destination", json_string(b->destination));
    bad |= ctl__json_set(o, "retention", json_integer(b->retention));
    bad |= ctl__json_set(o, "run_id", ctl__json_u64_new(b->run_id));
    bad |= ctl__json_set(o, "run_node", ctl__json_u64_new(b->run_node));
    bad |= ctl__json_set(o, "run_started_ms", ctl__json_u64_new(b->run_started_ms));
    bad |= ctl__json_set(o, "running", json_boolean(b->running));
    bad |= ctl__json_set(o, "last_success_run", ctl__json_u64_new(b->last_success_run));
    bad |= ctl__json_set(o, "last_success_ms", ctl__json_u64_new(b->last_success_ms));
    bad |= ctl__json_set(o, "last_success_bytes", ctl__json_u64_new(b->last_success_bytes));
    bad |= ctl__json_set(o, "last_failure_run", ctl__json_u64_new(b->last_failure_run));
    bad |= ctl__json_set(o, "last_failure_ms", ctl__json_u64_new(b->last_failure_ms));
    bad |= ctl__json_set(o, "last_error", json_string(b->last_error));
    return ctl__json_done(o, bad);
}

int ctl__backup_decode(const json_t *o, struct ctl_backup_plan *b, char *err, size_t errlen)
{
    static const char *const fields[] = {"set",
                                         "interval_s",
                                         "destination",
                                         "retention",
                                         "run_id",
                                         "run_node",
                                         "run_started_ms",
                                         "running",
                                         "last_success_run",
                                         "last_success_ms",
                                         "last_success_bytes",
                                         "last_failure_run",
                                         "last_failure_ms",
                                         "last_error"};
    const char *p = "backup";
    const uint64_t M = CTL_U64_JSON_MAX;
    memset(b, 0, sizeof(*b));
    if (!json_is_object(o)) {
        ctl__errf(err, errlen, "backup: expected an object");
        return CTL_EDECODE;
    }
    CTL__TRY(ctl__json_fields(o, p, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(ctl__json_bool(o, "set", p, &b->set, err, errlen));
    CTL__TRY(ctl__json_u64(o, "interval_s", p, 0, M, &b->interval_s, err, errlen));
    CTL__TRY(ctl__json_str(o, "destination", p, CTL_BACKUP_DESTINATION_MAX, b->destination, err,
                           errlen));
    CTL__TRY(ctl__json_u32(o, "retention", p, 0, UINT32_MAX, &b->retention, err, errlen));
    CTL__TRY(ctl__json_u64(o, "run_id", p, 0, M, &b->run_id, err, errlen));
    CTL__TRY(ctl__json_u64(o, "run_node", p, 0, M, &b->run_node, err, errlen));
    CTL__TRY(ctl__json_u64(o, "run_started_ms", p, 0, M, &b->run_started_ms, err, errlen));
    CTL__TRY(ctl__json_bool(o, "running", p, &b->running, err, errlen));
    CTL__TRY(ctl__json_u64(o, "last_success_run", p, 0, M, &b->last_success_run, err, errlen));
    CTL__TRY(ctl__json_u64(o, "last_success_ms", p, 0, M, &b->last_success_ms, err, errlen));
    CTL__TRY(ctl__json_u64(o, "last_success_bytes", p, 0, M, &b->last_success_bytes, err, errlen));
    CTL__TRY(ctl__json_u64(o, "last_failure_run", p, 0, M, &b->last_failure_run, err, errlen));
    CTL__TRY(ctl__json_u64(o, "last_failure_ms", p, 0, M, &b->last_failure_ms, err, errlen));
    CTL__TRY(ctl__json_str(o, "last_error", p, CTL_LAST_ERROR_MAX, b->last_error, err, errlen));
    return CTL_OK;
}

/* backup_plan_set {interval_s, destination, retention}. */
int ctl__op_backup_plan_set(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_backup_plan *b = &s->backup;
    uint64_t interval_s;
    uint32_t retention;
    char dest[CTL_BACKUP_DESTINATION_MAX + 1] = "";
    const char *why;
    CTL__READ(r, ctl__json_u64(cmd, "interval_s", "", CTL_BACKUP_INTERVAL_S_MIN,
                               CTL_BACKUP_INTERVAL_S_MAX, &interval_s, CTL__RS(r)));
    CTL__READ(r, ctl__json_u32(cmd, "retention", "", 1, CTL_BACKUP_RETENTION_MAX, &retention,
                               CTL__RS(r)));
    CTL__READ(r,
              ctl__json_str(cmd, "destination", "", CTL_BACKUP_DESTINATION_MAX, dest, CTL__RS(r)));
    if ((why = ctl_backup_destination_check(dest)) != NULL) {
        return CTL__REJECT(r, "destination: \"%.64s\" %s", dest, why);
    }
    if (b->set && b->interval_s == interval_s && b->retention == retention &&
        strcmp(b->destination, dest) == 0) {
        return CTL__NOOP(r, "the backup plan is already so");
    }
    b->set = true;
    b->interval_s = interval_s;
    b->retention = retention;
    memcpy(b->destination, dest, sizeof(dest));
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* backup_plan_delete {}: the run history stays, so run ids keep growing. */
int ctl__op_backup_plan_delete(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    (void)cmd;
    struct ctl_backup_plan *b = &s->backup;
    if (!b->set) {
        return CTL__NOOP(r, "there is no backup plan");
    }
    b->set = false;
    b->interval_s = 0;
    b->retention = 0;
    b->destination[0] = '\0';
    b->running = false;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* backup_run_start {run, node, now_ms}. */
int ctl__op_backup_run_start(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_backup_plan *b = &s->backup;
    uint64_t run, node, now_ms;
    CTL__READ(r, ctl__json_u64(cmd, "run", "", 1, CTL_U64_JSON_MAX, &run, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(cmd, "node", "", 1, CTL_U64_JSON_MAX, &node, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(cmd, "now_ms", "", 0, CTL_U64_JSON_MAX, &now_ms, CTL__RS(r)));
    if (!b->set) {
        return CTL__REJECT(r, "there is no backup plan (Admin.SetBackupPlan)");
    }
    if (run != b->run_id + 1) {
        return CTL__NOOP(r, "stale run: run %llu, the next run is %llu", CTL__ULL(run),
                         CTL__ULL(b->run_id + 1));
    }
    const struct ctl_node *n = ctl_state_node(s, node);
    if (n == NULL || n->join_state != CTL_JOIN_ACTIVE || !(n->roles & CTL_ROLE_DATA) ||
        n->status == CTL_STATUS_DOWN) {
        return CTL__REJECT(r, "node: %llu is not an active data node that is up", CTL__ULL(node));
    }
    uint64_t interval_ms = b->interval_s * 1000;
    if (b->run_id != 0 && now_ms < b->run_started_ms + interval_ms) {
        return CTL__NOOP(r, "run %llu is not due: run %llu started at %llu ms, interval %llu s",
                         CTL__ULL(run), CTL__ULL(b->run_id), CTL__ULL(b->run_started_ms),
                         CTL__ULL(b->interval_s));
    }
    if (b->running && now_ms < b->run_started_ms + 2 * interval_ms) {
        return CTL__NOOP(r, "run %llu is still running on node %llu", CTL__ULL(b->run_id),
                         CTL__ULL(b->run_node));
    }
    if (b->running) {
        b->last_failure_run = b->run_id;
        b->last_failure_ms = now_ms;
        ctl__errf(b->last_error, sizeof(b->last_error),
                  "run %llu on node %llu: no report within two intervals", CTL__ULL(b->run_id),
                  CTL__ULL(b->run_node));
    }
    b->run_id = run;
    b->run_node = node;
    b->run_started_ms = now_ms;
    b->running = true;
    r->outcome = CTL_OUTCOME_UPDATED;
    return CTL_OK;
}

/* backup_run_report {run, node, ok, bytes, error?, now_ms}. */
int ctl__op_backup_run_report(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_backup_plan *b = &s->backup;
    uint64_t run, node, bytes, now_ms;
    bool ok;
    char error[CTL_LAST_ERROR_MAX + 1] = "";
    CTL__READ(r, ctl__json_u64(cmd, "run", "", 1, CTL_U64_JSON_MAX, &run, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(cmd, "node", "", 1, CTL_U64_JSON_MAX, &node, CTL__RS(r)));
    CTL__READ(r, ctl__json_bool(cmd, "ok", "", &ok, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(cmd, "bytes", "", 0, CTL_U64_JSON_MAX, &bytes, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(cmd, "now_ms", "", 0, CTL_U64_JSON_MAX, &now_ms, CTL__RS(r)));
    if (json_object_get(cmd, "error") != NULL) {
        CTL__READ(r, ctl__json_str(cmd, "error", "", CTL_LAST_ERROR_MAX, error, CTL__RS(r)));
    }
    if (!b->running || run != b->run_id || node != b->run_node) {
        return CTL__NOOP(
            r, "stale run: run %llu on node %llu; the current run is %llu on node %llu (%s)",
            CTL__ULL(run), CTL__ULL(node), CTL__ULL(b->run_id), CTL__ULL(b->run_node),
            b->running ? "running" : "not running");
    }
    if (ok == (error[0] != '\0') || !ctl__utf8_ok(error)) {
        return CTL__REJECT(r,
                           "error: required (1..%u bytes of UTF-8) when ok is false, absent when "
                           "true",
                           CTL_LAST_ERROR_MAX);
    }
    b->running = false;
    if (ok) {
        b->last_success_run = run;
        b->last_success_ms = now_ms;
        b->last_success_bytes = bytes;
    } else {
        b->last_failure_run = run;
        b->last_failure_ms = now_ms;
        memcpy(b->last_error, error, sizeof(error));
    }
    r->outcome = CTL_OUTCOME_UPDATED;
    return CTL_OK;
}

/* ---- builders ---- */

int ctl_cmd_backup_plan_set(uint64_t interval_s, const char *destination, uint32_t retention,
                            uint64_t expected_revision, char **out)
{
    if (destination == NULL || !ctl__utf8_ok(destination) || interval_s > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("backup_plan_set");
    int bad = 0;
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "interval_s", ctl__json_u64_new(interval_s));
        bad |= ctl__json_set(cmd, "destination", json_string(destination));
        bad |= ctl__json_set(cmd, "retention", json_integer(retention));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_backup_plan_delete(uint64_t expected_revision, char **out)
{
    return ctl__cmd_finish(ctl__cmd_op_new("backup_plan_delete"), 0, expected_revision, out);
}

int ctl_cmd_backup_run_start(uint64_t run, uint64_t node, uint64_t now_ms, char **out)
{
    if (run > CTL_U64_JSON_MAX || node > CTL_U64_JSON_MAX || now_ms > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("backup_run_start");
    int bad = 0;
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "run", ctl__json_u64_new(run));
        bad |= ctl__json_set(cmd, "node", ctl__json_u64_new(node));
        bad |= ctl__json_set(cmd, "now_ms", ctl__json_u64_new(now_ms));
    }
    return ctl__cmd_finish(cmd, bad, 0, out);
}

int ctl_cmd_backup_run_report(uint64_t run, uint64_t node, bool ok, uint64_t bytes,
                              const char *error, uint64_t now_ms, char **out)
{
    if (run > CTL_U64_JSON_MAX || node > CTL_U64_JSON_MAX || bytes > CTL_U64_JSON_MAX ||
        now_ms > CTL_U64_JSON_MAX || (error != NULL && !ctl__utf8_ok(error))) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("backup_run_report");
    int bad = 0;
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "run", ctl__json_u64_new(run));
        bad |= ctl__json_set(cmd, "node", ctl__json_u64_new(node));
        bad |= ctl__json_set(cmd, "ok", json_boolean(ok));
        bad |= ctl__json_set(cmd, "bytes", ctl__json_u64_new(bytes));
        bad |= ctl__json_set(cmd, "now_ms", ctl__json_u64_new(now_ms));
        if (error != NULL && error[0] != '\0') {
            bad |= ctl__json_set(cmd, "error", json_string(error));
        }
    }
    return ctl__cmd_finish(cmd, bad, 0, out);
}
