// SPDX-License-Identifier: GPL-2.0-only
/*
 * vu_blk_test - drive a stock vhost-user-blk back end (qemu-storage-daemon)
 * from a split virtqueue laid out in a memfd, the way pcinet-vhost will
 * drive it from the shared window: the memfd is the only memory region,
 * gpa = offset, and kicks and calls are eventfds handed to the back end.
 *
 * Usage: vu_blk_test -s SOCKET [-q QSIZE] [-m MEM_MIB] [-o OFF_MIB [-X]]
 *                    [-e SECTORS] [-d DUMPFILE] [-b] [-t SECONDS] [-v]
 *
 *   -o  give the back end MEM_MIB starting OFF_MIB into the memfd (gpa =
 *       offset still), as pcinet-vhost may give it a part of the window
 *   -X  with -o: finally post a buffer outside that part, which must be
 *       refused (the back end may then stop serving the device)
 *   -e  expected capacity in 512-byte sectors (checked against GET_CONFIG)
 *   -d  write the bytes put at sectors 8..23 to DUMPFILE and those of
 *       the in-flight tests to DUMPFILE.wrap, for cmp(1)
 *   -b  also measure: 4 KiB reads at depth 1 and 32, 64 KiB reads at 16
 *
 * Prints "ok - ..." or "FAIL - ..." per case, "# ..." for information,
 * and "N passed, N failed"; exits 0 only if nothing failed.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>

#include "testutil.h"
#include "vq.h"
#include "vu_frontend.h"

#define SECTOR		512u
/*
 * The layout, from the start of the region given to the back end, which
 * is REGION_OFF bytes into the memfd (-o): gpa = memfd offset throughout.
 */
static uint64_t region_off;
#define RING_GPA	(region_off + 0x0ull)
#define HDR_GPA		(region_off + 0x10000ull) /* per slot: outhdr, status */
#define HDR_SLOT	32u
#define DATA_GPA	(region_off + 0x20000ull)
#define TIMEOUT_MS	5000
#define MAX_QSIZE	1024u

#define DUMP_SECTOR	8u		/* sectors 8..23 are checked by cmp */
#define DUMP_SECTORS	16u
#define WRAP_SECTOR	4096u		/* the in-flight tests write here */
#define BENCH_WR_SECTOR	16384u		/* and the write bench here */

static const struct feature_name blk_names[] = {
	{ VIRTIO_BLK_F_SIZE_MAX, "SIZE_MAX" },
	{ VIRTIO_BLK_F_SEG_MAX, "SEG_MAX" },
	{ VIRTIO_BLK_F_GEOMETRY, "GEOMETRY" },
	{ VIRTIO_BLK_F_RO, "RO" },
	{ VIRTIO_BLK_F_BLK_SIZE, "BLK_SIZE" },
	{ VIRTIO_BLK_F_FLUSH, "FLUSH" },
	{ VIRTIO_BLK_F_TOPOLOGY, "TOPOLOGY" },
	{ VIRTIO_BLK_F_CONFIG_WCE, "CONFIG_WCE" },
	{ VIRTIO_BLK_F_MQ, "MQ" },
	{ VIRTIO_BLK_F_DISCARD, "DISCARD" },
	{ VIRTIO_BLK_F_WRITE_ZEROES, "WRITE_ZEROES" },
	{ VIRTIO_BLK_F_SECURE_ERASE, "SECURE_ERASE" },
	{ 0, NULL },
};

struct slot {
	int busy;
	uint32_t type;
	uint64_t sector;
	uint32_t len;		/* data bytes */
	uint64_t data_gpa;
};

struct blk {
	struct vu_dev dev;
	struct vu_mem win;	/* the whole memfd ("window") */
	struct vu_mem mem;	/* the region the back end is given */
	uint8_t *win_base;
	struct vq q;
	uint64_t capacity;
	unsigned int qsize;
	struct slot *slot;
	unsigned int *free_slot;
	unsigned int nfree;
};

