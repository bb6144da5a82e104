// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet virtio channel, device side D: the character device
 * /dev/pcinet-vhost<N>, through which a process (pcinet-vhost) offers
 * virtio devices to the peer and serves them with vhost-user back ends.
 * docs/design.md, "Virtio channel", "The host's character device", is
 * the description; uapi/pcinet_vhost.h the ABI; pcinet_layout.h the wire
 * structures.  tools/pcinet-peer/peer_vio.c does the same in userspace.
 *
 * Per link one struct pcinet_vhost, a second user of the virtio channel
 * beside the driver side (pcinet_vio.c), listed in the core's table; it
 * exists only when the window has a valid virtio block with a dev region
 * of ours and a drv region of the peer's.  It owns:
 *
 *   the peer's drv region: region header (our instance), one
 *     description per slot, the spans of the devices we offer (used
 *     rings, IN pools; the back ends write them);
 *   our dev region, read only: the peer's driver states, and the spans
 *     the peer writes (descriptor tables, avail rings, OUT pools).
 *
 * Slots go FREE --ADD_DEV--> LIVE --DEL_DEV or release of the owner-->
 * WITHDRAWN (dev_gen 0 published, spans still reserved) --the peer's
 * driver state no longer names the instance, or the peer is gone-->
 * FREE.  All slot state is under @lock, a spinlock taken from the
 * doorbell (hard interrupt), the link tick and the ioctls; nothing under
 * it sleeps.  Descriptions are kept in private copies and written again on
 * every tick (soft state); driver states are copied out and handed to
 * userspace unchecked, except the words compared here (drv_gen, dev_gen,
 * the sequence numbers, notify).
 *
 * Signalling ("Signalling" in the design): a kick eventfd is signalled
 * when the peer's notify word of its queue moved, seen on vector 3 and on
 * every tick; a call eventfd is waited on with a wait-queue entry of our
 * own (as KVM's irqfd), whose wake-up consumes the count and rings the
 * peer's vector 3.
 *
 * Memory ("The host's character device"): GET_MEM_FD gives a memory file
 * per offered device, file offset = window offset; its mmap() backs only
 * the device's two spans (VM_PFNMAP, vmf_insert_pfn() from the fault
 * handler), every other page raises SIGBUS.  Each memory file has an
 * address space of its own, so that the withdrawal of its device zaps
 * exactly its mappings (unmap_mapping_range()); later faults SIGBUS.
 *
 * Locks: @mutex (ioctls, releases, destroy) > a memory file's @sem >
 * @lock; a fault takes only @sem, under the mm's lock.
 *
 * Ordering pairs V1, V4, V4', V5, V6: docs/design.md, "Negotiation".
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/nospec.h>
#include <linux/poll.h>
#include <linux/random.h>
#include <linux/rwsem.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "pcinet_chan.h"
#include "pcinet_compat.h"
#include "pcinet_grace.h"
#include "pcinet_vio_ring.h"
#include "uapi/pcinet_vhost.h"

static_assert(PCINET_VHOST_MAX_DEV == PCINET_VIO_MAX_DEV);
static_assert(PCINET_VHOST_MAX_VQ == PCINET_VIO_MAX_VQ);
static_assert(PCINET_VHOST_CONFIG_SIZE == PCINET_VIO_CONFIG_SIZE);

/* Device features a device side never offers (vhost-user's own bits). */
#define PCINET_VHOST_BAD_FEATURES					\
	(BIT_ULL(PCINET_VIRTIO_F_ACCESS_PLATFORM) | BIT_ULL(24) |	\
	 BIT_ULL(26) | BIT_ULL(30))

/*
 * How long a withdrawn device's spans stay reserved when the peer's
 * driver state names another instance of the slot (see the scan).
 */
#define PCINET_VHOST_RELEASE_MS	(10 * PCINET_TICK_MS)
/* PCINET_PEER_GRACE_MS in jiffies, for pcinet_grace_look() */
#define PCINET_VHOST_GRACE	msecs_to_jiffies(PCINET_PEER_GRACE_MS)

struct pcinet_vhost_file;

/**
 * struct pcinet_vhost_call - a call eventfd bound to a virtqueue
 * @ch: the channel to ring
 * @ctx: the eventfd
 * @wait: our entry on its wait queue
 * @pt: to add @wait from vfs_poll()
 */
struct pcinet_vhost_call {
	struct pcinet_channel *ch;
	struct eventfd_ctx *ctx;
	wait_queue_entry_t wait;
	poll_table pt;
};

/**
 * struct pcinet_vhost_slot - one device slot
 * @owner: the control file that offered it; NULL: free or withdrawn
 * @busy: its spans are reserved (live or withdrawn)
 * @dev_gen: the instance offered; while withdrawn, the one withdrawn
 * @withdrawn: when it was withdrawn (jiffies)
 * @desc: the description we publish (dev_gen 0 once withdrawn)
 * @dev_span: its span of our dev region
 * @drv_span: its span of the peer's drv region
 * @seen: drv_gen, dev_gen, status_seq, config_seq, error of the peer's
 *	driver state as last compared (poll)
 * @kick: bound kick eventfds, per virtqueue
 * @notify: the notify word last seen, per virtqueue
 * @call: bound call eventfds, per virtqueue
 */
struct pcinet_vhost_slot {
	struct pcinet_vhost_file *owner;
	bool busy;
	u32 dev_gen;
	unsigned long withdrawn;
	struct pcinet_vio_devdesc desc;
	struct pcinet_vio_area dev_span;
	struct pcinet_vio_area drv_span;
	u32 seen[5];
	struct eventfd_ctx *kick[PCINET_VIO_MAX_VQ];
	u32 notify[PCINET_VIO_MAX_VQ];
	struct pcinet_vhost_call *call[PCINET_VIO_MAX_VQ];
};

/**
 * struct pcinet_vhost - the device side of one link
 * @ch: the virtio channel
 * @ref: the link and every open control file
 * @mutex: serialises the ioctls, the release of a control file and the
 *	link's destroy: slots change only under it (and @lock), and the
 *	eventfds are bound and unbound under it
 * @lock: everything below, and every write into the window; irq-safe
 * @win: our mapping of the window
 * @phys: its physical address (0: memory files are not possible)
 * @win_size: its size
 * @side: our side
 * @dev_region: our dev region (the peer's driver states, desc, avail, OUT)
 * @drv_region: the peer's drv region (our descriptions, used, IN)
 * @rhdr_out: region header we write, at the start of @drv_region
 * @rhdr_in: region header the peer writes, at the start of @dev_region
 * @desc_win: our descriptions in the window
 * @st_win: the peer's driver states in the window
 * @inst: our virtio instance, random, nonzero
 * @peer_inst: the peer's instance as acted upon (0: none): what
 *	pcinet_vhost_scan() took from the peer's words, which end the
 *	sessions only once they held for PCINET_PEER_GRACE_MS
 * @peer_grace: how long they have read otherwise
 * @peer_flags: PCINET_VHOST_F_* as last seen
 * @events: bumped on every change poll() reports
 * @gone: the link is gone: the window must not be touched any more
 * @wq: poll()
 * @mems: the memory files, under @mutex
 * @slot: the device slots
 * @misc: /dev/pcinet-vhost<N>
 * @name: its name
 */
