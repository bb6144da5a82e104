// SPDX-License-Identifier: GPL-2.0-only
/*
 * peer_vio - pcinet-peer as the device side D of the virtio channel.
 *
 * docs/design.md, "Virtio channel", is the protocol; this file follows
 * its device side for up to two devices: virtio-blk (--blk IMAGE) in
 * slot 0 and virtio-fs (--fs DIR:TAG) in slot 1, each with its own back
 * end, spans, pools and driver session:
 *
 *  - the back ends are stock vhost-user daemons started on private
 *    sockets: qemu-storage-daemon (vhost-user-blk export) and virtiofsd
 *    (Debian's C one); we are their vhost-user front end
 *    (tools/pcinet-vhost/vu_frontend.c).  A back end's memory table is
 *    the window's memfd as two regions, its device's two spans, with
 *    guest physical address = window offset: it can reach nothing else;
 *  - a device is placed in our dev region (desc, avail, OUT pool) and the
 *    peer's drv region (used rings, IN pool), sized as under "Pool
 *    sizing", described there (V1), and offered while the peer runs and
 *    sets PCINET_F_VIRTIO;
 *  - the negotiation table ("Device side ... on every change of a
 *    drvstate") runs on every virtio doorbell and every tick;
 *  - signalling: the back end's call eventfd is the fabric's eventfd
 *    that rings the peer's vector 3 (zero-copy: the back end rings the
 *    board itself); kicks are forwarded: we compare each queue's notify
 *    counter on every virtio doorbell and tick and signal the queue's
 *    kick eventfd when it moved.  Handing the back end our own vector-3
 *    eventfd instead would race with our own reads of it (a status
 *    change and a kick share the vector, and whoever reads the eventfd
 *    first takes the count): a kick we consumed would be lost for good,
 *    since libvhost-user never polls.
 *
 * Everything read from the window is the peer's: a driver state block
 * is copied out after the load-acquire of its status_seq (V4') and only
 * the copy is used; num is checked against what we placed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "pcinet_grace.h"
#include "peer_vio.h"
#include "vio_blk.h"
#include "vu_frontend.h"

/* virtio (1.x, 2.1 and 5.2, 5.11) constants used here */
#define VIRTIO_S_ACKNOWLEDGE	1u
#define VIRTIO_S_DRIVER		2u
#define VIRTIO_S_DRIVER_OK	4u
#define VIRTIO_S_FEATURES_OK	8u
#define VIRTIO_S_NEEDS_RESET	0x40u
#define VIRTIO_S_FAILED		0x80u
#define VIRTIO_ID_BLOCK		VIO_BLK_ID
#define VIRTIO_ID_FS		26
#define F_RING			(F_VERSION_1 | F_INDIRECT_DESC | F_EVENT_IDX)
/* virtio_blk_config: wce at 32, the one byte a driver writes */
#define BLK_CFG_BLK_SIZE	20
#define BLK_CFG_WCE		32
#define BLK_CFG_LEN		VIO_BLK_CFG_LEN
/* virtio_fs_config: tag[36], then num_request_queues (le32) */
#define FS_TAG_LEN		36
#define FS_CFG_NRQ		36
#define FS_CFG_LEN		40
#define FS_TAG_CHARS		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
#define PV_CFG_MAX		64

#define PV_MAX_VQ	2		/* virtio-fs: hiprio, one request queue */
#define PV_PAGE		4096U
#define PV_TIMEOUT_MS	2000		/* a vhost-user reply */
/*
 * A reset's answer path, bounded below the board's PCINET_VIO_ACK_MS
 * (3000 ms; docs/design.md, "Virtio channel", open question 11): the
 * stop's replies PV_STOP_MS, the drain PV_DRAIN_MS, then a back end that
 * kept requests or did not stop is SIGKILLed (no grace) and the device
 * withdrawn (be_lost()).
 */
#define PV_STOP_MS	250		/* SET_VRING_ENABLE 0 + GET_VRING_BASE, all queues */
#define PV_DRAIN_MS	1000		/* a stopped ring's requests to complete */
#define PV_START_MS	10000		/* the back end's socket to appear */
#define PV_RETRY_MS	1000		/* before starting it again */
#define PV_REOFFER_MS	1000		/* between offers the peer dropped */

enum pv_kind { PV_BLK, PV_FS, PV_NR_KIND };

/**
 * struct pv_type - what a kind of device needs from us (fixed)
 * @name: for the logs
 * @device_id: virtio device ID
 * @slot: the device slot it takes (one device per kind)
 * @nr_vq: its virtqueues
 * @num: num_max of each queue
 * @pool: each pool, in regions large enough ("Pool sizing")
 * @offer_mask: the back end's feature bits we pass on.  virtio-blk: not
 *	MQ (one queue); never ACCESS_PLATFORM or vhost-user's own bits
 * @want_pf: vhost-user protocol features we use
 * @config_len: bytes of configuration space
 */
struct pv_type {
	const char *name;
	u32 device_id;
	unsigned int slot;
	unsigned int nr_vq;
	u16 num[PV_MAX_VQ];
	u64 pool;
	u64 offer_mask;
	u64 want_pf;
	u32 config_len;
};

static const struct pv_type pv_types[PV_NR_KIND] = {
	[PV_BLK] = {
		.name = "virtio-blk",
		.device_id = VIRTIO_ID_BLOCK,
		.slot = 0,
		.nr_vq = 1,
		.num = { 128 },
		.pool = 4U << 20,
		.offer_mask = F_RING | BLK_F_SIZE_MAX | BLK_F_SEG_MAX |
			      BLK_F_GEOMETRY | BLK_F_RO | BLK_F_BLK_SIZE |
			      BLK_F_FLUSH | BLK_F_TOPOLOGY | BLK_F_DISCARD |
			      BLK_F_WRITE_ZEROES | BLK_F_CONFIG_WCE,
		.want_pf = VF(VU_PF_CONFIG) | VF(VU_PF_REPLY_ACK),
		.config_len = BLK_CFG_LEN,
	},
	/*
	 * virtiofs caps a request at num - 4 pages plus its headers (about
	 * 564 KiB at 128): 2 MiB pools hold three of the largest at once.
	 * No VIRTIO_FS_F_NOTIFICATION, no DAX window (no shared memory).
	 */
	[PV_FS] = {
		.name = "virtio-fs",
		.device_id = VIRTIO_ID_FS,
		.slot = 1,
		.nr_vq = 2,
		.num = { 16, 128 },
		.pool = 2U << 20,
		.offer_mask = F_RING,
		.want_pf = VF(VU_PF_REPLY_ACK),
		.config_len = FS_CFG_LEN,
	},
};

enum pv_be { BE_DOWN, BE_STARTING, BE_READY };

