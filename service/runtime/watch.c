/* watch.c - each hosted group's watch history: the key and typed-row changes of its recent entries, long polls on it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "service/runtime/request.h"
#include "service/runtime/watch.h"

/* The history of one group, in index order, as a circular array of events. APPLY appends after
 * its fsm commit; the loop resets it (open, snapshot install, removal) and expires waiters; GRPC
 * threads poll it. Guarded by mu. */
struct rt_watch_waiter {
    struct rt_watch_waiter *next;
    struct runtime_watch_query q; /* key and prefix point into buf */
    int64_t deadline_ms;
    runtime_watch_cb cb;
    void *arg;
    uint8_t buf[];
};

struct rt_watch_ring {
    pthread_mutex_t mu;
    bool open;        /* hosted and its history started */
    uint64_t start;   /* every change of an entry after start and through `through` is here */
    uint64_t through; /* the applied index the history is complete through */
    struct slot_event **ev;
    size_t cap, head, n; /* ev[(head + i) % cap], i < n, oldest first */
    size_t bytes;
    struct rt_watch_waiter *waiters;
    size_t n_waiters;
};

/* The notifier: the thread that answers waiting polls when their group's history grew. The
 * apply stage only appends and marks the group here, so the work of many watchers (matching,
 * packing, sending) never runs on the apply path; while the notifier answers one round, the
 * next changes gather and go out together. */
struct rt_watch_notifier {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t thread;
    bool started, stop, any;
    bool dirty[RT_GROUPS_CAP]; /* under mu: the group's history grew while polls waited */
};

static void wake_group(struct runtime *rt, uint32_t group);

static void *notifier_main(void *arg)
{
    struct runtime *rt = arg;
    struct rt_watch_notifier *n = rt->watch_notifier;
    prctl(PR_SET_NAME, "slotd-watch");
    bool dirty[RT_GROUPS_CAP];
    pthread_mutex_lock(&n->mu);
    for (;;) {
        while (!n->any && !n->stop)
            pthread_cond_wait(&n->cond, &n->mu);
        if (n->stop)
            break;
        memcpy(dirty, n->dirty, sizeof(dirty));
        memset(n->dirty, 0, sizeof(n->dirty));
        n->any = false;
        pthread_mutex_unlock(&n->mu);
        for (uint32_t g = 1; g < RT_GROUPS_CAP; g++)
            if (dirty[g])
                wake_group(rt, g);
        pthread_mutex_lock(&n->mu);
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

static void notify(struct runtime *rt, uint32_t group)
{
    struct rt_watch_notifier *n = rt->watch_notifier;
    pthread_mutex_lock(&n->mu);
    n->dirty[group] = true;
    if (!n->any) {
        n->any = true;
        pthread_cond_signal(&n->cond);
    }
    pthread_mutex_unlock(&n->mu);
}

/* Stops and joins the notifier: no poll is answered by it afterwards. */
static void notifier_stop(struct runtime *rt)
{
    struct rt_watch_notifier *n = rt->watch_notifier;
    if (n == NULL || !n->started)
        return;
    pthread_mutex_lock(&n->mu);
    n->stop = true;
    pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->thread, NULL);
    n->started = false;
}

static size_t ev_bytes(const struct slot_event *e)
{
    return sizeof(*e) + e->key_len + e->value_len;
}

static struct slot_event *ring_at(const struct rt_watch_ring *r, size_t i)
{
    return r->ev[(r->head + i) % r->cap];
}

int rt_watch_init(struct runtime *rt)
{
    if (rt->opts.watch_history_bytes == 0)
        return 0;
    rt->watch = calloc(RT_GROUPS_CAP, sizeof(*rt->watch));
    if (rt->watch == NULL)
        return -1;
    for (size_t i = 0; i < RT_GROUPS_CAP; i++)
        pthread_mutex_init(&rt->watch[i].mu, NULL);
    struct rt_watch_notifier *n = calloc(1, sizeof(*n));
    rt->watch_notifier = n;
    if (n == NULL)
        return -1;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cond, NULL);
    if (pthread_create(&n->thread, NULL, notifier_main, rt) != 0)
        return -1;
    n->started = true;
    slot_fsm_set_events(rt->fsm, true);
    return 0;
}

