/* slotctl_backup.c - slotctl backup save (Admin/Backup into a file), verify and inspect (offline).
 */
#include "slotctl_cmds.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"

/* What save has written so far. */
struct backup_save {
    FILE *f;
    const char *path;
    uint64_t bytes, records;
    uint32_t groups_done, groups_total;
    bool tty; /* stderr is a terminal: one redrawn progress line */
    int write_errno;
};

static void save_progress(struct backup_save *s, bool last)
{
    char bar[128], size[32];
    slotctl_progress_bar(s->groups_done, s->groups_total, false, bar, sizeof(bar));
    slotctl_bytes_text(s->bytes, size, sizeof(size));
    /* the bar's "match a / commit b" text is for logs; say groups here */
    char *tail = strstr(bar, "  match");
    if (tail)
        *tail = '\0';
    if (s->tty)
        fprintf(stderr, "\r%s  groups %" PRIu32 "/%" PRIu32 "  %s%s", bar, s->groups_done,
                s->groups_total, size, last ? "\n" : "");
    else
        fprintf(stderr, "backup: groups %" PRIu32 "/%" PRIu32 " done, %s\n", s->groups_done,
                s->groups_total, size);
}

static int save_record(void *arg, const uint8_t *record, size_t len, uint32_t groups_done,
                       uint32_t groups_total)
{
    struct backup_save *s = arg;
    if (fwrite(record, 1, len, s->f) != len) {
        s->write_errno = errno ? errno : EIO;
        return 1;
    }
    s->bytes += len;
    s->records++;
    bool moved = groups_done != s->groups_done || s->records == 1;
    s->groups_done = groups_done;
    s->groups_total = groups_total;
    if (moved || (s->tty && s->records % 64 == 0))
        save_progress(s, false);
    return 0;
}

/* The JSON answer of inspect, verify and save: the file's summary with "ok": true. */
static json_t *summary_json(const char *path, const struct backup_summary *sum)
{
    const struct backup_header *h = &sum->header;
    json_t *j = json_object(), *groups = json_array();
    json_object_set_new(j, "file", json_string(path));
    json_object_set_new(j, "format_version", json_integer(h->format_version));
    json_object_set_new(j, "cluster_id", json_string(h->cluster_id));
    json_object_set_new(j, "created_at_ms", json_integer((json_int_t)h->created_at_ms));
    json_object_set_new(j, "route_revision", json_integer((json_int_t)h->route_revision));
    json_object_set_new(j, "controller_applied_index",
                        json_integer((json_int_t)h->controller_applied_index));
    json_object_set_new(j, "controller_bytes", json_integer((json_int_t)sum->controller_bytes));
    json_object_set_new(j, "bytes", json_integer((json_int_t)sum->file_bytes));
    json_object_set_new(j, "records", json_integer(sum->records));
    json_object_set_new(j, "rows", json_integer((json_int_t)sum->rows));
    char crc[16];
    snprintf(crc, sizeof(crc), "0x%08" PRIx32, sum->file_crc);
    json_object_set_new(j, "file_crc", json_string(crc));
    for (uint32_t i = 0; i < sum->n_groups; i++) {
        const struct backup_group_summary *g = &sum->groups[i];
        json_t *o = json_object();
        json_object_set_new(o, "group", json_integer(g->group));
        json_object_set_new(o, "applied_index", json_integer((json_int_t)g->applied_index));
        json_object_set_new(o, "source_node", json_integer((json_int_t)g->source_node));
        json_object_set_new(o, "rows", json_integer((json_int_t)g->rows));
        json_object_set_new(o, "row_bytes", json_integer((json_int_t)g->row_bytes));
        json_object_set_new(o, "records", json_integer(g->records));
        json_array_append_new(groups, o);
    }
    json_object_set_new(j, "groups", groups);
    json_t *table = json_array();
    for (unsigned s = 0; s < BACKUP_HASH_SLOTS; s++)
        json_array_append_new(table, json_integer(h->hash_slot_table[s]));
    json_object_set_new(j, "hash_slot_table", table);
    json_object_set_new(j, "ok", json_true());
    return j;
}

