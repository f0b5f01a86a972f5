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

/* A node the capture opened a session on (at most one per node). */
struct capture_node {
    uint64_t node;
    uint64_t session; /* 0: the open failed (why says so) */
    uint32_t *groups; /* the groups asked for, with their applied index there */
    uint64_t *applied;
    size_t n;
    char why[160];
};

struct capture {
    const struct backup_capture_source *src;
    struct backup_writer *w;
    struct store_fsm_snap *snap;
    struct ctl_state *state;
    struct backup_header *h;
    struct backup_capture_result *res;
    char *err;
    size_t errlen;
    int writer_err;             /* the writer's code when row_cb stopped a scan */
    struct capture_node *nodes; /* sessions opened (n_nodes of them, room for CTL_NODES_MAX) */
    size_t n_nodes;
    uint64_t *session; /* per header group: its session, 0 = read here */
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

static bool has_peer(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

size_t backup_source_order(const uint64_t *peers, size_t n, uint64_t self, uint64_t leader,
                           uint64_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) /* self first when it is a follower (or the leader is unknown) */
        if (peers[i] == self && self != leader)
            out[k++] = self;
    for (size_t i = 0; i < n; i++)
        if (peers[i] != self && peers[i] != leader)
            out[k++] = peers[i];
    for (size_t i = 0; i < n; i++) /* the leader last */
        if (peers[i] == leader)
            out[k++] = leader;
    return k;
}

/* The session on node, opened on first use for every group node is a desired peer of. NULL when
 * out of memory; a failed open is kept (session 0, why) so it is not tried again. */
static struct capture_node *node_session(struct capture *c, uint64_t node)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].node == node)
            return &c->nodes[i];
    if (c->n_nodes == CTL_NODES_MAX)
        return NULL;
    const struct ctl_state *st = c->state;
    struct capture_node *cn = &c->nodes[c->n_nodes];
    memset(cn, 0, sizeof(*cn));
    cn->node = node;
    cn->groups = calloc(st->n_groups, sizeof(*cn->groups));
    cn->applied = calloc(st->n_groups, sizeof(*cn->applied));
    if (cn->groups == NULL || cn->applied == NULL) {
        free(cn->groups);
        free(cn->applied);
        return NULL;
    }
    c->n_nodes++;
    for (uint32_t i = 0; i < st->n_groups; i++)
        for (uint32_t p = 0; p < st->groups[i].n_peers; p++)
            if (st->groups[i].desired_peers[p] == node)
                cn->groups[cn->n++] = st->groups[i].id;
    if (c->src->remote_open(c->src->remote_arg, node, cn->groups, cn->n, &cn->session, cn->applied,
                            cn->why, sizeof(cn->why)) != BACKUP_OK)
        cn->session = 0;
    else if (cn->session == 0)
        snprintf(cn->why, sizeof(cn->why), "node %" PRIu64 " answered session 0", node);
    return cn;
}

/* Picks group g's replica (fills g->source_node and g->applied_index, *session) from its desired
 * peers in backup_source_order. */
static int choose_source(struct capture *c, const struct ctl_group *cg, struct backup_group_info *g,
                         uint64_t *session)
{
    const struct backup_capture_source *src = c->src;
    uint64_t order[CTL_REPLICAS_MAX + 1];
    uint64_t leader = src->group_leader ? src->group_leader(src->remote_arg, cg->id) : 0;
    size_t n = backup_source_order(cg->desired_peers, cg->n_peers, src->node_id, leader, order);
    char why[200] = "it has no desired peers", tried[128] = "";
    size_t tl = 0;
    if (src->hosts_group(src->hosts_arg, cg->id) && !has_peer(order, n, src->node_id))
        order[n++] = src->node_id; /* a replica here the state does not list yet (a learner) */
    for (size_t i = 0; i < n; i++) {
        uint64_t node = order[i];
        tl += (size_t)snprintf(tried + tl, tl < sizeof(tried) ? sizeof(tried) - tl : 0,
                               "%s%" PRIu64, i ? "," : "", node);
        if (tl >= sizeof(tried))
            tl = sizeof(tried) - 1;
        if (node == src->node_id) {
            if (!src->hosts_group(src->hosts_arg, cg->id)) {
                snprintf(why, sizeof(why), "node %" PRIu64 " hosts no replica of it", node);
                continue;
            }
            int rc = store_fsm_snap_applied(c->snap, cg->id, &g->applied_index);
            if (rc != STORE_OK)
                return store_rc(c, rc, "group applied index");
            if (g->applied_index == 0) {
                snprintf(why, sizeof(why), "node %" PRIu64 " has applied nothing of it", node);
                continue;
            }
            g->source_node = node;
            *session = 0;
            return BACKUP_OK;
        }
        if (src->remote_open == NULL) {
            snprintf(why, sizeof(why), "node %" PRIu64 " hosts no replica of it", src->node_id);
            continue;
        }
        struct capture_node *cn = node_session(c, node);
        if (cn == NULL)
            return capture_fail(c, BACKUP_ENOMEM, "backup capture: out of memory");
        if (cn->session == 0) {
            snprintf(why, sizeof(why), "%s", cn->why);
            continue;
        }
        for (size_t k = 0; k < cn->n; k++)
            if (cn->groups[k] == cg->id && cn->applied[k] > 0) {
                g->source_node = node;
                g->applied_index = cn->applied[k];
                *session = cn->session;
                return BACKUP_OK;
            }
        snprintf(why, sizeof(why), "node %" PRIu64 " has no readable replica of it", node);
    }
    return capture_fail(c, BACKUP_EPRECONDITION,
                        "group %" PRIu32 ": no replica could be read (tried node%s %s): %s", cg->id,
                        n == 1 ? "" : "s", tried, why);
}

