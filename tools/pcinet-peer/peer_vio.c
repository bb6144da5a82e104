// SPDX-License-Identifier: GPL-2.0-only
/*
 * peer_vio - pcinet-peer as the device side D of the virtio channel.
 *
 * docs/design.md, "Virtio channel", is the protocol; this file follows
 * its device side for one virtio-blk device in slot 0:
 *
 *  - the back end is a stock qemu-storage-daemon (vhost-user-blk export)
 *    started on a private socket; we are its vhost-user front end
 *    (tools/pcinet-vhost/vu_frontend.c).  Its memory table is the
 *    window's memfd as two regions, the device's two spans, with guest
 *    physical address = window offset: it can reach nothing else;
 *  - the device is placed in our dev region (desc, avail, OUT pool) and
 *    the peer's drv region (used ring, IN pool), sized as under "Pool
 *    sizing" (size_max, seg_max clamped to the pools), described there
 *    (V1), and offered while the peer runs and sets PCINET_F_VIRTIO;
 *  - the negotiation table ("Device side ... on every change of a
 *    drvstate") runs on every virtio doorbell and every tick;
 *  - signalling: the back end's call eventfd is the fabric's eventfd
 *    that rings the peer's vector 3 (zero-copy: the back end rings the
 *    board itself); kicks are forwarded: we compare the queue's notify
 *    counter on every virtio doorbell and tick and signal the back end's
 *    kick eventfd when it moved.  Handing the back end our own vector-3
 *    eventfd instead would race with our own reads of it (a status
 *    change and a kick share the vector, and whoever reads the eventfd
 *    first takes the count): a kick we consumed would be lost for good,
 *    since libvhost-user never polls.
 *
 * Everything read from the window is the peer's: the driver state block
 * is copied out after the load-acquire of its status_seq (V4') and only
 * the copy is used; num is checked against what we placed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "peer_vio.h"
#include "vu_frontend.h"

/* virtio (1.x, 2.1 and 5.2) constants used here */
#define VIRTIO_S_ACKNOWLEDGE	1u
#define VIRTIO_S_DRIVER		2u
#define VIRTIO_S_DRIVER_OK	4u
#define VIRTIO_S_FEATURES_OK	8u
#define VIRTIO_S_NEEDS_RESET	0x40u
#define VIRTIO_S_FAILED		0x80u
#define VIRTIO_ID_BLOCK		2
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
#define BLK_F_DISCARD		VF(13)
#define BLK_F_WRITE_ZEROES	VF(14)
/* virtio_blk_config: size_max at 8, seg_max at 12; 60 bytes in QEMU 7.2 */
#define BLK_CFG_SIZE_MAX	8
#define BLK_CFG_SEG_MAX		12
#define BLK_CFG_LEN		60

/*
 * What we pass through from the back end: the ring bits the relay uses
 * and the block bits that need nothing from the transport.  Not
 * CONFIG_WCE (we do not replay config writes yet), not MQ (one queue),
 * never ACCESS_PLATFORM or vhost-user's own bits.
 */
#define OFFER_MASK	(F_VERSION_1 | F_INDIRECT_DESC | F_EVENT_IDX | \
			 BLK_F_SIZE_MAX | BLK_F_SEG_MAX | BLK_F_GEOMETRY | \
			 BLK_F_RO | BLK_F_BLK_SIZE | BLK_F_FLUSH | \
			 BLK_F_TOPOLOGY | BLK_F_DISCARD | BLK_F_WRITE_ZEROES)

#define PV_NUM		128		/* queue size offered (num_max) */
#define PV_POOL_MAX	(4U << 20)	/* each pool, "Pool sizing" */
#define PV_SEG_LIMIT	(64U << 10)	/* largest size_max we advertise */
#define PV_PAGE		4096U
#define PV_TIMEOUT_MS	2000		/* a vhost-user reply */
#define PV_START_MS	10000		/* the back end's socket to appear */
#define PV_RETRY_MS	1000		/* before starting it again */
#define PV_REOFFER_MS	1000		/* between offers the peer dropped */

enum pv_be { BE_DOWN, BE_STARTING, BE_READY };