static void groups_print(const struct backup_summary *sum)
{
    printf("%-6s %-14s %-6s %-10s %-12s\n", "GROUP", "APPLIED_INDEX", "NODE", "ROWS", "BYTES");
    for (uint32_t i = 0; i < sum->n_groups; i++) {
        const struct backup_group_summary *g = &sum->groups[i];
        char size[32];
        slotctl_bytes_text(g->row_bytes, size, sizeof(size));
        printf("%-6" PRIu32 " %-14" PRIu64 " %-6" PRIu64 " %-10" PRIu64 " %-12s\n", g->group,
               g->applied_index, g->source_node, g->rows, size);
    }
}

/* Reads path with every check; on failure reports the record and returns exit 5 (or 6: I/O). */
static int read_checked(const struct slotctl_args *a, const char *what, const char *path,
                        struct backup_summary *sum)
{
    char err[BACKUP_ERRMSG_MAX + 64], msg[BACKUP_ERRMSG_MAX + 256];
    int rc = backup_read_file(path, NULL, NULL, sum, err, sizeof(err));
    if (rc == BACKUP_OK)
        return SLOTCTL_EXIT_OK;
    snprintf(msg, sizeof(msg), "backup %s %s: %s", what, path, err);
    slotctl_error_report_text(a, rc == BACKUP_ECORRUPT ? SLOTD_CLIENT_EINVAL : SLOTD_CLIENT_ERPC,
                              msg, NULL);
    return rc == BACKUP_ECORRUPT ? SLOTCTL_EXIT_INVALID : SLOTCTL_EXIT_OTHER;
}

static void hash_slot_ranges_print(const struct backup_header *h)
{
    printf("hash-slot table:");
    unsigned first = 0;
    for (unsigned s = 1; s <= BACKUP_HASH_SLOTS; s++) {
        if (s < BACKUP_HASH_SLOTS && h->hash_slot_table[s] == h->hash_slot_table[first])
            continue;
        printf(" %u-%u:%" PRIu32, first, s - 1, h->hash_slot_table[first]);
        first = s;
    }
    printf("\n");
}

static int cmd_inspect(const struct slotctl_args *a, const char *path, bool verify_only)
{
    struct backup_summary *sum = malloc(sizeof(*sum));
    if (sum == NULL)
        return slotctl_error_report(a, SLOTD_CLIENT_ENOMEM, NULL);
    int code = read_checked(a, verify_only ? "verify" : "inspect", path, sum);
    if (code != SLOTCTL_EXIT_OK) {
        free(sum);
        return code;
    }
    if (a->json) {
        slotctl_json_print(summary_json(path, sum));
        free(sum);
        return SLOTCTL_EXIT_OK;
    }
    const struct backup_header *h = &sum->header;
    char size[32];
    slotctl_bytes_text(sum->file_bytes, size, sizeof(size));
    if (verify_only) {
        printf("%s: ok: %" PRIu32 " groups, %" PRIu64 " rows, %" PRIu32 " records, %s, file crc "
               "0x%08" PRIx32 "\n",
               path, sum->n_groups, sum->rows, sum->records, size, sum->file_crc);
        groups_print(sum);
        free(sum);
        return SLOTCTL_EXIT_OK;
    }
    time_t t = (time_t)(h->created_at_ms / 1000);
    struct tm tm;
    char when[64];
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("file:                     %s (%s, %" PRIu32 " records, crc 0x%08" PRIx32 ")\n", path,
           size, sum->records, sum->file_crc);
    printf("format version:           %" PRIu32 "\n", h->format_version);
    printf("cluster id:               %s\n", h->cluster_id);
    printf("created at:               %s (%" PRIu64 " ms)\n", when, h->created_at_ms);
    printf("route revision:           %" PRIu64 "\n", h->route_revision);
    printf("controller applied index: %" PRIu64 " (%" PRIu64 " bytes of state)\n",
           h->controller_applied_index, sum->controller_bytes);
    printf("rows:                     %" PRIu64 " in %" PRIu32 " groups\n", sum->rows,
           sum->n_groups);
    hash_slot_ranges_print(h);
    groups_print(sum);
    free(sum);
    return SLOTCTL_EXIT_OK;
}

