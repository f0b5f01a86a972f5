/* descset.c - walks a FileDescriptorSet's protobuf wire format (libprotobuf-c ships no
 * descriptor.proto code) and builds the symbol -> file index that server reflection answers from.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descset.h"
#include "status.h"

/* Field numbers of google/protobuf/descriptor.proto used here. */
enum {
    DS_SET_FILE = 1,
    DS_FILE_NAME = 1,
    DS_FILE_PACKAGE = 2,
    DS_FILE_DEPENDENCY = 3,
    DS_FILE_MESSAGE = 4,
    DS_FILE_ENUM = 5,
    DS_FILE_SERVICE = 6,
    DS_MSG_NAME = 1,
    DS_MSG_FIELD = 2,
    DS_MSG_NESTED = 3,
    DS_MSG_ENUM = 4,
    DS_MSG_ONEOF = 8,
    DS_ENUM_NAME = 1,
    DS_ENUM_VALUE = 2,
    DS_SERVICE_NAME = 1,
    DS_SERVICE_METHOD = 2,
    DS_NAMED_NAME = 1, /* FieldDescriptorProto, OneofDescriptorProto, EnumValue, Method */
};

/* A cursor over one message's bytes. */
struct wire {
    const uint8_t *p, *end;
};

/* One field: its number and, for length-delimited fields, the bytes. */
struct wire_field {
    uint32_t number;
    unsigned type;
    const uint8_t *buf;
    size_t len;
};

struct builder {
    struct rpc_descset *d;
    size_t cap_symbols;
    char *err;
    size_t errlen;
};

static int fail(struct builder *b, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->errlen, fmt, ap);
    va_end(ap);
    return code;
}

static bool wire_varint(struct wire *w, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (w->p == w->end) {
            return false;
        }
        uint8_t byte = *w->p++;
        r |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Reads the next field. Returns 1 on a field, 0 at the end, -1 on malformed input. */
static int wire_next(struct wire *w, struct wire_field *f)
{
    if (w->p == w->end) {
        return 0;
    }
    uint64_t key, v;
    if (!wire_varint(w, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX) {
        return -1;
    }
    f->number = (uint32_t)(key >> 3);
    f->type = (unsigned)(key & 7);
    f->buf = NULL;
    f->len = 0;
    size_t left;
    switch (f->type) {
    case 0:
        return wire_varint(w, &v) ? 1 : -1;
    case 1:
    case 5:
        left = (size_t)(w->end - w->p);
        if (left < (f->type == 1 ? 8u : 4u)) {
            return -1;
        }
        w->p += f->type == 1 ? 8 : 4;
        return 1;
    case 2:
        if (!wire_varint(w, &v) || v > (uint64_t)(w->end - w->p)) {
            return -1;
        }
        f->buf = w->p;
        f->len = (size_t)v;
        w->p += v;
        return 1;
    default:
        return -1; /* groups are not used by descriptor.proto */
    }
}

/* The string field `number` of the message in buf into out (NUL-terminated, "" when absent).
 * Returns false on malformed input or a value that does not fit. */
static bool wire_string(const uint8_t *buf, size_t len, uint32_t number, char *out, size_t outlen)
{
    struct wire w = {buf, buf + len};
    struct wire_field f;
    int rc;
    out[0] = '\0';
    while ((rc = wire_next(&w, &f)) == 1) {
        if (f.number == number && f.type == 2) {
            if (f.len >= outlen || memchr(f.buf, '\0', f.len) != NULL) {
                return false;
            }
            memcpy(out, f.buf, f.len);
            out[f.len] = '\0';
        }
    }
    return rc == 0;
}

static int symbol_add(struct builder *b, const char *scope, const char *name, size_t file,
                      enum rpc_descset_kind kind)
{
    struct rpc_descset *d = b->d;
    if (name[0] == '\0') {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: unnamed element in %s",
                    d->files[file].name);
    }
    if (d->n_symbols == RPC_DESCSET_SYMBOLS_MAX) {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: more than %d symbols",
                    RPC_DESCSET_SYMBOLS_MAX);
    }
    char full[RPC_DESCSET_NAME_MAX];
    int n = snprintf(full, sizeof(full), "%s%s%s", scope, scope[0] != '\0' ? "." : "", name);
    if (n < 0 || (size_t)n >= sizeof(full)) {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: name %s.%s too long", scope, name);
    }
    if (d->n_symbols == b->cap_symbols) {
        size_t cap = b->cap_symbols == 0 ? 256 : b->cap_symbols * 2;
        struct rpc_descset_symbol *grown = realloc(d->symbols, cap * sizeof(*grown));
        if (grown == NULL) {
            return fail(b, SLOTD_EINTERNAL, "descriptor set: out of memory");
        }
        d->symbols = grown;
        b->cap_symbols = cap;
    }
    char *copy = strdup(full);
    if (copy == NULL) {
        return fail(b, SLOTD_EINTERNAL, "descriptor set: out of memory");
    }
    d->symbols[d->n_symbols].name = copy;
    d->symbols[d->n_symbols].file = file;
    d->symbols[d->n_symbols].kind = kind;
    d->n_symbols++;
    return SLOTD_OK;
}

