// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet link: bringing a shared window up between two machines.
 *
 * Each side publishes, in the peer's control inbox, a generation (@gen,
 * nonzero while it runs, new after every reset of its own), the peer
 * generation it has synchronised with (@peer_gen), a heartbeat and the
 * channels it has open.  The rings are usable when both agree:
 *
 *	our peer_gen == their gen  &&  their peer_gen == our gen
 *
 * and the acknowledgment is current: their ack_gen (their generation
 * when they wrote peer_gen) == their gen.  The decision on these words
 * is pcinet_handshake() (pcinet_ring.c, portable and unit-tested); this
 * file reads the words, acts on the answer and owns everything timed.
 * Every way into that state goes through a reset of our ring indices:
 *  - adopting a new peer generation (the peer started, restarted or
 *    reset): zero our indices, then publish peer_gen = their gen;
 *  - resetting ourselves: stop the front-ends, zero our indices, then
 *    publish a new gen.  Every way out of the up state is such a reset
 *    (peer silent for peer_timeout_ms, the platform says the peer
 *    detached, the peer broke the protocol, stopped, restarted or stopped
 *    acknowledging us), so the peer resynchronises too and no down->up
 *    transition ever reuses ring state.  A peer that was merely frozen
 *    sees the new gen when it thaws and resyncs.
 * A peer that stops cleanly publishes gen 0: we go down and wait.
 *
 * Self-healing: everything we own in the peer's inbox is soft state,
 * written again on every tick (PCINET_TICK_MS), so a word overwritten by
 * a third party is repaired within a tick; a side that stays down for
 * peer_timeout_ms while the peer's heartbeat runs resets itself; and
 * while up, every tick asks each front-end to look for work a lost
 * doorbell left behind.  No state a peer can write needs a reload.
 *
 * Ordering: the index resets are plain stores followed by a
 * store-release of peer_gen or gen (L1); the peer's load-acquire of those
 * (L2, in its pcinet_link_work() and pcinet_link_view()) pairs with
 * it, so a peer that sees itself synchronised also sees our zeroed
 * indices.
 *
 * All state changes run in one work item under @lock; a timer keeps the
 * heartbeat going and runs the work every tick.
 *
 * Identity: each side publishes a slot number and a short name in the
 * peer's control block (struct pcinet_ctrl @slot and @name), written
 * with the rest of the block on every tick.  Ours comes from the module
 * parameters (name=, slot=) or the host name, fixed when the link is
 * created; the peer's is read again on every run of the work while its
 * block is live, and is kept as last seen while it is not.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/idr.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/stringify.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/u64_stats_sync.h>
#include <linux/utsname.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>

#include "pcinet_link.h"

static unsigned int peer_timeout_ms = PCINET_PEER_TIMEOUT_MS;
module_param(peer_timeout_ms, uint, 0644);
MODULE_PARM_DESC(peer_timeout_ms,
		 "Declare a silent peer gone after this many ms (default "
		 __stringify(PCINET_PEER_TIMEOUT_MS) ")");

static char *pcinet_name;
module_param_named(name, pcinet_name, charp, 0444);
MODULE_PARM_DESC(name,
		 "Name published to the peers (default: the host name; at most "
		 __stringify(PCINET_NAME_MAX) " of [A-Za-z0-9._-], others become _)");

static unsigned int pcinet_slot;
module_param_named(slot, pcinet_slot, uint, 0444);
MODULE_PARM_DESC(slot, "Slot number published to the peers (default 0: unknown)");

/* One timer beats the heartbeat and runs the tick. */
#define PCINET_TICK	msecs_to_jiffies(PCINET_TICK_MS)
static_assert(PCINET_HEARTBEAT_MS == PCINET_TICK_MS);

/*
 * How long a peer that was alive may read "not live" (its magic or gen
 * overwritten) before it counts as gone (peer_gone): two ticks, so that
 * the peer's refresh, one tick at most after the scribble, always comes
 * first.  The link's handshake does not wait: net and tty reset at once.
 */
#define PCINET_PEER_GRACE	(2 * PCINET_TICK)

/*
 * What we publish in @features: the tty records always carry a CRC;
 * PCINET_F_VIRTIO is added while the window has a valid virtio block and
 * the virtio channel has a front-end (pcinet_link_features()).
 */
#define PCINET_LINK_FEATURES	PCINET_F_TTY_CRC

/* Numbers links for their interface and tty names; nothing else global. */
static DEFINE_IDA(pcinet_link_ida);

/**
 * struct pcinet_channel - one channel of a link, a front-end's handle
 * @link: the link it belongs to
 * @chan: which channel it is
 * @ops: the attached front-end's callbacks; under the link's @lock
 * @priv: passed back to @ops
 * @fe: what the front-end's create returned, for its destroy
 * @tx: the ring we send on (channels with a byte ring only)
 * @rx: the ring we receive from (likewise)
 */
struct pcinet_channel {
	struct pcinet_link *link;
	enum pcinet_chan chan;
	const struct pcinet_chan_ops *ops;
	void *priv;
	void *fe;
	struct pcinet_tx tx;
	struct pcinet_rx rx;
};

/**
 * struct pcinet_db_stats - a link's doorbells, one CPU's share
 * @syncp: makes the 64-bit reads whole on 32-bit machines
 * @rung: doorbells we rang toward the peer, by what they were for: the
 *	link (PCINET_VEC_LINK) or a channel c (pcinet_chan_vector(c)),
 *	whatever vector they went out on (pcinet_vector_in_use())
 * @received: doorbells the peer rang that reached us, counted once for
 *	each of the link and the channels it was delivered to (with fewer
 *	than PCINET_NR_VEC vectors, one doorbell on vector 0 counts for the
 *	link and for every channel folded onto it)
 *
 * Per CPU, so that counting costs the data path no shared cacheline:
 * written with interrupts off on this CPU (u64_stats_update_begin_irqsave:
 * a channel kicks from any context, the doorbell handler runs in hard
 * interrupt context), summed by pcinet_link_doorbells().
 */
struct pcinet_db_stats {
	struct u64_stats_sync syncp;
	u64_stats_t rung[PCINET_NR_VEC];
	u64_stats_t received[PCINET_NR_VEC];
};