static void ring_clear(struct rt_watch_ring *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(ring_at(r, i));
    r->head = r->n = r->bytes = 0;
}

/* Fails every waiter of the list with err (outside any ring lock). */
static void fail_waiters(struct rt_watch_waiter *w, const struct slotd_error *err)
{
    while (w != NULL) {
        struct rt_watch_waiter *next = w->next;
        w->cb(w->arg, err, NULL);
        free(w);
        w = next;
    }
}

/* Stops every history: waiting polls fail SHUTTING_DOWN, new ones WRONG_GROUP. */
void rt_watch_close(struct runtime *rt)
{
    if (rt->watch == NULL)
        return;
    notifier_stop(rt);
    struct slotd_error err;
    slotd_error_set(&err, SLOTD_ESHUTTING_DOWN, "the node is shutting down");
    for (size_t i = 0; i < RT_GROUPS_CAP; i++) {
        struct rt_watch_ring *r = &rt->watch[i];
        pthread_mutex_lock(&r->mu);
        struct rt_watch_waiter *w = r->waiters;
        r->waiters = NULL;
        r->n_waiters = 0;
        r->open = false;
        ring_clear(r);
        pthread_mutex_unlock(&r->mu);
        fail_waiters(w, &err);
    }
}

void rt_watch_free(struct runtime *rt)
{
    if (rt->watch == NULL)
        return;
    rt_watch_close(rt);
    for (size_t i = 0; i < RT_GROUPS_CAP; i++) {
        free(rt->watch[i].ev);
        pthread_mutex_destroy(&rt->watch[i].mu);
    }
    free(rt->watch);
    rt->watch = NULL;
    if (rt->watch_notifier != NULL) {
        pthread_mutex_destroy(&rt->watch_notifier->mu);
        pthread_cond_destroy(&rt->watch_notifier->cond);
        free(rt->watch_notifier);
        rt->watch_notifier = NULL;
    }
}

/* The history of group restarts at index (open, snapshot install), or stops (hosted false):
 * changes through index are no longer here. Waiters behind the new start fail COMPACTED (or,
 * when the group leaves, WRONG_GROUP) so their watches ask another replica. */
void rt_watch_reset(struct runtime *rt, uint32_t group, uint64_t index, bool hosted)
{
    if (rt->watch == NULL)
        return;
    struct rt_watch_ring *r = &rt->watch[group];
    pthread_mutex_lock(&r->mu);
    ring_clear(r);
    r->open = hosted;
    r->start = r->through = index;
    struct rt_watch_waiter *failed = NULL, **pp = &r->waiters;
    while (*pp != NULL) {
        struct rt_watch_waiter *w = *pp;
        if (!hosted || w->q.after < index) {
            *pp = w->next;
            w->next = failed;
            failed = w;
            r->n_waiters--;
        } else {
            pp = &w->next;
        }
    }
    pthread_mutex_unlock(&r->mu);
    struct slotd_error err;
    if (!hosted)
        slotd_error_set(&err, SLOTD_EWRONG_GROUP, "node %llu no longer hosts group %u",
                        (unsigned long long)rt->opts.node_id, group);
    else
        slotd_error_compacted(&err, group, index,
                              "group %u: a snapshot replaced node %llu's history through %llu",
                              group, (unsigned long long)rt->opts.node_id,
                              (unsigned long long)index);
    fail_waiters(failed, &err);
}

