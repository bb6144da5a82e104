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
 */
#define _GNU_SOURCE
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
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include "layout-shim.h"

#define NR_SLOTS		2		/* a pcinet link has two sides */
#define MAX_VECTORS		16
#define IVSHMEM_MAX_ID		0xfffe		/* QEMU peer IDs are 16 bits */
#define DEF_VECTORS		3		/* PCINET_NR_VEC */
#define DEF_SIZE		(16ULL << 20)
#define MIN_SIZE		(4ULL << 20)
#define MAX_SIZE		(1ULL << 30)

#define IVSHMEM_PROTO_VERSION	0
#define IVSHMEM_SHM_MSG		(-1)

/* Window placement, see pcinet_layout.h */
#define CTRL0_OFF		0x1000
#define CTRL1_OFF		0x2000
#define DATA0_OFF		0x10000
#define DATA_ALIGN		0x10000

static_assert(PCINET_HDR_SIZE <= CTRL0_OFF, "header overlaps control inbox 0");
static_assert(CTRL0_OFF + PCINET_CTRL_SIZE <= CTRL1_OFF, "control inboxes overlap");
static_assert(CTRL1_OFF + PCINET_CTRL_SIZE <= DATA0_OFF, "control inbox 1 overlaps data");

/* One connected QEMU (or other ivshmem client). */
struct peer {
	bool in_use;
	bool announced;		/* the other peer was sent our eventfds */
	bool dead;		/* a send to it failed: disconnect it */
	int sock;
	pid_t pid;		/* from SO_PEERCRED, for the log only */
	unsigned int id;	/* ivshmem peer ID; id % 2 == slot */
	int efd[MAX_VECTORS];	/* eventfds to ring this peer's vectors */
};

static struct {
	/* configuration */
	const char *sock_path;
	const char *pid_path;
	uint64_t size;
	unsigned int nr_vectors;
	bool verbose;
	bool daemonize;

