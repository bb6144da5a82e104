// SPDX-License-Identifier: GPL-2.0-only
/*
 * vu_fs_test - drive a stock vhost-user-fs back end (virtiofsd) from
 * virtqueues laid out in a memfd, as pcinet-vhost will from the window:
 * queue 0 is hiprio, queue 1 the request queue; FUSE requests go in as
 * device-readable buffers, replies come back in device-writable ones.
 *
 * Usage: vu_fs_test -s SOCKET -D SHARED_DIR -f FILE [-w NEWFILE] [-v]
 *
 *   -f  an existing file in SHARED_DIR: looked up, opened and read
 *       through FUSE, compared with what read(2) finds on the host
 *   -w  created and written through FUSE (test-fs.sh checks it on the
 *       host against FILE, whose contents are what is written)
 *
 * Prints "ok - ..." or "FAIL - ..." per case, "# ..." for information,
 * and "N passed, N failed"; exits 0 only if nothing failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fuse.h>
#include <linux/virtio_config.h>

#include "testutil.h"
#include "vq.h"
#include "vu_frontend.h"

#ifdef VQ_RELAY
#define MEM_SIZE	VQ_RELAY_WIN_SIZE	/* laid out as a window */
#else
#define MEM_SIZE	(8u << 20)
#endif
#define HIPRIO_GPA	0x0ull
#define HIPRIO_NUM	16u
#define REQ_RING_GPA	0x4000ull
#define REQ_NUM		128u
#define MSG_GPA		0x10000ull	/* per slot: request, then reply */
#define MSG_SLOT	1024u
#define MSG_OUT		512u		/* reply part of the slot */
#define DATA_GPA	0x40000ull	/* per slot data, CHUNK each */
#define CHUNK		65536u
#define NSLOT		32u		/* 4 descriptors each at most */
#define TIMEOUT_MS	5000

struct fslot {
	int busy;
	uint64_t unique;
	uint32_t opcode;
	uint64_t offset;	/* READ: file offset */
	uint32_t size;		/* READ: bytes asked */
};

struct fs {
	struct vu_dev dev;
	struct vu_mem mem;
	struct vq hq, rq;
	uint64_t unique;
	struct fslot slot[NSLOT];
	uint8_t *file;		/* host copy of -f */
	size_t file_len;
	uint32_t max_write;
};

static void *gpa_ptr(struct fs *f, uint64_t gpa)
{
	return (uint8_t *)f->mem.base + gpa;
}

static uint64_t msg_gpa(unsigned int s)
{
	return MSG_GPA + s * MSG_SLOT;
}

static uint64_t data_gpa(unsigned int s)
{
	return DATA_GPA + s * CHUNK;
}

/*
 * Post a FUSE request on Q from slot S: the in header and ARG (plus WDATA
 * bytes of slot data, device-readable), then room for the out header and
 * OUTLEN bytes of reply (plus RDATA bytes of slot data, device-writable).
 * With NOREPLY (FORGET) there is nothing device-writable.
 */
static int fs_post(struct fs *f, struct vq *q, unsigned int s,
		   uint32_t opcode, uint64_t nodeid, const void *arg,
		   uint32_t arglen, uint32_t wdata, uint32_t outlen,
		   uint32_t rdata, int noreply)
{
	struct fuse_in_header *ih = gpa_ptr(f, msg_gpa(s));
	struct vq_buf bufs[4];
	unsigned int n = 0;

	if (sizeof(*ih) + arglen > MSG_OUT ||
	    sizeof(struct fuse_out_header) + outlen > MSG_SLOT - MSG_OUT ||
	    wdata > CHUNK || rdata > CHUNK)
		return -EINVAL;
	memset(ih, 0, sizeof(*ih));
	ih->len = sizeof(*ih) + arglen + wdata;
	ih->opcode = opcode;
	ih->unique = ++f->unique;
	ih->nodeid = nodeid;
	ih->uid = 0;
	ih->gid = 0;
	ih->pid = (uint32_t)getpid();
	memcpy(ih + 1, arg, arglen);
	memset(gpa_ptr(f, msg_gpa(s) + MSG_OUT), 0xee, MSG_SLOT - MSG_OUT);

	bufs[n++] = (struct vq_buf){ msg_gpa(s), sizeof(*ih) + arglen, 0 };
	if (wdata)
		bufs[n++] = (struct vq_buf){ data_gpa(s), wdata, 0 };
	if (!noreply) {
		bufs[n++] = (struct vq_buf){ msg_gpa(s) + MSG_OUT,
			sizeof(struct fuse_out_header) + outlen, 1 };
		if (rdata)
			bufs[n++] = (struct vq_buf){ data_gpa(s), rdata, 1 };
	}
	f->slot[s] = (struct fslot){ .busy = 1, .unique = ih->unique,
				     .opcode = opcode };
	return vq_add(q, bufs, n, s + 1);
}

