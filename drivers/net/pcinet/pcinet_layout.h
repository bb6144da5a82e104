/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * pcinet window layout: the ABI shared by the two ends of a pcinet link,
 * by the platform that sets the window up (pcinet-fabric, or the firmware
 * of a real PCI endpoint) and by the userspace ring tests.
 *
 * This header is portable C: it compiles in the kernel and in userspace
 * (see tools/testing/pcinet/pcinet_user.h).  Every field is little-endian.
 *
 * The whole window, as pcinet-fabric lays it out (offsets are examples for
 * a 16 MiB window; the real ones are read from the window header):
 *
 *   0x000000 +---------------------------------------------+
 *            | struct pcinet_win_hdr       (platform)      |  4 KiB
 *   0x001000 +---------------------------------------------+
 *            | struct pcinet_ctrl: inbox of side 0         |  4 KiB
 *            |   written by side 1, read by side 0         |
 *   0x002000 +---------------------------------------------+
 *            | struct pcinet_ctrl: inbox of side 1         |  4 KiB
 *            |   written by side 0, read by side 1         |
 *   0x003000 +---------------------------------------------+
 *            | (unused up to the first data area)          |
 *   0x010000 +---------------------------------------------+
 *            | data inbox of side 0 (written by side 1)    |
 *            |   tty ring (64 KiB), then net ring (2^n)    |
 *            |   (0x7f0000 bytes)                          |
 *   0x800000 +---------------------------------------------+
 *            | data inbox of side 1 (written by side 0)    |
 *            |   tty ring (64 KiB), then net ring (2^n)    |
 *            +---------------------------------------------+
 *
 * Rule: each side only ever reads its own inbox (control and data) and
 * only ever writes the peer's inbox.  On real PCIe the inbox of a side
 * lives in that side's memory, so every access on the data path is a
 * local read or a posted write; nothing waits for a remote read.
 *
 * A control block holds, per channel, two cachelines that carry the
 * signalling of the two directions (see struct pcinet_chan_ctrl); data
 * and signalling never share a cacheline.
 *
 * Everything a second implementation of a side (a userspace peer, a
 * firmware) must follow is in this header and in docs/design.md ("Writing
 * a peer"): the structures, the reserved words (written zero, ignored on
 * read), the window header checks (pcinet_layout_parse() in
 * pcinet_ring.c implements them), the ring placement
 * (pcinet_layout_ring()), the event-index rule (pcinet_need_event()),
 * the doorbell vectors (pcinet_chan_vector()), the timing constants, the
 * feature bits and the identity rule (pcinet_name_sanitize()).
 */
#ifndef _PCINET_LAYOUT_H
#define _PCINET_LAYOUT_H

#ifdef __KERNEL__
#include <linux/build_bug.h>
#include <linux/compiler.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/types.h>
#include <asm/barrier.h>
#include <asm/byteorder.h>
#endif

#define PCINET_WIN_MAGIC	0x4e494350	/* "PCIN" */
#define PCINET_CTRL_MAGIC	0x4c525443	/* "CTRL" */
#define PCINET_VERSION		1

#define PCINET_HDR_SIZE		4096
#define PCINET_CTRL_SIZE	4096
#define PCINET_CACHELINE	64

/*
 * Channels carried by a link.  The first PCINET_NR_RING_CHAN (net, tty)
 * have one byte ring per direction in the data inboxes; the virtio channel
 * has none (its rings live in the virtio regions, see "The virtio
 * channel" below), and the word pair of its struct pcinet_chan_ctrl stays
 * zero.
 */
enum pcinet_chan {
	PCINET_CHAN_NET = 0,
	PCINET_CHAN_TTY = 1,
	PCINET_CHAN_VIRTIO = 2,
	PCINET_NR_CHAN
};

/* Channels with a byte ring in each data inbox: net and tty. */
#define PCINET_NR_RING_CHAN	2

/*
 * Timing a peer must respect.
 *
 * PCINET_TICK_MS: the link tick.  On every tick a side increments its
 * @heartbeat, writes every word of its part of the peer's control inbox
 * again (soft state) and, while the link is up, polls each ring as if a
 * doorbell had come (lost-doorbell sweep).
 *
 * PCINET_HEARTBEAT_MS: a running side changes @heartbeat at least this
 * often (it is the tick).
 *
 * PCINET_PEER_TIMEOUT_MS: a side whose peer's @heartbeat has not changed
 * for this long declares the peer gone and resets (new generation); a
 * side that has been down this long while the peer's heartbeat runs
 * resets too (the handshake is wedged).  It is the default of the
 * driver's peer_timeout_ms module parameter: a peer must beat well
 * within it, and should use the same timeout for the other direction.
 *
 * PCINET_PEER_GRACE_MS: a soft signal about the peer that a side reads
 * in the peer's words (its control block reads "not live", its
 * @features lack PCINET_F_VIRTIO, its virtio region header's @magic is
 * wrong or its @inst changed) counts only once it read so on every look
 * for this long: a third party's write to one of those words lasts until
 * the writer's next refresh (a tick) and must not end the sessions or
 * unplug the devices that follow the peer.  A good look in between
 * starts the count again.  A silent @heartbeat, a changed attach epoch
 * or a detach count at once.  pcinet_grace.c is the rule in code.
 */
#define PCINET_TICK_MS		100
#define PCINET_HEARTBEAT_MS	PCINET_TICK_MS
#define PCINET_PEER_TIMEOUT_MS	700
#define PCINET_PEER_GRACE_MS	(2 * PCINET_TICK_MS)

/* Room reserved in the control block for future channels. */
#define PCINET_MAX_CHAN		8

/*
 * Doorbell vectors.  Vector 0 (LINK) says "the control words changed"
 * (generation, acknowledgment, chan_open); channel c rings vector
 * pcinet_chan_vector(c) = 1 + c when its ring moved (see @event and
 * @need_space; the virtio channel: a driver state, a device ring or a
 * device description moved).  A side uses min(its doorbell count, the
 * header's @nr_vectors) vectors.  The rule, both ways: a vector at or
 * above the vectors in use is rung as vector 0, and vector 0 means the
 * link and every channel whose vector is not in use
 * (pcinet_vector_in_use()).  With 3 vectors (net 1, tty 2, virtio on 0)
 * that agrees with a peer from before the virtio channel, whose rule was
 * "with fewer than PCINET_NR_VEC vectors any doorbell means all of them":
 * each side then wakes for at least what the other meant.
 */
enum pcinet_vector {
	PCINET_VEC_LINK = 0,	/* link state changed */
	PCINET_VEC_NET = 1,	/* net ring progress */
	PCINET_VEC_TTY = 2,	/* tty ring progress */
	PCINET_VEC_VIRTIO = 3,	/* virtio channel progress */
	PCINET_NR_VEC
};

/* The doorbell vector of channel @chan, as a constant expression. */
#define PCINET_CHAN_VECTOR(chan)	(1 + (chan))

static_assert(PCINET_CHAN_VECTOR(PCINET_CHAN_NET) == PCINET_VEC_NET);
static_assert(PCINET_CHAN_VECTOR(PCINET_CHAN_TTY) == PCINET_VEC_TTY);
static_assert(PCINET_CHAN_VECTOR(PCINET_CHAN_VIRTIO) == PCINET_VEC_VIRTIO);
static_assert(PCINET_CHAN_VECTOR(PCINET_NR_CHAN) == PCINET_NR_VEC);
static_assert(PCINET_NR_RING_CHAN == PCINET_CHAN_VIRTIO);

