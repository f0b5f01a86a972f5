/* slotctl_kv.c - slotctl's get --prefix (range pages), txn (etcdctl-style text) and watch. */
#include "call.h"
#include "slotctl_cmds.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A refused argument or reply: the message into err, -1. */
#define kv_fail(err, errlen, ...) slotd_call_fail(err, errlen, -1, __VA_ARGS__)

/* ---- get --prefix ------------------------------------------------------------------------ */

int slotctl_range_run(struct slotd_client *c, const struct slotctl_args *a)
{
    json_t *entries = a->json && !a->count_only ? json_array() : NULL;
    uint64_t total = 0, pages = 0;
    bool more = true;
    int code = SLOTCTL_EXIT_OK;
    struct slotd_range_query *q = slotd_range_query_create();
    if (!q || slotd_range_query_set_prefix(q, a->prefix, strlen(a->prefix)) != SLOTD_CLIENT_OK) {
        code = slotctl_error_report(a, SLOTD_CLIENT_ENOMEM, NULL);
        goto done;
    }
    slotd_range_query_set_keys_only(q, a->keys_only);
    slotd_range_query_set_count_only(q, a->count_only);
    slotd_range_query_set_consistency(q, a->consistency);
    while (more && (a->limit == 0 || total < a->limit)) {
        uint64_t want = a->limit ? a->limit - total : SLOTD_RANGE_LIMIT_MAX;
        slotd_range_query_set_limit(
            q, (uint32_t)(want < SLOTD_RANGE_LIMIT_MAX ? want : SLOTD_RANGE_LIMIT_MAX));
        struct slotd_range_page *p = NULL;
        struct slotd_error *err = NULL;
        int rc = slotd_client_range(c, q, &p, &err);
        if (rc != SLOTD_CLIENT_OK) {
            code = slotctl_error_report_free(a, rc, err);
            goto done;
        }
        pages++;
        total += a->count_only ? p->count : p->entry_count;
        for (size_t i = 0; i < p->entry_count; i++) {
            const struct slotd_range_entry *e = p->entries[i];
            if (entries) {
                json_t *j = json_object();
                slotctl_json_set_bytes(j, "key", e->key, e->key_len);
                if (!a->keys_only)
                    slotctl_json_set_bytes(j, "value", e->value, e->value_len);
                json_object_set_new(j, "version", json_integer((json_int_t)e->version));
                json_array_append_new(entries, j);
            } else if (!a->json) {
                slotctl_bytes_print(stdout, e->key, e->key_len);
                putchar('\n');
                if (!a->keys_only) {
                    slotctl_bytes_print(stdout, e->value, e->value_len);
                    putchar('\n');
                }
            }
        }
        more = p->more;
        rc = slotd_range_query_set_cursor(q, p->cursor, p->cursor_len); /* the next page's */
        slotd_range_page_destroy(p);
        if (rc != SLOTD_CLIENT_OK) {
            code = slotctl_error_report(a, rc, NULL);
            goto done;
        }
    }
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string("get"));
        json_object_set_new(j, "ok", json_true());
        slotctl_json_set_bytes(j, "prefix", (const uint8_t *)a->prefix, strlen(a->prefix));
        json_object_set_new(j, "consistency",
                            json_string(slotctl_consistency_name(a->consistency)));
        json_object_set_new(j, "count", json_integer((json_int_t)total));
        json_object_set_new(j, "pages", json_integer((json_int_t)pages));
        json_object_set_new(j, "more", json_boolean(more));
        if (entries) {
            json_object_set_new(j, "entries", entries);
            entries = NULL;
        }
        slotctl_json_print(j);
    } else if (a->count_only) {
        printf("%" PRIu64 "\n", total);
    }
done:
    json_decref(entries);
    slotd_range_query_destroy(q);
    return code;
}

/* ---- txn text ------------------------------------------------------------------------------ */

struct kv_lex {
    char *p;    /* next unread byte of the line */
    int line;   /* 1-based, for messages */
    char *err;
    size_t errlen;
};

static void kv_skip_space(struct kv_lex *l)
{
    while (*l->p == ' ' || *l->p == '\t')
        l->p++;
}

