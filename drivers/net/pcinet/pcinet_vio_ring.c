// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * pcinet virtio relay, shared by the kernel and the userspace tests.
 *
 * Everything read from the window (device descriptions, the device used
 * ring) is written by the other machine: it is read once, into a local,
 * and checked before use.  The private ring is our own driver's: it is
 * trusted not to be hostile, but every walk over it is still bounded, so
 * a bug there costs a request, never a hang.  The letters R1..R6 refer to
 * the ordering contract in pcinet_vio_ring.h.
 */
#ifdef __KERNEL__
#include <linux/compiler.h>
#include <linux/string.h>
#include <asm/byteorder.h>
#endif

#include "pcinet_vio_ring.h"

/* Acquire half of R3 and R5: callers name their pair. */
#define pcinet_vio_load_acquire(p)	virt_load_acquire(p)
/* Release half of R1 and R6: callers name their pair. */
#define pcinet_vio_store_release(p, v)	virt_store_release(p, v)
/* Full barrier of R2 and R4: callers name their pair. */
#define pcinet_vio_mb()			virt_mb()

/*
 * An aborted virtio-fs request gets a complete FUSE error reply: the
 * reply header (struct fuse_out_header: len, error, unique) in its first
 * IN buffer, len the header's 16 bytes, error -EIO, unique copied from
 * the request header (struct fuse_in_header: unique at offset 8) in its
 * first OUT buffer; the used length is the header's.  A kernel that
 * checks replies (virtio_fs_verify_response(), 6.12.118) takes it as it
 * is; with a header left 0xff it would log a bad length and fail the
 * request with -EIO itself, an older one with -EPERM.
 */
#define PCINET_VIO_FUSE_EIO		(-5)
#define PCINET_VIO_FUSE_OUT_HDR		16
#define PCINET_VIO_FUSE_IN_UNIQUE	8

static u64 pcinet_vio_align(u64 x, u64 a)
{
	return (x + a - 1) & ~(a - 1);
}

static bool pcinet_vio_overlap(u64 a, u64 alen, u64 b, u64 blen)
{
	return a < b + blen && b < a + alen;
}

/* [off, off + size) inside [in->off, in->off + in->size), without overflow. */
static bool pcinet_vio_inside(u64 off, u64 size, const struct pcinet_vio_area *in)
{
	return off >= in->off && off - in->off <= in->size &&
	       size <= in->size - (off - in->off);
}

/* ------------------------------------------------------------------ */
/* Device descriptions                                                 */
/* ------------------------------------------------------------------ */

/**
 * pcinet_vio_desc_read - copy a device description out of the window (V2)
 * @w: the description, in our drv region
 * @copy: filled in
 *
 * Load-acquire @dev_gen (pairs with the store-release V1 of the device
 * side), copy the block, load @dev_gen again: if it changed, the device
 * side rewrote the block meanwhile and the copy may be torn.
 *
 * Return: 0 (@copy->dev_gen 0: an empty slot), or -PCINET_VIO_EPROTO if
 * @dev_gen changed during the copy (the caller retries on its next tick).
 */
int pcinet_vio_desc_read(const struct pcinet_vio_devdesc *w,
			 struct pcinet_vio_devdesc *copy)
{
	u32 gen;

	/* V2: pairs with V1 of the device side; the block after dev_gen */
	gen = le32_to_cpu(pcinet_vio_load_acquire(&w->dev_gen));
	memcpy(copy, w, sizeof(*copy));
	/* V2: the copy's loads before the second look at dev_gen */
	virt_rmb();
	if (le32_to_cpu(READ_ONCE(w->dev_gen)) != gen)
		return -PCINET_VIO_EPROTO;
	copy->dev_gen = cpu_to_le32(gen);
	return 0;
}

#define PCINET_VIO_NR_AREAS	(2 * PCINET_VIO_MAX_VQ + 1)

/* Areas of a span pairwise disjoint. */
static bool pcinet_vio_disjoint(const u64 *start, const u64 *len, int n)
{
	int i, j;

	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (pcinet_vio_overlap(start[i], len[i], start[j], len[j]))
				return false;
	return true;
}

/* A span: aligned, sized, inside the heap of its region. */
static bool pcinet_vio_span_ok(const struct pcinet_vio_area *span,
			       const struct pcinet_vio_area *region)
{
	struct pcinet_vio_area heap;

	if (region->size <= PCINET_VIO_FIXED_SIZE)
		return false;
	heap.off = region->off + PCINET_VIO_FIXED_SIZE;
	heap.size = region->size - PCINET_VIO_FIXED_SIZE;
	return span->size && !(span->off % PCINET_VIO_ALIGN) &&
	       !(span->size % PCINET_VIO_ALIGN) &&
	       pcinet_vio_inside(span->off, span->size, &heap);
}

/* A pool: aligned, sized, inside its span. */
static bool pcinet_vio_pool_ok(const struct pcinet_vio_area *pool,
			       const struct pcinet_vio_area *span)
{
	return pool->size && !(pool->off % PCINET_VIO_POOL_ALIGN) &&
	       !(pool->size % PCINET_VIO_POOL_ALIGN) &&
	       pcinet_vio_inside(pool->off, pool->size, span);
}

