// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * pcinet ring logic, shared by the kernel and the userspace tests.
 *
 * Everything read from the @in control block or from the rx data is
 * written by the other machine: it is read once, into a local, and
 * validated before use.  Indices are free-running u32 byte counts; all
 * comparisons use unsigned differences so wrap at 2^32 needs no case of
 * its own.  The letters A..H refer to the ordering contract in
 * pcinet_ring.h.
 */
#ifdef __KERNEL__
#include <linux/compiler.h>
#include <linux/minmax.h>
#include <linux/string.h>
#include <asm/byteorder.h>
#endif

#include "pcinet_ring.h"

static bool pcinet_overlap(u64 a, u64 alen, u64 b, u64 blen)
{
	return a < b + blen && b < a + alen;
}

/*
 * The virtio block of a header page copied out by pcinet_layout_parse()
 * (covered by its P2), checked against the five regions it found: see
 * struct pcinet_win_vio.  Each non-empty region aligned, inside the usable
 * window, clear of the header page, the inboxes and the other regions.
 */
static bool pcinet_layout_parse_vio(const struct pcinet_win_vio *v,
				    struct pcinet_layout *lay,
				    const u64 *start, const u64 *len)
{
	u64 s[9], l[9];
	int i, j, n = 5;

	if (le32_to_cpu(v->magic) != PCINET_WIN_VIO_MAGIC ||
	    le16_to_cpu(v->version) != PCINET_WIN_VIO_VERSION ||
	    le16_to_cpu(v->size) != sizeof(*v))
		return false;
	for (i = 0; i < 5; i++) {
		s[i] = start[i];
		l[i] = len[i];
	}
	for (i = 0; i < 4; i++) {
		const struct pcinet_win_vio_side *vs = &v->side[i / 2];
		u64 off = le64_to_cpu(i % 2 ? vs->drv_off : vs->dev_off);
		u64 size = le64_to_cpu(i % 2 ? vs->drv_size : vs->dev_size);

		if (!size)
			continue;
		if (off % PCINET_VIO_ALIGN || size % PCINET_VIO_ALIGN ||
		    off > lay->win_size || size > lay->win_size - off)
			return false;
		s[n] = off;
		l[n] = size;
		n++;
	}
	for (i = 5; i < n; i++)
		for (j = 0; j < i; j++)
			if (pcinet_overlap(s[i], l[i], s[j], l[j]))
				return false;
	for (i = 0; i < 2; i++) {
		lay->vio[i].dev_size = le64_to_cpu(v->side[i].dev_size);
		lay->vio[i].dev_off = lay->vio[i].dev_size ?
				      le64_to_cpu(v->side[i].dev_off) : 0;
		lay->vio[i].drv_size = le64_to_cpu(v->side[i].drv_size);
		lay->vio[i].drv_off = lay->vio[i].drv_size ?
				      le64_to_cpu(v->side[i].drv_off) : 0;
	}
	return true;
}

/**
 * pcinet_layout_parse - validate a window header and decode the layout
 * @win: the window; its header is copied once, then checked
 * @size: size of the mapping
 * @lay: filled in
 *
 * The header is written by the platform, not by the peer, but it is
 * checked as strictly: every region must lie inside the window, be
 * aligned, and overlap no other.  The checks are listed with struct
 * pcinet_win_hdr in pcinet_layout.h.  The virtio block (struct
 * pcinet_win_vio) is decoded too; a bad one only clears @lay->has_vio.
 *
 * Return: 0, or -PCINET_EPROTO if the window is not a usable pcinet one.
 */
