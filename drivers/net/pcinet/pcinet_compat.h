/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pcinet compat: what it takes to build on kernels older than the one the
 * .c files are written for (6.12), down to 6.1, in one place.  The .c
 * files read as 6.12 code; dropping a kernel means deleting its part here
 * and the one line per use that names it.
 *
 * The changed types are tested, not a version number: __same_type() on
 * the ops member picks the variant, so a kernel that has the change
 * backported gets the right one.  The variant not chosen is discarded at
 * compile time (__builtin_choose_expr()); it still counts as used, so
 * neither kernel warns about it.
 */
#ifndef _PCINET_COMPAT_H
#define _PCINET_COMPAT_H

#include <linux/compiler.h>
#include <linux/tty.h>
#include <linux/tty_driver.h>
#include <linux/tty_port.h>

/*
 * Before 6.2 tty_port_operations.carrier_raised() returned int and
 * .dtr_rts() took an int; before 6.6 tty_operations.write() counted in
 * int.
 */
#define PCINET_COMPAT_PORT_OPS_INT					\
	__same_type(((struct tty_port *)NULL)->ops->carrier_raised,	\
		    int (*)(struct tty_port *))
#define PCINET_COMPAT_WRITE_INT						\
	__same_type(((struct tty_driver *)NULL)->ops->write,		\
		    int (*)(struct tty_struct *, const u8 *, int))

/**
 * DEFINE_PCINET_COMPAT_TTY - the int-typed twins of a tty driver's ops
 * @carrier_raised: its bool (*)(struct tty_port *)
 * @dtr_rts: its void (*)(struct tty_port *, bool)
 * @write: its ssize_t (*)(struct tty_struct *, const u8 *, size_t)
 *
 * Defines @carrier_raised##_int, @dtr_rts##_int and @write##_int, the
 * 6.1 signatures calling the 6.12 ones.  Use it once, after the three are
 * defined and before the ops tables, which then name them through
 * pcinet_compat_carrier_raised(), pcinet_compat_dtr_rts() and
 * pcinet_compat_write().
 */
#define DEFINE_PCINET_COMPAT_TTY(carrier_raised, dtr_rts, write)	\
static int carrier_raised##_int(struct tty_port *port)			\
{									\
	return carrier_raised(port);					\
}									\
static void dtr_rts##_int(struct tty_port *port, int active)		\
{									\
	dtr_rts(port, active);						\
}									\
static int write##_int(struct tty_struct *tty, const u8 *buf, int count) \
{									\
	return write(tty, buf, count);					\
}

/* The ops members, of whichever type this kernel has. */
#define pcinet_compat_carrier_raised(fn)				\
	__builtin_choose_expr(PCINET_COMPAT_PORT_OPS_INT, fn##_int, fn)
#define pcinet_compat_dtr_rts(fn)					\
	__builtin_choose_expr(PCINET_COMPAT_PORT_OPS_INT, fn##_int, fn)
#define pcinet_compat_write(fn)						\
	__builtin_choose_expr(PCINET_COMPAT_WRITE_INT, fn##_int, fn)

#endif /* _PCINET_COMPAT_H */
