/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * pcinet rings: one producer, one consumer, on two machines.
 *
 * Portable C: this file and pcinet_ring.c compile in the kernel and, with
 * tools/testing/pcinet/pcinet_user.h, in userspace.
 *
 * A ring is a power-of-two byte array in the consumer's data inbox plus
 * four indices, all free-running u32 byte counts masked only at access:
 * prod and need_space (written by the producer, in the consumer's control
 * inbox) and cons and event (written by the consumer, in the producer's
 * control inbox).  The net channel carries records (struct pcinet_rec and
 * payload, PCINET_REC_ALIGN aligned); so does the tty channel, whose
 * records cut a byte stream anywhere.  The ring code also serves plain
 * byte streams (align 1), as the userspace stress test uses it.
 *
 * Barriers.  The two ends are CPUs sharing coherent memory, possibly in
 * different virtual machines, one of which may run a uniprocessor kernel:
 * that is what the virt_*() barriers are for (they never degrade to
 * compiler barriers on !SMP builds), so this file uses them and nothing
 * else.  A backend that maps the peer's inbox write-combining would need
 * mandatory barriers instead; it would change pcinet_load_acquire(),
 * pcinet_store_release() and pcinet_mb() below, in one place.
 *
 * The ordering contract (letters are used in the comments at each site):
 *  A  producer: record stores, then store-release prod.
 *     Pairs with B.
 *  B  consumer: load-acquire prod, then record loads.  Pairs with A.
 *  C  consumer: record loads, then store-release cons.  Pairs with D.
 *  D  producer: load-acquire cons, then stores into the freed space.
 *     Pairs with C.
 *  E  producer: store prod, full barrier, load event (kick decision).
 *     Pairs with F.
 *  F  consumer: store event, full barrier, load prod (re-check before
 *     sleeping).  Pairs with E: either the producer sees the new event
 *     and rings, or the consumer sees the new prod and polls on.
 *  G  producer: store need_space, full barrier, load cons (re-check
 *     before stopping).  Pairs with H.
 *  H  consumer: store cons, full barrier, load need_space (kick
 *     decision).  Pairs with G.
 *
 * The channel views.  struct pcinet_tx and struct pcinet_rx are all the
 * bookkeeping a channel needs, and every channel (net, tty, the
 * userspace peer of the stress test) keeps it here rather than on its
 * own.  A producer finds room for a record with pcinet_tx_reserve() (or
 * pcinet_tx_free() for a byte stream), writes it, publishes it with
 * pcinet_tx_commit() (A) and, at the end of a batch, asks
 * pcinet_tx_end_batch() whether to ring the consumer (E): the view
 * remembers where the last batch ended (the kick base).  Short of room it
 * asks for a doorbell with pcinet_tx_wait_space() (G).  A consumer reads
 * records with pcinet_rx_peek_rec() (B), marks them consumed with
 * pcinet_rx_consume(), gives the space back with pcinet_rx_give_back()
 * (C, H) whenever pcinet_rx_give_back_due() says so and when it stops,
 * and re-arms with pcinet_rx_arm() (F) before it sleeps.  The caller owns
 * the locking (one producer and one consumer per view at a time) and
 * rings the doorbell when a helper says so.
 */
#ifndef _PCINET_RING_H
#define _PCINET_RING_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <asm/barrier.h>
#else
#include "pcinet_user.h"
#endif

#include "pcinet_layout.h"

/* Acquire half of the pairs A/B and C/D: callers name their pair. */
#define pcinet_load_acquire(p)		virt_load_acquire(p)
/*
 * Release half of the pairs A/B and C/D: callers name their pair.  In the
 * kernel a wmb() first: a peer window mapped write-combining (NTB, PCI
 * endpoint BARs) may reorder and hold back plain stores, which release
 * semantics alone (a compiler barrier on x86) do not drain; the sfence
 * puts everything before the index on the bus before it.
 */
#ifdef __KERNEL__
/* wmb(): drains write-combining buffers (above); then the release */
#define pcinet_store_release(p, v) do { wmb(); virt_store_release(p, v); } while (0)
#else
/* the userspace tests share no WC mapping: the release alone */
#define pcinet_store_release(p, v)	virt_store_release(p, v)
#endif
/* Full barrier of the pairs E/F and G/H: callers name their pair. */
#define pcinet_mb()			virt_mb()