static struct {
	const char *image;
	const char *qsd;
	char dir[64];
	char sock[96];
	pid_t pid;
	enum pv_be be;
	u64 be_since_ms;
	u64 retry_ms;
	struct vu_dev dev;
	u64 be_features;
	u8 config[BLK_CFG_LEN];
	u64 offer;
	int kick_fd;

	/* the window */
	u8 *win;
	int win_fd;
	bool usable;
	u64 dev_reg, drv_reg;		/* our dev region, the peer's drv region */
	u64 ds, us, span, pool;		/* spans (equal sizes), pool size */
	u32 inst;			/* ours: random, per run */

	/* the offer */
	struct pcinet_vio_devdesc desc;	/* what its slot must hold */
	u32 dev_gen;			/* 0: not offered */
	bool published;			/* written into the peer's drv region */
	bool zeroed;			/* its fixed part zeroed once */
	u32 config_gen;
	u32 board_inst;

	/* the driver's session */
	u32 drv_gen;
	bool answered;
	u32 seq;			/* status_seq answered */
	bool feat_ok;
	bool running;
	int run_peer;			/* the peer id whose eventfd the back end has */
	u32 notify;

	u64 kicks, answers, offers;

	/* --blk-fault: a broken device side, for the peer's fault tests */
	bool hide_feature;		/* no PCINET_F_VIRTIO, offer anyway */
	bool stale_used;		/* one stale used entry (rings_start()) */
	unsigned int sessions;		/* rings started */
	u64 reoffer_ms;			/* no new offer before */
} V = { .pid = -1, .kick_fd = -1, .win_fd = -1, .run_peer = -1 };

static __printf(1, 2) void pv_log(const char *fmt, ...)
{
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "%02ld:%02ld:%02ld.%03ld pcinet-peer: vio: ",
		(long)(ts.tv_sec / 3600 % 24), (long)(ts.tv_sec / 60 % 60),
		(long)(ts.tv_sec % 60), ts.tv_nsec / 1000000L);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static u64 pv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static u32 pv_random(void)
{
	u32 v = 0;

	while (!v)
		if (getrandom(&v, sizeof(v), 0) != sizeof(v))
			v = (u32)pv_now() * 2654435761U;
	return v;
}

void pvio_setup(const char *image)
{
	V.image = image;
}

bool pvio_enabled(void)
{
	return V.image;
}

/*
 * --blk-fault=KIND, for the peer's fault tests:
 *  no-feature: offer the device without setting PCINET_F_VIRTIO, as a
 *	peer would whose control block predates the virtio channel (the
 *	peer must not register it);
 *  stale-used: once, when the queue starts for a driver after an earlier
 *	one, put a used entry into the fresh used ring that no request of
 *	this session made (id num - 1), as a back end that completes a
 *	request after the reset was answered would (the peer must refuse
 *	it: an unplug, then a new offer).
 */
bool pvio_fault(const char *kind)
{
	if (!strcmp(kind, "no-feature"))
		V.hide_feature = true;
	else if (!strcmp(kind, "stale-used"))
		V.stale_used = true;
	else
		return false;
	return true;
}

u32 pvio_features(void)
{
	return V.image && V.usable && !V.hide_feature ? PCINET_F_VIRTIO : 0;
}

/* ----- the window: where the device lives ----- */

static struct pcinet_vio_rhdr *drv_rhdr(void)
{
	return (struct pcinet_vio_rhdr *)(V.win + V.drv_reg);
}

static struct pcinet_vio_devdesc *devdesc(void)
{
	return (struct pcinet_vio_devdesc *)(V.win + V.drv_reg + PCINET_CACHELINE);
}

static const struct pcinet_vio_rhdr *dev_rhdr(void)
{
	return (const struct pcinet_vio_rhdr *)(V.win + V.dev_reg);
}

static struct pcinet_vio_drvstate *drvstate(void)
{
	return (struct pcinet_vio_drvstate *)(V.win + V.dev_reg + PCINET_CACHELINE);
}

static void put32(__le32 *w, u32 v)
{
	WRITE_ONCE(*w, cpu_to_le32(v));
}

/*
 * One span per region, the first 64 KiB-aligned place after the fixed
 * part: the rings in its first PCINET_VIO_ALIGN bytes, the pool after
 * them.  Both regions get the same sizes (pools of equal size).
 */