/* Adds the name (field DS_NAMED_NAME) of the sub-message in f under scope. */
static int named_add(struct builder *b, const char *scope, const struct wire_field *f, size_t file,
                     enum rpc_descset_kind kind)
{
    char name[RPC_DESCSET_NAME_MAX];
    if (!wire_string(f->buf, f->len, DS_NAMED_NAME, name, sizeof(name))) {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: bad element in %s", scope);
    }
    return symbol_add(b, scope, name, file, kind);
}

/* An EnumDescriptorProto in scope; its values are siblings of the enum (protoc's scoping). */
static int enum_index(struct builder *b, const char *scope, const uint8_t *buf, size_t len,
                      size_t file)
{
    char name[RPC_DESCSET_NAME_MAX];
    if (!wire_string(buf, len, DS_ENUM_NAME, name, sizeof(name))) {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: bad enum in %s", scope);
    }
    int rc = symbol_add(b, scope, name, file, RPC_DESCSET_ENUM);
    struct wire w = {buf, buf + len};
    struct wire_field f;
    while (rc == SLOTD_OK && wire_next(&w, &f) == 1) {
        if (f.number == DS_ENUM_VALUE && f.type == 2) {
            rc = named_add(b, scope, &f, file, RPC_DESCSET_ENUM_VALUE);
        }
    }
    return rc;
}

/* Reads the name (field number) of a message or service (what) in scope, adds it as a symbol of
 * kind and copies its full name into full (RPC_DESCSET_NAME_MAX bytes). */
static int scope_add(struct builder *b, const char *scope, const uint8_t *buf, size_t len,
                     uint32_t number, const char *what, size_t file, enum rpc_descset_kind kind,
                     char *full)
{
    char name[RPC_DESCSET_NAME_MAX];
    if (!wire_string(buf, len, number, name, sizeof(name))) {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: bad %s in %s", what, scope);
    }
    int rc = symbol_add(b, scope, name, file, kind);
    if (rc == SLOTD_OK) {
        snprintf(full, RPC_DESCSET_NAME_MAX, "%s", b->d->symbols[b->d->n_symbols - 1].name);
    }
    return rc;
}

/* A DescriptorProto in scope, with its fields, oneofs, nested messages and enums. */
static int message_index(struct builder *b, const char *scope, const uint8_t *buf, size_t len,
                         size_t file, unsigned depth)
{
    char full[RPC_DESCSET_NAME_MAX];
    if (depth > RPC_DESCSET_NESTING_MAX) {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: messages nested deeper than %d",
                    RPC_DESCSET_NESTING_MAX);
    }
    int rc = scope_add(b, scope, buf, len, DS_MSG_NAME, "message", file, RPC_DESCSET_MESSAGE, full);
    if (rc != SLOTD_OK) {
        return rc;
    }
    struct wire w = {buf, buf + len};
    struct wire_field f;
    while (rc == SLOTD_OK && wire_next(&w, &f) == 1) {
        if (f.type != 2) {
            continue;
        }
        if (f.number == DS_MSG_FIELD || f.number == DS_MSG_ONEOF) {
            rc = named_add(b, full, &f, file, RPC_DESCSET_FIELD);
        } else if (f.number == DS_MSG_NESTED) {
            rc = message_index(b, full, f.buf, f.len, file, depth + 1);
        } else if (f.number == DS_MSG_ENUM) {
            rc = enum_index(b, full, f.buf, f.len, file);
        }
    }
    return rc;
}

