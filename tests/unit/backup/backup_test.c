/* backup_test.c - unit tests for service/backup/format.c: round trip, corruption, writer misuse. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

/* The file being written, in memory. */
struct mem {
    uint8_t *buf;
    size_t len, cap;
    size_t stop_after; /* 0 = never; else fail the n-th record */
    size_t records;
};

static int mem_out(void *arg, const void *buf, size_t len)
{
    struct mem *m = arg;
    if (m->stop_after && ++m->records >= m->stop_after)
        return 1;
    if (m->len + len > m->cap) {
        size_t cap = (m->len + len) * 2;
        uint8_t *nb = realloc(m->buf, cap);
        if (nb == NULL)
            return 1;
        m->buf = nb;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, buf, len);
    m->len += len;
    return 0;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

#define N_GROUPS 3
static const uint32_t group_ids[N_GROUPS] = {1, 4, 9};
static const unsigned rows_per_group[N_GROUPS] = {5000, 0, 1200};
#define CTL_BYTES ((size_t)3 << 20) /* more than one record */

/* Row i of group g: deterministic key and value, values up to 2 KiB (some 300 KiB). */
static size_t row_make(unsigned g, unsigned i, uint8_t *k, size_t *kl, uint8_t *v)
{
    uint64_t s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)g << 32 | i);
    *kl = (size_t)snprintf((char *)k, 64, "g%u-key-%06u", g, i);
    size_t vl = (i % 997 == 5) ? (300u << 10) : (size_t)(rng(&s) % 2048);
    for (size_t j = 0; j < vl; j++)
        v[j] = (uint8_t)rng(&s);
    return vl;
}

static struct backup_header *header_make(void)
{
    struct backup_header *h = calloc(1, sizeof(*h));
    h->created_at_ms = 1796601600000ull;
    snprintf(h->cluster_id, sizeof(h->cluster_id), "test-cluster");
    h->route_revision = 42;
    h->controller_applied_index = 77;
    for (unsigned s = 0; s < BACKUP_HASH_SLOTS; s++)
        h->hash_slot_table[s] = group_ids[s % N_GROUPS];
    h->n_groups = N_GROUPS;
    for (unsigned i = 0; i < N_GROUPS; i++) {
        h->groups[i].group = group_ids[i];
        h->groups[i].applied_index = 1000 + i;
        h->groups[i].source_node = 2 + i;
    }
    return h;
}

/* Writes the test file into m. */
static int write_file(struct mem *m)
{
    struct backup_writer *w = NULL;
    struct backup_header *h = header_make();
    uint8_t *ctl = malloc(CTL_BYTES), *v = malloc(400u << 10), k[64];
    int rc = backup_writer_new(mem_out, m, &w);
    for (size_t i = 0; i < CTL_BYTES; i++)
        ctl[i] = (uint8_t)(i * 7);
    if (rc == BACKUP_OK)
        rc = backup_writer_header(w, h);
    if (rc == BACKUP_OK)
        rc = backup_writer_controller(w, ctl, CTL_BYTES);
    for (unsigned g = 0; g < N_GROUPS && rc == BACKUP_OK; g++) {
        rc = backup_writer_group_begin(w, group_ids[g]);
        for (unsigned i = 0; i < rows_per_group[g] && rc == BACKUP_OK; i++) {
            size_t kl, vl = row_make(g, i, k, &kl, v);
            rc = backup_writer_row(w, k, kl, v, vl);
        }
        if (rc == BACKUP_OK)
            rc = backup_writer_group_end(w);
    }
    if (rc == BACKUP_OK)
        rc = backup_writer_finish(w);
    if (rc == BACKUP_OK)
        CU_ASSERT_EQUAL(backup_writer_bytes(w), m->len);
    backup_writer_free(w);
    free(ctl);
    free(v);
    free(h);
    return rc;
}

/* What the reader's callbacks saw. */
struct seen {
    int headers, begins, ends;
    size_t ctl_bytes, ctl_bad;
    unsigned g; /* index of the open group */
    unsigned rows[N_GROUPS];
    unsigned row_bad;
    uint8_t v[400u << 10];
};

static int cb_header(void *arg, const struct backup_header *h)
{
    struct seen *s = arg;
    s->headers++;
    return strcmp(h->cluster_id, "test-cluster") != 0;
}

