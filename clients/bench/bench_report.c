/* bench_report.c - slotbench's text and JSON output of ops/s, latency percentiles, errors, CPU. */
#include "bench_report.h"

#include <grpc/status.h>

#include <stdbool.h>

static const double report_pcts[] = {50.0, 90.0, 99.0, 99.9};
static const char *const report_pct_names[] = {"p50", "p90", "p99", "p99.9"};
#define REPORT_PCTS (sizeof(report_pcts) / sizeof(report_pcts[0]))

static double report_rate(uint64_t n, double s)
{
    return s > 0.0 ? (double)n / s : 0.0;
}

static double report_cpu_pct(const struct bench_phase *p)
{
    return p->cpu_wall_s > 0.0 ? 100.0 * p->cpu_s / p->cpu_wall_s : 0.0;
}

/* Writes ns as "812 us" below a millisecond, "3.41 ms" above. */
static void report_latency(FILE *out, const char *name, uint64_t ns)
{
    if (ns < 1000000)
        fprintf(out, "  %s %.0f us", name, (double)ns / 1e3);
    else
        fprintf(out, "  %s %.2f ms", name, (double)ns / 1e6);
}

/* Writes each nonzero counts[i], i from..n-1, as "name count" (json: "\"name\":count"), the
 * first after lead and the others after sep. Returns first when it wrote none, else false. */
static bool report_counts(FILE *out, const uint64_t *counts, unsigned from, unsigned n,
                          const char *(*name)(unsigned), bool json, const char *lead,
                          const char *sep, bool first)
{
    for (unsigned i = from; i < n; i++) {
        if (!counts[i])
            continue;
        fprintf(out, json ? "%s\"%s\":%llu" : "%s%s %llu", first ? lead : sep, name(i),
                (unsigned long long)counts[i]);
        first = false;
    }
    return first;
}

static void report_text_errors(const struct bench_phase *p, FILE *out)
{
    fprintf(out, "errors:      %llu", (unsigned long long)p->errors);
    bool first = report_counts(out, p->status, 1, BENCH_STATUS_SLOTS, bench_status_name, false,
                               "  (", ", ", true);
    if (p->malformed) {
        fprintf(out, "%sMALFORMED_RESPONSE %llu", first ? "  (" : ", ",
                (unsigned long long)p->malformed);
        first = false;
    }
    fprintf(out, "%s\n", first ? "" : ")");
    if (!report_counts(out, p->error_detail, 0, BENCH_DETAIL_SLOTS, bench_wire_error_code_name,
                       false, "slotd codes: ", ", ", true))
        fprintf(out, "\n");
}

/* --watchers: what the streams received, and every stream that ended before the run did. */
static void report_text_watch(const struct bench_watch_result *w, FILE *out)
{
    fprintf(out,
            "watchers:    %u streams on '" BENCH_WIRE_WATCH_PREFIX "' (%u created): %llu events "
            "in %.2f s = %.0f events/s delivered\n",
            w->watchers, w->created, (unsigned long long)w->events, w->elapsed_s, w->events_per_s);
    fprintf(out,
            "             per watcher median %.0f events/s (min %.0f, max %.0f); %llu messages, "
            "%llu malformed, %llu events with warmup\n",
            w->per_watcher_median, w->per_watcher_min, w->per_watcher_max,
            (unsigned long long)w->messages, (unsigned long long)w->malformed,
            (unsigned long long)w->events_total);
    if (!w->ended_early) {
        fprintf(out, "watch ends:  none before the end of the run\n");
        return;
    }
    fprintf(out, "watch ends:  %u of %u streams ended early (", w->ended_early, w->watchers);
    bool first = report_counts(out, w->ended_by_status, 0, BENCH_STATUS_SLOTS, bench_status_name,
                               false, "", ", ", true);
    if (w->etcd_canceled)
        fprintf(out, "%setcd canceled %u", first ? "" : ", ", w->etcd_canceled);
    fprintf(out, ")\n             first at %.2f s %s: %s\n", w->first_end_s,
            w->first_end_s < 0 ? "(before the measured phase)" : "into the measured phase",
            w->first_end_error);
}