/**
 * struct pcinet_link - one link, over one window
 * @dev: the backend's device
 * @ops: backend operations
 * @bdata: backend data for @ops
 * @index: link number: pcinet<index>, ttyPCI<index>
 * @side: our side of the window
 * @peer: the other side
 * @nr_vectors: doorbell vectors usable in both directions
 * @db_stats: doorbells rung and received, per CPU
 * @win: the window
 * @win_phys: its physical address (0: unknown)
 * @win_size: its usable size
 * @hdr: the window header (platform-written)
 * @in: our control inbox (the peer writes it)
 * @out: the peer's control inbox (we write it); changed only under @lock
 *	and @open_lock, by pcinet_link_point()
 * @lay: the window's layout, as parsed at creation
 * @gated: the peer's regions are not in @win but where the backend last
 *	pointed them (pcinet_link_set_peer_window())
 * @sink: with @gated, where the peer's regions are while the backend
 *	says there is no peer window: @win_size bytes of address space
 *	over one page, written and never read for anything
 * @sink_page: the page under @sink
 * @peer_base: where the peer's regions are now: @win, @sink or the
 *	backend's peer window
 * @chan: a handle per front-end of the core's table: entry c below
 *	PCINET_NR_CHAN is channel c (and holds its rings)
 * @work: runs the state machine
 * @timer: heartbeat
 * @lock: serialises the state machine, attach and detach
 * @gen: our generation; written under @lock
 * @synced_gen: the peer generation our indices were reset for
 * @up: both sides synchronised, front-ends started; written under @lock
 * @stopping: no more state changes; written under @lock
 * @started: pcinet_link_start() ran: the peer may know us
 * @down_since: jiffies of our last reset; bounds how long we stay down
 * @open_lock: serialises publishing @open_mask (taken under RTNL)
 * @open_mask: channels we publish as open
 * @peer_open: the peer's chan_open as last acted upon
 * @hb: our heartbeat counter; timer only
 * @peer_hb: the peer's heartbeat as last seen; timer only
 * @peer_hb_time: jiffies when @peer_hb last changed
 * @peer_epoch: the platform's attach epoch of the peer as last seen
 * @peer_alive: the peer's control block is live and its heartbeat runs;
 *	written under @lock, read locklessly by pcinet_chan_peer_alive().
 *	Stays true while the block reads "not live" for less than
 *	PCINET_PEER_GRACE (pcinet_link_follow_peer())
 * @peer_features: the peer's @features while @peer_alive, else 0; likewise
 * @not_live: the peer was alive and its block read "not live" since
 *	@not_live_since, every time we looked; under @lock
 * @not_live_since: jiffies of the first such read
 * @has_vio: the window's virtio block passed pcinet_layout_parse()
 * @vio: with @has_vio, the virtio regions of side 0 and side 1
 * @fault: set by a front-end that saw a protocol error
 * @fault_what: what it saw, for the message
 * @fault_chan: where
 * @own_id: the identity we publish; fixed at creation
 * @ident_lock: guards @peer_id: it is written under @lock and it, read
 *	under it alone (the accessors run under RTNL, which a front-end's
 *	start and stop take under @lock: they cannot take @lock)
 * @peer_id: the peer's identity, as last read from a live block
 * @id_event: tells udev that @peer_id changed, at most once per
 *	PCINET_ID_EVENT_DELAY: a peer renaming itself every tick costs one
 *	uevent a second, and the last name is always reported
 */
struct pcinet_link {
	struct device *dev;
	const struct pcinet_backend_ops *ops;
	void *bdata;
	int index;
	unsigned int side;
	unsigned int peer;
	unsigned int nr_vectors;
	struct pcinet_db_stats __percpu *db_stats;
	u8 *win;
	phys_addr_t win_phys;
	u64 win_size;
	const struct pcinet_win_hdr *hdr;
	const struct pcinet_ctrl *in;
	struct pcinet_ctrl *out;
	struct pcinet_layout lay;
	bool gated;
	u8 *sink;
	struct page *sink_page;
	u8 *peer_base;
	struct pcinet_channel chan[PCINET_NR_FRONTENDS];

	struct work_struct work;
	struct timer_list timer;
	struct mutex lock; /* the state machine */
	u32 gen;
	u32 synced_gen;
	bool up;
	bool stopping;
	bool started;
	unsigned long down_since;
	spinlock_t open_lock; /* publishing open_mask */
	u32 open_mask;
	u32 peer_open;

	u32 hb;
	u32 peer_hb;
	unsigned long peer_hb_time;
	u32 peer_epoch;
	bool peer_alive;
	u32 peer_features;
	bool not_live;
	unsigned long not_live_since;
	bool has_vio;
	struct pcinet_vio_regions vio[2];
	atomic_t fault;
	const char *fault_what;
	enum pcinet_chan fault_chan;

	struct pcinet_ident own_id;
	spinlock_t ident_lock; /* peer_id */
	struct pcinet_ident peer_id;
	struct delayed_work id_event;
};

#define PCINET_ID_EVENT_DELAY	HZ

/* Only a channel's front-end raises a fault on it: it has a name. */
static const char *pcinet_chan_name(enum pcinet_chan chan)
{
	return pcinet_frontends[chan]->name;
}

static u32 pcinet_in(const __le32 *p)
{
	return le32_to_cpu(READ_ONCE(*p));
}

static u32 pcinet_peer_epoch(const struct pcinet_link *link)
{
	return pcinet_in(&link->hdr->attach_epoch[link->peer]);
}

/* Count doorbells: one for each PCINET_VEC_* bit set in @what. */
static void pcinet_db_count(struct pcinet_link *link, bool received,
			    unsigned long what)
{
	struct pcinet_db_stats *s;
	unsigned long flags;
	unsigned int v;

	s = get_cpu_ptr(link->db_stats);
	flags = u64_stats_update_begin_irqsave(&s->syncp);
	for_each_set_bit(v, &what, PCINET_NR_VEC)
		u64_stats_inc(received ? &s->received[v] : &s->rung[v]);
	u64_stats_update_end_irqrestore(&s->syncp, flags);
	put_cpu_ptr(link->db_stats);
}