struct pcinet_vhost {
	struct pcinet_channel *ch;
	struct kref ref;
	struct mutex mutex; /* ioctls, release, destroy */
	spinlock_t lock; /* slots, window writes; irq-safe */
	u8 *win;
	phys_addr_t phys;
	u64 win_size;
	unsigned int side;
	struct pcinet_vio_area dev_region;
	struct pcinet_vio_area drv_region;
	struct pcinet_vio_rhdr *rhdr_out;
	const struct pcinet_vio_rhdr *rhdr_in;
	struct pcinet_vio_devdesc *desc_win;
	const struct pcinet_vio_drvstate *st_win;
	u32 inst;
	u32 peer_inst;
	struct pcinet_grace peer_grace;
	u32 peer_flags;
	u32 events;
	bool gone;
	wait_queue_head_t wq;
	struct list_head mems;
	struct pcinet_vhost_slot slot[PCINET_VIO_MAX_DEV];
	struct miscdevice misc;
	char name[24];
};

/**
 * struct pcinet_vhost_file - an open control file
 * @vh: its link
 * @seen: @events of the link at the last GET_INFO or GET_DRV
 */
struct pcinet_vhost_file {
	struct pcinet_vhost *vh;
	u32 seen;
};

/**
 * struct pcinet_vhost_mem - the memory file of one offered device
 * @vh: its link (a reference)
 * @node: in the link's @mems, under its @mutex
 * @slot: the device's slot
 * @dev_gen: the offer it maps
 * @phys: the window's physical address
 * @win_size: the window's size: the file's size
 * @span: the device's two spans, the only pages backed
 * @sem: @revoked: faults read it, the revocation writes it
 * @revoked: the device was withdrawn: every fault raises SIGBUS
 * @mapping: the file's own address space (see the top of the file)
 */
struct pcinet_vhost_mem {
	struct pcinet_vhost *vh;
	struct list_head node;
	unsigned int slot;
	u32 dev_gen;
	phys_addr_t phys;
	u64 win_size;
	struct pcinet_vio_area span[2];
	struct rw_semaphore sem;
	bool revoked;
	struct address_space mapping;
};

/* What a withdrawal unbinds, released outside @lock. */
struct pcinet_vhost_unbind {
	struct eventfd_ctx *kick[PCINET_VIO_MAX_VQ];
	struct pcinet_vhost_call *call[PCINET_VIO_MAX_VQ];
};

static void pcinet_vhost_free(struct kref *ref)
{
	kfree(container_of(ref, struct pcinet_vhost, ref));
}

/* ----- eventfds ----- */

/* The back end signalled its call eventfd: ring the peer (any context). */
static int pcinet_vhost_call_wake(wait_queue_entry_t *wait, unsigned int mode,
				  int sync, void *key)
{
	struct pcinet_vhost_call *c = container_of(wait, struct pcinet_vhost_call,
						   wait);
	u64 cnt;

	if (key_to_poll(key) & EPOLLIN) {
		/* under the eventfd's wait-queue lock, as it requires */
		eventfd_ctx_do_read(c->ctx, &cnt);
		pcinet_chan_kick(c->ch);
	}
	return 0;
}

static void pcinet_vhost_call_queue(struct file *file, wait_queue_head_t *wqh,
				    poll_table *pt)
{
	struct pcinet_vhost_call *c = container_of(pt, struct pcinet_vhost_call,
						   pt);

	add_wait_queue(wqh, &c->wait);
}

/* Wait on eventfd @fd; ERR_PTR() if it is none. */
static struct pcinet_vhost_call *
pcinet_vhost_call_bind(struct pcinet_vhost *vh, int fd)
{
	struct pcinet_vhost_call *c;
	struct file *file;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return ERR_PTR(-ENOMEM);
	file = fget(fd);
	if (!file) {
		kfree(c);
		return ERR_PTR(-EBADF);
	}
	c->ctx = eventfd_ctx_fileget(file);
	if (IS_ERR(c->ctx)) {
		fput(file);
		kfree(c);
		return ERR_PTR(-EINVAL);
	}
	c->ch = vh->ch;
	init_waitqueue_func_entry(&c->wait, pcinet_vhost_call_wake);
	init_poll_funcptr(&c->pt, pcinet_vhost_call_queue);
	vfs_poll(file, &c->pt);
	fput(file);
	return c;
}

/* Stop waiting; when this returns the wake-up no longer runs. */
static void pcinet_vhost_call_unbind(struct pcinet_vhost_call *c)
{
	u64 cnt;

	if (!c)
		return;
	eventfd_ctx_remove_wait_queue(c->ctx, &c->wait, &cnt);
	eventfd_ctx_put(c->ctx);
	kfree(c);
}

static void pcinet_vhost_unbind(struct pcinet_vhost_unbind *u)
{
	unsigned int q;

	for (q = 0; q < PCINET_VIO_MAX_VQ; q++) {
		if (u->kick[q])
			eventfd_ctx_put(u->kick[q]);
		pcinet_vhost_call_unbind(u->call[q]);
	}
}

/* ----- the window ----- */

/* The peer runs and speaks virtio: its regions are ours to touch. */
static bool pcinet_vhost_peer_ok(const struct pcinet_vhost *vh)
{
	return pcinet_chan_peer_alive(vh->ch) &&
	       (pcinet_chan_peer_features(vh->ch) & PCINET_F_VIRTIO);
}

/* The peer's virtio instance, 0 if it has none now. */
static u32 pcinet_vhost_peer_inst(const struct pcinet_vhost *vh)
{
	if (!pcinet_vhost_peer_ok(vh) ||
	    le32_to_cpu(READ_ONCE(vh->rhdr_in->magic)) != PCINET_VIO_DRVS_MAGIC)
		return 0;
	return le32_to_cpu(READ_ONCE(vh->rhdr_in->inst));
}

static u32 pcinet_vhost_peer_flags(const struct pcinet_vhost *vh)
{
	u32 f = 0;

	if (pcinet_chan_peer_alive(vh->ch))
		f |= PCINET_VHOST_F_PEER_ALIVE;
	if (pcinet_chan_peer_features(vh->ch) & PCINET_F_VIRTIO)
		f |= PCINET_VHOST_F_PEER_VIRTIO;
	if (pcinet_chan_link_up(vh->ch))
		f |= PCINET_VHOST_F_LINK_UP;
	return f;
}

/*
 * Write slot @n's description into the window.  @fresh: a new dev_gen,
 * so the slot first goes empty (V1).  Called under @lock, only while the
 * window exists.
 */
