/* placement_file_test.c - placement properties and cluster-state.json save/load. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl_test.h"

struct counts {
    uint32_t replicas[CTL_NODES_MAX + 1], leaders[CTL_NODES_MAX + 1];
};

/* Checks the structural properties of a placement and counts replicas and leaderships per id
 * (ids must be <= CTL_NODES_MAX). */
static void check_placement(const struct ctl_group *groups, uint32_t n_groups, uint32_t k,
                            struct counts *c)
{
    memset(c, 0, sizeof(*c));
    for (uint32_t g = 0; g < n_groups; g++) {
        CU_ASSERT_EQUAL(groups[g].id, g + 1);
        CU_ASSERT_EQUAL(groups[g].n_peers, k);
        CU_ASSERT_EQUAL(groups[g].config_epoch, 1);
        int leader_in = 0;
        for (uint32_t i = 0; i < groups[g].n_peers; i++) {
            uint64_t p = groups[g].desired_peers[i];
            CU_ASSERT_FATAL(p >= 1 && p <= CTL_NODES_MAX);
            if (i > 0) {
                CU_ASSERT(groups[g].desired_peers[i - 1] < p); /* sorted, distinct */
            }
            c->replicas[p]++;
            leader_in |= p == groups[g].preferred_leader;
        }
        CU_ASSERT_TRUE(leader_in);
        c->leaders[groups[g].preferred_leader]++;
    }
}

static void test_placement_equal_weights(void)
{
    struct ctl_placement_node nodes[] = {{5, 100}, {3, 100}, {1, 100}, {4, 100}, {2, 100}};
    struct ctl_group groups[CTL_GROUPS_MAX];
    struct ctl_hash_slot_table table;
    struct counts c;
    CU_ASSERT_EQUAL_FATAL(ctl_placement_make(nodes, 5, 8, 3, groups, &table), CTL_OK);
    check_placement(groups, 8, 3, &c);
    for (uint64_t id = 1; id <= 5; id++) {
        CU_ASSERT(c.replicas[id] == 4 || c.replicas[id] == 5);
        CU_ASSERT(c.leaders[id] == 1 || c.leaders[id] == 2);
    }
    /* Ties go to lower ids: group 1 is {1,2,3} led by 1. */
    CU_ASSERT_EQUAL(groups[0].desired_peers[0], 1);
    CU_ASSERT_EQUAL(groups[0].desired_peers[2], 3);
    CU_ASSERT_EQUAL(groups[0].preferred_leader, 1);
    /* Table: 8 ranges of 32 hash slots. */
    CU_ASSERT_EQUAL(table.version, 1);
    CU_ASSERT_EQUAL(table.n_ranges, 8);
    for (uint32_t i = 0; i < 8; i++) {
        CU_ASSERT_EQUAL(table.ranges[i].first, i * 32);
        CU_ASSERT_EQUAL(table.ranges[i].last, i * 32 + 31);
        CU_ASSERT_EQUAL(table.ranges[i].group, i + 1);
    }
    /* Input order does not matter. */
    struct ctl_placement_node sorted[] = {{1, 100}, {2, 100}, {3, 100}, {4, 100}, {5, 100}};
    struct ctl_group again[CTL_GROUPS_MAX];
    struct ctl_hash_slot_table table2;
    CU_ASSERT_EQUAL(ctl_placement_make(sorted, 5, 8, 3, again, &table2), CTL_OK);
    CU_ASSERT_EQUAL(memcmp(groups, again, 8 * sizeof(groups[0])), 0);
    CU_ASSERT_EQUAL(memcmp(&table, &table2, sizeof(table)), 0);
}