static bool place(const struct pcinet_layout *lay, int side)
{
	const struct pcinet_vio_regions *own = &lay->vio[side];
	const struct pcinet_vio_regions *peer = &lay->vio[!side];
	u64 room;

	if (!lay->has_vio || !own->dev_size || !peer->drv_size)
		return false;
	room = own->dev_size < peer->drv_size ? own->dev_size : peer->drv_size;
	if (room < 3 * PCINET_VIO_ALIGN)
		return false;
	V.dev_reg = own->dev_off;
	V.drv_reg = peer->drv_off;
	V.pool = (room - 2 * PCINET_VIO_ALIGN) & ~(u64)(PCINET_VIO_ALIGN - 1);
	if (V.pool > PV_POOL_MAX)
		V.pool = PV_POOL_MAX;
	V.span = PCINET_VIO_ALIGN + V.pool;
	V.ds = V.dev_reg + PCINET_VIO_ALIGN;
	V.us = V.drv_reg + PCINET_VIO_ALIGN;
	static_assert(PCINET_VIO_FIXED_SIZE <= PCINET_VIO_ALIGN);
	static_assert(PCINET_VRING_DESC_BYTES(PV_NUM) + PCINET_VRING_AVAIL_BYTES(PV_NUM) <=
		      PCINET_VIO_ALIGN);
	static_assert(PCINET_VRING_USED_BYTES(PV_NUM) <= PCINET_VIO_ALIGN);
	return true;
}

/*
 * size_max and seg_max as "Pool sizing" says: size_max at most 64 KiB, a
 * multiple of 4 KiB; seg_max so that seg_max segments of size_max, the
 * header and a device table (first 4 KiB) fit the OUT pool, and the data
 * and the status byte the IN pool.
 */
static void clamp_config(void)
{
	u32 size_max = PV_SEG_LIMIT, seg_max, v;

	if (V.be_features & BLK_F_SIZE_MAX) {
		memcpy(&v, V.config + BLK_CFG_SIZE_MAX, 4);
		v = le32_to_cpu(v);
		if (v && v < size_max)
			size_max = v;
	}
	if (size_max > V.pool - PV_PAGE)
		size_max = V.pool - PV_PAGE;
	size_max &= ~(PV_PAGE - 1);
	if (!size_max)
		size_max = PV_PAGE;
	seg_max = (V.pool - PV_PAGE) / size_max;
	if (V.be_features & BLK_F_SEG_MAX) {
		memcpy(&v, V.config + BLK_CFG_SEG_MAX, 4);
		v = le32_to_cpu(v);
		if (v && v < seg_max)
			seg_max = v;
	}
	if (!seg_max)
		seg_max = 1;
	v = cpu_to_le32(size_max);
	memcpy(V.config + BLK_CFG_SIZE_MAX, &v, 4);
	v = cpu_to_le32(seg_max);
	memcpy(V.config + BLK_CFG_SEG_MAX, &v, 4);
	pv_log("pools %llu KiB each way: size_max %u, seg_max %u",
	       (unsigned long long)(V.pool >> 10), size_max, seg_max);
}

static void ring_board(int call_fd)
{
	u64 one = 1;

	if (call_fd >= 0 && write(call_fd, &one, sizeof(one)) != sizeof(one))
		pv_log("cannot ring the peer: %s", strerror(errno));
}

/* Soft state: the peer's drv region header, again every round. */
static void write_rhdr(u32 inst)
{
	struct pcinet_vio_rhdr *rh = drv_rhdr();

	put32(&rh->magic, PCINET_VIO_DEVS_MAGIC);
	put32(&rh->inst, inst);
	put32(&rh->peer_inst, V.board_inst);
	put32(&rh->nr_slots, PCINET_VIO_MAX_DEV);
}

/* Withdraw the offer: dev_gen 0 (the peer unplugs the device). */
static void withdraw(int call_fd, const char *why)
{
	if (!V.published)
		return;
	/* V1: a plain release; nothing is published with a 0 */
	pcinet_store_release(&devdesc()->dev_gen, cpu_to_le32(0));
	V.published = false;
	ring_board(call_fd);
	pv_log("device withdrawn (dev_gen 0x%08x): %s", V.dev_gen, why);
}

