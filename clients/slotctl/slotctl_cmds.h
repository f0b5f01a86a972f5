/* slotctl_cmds.h - slotctl's output helpers, admin, status and task commands (slotctl_*.c). */
#ifndef SLOTD_SLOTCTL_CMDS_H
#define SLOTD_SLOTCTL_CMDS_H

#include "slotctl_cli.h"

#include "slotd/client.h"

#include <jansson.h>

/* b, out: borrowed for the call. Writes n bytes as 2n hex digits and a NUL into out. */
void slotctl_hex_of(const uint8_t *b, size_t n, char *out);

/* Whether the n bytes at b are printable ASCII (tabs allowed). */
bool slotctl_printable(const uint8_t *b, size_t n);

/* Prints the bytes as they are when printable, else as 0x and hex digits. */
void slotctl_bytes_print(FILE *out, const uint8_t *b, size_t n);

/* obj, name, b: borrowed for the call. Sets obj[name] to the bytes as a string when they are
 * valid UTF-8 (null otherwise), and obj[name + "_hex"] to their hex always. */
void slotctl_json_set_bytes(json_t *obj, const char *name, const uint8_t *b, size_t n);

/* obj, request_id: borrowed for the call. Sets the fields every write answer shares, in this
 * order: group_id, applied_index, term, deduplicated, request_id (hex), attempts. */
void slotctl_json_set_write(json_t *obj, uint32_t group_id, uint64_t applied_index, uint64_t term,
                            bool deduplicated, const uint8_t *request_id, size_t request_id_len,
                            unsigned attempts);

/* j: ownership transfers. Prints j as one compact line on stdout. */
void slotctl_json_print(json_t *j);

/* a, e: borrowed for the call (e may be NULL: no error object, e.g. out of memory). Reports a
 * failed command (a sentence on stderr and, with --json, an error object on stdout); returns
 * the exit code for rc (enum slotd_client_err). */
int slotctl_error_report(const struct slotctl_args *a, int rc, const struct slotd_error *e);

/* As slotctl_error_report, then destroys e (ownership transfers; may be NULL). */
int slotctl_error_report_free(const struct slotctl_args *a, int rc, struct slotd_error *e);

/* As slotctl_error_report with message (borrowed for the call; NULL: the text of rc) as the
 * sentence: a failure slotctl found itself in an answer that came back. */
int slotctl_error_report_text(const struct slotctl_args *a, int rc, const char *message,
                              const struct slotd_error *e);

/* c, a: borrowed for the call; cmd: ownership transfers (NULL: out of memory); built: the
 * result of the setters that can fail (a failure is reported, nothing is sent). Sends the admin
 * command; SLOTCTL_EXIT_OK with *out (caller frees with slotd_admin_result_destroy()), or the
 * exit code of the failure, reported. */
int slotctl_admin_send(struct slotd_client *c, const struct slotctl_args *a,
                       struct slotd_admin_command *cmd, int built, struct slotd_admin_result **out);

/* e: borrowed for the call. A failed call's gRPC status and ErrorDetail as a JSON object
 * (grpc_status, address, detail); caller owns it. */
json_t *slotctl_call_status_json(const struct slotd_error *e);

/* Static name of a command ("transfer-leader"); "" when out of range. */
const char *slotctl_cmd_name(int cmd);

/* c, a: borrowed for the call. `cluster`: Admin.ClusterState plus observed leaders from
 * RouteSnapshot, as tables or one JSON object. Returns the exit code. */
int slotctl_cluster_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `transfer-leader`: SetPreferredLeader, then with --wait polls
 * RouteSnapshot until the node leads the group. Returns the exit code. */
int slotctl_transfer_leader_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `join` (JoinNode), `activate` (ActivateNode), `remove-node`
 * (RemoveNode) and `demote` (DemoteControllerVoter). Returns the exit code. */
int slotctl_node_admin_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `feature list` (the features of Admin.ClusterState) and
 * `feature set NAME on|off` (Admin.SetFeature). Returns the exit code. */
