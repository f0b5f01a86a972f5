/* log.h - slotd's log lines on stderr: an RFC 3339 UTC timestamp, a level, a component, logfmt
 * fields (or the same as one JSON object). */
#ifndef SLOTD_LOG_H
#define SLOTD_LOG_H

#include <stdbool.h>

enum slog_level { SLOG_DEBUG = 0, SLOG_INFO = 1, SLOG_WARN = 2, SLOG_ERROR = 3 };

/* The level named "debug", "info", "warn" or "error" into *out. Returns 0, -1 for any other
 * name (*out untouched). */
int slog_level_parse(const char *name, enum slog_level *out);

/* Lines below level are dropped from now on (default SLOG_INFO). Any thread. */
void slog_set_level(enum slog_level level);

enum slog_format { SLOG_FORMAT_TEXT = 0, SLOG_FORMAT_JSON = 1 };

/* The format named "text" or "json" into *out. Returns 0, -1 for any other name (*out
 * untouched). */
int slog_format_parse(const char *name, enum slog_format *out);

/* Lines are written in format from now on (default SLOG_FORMAT_TEXT). SLOG_FORMAT_JSON writes
 * {"ts":"2026-12-04T21:35:34.883Z","level":"info","component":"runtime","msg":"...","key":"value"}
 * with every logfmt field as a string; a line whose fields are not logfmt has them all in "msg",
 * and one that does not fit SLOG_LINE_MAX is cut there with "cut":true. Any thread. */
void slog_set_format(enum slog_format format);

/* Whether a line at level (a name as for slog_level_parse; another name counts as error) would
 * be written now. Any thread. */
bool slog_enabled(const char *level);

/* Writes "ts=2026-12-04T21:35:34.883Z level=<level> component=<component> <fmt...>\n" to stderr
 * as one write (a line of up to SLOG_LINE_MAX bytes; a longer one is cut and ends in "..."), unless
 * slog_enabled(level) is false. level and component are borrowed for the call; fmt's fields are
 * logfmt (msg="..." key=value ...). Any thread. */
void slog(const char *level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define SLOG_LINE_MAX 4096

#endif /* SLOTD_LOG_H */
