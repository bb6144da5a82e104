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
#include <linux/eventfd.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/tty.h>
#include <linux/tty_driver.h>
#include <linux/tty_port.h>
#include <linux/version.h>
#include <linux/virtio_config.h>

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

/**
 * struct pcinet_compat_vq - one queue virtio_config_ops.find_vqs() asks for
 * @name: its name; NULL: the driver does not use this queue
 * @callback: called when buffers were used; may be NULL
 * @ctx: keep a context per buffer
 */
struct pcinet_compat_vq {
	const char *name;
	void (*callback)(struct virtqueue *vq);
	bool ctx;
};

/*
 * virtio_config_ops.find_vqs(): 6.11 passes struct virtqueue_info[],
 * before it three arrays (callbacks, names, ctx).  The type of the new
 * one does not exist on 6.1, so a wrapper that reads it cannot be
 * compiled there: unlike the tty shims, the variant is chosen by version,
 * and the ops table checks with __same_type() that the member has the
 * type chosen (PCINET_COMPAT_FIND_VQS_TYPE), so a backport fails the
 * build instead of calling the wrong wrapper.
 */
#define PCINET_COMPAT_VQ_INFO						\
	(LINUX_VERSION_MAJOR > 6 ||					\
	 (LINUX_VERSION_MAJOR == 6 && LINUX_VERSION_PATCHLEVEL >= 11))

#if PCINET_COMPAT_VQ_INFO
/**
 * DEFINE_PCINET_COMPAT_FIND_VQS - find_vqs() of this kernel's type
 * @fn: int fn(struct virtio_device *vdev, unsigned int nvqs,
 *	struct virtqueue *vqs[], const struct pcinet_compat_vq *req)
 *
 * Defines @fn##_compat, which turns the kernel's arguments into
 * struct pcinet_compat_vq and calls @fn.
 */
#define DEFINE_PCINET_COMPAT_FIND_VQS(fn)				\
static int fn##_compat(struct virtio_device *vdev, unsigned int nvqs,	\
		       struct virtqueue *vqs[],				\
		       struct virtqueue_info vqs_info[],		\
		       struct irq_affinity *desc)			\
{									\
	struct pcinet_compat_vq *req;					\
	unsigned int i;							\
	int err;							\
									\
	req = kcalloc(nvqs, sizeof(*req), GFP_KERNEL);			\
	if (!req)							\
		return -ENOMEM;						\
	for (i = 0; i < nvqs; i++) {					\
		req[i].name = vqs_info[i].name;				\
		req[i].callback = vqs_info[i].callback;			\
		req[i].ctx = vqs_info[i].ctx;				\
	}								\
	err = fn(vdev, nvqs, vqs, req);					\
	kfree(req);							\
	return err;							\
}

#define PCINET_COMPAT_FIND_VQS_TYPE					\
	int (*)(struct virtio_device *, unsigned int, struct virtqueue *[], \
		struct virtqueue_info[], struct irq_affinity *)
#else
#define DEFINE_PCINET_COMPAT_FIND_VQS(fn)				\
static int fn##_compat(struct virtio_device *vdev, unsigned int nvqs,	\
		       struct virtqueue *vqs[], vq_callback_t *callbacks[], \
		       const char * const names[], const bool *ctx,	\
		       struct irq_affinity *desc)			\
{									\
	struct pcinet_compat_vq *req;					\
	unsigned int i;							\
	int err;							\
									\
	req = kcalloc(nvqs, sizeof(*req), GFP_KERNEL);			\
	if (!req)							\
		return -ENOMEM;						\
	for (i = 0; i < nvqs; i++) {					\
		req[i].name = names[i];					\
		req[i].callback = callbacks[i];				\
		req[i].ctx = ctx ? ctx[i] : false;			\
	}								\
	err = fn(vdev, nvqs, vqs, req);					\
	kfree(req);							\
	return err;							\
}

#define PCINET_COMPAT_FIND_VQS_TYPE					\
	int (*)(struct virtio_device *, unsigned int, struct virtqueue *[], \
		vq_callback_t *[], const char * const [], const bool *,	\
		struct irq_affinity *)
#endif

/*
 * eventfd_signal(): 6.8 dropped the count (always 1).  Chosen by version,
 * as find_vqs(): a call with the other kernel's arguments does not
 * compile, even in the branch __builtin_choose_expr() discards.
 */
#define PCINET_COMPAT_EVENTFD_NO_COUNT					\
	(LINUX_VERSION_MAJOR > 6 ||					\
	 (LINUX_VERSION_MAJOR == 6 && LINUX_VERSION_PATCHLEVEL >= 8))

/* vm_flags_set(): 6.3 made vm_flags read-only outside its helpers. */
#define PCINET_COMPAT_VM_FLAGS_SET					\
	(LINUX_VERSION_MAJOR > 6 ||					\
	 (LINUX_VERSION_MAJOR == 6 && LINUX_VERSION_PATCHLEVEL >= 3))

#if PCINET_COMPAT_VM_FLAGS_SET
#define pcinet_compat_vm_flags_set(vma, flags)	vm_flags_set(vma, flags)
#else
#define pcinet_compat_vm_flags_set(vma, flags)	((vma)->vm_flags |= (flags))
#endif

#if PCINET_COMPAT_EVENTFD_NO_COUNT
#define pcinet_compat_eventfd_signal(ctx)	eventfd_signal(ctx)
#else
#define pcinet_compat_eventfd_signal(ctx)	eventfd_signal(ctx, 1)
#endif

#endif /* _PCINET_COMPAT_H */