/* Opens path.part for writing (refusing an existing path or part file). */
static FILE *save_open(const struct slotctl_args *a, const char *path, char *part, size_t partlen,
                       int *code)
{
    char msg[PATH_MAX + 128];
    snprintf(part, partlen, "%s.part", path);
    if (access(path, F_OK) == 0) {
        snprintf(msg, sizeof(msg), "backup save: %s exists; give a new file name", path);
        *code = slotctl_error_report_text(a, SLOTD_CLIENT_EINVAL, msg, NULL);
        return NULL;
    }
    int fd = open(part, O_WRONLY | O_CREAT | O_EXCL, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f == NULL) {
        snprintf(msg, sizeof(msg), "backup save: %s: %s", part, strerror(errno));
        if (fd >= 0)
            close(fd);
        *code = slotctl_error_report_text(a, SLOTD_CLIENT_EINVAL, msg, NULL);
        return NULL;
    }
    return f;
}

/* Flushes, syncs and closes s->f; 0 or errno. */
static int save_close(struct backup_save *s)
{
    int e = 0;
    if (fflush(s->f) != 0 || fsync(fileno(s->f)) != 0)
        e = errno;
    if (fclose(s->f) != 0 && e == 0)
        e = errno;
    s->f = NULL;
    return e;
}

static int cmd_save(struct slotd_client *c, const struct slotctl_args *a, const char *path)
{
    char part[PATH_MAX + 8], msg[PATH_MAX + 600];
    int code = SLOTCTL_EXIT_OK;
    struct backup_save s = {.path = path, .tty = isatty(STDERR_FILENO) == 1};
    s.f = save_open(a, path, part, sizeof(part), &code);
    if (s.f == NULL)
        return code;
    struct slotd_error *e = NULL;
    int rc = slotd_admin_backup(c, 0, save_record, &s, &e);
    int close_errno = save_close(&s);
    if (rc != SLOTD_CLIENT_OK || s.write_errno || close_errno) {
        if (s.tty && s.records)
            fprintf(stderr, "\n");
        unlink(part);
        if (s.write_errno || close_errno) {
            snprintf(msg, sizeof(msg), "backup save: %s: %s", part,
                     strerror(s.write_errno ? s.write_errno : close_errno));
            slotctl_error_report_text(a, SLOTD_CLIENT_ERPC, msg, NULL);
            code = SLOTCTL_EXIT_OTHER;
        } else {
            code = slotctl_error_report(a, rc, e);
        }
        slotd_error_destroy(e);
        return code;
    }
    slotd_error_destroy(e);
    if (s.tty)
        save_progress(&s, true);
    /* the file as written must read back whole before it takes its name */
    struct backup_summary *sum = malloc(sizeof(*sum));
    if (sum == NULL) {
        unlink(part);
        return slotctl_error_report(a, SLOTD_CLIENT_ENOMEM, NULL);
    }
    code = read_checked(a, "save", part, sum);
    if (code == SLOTCTL_EXIT_OK && rename(part, path) != 0) {
        snprintf(msg, sizeof(msg), "backup save: rename %s to %s: %s", part, path, strerror(errno));
        slotctl_error_report_text(a, SLOTD_CLIENT_ERPC, msg, NULL);
        code = SLOTCTL_EXIT_OTHER;
    }
    if (code != SLOTCTL_EXIT_OK) {
        unlink(part);
        free(sum);
        return code;
    }
    if (a->json) {
        slotctl_json_print(summary_json(path, sum));
    } else {
        char size[32];
        slotctl_bytes_text(sum->file_bytes, size, sizeof(size));
        printf("%s: %" PRIu32 " groups, %" PRIu64 " rows, %s, route revision %" PRIu64 "\n", path,
               sum->n_groups, sum->rows, size, sum->header.route_revision);
    }
    free(sum);
    return SLOTCTL_EXIT_OK;
}

/* backup plan set INTERVAL_S DIR RETENTION | delete (Admin.SetBackupPlan; the server checks
 * the values and names a bad field). */
