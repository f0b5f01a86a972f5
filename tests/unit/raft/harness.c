/* harness.c - the scenario-test cluster: persists readies into mem storage, queues messages. */
#include "harness.h"

#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *h_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        abort();
    }
    return p;
}

static void h_start(struct h_cluster *c, raft_id id)
{
    struct h_node *nd = &c->nodes[id];
    struct raft_config cfg = c->cfg;
    cfg.id = id;
    cfg.storage = raft_mem_storage_get(nd->ms);
    cfg.applied = nd->applied;
    int rv = raft_new(&cfg, &nd->r);
    CU_ASSERT_EQUAL_FATAL(rv, 0);
}

struct h_cluster *h_cluster_new(int n_voters, int n_learners, const struct raft_config *cfg)
{
    struct h_cluster *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        abort();
    }
    if (cfg != NULL) {
        c->cfg = *cfg;
    } else {
        raft_config_default(&c->cfg);
        c->cfg.seed = 1;
    }
    struct raft_conf_state cs;
    memset(&cs, 0, sizeof(cs));
    for (int i = 1; i <= n_voters; i++) {
        cs.voters[cs.n_voters++] = (raft_id)i;
    }
    for (int i = n_voters + 1; i <= n_voters + n_learners; i++) {
        cs.learners[cs.n_learners++] = (raft_id)i;
    }
    for (int i = 1; i <= n_voters + n_learners; i++) {
        struct h_node *nd = &c->nodes[i];
        nd->id = (raft_id)i;
        nd->exists = true;
        CU_ASSERT_EQUAL_FATAL(raft_mem_storage_new(&nd->ms), 0);
        raft_mem_storage_set_conf_state(nd->ms, &cs);
        h_start(c, (raft_id)i);
    }
    return c;
}

void h_add_node(struct h_cluster *c, raft_id id, const struct raft_conf_state *cs)
{
    struct h_node *nd = &c->nodes[id];
    CU_ASSERT_FATAL(id <= H_NODES_MAX && !nd->exists);
    nd->id = id;
    nd->exists = true;
    CU_ASSERT_EQUAL_FATAL(raft_mem_storage_new(&nd->ms), 0);
    if (cs != NULL) {
        raft_mem_storage_set_conf_state(nd->ms, cs);
    }
    h_start(c, id);
}

void h_restart(struct h_cluster *c, raft_id id)
{
    struct h_node *nd = &c->nodes[id];
    raft_free(nd->r);
    h_start(c, id);
}

void h_wipe(struct h_cluster *c, raft_id id, const struct raft_conf_state *cs)
{
    struct h_node *nd = &c->nodes[id];
    raft_free(nd->r);
    raft_mem_storage_free(nd->ms);
    nd->applied = 0;
    nd->n_applied = 0;
    nd->snapshot_index = 0;
    CU_ASSERT_EQUAL_FATAL(raft_mem_storage_new(&nd->ms), 0);
    if (cs != NULL) {
        raft_mem_storage_set_conf_state(nd->ms, cs);
    }
    h_start(c, id);
}

static void h_msg_free(struct raft_msg *m)
{
    for (size_t i = 0; i < m->n_entries; i++) {
        free((void *)m->entries[i].data.base);
    }
    free(m->entries);
    free((void *)m->snapshot.data.base);
}

void h_queue_clear(struct h_cluster *c)
{
    for (size_t i = 0; i < c->n_queue; i++) {
        h_msg_free(&c->queue[i]);
    }
    c->n_queue = 0;
}

void h_cluster_free(struct h_cluster *c)
{
    h_queue_clear(c);
    free(c->queue);
    for (int i = 1; i <= H_NODES_MAX; i++) {
        if (c->nodes[i].exists) {
            raft_free(c->nodes[i].r);
            raft_mem_storage_free(c->nodes[i].ms);
        }
    }
    free(c);
}

static void h_enqueue(struct h_cluster *c, const struct raft_msg *m)
{
    if (c->n_queue == c->cap_queue) {
        c->cap_queue = c->cap_queue ? 2 * c->cap_queue : 64;
        c->queue = realloc(c->queue, c->cap_queue * sizeof(*c->queue));
        if (c->queue == NULL) {
            abort();
        }
    }
    struct raft_msg *q = &c->queue[c->n_queue++];
    *q = *m;
    q->entries = NULL;
    if (m->n_entries > 0) {
        q->entries = h_xmalloc(m->n_entries * sizeof(*q->entries));
        for (size_t i = 0; i < m->n_entries; i++) {
            q->entries[i] = m->entries[i];
            void *d = NULL;
            if (m->entries[i].data.len > 0) {
                d = h_xmalloc(m->entries[i].data.len);
                memcpy(d, m->entries[i].data.base, m->entries[i].data.len);
            }
            q->entries[i].data.base = d;
        }
    }
    q->snapshot.data.base = NULL;
    if (m->snapshot.data.len > 0) {
        void *d = h_xmalloc(m->snapshot.data.len);
        memcpy(d, m->snapshot.data.base, m->snapshot.data.len);
        q->snapshot.data.base = d;
    }
}