/* A ServiceDescriptorProto in scope, with its methods. */
static int service_index(struct builder *b, const char *scope, const uint8_t *buf, size_t len,
                         size_t file)
{
    char full[RPC_DESCSET_NAME_MAX];
    int rc =
        scope_add(b, scope, buf, len, DS_SERVICE_NAME, "service", file, RPC_DESCSET_SERVICE, full);
    if (rc != SLOTD_OK) {
        return rc;
    }
    struct wire w = {buf, buf + len};
    struct wire_field f;
    while (rc == SLOTD_OK && wire_next(&w, &f) == 1) {
        if (f.number == DS_SERVICE_METHOD && f.type == 2) {
            rc = named_add(b, full, &f, file, RPC_DESCSET_METHOD);
        }
    }
    return rc;
}

/* Indexes files[file] (already holding buf/len): its name first, then its top-level elements. */
static int file_index(struct builder *b, size_t file)
{
    struct rpc_descset_file *df = &b->d->files[file];
    char name[RPC_DESCSET_NAME_MAX], package[RPC_DESCSET_NAME_MAX];
    if (!wire_string(df->buf, df->len, DS_FILE_NAME, name, sizeof(name)) || name[0] == '\0' ||
        !wire_string(df->buf, df->len, DS_FILE_PACKAGE, package, sizeof(package))) {
        return fail(b, SLOTD_EMALFORMED, "descriptor set: file %zu has a bad name or package",
                    file);
    }
    df->name = strdup(name);
    if (df->name == NULL) {
        return fail(b, SLOTD_EINTERNAL, "descriptor set: out of memory");
    }
    struct wire w = {df->buf, df->buf + df->len};
    struct wire_field f;
    int rc = SLOTD_OK, more;
    while (rc == SLOTD_OK && (more = wire_next(&w, &f)) == 1) {
        if (f.type != 2) {
            continue;
        }
        if (f.number == DS_FILE_MESSAGE) {
            rc = message_index(b, package, f.buf, f.len, file, 0);
        } else if (f.number == DS_FILE_ENUM) {
            rc = enum_index(b, package, f.buf, f.len, file);
        } else if (f.number == DS_FILE_SERVICE) {
            rc = service_index(b, package, f.buf, f.len, file);
        }
    }
    if (rc == SLOTD_OK && more < 0) {
        rc = fail(b, SLOTD_EMALFORMED, "descriptor set: %s is malformed", name);
    }
    return rc;
}

/* Resolves the dependency names of files[file] to indexes (every file already named). */
static int file_link(struct builder *b, size_t file)
{
    struct rpc_descset_file *df = &b->d->files[file];
    struct wire w = {df->buf, df->buf + df->len};
    struct wire_field f;
    char dep[RPC_DESCSET_NAME_MAX];
    while (wire_next(&w, &f) == 1) {
        if (f.number != DS_FILE_DEPENDENCY || f.type != 2) {
            continue;
        }
        if (f.len >= sizeof(dep) || df->n_deps == RPC_DESCSET_DEPS_MAX) {
            return fail(b, SLOTD_EMALFORMED, "descriptor set: %s: too many or too long imports",
                        df->name);
        }
        memcpy(dep, f.buf, f.len);
        dep[f.len] = '\0';
        long i = rpc_descset_find_file(b->d, dep);
        if (i < 0) {
            return fail(b, SLOTD_EMALFORMED, "descriptor set: %s imports %s, which is not in it",
                        df->name, dep);
        }
        df->deps[df->n_deps++] = (size_t)i;
    }
    return SLOTD_OK;
}