static void test_placement_split_and_small(void)
{
    struct ctl_placement_node nodes[] = {{1, 100}, {2, 100}};
    struct ctl_group groups[CTL_GROUPS_MAX];
    struct ctl_hash_slot_table t;
    struct counts c;
    /* 3 groups: 256 = 86 + 85 + 85; fewer nodes than replicas: every group gets both. */
    CU_ASSERT_EQUAL_FATAL(ctl_placement_make(nodes, 2, 3, 3, groups, &t), CTL_OK);
    check_placement(groups, 3, 2, &c);
    CU_ASSERT_EQUAL(t.ranges[0].last, 85);
    CU_ASSERT_EQUAL(t.ranges[1].first, 86);
    CU_ASSERT_EQUAL(t.ranges[1].last, 170);
    CU_ASSERT_EQUAL(t.ranges[2].last, 255);
    CU_ASSERT_EQUAL(c.leaders[1] + c.leaders[2], 3);
    CU_ASSERT(c.leaders[1] >= 1 && c.leaders[2] >= 1);
    /* 64 groups of 4 slots each. */
    CU_ASSERT_EQUAL(ctl_placement_make(nodes, 2, 64, 1, groups, &t), CTL_OK);
    CU_ASSERT_EQUAL(t.ranges[63].first, 252);
    CU_ASSERT_EQUAL(t.ranges[63].last, 255);
    /* Bad input. */
    struct ctl_placement_node dup[] = {{1, 100}, {1, 100}}, zero_w[] = {{1, 0}},
                              zero_id[] = {{0, 1}};
    CU_ASSERT_EQUAL(ctl_placement_make(dup, 2, 3, 3, groups, &t), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_placement_make(zero_w, 1, 3, 3, groups, &t), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_placement_make(zero_id, 1, 3, 3, groups, &t), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_placement_make(nodes, 0, 3, 3, groups, &t), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_placement_make(nodes, 2, 65, 3, groups, &t), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_placement_make(nodes, 2, 3, 8, groups, &t), CTL_EINVALID);
}

static void test_placement_weights(void)
{
    /* Node 1 has twice the weight: 48 replicas over weight 600 -> 16 for node 1, 8 for others. */
    struct ctl_placement_node nodes[] = {{1, 200}, {2, 100}, {3, 100}, {4, 100}, {5, 100}};
    struct ctl_group groups[CTL_GROUPS_MAX];
    struct ctl_hash_slot_table t;
    struct counts c;
    CU_ASSERT_EQUAL_FATAL(ctl_placement_make(nodes, 5, 24, 2, groups, &t), CTL_OK);
    check_placement(groups, 24, 2, &c);
    printf("\n  replicas by node (weights 200,100x4; 24 groups x 2):");
    for (uint64_t id = 1; id <= 5; id++) {
        printf(" %u", c.replicas[id]);
    }
    printf("; leaders:");
    for (uint64_t id = 1; id <= 5; id++) {
        printf(" %u", c.leaders[id]);
    }
    printf("\n");
    CU_ASSERT(c.replicas[1] >= 15 && c.replicas[1] <= 17);
    for (uint64_t id = 2; id <= 5; id++) {
        CU_ASSERT(c.replicas[id] >= 7 && c.replicas[id] <= 9);
        CU_ASSERT(c.leaders[id] >= 4 && c.leaders[id] <= 5);
        CU_ASSERT(c.leaders[1] >= c.leaders[id]);
    }
    /* Leadership goes by count first, so the heavy node leads only a little more than its equal
     * share (24 / 5), not double: it is simply picked as a peer more often. */
    CU_ASSERT(c.leaders[1] >= 5 && c.leaders[1] <= 6);
    /* Heavier node 3 (weight 300 of 700) in a 3-node, 7-group, 2-replica layout: 6 of 14. */
    struct ctl_placement_node three[] = {{1, 200}, {2, 200}, {3, 300}};
    CU_ASSERT_EQUAL(ctl_placement_make(three, 3, 7, 2, groups, &t), CTL_OK);
    check_placement(groups, 7, 2, &c);
    CU_ASSERT_EQUAL(c.replicas[3], 6);
    CU_ASSERT_EQUAL(c.replicas[1] + c.replicas[2], 8);
}

/* ---- file ---- */

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/ctl_test.XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
}

static void remove_tmpdir(const char *file)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, file);
    unlink(p);
    snprintf(p, sizeof(p), "%s/%s.tmp", tmpdir, file);
    unlink(p);
    CU_ASSERT_EQUAL(rmdir(tmpdir), 0);
}