static int kv_hex(int ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Reads one word: "quoted" (unescaped in place) or bare up to a space or one of stops.
 * *out and *len name the bytes (inside the text). */
static int kv_word(struct kv_lex *l, const char *stops, const char *what, const void **out,
                   size_t *len)
{
    kv_skip_space(l);
    if (*l->p == '"') {
        char *w = ++l->p, *dst = w;
        for (;;) {
            char ch = *l->p;
            if (ch == '\0')
                return kv_fail(l->err, l->errlen, "line %d: %s: no closing quote", l->line, what);
            l->p++;
            if (ch == '"')
                break;
            if (ch == '\\') {
                char e = *l->p++;
                if (e == 'n')
                    ch = '\n';
                else if (e == 't')
                    ch = '\t';
                else if (e == '"' || e == '\\')
                    ch = e;
                else if (e == 'x' && kv_hex(l->p[0]) >= 0 && kv_hex(l->p[1]) >= 0) {
                    ch = (char)(kv_hex(l->p[0]) * 16 + kv_hex(l->p[1]));
                    l->p += 2;
                } else
                    return kv_fail(l->err, l->errlen, "line %d: %s: unknown escape \\%c",
                                   l->line, what, e ? e : '0');
            }
            *dst++ = ch;
        }
        *out = w;
        *len = (size_t)(dst - w);
        return 0;
    }
    char *w = l->p;
    while (*l->p && *l->p != ' ' && *l->p != '\t' && !strchr(stops, *l->p))
        l->p++;
    if (l->p == w)
        return kv_fail(l->err, l->errlen, "line %d: %s: missing", l->line, what);
    *out = w;
    *len = (size_t)(l->p - w);
    return 0;
}

/* Consumes the literal s (after spaces); false when it is not next. */
static bool kv_take(struct kv_lex *l, const char *s)
{
    kv_skip_space(l);
    size_t n = strlen(s);
    if (strncmp(l->p, s, n) != 0)
        return false;
    l->p += n;
    return true;
}

static int kv_line_end(struct kv_lex *l)
{
    kv_skip_space(l);
    if (*l->p)
        return kv_fail(l->err, l->errlen, "line %d: unexpected text '%.20s'", l->line, l->p);
    return 0;
}

/* value("K") OP "V" | version("K") OP "N" | mod("K") OP "N" | exists("K") | absent("K") */
static int kv_compare(struct kv_lex *l, struct slotctl_txn_compare *c)
{
    memset(c, 0, sizeof(*c));
    static const struct {
        const char *name;
        int target;
    } targets[] = {{"value", SLOTD_TXN_TARGET_VALUE},   {"version", SLOTD_TXN_TARGET_VERSION},
                   {"mod", SLOTD_TXN_TARGET_VERSION},   {"exists", SLOTD_TXN_TARGET_EXISTS},
                   {"absent", SLOTD_TXN_TARGET_ABSENT}};
    kv_skip_space(l);
    size_t k;
    for (k = 0; k < sizeof(targets) / sizeof(targets[0]); k++) {
        size_t n = strlen(targets[k].name);
        if (strncmp(l->p, targets[k].name, n) == 0 && l->p[n] == '(') {
            l->p += n + 1;
            break;
        }
    }
    if (k == sizeof(targets) / sizeof(targets[0]))
        return kv_fail(l->err, l->errlen,
                       "line %d: a compare is value(K), version(K), mod(K), exists(K) or "
                       "absent(K)",
                       l->line);
    c->target = targets[k].target;
    if (kv_word(l, ")", "compare key", &c->key, &c->key_len) != 0)
        return -1;
    if (!kv_take(l, ")"))
        return kv_fail(l->err, l->errlen, "line %d: compare key: no closing ')'", l->line);
    if (c->target == SLOTD_TXN_TARGET_EXISTS || c->target == SLOTD_TXN_TARGET_ABSENT)
        return kv_line_end(l);
    if (kv_take(l, "!="))
        c->op = SLOTD_TXN_CMP_NOT_EQUAL;
    else if (kv_take(l, "==") || kv_take(l, "="))
        c->op = SLOTD_TXN_CMP_EQUAL;
    else if (kv_take(l, ">"))
        c->op = SLOTD_TXN_CMP_GREATER;
    else if (kv_take(l, "<"))
        c->op = SLOTD_TXN_CMP_LESS;
    else
        return kv_fail(l->err, l->errlen, "line %d: compare operator: one of = != > <", l->line);
    const void *v;
    size_t vlen;
    if (kv_word(l, "", "compare value", &v, &vlen) != 0)
        return -1;
    if (c->target == SLOTD_TXN_TARGET_VALUE) {
        c->value = v;
        c->value_len = vlen;
    } else {
        char num[24];
        char *end;
        if (vlen == 0 || vlen >= sizeof(num))
            return kv_fail(l->err, l->errlen, "line %d: version: not an integer", l->line);
        memcpy(num, v, vlen);
        num[vlen] = '\0';
        errno = 0;
        c->version = strtoull(num, &end, 10);
        if (errno || *end || num[0] == '-')
            return kv_fail(l->err, l->errlen, "line %d: version '%s' is not an integer",
                           l->line, num);
    }
    return kv_line_end(l);
}

/* put K V | del K | delete K | get K */
static int kv_op(struct kv_lex *l, struct slotctl_txn_op *op)
{
    memset(op, 0, sizeof(*op));
    if (kv_take(l, "put ") || kv_take(l, "put\t"))
        op->kind = SLOTD_TXN_PUT;
    else if (kv_take(l, "delete ") || kv_take(l, "del ") || kv_take(l, "delete\t") ||
             kv_take(l, "del\t"))
        op->kind = SLOTD_TXN_DELETE;
    else if (kv_take(l, "get ") || kv_take(l, "get\t"))
        op->kind = SLOTD_TXN_GET;
    else
        return kv_fail(l->err, l->errlen, "line %d: an op is put K V, del K or get K", l->line);
    if (kv_word(l, "", "key", &op->key, &op->key_len) != 0)
        return -1;
    if (op->kind == SLOTD_TXN_PUT && kv_word(l, "", "value", &op->value, &op->value_len) != 0)
        return -1;
    return kv_line_end(l);
}

int slotctl_txn_parse(char *text, struct slotctl_txn_text *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    struct kv_lex l = {.err = err, .errlen = errlen};
    int section = 0; /* 0 compares, 1 success, 2 failure */
    char *line = text;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r')
            line[--n] = '\0';
        l.line++;
        l.p = line;
        kv_skip_space(&l);
        if (*l.p == '\0') {
            if (++section > 2)
                return kv_fail(err, errlen, "line %d: more than three sections (compares, "
                                            "success ops, failure ops)",
                               l.line);
        } else if (*l.p != '#') {
            int rc;
            if (section == 0) {
                if (t->compare_count == SLOTD_TXN_COMPARES_MAX)
                    return kv_fail(err, errlen, "line %d: more than %d compares", l.line,
                                   SLOTD_TXN_COMPARES_MAX);
                rc = kv_compare(&l, &t->compares[t->compare_count++]);
            } else {
                size_t *count = section == 1 ? &t->success_count : &t->failure_count;
                struct slotctl_txn_op *ops = section == 1 ? t->success : t->failure;
                if (*count == SLOTD_TXN_OPS_MAX)
                    return kv_fail(err, errlen, "line %d: more than %d %s ops", l.line,
                                   SLOTD_TXN_OPS_MAX, section == 1 ? "success" : "failure");
                rc = kv_op(&l, &ops[(*count)++]);
            }
            if (rc != 0)
                return -1;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!t->compare_count && !t->success_count && !t->failure_count)
        return kv_fail(err, errlen, "the txn has no compare and no op");
    return 0;
}

struct slotd_txn *slotctl_txn_build(const struct slotctl_txn_text *t)
{
    struct slotd_txn *txn = slotd_txn_create();
    int rc = txn ? SLOTD_CLIENT_OK : SLOTD_CLIENT_ENOMEM;
    for (size_t i = 0; i < t->compare_count && rc != SLOTD_CLIENT_ENOMEM; i++) {
        const struct slotctl_txn_compare *c = &t->compares[i];
        rc = slotd_txn_add_compare(txn, c->key, c->key_len, c->target, c->op, c->version,
                                   c->value, c->value_len);
    }
    /* a refused add is kept by the txn and reported, naming the field, by slotd_client_txn */
    for (int b = 0; b < 2; b++) {
        const struct slotctl_txn_op *ops = b == 0 ? t->success : t->failure;
        size_t n = b == 0 ? t->success_count : t->failure_count;
        for (size_t i = 0; i < n && rc != SLOTD_CLIENT_ENOMEM; i++)
            rc = slotd_txn_add_op(txn, b == 0 ? SLOTD_TXN_SUCCESS : SLOTD_TXN_FAILURE,
                                  ops[i].kind, ops[i].key, ops[i].key_len, ops[i].value,
                                  ops[i].value_len, 0);
    }
    if (rc == SLOTD_CLIENT_ENOMEM) {
        slotd_txn_destroy(txn);
        return NULL;
    }
    return txn;
}

static const char *kv_op_name(int kind)
{
    return kind == SLOTD_TXN_PUT ? "put" : kind == SLOTD_TXN_DELETE ? "delete" : "get";
}

int slotctl_txn_run(struct slotd_client *c, const struct slotctl_args *a)
{
    char *text = malloc(SLOTCTL_TXN_TEXT_MAX + 1);
    struct slotctl_txn_text *t = malloc(sizeof(*t));
    int code = SLOTCTL_EXIT_OTHER;
    if (!text || !t) {
        fprintf(stderr, "slotctl: txn: out of memory\n");
        goto out;
    }
    size_t n = fread(text, 1, SLOTCTL_TXN_TEXT_MAX + 1, stdin);
    if (n > SLOTCTL_TXN_TEXT_MAX) {
        fprintf(stderr, "slotctl: txn: stdin holds more than %u bytes\n", SLOTCTL_TXN_TEXT_MAX);
        code = SLOTCTL_EXIT_USAGE;
        goto out;
    }
    text[n] = '\0';
    if (memchr(text, '\0', n)) {
        fprintf(stderr, "slotctl: txn: stdin holds a NUL byte (use \\x00 inside quotes)\n");
        code = SLOTCTL_EXIT_USAGE;
        goto out;
    }
    char err[256];
    if (slotctl_txn_parse(text, t, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotctl: txn: %s\n", err);
        code = SLOTCTL_EXIT_USAGE;
        goto out;
    }
    struct slotd_txn_result *rp = NULL;
    struct slotd_error *e = NULL;
    struct slotd_txn *txn = slotctl_txn_build(t);
    int rc = txn ? slotd_client_txn(c, txn, &rp, &e) : SLOTD_CLIENT_ENOMEM;
    slotd_txn_destroy(txn);
    if (rc != SLOTD_CLIENT_OK) {
        code = slotctl_error_report_free(a, rc, e);
        goto out;
    }
    const struct slotd_txn_result *r = rp;
    code = r->succeeded ? SLOTCTL_EXIT_OK : SLOTCTL_EXIT_PRECONDITION;
    const struct slotctl_txn_op *ops = r->succeeded ? t->success : t->failure;
    size_t op_count = r->succeeded ? t->success_count : t->failure_count;
    json_t *results = a->json ? json_array() : NULL;
    if (!a->json)
        printf("%s\n", r->succeeded ? "SUCCESS" : "FAILURE");
    for (size_t i = 0; i < r->result_count && i < op_count; i++) {
        const struct slotd_txn_op_result *o = r->results[i];
        const struct slotctl_txn_op *op = &ops[i];
        if (results) {
            json_t *j = json_object();
            json_object_set_new(j, "op", json_string(kv_op_name(o->kind)));
            slotctl_json_set_bytes(j, "key", op->key, op->key_len);
            if (o->kind == SLOTD_TXN_GET) {
                json_object_set_new(j, "found", json_boolean(o->found));
                if (o->found)
                    slotctl_json_set_bytes(j, "value", o->value, o->value_len);
            }
            if (o->kind == SLOTD_TXN_DELETE)
                json_object_set_new(j, "deleted", json_boolean(o->deleted));
            if (o->kind != SLOTD_TXN_DELETE)
                json_object_set_new(j, "version", json_integer((json_int_t)o->version));
            if (o->kind != SLOTD_TXN_GET)
                json_object_set_new(j, "prev_version", json_integer((json_int_t)o->prev_version));
            json_array_append_new(results, j);
            continue;
        }
        printf("%-6s ", kv_op_name(o->kind));
        slotctl_bytes_print(stdout, op->key, op->key_len);
        if (o->kind == SLOTD_TXN_PUT)
            printf("  version %llu  prev_version %llu\n", (unsigned long long)o->version,
                   (unsigned long long)o->prev_version);
        else if (o->kind == SLOTD_TXN_DELETE)
            printf("  %s  prev_version %llu\n", o->deleted ? "DELETED" : "ABSENT",
                   (unsigned long long)o->prev_version);
        else if (!o->found)
            printf("  NOT FOUND\n");
        else {
            printf("  version %llu  ", (unsigned long long)o->version);
            slotctl_bytes_print(stdout, o->value, o->value_len);
            putchar('\n');
        }
    }
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string("txn"));
        json_object_set_new(j, "ok", json_true());
        json_object_set_new(j, "succeeded", json_boolean(r->succeeded));
        json_object_set_new(j, "results", results);
        json_object_set_new(j, "group_id", json_integer(r->group_id));
        json_object_set_new(j, "applied_index", json_integer((json_int_t)r->applied_index));
        json_object_set_new(j, "deduplicated", json_boolean(r->deduplicated));
        json_object_set_new(j, "attempts", json_integer(r->attempts));
        json_object_set_new(j, "exit_code", json_integer(code));
        slotctl_json_print(j);
    }
    slotd_txn_result_destroy(rp);
out:
    free(text);
    free(t);
    return code;
}

