// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet net front-end: an Ethernet interface on a pcinet link.
 *
 * Each packet is one record on the link's net ring: a struct pcinet_rec
 * carrying the length and a virtio_net_hdr (checksum and GSO metadata),
 * then the frame.  The sender copies the skb into the ring, the receiver
 * copies the record into a right-sized skb: one copy on each side, no
 * checksum, TSO packets of up to 64 KiB cross unsegmented.
 *
 * The front-end never touches hardware: it sees rings, kicks and link
 * state through its channel, pcinet_chan_*().
 *
 * Locking: the datapath is started and stopped under RTNL (ndo_open,
 * ndo_stop, and the link's start/stop callbacks, which take RTNL); the tx
 * ring view is owned by whoever holds the tx queue lock (xmit, and NAPI
 * while it reaps completions); the rx ring view belongs to NAPI.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitops.h>
#include <linux/bottom_half.h>
#include <linux/crc32.h>
#include <linux/etherdevice.h>
#include <linux/if_vlan.h>
#include <linux/tcp.h>
#include <linux/ethtool.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <linux/u64_stats_sync.h>
#include <linux/virtio_net.h>

#include "pcinet_chan.h"

#define PCINET_NAPI_WEIGHT	64
/* Stop the queue while a largest record might not fit, wake with room. */
#define PCINET_TX_STOP		(2 * pcinet_rec_size(PCINET_NET_MAX_LEN))
#define PCINET_TX_WAKE		(4 * pcinet_rec_size(PCINET_NET_MAX_LEN))
/* Receives up to this size get a linear skb; larger ones page frags. */
#define PCINET_RX_LINEAR	2048
#define PCINET_RX_HEAD		256

static_assert(sizeof(struct pcinet_vnet_hdr) == sizeof(struct virtio_net_hdr));

struct pcinet_net_tx_stats {
	struct u64_stats_sync syncp;
	u64_stats_t packets;
	u64_stats_t bytes;
	u64_stats_t doorbells;
	u64_stats_t stops;
	u64_stats_t wakes;
	u64_stats_t dropped;
};

struct pcinet_net_rx_stats {
	struct u64_stats_sync syncp;
	u64_stats_t packets;
	u64_stats_t bytes;
	u64_stats_t polls;
	u64_stats_t space_doorbells;
	u64_stats_t dropped;
	u64_stats_t length_errors;
	u64_stats_t crc_errors;
};

struct pcinet_irq_stats {
	struct u64_stats_sync syncp;
	u64_stats_t interrupts;
};

/**
 * struct pcinet_net - the net front-end of one link
 * @dev: the interface
 * @chan: our channel of the link underneath
 * @tx: ring we send on; under the tx queue lock
 * @rx: ring we receive from; NAPI only
 * @napi: receive and tx completion
 * @started: datapath running; written under RTNL and the tx lock
 * @tx_done: consumer index up to which BQL was told; tx lock
 * @flags: PCINET_NET_REFRESH: the link ticked, NAPI refreshes our ring
 *	words; PCINET_NET_NO_CRC: the "integrity" private flag is off
 * @crc_bad: CRC errors in a row; NAPI
 * @tx_stats: written under the tx lock
 * @rx_stats: written by NAPI
 * @irq_stats: written by the doorbell handler
 */
struct pcinet_net {
	struct net_device *dev;
	struct pcinet_channel *chan;
	struct pcinet_tx *tx;
	struct pcinet_rx *rx;
	struct napi_struct napi;
	bool started;
	u32 tx_done;
	unsigned long flags;
	unsigned int crc_bad;
	struct pcinet_net_tx_stats tx_stats;
	struct pcinet_net_rx_stats rx_stats;
	struct pcinet_irq_stats irq_stats;
};

#define PCINET_NET_REFRESH	0
#define PCINET_NET_NO_CRC	1
/* This many bad CRCs in a row is a broken peer, not a scribble: reset. */
#define PCINET_CRC_BAD_RESET	8

/* ----- integrity: CRC-32C of each record (struct pcinet_rec) ----- */

static __wsum pcinet_crc_update(const void *p, int len, __wsum crc)
{
	return (__force __wsum)__crc32c_le((__force u32)crc, p, len);
}

static __wsum pcinet_crc_combine(__wsum crc1, __wsum crc2, int off, int len)
{
	return (__force __wsum)__crc32c_le_combine((__force u32)crc1,
						   (__force u32)crc2, len);
}

static const struct skb_checksum_ops pcinet_crc_ops = {
	.update = pcinet_crc_update,
	.combine = pcinet_crc_combine,
};

/* CRC of a record header (up to @crc) and of @skb, our private copy. */
static u32 pcinet_rec_crc(const struct pcinet_rec *rec, struct sk_buff *skb)
{
	u32 crc = __crc32c_le(~0U, (const u8 *)rec,
			      offsetof(struct pcinet_rec, crc));

	return ~(__force u32)__skb_checksum(skb, 0, skb->len,
					    (__force __wsum)crc,
					    &pcinet_crc_ops);
}

/* ----- datapath: transmit ----- */

/* The end of a batch: ring the peer if it sleeps on what we published. */
static void pcinet_net_tx_kick(struct pcinet_net *np)
{
	if (pcinet_tx_end_batch(np->tx)) {
		pcinet_chan_kick(np->chan);
		u64_stats_update_begin(&np->tx_stats.syncp);
		u64_stats_inc(&np->tx_stats.doorbells);
		u64_stats_update_end(&np->tx_stats.syncp);
	}
}

/*
 * After a record went out: stop the queue while a largest record might
 * not fit.  Stopped, by us or by BQL: ask the peer for a doorbell when it
 * consumes (G: pairs with H in its pcinet_rx_publish()); NAPI then
 * reaps and wakes.  If the peer consumed before the request became
 * visible, the re-read in pcinet_tx_wait_space() sees it: reap now
 * instead of waiting.
 */
static void pcinet_net_tx_maybe_stop(struct pcinet_net *np,
				     struct netdev_queue *txq)
{
	int free;

	if (pcinet_tx_left(np->tx) < PCINET_TX_STOP) {
		netif_tx_stop_queue(txq);
		u64_stats_update_begin(&np->tx_stats.syncp);
		u64_stats_inc(&np->tx_stats.stops);
		u64_stats_update_end(&np->tx_stats.syncp);
	}
	if (!netif_xmit_stopped(txq))
		return;
	free = pcinet_tx_wait_space(np->tx);
	if (free < 0 || np->tx->cons != np->tx_done)
		napi_schedule(&np->napi);
}

static netdev_tx_t pcinet_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct netdev_queue *txq = netdev_get_tx_queue(dev, 0);
	struct pcinet_net *np = netdev_priv(dev);
	struct pcinet_tx *tx = np->tx;
	struct virtio_net_hdr vh;
	struct pcinet_span sp;
	struct pcinet_rec rec;
	u32 len = skb->len;
	int need;

	if (unlikely(!np->started || len > PCINET_NET_MAX_LEN ||
		     virtio_net_hdr_from_skb(skb, &vh, true, false, 0)))
		goto drop;
	/* Like a cable, the link does not corrupt: checked data stays so. */
	if (skb->ip_summed == CHECKSUM_NONE)
		vh.flags |= VIRTIO_NET_HDR_F_DATA_VALID;

	need = pcinet_tx_reserve(tx, len, &sp);
	if (unlikely(need < 0)) {
		pcinet_chan_fault(np->chan, "tx consumer index");
		goto drop;
	}
	if (unlikely(!need)) {
		/* Unexpected: the queue stops while a record may not fit. */
		netif_tx_stop_queue(txq);
		/* G: pairs with H in the peer's pcinet_rx_publish() */
		pcinet_tx_wait_space(tx);
		napi_schedule(&np->napi);
		goto drop;
	}

	rec.len = cpu_to_le32(len);
	memcpy(&rec.vnet, &vh, sizeof(rec.vnet));
	rec.flags = 0;
	rec.crc = 0;
	if (!test_bit(PCINET_NET_NO_CRC, &np->flags)) {
		/* Over the skb, not the window: a third party may write there */
		rec.flags = cpu_to_le16(PCINET_REC_F_CRC);
		rec.crc = cpu_to_le32(pcinet_rec_crc(&rec, skb));
	}
	pcinet_tx_write(tx, 0, &rec, sizeof(rec));
	if (skb_copy_bits(skb, 0, sp.p[0], sp.len[0]) ||
	    (sp.len[1] && skb_copy_bits(skb, sp.len[0], sp.p[1], sp.len[1])))
		goto drop;

	/* BQL counts ring bytes; account before the peer can consume them. */
	netdev_tx_sent_queue(txq, need);
	/* A: pairs with B in the peer's pcinet_rx_avail() */
	pcinet_tx_commit(tx, need);

	u64_stats_update_begin(&np->tx_stats.syncp);
	u64_stats_inc(&np->tx_stats.packets);
	u64_stats_add(&np->tx_stats.bytes, len);
	u64_stats_update_end(&np->tx_stats.syncp);
	dev_consume_skb_any(skb);

	pcinet_net_tx_maybe_stop(np, txq);
	if (!netdev_xmit_more() || netif_xmit_stopped(txq))
		pcinet_net_tx_kick(np);
	return NETDEV_TX_OK;

drop:
	u64_stats_update_begin(&np->tx_stats.syncp);
	u64_stats_inc(&np->tx_stats.dropped);
	u64_stats_update_end(&np->tx_stats.syncp);
	dev_kfree_skb_any(skb);
	return NETDEV_TX_OK;
}