/* Ring the peer for @vector (PCINET_VEC_*), on the vector in use for it. */
static void pcinet_notify(struct pcinet_link *link, unsigned int vector)
{
	pcinet_db_count(link, false, BIT(vector));
	link->ops->notify(link->bdata,
			  pcinet_vector_in_use(vector, link->nr_vectors));
}

/* What we publish in @features now. */
static u32 pcinet_link_features(const struct pcinet_link *link)
{
	u32 f = PCINET_LINK_FEATURES;

	int c;

	if (!link->has_vio)
		return f;
	for (c = 0; c < PCINET_NR_FRONTENDS; c++)
		if (link->chan[c].chan == PCINET_CHAN_VIRTIO && link->chan[c].ops)
			f |= PCINET_F_VIRTIO;
	return f;
}

/* Stop the front-ends; the rings may be reset afterwards. */
static void pcinet_link_down(struct pcinet_link *link, const char *why)
{
	int c;

	lockdep_assert_held(&link->lock);
	if (!link->up)
		return;
	WRITE_ONCE(link->up, false);
	link->peer_open = 0;
	for (c = 0; c < PCINET_NR_FRONTENDS; c++)
		if (link->chan[c].ops)
			link->chan[c].ops->stop(link->chan[c].priv);
	dev_info_ratelimited(link->dev, "link %d down: %s\n", link->index, why);
}

/*
 * Write every word we own in the peer's control inbox again: whatever a
 * third party wrote there is repaired within a tick.  The values are the
 * ones last published under @lock, so the peer sees no change unless the
 * word had been overwritten.
 */
static void pcinet_link_refresh(struct pcinet_link *link)
{
	struct pcinet_ctrl *out = link->out;

	lockdep_assert_held(&link->lock);
	WRITE_ONCE(out->magic, cpu_to_le32(PCINET_CTRL_MAGIC));
	WRITE_ONCE(out->features, cpu_to_le32(pcinet_link_features(link)));
	/* L1 (below): our identity is visible before our gen */
	pcinet_ident_write(out, &link->own_id);
	WRITE_ONCE(out->ack_gen,
		   cpu_to_le32(link->synced_gen ? link->gen : 0));
	WRITE_ONCE(out->peer_gen, cpu_to_le32(link->synced_gen));
	/* L1: pairs with L2 in the peer's pcinet_link_work() */
	pcinet_store_release(&out->gen, cpu_to_le32(link->gen));
	spin_lock(&link->open_lock);
	WRITE_ONCE(out->chan_open, cpu_to_le32(link->open_mask));
	spin_unlock(&link->open_lock);
}

static void pcinet_link_reset_rings(struct pcinet_link *link)
{
	int c;

	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		pcinet_tx_reset(&link->chan[c].tx);
		pcinet_rx_reset(&link->chan[c].rx);
	}
}

/* Reset ourselves: new generation, nothing synchronised. */
static void pcinet_link_reset(struct pcinet_link *link, const char *why)
{
	if (!link->up)
		dev_info_ratelimited(link->dev, "link %d reset: %s\n",
				     link->index, why);
	pcinet_link_down(link, why);
	pcinet_link_reset_rings(link);
	link->gen = link->gen + 1 ? link->gen + 1 : 1;
	link->synced_gen = 0;
	link->down_since = jiffies;
	WRITE_ONCE(link->out->peer_gen, cpu_to_le32(0));
	WRITE_ONCE(link->out->ack_gen, cpu_to_le32(0));
	/* L1: pairs with L2 in the peer's pcinet_link_work() */
	pcinet_store_release(&link->out->gen, cpu_to_le32(link->gen));
	pcinet_notify(link, PCINET_VEC_LINK);
}

static bool pcinet_peer_silent(const struct pcinet_link *link)
{
	unsigned long last = READ_ONCE(link->peer_hb_time);

	return time_after(jiffies, last + msecs_to_jiffies(peer_timeout_ms));
}

/* The tick of every channel that runs now: all while up, else some. */
static void pcinet_link_tick_chans(struct pcinet_link *link)
{
	const struct pcinet_chan_ops *ops;
	int c;

	for (c = 0; c < PCINET_NR_FRONTENDS; c++) {
		ops = link->chan[c].ops;
		if (ops && ops->tick && (link->up || ops->while_down))
			ops->tick(link->chan[c].priv);
	}
}

/**
 * pcinet_link_follow_peer - follow the peer instance, for peer_gone
 * @link: the link
 * @live: the peer's control block reads live (pcinet_ctrl_live())
 * @silent: its heartbeat stopped for peer_timeout_ms
 * @detached: the platform says it went away since the last look
 *
 * A peer that was alive and is silent or detached (even if a new one is
 * already there) is gone at once: tell the channels that care.  One
 * whose block reads "not live" is gone only once it read so on every
 * look for PCINET_PEER_GRACE: a third party's write to its @magic or
 * @gen lasts until the peer's next refresh, a tick at most, and must not
 * cost the channels that follow the instance (virtio: every device
 * unplugged) what it costs the link (a reset).  Meanwhile @peer_alive
 * and @peer_features keep their values: the block is not read for them.
 */
static void pcinet_link_follow_peer(struct pcinet_link *link, bool live,
				    bool silent, bool detached)
{
	bool alive = live && !silent;
	int c;

	lockdep_assert_held(&link->lock);
	if (live || !link->peer_alive) {
		link->not_live = false;
	} else if (!link->not_live) {
		link->not_live = true;
		link->not_live_since = jiffies;
	}
	if (link->peer_alive && !silent && !detached && link->not_live &&
	    time_before(jiffies, link->not_live_since + PCINET_PEER_GRACE))
		return;
	link->not_live = false;
	if (link->peer_alive && (!alive || detached)) {
		WRITE_ONCE(link->peer_alive, false);
		WRITE_ONCE(link->peer_features, 0);
		for (c = 0; c < PCINET_NR_FRONTENDS; c++)
			if (link->chan[c].ops && link->chan[c].ops->peer_gone)
				link->chan[c].ops->peer_gone(link->chan[c].priv);
	}
	/* L2 (the caller's): the peer's features are read after its gen */
	WRITE_ONCE(link->peer_features,
		   alive ? pcinet_in(&link->in->features) : 0);
	WRITE_ONCE(link->peer_alive, alive);
}

