/* backup.c - slotd.v1.Admin/Backup: admin-checked; one capture thread streams the backup file's
 * records. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/backup/capture.h"
#include "service/log/log.h"
#include "service/node/api.h"
#include "service/node/authz.h"
#include "slotd/v1/admin.pb-c.h"

#define BACKUP_METHOD "/slotd.v1.Admin/Backup"
/* Bytes queued on the stream at most (records are at most 2 MiB + 16): the capture waits below it.
 */
#define BACKUP_STREAM_QUEUE_BYTES ((size_t)8 << 20)
/* A client that reads nothing for this long ends the backup (the capture pins a snapshot). */
#define BACKUP_STALL_MS 60000u
#define BACKUP_PACE_SLEEP_US 1000u

/* The one backup a node runs at a time. mu guards running and joinable. */
struct node_backup {
    pthread_mutex_t mu;
    bool running;  /* a capture thread is working */
    bool joinable; /* thread was started and not joined yet */
    pthread_t thread;
    /* the running job (owned by the thread while running) */
    struct node_api *api;
    struct rpc_stream *st;
    atomic_bool cancelled;
    bool stalled; /* the client read nothing for BACKUP_STALL_MS (capture thread only) */
    uint32_t groups_done, groups_total;
};

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The writer's output: one BackupChunk per record, paced on the stream's queue. */
static int send_record(void *arg, const void *buf, size_t len)
{
    struct node_backup *b = arg;
    uint64_t since = mono_ms();
    while (rpc_stream_queued_bytes(b->st) + len > BACKUP_STREAM_QUEUE_BYTES) {
        if (atomic_load(&b->cancelled))
            return 1;
        if (mono_ms() - since > BACKUP_STALL_MS) {
            b->stalled = true;
            return 1;
        }
        struct timespec ts = {0, BACKUP_PACE_SLEEP_US * 1000};
        nanosleep(&ts, NULL);
    }
    Slotd__V1__BackupChunk m = SLOTD__V1__BACKUP_CHUNK__INIT;
    m.record.data = (uint8_t *)buf;
    m.record.len = len;
    m.groups_done = b->groups_done;
    m.groups_total = b->groups_total;
    return rpc_stream_send(b->st, &m.base) == 0 ? 0 : 1;
}

static bool hosts_group(void *arg, uint32_t group)
{
    struct node_backup *b = arg;
    return runtime_hosts_group(b->api->rt, group);
}

static void on_progress(void *arg, uint32_t done, uint32_t total)
{
    struct node_backup *b = arg;
    b->groups_done = done;
    b->groups_total = total;
}

static bool is_cancelled(void *arg)
{
    struct node_backup *b = arg;
    return atomic_load(&b->cancelled);
}

static void on_stream_close(void *arg)
{
    struct node_backup *b = arg;
    atomic_store(&b->cancelled, true);
}

static void finish_job(struct node_backup *b, int rc, const char *why)
{
    struct slotd_error err;
    const struct slotd_error *e = NULL;
    if (rc != BACKUP_OK) {
        int code = rc == BACKUP_EPRECONDITION                  ? SLOTD_EPRECONDITION
                   : rc == BACKUP_EIO || rc == BACKUP_ECORRUPT ? SLOTD_ESTORAGE
                   : rc == BACKUP_ESTOP                        ? SLOTD_ESHUTTING_DOWN
                                                               : SLOTD_EINTERNAL;
        if (b->stalled)
            slotd_error_set(&err, code,
                            "backup: the client read nothing for %u ms with %zu bytes queued",
                            BACKUP_STALL_MS, BACKUP_STREAM_QUEUE_BYTES);
        else
            slotd_error_set(&err, code, "backup: %s", why);
        e = &err;
    }
    struct rpc_stream *st = b->st;
    pthread_mutex_lock(&b->mu);
    b->running = false;
    b->st = NULL;
    pthread_mutex_unlock(&b->mu);
    rpc_stream_finish(st, e);
}

/* Counts the run; a successful one sets the last-success time and size. */
static void count_run(struct node_api *api, int rc, uint64_t bytes)
{
    metrics_counter_add(api->backup_runs[rc == BACKUP_OK ? 0 : 1], 1);
    if (rc != BACKUP_OK)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    metrics_gauge_set(api->backup_last_success_s, (int64_t)ts.tv_sec);
    metrics_gauge_set(api->backup_last_bytes, (int64_t)bytes);
}

int node_backup_metrics_register(struct node_api *api, struct metrics_registry *m)
{
    const char *labels[] = {"result"};
    struct metrics_family *runs, *last_s, *last_bytes;
    if (m == NULL)
        return METRICS_OK;
    int rc = metrics_counter_family_new(m, "slotd_backup_runs_total",
                                        "Admin.Backup runs this node served, by result: ok (the "
                                        "whole file was streamed) or failed.",
                                        1, labels, &runs);
    if (rc == METRICS_OK)
        rc = metrics_gauge_family_new(m, "slotd_backup_last_success_timestamp_seconds",
                                      "Unix time at which this node last finished streaming a "
                                      "whole backup (0: never since it started).",
                                      0, NULL, &last_s);
    if (rc == METRICS_OK)
        rc = metrics_gauge_family_new(m, "slotd_backup_last_bytes",
                                      "Bytes of the last whole backup this node streamed.", 0, NULL,
                                      &last_bytes);
    if (rc != METRICS_OK)
        return rc;
    const char *ok[] = {"ok"}, *failed[] = {"failed"};
    api->backup_runs[0] = metrics_counter_get(runs, ok);
    api->backup_runs[1] = metrics_counter_get(runs, failed);
    api->backup_last_success_s = metrics_gauge_get(last_s, NULL);
    api->backup_last_bytes = metrics_gauge_get(last_bytes, NULL);
    return METRICS_OK;
}