static int plan_write(struct slotd_client *c, const struct slotctl_args *a, bool del)
{
    uint64_t interval_s = 0;
    unsigned long retention = 0;
    const char *dir = NULL;
    if (!del) {
        char *end1 = NULL, *end2 = NULL;
        errno = 0;
        interval_s = strtoull(a->pos[2], &end1, 10);
        retention = strtoul(a->pos[4], &end2, 10);
        if (errno != 0 || *a->pos[2] == '\0' || *end1 != '\0' || *a->pos[4] == '\0' ||
            *end2 != '\0' || retention > UINT32_MAX) {
            fprintf(stderr, "slotctl: backup plan set: INTERVAL_S and RETENTION must be numbers\n");
            return SLOTCTL_EXIT_USAGE;
        }
        dir = a->pos[3];
    }
    struct slotd_admin_command *cmd = slotd_admin_command_create(SLOTD_ADMIN_SET_BACKUP_PLAN);
    int built =
        cmd ? slotd_admin_command_set_backup_plan(cmd, interval_s, dir, (uint32_t)retention, del)
            : SLOTD_CLIENT_ENOMEM;
    if (cmd)
        slotd_admin_command_set_expected_revision(cmd, a->expected_revision);
    const char *what = del ? "backup plan delete" : "backup plan set";
    return slotctl_admin_apply(c, a, cmd, built, what, json_pack("{s:s}", "command", what));
}

/* backup plan show: the cluster state's "backup" (absent: no plan was ever set). */
static int plan_show(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_cluster_state *csp = NULL;
    struct slotd_error *err = NULL;
    int rc = slotd_client_cluster_state(c, 0, NULL, &csp, &err);
    if (rc != SLOTD_CLIENT_OK) {
        return slotctl_error_report_free(a, rc, err);
    }
    json_t *state = json_loadb(csp->state_json, csp->state_json_len, 0, NULL);
    json_t *plan = json_object_get(state, "backup");
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string("backup plan show"));
        json_object_set_new(j, "ok", json_true());
        json_object_set_new(j, "plan", plan ? json_incref(plan) : json_object());
        json_object_set_new(j, "revision", json_integer((json_int_t)csp->revision));
        slotctl_json_print(j);
    } else if (!json_is_true(json_object_get(plan, "set"))) {
        printf("no backup plan (revision %" PRIu64 ", from %s)\n", csp->revision, csp->source);
    } else {
        printf("every %" JSON_INTEGER_FORMAT " s into %s, keeping %" JSON_INTEGER_FORMAT " files\n",
               json_integer_value(json_object_get(plan, "interval_s")),
               json_string_value(json_object_get(plan, "destination")),
               json_integer_value(json_object_get(plan, "retention")));
        printf("run %" JSON_INTEGER_FORMAT " on node %" JSON_INTEGER_FORMAT " (%s)\n",
               json_integer_value(json_object_get(plan, "run_id")),
               json_integer_value(json_object_get(plan, "run_node")),
               json_is_true(json_object_get(plan, "running")) ? "running" : "finished");
        printf("last success: run %" JSON_INTEGER_FORMAT " at %" JSON_INTEGER_FORMAT
               " ms, %" JSON_INTEGER_FORMAT " bytes\n",
               json_integer_value(json_object_get(plan, "last_success_run")),
               json_integer_value(json_object_get(plan, "last_success_ms")),
               json_integer_value(json_object_get(plan, "last_success_bytes")));
        printf("last failure: run %" JSON_INTEGER_FORMAT " at %" JSON_INTEGER_FORMAT " ms: %s\n",
               json_integer_value(json_object_get(plan, "last_failure_run")),
               json_integer_value(json_object_get(plan, "last_failure_ms")),
               json_string_value(json_object_get(plan, "last_error")));
        printf("(revision %" PRIu64 ", from %s)\n", csp->revision, csp->source);
    }
    json_decref(state);
    slotd_cluster_state_destroy(csp);
    return SLOTCTL_EXIT_OK;
}

int slotctl_backup_run(struct slotd_client *c, const struct slotctl_args *a)
{
    const char *sub = a->pos[0], *path = a->pos[1];
    if (strcmp(sub, "plan") == 0 && strcmp(path, "show") == 0)
        return plan_show(c, a);
    if (strcmp(sub, "plan") == 0)
        return plan_write(c, a, strcmp(path, "delete") == 0);
    if (strcmp(sub, "save") == 0)
        return cmd_save(c, a, path);
    return cmd_inspect(a, path, strcmp(sub, "verify") == 0);
}
