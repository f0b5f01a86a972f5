/* registry.c - metric families and their series: creation under one mutex, lock-free updates. */
#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics_internal.h"

SLOTD_ERRLIST_STRERROR(metrics_strerror, METRICS_ERRORS, "unknown metrics error")

const double metrics_latency_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                         0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
const size_t metrics_latency_bounds_len =
    sizeof(metrics_latency_bounds) / sizeof(metrics_latency_bounds[0]);
const double metrics_size_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
const size_t metrics_size_bounds_len = sizeof(metrics_size_bounds) / sizeof(metrics_size_bounds[0]);

int metrics_registry_new(struct metrics_registry **out)
{
    struct metrics_registry *r = calloc(1, sizeof(*r));
    if (r == NULL)
        goto err;
    if (pthread_mutex_init(&r->mu, NULL) != 0)
        goto err_after_alloc;
    *out = r;
    return METRICS_OK;

err_after_alloc:
    free(r);
err:
    return METRICS_ENOMEM;
}

static void family_free(struct metrics_family *f)
{
    for (size_t i = 0; i < f->n_series; i++)
        free(f->series[i]);
    free(f->series);
    free(f->help);
    free(f);
}

void metrics_registry_free(struct metrics_registry *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_families; i++)
        family_free(r->families[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; no ':' in label names. */
static bool name_valid(const char *s, bool colon_ok)
{
    if (s == NULL || *s == '\0' || strlen(s) >= METRICS_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (colon_ok && c == ':') || (p != s && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

/* Same type, label names and bounds: registering it again returns the existing family. */
static bool same_layout(const struct metrics_family *a, const struct metrics_family *b)
{
    if (a->type != b->type || a->n_labels != b->n_labels || a->n_bounds != b->n_bounds)
        return false;
    for (size_t i = 0; i < a->n_labels; i++)
        if (strcmp(a->label_names[i], b->label_names[i]) != 0)
            return false;
    for (size_t i = 0; i < a->n_bounds; i++)
        if (a->bounds[i] != b->bounds[i])
            return false;
    return true;
}

static int family_new(struct metrics_registry *r, enum metrics__type type, const char *name,
                      const char *help, size_t n_labels, const char *const *label_names,
                      const double *bounds, size_t n_bounds, struct metrics_family **out)
{
    if (r == NULL || !name_valid(name, true) || n_labels > METRICS_LABELS_MAX ||
        (n_labels > 0 && label_names == NULL))
        return METRICS_EINVALID;
    for (size_t i = 0; i < n_labels; i++) {
        if (!name_valid(label_names[i], false) || strncmp(label_names[i], "__", 2) == 0 ||
            (type == METRICS__HISTOGRAM && strcmp(label_names[i], "le") == 0))
            return METRICS_EINVALID;
    }
    if (type == METRICS__HISTOGRAM) {
        if (n_bounds == 0 || n_bounds > METRICS_BUCKETS_MAX || bounds == NULL)
            return METRICS_EINVALID;
        for (size_t i = 0; i < n_bounds; i++) {
            if (bounds[i] != bounds[i] || bounds[i] > 1e300 || bounds[i] < -1e300 ||
                (i > 0 && bounds[i] <= bounds[i - 1]))
                return METRICS_EINVALID;
        }
    }
    struct metrics_family *f = calloc(1, sizeof(*f));
    if (f == NULL)
        goto err;
    f->help = strdup(help != NULL ? help : "");
    if (f->help == NULL)
        goto err_after_alloc;
    f->type = type;
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->n_labels = n_labels;
    for (size_t i = 0; i < n_labels; i++)
        snprintf(f->label_names[i], sizeof(f->label_names[i]), "%s", label_names[i]);
    f->n_bounds = n_bounds;
    for (size_t i = 0; i < n_bounds; i++)
        f->bounds[i] = bounds[i];
    f->registry = r;

    int rc = METRICS_OK;
    struct metrics_family *existing = NULL;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_families && existing == NULL; i++)
        if (strcmp(r->families[i]->name, name) == 0)
            existing = r->families[i];
    if (existing != NULL)
        rc = same_layout(existing, f) ? METRICS_OK : METRICS_EEXISTS;
    else if (r->n_families == METRICS_FAMILIES_MAX)
        rc = METRICS_EFULL;
    else
        r->families[r->n_families++] = f;
    pthread_mutex_unlock(&r->mu);
    if (existing != NULL || rc != METRICS_OK) {
        family_free(f);
        if (rc == METRICS_OK)
            *out = existing;
        return rc;
    }
    *out = f;
    return METRICS_OK;

err_after_alloc:
    free(f);
err:
    return METRICS_ENOMEM;
}

int metrics_counter_family_new(struct metrics_registry *r, const char *name, const char *help,
                               size_t n_labels, const char *const *label_names,
                               struct metrics_family **out)
{
    return family_new(r, METRICS__COUNTER, name, help, n_labels, label_names, NULL, 0, out);
}

int metrics_gauge_family_new(struct metrics_registry *r, const char *name, const char *help,
                             size_t n_labels, const char *const *label_names,
                             struct metrics_family **out)
{
    return family_new(r, METRICS__GAUGE, name, help, n_labels, label_names, NULL, 0, out);
}

int metrics_histogram_family_new(struct metrics_registry *r, const char *name, const char *help,
                                 size_t n_labels, const char *const *label_names,
                                 const double *bounds, size_t n_bounds, struct metrics_family **out)
{
    return family_new(r, METRICS__HISTOGRAM, name, help, n_labels, label_names, bounds, n_bounds,
                      out);
}

static bool labels_equal(const struct metrics__series *s, size_t n, const char *const *values)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s->labels[i], values[i]) != 0)
            return false;
    return true;
}

/* Finds or creates the series with these label values (under the registry mutex). */
static struct metrics__series *series_get(struct metrics_family *f, enum metrics__type type,
                                          const char *const *values)
{
    if (f == NULL || f->type != type || (f->n_labels > 0 && values == NULL))
        return NULL;
    for (size_t i = 0; i < f->n_labels; i++)
        if (values[i] == NULL || strlen(values[i]) >= METRICS_LABEL_VALUE_MAX)
            return NULL;
    struct metrics__series *s = NULL;
    pthread_mutex_lock(&f->registry->mu);
    for (size_t i = 0; i < f->n_series; i++) {
        if (labels_equal(f->series[i], f->n_labels, values)) {
            s = f->series[i];
            goto out;
        }
    }
    if (f->n_series == METRICS_SERIES_MAX)
        goto out;
    if (f->n_series == f->cap_series) {
        size_t cap = f->cap_series ? f->cap_series * 2 : 8;
        struct metrics__series **grown = realloc(f->series, cap * sizeof(*grown));
        if (grown == NULL)
            goto out;
        f->series = grown;
        f->cap_series = cap;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        goto out;
    for (size_t i = 0; i < f->n_labels; i++)
        snprintf(s->labels[i], sizeof(s->labels[i]), "%s", values[i]);
    if (type == METRICS__HISTOGRAM)
        s->u.histogram.family = f;
    f->series[f->n_series++] = s;
out:
    pthread_mutex_unlock(&f->registry->mu);
    return s;
}

struct metrics_counter *metrics_counter_get(struct metrics_family *f, const char *const *values)
{
    struct metrics__series *s = series_get(f, METRICS__COUNTER, values);
    return s ? &s->u.counter : NULL;
}

struct metrics_gauge *metrics_gauge_get(struct metrics_family *f, const char *const *values)
{
    struct metrics__series *s = series_get(f, METRICS__GAUGE, values);
    return s ? &s->u.gauge : NULL;
}

struct metrics_histogram *metrics_histogram_get(struct metrics_family *f, const char *const *values)
{
    struct metrics__series *s = series_get(f, METRICS__HISTOGRAM, values);
    return s ? &s->u.histogram : NULL;
}

uint64_t metrics_counter_value(const struct metrics_counter *c)
{
    return c ? atomic_load_explicit(&((struct metrics_counter *)c)->value, memory_order_relaxed)
             : 0;
}

int64_t metrics_gauge_value(const struct metrics_gauge *g)
{
    return g ? atomic_load_explicit(&((struct metrics_gauge *)g)->value, memory_order_relaxed) : 0;
}

static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

double metrics__bits_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

void metrics_histogram_observe(struct metrics_histogram *h, double v)
{
    if (h == NULL)
        return;
    const struct metrics_family *f = h->family;
    size_t b = 0;
    while (b < f->n_bounds && v > f->bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->counts[b], 1, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&h->sum_bits, memory_order_relaxed);
    /* Bounded in practice: each failed exchange means another observer made progress. */
    while (!atomic_compare_exchange_weak_explicit(&h->sum_bits, &old,
                                                  double_bits(metrics__bits_double(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
}

uint64_t metrics_histogram_count(const struct metrics_histogram *h)
{
    if (h == NULL)
        return 0;
    struct metrics_histogram *m = (struct metrics_histogram *)h;
    uint64_t n = 0;
    for (size_t b = 0; b <= h->family->n_bounds; b++)
        n += atomic_load_explicit(&m->counts[b], memory_order_relaxed);
    return n;
}

double metrics_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
