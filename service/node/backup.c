/* backup.c - slotd.v1.Admin/Backup (admin-checked; one capture thread streams the file's records)
 * and the Peer/Backup* sessions other nodes' captures read this node's replicas through. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/backup/capture.h"
#include "service/backup/remote.h"
#include "service/controller/controller.h"
#include "service/log/log.h"
#include "service/node/api.h"
#include "service/node/authz.h"
#include "slotd/internal/v1/peer.pb-c.h"
#include "slotd/v1/admin.pb-c.h"

#define BACKUP_METHOD "/slotd.v1.Admin/Backup"
/* Bytes queued on the stream at most (records are at most 2 MiB + 16): the capture waits below it.
 */
#define BACKUP_STREAM_QUEUE_BYTES ((size_t)8 << 20)
/* A client that reads nothing for this long ends the backup (the capture pins a snapshot). */
#define BACKUP_STALL_MS 60000u
#define BACKUP_PACE_SLEEP_US 1000u

/* Peer/Backup* sessions this node serves at once (each pins one LevelDB snapshot). */
#define BACKUP_PEER_SESSIONS_MAX 8
/* A session no call used for this long is freed by the next BackupOpen or BackupRead. */
#define BACKUP_PEER_IDLE_MS 60000u
#define BACKUP_PEER_PAGE_MAX ((uint32_t)2 << 20)     /* BackupRead.max_bytes cap */
#define BACKUP_PEER_PAGE_DEFAULT ((uint32_t)1 << 20) /* BackupRead.max_bytes 0 */

/* One Peer/Backup* session: a snapshot of this node's fsm and the group being paged. */
struct peer_session {
    uint64_t id;
    uint64_t caller; /* the node that opened it: the only one that may use it */
    struct store_fsm_snap *snap;
    uint32_t groups[CTL_GROUPS_MAX]; /* readable ones (applied index > 0 at open) */
    size_t n_groups;
    uint32_t group;     /* being paged (0: none yet) */
    uint32_t next_page; /* of group */
    bool busy;          /* a BackupRead is reading it (under node_backup.smu) */
    uint64_t last_ms;
    struct backup_group_reader rd;
};

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
    /* Peer/Backup* sessions; smu guards the array, next_session and each session's busy. */
    pthread_mutex_t smu;
    struct peer_session *sessions[BACKUP_PEER_SESSIONS_MAX];
    uint64_t next_session;
};

