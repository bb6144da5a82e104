// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * Userspace tests for the pcinet virtio relay.
 *
 * drivers/net/pcinet/pcinet_vio_ring.c is compiled unmodified next to this
 * file, with pcinet_user.h standing in for the kernel; built with ASan and
 * UBSan.  The "window" is a heap block of exactly its size, the private
 * ring three blocks of exactly theirs, the driver's buffers one block
 * each, so any access outside them is caught.
 *
 * A small driver (drv_*) plays virtio_ring on the private ring (free
 * list, direct and indirect chains, used entries); a small device (dev_*)
 * plays the back end on the device ring (window offsets), honest or
 * hostile.
 *
 * Output: "ok - <name>" or "FAIL - <name>: <why>" per case, "# ..." info,
 * "N passed, N failed"; exit status 1 if anything failed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "pcinet_grace.h"
#include "pcinet_vio_ring.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define EPROTO_RET	(-PCINET_VIO_EPROTO)
#define K4		4096u

static char fail_msg[256];

static int failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int failf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
	va_end(ap);
	return -1;
}

#define CHECK(cond, ...)	do { if (!(cond)) return failf(__VA_ARGS__); } while (0)

static u64 rnd_state = 0x9e3779b97f4a7c15ull;

static u32 rnd(void)
{
	u64 x = rnd_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rnd_state = x;
	return (u32)(x >> 32);
}

static u32 rnd_below(u32 n)
{
	return (u32)(((u64)rnd() * n) >> 32);
}

static u8 pat(u32 seed, u32 i)
{
	u32 x = seed * 2654435761u + i * 40503u;

	x ^= x >> 13;
	return (u8)(x * 0x2c1b3c6du >> 24);
}

/* What the device writes: never 0xff, so a poisoned byte is unambiguous. */
static u8 pin(u32 seed, u32 i)
{
	return pat(seed + 1000, i) & 0x7f;
}

/* ------------------------------------------------------------------ */
/* Memory ops: driver addresses are plain pointers                     */
/* ------------------------------------------------------------------ */

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
/* Fixture: window, pools, rings, a driver and a device                */
/* ------------------------------------------------------------------ */

#define MAX_SEG		66
#define WIN_RING	0x0000u		/* desc, avail */
#define WIN_USED	0x8000u
#define WIN_OUT		0x10000u

struct dreq {			/* the driver's view of one request */
	bool busy;
	u32 seed;
	u32 nout, nin;
	u8 *buf[MAX_SEG];
	u32 len[MAX_SEG];
	void *table;		/* indirect table, or NULL */
};

struct fx {
	u16 num;
	u8 *win;
	u64 win_size, out_size, in_size;
	struct pcinet_vio_ext *oext, *iext;
	struct pcinet_vio_relay rl;
	struct pcinet_vio_vq vq;
	struct pcinet_vio_req *req;
	struct pcinet_vring_desc *pdesc;
	struct pcinet_vring_avail *pavail;
	struct pcinet_vring_used *pused;
	/* driver */
	u16 free_head, nfree, avail_idx, last_used;
	u16 *next;
	struct dreq *dr;
	u32 seq;
	u64 done, bad_data, errors_seen;
	/* device */
	u16 dlast_avail, dused_idx;
	u16 pending[1024];	/* heads taken, not yet used */
	u32 npending;
};

static struct pcinet_vring_avail *davail(struct fx *f)
{
	return (void *)(f->win + WIN_RING + 16 * f->num);
}

static struct pcinet_vring_used *dused(struct fx *f)
{
	return (void *)(f->win + WIN_USED);
}

static void fx_free(struct fx *f)
{
	u32 i, k;

	if (f->dr)
		for (i = 0; i < f->num; i++) {
			for (k = 0; k < MAX_SEG; k++)
				free(f->dr[i].buf[k]);
			free(f->dr[i].table);
		}
	free(f->dr);
	free(f->next);
	free(f->win);
	free(f->oext);
	free(f->iext);
	free(f->req);
	free(f->pdesc);
	free(f->pavail);
	free(f->pused);
	memset(f, 0, sizeof(*f));
}

static int fx_init(struct fx *f, u16 num, u64 out_size, u64 in_size,
		   bool indirect, bool event_idx)
{
	u32 i;

	memset(f, 0, sizeof(*f));
	f->num = num;
	f->out_size = out_size;
	f->in_size = in_size;
	f->win_size = WIN_OUT + out_size + in_size;
	f->win = malloc(f->win_size);
	f->oext = calloc(num, sizeof(*f->oext));
	f->iext = calloc(num, sizeof(*f->iext));
	f->req = calloc(num, sizeof(*f->req));
	f->pdesc = calloc(num, 16);
	f->pavail = calloc(1, PCINET_VRING_AVAIL_BYTES(num));
	f->pused = calloc(1, PCINET_VRING_USED_BYTES(num));
	f->next = calloc(num, sizeof(*f->next));
	f->dr = calloc(num, sizeof(*f->dr));
	if (!f->win || !f->oext || !f->iext || !f->req || !f->pdesc ||
	    !f->pavail || !f->pused || !f->next || !f->dr) {
		fx_free(f);
		return failf("out of memory");
	}
	memset(f->win, 0xaa, f->win_size);
	memset(f->win + WIN_USED, 0, PCINET_VRING_USED_BYTES(num));
	f->rl.win = f->win;
	f->rl.ops = &mops;
	f->rl.device_id = 2;
	f->rl.indirect = indirect;
	f->rl.event_idx = event_idx;
	pcinet_vio_pool_init(&f->rl.out, f->win + WIN_OUT, WIN_OUT, out_size,
			     f->oext, num);
	pcinet_vio_pool_init(&f->rl.in, f->win + WIN_OUT + out_size,
			     WIN_OUT + out_size, in_size, f->iext, num);
	pcinet_vio_vq_init(&f->vq, &f->rl, num, f->pdesc, f->pavail, f->pused,
			   f->win + WIN_RING, davail(f), dused(f), f->req);
	for (i = 0; i < num; i++)
		f->next[i] = (u16)(i + 1);
	f->nfree = num;
	return 0;
}