/* ---- watch ------------------------------------------------------------------------------- */

int slotctl_resume_parse(const char *s, struct slotd_watch_position *out, size_t max,
                         size_t *count, char *err, size_t errlen)
{
    *count = 0;
    const char *p = s;
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p))
            return kv_fail(err, errlen, "--resume: '%.20s' is not GROUP:INDEX", p);
        errno = 0;
        unsigned long long g = strtoull(p, &end, 10);
        if (errno || *end != ':' || g == 0 || g > UINT32_MAX)
            return kv_fail(err, errlen, "--resume: '%.20s' is not GROUP:INDEX (group 1..%u)", p,
                           UINT32_MAX);
        p = end + 1;
        if (!isdigit((unsigned char)*p))
            return kv_fail(err, errlen, "--resume: group %llu: no index", g);
        unsigned long long idx = strtoull(p, &end, 10);
        if (errno || (*end && *end != ','))
            return kv_fail(err, errlen, "--resume: group %llu: '%.20s' is not an index", g, p);
        for (size_t i = 0; i < *count; i++)
            if (out[i].group_id == g)
                return kv_fail(err, errlen, "--resume: group %llu given twice", g);
        if (*count == max)
            return kv_fail(err, errlen, "--resume: more than %zu positions", max);
        out[(*count)++] = (struct slotd_watch_position){(uint32_t)g, idx};
        p = *end ? end + 1 : end;
    }
    if (*count == 0)
        return kv_fail(err, errlen, "--resume: empty");
    return 0;
}

