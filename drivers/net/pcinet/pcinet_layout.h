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
 */
#ifndef _PCINET_LAYOUT_H
#define _PCINET_LAYOUT_H

#ifdef __KERNEL__
#include <linux/build_bug.h>
#include <linux/stddef.h>
#include <linux/types.h>
#endif

#define PCINET_WIN_MAGIC	0x4e494350	/* "PCIN" */
#define PCINET_CTRL_MAGIC	0x4c525443	/* "CTRL" */
#define PCINET_VERSION		1

#define PCINET_HDR_SIZE		4096
#define PCINET_CTRL_SIZE	4096
#define PCINET_CACHELINE	64

/* Channels carried by a link.  Each has one ring per direction. */
enum pcinet_chan {
	PCINET_CHAN_NET = 0,
	PCINET_CHAN_TTY = 1,
	PCINET_NR_CHAN
};

/* The link tick: heartbeat, soft-state refresh, lost-doorbell sweep. */
#define PCINET_TICK_MS		100

/* Room reserved in the control block for future channels. */
#define PCINET_MAX_CHAN		8

/* Doorbell vectors; a platform with fewer vectors folds them onto 0. */
enum pcinet_vector {
	PCINET_VEC_LINK = 0,	/* link state changed */
	PCINET_VEC_NET = 1,	/* net ring progress */
	PCINET_VEC_TTY = 2,	/* tty ring progress */
	PCINET_NR_VEC
};

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
 * @nr_vectors: doorbell vectors each side can ring
 * @reserved0: zero
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
 * The sides only read the header.
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
 * @pad0: zero
 * @cons: bytes W has consumed from the ring R->W (whose data is in W's
 *	inbox); free-running
 * @event: W wants a doorbell when R's @prod for ring R->W passes this
 *	index (the virtio event-index rule)
 * @pad1: zero
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
 * @pad: zero
 * @chan: per-channel signalling
 *
 * Everything here is soft state: W writes every word of it again on
 * every link tick (PCINET_TICK_MS), so a word overwritten by a third
 * party is repaired within one tick.
 */
struct pcinet_ctrl {
	__le32 magic;
	__le32 gen;
	__le32 peer_gen;
	__le32 heartbeat;
	__le32 chan_open;
	__le32 ack_gen;
	__le32 pad[10];
	struct pcinet_chan_ctrl chan[PCINET_MAX_CHAN];
};

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
 * @flags: PCINET_REC_F_*; other bits zero, ignored by the receiver
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
 * @chan: the channel
 * @loc: filled in
 *
 * Both sides and the platform derive ring placement from the inbox
 * placement with this one function, so they cannot disagree.
 *
 * Return: 0, or -1 if the inbox is too small.
 */
static inline int pcinet_layout_ring(__u64 data_off, __u64 data_size,
				     enum pcinet_chan chan,
				     struct pcinet_ring_loc *loc)
{
	__u64 net_room;
	__u32 net_size;

	if (data_size < PCINET_TTY_RING_SIZE + PCINET_NET_RING_MIN)
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

#endif /* _PCINET_LAYOUT_H */