/* Driver: post a request of NOUT + NIN buffers; -1 if no descriptors. */
static int drv_add(struct fx *f, const u32 *lens, u32 nout, u32 nin,
		   bool indirect)
{
	u32 n = nout + nin, k, need = indirect ? 1 : n;
	struct pcinet_vring_desc *t = NULL;
	u16 head, i;
	struct dreq *d;

	if (need > f->nfree)
		return -1;
	head = f->free_head;
	d = &f->dr[head];
	d->busy = true;
	d->seed = ++f->seq;
	d->nout = nout;
	d->nin = nin;
	for (k = 0; k < n; k++) {
		d->buf[k] = realloc(d->buf[k], lens[k] ? lens[k] : 1);
		d->len[k] = lens[k];
		if (k < nout) {
			u32 j;

			for (j = 0; j < lens[k]; j++)
				d->buf[k][j] = pat(d->seed + k, j);
		} else {
			memset(d->buf[k], 0x11, lens[k] ? lens[k] : 1);
		}
	}
	if (indirect) {
		t = calloc(n, sizeof(*t));
		d->table = t;
	}
	i = head;
	for (k = 0; k < n; k++) {
		struct pcinet_vring_desc *pd = indirect ? &t[k] : &f->pdesc[i];
		u16 fl = 0;

		if (k >= nout)
			fl |= PCINET_VRING_F_WRITE;
		if (k + 1 < n)
			fl |= PCINET_VRING_F_NEXT;
		pd->addr = (u64)(uintptr_t)d->buf[k];
		pd->len = lens[k];
		pd->flags = fl;
		pd->next = indirect ? (u16)(k + 1) : f->next[i];
		if (!indirect)
			i = f->next[i];
	}
	if (indirect) {
		f->pdesc[head].addr = (u64)(uintptr_t)t;
		f->pdesc[head].len = 16 * n;
		f->pdesc[head].flags = PCINET_VRING_F_INDIRECT;
		i = f->next[head];
	}
	f->free_head = i;
	f->nfree -= need;
	f->pavail->ring[f->avail_idx & (f->num - 1)] = head;
	f->avail_idx++;
	__atomic_store_n(&f->pavail->idx, f->avail_idx, __ATOMIC_RELEASE);
	return head;
}

/* Driver: reap private used entries; checks data, counts 0xff results. */
static int drv_reap(struct fx *f)
{
	u16 idx = __atomic_load_n(&f->pused->idx, __ATOMIC_ACQUIRE);

	while (f->last_used != idx) {
		struct pcinet_vring_used_elem e =
			f->pused->ring[f->last_used & (f->num - 1)];
		struct dreq *d;
		u32 k, j, n, chain, last;

		CHECK(e.id < f->num && f->dr[e.id].busy,
		      "private used id %u not in flight", e.id);
		d = &f->dr[e.id];
		for (k = d->nout; k < d->nout + d->nin; k++)
			for (j = 0; j < d->len[k]; j++) {
				u8 b = d->buf[k][j];

				if (b == 0xff && j == 0)
					f->errors_seen++;
				if (b != pin(d->seed + k, j) && b != 0xff)
					f->bad_data++;
			}
		/* return descriptors to the free list */
		n = d->nout + d->nin;
		chain = d->table ? 1 : n;
		last = e.id;
		for (k = 1; k < chain; k++)
			last = f->next[last];
		f->next[last] = f->free_head;
		f->free_head = (u16)e.id;
		f->nfree += chain;
		free(d->table);
		d->table = NULL;
		d->busy = false;
		f->last_used++;
		f->done++;
	}
	return 0;
}

/* Device: read a device descriptor chain; check OUT data, write IN data. */
static u32 dev_serve(struct fx *f, u16 head, bool *ok)
{
	struct pcinet_vring_desc *dt = (void *)(f->win + WIN_RING);
	struct pcinet_vring_desc *tab = dt;
	u32 written = 0, k = 0, i = head, n = f->num;
	struct dreq *d = &f->dr[head];

	if (dt[head].flags & PCINET_VRING_F_INDIRECT) {
		tab = (void *)(f->win + dt[head].addr);
		n = dt[head].len / 16;
		i = 0;
	}
	for (;;) {
		struct pcinet_vring_desc x = tab[i];
		u8 *p = f->win + x.addr;
		u32 j;

		if (x.addr + x.len > f->win_size || k >= MAX_SEG ||
		    x.len != d->len[k]) {
			*ok = false;
			return 0;
		}
		if (x.flags & PCINET_VRING_F_WRITE) {
			/* every IN byte must read 0xff before we write it */
			for (j = 0; j < x.len; j++) {
				if (p[j] != 0xff)
					*ok = false;
				p[j] = pin(d->seed + k, j);
			}
			written += x.len;
		} else {
			for (j = 0; j < x.len; j++)
				if (p[j] != pat(d->seed + k, j))
					*ok = false;
		}
		k++;
		if (!(x.flags & PCINET_VRING_F_NEXT))
			break;
		i = x.next;
		if (i >= n) {
			*ok = false;
			return 0;
		}
	}
	return written;
}

/* Device: take new avail entries. */
static void dev_take(struct fx *f)
{
	u16 idx = __atomic_load_n(&davail(f)->idx, __ATOMIC_ACQUIRE);

	while (f->dlast_avail != idx && f->npending < ARRAY_SIZE(f->pending))
		f->pending[f->npending++] =
			davail(f)->ring[f->dlast_avail++ & (f->num - 1)];
}

/* Device: complete up to MAX pending requests, in a shuffled order. */
static int dev_complete(struct fx *f, u32 max)
{
	struct pcinet_vring_used *u = dused(f);
	bool ok = true;

	while (max-- && f->npending) {
		u32 pick = rnd_below(f->npending);
		u16 head = f->pending[pick];
		u32 len;

		f->pending[pick] = f->pending[--f->npending];
		len = dev_serve(f, head, &ok);
		u->ring[f->dused_idx & (f->num - 1)].id = head;
		u->ring[f->dused_idx & (f->num - 1)].len = len;
		f->dused_idx++;
	}
	__atomic_store_n(&u->idx, f->dused_idx, __ATOMIC_RELEASE);
	CHECK(ok, "device saw wrong OUT data, IN not pre-filled or a bad chain");
	return 0;
}

/* A random request shape: OUT buffers then IN buffers, some large. */
static void rnd_req(u32 *lens, u32 *nout, u32 *nin, u32 maxlen)
{
	u32 k;

	*nout = 1 + rnd_below(3);
	*nin = 1 + rnd_below(3);
	for (k = 0; k < *nout + *nin; k++)
		lens[k] = rnd_below(4) ? 1 + rnd_below(300) : 1 + rnd_below(maxlen);
}

/* ------------------------------------------------------------------ */
/* Cases                                                               */
/* ------------------------------------------------------------------ */