static void *gpa_ptr(struct blk *b, uint64_t gpa)
{
	return b->win_base + gpa;
}

static uint8_t *status_ptr(struct blk *b, unsigned int slot)
{
	return gpa_ptr(b, HDR_GPA + slot * HDR_SLOT + 16);
}

static int slot_get(struct blk *b)
{
	if (!b->nfree)
		return -1;
	return (int)b->free_slot[--b->nfree];
}

static void slot_put(struct blk *b, unsigned int s)
{
	b->slot[s].busy = 0;
	b->free_slot[b->nfree++] = s;
}

/*
 * Post request TYPE at SECTOR with the data in SEGS (NSEG buffers, all
 * device-readable for OUT, all device-writable otherwise) on slot S.
 */
static int blk_post(struct blk *b, unsigned int s, uint32_t type,
		    uint64_t sector, const struct vq_buf *segs,
		    unsigned int nseg)
{
	struct vq_buf bufs[2 + 16];
	struct virtio_blk_outhdr *h = gpa_ptr(b, HDR_GPA + s * HDR_SLOT);
	int dev_writes = type != VIRTIO_BLK_T_OUT;
	uint32_t len = 0;
	unsigned int i;

	if (nseg > 16)
		return -EINVAL;
	h->type = htole32(type);
	h->ioprio = 0;
	h->sector = htole64(sector);
	*status_ptr(b, s) = 0xff;	/* the device must overwrite it */

	bufs[0] = (struct vq_buf){ HDR_GPA + s * HDR_SLOT, sizeof(*h), 0 };
	for (i = 0; i < nseg; i++) {
		bufs[1 + i] = segs[i];
		bufs[1 + i].write = dev_writes;
		len += segs[i].len;
	}
	bufs[1 + nseg] = (struct vq_buf){ HDR_GPA + s * HDR_SLOT + 16, 1, 1 };

	b->slot[s] = (struct slot){
		.busy = 1,
		.type = type,
		.sector = sector,
		.len = len,
		.data_gpa = nseg ? segs[0].gpa : 0,
	};
	return vq_add(&b->q, bufs, nseg + 2, s + 1);
}

/* Wait for the completion of slot S; *status and *used_len from it. */
static int blk_wait_one(struct blk *b, unsigned int s, uint8_t *status,
			uint32_t *used_len)
{
	for (;;) {
		uint64_t tok;
		uint32_t len;
		int r = vq_get_used(&b->q, &tok, &len);

		if (r < 0)
			return r;
		if (r == 1) {
			if (tok != s + 1)
				return -EPROTO;	/* only one in flight */
			*status = *status_ptr(b, s);
			*used_len = len;
			return 0;
		}
		r = vq_wait(&b->q, TIMEOUT_MS);
		if (r)
			return r;
	}
}

/* One request, synchronously, on slot 0. */
static int blk_sync(struct blk *b, uint32_t type, uint64_t sector,
		    const struct vq_buf *segs, unsigned int nseg,
		    uint8_t *status, uint32_t *used_len)
{
	int err = blk_post(b, 0, type, sector, segs, nseg);

	if (!err)
		err = vq_kick(&b->q);
	if (!err)
		err = blk_wait_one(b, 0, status, used_len);
	b->slot[0].busy = 0;
	return err;
}

