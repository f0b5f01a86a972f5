/* remote.h - a capture's reads of other nodes' replicas through the Peer/Backup* calls. */
#ifndef SLOTD_BACKUP_REMOTE_H
#define SLOTD_BACKUP_REMOTE_H

#include "capture.h"
#include "service/route/route.h"
#include "service/transport/transport.h"

#define BACKUP_PEER_OPEN_METHOD "/slotd.internal.v1.Peer/BackupOpen"
#define BACKUP_PEER_READ_METHOD "/slotd.internal.v1.Peer/BackupRead"
#define BACKUP_PEER_CLOSE_METHOD "/slotd.internal.v1.Peer/BackupClose"
/* The deadline of one Peer/Backup* call the capture makes. */
#define BACKUP_PEER_CALL_MS 30000

/* What the calls go through (both borrowed; thread-safe). */
struct backup_remote {
    struct transport *transport; /* NULL on a single node */
    struct route_table *routes;  /* the groups' leaders, for backup_source_order */
};

/* Sets src's group_leader, remote_open, remote_read, remote_close and remote_arg to call other
 * nodes through r (borrowed: it must outlive the capture). Each call blocks the capture's
 * thread until its answer (a transport thread signals it) or BACKUP_PEER_CALL_MS. Without a
 * transport (a single node) src is left as it was: every group is read locally. */
void backup_remote_attach(struct backup_remote *r, struct backup_capture_source *src);

#endif