int slotctl_feature_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `balance status` (ControllerStatus.balance of the controller
 * leader among the endpoints, else of the first that answers) and `balance on|off`
 * (Admin.SetBalance). Returns the exit code. */
int slotctl_balance_run(struct slotd_client *c, const struct slotctl_args *a);

/* a, r: borrowed for the call. The common fields of an admin command's JSON answer (command,
 * ok, outcome, reason, revision, applied_index, attempts); caller owns the object. */
json_t *slotctl_admin_result_json(const struct slotctl_args *a, const struct slotd_admin_result *r);

/* r, what: borrowed for the call. Prints "CHANGED  what  revision R  applied index I". */
void slotctl_admin_result_print(const struct slotd_admin_result *r, const char *what);

/* a, r, what: borrowed for the call; fields: ownership transfers (NULL allowed). Reports an
 * admin command's answer: with --json slotctl_admin_result_json plus fields (whose keys replace
 * the common ones, "command" among them), else slotctl_admin_result_print(r, what). Returns
 * SLOTCTL_EXIT_OK. */
int slotctl_admin_result_report(const struct slotctl_args *a, const struct slotd_admin_result *r,
                                const char *what, json_t *fields);

/* c, a, what: borrowed for the call; cmd, fields: ownership transfers. slotctl_admin_send, then
 * slotctl_admin_result_report of the answer. Returns the exit code. */
int slotctl_admin_apply(struct slotd_client *c, const struct slotctl_args *a,
                        struct slotd_admin_command *cmd, int built, const char *what,
                        json_t *fields);

/* ---- users and roles (slotctl_auth.c) ---- */

/* c, a: borrowed for the call. With --user and --password-file: Admin.Authenticate, so every
 * later call of c carries the token. Returns the exit code (0 when there is nothing to do). */
