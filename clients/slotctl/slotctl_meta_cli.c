/* slotctl_meta_cli.c - the argument parser of slotctl's typed metadata commands (user, device,
 * channel, member, conversation, cmd, runtime, plugin, event). */
#include "call.h"
#include "slotctl_meta_cli.h"
#include "slotctl_num.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Positional kinds: U uid, C channel id, F device flag, P plugin number, E event type, K one uid
 * after the channel, M one or more uids (the rest). Options: " --a --b " (leading and trailing
 * space). A C needs --type. */
static const struct meta_cmd {
    const char *noun, *verb;
    enum slotctl_meta_verb id;
    const char *pos;
    const char *opts;
    const char *usage;
} meta_cmds[] = {
    {"user", "create", SLOTCTL_META_USER_CREATE, "U", " --token --device-flag --device-level ",
     "UID [--token T] [--device-flag N] [--device-level N]"},
    {"user", "get", SLOTCTL_META_USER_GET, "U", " ", "UID"},
    {"user", "update", SLOTCTL_META_USER_UPDATE, "U",
     " --token --device-flag --device-level --system ",
     "UID [--token T] [--device-flag N] [--device-level N] [--system on|off]"},
    {"user", "delete", SLOTCTL_META_USER_DELETE, "U", " --meta ", "UID --meta"},
    {"user", "list", SLOTCTL_META_USER_LIST, "", " --meta --limit ", "--meta [--limit N]"},
    {"device", "put", SLOTCTL_META_DEVICE_PUT, "UF", " --token --device-level ",
     "UID DEVICE_FLAG [--token T] [--device-level N]"},
    {"device", "list", SLOTCTL_META_DEVICE_LIST, "U", " --limit ", "UID [--limit N]"},
    {"device", "delete", SLOTCTL_META_DEVICE_DELETE, "UF", " ", "UID DEVICE_FLAG"},
    {"channel", "create", SLOTCTL_META_CHANNEL_CREATE, "C", " --type --flags --event-capacity ",
     "CHANNEL --type N [--flags F,F] [--event-capacity N]"},
    {"channel", "get", SLOTCTL_META_CHANNEL_GET, "C", " --type ", "CHANNEL --type N"},
    {"channel", "flags", SLOTCTL_META_CHANNEL_FLAGS, "C", " --type --flags ",
     "CHANNEL --type N --flags F,F|none"},
    {"channel", "delete", SLOTCTL_META_CHANNEL_DELETE, "C", " --type ", "CHANNEL --type N"},
    {"channel", "list", SLOTCTL_META_CHANNEL_LIST, "", " --type --prefix --limit ",
     "[--prefix P] [--type N] [--limit N]"},
    {"member", "add", SLOTCTL_META_MEMBER_ADD, "CM", " --type --list --expected-version ",
     "CHANNEL --type N UID... [--list subscribers|allow|deny] [--expected-version V]"},
    {"member", "remove", SLOTCTL_META_MEMBER_REMOVE, "CM", " --type --list --expected-version ",
     "CHANNEL --type N UID... [--list subscribers|allow|deny] [--expected-version V]"},
    {"member", "list", SLOTCTL_META_MEMBER_LIST, "C", " --type --list --limit ",
     "CHANNEL --type N [--list subscribers|allow|deny] [--limit N]"},
    {"member", "check", SLOTCTL_META_MEMBER_CHECK, "CK", " --type --list ",
     "CHANNEL --type N UID [--list subscribers|allow|deny]"},
    {"conversation", "join", SLOTCTL_META_CONV_JOIN, "UC", " --type --seq --at-ms ",
     "UID CHANNEL --type N [--seq JOIN_SEQ] [--at-ms MS (default: now)]"},
    {"conversation", "leave", SLOTCTL_META_CONV_LEAVE, "UC", " --type ", "UID CHANNEL --type N"},
    {"conversation", "read", SLOTCTL_META_CONV_READ, "UC", " --type --seq ",
     "UID CHANNEL --type N --seq READ_SEQ"},
    {"conversation", "hide", SLOTCTL_META_CONV_HIDE, "UC", " --type --seq ",
     "UID CHANNEL --type N --seq HIDE_THROUGH_SEQ"},
    {"conversation", "activate", SLOTCTL_META_CONV_ACTIVATE, "UC", " --type --at-ms ",
     "UID CHANNEL --type N --at-ms MS"},
    {"conversation", "get", SLOTCTL_META_CONV_GET, "UC", " --type ", "UID CHANNEL --type N"},
    {"conversation", "list", SLOTCTL_META_CONV_LIST, "U", " --limit ", "UID [--limit N]"},
    {"cmd", "bind", SLOTCTL_META_CMD_BIND, "UC", " --type --seq ",
     "UID CHANNEL --type N [--seq START_SEQ]"},
    {"cmd", "ack", SLOTCTL_META_CMD_ACK, "UC", " --type --seq ",
     "UID CHANNEL --type N --seq ACK_SEQ"},
    {"cmd", "unbind", SLOTCTL_META_CMD_UNBIND, "UC", " --type ", "UID CHANNEL --type N"},
    {"runtime", "get", SLOTCTL_META_RUNTIME_GET, "C", " --type ", "CHANNEL --type N"},
    {"runtime", "set", SLOTCTL_META_RUNTIME_SET, "C",
     " --type --leader --replicas --isr --channel-epoch --leader-epoch --write-fence "
     "--lease-until-ms --min-isr --status --features --retention-through-seq "
     "--expect-channel-epoch --expect-leader-epoch --expect-leader ",
     "CHANNEL --type N [--leader N --replicas N,N --isr N,N --channel-epoch N --leader-epoch N "
     "--write-fence N --lease-until-ms MS --min-isr N --status creating|active|deleting "
     "--features BITS --retention-through-seq N] [--expect-channel-epoch N "
     "--expect-leader-epoch N --expect-leader N]"},
    {"runtime", "list", SLOTCTL_META_RUNTIME_LIST, "", " --leader --limit ",
     "[--leader NODE] [--limit N]"},
    {"plugin", "bind", SLOTCTL_META_PLUGIN_BIND, "UP", " ", "UID PLUGIN_NO"},
    {"plugin", "get", SLOTCTL_META_PLUGIN_GET, "U", " ", "UID"},
    {"plugin", "unbind", SLOTCTL_META_PLUGIN_UNBIND, "U", " ", "UID"},
    {"event", "append", SLOTCTL_META_EVENT_APPEND, "CE", " --type --message-seq --payload ",
     "CHANNEL --type N EVENT_TYPE [--message-seq N] [--payload TEXT]"},
    {"event", "list", SLOTCTL_META_EVENT_LIST, "C", " --type --after-seq --limit ",
     "CHANNEL --type N [--after-seq N] [--limit N]"},
};

