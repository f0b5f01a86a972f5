/* slotctl_status.c - slotctl status: every endpoint's own view of the controller, compared. */
#include "slotctl_cmds.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Disagreement lines are cut to their fixed-size buffers on purpose (16 endpoints fit). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* ---- asking every endpoint ------------------------------------------------------------------ */

struct status_job {
    struct slotd_client *c;
    struct slotctl_status_row *row;
};

static void *status_ask(void *arg)
{
    struct status_job *job = arg;
    job->row->rc = slotd_client_controller_status(job->c, job->row->endpoint, &job->row->cs,
                                                  &job->row->err);
    return NULL;
}

size_t slotctl_status_collect(struct slotd_client *c, const char *endpoints,
                              struct slotctl_status_row *rows, size_t max)
{
    size_t n = 0;
    if (max > SLOTD_CLIENT_ENDPOINTS_MAX)
        max = SLOTD_CLIENT_ENDPOINTS_MAX;
    for (const char *p = endpoints; *p && n < max; n++) {
        size_t len = strcspn(p, ",");
        memset(&rows[n], 0, sizeof(rows[n]));
        snprintf(rows[n].endpoint, sizeof(rows[n].endpoint), "%.*s", (int)len, p);
        p += len + (p[len] == ',');
    }
    /* one thread per endpoint (the client is thread-safe): a node that does not answer costs
     * one deadline in all, not one each; where a thread cannot start, the call runs here */
    struct status_job jobs[SLOTD_CLIENT_ENDPOINTS_MAX];
    pthread_t threads[SLOTD_CLIENT_ENDPOINTS_MAX];
    bool started[SLOTD_CLIENT_ENDPOINTS_MAX] = {false};
    for (size_t i = 0; i < n; i++) {
        jobs[i] = (struct status_job){.c = c, .row = &rows[i]};
        started[i] = pthread_create(&threads[i], NULL, status_ask, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        else
            status_ask(&jobs[i]);
    }
    return n;
}

void slotctl_status_rows_clear(struct slotctl_status_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        slotd_controller_status_destroy(rows[i].cs);
        slotd_error_destroy(rows[i].err);
        rows[i].cs = NULL;
        rows[i].err = NULL;
    }
}

/* ---- comparing the answers ------------------------------------------------------------------ */

/* The most common of vals[0..n) (ties: the highest). When they are not all equal, writes
 * "WHAT differ: node 4 at 31, others at 33" to out (one: "node 4 at 31", the rest: "others
 * at 33", or "node 1 at 33" when only one node holds the common value); else out is "". */
static uint64_t status_differ(const char *what, const uint64_t *nodes, const uint64_t *vals,
                              size_t n, const char *verb_one, const char *verb_many, char *out,
                              size_t len)
{
    out[0] = '\0';
    uint64_t common = 0;
    size_t common_count = 0;
    for (size_t i = 0; i < n; i++) {
        size_t count = 0;
        for (size_t j = 0; j < n; j++)
            count += vals[j] == vals[i];
        if (count > common_count || (count == common_count && vals[i] > common)) {
            common = vals[i];
            common_count = count;
        }
    }
    if (common_count == n)
        return common;
    size_t used = (size_t)snprintf(out, len, "%s differ:", what);
    const char *sep = " ";
    for (size_t i = 0; i < n && used < len; i++) {
        if (vals[i] == common)
            continue;
        used += (size_t)snprintf(out + used, len - used, "%snode %" PRIu64 " %s %" PRIu64, sep,
                                 nodes[i], verb_one, vals[i]);
        sep = ", ";
    }
    for (size_t i = 0; i < n && used < len && common_count == 1; i++)
        if (vals[i] == common)
            used += (size_t)snprintf(out + used, len - used, ", node %" PRIu64 " %s %" PRIu64,
                                     nodes[i], verb_one, common);
    if (common_count > 1 && used < len)
        snprintf(out + used, len - used, ", others %s %" PRIu64, verb_many, common);
    return common;
}