static int cb_controller(void *arg, const void *data, size_t len)
{
    struct seen *s = arg;
    const uint8_t *d = data;
    for (size_t i = 0; i < len; i++)
        if (d[i] != (uint8_t)((s->ctl_bytes + i) * 7))
            s->ctl_bad++;
    s->ctl_bytes += len;
    return 0;
}

static int cb_begin(void *arg, const struct backup_group_info *g)
{
    struct seen *s = arg;
    s->g = 0;
    while (s->g < N_GROUPS && group_ids[s->g] != g->group)
        s->g++;
    s->begins++;
    return s->g == N_GROUPS;
}

static int cb_row(void *arg, uint32_t group, const void *k, size_t kl, const void *v, size_t vl)
{
    struct seen *s = arg;
    uint8_t wk[64];
    size_t wkl, wvl = row_make(s->g, s->rows[s->g], wk, &wkl, s->v);
    if (group != group_ids[s->g] || kl != wkl || vl != wvl || memcmp(k, wk, kl) != 0 ||
        memcmp(v, s->v, vl) != 0)
        s->row_bad++;
    s->rows[s->g]++;
    return 0;
}

static int cb_end(void *arg, const struct backup_group_summary *g)
{
    struct seen *s = arg;
    s->ends++;
    return g->rows != rows_per_group[s->g];
}

static const struct backup_read_cbs all_cbs = {cb_header, cb_controller, cb_begin, cb_row, cb_end};

static int read_mem(const uint8_t *buf, size_t len, const struct backup_read_cbs *cbs, void *arg,
                    struct backup_summary *sum, char *err, size_t errlen)
{
    FILE *f = fmemopen((void *)buf, len, "rb");
    if (f == NULL)
        return -1;
    int rc = backup_read(f, cbs, arg, sum, err, errlen);
    fclose(f);
    return rc;
}

static struct mem file; /* written once by the first test */

static void test_round_trip(void)
{
    CU_ASSERT_EQUAL_FATAL(write_file(&file), BACKUP_OK);
    struct seen *s = calloc(1, sizeof(*s));
    struct backup_summary *sum = calloc(1, sizeof(*sum));
    char err[BACKUP_ERRMSG_MAX];
    int rc = read_mem(file.buf, file.len, &all_cbs, s, sum, err, sizeof(err));
    CU_ASSERT_EQUAL(rc, BACKUP_OK);
    if (rc != BACKUP_OK)
        fprintf(stderr, "read: %s\n", err);
    CU_ASSERT_EQUAL(s->headers, 1);
    CU_ASSERT_EQUAL(s->ctl_bytes, CTL_BYTES);
    CU_ASSERT_EQUAL(s->ctl_bad, 0);
    CU_ASSERT_EQUAL(s->begins, N_GROUPS);
    CU_ASSERT_EQUAL(s->ends, N_GROUPS);
    CU_ASSERT_EQUAL(s->row_bad, 0);
    for (unsigned g = 0; g < N_GROUPS; g++) {
        CU_ASSERT_EQUAL(s->rows[g], rows_per_group[g]);
        CU_ASSERT_EQUAL(sum->groups[g].group, group_ids[g]);
        CU_ASSERT_EQUAL(sum->groups[g].rows, rows_per_group[g]);
        CU_ASSERT_EQUAL(sum->groups[g].applied_index, 1000 + g);
        CU_ASSERT_EQUAL(sum->groups[g].source_node, 2 + g);
    }
    CU_ASSERT(sum->groups[0].records > 1); /* rows were chunked */
    CU_ASSERT_EQUAL(sum->groups[1].records, 0);
    CU_ASSERT_EQUAL(sum->rows, 6200);
    CU_ASSERT_EQUAL(sum->n_groups, N_GROUPS);
    CU_ASSERT_EQUAL(sum->file_bytes, file.len);
    CU_ASSERT_EQUAL(sum->controller_bytes, CTL_BYTES);
    CU_ASSERT_EQUAL(sum->header.route_revision, 42);
    CU_ASSERT_EQUAL(sum->header.controller_applied_index, 77);
    CU_ASSERT_EQUAL(sum->header.created_at_ms, 1796601600000ull);
    CU_ASSERT_EQUAL(sum->header.hash_slot_table[255], group_ids[255 % N_GROUPS]);
    CU_ASSERT_STRING_EQUAL(sum->header.cluster_id, "test-cluster");
    free(sum);
    free(s);
}

