// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet-vhost - the host's vhost-user front end for pcinet's virtio
 * channel (docs/design.md, "pcinet-vhost").
 *
 *   pcinet-vhost --link pcinet0 [--blk IMAGE]... [--fs DIR:TAG]... [--config FILE]
 *
 * The devices come from the command line and from FILE (one "blk IMAGE"
 * or "fs DIR TAG" a line); SIGHUP reads FILE again: a device no longer
 * listed is withdrawn and its back end stopped, a new one started and
 * offered, the others left alone (cfg_reload()).
 * Per device: a stock back end on a private socket (qemu-storage-daemon
 * --export type=vhost-user-blk, or virtiofsd), vhost-user negotiation
 * (vu_frontend.c), an offer on /dev/pcinet-vhost<N> (ADD_DEV), the
 * device's memory file as the back end's memory table (two regions, the
 * device's spans, gpa = window offset), and a kick and a call eventfd per
 * queue bound in the kernel (SET_KICK, SET_CALL) and handed to the back
 * end: the data path is then board doorbell -> kernel -> kick eventfd ->
 * back end -> call eventfd -> kernel -> board doorbell, never through
 * this process.  This process follows the negotiation table on every
 * poll() event and every tick (PV_TICK_MS), restarts dead back ends
 * (withdrawn, offered again), survives the link going away (waits for
 * the character device to come back) and withdraws everything on SIGTERM.  Signals arrive through a
 * signalfd in the poll loop, never in the middle of a step: a SIGHUP
 * during a back end's start or a negotiation is handled once that step
 * is over.
 *
 * Everything GET_DRV reports is the board's, unchecked: num is checked
 * against num_max, features against the offer, before any use.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "pcinet_vhost.h"
#include "vio_blk.h"
#include "vu_frontend.h"

/* virtio status bits (virtio 1.x, 2.1) */
#define S_ACKNOWLEDGE	1u
#define S_DRIVER	2u
#define S_DRIVER_OK	4u
#define S_FEATURES_OK	8u
#define S_NEEDS_RESET	0x40u
#define S_FAILED	0x80u

#define VIO_FS_ID	26	/* virtio device ID of virtio-fs */
#define FS_TAG_LEN	36	/* virtio_fs_config: tag[36], num_request_queues */
#define FS_CFG_LEN	40

#define PV_NUM		128		/* num_max of every queue */
#define PV_BLK_POOL	(4U << 20)	/* "Pool sizing": blk 4 MiB each way */
#define PV_FS_POOL	(2U << 20)	/* fs 2 MiB each way */
#define PV_MAX_DEV	PCINET_VHOST_MAX_DEV
#define PV_TIMEOUT_MS	2000		/* a vhost-user reply */
/*
 * The reset's answer path, bounded below the board's PCINET_VIO_ACK_MS
 * (3000 ms; docs/design.md, "Virtio channel", open question 11, where
 * the terms are added up): the stop's replies PV_STOP_MS, the drain
 * PV_DRAIN_MS, then a back end that kept requests is SIGKILLed (no
 * grace: what it holds is abandoned anyway) and the reset answered; its
 * replacement starts after the answer.
 */
#define PV_STOP_MS	250		/* SET_VRING_ENABLE 0 + GET_VRING_BASE, all queues */
#define PV_DRAIN_MS	1000		/* a stopped ring's requests to complete */
#define PV_DRAIN_POLL_MS 5		/* the loop's timeout while a device drains */
#define PV_START_MS	10000		/* the back end's socket to appear */
#define PV_RETRY_MS	1000		/* before a back end is started again */
#define USED_BYTES	(6 + 8 * (uint64_t)PV_NUM)	/* a used ring of num_max */
#define PV_TICK_MS	250		/* look at every device at least this often */
#define PV_PATH_LEN	512		/* an image's or a directory's path */
#define PV_LINE_LEN	(PV_PATH_LEN + FS_TAG_LEN + 16)	/* a config line */
#define PV_CFG_LINES	1000		/* a config file's lines read at most */

enum pv_kind { PV_BLK, PV_FS };

enum pv_state {
	PV_DOWN,	/* no back end */
	PV_READY,	/* back end negotiated, not offered (no link, no room) */
	PV_OFFERED,	/* offered: slot, memory file, eventfds */
};

/* A device as given: --blk, --fs or a line of the config file. */
struct pv_spec {
	enum pv_kind kind;
	char path[PV_PATH_LEN];	/* image or directory */
	char tag[FS_TAG_LEN + 1];	/* fs: the mount tag */
};

struct pv_dev {
	bool live;		/* this entry of G.dev is a device */
	bool from_cfg;		/* listed in the config file (a reload may drop it) */
	enum pv_kind kind;
	char name[16];		/* "blk0", "fs0": the log's prefix */
	char path[PV_PATH_LEN];	/* image or directory */
	char tag[FS_TAG_LEN + 1];
	int img_fd;		/* blk: the image, opened once (img_open()) */
	char sock[128];
	pid_t pid;
	enum pv_state state;
	uint64_t retry_ms;	/* no back end started before this */
	uint64_t room_ms;	/* no ADD_DEV tried before this */
	struct vu_dev vu;
	uint64_t be_features;
	uint64_t offer;
	unsigned int nr_vq;
	uint32_t cfg_len;
	uint8_t config[PCINET_VHOST_CONFIG_SIZE];
	uint64_t pool;

	/* the offer */
	struct pcinet_vhost_dev dev;
	int mem_fd;
	uint8_t *dev_map, *drv_map;	/* the two spans, our mapping */
	int kick[PCINET_VHOST_MAX_VQ];
	int call[PCINET_VHOST_MAX_VQ];

	/* the driver's session */
	uint32_t drv_gen;
	bool answered;
	uint32_t seq;
	bool feat_ok;
	bool running;
	bool used;		/* a session ran on this back end (virtiofsd: one-shot) */
	unsigned int num[PCINET_VHOST_MAX_VQ];	/* the running rings' sizes */

	/* a reset under way (drain_start(), drain_poll()) */
	bool draining;		/* rings stopped, requests still in the back end */
	uint64_t drain_t0, drain_end;	/* now_ms() at the stop; its deadline */
	unsigned int base[PCINET_VHOST_MAX_VQ];	/* GET_VRING_BASE's counts */
	const char *stale;	/* why the back end must be replaced, or NULL */
};

static struct {
	const char *link;
	char cdev[64];
	int ctl;
	int sigfd;
	char dir[64];
	bool waiting;		/* logged "waiting for the character device" */
	const char *config;	/* --config FILE, or NULL */
	struct pv_dev dev[PV_MAX_DEV];	/* live ones anywhere: slots come and go */
	const char *qsd;
	const char *virtiofsd;
} G = { .ctl = -1, .sigfd = -1 };

static __printf(2, 3) void pv_log(const struct pv_dev *d, const char *fmt, ...)
{
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "%02ld:%02ld:%02ld.%03ld pcinet-vhost: %s%s",
		(long)(ts.tv_sec / 3600 % 24), (long)(ts.tv_sec / 60 % 60),
		(long)(ts.tv_sec % 60), ts.tv_nsec / 1000000L,
		d ? d->name : "", d ? ": " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ----- the back end ----- */

/* qemu-storage-daemon's option syntax: a comma in a value is doubled. */
static void opt_escape(char *dst, size_t len, const char *src)
{
	size_t n = 0;

	for (; *src && n + 2 < len; src++) {
		if (*src == ',')
			dst[n++] = ',';
		dst[n++] = *src;
	}
	dst[n] = 0;
}

static void be_exec(const struct pv_dev *d)
{
	char img[1024], blockdev[1200], export[256], src[1100];

	if (d->kind == PV_BLK) {
		/*
		 * The image we opened when the device was added, not its
		 * path again: whatever IMAGE names by now (a symlink swapped
		 * in by someone who can write its directory), every back end
		 * of this device serves the same file.  /proc/self/fd/N
		 * opens the file the inherited descriptor holds.
		 */
		if (fcntl(d->img_fd, F_SETFD, 0) < 0)
			_exit(127);
		snprintf(blockdev, sizeof(blockdev),
			 "driver=file,node-name=%s,filename=/proc/self/fd/%d,cache.direct=off",
			 d->name, d->img_fd);
		snprintf(export, sizeof(export),
			 "type=vhost-user-blk,id=%s,node-name=%s,addr.type=unix,addr.path=%s,writable=on",
			 d->name, d->name, d->sock);
		execlp(G.qsd, G.qsd, "--blockdev", blockdev, "--export", export,
		       (char *)NULL);
	} else {
		/*
		 * The chroot sandbox: the namespace one pivots the root,
		 * which an initramfs (rootfs) cannot give up.
		 */
		opt_escape(img, sizeof(img), d->path);
		snprintf(src, sizeof(src), "source=%s", img);
		snprintf(export, sizeof(export), "--socket-path=%s", d->sock);
		execlp(G.virtiofsd, G.virtiofsd, export, "-o", src,
		       "-o", "sandbox=chroot", "-o", "cache=none", (char *)NULL);
	}
}

static int be_spawn(struct pv_dev *d)
{
	const char *bin = d->kind == PV_BLK ? G.qsd : G.virtiofsd;

	unlink(d->sock);
	d->pid = fork();
	if (d->pid < 0) {
		d->pid = -1;
		return -errno;
	}
	if (d->pid == 0) {
		sigset_t all;

		/* the back end goes with us, however we end */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		/*
		 * and only then: a SIGHUP or ^C to our process group is
		 * ours alone (a reload must not stop every back end)
		 */
		setpgid(0, 0);
		sigfillset(&all);
		sigprocmask(SIG_UNBLOCK, &all, NULL);
		be_exec(d);
		fprintf(stderr, "pcinet-vhost: exec %s: %s\n", bin,
			strerror(errno));
		_exit(127);
	}
	pv_log(d, "started %s (pid %d) for %s", bin, (int)d->pid, d->path);
	return 0;
}

static void be_kill(struct pv_dev *d)
{
	vu_close(&d->vu);
	d->running = false;
	d->draining = false;
	d->stale = NULL;
	vu_stop_backend(d->pid, 2000);
	d->pid = -1;
}

/*
 * The back end is dropped at once (SIGKILL, no grace) when a reset must
 * be answered and it still holds requests, would not stop its rings in
 * time, or serves no second session: once it is reaped it touches the
 * rings and pools no more, so the reset can be answered; what it held is
 * abandoned (the board aborted those requests already).  Its
 * replacement is started after the answer (@why, be_renew()).
 */
static void be_abandon(struct pv_dev *d, const char *why)
{
	pv_log(d, "back end killed: %s", why);
	vu_close(&d->vu);
	d->running = false;
	d->draining = false;
	vu_stop_backend(d->pid, 0);
	d->pid = -1;
	d->stale = why;
}

/* The config space to offer: the back end's (blk, clamped) or the tag (fs). */
static int be_config(struct pv_dev *d)
{
	uint32_t size_max, seg_max;
	int err;

	memset(d->config, 0, sizeof(d->config));
	if (d->kind == PV_FS) {
		memcpy(d->config, d->tag, strnlen(d->tag, FS_TAG_LEN));
		d->config[FS_TAG_LEN] = 1;	/* num_request_queues, le32 */
		d->cfg_len = FS_CFG_LEN;
		d->offer = (d->be_features &
			    (F_INDIRECT_DESC | F_EVENT_IDX)) | F_VERSION_1;
		return 0;
	}
	err = vu_get_config(&d->vu, 0, d->config, VIO_BLK_CFG_LEN);
	if (err)
		return err;
	vio_blk_clamp(d->config, d->be_features, d->pool, &size_max, &seg_max);
	d->cfg_len = VIO_BLK_CFG_LEN;
	d->offer = vio_blk_offer(d->be_features);
	pv_log(d, "pools %llu KiB each way: size_max %u, seg_max %u",
	       (unsigned long long)(d->pool >> 10), size_max, seg_max);
	return 0;
}

/*
 * Start the back end and negotiate with it: blocks until its socket
 * appears (at most PV_START_MS), the price of a one-threaded program.
 */
static int be_start(struct pv_dev *d)
{
	uint64_t want, t0 = now_ms();
	int err;

	err = be_spawn(d);
	if (err)
		return err;
	for (;;) {
		err = vu_connect(&d->vu, d->sock, PV_TIMEOUT_MS);
		if (!err)
			break;
		vu_close(&d->vu);
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			d->pid = -1;
			return -ECHILD;
		}
		if (now_ms() - t0 > PV_START_MS)
			return -ETIMEDOUT;
		usleep(20000);
	}
	want = d->kind == PV_BLK ? vio_blk_offer(~0ULL) :
	       F_VERSION_1 | F_INDIRECT_DESC | F_EVENT_IDX;
	want |= VF(VU_F_PROTOCOL_FEATURES);
	err = vu_negotiate(&d->vu, want,
			   VF(VU_PF_REPLY_ACK) |
			   (d->kind == PV_BLK ? VF(VU_PF_CONFIG) : 0), NULL);
	if (err)
		return err;
	d->be_features = d->vu.features;
	err = be_config(d);
	if (err)
		return err;
	d->used = false;
	pv_log(d, "back end ready: features 0x%llx, protocol features 0x%llx, offer 0x%llx",
	       (unsigned long long)d->be_features,
	       (unsigned long long)d->vu.protocol_features,
	       (unsigned long long)d->offer);
	return 0;
}

/* The memory table: the device's two spans of its memory file. */
static int be_mem_table(struct pv_dev *d)
{
	struct vu_mem regs[2];

	regs[0] = (struct vu_mem){ .fd = d->mem_fd, .base = d->dev_map,
				   .size = d->dev.dev_span_size,
				   .gpa = d->dev.dev_span_off,
				   .offset = d->dev.dev_span_off };
	regs[1] = (struct vu_mem){ .fd = d->mem_fd, .base = d->drv_map,
				   .size = d->dev.drv_span_size,
				   .gpa = d->dev.drv_span_off,
				   .offset = d->dev.drv_span_off };
	return vu_set_mem_regions(&d->vu, regs, 2);
}

/* ----- the offer ----- */

static void offer_drop(struct pv_dev *d, bool del)
{
	unsigned int q;

	if (d->state != PV_OFFERED)
		return;
	if (del && G.ctl >= 0 && ioctl(G.ctl, PCINET_VHOST_DEL_DEV, &d->dev.slot))
		pv_log(d, "DEL_DEV: %s", strerror(errno));
	if (d->dev_map)
		munmap(d->dev_map, d->dev.dev_span_size);
	if (d->drv_map)
		munmap(d->drv_map, d->dev.drv_span_size);
	d->dev_map = NULL;
	d->drv_map = NULL;
	close_fd(&d->mem_fd);
	for (q = 0; q < PCINET_VHOST_MAX_VQ; q++) {
		close_fd(&d->kick[q]);
		close_fd(&d->call[q]);
	}
	d->state = PV_READY;
	d->drv_gen = 0;
	d->answered = false;
	d->feat_ok = false;
	pv_log(d, "withdrawn (slot %u, dev_gen 0x%08x)%s", d->dev.slot,
	       d->dev.dev_gen, del ? "" : ": the link is gone");
}

/* The back end failed or exited: withdraw, start it again later. */
static void be_lost(struct pv_dev *d, const char *why)
{
	pv_log(d, "back end lost: %s", why);
	offer_drop(d, true);
	be_kill(d);
	d->state = PV_DOWN;
	d->retry_ms = now_ms() + PV_RETRY_MS;
}

/*
 * A fresh back end under the same offer, when no ring of the board's
 * runs on the old one (it holds nothing the board relies on): a reset
 * that GET_VRING_BASE could not complete (qemu-storage-daemon panics when
 * a request it still held completes after the ring was stopped) or
 * after which the back end kept requests it did not complete in time
 * (ring_drain()), a back end that died between sessions, virtiofsd's one
 * FUSE session.  The board sees nothing if it comes back within its
 * status timeout.
 * Returns 0, or withdraws the device (be_lost()) and returns -1.
 */
static int be_renew(struct pv_dev *d, const char *why)
{
	uint8_t config[sizeof(d->config)];
	uint64_t offer = d->offer;
	int err;

	if (d->state != PV_OFFERED || d->running || d->draining) {
		be_lost(d, why);
		return -1;
	}
	pv_log(d, "back end restarted under the same offer: %s", why);
	memcpy(config, d->config, sizeof(config));
	be_kill(d);
	err = be_start(d);
	if (!err && (d->offer != offer || memcmp(config, d->config, sizeof(config))))
		err = -ESTALE;	/* it offers something else now */
	if (!err)
		err = be_mem_table(d);
	if (err) {
		be_lost(d, "the new back end failed");
		return -1;
	}
	d->feat_ok = false;
	return 0;
}

static uint8_t *map_span(int fd, uint64_t off, uint64_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       (off_t)off);

	return p == MAP_FAILED ? NULL : p;
}