/* The writer's output: one BackupChunk per record, paced on the stream's queue. */
static int send_record(void *arg, const void *buf, size_t len)
{
    struct node_backup *b = arg;
    uint64_t since = (uint64_t)node_mono_ms();
    while (rpc_stream_queued_bytes(b->st) + len > BACKUP_STREAM_QUEUE_BYTES) {
        if (atomic_load(&b->cancelled))
            return 1;
        if ((uint64_t)node_mono_ms() - since > BACKUP_STALL_MS) {
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
    uint64_t t0 = (uint64_t)node_mono_ms();
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
    struct backup_remote remote = {.transport = b->api->transport, .routes = b->api->routes};
    backup_remote_attach(&remote, &src);
    rc = backup_capture_run(&src, w, &res, why, sizeof(why));
    slog(rc == BACKUP_OK ? "info" : "warn", "backup",
         "msg=\"backup %s\" groups=%" PRIu32 " groups_remote=%" PRIu32 " rows=%" PRIu64
         " bytes=%" PRIu64 " snapshot_us=%" PRIu64 " ms=%" PRIu64 " error=\"%s\"",
         rc == BACKUP_OK ? "done" : "failed", res.groups, res.groups_remote, res.rows, res.bytes,
         res.snapshot_us, (uint64_t)node_mono_ms() - t0, rc == BACKUP_OK ? "" : why);
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

/* ---- Peer/Backup*: the sessions other nodes' captures read this node's replicas through ---- */

static void session_free(struct peer_session *ps)
{
    if (ps == NULL)
        return;
    store_fsm_snap_free(ps->snap);
    free(ps);
}

/* Frees the sessions idle for BACKUP_PEER_IDLE_MS (not one being read). Under b->smu. */
static void sessions_expire_locked(struct node_backup *b, uint64_t now)
{
    for (size_t i = 0; i < BACKUP_PEER_SESSIONS_MAX; i++) {
        struct peer_session *ps = b->sessions[i];
        if (ps == NULL || ps->busy || now - ps->last_ms < BACKUP_PEER_IDLE_MS)
            continue;
        slog("warn", "backup",
             "msg=\"backup session expired\" session=%" PRIu64 " caller=%" PRIu64
             " idle_ms=%" PRIu64,
             ps->id, ps->caller, now - ps->last_ms);
        session_free(ps);
        b->sessions[i] = NULL;
    }
}

/* The caller's session id, not being read, its slot in *slot; NULL with err filled (NOT_FOUND,
 * PERMISSION_DENIED when another node opened it, FAILED_PRECONDITION while a read runs). Under
 * b->smu. */
static struct peer_session *session_find_locked(struct node_backup *b, uint64_t id, uint64_t caller,
                                                size_t *slot, struct slotd_error *err)
{
    for (size_t i = 0; i < BACKUP_PEER_SESSIONS_MAX; i++) {
        struct peer_session *ps = b->sessions[i];
        if (ps == NULL || ps->id != id)
            continue;
        if (ps->caller != caller) {
            slotd_error_set(err, SLOTD_EPERMISSION_DENIED,
                            "session_id: backup session %" PRIu64 " belongs to node %" PRIu64, id,
                            ps->caller);
            return NULL;
        }
        if (ps->busy) {
            slotd_error_set(err, SLOTD_EPRECONDITION,
                            "session_id: backup session %" PRIu64 " is being read by another call",
                            id);
            return NULL;
        }
        *slot = i;
        return ps;
    }
    slotd_error_field(err, "session_id", 0,
                      "session_id: no backup session %" PRIu64 " on node %" PRIu64
                      " (closed, or idle for %u ms)",
                      id, b->api->node_id, BACKUP_PEER_IDLE_MS);
    err->code = SLOTD_ENOT_FOUND;
    return NULL;
}

/* The checked request of a Peer/Backup* call: the caller's node proof (remembered against
 * replays when remember), then the body as a message of d. NULL when either fails (the call is
 * failed); else the caller frees it with protobuf_c_message_free_unpacked. */
static void *peer_request(struct node_api *api, struct rpc_call *call, const char *method,
                          const uint8_t *req, size_t len, bool remember,
                          const ProtobufCMessageDescriptor *d, uint64_t *caller)
{
    struct slotd_error err;
    if (node_peer_caller(api, call, method, req, len, remember, caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return NULL;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, req);
    if (m == NULL) {
        slotd_error_set(&err, SLOTD_EMALFORMED, "request is not a valid %s", d->name);
        rpc_call_fail(call, &err);
    }
    return m;
}

static void on_peer_backup_open(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct node_backup *b = api->backup;
    struct slotd_error err;
    uint64_t caller;
    Slotd__Internal__V1__BackupOpenRequest *r =
        peer_request(api, call, BACKUP_PEER_OPEN_METHOD, req, len, true,
                     &slotd__internal__v1__backup_open_request__descriptor, &caller);
    if (r == NULL)
        return;
    int rc = 0;
    if (r->n_group_ids == 0 || r->n_group_ids > CTL_GROUPS_MAX) {
        slotd_error_field(&err, "group_ids", CTL_GROUPS_MAX, "group_ids: %zu ids, want 1..%u",
                          r->n_group_ids, CTL_GROUPS_MAX);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < r->n_group_ids; i++)
        if (r->group_ids[i] == 0 || r->group_ids[i] > CTL_GROUPS_MAX) {
            slotd_error_field(&err, "group_ids", CTL_GROUPS_MAX, "group_ids[%zu]: %u not in 1..%u",
                              i, r->group_ids[i], CTL_GROUPS_MAX);
            rc = -1;
        }
    struct peer_session *ps = rc == 0 ? calloc(1, sizeof(*ps)) : NULL;
    uint64_t *applied = rc == 0 ? calloc(r->n_group_ids, sizeof(*applied)) : NULL;
    if (rc == 0 && (ps == NULL || applied == NULL)) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "backup session: out of memory");
        rc = -1;
    }
    size_t slot = BACKUP_PEER_SESSIONS_MAX;
    if (rc == 0) {
        pthread_mutex_lock(&b->smu);
        uint64_t now = (uint64_t)node_mono_ms();
        sessions_expire_locked(b, now);
        for (size_t i = 0; i < BACKUP_PEER_SESSIONS_MAX && slot == BACKUP_PEER_SESSIONS_MAX; i++)
            if (b->sessions[i] == NULL)
                slot = i;
        if (slot == BACKUP_PEER_SESSIONS_MAX) {
            slotd_error_set(&err, SLOTD_EQUEUE_FULL,
                            "backup: %u sessions are open on node %" PRIu64
                            " (the limit); retry when one ends",
                            BACKUP_PEER_SESSIONS_MAX, api->node_id);
            rc = -1;
        } else if (store_fsm_snap_new(api->store, &ps->snap) != STORE_OK) {
            slotd_error_set(&err, SLOTD_ESTORAGE, "backup session: cannot take an fsm snapshot");
            rc = -1;
        }
        for (size_t i = 0; rc == 0 && i < r->n_group_ids; i++) {
            uint32_t g = r->group_ids[i];
            if (!runtime_hosts_group(api->rt, g) ||
                store_fsm_snap_applied(ps->snap, g, &applied[i]) != STORE_OK)
                applied[i] = 0;
            if (applied[i] > 0 && ps->n_groups < CTL_GROUPS_MAX)
                ps->groups[ps->n_groups++] = g;
        }
        if (rc == 0) {
            ps->id = ++b->next_session;
            ps->caller = caller;
            ps->last_ms = now;
            b->sessions[slot] = ps;
        }
        pthread_mutex_unlock(&b->smu);
    }
    if (rc == 0) {
        Slotd__Internal__V1__BackupOpenResponse a = SLOTD__INTERNAL__V1__BACKUP_OPEN_RESPONSE__INIT;
        a.session_id = ps->id;
        a.node_id = api->node_id;
        a.n_applied_index = r->n_group_ids;
        a.applied_index = applied;
        slog("info", "backup",
             "msg=\"backup session opened\" session=%" PRIu64 " caller=%" PRIu64
             " groups=%zu readable=%zu",
             a.session_id, caller, r->n_group_ids, ps->n_groups);
        rpc_call_reply(call, &a.base);
    } else {
        if (ps != NULL)
            session_free(ps);
        rpc_call_fail(call, &err);
    }
    free(applied);
    slotd__internal__v1__backup_open_request__free_unpacked(r, NULL);
}

/* Rows of one BackupRead answer, copied out of the snapshot scan. */
struct read_page {
    Slotd__Internal__V1__BackupRow *rows;
    Slotd__Internal__V1__BackupRow **ptrs;
    size_t n, cap;
};

static int page_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct read_page *p = arg;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        void *nr = realloc(p->rows, cap * sizeof(*p->rows));
        if (nr == NULL)
            return STORE_ENOMEM;
        p->rows = nr;
        p->cap = cap;
    }
    Slotd__Internal__V1__BackupRow *row = &p->rows[p->n];
    slotd__internal__v1__backup_row__init(row);
    row->key.data = malloc(kl ? kl : 1);
    row->value.data = malloc(vl ? vl : 1);
    if (row->key.data == NULL || row->value.data == NULL) {
        free(row->key.data);
        free(row->value.data);
        return STORE_ENOMEM;
    }
    memcpy(row->key.data, k, kl);
    memcpy(row->value.data, v, vl);
    row->key.len = kl;
    row->value.len = vl;
    p->n++;
    return 0;
}