/* Write the description of a new dev_gen and publish it (V1). */
static void publish(int call_fd)
{
	struct pcinet_vio_devdesc *w = devdesc();
	struct pcinet_vio_devdesc n;

	if (!V.zeroed) {
		/* ours to write: zeroed before anything is published there */
		memset(V.win + V.drv_reg, 0, PCINET_VIO_FIXED_SIZE);
		V.zeroed = true;
	}
	V.dev_gen = pv_random();
	memset(&n, 0, sizeof(n));
	n.device_id = cpu_to_le32(VIRTIO_ID_BLOCK);
	n.nr_vq = cpu_to_le32(1);
	n.features = cpu_to_le64(V.offer);
	n.config_gen = cpu_to_le32(++V.config_gen);
	n.config_len = cpu_to_le32(BLK_CFG_LEN);
	n.out_pool_off = cpu_to_le64(V.ds + PCINET_VIO_ALIGN);
	n.out_pool_size = cpu_to_le64(V.pool);
	n.in_pool_off = cpu_to_le64(V.us + PCINET_VIO_ALIGN);
	n.in_pool_size = cpu_to_le64(V.pool);
	n.dev_span_off = cpu_to_le64(V.ds);
	n.dev_span_size = cpu_to_le64(V.span);
	n.drv_span_off = cpu_to_le64(V.us);
	n.drv_span_size = cpu_to_le64(V.span);
	n.vq[0].num_max = cpu_to_le16(PV_NUM);
	n.vq[0].desc_off = cpu_to_le64(V.ds);
	n.vq[0].avail_off = cpu_to_le64(V.ds + PCINET_VRING_DESC_BYTES(PV_NUM));
	n.vq[0].used_off = cpu_to_le64(V.us);
	memcpy(n.config, V.config, BLK_CFG_LEN);
	V.desc = n;
	V.desc.dev_gen = cpu_to_le32(V.dev_gen);

	/*
	 * V1: the slot goes empty before its fixed part changes, so a peer
	 * copying it out (V2) sees dev_gen move and copies again.
	 */
	pcinet_store_release(&w->dev_gen, cpu_to_le32(0));
	/* V1: the 0 is visible before any byte of the new description */
	virt_mb();
	write_rhdr(V.inst);
	memcpy((u8 *)w + sizeof(w->dev_gen), (u8 *)&n + sizeof(n.dev_gen),
	       sizeof(n) - sizeof(n.dev_gen));
	/* V1: pairs with V2 in the peer; the description before dev_gen */
	pcinet_store_release(&w->dev_gen, cpu_to_le32(V.dev_gen));
	V.published = true;
	V.offers++;
	V.drv_gen = 0;
	V.answered = false;
	ring_board(call_fd);
	pv_log("device offered: virtio-blk, dev_gen 0x%08x, features 0x%llx, queue %u",
	       V.dev_gen, (unsigned long long)V.offer, PV_NUM);
}

/*
 * Soft state: the slot again as it must be (a third party may have
 * scribbled it), the same values, dev_gen last.  The peer copies the
 * fixed part out once per dev_gen (V2) and reads the live words as
 * answers to its own status_seq only.
 */
static void refresh(void)
{
	struct pcinet_vio_devdesc *w = devdesc();

	memcpy((u8 *)w + sizeof(w->dev_gen), (u8 *)&V.desc + sizeof(V.desc.dev_gen),
	       sizeof(V.desc) - sizeof(V.desc.dev_gen));
	/* V1: the description before dev_gen, as when it was published */
	pcinet_store_release(&w->dev_gen, V.desc.dev_gen);
}

/* ----- the back end ----- */

/* Stop the back end's ring (SET_VRING_ENABLE 0, GET_VRING_BASE). */
static int rings_stop(void)
{
	unsigned int base;
	int err;

	if (!V.running)
		return 0;
	V.running = false;
	V.run_peer = -1;
	err = vu_stop_vring(&V.dev, 0, &base);
	if (err)
		pv_log("stopping the back end's ring: %s", strerror(-err));
	return err;
}