static int bind_fd(unsigned long req, uint32_t slot, unsigned int q, int fd)
{
	struct pcinet_vhost_vring_fd v = { .slot = slot, .vq = q, .fd = fd };

	return ioctl(G.ctl, req, &v) ? -errno : 0;
}

/*
 * ADD_DEV, the memory file mapped and given to the back end, the
 * eventfds bound.  -ENOSPC/-EBUSY: no room yet (spans of an earlier
 * offer the board has not let go of): tried again later.
 */
static int offer(struct pv_dev *d)
{
	struct pcinet_vhost_dev *v = &d->dev;
	unsigned int q;
	char spans[96];
	int err;

	memset(v, 0, sizeof(*v));
	v->device_id = d->kind == PV_BLK ? VIO_BLK_ID : VIO_FS_ID;
	v->features = d->offer;
	v->nr_vq = d->nr_vq;
	v->config_len = d->cfg_len;
	v->out_pool_size = d->pool;
	v->in_pool_size = d->pool;
	for (q = 0; q < d->nr_vq; q++)
		v->vq[q].num_max = PV_NUM;
	memcpy(v->config, d->config, d->cfg_len);
	if (ioctl(G.ctl, PCINET_VHOST_ADD_DEV, v))
		return -errno;
	d->state = PV_OFFERED;
	d->mem_fd = ioctl(G.ctl, PCINET_VHOST_GET_MEM_FD, &v->slot);
	if (d->mem_fd < 0) {
		err = -errno;
		goto fail;
	}
	d->dev_map = map_span(d->mem_fd, v->dev_span_off, v->dev_span_size);
	d->drv_map = map_span(d->mem_fd, v->drv_span_off, v->drv_span_size);
	err = -ENOMEM;
	if (!d->dev_map || !d->drv_map)
		goto fail;
	for (q = 0; q < d->nr_vq; q++) {
		d->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		d->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		err = -errno;
		if (d->kick[q] < 0 || d->call[q] < 0)
			goto fail;
		err = bind_fd(PCINET_VHOST_SET_KICK, v->slot, q, d->kick[q]);
		if (!err)
			err = bind_fd(PCINET_VHOST_SET_CALL, v->slot, q, d->call[q]);
		if (err)
			goto fail;
	}
	err = be_mem_table(d);
	if (err)
		goto fail;
	d->drv_gen = 0;
	d->answered = false;
	d->feat_ok = false;
	snprintf(spans, sizeof(spans), "spans 0x%llx+0x%llx 0x%llx+0x%llx",
		 (unsigned long long)v->dev_span_off,
		 (unsigned long long)v->dev_span_size,
		 (unsigned long long)v->drv_span_off,
		 (unsigned long long)v->drv_span_size);
	pv_log(d, "offered: slot %u, dev_gen 0x%08x, features 0x%llx, %u queue%s, %s",
	       v->slot, v->dev_gen, (unsigned long long)v->features, d->nr_vq,
	       d->nr_vq > 1 ? "s" : "", spans);
	return 0;
fail:
	offer_drop(d, true);
	return err;
}

