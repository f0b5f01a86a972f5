/* slotctl_task.c - slotctl's task commands: move-replica, drain, promote, retry, migrate-slots,
 * transfer-leader --as-task, task status (tables, progress bars, --watch/--wait). */
#include "slotctl_cmds.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Fixed-width fields are cut on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define TASK_BAR_CELLS 12
/* A task made through one node may take a mirror's poll (~500 ms) to show up elsewhere:
 * --wait tolerates NOT_FOUND for a task it has not seen yet this long. */
#define TASK_NOT_FOUND_GRACE_MS 5000
#define TASK_LINE_LEN 768
#define TASK_ERROR_LEN 512 /* a call's error sentence, as libslotd writes it */

static int64_t task_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void task_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- text -------------------------------------------------------------------------------- */

void slotctl_bytes_text(uint64_t n, char *out, size_t len)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(out, len, "%" PRIu64 " B", n);
        return;
    }
    double v = (double)n / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, len, "%.1f %s", v, units[u]);
}

/* floor(100 * done / total), capped at 100, without overflowing 64 bits. */
static unsigned task_percent(uint64_t done, uint64_t total)
{
    if (total == 0)
        return 0;
    if (done >= total)
        return 100;
    return (unsigned)((long double)done * 100.0L / (long double)total);
}

void slotctl_progress_bar(uint64_t done, uint64_t total, bool bytes, char *out, size_t len)
{
    unsigned pct = task_percent(done, total);
    char cells[TASK_BAR_CELLS + 1];
    /* cells rounded to nearest, but the bar is full only at 100% */
    unsigned full = (pct * TASK_BAR_CELLS + 50) / 100;
    if (full == TASK_BAR_CELLS && pct < 100)
        full = TASK_BAR_CELLS - 1;
    for (unsigned i = 0; i < TASK_BAR_CELLS; i++)
        cells[i] = i < full ? '#' : '.';
    cells[TASK_BAR_CELLS] = '\0';
    if (bytes) {
        char a[32], b[32];
        slotctl_bytes_text(done, a, sizeof(a));
        slotctl_bytes_text(total, b, sizeof(b));
        snprintf(out, len, "[%s] %u%%  %s / %s", cells, pct, a, b);
    } else {
        snprintf(out, len, "[%s] %u%%  match %" PRIu64 " / commit %" PRIu64, cells, pct, done,
                 total);
    }
}

bool slotctl_task_progress(const struct slotd_task *t, bool any_phase, char *out, size_t len)
{
    bool catch_up = strcmp(t->phase, "catch_up") == 0;
    bool copy = strstr(t->phase, "copy") != NULL;
    out[0] = '\0';
    if (!any_phase && !catch_up && !copy)
        return false;
    bool sending = t->bytes_total > 0 && (t->bytes_sent < t->bytes_total || t->commit == 0);
    if (t->bytes_total > 0 && (copy || sending || (any_phase && t->commit == 0))) {
        slotctl_progress_bar(t->bytes_sent, t->bytes_total, true, out, len);
        return true;
    }
    if (t->commit > 0 && !copy) {
        slotctl_progress_bar(t->target_match, t->commit, false, out, len);
        return true;
    }
    return false;
}

void slotctl_slots_text(const uint32_t *slots, size_t n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < n && used < len;) {
        unsigned j = i;
        while (j + 1 < n && slots[j + 1] == slots[j] + 1)
            j++;
        const char *sep = i ? "," : "";
        if (j == i)
            used += (size_t)snprintf(out + used, len - used, "%s%u", sep, slots[i]);
        else
            used += (size_t)snprintf(out + used, len - used, "%s%u-%u", sep, slots[i], slots[j]);
        i = j + 1;
    }
    if (!out[0])
        snprintf(out, len, "-");
}

/* "-" for 0, else the number. */
static const char *task_id_text(uint64_t v, char *buf, size_t len)
{
    if (v == 0)
        return "-";
    snprintf(buf, len, "%" PRIu64, v);
    return buf;
}