/*
 * Reap what the peer consumed: BQL completion and queue wake.  NAPI.
 * With @refresh (a link tick) also write our producer index again and,
 * if the queue is stopped, our request for a doorbell (soft state).
 */
static void pcinet_net_tx_reap(struct pcinet_net *np, bool refresh)
{
	struct netdev_queue *txq = netdev_get_tx_queue(np->dev, 0);
	struct pcinet_tx *tx = np->tx;
	u32 done;
	int free;

	__netif_tx_lock(txq, smp_processor_id());
	free = pcinet_tx_free(tx);
	if (unlikely(free < 0)) {
		__netif_tx_unlock(txq);
		pcinet_chan_fault(np->chan, "tx consumer index");
		return;
	}
	/*
	 * BQL was told of what we sent since the datapath last started
	 * (tx_done was the producer index then); records the peer consumes
	 * from before that were never queued to BQL and complete nothing.
	 */
	done = tx->cons - np->tx_done;
	if ((s32)done > 0) {
		np->tx_done = tx->cons;
		netdev_tx_completed_queue(txq, 0, done);
	}
	if (refresh)
		pcinet_tx_refresh(tx);
	if (netif_tx_queue_stopped(txq) && free >= PCINET_TX_WAKE) {
		netif_tx_wake_queue(txq);
		u64_stats_update_begin(&np->tx_stats.syncp);
		u64_stats_inc(&np->tx_stats.wakes);
		u64_stats_update_end(&np->tx_stats.syncp);
	}
	/*
	 * Withdraw our request for a doorbell, or (soft state) make it again:
	 * G, pairs with H in the peer's pcinet_rx_publish().
	 */
	if (!netif_xmit_stopped(txq))
		pcinet_tx_space_ok(tx);
	else if (refresh && pcinet_tx_wait_space(tx) >= PCINET_TX_WAKE)
		napi_schedule(&np->napi);	/* freed meanwhile: reap again */
	__netif_tx_unlock(txq);
}

