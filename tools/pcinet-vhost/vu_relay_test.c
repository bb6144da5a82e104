// SPDX-License-Identifier: GPL-2.0-only
/*
 * vu_relay_test - stage 1 of the virtio channel's test plan: the board's
 * relay (drivers/net/pcinet/pcinet_vio_ring.c, compiled as is) against a
 * stock vhost-user-blk back end (qemu-storage-daemon).
 *
 * A memfd is the window, laid out by pcinet_layout_init_vio() with four
 * virtio regions and parsed back by pcinet_layout_parse().  The test plays
 * both sides of one device:
 *   D (side 0): places the device in its dev region (desc, avail, OUT
 *     pool) and in the board's drv region (used ring, IN pool), writes the
 *     description (V1), and hands the back end the memfd (gpa = window
 *     offset) and the three ring addresses;
 *   B (side 1): copies the description out (V2), checks it
 *     (pcinet_vio_desc_check()), runs a small virtio-blk driver on a
 *     private split ring in ordinary memory (buffers are plain pointers),
 *     and relays it through the pools into the device ring.
 * The back end never sees the private ring or the driver's buffers; the
 * driver never sees the window.
 *
 * With -S FABRIC instead of -s, the test is only B, the board, and the
 * device side is somebody else's: it joins a pcinet-fabric (-V, -n 4) as
 * side 1, like a guest's ivshmem-doorbell, and finds the device that side
 * 0 (pcinet-peer --blk) offers in its drv region.  It publishes a live
 * control block with PCINET_F_VIRTIO and a heartbeat (no link handshake:
 * virtio does not need one), negotiates through its driver state block
 * (status writes answered by D, design "Negotiation"), kicks by bumping
 * the queue's notify counter and ringing D's vector 3, and takes calls on
 * its own vector 3.  At the end it resets the device (status 0 answered)
 * and, with -W, waits for D to withdraw it (dev_gen 0).  This is stage 2
 * of the test plan without a VM (tools/pcinet-peer/test-vio.sh).
 *
 * Usage: vu_relay_test {-s SOCKET | -S FABRIC [-W]} [-q QSIZE] [-e SECTORS]
 *                      [-d DUMPFILE] [-n] [-N] [-K] [-b] [-t SECONDS] [-v]
 *   -n  do not negotiate INDIRECT_DESC (direct chains on both rings)
 *   -N  do not negotiate EVENT_IDX
 *   -K  kick after every submit that left requests in flight, whatever
 *       the back end asked (as vu_blk_test does): for comparing figures
 *   -d  write what sectors 8..23 and the in-flight area should hold to
 *       DUMPFILE and DUMPFILE.wrap, for cmp(1) (as vu_blk_test -d)
 *   -b  also measure (as vu_blk_test -b)
 *
 * Prints "ok - ..." / "FAIL - ..." per case and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "testutil.h"
#include "vu_frontend.h"

#include "pcinet_ring.h"
#include "pcinet_vio_ring.h"

/*
 * The virtio-blk constants used (virtio 1.x, 5.2), defined here: the uapi
 * virtio headers bring <linux/types.h>, whose __u64 is not the
 * pcinet_user.h one.
 */
#define VIRTIO_ID_BLOCK			2
#define VIRTIO_F_VERSION_1		32
#define VIRTIO_RING_F_INDIRECT_DESC	28
#define VIRTIO_RING_F_EVENT_IDX		29
#define VIRTIO_BLK_F_SEG_MAX		2
#define VIRTIO_BLK_F_BLK_SIZE		6
#define VIRTIO_BLK_F_FLUSH		9
#define VIRTIO_BLK_T_IN			0
#define VIRTIO_BLK_T_OUT		1
#define VIRTIO_BLK_T_FLUSH		4
#define VIRTIO_BLK_T_GET_ID		8
#define VIRTIO_BLK_S_OK			0
#define VIRTIO_BLK_S_IOERR		1
#define VIRTIO_BLK_ID_BYTES		20
#define VIRTIO_BLK_CONFIG_LEN		60

struct virtio_blk_outhdr {
	uint32_t type;
	uint32_t ioprio;
	uint64_t sector;
};

#define SECTOR		512u
#define WIN_SIZE	(64ull << 20)
#define VIO_SIZE	(8ull << 20)
#define POOL_SIZE	(4ull << 20)
#define TIMEOUT_MS	5000
#define MAX_SEG		16u
#define MAX_DATA	(64u * 1024)
#define DUMP_SECTOR	8u
#define DUMP_SECTORS	16u
#define WRAP_SECTOR	4096u
#define BIG_SECTOR	16384u

/* One request slot of the board's driver: its buffers, in private memory. */
struct slot {
	int busy;
	uint32_t type;
	uint64_t sector;
	uint32_t len;
	uint16_t head;
	struct virtio_blk_outhdr *hdr;
	uint8_t *status;
	uint8_t *data;
	struct pcinet_vring_desc *table;	/* indirect table */
};

struct rt {
	struct vu_dev dev;
	struct vu_mem win;
	struct vu_mem mem;		/* what the back end is given */
	unsigned int num;
	int indirect, event_idx;
	uint64_t capacity;
	/* B: private ring and driver */
	struct pcinet_vring_desc *pdesc;
	struct pcinet_vring_avail *pavail;
	struct pcinet_vring_used *pused;
	uint16_t *next, free_head, nfree, avail_idx, last_used;
	struct slot *slot;
	int *head_slot;
	unsigned int *free_slot, nfree_slot;
	/* B: relay */
	struct pcinet_vio_relay rl;
	struct pcinet_vio_vq vq;
	struct pcinet_vio_req *req;
	struct pcinet_vio_ext *oext, *iext;
	struct pcinet_vio_devinfo info;
	int kick_fd, call_fd;
	int kick_always;		/* -K: ignore the back end's suppression */
	unsigned long kicks, calls;
	/* -S: the device side is another fabric client */
	struct pcinet_vio_drvstate *drv;	/* ours, in D's dev region */
	struct pcinet_vio_devdesc *ddesc;	/* D's, in our drv region */
};

