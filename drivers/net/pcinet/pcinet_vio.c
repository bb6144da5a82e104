// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet virtio channel, driver side B: a virtio transport over the
 * window, so that the stock drivers (virtio_blk, virtiofs) bind to the
 * devices the peer offers.  docs/design.md, "Virtio channel", is the
 * protocol; pcinet_layout.h the wire structures; pcinet_vio_ring.[ch] the
 * relay this file drives.
 *
 *   stock driver -- private split ring (our RAM) -- relay --+-- device ring,
 *   (virtio_blk)    vring_new_virtqueue()    pcinet_vio_*() |   pools (window)
 *                                                           +-- D's back end
 *
 * Per link one struct pcinet_vio, per device slot (PCINET_VIO_MAX_DEV)
 * one struct pcinet_vio_slot, per registered device one struct
 * pcinet_vio_dev, which embeds the struct virtio_device (a child of the
 * PCI device) and is freed by its release.
 *
 * The slot state machine (docs/design.md, "Instances, reset and
 * hot-unplug") runs in one work item per link, @scan_work, under @lock:
 *
 *   EMPTY --(dev_gen != 0, description copied out (V2) and checked, peer
 *            alive with PCINET_F_VIRTIO, D's inst known)--> register: LIVE
 *   LIVE  --(dev_gen changed, D's inst changed or its region header or
 *            PCINET_F_VIRTIO gone for PCINET_PEER_GRACE_MS, peer gone,
 *            impossible used ring, no answer in PCINET_VIO_ACK_MS)-->
 *            dead: the relay
 *            aborts everything in flight and every later request, so the
 *            driver's remove cannot hang; then unregister, drvstate
 *            {drv_gen 0, error} --> EMPTY
 *
 * Marking a device dead never sleeps and never needs @lock: the link's
 * callbacks (peer_gone, tick: under the link's lock) and the data path do
 * it, and @scan_work unregisters later.  The data path (the queues'
 * notify, and @io_work per device: completions, aborts, submissions
 * after completions) runs under the device's spinlock, never under @lock,
 * so a probe or a remove running in @scan_work (both wait for I/O) always
 * sees its I/O completed or aborted.
 *
 * Every byte read from the window is the peer's: descriptions are copied
 * out and checked once per dev_gen (pcinet_vio_desc_check()), live words
 * are read once and bounded, used rings are checked by the relay.  The
 * words we own in D's dev region (region header, driver states) are kept
 * in private copies and written again on every tick (soft state).
 *
 * Ordering pairs V1-V6: docs/design.md, "Negotiation"; R1-R6: the relay.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/highmem.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/virtio.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_ring.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "pcinet_chan.h"
#include "pcinet_compat.h"
#include "pcinet_grace.h"
#include "pcinet_vio_ring.h"

/* Bits 24..41 describe the ring and the transport, not the device. */
#define PCINET_VIO_TRANSPORT_BITS	GENMASK_ULL(41, 24)
#define PCINET_VIO_BIT(b)		BIT_ULL(b)

/* Requests in flight and no completion for this long: D is wedged. */
#define PCINET_VIO_IO_MS		10000

/* How long the instance that went is not registered from (scan_work). */
#define PCINET_VIO_GONE_MS		2000
/* PCINET_PEER_GRACE_MS in jiffies, for pcinet_grace_look() */
#define PCINET_VIO_GRACE		msecs_to_jiffies(PCINET_PEER_GRACE_MS)

/* How often a status wait looks again without a doorbell. */
#define PCINET_VIO_POLL			(HZ / 10)

/*
 * A slot whose offer was refused, or whose device lived less than
 * PCINET_VIO_CALM_MS, registers nothing for a while: 100 ms, doubling up
 * to 8 s.  A device side that flips dev_gen at doorbell rate costs the
 * board a plug every 8 s, not a plug, a probe and uevents per doorbell.
 */
#define PCINET_VIO_BACKOFF_MIN_MS	100
#define PCINET_VIO_BACKOFF_MAX_MS	8000
#define PCINET_VIO_CALM_MS		8000

/*
 * Config snapshots (pcinet_vio_config_snap()): tries for a consistent
 * copy, and how long a new one waits after the last that moved (config
 * changes reach the driver at most that often, coalesced).
 */
#define PCINET_VIO_CFG_TRIES		4
#define PCINET_VIO_CFG_MS		500

/*
 * The device kinds a device side may offer, and their device feature
 * bits we pass on to the driver (the ring and transport bits are the
 * transport's own).  A host picks the board's drivers: virtio-mem or
 * virtio-pmem take physical ranges from their config, virtio-balloon
 * takes memory, virtio-input types on the console.  Module parameter
 * virtio_ids replaces the list of IDs taken; an ID not in this table
 * gets its device bits as offered.
 */
struct pcinet_vio_kind {
	u32 id;
	u64 features;
};

static const struct pcinet_vio_kind pcinet_vio_kinds[] = {
	{ VIRTIO_ID_BLOCK,
	  PCINET_VIO_BIT(VIRTIO_BLK_F_SIZE_MAX) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_SEG_MAX) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_GEOMETRY) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_RO) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_BLK_SIZE) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_FLUSH) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_TOPOLOGY) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_CONFIG_WCE) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_MQ) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_DISCARD) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_WRITE_ZEROES) |
	  PCINET_VIO_BIT(VIRTIO_BLK_F_SECURE_ERASE) },
	{ VIRTIO_ID_FS, 0 },
};

#define PCINET_VIO_MAX_IDS		16
static unsigned int pcinet_vio_ids[PCINET_VIO_MAX_IDS] = {
	VIRTIO_ID_BLOCK, VIRTIO_ID_FS,
};

static int pcinet_vio_nr_ids = 2;
module_param_array_named(virtio_ids, pcinet_vio_ids, uint,
			 &pcinet_vio_nr_ids, 0444);
MODULE_PARM_DESC(virtio_ids,
		 "Virtio device IDs a peer may offer (default 2,26: block, fs; the list replaces the default)");

static struct workqueue_struct *pcinet_vio_wq;

struct pcinet_vio;
struct pcinet_vio_dev;

/**
 * struct pcinet_vio_q - one virtqueue of a device
 * @dev: the device
 * @index: queue number (the device ring's)
 * @vq: the stock virtqueue on the private ring
 * @pages: the private ring's memory (alloc_pages_exact())
 * @bytes: its size
 * @req: the relay's request table, @r.num entries
 * @r: the relay's state for the queue
 * @tick_used: the device used index the last tick saw; under the
 *	device's @lock
 * @stalled: ticks in a row with requests in flight and no completion
 */
struct pcinet_vio_q {
	struct pcinet_vio_dev *dev;
	unsigned int index;
	struct virtqueue *vq;
	void *pages;
	size_t bytes;
	struct pcinet_vio_req *req;
	struct pcinet_vio_vq r;
	u16 tick_used;
	unsigned int stalled;
};

/**
 * struct pcinet_vio_slot - one device slot of the link
 * @dev: the device registered in it, NULL when EMPTY; written under the
 *	link's @lock and @slots_lock, read under either
 * @st: our driver state for the slot, the private copy of what we write
 *	into D's dev region; under @dev's @lock while @dev is set, else
 *	under the link's @lock
 * @refused_gen: a dev_gen we dropped or refused with an error: not
 *	registered again (D offers a new one)
 * @backoff_ms: the wait after the next refusal or short-lived device
 *	(PCINET_VIO_BACKOFF_MIN_MS..PCINET_VIO_BACKOFF_MAX_MS); 0: none
 * @not_before: get_jiffies_64(); nothing registered in the slot before
 *
 * Everything but @dev and @st under the link's @lock.
 */
struct pcinet_vio_slot {
	struct pcinet_vio_dev *dev;
	struct pcinet_vio_drvstate st;
	u32 refused_gen;
	unsigned int backoff_ms;
	u64 not_before;
};

