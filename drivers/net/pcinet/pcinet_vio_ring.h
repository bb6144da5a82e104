/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * pcinet virtio channel, driver side: the relay from a private split ring
 * (the stock virtio driver's, in our own memory) into a device ring in the
 * window, the bounce pools, and the checks of a device description.
 * docs/design.md, "Virtio channel", is the protocol; pcinet_layout.h the
 * wire structures.
 *
 * Portable C: this file and pcinet_vio_ring.c compile in the kernel and,
 * with tools/testing/pcinet/pcinet_user.h, in userspace, as pcinet_ring.c
 * does.  Nothing here allocates, sleeps or locks: the caller provides the
 * memory (the request table, the pool extent arrays) and holds one lock
 * per device around every call that names the device or one of its
 * queues (the pools are shared by the device's queues).
 *
 * The driver's buffers are reached only through struct pcinet_vio_mem_ops
 * (in the kernel: physical addresses, kmap_local_page() per page; in the
 * tests: plain pointers), so the relay works on any memory model.
 *
 * Barriers, as in pcinet_ring.h, are the virt_*() family (the peer may be
 * another machine; we may be a uniprocessor guest).  The ordering
 * contract of the relay (letters used at each site):
 *  R1  submit: device descriptors, avail entries and OUT data stored,
 *      then store-release device avail->idx.  Pairs with the back end's
 *      read of avail->idx followed by a read barrier (virtio 2.7.13).
 *  R2  submit: store device avail->idx, full barrier, load avail_event
 *      (or used->flags) for the kick decision.  Pairs with the back end's
 *      store of avail_event, full barrier, re-read of avail->idx.
 *  R3  complete: load-acquire device used->idx, then read the used
 *      entries and the IN data.  Pairs with the back end's write barrier
 *      between the used entries (and data) and used->idx.
 *  R4  complete (EVENT_IDX): store used_event, full barrier, re-load
 *      used->idx before giving up.  Pairs with the back end's store of
 *      used->idx, full barrier, load of used_event (its call decision).
 *  R5  private ring: load-acquire private avail->idx, then read the
 *      private avail entries and descriptors.  Pairs with virtio_ring's
 *      write barrier before it stores avail->idx (virtqueue_add_split()).
 *  R6  private ring: IN data copied into the driver's buffers and the
 *      private used entries stored, then store-release private
 *      used->idx.  Pairs with virtio_ring's read barrier after it loads
 *      used->idx (virtqueue_get_buf_ctx_split()).
 * Reuse of pool space needs no barrier of its own: an extent is freed
 * only after R3 showed its used entry, the back end promises not to touch
 * a chain once it is used, and our later stores into the extent are
 * ordered after our own loads of it by the acquire of R3.
 */
#ifndef _PCINET_VIO_RING_H
#define _PCINET_VIO_RING_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <asm/barrier.h>
#else
#include "pcinet_user.h"
#endif

#include "pcinet_layout.h"

/* virtio split ring constants (virtio 1.x, 2.7), ring and feature bits. */
#define PCINET_VRING_F_NEXT		1
#define PCINET_VRING_F_WRITE		2
#define PCINET_VRING_F_INDIRECT		4
#define PCINET_VRING_USED_F_NO_NOTIFY	1
#define PCINET_VIRTIO_F_INDIRECT_DESC	28
#define PCINET_VIRTIO_F_EVENT_IDX	29
#define PCINET_VIRTIO_F_VERSION_1	32
#define PCINET_VIRTIO_F_ACCESS_PLATFORM	33
#define PCINET_VIRTIO_ID_FS		26

/*
 * Inside a pool extent, buffers follow in chain order, each at a multiple
 * of PCINET_VIO_BUF_ALIGN, or of PCINET_VIO_POOL_ALIGN when it is that
 * long or longer (O_DIRECT-friendly for the back end).
 */
#define PCINET_VIO_BUF_ALIGN		64

/* What pcinet_vio_submit(), _complete() and _abort() ask the caller to do. */
#define PCINET_VIO_KICK		0x1	/* bump notify, ring PCINET_VEC_VIRTIO */
#define PCINET_VIO_INTR		0x2	/* private used moved: vring_interrupt() */
#define PCINET_VIO_MORE		0x4	/* the byte budget spent: call again */

/*
 * The bytes one call of pcinet_vio_submit() or pcinet_vio_complete()
 * copies between the pools and the driver's buffers before it stops with
 * PCINET_VIO_MORE (it always moves at least one request): the caller
 * holds a spinlock with interrupts off, and the pools, up to
 * PCINET_VIO_POOL_MAX, are the host's to fill.
 */
#define PCINET_VIO_PASS_BYTES	(256 * 1024)

/* Errors: the peer (or, for a private ring, our own driver) is broken. */
#define PCINET_VIO_EPROTO	71

/**
 * struct pcinet_vring_avail - an avail ring (private or device)
 * @flags: VRING_AVAIL_F_*; we write 0
 * @idx: free-running count of entries published
 * @ring: heads; @ring[num] is used_event (EVENT_IDX)
 */
struct pcinet_vring_avail {
	__le16 flags;
	__le16 idx;
	__le16 ring[];
};

/**
 * struct pcinet_vring_used - a used ring (private or device)
 * @flags: PCINET_VRING_USED_F_NO_NOTIFY
 * @idx: free-running count of entries published
 * @ring: completions; after @ring[num], avail_event (EVENT_IDX)
 */
struct pcinet_vring_used {
	__le16 flags;
	__le16 idx;
	struct pcinet_vring_used_elem ring[];
};

/**
 * struct pcinet_vio_area - a range of the window
 * @off: window offset
 * @size: bytes; 0: none
 */
struct pcinet_vio_area {
	u64 off;
	u64 size;
};

/**
 * struct pcinet_vio_vqinfo - one virtqueue of a checked description
 * @num_max: largest size, a power of two up to PCINET_VIO_NUM_MAX
 * @desc_off: window offset of the descriptor table (D's dev span)
 * @avail_off: window offset of the avail ring (D's dev span)
 * @used_off: window offset of the used ring (B's drv span)
 */
struct pcinet_vio_vqinfo {
	u16 num_max;
	u64 desc_off;
	u64 avail_off;
	u64 used_off;
};

/**
 * struct pcinet_vio_devinfo - the fixed part of a device description,
 *	copied out, checked and decoded (pcinet_vio_desc_check())
 * @dev_gen: the instance
 * @device_id: virtio device ID
 * @vendor_id: virtio vendor ID
 * @nr_vq: virtqueues, 1..PCINET_VIO_MAX_VQ
 * @features: device features
 * @config_len: valid bytes of the configuration space
 * @out_pool: OUT pool, in D's dev span
 * @in_pool: IN pool, in B's drv span
 * @dev_span: the device's span of D's dev region
 * @drv_span: its span of B's drv region
 * @vq: the first @nr_vq virtqueues
 */
struct pcinet_vio_devinfo {
	u32 dev_gen;
	u32 device_id;
	u32 vendor_id;
	u32 nr_vq;
	u64 features;
	u32 config_len;
	struct pcinet_vio_area out_pool;
	struct pcinet_vio_area in_pool;
	struct pcinet_vio_area dev_span;
	struct pcinet_vio_area drv_span;
	struct pcinet_vio_vqinfo vq[PCINET_VIO_MAX_VQ];
};

int pcinet_vio_desc_read(const struct pcinet_vio_devdesc *w,
			 struct pcinet_vio_devdesc *copy);
int pcinet_vio_desc_check(const struct pcinet_vio_devdesc *d,
			  const struct pcinet_vio_area *dev_region,
			  const struct pcinet_vio_area *drv_region,
			  const struct pcinet_vio_devinfo *live,
			  unsigned int nr_live,
			  struct pcinet_vio_devinfo *info, const char **why);

/**
 * struct pcinet_vio_ext - an allocated extent of a pool
 * @off: offset from the start of the pool
 * @size: bytes
 */
struct pcinet_vio_ext {
	u64 off;
	u64 size;
};

/**
 * struct pcinet_vio_pool - a bounce pool in the window, first fit
 * @mem: our mapping of the pool's first byte
 * @base: window offset of the pool (what descriptors carry)
 * @size: bytes
 * @ext: the allocated extents, sorted by offset (caller's memory)
 * @nr: extents allocated
 * @max: room in @ext: one per request that can be in flight on all the
 *	device's queues together (the sum of their sizes)
 * @used: bytes in allocated extents
 */
struct pcinet_vio_pool {
	u8 *mem;
	u64 base;
	u64 size;
	struct pcinet_vio_ext *ext;
	u32 nr;
	u32 max;
	u64 used;
};

void pcinet_vio_pool_init(struct pcinet_vio_pool *pool, void *mem, u64 base,
			  u64 size, struct pcinet_vio_ext *ext, u32 max);
int pcinet_vio_pool_alloc(struct pcinet_vio_pool *pool, u64 size, u64 align,
			  u64 *off);
int pcinet_vio_pool_free(struct pcinet_vio_pool *pool, u64 off);
void pcinet_vio_pool_reset(struct pcinet_vio_pool *pool);

/**
 * struct pcinet_vio_mem_ops - how the relay reaches the driver's buffers
 * @from_drv: copy @len bytes at driver address @addr into @dst
 * @to_drv: copy @len bytes from @src to driver address @addr
 * @set_drv: set @len bytes at driver address @addr to @c
 *
 * Addresses are what the private ring's descriptors carry (physical
 * addresses in the kernel).  They come from our own driver: the callbacks
 * need not check them.
 */
struct pcinet_vio_mem_ops {
	void (*from_drv)(void *ctx, void *dst, u64 addr, u32 len);
	void (*to_drv)(void *ctx, u64 addr, const void *src, u32 len);
	void (*set_drv)(void *ctx, u64 addr, int c, u32 len);
};

/**
 * struct pcinet_vio_stats - what a queue's relay did, and why it failed
 * @relayed: requests published on the device ring
 * @completed: requests the device completed
 * @aborted: requests completed by the relay with an error
 * @pool_waits: times a request waited for pool space
 * @too_big: requests larger than a pool (aborted)
 * @bad_chain: malformed private chains (aborted)
 * @err_idx: device used->idx ahead of what is in flight
 * @err_id: used entry with an id out of range
 * @err_dup: used entry for a head not in flight (a duplicate)
 * @err_len: used entry with a length above the chain's IN bytes
 */
struct pcinet_vio_stats {
	u64 relayed;
	u64 completed;
	u64 aborted;
	u64 pool_waits;
	u64 too_big;
	u64 bad_chain;
	u64 err_idx;
	u64 err_id;
	u64 err_dup;
	u64 err_len;
};

/**
 * struct pcinet_vio_relay - one device's relay state, shared by its queues
 * @win: our mapping of window offset 0 (the pools are found from it)
 * @out: OUT pool (in D's dev span)
 * @in: IN pool (in B's drv span)
 * @ops: access to the driver's buffers
 * @ctx: passed to @ops
 * @device_id: virtio device ID (PCINET_VIRTIO_ID_FS: an abort writes a
 *	FUSE error reply, -EIO)
 * @indirect: the device ring uses INDIRECT_DESC
 * @event_idx: the device ring uses EVENT_IDX
 * @dead: the device is gone: nothing touches the window any more, every
 *	request is aborted
 */
struct pcinet_vio_relay {
	u8 *win;
	struct pcinet_vio_pool out;
	struct pcinet_vio_pool in;
	const struct pcinet_vio_mem_ops *ops;
	void *ctx;
	u32 device_id;
	bool indirect;
	bool event_idx;
	bool dead;
};

/**
 * struct pcinet_vio_req - a request in flight on the device ring
 * @busy: in flight
 * @out_off: its OUT extent, pool offset (@out_size 0: none)
 * @out_size: bytes of the OUT extent
 * @in_off: its IN extent, pool offset (@in_size 0: none)
 * @in_size: bytes of the IN extent
 * @in_bytes: the chain's device-writable bytes (bound of the used len)
 */
struct pcinet_vio_req {
	bool busy;
	u64 out_off;
	u64 out_size;
	u64 in_off;
	u64 in_size;
	u32 in_bytes;
};

/**
 * struct pcinet_vio_vq - one virtqueue: private ring and device ring
 * @relay: the device
 * @num: entries of both rings (1:1 descriptors)
 * @pdesc: private descriptor table
 * @pavail: private avail ring (the driver writes it)
 * @pused: private used ring (we write it)
 * @ddesc: device descriptor table, in the window (we write it)
 * @davail: device avail ring, in the window (we write it)
 * @dused: device used ring, in the window (the peer writes it)
 * @req: per head, what is in flight (caller's memory, @num entries)
 * @last_avail: next private avail entry to relay
 * @pused_idx: private used index (published by R6)
 * @told_used: @pused_idx as last reported with PCINET_VIO_INTR
 * @davail_idx: device avail index (published by R1)
 * @kick_base: device avail index at the last kick decision
 * @last_used: next device used entry to consume
 * @inflight: requests on the device ring
 * @stats: counters
 * @why: the last protocol error, for a ratelimited report
 */
struct pcinet_vio_vq {
	struct pcinet_vio_relay *relay;
	u16 num;
	struct pcinet_vring_desc *pdesc;
	struct pcinet_vring_avail *pavail;
	struct pcinet_vring_used *pused;
	struct pcinet_vring_desc *ddesc;
	struct pcinet_vring_avail *davail;
	const struct pcinet_vring_used *dused;
	struct pcinet_vio_req *req;
	u16 last_avail;
	u16 pused_idx;
	u16 told_used;
	u16 davail_idx;
	u16 kick_base;
	u16 last_used;
	u32 inflight;
	struct pcinet_vio_stats stats;
	const char *why;
};

void pcinet_vio_vq_init(struct pcinet_vio_vq *vq,
			struct pcinet_vio_relay *relay, u16 num,
			void *pdesc, void *pavail, void *pused,
			void *ddesc, void *davail, const void *dused,
			struct pcinet_vio_req *req);
int pcinet_vio_submit(struct pcinet_vio_vq *vq);
int pcinet_vio_complete(struct pcinet_vio_vq *vq);
int pcinet_vio_abort(struct pcinet_vio_vq *vq);

#endif /* _PCINET_VIO_RING_H */
