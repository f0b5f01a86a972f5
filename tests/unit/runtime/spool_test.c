/* spool_test.c - unit tests for service/runtime/snap_spool.c: descriptor, names, row reader. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "service/runtime/snap_spool.h"
#include "store/keys.h"

static void test_desc_round_trip(void)
{
    struct rt_spool_desc d = {.transfer_id = 0x0102030405060708ull, .len = 5ull << 32, .crc = 77};
    uint8_t b[RT_SPOOL_DESC_LEN];
    rt_spool_desc_encode(&d, b);
    struct rt_spool_desc e;
    CU_ASSERT_EQUAL_FATAL(rt_spool_desc_decode(b, sizeof(b), &e), 0);
    CU_ASSERT_EQUAL(e.transfer_id, d.transfer_id);
    CU_ASSERT_EQUAL(e.len, d.len);
    CU_ASSERT_EQUAL(e.crc, d.crc);
    CU_ASSERT_EQUAL(rt_spool_desc_decode(b, sizeof(b) - 1, &e), -1); /* wrong length */
    b[0] ^= 1;
    CU_ASSERT_EQUAL(rt_spool_desc_decode(b, sizeof(b), &e), -1); /* wrong magic */
    b[0] ^= 1;
    b[4] = 2;
    CU_ASSERT_EQUAL(rt_spool_desc_decode(b, sizeof(b), &e), -1); /* unknown version */
    /* rows of a snapshot (a first row starting with a key length) are never a descriptor */
    uint8_t rows[RT_SPOOL_DESC_LEN] = {0, 0, 0, 7};
    CU_ASSERT_EQUAL(rt_spool_desc_decode(rows, sizeof(rows), &e), -1);
}