/**
 * struct pcinet_vio - the virtio channel of one link, driver side
 * @ch: the channel
 * @win: our mapping of the window
 * @dev_region: D's dev region (desc, avail, OUT pools; we write its
 *	fixed part)
 * @drv_region: our drv region (used rings, IN pools; D writes its fixed
 *	part)
 * @rhdr_out: region header we write, at the start of @dev_region
 * @rhdr_in: region header D writes, at the start of @drv_region
 * @inst: our virtio instance, random, nonzero
 * @peer_inst: D's instance as last acted upon; 0: none
 * @peer_grace: how long D's words have read otherwise than @peer_inst
 *	(pcinet_vio_scan()); under @lock
 * @went: the link said the peer went (peer_gone); @scan_work takes it
 * @gone_inst: the instance that went, not registered from again until
 *	@gone_until or another instance shows up; 0: none.  Under @lock
 * @gone_until: jiffies
 * @lock: the slot state machine
 * @stopping: no more plugging; under @lock
 * @slots_lock: guards the slots' @dev pointers for the lockless readers
 *	(doorbells, ticks)
 * @slot: the device slots
 * @scan_work: runs the state machine
 * @copy: scratch for a description copied out, under @lock
 */
struct pcinet_vio {
	struct pcinet_channel *ch;
	u8 *win;
	struct pcinet_vio_area dev_region;
	struct pcinet_vio_area drv_region;
	struct pcinet_vio_rhdr *rhdr_out;
	const struct pcinet_vio_rhdr *rhdr_in;
	u32 inst;
	u32 peer_inst;
	struct pcinet_grace peer_grace;
	atomic_t went;
	u32 gone_inst;
	unsigned long gone_until;
	struct mutex lock; /* the slot state machine */
	bool stopping;
	spinlock_t slots_lock; /* slot[].dev for doorbells and ticks */
	struct pcinet_vio_slot slot[PCINET_VIO_MAX_DEV];
	struct work_struct scan_work;
	struct pcinet_vio_devdesc copy;
};

/**
 * struct pcinet_vio_dev - a device registered on the virtio bus
 * @vdev: the virtio device; its release frees this structure
 * @vio: the link's channel
 * @slot: its slot
 * @n: the slot's number
 * @info: the checked description
 * @desc: the description in the window (live words read from it)
 * @st_win: our driver state in the window (D's dev region)
 * @lock: the relay, the queues, @st and the window words we write
 * @dead: the device is gone; set once, under @lock
 * @err: why (PCINET_VIO_ERR_*), reported in the driver state
 * @status: the status the driver wrote last
 * @answer: D's answer to it, as set_status() last waited for it
 * @ring_ok: D answered DRIVER_OK: it zeroed the used rings, which we may
 *	read from now on (before, they may hold a former device's words)
 * @status_seq: our status_seq as last published
 * @config_gen: D's config_gen as of @cfg
 * @cfg: the config bytes the driver reads (pcinet_vio_config_snap()),
 *	under @lock
 * @cfg_gen: what generation() returns: ours, bumped with every @cfg that
 *	moved, never read from the window
 * @cfg_at: get_jiffies_64() of the last @cfg that moved (or of the plug)
 * @plugged: get_jiffies_64() of the plug
 * @relay: the relay's device state
 * @q: the queues
 * @nr_q: queues set up (find_vqs() to del_vqs()); under @lock
 * @out_ext: extent table of the OUT pool
 * @in_ext: extent table of the IN pool
 * @pending_intr: queues whose private used ring moved in notify
 * @ticked: bit 0: a link tick queued @io_work since it last ran
 * @io_work: completions, aborts, and submissions that waited for room
 * @ack_wq: status waits
 * @replaced_grace: pcinet_vio_replaced()'s count of looks at D's instance
 *	that read otherwise than the link's @peer_inst; under @lock
 */
struct pcinet_vio_dev {
	struct virtio_device vdev;
	struct pcinet_vio *vio;
	struct pcinet_vio_slot *slot;
	unsigned int n;
	struct pcinet_vio_devinfo info;
	const struct pcinet_vio_devdesc *desc;
	struct pcinet_vio_drvstate *st_win;
	spinlock_t lock; /* relay, queues, driver state */
	bool dead;
	u32 err;
	u8 status;
	u8 answer;
	bool ring_ok;
	u32 status_seq;
	u32 config_gen;
	u8 cfg[PCINET_VIO_CONFIG_SIZE];
	u32 cfg_gen;
	u64 cfg_at;
	u64 plugged;
	struct pcinet_vio_relay relay;
	struct pcinet_vio_q q[PCINET_VIO_MAX_VQ];
	unsigned int nr_q;
	struct pcinet_vio_ext *out_ext;
	struct pcinet_vio_ext *in_ext;
	unsigned long pending_intr;
	unsigned long ticked;
	struct work_struct io_work;
	wait_queue_head_t ack_wq;
	struct pcinet_grace replaced_grace;
};

static struct pcinet_vio_dev *to_pcinet_vio_dev(struct virtio_device *vdev)
{
	return container_of(vdev, struct pcinet_vio_dev, vdev);
}

static struct device *pcinet_vio_log_dev(const struct pcinet_vio *vio)
{
	return pcinet_chan_dev(vio->ch);
}

/* ----- the driver's buffers: physical addresses, page by page ----- */

enum pcinet_vio_drv_op { PCINET_VIO_FROM, PCINET_VIO_TO, PCINET_VIO_SET };

/*
 * Copy @len bytes from or to the driver's buffer at physical @addr, or
 * fill it with @c, one page at a time (the buffer need not be mapped).
 */
static void pcinet_vio_drv_access(enum pcinet_vio_drv_op op, u64 addr,
				  void *buf, int c, u32 len)
{
	u32 n;
	u8 *p;

	while (len) {
		n = min_t(u32, len, PAGE_SIZE - offset_in_page(addr));
		p = kmap_local_page(pfn_to_page(PHYS_PFN(addr)));
		if (op == PCINET_VIO_FROM)
			memcpy(buf, p + offset_in_page(addr), n);
		else if (op == PCINET_VIO_TO)
			memcpy(p + offset_in_page(addr), buf, n);
		else
			memset(p + offset_in_page(addr), c, n);
		kunmap_local(p);
		if (buf)
			buf += n;
		addr += n;
		len -= n;
	}
}

static void pcinet_vio_from_drv(void *ctx, void *dst, u64 addr, u32 len)
{
	pcinet_vio_drv_access(PCINET_VIO_FROM, addr, dst, 0, len);
}

static void pcinet_vio_to_drv(void *ctx, u64 addr, const void *src, u32 len)
{
	pcinet_vio_drv_access(PCINET_VIO_TO, addr, (void *)src, 0, len);
}

static void pcinet_vio_set_drv(void *ctx, u64 addr, int c, u32 len)
{
	pcinet_vio_drv_access(PCINET_VIO_SET, addr, NULL, c, len);
}

static const struct pcinet_vio_mem_ops pcinet_vio_mem_ops = {
	.from_drv = pcinet_vio_from_drv,
	.to_drv = pcinet_vio_to_drv,
	.set_drv = pcinet_vio_set_drv,
};

/* ----- driver state: private copy, written through ----- */

/*
 * Write a slot's driver state into the window: everything, then
 * config_seq, then status_seq with a store-release (V3 and V6: the
 * sequence numbers are stored after what they announce).  Caller holds
 * what guards @st.
 */
static void pcinet_vio_st_write(struct pcinet_vio_drvstate *w,
				const struct pcinet_vio_drvstate *st)
{
	WRITE_ONCE(w->drv_gen, st->drv_gen);
	WRITE_ONCE(w->dev_gen, st->dev_gen);
	WRITE_ONCE(w->status, st->status);
	WRITE_ONCE(w->features, st->features);
	WRITE_ONCE(w->error, st->error);
	memcpy(w->config_dirty, st->config_dirty, sizeof(w->config_dirty));
	memcpy(w->vq, st->vq, sizeof(w->vq));
	memcpy(w->config, st->config, sizeof(w->config));
	/* V6: pairs with D's snapshot; config and dirty bits first */
	virt_store_release(&w->config_seq, st->config_seq);
	/* V3: pairs with V4' in D; status, features, queues first */
	virt_store_release(&w->status_seq, st->status_seq);
}

static struct pcinet_vio_drvstate *pcinet_vio_st_win(struct pcinet_vio *vio,
						     unsigned int n)
{
	return (struct pcinet_vio_drvstate *)
		(vio->win + vio->dev_region.off + PCINET_CACHELINE +
		 n * sizeof(struct pcinet_vio_drvstate));
}