#define META_N_CMDS (sizeof(meta_cmds) / sizeof(meta_cmds[0]))

static const char *const meta_nouns[] = {"device", "channel", "member", "conversation",
                                         "cmd",    "runtime", "plugin", "event"};

static const struct {
    const char *name;
    uint32_t bit;
} meta_flag_names[] = {
    {"ban", SLOTD_CHANNEL_FLAG_BAN},
    {"disband", SLOTD_CHANNEL_FLAG_DISBAND},
    {"send_ban", SLOTD_CHANNEL_FLAG_SEND_BAN},
    {"allow_stranger", SLOTD_CHANNEL_FLAG_ALLOW_STRANGER},
    {"large", SLOTD_CHANNEL_FLAG_LARGE},
};

/* A refused argument: the message into err, -1. */
#define meta_fail(err, errlen, ...) slotd_call_fail(err, errlen, -1, __VA_ARGS__)

bool slotctl_meta_is_typed(int argc, char **argv, int i)
{
    for (size_t k = 0; k < sizeof(meta_nouns) / sizeof(meta_nouns[0]); k++)
        if (strcmp(argv[i], meta_nouns[k]) == 0)
            return true;
    if (strcmp(argv[i], "user") != 0 || i + 1 >= argc)
        return false;
    const char *sub = argv[i + 1];
    if (strcmp(sub, "create") == 0 || strcmp(sub, "get") == 0 || strcmp(sub, "update") == 0)
        return true;
    if (strcmp(sub, "delete") != 0 && strcmp(sub, "list") != 0)
        return false;
    for (int j = i + 2; j < argc && strcmp(argv[j], "--") != 0; j++)
        if (strcmp(argv[j], "--meta") == 0)
            return true;
    return false;
}

bool slotctl_meta_flags_parse(const char *s, uint32_t *out)
{
    *out = 0;
    if (strcmp(s, "none") == 0)
        return true;
    while (*s) {
        size_t n = strcspn(s, ",");
        bool known = false;
        for (size_t k = 0; k < sizeof(meta_flag_names) / sizeof(meta_flag_names[0]); k++)
            if (strlen(meta_flag_names[k].name) == n &&
                strncmp(s, meta_flag_names[k].name, n) == 0) {
                *out |= meta_flag_names[k].bit;
                known = true;
            }
        if (!known)
            return false;
        s += n;
        if (*s == ',' && *++s == '\0')
            return false;
    }
    return true;
}

