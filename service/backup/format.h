/* format.h - the slotd backup file (docs/backup-format.md): a bounded record writer and a checking
 * reader. */
#ifndef SLOTD_BACKUP_FORMAT_H
#define SLOTD_BACKUP_FORMAT_H

/*
 * A backup file is a sequence of records; each record is a 16-byte frame (type, version, seq,
 * payload length, CRC-32 of frame and payload) and a payload of at most BACKUP_RECORD_BYTES_MAX
 * bytes. The first record is the header (magic, format version, cluster id, created at, route
 * revision, hash-slot table, every group with its applied index), then the controller state in
 * one or more parts, then per slot group: GROUP_BEGIN, ROWS records of whole fsm rows, GROUP_END
 * (row count, bytes, CRC over the rows), and last the trailer (counts and the CRC-32 of every
 * byte before it). docs/backup-format.md gives every byte.
 *
 * The writer hands each finished record to a callback (a file, a gRPC stream) and holds at most
 * one record of rows in memory. The reader checks every frame, the order of the records, the
 * counts and the CRCs while it streams a file, and calls the caller back for what it found; it
 * too holds one record at a time. Depends on libc and zlib's crc32 only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BACKUP_ERRORS(X)                                                                           \
    X(BACKUP_OK, 0, "ok")                                                                          \
    X(BACKUP_ENOMEM, 1, "out of memory")                                                           \
    X(BACKUP_EIO, 2, "I/O error")                                                                  \
    X(BACKUP_ECORRUPT, 3, "backup file is corrupt")                                                \
    X(BACKUP_EINVAL, 4, "invalid argument")                                                        \
    X(BACKUP_ELIMIT, 5, "limit reached")                                                           \
    X(BACKUP_ESTOP, 6, "stopped by the caller")                                                    \
    X(BACKUP_EPRECONDITION, 7, "the cluster cannot be backed up from here")

#define BACKUP__ERR_ENUM(name, code, text) name = code,
enum backup_err { BACKUP_ERRORS(BACKUP__ERR_ENUM) BACKUP_ERR_COUNT_ };
#undef BACKUP__ERR_ENUM

/* Returns a static string; never NULL. */
const char *backup_strerror(int err);

#define BACKUP_MAGIC "SLOTDBK\n"
#define BACKUP_MAGIC_LEN 8
#define BACKUP_FORMAT_VERSION 1u
#define BACKUP_FRAME_LEN 16
/* Bound on one record's payload (a stream message stays under gRPC's 4 MiB default). */
#define BACKUP_RECORD_BYTES_MAX ((size_t)2 << 20)
/* The writer closes a ROWS record once its payload reaches this many bytes. */
#define BACKUP_ROWS_TARGET_BYTES ((size_t)256 << 10)
#define BACKUP_GROUPS_MAX 1024u
#define BACKUP_CLUSTER_ID_MAX 128u
#define BACKUP_HASH_SLOTS 256u
#define BACKUP_KEY_MAX 65535u /* a row key's length is a u16 */
#define BACKUP_ERRMSG_MAX 320

enum backup_record_type {
    BACKUP_REC_HEADER = 1,
    BACKUP_REC_CONTROLLER = 2,
    BACKUP_REC_GROUP_BEGIN = 3,
    BACKUP_REC_ROWS = 4,
    BACKUP_REC_GROUP_END = 5,
    BACKUP_REC_TRAILER = 6,
};

/* Returns a static name ("rows", "header", ... "unknown"); never NULL. */
const char *backup_record_type_name(unsigned type);

/* One slot group of the backup: its applied index at the capture and the node it was read on. */
struct backup_group_info {
    uint32_t group; /* >= 1 */
    uint64_t applied_index;
    uint64_t source_node;
};

struct backup_header {
    uint32_t format_version; /* the writer sets BACKUP_FORMAT_VERSION */
    uint64_t created_at_ms;  /* Unix time in milliseconds */
    char cluster_id[BACKUP_CLUSTER_ID_MAX + 1];
    uint64_t route_revision;                     /* controller revision of the hash-slot table */
    uint64_t controller_applied_index;           /* of the controller state in the file */
    uint32_t hash_slot_table[BACKUP_HASH_SLOTS]; /* group per hash slot; 0 = unassigned */
    uint32_t n_groups; /* invariant: <= BACKUP_GROUPS_MAX; groups ascending, no duplicates */
    struct backup_group_info groups[BACKUP_GROUPS_MAX];
};

