/* apply.c - the apply stage: committed entries of many groups into one fsm batch, then reads and
 * call completions. */
#include <stdlib.h>
#include <string.h>

#include "service/fault/fault.h"
#include "service/runtime/apply.h"
#include "service/runtime/ctl.h"
#include "service/runtime/facts.h"
#include "service/runtime/snapshot.h"
#include "service/runtime/watch.h"

struct rt_apply_job *rt_apply_job_new(struct runtime *rt)
{
    struct rt_apply_job *job = calloc(1, sizeof(*job));
    if (job != NULL)
        job->rt = rt;
    return job;
}

void rt_apply_job_free(struct rt_apply_job *job)
{
    if (job == NULL)
        return;
    for (size_t i = 0; i < job->n_groups; i++)
        free(job->groups[i].entries);
    free(job->groups);
    free(job->arena);
    free(job->ctl_pub);
    free(job->durable);
    free(job);
}

static struct rt_apply_group *rt_apply_job_group(struct rt_apply_job *job, struct rt_group *g)
{
    for (size_t i = 0; i < job->n_groups; i++)
        if (job->groups[i].g == g)
            return &job->groups[i];
    if (job->n_groups == job->cap_groups) {
        size_t cap = job->cap_groups ? job->cap_groups * 2 : 8;
        struct rt_apply_group *ng = realloc(job->groups, cap * sizeof(*ng));
        if (ng == NULL)
            return NULL;
        job->groups = ng;
        job->cap_groups = cap;
    }
    struct rt_apply_group *ag = &job->groups[job->n_groups++];
    memset(ag, 0, sizeof(*ag));
    ag->g = g;
    return ag;
}

/* Entry data is copied into one arena per job; pointers are fixed up when the
 * job is submitted (the arena may move while it grows). */
int rt_apply_job_add(struct rt_apply_job *job, struct rt_group *g, const struct raft_entry *e,
                     struct rt_request *waiter, const struct raft_conf_state *conf)
{
    struct rt_apply_group *ag = rt_apply_job_group(job, g);
    if (ag == NULL)
        return -1;
    if ((ag->n_entries & (ag->n_entries - 1)) == 0) { /* 0, 1, 2, 4, ...: grow */
        size_t cap = ag->n_entries ? ag->n_entries * 2 : 1;
        struct rt_apply_entry *ne = realloc(ag->entries, cap * sizeof(*ne));
        if (ne == NULL)
            return -1;
        ag->entries = ne;
    }
    if (job->arena_len + e->data.len > job->arena_cap) {
        size_t cap = job->arena_cap ? job->arena_cap : 4096;
        while (cap < job->arena_len + e->data.len)
            cap *= 2;
        uint8_t *na = realloc(job->arena, cap);
        if (na == NULL)
            return -1;
        job->arena = na;
        job->arena_cap = cap;
    }
    struct rt_apply_entry *ae = &ag->entries[ag->n_entries++];
    job->n_entries++;
    ae->index = e->index;
    ae->term = e->term;
    ae->len = e->data.len;
    ae->data = (const uint8_t *)(uintptr_t)job->arena_len; /* offset until submit */
    if (e->data.len > 0)
        memcpy(job->arena + job->arena_len, e->data.base, e->data.len);
    job->arena_len += e->data.len;
    ae->waiter = waiter;
    ae->conf = conf != NULL;
    if (conf != NULL)
        ae->conf_state = *conf;
    return 0;
}

static void finish_proposal(struct rt_request *r, struct slot_result *res)
{
    if (res->err.code != SLOTD_OK)
        rpc_call_fail(r->call, &res->err);
    else
        rpc_call_reply_bytes(r->call, res->resp, res->resp_len);
    free(res->resp);
    free(r);
}

static void serve_read(struct runtime *rt, struct rt_request *r)
{
    struct slotd_error err;
    uint8_t *buf = NULL;
    size_t blen = 0;
    /* A hash slot this replica does not own (any more: a migration moved it) has no rows here
     * to read; the client refreshes its route instead of seeing the slot empty. */
    if (!slot_group_owns(&rt->groups[r->group].fsm_state, r->hash_slot)) {
        slotd_error_set(&err, SLOTD_EWRONG_GROUP,
                        "group %u does not own hash slot %u (the route moved it); refresh the "
                        "route and retry",
                        r->group, r->hash_slot);
        rpc_call_fail(r->call, &err);
        free(r);
        return;
    }
    /* r->index: the group's applied index after this job */
    if (slot_serve_read(rt->store, rt->groups[r->group].fsm_state.owned, r->hash_slot, r->data,
                        r->len, r->group, r->index, r->term, &buf, &blen, &err) != 0)
        rpc_call_fail(r->call, &err);
    else
        rpc_call_reply_bytes(r->call, buf, blen);
    free(buf);
    free(r);
}