/**
 * pcinet_vio_desc_check - check and decode a device description
 * @d: the description, copied out (pcinet_vio_desc_read()), @dev_gen set
 * @dev_region: the device side's dev region (desc, avail, OUT pool)
 * @drv_region: our drv region (used, IN pool)
 * @live: the other devices of the same device side already registered
 * @nr_live: how many
 * @info: filled in when the description passes
 * @why: set to the check that failed
 *
 * The checks of docs/design.md, "Untrusted input": @device_id nonzero;
 * @nr_vq 1..PCINET_VIO_MAX_VQ; each queue's @num_max a power of two up to
 * PCINET_VIO_NUM_MAX, @desc_off 16-, @avail_off 2-, @used_off 4-aligned;
 * the pools PCINET_VIO_POOL_ALIGN aligned and sized; the spans
 * PCINET_VIO_ALIGN aligned, inside the heap of their region, clear of the
 * spans of every device in @live; every area inside its span, the areas
 * of a span disjoint; @config_len at most PCINET_VIO_CONFIG_SIZE;
 * VERSION_1 set and ACCESS_PLATFORM clear.
 *
 * Return: 0, or -PCINET_VIO_EPROTO (PCINET_VIO_ERR_DESC: never register).
 */
int pcinet_vio_desc_check(const struct pcinet_vio_devdesc *d,
			  const struct pcinet_vio_area *dev_region,
			  const struct pcinet_vio_area *drv_region,
			  const struct pcinet_vio_devinfo *live,
			  unsigned int nr_live,
			  struct pcinet_vio_devinfo *info, const char **why)
{
	u64 ds[PCINET_VIO_NR_AREAS], dl[PCINET_VIO_NR_AREAS];
	u64 us[PCINET_VIO_NR_AREAS], ul[PCINET_VIO_NR_AREAS];
	struct pcinet_vio_devinfo n;
	unsigned int q, i;

	memset(&n, 0, sizeof(n));
	n.dev_gen = le32_to_cpu(d->dev_gen);
	n.device_id = le32_to_cpu(d->device_id);
	n.vendor_id = le32_to_cpu(d->vendor_id);
	n.nr_vq = le32_to_cpu(d->nr_vq);
	n.features = le64_to_cpu(d->features);
	n.config_len = le32_to_cpu(d->config_len);
	n.out_pool.off = le64_to_cpu(d->out_pool_off);
	n.out_pool.size = le64_to_cpu(d->out_pool_size);
	n.in_pool.off = le64_to_cpu(d->in_pool_off);
	n.in_pool.size = le64_to_cpu(d->in_pool_size);
	n.dev_span.off = le64_to_cpu(d->dev_span_off);
	n.dev_span.size = le64_to_cpu(d->dev_span_size);
	n.drv_span.off = le64_to_cpu(d->drv_span_off);
	n.drv_span.size = le64_to_cpu(d->drv_span_size);

