/* json.c - strict libjansson readers and canonical writers shared by decode, apply and builders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void ctl__json_path(char *out, const char *path, const char *key)
{
    if (path[0] == '\0') {
        snprintf(out, CTL__PATH_MAX, "%s", key);
    } else {
        snprintf(out, CTL__PATH_MAX, "%s.%s", path, key);
    }
}

static const char *at(const char *path)
{
    return path[0] ? path : "top level";
}

int ctl__json_fields(const json_t *obj, const char *path, const char *const *required,
                     size_t n_required, const char *const *optional, size_t n_optional, char *err,
                     size_t errlen)
{
    if (!json_is_object(obj)) {
        ctl__errf(err, errlen, "%s: expected an object", at(path));
        return CTL_EDECODE;
    }
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value)
    {
        if (ctl__name_index(required, n_required, key) < 0 &&
            ctl__name_index(optional, n_optional, key) < 0) {
            ctl__errf(err, errlen, "%s: unknown field \"%.64s\"", at(path), key);
            return CTL_EDECODE;
        }
    }
    for (size_t i = 0; i < n_required; i++) {
        if (json_object_get(obj, required[i]) == NULL) {
            ctl__errf(err, errlen, "%s: missing field \"%s\"", at(path), required[i]);
            return CTL_EDECODE;
        }
    }
    return CTL_OK;
}

int ctl__json_u64(const json_t *obj, const char *key, const char *path, uint64_t min, uint64_t max,
                  uint64_t *out, char *err, size_t errlen)
{
    char fp[CTL__PATH_MAX];
    ctl__json_path(fp, path, key);
    const json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        ctl__errf(err, errlen, "%s: missing", fp);
        return CTL_EDECODE;
    }
    if (!json_is_integer(v)) {
        ctl__errf(err, errlen, "%s: expected an integer", fp);
        return CTL_EDECODE;
    }
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i < min || (uint64_t)i > max) {
        ctl__errf(err, errlen, "%s: %lld not in %llu..%llu", fp, (long long)i,
                  (unsigned long long)min, (unsigned long long)max);
        return CTL_EDECODE;
    }
    *out = (uint64_t)i;
    return CTL_OK;
}

int ctl__json_u32(const json_t *obj, const char *key, const char *path, uint32_t min, uint32_t max,
                  uint32_t *out, char *err, size_t errlen)
{
    uint64_t v;
    int rc = ctl__json_u64(obj, key, path, min, max, &v, err, errlen);
    if (rc == CTL_OK) {
        *out = (uint32_t)v;
    }
    return rc;
}

/* obj[key] when it is of JSON type t (JSON_TRUE: either boolean); else NULL with "<fp>: expected
 * <what>" in err. fp receives the field's path ("path.key", CTL__PATH_MAX bytes). */
static json_t *typed_field(const json_t *obj, const char *key, const char *path, json_type t,
                           const char *what, char *fp, char *err, size_t errlen)
{
    ctl__json_path(fp, path, key);
    json_t *v = json_object_get(obj, key);
    if (v == NULL || !(json_typeof(v) == t || (t == JSON_TRUE && json_typeof(v) == JSON_FALSE))) {
        ctl__errf(err, errlen, "%s: expected %s", fp, what);
        return NULL;
    }
    return v;
}

int ctl__json_str(const json_t *obj, const char *key, const char *path, size_t max, char *out,
                  char *err, size_t errlen)
{
    char fp[CTL__PATH_MAX];
    const json_t *v = typed_field(obj, key, path, JSON_STRING, "a string", fp, err, errlen);
    if (v == NULL) {
        return CTL_EDECODE;
    }
    size_t n = json_string_length(v);
    if (n > max) {
        ctl__errf(err, errlen, "%s: %zu bytes, the limit is %zu", fp, n, max);
        return CTL_EDECODE;
    }
    memcpy(out, json_string_value(v), n);
    out[n] = '\0';
    return CTL_OK;
}

int ctl__json_bool(const json_t *obj, const char *key, const char *path, bool *out, char *err,
                   size_t errlen)
{
    char fp[CTL__PATH_MAX];
    const json_t *v = typed_field(obj, key, path, JSON_TRUE, "true or false", fp, err, errlen);
    if (v == NULL) {
        return CTL_EDECODE;
    }
    *out = json_is_true(v);
    return CTL_OK;
}

const char *const ctl_feature_names[CTL_FEATURE_NAMES_MAX] = {"hash_slot_migration",
                                                              "operations_mcp", "balance_paused"};

