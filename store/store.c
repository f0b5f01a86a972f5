/* store.c - store lifecycle (LevelDB and memory backends), error messages, batch core, cursor. */
#include "store/store_int.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STORE_CACHE_BYTES_DEFAULT ((size_t)64 << 20)
#define STORE_WRITE_BUFFER_BYTES_DEFAULT ((size_t)16 << 20)
#define STORE_BLOOM_BITS_PER_KEY 10

static const char *const db_names[STORE__DB_COUNT] = {"raftlog", "fsm"};

SLOTD_ERRLIST_STRERROR(store_strerror, STORE_ERRORS, "unknown store error")

void store_options_default(struct store_options *o)
{
    o->cache_bytes = STORE_CACHE_BYTES_DEFAULT;
    o->write_buffer_bytes = STORE_WRITE_BUFFER_BYTES_DEFAULT;
}

/* ---- error messages ---- */

int store__fail(struct store *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&s->err_lock);
    vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
    pthread_mutex_unlock(&s->err_lock);
    va_end(ap);
    return code;
}

const char *store_errmsg(const struct store *s)
{
    /* One buffer per thread: the copy cannot change under the caller while another thread
     * records a newer failure. The mutex is not part of the logical state of s. */
    static __thread char copy[STORE_ERRMSG_MAX];
    struct store *m = (struct store *)s;
    pthread_mutex_lock(&m->err_lock);
    memcpy(copy, m->errmsg, sizeof(copy));
    pthread_mutex_unlock(&m->err_lock);
    return copy;
}

/* ---- open / close ---- */

static int store_alloc(bool memory, struct store **out)
{
    struct store *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return STORE_ENOMEM;
    s->memory = memory;
    atomic_init(&s->iters_open, 0);
    if (pthread_mutex_init(&s->err_lock, NULL) != 0) {
        free(s);
        return STORE_ENOMEM;
    }
    *out = s;
    return STORE_OK;
}

static void store_free_handles(struct store *s)
{
    for (int i = 0; i < STORE__DB_COUNT; i++) {
        if (s->db[i])
            leveldb_close(s->db[i]);
        if (s->opts[i])
            leveldb_options_destroy(s->opts[i]);
        if (s->cache[i])
            leveldb_cache_destroy(s->cache[i]);
        store__mem_free(s->mem[i]);
    }
    if (s->bloom)
        leveldb_filterpolicy_destroy(s->bloom);
    if (s->ro_fill)
        leveldb_readoptions_destroy(s->ro_fill);
    if (s->ro_nofill)
        leveldb_readoptions_destroy(s->ro_nofill);
    if (s->wo_sync)
        leveldb_writeoptions_destroy(s->wo_sync);
    if (s->wo_nosync)
        leveldb_writeoptions_destroy(s->wo_nosync);
    pthread_mutex_destroy(&s->err_lock);
    free(s);
}

/* Creates dir and its missing parents. */
static int store_mkdir_p(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(path)) {
        snprintf(err, errlen, "store open: data directory path is empty or over %d bytes",
                 PATH_MAX - 1);
        return STORE_EINVAL;
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char c = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "store open: mkdir %s: %s", path, strerror(errno));
            return STORE_EIO;
        }
        path[i] = c;
    }
    return STORE_OK;
}

static int store_open_db(struct store *s, enum store__db which, const char *dir,
                         const struct store_options *o, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, db_names[which]) >= sizeof(path)) {
        snprintf(err, errlen, "store open: path of %s under %s is too long", db_names[which], dir);
        return STORE_EINVAL;
    }
    s->opts[which] = leveldb_options_create();
    s->cache[which] = leveldb_cache_create_lru(o->cache_bytes);
    leveldb_options_set_create_if_missing(s->opts[which], 1);
    leveldb_options_set_compression(s->opts[which], leveldb_snappy_compression);
    leveldb_options_set_cache(s->opts[which], s->cache[which]);
    leveldb_options_set_write_buffer_size(s->opts[which], o->write_buffer_bytes);
    if (which == STORE__DB_FSM)
        leveldb_options_set_filter_policy(s->opts[which], s->bloom);
    char *lerr = NULL;
    s->db[which] = leveldb_open(s->opts[which], path, &lerr);
    if (lerr != NULL) {
        snprintf(err, errlen, "store open: %s: %s", path, lerr);
        leveldb_free(lerr);
        s->db[which] = NULL;
        return STORE_EIO;
    }
    return STORE_OK;
}

/* Opens every db of s (in memory: creates its tables; dir, o and err are unused) and hands s to
 * *out; on failure frees s and returns the first db's error. */
static int store_open_dbs(struct store *s, const char *dir, const struct store_options *o,
                          char *err, size_t errlen, struct store **out)
{
    for (int i = 0; i < STORE__DB_COUNT; i++) {
        int rc = s->memory ? store__mem_new(&s->mem[i])
                           : store_open_db(s, (enum store__db)i, dir, o, err, errlen);
        if (rc != STORE_OK) {
            store_free_handles(s);
            return rc;
        }
    }
    *out = s;
    return STORE_OK;
}