static int t_pool(void)
{
	struct pcinet_vio_ext ext[8];
	struct pcinet_vio_pool p;
	u64 off[8], o;
	u32 i;

	pcinet_vio_pool_init(&p, NULL, 0x10000, 8 * K4, ext, 8);
	for (i = 0; i < 8; i++)
		CHECK(!pcinet_vio_pool_alloc(&p, K4, K4, &off[i]) &&
		      off[i] == i * K4, "alloc %u at %#llx", i,
		      (unsigned long long)off[i]);
	CHECK(pcinet_vio_pool_alloc(&p, 64, 64, &o), "exhausted pool gave %#llx",
	      (unsigned long long)o);
	CHECK(p.used == 8 * K4, "used %llu", (unsigned long long)p.used);
	/* fragmentation: free 1, 3, 5; 8 KiB does not fit, 4 KiB does */
	CHECK(!pcinet_vio_pool_free(&p, off[1]) && !pcinet_vio_pool_free(&p, off[3]) &&
	      !pcinet_vio_pool_free(&p, off[5]), "free");
	CHECK(pcinet_vio_pool_alloc(&p, 2 * K4, 64, &o), "8 KiB in 4 KiB holes");
	CHECK(!pcinet_vio_pool_alloc(&p, 100, 64, &o) && o == K4, "first fit %#llx",
	      (unsigned long long)o);
	/* the rest of hole 1 at a 64-byte boundary */
	CHECK(!pcinet_vio_pool_alloc(&p, 100, 64, &o) && o == K4 + 128,
	      "second small at %#llx", (unsigned long long)o);
	CHECK(pcinet_vio_pool_free(&p, K4 + 1) == -1, "free of a non-extent");
	CHECK(!pcinet_vio_pool_free(&p, K4) && !pcinet_vio_pool_free(&p, K4 + 128),
	      "free small");
	/* free 2 and 4: 1..5 is one 20 KiB hole */
	CHECK(!pcinet_vio_pool_free(&p, off[2]) && !pcinet_vio_pool_free(&p, off[4]),
	      "free 2, 4");
	CHECK(!pcinet_vio_pool_alloc(&p, 5 * K4, K4, &o) && o == K4,
	      "coalesced hole: %#llx", (unsigned long long)o);
	CHECK(p.used == 8 * K4 && p.nr == 4, "used %llu nr %u",
	      (unsigned long long)p.used, p.nr);
	/* too big, zero size, table full */
	CHECK(pcinet_vio_pool_alloc(&p, 9 * K4, 64, &o), "larger than the pool");
	CHECK(pcinet_vio_pool_alloc(&p, 0, 64, &o), "size 0");
	pcinet_vio_pool_reset(&p);
	for (i = 0; i < 8; i++)
		CHECK(!pcinet_vio_pool_alloc(&p, 64, 64, &o), "small %u", i);
	CHECK(pcinet_vio_pool_alloc(&p, 64, 64, &o), "9th extent with room for 8");
	/* alignment */
	pcinet_vio_pool_reset(&p);
	CHECK(!pcinet_vio_pool_alloc(&p, 10, 64, &o) && o == 0, "a");
	CHECK(!pcinet_vio_pool_alloc(&p, K4, K4, &o) && o == K4, "aligned %#llx",
	      (unsigned long long)o);
	CHECK(!pcinet_vio_pool_alloc(&p, 10, 64, &o) && o == 64, "gap reused %#llx",
	      (unsigned long long)o);
	return 0;
}

/* Random alloc/free against a byte map: no overlap, all inside. */
static int t_pool_random(void)
{
	enum { POOL = 256 * 1024, N = 64 };
	struct pcinet_vio_ext ext[N];
	struct pcinet_vio_pool p;
	u64 off[N], sz[N], o;
	static u8 map[POOL];
	u32 i, j, live = 0, fails = 0;

	pcinet_vio_pool_init(&p, NULL, 0, POOL, ext, N);
	memset(off, 0xff, sizeof(off));
	for (i = 0; i < 200000; i++) {
		j = rnd_below(N);
		if (off[j] != ~0ull) {
			CHECK(!pcinet_vio_pool_free(&p, off[j]), "free %u", i);
			memset(map + off[j], 0, sz[j]);
			off[j] = ~0ull;
			live--;
			continue;
		}
		sz[j] = 1 + rnd_below(rnd_below(4) ? 2000 : 40000);
		if (pcinet_vio_pool_alloc(&p, sz[j], sz[j] >= K4 ? K4 : 64, &o)) {
			fails++;
			continue;
		}
		CHECK(o + sz[j] <= POOL && !(o % (sz[j] >= K4 ? K4 : 64)),
		      "extent %#llx+%llu", (unsigned long long)o,
		      (unsigned long long)sz[j]);
		CHECK(!memchr(map + o, 1, sz[j]), "overlap at %#llx",
		      (unsigned long long)o);
		memset(map + o, 1, sz[j]);
		off[j] = o;
		live++;
	}
	printf("# pool random: %u live at the end, %u allocations found no room\n",
	       live, fails);
	return 0;
}

/* A good description: 2 queues of 64 in 64 KiB spans. */
static void good_desc(struct pcinet_vio_devdesc *d, struct pcinet_vio_area *dev,
		      struct pcinet_vio_area *drv)
{
	u64 ds = 0x210000, us = 0x410000;

	*dev = (struct pcinet_vio_area){ 0x200000, 0x200000 };
	*drv = (struct pcinet_vio_area){ 0x400000, 0x200000 };
	memset(d, 0, sizeof(*d));
	d->dev_gen = 7;
	d->device_id = 2;
	d->nr_vq = 2;
	d->features = (1ull << PCINET_VIRTIO_F_VERSION_1) |
		      (1ull << PCINET_VIRTIO_F_INDIRECT_DESC);
	d->config_len = 60;
	d->dev_span_off = ds;
	d->dev_span_size = 0x30000;
	d->drv_span_off = us;
	d->drv_span_size = 0x30000;
	d->vq[0] = (struct pcinet_vio_vqdesc){ .num_max = 64, .desc_off = ds,
		.avail_off = ds + 0x400, .used_off = us };
	d->vq[1] = (struct pcinet_vio_vqdesc){ .num_max = 64, .desc_off = ds + 0x800,
		.avail_off = ds + 0xc00, .used_off = us + 0x400 };
	d->out_pool_off = ds + 0x1000;
	d->out_pool_size = 0x2f000;
	d->in_pool_off = us + 0x1000;
	d->in_pool_size = 0x2f000;
}

enum dmut {
	DM_NONE, DM_GEN, DM_ID, DM_NRVQ0, DM_NRVQ9, DM_NUM0, DM_NUM3, DM_NUM2K,
	DM_DESC_AL, DM_AVAIL_AL, DM_USED_AL, DM_CFG, DM_V1, DM_AP, DM_SPAN_AL,
	DM_SPAN_SZ, DM_SPAN_FIXED, DM_SPAN_OUT, DM_SPAN_HUGE, DM_DRV_SPAN,
	DM_POOL_AL, DM_POOL_SZ, DM_POOL_OUT, DM_INPOOL_OUT, DM_RING_OUT,
	DM_USED_OUT, DM_OVERLAP, DM_USED_OVERLAP, DM_LIVE, DM_RING_HUGE,
	DM_UNUSED_VQ,
};

