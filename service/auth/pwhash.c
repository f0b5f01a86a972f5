/* pwhash.c - crypto_pwhash_str / _str_verify on a few worker threads behind a bounded queue. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <sys/prctl.h>

#include "token.h"

struct job {
    struct job *next;
    bool verify;
    bool has_hash;
    char hash[AUTH_PWHASH_STR_MAX];
    char password[AUTH_PASSWORD_MAX + 1];
    size_t len;
    auth_pwhash_cb cb;
    void *arg;
};

struct auth_pwhash_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *head, *tail; /* FIFO; invariant: n_queued jobs */
    unsigned n_queued, n_running, queue_max;
    bool stopping;
    unsigned n_threads;
    pthread_t threads[8];
    char dummy[AUTH_PWHASH_STR_MAX]; /* hash of a random password: the missing user's cost */
};

/* Runs j's hash or check; *rc gets the answer, out the new hash (hash jobs). */
static void run(struct auth_pwhash_pool *p, struct job *j, int *rc, char out[AUTH_PWHASH_STR_MAX])
{
    if (!j->verify) {
        int r =
            crypto_pwhash_str(out, j->password, j->len, AUTH_PWHASH_OPSLIMIT, AUTH_PWHASH_MEMLIMIT);
        *rc = r == 0 ? AUTH_OK : AUTH_ESYS;
        return;
    }
    const char *h = j->has_hash ? j->hash : p->dummy;
    int r = crypto_pwhash_str_verify(h, j->password, j->len);
    *rc = r == 0 && j->has_hash ? AUTH_OK : AUTH_EBADPROOF;
}

static void *worker(void *arg)
{
    struct auth_pwhash_pool *p = arg;
    prctl(PR_SET_NAME, "slotd-pwhash");
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->head == NULL && !p->stopping) {
            pthread_cond_wait(&p->cv, &p->mu);
        }
        struct job *j = p->head;
        if (j == NULL) {
            break; /* stopping and nothing left */
        }
        p->head = j->next;
        if (p->head == NULL) {
            p->tail = NULL;
        }
        p->n_queued--;
        p->n_running++;
        pthread_mutex_unlock(&p->mu);
        int rc;
        char out[AUTH_PWHASH_STR_MAX];
        run(p, j, &rc, out);
        pthread_mutex_lock(&p->mu);
        p->n_running--; /* before the callback: a caller it wakes sees the job gone */
        pthread_mutex_unlock(&p->mu);
        j->cb(j->arg, rc, !j->verify && rc == AUTH_OK ? out : NULL);
        sodium_memzero(out, sizeof(out));
        sodium_memzero(j, sizeof(*j));
        free(j);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int auth_pwhash_pool_new(unsigned threads, unsigned queue_max, struct auth_pwhash_pool **out)
{
    if (threads < 1 || threads > 8 || queue_max < 1 || queue_max > 1024) {
        return AUTH_EINVALID;
    }
    if (sodium_init() < 0) {
        return AUTH_ESYS;
    }
    struct auth_pwhash_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return AUTH_ESYS;
    }
    uint8_t random_pw[32];
    randombytes_buf(random_pw, sizeof(random_pw));
    int rc = crypto_pwhash_str(p->dummy, (const char *)random_pw, sizeof(random_pw),
                               AUTH_PWHASH_OPSLIMIT, AUTH_PWHASH_MEMLIMIT);
    sodium_memzero(random_pw, sizeof(random_pw));
    if (rc != 0) {
        goto err_after_pool;
    }
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        goto err_after_pool;
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        goto err_after_mu;
    }
    p->queue_max = queue_max;
    for (; p->n_threads < threads; p->n_threads++) {
        if (pthread_create(&p->threads[p->n_threads], NULL, worker, p) != 0) {
            goto err_after_threads;
        }
    }
    *out = p;
    return AUTH_OK;

err_after_threads:
    auth_pwhash_pool_free(p);
    return AUTH_ESYS;
err_after_mu:
    pthread_mutex_destroy(&p->mu);
err_after_pool:
    free(p);
    return AUTH_ESYS;
}

static int submit(struct auth_pwhash_pool *p, bool verify, const char *hash, const char *password,
                  size_t len, auth_pwhash_cb cb, void *arg)
{
    if (len < 1 || len > AUTH_PASSWORD_MAX || password == NULL ||
        (hash != NULL && strlen(hash) >= AUTH_PWHASH_STR_MAX)) {
        return AUTH_EINVALID;
    }
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return AUTH_ESYS;
    }
    j->verify = verify;
    j->has_hash = hash != NULL;
    if (hash != NULL) {
        memcpy(j->hash, hash, strlen(hash) + 1);
    }
    memcpy(j->password, password, len);
    j->len = len;
    j->cb = cb;
    j->arg = arg;
    pthread_mutex_lock(&p->mu);
    if (p->n_queued >= p->queue_max || p->stopping) {
        pthread_mutex_unlock(&p->mu);
        sodium_memzero(j, sizeof(*j));
        free(j);
        return AUTH_EFULL;
    }
    if (p->tail != NULL) {
        p->tail->next = j;
    } else {
        p->head = j;
    }
    p->tail = j;
    p->n_queued++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return AUTH_OK;
}

int auth_pwhash_hash(struct auth_pwhash_pool *p, const char *password, size_t len,
                     auth_pwhash_cb cb, void *arg)
{
    return submit(p, false, NULL, password, len, cb, arg);
}

int auth_pwhash_verify(struct auth_pwhash_pool *p, const char *hash, const char *password,
                       size_t len, auth_pwhash_cb cb, void *arg)
{
    return submit(p, true, hash, password, len, cb, arg);
}

unsigned auth_pwhash_pending(struct auth_pwhash_pool *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned n = p->n_queued + p->n_running;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void auth_pwhash_pool_free(struct auth_pwhash_pool *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_threads; i++) {
        pthread_join(p->threads[i], NULL);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
