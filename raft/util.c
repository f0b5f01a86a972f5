/* util.c - raft core helpers: asserts, error and name tables, config defaults, arenas, chunk FIFO,
 * PRNG. */
#include "raft_int.h"

#include <stdio.h>

void raft__assert_fail(const char *cond, const char *file, int line, const char *func)
{
    fprintf(stderr, "raft: assertion failed: %s (%s:%d, %s)\n", cond, file, line, func);
    fflush(stderr);
    abort();
}

#define RAFT__ERR_TEXT(name, code, text) [(code)] = (text),
static const char *const raft__err_text[] = {RAFT_ERRORS(RAFT__ERR_TEXT)};
#undef RAFT__ERR_TEXT

const char *raft_strerror(int err)
{
    if (err < 0 || err >= RAFT_ERR_COUNT_ || raft__err_text[err] == NULL) {
        return "unknown raft error";
    }
    return raft__err_text[err];
}

const char *raft_msg_type_name(int type)
{
    static const char *const names[RAFT_MSG_TYPE_COUNT_] = {
        "append",    "append_resp",    "vote",     "vote_resp",   "pre_vote",   "pre_vote_resp",
        "heartbeat", "heartbeat_resp", "snapshot", "timeout_now", "read_index", "read_index_resp",
    };
    if (type < 0 || type >= RAFT_MSG_TYPE_COUNT_) {
        return "unknown";
    }
    return names[type];
}

const char *raft_role_name(int role)
{
    switch (role) {
    case RAFT_FOLLOWER:
        return "follower";
    case RAFT_PRE_CANDIDATE:
        return "pre_candidate";
    case RAFT_CANDIDATE:
        return "candidate";
    case RAFT_LEADER:
        return "leader";
    default:
        return "unknown";
    }
}

void raft_config_default(struct raft_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->election_tick = 10;
    cfg->heartbeat_tick = 1;
    cfg->max_msg_bytes = 1u << 20;
    cfg->max_inflight_msgs = 256;
    cfg->max_uncommitted_bytes = 64u << 20;
    cfg->max_entry_bytes = 8u << 20;
    cfg->max_committed_bytes_per_ready = 16u << 20;
    cfg->read_queue_max = 4096;
}

void raft_conf_change_encode(const struct raft_conf_change *cc,
                             uint8_t out[RAFT_CONF_CHANGE_ENCODED_LEN])
{
    RAFT_ASSERT(cc != NULL && out != NULL);
    out[0] = cc->type;
    for (int i = 0; i < 8; i++) {
        out[1 + i] = (uint8_t)(cc->node >> (56 - 8 * i));
    }
}

int raft_conf_change_decode(const void *data, size_t len, struct raft_conf_change *out)
{
    RAFT_ASSERT(out != NULL);
    const uint8_t *p = data;
    if (p == NULL || len != RAFT_CONF_CHANGE_ENCODED_LEN || p[0] > RAFT_CC_REMOVE) {
        return RAFT_EINVAL;
    }
    raft_id node = 0;
    for (int i = 0; i < 8; i++) {
        node = (node << 8) | p[1 + i];
    }
    if (node == 0) {
        return RAFT_EINVAL;
    }
    out->type = p[0];
    out->node = node;
    return 0;
}

/* ---- arena ---- */

static struct raft__chunk *raft__chunk_new(size_t cap)
{
    if (cap > SIZE_MAX - sizeof(struct raft__chunk)) {
        return NULL;
    }
    struct raft__chunk *c = malloc(sizeof(*c) + cap);
    if (c == NULL) {
        return NULL;
    }
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    c->max_index = 0;
    return c;
}

