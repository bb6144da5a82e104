// SPDX-License-Identifier: GPL-2.0-only
/*
 * vq - the driver side of a split virtqueue.  See vq.h.
 *
 * Nothing read back from shared memory steers our own bookkeeping: the
 * free list and chain lengths are private, and a used entry is checked
 * against what we have in flight before it is believed.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vq.h"

/* A must be a power of two. */
static inline uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

static uint64_t avail_size(unsigned int num)
{
	return 4 + 2ull * num + 2;		/* flags, idx, ring, used_event */
}

static uint64_t used_size(unsigned int num)
{
	return 4 + 8ull * num + 2;		/* flags, idx, ring, avail_event */
}

uint64_t vq_ring_size(unsigned int num)
{
	uint64_t off = 16ull * num;

	off = align_up(off + avail_size(num), 4);
	return off + used_size(num);
}

int vq_init(struct vq *q, void *base, uint64_t ring_gpa, unsigned int num)
{
	unsigned int i;

	memset(q, 0, sizeof(*q));
	q->kick_fd = -1;
	q->call_fd = -1;
	/* Split rings: a power of two up to 32768; desc 16-aligned. */
	if (!num || num > 32768 || (num & (num - 1)) || (ring_gpa & 15))
		return -EINVAL;
	q->base = base;
	q->num = num;
	q->desc_gpa = ring_gpa;
	q->avail_gpa = ring_gpa + 16ull * num;
	q->used_gpa = align_up(q->avail_gpa + avail_size(num), 4);
	q->desc = (struct vring_desc *)(q->base + q->desc_gpa);
	q->avail = (struct vring_avail *)(q->base + q->avail_gpa);
	q->used = (struct vring_used *)(q->base + q->used_gpa);
	memset(q->base + ring_gpa, 0, vq_ring_size(num));

	q->token = calloc(num, sizeof(*q->token));
	q->chain = calloc(num, sizeof(*q->chain));
	q->next = calloc(num, sizeof(*q->next));
	if (!q->token || !q->chain || !q->next) {
		vq_free(q);
		return -ENOMEM;
	}
	for (i = 0; i < num; i++)
		q->next[i] = (uint16_t)(i + 1);
	q->free_head = 0;
	q->num_free = num;

	q->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	q->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->kick_fd < 0 || q->call_fd < 0) {
		int err = -errno;

		vq_free(q);
		return err;
	}
	return 0;
}

void vq_free(struct vq *q)
{
	free(q->token);
	free(q->chain);
	free(q->next);
	q->token = NULL;
	q->chain = NULL;
	q->next = NULL;
	if (q->kick_fd >= 0)
		close(q->kick_fd);
	if (q->call_fd >= 0)
		close(q->call_fd);
	q->kick_fd = -1;
	q->call_fd = -1;
}

int vq_add(struct vq *q, const struct vq_buf *bufs, unsigned int n,
	   uint64_t token)
{
	uint16_t head, i;
	unsigned int k;

	if (!n || !token)
		return -EINVAL;
	if (n > q->num_free)
		return -ENOSPC;
	head = q->free_head;
	i = head;
	for (k = 0; k < n; k++) {
		struct vring_desc *d = &q->desc[i];
		uint16_t flags = 0;

		if (bufs[k].write)
			flags |= VRING_DESC_F_WRITE;
		if (k + 1 < n)
			flags |= VRING_DESC_F_NEXT;
		d->addr = htole64(bufs[k].gpa);
		d->len = htole32(bufs[k].len);
		d->flags = htole16(flags);
		d->next = htole16(q->next[i]);
		i = q->next[i];
	}
	q->free_head = i;
	q->num_free -= n;
	q->token[head] = token;
	q->chain[head] = n;

	q->avail->ring[q->avail_idx & (q->num - 1)] = htole16(head);
	q->avail_idx++;
	/* Descriptors and the ring entry before the index that publishes them. */
	__atomic_store_n(&q->avail->idx, htole16(q->avail_idx),
			 __ATOMIC_RELEASE);
	return 0;
}

int vq_kick(struct vq *q)
{
	uint64_t one = 1;

	/* The avail index is visible before the device can see the kick. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	q->kicks++;
	if (write(q->kick_fd, &one, sizeof(one)) != sizeof(one))
		return -errno;
	return 0;
}

int vq_get_used(struct vq *q, uint64_t *token, uint32_t *len)
{
	struct vring_used_elem e;
	uint16_t idx, id, i;
	unsigned int k;

	idx = le16toh(__atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE));
	if (idx == q->last_used)
		return 0;
	/* The device may not complete more than we gave it. */
	if ((uint16_t)(idx - q->last_used) > vq_inflight_chains(q))
		return -EPROTO;
	e = q->used->ring[q->last_used & (q->num - 1)];
	id = (uint16_t)le32toh(e.id);
	if (le32toh(e.id) >= q->num || !q->token[id])
		return -EPROTO;
	*token = q->token[id];
	*len = le32toh(e.len);
	q->token[id] = 0;

	/* Return the chain to the free list, walking our private links. */
	i = id;
	for (k = 1; k < q->chain[id]; k++)
		i = q->next[i];
	q->next[i] = q->free_head;
	q->free_head = id;
	q->num_free += q->chain[id];
	q->chain[id] = 0;
	q->last_used++;
	return 1;
}

int vq_wait(struct vq *q, int timeout_ms)
{
	struct pollfd p = { .fd = q->call_fd, .events = POLLIN };
	uint64_t v;
	int r;

	do {
		r = poll(&p, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	if (read(q->call_fd, &v, sizeof(v)) == sizeof(v))
		q->calls++;
	return 0;
}