static volatile sig_atomic_t kv_interrupted;

static void kv_on_signal(int sig)
{
    (void)sig;
    kv_interrupted = 1;
}

struct kv_watch {
    const struct slotctl_args *a;
    uint64_t events;
};

static const char *kv_table_name(int table)
{
    switch (table) {
    case SLOTD_TYPED_TABLE_USER:
        return "user";
    case SLOTD_TYPED_TABLE_DEVICE:
        return "device";
    case SLOTD_TYPED_TABLE_SYSTEM_UID:
        return "system_uid";
    case SLOTD_TYPED_TABLE_CHANNEL:
        return "channel";
    case SLOTD_TYPED_TABLE_CHANNEL_MEMBER:
        return "channel_member";
    case SLOTD_TYPED_TABLE_MEMBERSHIP:
        return "membership";
    case SLOTD_TYPED_TABLE_CMD_BINDING:
        return "cmd_binding";
    case SLOTD_TYPED_TABLE_RUNTIME_META:
        return "runtime_meta";
    case SLOTD_TYPED_TABLE_MIGRATION:
        return "migration";
    case SLOTD_TYPED_TABLE_PLUGIN:
        return "plugin";
    case SLOTD_TYPED_TABLE_EVENT:
        return "event";
    default:
        return "table";
    }
}