void bench_report_text(const struct bench_opts *o, const struct bench_result *r, FILE *out)
{
    const struct bench_phase *p = &r->run;
    fprintf(out, "slotbench: target %s, op %s%s", bench_target_name(o->target),
            bench_op_name(o->op), o->stream ? " (ProposeStream)" : "");
    if (o->op == BENCH_OP_MIXED)
        fprintf(out, " (%.0f%% %s)", o->read_ratio * 100.0, bench_op_name(o->read_op));
    fprintf(out, ", %u in flight, %u connection(s) x %u endpoint(s), %u thread(s)\n",
            o->concurrency, o->connections, o->endpoint_count, o->threads);
    fprintf(out, "             keys %llu x %u B, values %u B, deadline %u ms\n",
            (unsigned long long)o->keys, o->key_size, o->value_size, o->deadline_ms);
    if (o->populate)
        fprintf(out, "populate:    %llu of %llu keys in %.2f s (%.0f puts/s), %llu errors\n",
                (unsigned long long)r->populate_keys, (unsigned long long)o->keys,
                r->populate.elapsed_s, report_rate(r->populate.ok, r->populate.elapsed_s),
                (unsigned long long)r->populate.errors);
    fprintf(out, "throughput:  %.0f ops/s  (%llu ok in %.2f s: %llu reads, %llu writes)\n",
            report_rate(p->ok, p->elapsed_s), (unsigned long long)p->ok, p->elapsed_s,
            (unsigned long long)p->reads, (unsigned long long)p->writes);
    fprintf(out, "latency:   ");
    for (unsigned i = 0; i < REPORT_PCTS; i++)
        report_latency(out, report_pct_names[i],
                       bench_hist_percentile(&p->latency_ns, report_pcts[i]));
    report_latency(out, "max", p->latency_ns.max);
    report_latency(out, "mean", (uint64_t)bench_hist_mean(&p->latency_ns));
    fprintf(out, "\n");
    report_text_errors(p, out);
    if (o->route_aware) {
        uint64_t sent = p->direct + p->fallback;
        fprintf(out,
                "routing:     %llu direct to the leader (%.1f%%), %llu round robin (leader "
                "unknown); route fetched %llu time(s), %llu failed\n",
                (unsigned long long)p->direct,
                sent ? 100.0 * (double)p->direct / (double)sent : 0.0,
                (unsigned long long)p->fallback, (unsigned long long)r->route_fetches,
                (unsigned long long)r->route_fetch_failures);
        if (r->route_error[0])
            fprintf(out, "route error: %s\n", r->route_error);
    }
    if (o->stream)
        fprintf(out,
                "stream:      %llu ProposeStream call(s), %llu items in %llu messages (%.1f per "
                "message), %llu response messages (warmup included)\n",
                (unsigned long long)p->streams_opened, (unsigned long long)p->stream_items_sent,
                (unsigned long long)p->stream_messages_sent,
                p->stream_messages_sent
                    ? (double)p->stream_items_sent / (double)p->stream_messages_sent
                    : 0.0,
                (unsigned long long)p->stream_messages_received);
    if (o->watchers)
        report_text_watch(&r->watch, out);
    if (p->reads)
        fprintf(out, "not found:   %llu of %llu reads\n", (unsigned long long)p->not_found,
                (unsigned long long)p->reads);
    fprintf(out, "client cpu:  %.0f%% of one core (user+sys %.2f s over %.2f s wall)\n",
            report_cpu_pct(p), p->cpu_s, p->cpu_wall_s);
}

/* Writes s for a JSON string: '"', '\\' and control or non-ASCII bytes become '?'. */
static void report_json_text(const char *s, FILE *out)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        fputc(ch < ' ' || ch >= 0x7f || ch == '"' || ch == '\\' ? '?' : ch, out);
    }
}

static void report_json_phase(const struct bench_phase *p, FILE *out)
{
    fprintf(out,
            "{\"ok\":%llu,\"reads\":%llu,\"writes\":%llu,\"not_found\":%llu,"
            "\"elapsed_s\":%.6f,\"ops_per_s\":%.1f,\"latency_us\":{",
            (unsigned long long)p->ok, (unsigned long long)p->reads, (unsigned long long)p->writes,
            (unsigned long long)p->not_found, p->elapsed_s, report_rate(p->ok, p->elapsed_s));
    for (unsigned i = 0; i < REPORT_PCTS; i++)
        fprintf(out, "\"%s\":%.3f,", report_pct_names[i],
                (double)bench_hist_percentile(&p->latency_ns, report_pcts[i]) / 1e3);
    fprintf(out, "\"max\":%.3f,\"min\":%.3f,\"mean\":%.3f},", (double)p->latency_ns.max / 1e3,
            p->latency_ns.count ? (double)p->latency_ns.min / 1e3 : 0.0,
            bench_hist_mean(&p->latency_ns) / 1e3);
    fprintf(out, "\"errors_total\":%llu,\"errors\":{", (unsigned long long)p->errors);
    bool first = report_counts(out, p->status, 1, BENCH_STATUS_SLOTS, bench_status_name, true, "",
                               ",", true);
    if (p->malformed)
        fprintf(out, "%s\"MALFORMED_RESPONSE\":%llu", first ? "" : ",",
                (unsigned long long)p->malformed);
    fprintf(out, "},\"error_details\":{");
    report_counts(out, p->error_detail, 0, BENCH_DETAIL_SLOTS, bench_wire_error_code_name, true, "",
                  ",", true);
    fprintf(out, "},\"direct\":%llu,\"fallback\":%llu", (unsigned long long)p->direct,
            (unsigned long long)p->fallback);
    fprintf(out,
            ",\"streams_opened\":%llu,\"stream_messages_sent\":%llu,\"stream_items_sent\":%llu,"
            "\"stream_messages_received\":%llu",
            (unsigned long long)p->streams_opened, (unsigned long long)p->stream_messages_sent,
            (unsigned long long)p->stream_items_sent,
            (unsigned long long)p->stream_messages_received);
    fprintf(out, ",\"client_cpu_pct\":%.1f,\"client_cpu_s\":%.3f}", report_cpu_pct(p), p->cpu_s);
}