static const struct pcinet_vio_devdesc *
pcinet_vio_desc_win(struct pcinet_vio *vio, unsigned int n)
{
	return (const struct pcinet_vio_devdesc *)
		(vio->win + vio->drv_region.off + PCINET_CACHELINE +
		 n * sizeof(struct pcinet_vio_devdesc));
}

/* The ring features we publish to D: the driver's device bits, ours. */
static u64 pcinet_vio_ring_features(const struct pcinet_vio_dev *dev)
{
	u64 f = (dev->vdev.features & ~PCINET_VIO_TRANSPORT_BITS) |
		PCINET_VIO_BIT(PCINET_VIRTIO_F_VERSION_1);

	f |= dev->info.features &
	     (PCINET_VIO_BIT(PCINET_VIRTIO_F_INDIRECT_DESC) |
	      PCINET_VIO_BIT(PCINET_VIRTIO_F_EVENT_IDX));
	return f;
}

/* Has D answered our last status write?  Sets @status if so. */
static bool pcinet_vio_answered(struct pcinet_vio_dev *dev, u8 *status)
{
	const struct pcinet_vio_devdesc *d = dev->desc;
	u32 seq;

	/* V3': pairs with V4 in D; status and drv_gen after status_seq */
	seq = le32_to_cpu(virt_load_acquire(&d->status_seq));
	if (seq != dev->status_seq ||
	    le32_to_cpu(READ_ONCE(d->drv_gen)) !=
	    le32_to_cpu(dev->slot->st.drv_gen) ||
	    le32_to_cpu(READ_ONCE(d->dev_gen)) != dev->info.dev_gen)
		return false;
	/* only bits we wrote: D may refuse some, never add any */
	*status = le32_to_cpu(READ_ONCE(d->status)) & dev->status;
	return true;
}

static u32 pcinet_vio_peer_inst(struct pcinet_vio *vio);

/*
 * Has D withdrawn or replaced the device, or restarted, since it was
 * registered?  @scan_work finds that too, but not while a probe or a
 * remove waits for a status answer under the link's @lock: without this
 * look, a driver probing a former dev_gen (the new instance of D offers a
 * new one meanwhile, which ignores our driver state) waited the whole
 * PCINET_VIO_ACK_MS for an answer that never comes.  D's instance read
 * otherwise counts as @scan_work counts it: once it held for
 * PCINET_PEER_GRACE_MS.  Process context.
 */
static bool pcinet_vio_replaced(struct pcinet_vio_dev *dev)
{
	struct pcinet_vio *vio = dev->vio;
	unsigned long flags;
	bool other, held;

	if (le32_to_cpu(READ_ONCE(dev->desc->dev_gen)) != dev->info.dev_gen ||
	    !pcinet_chan_peer_alive(vio->ch))
		return true;
	other = pcinet_vio_peer_inst(vio) != READ_ONCE(vio->peer_inst);
	spin_lock_irqsave(&dev->lock, flags);
	held = pcinet_grace_look(&dev->replaced_grace, other, (u32)jiffies,
				 PCINET_VIO_GRACE);
	spin_unlock_irqrestore(&dev->lock, flags);
	return held;
}

/* ----- death: from any context ----- */

static void pcinet_vio_kill_locked(struct pcinet_vio_dev *dev, u32 err)
{
	lockdep_assert_held(&dev->lock);
	if (dev->dead)
		return;
	dev->dead = true;
	dev->relay.dead = true;
	dev->err = err;
}

/*
 * The device is gone: the relay aborts from now on (@io_work), status
 * waits return, and @scan_work unregisters it.  Any context.
 */
static void pcinet_vio_kill(struct pcinet_vio_dev *dev, u32 err)
{
	struct pcinet_vio *vio = dev->vio;
	unsigned long flags;

	spin_lock_irqsave(&dev->lock, flags);
	pcinet_vio_kill_locked(dev, err);
	spin_unlock_irqrestore(&dev->lock, flags);
	queue_work(pcinet_vio_wq, &dev->io_work);
	wake_up(&dev->ack_wq);
	queue_work(pcinet_vio_wq, &vio->scan_work);
}

/* ----- the data path ----- */

/* Bump a queue's kick counter; caller holds @dev->lock. */
static void pcinet_vio_bump_notify(struct pcinet_vio_dev *dev,
				   unsigned int index)
{
	struct pcinet_vio_vqstate *v = &dev->slot->st.vq[index];

	v->notify = cpu_to_le32(le32_to_cpu(v->notify) + 1);
	/* R1 ordered the ring before; the counter is what D compares */
	WRITE_ONCE(dev->st_win->vq[index].notify, v->notify);
}

/*
 * The driver published buffers (virtqueue_notify()).  Relay them at once,
 * under the device's lock; completions the relay made itself (aborted
 * chains) are delivered by @io_work, since the driver may hold the lock
 * its callback takes.
 */
static bool pcinet_vio_notify(struct virtqueue *vq)
{
	struct pcinet_vio_q *q = vq->priv;
	struct pcinet_vio_dev *dev = q->dev;
	unsigned long flags;
	bool kick = false;
	int r;

	spin_lock_irqsave(&dev->lock, flags);
	if (dev->dead || q->index >= dev->nr_q) {
		/* the abort (or nothing) happens in the work */
		spin_unlock_irqrestore(&dev->lock, flags);
		queue_work(pcinet_vio_wq, &dev->io_work);
		return true;
	}
	r = pcinet_vio_submit(&q->r);
	if (r >= 0 && (r & PCINET_VIO_KICK)) {
		pcinet_vio_bump_notify(dev, q->index);
		kick = true;
	}
	if (r >= 0 && (r & PCINET_VIO_INTR))
		__set_bit(q->index, &dev->pending_intr);
	spin_unlock_irqrestore(&dev->lock, flags);
	if (kick)
		pcinet_chan_kick(dev->vio->ch);
	if (r < 0)	/* our own driver's ring is impossible */
		pcinet_vio_kill(dev, PCINET_VIO_ERR_RING);
	else if (r & (PCINET_VIO_INTR | PCINET_VIO_MORE))
		queue_work(pcinet_vio_wq, &dev->io_work);
	return true;
}

/*
 * One pass of the data path of a device: completions (or, once dead,
 * aborts) of every queue, then submissions of every queue (the pools are
 * shared, so room freed by one queue may be what another waits for),
 * then the driver's callbacks, outside the lock.
 */
