/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * Userspace stand-ins for the few kernel facilities the portable pcinet
 * ring code uses, so the same pcinet_ring.c is tested outside the kernel.
 * The virt_*() barriers map to C11 atomics of the same strength.
 */
#ifndef _PCINET_USER_H
#define _PCINET_USER_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the userspace shims assume a little-endian host"
#endif

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
/*
 * A program that also includes the kernel's uapi headers (a vhost-user
 * test next to its virtio headers) already has these from <linux/types.h>,
 * with __u64 another type than uint64_t: take those.
 */
#ifndef _LINUX_TYPES_H
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
typedef uint16_t __le16;
typedef uint32_t __le32;
typedef uint64_t __le64;
#endif

#define cpu_to_le16(x)	((__le16)(x))
#define cpu_to_le32(x)	((__le32)(x))
#define cpu_to_le64(x)	((__le64)(x))
#define le16_to_cpu(x)	((u16)(x))
#define le32_to_cpu(x)	((u32)(x))
#define le64_to_cpu(x)	((u64)(x))

#define READ_ONCE(x)	(*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

#define virt_load_acquire(p)	__atomic_load_n(p, __ATOMIC_ACQUIRE)
#define virt_store_release(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)
/*
 * Full barriers are counted, so the unit tests can tell a decision that
 * needs none (the "nothing new" early-outs) from one that does.  Weak: one
 * definition per program, whichever files include this.
 */
__attribute__((weak)) unsigned long pcinet_user_mb_count;
/* Run at each full barrier if set: a test's other side acting there. */
__attribute__((weak)) void (*pcinet_user_mb_hook)(void);
#define virt_mb()	do {						\
	pcinet_user_mb_count++;						\
	if (pcinet_user_mb_hook)					\
		pcinet_user_mb_hook();					\
	__atomic_thread_fence(__ATOMIC_SEQ_CST);			\
} while (0)

#define virt_rmb()	__atomic_thread_fence(__ATOMIC_ACQUIRE)

#define min(a, b)	((a) < (b) ? (a) : (b))

#endif /* _PCINET_USER_H */
