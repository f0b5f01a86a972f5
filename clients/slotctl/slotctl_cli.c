/* slotctl_cli.c - slotctl's argument parser, --help text and exit-code mapping. */
#include "call.h"
#include "slotctl_cli.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A usage error: the message into err, exit code SLOTCTL_EXIT_USAGE. */
#define cli_fail(err, errlen, ...) slotd_call_fail(err, errlen, SLOTCTL_EXIT_USAGE, __VA_ARGS__)

/* Parses a decimal in [min, max]; false when s is not one (slotctl_num.c). */
static bool cli_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    return slotctl_uint_parse(s, min, max, out);
}

bool slotctl_lease_id_parse(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
        return false;
    bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    if (hex && (!s[2] || !isxdigit((unsigned char)s[2])))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(hex ? s + 2 : s, &end, hex ? 16 : 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* Seconds with at most 3 decimals ("2", "0.5") as milliseconds; -1 when s is not one. */
static int cli_seconds_ms(const char *s)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long whole = strtoull(s, &end, 10);
    if (errno || whole > SLOTCTL_LEASE_INTERVAL_MS_MAX / 1000)
        return -1;
    int ms = (int)whole * 1000;
    if (*end == '.') {
        int scale = 100;
        for (end++; isdigit((unsigned char)*end) && scale > 0; end++, scale /= 10)
            ms += (*end - '0') * scale;
        if (scale == 100 && !isdigit((unsigned char)end[-1]))
            return -1; /* "2." */
    }
    return *end ? -1 : ms;
}

static const struct {
    const char *name;
    enum slotctl_cmd cmd;
    int pos_min, pos_max;
} cli_cmds[] = {
    {"put", SLOTCTL_CMD_PUT, 2, 2},
    {"get", SLOTCTL_CMD_GET, 0, 1}, /* get KEY | get --prefix P */
    {"delete", SLOTCTL_CMD_DELETE, 1, 1},
    {"cas", SLOTCTL_CMD_CAS, 2, 3},
    {"route", SLOTCTL_CMD_ROUTE, 0, 0},
    {"cluster", SLOTCTL_CMD_CLUSTER, 0, 0},
    {"health", SLOTCTL_CMD_HEALTH, 0, 0},
    {"bench", SLOTCTL_CMD_BENCH, 0, 0},
    {"transfer-leader", SLOTCTL_CMD_TRANSFER_LEADER, 0, 0},
    {"join", SLOTCTL_CMD_JOIN, 0, 0},
    {"activate", SLOTCTL_CMD_ACTIVATE, 0, 0},
    {"move-replica", SLOTCTL_CMD_MOVE_REPLICA, 0, 0},
    {"drain", SLOTCTL_CMD_DRAIN, 0, 0},
    {"promote", SLOTCTL_CMD_PROMOTE, 0, 0},
    {"retry", SLOTCTL_CMD_RETRY, 0, 0},
    {"abort", SLOTCTL_CMD_ABORT, 0, 0},
    {"migrate-slots", SLOTCTL_CMD_MIGRATE_SLOTS, 0, 0},
    {"task", SLOTCTL_CMD_TASK_STATUS, 1, 2}, /* task status [TASK_ID] */
    {"status", SLOTCTL_CMD_STATUS, 0, 0},
    {"user", SLOTCTL_CMD_USER, 1, 3},       /* user SUB [NAME [ROLE]] */
    {"role", SLOTCTL_CMD_ROLE, 1, 5},       /* role SUB [NAME [TYPE ACCESS [VALUE]]] */
    {"feature", SLOTCTL_CMD_FEATURE, 1, 3}, /* feature list | feature set NAME on|off */
    {"watch", SLOTCTL_CMD_WATCH, 0, 1},     /* watch KEY | watch --prefix P */
    {"txn", SLOTCTL_CMD_TXN, 0, 0},
    {"lease", SLOTCTL_CMD_LEASE, 2, 3},     /* lease grant KEY TTL | lease keepalive|revoke ID */
    {"mcp", SLOTCTL_CMD_MCP, 0, 0},         /* mcp [--metrics URL,URL] */
    {"backup", SLOTCTL_CMD_BACKUP, 2, 5},   /* backup save|verify|inspect FILE, backup plan */
    {"balance", SLOTCTL_CMD_BALANCE, 1, 1}, /* balance status|on|off */
    {"remove-node", SLOTCTL_CMD_REMOVE_NODE, 0, 0},
    {"demote", SLOTCTL_CMD_DEMOTE, 0, 0},
};

#define CLI_N_CMDS (sizeof(cli_cmds) / sizeof(cli_cmds[0]))

/* The name a command is called by in messages ("task status" for the task command). */
static const char *cli_cmd_word(enum slotctl_cmd cmd)
{
    if (cmd == SLOTCTL_CMD_TASK_STATUS)
        return "task status";
    if (cmd == SLOTCTL_CMD_LEASE_GRANT)
        return "lease grant";
    if (cmd == SLOTCTL_CMD_LEASE_KEEPALIVE)
        return "lease keepalive";
    if (cmd == SLOTCTL_CMD_LEASE_REVOKE)
        return "lease revoke";
    for (size_t k = 0; k < CLI_N_CMDS; k++)
        if (cli_cmds[k].cmd == cmd)
            return cli_cmds[k].name;
    return "";
}

/* Parses one item of a hash slot list ("7" or "10-12") into [*first, *last]. */
static int cli_slot_item(const char *item, const char *list, uint64_t *first, uint64_t *last,
                         char *err, size_t errlen)
{
    char buf[48];
    if (!*item)
        return cli_fail(err, errlen, "--slots: empty item in '%s' (give e.g. 3,7,10-12)", list);
    if (strlen(item) >= sizeof(buf))
        return cli_fail(err, errlen, "--slots: '%.20s...' is not a hash slot or range", item);
    snprintf(buf, sizeof(buf), "%s", item);
    char *dash = strchr(buf, '-');
    if (dash)
        *dash = '\0';
    if (!cli_uint(buf, 0, UINT64_MAX, first) || (dash && !cli_uint(dash + 1, 0, UINT64_MAX, last)))
        return cli_fail(err, errlen,
                        "--slots: '%s' is not a hash slot (0..%d) or a range FIRST-LAST", item,
                        SLOTD_HASH_SLOTS - 1);
    if (!dash)
        *last = *first;
    uint64_t bad = *first >= SLOTD_HASH_SLOTS ? *first : *last;
    if (bad >= SLOTD_HASH_SLOTS)
        return cli_fail(err, errlen, "--slots: hash slot %" PRIu64 " is out of range 0..%d", bad,
                        SLOTD_HASH_SLOTS - 1);
    if (*first > *last)
        return cli_fail(err, errlen, "--slots: range '%s' runs backwards (FIRST > LAST)", item);
    return 0;
}

int slotctl_slots_parse(const char *s, uint32_t *out, unsigned *count, char *err, size_t errlen)
{
    bool seen[SLOTD_HASH_SLOTS] = {false};
    *count = 0;
    if (!s || !*s)
        return cli_fail(err, errlen, "--slots: empty (give e.g. 3,7,10-12)");
    /* at most one item per character: the loop is bounded by strlen(s) */
    for (const char *p = s;; p++) {
        size_t n = strcspn(p, ",");
        char item[64];
        snprintf(item, sizeof(item), "%.*s", (int)(n < sizeof(item) - 1 ? n : sizeof(item) - 1), p);
        uint64_t first = 0, last = 0;
        if (cli_slot_item(item, s, &first, &last, err, errlen) != 0)
            return SLOTCTL_EXIT_USAGE;
        for (uint64_t v = first; v <= last; v++) {
            if (seen[v])
                return cli_fail(err, errlen, "--slots: hash slot %" PRIu64 " given twice", v);
            seen[v] = true;
        }
        p += n;
        if (*p == '\0')
            break;
    }
    for (uint32_t v = 0; v < SLOTD_HASH_SLOTS; v++)
        if (seen[v])
            out[(*count)++] = v;
    return SLOTCTL_EXIT_OK;
}

const char *slotctl_consistency_name(int consistency)
{
    switch (consistency) {
    case SLOTD_CONSISTENCY_LEADER_LOCAL:
        return "leader-local";
    case SLOTD_CONSISTENCY_LOCAL:
        return "local";
    default:
        return "linearizable";
    }
}

static int cli_consistency(const char *s, int *out)
{
    for (int c = SLOTD_CONSISTENCY_LINEARIZABLE; c <= SLOTD_CONSISTENCY_LOCAL; c++)
        if (s && strcmp(s, slotctl_consistency_name(c)) == 0) {
            *out = c;
            return 0;
        }
    return -1;
}

/* The number options of the admin and task commands: the range, where the value goes (a field
 * of struct slotctl_args that is a uint32_t, an int or a uint64_t: size) and the words of the
 * refusal, "OPT: 'VAL' is not WHAT" with " in MIN..MAX" after WHAT when range is set. */
#define CLI_NUM(opt, field, min, max, what, range)                                                 \
    {                                                                                              \
        opt, offsetof(struct slotctl_args, field), sizeof(((struct slotctl_args *)0)->field), min, \
            max, what, range                                                                       \
    }
static const struct cli_num_option {
    const char *opt;
    size_t offset, size;
    uint64_t min, max;
    const char *what;
    bool range;
} cli_num_options[] = {
    CLI_NUM("--group", group_id, 1, UINT32_MAX, "a group id", true),
    CLI_NUM("--task", task_id, 1, UINT64_MAX, "a task id (an integer >= 1)", false),
    CLI_NUM("--to-group", to_group, 1, UINT32_MAX, "a group id", true),
    CLI_NUM("--interval-ms", interval_ms, SLOTCTL_INTERVAL_MS_MIN, SLOTCTL_INTERVAL_MS_MAX,
            "an integer", true),
    CLI_NUM("--timeout", timeout_s, 1, SLOTCTL_WAIT_S_MAX, "a number of seconds", true),
    CLI_NUM("--expected-revision", expected_revision, 1, UINT64_MAX, "an integer >= 1", false),
    CLI_NUM("--wait", wait_s, 1, SLOTCTL_WAIT_S_MAX, "a number of seconds", true),
    CLI_NUM("--weight", weight, 1, SLOTCTL_WEIGHT_MAX, "an integer", true),
};
_Static_assert(sizeof(int) == sizeof(uint32_t), "4-byte number options are uint32_t or int");

/* Parses val for o into a (a value <= o->max fits the field: int fields have max <= INT_MAX). */
static int cli_num_option_set(const struct cli_num_option *o, const char *val,
                              struct slotctl_args *a, char *err, size_t errlen)
{
    uint64_t n;
    if (!cli_uint(val, o->min, o->max, &n)) {
        if (!o->range)
            return cli_fail(err, errlen, "%s: '%s' is not %s", o->opt, val, o->what);
        return cli_fail(err, errlen, "%s: '%s' is not %s in %" PRIu64 "..%" PRIu64, o->opt, val,
                        o->what, o->min, o->max);
    }
    uint32_t n32 = (uint32_t)n;
    memcpy((char *)a + o->offset, o->size == sizeof(n) ? (void *)&n : (void *)&n32, o->size);
    return 0;
}

/* The value options of the admin and task commands (val is the option's value). */
static int cli_admin_option(const char *opt, const char *val, struct slotctl_args *a, char *err,
                            size_t errlen)
{
    for (size_t i = 0; i < sizeof(cli_num_options) / sizeof(cli_num_options[0]); i++)
        if (strcmp(opt, cli_num_options[i].opt) == 0)
            return cli_num_option_set(&cli_num_options[i], val, a, err, errlen);
    uint64_t n;
    if (strcmp(opt, "--to") == 0 || strcmp(opt, "--from") == 0 || strcmp(opt, "--node-id") == 0 ||
        strcmp(opt, "--node") == 0) {
        if (!cli_uint(val, 1, UINT64_MAX, &n))
            return cli_fail(err, errlen, "%s: '%s' is not a node id (an integer >= 1)", opt, val);
        if (strcmp(opt, "--to") == 0) {
            a->to_node = n;
        } else if (strcmp(opt, "--from") == 0) {
            a->from_node = n;
        } else {
            a->node_id = n;
            a->node_opt = strcmp(opt, "--node") == 0 ? "--node" : "--node-id";
        }
    } else if (strcmp(opt, "--slots") == 0) {
        return slotctl_slots_parse(val, a->hash_slots, &a->hash_slot_count, err, errlen);
    } else if (strcmp(opt, "--address") == 0) {
        if (!*val || strlen(val) > SLOTD_ADDRESS_LEN || strchr(val, ','))
            return cli_fail(err, errlen, "--address: '%s' is not one host:port of 1..%d bytes", val,
                            SLOTD_ADDRESS_LEN);
        a->address = val;
    } else {
        return cli_fail(err, errlen, "unknown option %s", opt);
    }
    return 0;
}

#define CLI_BIT(cmd) (UINT64_C(1) << (cmd))
_Static_assert(SLOTCTL_CMD_LAST < 64, "CLI_BIT masks hold every command");
#define CLI_TASK_MAKERS                                                                            \
    (CLI_BIT(SLOTCTL_CMD_MOVE_REPLICA) | CLI_BIT(SLOTCTL_CMD_DRAIN) |                              \
     CLI_BIT(SLOTCTL_CMD_PROMOTE) | CLI_BIT(SLOTCTL_CMD_RETRY) |                                   \
     CLI_BIT(SLOTCTL_CMD_MIGRATE_SLOTS))

/* "--x: only for a, b" naming the commands in mask (in enum order). */
static int cli_only_for(const char *opt, uint64_t mask, char *err, size_t errlen)
{
    char names[256] = "";
    size_t used = 0;
    for (int cmd = SLOTCTL_CMD_PUT; cmd <= SLOTCTL_CMD_LAST; cmd++)
        if (mask & CLI_BIT(cmd) && used < sizeof(names))
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "",
                                     cli_cmd_word((enum slotctl_cmd)cmd));
    return cli_fail(err, errlen, "%s: only for %s", opt, names);
}