/*
 * Fill in what pcinet_handshake() looks at besides the peer's gen and
 * magic: our state as it is now, and the peer's acknowledgment as it is
 * now (read again after we synchronised).
 */
static void pcinet_link_view(struct pcinet_link *link,
			     struct pcinet_hs_view *v)
{
	lockdep_assert_held(&link->lock);
	v->gen = link->gen;
	v->synced_gen = link->synced_gen;
	v->up = link->up;
	/* L2: pairs with L1 in the peer; ack_gen is stored before peer_gen */
	v->their_peer_gen =
		le32_to_cpu(pcinet_load_acquire(&link->in->peer_gen));
	v->their_ack_gen = pcinet_in(&link->in->ack_gen);
}

/*
 * Read the peer's identity again; @gen is the peer's, load-acquired (L2:
 * pairs with L1 in the peer's refresh, which writes the identity before
 * its gen).  A block that is not live says nothing: the last identity
 * read stays.  Return: true if it changed.
 */
static bool pcinet_link_read_peer_id(struct pcinet_link *link, u32 gen)
{
	struct pcinet_ident id;
	bool changed;

	if (!pcinet_ctrl_live(pcinet_in(&link->in->magic), gen))
		return false;
	pcinet_ident_read(link->in, &id);
	spin_lock(&link->ident_lock);
	changed = memcmp(&id, &link->peer_id, sizeof(id));
	if (changed)
		link->peer_id = id;
	spin_unlock(&link->ident_lock);
	return changed;
}

static void pcinet_link_work(struct work_struct *work)
{
	struct pcinet_link *link = container_of(work, struct pcinet_link, work);
	struct pcinet_hs_view v;
	u32 gen, epoch, open, changed;
	bool alive, detached = false, new_id = false;
	enum pcinet_hs act;
	const char *why;
	int c;

	mutex_lock(&link->lock);
	if (link->stopping || !link->started)
		goto out;

	epoch = pcinet_peer_epoch(link);
	if (epoch != link->peer_epoch) {
		link->peer_epoch = epoch;
		detached = true;
		if (link->synced_gen)
			pcinet_link_reset(link, "peer detached");
	}
	/* L2: pairs with L1 in the peer's pcinet_link_reset() and below */
	gen = le32_to_cpu(pcinet_load_acquire(&link->in->gen));
	/*
	 * A protocol error seen while the peer was resetting is the peer's
	 * indices going back to zero under our feet, not a broken peer: the
	 * resync below handles it.  Only an error against a peer generation
	 * we are synchronised with costs a reset of our own.
	 */
	if (atomic_xchg(&link->fault, 0) && link->synced_gen &&
	    gen == link->synced_gen) {
		dev_warn_ratelimited(link->dev,
				     "link %d %s: bad peer data (%s), resetting\n",
				     link->index,
				     pcinet_chan_name(READ_ONCE(link->fault_chan)),
				     READ_ONCE(link->fault_what));
		pcinet_link_reset(link, "protocol error");
	}
	if (link->up && pcinet_peer_silent(link))
		pcinet_link_reset(link, "peer stopped responding");

	/* The handshake proper: pcinet_handshake() decides, we act. */
	v.their_gen = gen;
	v.their_magic = pcinet_in(&link->in->magic);
	alive = pcinet_ctrl_live(v.their_magic, gen);
	pcinet_link_follow_peer(link, alive, pcinet_peer_silent(link),
				detached);
	if (alive && pcinet_link_read_peer_id(link, gen)) {
		new_id = true;
		dev_info_ratelimited(link->dev,
				     "link %d peer: name \"%s\", slot %u\n",
				     link->index, link->peer_id.name,
				     link->peer_id.slot);
	}
	pcinet_link_view(link, &v);
	act = pcinet_handshake(&v, &why);
	if (act == PCINET_HS_RESET || act == PCINET_HS_RESTART)
		pcinet_link_reset(link, why);
	if (act == PCINET_HS_SYNC || act == PCINET_HS_RESTART) {
		pcinet_link_reset_rings(link);
		link->synced_gen = gen;
		WRITE_ONCE(link->peer_hb_time, jiffies);
		WRITE_ONCE(link->out->ack_gen, cpu_to_le32(link->gen));
		/* L1: pairs with L2 in the peer's pcinet_link_work() */
		pcinet_store_release(&link->out->peer_gen, cpu_to_le32(gen));
		pcinet_notify(link, PCINET_VEC_LINK);
		pcinet_link_view(link, &v);
		act = pcinet_handshake(&v, &why);
	}

	if (act == PCINET_HS_UP) {
		WRITE_ONCE(link->peer_hb_time, jiffies);
		WRITE_ONCE(link->up, true);
		dev_info_ratelimited(link->dev, "link %d up (side %u)\n",
				     link->index, link->side);
		for (c = 0; c < PCINET_NR_FRONTENDS; c++)
			if (link->chan[c].ops)
				link->chan[c].ops->start(link->chan[c].priv);
	}

	if (link->up) {
		open = pcinet_in(&link->in->chan_open);
		changed = open ^ link->peer_open;
		link->peer_open = open;
		for (c = 0; c < PCINET_NR_FRONTENDS; c++)
			if ((changed & BIT(link->chan[c].chan)) &&
			    link->chan[c].ops)
				link->chan[c].ops->peer_changed(link->chan[c].priv);
	}
	pcinet_link_tick_chans(link);
	/*
	 * Down while the peer runs: a handshake takes a few doorbells, so a
	 * side still down after peer_timeout_ms is wedged (its view of the
	 * peer was overwritten, a doorbell was lost): start over.
	 */
	if (!link->up && alive && !pcinet_peer_silent(link) &&
	    time_after(jiffies, link->down_since +
				msecs_to_jiffies(peer_timeout_ms)))
		pcinet_link_reset(link, "no handshake");
	pcinet_link_refresh(link);
out:
	/* Not queued again while pending: the coalescing. */
	if (new_id && !link->stopping)
		schedule_delayed_work(&link->id_event, PCINET_ID_EVENT_DELAY);
	mutex_unlock(&link->lock);
}

