/* restore.h - `slotd restore`: builds one node's data directory of a new cluster from a backup
 * file. */
#ifndef SLOTD_BACKUP_RESTORE_H
#define SLOTD_BACKUP_RESTORE_H

/* `slotd restore --from FILE --data-dir DIR --node-id N [--peers ID=HOST:PORT,...]
 * [--keep-cluster-id]` (argv[0] is "restore"; argv borrowed for the call). Verifies the whole
 * file first, then writes into the new (missing or empty) DIR: the controller state of the
 * backup (a new cluster id unless --keep-cluster-id; node addresses from --peers, which must
 * name exactly the backup's nodes; tasks and health reports dropped) and, for every slot group
 * the state places on node N, the group's rows and a raft position at the backup's applied
 * index (hard state, conf state = the group's desired peers, snapshot metadata), so that slotd
 * started on DIR with the same --node-id and --peers serves exactly the backup. Returns the
 * process exit code: 0, 1 (the file or the store failed), 2 (usage: a bad or missing flag, a
 * non-empty DIR, peers that do not match), each with one line on stderr. */
int backup_restore_main(int argc, char **argv);

#endif