static void pcinet_vio_io_work(struct work_struct *work)
{
	struct pcinet_vio_dev *dev = container_of(work, struct pcinet_vio_dev,
						  io_work);
	unsigned long flags, intr = 0;
	bool kick = false, broke = false, more = false, tick;
	unsigned int i;
	u8 status;
	int r;

	spin_lock_irqsave(&dev->lock, flags);
	if (!dev->ring_ok && !dev->dead &&
	    (dev->status & VIRTIO_CONFIG_S_DRIVER_OK) &&
	    pcinet_vio_answered(dev, &status) &&
	    (status & VIRTIO_CONFIG_S_DRIVER_OK))
		dev->ring_ok = true;
	for (i = 0; i < dev->nr_q; i++) {
		if (!dev->dead && dev->ring_ok) {
			r = pcinet_vio_complete(&dev->q[i].r);
			if (r < 0) {
				dev_warn_ratelimited(pcinet_vio_log_dev(dev->vio),
						     "virtio slot %u queue %u: %s: unplugging\n",
						     dev->n, i,
						     dev->q[i].r.why ?: "protocol error");
				pcinet_vio_kill_locked(dev, PCINET_VIO_ERR_RING);
				broke = true;
			} else {
				if (r & PCINET_VIO_INTR)
					__set_bit(i, &intr);
				if (r & PCINET_VIO_MORE)
					more = true;
			}
		}
		if (dev->dead && pcinet_vio_abort(&dev->q[i].r) != 0)
			__set_bit(i, &intr);
	}
	tick = test_and_clear_bit(0, &dev->ticked);
	for (i = 0; i < dev->nr_q && !dev->dead; i++) {
		r = pcinet_vio_submit(&dev->q[i].r);
		if (r < 0) {
			pcinet_vio_kill_locked(dev, PCINET_VIO_ERR_RING);
			broke = true;
			break;
		}
		/*
		 * Kick suppression follows avail_event (or the used ring's
		 * flags), words in our drv region that D's back end writes
		 * and a third party can scribble: a value far ahead stops
		 * every kick, and a back end that is never kicked never
		 * writes it again.  So a queue with requests in flight and no
		 * completion since the last tick is kicked anyway (a spurious
		 * kick costs the back end a look at its avail ring).
		 */
		if (tick && dev->q[i].r.inflight &&
		    dev->q[i].r.last_used == dev->q[i].tick_used) {
			r |= PCINET_VIO_KICK;
			/*
			 * Kicked in vain for PCINET_VIO_IO_MS: D's back end
			 * is wedged (a scribbled avail index can make a
			 * vhost-user back end stop serving the ring for
			 * good) and the stock drivers have no timeout, so
			 * sync or rmmod would wait for ever.  The device is
			 * gone; D offers it again.
			 */
			if (++dev->q[i].stalled >
			    PCINET_VIO_IO_MS / PCINET_TICK_MS) {
				dev_warn_ratelimited(pcinet_vio_log_dev(dev->vio),
						     "virtio slot %u queue %u: no completion in %u ms: unplugging\n",
						     dev->n, i, PCINET_VIO_IO_MS);
				pcinet_vio_kill_locked(dev,
						       PCINET_VIO_ERR_TIMEOUT);
				broke = true;
				break;
			}
		} else if (tick) {
			dev->q[i].stalled = 0;
		}
		if (tick)
			dev->q[i].tick_used = dev->q[i].r.last_used;
		if (r & PCINET_VIO_KICK) {
			pcinet_vio_bump_notify(dev, i);
			kick = true;
		}
		if (r & PCINET_VIO_INTR)
			__set_bit(i, &intr);
		if (r & PCINET_VIO_MORE)
			more = true;
	}
	intr |= dev->pending_intr;
	dev->pending_intr = 0;
	intr &= BIT(dev->nr_q) - 1;
	spin_unlock_irqrestore(&dev->lock, flags);

	if (kick)
		pcinet_chan_kick(dev->vio->ch);
	/* del_vqs() waits for this work before it frees a queue */
	for_each_set_bit(i, &intr, PCINET_VIO_MAX_VQ)
		vring_interrupt(0, dev->q[i].vq);
	/*
	 * Once more: a pass copies at most PCINET_VIO_PASS_BYTES per queue
	 * each way with interrupts off (@more), and after a break the queues
	 * before the broken one are aborted too.
	 */
	if (more || broke)
		queue_work(pcinet_vio_wq, &dev->io_work);
	if (broke) {
		wake_up(&dev->ack_wq);
		queue_work(pcinet_vio_wq, &dev->vio->scan_work);
	}
}

/* ----- virtio_config_ops ----- */

/*
 * A byte the driver wrote reads back as written (a register): D replays
 * writes to its back end later (config_seq, V6), while a driver may read
 * a field right after writing it (virtio_blk's cache_type_store() reads
 * wce back at once).  Every other byte is D's live configuration.
 */
/*
 * The config bytes a stock driver uses without a check, made safe: the
 * device side is another machine.  virtio_blk's cache_type_show() BUG()s
 * on a wce above 1 (an index into its table of cache modes).
 */
static void pcinet_vio_get_sane(const struct pcinet_vio_dev *dev,
				unsigned int offset, u8 *b, unsigned int len)
{
	const unsigned int wce = offsetof(struct virtio_blk_config, wce);

	if (dev->info.device_id == VIRTIO_ID_BLOCK && offset <= wce &&
	    wce - offset < len)
		b[wce - offset] = !!b[wce - offset];
}

static void pcinet_vio_get(struct virtio_device *vdev, unsigned int offset,
			   void *buf, unsigned int len)
{
	struct pcinet_vio_dev *dev = to_pcinet_vio_dev(vdev);
	const struct pcinet_vio_drvstate *st = &dev->slot->st;
	unsigned int i, at;
	unsigned long flags;
	u8 *b = buf;

	spin_lock_irqsave(&dev->lock, flags);
	for (i = 0; i < len; i++) {
		at = offset + i;
		if (at >= dev->info.config_len || at < offset)
			b[i] = 0;
		else if (le32_to_cpu(st->config_dirty[at / 32]) & BIT(at % 32))
			b[i] = st->config[at];
		else
			b[i] = dev->cfg[at];
	}
	pcinet_vio_get_sane(dev, offset, b, len);
	spin_unlock_irqrestore(&dev->lock, flags);
}

static void pcinet_vio_set(struct virtio_device *vdev, unsigned int offset,
			   const void *buf, unsigned int len)
{
	struct pcinet_vio_dev *dev = to_pcinet_vio_dev(vdev);
	struct pcinet_vio_drvstate *st = &dev->slot->st;
	const u8 *b = buf;
	unsigned long flags;
	unsigned int i, at;

	if (offset >= PCINET_VIO_CONFIG_SIZE ||
	    len > PCINET_VIO_CONFIG_SIZE - offset)
		return;
	spin_lock_irqsave(&dev->lock, flags);
	for (i = 0; i < len; i++) {
		at = offset + i;
		st->config[at] = b[i];
		st->config_dirty[at / 32] =
			cpu_to_le32(le32_to_cpu(st->config_dirty[at / 32]) |
				    BIT(at % 32));
	}
	st->config_seq = cpu_to_le32(le32_to_cpu(st->config_seq) + 1);
	if (!dev->dead)
		pcinet_vio_st_write(dev->st_win, st);
	spin_unlock_irqrestore(&dev->lock, flags);
	pcinet_chan_kick(dev->vio->ch);
}

/*
 * Copy D's configuration into @cfg, the bytes the driver reads: the
 * virtio core's generation loop (__virtio_cread_many()) has no bound, so
 * generation() never reads the window and @cfg_gen moves only here.
 * config_gen, the bytes, config_gen again, at most PCINET_VIO_CFG_TRIES
 * times: a device side that keeps changing it gets the last copy (any
 * bytes are valid input; the drivers check their config).  Also finds a
 * byte that moved with config_gen unchanged (a third party's scribble,
 * or D's repair of one: a driver that read a scribbled capacity reads it
 * again).  Return: whether a byte or config_gen moved.  Under the link's
 * @lock, or before the device is registered.
 */
static bool pcinet_vio_config_snap(struct pcinet_vio_dev *dev)
{
	const struct pcinet_vio_devdesc *d = dev->desc;
	/* config_len <= PCINET_VIO_CONFIG_SIZE: checked with the description */
	unsigned int i, len = dev->info.config_len;
	u8 cfg[PCINET_VIO_CONFIG_SIZE];
	unsigned long flags;
	u32 gen = 0;
	bool moved;

	for (i = 0; i < PCINET_VIO_CFG_TRIES; i++) {
		/* V5: pairs with D's store-release of config_gen after config */
		gen = le32_to_cpu(virt_load_acquire(&d->config_gen));
		memcpy(cfg, d->config, len);
		/* the bytes before config_gen is read again: a move shows */
		virt_rmb();
		if (le32_to_cpu(READ_ONCE(d->config_gen)) == gen)
			break;
	}
	spin_lock_irqsave(&dev->lock, flags);
	moved = gen != dev->config_gen || memcmp(cfg, dev->cfg, len);
	if (moved) {
		memcpy(dev->cfg, cfg, len);
		dev->config_gen = gen;
		WRITE_ONCE(dev->cfg_gen, dev->cfg_gen + 1);
	}
	spin_unlock_irqrestore(&dev->lock, flags);
	return moved;
}

static u32 pcinet_vio_generation(struct virtio_device *vdev)
{
	/* pairs with nothing: @cfg and @cfg_gen change under @lock, get() takes it */
	return READ_ONCE(to_pcinet_vio_dev(vdev)->cfg_gen);
}

/*
 * Wait until D answered our last status write, at most PCINET_VIO_ACK_MS;
 * then the device is declared gone.  A dead device answers at once, with
 * our status less FEATURES_OK and DRIVER_OK (virtio_features_ok() then
 * sees a refusal).
 */