/* ----- datapath: receive ----- */

static struct sk_buff *pcinet_net_rx_alloc(struct pcinet_net *np, u32 len)
{
	struct sk_buff *skb;
	u32 head;
	int err;

	if (len <= PCINET_RX_LINEAR) {
		skb = napi_alloc_skb(&np->napi, len);
		if (skb)
			skb_put(skb, len);
		return skb;
	}
	head = PCINET_RX_HEAD;
	skb = alloc_skb_with_frags(head + NET_IP_ALIGN, len - head,
				   PAGE_ALLOC_COSTLY_ORDER, &err,
				   GFP_ATOMIC | __GFP_NOWARN);
	if (!skb)
		return NULL;
	skb_reserve(skb, NET_IP_ALIGN);
	skb_put(skb, head);
	skb->data_len = len - head;
	skb->len += len - head;
	return skb;
}

/*
 * Checks newer kernels' virtio_net_hdr_to_skb() makes and 6.1's does not:
 * a GSO packet must ask for its checksum, with the checksum field where
 * its transport header has it, and carry a segment size.  We offer TSO
 * only, so any other GSO type is bad metadata.
 */
static bool pcinet_net_rx_offload_ok(const struct virtio_net_hdr *vh)
{
	u16 off = __virtio16_to_cpu(true, vh->csum_offset);

	switch (vh->gso_type & ~VIRTIO_NET_HDR_GSO_ECN) {
	case VIRTIO_NET_HDR_GSO_NONE:
		return true;
	case VIRTIO_NET_HDR_GSO_TCPV4:
	case VIRTIO_NET_HDR_GSO_TCPV6:
		if (off != offsetof(struct tcphdr, check))
			return false;
		break;
	default:
		return false;
	}
	return (vh->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) &&
	       __virtio16_to_cpu(true, vh->gso_size);
}

