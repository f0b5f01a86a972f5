/* err.h - the store layer's error codes (one X-macro table) and store_strerror(); store.h includes
 * it. */
#ifndef SLOTD_STORE_ERR_H
#define SLOTD_STORE_ERR_H

#include "common/errlist.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STORE_ERRORS(X)                                                                            \
    X(STORE_OK, 0, "ok")                                                                           \
    X(STORE_ENOMEM, 1, "out of memory")                                                            \
    X(STORE_EIO, 2, "storage I/O error")                                                           \
    X(STORE_ENOTFOUND, 3, "not found")                                                             \
    X(STORE_ECORRUPT, 4, "stored data is corrupt")                                                 \
    X(STORE_EINVAL, 5, "invalid argument")                                                         \
    X(STORE_ELIMIT, 6, "limit reached")

enum store_err { STORE_ERRORS(SLOTD_ERRLIST_ENUM) STORE_ERR_COUNT_ };

/* Returns a static string; never NULL. */
const char *store_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* SLOTD_STORE_ERR_H */