/* The relay's access to the driver's buffers: plain pointers here. */
static void m_from(void *ctx, void *dst, u64 addr, u32 len)
{
	(void)ctx;
	memcpy(dst, (const void *)(uintptr_t)addr, len);
}

static void m_to(void *ctx, u64 addr, const void *src, u32 len)
{
	(void)ctx;
	memcpy((void *)(uintptr_t)addr, src, len);
}

static void m_set(void *ctx, u64 addr, int c, u32 len)
{
	(void)ctx;
	memset((void *)(uintptr_t)addr, c, len);
}

static const struct pcinet_vio_mem_ops mops = {
	.from_drv = m_from, .to_drv = m_to, .set_drv = m_set,
};

/* ------------------------------------------------------------------ */
/* D: place the device and describe it                                 */
/* ------------------------------------------------------------------ */

static void place_device(struct rt *t, const struct pcinet_layout *lay,
			 uint64_t features)
{
	uint64_t ds = lay->vio[0].dev_off + PCINET_VIO_ALIGN;
	uint64_t us = lay->vio[1].drv_off + PCINET_VIO_ALIGN;
	uint8_t *w = t->win.base;
	struct pcinet_vio_devdesc *d =
		(void *)(w + lay->vio[1].drv_off + PCINET_CACHELINE);
	struct pcinet_vio_rhdr *rh = (void *)(w + lay->vio[1].drv_off);
	struct pcinet_vio_devdesc n;

	memset(&n, 0, sizeof(n));
	n.device_id = htole32(VIRTIO_ID_BLOCK);
	n.nr_vq = htole32(1);
	n.features = htole64(features);
	n.config_len = htole32(60);
	n.dev_span_off = htole64(ds);
	n.dev_span_size = htole64(PCINET_VIO_ALIGN + POOL_SIZE);
	n.drv_span_off = htole64(us);
	n.drv_span_size = htole64(PCINET_VIO_ALIGN + POOL_SIZE);
	n.vq[0].num_max = htole16(t->num);
	n.vq[0].desc_off = htole64(ds);
	n.vq[0].avail_off = htole64(ds + PCINET_VRING_DESC_BYTES(t->num));
	n.vq[0].used_off = htole64(us);
	n.out_pool_off = htole64(ds + PCINET_VIO_ALIGN);
	n.out_pool_size = htole64(POOL_SIZE);
	n.in_pool_off = htole64(us + PCINET_VIO_ALIGN);
	n.in_pool_size = htole64(POOL_SIZE);
	/* D zeroes the used ring it will write */
	memset(w + us, 0, PCINET_VRING_USED_BYTES(t->num));
	rh->magic = htole32(PCINET_VIO_DEVS_MAGIC);
	rh->inst = htole32(0x1234);
	rh->nr_slots = htole32(PCINET_VIO_MAX_DEV);
	memcpy(d, &n, sizeof(n));
	/* V1: the description before dev_gen */
	__atomic_store_n(&d->dev_gen, htole32(0x77), __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* B: the board's virtio-blk driver on the private ring                 */
/* ------------------------------------------------------------------ */

static int slot_post(struct rt *t, unsigned int s, uint32_t type,
		     uint64_t sector, uint32_t len, unsigned int nseg)
{
	struct slot *sl = &t->slot[s];
	struct pcinet_vring_desc b[2 + MAX_SEG];
	unsigned int n = 0, k, need;
	uint32_t seg = nseg ? len / nseg : 0;
	uint16_t head, i;
	int dw = type != VIRTIO_BLK_T_OUT;

	sl->hdr->type = htole32(type);
	sl->hdr->ioprio = 0;
	sl->hdr->sector = htole64(sector);
	*sl->status = 0x55;	/* the relay pre-fills 0xff in the pool */
	b[n++] = (struct pcinet_vring_desc){ (uintptr_t)sl->hdr, 16, 0, 0 };
	for (k = 0; k < nseg; k++)
		b[n++] = (struct pcinet_vring_desc){
			(uintptr_t)(sl->data + k * seg),
			k + 1 < nseg ? seg : len - k * seg,
			dw ? PCINET_VRING_F_WRITE : 0, 0 };
	b[n++] = (struct pcinet_vring_desc){ (uintptr_t)sl->status, 1,
					     PCINET_VRING_F_WRITE, 0 };
	need = t->indirect ? 1 : n;
	if (need > t->nfree)
		return -ENOSPC;
	head = t->free_head;
	if (t->indirect) {
		for (k = 0; k < n; k++) {
			sl->table[k] = b[k];
			if (k + 1 < n) {
				sl->table[k].flags |= PCINET_VRING_F_NEXT;
				sl->table[k].next = (uint16_t)(k + 1);
			}
		}
		t->pdesc[head] = (struct pcinet_vring_desc){
			(uintptr_t)sl->table, 16 * n, PCINET_VRING_F_INDIRECT, 0 };
		i = t->next[head];
	} else {
		i = head;
		for (k = 0; k < n; k++) {
			t->pdesc[i] = b[k];
			if (k + 1 < n)
				t->pdesc[i].flags |= PCINET_VRING_F_NEXT;
			t->pdesc[i].next = t->next[i];
			i = t->next[i];
		}
	}
	t->free_head = i;
	t->nfree -= need;
	sl->busy = (int)need;
	sl->type = type;
	sl->sector = sector;
	sl->len = len;
	sl->head = head;
	t->head_slot[head] = (int)s;
	t->pavail->ring[t->avail_idx & (t->num - 1)] = htole16(head);
	t->avail_idx++;
	/* as virtio_ring: entries before the index (pairs with R5) */
	__atomic_store_n(&t->pavail->idx, htole16(t->avail_idx),
			 __ATOMIC_RELEASE);
	return 0;
}

/* The transport's notify(): relay, kick the back end if asked. */
static int notify(struct rt *t)
{
	uint64_t one = 1;
	int r = pcinet_vio_submit(&t->vq);

	if (r < 0)
		return r;
	if ((r & PCINET_VIO_KICK) ||
	    (t->kick_always && t->vq.davail_idx != t->vq.last_used)) {
		t->kicks++;
		/* -S: the kick is the notify counter, then vector 3 */
		if (t->drv)
			__atomic_store_n(&t->drv->vq[0].notify,
					 htole32(le32toh(t->drv->vq[0].notify) + 1),
					 __ATOMIC_RELEASE);
		if (write(t->kick_fd, &one, sizeof(one)) != sizeof(one))
			return -errno;
	}
	return 0;
}

/* Take one private used entry: slot, used len; 0 if none. */
static int get_used(struct rt *t, unsigned int *s, uint32_t *len)
{
	uint16_t idx = le16toh(__atomic_load_n(&t->pused->idx,
					       __ATOMIC_ACQUIRE));
	struct pcinet_vring_used_elem e;
	unsigned int k, chain;
	uint16_t last;

	if (idx == t->last_used)
		return 0;
	e = t->pused->ring[t->last_used & (t->num - 1)];
	if (e.id >= t->num || t->head_slot[e.id] < 0)
		return -EPROTO;
	*s = (unsigned int)t->head_slot[e.id];
	*len = e.len;
	t->head_slot[e.id] = -1;
	chain = (unsigned int)t->slot[*s].busy;
	last = (uint16_t)e.id;
	for (k = 1; k < chain; k++)
		last = t->next[last];
	t->next[last] = t->free_head;
	t->free_head = (uint16_t)e.id;
	t->nfree += chain;
	t->slot[*s].busy = 0;
	t->last_used++;
	return 1;
}

/* Wait for a call, then run the completion work (and submit again). */
static int wait_complete(struct rt *t)
{
	struct pollfd p = { .fd = t->call_fd, .events = POLLIN };
	uint64_t v;
	int r;

	r = pcinet_vio_complete(&t->vq);
	if (r < 0)
		return r;
	if (!r) {
		r = poll(&p, 1, TIMEOUT_MS);
		if (r <= 0)
			return r ? -errno : -ETIMEDOUT;
		if (read(t->call_fd, &v, sizeof(v)) == sizeof(v))
			t->calls++;
		r = pcinet_vio_complete(&t->vq);
		if (r < 0)
			return r;
	}
	return notify(t);
}

struct run {
	uint32_t type, len;
	unsigned int nseg, depth;
	unsigned long total;
	double seconds;
	int verify, random;
	uint64_t first, span;
	unsigned long done;
	double elapsed;
	char err[160];
};

static uint64_t run_sector(struct run *r, unsigned long i)
{
	uint64_t k = i;

	if (r->random)
		k = (i * 2862933555777941757ull + 3037000493ull) >> 20;
	return r->first + (k % r->span) * (r->len / SECTOR);
}

static int run(struct rt *t, struct run *r)
{
	unsigned long posted = 0;
	double t0 = tu_now(), deadline = t0 + r->seconds;
	int stop = 0, err;

	r->done = 0;
	r->err[0] = 0;
	while (r->done < posted || !stop) {
		unsigned int s;
		uint32_t len;
		int n, batch = 0, full = 0;

		while (!stop && posted - r->done < r->depth && t->nfree_slot) {
			uint64_t sector = run_sector(r, posted);

			s = t->free_slot[t->nfree_slot - 1];
			if (r->type == VIRTIO_BLK_T_OUT && r->verify)
				tu_fill(t->slot[s].data, sector, r->len);
			else if (r->verify)
				memset(t->slot[s].data, 0, r->len);
			if (slot_post(t, s, r->type, sector, r->len, r->nseg)) {
				full = 1;	/* no private descriptors */
				break;
			}
			t->nfree_slot--;
			posted++;
			batch++;
			if ((r->total && posted >= r->total) ||
			    (r->seconds > 0 && !(posted & 15) &&
			     tu_now() >= deadline))
				stop = 1;
		}
		if (r->seconds > 0 && tu_now() >= deadline)
			stop = 1;
		if (batch && (err = notify(t))) {
			snprintf(r->err, sizeof(r->err), "submit: %d (%s)", err,
				 t->vq.why ? t->vq.why : "");
			return -EIO;
		}
		while ((n = get_used(t, &s, &len)) == 1) {
			struct slot *sl = &t->slot[s];
			uint32_t want = sl->type == VIRTIO_BLK_T_OUT ? 1 : sl->len + 1;

			t->free_slot[t->nfree_slot++] = s;
			if (*sl->status != VIRTIO_BLK_S_OK || len != want) {
				snprintf(r->err, sizeof(r->err),
					 "sector %llu: status %u used len %u (want %u)",
					 (unsigned long long)sl->sector,
					 *sl->status, len, want);
				return -EIO;
			}
			if (sl->type == VIRTIO_BLK_T_IN && r->verify) {
				long off = tu_check(sl->data, sl->sector, sl->len);

				if (off >= 0) {
					snprintf(r->err, sizeof(r->err),
						 "sector %llu: data differs at byte %ld",
						 (unsigned long long)sl->sector, off);
					return -EIO;
				}
			}
			r->done++;
		}
		if (n < 0) {
			snprintf(r->err, sizeof(r->err), "bad private used entry");
			return n;
		}
		if (r->done == posted && stop)
			break;
		if (posted - r->done < r->depth && !stop && t->nfree_slot &&
		    !full)
			continue;
		if (r->done == posted)
			continue;
		err = wait_complete(t);
		if (err) {
			snprintf(r->err, sizeof(r->err),
				 "completion: %d (%s), %lu of %lu done", err,
				 t->vq.why ? t->vq.why : "no call", r->done,
				 posted);
			return err;
		}
	}
	r->elapsed = tu_now() - t0;
	return 0;
}

/* One request, synchronously. */
static int sync_req(struct rt *t, uint32_t type, uint64_t sector, uint32_t len,
		    unsigned int nseg, uint8_t *status, uint32_t *ulen)
{
	unsigned int s = t->free_slot[t->nfree_slot - 1], got;
	int err, n;

	err = slot_post(t, s, type, sector, len, nseg);
	if (!err)
		err = notify(t);
	while (!err) {
		n = get_used(t, &got, ulen);
		if (n < 0)
			return n;
		if (n == 1) {
			*status = *t->slot[s].status;
			return got == s ? 0 : -EPROTO;
		}
		err = wait_complete(t);
	}
	return err;
}

static int write_dump(const char *path, uint64_t first, unsigned int count)
{
	uint8_t buf[SECTOR];
	unsigned int i;
	int fd, ok = 1;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	for (i = 0; i < count && ok; i++) {
		tu_fill(buf, first + i, SECTOR);
		ok = write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf);
	}
	close(fd);
	return ok ? 0 : -EIO;
}

static void bench(struct rt *t, double seconds)
{
	static const struct {
		const char *name;
		uint32_t type, len;
		unsigned int nseg, depth;
		uint64_t first, span;
		int random;
	} b[] = {
		{ "4k read qd1", VIRTIO_BLK_T_IN, 4096, 1, 1, 0, 4096, 1 },
		{ "4k read qd32", VIRTIO_BLK_T_IN, 4096, 1, 32, 0, 4096, 1 },
		{ "64k read qd16", VIRTIO_BLK_T_IN, 65536, 1, 16, 0, 256, 0 },
		{ "64k write qd16", VIRTIO_BLK_T_OUT, 65536, 1, 16,
		  BIG_SECTOR + 2048, 256, 0 },
	};
	unsigned int i;

	for (i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		struct run r = { .type = b[i].type, .len = b[i].len,
				 .nseg = b[i].nseg, .depth = b[i].depth,
				 .seconds = seconds, .first = b[i].first,
				 .span = b[i].span, .random = b[i].random };

		if (run(t, &r))
			tu_result(0, "bench %s: %s", b[i].name, r.err);
		else if (b[i].depth == 1)
			tu_result(1, "bench %s: %.0f round trips/s, %.1f us each",
				  b[i].name, r.done / r.elapsed,
				  r.elapsed / r.done * 1e6);
		else
			tu_result(1, "bench %s: %.0f IOPS, %.1f MB/s", b[i].name,
				  r.done / r.elapsed,
				  r.done * (double)b[i].len / r.elapsed / 1e6);
	}
}

/* ------------------------------------------------------------------ */
/* -S: B alone, on a pcinet-fabric, the device side a fabric client too */
/* ------------------------------------------------------------------ */

#define FAB_VEC		16
#define FAB_VIRTIO	3		/* PCINET_VEC_VIRTIO */

static struct {
	int sock, own_id, peer_id;
	int own_efd[FAB_VEC], peer_efd[FAB_VEC];
	unsigned int own_n, peer_n, nvec;
	struct pcinet_ctrl *out;	/* our control block (side 0's inbox) */
	volatile int stop;
	pthread_t beat;
	uint32_t drv_gen, seq;
} fab = { .sock = -1, .peer_id = -1 };

static int fab_recv(int64_t *val, int *fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov;
	struct msghdr mh;
	struct cmsghdr *cm;
	uint64_t le;
	size_t got = 0;
	ssize_t r;

	*fd = -1;
	while (got < sizeof(le)) {
		iov = (struct iovec){ (char *)&le + got, sizeof(le) - got };
		mh = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = ctl.buf,
				      .msg_controllen = sizeof(ctl.buf) };
		r = recvmsg(fab.sock, &mh, MSG_CMSG_CLOEXEC);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET &&
			    cm->cmsg_type == SCM_RIGHTS &&
			    cm->cmsg_len >= CMSG_LEN(sizeof(int)))
				memcpy(fd, CMSG_DATA(cm), sizeof(int));
		got += (size_t)r;
	}
	*val = (int64_t)le64toh(le);
	return 0;
}

