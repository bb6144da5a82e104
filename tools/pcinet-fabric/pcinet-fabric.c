// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet-fabric - the "platform" of a pcinet link between two QEMU guests.
 *
 * Implements the server side of QEMU's ivshmem client-server protocol
 * (docs/specs/ivshmem-spec.rst in QEMU) for two peers using
 * "-device ivshmem-doorbell".  It creates the shared window, lays out the
 * pcinet window header in it (drivers/net/pcinet/pcinet_layout.h), hands
 * the window and the doorbell eventfds to the guests, and keeps the
 * header's attach_epoch[] up to date as guests come and go.
 *
 * Protocol summary (server -> client only; the client never writes).
 * Every message is one little-endian int64, optionally carrying one file
 * descriptor as SCM_RIGHTS.  On connect the server sends, in order:
 *
 *   1. 0                        protocol version
 *   2. ID                       the client's peer ID
 *   3. -1   + shm fd            the shared memory
 *   4. PEER + eventfd, N times  per existing peer: fds to ring its vectors
 *                               0..N-1, in vector order
 *   5. ID   + eventfd, N times  the client's own fds, to receive on
 *                               vectors 0..N-1
 *
 * and afterwards, at any time:
 *
 *   6. PEER + eventfd, N times  a peer connected (as in 4.)
 *      PEER without fd          a peer disconnected
 *
 * The client counts messages per peer to know which vector an eventfd is
 * for, so the N messages of one peer must be sent back to back and in
 * vector order.  Each message is sent with its own sendmsg() so that a
 * descriptor always travels with the 8 bytes it belongs to.
 *
 * By default a guest gets the other guest's own eventfds in 4. and 6.:
 * doorbells go from guest to guest without the fabric seeing them.  In
 * interposed mode (-I, implied by -C and -X) the fabric sends eventfds of
 * its own there instead (same messages, same order), polls them and
 * forwards every doorbell to the real eventfd, which lets it drop, delay,
 * duplicate or hold back doorbells.  The control socket (-C) also starts
 * "scribblers" that overwrite a region of the window with junk at a given
 * rate: the fabric as a hostile third party on the bus.  See README.md.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "layout-shim.h"
#include "../testing/pcinet/ntb-ivshmem/ntb_ivshmem_layout.h"

#define NR_SLOTS		2		/* a pcinet link has two sides */
#define MAX_VECTORS		16
#define IVSHMEM_MAX_ID		0xfffe		/* QEMU peer IDs are 16 bits */
#define DEF_VECTORS		4		/* PCINET_NR_VEC */
#define DEF_SIZE		(16ULL << 20)
#define MIN_SIZE		(4ULL << 20)
#define MAX_SIZE		(1ULL << 30)

#define IVSHMEM_PROTO_VERSION	0
#define IVSHMEM_SHM_MSG		(-1)

/* Window placement: pcinet_layout_fill() in pcinet_layout.h. */

/* Fault injection limits: everything the control socket accepts is bounded. */
#define MAX_SCRIBBLERS		4		/* scribbles running at once */
#define MAX_SCRIBBLE_RATE	1000000		/* writes per second */
#define MAX_SCRIBBLE_MS		(3600 * 1000)	/* longest scribble */
#define MAX_SCRIBBLE_BURST	50000		/* writes per timer tick */
#define SCRIBBLE_TICK_NS	10000000ULL	/* 10 ms */
#define MAX_BYTE_RUN		16		/* "bytes" mode: run length */
#define MAX_FAULT_MS		(3600 * 1000)	/* longest timed doorbell fault */
#define MAX_DELAY_MS		10000
#define MAX_DELAYED		4096		/* delayed doorbells per direction */
#define DUP_GAP_NS		1000000ULL	/* a duplicate follows 1 ms later */
#define MAX_CTL_CLIENTS		4
#define CTL_LINE_MAX		256
#define CTL_REPLY_MAX		1024
#define CTL_MAX_ARGS		8
#define MAX_STARTUP_CMDS	8		/* -X */
#define NSEC_PER_SEC		1000000000ULL
#define NSEC_PER_MSEC		1000000ULL

/* One connected QEMU (or other ivshmem client). */
struct peer {
	bool in_use;
	bool announced;		/* the other peer was sent our eventfds */
	bool dead;		/* a send to it failed: disconnect it */
	int sock;
	pid_t pid;		/* from SO_PEERCRED, for the log only */
	unsigned int id;	/* ivshmem peer ID; id % 2 == slot */
	int efd[MAX_VECTORS];	/* eventfds to ring this peer's vectors */
	/*
	 * Interposed mode only: the eventfds the *other* peer was given to
	 * ring this one.  The fabric reads them and forwards to efd[].
	 */
	int proxy[MAX_VECTORS];
};

/* Window regions a scribbler can target; see region_bounds(). */
enum region {
	R_HDR, R_CTRL0, R_CTRL1, R_NET0, R_NET1, R_TTY0, R_TTY1, R_ALL,
	R_VDEV0, R_VDRV0, R_VDEV1, R_VDRV1, R_VIO, R_LIVE0, R_LIVE1, NR_REGIONS
};

static const char *const region_name[NR_REGIONS] = {
	"hdr", "ctrl0", "ctrl1", "net0", "net1", "tty0", "tty1", "all",
	"vdev0", "vdrv0", "vdev1", "vdrv1", "vio", "live0", "live1",
};

/*
 * liveN: the two words of control inbox N that say whether its writer
 * runs (magic and gen, pcinet_ctrl_live()): a scribble there makes the
 * writer look stopped or restarted until its next refresh.
 */
#define CTRL_LIVE_SIZE	8ULL

/*
 * vdevN, vdrvN: the first 128 KiB of a virtio region, its fixed part
 * (region header, slot blocks) and the first span's first 64 KiB, where
 * pcinet-peer and pcinet-vhost put the rings; "vio": all four regions,
 * pools included.  Only with -V.
 */
#define VIO_META_SIZE	0x20000ULL

/*
 * SCR_COUNT ("storm"): one word incremented without pause, by a child
 * process, a hostile peer's counter in a tight loop; not a scribble mode.
 */
enum scribble_mode { SCR_RANDOM, SCR_BOUNDS, SCR_BYTES, SCR_COUNT, NR_SCR_MODES };

static const char *const mode_name[NR_SCR_MODES] = { "random", "bounds", "bytes", "count" };

/* Overwrites one region at a fixed rate, driven by its own timerfd. */
struct scribbler {
	bool active;
	int tfd;		/* one-shot timerfd, re-armed every tick */
	enum region region;
	enum scribble_mode mode;
	uint64_t off, len;	/* the region, in the window */
	uint32_t rate;		/* writes per second */
	uint64_t dur_ms;
	uint64_t start_ns;	/* CLOCK_MONOTONIC */
	uint64_t done;		/* writes due so far (some may be skipped) */
	uint64_t writes;	/* writes made */
	uint64_t seed, rng;
	pid_t pid;		/* SCR_COUNT: the child that writes; else 0 */
};

/*
 * Doorbell faults of one direction, indexed by the receiving slot: the
 * faults in dirf[1] apply to side 0's doorbells to side 1 ("0to1").
 * A *_until of 0 means "until told otherwise".
 */
struct dir_fault {
	unsigned int drop_pct;
	unsigned int dup_pct;
	unsigned int delay_ms;
	uint64_t drop_until, dup_until, delay_until;	/* CLOCK_MONOTONIC ns */
	bool frozen;
	uint32_t pending;	/* vectors rung while frozen (latched) */
};

/* A doorbell waiting in a delay queue (a FIFO: delivery order is kept). */
struct delayed {
	uint64_t due;		/* CLOCK_MONOTONIC ns */
	uint64_t cnt;		/* eventfd count to deliver */
	unsigned int v;
};

/* Doorbells on their way to one slot. */
struct delay_queue {
	struct delayed e[MAX_DELAYED];
	unsigned int head, len;
};

/* One connection to the control socket. */
struct ctl_client {
	int fd;			/* -1: free */
	bool discard;		/* skipping the rest of an overlong line */
	size_t len;
	char buf[CTL_LINE_MAX];
};

struct fault_stats {
	uint64_t writes;	/* scribbled words / byte runs */
	uint64_t doorbells;	/* doorbell events read from the proxies */
	uint64_t dropped;
	uint64_t delayed;
	uint64_t duplicated;
	uint64_t frozen;	/* doorbells latched by a freeze */
};

static struct {
	/* configuration */
	const char *sock_path;
	const char *pid_path;
	uint64_t size;
	uint64_t vio_size;		/* -V: each virtio region, 0: none */
	unsigned int nr_vectors;
	bool verbose;
	bool daemonize;
	bool interpose;			/* -I: forward doorbells ourselves */
	bool ntb;			/* -N: the emulated NTB's memory */
	const char *ctl_path;		/* -C */
	const char *startup_cmd[MAX_STARTUP_CMDS];	/* -X */
	unsigned int nr_startup_cmds;

	/* state */
	bool use_syslog;
	int listen_fd;
	int sig_fd;
	int shm_fd;
	struct pcinet_win_hdr *hdr;	/* first page of the window */
	/*
	 * What the header should say.  The window is writable by the guests
	 * (and by our own scribblers), so the fabric never reads its state
	 * back from there: it updates this copy and stores from it.
	 */
	struct pcinet_win_hdr whdr;
	struct pcinet_win_vio wvio;	/* the virtio regions (-V), or zero */
	/*
	 * -N: the emulated NTB's header (ntb_ivshmem_layout.h), stored at
	 * offset 0 instead of a pcinet header; whdr is then the pcinet
	 * window each side's pcinet_ntb lays out in its inbound memory
	 * window (mw_size bytes), used only to find scribble targets.
	 */
	struct ntbe_hdr nhdr;
	char *win;			/* whole window, mapped for scribbling */
	char *sock_abs;			/* for cleanup after chdir("/") */
	char *pid_abs;
	dev_t sock_dev;			/* to unlink only our own socket */
	ino_t sock_ino;
	bool sock_bound;
	bool pid_written;
	struct peer peer[NR_SLOTS];

	/* fault injection (see README.md) */
	int ctl_listen_fd;
	char *ctl_abs;
	dev_t ctl_dev;
	ino_t ctl_ino;
	bool ctl_bound;
	struct ctl_client ctl[MAX_CTL_CLIENTS];
	struct scribbler scr[MAX_SCRIBBLERS];
	struct dir_fault dirf[NR_SLOTS];
	int delay_fd;			/* timerfd for the earliest dq[] head */
	struct delay_queue dq[NR_SLOTS];	/* by receiving slot */
	uint64_t db_seed, db_rng;	/* drop/dup decisions */
	uint64_t seed_counter;
	struct fault_stats stats;
	/*
	 * Next ivshmem peer ID per slot.  QEMU 7.2 frees a departed peer's
	 * eventfd array but keeps using it when the same ID comes back
	 * (a use-after-free that crashes the survivor), so an ID is never
	 * reused: each attach takes the next one of the slot's parity.
	 */
	unsigned int next_id[NR_SLOTS];
} fab = {
	.next_id = { 0, 1 },
	.size = DEF_SIZE,
	.nr_vectors = DEF_VECTORS,
	.listen_fd = -1,
	.sig_fd = -1,
	.shm_fd = -1,
	.ctl_listen_fd = -1,
	.delay_fd = -1,
};

