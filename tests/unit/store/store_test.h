/* store_test.h - shared fixture of the store unit tests: one backend per suite, temp dirs. */
#ifndef SLOTD_STORE_TEST_H
#define SLOTD_STORE_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include <CUnit/CUnit.h>

#include "store/keys.h"
#include "store/store.h"

enum test_backend { TEST_LEVELDB, TEST_MEMORY };

/* The backend of the suite that is running. */
extern enum test_backend test_backend;

/* Opens a fresh, empty store of the current backend (LevelDB in a new mkdtemp directory). */
struct store *test_open(void);
/* LevelDB: closes s and opens the same directory again. Memory: returns s unchanged. */
struct store *test_reopen(struct store *s);
/* Closes s and removes its directory. */
void test_close(struct store *s);
/* The directory of the last test_open() (LevelDB only). */
const char *test_dir(void);

/* Writes one entry per index in [lo, hi) for group with term = index / 10 + 1, type = index %
 * 3 and data "g<group>-i<index>" (see test_entry_data), and the hard state {term, vote 1,
 * commit lo}, in one synced batch. */
void test_put_entries(struct store *s, uint32_t group, uint64_t lo, uint64_t hi);
size_t test_entry_data(char *buf, size_t cap, uint32_t group, uint64_t index);

/* Collects iterated entries: indexes and a check of every field against test_put_entries. */
struct test_collect {
    uint64_t indexes[4096];
    size_t n;
    size_t bad; /* entries whose term/type/data differ from what test_put_entries wrote */
    uint32_t group;
    size_t stop_after; /* 0 = never stop */
};
int test_collect_cb(void *arg, const struct store_entry *e);

/* Test registration of each file: adds its tests to suite. */
void test_log_register(CU_pSuite suite);
void test_fsm_register(CU_pSuite suite);
void test_snap_register(CU_pSuite suite);
void test_misc_register(CU_pSuite suite);

#define TEST_ADD(suite, fn) CU_add_test(suite, #fn, fn)

#endif
