/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Just enough of the kernel's type vocabulary to include the pcinet window
 * layout (drivers/net/pcinet/pcinet_layout.h) from userspace.
 *
 * The __u* and __le* types come from the UAPI <linux/types.h> rather than
 * from our own stdint typedefs: glibc's <sys/stat.h> (via statx) already
 * pulls that header in, and two typedefs of __u64 (unsigned long vs
 * unsigned long long) would conflict.  In userspace __le* are plain
 * integers; every access goes through htole*()/le*toh().
 */
#ifndef _PCINET_FABRIC_LAYOUT_SHIM_H
#define _PCINET_FABRIC_LAYOUT_SHIM_H

#include <assert.h>		/* static_assert */
#include <endian.h>		/* htole*() */
#include <stdbool.h>
#include <stddef.h>		/* offsetof, size_t */
#include <string.h>		/* memcpy, memset */
#include <linux/types.h>	/* __u8 .. __u64, __le16 .. __le64 */

/* The byte-order helpers the layout's inline functions use. */
#define cpu_to_le16(x)	htole16(x)
#define cpu_to_le32(x)	htole32(x)
#define cpu_to_le64(x)	htole64(x)

#include "pcinet_layout.h"

#endif /* _PCINET_FABRIC_LAYOUT_SHIM_H */