static void be_kill(void)
{
	int i;

	vu_close(&V.dev);
	V.running = false;
	V.be = BE_DOWN;
	if (V.pid <= 0)
		return;
	kill(V.pid, SIGTERM);
	for (i = 0; i < 100; i++) {
		if (waitpid(V.pid, NULL, WNOHANG) == V.pid)
			break;
		usleep(10000);
	}
	if (i == 100) {
		kill(V.pid, SIGKILL);
		waitpid(V.pid, NULL, 0);
	}
	V.pid = -1;
}

/* The back end failed: withdraw the device, start it again later. */
static void be_lost(int call_fd, const char *why)
{
	pv_log("back end lost: %s", why);
	withdraw(call_fd, "back end lost");
	be_kill();
	V.dev_gen = 0;
	V.retry_ms = pv_now() + PV_RETRY_MS;
}

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

static int be_spawn(void)
{
	char img[1024], blockdev[1200], export[256];

	opt_escape(img, sizeof(img), V.image);
	snprintf(blockdev, sizeof(blockdev),
		 "driver=file,node-name=pcinet-vio0,filename=%s", img);
	snprintf(export, sizeof(export),
		 "type=vhost-user-blk,id=pcinet-vio0,node-name=pcinet-vio0,addr.type=unix,addr.path=%s,writable=on",
		 V.sock);
	unlink(V.sock);
	V.pid = fork();
	if (V.pid < 0)
		return -errno;
	if (V.pid == 0) {
		/* the back end goes with us, however we end */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execlp(V.qsd, V.qsd, "--blockdev", blockdev, "--export", export,
		       (char *)NULL);
		fprintf(stderr, "pcinet-peer: vio: exec %s: %s\n", V.qsd,
			strerror(errno));
		_exit(127);
	}
	V.be = BE_STARTING;
	V.be_since_ms = pv_now();
	pv_log("started %s (pid %d) for %s", V.qsd, (int)V.pid, V.image);
	return 0;
}

/* The front end's part: features, the memory table (two spans), config. */
static int be_negotiate(void)
{
	u64 want = OFFER_MASK | VF(VU_F_PROTOCOL_FEATURES);
	struct vu_mem regs[2];
	int err;

	err = vu_negotiate(&V.dev, want,
			   VF(VU_PF_CONFIG) | VF(VU_PF_REPLY_ACK), NULL);
	if (err)
		return err;
	V.be_features = V.dev.features;
	regs[0] = (struct vu_mem){ .fd = V.win_fd, .base = V.win + V.ds,
				   .size = V.span, .gpa = V.ds, .offset = V.ds };
	regs[1] = (struct vu_mem){ .fd = V.win_fd, .base = V.win + V.us,
				   .size = V.span, .gpa = V.us, .offset = V.us };
	err = vu_set_mem_regions(&V.dev, regs, 2);
	if (err)
		return err;
	memset(V.config, 0, sizeof(V.config));
	err = vu_get_config(&V.dev, 0, V.config, BLK_CFG_LEN);
	if (err)
		return err;
	clamp_config();
	V.offer = (V.be_features & OFFER_MASK) | F_VERSION_1 |
		  BLK_F_SIZE_MAX | BLK_F_SEG_MAX;
	return 0;
}

/* Start, connect, negotiate: one step per round, never blocking long. */
static void be_step(int call_fd)
{
	u64 now = pv_now();
	int err, st;

	if (V.pid > 0 && waitpid(V.pid, &st, WNOHANG) == V.pid) {
		V.pid = -1;
		be_lost(call_fd, "qemu-storage-daemon exited");
		return;
	}
	if (V.be == BE_DOWN) {
		if (now < V.retry_ms)
			return;
		err = be_spawn();
		if (err) {
			pv_log("cannot start %s: %s", V.qsd, strerror(-err));
			V.retry_ms = now + PV_RETRY_MS;
		}
		return;
	}
	if (V.be != BE_STARTING)
		return;
	err = vu_connect(&V.dev, V.sock, PV_TIMEOUT_MS);
	if (err) {
		vu_close(&V.dev);
		if (now - V.be_since_ms > PV_START_MS)
			be_lost(call_fd, "its socket never appeared");
		return;
	}
	err = be_negotiate();
	if (err) {
		be_lost(call_fd, "vhost-user negotiation failed");
		return;
	}
	V.be = BE_READY;
	pv_log("back end ready: features 0x%llx, protocol features 0x%llx",
	       (unsigned long long)V.be_features,
	       (unsigned long long)V.dev.protocol_features);
}