static int t_desc(void)
{
	static const struct {
		enum dmut m;
		bool ok;
		const char *what;
	} rows[] = {
		{ DM_NONE, true, "good" },
		{ DM_GEN, false, "dev_gen 0" },
		{ DM_ID, false, "device_id 0" },
		{ DM_NRVQ0, false, "nr_vq 0" },
		{ DM_NRVQ9, false, "nr_vq 9" },
		{ DM_NUM0, false, "num_max 0" },
		{ DM_NUM3, false, "num_max 3" },
		{ DM_NUM2K, false, "num_max 2048" },
		{ DM_DESC_AL, false, "desc_off 8-aligned" },
		{ DM_AVAIL_AL, false, "avail_off odd" },
		{ DM_USED_AL, false, "used_off 2-aligned" },
		{ DM_CFG, false, "config_len 257" },
		{ DM_V1, false, "VERSION_1 clear" },
		{ DM_AP, false, "ACCESS_PLATFORM set" },
		{ DM_SPAN_AL, false, "dev span not 64 KiB aligned" },
		{ DM_SPAN_SZ, false, "dev span size not 64 KiB" },
		{ DM_SPAN_FIXED, false, "dev span over the fixed part" },
		{ DM_SPAN_OUT, false, "dev span past its region" },
		{ DM_SPAN_HUGE, false, "dev span offset + size overflow" },
		{ DM_DRV_SPAN, false, "drv span in the dev region" },
		{ DM_POOL_AL, false, "OUT pool not 4 KiB aligned" },
		{ DM_POOL_SZ, false, "OUT pool size 0" },
		{ DM_POOL_OUT, false, "OUT pool past its span" },
		{ DM_INPOOL_OUT, false, "IN pool in the dev span" },
		{ DM_RING_OUT, false, "avail ring past its span" },
		{ DM_USED_OUT, false, "used ring in the dev span" },
		{ DM_OVERLAP, false, "desc table over the OUT pool" },
		{ DM_USED_OVERLAP, false, "two used rings overlap" },
		{ DM_LIVE, false, "span of a live device" },
		{ DM_RING_HUGE, false, "desc_off near 2^64" },
		{ DM_UNUSED_VQ, true, "garbage in a queue past nr_vq (ignored)" },
	};
	struct pcinet_vio_devinfo info, live;
	struct pcinet_vio_area dev, drv;
	struct pcinet_vio_devdesc d, w, c;
	const char *why = NULL;
	u32 i;
	int r;

	/* a live device elsewhere in the regions */
	good_desc(&d, &dev, &drv);
	d.dev_span_off = 0x300000;
	d.drv_span_off = 0x500000;
	d.vq[0].desc_off += 0xf0000;
	d.vq[0].avail_off += 0xf0000;
	d.vq[0].used_off += 0xf0000;
	d.vq[1].desc_off += 0xf0000;
	d.vq[1].avail_off += 0xf0000;
	d.vq[1].used_off += 0xf0000;
	d.out_pool_off += 0xf0000;
	d.in_pool_off += 0xf0000;
	CHECK(!pcinet_vio_desc_check(&d, &dev, &drv, NULL, 0, &live, &why),
	      "the live device: %s", why);
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		good_desc(&d, &dev, &drv);
		switch (rows[i].m) {
		case DM_GEN: d.dev_gen = 0; break;
		case DM_ID: d.device_id = 0; break;
		case DM_NRVQ0: d.nr_vq = 0; break;
		case DM_NRVQ9: d.nr_vq = 9; break;
		case DM_NUM0: d.vq[1].num_max = 0; break;
		case DM_NUM3: d.vq[0].num_max = 3; break;
		case DM_NUM2K: d.vq[0].num_max = 2048; break;
		case DM_DESC_AL: d.vq[1].desc_off += 8; break;
		case DM_AVAIL_AL: d.vq[0].avail_off += 1; break;
		case DM_USED_AL: d.vq[0].used_off += 2; break;
		case DM_CFG: d.config_len = 257; break;
		case DM_V1: d.features &= ~(1ull << PCINET_VIRTIO_F_VERSION_1); break;
		case DM_AP: d.features |= 1ull << PCINET_VIRTIO_F_ACCESS_PLATFORM; break;
		case DM_SPAN_AL: d.dev_span_off -= 0x1000; break;
		case DM_SPAN_SZ: d.dev_span_size += 0x1000; break;
		case DM_SPAN_FIXED: d.dev_span_off = 0x200000; break;
		case DM_SPAN_OUT: d.dev_span_size = 0x200000; break;
		case DM_SPAN_HUGE: d.dev_span_size = ~0ull << 16; break;
		case DM_DRV_SPAN: d.drv_span_off = 0x3f0000; d.drv_span_size = 0x10000; break;
		case DM_POOL_AL: d.out_pool_off += 64; d.out_pool_size -= K4; break;
		case DM_POOL_SZ: d.out_pool_size = 0; break;
		case DM_POOL_OUT: d.out_pool_size += K4; break;
		case DM_INPOOL_OUT: d.in_pool_off = d.out_pool_off; break;
		case DM_RING_OUT: d.vq[1].avail_off = 0x23fff0; break;
		case DM_USED_OUT: d.vq[0].used_off = d.dev_span_off; break;
		case DM_OVERLAP: d.vq[1].desc_off = d.out_pool_off - 0x200; break;
		case DM_USED_OVERLAP: d.vq[1].used_off = d.vq[0].used_off + 0x100; break;
		case DM_LIVE: d.drv_span_off = 0x500000; d.vq[0].used_off = 0x500000;
			d.vq[1].used_off = 0x500400; d.in_pool_off = 0x501000; break;
		case DM_RING_HUGE: d.vq[0].desc_off = ~0ull & ~15ull; break;
		case DM_UNUSED_VQ: d.vq[5].num_max = 3; d.vq[5].desc_off = 1; break;
		default: break;
		}
		r = pcinet_vio_desc_check(&d, &dev, &drv, &live, 1, &info, &why);
		CHECK((r == 0) == rows[i].ok, "row %u (%s): check %d (%s)", i,
		      rows[i].what, r, why ? why : "passed");
		if (r)
			continue;
		CHECK(info.nr_vq == 2 && info.vq[1].num_max == 64 &&
		      info.out_pool.off == d.out_pool_off &&
		      info.in_pool.size == d.in_pool_size, "decoded");
	}
	/* V2: a quiet slot reads back as written, an empty one as gen 0 */
	good_desc(&w, &dev, &drv);
	CHECK(!pcinet_vio_desc_read(&w, &c) && !memcmp(&w, &c, sizeof(w)), "read");
	w.dev_gen = 0;
	CHECK(!pcinet_vio_desc_read(&w, &c) && !c.dev_gen, "empty slot");
	return 0;
}