/* The ivshmem client protocol (pcinet-fabric.c's summary), as side 1. */
static int fab_connect(struct rt *t, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct pollfd p;
	double deadline = tu_now() + 10;
	int64_t v;
	off_t size;
	void *w;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fab.sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fab.sock < 0 || connect(fab.sock, (void *)&sa, sizeof(sa)))
		return -errno;
	if (fab_recv(&v, &fd) || v != 0 || fab_recv(&v, &fd) || v < 0)
		return -EPROTO;
	fab.own_id = (int)v;
	if (!(fab.own_id & 1))
		return -EADDRINUSE;	/* we must be side 1: side 0 is D */
	if (fab_recv(&v, &fd) || v != -1 || fd < 0)
		return -EPROTO;
	size = lseek(fd, 0, SEEK_END);
	w = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (size <= 0 || w == MAP_FAILED)
		return -ENOMEM;
	t->win = (struct vu_mem){ .fd = fd, .base = w, .size = (uint64_t)size };
	fab.nvec = le32toh(((struct pcinet_win_hdr *)w)->nr_vectors);
	if (fab.nvec <= FAB_VIRTIO || fab.nvec > FAB_VEC)
		return -ERANGE;	/* the test wants vector 3 */
	/* the peers' eventfds and ours, one per vector, until both are complete */
	p = (struct pollfd){ .fd = fab.sock, .events = POLLIN };
	while (fab.own_n < fab.nvec || fab.peer_n < fab.nvec) {
		if (tu_now() > deadline || poll(&p, 1, 1000) < 0)
			return -ETIMEDOUT;
		if (!(p.revents & POLLIN))
			continue;
		if (fab_recv(&v, &fd))
			return -ECONNRESET;
		if (fd < 0)
			continue;
		if (v == fab.own_id && fab.own_n < FAB_VEC) {
			fab.own_efd[fab.own_n++] = fd;
		} else if (v != fab.own_id && fab.peer_n < FAB_VEC &&
			   (fab.peer_id < 0 || v == fab.peer_id)) {
			fab.peer_id = (int)v;
			fab.peer_efd[fab.peer_n++] = fd;
		} else {
			close(fd);
		}
	}
	return 0;
}