static void pcinet_net_rx_crc_error(struct pcinet_net *np)
{
	u64_stats_update_begin(&np->rx_stats.syncp);
	u64_stats_inc(&np->rx_stats.crc_errors);
	u64_stats_inc(&np->rx_stats.dropped);
	u64_stats_update_end(&np->rx_stats.syncp);
	net_warn_ratelimited("%s: dropped packet changed in the window (CRC)\n",
			     np->dev->name);
	if (++np->crc_bad >= PCINET_CRC_BAD_RESET) {
		np->crc_bad = 0;
		pcinet_chan_fault(np->chan, "record CRC");
	}
}

static void pcinet_net_rx_length_error(struct pcinet_net *np)
{
	u64_stats_update_begin(&np->rx_stats.syncp);
	u64_stats_inc(&np->rx_stats.length_errors);
	u64_stats_update_end(&np->rx_stats.syncp);
}

static void pcinet_net_rx_one(struct pcinet_net *np, const struct pcinet_rec *rec)
{
	u32 len = le32_to_cpu(rec->len), max = READ_ONCE(np->dev->mtu) + VLAN_ETH_HLEN;
	struct pcinet_rx *rx = np->rx;
	struct virtio_net_hdr vh;
	struct pcinet_span sp;
	struct sk_buff *skb;

	/* Before the copy where we can; a GSO record is checked below. */
	if (unlikely(len < ETH_HLEN || (!rec->vnet.gso_type && len > max))) {
		pcinet_net_rx_length_error(np);
		return;
	}
	skb = pcinet_net_rx_alloc(np, len);
	if (unlikely(!skb))
		goto drop;
	/* The one copy: out of the window, before anything parses it. */
	pcinet_rx_span(rx, sizeof(*rec), len, &sp);
	skb_store_bits(skb, 0, sp.p[0], sp.len[0]);
	if (sp.len[1])
		skb_store_bits(skb, sp.len[0], sp.p[1], sp.len[1]);
	/*
	 * Checked on our copy: what the window says now no longer matters.
	 * Without the integrity flag a record must carry a CRC (a cleared
	 * F_CRC bit is a changed byte like any other).
	 */
	if (!test_bit(PCINET_NET_NO_CRC, &np->flags) ||
	    (rec->flags & cpu_to_le16(PCINET_REC_F_CRC))) {
		if (unlikely(!(rec->flags & cpu_to_le16(PCINET_REC_F_CRC)) ||
			     pcinet_rec_crc(rec, skb) != le32_to_cpu(rec->crc))) {
			dev_kfree_skb_any(skb);
			pcinet_net_rx_crc_error(np);
			return;
		}
		np->crc_bad = 0;
	}

	memcpy(&vh, &rec->vnet, sizeof(vh));
	/*
	 * DATA_VALID first: virtio_net_hdr_to_skb() turns a NEEDS_CSUM
	 * packet into CHECKSUM_PARTIAL, which must win (a forwarded packet
	 * still needs its checksum), as in virtio_net.
	 */
	if ((vh.flags & VIRTIO_NET_HDR_F_DATA_VALID) &&
	    (np->dev->features & NETIF_F_RXCSUM))
		skb->ip_summed = CHECKSUM_UNNECESSARY;
	if (unlikely(!pcinet_net_rx_offload_ok(&vh) ||
		     virtio_net_hdr_to_skb(skb, &vh, true))) {
		net_warn_ratelimited("%s: dropped packet with bad offload metadata\n",
				     np->dev->name);
		dev_kfree_skb_any(skb);
		goto drop;
	}
	/*
	 * A record that claims GSO with no more than one segment's payload is
	 * not made GSO by virtio_net_hdr_to_skb(): a frame like any other,
	 * held to the MTU (a hostile peer's way around the check above).
	 */
	if (unlikely(!skb_is_gso(skb) && len > max)) {
		dev_kfree_skb_any(skb);
		pcinet_net_rx_length_error(np);
		return;
	}
	skb->protocol = eth_type_trans(skb, np->dev);

	u64_stats_update_begin(&np->rx_stats.syncp);
	u64_stats_inc(&np->rx_stats.packets);
	u64_stats_add(&np->rx_stats.bytes, len);
	u64_stats_update_end(&np->rx_stats.syncp);
	napi_gro_receive(&np->napi, skb);
	return;
drop:
	u64_stats_update_begin(&np->rx_stats.syncp);
	u64_stats_inc(&np->rx_stats.dropped);
	u64_stats_update_end(&np->rx_stats.syncp);
}