static void h_apply(struct h_node *nd, const struct raft_entry *e)
{
    if (e->type == RAFT_ENTRY_CONF_CHANGE) {
        struct raft_conf_state cs;
        if (raft_apply_conf_change(nd->r, e, &cs) != 0) {
            nd->n_conf_errors++;
        }
        raft_mem_storage_set_conf_state(nd->ms, &cs);
    }
    if (nd->n_applied < H_LOG_MAX) {
        struct h_applied *a = &nd->log[nd->n_applied];
        a->index = e->index;
        a->term = e->term;
        a->type = e->type;
        size_t n = e->data.len < sizeof(a->data) - 1 ? e->data.len : sizeof(a->data) - 1;
        memcpy(a->data, e->data.base ? e->data.base : "", n);
        a->data[n] = '\0';
    }
    nd->n_applied++;
    CU_ASSERT_EQUAL(e->index, nd->applied + 1);
    nd->applied = e->index;
}

static void h_handle_ready(struct h_cluster *c, struct h_node *nd)
{
    struct raft_ready rd;
    CU_ASSERT_EQUAL_FATAL(raft_ready(nd->r, &rd), 0);
    if (rd.has_snapshot) {
        CU_ASSERT_EQUAL(raft_mem_storage_apply_snapshot(nd->ms, &rd.snapshot), 0);
        nd->snapshot_index = rd.snapshot.meta.index;
        size_t n = rd.snapshot.data.len < sizeof(nd->snapshot_data) - 1
                       ? rd.snapshot.data.len
                       : sizeof(nd->snapshot_data) - 1;
        memcpy(nd->snapshot_data, rd.snapshot.data.base ? rd.snapshot.data.base : "", n);
        nd->snapshot_data[n] = '\0';
        nd->applied = rd.snapshot.meta.index;
    }
    if (rd.has_hard_state) {
        raft_mem_storage_set_hard_state(nd->ms, &rd.hard_state);
    }
    if (rd.n_entries > 0) {
        CU_ASSERT_EQUAL(raft_mem_storage_append(nd->ms, rd.entries, rd.n_entries), 0);
    }
    for (size_t i = 0; i < rd.n_msgs; i++) {
        h_enqueue(c, &rd.msgs[i]);
    }
    for (size_t i = 0; i < rd.n_committed; i++) {
        h_apply(nd, &rd.committed[i]);
    }
    for (size_t i = 0; i < rd.n_reads && nd->n_reads < 64; i++) {
        nd->reads[nd->n_reads++] = rd.reads[i];
    }
    for (size_t i = 0; i < rd.n_read_failures && nd->n_fails < 64; i++) {
        nd->fails[nd->n_fails++] = rd.read_failures[i];
    }
    raft_advance(nd->r, &rd);
    h_invariants_ok(nd->r);
}

bool h_invariants_ok(const struct raft *r)
{
    struct raft_invariant_report rep;
    if (raft_check_invariants(r, &rep) == 0) {
        return true;
    }
    fprintf(stderr, "\ninvariant %s broken on node %llu term %llu index %llu: %s\n", rep.name,
            (unsigned long long)rep.node, (unsigned long long)rep.term,
            (unsigned long long)rep.index, rep.detail);
    CU_FAIL("raft_check_invariants");
    return false;
}