int store_open(const char *dir, const struct store_options *o, struct store **out, char *err,
               size_t errlen)
{
    struct store_options defaults;
    char scratch[1];
    struct store *s;
    int rc;

    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    err[0] = '\0';
    if (o == NULL) {
        store_options_default(&defaults);
        o = &defaults;
    }
    rc = store_mkdir_p(dir, err, errlen);
    if (rc != STORE_OK)
        return rc;
    rc = store_alloc(false, &s);
    if (rc != STORE_OK) {
        snprintf(err, errlen, "store open: out of memory");
        return rc;
    }
    s->bloom = leveldb_filterpolicy_create_bloom(STORE_BLOOM_BITS_PER_KEY);
    s->ro_fill = leveldb_readoptions_create();
    s->ro_nofill = leveldb_readoptions_create();
    leveldb_readoptions_set_fill_cache(s->ro_nofill, 0);
    s->wo_sync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(s->wo_sync, 1);
    s->wo_nosync = leveldb_writeoptions_create();
    return store_open_dbs(s, dir, o, err, errlen, out);
}

int store_open_memory(struct store **out)
{
    struct store *s;
    int rc = store_alloc(true, &s);
    if (rc != STORE_OK)
        return rc;
    return store_open_dbs(s, NULL, NULL, NULL, 0, out);
}

void store_close(struct store *s)
{
    if (s == NULL)
        return;
    assert(atomic_load(&s->iters_open) == 0 && "store_close with open iterators");
    store_free_handles(s);
}

/* ---- batch core ---- */

int store__batch_init(struct store__batch *b)
{
    memset(b, 0, sizeof(*b));
    b->wb = leveldb_writebatch_create();
    return b->wb ? STORE_OK : STORE_ENOMEM;
}

void store__batch_destroy(struct store__batch *b)
{
    if (b->wb)
        leveldb_writebatch_destroy(b->wb);
    free(b->scratch);
}

void store__batch_clear(struct store__batch *b)
{
    leveldb_writebatch_clear(b->wb);
    b->bytes = 0;
    b->count = 0;
    b->err = STORE_OK;
    b->errmsg[0] = '\0';
}

void store__batch_fail(struct store__batch *b, int code, const char *fmt, ...)
{
    if (b->err != STORE_OK)
        return;
    b->err = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->errmsg, sizeof(b->errmsg), fmt, ap);
    va_end(ap);
}

uint8_t *store__batch_scratch(struct store__batch *b, size_t n)
{
    if (n <= b->scratch_cap)
        return b->scratch;
    size_t cap = b->scratch_cap ? b->scratch_cap : 256;
    while (cap < n)
        cap = cap > SIZE_MAX / 2 ? n : cap * 2;
    uint8_t *p = realloc(b->scratch, cap);
    if (p == NULL) {
        store__batch_fail(b, STORE_ENOMEM, "batch: out of memory for a %zu-byte value", n);
        return NULL;
    }
    b->scratch = p;
    b->scratch_cap = cap;
    return p;
}

static bool store_batch_room(struct store__batch *b, size_t n)
{
    if (b->err != STORE_OK)
        return false;
    if (n > STORE_BATCH_BYTES_MAX - b->bytes) {
        store__batch_fail(b, STORE_ELIMIT, "batch: %zu more bytes would exceed %zu bytes", n,
                          STORE_BATCH_BYTES_MAX);
        return false;
    }
    return true;
}

void store__batch_put(struct store__batch *b, const void *k, size_t kl, const void *v, size_t vl)
{
    if (vl > STORE_BATCH_BYTES_MAX || !store_batch_room(b, kl + vl)) {
        store__batch_fail(b, STORE_ELIMIT, "batch: a %zu-byte value exceeds %zu bytes", vl,
                          STORE_BATCH_BYTES_MAX);
        return;
    }
    leveldb_writebatch_put(b->wb, k, kl, v, vl);
    b->bytes += kl + vl;
    b->count++;
}

void store__batch_delete(struct store__batch *b, const void *k, size_t kl)
{
    if (!store_batch_room(b, kl))
        return;
    leveldb_writebatch_delete(b->wb, k, kl);
    b->bytes += kl;
    b->count++;
}

void store__batch_append(struct store__batch *dst, const struct store__batch *src)
{
    if (!store_batch_room(dst, src->bytes))
        return;
    leveldb_writebatch_append(dst->wb, src->wb);
    dst->bytes += src->bytes;
    dst->count += src->count;
}

