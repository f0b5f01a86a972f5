/* test_metrics.c - CUnit tests of the metrics registry, its text exposition and the /metrics
 * HTTP endpoint. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "service/metrics/metrics.h"

static char *render(struct metrics_registry *r)
{
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_FATAL(metrics_registry_render(r, &text, &len) == METRICS_OK);
    CU_ASSERT(strlen(text) == len);
    return text;
}

/* True when text holds line as a whole line. */
static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

static void test_counter_and_gauge(void)
{
    struct metrics_registry *r;
    CU_ASSERT_FATAL(metrics_registry_new(&r) == METRICS_OK);
    struct metrics_family *req, *depth, *plain;
    const char *labels[] = {"method", "code"};
    CU_ASSERT_FATAL(metrics_counter_family_new(r, "t_requests_total", "Requests handled.", 2,
                                               labels, &req) == METRICS_OK);
    const char *ql[] = {"queue"};
    CU_ASSERT_FATAL(metrics_gauge_family_new(r, "t_queue_depth", "Queued.", 1, ql, &depth) ==
                    METRICS_OK);
    CU_ASSERT_FATAL(metrics_gauge_family_new(r, "t_revision", "Revision.", 0, NULL, &plain) ==
                    METRICS_OK);

    const char *v1[] = {"Put", "OK"}, *v2[] = {"Get", "NOT_FOUND"};
    struct metrics_counter *c1 = metrics_counter_get(req, v1);
    struct metrics_counter *c2 = metrics_counter_get(req, v2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c1);
    CU_ASSERT(metrics_counter_get(req, v1) == c1); /* same labels, same series */
    CU_ASSERT(c1 != c2);
    metrics_counter_add(c1, 3);
    metrics_counter_add(c1, 1);
    metrics_counter_add(NULL, 1); /* no-op */
    CU_ASSERT(metrics_counter_value(c1) == 4);
    CU_ASSERT(metrics_counter_value(c2) == 0);

    const char *cl[] = {"client"};
    struct metrics_gauge *g = metrics_gauge_get(depth, cl);
    metrics_gauge_set(g, 10);
    metrics_gauge_add(g, -13);
    CU_ASSERT(metrics_gauge_value(g) == -3);
    metrics_gauge_set(metrics_gauge_get(plain, NULL), 42);
    /* wrong type: NULL */
    CU_ASSERT_PTR_NULL(metrics_gauge_get(req, v1));
    CU_ASSERT_PTR_NULL(metrics_histogram_get(depth, cl));

    char *text = render(r);
    const char *want = "# HELP t_requests_total Requests handled.\n"
                       "# TYPE t_requests_total counter\n"
                       "t_requests_total{method=\"Put\",code=\"OK\"} 4\n"
                       "t_requests_total{method=\"Get\",code=\"NOT_FOUND\"} 0\n"
                       "# HELP t_queue_depth Queued.\n"
                       "# TYPE t_queue_depth gauge\n"
                       "t_queue_depth{queue=\"client\"} -3\n"
                       "# HELP t_revision Revision.\n"
                       "# TYPE t_revision gauge\n"
                       "t_revision 42\n";
    CU_ASSERT_STRING_EQUAL(text, want);
    free(text);
    metrics_registry_free(r);
}

static void test_escaping(void)
{
    struct metrics_registry *r;
    CU_ASSERT_FATAL(metrics_registry_new(&r) == METRICS_OK);
    struct metrics_family *f;
    const char *labels[] = {"path"};
    CU_ASSERT_FATAL(metrics_counter_family_new(r, "t_esc_total", "Help with \\ and\nnewline.", 1,
                                               labels, &f) == METRICS_OK);
    const char *v[] = {"a\"b\\c\nd"};
    metrics_counter_add(metrics_counter_get(f, v), 1);
    char *text = render(r);
    CU_ASSERT(has_line(text, "# HELP t_esc_total Help with \\\\ and\\nnewline."));
    CU_ASSERT(has_line(text, "t_esc_total{path=\"a\\\"b\\\\c\\nd\"} 1"));
    free(text);
    metrics_registry_free(r);
}

