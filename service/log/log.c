/* log.c - one log line per event on stderr (logfmt or JSON), timestamped, filtered by level. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static _Atomic int min_level = SLOG_INFO;
static _Atomic int line_format = SLOG_FORMAT_TEXT;

int slog_format_parse(const char *name, enum slog_format *out)
{
    if (strcmp(name, "text") == 0 || strcmp(name, "json") == 0) {
        *out = name[0] == 't' ? SLOG_FORMAT_TEXT : SLOG_FORMAT_JSON;
        return 0;
    }
    return -1;
}

void slog_set_format(enum slog_format format)
{
    atomic_store_explicit(&line_format, (int)format, memory_order_relaxed);
}

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

/* Appends s[0..n) JSON-escaped to out (used bytes of cap). -1 (used unchanged) when it does not
 * fit. */
static int json_put(char *out, size_t cap, size_t *used, const char *s, size_t n)
{
    size_t at = *used;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        size_t k = 1;
        esc[0] = (char)c;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            k = 2;
        } else if (c < 0x20) {
            k = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", c);
        }
        if (at + k >= cap)
            return -1;
        memcpy(out + at, esc, k);
        at += k;
    }
    *used = at;
    return 0;
}

static int json_raw(char *out, size_t cap, size_t *used, const char *s)
{
    size_t n = strlen(s);
    if (*used + n >= cap)
        return -1;
    memcpy(out + *used, s, n);
    *used += n;
    return 0;
}

/* One "key":"value" pair per logfmt field of body (key=value or key="quoted \" value"), appended
 * after a comma. -1 when body is not such a list or the pairs do not fit. */
static int json_fields(char *out, size_t cap, size_t *used, const char *body)
{
    const char *p = body;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *key = p;
        while (*p && *p != '=' && *p != ' ' && *p != '"')
            p++;
        if (*p != '=' || p == key)
            return -1;
        size_t key_len = (size_t)(p - key);
        p++;
        char value[SLOG_LINE_MAX];
        size_t value_len = 0;
        if (*p == '"') { /* quoted: ends at a '"' followed by a space or the end */
            p++;
            while (*p && !(*p == '"' && (p[1] == ' ' || p[1] == '\0'))) {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                    p++;
                value[value_len++] = *p++;
            }
            if (*p != '"')
                return -1;
            p++;
        } else {
            while (*p && *p != ' ')
                value[value_len++] = *p++;
        }
        if (json_raw(out, cap, used, ",\"") != 0 || json_put(out, cap, used, key, key_len) != 0 ||
            json_raw(out, cap, used, "\":\"") != 0 ||
            json_put(out, cap, used, value, value_len) != 0 || json_raw(out, cap, used, "\"") != 0)
            return -1;
    }
    return 0;
}

/* {"ts":"...","level":"...","component":"...", then body's fields, or "msg" with body as it is
 * (cut to fit, with "cut":true) when body is not logfmt or too long. Returns the bytes in line. */
static size_t json_line(char *line, size_t cap, const char *ts, const char *level,
                        const char *component, const char *body)
{
    size_t used = 0;
    json_raw(line, cap, &used, "{\"ts\":\"");
    json_raw(line, cap, &used, ts);
    json_raw(line, cap, &used, "\",\"level\":\"");
    json_put(line, cap, &used, level, strlen(level));
    json_raw(line, cap, &used, "\",\"component\":\"");
    json_put(line, cap, &used, component, strlen(component));
    json_raw(line, cap, &used, "\"");
    size_t head = used;
    if (json_fields(line, cap - 2, &used, body) == 0) {
        line[used++] = '}';
        return used;
    }
    used = head;
    const char tail[] = "\",\"cut\":true}";
    json_raw(line, cap, &used, ",\"msg\":\"");
    size_t n = strlen(body), room = cap - sizeof(tail) - 1;
    bool cut = false;
    for (size_t i = 0; i < n; i++) {
        if (json_put(line, room, &used, body + i, 1) != 0) {
            cut = true;
            break;
        }
    }
    json_raw(line, cap, &used, cut ? tail : "\"}");
    return used;
}

void slog(const char *level, const char *component, const char *fmt, ...)
{
    if (!slog_enabled(level)) {
        return;
    }
    char line[SLOG_LINE_MAX], ts_text[64], body[SLOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(ts_text, sizeof(ts_text), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    if (atomic_load_explicit(&line_format, memory_order_relaxed) == SLOG_FORMAT_JSON) {
        int m = vsnprintf(body, sizeof(body), fmt, ap);
        va_end(ap);
        if (m < 0)
            body[0] = '\0';
        size_t used = json_line(line, sizeof(line) - 1, ts_text, level, component, body);
        line[used++] = '\n';
        ssize_t w = write(STDERR_FILENO, line, used);
        (void)w; /* nowhere to report a failed log write */
        return;
    }
    int n = snprintf(line, sizeof(line), "ts=%s level=%s component=%s ", ts_text, level, component);
    size_t used = n > 0 && (size_t)n < sizeof(line) ? (size_t)n : 0;
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
