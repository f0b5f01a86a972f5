/* render.c - the registry as Prometheus text exposition format 0.0.4. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

/* Shortest decimal that reads back as d; "+Inf", "-Inf", "NaN" as the format spells them. */
void metrics__format_double(double d, char *out, size_t n)
{
    if (isnan(d)) {
        snprintf(out, n, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(out, n, "%sInf", d > 0 ? "+" : "-");
        return;
    }
    if (d > -1e15 && d < 1e15 && d == (double)(int64_t)d) {
        snprintf(out, n, "%" PRId64, (int64_t)d); /* integral: no exponent */
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            return;
    }
}

/* HELP text: backslash and newline escaped. */
static void put_help(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

/* Label values: backslash, double quote and newline escaped. */
static void put_label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '"')
            fputs("\\\"", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

/* "{a="x",b="y"[,le="..."]}" or nothing when there are no labels. */
static void put_labels(FILE *f, const struct metrics_family *fam, const struct metrics__series *s,
                       const char *le)
{
    if (fam->n_labels == 0 && le == NULL)
        return;
    fputc('{', f);
    for (size_t i = 0; i < fam->n_labels; i++) {
        fprintf(f, "%s%s=\"", i ? "," : "", fam->label_names[i]);
        put_label_value(f, s->labels[i]);
        fputc('"', f);
    }
    if (le != NULL)
        fprintf(f, "%sle=\"%s\"", fam->n_labels ? "," : "", le);
    fputc('}', f);
}

static void render_histogram(FILE *f, const struct metrics_family *fam, struct metrics__series *s)
{
    struct metrics_histogram *h = &s->u.histogram;
    uint64_t cumulative = 0;
    char le[40];
    for (size_t b = 0; b <= fam->n_bounds; b++) {
        cumulative += atomic_load_explicit(&h->counts[b], memory_order_relaxed);
        if (b < fam->n_bounds)
            metrics__format_double(fam->bounds[b], le, sizeof(le));
        else
            snprintf(le, sizeof(le), "+Inf");
        fprintf(f, "%s_bucket", fam->name);
        put_labels(f, fam, s, le);
        fprintf(f, " %" PRIu64 "\n", cumulative);
    }
    char sum[40];
    metrics__format_double(
        metrics__bits_double(atomic_load_explicit(&h->sum_bits, memory_order_relaxed)), sum,
        sizeof(sum));
    fprintf(f, "%s_sum", fam->name);
    put_labels(f, fam, s, NULL);
    fprintf(f, " %s\n", sum);
    fprintf(f, "%s_count", fam->name);
    put_labels(f, fam, s, NULL);
    fprintf(f, " %" PRIu64 "\n", cumulative);
}

static void render_family(FILE *f, const struct metrics_family *fam)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    fprintf(f, "# HELP %s ", fam->name);
    put_help(f, fam->help);
    fprintf(f, "\n# TYPE %s %s\n", fam->name, type_names[fam->type]);
    for (size_t i = 0; i < fam->n_series; i++) {
        struct metrics__series *s = fam->series[i];
        switch (fam->type) {
        case METRICS__COUNTER:
            fputs(fam->name, f);
            put_labels(f, fam, s, NULL);
            fprintf(f, " %" PRIu64 "\n", metrics_counter_value(&s->u.counter));
            break;
        case METRICS__GAUGE:
            fputs(fam->name, f);
            put_labels(f, fam, s, NULL);
            fprintf(f, " %" PRId64 "\n", metrics_gauge_value(&s->u.gauge));
            break;
        case METRICS__HISTOGRAM:
            render_histogram(f, fam, s);
            break;
        }
    }
}

int metrics_registry_render(struct metrics_registry *r, char **out, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        goto err;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_families; i++)
        render_family(f, r->families[i]);
    if (r->process)
        metrics__process_render(f, r);
    pthread_mutex_unlock(&r->mu);
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed)
        goto err_after_stream;
    *out = buf;
    *len = n;
    return METRICS_OK;

err_after_stream:
    free(buf);
err:
    return METRICS_ENOMEM;
}