struct run {
	uint32_t type;
	uint32_t len;		/* bytes per request */
	unsigned int depth;
	unsigned long total;	/* requests, or until SECONDS */
	double seconds;
	int verify;		/* IN: check data; OUT: fill pattern */
	uint64_t first;		/* first sector */
	uint64_t span;		/* requests cycle over SPAN requests' room */
	int random;		/* pick request slots pseudo-randomly */
	/* results */
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

/*
 * Keep DEPTH requests in flight until TOTAL are done (or SECONDS pass),
 * checking every completion.  Kicks once per batch of posts.
 */
static int blk_run(struct blk *b, struct run *r)
{
	uint64_t slot_bytes = (r->len + 4095ull) & ~4095ull;
	unsigned long posted = 0;
	double t0 = tu_now(), deadline = t0 + r->seconds;
	int stop = 0;

	r->done = 0;
	r->err[0] = '\0';
	if (r->depth > b->qsize ||
	    DATA_GPA + r->depth * slot_bytes > b->mem.gpa + b->mem.size) {
		snprintf(r->err, sizeof(r->err), "depth %u does not fit",
			 r->depth);
		return -EINVAL;
	}
	while (r->done < posted || !stop) {
		unsigned int batch = 0;
		uint64_t tok;
		uint32_t len;
		int n;

		while (!stop && posted - r->done < r->depth &&
		       b->q.num_free >= 3) {
			struct vq_buf seg;
			uint64_t sector = run_sector(r, posted);
			int s = slot_get(b);

			if (s < 0)
				break;
			seg = (struct vq_buf){ DATA_GPA + s * slot_bytes,
					       r->len, 0 };
			if (r->type == VIRTIO_BLK_T_OUT && r->verify)
				tu_fill(gpa_ptr(b, seg.gpa), sector, r->len);
			else if (r->verify)
				memset(gpa_ptr(b, seg.gpa), 0, r->len);
			if (blk_post(b, s, r->type, sector, &seg, 1)) {
				snprintf(r->err, sizeof(r->err), "vq_add failed");
				return -EIO;
			}
			posted++;
			batch++;
			if ((r->total && posted >= r->total) ||
			    (r->seconds > 0 && (posted & 15) == 0 &&
			     tu_now() >= deadline))
				stop = 1;
		}
		if (r->seconds > 0 && tu_now() >= deadline)
			stop = 1;
		if (batch && vq_kick(&b->q)) {
			snprintf(r->err, sizeof(r->err), "kick failed");
			return -EIO;
		}

		n = 0;
		while ((n = vq_get_used(&b->q, &tok, &len)) == 1) {
			unsigned int s = (unsigned int)(tok - 1);
			struct slot *sl = &b->slot[s];
			uint8_t st = *status_ptr(b, s);
			uint32_t want = sl->type == VIRTIO_BLK_T_OUT ?
					1 : sl->len + 1;

			if (st != VIRTIO_BLK_S_OK || len != want) {
				snprintf(r->err, sizeof(r->err),
					 "sector %llu: status %u used len %u (want %u)",
					 (unsigned long long)sl->sector, st,
					 len, want);
				slot_put(b, s);
				return -EIO;
			}
			if (sl->type == VIRTIO_BLK_T_IN && r->verify) {
				long off = tu_check(gpa_ptr(b, sl->data_gpa),
						 sl->sector, sl->len);

				if (off >= 0) {
					snprintf(r->err, sizeof(r->err),
						 "sector %llu: data differs at byte %ld",
						 (unsigned long long)sl->sector,
						 off);
					slot_put(b, s);
					return -EIO;
				}
			}
			slot_put(b, s);
			r->done++;
		}
		if (n < 0) {
			snprintf(r->err, sizeof(r->err), "bad used entry");
			return n;
		}
		if (r->done == posted && stop)
			break;
		if (posted - r->done < r->depth && !stop)
			continue;
		if (vq_wait(&b->q, TIMEOUT_MS)) {
			snprintf(r->err, sizeof(r->err),
				 "no completion in %d ms (%lu of %lu done)",
				 TIMEOUT_MS, r->done, posted);
			return -ETIMEDOUT;
		}
	}
	r->elapsed = tu_now() - t0;
	return 0;
}

/* Reap whatever is still in flight (after a failed case). */
static int blk_drain(struct blk *b)
{
	while (vq_inflight_chains(&b->q)) {
		uint64_t tok;
		uint32_t len;
		int n = vq_get_used(&b->q, &tok, &len);

		if (n < 0)
			return n;
		if (n == 1) {
			slot_put(b, (unsigned int)(tok - 1));
			continue;
		}
		if (vq_wait(&b->q, TIMEOUT_MS))
			return -ETIMEDOUT;
	}
	return 0;
}

/*
 * A descriptor outside the region the back end was given (but inside the
 * memfd it mapped) must not be written through: the gpa does not
 * translate.  What the back end then does with the ring is its business.
 */
static void escape_test(struct blk *b)
{
	uint64_t gpa = region_off - 4096;
	struct vq_buf seg = { gpa, SECTOR, 1 };
	uint8_t *p = gpa_ptr(b, gpa), st;
	uint32_t ulen = 0;
	unsigned int i, same = 1;
	int err;

	memset(p, 0xab, SECTOR);
	err = blk_post(b, 0, VIRTIO_BLK_T_IN, DUMP_SECTOR, &seg, 1);
	if (!err)
		err = vq_kick(&b->q);
	if (!err)
		err = blk_wait_one(b, 0, &st, &ulen);
	usleep(200000);
	for (i = 0; i < SECTOR; i++)
		same &= p[i] == 0xab;
	if (err)
		printf("# IN into gpa %#llx (outside the region): no completion (%s)\n",
		       (unsigned long long)gpa, strerror(-err));
	else
		printf("# IN into gpa %#llx (outside the region): completed, status %u, used len %u\n",
		       (unsigned long long)gpa, st, ulen);
	tu_result(same && (err || st != VIRTIO_BLK_S_OK),
		  "IN into gpa %#llx, outside the region: refused, memory there untouched",
		  (unsigned long long)gpa);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s -s SOCKET [-q QSIZE] [-m MEM_MIB] [-o OFF_MIB [-X]] [-e SECTORS] [-d DUMPFILE] [-b] [-t SECONDS] [-v]\n",
		argv0);
	exit(2);
}