/**
 * struct pv_dev - one device we serve
 * @t: its kind; NULL: not asked for
 * @arg: blk: the image; fs: the shared directory (absolute)
 * @tag: fs: the tag the driver mounts
 * @prog: the back end's program
 * @sock: its vhost-user socket
 * @pid: its process, -1: none
 * @be: where it stands
 * @be_since_ms: when it was started
 * @retry_ms: when to start it again after it failed
 * @dev: our vhost-user connection to it
 * @be_features: the features it offers
 * @config: the configuration space we offer
 * @offer: the features we offer
 * @kick_fd: per queue, the eventfd we signal on a kick
 * @ds: its span in our dev region (window offset)
 * @us: its span in the peer's drv region
 * @span: the size of each span
 * @pool: the size of each pool
 * @desc_off: per queue, the descriptor table (window offset)
 * @avail_off: per queue, the avail ring
 * @used_off: per queue, the used ring
 * @desc: what its slot must hold (the current offer)
 * @dev_gen: the current offer; 0: none
 * @published: @desc is in the peer's drv region
 * @config_gen: bumped per offer
 * @drv_gen: the driver registration we answer; 0: none
 * @drv_grace: @drv_gen read as gone or replaced, since when (a soft
 *	signal: pcinet_grace.h)
 * @answered: we answered a status of @drv_gen
 * @seq: the status_seq answered last
 * @feat_ok: the driver's features are accepted and set
 * @running: bit q: the back end serves queue q
 * @run_peer: the peer id whose eventfd the back end rings
 * @notify: per queue, the driver's kick counter seen last
 * @cfg_seq: the driver's config_seq replayed last
 * @kicks: kicks forwarded
 * @answers: status answers written
 * @offers: offers made
 * @cfg_writes: config bytes replayed to the back end
 * @reoffer_ms: no new offer of a dev_gen the peer dropped before
 * @sessions: rings started (--blk-fault=stale-used)
 * @used_start: per queue, the used ring's idx when the back end took it
 * @drained: requests a stopped ring still had in the back end, waited for
 */
struct pv_dev {
	const struct pv_type *t;
	const char *arg;
	char tag[FS_TAG_LEN + 1];
	const char *prog;
	char sock[96];
	pid_t pid;
	enum pv_be be;
	u64 be_since_ms;
	u64 retry_ms;
	struct vu_dev dev;
	u64 be_features;
	u8 config[PV_CFG_MAX];
	u64 offer;
	int kick_fd[PV_MAX_VQ];

	u64 ds, us, span, pool;
	u64 desc_off[PV_MAX_VQ], avail_off[PV_MAX_VQ], used_off[PV_MAX_VQ];

	struct pcinet_vio_devdesc desc;
	u32 dev_gen;
	bool published;
	u32 config_gen;

	u32 drv_gen;
	struct pcinet_grace drv_grace;
	bool answered;
	u32 seq;
	bool feat_ok;
	unsigned int running;
	int run_peer;
	u32 notify[PV_MAX_VQ];
	u32 cfg_seq;

	u64 reoffer_ms;
	unsigned int sessions;
	u16 used_start[PV_MAX_VQ];

	u64 kicks, answers, offers, cfg_writes, drained;
};

static struct {
	struct pv_dev d[PV_NR_KIND];
	struct pv_dev *on[PV_NR_KIND];	/* the devices asked for, in order */
	unsigned int nr_on;
	char dir[64];			/* the back ends' sockets */

	/* the window */
	u8 *win;
	int win_fd;
	bool usable;
	u64 dev_reg, drv_reg;		/* our dev region, the peer's drv region */
	u32 inst;			/* ours: random, per run */
	bool zeroed;			/* the fixed part of the drv region zeroed once */
	u32 board_inst;			/* the peer's, last seen */
	struct pcinet_grace board_grace; /* its header read otherwise */

	/* --blk-fault: a broken device side, for the peer's fault tests */
	bool hide_feature;		/* no PCINET_F_VIRTIO, offer anyway */
	bool stale_used;		/* one stale used entry (rings_start()) */
	bool bad_wce;			/* virtio-blk's wce published as 2 */
	bool bad_size_once;		/* blk_size 3 in the disk's first offer */
	u32 fs_as_id;			/* virtio-fs offered as this ID; 0: no */

	u64 rings;			/* doorbells we rang (ring_board()) */
} V = { .win_fd = -1 };

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

static struct pv_dev *dev_init(enum pv_kind k, const char *arg)
{
	struct pv_dev *d = &V.d[k];
	unsigned int q;

	if (!d->t)
		V.on[V.nr_on++] = d;
	d->t = &pv_types[k];
	d->arg = arg;
	d->pid = -1;
	d->run_peer = -1;
	for (q = 0; q < PV_MAX_VQ; q++)
		d->kick_fd[q] = -1;
	return d;
}

void pvio_setup_blk(const char *image)
{
	dev_init(PV_BLK, image);
}

/*
 * --fs DIR:TAG (the last ':' splits): DIR an existing directory, without
 * ',' (virtiofsd's -o syntax); TAG 1 to 36 of [A-Za-z0-9._-].
 */
int pvio_setup_fs(const char *dir_tag)
{
	char *dir = strdup(dir_tag), *tag, *abs;
	struct stat st;
	size_t n;

	if (!dir)
		return -ENOMEM;
	tag = strrchr(dir, ':');
	if (!tag || tag == dir)
		goto bad;
	*tag++ = 0;
	n = strlen(tag);
	if (!n || n > FS_TAG_LEN || strspn(tag, FS_TAG_CHARS) != n)
		goto bad;
	abs = realpath(dir, NULL);
	if (!abs || stat(abs, &st) || !S_ISDIR(st.st_mode) || strchr(abs, ',')) {
		free(abs);
		goto bad;
	}
	memcpy(dev_init(PV_FS, abs)->tag, tag, n + 1);
	free(dir);
	return 0;
bad:
	free(dir);
	return -EINVAL;
}

bool pvio_enabled(void)
{
	return V.d[PV_BLK].t || V.d[PV_FS].t;
}

/*
 * --blk-fault=KIND, for the peer's fault tests:
 *  no-feature: offer the devices without setting PCINET_F_VIRTIO, as a
 *	peer would whose control block predates the virtio channel (the
 *	peer must not register them);
 *  stale-used: once, when virtio-blk's queue starts for a driver after an
 *	earlier one, put a used entry into the fresh used ring that no
 *	request of this session made (id num - 1), as a back end that
 *	completes a request after the reset was answered would (the peer
 *	must refuse it: an unplug, then a new offer);
 *  bad-size-once: virtio-blk's first offer with blk_size 3 (BLK_SIZE
 *	offered), a size virtio_blk's probe refuses; the offers after it
 *	honest (the peer must unplug the device its driver failed, so that
 *	the next offer is probed: /dev/vda comes back by itself);
 *  bad-wce: virtio-blk's config published with wce 2, a value no device
 *	has (the peer must not pass it to virtio_blk, which BUG()s on it);
 *  id=N: the virtio-fs device (--fs) offered with device ID N instead, as
 *	a host that picks the board's drivers would (virtio-balloon 5,
 *	virtio-input 18, virtio-mem 24, virtio-pmem 27: the peer must
 *	refuse them).
 */