bool *ctl_feature_get(struct ctl_features *f, const char *name)
{
    if (strcmp(name, ctl_feature_names[0]) == 0)
        return &f->hash_slot_migration;
    if (strcmp(name, ctl_feature_names[1]) == 0)
        return &f->operations_mcp;
    if (strcmp(name, ctl_feature_names[2]) == 0)
        return &f->balance_paused;
    return NULL;
}

int ctl__features_read(const json_t *obj, const char *path, struct ctl_features *f, char *err,
                       size_t errlen)
{
    memset(f, 0, sizeof(*f));
    /* operations_mcp and balance_paused came later: a state or bootstrap without them has them
     * off. */
    int rc =
        ctl__json_fields(obj, path, ctl_feature_names, 1, ctl_feature_names + 1, 2, err, errlen);
    if (rc != CTL_OK) {
        return rc;
    }
    rc = ctl__json_bool(obj, "hash_slot_migration", path, &f->hash_slot_migration, err, errlen);
    if (rc == CTL_OK && json_object_get(obj, "operations_mcp") != NULL) {
        rc = ctl__json_bool(obj, "operations_mcp", path, &f->operations_mcp, err, errlen);
    }
    if (rc == CTL_OK && json_object_get(obj, "balance_paused") != NULL) {
        rc = ctl__json_bool(obj, "balance_paused", path, &f->balance_paused, err, errlen);
    }
    return rc;
}

int ctl__json_enum(const json_t *obj, const char *key, const char *path, const char *const *names,
                   size_t n, int *out, char *err, size_t errlen)
{
    char fp[CTL__PATH_MAX];
    const json_t *v = typed_field(obj, key, path, JSON_STRING, "a string", fp, err, errlen);
    if (v == NULL) {
        return CTL_EDECODE;
    }
    int i = ctl__name_index(names, n, json_string_value(v));
    if (i < 0) {
        char allowed[160] = "";
        size_t used = 0;
        for (size_t k = 0; k < n && used < sizeof(allowed); k++) {
            used += (size_t)snprintf(allowed + used, sizeof(allowed) - used, "%s%s", k ? "|" : "",
                                     names[k]);
        }
        ctl__errf(err, errlen, "%s: \"%.64s\" is not %s", fp, json_string_value(v), allowed);
        return CTL_EDECODE;
    }
    *out = i;
    return CTL_OK;
}

int ctl__json_array(const json_t *obj, const char *key, const char *path, size_t max, json_t **out,
                    char *err, size_t errlen)
{
    char fp[CTL__PATH_MAX];
    json_t *v = typed_field(obj, key, path, JSON_ARRAY, "an array", fp, err, errlen);
    if (v == NULL) {
        return CTL_EDECODE;
    }
    if (json_array_size(v) > max) {
        ctl__errf(err, errlen, "%s: %zu entries, the limit is %zu", fp, json_array_size(v), max);
        return CTL_EDECODE;
    }
    *out = v;
    return CTL_OK;
}

int ctl__json_set(json_t *obj, const char *key, json_t *v)
{
    return v == NULL ? -1 : json_object_set_new(obj, key, v);
}

int ctl__json_push(json_t *arr, json_t *v)
{
    return v == NULL ? -1 : json_array_append_new(arr, v);
}

json_t *ctl__json_done(json_t *o, int bad)
{
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ctl__json_u64_new(uint64_t v)
{
    return v > CTL_U64_JSON_MAX ? NULL : json_integer((json_int_t)v);
}

json_t *ctl__json_u64s_new(const uint64_t *v, uint32_t n)
{
    json_t *a = json_array();
    int bad = a == NULL;
    for (uint32_t i = 0; !bad && i < n; i++) {
        bad |= ctl__json_push(a, ctl__json_u64_new(v[i]));
    }
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

json_t *ctl__json_slots_new(const uint8_t *bits)
{
    json_t *a = json_array();
    int bad = a == NULL;
    for (uint32_t slot = 0; !bad && slot < CTL_HASH_SLOTS; slot++) {
        if (CTL__SLOT_HAS(bits, slot)) {
            bad |= ctl__json_push(a, json_integer(slot));
        }
    }
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

char *ctl__json_dump(const json_t *v, size_t *len)
{
    char *s = json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT);
    if (s != NULL && len != NULL) {
        *len = strlen(s);
    }
    return s;
}

void ctl_free(void *p)
{
    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    if (p != NULL) {
        f(p);
    }
}