/*
 * Give consumed space back (C); ring the peer if it waits for space (H:
 * pairs with G in its pcinet_tx_wait_space()).
 */
static void pcinet_net_rx_give_back(struct pcinet_net *np)
{
	if (pcinet_rx_give_back(np->rx)) {
		pcinet_chan_kick(np->chan);
		u64_stats_update_begin(&np->rx_stats.syncp);
		u64_stats_inc(&np->rx_stats.space_doorbells);
		u64_stats_update_end(&np->rx_stats.syncp);
	}
}

static int pcinet_poll(struct napi_struct *napi, int budget)
{
	struct pcinet_net *np = container_of(napi, struct pcinet_net, napi);
	struct pcinet_rx *rx = np->rx;
	struct pcinet_rec rec;
	bool refresh;
	int work = 0;
	int n;

	u64_stats_update_begin(&np->rx_stats.syncp);
	u64_stats_inc(&np->rx_stats.polls);
	u64_stats_update_end(&np->rx_stats.syncp);

	refresh = test_and_clear_bit(PCINET_NET_REFRESH, &np->flags);
	pcinet_net_tx_reap(np, refresh);

	while (work < budget) {
		n = pcinet_rx_peek_rec(rx, &rec, PCINET_NET_MAX_LEN);
		if (n == 0)
			break;
		if (unlikely(n < 0)) {
			/* The link resets the rings; stop here and wait. */
			pcinet_chan_fault(np->chan, "rx record");
			napi_complete_done(napi, work);
			return work;
		}
		pcinet_net_rx_one(np, &rec);
		pcinet_rx_consume(rx, n);
		work++;
		/* Give room back as we go: a batch may be most of the ring. */
		if (pcinet_rx_give_back_due(rx))
			pcinet_net_rx_give_back(np);
	}
	pcinet_net_rx_give_back(np);
	if (refresh)
		pcinet_rx_refresh(rx);

	/*
	 * Re-arm only when idle.  pcinet_rx_arm() publishes our consumer
	 * index as the event index and then re-reads the producer index
	 * behind a full barrier (F); the peer publishes its producer index
	 * and then reads our event index behind a full barrier (E).  So a
	 * record published while we went idle is either seen by the re-read
	 * (we poll again) or the peer sees the event index and rings: no
	 * wakeup is lost.  Completions are covered the same way by
	 * need_space (G/H): the peer rings after consuming while it is set.
	 */
	if (work < budget && napi_complete_done(napi, work) &&
	    pcinet_rx_arm(rx))
		napi_schedule(napi);
	return work;
}

/* ----- link callbacks and start/stop ----- */

static void pcinet_net_update_carrier(struct pcinet_net *np)
{
	if (np->started && pcinet_chan_peer_open(np->chan))
		netif_carrier_on(np->dev);
	else
		netif_carrier_off(np->dev);
}

static void pcinet_net_start(struct pcinet_net *np)
{
	struct netdev_queue *txq = netdev_get_tx_queue(np->dev, 0);

	ASSERT_RTNL();
	if (np->started || !netif_running(np->dev) ||
	    !pcinet_chan_link_up(np->chan))
		return;
	netdev_tx_reset_queue(txq);
	np->tx_done = np->tx->prod;
	napi_enable(&np->napi);
	__netif_tx_lock_bh(txq);
	np->started = true;
	__netif_tx_unlock_bh(txq);
	netif_tx_wake_all_queues(np->dev);
	pcinet_net_update_carrier(np);
	/*
	 * The peer may have sent before we listened.  Process context: with
	 * bottom halves off, so the poll runs when they come back on, not at
	 * the next interrupt.
	 */
	local_bh_disable();
	napi_schedule(&np->napi);
	local_bh_enable();
}

static void pcinet_net_stop(struct pcinet_net *np)
{
	struct netdev_queue *txq = netdev_get_tx_queue(np->dev, 0);

	ASSERT_RTNL();
	if (!np->started)
		return;
	netif_carrier_off(np->dev);
	__netif_tx_lock_bh(txq);
	np->started = false;
	__netif_tx_unlock_bh(txq);
	netif_tx_disable(np->dev);
	napi_disable(&np->napi);
}

