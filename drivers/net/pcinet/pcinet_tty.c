// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet tty front-end: a serial line, /dev/ttyPCI<n>, on a pcinet link.
 *
 * The link's tty channel carries a byte stream in records: one 64 KiB
 * ring per direction, each write() cut into records (struct pcinet_rec)
 * of at most PCINET_TTY_REC_MAX bytes, each with a CRC-32C.  The peer's
 * doorbell schedules a work item that copies each record out of the window,
 * checks it on that copy and feeds the flip buffers from it.  A record
 * changed in the window is dropped and counted (a gap in the stream, as a
 * framing error on a UART loses a character), never delivered; several in
 * a row reset the link.  Every byte that arrives passes unchanged; what the
 * line discipline makes of it (echo, CR/LF mapping) is the usual termios
 * business of each end.
 *
 * Flow control is end to end.  The receiver consumes only what the flip
 * buffers accept and nothing while the line discipline has throttled it
 * or the tty is closed: bytes wait in the ring, the sender finds it full,
 * its write() comes up short and its writer sleeps until the receiver
 * frees space and rings (need_space).  Nothing is dropped while the link
 * is up: a writer whose peer does not read blocks once the ring is full,
 * as with hardware flow control.  An open moves what waits in the ring
 * into the tty, and a close discards what nobody read, as on any tty (so
 * set the receiving end's termios before the sender starts, or on a file
 * descriptor kept open).  Bytes written while the link is down are
 * discarded, as on a line without a cable.
 *
 * Modem lines, null-modem style: the channel-open bit we publish is our
 * DTR, the peer's is our DCD.  DTR rises when the port opens and falls
 * when it hangs up or closes with HUPCL set (the default; with -hupcl the
 * peer keeps carrier after we close).  Carrier is "link up and the peer's
 * DTR up".  As on other serial ports CLOCAL is set by default; a tty that
 * clears it (stty -clocal, getty without -L) waits for carrier in a
 * blocking open and is hung up when carrier drops: the peer closed its end
 * or went away.
 *
 * Console: "ttyPCI" prints kernel messages into the ring of ttyPCI<i>
 * (console=ttyPCI<i>), without sleeping, from any context; output is
 * dropped while the link is down, the peer has not opened its end, or the
 * ring is full.  See pcinet_console below for how to enable it.
 *
 * Lifetime and locking: the tty_port is reference counted; an open tty
 * keeps it (and this structure) alive after the link is gone, with @chan
 * NULL and @running false.  @tx_lock (raw, irq-safe, because the console
 * takes it) owns the tx ring view; the rx ring view belongs to @rx_work;
 * the link callbacks are serialised by the link.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/console.h>
#include <linux/crc32.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/serial.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/tty.h>
#include <linux/tty_driver.h>
#include <linux/tty_flip.h>
#include <linux/workqueue.h>

#include "pcinet_chan.h"
#include "pcinet_compat.h"

#define PCINET_TTY_NAME		"ttyPCI"
/*
 * One minor per link, the link's index: the only module-wide bound on the
 * number of links that have a tty (net devices have none).  A crate holds
 * at most a few dozen boards; 256 pointers cost 2 KiB.
 */
#define PCINET_TTY_MINORS	256
/*
 * write_room() promises at most this many bytes.  A record of n >= 1 bytes
 * takes at most n ring slots of PCINET_REC_ALIGN bytes, so the promise is
 * kept however the line discipline cuts its writes; the console leaves
 * that many slots alone.
 */
#define PCINET_TTY_ROOM_MAX	256
#define PCINET_TTY_CON_RESERVE	(PCINET_TTY_ROOM_MAX * PCINET_REC_ALIGN)
/* Console text is staged (and "\n" made "\r\n") this much at a time. */
#define PCINET_CON_CHUNK	256
/* This many bad records in a row is a broken peer, not a scribble. */
#define PCINET_TTY_CRC_BAD_RESET	8
/* Bytes the rx work moves before it lets other work run. */
#define PCINET_TTY_RX_BUDGET	(256 * 1024)
/* Flip buffers at their memory limit: look again after this long. */
#define PCINET_TTY_RX_RETRY	msecs_to_jiffies(10)
/* How long a console write waits for a busy tx ring before dropping. */
#define PCINET_CON_SPIN_US	100