/* The GROUP column: "3", "3->5" (hash slot migration), "-" (no group). */
static void task_group_text(const struct slotd_task *t, char *out, size_t len)
{
    if (t->to_group)
        snprintf(out, len, "%u->%u", t->group_id, t->to_group);
    else if (t->group_id)
        snprintf(out, len, "%u", t->group_id);
    else
        snprintf(out, len, "-");
}

/* The PROGRESS column: "3.1 MiB/5.3 MiB", "1520/2610" (match/commit) or "-". */
static void task_progress_short(const struct slotd_task *t, char *out, size_t len)
{
    if (t->bytes_total > 0) {
        char a[32], b[32];
        slotctl_bytes_text(t->bytes_sent, a, sizeof(a));
        slotctl_bytes_text(t->bytes_total, b, sizeof(b));
        snprintf(out, len, "%s/%s", a, b);
    } else if (t->commit > 0) {
        snprintf(out, len, "%" PRIu64 "/%" PRIu64, t->target_match, t->commit);
    } else {
        snprintf(out, len, "-");
    }
}

void slotctl_tasks_print(FILE *out, const struct slotd_task_list *l, bool active_only)
{
    size_t n = slotd_task_list_count(l);
    if (n == 0) {
        fprintf(out, "%s\n", active_only ? "no active tasks" : "no tasks");
        return;
    }
    fprintf(out, "%5s  %-26s  %-7s  %-15s  %7s  %6s  %6s  %6s  %-17s  %s\n", "ID", "KIND", "STATUS",
            "PHASE", "ATTEMPT", "GROUP", "SOURCE", "TARGET", "PROGRESS", "LAST_ERROR");
    for (size_t i = 0; i < n; i++) {
        const struct slotd_task *t = slotd_task_list_at(l, i);
        char group[32], src[24], dst[24], progress[48];
        task_group_text(t, group, sizeof(group));
        task_progress_short(t, progress, sizeof(progress));
        fprintf(out, "%5" PRIu64 "  %-26s  %-7s  %-15s  %7u  %6s  %6s  %6s  %-17s  %s\n",
                t->task_id, t->kind, t->status, t->phase[0] ? t->phase : "-", t->attempt, group,
                task_id_text(t->source_node, src, sizeof(src)),
                task_id_text(t->target_node, dst, sizeof(dst)), progress,
                t->last_error[0] ? t->last_error : "-");
    }
}

void slotctl_task_print(FILE *out, const struct slotd_task *t)
{
    char buf[TASK_LINE_LEN], a[24], b[24];
    fprintf(out, "task %" PRIu64 "  %s  %s\n", t->task_id, t->kind, t->status);
    fprintf(out, "  phase         %s (index %u)\n", t->phase[0] ? t->phase : "-", t->phase_index);
    fprintf(out, "  attempt       %u\n", t->attempt);
    task_group_text(t, buf, sizeof(buf));
    fprintf(out, "  group         %s\n", buf);
    fprintf(out, "  source node   %s\n", task_id_text(t->source_node, a, sizeof(a)));
    fprintf(out, "  target node   %s\n", task_id_text(t->target_node, b, sizeof(b)));
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < t->participant_count && used < sizeof(buf); i++)
        used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%" PRIu64, i ? "," : "",
                                 t->participants[i]);
    fprintf(out, "  participants  %s\n", buf[0] ? buf : "-");
    if (t->hash_slot_count || t->to_group) {
        slotctl_slots_text(t->hash_slots, t->hash_slot_count, buf, sizeof(buf));
        fprintf(out, "  hash slots    %s (%zu) to group %u\n", buf, t->hash_slot_count, t->to_group);
    }
    if (!slotctl_task_progress(t, true, buf, sizeof(buf)))
        snprintf(buf, sizeof(buf), "-");
    fprintf(out, "  progress      %s\n", buf);
    fprintf(out, "  last error    %s\n", t->last_error[0] ? t->last_error : "-");
    fprintf(out, "  config epoch  %" PRIu64 "\n", t->config_epoch);
    fprintf(out, "  created_ms    %" PRIu64 "  updated_ms %" PRIu64 "\n", t->created_ms,
            t->updated_ms);
    fprintf(out, "  revision      %" PRIu64 "\n", t->revision);
}