/* ----- the driver's session ----- */

/*
 * Our own touches of a device's spans: the used rings' idx read in a
 * drain, the used rings zeroed at DRIVER_OK.  The spans are the kernel's
 * memory file, whose pages are revoked when the link goes (the PCI
 * device unbound on this side): a touch then faults SIGBUS, which can
 * come before the loop sees the control file's hang-up.  So each touch
 * runs guarded: map_sigbus() jumps back into it, and it answers -EFAULT
 * (the caller drops the back end; link_gone() follows from the loop).
 * A SIGBUS anywhere else is not ours to hide: the default action again,
 * and the fault repeats when the handler returns.  The signal fences
 * keep the compiler from moving the touch out of the guarded stretch.
 */
static sigjmp_buf map_jmp;
static int map_guarded;	/* __atomic: shared with map_sigbus() */

static void map_sigbus(int sig)
{
	if (__atomic_load_n(&map_guarded, __ATOMIC_RELAXED)) {
		__atomic_store_n(&map_guarded, 0, __ATOMIC_RELAXED);
		siglongjmp(map_jmp, 1);
	}
	signal(sig, SIG_DFL);
}

/*
 * The one guarded touch: the 16-bit word at @p into *@idx, or (@idx NULL)
 * @len bytes at @p zeroed.  -EFAULT: the span is gone.
 */
