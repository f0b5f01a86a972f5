/* metrics_internal.h - the registry's tables, shared by registry.c, render.c and http.c. */
#ifndef SLOTD_METRICS_INTERNAL_H
#define SLOTD_METRICS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "metrics.h"

enum metrics__type { METRICS__COUNTER, METRICS__GAUGE, METRICS__HISTOGRAM };

struct metrics__series {
    char labels[METRICS_LABELS_MAX][METRICS_LABEL_VALUE_MAX];
    union {
        struct metrics_counter counter;
        struct metrics_gauge gauge;
        struct metrics_histogram histogram;
    } u;
};

struct metrics_family {
    struct metrics_registry *registry;
    enum metrics__type type;
    char name[METRICS_NAME_MAX];
    char *help;
    size_t n_labels;
    char label_names[METRICS_LABELS_MAX][METRICS_NAME_MAX];
    size_t n_bounds;
    double bounds[METRICS_BUCKETS_MAX];
    struct metrics__series **series; /* guarded by registry->mu; entries never move */
    size_t n_series;                 /* invariant: <= METRICS_SERIES_MAX */
    size_t cap_series;
};

#define METRICS_DATA_DIR_MAX 1024

struct metrics_registry {
    pthread_mutex_t mu; /* guards families[] and every family's series table */
    struct metrics_family *families[METRICS_FAMILIES_MAX];
    size_t n_families;
    bool process;        /* guarded by mu: render appends process.c's scrape-time samples */
    char data_dir[METRICS_DATA_DIR_MAX]; /* guarded by mu: statvfs target of slotd_data_dir_* and
                                         * the directory of slotd_store_bytes; "" = none */
};

double metrics__bits_double(uint64_t u);
/* Shortest decimal that reads back as d (render.c). */
void metrics__format_double(double d, char *out, size_t n);
/* process.c's samples, appended to a scrape; called with r->mu held. */
void metrics__process_render(FILE *f, const struct metrics_registry *r);

#endif /* SLOTD_METRICS_INTERNAL_H */