/* peer_name, peer_slot (and phys_port_name) changed: tell udev. */
static void pcinet_link_id_event(struct work_struct *work)
{
	struct pcinet_link *link = container_of(to_delayed_work(work),
						struct pcinet_link, id_event);

	kobject_uevent(&link->dev->kobj, KOBJ_CHANGE);
}

static void pcinet_link_timer(struct timer_list *t)
{
	struct pcinet_link *link = from_timer(link, t, timer);
	u32 hb;

	link->hb++;
	/*
	 * READ_ONCE: pairs with pcinet_link_point(), which waits for this
	 * handler (synchronize_rcu()) before the old window may go away.
	 */
	WRITE_ONCE(READ_ONCE(link->out)->heartbeat, cpu_to_le32(link->hb));

	hb = pcinet_in(&link->in->heartbeat);
	if (hb != link->peer_hb) {
		link->peer_hb = hb;
		WRITE_ONCE(link->peer_hb_time, jiffies);
	}
	/* Every tick: refresh, resync, and the lost-doorbell sweep. */
	schedule_work(&link->work);
	if (!READ_ONCE(link->stopping))
		mod_timer(&link->timer, jiffies + PCINET_TICK);
}

/*
 * Point every view of the peer's regions at @base: the control inbox we
 * write and, per ring, the data we produce and the indices we publish.
 * The ring views start over at zero; the caller resets the rings (or the
 * link was never up).  Under @open_lock: pcinet_chan_set_open() writes
 * through @out without @lock.
 */
static void pcinet_link_point(struct pcinet_link *link, u8 *base)
{
	const struct pcinet_layout *lay = &link->lay;
	struct pcinet_ctrl *out;
	int c;

	out = (struct pcinet_ctrl *)(base + lay->ctrl_off[link->peer]);
	spin_lock(&link->open_lock);
	link->peer_base = base;
	WRITE_ONCE(link->out, out);
	spin_unlock(&link->open_lock);
	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		const struct pcinet_ring_loc *rl = &lay->ring[link->side][c];
		const struct pcinet_ring_loc *tl = &lay->ring[link->peer][c];

		pcinet_rx_init(&link->chan[c].rx, link->win + rl->off, rl->size,
			       &out->chan[c], &link->in->chan[c]);
		pcinet_tx_init(&link->chan[c].tx, base + tl->off, tl->size,
			       &out->chan[c], &link->in->chan[c]);
	}
}

/*
 * The sink of a gated link: @size bytes of address space, every page of
 * it the same zeroed page.  What the link writes for a peer it may not
 * write to lands here and is never read back for anything that matters
 * (a ring's own producer data is never read, its indices are our copies).
 */
static u8 *pcinet_link_sink_map(u64 size, struct page **pagep)
{
	unsigned long i, n = DIV_ROUND_UP(size, PAGE_SIZE);
	struct page **pages, *page;
	void *va = NULL;

	page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!page)
		return NULL;
	pages = kvmalloc_array(n, sizeof(*pages), GFP_KERNEL);
	if (pages) {
		for (i = 0; i < n; i++)
			pages[i] = page;
		va = vmap(pages, n, VM_MAP, PAGE_KERNEL);
		kvfree(pages);
	}
	if (!va) {
		__free_page(page);
		return NULL;
	}
	*pagep = page;	/* vmap() takes no reference: freed after vunmap() */
	return va;
}

static void pcinet_link_sink_unmap(struct pcinet_link *link)
{
	if (!link->sink)
		return;
	vunmap(link->sink);
	__free_page(link->sink_page);
}

/**
 * pcinet_link_set_peer_window - where the peer's regions are now
 * @link: a link created with &pcinet_link_cfg.gated
 * @peer_win: the peer's window, mapped (same offsets as the window the
 *	link was created with); NULL: there is none now, the link must not
 *	write anything the peer could see
 *
 * For backends whose two sides do not share one window (NTB: each side
 * reads its own inbound memory window and writes the peer's through its
 * outbound one), which must stop writing while the peer's inbound
 * translation is not known to be set.  The link goes down, its view of
 * the peer moves, and from the return on nothing is written through the
 * old one: the caller may then unmap it.  A new window starts with our
 * part of the peer's control inbox zeroed and a new generation.
 * Process context; not while the backend is in pcinet_link_stop().
 */
void pcinet_link_set_peer_window(struct pcinet_link *link, void *peer_win)
{
	u8 *base = peer_win ? peer_win : link->sink;

	if (WARN_ON_ONCE(!link->gated))
		return;
	mutex_lock(&link->lock);
	if (base == link->peer_base || link->stopping) {
		mutex_unlock(&link->lock);
		return;
	}
	/* The front-ends are stopped: no ring is written while we move. */
	pcinet_link_down(link, peer_win ? "peer window back" :
			 "peer window gone");
	pcinet_link_point(link, base);
	/*
	 * The heartbeat timer reads @out without @lock: once every handler
	 * that may have read the old pointer has returned, nothing writes
	 * through it (pairs with the READ_ONCE in pcinet_link_timer()).
	 */
	synchronize_rcu();
	memset(link->out, 0, sizeof(*link->out));
	pcinet_link_reset(link, peer_win ? "peer window back" :
			  "peer window gone");
	if (link->started)
		pcinet_link_refresh(link);
	mutex_unlock(&link->lock);
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_set_peer_window, PCINET);

/**
 * pcinet_window_is_pcinet - does a window carry a valid pcinet header?
 * @win: the mapped window
 * @size: its size
 *
 * Lets a backend leave alone devices that are not meant for pcinet.
 */
bool pcinet_window_is_pcinet(const void *win, u64 size)
{
	struct pcinet_layout lay;

	return pcinet_layout_parse(win, size, &lay) == 0;
}
EXPORT_SYMBOL_NS_GPL(pcinet_window_is_pcinet, PCINET);