/* Byte offset of the frame of record seq in file. */
static size_t record_offset(uint32_t seq, unsigned *type)
{
    size_t off = 0;
    for (uint32_t i = 0; i < seq; i++) {
        const uint8_t *f = file.buf + off;
        off += BACKUP_FRAME_LEN +
               ((size_t)f[8] << 24 | (size_t)f[9] << 16 | (size_t)f[10] << 8 | f[11]);
    }
    *type = file.buf[off];
    return off;
}

static void test_flipped_byte_names_record(void)
{
    CU_ASSERT_FATAL(file.len > 0);
    uint8_t *copy = malloc(file.len);
    char err[BACKUP_ERRMSG_MAX], want[64];
    /* every record's first payload byte, frame CRC byte and a middle byte of a few records */
    for (uint32_t seq = 0;; seq++) {
        unsigned type;
        size_t off = record_offset(seq, &type);
        if (off >= file.len)
            break;
        size_t len = (size_t)file.buf[off + 8] << 24 | (size_t)file.buf[off + 9] << 16 |
                     (size_t)file.buf[off + 10] << 8 | file.buf[off + 11];
        size_t spots[3] = {off + 4, off + 13, off + BACKUP_FRAME_LEN + len / 2};
        for (unsigned i = 0; i < 3; i++) {
            if (spots[i] >= file.len)
                continue;
            memcpy(copy, file.buf, file.len);
            copy[spots[i]] ^= 0x10;
            int rc = read_mem(copy, file.len, NULL, NULL, NULL, err, sizeof(err));
            CU_ASSERT_EQUAL(rc, BACKUP_ECORRUPT);
            snprintf(want, sizeof(want), "record %u (%s", seq, backup_record_type_name(type));
            if (strncmp(err, want, strlen(want)) != 0) {
                fprintf(stderr, "flip at %zu: want '%s...', got '%s'\n", spots[i], want, err);
                CU_FAIL("error does not name the record");
            }
        }
        if (type == BACKUP_REC_ROWS && seq < 8) {
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "group 1)"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "checksum mismatch"));
        }
    }
    free(copy);
}

static void test_truncated_and_trailing(void)
{
    char err[BACKUP_ERRMSG_MAX];
    size_t cuts[] = {0, 5, BACKUP_FRAME_LEN + 3, file.len / 2, file.len - 1};
    for (unsigned i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        /* fmemopen of length 0 is not allowed: read one byte of a zero file instead */
        uint8_t zero = 0;
        int rc = cuts[i] == 0 ? read_mem(&zero, 1, NULL, NULL, NULL, err, sizeof(err))
                              : read_mem(file.buf, cuts[i], NULL, NULL, NULL, err, sizeof(err));
        CU_ASSERT_EQUAL(rc, BACKUP_ECORRUPT);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "record "));
    }
    uint8_t *longer = malloc(file.len + 1);
    memcpy(longer, file.buf, file.len);
    longer[file.len] = 0;
    CU_ASSERT_EQUAL(read_mem(longer, file.len + 1, NULL, NULL, NULL, err, sizeof(err)),
                    BACKUP_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bytes after the trailer"));
    free(longer);
}