/* The apply stage's thread: apply every group's entries into one fsm batch, write it,
 * complete proposals, then serve the reads this job carries. */
static void apply_work(struct rt_stage_item *it)
{
    struct rt_apply_job *job = (struct rt_apply_job *)it;
    struct runtime *rt = job->rt;
    RT_ASSERT_NOT_LOOP(rt);
    size_t n_waiting = 0;
    for (size_t i = 0; i < job->n_groups; i++)
        for (size_t j = 0; j < job->groups[i].n_entries; j++)
            n_waiting += job->groups[i].entries[j].waiter != NULL;
    struct slot_result *results = calloc(n_waiting ? n_waiting : 1, sizeof(*results));
    struct rt_request **waiters = calloc(n_waiting ? n_waiting : 1, sizeof(*waiters));
    size_t k = 0;
    int rc = results && waiters ? 0 : STORE_ENOMEM;

    slot_fsm_begin(rt->fsm);
    uint8_t reseq[RT_GROUPS_CAP] = {0}; /* groups whose owned slots changed: read_seq is odd */
    for (size_t i = 0; i < job->n_groups && rc == 0; i++) {
        struct rt_apply_group *ag = &job->groups[i];
        struct rt_group *g = ag->g;
        uint8_t owned_before[32];
        memcpy(owned_before, g->fsm_state.owned, sizeof(owned_before));
        for (size_t j = 0; j < ag->n_entries && rc == 0; j++) {
            struct rt_apply_entry *e = &ag->entries[j];
            struct slot_result *out = e->waiter ? &results[k] : NULL;
            if (e->conf) {
                g->apply_conf = e->conf_state;
                if (g->id == 0)
                    rt_ctl_apply_conf(rt, e->index);
            } else if (g->id == 0) {
                rc = rt_ctl_apply_entry(rt, e->index, e->data, e->len, out);
            } else {
                rc =
                    slot_fsm_apply(rt->fsm, &g->fsm_state, e->index, e->term, e->data, e->len, out);
            }
            if (e->waiter)
                waiters[k++] = e->waiter;
            g->apply_index = e->index;
            g->apply_term = e->term;
        }
        if (ag->n_entries == 0)
            continue;
        if (g->id == 0) /* the controller saves its state and applied index itself, synced */
            rc = rc ? rc : rt_ctl_apply_finish(rt, &job->ctl_pub);
        else
            slot_fsm_set_applied(rt->fsm, g->id, ag->entries[ag->n_entries - 1].index);
        if (g->id != 0 && memcmp(owned_before, g->fsm_state.owned, sizeof(owned_before)) != 0) {
            atomic_fetch_add_explicit(&g->read_seq, 1, memory_order_seq_cst); /* odd */
            reseq[g->id] = 1;
        }
        if (g->id != 0)
            rt_facts_publish_slots(g);
    }
    if (rc == 0)
        rc = slot_fsm_commit_sync(rt->fsm, job->sync_fsm);
    for (size_t i = 0; i < RT_GROUPS_CAP; i++) /* even: the rows are written (or we abort) */
        if (reseq[i])
            atomic_fetch_add_explicit(&rt->groups[i].read_seq, 1, memory_order_release);
    if (rc == 0 && job->sync_fsm)
        SLOTD_FAULT_NOTE_FSM_SYNCED(rt->data_dir);
    if (rc == 0 && job->capture != NULL && rt_snap_capture_rows(rt, job->capture) != 0)
        job->capture->captured = false; /* reported as a failed send */
    if (rc != 0) {
        /* The raft log is durable: a restart replays from the applied index. */
        RT_LOG("fatal", "msg=\"apply failed\" err=\"%s\" detail=\"%s\"", store_strerror(rc),
               store_errmsg(rt->store));
        abort();
    }
    SLOTD_CRASH_POINT("apply_after_fsm_commit"); /* rows written, nobody answered or published */
    rt_watch_publish(rt, job); /* the changes, before any answer: a watcher sees an acked put */
    /* Publish the applied indexes before any answer: a caller told "applied at i" must not then
     * read, on a gRPC thread (read_local.c), a group whose applied index is still below i. The
     * loop stores the same values again in apply_done; removals and installs wait for no job. */
    for (size_t i = 0; i < job->n_groups; i++) {
        struct rt_apply_group *ag = &job->groups[i];
        if (ag->n_entries > 0)
            atomic_store_explicit(&ag->g->applied, ag->entries[ag->n_entries - 1].index,
                                  memory_order_release);
    }
    /* What apply_done may count as durable: this thread is the only writer of applied while
     * jobs run (opens, installs and removals wait for an idle stage). */
    job->applied0 = atomic_load_explicit(&rt->groups[0].applied, memory_order_relaxed);
    if (job->sync_fsm && job->durable != NULL)
        for (size_t i = 1; i < RT_GROUPS_CAP; i++)
            job->durable[i] = atomic_load_explicit(&rt->groups[i].applied, memory_order_relaxed);
    for (size_t i = 0; i < k; i++)
        finish_proposal(waiters[i], &results[i]);
    struct rt_request *r;
    while ((r = rt_list_pop(&job->reads)) != NULL)
        serve_read(rt, r);
    free(results);
    free(waiters);
}

