/* internal.h - helpers shared by the files of service/controller; not part of the public API. */
#ifndef SLOTD_CONTROLLER_INTERNAL_H
#define SLOTD_CONTROLLER_INTERNAL_H

#include <jansson.h>
#include <stdarg.h>

#include "controller.h"

#define CTL__PATH_MAX                                                                              \
    96 /* bytes of a field path in messages, e.g. "groups[12].desired_peers[3]"                    \
        */

/* snprintf into err (borrowed; nothing is written when errlen is 0). */
void ctl__errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Enum name tables (index = enum value) and their sizes. */
extern const char *const ctl__join_state_names[];
extern const char *const ctl__node_status_names[];
extern const char *const ctl__task_kind_names[];
extern const char *const ctl__task_status_names[];
extern const size_t ctl__n_join_state_names, ctl__n_node_status_names, ctl__n_task_kind_names,
    ctl__n_task_status_names;

/* Index of s in names[0..n), -1 if absent. Both borrowed for the call. */
int ctl__name_index(const char *const *names, size_t n, const char *s);

/* Value checks shared by validate and the command handlers (s borrowed for the call). */
bool ctl__cluster_id_ok(const char *s);
bool ctl__address_ok(const char *s);
/* "[1,2,3]" of v[0..n) into buf (a reason fragment; cut when too long); returns buf
 * (task_advance.c). */
const char *ctl__fmt_ids(char *buf, size_t len, const uint64_t *v, uint32_t n);
bool ctl__utf8_ok(const char *s);

/* ---- strict JSON readers. path names the object being read for messages ("" = top level);
 * every json_t and string argument is borrowed for the call. All return CTL_OK or CTL_EDECODE
 * with a sentence in err. */

/* obj is an object whose keys are exactly required[0..n_required) plus any of
 * optional[0..n_optional). */
int ctl__json_fields(const json_t *obj, const char *path, const char *const *required,
                     size_t n_required, const char *const *optional, size_t n_optional, char *err,
                     size_t errlen);
/* obj[key] is an integer in min..max. */
int ctl__json_u64(const json_t *obj, const char *key, const char *path, uint64_t min, uint64_t max,
                  uint64_t *out, char *err, size_t errlen);
int ctl__json_u32(const json_t *obj, const char *key, const char *path, uint32_t min, uint32_t max,
                  uint32_t *out, char *err, size_t errlen);
/* obj[key] is a string of at most max bytes without NUL; copied into out[0..max]. */
int ctl__json_str(const json_t *obj, const char *key, const char *path, size_t max, char *out,
                  char *err, size_t errlen);
/* obj[key] is true or false. */
int ctl__json_bool(const json_t *obj, const char *key, const char *path, bool *out, char *err,
                   size_t errlen);
/* obj is {"hash_slot_migration": bool} (every feature present) into *f. */
int ctl__features_read(const json_t *obj, const char *path, struct ctl_features *f, char *err,
                       size_t errlen);
/* obj[key] is one of names[0..n); *out = its index. */
int ctl__json_enum(const json_t *obj, const char *key, const char *path, const char *const *names,
                   size_t n, int *out, char *err, size_t errlen);
/* obj[key] is an array of at most max elements; *out is borrowed from obj. */
int ctl__json_array(const json_t *obj, const char *key, const char *path, size_t max, json_t **out,
                    char *err, size_t errlen);
/* Writes "path.key" (or "key" at the top level) into out[0..CTL__PATH_MAX). */
void ctl__json_path(char *out, const char *path, const char *key);

/* ---- JSON writers. Each ctl__json_set / _push steals v (also on failure) and returns -1 when v
 * is NULL or the insertion fails, so callers can OR the results and check once. */
int ctl__json_set(json_t *obj, const char *key, json_t *v);
int ctl__json_push(json_t *arr, json_t *v);
/* json integer for v; NULL when v > CTL_U64_JSON_MAX or on allocation failure. */
json_t *ctl__json_u64_new(uint64_t v);
/* JSON array of v[0..n) (borrowed for the call); NULL when one is > CTL_U64_JSON_MAX or on
 * allocation failure. */