/**
 * struct pcinet_tty - the tty front-end of one link
 * @port: the tty port; its reference count keeps this structure alive
 * @chan: our channel of the link underneath; NULL once the link is
 *	gone; under @lock
 * @index: our minor, the link's index
 * @tx: ring we send on; under @tx_lock while @running
 * @rx: ring we receive from; @rx_work only
 * @lock: protects @chan for the port callbacks, which may outlive it
 * @tx_lock: serialises the tx ring view between write() and the console;
 *	raw and irq-safe because the console takes it from any context
 * @running: the link is up and the rings are ours; under @tx_lock
 * @tx_waiting: we asked the peer for a doorbell on free space; @tx_lock
 * @tx_fault: write() found the peer's consumer index impossible; @tx_lock
 * @refresh: the link ticked: @rx_work writes our ring words again
 * @rx_work: reaps tx space for writers, drains the rx ring
 * @rx_open: the tty is open: consume what arrives
 * @throttled: the line discipline asked us to stop
 * @carrier: carrier as last acted upon; link callbacks only
 * @rx_buf: the last record received, checked, our own copy; @rx_work
 * @rx_len: bytes in @rx_buf; @rx_work
 * @rx_off: bytes of @rx_buf already in the flip buffers; @rx_work
 * @crc_bad: bad records in a row; @rx_work
 * @icount: bytes received and sent, records dropped (as frame errors),
 *	for TIOCGICOUNT; rx and frame by @rx_work, tx under @tx_lock
 * @con_buf: console text being made into a record; @tx_lock
 */
struct pcinet_tty {
	struct tty_port port;
	struct pcinet_channel *chan;
	int index;
	struct pcinet_tx *tx;
	struct pcinet_rx *rx;
	spinlock_t lock; /* @chan */
	raw_spinlock_t tx_lock; /* the tx ring view */
	bool running;
	bool tx_waiting;
	bool tx_fault;
	bool refresh;
	struct delayed_work rx_work;
	bool rx_open;
	bool throttled;
	bool carrier;
	u8 *rx_buf;
	u32 rx_len;
	u32 rx_off;
	unsigned int crc_bad;
	struct serial_icounter_struct icount;
	u8 con_buf[PCINET_CON_CHUNK];
};

/* One tty driver for all links, registered at module load. */
static struct tty_driver *pcinet_tty_driver;

/*
 * Minor -> front-end, for opening a tty (install) and for the console.
 * Written at create and destroy; readers hold rcu_read_lock() and, to
 * keep the front-end, take a port reference before unlocking.  Destroy
 * clears the entry and waits for readers before dropping its reference.
 */
static struct pcinet_tty __rcu *pcinet_tty_table[PCINET_TTY_MINORS];

static void pcinet_tty_rx_schedule(struct pcinet_tty *pt)
{
	mod_delayed_work(system_highpri_wq, &pt->rx_work, 0);
}

/* ----- records ----- */

/*
 * CRC-32C of a record: its header up to @crc, then the payload (see
 * struct pcinet_rec).  The sender runs it on the bytes it copies in, the
 * receiver on the copy it made out of the window.
 */
static u32 pcinet_tty_crc(const struct pcinet_rec *rec, const u8 *buf, u32 n)
{
	u32 crc = __crc32c_le(~0U, (const u8 *)rec,
			      offsetof(struct pcinet_rec, crc));

	return ~__crc32c_le(crc, buf, n);
}

/* Largest payload of one record in @free bytes of ring (0: none fits). */
static u32 pcinet_tty_rec_room(u32 free)
{
	u32 room = free & ~(u32)(PCINET_REC_ALIGN - 1);

	if (room <= sizeof(struct pcinet_rec))
		return 0;
	return min_t(u32, room - sizeof(struct pcinet_rec), PCINET_TTY_REC_MAX);
}

/*
 * Publish @n bytes (at most what pcinet_tty_rec_room() allowed) as one
 * record.  Caller holds tx_lock and saw @running.
 */
static void pcinet_tty_put_rec(struct pcinet_tty *pt, const u8 *buf, u32 n)
{
	struct pcinet_rec rec = {
		.len = cpu_to_le32(n),
		.flags = cpu_to_le16(PCINET_REC_F_CRC),
	};

	rec.crc = cpu_to_le32(pcinet_tty_crc(&rec, buf, n));
	pcinet_tx_write(pt->tx, 0, &rec, sizeof(rec));
	pcinet_tx_write(pt->tx, sizeof(rec), buf, n);
	/* A: pairs with B in the peer's pcinet_rx_avail() */
	pcinet_tx_commit(pt->tx, pcinet_rec_size(n));
	pt->icount.tx += n;
}

/* ----- transmit ----- */

/* Writers sleeping for space are woken once this much is free. */
static u32 pcinet_tty_tx_wake(const struct pcinet_tty *pt)
{
	return pt->tx->size / 4;
}

/*
 * Free space in the tx ring.  Below @mark someone may sleep on it, so ask
 * the peer for a doorbell when it consumes (need_space: G pairs with H in
 * its pcinet_rx_publish()) and look once more, so space freed before the
 * request became visible is not missed; the rx work wakes write_wait when
 * it sees the wake-up mark.  A broken peer index reads as -1; the rx work
 * reports it outside this lock.  Caller holds tx_lock and saw @running.
 */