static void pcinet_vhost_write_desc(struct pcinet_vhost *vh, unsigned int n,
				    bool fresh)
{
	struct pcinet_vio_devdesc *w = &vh->desc_win[n];
	const struct pcinet_vio_devdesc *d = &vh->slot[n].desc;

	lockdep_assert_held(&vh->lock);
	if (fresh) {
		/* V1: the slot goes empty before its fixed part changes */
		pcinet_store_release(&w->dev_gen, cpu_to_le32(0));
		/* V1: the 0 is visible before any byte of the new one */
		pcinet_mb();
	}
	memcpy((u8 *)w + sizeof(w->dev_gen), (const u8 *)d + sizeof(d->dev_gen),
	       sizeof(*d) - sizeof(d->dev_gen));
	/* V1: pairs with V2 in the peer; the description before dev_gen */
	pcinet_store_release(&w->dev_gen, d->dev_gen);
}

/* Soft state, every tick while the peer can read it. */
static void pcinet_vhost_refresh(struct pcinet_vhost *vh, u32 peer_inst)
{
	struct pcinet_vio_rhdr *r = vh->rhdr_out;
	unsigned int n;

	lockdep_assert_held(&vh->lock);
	WRITE_ONCE(r->inst, cpu_to_le32(vh->inst));
	WRITE_ONCE(r->peer_inst, cpu_to_le32(peer_inst));
	WRITE_ONCE(r->nr_slots, cpu_to_le32(PCINET_VIO_MAX_DEV));
	WRITE_ONCE(r->magic, cpu_to_le32(PCINET_VIO_DEVS_MAGIC));
	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		if (vh->slot[n].owner)
			pcinet_vhost_write_desc(vh, n, false);
		else
			WRITE_ONCE(vh->desc_win[n].dev_gen, 0);
	}
}

/*
 * Withdraw slot @n: dev_gen 0 for the peer, eventfds into @u; the spans
 * stay reserved until the peer's driver lets go (pcinet_vhost_scan()).
 */
static void pcinet_vhost_withdraw(struct pcinet_vhost *vh, unsigned int n,
				  struct pcinet_vhost_unbind *u)
{
	struct pcinet_vhost_slot *s = &vh->slot[n];
	unsigned int q;

	lockdep_assert_held(&vh->lock);
	s->owner = NULL;
	s->withdrawn = jiffies;
	s->desc.dev_gen = 0;
	for (q = 0; q < PCINET_VIO_MAX_VQ; q++) {
		u->kick[q] = s->kick[q];
		u->call[q] = s->call[q];
		s->kick[q] = NULL;
		s->call[q] = NULL;
	}
	if (!vh->gone) {
		/* V1: a plain release; nothing is published with a 0 */
		pcinet_store_release(&vh->desc_win[n].dev_gen, cpu_to_le32(0));
		pcinet_chan_kick(vh->ch);
	}
}

/*
 * Look at the peer: its instance and liveness, every driver state, the
 * notify words of the bound kick eventfds; free the spans of withdrawn
 * slots the peer let go; on a @tick, write our soft state again.  Any
 * context.
 */
static void pcinet_vhost_scan(struct pcinet_vhost *vh, bool tick)
{
	const struct pcinet_vio_drvstate *w;
	struct pcinet_vhost_slot *s;
	bool changed = false, doubt, held;
	unsigned long flags;
	unsigned int n, q;
	u32 v[5], inst, pf, k;

	spin_lock_irqsave(&vh->lock, flags);
	if (vh->gone)
		goto out;
	inst = pcinet_vhost_peer_inst(vh);
	/*
	 * The peer stopped or restarted as its own words read (features
	 * without PCINET_F_VIRTIO, its region header's magic or inst): only
	 * once they read so on every look for PCINET_PEER_GRACE_MS, as the
	 * peer counts ours (docs/design.md, "Instances, reset and
	 * hot-unplug").  What the link says (peer not alive) counts at once.
	 */
	doubt = vh->peer_inst && inst != vh->peer_inst &&
		pcinet_chan_peer_alive(vh->ch);
	held = pcinet_grace_look(&vh->peer_grace, doubt, (u32)jiffies,
				 PCINET_VHOST_GRACE);
	if (doubt && !held)
		inst = vh->peer_inst;
	else if (inst != vh->peer_inst)
		vh->peer_grace = (struct pcinet_grace){ 0 };
	pf = pcinet_vhost_peer_flags(vh);
	if (inst != vh->peer_inst || pf != vh->peer_flags) {
		vh->peer_inst = inst;
		vh->peer_flags = pf;
		changed = true;
	}
	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		s = &vh->slot[n];
		if (!s->busy)
			continue;
		w = &vh->st_win[n];
		v[0] = le32_to_cpu(READ_ONCE(w->drv_gen));
		v[1] = le32_to_cpu(READ_ONCE(w->dev_gen));
		v[2] = le32_to_cpu(READ_ONCE(w->status_seq));
		v[3] = le32_to_cpu(READ_ONCE(w->config_seq));
		v[4] = le32_to_cpu(READ_ONCE(w->error));
		if (!s->owner) {
			/*
			 * Withdrawn: the spans are free once the peer's
			 * driver let go of the instance, or the peer is gone.
			 * A driver state naming another instance may be one
			 * about to name ours (the peer copied the description
			 * and registers it): that is trusted only after
			 * PCINET_VHOST_RELEASE_MS, by which the peer has seen
			 * dev_gen 0 (a tick) or never will look.
			 */
			if (!inst || (v[1] == s->dev_gen && !v[0]) ||
			    (v[1] != s->dev_gen &&
			     time_after(jiffies, s->withdrawn +
					msecs_to_jiffies(PCINET_VHOST_RELEASE_MS)))) {
				s->busy = false;
				changed = true;
			}
			continue;
		}
		if (memcmp(v, s->seen, sizeof(v))) {
			memcpy(s->seen, v, sizeof(v));
			changed = true;
		}
		for (q = 0; q < PCINET_VIO_MAX_VQ; q++) {
			if (!s->kick[q])
				continue;
			k = le32_to_cpu(READ_ONCE(w->vq[q].notify));
			if (k != s->notify[q]) {
				s->notify[q] = k;
				pcinet_compat_eventfd_signal(s->kick[q]);
			}
		}
	}
	if (tick && pcinet_vhost_peer_ok(vh))
		pcinet_vhost_refresh(vh, inst);
	if (changed) {
		vh->events++;
		wake_up_interruptible(&vh->wq);
	}
out:
	spin_unlock_irqrestore(&vh->lock, flags);
}

/* ----- placement ----- */

/* Does [off, off + size) meet a span of a busy slot in the region? */
static bool pcinet_vhost_taken(const struct pcinet_vhost *vh, bool dev, u64 off,
			       u64 size)
{
	const struct pcinet_vio_area *a;
	unsigned int n;

	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		if (!vh->slot[n].busy)
			continue;
		a = dev ? &vh->slot[n].dev_span : &vh->slot[n].drv_span;
		if (off < a->off + a->size && a->off < off + size)
			return true;
	}
	return false;
}