/* Which admin and task options the command takes. */
static int cli_admin_allowed(const struct slotctl_args *a, char *err, size_t errlen)
{
    const uint64_t tl = CLI_BIT(SLOTCTL_CMD_TRANSFER_LEADER),
                   move = CLI_BIT(SLOTCTL_CMD_MOVE_REPLICA);
    const uint64_t join = CLI_BIT(SLOTCTL_CMD_JOIN), act = CLI_BIT(SLOTCTL_CMD_ACTIVATE);
    const uint64_t task = CLI_BIT(SLOTCTL_CMD_TASK_STATUS);
    bool node_id = a->node_id && strcmp(a->node_opt, "--node-id") == 0;
    const struct {
        const char *opt;
        bool given;
        uint64_t cmds;
    } opts[] = {
        {"--group", a->group_id != 0, tl | move},
        {"--to", a->to_node != 0, tl | move},
        {"--from", a->from_node != 0, move},
        {"--node-id", node_id, join | act},
        {"--node", a->node_id && !node_id,
         CLI_BIT(SLOTCTL_CMD_DRAIN) | CLI_BIT(SLOTCTL_CMD_PROMOTE) |
             CLI_BIT(SLOTCTL_CMD_REMOVE_NODE) | CLI_BIT(SLOTCTL_CMD_DEMOTE)},
        {"--address", a->address != NULL, join},
        {"--weight", a->weight != 0, join},
        {"--expected-revision", a->expected_revision != 0,
         tl | join | act | CLI_TASK_MAKERS | CLI_BIT(SLOTCTL_CMD_FEATURE) |
             CLI_BIT(SLOTCTL_CMD_ABORT) | CLI_BIT(SLOTCTL_CMD_BALANCE) |
             CLI_BIT(SLOTCTL_CMD_REMOVE_NODE) | CLI_BIT(SLOTCTL_CMD_DEMOTE)},
        {"--wait", a->wait_s != 0, tl | CLI_TASK_MAKERS},
        {"--as-task", a->as_task, tl},
        {"--task", a->task_id != 0, CLI_BIT(SLOTCTL_CMD_RETRY) | CLI_BIT(SLOTCTL_CMD_ABORT)},
        {"--slots", a->hash_slot_count != 0, CLI_BIT(SLOTCTL_CMD_MIGRATE_SLOTS)},
        {"--to-group", a->to_group != 0, CLI_BIT(SLOTCTL_CMD_MIGRATE_SLOTS)},
        {"--active", a->active_only, task},
        {"--watch", a->watch, task},
        {"--interval-ms", a->interval_ms != 0, task},
        {"--timeout", a->timeout_s != 0, task | CLI_BIT(SLOTCTL_CMD_WATCH)},
        {"--prefix", a->has_prefix, CLI_BIT(SLOTCTL_CMD_GET) | CLI_BIT(SLOTCTL_CMD_WATCH)},
        {"--limit", a->limit != 0, CLI_BIT(SLOTCTL_CMD_GET)},
        {"--count-only", a->count_only, CLI_BIT(SLOTCTL_CMD_GET)},
        {"--keys-only", a->keys_only, CLI_BIT(SLOTCTL_CMD_GET) | CLI_BIT(SLOTCTL_CMD_WATCH)},
        {"--resume", a->resume != NULL, CLI_BIT(SLOTCTL_CMD_WATCH)},
        {"--count", a->count != 0,
         CLI_BIT(SLOTCTL_CMD_WATCH) | CLI_BIT(SLOTCTL_CMD_LEASE_KEEPALIVE)},
        {"--interval", a->lease_interval_ms != 0, CLI_BIT(SLOTCTL_CMD_LEASE_KEEPALIVE)},
        {"--lease", a->has_lease, CLI_BIT(SLOTCTL_CMD_PUT)},
        {"--user-rows, --channel-rows and --subscribers", a->typed_kind != 0,
         CLI_BIT(SLOTCTL_CMD_WATCH)},
    };
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
        if (opts[i].given && !(opts[i].cmds & CLI_BIT(a->cmd)))
            return cli_only_for(opts[i].opt, opts[i].cmds, err, errlen);
    return 0;
}

