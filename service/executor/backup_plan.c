/* backup_plan.c - the backup plan's runs (loop thread, every poll): the controller leader starts
 * each due run on a node hosting every slot group; that node writes the file on a thread of its
 * own, keeps the newest `retention` files and reports the result to the controller. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "service/backup/capture.h"
#include "service/backup/remote.h"
#include "service/controller/controller.h"
#include "service/executor/executor_internal.h"

#define BACKUP_PLAN_EVERY_MS 1000
#define BACKUP_FILE_PREFIX "slotd-backup-"
#define BACKUP_FILE_SUFFIX ".bak"
#define BACKUP_PRUNE_SCAN_MAX 4096 /* directory entries a prune looks at */

/* One run executed on this node: owned by the loop, the thread writes only the result fields
 * before it sets done. */
struct exec_backup_run {
    struct runtime *rt; /* borrowed: what the capture reads through (thread-safe parts only) */
    pthread_t thread;
    uint64_t run;
    uint32_t retention;
    char dest[CTL_BACKUP_DESTINATION_MAX + 1];
    _Atomic bool done, stop;
    int rc; /* thread: BACKUP_OK or a BACKUP_E* code */
    uint64_t bytes;
    char err[CTL_LAST_ERROR_MAX + 1];
};

static int out_fd(void *arg, const void *buf, size_t len)
{
    int fd = *(int *)arg;
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static bool exec_hosts(void *arg, uint32_t group)
{
    struct exec_backup_run *e = arg;
    return runtime_hosts_group(e->rt, group);
}

static bool exec_stopped(void *arg)
{
    struct exec_backup_run *e = arg;
    return atomic_load(&e->stop);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Deletes the oldest backup files of dest beyond retention (names sort by run id). */
static void prune(const char *dest, uint32_t retention)
{
    DIR *d = opendir(dest);
    if (d == NULL)
        return;
    char **names = calloc(BACKUP_PRUNE_SCAN_MAX, sizeof(*names));
    size_t n = 0, plen = strlen(BACKUP_FILE_PREFIX), slen = strlen(BACKUP_FILE_SUFFIX);
    struct dirent *de;
    while (names != NULL && n < BACKUP_PRUNE_SCAN_MAX && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len == plen + 20 + slen && strncmp(de->d_name, BACKUP_FILE_PREFIX, plen) == 0 &&
            strcmp(de->d_name + len - slen, BACKUP_FILE_SUFFIX) == 0 &&
            (names[n] = strdup(de->d_name)) != NULL)
            n++;
    }
    closedir(d);
    if (names == NULL)
        return;
    qsort(names, n, sizeof(*names), name_cmp);
    char path[CTL_BACKUP_DESTINATION_MAX + 64];
    for (size_t i = 0; i < n; i++) {
        if (i + retention < n) {
            snprintf(path, sizeof(path), "%s/%s", dest, names[i]);
            if (unlink(path) != 0)
                EXEC_LOG("warn", "msg=\"backup plan: cannot delete an old file\" path=\"%s\"",
                         path);
        }
        free(names[i]);
    }
    free(names);
}

/* Writes FILE.part, fsyncs it, renames it to FILE and fsyncs the directory. */
static int write_file(struct exec_backup_run *e, const char *path, const char *part)
{
    int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(e->err, sizeof(e->err), "open %.160s: %.64s", part, strerror(errno));
        return BACKUP_EIO;
    }
    struct backup_writer *w = NULL;
    struct backup_capture_result res = {0};
    char why[BACKUP_ERRMSG_MAX] = "";
    int rc = backup_writer_new(out_fd, &fd, &w);
    if (rc == BACKUP_OK) {
        struct backup_capture_source src = {.store = engine_store(e->rt),
                                            .node_id = engine_options(e->rt)->node_id,
                                            .hosts_group = exec_hosts,
                                            .hosts_arg = e,
                                            .cancelled = exec_stopped,
                                            .cancelled_arg = e};
        struct backup_remote remote = {.transport = engine_transport(e->rt),
                                       .routes = engine_routes(e->rt)};
        backup_remote_attach(&remote, &src); /* groups with no replica here: from another node */
        rc = backup_capture_run(&src, w, &res, why, sizeof(why));
        backup_writer_free(w);
        snprintf(e->err, sizeof(e->err), "capture: %.240s", why);
    }
    if (rc == BACKUP_OK && fsync(fd) != 0) {
        snprintf(e->err, sizeof(e->err), "fsync %.160s: %.64s", part, strerror(errno));
        rc = BACKUP_EIO;
    }
    close(fd);
    if (rc == BACKUP_OK && rename(part, path) != 0) {
        snprintf(e->err, sizeof(e->err), "rename %.160s: %.64s", part, strerror(errno));
        rc = BACKUP_EIO;
    }
    if (rc != BACKUP_OK) {
        unlink(part);
        return rc;
    }
    int dfd = open(e->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    e->bytes = res.bytes;
    e->err[0] = '\0';
    return BACKUP_OK;
}

static void *exec_main(void *arg)
{
    struct exec_backup_run *e = arg;
    char path[CTL_BACKUP_DESTINATION_MAX + 64], part[CTL_BACKUP_DESTINATION_MAX + 72];
    snprintf(path, sizeof(path), "%s/" BACKUP_FILE_PREFIX "%020" PRIu64 BACKUP_FILE_SUFFIX, e->dest,
             e->run);
    snprintf(part, sizeof(part), "%s.part", path);
    if (mkdir(e->dest, 0700) != 0 && errno != EEXIST) {
        snprintf(e->err, sizeof(e->err), "mkdir %.160s: %.64s", e->dest, strerror(errno));
        e->rc = BACKUP_EIO;
    } else {
        e->rc = write_file(e, path, part);
    }
    if (e->rc == BACKUP_OK)
        prune(e->dest, e->retention);
    EXEC_LOG(e->rc == BACKUP_OK ? "info" : "warn",
             "msg=\"backup plan: run %s\" run=%" PRIu64 " path=\"%s\" bytes=%" PRIu64
             " error=\"%s\"",
             e->rc == BACKUP_OK ? "done" : "failed", e->run, path, e->bytes, e->err);
    atomic_store(&e->done, true);
    return NULL;
}

/* The node a run goes to: the lowest-id active data node that is not down (its capture reads
 * the groups it has no replica of from other nodes); 0 when there is none. */
static uint64_t pick_node(const struct ctl_state *s)
{
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const struct ctl_node *n = &s->nodes[i];
        if (n->join_state == CTL_JOIN_ACTIVE && (n->roles & CTL_ROLE_DATA) &&
            n->status != CTL_STATUS_DOWN)
            return n->id;
    }
    return 0;
}