static int span_touch(void *p, size_t len, uint16_t *idx)
{
	if (sigsetjmp(map_jmp, 1))
		return -EFAULT;
	__atomic_store_n(&map_guarded, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (idx)
		*idx = le16toh(__atomic_load_n((uint16_t *)p, __ATOMIC_RELAXED));
	else
		memset(p, 0, len);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&map_guarded, 0, __ATOMIC_RELAXED);
	return 0;
}

/*
 * The used ring's idx of queue @q, as the back end last wrote it, into
 * @idx (only the index is read: no entry behind it, so no barrier pairs
 * with the back end's before its store of idx).  The ring is inside the
 * drv span (checked by rings_start() before the ring ran).  -EFAULT: the
 * span is gone.
 */
static int used_idx(const struct pv_dev *d, unsigned int q, uint16_t *idx)
{
	return span_touch(d->drv_map +
			  (d->dev.vq[q].used_off - d->dev.drv_span_off) + 2,
			  sizeof(*idx), idx);
}

/* @len bytes of a span zeroed at @p; -EFAULT: the span is gone. */
static int span_zero(uint8_t *p, size_t len)
{
	return span_touch(p, len, NULL);
}

/*
 * After GET_VRING_BASE: has the back end completed every request it
 * took?  libvhost-user answers GET_VRING_BASE at once and
 * qemu-storage-daemon's requests under way go on, each pushed into the
 * used ring when it completes, whether the ring still runs or not.
 * d->base[q] is the number of requests the back end took from queue q
 * (the ring started at 0, its used ring zeroed by rings_start()), so the
 * used idx reaches it once every one completed: only then is the reset
 * answered or a new driver's session started, so no completion of this
 * session lands in the next one's used ring (design.md, virtio open
 * question 11).  pcinet-peer does the same (its ring_drain()).
 *
 * Not a wait: called from the poll loop (drv_step()) until it says
 * done, so that other devices' resets and requests go on meanwhile.
 * Returns 0 (all completed), -EAGAIN (some left, before the deadline),
 * -ETIMEDOUT (some left at d->drain_end), -EIO if the counts make no
 * sense (the used ring is in the window: the board may have written it;
 * or the back end lies), -EFAULT if the span is gone (the link went):
 * the caller then kills the back end (be_abandon()), whose requests die
 * with it.
 */
static int drain_poll(struct pv_dev *d)
{
	unsigned int q, left = 0;
	uint16_t l, u;

	for (q = 0; q < d->nr_vq; q++) {
		if (used_idx(d, q, &u)) {
			pv_log(d, "queue %u: the used ring is gone (the link?)", q);
			return -EFAULT;
		}
		l = (uint16_t)d->base[q] - u;
		if (l > d->num[q]) {
			pv_log(d, "queue %u: %u taken, used idx %u: the used ring makes no sense",
			       q, d->base[q], u);
			return -EIO;
		}
		left += l;
	}
	if (!left)
		return 0;
	if (now_ms() < d->drain_end)
		return -EAGAIN;
	pv_log(d, "%u request(s) not completed in %u ms", left, PV_DRAIN_MS);
	return -ETIMEDOUT;
}

