/* example.c - a complete libslotd program: put, get, compare-and-set, a range and a delete. */
#include <slotd/client.h>

#include <stdio.h>
#include <string.h>

/* Prints why a call failed (the error's sentence names the call, the node and the field; what
 * names it when there is no error object) and frees err; returns 1, the exit code then. */
static int fail(const char *what, int rc, struct slotd_error *err)
{
    if (err)
        fprintf(stderr, "example: %s\n", slotd_error_message(err));
    else
        fprintf(stderr, "example: %s: %s\n", what, slotd_client_strerror(rc));
    slotd_error_destroy(err);
    return 1;
}

/* Writes three keys under prefix, reads one back, bumps it with a CAS, lists the prefix and
 * deletes one key. Returns 0, or 1 after the first failed call. */
static int run(struct slotd_client *c, const char *prefix)
{
    struct slotd_error *err = NULL;
    char key[128];
    for (int i = 0; i < 3; i++) {
        char value[32];
        snprintf(key, sizeof(key), "%s%d", prefix, i);
        snprintf(value, sizeof(value), "value-%d", i);
        struct slotd_write_result *w;
        int rc = slotd_client_put(c, key, strlen(key), value, strlen(value), NULL, &w, &err);
        if (rc != SLOTD_CLIENT_OK)
            return fail("put", rc, err);
        printf("put %s version %llu group %u\n", key, (unsigned long long)w->version, w->group_id);
        slotd_write_result_destroy(w);
    }

    snprintf(key, sizeof(key), "%s0", prefix);
    struct slotd_value *v;
    int rc = slotd_client_get(c, key, strlen(key), NULL, &v, &err);
    if (rc != SLOTD_CLIENT_OK)
        return fail("get", rc, err);
    printf("get %s = %.*s (version %llu)\n", key, (int)v->value_len, (const char *)v->value,
           (unsigned long long)v->version);
    uint64_t version = v->version;
    slotd_value_destroy(v);

    /* only if nobody wrote the key since the get */
    struct slotd_write_result *w;
    rc = slotd_client_cas(c, key, strlen(key), version, "bumped", 6, false, NULL, &w, &err);
    if (rc != SLOTD_CLIENT_OK) {
        slotd_write_result_destroy(w); /* set on SLOTD_CLIENT_ECAS_MISMATCH */
        return fail("cas", rc, err);
    }
    printf("cas %s version %llu -> %llu\n", key, (unsigned long long)version,
           (unsigned long long)w->version);
    slotd_write_result_destroy(w);

    /* every key under the prefix, page by page (hash-slot order, not key order) */
    struct slotd_range_query *q = slotd_range_query_create();
    if (!q || slotd_range_query_set_prefix(q, prefix, strlen(prefix)) != SLOTD_CLIENT_OK) {
        slotd_range_query_destroy(q);
        return fail("range", SLOTD_CLIENT_ENOMEM, NULL);
    }
    size_t keys = 0;
    bool more = true;
    while (more) {
        struct slotd_range_page *p;
        rc = slotd_client_range(c, q, &p, &err);
        if (rc != SLOTD_CLIENT_OK) {
            slotd_range_query_destroy(q);
            return fail("range", rc, err);
        }
        keys += p->entry_count;
        more = p->more;
        rc = slotd_range_query_set_cursor(q, p->cursor, p->cursor_len); /* copied */
        slotd_range_page_destroy(p);
        if (rc != SLOTD_CLIENT_OK) {
            slotd_range_query_destroy(q);
            return fail("range", rc, NULL);
        }
    }
    slotd_range_query_destroy(q);
    printf("range %s* holds %zu keys\n", prefix, keys);

    snprintf(key, sizeof(key), "%s2", prefix);
    rc = slotd_client_delete(c, key, strlen(key), NULL, &w, &err);
    if (rc != SLOTD_CLIENT_OK)
        return fail("delete", rc, err);
    printf("delete %s %s\n", key, w->deleted ? "deleted" : "absent");
    slotd_write_result_destroy(w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: example ENDPOINTS PREFIX  (ENDPOINTS: host:port[,host:port...])\n");
        return 2;
    }
    struct slotd_options *o = slotd_options_create();
    if (!o)
        return fail("options", SLOTD_CLIENT_ENOMEM, NULL);
    slotd_options_set_deadline_ms(o, 2000);
    slotd_options_set_max_retries(o, 2);
    struct slotd_client *c;
    struct slotd_error *err = NULL;
    int rc = slotd_client_create(argv[1], o, &c, &err);
    slotd_options_destroy(o); /* the client keeps what it needs */
    if (rc != SLOTD_CLIENT_OK)
        return fail("client", rc, err);
    int code = run(c, argv[2]);
    slotd_client_destroy(c);
    return code;
}