/* task status [TASK_ID] [--active] [--watch [--interval-ms N] [--timeout S]] */
static int cli_task_check(struct slotctl_args *a, char *err, size_t errlen)
{
    uint64_t n;
    if (strcmp(a->pos[0], "status") != 0)
        return cli_fail(err, errlen, "task: unknown subcommand '%s' (try: task status [TASK_ID])",
                        a->pos[0]);
    if (a->pos_count == 2) {
        if (!cli_uint(a->pos[1], 1, UINT64_MAX, &n))
            return cli_fail(err, errlen, "task status: '%s' is not a task id (an integer >= 1)",
                            a->pos[1]);
        a->task_id = n;
    }
    if (a->active_only && a->task_id)
        return cli_fail(err, errlen, "--active: only when listing (no TASK_ID)");
    if (a->watch && !a->task_id)
        return cli_fail(err, errlen, "task status --watch: needs a TASK_ID");
    if ((a->interval_ms || a->timeout_s) && !a->watch)
        return cli_fail(err, errlen, "--interval-ms and --timeout: only with --watch");
    return 0;
}

/* Which admin options the command takes, and the ones it needs. */
static int cli_admin_check(struct slotctl_args *a, char *err, size_t errlen)
{
    if (cli_admin_allowed(a, err, errlen) != 0)
        return SLOTCTL_EXIT_USAGE;
    switch (a->cmd) {
    case SLOTCTL_CMD_TRANSFER_LEADER:
        if (!a->group_id || !a->to_node)
            return cli_fail(err, errlen, "transfer-leader: needs --group G and --to NODE");
        break;
    case SLOTCTL_CMD_JOIN:
        if (!a->node_id || !a->address)
            return cli_fail(err, errlen, "join: needs --node-id N and --address HOST:PEER_PORT");
        break;
    case SLOTCTL_CMD_ACTIVATE:
        if (!a->node_id)
            return cli_fail(err, errlen, "activate: needs --node-id N");
        break;
    case SLOTCTL_CMD_MOVE_REPLICA:
        if (!a->group_id || !a->from_node || !a->to_node)
            return cli_fail(err, errlen, "move-replica: needs --group G, --from N and --to M");
        break;
    case SLOTCTL_CMD_DRAIN:
    case SLOTCTL_CMD_PROMOTE:
    case SLOTCTL_CMD_REMOVE_NODE:
    case SLOTCTL_CMD_DEMOTE:
        if (!a->node_id)
            return cli_fail(err, errlen, "%s: needs --node N", cli_cmd_word(a->cmd));
        break;
    case SLOTCTL_CMD_RETRY:
    case SLOTCTL_CMD_ABORT:
        if (!a->task_id)
            return cli_fail(err, errlen, "%s: needs --task T", cli_cmd_word(a->cmd));
        break;
    case SLOTCTL_CMD_MIGRATE_SLOTS:
        if (!a->hash_slot_count || !a->to_group)
            return cli_fail(err, errlen, "migrate-slots: needs --slots LIST and --to-group G");
        break;
    case SLOTCTL_CMD_TASK_STATUS:
        return cli_task_check(a, err, errlen);
    case SLOTCTL_CMD_GET:
    case SLOTCTL_CMD_WATCH:
        if (a->typed_kind && (a->has_prefix || a->pos_count))
            return cli_fail(err, errlen,
                            "watch: a typed watch (--user-rows, --channel-rows, "
                            "--subscribers) takes no KEY or --prefix");
        if (a->typed_kind)
            break;
        if (a->has_prefix == (a->pos_count == 1))
            return cli_fail(err, errlen, "%s: give KEY or --prefix P (one of them)",
                            cli_cmd_word(a->cmd));
        if (a->cmd == SLOTCTL_CMD_GET && !a->has_prefix &&
            (a->limit || a->keys_only || a->count_only))
            return cli_fail(err, errlen,
                            "--limit, --keys-only and --count-only: only with "
                            "get --prefix");
        if (a->cmd == SLOTCTL_CMD_GET && a->has_prefix && a->min_applied_index)
            return cli_fail(err, errlen, "--min-applied-index: only for get KEY");
        if (a->keys_only && a->count_only)
            return cli_fail(err, errlen, "--keys-only and --count-only: give one");
        break;
    case SLOTCTL_CMD_FEATURE: {
        bool list = a->pos_count == 1 && strcmp(a->pos[0], "list") == 0;
        bool set = a->pos_count == 3 && strcmp(a->pos[0], "set") == 0 &&
                   (strcmp(a->pos[2], "on") == 0 || strcmp(a->pos[2], "off") == 0);
        if (!list && !set)
            return cli_fail(err, errlen, "feature: usage: feature list | feature set NAME on|off");
        if (list && a->expected_revision)
            return cli_fail(err, errlen, "--expected-revision: only for feature set");
        break;
    }
    case SLOTCTL_CMD_BALANCE:
        if (a->expected_revision && strcmp(a->pos[0], "status") == 0)
            return cli_fail(err, errlen, "--expected-revision: only for balance on|off");
        break;
    default:
        break;
    }
    return 0;
}

