/* keys.c - builders for the raftlog and fsm keys described in store/FORMAT.md. */
#include "store/keys.h"

#include <string.h>

size_t store_key_fsm(uint8_t *out, uint16_t hash_slot, uint8_t table, const void *pk, size_t pklen)
{
    if (pklen > STORE_FSM_PK_MAX || hash_slot == STORE_HASH_SLOT_GROUP)
        return 0;
    store_put_u16(out, hash_slot);
    out[2] = table;
    if (pklen)
        memcpy(out + 3, pk, pklen);
    return 3 + pklen;
}

void store_key_group_applied(uint8_t out[STORE_GROUP_APPLIED_KEY_LEN], uint32_t group)
{
    store_put_u16(out, STORE_HASH_SLOT_GROUP);
    store_put_u32(out + 2, group);
}

void store_key_group_meta(uint8_t out[STORE_GROUP_META_KEY_LEN], uint32_t group, uint8_t sub)
{
    store_key_group_applied(out, group);
    out[6] = sub;
}

void store_key_log(uint8_t out[STORE_LOG_KEY_PREFIX_LEN], uint32_t group, uint8_t kind)
{
    store_put_u32(out, group);
    out[4] = kind;
}

void store_key_log_entry(uint8_t out[STORE_LOG_ENTRY_KEY_LEN], uint32_t group, uint64_t index)
{
    store_key_log(out, group, STORE_LOG_KIND_ENTRY);
    store_put_u64(out + 5, index);
}