/* Create a front-end on its channel; NULL from it is no front-end. */
static int pcinet_link_create_frontend(struct pcinet_link *link, int c)
{
	const struct pcinet_frontend *fe = pcinet_frontends[c];
	struct pcinet_channel *ch;
	void *p;

	if (!fe)
		return 0;
	ch = &link->chan[c];
	p = fe->create(ch);
	if (IS_ERR(p))
		return PTR_ERR(p);
	ch->fe = p;
	return 0;
}

/* Destroy the front-ends of the first @n table entries, in reverse. */
static void pcinet_link_destroy_frontends(struct pcinet_link *link, int n)
{
	const struct pcinet_frontend *fe;
	struct pcinet_channel *ch;

	while (n--) {
		fe = pcinet_frontends[n];
		if (!fe)
			continue;
		ch = &link->chan[n];
		if (ch->fe)
			fe->destroy(ch->fe);
		ch->fe = NULL;
	}
}

/**
 * pcinet_link_create - set up a link over a mapped window
 * @cfg: the window and the backend
 *
 * Validates the window, claims our side of it and creates the
 * front-ends, in the order of the core's table.  Nothing is published to
 * the peer until pcinet_link_start().
 *
 * Return: the link, or an ERR_PTR().
 */
struct pcinet_link *pcinet_link_create(const struct pcinet_link_cfg *cfg)
{
	struct pcinet_layout lay;
	struct pcinet_link *link;
	u8 *win = cfg->win;
	int c, err;

	if (cfg->side > 1)
		return ERR_PTR(-EINVAL);
	if (pcinet_layout_parse(win, cfg->size, &lay)) {
		dev_err(cfg->dev, "window header invalid\n");
		return ERR_PTR(-EINVAL);
	}

	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return ERR_PTR(-ENOMEM);
	link->db_stats = alloc_percpu(struct pcinet_db_stats);
	if (!link->db_stats) {
		err = -ENOMEM;
		goto abort_with_link;
	}
	for_each_possible_cpu(c)
		u64_stats_init(&per_cpu_ptr(link->db_stats, c)->syncp);
	link->dev = cfg->dev;
	link->ops = cfg->ops;
	link->bdata = cfg->bdata;
	link->side = cfg->side;
	link->peer = !cfg->side;
	link->nr_vectors = min(cfg->nr_vectors, lay.nr_vectors);
	link->win = win;
	link->win_phys = cfg->phys;
	link->win_size = lay.win_size;
	link->hdr = cfg->win;
	link->lay = lay;
	link->gated = cfg->gated;
	link->in = (const struct pcinet_ctrl *)(win + lay.ctrl_off[link->side]);
	if (link->gated) {
		link->sink = pcinet_link_sink_map(lay.win_size, &link->sink_page);
		if (!link->sink) {
			err = -ENOMEM;
			goto abort_with_stats;
		}
	}
	mutex_init(&link->lock);
	spin_lock_init(&link->open_lock);
	spin_lock_init(&link->ident_lock);
	INIT_WORK(&link->work, pcinet_link_work);
	INIT_DELAYED_WORK(&link->id_event, pcinet_link_id_event);
	timer_setup(&link->timer, pcinet_link_timer, 0);
	atomic_set(&link->fault, 0);

	link->has_vio = lay.has_vio;
	memcpy(link->vio, lay.vio, sizeof(link->vio));
	for (c = 0; c < PCINET_NR_FRONTENDS; c++) {
		link->chan[c].link = link;
		link->chan[c].chan = c < PCINET_NR_CHAN || !pcinet_frontends[c] ?
				     c : pcinet_frontends[c]->chan;
	}
	pcinet_link_point(link, link->gated ? link->sink : win);

	/* Our part of the window starts clean: no stale kernel data. */
	memset(link->out, 0, sizeof(*link->out));
	link->gen = get_random_u32() | 1;
	link->peer_epoch = pcinet_peer_epoch(link);
	pcinet_ident_set(&link->own_id, pcinet_slot,
			 pcinet_name && *pcinet_name ? pcinet_name :
			 init_utsname()->nodename);
	/*
	 * A peer already running names itself before our front-ends are
	 * created, so udev sees its name when they appear.  L2: pairs with
	 * L1 in the peer's refresh.
	 */
	pcinet_link_read_peer_id(link,
				 le32_to_cpu(pcinet_load_acquire(&link->in->gen)));

	err = ida_alloc(&pcinet_link_ida, GFP_KERNEL);
	if (err < 0)
		goto abort_with_sink;
	link->index = err;

	for (c = 0; c < PCINET_NR_FRONTENDS; c++) {
		err = pcinet_link_create_frontend(link, c);
		if (err)
			goto abort_with_frontends;
	}
	return link;

abort_with_frontends:
	pcinet_link_destroy_frontends(link, c);
	ida_free(&pcinet_link_ida, link->index);
abort_with_sink:
	pcinet_link_sink_unmap(link);
abort_with_stats:
	free_percpu(link->db_stats);
abort_with_link:
	kfree(link);
	return ERR_PTR(err);
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_create, PCINET);

/**
 * pcinet_link_start - publish ourselves to the peer and run
 * @link: the link
 *
 * Call once the backend delivers doorbells.
 */
void pcinet_link_start(struct pcinet_link *link)
{
	mutex_lock(&link->lock);
	link->started = true;
	link->down_since = jiffies;
	/*
	 * L1 (in refresh): our zeroed block is visible before our gen; pairs
	 * with L2 in the peer's pcinet_link_work()
	 */
	pcinet_link_refresh(link);
	mutex_unlock(&link->lock);
	pcinet_notify(link, PCINET_VEC_LINK);
	mod_timer(&link->timer, jiffies + PCINET_TICK);
	schedule_work(&link->work);
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_start, PCINET);

/**
 * pcinet_link_stop - stop the front-ends and tell the peer we go
 * @link: the link
 *
 * The mirror of pcinet_link_start(); harmless on a link never started.
 * The backend may stop delivering doorbells before or after this.
 */
