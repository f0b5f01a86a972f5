/* slotctl_mcp.c - `slotctl mcp`: an operations MCP server (JSON-RPC 2.0, one message a line on
 * stdin/stdout) whose tools run slotctl's own commands with --json. */
#define _GNU_SOURCE /* pipe2 */
#include "slotctl_mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* JSON-RPC 2.0 error codes. */
#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)

#define MCP_PROTOCOL_LATEST "2025-06-18"
#define MCP_ARGV_MAX 48
#define MCP_WORD_BYTES 32

struct mcp_server {
    const struct slotctl_args *a;
    char self[PATH_MAX]; /* this slotctl binary: every tool runs it as a child */
};

/* What one child slotctl printed and how it ended. */
struct mcp_run {
    int exit_code; /* the child's exit code; -1 when it did not run to its end */
    char *out;     /* stdout, NUL-terminated */
    size_t out_len;
    char err[MCP_STDERR_BYTES_MAX + 1]; /* stderr (cut at the bound), or why it did not run */
    json_t *json;                       /* stdout parsed when it is one JSON object, else NULL */
};

static void mcp_run_clear(struct mcp_run *r)
{
    free(r->out);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

static int64_t mcp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- children ---------------------------------------------------------------------------- */

/* argv for `slotctl GLOBAL-OPTIONS --json WORDS...`: the caller's endpoints, deadlines, TLS and
 * credentials, so every tool acts as the user who started `slotctl mcp`. */
static int mcp_argv_build(const struct mcp_server *s, const char *const *words, int n_words,
                          const char **argv, char nums[2][MCP_WORD_BYTES])
{
    const struct slotctl_args *a = s->a;
    int n = 0;
    argv[n++] = s->self;
    argv[n++] = "--endpoints";
    argv[n++] = a->endpoints;
    if (a->deadline_ms) {
        snprintf(nums[0], MCP_WORD_BYTES, "%d", a->deadline_ms);
        argv[n++] = "--deadline-ms";
        argv[n++] = nums[0];
    }
    if (a->max_retries) {
        snprintf(nums[1], MCP_WORD_BYTES, "%d", a->max_retries < 0 ? 0 : a->max_retries);
        argv[n++] = "--max-retries";
        argv[n++] = nums[1];
    }
    const char *pairs[][2] = {{"--tls-ca", a->tls_ca},   {"--tls-cert", a->tls_cert},
                              {"--tls-key", a->tls_key}, {"--tls-server-name", a->tls_server_name},
                              {"--user", a->user},       {"--password-file", a->password_file}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        if (pairs[i][1]) {
            argv[n++] = pairs[i][0];
            argv[n++] = pairs[i][1];
        }
    }
    argv[n++] = "--json";
    for (int i = 0; i < n_words && n < MCP_ARGV_MAX - 1; i++)
        argv[n++] = words[i];
    argv[n] = NULL;
    return n;
}

/* Reads what fd has into buf (cap bytes at most); sets *eof at end of file. -1 past cap. */
static int mcp_fd_drain(int fd, char *buf, size_t *len, size_t cap, bool *eof)
{
    char chunk[16384];
    ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (got <= 0) {
        *eof = true;
        return 0;
    }
    if (*len + (size_t)got > cap)
        return -1;
    memcpy(buf + *len, chunk, (size_t)got);
    *len += (size_t)got;
    return 0;
}

/* Collects the child's stdout and stderr until both close, a bound is passed or the time is up;
 * then reaps it (killing it first unless it closed both). */
static void mcp_child_collect(pid_t pid, int out_fd, int err_fd, struct mcp_run *r)
{
    size_t err_len = 0;
    bool out_eof = false, err_eof = false, failed = false;
    int64_t deadline = mcp_now_ms() + MCP_TOOL_TIMEOUT_MS;
    while (!failed && (!out_eof || !err_eof)) {
        struct pollfd p[2] = {{.fd = out_eof ? -1 : out_fd, .events = POLLIN},
                              {.fd = err_eof ? -1 : err_fd, .events = POLLIN}};
        int64_t left = deadline - mcp_now_ms();
        if (left <= 0) {
            snprintf(r->err, sizeof(r->err), "the command did not finish within %d ms",
                     MCP_TOOL_TIMEOUT_MS);
            failed = true;
            break;
        }
        if (poll(p, 2, (int)left) < 0 && errno != EINTR)
            break;
        if (!out_eof && (p[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
            mcp_fd_drain(out_fd, r->out, &r->out_len, MCP_OUTPUT_BYTES_MAX, &out_eof) != 0) {
            snprintf(r->err, sizeof(r->err), "the command's output is larger than %d bytes",
                     MCP_OUTPUT_BYTES_MAX);
            failed = true;
        }
        bool cut = false;
        if (!err_eof && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
            mcp_fd_drain(err_fd, r->err, &err_len, MCP_STDERR_BYTES_MAX, &err_eof) != 0)
            cut = true;
        if (cut) /* keep what fits, stop reading stderr */
            err_eof = true;
        r->err[err_len] = '\0';
    }
    if (failed)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    r->exit_code = !failed && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r->out[r->out_len] = '\0';
}

/* Runs `slotctl ... --json WORDS...` and fills r (cleared first; caller clears it with
 * mcp_run_clear). r->json is the output when it is one JSON object (the last line's, for
 * commands printing one object per line). */
static void mcp_child_run(const struct mcp_server *s, const char *const *words, int n_words,
                          struct mcp_run *r)
{
    const char *argv[MCP_ARGV_MAX];
    char nums[2][MCP_WORD_BYTES];
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    memset(r, 0, sizeof(*r));
    r->exit_code = -1;
    mcp_argv_build(s, words, n_words, argv, nums);
    r->out = malloc(MCP_OUTPUT_BYTES_MAX + 1);
    if (!r->out) {
        snprintf(r->err, sizeof(r->err), "out of memory");
        return;
    }
    if (pipe2(out_pipe, O_CLOEXEC) != 0)
        goto err_after_out;
    if (pipe2(err_pipe, O_CLOEXEC) != 0)
        goto err_after_out_pipe;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        goto err_after_err_pipe;
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_pipe[1], 1) < 0 ||
            dup2(err_pipe[1], 2) < 0)
            _exit(127);
        execv(s->self, (char *const *)argv);
        _exit(127);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    mcp_child_collect(pid, out_pipe[0], err_pipe[0], r);
    close(out_pipe[0]);
    close(err_pipe[0]);
    const char *last = r->out_len ? r->out + r->out_len - 1 : r->out;
    while (last > r->out && (*last == '\n' || *last == ' '))
        last--;
    while (last > r->out && last[-1] != '\n')
        last--;
    json_t *j = json_loads(last, 0, NULL);
    if (json_is_object(j))
        r->json = j;
    else
        json_decref(j);
    return;

err_after_err_pipe:
    close(err_pipe[0]);
    close(err_pipe[1]);
err_after_out_pipe:
    close(out_pipe[0]);
    close(out_pipe[1]);
err_after_out:
    snprintf(r->err, sizeof(r->err), "cannot run %s: %s", s->self, strerror(errno));
    r->out[0] = '\0';
}

/* ---- the gate of the mutating tools ------------------------------------------------------ */

/* 0 when the mutating tools may run now: the caller logged in (--user) as a user whose
 * Admin.AuthList (admin permission only) succeeds on a cluster with auth enabled, and the
 * replicated cluster state has feature operations_mcp on. Else -1 and a sentence in reason.
 * Asked again at every tools/list and before every mutating call; the server still checks the
 * admin permission on each Admin call the tool makes. */
static int mcp_gate_check(const struct mcp_server *s, char *reason, size_t len)
{
    struct mcp_run r;
    int rc = -1;
    if (!s->a->user) {
        snprintf(reason, len,
                 "mutating tools need an admin user: start slotctl mcp with --user NAME "
                 "--password-file F on a cluster with --auth 1");
        return -1;
    }
    const char *users[] = {"user", "list"};
    mcp_child_run(s, users, 2, &r);
    if (r.exit_code != 0 || !r.json) {
        json_t *m = r.json ? json_object_get(r.json, "message") : NULL;
        snprintf(reason, len, "user %s is not an admin (Admin.AuthList refused: %.300s)",
                 s->a->user, json_is_string(m) ? json_string_value(m) : r.err);
        goto done;
    }
    if (!json_is_true(json_object_get(r.json, "enabled"))) {
        snprintf(reason, len,
                 "auth is not enabled in the cluster (--auth 1): no caller holds "
                 "an admin role");
        goto done;
    }
    mcp_run_clear(&r);
    const char *features[] = {"feature", "list"};
    mcp_child_run(s, features, 2, &r);
    json_t *f = r.json ? json_object_get(r.json, "features") : NULL;
    if (r.exit_code != 0 || !json_is_object(f)) {
        json_t *m = r.json ? json_object_get(r.json, "message") : NULL;
        snprintf(reason, len, "cannot read the cluster state's features: %.300s",
                 json_is_string(m) ? json_string_value(m) : r.err);
        goto done;
    }
    if (!json_is_true(json_object_get(f, "operations_mcp"))) {
        snprintf(reason, len,
                 "feature operations_mcp is off in the cluster state (an admin "
                 "turns it on with: slotctl feature set operations_mcp on)");
        goto done;
    }
    rc = 0;
done:
    mcp_run_clear(&r);
    return rc;
}

/* ---- tools ------------------------------------------------------------------------------- */

/* A tool's command words, built from its arguments; words point into w->bufs or static text. */
struct mcp_words {
    const char *v[16];
    int n;
    char bufs[8][MCP_WORD_BYTES];
    int n_bufs;
};

static void mcp_word_add(struct mcp_words *w, const char *word)
{
    if (w->n < (int)(sizeof(w->v) / sizeof(w->v[0])))
        w->v[w->n++] = word;
}

/* The tool-call argument error: -32602 with data {field, limit}. */
struct mcp_arg_error {
    char message[256];
    const char *field;
    uint64_t limit;
};

static int mcp_arg_fail(struct mcp_arg_error *e, const char *field, uint64_t limit, const char *fmt,
                        const char *tool, uint64_t lo)
{
    snprintf(e->message, sizeof(e->message), fmt, tool, field, (unsigned long long)lo,
             (unsigned long long)limit);
    e->field = field;
    e->limit = limit;
    return -1;
}

/* Integer argument name of args in lo..hi: adds "OPTION value" to w. Absent: -1 with an error
 * when required, else 0 and nothing added. */
static int mcp_arg_uint(const json_t *args, const char *name, const char *option, uint64_t lo,
                        uint64_t hi, bool required, const char *tool, struct mcp_words *w,
                        struct mcp_arg_error *e)
{
    const json_t *v = json_object_get(args, name);
    if (!v && !required)
        return 0;
    if (!v)
        return mcp_arg_fail(e, name, hi, "%s: argument %s is required (an integer in %llu..%llu)",
                            tool, lo);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < lo ||
        (uint64_t)json_integer_value(v) > hi)
        return mcp_arg_fail(e, name, hi, "%s: argument %s must be an integer in %llu..%llu", tool,
                            lo);
    char *buf = w->bufs[w->n_bufs++];
    snprintf(buf, MCP_WORD_BYTES, "%llu", (unsigned long long)json_integer_value(v));
    if (option)
        mcp_word_add(w, option);
    mcp_word_add(w, buf);
    return 0;
}

