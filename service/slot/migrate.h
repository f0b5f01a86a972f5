/* migrate.h - internals of the hash-slot migration entries shared by fsm.c and migrate.c. */
#ifndef SLOTD_SLOT_MIGRATE_H
#define SLOTD_SLOT_MIGRATE_H

#include "service/slot/slot.h"

/* Whether number is a LogCommand.command alternative of hash-slot migration (70..74). */
bool slot__migration_is_command(unsigned number);

/* Applies a migration entry (cmd borrowed for the call) to gs and the batch. A refusal fills
 * out->err (when out != NULL) and writes nothing; success fills out->resp. Returns 0 or a store
 * error (the batch is then unusable). */
int slot__migration_apply(struct slot_fsm *f, struct slot_group_state *gs, uint64_t index,
                          uint64_t term, const Slotd__Internal__V1__LogCommand *cmd,
                          struct slot_result *out);

/* fsm.c: deletes every row of the hash slots in slots (bitmap, borrowed for the call) that no
 * other hosted group claims (slot_fsm_set_claim_cb): the stored rows and the ones the batch put
 * earlier; later reads of the batch see those hash slots empty. When more than
 * SLOT_MIGRATION_WIPE_ROWS_MAX rows are stored there, sets *over and writes nothing. Returns 0
 * or a store error. */
int slot__fsm_wipe(struct slot_fsm *f, uint32_t group, const uint8_t slots[32], bool *over);

#endif /* SLOTD_SLOT_MIGRATE_H */
