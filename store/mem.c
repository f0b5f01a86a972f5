/* mem.c - internal: skip list ordered map for the in-memory store, with atomic batch apply. */
#include "store/mem.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store/err.h" /* not store.h: store.c includes mem.h, so mem.c stays below it */

/* Node levels come from a hash of the key (p = 1/4 per level), so the map is deterministic:
 * the same writes build the same list, which keeps simulation runs reproducible. */
#define MEM_LEVEL_MAX 16

struct mem_node {
    uint8_t *key, *val; /* point into this node's allocation, after next[] */
    size_t klen, vlen;
    int level; /* 1..MEM_LEVEL_MAX */
    struct mem_node *next[];
};

struct store__mem {
    pthread_rwlock_t lock;
    struct mem_node *head[MEM_LEVEL_MAX];
};

int store__key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

static int mem_level_of(const void *k, size_t kl)
{
    const uint8_t *p = k;
    uint64_t h = 1469598103934665603ull; /* FNV-1a, then a final mix */
    for (size_t i = 0; i < kl; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    int level = 1;
    while (level < MEM_LEVEL_MAX && (h & 3) == 0) {
        level++;
        h >>= 2;
    }
    return level;
}

static struct mem_node *mem_node_new(const void *k, size_t kl, const void *v, size_t vl)
{
    int level = mem_level_of(k, kl);
    size_t links = (size_t)level * sizeof(struct mem_node *);
    struct mem_node *n = malloc(sizeof(*n) + links + kl + vl);
    if (n == NULL)
        return NULL;
    n->level = level;
    n->key = (uint8_t *)n + sizeof(*n) + links;
    n->val = n->key + kl;
    n->klen = kl;
    n->vlen = vl;
    if (kl)
        memcpy(n->key, k, kl);
    if (vl)
        memcpy(n->val, v, vl);
    return n;
}

/* Finds the first node >= k. upd (may be NULL) receives, per level, the link that points past
 * the last node < k; *prev (may be NULL) the last node < k or NULL. Caller holds the lock. */
static struct mem_node *mem_search(struct store__mem *m, const void *k, size_t kl,
                                   struct mem_node ***upd, struct mem_node **prev)
{
    struct mem_node **links = m->head;
    struct mem_node *last = NULL;
    for (int i = MEM_LEVEL_MAX - 1; i >= 0; i--) {
        while (links[i] && store__key_cmp(links[i]->key, links[i]->klen, k, kl) < 0) {
            last = links[i];
            links = last->next;
        }
        if (upd)
            upd[i] = &links[i];
    }
    if (prev)
        *prev = last;
    return links[0];
}

int store__mem_new(struct store__mem **out)
{
    struct store__mem *m = calloc(1, sizeof(*m));
    if (m == NULL)
        goto err;
    if (pthread_rwlock_init(&m->lock, NULL) != 0)
        goto err_after_alloc;
    *out = m;
    return STORE_OK;

err_after_alloc:
    free(m);
err:
    return STORE_ENOMEM;
}

void store__mem_free(struct store__mem *m)
{
    if (m == NULL)
        return;
    struct mem_node *n = m->head[0];
    while (n) {
        struct mem_node *next = n->next[0];
        free(n);
        n = next;
    }
    pthread_rwlock_destroy(&m->lock);
    free(m);
}

/* ---- batch apply: allocate every node first, then link under the write lock ---- */

struct mem_op {
    struct mem_node *node; /* put: the node to link; delete: a node carrying the key */
    bool put;
};

struct mem_ops {
    struct mem_op *ops;
    size_t n, cap;
    bool failed;
};

static void mem_ops_add(struct mem_ops *o, const char *k, size_t kl, const char *v, size_t vl,
                        bool put)
{
    if (o->failed)
        return;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        struct mem_op *ops = realloc(o->ops, cap * sizeof(*ops));
        if (ops == NULL) {
            o->failed = true;
            return;
        }
        o->ops = ops;
        o->cap = cap;
    }
    struct mem_node *node = mem_node_new(k, kl, v, vl);
    if (node == NULL) {
        o->failed = true;
        return;
    }
    o->ops[o->n].node = node;
    o->ops[o->n].put = put;
    o->n++;
}

static void mem_ops_put(void *arg, const char *k, size_t kl, const char *v, size_t vl)
{
    mem_ops_add(arg, k, kl, v, vl, true);
}

static void mem_ops_delete(void *arg, const char *k, size_t kl)
{
    mem_ops_add(arg, k, kl, NULL, 0, false);
}

/* Removes the node equal to n's key if present, then links n when put. Caller holds the
 * write lock. Never allocates. */
static void mem_apply_one(struct store__mem *m, struct mem_node *n, bool put)
{
    struct mem_node **upd[MEM_LEVEL_MAX];
    struct mem_node *found = mem_search(m, n->key, n->klen, upd, NULL);
    if (found && store__key_cmp(found->key, found->klen, n->key, n->klen) == 0) {
        for (int i = 0; i < found->level; i++) {
            assert(*upd[i] == found);
            *upd[i] = found->next[i];
        }
        free(found);
    }
    if (!put)
        return;
    for (int i = 0; i < n->level; i++) {
        n->next[i] = *upd[i];
        *upd[i] = n;
    }
}

