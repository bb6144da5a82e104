/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Test-only hardware, not product code: the shared-memory layout of the
 * NTB device that ntb_ivshmem.c emulates over QEMU's ivshmem-doorbell,
 * written by pcinet-fabric -N (the "hardware") and read by both guests.
 *
 *   0x0000        struct ntbe_hdr, written by the fabric only
 *   regs_off[s]   struct ntbe_regs of side s (its "registers")
 *   mw_off[s]     side s's inbound memory window, mw_size bytes: what the
 *                 peer writes through its outbound window lands here, as
 *                 on an NTB it lands in the RAM a side translated its
 *                 inbound window to
 *
 * The fabric puts the windows at a quarter and a half of the shared
 * memory, each a quarter of it (power-of-two sized and aligned, as NTB
 * BARs are); the registers in the first 64 KiB.  Little-endian.
 *
 * Who writes what: the header only the fabric (attach_epoch[s] odd while
 * side s's QEMU is attached, doorbell_id[s] its ivshmem peer ID, whose
 * low bit is s).  regs[s].link_epoch and the xlat words only side s;
 * regs[s].db_count[] only side s's peer (it counts the times it rang each
 * bit: a single writer, so no read-modify-write crosses the machines);
 * regs[s].spad[] either side (spad_write() by s, peer_spad_write() by its
 * peer), one plain 32-bit store each.
 */
#ifndef _NTB_IVSHMEM_LAYOUT_H
#define _NTB_IVSHMEM_LAYOUT_H

#define NTBE_MAGIC		0x4542544e	/* "NTBE" */
#define NTBE_VERSION		1
#define NTBE_HDR_SIZE		4096
#define NTBE_REGS_SIZE		4096
#define NTBE_META_SIZE		0x10000		/* header + registers */
#define NTBE_SPADS		32
#define NTBE_DB_BITS		32

/**
 * struct ntbe_hdr - the emulated device's description (offset 0)
 * @magic: %NTBE_MAGIC; anything else: not an emulated NTB
 * @version: %NTBE_VERSION
 * @hdr_size: %NTBE_HDR_SIZE
 * @shm_size: bytes of shared memory
 * @nr_vectors: doorbell vectors per side (ivshmem MSI-X vectors)
 * @mw_count: memory windows per side: 1
 * @mw_size: bytes of each inbound window
 * @mw_off: offset of side s's inbound window
 * @regs_off: offset of side s's registers
 * @attach_epoch: odd while side s is attached (the fabric bumps it)
 * @doorbell_id: ivshmem peer ID of side s (doorbell register's high half)
 */
struct ntbe_hdr {
	__le32 magic;
	__le16 version;
	__le16 hdr_size;
	__le64 shm_size;
	__le32 nr_vectors;
	__le32 mw_count;
	__le64 mw_size;
	__le64 mw_off[2];
	__le64 regs_off[2];
	__le32 attach_epoch[2];
	__le32 doorbell_id[2];
};

static_assert(sizeof(struct ntbe_hdr) == 80, "ntbe_hdr is ABI");

/**
 * struct ntbe_regs - one side's emulated registers
 * @link_epoch: the side's attach_epoch when it enabled its link, 0 while
 *	disabled; the link is up while both sides' equal their current
 *	(odd) attach_epoch, so a side whose QEMU died leaves no stale "up"
 * @reserved: written 0
 * @xlat_addr: the side's inbound translation (what it set), for debugging
 * @xlat_size: its size; 0: none set
 * @spad: the side's scratchpads
 * @db_count: times the peer rang doorbell bit b (free-running)
 */
struct ntbe_regs {
	__le32 link_epoch;
	__le32 reserved;
	__le64 xlat_addr;
	__le64 xlat_size;
	__le32 spad[NTBE_SPADS];
	__le32 db_count[NTBE_DB_BITS];
};

static_assert(sizeof(struct ntbe_regs) == 280, "ntbe_regs is ABI");
static_assert(sizeof(struct ntbe_regs) <= NTBE_REGS_SIZE, "regs fit");

/* Where the fabric puts everything in @shm_size bytes (a power of two). */
static inline void ntbe_layout(struct ntbe_hdr *h, __u64 shm_size,
			       __u32 nr_vectors)
{
	memset(h, 0, sizeof(*h));
	h->version = cpu_to_le16(NTBE_VERSION);
	h->hdr_size = cpu_to_le16(NTBE_HDR_SIZE);
	h->shm_size = cpu_to_le64(shm_size);
	h->nr_vectors = cpu_to_le32(nr_vectors);
	h->mw_count = cpu_to_le32(1);
	h->mw_size = cpu_to_le64(shm_size / 4);
	h->mw_off[0] = cpu_to_le64(shm_size / 4);
	h->mw_off[1] = cpu_to_le64(shm_size / 2);
	h->regs_off[0] = cpu_to_le64(NTBE_HDR_SIZE);
	h->regs_off[1] = cpu_to_le64(NTBE_HDR_SIZE + NTBE_REGS_SIZE);
	/* magic last: the caller stores it with a release */
}

#endif /* _NTB_IVSHMEM_LAYOUT_H */