static void fab_ring(unsigned int v)
{
	uint64_t one = 1;

	if (write(fab.peer_efd[v], &one, sizeof(one)) != sizeof(one))
		perror("ring");
}

/* A live block with PCINET_F_VIRTIO and a heartbeat: what D checks. */
static void *fab_beat(void *arg)
{
	uint32_t beat = 0;

	(void)arg;
	while (!fab.stop) {
		__atomic_store_n(&fab.out->heartbeat, htole32(++beat),
				 __ATOMIC_RELAXED);
		usleep(50000);
	}
	return NULL;
}

static int fab_board_start(struct rt *t, const struct pcinet_layout *lay)
{
	uint8_t *w = t->win.base;
	struct pcinet_vio_rhdr *rh = (void *)(w + lay->vio[0].dev_off);
	uint32_t gen, inst;

	if (getrandom(&gen, sizeof(gen), 0) != sizeof(gen) ||
	    getrandom(&inst, sizeof(inst), 0) != sizeof(inst))
		return -EIO;
	fab.out = (void *)(w + lay->ctrl_off[0]);
	memset(fab.out, 0, sizeof(*fab.out));
	fab.out->magic = htole32(PCINET_CTRL_MAGIC);
	fab.out->features = htole32(PCINET_F_TTY_CRC | PCINET_F_VIRTIO);
	__atomic_store_n(&fab.out->gen, htole32(gen | 1), __ATOMIC_RELEASE);
	/* ours to write in D's dev region: zeroed, then our instance */
	memset(rh, 0, PCINET_VIO_FIXED_SIZE);
	rh->magic = htole32(PCINET_VIO_DRVS_MAGIC);
	rh->nr_slots = htole32(PCINET_VIO_MAX_DEV);
	__atomic_store_n(&rh->inst, htole32(inst | 1), __ATOMIC_RELEASE);
	t->drv = (void *)(w + lay->vio[0].dev_off + PCINET_CACHELINE);
	t->ddesc = (void *)(w + lay->vio[1].drv_off + PCINET_CACHELINE);
	if (pthread_create(&fab.beat, NULL, fab_beat, NULL))
		return -EIO;
	fab_ring(0);
	fab_ring(FAB_VIRTIO);
	return 0;
}