bool pvio_fault(const char *kind)
{
	unsigned long id;
	char *end;

	if (!strncmp(kind, "id=", 3)) {
		id = strtoul(kind + 3, &end, 0);
		if (*end || !id || id > UINT32_MAX)
			return false;
		V.fs_as_id = id;
	} else if (!strcmp(kind, "no-feature")) {
		V.hide_feature = true;
	} else if (!strcmp(kind, "stale-used")) {
		V.stale_used = true;
	} else if (!strcmp(kind, "bad-wce")) {
		V.bad_wce = true;
	} else if (!strcmp(kind, "bad-size-once")) {
		V.bad_size_once = true;
	} else {
		return false;
	}
	return true;
}

/*
 * What the status file shows: the kicks forwarded to the back ends (all
 * devices, since the start) and the doorbells we rang on the virtio
 * vector ourselves (offers, answers, config, withdrawals).  The back
 * ends' calls ring the peer through its eventfd directly: not counted.
 */
void pvio_counts(u64 *kicks, u64 *rings)
{
	unsigned int k;

	*kicks = 0;
	for (k = 0; k < V.nr_on; k++)
		*kicks += V.on[k]->kicks;
	*rings = V.rings;
}

u32 pvio_features(void)
{
	return V.usable && !V.hide_feature ? PCINET_F_VIRTIO : 0;
}

/* ----- the window: where the devices live ----- */

static struct pcinet_vio_rhdr *drv_rhdr(void)
{
	return (struct pcinet_vio_rhdr *)(V.win + V.drv_reg);
}

static struct pcinet_vio_devdesc *devdesc(const struct pv_dev *d)
{
	return (struct pcinet_vio_devdesc *)(V.win + V.drv_reg + PCINET_CACHELINE) +
	       d->t->slot;
}

static const struct pcinet_vio_rhdr *dev_rhdr(void)
{
	return (const struct pcinet_vio_rhdr *)(V.win + V.dev_reg);
}

static struct pcinet_vio_drvstate *drvstate(const struct pv_dev *d)
{
	return (struct pcinet_vio_drvstate *)(V.win + V.dev_reg + PCINET_CACHELINE) +
	       d->t->slot;
}

static void put32(__le32 *w, u32 v)
{
	WRITE_ONCE(*w, cpu_to_le32(v));
}

static u64 round_up64(u64 v, u64 a)
{
	return (v + a - 1) & ~(a - 1);
}

/*
 * One span per region and device, one after the other from the first
 * 64 KiB boundary after the fixed part, at the same offsets in both
 * regions: the rings in the span's first PCINET_VIO_ALIGN bytes, the
 * pool after them.  Each device gets its kind's pool if the regions hold
 * them all, else a share of what there is in proportion.
 */
static bool place(const struct pcinet_layout *lay, int side)
{
	const struct pcinet_vio_regions *own = &lay->vio[side];
	const struct pcinet_vio_regions *peer = &lay->vio[!side];
	u64 room, want = 0, off = PCINET_VIO_ALIGN, r, u;
	unsigned int k, q;
	struct pv_dev *d;

	static_assert(PCINET_VIO_FIXED_SIZE <= PCINET_VIO_ALIGN);
	if (!lay->has_vio || !own->dev_size || !peer->drv_size)
		return false;
	room = own->dev_size < peer->drv_size ? own->dev_size : peer->drv_size;
	V.dev_reg = own->dev_off;
	V.drv_reg = peer->drv_off;
	for (k = 0; k < V.nr_on; k++)
		want += V.on[k]->t->pool;
	if (room < (1 + 2 * (u64)V.nr_on) * PCINET_VIO_ALIGN)
		return false;
	room -= (1 + (u64)V.nr_on) * PCINET_VIO_ALIGN;	/* fixed part, rings */
	for (k = 0; k < V.nr_on; k++) {
		d = V.on[k];
		d->pool = d->t->pool;
		if (want > room)
			d->pool = (room / want * d->pool +
				   room % want * d->pool / want) &
				  ~(u64)(PCINET_VIO_ALIGN - 1);
		if (!d->pool)
			return false;
		d->span = PCINET_VIO_ALIGN + d->pool;
		d->ds = V.dev_reg + off;
		d->us = V.drv_reg + off;
		off += d->span;
		r = d->ds;
		u = d->us;
		for (q = 0; q < d->t->nr_vq; q++) {
			d->desc_off[q] = r;
			d->avail_off[q] = r + PCINET_VRING_DESC_BYTES(d->t->num[q]);
			r = round_up64(d->avail_off[q] +
				       PCINET_VRING_AVAIL_BYTES(d->t->num[q]),
				       PCINET_CACHELINE);
			d->used_off[q] = u;
			u = round_up64(u + PCINET_VRING_USED_BYTES(d->t->num[q]),
				       PCINET_CACHELINE);
		}
		if (r > d->ds + PCINET_VIO_ALIGN || u > d->us + PCINET_VIO_ALIGN)
			return false;
	}
	return true;
}

/*
 * virtio-blk: size_max and seg_max as "Pool sizing" says (vio_blk.c,
 * shared with pcinet-vhost).
 */
static void clamp_blk_config(struct pv_dev *d)
{
	u32 size_max, seg_max;

	vio_blk_clamp(d->config, d->be_features, d->pool, &size_max, &seg_max);
	pv_log("virtio-blk: pools %llu KiB each way: size_max %u, seg_max %u",
	       (unsigned long long)(d->pool >> 10), size_max, seg_max);
}

/*
 * virtio-fs: the configuration is the front end's (virtiofsd has none):
 * the tag, NUL-padded, and one request queue.
 */
static void fs_config(struct pv_dev *d)
{
	u32 v = cpu_to_le32(d->t->nr_vq - 1);

	memset(d->config, 0, sizeof(d->config));
	memcpy(d->config, d->tag, strlen(d->tag));
	memcpy(d->config + FS_CFG_NRQ, &v, 4);
	pv_log("virtio-fs: pools %llu KiB each way, tag \"%s\", %u request queue",
	       (unsigned long long)(d->pool >> 10), d->tag, d->t->nr_vq - 1);
}