static void pcinet_net_kick(void *priv)
{
	struct pcinet_net *np = priv;

	u64_stats_update_begin(&np->irq_stats.syncp);
	u64_stats_inc(&np->irq_stats.interrupts);
	u64_stats_update_end(&np->irq_stats.syncp);
	napi_schedule_irqoff(&np->napi);
}

/*
 * The link ticked: poll once, as if the peer had rung.  A lost doorbell
 * (an overwritten event index or need_space, a dropped interrupt) then
 * costs a tick, and the poll writes our ring words again.
 */
static void pcinet_net_tick(void *priv)
{
	struct pcinet_net *np = priv;

	set_bit(PCINET_NET_REFRESH, &np->flags);
	local_bh_disable();
	napi_schedule(&np->napi);
	local_bh_enable();
}

static void pcinet_net_link_stop(void *priv)
{
	struct pcinet_net *np = priv;

	rtnl_lock();
	pcinet_net_stop(np);
	rtnl_unlock();
}

static void pcinet_net_link_start(void *priv)
{
	struct pcinet_net *np = priv;

	rtnl_lock();
	pcinet_net_start(np);
	rtnl_unlock();
}

static void pcinet_net_peer_changed(void *priv)
{
	struct pcinet_net *np = priv;

	rtnl_lock();
	pcinet_net_update_carrier(np);
	rtnl_unlock();
}

static const struct pcinet_chan_ops pcinet_net_chan_ops = {
	.kick = pcinet_net_kick,
	.stop = pcinet_net_link_stop,
	.start = pcinet_net_link_start,
	.peer_changed = pcinet_net_peer_changed,
	.tick = pcinet_net_tick,
};

/* ----- net_device_ops ----- */

static int pcinet_open(struct net_device *dev)
{
	struct pcinet_net *np = netdev_priv(dev);

	netif_carrier_off(dev);
	pcinet_chan_set_open(np->chan, true);
	pcinet_net_start(np);
	return 0;
}

static int pcinet_stop(struct net_device *dev)
{
	struct pcinet_net *np = netdev_priv(dev);

	pcinet_chan_set_open(np->chan, false);
	pcinet_net_stop(np);
	return 0;
}

static void pcinet_get_stats64(struct net_device *dev,
			       struct rtnl_link_stats64 *s)
{
	struct pcinet_net *np = netdev_priv(dev);
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&np->tx_stats.syncp);
		s->tx_packets = u64_stats_read(&np->tx_stats.packets);
		s->tx_bytes = u64_stats_read(&np->tx_stats.bytes);
		s->tx_dropped = u64_stats_read(&np->tx_stats.dropped);
	} while (u64_stats_fetch_retry(&np->tx_stats.syncp, start));
	do {
		start = u64_stats_fetch_begin(&np->rx_stats.syncp);
		s->rx_packets = u64_stats_read(&np->rx_stats.packets);
		s->rx_bytes = u64_stats_read(&np->rx_stats.bytes);
		s->rx_dropped = u64_stats_read(&np->rx_stats.dropped);
		s->rx_length_errors =
			u64_stats_read(&np->rx_stats.length_errors);
		s->rx_crc_errors = u64_stats_read(&np->rx_stats.crc_errors);
	} while (u64_stats_fetch_retry(&np->rx_stats.syncp, start));
	s->rx_errors = s->rx_length_errors + s->rx_crc_errors;
}

/*
 * The port's name is the board at the other end, so a udev rule can name
 * the interface after it (ATTR{phys_port_name}): the peer's name, else
 * "slot<N>", else none.  The peer's name always fits (PCINET_NAME_MAX).
 */
static int pcinet_get_phys_port_name(struct net_device *dev, char *name,
				     size_t len)
{
	struct pcinet_net *np = netdev_priv(dev);
	struct pcinet_ident id;
	int n;

	pcinet_chan_peer_ident(np->chan, &id);
	if (id.name[0])
		n = snprintf(name, len, "%s", id.name);
	else if (id.slot)
		n = snprintf(name, len, "slot%u", id.slot);
	else
		return -EOPNOTSUPP;
	return (size_t)n < len ? 0 : -EINVAL;
}