void slotctl_status_judge(const struct slotctl_status_row *rows, size_t n,
                          struct slotctl_status_verdict *v)
{
    uint64_t nodes[SLOTD_CLIENT_ENDPOINTS_MAX] = {0}, revisions[SLOTD_CLIENT_ENDPOINTS_MAX] = {0};
    uint64_t named_by[SLOTD_CLIENT_ENDPOINTS_MAX] = {0}, leaders[SLOTD_CLIENT_ENDPOINTS_MAX] = {0};
    size_t answered = 0, named = 0;
    memset(v, 0, sizeof(*v));
    if (n > SLOTD_CLIENT_ENDPOINTS_MAX)
        n = SLOTD_CLIENT_ENDPOINTS_MAX;
    v->asked = (unsigned)n;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].rc != SLOTD_CLIENT_OK)
            continue;
        nodes[answered] = rows[i].cs->node_id;
        revisions[answered++] = rows[i].cs->revision;
        if (rows[i].cs->leader == 0) /* unknown: neither agrees nor disagrees */
            continue;
        named_by[named] = rows[i].cs->node_id;
        leaders[named++] = rows[i].cs->leader;
    }
    v->answered = (unsigned)answered;
    v->revision = status_differ("revisions", nodes, revisions, answered, "at", "at", v->revisions,
                                sizeof(v->revisions));
    v->leader = status_differ("leaders", named_by, leaders, named, "names node", "name node",
                              v->leaders, sizeof(v->leaders));
    v->agree = answered > 0 && !v->revisions[0] && !v->leaders[0];
}

/* ---- human output -----------------------------------------------------------------------------
 */

/* "1.2 s", or "-" for a negative age (never written / never answered). */
static void status_age_text(int64_t ms, char *out, size_t len)
{
    if (ms < 0)
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%.1f s", (double)ms / 1000.0);
}

/* "N", or "-" for 0 (none / unknown). */
static void status_id_text(uint64_t v, char *out, size_t len)
{
    if (v == 0)
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%" PRIu64, v);
}

static void status_print_row(FILE *out, int width, const struct slotctl_status_row *r)
{
    const struct slotd_controller_status *s = r->cs;
    if (r->rc != SLOTD_CLIENT_OK) {
        fprintf(out, "%-*s  %4s  error: %s\n", width, r->endpoint, "-",
                r->err ? slotd_error_message(r->err) : slotd_client_strerror(r->rc));
        return;
    }
    char file_rev[24], file_age[32], lag[32], leader[24];
    status_id_text(s->state_file_revision, file_rev, sizeof(file_rev));
    status_age_text(s->state_file_age_ms, file_age, sizeof(file_age));
    status_age_text(s->mirror_lag_ms, lag, sizeof(lag));
    status_id_text(s->leader, leader, sizeof(leader));
    fprintf(out,
            "%-*s  %4" PRIu64 "  %-13s  %6" PRIu64 "  %7" PRIu64 "  %7" PRIu64 "  %8" PRIu64
            "  %8" PRIu64 "  %8s  %8s  %10s  %6s\n",
            width, r->endpoint, s->node_id, s->role[0] ? s->role : "?", s->term, s->commit_index,
            s->applied_index, s->revision, s->snapshot_index, file_rev, file_age, lag, leader);
}

void slotctl_status_print(FILE *out, const struct slotctl_status_row *rows, size_t n)
{
    int width = (int)strlen("ENDPOINT");
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(rows[i].endpoint) > width)
            width = (int)strlen(rows[i].endpoint);
    fprintf(out, "%-*s  %4s  %-13s  %6s  %7s  %7s  %8s  %8s  %8s  %8s  %10s  %6s\n", width,
            "ENDPOINT", "NODE", "ROLE", "TERM", "COMMIT", "APPLIED", "REVISION", "SNAPSHOT",
            "FILE REV", "FILE AGE", "MIRROR LAG", "LEADER");
    for (size_t i = 0; i < n; i++)
        status_print_row(out, width, &rows[i]);
    struct slotctl_status_verdict v;
    slotctl_status_judge(rows, n, &v);
    fprintf(out, "\n");
    if (v.answered == 0) {
        fprintf(out, "no endpoint answered (%u asked)\n", v.asked);
        return;
    }
    if (v.revisions[0])
        fprintf(out, "%s\n", v.revisions);
    if (v.leaders[0])
        fprintf(out, "%s\n", v.leaders);
    if (v.agree && v.leader)
        fprintf(out, "agree: revision %" PRIu64 ", leader node %" PRIu64 "\n", v.revision,
                v.leader);
    else if (v.agree)
        fprintf(out, "agree: revision %" PRIu64 ", no node names a controller leader\n",
                v.revision);
    if (v.answered < v.asked)
        fprintf(out, "%u of %u endpoints answered\n", v.answered, v.asked);
}

