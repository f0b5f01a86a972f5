/* abi_opaque.c - cclient_abi_opaque_* probe: sizeof(struct SLOTD_ABI_TYPE) of an opaque type. */
#include <slotd/client.h>

#ifndef SLOTD_ABI_TYPE
#error "build with -DSLOTD_ABI_TYPE=<struct name>"
#endif

#define ABI_STRUCT(name) struct name
/* A caller that could see the size of the options would have it compiled in: the very thing a
 * new field would break. */
static const unsigned long abi_size = sizeof(ABI_STRUCT(SLOTD_ABI_TYPE));

int abi_opaque_probe(void);
int abi_opaque_probe(void)
{
    return (int)abi_size;
}