/* Wait for dev_gen to be nonzero (or, with @gone, zero). */
static uint32_t fab_wait_gen(struct rt *t, int gone, double secs)
{
	double deadline = tu_now() + secs;
	uint32_t g;

	do {
		g = le32toh(__atomic_load_n(&t->ddesc->dev_gen, __ATOMIC_ACQUIRE));
		if (gone ? !g : !!g)
			return g;
		usleep(10000);
	} while (tu_now() < deadline);
	return g;
}

/* One status write (V3), rung, and D's answer (V3'): the answer or -1. */
static int64_t fab_status(struct rt *t, uint32_t status, uint64_t features)
{
	struct pollfd p = { .fd = fab.own_efd[FAB_VIRTIO], .events = POLLIN };
	double deadline = tu_now() + 5;
	uint64_t cnt;

	t->drv->status = htole32(status);
	t->drv->features = htole64(features);
	__atomic_store_n(&t->drv->status_seq, htole32(++fab.seq), __ATOMIC_RELEASE);
	fab_ring(FAB_VIRTIO);
	while (tu_now() < deadline) {
		if (le32toh(__atomic_load_n(&t->ddesc->status_seq,
					    __ATOMIC_ACQUIRE)) == fab.seq &&
		    le32toh(t->ddesc->drv_gen) == fab.drv_gen)
			return le32toh(t->ddesc->status);
		if (poll(&p, 1, 100) == 1 &&
		    read(p.fd, &cnt, sizeof(cnt)) != sizeof(cnt))
			break;
	}
	return -1;
}