static void *backup_thread(void *arg)
{
    struct node_backup *b = arg;
    struct backup_writer *w = NULL;
    struct backup_capture_result res;
    char why[BACKUP_ERRMSG_MAX];
    uint64_t t0 = mono_ms();
    int rc = backup_writer_new(send_record, b, &w);
    if (rc != BACKUP_OK) {
        finish_job(b, rc, "out of memory");
        return NULL;
    }
    struct backup_capture_source src = {.store = b->api->store,
                                        .node_id = b->api->node_id,
                                        .hosts_group = hosts_group,
                                        .hosts_arg = b,
                                        .progress = on_progress,
                                        .progress_arg = b,
                                        .cancelled = is_cancelled,
                                        .cancelled_arg = b};
    rc = backup_capture_run(&src, w, &res, why, sizeof(why));
    slog(rc == BACKUP_OK ? "info" : "warn", "backup",
         "msg=\"backup %s\" groups=%" PRIu32 " rows=%" PRIu64 " bytes=%" PRIu64
         " snapshot_us=%" PRIu64 " ms=%" PRIu64 " error=\"%s\"",
         rc == BACKUP_OK ? "done" : "failed", res.groups, res.rows, res.bytes, res.snapshot_us,
         mono_ms() - t0, rc == BACKUP_OK ? "" : why);
    count_run(b->api, rc, res.bytes);
    backup_writer_free(w);
    finish_job(b, rc, why);
    return NULL;
}

static void on_backup(void *ctx, struct rpc_stream *st, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct node_backup *b = api->backup;
    struct slotd_error err;
    /* A backup holds every row and the controller's secrets: admin write, like the writes. */
    struct ctl_need need = {.type = CTL_PERM_ADMIN, .access = CTL_ACCESS_WRITE};
    if (node_authz_require(api->authz, api->peer_mtls, rpc_stream_call(st), BACKUP_METHOD, req, len,
                           &need, &err) != 0) {
        rpc_stream_finish(st, &err);
        return;
    }
    Slotd__V1__BackupRequest *r = slotd__v1__backup_request__unpack(NULL, len, req);
    if (r == NULL) {
        slotd_error_set(&err, SLOTD_EMALFORMED, "request is not a valid slotd.v1.BackupRequest");
        rpc_stream_finish(st, &err);
        return;
    }
    slotd__v1__backup_request__free_unpacked(r, NULL);
    pthread_mutex_lock(&b->mu);
    if (b->running) {
        pthread_mutex_unlock(&b->mu);
        slotd_error_set(&err, SLOTD_EQUEUE_FULL,
                        "backup: another backup is running on node %" PRIu64 "; retry when it ends",
                        api->node_id);
        rpc_stream_finish(st, &err);
        return;
    }
    if (b->joinable) /* the last job finished: its thread is ending or gone */
        pthread_join(b->thread, NULL);
    b->joinable = false;
    b->st = st;
    b->groups_done = b->groups_total = 0;
    b->stalled = false;
    atomic_store(&b->cancelled, false);
    rpc_stream_set_queue_limit(st, BACKUP_STREAM_QUEUE_BYTES + 64);
    rpc_stream_set_on_close(st, on_stream_close, b);
    b->running = true;
    if (pthread_create(&b->thread, NULL, backup_thread, b) != 0) {
        b->running = false;
        b->st = NULL;
        pthread_mutex_unlock(&b->mu);
        slotd_error_set(&err, SLOTD_EINTERNAL, "backup: cannot start the capture thread");
        rpc_stream_finish(st, &err);
        return;
    }
    b->joinable = true;
    pthread_mutex_unlock(&b->mu);
}

int node_backup_register(struct node_api *api, struct rpc_server *client)
{
    struct node_backup *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -1;
    pthread_mutex_init(&b->mu, NULL);
    b->api = api;
    api->backup = b;
    return rpc_server_add_server_stream(client, BACKUP_METHOD, on_backup, api);
}

void node_backup_stop(struct node_api *api)
{
    struct node_backup *b = api->backup;
    if (b == NULL)
        return;
    atomic_store(&b->cancelled, true);
    pthread_mutex_lock(&b->mu);
    bool join = b->joinable;
    b->joinable = false;
    pthread_mutex_unlock(&b->mu);
    if (join)
        pthread_join(b->thread, NULL);
    pthread_mutex_destroy(&b->mu);
    free(b);
    api->backup = NULL;
}