/* Handles option argv[*i] (value options consume argv[*i + 1]). */
static int cli_option(int argc, char **argv, int *i, struct slotctl_args *a, char *err,
                      size_t errlen)
{
    const char *opt = argv[*i];
    const char *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    uint64_t n;
    if (strcmp(opt, "--json") == 0) {
        a->json = true;
        return 0;
    }
    if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
        a->help = true;
        return 0;
    }
    if (strcmp(opt, "--version") == 0) {
        a->version = true;
        return 0;
    }
    if (strcmp(opt, "--delete") == 0) {
        a->cas_delete = true;
        return 0;
    }
    if (strcmp(opt, "--keys-only") == 0 || strcmp(opt, "--count-only") == 0) {
        *(strcmp(opt, "--keys-only") == 0 ? &a->keys_only : &a->count_only) = true;
        return 0;
    }
    if (strcmp(opt, "--as-task") == 0 || strcmp(opt, "--active") == 0 ||
        strcmp(opt, "--watch") == 0) {
        *(strcmp(opt, "--as-task") == 0  ? &a->as_task
          : strcmp(opt, "--active") == 0 ? &a->active_only
                                         : &a->watch) = true;
        return 0;
    }
    if (!val)
        return cli_fail(err, errlen, "%s: needs a value", opt);
    (*i)++;
    if (strcmp(opt, "--endpoints") == 0) {
        if (!*val)
            return cli_fail(err, errlen, "--endpoints: empty");
        a->endpoints = val;
    } else if (strcmp(opt, "--deadline-ms") == 0) {
        if (!cli_uint(val, 1, SLOTD_CLIENT_DEADLINE_MS_MAX, &n))
            return cli_fail(err, errlen, "--deadline-ms: '%s' is not an integer in 1..%d", val,
                            SLOTD_CLIENT_DEADLINE_MS_MAX);
        a->deadline_ms = (int)n;
    } else if (strcmp(opt, "--max-retries") == 0) {
        if (!cli_uint(val, 0, SLOTD_CLIENT_MAX_RETRIES_MAX, &n))
            return cli_fail(err, errlen, "--max-retries: '%s' is not an integer in 0..%d", val,
                            SLOTD_CLIENT_MAX_RETRIES_MAX);
        a->max_retries = n == 0 ? -1 : (int)n;
    } else if (strcmp(opt, "--tls-ca") == 0 || strcmp(opt, "--tls-cert") == 0 ||
               strcmp(opt, "--tls-key") == 0 || strcmp(opt, "--tls-server-name") == 0) {
        if (!*val)
            return cli_fail(err, errlen, "%s: empty", opt);
        const char **field = strcmp(opt, "--tls-ca") == 0     ? &a->tls_ca
                             : strcmp(opt, "--tls-cert") == 0 ? &a->tls_cert
                             : strcmp(opt, "--tls-key") == 0  ? &a->tls_key
                                                              : &a->tls_server_name;
        *field = val;
    } else if (strcmp(opt, "--metrics") == 0) {
        if (!*val)
            return cli_fail(err, errlen, "--metrics: empty");
        a->metrics_urls = val;
    } else if (strcmp(opt, "--user") == 0 || strcmp(opt, "--password-file") == 0 ||
               strcmp(opt, "--new-password-file") == 0) {
        if (!*val)
            return cli_fail(err, errlen, "%s: empty", opt);
        *(strcmp(opt, "--user") == 0            ? &a->user
          : strcmp(opt, "--password-file") == 0 ? &a->password_file
                                                : &a->new_password_file) = val;
    } else if (strcmp(opt, "--consistency") == 0) {
        if (cli_consistency(val, &a->consistency) != 0)
            return cli_fail(err, errlen,
                            "--consistency: '%s' is not linearizable, leader-local "
                            "or local",
                            val);
    } else if (strcmp(opt, "--prefix") == 0) {
        a->prefix = val;
        a->has_prefix = true;
    } else if (strcmp(opt, "--limit") == 0 || strcmp(opt, "--count") == 0) {
        if (!cli_uint(val, 1, SLOTCTL_LIMIT_MAX, &n))
            return cli_fail(err, errlen, "%s: '%s' is not an integer in 1..%d", opt, val,
                            SLOTCTL_LIMIT_MAX);
        *(strcmp(opt, "--limit") == 0 ? &a->limit : &a->count) = n;
    } else if (strcmp(opt, "--user-rows") == 0 || strcmp(opt, "--channel-rows") == 0 ||
               strcmp(opt, "--subscribers") == 0) {
        if (!*val)
            return cli_fail(err, errlen, "%s: empty", opt);
        if (a->typed_kind)
            return cli_fail(err, errlen,
                            "%s: give one of --user-rows, --channel-rows and "
                            "--subscribers",
                            opt);
        a->typed_kind = strcmp(opt, "--user-rows") == 0      ? SLOTD_TYPED_WATCH_USER
                        : strcmp(opt, "--channel-rows") == 0 ? SLOTD_TYPED_WATCH_CHANNEL
                                                             : SLOTD_TYPED_WATCH_SUBSCRIBERS;
        a->typed_id = val;
    } else if (strcmp(opt, "--resume") == 0) {
        if (!*val || strlen(val) > SLOTCTL_RESUME_MAX)
            return cli_fail(err, errlen, "--resume: empty or longer than %d bytes",
                            SLOTCTL_RESUME_MAX);
        a->resume = val;
    } else if (strcmp(opt, "--min-applied-index") == 0) {
        if (!cli_uint(val, 0, UINT64_MAX, &n))
            return cli_fail(err, errlen, "--min-applied-index: '%s' is not an integer", val);
        a->min_applied_index = n;
    } else if (strcmp(opt, "--lease") == 0) {
        if (!slotctl_lease_id_parse(val, &a->lease_id))
            return cli_fail(err, errlen, "--lease: '%s' is not a lease id (decimal or 0x hex)",
                            val);
        a->has_lease = true;
    } else if (strcmp(opt, "--interval") == 0) {
        int ms = cli_seconds_ms(val);
        if (ms < SLOTCTL_LEASE_INTERVAL_MS_MIN || ms > SLOTCTL_LEASE_INTERVAL_MS_MAX)
            return cli_fail(err, errlen, "--interval: '%s' is not a number of seconds in %g..%d",
                            val, SLOTCTL_LEASE_INTERVAL_MS_MIN / 1000.0,
                            SLOTCTL_LEASE_INTERVAL_MS_MAX / 1000);
        a->lease_interval_ms = ms;
    } else {
        return cli_admin_option(opt, val, a, err, errlen);
    }
    return 0;
}