/* ---- JSON ---------------------------------------------------------------------------------------
 */

static json_t *status_row_json(const struct slotctl_status_row *r)
{
    const struct slotd_controller_status *s = r->cs;
    json_t *o = json_object();
    json_object_set_new(o, "endpoint", json_string(r->endpoint));
    json_object_set_new(o, "ok", json_boolean(r->rc == SLOTD_CLIENT_OK));
    if (r->rc != SLOTD_CLIENT_OK) {
        json_object_set_new(o, "error", json_string(slotd_client_strerror(r->rc)));
        json_object_set_new(o, "message", json_string(r->err ? slotd_error_message(r->err)
                                                             : slotd_client_strerror(r->rc)));
        if (r->err && slotd_error_grpc_status(r->err) >= 0)
            json_object_set_new(o, "status", slotctl_call_status_json(r->err));
        return o;
    }
    json_object_set_new(o, "node_id", json_integer((json_int_t)s->node_id));
    json_object_set_new(o, "role", json_string(s->role));
    json_object_set_new(o, "term", json_integer((json_int_t)s->term));
    json_object_set_new(o, "commit_index", json_integer((json_int_t)s->commit_index));
    json_object_set_new(o, "revision", json_integer((json_int_t)s->revision));
    json_object_set_new(o, "applied_index", json_integer((json_int_t)s->applied_index));
    json_object_set_new(o, "snapshot_index", json_integer((json_int_t)s->snapshot_index));
    json_object_set_new(o, "state_file_revision", json_integer((json_int_t)s->state_file_revision));
    json_object_set_new(o, "state_file_age_ms", json_integer((json_int_t)s->state_file_age_ms));
    json_object_set_new(o, "mirror_lag_ms", json_integer((json_int_t)s->mirror_lag_ms));
    json_object_set_new(o, "leader", json_integer((json_int_t)s->leader));
    return o;
}

json_t *slotctl_status_json(const struct slotctl_status_row *rows, size_t n, int code)
{
    struct slotctl_status_verdict v;
    slotctl_status_judge(rows, n, &v);
    json_t *nodes = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(nodes, status_row_json(&rows[i]));
    json_t *differ = json_array();
    if (v.revisions[0])
        json_array_append_new(differ, json_string(v.revisions));
    if (v.leaders[0])
        json_array_append_new(differ, json_string(v.leaders));
    json_t *j = json_object();
    json_object_set_new(j, "command", json_string("status"));
    json_object_set_new(j, "ok", json_boolean(code == SLOTCTL_EXIT_OK));
    json_object_set_new(j, "nodes", nodes);
    json_object_set_new(j, "agree", json_boolean(v.agree));
    json_object_set_new(j, "disagreements", differ);
    json_object_set_new(j, "exit_code", json_integer(code));
    return j;
}

/* ---- the command -------------------------------------------------------------------------------
 */

int slotctl_status_run(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotctl_status_row rows[SLOTD_CLIENT_ENDPOINTS_MAX];
    size_t n = slotctl_status_collect(c, a->endpoints, rows, SLOTD_CLIENT_ENDPOINTS_MAX);
    char failed[SLOTCTL_STATUS_LINE_LEN] = "";
    size_t used = 0;
    unsigned failures = 0;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].rc == SLOTD_CLIENT_OK)
            continue;
        if (used < sizeof(failed))
            used += (size_t)snprintf(failed + used, sizeof(failed) - used, "%s%s",
                                     failures ? ", " : "", rows[i].endpoint);
        failures++;
    }
    int code = failures ? SLOTCTL_EXIT_UNAVAILABLE : SLOTCTL_EXIT_OK;
    if (a->json)
        slotctl_json_print(slotctl_status_json(rows, n, code));
    else
        slotctl_status_print(stdout, rows, n);
    if (failures)
        fprintf(stderr, "slotctl status: %u of %zu endpoints did not answer: %s\n", failures, n,
                failed);
    slotctl_status_rows_clear(rows, n);
    return code;
}
