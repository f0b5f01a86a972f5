/* peer_auth.c - who calls a slotd.internal.v1.Peer method: the cluster-secret proof and/or the
 * verified client certificate's node-<id> name, and the sender a request body claims. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "authz.h"
#include "service/auth/auth.h"

#define NODE_CERT_PREFIX "node-"

/* The node id of a certificate name "node-<id>" (canonical decimal, 1..2^63-1), 0 otherwise. */
static uint64_t cert_node(const char *name)
{
    size_t n = strlen(NODE_CERT_PREFIX);
    if (strncmp(name, NODE_CERT_PREFIX, n) != 0)
        return 0;
    const char *d = name + n;
    if (*d == '\0' || *d == '0' || strlen(d) > 19)
        return 0;
    uint64_t v = 0;
    for (; *d != '\0'; d++) {
        if (*d < '0' || *d > '9')
            return 0;
        v = v * 10 + (uint64_t)(*d - '0');
    }
    return v <= (UINT64_MAX >> 1) ? v : 0;
}

/* The node the call's verified client certificate names (CN or SAN node-<id>), 0 if none. When
 * several names are node names they must agree; disagreeing names count as none. */
static uint64_t call_cert_node(struct rpc_call *call)
{
    char names[16][RPC_PEER_NAME_MAX];
    size_t n = rpc_call_peer_names(call, names, sizeof(names) / sizeof(names[0]));
    uint64_t found = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = cert_node(names[i]);
        if (id != 0 && found != 0 && id != found)
            return 0;
        if (id != 0)
            found = id;
    }
    return found;
}

static int peer_caller(struct node_api *api, struct rpc_call *call, const char *method,
                       const uint8_t *req, size_t len, bool remember, bool unaddressed,
                       uint64_t *caller, struct slotd_error *err);
static int peer_check(struct node_api *api, const char *method, const char *proof, size_t plen,
                      const uint8_t *req, size_t len, bool remember, bool unaddressed,
                      uint64_t cert, uint64_t *caller, struct slotd_error *err);

int node_peer_caller(struct node_api *api, struct rpc_call *call, const char *method,
                     const uint8_t *req, size_t len, bool remember, uint64_t *caller,
                     struct slotd_error *err)
{
    return peer_caller(api, call, method, req, len, remember, false, caller, err);
}

int node_peer_caller_unaddressed(struct node_api *api, struct rpc_call *call, const char *method,
                                 const uint8_t *req, size_t len, bool remember, uint64_t *caller,
                                 struct slotd_error *err)
{
    return peer_caller(api, call, method, req, len, remember, true, caller, err);
}

uint64_t node_peer_cert_node(struct rpc_call *call)
{
    return call_cert_node(call);
}

int node_peer_frame_caller(struct node_api *api, const char *method, const char *proof,
                           size_t plen, const uint8_t *body, size_t len, uint64_t cert,
                           uint64_t *caller, struct slotd_error *err)
{
    return peer_check(api, method, plen > 0 ? proof : NULL, plen, body, len, false, false, cert,
                      caller, err);
}

static int peer_caller(struct node_api *api, struct rpc_call *call, const char *method,
                       const uint8_t *req, size_t len, bool remember, bool unaddressed,
                       uint64_t *caller, struct slotd_error *err)
{
    size_t plen = 0;
    const char *proof =
        api->peer_verifier != NULL ? rpc_call_header(call, AUTH_PROOF_HEADER, &plen) : NULL;
    uint64_t cert = api->peer_mtls ? call_cert_node(call) : 0;
    return peer_check(api, method, proof, plen, req, len, remember, unaddressed, cert, caller,
                      err);
}

/* The checks of peer_caller, with the proof (NULL: none) and the certificate's node (0: none)
 * already looked up. */