/* Round trips with an honest device; depth, shapes, wrap past 65535. */
static int t_relay(u16 num, bool indirect, bool ind_dev, bool event_idx,
		   u32 total, u32 maxlen, u64 pool)
{
	struct fx f;
	u32 lens[MAX_SEG], nout, nin, posted = 0, rounds = 0;
	int r;

	if (fx_init(&f, num, pool, pool, ind_dev, event_idx))
		return -1;
	while (f.done < total) {
		while (posted < total && rnd_below(4)) {
			rnd_req(lens, &nout, &nin, maxlen);
			if (drv_add(&f, lens, nout, nin, indirect && rnd_below(2)) < 0)
				break;
			posted++;
		}
		r = pcinet_vio_submit(&f.vq);
		if (r < 0)
			goto fail;
		dev_take(&f);
		if (dev_complete(&f, rnd_below(num + 1)))
			goto fail;
		r = pcinet_vio_complete(&f.vq);
		if (r < 0)
			goto fail;
		if (drv_reap(&f))
			goto fail;
		if (++rounds > 50 * total + 1000) {
			failf("no progress: %llu of %u", (unsigned long long)f.done, total);
			goto fail;
		}
	}
	if (f.bad_data || f.errors_seen || f.vq.stats.aborted ||
	    f.vq.stats.completed != total || f.rl.out.nr || f.rl.in.nr ||
	    f.vq.inflight) {
		failf("bad data %llu, errors %llu, aborted %llu, completed %llu, extents %u/%u",
		      (unsigned long long)f.bad_data,
		      (unsigned long long)f.errors_seen,
		      (unsigned long long)f.vq.stats.aborted,
		      (unsigned long long)f.vq.stats.completed, f.rl.out.nr,
		      f.rl.in.nr);
		goto fail;
	}
	printf("# relay num %u%s%s: %u requests, private idx %u, device idx %u, %llu pool waits\n",
	       num, indirect ? " indirect" : "", event_idx ? " event_idx" : "",
	       total, f.avail_idx, f.vq.davail_idx,
	       (unsigned long long)f.vq.stats.pool_waits);
	fx_free(&f);
	return 0;
fail:
	if (!fail_msg[0])
		failf("relay error %s", f.vq.why ? f.vq.why : "?");
	fx_free(&f);
	return -1;
}

static int t_relay_direct(void)
{
	return t_relay(8, false, true, false, 70000, 3000, 256 * 1024);
}

static int t_relay_indirect(void)
{
	return t_relay(16, true, true, true, 70000, 9000, 256 * 1024);
}

static int t_relay_big(void)
{
	/* 6 x 64 KiB at most: 512 KiB pools hold one, often several */
	return t_relay(128, true, true, false, 20000, 64 * 1024, 512 * 1024);
}

/* Private indirect chain with a device without INDIRECT_DESC: aborted. */
static int t_relay_no_indirect(void)
{
	u32 lens[2] = { 16, 1 };
	struct fx f;
	int r;

	if (fx_init(&f, 8, 64 * 1024, 64 * 1024, false, false))
		return -1;
	drv_add(&f, lens, 1, 1, true);
	r = pcinet_vio_submit(&f.vq);
	drv_reap(&f);
	if (r != PCINET_VIO_INTR || f.vq.stats.bad_chain != 1 ||
	    f.errors_seen != 1 || f.vq.davail_idx) {
		fx_free(&f);
		return failf("submit %d, bad_chain %llu", r,
			     (unsigned long long)f.vq.stats.bad_chain);
	}
	fx_free(&f);
	return 0;
}

/* FIFO waiting on a full pool; too big requests fail at once. */
static int t_pool_wait(void)
{
	u32 lens[2] = { 12 * 1024, 1 }, big[2] = { 64 * 1024, 1 };
	struct fx f;
	int r, i;

	if (fx_init(&f, 16, 32 * 1024, 16 * 1024, true, false))
		return -1;
	/* 12 KiB OUT each: two fit into the 32 KiB OUT pool */
	for (i = 0; i < 4; i++)
		drv_add(&f, lens, 1, 1, false);
	r = pcinet_vio_submit(&f.vq);
	CHECK(r == PCINET_VIO_KICK && f.vq.davail_idx == 2 &&
	      f.vq.stats.pool_waits == 1, "first batch: %d, %u relayed", r,
	      f.vq.davail_idx);
	r = pcinet_vio_submit(&f.vq);
	CHECK(r == 0 && f.vq.davail_idx == 2, "retry without completions: %d", r);
	/* OUT pool is 32 KiB: a 64 KiB buffer can never fit: aborted, not blocking */
	dev_take(&f);
	CHECK(!dev_complete(&f, 1), "%s", fail_msg);
	r = pcinet_vio_complete(&f.vq);
	CHECK(r == PCINET_VIO_INTR, "complete %d", r);
	r = pcinet_vio_submit(&f.vq);
	CHECK(r == PCINET_VIO_KICK && f.vq.davail_idx == 3, "one more fits: %d %u",
	      r, f.vq.davail_idx);
	drv_add(&f, big, 1, 1, false);
	dev_take(&f);
	CHECK(!dev_complete(&f, 16), "%s", fail_msg);
	pcinet_vio_complete(&f.vq);
	r = pcinet_vio_submit(&f.vq);
	CHECK(f.vq.davail_idx == 4 && f.vq.stats.too_big == 1 &&
	      (r & PCINET_VIO_INTR), "last one and the big one: %d %u %llu",
	      r, f.vq.davail_idx, (unsigned long long)f.vq.stats.too_big);
	dev_take(&f);
	CHECK(!dev_complete(&f, 16), "%s", fail_msg);
	pcinet_vio_complete(&f.vq);
	drv_reap(&f);
	CHECK(f.done == 5 && f.errors_seen == 1 && !f.bad_data &&
	      f.vq.stats.completed == 4, "done %llu errors %llu",
	      (unsigned long long)f.done, (unsigned long long)f.errors_seen);
	fx_free(&f);
	return 0;
}

/* OUT extents: gaps zeroed, nothing past the copied bytes but zeroes. */
static int t_no_leak(void)
{
	u32 lens[4] = { 16, 5000, 3, 1 };
	struct pcinet_vio_req *r;
	struct fx f;
	u64 i, at[3];
	u8 *p;

	if (fx_init(&f, 8, 64 * 1024, 64 * 1024, true, false))
		return -1;
	drv_add(&f, lens, 3, 1, true);
	pcinet_vio_submit(&f.vq);
	r = &f.req[0];
	CHECK(r->busy && r->out_size, "not relayed");
	p = f.rl.out.mem + r->out_off;
	/* table 4 entries (64 bytes), buffers at 64, 4096 (5000 >= 4 KiB), 9152 */
	at[0] = 64;
	at[1] = 4096;
	at[2] = 4096 + 5000 + (64 - (4096 + 5000) % 64);
	CHECK(r->out_size == at[2] + 3, "extent size %llu", (unsigned long long)r->out_size);
	for (i = at[0] + 16; i < at[1]; i++)
		CHECK(!p[i], "gap byte %llu", (unsigned long long)i);
	for (i = at[1] + 5000; i < at[2]; i++)
		CHECK(!p[i], "gap byte %llu", (unsigned long long)i);
	CHECK(r->in_size == 1 && f.rl.in.mem[r->in_off] == 0xff, "IN prefill");
	fx_free(&f);
	return 0;
}

/* A hostile device: each kind of bad used entry is caught, then abort. */
enum hostile { H_IDX, H_ID, H_DUP, H_LEN, H_IDX_BACK };