static int pcinet_tty_tx_space(struct pcinet_tty *pt, u32 mark)
{
	int free = pcinet_tx_free(pt->tx);

	if (free >= 0 && (u32)free < mark && !pt->tx_waiting) {
		pt->tx_waiting = true;
		free = pcinet_tx_wait_space(pt->tx);
	}
	if (unlikely(free < 0)) {
		pt->tx_fault = true;
		pcinet_tty_rx_schedule(pt);
		return -1;
	}
	return free;
}

/*
 * Room for write().  Below the wake-up mark a writer may sleep on it:
 * write() came up short, or the line discipline needs more than this for
 * its next character (n_tty sleeps when "\n" needs two bytes and one is
 * left).  A broken peer index reads as no room.  Caller holds tx_lock
 * and saw @running.
 */
static u32 pcinet_tty_tx_room(struct pcinet_tty *pt)
{
	int free = pcinet_tty_tx_space(pt, pcinet_tty_tx_wake(pt));

	return free < 0 ? 0 : free;
}

/*
 * The end of a batch: ring the peer if it sleeps on what we published
 * (E: pairs with F in its pcinet_rx_arm()).  Caller holds tx_lock.
 */
static void pcinet_tty_tx_kick(struct pcinet_tty *pt)
{
	if (pcinet_tx_end_batch(pt->tx))
		pcinet_chan_kick(pt->chan);
}

static ssize_t pcinet_tty_write(struct tty_struct *tty, const u8 *buf,
				size_t count)
{
	struct pcinet_tty *pt = tty->driver_data;
	unsigned long flags;
	size_t done = 0;
	u32 room, n;

	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	if (!pt->running) {
		/* No link: the bytes go nowhere, as without a cable. */
		raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
		return count;
	}
	while (done < count) {
		room = pcinet_tty_rec_room(pcinet_tty_tx_room(pt));
		if (!room)
			break;
		n = min_t(size_t, count - done, room);
		pcinet_tty_put_rec(pt, buf + done, n);
		done += n;
	}
	pcinet_tty_tx_kick(pt);
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
	/* Short: the peer rings when it frees space, the rx work wakes us. */
	return done;
}

static unsigned int pcinet_tty_write_room(struct tty_struct *tty)
{
	struct pcinet_tty *pt = tty->driver_data;
	unsigned long flags;
	u32 room;

	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	room = pt->running ? pcinet_tty_tx_room(pt) / PCINET_REC_ALIGN :
			     PCINET_TTY_ROOM_MAX;
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
	/*
	 * The line discipline counts on writing what we report here (n_tty
	 * drops a post-processed character that does not fit): one ring slot
	 * per byte is enough whatever its writes, and the console leaves
	 * PCINET_TTY_ROOM_MAX slots alone.
	 */
	return min_t(u32, room, PCINET_TTY_ROOM_MAX);
}

/*
 * Bytes written but not yet taken by the peer, for tcdrain() and close
 * (closing_wait).  They count only while the peer's end is open: with
 * nobody listening there is nothing to wait for, as on a line without a
 * receiver.  While bytes are pending the peer is asked for a doorbell
 * when it consumes (pcinet_tty_tx_space() with the whole ring as mark):
 * the rx work wakes write_wait and tty_wait_until_sent() asks again, so
 * the waiter is woken at the latest when the ring becomes empty.  A
 * broken peer index counts as nothing pending.
 */
static unsigned int pcinet_tty_chars_in_buffer(struct tty_struct *tty)
{
	struct pcinet_tty *pt = tty->driver_data;
	unsigned int pending = 0;
	unsigned long flags;
	int free;

	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	if (pt->running && READ_ONCE(pt->carrier)) {
		free = pcinet_tty_tx_space(pt, pt->tx->size);
		if (free >= 0)
			pending = pt->tx->size - free;
	}
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
	return pending;
}

/* ----- receive ----- */

/*
 * Give consumed space back (C); ring the peer if its writer waits for it
 * (H: pairs with G in its pcinet_tx_wait_space()).
 */
static void pcinet_tty_give_back(struct pcinet_tty *pt)
{
	if (pcinet_rx_give_back(pt->rx))
		pcinet_chan_kick(pt->chan);
}

/* A record changed in the window: drop it; reset if it keeps happening. */
static void pcinet_tty_rx_bad(struct pcinet_tty *pt, u32 len)
{
	WRITE_ONCE(pt->icount.frame, pt->icount.frame + 1);
	dev_warn_ratelimited(pcinet_chan_dev(pt->chan),
			     "%s%d: dropped %u bytes changed in the window (CRC)\n",
			     PCINET_TTY_NAME, pt->index, len);
	if (++pt->crc_bad >= PCINET_TTY_CRC_BAD_RESET) {
		pt->crc_bad = 0;
		pcinet_chan_fault(pt->chan, "record CRC");
	}
}