json_t *ctl__json_u64s_new(const uint64_t *v, uint32_t n);
/* The end of an encoder: o when bad (the OR of its ctl__json_set / _push results) is 0, else
 * NULL after freeing o (ownership of o transfers; NULL allowed). */
json_t *ctl__json_done(json_t *o, int bad);

/* ---- command builders (builders.c), shared by the ctl_cmd_*() of every file ---- */
/* A new command object {"op": op}; NULL on allocation failure. Caller frees with json_decref(). */
json_t *ctl__cmd_op_new(const char *op);
/* Dumps cmd (consumed, NULL allowed: CTL_ENOMEM) into *out (caller frees with ctl_free()) with
 * expected_revision when it is not 0 (CTL_EINVALID above CTL_U64_JSON_MAX); bad is the OR of the
 * earlier ctl__json_set results (CTL_ENOMEM when not 0). */
int ctl__cmd_finish(json_t *cmd, int bad, uint64_t expected_revision, char **out);
/* The sorted JSON array of the hash slots set in bits[0..CTL_HASH_SLOT_BYTES) (borrowed for the
 * call); NULL on allocation failure. */
json_t *ctl__json_slots_new(const uint8_t *bits);
/* Canonical dump (sorted keys, compact). NULL on allocation failure; caller frees with
 * ctl_free(). */
char *ctl__json_dump(const json_t *v, size_t *len);

/* Makes the placement of state (borrowed for the call) from its active data nodes: fills groups
 * and the hash-slot table (version 1). Returns CTL_EINVALID when there is no active data node. */
int ctl__state_place(struct ctl_state *state);

/* Number of nodes of state that are active and have the data role. */
uint32_t ctl__active_data_nodes(const struct ctl_state *state);

/* ---- command outcomes, shared by apply.c and the task command files ---- */

/* Sets r->outcome = o and formats the reason; returns CTL_OK so handlers can `return` it. */
int ctl__outcome(struct ctl_result *r, enum ctl_outcome o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CTL__REJECT(r, ...) ctl__outcome(r, CTL_OUTCOME_REJECTED, __VA_ARGS__)
#define CTL__NOOP(r, ...) ctl__outcome(r, CTL_OUTCOME_NOOP, __VA_ARGS__)
/* Reads a command field; on a decode error the command is rejected with the reader's sentence. */
#define CTL__READ(r, expr)                                                                         \
    do {                                                                                           \
        if ((expr) != CTL_OK) {                                                                    \
            (r)->outcome = CTL_OUTCOME_REJECTED;                                                   \
            return CTL_OK;                                                                         \
        }                                                                                          \
    } while (0)
#define CTL__RS(r) (r)->reason, sizeof((r)->reason)

/* Small helpers every command and codec file uses. */
#define CTL__N(a) (sizeof(a) / sizeof((a)[0]))
#define CTL__ULL(v) ((unsigned long long)(v))
/* Returns expr's CTL_* error from the enclosing function unless it is CTL_OK. */
#define CTL__TRY(expr)                                                                             \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != CTL_OK) {                                                                       \
            return rc_;                                                                            \
        }                                                                                          \
    } while (0)
/* Writes "<field>: <what is wrong>" into the enclosing function's err[0..errlen) and returns
 * CTL_ESTATE from it. */
#define CTL__FAIL(...)                                                                             \
    do {                                                                                           \
        ctl__errf(err, errlen, __VA_ARGS__);                                                       \
        return CTL_ESTATE;                                                                         \
    } while (0)

/* REJECTED unless cmd's optional "expected_revision" is absent or equals s->revision; required
 * makes an absent one REJECTED too ("expected_revision: required ..."). Returns true when the
 * command may go on; cmd and s are borrowed for the call. */
bool ctl__expected_revision_ok(const struct ctl_state *s, const json_t *cmd, bool required,
                               struct ctl_result *r);

/* Index of the done phase of kind (CTL_PHASE_*_DONE); 0 for a kind without phases. */
uint32_t ctl__task_done_phase(enum ctl_task_kind kind);

/* True for pending and running tasks. */
bool ctl__task_active(const struct ctl_task *t);

