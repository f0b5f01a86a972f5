/* fault.c - crash points, peer-network faults and the unsafe-read switch of fault builds. */
#include "service/fault/fault.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAULT_CRASH_NAME_MAX 64
#define FAULT_POLL_MS_DEFAULT 200
#define FAULT_POLL_MS_MIN 5
#define FAULT_POLL_MS_MAX 10000

SLOTD_ERRLIST_STRERROR(fault_strerror, FAULT_ERRORS, "unknown error")

/* ---- parsing (every build: the unit test uses it) ---------------------------------------- */

static int set_err(char *errmsg, size_t len, int code, const char *token, const char *why)
{
    if (errmsg != NULL && len > 0)
        snprintf(errmsg, len, "%s: \"%s\": %s", fault_strerror(code), token, why);
    return code;
}

/* Unsigned decimal of s (borrowed for the call), all of it; false if not a number or > max. */
static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return false;
    *out = v;
    return true;
}

/* One "key=value" token (borrowed for the call) into c. */
static int parse_token(char *tok, struct fault_net_config *c, char *errmsg, size_t errmsg_len)
{
    char *eq = strchr(tok, '=');
    if (eq == NULL)
        return set_err(errmsg, errmsg_len, FAULT_EINVAL, tok, "want key=value");
    *eq = '\0';
    const char *key = tok, *val = eq + 1;
    uint64_t v = 0;
    int rc = FAULT_OK;
    if (strcmp(key, "drop") == 0) {
        char *end = NULL;
        errno = 0;
        double p = strtod(val, &end);
        if (end == val || *end != '\0' || errno != 0)
            rc = FAULT_EINVAL;
        else if (!(p >= 0.0 && p <= 1.0))
            rc = FAULT_ERANGE;
        else
            c->drop_ppm = (uint32_t)(p * 1e6 + 0.5);
    } else if (strcmp(key, "delay_ms") == 0) {
        if (!parse_u64(val, UINT64_MAX, &v))
            rc = FAULT_EINVAL;
        else if (v > FAULT_DELAY_MS_MAX)
            rc = FAULT_ERANGE;
        else
            c->delay_ms = (uint32_t)v;
    } else if (strcmp(key, "block") == 0) {
        if (!parse_u64(val, UINT64_MAX, &v))
            rc = FAULT_EINVAL;
        else if (v < 1 || v > FAULT_NODE_ID_MAX)
            rc = FAULT_ERANGE;
        else
            c->blocked |= UINT64_C(1) << v;
    } else if (strcmp(key, "seed") == 0) {
        if (!parse_u64(val, UINT64_MAX, &v))
            rc = FAULT_EINVAL;
        else
            c->seed = v;
    } else {
        *eq = '=';
        return set_err(errmsg, errmsg_len, FAULT_EINVAL, tok,
                       "unknown key (drop, delay_ms, block, seed)");
    }
    if (rc != FAULT_OK) {
        *eq = '=';
        return set_err(errmsg, errmsg_len, rc, tok,
                       rc == FAULT_ERANGE ? "drop is 0..1, delay_ms <= 10000, block is 1..63"
                                          : "not a number");
    }
    return FAULT_OK;
}

int fault_net_parse(const char *spec, struct fault_net_config *out, char *errmsg, size_t errmsg_len)
{
    char buf[FAULT_SPEC_BYTES_MAX];
    size_t n = strlen(spec);
    if (n >= sizeof(buf))
        return set_err(errmsg, errmsg_len, FAULT_ERANGE, "...", "longer than 1023 bytes");
    memcpy(buf, spec, n + 1);
    /* comments: '#' to the end of the line */
    for (char *p = buf; (p = strchr(p, '#')) != NULL;) {
        while (*p != '\0' && *p != '\n')
            *p++ = ' ';
    }
    struct fault_net_config c = {0};
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", \t\r\n", &save); tok != NULL;
         tok = strtok_r(NULL, ", \t\r\n", &save)) {
        int rc = parse_token(tok, &c, errmsg, errmsg_len);
        if (rc != FAULT_OK)
            return rc;
    }
    *out = c;
    return FAULT_OK;
}