/* Write what sectors FIRST..FIRST+COUNT-1 should now hold to PATH. */
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

static void bench(struct blk *b, double seconds)
{
	struct run r;

	/* 4 KiB reads, one at a time: the doorbell round trip. */
	r = (struct run){ .type = VIRTIO_BLK_T_IN, .len = 4096, .depth = 1,
			  .seconds = seconds, .first = 0, .span = 4096,
			  .random = 1 };
	if (blk_run(b, &r))
		tu_result(0, "bench 4k read qd1: %s", r.err);
	else
		tu_result(1, "bench 4k read qd1: %lu in %.2f s = %.0f round trips/s, %.1f us each",
			  r.done, r.elapsed, r.done / r.elapsed,
			  r.elapsed / r.done * 1e6);

	r = (struct run){ .type = VIRTIO_BLK_T_IN, .len = 4096, .depth = 32,
			  .seconds = seconds, .first = 0, .span = 4096,
			  .random = 1 };
	if (blk_run(b, &r))
		tu_result(0, "bench 4k read qd32: %s", r.err);
	else
		tu_result(1, "bench 4k read qd32: %.0f IOPS, %.1f MB/s",
			  r.done / r.elapsed,
			  r.done * 4096.0 / r.elapsed / 1e6);

	r = (struct run){ .type = VIRTIO_BLK_T_IN, .len = 65536, .depth = 16,
			  .seconds = seconds, .first = 0, .span = 256 };
	if (blk_run(b, &r))
		tu_result(0, "bench 64k read qd16: %s", r.err);
	else
		tu_result(1, "bench 64k read qd16: %.0f IOPS, %.1f MB/s",
			  r.done / r.elapsed,
			  r.done * 65536.0 / r.elapsed / 1e6);

	/* Away from the sectors the checks and test-blk.sh look at. */
	if (b->capacity < BENCH_WR_SECTOR + 256 * 128) {
		printf("# disk too small for the write bench\n");
		return;
	}
	r = (struct run){ .type = VIRTIO_BLK_T_OUT, .len = 65536, .depth = 16,
			  .seconds = seconds, .first = BENCH_WR_SECTOR,
			  .span = 256 };
	if (blk_run(b, &r))
		tu_result(0, "bench 64k write qd16: %s", r.err);
	else
		tu_result(1, "bench 64k write qd16: %.0f IOPS, %.1f MB/s",
			  r.done / r.elapsed,
			  r.done * 65536.0 / r.elapsed / 1e6);
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *dump = NULL;
	unsigned long long expect = 0;
	unsigned int mem_mib = 4, base, i;
	double bench_s = 2.0;
	int do_bench = 0, verbose = 0, escape = 0, c, err;
	uint64_t want, want_pf;
	struct virtio_blk_config cfg;
	struct vu_vring_cfg vc;
	struct blk b;
	struct run r;

	memset(&b, 0, sizeof(b));
	b.q.kick_fd = -1;
	b.q.call_fd = -1;
	b.mem.fd = -1;
	b.win.fd = -1;
	b.dev.sock = -1;
	b.qsize = 128;
	while ((c = getopt(argc, argv, "s:q:m:o:Xe:d:bt:v")) != -1) {
		switch (c) {
		case 'o':
			region_off = strtoull(optarg, NULL, 0) << 20;
			break;
		case 'X':
			escape = 1;
			break;
		case 's':
			sock = optarg;
			break;
		case 'q':
			b.qsize = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'm':
			mem_mib = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'e':
			expect = strtoull(optarg, NULL, 0);
			break;
		case 'd':
			dump = optarg;
			break;
		case 'b':
			do_bench = 1;
			break;
		case 't':
			bench_s = strtod(optarg, NULL);
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage(argv[0]);
		}
	}
	if (!sock || b.qsize < 4 || b.qsize > MAX_QSIZE ||
	    (b.qsize & (b.qsize - 1)) || mem_mib < 2 || mem_mib > 1024 ||
	    region_off > (1ull << 30) || (escape && !region_off))
		usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);

	err = tu_memfd(&b.win, region_off + ((uint64_t)mem_mib << 20));
	if (err) {
		fprintf(stderr, "memfd: %s\n", strerror(-err));
		return 1;
	}
	b.win_base = b.win.base;
	b.mem = b.win;
	b.mem.base = b.win_base + region_off;
	b.mem.size = (uint64_t)mem_mib << 20;
	b.mem.gpa = region_off;
	b.mem.offset = region_off;
	b.slot = calloc(b.qsize, sizeof(*b.slot));
	b.free_slot = calloc(b.qsize, sizeof(*b.free_slot));
	if (!b.slot || !b.free_slot)
		return 1;
	for (i = 0; i < b.qsize; i++)
		b.free_slot[i] = b.qsize - 1 - i;
	b.nfree = b.qsize;
	if (HDR_GPA + b.qsize * HDR_SLOT > DATA_GPA ||
	    vq_ring_size(b.qsize) > HDR_GPA)
		usage(argv[0]);

	err = vu_connect(&b.dev, sock, TIMEOUT_MS);
	tu_result(!err, "connect %s%s%s", sock, err ? ": " : "",
		  err ? strerror(-err) : "");
	if (err)
		goto out;
	b.dev.verbose = verbose;

	/*
	 * Virtio 1.0 with protocol features; FLUSH, BLK_SIZE, SEG_MAX if
	 * offered; ACCESS_PLATFORM only if offered (it would make the ring
	 * addresses IOVAs).  Protocol: CONFIG and REPLY_ACK; no MQ.
	 */
	want = (1ull << VIRTIO_F_VERSION_1) | (1ull << VU_F_PROTOCOL_FEATURES) |
	       (1ull << VIRTIO_F_ACCESS_PLATFORM) |
	       (1ull << VIRTIO_BLK_F_FLUSH) | (1ull << VIRTIO_BLK_F_BLK_SIZE) |
	       (1ull << VIRTIO_BLK_F_SEG_MAX);
	want_pf = (1ull << VU_PF_CONFIG) | (1ull << VU_PF_REPLY_ACK);
	err = vu_negotiate(&b.dev, want, want_pf, &b.mem);
	tu_print_features("qemu-storage-daemon vhost-user-blk", &b.dev,
			  blk_names);
	tu_result(!err, "negotiate (features, protocol features, owner, mem table: %u MiB of a memfd at gpa = offset %#llx)%s%s",
		  mem_mib, (unsigned long long)region_off, err ? ": " : "",
		  err ? strerror(-err) : "");
	if (err)
		goto out;
	if (b.dev.acked_features & (1ull << VIRTIO_F_ACCESS_PLATFORM))
		printf("# note: ACCESS_PLATFORM negotiated; ring addresses would be IOVAs\n");

	memset(&cfg, 0, sizeof(cfg));
	err = vu_get_config(&b.dev, 0, &cfg,
			    offsetof(struct virtio_blk_config, unused1) +
			    sizeof(cfg.unused1));
	if (!err) {
		b.capacity = le64toh(cfg.capacity);
		printf("# config: capacity %llu sectors, seg_max %u, size_max %u, blk_size %u, num_queues %u, wce %u\n",
		       (unsigned long long)b.capacity, le32toh(cfg.seg_max),
		       le32toh(cfg.size_max), le32toh(cfg.blk_size),
		       le16toh(cfg.num_queues), cfg.wce);
	}
	tu_result(!err && (!expect || b.capacity == expect),
		  "GET_CONFIG capacity %llu sectors%s%s",
		  (unsigned long long)b.capacity,
		  err ? ": " : (expect && b.capacity != expect ?
				" (unexpected)" : ""),
		  err ? strerror(-err) : "");
	if (err)
		goto out;

	err = vq_init(&b.q, b.win_base, RING_GPA, b.qsize);
	if (err)
		goto out;
	vc = (struct vu_vring_cfg){
		.num = b.qsize,
		.desc_gpa = b.q.desc_gpa,
		.avail_gpa = b.q.avail_gpa,
		.used_gpa = b.q.used_gpa,
		.base = 0,
		.kick_fd = b.q.kick_fd,
		.call_fd = b.q.call_fd,
	};
	err = vu_start_vring(&b.dev, 0, &vc);
	tu_result(!err, "vring 0: %u entries, desc %#llx avail %#llx used %#llx, kick/call eventfds%s%s",
		  b.qsize, (unsigned long long)vc.desc_gpa,
		  (unsigned long long)vc.avail_gpa,
		  (unsigned long long)vc.used_gpa, err ? ": " : "",
		  err ? strerror(-err) : "");
	if (err)
		goto out;

	/* GET_ID: 20 bytes into a device-writable buffer. */
	{
		struct vq_buf seg = { DATA_GPA, VIRTIO_BLK_ID_BYTES, 1 };
		char id[VIRTIO_BLK_ID_BYTES + 1];
		uint32_t ulen = 0;
		uint8_t st = 0xff;

		memset(gpa_ptr(&b, DATA_GPA), 0, VIRTIO_BLK_ID_BYTES);
		err = blk_sync(&b, VIRTIO_BLK_T_GET_ID, 0, &seg, 1, &st, &ulen);
		memcpy(id, gpa_ptr(&b, DATA_GPA), VIRTIO_BLK_ID_BYTES);
		id[VIRTIO_BLK_ID_BYTES] = '\0';
		tu_result(!err && st == VIRTIO_BLK_S_OK,
			  "GET_ID: status %u, used len %u, id \"%s\"%s%s", st,
			  ulen, id, err ? ": " : "", err ? strerror(-err) : "");
	}

	/* OUT: 8 sectors at DUMP_SECTOR from one buffer. */
	{
		struct vq_buf seg = { DATA_GPA, 8 * SECTOR, 0 };
		uint32_t ulen = 0;
		uint8_t st = 0xff;

		tu_fill(gpa_ptr(&b, DATA_GPA), DUMP_SECTOR, 8 * SECTOR);
		err = blk_sync(&b, VIRTIO_BLK_T_OUT, DUMP_SECTOR, &seg, 1,
			       &st, &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_OK,
			  "OUT 4096 bytes at sector %u: status %u, used len %u%s%s",
			  DUMP_SECTOR, st, ulen, err ? ": " : "",
			  err ? strerror(-err) : "");
	}

	/* OUT: the next 8 sectors from three scattered buffers. */
	{
		static const uint32_t lens[3] = { 512, 1024, 2560 };
		struct vq_buf segs[3];
		uint64_t sector = DUMP_SECTOR + 8, gpa = DATA_GPA + 0x10000;
		uint32_t ulen = 0;
		uint8_t st = 0xff;

		for (i = 0; i < 3; i++) {
			segs[i] = (struct vq_buf){ gpa, lens[i], 0 };
			tu_fill(gpa_ptr(&b, gpa), sector, lens[i]);
			sector += lens[i] / SECTOR;
			gpa += 0x3000;	/* not contiguous */
		}
		err = blk_sync(&b, VIRTIO_BLK_T_OUT, DUMP_SECTOR + 8, segs, 3,
			       &st, &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_OK,
			  "OUT 4096 bytes at sector %u in 3 segments: status %u%s%s",
			  DUMP_SECTOR + 8, st, err ? ": " : "",
			  err ? strerror(-err) : "");
	}

	/* IN: all 16 back, into two buffers, and compare. */
	{
		struct vq_buf segs[2] = {
			{ DATA_GPA + 0x40000, 6 * SECTOR, 1 },
			{ DATA_GPA + 0x50000, 10 * SECTOR, 1 },
		};
		uint32_t ulen = 0;
		uint8_t st = 0xff;
		long off1 = -1, off2 = -1;

		memset(gpa_ptr(&b, segs[0].gpa), 0xee, segs[0].len);
		memset(gpa_ptr(&b, segs[1].gpa), 0xee, segs[1].len);
		err = blk_sync(&b, VIRTIO_BLK_T_IN, DUMP_SECTOR, segs, 2, &st,
			       &ulen);
		if (!err) {
			off1 = tu_check(gpa_ptr(&b, segs[0].gpa), DUMP_SECTOR,
				     segs[0].len);
			off2 = tu_check(gpa_ptr(&b, segs[1].gpa), DUMP_SECTOR + 6,
				     segs[1].len);
		}
		tu_result(!err && st == VIRTIO_BLK_S_OK && off1 < 0 &&
			  off2 < 0 && ulen == DUMP_SECTORS * SECTOR + 1,
			  "IN 8192 bytes at sector %u in 2 segments: status %u, used len %u, data %s%s%s",
			  DUMP_SECTOR, st, ulen,
			  off1 < 0 && off2 < 0 ? "matches" : "DIFFERS",
			  err ? ": " : "", err ? strerror(-err) : "");
	}

	/* FLUSH, if negotiated. */
	if (b.dev.acked_features & (1ull << VIRTIO_BLK_F_FLUSH)) {
		uint32_t ulen = 0;
		uint8_t st = 0xff;

		err = blk_sync(&b, VIRTIO_BLK_T_FLUSH, 0, NULL, 0, &st, &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_OK,
			  "FLUSH: status %u%s%s", st, err ? ": " : "",
			  err ? strerror(-err) : "");
	} else {
		printf("# FLUSH not offered, not tested\n");
	}

	/* Errors come back as status bytes, not as a dead queue. */
	{
		struct vq_buf seg = { DATA_GPA, SECTOR, 1 };
		uint32_t ulen = 0;
		uint8_t st = 0xff;

		err = blk_sync(&b, VIRTIO_BLK_T_IN, b.capacity, &seg, 1, &st,
			       &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_IOERR,
			  "IN past the end (sector %llu): status %u (IOERR expected)",
			  (unsigned long long)b.capacity, st);
		st = 0xff;
		err = blk_sync(&b, 0x7777, 0, &seg, 1, &st, &ulen);
		tu_result(!err && st == VIRTIO_BLK_S_UNSUPP,
			  "unknown request type: status %u (UNSUPP expected)",
			  st);
	}

	/* Many in flight: fill the ring, refill as they complete, wrap it. */
	/*
	 * Many in flight: fill the ring (3 descriptors a request, no
	 * indirect descriptors), refill as they complete, wrap it.
	 */
	r = (struct run){ .type = VIRTIO_BLK_T_OUT, .len = 4096,
			  .depth = b.qsize / 3, .total = 3 * b.qsize + 5,
			  .verify = 1, .first = WRAP_SECTOR,
			  .span = 3 * b.qsize + 5 };
	err = blk_run(&b, &r);
	tu_result(!err, "OUT %lu x 4096 bytes, %u in flight (%u descriptors), ring wrapped %lu times%s%s",
		  r.done, r.depth, 3 * r.depth, r.done / b.qsize,
		  err ? ": " : "", r.err);
	r.type = VIRTIO_BLK_T_IN;
	err = blk_run(&b, &r);
	tu_result(!err, "IN %lu x 4096 bytes back, %u in flight, data checked%s%s",
		  r.done, r.depth, err ? ": " : "", r.err);

	/* Enough requests to wrap the 16-bit ring indices too. */
	r = (struct run){ .type = VIRTIO_BLK_T_IN, .len = 4096,
			  .depth = b.qsize / 3, .total = 70000, .verify = 1,
			  .first = WRAP_SECTOR, .span = 3 * b.qsize + 5,
			  .random = 1 };
	err = blk_run(&b, &r);
	tu_result(!err, "IN %lu x 4096 bytes at random, %u in flight, avail/used idx wrapped past 65535 (now %u)%s%s",
		  r.done, r.depth, b.q.avail_idx, err ? ": " : "", r.err);

	if (do_bench)
		bench(&b, bench_s);

	printf("# %lu kicks, %lu calls\n", b.q.kicks, b.q.calls);

	/* Nothing may complete after the ring is stopped: drain first. */
	err = blk_drain(&b);
	if (err)
		tu_result(0, "drain: %u still in flight", vq_inflight_chains(&b.q));

	if (escape) {
		escape_test(&b);
		/* The back end may have given up on the device: just report. */
		base = 0xffffffffu;
		err = vu_stop_vring(&b.dev, 0, &base);
		printf("# after the refused descriptor: GET_VRING_BASE %s%s (base %u, avail idx %u)\n",
		       err ? "fails: " : "answers", err ? strerror(-err) : "",
		       base, b.q.avail_idx);
		goto dump;
	}

	/* Teardown: the back end's next avail index must be ours. */
	base = 0xffffffffu;
	err = vu_stop_vring(&b.dev, 0, &base);
	tu_result(!err && base == b.q.avail_idx,
		  "GET_VRING_BASE: %u (avail idx %u)%s%s", base,
		  b.q.avail_idx, err ? ": " : "", err ? strerror(-err) : "");
dump:

	if (dump) {
		char path[4096];

		err = write_dump(dump, DUMP_SECTOR, DUMP_SECTORS);
		snprintf(path, sizeof(path), "%s.wrap", dump);
		if (!err)
			err = write_dump(path, WRAP_SECTOR,
					 (3 * b.qsize + 5) * 8);
		if (err)
			tu_result(0, "dump to %s: %s", dump, strerror(-err));
		else
			printf("# expected contents: sectors %u-%u in %s, %u-%u in %s\n",
			       DUMP_SECTOR, DUMP_SECTOR + DUMP_SECTORS - 1,
			       dump, WRAP_SECTOR,
			       WRAP_SECTOR + (3 * b.qsize + 5) * 8 - 1, path);
	}
out:
	vu_close(&b.dev);
	vq_free(&b.q);
	tu_memfd_free(&b.win);
	free(b.slot);
	free(b.free_slot);
	printf("%d passed, %d failed\n", tu_passed, tu_failed);
	return tu_failed ? 1 : 0;
}
