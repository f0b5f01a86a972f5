/* facts.c - what this node observed of each raft group (its own raft cores, the GroupStatus
 * answers it collected), handed to ctl_vet so that the controller leader checks every task_advance
 * against its own facts before proposing it (loop thread). */
#include <stdlib.h>
#include <string.h>

#include "service/controller/controller.h"
#include "service/runtime/facts.h"
#include "service/runtime/request.h"

/* Facts older than this do not prove a phase (GroupStatus is polled every 500 ms). */
#define RT_FACT_AGE_MAX_MS 3000

void rt_facts_leader_commit(struct rt_group *g, uint64_t commit, int64_t now)
{
    g->obs_lc_commit[1] = g->obs_lc_commit[0];
    g->obs_lc_ms[1] = g->obs_lc_ms[0];
    g->obs_lc_commit[0] = commit;
    g->obs_lc_ms[0] = now;
}

void rt_facts_leader_slots(struct rt_group *g, uint64_t leader, const uint8_t *owned,
                           size_t owned_len, const uint8_t *fenced, size_t fenced_len,
                           uint64_t migration_task, int64_t now)
{
    if (owned_len != sizeof(g->obs_owned) || fenced_len != sizeof(g->obs_fenced))
        return;
    memcpy(g->obs_owned, owned, sizeof(g->obs_owned));
    memcpy(g->obs_fenced, fenced, sizeof(g->obs_fenced));
    g->obs_migration_task = migration_task;
    g->obs_slots_leader = leader;
    g->obs_slots_ms = now;
}

static uint64_t word_of(const uint8_t *bits, int w)
{
    uint64_t v;
    memcpy(&v, bits + 8 * w, 8);
    return v;
}

void rt_facts_publish_slots(struct rt_group *g)
{
    for (int w = 0; w < 4; w++) {
        atomic_store_explicit(&g->pub_owned[w], word_of(g->fsm_state.owned, w),
                              memory_order_relaxed);
        atomic_store_explicit(&g->pub_fenced[w], word_of(g->fsm_state.fenced, w),
                              memory_order_relaxed);
    }
    atomic_store_explicit(&g->pub_migration_task, g->fsm_state.migration_task,
                          memory_order_relaxed);
}

void rt_facts_published_slots(const struct rt_group *g, uint8_t owned[32], uint8_t fenced[32],
                              uint64_t *migration_task)
{
    struct rt_group *m = (struct rt_group *)g; /* atomic loads of a const object */
    for (int w = 0; w < 4; w++) {
        uint64_t o = atomic_load_explicit(&m->pub_owned[w], memory_order_relaxed);
        uint64_t f = atomic_load_explicit(&m->pub_fenced[w], memory_order_relaxed);
        memcpy(owned + 8 * w, &o, 8);
        memcpy(fenced + 8 * w, &f, 8);
    }
    *migration_task = atomic_load_explicit(&m->pub_migration_task, memory_order_relaxed);
}

static void add_member(struct ctl_obs_group *o, const struct ctl_obs_member *m)
{
    for (uint32_t i = 0; i < o->n_members; i++) {
        if (o->members[i].node == m->node) {
            return; /* the first source given wins */
        }
    }
    if (o->n_members < sizeof(o->members) / sizeof(o->members[0])) {
        o->members[o->n_members++] = *m;
    }
}

/* A replica's own answer (applied index heard at heard_ms) paired with the newest leader commit
 * observed no later than it. */
static struct ctl_obs_member pair(const struct rt_group *g, uint64_t node, uint64_t applied,
                                  int64_t heard_ms, int64_t now)
{
    struct ctl_obs_member m = {.node = node, .match = applied};
    for (int i = 0; i < 2; i++) {
        if (g->obs_lc_ms[i] > 0 && g->obs_lc_ms[i] <= heard_ms) {
            m.known = true;
            m.commit = g->obs_lc_commit[i];
            m.age_ms = (uint64_t)(now - g->obs_lc_ms[i]);
            break;
        }
    }
    return m;
}

static void copy_ids(uint64_t *dst, uint32_t *n, const uint64_t *src, size_t n_src)
{
    *n = n_src < CTL_REPLICAS_MAX ? (uint32_t)n_src : CTL_REPLICAS_MAX;
    if (*n > 0) {
        memcpy(dst, src, *n * sizeof(uint64_t));
    }
}