/* ----- the driver's session ----- */

/* End what the back end does for the driver: on a reset, a new drv_gen, ... */
static int session_reset(void)
{
	int err = rings_stop();

	V.feat_ok = false;
	return err;
}

/*
 * --blk-fault=stale-used: a used entry for a request this session never
 * made, in the zeroed used ring before the back end's ring starts (it
 * takes used->idx from there: its own entries follow).  What the board
 * sees is what a back end that completed a former session's request
 * after the reset was answered would leave.
 */
static void stale_used(unsigned int num)
{
	/* the used ring: flags, idx (__le16 each), then the entries */
	struct pcinet_vring_used_elem *e =
		(struct pcinet_vring_used_elem *)(V.win + V.us + 4);
	__le16 *idx = (__le16 *)(V.win + V.us + 2);

	put32(&e->id, num - 1);
	put32(&e->len, 1);
	/* as a back end: the entry before the index (the board's R3) */
	pcinet_store_release(idx, cpu_to_le16(1));
	pv_log("fault: a stale used entry (id %u) in the new session's ring",
	       num - 1);
}

/*
 * DRIVER_OK: the back end's ring on the device ring's three addresses.
 * The used ring is ours: zeroed first (libvhost-user reads its idx).
 */
static int rings_start(const struct pcinet_vio_drvstate *ds, int peer_id,
		       int call_fd)
{
	unsigned int num = le16_to_cpu(ds->vq[0].num);
	struct vu_vring_cfg c;
	u64 one = 1;
	int err;

	if (!le16_to_cpu(ds->vq[0].ready) || num < 1 || num > PV_NUM ||
	    (num & (num - 1))) {
		pv_log("queue 0: bad num %u or not ready", num);
		return -EINVAL;
	}
	if (call_fd < 0)
		return -ENOTCONN;
	memset(V.win + V.us, 0, PCINET_VRING_USED_BYTES(PV_NUM));
	if (V.stale_used && ++V.sessions == 2)
		stale_used(num);
	c = (struct vu_vring_cfg){
		.num = num,
		.desc_gpa = V.ds,
		.avail_gpa = V.ds + PCINET_VRING_DESC_BYTES(PV_NUM),
		.used_gpa = V.us,
		.base = 0,
		.kick_fd = V.kick_fd,
		.call_fd = call_fd,
	};
	err = vu_start_vring(&V.dev, 0, &c);
	if (err)
		return err;
	V.running = true;
	V.run_peer = peer_id;
	V.notify = le32_to_cpu(ds->vq[0].notify);
	/* a kick before the binding is not lost */
	if (write(V.kick_fd, &one, sizeof(one)) == sizeof(one))
		V.kicks++;
	pv_log("queue 0 running: %u entries, desc 0x%llx avail 0x%llx used 0x%llx",
	       num, (unsigned long long)c.desc_gpa,
	       (unsigned long long)c.avail_gpa, (unsigned long long)c.used_gpa);
	return 0;
}

