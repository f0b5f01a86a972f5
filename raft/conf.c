/* conf.c - membership: single-server conf changes (thesis 4.1), proposing and applying them. */
#include "raft_int.h"

static bool raft__ids_has(const raft_id *ids, uint32_t n, raft_id id)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] == id) {
            return true;
        }
    }
    return false;
}

static void raft__ids_remove(raft_id *ids, uint32_t *n, raft_id id)
{
    RAFT_ASSERT(*n <= RAFT_MEMBERS_MAX);
    for (uint32_t i = 0; i < *n; i++) {
        if (ids[i] == id) {
            memmove(ids + i, ids + i + 1, (*n - i - 1) * sizeof(*ids));
            (*n)--;
            return;
        }
    }
}

bool raft__conf_has_voter(const struct raft_conf_state *cs, raft_id id)
{
    return raft__ids_has(cs->voters, cs->n_voters, id);
}

bool raft__conf_has_learner(const struct raft_conf_state *cs, raft_id id)
{
    return raft__ids_has(cs->learners, cs->n_learners, id);
}

/* 0 if cs is well formed: bounded, no zero or duplicate id, voters and learners disjoint. */
int raft__conf_validate(const struct raft_conf_state *cs)
{
    if (cs->n_voters + (uint64_t)cs->n_learners > RAFT_MEMBERS_MAX) {
        return RAFT_ECONF;
    }
    for (uint32_t i = 0; i < cs->n_voters; i++) {
        if (cs->voters[i] == 0 || raft__ids_has(cs->voters, i, cs->voters[i]) ||
            raft__conf_has_learner(cs, cs->voters[i])) {
            return RAFT_ECONF;
        }
    }
    for (uint32_t i = 0; i < cs->n_learners; i++) {
        if (cs->learners[i] == 0 || raft__ids_has(cs->learners, i, cs->learners[i])) {
            return RAFT_ECONF;
        }
    }
    return 0;
}

/* 0 if cc is a valid change of cs, else RAFT_ECONF. */
int raft__conf_check(const struct raft_conf_state *cs, const struct raft_conf_change *cc)
{
    bool voter = raft__conf_has_voter(cs, cc->node);
    bool learner = raft__conf_has_learner(cs, cc->node);
    bool full = cs->n_voters + cs->n_learners >= RAFT_MEMBERS_MAX;
    if (cc->node == 0) {
        return RAFT_ECONF;
    }
    switch (cc->type) {
    case RAFT_CC_ADD_VOTER:
    case RAFT_CC_ADD_LEARNER:
        return (voter || learner || full) ? RAFT_ECONF : 0;
    case RAFT_CC_PROMOTE:
        return learner ? 0 : RAFT_ECONF;
    case RAFT_CC_REMOVE:
        if (voter && cs->n_voters == 1) {
            return RAFT_ECONF; /* a group keeps at least one voter */
        }
        return (voter || learner) ? 0 : RAFT_ECONF;
    default:
        return RAFT_ECONF;
    }
}

/* Applies a change raft__conf_check accepted. */
static void raft__conf_apply(struct raft_conf_state *cs, const struct raft_conf_change *cc)
{
    RAFT_ASSERT(raft__conf_check(cs, cc) == 0);
    switch (cc->type) {
    case RAFT_CC_ADD_VOTER:
        cs->voters[cs->n_voters++] = cc->node;
        break;
    case RAFT_CC_ADD_LEARNER:
        cs->learners[cs->n_learners++] = cc->node;
        break;
    case RAFT_CC_PROMOTE:
        raft__ids_remove(cs->learners, &cs->n_learners, cc->node);
        cs->voters[cs->n_voters++] = cc->node;
        break;
    default:
        raft__ids_remove(cs->voters, &cs->n_voters, cc->node);
        raft__ids_remove(cs->learners, &cs->n_learners, cc->node);
        break;
    }
    RAFT_ASSERT(raft__conf_validate(cs) == 0 && cs->n_voters > 0);
}