#define MCP_ID_MAX ((uint64_t)INT64_MAX)
#define MCP_GROUP_MAX ((uint64_t)SLOTD_ROUTE_GROUPS_MAX)
#define MCP_REVISION_SCHEMA                                                                        \
    "\"expected_revision\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"refuse unless "   \
    "the cluster state is at this revision\"}"

/* An integer argument that becomes "OPTION VALUE" on the command line (value in 1..hi). */
struct mcp_uint_arg {
    const char *name, *option;
    uint64_t hi;
    bool required;
};

struct mcp_tool {
    const char *name;
    const char *description;
    const char *schema;        /* inputSchema, JSON text */
    const char *const args[5]; /* the argument names it takes besides uints' (NULL-terminated) */
    bool mutating;
    /* The slotctl command it runs: words, then uints in order (mcp_tool_words), then what
     * build (NULL: nothing) adds. recent_errors has none: it runs in-process. */
    const char *const words[3];
    const struct mcp_uint_arg uints[4];
    int (*build)(const json_t *args, struct mcp_words *w, struct mcp_arg_error *e);
};

#define MCP_REVISION_ARG                                                                           \
    {                                                                                              \
        "expected_revision", "--expected-revision", MCP_ID_MAX, false                              \
    }

static int mcp_tool_words(const struct mcp_tool *t, const json_t *args, struct mcp_words *w,
                          struct mcp_arg_error *e)
{
    for (size_t i = 0; i < sizeof(t->words) / sizeof(t->words[0]) && t->words[i]; i++)
        mcp_word_add(w, t->words[i]);
    for (size_t i = 0; i < sizeof(t->uints) / sizeof(t->uints[0]) && t->uints[i].name; i++) {
        const struct mcp_uint_arg *u = &t->uints[i];
        if (mcp_arg_uint(args, u->name, u->option, 1, u->hi, u->required, t->name, w, e) != 0)
            return -1;
    }
    return t->build ? t->build(args, w, e) : 0;
}