int store__batch_write(struct store *s, enum store__db db, const struct store__batch *b, bool sync,
                       const char *what)
{
    if (b->err != STORE_OK)
        return store__fail(s, b->err, "%s: batch not written: %s", what, b->errmsg);
    /* On LevelDB an empty synced write still syncs the earlier unsynced writes of db. */
    if (b->count == 0 && (s->memory || !sync))
        return STORE_OK;
    if (s->memory) {
        int rc = store__mem_apply(s->mem[db], b->wb);
        if (rc != STORE_OK)
            return store__fail(s, rc, "%s: out of memory", what);
        return STORE_OK;
    }
    char *lerr = NULL;
    leveldb_write(s->db[db], sync ? s->wo_sync : s->wo_nosync, b->wb, &lerr);
    if (lerr != NULL) {
        store__fail(s, STORE_EIO, "%s: %s", what, lerr);
        leveldb_free(lerr);
        return STORE_EIO;
    }
    return STORE_OK;
}

/* ---- point reads ---- */

int store__get(struct store *s, enum store__db db, const void *k, size_t kl, void **val, size_t *vl)
{
    if (s->memory) {
        int rc = store__mem_get(s->mem[db], k, kl, val, vl);
        if (rc == STORE_ENOMEM)
            store__fail(s, rc, "%s get: out of memory", db_names[db]);
        return rc;
    }
    char *lerr = NULL;
    size_t n = 0;
    char *v = leveldb_get(s->db[db], s->ro_fill, k, kl, &n, &lerr);
    if (lerr != NULL) {
        store__fail(s, STORE_EIO, "%s get: %s", db_names[db], lerr);
        leveldb_free(lerr);
        free(v);
        return STORE_EIO;
    }
    if (v == NULL)
        return STORE_ENOTFOUND;
    *val = v;
    *vl = n;
    return STORE_OK;
}

/* ---- cursor ---- */

void store__cursor_open(struct store *s, enum store__db db, bool fill_cache,
                        struct store__cursor *c)
{
    memset(c, 0, sizeof(*c));
    c->s = s;
    c->db = db;
    if (!s->memory)
        c->it = leveldb_create_iterator(s->db[db], fill_cache ? s->ro_fill : s->ro_nofill);
}

static void cursor_mem_find(struct store__cursor *c, enum store__mem_find_mode mode, const void *k,
                            size_t kl)
{
    if (c->status != STORE_OK) {
        c->mem_valid = false;
        return;
    }
    c->status = store__mem_find(c->s->mem[c->db], mode, k, kl, &c->kv, &c->mem_valid);
}

void store__cursor_seek(struct store__cursor *c, const void *k, size_t kl)
{
    if (c->it)
        leveldb_iter_seek(c->it, k, kl);
    else
        cursor_mem_find(c, STORE__MEM_GE, k, kl);
}

void store__cursor_seek_before(struct store__cursor *c, const void *k, size_t kl)
{
    if (c->it == NULL) {
        cursor_mem_find(c, STORE__MEM_LT, k, kl);
        return;
    }
    leveldb_iter_seek(c->it, k, kl);
    if (leveldb_iter_valid(c->it))
        leveldb_iter_prev(c->it);
    else
        leveldb_iter_seek_to_last(c->it);
}

bool store__cursor_valid(const struct store__cursor *c)
{
    if (c->it)
        return leveldb_iter_valid(c->it) != 0;
    return c->mem_valid;
}

void store__cursor_next(struct store__cursor *c)
{
    assert(store__cursor_valid(c));
    if (c->it) {
        leveldb_iter_next(c->it);
        return;
    }
    /* Search from the current key while the pair found is copied into the other buffers. */
    struct store__mem_kv cur = c->kv;
    c->kv = c->spare;
    c->spare = cur;
    cursor_mem_find(c, STORE__MEM_GT, c->spare.key, c->spare.klen);
}

const uint8_t *store__cursor_key(const struct store__cursor *c, size_t *len)
{
    if (c->it)
        return (const uint8_t *)leveldb_iter_key(c->it, len);
    *len = c->kv.klen;
    return c->kv.key;
}

const uint8_t *store__cursor_value(const struct store__cursor *c, size_t *len)
{
    if (c->it)
        return (const uint8_t *)leveldb_iter_value(c->it, len);
    *len = c->kv.vlen;
    return c->kv.val;
}

int store__cursor_status(struct store__cursor *c, const char *what)
{
    if (c->it) {
        char *lerr = NULL;
        leveldb_iter_get_error(c->it, &lerr);
        if (lerr != NULL) {
            store__fail(c->s, STORE_EIO, "%s: %s", what, lerr);
            leveldb_free(lerr);
            return STORE_EIO;
        }
        return STORE_OK;
    }
    if (c->status != STORE_OK)
        return store__fail(c->s, c->status, "%s: out of memory", what);
    return STORE_OK;
}

void store__cursor_close(struct store__cursor *c)
{
    if (c->it)
        leveldb_iter_destroy(c->it);
    store__mem_kv_free(&c->kv);
    store__mem_kv_free(&c->spare);
    c->it = NULL;
}