/*
 * First fit of @size bytes in the heap of a region (@dev: ours, else the
 * peer's drv region); with @size 0, the largest free span instead.
 * Returns the offset (or that size); U64_MAX if nothing fits.
 */
static u64 pcinet_vhost_fit(const struct pcinet_vhost *vh, bool dev, u64 size)
{
	const struct pcinet_vio_area *r = dev ? &vh->dev_region : &vh->drv_region;
	const struct pcinet_vio_area *a;
	u64 start, end, c, next, best = size ? U64_MAX : 0;
	unsigned int n, i;

	start = ALIGN(r->off + PCINET_VIO_FIXED_SIZE, PCINET_VIO_ALIGN);
	end = r->off + r->size;
	/* candidates: the heap's start, and the end of every busy span */
	for (i = 0; i <= PCINET_VIO_MAX_DEV; i++) {
		if (i == PCINET_VIO_MAX_DEV) {
			c = start;
		} else {
			if (!vh->slot[i].busy)
				continue;
			a = dev ? &vh->slot[i].dev_span : &vh->slot[i].drv_span;
			c = a->off + a->size;
		}
		if (c < start || c >= end || pcinet_vhost_taken(vh, dev, c, 1))
			continue;
		if (size) {
			if (size <= end - c && !pcinet_vhost_taken(vh, dev, c, size) &&
			    c < best)
				best = c;
			continue;
		}
		next = end;
		for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
			if (!vh->slot[n].busy)
				continue;
			a = dev ? &vh->slot[n].dev_span : &vh->slot[n].drv_span;
			if (a->off > c && a->off < next)
				next = a->off;
		}
		if (next - c > best)
			best = next - c;
	}
	return best;
}

/* The arguments of ADD_DEV, checked; the sizes of both spans. */
static int pcinet_vhost_dev_check(const struct pcinet_vhost *vh,
				  const struct pcinet_vhost_dev *d, u64 *dev_size,
				  u64 *drv_size)
{
	u64 dsz = 0, usz = 0;
	unsigned int q, num;

	if (!d->device_id || !d->nr_vq || d->nr_vq > PCINET_VIO_MAX_VQ ||
	    d->config_len > PCINET_VIO_CONFIG_SIZE)
		return -EINVAL;
	if (!(d->features & BIT_ULL(PCINET_VIRTIO_F_VERSION_1)) ||
	    (d->features & PCINET_VHOST_BAD_FEATURES))
		return -EINVAL;
	if (!d->out_pool_size || !d->in_pool_size ||
	    !IS_ALIGNED(d->out_pool_size, PCINET_VIO_POOL_ALIGN) ||
	    !IS_ALIGNED(d->in_pool_size, PCINET_VIO_POOL_ALIGN) ||
	    d->out_pool_size > vh->dev_region.size ||
	    d->in_pool_size > vh->drv_region.size)
		return -EINVAL;
	for (q = 0; q < PCINET_VIO_MAX_VQ; q++) {
		num = d->vq[q].num_max;
		if (d->vq[q].pad0 || d->vq[q].pad1)
			return -EINVAL;
		if (q >= d->nr_vq) {
			if (num)
				return -EINVAL;
			continue;
		}
		if (!num || num > PCINET_VIO_NUM_MAX || !is_power_of_2(num))
			return -EINVAL;
		/* descriptor tables first, then the avail rings */
		dsz = ALIGN(dsz, PCINET_VRING_DESC_ALIGN) + PCINET_VRING_DESC_BYTES(num);
		usz = ALIGN(usz, PCINET_VRING_USED_ALIGN) + PCINET_VRING_USED_BYTES(num);
	}
	for (q = 0; q < d->nr_vq; q++)
		dsz = ALIGN(dsz, PCINET_VRING_AVAIL_ALIGN) +
		      PCINET_VRING_AVAIL_BYTES(d->vq[q].num_max);
	/* rings (at most 8 * 18 KiB) and a pool no larger than the region */
	*dev_size = ALIGN(ALIGN(dsz, PCINET_VIO_POOL_ALIGN) + d->out_pool_size,
			  PCINET_VIO_ALIGN);
	*drv_size = ALIGN(ALIGN(usz, PCINET_VIO_POOL_ALIGN) + d->in_pool_size,
			  PCINET_VIO_ALIGN);
	return 0;
}

/* Lay device @d out at the two spans, into @d (out fields) and @w. */
static void pcinet_vhost_layout(struct pcinet_vhost_dev *d, u32 dev_gen,
				struct pcinet_vio_devdesc *w)
{
	u64 dsz = 0, usz = 0;
	unsigned int q;

	memset(w, 0, sizeof(*w));
	for (q = 0; q < d->nr_vq; q++) {
		dsz = ALIGN(dsz, PCINET_VRING_DESC_ALIGN);
		d->vq[q].desc_off = d->dev_span_off + dsz;
		dsz += PCINET_VRING_DESC_BYTES(d->vq[q].num_max);
		usz = ALIGN(usz, PCINET_VRING_USED_ALIGN);
		d->vq[q].used_off = d->drv_span_off + usz;
		usz += PCINET_VRING_USED_BYTES(d->vq[q].num_max);
	}
	for (q = 0; q < d->nr_vq; q++) {
		dsz = ALIGN(dsz, PCINET_VRING_AVAIL_ALIGN);
		d->vq[q].avail_off = d->dev_span_off + dsz;
		dsz += PCINET_VRING_AVAIL_BYTES(d->vq[q].num_max);
	}
	d->out_pool_off = d->dev_span_off + ALIGN(dsz, PCINET_VIO_POOL_ALIGN);
	d->in_pool_off = d->drv_span_off + ALIGN(usz, PCINET_VIO_POOL_ALIGN);
	d->dev_gen = dev_gen;

	w->dev_gen = cpu_to_le32(dev_gen);
	w->device_id = cpu_to_le32(d->device_id);
	w->vendor_id = cpu_to_le32(d->vendor_id);
	w->nr_vq = cpu_to_le32(d->nr_vq);
	w->features = cpu_to_le64(d->features);
	w->config_len = cpu_to_le32(d->config_len);
	w->out_pool_off = cpu_to_le64(d->out_pool_off);
	w->out_pool_size = cpu_to_le64(d->out_pool_size);
	w->in_pool_off = cpu_to_le64(d->in_pool_off);
	w->in_pool_size = cpu_to_le64(d->in_pool_size);
	w->dev_span_off = cpu_to_le64(d->dev_span_off);
	w->dev_span_size = cpu_to_le64(d->dev_span_size);
	w->drv_span_off = cpu_to_le64(d->drv_span_off);
	w->drv_span_size = cpu_to_le64(d->drv_span_size);
	for (q = 0; q < d->nr_vq; q++) {
		w->vq[q].num_max = cpu_to_le16(d->vq[q].num_max);
		w->vq[q].desc_off = cpu_to_le64(d->vq[q].desc_off);
		w->vq[q].avail_off = cpu_to_le64(d->vq[q].avail_off);
		w->vq[q].used_off = cpu_to_le64(d->vq[q].used_off);
	}
	memcpy(w->config, d->config, d->config_len);
}