int store__mem_apply(struct store__mem *m, const leveldb_writebatch_t *wb)
{
    struct mem_ops o = {0};
    leveldb_writebatch_iterate(wb, &o, mem_ops_put, mem_ops_delete);
    if (o.failed) {
        for (size_t i = 0; i < o.n; i++)
            free(o.ops[i].node);
        free(o.ops);
        return STORE_ENOMEM;
    }
    pthread_rwlock_wrlock(&m->lock);
    for (size_t i = 0; i < o.n; i++)
        mem_apply_one(m, o.ops[i].node, o.ops[i].put);
    pthread_rwlock_unlock(&m->lock);
    for (size_t i = 0; i < o.n; i++) {
        if (!o.ops[i].put)
            free(o.ops[i].node);
    }
    free(o.ops);
    return STORE_OK;
}

int store__mem_get(struct store__mem *m, const void *k, size_t kl, void **val, size_t *vl)
{
    int rc = STORE_ENOTFOUND;
    pthread_rwlock_rdlock(&m->lock);
    struct mem_node *n = mem_search(m, k, kl, NULL, NULL);
    if (n && store__key_cmp(n->key, n->klen, k, kl) == 0) {
        void *copy = malloc(n->vlen ? n->vlen : 1);
        if (copy == NULL) {
            rc = STORE_ENOMEM;
        } else {
            if (n->vlen)
                memcpy(copy, n->val, n->vlen);
            *val = copy;
            *vl = n->vlen;
            rc = STORE_OK;
        }
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

static int mem_buf_set(uint8_t **buf, size_t *cap, size_t *len, const void *src, size_t n)
{
    if (n > *cap || *buf == NULL) {
        size_t want = n > 64 ? n : 64;
        uint8_t *p = realloc(*buf, want);
        if (p == NULL)
            return STORE_ENOMEM;
        *buf = p;
        *cap = want;
    }
    if (n)
        memcpy(*buf, src, n);
    *len = n;
    return STORE_OK;
}

int store__mem_find(struct store__mem *m, enum store__mem_find_mode mode, const void *k, size_t kl,
                    struct store__mem_kv *kv, bool *found)
{
    int rc = STORE_OK;
    struct mem_node *prev;
    pthread_rwlock_rdlock(&m->lock);
    struct mem_node *n = mem_search(m, k, kl, NULL, &prev);
    if (mode == STORE__MEM_GT && n && store__key_cmp(n->key, n->klen, k, kl) == 0)
        n = n->next[0];
    if (mode == STORE__MEM_LT)
        n = prev;
    *found = n != NULL;
    if (n) {
        rc = mem_buf_set(&kv->key, &kv->kcap, &kv->klen, n->key, n->klen);
        if (rc == STORE_OK)
            rc = mem_buf_set(&kv->val, &kv->vcap, &kv->vlen, n->val, n->vlen);
    }
    pthread_rwlock_unlock(&m->lock);
    if (rc != STORE_OK)
        *found = false;
    return rc;
}

void store__mem_kv_free(struct store__mem_kv *kv)
{
    free(kv->key);
    free(kv->val);
    memset(kv, 0, sizeof(*kv));
}

int store__mem_copy_range(struct store__mem *m, const void *lo, size_t lol, const void *hi,
                          size_t hil, struct store__mem_pair **pairs, size_t *n)
{
    struct store__mem_pair *out = NULL;
    size_t count = 0, cap = 0;
    int rc = STORE_OK;
    pthread_rwlock_rdlock(&m->lock);
    struct mem_node *node = lo ? mem_search(m, lo, lol, NULL, NULL) : m->head[0];
    for (; node; node = node->next[0]) {
        if (hi && store__key_cmp(node->key, node->klen, hi, hil) >= 0)
            break;
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct store__mem_pair *p = realloc(out, ncap * sizeof(*p));
            if (p == NULL) {
                rc = STORE_ENOMEM;
                break;
            }
            out = p;
            cap = ncap;
        }
        uint8_t *buf = malloc(node->klen + node->vlen + 1);
        if (buf == NULL) {
            rc = STORE_ENOMEM;
            break;
        }
        memcpy(buf, node->key, node->klen);
        memcpy(buf + node->klen, node->val, node->vlen);
        out[count].key = buf;
        out[count].val = buf + node->klen;
        out[count].klen = node->klen;
        out[count].vlen = node->vlen;
        count++;
    }
    pthread_rwlock_unlock(&m->lock);
    if (rc != STORE_OK) {
        store__mem_pairs_free(out, count);
        return rc;
    }
    *pairs = out;
    *n = count;
    return STORE_OK;
}

void store__mem_pairs_free(struct store__mem_pair *pairs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(pairs[i].key);
    free(pairs);
}