int fault_crash_parse(const char *spec, char *name, size_t name_len, uint64_t *hit)
{
    const char *colon = strchr(spec, ':');
    size_t n = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
    if (n == 0)
        return FAULT_EINVAL;
    if (n >= name_len)
        return FAULT_ERANGE;
    uint64_t h = 1;
    if (colon != NULL) {
        if (!parse_u64(colon + 1, UINT64_MAX, &h))
            return FAULT_EINVAL;
        if (h < 1)
            return FAULT_ERANGE;
    }
    memcpy(name, spec, n);
    name[n] = '\0';
    *hit = h;
    return FAULT_OK;
}

#ifdef SLOTD_FAULT

/* ---- process-wide state, set up once ------------------------------------------------------ */

static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static char crash_name[FAULT_CRASH_NAME_MAX]; /* "" = no crash point armed */
static uint64_t crash_hit;                    /* the hit that exits (>= 1) */
static atomic_uint_fast64_t crash_hits;       /* hits of crash_name so far */
static bool reads_unsafe;
/* The current network config, swapped whole by the poller: readers load each field once. */
static atomic_uint_fast32_t net_drop_ppm, net_delay_ms;
static atomic_uint_fast64_t net_blocked;
static atomic_uint_fast64_t rng_counter;
static char net_file[4096];
static unsigned poll_ms = FAULT_POLL_MS_DEFAULT;

static void fatal(const char *what, const char *detail)
{
    fprintf(stderr, "fault: %s: %s\n", what, detail);
    _exit(2);
}

static void net_publish(const struct fault_net_config *c)
{
    atomic_store(&net_drop_ppm, c->drop_ppm);
    atomic_store(&net_delay_ms, c->delay_ms);
    atomic_store(&net_blocked, c->blocked);
    if (c->seed != 0)
        atomic_store(&rng_counter, c->seed);
}

/* Re-reads net_file; returns its text's hash so unchanged contents are not re-parsed. */
static void net_file_load(uint64_t *last_hash, bool *last_bad)
{
    char text[FAULT_SPEC_BYTES_MAX];
    size_t n = 0;
    FILE *f = fopen(net_file, "r");
    if (f != NULL) {
        n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
    }
    text[n] = '\0';
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)text[i]) * 1099511628211ULL;
    if (h == *last_hash)
        return;
    *last_hash = h;
    struct fault_net_config c;
    char err[256];
    if (fault_net_parse(text, &c, err, sizeof(err)) != FAULT_OK) {
        if (!*last_bad)
            fprintf(stderr, "fault: %s: %s (keeping the previous network faults)\n", net_file, err);
        *last_bad = true;
        return;
    }
    *last_bad = false;
    net_publish(&c);
    fprintf(stderr,
            "fault: network faults now drop_ppm=%" PRIu32 " delay_ms=%" PRIu32 " blocked=0x%" PRIx64
            "\n",
            c.drop_ppm, c.delay_ms, c.blocked);
}

