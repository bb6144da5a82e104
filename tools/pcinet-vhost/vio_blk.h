/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vio_blk - what pcinet's device sides offer of a virtio-blk back end:
 * the feature bits passed through and size_max/seg_max clamped to the
 * pools (docs/design.md, "Pool sizing").  Built into pcinet-vhost and
 * pcinet-peer (--blk) from this one source.
 */
#ifndef VIO_BLK_H
#define VIO_BLK_H

#include <stdint.h>

#define VIO_BLK_ID		2	/* virtio device ID */

/* virtio 1.x feature bits: the ring's (6) and the block device's (5.2.3) */
#define VF(bit)			(1ULL << (bit))
#define F_VERSION_1		VF(32)
#define F_INDIRECT_DESC		VF(28)
#define F_EVENT_IDX		VF(29)
#define BLK_F_SIZE_MAX		VF(1)
#define BLK_F_SEG_MAX		VF(2)
#define BLK_F_GEOMETRY		VF(4)
#define BLK_F_RO		VF(5)
#define BLK_F_BLK_SIZE		VF(6)
#define BLK_F_FLUSH		VF(9)
#define BLK_F_TOPOLOGY		VF(10)
#define BLK_F_CONFIG_WCE	VF(11)
#define BLK_F_DISCARD		VF(13)
#define BLK_F_WRITE_ZEROES	VF(14)
/* virtio_blk_config as QEMU 7.2 has it (no zoned fields): 60 bytes */
#define VIO_BLK_CFG_LEN		60

/**
 * vio_blk_offer() - the device features to offer the driver side
 * @be_features: what the back end offers (vhost-user GET_FEATURES)
 *
 * The ring bits the relay uses and the block bits that need nothing from
 * the transport, plus VERSION_1, SIZE_MAX and SEG_MAX (always set by
 * vio_blk_clamp()).  Not CONFIG_WCE: a device side that replays the
 * driver's configuration writes (pcinet-peer) adds it itself; not MQ (one
 * queue), never ACCESS_PLATFORM or vhost-user's own bits.
 */
uint64_t vio_blk_offer(uint64_t be_features);

/**
 * vio_blk_clamp() - size_max and seg_max for pools of @pool bytes
 * @config: the back end's configuration space (VIO_BLK_CFG_LEN bytes),
 *	rewritten in place
 * @be_features: what the back end offers (its SIZE_MAX, SEG_MAX bits say
 *	whether its values count)
 * @pool: bytes of each pool (OUT and IN, equal), at least 8 KiB
 * @size_max: out: the size_max written
 * @seg_max: out: the seg_max written
 *
 * size_max at most 64 KiB, a multiple of 4 KiB; seg_max so that seg_max
 * segments, the header and a device table (first 4 KiB) fit the OUT pool.
 */
void vio_blk_clamp(uint8_t *config, uint64_t be_features, uint64_t pool,
		   uint32_t *size_max, uint32_t *seg_max);

#endif /* VIO_BLK_H */
