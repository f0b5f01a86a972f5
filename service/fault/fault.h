/* fault.h - fault-injection hooks, compiled only into fault builds (-DSLOTD_FAULT=ON). */
#ifndef SLOTD_FAULT_H
#define SLOTD_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errlist.h"

/* Every hook below is a constant (no code, no call) unless the build defines SLOTD_FAULT
 * (cmake -DSLOTD_FAULT=ON, see service/fault/README.md). In a fault build they read:
 *
 *   SLOTD_CRASH_AT=name[:n]      the n-th hit (default 1) of SLOTD_CRASH_POINT("name") writes one
 *                                line to stderr and calls _exit(FAULT_CRASH_EXIT_STATUS)
 *   SLOTD_FAULT_NET=spec         peer-network faults from the start (spec: see fault_net_parse)
 *   SLOTD_FAULT_NET_FILE=path    the same spec read from a file, re-read every
 *                                SLOTD_FAULT_NET_POLL_MS (default 200) while the process runs;
 *                                a missing or empty file means no network faults
 *   SLOTD_FAULT_UNSAFE_READS=1   LINEARIZABLE reads are served like LEADER_LOCAL (no ReadIndex
 *                                round): a deliberately wrong node for tests/fault to catch
 */

#define FAULT_CRASH_EXIT_STATUS 86
#define FAULT_NODE_ID_MAX 63 /* block=N accepts node ids 1..63 */
#define FAULT_DELAY_MS_MAX 10000
#define FAULT_SPEC_BYTES_MAX 1024

/* X(name, value, message) */
#define FAULT_ERRORS(X)                                                                            \
    X(FAULT_OK, 0, "ok")                                                                           \
    X(FAULT_EINVAL, 1, "invalid fault specification")                                              \
    X(FAULT_ERANGE, 2, "fault specification value out of range")

enum fault_err { FAULT_ERRORS(SLOTD_ERRLIST_ENUM) };

/* Static message for an enum fault_err ("unknown error" for other values). */
const char *fault_strerror(int code);

/* Peer-network faults of this node (what it sends). */
struct fault_net_config {
    uint32_t drop_ppm; /* each raft message / peer call is lost with probability ppm/1e6 */
    uint32_t delay_ms; /* after a Raft batch to a peer completes, the next one waits
                          delay_ms/2 .. 3*delay_ms/2 (uniform) */
    uint64_t blocked;  /* bit N: every raft message and peer call to node N is lost */
    uint64_t seed;     /* of the drop and delay randomness; 0 = from the clock */
};

/* Parses spec (borrowed for the call, NUL-terminated): tokens separated by commas, spaces or
 * newlines, each one of "drop=P" (0 <= P <= 1), "delay_ms=N" (<= FAULT_DELAY_MS_MAX),
 * "block=N" (1 <= N <= FAULT_NODE_ID_MAX, repeatable), "seed=N"; "" or only separators is the
 * empty config; '#' starts a comment to the end of its line. out (borrowed for the call) is
 * written only on FAULT_OK; errmsg (borrowed for the call, may be NULL) gets a sentence naming
 * the bad token otherwise. Returns FAULT_OK, FAULT_EINVAL or FAULT_ERANGE. */
int fault_net_parse(const char *spec, struct fault_net_config *out, char *errmsg,
                    size_t errmsg_len);

/* Parses "name" or "name:n" (borrowed for the call) into name (borrowed for the call, name_len
 * bytes incl. NUL) and *hit (n >= 1, default 1). Returns FAULT_OK, FAULT_EINVAL or FAULT_ERANGE. */
int fault_crash_parse(const char *spec, char *name, size_t name_len, uint64_t *hit);

#ifdef SLOTD_FAULT

/* Counts a hit of crash point name (a string literal); exits the process with status
 * FAULT_CRASH_EXIT_STATUS on the hit SLOTD_CRASH_AT names. Thread-safe. */
void fault_crash_point_hit(const char *name);

/* True when a message or call from node `from` to node `to` is to be lost now (to is blocked,
 * or the drop draw says so). Thread-safe. */
bool fault_net_should_drop(uint64_t from, uint64_t to);

/* CLOCK_MONOTONIC ms before which the next Raft batch from `from` to `to` may not start, 0 when
 * no delay is configured. Thread-safe. */
int64_t fault_net_pace_until_ms(uint64_t from, uint64_t to);

/* True when SLOTD_FAULT_UNSAFE_READS=1 (read once). */
bool fault_reads_unsafe(void);

/* Records where the FSM's LevelDB write-ahead log stood after a synced FSM write: writes
 * "<newest NNNNNN.log name> <its size>" to <data_dir>/fault-fsm-synced (atomically), so the
 * power-loss test (tests/fault/test_power_loss.py) never cuts the log below synced data.
 * data_dir is borrowed for the call. Errors are ignored (a missing note makes the test keep the
 * whole log). */
void fault_note_fsm_synced(const char *data_dir);

#define SLOTD_CRASH_POINT(name) fault_crash_point_hit(name)
#define SLOTD_FAULT_NOTE_FSM_SYNCED(data_dir) fault_note_fsm_synced(data_dir)
#define SLOTD_FAULT_NET_DROP(from, to) fault_net_should_drop((from), (to))
#define SLOTD_FAULT_NET_PACE_UNTIL_MS(from, to) fault_net_pace_until_ms((from), (to))
#define SLOTD_FAULT_UNSAFE_READS() fault_reads_unsafe()

#else

#define SLOTD_CRASH_POINT(name) ((void)0)
#define SLOTD_FAULT_NOTE_FSM_SYNCED(data_dir) ((void)0)
#define SLOTD_FAULT_NET_DROP(from, to) false
#define SLOTD_FAULT_NET_PACE_UNTIL_MS(from, to) ((int64_t)0)
#define SLOTD_FAULT_UNSAFE_READS() false

#endif /* SLOTD_FAULT */

#endif /* SLOTD_FAULT_H */