static int symbol_cmp(const void *a, const void *b)
{
    return strcmp(((const struct rpc_descset_symbol *)a)->name,
                  ((const struct rpc_descset_symbol *)b)->name);
}

int rpc_descset_parse(const uint8_t *buf, size_t len, struct rpc_descset **out, char *err,
                      size_t errlen)
{
    char scratch[1];
    struct builder b = {.err = err != NULL && errlen > 0 ? err : scratch,
                        .errlen = err != NULL && errlen > 0 ? errlen : sizeof(scratch)};
    b.err[0] = '\0';
    b.d = calloc(1, sizeof(*b.d));
    if (b.d == NULL) {
        return fail(&b, SLOTD_EINTERNAL, "descriptor set: out of memory");
    }
    struct wire w = {buf, buf + len};
    struct wire_field f;
    int rc = SLOTD_OK, more;
    while ((more = wire_next(&w, &f)) == 1) {
        if (f.number != DS_SET_FILE || f.type != 2) {
            continue;
        }
        if (b.d->n_files == RPC_DESCSET_FILES_MAX) {
            rc = fail(&b, SLOTD_EMALFORMED, "descriptor set: more than %d files",
                      RPC_DESCSET_FILES_MAX);
            goto err_after_alloc;
        }
        b.d->files[b.d->n_files].buf = f.buf;
        b.d->files[b.d->n_files].len = f.len;
        rc = file_index(&b, b.d->n_files++);
        if (rc != SLOTD_OK) {
            goto err_after_alloc;
        }
    }
    if (more < 0) {
        rc = fail(&b, SLOTD_EMALFORMED, "descriptor set: malformed at byte %zu",
                  (size_t)(w.p - buf));
        goto err_after_alloc;
    }
    for (size_t i = 0; i < b.d->n_files; i++) {
        rc = file_link(&b, i);
        if (rc != SLOTD_OK) {
            goto err_after_alloc;
        }
    }
    if (b.d->n_symbols > 0) {
        qsort(b.d->symbols, b.d->n_symbols, sizeof(b.d->symbols[0]), symbol_cmp);
    }
    *out = b.d;
    return SLOTD_OK;

err_after_alloc:
    rpc_descset_free(b.d);
    return rc;
}

void rpc_descset_free(struct rpc_descset *d)
{
    if (d == NULL) {
        return;
    }
    for (size_t i = 0; i < d->n_symbols; i++) {
        free(d->symbols[i].name);
    }
    free(d->symbols);
    for (size_t i = 0; i < d->n_files; i++) {
        free(d->files[i].name);
    }
    free(d);
}

const struct rpc_descset_symbol *rpc_descset_find_symbol(const struct rpc_descset *d,
                                                         const char *name)
{
    if (d->n_symbols == 0) {
        return NULL;
    }
    struct rpc_descset_symbol key = {.name = (char *)name};
    return bsearch(&key, d->symbols, d->n_symbols, sizeof(key), symbol_cmp);
}

long rpc_descset_find_file(const struct rpc_descset *d, const char *name)
{
    for (size_t i = 0; i < d->n_files; i++) {
        if (d->files[i].name != NULL && strcmp(d->files[i].name, name) == 0) {
            return (long)i;
        }
    }
    return -1;
}

size_t rpc_descset_closure(const struct rpc_descset *d, size_t file, size_t *order)
{
    /* Breadth-first over the import graph; order[] doubles as the queue. */
    bool seen[RPC_DESCSET_FILES_MAX] = {false};
    size_t n = 0;
    order[n++] = file;
    seen[file] = true;
    for (size_t head = 0; head < n; head++) {
        const struct rpc_descset_file *f = &d->files[order[head]];
        for (size_t i = 0; i < f->n_deps; i++) {
            if (!seen[f->deps[i]]) {
                seen[f->deps[i]] = true;
                order[n++] = f->deps[i];
            }
        }
    }
    return n;
}