/**
 * pcinet_chan_vector - the doorbell vector of a channel
 * @chan: the channel
 *
 * Return: 1 + @chan (vector 0 is the link's).
 */
static inline unsigned int pcinet_chan_vector(enum pcinet_chan chan)
{
	return PCINET_CHAN_VECTOR(chan);
}

/**
 * pcinet_vector_in_use - the vector a doorbell is really rung on
 * @vector: a vector (PCINET_VEC_*, pcinet_chan_vector())
 * @nr_vectors: the vectors in use: min(own doorbell count, the header's
 *	@nr_vectors)
 *
 * Return: @vector if it is in use, else 0 (PCINET_VEC_LINK).  A side
 * rings this for @vector, and on a doorbell on vector v serves the link
 * (v 0) and every channel c with pcinet_vector_in_use(c's vector) == v.
 */
static inline unsigned int pcinet_vector_in_use(unsigned int vector,
						unsigned int nr_vectors)
{
	return vector < nr_vectors ? vector : PCINET_VEC_LINK;
}

/*
 * The virtio channel (docs/design.md, "Virtio channel"): channel 2,
 * doorbell vector PCINET_CHAN_VECTOR(2) = 3, shared by every virtqueue of
 * every virtio device of the link in each direction.  The channel uses no
 * byte ring and no word of its struct pcinet_chan_ctrl (both stay zero):
 * its signalling lives in the virtio regions.  With fewer than 4 vectors
 * it is rung as vector 0 (pcinet_vector_in_use()).
 */
static_assert(PCINET_CHAN_VIRTIO < PCINET_MAX_CHAN);

/*
 * Feature bits, in struct pcinet_ctrl @features.  A side writes the bits
 * it supports; unknown bits are ignored on read; a feature is in use only
 * when both sides set it.  (Today nothing depends on them: the bits
 * describe what the current driver always does.)
 *
 * PCINET_F_TTY_CRC: tty records carry PCINET_REC_F_CRC and a CRC-32C.
 * (The net ring needs no bit: its integrity flag is per record.)
 *
 * PCINET_F_VIRTIO: W speaks the virtio channel (PCINET_CHAN_VIRTIO, struct
 * pcinet_win_vio and what it points to; docs/design.md, "Virtio
 * channel").  A side touches the peer's virtio regions only while the
 * peer sets this bit, so an old peer sees no virtio channel, and a new
 * side never mistakes an old peer's silence for a device.  A side sets it
 * only while the window has a valid virtio block (pcinet_layout_parse()
 * @has_vio) and its virtio channel runs.
 */
#define PCINET_F_TTY_CRC	0x00000001
#define PCINET_F_VIRTIO		0x00000002

/*
 * A side's name, in struct pcinet_ctrl @name: a field of PCINET_NAME_LEN
 * bytes holding at most PCINET_NAME_MAX characters, so that a name always
 * fits a Linux interface name (IFNAMSIZ, 16 with its NUL).
 */
#define PCINET_NAME_LEN		16
#define PCINET_NAME_MAX		(PCINET_NAME_LEN - 1)

/**
 * struct pcinet_win_side - where one side's inbox lives in the window
 * @ctrl_off: offset of the side's control inbox (struct pcinet_ctrl)
 * @data_off: offset of the side's data inbox
 * @data_size: size in bytes of the data inbox
 */
struct pcinet_win_side {
	__le64 ctrl_off;
	__le64 data_off;
	__le64 data_size;
};

/**
 * struct pcinet_win_hdr - window header, written once by the platform
 * @magic: PCINET_WIN_MAGIC; a window without it is not for pcinet
 * @version: PCINET_VERSION
 * @hdr_size: size of this header in bytes (PCINET_HDR_SIZE)
 * @win_size: size of the whole window in bytes
 * @nr_vectors: doorbell vectors each side can ring, at least 1
 * @reserved0: written zero by the platform, ignored by the sides
 * @side: inbox placement of side 0 and side 1
 * @attach_epoch: written by the platform whenever side i attaches or
 *	detaches: odd while side i is attached.  A side that sees its
 *	peer's epoch change knows the peer went away, even if the peer
 *	could not say so itself (killed, powered off).
 * @doorbell_id: platform address of side i's doorbell, written by the
 *	platform before side i attaches.  For ivshmem it is the peer ID to
 *	write into the peer's Doorbell register; its low bit is the side.
 *	(QEMU 7.2 cannot take a peer ID back after its owner left, so the
 *	fabric hands out a new one on every attach.)
 *
 * The sides only read the header.  The rest of the header page after
 * this structure is written zero and ignored.
 *
 * Validation (pcinet_layout_parse(), what a side must check before it
 * uses a window): the mapping holds at least PCINET_HDR_SIZE bytes;
 * @magic, @version and @hdr_size are exactly PCINET_WIN_MAGIC,
 * PCINET_VERSION and PCINET_HDR_SIZE; @nr_vectors is not zero; the usable
 * window is min(@win_size, the size mapped); for each side, @ctrl_off is
 * a multiple of PCINET_CACHELINE, @data_off a multiple of
 * PCINET_REC_ALIGN, the control inbox (PCINET_CTRL_SIZE bytes) and the
 * data inbox lie inside the usable window, and the data inbox is big
 * enough for pcinet_layout_ring(); and no two of the five regions (the
 * header page, two control inboxes, two data inboxes) overlap.  A window
 * that fails any check is not used.
 *
 * Ordering: a platform writes every other byte of the header page, then
 * @magic, with a store-release (pcinet_layout_write()); a side reads
 * @magic first, with a load-acquire, then the rest.  A platform that
 * rewrites a live header clears @magic first.  @attach_epoch and
 * @doorbell_id change later, each with a store-release of its own.
 */
struct pcinet_win_hdr {
	__le32 magic;
	__le16 version;
	__le16 hdr_size;
	__le64 win_size;
	__le32 nr_vectors;
	__le32 reserved0;
	struct pcinet_win_side side[2];
	__le32 attach_epoch[2];
	__le32 doorbell_id[2];
};

/**
 * struct pcinet_chan_ctrl - signalling of one channel, in one inbox
 *
 * Lives in the inbox of side R and is written by its peer W.
 *
 * @prod: bytes W has published into the ring W->R (whose data is in this
 *	inbox); free-running, wraps at 2^32
 * @need_space: nonzero while W waits for room in ring W->R: R rings
 *	the channel's doorbell after it consumes
 * @pad0: written zero, ignored on read
 * @cons: bytes W has consumed from the ring R->W (whose data is in W's
 *	inbox); free-running
 * @event: W wants a doorbell when R's @prod for ring R->W passes this
 *	index (the virtio event-index rule, pcinet_need_event())
 * @pad1: written zero, ignored on read
 */
struct pcinet_chan_ctrl {
	/* cacheline: about ring W->R, W produces */
	__le32 prod;
	__le32 need_space;
	__le32 pad0[14];
	/* cacheline: about ring R->W, W consumes */
	__le32 cons;
	__le32 event;
	__le32 pad1[14];
};