static int build_tasks(const json_t *a, struct mcp_words *w, struct mcp_arg_error *e)
{
    if (mcp_arg_uint(a, "task_id", NULL, 1, MCP_ID_MAX, false, "tasks", w, e) != 0)
        return -1;
    const json_t *active = json_object_get(a, "active");
    if (active && !json_is_boolean(active)) {
        snprintf(e->message, sizeof(e->message), "tasks: argument active must be true or false");
        e->field = "active";
        return -1;
    }
    if (json_is_true(active))
        mcp_word_add(w, "--active");
    return 0;
}

/* group_health's answer from `route --json` (borrowed): per group its leader and term, whether
 * the observed voters agree with the controller's intent, and each replica's role, indexes and
 * answer age; the groups without a leader and those that disagree listed apart. New reference;
 * NULL when route's answer has no groups. */
/* o's member key (borrowed), or JSON null when o lacks it, so json_pack's "O" never sees NULL. */
static json_t *mcp_field(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v ? v : json_null();
}

static json_t *mcp_group_health(const json_t *route)
{
    const json_t *groups = json_object_get(route, "groups");
    if (!json_is_array(groups))
        return NULL;
    json_t *out = json_array(), *leaderless = json_array(), *disagree = json_array();
    size_t i;
    const json_t *g;
    json_array_foreach(groups, i, g)
    {
        json_t *id = mcp_field(g, "group_id"), *replicas = json_array();
        json_int_t commit_max = 0, applied_min = -1;
        size_t k;
        const json_t *rep;
        json_array_foreach(json_object_get(g, "replicas"), k, rep)
        {
            json_int_t c = json_integer_value(mcp_field(rep, "commit_index"));
            json_int_t ap = json_integer_value(mcp_field(rep, "applied_index"));
            commit_max = c > commit_max ? c : commit_max;
            applied_min = applied_min < 0 || ap < applied_min ? ap : applied_min;
            json_array_append_new(
                replicas,
                json_pack("{s:O,s:O,s:O,s:O,s:O}", "node_id", mcp_field(rep, "node_id"), "role",
                          mcp_field(rep, "role"), "commit_index", mcp_field(rep, "commit_index"),
                          "applied_index", mcp_field(rep, "applied_index"), "age_ms",
                          mcp_field(rep, "age_ms")));
        }
        bool led = json_integer_value(mcp_field(g, "leader")) != 0;
        bool agrees = json_is_true(mcp_field(g, "agrees"));
        if (!led)
            json_array_append(leaderless, id);
        if (!agrees)
            json_array_append(disagree, id);
        json_array_append_new(
            out, json_pack("{s:O,s:O,s:O,s:b,s:O,s:O,s:I,s:o}", "group_id", id, "leader",
                           mcp_field(g, "leader"), "leader_term", mcp_field(g, "leader_term"),
                           "agrees", agrees, "voters", mcp_field(g, "voters"), "intended_voters",
                           mcp_field(g, "intended_voters"), "apply_lag",
                           applied_min < 0 ? (json_int_t)0 : commit_max - applied_min, "replicas",
                           replicas));
    }
    return json_pack("{s:b,s:o,s:o,s:o}", "healthy",
                     json_array_size(leaderless) == 0 && json_array_size(disagree) == 0,
                     "groups_without_leader", leaderless, "groups_disagreeing", disagree, "groups",
                     out);
}

