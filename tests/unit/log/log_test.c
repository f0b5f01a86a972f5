/* log_test.c - CUnit tests of service/log: the text and JSON line formats, level filtering, cut
 * long lines. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/log/log.h"

/* Runs fn with stderr redirected to a temporary file; its text into out (NUL-terminated). */
static void capture(void (*fn)(void), char *out, size_t len)
{
    FILE *tmp = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
    int saved = dup(STDERR_FILENO);
    CU_ASSERT_FATAL(saved >= 0 && dup2(fileno(tmp), STDERR_FILENO) >= 0);
    fn();
    CU_ASSERT_FATAL(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, len - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

static void emit_levels(void)
{
    slog("debug", "test", "msg=\"hidden at info\"");
    slog("info", "test", "msg=\"one\" n=%d", 1);
    slog("warn", "test", "msg=\"two\"");
    slog("bogus", "test", "msg=\"an unknown level counts as error\"");
}

static void test_format_and_levels(void)
{
    char text[4096];
    slog_set_level(SLOG_INFO);
    capture(emit_levels, text, sizeof(text));
    CU_ASSERT(strstr(text, "hidden") == NULL);
    /* ts=YYYY-MM-DDTHH:MM:SS.mmmZ level=info component=test msg="one" n=1 */
    char *line = strstr(text, "level=info");
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    CU_ASSERT(strncmp(text, "ts=", 3) == 0);
    CU_ASSERT(text[7] == '-' && text[10] == '-' && text[13] == 'T' && text[16] == ':' &&
              text[22] == '.' && text[26] == 'Z' && text[27] == ' ');
    CU_ASSERT(strstr(text, " level=info component=test msg=\"one\" n=1\n") != NULL);
    CU_ASSERT(strstr(text, " level=warn component=test msg=\"two\"\n") != NULL);
    CU_ASSERT(strstr(text, "counts as error") != NULL);
    slog_set_level(SLOG_WARN);
    capture(emit_levels, text, sizeof(text));
    CU_ASSERT(strstr(text, "msg=\"one\"") == NULL);
    CU_ASSERT(strstr(text, "msg=\"two\"") != NULL);
    slog_set_level(SLOG_DEBUG);
    capture(emit_levels, text, sizeof(text));
    CU_ASSERT(strstr(text, "hidden at info") != NULL);
    slog_set_level(SLOG_INFO);
}

static void emit_long(void)
{
    static char big[3 * SLOG_LINE_MAX];
    memset(big, 'x', sizeof(big) - 1);
    slog("info", "test", "msg=\"%s\"", big);
}

static void test_long_line_is_cut(void)
{
    char text[2 * SLOG_LINE_MAX];
    capture(emit_long, text, sizeof(text));
    size_t n = strlen(text);
    CU_ASSERT(n <= SLOG_LINE_MAX);
    CU_ASSERT(n > 4 && strcmp(text + n - 4, "...\n") == 0);
    CU_ASSERT(strchr(text, '\n') == text + n - 1); /* one line */
}

static void emit_json(void)
{
    slog("info", "test", "msg=\"a \\\"quoted\\\" word\" n=%d path=/a/b", 7);
    slog("warn", "te\"st", "not logfmt at all");
    slog("error", "test", "msg=\"tab\there\"");
}

/* --log-format json: one object a line, ts (RFC 3339 UTC) first, every logfmt field a string,
 * escapes; a body that is not logfmt goes whole into msg; a long one is cut inside the JSON. */
static void test_json_format(void)
{
    char text[4096];
    enum slog_format f = SLOG_FORMAT_TEXT;
    CU_ASSERT(slog_format_parse("json", &f) == 0 && f == SLOG_FORMAT_JSON);
    CU_ASSERT(slog_format_parse("yaml", &f) == -1 && f == SLOG_FORMAT_JSON);
    slog_set_format(SLOG_FORMAT_JSON);
    capture(emit_json, text, sizeof(text));
    CU_ASSERT(strncmp(text, "{\"ts\":\"", 7) == 0);
    CU_ASSERT(text[11] == '-' && text[17] == 'T' && text[30] == 'Z' && text[31] == '"');
    CU_ASSERT(strstr(text, "\",\"level\":\"info\",\"component\":\"test\",\"msg\":\"a "
                           "\\\"quoted\\\" word\",\"n\":\"7\",\"path\":\"/a/b\"}\n") != NULL);
    CU_ASSERT(strstr(text, "\"level\":\"warn\",\"component\":\"te\\\"st\",\"msg\":\"not "
                           "logfmt at all\"}\n") != NULL);
    CU_ASSERT(strstr(text, "\"msg\":\"tab\\u0009here\"}\n") != NULL);
    capture(emit_long, text, sizeof(text));
    size_t n = strlen(text);
    CU_ASSERT(n <= SLOG_LINE_MAX);
    CU_ASSERT(n > 14 && strcmp(text + n - 14, "\",\"cut\":true}\n") == 0);
    CU_ASSERT(strchr(text, '\n') == text + n - 1);
    slog_set_format(SLOG_FORMAT_TEXT);
}

static void test_level_names(void)
{
    enum slog_level l = SLOG_ERROR;
    CU_ASSERT(slog_level_parse("debug", &l) == 0 && l == SLOG_DEBUG);
    CU_ASSERT(slog_level_parse("warn", &l) == 0 && l == SLOG_WARN);
    CU_ASSERT(slog_level_parse("WARN", &l) == -1 && l == SLOG_WARN);
    CU_ASSERT(slog_level_parse("", &l) == -1);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("log", NULL, NULL);
    CU_add_test(s, "format and levels", test_format_and_levels);
    CU_add_test(s, "a long line is cut", test_long_line_is_cut);
    CU_add_test(s, "level names", test_level_names);
    CU_add_test(s, "json format", test_json_format);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