static u8 pcinet_vio_wait_status(struct pcinet_vio_dev *dev)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(PCINET_VIO_ACK_MS);
	u8 status = 0;

	might_sleep();
	for (;;) {
		if (READ_ONCE(dev->dead))
			return dev->status & ~(VIRTIO_CONFIG_S_FEATURES_OK |
					       VIRTIO_CONFIG_S_DRIVER_OK);
		if (pcinet_vio_answered(dev, &status))
			return status;
		if (pcinet_vio_replaced(dev)) {
			pcinet_vio_kill(dev, PCINET_VIO_ERR_NONE);
			continue;
		}
		if (time_after(jiffies, deadline)) {
			dev_warn_ratelimited(pcinet_vio_log_dev(dev->vio),
					     "virtio slot %u: no answer to status 0x%x in %u ms: unplugging\n",
					     dev->n, dev->status, PCINET_VIO_ACK_MS);
			pcinet_vio_kill(dev, PCINET_VIO_ERR_TIMEOUT);
			continue;
		}
		wait_event_timeout(dev->ack_wq, READ_ONCE(dev->dead) ||
				   pcinet_vio_answered(dev, &status),
				   PCINET_VIO_POLL);
	}
}

/*
 * Never waits and never kills: sysfs's status file calls it for any user
 * (a wait here let anyone unplug a disk whose back end restarts).  D's
 * answer to our last write if there is one now, else the one
 * set_status() waited for.
 */
static u8 pcinet_vio_get_status(struct virtio_device *vdev)
{
	struct pcinet_vio_dev *dev = to_pcinet_vio_dev(vdev);
	u8 status;

	if (READ_ONCE(dev->dead))
		return READ_ONCE(dev->status) & ~(VIRTIO_CONFIG_S_FEATURES_OK |
						  VIRTIO_CONFIG_S_DRIVER_OK);
	if (pcinet_vio_answered(dev, &status))
		return status;
	return READ_ONCE(dev->answer);
}

/*
 * Post the status, then wait for D's answer (pcinet_vio_wait_status():
 * the device dies if none comes), except to DRIVER_OK.  Process context,
 * as every caller in the virtio core (probe, remove, reset, restore).
 */
static void pcinet_vio_set_status(struct virtio_device *vdev, u8 status)
{
	struct pcinet_vio_dev *dev = to_pcinet_vio_dev(vdev);
	struct pcinet_vio_drvstate *st = &dev->slot->st;
	unsigned long flags;

	spin_lock_irqsave(&dev->lock, flags);
	dev->status = status;
	if (!(status & VIRTIO_CONFIG_S_DRIVER_OK))
		dev->ring_ok = false;
	dev->status_seq++;
	st->status = cpu_to_le32(status);
	st->features = cpu_to_le64(pcinet_vio_ring_features(dev));
	st->status_seq = cpu_to_le32(dev->status_seq);
	if (!dev->dead)
		pcinet_vio_st_write(dev->st_win, st);
	spin_unlock_irqrestore(&dev->lock, flags);
	pcinet_chan_kick(dev->vio->ch);
	/*
	 * FAILED: the driver gave up on the device (its probe failed, on a
	 * config a scribble may have left).  Registered without a driver it
	 * would hold the slot for good: unplugged instead, and the slot's
	 * backoff (it lived less than PCINET_VIO_CALM_MS) plugs it again.
	 */
	if (status & VIRTIO_CONFIG_S_FAILED) {
		dev_warn_ratelimited(pcinet_vio_log_dev(dev->vio),
				     "virtio slot %u: its driver failed it: unplugging\n",
				     dev->n);
		pcinet_vio_kill(dev, PCINET_VIO_ERR_NOMEM);
	}
	/*
	 * DRIVER_OK is posted, as on PCI: the probe ends (virtiofs adds its
	 * tag: a mount may follow at once) while D starts its rings.  The
	 * relay reads the used rings only once D answered it (@ring_ok), and
	 * a D that never does is found by the I/O timeout.
	 */
	if (!(status & VIRTIO_CONFIG_S_DRIVER_OK))
		WRITE_ONCE(dev->answer, pcinet_vio_wait_status(dev));
}

static void pcinet_vio_reset(struct virtio_device *vdev)
{
	/* D answers 0 once its back end stopped touching rings and pools */
	pcinet_vio_set_status(vdev, 0);
}

static u64 pcinet_vio_get_features(struct virtio_device *vdev)
{
	struct pcinet_vio_dev *dev = to_pcinet_vio_dev(vdev);
	u64 f = dev->info.features;

	/* the private ring's features: ours, not the device ring's */
	return (f & ~PCINET_VIO_TRANSPORT_BITS) |
	       PCINET_VIO_BIT(PCINET_VIRTIO_F_VERSION_1) |
	       (f & PCINET_VIO_BIT(PCINET_VIRTIO_F_INDIRECT_DESC));
}

static int pcinet_vio_finalize_features(struct virtio_device *vdev)
{
	vring_transport_features(vdev);
	if (!__virtio_test_bit(vdev, VIRTIO_F_VERSION_1))
		return -EINVAL;
	return 0;
}

static const char *pcinet_vio_bus_name(struct virtio_device *vdev)
{
	return "pcinet";
}

static void pcinet_vio_synchronize_cbs(struct virtio_device *vdev)
{
	flush_work(&to_pcinet_vio_dev(vdev)->io_work);
}

/* Free a queue's private memory; the queue is no longer set up. */
static void pcinet_vio_free_q(struct pcinet_vio_q *q)
{
	if (q->vq)
		vring_del_virtqueue(q->vq);
	q->vq = NULL;
	if (q->pages)
		free_pages_exact(q->pages, q->bytes);
	q->pages = NULL;
	kfree(q->req);
	q->req = NULL;
}

static void pcinet_vio_del_vqs(struct virtio_device *vdev)
{
	struct pcinet_vio_dev *dev = to_pcinet_vio_dev(vdev);
	struct pcinet_vio_drvstate *st = &dev->slot->st;
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&dev->lock, flags);
	dev->nr_q = 0;
	dev->ring_ok = false;
	dev->pending_intr = 0;
	for (i = 0; i < PCINET_VIO_MAX_VQ; i++) {
		st->vq[i].num = 0;
		st->vq[i].ready = 0;
	}
	if (!dev->dead)
		pcinet_vio_st_write(dev->st_win, st);
	spin_unlock_irqrestore(&dev->lock, flags);
	/* no callback runs on a queue once this returns */
	cancel_work_sync(&dev->io_work);
	for (i = 0; i < PCINET_VIO_MAX_VQ; i++)
		pcinet_vio_free_q(&dev->q[i]);
	kfree(dev->out_ext);
	dev->out_ext = NULL;
	kfree(dev->in_ext);
	dev->in_ext = NULL;
}

/*
 * find_vqs(), either kernel's (pcinet_compat.h): a private ring per named
 * queue, of the device's num_max, relayed into the device ring.
 */