/* The socket's receive timeout: a reply to wait for at most @ms. */
static void vu_timeout(struct pv_dev *d, uint64_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 + 1000 };

	if (d->vu.sock >= 0)
		setsockopt(d->vu.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/*
 * Stop what the back end does for the driver (status 0, FAILED, a new
 * driver): its rings stopped within PV_STOP_MS for all queues, then the
 * requests it still had waited for, from the poll loop (drain_poll()).
 * Returns 0 when the back end touches the rings no more (stopped and
 * drained, or killed: d->stale then says why it must be replaced), or
 * -EINPROGRESS while it drains (d->draining; drv_step() goes on).
 */
static int drain_start(struct pv_dev *d)
{
	uint64_t t0 = now_ms(), end = t0 + PV_STOP_MS, now;
	unsigned int q, left = 0;
	int err = 0;
	uint16_t u;

	d->feat_ok = false;
	if (!d->running)
		return 0;
	d->running = false;
	for (q = 0; q < d->nr_vq && !err; q++) {
		now = now_ms();
		err = -ETIMEDOUT;
		if (now >= end)
			break;
		vu_timeout(d, end - now);
		err = vu_stop_vring(&d->vu, q, &d->base[q]);
		if (!err)
			err = used_idx(d, q, &u);
		if (!err)
			left += (uint16_t)d->base[q] - u;
	}
	vu_timeout(d, PV_TIMEOUT_MS);
	if (err) {
		pv_log(d, "stopping the back end's rings: %s", strerror(-err));
		be_abandon(d, "it did not stop its rings");
		return 0;
	}
	d->drain_t0 = now_ms();
	d->drain_end = d->drain_t0 + PV_DRAIN_MS;
	err = drain_poll(d);
	if (err == -EAGAIN) {
		pv_log(d, "rings stopped with %u request(s) still in the back end: waiting",
		       left);
		d->draining = true;
		return -EINPROGRESS;
	}
	if (err) {
		be_abandon(d, err == -EFAULT ? "its memory is gone" :
			   "its rings hold requests");
		return 0;
	}
	pv_log(d, "rings stopped");
	return 0;
}

/*
 * DRIVER_OK: the back end's rings on the device rings.  The used rings
 * are ours to write: zeroed first (libvhost-user reads their idx).
 */
static int rings_start(struct pv_dev *d, const struct pcinet_vhost_drv *s)
{
	const struct pcinet_vhost_dev *v = &d->dev;
	struct vu_vring_cfg c;
	unsigned int q, num;
	uint64_t one = 1;
	int err;

	for (q = 0; q < d->nr_vq; q++) {
		num = s->vq[q].num;
		if (!s->vq[q].ready || num < 1 || num > PV_NUM ||
		    (num & (num - 1))) {
			pv_log(d, "queue %u: bad num %u or not ready", q, num);
			return -EINVAL;
		}
		d->num[q] = num;
	}
	for (q = 0; q < d->nr_vq; q++) {
		if (v->vq[q].used_off < v->drv_span_off ||
		    v->vq[q].used_off - v->drv_span_off + USED_BYTES >
		    v->drv_span_size)
			return -ERANGE;
	}
	for (q = 0; q < d->nr_vq; q++) {
		num = s->vq[q].num;
		err = span_zero(d->drv_map + (v->vq[q].used_off - v->drv_span_off),
				USED_BYTES);
		if (err)
			return err;
		c = (struct vu_vring_cfg){
			.num = num,
			.desc_gpa = v->vq[q].desc_off,
			.avail_gpa = v->vq[q].avail_off,
			.used_gpa = v->vq[q].used_off,
			.base = 0,
			.kick_fd = d->kick[q],
			.call_fd = d->call[q],
		};
		err = vu_start_vring(&d->vu, q, &c);
		if (err)
			return err;
		d->running = true;
		/* a kick consumed by an earlier session is not lost */
		if (write(d->kick[q], &one, sizeof(one)) != sizeof(one))
			pv_log(d, "kick eventfd: %s", strerror(errno));
	}
	d->used = true;
	pv_log(d, "running: %u queue%s of %u", d->nr_vq, d->nr_vq > 1 ? "s" : "",
	       s->vq[0].num);
	return 0;
}

static int answer_status(struct pv_dev *d, uint32_t seq, uint32_t status)
{
	struct pcinet_vhost_status a = {
		.slot = d->dev.slot, .drv_gen = d->drv_gen,
		.status_seq = seq, .status = status,
	};

	if (ioctl(G.ctl, PCINET_VHOST_SET_STATUS, &a))
		return -errno;
	d->seq = seq;
	d->answered = true;
	return 0;
}

/* The negotiation table (docs/design.md, "Negotiation"), for @s. */
static int answer(struct pv_dev *d, const struct pcinet_vhost_drv *s)
{
	uint32_t st = s->status & 0xff, ans;
	uint64_t f = s->features;
	int err = 0;

	if (!st || (st & S_FAILED)) {
		err = drain_start(d);
		ans = st;
	} else {
		ans = st & (S_ACKNOWLEDGE | S_DRIVER);
		if ((st & S_FEATURES_OK) && !d->feat_ok) {
			if ((f & ~d->offer) || !(f & F_VERSION_1)) {
				pv_log(d, "refusing features 0x%llx (offered 0x%llx)",
				       (unsigned long long)f,
				       (unsigned long long)d->offer);
			} else {
				/* the bits we added ourselves are not the back end's */
				err = vu_set_features(&d->vu, (f & d->be_features) |
						      (d->be_features &
						       VF(VU_F_PROTOCOL_FEATURES)));
				d->feat_ok = !err;
			}
		}
		if ((st & S_FEATURES_OK) && d->feat_ok)
			ans |= S_FEATURES_OK;
		if ((st & S_DRIVER_OK) && d->feat_ok && !err) {
			if (!d->running) {
				err = rings_start(d, s);
				if (err == -EINVAL)
					err = 0;	/* the driver's fault */
			}
			ans |= d->running ? S_DRIVER_OK : S_NEEDS_RESET;
		}
	}
	if (err)
		return err;
	err = answer_status(d, s->status_seq, ans);
	if (!err && (st != ans || !st || (st & S_DRIVER_OK)))
		pv_log(d, "status 0x%x answered 0x%x (drv_gen 0x%08x, seq %u)",
		       st, ans, d->drv_gen, s->status_seq);
	return err;
}

/*
 * A back end that was killed for the reset (be_abandon()) is replaced
 * once the reset is answered, or before a status that needs it.
 */
static int renew_stale(struct pv_dev *d)
{
	return d->stale ? be_renew(d, d->stale) : 0;
}

/*
 * One look at the driver state of an offered device.  A reset whose
 * back end still drains is looked at again on the next turn of the
 * loop (drain_poll()), the other devices served meanwhile.
 */
static void drv_step(struct pv_dev *d)
{
	struct pcinet_vhost_drv s;
	uint32_t drv_gen;
	int err;

	if (d->draining) {
		err = drain_poll(d);
		if (err == -EAGAIN)
			return;
		d->draining = false;
		if (err)
			be_abandon(d, err == -EFAULT ? "its memory is gone" :
				   "its rings hold requests");
		else
			pv_log(d, "rings stopped: the back end completed them in %llu ms",
			       (unsigned long long)(now_ms() - d->drain_t0));
	}
	memset(&s, 0, sizeof(s));
	s.slot = d->dev.slot;
	if (ioctl(G.ctl, PCINET_VHOST_GET_DRV, &s)) {
		if (errno != ENODEV)
			pv_log(d, "GET_DRV: %s", strerror(errno));
		return;
	}
	drv_gen = s.valid ? s.drv_gen : 0;
	if (drv_gen != d->drv_gen) {
		if (drain_start(d) == -EINPROGRESS)
			return;
		if (d->drv_gen)
			pv_log(d, "driver 0x%08x gone%s", d->drv_gen,
			       drv_gen ? ", a new one registered" : "");
		else
			pv_log(d, "driver 0x%08x registered", drv_gen);
		d->drv_gen = drv_gen;
		d->answered = false;
		if (drv_gen && s.error)
			pv_log(d, "driver reports error %u", s.error);
		/* virtiofsd serves one FUSE session: a new one for the next */
		if (d->used && d->kind == PV_FS && !d->stale)
			be_abandon(d, "virtiofsd serves one driver session");
	}
	if (!drv_gen && s.error) {
		/*
		 * The board dropped or refused this dev_gen (wedged queue,
		 * protocol error, no answer in time) and registers it no
		 * more: a fresh back end and a new offer, as after a crash.
		 */
		pv_log(d, "the board dropped dev_gen 0x%08x (error %u): offering the device again",
		       d->dev.dev_gen, s.error);
		be_lost(d, "dropped by the board");
		return;
	}
	if (!drv_gen || (d->answered && s.status_seq == d->seq)) {
		renew_stale(d);
		return;
	}
	/* a reset is answered first, anything else needs the back end */
	if ((s.status & 0xff) && !(s.status & S_FAILED) && renew_stale(d))
		return;
	err = answer(d, &s);
	if (err == -ENODEV || err == -EINPROGRESS)
		return;
	/* once, on a fresh back end, if the board had no ring running */
	if (err && !be_renew(d, "a vhost-user request failed"))
		err = answer(d, &s);
	if (err && err != -ENODEV && d->state == PV_OFFERED)
		be_lost(d, "a vhost-user request failed");
	else if (!err)
		renew_stale(d);
}

/* ----- devices, the control file ----- */

static void dev_step(struct pv_dev *d)
{
	uint64_t t = now_ms();
	int err;

	if (d->state == PV_DOWN) {
		if (t < d->retry_ms)
			return;
		err = be_start(d);
		if (err) {
			pv_log(d, "back end failed to start: %s", strerror(-err));
			be_kill(d);
			d->retry_ms = now_ms() + PV_RETRY_MS;
			return;
		}
		d->state = PV_READY;
		d->room_ms = 0;
	}
	if (d->state == PV_READY && G.ctl >= 0 && t >= d->room_ms) {
		err = offer(d);
		if (err == -ENOSPC || err == -EBUSY) {
			if (!d->room_ms)
				pv_log(d, "no room to offer it yet: %s",
				       strerror(-err));
			d->room_ms = t + 200;
			return;
		}
		d->room_ms = 0;
		if (err == -ENODEV)
			return;
		if (err) {
			be_lost(d, "cannot offer it");
			return;
		}
	}
	/*
	 * Serving the board's rings and gone (vu_panic() closes the
	 * socket): withdrawn now, not after the board's own timeout.  Not
	 * while it drains: a panic then is drv_step()'s (be_renew()).
	 */
	if (d->state == PV_OFFERED && d->running && !d->draining &&
	    vu_hung_up(&d->vu)) {
		be_lost(d, "it closed its socket");
		return;
	}
	if (d->state == PV_OFFERED && G.ctl >= 0)
		drv_step(d);
}

/* Is a device's reset waiting for its back end (drain_poll())? */
static bool draining(void)
{
	unsigned int i;

	for (i = 0; i < PV_MAX_DEV; i++)
		if (G.dev[i].live && G.dev[i].draining)
			return true;
	return false;
}

static void reap(void)
{
	unsigned int i;
	int st;

	for (i = 0; i < PV_MAX_DEV; i++) {
		struct pv_dev *d = &G.dev[i];

		if (!d->live || d->pid <= 0 ||
		    waitpid(d->pid, &st, WNOHANG) != d->pid)
			continue;
		d->pid = -1;
		if (d->draining) {
			/* its requests died with it: the reset is answered first */
			vu_close(&d->vu);
			d->draining = false;
			d->stale = "it exited while its rings drained";
			pv_log(d, "back end exited while its rings drained");
			continue;
		}
		be_renew(d, WIFSIGNALED(st) ? "killed by a signal" :
			 "it exited");
	}
}

static int ctl_open(void)
{
	struct pcinet_vhost_info info;
	int fd, err;

	fd = open(G.cdev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (!G.waiting)
			pv_log(NULL, "waiting for %s: %s", G.cdev,
			       strerror(-err));
		G.waiting = true;
		return err;
	}
	memset(&info, 0, sizeof(info));
	if (ioctl(fd, PCINET_VHOST_GET_INFO, &info) ||
	    info.abi_version != PCINET_VHOST_ABI_VERSION) {
		pv_log(NULL, "%s: GET_INFO failed or ABI %u", G.cdev,
		       info.abi_version);
		close(fd);
		return -EPROTO;
	}
	G.waiting = false;
	G.ctl = fd;
	pv_log(NULL, "%s open: side %u, dev region 0x%llx+0x%llx, %s 0x%llx+0x%llx, peer %s",
	       G.cdev, info.side, (unsigned long long)info.dev_off,
	       (unsigned long long)info.dev_size, "peer's drv region",
	       (unsigned long long)info.drv_off,
	       (unsigned long long)info.drv_size,
	       info.flags & PCINET_VHOST_F_PEER_VIRTIO ? "speaks virtio" :
	       info.flags & PCINET_VHOST_F_PEER_ALIVE ? "alive" : "absent");
	return 0;
}

/* The link went away: every mapping is revoked, the back ends too. */
static void link_gone(void)
{
	unsigned int i;

	pv_log(NULL, "%s: the link is gone", G.cdev);
	for (i = 0; i < PV_MAX_DEV; i++) {
		struct pv_dev *d = &G.dev[i];

		if (!d->live || d->state != PV_OFFERED)
			continue;
		offer_drop(d, false);
		/* its memory is gone: a fresh back end for the next offer */
		be_kill(d);
		d->state = PV_DOWN;
		d->retry_ms = 0;
	}
	close_fd(&G.ctl);
}

/* ----- the device set: the command line, the config file ----- */

static void print_usage(void)
{
	fprintf(stderr,
		"usage: pcinet-vhost --link pcinetN [--blk IMAGE]... [--fs DIR:TAG]...\n"
		"                    [--config FILE]\n"
		"  FILE: a device a line, \"blk IMAGE\" or \"fs DIR TAG\" (absolute\n"
		"        paths; # starts a comment); SIGHUP reads it again\n"
		"  PCINET_QSD, PCINET_VIRTIOFSD: the back ends' binaries\n");
	exit(2);
}

static unsigned int dev_count(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < PV_MAX_DEV; i++)
		n += G.dev[i].live;
	return n;
}

