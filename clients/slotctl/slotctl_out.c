/* slotctl_out.c - slotctl's shared output: command names, JSON printing and error reports. */
#include "slotctl_cmds.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Indexed by enum slotctl_cmd. */
static const char *const cmd_names[] = {
    "",
    "put",
    "get",
    "delete",
    "cas",
    "route",
    "cluster",
    "health",
    "bench",
    "transfer-leader",
    "join",
    "activate",
    "move-replica",
    "drain",
    "promote",
    "retry",
    "migrate-slots",
    "task status",
    "status",
    "user",
    "role",
    "feature",
    "watch",
    "txn",
    "lease",
    "lease grant",
    "lease keepalive",
    "lease revoke",
    "" /* meta: a->meta.name */,
    "mcp",
    "backup",
    "abort",
    "balance",
    "remove-node",
    "demote",
};

const char *slotctl_cmd_name(int cmd)
{
    if (cmd < 0 || (size_t)cmd >= sizeof(cmd_names) / sizeof(cmd_names[0]))
        return "";
    return cmd_names[cmd];
}

void slotctl_json_print(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (s) {
        printf("%s\n", s);
        free(s);
    }
    json_decref(j);
}

json_t *slotctl_call_status_json(const struct slotd_error *e)
{
    json_t *j = json_object();
    json_object_set_new(j, "grpc_status",
                        json_string(slotd_grpc_status_name(slotd_error_grpc_status(e))));
    if (slotd_error_address(e)[0])
        json_object_set_new(j, "address", json_string(slotd_error_address(e)));
    if (slotd_error_has_detail(e)) {
        json_t *d = json_object();
        json_object_set_new(d, "code",
                            json_string(slotd_error_code_name(slotd_error_detail_code(e))));
        if (slotd_error_field(e)[0]) {
            json_object_set_new(d, "field", json_string(slotd_error_field(e)));
            json_object_set_new(d, "limit", json_integer((json_int_t)slotd_error_limit(e)));
        }
        if (slotd_error_retry_after_ms(e))
            json_object_set_new(d, "retry_after_ms", json_integer(slotd_error_retry_after_ms(e)));
        if (slotd_error_leader_node_id(e)) {
            json_object_set_new(d, "leader_node_id",
                                json_integer((json_int_t)slotd_error_leader_node_id(e)));
            json_object_set_new(d, "leader_address", json_string(slotd_error_leader_address(e)));
            json_object_set_new(d, "leader_group_id", json_integer(slotd_error_leader_group_id(e)));
            json_object_set_new(d, "leader_term",
                                json_integer((json_int_t)slotd_error_leader_term(e)));
        }
        json_object_set_new(j, "detail", d);
    }
    return j;
}

/* Reports a failed command (stderr sentence, or a JSON object on stdout); returns its exit. */
int slotctl_error_report(const struct slotctl_args *a, int rc, const struct slotd_error *e)
{
    return slotctl_error_report_text(
        a, rc, e && slotd_error_message(e)[0] ? slotd_error_message(e) : NULL, e);
}

int slotctl_error_report_free(const struct slotctl_args *a, int rc, struct slotd_error *e)
{
    int code = slotctl_error_report(a, rc, e);
    slotd_error_destroy(e);
    return code;
}

int slotctl_error_report_text(const struct slotctl_args *a, int rc, const char *message,
                              const struct slotd_error *e)
{
    int code = slotctl_exit_of(rc);
    const char *msg = message ? message : slotd_client_strerror(rc);
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string(a->cmd == SLOTCTL_CMD_META
                                                          ? a->meta.name
                                                          : slotctl_cmd_name(a->cmd)));
        json_object_set_new(j, "ok", json_false());
        json_object_set_new(j, "error", json_string(slotd_client_strerror(rc)));
        json_object_set_new(j, "message", json_string(msg));
        json_object_set_new(j, "exit_code", json_integer(code));
        if (e && slotd_error_grpc_status(e) >= 0)
            json_object_set_new(j, "status", slotctl_call_status_json(e));
        slotctl_json_print(j);
    }
    fprintf(stderr, "slotctl: %s\n", msg);
    return code;
}

void slotctl_hex_of(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    out[2 * n] = '\0';
}

bool slotctl_printable(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isprint(b[i]) && b[i] != '\t')
            return false;
    return true;
}

void slotctl_bytes_print(FILE *out, const uint8_t *b, size_t n)
{
    if (slotctl_printable(b, n)) {
        fwrite(b, 1, n, out);
        return;
    }
    fputs("0x", out);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%02x", b[i]);
}

void slotctl_json_set_write(json_t *obj, uint32_t group_id, uint64_t applied_index, uint64_t term,
                            bool deduplicated, const uint8_t *request_id, size_t request_id_len,
                            unsigned attempts)
{
    char hex[2 * SLOTD_REQUEST_ID_LEN_MAX + 1];
    slotctl_hex_of(request_id, request_id_len, hex);
    json_object_set_new(obj, "group_id", json_integer(group_id));
    json_object_set_new(obj, "applied_index", json_integer((json_int_t)applied_index));
    json_object_set_new(obj, "term", json_integer((json_int_t)term));
    json_object_set_new(obj, "deduplicated", json_boolean(deduplicated));
    json_object_set_new(obj, "request_id", json_string(hex));
    json_object_set_new(obj, "attempts", json_integer(attempts));
}

void slotctl_json_set_bytes(json_t *obj, const char *name, const uint8_t *b, size_t n)
{
    json_t *s = json_stringn(n ? (const char *)b : "", n);
    json_object_set_new(obj, name, s ? s : json_null());
    char *hex = malloc(2 * n + 1);
    if (hex) {
        slotctl_hex_of(b, n, hex);
        char key[64];
        snprintf(key, sizeof(key), "%s_hex", name);
        json_object_set_new(obj, key, json_string(hex));
        free(hex);
    }
}