void slotctl_task_line(const struct slotd_task *t, char *out, size_t len)
{
    char bar[128];
    bool has_bar = slotctl_task_progress(t, false, bar, sizeof(bar));
    snprintf(out, len, "task %" PRIu64 " %s  %s  phase %s  attempt %u%s%s%s%s", t->task_id, t->kind,
             t->status, t->phase[0] ? t->phase : "-", t->attempt, has_bar ? "  " : "", bar,
             t->last_error[0] ? "  last error: " : "", t->last_error);
}

static json_t *json_u64s(const uint64_t *v, size_t n)
{
    json_t *arr = json_array();
    for (unsigned i = 0; i < n; i++)
        json_array_append_new(arr, json_integer((json_int_t)v[i]));
    return arr;
}

json_t *slotctl_task_json(const struct slotd_task *t)
{
    json_t *j = json_object();
    json_object_set_new(j, "task_id", json_integer((json_int_t)t->task_id));
    json_object_set_new(j, "kind", json_string(t->kind));
    json_object_set_new(j, "status", json_string(t->status));
    json_object_set_new(j, "phase", json_string(t->phase));
    json_object_set_new(j, "phase_index", json_integer(t->phase_index));
    json_object_set_new(j, "attempt", json_integer(t->attempt));
    json_object_set_new(j, "group_id", json_integer(t->group_id));
    json_object_set_new(j, "last_error", json_string(t->last_error));
    json_object_set_new(j, "source_node", json_integer((json_int_t)t->source_node));
    json_object_set_new(j, "target_node", json_integer((json_int_t)t->target_node));
    json_object_set_new(j, "participants", json_u64s(t->participants, t->participant_count));
    json_object_set_new(j, "config_epoch", json_integer((json_int_t)t->config_epoch));
    json_object_set_new(j, "bytes_sent", json_integer((json_int_t)t->bytes_sent));
    json_object_set_new(j, "bytes_total", json_integer((json_int_t)t->bytes_total));
    json_object_set_new(j, "target_match", json_integer((json_int_t)t->target_match));
    json_object_set_new(j, "commit", json_integer((json_int_t)t->commit));
    json_object_set_new(j, "created_ms", json_integer((json_int_t)t->created_ms));
    json_object_set_new(j, "updated_ms", json_integer((json_int_t)t->updated_ms));
    json_object_set_new(j, "revision", json_integer((json_int_t)t->revision));
    json_object_set_new(j, "to_group", json_integer(t->to_group));
    json_t *slots = json_array();
    for (size_t i = 0; i < t->hash_slot_count; i++)
        json_array_append_new(slots, json_integer(t->hash_slots[i]));
    json_object_set_new(j, "hash_slots", slots);
    return j;
}

/* ---- watching one task ------------------------------------------------------------------- */

/* What a watch ended with. */
struct task_watch {
    struct slotd_task_list *list; /* the answer last holds (owned; NULL until seen) */
    const struct slotd_task *last; /* valid when seen */
    bool seen;
    double waited_s;
    int code;                                               /* exit code */
    char message[TASK_ERROR_LEN + TASK_LINE_LEN]; /* failure or timeout sentence */
    char error[32]; /* JSON "error": "task failed", "timeout", ... */
};

/* Prints a changed task: a JSON event line, a redrawn line (tty) or a new line. */
static void task_watch_show(const struct slotctl_args *a, const struct slotd_task *t, bool tty,
                            char *prev, size_t prevlen)
{
    char line[TASK_LINE_LEN];
    slotctl_task_line(t, line, sizeof(line));
    if (strcmp(line, prev) == 0)
        return;
    snprintf(prev, prevlen, "%s", line);
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string(slotctl_cmd_name(a->cmd)));
        json_object_set_new(j, "event", json_string("task"));
        json_object_set_new(j, "task", slotctl_task_json(t));
        slotctl_json_print(j);
    } else if (tty) {
        printf("\r\033[K%s", line);
    } else {
        printf("%s\n", line);
    }
    fflush(stdout);
}