/**
 * struct pcinet_ctrl - control inbox of side R, written by its peer W
 * @magic: PCINET_CTRL_MAGIC once W has initialised this block
 * @gen: W's generation: nonzero while W runs, new on every reset of W
 * @peer_gen: the generation of R that W has synchronised with: W has
 *	zeroed its indices for that generation of R
 * @heartbeat: incremented by W periodically while it runs
 * @chan_open: bit n set while W has channel n open (interface up)
 * @ack_gen: W's own generation when it wrote @peer_gen: the
 *	acknowledgment names both generations, so R comes up only on an
 *	ack made by the generation of W it is synchronised with
 * @features: PCINET_F_* bits W supports; R ignores bits it does not know
 * @slot: W's slot number (the board's place in its chassis, as W's
 *	administrator configured it); 0: unknown.  Any other value is
 *	shown as it is, R gives it no meaning of its own
 * @name: W's name, so R can tell which board is at the other end: up to
 *	PCINET_NAME_MAX bytes of the characters pcinet_name_char_ok()
 *	accepts (letters, digits, '-', '_', '.'), then zero bytes up to the
 *	end of the field (the last byte is always zero).  All zero: no name
 *	published.  R reads it only through pcinet_ident_read(), which
 *	copies it out and sanitizes it (pcinet_name_sanitize())
 * @pad: written zero, ignored on read
 * @chan: per-channel signalling
 *
 * Everything here is soft state: W writes every word of it again on
 * every link tick (PCINET_TICK_MS), so a word overwritten by a third
 * party is repaired within one tick.  Before it first publishes @gen, W
 * zeroes the whole structure; the rest of the PCINET_CTRL_SIZE inbox
 * after it is unused (neither written nor read).
 *
 * The block is live (W runs) when @magic is PCINET_CTRL_MAGIC and @gen
 * is not zero (pcinet_ctrl_live()).  W orders its stores: indices zeroed
 * before @peer_gen or @gen is published (store-release), @ack_gen before
 * @peer_gen; R load-acquires @gen and @peer_gen before it trusts what
 * they order (L1/L2 in docs/design.md).
 *
 * Identity (@slot and @name): W writes them with the other words, before
 * its store-release of @gen (L1); R reads them only while the block is
 * live, after its load-acquire of @gen (L2).  An all-zero identity (a
 * peer that predates it: the words were @pad, written zero) means none
 * published and is valid.  W's identity does not change while it runs.
 */
struct pcinet_ctrl {
	__le32 magic;
	__le32 gen;
	__le32 peer_gen;
	__le32 heartbeat;
	__le32 chan_open;
	__le32 ack_gen;
	__le32 features;
	__le32 slot;
	__u8 name[PCINET_NAME_LEN];
	__le32 pad[4];
	struct pcinet_chan_ctrl chan[PCINET_MAX_CHAN];
};

/**
 * pcinet_ctrl_live - does a control block say its writer runs?
 * @magic: the block's @magic, as read
 * @gen: the block's @gen, as read
 *
 * Return: true if @magic is PCINET_CTRL_MAGIC and @gen is not zero.
 */
static inline bool pcinet_ctrl_live(__u32 magic, __u32 gen)
{
	return magic == PCINET_CTRL_MAGIC && gen != 0;
}

/**
 * pcinet_name_char_ok - may a side's name hold this character?
 * @c: the character
 *
 * The characters of a name (struct pcinet_ctrl @name) are those that
 * are safe in an interface name, a file name and a udev rule.
 *
 * Return: true for a letter, a digit, '-', '_' or '.'.
 */
static inline bool pcinet_name_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

/**
 * pcinet_name_sanitize - make a name fit for struct pcinet_ctrl @name
 * @dst: PCINET_NAME_LEN bytes, filled in: the name, then zero bytes to
 *	the end (so always NUL-terminated); all zero for no name
 * @src: the name: a C string, or a private copy of a @name field; at
 *	most PCINET_NAME_MAX bytes of it are read, up to its first zero byte
 *	(a field without one is read to its bound, never beyond)
 *
 * Every byte that pcinet_name_char_ok() refuses becomes '_'.  The writer
 * uses it to fill the field (every byte of it written, nothing left of
 * what was there), the reader on its copy of what the peer wrote: the
 * same rule both ways, so a peer that follows it reads back exactly what
 * it wrote.
 *
 * Return: the length of the name in @dst.
 */
static inline unsigned int pcinet_name_sanitize(char *dst, const char *src)
{
	unsigned int i;

	for (i = 0; i < PCINET_NAME_MAX && src[i]; i++)
		dst[i] = pcinet_name_char_ok(src[i]) ? src[i] : '_';
	memset(dst + i, 0, PCINET_NAME_LEN - i);
	return i;
}

/**
 * pcinet_need_event - does an index move cross the other side's event?
 * @event: the index the other side asked to be woken after (@event of
 *	struct pcinet_chan_ctrl)
 * @new_idx: our index after the move (the @prod just published)
 * @old_idx: our index before the move (where the batch started)
 *
 * The virtio event-index rule (vring_need_event()): the consumer writes
 * @event = its @cons before it sleeps, then re-reads @prod; the producer
 * publishes @prod, then reads @event, and rings the channel's vector if
 * @event lies in [@old_idx, @new_idx), that is, the consumer went to
 * sleep before seeing some of the batch.  Unsigned 32-bit arithmetic:
 * indices wrap at 2^32.
 *
 * Return: true if a doorbell is due.
 */
static inline bool pcinet_need_event(__u32 event, __u32 new_idx,
				     __u32 old_idx)
{
	return (__u32)(new_idx - event - 1) < (__u32)(new_idx - old_idx);
}

/*
 * struct pcinet_vnet_hdr - per-packet offload metadata on the net ring.
 * Same layout as struct virtio_net_hdr with little-endian fields, so the
 * kernel's virtio_net_hdr helpers fill and check it.
 * @flags: VIRTIO_NET_HDR_F_*
 * @gso_type: VIRTIO_NET_HDR_GSO_*
 * @hdr_len: bytes of headers before the GSO payload
 * @gso_size: MSS of a GSO packet
 * @csum_start: where checksumming starts (CHECKSUM_PARTIAL)
 * @csum_offset: where to store the checksum, from @csum_start
 */
struct pcinet_vnet_hdr {
	__u8 flags;
	__u8 gso_type;
	__le16 hdr_len;
	__le16 gso_size;
	__le16 csum_start;
	__le16 csum_offset;
};

/**
 * struct pcinet_rec - header of one record on a ring (net and tty)
 * @len: payload bytes that follow the header: at most PCINET_NET_MAX_LEN
 *	on the net ring, PCINET_TTY_REC_MAX on the tty ring
 * @vnet: offload metadata (net); zero on the tty ring, ignored there
 * @flags: PCINET_REC_F_*; other bits written zero, ignored by the
 *	receiver
 * @crc: with PCINET_REC_F_CRC, the CRC-32C (Castagnoli, as in iSCSI and
 *	ext4: initial value ~0, final xor ~0) of the 16 header bytes before
 *	this field followed by the @len payload bytes.  The sender computes
 *	it over its own copy of the data, the receiver over the copy it
 *	made out of the window: a byte changed in the window in between
 *	costs the record, never delivers wrong data.
 *
 * Records start on PCINET_REC_ALIGN boundaries; a record's payload may
 * wrap around the end of the ring, its header never does.  The net ring
 * carries one frame per record; the tty ring carries the byte stream cut
 * into records at any point, every one with PCINET_REC_F_CRC (a tty
 * receiver drops a record without it, or with a wrong CRC, and goes on
 * with the next: a gap in the stream, never a changed byte).
 */