int pcinet_layout_parse(const void *win, u64 size, struct pcinet_layout *lay)
{
	const struct pcinet_win_hdr *w = win;
	struct pcinet_win_hdr hdr;
	struct pcinet_win_vio vio;
	u64 start[5], len[5];
	u32 magic;
	int i, j, c;

	if (size < PCINET_HDR_SIZE)
		return -PCINET_EPROTO;
	/* P2: pairs with P1 in pcinet_layout_write(); magic before the body */
	magic = le32_to_cpu(pcinet_load_acquire(&w->magic));
	memcpy(&hdr, win, sizeof(hdr));
	memcpy(&vio, (const u8 *)win + PCINET_HDR_VIO_OFF, sizeof(vio));
	memset(lay, 0, sizeof(*lay));
	if (magic != PCINET_WIN_MAGIC ||
	    le16_to_cpu(hdr.version) != PCINET_VERSION ||
	    le16_to_cpu(hdr.hdr_size) != PCINET_HDR_SIZE)
		return -PCINET_EPROTO;
	lay->win_size = min(le64_to_cpu(hdr.win_size), size);
	lay->nr_vectors = le32_to_cpu(hdr.nr_vectors);
	if (!lay->nr_vectors)
		return -PCINET_EPROTO;

	start[0] = 0;
	len[0] = PCINET_HDR_SIZE;
	for (i = 0; i < 2; i++) {
		u64 coff = le64_to_cpu(hdr.side[i].ctrl_off);
		u64 doff = le64_to_cpu(hdr.side[i].data_off);
		u64 dsize = le64_to_cpu(hdr.side[i].data_size);

		if (coff % PCINET_CACHELINE || doff % PCINET_REC_ALIGN ||
		    coff > lay->win_size ||
		    lay->win_size - coff < PCINET_CTRL_SIZE ||
		    doff > lay->win_size || dsize > lay->win_size - doff)
			return -PCINET_EPROTO;
		lay->ctrl_off[i] = coff;
		for (c = 0; c < PCINET_NR_RING_CHAN; c++)
			if (pcinet_layout_ring(doff, dsize, c, &lay->ring[i][c]))
				return -PCINET_EPROTO;
		start[1 + 2 * i] = coff;
		len[1 + 2 * i] = PCINET_CTRL_SIZE;
		start[2 + 2 * i] = doff;
		len[2 + 2 * i] = dsize;
	}
	for (i = 0; i < 5; i++)
		for (j = i + 1; j < 5; j++)
			if (pcinet_overlap(start[i], len[i], start[j], len[j]))
				return -PCINET_EPROTO;
	lay->has_vio = pcinet_layout_parse_vio(&vio, lay, start, len);
	return 0;
}

static void pcinet_span_at(u8 *data, u32 size, u32 pos, u32 len,
			   struct pcinet_span *sp)
{
	u32 start = pos & (size - 1);
	u32 first = min(len, size - start);

	sp->p[0] = data + start;
	sp->len[0] = first;
	sp->p[1] = data;
	sp->len[1] = len - first;
}

/**
 * pcinet_tx_init - set up the producer's view of a ring
 * @tx: the view
 * @data: ring data (in the peer's data inbox)
 * @size: ring size, a power of two
 * @out: channel control in the peer's inbox (we write it)
 * @in: channel control in our inbox (the peer writes it)
 */
void pcinet_tx_init(struct pcinet_tx *tx, void *data, u32 size,
		    struct pcinet_chan_ctrl *out,
		    const struct pcinet_chan_ctrl *in)
{
	tx->data = data;
	tx->size = size;
	tx->out = out;
	tx->in = in;
	tx->prod = 0;
	tx->cons = 0;
	tx->kick_base = 0;
}

/**
 * pcinet_tx_reset - forget everything in flight and publish empty indices
 * @tx: the view
 *
 * Called while the link is down; the link layer orders these stores
 * before it publishes the new generation.
 */
void pcinet_tx_reset(struct pcinet_tx *tx)
{
	tx->prod = 0;
	tx->cons = 0;
	tx->kick_base = 0;
	WRITE_ONCE(tx->out->prod, cpu_to_le32(0));
	WRITE_ONCE(tx->out->need_space, cpu_to_le32(0));
}

/**
 * pcinet_tx_free - bytes the producer may write now
 * @tx: the view
 *
 * Reads the consumer index the peer published.  It must lie between the
 * last one seen and our producer index; anything else is a broken peer.
 *
 * Return: free bytes, or -PCINET_EPROTO.
 */
int pcinet_tx_free(struct pcinet_tx *tx)
{
	u32 cons;

	/* D: pairs with C in pcinet_rx_publish(); the space is free once seen */
	cons = le32_to_cpu(pcinet_load_acquire(&tx->in->cons));
	if (cons - tx->cons > tx->prod - tx->cons)
		return -PCINET_EPROTO;
	tx->cons = cons;
	return (int)(tx->size - (tx->prod - cons));
}