/* The loop, for each finished job in order; the stage may already run the next ones. */
static void apply_done(struct rt_stage_item *it)
{
    struct rt_apply_job *job = (struct rt_apply_job *)it;
    struct runtime *rt = job->rt;
    RT_ASSERT_LOOP(rt);
    size_t entries = 0;
    for (size_t i = 0; i < job->n_groups; i++) {
        struct rt_apply_group *ag = &job->groups[i];
        ag->g->apply_jobs--;
        if (ag->n_entries > 0)
            metrics_gauge_set(ag->g->metrics.applied,
                              (int64_t)ag->entries[ag->n_entries - 1].index);
        entries += ag->n_entries;
    }
    if (entries > 0)
        metrics_histogram_observe(rt->metrics.apply_entries, (double)entries);
    if (job->sync_fsm && job->durable != NULL) /* every fsm write up to this job is on disk */
        for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++)
            if (job->durable[i] > rt->groups[i].durable_applied)
                rt->groups[i].durable_applied = job->durable[i];
    if (job->applied0 > rt->groups[0].durable_applied) /* its state save is synced */
        rt->groups[0].durable_applied = job->applied0;
    if (job->capture != NULL) {
        rt_snap_captured(rt, job->capture);
        rt_snap_kick(rt);
    }
    if (job->ctl_pub != NULL) {
        rt_ctl_publish(rt, job->ctl_pub);
        job->ctl_pub = NULL;
    }
    rt_apply_job_free(job);
    rt->hooks.pump(rt);
    rt->hooks.stages_close_idle(rt);
}

int rt_apply_init(struct runtime *rt)
{
    return rt_stage_init(&rt->apply, &rt->loop, "slotd-apply", apply_work, apply_done);
}

/* Jobs run one at a time, in submission order, so each group applies in
 * index order and a read runs after every entry submitted before it. */
void rt_apply_submit(struct runtime *rt, struct rt_apply_job *job)
{
    RT_ASSERT_LOOP(rt);
    for (size_t i = 0; i < job->n_groups; i++) {
        struct rt_apply_group *ag = &job->groups[i];
        ag->g->apply_jobs++;
        /* The raft log is compacted only below the fsm's durable applied index, so a power
         * loss (unsynced fsm writes lost) never needs deleted entries. Sync the fsm when a
         * compaction is due by the applied index but blocked by the durable one: about once
         * per compact_entries entries of a group. */
        uint64_t due = ag->g->first_index + rt->opts.compact_entries + rt->opts.compact_tail;
        if (ag->n_entries > 0 && ag->g->id != 0 && ag->entries[ag->n_entries - 1].index >= due &&
            ag->g->durable_applied < due)
            job->sync_fsm = true;
        for (size_t j = 0; j < ag->n_entries; j++)
            ag->entries[j].data = job->arena + (uintptr_t)ag->entries[j].data;
    }
    if (job->sync_fsm && job->durable == NULL) {
        job->durable = calloc(RT_GROUPS_CAP, sizeof(*job->durable));
        if (job->durable == NULL) /* durable_applied then moves at a later synced job */
            RT_LOG("warn", "msg=\"out of memory: a synced apply job does not advance the "
                           "durable applied index\"");
    }
    rt_stage_submit(&rt->apply, &job->item);
}