#define MCP_NO_ARGS "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"
/* A read-only tool without arguments that runs slotctl WORDS (NULL: recent_errors, in-process). */
#define MCP_READ_TOOL(name, description, ...)                                                      \
    {                                                                                              \
        name, description, MCP_NO_ARGS, {NULL}, false, {__VA_ARGS__}, {{NULL}}, NULL               \
    }

static const struct mcp_tool mcp_tools[] = {
    MCP_READ_TOOL(
        "cluster_status",
        "The controller's cluster state (nodes, slot groups, tasks, features) and the observed "
        "leaders: slotctl cluster --json.",
        "cluster"),
    MCP_READ_TOOL(
        "controller_status",
        "Every endpoint's own view of the controller side by side, and where they disagree: "
        "slotctl status --json.",
        "status"),
    MCP_READ_TOOL(
        "routes",
        "The route: hash-slot ranges, their slot group, its leader node and address, observed vs "
        "intended members: slotctl route --json.",
        "route"),
    MCP_READ_TOOL(
        "node_health",
        "grpc.health.v1 Check on every node of the route (SERVING once every group the node hosts "
        "has a leader): slotctl health --json.",
        "health"),
    MCP_READ_TOOL(
        "group_health",
        "Per slot group: its leader and term, whether the observed voters agree with the "
        "controller's intent, each replica's role, commit and applied index and answer age, the "
        "apply lag; the groups without a leader and those that disagree listed apart (from slotctl "
        "route --json).",
        "route"),
    {"tasks",
     "Controller tasks (replica moves, leader transfers, drains, ...): all, the active ones, or "
     "one by id: slotctl task status --json.",
     "{\"type\":\"object\",\"properties\":{\"task_id\":{\"type\":\"integer\",\"minimum\":1},"
     "\"active\":{\"type\":\"boolean\"}},\"additionalProperties\":false}",
     {"task_id", "active", NULL},
     false,
     {"task", "status"},
     {{NULL}},
     build_tasks},
    MCP_READ_TOOL(
        "features",
        "The cluster-wide switches of the replicated cluster state: slotctl feature list --json.",
        "feature", "list"),
    MCP_READ_TOOL(
        "recent_errors",
        "Non-OK gRPC calls by method and code, refused stream frames and dropped raft messages, "
        "counted since each node started, scraped from the /metrics URLs slotctl mcp was given "
        "(--metrics).",
        NULL),
    {"transfer_leader",
     "Admin.TransferLeader: moves group's leadership to to_node (preferred) as a task; answers "
     "the task id.",
     "{\"type\":\"object\",\"properties\":{\"group\":{\"type\":\"integer\",\"minimum\":1},"
     "\"to_node\":{\"type\":\"integer\",\"minimum\":1}," MCP_REVISION_SCHEMA
     "},\"required\":[\"group\",\"to_node\"],\"additionalProperties\":false}",
     {NULL},
     true,
     {"transfer-leader", "--as-task"},
     {{"group", "--group", MCP_GROUP_MAX, true},
      {"to_node", "--to", MCP_ID_MAX, true},
      MCP_REVISION_ARG},
     NULL},
    {"move_replica",
     "Admin.MoveReplica: moves group's replica from from_node to to_node (learner, catch-up, "
     "promote, remove) as a task; answers the task id.",
     "{\"type\":\"object\",\"properties\":{\"group\":{\"type\":\"integer\",\"minimum\":1},"
     "\"from_node\":{\"type\":\"integer\",\"minimum\":1},\"to_node\":{\"type\":\"integer\","
     "\"minimum\":1}," MCP_REVISION_SCHEMA
     "},\"required\":[\"group\",\"from_node\",\"to_node\"],\"additionalProperties\":false}",
     {NULL},
     true,
     {"move-replica"},
     {{"group", "--group", MCP_GROUP_MAX, true},
      {"from_node", "--from", MCP_ID_MAX, true},
      {"to_node", "--to", MCP_ID_MAX, true},
      MCP_REVISION_ARG},
     NULL},
    {"drain_node",
     "Admin.DrainNode: moves every replica off node, one at a time, then marks it removed, as a "
     "task; answers the task id.",
     "{\"type\":\"object\",\"properties\":{\"node\":{\"type\":\"integer\",\"minimum\":1}"
     "," MCP_REVISION_SCHEMA "},\"required\":[\"node\"],\"additionalProperties\":false}",
     {NULL},
     true,
     {"drain"},
     {{"node", "--node", MCP_ID_MAX, true}, MCP_REVISION_ARG},
     NULL},
    {"abort_task",
     "Admin.AbortTask: stops running task task_id at a safe point (it ends failed); the controller "
     "refuses a task not running or past its last safe point, naming its state.",
     "{\"type\":\"object\",\"properties\":{\"task_id\":{\"type\":\"integer\",\"minimum\":1}"
     "," MCP_REVISION_SCHEMA "},\"required\":[\"task_id\"],\"additionalProperties\":false}",
     {NULL},
     true,
     {"abort"},
     {{"task_id", "--task", MCP_ID_MAX, true}, MCP_REVISION_ARG},
     NULL},
};