static void *net_poller(void *arg)
{
    (void)arg;
    uint64_t last_hash = 0;
    bool last_bad = false;
    for (;;) {
        net_file_load(&last_hash, &last_bad);
        struct timespec ts = {.tv_sec = poll_ms / 1000,
                              .tv_nsec = (long)(poll_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void fault_init(void)
{
    char err[256];
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    atomic_store(&rng_counter, (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 32));

    const char *at = getenv("SLOTD_CRASH_AT");
    if (at != NULL && at[0] != '\0') {
        int rc = fault_crash_parse(at, crash_name, sizeof(crash_name), &crash_hit);
        if (rc != FAULT_OK)
            fatal("SLOTD_CRASH_AT (want name or name:n, n >= 1)", fault_strerror(rc));
        fprintf(stderr, "fault: crash point %s armed for hit %" PRIu64 "\n", crash_name, crash_hit);
    }
    const char *unsafe = getenv("SLOTD_FAULT_UNSAFE_READS");
    reads_unsafe = unsafe != NULL && strcmp(unsafe, "1") == 0;
    if (reads_unsafe)
        fprintf(stderr, "fault: UNSAFE: LINEARIZABLE reads are served without ReadIndex\n");

    const char *spec = getenv("SLOTD_FAULT_NET");
    if (spec != NULL) {
        struct fault_net_config c;
        if (fault_net_parse(spec, &c, err, sizeof(err)) != FAULT_OK)
            fatal("SLOTD_FAULT_NET", err);
        net_publish(&c);
    }
    const char *poll = getenv("SLOTD_FAULT_NET_POLL_MS");
    if (poll != NULL) {
        uint64_t v = 0;
        if (!parse_u64(poll, FAULT_POLL_MS_MAX, &v) || v < FAULT_POLL_MS_MIN)
            fatal("SLOTD_FAULT_NET_POLL_MS", "want 5..10000");
        poll_ms = (unsigned)v;
    }
    const char *file = getenv("SLOTD_FAULT_NET_FILE");
    if (file != NULL && file[0] != '\0') {
        if (strlen(file) >= sizeof(net_file))
            fatal("SLOTD_FAULT_NET_FILE", "path too long");
        strcpy(net_file, file);
        uint64_t h = 0;
        bool bad = false;
        net_file_load(&h, &bad); /* in force before the first message */
        /* The poller takes no signals: slotd's main thread sigwaits SIGTERM/SIGINT. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_t attr;
        pthread_t th;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, net_poller, NULL);
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0)
            fatal("SLOTD_FAULT_NET_FILE", "cannot start the poller thread");
    }
}

/* Reads the environment when the process loads, so a bad SLOTD_* fault variable stops it at
 * once (exit status 2) rather than at the first message. */
__attribute__((constructor)) static void fault_load(void)
{
    pthread_once(&fault_once, fault_init);
}

/* A uniform 64-bit draw (splitmix64 over a shared counter). */
static uint64_t draw(void)
{
    uint64_t z = atomic_fetch_add(&rng_counter, 0x9E3779B97F4A7C15ULL) + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void fault_crash_point_hit(const char *name)
{
    pthread_once(&fault_once, fault_init);
    if (crash_name[0] == '\0' || strcmp(name, crash_name) != 0)
        return;
    uint64_t n = atomic_fetch_add(&crash_hits, 1) + 1;
    if (n != crash_hit)
        return;
    char line[160];
    int len = snprintf(line, sizeof(line), "fault: crash point %s hit %" PRIu64 ": _exit(%d)\n",
                       name, n, FAULT_CRASH_EXIT_STATUS);
    if (len > 0) {
        ssize_t w =
            write(STDERR_FILENO, line, (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
        (void)w;
    }
    _exit(FAULT_CRASH_EXIT_STATUS);
}

bool fault_net_should_drop(uint64_t from, uint64_t to)
{
    (void)from;
    pthread_once(&fault_once, fault_init);
    if (to >= 1 && to <= FAULT_NODE_ID_MAX && (atomic_load(&net_blocked) >> to) & 1)
        return true;
    uint32_t ppm = (uint32_t)atomic_load(&net_drop_ppm);
    return ppm > 0 && draw() % 1000000 < ppm;
}

int64_t fault_net_pace_until_ms(uint64_t from, uint64_t to)
{
    (void)from;
    (void)to;
    pthread_once(&fault_once, fault_init);
    uint32_t d = (uint32_t)atomic_load(&net_delay_ms);
    if (d == 0)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    return now_ms + d / 2 + (int64_t)(draw() % ((uint64_t)d + 1));
}

bool fault_reads_unsafe(void)
{
    pthread_once(&fault_once, fault_init);
    return reads_unsafe;
}

#endif /* SLOTD_FAULT */

#ifdef SLOTD_FAULT
void fault_note_fsm_synced(const char *data_dir)
{
    char dir[1100], path[1200], tmp[1200], best[64] = "";
    unsigned long best_n = 0;
    snprintf(dir, sizeof(dir), "%s/fsm", data_dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end = NULL;
        unsigned long n = strtoul(e->d_name, &end, 10);
        if (end != e->d_name && strcmp(end, ".log") == 0 && strlen(e->d_name) < sizeof(best) && (best[0] == '\0' || n > best_n)) {
            best_n = n;
            snprintf(best, sizeof(best), "%s", e->d_name);
        }
    }
    closedir(d);
    if (best[0] == '\0')
        return;
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, best);
    if (stat(path, &st) != 0)
        return;
    snprintf(tmp, sizeof(tmp), "%s/fault-fsm-synced.tmp", data_dir);
    snprintf(path, sizeof(path), "%s/fault-fsm-synced", data_dir);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return;
    fprintf(f, "%s %lld\n", best, (long long)st.st_size);
    if (fclose(f) == 0)
        rename(tmp, path);
}
#endif