/* ----- the control file ----- */

/* The slot @n of @f, under @lock; NULL if it is not one of its devices. */
static struct pcinet_vhost_slot *pcinet_vhost_own(struct pcinet_vhost_file *f,
						  u32 n)
{
	struct pcinet_vhost *vh = f->vh;

	lockdep_assert_held(&vh->lock);
	if (vh->gone || n >= PCINET_VIO_MAX_DEV)
		return NULL;
	n = array_index_nospec(n, PCINET_VIO_MAX_DEV);
	return vh->slot[n].owner == f ? &vh->slot[n] : NULL;
}

/* ----- memory files ----- */

static vm_fault_t pcinet_vhost_mem_fault(struct vm_fault *vmf)
{
	struct pcinet_vhost_mem *m = vmf->vma->vm_private_data;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;
	vm_fault_t ret = VM_FAULT_SIGBUS;
	unsigned int i;

	down_read(&m->sem);
	for (i = 0; i < ARRAY_SIZE(m->span); i++) {
		if (m->revoked || off < m->span[i].off ||
		    off - m->span[i].off >= m->span[i].size)
			continue;
		ret = vmf_insert_pfn(vmf->vma, vmf->address,
				     PHYS_PFN(m->phys + off));
		break;
	}
	up_read(&m->sem);
	return ret;
}

static const struct vm_operations_struct pcinet_vhost_mem_vm_ops = {
	.fault = pcinet_vhost_mem_fault,
};

static int pcinet_vhost_mem_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct pcinet_vhost_mem *m = file->private_data;
	u64 pages = m->win_size >> PAGE_SHIFT;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_pgoff > pages || vma_pages(vma) > pages - vma->vm_pgoff)
		return -EINVAL;
	pcinet_compat_vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND |
				   VM_DONTDUMP);
	vma->vm_ops = &pcinet_vhost_mem_vm_ops;
	vma->vm_private_data = m;
	return 0;
}

static int pcinet_vhost_mem_release(struct inode *inode, struct file *file)
{
	struct pcinet_vhost_mem *m = file->private_data;
	struct pcinet_vhost *vh = m->vh;

	/* no mapping is left: each held a reference to the file */
	mutex_lock(&vh->mutex);
	list_del(&m->node);
	mutex_unlock(&vh->mutex);
	kref_put(&vh->ref, pcinet_vhost_free);
	kfree(m);
	return 0;
}

static const struct file_operations pcinet_vhost_mem_fops = {
	.owner = THIS_MODULE,
	.mmap = pcinet_vhost_mem_mmap,
	.release = pcinet_vhost_mem_release,
};

/*
 * Revoke every memory file whose device is no longer offered as it was:
 * faults SIGBUS from now on, and the pages mapped so far are zapped.
 */
static void pcinet_vhost_mem_revoke(struct pcinet_vhost *vh)
{
	struct pcinet_vhost_mem *m;
	unsigned long flags;
	bool stale;

	lockdep_assert_held(&vh->mutex);
	list_for_each_entry(m, &vh->mems, node) {
		/* written only under @mutex */
		if (m->revoked)
			continue;
		spin_lock_irqsave(&vh->lock, flags);
		stale = vh->gone || !vh->slot[m->slot].owner ||
			vh->slot[m->slot].dev_gen != m->dev_gen;
		spin_unlock_irqrestore(&vh->lock, flags);
		if (!stale)
			continue;
		down_write(&m->sem);
		m->revoked = true;
		up_write(&m->sem);
		/* a fault either saw @revoked or inserted before this zap */
		unmap_mapping_range(&m->mapping, 0, 0, 1);
	}
}

static long pcinet_vhost_get_mem_fd(struct pcinet_vhost_file *f,
				    void __user *arg)
{
	struct pcinet_vhost *vh = f->vh;
	struct pcinet_vhost_slot *s;
	struct pcinet_vhost_mem *m;
	unsigned long flags;
	struct file *file;
	int fd;
	u32 n;

	if (get_user(n, (u32 __user *)arg))
		return -EFAULT;
	if (!vh->phys)
		return -EOPNOTSUPP;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	spin_lock_irqsave(&vh->lock, flags);
	s = pcinet_vhost_own(f, n);
	if (s) {
		m->slot = s - vh->slot;
		m->dev_gen = s->dev_gen;
		m->span[0] = s->dev_span;
		m->span[1] = s->drv_span;
	}
	spin_unlock_irqrestore(&vh->lock, flags);
	if (!s) {
		kfree(m);
		return -ENOENT;
	}
	m->phys = vh->phys;
	m->win_size = vh->win_size;
	init_rwsem(&m->sem);
	address_space_init_once(&m->mapping);

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		kfree(m);
		return fd;
	}
	file = anon_inode_getfile("[pcinet-vhost-mem]", &pcinet_vhost_mem_fops,
				  m, O_RDWR);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		kfree(m);
		return PTR_ERR(file);
	}
	/* our own address space: revoking zaps this file's mappings only */
	m->mapping.host = file_inode(file);
	file->f_mapping = &m->mapping;
	m->vh = vh;
	kref_get(&vh->ref);
	list_add(&m->node, &vh->mems);
	fd_install(fd, file);
	return fd;
}