static void page_free(struct read_page *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->rows[i].key.data);
        free(p->rows[i].value.data);
    }
    free(p->rows);
    free(p->ptrs);
}

/* Checks a BackupRead of ps (busy, ours) and reads its page into pg; 0 or -1 with err. */
static int session_read(struct peer_session *ps, const Slotd__Internal__V1__BackupReadRequest *r,
                        struct read_page *pg, bool *done, struct slotd_error *err)
{
    bool readable = false;
    for (size_t i = 0; i < ps->n_groups; i++)
        readable = readable || ps->groups[i] == r->group_id;
    if (!readable) {
        slotd_error_field(err, "group_id", CTL_GROUPS_MAX,
                          "group_id: session %" PRIu64 " cannot read group %u here", ps->id,
                          r->group_id);
        return -1;
    }
    char why[200];
    if (r->page == 0 && r->group_id != ps->group) { /* a group is started once: no replay */
        if (backup_group_reader_init(&ps->rd, ps->snap, r->group_id, why, sizeof(why)) !=
            BACKUP_OK) {
            slotd_error_set(err, SLOTD_ESTORAGE, "backup session: %s", why);
            return -1;
        }
        ps->group = r->group_id;
        ps->next_page = 0;
    } else if (r->group_id != ps->group || r->page != ps->next_page) {
        slotd_error_set(err, SLOTD_EPRECONDITION,
                        "page: session %" PRIu64 " expects page %" PRIu32 " of group %" PRIu32
                        ", not page %" PRIu32 " of group %" PRIu32,
                        ps->id, ps->next_page, ps->group, r->page, r->group_id);
        return -1;
    }
    uint32_t max = r->max_bytes == 0                     ? BACKUP_PEER_PAGE_DEFAULT
                   : r->max_bytes > BACKUP_PEER_PAGE_MAX ? BACKUP_PEER_PAGE_MAX
                                                         : r->max_bytes;
    int rc = ps->rd.done ? STORE_OK : backup_group_reader_next(&ps->rd, max, page_row, pg);
    if (rc != STORE_OK) {
        slotd_error_set(err, SLOTD_ESTORAGE, "backup session: group %" PRIu32 " rows: %s",
                        r->group_id, store_strerror(rc));
        return -1;
    }
    ps->next_page++;
    *done = ps->rd.done;
    return 0;
}

