/* restore.c - `slotd restore`: a verified backup file into one new node's data directory. */
#include "restore.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
#include "service/controller/controller.h"
#include "store/keys.h"
#include "store/store.h"

#define RESTORE_SUB_SNAPSHOT 2  /* [0xFFFF][group][2] -> [1][index u64][term u64] */
#define RESTORE_SUB_MIGRATION 3 /* not restored: a new cluster has no migration in flight */
#define RESTORE_BATCH_BYTES ((size_t)4 << 20)
#define RESTORE_TERM 1u /* term of the restored snapshot position of every group */

struct restore_args {
    const char *from, *data_dir, *peers;
    uint64_t node_id;
    bool keep_cluster_id;
};

struct restore {
    struct restore_args a;
    struct store *store;
    struct store_fsm_batch *batch;
    struct ctl_state *state;
    struct backup_header header;
    char *ctl_json;
    size_t ctl_len;
    bool state_ready;
    bool hosted; /* the group being read is placed on this node */
    uint64_t rows, groups;
    char err[BACKUP_ERRMSG_MAX + 256];
};

static int fail(struct restore *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct restore *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof(r->err), fmt, ap);
    va_end(ap);
    return -1;
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "slotd restore: %s\nusage: slotd restore --from FILE --data-dir DIR --node-id N "
            "[--peers ID=HOST:PORT,...] [--keep-cluster-id]\n",
            msg);
    return 2;
}

static int parse_args(int argc, char **argv, struct restore_args *a)
{
    char msg[256];
    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--keep-cluster-id") == 0) {
            a->keep_cluster_id = true;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(msg, sizeof(msg), "%s: needs a value", f);
            return usage(msg);
        }
        const char *v = argv[++i];
        if (strcmp(f, "--from") == 0) {
            a->from = v;
        } else if (strcmp(f, "--data-dir") == 0) {
            a->data_dir = v;
        } else if (strcmp(f, "--peers") == 0) {
            a->peers = v;
        } else if (strcmp(f, "--node-id") == 0) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(v, &end, 10);
            if (errno || *end || n == 0 || v[0] == '-') {
                snprintf(msg, sizeof(msg), "--node-id: '%s' is not a node id (1 or more)", v);
                return usage(msg);
            }
            a->node_id = n;
        } else {
            snprintf(msg, sizeof(msg), "unknown option '%s'", f);
            return usage(msg);
        }
    }
    if (a->from == NULL || a->data_dir == NULL || a->node_id == 0)
        return usage("--from, --data-dir and --node-id are required");
    return 0;
}

/* 0 when dir is missing or empty; else 2 with the line printed. */
static int check_empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "slotd restore: --data-dir %s: %s\n", dir, strerror(errno));
        return 2;
    }
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    if (n == 0)
        return 0;
    fprintf(stderr,
            "slotd restore: --data-dir %s is not empty (%u entries): restore builds a new node's "
            "data directory; give a missing or empty one (nothing was written)\n",
            dir, n);
    return 2;
}

/* Sets the address of every node from --peers ("1=h:p,2=h:p"), which must name exactly the
 * state's nodes (removed ones aside). */
