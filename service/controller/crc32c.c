/* crc32c.c - CRC-32C (Castagnoli), table-driven, for the cluster-state checksum. */
#include <pthread.h>

#include "controller.h"

static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc32c_table[i] = c;
    }
}

uint32_t ctl_crc32c(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    pthread_once(&crc32c_once, crc32c_table_init);
    for (size_t i = 0; i < len; i++) {
        c = crc32c_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}
