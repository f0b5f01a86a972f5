/* client_tls.h - PEM files to gRPC credentials (libslotd, slotbench, slotd-health). */
#ifndef SLOTD_CLIENT_TLS_H
#define SLOTD_CLIENT_TLS_H

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include <stdbool.h>
#include <stddef.h>

/* X(name, text): 0 is success. */
#define CLIENT_TLS_ERRORS(X)                                                                       \
    X(CLIENT_TLS_OK, "ok")                                                                         \
    X(CLIENT_TLS_EINVAL, "invalid TLS option")                                                     \
    X(CLIENT_TLS_ENOMEM, "out of memory")

enum client_tls_err {
#define CLIENT_TLS__ENUM(name, text) name,
    CLIENT_TLS_ERRORS(CLIENT_TLS__ENUM)
#undef CLIENT_TLS__ENUM
        CLIENT_TLS_ERR_COUNT
};

/* Static text of err; "unknown error" outside the enum. */
const char *client_tls_strerror(int err);

/* Largest PEM file read; longest server name. */
#define CLIENT_TLS_PEM_MAX (1 << 20)
#define CLIENT_TLS_SERVER_NAME_MAX 255

/* The command-line options (PEM file paths; NULL = not given). */
struct client_tls_opts {
    const char *ca_file;     /* --tls-ca: CA bundle verifying the servers */
    const char *cert_file;   /* --tls-cert: client certificate (mTLS) */
    const char *key_file;    /* --tls-key: its private key */
    const char *server_name; /* --tls-server-name: name checked in the server certificates */
};

/* The loaded PEM text (NULL = not given). */
struct client_tls_pem {
    char *ca;
    char *cert;
    char *key;
    const char *server_name; /* borrowed from the options */
};

/*
 * o, err: borrowed for the call. Checks the combination (cert and key both or neither;
 * server_name needs ca_file or cert_file) without touching files. CLIENT_TLS_EINVAL with a
 * sentence naming the options (as --tls-*) otherwise.
 */
int client_tls_opts_check(const struct client_tls_opts *o, char *err, size_t errlen);

/* o: borrowed for the call. Whether the options ask for TLS at all. */
bool client_tls_opts_enabled(const struct client_tls_opts *o);

/*
 * o, err: borrowed for the call; out: free with client_tls_pem_free() whatever the return value.
 * Checks o and reads every given file (each at most CLIENT_TLS_PEM_MAX bytes holding a PEM block).
 * CLIENT_TLS_EINVAL / ENOMEM with a sentence naming the option and the file otherwise.
 */
int client_tls_pem_load(const struct client_tls_opts *o, struct client_tls_pem *out, char *err,
                        size_t errlen);

/*
 * option, path, err: borrowed for the call. Reads the PEM file path (at most CLIENT_TLS_PEM_MAX
 * bytes holding a PEM block) into *out (caller frees with free()); NULL path gives NULL.
 * CLIENT_TLS_EINVAL / ENOMEM with a sentence naming option and path in err otherwise.
 */
int client_tls_pem_read(const char *option, const char *path, char **out, char *err,
                        size_t errlen);

/* pem: borrowed for the call. Frees the PEM text and clears pem. */
void client_tls_pem_free(struct client_tls_pem *pem);

/*
 * pem: borrowed for the call (NULL, or nothing loaded: insecure credentials). SSL credentials
 * from the CA (NULL: gRPC's default roots) and the client key pair when given; gRPC copies the
 * text. Call after grpc_init(). Caller frees with grpc_channel_credentials_release(); NULL when
 * gRPC refuses them.
 */
grpc_channel_credentials *client_tls_creds_new(const struct client_tls_pem *pem);

#endif /* SLOTD_CLIENT_TLS_H */