int slotctl_login(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `user ...` and `role ...`. Returns the exit code. */
int slotctl_auth_run(struct slotd_client *c, const struct slotctl_args *a);

/* ---- tasks (slotctl_task.c) ---- */

/* c, a: borrowed for the call. move-replica, drain, promote, retry, migrate-slots and
 * transfer-leader --as-task: the Admin task command, then with --wait the task followed until
 * done (0), failed (SLOTCTL_EXIT_TASK_FAILED) or --wait seconds (SLOTCTL_EXIT_WAIT_TIMEOUT). */
int slotctl_task_cmd_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `backup save|verify|inspect FILE` (slotctl_backup.c). */
int slotctl_backup_run(struct slotd_client *c, const struct slotctl_args *a);

/* c, a: borrowed for the call. `task status [TASK_ID] [--active] [--watch ...]`. */
int slotctl_task_status_run(struct slotd_client *c, const struct slotctl_args *a);

/* n, out: "512 B", "12.5 KiB", "3.1 MiB", "2.0 GiB" (binary units, one decimal). */
void slotctl_bytes_text(uint64_t n, char *out, size_t len);

/* out: borrowed for the call. "[#######.....] 58%  3.1 MiB / 5.3 MiB" (bytes) or
 * "[#######.....] 58%  match 1520 / commit 2610" (a log position against the commit index);
 * 12 cells, the percentage rounded down and capped at 100 (0 when total is 0). */
void slotctl_progress_bar(uint64_t done, uint64_t total, bool bytes, char *out, size_t len);

/* t, out: borrowed for the call. The progress bar of a task in a copy phase (bytes_sent of
 * bytes_total) or catch_up (the snapshot's bytes while one is being sent, else target_match of
 * commit); any_phase also shows the last reported progress of other phases. Returns false
 * (out = "") when there is nothing to show. */
bool slotctl_task_progress(const struct slotd_task *t, bool any_phase, char *out, size_t len);

/* slots, out: borrowed for the call. "3,7,10-12" of an ascending hash slot list ("-": none). */
void slotctl_slots_text(const uint32_t *slots, size_t n, char *out, size_t len);

/* out, l: borrowed for the call. The task table (ID KIND STATUS PHASE ATTEMPT GROUP SOURCE
 * TARGET PROGRESS LAST_ERROR), or "no tasks" (active_only: "no active tasks"). */
void slotctl_tasks_print(FILE *out, const struct slotd_task_list *l, bool active_only);

/* out, t: borrowed for the call. One task, a field per line. */
void slotctl_task_print(FILE *out, const struct slotd_task *t);

/* t, out: borrowed for the call. The one-line state --watch prints on each change. */
void slotctl_task_line(const struct slotd_task *t, char *out, size_t len);

/* t: borrowed for the call. The task as a JSON object (caller owns it). */
json_t *slotctl_task_json(const struct slotd_task *t);

/* state: borrowed for the call (the cluster-state object); route: borrowed, may be NULL.
 * Writes the human tables of `cluster` to out; now_ms is the wall clock used for health ages. */
void slotctl_cluster_print(FILE *out, json_t *state, const struct slotd_cluster_state *cs,
                           const struct slotd_route *route, int64_t now_ms);

/* ---- status (slotctl_status.c) ---- */

/* Longest disagreement line: 16 endpoints of "node N at R, " fit. */
#define SLOTCTL_STATUS_LINE_LEN 1024

/* One endpoint's row of `status`. */
struct slotctl_status_row {
    char endpoint[SLOTD_ADDRESS_LEN + 1];
    int rc;                             /* enum slotd_client_err of its ControllerStatus call */
    struct slotd_controller_status *cs; /* the answer when rc is 0 (owned by the row) */
    struct slotd_error *err;            /* why not, otherwise (owned by the row; may be NULL) */
};

/* What the rows that answered say together. */
struct slotctl_status_verdict {
    unsigned asked, answered;
    /* true when at least one endpoint answered, all that answered report one revision and no
     * two name different controller leaders (0 = unknown is ignored) */
    bool agree;
    uint64_t revision; /* the most common revision (ties: the highest); 0 when none answered */
    uint64_t leader;   /* the most common leader named (ties: the highest id); 0: none named */
    /* "revisions differ: node 4 at 31, others at 33" and "leaders differ: node 4 names node 2,
     * others name node 1"; "" when they do not differ */
    char revisions[SLOTCTL_STATUS_LINE_LEN];
    char leaders[SLOTCTL_STATUS_LINE_LEN];
};

/* c, endpoints, rows: borrowed for the call. Splits endpoints ("h:p,h:p", as the client
 * accepted them) into rows[0..n) (at most max) and asks each its ControllerStatus at once (one
 * thread per endpoint, so it takes at most one deadline); returns n. */
size_t slotctl_status_collect(struct slotd_client *c, const char *endpoints,
                              struct slotctl_status_row *rows, size_t max);

/* rows: borrowed for the call. Frees what rows[0..n) own (their answers and errors). */
void slotctl_status_rows_clear(struct slotctl_status_row *rows, size_t n);

/* rows, v: borrowed for the call. Compares the rows that answered. */
void slotctl_status_judge(const struct slotctl_status_row *rows, size_t n,
                          struct slotctl_status_verdict *v);

/* out, rows: borrowed for the call. The `status` table, a blank line, then the disagreement
 * lines or one "agree: ..." line, and "N of M endpoints answered" when some did not. */
void slotctl_status_print(FILE *out, const struct slotctl_status_row *rows, size_t n);

/* rows: borrowed for the call. The `--json` object (command, ok, nodes, agree, disagreements,
 * exit_code); caller owns it. */
json_t *slotctl_status_json(const struct slotctl_status_row *rows, size_t n, int code);

/* c, a: borrowed for the call. `status`: every endpoint's ControllerStatus; exit 0, or
 * SLOTCTL_EXIT_UNAVAILABLE when any endpoint did not answer. */
int slotctl_status_run(struct slotd_client *c, const struct slotctl_args *a);

/* ---- range, txn and watch (slotctl_kv.c) ---- */

/* c, a: borrowed for the call. `get --prefix P`: every page of the range, printed as key and
 * value lines (or keys, or the count), or one JSON object. Returns the exit code. */
int slotctl_range_run(struct slotd_client *c, const struct slotctl_args *a);

/* One compare of a txn text: key's target (enum slotd_txn_target) op (enum slotd_txn_cmp)
 * version or value. */
struct slotctl_txn_compare {
    const void *key;
    size_t key_len;
    int target;
    int op;
    uint64_t version;
    const void *value;
    size_t value_len;
};

/* One op of a txn text (kind: enum slotd_txn_op_kind; value for puts). */
struct slotctl_txn_op {
    int kind;
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
};

/* The compares and ops of a txn read by slotctl_txn_parse (keys and values point into the
 * parsed text, which is rewritten in place). */
struct slotctl_txn_text {
    struct slotctl_txn_compare compares[SLOTD_TXN_COMPARES_MAX];
    size_t compare_count;
    struct slotctl_txn_op success[SLOTD_TXN_OPS_MAX];
    size_t success_count;
    struct slotctl_txn_op failure[SLOTD_TXN_OPS_MAX];
    size_t failure_count;
};

/* t: borrowed for the call. The libslotd txn of t (caller frees with slotd_txn_destroy()), or
 * NULL when out of memory. */
struct slotd_txn *slotctl_txn_build(const struct slotctl_txn_text *t);

/* Longest txn text slotctl reads from stdin. */
#define SLOTCTL_TXN_TEXT_MAX (2u << 20)

/*
 * text (NUL-terminated, rewritten in place: keys and values point into it), t, err: borrowed
 * for the call. Parses etcdctl-style txn text: compare lines, a blank line, success op lines,
 * a blank line, failure op lines. Compares: value("K") OP "V", version("K") OP "N" (mod is an
 * alias), exists("K"), absent("K") with OP one of = == != > <; ops: put K V, del K (delete),
 * get K. Words may be "quoted" (escapes \" \\ \n \t \xHH). Returns 0, or -1 with a
 * sentence naming the line in err.
 */
int slotctl_txn_parse(char *text, struct slotctl_txn_text *t, char *err, size_t errlen);

/* c, a: borrowed for the call. `txn`: reads stdin, runs it, prints SUCCESS/FAILURE and the
 * results (exit 0 / SLOTCTL_EXIT_PRECONDITION) or one JSON object. */
int slotctl_txn_run(struct slotd_client *c, const struct slotctl_args *a);

/* s, out, count, err: borrowed for the call. Parses a resume token "GROUP:INDEX,..." into out
 * (at most max positions). Returns 0, or -1 with a sentence in err. */
int slotctl_resume_parse(const char *s, struct slotd_watch_position *out, size_t max, size_t *count,
                         char *err, size_t errlen);

/* c, a: borrowed for the call. `watch KEY | --prefix P`: prints every change until --count
 * events, --timeout seconds or SIGINT/SIGTERM, then the resume token. Returns the exit code. */
int slotctl_watch_run(struct slotd_client *c, const struct slotctl_args *a);

/* ---- leases (slotctl_lease.c) ---- */

/* c, a: borrowed for the call. `lease grant KEY TTL`, `lease keepalive ID [--count N]
 * [--interval S]` and `lease revoke ID`: prints "lease ID (0xHEX) ..." per answer, or one JSON
 * object per answer. Returns the exit code (a lease that is gone: SLOTCTL_EXIT_NOT_FOUND). */
int slotctl_lease_run(struct slotd_client *c, const struct slotctl_args *a);

/* ---- typed metadata (slotctl_meta.c) ---- */

/* c, a: borrowed for the call. The typed command in a->meta: a table (or one JSON object) of
 * what it answered; gets of an absent row and a failed member check exit
 * SLOTCTL_EXIT_NOT_FOUND; deletes repeat while the server says more (at most
 * SLOTCTL_META_DELETE_REPEATS_MAX commands); listings follow every cursor up to --limit. */
int slotctl_meta_run(struct slotd_client *c, const struct slotctl_args *a);

#endif /* SLOTD_SLOTCTL_CMDS_H */