static bool matches(const struct runtime_watch_query *q, const struct slot_event *e)
{
    if (q->typed_kind != 0)
        return e->table != SLOT_TABLE_KV &&
               slot_typed_watch_match(q->typed_kind, q->key, q->key_len, e->table, e->key,
                                      e->key_len);
    if (e->table != SLOT_TABLE_KV)
        return false;
    if (q->key_len > 0)
        return e->key_len == q->key_len && memcmp(e->key, q->key, q->key_len) == 0;
    return e->key_len >= q->prefix_len && memcmp(e->key, q->prefix, q->prefix_len) == 0;
}

/* An answer being built: the matching events after `after`, whole entries only, at most
 * max_bytes of keys and values (at least one entry). */
struct collect {
    Slotd__Internal__V1__WatchPollResponse resp;
    Slotd__V1__WatchEvent *events;
    Slotd__V1__WatchEvent **ptrs;
    uint8_t *arena;
    size_t n, cap, used, arena_cap;
    bool truncated;
};

static void collect_free(struct collect *c)
{
    free(c->events);
    free(c->ptrs);
    free(c->arena);
}

/* The events of ring positions [from, to) that match q, with index > q->after. Under r->mu.
 * Returns -1 when out of memory. */
static int collect_range(struct collect *c, const struct rt_watch_ring *r, size_t from, size_t to,
                         const struct runtime_watch_query *q)
{
    /* Pass 1: how many and how many bytes, stopping at the entry that would go over. */
    size_t n = 0, bytes = 0, stop = to;
    uint64_t last_index = 0;
    for (size_t i = from; i < to; i++) {
        const struct slot_event *e = ring_at(r, i);
        if (e->index <= q->after || !matches(q, e))
            continue;
        size_t b = e->key_len + (q->keys_only ? 0 : e->value_len);
        if (e->index != last_index && n > 0 && bytes + b > q->max_bytes) {
            stop = i;
            c->truncated = true;
            break;
        }
        n++;
        bytes += b;
        last_index = e->index;
    }
    if (n == 0)
        return 0;
    c->events = calloc(n, sizeof(*c->events));
    c->ptrs = calloc(n, sizeof(*c->ptrs));
    c->arena = malloc(bytes ? bytes : 1);
    if (c->events == NULL || c->ptrs == NULL || c->arena == NULL)
        return -1;
    for (size_t i = from; i < stop; i++) {
        const struct slot_event *e = ring_at(r, i);
        if (e->index <= q->after || !matches(q, e))
            continue;
        Slotd__V1__WatchEvent *w = &c->events[c->n];
        slotd__v1__watch_event__init(w);
        w->type = e->deleted ? SLOTD__V1__WATCH_EVENT_TYPE__WATCH_EVENT_TYPE_DELETE
                             : SLOTD__V1__WATCH_EVENT_TYPE__WATCH_EVENT_TYPE_PUT;
        w->key.data = c->arena + c->used;
        w->key.len = e->key_len;
        memcpy(c->arena + c->used, e->key, e->key_len);
        c->used += e->key_len;
        if (!q->keys_only && e->value_len > 0) {
            w->value.data = c->arena + c->used;
            w->value.len = e->value_len;
            memcpy(c->arena + c->used, e->value, e->value_len);
            c->used += e->value_len;
        }
        w->version = e->version;
        w->group_id = e->group;
        w->index = e->index;
        w->table = e->table == SLOT_TABLE_KV ? SLOTD__V1__TYPED_TABLE__TYPED_TABLE_UNSPECIFIED
                                             : (Slotd__V1__TypedTable)e->table;
        c->ptrs[c->n] = w;
        c->n++;
    }
    c->resp.events = c->ptrs;
    c->resp.n_events = c->n;
    if (c->truncated)
        c->resp.through_index = c->events[c->n - 1].index;
    return 0;
}

/* The first ring position whose event's index is above `after` (binary search). Under r->mu. */
static size_t first_after(const struct rt_watch_ring *r, uint64_t after)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring_at(r, mid)->index <= after)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void answer(runtime_watch_cb cb, void *arg, struct collect *c, uint64_t through)
{
    if (!c->truncated)
        c->resp.through_index = through;
    cb(arg, NULL, &c->resp);
    collect_free(c);
}