static int peer_check(struct node_api *api, const char *method, const char *proof, size_t plen,
                      const uint8_t *req, size_t len, bool remember, bool unaddressed,
                      uint64_t cert, uint64_t *caller, struct slotd_error *err)
{
    *caller = 0;
    if (api->peer_verifier == NULL && !api->peer_mtls && node_authz_enabled(api->authz)) {
        /* one node with --auth (several need peer authentication to start): a Forward would
         * otherwise pass users' requests in as the node's own */
        slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                        "%s refused: this node runs --auth without peer authentication "
                        "(--cluster-secret-file or --tls-client-auth 1), so it takes no Peer call",
                        method);
        return -1;
    }
    if (api->peer_verifier != NULL) {
        char why[256];
        uint64_t node = 0;
        int64_t now = auth_now_wall_ms();
        int rc = auth_verify(api->peer_verifier, method, api->node_id, proof, plen, req, len, now,
                             remember, &node, why, sizeof(why));
        if (rc == AUTH_EBADPROOF && unaddressed) /* made for receiver 0: no node known by id */
            rc = auth_verify(api->peer_verifier, method, 0, proof, plen, req, len, now, remember,
                             &node, why, sizeof(why));
        if (rc != AUTH_OK) {
            slotd_error_set(err, rc == AUTH_EFULL ? SLOTD_EQUEUE_FULL : SLOTD_EUNAUTHENTICATED,
                            "%s refused: %s (this node requires a proof of the cluster secret, "
                            "--cluster-secret-file)",
                            method, why);
            return -1;
        }
        *caller = node;
    }
    if (api->peer_mtls) {
        uint64_t node = cert;
        if (node == 0) {
            slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                            "%s refused: the client certificate names no node (a CN or SAN "
                            "\"" NODE_CERT_PREFIX "<id>\" is required on the peer plane)",
                            method);
            return -1;
        }
        if (*caller != 0 && *caller != node) {
            slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                            "%s refused: the proof names node %" PRIu64
                            " but the client certificate names node %" PRIu64,
                            method, *caller, node);
            return -1;
        }
        *caller = node;
    }
    return 0;
}

int node_peer_sender(struct node_api *api, const char *method, uint64_t caller, uint64_t claimed,
                     struct slotd_error *err)
{
    (void)api;
    if (caller == 0 || claimed == caller)
        return 0;
    slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                    "%s refused: from_node %" PRIu64 " is not the calling node %" PRIu64, method,
                    claimed, caller);
    return -1;
}

/* Reads a base-128 varint at *p (< end); returns -1 when it runs past end or over 10 bytes. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t out = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        out |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *v = out;
            return 0;
        }
    }
    return -1;
}

int node_peer_from_node(const uint8_t *msg, size_t len, uint64_t *from)
{
    const uint8_t *p = msg, *end = msg + len;
    *from = 0;
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key) != 0)
            return -1;
        switch (key & 7) {
        case 0: /* varint */
            if (varint(&p, end, &v) != 0)
                return -1;
            if ((key >> 3) == 1)
                *from = v; /* the last occurrence wins, as protobuf decoders do */
            break;
        case 1: /* 64-bit */
            if ((size_t)(end - p) < 8)
                return -1;
            p += 8;
            break;
        case 2: /* length-delimited */
            if (varint(&p, end, &v) != 0 || v > (uint64_t)(end - p))
                return -1;
            p += v;
            break;
        case 5: /* 32-bit */
            if ((size_t)(end - p) < 4)
                return -1;
            p += 4;
            break;
        default:
            return -1;
        }
    }
    return 0;
}

int node_peer_frame_parse(const uint8_t *frame, size_t len, const char **proof, size_t *plen,
                          const uint8_t **batch, size_t *blen)
{
    const uint8_t *p = frame, *end = frame + len;
    *proof = NULL;
    *plen = 0;
    *batch = NULL;
    *blen = 0;
    while (p < end) {
        uint64_t key, v;
        if (varint(&p, end, &key) != 0)
            return -1;
        if ((key & 7) == 0) { /* an unknown varint field */
            if (varint(&p, end, &v) != 0)
                return -1;
            continue;
        }
        if ((key & 7) != 2 || varint(&p, end, &v) != 0 || v > (uint64_t)(end - p))
            return -1;
        if ((key >> 3) == 1) { /* the last occurrence wins, as protobuf decoders do */
            *proof = (const char *)p;
            *plen = (size_t)v;
        } else if ((key >> 3) == 2) {
            *batch = p;
            *blen = (size_t)v;
        }
        p += v;
    }
    return 0;
}