struct pcinet_rec {
	__le32 len;
	struct pcinet_vnet_hdr vnet;
	__le16 flags;
	__le32 crc;
};

#define PCINET_REC_F_CRC	0x0001	/* @crc is valid */

#define PCINET_REC_ALIGN	64

/* Ring sizes inside a data inbox. */
#define PCINET_TTY_RING_SIZE	(64 * 1024)
/* Largest payload of one tty record. */
#define PCINET_TTY_REC_MAX	2048
#define PCINET_NET_RING_MIN	(512 * 1024)
/*
 * Largest payload of one net record: a 64 KiB GSO packet plus its
 * headers.  A receiver treats a longer record as a protocol error.
 */
#define PCINET_NET_MAX_LEN	(65536 + 512)

static_assert(sizeof(struct pcinet_win_side) == 24);
static_assert(sizeof(struct pcinet_win_hdr) == 88);
static_assert(offsetof(struct pcinet_win_hdr, side) == 24);
static_assert(offsetof(struct pcinet_win_hdr, attach_epoch) == 72);
static_assert(offsetof(struct pcinet_win_hdr, doorbell_id) == 80);
static_assert(sizeof(struct pcinet_win_hdr) <= PCINET_HDR_SIZE);
static_assert(sizeof(struct pcinet_chan_ctrl) == 2 * PCINET_CACHELINE);
static_assert(offsetof(struct pcinet_chan_ctrl, cons) == PCINET_CACHELINE);
static_assert(offsetof(struct pcinet_ctrl, heartbeat) == 12);
static_assert(offsetof(struct pcinet_ctrl, chan_open) == 16);
static_assert(offsetof(struct pcinet_ctrl, ack_gen) == 20);
static_assert(offsetof(struct pcinet_ctrl, features) == 24);
static_assert(offsetof(struct pcinet_ctrl, slot) == 28);
static_assert(offsetof(struct pcinet_ctrl, name) == 32);
static_assert(offsetof(struct pcinet_ctrl, pad) == 48);
static_assert(offsetof(struct pcinet_ctrl, chan) == PCINET_CACHELINE);
static_assert(sizeof(struct pcinet_ctrl) ==
	      PCINET_CACHELINE + PCINET_MAX_CHAN * 2 * PCINET_CACHELINE);
static_assert(sizeof(struct pcinet_ctrl) <= PCINET_CTRL_SIZE);
static_assert(PCINET_NR_CHAN <= PCINET_MAX_CHAN);
static_assert(sizeof(struct pcinet_vnet_hdr) == 10);
static_assert(sizeof(struct pcinet_rec) == 20);
static_assert(offsetof(struct pcinet_rec, flags) == 14);
static_assert(offsetof(struct pcinet_rec, crc) == 16);
static_assert(offsetof(struct pcinet_rec, vnet) == 4);
static_assert(sizeof(struct pcinet_rec) <= PCINET_REC_ALIGN);

/*
 * ----- The virtio channel: wire structures -----
 *
 * docs/design.md, "Virtio channel", is the protocol; this is its ABI.
 * Roles: a side that serves virtio devices is their *device side* D (the
 * host: pcinet-vhost and stock vhost-user back ends); a side that uses
 * them is their *driver side* B (the board: the stock virtio_blk and
 * virtiofs drivers over pcinet's transport).  Either side may be both, for
 * different devices.  Every side owns two virtio regions, placed by the
 * platform in struct pcinet_win_vio:
 *
 *   dev region of side R: in R's memory, read by R as a device, written by
 *     the peer as the driver of R's devices:
 *       struct pcinet_vio_rhdr (magic PCINET_VIO_DRVS_MAGIC)
 *       struct pcinet_vio_drvstate[PCINET_VIO_MAX_DEV]
 *       heap (from PCINET_VIO_FIXED_SIZE): per device, its virtqueues'
 *         descriptor tables and avail rings, and its OUT pool (data the
 *         driver sends, indirect tables)
 *   drv region of side R: in R's memory, read by R as a driver, written by
 *     the peer as the device side of the devices R uses:
 *       struct pcinet_vio_rhdr (magic PCINET_VIO_DEVS_MAGIC)
 *       struct pcinet_vio_devdesc[PCINET_VIO_MAX_DEV]
 *       heap: per device, its virtqueues' used rings and its IN pool
 *         (data the device returns)
 *
 * The heaps are laid out by the device side when it offers a device: one
 * PCINET_VIO_ALIGN-aligned span per region and device, holding all of
 * that device's areas in the region, so a back end can be given exactly
 * its device's pages.  The offsets are in struct pcinet_vio_devdesc, and
 * the driver side checks every one of them before it uses any.  So for a
 * device of D used by B, each side reads only its own memory and writes
 * only the peer's:
 *
 *   B writes (posted)                      D reads (local)
 *     desc table, avail ring, OUT data  ->   D's dev region
 *     driver state (status, features...)
 *   D writes (posted)                      B reads (local)
 *     used ring, IN data                ->   B's drv region
 *     device description, config, status echo
 *
 * The split virtqueue format (virtio 1.x, 2.7) allows the three parts of
 * a ring at unrelated addresses.  Descriptor addresses, and the ring
 * addresses a device side hands its back end, are *window offsets*.  The
 * stock virtio drivers never see this ring: on the driver side the
 * transport keeps a private ring in its own memory for them and relays it
 * (docs/design.md, "The relay").
 */

/* Virtio devices a side can offer, virtqueues per device. */
#define PCINET_VIO_MAX_DEV	8
#define PCINET_VIO_MAX_VQ	8
/* Bytes of device-specific configuration space carried. */
#define PCINET_VIO_CONFIG_SIZE	256
/* Largest virtqueue (a power of two); libvhost-user's limit. */
#define PCINET_VIO_NUM_MAX	1024
/* Alignment and smallest size of a virtio region. */
#define PCINET_VIO_ALIGN	0x10000
/* The fixed part at the start of every region; the heap follows. */
#define PCINET_VIO_FIXED_SIZE	0x2000
/* Alignment of a pool, and of every buffer placed in one. */
#define PCINET_VIO_POOL_ALIGN	4096
/*
 * Largest pool a driver side accepts (per direction): the relay copies a
 * pass's requests in and out of the pools with interrupts off, so the
 * pool bounds that time.  Larger: PCINET_VIO_ERR_UNSUPP.
 */
#define PCINET_VIO_POOL_MAX	(4U << 20)
/*
 * How long a driver side waits for the device side to answer a status
 * write (reset, FEATURES_OK) before it declares the device gone.  The
 * device side answers a reset only once its back end stopped touching
 * the rings, which takes a vhost-user round trip per queue and the
 * requests the back end still holds; pcinet-vhost and pcinet-peer bound
 * that to about 1.6 s, killing a back end that holds them longer
 * (docs/design.md, virtio open question 11: the budget).
 */
#define PCINET_VIO_ACK_MS	3000

#define PCINET_WIN_VIO_MAGIC	0x4f495650	/* "PVIO" */
#define PCINET_WIN_VIO_VERSION	1
/* Where struct pcinet_win_vio sits in the window header page. */
#define PCINET_HDR_VIO_OFF	128
#define PCINET_VIO_DRVS_MAGIC	0x53565244	/* "DRVS": a dev region */
#define PCINET_VIO_DEVS_MAGIC	0x53564544	/* "DEVS": a drv region */