/* Records argv[i] as the command word or a positional argument. */
static int cli_word(const char *word, struct slotctl_args *a, char *err, size_t errlen)
{
    if (a->cmd == SLOTCTL_CMD_NONE) {
        for (size_t k = 0; k < CLI_N_CMDS; k++)
            if (strcmp(word, cli_cmds[k].name) == 0) {
                a->cmd = cli_cmds[k].cmd;
                return 0;
            }
        return cli_fail(err, errlen, "unknown command '%s'", word);
    }
    if (a->pos_count == SLOTCTL_POSITIONALS_MAX)
        return cli_fail(err, errlen, "too many arguments ('%s')", word);
    a->pos[a->pos_count++] = word;
    return 0;
}

#define CLI_LEASE_USAGE "lease grant KEY TTL | lease keepalive ID | lease revoke ID"

/* "lease SUB ARGS": the subcommand becomes a->cmd, its TTL and ID are parsed. */
static int cli_lease_resolve(struct slotctl_args *a, char *err, size_t errlen)
{
    const char *sub = a->pos[0];
    uint64_t n;
    if (strcmp(sub, "grant") == 0) {
        if (a->pos_count != 3)
            return cli_fail(err, errlen, "lease grant: usage: lease grant KEY TTL");
        if (!cli_uint(a->pos[2], 1, SLOTD_LEASE_TTL_MAX, &n))
            return cli_fail(err, errlen,
                            "lease grant: TTL '%s' is not a number of seconds in 1..%u", a->pos[2],
                            SLOTD_LEASE_TTL_MAX);
        a->cmd = SLOTCTL_CMD_LEASE_GRANT;
        a->ttl_seconds = (uint32_t)n;
        return 0;
    }
    bool keep = strcmp(sub, "keepalive") == 0 || strcmp(sub, "keep-alive") == 0;
    if (!keep && strcmp(sub, "revoke") != 0)
        return cli_fail(err, errlen, "lease: unknown subcommand '%s' (try: %s)", sub,
                        CLI_LEASE_USAGE);
    if (a->pos_count != 2)
        return cli_fail(err, errlen, "lease %s: usage: lease %s ID", keep ? "keepalive" : "revoke",
                        keep ? "keepalive" : "revoke");
    if (!slotctl_lease_id_parse(a->pos[1], &a->lease_id))
        return cli_fail(err, errlen, "lease %s: ID '%s' is not a lease id (decimal or 0x hex)",
                        keep ? "keepalive" : "revoke", a->pos[1]);
    a->cmd = keep ? SLOTCTL_CMD_LEASE_KEEPALIVE : SLOTCTL_CMD_LEASE_REVOKE;
    return 0;
}

