/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vq - the driver side of a split virtqueue laid out in shared memory.
 *
 * The ring and the buffers live in one mapping whose offsets are the
 * device's guest physical addresses (gpa 0 = offset 0).  This is what the
 * pcinet board does in the window; here it runs against a memfd.
 */
#ifndef VQ_H
#define VQ_H

#include <stdint.h>
#include <linux/virtio_ring.h>

struct vq_buf {
	uint64_t gpa;
	uint32_t len;
	int write;		/* device writes it (VRING_DESC_F_WRITE) */
};

struct vq {
	uint8_t *base;		/* mapping of gpa 0 */
	unsigned int num;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t free_head;
	unsigned int num_free;
	uint16_t avail_idx;	/* next avail index we publish */
	uint16_t last_used;	/* next used index we consume */
	uint64_t *token;	/* per head; 0 = not in flight */
	unsigned int *chain;	/* descriptors per head */
	uint16_t *next;		/* private copy of the free/chain links */
	int kick_fd;
	int call_fd;
	unsigned long kicks, calls;
};

/*
 * Built with vq_relay.c instead of vq.c (VQ_RELAY), the same API runs the
 * board's relay: the memfd must then be VQ_RELAY_WIN_SIZE bytes (it is
 * laid out as a pcinet window) and hold at most VQ_RELAY_NR_VQ queues.
 */
#define VQ_RELAY_WIN_SIZE	(32u << 20)
#define VQ_RELAY_NR_VQ		2u

/* Bytes the ring takes at GPA for NUM entries (virtio 1.0 alignment). */
uint64_t vq_ring_size(unsigned int num);
/* Lay out an empty ring at RING_GPA; creates the kick and call eventfds. */
int vq_init(struct vq *q, void *base, uint64_t ring_gpa, unsigned int num);
void vq_free(struct vq *q);
/* Post one chain (device-readable buffers first); TOKEN must not be 0. */
int vq_add(struct vq *q, const struct vq_buf *bufs, unsigned int n,
	   uint64_t token);
/* Notify the device. */
int vq_kick(struct vq *q);
/* Take one used entry: returns 1 with *token and *len, 0 if none, <0 bad. */
int vq_get_used(struct vq *q, uint64_t *token, uint32_t *len);
/* Wait for the call eventfd: 0, or -ETIMEDOUT. */
int vq_wait(struct vq *q, int timeout_ms);
/* Entries in flight. */
static inline unsigned int vq_inflight_chains(const struct vq *q)
{
	return (uint16_t)(q->avail_idx - q->last_used);
}

#endif /* VQ_H */