/**
 * pcinet_tx_span - locate @len bytes at @off past the producer index
 * @tx: the view
 * @off: offset from the producer index
 * @len: length, at most the free space
 * @sp: filled in with one or two pieces
 */
void pcinet_tx_span(struct pcinet_tx *tx, u32 off, u32 len,
		    struct pcinet_span *sp)
{
	pcinet_span_at(tx->data, tx->size, tx->prod + off, len, sp);
}

/**
 * pcinet_tx_write - copy @len bytes to @off past the producer index
 * @tx: the view
 * @off: offset from the producer index
 * @buf: source
 * @len: length, at most the free space
 */
void pcinet_tx_write(struct pcinet_tx *tx, u32 off, const void *buf, u32 len)
{
	struct pcinet_span sp;

	pcinet_tx_span(tx, off, len, &sp);
	memcpy(sp.p[0], buf, sp.len[0]);
	if (sp.len[1])
		memcpy(sp.p[1], (const u8 *)buf + sp.len[0], sp.len[1]);
}

/**
 * pcinet_tx_reserve - find room for one record of @len payload bytes
 * @tx: the view
 * @len: payload bytes
 * @sp: filled in with where the payload goes: right after the record
 *	header at the producer index (the header never wraps on a ring of
 *	records; the payload may)
 *
 * Reads the consumer index the peer published (pcinet_tx_free(), D).
 * Nothing is written: the caller writes the header at offset 0
 * (pcinet_tx_write()) and the payload into @sp, then publishes the
 * record with pcinet_tx_commit(@tx, size).
 *
 * Return: the record's size on the ring (pcinet_rec_size(@len)); 0 if
 * it does not fit now (or ever: @len is larger than the ring); or
 * -PCINET_EPROTO if the peer's consumer index is impossible.
 */
int pcinet_tx_reserve(struct pcinet_tx *tx, u32 len, struct pcinet_span *sp)
{
	int free = pcinet_tx_free(tx);
	u32 size;

	if (free < 0)
		return free;
	if (len > tx->size)
		return 0;
	size = pcinet_rec_size(len);
	if ((u32)free < size)
		return 0;
	pcinet_tx_span(tx, sizeof(struct pcinet_rec), len, sp);
	return (int)size;
}

/**
 * pcinet_tx_commit - publish @len written bytes to the consumer
 * @tx: the view
 * @len: bytes to publish
 */
void pcinet_tx_commit(struct pcinet_tx *tx, u32 len)
{
	tx->prod += len;
	/* A: pairs with B in pcinet_rx_avail(); the record is visible first */
	pcinet_store_release(&tx->out->prod, cpu_to_le32(tx->prod));
}

/**
 * pcinet_tx_left - free bytes, as of the last reading of the consumer index
 * @tx: the view
 *
 * No access to the window: what pcinet_tx_free() (or pcinet_tx_reserve())
 * said, less what was committed since.
 *
 * Return: free bytes.
 */
u32 pcinet_tx_left(const struct pcinet_tx *tx)
{
	return tx->size - (tx->prod - tx->cons);
}

/**
 * pcinet_tx_need_kick - does the consumer want a doorbell?
 * @tx: the view
 * @old_prod: producer index when the batch being kicked started
 *
 * Return: true if the consumer's event index lies in [@old_prod, prod),
 * that is, it went to sleep before seeing some of what we published.
 */
bool pcinet_tx_need_kick(struct pcinet_tx *tx, u32 old_prod)
{
	u32 event;

	/* E: pairs with F in pcinet_rx_arm() */
	pcinet_mb();
	event = le32_to_cpu(READ_ONCE(tx->in->event));
	return pcinet_need_event(event, tx->prod, old_prod);
}

/**
 * pcinet_tx_end_batch - the kick decision at the end of a batch
 * @tx: the view
 *
 * The batch is what was committed since the last decision (from the kick
 * base to the producer index).  Nothing new: no doorbell, and no barrier
 * either.  Otherwise pcinet_tx_need_kick() on the batch (E), and the kick
 * base moves to the producer index.  Call it after the last
 * pcinet_tx_commit() of every batch; records committed without a decision
 * are part of the next one.
 *
 * Return: true if the caller must ring the channel's doorbell.
 */