/* Controller leader: proposes the next run when it is due. */
static void start_due_run(struct executor *ex, const struct ctl_state *s)
{
    const struct ctl_backup_plan *b = &s->backup;
    uint64_t wall = engine_wall_ms(), interval_ms = b->interval_s * 1000;
    if (!b->set || (b->run_id != 0 && wall < b->run_started_ms + interval_ms) ||
        (b->running && wall < b->run_started_ms + 2 * interval_ms))
        return;
    uint64_t node = pick_node(s);
    if (node == 0) {
        if (ex->backup_warned_run == b->run_id + 1)
            return; /* said once per run: this step comes back every second */
        ex->backup_warned_run = b->run_id + 1;
        EXEC_LOG("warn",
                 "msg=\"backup plan: no active data node is up; run %" PRIu64 " not started\"",
                 b->run_id + 1);
        return;
    }
    char *cmd = NULL;
    if (ctl_cmd_backup_run_start(b->run_id + 1, node, wall, &cmd) == CTL_OK)
        engine_ctl_submit(ex->rt, cmd, "backup_run_start");
}

/* This node: starts the run the state gives it, and reports a finished one. */
static void execute_run(struct executor *ex, const struct ctl_state *s)
{
    struct exec_backup_run *e = ex->backup_run;
    if (e != NULL && atomic_load(&e->done)) {
        pthread_join(e->thread, NULL);
        char *cmd = NULL;
        if (ctl_cmd_backup_run_report(e->run, ex->opts->node_id, e->rc == BACKUP_OK, e->bytes,
                                      e->rc == BACKUP_OK ? NULL : e->err, engine_wall_ms(),
                                      &cmd) == CTL_OK)
            engine_ctl_submit(ex->rt, cmd, "backup_run_report");
        ex->backup_run = NULL;
        free(e);
        return;
    }
    const struct ctl_backup_plan *b = &s->backup;
    if (e != NULL || !b->running || b->run_node != ex->opts->node_id ||
        b->run_id <= ex->backup_run_taken)
        return;
    ex->backup_run_taken = b->run_id;
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return; /* the run is replaced after two intervals */
    e->rt = ex->rt;
    e->run = b->run_id;
    e->retention = b->retention;
    memcpy(e->dest, b->destination, sizeof(e->dest));
    if (pthread_create(&e->thread, NULL, exec_main, e) != 0) {
        free(e);
        return;
    }
    ex->backup_run = e;
}

void executor__backup_step(struct executor *ex)
{
    int64_t now = engine_now_ms();
    const struct ctl_state *s = engine_ctl_state(ex->rt);
    if (s == NULL || now < ex->backup_next_ms)
        return;
    ex->backup_next_ms = now + BACKUP_PLAN_EVERY_MS;
    if (engine_ctl_leading(ex->rt))
        start_due_run(ex, s);
    execute_run(ex, s);
}

void executor__backup_stop(struct executor *ex)
{
    struct exec_backup_run *e = ex->backup_run;
    if (e == NULL)
        return;
    atomic_store(&e->stop, true);
    pthread_join(e->thread, NULL);
    ex->backup_run = NULL;
    free(e);
}