/**
 * struct pcinet_win_vio_side - the two virtio regions of one side
 * @dev_off: window offset of the side's dev region (see above); written by
 *	the peer as a driver, read by this side as a device
 * @dev_size: its size in bytes; 0: this side serves no devices
 * @drv_off: window offset of the side's drv region; written by the peer
 *	as a device, read by this side as a driver
 * @drv_size: its size in bytes; 0: this side uses no devices
 *
 * Offsets and sizes are multiples of PCINET_VIO_ALIGN; a region that is
 * not empty holds at least PCINET_VIO_ALIGN bytes.
 */
struct pcinet_win_vio_side {
	__le64 dev_off;
	__le64 dev_size;
	__le64 drv_off;
	__le64 drv_size;
};

/**
 * struct pcinet_win_vio - the virtio regions, in the window header page
 * @magic: PCINET_WIN_VIO_MAGIC; anything else: the window has no virtio
 *	regions (every platform before the virtio channel writes 0 here)
 * @version: PCINET_WIN_VIO_VERSION; another value: no virtio regions
 * @size: sizeof(struct pcinet_win_vio), 80
 * @reserved: written zero, ignored
 * @side: the regions of side 0 and side 1
 *
 * Lives at PCINET_HDR_VIO_OFF in the header page, which sides before the
 * virtio channel ignore (the page after struct pcinet_win_hdr is "written
 * zero, ignored").  The platform writes it with the rest of the page,
 * before the header's @magic (pcinet_layout_write_vio()), so the
 * header's P1/P2 ordering covers it.  pcinet_layout_parse() checks it:
 * @magic, @version and @size exact; each non-empty region aligned, inside
 * the usable window, and overlapping neither another virtio region nor
 * the header page, a control inbox or a data inbox.  A window that fails
 * is used without its virtio regions (net and tty are unaffected).
 */
struct pcinet_win_vio {
	__le32 magic;
	__le16 version;
	__le16 size;
	__le32 reserved[2];
	struct pcinet_win_vio_side side[2];
};

/**
 * struct pcinet_vio_rhdr - head of a virtio region, written by its writer
 * @magic: PCINET_VIO_DRVS_MAGIC (dev region) or PCINET_VIO_DEVS_MAGIC (drv
 *	region) once the writer W initialised the fixed part
 * @inst: W's virtio instance: random and nonzero, new every time W's
 *	driver creates the link; 0 while W is stopped.  Unlike the link's
 *	@gen it survives link resets, so a reset of net or tty leaves the
 *	virtio devices alone; a change of @inst means W restarted
 * @peer_inst: the reader's @inst as W last saw it (diagnostics)
 * @nr_slots: PCINET_VIO_MAX_DEV: the slot blocks that follow
 * @pad: written zero, ignored
 *
 * Soft state, rewritten by W on every link tick while it runs.  A reader
 * that reads a wrong @magic or another @inst (or W's @features without
 * PCINET_F_VIRTIO) takes W for gone or restarted only once that held on
 * every look for PCINET_PEER_GRACE_MS: a restart is seen up to that much
 * later, a scribbled word never ends a session.
 */
struct pcinet_vio_rhdr {
	__le32 magic;
	__le32 inst;
	__le32 peer_inst;
	__le32 nr_slots;
	__le32 pad[12];
};

/**
 * struct pcinet_vio_vqdesc - where one virtqueue of a device lives
 * @num_max: largest queue size the device accepts, a power of two,
 *	1..PCINET_VIO_NUM_MAX; 0: no such queue.  The areas below are sized
 *	for it; the driver may use any power of two up to it
 * @reserved0: written zero, ignored
 * @reserved1: written zero, ignored
 * @desc_off: window offset of the descriptor table (16 * num_max bytes,
 *	16-aligned), in the device side's dev region
 * @avail_off: window offset of the avail ring (6 + 2 * num_max bytes,
 *	2-aligned), in the device side's dev region
 * @used_off: window offset of the used ring (6 + 8 * num_max bytes,
 *	4-aligned), in the driver side's drv region
 */
struct pcinet_vio_vqdesc {
	__le16 num_max;
	__le16 reserved0;
	__le32 reserved1;
	__le64 desc_off;
	__le64 avail_off;
	__le64 used_off;
};

/**
 * struct pcinet_vio_devdesc - one device, as its device side describes it
 * @dev_gen: nonzero while the device is offered; a new value for every
 *	offer (an instance of the device).  Written last, with a
 *	store-release (V1); everything but the live words below is fixed
 *	for as long as @dev_gen does not change.  0: the slot is empty
 * @device_id: virtio device ID (2 block, 26 file system)
 * @vendor_id: virtio vendor ID
 * @nr_vq: virtqueues, 1..PCINET_VIO_MAX_VQ
 * @features: device feature bits 0..63 as the device side offers them:
 *	VIRTIO_F_VERSION_1 always; never VIRTIO_F_ACCESS_PLATFORM or
 *	vhost-user's own bits (PROTOCOL_FEATURES, LOG_ALL,
 *	NOTIFY_ON_EMPTY); ring bits (INDIRECT_DESC, EVENT_IDX) describe
 *	this ring, which the driver side's relay drives
 * @status: live: the device status the device side has applied (the
 *	driver's @status, less any bit it refused, e.g. FEATURES_OK)
 * @status_seq: live: the driver's @status_seq that @status answers;
 *	stored with a store-release after @status and @drv_gen (V4)
 * @drv_gen: live: the driver's @drv_gen that @status answers
 * @config_gen: live: bumped, with a store-release (V5), after every
 *	change of @config; the virtio configuration generation
 * @config_len: valid bytes of @config, at most PCINET_VIO_CONFIG_SIZE;
 *	the rest reads as zero
 * @reserved0: written zero, ignored
 * @out_pool_off: window offset of the OUT pool (data and indirect tables
 *	the driver sends), in the device side's dev region,
 *	PCINET_VIO_POOL_ALIGN-aligned
 * @out_pool_size: its size, a multiple of PCINET_VIO_POOL_ALIGN
 * @in_pool_off: window offset of the IN pool (data the device returns),
 *	in the driver side's drv region, PCINET_VIO_POOL_ALIGN-aligned
 * @in_pool_size: its size, a multiple of PCINET_VIO_POOL_ALIGN
 * @dev_span_off: window offset of the device's span of the device side's
 *	dev region: PCINET_VIO_ALIGN-aligned, after the fixed part; every
 *	area of the device in that region (descriptor tables, avail rings,
 *	OUT pool) lies inside it, and no other device's span overlaps it
 * @dev_span_size: its size, a multiple of PCINET_VIO_ALIGN
 * @drv_span_off: the same in the driver side's drv region (used rings,
 *	IN pool)
 * @drv_span_size: its size, a multiple of PCINET_VIO_ALIGN
 * @reserved1: written zero, ignored
 * @vq: the virtqueues (the first @nr_vq; the rest zero)
 * @config: live: the device-specific configuration space
 *
 * In the driver side's drv region, slot n at PCINET_CACHELINE +
 * n * sizeof(struct pcinet_vio_devdesc).  Written by the device side
 * only.  The driver side copies the fixed fields out once per @dev_gen,
 * re-reading @dev_gen afterwards (V2), checks every one of them, and
 * reads the live words each time it needs them.
 */