/* Register the offered device and bring it to DRIVER_OK, as the transport does. */
static int fab_probe(struct rt *t, uint32_t dev_gen, uint64_t features)
{
	int64_t a;

	if (getrandom(&fab.drv_gen, sizeof(fab.drv_gen), 0) != sizeof(fab.drv_gen))
		return -EIO;
	fab.drv_gen |= 1;
	t->drv->dev_gen = htole32(dev_gen);
	t->drv->drv_gen = htole32(fab.drv_gen);
	a = fab_status(t, 0, 0);
	tu_result(a == 0, "device side answers the reset of a new registration: %lld",
		  (long long)a);
	a = fab_status(t, 1 | 2, 0);
	if (a != 3)
		return -EPROTO;
	a = fab_status(t, 1 | 2 | 8, features | (1ull << 55));
	tu_result(a == 3, "features with a bit never offered are refused: status %lld (no FEATURES_OK)",
		  (long long)a);
	a = fab_status(t, 0, 0);
	a = a == 0 ? fab_status(t, 1 | 2, 0) : -1;
	a = a == 3 ? fab_status(t, 1 | 2 | 8, features) : -1;
	tu_result(a == 11, "after a reset, features 0x%llx: FEATURES_OK answered (status %lld)",
		  (unsigned long long)features, (long long)a);
	if (a != 11)
		return -EPROTO;
	memset(t->win.base + t->info.vq[0].avail_off, 0,
	       PCINET_VRING_AVAIL_BYTES(t->num));
	t->drv->vq[0].num = htole16((uint16_t)t->num);
	t->drv->vq[0].ready = htole16(1);
	a = fab_status(t, 1 | 2 | 8 | 4, features);
	tu_result(a == 15, "DRIVER_OK answered (status %lld): the back end runs the device ring",
		  (long long)a);
	return a == 15 ? 0 : -EPROTO;
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s {-s SOCKET | -S FABRIC [-W]} [-q QSIZE] [-e SECTORS] [-d DUMPFILE] [-n] [-N] [-K] [-b] [-t SECONDS] [-v]\n",
		argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *dump = NULL, *fabric = NULL;
	unsigned long long expect = 0;
	int do_bench = 0, verbose = 0, no_ind = 0, no_evt = 0, c, err;
	int wait_withdraw = 0;
	uint32_t dev_gen = 0;
	struct pcinet_vio_area dreg, ureg;
	struct pcinet_vio_devdesc copy;
	uint8_t cfg[VIRTIO_BLK_CONFIG_LEN];
	uint32_t seg_max;
	struct pcinet_layout lay;
	const char *why = NULL;
	double bench_s = 2.0;
	uint64_t want, feat;
	struct vu_vring_cfg vc;
	unsigned int i, base, wrap_n;
	uint8_t *w;
	struct rt t;
	struct run r;

	memset(&t, 0, sizeof(t));
	t.dev.sock = -1;
	t.kick_fd = -1;
	t.call_fd = -1;
	t.num = 128;
	while ((c = getopt(argc, argv, "s:S:Wq:e:d:nNKbt:v")) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'S': fabric = optarg; break;
		case 'W': wait_withdraw = 1; break;
		case 'q': t.num = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'e': expect = strtoull(optarg, NULL, 0); break;
		case 'd': dump = optarg; break;
		case 'n': no_ind = 1; break;
		case 'N': no_evt = 1; break;
		case 'K': t.kick_always = 1; break;
		case 'b': do_bench = 1; break;
		case 't': bench_s = strtod(optarg, NULL); break;
		case 'v': verbose = 1; break;
		default: usage(argv[0]);
		}
	}
	if (!sock == !fabric || !pcinet_vio_num_ok(t.num) || t.num < 8)
		usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fabric)
		goto on_fabric;

	/* The window, as pcinet-fabric would lay it out with -V 8M. */
	err = tu_memfd(&t.win, WIN_SIZE);
	if (err) {
		fprintf(stderr, "memfd: %s\n", strerror(-err));
		return 1;
	}
	w = t.win.base;
	err = pcinet_layout_init_vio(w, WIN_SIZE, 4, VIO_SIZE);
	if (!err)
		err = pcinet_layout_parse(w, WIN_SIZE, &lay);
	tu_result(!err && lay.has_vio,
		  "window %llu MiB laid out and parsed: dev region of side 0 at %#llx, drv region of side 1 at %#llx",
		  (unsigned long long)(WIN_SIZE >> 20),
		  (unsigned long long)lay.vio[0].dev_off,
		  (unsigned long long)lay.vio[1].drv_off);
	if (err || !lay.has_vio)
		goto out;
	/* The back end's memory: from side 0's dev region to the window's end. */
	t.mem = t.win;
	t.mem.gpa = lay.vio[0].dev_off;
	t.mem.offset = t.mem.gpa;
	t.mem.base = w + t.mem.gpa;
	t.mem.size = WIN_SIZE - t.mem.gpa;

	err = vu_connect(&t.dev, sock, TIMEOUT_MS);
	tu_result(!err, "connect %s", sock);
	if (err)
		goto out;
	t.dev.verbose = verbose;
	want = (1ull << VIRTIO_F_VERSION_1) | (1ull << VU_F_PROTOCOL_FEATURES) |
	       (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_BLK_SIZE) |
	       (1ull << VIRTIO_BLK_F_SEG_MAX);
	if (!no_ind)
		want |= 1ull << VIRTIO_RING_F_INDIRECT_DESC;
	if (!no_evt)
		want |= 1ull << VIRTIO_RING_F_EVENT_IDX;
	err = vu_negotiate(&t.dev, want,
			   (1ull << VU_PF_CONFIG) | (1ull << VU_PF_REPLY_ACK),
			   &t.mem);
	tu_result(!err, "negotiate: features %#llx, memory %#llx+%#llx (gpa = window offset)",
		  (unsigned long long)t.dev.acked_features,
		  (unsigned long long)t.mem.gpa,
		  (unsigned long long)t.mem.size);
	if (err)
		goto out;
	t.indirect = !!(t.dev.acked_features & (1ull << VIRTIO_RING_F_INDIRECT_DESC));
	t.event_idx = !!(t.dev.acked_features & (1ull << VIRTIO_RING_F_EVENT_IDX));
	memset(cfg, 0, sizeof(cfg));
	err = vu_get_config(&t.dev, 0, cfg, sizeof(cfg));
	memcpy(&t.capacity, cfg, 8);
	t.capacity = le64toh(t.capacity);
	memcpy(&seg_max, cfg + 12, 4);
	tu_result(!err && (!expect || t.capacity == expect),
		  "GET_CONFIG: capacity %llu sectors, seg_max %u",
		  (unsigned long long)t.capacity, le32toh(seg_max));
	if (err)
		goto out;

	/* D offers the device; B copies the description out and checks it. */
	feat = t.dev.acked_features & ~(1ull << VU_F_PROTOCOL_FEATURES);
	place_device(&t, &lay, feat);
	dreg = (struct pcinet_vio_area){ lay.vio[0].dev_off, lay.vio[0].dev_size };
	ureg = (struct pcinet_vio_area){ lay.vio[1].drv_off, lay.vio[1].drv_size };
	err = pcinet_vio_desc_read((void *)(w + lay.vio[1].drv_off +
					    PCINET_CACHELINE), &copy);
	if (!err)
		err = pcinet_vio_desc_check(&copy, &dreg, &ureg, NULL, 0, &t.info,
					    &why);
	tu_result(!err, "description: copied out (V2) and checked%s%s",
		  why ? ": " : "", why ? why : "");
	if (err)
		goto out;
	goto private_ring;

on_fabric:
	/* -S: the window and the device are pcinet-fabric's and side 0's */
	err = fab_connect(&t, fabric);
	tu_result(!err, "joined %s as side 1 (id %d), peer id %d, %u vectors%s%s",
		  fabric, fab.own_id, fab.peer_id, fab.nvec, err ? ": " : "",
		  err ? strerror(-err) : "");
	if (err)
		goto out;
	w = t.win.base;
	err = pcinet_layout_parse(w, t.win.size, &lay);
	tu_result(!err && lay.has_vio, "the fabric's window has virtio regions (drv region of side 1 at %#llx)",
		  (unsigned long long)lay.vio[1].drv_off);
	if (err || !lay.has_vio)
		goto out;
	err = fab_board_start(&t, &lay);
	if (err)
		goto out;
	dev_gen = fab_wait_gen(&t, 0, 10);
	dreg = (struct pcinet_vio_area){ lay.vio[0].dev_off, lay.vio[0].dev_size };
	ureg = (struct pcinet_vio_area){ lay.vio[1].drv_off, lay.vio[1].drv_size };
	err = dev_gen ? pcinet_vio_desc_read(t.ddesc, &copy) : -ETIMEDOUT;
	if (!err)
		err = pcinet_vio_desc_check(&copy, &dreg, &ureg, NULL, 0, &t.info,
					    &why);
	tu_result(!err && t.info.device_id == VIRTIO_ID_BLOCK,
		  "side 0 offers a device: dev_gen %#x, id %u, description checked%s%s",
		  dev_gen, t.info.device_id, why ? ": " : "", why ? why : "");
	if (err)
		goto out;
	dev_gen = t.info.dev_gen;
	memcpy(&t.capacity, copy.config, 8);
	t.capacity = le64toh(t.capacity);
	memcpy(&seg_max, copy.config + 12, 4);
	{
		uint32_t size_max;

		memcpy(&size_max, copy.config + 8, 4);
		tu_result((!expect || t.capacity == expect) &&
			  le32toh(size_max) >= 4096 && le32toh(seg_max) >= MAX_SEG + 2,
			  "config: capacity %llu sectors, size_max %u, seg_max %u",
			  (unsigned long long)t.capacity, le32toh(size_max),
			  le32toh(seg_max));
	}
	t.num = t.info.vq[0].num_max < t.num ? t.info.vq[0].num_max : t.num;
	want = t.info.features;
	if (no_ind)
		want &= ~(1ull << VIRTIO_RING_F_INDIRECT_DESC);
	if (no_evt)
		want &= ~(1ull << VIRTIO_RING_F_EVENT_IDX);
	t.indirect = !!(want & (1ull << VIRTIO_RING_F_INDIRECT_DESC));
	t.event_idx = !!(want & (1ull << VIRTIO_RING_F_EVENT_IDX));