/*
 * The image of a --blk device, opened once, read-write, not through a
 * symlink (O_NOFOLLOW), a regular file or a block device: the fd, or -1
 * (@why says why).  Its back ends inherit it (be_exec()).
 */
static int img_open(const char *path, char *why, size_t len)
{
	struct stat st;
	int fd;

	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "%s: %s", path, errno == ELOOP ?
			 "a symlink (name the image itself)" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
		snprintf(why, len, "%s: not a regular file or a block device", path);
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether @s can be served: the image read-write, the directory there. */
static int spec_check(const struct pv_spec *s, char *why, size_t len)
{
	struct stat st;

	int fd;

	if (s->kind == PV_BLK) {
		fd = img_open(s->path, why, len);
		if (fd < 0)
			return -1;
		close(fd);
		return 0;
	}
	if (stat(s->path, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(why, len, "%s: not a directory", s->path);
		return -1;
	}
	return 0;
}

static bool spec_same(const struct pv_spec *s, const struct pv_dev *d)
{
	return d->live && d->kind == s->kind && !strcmp(d->path, s->path) &&
	       (s->kind == PV_BLK || !strcmp(d->tag, s->tag));
}

/* Another device on the same image, or with the same tag: not both. */
static bool spec_clash(const struct pv_spec *s, const struct pv_spec *o)
{
	if (s->kind != o->kind)
		return false;
	return s->kind == PV_BLK ? !strcmp(s->path, o->path) :
	       !strcmp(s->tag, o->tag);
}

static struct pv_dev *dev_clash(const struct pv_spec *s)
{
	struct pv_spec o;
	unsigned int i;

	for (i = 0; i < PV_MAX_DEV; i++) {
		struct pv_dev *d = &G.dev[i];

		if (!d->live)
			continue;
		o.kind = d->kind;
		memcpy(o.path, d->path, sizeof(o.path));
		memcpy(o.tag, d->tag, sizeof(o.tag));
		if (spec_clash(s, &o))
			return d;
	}
	return NULL;
}

/*
 * A new device in a free entry of G.dev, named after the lowest free
 * number of its kind (its socket too), its image opened.  It starts at
 * the next dev_step().  NULL: all PV_MAX_DEV entries taken, or the
 * image did not open (@why says which).
 */
static struct pv_dev *dev_add(const struct pv_spec *s, bool from_cfg,
			      char *why, size_t len)
{
	char name[sizeof(G.dev[0].name)], dir[sizeof(G.dir)];
	const char *kind = s->kind == PV_BLK ? "blk" : "fs";
	struct pv_dev *d = NULL;
	unsigned int i, n, q;

	int img_fd = -1;

	for (i = 0; i < PV_MAX_DEV && !d; i++)
		if (!G.dev[i].live)
			d = &G.dev[i];
	if (!d) {
		snprintf(why, len, "every slot taken (more than %u devices)", PV_MAX_DEV);
		return NULL;
	}
	if (s->kind == PV_BLK) {
		img_fd = img_open(s->path, why, len);
		if (img_fd < 0)
			return NULL;
	}
	/* at most PV_MAX_DEV live devices: a free number below that */
	for (n = 0; n < PV_MAX_DEV; n++) {
		snprintf(name, sizeof(name), "%s%u", kind, n);
		for (i = 0; i < PV_MAX_DEV; i++)
			if (G.dev[i].live && !strcmp(G.dev[i].name, name))
				break;
		if (i == PV_MAX_DEV)
			break;
	}
	memset(d, 0, sizeof(*d));
	d->live = true;
	d->from_cfg = from_cfg;
	d->kind = s->kind;
	memcpy(d->name, name, sizeof(d->name));
	memcpy(d->path, s->path, sizeof(d->path));
	memcpy(d->tag, s->tag, sizeof(d->tag));
	d->img_fd = img_fd;
	/* a copy: the compiler cannot tell G's members apart */
	memcpy(dir, G.dir, sizeof(dir));
	snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", dir, name);
	d->pid = -1;
	d->vu.sock = -1;
	d->mem_fd = -1;
	for (q = 0; q < PCINET_VHOST_MAX_VQ; q++) {
		d->kick[q] = -1;
		d->call[q] = -1;
	}
	if (s->kind == PV_BLK) {
		d->nr_vq = 1;
		d->pool = PV_BLK_POOL;
	} else {
		d->nr_vq = 2;	/* hiprio, one request queue */
		d->pool = PV_FS_POOL;
	}
	pv_log(d, "added: %s%s%s%s", s->kind == PV_BLK ? "blk " : "fs ",
	       d->path, s->kind == PV_FS ? " tag " : "", d->tag);
	return d;
}

/*
 * The device withdrawn (DEL_DEV: the board sees it go, in-flight I/O
 * fails there), its back end stopped, its entry free.  @why: logged.
 */
static void dev_remove(struct pv_dev *d, const char *why)
{
	if (why)
		pv_log(d, "removing it: %s", why);
	offer_drop(d, true);
	be_kill(d);
	unlink(d->sock);
	close_fd(&d->img_fd);
	d->live = false;
	if (why)
		pv_log(d, "removed");
}

/* --blk IMAGE, --fs DIR:TAG: wrong ones end the program. */
static void arg_dev(enum pv_kind kind, const char *arg)
{
	struct pv_spec s = { .kind = kind };
	const char *colon = strrchr(arg, ':');
	size_t len = strlen(arg);
	char why[PV_PATH_LEN + 64];

	if (kind == PV_FS) {
		if (!colon || colon == arg || !colon[1] ||
		    strlen(colon + 1) > FS_TAG_LEN)
			print_usage();
		len = (size_t)(colon - arg);
		memcpy(s.tag, colon + 1, strlen(colon + 1) + 1);
	}
	if (len >= sizeof(s.path)) {
		fprintf(stderr, "pcinet-vhost: %s: path too long\n", arg);
		exit(1);
	}
	memcpy(s.path, arg, len);
	s.path[len] = 0;
	if (spec_check(&s, why, sizeof(why))) {
		fprintf(stderr, "pcinet-vhost: %s\n", why);
		exit(1);
	}
	if (dev_clash(&s)) {
		fprintf(stderr, "pcinet-vhost: %s given twice\n", arg);
		exit(1);
	}
	if (!dev_add(&s, false, why, sizeof(why))) {
		fprintf(stderr, "pcinet-vhost: %s\n", why);
		exit(1);
	}
}

/*
 * One line of the config file into @s: 1 a device, 0 nothing (blank, a
 * comment), -1 wrong (@why says what).
 */
static int cfg_line(char *line, struct pv_spec *s, char *why, size_t len)
{
	char *save, *kind, *path, *tag, *extra;

	kind = strtok_r(line, " \t\r\n", &save);
	if (!kind || kind[0] == '#')
		return 0;
	path = strtok_r(NULL, " \t\r\n", &save);
	tag = strtok_r(NULL, " \t\r\n", &save);
	extra = strtok_r(NULL, " \t\r\n", &save);
	if (extra && extra[0] == '#')
		extra = NULL;
	if (tag && tag[0] == '#') {
		tag = NULL;
		extra = NULL;
	}
	memset(s, 0, sizeof(*s));
	if (!strcmp(kind, "blk") && path && !tag) {
		s->kind = PV_BLK;
	} else if (!strcmp(kind, "fs") && path && tag && !extra) {
		s->kind = PV_FS;
		if (strlen(tag) > FS_TAG_LEN) {
			snprintf(why, len, "tag longer than %u bytes",
				 FS_TAG_LEN);
			return -1;
		}
		memcpy(s->tag, tag, strlen(tag) + 1);
	} else {
		snprintf(why, len, "want \"blk IMAGE\" or \"fs DIR TAG\"");
		return -1;
	}
	if (path[0] != '/' || strlen(path) >= sizeof(s->path)) {
		snprintf(why, len, "want an absolute path shorter than %u bytes",
			 PV_PATH_LEN);
		return -1;
	}
	memcpy(s->path, path, strlen(path) + 1);
	return spec_check(s, why, len) ? -1 : 1;
}

/*
 * The config file's devices into @set (at most PV_MAX_DEV, the slots
 * of a link); a wrong line, one more than that or a second one on the
 * same image or tag is reported and left out; @set has room for
 * PV_MAX_DEV + 1 (the last one read into, never kept).  Returns how many, or -1
 * if the file cannot be read; *@bad: the lines left out.
 */
static int cfg_read(struct pv_spec *set, unsigned int *bad)
{
	char line[PV_LINE_LEN + 2], why[PV_PATH_LEN + 64];
	unsigned int n = 0, nr, i;
	bool cut = false;
	FILE *f;
	int c;

	*bad = 0;
	f = fopen(G.config, "re");
	if (!f) {
		pv_log(NULL, "%s: %s", G.config, strerror(errno));
		return -1;
	}
	for (nr = 1; nr <= PV_CFG_LINES && fgets(line, sizeof(line), f); nr++) {
		/* a line longer than any good one: skipped to its end */
		if (!strchr(line, '\n') && !feof(f)) {
			cut = true;
			do
				c = fgetc(f);
			while (c != '\n' && c != EOF);
		}
		if (cut) {
			cut = false;
			pv_log(NULL, "%s:%u: skipped: longer than %u bytes",
			       G.config, nr, PV_LINE_LEN);
			(*bad)++;
			continue;
		}
		c = cfg_line(line, &set[n], why, sizeof(why));
		if (!c)
			continue;
		if (c < 0) {
			pv_log(NULL, "%s:%u: skipped: %s", G.config, nr, why);
			(*bad)++;
			continue;
		}
		for (i = 0; i < n; i++)
			if (spec_clash(&set[n], &set[i]))
				break;
		if (i < n || n == PV_MAX_DEV) {
			pv_log(NULL, "%s:%u: skipped: %s", G.config, nr,
			       i < n ? "the same image or tag as an earlier line" :
			       "more devices than a link has slots");
			(*bad)++;
			continue;
		}
		n++;
	}
	if (nr > PV_CFG_LINES && !feof(f)) {
		pv_log(NULL, "%s: only its first %u lines read", G.config,
		       PV_CFG_LINES);
		(*bad)++;
	}
	fclose(f);
	return (int)n;
}

/*
 * The config file (again): the devices it no longer lists withdrawn
 * first (their slots free again), then the new ones added (they start
 * and are offered at the next dev_step(); an offer the board still
 * holds the spans of waits in dev_step() as ever).  A device listed as
 * before is not touched: its back end, its offer and its rings run on.
 * @strict (the start): any wrong line ends the program.  Unreadable on
 * a reload: nothing changes.
 */
static void cfg_reload(bool strict)
{
	struct pv_spec set[PV_MAX_DEV + 1];
	char why[PV_PATH_LEN + 64];
	unsigned int i, j, bad;
	struct pv_dev *d;
	int n;

	n = cfg_read(set, &bad);
	if (strict && (n < 0 || bad))
		exit(1);
	if (n < 0) {
		pv_log(NULL, "%s: not read: the devices stay as they are",
		       G.config);
		return;
	}
	for (i = 0; i < PV_MAX_DEV; i++) {
		d = &G.dev[i];
		if (!d->live || !d->from_cfg)
			continue;
		for (j = 0; j < (unsigned int)n; j++)
			if (spec_same(&set[j], d))
				break;
		if (j == (unsigned int)n)
			dev_remove(d, "no longer in the config file");
	}
	for (j = 0; j < (unsigned int)n; j++) {
		d = dev_clash(&set[j]);
		if (d && spec_same(&set[j], d) && d->from_cfg)
			continue;	/* unchanged */
		if (d) {
			pv_log(d, "%s: kept; %s %s skipped", d->from_cfg ?
			       "the same image or tag" : "given on the command line",
			       set[j].kind == PV_BLK ? "blk" : "fs", set[j].path);
			bad++;
			continue;
		}
		if (!dev_add(&set[j], true, why, sizeof(why))) {
			pv_log(NULL, "%s %s skipped: %s",
			       set[j].kind == PV_BLK ? "blk" : "fs", set[j].path, why);
			bad++;
		}
	}
	if (strict && bad)
		exit(1);
	pv_log(NULL, "%s read: %u device%s now, %u line%s skipped", G.config,
	       dev_count(), dev_count() == 1 ? "" : "s", bad, bad == 1 ? "" : "s");
}

static void shutdown_all(void)
{
	unsigned int i;

	for (i = 0; i < PV_MAX_DEV; i++)
		if (G.dev[i].live)
			dev_remove(&G.dev[i], NULL);
	close_fd(&G.ctl);
	rmdir(G.dir);
}

/* whatever way the program ends, no empty directory left in /tmp */
static void dir_remove(void)
{
	rmdir(G.dir);
}

int main(int argc, char **argv)
{
	struct pollfd pfd[2];
	struct signalfd_siginfo si;
	unsigned int i, link;
	sigset_t mask;
	char *end;
	int n;

	/* the back ends' sockets' directory, before any device is added */
	snprintf(G.dir, sizeof(G.dir), "/tmp/pcinet-vhost.XXXXXX");
	if (!mkdtemp(G.dir)) {
		perror("pcinet-vhost: mkdtemp");
		return 1;
	}
	atexit(dir_remove);
	for (n = 1; n < argc; n++) {
		if (!strcmp(argv[n], "--link") && n + 1 < argc)
			G.link = argv[++n];
		else if (!strcmp(argv[n], "--blk") && n + 1 < argc)
			arg_dev(PV_BLK, argv[++n]);
		else if (!strcmp(argv[n], "--fs") && n + 1 < argc)
			arg_dev(PV_FS, argv[++n]);
		else if (!strcmp(argv[n], "--config") && n + 1 < argc && !G.config)
			G.config = argv[++n];
		else
			print_usage();
	}
	if (!G.link || strncmp(G.link, "pcinet", 6) ||
	    (!dev_count() && !G.config))
		print_usage();
	link = (unsigned int)strtoul(G.link + 6, &end, 10);
	if (end == G.link + 6 || *end)
		print_usage();
	if (G.config)
		cfg_reload(true);
	snprintf(G.cdev, sizeof(G.cdev), "/dev/pcinet-vhost%u", link);
	G.qsd = getenv("PCINET_QSD");
	if (!G.qsd || !*G.qsd)
		G.qsd = "qemu-storage-daemon";
	G.virtiofsd = getenv("PCINET_VIRTIOFSD");
	if (!G.virtiofsd || !*G.virtiofsd)
		G.virtiofsd = "/usr/lib/qemu/virtiofsd";

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGBUS, map_sigbus);
	G.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (G.sigfd < 0) {
		perror("pcinet-vhost: signalfd");
		return 1;
	}
	pv_log(NULL, "serving %u device%s on %s%s%s", dev_count(),
	       dev_count() == 1 ? "" : "s", G.cdev,
	       G.config ? ", SIGHUP reads again " : "",
	       G.config ? G.config : "");

	for (;;) {
		if (G.ctl < 0)
			ctl_open();
		for (i = 0; i < PV_MAX_DEV; i++)
			if (G.dev[i].live)
				dev_step(&G.dev[i]);
		pfd[0] = (struct pollfd){ .fd = G.sigfd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = G.ctl, .events = POLLIN };
		n = poll(pfd, G.ctl >= 0 ? 2 : 1, G.ctl < 0 ? 500 :
			 draining() ? PV_DRAIN_POLL_MS : PV_TICK_MS);
		if (n < 0 && errno != EINTR) {
			perror("pcinet-vhost: poll");
			break;
		}
		if (n > 0 && (pfd[0].revents & POLLIN)) {
			bool term = false, hup = false;

			while (read(G.sigfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP)
					hup = true;
				else if (si.ssi_signo != SIGCHLD)
					term = true;
			}
			if (term) {
				pv_log(NULL, "stopping");
				shutdown_all();
				pv_log(NULL, "stopped");
				return 0;
			}
			reap();
			/* between two steps: no negotiation is half done */
			if (hup && G.config) {
				pv_log(NULL, "SIGHUP: reading %s", G.config);
				cfg_reload(false);
			} else if (hup) {
				pv_log(NULL, "SIGHUP ignored: no --config");
			}
		}
		if (n > 0 && G.ctl >= 0 && (pfd[1].revents & (POLLHUP | POLLERR)))
			link_gone();
	}
	shutdown_all();
	return 1;
}