static void test_file_round_trip(void)
{
    make_tmpdir();
    char path[128], err[256] = "";
    snprintf(path, sizeof(path), "%s/cluster-state.json", tmpdir);
    struct ctl_state *s = ctl_test_fixture(8), *l = malloc(sizeof(*l));
    CU_ASSERT_EQUAL(ctl_file_load(path, l, err, sizeof(err)), CTL_ENOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
    CU_ASSERT_EQUAL_FATAL(ctl_file_save(path, s, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL_FATAL(ctl_file_load(path, l, err, sizeof(err)), CTL_OK);
    char *a = ctl_test_encode(s), *b = ctl_test_encode(l);
    CU_ASSERT_STRING_EQUAL(a, b);
    /* The file holds exactly the canonical encoding; no temp file is left behind. */
    char tmp[140];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
    struct stat st;
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    CU_ASSERT_EQUAL((size_t)st.st_size, strlen(a));
    /* Saving again replaces the file. */
    s->applied_raft_index++;
    CU_ASSERT_EQUAL(ctl_file_save(path, s, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(ctl_file_load(path, l, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(l->applied_raft_index, s->applied_raft_index);
    /* An invalid state is refused and the file on disk stays as it was. */
    struct ctl_state *bad = malloc(sizeof(*bad));
    *bad = *s;
    bad->nodes[0].weight = 5000;
    CU_ASSERT_EQUAL(ctl_file_save(path, bad, err, sizeof(err)), CTL_ESTATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nodes[0].weight: 5000 not in 1..1000"));
    CU_ASSERT_EQUAL(ctl_file_load(path, l, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(l->nodes[0].weight, s->nodes[0].weight);
    ctl_free(a), ctl_free(b);
    free(bad), free(s), free(l);
    remove_tmpdir("cluster-state.json");
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void test_file_bad(void)
{
    make_tmpdir();
    char path[128], err[256] = "";
    snprintf(path, sizeof(path), "%s/cluster-state.json", tmpdir);
    struct ctl_state *s = ctl_test_fixture(4), *l = malloc(sizeof(*l));
    char *a = ctl_test_encode(s);
    size_t len = strlen(a);
    /* Truncated at several points: a clean error, the output untouched. */
    size_t cuts[] = {0, 1, len / 3, len / 2, len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        write_file(path, a, cuts[i]);
        memset(l, 0x5A, sizeof(*l));
        CU_ASSERT_EQUAL(ctl_file_load(path, l, err, sizeof(err)), CTL_EDECODE);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "cluster-state.json: json: "));
        CU_ASSERT_EQUAL(((unsigned char *)l)[0], 0x5A);
    }
    /* A flipped digit inside the content: checksum mismatch. */
    char *flipped = strdup(a);
    char *w = strstr(flipped, "\"weight\":100");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    w[10] = '2';
    write_file(path, flipped, len);
    CU_ASSERT_EQUAL(ctl_file_load(path, l, err, sizeof(err)), CTL_ECHECKSUM);
    free(flipped);
    /* Above 4 MiB: refused before parsing. */
    CU_ASSERT_EQUAL(truncate(path, (off_t)CTL_FILE_BYTES_MAX + 1), 0);
    CU_ASSERT_EQUAL(ctl_file_load(path, l, err, sizeof(err)), CTL_ETOO_BIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the limit is 4194304"));
    /* A directory where the file should be. */
    char sub[140];
    snprintf(sub, sizeof(sub), "%s/dir", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
    CU_ASSERT_EQUAL(ctl_file_load(sub, l, err, sizeof(err)), CTL_EIO);
    CU_ASSERT_EQUAL(ctl_file_save(sub, s, err, sizeof(err)), CTL_EIO);
    CU_ASSERT_EQUAL(rmdir(sub), 0);
    ctl_free(a);
    free(s), free(l);
    remove_tmpdir("cluster-state.json");
}

void ctl_test_add_placement_file(void)
{
    CU_pSuite s = CU_add_suite("controller placement", NULL, NULL);
    CU_add_test(s, "5 equal nodes, 8 groups, 3 replicas", test_placement_equal_weights);
    CU_add_test(s, "range split, few nodes, bad input", test_placement_split_and_small);
    CU_add_test(s, "weights skew replicas proportionally", test_placement_weights);
    CU_pSuite f = CU_add_suite("controller state file", NULL, NULL);
    CU_add_test(f, "save/load round trip", test_file_round_trip);
    CU_add_test(f, "truncated, corrupt, oversized, unreadable", test_file_bad);
}