/* Whether a failed poll may be followed by another one. */
static bool task_poll_retriable(int rc, bool seen, int64_t elapsed_ms)
{
    if (rc == SLOTD_CLIENT_EUNAVAILABLE || rc == SLOTD_CLIENT_ETIMEOUT ||
        rc == SLOTD_CLIENT_EEXHAUSTED)
        return true;
    return rc == SLOTD_CLIENT_ENOTFOUND && !seen && elapsed_ms < TASK_NOT_FOUND_GRACE_MS;
}

/* The outcome of a watch that saw the task finish or ran out of time (w->last, w->seen). */
static void task_watch_finish(uint64_t id, int timeout_s, const char *last_err,
                              struct task_watch *w)
{
    const struct slotd_task *t = w->last;
    if (w->seen && strcmp(t->status, "done") == 0) {
        w->code = SLOTCTL_EXIT_OK;
        snprintf(w->message, sizeof(w->message), "task %" PRIu64 " done after %.1f s", id,
                 w->waited_s);
    } else if (w->seen && strcmp(t->status, "failed") == 0) {
        w->code = SLOTCTL_EXIT_TASK_FAILED;
        snprintf(w->error, sizeof(w->error), "task failed");
        snprintf(w->message, sizeof(w->message),
                 "task %" PRIu64 " (%s) failed in phase %s, attempt %u: %s; fix the cause and "
                 "run `slotctl retry --task %" PRIu64 "`",
                 id, t->kind, t->phase[0] ? t->phase : "-", t->attempt,
                 t->last_error[0] ? t->last_error : "(no error recorded)", id);
    } else {
        w->code = SLOTCTL_EXIT_WAIT_TIMEOUT;
        snprintf(w->error, sizeof(w->error), "timeout");
        if (w->seen)
            snprintf(w->message, sizeof(w->message),
                     "task %" PRIu64 " not finished after %d s: %s, phase %s, attempt %u%s%s%s%s",
                     id, timeout_s, t->status, t->phase[0] ? t->phase : "-", t->attempt,
                     t->last_error[0] ? "; last error: " : "", t->last_error,
                     last_err[0] ? "; last poll: " : "", last_err);
        else
            snprintf(w->message, sizeof(w->message), "task %" PRIu64 " not seen within %d s%s%s",
                     id, timeout_s, last_err[0] ? "; last poll: " : "", last_err);
    }
}

/* Polls TaskStatus(id) every interval_ms until the task is done or failed or timeout_s pass;
 * prints each change. An answer read at a controller revision below min_revision (a mirror that
 * has not seen the command yet, e.g. a retry of a failed task) counts as not seen. Fills w (code:
 * 0, SLOTCTL_EXIT_TASK_FAILED, SLOTCTL_EXIT_WAIT_TIMEOUT or the code of a failed poll, which is
 * already reported). */