	*why = "dev_gen 0";
	if (!n.dev_gen)
		return -PCINET_VIO_EPROTO;
	*why = "device_id 0";
	if (!n.device_id)
		return -PCINET_VIO_EPROTO;
	*why = "nr_vq";
	if (!n.nr_vq || n.nr_vq > PCINET_VIO_MAX_VQ)
		return -PCINET_VIO_EPROTO;
	*why = "config_len";
	if (n.config_len > PCINET_VIO_CONFIG_SIZE)
		return -PCINET_VIO_EPROTO;
	*why = "features: VERSION_1 clear or ACCESS_PLATFORM set";
	if (!(n.features & (1ULL << PCINET_VIRTIO_F_VERSION_1)) ||
	    (n.features & (1ULL << PCINET_VIRTIO_F_ACCESS_PLATFORM)))
		return -PCINET_VIO_EPROTO;
	*why = "dev span";
	if (!pcinet_vio_span_ok(&n.dev_span, dev_region))
		return -PCINET_VIO_EPROTO;
	*why = "drv span";
	if (!pcinet_vio_span_ok(&n.drv_span, drv_region))
		return -PCINET_VIO_EPROTO;
	*why = "span of another device";
	for (i = 0; i < nr_live; i++)
		if (pcinet_vio_overlap(n.dev_span.off, n.dev_span.size,
				       live[i].dev_span.off,
				       live[i].dev_span.size) ||
		    pcinet_vio_overlap(n.drv_span.off, n.drv_span.size,
				       live[i].drv_span.off,
				       live[i].drv_span.size))
			return -PCINET_VIO_EPROTO;
	*why = "OUT pool";
	if (!pcinet_vio_pool_ok(&n.out_pool, &n.dev_span))
		return -PCINET_VIO_EPROTO;
	*why = "IN pool";
	if (!pcinet_vio_pool_ok(&n.in_pool, &n.drv_span))
		return -PCINET_VIO_EPROTO;
	ds[0] = n.out_pool.off;
	dl[0] = n.out_pool.size;
	us[0] = n.in_pool.off;
	ul[0] = n.in_pool.size;
	for (q = 0; q < n.nr_vq; q++) {
		const struct pcinet_vio_vqdesc *v = &d->vq[q];
		struct pcinet_vio_vqinfo *vi = &n.vq[q];

		vi->num_max = le16_to_cpu(v->num_max);
		vi->desc_off = le64_to_cpu(v->desc_off);
		vi->avail_off = le64_to_cpu(v->avail_off);
		vi->used_off = le64_to_cpu(v->used_off);
		*why = "num_max";
		if (!pcinet_vio_num_ok(vi->num_max))
			return -PCINET_VIO_EPROTO;
		*why = "ring alignment";
		if (vi->desc_off % PCINET_VRING_DESC_ALIGN ||
		    vi->avail_off % PCINET_VRING_AVAIL_ALIGN ||
		    vi->used_off % PCINET_VRING_USED_ALIGN)
			return -PCINET_VIO_EPROTO;
		ds[1 + 2 * q] = vi->desc_off;
		dl[1 + 2 * q] = PCINET_VRING_DESC_BYTES(vi->num_max);
		ds[2 + 2 * q] = vi->avail_off;
		dl[2 + 2 * q] = PCINET_VRING_AVAIL_BYTES(vi->num_max);
		us[1 + q] = vi->used_off;
		ul[1 + q] = PCINET_VRING_USED_BYTES(vi->num_max);
		*why = "ring outside its span";
		if (!pcinet_vio_inside(ds[1 + 2 * q], dl[1 + 2 * q], &n.dev_span) ||
		    !pcinet_vio_inside(ds[2 + 2 * q], dl[2 + 2 * q], &n.dev_span) ||
		    !pcinet_vio_inside(us[1 + q], ul[1 + q], &n.drv_span))
			return -PCINET_VIO_EPROTO;
	}
	*why = "areas of a span overlap";
	if (!pcinet_vio_disjoint(ds, dl, 1 + 2 * n.nr_vq) ||
	    !pcinet_vio_disjoint(us, ul, 1 + n.nr_vq))
		return -PCINET_VIO_EPROTO;
	*why = NULL;
	*info = n;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Pools                                                               */
/* ------------------------------------------------------------------ */

/**
 * pcinet_vio_pool_init - set up an empty pool
 * @pool: the pool
 * @mem: our mapping of its first byte
 * @base: its window offset
 * @size: its size
 * @ext: room for @max extents
 * @max: the most requests in flight on the pool at once
 */
void pcinet_vio_pool_init(struct pcinet_vio_pool *pool, void *mem, u64 base,
			  u64 size, struct pcinet_vio_ext *ext, u32 max)
{
	pool->mem = mem;
	pool->base = base;
	pool->size = size;
	pool->ext = ext;
	pool->max = max;
	pcinet_vio_pool_reset(pool);
}

/**
 * pcinet_vio_pool_reset - free every extent
 * @pool: the pool
 */
void pcinet_vio_pool_reset(struct pcinet_vio_pool *pool)
{
	pool->nr = 0;
	pool->used = 0;
}

/**
 * pcinet_vio_pool_alloc - allocate an extent, first fit
 * @pool: the pool
 * @size: bytes, not zero
 * @align: alignment of its start, a power of two
 * @off: set to its offset from the start of the pool
 *
 * At most @pool->nr + 1 steps: the extents are kept sorted, and the gaps
 * between them are tried in order.
 *
 * Return: 0, or -1 if no gap fits now (or the extent table is full).
 */
int pcinet_vio_pool_alloc(struct pcinet_vio_pool *pool, u64 size, u64 align,
			  u64 *off)
{
	u64 cur = 0, start;
	u32 k;

	if (!size || size > pool->size || pool->nr >= pool->max)
		return -1;
	for (k = 0; k <= pool->nr; k++) {
		u64 end = k < pool->nr ? pool->ext[k].off : pool->size;

		start = pcinet_vio_align(cur, align);
		if (start <= end && end - start >= size)
			break;
		if (k < pool->nr)
			cur = pool->ext[k].off + pool->ext[k].size;
	}
	if (k > pool->nr)
		return -1;
	memmove(&pool->ext[k + 1], &pool->ext[k],
		(pool->nr - k) * sizeof(pool->ext[0]));
	pool->ext[k].off = start;
	pool->ext[k].size = size;
	pool->nr++;
	pool->used += size;
	*off = start;
	return 0;
}

/**
 * pcinet_vio_pool_free - free the extent that starts at @off
 * @pool: the pool
 * @off: what pcinet_vio_pool_alloc() returned
 *
 * Return: 0, or -1 if no extent starts there (a bug of the caller).
 */
int pcinet_vio_pool_free(struct pcinet_vio_pool *pool, u64 off)
{
	u32 lo = 0, hi = pool->nr;

	while (lo < hi) {
		u32 mid = lo + (hi - lo) / 2;

		if (pool->ext[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= pool->nr || pool->ext[lo].off != off)
		return -1;
	pool->used -= pool->ext[lo].size;
	memmove(&pool->ext[lo], &pool->ext[lo + 1],
		(pool->nr - lo - 1) * sizeof(pool->ext[0]));
	pool->nr--;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Chains of the private ring                                          */
/* ------------------------------------------------------------------ */

/*
 * One walk over a private chain, in chain order.  A direct chain: from
 * @head along NEXT, at most @num descriptors.  An indirect one: a lone
 * head with INDIRECT (not NEXT) whose table is a multiple of 16 bytes and
 * at most @num entries, walked along its own NEXT links, no nested
 * INDIRECT.  Device-readable buffers come before device-writable ones.
 *
 * For each buffer the walk calls pcinet_vio_step() with its place in the
 * extent (the layout rule: chain order, PCINET_VIO_BUF_ALIGN, or
 * PCINET_VIO_POOL_ALIGN from that length on).
 */
struct pcinet_vio_walk {
	u16 head;
	bool indirect;
	u32 nr;			/* buffers */
	u64 out_bytes;		/* sum of device-readable lengths */
	u64 in_bytes;		/* sum of device-writable lengths */
	u64 out_pos;		/* layout cursor in the OUT extent */
	u64 in_pos;		/* layout cursor in the IN extent */
	u64 out_align;		/* extent alignments */
	u64 in_align;
	u64 first_out;		/* driver address of the first OUT buffer */
	u32 first_out_len;	/* its length (0: none) */
	bool fuse_reply;	/* POISON wrote a FUSE error reply */
};

enum pcinet_vio_pass {
	PCINET_VIO_SIZE,	/* sizes only */
	PCINET_VIO_FILL,	/* copy OUT, write device descriptors */
	PCINET_VIO_BACK,	/* copy IN back */
	PCINET_VIO_POISON,	/* poison IN (abort) */
};

static u64 pcinet_vio_place(u64 *pos, u64 *ext_align, u32 len)
{
	u64 a = len >= PCINET_VIO_POOL_ALIGN ? PCINET_VIO_POOL_ALIGN :
					       PCINET_VIO_BUF_ALIGN;
	u64 at = pcinet_vio_align(*pos, a);

	if (a > *ext_align)
		*ext_align = a;
	*pos = at + len;
	return at;
}

static void pcinet_vio_step(struct pcinet_vio_vq *vq, struct pcinet_vio_walk *w,
			    enum pcinet_vio_pass pass,
			    const struct pcinet_vio_req *r,
			    const struct pcinet_vring_desc *pd, int idx)
{
	struct pcinet_vio_relay *rl = vq->relay;
	u16 flags = le16_to_cpu(pd->flags);
	u32 len = le32_to_cpu(pd->len);
	u64 addr = le64_to_cpu(pd->addr);
	bool write = flags & PCINET_VRING_F_WRITE;
	u64 at, prev = 0;
	struct pcinet_vring_desc dd;

	if (write) {
		at = pcinet_vio_place(&w->in_pos, &w->in_align, len);
		w->in_bytes += len;
	} else {
		if (!w->out_bytes && !w->first_out_len) {
			w->first_out = addr;
			w->first_out_len = len;
		}
		prev = w->out_pos;
		at = pcinet_vio_place(&w->out_pos, &w->out_align, len);
		w->out_bytes += len;
	}
	switch (pass) {
	case PCINET_VIO_SIZE:
		return;
	case PCINET_VIO_FILL:
		if (write) {
			dd.addr = cpu_to_le64(rl->in.base + r->in_off + at);
		} else {
			u8 *p = rl->out.mem + r->out_off;

			/* no stale bytes between buffers: zero the gap */
			memset(p + prev, 0, at - prev);
			if (len)
				rl->ops->from_drv(rl->ctx, p + at, addr, len);
			dd.addr = cpu_to_le64(rl->out.base + r->out_off + at);
		}
		dd.len = cpu_to_le32(len);
		dd.flags = cpu_to_le16(flags & (PCINET_VRING_F_NEXT |
						PCINET_VRING_F_WRITE));
		if (idx < 0) {
			/* indirect: the table at the start of the OUT extent */
			dd.next = cpu_to_le16(w->nr + 1);
			memcpy(rl->out.mem + r->out_off + 16 * w->nr, &dd,
			       sizeof(dd));
		} else {
			dd.next = pd->next;
			memcpy(&vq->ddesc[idx], &dd, sizeof(dd));
		}
		return;
	case PCINET_VIO_BACK:
		if (write && len)
			rl->ops->to_drv(rl->ctx, addr,
					rl->in.mem + r->in_off + at, len);
		return;
	case PCINET_VIO_POISON:
		if (!write || !len)
			return;
		rl->ops->set_drv(rl->ctx, addr, 0xff, len);
		/* virtio-fs: a FUSE error reply in the first IN buffer */
		if (rl->device_id == PCINET_VIRTIO_ID_FS &&
		    w->in_bytes == len && len >= PCINET_VIO_FUSE_OUT_HDR) {
			__le32 h[4] = {
				cpu_to_le32(PCINET_VIO_FUSE_OUT_HDR),
				cpu_to_le32((u32)PCINET_VIO_FUSE_EIO),
			};

			/* the driver's own memory: its request's unique */
			if (w->first_out_len >= PCINET_VIO_FUSE_IN_UNIQUE + 8)
				rl->ops->from_drv(rl->ctx, &h[2],
						  w->first_out +
						  PCINET_VIO_FUSE_IN_UNIQUE, 8);
			rl->ops->to_drv(rl->ctx, addr, h, sizeof(h));
			w->fuse_reply = true;
		}
		return;
	}
}

/*
 * Walk the chain at @head for @pass; @r gives the extents (FILL, BACK).
 * Returns 0, or -1 if the chain breaks a rule (nothing was done for the
 * buffers after the break).
 */
static int pcinet_vio_chain(struct pcinet_vio_vq *vq, u16 head,
			    enum pcinet_vio_pass pass,
			    const struct pcinet_vio_req *r,
			    struct pcinet_vio_walk *w)
{
	struct pcinet_vio_relay *rl = vq->relay;
	struct pcinet_vring_desc pd;
	bool seen_in = false;
	u32 i = head, n, steps, tlen;
	u64 table;
	u16 flags;

	memset(w, 0, sizeof(*w));
	w->head = head;
	w->out_align = PCINET_VIO_BUF_ALIGN;
	w->in_align = PCINET_VIO_BUF_ALIGN;
	if (head >= vq->num)
		return -1;
	pd = vq->pdesc[head];
	flags = le16_to_cpu(pd.flags);
	if (flags & PCINET_VRING_F_INDIRECT) {
		/* (an abort may poison an indirect chain the device cannot take) */
		if (flags & PCINET_VRING_F_NEXT ||
		    (!rl->indirect && pass != PCINET_VIO_POISON))
			return -1;
		tlen = le32_to_cpu(pd.len);
		n = tlen / sizeof(pd);
		if (tlen % sizeof(pd) || !n || n > vq->num)
			return -1;
		table = le64_to_cpu(pd.addr);
		w->indirect = true;
		w->out_pos = 16 * (u64)n;	/* the device table comes first */
		if (pass == PCINET_VIO_FILL)
			memset(rl->out.mem + r->out_off, 0, w->out_pos);
		i = 0;
		for (steps = 0; steps < n; steps++) {
			rl->ops->from_drv(rl->ctx, &pd, table + 16 * (u64)i,
					  sizeof(pd));
			flags = le16_to_cpu(pd.flags);
			if (flags & PCINET_VRING_F_INDIRECT ||
			    (seen_in && !(flags & PCINET_VRING_F_WRITE)))
				return -1;
			seen_in = flags & PCINET_VRING_F_WRITE;
			pcinet_vio_step(vq, w, pass, r, &pd, -1);
			w->nr++;
			if (!(flags & PCINET_VRING_F_NEXT))
				break;
			i = le16_to_cpu(pd.next);
			if (i >= n)
				return -1;
		}
		if (steps == n)
			return -1;	/* a loop in the table */
		if (pass == PCINET_VIO_FILL) {
			struct pcinet_vring_desc dd;

			/* the last entry written has no NEXT: w->nr entries */
			dd.addr = cpu_to_le64(rl->out.base + r->out_off);
			dd.len = cpu_to_le32(16 * w->nr);
			dd.flags = cpu_to_le16(PCINET_VRING_F_INDIRECT);
			dd.next = 0;
			memcpy(&vq->ddesc[head], &dd, sizeof(dd));
		}
		return 0;
	}
	for (steps = 0; steps < vq->num; steps++) {
		flags = le16_to_cpu(pd.flags);
		if (flags & PCINET_VRING_F_INDIRECT ||
		    (seen_in && !(flags & PCINET_VRING_F_WRITE)))
			return -1;
		seen_in = flags & PCINET_VRING_F_WRITE;
		pcinet_vio_step(vq, w, pass, r, &pd, i);
		w->nr++;
		if (!(flags & PCINET_VRING_F_NEXT))
			return 0;
		i = le16_to_cpu(pd.next);
		if (i >= vq->num)
			return -1;
		pd = vq->pdesc[i];
	}
	return -1;	/* longer than the ring: a loop */
}

/* ------------------------------------------------------------------ */
/* The relay                                                           */
/* ------------------------------------------------------------------ */

/**
 * pcinet_vio_vq_init - set up a queue's relay, and zero its device ring
 * @vq: the queue
 * @relay: the device's relay state
 * @num: ring size, a power of two up to the queue's @num_max
 * @pdesc: private descriptor table (the driver's, @num entries)
 * @pavail: private avail ring
 * @pused: private used ring
 * @ddesc: device descriptor table in the window
 * @davail: device avail ring in the window
 * @dused: device used ring in the window (zeroed by the device side)
 * @req: @num entries of request state
 *
 * The device descriptor table and avail ring are ours to write: they are
 * zeroed here, before the queue is announced ready.
 */
void pcinet_vio_vq_init(struct pcinet_vio_vq *vq,
			struct pcinet_vio_relay *relay, u16 num,
			void *pdesc, void *pavail, void *pused,
			void *ddesc, void *davail, const void *dused,
			struct pcinet_vio_req *req)
{
	memset(vq, 0, sizeof(*vq));
	vq->relay = relay;
	vq->num = num;
	vq->pdesc = pdesc;
	vq->pavail = pavail;
	vq->pused = pused;
	vq->ddesc = ddesc;
	vq->davail = davail;
	vq->dused = dused;
	vq->req = req;
	memset(req, 0, num * sizeof(*req));
	memset(ddesc, 0, PCINET_VRING_DESC_BYTES(num));
	memset(davail, 0, PCINET_VRING_AVAIL_BYTES(num));
}

/* avail_event: the word after the device used ring's entries (local). */
static const __le16 *pcinet_vio_avail_event(const struct pcinet_vio_vq *vq)
{
	return (const __le16 *)((const u8 *)vq->dused +
				PCINET_VRING_USED_BYTES(vq->num) - 2);
}

/* Post @len for @head on the private used ring (published by R6 later). */
static void pcinet_vio_post(struct pcinet_vio_vq *vq, u16 head, u32 len)
{
	struct pcinet_vring_used_elem *e =
		&vq->pused->ring[vq->pused_idx & (vq->num - 1)];

	WRITE_ONCE(e->id, cpu_to_le32(head));
	WRITE_ONCE(e->len, cpu_to_le32(len));
	vq->pused_idx++;
}

static void pcinet_vio_publish_used(struct pcinet_vio_vq *vq)
{
	/* R6: pairs with virtio_ring's read barrier after used->idx */
	pcinet_vio_store_release(&vq->pused->idx, cpu_to_le16(vq->pused_idx));
}

/*
 * PCINET_VIO_INTR if entries were published since the caller was last
 * told, once: a call that fails after publishing (a completion reaped,
 * then a bad used index) leaves them owed, and the next call (the
 * abort) reports them.  Otherwise the driver never hears of them and
 * waits for ever (virtio_blk has no timeout).
 */
static int pcinet_vio_owed(struct pcinet_vio_vq *vq)
{
	if (vq->pused_idx == vq->told_used)
		return 0;
	vq->told_used = vq->pused_idx;
	return PCINET_VIO_INTR;
}

/* Complete @head with an error, in private memory only. */
static void pcinet_vio_abort_one(struct pcinet_vio_vq *vq, u16 head)
{
	struct pcinet_vio_walk w;
	u32 len = 0;

	if (!pcinet_vio_chain(vq, head, PCINET_VIO_POISON, NULL, &w))
		len = w.fuse_reply ? PCINET_VIO_FUSE_OUT_HDR : (u32)w.in_bytes;
	pcinet_vio_post(vq, head, len);
	vq->stats.aborted++;
}

static void pcinet_vio_free_req(struct pcinet_vio_vq *vq,
				struct pcinet_vio_req *r)
{
	if (r->out_size)
		pcinet_vio_pool_free(&vq->relay->out, r->out_off);
	if (r->in_size)
		pcinet_vio_pool_free(&vq->relay->in, r->in_off);
	r->busy = false;
	r->out_size = 0;
	r->in_size = 0;
}

/*
 * Relay one head.  Returns 1 if it was published on the device ring or
 * completed at once (aborted), 0 if it must wait for pool space.
 */
static int pcinet_vio_relay_one(struct pcinet_vio_vq *vq, u16 head)
{
	struct pcinet_vio_relay *rl = vq->relay;
	struct pcinet_vio_req *r = &vq->req[head];
	struct pcinet_vio_walk w;

	if (pcinet_vio_chain(vq, head, PCINET_VIO_SIZE, NULL, &w) ||
	    w.in_bytes > (u32)~0U) {
		vq->stats.bad_chain++;
		pcinet_vio_abort_one(vq, head);
		return 1;
	}
	if (w.out_pos > rl->out.size || w.in_pos > rl->in.size) {
		/* can never fit: fail it rather than block the queue */
		vq->stats.too_big++;
		pcinet_vio_abort_one(vq, head);
		return 1;
	}
	r->out_size = w.out_pos;
	r->in_size = w.in_pos;
	r->out_off = 0;
	r->in_off = 0;
	if (r->out_size &&
	    pcinet_vio_pool_alloc(&rl->out, r->out_size, w.out_align,
				  &r->out_off))
		goto wait;
	if (r->in_size &&
	    pcinet_vio_pool_alloc(&rl->in, r->in_size, w.in_align, &r->in_off)) {
		if (r->out_size)
			pcinet_vio_pool_free(&rl->out, r->out_off);
		goto wait;
	}
	r->in_bytes = (u32)w.in_bytes;
	/* a byte the device does not write reads as an error */
	if (r->in_size)
		memset(rl->in.mem + r->in_off, 0xff, r->in_size);
	/* the walk is the same as the sizing one: it cannot fail now */
	pcinet_vio_chain(vq, head, PCINET_VIO_FILL, r, &w);
	r->busy = true;
	WRITE_ONCE(vq->davail->ring[vq->davail_idx & (vq->num - 1)],
		   cpu_to_le16(head));
	vq->davail_idx++;
	vq->inflight++;
	vq->stats.relayed++;
	return 1;
wait:
	r->out_size = 0;
	r->in_size = 0;
	vq->stats.pool_waits++;
	return 0;
}

/**
 * pcinet_vio_submit - relay what the driver published on the private ring
 * @vq: the queue
 *
 * Heads are taken in order (FIFO): the first that does not fit into the
 * pools stops the batch and waits for completions.  A chain that breaks a
 * rule, or could never fit, is completed at once with an error.  Once the
 * device is dead, every head is completed with an error and the window is
 * not touched.  Once PCINET_VIO_PASS_BYTES were copied into the pools the
 * batch stops too, with PCINET_VIO_MORE: the caller calls again (later,
 * with interrupts on in between).
 *
 * Return: PCINET_VIO_KICK, PCINET_VIO_INTR (entries published since the
 * last report) and/or PCINET_VIO_MORE, or -PCINET_VIO_EPROTO if the
 * private ring is impossible (an index ahead by more than the ring, a head
 * out of range or already in flight): the caller kills the device and
 * aborts.
 */
int pcinet_vio_submit(struct pcinet_vio_vq *vq)
{
	struct pcinet_vio_relay *rl = vq->relay;
	u16 avail, old_used = vq->pused_idx, old, event;
	int ret = 0, intr = 0, more = 0;
	u64 copied = 0;
	bool kick;
	u16 head;

	/* R5: pairs with virtio_ring's write barrier before avail->idx */
	avail = le16_to_cpu(pcinet_vio_load_acquire(&vq->pavail->idx));
	if ((u16)(avail - vq->last_avail) > vq->num) {
		vq->why = "private avail index";
		return -PCINET_VIO_EPROTO;
	}
	while (vq->last_avail != avail) {
		if (copied >= PCINET_VIO_PASS_BYTES) {
			more = PCINET_VIO_MORE;
			break;
		}
		head = le16_to_cpu(READ_ONCE(vq->pavail->ring[vq->last_avail &
							      (vq->num - 1)]));
		if (head >= vq->num || vq->req[head].busy) {
			vq->why = "private avail entry";
			ret = -PCINET_VIO_EPROTO;
			break;
		}
		if (rl->dead)
			pcinet_vio_abort_one(vq, head);
		else if (!pcinet_vio_relay_one(vq, head))
			break;
		/* (an aborted head copied nothing into the window) */
		if (vq->req[head].busy)
			copied += vq->req[head].out_size + vq->req[head].in_size;
		vq->last_avail++;
	}
	if (vq->pused_idx != old_used)
		pcinet_vio_publish_used(vq);
	if (ret >= 0)
		intr = pcinet_vio_owed(vq);
	if (rl->dead || vq->davail_idx == vq->kick_base)
		return ret < 0 ? ret : intr | more;
	/* R1: pairs with the back end's read barrier after avail->idx */
	pcinet_vio_store_release(&vq->davail->idx, cpu_to_le16(vq->davail_idx));
	/* R2: pairs with the back end's barrier after avail_event */
	pcinet_vio_mb();
	old = vq->kick_base;
	vq->kick_base = vq->davail_idx;
	if (rl->event_idx) {
		event = le16_to_cpu(READ_ONCE(*pcinet_vio_avail_event(vq)));
		kick = (u16)(vq->davail_idx - event - 1) <
		       (u16)(vq->davail_idx - old);
	} else {
		kick = !(le16_to_cpu(READ_ONCE(vq->dused->flags)) &
			 PCINET_VRING_USED_F_NO_NOTIFY);
	}
	if (ret < 0)
		return ret;
	return intr | more | (kick ? PCINET_VIO_KICK : 0);
}

/*
 * Consume device used entries up to @idx, adding the bytes copied back to
 * *@copied: 0 done, 1 stopped at PCINET_VIO_PASS_BYTES (entries left),
 * -1 on a protocol error.
 */
static int pcinet_vio_reap(struct pcinet_vio_vq *vq, u16 idx, u64 *copied)
{
	struct pcinet_vio_walk w;
	struct pcinet_vio_req *r;
	u32 id, len;

	while (vq->last_used != idx) {
		const struct pcinet_vring_used_elem *e =
			&vq->dused->ring[vq->last_used & (vq->num - 1)];

		if (*copied >= PCINET_VIO_PASS_BYTES)
			return 1;
		id = le32_to_cpu(READ_ONCE(e->id));
		len = le32_to_cpu(READ_ONCE(e->len));
		if (id >= vq->num) {
			vq->stats.err_id++;
			vq->why = "used id out of range";
			return -1;
		}
		r = &vq->req[id];
		if (!r->busy) {
			vq->stats.err_dup++;
			vq->why = "used id not in flight";
			return -1;
		}
		if (len > r->in_bytes) {
			vq->stats.err_len++;
			vq->why = "used len above the chain's IN bytes";
			return -1;
		}
		/* the whole IN extent: a short len leaves no stale byte */
		pcinet_vio_chain(vq, (u16)id, PCINET_VIO_BACK, r, &w);
		*copied += r->in_size;
		pcinet_vio_free_req(vq, r);
		pcinet_vio_post(vq, (u16)id, len);
		vq->inflight--;
		vq->last_used++;
		vq->stats.completed++;
	}
	return 0;
}

/**
 * pcinet_vio_complete - take the device's completions back to the driver
 * @vq: the queue
 *
 * Every used entry is checked (docs/design.md, "Untrusted input"): the
 * index at most the requests in flight ahead, the id below @num and in
 * flight, the length at most the chain's IN bytes.  A failure marks the
 * device dead (the caller unplugs it and calls pcinet_vio_abort()); the
 * entries before it were completed normally.  With EVENT_IDX the loop
 * re-arms used_event and looks again (R4).  A well-behaved device needs
 * at most two rounds per request in flight (nothing is submitted
 * meanwhile); one that moves used->idx back and forth could keep the loop
 * going, so it stops after 2 * num + 2 rounds and the next notification
 * or tick carries on.  Once PCINET_VIO_PASS_BYTES were copied back it
 * stops with PCINET_VIO_MORE (the entries after wait for the next call).
 * The caller runs pcinet_vio_submit() afterwards (space was freed).
 *
 * Return: PCINET_VIO_INTR if requests were completed (and PCINET_VIO_MORE
 * if entries are left for the next call), 0 if none, or
 * -PCINET_VIO_EPROTO (the device is then dead; what was completed before
 * the error is published, and the caller's pcinet_vio_abort() reports it).
 */
int pcinet_vio_complete(struct pcinet_vio_vq *vq)
{
	struct pcinet_vio_relay *rl = vq->relay;
	unsigned int rounds = 2 * (unsigned int)vq->num + 2;
	u16 old_used = vq->pused_idx, idx;
	int err = 0, more = 0;
	u64 copied = 0;

	if (rl->dead)
		return 0;
	while (rounds--) {
		/* R3: pairs with the back end's barrier before used->idx */
		idx = le16_to_cpu(pcinet_vio_load_acquire(&vq->dused->idx));
		if ((u16)(idx - vq->last_used) > vq->inflight) {
			vq->stats.err_idx++;
			vq->why = "used idx ahead of the requests in flight";
			err = -1;
			break;
		}
		if (idx == vq->last_used) {
			if (!rl->event_idx)
				break;
			WRITE_ONCE(vq->davail->ring[vq->num],
				   cpu_to_le16(vq->last_used));
			/* R4: pairs with the back end's barrier after used->idx */
			pcinet_vio_mb();
			if (le16_to_cpu(READ_ONCE(vq->dused->idx)) == vq->last_used)
				break;
			continue;
		}
		err = pcinet_vio_reap(vq, idx, &copied);
		if (err > 0) {
			err = 0;
			more = PCINET_VIO_MORE;
			break;
		}
		if (err)
			break;
	}
	if (vq->pused_idx != old_used)
		pcinet_vio_publish_used(vq);
	if (err) {
		rl->dead = true;	/* what it published is owed */
		return -PCINET_VIO_EPROTO;
	}
	return pcinet_vio_owed(vq) | more;
}

/**
 * pcinet_vio_abort - complete everything of a queue with an error
 * @vq: the queue
 *
 * Marks the device dead, then completes every request in flight on the
 * device ring and every head still waiting in the private avail ring: the
 * driver's IN buffers are filled with 0xff (virtio-blk: an I/O error
 * status; virtio-fs: the reply's error is set to -EIO), the entry posted
 * on the private used ring.  The window is not touched.  Call it for
 * every queue of a dead device, again on every later notify (or run
 * pcinet_vio_submit(), which aborts on a dead device too).
 *
 * Return: PCINET_VIO_INTR if anything was completed (by this call, or
 * by an earlier one that failed after completing), 0 otherwise, or
 * -PCINET_VIO_EPROTO if the private avail ring is impossible (what could
 * be completed was).
 */
int pcinet_vio_abort(struct pcinet_vio_vq *vq)
{
	u16 old_used = vq->pused_idx, head;

	vq->relay->dead = true;
	for (head = 0; head < vq->num; head++) {
		if (!vq->req[head].busy)
			continue;
		pcinet_vio_abort_one(vq, head);
		pcinet_vio_free_req(vq, &vq->req[head]);
		vq->inflight--;
	}
	if (vq->pused_idx != old_used)
		pcinet_vio_publish_used(vq);
	/* reports what this and any failed call before published */
	return pcinet_vio_submit(vq);
}