/*
 * Take the next record out of the ring into @rx_buf and check it there.
 * @empty: set when the ring had no record
 *
 * Return: the payload length now in @rx_buf (0 also for a record that was
 * dropped, or with @empty), or -1 after a fault (the link resets).
 */
static int pcinet_tty_rx_rec(struct pcinet_tty *pt, bool *empty)
{
	struct pcinet_rx *rx = pt->rx;
	struct pcinet_rec rec;
	int size;
	u32 len;

	/* B: pairs with A in the peer's pcinet_tx_commit() */
	size = pcinet_rx_peek_rec(rx, &rec, PCINET_TTY_REC_MAX);
	if (unlikely(size < 0)) {
		pcinet_chan_fault(pt->chan, "rx record");
		return -1;
	}
	*empty = !size;
	if (!size)
		return 0;
	len = le32_to_cpu(rec.len);
	pcinet_rx_read(rx, sizeof(rec), pt->rx_buf, len);
	/* Given back (C) only after the copy, by pcinet_tty_give_back(). */
	pcinet_rx_consume(rx, size);
	/* Checked on our copy: what the window says now no longer matters. */
	if (unlikely(!(rec.flags & cpu_to_le16(PCINET_REC_F_CRC)) ||
		     pcinet_tty_crc(&rec, pt->rx_buf, len) !=
		     le32_to_cpu(rec.crc))) {
		pcinet_tty_rx_bad(pt, len);
		return 0;
	}
	pt->crc_bad = 0;
	pt->rx_len = len;
	pt->rx_off = 0;
	WRITE_ONCE(pt->icount.rx, pt->icount.rx + len);
	return len;
}

/*
 * Feed the flip buffers from @rx_buf, and @rx_buf from the ring, as far as
 * the tty takes it.  At most one record waits outside the ring: flow
 * control stays end to end.
 */
static void pcinet_tty_rx(struct pcinet_tty *pt)
{
	struct pcinet_rx *rx = pt->rx;
	u32 budget = PCINET_TTY_RX_BUDGET;
	bool empty;
	size_t got;
	int len;

again:
	while (READ_ONCE(pt->rx_open) && !READ_ONCE(pt->throttled)) {
		if (pt->rx_off < pt->rx_len) {
			/* Takes what the flip buffers can hold. */
			got = tty_insert_flip_string(&pt->port,
						     pt->rx_buf + pt->rx_off,
						     pt->rx_len - pt->rx_off);
			if (got) {
				pt->rx_off += got;
				tty_flip_buffer_push(&pt->port);
			}
			if (pt->rx_off < pt->rx_len) {
				/*
				 * The flip buffers are at their memory limit
				 * and no throttle came: the rest waits (the
				 * peer blocks); look again shortly.
				 */
				pcinet_tty_give_back(pt);
				queue_delayed_work(system_highpri_wq,
						   &pt->rx_work,
						   PCINET_TTY_RX_RETRY);
				return;
			}
			continue;
		}
		if (!budget) {
			pcinet_tty_give_back(pt);
			pcinet_tty_rx_schedule(pt);
			return;
		}
		len = pcinet_tty_rx_rec(pt, &empty);
		if (len < 0)
			return;
		if (empty)
			break;
		budget -= min_t(u32, budget, max(len, 1));
		/* Give room back as we go: the writer may wait for it. */
		if (pcinet_rx_give_back_due(rx))
			pcinet_tty_give_back(pt);
	}
	pcinet_tty_give_back(pt);

	/*
	 * Closed or throttled: do not re-arm.  Our event index stays behind,
	 * the peer rings no more, and activate or unthrottle reschedules us.
	 *
	 * Otherwise re-arm before going idle.  pcinet_rx_arm() publishes our
	 * consumer index as the event index and re-reads the producer index
	 * behind a full barrier (F); the peer publishes its producer index
	 * and reads our event index behind a full barrier (E) before it
	 * decides to ring.  So bytes published while we went idle are either
	 * seen by the re-read (we drain again) or the peer sees the event
	 * index and rings: no wakeup is lost.  A throttle or close that races
	 * with this costs at most one more doorbell.
	 */
	if (!READ_ONCE(pt->rx_open) || READ_ONCE(pt->throttled))
		return;
	if (pcinet_rx_arm(rx))
		goto again;
}