void slotctl_meta_flags_name(uint32_t flags, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t k = 0; k < sizeof(meta_flag_names) / sizeof(meta_flag_names[0]); k++)
        if ((flags & meta_flag_names[k].bit) && used < len)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "," : "",
                                     meta_flag_names[k].name);
    if (!used)
        snprintf(out, len, "none");
}

/* "1,2,3" into out (at most SLOTCTL_META_NODES_MAX node ids). */
static bool meta_nodes(const char *s, uint64_t *out, size_t *count)
{
    *count = 0;
    if (!*s)
        return true;
    char buf[32];
    while (*s) {
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= sizeof(buf) || *count == SLOTCTL_META_NODES_MAX)
            return false;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (!slotctl_uint_parse(buf, 1, UINT64_MAX, &out[(*count)++]))
            return false;
        s += n;
        if (*s == ',' && *++s == '\0')
            return false;
    }
    return true;
}

/* Where a numeric option goes (NULL: not one), its bound and its "given" flag. */
static uint64_t *meta_num_slot(struct slotctl_meta_args *m, const char *opt, uint64_t *hi,
                               bool **given, bool *ignored)
{
    *hi = UINT64_MAX;
    *given = ignored; /* the options without a "given" flag write here */
    if (strcmp(opt, "--seq") == 0)
        return (*given = &m->has_seq, &m->seq);
    if (strcmp(opt, "--at-ms") == 0)
        return (*given = &m->has_at_ms, &m->at_ms);
    if (strcmp(opt, "--limit") == 0)
        return &m->limit;
    if (strcmp(opt, "--expected-version") == 0)
        return (*given = &m->has_expected_version, &m->expected_version);
    if (strcmp(opt, "--message-seq") == 0)
        return &m->message_seq;
    if (strcmp(opt, "--after-seq") == 0)
        return &m->after_seq;
    if (strcmp(opt, "--leader") == 0)
        return &m->leader;
    if (strcmp(opt, "--channel-epoch") == 0)
        return &m->channel_epoch;
    if (strcmp(opt, "--leader-epoch") == 0)
        return &m->leader_epoch;
    if (strcmp(opt, "--write-fence") == 0)
        return &m->write_fence;
    if (strcmp(opt, "--lease-until-ms") == 0)
        return &m->lease_until_ms;
    if (strcmp(opt, "--retention-through-seq") == 0)
        return &m->retention_through_seq;
    if (strcmp(opt, "--features") == 0)
        return &m->features;
    if (strcmp(opt, "--expect-channel-epoch") == 0)
        return &m->expect_channel_epoch;
    if (strcmp(opt, "--expect-leader-epoch") == 0)
        return &m->expect_leader_epoch;
    if (strcmp(opt, "--expect-leader") == 0)
        return &m->expect_leader;
    return NULL;
}