static void answer_oom(runtime_watch_cb cb, void *arg, struct collect *c)
{
    collect_free(c);
    struct slotd_error err;
    slotd_error_set(&err, SLOTD_EINTERNAL, "watch: out of memory");
    cb(arg, &err, NULL);
}

int runtime_watch_poll(struct runtime *rt, const struct runtime_watch_query *q,
                       runtime_watch_cb cb, void *arg, struct slotd_error *err)
{
    if (rt->watch == NULL) {
        slotd_error_set(err, SLOTD_EUNIMPLEMENTED,
                        "node %llu keeps no watch history (--watch-history-bytes 0)",
                        (unsigned long long)rt->opts.node_id);
        return -1;
    }
    if (q->group == 0 || q->group >= RT_GROUPS_CAP) {
        slotd_error_field(err, "group_id", RT_GROUPS_CAP - 1, "group_id %u is not a slot group",
                          q->group);
        return -1;
    }
    struct rt_watch_ring *r = &rt->watch[q->group];
    struct collect c = {.resp = SLOTD__INTERNAL__V1__WATCH_POLL_RESPONSE__INIT};
    pthread_mutex_lock(&r->mu);
    if (!r->open) {
        pthread_mutex_unlock(&r->mu);
        slotd_error_set(err, SLOTD_EWRONG_GROUP, "node %llu hosts no replica of group %u",
                        (unsigned long long)rt->opts.node_id, q->group);
        return -1;
    }
    if (q->from_now) {
        uint64_t through = r->through;
        pthread_mutex_unlock(&r->mu);
        answer(cb, arg, &c, through);
        return 0;
    }
    if (q->after < r->start) {
        uint64_t start = r->start;
        pthread_mutex_unlock(&r->mu);
        slotd_error_compacted(err, q->group, start,
                              "group %u: changes through index %llu are no longer kept on node "
                              "%llu; resume at %llu or later",
                              q->group, (unsigned long long)start,
                              (unsigned long long)rt->opts.node_id, (unsigned long long)start);
        return -1;
    }
    if (collect_range(&c, r, first_after(r, q->after), r->n, q) != 0) {
        pthread_mutex_unlock(&r->mu);
        answer_oom(cb, arg, &c);
        return 0;
    }
    uint64_t through = r->through > q->after ? r->through : q->after;
    if (c.n > 0 || q->wait_ms == 0) {
        pthread_mutex_unlock(&r->mu);
        answer(cb, arg, &c, through);
        return 0;
    }
    if (r->n_waiters >= RT_WATCH_WAITERS_MAX) {
        pthread_mutex_unlock(&r->mu);
        collect_free(&c);
        slotd_error_set(err, SLOTD_EQUEUE_FULL,
                        "group %u: %u watch polls already wait on node %llu", q->group,
                        RT_WATCH_WAITERS_MAX, (unsigned long long)rt->opts.node_id);
        err->retry_after_ms = 500;
        return -1;
    }
    struct rt_watch_waiter *w = malloc(sizeof(*w) + q->key_len + q->prefix_len);
    if (w == NULL) {
        pthread_mutex_unlock(&r->mu);
        answer_oom(cb, arg, &c);
        return 0;
    }
    w->q = *q;
    /* from here on `after` means: checked through, nothing matched */
    w->q.after = through;
    if (q->key_len > 0)
        memcpy(w->buf, q->key, q->key_len);
    if (q->prefix_len > 0)
        memcpy(w->buf + q->key_len, q->prefix, q->prefix_len);
    w->q.key = w->buf;
    w->q.prefix = w->buf + q->key_len;
    w->deadline_ms = rt_now_ms() + q->wait_ms;
    w->cb = cb;
    w->arg = arg;
    w->next = r->waiters;
    r->waiters = w;
    r->n_waiters++;
    pthread_mutex_unlock(&r->mu);
    collect_free(&c);
    return 0;
}

