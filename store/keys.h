/* keys.h - slotd's LevelDB key layout: big-endian integer helpers and key builders (FORMAT.md). */
#ifndef SLOTD_STORE_KEYS_H
#define SLOTD_STORE_KEYS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every value this module encodes starts with this version byte. */
#define STORE_VALUE_VERSION 1

/* ---- raftlog keys: [group u32][kind u8]... ---- */
#define STORE_LOG_KIND_ENTRY 1         /* [group][1][index u64] -> entry */
#define STORE_LOG_KIND_HARD_STATE 2    /* [group][2] -> term, vote, commit */
#define STORE_LOG_KIND_CONF_STATE 3    /* [group][3] -> voters, learners */
#define STORE_LOG_KIND_SNAPSHOT_META 4 /* [group][4] -> index, term, conf state */
#define STORE_LOG_KIND_TOMBSTONE 5     /* [group][5] -> term, vote, floor index, floor term */
#define STORE_LOG_KEY_PREFIX_LEN 5     /* group u32 + kind u8 */
#define STORE_LOG_ENTRY_KEY_LEN 13     /* group u32 + kind u8 + index u64 */

/* ---- fsm keys: [hash_slot u16][table u8][primary key parts...] ---- */
#define STORE_FSM_PK_MAX 1100
#define STORE_FSM_KEY_MAX (2 + 1 + STORE_FSM_PK_MAX)
/* Hash slot of the per-group records: [0xFFFF][group u32] -> applied index and
 * [0xFFFF][group u32][sub u8] -> FSM metadata owned by the service layer. */
#define STORE_HASH_SLOT_GROUP 0xFFFFu
#define STORE_GROUP_APPLIED_KEY_LEN 6
#define STORE_GROUP_META_KEY_LEN 7

static inline void store_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void store_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void store_put_u64(uint8_t *p, uint64_t v)
{
    store_put_u32(p, (uint32_t)(v >> 32));
    store_put_u32(p + 4, (uint32_t)v);
}

static inline uint16_t store_get_u16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t store_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t store_get_u64(const uint8_t *p)
{
    return (uint64_t)store_get_u32(p) << 32 | store_get_u32(p + 4);
}

/* Writes [hash_slot][table][pk] into out (at least STORE_FSM_KEY_MAX bytes; borrowed for the
 * call, as is pk) and returns its length. Returns 0 and writes nothing when pklen >
 * STORE_FSM_PK_MAX or hash_slot is STORE_HASH_SLOT_GROUP (reserved for group records). */
size_t store_key_fsm(uint8_t *out, uint16_t hash_slot, uint8_t table, const void *pk, size_t pklen);

/* Writes [0xFFFF][group][sub] (7 bytes) into out (borrowed for the call). */
void store_key_group_meta(uint8_t out[STORE_GROUP_META_KEY_LEN], uint32_t group, uint8_t sub);

/* Writes [0xFFFF][group] (6 bytes), the key of the group's applied index, into out. */
void store_key_group_applied(uint8_t out[STORE_GROUP_APPLIED_KEY_LEN], uint32_t group);

/* Writes the raftlog key [group][kind] (5 bytes) into out (borrowed for the call). */
void store_key_log(uint8_t out[STORE_LOG_KEY_PREFIX_LEN], uint32_t group, uint8_t kind);

/* Writes the raftlog entry key [group][1][index] (13 bytes) into out (borrowed for the call). */
void store_key_log_entry(uint8_t out[STORE_LOG_ENTRY_KEY_LEN], uint32_t group, uint64_t index);

#ifdef __cplusplus
}
#endif
#endif