static void pcinet_tty_rx_work(struct work_struct *work)
{
	struct pcinet_tty *pt = container_of(to_delayed_work(work),
					     struct pcinet_tty, rx_work);
	const char *fault = NULL;
	bool wake = false, refresh;
	unsigned long flags;
	int free;

	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	if (!pt->running) {
		/* Stopped: the rings are not ours (see pcinet_tty_stop()). */
		raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
		return;
	}
	/* Soft state: our producer index and doorbell request, again. */
	refresh = pt->refresh;
	pt->refresh = false;
	if (refresh) {
		pcinet_tx_refresh(pt->tx);
		/* G: pairs with H in the peer's pcinet_rx_publish() */
		if (pt->tx_waiting && pcinet_tx_wait_space(pt->tx) < 0)
			pt->tx_fault = true;
	}
	if (pt->tx_fault) {
		fault = "tx consumer index";
	} else if (pt->tx_waiting) {
		/* Writers may sleep for space (pcinet_tty_tx_room()). */
		free = pcinet_tx_free(pt->tx);
		if (free < 0) {
			fault = "tx consumer index";
		} else if ((u32)free >= pcinet_tty_tx_wake(pt)) {
			pcinet_tx_space_ok(pt->tx);
			pt->tx_waiting = false;
			wake = true;
		}
	}
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);

	if (fault) {
		pcinet_chan_fault(pt->chan, fault);
		return;
	}
	if (wake)
		tty_port_tty_wakeup(&pt->port);
	pcinet_tty_rx(pt);
	/* Only if everything consumed is published (no fault stopped us). */
	if (refresh)
		pcinet_rx_refresh(pt->rx);
}

/* ----- link callbacks ----- */

/* Carrier follows the link and the peer's DTR; the link serialises us. */
static void pcinet_tty_update_carrier(struct pcinet_tty *pt)
{
	bool carrier = pcinet_chan_peer_open(pt->chan);

	if (carrier == pt->carrier)
		return;
	/* Read locklessly by pcinet_tty_chars_in_buffer() */
	WRITE_ONCE(pt->carrier, carrier);
	if (carrier) {
		wake_up_interruptible(&pt->port.open_wait);
	} else {
		tty_port_tty_hangup(&pt->port, true);
		/* tcdrain() has no peer to wait for any more. */
		tty_port_tty_wakeup(&pt->port);
	}
}

static void pcinet_tty_kick(void *priv)
{
	struct pcinet_tty *pt = priv;

	pcinet_tty_rx_schedule(pt);
}

/*
 * The rings are about to be reset.  Once @running is false under tx_lock
 * neither write() nor the console touches the tx ring, and a work run that
 * starts later returns at once; cancel_delayed_work_sync() waits for the
 * one that may be draining the rx ring now.
 */
static void pcinet_tty_stop(void *priv)
{
	struct pcinet_tty *pt = priv;
	unsigned long flags;

	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	pt->running = false;
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
	cancel_delayed_work_sync(&pt->rx_work);

	pcinet_tty_update_carrier(pt);
	/* Writers waiting for space would wait for a peer that is gone. */
	tty_port_tty_wakeup(&pt->port);
}

static void pcinet_tty_start(void *priv)
{
	struct pcinet_tty *pt = priv;
	unsigned long flags;

	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	pt->tx_waiting = false;
	pt->tx_fault = false;
	pt->running = true;
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);

	pcinet_tty_update_carrier(pt);
	/* The peer may have written before we listened. */
	pcinet_tty_rx_schedule(pt);
	tty_port_tty_wakeup(&pt->port);
}

static void pcinet_tty_peer_changed(void *priv)
{
	pcinet_tty_update_carrier(priv);
}

/*
 * The link ticked: run the rx work as if the peer had rung, so a lost
 * doorbell costs a tick (a writer waiting for space, bytes not drained),
 * and have it write our ring words again.
 */
static void pcinet_tty_tick(void *priv)
{
	struct pcinet_tty *pt = priv;
	unsigned long flags;

	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	pt->refresh = true;
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
	pcinet_tty_rx_schedule(pt);
}

static const struct pcinet_chan_ops pcinet_tty_chan_ops = {
	.kick = pcinet_tty_kick,
	.stop = pcinet_tty_stop,
	.start = pcinet_tty_start,
	.peer_changed = pcinet_tty_peer_changed,
	.tick = pcinet_tty_tick,
};

/* ----- tty_port operations ----- */

static bool pcinet_tty_carrier_raised(struct tty_port *port)
{
	struct pcinet_tty *pt = container_of(port, struct pcinet_tty, port);
	bool carrier;

	spin_lock(&pt->lock);
	carrier = pt->chan && pcinet_chan_peer_open(pt->chan);
	spin_unlock(&pt->lock);
	return carrier;
}

/* Our DTR is the channel-open bit the peer sees as its carrier. */
static void pcinet_tty_dtr_rts(struct tty_port *port, bool active)
{
	struct pcinet_tty *pt = container_of(port, struct pcinet_tty, port);

	spin_lock(&pt->lock);
	if (pt->chan)
		pcinet_chan_set_open(pt->chan, active);
	spin_unlock(&pt->lock);
}