static void task_watch_run(struct slotd_client *c, const struct slotctl_args *a, uint64_t id,
                           uint64_t min_revision, int timeout_s, int interval_ms,
                           struct task_watch *w)
{
    memset(w, 0, sizeof(*w));
    bool tty = !a->json && isatty(STDOUT_FILENO);
    char prev[TASK_LINE_LEN] = "", last_err[TASK_ERROR_LEN] = "";
    int64_t start = task_mono_ms(), end = start + (int64_t)timeout_s * 1000;
    for (;;) { /* bounded by timeout_s: every pass sleeps or ends */
        struct slotd_task_list *ts = NULL;
        struct slotd_error *err = NULL;
        int rc = slotd_client_task_status(c, id, false, &ts, &err);
        int64_t now = task_mono_ms();
        w->waited_s = (double)(now - start) / 1000.0;
        const struct slotd_task *t = rc == SLOTD_CLIENT_OK ? slotd_task_list_at(ts, 0) : NULL;
        const char *why = err ? slotd_error_message(err) : slotd_client_strerror(rc);
        if (t && t->revision < min_revision) {
            snprintf(last_err, sizeof(last_err),
                     "%s answered at revision %" PRIu64 ", before the command (revision %" PRIu64
                     ")",
                     slotd_task_list_source(ts), t->revision, min_revision);
        } else if (t) {
            slotd_task_list_destroy(w->list);
            w->list = ts;
            ts = NULL; /* kept: w->last points into it */
            w->last = t;
            w->seen = true;
            last_err[0] = '\0';
            task_watch_show(a, w->last, tty, prev, sizeof(prev));
        } else if (rc != SLOTD_CLIENT_OK && !task_poll_retriable(rc, w->seen, now - start)) {
            if (tty && prev[0])
                printf("\n");
            w->code = slotctl_error_report(a, rc, err);
            snprintf(w->error, sizeof(w->error), "%s", slotd_client_strerror(rc));
            snprintf(w->message, sizeof(w->message), "%s", why);
            slotd_error_destroy(err);
            return;
        } else if (rc != SLOTD_CLIENT_OK) {
            snprintf(last_err, sizeof(last_err), "%s", why);
        }
        slotd_task_list_destroy(ts);
        slotd_error_destroy(err);
        bool finished = w->seen && slotd_task_finished(w->last);
        if (finished || now >= end)
            break;
        int64_t left = end - now;
        task_sleep_ms(left < interval_ms ? left : interval_ms);
    }
    if (tty && prev[0])
        printf("\n");
    task_watch_finish(id, timeout_s, last_err, w);
}
/* Prints a finished watch: the final JSON object gets task, waited_s, exit_code (and error,
 * message); text: the sentence on stdout (done) or stderr. */
static void task_watch_report(const struct slotctl_args *a, const struct task_watch *w, json_t *j)
{
    if (a->json) {
        json_object_set_new(j, "ok", json_boolean(w->code == SLOTCTL_EXIT_OK));
        json_object_set_new(j, "task", w->seen ? slotctl_task_json(w->last) : json_null());
        json_object_set_new(j, "waited_s", json_real(w->waited_s));
        if (w->code != SLOTCTL_EXIT_OK) {
            json_object_set_new(j, "error", json_string(w->error));
            json_object_set_new(j, "message", json_string(w->message));
        }
        json_object_set_new(j, "exit_code", json_integer(w->code));
        slotctl_json_print(j);
    } else {
        json_decref(j);
    }
    if (w->code == SLOTCTL_EXIT_OK && !a->json)
        printf("%s\n", w->message);
    else if (w->code == SLOTCTL_EXIT_TASK_FAILED || w->code == SLOTCTL_EXIT_WAIT_TIMEOUT)
        fprintf(stderr, "slotctl %s: %s\n", slotctl_cmd_name(a->cmd), w->message);
}

/* Reports a finished watch (task_watch_report) unless a failed poll already was, frees what w
 * holds and returns its exit code; j: ownership transfers. */
static int task_watch_end(const struct slotctl_args *a, struct task_watch *w, json_t *j)
{
    if (w->code != SLOTCTL_EXIT_OK && w->code != SLOTCTL_EXIT_TASK_FAILED &&
        w->code != SLOTCTL_EXIT_WAIT_TIMEOUT)
        json_decref(j); /* a failed poll: already reported */
    else
        task_watch_report(a, w, j);
    slotd_task_list_destroy(w->list);
    return w->code;
}

/* ---- task commands ----------------------------------------------------------------------- */

/* The admin command of a task-making slotctl command (NULL when out of memory), and its
 * description for the output. */