	/* state */
	bool use_syslog;
	int listen_fd;
	int sig_fd;
	int shm_fd;
	struct pcinet_win_hdr *hdr;	/* first page of the window */
	char *sock_abs;			/* for cleanup after chdir("/") */
	char *pid_abs;
	dev_t sock_dev;			/* to unlink only our own socket */
	ino_t sock_ino;
	bool sock_bound;
	bool pid_written;
	struct peer peer[NR_SLOTS];
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
		"Usage: pcinet-fabric -S SOCKET_PATH [-m SIZE] [-n VECTORS] [-p PIDFILE]\n"
		"                     [-d | -F] [-v] [-h]\n"
		"\n"
		"ivshmem server for a two-sided pcinet link between QEMU guests using\n"
		"  -chardev socket,path=SOCKET_PATH,id=c0\n"
		"  -device ivshmem-doorbell,chardev=c0,vectors=VECTORS\n"
		"\n"
		"  -S PATH   UNIX socket to listen on (required)\n"
		"  -m SIZE   shared window size, power of two from 4M to 1G, K/M/G\n"
		"            suffix allowed (default 16M)\n"
		"  -n N      doorbell vectors per peer, 1..%d (default %d)\n"
		"  -p FILE   write the server's pid to FILE\n"
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
	while ((c = getopt(argc, argv, ":S:m:n:p:dFvh")) != -1) {
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

static uint64_t init_side(unsigned int i, uint64_t ctrl_off, uint64_t data_off,
			  uint64_t data_size)
{
	struct pcinet_win_side *s = &fab.hdr->side[i];

	s->ctrl_off = htole64(ctrl_off);
	s->data_off = htole64(data_off);
	s->data_size = htole64(data_size);
	return data_off + data_size;
}

/* Check that both rings of one data inbox fit inside it. */
static bool inbox_fits(unsigned int i)
{
	uint64_t off = le64toh(fab.hdr->side[i].data_off);
	uint64_t size = le64toh(fab.hdr->side[i].data_size);
	struct pcinet_ring_loc tty, net;

	if (pcinet_layout_ring(off, size, PCINET_CHAN_TTY, &tty) ||
	    pcinet_layout_ring(off, size, PCINET_CHAN_NET, &net))
		return false;
	log_dbg("side %u: ctrl 0x%llx, data 0x%llx+0x%llx, tty ring 0x%llx+0x%x, net ring 0x%llx+0x%x",
		i, (unsigned long long)le64toh(fab.hdr->side[i].ctrl_off),
		(unsigned long long)off, (unsigned long long)size,
		(unsigned long long)tty.off, tty.size,
		(unsigned long long)net.off, net.size);
	return tty.off + tty.size <= off + size && net.off + net.size <= off + size &&
	       off + size <= fab.size;
}

static int setup_shm(void)
{
	uint64_t data_size, end;
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

	/* The server only ever touches the header page. */
	p = mmap(NULL, PCINET_HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fab.shm_fd, 0);
	if (p == MAP_FAILED) {
		log_err("cannot map shared memory: %s", strerror(errno));
		return -1;
	}
	fab.hdr = p;

	/* Fresh memory is zero, so reserved fields and epochs already are. */
	data_size = ((fab.size - DATA0_OFF) / 2) & ~(uint64_t)(DATA_ALIGN - 1);
	fab.hdr->version = htole16(PCINET_VERSION);
	fab.hdr->hdr_size = htole16(PCINET_HDR_SIZE);
	fab.hdr->win_size = htole64(fab.size);
	fab.hdr->nr_vectors = htole32(fab.nr_vectors);
	end = init_side(0, CTRL0_OFF, DATA0_OFF, data_size);
	init_side(1, CTRL1_OFF, end, data_size);
	if (!inbox_fits(0) || !inbox_fits(1)) {
		log_err("window of %llu bytes too small for the pcinet rings",
			(unsigned long long)fab.size);
		return -1;
	}
	/* Magic last: a header with the magic is complete. */
	__atomic_store_n(&fab.hdr->magic, htole32(PCINET_WIN_MAGIC), __ATOMIC_RELEASE);
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
	uint32_t e = le32toh(__atomic_load_n(&fab.hdr->attach_epoch[slot], __ATOMIC_RELAXED));

	e++;
	__atomic_store_n(&fab.hdr->attach_epoch[slot], htole32(e), __ATOMIC_RELEASE);
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

static int setup_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	strcpy(sa.sun_path, fab.sock_path);	/* length checked in parse_args() */
	if (check_stale_socket(&sa) < 0)
		return -1;

	fab.sock_abs = abs_path(fab.sock_path);
	if (!fab.sock_abs) {
		log_err("cannot resolve %s: %s", fab.sock_path, strerror(errno));
		return -1;
	}
	fab.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fab.listen_fd < 0) {
		log_err("socket: %s", strerror(errno));
		return -1;
	}
	if (bind(fab.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EADDRINUSE)	/* lost a race with another server */
			log_err("socket %s busy: another server is listening there",
				fab.sock_path);
		else
			log_err("cannot bind %s: %s", fab.sock_path, strerror(errno));
		return -1;
	}
	fab.sock_bound = true;
	if (stat(fab.sock_path, &st) == 0) {
		fab.sock_dev = st.st_dev;
		fab.sock_ino = st.st_ino;
	}
	if (listen(fab.listen_fd, 8) < 0) {
		log_err("cannot listen on %s: %s", fab.sock_path, strerror(errno));
		return -1;
	}
	return 0;
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

/* Announce @p's eventfds (one message per vector, in order) on @sock. */
static int send_eventfds(int sock, unsigned int id, const struct peer *p)
{
	unsigned int v;

	for (v = 0; v < fab.nr_vectors; v++)
		if (send_msg(sock, id, p->efd[v]) < 0)
			return -1;
	return 0;
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
		p->efd[v] = -1;
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
		if (p->efd[v] < 0) {
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
	__atomic_store_n(&fab.hdr->doorbell_id[slot], htole32(p->id), __ATOMIC_RELEASE);
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
	    (q && send_eventfds(sock, q->id, q) < 0) ||
	    send_eventfds(sock, p->id, p) < 0) {
		log_err("peer %u (pid %ld): setup failed: %s", slot, (long)cred.pid,
			strerror(errno));
		drop_peer(slot, "setup failed");
		return;
	}
	log_info("peer %u (id %u) joined (pid %ld)", slot, p->id, (long)cred.pid);

	/* Step 6 for the other peer: here are the new peer's doorbells. */
	if (q) {
		if (send_eventfds(q->sock, p->id, p) < 0) {
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

static int event_loop(void)
{
	struct pollfd pfd[2 + NR_SLOTS];
	unsigned int slot_of[2 + NR_SLOTS];
	struct signalfd_siginfo si;
	unsigned int i, n;

	for (;;) {
		n = 0;
		pfd[n++] = (struct pollfd){ .fd = fab.sig_fd, .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = fab.listen_fd, .events = POLLIN };
		for (i = 0; i < NR_SLOTS; i++) {
			if (!fab.peer[i].in_use)
				continue;
			slot_of[n] = i;
			pfd[n++] = (struct pollfd){ .fd = fab.peer[i].sock, .events = POLLIN };
		}
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
		for (i = 2; i < n; i++) {
			/* A slot dropped in this round may have been reused. */
			if (pfd[i].revents && fab.peer[slot_of[i]].in_use &&
			    fab.peer[slot_of[i]].sock == pfd[i].fd)
				client_event(slot_of[i], pfd[i].revents);
		}
		reap_dead();
		if (pfd[1].revents)
			accept_clients();
	}
}

/*
 * On exit the clients are just disconnected: no leave notifications and no
 * epoch changes.  The guests keep the window and the eventfds and can go on
 * talking to each other without us (see "If the server terminates" in the
 * ivshmem spec); only new attaches become impossible.
 */
static void cleanup(void)
{
	struct stat st;
	unsigned int i;

	for (i = 0; i < NR_SLOTS; i++) {
		if (fab.peer[i].in_use)
			close(fab.peer[i].sock);
		fab.peer[i].in_use = false;
		close_eventfds(&fab.peer[i]);
	}
	if (fab.listen_fd >= 0)
		close(fab.listen_fd);
	/* Only remove the socket if it is still ours (not replaced by someone). */
	if (fab.sock_bound && fab.sock_abs && stat(fab.sock_abs, &st) == 0 &&
	    st.st_dev == fab.sock_dev && st.st_ino == fab.sock_ino)
		unlink(fab.sock_abs);
	if (fab.pid_written)
		unlink(fab.pid_abs);
	if (fab.hdr)
		munmap(fab.hdr, PCINET_HDR_SIZE);
	if (fab.shm_fd >= 0)
		close(fab.shm_fd);
	if (fab.sig_fd >= 0)
		close(fab.sig_fd);
	free(fab.sock_abs);
	free(fab.pid_abs);
}

int main(int argc, char **argv)
{
	unsigned int i;
	int ret = 1;

	for (i = 0; i < NR_SLOTS; i++) {
		fab.peer[i].sock = -1;
		for (unsigned int v = 0; v < MAX_VECTORS; v++)
			fab.peer[i].efd[v] = -1;
	}
	parse_args(argc, argv);

	if (setup_signals() < 0 || setup_shm() < 0 || setup_socket() < 0)
		goto out;
	if (fab.daemonize ? daemonize() < 0 : write_pid_file() < 0)
		goto out;
	log_info("listening on %s: %llu MiB window, %u vectors, pid %ld", fab.sock_path,
		 (unsigned long long)(fab.size >> 20), fab.nr_vectors, (long)getpid());
	if (event_loop() == 0)
		ret = 0;
out:
	cleanup();
	return ret;
}
