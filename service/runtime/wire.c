/* wire.c - the one adapter between raft core messages (raft/raft.h) and
 * slotd.internal.v1.RaftMessage. */
#include <stdlib.h>
#include <string.h>

#include "service/runtime/wire.h"

void rt_wire_conf_to_pb(const struct raft_conf_state *cs, Slotd__Internal__V1__ConfState *pb,
                        uint64_t *voters, uint64_t *learners)
{
    slotd__internal__v1__conf_state__init(pb);
    memcpy(voters, cs->voters, cs->n_voters * sizeof(uint64_t));
    memcpy(learners, cs->learners, cs->n_learners * sizeof(uint64_t));
    pb->n_voters = cs->n_voters;
    pb->voters = voters;
    pb->n_learners = cs->n_learners;
    pb->learners = learners;
}

int rt_wire_conf_from_pb(const Slotd__Internal__V1__ConfState *pb, struct raft_conf_state *cs)
{
    memset(cs, 0, sizeof(*cs));
    if (pb == NULL)
        return 0;
    if (pb->n_voters > RAFT_MEMBERS_MAX || pb->n_learners > RAFT_MEMBERS_MAX)
        return -1;
    cs->n_voters = (uint32_t)pb->n_voters;
    cs->n_learners = (uint32_t)pb->n_learners;
    if (pb->n_voters > 0) /* protobuf-c leaves empty repeated fields NULL */
        memcpy(cs->voters, pb->voters, pb->n_voters * sizeof(uint64_t));
    if (pb->n_learners > 0)
        memcpy(cs->learners, pb->learners, pb->n_learners * sizeof(uint64_t));
    return 0;
}

/* Builds the wire form of m in *pb; everything it points to is borrowed from
 * m or from the caller's scratch (*scratch, freed with free() after use). */
int rt_wire_msg_to_pb(uint32_t group, const struct raft_msg *m,
                      Slotd__Internal__V1__RaftMessage *pb, struct rt_wire_scratch *scratch)
{
    slotd__internal__v1__raft_message__init(pb);
    memset(scratch, 0, sizeof(*scratch));
    pb->group_id = group;
    pb->type = m->type;
    pb->from = m->from;
    pb->to = m->to;
    pb->term = m->term;
    pb->log_term = m->log_term;
    pb->index = m->index;
    pb->commit = m->commit;
    pb->reject = m->reject;
    pb->reject_hint = m->reject_hint;
    pb->context = m->context;
    if (m->n_entries > 0) {
        scratch->entries = malloc(m->n_entries * sizeof(*scratch->entries));
        scratch->entry_ptrs = malloc(m->n_entries * sizeof(*scratch->entry_ptrs));
        if (scratch->entries == NULL || scratch->entry_ptrs == NULL) {
            rt_wire_scratch_free(scratch);
            return -1;
        }
        for (size_t i = 0; i < m->n_entries; i++) {
            Slotd__Internal__V1__RaftEntry *e = &scratch->entries[i];
            slotd__internal__v1__raft_entry__init(e);
            e->term = m->entries[i].term;
            e->index = m->entries[i].index;
            e->type = m->entries[i].type;
            e->data.data = (uint8_t *)m->entries[i].data.base;
            e->data.len = m->entries[i].data.len;
            scratch->entry_ptrs[i] = e;
        }
        pb->n_entries = m->n_entries;
        pb->entries = scratch->entry_ptrs;
    }
    if (m->type == RAFT_MSG_SNAPSHOT) {
        slotd__internal__v1__snapshot_meta__init(&scratch->snap);
        scratch->snap.index = m->snapshot.meta.index;
        scratch->snap.term = m->snapshot.meta.term;
        rt_wire_conf_to_pb(&m->snapshot.meta.conf, &scratch->conf, scratch->voters,
                           scratch->learners);
        scratch->snap.conf = &scratch->conf;
        pb->snapshot = &scratch->snap;
    }
    return 0;
}

void rt_wire_scratch_free(struct rt_wire_scratch *scratch)
{
    free(scratch->entries);
    free(scratch->entry_ptrs);
    scratch->entries = NULL;
    scratch->entry_ptrs = NULL;
}

/* Fills *m from pb; m->entries (malloc'ed, caller frees with free()) borrow
 * pb's entry data. Snapshot data is left empty. */
int rt_wire_msg_from_pb(const Slotd__Internal__V1__RaftMessage *pb, struct raft_msg *m)
{
    memset(m, 0, sizeof(*m));
    if (pb->type >= RAFT_MSG_TYPE_COUNT_)
        return -1;
    m->type = (uint8_t)pb->type;
    m->from = pb->from;
    m->to = pb->to;
    m->term = pb->term;
    m->log_term = pb->log_term;
    m->index = pb->index;
    m->commit = pb->commit;
    m->reject = pb->reject;
    m->reject_hint = pb->reject_hint;
    m->context = pb->context;
    if (pb->n_entries > 0) {
        m->entries = malloc(pb->n_entries * sizeof(*m->entries));
        if (m->entries == NULL)
            return -1;
        for (size_t i = 0; i < pb->n_entries; i++) {
            const Slotd__Internal__V1__RaftEntry *e = pb->entries[i];
            m->entries[i].term = e->term;
            m->entries[i].index = e->index;
            m->entries[i].type = (uint8_t)e->type;
            m->entries[i].data.base = e->data.data;
            m->entries[i].data.len = e->data.len;
        }
        m->n_entries = pb->n_entries;
    }
    if (pb->snapshot != NULL) {
        m->snapshot.meta.index = pb->snapshot->index;
        m->snapshot.meta.term = pb->snapshot->term;
        if (rt_wire_conf_from_pb(pb->snapshot->conf, &m->snapshot.meta.conf) != 0) {
            free(m->entries);
            m->entries = NULL;
            return -1;
        }
    }
    return 0;
}