struct pcinet_vio_devdesc {
	__le32 dev_gen;
	__le32 device_id;
	__le32 vendor_id;
	__le32 nr_vq;
	__le64 features;
	__le32 status;
	__le32 status_seq;
	__le32 drv_gen;
	__le32 config_gen;
	__le32 config_len;
	__le32 reserved0;
	__le64 out_pool_off;
	__le64 out_pool_size;
	__le64 in_pool_off;
	__le64 in_pool_size;
	__le64 dev_span_off;
	__le64 dev_span_size;
	__le64 drv_span_off;
	__le64 drv_span_size;
	__le32 reserved1[4];
	struct pcinet_vio_vqdesc vq[PCINET_VIO_MAX_VQ];
	__u8 config[PCINET_VIO_CONFIG_SIZE];
};

/**
 * struct pcinet_vio_vqstate - one virtqueue, as the driver side runs it
 * @num: queue size in use, a power of two up to the device's @num_max; 0
 *	while the queue is not set up
 * @ready: 1 while the queue is set up and its device ring initialised
 *	(avail ring zeroed), 0 otherwise
 * @notify: bumped by the driver side whenever it wants the device to
 *	look at the avail ring (a kick), before it rings PCINET_VEC_VIRTIO;
 *	the device side compares it with the value it last saw (the value
 *	itself means nothing)
 * @reserved: written zero, ignored
 */
struct pcinet_vio_vqstate {
	__le16 num;
	__le16 ready;
	__le32 notify;
	__le32 reserved[2];
};

/**
 * struct pcinet_vio_drvstate - one device, as its driver side drives it
 * @drv_gen: nonzero while the driver side has device instance @dev_gen
 *	registered; random, new for every registration.  0: not in use
 * @dev_gen: the device instance (struct pcinet_vio_devdesc @dev_gen) this
 *	block talks to; a device side ignores a block naming another
 * @status: the virtio device status the driver wrote last
 *	(VIRTIO_CONFIG_S_*; 0 is a reset)
 * @status_seq: bumped, with a store-release after @status and @features
 *	(V3), on every status write, a reset included
 * @features: the driver's feature bits for the device ring, valid from
 *	FEATURES_OK in @status: device features the driver accepted, plus
 *	the ring features the relay uses; never ACCESS_PLATFORM
 * @config_seq: bumped, with a store-release (V6), after every write the
 *	driver made into @config
 * @error: PCINET_VIO_ERR_*: why the driver side dropped or refused
 *	@dev_gen (then @drv_gen is 0); 0 otherwise
 * @config_dirty: bit n (word n / 32, bit n % 32) set once the driver
 *	wrote byte n of @config; sticky for the life of @drv_gen
 * @vq: per virtqueue
 * @config: what the driver wrote into the device's configuration space,
 *	at the bytes marked in @config_dirty
 *
 * In the device side's dev region, slot n at PCINET_CACHELINE +
 * n * sizeof(struct pcinet_vio_drvstate).  Written by the driver side
 * only; soft state, rewritten every link tick.
 */
struct pcinet_vio_drvstate {
	__le32 drv_gen;
	__le32 dev_gen;
	__le32 status;
	__le32 status_seq;
	__le64 features;
	__le32 config_seq;
	__le32 error;
	__le32 config_dirty[PCINET_VIO_CONFIG_SIZE / 32];
	struct pcinet_vio_vqstate vq[PCINET_VIO_MAX_VQ];
	__u8 config[PCINET_VIO_CONFIG_SIZE];
};

/* Why a driver side dropped or refused a device (struct pcinet_vio_drvstate @error). */
enum pcinet_vio_err {
	PCINET_VIO_ERR_NONE = 0,
	PCINET_VIO_ERR_DESC = 1,	/* the description failed a check */
	PCINET_VIO_ERR_RING = 2,	/* impossible used ring (index, id, length) */
	PCINET_VIO_ERR_TIMEOUT = 3,	/* no answer to a status write in time */
	PCINET_VIO_ERR_NOMEM = 4,	/* the driver side could not set it up */
	PCINET_VIO_ERR_UNSUPP = 5,	/* device ID, features or sizes not supported */
};

/**
 * struct pcinet_vring_desc - a descriptor of a device ring
 * @addr: window offset of the buffer: inside the device's OUT pool
 *	(device reads) or IN pool (device writes, VRING_DESC_F_WRITE)
 * @len: buffer length in bytes
 * @flags: VRING_DESC_F_NEXT, _WRITE, _INDIRECT
 * @next: next descriptor of the chain, with VRING_DESC_F_NEXT
 *
 * virtio's struct vring_desc, little-endian, with window offsets for
 * addresses.  The avail ring (flags, idx, ring[num], used_event) and the
 * used ring (flags, idx, ring[num] of struct pcinet_vring_used_elem,
 * avail_event) are virtio's, all fields __le16 except the elements.
 */
struct pcinet_vring_desc {
	__le64 addr;
	__le32 len;
	__le16 flags;
	__le16 next;
};

/**
 * struct pcinet_vring_used_elem - an entry of a device ring's used ring
 * @id: head of the completed chain; the driver side checks it is below
 *	the ring size and in flight
 * @len: bytes the device wrote into the chain's device-writable buffers;
 *	the driver side checks it is at most their total
 */
struct pcinet_vring_used_elem {
	__le32 id;
	__le32 len;
};

/* Bytes of the three parts of a split ring of @num entries (with event words). */
#define PCINET_VRING_DESC_BYTES(num)	(16 * (__u64)(num))
#define PCINET_VRING_AVAIL_BYTES(num)	(6 + 2 * (__u64)(num))
#define PCINET_VRING_USED_BYTES(num)	(6 + 8 * (__u64)(num))
/* Their alignment (virtio 1.x, 2.7.2). */
#define PCINET_VRING_DESC_ALIGN		16
#define PCINET_VRING_AVAIL_ALIGN	2
#define PCINET_VRING_USED_ALIGN		4

static_assert(sizeof(struct pcinet_win_vio_side) == 32);
static_assert(sizeof(struct pcinet_win_vio) == 80);
static_assert(offsetof(struct pcinet_win_vio, side) == 16);
static_assert(PCINET_HDR_VIO_OFF % PCINET_CACHELINE == 0);
static_assert(sizeof(struct pcinet_win_hdr) <= PCINET_HDR_VIO_OFF);
static_assert(PCINET_HDR_VIO_OFF + sizeof(struct pcinet_win_vio) <=
	      PCINET_HDR_SIZE);