static int apply_peers(struct restore *r)
{
    struct ctl_state *s = r->state;
    bool named[CTL_NODES_MAX] = {false};
    unsigned live = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++)
        live += s->nodes[i].join_state != CTL_JOIN_REMOVED;
    if (r->a.peers == NULL || r->a.peers[0] == '\0') {
        if (live == 1 && ctl_state_node(s, r->a.node_id) != NULL)
            return 0; /* one node: it keeps the address it had */
        return fail(r, "--peers: the backup's cluster has %u nodes: name each as ID=HOST:PORT",
                    live);
    }
    char *copy = strdup(r->a.peers), *save = NULL;
    if (copy == NULL)
        return fail(r, "out of memory");
    unsigned given = 0;
    int rc = 0;
    for (char *item = strtok_r(copy, ",", &save); item && rc == 0;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        uint64_t id = eq ? strtoull(item, NULL, 10) : 0;
        const struct ctl_node *n = id ? ctl_state_node(s, id) : NULL;
        if (eq == NULL || n == NULL || n->join_state == CTL_JOIN_REMOVED || strlen(eq + 1) == 0 ||
            strlen(eq + 1) > CTL_ADDRESS_MAX) {
            rc = fail(r, "--peers: '%s' is not ID=HOST:PORT of a node in the backup", item);
            break;
        }
        struct ctl_node *m = (struct ctl_node *)n;
        size_t at = (size_t)(m - s->nodes);
        if (named[at]) {
            rc = fail(r, "--peers: node %" PRIu64 " named twice", id);
            break;
        }
        named[at] = true;
        given++;
        snprintf(m->address, sizeof(m->address), "%s", eq + 1);
        m->client_address[0] = '\0'; /* each node reports where it serves */
    }
    free(copy);
    if (rc == 0 && given != live)
        rc = fail(r, "--peers: names %u nodes, the backup's cluster has %u: name every one", given,
                  live);
    return rc;
}

/* Decodes the controller state and makes it the new cluster's: id, addresses, no tasks. */
static int state_prepare(struct restore *r)
{
    char why[256];
    struct ctl_state *s = r->state;
    if (r->ctl_len == 0)
        return fail(r, "the backup holds no controller state");
    if (ctl_state_decode(r->ctl_json, r->ctl_len, s, why, sizeof(why)) != CTL_OK)
        return fail(r, "controller state in the backup: %s", why);
    if (ctl_state_node(s, r->a.node_id) == NULL)
        return fail(r, "--node-id %" PRIu64 ": not a node of the backup's cluster", r->a.node_id);
    if (apply_peers(r) != 0)
        return -1;
    if (!r->a.keep_cluster_id) {
        /* Every node of the new cluster restores on its own and must write the same state: the
         * new id is derived from the backup (old id and creation time), not drawn at random. */
        uint32_t h = 2166136261u;
        for (const char *p = s->cluster_id; *p; p++)
            h = (h ^ (uint8_t)*p) * 16777619u;
        h ^= (uint32_t)r->header.created_at_ms;
        snprintf(s->cluster_id, sizeof(s->cluster_id), "restored-%08" PRIx32 "-%" PRIu64, h,
                 r->header.created_at_ms);
    }
    s->n_tasks = 0;
    s->n_health = 0;
    /* No backup plan: the old cluster's plan points at its own destination directory, and a new
     * cluster on the same hosts would run into it and prune the old cluster's files. The run
     * history goes too (run ids start over in the new cluster). */
    memset(&s->backup, 0, sizeof(s->backup));
    if (ctl_state_validate(s, why, sizeof(why)) != CTL_OK)
        return fail(r, "restored controller state: %s", why);
    r->state_ready = true;
    return 0;
}

static bool on_this_node(const struct ctl_state *s, uint32_t group, uint64_t node)
{
    const struct ctl_group *g = ctl_state_group(s, group);
    for (uint32_t i = 0; g && i < g->n_peers; i++)
        if (g->desired_peers[i] == node)
            return true;
    return false;
}

static int flush_batch(struct restore *r, bool sync)
{
    int rc = store_fsm_write(r->store, r->batch, sync);
    store_fsm_batch_clear(r->batch);
    return rc == STORE_OK ? 0 : fail(r, "fsm write: %s", store_errmsg(r->store));
}

static int cb_header(void *arg, const struct backup_header *h)
{
    struct restore *r = arg;
    r->header = *h;
    return 0;
}