bool pcinet_tx_end_batch(struct pcinet_tx *tx)
{
	bool kick;

	if (tx->prod == tx->kick_base)
		return false;
	kick = pcinet_tx_need_kick(tx, tx->kick_base);
	tx->kick_base = tx->prod;
	return kick;
}

/**
 * pcinet_tx_wait_space - ask for a doorbell when the consumer frees space
 * @tx: the view
 *
 * Sets need_space, then re-reads the consumer index so that space freed
 * before the flag became visible is not missed.
 *
 * Return: free bytes now, or -PCINET_EPROTO.
 */
int pcinet_tx_wait_space(struct pcinet_tx *tx)
{
	WRITE_ONCE(tx->out->need_space, cpu_to_le32(1));
	/* G: pairs with H in pcinet_rx_publish() */
	pcinet_mb();
	return pcinet_tx_free(tx);
}

/**
 * pcinet_tx_space_ok - withdraw a pcinet_tx_wait_space() request
 * @tx: the view
 */
void pcinet_tx_space_ok(struct pcinet_tx *tx)
{
	WRITE_ONCE(tx->out->need_space, cpu_to_le32(0));
}

/**
 * pcinet_tx_refresh - write the published producer index again
 * @tx: the view
 *
 * Soft state: repairs a producer index a third party overwrote in the
 * consumer's inbox.  Nothing new is published (the value was released by
 * pcinet_tx_commit() before), so a plain store does.
 */
void pcinet_tx_refresh(struct pcinet_tx *tx)
{
	WRITE_ONCE(tx->out->prod, cpu_to_le32(tx->prod));
}

/**
 * pcinet_rx_init - set up the consumer's view of a ring
 * @rx: the view
 * @data: ring data (in our data inbox)
 * @size: ring size, a power of two
 * @out: channel control in the peer's inbox (we write it)
 * @in: channel control in our inbox (the peer writes it)
 */
void pcinet_rx_init(struct pcinet_rx *rx, void *data, u32 size,
		    struct pcinet_chan_ctrl *out,
		    const struct pcinet_chan_ctrl *in)
{
	rx->data = data;
	rx->size = size;
	rx->out = out;
	rx->in = in;
	rx->cons = 0;
	rx->prod = 0;
	rx->published = 0;
}

/**
 * pcinet_rx_reset - forget everything in flight and publish empty indices
 * @rx: the view
 */
void pcinet_rx_reset(struct pcinet_rx *rx)
{
	rx->cons = 0;
	rx->prod = 0;
	rx->published = 0;
	WRITE_ONCE(rx->out->cons, cpu_to_le32(0));
	WRITE_ONCE(rx->out->event, cpu_to_le32(0));
}

/**
 * pcinet_rx_avail - bytes published and not yet consumed
 * @rx: the view
 * @align: granule the producer publishes in (1 for a byte stream)
 *
 * Return: available bytes, or -PCINET_EPROTO if the peer's producer index
 * is impossible (behind us, more than a ring ahead, or misaligned).
 */
int pcinet_rx_avail(struct pcinet_rx *rx, u32 align)
{
	u32 prod, avail;

	/* B: pairs with A in pcinet_tx_commit(); read data only after this */
	prod = le32_to_cpu(pcinet_load_acquire(&rx->in->prod));
	avail = prod - rx->cons;
	if (avail > rx->size || (avail & (align - 1)))
		return -PCINET_EPROTO;
	rx->prod = prod;
	return (int)avail;
}

/**
 * pcinet_rx_peek_rec - copy out and check the header of the next record
 * @rx: the view
 * @rec: filled in with a private copy of the header
 * @max_len: largest payload the caller accepts
 *
 * Return: the record's size on the ring (header, payload and padding),
 * 0 if the ring is empty, or -PCINET_EPROTO if the record is impossible.
 */
int pcinet_rx_peek_rec(struct pcinet_rx *rx, struct pcinet_rec *rec,
		       u32 max_len)
{
	int avail = pcinet_rx_avail(rx, PCINET_REC_ALIGN);
	u32 len;

	if (avail <= 0)
		return avail;
	/* cons is aligned and the ring a multiple of the alignment: no wrap */
	memcpy(rec, rx->data + (rx->cons & (rx->size - 1)), sizeof(*rec));
	len = le32_to_cpu(rec->len);
	/* avail is a multiple of the alignment: the padded record fits too */
	if (len > max_len || len > (u32)avail - sizeof(*rec))
		return -PCINET_EPROTO;
	return (int)pcinet_rec_size(len);
}