static int t_hostile_one(enum hostile h)
{
	u32 lens[3] = { 16, 512, 1 };
	struct pcinet_vring_used *u;
	struct fx f;
	int r, i;

	if (fx_init(&f, 16, 64 * 1024, 64 * 1024, true, false))
		return -1;
	for (i = 0; i < 3; i++)
		drv_add(&f, lens, 1, 2, false);
	pcinet_vio_submit(&f.vq);
	dev_take(&f);
	u = dused(&f);
	/* one honest completion first */
	CHECK(!dev_complete(&f, 1), "%s", fail_msg);
	CHECK(pcinet_vio_complete(&f.vq) == PCINET_VIO_INTR, "honest one");
	switch (h) {
	case H_IDX:
		u->idx = f.dused_idx + 3;	/* 2 in flight */
		break;
	case H_IDX_BACK:
		u->idx = f.dused_idx - 1;
		break;
	case H_ID:
		u->ring[f.dused_idx & 15].id = 16;
		u->idx = f.dused_idx + 1;
		break;
	case H_DUP:
		u->ring[f.dused_idx & 15] = u->ring[(f.dused_idx - 1) & 15];
		u->idx = f.dused_idx + 1;
		break;
	case H_LEN:
		u->ring[f.dused_idx & 15].id = f.pending[0];
		u->ring[f.dused_idx & 15].len = 514;
		u->idx = f.dused_idx + 1;
		break;
	}
	r = pcinet_vio_complete(&f.vq);
	CHECK(r == EPROTO_RET && f.rl.dead, "complete %d", r);
	CHECK(f.vq.stats.err_idx + f.vq.stats.err_id + f.vq.stats.err_dup +
	      f.vq.stats.err_len == 1, "counted once");
	/* dead: complete does nothing more, more driver requests are aborted */
	CHECK(pcinet_vio_complete(&f.vq) == 0, "dead complete");
	drv_add(&f, lens, 1, 2, false);
	r = pcinet_vio_abort(&f.vq);
	CHECK(r == PCINET_VIO_INTR, "abort %d", r);
	drv_reap(&f);
	CHECK(f.done == 4 && f.errors_seen == 3 * 2 && !f.vq.inflight &&
	      !f.rl.out.nr && !f.rl.in.nr, "done %llu errors %llu",
	      (unsigned long long)f.done, (unsigned long long)f.errors_seen);
	/* a later notify on the dead device aborts at once */
	drv_add(&f, lens, 1, 2, false);
	r = pcinet_vio_submit(&f.vq);
	drv_reap(&f);
	CHECK(r == PCINET_VIO_INTR && f.done == 5 && f.vq.davail_idx == 3,
	      "after death: %d", r);
	fx_free(&f);
	return 0;
}

static int t_hostile(void)
{
	static const char *const names[] = { "idx ahead", "bad id", "duplicate",
					     "len too big", "idx back" };
	int h;

	for (h = H_IDX; h <= H_IDX_BACK; h++)
		if (t_hostile_one(h)) {
			printf("# hostile case: %s\n", names[h]);
			return -1;
		}
	return 0;
}

/* A device writing random used entries: errors, never a crash. */
static int t_fuzz(void)
{
	u32 lens[MAX_SEG], nout, nin, it, errs = 0;
	struct pcinet_vring_used *u;
	struct fx f;
	int r, k;

	for (it = 0; it < 3000; it++) {
		if (fx_init(&f, 8, 32 * 1024, 32 * 1024, true, rnd_below(2)))
			return -1;
		u = dused(&f);
		for (k = 0; k < 40; k++) {
			rnd_req(lens, &nout, &nin, 4000);
			drv_add(&f, lens, nout, nin, rnd_below(2));
			pcinet_vio_submit(&f.vq);
			dev_take(&f);
			if (rnd_below(3)) {
				if (dev_complete(&f, rnd_below(3)))
					fail_msg[0] = 0;
			} else {
				u32 j = rnd_below(8);

				u->ring[j].id = rnd_below(3) ? rnd_below(10) : rnd();
				u->ring[j].len = rnd_below(2) ? rnd_below(1100) : rnd();
				u->idx += (u16)rnd_below(3);
			}
			r = pcinet_vio_complete(&f.vq);
			drv_reap(&f);
			if (r < 0) {
				errs++;
				break;
			}
		}
		pcinet_vio_abort(&f.vq);
		drv_reap(&f);
		if (f.nfree != f.num || f.vq.inflight || f.rl.out.nr || f.rl.in.nr) {
			failf("iteration %u: %u descriptors free of %u, %u in flight",
			      it, f.nfree, f.num, f.vq.inflight);
			fx_free(&f);
			return -1;
		}
		fx_free(&f);
	}
	printf("# fuzz: 3000 devices, %u caught lying\n", errs);
	return 0;
}

/*
 * Abort of a virtio-fs request: a FUSE error reply in the first IN
 * buffer (len 16, error -EIO, unique copied from bytes 8..15 of the first
 * OUT buffer, the request header), every other IN byte 0xff, used length
 * 16; a request still waiting in the private avail ring is aborted the
 * same way.  A first IN buffer shorter than the header: all 0xff, used
 * length the IN bytes.
 */
static int t_abort_fs(void)
{
	u32 lens[4] = { 40, 16, 100, 1 }, short_lens[2] = { 40, 12 };
	int r, head[3];
	struct fx f;
	u32 k, j, h[4];

	if (fx_init(&f, 16, 64 * 1024, 64 * 1024, true, false))
		return -1;
	f.rl.device_id = PCINET_VIRTIO_ID_FS;
	head[0] = drv_add(&f, lens, 1, 2, false);
	pcinet_vio_submit(&f.vq);
	head[1] = drv_add(&f, lens, 1, 3, true);	/* not submitted yet */
	head[2] = drv_add(&f, short_lens, 1, 1, false);
	CHECK(head[0] >= 0 && head[1] >= 0 && head[2] >= 0, "drv_add");
	r = pcinet_vio_abort(&f.vq);
	CHECK(r == PCINET_VIO_INTR && f.vq.stats.aborted == 3, "abort %d", r);
	for (k = 0; k < 2; k++) {
		struct dreq *d = &f.dr[head[k]];

		memcpy(h, d->buf[1], 16);
		CHECK(h[0] == 16 && (int)h[1] == -5 &&
		      !memcmp(&h[2], d->buf[0] + 8, 8),
		      "request %u: FUSE reply %u %d", k, h[0], (int)h[1]);
		for (j = 0; j < d->len[2]; j++)
			CHECK(d->buf[2][j] == 0xff, "request %u buffer 2", k);
	}
	for (j = 0; j < 12; j++)
		CHECK(f.dr[head[2]].buf[1][j] == 0xff, "short reply byte %u", j);
	CHECK(f.pused->idx == 3 && f.pused->ring[0].len == 16 &&
	      f.pused->ring[1].len == 16 && f.pused->ring[2].len == 12,
	      "used lens %u %u %u", f.pused->ring[0].len,
	      f.pused->ring[1].len, f.pused->ring[2].len);
	drv_reap(&f);
	fx_free(&f);
	return 0;
}