static int cb_controller(void *arg, const void *data, size_t len)
{
    struct restore *r = arg;
    if (r->ctl_len + len > CTL_FILE_BYTES_MAX)
        return fail(r, "controller state over %u bytes", CTL_FILE_BYTES_MAX);
    char *n = realloc(r->ctl_json, r->ctl_len + len + 1);
    if (n == NULL)
        return fail(r, "out of memory");
    memcpy(n + r->ctl_len, data, len);
    r->ctl_json = n;
    r->ctl_len += len;
    return 0;
}

static int cb_group_begin(void *arg, const struct backup_group_info *g)
{
    struct restore *r = arg;
    if (!r->state_ready && state_prepare(r) != 0)
        return -1;
    r->hosted = on_this_node(r->state, g->group, r->a.node_id);
    return 0;
}

static int cb_row(void *arg, uint32_t group, const void *k, size_t kl, const void *v, size_t vl)
{
    struct restore *r = arg;
    const uint8_t *key = k;
    if (!r->hosted)
        return 0;
    /* the group's migration record is not restored, its snapshot record is rewritten below */
    if (kl == STORE_GROUP_META_KEY_LEN && store_get_u16(key) == STORE_HASH_SLOT_GROUP &&
        (key[6] == RESTORE_SUB_MIGRATION || key[6] == RESTORE_SUB_SNAPSHOT))
        return 0;
    store_fsm_batch_put(r->batch, k, kl, v, vl);
    r->rows++;
    if (store_fsm_batch_bytes(r->batch) >= RESTORE_BATCH_BYTES)
        return flush_batch(r, false);
    return 0;
}

/* One group's raft position at its applied index: hard state, conf, snapshot metadata. */
static void put_position(struct store_log_batch *lb, struct store_fsm_batch *fb, uint32_t group,
                         uint64_t applied, const uint64_t *voters, uint32_t n_voters)
{
    struct store_snapshot_meta m = {.index = applied, .term = RESTORE_TERM};
    m.conf.n_voters = n_voters;
    memcpy(m.conf.voters, voters, n_voters * sizeof(uint64_t));
    struct store_hard_state hs = {.term = RESTORE_TERM, .vote = 0, .commit = applied};
    store_log_batch_put_hard_state(lb, group, &hs);
    store_log_batch_put_conf_state(lb, group, &m.conf);
    store_log_batch_put_snapshot_meta(lb, group, &m);
    store_fsm_batch_set_applied(fb, group, applied);
    if (group != 0) {
        uint8_t k[STORE_GROUP_META_KEY_LEN], v[17];
        store_key_group_meta(k, group, RESTORE_SUB_SNAPSHOT);
        v[0] = STORE_VALUE_VERSION;
        store_put_u64(v + 1, applied);
        store_put_u64(v + 9, RESTORE_TERM);
        store_fsm_batch_put(fb, k, sizeof(k), v, sizeof(v));
    }
}

/* The controller state (and, on a controller voter, group 0's position) and every hosted
 * group's position, in one fsm batch and one raftlog batch, both synced. */