#define MCP_N_TOOLS (sizeof(mcp_tools) / sizeof(mcp_tools[0]))

/* ---- recent_errors: the nodes' /metrics ---------------------------------------------------- */

/* Splits "http://HOST:PORT/PATH" (PATH defaults to /metrics). -1 when it is not one. */
static int mcp_url_split(const char *url, char *host, size_t host_len, char *port, size_t port_len,
                         char *path, size_t path_len)
{
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    const char *h = url + 7, *slash = strchr(h, '/');
    const char *end = slash ? slash : h + strlen(h);
    const char *colon = memchr(h, ':', (size_t)(end - h));
    if (!colon || colon == h || end - colon - 1 <= 0 || (size_t)(colon - h) >= host_len ||
        (size_t)(end - colon - 1) >= port_len)
        return -1;
    snprintf(host, host_len, "%.*s", (int)(colon - h), h);
    snprintf(port, port_len, "%.*s", (int)(end - colon - 1), colon + 1);
    snprintf(path, path_len, "%s", slash ? slash : "/metrics");
    return 0;
}

/* GET url into *body (caller frees with free()); -1 with a sentence in err. */
static int mcp_http_get(const char *url, char **body, char *err, size_t errlen)
{
    char host[256], port[16], path[512];
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (mcp_url_split(url, host, sizeof(host), port, sizeof(port), path, sizeof(path)) != 0) {
        snprintf(err, errlen, "not an http://HOST:PORT[/PATH] URL");
        return -1;
    }
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = MCP_METRICS_TIMEOUT_MS / 1000};
    if (fd < 0)
        goto err_after_ai;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
        goto err_after_fd;
    char req[1024];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s:%s\r\n\r\n", path, host, port);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        goto err_after_fd;
    char *buf = malloc(MCP_METRICS_BYTES_MAX + 1);
    size_t len = 0;
    if (!buf)
        goto err_after_fd;
    int64_t deadline = mcp_now_ms() + MCP_METRICS_TIMEOUT_MS;
    ssize_t got;
    while (len < MCP_METRICS_BYTES_MAX && mcp_now_ms() < deadline &&
           (got = recv(fd, buf + len, MCP_METRICS_BYTES_MAX - len, 0)) > 0)
        len += (size_t)got;
    buf[len] = '\0';
    const char *start = strstr(buf, "\r\n\r\n");
    if (len == MCP_METRICS_BYTES_MAX || strncmp(buf, "HTTP/1.", 7) != 0 ||
        strncmp(buf + 8, " 200", 4) != 0 || !start) {
        snprintf(err, errlen, "%s",
                 len == MCP_METRICS_BYTES_MAX ? "larger than the bound"
                 : len == 0                   ? "no answer"
                                              : "not an HTTP 200 answer");
        free(buf);
        close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    memmove(buf, start + 4, len - (size_t)(start + 4 - buf) + 1);
    *body = buf;
    close(fd);
    freeaddrinfo(ai);
    return 0;

err_after_fd:
    close(fd);
err_after_ai:
    snprintf(err, errlen, "%s:%s: %s", host, port, strerror(errno));
    freeaddrinfo(ai);
    return -1;
}