private_ring:

	/* B: the private ring and the driver's buffers, in ordinary memory. */
	t.pdesc = calloc(t.num, 16);
	t.pavail = calloc(1, PCINET_VRING_AVAIL_BYTES(t.num));
	t.pused = calloc(1, PCINET_VRING_USED_BYTES(t.num));
	t.next = calloc(t.num, sizeof(*t.next));
	t.slot = calloc(t.num, sizeof(*t.slot));
	t.head_slot = calloc(t.num, sizeof(*t.head_slot));
	t.free_slot = calloc(t.num, sizeof(*t.free_slot));
	t.req = calloc(t.num, sizeof(*t.req));
	t.oext = calloc(t.num, sizeof(*t.oext));
	t.iext = calloc(t.num, sizeof(*t.iext));
	if (!t.pdesc || !t.pavail || !t.pused || !t.next || !t.slot ||
	    !t.head_slot || !t.free_slot || !t.req || !t.oext || !t.iext)
		goto out;
	for (i = 0; i < t.num; i++) {
		t.next[i] = (uint16_t)(i + 1);
		t.head_slot[i] = -1;
		t.slot[i].hdr = malloc(sizeof(*t.slot[i].hdr));
		t.slot[i].status = malloc(1);
		t.slot[i].data = malloc(MAX_DATA);
		t.slot[i].table = calloc(2 + MAX_SEG, 16);
		if (!t.slot[i].hdr || !t.slot[i].status || !t.slot[i].data ||
		    !t.slot[i].table)
			goto out;
		t.free_slot[i] = t.num - 1 - i;
	}
	t.nfree_slot = t.num;
	t.nfree = (uint16_t)t.num;
	t.rl.win = w;
	t.rl.ops = &mops;
	t.rl.device_id = t.info.device_id;
	t.rl.indirect = t.indirect;
	t.rl.event_idx = t.event_idx;
	pcinet_vio_pool_init(&t.rl.out, w + t.info.out_pool.off,
			     t.info.out_pool.off, t.info.out_pool.size, t.oext,
			     t.num);
	pcinet_vio_pool_init(&t.rl.in, w + t.info.in_pool.off,
			     t.info.in_pool.off, t.info.in_pool.size, t.iext,
			     t.num);
	pcinet_vio_vq_init(&t.vq, &t.rl, (u16)t.num, t.pdesc, t.pavail,
			   t.pused, w + t.info.vq[0].desc_off,
			   w + t.info.vq[0].avail_off,
			   w + t.info.vq[0].used_off, t.req);
	if (fabric) {
		/* kicks ring D's vector 3; the back end rings ours */
		t.kick_fd = dup(fab.peer_efd[FAB_VIRTIO]);
		t.call_fd = dup(fab.own_efd[FAB_VIRTIO]);
		if (t.kick_fd < 0 || t.call_fd < 0 || fab_probe(&t, dev_gen, want))
			goto out;
		goto running;
	}
	t.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	t.call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t.kick_fd < 0 || t.call_fd < 0)
		goto out;

	/* D starts the back end's ring on the device ring's three addresses. */
	vc = (struct vu_vring_cfg){
		.num = t.num,
		.desc_gpa = t.info.vq[0].desc_off,
		.avail_gpa = t.info.vq[0].avail_off,
		.used_gpa = t.info.vq[0].used_off,
		.kick_fd = t.kick_fd,
		.call_fd = t.call_fd,
	};
	err = vu_start_vring(&t.dev, 0, &vc);
	tu_result(!err, "vring 0: %u entries, desc %#llx avail %#llx (side 0's dev region), used %#llx (side 1's drv region), %s, %s",
		  t.num, (unsigned long long)vc.desc_gpa,
		  (unsigned long long)vc.avail_gpa,
		  (unsigned long long)vc.used_gpa,
		  t.indirect ? "indirect" : "direct",
		  t.event_idx ? "EVENT_IDX" : "no EVENT_IDX");
	if (err)
		goto out;