static int pcinet_vio_find_vqs(struct virtio_device *vdev, unsigned int nvqs,
			       struct virtqueue *vqs[],
			       const struct pcinet_compat_vq *req)
{
	struct pcinet_vio_dev *dev = to_pcinet_vio_dev(vdev);
	const struct pcinet_vio_devinfo *info = &dev->info;
	struct pcinet_vio_drvstate *st = &dev->slot->st;
	unsigned int i, nq = 0, total = 0;
	struct pcinet_vio_q *q;
	unsigned long flags;
	struct vring vr;
	u8 *win = dev->vio->win;
	int err;

	for (i = 0; i < nvqs; i++)
		if (req[i].name)
			nq++;
	if (nq > info->nr_vq)
		return -ENOENT;
	if (READ_ONCE(dev->dead))
		return -ENODEV;

	for (i = 0, nq = 0; i < nvqs; i++) {
		u16 num;

		vqs[i] = NULL;
		if (!req[i].name)
			continue;
		q = &dev->q[nq];
		num = info->vq[nq].num_max;
		q->dev = dev;
		q->index = nq;
		q->bytes = vring_size(num, SMP_CACHE_BYTES);
		q->pages = alloc_pages_exact(q->bytes, GFP_KERNEL | __GFP_ZERO);
		q->req = kcalloc(num, sizeof(*q->req), GFP_KERNEL);
		err = -ENOMEM;
		if (!q->pages || !q->req)
			goto abort_with_queues;
		q->vq = vring_new_virtqueue(nq, num, SMP_CACHE_BYTES, vdev, true,
					    req[i].ctx, q->pages,
					    pcinet_vio_notify, req[i].callback,
					    req[i].name);
		if (!q->vq)
			goto abort_with_queues;
		q->vq->priv = q;
		vqs[i] = q->vq;
		total += num;
		nq++;
	}
	dev->out_ext = kcalloc(total, sizeof(*dev->out_ext), GFP_KERNEL);
	dev->in_ext = kcalloc(total, sizeof(*dev->in_ext), GFP_KERNEL);
	err = -ENOMEM;
	if (!dev->out_ext || !dev->in_ext)
		goto abort_with_queues;

	spin_lock_irqsave(&dev->lock, flags);
	err = -ENODEV;
	if (dev->dead) {
		/* the window may belong to another device by now */
		spin_unlock_irqrestore(&dev->lock, flags);
		goto abort_with_queues;
	}
	memset(&dev->relay, 0, sizeof(dev->relay));
	dev->relay.win = win;
	dev->relay.ops = &pcinet_vio_mem_ops;
	dev->relay.ctx = dev;
	dev->relay.device_id = info->device_id;
	dev->relay.indirect = info->features &
			      PCINET_VIO_BIT(PCINET_VIRTIO_F_INDIRECT_DESC);
	dev->relay.event_idx = info->features &
			       PCINET_VIO_BIT(PCINET_VIRTIO_F_EVENT_IDX);
	pcinet_vio_pool_init(&dev->relay.out, win + info->out_pool.off,
			     info->out_pool.off, info->out_pool.size,
			     dev->out_ext, total);
	pcinet_vio_pool_init(&dev->relay.in, win + info->in_pool.off,
			     info->in_pool.off, info->in_pool.size,
			     dev->in_ext, total);
	for (i = 0; i < nq; i++) {
		const struct pcinet_vio_vqinfo *vi = &info->vq[i];
		u16 num = vi->num_max;

		q = &dev->q[i];
		vring_init(&vr, num, q->pages, SMP_CACHE_BYTES);
		/* zeroes the device desc table and avail ring: ours to write */
		pcinet_vio_vq_init(&q->r, &dev->relay, num, vr.desc, vr.avail,
				   vr.used, win + vi->desc_off,
				   win + vi->avail_off, win + vi->used_off,
				   q->req);
		st->vq[i].num = cpu_to_le16(num);
		st->vq[i].ready = cpu_to_le16(1);
	}
	dev->nr_q = nq;
	/* published with the next status write (V3: DRIVER_OK) */
	pcinet_vio_st_write(dev->st_win, st);
	spin_unlock_irqrestore(&dev->lock, flags);
	return 0;

abort_with_queues:
	for (i = 0; i < PCINET_VIO_MAX_VQ; i++)
		pcinet_vio_free_q(&dev->q[i]);
	kfree(dev->out_ext);
	dev->out_ext = NULL;
	kfree(dev->in_ext);
	dev->in_ext = NULL;
	for (i = 0; i < nvqs; i++)
		vqs[i] = NULL;
	return err;
}

DEFINE_PCINET_COMPAT_FIND_VQS(pcinet_vio_find_vqs)

static const struct virtio_config_ops pcinet_vio_config_ops = {
	.get = pcinet_vio_get,
	.set = pcinet_vio_set,
	.generation = pcinet_vio_generation,
	.get_status = pcinet_vio_get_status,
	.set_status = pcinet_vio_set_status,
	.reset = pcinet_vio_reset,
	.find_vqs = pcinet_vio_find_vqs_compat,
	.del_vqs = pcinet_vio_del_vqs,
	.synchronize_cbs = pcinet_vio_synchronize_cbs,
	.get_features = pcinet_vio_get_features,
	.finalize_features = pcinet_vio_finalize_features,
	.bus_name = pcinet_vio_bus_name,
};

static_assert(__same_type(pcinet_vio_config_ops.find_vqs,
			  PCINET_COMPAT_FIND_VQS_TYPE));

/* ----- the slot state machine ----- */

static void pcinet_vio_release(struct device *d)
{
	kfree(to_pcinet_vio_dev(dev_to_virtio(d)));
}

/*
 * The slot registers nothing for a while: after a refusal, or a device
 * that lived less than PCINET_VIO_CALM_MS (@calm false); a device that
 * lived longer is replaced at once (a back end's restart).
 */
static void pcinet_vio_back_off(struct pcinet_vio_slot *slot, bool calm)
{
	if (calm)
		slot->backoff_ms = 0;
	else if (!slot->backoff_ms)
		slot->backoff_ms = PCINET_VIO_BACKOFF_MIN_MS;
	slot->not_before = get_jiffies_64() +
			   msecs_to_jiffies(calm ? 0 : slot->backoff_ms);
	if (!calm)
		slot->backoff_ms = min(2 * slot->backoff_ms,
				       PCINET_VIO_BACKOFF_MAX_MS);
}

/* The slot's driver state says: nothing registered, and why. */
static void pcinet_vio_slot_empty(struct pcinet_vio *vio, unsigned int n,
				  u32 dev_gen, u32 err)
{
	struct pcinet_vio_slot *slot = &vio->slot[n];

	lockdep_assert_held(&vio->lock);
	memset(&slot->st, 0, sizeof(slot->st));
	slot->st.dev_gen = cpu_to_le32(dev_gen);
	slot->st.error = cpu_to_le32(err);
	pcinet_vio_st_write(pcinet_vio_st_win(vio, n), &slot->st);
}

/*
 * Unplug a dead device: the driver's remove drains (everything in flight
 * is aborted by @io_work, its reset returns at once), then the slot is
 * free for a new dev_gen.
 */
static void pcinet_vio_unplug(struct pcinet_vio *vio, unsigned int n)
{
	struct pcinet_vio_slot *slot = &vio->slot[n];
	struct pcinet_vio_dev *dev = slot->dev;
	unsigned long flags;
	u32 gen, err;

	lockdep_assert_held(&vio->lock);
	get_device(&dev->vdev.dev);
	unregister_virtio_device(&dev->vdev);
	spin_lock_irqsave(&vio->slots_lock, flags);
	slot->dev = NULL;
	spin_unlock_irqrestore(&vio->slots_lock, flags);
	cancel_work_sync(&dev->io_work);
	gen = dev->info.dev_gen;
	err = dev->err;
	dev_info(pcinet_vio_log_dev(vio), "virtio slot %u: device %u unplugged\n",
		 n, dev->info.device_id);
	pcinet_vio_back_off(slot, time_after64(get_jiffies_64(), dev->plugged +
					       msecs_to_jiffies(PCINET_VIO_CALM_MS)));
	put_device(&dev->vdev.dev);
	if (err)
		slot->refused_gen = gen;
	if (!vio->stopping)
		pcinet_vio_slot_empty(vio, n, gen, err);
}

/* The descriptions of the other registered devices, for the span check. */
static unsigned int pcinet_vio_live_infos(struct pcinet_vio *vio,
					  struct pcinet_vio_devinfo *live)
{
	unsigned int n, nr = 0;

	for (n = 0; n < PCINET_VIO_MAX_DEV; n++)
		if (vio->slot[n].dev)
			live[nr++] = vio->slot[n].dev->info;
	return nr;
}

/*
 * Is the device one this board takes (module parameter virtio_ids), with
 * pools the relay may copy with interrupts off?  Trims the device feature
 * bits to the kind's.  Return: NULL, or why not.
 */
static const char *pcinet_vio_unsupported(struct pcinet_vio_devinfo *info)
{
	unsigned int i, nr = min_t(unsigned int, pcinet_vio_nr_ids,
				   PCINET_VIO_MAX_IDS);

	for (i = 0; i < nr; i++)
		if (pcinet_vio_ids[i] == info->device_id)
			break;
	if (i == nr)
		return "device ID not in virtio_ids";
	if (info->out_pool.size > PCINET_VIO_POOL_MAX ||
	    info->in_pool.size > PCINET_VIO_POOL_MAX)
		return "pool above PCINET_VIO_POOL_MAX";
	for (i = 0; i < ARRAY_SIZE(pcinet_vio_kinds); i++)
		if (pcinet_vio_kinds[i].id == info->device_id)
			info->features &= pcinet_vio_kinds[i].features |
					  PCINET_VIO_TRANSPORT_BITS;
	return NULL;
}