/* The samples of body that are errors and non-zero: slotd_grpc_requests_total without
 * code="OK", slotd_grpc_stream_frames_total with result="refused",
 * slotd_raft_dropped_messages_total; appended to series (at most MCP_ERRORS_MAX in all). */
static void mcp_errors_collect(const char *body, json_t *series, bool *truncated)
{
    static const char *const names[] = {"slotd_grpc_requests_total{",
                                        "slotd_grpc_stream_frames_total{",
                                        "slotd_raft_dropped_messages_total{"};
    for (const char *line = body; *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        size_t k = 0;
        while (k < 3 && strncmp(line, names[k], strlen(names[k])) != 0)
            k++;
        const char *close = k < 3 ? strchr(line, '}') : NULL;
        const char *eol = strchr(line, '\n');
        if (!close || (eol && close > eol))
            continue;
        const char *labels = line + strlen(names[k]);
        int labels_len = (int)(close - labels);
        char text[512];
        snprintf(text, sizeof(text), "%.*s", labels_len, labels);
        if ((k == 0 && strstr(text, "code=\"OK\"")) ||
            (k == 1 && !strstr(text, "result=\"refused\"")))
            continue;
        double v = strtod(close + 1, NULL);
        if (v <= 0)
            continue;
        if (json_array_size(series) >= MCP_ERRORS_MAX) {
            *truncated = true;
            return;
        }
        json_array_append_new(series, json_pack("{s:s#,s:s,s:f}", "metric", names[k],
                                                strlen(names[k]) - 1, "labels", text, "value", v));
    }
}

/* recent_errors' answer: one entry per --metrics URL. */
static json_t *mcp_recent_errors(const struct mcp_server *s, bool *is_error)
{
    json_t *nodes = json_array();
    bool truncated = false;
    char urls[4096];
    *is_error = false;
    if (!s->a->metrics_urls) {
        *is_error = true;
        json_decref(nodes);
        return json_pack("{s:s}", "error",
                         "no /metrics URLs: start slotctl mcp with --metrics "
                         "http://HOST:PORT/metrics,...");
    }
    snprintf(urls, sizeof(urls), "%s", s->a->metrics_urls);
    int n = 0;
    for (char *save = NULL, *url = strtok_r(urls, ",", &save); url && n < MCP_METRICS_URLS_MAX;
         url = strtok_r(NULL, ",", &save), n++) {
        char *body = NULL, err[300];
        json_t *series = json_array();
        if (mcp_http_get(url, &body, err, sizeof(err)) != 0) {
            json_array_append_new(nodes,
                                  json_pack("{s:s,s:b,s:s}", "url", url, "ok", 0, "error", err));
            json_decref(series);
            *is_error = true;
            continue;
        }
        mcp_errors_collect(body, series, &truncated);
        free(body);
        json_array_append_new(nodes,
                              json_pack("{s:s,s:b,s:o}", "url", url, "ok", 1, "errors", series));
    }
    return json_pack("{s:o,s:b}", "nodes", nodes, "truncated", truncated);
}

/* ---- JSON-RPC ---------------------------------------------------------------------------- */

static void mcp_send(json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    if (text) {
        fputs(text, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(text);
    }
    json_decref(msg);
}

static void mcp_reply(const json_t *id, json_t *result)
{
    mcp_send(json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
                       result));
}