/* A typed row change: "PUT channel_member subscribers UID" for a member row (its key is
 * [len][channel id][list][uid]), else "PUT TABLE KEY" with the packed row in hex (--json:
 * table, key, key_hex, value_hex; members also list and uid). */
static void kv_typed_event_print(const struct slotctl_args *a, const struct slotd_watch_event *e)
{
    static const char *const lists[] = {"", "subscribers", "allowlist", "denylist"};
    bool put = e->type == SLOTD_WATCH_PUT;
    /* key [len u8][channel id][channel_type u8][list u8][uid] (store/FORMAT.md table 9) */
    size_t at = e->key_len >= 1 ? (size_t)e->key[0] + 2 : 0; /* the list byte */
    bool member = e->table == SLOTD_TYPED_TABLE_CHANNEL_MEMBER && e->key_len >= 3 &&
                  at < e->key_len && e->key[at] >= 1 && e->key[at] <= 3;
    const uint8_t *uid = member ? e->key + at + 1 : NULL;
    size_t uid_len = member ? e->key_len - at - 1 : 0;
    const char *list = member ? lists[e->key[at]] : NULL;
    if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "type", json_string(put ? "put" : "delete"));
        json_object_set_new(j, "table", json_string(kv_table_name(e->table)));
        slotctl_json_set_bytes(j, "key", e->key, e->key_len);
        if (member) {
            json_object_set_new(j, "list", json_string(list));
            slotctl_json_set_bytes(j, "uid", uid, uid_len);
        }
        if (put && !a->keys_only && e->value_len > 0) {
            char *hex = malloc(2 * e->value_len + 1);
            if (hex) {
                slotctl_hex_of(e->value, e->value_len, hex);
                json_object_set_new(j, "value_hex", json_string(hex));
                free(hex);
            }
        }
        json_object_set_new(j, "group_id", json_integer(e->group_id));
        json_object_set_new(j, "index", json_integer((json_int_t)e->index));
        slotctl_json_print(j);
        return;
    }
    printf("%s %s ", put ? "PUT" : "DELETE", kv_table_name(e->table));
    if (member) {
        printf("%s ", list);
        slotctl_bytes_print(stdout, uid, uid_len);
    } else {
        slotctl_bytes_print(stdout, e->key, e->key_len);
        if (put && !a->keys_only && e->value_len > 0) {
            fputs(" 0x", stdout);
            for (size_t i = 0; i < e->value_len; i++)
                printf("%02x", e->value[i]);
        }
    }
    putchar('\n');
}