/* The negotiation table, for a status the driver wrote (@ds, a copy). */
static void answer(const struct pcinet_vio_drvstate *ds, u32 seq, int peer_id,
		   int call_fd)
{
	struct pcinet_vio_devdesc *w = devdesc();
	u32 s = le32_to_cpu(ds->status), ans;
	u64 f = le64_to_cpu(ds->features);
	int err = 0;

	if (!s || (s & VIRTIO_S_FAILED)) {
		err = session_reset();
		ans = s;
	} else {
		ans = s & (VIRTIO_S_ACKNOWLEDGE | VIRTIO_S_DRIVER);
		if ((s & VIRTIO_S_FEATURES_OK) && !V.feat_ok) {
			if ((f & ~V.offer) || !(f & F_VERSION_1)) {
				pv_log("refusing features 0x%llx (offered 0x%llx)",
				       (unsigned long long)f,
				       (unsigned long long)V.offer);
			} else {
				/* the bits we added ourselves are not the back end's */
				err = vu_set_features(&V.dev, (f & V.be_features) |
						      (V.be_features &
						       VF(VU_F_PROTOCOL_FEATURES)));
				V.feat_ok = !err;
			}
		}
		if ((s & VIRTIO_S_FEATURES_OK) && V.feat_ok)
			ans |= VIRTIO_S_FEATURES_OK;
		if ((s & VIRTIO_S_DRIVER_OK) && V.feat_ok && !err) {
			if (!V.running) {
				err = rings_start(ds, peer_id, call_fd);
				if (err == -EINVAL || err == -ENOTCONN)
					err = 0;	/* the driver's fault */
			}
			ans |= V.running ? VIRTIO_S_DRIVER_OK : VIRTIO_S_NEEDS_RESET;
		}
	}
	if (err) {
		be_lost(call_fd, "a vhost-user request failed");
		return;
	}
	V.desc.status = cpu_to_le32(ans);
	V.desc.drv_gen = cpu_to_le32(V.drv_gen);
	V.desc.status_seq = cpu_to_le32(seq);
	put32(&w->status, ans);
	put32(&w->drv_gen, V.drv_gen);
	/* V4: pairs with V3' in the peer; status and drv_gen first */
	pcinet_store_release(&w->status_seq, cpu_to_le32(seq));
	V.seq = seq;
	V.answered = true;
	V.answers++;
	ring_board(call_fd);
	if (s != ans || !s || (s & VIRTIO_S_DRIVER_OK))
		pv_log("status 0x%x answered 0x%x (drv_gen 0x%08x, seq %u)", s,
		       ans, V.drv_gen, seq);
}

/* The driver state block of our device: every change. */
static void drv_poll(int peer_id, int call_fd)
{
	struct pcinet_vio_drvstate *w = drvstate();
	struct pcinet_vio_drvstate ds;
	u32 seq, drv_gen, n;
	u64 one = 1;

	/* V4': pairs with V3 in the peer; the rest after status_seq */
	seq = le32_to_cpu(pcinet_load_acquire(&w->status_seq));
	memcpy(&ds, w, sizeof(ds));
	drv_gen = le32_to_cpu(ds.drv_gen);
	if (le32_to_cpu(ds.dev_gen) != V.dev_gen)
		drv_gen = 0;	/* a block about another instance: ignored */
	if (drv_gen != V.drv_gen) {
		if (V.drv_gen || V.feat_ok || V.running)
			pv_log("driver 0x%08x gone%s", V.drv_gen,
			       drv_gen ? ", a new one registered" : "");
		if (session_reset()) {
			be_lost(call_fd, "GET_VRING_BASE failed");
			return;
		}
		V.drv_gen = drv_gen;
		V.answered = false;
		if (drv_gen && le32_to_cpu(ds.error))
			pv_log("driver reports error %u", le32_to_cpu(ds.error));
	}
	if (!drv_gen && le32_to_cpu(ds.dev_gen) == V.dev_gen &&
	    le32_to_cpu(ds.error) && pv_now() >= V.reoffer_ms) {
		/*
		 * The peer dropped or refused this dev_gen (a protocol error,
		 * no answer in time) and registers it no more: a new one.
		 */
		pv_log("the peer dropped dev_gen 0x%08x (error %u): offering the device again",
		       V.dev_gen, le32_to_cpu(ds.error));
		V.reoffer_ms = pv_now() + PV_REOFFER_MS;
		publish(call_fd);
		return;
	}
	if (!drv_gen)
		return;
	if (!V.answered || seq != V.seq)
		answer(&ds, seq, peer_id, call_fd);
	if (!V.running)
		return;
	if (peer_id != V.run_peer) {
		/* the back end rings an eventfd of a peer that left */
		pv_log("peer id changed under a running queue");
		if (session_reset())
			be_lost(call_fd, "GET_VRING_BASE failed");
		return;
	}
	/* kicks: the counter, compared (design: "Signalling") */
	n = le32_to_cpu(READ_ONCE(w->vq[0].notify));
	if (n != V.notify) {
		V.notify = n;
		if (write(V.kick_fd, &one, sizeof(one)) == sizeof(one))
			V.kicks++;
	}
}