/* True when task t (borrowed for the call) occupies group (!= 0): t->group == group, or t is a
 * hash_slot_migration with to_group == group. Says nothing about t being active. */
bool ctl__task_occupies(const struct ctl_task *t, uint32_t group);

/* Hash-slot bitmaps (struct ctl_task.hash_slots): bit s%8 of byte s/8 is hash slot s. */
/* The reason every command a disabled hash-slot migration refuses starts with. */
#define CTL__MIGRATION_OFF                                                                         \
    "hash-slot migration is off in the cluster state (Admin.SetFeature hash_slot_migration)"

#define CTL__SLOT_HAS(bits, s) ((((bits)[(s) / 8] >> ((s) % 8)) & 1u) != 0)
#define CTL__SLOT_ADD(bits, s) ((bits)[(s) / 8] |= (uint8_t)(1u << ((s) % 8)))

/* Number of hash slots set in bits[0..CTL_HASH_SLOT_BYTES) (borrowed for the call). */
uint32_t ctl__slots_count(const uint8_t *bits);

/* The group that table (borrowed for the call) maps hash slot slot to; 0 when it has no range
 * holding the slot (no table yet, or slot >= CTL_HASH_SLOTS). */
uint32_t ctl__table_group(const struct ctl_hash_slot_table *table, uint32_t slot);

/* True when id is in the sorted set v[0..n) (borrowed for the call). */
bool ctl__set_has(const uint64_t *v, uint32_t n, uint64_t id);

/* Task command handlers (task.c, task_advance.c): cmd and s are borrowed for the call; each sets
 * r->outcome and returns CTL_OK (CTL_ENOMEM is never needed: they do not allocate). */
int ctl__op_task_create(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_task_advance(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_task_progress(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_task_fail(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_task_retry(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_task_abort(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_node_remove(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_controller_voter_demote(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);

/* The node named by cmd[key] that is not removed (borrowed from s), or NULL with r REJECTED
 * ("KEY: node N is unknown" / "... is removed", or the field's own error). apply.c. */
struct ctl_node *ctl__existing_node(struct ctl_state *s, const json_t *cmd, const char *key,
                                    struct ctl_result *r);
/* The running task named by cmd's fence fields "task", "attempt", "phase" (and "group",
 * "config_epoch" when with_group): NULL with r NOOP ("stale fence: ...") when it does not match,
 * or REJECTED when a field is malformed. Borrowed from s. */
struct ctl_task *ctl__task_fence(struct ctl_state *s, const json_t *cmd, bool with_group,
                                 struct ctl_result *r);

/* Time of a task command: cmd's "now_ms" (run_op has checked it), raised to updated_ms so a
 * leader with a slower clock never moves updated_ms back. */
uint64_t ctl__task_now(const struct ctl_task *t, const json_t *cmd);

/* Users and roles (auth.c). The section's rules (ctl_state_validate calls it), its JSON ("auth",
 * present only when enabled; NULL on allocation failure) and its strict decode (o borrowed; *a
 * written). */
int ctl__auth_validate(const struct ctl_state *s, char *err, size_t errlen);
json_t *ctl__auth_encode(const struct ctl_auth *a);
int ctl__auth_decode(const json_t *o, struct ctl_auth *a, char *err, size_t errlen);
int ctl__op_auth_init(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_user_add(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_user_delete(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_user_passwd(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_user_grant_role(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_user_revoke_role(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_role_add(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_role_delete(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_role_grant(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_role_revoke(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);

/* The backup plan (backup_plan.c): its rules (ctl_state_validate calls it), JSON ("backup",
 * present when set or a run was started; NULL on allocation failure), strict decode (o borrowed;
 * *b written) and commands. */
int ctl__backup_validate(const struct ctl_state *s, char *err, size_t errlen);
json_t *ctl__backup_encode(const struct ctl_backup_plan *b);
int ctl__backup_decode(const json_t *o, struct ctl_backup_plan *b, char *err, size_t errlen);
int ctl__op_backup_plan_set(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_backup_plan_delete(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_backup_run_start(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);
int ctl__op_backup_run_report(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);

#endif