static long pcinet_vhost_get_info(struct pcinet_vhost_file *f, void __user *arg)
{
	struct pcinet_vhost *vh = f->vh;
	struct pcinet_vhost_info info;
	unsigned long flags;

	memset(&info, 0, sizeof(info));
	info.abi_version = PCINET_VHOST_ABI_VERSION;
	info.side = vh->side;
	info.win_size = vh->win_size;
	info.dev_off = vh->dev_region.off;
	info.dev_size = vh->dev_region.size;
	info.drv_off = vh->drv_region.off;
	info.drv_size = vh->drv_region.size;
	spin_lock_irqsave(&vh->lock, flags);
	if (vh->gone) {
		spin_unlock_irqrestore(&vh->lock, flags);
		return -ENODEV;
	}
	info.link = pcinet_chan_index(vh->ch);
	info.flags = pcinet_vhost_peer_flags(vh);
	info.peer_inst = vh->peer_inst;
	info.events = vh->events;
	info.dev_free = pcinet_vhost_fit(vh, true, 0);
	info.drv_free = pcinet_vhost_fit(vh, false, 0);
	WRITE_ONCE(f->seen, info.events);
	spin_unlock_irqrestore(&vh->lock, flags);
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long pcinet_vhost_del_slot(struct pcinet_vhost_file *f, u32 n);

/* The ADD_DEV work space, too large for the stack. */
struct pcinet_vhost_add {
	struct pcinet_vhost_dev d;
	struct pcinet_vio_devdesc w;
	struct pcinet_vio_devinfo info;
};

static long pcinet_vhost_add_dev(struct pcinet_vhost_file *f, void __user *arg)
{
	struct pcinet_vhost *vh = f->vh;
	struct pcinet_vhost_slot *s = NULL;
	struct pcinet_vhost_add *a;
	unsigned long flags;
	u64 dsz, usz, doff, uoff;
	const char *why;
	unsigned int n;
	u32 gen;
	long err;

	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	err = -EFAULT;
	if (copy_from_user(&a->d, arg, sizeof(a->d)))
		goto out;
	err = pcinet_vhost_dev_check(vh, &a->d, &dsz, &usz);
	if (err)
		goto out;

	spin_lock_irqsave(&vh->lock, flags);
	err = -ENODEV;
	if (vh->gone)
		goto unlock;
	err = -EBUSY;
	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		if (!vh->slot[n].busy) {
			s = &vh->slot[n];
			break;
		}
	}
	if (!s)
		goto unlock;
	err = -ENOSPC;
	doff = pcinet_vhost_fit(vh, true, dsz);
	uoff = pcinet_vhost_fit(vh, false, usz);
	if (doff == U64_MAX || uoff == U64_MAX)
		goto unlock;
	a->d.slot = n;
	a->d.dev_span_off = doff;
	a->d.dev_span_size = dsz;
	a->d.drv_span_off = uoff;
	a->d.drv_span_size = usz;
	gen = get_random_u32() | 1;
	if (gen == s->dev_gen)
		gen += 2;
	pcinet_vhost_layout(&a->d, gen, &a->w);
	/* what the peer will check, checked first (the spans: by the fit) */
	err = -EINVAL;
	if (pcinet_vio_desc_check(&a->w, &vh->dev_region, &vh->drv_region,
				  NULL, 0, &a->info, &why)) {
		dev_warn_ratelimited(pcinet_chan_dev(vh->ch),
				     "vhost: offer fails the peer's check: %s\n",
				     why);
		goto unlock;
	}
	s->owner = f;
	s->busy = true;
	s->dev_gen = gen;
	s->desc = a->w;
	s->dev_span.off = doff;
	s->dev_span.size = dsz;
	s->drv_span.off = uoff;
	s->drv_span.size = usz;
	memset(s->seen, 0, sizeof(s->seen));
	if (pcinet_vhost_peer_ok(vh)) {
		pcinet_vhost_write_desc(vh, n, true);
		pcinet_chan_kick(vh->ch);
	}
	err = 0;
unlock:
	spin_unlock_irqrestore(&vh->lock, flags);
	if (!err && copy_to_user(arg, &a->d, sizeof(a->d))) {
		/* nobody would know the slot: take the offer back */
		pcinet_vhost_del_slot(f, n);
		err = -EFAULT;
	}
out:
	kfree(a);
	return err;
}

static long pcinet_vhost_del_slot(struct pcinet_vhost_file *f, u32 n)
{
	struct pcinet_vhost *vh = f->vh;
	struct pcinet_vhost_unbind u;
	unsigned long flags;

	spin_lock_irqsave(&vh->lock, flags);
	if (!pcinet_vhost_own(f, n)) {
		spin_unlock_irqrestore(&vh->lock, flags);
		return -ENOENT;
	}
	pcinet_vhost_withdraw(vh, n, &u);
	spin_unlock_irqrestore(&vh->lock, flags);
	pcinet_vhost_unbind(&u);
	pcinet_vhost_mem_revoke(vh);
	return 0;
}

static long pcinet_vhost_del_dev(struct pcinet_vhost_file *f, void __user *arg)
{
	u32 n;

	if (get_user(n, (u32 __user *)arg))
		return -EFAULT;
	return pcinet_vhost_del_slot(f, n);
}

