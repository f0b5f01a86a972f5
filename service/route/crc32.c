/* crc32.c - CRC-32/IEEE (zlib's crc32()) and the key -> hash slot function. */
#include <limits.h>

#include <zlib.h>

#include "route.h"

uint32_t route_crc32_update(uint32_t crc, const void *data, size_t len)
{
    /* zlib answers its initial value for a NULL buffer, so an empty update must not reach it */
    const Bytef *p = data;
    while (len > 0) {
        uInt n = len > UINT_MAX ? UINT_MAX : (uInt)len;
        crc = (uint32_t)crc32(crc, p, n);
        p += n;
        len -= n;
    }
    return crc;
}

uint32_t route_crc32(const void *data, size_t len)
{
    return route_crc32_update(0, data, len);
}

uint16_t route_hash_slot(const void *key, size_t len)
{
    return (uint16_t)(route_crc32(key, len) % ROUTE_HASH_SLOTS);
}