running:
	{
		uint8_t st = 0;
		uint32_t ulen = 0;
		char id[VIRTIO_BLK_ID_BYTES + 1];
		unsigned int s = t.free_slot[t.nfree_slot - 1];

		err = sync_req(&t, VIRTIO_BLK_T_GET_ID, 0, VIRTIO_BLK_ID_BYTES,
			       1, &st, &ulen);
		memcpy(id, t.slot[s].data, VIRTIO_BLK_ID_BYTES);
		id[VIRTIO_BLK_ID_BYTES] = 0;
		tu_result(!err && st == VIRTIO_BLK_S_OK,
			  "GET_ID through the relay: status %u, used len %u, \"%s\"",
			  st, ulen, id);

		s = t.free_slot[t.nfree_slot - 1];
		tu_fill(t.slot[s].data, DUMP_SECTOR, DUMP_SECTORS * SECTOR);
		err = sync_req(&t, VIRTIO_BLK_T_OUT, DUMP_SECTOR,
			       DUMP_SECTORS * SECTOR, 3, &st, &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_OK,
			  "OUT %u bytes at sector %u in 3 segments: status %u",
			  DUMP_SECTORS * SECTOR, DUMP_SECTOR, st);
		s = t.free_slot[t.nfree_slot - 1];
		memset(t.slot[s].data, 0xee, DUMP_SECTORS * SECTOR);
		err = sync_req(&t, VIRTIO_BLK_T_IN, DUMP_SECTOR,
			       DUMP_SECTORS * SECTOR, 2, &st, &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_OK &&
			  ulen == DUMP_SECTORS * SECTOR + 1 &&
			  tu_check(t.slot[s].data, DUMP_SECTOR,
				DUMP_SECTORS * SECTOR) < 0,
			  "IN %u bytes back in 2 segments: status %u, used len %u, data compared",
			  DUMP_SECTORS * SECTOR, st, ulen);
		err = sync_req(&t, VIRTIO_BLK_T_FLUSH, 0, 0, 0, &st, &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_OK, "FLUSH: status %u", st);
		err = sync_req(&t, VIRTIO_BLK_T_IN, t.capacity, SECTOR, 1, &st,
			       &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_IOERR,
			  "IN past the end: status %u (IOERR)", st);
	}

	/* Many in flight, the ring wrapped; then read back. */
	wrap_n = 3 * t.num + 5;
	r = (struct run){ .type = VIRTIO_BLK_T_OUT, .len = 4096, .nseg = 1,
			  .depth = t.num, .total = wrap_n, .verify = 1,
			  .first = WRAP_SECTOR, .span = wrap_n };
	err = run(&t, &r);
	tu_result(!err, "OUT %lu x 4096 bytes, up to %u in flight%s%s", r.done,
		  r.depth, err ? ": " : "", r.err);
	r.type = VIRTIO_BLK_T_IN;
	err = run(&t, &r);
	tu_result(!err, "IN %lu x 4096 bytes back, data checked%s%s", r.done,
		  err ? ": " : "", r.err);
	/* 64 KiB requests of 16 segments: OUT then IN, compared */
	r = (struct run){ .type = VIRTIO_BLK_T_OUT, .len = MAX_DATA,
			  .nseg = MAX_SEG, .depth = 48, .total = 300,
			  .verify = 1, .first = BIG_SECTOR, .span = 100 };
	err = run(&t, &r);
	if (!err) {
		r.type = VIRTIO_BLK_T_IN;
		err = run(&t, &r);
	}
	tu_result(!err, "64 KiB x 300 in 16 segments, 48 in flight (pools of %llu KiB), written and read back%s%s",
		  (unsigned long long)(POOL_SIZE >> 10), err ? ": " : "", r.err);
	r = (struct run){ .type = VIRTIO_BLK_T_IN, .len = 4096, .nseg = 1,
			  .depth = 32, .total = 70000, .verify = 1,
			  .first = WRAP_SECTOR, .span = wrap_n, .random = 1 };
	err = run(&t, &r);
	tu_result(!err, "IN %lu x 4096 at random, 32 in flight: private and device avail idx wrapped past 65535 (now %u, %u)%s%s",
		  r.done, t.avail_idx, t.vq.davail_idx, err ? ": " : "", r.err);

	if (do_bench)
		bench(&t, bench_s);

	tu_result(!t.vq.stats.err_idx && !t.vq.stats.err_id &&
		  !t.vq.stats.err_dup && !t.vq.stats.err_len &&
		  !t.vq.stats.aborted && !t.vq.inflight,
		  "relay: %llu relayed, %llu completed, %llu pool waits, no errors, nothing in flight",
		  (unsigned long long)t.vq.stats.relayed,
		  (unsigned long long)t.vq.stats.completed,
		  (unsigned long long)t.vq.stats.pool_waits);
	printf("# %lu kicks, %lu calls\n", t.kicks, t.calls);

	if (fabric) {
		int64_t a = fab_status(&t, 0, 0);

		tu_result(a == 0, "reset: status 0 answered (the back end's ring stopped)");
		if (wait_withdraw) {
			printf("# waiting for the device to be withdrawn\n");
			tu_result(!fab_wait_gen(&t, 1, 10),
				  "device withdrawn: dev_gen 0 in its slot");
		}
	} else {
		base = 0xffffffffu;
		err = vu_stop_vring(&t.dev, 0, &base);
		tu_result(!err && base == t.vq.davail_idx,
			  "GET_VRING_BASE: %u (device avail idx %u)", base,
			  t.vq.davail_idx);
	}
	if (dump) {
		char path[4096];

		err = write_dump(dump, DUMP_SECTOR, DUMP_SECTORS);
		snprintf(path, sizeof(path), "%s.wrap", dump);
		if (!err)
			err = write_dump(path, WRAP_SECTOR, wrap_n * 8);
		if (err)
			tu_result(0, "dump: %s", strerror(-err));
	}
out:
	if (fab.out) {
		fab.stop = 1;
		pthread_join(fab.beat, NULL);
		/* a stopped side: gen 0 */
		__atomic_store_n(&fab.out->gen, 0, __ATOMIC_RELEASE);
	}
	if (fab.sock >= 0)
		close(fab.sock);
	vu_close(&t.dev);
	if (t.kick_fd >= 0)
		close(t.kick_fd);
	if (t.call_fd >= 0)
		close(t.call_fd);
	if (t.slot)
		for (i = 0; i < t.num; i++) {
			free(t.slot[i].hdr);
			free(t.slot[i].status);
			free(t.slot[i].data);
			free(t.slot[i].table);
		}
	free(t.pdesc);
	free(t.pavail);
	free(t.pused);
	free(t.next);
	free(t.slot);
	free(t.head_slot);
	free(t.free_slot);
	free(t.req);
	free(t.oext);
	free(t.iext);
	tu_memfd_free(&t.win);
	printf("%d passed, %d failed\n", tu_passed, tu_failed);
	return tu_failed ? 1 : 0;
}