static const struct net_device_ops pcinet_netdev_ops = {
	.ndo_open = pcinet_open,
	.ndo_stop = pcinet_stop,
	.ndo_start_xmit = pcinet_xmit,
	.ndo_get_stats64 = pcinet_get_stats64,
	.ndo_set_mac_address = eth_mac_addr,
	.ndo_validate_addr = eth_validate_addr,
	.ndo_get_phys_port_name = pcinet_get_phys_port_name,
};

/* ----- ethtool ----- */

enum pcinet_stat_group { PCINET_TX, PCINET_RX, PCINET_IRQ };

struct pcinet_stat_desc {
	char name[ETH_GSTRING_LEN];
	enum pcinet_stat_group group;
	size_t offset;
};

#define PCINET_STAT(n, g, s, f) { n, g, offsetof(struct s, f) }

static const struct pcinet_stat_desc pcinet_stats[] = {
	PCINET_STAT("tx_packets", PCINET_TX, pcinet_net_tx_stats, packets),
	PCINET_STAT("tx_bytes", PCINET_TX, pcinet_net_tx_stats, bytes),
	PCINET_STAT("tx_doorbells", PCINET_TX, pcinet_net_tx_stats, doorbells),
	PCINET_STAT("tx_queue_stops", PCINET_TX, pcinet_net_tx_stats, stops),
	PCINET_STAT("tx_queue_wakes", PCINET_TX, pcinet_net_tx_stats, wakes),
	PCINET_STAT("tx_dropped", PCINET_TX, pcinet_net_tx_stats, dropped),
	PCINET_STAT("rx_packets", PCINET_RX, pcinet_net_rx_stats, packets),
	PCINET_STAT("rx_bytes", PCINET_RX, pcinet_net_rx_stats, bytes),
	PCINET_STAT("rx_polls", PCINET_RX, pcinet_net_rx_stats, polls),
	PCINET_STAT("rx_space_doorbells", PCINET_RX, pcinet_net_rx_stats,
		    space_doorbells),
	PCINET_STAT("rx_dropped", PCINET_RX, pcinet_net_rx_stats, dropped),
	PCINET_STAT("rx_length_errors", PCINET_RX, pcinet_net_rx_stats,
		    length_errors),
	PCINET_STAT("rx_crc_errors", PCINET_RX, pcinet_net_rx_stats, crc_errors),
	PCINET_STAT("interrupts", PCINET_IRQ, pcinet_irq_stats, interrupts),
};

static void pcinet_get_drvinfo(struct net_device *dev,
			       struct ethtool_drvinfo *info)
{
	struct pcinet_net *np = netdev_priv(dev);

	strscpy(info->driver, KBUILD_MODNAME, sizeof(info->driver));
	strscpy(info->bus_info, dev_name(pcinet_chan_dev(np->chan)),
		sizeof(info->bus_info));
}

/* Private flags: "integrity", a CRC-32C per record, on by default. */
static const char pcinet_priv_flags[][ETH_GSTRING_LEN] = {
	"integrity",
};

#define PCINET_PRIV_INTEGRITY	BIT(0)

static u32 pcinet_get_priv_flags(struct net_device *dev)
{
	struct pcinet_net *np = netdev_priv(dev);

	return test_bit(PCINET_NET_NO_CRC, &np->flags) ?
	       0 : PCINET_PRIV_INTEGRITY;
}

static int pcinet_set_priv_flags(struct net_device *dev, u32 flags)
{
	struct pcinet_net *np = netdev_priv(dev);

	assign_bit(PCINET_NET_NO_CRC, &np->flags,
		   !(flags & PCINET_PRIV_INTEGRITY));
	return 0;
}

static int pcinet_get_sset_count(struct net_device *dev, int sset)
{
	switch (sset) {
	case ETH_SS_STATS:
		return ARRAY_SIZE(pcinet_stats);
	case ETH_SS_PRIV_FLAGS:
		return ARRAY_SIZE(pcinet_priv_flags);
	default:
		return -EOPNOTSUPP;
	}
}

static void pcinet_get_strings(struct net_device *dev, u32 sset, u8 *buf)
{
	size_t i;

	if (sset == ETH_SS_PRIV_FLAGS)
		memcpy(buf, pcinet_priv_flags, sizeof(pcinet_priv_flags));
	if (sset != ETH_SS_STATS)
		return;
	for (i = 0; i < ARRAY_SIZE(pcinet_stats); i++)
		memcpy(buf + i * ETH_GSTRING_LEN, pcinet_stats[i].name,
		       ETH_GSTRING_LEN);
}

