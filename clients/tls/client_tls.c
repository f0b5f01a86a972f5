/* client_tls.c - reads TLS PEM files and builds gRPC SSL channel credentials. */
#include "client_tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const tls_err_text[] = {
#define CLIENT_TLS__TEXT(name, text) text,
    CLIENT_TLS_ERRORS(CLIENT_TLS__TEXT)
#undef CLIENT_TLS__TEXT
};

const char *client_tls_strerror(int err)
{
    if (err < 0 || err >= CLIENT_TLS_ERR_COUNT)
        return "unknown error";
    return tls_err_text[err];
}

bool client_tls_opts_enabled(const struct client_tls_opts *o)
{
    return o->ca_file || o->cert_file;
}

int client_tls_opts_check(const struct client_tls_opts *o, char *err, size_t errlen)
{
    if ((o->cert_file == NULL) != (o->key_file == NULL)) {
        snprintf(err, errlen, "--tls-cert and --tls-key: give both or neither");
        return CLIENT_TLS_EINVAL;
    }
    if (o->server_name && !client_tls_opts_enabled(o)) {
        snprintf(err, errlen, "--tls-server-name: needs --tls-ca or --tls-cert");
        return CLIENT_TLS_EINVAL;
    }
    if (o->server_name &&
        (!*o->server_name || strlen(o->server_name) > CLIENT_TLS_SERVER_NAME_MAX)) {
        snprintf(err, errlen, "--tls-server-name: must be 1..%d bytes", CLIENT_TLS_SERVER_NAME_MAX);
        return CLIENT_TLS_EINVAL;
    }
    const char *const files[] = {o->ca_file, o->cert_file, o->key_file};
    const char *const names[] = {"--tls-ca", "--tls-cert", "--tls-key"};
    for (int i = 0; i < 3; i++)
        if (files[i] && !*files[i]) {
            snprintf(err, errlen, "%s: empty file name", names[i]);
            return CLIENT_TLS_EINVAL;
        }
    return CLIENT_TLS_OK;
}

int client_tls_pem_read(const char *option, const char *path, char **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    if (path == NULL)
        return CLIENT_TLS_OK;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open %s: %s", option, path, strerror(errno));
        return CLIENT_TLS_EINVAL;
    }
    int rc = CLIENT_TLS_EINVAL;
    char *buf = malloc(CLIENT_TLS_PEM_MAX + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: %s: out of memory", option, path);
        rc = CLIENT_TLS_ENOMEM;
        goto err_after_open;
    }
    size_t n = fread(buf, 1, CLIENT_TLS_PEM_MAX + 1, f);
    if (ferror(f)) {
        snprintf(err, errlen, "%s: cannot read %s: %s", option, path, strerror(errno));
        goto err_after_alloc;
    }
    if (n > CLIENT_TLS_PEM_MAX) {
        snprintf(err, errlen, "%s: %s is larger than %d bytes", option, path, CLIENT_TLS_PEM_MAX);
        goto err_after_alloc;
    }
    buf[n] = '\0';
    if (!strstr(buf, "-----BEGIN ")) {
        snprintf(err, errlen, "%s: %s holds no PEM block", option, path);
        goto err_after_alloc;
    }
    fclose(f);
    *out = buf;
    return CLIENT_TLS_OK;

err_after_alloc:
    free(buf);
err_after_open:
    fclose(f);
    return rc;
}

int client_tls_pem_load(const struct client_tls_opts *o, struct client_tls_pem *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int rc = client_tls_opts_check(o, err, errlen);
    if (rc == CLIENT_TLS_OK)
        rc = client_tls_pem_read("--tls-ca", o->ca_file, &out->ca, err, errlen);
    if (rc == CLIENT_TLS_OK)
        rc = client_tls_pem_read("--tls-cert", o->cert_file, &out->cert, err, errlen);
    if (rc == CLIENT_TLS_OK)
        rc = client_tls_pem_read("--tls-key", o->key_file, &out->key, err, errlen);
    if (rc == CLIENT_TLS_OK)
        out->server_name = o->server_name;
    return rc;
}

void client_tls_pem_free(struct client_tls_pem *pem)
{
    free(pem->ca);
    free(pem->cert);
    free(pem->key);
    memset(pem, 0, sizeof(*pem));
}

grpc_channel_credentials *client_tls_creds_new(const struct client_tls_pem *pem)
{
    if (!pem || (!pem->ca && !pem->cert))
        return grpc_insecure_credentials_create();
    grpc_ssl_pem_key_cert_pair pair = {pem->key, pem->cert};
    return grpc_ssl_credentials_create(pem->ca, pem->cert ? &pair : NULL, NULL, NULL);
}