/* Refuse D's offer @gen in slot @n: @err in the driver state, back off. */
static void pcinet_vio_refuse(struct pcinet_vio *vio, unsigned int n,
			      u32 gen, u32 err)
{
	struct pcinet_vio_slot *slot = &vio->slot[n];

	slot->refused_gen = gen;
	pcinet_vio_back_off(slot, false);
	pcinet_vio_slot_empty(vio, n, gen, err);
}

/* An EMPTY slot: register what D offers there, if it passes. */
static void pcinet_vio_plug(struct pcinet_vio *vio, unsigned int n)
{
	struct pcinet_vio_slot *slot = &vio->slot[n];
	struct pcinet_vio_devinfo *live;
	struct pcinet_vio_dev *dev;
	unsigned long flags;
	unsigned int nr;
	const char *why;
	u32 gen;
	int err;

	lockdep_assert_held(&vio->lock);
	if (pcinet_vio_desc_read(pcinet_vio_desc_win(vio, n), &vio->copy))
		return;		/* rewritten meanwhile: next tick */
	gen = le32_to_cpu(vio->copy.dev_gen);
	if (!gen) {
		slot->refused_gen = 0;
		return;
	}
	if (gen == slot->refused_gen)
		return;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	live = kcalloc(PCINET_VIO_MAX_DEV, sizeof(*live), GFP_KERNEL);
	if (!dev || !live) {
		kfree(live);
		kfree(dev);
		return;		/* tried again next tick */
	}
	nr = pcinet_vio_live_infos(vio, live);
	err = pcinet_vio_desc_check(&vio->copy, &vio->dev_region,
				    &vio->drv_region, live, nr, &dev->info,
				    &why);
	kfree(live);
	if (err) {
		dev_warn_ratelimited(pcinet_vio_log_dev(vio),
				     "virtio slot %u: description refused (%s)\n",
				     n, why);
		kfree(dev);
		pcinet_vio_refuse(vio, n, gen, PCINET_VIO_ERR_DESC);
		return;
	}
	why = pcinet_vio_unsupported(&dev->info);
	if (why) {
		dev_warn_ratelimited(pcinet_vio_log_dev(vio),
				     "virtio slot %u: device %u refused (%s)\n",
				     n, dev->info.device_id, why);
		kfree(dev);
		pcinet_vio_refuse(vio, n, gen, PCINET_VIO_ERR_UNSUPP);
		return;
	}

	dev->vio = vio;
	dev->slot = slot;
	dev->n = n;
	dev->desc = pcinet_vio_desc_win(vio, n);
	dev->st_win = pcinet_vio_st_win(vio, n);
	spin_lock_init(&dev->lock);
	INIT_WORK(&dev->io_work, pcinet_vio_io_work);
	init_waitqueue_head(&dev->ack_wq);
	dev->vdev.dev.parent = pcinet_chan_dev(vio->ch);
	dev->vdev.dev.release = pcinet_vio_release;
	dev->vdev.config = &pcinet_vio_config_ops;
	dev->vdev.id.device = dev->info.device_id;
	dev->vdev.id.vendor = dev->info.vendor_id;

	memset(&slot->st, 0, sizeof(slot->st));
	slot->st.drv_gen = cpu_to_le32(get_random_u32() | 1);
	slot->st.dev_gen = cpu_to_le32(gen);
	/* the probe reads this snapshot; @scan_work takes the next */
	pcinet_vio_config_snap(dev);
	dev->plugged = get_jiffies_64();
	dev->cfg_at = dev->plugged;
	pcinet_vio_st_write(dev->st_win, &slot->st);
	spin_lock_irqsave(&vio->slots_lock, flags);
	slot->dev = dev;
	spin_unlock_irqrestore(&vio->slots_lock, flags);

	dev_info(pcinet_vio_log_dev(vio),
		 "virtio slot %u: device %u, %u queue(s), features 0x%llx\n",
		 n, dev->info.device_id, dev->info.nr_vq,
		 (unsigned long long)dev->info.features);
	/* probes the stock driver, which runs the status protocol */
	err = register_virtio_device(&dev->vdev);
	if (err) {
		dev_warn(pcinet_vio_log_dev(vio),
			 "virtio slot %u: registering failed: %d\n", n, err);
		spin_lock_irqsave(&vio->slots_lock, flags);
		slot->dev = NULL;
		spin_unlock_irqrestore(&vio->slots_lock, flags);
		cancel_work_sync(&dev->io_work);
		put_device(&dev->vdev.dev);
		pcinet_vio_refuse(vio, n, gen, PCINET_VIO_ERR_NOMEM);
	}
}

/* D's instance, if D is there to talk to; else 0. */
static u32 pcinet_vio_peer_inst(struct pcinet_vio *vio)
{
	struct pcinet_channel *ch = vio->ch;

	if (!pcinet_chan_peer_alive(ch) ||
	    !(pcinet_chan_peer_features(ch) & PCINET_F_VIRTIO) ||
	    le32_to_cpu(READ_ONCE(vio->rhdr_in->magic)) != PCINET_VIO_DEVS_MAGIC)
		return 0;
	return le32_to_cpu(READ_ONCE(vio->rhdr_in->inst));
}

/* Our region header in D's dev region: who we are (soft state). */
static void pcinet_vio_write_rhdr(struct pcinet_vio *vio)
{
	struct pcinet_vio_rhdr *r = vio->rhdr_out;

	lockdep_assert_held(&vio->lock);
	WRITE_ONCE(r->inst, cpu_to_le32(vio->inst));
	WRITE_ONCE(r->peer_inst, cpu_to_le32(vio->peer_inst));
	WRITE_ONCE(r->nr_slots, cpu_to_le32(PCINET_VIO_MAX_DEV));
	WRITE_ONCE(r->magic, cpu_to_le32(PCINET_VIO_DRVS_MAGIC));
}

/* Our driver states in D's dev region, written again (soft state). */
static void pcinet_vio_refresh(struct pcinet_vio *vio)
{
	struct pcinet_vio_dev *dev;
	unsigned long flags;
	unsigned int n;

	lockdep_assert_held(&vio->lock);
	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		dev = vio->slot[n].dev;
		if (!dev) {
			pcinet_vio_st_write(pcinet_vio_st_win(vio, n),
					    &vio->slot[n].st);
			continue;
		}
		spin_lock_irqsave(&dev->lock, flags);
		if (!dev->dead)
			pcinet_vio_st_write(dev->st_win, &vio->slot[n].st);
		spin_unlock_irqrestore(&dev->lock, flags);
	}
}

