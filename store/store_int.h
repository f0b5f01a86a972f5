/* store_int.h - internal: the store object, the batch core and the backend-neutral cursor. */
#ifndef SLOTD_STORE_INT_H
#define SLOTD_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include <leveldb/c.h>

#include "store/keys.h"
#include "store/mem.h"
#include "store/store.h"

enum store__db { STORE__DB_RAFTLOG = 0, STORE__DB_FSM = 1, STORE__DB_COUNT = 2 };

/* invariant: memory ? (mem[] set, db[] NULL) : (db[] set, mem[] NULL) */
struct store {
    bool memory;
    /* LevelDB backend */
    leveldb_t *db[STORE__DB_COUNT];
    leveldb_options_t *opts[STORE__DB_COUNT];
    leveldb_cache_t *cache[STORE__DB_COUNT];
    leveldb_filterpolicy_t *bloom; /* fsm only */
    leveldb_readoptions_t *ro_fill, *ro_nofill;
    leveldb_writeoptions_t *wo_sync, *wo_nosync;
    /* memory backend */
    struct store__mem *mem[STORE__DB_COUNT];

    pthread_mutex_t err_lock; /* guards errmsg */
    char errmsg[STORE_ERRMSG_MAX];
    atomic_int iters_open; /* invariant: 0 when store_close() runs */
};

/* The part shared by struct store_log_batch and struct store_fsm_batch. */
struct store__batch {
    leveldb_writebatch_t *wb; /* also the op list the memory backend applies */
    size_t bytes, count;      /* invariant: bytes <= STORE_BATCH_BYTES_MAX */
    int err;                  /* first error recorded while building; STORE_OK when none */
    char errmsg[STORE_ERRMSG_MAX];
    uint8_t *scratch; /* reused value encoding buffer */
    size_t scratch_cap;
};

/* Defines struct NAME (a typed wrapper of struct store__batch in member b) and the lifecycle every
 * typed batch shares, as declared in store.h: NAME_new, _free, _clear, _bytes, _count, _error.
 * Used once per batch type (log.c, fsm.c), so the two stores keep one lifecycle. */
#define STORE__BATCH_TYPE(NAME)                                                                    \
    struct NAME {                                                                                  \
        struct store__batch b;                                                                     \
    };                                                                                             \
    int NAME##_new(struct NAME **out)                                                              \
    {                                                                                              \
        struct NAME *nb = malloc(sizeof(*nb));                                                     \
        if (nb == NULL)                                                                            \
            return STORE_ENOMEM;                                                                   \
        if (store__batch_init(&nb->b) != STORE_OK) {                                               \
            free(nb);                                                                              \
            return STORE_ENOMEM;                                                                   \
        }                                                                                          \
        *out = nb;                                                                                 \
        return STORE_OK;                                                                           \
    }                                                                                              \
    void NAME##_free(struct NAME *nb)                                                              \
    {                                                                                              \
        if (nb == NULL)                                                                            \
            return;                                                                                \
        store__batch_destroy(&nb->b);                                                              \
        free(nb);                                                                                  \
    }                                                                                              \
    void NAME##_clear(struct NAME *nb)                                                             \
    {                                                                                              \
        store__batch_clear(&nb->b);                                                                \
    }                                                                                              \
    size_t NAME##_bytes(const struct NAME *nb)                                                     \
    {                                                                                              \
        return nb->b.bytes;                                                                        \
    }                                                                                              \
    size_t NAME##_count(const struct NAME *nb)                                                     \
    {                                                                                              \
        return nb->b.count;                                                                        \
    }                                                                                              \
    int NAME##_error(const struct NAME *nb)                                                        \
    {                                                                                              \
        return nb->b.err;                                                                          \
    }

/* Sets s's message from fmt (printf-style) and returns code. */
int store__fail(struct store *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int store__batch_init(struct store__batch *b);
void store__batch_destroy(struct store__batch *b);
void store__batch_clear(struct store__batch *b);
/* Records the first error of b (later ones are dropped). */
void store__batch_fail(struct store__batch *b, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Returns a buffer of at least n bytes owned by b, or NULL after recording STORE_ENOMEM. */
uint8_t *store__batch_scratch(struct store__batch *b, size_t n);
void store__batch_put(struct store__batch *b, const void *k, size_t kl, const void *v, size_t vl);
void store__batch_delete(struct store__batch *b, const void *k, size_t kl);
/* Appends src's ops to dst (src is left unchanged). */
void store__batch_append(struct store__batch *dst, const struct store__batch *src);
/* Writes b to db; what names the operation in the error message ("raftlog write"). */
int store__batch_write(struct store *s, enum store__db db, const struct store__batch *b, bool sync,
                       const char *what);

/* Point read: STORE_OK with *val malloc'ed (caller frees with free()), STORE_ENOTFOUND or
 * STORE_EIO/STORE_ENOMEM (message set on s). */
int store__get(struct store *s, enum store__db db, const void *k, size_t kl, void **val,
               size_t *vl);

/* Forward cursor over one database, for either backend. On LevelDB it is an iterator (an
 * implicit snapshot); on the memory backend each step re-seeks and copies the pair, so no lock
 * is held between calls. */
struct store__cursor {
    struct store *s;
    enum store__db db;
    leveldb_iterator_t *it;     /* LevelDB */
    struct store__mem_kv kv;    /* memory: current pair */
    struct store__mem_kv spare; /* memory: buffers reused by the next step */
    bool mem_valid;
    int status;
};
void store__cursor_open(struct store *s, enum store__db db, bool fill_cache,
                        struct store__cursor *c);
void store__cursor_seek(struct store__cursor *c, const void *k, size_t kl);        /* >= k */
void store__cursor_seek_before(struct store__cursor *c, const void *k, size_t kl); /* < k */
bool store__cursor_valid(const struct store__cursor *c);
void store__cursor_next(struct store__cursor *c);
const uint8_t *store__cursor_key(const struct store__cursor *c, size_t *len);
const uint8_t *store__cursor_value(const struct store__cursor *c, size_t *len);
/* STORE_OK, or the read error (message set on s, prefixed with what). */
int store__cursor_status(struct store__cursor *c, const char *what);
void store__cursor_close(struct store__cursor *c);

#endif