static_assert(sizeof(struct pcinet_vio_rhdr) == PCINET_CACHELINE);
static_assert(sizeof(struct pcinet_vio_vqdesc) == 32);
static_assert(offsetof(struct pcinet_vio_vqdesc, desc_off) == 8);
static_assert(offsetof(struct pcinet_vio_devdesc, features) == 16);
static_assert(offsetof(struct pcinet_vio_devdesc, status) == 24);
static_assert(offsetof(struct pcinet_vio_devdesc, config_gen) == 36);
static_assert(offsetof(struct pcinet_vio_devdesc, out_pool_off) == 48);
static_assert(offsetof(struct pcinet_vio_devdesc, in_pool_off) == 64);
static_assert(offsetof(struct pcinet_vio_devdesc, dev_span_off) == 80);
static_assert(offsetof(struct pcinet_vio_devdesc, drv_span_off) == 96);
static_assert(offsetof(struct pcinet_vio_devdesc, vq) == 2 * PCINET_CACHELINE);
static_assert(offsetof(struct pcinet_vio_devdesc, config) == 6 * PCINET_CACHELINE);
static_assert(sizeof(struct pcinet_vio_devdesc) == 10 * PCINET_CACHELINE);
static_assert(sizeof(struct pcinet_vio_vqstate) == 16);
static_assert(offsetof(struct pcinet_vio_drvstate, features) == 16);
static_assert(offsetof(struct pcinet_vio_drvstate, config_dirty) == 32);
static_assert(offsetof(struct pcinet_vio_drvstate, vq) == PCINET_CACHELINE);
static_assert(offsetof(struct pcinet_vio_drvstate, config) ==
	      3 * PCINET_CACHELINE);
static_assert(sizeof(struct pcinet_vio_drvstate) == 7 * PCINET_CACHELINE);
static_assert(PCINET_CACHELINE + PCINET_VIO_MAX_DEV *
	      sizeof(struct pcinet_vio_devdesc) <= PCINET_VIO_FIXED_SIZE);
static_assert(PCINET_CACHELINE + PCINET_VIO_MAX_DEV *
	      sizeof(struct pcinet_vio_drvstate) <= PCINET_VIO_FIXED_SIZE);
static_assert(PCINET_VIO_FIXED_SIZE < PCINET_VIO_ALIGN);
static_assert(sizeof(struct pcinet_vring_desc) == 16);
static_assert(sizeof(struct pcinet_vring_used_elem) == 8);

/**
 * pcinet_vio_num_ok - is @num a virtqueue size the channel allows?
 * @num: the size
 *
 * Return: true for a power of two from 1 to PCINET_VIO_NUM_MAX.
 */
static inline bool pcinet_vio_num_ok(__u32 num)
{
	return num && num <= PCINET_VIO_NUM_MAX && !(num & (num - 1));
}

/**
 * struct pcinet_ring_loc - where one ring of a data inbox lives
 * @off: byte offset of the ring in the window
 * @size: ring size in bytes, a power of two
 */
struct pcinet_ring_loc {
	__u64 off;
	__u32 size;
};

/**
 * pcinet_layout_ring - place channel @chan's ring inside a data inbox
 * @data_off: offset of the data inbox in the window
 * @data_size: size of the data inbox
 * @chan: the channel, one of the first PCINET_NR_RING_CHAN
 * @loc: filled in
 *
 * Both sides and the platform derive ring placement from the inbox
 * placement with this one function, so they cannot disagree.
 *
 * Return: 0, or -1 if the inbox is too small or @chan has no byte ring.
 */
static inline int pcinet_layout_ring(__u64 data_off, __u64 data_size,
				     enum pcinet_chan chan,
				     struct pcinet_ring_loc *loc)
{
	__u64 net_room;
	__u32 net_size;

	if (data_size < PCINET_TTY_RING_SIZE + PCINET_NET_RING_MIN ||
	    (unsigned int)chan >= PCINET_NR_RING_CHAN)
		return -1;
	if (chan == PCINET_CHAN_TTY) {
		loc->off = data_off;
		loc->size = PCINET_TTY_RING_SIZE;
		return 0;
	}
	net_room = data_size - PCINET_TTY_RING_SIZE;
	net_size = PCINET_NET_RING_MIN;
	while ((__u64)net_size * 2 <= net_room && net_size < (1U << 30))
		net_size *= 2;
	loc->off = data_off + PCINET_TTY_RING_SIZE;
	loc->size = net_size;
	return 0;
}

/*
 * The layout pcinet_layout_fill() gives a window (pcinet-fabric's): the
 * header page at 0, the control inboxes of side 0 and side 1 in the next
 * two pages, then, from PCINET_LAYOUT_DATA_OFF, the two data inboxes of
 * equal size, each the largest multiple of PCINET_LAYOUT_DATA_ALIGN that
 * fits in half of what is left.  Sides never assume it: they read the
 * header.
 */
#define PCINET_LAYOUT_CTRL0_OFF		0x1000
#define PCINET_LAYOUT_CTRL1_OFF		0x2000
#define PCINET_LAYOUT_DATA_OFF		0x10000
#define PCINET_LAYOUT_DATA_ALIGN	0x10000

static_assert(PCINET_HDR_SIZE <= PCINET_LAYOUT_CTRL0_OFF);
static_assert(PCINET_LAYOUT_CTRL0_OFF + PCINET_CTRL_SIZE <=
	      PCINET_LAYOUT_CTRL1_OFF);
static_assert(PCINET_LAYOUT_CTRL1_OFF + PCINET_CTRL_SIZE <=
	      PCINET_LAYOUT_DATA_OFF);

/**
 * pcinet_layout_fill - compute a window header, in private memory
 * @hdr: filled in: magic, version, sizes and inbox placement; the attach
 *	epochs, doorbell IDs and reserved words zero
 * @win_size: size of the window in bytes
 * @nr_vectors: doorbell vectors each side can ring
 *
 * Nothing is written to a window: pcinet_layout_write() does that, in
 * the right order.  A platform that keeps its own copy of the header (to
 * update the epochs, or to repair a header overwritten in the window)
 * uses the two separately; pcinet_layout_init() does both.
 *
 * Return: 0, or -1 if @nr_vectors is zero or the window is too small
 * for the rings.
 */
static inline int pcinet_layout_fill(struct pcinet_win_hdr *hdr,
				     __u64 win_size, __u32 nr_vectors)
{
	struct pcinet_ring_loc loc;
	__u64 data_size;

	if (!nr_vectors || win_size < PCINET_LAYOUT_DATA_OFF)
		return -1;
	data_size = ((win_size - PCINET_LAYOUT_DATA_OFF) / 2) &
		    ~(__u64)(PCINET_LAYOUT_DATA_ALIGN - 1);
	if (pcinet_layout_ring(0, data_size, PCINET_CHAN_NET, &loc))
		return -1;
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = cpu_to_le32(PCINET_WIN_MAGIC);
	hdr->version = cpu_to_le16(PCINET_VERSION);
	hdr->hdr_size = cpu_to_le16(PCINET_HDR_SIZE);
	hdr->win_size = cpu_to_le64(win_size);
	hdr->nr_vectors = cpu_to_le32(nr_vectors);
	hdr->side[0].ctrl_off = cpu_to_le64(PCINET_LAYOUT_CTRL0_OFF);
	hdr->side[0].data_off = cpu_to_le64(PCINET_LAYOUT_DATA_OFF);
	hdr->side[0].data_size = cpu_to_le64(data_size);
	hdr->side[1].ctrl_off = cpu_to_le64(PCINET_LAYOUT_CTRL1_OFF);
	hdr->side[1].data_off = cpu_to_le64(PCINET_LAYOUT_DATA_OFF + data_size);
	hdr->side[1].data_size = cpu_to_le64(data_size);
	return 0;
}