/*
 * docs/design.md, "Pool sizing": with size_max a multiple of 4 KiB, a
 * virtio-blk request of seg_max = (pool - 4 KiB) / size_max segments
 * fits an empty pool whatever the segment lengths; one more segment of
 * size_max does not (aborted as too big, never blocking the queue).
 */
static int t_blk_worst(void)
{
	static const u32 shapes[][2] = {
		{ 65536, 65536 },	/* all size_max */
		{ 4097, 4097 },		/* just over a page: 8 KiB each */
		{ 100, 65535 },		/* small, then unaligned large */
		{ 65535, 1 },
		{ 4095, 4096 },
	};
	const u64 pool = 4 << 20, size_max = 65536;
	const u32 seg_max = (u32)((pool - 4096) / size_max);
	u32 lens[MAX_SEG], i, k;
	struct fx f;

	for (i = 0; i <= ARRAY_SIZE(shapes); i++) {
		bool over = i == ARRAY_SIZE(shapes);
		u32 nseg = over ? seg_max + 1 : seg_max;

		for (int dir = 0; dir < 2; dir++) {
			if (fx_init(&f, 128, pool, pool, true, false))
				return -1;
			lens[0] = 16;
			for (k = 0; k < nseg; k++)
				lens[1 + k] = over ? 65536 : shapes[i][k % 2];
			lens[1 + nseg] = 1;
			/* write: header + data OUT, status IN; read: data IN */
			drv_add(&f, lens, dir ? 1 : 1 + nseg, dir ? 1 + nseg : 1,
				true);
			pcinet_vio_submit(&f.vq);
			if (over ? f.vq.stats.too_big != 1 :
			    (f.vq.davail_idx != 1 || f.vq.stats.too_big)) {
				failf("shape %u %s: relayed %u, too big %llu, OUT %llu IN %llu",
				      i, dir ? "read" : "write", f.vq.davail_idx,
				      (unsigned long long)f.vq.stats.too_big,
				      (unsigned long long)f.req[0].out_size,
				      (unsigned long long)f.req[0].in_size);
				fx_free(&f);
				return -1;
			}
			fx_free(&f);
		}
	}
	return 0;
}

/* EVENT_IDX: kick only when avail_event lies in the batch. */
static int t_event_idx(void)
{
	u32 lens[2] = { 16, 1 };
	__le16 *avail_event;
	struct fx f;
	int r;

	if (fx_init(&f, 8, 64 * 1024, 64 * 1024, true, true))
		return -1;
	avail_event = (__le16 *)&dused(&f)->ring[8];
	*avail_event = 0;
	drv_add(&f, lens, 1, 1, false);
	r = pcinet_vio_submit(&f.vq);
	CHECK(r == PCINET_VIO_KICK, "first: %d", r);
	drv_add(&f, lens, 1, 1, false);
	r = pcinet_vio_submit(&f.vq);
	CHECK(r == 0, "device did not re-arm: %d", r);
	*avail_event = 2;
	drv_add(&f, lens, 1, 1, false);
	r = pcinet_vio_submit(&f.vq);
	CHECK(r == PCINET_VIO_KICK, "re-armed at 2: %d", r);
	CHECK(pcinet_vio_submit(&f.vq) == 0, "nothing new");
	/* complete writes used_event = last_used */
	dev_take(&f);
	CHECK(!dev_complete(&f, 2), "%s", fail_msg);
	r = pcinet_vio_complete(&f.vq);
	CHECK(r == PCINET_VIO_INTR && davail(&f)->ring[8] == 2, "used_event %u",
	      davail(&f)->ring[8]);
	fx_free(&f);
	return 0;
}

/*
 * A device that scribbles its used index while complete() looks again
 * (EVENT_IDX, R4): the two requests in flight were reaped, then the index
 * reads ahead.  complete() fails, and what it had completed is still
 * reported by the abort: the driver is told of every completion (a lost
 * one waits for ever: virtio_blk has no timeout).
 */
static struct fx *owed_fx;

static void owed_scribble(void)
{
	pcinet_user_mb_hook = NULL;
	dused(owed_fx)->idx = owed_fx->dused_idx + 5;
}

static int t_owed(void)
{
	u32 lens[2] = { 16, 1 };
	struct fx f;
	int r;

	if (fx_init(&f, 8, 64 * 1024, 64 * 1024, true, true))
		return -1;
	drv_add(&f, lens, 1, 1, false);
	drv_add(&f, lens, 1, 1, false);
	pcinet_vio_submit(&f.vq);
	dev_take(&f);
	CHECK(!dev_complete(&f, 2), "%s", fail_msg);
	owed_fx = &f;
	pcinet_user_mb_hook = owed_scribble;
	r = pcinet_vio_complete(&f.vq);
	pcinet_user_mb_hook = NULL;
	CHECK(r == EPROTO_RET && f.vq.stats.completed == 2 &&
	      f.vq.stats.err_idx == 1, "complete %d, %llu completed", r,
	      (unsigned long long)f.vq.stats.completed);
	r = pcinet_vio_abort(&f.vq);
	CHECK(r == PCINET_VIO_INTR, "abort %d: the two completions untold", r);
	CHECK(pcinet_vio_abort(&f.vq) == 0, "told twice");
	drv_reap(&f);
	CHECK(f.done == 2 && !f.errors_seen, "done %llu errors %llu",
	      (unsigned long long)f.done, (unsigned long long)f.errors_seen);
	fx_free(&f);
	return 0;
}

/*
 * The byte budget of a call (PCINET_VIO_PASS_BYTES, 256 KiB): 16 writes
 * of 64 KiB are relayed four per submit() with PCINET_VIO_MORE until the
 * last call; 16 reads of 64 KiB come back four per complete() the same
 * way; every byte intact.
 */