static long pcinet_vhost_get_drv(struct pcinet_vhost_file *f, void __user *arg)
{
	struct pcinet_vhost *vh = f->vh;
	const struct pcinet_vio_drvstate *w;
	struct pcinet_vio_drvstate *ds;
	struct pcinet_vhost_slot *s;
	struct pcinet_vhost_drv *r;
	unsigned long flags;
	u32 seq, cseq, inst;
	unsigned int q;
	bool mine;
	long err;

	r = kzalloc(sizeof(*r) + sizeof(*ds), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	ds = (struct pcinet_vio_drvstate *)(r + 1);
	err = -EFAULT;
	if (get_user(r->slot, (u32 __user *)arg))
		goto out;
	spin_lock_irqsave(&vh->lock, flags);
	s = pcinet_vhost_own(f, r->slot);
	if (!s) {
		spin_unlock_irqrestore(&vh->lock, flags);
		err = -ENOENT;
		goto out;
	}
	w = &vh->st_win[s - vh->slot];
	/* V4': pairs with V3 in the peer; the rest after status_seq */
	seq = le32_to_cpu(pcinet_load_acquire(&w->status_seq));
	/* V6: the config bytes after config_seq */
	cseq = le32_to_cpu(pcinet_load_acquire(&w->config_seq));
	memcpy(ds, w, sizeof(*ds));
	/* the instance as pcinet_vhost_scan() counts it, not one reading */
	inst = vh->peer_inst;
	mine = inst && le32_to_cpu(ds->dev_gen) == s->dev_gen;
	r->valid = mine && ds->drv_gen;
	r->peer_inst = inst;
	r->events = vh->events;
	WRITE_ONCE(f->seen, r->events);
	spin_unlock_irqrestore(&vh->lock, flags);

	if (r->valid) {
		r->drv_gen = le32_to_cpu(ds->drv_gen);
		r->dev_gen = le32_to_cpu(ds->dev_gen);
		r->status = le32_to_cpu(ds->status);
		r->status_seq = seq;
		r->features = le64_to_cpu(ds->features);
		r->config_seq = cseq;
		r->error = le32_to_cpu(ds->error);
		for (q = 0; q < ARRAY_SIZE(r->config_dirty); q++)
			r->config_dirty[q] = le32_to_cpu(ds->config_dirty[q]);
		for (q = 0; q < PCINET_VIO_MAX_VQ; q++) {
			r->vq[q].num = le16_to_cpu(ds->vq[q].num);
			r->vq[q].ready = le16_to_cpu(ds->vq[q].ready);
			r->vq[q].notify = le32_to_cpu(ds->vq[q].notify);
		}
		memcpy(r->config, ds->config, sizeof(r->config));
	} else if (mine) {
		/* No driver: why the board dropped or refused our device */
		r->dev_gen = le32_to_cpu(ds->dev_gen);
		r->error = le32_to_cpu(ds->error);
	}
	err = copy_to_user(arg, r, sizeof(*r)) ? -EFAULT : 0;
out:
	kfree(r);
	return err;
}

static long pcinet_vhost_set_status(struct pcinet_vhost_file *f,
				    void __user *arg)
{
	struct pcinet_vhost *vh = f->vh;
	struct pcinet_vhost_status st;
	struct pcinet_vio_devdesc *w;
	struct pcinet_vhost_slot *s;
	unsigned long flags;

	if (copy_from_user(&st, arg, sizeof(st)))
		return -EFAULT;
	if (st.status > 0xff)
		return -EINVAL;
	spin_lock_irqsave(&vh->lock, flags);
	s = pcinet_vhost_own(f, st.slot);
	if (!s) {
		spin_unlock_irqrestore(&vh->lock, flags);
		return -ENOENT;
	}
	s->desc.status = cpu_to_le32(st.status);
	s->desc.drv_gen = cpu_to_le32(st.drv_gen);
	s->desc.status_seq = cpu_to_le32(st.status_seq);
	if (pcinet_vhost_peer_ok(vh)) {
		w = &vh->desc_win[s - vh->slot];
		WRITE_ONCE(w->status, s->desc.status);
		WRITE_ONCE(w->drv_gen, s->desc.drv_gen);
		/* V4: pairs with V3' in the peer; status and drv_gen first */
		pcinet_store_release(&w->status_seq, s->desc.status_seq);
		pcinet_chan_kick(vh->ch);
	}
	spin_unlock_irqrestore(&vh->lock, flags);
	return 0;
}

static long pcinet_vhost_set_config(struct pcinet_vhost_file *f,
				    void __user *arg)
{
	struct pcinet_vhost *vh = f->vh;
	struct pcinet_vhost_config *c;
	struct pcinet_vio_devdesc *w;
	struct pcinet_vhost_slot *s;
	unsigned long flags;
	long err;

	c = memdup_user(arg, sizeof(*c));
	if (IS_ERR(c))
		return PTR_ERR(c);
	spin_lock_irqsave(&vh->lock, flags);
	s = pcinet_vhost_own(f, c->slot);
	err = -ENOENT;
	if (!s)
		goto unlock;
	err = -EINVAL;
	if (!c->len || c->offset > le32_to_cpu(s->desc.config_len) ||
	    c->len > le32_to_cpu(s->desc.config_len) - c->offset)
		goto unlock;
	memcpy(s->desc.config + c->offset, c->data, c->len);
	le32_add_cpu(&s->desc.config_gen, 1);
	if (pcinet_vhost_peer_ok(vh)) {
		w = &vh->desc_win[s - vh->slot];
		memcpy(w->config + c->offset, c->data, c->len);
		/* V5: the bytes before the generation (the peer's loop) */
		pcinet_store_release(&w->config_gen, s->desc.config_gen);
		pcinet_chan_kick(vh->ch);
	}
	err = 0;
unlock:
	spin_unlock_irqrestore(&vh->lock, flags);
	kfree(c);
	return err;
}

static long pcinet_vhost_set_fd(struct pcinet_vhost_file *f, void __user *arg,
				bool kick)
{
	struct pcinet_vhost *vh = f->vh;
	struct pcinet_vhost_call *call = NULL, *old_call = NULL;
	struct eventfd_ctx *ctx = NULL, *old_ctx = NULL;
	struct pcinet_vhost_vring_fd r;
	struct pcinet_vhost_slot *s;
	unsigned long flags;
	unsigned int q;
	long err;

	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (r.pad || r.fd < -1 || r.vq >= PCINET_VIO_MAX_VQ)
		return -EINVAL;
	q = array_index_nospec(r.vq, PCINET_VIO_MAX_VQ);
	if (r.fd >= 0 && kick) {
		ctx = eventfd_ctx_fdget(r.fd);
		if (IS_ERR(ctx))
			return PTR_ERR(ctx);
	} else if (r.fd >= 0) {
		call = pcinet_vhost_call_bind(vh, r.fd);
		if (IS_ERR(call))
			return PTR_ERR(call);
	}

	spin_lock_irqsave(&vh->lock, flags);
	s = pcinet_vhost_own(f, r.slot);
	err = -ENOENT;
	if (!s)
		goto unlock;
	err = -EINVAL;
	if (q >= le32_to_cpu(s->desc.nr_vq))
		goto unlock;
	if (kick) {
		old_ctx = s->kick[q];
		s->kick[q] = ctx;
		ctx = NULL;
		s->notify[q] = le32_to_cpu(READ_ONCE(vh->st_win[s - vh->slot].vq[q].notify));
		/* a kick before the binding is not lost */
		if (s->kick[q])
			pcinet_compat_eventfd_signal(s->kick[q]);
	} else {
		old_call = s->call[q];
		s->call[q] = call;
		/* nor a call */
		if (call)
			pcinet_chan_kick(vh->ch);
		call = NULL;
	}
	err = 0;
unlock:
	spin_unlock_irqrestore(&vh->lock, flags);
	if (ctx)
		eventfd_ctx_put(ctx);
	if (old_ctx)
		eventfd_ctx_put(old_ctx);
	pcinet_vhost_call_unbind(call);
	pcinet_vhost_call_unbind(old_call);
	return err;
}

static long pcinet_vhost_ioctl(struct file *file, unsigned int cmd,
			       unsigned long arg)
{
	struct pcinet_vhost_file *f = file->private_data;
	struct pcinet_vhost *vh = f->vh;
	void __user *p = (void __user *)arg;
	long err;

	mutex_lock(&vh->mutex);
	/* gone changes only under @mutex: the link stays while we run */
	if (vh->gone) {
		mutex_unlock(&vh->mutex);
		return -ENODEV;
	}
	switch (cmd) {
	case PCINET_VHOST_GET_INFO:
		err = pcinet_vhost_get_info(f, p);
		break;
	case PCINET_VHOST_ADD_DEV:
		err = pcinet_vhost_add_dev(f, p);
		break;
	case PCINET_VHOST_DEL_DEV:
		err = pcinet_vhost_del_dev(f, p);
		break;
	case PCINET_VHOST_GET_DRV:
		err = pcinet_vhost_get_drv(f, p);
		break;
	case PCINET_VHOST_SET_STATUS:
		err = pcinet_vhost_set_status(f, p);
		break;
	case PCINET_VHOST_SET_CONFIG:
		err = pcinet_vhost_set_config(f, p);
		break;
	case PCINET_VHOST_SET_KICK:
		err = pcinet_vhost_set_fd(f, p, true);
		break;
	case PCINET_VHOST_SET_CALL:
		err = pcinet_vhost_set_fd(f, p, false);
		break;
	case PCINET_VHOST_GET_MEM_FD:
		err = pcinet_vhost_get_mem_fd(f, p);
		break;
	default:
		err = -ENOTTY;
		break;
	}
	mutex_unlock(&vh->mutex);
	return err;
}

static __poll_t pcinet_vhost_poll(struct file *file, poll_table *wait)
{
	struct pcinet_vhost_file *f = file->private_data;
	struct pcinet_vhost *vh = f->vh;

	poll_wait(file, &vh->wq, wait);
	if (READ_ONCE(vh->gone))
		return EPOLLHUP | EPOLLERR;
	return READ_ONCE(vh->events) != READ_ONCE(f->seen) ?
	       EPOLLIN | EPOLLRDNORM : 0;
}

static int pcinet_vhost_open(struct inode *inode, struct file *file)
{
	/* misc_open() holds misc_mtx: the link cannot deregister meanwhile */
	struct pcinet_vhost *vh = container_of(file->private_data,
					       struct pcinet_vhost, misc);
	struct pcinet_vhost_file *f;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	f->vh = vh;
	f->seen = READ_ONCE(vh->events) - 1;	/* the first poll reports */
	kref_get(&vh->ref);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

/* Withdraw every device of @f (NULL: of anyone), one slot at a time. */
static void pcinet_vhost_withdraw_all(struct pcinet_vhost *vh,
				      struct pcinet_vhost_file *f)
{
	struct pcinet_vhost_unbind u;
	unsigned long flags;
	unsigned int n;
	bool found;

	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		spin_lock_irqsave(&vh->lock, flags);
		found = vh->slot[n].owner &&
			(!f || vh->slot[n].owner == f);
		if (found)
			pcinet_vhost_withdraw(vh, n, &u);
		spin_unlock_irqrestore(&vh->lock, flags);
		if (found)
			pcinet_vhost_unbind(&u);
	}
}

static int pcinet_vhost_release(struct inode *inode, struct file *file)
{
	struct pcinet_vhost_file *f = file->private_data;
	struct pcinet_vhost *vh = f->vh;

	mutex_lock(&vh->mutex);
	pcinet_vhost_withdraw_all(vh, f);
	pcinet_vhost_mem_revoke(vh);
	mutex_unlock(&vh->mutex);
	kref_put(&vh->ref, pcinet_vhost_free);
	kfree(f);
	return 0;
}

static const struct file_operations pcinet_vhost_fops = {
	.owner = THIS_MODULE,
	.open = pcinet_vhost_open,
	.release = pcinet_vhost_release,
	.unlocked_ioctl = pcinet_vhost_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.poll = pcinet_vhost_poll,
};

/* ----- the channel ----- */

/* Vector 3 (or 0 with fewer vectors): kicks, driver states; hard irq. */
static void pcinet_vhost_kick(void *priv)
{
	pcinet_vhost_scan(priv, false);
}

/* Every link tick, up or not: lost doorbells and soft state. */
static void pcinet_vhost_tick(void *priv)
{
	pcinet_vhost_scan(priv, true);
}

/* A reset of the link's rings is no business of the virtio channel. */
static void pcinet_vhost_nop(void *priv)
{
}

static const struct pcinet_chan_ops pcinet_vhost_chan_ops = {
	.kick = pcinet_vhost_kick,
	.stop = pcinet_vhost_nop,
	.start = pcinet_vhost_nop,
	.peer_changed = pcinet_vhost_nop,
	.tick = pcinet_vhost_tick,
	.peer_gone = pcinet_vhost_kick,
	.while_down = true,
};

static void *pcinet_vhost_create(struct pcinet_channel *ch)
{
	const struct pcinet_vio_regions *own, *peer;
	struct pcinet_chan_vio v;
	struct pcinet_vhost *vh;
	int err;

	if (pcinet_chan_vio(ch, &v))
		return NULL;
	own = &v.vio[v.side];
	peer = &v.vio[!v.side];
	/* we offer devices only if both regions of that direction exist */
	if (own->dev_size <= PCINET_VIO_FIXED_SIZE ||
	    peer->drv_size <= PCINET_VIO_FIXED_SIZE)
		return NULL;

	vh = kzalloc(sizeof(*vh), GFP_KERNEL);
	if (!vh)
		return ERR_PTR(-ENOMEM);
	vh->ch = ch;
	kref_init(&vh->ref);
	mutex_init(&vh->mutex);
	spin_lock_init(&vh->lock);
	init_waitqueue_head(&vh->wq);
	INIT_LIST_HEAD(&vh->mems);
	vh->win = v.win;
	vh->phys = v.phys;
	vh->win_size = v.win_size;
	vh->side = v.side;
	vh->dev_region.off = own->dev_off;
	vh->dev_region.size = own->dev_size;
	vh->drv_region.off = peer->drv_off;
	vh->drv_region.size = peer->drv_size;
	vh->rhdr_out = (struct pcinet_vio_rhdr *)(v.win + peer->drv_off);
	vh->rhdr_in = (const struct pcinet_vio_rhdr *)(v.win + own->dev_off);
	vh->desc_win = (struct pcinet_vio_devdesc *)(v.win + peer->drv_off +
						     PCINET_CACHELINE);
	vh->st_win = (const struct pcinet_vio_drvstate *)(v.win + own->dev_off +
							  PCINET_CACHELINE);
	vh->inst = get_random_u32() | 1;
	/* what we write in the peer's drv region starts clean: no stale data */
	memset(v.win + peer->drv_off, 0, PCINET_VIO_FIXED_SIZE);

	snprintf(vh->name, sizeof(vh->name), "pcinet-vhost%d",
		 pcinet_chan_index(ch));
	vh->misc.minor = MISC_DYNAMIC_MINOR;
	vh->misc.name = vh->name;
	vh->misc.fops = &pcinet_vhost_fops;
	vh->misc.parent = pcinet_chan_dev(ch);
	vh->misc.mode = 0600;
	err = misc_register(&vh->misc);
	if (err) {
		kfree(vh);
		return ERR_PTR(err);
	}
	pcinet_chan_attach(ch, &pcinet_vhost_chan_ops, vh);
	dev_info(pcinet_chan_dev(ch),
		 "virtio channel: device side /dev/%s, dev region 0x%llx+0x%llx\n",
		 vh->name, (unsigned long long)own->dev_off,
		 (unsigned long long)own->dev_size);
	return vh;
}

static void pcinet_vhost_destroy(void *fe)
{
	struct pcinet_vhost *vh = fe;
	unsigned long flags;

	pcinet_chan_detach(vh->ch);
	misc_deregister(&vh->misc);
	/*
	 * The open control files stay, but lose their devices; under
	 * @mutex, so no eventfd is being bound meanwhile (a wake-up must
	 * never ring a link that is gone).
	 */
	mutex_lock(&vh->mutex);
	pcinet_vhost_withdraw_all(vh, NULL);
	spin_lock_irqsave(&vh->lock, flags);
	/* the peer sees us stopped: instance 0 */
	WRITE_ONCE(vh->rhdr_out->inst, 0);
	vh->gone = true;
	vh->events++;
	wake_up_interruptible(&vh->wq);
	spin_unlock_irqrestore(&vh->lock, flags);
	/* no memory file maps the window any more */
	pcinet_vhost_mem_revoke(vh);
	mutex_unlock(&vh->mutex);
	kref_put(&vh->ref, pcinet_vhost_free);
}

const struct pcinet_frontend pcinet_vhost_frontend = {
	.name = "vhost",
	.chan = PCINET_CHAN_VIRTIO,
	.create = pcinet_vhost_create,
	.destroy = pcinet_vhost_destroy,
};