/* ------------------------------------------------------------------ */
/* logging                                                            */

static void vlog(int prio, const char *fmt, va_list ap)
{
	if (fab.use_syslog) {
		vsyslog(prio, fmt, ap);
		return;
	}
	fputs("pcinet-fabric: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void __attribute__((format(printf, 1, 2))) log_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERR, fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 1, 2))) log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_INFO, fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 1, 2))) log_dbg(const char *fmt, ...)
{
	va_list ap;

	if (!fab.verbose)
		return;
	va_start(ap, fmt);
	vlog(LOG_DEBUG, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* command line                                                       */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pcinet-fabric -S SOCKET_PATH [-m SIZE] [-V SIZE] [-n VECTORS] [-N]\n"
		"                     [-p PIDFILE]\n"
		"                     [-I] [-C CONTROL_PATH] [-X COMMAND]... [-d | -F] [-v] [-h]\n"
		"\n"
		"ivshmem server for a two-sided pcinet link between QEMU guests using\n"
		"  -chardev socket,path=SOCKET_PATH,id=c0\n"
		"  -device ivshmem-doorbell,chardev=c0,vectors=VECTORS\n"
		"\n"
		"  -S PATH   UNIX socket to listen on (required)\n"
		"  -m SIZE   shared window size, power of two from 4M to 1G, K/M/G\n"
		"            suffix allowed (default 16M)\n"
		"  -V SIZE   four virtio regions of SIZE (a multiple of 64K, at most\n"
		"            1/8 of the window) at the window's end (default none)\n"
		"  -n N      doorbell vectors per peer, 1..%d (default %d)\n"
		"  -N        the memory of an emulated NTB (ntb_ivshmem.ko, test-only)\n"
		"            instead of a pcinet window: its header, two registers\n"
		"            blocks and two memory windows of SIZE/4 (at least 16M)\n"
		"  -p FILE   write the server's pid to FILE\n"
		"  -I        interpose: forward the guests' doorbells through the\n"
		"            fabric (needed for doorbell faults)\n"
		"  -C PATH   control socket for fault injection (implies -I)\n"
		"  -X CMD    run control command CMD at startup, e.g.\n"
		"            -X 'doorbell drop 10' (repeatable, implies -I)\n"
		"  -d        daemonize (log to syslog)\n"
		"  -F        stay in the foreground (the default)\n"
		"  -v        verbose log\n"
		"  -h        this help\n",
		MAX_VECTORS, DEF_VECTORS);
}

static void __attribute__((noreturn, format(printf, 1, 2))) bad_arg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERR, fmt, ap);
	va_end(ap);
	fputs("Try 'pcinet-fabric -h' for help.\n", stderr);
	exit(1);
}

/* Parse "16M", "4096K", "1G", "16777216".  Returns false on junk or overflow. */
static bool parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	uint64_t mult = 1;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		mult = 1ULL << 10;
		end++;
		break;
	case 'm': case 'M':
		mult = 1ULL << 20;
		end++;
		break;
	case 'g': case 'G':
		mult = 1ULL << 30;
		end++;
		break;
	default:
		return false;
	}
	if (*end || v > UINT64_MAX / mult)
		return false;
	*out = v * mult;
	return true;
}

static void parse_args(int argc, char **argv)
{
	unsigned long n;
	char *end;
	int c;

	opterr = 0;	/* we print our own messages */
	while ((c = getopt(argc, argv, ":S:m:V:n:p:NIC:X:dFvh")) != -1) {
		switch (c) {
		case 'S':
			fab.sock_path = optarg;
			break;
		case 'm':
			if (!parse_size(optarg, &fab.size) || fab.size < MIN_SIZE ||
			    fab.size > MAX_SIZE || (fab.size & (fab.size - 1)))
				bad_arg("invalid size '%s': must be a power of two from 4M to 1G",
					optarg);
			break;
		case 'V':
			if (!parse_size(optarg, &fab.vio_size) || !fab.vio_size ||
			    fab.vio_size % PCINET_VIO_ALIGN)
				bad_arg("invalid virtio region size '%s': must be a nonzero multiple of 64K",
					optarg);
			break;
		case 'n':
			errno = 0;
			n = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || n < 1 || n > MAX_VECTORS)
				bad_arg("invalid vector count '%s': must be 1..%d",
					optarg, MAX_VECTORS);
			fab.nr_vectors = n;
			break;
		case 'p':
			fab.pid_path = optarg;
			break;
		case 'N':
			fab.ntb = true;
			break;
		case 'I':
			fab.interpose = true;
			break;
		case 'C':
			fab.ctl_path = optarg;
			fab.interpose = true;
			break;
		case 'X':
			if (fab.nr_startup_cmds == MAX_STARTUP_CMDS)
				bad_arg("at most %d -X commands", MAX_STARTUP_CMDS);
			fab.startup_cmd[fab.nr_startup_cmds++] = optarg;
			fab.interpose = true;
			break;
		case 'd':
			fab.daemonize = true;
			break;
		case 'F':
			fab.daemonize = false;
			break;
		case 'v':
			fab.verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			bad_arg("option -%c needs an argument", optopt);
		default:
			bad_arg("unknown option -%c", optopt);
		}
	}
	if (optind < argc)
		bad_arg("unexpected argument '%s'", argv[optind]);
	if (!fab.sock_path)
		bad_arg("no socket path given (-S)");
	if (!*fab.sock_path ||
	    strlen(fab.sock_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		bad_arg("socket path '%s' is empty or too long", fab.sock_path);
	if (fab.pid_path && !*fab.pid_path)
		bad_arg("empty pid file name");
	if (fab.ctl_path &&
	    (!*fab.ctl_path ||
	     strlen(fab.ctl_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)))
		bad_arg("control socket path '%s' is empty or too long", fab.ctl_path);
	if (fab.vio_size > fab.size / 8)
		bad_arg("virtio regions of %llu bytes do not fit: at most 1/8 of the window each",
			(unsigned long long)fab.vio_size);
	if (fab.ntb && fab.vio_size)
		bad_arg("-N: the emulated NTB carries no virtio regions (-V)");
	if (fab.ntb && fab.size < 4 * MIN_SIZE)
		bad_arg("-N: the emulated NTB needs at least %lluM", 4 * MIN_SIZE >> 20);
	if (fab.ctl_path && !strcmp(fab.ctl_path, fab.sock_path))
		bad_arg("the control socket (-C) must differ from the server socket (-S)");
}

/* ------------------------------------------------------------------ */
/* shared window                                                      */

/* memfd_create() is missing before Linux 3.17: use an unlinked POSIX shm. */
static int shm_fallback(void)
{
	char name[64];
	int fd, i;

	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "/pcinet-fabric-%ld-%d", (long)getpid(), i);
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			shm_unlink(name);
			return fd;
		}
		if (errno != EEXIST)
			break;
	}
	return -1;
}

/* Check that both rings of one data inbox fit inside it. */
static bool inbox_fits(unsigned int i)
{
	uint64_t off = le64toh(fab.whdr.side[i].data_off);
	uint64_t size = le64toh(fab.whdr.side[i].data_size);
	struct pcinet_ring_loc tty, net;

	if (pcinet_layout_ring(off, size, PCINET_CHAN_TTY, &tty) ||
	    pcinet_layout_ring(off, size, PCINET_CHAN_NET, &net))
		return false;
	log_dbg("side %u: ctrl 0x%llx, data 0x%llx+0x%llx, tty ring 0x%llx+0x%x, net ring 0x%llx+0x%x",
		i, (unsigned long long)le64toh(fab.whdr.side[i].ctrl_off),
		(unsigned long long)off, (unsigned long long)size,
		(unsigned long long)tty.off, tty.size,
		(unsigned long long)net.off, net.size);
	return tty.off + tty.size <= off + size && net.off + net.size <= off + size &&
	       off + size <= fab.size;
}

/*
 * Store the header page from fab.whdr with pcinet_layout_write(): magic
 * cleared, everything else, the rest of the page zero, then the magic (a
 * header with the magic is complete).  At setup the page is fresh; later
 * ("restore") it repairs a scribbled one.
 */
