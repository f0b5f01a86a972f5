/* metrics.h - a small Prometheus registry (counters, gauges, histograms), its text exposition
 * (format 0.0.4) and the /metrics HTTP endpoint (libmicrohttpd). */
#ifndef SLOTD_METRICS_H
#define SLOTD_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errlist.h"

#define METRICS_ERRORS(X)                                                                          \
    X(METRICS_OK, 0, "ok")                                                                            \
    X(METRICS_ENOMEM, 1, "out of memory")                                                             \
    X(METRICS_EINVALID, 2, "invalid name, label or bucket layout")                                    \
    X(METRICS_EEXISTS, 3, "a family with this name already exists")                                   \
    X(METRICS_EFULL, 4, "too many families or series")                                                \
    X(METRICS_ELISTEN, 5, "cannot listen")

enum metrics_err { METRICS_ERRORS(SLOTD_ERRLIST_ENUM) };

const char *metrics_strerror(int code);

/* Bounds: everything the registry holds is bounded. */
#define METRICS_FAMILIES_MAX 64
#define METRICS_SERIES_MAX 4096 /* per family */
#define METRICS_LABELS_MAX 4    /* label names per family */
#define METRICS_LABEL_VALUE_MAX 128
#define METRICS_NAME_MAX 96
#define METRICS_BUCKETS_MAX 32 /* finite bucket bounds per histogram; +Inf is implicit */

/*
 * Concurrency: families and series are created under the registry's mutex
 * and never removed until metrics_registry_free(), so a series pointer stays
 * valid for the registry's lifetime. Updating a series is lock-free (relaxed
 * C11 atomics): any thread may add, set or observe at any time. Rendering
 * takes the mutex (to walk the family and series tables) and reads the values
 * atomically; a scrape racing with updates may see a histogram's _sum one
 * observation apart from its buckets, but _count always equals the +Inf bucket.
 *
 * Every update function accepts NULL and then does nothing, so code built
 * without a registry pays one branch per hook.
 */

struct metrics_registry;
struct metrics_family;

struct metrics_counter {
    _Atomic uint64_t value;
};

struct metrics_gauge {
    _Atomic int64_t value;
};

struct metrics_histogram {
    const struct metrics_family *family;              /* the bounds */
    _Atomic uint64_t sum_bits;                        /* a double, updated by compare-and-swap */
    _Atomic uint64_t counts[METRICS_BUCKETS_MAX + 1]; /* per bucket, not cumulative; last = +Inf */
};

int metrics_registry_new(struct metrics_registry **out);
/* Frees every family and series; no thread may use them afterwards. r may be NULL. */
void metrics_registry_free(struct metrics_registry *r);

/*
 * Families. name (e.g. "slotd_grpc_requests_total") and label_names are
 * borrowed for the call (copied). help may contain any text (escaped when
 * rendered). Histogram bounds are strictly increasing finite values, at most
 * METRICS_BUCKETS_MAX of them. Registering a name again with the same
 * type, label names and bounds returns the existing family (METRICS_OK); with
 * another layout it is METRICS_EEXISTS. On success *out points into the
 * registry (valid until metrics_registry_free). Returns a METRICS_E* code.
 */
int metrics_counter_family_new(struct metrics_registry *r, const char *name, const char *help,
                               size_t n_labels, const char *const *label_names,
                               struct metrics_family **out);
int metrics_gauge_family_new(struct metrics_registry *r, const char *name, const char *help,
                             size_t n_labels, const char *const *label_names,
                             struct metrics_family **out);
int metrics_histogram_family_new(struct metrics_registry *r, const char *name, const char *help,
                                 size_t n_labels, const char *const *label_names,
                                 const double *bounds, size_t n_bounds,
                                 struct metrics_family **out);

/*
 * The series of family f with these label values (n_labels of them, borrowed
 * for the call; each at most METRICS_LABEL_VALUE_MAX - 1 bytes), created on
 * first use. The same values always give the same series. Returns NULL when
 * f is NULL, the family is of another type, a value is too long, or the
 * family already holds METRICS_SERIES_MAX series or memory runs out: updates
 * to NULL do nothing. The result is owned by the registry.
 */
struct metrics_counter *metrics_counter_get(struct metrics_family *f, const char *const *values);
struct metrics_gauge *metrics_gauge_get(struct metrics_family *f, const char *const *values);
struct metrics_histogram *metrics_histogram_get(struct metrics_family *f,
                                                const char *const *values);