static int t_budget(void)
{
	u32 wr[2] = { 64 * 1024, 1 }, rd[2] = { 16, 64 * 1024 };
	int r, calls, i;
	struct fx f;

	if (fx_init(&f, 64, 2 << 20, 2 << 20, true, false))
		return -1;
	for (i = 0; i < 16; i++)
		CHECK(drv_add(&f, wr, 1, 1, false) >= 0, "add");
	for (calls = 1; (r = pcinet_vio_submit(&f.vq)) & PCINET_VIO_MORE; calls++)
		CHECK(f.vq.davail_idx == 4 * calls && calls < 16,
		      "call %d relayed %u", calls, f.vq.davail_idx);
	CHECK(r >= 0 && calls == 4 && f.vq.davail_idx == 16, "%d calls, %u relayed",
	      calls, f.vq.davail_idx);
	dev_take(&f);
	CHECK(!dev_complete(&f, 16), "%s", fail_msg);
	CHECK(pcinet_vio_complete(&f.vq) == PCINET_VIO_INTR, "small INs in one call");
	drv_reap(&f);
	for (i = 0; i < 16; i++)
		CHECK(drv_add(&f, rd, 1, 1, false) >= 0, "add");
	while (pcinet_vio_submit(&f.vq) & PCINET_VIO_MORE)
		;
	dev_take(&f);
	CHECK(!dev_complete(&f, 16), "%s", fail_msg);
	for (calls = 1; (r = pcinet_vio_complete(&f.vq)) & PCINET_VIO_MORE; calls++)
		CHECK(r & PCINET_VIO_INTR && f.vq.stats.completed == 16 + 4 * (u64)calls &&
		      calls < 16, "call %d completed %llu", calls,
		      (unsigned long long)f.vq.stats.completed);
	CHECK(r == PCINET_VIO_INTR && calls == 4 && !f.vq.inflight,
	      "%d calls, %u in flight", calls, f.vq.inflight);
	drv_reap(&f);
	CHECK(f.done == 32 && !f.bad_data && !f.errors_seen, "done %llu bad %llu",
	      (unsigned long long)f.done, (unsigned long long)f.bad_data);
	fx_free(&f);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The grace of a soft signal (pcinet_grace.c)                         */
/* ------------------------------------------------------------------ */

/*
 * One row: looks at a reading, each @dt after the one before it (the
 * first at the row's start), "B" bad / "g" good, and the answer expected
 * after each look ("1" act, "0" stay).  grace 200 as in milliseconds
 * (PCINET_PEER_GRACE_MS), looks every tick (100) or faster.
 */
static const struct {
	const char *why;
	u32 dt;
	const char *looks;
	const char *want;
} grace_rows[] = {
	{ "one bad look (a scribbled word, repaired by the next tick): stay",
	  100, "gBggg", "00000" },
	{ "bad for a tick (two looks): stay", 100, "gBBg", "0000" },
	{ "bad on every look for the whole grace: gone, and it stays so",
	  100, "gBBBBB", "000111" },
	{ "bad every other look, forever: never gone", 100,
	  "BgBgBgBgBgBgBgBgBgBg", "00000000000000000000" },
	{ "fast looks (10 per tick), bad runs of 19 between good looks: stay",
	  10, "BBBBBBBBBBBBBBBBBBBgBBBBBBBBBBBBBBBBBBBg",
	  "0000000000000000000000000000000000000000" },
	{ "fast looks, bad for 20 intervals: gone at the 21st look", 10,
	  "BBBBBBBBBBBBBBBBBBBBBg", "0000000000000000000010" },
	{ "a good look restarts the count: 2 + 2 bad ticks, then 3 bad", 100,
	  "BBgBBgBBB", "000000001" },
};

/* Run row @r from clock @t0 at grace @grace. */
static int grace_row(size_t r, u32 t0, u32 grace)
{
	struct pcinet_grace g = { 0 };
	const char *l = grace_rows[r].looks;
	u32 now = t0;
	size_t i;
	bool got;

	for (i = 0; l[i]; i++, now += grace_rows[r].dt) {
		got = pcinet_grace_look(&g, l[i] == 'B', now, grace);
		CHECK(got == (grace_rows[r].want[i] == '1'),
		      "%s (from %#x): look %zu answered %d", grace_rows[r].why,
		      t0, i, got);
	}
	return 0;
}

static int t_grace(void)
{
	/* from 0, just before the clock wraps, and across it mid-row */
	static const u32 starts[] = { 0, 0xffffffffu - 150, 0xffffff00u,
				      0x7fffffffu };
	size_t r, s;

	for (r = 0; r < ARRAY_SIZE(grace_rows); r++)
		for (s = 0; s < ARRAY_SIZE(starts); s++)
			if (grace_row(r, starts[s], 200))
				return -1;
	return 0;
}

/* Grace 0 acts on the first bad look; a long bad run never wraps back. */
static int t_grace_edges(void)
{
	struct pcinet_grace g = { 0 };
	u32 now = 0xfffffff0u;
	u64 step;

	CHECK(!pcinet_grace_look(&g, false, now, 0), "good look, grace 0");
	CHECK(pcinet_grace_look(&g, true, now, 0), "bad look, grace 0");
	g = (struct pcinet_grace){ 0 };
	CHECK(!pcinet_grace_look(&g, true, now, 200), "first bad look");
	/* bad for ~3 wraps of the clock, looked at every 2^30 + 7 */
	for (step = 0; step < 12; step++) {
		now += (1u << 30) + 7;
		CHECK(pcinet_grace_look(&g, true, now, 200),
		      "bad run answered stay after %llu looks",
		      (unsigned long long)step + 1);
	}
	CHECK(!pcinet_grace_look(&g, false, now, 200), "good look ends it");
	CHECK(!pcinet_grace_look(&g, true, now + 1, 200), "a new run starts");
	CHECK(!pcinet_grace_look(&g, true, now + 200, 200), "199 after its start");
	CHECK(pcinet_grace_look(&g, true, now + 201, 200), "200 after its start");
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "vio pool: exhaustion, fragmentation, free, alignment", t_pool },
	{ "vio pool: random alloc/free, no overlap", t_pool_random },
	{ "vio description: each check", t_desc },
	{ "vio relay: direct chains, num 8, idx wraps past 65535", t_relay_direct },
	{ "vio relay: indirect chains, EVENT_IDX, num 16, wraps", t_relay_indirect },
	{ "vio relay: 64 KiB buffers, num 128, pool waits", t_relay_big },
	{ "vio relay: indirect chain, device without INDIRECT_DESC", t_relay_no_indirect },
	{ "vio relay: FIFO wait on full pool, too big aborted", t_pool_wait },
	{ "vio relay: OUT extent gaps zeroed, IN prefilled 0xff", t_no_leak },
	{ "vio relay: hostile used ring (idx, id, dup, len), abort", t_hostile },
	{ "vio relay: random used garbage, abort returns everything", t_fuzz },
	{ "vio relay: EVENT_IDX kicks and used_event", t_event_idx },
	{ "vio relay: completions before a failed complete() told by the abort", t_owed },
	{ "vio relay: 256 KiB copied per call each way, then MORE", t_budget },
	{ "vio relay: worst-case virtio-blk request fits the pool sizing rule", t_blk_worst },
	{ "vio relay: abort of virtio-fs requests writes a FUSE error reply", t_abort_fs },
	{ "grace: one bad look stays, a whole grace goes, flapping never adds up, wraps", t_grace },
	{ "grace: 0 acts at once, a long bad run stays gone across wraps", t_grace_edges },
};

int main(void)
{
	int passed = 0, failed = 0;
	size_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		fail_msg[0] = 0;
		if (cases[i].fn()) {
			printf("FAIL - %s: %s\n", cases[i].name, fail_msg);
			failed++;
		} else {
			printf("ok - %s\n", cases[i].name);
			passed++;
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
