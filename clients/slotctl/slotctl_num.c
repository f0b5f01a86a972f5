/* slotctl_num.c - number parsing shared by slotctl's two argument parsers. */
#include "slotctl_num.h"

#include <errno.h>
#include <stdlib.h>

bool slotctl_uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}