static void on_peer_backup_read(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct node_backup *b = api->backup;
    struct slotd_error err;
    uint64_t caller;
    /* Not remembered as replays (a backup makes thousands of these): a page is served once, so a
     * replayed one is refused by the page order. */
    Slotd__Internal__V1__BackupReadRequest *r =
        peer_request(api, call, BACKUP_PEER_READ_METHOD, req, len, false,
                     &slotd__internal__v1__backup_read_request__descriptor, &caller);
    if (r == NULL)
        return;
    size_t slot;
    pthread_mutex_lock(&b->smu);
    sessions_expire_locked(b, (uint64_t)node_mono_ms());
    struct peer_session *ps = session_find_locked(b, r->session_id, caller, &slot, &err);
    if (ps != NULL)
        ps->busy = true;
    pthread_mutex_unlock(&b->smu);
    /* The page is read here, on the handler thread: at most max_bytes (2 MiB) of one snapshot. */
    struct read_page pg = {0};
    bool done = false;
    int rc = ps != NULL ? session_read(ps, r, &pg, &done, &err) : -1;
    if (ps != NULL) {
        pthread_mutex_lock(&b->smu);
        ps->busy = false;
        ps->last_ms = (uint64_t)node_mono_ms();
        pthread_mutex_unlock(&b->smu);
    }
    if (rc == 0) {
        pg.ptrs = malloc((pg.n ? pg.n : 1) * sizeof(*pg.ptrs));
        if (pg.ptrs == NULL) {
            slotd_error_set(&err, SLOTD_EINTERNAL, "backup session: out of memory");
            rc = -1;
        }
    }
    if (rc == 0) {
        for (size_t i = 0; i < pg.n; i++)
            pg.ptrs[i] = &pg.rows[i];
        Slotd__Internal__V1__BackupReadResponse a = SLOTD__INTERNAL__V1__BACKUP_READ_RESPONSE__INIT;
        a.n_rows = pg.n;
        a.rows = pg.ptrs;
        a.done = done;
        rpc_call_reply(call, &a.base);
    } else {
        rpc_call_fail(call, &err);
    }
    page_free(&pg);
    slotd__internal__v1__backup_read_request__free_unpacked(r, NULL);
}

static void on_peer_backup_close(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct node_backup *b = api->backup;
    struct slotd_error err;
    uint64_t caller;
    Slotd__Internal__V1__BackupCloseRequest *r =
        peer_request(api, call, BACKUP_PEER_CLOSE_METHOD, req, len, false,
                     &slotd__internal__v1__backup_close_request__descriptor, &caller);
    if (r == NULL)
        return;
    size_t slot;
    pthread_mutex_lock(&b->smu);
    struct peer_session *ps = session_find_locked(b, r->session_id, caller, &slot, &err);
    if (ps != NULL)
        b->sessions[slot] = NULL;
    pthread_mutex_unlock(&b->smu);
    if (ps != NULL) {
        slog("info", "backup", "msg=\"backup session closed\" session=%" PRIu64 " caller=%" PRIu64,
             ps->id, caller);
        session_free(ps);
        Slotd__Internal__V1__BackupCloseResponse a =
            SLOTD__INTERNAL__V1__BACKUP_CLOSE_RESPONSE__INIT;
        rpc_call_reply(call, &a.base);
    } else {
        rpc_call_fail(call, &err);
    }
    slotd__internal__v1__backup_close_request__free_unpacked(r, NULL);
}

int node_backup_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer)
{
    struct node_backup *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -1;
    pthread_mutex_init(&b->mu, NULL);
    pthread_mutex_init(&b->smu, NULL);
    b->api = api;
    api->backup = b;
    int rc = rpc_server_add_server_stream(client, BACKUP_METHOD, on_backup, api);
    if (rc == 0)
        rc = rpc_server_add_unary(peer, BACKUP_PEER_OPEN_METHOD, on_peer_backup_open, api);
    if (rc == 0)
        rc = rpc_server_add_unary(peer, BACKUP_PEER_READ_METHOD, on_peer_backup_read, api);
    if (rc == 0)
        rc = rpc_server_add_unary(peer, BACKUP_PEER_CLOSE_METHOD, on_peer_backup_close, api);
    return rc;
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
    for (size_t i = 0; i < BACKUP_PEER_SESSIONS_MAX; i++) /* the peer server has stopped */
        session_free(b->sessions[i]);
    pthread_mutex_destroy(&b->smu);
    pthread_mutex_destroy(&b->mu);
    free(b);
    api->backup = NULL;
}