static void mcp_reply_error(const json_t *id, int code, const char *message, json_t *data)
{
    json_t *e = json_pack("{s:i,s:s}", "code", code, "message", message);
    if (data)
        json_object_set_new(e, "data", data);
    mcp_send(json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", e));
}

static json_t *mcp_tool_json(const struct mcp_tool *t)
{
    json_t *schema = json_loads(t->schema, 0, NULL);
    return json_pack("{s:s,s:s,s:o,s:{s:b,s:b}}", "name", t->name, "description", t->description,
                     "inputSchema", schema ? schema : json_object(), "annotations", "readOnlyHint",
                     !t->mutating, "destructiveHint", t->mutating);
}

static void mcp_tools_list(const struct mcp_server *s, const json_t *id)
{
    char reason[512];
    bool open = mcp_gate_check(s, reason, sizeof(reason)) == 0;
    json_t *tools = json_array();
    for (size_t i = 0; i < MCP_N_TOOLS; i++)
        if (!mcp_tools[i].mutating || open)
            json_array_append_new(tools, mcp_tool_json(&mcp_tools[i]));
    mcp_reply(id, json_pack("{s:o}", "tools", tools));
}

/* A tool result: the answer as text and as structuredContent. */
static json_t *mcp_result(json_t *answer, bool is_error)
{
    char *text = json_dumps(answer, JSON_COMPACT);
    json_t *r = json_pack("{s:[{s:s,s:s}],s:o,s:b}", "content", "type", "text", "text",
                          text ? text : "{}", "structuredContent", answer, "isError", is_error);
    free(text);
    return r;
}

/* Unknown argument names: -1 and the first in e. */
static int mcp_args_known(const struct mcp_tool *t, const json_t *args, struct mcp_arg_error *e)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)args, key, v)
    {
        bool known = false;
        for (size_t i = 0; t->args[i]; i++)
            known = known || strcmp(t->args[i], key) == 0;
        for (size_t i = 0; i < sizeof(t->uints) / sizeof(t->uints[0]) && t->uints[i].name; i++)
            known = known || strcmp(t->uints[i].name, key) == 0;
        if (!known) {
            snprintf(e->message, sizeof(e->message), "%s: %.64s is not an argument of this tool",
                     t->name, key);
            e->field = "arguments";
            return -1;
        }
    }
    return 0;
}

static void mcp_tools_call(const struct mcp_server *s, const json_t *id, const json_t *params)
{
    const json_t *name = json_object_get(params, "name"),
                 *args = json_object_get(params, "arguments");
    const struct mcp_tool *t = NULL;
    struct mcp_arg_error e = {.field = NULL};
    struct mcp_words w = {.n = 0};
    for (size_t i = 0; json_is_string(name) && i < MCP_N_TOOLS; i++)
        if (strcmp(mcp_tools[i].name, json_string_value(name)) == 0)
            t = &mcp_tools[i];
    if (!t) {
        char msg[160];
        snprintf(msg, sizeof(msg), "params.name: unknown tool %.64s",
                 json_is_string(name) ? json_string_value(name) : "(not a string)");
        mcp_reply_error(id, MCP_INVALID_PARAMS, msg, json_pack("{s:s}", "field", "name"));
        return;
    }
    json_t *empty = json_object();
    if (!args)
        args = empty;
    if (!json_is_object(args)) {
        snprintf(e.message, sizeof(e.message), "%s: params.arguments must be an object", t->name);
        e.field = "arguments";
    }
    if ((e.field || mcp_args_known(t, args, &e) != 0 || mcp_tool_words(t, args, &w, &e) != 0)) {
        json_t *data = json_pack("{s:s}", "field", e.field ? e.field : "arguments");
        if (e.limit)
            json_object_set_new(data, "limit", json_integer((json_int_t)e.limit));
        mcp_reply_error(id, MCP_INVALID_PARAMS, e.message, data);
        json_decref(empty);
        return;
    }
    json_decref(empty);
    char reason[512];
    if (t->mutating && mcp_gate_check(s, reason, sizeof(reason)) != 0) {
        mcp_reply(id, mcp_result(json_pack("{s:b,s:s}", "refused", 1, "reason", reason), true));
        return;
    }
    if (strcmp(t->name, "recent_errors") == 0) {
        bool is_error;
        json_t *answer = mcp_recent_errors(s, &is_error);
        mcp_reply(id, mcp_result(answer, is_error));
        return;
    }
    struct mcp_run r;
    mcp_child_run(s, w.v, w.n, &r);
    json_t *health = strcmp(t->name, "group_health") == 0 && r.exit_code == 0 && r.json
                         ? mcp_group_health(r.json)
                         : NULL;
    json_t *answer = health   ? health
                     : r.json ? json_incref(r.json)
                              : json_pack("{s:i,s:s,s:s}", "exit_code", r.exit_code, "stdout",
                                          r.out, "stderr", r.err);
    if (r.json && r.exit_code != 0 && r.err[0])
        json_object_set_new(answer, "stderr", json_string(r.err));
    mcp_reply(id, mcp_result(answer, r.exit_code != 0));
    mcp_run_clear(&r);
}