static struct slotd_admin_command *task_cmd_make(const struct slotctl_args *a, char *what,
                                                 size_t len)
{
    static const int kinds[] = {
        [SLOTCTL_CMD_MOVE_REPLICA] = SLOTD_ADMIN_MOVE_REPLICA,
        [SLOTCTL_CMD_TRANSFER_LEADER] = SLOTD_ADMIN_TRANSFER_LEADER,
        [SLOTCTL_CMD_DRAIN] = SLOTD_ADMIN_DRAIN_NODE,
        [SLOTCTL_CMD_PROMOTE] = SLOTD_ADMIN_PROMOTE_CONTROLLER_VOTER,
        [SLOTCTL_CMD_RETRY] = SLOTD_ADMIN_RETRY_TASK,
        [SLOTCTL_CMD_ABORT] = SLOTD_ADMIN_ABORT_TASK,
        [SLOTCTL_CMD_MIGRATE_SLOTS] = SLOTD_ADMIN_MIGRATE_HASH_SLOTS,
    };
    struct slotd_admin_command *w = slotd_admin_command_create(kinds[a->cmd]);
    if (!w)
        return NULL;
    slotd_admin_command_set_expected_revision(w, a->expected_revision);
    char slots[1024];
    switch (a->cmd) {
    case SLOTCTL_CMD_MOVE_REPLICA:
        slotd_admin_command_set_group_id(w, a->group_id);
        slotd_admin_command_set_from_node(w, a->from_node);
        slotd_admin_command_set_to_node(w, a->to_node);
        snprintf(what, len, "move group %u's replica from node %" PRIu64 " to node %" PRIu64,
                 a->group_id, a->from_node, a->to_node);
        break;
    case SLOTCTL_CMD_TRANSFER_LEADER:
        slotd_admin_command_set_group_id(w, a->group_id);
        slotd_admin_command_set_to_node(w, a->to_node);
        snprintf(what, len, "transfer group %u's leadership (preferred leader node %" PRIu64 ")",
                 a->group_id, a->to_node);
        break;
    case SLOTCTL_CMD_DRAIN:
        slotd_admin_command_set_node_id(w, a->node_id);
        snprintf(what, len, "drain node %" PRIu64, a->node_id);
        break;
    case SLOTCTL_CMD_PROMOTE:
        slotd_admin_command_set_node_id(w, a->node_id);
        snprintf(what, len, "promote node %" PRIu64 " to controller voter", a->node_id);
        break;
    case SLOTCTL_CMD_RETRY:
    case SLOTCTL_CMD_ABORT:
        slotd_admin_command_set_task_id(w, a->task_id);
        snprintf(what, len, "%s task %" PRIu64, a->cmd == SLOTCTL_CMD_RETRY ? "retry" : "abort",
                 a->task_id);
        break;
    default: /* SLOTCTL_CMD_MIGRATE_SLOTS */
        slotd_admin_command_set_to_group(w, a->to_group);
        if (slotd_admin_command_set_hash_slots(w, a->hash_slots, a->hash_slot_count) !=
            SLOTD_CLIENT_OK) { /* the parser keeps the list within 256 */
            slotd_admin_command_destroy(w);
            return NULL;
        }
        slotctl_slots_text(a->hash_slots, a->hash_slot_count, slots, sizeof(slots));
        snprintf(what, len, "migrate %u hash slot%s (%s) to group %u", a->hash_slot_count,
                 a->hash_slot_count == 1 ? "" : "s", slots, a->to_group);
        break;
    }
    return w;
}

/* migrate-slots refused because the cluster state's hash_slot_migration feature is off: make
 * sure the message says how to turn it on. */
static int task_cmd_fail(const struct slotctl_args *a, int rc, const struct slotd_error *e)
{
    const char *msg = e ? slotd_error_message(e) : slotd_client_strerror(rc);
    if (a->cmd != SLOTCTL_CMD_MIGRATE_SLOTS || rc != SLOTD_CLIENT_EPRECONDITION ||
        !strstr(msg, "hash-slot migration is off"))
        return slotctl_error_report(a, rc, e);
    char text[TASK_ERROR_LEN + 128];
    snprintf(text, sizeof(text),
             "%s; turn it on for the whole cluster: slotctl feature set hash_slot_migration on",
             msg);
    return slotctl_error_report_text(a, rc, text, e);
}