static int write_positions(struct restore *r)
{
    const struct ctl_state *s = r->state;
    struct store_log_batch *lb;
    if (store_log_batch_new(&lb) != STORE_OK)
        return fail(r, "out of memory");
    char *json = NULL;
    size_t n = 0;
    int rc = -1;
    if (ctl_state_encode(s, &json, &n) != CTL_OK) {
        fail(r, "cannot encode the restored controller state");
        goto out;
    }
    uint8_t *v = malloc(n + 1), k[STORE_GROUP_META_KEY_LEN];
    if (v == NULL) {
        fail(r, "out of memory");
        goto out;
    }
    v[0] = STORE_VALUE_VERSION;
    memcpy(v + 1, json, n);
    store_key_group_meta(k, 0, 4 /* CTL_STATE */);
    store_fsm_batch_put(r->batch, k, sizeof(k), v, n + 1);
    free(v);
    const struct ctl_node *self = ctl_state_node(s, r->a.node_id);
    if (self->roles & CTL_ROLE_CONTROLLER_VOTER) {
        uint64_t voters[STORE_MEMBERS_MAX];
        uint32_t nv = 0;
        for (uint32_t i = 0; i < s->n_nodes && nv < STORE_MEMBERS_MAX; i++)
            if ((s->nodes[i].roles & CTL_ROLE_CONTROLLER_VOTER) &&
                s->nodes[i].join_state != CTL_JOIN_REMOVED)
                voters[nv++] = s->nodes[i].id;
        put_position(lb, r->batch, 0, s->applied_raft_index, voters, nv);
    }
    for (uint32_t i = 0; i < r->header.n_groups; i++) {
        const struct backup_group_info *g = &r->header.groups[i];
        const struct ctl_group *cg = ctl_state_group(s, g->group);
        if (cg == NULL || !on_this_node(s, g->group, r->a.node_id))
            continue;
        put_position(lb, r->batch, g->group, g->applied_index, cg->desired_peers, cg->n_peers);
        r->groups++;
    }
    if (flush_batch(r, true) != 0)
        goto out;
    if (store_log_write(r->store, lb, true) != STORE_OK) {
        fail(r, "raftlog write: %s", store_errmsg(r->store));
        goto out;
    }
    rc = 0;
out:
    ctl_free(json);
    store_log_batch_free(lb);
    return rc;
}

static int restore_run(struct restore *r)
{
    static const struct backup_read_cbs cbs = {
        .header = cb_header,
        .controller = cb_controller,
        .group_begin = cb_group_begin,
        .row = cb_row,
    };
    char why[BACKUP_ERRMSG_MAX];
    /* the whole file checks out before anything is written */
    if (backup_read_file(r->a.from, NULL, NULL, NULL, why, sizeof(why)) != BACKUP_OK)
        return fail(r, "--from %s: %s", r->a.from, why);
    if (mkdir(r->a.data_dir, 0700) != 0 && errno != EEXIST)
        return fail(r, "--data-dir %s: %s", r->a.data_dir, strerror(errno));
    if (store_open(r->a.data_dir, NULL, &r->store, why, sizeof(why)) != STORE_OK)
        return fail(r, "--data-dir %s: %s", r->a.data_dir, why);
    if (store_fsm_batch_new(&r->batch) != STORE_OK)
        return fail(r, "out of memory");
    int rc = backup_read_file(r->a.from, &cbs, r, NULL, why, sizeof(why));
    if (rc == BACKUP_ESTOP)
        return -1; /* r->err says why */
    if (rc != BACKUP_OK)
        return fail(r, "--from %s: %s", r->a.from, why);
    if (!r->state_ready && state_prepare(r) != 0)
        return -1;
    return write_positions(r);
}

int backup_restore_main(int argc, char **argv)
{
    struct restore *r = calloc(1, sizeof(*r));
    int code = 1;
    if (r == NULL || (r->state = malloc(sizeof(*r->state))) == NULL) {
        fprintf(stderr, "slotd restore: out of memory\n");
        goto out;
    }
    code = parse_args(argc, argv, &r->a);
    if (code == 0)
        code = check_empty_dir(r->a.data_dir);
    if (code != 0)
        goto out;
    if (restore_run(r) != 0) {
        bool usage_error =
            strncmp(r->err, "--peers", 7) == 0 || strncmp(r->err, "--node-id", 9) == 0;
        fprintf(stderr, "slotd restore: %s\n", r->err);
        code = usage_error ? 2 : 1;
        goto out;
    }
    printf("slotd restore: node %" PRIu64 " of cluster %s: %" PRIu64 " slot groups, %" PRIu64
           " rows, route revision %" PRIu64 ", into %s\n",
           r->a.node_id, r->state->cluster_id, r->groups, r->rows, r->header.route_revision,
           r->a.data_dir);
    code = 0;
out:
    if (r != NULL) {
        store_fsm_batch_free(r->batch);
        store_close(r->store);
        free(r->ctl_json);
        free(r->state);
    }
    free(r);
    return code;
}
