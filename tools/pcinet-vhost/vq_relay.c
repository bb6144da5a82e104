// SPDX-License-Identifier: GPL-2.0-only
/*
 * vq_relay - vq.h's API with the board's relay in between (stage 1 of the
 * virtio test plan, for tests written against vq.c: vu_fs_test built with
 * -DVQ_RELAY is vu_fs_relay_test).
 *
 * vq.c itself, compiled with its functions renamed vqp_*, runs the
 * *private* ring: in ordinary memory (not in the memfd), with the test's
 * buffer addresses (memfd offsets) as the driver's addresses.  The relay
 * (drivers/net/pcinet/pcinet_vio_ring.c) moves each chain through the
 * pools of one virtio device into a device ring in the window's virtio
 * regions: the memfd is laid out as a pcinet window of VQ_RELAY_WIN_SIZE
 * with four regions; the device is described in the board's drv region
 * (V1), copied out and checked (V2, pcinet_vio_desc_check()); the ring
 * addresses vq_init() leaves in desc_gpa/avail_gpa/used_gpa are the
 * device ring's, so the test hands those to the back end.
 *
 * One device, VQ_RELAY_NR_VQ queues, in the order vq_init() is called;
 * the test's buffers sit low in the memfd, in what the window layout
 * calls the inboxes, which nothing uses here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vq.h"

#include "pcinet_ring.h"
#include "pcinet_vio_ring.h"

#define RELAY_VIO_SIZE	(VQ_RELAY_WIN_SIZE / 8)
#define RELAY_POOL	(2u << 20)
#define RELAY_NUM_MAX	128u
#define RELAY_MAX_REQ	(VQ_RELAY_NR_VQ * RELAY_NUM_MAX)

/* vq.c, renamed (see the Makefile): the private ring. */
int vqp_init(struct vq *q, void *base, uint64_t ring_gpa, unsigned int num);
void vqp_free(struct vq *q);
int vqp_add(struct vq *q, const struct vq_buf *bufs, unsigned int n,
	    uint64_t token);
int vqp_get_used(struct vq *q, uint64_t *token, uint32_t *len);
int vqp_wait(struct vq *q, int timeout_ms);
uint64_t vqp_ring_size(unsigned int num);

static struct {
	uint8_t *win;
	int ready;
	unsigned int nr;
	struct pcinet_vio_devinfo info;
	struct pcinet_vio_relay rl;
	struct pcinet_vio_ext oext[RELAY_MAX_REQ], iext[RELAY_MAX_REQ];
	struct {
		struct vq *q;
		void *arena;
		struct pcinet_vio_vq vq;
		struct pcinet_vio_req req[RELAY_NUM_MAX];
	} q[VQ_RELAY_NR_VQ];
} R;

static void m_from(void *ctx, void *dst, u64 addr, u32 len)
{
	memcpy(dst, (uint8_t *)ctx + addr, len);
}

static void m_to(void *ctx, u64 addr, const void *src, u32 len)
{
	memcpy((uint8_t *)ctx + addr, src, len);
}

static void m_set(void *ctx, u64 addr, int c, u32 len)
{
	memset((uint8_t *)ctx + addr, c, len);
}

static const struct pcinet_vio_mem_ops mops = {
	.from_drv = m_from, .to_drv = m_to, .set_drv = m_set,
};