static void test_names(void)
{
    char buf[128];
    CU_ASSERT_EQUAL(rt_spool_path(buf, sizeof(buf), "/d", 7, 42, true), 0);
    CU_ASSERT_STRING_EQUAL(buf, "/d/snap-recv/g7-42.part");
    CU_ASSERT_EQUAL(rt_spool_path(buf, sizeof(buf), "/d", 7, 42, false), 0);
    CU_ASSERT_STRING_EQUAL(buf, "/d/snap-recv/g7-42.snap");
    CU_ASSERT_EQUAL(rt_spool_path(buf, 10, "/d", 7, 42, false), -1); /* does not fit */
    uint32_t g;
    uint64_t t;
    bool part;
    CU_ASSERT_EQUAL(rt_spool_name_parse("g7-42.part", &g, &t, &part), 0);
    CU_ASSERT(g == 7 && t == 42 && part);
    CU_ASSERT_EQUAL(rt_spool_name_parse("g64-18446744073709551615.snap", &g, &t, &part), 0);
    CU_ASSERT(g == 64 && t == UINT64_MAX && !part);
    const char *bad[] = {"g7-42.tmp", "g07-42.part", "g7-42.part~", "x7-42.part", "g-1-2.part",
                         "g7.part", "g7-+4.part", "g4294967296-1.snap", ".", ".."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CU_ASSERT_EQUAL(rt_spool_name_parse(bad[i], &g, &t, &part), -1);
}

/* Appends the row (k, v) to buf at *n. */
static void row(uint8_t *buf, size_t *n, const char *k, size_t vl, uint8_t fill)
{
    size_t kl = strlen(k);
    store_put_u32(buf + *n, (uint32_t)kl);
    memcpy(buf + *n + 4, k, kl);
    store_put_u32(buf + *n + 4 + kl, (uint32_t)vl);
    memset(buf + *n + 8 + kl, fill, vl);
    *n += 8 + kl + vl;
}

static char *write_file(const uint8_t *p, size_t n)
{
    char *path = strdup("/tmp/slotd-spool-test-XXXXXX");
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(write(fd, p, n) == (ssize_t)n);
    close(fd);
    return path;
}

/* Rows come back whole and in order whatever the piece size: rows straddle pieces, one row is
 * larger than a piece (the buffer grows to it), the CRC is checked at the end. */
static void test_reader_pieces(void)
{
    static uint8_t buf[1 << 16];
    size_t n = 0;
    row(buf, &n, "a", 0, 0);
    row(buf, &n, "bb", 100, 1);
    row(buf, &n, "ccc", 5000, 2); /* > every piece tried below */
    row(buf, &n, "d", 7, 3);
    char *path = write_file(buf, n);
    struct rt_spool_desc d = {.transfer_id = 1, .len = n, .crc = (uint32_t)crc32(0, buf, (uInt)n)};
    const size_t pieces[] = {64, 100, 4096, RT_SPOOL_PIECE_BYTES};
    for (size_t pi = 0; pi < 4; pi++) {
        struct rt_spool_reader r;
        CU_ASSERT_EQUAL_FATAL(rt_spool_reader_open(&r, path, &d, pieces[pi]), 0);
        const char *keys[] = {"a", "bb", "ccc", "d"};
        const size_t vls[] = {0, 100, 5000, 7};
        for (int i = 0; i < 4; i++) {
            const uint8_t *k, *v;
            size_t kl, vl;
            CU_ASSERT_EQUAL_FATAL(rt_spool_reader_next(&r, &k, &kl, &v, &vl), 1);
            CU_ASSERT_EQUAL(kl, strlen(keys[i]));
            CU_ASSERT(memcmp(k, keys[i], kl) == 0);
            CU_ASSERT_EQUAL(vl, vls[i]);
            for (size_t j = 0; j < vl; j++)
                if (v[j] != (uint8_t)i) {
                    CU_FAIL("value byte");
                    break;
                }
        }
        const uint8_t *k, *v;
        size_t kl, vl;
        CU_ASSERT_EQUAL(rt_spool_reader_next(&r, &k, &kl, &v, &vl), 0);
        CU_ASSERT(r.cap <= (pieces[pi] > 5012 ? pieces[pi] : 5012)); /* one piece or one row */
        rt_spool_reader_close(&r);
    }
    /* A wrong CRC is found at the end, a wrong length at open. */
    struct rt_spool_desc bad = d;
    bad.crc ^= 1;
    struct rt_spool_reader r;
    CU_ASSERT_EQUAL_FATAL(rt_spool_reader_open(&r, path, &bad, 64), 0);
    const uint8_t *k, *v;
    size_t kl, vl;
    int got;
    while ((got = rt_spool_reader_next(&r, &k, &kl, &v, &vl)) == 1)
        ;
    CU_ASSERT_EQUAL(got, -1);
    CU_ASSERT_EQUAL(errno, EIO);
    rt_spool_reader_close(&r);
    bad = d;
    bad.len++;
    CU_ASSERT_EQUAL(rt_spool_reader_open(&r, path, &bad, 64), -1);
    CU_ASSERT_EQUAL(errno, EINVAL);
    unlink(path);
    CU_ASSERT_EQUAL(rt_spool_reader_open(&r, path, &d, 64), -1);
    CU_ASSERT_EQUAL(errno, ENOENT);
    free(path);
}

/* A file cut inside a row, and a row claiming more than RT_SPOOL_ROW_MAX, are corrupt. */
static void test_reader_corrupt(void)
{
    static uint8_t buf[256];
    size_t n = 0;
    row(buf, &n, "key", 20, 9);
    size_t cut = n - 5;
    char *path = write_file(buf, cut);
    struct rt_spool_desc d = {.len = cut, .crc = (uint32_t)crc32(0, buf, (uInt)cut)};
    struct rt_spool_reader r;
    const uint8_t *k, *v;
    size_t kl, vl;
    CU_ASSERT_EQUAL_FATAL(rt_spool_reader_open(&r, path, &d, 64), 0);
    CU_ASSERT_EQUAL(rt_spool_reader_next(&r, &k, &kl, &v, &vl), -1);
    CU_ASSERT_EQUAL(errno, EIO);
    rt_spool_reader_close(&r);
    unlink(path);
    free(path);
    uint8_t huge[8];
    store_put_u32(huge, (uint32_t)RT_SPOOL_ROW_MAX);
    store_put_u32(huge + 4, 0);
    path = write_file(huge, sizeof(huge));
    d.len = sizeof(huge);
    d.crc = (uint32_t)crc32(0, huge, sizeof(huge));
    CU_ASSERT_EQUAL_FATAL(rt_spool_reader_open(&r, path, &d, 64), 0);
    CU_ASSERT_EQUAL(rt_spool_reader_next(&r, &k, &kl, &v, &vl), -1);
    CU_ASSERT_EQUAL(errno, EIO);
    CU_ASSERT(r.cap <= 64); /* refused before allocating it */
    rt_spool_reader_close(&r);
    unlink(path);
    free(path);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite suite = CU_add_suite("runtime snapshot spool", NULL, NULL);
    CU_add_test(suite, "descriptor round trip and refusals", test_desc_round_trip);
    CU_add_test(suite, "spool file names", test_names);
    CU_add_test(suite, "rows across pieces, CRC and length checks", test_reader_pieces);
    CU_add_test(suite, "truncated and oversized rows", test_reader_corrupt);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