static void observe(void *arg, uint32_t gid, struct ctl_obs_group *o)
{
    struct runtime *rt = arg;
    if (gid >= RT_GROUP_SLOTS(rt)) {
        return; /* not known */
    }
    struct rt_group *g = &rt->groups[gid];
    int64_t now = rt_now_ms();
    if (g->hosted && g->raft != NULL) {
        struct raft_status st;
        raft_status(g->raft, &st);
        if (st.role == RAFT_LEADER) {
            /* the leader's own configuration and progress: one instant for every member */
            o->known = true;
            copy_ids(o->voters, &o->n_voters, st.conf.voters, st.conf.n_voters);
            copy_ids(o->learners, &o->n_learners, st.conf.learners, st.conf.n_learners);
            o->leader = st.leader;
            o->commit = st.commit;
            o->leader_applied = atomic_load_explicit(&g->applied, memory_order_relaxed);
            if (gid != 0) {
                o->slots_known = true;
                rt_facts_published_slots(g, o->owned, o->fenced, &o->migration_task);
            }
            for (size_t i = 0; i < st.n_progress; i++) {
                struct ctl_obs_member m = {.node = st.progress[i].id,
                                           .known = true,
                                           .from_progress = true,
                                           .match = st.progress[i].match,
                                           .commit = st.commit};
                add_member(o, &m);
            }
            return;
        }
        /* A replica here that does not lead may be behind, or removed and not yet closed (its
         * configuration then never changes again): the leader's own reports decide. */
        struct ctl_obs_member self = pair(
            g, rt->opts.node_id, atomic_load_explicit(&g->applied, memory_order_relaxed), now, now);
        add_member(o, &self);
    }
    /* only a leader speaking for itself: a follower's configuration may be behind, or that of
     * a replica removed from the group */
    o->known = g->obs_conf_ms > 0 && g->n_obs_voters > 0 && g->obs_conf_by != 0 &&
               g->obs_conf_by == g->leader;
    o->age_ms = o->known ? (uint64_t)(now - g->obs_conf_ms) : 0;
    copy_ids(o->voters, &o->n_voters, g->obs_voters, g->n_obs_voters);
    copy_ids(o->learners, &o->n_learners, g->obs_learners, g->n_obs_learners);
    o->leader = g->leader;
    if (!g->hosted && g->leader != 0 && (uint64_t)(now - g->leader_seen_ms) > o->age_ms) {
        o->age_ms = (uint64_t)(now - g->leader_seen_ms);
    }
    /* the leader's own hash-slot state, as fresh as the configuration */
    if (gid != 0 && g->obs_slots_ms > 0 && g->obs_slots_leader == o->leader) {
        o->slots_known = true;
        memcpy(o->owned, g->obs_owned, sizeof(o->owned));
        memcpy(o->fenced, g->obs_fenced, sizeof(o->fenced));
        o->migration_task = g->obs_migration_task;
        if ((uint64_t)(now - g->obs_slots_ms) > o->age_ms)
            o->age_ms = (uint64_t)(now - g->obs_slots_ms);
    }
    for (uint32_t i = 0; i < g->n_obs; i++) {
        const struct route_replica *r = &g->obs[i];
        if (r->node == o->leader && r->node == r->leader) {
            o->commit = r->commit;
            o->leader_applied = r->applied;
        }
        struct ctl_obs_member m = pair(g, r->node, r->applied, r->heard_ms, now);
        if (m.known && (uint64_t)(now - r->heard_ms) > m.age_ms) {
            m.age_ms = (uint64_t)(now - r->heard_ms);
        }
        add_member(o, &m);
    }
}

int rt_ctl_vet(struct runtime *rt, const uint8_t **cmd, size_t *len, char **owned,
               struct slotd_error *err)
{
    RT_ASSERT_LOOP(rt);
    *owned = NULL;
    if (!rt_ctl_leading(rt) || rt->ctl == NULL) {
        return 0;
    }
    char why[CTL_REASON_MAX + 128];
    int rc = ctl_vet(rt->ctl, *cmd, *len, observe, rt, rt->opts.node_id, RT_FACT_AGE_MAX_MS, owned,
                     why, sizeof(why));
    if (rc == CTL_EFACT) {
        slotd_error_set(err, SLOTD_EPRECONDITION, "controller: %s", why);
        return -1;
    }
    if (rc != CTL_OK) {
        slotd_error_set(err, SLOTD_EINTERNAL, "controller: checking the command: %s",
                        ctl_strerror(rc));
        return -1;
    }
    if (*owned != NULL) {
        *cmd = (const uint8_t *)*owned;
        *len = strlen(*owned);
    }
    return 0;
}

struct rt_request *rt_ctl_vet_request(struct runtime *rt, struct rt_request *r)
{
    const uint8_t *cmd = r->data;
    size_t len = r->len;
    char *owned;
    struct slotd_error err;
    if (rt_ctl_vet(rt, &cmd, &len, &owned, &err) != 0) {
        RT_LOG("info", "msg=\"controller command refused\" err=\"%s\"", err.message);
        rpc_call_fail(r->call, &err);
        free(r);
        return NULL;
    }
    if (owned == NULL) {
        return r;
    }
    struct rt_request *n = malloc(sizeof(*n) + len);
    if (n == NULL) {
        ctl_free(owned);
        rt_fail(r, SLOTD_EINTERNAL, "out of memory");
        return NULL;
    }
    *n = *r;
    n->len = len;
    memcpy(n->data, cmd, len);
    ctl_free(owned);
    free(r);
    return n;
}