/**
 * struct pcinet_tx - the producer's view of a ring
 * @data: ring data, in the peer's data inbox
 * @size: ring size, a power of two
 * @prod: local copy of the published producer index
 * @cons: consumer index as last read
 * @kick_base: producer index at the last kick decision
 *	(pcinet_tx_end_batch()): where the batch being decided starts
 * @out: the peer's control inbox for this channel (we write prod,
 *	need_space)
 * @in: our control inbox for this channel (the peer writes cons, event)
 */
struct pcinet_tx {
	u8 *data;
	u32 size;
	u32 prod;
	u32 cons;
	u32 kick_base;
	struct pcinet_chan_ctrl *out;
	const struct pcinet_chan_ctrl *in;
};

/**
 * struct pcinet_rx - the consumer's view of a ring
 * @data: ring data, in our data inbox
 * @size: ring size, a power of two
 * @cons: local consumer index, published by pcinet_rx_publish()
 * @prod: producer index as last read and validated
 * @published: consumer index last published (pcinet_rx_publish())
 * @out: the peer's control inbox for this channel (we write cons, event)
 * @in: our control inbox for this channel (the peer writes prod,
 *	need_space)
 */
struct pcinet_rx {
	u8 *data;
	u32 size;
	u32 cons;
	u32 prod;
	u32 published;
	struct pcinet_chan_ctrl *out;
	const struct pcinet_chan_ctrl *in;
};

/**
 * struct pcinet_span - a run of ring bytes, split in two at the wrap
 * @p: start of each piece
 * @len: length of each piece; @len[1] is 0 when nothing wraps
 */
struct pcinet_span {
	u8 *p[2];
	u32 len[2];
};

/* Errors reported by the ring code: each means the peer is broken. */
#define PCINET_EPROTO	71

static inline u32 pcinet_rec_size(u32 len)
{
	return (u32)(sizeof(struct pcinet_rec) + len + PCINET_REC_ALIGN - 1) &
	       ~(u32)(PCINET_REC_ALIGN - 1);
}

/**
 * struct pcinet_vio_regions - the virtio regions of one side, decoded
 * @dev_off: window offset of the side's dev region
 * @dev_size: its size; 0: none
 * @drv_off: window offset of the side's drv region
 * @drv_size: its size; 0: none
 */
struct pcinet_vio_regions {
	u64 dev_off;
	u64 dev_size;
	u64 drv_off;
	u64 drv_size;
};

/**
 * struct pcinet_layout - a window header, validated and decoded
 * @win_size: usable window size
 * @nr_vectors: doorbell vectors per side
 * @ctrl_off: offset of the control inbox of side 0 and side 1
 * @ring: rings in the data inbox of each side, per channel with a ring
 * @has_vio: the window's virtio block (struct pcinet_win_vio) passed
 *	every check; false for a window without one, or with a bad one
 *	(the window is then used without virtio)
 * @vio: with @has_vio, the virtio regions of side 0 and side 1; zero
 *	otherwise
 */
struct pcinet_layout {
	u64 win_size;
	u32 nr_vectors;
	u64 ctrl_off[2];
	struct pcinet_ring_loc ring[2][PCINET_NR_RING_CHAN];
	bool has_vio;
	struct pcinet_vio_regions vio[2];
};

int pcinet_layout_parse(const void *win, u64 size, struct pcinet_layout *lay);

/**
 * enum pcinet_hs - what the handshake says to do next
 * @PCINET_HS_WAIT: we are down and stay down: the peer is not running,
 *	or it has not acknowledged our generation yet
 * @PCINET_HS_SYNC: we are down and the peer runs a generation we have
 *	not synchronised with: zero our indices, then publish @ack_gen = our
 *	gen and (store-release, L1) @peer_gen = its gen; ring LINK
 * @PCINET_HS_UP: we are down, synchronised, and the peer acknowledged
 *	our current generation with its current one: start the channels
 * @PCINET_HS_KEEP: we are up and everything still holds
 * @PCINET_HS_RESET: we are up and the peer stopped or stopped
 *	acknowledging us: reset ourselves (stop the channels, zero our
 *	indices, publish a new generation with @peer_gen and @ack_gen 0,
 *	ring LINK); nothing more this round
 * @PCINET_HS_RESTART: we are up and the peer runs a new generation:
 *	reset ourselves as for PCINET_HS_RESET, then sync to the peer's
 *	generation as for PCINET_HS_SYNC
 */