/* Wait for any completion on Q: its slot and used length. */
static int fs_reap(struct fs *f, struct vq *q, unsigned int *s,
		   uint32_t *used_len)
{
	for (;;) {
		uint64_t tok;
		int r = vq_get_used(q, &tok, used_len);

		if (r < 0)
			return r;
		if (r == 1) {
			*s = (unsigned int)(tok - 1);
			if (*s >= NSLOT || !f->slot[*s].busy)
				return -EPROTO;
			f->slot[*s].busy = 0;
			return 0;
		}
		r = vq_wait(q, TIMEOUT_MS);
		if (r)
			return r;
	}
}

/* Check a reply: header consistent with the used length; FUSE error. */
static int fs_reply(struct fs *f, unsigned int s, uint32_t used_len,
		    int32_t *error)
{
	struct fuse_out_header *oh = gpa_ptr(f, msg_gpa(s) + MSG_OUT);

	if (used_len < sizeof(*oh) || oh->len != used_len ||
	    oh->unique != f->slot[s].unique)
		return -EPROTO;
	*error = oh->error;
	return 0;
}

static void *reply_arg(struct fs *f, unsigned int s)
{
	return gpa_ptr(f, msg_gpa(s) + MSG_OUT +
			  sizeof(struct fuse_out_header));
}

/* One request on the request queue, slot 0, synchronously. */
static int fs_call(struct fs *f, uint32_t opcode, uint64_t nodeid,
		   const void *arg, uint32_t arglen, uint32_t wdata,
		   uint32_t outlen, uint32_t rdata, int32_t *error,
		   uint32_t *used_len)
{
	unsigned int s;
	int err;

	err = fs_post(f, &f->rq, 0, opcode, nodeid, arg, arglen, wdata,
		      outlen, rdata, 0);
	if (!err)
		err = vq_kick(&f->rq);
	if (!err)
		err = fs_reap(f, &f->rq, &s, used_len);
	if (!err && s != 0)
		err = -EPROTO;
	if (!err)
		err = fs_reply(f, 0, *used_len, error);
	return err;
}

static const char *errstr(int err)
{
	return err ? strerror(err < 0 ? -err : err) : "";
}

static int read_host_file(const char *dir, const char *name, uint8_t **buf,
			  size_t *len)
{
	char path[4096];
	struct stat st;
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_size > (64 << 20)) {
		close(fd);
		return -EFBIG;
	}
	*len = (size_t)st.st_size;
	*buf = malloc(*len + 1);
	if (!*buf) {
		close(fd);
		return -ENOMEM;
	}
	got = read(fd, *buf, *len);
	close(fd);
	return got == (ssize_t)*len ? 0 : -EIO;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s -s SOCKET -D SHARED_DIR -f FILE [-w NEWFILE] [-v]\n",
		argv0);
	exit(2);
}

static int start_queue(struct fs *f, unsigned int idx, struct vq *q)
{
	struct vu_vring_cfg vc = {
		.num = q->num,
		.desc_gpa = q->desc_gpa,
		.avail_gpa = q->avail_gpa,
		.used_gpa = q->used_gpa,
		.base = 0,
		.kick_fd = q->kick_fd,
		.call_fd = q->call_fd,
	};

	return vu_start_vring(&f->dev, idx, &vc);
}

/* LOOKUP NAME in the root; *nodeid and the entry. */
static int lookup(struct fs *f, const char *name, struct fuse_entry_out *e,
		  int32_t *error)
{
	uint32_t ulen = 0;
	int err;

	err = fs_call(f, FUSE_LOOKUP, FUSE_ROOT_ID, name,
		      (uint32_t)strlen(name) + 1, 0, sizeof(*e), 0, error,
		      &ulen);
	if (!err && !*error) {
		if (ulen != sizeof(struct fuse_out_header) + sizeof(*e))
			return -EPROTO;
		memcpy(e, reply_arg(f, 0), sizeof(*e));
	}
	return err;
}