/**
 * pcinet_layout_fill_vio - compute a window header with virtio regions
 * @hdr: filled in, as by pcinet_layout_fill()
 * @vio: filled in: the virtio regions; all zero when @vio_size is 0
 * @win_size: size of the window in bytes
 * @nr_vectors: doorbell vectors each side can ring
 * @vio_size: size of each of the four virtio regions (dev and drv region
 *	of each side), a multiple of PCINET_VIO_ALIGN; 0: none
 *
 * With @vio_size 0, @hdr is exactly what pcinet_layout_fill() computes.
 * Otherwise the four regions take the end of the window, in the order
 * dev 0, drv 0, dev 1, drv 1, and the control and data inboxes are laid
 * out as by pcinet_layout_fill() in what is left before them; @win_size
 * stays the whole window.  A side without the virtio channel sees smaller
 * data inboxes and nothing else.  At most half the window goes to virtio.
 *
 * Return: 0, or -1 if the sizes are not aligned or leave too little room
 * for the rings.
 */
static inline int pcinet_layout_fill_vio(struct pcinet_win_hdr *hdr,
					 struct pcinet_win_vio *vio,
					 __u64 win_size, __u32 nr_vectors,
					 __u64 vio_size)
{
	__u64 top = win_size, off;
	int i;

	memset(vio, 0, sizeof(*vio));
	if (vio_size) {
		if (vio_size % PCINET_VIO_ALIGN || win_size % PCINET_VIO_ALIGN ||
		    vio_size > win_size / 8)
			return -1;
		top = win_size - 4 * vio_size;
	}
	if (pcinet_layout_fill(hdr, top, nr_vectors))
		return -1;
	if (!vio_size)
		return 0;
	hdr->win_size = cpu_to_le64(win_size);
	vio->magic = cpu_to_le32(PCINET_WIN_VIO_MAGIC);
	vio->version = cpu_to_le16(PCINET_WIN_VIO_VERSION);
	vio->size = cpu_to_le16(sizeof(*vio));
	for (i = 0; i < 2; i++) {
		off = top + 2 * i * vio_size;
		vio->side[i].dev_off = cpu_to_le64(off);
		vio->side[i].dev_size = cpu_to_le64(vio_size);
		vio->side[i].drv_off = cpu_to_le64(off + vio_size);
		vio->side[i].drv_size = cpu_to_le64(vio_size);
	}
	return 0;
}

/*
 * The stores of pcinet_layout_write(): the kernel's for a platform in
 * the kernel (a PCI endpoint function playing the platform), C11 atomics
 * in userspace.
 */
#ifdef __KERNEL__
#define pcinet_hdr_store(p, v)		WRITE_ONCE(*(p), v)
/* P1, in pcinet_layout_write(): the cleared magic before the body */
#define pcinet_hdr_wmb()		virt_wmb()
/* P1, in pcinet_layout_write(): pairs with P2 in pcinet_layout_parse() */
#define pcinet_hdr_store_release(p, v)	virt_store_release(p, v)
#else
#define pcinet_hdr_store(p, v)		__atomic_store_n(p, v, __ATOMIC_RELAXED)
#define pcinet_hdr_wmb()		__atomic_thread_fence(__ATOMIC_RELEASE)
#define pcinet_hdr_store_release(p, v)	__atomic_store_n(p, v, __ATOMIC_RELEASE)
#endif

/**
 * pcinet_layout_write_vio - store a window header and its virtio regions
 * @win: the window (at least PCINET_HDR_SIZE bytes mapped)
 * @hdr: the header, as pcinet_layout_fill() made it (and the platform
 *	updated it since)
 * @vio: the virtio regions, as pcinet_layout_fill_vio() made them, stored
 *	at PCINET_HDR_VIO_OFF; NULL (or a zero @magic): none, zeroes there
 *
 * The order is part of the ABI: first @magic is cleared, so a side that
 * probes meanwhile finds no pcinet window rather than a half-written
 * one; then every other byte of the header page (the structure, then
 * zeroes up to PCINET_HDR_SIZE, the virtio regions among them); then
 * @magic, with a store-release that pairs with the load-acquire of
 * @magic in pcinet_layout_parse() (P1/P2 in docs/design.md).  Safe on a
 * live window: it also repairs a header a third party overwrote.
 */
static inline void pcinet_layout_write_vio(void *win,
					   const struct pcinet_win_hdr *hdr,
					   const struct pcinet_win_vio *vio)
{
	struct pcinet_win_hdr *w = win;
	const size_t skip = sizeof(hdr->magic);

	pcinet_hdr_store(&w->magic, 0);
	/* P1: the cleared magic is visible before the body changes */
	pcinet_hdr_wmb();
	memcpy((char *)win + skip, (const char *)hdr + skip,
	       sizeof(*hdr) - skip);
	memset((char *)win + sizeof(*hdr), 0, PCINET_HDR_SIZE - sizeof(*hdr));
	if (vio && vio->magic)
		memcpy((char *)win + PCINET_HDR_VIO_OFF, vio, sizeof(*vio));
	/* P1: pairs with P2 in pcinet_layout_parse(); the body is first */
	pcinet_hdr_store_release(&w->magic, hdr->magic);
}

/**
 * pcinet_layout_write - store a window header into the window, magic last
 * @win: the window (at least PCINET_HDR_SIZE bytes mapped)
 * @hdr: the header, as pcinet_layout_fill() made it (and the platform
 *	updated it since)
 *
 * pcinet_layout_write_vio() without virtio regions: the rest of the
 * header page is zero.
 */
static inline void pcinet_layout_write(void *win,
				       const struct pcinet_win_hdr *hdr)
{
	pcinet_layout_write_vio(win, hdr, NULL);
}

/**
 * pcinet_layout_init - write a fresh window header, the platform's job
 * @win: the window (at least PCINET_HDR_SIZE bytes mapped)
 * @win_size: size of the window in bytes
 * @nr_vectors: doorbell vectors each side can ring
 *
 * pcinet_layout_fill() then pcinet_layout_write(): the layout described
 * above PCINET_LAYOUT_CTRL0_OFF, magic stored last.  Nothing outside the
 * header page is touched: each side zeroes its own part of the control
 * inboxes before it starts.
 *
 * Return: 0, or -1 (nothing written) if the window cannot hold the rings.
 */
static inline int pcinet_layout_init(void *win, __u64 win_size,
				     __u32 nr_vectors)
{
	struct pcinet_win_hdr hdr;

	if (pcinet_layout_fill(&hdr, win_size, nr_vectors))
		return -1;
	pcinet_layout_write(win, &hdr);
	return 0;
}

/**
 * pcinet_layout_init_vio - write a fresh window header with virtio regions
 * @win: the window (at least PCINET_HDR_SIZE bytes mapped)
 * @win_size: size of the window in bytes
 * @nr_vectors: doorbell vectors each side can ring
 * @vio_size: size of each virtio region (pcinet_layout_fill_vio()); 0
 *	writes exactly what pcinet_layout_init() writes
 *
 * Nothing outside the header page is touched: each side zeroes what it
 * writes in the peer's regions before it publishes anything there.
 *
 * Return: 0, or -1 (nothing written) if the sizes do not fit.
 */
static inline int pcinet_layout_init_vio(void *win, __u64 win_size,
					 __u32 nr_vectors, __u64 vio_size)
{
	struct pcinet_win_hdr hdr;
	struct pcinet_win_vio vio;

	if (pcinet_layout_fill_vio(&hdr, &vio, win_size, nr_vectors, vio_size))
		return -1;
	pcinet_layout_write_vio(win, &hdr, &vio);
	return 0;
}

#endif /* _PCINET_LAYOUT_H */