/* Checks the positional count and option combinations of the parsed command. */
static int cli_check(struct slotctl_args *a, char *err, size_t errlen)
{
    for (size_t k = 0; k < CLI_N_CMDS; k++) {
        if (cli_cmds[k].cmd != a->cmd)
            continue;
        int min = cli_cmds[k].pos_min, max = cli_cmds[k].pos_max;
        if (a->cmd == SLOTCTL_CMD_CAS)
            min = max = a->cas_delete ? 2 : 3;
        if (a->cmd == SLOTCTL_CMD_TASK_STATUS && (a->pos_count < min || a->pos_count > max))
            return cli_fail(err, errlen, "task: usage: task status [TASK_ID]");
        if (a->cmd == SLOTCTL_CMD_BALANCE &&
            (a->pos_count != 1 || (strcmp(a->pos[0], "status") != 0 &&
                                   strcmp(a->pos[0], "on") != 0 && strcmp(a->pos[0], "off") != 0)))
            return cli_fail(err, errlen, "balance: usage: balance status|on|off");
        if (a->cmd == SLOTCTL_CMD_FEATURE && (a->pos_count < min || a->pos_count > max))
            return cli_fail(err, errlen, "feature: usage: feature list | feature set NAME on|off");
        if (a->cmd == SLOTCTL_CMD_LEASE && (a->pos_count < min || a->pos_count > max))
            return cli_fail(err, errlen, "lease: usage: %s", CLI_LEASE_USAGE);
        if (a->cmd == SLOTCTL_CMD_BACKUP && a->pos_count >= 1 && strcmp(a->pos[0], "plan") == 0) {
            bool set = a->pos_count == 5 && strcmp(a->pos[1], "set") == 0;
            bool other = a->pos_count == 2 &&
                         (strcmp(a->pos[1], "show") == 0 || strcmp(a->pos[1], "delete") == 0);
            if (!set && !other)
                return cli_fail(err, errlen,
                                "backup: usage: backup plan set INTERVAL_S DIR RETENTION | "
                                "backup plan show | backup plan delete");
            continue;
        }
        if (a->cmd == SLOTCTL_CMD_BACKUP &&
            (a->pos_count != 2 ||
             (strcmp(a->pos[0], "save") != 0 && strcmp(a->pos[0], "verify") != 0 &&
              strcmp(a->pos[0], "inspect") != 0)))
            return cli_fail(err, errlen, "backup: usage: backup save|verify|inspect FILE");
        if (a->pos_count < min || a->pos_count > max) {
            if (a->cmd != SLOTCTL_CMD_BENCH)
                return cli_fail(err, errlen, "%s: takes %d argument%s, got %d", cli_cmds[k].name,
                                max, max == 1 ? "" : "s", a->pos_count);
        }
    }
    if (a->cas_delete && a->cmd != SLOTCTL_CMD_CAS)
        return cli_fail(err, errlen, "--delete: only for cas");
    if (a->metrics_urls && a->cmd != SLOTCTL_CMD_MCP)
        return cli_fail(err, errlen, "--metrics: only for mcp");
    if (a->cmd == SLOTCTL_CMD_MCP && a->json)
        return cli_fail(err, errlen, "--json: not for mcp (it always speaks JSON-RPC)");
    if ((a->tls_cert == NULL) != (a->tls_key == NULL))
        return cli_fail(err, errlen, "--tls-cert and --tls-key: give both or neither");
    if (a->tls_server_name && !a->tls_ca && !a->tls_cert)
        return cli_fail(err, errlen, "--tls-server-name: needs --tls-ca or --tls-cert");
    if ((a->user == NULL) != (a->password_file == NULL))
        return cli_fail(err, errlen, "--user and --password-file: give both or neither");
    if (a->new_password_file && a->cmd != SLOTCTL_CMD_USER)
        return cli_fail(err, errlen, "--new-password-file: only for user add and user passwd");
    if (a->cmd == SLOTCTL_CMD_LEASE && cli_lease_resolve(a, err, errlen) != 0)
        return SLOTCTL_EXIT_USAGE;
    if (cli_admin_check(a, err, errlen) != 0)
        return SLOTCTL_EXIT_USAGE;
    uint64_t v;
    if (a->cmd == SLOTCTL_CMD_CAS && !cli_uint(a->pos[1], 0, UINT64_MAX, &v))
        return cli_fail(err, errlen, "cas: EXPECTED_VERSION '%s' is not an integer", a->pos[1]);
    return 0;
}

/* slotctl's own options, which a typed command leaves to the main parser (the ones taking a
 * value first). */
static const char *const cli_global_opts[] = {
    "--endpoints",       "--deadline-ms", "--max-retries",   "--tls-ca", "--tls-cert", "--tls-key",
    "--tls-server-name", "--user",        "--password-file", "--json",   "--help",     "-h",
};

/* A typed command from argv[i] (its noun) on: slotctl's own options go to cli_option, the rest
 * to slotctl_meta_parse. */
static int cli_meta_collect(int argc, char **argv, int i, struct slotctl_args *a, char *err,
                            size_t errlen)
{
    const char *words[SLOTCTL_META_ARGS_MAX];
    int n = 0;
    bool options_done = false;
    a->cmd = SLOTCTL_CMD_META;
    for (; i < argc; i++) {
        bool global = false;
        for (size_t k = 0; !options_done && k < sizeof(cli_global_opts) / sizeof(char *); k++)
            global = global || strcmp(argv[i], cli_global_opts[k]) == 0;
        if (global) {
            if (cli_option(argc, argv, &i, a, err, errlen) != 0)
                return SLOTCTL_EXIT_USAGE;
            continue;
        }
        if (strcmp(argv[i], "--") == 0)
            options_done = true;
        if (n == SLOTCTL_META_ARGS_MAX)
            return cli_fail(err, errlen, "%s: more than %d arguments", argv[0],
                            SLOTCTL_META_ARGS_MAX);
        words[n++] = argv[i];
    }
    if (a->help)
        return SLOTCTL_EXIT_OK;
    if (slotctl_meta_parse(n, words, &a->meta, err, errlen) != 0)
        return SLOTCTL_EXIT_USAGE;
    if ((a->tls_cert == NULL) != (a->tls_key == NULL))
        return cli_fail(err, errlen, "--tls-cert and --tls-key: give both or neither");
    if ((a->user == NULL) != (a->password_file == NULL))
        return cli_fail(err, errlen, "--user and --password-file: give both or neither");
    return SLOTCTL_EXIT_OK;
}

int slotctl_args_parse(int argc, char **argv, struct slotctl_args *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof(*a));
    const char *env = getenv("SLOTD_ENDPOINTS");
    a->endpoints = env && *env ? env : SLOTCTL_ENDPOINTS_DEFAULT;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (!options_done && strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (a->cmd == SLOTCTL_CMD_NONE && arg[0] != '-' && slotctl_meta_is_typed(argc, argv, i))
            return cli_meta_collect(argc, argv, i, a, err, errlen);
        if (!options_done && arg[0] == '-' && arg[1] != '\0')
            rc = cli_option(argc, argv, &i, a, err, errlen);
        else
            rc = cli_word(arg, a, err, errlen);
        if (rc != 0)
            return rc;
        if (a->cmd == SLOTCTL_CMD_BENCH) {
            a->bench_argc = argc - i - 1;
            a->bench_argv = argv + i + 1;
            return SLOTCTL_EXIT_OK;
        }
    }
    if (a->help || a->version)
        return SLOTCTL_EXIT_OK;
    if (a->cmd == SLOTCTL_CMD_NONE)
        return cli_fail(err, errlen, "no command given (try --help)");
    return cli_check(a, err, errlen);
}