static void pcinet_get_ethtool_stats(struct net_device *dev,
				     struct ethtool_stats *stats, u64 *data)
{
	struct pcinet_net *np = netdev_priv(dev);
	struct u64_stats_sync *syncp[] = {
		[PCINET_TX] = &np->tx_stats.syncp,
		[PCINET_RX] = &np->rx_stats.syncp,
		[PCINET_IRQ] = &np->irq_stats.syncp,
	};
	void *base[] = {
		[PCINET_TX] = &np->tx_stats,
		[PCINET_RX] = &np->rx_stats,
		[PCINET_IRQ] = &np->irq_stats,
	};
	unsigned int start;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(pcinet_stats); i++) {
		const struct pcinet_stat_desc *d = &pcinet_stats[i];
		const u64_stats_t *v = base[d->group] + d->offset;

		do {
			start = u64_stats_fetch_begin(syncp[d->group]);
			data[i] = u64_stats_read(v);
		} while (u64_stats_fetch_retry(syncp[d->group], start));
	}
}

static const struct ethtool_ops pcinet_ethtool_ops = {
	.get_drvinfo = pcinet_get_drvinfo,
	.get_link = ethtool_op_get_link,
	.get_sset_count = pcinet_get_sset_count,
	.get_priv_flags = pcinet_get_priv_flags,
	.set_priv_flags = pcinet_set_priv_flags,
	.get_strings = pcinet_get_strings,
	.get_ethtool_stats = pcinet_get_ethtool_stats,
};

/* ----- creation ----- */

/**
 * pcinet_net_create - create the interface pcinet<n> of a link
 * @ch: the link's net channel; n is the link's index
 *
 * Return: the front-end, or an ERR_PTR().
 */
static void *pcinet_net_create(struct pcinet_channel *ch)
{
	struct net_device *dev;
	struct pcinet_net *np;
	char name[IFNAMSIZ];
	int err;

	snprintf(name, sizeof(name), "pcinet%d", pcinet_chan_index(ch));
	dev = alloc_netdev(sizeof(*np), name, NET_NAME_PREDICTABLE,
			   ether_setup);
	if (!dev)
		return ERR_PTR(-ENOMEM);
	SET_NETDEV_DEV(dev, pcinet_chan_dev(ch));
	np = netdev_priv(dev);
	np->dev = dev;
	np->chan = ch;
	np->tx = pcinet_chan_tx(ch);
	np->rx = pcinet_chan_rx(ch);
	u64_stats_init(&np->tx_stats.syncp);
	u64_stats_init(&np->rx_stats.syncp);
	u64_stats_init(&np->irq_stats.syncp);

	dev->netdev_ops = &pcinet_netdev_ops;
	dev->ethtool_ops = &pcinet_ethtool_ops;
	dev->min_mtu = ETH_MIN_MTU;
	dev->max_mtu = ETH_MAX_MTU;
	dev->hw_features = NETIF_F_SG | NETIF_F_HW_CSUM | NETIF_F_RXCSUM |
			   NETIF_F_TSO | NETIF_F_TSO6 | NETIF_F_TSO_ECN;
	dev->features = dev->hw_features | NETIF_F_HIGHDMA;
	dev->vlan_features = dev->features;
	eth_hw_addr_random(dev);
	netif_napi_add_weight(dev, &np->napi, pcinet_poll, PCINET_NAPI_WEIGHT);
	netif_carrier_off(dev);

	err = register_netdev(dev);
	if (err)
		goto abort_with_napi;
	pcinet_chan_attach(ch, &pcinet_net_chan_ops, np);
	return np;

abort_with_napi:
	netif_napi_del(&np->napi);
	free_netdev(dev);
	return ERR_PTR(err);
}

/**
 * pcinet_net_destroy - remove the interface
 * @fe: the front-end, as pcinet_net_create() returned it
 */
static void pcinet_net_destroy(void *fe)
{
	struct pcinet_net *np = fe;

	pcinet_chan_detach(np->chan);
	unregister_netdev(np->dev);
	netif_napi_del(&np->napi);
	free_netdev(np->dev);
}

/* The net front-end, listed in the core's table. */
const struct pcinet_frontend pcinet_net_frontend = {
	.name = "net",
	.chan = PCINET_CHAN_NET,
	.create = pcinet_net_create,
	.destroy = pcinet_net_destroy,
};