/* D offers the device, B checks it: once, at the first vq_init(). */
static int relay_setup(uint8_t *win)
{
	struct pcinet_vio_area dreg, ureg;
	struct pcinet_vio_devdesc n, copy, *d;
	struct pcinet_layout lay;
	const char *why = NULL;
	uint64_t ds, us;
	unsigned int q;

	if (pcinet_layout_init_vio(win, VQ_RELAY_WIN_SIZE, 4, RELAY_VIO_SIZE) ||
	    pcinet_layout_parse(win, VQ_RELAY_WIN_SIZE, &lay) || !lay.has_vio)
		return -EINVAL;
	ds = lay.vio[0].dev_off + PCINET_VIO_ALIGN;
	us = lay.vio[1].drv_off + PCINET_VIO_ALIGN;
	memset(&n, 0, sizeof(n));
	n.device_id = 26;
	n.nr_vq = VQ_RELAY_NR_VQ;
	n.features = 1ull << PCINET_VIRTIO_F_VERSION_1;
	n.dev_span_off = ds;
	n.dev_span_size = PCINET_VIO_ALIGN + RELAY_POOL;
	n.drv_span_off = us;
	n.drv_span_size = PCINET_VIO_ALIGN + RELAY_POOL;
	for (q = 0; q < VQ_RELAY_NR_VQ; q++) {
		n.vq[q].num_max = RELAY_NUM_MAX;
		n.vq[q].desc_off = ds + q * 0x4000;
		n.vq[q].avail_off = ds + q * 0x4000 + 0x2000;
		n.vq[q].used_off = us + q * 0x1000;
		memset(win + n.vq[q].used_off, 0,
		       PCINET_VRING_USED_BYTES(RELAY_NUM_MAX));
	}
	n.out_pool_off = ds + PCINET_VIO_ALIGN;
	n.out_pool_size = RELAY_POOL;
	n.in_pool_off = us + PCINET_VIO_ALIGN;
	n.in_pool_size = RELAY_POOL;
	d = (void *)(win + lay.vio[1].drv_off + PCINET_CACHELINE);
	memcpy(d, &n, sizeof(n));
	/* V1 */
	__atomic_store_n(&d->dev_gen, 0x99, __ATOMIC_RELEASE);

	dreg = (struct pcinet_vio_area){ lay.vio[0].dev_off, lay.vio[0].dev_size };
	ureg = (struct pcinet_vio_area){ lay.vio[1].drv_off, lay.vio[1].drv_size };
	if (pcinet_vio_desc_read(d, &copy) ||
	    pcinet_vio_desc_check(&copy, &dreg, &ureg, NULL, 0, &R.info, &why)) {
		fprintf(stderr, "vq_relay: description refused: %s\n", why);
		return -EPROTO;
	}
	R.win = win;
	R.rl.win = win;
	R.rl.ops = &mops;
	R.rl.ctx = win;		/* driver addresses are memfd offsets */
	R.rl.device_id = R.info.device_id;
	pcinet_vio_pool_init(&R.rl.out, win + R.info.out_pool.off,
			     R.info.out_pool.off, R.info.out_pool.size, R.oext,
			     RELAY_MAX_REQ);
	pcinet_vio_pool_init(&R.rl.in, win + R.info.in_pool.off,
			     R.info.in_pool.off, R.info.in_pool.size, R.iext,
			     RELAY_MAX_REQ);
	R.ready = 1;
	printf("# vq_relay: window %u MiB, fs device in side 0's dev region %#llx and side 1's drv region %#llx, pools %u KiB\n",
	       VQ_RELAY_WIN_SIZE >> 20, (unsigned long long)lay.vio[0].dev_off,
	       (unsigned long long)lay.vio[1].drv_off, RELAY_POOL >> 10);
	return 0;
}

static struct pcinet_vio_vq *rvq(struct vq *q)
{
	unsigned int i;

	for (i = 0; i < R.nr; i++)
		if (R.q[i].q == q)
			return &R.q[i].vq;
	return NULL;
}

uint64_t vq_ring_size(unsigned int num)
{
	return vqp_ring_size(num);
}

int vq_init(struct vq *q, void *base, uint64_t ring_gpa, unsigned int num)
{
	unsigned int i = R.nr;
	const struct pcinet_vio_vqinfo *vi;
	int err;

	(void)ring_gpa;		/* the private ring is not in the memfd */
	if (!R.ready && (err = relay_setup(base)))
		return err;
	if (i >= VQ_RELAY_NR_VQ || num > RELAY_NUM_MAX)
		return -EINVAL;
	vi = &R.info.vq[i];
	R.q[i].arena = aligned_alloc(4096, (vqp_ring_size(num) + 4095) & ~4095ull);
	if (!R.q[i].arena)
		return -ENOMEM;
	err = vqp_init(q, R.q[i].arena, 0, num);
	if (err) {
		free(R.q[i].arena);
		return err;
	}
	pcinet_vio_vq_init(&R.q[i].vq, &R.rl, (u16)num, q->desc, q->avail,
			   q->used, R.win + vi->desc_off, R.win + vi->avail_off,
			   R.win + vi->used_off, R.q[i].req);
	R.q[i].q = q;
	R.nr++;
	/* what the test hands the back end: the device ring */
	q->desc_gpa = vi->desc_off;
	q->avail_gpa = vi->avail_off;
	q->used_gpa = vi->used_off;
	return 0;
}

void vq_free(struct vq *q)
{
	unsigned int i;

	vqp_free(q);
	for (i = 0; i < R.nr; i++)
		if (R.q[i].q == q) {
			free(R.q[i].arena);
			R.q[i].arena = NULL;
			R.q[i].q = NULL;
		}
}

int vq_add(struct vq *q, const struct vq_buf *bufs, unsigned int n,
	   uint64_t token)
{
	return vqp_add(q, bufs, n, token);
}

/* The transport's notify(): relay, kick if the back end wants it. */
int vq_kick(struct vq *q)
{
	struct pcinet_vio_vq *v = rvq(q);
	uint64_t one = 1;
	int r;

	if (!v)
		return -EINVAL;
	r = pcinet_vio_submit(v);
	if (r < 0)
		return -EPROTO;
	if (r & PCINET_VIO_KICK) {
		q->kicks++;
		if (write(q->kick_fd, &one, sizeof(one)) != sizeof(one))
			return -errno;
	}
	return 0;
}

/* The completion work, then one private used entry. */
int vq_get_used(struct vq *q, uint64_t *token, uint32_t *len)
{
	struct pcinet_vio_vq *v = rvq(q);
	int r;

	if (!v)
		return -EINVAL;
	r = pcinet_vio_complete(v);
	if (r < 0) {
		fprintf(stderr, "vq_relay: %s\n", v->why);
		return -EPROTO;
	}
	if (r && (r = vq_kick(q)))
		return r;
	return vqp_get_used(q, token, len);
}

int vq_wait(struct vq *q, int timeout_ms)
{
	return vqp_wait(q, timeout_ms);
}