void pvio_run(bool peer_ok, int peer_id, int call_fd)
{
	const struct pcinet_vio_rhdr *rh;
	u32 inst, old;

	if (!V.image || !V.usable)
		return;
	be_step(call_fd);
	if (V.be != BE_READY)
		return;
	if (!peer_ok) {
		/* a session ends with the peer; the offer is made again */
		if (V.published || V.running) {
			pv_log("peer gone: session over");
			if (session_reset()) {
				be_lost(call_fd, "GET_VRING_BASE failed");
				return;
			}
			/*
			 * Withdrawn, not just forgotten: a new instance of the
			 * peer must not find this dev_gen and register it,
			 * for a session we no longer answer.
			 */
			withdraw(call_fd, "peer gone");
			V.drv_gen = 0;
		}
		return;
	}
	rh = dev_rhdr();
	inst = le32_to_cpu(READ_ONCE(rh->magic)) == PCINET_VIO_DRVS_MAGIC ?
	       le32_to_cpu(READ_ONCE(rh->inst)) : 0;
	if (inst != V.board_inst) {
		old = V.board_inst;
		V.board_inst = inst;
		pv_log("peer's virtio instance 0x%08x (was 0x%08x)", inst, old);
		/*
		 * A peer that stopped or restarted: a new session, a new
		 * instance of the device.  The first instance we see (from 0)
		 * may already drive the device: its driver state may come
		 * before its region header, so that is no reason to reset.
		 */
		if (old) {
			if (session_reset()) {
				be_lost(call_fd, "GET_VRING_BASE failed");
				return;
			}
			V.drv_gen = 0;
			V.published = false;
		}
	}
	if (!V.published) {
		publish(call_fd);
		return;
	}
	write_rhdr(V.inst);
	refresh();
	drv_poll(peer_id, call_fd);
}

int pvio_start(u8 *win, u64 win_size, int win_fd,
	       const struct pcinet_layout *lay, int side)
{
	const char *qsd = getenv("PCINET_QSD");

	(void)win_size;
	if (!V.image)
		return 0;
	if (access(V.image, R_OK | W_OK))
		return -errno;
	V.win = win;
	V.win_fd = win_fd;
	V.qsd = qsd && *qsd ? qsd : "qemu-storage-daemon";
	if (!place(lay, side)) {
		pv_log("the window has no usable virtio regions: no device offered");
		return 0;
	}
	snprintf(V.dir, sizeof(V.dir), "/tmp/pcinet-peer-vio.XXXXXX");
	if (!mkdtemp(V.dir))
		return -errno;
	snprintf(V.sock, sizeof(V.sock), "%s/blk.sock", V.dir);
	V.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (V.kick_fd < 0)
		return -errno;
	/*
	 * Ours to write: a former pcinet-peer killed on this side left its
	 * region header and offer here.  Cleared before we announce
	 * PCINET_F_VIRTIO, or the peer registers that dead offer, probes
	 * it and waits for answers nobody gives until our own offer
	 * replaces it.
	 */
	memset(V.win + V.drv_reg, 0, PCINET_VIO_FIXED_SIZE);
	V.zeroed = true;
	V.inst = pv_random();
	V.usable = true;
	pv_log("virtio-blk %s: spans 0x%llx and 0x%llx of 0x%llx bytes, inst 0x%08x",
	       V.image, (unsigned long long)V.ds, (unsigned long long)V.us,
	       (unsigned long long)V.span, V.inst);
	be_step(-1);
	return 0;
}

void pvio_stop(int call_fd)
{
	if (!V.image || !V.usable)
		return;
	withdraw(call_fd, "stopping");
	if (V.zeroed) {
		write_rhdr(0);
		ring_board(call_fd);
	}
	if (V.be == BE_READY)
		rings_stop();
	be_kill();
	unlink(V.sock);
	rmdir(V.dir);
	pv_log("stopped: %llu offers, %llu status answers, %llu kicks forwarded",
	       (unsigned long long)V.offers, (unsigned long long)V.answers,
	       (unsigned long long)V.kicks);
}