/**
 * pcinet_rx_span - locate @len bytes at @off past the consumer index
 * @rx: the view
 * @off: offset from the consumer index
 * @len: length; @off + @len must not exceed what pcinet_rx_avail() said
 * @sp: filled in with one or two pieces
 */
void pcinet_rx_span(struct pcinet_rx *rx, u32 off, u32 len,
		    struct pcinet_span *sp)
{
	pcinet_span_at(rx->data, rx->size, rx->cons + off, len, sp);
}

/**
 * pcinet_rx_read - copy @len bytes at @off past the consumer index
 * @rx: the view
 * @off: offset from the consumer index
 * @buf: destination
 * @len: length, within what pcinet_rx_avail() said
 */
void pcinet_rx_read(struct pcinet_rx *rx, u32 off, void *buf, u32 len)
{
	struct pcinet_span sp;

	pcinet_rx_span(rx, off, len, &sp);
	memcpy(buf, sp.p[0], sp.len[0]);
	if (sp.len[1])
		memcpy((u8 *)buf + sp.len[0], sp.p[1], sp.len[1]);
}

/**
 * pcinet_rx_consume - mark @len bytes consumed (locally)
 * @rx: the view
 * @len: bytes, within what pcinet_rx_avail() said
 */
void pcinet_rx_consume(struct pcinet_rx *rx, u32 len)
{
	rx->cons += len;
}

/**
 * pcinet_rx_publish - give consumed space back to the producer
 * @rx: the view
 *
 * Publishes the consumer index even if it did not move; channels call
 * pcinet_rx_give_back(), which does not.
 *
 * Return: true if the producer asked for a doorbell when space frees up.
 */
bool pcinet_rx_publish(struct pcinet_rx *rx)
{
	rx->published = rx->cons;
	/* C: pairs with D in pcinet_tx_free(); our reads are done first */
	pcinet_store_release(&rx->out->cons, cpu_to_le32(rx->cons));
	/* H: pairs with G in pcinet_tx_wait_space() */
	pcinet_mb();
	return READ_ONCE(rx->in->need_space) != 0;
}

/**
 * pcinet_rx_give_back_due - is it time to give space back mid-batch?
 * @rx: the view
 *
 * A consumer gives space back at least every eighth of the ring, so a
 * batch that is most of the ring does not keep the producer waiting
 * until it ends, and when it stops (pcinet_rx_give_back() either way).
 *
 * Return: true if an eighth of the ring or more was consumed since the
 * last pcinet_rx_publish().
 */
bool pcinet_rx_give_back_due(const struct pcinet_rx *rx)
{
	return rx->cons - rx->published >= rx->size / 8;
}

/**
 * pcinet_rx_give_back - give consumed space back, if there is any
 * @rx: the view
 *
 * Nothing consumed since the last pcinet_rx_publish(): nothing to do.
 * Otherwise pcinet_rx_publish() (C, then H).
 *
 * Return: true if the producer waits for space: the caller must ring the
 * channel's doorbell.
 */
bool pcinet_rx_give_back(struct pcinet_rx *rx)
{
	if (rx->cons == rx->published)
		return false;
	return pcinet_rx_publish(rx);
}

/**
 * pcinet_rx_refresh - write the published consumer index again
 * @rx: the view
 *
 * Soft state, as pcinet_tx_refresh().  Only while everything consumed has
 * been published (pcinet_rx_give_back()), so nothing new is released;
 * otherwise it does nothing, and the next give-back writes the index.
 */
void pcinet_rx_refresh(struct pcinet_rx *rx)
{
	if (rx->cons != rx->published)
		return;
	WRITE_ONCE(rx->out->cons, cpu_to_le32(rx->cons));
}

/**
 * pcinet_rx_arm - ask for a doorbell on the next record, before sleeping
 * @rx: the view
 *
 * Return: true if records arrived meanwhile: keep polling instead.
 */
bool pcinet_rx_arm(struct pcinet_rx *rx)
{
	WRITE_ONCE(rx->out->event, cpu_to_le32(rx->cons));
	/* F: pairs with E in pcinet_tx_need_kick() */
	pcinet_mb();
	return le32_to_cpu(READ_ONCE(rx->in->prod)) != rx->cons;
}