void pcinet_link_stop(struct pcinet_link *link)
{
	bool started;

	mutex_lock(&link->lock);
	WRITE_ONCE(link->stopping, true);
	started = link->started;
	link->started = false;
	/* From here on no front-end runs, so none raises a fault. */
	pcinet_link_down(link, "driver stopping");
	mutex_unlock(&link->lock);
	del_timer_sync(&link->timer);	/* not re-armed: @stopping */
	cancel_work_sync(&link->work);	/* returns at once from now on */
	cancel_delayed_work_sync(&link->id_event);	/* not queued again */
	if (!started)
		return;
	WRITE_ONCE(link->out->chan_open, cpu_to_le32(0));
	/* L1: pairs with L2 in the peer's pcinet_link_work(); closed first */
	pcinet_store_release(&link->out->gen, cpu_to_le32(0));
	pcinet_notify(link, PCINET_VEC_LINK);
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_stop, PCINET);

/**
 * pcinet_link_destroy - stop the link if running, free everything
 * @link: the link
 *
 * The backend must no longer call pcinet_link_doorbell().
 */
void pcinet_link_destroy(struct pcinet_link *link)
{
	pcinet_link_stop(link);
	pcinet_link_destroy_frontends(link, PCINET_NR_FRONTENDS);
	/*
	 * The front-ends' teardown may still have queued the work (a fault
	 * raised on the way out); it returns at once now, but must not run
	 * on freed memory.
	 */
	cancel_work_sync(&link->work);
	ida_free(&pcinet_link_ida, link->index);
	pcinet_link_sink_unmap(link);
	free_percpu(link->db_stats);
	kfree(link);
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_destroy, PCINET);

/**
 * pcinet_link_doorbell - the peer rang one of our doorbells
 * @link: the link
 * @vector: which one
 *
 * Called by the backend in hard interrupt context.
 */
void pcinet_link_doorbell(struct pcinet_link *link, unsigned int vector)
{
	const struct pcinet_chan_ops *ops;
	struct pcinet_channel *s;
	unsigned long what = 0;
	int c;

	/* The vector rule of pcinet_layout.h: 0 also serves unused vectors. */
	vector = pcinet_vector_in_use(vector, link->nr_vectors);
	if (vector == PCINET_VEC_LINK) {
		what |= BIT(PCINET_VEC_LINK);
		schedule_work(&link->work);
	}
	for (c = 0; c < PCINET_NR_CHAN; c++)
		if (vector == pcinet_vector_in_use(pcinet_chan_vector(c),
						   link->nr_vectors))
			what |= BIT(pcinet_chan_vector(c));
	pcinet_db_count(link, true, what);
	for (c = 0; c < PCINET_NR_FRONTENDS; c++) {
		s = &link->chan[c];
		if (vector != pcinet_vector_in_use(pcinet_chan_vector(s->chan),
						   link->nr_vectors))
			continue;
		ops = READ_ONCE(s->ops);
		if (ops && (READ_ONCE(link->up) || ops->while_down))
			ops->kick(s->priv);
	}
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_doorbell, PCINET);

/**
 * pcinet_link_peer_ident - the peer's identity, for the backend's sysfs
 * @link: the link
 * @id: filled in: what the peer published when last seen running; zero
 *	if none yet
 *
 * Any context but hard interrupt; takes only the identity's spinlock.
 */
void pcinet_link_peer_ident(struct pcinet_link *link, struct pcinet_ident *id)
{
	spin_lock(&link->ident_lock);
	*id = link->peer_id;
	spin_unlock(&link->ident_lock);
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_peer_ident, PCINET);

/**
 * pcinet_link_doorbells - a link's doorbells so far, for the backend's sysfs
 * @link: the link
 * @db: filled in: for the link and each channel (indexed PCINET_VEC_*,
 *	channel c at pcinet_chan_vector(c)), the doorbells we rang toward
 *	the peer and the ones we received, since the link was created
 *
 * Any context; lock-free.  Each counter is read whole; the set is not a
 * snapshot of one instant.
 */
void pcinet_link_doorbells(struct pcinet_link *link,
			   struct pcinet_link_doorbells *db)
{
	const struct pcinet_db_stats *s;
	u64 rung[PCINET_NR_VEC], received[PCINET_NR_VEC];
	unsigned int start, v;
	int cpu;

	memset(db, 0, sizeof(*db));
	for_each_possible_cpu(cpu) {
		s = per_cpu_ptr(link->db_stats, cpu);
		do {
			start = u64_stats_fetch_begin(&s->syncp);
			for (v = 0; v < PCINET_NR_VEC; v++) {
				rung[v] = u64_stats_read(&s->rung[v]);
				received[v] = u64_stats_read(&s->received[v]);
			}
		} while (u64_stats_fetch_retry(&s->syncp, start));
		for (v = 0; v < PCINET_NR_VEC; v++) {
			db->rung[v] += rung[v];
			db->received[v] += received[v];
		}
	}
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_doorbells, PCINET);

/**
 * pcinet_link_own_ident - the identity we publish on a link
 * @link: the link
 *
 * Return: fixed from pcinet_link_create() on.
 */
const struct pcinet_ident *pcinet_link_own_ident(const struct pcinet_link *link)
{
	return &link->own_id;
}
EXPORT_SYMBOL_NS_GPL(pcinet_link_own_ident, PCINET);

/* ----- the channel interface (pcinet_chan.h) ----- */

/**
 * pcinet_chan_attach - connect a front-end to its channel
 * @ch: the channel
 * @ops: its callbacks
 * @priv: passed back to @ops
 *
 * If the link is already up, @ops->start is called before this returns.
 */
void pcinet_chan_attach(struct pcinet_channel *ch,
			const struct pcinet_chan_ops *ops, void *priv)
{
	struct pcinet_link *link = ch->link;

	mutex_lock(&link->lock);
	ch->priv = priv;
	ch->ops = ops;
	if (link->up)
		ops->start(priv);
	mutex_unlock(&link->lock);
}

/**
 * pcinet_chan_detach - disconnect a front-end; it is stopped first
 * @ch: the channel
 */
void pcinet_chan_detach(struct pcinet_channel *ch)
{
	struct pcinet_link *link = ch->link;

	mutex_lock(&link->lock);
	if (link->up && ch->ops)
		ch->ops->stop(ch->priv);
	ch->ops = NULL;
	ch->priv = NULL;
	mutex_unlock(&link->lock);
}