void *raft__arena_alloc(struct raft__arena *a, size_t n)
{
    if (n > SIZE_MAX - 15u - sizeof(struct raft__chunk)) {
        return NULL; /* no such block fits in memory */
    }
    n = (n + 15u) & ~(size_t)15u;
    if (n == 0) {
        n = 16;
    }
    while (a->cur != NULL && a->cur->cap - a->cur->used < n) {
        if (a->cur->next == NULL) {
            break;
        }
        a->cur = a->cur->next;
    }
    if (a->cur == NULL || a->cur->cap - a->cur->used < n) {
        struct raft__chunk *c = raft__chunk_new(n > RAFT__CHUNK_BYTES ? n : RAFT__CHUNK_BYTES);
        if (c == NULL) {
            return NULL;
        }
        if (a->cur == NULL) {
            a->head = c;
        } else {
            /* insert after cur so chunks kept by reset() stay reusable */
            c->next = a->cur->next;
            a->cur->next = c;
        }
        a->cur = c;
    }
    RAFT_ASSERT(a->cur->used + n <= a->cur->cap);
    void *p = a->cur->data + a->cur->used;
    a->cur->used += n;
    return p;
}

void raft__arena_reset(struct raft__arena *a)
{
    size_t kept = 0;
    struct raft__chunk **link = &a->head;
    while (*link != NULL) {
        struct raft__chunk *c = *link;
        if (kept + c->cap > RAFT__ARENA_KEEP_BYTES) {
            *link = c->next;
            free(c);
            continue;
        }
        kept += c->cap;
        c->used = 0;
        link = &c->next;
    }
    a->cur = a->head;
}

void raft__arena_free(struct raft__arena *a)
{
    struct raft__chunk *c = a->head;
    while (c != NULL) {
        struct raft__chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->cur = NULL;
}

/* ---- chunk FIFO ---- */

int raft__chunks_reserve(struct raft__chunks *c, size_t len)
{
    if (len == 0 || (c->tail != NULL && c->tail->cap - c->tail->used >= len)) {
        return 0;
    }
    struct raft__chunk *k = NULL;
    if (c->spare != NULL && c->spare->cap >= len) {
        k = c->spare;
        c->spare = NULL;
        k->used = 0;
        k->max_index = 0;
        k->next = NULL;
    } else {
        k = raft__chunk_new(len > RAFT__CHUNK_BYTES ? len : RAFT__CHUNK_BYTES);
        if (k == NULL) {
            return RAFT_ENOMEM;
        }
    }
    if (c->tail == NULL) {
        c->head = k;
    } else {
        c->tail->next = k;
    }
    c->tail = k;
    return 0;
}

void *raft__chunks_put(struct raft__chunks *c, const void *data, size_t len, raft_index index)
{
    if (len == 0) {
        return NULL;
    }
    struct raft__chunk *k = c->tail;
    RAFT_ASSERT(k != NULL && k->cap - k->used >= len); /* caller reserved */
    void *p = k->data + k->used;
    memcpy(p, data, len);
    k->used += len;
    if (index > k->max_index) {
        k->max_index = index;
    }
    return p;
}

void raft__chunks_release(struct raft__chunks *c, raft_index upto)
{
    while (c->head != NULL && c->head->max_index <= upto) {
        struct raft__chunk *k = c->head;
        c->head = k->next;
        if (c->head == NULL) {
            c->tail = NULL;
        }
        if (c->spare == NULL && k->cap == RAFT__CHUNK_BYTES) {
            c->spare = k;
        } else {
            free(k);
        }
    }
}

void raft__chunks_free(struct raft__chunks *c)
{
    struct raft__chunk *k = c->head;
    while (k != NULL) {
        struct raft__chunk *next = k->next;
        free(k);
        k = next;
    }
    free(c->spare);
    memset(c, 0, sizeof(*c));
}

int raft__grow(void **arr, size_t *cap, size_t need, size_t size)
{
    RAFT_ASSERT(size > 0);
    if (need <= *cap) {
        return 0;
    }
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need && ncap <= SIZE_MAX / 2) {
        ncap *= 2;
    }
    if (ncap < need || ncap > SIZE_MAX / size) {
        return RAFT_ENOMEM; /* the array could not be addressed */
    }
    void *p = realloc(*arr, ncap * size);
    if (p == NULL) {
        return RAFT_ENOMEM;
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

/* splitmix64: small, fast, and good enough to spread election timeouts. */
uint64_t raft__rand_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

size_t raft__entries_bytes(const struct raft_entry *ents, size_t n)
{
    size_t b = 0;
    for (size_t i = 0; i < n; i++) {
        b += ents[i].data.len;
    }
    return b;
}
