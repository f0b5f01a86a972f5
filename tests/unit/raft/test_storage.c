/* test_storage.c - unit tests of raft_mem_storage and the conf change codec. */
#include "raft/raft.h"
#include "tests_raft.h"

#include <CUnit/CUnit.h>
#include <string.h>

static struct raft_entry ent(raft_index i, raft_term t, const char *d)
{
    struct raft_entry e = {.term = t, .index = i, .type = RAFT_ENTRY_NORMAL};
    e.data.base = d;
    e.data.len = d ? strlen(d) : 0;
    return e;
}

static void test_mem_storage_append(void)
{
    struct raft_mem_storage *s = NULL;
    CU_ASSERT_EQUAL_FATAL(raft_mem_storage_new(&s), 0);
    const struct raft_storage *st = raft_mem_storage_get(s);
    raft_index first = 0, last = 9;
    raft_term t = 9;
    CU_ASSERT_EQUAL(st->first_index(st->ctx, &first), 0);
    CU_ASSERT_EQUAL(st->last_index(st->ctx, &last), 0);
    CU_ASSERT_EQUAL(first, 1);
    CU_ASSERT_EQUAL(last, 0);
    CU_ASSERT_EQUAL(st->term(st->ctx, 0, &t), 0);
    CU_ASSERT_EQUAL(t, 0);

    struct raft_entry a[3] = {ent(1, 1, "a"), ent(2, 1, "bb"), ent(3, 2, "ccc")};
    CU_ASSERT_EQUAL(raft_mem_storage_append(s, a, 3), 0);
    CU_ASSERT_EQUAL(st->last_index(st->ctx, &last), 0);
    CU_ASSERT_EQUAL(last, 3);
    /* a gap is refused and changes nothing */
    struct raft_entry gap = ent(5, 2, "x");
    CU_ASSERT_EQUAL(raft_mem_storage_append(s, &gap, 1), RAFT_EINVAL);
    CU_ASSERT_EQUAL(st->last_index(st->ctx, &last), 0);
    CU_ASSERT_EQUAL(last, 3);
    /* replacing a suffix drops everything after it */
    struct raft_entry b = ent(2, 3, "z");
    CU_ASSERT_EQUAL(raft_mem_storage_append(s, &b, 1), 0);
    CU_ASSERT_EQUAL(st->last_index(st->ctx, &last), 0);
    CU_ASSERT_EQUAL(last, 2);
    CU_ASSERT_EQUAL(st->term(st->ctx, 2, &t), 0);
    CU_ASSERT_EQUAL(t, 3);
    CU_ASSERT_EQUAL(raft_mem_storage_bytes(s), 2 + 2 * sizeof(struct raft_entry));

    const struct raft_entry *out = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(st->entries(st->ctx, 1, 3, 1000, &out, &n), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(memcmp(out[1].data.base, "z", 1), 0);
    /* the byte limit still returns at least one entry */
    CU_ASSERT_EQUAL(st->entries(st->ctx, 1, 3, 0, &out, &n), 0);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(st->entries(st->ctx, 1, 4, 1000, &out, &n), RAFT_EUNAVAILABLE);
    raft_mem_storage_free(s);
}

static void test_mem_storage_compact_snapshot(void)
{
    struct raft_mem_storage *s = NULL;
    CU_ASSERT_EQUAL_FATAL(raft_mem_storage_new(&s), 0);
    const struct raft_storage *st = raft_mem_storage_get(s);
    struct raft_entry a[4] = {ent(1, 1, "a"), ent(2, 1, "b"), ent(3, 2, "c"), ent(4, 2, "d")};
    CU_ASSERT_EQUAL(raft_mem_storage_append(s, a, 4), 0);
    CU_ASSERT_EQUAL(raft_mem_storage_compact(s, 2), 0);
    raft_index first = 0, last = 0;
    raft_term t = 0;
    CU_ASSERT_EQUAL(st->first_index(st->ctx, &first), 0);
    CU_ASSERT_EQUAL(first, 3);
    CU_ASSERT_EQUAL(st->term(st->ctx, 2, &t), 0); /* the compacted index keeps its term */
    CU_ASSERT_EQUAL(t, 1);
    CU_ASSERT_EQUAL(st->term(st->ctx, 1, &t), RAFT_ECOMPACTED);
    const struct raft_entry *out = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(st->entries(st->ctx, 2, 4, 100, &out, &n), RAFT_ECOMPACTED);
    CU_ASSERT_EQUAL(raft_mem_storage_compact(s, 1), RAFT_ECOMPACTED);
    CU_ASSERT_EQUAL(raft_mem_storage_compact(s, 5), RAFT_EUNAVAILABLE);
    /* appending below the first index ignores those entries */
    struct raft_entry old[2] = {ent(2, 1, "b"), ent(3, 2, "c")};
    CU_ASSERT_EQUAL(raft_mem_storage_append(s, old, 2), 0);
    CU_ASSERT_EQUAL(st->last_index(st->ctx, &last), 0);
    CU_ASSERT_EQUAL(last, 3);

    struct raft_conf_state cs;
    memset(&cs, 0, sizeof(cs));
    cs.n_voters = 1;
    cs.voters[0] = 7;
    CU_ASSERT_EQUAL(raft_mem_storage_create_snapshot(s, 3, &cs, "state", 5), 0);
    struct raft_snapshot snap;
    CU_ASSERT_EQUAL(st->snapshot(st->ctx, &snap), 0);
    CU_ASSERT_EQUAL(snap.meta.index, 3);
    CU_ASSERT_EQUAL(snap.meta.term, 2);
    CU_ASSERT_EQUAL(snap.meta.conf.voters[0], 7);
    CU_ASSERT_EQUAL(snap.data.len, 5);
    CU_ASSERT_EQUAL(st->first_index(st->ctx, &first), 0);
    CU_ASSERT_EQUAL(first, 4);
    CU_ASSERT_EQUAL(raft_mem_storage_create_snapshot(s, 2, &cs, NULL, 0), RAFT_ESTALE);
    CU_ASSERT_EQUAL(raft_mem_storage_create_snapshot(s, 9, &cs, NULL, 0), RAFT_EUNAVAILABLE);

    /* applying an older snapshot is refused and changes nothing */
    struct raft_snapshot older = {.meta = {.index = 2, .term = 1, .conf = cs}};
    CU_ASSERT_EQUAL(raft_mem_storage_apply_snapshot(s, &older), RAFT_ESTALE);
    CU_ASSERT_EQUAL(st->first_index(st->ctx, &first), 0);
    CU_ASSERT_EQUAL(first, 4);
    /* a newer snapshot replaces the whole log */
    struct raft_snapshot newer = {.meta = {.index = 10, .term = 4, .conf = cs}};
    newer.data.base = "xy";
    newer.data.len = 2;
    CU_ASSERT_EQUAL(raft_mem_storage_apply_snapshot(s, &newer), 0);
    CU_ASSERT_EQUAL(st->first_index(st->ctx, &first), 0);
    CU_ASSERT_EQUAL(st->last_index(st->ctx, &last), 0);
    CU_ASSERT_EQUAL(first, 11);
    CU_ASSERT_EQUAL(last, 10);
    CU_ASSERT_EQUAL(st->term(st->ctx, 10, &t), 0);
    CU_ASSERT_EQUAL(t, 4);
    struct raft_hard_state hs;
    struct raft_conf_state cs2;
    CU_ASSERT_EQUAL(st->initial_state(st->ctx, &hs, &cs2), 0);
    CU_ASSERT_EQUAL(cs2.n_voters, 1);
    CU_ASSERT_EQUAL(raft_mem_storage_bytes(s), 2);
    raft_mem_storage_free(s);
}

static void test_conf_change_codec(void)
{
    struct raft_conf_change cc = {.type = RAFT_CC_PROMOTE, .node = 0x0102030405060708ull};
    uint8_t buf[RAFT_CONF_CHANGE_ENCODED_LEN];
    raft_conf_change_encode(&cc, buf);
    const uint8_t want[9] = {2, 1, 2, 3, 4, 5, 6, 7, 8};
    CU_ASSERT_EQUAL(memcmp(buf, want, 9), 0);
    struct raft_conf_change out = {0};
    CU_ASSERT_EQUAL(raft_conf_change_decode(buf, sizeof(buf), &out), 0);
    CU_ASSERT_EQUAL(out.type, RAFT_CC_PROMOTE);
    CU_ASSERT_EQUAL(out.node, cc.node);

    struct raft_conf_change untouched = {.type = 9, .node = 9};
    CU_ASSERT_EQUAL(raft_conf_change_decode(buf, 8, &untouched), RAFT_EINVAL);
    CU_ASSERT_EQUAL(raft_conf_change_decode(NULL, 9, &untouched), RAFT_EINVAL);
    uint8_t bad_type[9] = {4, 0, 0, 0, 0, 0, 0, 0, 1};
    CU_ASSERT_EQUAL(raft_conf_change_decode(bad_type, 9, &untouched), RAFT_EINVAL);
    uint8_t zero_node[9] = {0};
    CU_ASSERT_EQUAL(raft_conf_change_decode(zero_node, 9, &untouched), RAFT_EINVAL);
    CU_ASSERT_EQUAL(untouched.type, 9);
    CU_ASSERT_EQUAL(untouched.node, 9);
}

static void test_names(void)
{
    CU_ASSERT_STRING_EQUAL(raft_strerror(RAFT_EBUDGET), "uncommitted bytes budget exceeded");
    CU_ASSERT_STRING_EQUAL(raft_strerror(999), "unknown raft error");
    CU_ASSERT_STRING_EQUAL(raft_msg_type_name(RAFT_MSG_READ_INDEX_RESP), "read_index_resp");
    CU_ASSERT_STRING_EQUAL(raft_msg_type_name(RAFT_MSG_TYPE_COUNT_), "unknown");
    CU_ASSERT_STRING_EQUAL(raft_role_name(RAFT_PRE_CANDIDATE), "pre_candidate");
}

void tests_storage_add(CU_pSuite s)
{
    CU_add_test(s, "mem_storage append/replace/limits", test_mem_storage_append);
    CU_add_test(s, "mem_storage compact/snapshot", test_mem_storage_compact_snapshot);
    CU_add_test(s, "conf change encode/decode", test_conf_change_codec);
    CU_add_test(s, "error, message and role names", test_names);
}