static int release(struct fs *f, uint64_t nodeid, uint64_t fh, int32_t *error)
{
	struct fuse_release_in ri = { .fh = fh };
	uint32_t ulen;

	return fs_call(f, FUSE_RELEASE, nodeid, &ri, sizeof(ri), 0, 0, 0,
		       error, &ulen);
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *dir = NULL, *name = NULL, *wname = NULL;
	struct fuse_entry_out ent;
	unsigned int hbase, rbase;
	uint64_t nodeid = 0, fh = 0;
	int verbose = 0, c, err;
	int32_t ferr = 0;
	uint32_t ulen = 0;
	struct fs f;

	memset(&f, 0, sizeof(f));
	f.hq.kick_fd = -1;
	f.hq.call_fd = -1;
	f.rq.kick_fd = -1;
	f.rq.call_fd = -1;
	f.mem.fd = -1;
	f.dev.sock = -1;
	while ((c = getopt(argc, argv, "s:D:f:w:v")) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'D':
			dir = optarg;
			break;
		case 'f':
			name = optarg;
			break;
		case 'w':
			wname = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage(argv[0]);
		}
	}
	if (!sock || !dir || !name || strchr(name, '/') ||
	    (wname && strchr(wname, '/')))
		usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);

	err = read_host_file(dir, name, &f.file, &f.file_len);
	if (err) {
		fprintf(stderr, "%s/%s: %s\n", dir, name, strerror(-err));
		return 1;
	}
	err = tu_memfd(&f.mem, MEM_SIZE);
	if (err) {
		fprintf(stderr, "memfd: %s\n", strerror(-err));
		return 1;
	}

	err = vu_connect(&f.dev, sock, TIMEOUT_MS);
	tu_result(!err, "connect %s%s%s", sock, err ? ": " : "", errstr(err));
	if (err)
		goto out;
	f.dev.verbose = verbose;
	err = vu_negotiate(&f.dev,
			   (1ull << VIRTIO_F_VERSION_1) |
			   (1ull << VU_F_PROTOCOL_FEATURES) |
			   (1ull << VIRTIO_F_ACCESS_PLATFORM),
			   (1ull << VU_PF_REPLY_ACK), &f.mem);
	tu_print_features("virtiofsd", &f.dev, NULL);
	tu_result(!err, "negotiate (features, protocol features, owner, mem table: memfd %u MiB at gpa 0)%s%s",
		  MEM_SIZE >> 20, err ? ": " : "", errstr(err));
	if (err)
		goto out;

	err = vq_init(&f.hq, f.mem.base, HIPRIO_GPA, HIPRIO_NUM);
	if (!err)
		err = vq_init(&f.rq, f.mem.base, REQ_RING_GPA, REQ_NUM);
	if (!err)
		err = start_queue(&f, 0, &f.hq);
	if (!err)
		err = start_queue(&f, 1, &f.rq);
	tu_result(!err, "vrings: 0 hiprio (%u entries), 1 requests (%u entries)%s%s",
		  HIPRIO_NUM, REQ_NUM, err ? ": " : "", errstr(err));
	if (err)
		goto out;

	/* FUSE_INIT */
	{
		struct fuse_init_in ii = {
			.major = FUSE_KERNEL_VERSION,
			.minor = FUSE_KERNEL_MINOR_VERSION,
			.max_readahead = CHUNK,
			.flags = 0,
		};
		struct fuse_init_out io;

		err = fs_call(&f, FUSE_INIT, 0, &ii, sizeof(ii), 0,
			      sizeof(io), 0, &ferr, &ulen);
		memset(&io, 0, sizeof(io));
		if (!err && ulen > sizeof(struct fuse_out_header))
			memcpy(&io, reply_arg(&f, 0),
			       ulen - sizeof(struct fuse_out_header));
		f.max_write = io.max_write;
		tu_result(!err && !ferr && io.major == FUSE_KERNEL_VERSION,
			  "FUSE_INIT: error %d, server protocol %u.%u, max_write %u, max_readahead %u, flags %#x%s%s",
			  ferr, io.major, io.minor, io.max_write,
			  io.max_readahead, io.flags, err ? ": " : "",
			  errstr(err));
		if (err || ferr)
			goto stop;
	}

	/* LOOKUP of a name that is not there: an error, not a failure. */
	err = lookup(&f, "no-such-file.pcinet", &ent, &ferr);
	tu_result(!err && ferr == -ENOENT,
		  "FUSE_LOOKUP no-such-file.pcinet: error %d (-ENOENT expected)%s%s",
		  ferr, err ? ": " : "", errstr(err));

	err = lookup(&f, name, &ent, &ferr);
	if (!err && !ferr)
		nodeid = ent.nodeid;
	tu_result(!err && !ferr && nodeid && ent.attr.size == f.file_len,
		  "FUSE_LOOKUP %s: error %d, nodeid %llu, size %llu (host %zu)%s%s",
		  name, ferr, (unsigned long long)nodeid,
		  (unsigned long long)ent.attr.size, f.file_len,
		  err ? ": " : "", errstr(err));
	if (err || ferr)
		goto stop;

	{
		struct fuse_open_in oi = { .flags = O_RDONLY };
		struct fuse_open_out oo;

		err = fs_call(&f, FUSE_OPEN, nodeid, &oi, sizeof(oi), 0,
			      sizeof(oo), 0, &ferr, &ulen);
		if (!err && !ferr) {
			memcpy(&oo, reply_arg(&f, 0), sizeof(oo));
			fh = oo.fh;
		}
		tu_result(!err && !ferr, "FUSE_OPEN: error %d, fh %llu%s%s",
			  ferr, (unsigned long long)fh, err ? ": " : "",
			  errstr(err));
		if (err || ferr)
			goto stop;
	}

	/* READ the whole file, one chunk at a time, reply data in a 2nd buffer. */
	{
		uint64_t off = 0;
		int same = 1;

		err = 0;
		ferr = 0;
		do {
			struct fuse_read_in ri = {
				.fh = fh,
				.offset = off,
				.size = CHUNK,
			};
			uint32_t got;

			err = fs_call(&f, FUSE_READ, nodeid, &ri, sizeof(ri),
				      0, 0, CHUNK, &ferr, &ulen);
			if (err || ferr)
				break;
			got = ulen - sizeof(struct fuse_out_header);
			if (got > CHUNK || off + got > f.file_len ||
			    memcmp(gpa_ptr(&f, data_gpa(0)), f.file + off,
				   got)) {
				same = 0;
				break;
			}
			off += got;
			if (!got)
				break;
		} while (off < f.file_len);
		tu_result(!err && !ferr && same && off == f.file_len,
			  "FUSE_READ %s: %llu bytes in %u KiB reads, error %d, contents %s%s%s",
			  name, (unsigned long long)off, CHUNK >> 10, ferr,
			  same ? "match" : "DIFFER", err ? ": " : "",
			  errstr(err));
	}

	/* Many READs in flight at once on the request queue. */
	{
		unsigned int depth = NSLOT, s, done = 0, posted = 0;
		unsigned int total = 4 * REQ_NUM;
		uint32_t sz = 4096;
		int bad = 0;

		err = 0;
		while (done < total && !err && !bad) {
			while (posted < total && posted - done < depth &&
			       f.rq.num_free >= 3) {
				struct fuse_read_in ri = { .fh = fh, .size = sz };

				for (s = 0; s < NSLOT && f.slot[s].busy; s++)
					;
				if (s == NSLOT)
					break;
				ri.offset = f.file_len > sz ?
					(posted * 7919ull * 512) %
					(f.file_len - sz) : 0;
				err = fs_post(&f, &f.rq, s, FUSE_READ, nodeid,
					      &ri, sizeof(ri), 0, 0, sz, 0);
				if (err)
					break;
				f.slot[s].offset = ri.offset;
				f.slot[s].size = sz;
				posted++;
			}
			if (err)
				break;
			err = vq_kick(&f.rq);
			if (err)
				break;
			err = fs_reap(&f, &f.rq, &s, &ulen);
			if (err)
				break;
			{
				uint64_t want = f.file_len - f.slot[s].offset;
				uint32_t got;

				if (want > f.slot[s].size)
					want = f.slot[s].size;
				err = fs_reply(&f, s, ulen, &ferr);
				got = ulen - sizeof(struct fuse_out_header);
				if (err || ferr || got != want ||
				    memcmp(gpa_ptr(&f, data_gpa(s)),
					   f.file + f.slot[s].offset, got))
					bad = 1;
				else
					done++;
			}
		}
		tu_result(!err && !bad && done == total,
			  "FUSE_READ x %u (4 KiB each, up to %u in flight), contents match%s%s%s",
			  done, depth, bad ? " - BAD REPLY" : "",
			  err ? ": " : "", errstr(err));
	}

	err = release(&f, nodeid, fh, &ferr);
	tu_result(!err && !ferr, "FUSE_RELEASE: error %d%s%s", ferr,
		  err ? ": " : "", errstr(err));

	/* FORGET goes on the hiprio queue and has no reply. */
	{
		struct fuse_forget_in fi = { .nlookup = 1 };
		unsigned int s;

		err = fs_post(&f, &f.hq, 1, FUSE_FORGET, nodeid, &fi,
			      sizeof(fi), 0, 0, 0, 1);
		if (!err)
			err = vq_kick(&f.hq);
		if (!err)
			err = fs_reap(&f, &f.hq, &s, &ulen);
		tu_result(!err && s == 1 && ulen == 0,
			  "FUSE_FORGET on hiprio: returned, used len %u%s%s",
			  ulen, err ? ": " : "", errstr(err));
	}

	/* CREATE + WRITE + RELEASE: the host sees the file (test-fs.sh). */
	if (wname) {
		struct {
			struct fuse_create_in ci;
			char name[256];
		} __attribute__((packed)) cr;
		struct {
			struct fuse_entry_out e;
			struct fuse_open_out o;
		} __attribute__((packed)) co;
		uint64_t wnode = 0, wfh = 0, off = 0;
		uint32_t chunk = CHUNK;

		if (f.max_write && f.max_write < chunk)
			chunk = f.max_write;
		memset(&cr, 0, sizeof(cr));
		cr.ci.flags = O_WRONLY | O_CREAT | O_TRUNC;
		cr.ci.mode = S_IFREG | 0644;
		cr.ci.umask = 022;
		snprintf(cr.name, sizeof(cr.name), "%s", wname);
		err = fs_call(&f, FUSE_CREATE, FUSE_ROOT_ID, &cr,
			      sizeof(cr.ci) + strlen(cr.name) + 1, 0,
			      sizeof(co), 0, &ferr, &ulen);
		if (!err && !ferr) {
			memcpy(&co, reply_arg(&f, 0), sizeof(co));
			wnode = co.e.nodeid;
			wfh = co.o.fh;
		}
		tu_result(!err && !ferr && wnode,
			  "FUSE_CREATE %s: error %d, nodeid %llu, fh %llu%s%s",
			  wname, ferr, (unsigned long long)wnode,
			  (unsigned long long)wfh, err ? ": " : "",
			  errstr(err));
		if (err || ferr)
			goto stop;
		while (off < f.file_len && !err && !ferr) {
			struct fuse_write_in wi = { .fh = wfh, .offset = off };
			struct fuse_write_out wo;

			wi.size = f.file_len - off > chunk ?
				  chunk : (uint32_t)(f.file_len - off);
			memcpy(gpa_ptr(&f, data_gpa(0)), f.file + off,
			       wi.size);
			err = fs_call(&f, FUSE_WRITE, wnode, &wi, sizeof(wi),
				      wi.size, sizeof(wo), 0, &ferr, &ulen);
			if (err || ferr)
				break;
			memcpy(&wo, reply_arg(&f, 0), sizeof(wo));
			if (wo.size != wi.size) {
				err = -EIO;
				break;
			}
			off += wi.size;
		}
		tu_result(!err && !ferr && off == f.file_len,
			  "FUSE_WRITE %s: %llu bytes in %u KiB writes, error %d%s%s",
			  wname, (unsigned long long)off, chunk >> 10, ferr,
			  err ? ": " : "", errstr(err));
		err = release(&f, wnode, wfh, &ferr);
		tu_result(!err && !ferr, "FUSE_RELEASE %s: error %d%s%s",
			  wname, ferr, err ? ": " : "", errstr(err));
	}

stop:
	printf("# hiprio %lu kicks %lu calls, requests %lu kicks %lu calls\n",
	       f.hq.kicks, f.hq.calls, f.rq.kicks, f.rq.calls);
	hbase = 0xffffffffu;
	rbase = 0xffffffffu;
	err = vu_stop_vring(&f.dev, 0, &hbase);
	if (!err)
		err = vu_stop_vring(&f.dev, 1, &rbase);
	tu_result(!err && hbase == f.hq.avail_idx && rbase == f.rq.avail_idx,
		  "GET_VRING_BASE: hiprio %u (avail idx %u), requests %u (avail idx %u)%s%s",
		  hbase, f.hq.avail_idx, rbase, f.rq.avail_idx,
		  err ? ": " : "", errstr(err));
out:
	vu_close(&f.dev);
	vq_free(&f.hq);
	vq_free(&f.rq);
	tu_memfd_free(&f.mem);
	free(f.file);
	printf("%d passed, %d failed\n", tu_passed, tu_failed);
	return tu_failed ? 1 : 0;
}