static int kv_watch_cb(void *arg, const struct slotd_watch_message *m)
{
    struct kv_watch *w = arg;
    /* Every event of a message is printed, also past --count: the resume token (positions
     * through this message) then skips nothing. */
    for (size_t i = 0; i < m->event_count; i++) {
        const struct slotd_watch_event *e = m->events[i];
        bool put = e->type == SLOTD_WATCH_PUT;
        w->events++;
        if (e->table != SLOTD_TYPED_TABLE_NONE) {
            kv_typed_event_print(w->a, e);
            continue;
        }
        if (w->a->json) {
            json_t *j = json_object();
            json_object_set_new(j, "type", json_string(put ? "put" : "delete"));
            slotctl_json_set_bytes(j, "key", e->key, e->key_len);
            if (put && !w->a->keys_only)
                slotctl_json_set_bytes(j, "value", e->value, e->value_len);
            json_object_set_new(j, "version", json_integer((json_int_t)e->version));
            json_object_set_new(j, "group_id", json_integer(e->group_id));
            json_object_set_new(j, "index", json_integer((json_int_t)e->index));
            slotctl_json_print(j);
            continue;
        }
        fputs(put ? "PUT " : "DELETE ", stdout);
        slotctl_bytes_print(stdout, e->key, e->key_len);
        if (put && !w->a->keys_only) {
            putchar(' ');
            slotctl_bytes_print(stdout, e->value, e->value_len);
        }
        putchar('\n');
    }
    fflush(stdout);
    return kv_interrupted || (w->a->count && w->events >= w->a->count);
}

/* "GROUP:INDEX,..." of the positions (caller frees), NULL on ENOMEM. */
static char *kv_token(const struct slotd_watch_position *p, size_t n)
{
    char *s = malloc(n * 32 + 1);
    if (!s)
        return NULL;
    size_t used = 0;
    s[0] = '\0';
    for (size_t i = 0; i < n; i++)
        used += (size_t)sprintf(s + used, "%s%" PRIu32 ":%" PRIu64, i ? "," : "", p[i].group_id,
                                p[i].index);
    return s;
}