/* ---- writer ---- */

/* Receives one whole record (frame + payload, buf borrowed for the call). Non-zero stops the
 * writer: the call that produced the record returns BACKUP_ESTOP. */
typedef int (*backup_out_cb)(void *arg, const void *buf, size_t len);

struct backup_writer;

/* On success *out is a writer that gives its records to out(arg): caller frees with
 * backup_writer_free(). */
int backup_writer_new(backup_out_cb out, void *arg, struct backup_writer **out_w);
/* NULL is ok. */
void backup_writer_free(struct backup_writer *w);
/* The last failure as a sentence ("" when none). Borrowed from w. */
const char *backup_writer_errmsg(const struct backup_writer *w);

/* The calls below go in the file's order: header, controller parts, then per group of the
 * header (in its order) group_begin, rows, group_end, then finish. A call out of order, a header
 * that breaks its invariants or a row that does not fit returns BACKUP_EINVAL and the writer
 * refuses everything after a failure. All pointers are borrowed for the call. */
int backup_writer_header(struct backup_writer *w, const struct backup_header *h);
/* Any length; split into records of at most BACKUP_RECORD_BYTES_MAX. */
int backup_writer_controller(struct backup_writer *w, const void *data, size_t len);
int backup_writer_group_begin(struct backup_writer *w, uint32_t group);
/* kl 1..BACKUP_KEY_MAX; the row's encoding must fit one record. */
int backup_writer_row(struct backup_writer *w, const void *k, size_t kl, const void *v, size_t vl);
int backup_writer_group_end(struct backup_writer *w);
int backup_writer_finish(struct backup_writer *w);

/* Bytes given to the callback so far, and rows written so far (all groups). */
uint64_t backup_writer_bytes(const struct backup_writer *w);
uint64_t backup_writer_rows(const struct backup_writer *w);

/* ---- reader ---- */

/* What a group's part held, as counted by the reader (and stated by GROUP_END). */
struct backup_group_summary {
    uint32_t group;
    uint64_t applied_index, source_node;
    uint64_t rows, row_bytes;
    uint32_t records; /* ROWS records */
};

struct backup_summary {
    struct backup_header header;
    uint64_t controller_bytes;
    uint32_t records; /* all records, the trailer included */
    uint64_t file_bytes;
    uint64_t rows;
    uint32_t file_crc;
    uint32_t n_groups; /* groups whose GROUP_END was read */
    struct backup_group_summary groups[BACKUP_GROUPS_MAX];
};

/* Callbacks of the reader, each optional (NULL). Pointers are borrowed for the callback. A
 * non-zero return stops the read with BACKUP_ESTOP. The reader calls them as it reads: the file's
 * checks that come later (a row record's CRC, the trailer) may still fail, so a caller that must
 * act only on a whole good file reads it twice (verify, then act). */
struct backup_read_cbs {
    int (*header)(void *arg, const struct backup_header *h);
    int (*controller)(void *arg, const void *data, size_t len);
    int (*group_begin)(void *arg, const struct backup_group_info *g);
    int (*row)(void *arg, uint32_t group, const void *k, size_t kl, const void *v, size_t vl);
    int (*group_end)(void *arg, const struct backup_group_summary *g);
};

/* Reads the whole file from f (borrowed), checking every record, its order and the counts and
 * CRCs; cbs (NULL = none) and arg as above. On BACKUP_OK *sum (borrowed; may be NULL) describes
 * the file. On failure err (errlen may be 0) names the record: "record 17 (rows, group 3) at
 * byte 5263012: checksum mismatch: stored 0x1a2b3c4d, computed 0x99887766". */
int backup_read(FILE *f, const struct backup_read_cbs *cbs, void *arg, struct backup_summary *sum,
                char *err, size_t errlen);
/* Same on the file at path. */
int backup_read_file(const char *path, const struct backup_read_cbs *cbs, void *arg,
                     struct backup_summary *sum, char *err, size_t errlen);

#endif