static void pcinet_vio_scan(struct work_struct *work)
{
	struct pcinet_vio *vio = container_of(work, struct pcinet_vio,
					      scan_work);
	struct pcinet_vio_dev *dev;
	bool doubt, held;
	unsigned int n;
	u32 inst, gen;

	mutex_lock(&vio->lock);
	if (vio->stopping)
		goto out;
	inst = pcinet_vio_peer_inst(vio);
	/*
	 * A peer killed without a word leaves its control block, region
	 * header and offers in the window: until its heartbeat is found
	 * silent (peer_timeout_ms) the link takes it for alive, and we
	 * registered its dead offer again right after the unplug, probed it
	 * and waited for answers.  A frozen peer looks alive again for a
	 * while after the link's own reset (the handshake restarts the
	 * heartbeat's clock).  So the instance that went is not registered
	 * from for PCINET_VIO_GONE_MS after the last time it went; another
	 * instance ends that at once.  (A peer that runs on, only frozen for
	 * a while or with a scribbled control block, is back after that.)
	 */
	if (atomic_xchg(&vio->went, 0) && vio->peer_inst) {
		vio->gone_inst = vio->peer_inst;
		vio->gone_until = jiffies + msecs_to_jiffies(PCINET_VIO_GONE_MS);
	}
	if (vio->gone_inst && ((inst && inst != vio->gone_inst) ||
			       time_after(jiffies, vio->gone_until)))
		vio->gone_inst = 0;
	if (vio->gone_inst)
		inst = 0;
	/*
	 * D gone or replaced as read in D's own words (its features without
	 * PCINET_F_VIRTIO, its region header's magic or inst) only once they
	 * read so on every look for PCINET_PEER_GRACE_MS: a word a third
	 * party overwrote lasts until D's next refresh (a tick), and must not
	 * unplug every device.  A restart of D is acted upon that much later.
	 * What the link says (peer gone, not alive) counts at once: it had
	 * its grace.  Meanwhile nothing is plugged.
	 */
	doubt = vio->peer_inst && inst != vio->peer_inst && !vio->gone_inst &&
		pcinet_chan_peer_alive(vio->ch);
	held = pcinet_grace_look(&vio->peer_grace, doubt, (u32)jiffies,
				 PCINET_VIO_GRACE);
	if (doubt && !held)
		inst = vio->peer_inst;
	else
		doubt = false;
	if (inst != vio->peer_inst) {
		/* D restarted or went: every device it offered is gone */
		for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
			if (vio->slot[n].dev)
				pcinet_vio_kill(vio->slot[n].dev,
						PCINET_VIO_ERR_NONE);
			vio->slot[n].refused_gen = 0;
		}
		WRITE_ONCE(vio->peer_inst, inst);
		/* a new count for the instance acted upon */
		vio->peer_grace = (struct pcinet_grace){ 0 };
	}
	/*
	 * Our instance is visible before any driver state that a plug
	 * below writes: D starts a session for a drv_gen only under the
	 * instance it belongs to (a new instance ends every session).
	 */
	if (inst)
		pcinet_vio_write_rhdr(vio);
	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		dev = vio->slot[n].dev;
		if (dev && !READ_ONCE(dev->dead)) {
			gen = le32_to_cpu(READ_ONCE(dev->desc->dev_gen));
			if (gen != dev->info.dev_gen)
				pcinet_vio_kill(dev, PCINET_VIO_ERR_NONE);
		}
		if (dev && READ_ONCE(dev->dead)) {
			pcinet_vio_unplug(vio, n);
			dev = NULL;
		}
		if (dev) {
			/* coalesced: at most one change per PCINET_VIO_CFG_MS */
			if (time_after64(get_jiffies_64(), dev->cfg_at +
					 msecs_to_jiffies(PCINET_VIO_CFG_MS)) &&
			    pcinet_vio_config_snap(dev)) {
				dev->cfg_at = get_jiffies_64();
				virtio_config_changed(&dev->vdev);
			}
			continue;
		}
		if (inst && !doubt && !vio->stopping &&
		    !time_before64(get_jiffies_64(), vio->slot[n].not_before))
			pcinet_vio_plug(vio, n);
	}
	if (inst)
		pcinet_vio_refresh(vio);
out:
	mutex_unlock(&vio->lock);
}

/* ----- the channel ----- */

/*
 * Every registered device, from any context.  A device whose dev_gen D
 * changed (withdrawn, replaced) dies here too, not only in @scan_work:
 * that one cannot run while a probe holds @lock, and a probe waiting for
 * I/O (virtio_blk reads the partition table after DRIVER_OK) waits for
 * ever on a device D no longer serves unless the relay aborts it.
 */
static void pcinet_vio_poke(struct pcinet_vio *vio, bool kill, bool tick)
{
	struct pcinet_vio_dev *dev;
	unsigned long flags;
	unsigned int n;

	spin_lock_irqsave(&vio->slots_lock, flags);
	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		dev = vio->slot[n].dev;
		if (!dev)
			continue;
		if (kill ||
		    le32_to_cpu(READ_ONCE(dev->desc->dev_gen)) != dev->info.dev_gen)
			pcinet_vio_kill(dev, PCINET_VIO_ERR_NONE);
		if (tick)
			set_bit(0, &dev->ticked);
		queue_work(pcinet_vio_wq, &dev->io_work);
		wake_up(&dev->ack_wq);
	}
	spin_unlock_irqrestore(&vio->slots_lock, flags);
	queue_work(pcinet_vio_wq, &vio->scan_work);
}

/* Vector 3 (or 0 with fewer vectors): completions, answers, offers. */
static void pcinet_vio_kick(void *priv)
{
	pcinet_vio_poke(priv, false, false);
}

/* Every link tick, up or not: the lost-doorbell sweep and soft state. */
static void pcinet_vio_tick(void *priv)
{
	pcinet_vio_poke(priv, false, true);
}

static void pcinet_vio_peer_gone(void *priv)
{
	struct pcinet_vio *vio = priv;

	/* taken by @scan_work, which pcinet_vio_poke() queues */
	atomic_set(&vio->went, 1);
	pcinet_vio_poke(vio, true, false);
}

/* A reset of the link's rings is no business of the virtio channel. */
static void pcinet_vio_nop(void *priv)
{
}

static const struct pcinet_chan_ops pcinet_vio_chan_ops = {
	.kick = pcinet_vio_kick,
	.stop = pcinet_vio_nop,
	.start = pcinet_vio_nop,
	.peer_changed = pcinet_vio_nop,
	.tick = pcinet_vio_tick,
	.peer_gone = pcinet_vio_peer_gone,
	.while_down = true,
};

static void *pcinet_vio_create(struct pcinet_channel *ch)
{
	const struct pcinet_vio_regions *own, *peer;
	struct pcinet_chan_vio v;
	struct pcinet_vio *vio;

	if (pcinet_chan_vio(ch, &v))
		return NULL;
	own = &v.vio[v.side];
	peer = &v.vio[!v.side];
	/* we use devices only if both regions of that direction exist */
	if (own->drv_size <= PCINET_VIO_FIXED_SIZE ||
	    peer->dev_size <= PCINET_VIO_FIXED_SIZE)
		return NULL;

	vio = kzalloc(sizeof(*vio), GFP_KERNEL);
	if (!vio)
		return ERR_PTR(-ENOMEM);
	vio->ch = ch;
	vio->win = v.win;
	vio->dev_region.off = peer->dev_off;
	vio->dev_region.size = peer->dev_size;
	vio->drv_region.off = own->drv_off;
	vio->drv_region.size = own->drv_size;
	vio->rhdr_out = (struct pcinet_vio_rhdr *)(v.win + peer->dev_off);
	vio->rhdr_in = (const struct pcinet_vio_rhdr *)(v.win + own->drv_off);
	vio->inst = get_random_u32() | 1;
	mutex_init(&vio->lock);
	spin_lock_init(&vio->slots_lock);
	INIT_WORK(&vio->scan_work, pcinet_vio_scan);
	/* what we write in D's dev region starts clean: no stale data */
	memset(v.win + peer->dev_off, 0, PCINET_VIO_FIXED_SIZE);
	pcinet_chan_attach(ch, &pcinet_vio_chan_ops, vio);
	dev_info(pcinet_chan_dev(ch),
		 "virtio channel: driver side, drv region 0x%llx+0x%llx\n",
		 (unsigned long long)own->drv_off,
		 (unsigned long long)own->drv_size);
	return vio;
}

static void pcinet_vio_destroy(void *fe)
{
	struct pcinet_vio *vio = fe;
	unsigned int n;

	pcinet_chan_detach(vio->ch);
	mutex_lock(&vio->lock);
	vio->stopping = true;
	mutex_unlock(&vio->lock);
	cancel_work_sync(&vio->scan_work);

	mutex_lock(&vio->lock);
	for (n = 0; n < PCINET_VIO_MAX_DEV; n++) {
		if (!vio->slot[n].dev)
			continue;
		pcinet_vio_kill(vio->slot[n].dev, PCINET_VIO_ERR_NONE);
		pcinet_vio_unplug(vio, n);
	}
	/* D sees us stopped: instance 0, no driver state */
	WRITE_ONCE(vio->rhdr_out->inst, 0);
	memset(pcinet_vio_st_win(vio, 0), 0,
	       PCINET_VIO_MAX_DEV * sizeof(struct pcinet_vio_drvstate));
	mutex_unlock(&vio->lock);
	/* a status wait or an io error may have queued it meanwhile */
	cancel_work_sync(&vio->scan_work);
	kfree(vio);
}

static int __init pcinet_vio_init(void)
{
	pcinet_vio_wq = alloc_workqueue("pcinet_vio", WQ_HIGHPRI | WQ_MEM_RECLAIM,
					0);
	return pcinet_vio_wq ? 0 : -ENOMEM;
}

static void pcinet_vio_exit(void)
{
	destroy_workqueue(pcinet_vio_wq);
}

const struct pcinet_frontend pcinet_vio_frontend = {
	.name = "virtio",
	.chan = PCINET_CHAN_VIRTIO,
	.init = pcinet_vio_init,
	.exit = pcinet_vio_exit,
	.create = pcinet_vio_create,
	.destroy = pcinet_vio_destroy,
};