bool h_aborts_with(void (*fn)(void *), void *arg, const char *needle)
{
    int fds[2];
    if (pipe(fds) != 0) {
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        signal(SIGABRT, SIG_DFL);
        fn(arg);
        _exit(0); /* no abort: the caller's check fails */
    }
    close(fds[1]);
    char out[2048];
    size_t len = 0;
    ssize_t k;
    while ((k = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0) {
        len += (size_t)k;
        if (len == sizeof(out) - 1) {
            break;
        }
    }
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    if (!aborted || strstr(out, needle) == NULL) {
        fprintf(stderr, "\nexpected an abort naming \"%s\"; status %d, stderr: %s\n", needle,
                status, out);
        return false;
    }
    return true;
}

bool h_process(struct h_cluster *c)
{
    bool any = false;
    for (int i = 1; i <= H_NODES_MAX; i++) {
        struct h_node *nd = &c->nodes[i];
        if (nd->exists && !nd->down && raft_has_ready(nd->r)) {
            h_handle_ready(c, nd);
            any = true;
        }
    }
    return any;
}

void h_deliver(struct h_cluster *c)
{
    struct raft_msg *q = c->queue;
    size_t n = c->n_queue;
    c->queue = NULL;
    c->n_queue = 0;
    c->cap_queue = 0;
    for (size_t i = 0; i < n; i++) {
        struct raft_msg *m = &q[i];
        bool drop = m->to == 0 || m->to > H_NODES_MAX || !c->nodes[m->to].exists ||
                    c->nodes[m->to].down || c->nodes[m->from].down || c->cut[m->from][m->to] ||
                    (c->filter != NULL && c->filter(c->filter_arg, m));
        if (drop) {
            c->n_dropped++;
        } else {
            c->n_delivered++;
            int rv = raft_step(c->nodes[m->to].r, m);
            CU_ASSERT_EQUAL(rv, 0);
            h_invariants_ok(c->nodes[m->to].r);
        }
        h_msg_free(m);
    }
    free(q);
}

void h_pump(struct h_cluster *c)
{
    for (int round = 0; round < 10000; round++) {
        bool any = h_process(c);
        if (!any && c->n_queue == 0) {
            return;
        }
        h_deliver(c);
    }
    CU_FAIL("h_pump: the cluster did not settle within 10000 rounds");
}

void h_tick(struct h_cluster *c, raft_id id, int n)
{
    for (int i = 0; i < n; i++) {
        raft_tick(c->nodes[id].r);
    }
}

void h_tick_all(struct h_cluster *c, int n)
{
    for (int k = 0; k < n; k++) {
        for (int i = 1; i <= H_NODES_MAX; i++) {
            if (c->nodes[i].exists && !c->nodes[i].down) {
                raft_tick(c->nodes[i].r);
            }
        }
        h_pump(c);
    }
}

int h_campaign(struct h_cluster *c, raft_id id)
{
    raft_campaign(c->nodes[id].r);
    h_pump(c);
    return h_role(c, id);
}

void h_cut(struct h_cluster *c, raft_id a, raft_id b, bool cut)
{
    c->cut[a][b] = cut;
    c->cut[b][a] = cut;
}

void h_isolate(struct h_cluster *c, raft_id id, bool cut)
{
    for (raft_id j = 1; j <= H_NODES_MAX; j++) {
        if (j != id) {
            h_cut(c, id, j, cut);
        }
    }
}

void h_heal(struct h_cluster *c)
{
    memset(c->cut, 0, sizeof(c->cut));
    for (int i = 1; i <= H_NODES_MAX; i++) {
        c->nodes[i].down = false;
    }
}

struct raft *h_raft(struct h_cluster *c, raft_id id)
{
    return c->nodes[id].r;
}

void h_status(struct h_cluster *c, raft_id id, struct raft_status *st)
{
    raft_status(c->nodes[id].r, st);
}

raft_term h_term(struct h_cluster *c, raft_id id)
{
    struct raft_status st;
    h_status(c, id, &st);
    return st.term;
}

int h_role(struct h_cluster *c, raft_id id)
{
    struct raft_status st;
    h_status(c, id, &st);
    return st.role;
}

raft_index h_commit(struct h_cluster *c, raft_id id)
{
    struct raft_status st;
    h_status(c, id, &st);
    return st.commit;
}

raft_index h_last(struct h_cluster *c, raft_id id)
{
    struct raft_status st;
    h_status(c, id, &st);
    return st.last_index;
}

raft_id h_leader_of(struct h_cluster *c, raft_id id)
{
    struct raft_status st;
    h_status(c, id, &st);
    return st.leader;
}

raft_term h_stored_term(struct h_cluster *c, raft_id id, raft_index i)
{
    const struct raft_storage *s = raft_mem_storage_get(c->nodes[id].ms);
    raft_term t = 0;
    if (s->term(s->ctx, i, &t) != 0) {
        return 0;
    }
    return t;
}

int h_propose(struct h_cluster *c, raft_id id, const char *data)
{
    return raft_propose(c->nodes[id].r, data, strlen(data), NULL);
}

size_t h_queued(struct h_cluster *c, int type, raft_id from)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_queue; i++) {
        n += c->queue[i].type == type && (from == 0 || c->queue[i].from == from);
    }
    return n;
}
