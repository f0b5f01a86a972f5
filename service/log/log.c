/* log.c - one log line per event on stderr, timestamped, filtered by level. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static _Atomic int min_level = SLOG_INFO;

int slog_level_parse(const char *name, enum slog_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum slog_level)i;
            return 0;
        }
    }
    return -1;
}

void slog_set_level(enum slog_level level)
{
    atomic_store_explicit(&min_level, (int)level, memory_order_relaxed);
}

bool slog_enabled(const char *level)
{
    enum slog_level l = SLOG_ERROR;
    slog_level_parse(level, &l);
    return (int)l >= atomic_load_explicit(&min_level, memory_order_relaxed);
}

void slog(const char *level, const char *component, const char *fmt, ...)
{
    if (!slog_enabled(level)) {
        return;
    }
    char line[SLOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line),
                     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s component=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level, component);
    size_t used = n > 0 && (size_t)n < sizeof(line) ? (size_t)n : 0;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + used, sizeof(line) - used, fmt, ap);
    va_end(ap);
    if (m < 0) {
        m = 0;
    }
    used += (size_t)m;
    if (used >= sizeof(line) - 1) { /* cut: keep room for "...\n" */
        used = sizeof(line) - 5;
        memcpy(line + used, "...", 3);
        used += 3;
    }
    line[used++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, used);
    (void)w; /* nowhere to report a failed log write */
}