static void ring_board(int call_fd)
{
	u64 one = 1;

	if (call_fd < 0)
		return;
	if (write(call_fd, &one, sizeof(one)) == sizeof(one))
		V.rings++;
	else
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
static void withdraw(struct pv_dev *d, int call_fd, const char *why)
{
	if (!d->published)
		return;
	/* V1: a plain release; nothing is published with a 0 */
	pcinet_store_release(&devdesc(d)->dev_gen, cpu_to_le32(0));
	d->published = false;
	ring_board(call_fd);
	pv_log("%s withdrawn (dev_gen 0x%08x): %s", d->t->name, d->dev_gen, why);
}

/* Write the description of a new dev_gen and publish it (V1). */
static void publish(struct pv_dev *d, int call_fd)
{
	struct pcinet_vio_devdesc *w = devdesc(d);
	struct pcinet_vio_devdesc n;
	unsigned int q;

	d->dev_gen = pv_random();
	memset(&n, 0, sizeof(n));
	n.device_id = cpu_to_le32(V.fs_as_id && d->t == &pv_types[PV_FS] ?
				  V.fs_as_id : d->t->device_id);
	n.nr_vq = cpu_to_le32(d->t->nr_vq);
	n.features = cpu_to_le64(d->offer);
	n.config_gen = cpu_to_le32(++d->config_gen);
	n.config_len = cpu_to_le32(d->t->config_len);
	n.out_pool_off = cpu_to_le64(d->ds + PCINET_VIO_ALIGN);
	n.out_pool_size = cpu_to_le64(d->pool);
	n.in_pool_off = cpu_to_le64(d->us + PCINET_VIO_ALIGN);
	n.in_pool_size = cpu_to_le64(d->pool);
	n.dev_span_off = cpu_to_le64(d->ds);
	n.dev_span_size = cpu_to_le64(d->span);
	n.drv_span_off = cpu_to_le64(d->us);
	n.drv_span_size = cpu_to_le64(d->span);
	for (q = 0; q < d->t->nr_vq; q++) {
		n.vq[q].num_max = cpu_to_le16(d->t->num[q]);
		n.vq[q].desc_off = cpu_to_le64(d->desc_off[q]);
		n.vq[q].avail_off = cpu_to_le64(d->avail_off[q]);
		n.vq[q].used_off = cpu_to_le64(d->used_off[q]);
	}
	memcpy(n.config, d->config, d->t->config_len);
	if (V.bad_size_once && d->t->device_id == VIRTIO_ID_BLOCK &&
	    !d->offers) {
		put32((__le32 *)(n.config + BLK_CFG_BLK_SIZE), 3);
		n.features = cpu_to_le64(d->offer | BLK_F_BLK_SIZE);
		pv_log("virtio-blk: fault: first offer with blk_size 3");
	}
	d->desc = n;
	d->desc.dev_gen = cpu_to_le32(d->dev_gen);

	/*
	 * V1: the slot goes empty before its fixed part changes, so a peer
	 * copying it out (V2) sees dev_gen move and copies again.
	 */
	pcinet_store_release(&w->dev_gen, cpu_to_le32(0));
	/* V1: the 0 is visible before any byte of the new description */
	virt_mb();
	memcpy((u8 *)w + sizeof(w->dev_gen), (u8 *)&n + sizeof(n.dev_gen),
	       sizeof(n) - sizeof(n.dev_gen));
	/* V1: pairs with V2 in the peer; the description before dev_gen */
	pcinet_store_release(&w->dev_gen, cpu_to_le32(d->dev_gen));
	d->published = true;
	d->offers++;
	d->drv_gen = 0;
	d->answered = false;
	ring_board(call_fd);
	pv_log("device offered: %s in slot %u, dev_gen 0x%08x, features 0x%llx, %u queue(s)",
	       d->t->name, d->t->slot, d->dev_gen,
	       (unsigned long long)d->offer, d->t->nr_vq);
}

/*
 * Soft state: the slot again as it must be (a third party may have
 * scribbled it), the same values, dev_gen last.  The peer copies the
 * fixed part out once per dev_gen (V2) and reads the live words as
 * answers to its own status_seq only.
 */
static void refresh(struct pv_dev *d)
{
	struct pcinet_vio_devdesc *w = devdesc(d);

	memcpy((u8 *)w + sizeof(w->dev_gen), (u8 *)&d->desc + sizeof(d->desc.dev_gen),
	       sizeof(d->desc) - sizeof(d->desc.dev_gen));
	/* V1: the description before dev_gen, as when it was published */
	pcinet_store_release(&w->dev_gen, d->desc.dev_gen);
}

/* ----- the back ends ----- */

/* The used ring's idx of queue @q, as the back end last wrote it. */
static u16 used_idx(const struct pv_dev *d, unsigned int q)
{
	const __le16 *idx = (const __le16 *)(V.win + d->used_off[q] + 2);

	return le16_to_cpu(READ_ONCE(*idx));
}

/*
 * After GET_VRING_BASE: wait until the back end completed every request
 * it took from queue @q.  libvhost-user answers GET_VRING_BASE at once
 * (vu_get_vring_base_exec(): the queue's handler is unset, its kick and
 * call fds closed) and qemu-storage-daemon's requests under way go on in
 * their coroutines, each pushed into the used ring when it completes:
 * it waits for them only when the connection closes.  @base is the
 * number of requests it took (the ring started at 0), the used ring's
 * idx moved by one per completion from @used_start: the session's
 * reset is answered only once they meet, so no completion of this
 * session lands in the next one's used ring (design.md, virtio open
 * question 11).  -ETIMEDOUT at @end (pv_now(): the stop's PV_STOP_MS
 * and PV_DRAIN_MS, for all queues), -EIO if the counts make no sense
 * (the used ring overwritten): the caller kills the back end.
 */
static int ring_drain(struct pv_dev *d, unsigned int q, unsigned int base,
		      u64 end)
{
	u16 left = (u16)base - (u16)(used_idx(d, q) - d->used_start[q]);
	u64 t0 = pv_now(), beat = t0;
	unsigned int first = left;

	if (!left)
		return 0;
	if (left > d->t->num[q]) {
		pv_log("%s: queue %u: %u taken, used idx %u from %u: the used ring makes no sense",
		       d->t->name, q, base, used_idx(d, q), d->used_start[q]);
		return -EIO;
	}
	pv_log("%s: queue %u stopped with %u request(s) still in the back end: waiting",
	       d->t->name, q, first);
	while (left && pv_now() < end) {
		usleep(1000);
		/* the peer's peer_timeout_ms is shorter than our wait */
		if (pv_now() - beat >= PCINET_TICK_MS) {
			pvio_beat();
			beat = pv_now();
		}
		left = (u16)base - (u16)(used_idx(d, q) - d->used_start[q]);
	}
	if (left) {
		pv_log("%s: queue %u: %u request(s) not completed in %llu ms",
		       d->t->name, q, left,
		       (unsigned long long)(pv_now() - t0));
		return -ETIMEDOUT;
	}
	d->drained += first;
	pv_log("%s: queue %u: the back end completed them in %llu ms",
	       d->t->name, q, (unsigned long long)(pv_now() - t0));
	return 0;
}

/* The socket's receive timeout: a reply to wait for at most @ms. */
static void vu_timeout(struct pv_dev *d, u64 ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 + 1000 };

	if (d->dev.sock >= 0)
		setsockopt(d->dev.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/*
 * Stop the back end's rings (SET_VRING_ENABLE 0, GET_VRING_BASE: all
 * queues' replies within PV_STOP_MS; virtiofsd answers GET_VRING_BASE
 * only once every request it took completed, so a held one holds the
 * reply), and wait for the requests it still had (ring_drain()).
 */
static int rings_stop(struct pv_dev *d)
{
	u64 end = pv_now() + PV_STOP_MS, now;
	unsigned int base[PV_MAX_VQ], q, stopped = 0;
	int err = 0, e;

	for (q = 0; q < d->t->nr_vq; q++) {
		if (!(d->running & (1u << q)))
			continue;
		d->running &= ~(1u << q);
		now = pv_now();
		e = -ETIMEDOUT;
		if (now < end && !err) {
			vu_timeout(d, end - now);
			e = vu_stop_vring(&d->dev, q, &base[q]);
			vu_timeout(d, PV_TIMEOUT_MS);
		}
		if (!e)
			stopped |= 1u << q;
		else if (!err)
			err = e;
	}
	/* every queue stopped first, then their requests waited for */
	for (q = 0; q < d->t->nr_vq && !err; q++) {
		if (stopped & (1u << q))
			err = ring_drain(d, q, base[q], end + PV_DRAIN_MS);
	}
	if (err)
		pv_log("%s: stopping the back end's rings: %s", d->t->name,
		       strerror(-err));
	d->run_peer = -1;
	return err;
}

/* The back end stopped: SIGTERM, @grace_ms, SIGKILL; reaped. */
static void be_kill(struct pv_dev *d, unsigned int grace_ms)
{
	vu_close(&d->dev);
	d->running = 0;
	d->feat_ok = false;
	d->be = BE_DOWN;
	vu_stop_backend(d->pid, grace_ms);
	d->pid = -1;
}

/*
 * The back end failed: withdraw the device, start it again later.  It
 * is killed at once (no grace): what it holds is abandoned, and a reset
 * the board waits for must not wait for its exit.
 */
static void be_lost(struct pv_dev *d, int call_fd, const char *why)
{
	pv_log("%s: back end lost: %s", d->t->name, why);
	withdraw(d, call_fd, "back end lost");
	be_kill(d, 0);
	d->dev_gen = 0;
	d->retry_ms = pv_now() + PV_RETRY_MS;
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

/* In the child: exec the back end with its arguments. */
static __noreturn void be_exec(const struct pv_dev *d)
{
	char a1[PATH_MAX + 200], a2[PATH_MAX + 200], img[PATH_MAX];
	const char *sandbox = getenv("PCINET_VIRTIOFSD_SANDBOX");

	if (d->t->device_id == VIRTIO_ID_BLOCK) {
		opt_escape(img, sizeof(img), d->arg);
		snprintf(a1, sizeof(a1),
			 "driver=file,node-name=pcinet-vio0,filename=%s", img);
		snprintf(a2, sizeof(a2),
			 "type=vhost-user-blk,id=pcinet-vio0,node-name=pcinet-vio0,addr.type=unix,addr.path=%s,writable=on",
			 d->sock);
		execlp(d->prog, d->prog, "--blockdev", a1, "--export", a2,
		       (char *)NULL);
	} else {
		/*
		 * Debian 12's C virtiofsd.  Its default sandbox (namespaces:
		 * mount, pid, net, then pivot_root into DIR) works as root on
		 * a host; "chroot" is for containers without them.
		 */
		snprintf(a1, sizeof(a1), "--socket-path=%s", d->sock);
		snprintf(a2, sizeof(a2), "source=%s", d->arg);
		snprintf(img, sizeof(img), "sandbox=%s",
			 sandbox && *sandbox ? sandbox : "namespace");
		execlp(d->prog, d->prog, a1, "-o", a2, "-o", img, (char *)NULL);
	}
	fprintf(stderr, "pcinet-peer: vio: exec %s: %s\n", d->prog,
		strerror(errno));
	_exit(127);
}

static int be_spawn(struct pv_dev *d)
{
	unlink(d->sock);
	d->pid = fork();
	if (d->pid < 0)
		return -errno;
	if (d->pid == 0) {
		/* the back end goes with us, however we end */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		be_exec(d);
	}
	d->be = BE_STARTING;
	d->be_since_ms = pv_now();
	pv_log("%s: started %s (pid %d) for %s", d->t->name, d->prog,
	       (int)d->pid, d->arg);
	return 0;
}

/* The front end's part: features, the memory table (two spans), config. */
static int be_negotiate(struct pv_dev *d)
{
	u64 want = d->t->offer_mask | VF(VU_F_PROTOCOL_FEATURES);
	struct vu_mem regs[2];
	int err;

	err = vu_negotiate(&d->dev, want, d->t->want_pf, NULL);
	if (err)
		return err;
	d->be_features = d->dev.features;
	regs[0] = (struct vu_mem){ .fd = V.win_fd, .base = V.win + d->ds,
				   .size = d->span, .gpa = d->ds, .offset = d->ds };
	regs[1] = (struct vu_mem){ .fd = V.win_fd, .base = V.win + d->us,
				   .size = d->span, .gpa = d->us, .offset = d->us };
	err = vu_set_mem_regions(&d->dev, regs, 2);
	if (err)
		return err;
	memset(d->config, 0, sizeof(d->config));
	if (d->t->device_id == VIRTIO_ID_BLOCK) {
		/*
		 * qemu-storage-daemon reports wce 0 while its export caches
		 * (writethrough=off, its default): a driver believing it would
		 * never flush.  Set wce 1, what it does, so the driver starts
		 * in write back and flushes, as without CONFIG_WCE.
		 */
		if (d->be_features & BLK_F_CONFIG_WCE) {
			u8 one = 1;

			err = vu_set_config(&d->dev, BLK_CFG_WCE, &one, 1);
			if (err)
				return err;
		}
		err = vu_get_config(&d->dev, 0, d->config, BLK_CFG_LEN);
		if (err)
			return err;
		clamp_blk_config(d);
		if (V.bad_wce) {
			d->config[BLK_CFG_WCE] = 2;
			pv_log("virtio-blk: fault: config published with wce 2");
		}
		/* CONFIG_WCE too: the wce byte is replayed (config_seq) */
		d->offer = vio_blk_offer(d->be_features) |
			   (d->be_features & BLK_F_CONFIG_WCE);
	} else {
		fs_config(d);
		d->offer = (d->be_features & d->t->offer_mask) | F_VERSION_1;
	}
	return 0;
}

/* Start, connect, negotiate: one step per round, never blocking long. */
static void be_step(struct pv_dev *d, int call_fd)
{
	u64 now = pv_now();
	int err, st;

	if (d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == d->pid) {
		d->pid = -1;
		be_lost(d, call_fd, "the back end exited");
		return;
	}
	if (d->be == BE_READY && vu_hung_up(&d->dev)) {
		be_lost(d, call_fd, "it closed its socket");
		return;
	}
	if (d->be == BE_DOWN) {
		if (now < d->retry_ms)
			return;
		err = be_spawn(d);
		if (err) {
			pv_log("%s: cannot start %s: %s", d->t->name, d->prog,
			       strerror(-err));
			d->retry_ms = now + PV_RETRY_MS;
		}
		return;
	}
	if (d->be != BE_STARTING)
		return;
	err = vu_connect(&d->dev, d->sock, PV_TIMEOUT_MS);
	if (err) {
		vu_close(&d->dev);
		if (now - d->be_since_ms > PV_START_MS)
			be_lost(d, call_fd, "its socket never appeared");
		return;
	}
	err = be_negotiate(d);
	if (err) {
		be_lost(d, call_fd, "vhost-user negotiation failed");
		return;
	}
	d->be = BE_READY;
	pv_log("back end ready: %s, features 0x%llx, protocol features 0x%llx",
	       d->t->name, (unsigned long long)d->be_features,
	       (unsigned long long)d->dev.protocol_features);
}

/* ----- the driver's session ----- */

/* End what the back end does for the driver: on a reset, a new drv_gen, ... */
static int session_reset(struct pv_dev *d)
{
	int err = rings_stop(d);

	d->feat_ok = false;
	return err;
}

/*
 * --blk-fault=stale-used: a used entry for a request this session never
 * made, in queue 0's zeroed used ring before the back end's ring starts
 * (it takes used->idx from there: its own entries follow).  What the
 * board sees is what a back end that completed a former session's
 * request after the reset was answered would leave.
 */
static void stale_used(struct pv_dev *d, unsigned int num)
{
	/* the used ring: flags, idx (__le16 each), then the entries */
	struct pcinet_vring_used_elem *e =
		(struct pcinet_vring_used_elem *)(V.win + d->used_off[0] + 4);
	__le16 *idx = (__le16 *)(V.win + d->used_off[0] + 2);

	put32(&e->id, num - 1);
	put32(&e->len, 1);
	/* as a back end: the entry before the index (the board's R3) */
	pcinet_store_release(idx, cpu_to_le16(1));
	pv_log("%s: fault: a stale used entry (id %u) in the new session's ring",
	       d->t->name, num - 1);
}

/*
 * DRIVER_OK: the back end's rings on the device rings' three addresses,
 * every queue the driver set up (at least one).  The used rings are
 * ours: zeroed first (libvhost-user reads their idx).
 */
static int rings_start(struct pv_dev *d, const struct pcinet_vio_drvstate *ds,
		       int peer_id, int call_fd)
{
	struct vu_vring_cfg c;
	unsigned int q, num;
	u64 one = 1;
	int err;

	if (call_fd < 0)
		return -ENOTCONN;
	for (q = 0; q < d->t->nr_vq; q++) {
		num = le16_to_cpu(ds->vq[q].num);
		if (!le16_to_cpu(ds->vq[q].ready))
			continue;
		if (num < 1 || num > d->t->num[q] || (num & (num - 1))) {
			pv_log("%s: queue %u: bad num %u", d->t->name, q, num);
			return -EINVAL;
		}
	}
	for (q = 0; q < d->t->nr_vq; q++) {
		num = le16_to_cpu(ds->vq[q].num);
		if (!le16_to_cpu(ds->vq[q].ready))
			continue;
		memset(V.win + d->used_off[q], 0,
		       PCINET_VRING_USED_BYTES(d->t->num[q]));
		if (V.stale_used && d->t->device_id == VIRTIO_ID_BLOCK &&
		    !q && ++d->sessions == 2)
			stale_used(d, num);
		/* libvhost-user reads it at SET_VRING_ADDR: its pushes follow */
		d->used_start[q] = used_idx(d, q);
		c = (struct vu_vring_cfg){
			.num = num,
			.desc_gpa = d->desc_off[q],
			.avail_gpa = d->avail_off[q],
			.used_gpa = d->used_off[q],
			.base = 0,
			.kick_fd = d->kick_fd[q],
			.call_fd = call_fd,
		};
		err = vu_start_vring(&d->dev, q, &c);
		if (err)
			return err;
		d->running |= 1u << q;
		d->notify[q] = le32_to_cpu(ds->vq[q].notify);
		/* a kick before the binding is not lost */
		if (write(d->kick_fd[q], &one, sizeof(one)) == sizeof(one))
			d->kicks++;
		pv_log("%s: queue %u running: %u entries, desc 0x%llx avail 0x%llx used 0x%llx",
		       d->t->name, q, num, (unsigned long long)c.desc_gpa,
		       (unsigned long long)c.avail_gpa,
		       (unsigned long long)c.used_gpa);
	}
	if (!d->running) {
		pv_log("%s: no queue ready", d->t->name);
		return -EINVAL;
	}
	d->run_peer = peer_id;
	return 0;
}

/* The negotiation table, for a status the driver wrote (@ds, a copy). */
static void answer(struct pv_dev *d, const struct pcinet_vio_drvstate *ds,
		   u32 seq, int peer_id, int call_fd)
{
	struct pcinet_vio_devdesc *w = devdesc(d);
	u32 s = le32_to_cpu(ds->status), ans;
	u64 f = le64_to_cpu(ds->features);
	int err = 0;

	if (!s || (s & VIRTIO_S_FAILED)) {
		err = session_reset(d);
		ans = s;
	} else {
		ans = s & (VIRTIO_S_ACKNOWLEDGE | VIRTIO_S_DRIVER);
		if ((s & VIRTIO_S_FEATURES_OK) && !d->feat_ok) {
			if ((f & ~d->offer) || !(f & F_VERSION_1)) {
				pv_log("%s: refusing features 0x%llx (offered 0x%llx)",
				       d->t->name, (unsigned long long)f,
				       (unsigned long long)d->offer);
			} else {
				/* the bits we added ourselves are not the back end's */
				err = vu_set_features(&d->dev, (f & d->be_features) |
						      (d->be_features &
						       VF(VU_F_PROTOCOL_FEATURES)));
				d->feat_ok = !err;
			}
		}
		if ((s & VIRTIO_S_FEATURES_OK) && d->feat_ok)
			ans |= VIRTIO_S_FEATURES_OK;
		if ((s & VIRTIO_S_DRIVER_OK) && d->feat_ok && !err) {
			if (!d->running) {
				err = rings_start(d, ds, peer_id, call_fd);
				if (err == -EINVAL || err == -ENOTCONN)
					err = 0;	/* the driver's fault */
			}
			ans |= d->running ? VIRTIO_S_DRIVER_OK : VIRTIO_S_NEEDS_RESET;
		}
	}
	if (err) {
		be_lost(d, call_fd, "a vhost-user request failed");
		return;
	}
	d->desc.status = cpu_to_le32(ans);
	d->desc.drv_gen = cpu_to_le32(d->drv_gen);
	d->desc.status_seq = cpu_to_le32(seq);
	put32(&w->status, ans);
	put32(&w->drv_gen, d->drv_gen);
	/* V4: pairs with V3' in the peer; status and drv_gen first */
	pcinet_store_release(&w->status_seq, cpu_to_le32(seq));
	d->seq = seq;
	d->answered = true;
	d->answers++;
	ring_board(call_fd);
	if (s != ans || !s || (s & VIRTIO_S_DRIVER_OK))
		pv_log("%s: status 0x%x answered 0x%x (drv_gen 0x%08x, seq %u)",
		       d->t->name, s, ans, d->drv_gen, seq);
}

/*
 * Config writes (config_seq moved, V6): every byte the driver marked
 * dirty, replayed to the back end if it is one the back end takes
 * (virtio-blk: wce, SET_CONFIG; libvhost-user drops the connection on
 * anything its back end refuses, so nothing else is sent), then the back
 * end's configuration read back and published (config, then config_gen:
 * V5).  Other bytes are ignored: read-only fields, as on any transport.
 */
static void config_replay(struct pv_dev *d, const struct pcinet_vio_drvstate *ds,
			  int call_fd)
{
	struct pcinet_vio_devdesc *w = devdesc(d);
	unsigned int at, ignored = 0;
	u8 v, cfg[BLK_CFG_LEN];
	bool changed = false;
	int err;

	for (at = 0; at < d->t->config_len; at++) {
		if (!(le32_to_cpu(ds->config_dirty[at / 32]) & (1u << (at % 32))))
			continue;
		if (d->t->device_id != VIRTIO_ID_BLOCK || at != BLK_CFG_WCE ||
		    !(d->offer & BLK_F_CONFIG_WCE)) {
			ignored++;
			continue;
		}
		v = !!ds->config[at];
		err = vu_set_config(&d->dev, at, &v, 1);
		/* its get_config has no offset: the whole space */
		if (!err)
			err = vu_get_config(&d->dev, 0, cfg, BLK_CFG_LEN);
		if (err) {
			be_lost(d, call_fd, "SET_CONFIG failed");
			return;
		}
		d->config[at] = cfg[at];
		d->desc.config[at] = cfg[at];
		d->cfg_writes++;
		changed = true;
		pv_log("%s: config write: wce %u, the back end's wce now %u",
		       d->t->name, v, cfg[at]);
	}
	if (ignored)
		pv_log("%s: config writes to %u read-only byte(s) ignored",
		       d->t->name, ignored);
	if (!changed)
		return;
	d->desc.config_gen = cpu_to_le32(++d->config_gen);
	memcpy(w->config, d->desc.config, sizeof(w->config));
	/* V5: pairs with the peer's generation(); config before config_gen */
	pcinet_store_release(&w->config_gen, d->desc.config_gen);
	ring_board(call_fd);
}

/* The driver state block of a device: every change. */
static void drv_poll(struct pv_dev *d, int peer_id, int call_fd)
{
	struct pcinet_vio_drvstate *w = drvstate(d);
	struct pcinet_vio_drvstate ds;
	u32 seq, cseq, drv_gen, n;
	unsigned int q;
	u64 one = 1;
	bool doubt;

	/* V4': pairs with V3 in the peer; the rest after status_seq */
	seq = le32_to_cpu(pcinet_load_acquire(&w->status_seq));
	/* V6: pairs with the peer's release of config_seq after config */
	cseq = le32_to_cpu(pcinet_load_acquire(&w->config_seq));
	memcpy(&ds, w, sizeof(ds));
	drv_gen = le32_to_cpu(ds.drv_gen);
	if (le32_to_cpu(ds.dev_gen) != d->dev_gen)
		drv_gen = 0;	/* a block about another instance: ignored */
	/*
	 * The driver we serve read as gone or replaced (its drv_gen or the
	 * dev_gen beside it changed): acted upon only once that held on
	 * every look for PCINET_PEER_GRACE_MS (pcinet_grace.h).  A word a
	 * third party overwrote lasts until the board's next refresh; acted
	 * upon at once, it stopped the rings under a driver that never knew
	 * (virtio-scribble: wedged, unplugged 10 s later).  Until then
	 * nothing of this block counts.  A first driver is taken at once.
	 */
	doubt = d->drv_gen && drv_gen != d->drv_gen;
	if (!pcinet_grace_look(&d->drv_grace, doubt, (u32)pv_now(),
			       PCINET_PEER_GRACE_MS) && doubt)
		return;
	if (drv_gen != d->drv_gen) {
		d->drv_grace = (struct pcinet_grace){ 0 };
		if (d->drv_gen || d->feat_ok || d->running)
			pv_log("%s: driver 0x%08x gone%s", d->t->name, d->drv_gen,
			       drv_gen ? ", a new one registered" : "");
		if (session_reset(d)) {
			be_lost(d, call_fd, "stopping its rings failed");
			return;
		}
		d->drv_gen = drv_gen;
		d->answered = false;
		d->cfg_seq = 0;
		if (drv_gen && le32_to_cpu(ds.error))
			pv_log("%s: driver reports error %u", d->t->name,
			       le32_to_cpu(ds.error));
	}
	if (!drv_gen && le32_to_cpu(ds.dev_gen) == d->dev_gen &&
	    le32_to_cpu(ds.error) && pv_now() >= d->reoffer_ms) {
		/*
		 * The peer dropped or refused this dev_gen (a protocol error,
		 * no answer in time) and registers it no more: a new one.
		 */
		pv_log("%s: the peer dropped dev_gen 0x%08x (error %u): offering the device again",
		       d->t->name, d->dev_gen, le32_to_cpu(ds.error));
		d->reoffer_ms = pv_now() + PV_REOFFER_MS;
		publish(d, call_fd);
		return;
	}
	if (!drv_gen)
		return;
	if (!d->answered || seq != d->seq)
		answer(d, &ds, seq, peer_id, call_fd);
	if (d->be == BE_READY && cseq != d->cfg_seq) {
		d->cfg_seq = cseq;
		config_replay(d, &ds, call_fd);
	}
	if (d->be != BE_READY || !d->running)
		return;
	if (peer_id != d->run_peer) {
		/* the back end rings an eventfd of a peer that left */
		pv_log("%s: peer id changed under running queues", d->t->name);
		if (session_reset(d))
			be_lost(d, call_fd, "stopping its rings failed");
		return;
	}
	/* kicks: the counters, compared (design: "Signalling") */
	for (q = 0; q < d->t->nr_vq; q++) {
		if (!(d->running & (1u << q)))
			continue;
		n = le32_to_cpu(READ_ONCE(w->vq[q].notify));
		if (n != d->notify[q]) {
			d->notify[q] = n;
			if (write(d->kick_fd[q], &one, sizeof(one)) == sizeof(one))
				d->kicks++;
		}
	}
}

/*
 * A session ends (the peer went or restarted): withdrawn, not just
 * forgotten (a new instance of the peer must not find this dev_gen and
 * register it, for a session we no longer answer); offered again later.
 */
static bool session_end(struct pv_dev *d, int call_fd, const char *why)
{
	if (session_reset(d)) {
		be_lost(d, call_fd, "stopping its rings failed");
		return false;
	}
	withdraw(d, call_fd, why);
	d->drv_gen = 0;
	return true;
}

void pvio_run(bool peer_ok, int peer_id, int call_fd)
{
	const struct pcinet_vio_rhdr *rh;
	bool any = false, doubt, held;
	struct pv_dev *d;
	unsigned int k;
	u32 inst, old;

	if (!V.usable)
		return;
	for (k = 0; k < V.nr_on; k++) {
		d = V.on[k];
		be_step(d, call_fd);
		any |= d->be == BE_READY;
	}
	if (!any)
		return;
	if (!peer_ok) {
		/* a session ends with the peer; the offers are made again */
		for (k = 0; k < V.nr_on; k++) {
			d = V.on[k];
			if (d->be != BE_READY || !(d->published || d->running))
				continue;
			pv_log("%s: peer gone: session over", d->t->name);
			session_end(d, call_fd, "peer gone");
		}
		return;
	}
	rh = dev_rhdr();
	inst = le32_to_cpu(READ_ONCE(rh->magic)) == PCINET_VIO_DRVS_MAGIC ?
	       le32_to_cpu(READ_ONCE(rh->inst)) : 0;
	/*
	 * The peer stopped or restarted as its header reads (magic, inst):
	 * only once that held on every look for PCINET_PEER_GRACE_MS, as
	 * the board counts ours (pcinet_grace.h): a word a third party
	 * overwrote lasts until the peer's next tick.
	 */
	doubt = V.board_inst && inst != V.board_inst;
	held = pcinet_grace_look(&V.board_grace, doubt, (u32)pv_now(),
				 PCINET_PEER_GRACE_MS);
	if (doubt && !held)
		inst = V.board_inst;
	if (inst != V.board_inst) {
		old = V.board_inst;
		V.board_inst = inst;
		V.board_grace = (struct pcinet_grace){ 0 };
		pv_log("peer's virtio instance 0x%08x (was 0x%08x)", inst, old);
		/*
		 * A peer that stopped or restarted: a new session, a new
		 * instance of each device.  The first instance we see (from 0)
		 * may already drive a device: its driver state may come
		 * before its region header, so that is no reason to reset.
		 */
		for (k = 0; k < V.nr_on; k++)
			if (old && V.on[k]->be == BE_READY)
				session_end(V.on[k], call_fd, "peer restarted");
	}
	write_rhdr(V.inst);
	for (k = 0; k < V.nr_on; k++) {
		d = V.on[k];
		if (d->be != BE_READY)
			continue;
		if (!d->published) {
			publish(d, call_fd);
			continue;
		}
		refresh(d);
		drv_poll(d, peer_id, call_fd);
	}
}

int pvio_start(u8 *win, u64 win_size, int win_fd,
	       const struct pcinet_layout *lay, int side)
{
	const char *qsd = getenv("PCINET_QSD");
	const char *vfsd = getenv("PCINET_VIRTIOFSD");
	unsigned int k, q;
	struct pv_dev *d;

	(void)win_size;
	if (!pvio_enabled())
		return 0;
	if (V.d[PV_BLK].t && access(V.d[PV_BLK].arg, R_OK | W_OK))
		return -errno;
	V.d[PV_BLK].prog = qsd && *qsd ? qsd : "qemu-storage-daemon";
	V.d[PV_FS].prog = vfsd && *vfsd ? vfsd : "/usr/lib/qemu/virtiofsd";
	V.win = win;
	V.win_fd = win_fd;
	if (!place(lay, side)) {
		pv_log("the window has no usable virtio regions: no device offered");
		return 0;
	}
	snprintf(V.dir, sizeof(V.dir), "/tmp/pcinet-peer-vio.XXXXXX");
	if (!mkdtemp(V.dir))
		return -errno;
	/*
	 * Ours to write: a former pcinet-peer killed on this side left its
	 * region header and offers here.  Cleared before we announce
	 * PCINET_F_VIRTIO, or the peer registers a dead offer, probes it and
	 * waits for answers nobody gives until our own offer replaces it.
	 */
	memset(V.win + V.drv_reg, 0, PCINET_VIO_FIXED_SIZE);
	V.zeroed = true;
	V.inst = pv_random();
	for (k = 0; k < V.nr_on; k++) {
		d = V.on[k];
		snprintf(d->sock, sizeof(d->sock), "%s/%s.sock", V.dir,
			 d->t->device_id == VIRTIO_ID_BLOCK ? "blk" : "fs");
		for (q = 0; q < d->t->nr_vq; q++) {
			d->kick_fd[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (d->kick_fd[q] < 0)
				return -errno;
		}
		pv_log("%s %s: slot %u, spans 0x%llx and 0x%llx of 0x%llx bytes, inst 0x%08x",
		       d->t->name, d->arg, d->t->slot, (unsigned long long)d->ds,
		       (unsigned long long)d->us, (unsigned long long)d->span,
		       V.inst);
	}
	V.usable = true;
	for (k = 0; k < V.nr_on; k++)
		be_step(V.on[k], -1);
	return 0;
}

void pvio_stop(int call_fd)
{
	struct pv_dev *d;
	unsigned int k;

	if (!V.usable)
		return;
	for (k = 0; k < V.nr_on; k++)
		withdraw(V.on[k], call_fd, "stopping");
	if (V.zeroed) {
		write_rhdr(0);
		ring_board(call_fd);
	}
	for (k = 0; k < V.nr_on; k++) {
		d = V.on[k];
		if (d->be == BE_READY)
			rings_stop(d);
		be_kill(d, 1000);
		unlink(d->sock);
		pv_log("%s stopped: %llu offers, %llu answers, %llu kicks, %llu config writes",
		       d->t->name, (unsigned long long)d->offers,
		       (unsigned long long)d->answers,
		       (unsigned long long)d->kicks,
		       (unsigned long long)d->cfg_writes);
		if (d->drained)
			pv_log("%s: %llu request(s) waited for when its rings stopped",
			       d->t->name, (unsigned long long)d->drained);
	}
	rmdir(V.dir);
}