static inline void metrics_counter_add(struct metrics_counter *c, uint64_t n)
{
    if (c != NULL)
        atomic_fetch_add_explicit(&c->value, n, memory_order_relaxed);
}

static inline void metrics_gauge_set(struct metrics_gauge *g, int64_t v)
{
    if (g != NULL)
        atomic_store_explicit(&g->value, v, memory_order_relaxed);
}

static inline void metrics_gauge_add(struct metrics_gauge *g, int64_t delta)
{
    if (g != NULL)
        atomic_fetch_add_explicit(&g->value, delta, memory_order_relaxed);
}

uint64_t metrics_counter_value(const struct metrics_counter *c);
int64_t metrics_gauge_value(const struct metrics_gauge *g);

/* Adds one observation: the first bucket whose bound is >= v, and v to the sum. */
void metrics_histogram_observe(struct metrics_histogram *h, double v);
/* Observations so far (sum of all buckets). */
uint64_t metrics_histogram_count(const struct metrics_histogram *h);

/* Seconds on CLOCK_MONOTONIC, for latency observations. */
double metrics_now_seconds(void);

/*
 * Renders every family in registration order, its series in creation order,
 * as Prometheus text exposition 0.0.4 (# HELP, # TYPE, one line per sample;
 * histograms as cumulative _bucket{le=...} lines ending with le="+Inf", then
 * _sum and _count). A family without series renders only HELP and TYPE.
 * On success *out is NUL-terminated text of *len bytes; caller frees *out
 * with free().
 */
int metrics_registry_render(struct metrics_registry *r, char **out, size_t *len);

/* ---- Build and process metrics (process.c) ---- */

/* The commit (`git rev-parse HEAD` when service/metrics was configured, "unknown" without git). */
extern const char metrics_build_commit[];

/* Registers gauge slotd_build_info{version,commit} = 1. version and commit are borrowed for the
 * call (copied; each under METRICS_LABEL_VALUE_MAX bytes, else METRICS_EINVALID). */
int metrics_build_info_register(struct metrics_registry *r, const char *version,
                                const char *commit);

/*
 * From now on every render appends, read at that moment: process_cpu_seconds_total,
 * process_resident_memory_bytes, process_start_time_seconds (/proc/self/stat, /proc/stat
 * btime), process_open_fds (/proc/self/fd), process_max_fds (RLIMIT_NOFILE, left out when
 * unlimited) and, when data_dir is not NULL or "", slotd_data_dir_available_bytes and
 * slotd_data_dir_size_bytes (statvfs of data_dir). A value that cannot be read is left out of
 * that scrape. data_dir is borrowed for the call (copied; under 1024 bytes, else
 * METRICS_EINVALID).
 */
int metrics_process_enable(struct metrics_registry *r, const char *data_dir);

/* Bucket layouts used by slotd. */
extern const double metrics_latency_bounds[]; /* seconds: 100 us .. 10 s */
extern const size_t metrics_latency_bounds_len;
extern const double metrics_size_bounds[]; /* counts: 1, 2, 4, .. 4096 */
extern const size_t metrics_size_bounds_len;

/* ---- HTTP endpoint ---- */

struct metrics_http;

#define METRICS_HTTP_CONNECTIONS_MAX 16
#define METRICS_HTTP_TIMEOUT_S 10

/*
 * Serves GET/HEAD /metrics (the registry rendered, Content-Type
 * "text/plain; version=0.0.4; charset=utf-8") on listen ("HOST:PORT",
 * "[IPv6]:PORT"; port 0 picks a free one) from libmicrohttpd's own thread;
 * any other path is 404, another method on /metrics is 405. At most
 * METRICS_HTTP_CONNECTIONS_MAX connections at once, each idle at most
 * METRICS_HTTP_TIMEOUT_S seconds. r is borrowed until metrics_http_stop().
 * On success *port is the bound port; caller stops with metrics_http_stop().
 * On error returns METRICS_EINVALID (bad address) or METRICS_ELISTEN with a
 * sentence in err.
 */
int metrics_http_start(struct metrics_registry *r, const char *listen, struct metrics_http **out,
                       int *port, char *err, size_t errlen);
/* Stops the listener (joins its thread) and frees h; h may be NULL. */
void metrics_http_stop(struct metrics_http *h);

#endif /* SLOTD_METRICS_H */