static int raft__propose_conf_change(struct raft *r, const struct raft_conf_change *cc,
                                     raft_index *index)
{
    if (r->role != RAFT_LEADER) {
        return r->lead == 0 ? RAFT_ENOLEADER : RAFT_ENOTLEADER;
    }
    if (r->transferee != 0) {
        return RAFT_ETRANSFER;
    }
    /* thesis 4.1: one change at a time; a new leader first commits an entry of its term so that
     * no change proposed by an earlier leader can still be pending (the etcd/thesis 4.1 fix) */
    if (r->pending_conf_index > r->log.applied || !raft__committed_in_term(r)) {
        return RAFT_ECONFPENDING;
    }
    int rv = raft__conf_check(&r->conf, cc);
    if (rv != 0) {
        return rv;
    }
    uint8_t buf[RAFT_CONF_CHANGE_ENCODED_LEN];
    raft_conf_change_encode(cc, buf);
    struct raft_buf data = {.base = buf, .len = sizeof(buf)};
    raft_index idx = 0;
    rv = raft__append_entries(r, RAFT_ENTRY_CONF_CHANGE, &data, 1, &idx);
    if (rv != 0) {
        return rv;
    }
    r->pending_conf_index = idx;
    if (index != NULL) {
        *index = idx;
    }
    return 0;
}

int raft_propose_conf_change(struct raft *r, const struct raft_conf_change *cc, raft_index *index)
{
    RAFT_ASSERT(r != NULL && cc != NULL);
    int rv = raft__propose_conf_change(r, cc, index);
    RAFT__CHECK_CALL(r, "raft_propose_conf_change");
    return rv;
}

/* The leader's reaction to a new configuration: quorums changed, members came or went. */
static void raft__conf_leader_update(struct raft *r)
{
    if (!raft__is_voter(r, r->id)) {
        /* a leader that removed itself steps down once the change is applied */
        raft__become_follower(r, r->term, 0);
        return;
    }
    if (r->transferee != 0 && !raft__is_voter(r, r->transferee)) {
        raft__abort_transfer(r);
    }
    raft__maybe_commit(r);
    raft__read_on_ack(r, 0, 0); /* the read quorum may now be reached */
    raft__bcast_append(r);
}

static int raft__apply_conf_change(struct raft *r, const struct raft_entry *entry,
                                   struct raft_conf_state *out)
{
    struct raft_conf_change cc;
    int rv = RAFT_EINVAL;
    if (entry->index != 0 && entry->index <= r->conf_index) {
        /* Already reflected: a snapshot restored (possibly between raft_ready and
         * this call) or this entry applied before covers it. */
        if (out != NULL) {
            *out = r->conf;
        }
        return 0;
    }
    if (entry->type == RAFT_ENTRY_CONF_CHANGE) {
        rv = raft_conf_change_decode(entry->data.base, entry->data.len, &cc);
    }
    if (rv == 0) {
        /* the same check runs on every replica at the same log position: all skip alike */
        rv = raft__conf_check(&r->conf, &cc) != 0 ? RAFT_EINVAL : 0;
    }
    if (entry->index > r->conf_index) {
        r->conf_index = entry->index; /* skipped entries count as applied too */
    }
    if (rv == 0) {
        raft__conf_apply(&r->conf, &cc);
        raft__rebuild_progress(r);
        if (r->role == RAFT_LEADER) {
            raft__conf_leader_update(r);
        }
    }
    if (out != NULL) {
        *out = r->conf;
    }
    return rv;
}

int raft_apply_conf_change(struct raft *r, const struct raft_entry *entry,
                           struct raft_conf_state *out)
{
    RAFT_ASSERT(r != NULL && entry != NULL);
    /* host contract step 4: only committed conf change entries are applied here */
    RAFT_ASSERT(entry->type == RAFT_ENTRY_CONF_CHANGE && entry->index <= r->log.committed);
    int rv = raft__apply_conf_change(r, entry, out);
    RAFT__CHECK_CALL(r, "raft_apply_conf_change");
    return rv;
}
