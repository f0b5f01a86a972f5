/* mem.h - internal: the ordered in-memory map (skip list + rwlock) of store_open_memory. */
#ifndef SLOTD_STORE_MEM_H
#define SLOTD_STORE_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <leveldb/c.h>

/* Keys compare bytewise, shorter first on a common prefix: LevelDB's default comparator.
 * Every function is safe to call from several threads; writers exclude readers. */
struct store__mem;

/* A copied key/value pair whose buffers grow on demand and are reused. */
struct store__mem_kv {
    uint8_t *key, *val;
    size_t klen, vlen, kcap, vcap;
};

/* A pair of a range copy: key and val point into one allocation owned by the pair. */
struct store__mem_pair {
    uint8_t *key, *val;
    size_t klen, vlen;
};

enum store__mem_find_mode {
    STORE__MEM_GE, /* first key >= k */
    STORE__MEM_GT, /* first key > k */
    STORE__MEM_LT, /* last key < k */
};

/* On success *out: caller frees with store__mem_free(). */
int store__mem_new(struct store__mem **out);
void store__mem_free(struct store__mem *m);

/* Applies every put/delete of wb (borrowed for the call) in order, atomically for readers.
 * STORE_ENOMEM leaves m unchanged. */
int store__mem_apply(struct store__mem *m, const leveldb_writebatch_t *wb);

/* STORE_ENOTFOUND or STORE_OK with *val malloc'ed (caller frees with free()). */
int store__mem_get(struct store__mem *m, const void *k, size_t kl, void **val, size_t *vl);

/* Copies the pair found by mode relative to k (k may be NULL with kl 0) into kv (borrowed for
 * the call; its buffers are reused). *found says whether such a key exists. */
int store__mem_find(struct store__mem *m, enum store__mem_find_mode mode, const void *k, size_t kl,
                    struct store__mem_kv *kv, bool *found);
void store__mem_kv_free(struct store__mem_kv *kv);

/* Copies every pair with lo <= key < hi (lo NULL = from the start, hi NULL = to the end).
 * On success *pairs (NULL when *n is 0): caller frees with store__mem_pairs_free(). */
int store__mem_copy_range(struct store__mem *m, const void *lo, size_t lol, const void *hi,
                          size_t hil, struct store__mem_pair **pairs, size_t *n);
void store__mem_pairs_free(struct store__mem_pair *pairs, size_t n);

/* Bytewise comparison as described above. */
int store__key_cmp(const void *a, size_t al, const void *b, size_t bl);

#endif