static int pcinet_tty_activate(struct tty_port *port, struct tty_struct *tty)
{
	struct pcinet_tty *pt = container_of(port, struct pcinet_tty, port);

	spin_lock(&pt->lock);
	if (!pt->chan) {
		spin_unlock(&pt->lock);
		return -ENODEV;
	}
	pcinet_chan_set_open(pt->chan, true);
	spin_unlock(&pt->lock);

	WRITE_ONCE(pt->throttled, false);
	WRITE_ONCE(pt->rx_open, true);
	/* Whatever the peer wrote while we were closed. */
	pcinet_tty_rx_schedule(pt);
	return 0;
}

static void pcinet_tty_shutdown(struct tty_port *port)
{
	struct pcinet_tty *pt = container_of(port, struct pcinet_tty, port);

	/* DTR was dropped before, if HUPCL says so; the data waits. */
	WRITE_ONCE(pt->rx_open, false);
}

static void pcinet_tty_destruct(struct tty_port *port)
{
	struct pcinet_tty *pt = container_of(port, struct pcinet_tty, port);

	cancel_delayed_work_sync(&pt->rx_work);
	kfree(pt->rx_buf);
	kfree(pt);
}

/* 6.1 (pcinet_compat.h) */
DEFINE_PCINET_COMPAT_TTY(pcinet_tty_carrier_raised, pcinet_tty_dtr_rts,
			 pcinet_tty_write)

static const struct tty_port_operations pcinet_tty_port_ops = {
	.carrier_raised = pcinet_compat_carrier_raised(pcinet_tty_carrier_raised),
	.dtr_rts = pcinet_compat_dtr_rts(pcinet_tty_dtr_rts),
	.activate = pcinet_tty_activate,
	.shutdown = pcinet_tty_shutdown,
	.destruct = pcinet_tty_destruct,
};

/* ----- tty operations ----- */

static int pcinet_tty_install(struct tty_driver *driver, struct tty_struct *tty)
{
	struct tty_port *port = NULL;
	struct pcinet_tty *pt;
	int err;

	rcu_read_lock();
	pt = rcu_dereference(pcinet_tty_table[tty->index]);
	if (pt)
		port = tty_port_get(&pt->port);
	rcu_read_unlock();
	if (!port)
		return -ENODEV;

	tty->driver_data = pt;
	err = tty_port_install(port, driver, tty);
	if (err)
		tty_port_put(port);
	return err;
}

/* The tty is freed: drop the reference install took. */
static void pcinet_tty_cleanup(struct tty_struct *tty)
{
	tty_port_put(tty->port);
}

static int pcinet_tty_open(struct tty_struct *tty, struct file *filp)
{
	return tty_port_open(tty->port, tty, filp);
}

static void pcinet_tty_close(struct tty_struct *tty, struct file *filp)
{
	tty_port_close(tty->port, tty, filp);
}

static void pcinet_tty_hangup(struct tty_struct *tty)
{
	tty_port_hangup(tty->port);
}

static void pcinet_tty_throttle(struct tty_struct *tty)
{
	struct pcinet_tty *pt = tty->driver_data;

	WRITE_ONCE(pt->throttled, true);
}

static void pcinet_tty_unthrottle(struct tty_struct *tty)
{
	struct pcinet_tty *pt = tty->driver_data;

	WRITE_ONCE(pt->throttled, false);
	pcinet_tty_rx_schedule(pt);
}

/*
 * Modem lines for TIOCMGET, null-modem style: DTR and RTS are ours (up
 * while the port is open and DTR was not dropped), CD, DSR and CTS are
 * the peer's DTR seen through the link (carrier).
 */
static int pcinet_tty_tiocmget(struct tty_struct *tty)
{
	struct pcinet_tty *pt = tty->driver_data;
	int lines = 0;

	spin_lock(&pt->lock);
	if (pt->chan) {
		if (pcinet_chan_own_open(pt->chan))
			lines |= TIOCM_DTR | TIOCM_RTS;
		if (pcinet_chan_peer_open(pt->chan))
			lines |= TIOCM_CAR | TIOCM_DSR | TIOCM_CTS;
	}
	spin_unlock(&pt->lock);
	return lines;
}

/*
 * TIOCGICOUNT: rx and tx count payload bytes; a record dropped because it
 * changed in the window counts as a frame error.
 */
static int pcinet_tty_get_icount(struct tty_struct *tty,
				 struct serial_icounter_struct *icount)
{
	struct pcinet_tty *pt = tty->driver_data;
	unsigned long flags;

	memset(icount, 0, sizeof(*icount));
	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	icount->tx = pt->icount.tx;
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
	icount->rx = READ_ONCE(pt->icount.rx);
	icount->frame = READ_ONCE(pt->icount.frame);
	return 0;
}