/**
 * pcinet_ident_set - our identity, as we publish it
 * @id: filled in
 * @slot: our slot; 0: unknown
 * @name: our name, a C string: sanitized and cut to PCINET_NAME_MAX
 *	characters (pcinet_name_sanitize()); "" or NULL: none
 */
void pcinet_ident_set(struct pcinet_ident *id, u32 slot, const char *name)
{
	id->slot = slot;
	pcinet_name_sanitize(id->name, name ? name : "");
}

/**
 * pcinet_ident_read - copy the peer's identity out of its control block
 * @ctrl: the block, in the window: the peer may write it meanwhile
 * @id: filled in, sanitized
 *
 * Every byte is read from the window once: @name is copied out before
 * anything looks at it, then pcinet_name_sanitize() runs on the copy (it
 * reads at most PCINET_NAME_MAX bytes and trusts no NUL).  The caller
 * reads only a live block, after its load-acquire of @gen (L2).
 */
void pcinet_ident_read(const struct pcinet_ctrl *ctrl, struct pcinet_ident *id)
{
	char raw[PCINET_NAME_LEN];

	memcpy(raw, ctrl->name, sizeof(raw));
	id->slot = le32_to_cpu(READ_ONCE(ctrl->slot));
	pcinet_name_sanitize(id->name, raw);
}

/**
 * pcinet_ident_write - store our identity in the peer's control block
 * @ctrl: the peer's control inbox, in the window
 * @id: our identity, from pcinet_ident_set()
 *
 * Writes every byte of @slot and @name, the unused tail of @name as the
 * zeroes pcinet_ident_set() left there: nothing else reaches the window.
 * Soft state: the caller does it again on every tick, before its
 * store-release of @gen (L1).
 */
void pcinet_ident_write(struct pcinet_ctrl *ctrl, const struct pcinet_ident *id)
{
	WRITE_ONCE(ctrl->slot, cpu_to_le32(id->slot));
	memcpy(ctrl->name, id->name, sizeof(ctrl->name));
}

/**
 * pcinet_handshake - the link's handshake decision, on the control words
 * @v: our state and the peer's control words, as read
 * @why: set to the reason when the answer is a reset
 *
 * A pure function.  One round of the handshake: the caller reads the
 * peer's words (with the L2 load-acquires), asks, and acts.  After
 * PCINET_HS_SYNC, or PCINET_HS_RESTART (a reset, then a sync), it updates
 * @v (new @gen and not @up after a reset; @synced_gen = the peer's gen;
 * the peer's @peer_gen and @ack_gen read again) and asks once more: the
 * answer is then PCINET_HS_UP or PCINET_HS_WAIT.  Timers (heartbeat
 * silence, the no-handshake timeout), the platform's attach epoch and
 * protocol errors are the caller's business: each is a reset of its own
 * before it asks.
 *
 * The rules, in order:
 *  - the peer's block is not live (bad magic, or gen 0: not running):
 *    reset if up, else wait;
 *  - the peer's gen is not the one we synchronised with (it started,
 *    restarted or reset, or a third party wrote it): reset and sync if
 *    up, else sync;
 *  - the peer acknowledges us (its peer_gen is our gen, and its ack_gen
 *    is its own current gen): up (keep if up already);
 *  - otherwise: reset if up, else wait.
 *
 * Return: what to do.
 */
enum pcinet_hs pcinet_handshake(const struct pcinet_hs_view *v,
				const char **why)
{
	bool acked;

	if (!pcinet_ctrl_live(v->their_magic, v->their_gen)) {
		*why = "peer stopped";
		return v->up ? PCINET_HS_RESET : PCINET_HS_WAIT;
	}
	if (v->their_gen != v->synced_gen) {
		*why = "peer restarted";
		return v->up ? PCINET_HS_RESTART : PCINET_HS_SYNC;
	}
	acked = v->their_peer_gen == v->gen && v->their_ack_gen == v->their_gen;
	if (acked)
		return v->up ? PCINET_HS_KEEP : PCINET_HS_UP;
	*why = "peer stopped acknowledging us";
	return v->up ? PCINET_HS_RESET : PCINET_HS_WAIT;
}