/* Fills c->h from c->state and, per group, the replica it is read from. */
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
    c->session = calloc(st->n_groups ? st->n_groups : 1, sizeof(*c->session));
    c->nodes = calloc(CTL_NODES_MAX, sizeof(*c->nodes));
    if (c->session == NULL || c->nodes == NULL)
        return capture_fail(c, BACKUP_ENOMEM, "backup capture: out of memory");
    for (uint32_t i = 0; rc == BACKUP_OK && i < st->n_groups; i++) {
        h->groups[i].group = st->groups[i].id;
        rc = choose_source(c, &st->groups[i], &h->groups[i], &c->session[i]);
        if (rc == BACKUP_OK && c->session[i] != 0)
            c->res->groups_remote++;
    }
    return rc;
}

/* Closes every session opened and frees the bookkeeping. */
static void close_sessions(struct capture *c)
{
    for (size_t i = 0; c->nodes != NULL && i < c->n_nodes; i++) {
        if (c->nodes[i].session != 0)
            c->src->remote_close(c->src->remote_arg, c->nodes[i].node, c->nodes[i].session);
        free(c->nodes[i].groups);
        free(c->nodes[i].applied);
    }
    free(c->nodes);
    free(c->session);
    c->nodes = NULL;
    c->session = NULL;
    c->n_nodes = 0;
}

static int row_cb(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct capture *c = arg;
    c->writer_err = backup_writer_row(c->w, k, kl, v, vl);
    return c->writer_err == BACKUP_OK ? 0 : CAPTURE_ROW_STOP;
}

/* The hash slots group owns at snap (its OWNED record), as a 32-byte bitmap. */
static int load_owned(struct store_fsm_snap *snap, uint32_t group, uint8_t owned[32], char *err,
                      size_t errlen)
{
    uint8_t key[STORE_GROUP_META_KEY_LEN];
    void *v = NULL;
    size_t vl = 0;
    store_key_group_meta(key, group, CAPTURE_SUB_OWNED);
    int rc = store_fsm_snap_get(snap, key, sizeof(key), &v, &vl);
    memset(owned, 0, 32);
    if (rc == STORE_ENOTFOUND)
        return BACKUP_OK;
    if (rc != STORE_OK) {
        snprintf(err, errlen, "group %" PRIu32 " owned hash slots: %s", group, store_strerror(rc));
        return rc == STORE_ENOMEM ? BACKUP_ENOMEM : BACKUP_EIO;
    }
    const uint8_t *b = v;
    if (vl != CAPTURE_OWNED_LEN || b[0] != STORE_VALUE_VERSION) {
        free(v);
        snprintf(err, errlen, "group %" PRIu32 " owned hash slots: value of %zu bytes, want %d",
                 group, vl, CAPTURE_OWNED_LEN);
        return BACKUP_ECORRUPT;
    }
    memcpy(owned, b + 1, 32);
    free(v);
    return BACKUP_OK;
}

int backup_group_reader_init(struct backup_group_reader *r, struct store_fsm_snap *snap,
                             uint32_t group, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    r->snap = snap;
    r->group = group;
    return load_owned(snap, group, r->owned, err, errlen);
}

/* Counts the bytes of the rows passed on, for the page budget. */
struct reader_pass {
    store_row_cb cb;
    void *arg;
    size_t bytes;
};

static int reader_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct reader_pass *p = arg;
    p->bytes += kl + vl;
    return p->cb(p->arg, k, kl, v, vl);
}