/* One option with its value (val may be NULL: missing). */
static int meta_option(const struct meta_cmd *cmd, const char *opt, const char *val,
                       struct slotctl_meta_args *m, char *err, size_t errlen)
{
    const char *name = m->name;
    uint64_t n, hi;
    bool *given, ignored;
    if (strcmp(opt, "--meta") == 0)
        return 0;
    if (!val)
        return meta_fail(err, errlen, "%s: %s: needs a value", name, opt);
    if (strcmp(opt, "--type") == 0) {
        if (!slotctl_uint_parse(val, 1, SLOTCTL_META_CHANNEL_TYPE_MAX, &n))
            return meta_fail(err, errlen, "%s: --type: '%s' is not a channel type in 1..%d", name,
                             val, SLOTCTL_META_CHANNEL_TYPE_MAX);
        m->channel_type = (uint32_t)n;
    } else if (strcmp(opt, "--device-flag") == 0 || strcmp(opt, "--device-level") == 0) {
        if (!slotctl_uint_parse(val, 0, SLOTCTL_META_DEVICE_MAX, &n))
            return meta_fail(err, errlen, "%s: %s: '%s' is not a number in 0..%d", name, opt, val,
                             SLOTCTL_META_DEVICE_MAX);
        *(opt[9] == 'f' ? &m->device_flag : &m->device_level) = (uint32_t)n;
        m->user_fields = true;
    } else if (strcmp(opt, "--token") == 0) {
        m->token = val;
        m->user_fields = true;
    } else if (strcmp(opt, "--system") == 0) {
        if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
            return meta_fail(err, errlen, "%s: --system: '%s' is not on or off", name, val);
        m->system = strcmp(val, "on") == 0;
    } else if (strcmp(opt, "--flags") == 0) {
        if (!slotctl_meta_flags_parse(val, &m->flags))
            return meta_fail(err, errlen,
                             "%s: --flags: '%s' is not a list of ban, disband, send_ban, "
                             "allow_stranger, large (or none)",
                             name, val);
        m->has_flags = true;
    } else if (strcmp(opt, "--event-capacity") == 0) {
        if (!slotctl_uint_parse(val, 0, 1000, &n))
            return meta_fail(err, errlen, "%s: --event-capacity: '%s' is not a number in 0..1000",
                             name, val);
        m->event_capacity = (uint32_t)n;
    } else if (strcmp(opt, "--min-isr") == 0) {
        if (!slotctl_uint_parse(val, 0, SLOTCTL_META_NODES_MAX, &n))
            return meta_fail(err, errlen, "%s: --min-isr: '%s' is not a number in 0..%d", name, val,
                             SLOTCTL_META_NODES_MAX);
        m->min_isr = (uint32_t)n;
    } else if (strcmp(opt, "--list") == 0) {
        m->list = strcmp(val, "subscribers") == 0 ? SLOTD_MEMBER_LIST_SUBSCRIBERS
                  : strcmp(val, "allow") == 0     ? SLOTD_MEMBER_LIST_ALLOWLIST
                  : strcmp(val, "deny") == 0      ? SLOTD_MEMBER_LIST_DENYLIST
                                                  : 0;
        if (!m->list)
            return meta_fail(err, errlen, "%s: --list: '%s' is not subscribers, allow or deny",
                             name, val);
    } else if (strcmp(opt, "--status") == 0) {
        m->status = strcmp(val, "creating") == 0   ? SLOTD_CHANNEL_STATUS_CREATING
                    : strcmp(val, "active") == 0   ? SLOTD_CHANNEL_STATUS_ACTIVE
                    : strcmp(val, "deleting") == 0 ? SLOTD_CHANNEL_STATUS_DELETING
                                                   : -1;
        if (m->status < 0)
            return meta_fail(err, errlen, "%s: --status: '%s' is not creating, active or deleting",
                             name, val);
    } else if (strcmp(opt, "--replicas") == 0 || strcmp(opt, "--isr") == 0) {
        bool rep = opt[2] == 'r';
        if (!meta_nodes(val, rep ? m->replicas : m->isr, rep ? &m->replica_count : &m->isr_count))
            return meta_fail(err, errlen, "%s: %s: '%s' is not a list of at most %d node ids", name,
                             opt, val, SLOTCTL_META_NODES_MAX);
    } else if (strcmp(opt, "--prefix") == 0) {
        m->prefix = val;
    } else if (strcmp(opt, "--payload") == 0) {
        m->payload = val;
    } else {
        uint64_t *slot = meta_num_slot(m, opt, &hi, &given, &ignored);
        if (!slot)
            return meta_fail(err, errlen, "%s: %s: unknown option", name, opt);
        if (!slotctl_uint_parse(val, 0, hi, slot))
            return meta_fail(err, errlen, "%s: %s: '%s' is not a non-negative integer", name, opt,
                             val);
        if (strcmp(opt, "--limit") == 0 && m->limit > 100000000)
            return meta_fail(err, errlen, "%s: --limit: %s is above 100000000", name, val);
        *given = true;
    }
    return 0;
}

/* One positional word of kind k. */
static int meta_positional(char k, const char *w, struct slotctl_meta_args *m, char *err,
                           size_t errlen)
{
    uint64_t n;
    switch (k) {
    case 'U':
        m->uid = w;
        break;
    case 'C':
        m->channel_id = w;
        break;
    case 'P':
        m->plugin_no = w;
        break;
    case 'E':
        m->event_type = w;
        break;
    case 'F':
        if (!slotctl_uint_parse(w, 0, SLOTCTL_META_DEVICE_MAX, &n))
            return meta_fail(err, errlen, "%s: DEVICE_FLAG '%s' is not a number in 0..%d", m->name,
                             w, SLOTCTL_META_DEVICE_MAX);
        m->device_flag = (uint32_t)n;
        break;
    default: /* K, M */
        if (m->uid_count == SLOTD_META_UIDS_MAX)
            return meta_fail(err, errlen, "%s: more than %d uids (the limit of one command)",
                             m->name, SLOTD_META_UIDS_MAX);
        m->uids[m->uid_count++] = w;
        break;
    }
    return 0;
}

