/* notify.h - telling systemd (Type=notify) that slotd is ready or stopping, without libsystemd. */
#ifndef SLOTD_NOTIFY_H
#define SLOTD_NOTIFY_H

/* state (borrowed for the call): newline-separated assignments such as "READY=1\nSTATUS=...".
 * Sends it as one datagram to the AF_UNIX socket $NOTIFY_SOCKET names (a path, or "@name" for
 * an abstract socket), the protocol of sd_notify(3). Returns 0 when sent, 1 when NOTIFY_SOCKET
 * is unset or empty (not run by systemd: nothing to do), -1 with errno otherwise. */
int slotd_notify_send(const char *state);

#endif /* SLOTD_NOTIFY_H */