/**
 * pcinet_chan_index - the number of the link a channel belongs to
 * @ch: the channel
 *
 * Return: the link's index, for names: pcinet<index>, ttyPCI<index>.
 */
int pcinet_chan_index(const struct pcinet_channel *ch)
{
	return ch->link->index;
}

/**
 * pcinet_chan_dev - the backend's device under a channel
 * @ch: the channel
 *
 * Return: the device, for logging and as parent of the front-end's.
 */
struct device *pcinet_chan_dev(const struct pcinet_channel *ch)
{
	return ch->link->dev;
}

/**
 * pcinet_chan_tx - the ring a channel sends on
 * @ch: the channel
 *
 * Return: the tx ring view, valid while the link exists.
 */
struct pcinet_tx *pcinet_chan_tx(struct pcinet_channel *ch)
{
	return &ch->tx;
}

/**
 * pcinet_chan_rx - the ring a channel receives from
 * @ch: the channel
 *
 * Return: the rx ring view, valid while the link exists.
 */
struct pcinet_rx *pcinet_chan_rx(struct pcinet_channel *ch)
{
	return &ch->rx;
}

/**
 * pcinet_chan_kick - ring the peer's doorbell for a channel
 * @ch: the channel
 */
void pcinet_chan_kick(struct pcinet_channel *ch)
{
	pcinet_notify(ch->link, pcinet_chan_vector(ch->chan));
}

/**
 * pcinet_chan_fault - a front-end found the peer's data impossible
 * @ch: where
 * @what: what was wrong
 *
 * The link is reset from process context, with a ratelimited message,
 * unless the peer turns out to be resetting itself; the front-end must
 * stop using the ring until it is started again.  @what must be a string
 * constant.
 */
void pcinet_chan_fault(struct pcinet_channel *ch, const char *what)
{
	struct pcinet_link *link = ch->link;

	WRITE_ONCE(link->fault_what, what);
	WRITE_ONCE(link->fault_chan, ch->chan);
	atomic_set(&link->fault, 1);
	schedule_work(&link->work);
}

/**
 * pcinet_chan_set_open - publish whether we have a channel open
 * @ch: the channel
 * @open: open or closed
 */
void pcinet_chan_set_open(struct pcinet_channel *ch, bool open)
{
	struct pcinet_link *link = ch->link;
	u32 mask;

	spin_lock(&link->open_lock);
	mask = link->open_mask;
	if (open)
		mask |= BIT(ch->chan);
	else
		mask &= ~BIT(ch->chan);
	/* Read locklessly by pcinet_chan_own_open() */
	WRITE_ONCE(link->open_mask, mask);
	WRITE_ONCE(link->out->chan_open, cpu_to_le32(mask));
	spin_unlock(&link->open_lock);
	pcinet_notify(link, PCINET_VEC_LINK);
}

/**
 * pcinet_chan_own_open - have we published a channel as open?
 * @ch: the channel
 *
 * Return: the last pcinet_chan_set_open() for @ch.
 */
bool pcinet_chan_own_open(const struct pcinet_channel *ch)
{
	/* Written under open_lock; a snapshot is all a caller can use. */
	return READ_ONCE(ch->link->open_mask) & BIT(ch->chan);
}

/**
 * pcinet_chan_link_up - is the link under a channel up?
 * @ch: the channel
 *
 * Return: both sides synchronised; a snapshot.
 */
bool pcinet_chan_link_up(const struct pcinet_channel *ch)
{
	return READ_ONCE(ch->link->up);
}

/**
 * pcinet_chan_peer_open - does the peer have a channel open?
 * @ch: the channel
 *
 * Return: false while the link is down.
 */
bool pcinet_chan_peer_open(const struct pcinet_channel *ch)
{
	const struct pcinet_link *link = ch->link;

	return READ_ONCE(link->up) &&
	       (pcinet_in(&link->in->chan_open) & BIT(ch->chan));
}

/**
 * pcinet_chan_peer_alive - does the peer instance we know still run?
 * @ch: the channel
 *
 * Unlike pcinet_chan_link_up(), a reset of the rings does not change it:
 * it turns false when the peer's heartbeat goes silent, the platform says
 * the peer detached, or the peer's control block stops being live (the
 * moments the channel's @peer_gone is called), and true again when a
 * peer's block is live with its heartbeat running.
 *
 * Return: a snapshot, as of the link's last run.
 */
bool pcinet_chan_peer_alive(const struct pcinet_channel *ch)
{
	return READ_ONCE(ch->link->peer_alive);
}

/**
 * pcinet_chan_vio - the virtio regions of a channel's window
 * @ch: the channel
 * @v: filled in when the window has them
 *
 * For the virtio channel, whose rings live in these regions rather than
 * in a data inbox.  Fixed for the life of the link.
 *
 * Return: 0, or -ENODEV if the window has no valid virtio block.
 */
int pcinet_chan_vio(const struct pcinet_channel *ch, struct pcinet_chan_vio *v)
{
	const struct pcinet_link *link = ch->link;

	if (!link->has_vio)
		return -ENODEV;
	v->win = link->win;
	v->phys = link->win_phys;
	v->win_size = link->win_size;
	v->side = link->side;
	memcpy(v->vio, link->vio, sizeof(v->vio));
	return 0;
}

/**
 * pcinet_chan_peer_features - the peer's PCINET_F_* bits
 * @ch: the channel
 *
 * Return: what the peer publishes in @features, as of the link's last
 * run; 0 while it is not alive (pcinet_chan_peer_alive()).
 */
u32 pcinet_chan_peer_features(const struct pcinet_channel *ch)
{
	return READ_ONCE(ch->link->peer_features);
}

/**
 * pcinet_chan_peer_ident - who is at the other end of a channel's link
 * @ch: the channel
 * @id: filled in: the identity the peer published when last seen
 *	running, sanitized; zero (slot 0, name "") if none yet
 *
 * Any context but hard interrupt; takes no lock a front-end holds.
 */
void pcinet_chan_peer_ident(const struct pcinet_channel *ch,
			    struct pcinet_ident *id)
{
	pcinet_link_peer_ident(ch->link, id);
}
