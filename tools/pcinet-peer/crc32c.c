// SPDX-License-Identifier: GPL-2.0-only
/*
 * CRC-32C: the SSE4.2 crc32 instruction when the CPU has it, else
 * slicing-by-8 tables.  Written from the definition (reflected
 * polynomial 0x82f63b78); no initial or final inversion here.
 */
#include <stdbool.h>
#include <string.h>

#include "crc32c.h"

#define CRC32C_POLY	0x82f63b78u

static uint32_t crc_tab[8][256];
static bool have_sse42;

void crc32c_init(void)
{
	uint32_t c;
	int i, j;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ ((c & 1) ? CRC32C_POLY : 0);
		crc_tab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			crc_tab[j][i] = (crc_tab[j - 1][i] >> 8) ^
					crc_tab[0][crc_tab[j - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc, w;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t w;

	while (len >= 8) {
		memcpy(&w, p, 8);	/* little-endian host (pcinet_user.h) */
		w ^= crc;
		crc = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
		      crc_tab[5][(w >> 16) & 0xff] ^ crc_tab[4][(w >> 24) & 0xff] ^
		      crc_tab[3][(w >> 32) & 0xff] ^ crc_tab[2][(w >> 40) & 0xff] ^
		      crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return crc;
}

/**
 * crc32c_update - run @len bytes through the CRC-32C register
 * @crc: the register (~0 to start a CRC)
 * @buf: the bytes
 * @len: how many
 *
 * Return: the new register value.
 */
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
	if (have_sse42)
		return crc32c_hw(crc, buf, len);
#endif
	return crc32c_sw(crc, buf, len);
}
