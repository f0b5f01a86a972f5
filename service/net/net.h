/* net.h - listening TCP sockets from "HOST:PORT" text, bound exclusively (no SO_REUSEPORT). */
#ifndef SLOTD_NET_H
#define SLOTD_NET_H

#include <stdbool.h>
#include <stddef.h>

/* Errors: the address could not be bound or listened on (err says why); the text is not
 * HOST:PORT or [V6]:PORT, or its host does not resolve. */
#define NET_ELISTEN -1
#define NET_EMALFORMED -2

/* Splits "host:port" or "[v6]:port" (addr borrowed for the call) into host and port strings.
 * Returns 0, or NET_EMALFORMED when there is no numeric port or a buffer is too small. */
int net_addr_split(const char *addr, char *host, size_t hostlen, char *port, size_t portlen);

/* A TCP socket bound to addr (borrowed for the call) with SO_REUSEADDR only, so a port another
 * process listens on answers EADDRINUSE (ports in TIME_WAIT are taken over), listening with
 * backlog. *port gets the bound port (useful for port 0). Returns the file descriptor (caller
 * closes it), NET_ELISTEN or NET_EMALFORMED with err (never NULL) set to a sentence that names
 * addr and the system's error text. */
int net_listen(const char *addr, int backlog, int *port, char *err, size_t errlen);

/* Checks that addr (borrowed for the call) can be listened on now: binds it as net_listen does
 * and closes the socket at once. Port 0 always passes. Returns 0, NET_ELISTEN or NET_EMALFORMED
 * with err set. A process that then binds the port itself must not use SO_REUSEPORT, or a second
 * process could still share it. */
int net_listen_check(const char *addr, char *err, size_t errlen);

/* Whether "host:port" (borrowed for the call) has an empty or any-address host (0.0.0.0, [::],
 * ::): an address to listen on, never one to give others to dial. */
bool net_addr_wildcard(const char *addr);

#endif /* SLOTD_NET_H */
