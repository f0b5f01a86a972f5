/* slotctl_num.h - number parsing shared by slotctl's two argument parsers (slotctl_cli.c,
 * slotctl_meta_cli.c). */
#ifndef SLOTD_SLOTCTL_NUM_H
#define SLOTD_SLOTCTL_NUM_H

#include <stdbool.h>
#include <stdint.h>

/* s, out: borrowed for the call. Parses a decimal in [min, max] (no sign, no spaces); false when
 * s is not one. */
bool slotctl_uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif /* SLOTD_SLOTCTL_NUM_H */