static const struct tty_operations pcinet_tty_ops = {
	.install = pcinet_tty_install,
	.cleanup = pcinet_tty_cleanup,
	.open = pcinet_tty_open,
	.close = pcinet_tty_close,
	.hangup = pcinet_tty_hangup,
	.write = pcinet_compat_write(pcinet_tty_write),
	.write_room = pcinet_tty_write_room,
	.chars_in_buffer = pcinet_tty_chars_in_buffer,
	.tiocmget = pcinet_tty_tiocmget,
	.get_icount = pcinet_tty_get_icount,
	.throttle = pcinet_tty_throttle,
	.unthrottle = pcinet_tty_unthrottle,
};

/* ----- console ----- */

static bool pcinet_console_force;
module_param_named(console, pcinet_console_force, bool, 0444);
MODULE_PARM_DESC(console,
		 "Enable the ttyPCI console without console=ttyPCI<n> (default 0)");

static unsigned int pcinet_con_index(const struct console *co)
{
	return co->index > 0 ? co->index : 0;
}

/*
 * Copy console text into the tx ring as records, "\n" as "\r\n" as serial
 * consoles do; what does not fit is dropped.  PCINET_TTY_CON_RESERVE bytes
 * are left alone: write_room() may have promised them.  Caller holds
 * tx_lock and saw @running.
 */
static void pcinet_con_put(struct pcinet_tty *pt, const char *s,
			   unsigned int count)
{
	u32 n, max;
	int free;

	while (count) {
		free = pcinet_tx_free(pt->tx);
		if (free <= PCINET_TTY_CON_RESERVE)
			return;	/* full, or broken: the tty path reports that */
		max = min_t(u32, pcinet_tty_rec_room(free -
						     PCINET_TTY_CON_RESERVE),
			    sizeof(pt->con_buf));
		if (max < 2)
			return;
		for (n = 0; count && n < max; count--) {
			if (*s == '\n') {
				if (n + 2 > max)
					break;
				pt->con_buf[n++] = '\r';
			}
			pt->con_buf[n++] = *s++;
		}
		pcinet_tty_put_rec(pt, pt->con_buf, n);
	}
}

/*
 * Any context, never sleeps.  The tx lock is only tried: its holder may
 * be this CPU (a message printed from under it), so after a short wait
 * the output is dropped rather than deadlock.
 */
static void pcinet_con_write(struct console *co, const char *s,
			     unsigned int count)
{
	unsigned int idx = pcinet_con_index(co);
	unsigned int waited = 0;
	struct pcinet_tty *pt;
	unsigned long flags;

	if (idx >= PCINET_TTY_MINORS)
		return;
	rcu_read_lock();
	pt = rcu_dereference(pcinet_tty_table[idx]);
	if (!pt)
		goto out;
	while (!raw_spin_trylock_irqsave(&pt->tx_lock, flags)) {
		if (++waited > PCINET_CON_SPIN_US)
			goto out;
		udelay(1);
	}
	/* The link outlives this: destroy waits for RCU readers. */
	if (pt->running && pcinet_chan_peer_open(pt->chan)) {
		pcinet_con_put(pt, s, count);
		pcinet_tty_tx_kick(pt);
	}
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
out:
	rcu_read_unlock();
}

static struct tty_driver *pcinet_con_device(struct console *co, int *index)
{
	*index = pcinet_con_index(co);
	return pcinet_tty_driver;
}

/*
 * Registered at module load and enabled by printk when the kernel command
 * line names it: console=ttyPCI0 is kept and matched when a module
 * registers later.  The module parameter console=1 enables it for ttyPCI0
 * in any case: "modprobe pcinet console=1", "insmod pcinet.ko console=1",
 * or pcinet.console=1 on the kernel command line (which modprobe, not
 * insmod, passes on).  Messages printed before it is enabled and the link
 * is up are not replayed.
 */
static struct console pcinet_console = {
	.name = PCINET_TTY_NAME,
	.write = pcinet_con_write,
	.device = pcinet_con_device,
	.index = -1,
};

/* ----- creation ----- */

/* No new opens and no console from now on; then forget the link. */
static void pcinet_tty_unpublish(struct pcinet_tty *pt)
{
	RCU_INIT_POINTER(pcinet_tty_table[pt->index], NULL);
	synchronize_rcu();
	spin_lock(&pt->lock);
	pt->chan = NULL;
	spin_unlock(&pt->lock);
}

/**
 * pcinet_tty_create - create /dev/ttyPCI<n> for a link
 * @ch: the link's tty channel; n is the link's index
 *
 * Return: the front-end; NULL if the link's index has no minor (the link
 * then works without a tty); or an ERR_PTR().
 */