int slotctl_task_cmd_run(struct slotd_client *c, const struct slotctl_args *a)
{
    char what[1200];
    struct slotd_admin_command *cmd = task_cmd_make(a, what, sizeof(what));
    struct slotd_admin_result *rp = NULL;
    struct slotd_error *err = NULL;
    int rc = cmd ? slotd_client_admin_command(c, cmd, &rp, &err) : SLOTD_CLIENT_ENOMEM;
    slotd_admin_command_destroy(cmd);
    if (rc != SLOTD_CLIENT_OK) {
        int code = task_cmd_fail(a, rc, err);
        slotd_error_destroy(err);
        return code;
    }
    const struct slotd_admin_result *r = rp;
    uint64_t id = r->task_id ? r->task_id
                  : a->cmd == SLOTCTL_CMD_RETRY || a->cmd == SLOTCTL_CMD_ABORT ? a->task_id
                                                                               : 0;
    uint64_t revision = r->revision;
    json_t *j = slotctl_admin_result_json(a, r);
    json_object_set_new(j, "task_id", json_integer((json_int_t)id));
    if (!a->json) {
        char line[1300];
        snprintf(line, sizeof(line), "task %" PRIu64 ": %s", id, what);
        slotctl_admin_result_print(r, id ? line : what);
    }
    slotd_admin_result_destroy(rp);
    if (a->wait_s == 0 || id == 0) {
        if (a->json)
            slotctl_json_print(j);
        else
            json_decref(j);
        return SLOTCTL_EXIT_OK;
    }
    fflush(stdout);
    struct task_watch tw;
    task_watch_run(c, a, id, revision, a->wait_s, SLOTCTL_INTERVAL_MS_DEFAULT, &tw);
    return task_watch_end(a, &tw, j);
}

/* ---- task status --------------------------------------------------------------------------- */

int slotctl_task_status_run(struct slotd_client *c, const struct slotctl_args *a)
{
    if (a->watch) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string(slotctl_cmd_name(a->cmd)));
        json_object_set_new(j, "task_id", json_integer((json_int_t)a->task_id));
        struct task_watch tw;
        task_watch_run(c, a, a->task_id, 0,
                       a->timeout_s ? a->timeout_s : SLOTCTL_WATCH_TIMEOUT_S_DEFAULT,
                       a->interval_ms ? a->interval_ms : SLOTCTL_INTERVAL_MS_DEFAULT, &tw);
        return task_watch_end(a, &tw, j);
    }
    struct slotd_task_list *ts = NULL;
    struct slotd_error *err = NULL;
    int rc = slotd_client_task_status(c, a->task_id, a->active_only, &ts, &err);
    if (rc != SLOTD_CLIENT_OK) {
        return slotctl_error_report_free(a, rc, err);
    }
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string(slotctl_cmd_name(a->cmd)));
        json_object_set_new(j, "ok", json_true());
        json_object_set_new(j, "revision", json_integer((json_int_t)slotd_task_list_revision(ts)));
        json_object_set_new(j, "served_by", json_string(slotd_task_list_source(ts)));
        if (a->task_id) {
            json_object_set_new(j, "task", slotctl_task_json(slotd_task_list_at(ts, 0)));
        } else {
            json_t *arr = json_array();
            for (size_t i = 0; i < slotd_task_list_count(ts); i++)
                json_array_append_new(arr, slotctl_task_json(slotd_task_list_at(ts, i)));
            json_object_set_new(j, "tasks", arr);
        }
        slotctl_json_print(j);
    } else if (a->task_id) {
        slotctl_task_print(stdout, slotd_task_list_at(ts, 0));
    } else {
        slotctl_tasks_print(stdout, ts, a->active_only);
    }
    slotd_task_list_destroy(ts);
    return SLOTCTL_EXIT_OK;
}