static void report_json_watch(const struct bench_watch_result *w, FILE *out)
{
    fprintf(out,
            "{\"watchers\":%u,\"created\":%u,\"events\":%llu,\"events_total\":%llu,"
            "\"messages\":%llu,\"malformed\":%llu,\"elapsed_s\":%.6f,\"events_per_s\":%.1f,"
            "\"events_per_s_per_watcher_median\":%.1f,\"events_per_s_per_watcher_min\":%.1f,"
            "\"events_per_s_per_watcher_max\":%.1f,\"ended_early\":%u,\"ended_by_status\":{",
            w->watchers, w->created, (unsigned long long)w->events,
            (unsigned long long)w->events_total, (unsigned long long)w->messages,
            (unsigned long long)w->malformed, w->elapsed_s, w->events_per_s, w->per_watcher_median,
            w->per_watcher_min, w->per_watcher_max, w->ended_early);
    report_counts(out, w->ended_by_status, 0, BENCH_STATUS_SLOTS, bench_status_name, true, "", ",",
                  true);
    fprintf(out, "},\"etcd_canceled\":%u,", w->etcd_canceled);
    if (w->ended_early)
        fprintf(out, "\"first_end_s\":%.3f,", w->first_end_s);
    else
        fprintf(out, "\"first_end_s\":null,");
    fprintf(out, "\"first_end_error\":\"");
    report_json_text(w->first_end_error, out);
    fprintf(out, "\"}");
}

void bench_report_json(const struct bench_opts *o, const struct bench_result *r, FILE *out)
{
    fprintf(out, "{\"target\":\"%s\",\"op\":\"%s\",", bench_target_name(o->target),
            bench_op_name(o->op));
    if (o->op == BENCH_OP_MIXED)
        fprintf(out, "\"read_op\":\"%s\",\"read_ratio\":%.3f,", bench_op_name(o->read_op),
                o->read_ratio);
    fprintf(out, "\"endpoints\":[");
    for (unsigned i = 0; i < o->endpoint_count; i++)
        fprintf(out, "%s\"%s\"", i ? "," : "", o->endpoints[i]); /* host:port has no '"' or '\\' */
    fprintf(out,
            "],\"concurrency\":%u,\"connections\":%u,\"threads\":%u,\"keys\":%llu,"
            "\"key_size\":%u,\"value_size\":%u,\"deadline_ms\":%u,\"seed\":%llu,",
            o->concurrency, o->connections, o->threads, (unsigned long long)o->keys, o->key_size,
            o->value_size, o->deadline_ms, (unsigned long long)o->seed);
    fprintf(out, "\"route_aware\":%s,\"stream\":%s,\"watchers\":%u,",
            o->route_aware ? "true" : "false", o->stream ? "true" : "false", o->watchers);
    if (o->watchers) {
        fprintf(out, "\"watch\":");
        report_json_watch(&r->watch, out);
        fprintf(out, ",");
    }
    if (o->route_aware) {
        fprintf(out, "\"route_fetches\":%llu,\"route_fetch_failures\":%llu,\"route_error\":\"",
                (unsigned long long)r->route_fetches, (unsigned long long)r->route_fetch_failures);
        report_json_text(r->route_error, out);
        fprintf(out, "\",");
    }
    if (o->populate) {
        fprintf(out, "\"populated_keys\":%llu,\"populate\":", (unsigned long long)r->populate_keys);
        report_json_phase(&r->populate, out);
        fprintf(out, ",");
    }
    fprintf(out, "\"run\":");
    report_json_phase(&r->run, out);
    fprintf(out, "}\n");
}