int slotctl_exit_of(int client_err)
{
    switch (client_err) {
    case SLOTD_CLIENT_OK:
        return SLOTCTL_EXIT_OK;
    case SLOTD_CLIENT_ENOTFOUND:
        return SLOTCTL_EXIT_NOT_FOUND;
    case SLOTD_CLIENT_ECAS_MISMATCH:
    case SLOTD_CLIENT_EPRECONDITION:
    case SLOTD_CLIENT_ESTALE_REVISION:
        return SLOTCTL_EXIT_PRECONDITION;
    case SLOTD_CLIENT_EUNAVAILABLE:
    case SLOTD_CLIENT_ETIMEOUT:
    case SLOTD_CLIENT_EEXHAUSTED:
        return SLOTCTL_EXIT_UNAVAILABLE;
    case SLOTD_CLIENT_EINVAL:
        return SLOTCTL_EXIT_INVALID;
    default:
        return SLOTCTL_EXIT_OTHER;
    }
}

void slotctl_usage(FILE *out)
{
    fprintf(
        out,
        "usage: slotctl [--endpoints H:P,H:P] [--json] [--deadline-ms N] [--max-retries N]\n"
        "               [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name N]\n"
        "               COMMAND [ARGS]\n"
        "\n"
        "commands:\n"
        "  put KEY VALUE [--lease ID]          write KEY (new request id, retried safely);\n"
        "                                      --lease: KEY is deleted with lease ID (of\n"
        "                                      KEY's hash slot)\n"
        "  get KEY [--consistency C] [--min-applied-index N]\n"
        "                                      read KEY; C is linearizable (default),\n"
        "                                      leader-local or local\n"
        "  get --prefix P [--limit N] [--keys-only | --count-only] [--consistency C]\n"
        "                                      every key starting with P (\"\": all keys),\n"
        "                                      in hash-slot order, paged; --limit N: stop\n"
        "                                      after N entries\n"
        "  delete KEY                          remove KEY (no error when absent)\n"
        "  cas KEY EXPECTED_VERSION VALUE      write only if KEY's version is EXPECTED_VERSION\n"
        "  cas --delete KEY EXPECTED_VERSION   delete only if KEY's version matches (0 = absent)\n"
        "  txn                                 reads a txn from stdin: compares, a blank\n"
        "                                      line, success ops, a blank line, failure ops;\n"
        "                                      compares value(\"K\") = \"V\", version(\"K\") > "
        "\"N\"\n"
        "                                      (= != > <), exists(\"K\"), absent(\"K\"); ops\n"
        "                                      put K V, del K, get K (quotes optional);\n"
        "                                      prints SUCCESS or FAILURE (exit 3) and results\n"
        "  watch KEY | watch --prefix P [--resume TOKEN] [--count N] [--timeout S] [--keys-only]\n"
        "                                      prints changes as they commit (PUT/DELETE KEY\n"
        "                                      VALUE), resuming by itself after a node loss;\n"
        "                                      stops after N events (and the rest of their\n"
        "                                      message) or S s, then prints\n"
        "                                      \"RESUME TOKEN\" (GROUP:INDEX,...) to continue\n"
        "  watch --subscribers CHANNEL | --channel-rows CHANNEL | --user-rows UID [...]\n"
        "                                      typed rows instead of keys: a channel's\n"
        "                                      subscribers, every row of a channel or of a uid\n"
        "  lease grant KEY TTL                 a lease of TTL seconds (1..%u) in KEY's\n"
        "                                      hash slot (KEY is not written); prints its id\n"
        "  lease keepalive ID [--count N] [--interval S]\n"
        "                                      restart the lease's TTL (N times, every S s;\n"
        "                                      default once, S a third of the TTL)\n"
        "  lease revoke ID                     delete the lease and every key attached to it\n"
        "                                      (ID: decimal or 0x hex, as grant prints it)\n"
        "  route                               hash-slot ranges, their groups and leaders\n"
        "  cluster                             the controller's cluster state: nodes, groups\n"
        "                                      (observed vs preferred leaders), hash slots, tasks\n"
        "  health                              grpc.health.v1 status of every node\n"
        "  status                              every endpoint's own view of the controller\n"
        "                                      (role, term, indexes, revision, state file,\n"
        "                                      mirror lag, leader), all asked at once, and\n"
        "                                      where their revisions or leaders differ\n"
        "  transfer-leader --group G --to NODE [--expected-revision R] [--wait S] [--as-task]\n"
        "                                      make NODE G's preferred leader; --wait S polls\n"
        "                                      the route until NODE leads G (1..%d s);\n"
        "                                      --as-task: the TransferLeader task (--wait S\n"
        "                                      watches the task instead)\n"
        "  join --node-id N --address H:P [--weight W] [--expected-revision R]\n"
        "                                      register data node N (weight 1..%d)\n"
        "  activate --node-id N [--expected-revision R]\n"
        "                                      mark joined node N active (placement may follow)\n"
        "  move-replica --group G --from N --to M [--expected-revision R] [--wait S]\n"
        "                                      task: move G's replica from node N to node M\n"
        "  drain --node N [--wait S]           task: move every replica off N, mark it removed\n"
        "  promote --node N [--wait S]         task: make data node N a controller voter\n"
        "  remove-node --node N [--expected-revision R]\n"
        "                                      make down node N a tombstone (RemoveNode)\n"
        "  demote --node N [--expected-revision R]\n"
        "                                      make controller voter N a mirror\n"
        "  retry --task T [--wait S]           run failed task T again from its phase\n"
        "  abort --task T [--expected-revision R]\n"
        "                                      stop running task T at a safe point (it ends\n"
        "                                      failed; refused past one, naming its state)\n"
        "  migrate-slots --slots LIST --to-group G [--wait S]\n"
        "                                      task: move hash slots (e.g. 3,7,10-12) to G\n"
        "                                      (needs the cluster feature hash_slot_migration\n"
        "                                      on: feature set hash_slot_migration on)\n"
        "  backup save FILE                    one consistent backup of the cluster into FILE\n"
        "                                      (docs/backup-format.md; progress on stderr)\n"
        "  backup verify FILE                  offline: every checksum, the structure, counts\n"
        "                                      per group (exit 5 naming the bad record)\n"
        "  backup inspect FILE                 offline: header, groups, rows, sizes\n"
        "  balance status                      the balancer: score per node (replicas, share),\n"
        "                                      the moves it plans and why (the controller\n"
        "                                      leader's answer when an endpoint is the leader)\n"
        "  balance on|off [--expected-revision R]\n"
        "                                      resume or pause the balancer cluster-wide\n"
        "                                      (Admin.SetBalance)\n"
        "  backup plan set INTERVAL_S DIR RETENTION\n"
        "                                      the cluster's backup plan (Admin.SetBackupPlan):\n"
        "                                      every INTERVAL_S a node writes a file into DIR\n"
        "                                      and keeps RETENTION files\n"
        "  backup plan show | delete           the plan and its last runs / remove it\n"
        "  feature list                        the cluster state's features and their values\n"
        "  feature set NAME on|off [--expected-revision R]\n"
        "                                      switch a feature in the replicated cluster\n"
        "                                      state (Admin.SetFeature), for every node\n"
        "  task status [TASK_ID] [--active] [--watch [--interval-ms N] [--timeout S]]\n"
        "                                      one task, or every kept task (--active: pending\n"
        "                                      and running); --watch follows TASK_ID until done\n"
        "                                      or failed (poll every N ms, default %d; give up\n"
        "                                      after S s, default %d)\n"
        "                                      task commands take --expected-revision R too;\n"
        "                                      --wait S watches the new task up to S s\n"
        "  user add NAME --new-password-file F | user passwd NAME --new-password-file F\n"
        "  user delete NAME | user grant NAME ROLE | user revoke NAME ROLE | user list\n"
        "                                      users (servers started with --auth 1; ROLE may\n"
        "                                      be root); list shows users and roles\n"
        "  role add NAME | role delete NAME | role list\n"
        "  role grant NAME TYPE ACCESS [VALUE] | role revoke NAME TYPE ACCESS [VALUE]\n"
        "                                      TYPE key_prefix (VALUE the prefix), kind (VALUE\n"
        "                                      user, channel, conversation, cmd, runtime_meta,\n"
        "                                      migration_task, plugin, event, lease) or\n"
        "                                      admin;\n"
        "                                      ACCESS read, write or readwrite\n"
        "  typed metadata (CHANNEL always with --type N, 1..255; docs/api.md):\n"
        "  user create|update UID [--token T] [--device-flag N] [--device-level N]\n"
        "                     [--system on|off (update)] | user get UID\n"
        "  user delete UID --meta | user list --meta   (system uids)\n"
        "  device put UID FLAG [--token T] [--device-level N] | device list UID\n"
        "  device delete UID FLAG\n"
        "  channel create CHANNEL --type N [--flags ban,disband,send_ban,allow_stranger,large]\n"
        "                 [--event-capacity N] | channel get|delete CHANNEL --type N\n"
        "  channel flags CHANNEL --type N --flags F,F|none\n"
        "  channel list [--prefix P] [--type N]\n"
        "  member add|remove CHANNEL --type N UID... [--list subscribers|allow|deny]\n"
        "                 [--expected-version V]     (1..1000 uids, atomically)\n"
        "  member list CHANNEL --type N [--list L] | member check CHANNEL --type N UID [--list L]\n"
        "  conversation join UID CHANNEL --type N [--seq JOIN_SEQ] [--at-ms MS (default: now)]\n"
        "  conversation leave|get UID CHANNEL --type N | conversation list UID\n"
        "  conversation read|hide UID CHANNEL --type N --seq N\n"
        "  conversation activate UID CHANNEL --type N --at-ms MS\n"
        "  cmd bind|ack UID CHANNEL --type N [--seq N] | cmd unbind UID CHANNEL --type N\n"
        "  runtime get CHANNEL --type N | runtime list [--leader NODE]\n"
        "  runtime set CHANNEL --type N [--leader N --replicas N,N --isr N,N --channel-epoch N\n"
        "              --leader-epoch N --write-fence N --lease-until-ms MS --min-isr N\n"
        "              --status creating|active|deleting --features BITS\n"
        "              --retention-through-seq N --expect-channel-epoch N\n"
        "              --expect-leader-epoch N --expect-leader N]\n"
        "  plugin bind UID PLUGIN_NO | plugin get|unbind UID\n"
        "  event append CHANNEL --type N EVENT_TYPE [--message-seq N] [--payload TEXT]\n"
        "  event list CHANNEL --type N [--after-seq N]\n"
        "                                      listings follow every page (--limit N: stop\n"
        "                                      after N); deletes repeat while rows remain\n"
        "  bench ARGS...                       runs slotbench ARGS... from slotctl's directory\n"
        "  mcp [--metrics URL,URL]             an MCP server (JSON-RPC 2.0, one message a\n"
        "                                      line) on stdin/stdout: read-only tools, and\n"
        "                                      the mutating ones for an admin --user while\n"
        "                                      feature operations_mcp is on\n"
        "\n"
        "options:\n"
        "  --endpoints H:P,...   seed nodes, tried in turn (default $SLOTD_ENDPOINTS or %s)\n"
        "  --json                JSON on stdout: one object per command (--wait and\n"
        "                        --watch: one per change, then the result)\n"
        "  --deadline-ms N       deadline of each attempt (default %d)\n"
        "  --max-retries N       retries of retriable failures (default %d)\n"
        "  --tls-ca FILE         TLS: CA bundle PEM verifying the servers (default: plaintext)\n"
        "  --tls-cert FILE       TLS: client certificate PEM for servers requiring one (mTLS)\n"
        "  --tls-key FILE        TLS: private key PEM of --tls-cert\n"
        "  --tls-server-name N   TLS: name expected in the servers' certificates (default: host)\n"
        "  --user NAME --password-file F\n"
        "                        authenticate as NAME (password: F's first line) and send\n"
        "                        the token with every call (servers with --auth 1)\n"
        "  --version             print slotctl's version (git describe at build) and exit\n"
        "  --                    ends options (for keys or values starting with '-')\n"
        "\n"
        "exit codes:\n",
        SLOTD_LEASE_TTL_MAX, SLOTCTL_WAIT_S_MAX, SLOTCTL_WEIGHT_MAX, SLOTCTL_INTERVAL_MS_DEFAULT,
        SLOTCTL_WATCH_TIMEOUT_S_DEFAULT, SLOTCTL_ENDPOINTS_DEFAULT,
        SLOTD_CLIENT_DEADLINE_MS_DEFAULT, SLOTD_CLIENT_MAX_RETRIES_DEFAULT);
#define SLOTCTL__EXIT_HELP(name, value, text) fprintf(out, "  %d  %s\n", value, text);
    SLOTCTL_EXITS(SLOTCTL__EXIT_HELP)
#undef SLOTCTL__EXIT_HELP
}
