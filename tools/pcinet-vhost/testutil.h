/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * testutil - what the vhost-user tests share: the memfd standing in for
 * the pcinet window, "ok/FAIL" lines and feature names.
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "vu_frontend.h"

struct feature_name {
	unsigned int bit;
	const char *name;
};

extern int tu_passed, tu_failed;

void tu_result(int good, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Create, size and map a memfd; gpa 0 = offset 0. */
int tu_memfd(struct vu_mem *m, uint64_t size);
void tu_memfd_free(struct vu_mem *m);
/* Device-specific names first, then the transport bits. */
void tu_format_features(uint64_t f, const struct feature_name *dev,
			char *buf, size_t len);
void tu_print_features(const char *who, const struct vu_dev *d,
		       const struct feature_name *dev);
static inline double tu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The disk pattern both virtio-blk tests write: the byte at offset @i of
 * 512-byte sector @s.  tu_fill() writes it for @len bytes from @sector,
 * tu_check() returns the offset of the first byte that differs, or -1.
 */
#define TU_SECTOR	512u
uint8_t tu_pattern(uint64_t s, unsigned int i);
void tu_fill(uint8_t *p, uint64_t sector, uint32_t len);
long tu_check(const uint8_t *p, uint64_t sector, uint32_t len);

#endif /* TESTUTIL_H */