/* A waiter whose answer was built under the lock, answered after it. */
struct ready {
    struct ready *next;
    struct rt_watch_waiter *w;
    struct collect c;
    uint64_t through;
    bool oom;
};

static void answer_ready(struct ready *rd)
{
    while (rd != NULL) {
        struct ready *next = rd->next;
        if (rd->oom)
            answer_oom(rd->w->cb, rd->w->arg, &rd->c);
        else
            answer(rd->w->cb, rd->w->arg, &rd->c, rd->through);
        free(rd->w);
        free(rd);
        rd = next;
    }
}

static int ring_push(struct rt_watch_ring *r, struct slot_event *e)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        struct slot_event **ne = malloc(cap * sizeof(*ne));
        if (ne == NULL)
            return -1;
        for (size_t i = 0; i < r->n; i++)
            ne[i] = ring_at(r, i);
        free(r->ev);
        r->ev = ne;
        r->cap = cap;
        r->head = 0;
    }
    r->ev[(r->head + r->n) % r->cap] = e;
    r->n++;
    r->bytes += ev_bytes(e);
    return 0;
}

/* Drops the oldest entries' changes until the history fits its bound. */
static void ring_trim(struct rt_watch_ring *r, size_t max_bytes)
{
    while (r->n > 0 && r->bytes > max_bytes) {
        uint64_t index = ring_at(r, 0)->index;
        while (r->n > 0 && ring_at(r, 0)->index == index) {
            struct slot_event *e = ring_at(r, 0);
            r->bytes -= ev_bytes(e);
            free(e);
            r->head = (r->head + 1) % r->cap;
            r->n--;
        }
        r->start = index;
    }
}

/* Appends one group's new changes (list, possibly NULL; consumed) and moves its history to
 * `through`; the notifier answers the waiters the new changes match. */
void rt_watch_append(struct runtime *rt, uint32_t group, struct slot_event *list,
                     uint64_t through)
{
    struct rt_watch_ring *r = &rt->watch[group];
    pthread_mutex_lock(&r->mu);
    if (!r->open || through <= r->through) {
        pthread_mutex_unlock(&r->mu);
        slot_events_free(list);
        return;
    }
    size_t old_n = r->n;
    bool lost = false;
    while (list != NULL) {
        struct slot_event *e = list;
        list = list->next;
        e->next = NULL;
        if (!lost && ring_push(r, e) == 0)
            continue;
        free(e);
        lost = true;
    }
    if (lost) { /* out of memory: the history cannot be trusted before `through` */
        ring_clear(r);
        r->start = through;
        old_n = 0;
    }
    r->through = through;
    if (lost) {
        /* every waiter is behind the new start */
        struct rt_watch_waiter *w = r->waiters;
        r->waiters = NULL;
        r->n_waiters = 0;
        pthread_mutex_unlock(&r->mu);
        struct slotd_error err;
        slotd_error_compacted(&err, group, through, "group %u: watch history lost (out of memory)",
                              group);
        fail_waiters(w, &err);
        return;
    }
    bool waiting = r->n_waiters > 0 && r->n > old_n;
    ring_trim(r, rt->opts.watch_history_bytes);
    pthread_mutex_unlock(&r->mu);
    if (waiting)
        notify(rt, group); /* the notifier answers them, not this (apply) thread */
}

/* The notifier's round for one group: answers every waiter its new changes match; one whose
 * position the history no longer covers (trimmed before the notifier came) fails COMPACTED. */