static void *pcinet_tty_create(struct pcinet_channel *ch)
{
	int index = pcinet_chan_index(ch);
	struct pcinet_tty *pt;
	struct device *dev;
	int err;

	if (index >= PCINET_TTY_MINORS) {
		dev_warn(pcinet_chan_dev(ch),
			 "link %d: no %s minor left, no tty\n", index,
			 PCINET_TTY_NAME);
		return NULL;
	}
	pt = kzalloc(sizeof(*pt), GFP_KERNEL);
	if (!pt)
		return ERR_PTR(-ENOMEM);
	pt->rx_buf = kmalloc(PCINET_TTY_REC_MAX, GFP_KERNEL);
	if (!pt->rx_buf) {
		kfree(pt);
		return ERR_PTR(-ENOMEM);
	}
	tty_port_init(&pt->port);
	pt->port.ops = &pcinet_tty_port_ops;
	pt->chan = ch;
	pt->index = index;
	pt->tx = pcinet_chan_tx(ch);
	pt->rx = pcinet_chan_rx(ch);
	spin_lock_init(&pt->lock);
	raw_spin_lock_init(&pt->tx_lock);
	INIT_DELAYED_WORK(&pt->rx_work, pcinet_tty_rx_work);

	rcu_assign_pointer(pcinet_tty_table[index], pt);
	dev = tty_port_register_device(&pt->port, pcinet_tty_driver, index,
				       pcinet_chan_dev(ch));
	if (IS_ERR(dev)) {
		err = PTR_ERR(dev);
		goto abort_with_port;
	}
	pcinet_chan_attach(ch, &pcinet_tty_chan_ops, pt);
	return pt;

abort_with_port:
	pcinet_tty_unpublish(pt);
	tty_port_put(&pt->port);
	return ERR_PTR(err);
}

/**
 * pcinet_tty_destroy - remove /dev/ttyPCI<n>
 * @fe: the front-end, as pcinet_tty_create() returned it; not NULL
 *
 * An open tty is hung up and keeps the front-end, detached from the link,
 * until it is closed.
 */
static void pcinet_tty_destroy(void *fe)
{
	struct pcinet_tty *pt = fe;
	unsigned long flags;

	pcinet_chan_detach(pt->chan);
	raw_spin_lock_irqsave(&pt->tx_lock, flags);
	pt->running = false;
	raw_spin_unlock_irqrestore(&pt->tx_lock, flags);
	cancel_delayed_work_sync(&pt->rx_work);

	pcinet_tty_unpublish(pt);
	tty_port_tty_hangup(&pt->port, false);
	tty_port_unregister_device(&pt->port, pcinet_tty_driver, pt->index);
	tty_port_put(&pt->port);
}

/* ----- module ----- */

/**
 * pcinet_tty_init - register the ttyPCI driver and console
 *
 * Call at module load, before any link is created.
 *
 * Return: 0 or a negative errno.
 */
static int __init pcinet_tty_init(void)
{
	struct tty_driver *drv;
	int err;

	drv = tty_alloc_driver(PCINET_TTY_MINORS,
			       TTY_DRIVER_REAL_RAW | TTY_DRIVER_DYNAMIC_DEV);
	if (IS_ERR(drv))
		return PTR_ERR(drv);
	drv->driver_name = "pcinet_tty";
	drv->name = PCINET_TTY_NAME;
	drv->major = 0;		/* dynamic */
	drv->minor_start = 0;
	drv->type = TTY_DRIVER_TYPE_SERIAL;
	drv->subtype = SERIAL_TYPE_NORMAL;
	drv->init_termios = tty_std_termios;
	/* CLOCAL, as serial drivers do: carrier matters once cleared. */
	drv->init_termios.c_cflag = B115200 | CS8 | CREAD | HUPCL | CLOCAL;
	drv->init_termios.c_ispeed = 115200;
	drv->init_termios.c_ospeed = 115200;
	tty_set_operations(drv, &pcinet_tty_ops);
	err = tty_register_driver(drv);
	if (err) {
		tty_driver_kref_put(drv);
		return err;
	}
	pcinet_tty_driver = drv;

	if (pcinet_console_force) {
		pcinet_console.flags |= CON_ENABLED;
		pcinet_console.index = 0;
	}
	register_console(&pcinet_console);
	return 0;
}

/**
 * pcinet_tty_exit - unregister the ttyPCI console and driver
 *
 * Call at module unload, after every link is gone.
 */
static void pcinet_tty_exit(void)
{
	/* printk enabled it if and only if it registered it */
	if (pcinet_console.flags & CON_ENABLED)
		unregister_console(&pcinet_console);
	tty_unregister_driver(pcinet_tty_driver);
	tty_driver_kref_put(pcinet_tty_driver);
}

/*
 * The tty front-end, listed in the core's table.  __refconst: @init is
 * __init, and only the core's module init calls it.
 */
const struct pcinet_frontend pcinet_tty_frontend __refconst = {
	.name = "tty",
	.chan = PCINET_CHAN_TTY,
	.init = pcinet_tty_init,
	.exit = pcinet_tty_exit,
	.create = pcinet_tty_create,
	.destroy = pcinet_tty_destroy,
};