/* What the command needs beyond its words: --type for a channel, --seq/--at-ms where required. */
static int meta_required(const struct meta_cmd *cmd, const struct slotctl_meta_args *m, char *err,
                         size_t errlen)
{
    if (strchr(cmd->pos, 'C') && m->channel_type == 0)
        return meta_fail(err, errlen, "%s: --type: required (the channel type, 1..%d)", m->name,
                         SLOTCTL_META_CHANNEL_TYPE_MAX);
    bool need_seq = m->verb == SLOTCTL_META_CONV_READ || m->verb == SLOTCTL_META_CONV_HIDE ||
                    m->verb == SLOTCTL_META_CMD_ACK;
    if (need_seq && !m->has_seq)
        return meta_fail(err, errlen, "%s: --seq: required", m->name);
    if (m->verb == SLOTCTL_META_CONV_ACTIVATE && !m->has_at_ms)
        return meta_fail(err, errlen, "%s: --at-ms: required", m->name);
    if (m->verb == SLOTCTL_META_CHANNEL_FLAGS && !m->has_flags)
        return meta_fail(err, errlen, "%s: --flags: required (a list, or none)", m->name);
    if (m->verb == SLOTCTL_META_USER_UPDATE && !m->user_fields && m->system < 0)
        return meta_fail(err, errlen,
                         "%s: nothing to update (give --token, --device-flag, --device-level or "
                         "--system)",
                         m->name);
    if (m->has_expected_version && m->list != SLOTD_MEMBER_LIST_SUBSCRIBERS)
        return meta_fail(err, errlen, "%s: --expected-version: only with --list subscribers",
                         m->name);
    return 0;
}

int slotctl_meta_parse(int argc, const char *const *argv, struct slotctl_meta_args *m, char *err,
                       size_t errlen)
{
    memset(m, 0, sizeof(*m));
    m->system = -1;
    m->list = SLOTD_MEMBER_LIST_SUBSCRIBERS;
    if (argc < 2)
        return meta_fail(err, errlen, "%s: needs a subcommand", argc ? argv[0] : "");
    const struct meta_cmd *cmd = NULL;
    for (size_t k = 0; k < META_N_CMDS; k++)
        if (strcmp(argv[0], meta_cmds[k].noun) == 0 && strcmp(argv[1], meta_cmds[k].verb) == 0)
            cmd = &meta_cmds[k];
    if (!cmd)
        return meta_fail(err, errlen, "%s: unknown subcommand '%s'", argv[0], argv[1]);
    snprintf(m->name, sizeof(m->name), "%s %s", cmd->noun, cmd->verb);
    const char *name = m->name;
    m->verb = cmd->id;
    size_t pos = 0;
    bool options_done = false;
    for (int i = 2; i < argc; i++) {
        const char *w = argv[i];
        if (!options_done && strcmp(w, "--") == 0) {
            options_done = true;
            continue;
        }
        if (!options_done && w[0] == '-' && w[1] == '-') {
            char opt[64];
            snprintf(opt, sizeof(opt), " %s ", w);
            if (!strstr(cmd->opts, opt))
                return meta_fail(err, errlen, "%s: %s: unknown option (usage: %s %s)", name, w,
                                 name, cmd->usage);
            bool flag = strcmp(w, "--meta") == 0;
            if (meta_option(cmd, w, flag ? NULL : (i + 1 < argc ? argv[i + 1] : NULL), m, err,
                            errlen) != 0)
                return -1;
            if (!flag)
                i++;
            continue;
        }
        char k = cmd->pos[pos];
        if (k == '\0')
            return meta_fail(err, errlen, "%s: unexpected argument '%s' (usage: %s %s)", name, w,
                             name, cmd->usage);
        if (meta_positional(k, w, m, err, errlen) != 0)
            return -1;
        if (k != 'M')
            pos++;
    }
    bool complete = cmd->pos[pos] == '\0' || (cmd->pos[pos] == 'M' && m->uid_count > 0);
    if (!complete)
        return meta_fail(err, errlen, "%s: missing arguments (usage: %s %s)", name, name,
                         cmd->usage);
    return meta_required(cmd, m, err, errlen);
}
