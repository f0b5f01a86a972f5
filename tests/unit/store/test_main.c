/* test_main.c - store unit tests: the per-backend fixture and the CUnit runner (two suites). */
#define _GNU_SOURCE
#include "store_test.h"

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>

enum test_backend test_backend;
static char dir[64];

const char *test_dir(void)
{
    return dir;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void rm_rf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

struct store *test_open(void)
{
    struct store *s = NULL;
    char err[256];
    if (test_backend == TEST_MEMORY) {
        CU_ASSERT_FATAL(store_open_memory(&s) == STORE_OK);
        return s;
    }
    snprintf(dir, sizeof(dir), "/tmp/slotd-store-test-XXXXXX");
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    struct store_options o;
    store_options_default(&o);
    o.cache_bytes = 1 << 20;
    o.write_buffer_bytes = 1 << 20;
    int rc = store_open(dir, &o, &s, err, sizeof(err));
    if (rc != STORE_OK)
        fprintf(stderr, "store_open: %s\n", err);
    CU_ASSERT_FATAL(rc == STORE_OK);
    return s;
}

struct store *test_reopen(struct store *s)
{
    char err[256];
    if (test_backend == TEST_MEMORY)
        return s;
    store_close(s);
    s = NULL;
    int rc = store_open(dir, NULL, &s, err, sizeof(err));
    if (rc != STORE_OK)
        fprintf(stderr, "store_open: %s\n", err);
    CU_ASSERT_FATAL(rc == STORE_OK);
    return s;
}

void test_close(struct store *s)
{
    store_close(s);
    if (test_backend == TEST_LEVELDB)
        rm_rf(dir);
}

size_t test_entry_data(char *buf, size_t cap, uint32_t group, uint64_t index)
{
    return (size_t)snprintf(buf, cap, "g%" PRIu32 "-i%" PRIu64, group, index);
}

void test_put_entries(struct store *s, uint32_t group, uint64_t lo, uint64_t hi)
{
    struct store_log_batch *b;
    char data[64];
    CU_ASSERT_FATAL(store_log_batch_new(&b) == STORE_OK);
    for (uint64_t i = lo; i < hi; i++) {
        struct store_entry e = {.index = i, .term = i / 10 + 1, .type = (uint8_t)(i % 3)};
        e.data = data;
        e.len = test_entry_data(data, sizeof(data), group, i);
        store_log_batch_put_entry(b, group, &e);
    }
    struct store_hard_state hs = {.term = hi / 10 + 1, .vote = 1, .commit = lo};
    store_log_batch_put_hard_state(b, group, &hs);
    CU_ASSERT_FATAL(store_log_write(s, b, true) == STORE_OK);
    store_log_batch_free(b);
}

int test_collect_cb(void *arg, const struct store_entry *e)
{
    struct test_collect *c = arg;
    char data[64];
    size_t n = test_entry_data(data, sizeof(data), c->group, e->index);
    if (e->term != e->index / 10 + 1 || e->type != e->index % 3 || e->len != n ||
        memcmp(e->data, data, n) != 0)
        c->bad++;
    if (c->n < sizeof(c->indexes) / sizeof(c->indexes[0]))
        c->indexes[c->n] = e->index;
    c->n++;
    if (c->stop_after && c->n == c->stop_after)
        return 42;
    return 0;
}

static int suite_leveldb(void)
{
    test_backend = TEST_LEVELDB;
    return 0;
}

static int suite_memory(void)
{
    test_backend = TEST_MEMORY;
    return 0;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite suites[2] = {
        CU_add_suite("store_leveldb", suite_leveldb, NULL),
        CU_add_suite("store_memory", suite_memory, NULL),
    };
    for (int i = 0; i < 2; i++) {
        if (suites[i] == NULL) {
            CU_cleanup_registry();
            return 2;
        }
        test_misc_register(suites[i]);
        test_log_register(suites[i]);
        test_fsm_register(suites[i]);
        test_snap_register(suites[i]);
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed() + CU_get_number_of_failures();
    CU_cleanup_registry();
    return failed != 0;
}
