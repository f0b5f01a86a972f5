/* slotctl_meta_cli.h - slotctl's typed metadata commands: their parsed arguments and parser
 * (slotctl_meta_cli.c); the runner, slotctl_meta.c, is declared in slotctl_cmds.h. */
#ifndef SLOTD_SLOTCTL_META_CLI_H
#define SLOTD_SLOTCTL_META_CLI_H

#include "slotd/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Words and options after the noun: the uids of one member command plus the rest. */
#define SLOTCTL_META_ARGS_MAX (SLOTD_META_UIDS_MAX + 64)
/* Deletes repeat while the server says more (10,000 rows a command: 10 M rows). */
#define SLOTCTL_META_DELETE_REPEATS_MAX 1000
/* channel_type, device_flag and device_level bounds (docs/api.md "Limits and errors"). */
#define SLOTCTL_META_CHANNEL_TYPE_MAX 255
#define SLOTCTL_META_DEVICE_MAX 255
#define SLOTCTL_META_NODES_MAX 64

enum slotctl_meta_verb {
    SLOTCTL_META_NONE,
    SLOTCTL_META_USER_CREATE,
    SLOTCTL_META_USER_GET,
    SLOTCTL_META_USER_UPDATE,
    SLOTCTL_META_USER_DELETE,
    SLOTCTL_META_USER_LIST,
    SLOTCTL_META_DEVICE_PUT,
    SLOTCTL_META_DEVICE_LIST,
    SLOTCTL_META_DEVICE_DELETE,
    SLOTCTL_META_CHANNEL_CREATE,
    SLOTCTL_META_CHANNEL_GET,
    SLOTCTL_META_CHANNEL_FLAGS,
    SLOTCTL_META_CHANNEL_DELETE,
    SLOTCTL_META_CHANNEL_LIST,
    SLOTCTL_META_MEMBER_ADD,
    SLOTCTL_META_MEMBER_REMOVE,
    SLOTCTL_META_MEMBER_LIST,
    SLOTCTL_META_MEMBER_CHECK,
    SLOTCTL_META_CONV_JOIN,
    SLOTCTL_META_CONV_LEAVE,
    SLOTCTL_META_CONV_READ,
    SLOTCTL_META_CONV_HIDE,
    SLOTCTL_META_CONV_ACTIVATE,
    SLOTCTL_META_CONV_GET,
    SLOTCTL_META_CONV_LIST,
    SLOTCTL_META_CMD_BIND,
    SLOTCTL_META_CMD_ACK,
    SLOTCTL_META_CMD_UNBIND,
    SLOTCTL_META_RUNTIME_GET,
    SLOTCTL_META_RUNTIME_SET,
    SLOTCTL_META_RUNTIME_LIST,
    SLOTCTL_META_PLUGIN_BIND,
    SLOTCTL_META_PLUGIN_GET,
    SLOTCTL_META_PLUGIN_UNBIND,
    SLOTCTL_META_EVENT_APPEND,
    SLOTCTL_META_EVENT_LIST,
};

/* One typed command as parsed (strings point into argv). Which command takes which option is in
 * the table of slotctl_meta_cli.c. */
struct slotctl_meta_args {
    enum slotctl_meta_verb verb;
    char name[32]; /* "channel create" */
    const char *uid;
    const char *channel_id;
    uint32_t channel_type; /* --type (1..255; 0 = not given: listings take every type) */
    const char *plugin_no;
    const char *event_type;
    const char *uids[SLOTD_META_UIDS_MAX]; /* member add/remove UID..., member check UID */
    size_t uid_count;
    const char *token;
    uint32_t device_flag;
    uint32_t device_level;
    uint32_t flags; /* --flags: SLOTD_CHANNEL_FLAG_* */
    bool has_flags;
    uint32_t event_capacity;
    int list;       /* --list: enum slotd_member_list (default subscribers) */
    uint64_t limit; /* listings: entries in all (0 = every one) */
    const char *prefix;
    uint64_t seq; /* --seq: join_seq, read_seq, hide_through_seq, start_seq, ack_seq */
    bool has_seq;
    uint64_t at_ms; /* --at-ms: activated_at_ms */
    bool has_at_ms;
    uint64_t expected_version;
    bool has_expected_version; /* else member add/remove read the channel's version first */
    int system;                /* user update --system on|off: 1 / 0; -1 not given */
    bool user_fields;          /* user update: --token, --device-flag or --device-level given */
    uint64_t message_seq;
    uint64_t after_seq;
    const char *payload;
    uint64_t leader; /* runtime set --leader, runtime list --leader */
    /* runtime set */
    uint64_t replicas[SLOTCTL_META_NODES_MAX];
    size_t replica_count;
    uint64_t isr[SLOTCTL_META_NODES_MAX];
    size_t isr_count;
    uint64_t channel_epoch, leader_epoch, write_fence, lease_until_ms, retention_through_seq;
    uint64_t features;
    uint32_t min_isr;
    int status; /* enum slotd_channel_status */
    uint64_t expect_channel_epoch, expect_leader_epoch, expect_leader;
};

/*
 * argv[0..argc) (the words and options after slotctl's own options were taken out, starting at
 * the noun: "channel", "create", ...), m, err: borrowed for the call (m's strings point into
 * argv). Returns 0, or -1 with one line naming the command and the bad flag or argument in err.
 */
int slotctl_meta_parse(int argc, const char *const *argv, struct slotctl_meta_args *m, char *err,
                       size_t errlen);

/* Whether argv[i..argc) starts a typed command: device, channel, member, conversation, cmd,
 * runtime, plugin, event; user create|get|update; user delete|list with --meta somewhere. */
bool slotctl_meta_is_typed(int argc, char **argv, int i);

/* flags, out: borrowed for the call. "ban,large" (also send_ban, allow_stranger, disband;
 * "none" = no flag) into SLOTD_CHANNEL_FLAG_* bits. Returns false on an unknown name. */
bool slotctl_meta_flags_parse(const char *s, uint32_t *out);

/* Writes flags as "ban,large" ("none" when 0) into out. */
void slotctl_meta_flags_name(uint32_t flags, char *out, size_t len);

#endif /* SLOTD_SLOTCTL_META_CLI_H */
