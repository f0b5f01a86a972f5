/* capture.c - reads one fsm snapshot of this node into a backup writer: header, controller, groups.
 */
#include "capture.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/controller/controller.h"
#include "store/keys.h"

/* Per-group records under [0xFFFF][group u32][sub u8] (store/FORMAT.md, service/slot/slot.h). */
#define CAPTURE_SUB_OWNED 1
#define CAPTURE_SUB_CTL_STATE 4
#define CAPTURE_OWNED_LEN (1 + 32)

struct capture {
    const struct backup_capture_source *src;
    struct backup_writer *w;
    struct store_fsm_snap *snap;
    struct ctl_state *state;
    struct backup_header *h;
    struct backup_capture_result *res;
    char *err;
    size_t errlen;
    int writer_err; /* the writer's code when row_cb stopped a scan */
};

#define CAPTURE_ROW_STOP (-1) /* row_cb's stop value: never a STORE_* code */

static int capture_fail(struct capture *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int capture_fail(struct capture *c, int code, const char *fmt, ...)
{
    if (c->errlen == 0)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return code;
}

static int writer_rc(struct capture *c, int rc)
{
    if (rc == BACKUP_OK)
        return rc;
    return capture_fail(c, rc, "backup writer: %s", backup_writer_errmsg(c->w));
}

static int store_rc(struct capture *c, int rc, const char *what)
{
    int code = rc == STORE_ENOMEM     ? BACKUP_ENOMEM
               : rc == STORE_ECORRUPT ? BACKUP_ECORRUPT
                                      : BACKUP_EIO;
    return capture_fail(c, code, "%s: %s", what, store_errmsg(c->src->store));
}

static uint64_t now_us(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The controller state stored at the snapshot, decoded into c->state; its JSON in *json. */
static int load_state(struct capture *c, uint8_t **json, size_t *json_len)
{
    uint8_t key[STORE_GROUP_META_KEY_LEN];
    void *v = NULL;
    size_t vl = 0;
    char why[256];
    store_key_group_meta(key, 0, CAPTURE_SUB_CTL_STATE);
    int rc = store_fsm_snap_get(c->snap, key, sizeof(key), &v, &vl);
    if (rc == STORE_ENOTFOUND)
        return capture_fail(c, BACKUP_EPRECONDITION,
                            "node %" PRIu64 " holds no controller state yet", c->src->node_id);
    if (rc != STORE_OK)
        return store_rc(c, rc, "controller state");
    uint8_t *b = v;
    if (vl < 2 || b[0] != STORE_VALUE_VERSION) {
        free(v);
        return capture_fail(c, BACKUP_ECORRUPT, "controller state: bad version byte or length");
    }
    rc = ctl_state_decode(b + 1, vl - 1, c->state, why, sizeof(why));
    if (rc != CTL_OK) {
        free(v);
        return capture_fail(c, BACKUP_ECORRUPT, "controller state: %s", why);
    }
    if (c->state->revision == 0 || c->state->table.version == 0 || c->state->n_groups == 0) {
        free(v);
        return capture_fail(c, BACKUP_EPRECONDITION,
                            "the controller state has no hash-slot table or slot groups yet");
    }
    *json = b;
    *json_len = vl;
    return BACKUP_OK;
}

/* Fills c->h from c->state and the snapshot's applied indexes. */
static int fill_header(struct capture *c)
{
    struct backup_header *h = c->h;
    const struct ctl_state *st = c->state;
    h->created_at_ms = now_us(CLOCK_REALTIME) / 1000u;
    snprintf(h->cluster_id, sizeof(h->cluster_id), "%s", st->cluster_id);
    h->route_revision = st->revision;
    int rc = store_fsm_snap_applied(c->snap, 0, &h->controller_applied_index);
    if (rc != STORE_OK)
        return store_rc(c, rc, "controller applied index");
    for (uint32_t i = 0; i < st->table.n_ranges; i++)
        for (uint32_t s = st->table.ranges[i].first;
             s <= st->table.ranges[i].last && s < BACKUP_HASH_SLOTS; s++)
            h->hash_slot_table[s] = st->table.ranges[i].group;
    h->n_groups = st->n_groups;
    for (uint32_t i = 0; i < st->n_groups; i++) {
        struct backup_group_info *g = &h->groups[i];
        g->group = st->groups[i].id;
        g->source_node = c->src->node_id;
        if (!c->src->hosts_group(c->src->hosts_arg, g->group))
            return capture_fail(c, BACKUP_EPRECONDITION,
                                "group %" PRIu32 " has no replica on node %" PRIu64
                                ": call Backup on a node that hosts every slot group",
                                g->group, c->src->node_id);
        rc = store_fsm_snap_applied(c->snap, g->group, &g->applied_index);
        if (rc != STORE_OK)
            return store_rc(c, rc, "group applied index");
        if (g->applied_index == 0)
            return capture_fail(c, BACKUP_EPRECONDITION,
                                "group %" PRIu32 " has applied nothing on node %" PRIu64, g->group,
                                c->src->node_id);
    }
    return BACKUP_OK;
}

static int row_cb(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct capture *c = arg;
    c->writer_err = backup_writer_row(c->w, k, kl, v, vl);
    return c->writer_err == BACKUP_OK ? 0 : CAPTURE_ROW_STOP;
}

/* Writes every row of [lo, hi) in chunks; checks for cancellation between chunks. */
static int copy_range(struct capture *c, const uint8_t *lo, size_t lol, const uint8_t *hi,
                      size_t hil, const char *what)
{
    struct store_fsm_snap_cursor *cur = malloc(sizeof(*cur));
    int rc = BACKUP_ENOMEM;
    if (cur == NULL)
        return capture_fail(c, rc, "%s: out of memory", what);
    store_fsm_snap_cursor_init(cur, lo, lol, hi, hil);
    rc = BACKUP_OK;
    while (rc == BACKUP_OK && !cur->done) {
        if (c->src->cancelled && c->src->cancelled(c->src->cancelled_arg)) {
            rc = capture_fail(c, BACKUP_ESTOP, "%s: cancelled", what);
            break;
        }
        int src = store_fsm_snap_scan(c->snap, cur, BACKUP_ROWS_TARGET_BYTES, row_cb, c);
        if (src == CAPTURE_ROW_STOP)
            rc = writer_rc(c, c->writer_err);
        else if (src != STORE_OK)
            rc = store_rc(c, src, what);
    }
    free(cur);
    return rc;
}

/* The hash slots group owns at the snapshot (its OWNED record), as a 32-byte bitmap. */
static int load_owned(struct capture *c, uint32_t group, uint8_t owned[32])
{
    uint8_t key[STORE_GROUP_META_KEY_LEN];
    void *v = NULL;
    size_t vl = 0;
    store_key_group_meta(key, group, CAPTURE_SUB_OWNED);
    int rc = store_fsm_snap_get(c->snap, key, sizeof(key), &v, &vl);
    if (rc == STORE_ENOTFOUND) {
        memset(owned, 0, 32);
        return BACKUP_OK;
    }
    if (rc != STORE_OK)
        return store_rc(c, rc, "owned hash slots");
    const uint8_t *b = v;
    if (vl != CAPTURE_OWNED_LEN || b[0] != STORE_VALUE_VERSION) {
        free(v);
        return capture_fail(c, BACKUP_ECORRUPT,
                            "group %" PRIu32 " owned hash slots: value of %zu bytes, want %d",
                            group, vl, CAPTURE_OWNED_LEN);
    }
    memcpy(owned, b + 1, 32);
    free(v);
    return BACKUP_OK;
}

static int copy_group(struct capture *c, uint32_t group)
{
    uint8_t owned[32] = {0}, lo[STORE_GROUP_APPLIED_KEY_LEN], hi[STORE_GROUP_APPLIED_KEY_LEN];
    int rc = writer_rc(c, backup_writer_group_begin(c->w, group));
    if (rc == BACKUP_OK)
        rc = load_owned(c, group, owned);
    for (unsigned s = 0; rc == BACKUP_OK && s < BACKUP_HASH_SLOTS; s++) {
        if (!(owned[s / 8] & (1u << (s % 8))))
            continue;
        store_put_u16(lo, (uint16_t)s);
        store_put_u16(hi, (uint16_t)(s + 1));
        rc = copy_range(c, lo, 2, hi, 2, "hash slot rows");
    }
    if (rc == BACKUP_OK) { /* the group's own records: [0xFFFF][group] .. [0xFFFF][group + 1] */
        store_key_group_applied(lo, group);
        store_key_group_applied(hi, group + 1);
        rc = copy_range(c, lo, sizeof(lo), hi, sizeof(hi), "group records");
    }
    if (rc == BACKUP_OK)
        rc = writer_rc(c, backup_writer_group_end(c->w));
    return rc;
}

static int capture_body(struct capture *c)
{
    uint8_t *json = NULL;
    size_t json_len = 0;
    int rc = load_state(c, &json, &json_len);
    if (rc != BACKUP_OK)
        return rc;
    rc = fill_header(c);
    if (rc == BACKUP_OK && c->src->progress)
        c->src->progress(c->src->progress_arg, 0, c->h->n_groups);
    if (rc == BACKUP_OK)
        rc = writer_rc(c, backup_writer_header(c->w, c->h));
    if (rc == BACKUP_OK)
        rc = writer_rc(c, backup_writer_controller(c->w, json + 1, json_len - 1));
    free(json);
    for (uint32_t i = 0; rc == BACKUP_OK && i < c->h->n_groups; i++) {
        rc = copy_group(c, c->h->groups[i].group);
        if (rc == BACKUP_OK && c->src->progress)
            c->src->progress(c->src->progress_arg, i + 1, c->h->n_groups);
    }
    if (rc == BACKUP_OK)
        rc = writer_rc(c, backup_writer_finish(c->w));
    return rc;
}

int backup_capture_run(const struct backup_capture_source *src, struct backup_writer *w,
                       struct backup_capture_result *res, char *err, size_t errlen)
{
    struct backup_capture_result local;
    struct capture c = {
        .src = src, .w = w, .res = res ? res : &local, .err = err, .errlen = errlen};
    int rc = BACKUP_ENOMEM;
    memset(c.res, 0, sizeof(*c.res));
    if (errlen > 0)
        err[0] = '\0';
    c.state = malloc(sizeof(*c.state));
    if (c.state == NULL)
        goto err;
    c.h = calloc(1, sizeof(*c.h));
    if (c.h == NULL)
        goto err_after_state;
    uint64_t t0 = now_us(CLOCK_MONOTONIC);
    int src_rc = store_fsm_snap_new(src->store, &c.snap);
    c.res->snapshot_us = now_us(CLOCK_MONOTONIC) - t0;
    if (src_rc != STORE_OK) {
        rc = store_rc(&c, src_rc, "fsm snapshot");
        goto err_after_header;
    }
    rc = capture_body(&c);
    c.res->groups = c.h->n_groups;
    c.res->rows = backup_writer_rows(w);
    c.res->bytes = backup_writer_bytes(w);
    store_fsm_snap_free(c.snap);
    free(c.h);
    free(c.state);
    return rc;

err_after_header:
    free(c.h);
err_after_state:
    free(c.state);
err:
    if (rc == BACKUP_ENOMEM && (errlen == 0 || err[0] == '\0'))
        capture_fail(&c, rc, "backup capture: out of memory");
    return rc;
}