static void wake_group(struct runtime *rt, uint32_t group)
{
    struct rt_watch_ring *r = &rt->watch[group];
    struct ready *ready = NULL;
    struct rt_watch_waiter *behind = NULL;
    pthread_mutex_lock(&r->mu);
    if (!r->open) { /* closed or reset: its waiters were answered then */
        pthread_mutex_unlock(&r->mu);
        return;
    }
    uint64_t start = r->start, through = r->through;
    for (struct rt_watch_waiter **pp = &r->waiters; *pp != NULL;) {
        struct rt_watch_waiter *w = *pp;
        if (w->q.after < r->start) {
            *pp = w->next;
            r->n_waiters--;
            w->next = behind;
            behind = w;
            continue;
        }
        struct collect c = {.resp = SLOTD__INTERNAL__V1__WATCH_POLL_RESPONSE__INIT};
        bool oom = collect_range(&c, r, first_after(r, w->q.after), r->n, &w->q) != 0;
        if (!oom && c.n == 0) {
            if (through > w->q.after) /* checked through here */
                w->q.after = through;
            pp = &w->next;
            continue;
        }
        struct ready *rd = calloc(1, sizeof(*rd));
        if (rd == NULL) {
            collect_free(&c); /* answered at its deadline instead */
            pp = &w->next;
            continue;
        }
        rd->c = c;
        rd->oom = oom;
        rd->w = w;
        rd->through = through;
        *pp = w->next;
        r->n_waiters--;
        rd->next = ready;
        ready = rd;
    }
    pthread_mutex_unlock(&r->mu);
    answer_ready(ready);
    if (behind != NULL) {
        struct slotd_error err;
        slotd_error_compacted(&err, group, start,
                              "group %u: the changes after the watch's position were trimmed "
                              "from node %llu's history before they could be sent; resume at "
                              "%llu or later",
                              group, (unsigned long long)rt->opts.node_id,
                              (unsigned long long)start);
        fail_waiters(behind, &err);
    }
}

/* APPLY, after the fsm commit of a job and before its answers: every applied group's changes
 * (slot_fsm_take_events) into its history, through the job's last index of the group. */
void rt_watch_publish(struct runtime *rt, struct rt_apply_job *job)
{
    if (rt->watch == NULL)
        return;
    struct slot_event *all = slot_fsm_take_events(rt->fsm);
    for (size_t i = 0; i < job->n_groups; i++) {
        struct rt_apply_group *ag = &job->groups[i];
        if (ag->n_entries == 0 || ag->g->id == 0)
            continue;
        uint32_t id = ag->g->id;
        /* take this group's events out of `all`, keeping their order */
        struct slot_event *mine = NULL, **mt = &mine, **pp = &all;
        while (*pp != NULL) {
            struct slot_event *e = *pp;
            if (e->group == id) {
                *pp = e->next;
                e->next = NULL;
                *mt = e;
                mt = &e->next;
            } else {
                pp = &e->next;
            }
        }
        rt_watch_append(rt, id, mine, ag->entries[ag->n_entries - 1].index);
    }
    slot_events_free(all); /* none expected: every event's group is in the job */
}

/* Loop, every tick: answers the waiters whose wait is over (no events, the position now). */
void rt_watch_expire(struct runtime *rt, int64_t now)
{
    if (rt->watch == NULL)
        return;
    for (size_t i = 1; i < RT_GROUPS_CAP; i++) {
        struct rt_watch_ring *r = &rt->watch[i];
        struct ready *ready = NULL;
        pthread_mutex_lock(&r->mu);
        for (struct rt_watch_waiter **pp = &r->waiters; *pp != NULL;) {
            struct rt_watch_waiter *w = *pp;
            struct ready *rd = w->deadline_ms <= now ? calloc(1, sizeof(*rd)) : NULL;
            if (rd == NULL) {
                pp = &w->next;
                continue;
            }
            rd->c.resp = (Slotd__Internal__V1__WatchPollResponse)SLOTD__INTERNAL__V1__WATCH_POLL_RESPONSE__INIT;
            rd->w = w;
            rd->through = w->q.after > r->through ? w->q.after : r->through;
            *pp = w->next;
            r->n_waiters--;
            rd->next = ready;
            ready = rd;
        }
        pthread_mutex_unlock(&r->mu);
        answer_ready(ready);
    }
}