static void mcp_initialize(const json_t *id, const json_t *params)
{
    static const char *const versions[] = {"2024-11-05", "2025-03-26", MCP_PROTOCOL_LATEST};
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = MCP_PROTOCOL_LATEST;
    for (size_t i = 0; want && i < sizeof(versions) / sizeof(versions[0]); i++)
        if (strcmp(want, versions[i]) == 0)
            version = versions[i];
    mcp_reply(
        id,
        json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", version, "capabilities",
                  "tools", "listChanged", 0, "serverInfo", "name", "slotctl-mcp", "version",
                  SLOTD_VERSION_TEXT, "instructions",
                  "Read-only tools inspect the slotd cluster. The mutating tools "
                  "(transfer_leader, move_replica, drain_node, abort_task) are listed only while "
                  "the cluster state's feature operations_mcp is on and this server "
                  "runs as an admin user; each answers with the task it created "
                  "(follow it with the tasks tool)."));
}

/* One message: a request answers, a notification does not. */
static void mcp_message_handle(const struct mcp_server *s, const char *line)
{
    json_error_t jerr;
    json_t *m = json_loads(line, 0, &jerr);
    if (!m) {
        char msg[300];
        snprintf(msg, sizeof(msg), "parse error at column %d: %s", jerr.column, jerr.text);
        mcp_reply_error(NULL, MCP_PARSE_ERROR, msg, NULL);
        return;
    }
    const json_t *id = json_object_get(m, "id");
    const json_t *method = json_object_get(m, "method");
    const json_t *params = json_object_get(m, "params");
    if (!json_is_object(m) || !json_is_string(json_object_get(m, "jsonrpc")) ||
        strcmp(json_string_value(json_object_get(m, "jsonrpc")), "2.0") != 0 ||
        !json_is_string(method) || (id && !json_is_string(id) && !json_is_integer(id))) {
        mcp_reply_error(json_is_string(id) || json_is_integer(id) ? id : NULL, MCP_INVALID_REQUEST,
                        "invalid request: needs jsonrpc \"2.0\", a string method and a string or "
                        "integer id",
                        NULL);
        json_decref(m);
        return;
    }
    const char *name = json_string_value(method);
    if (!id) { /* notifications (initialized, cancelled, ...): nothing to answer */
        json_decref(m);
        return;
    }
    if (params && !json_is_object(params))
        mcp_reply_error(id, MCP_INVALID_PARAMS, "params: must be an object",
                        json_pack("{s:s}", "field", "params"));
    else if (strcmp(name, "initialize") == 0)
        mcp_initialize(id, params);
    else if (strcmp(name, "ping") == 0)
        mcp_reply(id, json_object());
    else if (strcmp(name, "tools/list") == 0)
        mcp_tools_list(s, id);
    else if (strcmp(name, "tools/call") == 0)
        mcp_tools_call(s, id, params);
    else {
        char msg[160];
        snprintf(msg, sizeof(msg), "method not found: %.64s", name);
        mcp_reply_error(id, MCP_METHOD_NOT_FOUND, msg, NULL);
    }
    json_decref(m);
}

int slotctl_mcp_run(const struct slotctl_args *a)
{
    struct mcp_server s = {.a = a};
    ssize_t n = readlink("/proc/self/exe", s.self, sizeof(s.self) - 1);
    if (n <= 0) {
        fprintf(stderr, "slotctl mcp: cannot find slotctl's own path\n");
        return SLOTCTL_EXIT_OTHER;
    }
    s.self[n] = '\0';
    signal(SIGPIPE, SIG_IGN);
    char *line = malloc(MCP_LINE_BYTES_MAX + 2);
    if (!line) {
        fprintf(stderr, "slotctl mcp: out of memory\n");
        return SLOTCTL_EXIT_OTHER;
    }
    bool skipping = false; /* inside a line longer than the bound */
    while (fgets(line, MCP_LINE_BYTES_MAX + 2, stdin)) {
        size_t len = strlen(line);
        bool whole = len > 0 && line[len - 1] == '\n';
        if (!whole && len > MCP_LINE_BYTES_MAX) {
            if (!skipping) {
                char msg[128];
                snprintf(msg, sizeof(msg), "message longer than %d bytes: not read",
                         MCP_LINE_BYTES_MAX);
                mcp_reply_error(
                    NULL, MCP_INVALID_REQUEST, msg,
                    json_pack("{s:s,s:i}", "field", "message", "limit", MCP_LINE_BYTES_MAX));
            }
            skipping = true;
            continue;
        }
        if (skipping) { /* the tail of the long line */
            skipping = !whole;
            continue;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len > 0)
            mcp_message_handle(&s, line);
    }
    free(line);
    return SLOTCTL_EXIT_OK;
}