static void test_histogram(void)
{
    struct metrics_registry *r;
    CU_ASSERT_FATAL(metrics_registry_new(&r) == METRICS_OK);
    struct metrics_family *f;
    const char *labels[] = {"method"};
    const double bounds[] = {0.005, 0.1, 1};
    CU_ASSERT_FATAL(metrics_histogram_family_new(r, "t_latency_seconds", "Latency.", 1, labels,
                                                 bounds, 3, &f) == METRICS_OK);
    const char *v[] = {"Put"};
    struct metrics_histogram *h = metrics_histogram_get(f, v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    metrics_histogram_observe(h, 0.001); /* bucket 0.005 */
    metrics_histogram_observe(h, 0.005); /* le is inclusive: bucket 0.005 */
    metrics_histogram_observe(h, 0.05);  /* bucket 0.1 */
    metrics_histogram_observe(h, 7);     /* +Inf only */
    metrics_histogram_observe(NULL, 1);  /* no-op */
    CU_ASSERT(metrics_histogram_count(h) == 4);
    char *text = render(r);
    const char *want = "# HELP t_latency_seconds Latency.\n"
                       "# TYPE t_latency_seconds histogram\n"
                       "t_latency_seconds_bucket{method=\"Put\",le=\"0.005\"} 2\n"
                       "t_latency_seconds_bucket{method=\"Put\",le=\"0.1\"} 3\n"
                       "t_latency_seconds_bucket{method=\"Put\",le=\"1\"} 3\n"
                       "t_latency_seconds_bucket{method=\"Put\",le=\"+Inf\"} 4\n"
                       "t_latency_seconds_sum{method=\"Put\"} 7.056\n"
                       "t_latency_seconds_count{method=\"Put\"} 4\n";
    CU_ASSERT_STRING_EQUAL(text, want);
    free(text);

    /* no labels: le is the only label */
    struct metrics_family *b;
    CU_ASSERT_FATAL(metrics_histogram_family_new(r, "t_batch_entries", "Batch.", 0, NULL,
                                                 metrics_size_bounds, metrics_size_bounds_len,
                                                 &b) == METRICS_OK);
    struct metrics_histogram *hb = metrics_histogram_get(b, NULL);
    for (int i = 0; i < 10; i++)
        metrics_histogram_observe(hb, 3);
    text = render(r);
    CU_ASSERT(has_line(text, "t_batch_entries_bucket{le=\"2\"} 0"));
    CU_ASSERT(has_line(text, "t_batch_entries_bucket{le=\"4\"} 10"));
    CU_ASSERT(has_line(text, "t_batch_entries_bucket{le=\"4096\"} 10"));
    CU_ASSERT(has_line(text, "t_batch_entries_bucket{le=\"+Inf\"} 10"));
    CU_ASSERT(has_line(text, "t_batch_entries_sum 30"));
    CU_ASSERT(has_line(text, "t_batch_entries_count 10"));
    free(text);
    metrics_registry_free(r);
}

static void test_invalid(void)
{
    struct metrics_registry *r;
    CU_ASSERT_FATAL(metrics_registry_new(&r) == METRICS_OK);
    struct metrics_family *f = NULL;
    const char *bad_label[] = {"bad-label"};
    const char *le[] = {"le"};
    const char *reserved[] = {"__x"};
    const double up[] = {1, 2}, down[] = {2, 1};
    const char *l0[] = {"k"};
    CU_ASSERT(metrics_counter_family_new(r, "9starts_with_digit", "", 0, NULL, &f) ==
              METRICS_EINVALID);
    CU_ASSERT(metrics_counter_family_new(r, "has space", "", 0, NULL, &f) == METRICS_EINVALID);
    CU_ASSERT(metrics_counter_family_new(r, "ok_total", "", 1, bad_label, &f) == METRICS_EINVALID);
    CU_ASSERT(metrics_counter_family_new(r, "ok_total", "", 1, reserved, &f) == METRICS_EINVALID);
    CU_ASSERT(metrics_histogram_family_new(r, "h", "", 1, le, up, 2, &f) == METRICS_EINVALID);
    CU_ASSERT(metrics_histogram_family_new(r, "h", "", 0, NULL, down, 2, &f) == METRICS_EINVALID);
    CU_ASSERT(metrics_histogram_family_new(r, "h", "", 0, NULL, up, 0, &f) == METRICS_EINVALID);
    CU_ASSERT(metrics_counter_family_new(r, "ok_total", "", 0, NULL, &f) == METRICS_OK);
    struct metrics_family *again = NULL;
    CU_ASSERT(metrics_counter_family_new(r, "ok_total", "other help", 0, NULL, &again) ==
              METRICS_OK);
    CU_ASSERT(again == f); /* same layout: the same family */
    CU_ASSERT(metrics_gauge_family_new(r, "ok_total", "", 0, NULL, &f) == METRICS_EEXISTS);
    CU_ASSERT(metrics_counter_family_new(r, "ok_total", "", 1, l0, &f) == METRICS_EEXISTS);
    CU_ASSERT_STRING_EQUAL(metrics_strerror(METRICS_EEXISTS),
                           "a family with this name already exists");

    /* label value bound */
    const char *l[] = {"k"};
    struct metrics_family *lf;
    CU_ASSERT_FATAL(metrics_counter_family_new(r, "long_total", "", 1, l, &lf) == METRICS_OK);
    char big[METRICS_LABEL_VALUE_MAX + 1];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    const char *bv[] = {big};
    CU_ASSERT_PTR_NULL(metrics_counter_get(lf, bv));

    /* series bound per family */
    struct metrics_family *many;
    CU_ASSERT_FATAL(metrics_counter_family_new(r, "many_total", "", 1, l, &many) == METRICS_OK);
    char v[16];
    const char *vv[] = {v};
    size_t created = 0;
    for (int i = 0; i < METRICS_SERIES_MAX + 5; i++) {
        snprintf(v, sizeof(v), "%d", i);
        created += metrics_counter_get(many, vv) != NULL;
    }
    CU_ASSERT(created == METRICS_SERIES_MAX);
    snprintf(v, sizeof(v), "%d", 7);
    CU_ASSERT_PTR_NOT_NULL(metrics_counter_get(many, vv)); /* existing ones still found */

    /* family bound */
    int rc = METRICS_OK;
    for (int i = 0; i < METRICS_FAMILIES_MAX + 1 && rc == METRICS_OK; i++) {
        char name[32];
        snprintf(name, sizeof(name), "fam_%d", i);
        rc = metrics_gauge_family_new(r, name, "", 0, NULL, &f);
    }
    CU_ASSERT(rc == METRICS_EFULL);
    metrics_registry_free(r);
}

struct hammer {
    struct metrics_counter *c;
    struct metrics_histogram *h;
};

static void *hammer_main(void *arg)
{
    struct hammer *hm = arg;
    for (int i = 0; i < 100000; i++) {
        metrics_counter_add(hm->c, 1);
        metrics_histogram_observe(hm->h, 0.5);
    }
    return NULL;
}

static void test_concurrent_updates(void)
{
    struct metrics_registry *r;
    CU_ASSERT_FATAL(metrics_registry_new(&r) == METRICS_OK);
    struct metrics_family *cf, *hf;
    CU_ASSERT_FATAL(metrics_counter_family_new(r, "c_total", "", 0, NULL, &cf) == METRICS_OK);
    const double b[] = {1};
    CU_ASSERT_FATAL(metrics_histogram_family_new(r, "h", "", 0, NULL, b, 1, &hf) == METRICS_OK);
    struct hammer hm = {metrics_counter_get(cf, NULL), metrics_histogram_get(hf, NULL)};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CU_ASSERT_FATAL(pthread_create(&t[i], NULL, hammer_main, &hm) == 0);
    for (int i = 0; i < 3; i++) { /* scrapes while updating */
        char *text = render(r);
        free(text);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT(metrics_counter_value(hm.c) == 400000);
    CU_ASSERT(metrics_histogram_count(hm.h) == 400000);
    char *text = render(r);
    CU_ASSERT(has_line(text, "h_sum 200000"));
    CU_ASSERT(has_line(text, "h_bucket{le=\"1\"} 400000"));
    free(text);
    metrics_registry_free(r);
}

/* One HTTP/1.0 request to 127.0.0.1:port; the whole response in buf. */
static size_t http_get(int port, const char *method, const char *path, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CU_ASSERT_FATAL(fd >= 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: x\r\n\r\n", method, path);
    CU_ASSERT_FATAL(write(fd, req, (size_t)n) == n);
    size_t len = 0;
    for (int i = 0; i < 1000 && len + 1 < cap; i++) {
        ssize_t k = read(fd, buf + len, cap - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    buf[len] = '\0';
    close(fd);
    return len;
}

static void test_http(void)
{
    struct metrics_registry *r;
    CU_ASSERT_FATAL(metrics_registry_new(&r) == METRICS_OK);
    struct metrics_family *f;
    CU_ASSERT_FATAL(metrics_counter_family_new(r, "served_total", "Served.", 0, NULL, &f) ==
                    METRICS_OK);
    metrics_counter_add(metrics_counter_get(f, NULL), 5);
    struct metrics_http *h = NULL;
    int port = 0;
    char err[256];
    CU_ASSERT_FATAL(metrics_http_start(r, "127.0.0.1:0", &h, &port, err, sizeof(err)) ==
                    METRICS_OK);
    CU_ASSERT(port > 0);
    static char buf[65536];
    http_get(port, "GET", "/metrics", buf, sizeof(buf));
    CU_ASSERT(strncmp(buf, "HTTP/1.0 200", 12) == 0 || strncmp(buf, "HTTP/1.1 200", 12) == 0);
    CU_ASSERT(strstr(buf, "text/plain; version=0.0.4") != NULL);
    CU_ASSERT(strstr(buf, "\r\n\r\n# HELP served_total Served.\n") != NULL);
    CU_ASSERT(strstr(buf, "\nserved_total 5\n") != NULL);
    http_get(port, "GET", "/other", buf, sizeof(buf));
    CU_ASSERT(strstr(buf, " 404 ") != NULL);
    http_get(port, "DELETE", "/metrics", buf, sizeof(buf));
    CU_ASSERT(strstr(buf, " 405 ") != NULL);

    /* the same port again: a clear listen error */
    struct metrics_http *h2 = NULL;
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    CU_ASSERT(metrics_http_start(r, addr, &h2, NULL, err, sizeof(err)) == METRICS_ELISTEN);
    CU_ASSERT(strstr(err, "Address already in use") != NULL);
    CU_ASSERT(metrics_http_start(r, "no-port", &h2, NULL, err, sizeof(err)) == METRICS_EINVALID);
    CU_ASSERT(metrics_http_start(r, "127.0.0.1:x1", &h2, NULL, err, sizeof(err)) ==
              METRICS_EINVALID);
    metrics_http_stop(h);
    /* stopped: the port is free again */
    CU_ASSERT(metrics_http_start(r, addr, &h2, NULL, err, sizeof(err)) == METRICS_OK);
    metrics_http_stop(h2);
    metrics_registry_free(r);
}

/* The value of the unlabelled sample name in text, or -1 when there is none. */
static double sample_value(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static void test_build_and_process(void)
{
    struct metrics_registry *r = NULL;
    CU_ASSERT_FATAL(metrics_registry_new(&r) == METRICS_OK);
    char *text = render(r);
    CU_ASSERT(strstr(text, "process_") == NULL); /* not enabled: nothing */
    free(text);
    char long_value[METRICS_LABEL_VALUE_MAX + 1];
    memset(long_value, 'v', sizeof(long_value) - 1);
    long_value[sizeof(long_value) - 1] = '\0';
    CU_ASSERT(metrics_build_info_register(r, long_value, "c") == METRICS_EINVALID);
    CU_ASSERT(metrics_build_info_register(r, "v1.2-3-gabc", "abc\"def") == METRICS_OK);
    char long_dir[2048];
    memset(long_dir, 'd', sizeof(long_dir) - 1);
    long_dir[sizeof(long_dir) - 1] = '\0';
    CU_ASSERT(metrics_process_enable(r, long_dir) == METRICS_EINVALID);
    CU_ASSERT_FATAL(metrics_process_enable(r, "/") == METRICS_OK);
    CU_ASSERT(strcmp(metrics_build_commit, "") != 0);

    text = render(r);
    CU_ASSERT(has_line(text, "# TYPE slotd_build_info gauge"));
    CU_ASSERT(has_line(text, "slotd_build_info{version=\"v1.2-3-gabc\",commit=\"abc\\\"def\"} 1"));
    CU_ASSERT(has_line(text, "# TYPE process_cpu_seconds_total counter"));
    CU_ASSERT(has_line(text, "# TYPE process_open_fds gauge"));
    CU_ASSERT(sample_value(text, "process_cpu_seconds_total") >= 0);
    CU_ASSERT(sample_value(text, "process_resident_memory_bytes") > 1024 * 1024);
    double start = sample_value(text, "process_start_time_seconds");
    struct timeval now;
    gettimeofday(&now, NULL);
    CU_ASSERT(start > (double)now.tv_sec - 600 && start <= (double)now.tv_sec + 1);
    double fds = sample_value(text, "process_open_fds");
    CU_ASSERT(fds >= 3);
    double avail = sample_value(text, "slotd_data_dir_available_bytes");
    double size = sample_value(text, "slotd_data_dir_size_bytes");
    CU_ASSERT(avail >= 0 && size > 0 && avail <= size);
    free(text);

    /* Read at scrape time: four more descriptors show in the next scrape, CPU time grows. */
    int p1[2], p2[2];
    CU_ASSERT_FATAL(pipe(p1) == 0 && pipe(p2) == 0);
    text = render(r);
    CU_ASSERT(sample_value(text, "process_open_fds") == fds + 4);
    double cpu0 = sample_value(text, "process_cpu_seconds_total");
    free(text);
    volatile unsigned long spin = 0;
    double t0 = metrics_now_seconds();
    while (metrics_now_seconds() - t0 < 0.1) /* bounded: 100 ms of CPU */
        spin++;
    text = render(r);
    CU_ASSERT(sample_value(text, "process_cpu_seconds_total") > cpu0);
    free(text);
    close(p1[0]), close(p1[1]), close(p2[0]), close(p2[1]);
    metrics_registry_free(r);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    CU_add_test(s, "counter and gauge exposition", test_counter_and_gauge);
    CU_add_test(s, "HELP and label escaping", test_escaping);
    CU_add_test(s, "histogram buckets are cumulative, +Inf = count", test_histogram);
    CU_add_test(s, "invalid names, bounds on families and series", test_invalid);
    CU_add_test(s, "concurrent updates and scrapes", test_concurrent_updates);
    CU_add_test(s, "HTTP /metrics, 404, 405, bind errors", test_http);
    CU_add_test(s, "slotd_build_info and process metrics read at scrape time",
                test_build_and_process);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
