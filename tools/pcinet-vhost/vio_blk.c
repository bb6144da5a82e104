// SPDX-License-Identifier: GPL-2.0-only
/*
 * vio_blk - the virtio-blk offer of pcinet's device sides.  See vio_blk.h.
 */
#include <endian.h>
#include <string.h>

#include "vio_blk.h"

/* virtio_blk_config: size_max at 8, seg_max at 12 */
#define BLK_CFG_SIZE_MAX	8
#define BLK_CFG_SEG_MAX		12

#define OFFER_MASK	(F_VERSION_1 | F_INDIRECT_DESC | F_EVENT_IDX | \
			 BLK_F_SIZE_MAX | BLK_F_SEG_MAX | BLK_F_GEOMETRY | \
			 BLK_F_RO | BLK_F_BLK_SIZE | BLK_F_FLUSH | \
			 BLK_F_TOPOLOGY | BLK_F_DISCARD | BLK_F_WRITE_ZEROES)

#define SEG_LIMIT	(64U << 10)	/* largest size_max advertised */
#define PAGE		4096U

uint64_t vio_blk_offer(uint64_t be_features)
{
	return (be_features & OFFER_MASK) | F_VERSION_1 | BLK_F_SIZE_MAX |
	       BLK_F_SEG_MAX;
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

void vio_blk_clamp(uint8_t *config, uint64_t be_features, uint64_t pool,
		   uint32_t *size_max, uint32_t *seg_max)
{
	uint64_t room = pool > PAGE ? pool - PAGE : PAGE;
	uint32_t sm = SEG_LIMIT, n, v;

	if (be_features & BLK_F_SIZE_MAX) {
		v = get_le32(config + BLK_CFG_SIZE_MAX);
		if (v && v < sm)
			sm = v;
	}
	if (sm > room)
		sm = (uint32_t)room;
	sm &= ~(PAGE - 1);
	if (!sm)
		sm = PAGE;
	n = room / sm > UINT32_MAX ? UINT32_MAX : (uint32_t)(room / sm);
	if (be_features & BLK_F_SEG_MAX) {
		v = get_le32(config + BLK_CFG_SEG_MAX);
		if (v && v < n)
			n = v;
	}
	if (!n)
		n = 1;
	put_le32(config + BLK_CFG_SIZE_MAX, sm);
	put_le32(config + BLK_CFG_SEG_MAX, n);
	*size_max = sm;
	*seg_max = n;
}