/* The watch request of a (key NULL: a prefix or typed watch); NULL when out of memory. */
static struct slotd_watch_request *kv_watch_request(const struct slotctl_args *a, const char *key,
                                                   const struct slotd_watch_position *resume,
                                                   size_t resume_count)
{
    struct slotd_watch_request *w = slotd_watch_request_create();
    if (!w)
        return NULL;
    int rc = SLOTD_CLIENT_OK;
    if (key)
        rc = slotd_watch_request_set_key(w, key, strlen(key));
    if (rc == SLOTD_CLIENT_OK && a->has_prefix)
        rc = slotd_watch_request_set_prefix(w, a->prefix, strlen(a->prefix));
    if (rc == SLOTD_CLIENT_OK && a->typed_kind)
        rc = slotd_watch_request_set_typed(w, a->typed_kind, a->typed_id);
    if (rc == SLOTD_CLIENT_OK && resume_count)
        rc = slotd_watch_request_set_resume(w, resume, resume_count);
    if (rc != SLOTD_CLIENT_OK) {
        slotd_watch_request_destroy(w);
        return NULL;
    }
    slotd_watch_request_set_progress_interval_ms(w, 1000); /* the callback sees SIGINT in 1 s */
    slotd_watch_request_set_keys_only(w, a->keys_only);
    slotd_watch_request_set_timeout_ms(w, a->timeout_s * 1000);
    slotd_watch_request_set_max_resumes(w, -1);
    return w;
}

int slotctl_watch_run(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_watch_position *resume = NULL;
    size_t resume_count = 0;
    if (a->resume) {
        char err[256];
        resume = calloc(SLOTD_WATCH_GROUPS_MAX, sizeof(*resume));
        if (!resume)
            return SLOTCTL_EXIT_OTHER;
        if (slotctl_resume_parse(a->resume, resume, SLOTD_WATCH_GROUPS_MAX, &resume_count, err,
                                 sizeof(err)) != 0) {
            fprintf(stderr, "slotctl: %s\n", err);
            free(resume);
            return SLOTCTL_EXIT_USAGE;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = kv_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    const char *key = a->has_prefix || a->typed_kind ? NULL : a->pos[0];
    struct slotd_watch_request *w = kv_watch_request(a, key, resume, resume_count);
    free(resume);
    struct kv_watch state = {.a = a};
    struct slotd_watch_result *rp = NULL;
    struct slotd_error *e = NULL;
    int rc = w ? slotd_client_watch(c, w, kv_watch_cb, &state, &rp, &e) : SLOTD_CLIENT_ENOMEM;
    slotd_watch_request_destroy(w);
    int code;
    const struct slotd_watch_result *r = rp; /* NULL when the watch never ran */
    if (rc != SLOTD_CLIENT_OK) {
        code = slotctl_error_report(a, rc, e);
    } else {
        /* --count not reached within --timeout: the wait timed out */
        code = r && r->timed_out && a->count && state.events < a->count ? SLOTCTL_EXIT_WAIT_TIMEOUT
                                                                   : SLOTCTL_EXIT_OK;
    }
    slotd_error_destroy(e);
    char *token = r ? kv_token(r->positions, r->position_count) : NULL;
    if (a->json && rc != SLOTD_CLIENT_OK) {
        /* the error object is the result */
    } else if (a->json) {
        json_t *j = json_object();
        json_object_set_new(j, "command", json_string("watch"));
        json_object_set_new(j, "ok", json_boolean(rc == SLOTD_CLIENT_OK));
        json_object_set_new(j, "events", json_integer((json_int_t)state.events));
        json_object_set_new(j, "resumes", json_integer(r ? r->resumes : 0));
        json_object_set_new(j, "timed_out", json_boolean(r && r->timed_out));
        json_object_set_new(j, "resume", json_string(token ? token : ""));
        json_object_set_new(j, "exit_code", json_integer(code));
        slotctl_json_print(j);
    } else {
        printf("RESUME %s\n", token ? token : "");
    }
    free(token);
    slotd_watch_result_destroy(rp);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    return code;
}
