/* errlist.h - the one way a module declares its error codes: an X-macro list gives both the enum
 * and the strerror function. */
#ifndef SLOTD_COMMON_ERRLIST_H
#define SLOTD_COMMON_ERRLIST_H

/* A module lists its codes once, as X(name, value, message) rows:
 *
 *     #define ROUTE_ERRORS(X) X(ROUTE_OK, 0, "ok") X(ROUTE_ENOMEM, 1, "out of memory") ...
 *     enum route_err { ROUTE_ERRORS(SLOTD_ERRLIST_ENUM) };            (in route.h)
 *     SLOTD_ERRLIST_STRERROR(route_strerror, ROUTE_ERRORS, "unknown error")  (in route.c)
 *
 * so the enum and the messages can never disagree. Messages are static strings. */

/* An enumerator row: name = value, */
#define SLOTD_ERRLIST_ENUM(name, value, msg) name = value,

#define SLOTD_ERRLIST__CASE(name, value, msg)                                                      \
    case value:                                                                                    \
        return msg;

/* Defines `const char *fn(int err)`: the static message of err's row, unknown (a string literal)
 * for a value no row has. Thread-safe; never NULL. */
#define SLOTD_ERRLIST_STRERROR(fn, LIST, unknown)                                                  \
    const char *fn(int err)                                                                        \
    {                                                                                              \
        switch (err) {                                                                             \
            LIST(SLOTD_ERRLIST__CASE)                                                              \
        default:                                                                                   \
            return unknown;                                                                        \
        }                                                                                          \
    }

#endif /* SLOTD_COMMON_ERRLIST_H */