enum pcinet_hs {
	PCINET_HS_WAIT,
	PCINET_HS_SYNC,
	PCINET_HS_UP,
	PCINET_HS_KEEP,
	PCINET_HS_RESET,
	PCINET_HS_RESTART,
};

/**
 * struct pcinet_hs_view - what the handshake decision looks at
 * @gen: our generation
 * @synced_gen: the peer generation our indices were reset for; 0 if none
 * @up: we are up
 * @their_magic: the peer's @magic, in our control inbox
 * @their_gen: the peer's @gen (load-acquire, L2)
 * @their_peer_gen: the peer's @peer_gen: our generation it synchronised
 *	with (load-acquire, L2)
 * @their_ack_gen: the peer's @ack_gen, read after @their_peer_gen
 */
struct pcinet_hs_view {
	u32 gen;
	u32 synced_gen;
	bool up;
	u32 their_magic;
	u32 their_gen;
	u32 their_peer_gen;
	u32 their_ack_gen;
};

enum pcinet_hs pcinet_handshake(const struct pcinet_hs_view *v,
				const char **why);

/**
 * struct pcinet_ident - a side's identity, in private memory
 * @slot: struct pcinet_ctrl @slot; 0: unknown
 * @name: struct pcinet_ctrl @name, sanitized and NUL-terminated; "": none
 */
struct pcinet_ident {
	u32 slot;
	char name[PCINET_NAME_LEN];
};

void pcinet_ident_set(struct pcinet_ident *id, u32 slot, const char *name);
void pcinet_ident_read(const struct pcinet_ctrl *ctrl,
		       struct pcinet_ident *id);
void pcinet_ident_write(struct pcinet_ctrl *ctrl,
			const struct pcinet_ident *id);

void pcinet_tx_init(struct pcinet_tx *tx, void *data, u32 size,
		    struct pcinet_chan_ctrl *out,
		    const struct pcinet_chan_ctrl *in);
void pcinet_tx_reset(struct pcinet_tx *tx);
int pcinet_tx_free(struct pcinet_tx *tx);
void pcinet_tx_span(struct pcinet_tx *tx, u32 off, u32 len,
		    struct pcinet_span *sp);
void pcinet_tx_write(struct pcinet_tx *tx, u32 off, const void *buf, u32 len);
int pcinet_tx_reserve(struct pcinet_tx *tx, u32 len, struct pcinet_span *sp);
void pcinet_tx_commit(struct pcinet_tx *tx, u32 len);
u32 pcinet_tx_left(const struct pcinet_tx *tx);
bool pcinet_tx_need_kick(struct pcinet_tx *tx, u32 old_prod);
bool pcinet_tx_end_batch(struct pcinet_tx *tx);
int pcinet_tx_wait_space(struct pcinet_tx *tx);
void pcinet_tx_space_ok(struct pcinet_tx *tx);
void pcinet_tx_refresh(struct pcinet_tx *tx);

void pcinet_rx_init(struct pcinet_rx *rx, void *data, u32 size,
		    struct pcinet_chan_ctrl *out,
		    const struct pcinet_chan_ctrl *in);
void pcinet_rx_reset(struct pcinet_rx *rx);
int pcinet_rx_avail(struct pcinet_rx *rx, u32 align);
int pcinet_rx_peek_rec(struct pcinet_rx *rx, struct pcinet_rec *rec,
		       u32 max_len);
void pcinet_rx_span(struct pcinet_rx *rx, u32 off, u32 len,
		    struct pcinet_span *sp);
void pcinet_rx_read(struct pcinet_rx *rx, u32 off, void *buf, u32 len);
void pcinet_rx_consume(struct pcinet_rx *rx, u32 len);
bool pcinet_rx_publish(struct pcinet_rx *rx);
bool pcinet_rx_give_back_due(const struct pcinet_rx *rx);
bool pcinet_rx_give_back(struct pcinet_rx *rx);
bool pcinet_rx_arm(struct pcinet_rx *rx);
void pcinet_rx_refresh(struct pcinet_rx *rx);

#endif /* _PCINET_RING_H */
