/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * CRC-32C (Castagnoli) for pcinet records: reflected polynomial
 * 0x82f63b78, the raw register update without the initial and final
 * inversion (as the kernel's __crc32c_le()): a record's CRC is
 * ~crc32c_update(~0, header and payload).
 */
#ifndef _PCINET_PEER_CRC32C_H
#define _PCINET_PEER_CRC32C_H

#include <stddef.h>
#include <stdint.h>

void crc32c_init(void);
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);

#endif /* _PCINET_PEER_CRC32C_H */