int backup_group_reader_next(struct backup_group_reader *r, size_t max_bytes, store_row_cb cb,
                             void *arg)
{
    struct reader_pass pass = {.cb = cb, .arg = arg};
    while (!r->done && (pass.bytes == 0 || pass.bytes < max_bytes)) {
        if (!r->in_range) {
            while (r->slot < BACKUP_HASH_SLOTS && !(r->owned[r->slot / 8] & (1u << (r->slot % 8))))
                r->slot++;
            uint8_t lo[STORE_GROUP_APPLIED_KEY_LEN], hi[STORE_GROUP_APPLIED_KEY_LEN];
            size_t len = 2;
            if (r->slot < BACKUP_HASH_SLOTS) {
                store_put_u16(lo, (uint16_t)r->slot);
                store_put_u16(hi, (uint16_t)(r->slot + 1));
            } else { /* the group's own records: [0xFFFF][group] .. [0xFFFF][group + 1] */
                store_key_group_applied(lo, r->group);
                store_key_group_applied(hi, r->group + 1);
                len = sizeof(lo);
            }
            int rc = store_fsm_snap_cursor_init(&r->cur, lo, len, hi, len);
            if (rc != STORE_OK)
                return rc;
            r->in_range = true;
        }
        int rc = store_fsm_snap_scan(r->snap, &r->cur, max_bytes - pass.bytes, reader_row, &pass);
        if (rc != STORE_OK)
            return rc;
        if (r->cur.done) {
            r->in_range = false;
            if (r->slot++ >= BACKUP_HASH_SLOTS)
                r->done = true;
        }
    }
    return STORE_OK;
}

/* Writes the group's part read here, in chunks; checks for cancellation between chunks. */
static int copy_local(struct capture *c, uint32_t group)
{
    struct backup_group_reader *r = malloc(sizeof(*r));
    char why[200] = "";
    if (r == NULL)
        return capture_fail(c, BACKUP_ENOMEM, "group %" PRIu32 ": out of memory", group);
    int rc = backup_group_reader_init(r, c->snap, group, why, sizeof(why));
    if (rc != BACKUP_OK)
        rc = capture_fail(c, rc, "%s", why);
    while (rc == BACKUP_OK && !r->done) {
        if (c->src->cancelled && c->src->cancelled(c->src->cancelled_arg)) {
            rc = capture_fail(c, BACKUP_ESTOP, "group %" PRIu32 ": cancelled", group);
            break;
        }
        int src = backup_group_reader_next(r, BACKUP_ROWS_TARGET_BYTES, row_cb, c);
        if (src == CAPTURE_ROW_STOP)
            rc = writer_rc(c, c->writer_err);
        else if (src != STORE_OK)
            rc = store_rc(c, src, "group rows");
    }
    free(r);
    return rc;
}

/* Writes the group's part read page by page from another node's session. */
static int copy_remote(struct capture *c, uint32_t group, uint64_t node, uint64_t session)
{
    bool done = false;
    int rc = BACKUP_OK;
    char why[200] = "";
    for (uint32_t page = 0; rc == BACKUP_OK && !done; page++) {
        if (c->src->cancelled && c->src->cancelled(c->src->cancelled_arg))
            return capture_fail(c, BACKUP_ESTOP, "group %" PRIu32 ": cancelled", group);
        rc = c->src->remote_read(c->src->remote_arg, node, session, group, page, row_cb, c, &done,
                                 why, sizeof(why));
        if (rc == BACKUP_ESTOP && c->writer_err != BACKUP_OK)
            rc = writer_rc(c, c->writer_err);
        else if (rc != BACKUP_OK)
            rc =
                capture_fail(c, rc, "group %" PRIu32 " from node %" PRIu64 ", page %" PRIu32 ": %s",
                             group, node, page, why);
    }
    return rc;
}

static int copy_group(struct capture *c, uint32_t i)
{
    const struct backup_group_info *g = &c->h->groups[i];
    int rc = writer_rc(c, backup_writer_group_begin(c->w, g->group));
    if (rc == BACKUP_OK)
        rc = c->session[i] == 0 ? copy_local(c, g->group)
                                : copy_remote(c, g->group, g->source_node, c->session[i]);
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
        rc = copy_group(c, i);
        if (rc == BACKUP_OK && c->src->progress)
            c->src->progress(c->src->progress_arg, i + 1, c->h->n_groups);
    }
    if (rc == BACKUP_OK)
        rc = writer_rc(c, backup_writer_finish(c->w));
    close_sessions(c);
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
