/* routes.c - the route table and health the loop publishes from its groups. */
#include <string.h>

#include "service/runtime/request.h"
#include "service/runtime/routes.h"

#define OBS_KEEP_MS 60000 /* a replica's answer is shown for this long */

static bool conf_lists(const uint64_t *ids, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* rg's observed side: the configuration (this node's replica's, else what a peer reported) and
 * every replica's own last answer, this node's own replica live. */
static void fill_observed(struct runtime *rt, struct rt_group *g, struct route_group *rg,
                          int64_t now)
{
    struct route_replica self = {0};
    bool have_self = false;
    if (g->hosted && g->raft != NULL) {
        struct raft_status st;
        raft_status(g->raft, &st);
        uint32_t nv = st.conf.n_voters < ROUTE_MEMBERS_MAX ? st.conf.n_voters : ROUTE_MEMBERS_MAX;
        uint32_t nl =
            st.conf.n_learners < ROUTE_MEMBERS_MAX ? st.conf.n_learners : ROUTE_MEMBERS_MAX;
        rg->n_voters = nv;
        memcpy(rg->voters, st.conf.voters, nv * sizeof(uint64_t));
        rg->n_learners = nl;
        memcpy(rg->learners, st.conf.learners, nl * sizeof(uint64_t));
        self = (struct route_replica){
            .node = rt->opts.node_id,
            .role = conf_lists(rg->voters, nv, rt->opts.node_id)     ? ROUTE_ROLE_VOTER
                    : conf_lists(rg->learners, nl, rt->opts.node_id) ? ROUTE_ROLE_LEARNER
                                                                     : ROUTE_ROLE_NONE,
            .leader = g->leader,
            .term = st.term,
            .commit = st.commit, /* raft's own: g->commit follows only the durable hard state */
            .applied = g->applied,
            .heard_ms = now};
        have_self = true;
    } else if (g->obs_conf_ms > 0) {
        rg->n_voters = g->n_obs_voters;
        memcpy(rg->voters, g->obs_voters, g->n_obs_voters * sizeof(uint64_t));
        rg->n_learners = g->n_obs_learners;
        memcpy(rg->learners, g->obs_learners, g->n_obs_learners * sizeof(uint64_t));
    }
    /* drop answers too old to mean anything, then merge this node's own in node order */
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->n_obs; i++)
        if (now - g->obs[i].heard_ms <= OBS_KEEP_MS && g->obs[i].node != rt->opts.node_id)
            g->obs[k++] = g->obs[i];
    g->n_obs = k;
    rg->n_replicas = 0;
    for (uint32_t i = 0; i <= g->n_obs && rg->n_replicas < ROUTE_MEMBERS_MAX; i++) {
        if (have_self && (i == g->n_obs || g->obs[i].node > self.node)) {
            rg->replicas[rg->n_replicas++] = self;
            have_self = false;
            if (rg->n_replicas == ROUTE_MEMBERS_MAX)
                break;
        }
        if (i < g->n_obs)
            rg->replicas[rg->n_replicas++] = g->obs[i];
    }
}

void rt_publish_route(struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    int64_t now = rt_now_ms();
    struct route_snapshot *s;
    if (route_snapshot_clone(rt->route_base, &s) != 0) {
        RT_LOG("error", "msg=\"route publish: out of memory\"");
        return;
    }
    bool all_led = s->table_ready;
    size_t led = 0;
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        struct route_group *rg = route_snapshot_group_mut(s, g->id);
        if (rg == NULL)
            continue;
        rg->leader = g->leader;
        rg->leader_term = g->leader ? g->term : 0;
        rg->silent_term = g->leader ? 0 : g->term;
        fill_observed(rt, g, rg, now);
        if (g->hosted) {
            all_led = all_led && g->leader != 0;
            led += g->leader == rt->opts.node_id;
        }
    }
    led += rt->groups[0].hosted && rt->groups[0].leader == rt->opts.node_id;
    atomic_store(&rt->led_groups, led);
    metrics_gauge_set(rt->metrics.route_revision, (int64_t)s->revision);
    route_table_publish(rt->routes, s);
    if (all_led != rt->health_serving) {
        rt->health_serving = all_led;
        rpc_server_set_health(rt->server, "", all_led ? 1 : 2); /* SERVING : NOT_SERVING */
        rpc_server_set_health(rt->server, "slotd.v1.Metadata", all_led ? 1 : 2);
        RT_LOG("info", "msg=\"health changed\" serving=%s", all_led ? "true" : "false");
    }
}