static void write_header(void)
{
	struct ntbe_hdr *h = (struct ntbe_hdr *)fab.hdr;

	if (!fab.ntb) {
		pcinet_layout_write_vio(fab.hdr, &fab.whdr, &fab.wvio);
		return;
	}
	/*
	 * The same order as pcinet_layout_write(): magic cleared, the rest
	 * of the page, then the magic with a release (pairs with the
	 * acquire in ntb_ivshmem.c's probe).  The registers that follow the
	 * header page are the guests' and are left alone.
	 */
	__atomic_store_n(&h->magic, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memset((char *)fab.hdr + sizeof(h->magic), 0, NTBE_HDR_SIZE - sizeof(h->magic));
	memcpy((char *)h + sizeof(h->magic), (const char *)&fab.nhdr + sizeof(h->magic),
	       sizeof(*h) - sizeof(h->magic));
	__atomic_store_n(&h->magic, htole32(NTBE_MAGIC), __ATOMIC_RELEASE);
}

/* Where the header keeps attach_epoch[] and doorbell_id[]. */
static uint32_t *hdr_epoch(unsigned int slot)
{
	return fab.ntb ? &((struct ntbe_hdr *)fab.hdr)->attach_epoch[slot] :
			 &fab.hdr->attach_epoch[slot];
}

static uint32_t *hdr_doorbell_id(unsigned int slot)
{
	return fab.ntb ? &((struct ntbe_hdr *)fab.hdr)->doorbell_id[slot] :
			 &fab.hdr->doorbell_id[slot];
}

/* Our copies of the same words. */
static uint32_t *copy_epoch(unsigned int slot)
{
	return fab.ntb ? &fab.nhdr.attach_epoch[slot] : &fab.whdr.attach_epoch[slot];
}

static uint32_t *copy_doorbell_id(unsigned int slot)
{
	return fab.ntb ? &fab.nhdr.doorbell_id[slot] : &fab.whdr.doorbell_id[slot];
}

static int setup_shm(void)
{
	bool memfd = true;
	void *p;

	fab.shm_fd = memfd_create("pcinet-fabric", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fab.shm_fd < 0 && errno == ENOSYS) {
		memfd = false;
		fab.shm_fd = shm_fallback();
	}
	if (fab.shm_fd < 0) {
		log_err("cannot create shared memory: %s", strerror(errno));
		return -1;
	}
	if (ftruncate(fab.shm_fd, fab.size) < 0) {
		log_err("cannot size shared memory to %llu bytes: %s",
			(unsigned long long)fab.size, strerror(errno));
		return -1;
	}
	/* The size is part of the ABI: no client may shrink or grow it. */
	if (memfd && fcntl(fab.shm_fd, F_ADD_SEALS,
			   F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		log_dbg("cannot seal shared memory: %s", strerror(errno));

	/*
	 * The server itself only touches the header page; the whole window
	 * is mapped only when a scribbler needs it (map_window()).
	 */
	p = mmap(NULL, PCINET_HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fab.shm_fd, 0);
	if (p == MAP_FAILED) {
		log_err("cannot map shared memory: %s", strerror(errno));
		return -1;
	}
	fab.hdr = p;

	/*
	 * Our copy of the header (pcinet_layout_init() in two halves: the
	 * fabric keeps the copy to update epochs and IDs, and to restore).
	 * Reserved fields and epochs are zero.  With -V the four virtio
	 * regions take the end of the window and the inboxes what is left;
	 * without it the header is exactly pcinet_layout_fill()'s.
	 */
	if (fab.ntb)
		ntbe_layout(&fab.nhdr, fab.size, fab.nr_vectors);
	if (pcinet_layout_fill_vio(&fab.whdr, &fab.wvio,
				   fab.ntb ? le64toh(fab.nhdr.mw_size) : fab.size,
				   fab.nr_vectors, fab.vio_size) ||
	    !inbox_fits(0) || !inbox_fits(1)) {
		log_err("window of %llu bytes too small for the pcinet rings",
			(unsigned long long)fab.size);
		return -1;
	}
	write_header();
	log_dbg("window: %llu bytes, %u vectors, %s", (unsigned long long)fab.size,
		fab.nr_vectors, memfd ? "memfd" : "shm_open");
	return 0;
}

/*
 * Odd while side @slot is attached.  Only the server writes the epochs;
 * the guests read them (acquire) to find out that their peer went away.
 */
static void bump_epoch(unsigned int slot)
{
	/* From our copy: the window's may have been overwritten. */
	uint32_t e = le32toh(*copy_epoch(slot)) + 1;

	*copy_epoch(slot) = htole32(e);
	/*
	 * Pairs with the acquire in fabric-client.c's print_epoch().  A side
	 * reads the word on its own (pcinet_link.c): no pair is needed there,
	 * nothing in the window is ordered by it.
	 */
	__atomic_store_n(hdr_epoch(slot), htole32(e), __ATOMIC_RELEASE);
	log_dbg("attach_epoch[%u] = %u (%s)", slot, e, (e & 1) ? "attached" : "detached");
}

/* ------------------------------------------------------------------ */
/* listening socket, pid file, signals                                */

static char *abs_path(const char *path)
{
	char cwd[PATH_MAX], *res;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&res, "%s/%s", cwd, path) < 0)
		return NULL;
	return res;
}

/*
 * Is somebody serving @path?  Probe with a *datagram* connect: on a path
 * bound by a live stream socket it fails with EPROTOTYPE, on a socket file
 * nobody has bound any more with ECONNREFUSED.  Unlike a stream connect,
 * this never shows up as a client at a running fabric (a stream probe would
 * take a slot there and flip an attach_epoch).
 */
static int check_stale_socket(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, err;

	if (lstat(sa->sun_path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		log_err("cannot stat %s: %s", sa->sun_path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		log_err("%s exists and is not a socket", sa->sun_path);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_err("socket: %s", strerror(errno));
		return -1;
	}
	err = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 ? errno : 0;
	close(fd);
	switch (err) {
	case 0:
	case EPROTOTYPE:
		log_err("socket %s busy: another server is listening there", sa->sun_path);
		return -1;
	case ECONNREFUSED:
		log_info("removing stale socket %s", sa->sun_path);
		if (unlink(sa->sun_path) < 0 && errno != ENOENT) {
			log_err("cannot remove stale socket %s: %s", sa->sun_path,
				strerror(errno));
			return -1;
		}
		return 0;
	case ENOENT:
		return 0;	/* went away meanwhile */
	default:
		log_err("cannot probe socket %s: %s", sa->sun_path, strerror(err));
		return -1;
	}
}

/*
 * Listen on the UNIX stream socket @path.  *@fd, *@abs, *@bound and the
 * inode are filled in as far as we get, for unlink_own_socket().
 */
static int listen_unix(const char *path, int backlog, int *fd, char **abs,
		       bool *bound, dev_t *dev, ino_t *ino)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	strcpy(sa.sun_path, path);	/* length checked in parse_args() */
	if (check_stale_socket(&sa) < 0)
		return -1;

	*abs = abs_path(path);
	if (!*abs) {
		log_err("cannot resolve %s: %s", path, strerror(errno));
		return -1;
	}
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (*fd < 0) {
		log_err("socket: %s", strerror(errno));
		return -1;
	}
	if (bind(*fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EADDRINUSE)	/* lost a race with another server */
			log_err("socket %s busy: another server is listening there", path);
		else
			log_err("cannot bind %s: %s", path, strerror(errno));
		return -1;
	}
	*bound = true;
	if (stat(path, &st) == 0) {
		*dev = st.st_dev;
		*ino = st.st_ino;
	}
	if (listen(*fd, backlog) < 0) {
		log_err("cannot listen on %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Only remove a socket if it is still ours (not replaced by someone). */
static void unlink_own_socket(const char *abs, bool bound, dev_t dev, ino_t ino)
{
	struct stat st;

	if (bound && abs && stat(abs, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
		unlink(abs);
}

static int setup_socket(void)
{
	return listen_unix(fab.sock_path, 8, &fab.listen_fd, &fab.sock_abs,
			   &fab.sock_bound, &fab.sock_dev, &fab.sock_ino);
}

static int write_pid_file(void)
{
	int fd;

	if (!fab.pid_path)
		return 0;
	fab.pid_abs = abs_path(fab.pid_path);
	fd = open(fab.pid_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!fab.pid_abs || fd < 0) {
		log_err("cannot write pid file %s: %s", fab.pid_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fab.pid_written = true;
	if (dprintf(fd, "%ld\n", (long)getpid()) < 0 || close(fd) < 0) {
		log_err("cannot write pid file %s: %s", fab.pid_path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * SIGINT/SIGTERM/SIGHUP are blocked and read from a signalfd in the poll
 * loop, so shutdown never races with the loop body.
 */
static int setup_signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	fab.sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fab.sig_fd < 0) {
		log_err("signalfd: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Fork; the parent exits once the child is ready (socket listening, pid
 * file written), so "pcinet-fabric -d && qemu ..." works.
 */
static int daemonize(void)
{
	int pfd[2], null;
	char c = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		log_err("pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		log_err("fork: %s", strerror(errno));
		return -1;
	}
	if (pid > 0) {
		close(pfd[1]);
		/* The socket and pid file are the child's now: no cleanup here. */
		_exit(read(pfd[0], &c, 1) == 1 && c == '1' ? 0 : 1);
	}
	close(pfd[0]);
	if (setsid() < 0 || write_pid_file() < 0)
		return -1;
	if (chdir("/") < 0)
		return -1;
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	openlog("pcinet-fabric", LOG_PID, LOG_DAEMON);
	fab.use_syslog = true;
	c = '1';
	if (write(pfd[1], &c, 1) != 1)
		return -1;
	close(pfd[1]);
	return 0;
}

/* ------------------------------------------------------------------ */
/* fault injection: helpers                                           */

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

/* splitmix64: small, seedable, good enough to pick offsets and values. */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A seed for when none was given.  It is reported, so a run can be repeated. */
static uint64_t fresh_seed(void)
{
	uint64_t s = now_ns() ^ ((uint64_t)getpid() << 32) ^ ++fab.seed_counter;

	return rng_next(&s);
}

/* Arm the timerfd @fd to expire once at CLOCK_MONOTONIC @when ns; 0 disarms. */
static void arm_timer(int fd, uint64_t when)
{
	struct itimerspec its = {
		.it_value = {
			.tv_sec = when / NSEC_PER_SEC,
			.tv_nsec = when % NSEC_PER_SEC,
		},
	};

	if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		log_err("timerfd_settime: %s", strerror(errno));
}

/* Consume a timerfd expiry; false if there was none (spurious wakeup). */
static bool timer_expired(int fd)
{
	uint64_t n;

	return read(fd, &n, sizeof(n)) == sizeof(n);
}

/* Strict decimal in 0..@max. */
static bool parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* A seed: any 64-bit number, decimal or 0x-prefixed hex. */
static bool parse_seed(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* Seconds with up to three decimals ("2", "0.5", "1.25") as ms, at most @max_ms. */
static bool parse_ms(const char *s, uint64_t max_ms, uint64_t *out)
{
	uint64_t ms = 0, scale = 1000;

	if (!isdigit((unsigned char)*s))
		return false;
	for (; isdigit((unsigned char)*s); s++) {
		ms = ms * 10 + (*s - '0');
		if (ms > max_ms / 1000 + 1)
			return false;
	}
	ms *= 1000;
	if (*s == '.') {
		if (!isdigit((unsigned char)*++s))
			return false;
		for (; isdigit((unsigned char)*s); s++) {
			if (scale == 1)
				return false;
			scale /= 10;
			ms += (*s - '0') * scale;
		}
	}
	if (*s || ms > max_ms)
		return false;
	*out = ms;
	return true;
}

/* snprintf() onto the end of @buf, silently truncating. */
static void __attribute__((format(printf, 3, 4)))
append(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strnlen(buf, size);
	va_list ap;

	if (len + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* fault injection: interposed doorbells                              */

/*
 * A direction is named by the sending side ("0to1": side 0 rings side 1),
 * and stored as a mask of receiving slots (bit 1 for "0to1").
 */
static const char *dir_name(unsigned int mask)
{
	return mask == 3 ? "both" : mask == 2 ? "0to1" : "1to0";
}

static bool parse_dir(const char *s, unsigned int *mask)
{
	if (!strcmp(s, "both"))
		*mask = 3;
	else if (!strcmp(s, "0to1"))
		*mask = 1U << 1;
	else if (!strcmp(s, "1to0"))
		*mask = 1U << 0;
	else
		return false;
	return true;
}

/* Turn off the timed faults of @f whose time is up. */
static void expire_faults(struct dir_fault *f, uint64_t now)
{
	if (f->drop_until && now >= f->drop_until) {
		f->drop_pct = 0;
		f->drop_until = 0;
	}
	if (f->dup_until && now >= f->dup_until) {
		f->dup_pct = 0;
		f->dup_until = 0;
	}
	if (f->delay_until && now >= f->delay_until) {
		f->delay_ms = 0;
		f->delay_until = 0;
	}
}

static bool chance(unsigned int pct)
{
	return pct && rng_next(&fab.db_rng) % 100 < pct;
}

/* Ring vector @v of the guest in slot @dst with @cnt.  False if it is gone. */
static bool deliver(unsigned int dst, unsigned int v, uint64_t cnt)
{
	struct peer *p = &fab.peer[dst];

	if (!p->in_use || p->dead || p->efd[v] < 0)
		return false;
	if (write(p->efd[v], &cnt, sizeof(cnt)) != sizeof(cnt)) {
		log_dbg("cannot forward doorbell to peer %u vector %u: %s", dst, v,
			strerror(errno));
		return false;
	}
	return true;
}

/* Deliver, unless doorbells to @dst are frozen: then latch the vector. */
static void deliver_or_latch(unsigned int dst, unsigned int v, uint64_t cnt)
{
	struct dir_fault *f = &fab.dirf[dst];

	if (f->frozen) {
		f->pending |= 1U << v;
		fab.stats.frozen++;
		return;
	}
	deliver(dst, v, cnt);
}

/* One timerfd serves both delay queues: arm it for the earlier head. */
static void dq_arm(void)
{
	uint64_t when = 0;
	unsigned int dst;

	for (dst = 0; dst < NR_SLOTS; dst++) {
		const struct delay_queue *q = &fab.dq[dst];

		if (q->len && (!when || q->e[q->head].due < when))
			when = q->e[q->head].due;
	}
	arm_timer(fab.delay_fd, when);
}

/* Queue a doorbell to @dst; false if the queue is full. */
static bool dq_push(unsigned int dst, uint64_t due, unsigned int v, uint64_t cnt)
{
	struct delay_queue *q = &fab.dq[dst];

	if (q->len == MAX_DELAYED)
		return false;
	q->e[(q->head + q->len) % MAX_DELAYED] = (struct delayed){
		.due = due, .cnt = cnt, .v = v,
	};
	if (q->len++ == 0)
		dq_arm();
	return true;
}

/* Deliver the queued doorbells that are due, or all of them.  Returns how many. */
static unsigned int dq_run(bool all)
{
	uint64_t now = now_ns();
	unsigned int dst, n = 0;

	for (dst = 0; dst < NR_SLOTS; dst++) {
		struct delay_queue *q = &fab.dq[dst];

		while (q->len && (all || q->e[q->head].due <= now)) {
			const struct delayed *d = &q->e[q->head];

			deliver_or_latch(dst, d->v, d->cnt);
			q->head = (q->head + 1) % MAX_DELAYED;
			q->len--;
			n++;
		}
	}
	dq_arm();
	return n;
}

static void delay_event(void)
{
	timer_expired(fab.delay_fd);
	dq_run(false);
}

/*
 * Let doorbells to @dst through again.  A vector rung while frozen gets
 * one doorbell now, however often it was rung: an interrupt controller
 * latches a masked interrupt as one pending bit.
 */
static unsigned int thaw(unsigned int dst)
{
	struct dir_fault *f = &fab.dirf[dst];
	unsigned int v, n = 0;

	f->frozen = false;
	for (v = 0; v < fab.nr_vectors; v++)
		if ((f->pending & (1U << v)) && deliver(dst, v, 1))
			n++;
	f->pending = 0;
	return n;
}

/* The guest in @slot left: forget what was on its way to it. */
static void doorbell_peer_gone(unsigned int slot)
{
	if (!fab.interpose)
		return;
	fab.dq[slot].len = 0;
	fab.dq[slot].head = 0;
	fab.dirf[slot].pending = 0;
	dq_arm();
}

/*
 * The other guest rang vector @v of the guest in @dst.  A doorbell is one
 * read of the proxy eventfd: rings that came in before we read coalesce,
 * as they would in the receiving QEMU, and the count is passed on as is.
 */
static void proxy_event(unsigned int dst, unsigned int v)
{
	struct dir_fault *f = &fab.dirf[dst];
	uint64_t cnt, now, delay;

	if (read(fab.peer[dst].proxy[v], &cnt, sizeof(cnt)) != sizeof(cnt))
		return;
	fab.stats.doorbells++;
	now = now_ns();
	expire_faults(f, now);
	if (f->frozen) {
		f->pending |= 1U << v;
		fab.stats.frozen++;
		return;
	}
	if (chance(f->drop_pct)) {
		fab.stats.dropped++;
		return;
	}
	delay = f->delay_ms * NSEC_PER_MSEC;
	if (delay && dq_push(dst, now + delay, v, cnt))
		fab.stats.delayed++;
	else
		deliver(dst, v, cnt);	/* no delay, or the queue is full */
	if (chance(f->dup_pct)) {
		/* Later, or the receiving QEMU would just see a count of 2. */
		fab.stats.duplicated++;
		if (!dq_push(dst, now + delay + DUP_GAP_NS, v, 1))
			deliver(dst, v, 1);
	}
}

/* ------------------------------------------------------------------ */
/* fault injection: window scribblers                                 */

static int map_window(void)
{
	void *p;

	if (fab.win)
		return 0;
	p = mmap(NULL, fab.size, PROT_READ | PROT_WRITE, MAP_SHARED, fab.shm_fd, 0);
	if (p == MAP_FAILED)
		return -1;
	fab.win = p;
	return 0;
}

/* Where region @r is, from the header as the fabric wrote it (fab.whdr). */
static void pcinet_region_bounds(enum region r, uint64_t *off, uint64_t *len)
{
	const struct pcinet_win_vio_side *vside;
	const struct pcinet_win_side *side;
	struct pcinet_ring_loc loc = { 0, 0 };

	switch (r) {
	case R_HDR:
		*off = 0;
		*len = PCINET_HDR_SIZE;
		return;
	case R_CTRL0:
	case R_CTRL1:
		*off = le64toh(fab.whdr.side[r - R_CTRL0].ctrl_off);
		*len = PCINET_CTRL_SIZE;
		return;
	case R_NET0:
	case R_NET1:
	case R_TTY0:
	case R_TTY1:
		side = &fab.whdr.side[(r - R_NET0) % 2];
		/* Cannot fail: inbox_fits() placed both rings at setup. */
		pcinet_layout_ring(le64toh(side->data_off), le64toh(side->data_size),
				   r <= R_NET1 ? PCINET_CHAN_NET : PCINET_CHAN_TTY, &loc);
		*off = loc.off;
		*len = loc.size;
		return;
	case R_VDEV0:
	case R_VDRV0:
	case R_VDEV1:
	case R_VDRV1:
		vside = &fab.wvio.side[(r - R_VDEV0) / 2];
		*off = le64toh((r - R_VDEV0) % 2 ? vside->drv_off : vside->dev_off);
		*len = fab.vio_size < VIO_META_SIZE ? fab.vio_size : VIO_META_SIZE;
		return;
	case R_LIVE0:
	case R_LIVE1:
		*off = le64toh(fab.whdr.side[r - R_LIVE0].ctrl_off);
		*len = CTRL_LIVE_SIZE;
		return;
	case R_VIO:
		/* pcinet_layout_fill_vio(): the four regions end the window */
		*off = le64toh(fab.wvio.side[0].dev_off);
		*len = 4 * fab.vio_size;
		return;
	case R_ALL:
	default:
		*off = 0;
		*len = fab.size;
		return;
	}
}

/*
 * With -N, side s's pcinet regions (ctrlS, netS, ttyS, liveS) are in its
 * inbound memory window, at the offsets pcinet_ntb's window has there;
 * "hdr" is the emulated NTB's header and "all" the whole memory.
 */
static void region_bounds(enum region r, uint64_t *off, uint64_t *len)
{
	unsigned int owner;

	if (fab.ntb && r == R_HDR) {
		*off = 0;
		*len = NTBE_HDR_SIZE;
		return;
	}
	pcinet_region_bounds(r, off, len);
	if (!fab.ntb || r == R_ALL || r == R_HDR)
		return;
	switch (r) {
	case R_CTRL0: case R_NET0: case R_TTY0: case R_LIVE0:
		owner = 0;
		break;
	case R_CTRL1: case R_NET1: case R_TTY1: case R_LIVE1:
		owner = 1;
		break;
	default:	/* no virtio regions with -N */
		*off = 0;
		*len = 0;
		return;
	}
	*off += le64toh(fab.nhdr.mw_off[owner]);
}

/*
 * "bounds" mode: values that break index and length checks.  A quarter
 * are boundary values, a quarter sizes of the window and the region (and
 * off by one), and half are the word's own value moved by a small or large
 * step: a free-running index that jumps.
 */
static uint32_t nasty_value(const struct scribbler *s, uint64_t r, uint32_t cur)
{
	static const uint32_t fixed[] = {
		0, 1, 2, 4, 0x3f, 0x40, 0x41, 0xff, 0x100, 0xfff, 0x1000, 0xffff,
		0x10000, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffff0,
		0xfffffffc, 0xfffffffe, 0xffffffff, PCINET_WIN_MAGIC,
		PCINET_CTRL_MAGIC,
	};
	static const int32_t step[] = {
		1, -1, 4, -4, 64, -64, 4096, -4096, 0x10000, -0x10000, INT32_MIN,
	};
	const uint32_t sized[] = {
		s->len, s->len - 1, s->len + 1, s->len / 2, fab.size, fab.size - 1,
		fab.size + 1, PCINET_TTY_RING_SIZE, PCINET_TTY_RING_SIZE + 1,
		PCINET_NET_RING_MIN,
	};

	switch (r & 3) {
	case 0:
		return fixed[(r >> 2) % ARRAY_SIZE(fixed)];
	case 1:
		return sized[(r >> 2) % ARRAY_SIZE(sized)];
	default:
		return cur + (uint32_t)step[(r >> 2) % ARRAY_SIZE(step)];
	}
}

/*
 * One write: an aligned 32-bit word stored in one access (as a device's
 * DWORD write would be), or in "bytes" mode a run of 1..16 random bytes
 * at any offset, cut off at the end of the region.
 */
static void scribble_one(struct scribbler *s)
{
	uint64_t r = rng_next(&s->rng), off, end = s->off + s->len;
	uint64_t bytes[(MAX_BYTE_RUN + 7) / 8];
	volatile unsigned char *b;
	unsigned int i, n;
	uint32_t *w, val;

	if (s->mode == SCR_BYTES) {
		off = s->off + r % s->len;
		n = 1 + rng_next(&s->rng) % MAX_BYTE_RUN;
		if (n > end - off)
			n = end - off;
		for (i = 0; i < ARRAY_SIZE(bytes); i++)
			bytes[i] = rng_next(&s->rng);
		b = (volatile unsigned char *)fab.win + off;
		for (i = 0; i < n; i++)
			b[i] = ((const unsigned char *)bytes)[i];
		return;
	}
	w = (uint32_t *)(fab.win + s->off + (r % (s->len / 4)) * 4);
	r = rng_next(&s->rng);
	if (s->mode == SCR_RANDOM)
		val = r;
	else
		val = nasty_value(s, r, le32toh(__atomic_load_n(w, __ATOMIC_RELAXED)));
	__atomic_store_n(w, htole32(val), __ATOMIC_RELAXED);
}

/* When to wake up next: every 10 ms, or per write at low rates; never after the end. */
static uint64_t scribble_next(const struct scribbler *s, uint64_t now)
{
	uint64_t tick = NSEC_PER_SEC / s->rate;
	uint64_t end = s->start_ns + s->dur_ms * NSEC_PER_MSEC;

	if (tick < SCRIBBLE_TICK_NS)
		tick = SCRIBBLE_TICK_NS;
	return now + tick < end ? now + tick : end;
}

static void scribble_stop(unsigned int i, const char *why)
{
	struct scribbler *s = &fab.scr[i];

	if (!s->active)
		return;
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
	close(s->tfd);
	s->tfd = -1;
	s->active = false;
	log_info("scribble %s %s: %llu writes in %.3fs (mode %s, seed %llu)",
		 region_name[s->region], why, (unsigned long long)s->writes,
		 (double)(now_ns() - s->start_ns) / NSEC_PER_SEC, mode_name[s->mode],
		 (unsigned long long)s->seed);
}

/*
 * Make the writes due by now: rate * elapsed, in total rate * duration.
 * After a stall (the fabric was stopped, the host overloaded) at most
 * MAX_SCRIBBLE_BURST are made at once; the rest are skipped.
 */
static void scribble_tick(unsigned int i)
{
	struct scribbler *s = &fab.scr[i];
	uint64_t now, elapsed, due, n, k;
	bool over;

	if (!timer_expired(s->tfd))
		return;
	if (s->mode == SCR_COUNT) {	/* the timer is the storm's end */
		scribble_stop(i, "done");
		return;
	}
	now = now_ns();
	elapsed = now - s->start_ns;
	over = elapsed >= s->dur_ms * NSEC_PER_MSEC;
	if (over)
		elapsed = s->dur_ms * NSEC_PER_MSEC;
	due = s->rate * (elapsed / 1000) / 1000000;	/* rate <= 1e6, elapsed <= 1h */
	n = due > s->done ? due - s->done : 0;
	s->done += n;
	if (n > MAX_SCRIBBLE_BURST)
		n = MAX_SCRIBBLE_BURST;
	for (k = 0; k < n; k++)
		scribble_one(s);
	s->writes += n;
	fab.stats.writes += n;
	if (over)
		scribble_stop(i, "done");
	else
		arm_timer(s->tfd, scribble_next(s, now));
}

#define POKE_USAGE "usage: poke REGION OFFSET VALUE"

/*
 * One 32-bit word of a region set to a value (little-endian), for a test
 * that must hit exactly that word: "poke vdrv0 4 0x1234" writes the inst
 * of the region header there.  The reply has the word's former value, to
 * put back.
 */
/*
 * Shared by poke and storm: REGION and OFFSET name one aligned 32-bit word
 * inside a region of this window; its offset in the window in @word.
 */
static bool parse_word(char **argv, const char *verb, unsigned int *region,
		       uint64_t *at, uint64_t *word, char *out, size_t size)
{
	uint64_t off, len;
	unsigned int r;

	for (r = 0; r < NR_REGIONS && strcmp(argv[1], region_name[r]); r++)
		;
	if (r == NR_REGIONS || (r >= R_VDEV0 && r <= R_VIO && !fab.vio_size)) {
		snprintf(out, size, "err no region '%s' to %s", argv[1], verb);
		return false;
	}
	region_bounds(r, &off, &len);
	if (!parse_seed(argv[2], at) || *at % 4 || *at >= len || len - *at < 4) {
		snprintf(out, size, "err OFFSET must be a multiple of 4 below 0x%llx",
			 (unsigned long long)len);
		return false;
	}
	*region = r;
	*word = off + *at;
	return true;
}

/* Shared by scribble and storm: RATE writes a second for SECONDS. */
static bool parse_rate_seconds(const char *rate_s, const char *secs, uint64_t *rate,
			       uint64_t *ms, char *out, size_t size)
{
	if (!parse_uint(rate_s, MAX_SCRIBBLE_RATE, rate) || !*rate) {
		snprintf(out, size, "err RATE must be 1..%d writes/s", MAX_SCRIBBLE_RATE);
		return false;
	}
	if (!parse_ms(secs, MAX_SCRIBBLE_MS, ms) || !*ms) {
		snprintf(out, size, "err SECONDS must be 0.001..%d", MAX_SCRIBBLE_MS / 1000);
		return false;
	}
	return true;
}

static bool mapped(char *out, size_t size)
{
	if (map_window() < 0) {
		snprintf(out, size, "err cannot map the window: %s", strerror(errno));
		return false;
	}
	return true;
}

/* A free scribbler slot and its timer: the slot's index, or -1 (@out says why). */
static int scribbler_get(int *tfd, char *out, size_t size)
{
	unsigned int i;

	for (i = 0; i < MAX_SCRIBBLERS && fab.scr[i].active; i++)
		;
	if (i == MAX_SCRIBBLERS) {
		snprintf(out, size, "err busy: %d scribbles are running", MAX_SCRIBBLERS);
		return -1;
	}
	*tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (*tfd < 0) {
		snprintf(out, size, "err timerfd: %s", strerror(errno));
		return -1;
	}
	return i;
}

/* "scribble stop" (every one) and "storm stop" (@storms_only): how many stopped. */
static unsigned int scribbles_stop(bool storms_only)
{
	unsigned int i, n = 0;

	for (i = 0; i < MAX_SCRIBBLERS; i++) {
		if (fab.scr[i].active && (!storms_only || fab.scr[i].mode == SCR_COUNT)) {
			scribble_stop(i, "stopped");
			n++;
		}
	}
	return n;
}

static void cmd_poke(int argc, char **argv, char *out, size_t size)
{
	uint64_t at, word, val;
	uint32_t *w, old;
	unsigned int r;

	if (argc != 4) {
		snprintf(out, size, "err " POKE_USAGE);
		return;
	}
	if (!parse_word(argv, "poke", &r, &at, &word, out, size))
		return;
	if (!parse_seed(argv[3], &val) || val > UINT32_MAX) {
		snprintf(out, size, "err VALUE must be a 32-bit number");
		return;
	}
	if (!mapped(out, size))
		return;
	w = (uint32_t *)(fab.win + word);
	old = le32toh(__atomic_exchange_n(w, htole32((uint32_t)val), __ATOMIC_RELAXED));
	snprintf(out, size, "ok poke %s+0x%llx old=0x%08x new=0x%08x", region_name[r],
		 (unsigned long long)at, old, (uint32_t)val);
}

#define SCRIBBLE_USAGE "usage: scribble REGION RATE SECONDS [random|bounds|bytes] [SEED] | scribble stop"

static void cmd_scribble(int argc, char **argv, char *out, size_t size)
{
	bool have_mode = false, have_seed = false;
	enum scribble_mode mode = SCR_RANDOM;
	uint64_t rate, ms, seed = 0, off, len;
	struct scribbler *s;
	unsigned int i, r, m;
	int tfd, a, slot;

	if (argc == 2 && !strcmp(argv[1], "stop")) {
		snprintf(out, size, "ok scribble stopped=%u", scribbles_stop(false));
		return;
	}
	if (argc < 4 || argc > 6) {
		snprintf(out, size, "err " SCRIBBLE_USAGE);
		return;
	}
	for (r = 0; r < NR_REGIONS && strcmp(argv[1], region_name[r]); r++)
		;
	if (r == NR_REGIONS) {
		snprintf(out, size,
			 "err bad region '%s': hdr, ctrl0, ctrl1, net0, net1, tty0, tty1, all, vdev0, vdrv0, vdev1, vdrv1, vio, live0 or live1",
			 argv[1]);
		return;
	}
	if (r >= R_VDEV0 && r <= R_VIO && !fab.vio_size) {
		snprintf(out, size, "err no virtio regions (-V) to scribble");
		return;
	}
	if (!parse_rate_seconds(argv[2], argv[3], &rate, &ms, out, size))
		return;
	for (a = 4; a < argc; a++) {
		for (m = 0; m < SCR_COUNT && strcmp(argv[a], mode_name[m]); m++)
			;
		if (m < SCR_COUNT && !have_mode) {
			mode = m;
			have_mode = true;
		} else if (!have_seed && parse_seed(argv[a], &seed)) {
			have_seed = true;
		} else {
			snprintf(out, size, "err bad mode or seed '%s': " SCRIBBLE_USAGE, argv[a]);
			return;
		}
	}
	region_bounds(r, &off, &len);
	if (len < 4) {
		snprintf(out, size, "err region %s is empty on this window", region_name[r]);
		return;
	}
	if (!mapped(out, size))
		return;
	/* A new scribble of a region replaces the one running there. */
	for (i = 0; i < MAX_SCRIBBLERS; i++)
		if (fab.scr[i].active && fab.scr[i].region == r)
			scribble_stop(i, "replaced");
	slot = scribbler_get(&tfd, out, size);
	if (slot < 0)
		return;
	s = &fab.scr[slot];
	*s = (struct scribbler){
		.active = true,
		.tfd = tfd,
		.region = r,
		.mode = mode,
		.rate = rate,
		.dur_ms = ms,
		.start_ns = now_ns(),
		.seed = have_seed ? seed : fresh_seed(),
	};
	s->rng = s->seed;
	region_bounds(r, &s->off, &s->len);
	arm_timer(tfd, scribble_next(s, s->start_ns));
	snprintf(out, size,
		 "ok scribble %s off=0x%llx len=0x%llx rate=%u seconds=%llu.%03llu mode=%s seed=%llu",
		 region_name[r], (unsigned long long)s->off, (unsigned long long)s->len,
		 s->rate, (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000),
		 mode_name[mode], (unsigned long long)s->seed);
}

#define STORM_USAGE "usage: storm REGION OFFSET RATE SECONDS | storm stop"

/*
 * The storm's child: the word at @w + 1, RATE times a second, evenly, for
 * SECONDS (writes due while it slept are made at once, up to 64); it
 * sleeps between writes.  RATE MAX_SCRIBBLE_RATE: without a pause, a core
 * for SECONDS (a reader that re-reads the word until it holds still never
 * sees it do so).
 */
static __attribute__((noreturn)) void storm_child(uint32_t *w, uint64_t rate,
						  uint64_t end)
{
	uint64_t start = now_ns(), done = 0, due, now, next;
	struct timespec ts;
	unsigned int k;
	uint32_t v;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_TIMERSLACK, 1UL);
	/* the count is ours from here: kept, not read back from the window */
	v = le32toh(__atomic_load_n(w, __ATOMIC_RELAXED));
	while (rate >= MAX_SCRIBBLE_RATE) {
		if (now_ns() >= end)
			_exit(0);
		for (k = 0; k < 4096; k++)
			__atomic_store_n(w, htole32(++v), __ATOMIC_RELEASE);
	}
	for (;;) {
		now = now_ns();
		if (now >= end)
			_exit(0);
		due = rate * ((now - start) / 1000) / 1000000;
		for (k = 0; done < due && k < 64; k++, done++)
			__atomic_store_n(w, htole32(++v), __ATOMIC_RELEASE);
		done = due > done ? due : done;
		next = start + (done + 1) * 1000000000ULL / rate;
		if (next > now) {
			ts.tv_sec = (next - now) / NSEC_PER_SEC;
			ts.tv_nsec = (next - now) % NSEC_PER_SEC;
			nanosleep(&ts, NULL);
		}
	}
}

/*
 * "storm vdrv0 0x2a4 100000 60": the word at offset 0x2a4 of vdrv0
 * incremented 100000 times a second for 60 s, as a hostile peer would
 * bump a generation counter.  Listed and stopped with the scribbles
 * (status, "scribble stop").
 */
static void cmd_storm(int argc, char **argv, char *out, size_t size)
{
	uint64_t at, rate, ms, word;
	struct scribbler *s;
	unsigned int r;
	int tfd, slot;
	pid_t pid;

	if (argc == 2 && !strcmp(argv[1], "stop")) {
		snprintf(out, size, "ok storm stopped=%u", scribbles_stop(true));
		return;
	}
	if (argc != 5) {
		snprintf(out, size, "err " STORM_USAGE);
		return;
	}
	if (!parse_word(argv, "storm", &r, &at, &word, out, size) ||
	    !parse_rate_seconds(argv[3], argv[4], &rate, &ms, out, size) ||
	    !mapped(out, size))
		return;
	slot = scribbler_get(&tfd, out, size);
	if (slot < 0)
		return;
	s = &fab.scr[slot];
	*s = (struct scribbler){
		.tfd = tfd,
		.region = r,
		.mode = SCR_COUNT,
		.rate = rate,
		.dur_ms = ms,
		.start_ns = now_ns(),
		.off = word,
		.len = 4,
	};
	pid = fork();
	if (pid < 0) {
		close(tfd);
		snprintf(out, size, "err fork: %s", strerror(errno));
		return;
	}
	if (!pid)
		storm_child((uint32_t *)(fab.win + s->off), rate,
			    s->start_ns + ms * NSEC_PER_MSEC);
	s->pid = pid;
	s->active = true;
	arm_timer(tfd, s->start_ns + ms * NSEC_PER_MSEC);
	snprintf(out, size, "ok storm %s+0x%llx rate=%u seconds=%llu.%03llu",
		 region_name[r], (unsigned long long)at, s->rate,
		 (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000));
}

/* ------------------------------------------------------------------ */
/* fault injection: control commands                                  */

#define DOORBELL_USAGE "usage: doorbell drop|dup PCT [SECONDS] [DIR] [seed=N] | " \
	"doorbell delay MS [SECONDS] [DIR] | doorbell freeze|thaw SIDE [out|in] | doorbell normal"

/* "0" or "1", then "out" (the default: that side's doorbells) or "in"; or a DIR. */
static bool parse_side(const char *side, const char *way, unsigned int *mask)
{
	unsigned int s;

	if (!way && parse_dir(side, mask))
		return true;
	if (strcmp(side, "0") && strcmp(side, "1"))
		return false;
	s = side[0] - '0';
	if (!way || !strcmp(way, "out"))
		*mask = 1U << !s;
	else if (!strcmp(way, "in"))
		*mask = 1U << s;
	else
		return false;
	return true;
}

static void cmd_doorbell(int argc, char **argv, char *out, size_t size)
{
	bool have_ms = false, have_dir = false, have_seed = false, delay, dup;
	unsigned int dst, n = 0, mask = 3;
	uint64_t val, ms = 0, seed = 0, until;
	struct dir_fault *f;
	int a;

	if (!fab.interpose) {
		snprintf(out, size, "err doorbell faults need interposition (-I)");
		return;
	}
	if (argc == 2 && !strcmp(argv[1], "normal")) {
		for (dst = 0; dst < NR_SLOTS; dst++) {
			n += thaw(dst);
			f = &fab.dirf[dst];
			*f = (struct dir_fault){ .frozen = false };
		}
		n += dq_run(true);
		snprintf(out, size, "ok doorbell normal delivered=%u", n);
		return;
	}
	if (argc >= 3 && argc <= 4 &&
	    (!strcmp(argv[1], "freeze") || !strcmp(argv[1], "thaw"))) {
		if (!parse_side(argv[2], argc == 4 ? argv[3] : NULL, &mask)) {
			snprintf(out, size, "err bad SIDE: 0 or 1, then out (default) or in; or 0to1, 1to0, both");
			return;
		}
		for (dst = 0; dst < NR_SLOTS; dst++) {
			if (!(mask & (1U << dst)))
				continue;
			if (argv[1][0] == 'f')
				fab.dirf[dst].frozen = true;
			else
				n += thaw(dst);
		}
		if (argv[1][0] == 'f')
			snprintf(out, size, "ok doorbell freeze %s", dir_name(mask));
		else
			snprintf(out, size, "ok doorbell thaw %s delivered=%u", dir_name(mask), n);
		return;
	}
	delay = argc >= 3 && !strcmp(argv[1], "delay");
	dup = argc >= 3 && !strcmp(argv[1], "dup");
	if (!delay && !dup && !(argc >= 3 && !strcmp(argv[1], "drop"))) {
		snprintf(out, size, "err " DOORBELL_USAGE);
		return;
	}
	if (!parse_uint(argv[2], delay ? MAX_DELAY_MS : 100, &val)) {
		snprintf(out, size, delay ? "err MS must be 0..%d" : "err PCT must be 0..100",
			 MAX_DELAY_MS);
		return;
	}
	for (a = 3; a < argc; a++) {
		if (!delay && !have_seed && !strncmp(argv[a], "seed=", 5)) {
			if (!parse_seed(argv[a] + 5, &seed)) {
				snprintf(out, size, "err bad seed '%s'", argv[a] + 5);
				return;
			}
			have_seed = true;
		} else if (!have_dir && parse_dir(argv[a], &mask)) {
			have_dir = true;
		} else if (!have_ms && isdigit((unsigned char)argv[a][0])) {
			if (!parse_ms(argv[a], MAX_FAULT_MS, &ms)) {
				snprintf(out, size, "err SECONDS must be 0..%d (0: until 'doorbell normal')",
					 MAX_FAULT_MS / 1000);
				return;
			}
			have_ms = true;
		} else {
			snprintf(out, size, "err unexpected '%s': " DOORBELL_USAGE, argv[a]);
			return;
		}
	}
	until = ms && val ? now_ns() + ms * NSEC_PER_MSEC : 0;
	for (dst = 0; dst < NR_SLOTS; dst++) {
		if (!(mask & (1U << dst)))
			continue;
		f = &fab.dirf[dst];
		if (delay) {
			f->delay_ms = val;
			f->delay_until = until;
		} else if (dup) {
			f->dup_pct = val;
			f->dup_until = until;
		} else {
			f->drop_pct = val;
			f->drop_until = until;
		}
	}
	if (delay) {
		snprintf(out, size, "ok doorbell delay ms=%llu dir=%s seconds=%llu.%03llu",
			 (unsigned long long)val, dir_name(mask),
			 (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000));
		return;
	}
	fab.db_seed = have_seed ? seed : fresh_seed();
	fab.db_rng = fab.db_seed;
	snprintf(out, size, "ok doorbell %s pct=%llu dir=%s seconds=%llu.%03llu seed=%llu",
		 argv[1], (unsigned long long)val, dir_name(mask),
		 (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000),
		 (unsigned long long)fab.db_seed);
}

/* " drop:25%/1500ms" etc.: time left only for timed faults. */
static void status_fault(char *out, size_t size, bool *first, const char *what,
			 unsigned int val, const char *unit, uint64_t until, uint64_t now)
{
	append(out, size, "%s%s:%u%s", *first ? "" : ",", what, val, unit);
	if (until)
		append(out, size, "/%llums", (unsigned long long)((until - now) / NSEC_PER_MSEC));
	*first = false;
}

static void cmd_status(char *out, size_t size)
{
	uint64_t now = now_ns();
	unsigned int i, dst, queued = 0;
	bool first = true;

	snprintf(out, size, "ok interpose=%s peers=%s,%s scribble=",
		 fab.interpose ? "on" : "off",
		 fab.peer[0].in_use && !fab.peer[0].dead ? "up" : "down",
		 fab.peer[1].in_use && !fab.peer[1].dead ? "up" : "down");
	for (i = 0; i < MAX_SCRIBBLERS; i++) {
		const struct scribbler *s = &fab.scr[i];
		uint64_t end = s->start_ns + s->dur_ms * NSEC_PER_MSEC;

		if (!s->active)
			continue;
		append(out, size, "%s%s:%u/s:%s:seed=%llu:left=%llums:writes=%llu",
		       first ? "" : ",", region_name[s->region], s->rate,
		       mode_name[s->mode], (unsigned long long)s->seed,
		       (unsigned long long)(end > now ? (end - now) / NSEC_PER_MSEC : 0),
		       (unsigned long long)s->writes);
		first = false;
	}
	if (first)
		append(out, size, "none");
	for (dst = NR_SLOTS; dst-- > 0;) {	/* "0to1" (to slot 1) first */
		struct dir_fault *f = &fab.dirf[dst];

		expire_faults(f, now);
		append(out, size, " %s=", dir_name(1U << dst));
		first = true;
		if (f->drop_pct)
			status_fault(out, size, &first, "drop", f->drop_pct, "%",
				     f->drop_until, now);
		if (f->delay_ms)
			status_fault(out, size, &first, "delay", f->delay_ms, "ms",
				     f->delay_until, now);
		if (f->dup_pct)
			status_fault(out, size, &first, "dup", f->dup_pct, "%",
				     f->dup_until, now);
		if (f->frozen) {
			append(out, size, "%sfrozen:pending=0x%x", first ? "" : ",", f->pending);
			first = false;
		}
		if (first)
			append(out, size, "normal");
		queued += fab.dq[dst].len;
	}
	append(out, size, " queued=%u", queued);
}

/*
 * Run one control command (@line is cut up); the reply goes to @out.
 * Returns true for commands that change something, which get logged.
 */
static bool ctl_command(char *line, char *out, size_t size)
{
	char *argv[CTL_MAX_ARGS], *save = NULL, *tok;
	const struct fault_stats *st = &fab.stats;
	int argc = 0;

	for (tok = strtok_r(line, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
		if (argc == CTL_MAX_ARGS) {
			snprintf(out, size, "err too many arguments");
			return false;
		}
		argv[argc++] = tok;
	}
	if (!argc) {
		snprintf(out, size, "err empty command");
	} else if (!strcmp(argv[0], "scribble")) {
		cmd_scribble(argc, argv, out, size);
		return true;
	} else if (!strcmp(argv[0], "poke")) {
		cmd_poke(argc, argv, out, size);
		return true;
	} else if (!strcmp(argv[0], "storm")) {
		cmd_storm(argc, argv, out, size);
		return true;
	} else if (!strcmp(argv[0], "doorbell")) {
		cmd_doorbell(argc, argv, out, size);
		return true;
	} else if (!strcmp(argv[0], "stats") && argc == 1) {
		snprintf(out, size,
			 "ok writes=%llu doorbells=%llu dropped=%llu delayed=%llu duplicated=%llu frozen=%llu",
			 (unsigned long long)st->writes, (unsigned long long)st->doorbells,
			 (unsigned long long)st->dropped, (unsigned long long)st->delayed,
			 (unsigned long long)st->duplicated, (unsigned long long)st->frozen);
	} else if (!strcmp(argv[0], "stats") && argc == 2 && !strcmp(argv[1], "reset")) {
		fab.stats = (struct fault_stats){ 0 };
		snprintf(out, size, "ok stats reset");
		return true;
	} else if (!strcmp(argv[0], "status") && argc == 1) {
		cmd_status(out, size);
	} else if (!strcmp(argv[0], "restore") && argc == 1) {
		write_header();
		snprintf(out, size, "ok restore");
		return true;
	} else if (!strcmp(argv[0], "help") && argc == 1) {
		snprintf(out, size, "ok commands: scribble, poke, storm, doorbell, stats [reset], status, restore, help");
	} else {
		snprintf(out, size, "err unknown command '%s': try 'help'", argv[0]);
	}
	return false;
}

static void ctl_close(unsigned int i)
{
	close(fab.ctl[i].fd);
	fab.ctl[i] = (struct ctl_client){ .fd = -1 };
}

/* Send one reply line.  False if the client is gone or does not read. */
static bool ctl_send(int fd, const char *reply)
{
	char line[CTL_REPLY_MAX + 1];
	int n = snprintf(line, sizeof(line), "%s\n", reply);
	ssize_t r;

	if (n < 0)
		return false;
	if (n >= (int)sizeof(line)) {	/* cannot happen: replies are < CTL_REPLY_MAX */
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	do
		r = send(fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	return r == n;
}

static void ctl_accept(void)
{
	unsigned int i, k;
	int fd;

	for (k = 0; k < 2 * MAX_CTL_CLIENTS; k++) {
		fd = accept4(fab.ctl_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN) {
				log_err("control: accept: %s", strerror(errno));
				if (errno == EMFILE || errno == ENFILE)
					usleep(100 * 1000);
			}
			return;
		}
		for (i = 0; i < MAX_CTL_CLIENTS && fab.ctl[i].fd >= 0; i++)
			;
		if (i == MAX_CTL_CLIENTS) {
			ctl_send(fd, "err too many control connections");
			close(fd);
			continue;
		}
		fab.ctl[i] = (struct ctl_client){ .fd = fd };
	}
}

/* Read what a control client sent and answer every complete line. */
static void ctl_event(unsigned int i)
{
	struct ctl_client *c = &fab.ctl[i];
	char reply[CTL_REPLY_MAX], cmd[CTL_LINE_MAX];
	size_t n;
	ssize_t r;
	char *nl;

	r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		ctl_close(i);
		return;
	}
	c->len += r;
	while ((nl = memchr(c->buf, '\n', c->len))) {
		n = nl - c->buf;
		*nl = '\0';
		if (c->discard) {
			c->discard = false;	/* end of an overlong line */
		} else {
			memcpy(cmd, c->buf, n + 1);
			if (ctl_command(c->buf, reply, sizeof(reply)))
				log_info("control: %s -> %s", cmd, reply);
			if (!ctl_send(c->fd, reply)) {
				ctl_close(i);
				return;
			}
		}
		c->len -= n + 1;
		memmove(c->buf, nl + 1, c->len);
	}
	if (c->len == sizeof(c->buf)) {
		c->len = 0;
		if (!c->discard) {
			c->discard = true;
			if (!ctl_send(c->fd, "err line too long"))
				ctl_close(i);
		}
	}
}

static int setup_faults(void)
{
	if (fab.interpose) {
		fab.delay_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (fab.delay_fd < 0) {
			log_err("timerfd: %s", strerror(errno));
			return -1;
		}
		fab.db_seed = fresh_seed();
		fab.db_rng = fab.db_seed;
	}
	if (fab.ctl_path &&
	    listen_unix(fab.ctl_path, MAX_CTL_CLIENTS, &fab.ctl_listen_fd, &fab.ctl_abs,
			&fab.ctl_bound, &fab.ctl_dev, &fab.ctl_ino) < 0)
		return -1;
	return 0;
}

/* -X: control commands at startup; one that fails stops the fabric. */
static int run_startup_cmds(void)
{
	char line[CTL_LINE_MAX], reply[CTL_REPLY_MAX];
	unsigned int i;

	for (i = 0; i < fab.nr_startup_cmds; i++) {
		if (strlen(fab.startup_cmd[i]) >= sizeof(line)) {
			log_err("-X '%s': too long", fab.startup_cmd[i]);
			return -1;
		}
		strcpy(line, fab.startup_cmd[i]);
		ctl_command(line, reply, sizeof(reply));
		if (strncmp(reply, "ok", 2)) {
			log_err("-X '%s': %s", fab.startup_cmd[i], reply);
			return -1;
		}
		log_info("-X %s -> %s", fab.startup_cmd[i], reply);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* the ivshmem protocol                                               */

/* Send one protocol message: @val as LE int64, with @fd unless it is -1. */
static int send_msg(int sock, int64_t val, int fd)
{
	uint64_t le = htole64((uint64_t)val);
	struct iovec iov = { .iov_base = &le, .iov_len = sizeof(le) };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cmsg;
	ssize_t r;

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	}
	/*
	 * Never block the loop on a client that does not read: if its socket
	 * buffer is full it is broken and gets disconnected.
	 */
	do
		r = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r == (ssize_t)sizeof(le))
		return 0;
	if (r >= 0)
		errno = EIO;
	return -1;
}

/* Announce peer @id's eventfds @fds (one message per vector, in order). */
static int send_eventfds(int sock, unsigned int id, const int *fds)
{
	unsigned int v;

	for (v = 0; v < fab.nr_vectors; v++)
		if (send_msg(sock, id, fds[v]) < 0)
			return -1;
	return 0;
}

/* The eventfds the other guest gets to ring @p: its own, or our proxies. */
static const int *ring_fds(const struct peer *p)
{
	return fab.interpose ? p->proxy : p->efd;
}

/* Ring vector @v of the peer in @slot, as the other guest's doorbell would. */
static void ring(unsigned int slot, unsigned int v)
{
	uint64_t one = 1;

	if (write(fab.peer[slot].efd[v], &one, sizeof(one)) != sizeof(one))
		log_dbg("cannot ring peer %u vector %u: %s", slot, v, strerror(errno));
	else
		log_dbg("rang peer %u vector %u", slot, v);
}

static struct peer *other_live(unsigned int slot)
{
	struct peer *q = &fab.peer[!slot];

	return q->in_use && !q->dead ? q : NULL;
}

static void close_eventfds(struct peer *p)
{
	unsigned int v;

	for (v = 0; v < MAX_VECTORS; v++) {
		if (p->efd[v] >= 0)
			close(p->efd[v]);
		if (p->proxy[v] >= 0)
			close(p->proxy[v]);
		p->efd[v] = -1;
		p->proxy[v] = -1;
	}
}

/* Disconnect the client in @slot and tell the survivor. */
static void drop_peer(unsigned int slot, const char *why)
{
	struct peer *p = &fab.peer[slot], *q;

	close(p->sock);
	p->sock = -1;
	p->in_use = false;
	bump_epoch(slot);	/* even: detached */
	q = other_live(slot);
	if (q && p->announced && send_msg(q->sock, p->id, -1) < 0) {
		log_err("peer %u: cannot send leave notification: %s", !slot, strerror(errno));
		q->dead = true;
	}
	/*
	 * The survivor's guest learns about the detach from the epoch; ring
	 * it so that it looks now rather than at its next timer tick.
	 */
	if (q && !q->dead)
		ring(!slot, PCINET_VEC_LINK);
	doorbell_peer_gone(slot);	/* before its eventfds are closed */
	close_eventfds(p);
	p->announced = false;
	p->dead = false;
	log_info("peer %u (id %u) left (pid %ld): %s", slot, p->id, (long)p->pid,
		 why);
}

/* Drop clients whose sockets failed; dropping one may fail sends to another. */
static void reap_dead(void)
{
	unsigned int i;
	bool again;

	do {
		again = false;
		for (i = 0; i < NR_SLOTS; i++) {
			if (fab.peer[i].in_use && fab.peer[i].dead) {
				drop_peer(i, "send failed");
				again = true;
			}
		}
	} while (again);
}

/* True if the client already went away before we even looked at it. */
static bool hung_up(int sock)
{
	struct pollfd pfd = { .fd = sock, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR));
}

static void new_client(int sock)
{
	struct ucred cred = { .pid = 0 };
	socklen_t len = sizeof(cred);
	struct peer *p, *q;
	unsigned int slot, v;

	getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len);
	for (slot = 0; slot < NR_SLOTS; slot++)
		if (!fab.peer[slot].in_use)
			break;
	if (slot == NR_SLOTS) {
		/* The client sees EOF instead of a version number. */
		log_info("refusing client (pid %ld): both peer slots are taken",
			 (long)cred.pid);
		close(sock);
		return;
	}
	if (hung_up(sock)) {
		log_dbg("client (pid %ld) hung up before setup", (long)cred.pid);
		close(sock);
		return;
	}

	p = &fab.peer[slot];
	for (v = 0; v < fab.nr_vectors; v++) {
		/*
		 * QEMU sets O_NONBLOCK on the eventfds it gets; we use them only
		 * to ring, which cannot block short of counter overflow.
		 */
		p->efd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fab.interpose && p->efd[v] >= 0)
			p->proxy[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (p->efd[v] < 0 || (fab.interpose && p->proxy[v] < 0)) {
			log_err("refusing client (pid %ld): eventfd: %s", (long)cred.pid,
				strerror(errno));
			close_eventfds(p);
			close(sock);
			return;
		}
	}
	if (fab.next_id[slot] > IVSHMEM_MAX_ID) {
		log_info("refusing client (pid %ld): peer IDs exhausted", (long)cred.pid);
		close_eventfds(p);
		close(sock);
		return;
	}
	p->id = fab.next_id[slot];
	fab.next_id[slot] += NR_SLOTS;
	*copy_doorbell_id(slot) = htole32(p->id);
	/*
	 * No pair: a side reads the word on its own before each doorbell
	 * (READ_ONCE in pcinet_ivshmem.c); the release orders nothing it
	 * relies on and only keeps the store whole and in program order.
	 */
	__atomic_store_n(hdr_doorbell_id(slot), htole32(p->id), __ATOMIC_RELEASE);
	p->sock = sock;
	p->pid = cred.pid;
	p->in_use = true;
	p->dead = false;
	p->announced = false;

	/*
	 * Attached from here on.  Bump before the setup so that the window
	 * the client receives already shows it attached.
	 */
	bump_epoch(slot);

	/* Steps 1-5 of the protocol, see the top of the file. */
	q = other_live(slot);
	if (send_msg(sock, IVSHMEM_PROTO_VERSION, -1) < 0 ||
	    send_msg(sock, p->id, -1) < 0 ||
	    send_msg(sock, IVSHMEM_SHM_MSG, fab.shm_fd) < 0 ||
	    (q && send_eventfds(sock, q->id, ring_fds(q)) < 0) ||
	    send_eventfds(sock, p->id, p->efd) < 0) {
		log_err("peer %u (pid %ld): setup failed: %s", slot, (long)cred.pid,
			strerror(errno));
		drop_peer(slot, "setup failed");
		return;
	}
	log_info("peer %u (id %u) joined (pid %ld)", slot, p->id, (long)cred.pid);

	/* Step 6 for the other peer: here are the new peer's doorbells. */
	if (q) {
		if (send_eventfds(q->sock, p->id, ring_fds(p)) < 0) {
			log_err("peer %u: cannot send join notification: %s", !slot,
				strerror(errno));
			q->dead = true;
		} else {
			ring(!slot, PCINET_VEC_LINK);
		}
	}
	p->announced = true;
}

static void accept_clients(void)
{
	int sock;

	for (;;) {
		sock = accept4(fab.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (sock >= 0) {
			new_client(sock);
			reap_dead();
			continue;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED:
			continue;
		case EAGAIN:
			return;
		default:
			log_err("accept: %s", strerror(errno));
			if (errno == EMFILE || errno == ENFILE)
				usleep(100 * 1000);	/* don't spin on a full fd table */
			return;
		}
	}
}

/* Clients never send anything; EOF or an error means they are gone. */
static void client_event(unsigned int slot, short revents)
{
	struct peer *p = &fab.peer[slot];
	char buf[256];
	ssize_t r;

	if (revents & POLLERR) {
		drop_peer(slot, "socket error");
		return;
	}
	r = recv(p->sock, buf, sizeof(buf), MSG_DONTWAIT);
	if (r > 0) {
		log_dbg("peer %u: ignoring %zd unexpected bytes", slot, r);
	} else if (r == 0) {
		drop_peer(slot, "connection closed");
	} else if (errno != EAGAIN && errno != EINTR) {
		drop_peer(slot, strerror(errno));
	} else if (revents & POLLHUP) {
		drop_peer(slot, "hung up");
	}
}

/* What a pollfd in the event loop stands for. */
enum ev_kind { EV_SIG, EV_LISTEN, EV_PEER, EV_PROXY, EV_DELAY, EV_SCRIBBLE, EV_CTL,
	       EV_CTL_LISTEN };

struct ev_src {
	enum ev_kind kind;
	unsigned int idx;	/* slot, scribbler or control client */
	unsigned int v;		/* vector, for EV_PROXY */
};

#define MAX_POLL	(2 + NR_SLOTS * (1 + MAX_VECTORS) + 1 + MAX_SCRIBBLERS + \
			 MAX_CTL_CLIENTS + 1)

static void add_poll(struct pollfd *pfd, struct ev_src *src, unsigned int *n, int fd,
		     enum ev_kind kind, unsigned int idx, unsigned int v)
{
	pfd[*n] = (struct pollfd){ .fd = fd, .events = POLLIN };
	src[*n] = (struct ev_src){ .kind = kind, .idx = idx, .v = v };
	(*n)++;
}

/*
 * Is pollfd @fd still what it was when the poll set was built?  Handling
 * one event can close fds of later ones (a guest left, a scribble was
 * replaced) and a new fd may reuse the number.
 */
static bool ev_valid(const struct ev_src *e, int fd)
{
	const struct peer *p;

	switch (e->kind) {
	case EV_PEER:
		p = &fab.peer[e->idx];
		return p->in_use && p->sock == fd;
	case EV_PROXY:
		p = &fab.peer[e->idx];
		return p->in_use && !p->dead && p->proxy[e->v] == fd;
	case EV_SCRIBBLE:
		return fab.scr[e->idx].active && fab.scr[e->idx].tfd == fd;
	case EV_CTL:
		return fab.ctl[e->idx].fd == fd;
	default:
		return true;
	}
}

static int event_loop(void)
{
	struct pollfd pfd[MAX_POLL];
	struct ev_src src[MAX_POLL];
	struct signalfd_siginfo si;
	bool accept_peer, accept_ctl;
	unsigned int i, v, n;

	for (;;) {
		/* Without -I/-C/-X this is the plain server: signals, listener, peers. */
		n = 0;
		add_poll(pfd, src, &n, fab.sig_fd, EV_SIG, 0, 0);
		add_poll(pfd, src, &n, fab.listen_fd, EV_LISTEN, 0, 0);
		for (i = 0; i < NR_SLOTS; i++)
			if (fab.peer[i].in_use)
				add_poll(pfd, src, &n, fab.peer[i].sock, EV_PEER, i, 0);
		if (fab.interpose) {
			for (i = 0; i < NR_SLOTS; i++) {
				if (!fab.peer[i].in_use || fab.peer[i].dead)
					continue;
				for (v = 0; v < fab.nr_vectors; v++)
					add_poll(pfd, src, &n, fab.peer[i].proxy[v], EV_PROXY, i, v);
			}
			add_poll(pfd, src, &n, fab.delay_fd, EV_DELAY, 0, 0);
		}
		for (i = 0; i < MAX_SCRIBBLERS; i++)
			if (fab.scr[i].active)
				add_poll(pfd, src, &n, fab.scr[i].tfd, EV_SCRIBBLE, i, 0);
		for (i = 0; i < MAX_CTL_CLIENTS; i++)
			if (fab.ctl[i].fd >= 0)
				add_poll(pfd, src, &n, fab.ctl[i].fd, EV_CTL, i, 0);
		if (fab.ctl_listen_fd >= 0)
			add_poll(pfd, src, &n, fab.ctl_listen_fd, EV_CTL_LISTEN, 0, 0);

		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll: %s", strerror(errno));
			return -1;
		}
		if (pfd[0].revents) {
			if (read(fab.sig_fd, &si, sizeof(si)) == sizeof(si)) {
				log_info("%s, shutting down", strsignal(si.ssi_signo));
				return 0;
			}
		}
		/* New clients last: a slot dropped in this round may be reused. */
		accept_peer = accept_ctl = false;
		for (i = 1; i < n; i++) {
			if (!pfd[i].revents || !ev_valid(&src[i], pfd[i].fd))
				continue;
			switch (src[i].kind) {
			case EV_LISTEN:
				accept_peer = true;
				break;
			case EV_CTL_LISTEN:
				accept_ctl = true;
				break;
			case EV_PEER:
				client_event(src[i].idx, pfd[i].revents);
				break;
			case EV_PROXY:
				proxy_event(src[i].idx, src[i].v);
				break;
			case EV_DELAY:
				delay_event();
				break;
			case EV_SCRIBBLE:
				scribble_tick(src[i].idx);
				break;
			case EV_CTL:
				ctl_event(src[i].idx);
				break;
			case EV_SIG:
				break;
			}
		}
		reap_dead();
		if (accept_peer)
			accept_clients();
		if (accept_ctl)
			ctl_accept();
	}
}

/*
 * On exit the clients are just disconnected: no leave notifications and no
 * epoch changes.  The guests keep the window and the eventfds and can go on
 * talking to each other without us (see "If the server terminates" in the
 * ivshmem spec); only new attaches become impossible.  With -I their
 * doorbells went through us and stop here.
 */
static void cleanup(void)
{
	unsigned int i;

	for (i = 0; i < NR_SLOTS; i++) {
		if (fab.peer[i].in_use)
			close(fab.peer[i].sock);
		fab.peer[i].in_use = false;
		close_eventfds(&fab.peer[i]);
	}
	for (i = 0; i < MAX_SCRIBBLERS; i++)
		if (fab.scr[i].active)
			scribble_stop(i, "stopped at exit");
	for (i = 0; i < MAX_CTL_CLIENTS; i++)
		if (fab.ctl[i].fd >= 0)
			ctl_close(i);
	if (fab.listen_fd >= 0)
		close(fab.listen_fd);
	if (fab.ctl_listen_fd >= 0)
		close(fab.ctl_listen_fd);
	if (fab.delay_fd >= 0)
		close(fab.delay_fd);
	unlink_own_socket(fab.sock_abs, fab.sock_bound, fab.sock_dev, fab.sock_ino);
	unlink_own_socket(fab.ctl_abs, fab.ctl_bound, fab.ctl_dev, fab.ctl_ino);
	if (fab.pid_written)
		unlink(fab.pid_abs);
	if (fab.win)
		munmap(fab.win, fab.size);
	if (fab.hdr)
		munmap(fab.hdr, PCINET_HDR_SIZE);
	if (fab.shm_fd >= 0)
		close(fab.shm_fd);
	if (fab.sig_fd >= 0)
		close(fab.sig_fd);
	free(fab.sock_abs);
	free(fab.ctl_abs);
	free(fab.pid_abs);
}

int main(int argc, char **argv)
{
	unsigned int i;
	int ret = 1;

	for (i = 0; i < NR_SLOTS; i++) {
		fab.peer[i].sock = -1;
		for (unsigned int v = 0; v < MAX_VECTORS; v++) {
			fab.peer[i].efd[v] = -1;
			fab.peer[i].proxy[v] = -1;
		}
	}
	for (i = 0; i < MAX_SCRIBBLERS; i++)
		fab.scr[i].tfd = -1;
	for (i = 0; i < MAX_CTL_CLIENTS; i++)
		fab.ctl[i].fd = -1;
	parse_args(argc, argv);

	/*
	 * Faults first: the control socket exists and -X is in force by the
	 * time the server socket appears and guests can attach.
	 */
	if (setup_signals() < 0 || setup_shm() < 0 || setup_faults() < 0 ||
	    run_startup_cmds() < 0 || setup_socket() < 0)
		goto out;
	if (fab.daemonize ? daemonize() < 0 : write_pid_file() < 0)
		goto out;
	log_info("listening on %s: %llu MiB window, %u vectors, pid %ld", fab.sock_path,
		 (unsigned long long)(fab.size >> 20), fab.nr_vectors, (long)getpid());
	if (fab.vio_size)
		log_info("virtio regions: 4 x %llu KiB from 0x%llx%s",
			 (unsigned long long)(fab.vio_size >> 10),
			 (unsigned long long)le64toh(fab.wvio.side[0].dev_off),
			 fab.nr_vectors <= PCINET_VEC_VIRTIO ?
			 " (no vector 3: virtio doorbells ring vector 0)" : "");
	if (fab.interpose)
		log_info("doorbells interposed%s%s", fab.ctl_path ? ", control socket " : "",
			 fab.ctl_path ? fab.ctl_path : "");
	if (event_loop() == 0)
		ret = 0;
out:
	cleanup();
	return ret;
}