static void test_swapped_records(void)
{
    /* records 3 and 4 are the first two rows records of group 1: swap them */
    unsigned t3, t4, t5;
    size_t o3 = record_offset(3, &t3), o4 = record_offset(4, &t4), o5 = record_offset(5, &t5);
    CU_ASSERT_EQUAL_FATAL(t3, BACKUP_REC_GROUP_BEGIN);
    CU_ASSERT_EQUAL_FATAL(t4, BACKUP_REC_ROWS);
    CU_ASSERT_EQUAL_FATAL(t5, BACKUP_REC_ROWS);
    size_t o6 = record_offset(6, &t5);
    uint8_t *copy = malloc(file.len);
    char err[BACKUP_ERRMSG_MAX];
    memcpy(copy, file.buf, o4);
    memcpy(copy + o4, file.buf + o5, o6 - o5);
    memcpy(copy + o4 + (o6 - o5), file.buf + o4, o5 - o4);
    memcpy(copy + o6, file.buf + o6, file.len - o6);
    CU_ASSERT_EQUAL(read_mem(copy, file.len, NULL, NULL, NULL, err, sizeof(err)), BACKUP_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "record 4 (rows, group 1)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "sequence number 5"));
    (void)o3;
    free(copy);
}

static void test_callback_stop(void)
{
    struct seen *s = calloc(1, sizeof(*s));
    struct backup_read_cbs cbs = all_cbs;
    char err[BACKUP_ERRMSG_MAX];
    cbs.group_begin = NULL;
    cbs.row = NULL;
    cbs.group_end = NULL;
    cbs.header = (int (*)(void *, const struct backup_header *))cb_end; /* returns non-zero */
    CU_ASSERT_EQUAL(read_mem(file.buf, file.len, &cbs, s, NULL, err, sizeof(err)), BACKUP_ESTOP);
    free(s);
}

static void test_writer_misuse(void)
{
    struct mem m = {0};
    struct backup_writer *w;
    struct backup_header *h = header_make();
    uint8_t big[16];

    CU_ASSERT_EQUAL_FATAL(backup_writer_new(mem_out, &m, &w), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_group_begin(w, 1), BACKUP_EINVAL); /* before the header */
    CU_ASSERT_PTR_NOT_NULL(strstr(backup_writer_errmsg(w), "out of order"));
    CU_ASSERT_EQUAL(backup_writer_header(w, h), BACKUP_EINVAL); /* refused after a failure */
    CU_ASSERT_EQUAL(m.len, 0);
    backup_writer_free(w);

    h->groups[1].group = 1; /* not ascending */
    CU_ASSERT_EQUAL_FATAL(backup_writer_new(mem_out, &m, &w), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_header(w, h), BACKUP_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(backup_writer_errmsg(w), "groups[1]"));
    backup_writer_free(w);
    h->groups[1].group = 4;

    CU_ASSERT_EQUAL_FATAL(backup_writer_new(mem_out, &m, &w), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_header(w, h), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_group_begin(w, 4), BACKUP_EINVAL); /* header's order is 1 first */
    CU_ASSERT_PTR_NOT_NULL(strstr(backup_writer_errmsg(w), "group 4"));
    backup_writer_free(w);

    m.len = 0;
    CU_ASSERT_EQUAL_FATAL(backup_writer_new(mem_out, &m, &w), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_header(w, h), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_group_begin(w, 1), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_row(w, big, 0, big, 1), BACKUP_EINVAL); /* empty key */
    backup_writer_free(w);

    m.len = 0;
    uint8_t *huge = calloc(1, BACKUP_RECORD_BYTES_MAX);
    CU_ASSERT_EQUAL_FATAL(backup_writer_new(mem_out, &m, &w), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_header(w, h), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_group_begin(w, 1), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_row(w, big, 4, huge, BACKUP_RECORD_BYTES_MAX), BACKUP_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(backup_writer_errmsg(w), "do not fit"));
    free(huge);
    backup_writer_free(w);

    m.len = 0;
    CU_ASSERT_EQUAL_FATAL(backup_writer_new(mem_out, &m, &w), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_header(w, h), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_finish(w), BACKUP_EINVAL); /* groups missing */
    CU_ASSERT_PTR_NOT_NULL(strstr(backup_writer_errmsg(w), "0 of the header's 3 groups"));
    backup_writer_free(w);

    m.len = 0;
    m.stop_after = 2; /* the output refuses the second record */
    CU_ASSERT_EQUAL_FATAL(backup_writer_new(mem_out, &m, &w), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_header(w, h), BACKUP_OK);
    CU_ASSERT_EQUAL(backup_writer_controller(w, "x", 1), BACKUP_ESTOP);
    CU_ASSERT_EQUAL(backup_writer_group_begin(w, 1), BACKUP_EINVAL);
    backup_writer_free(w);

    free(m.buf);
    free(h);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("backup_format", NULL, NULL);
    CU_add_test(s, "round trip", test_round_trip);
    CU_add_test(s, "flipped byte names the record", test_flipped_byte_names_record);
    CU_add_test(s, "truncated and trailing bytes", test_truncated_and_trailing);
    CU_add_test(s, "swapped records", test_swapped_records);
    CU_add_test(s, "callback stop", test_callback_stop);
    CU_add_test(s, "writer misuse", test_writer_misuse);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    free(file.buf);
    return failed != 0;
}
