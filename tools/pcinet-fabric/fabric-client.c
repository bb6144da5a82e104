// SPDX-License-Identifier: GPL-2.0-only
/*
 * fabric-client - a minimal ivshmem client for testing pcinet-fabric.
 *
 * Connects like QEMU's ivshmem-doorbell would, checks every protocol
 * message and the window header, and prints one line per event on stdout:
 *
 *   connected version=0 id=ID
 *   shm size=BYTES magic=ok version=V vectors=N data0=OFF+SIZE data1=OFF+SIZE
 *       epoch=E0,E1 state=up|down,up|down
 *   vio dev0=OFF+SIZE drv0=OFF+SIZE dev1=OFF+SIZE drv1=OFF+SIZE
 *       (only when the header carries virtio regions, pcinet-fabric -V)
 *   peer P joined vectors=N
 *   setup done id=ID vectors=N
 *   vector V rung count=C epoch=E0,E1 state=...
 *   peer P left epoch=E0,E1 state=...
 *   server closed
 *
 * With -1 it exits once its setup is done, with -x right after connecting
 * (without reading anything); otherwise it runs until the server closes
 * the connection, SIGTERM, or the -t timeout.
 *
 * With -i it also reads commands from stdin (one per line; EOF ends the
 * client) and answers each with one line:
 *
 *   snap                     copy the whole window          -> snap ok
 *   diff                     compare the window with the copy
 *                            -> diff words=N first=0xOFF last=0xOFF
 *                               (changed 32-bit words, first and last
 *                               changed byte; "diff words=0" if none)
 *   ring V N GAP_US          ring vector V of the peer N times, GAP_US
 *                            microseconds apart            -> rang N
 *   total                    doorbells received so far (sum of the
 *                            eventfd counts) -> total v0=C v1=C ...
 *   sum OFF LEN              FNV-1a hash of a part of the window
 *                            -> sum 0xHASH
 *
 * With -c CONTROL_SOCKET it is instead a client of the fabric's control
 * socket: it sends each further argument as one line (an argument may
 * hold several lines), prints the reply lines and exits.
 *
 * Exit: 0 fine, 1 protocol or system error, 2 refused (connection closed
 * before the version message), 3 timeout.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "layout-shim.h"

#define MAX_PEERS	256	/* peer IDs seen in a test; side = id % 2 */
#define MAX_VECTORS	16

static int sock = -1;
static int own_id = -1;
static unsigned int nr_vectors;
static struct pcinet_win_hdr *hdr;
static int own_efd[MAX_VECTORS];
static unsigned int own_count;
static int peer_efd[MAX_PEERS][MAX_VECTORS];
static unsigned int peer_count[MAX_PEERS];
static uint64_t win_size;
static unsigned char *snapshot;
static uint64_t total[MAX_VECTORS];
static char cmd_buf[256];
static size_t cmd_len;

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fabric-client: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/*
 * Read one message: exactly 8 bytes, so that a descriptor can only come
 * with the message it was sent with.  Returns false on EOF at a message
 * boundary.
 */
static bool recv_msg(int64_t *val, int *fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	uint64_t le;
	size_t got = 0;
	struct cmsghdr *cmsg;

	*fd = -1;
	while (got < sizeof(le)) {
		struct iovec iov = { (char *)&le + got, sizeof(le) - got };
		struct msghdr msg = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
		};
		ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("recvmsg: %s", strerror(errno));
		}
		if (r == 0) {
			if (got)
				die("EOF in the middle of a message");
			return false;
		}
		if (msg.msg_flags & MSG_CTRUNC)
			die("control data truncated (more than one fd?)");
		for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
			if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
				continue;
			if (cmsg->cmsg_len != CMSG_LEN(sizeof(int)) || *fd >= 0)
				die("unexpected number of fds in one message");
			memcpy(fd, CMSG_DATA(cmsg), sizeof(int));
		}
		got += r;
	}
	*val = (int64_t)le64toh(le);
	return true;
}

/* The acquires pair with the release in pcinet-fabric.c's bump_epoch(). */
static void print_epoch(void)
{
	uint32_t e0 = le32toh(__atomic_load_n(&hdr->attach_epoch[0], __ATOMIC_ACQUIRE));
	uint32_t e1 = le32toh(__atomic_load_n(&hdr->attach_epoch[1], __ATOMIC_ACQUIRE));

	printf(" epoch=%u,%u state=%s,%s", e0, e1, (e0 & 1) ? "up" : "down",
	       (e1 & 1) ? "up" : "down");
}

/* The virtio regions of the header (struct pcinet_win_vio), if any. */
static void print_vio(void)
{
	const struct pcinet_win_vio *vio =
		(const void *)((const char *)hdr + PCINET_HDR_VIO_OFF);
	unsigned int i;

	if (le32toh(vio->magic) != PCINET_WIN_VIO_MAGIC)
		return;
	printf("vio");
	for (i = 0; i < 2; i++)
		printf(" dev%u=0x%llx+0x%llx drv%u=0x%llx+0x%llx", i,
		       (unsigned long long)le64toh(vio->side[i].dev_off),
		       (unsigned long long)le64toh(vio->side[i].dev_size), i,
		       (unsigned long long)le64toh(vio->side[i].drv_off),
		       (unsigned long long)le64toh(vio->side[i].drv_size));
	putchar('\n');
}

static void map_shm(int fd)
{
	struct stat st;
	uint64_t size;

	if (fstat(fd, &st) < 0)
		die("fstat shm: %s", strerror(errno));
	size = st.st_size;
	win_size = size;
	hdr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (hdr == MAP_FAILED)
		die("mmap shm: %s", strerror(errno));
	close(fd);
	if (le32toh(hdr->magic) != PCINET_WIN_MAGIC)
		die("bad window magic 0x%08x", le32toh(hdr->magic));
	if (le16toh(hdr->hdr_size) != PCINET_HDR_SIZE || le64toh(hdr->win_size) != size)
		die("bad window header: hdr_size %u win_size %llu, shm is %llu bytes",
		    le16toh(hdr->hdr_size), (unsigned long long)le64toh(hdr->win_size),
		    (unsigned long long)size);
	nr_vectors = le32toh(hdr->nr_vectors);
	if (nr_vectors < 1 || nr_vectors > MAX_VECTORS)
		die("bad nr_vectors %u", nr_vectors);
	printf("shm size=%llu magic=ok version=%u vectors=%u data0=0x%llx+0x%llx data1=0x%llx+0x%llx",
	       (unsigned long long)size, le16toh(hdr->version), nr_vectors,
	       (unsigned long long)le64toh(hdr->side[0].data_off),
	       (unsigned long long)le64toh(hdr->side[0].data_size),
	       (unsigned long long)le64toh(hdr->side[1].data_off),
	       (unsigned long long)le64toh(hdr->side[1].data_size));
	print_epoch();
	putchar('\n');
	print_vio();
}

/* Step 4-6 messages: a peer ID with or without an eventfd. */
static void handle_peer_msg(int64_t id, int fd)
{
	unsigned int v;

	if (id < 0 || id >= MAX_PEERS)
		die("peer id %lld out of range", (long long)id);
	if (id == own_id) {
		if (fd < 0)
			die("leave notification for our own id");
		if (own_count >= nr_vectors)
			die("more own eventfds than vectors");
		own_efd[own_count++] = fd;
		if (own_count == nr_vectors)
			printf("setup done id=%d vectors=%u\n", own_id, own_count);
		return;
	}
	if (fd >= 0) {
		if (peer_count[id] >= nr_vectors)
			die("more eventfds for peer %lld than vectors", (long long)id);
		peer_efd[id][peer_count[id]++] = fd;
		if (peer_count[id] == nr_vectors)
			printf("peer %lld joined vectors=%u\n", (long long)id, nr_vectors);
		return;
	}
	if (peer_count[id] != nr_vectors)
		die("leave notification for unknown peer %lld", (long long)id);
	for (v = 0; v < peer_count[id]; v++)
		close(peer_efd[id][v]);
	peer_count[id] = 0;
	printf("peer %lld left", (long long)id);
	print_epoch();
	putchar('\n');
}

static void do_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		die("socket path too long");
	strcpy(sa.sun_path, path);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect %s: %s", path, strerror(errno));
}

static void setup(void)
{
	int64_t val;
	int fd;

	if (!recv_msg(&val, &fd)) {
		printf("refused\n");
		exit(2);
	}
	if (fd >= 0 || val != 0)
		die("bad version message %lld (fd %d)", (long long)val, fd);
	if (!recv_msg(&val, &fd) || fd >= 0 || val < 0 || val >= MAX_PEERS)
		die("bad id message %lld (fd %d)", (long long)val, fd);
	own_id = val;
	printf("connected version=0 id=%d\n", own_id);
	if (!recv_msg(&val, &fd) || fd < 0 || val != -1)
		die("bad shm message %lld (fd %d)", (long long)val, fd);
	map_shm(fd);
	if (!(le32toh(hdr->attach_epoch[own_id % 2]) & 1))
		die("own attach_epoch[%d] is even after connect", own_id);

	while (own_count < nr_vectors) {
		if (!recv_msg(&val, &fd))
			die("EOF during setup");
		handle_peer_msg(val, fd);
	}
}

/* "diff": which 32-bit words changed since "snap". */
static void diff_window(void)
{
	const unsigned char *now = (const unsigned char *)hdr;
	uint64_t words = 0, first = 0, last = 0, off, b;
	bool any;

	if (!snapshot) {
		printf("diff error no snapshot\n");
		return;
	}
	for (off = 0; off < win_size; off += 4) {
		if (!memcmp(now + off, snapshot + off, 4))
			continue;
		any = false;
		for (b = off; b < off + 4; b++) {
			if (now[b] == snapshot[b])
				continue;
			if (!words && !any)
				first = b;
			last = b;
			any = true;
		}
		words++;
	}
	if (words)
		printf("diff words=%llu first=0x%llx last=0x%llx\n", (unsigned long long)words,
		       (unsigned long long)first, (unsigned long long)last);
	else
		printf("diff words=0\n");
}

/* The one peer we know all eventfds of, or -1. */
static int the_peer(void)
{
	int id;

	for (id = 0; id < MAX_PEERS; id++)
		if (id != own_id && peer_count[id] == nr_vectors)
			return id;
	return -1;
}

static void ring_peer(unsigned int v, unsigned int n, unsigned int gap_us)
{
	uint64_t one = 1;
	int id = the_peer();
	unsigned int i;

	if (id < 0 || v >= nr_vectors) {
		printf("ring error %s\n", id < 0 ? "no peer" : "bad vector");
		return;
	}
	for (i = 0; i < n; i++) {
		if (write(peer_efd[id][v], &one, sizeof(one)) != sizeof(one))
			die("ring peer %d vector %u: %s", id, v, strerror(errno));
		if (gap_us && i + 1 < n)
			usleep(gap_us);
	}
	printf("rang %u\n", n);
}

static void sum_window(long long off, long long len)
{
	const unsigned char *w = (const unsigned char *)hdr;
	uint64_t h = 0xcbf29ce484222325ULL;
	long long i;

	if (off < 0 || len < 0 || (uint64_t)off > win_size ||
	    (uint64_t)len > win_size - off) {
		printf("sum error out of the window\n");
		return;
	}
	for (i = off; i < off + len; i++)
		h = (h ^ w[i]) * 0x100000001b3ULL;
	printf("sum 0x%016llx\n", (unsigned long long)h);
}

static void command(char *line)
{
	long long off, len;
	unsigned int v, n, gap;

	if (!strcmp(line, "snap")) {
		if (!snapshot && !(snapshot = malloc(win_size)))
			die("out of memory");
		memcpy(snapshot, hdr, win_size);
		printf("snap ok\n");
	} else if (!strcmp(line, "diff")) {
		diff_window();
	} else if (sscanf(line, "ring %u %u %u", &v, &n, &gap) == 3) {
		ring_peer(v, n, gap);
	} else if (sscanf(line, "sum %lli %lli", &off, &len) == 2) {
		sum_window(off, len);
	} else if (!strcmp(line, "total")) {
		printf("total");
		for (v = 0; v < nr_vectors; v++)
			printf(" v%u=%llu", v, (unsigned long long)total[v]);
		putchar('\n');
	} else {
		printf("error unknown command '%s'\n", line);
	}
}

/* Read stdin and run the complete lines; false on EOF. */
static bool read_commands(void)
{
	ssize_t r = read(STDIN_FILENO, cmd_buf + cmd_len, sizeof(cmd_buf) - 1 - cmd_len);
	char *nl;

	if (r < 0 && errno == EINTR)
		return true;
	if (r <= 0)
		return false;
	cmd_len += r;
	while ((nl = memchr(cmd_buf, '\n', cmd_len))) {
		*nl = '\0';
		command(cmd_buf);
		cmd_len -= nl + 1 - cmd_buf;
		memmove(cmd_buf, nl + 1, cmd_len);
	}
	if (cmd_len == sizeof(cmd_buf) - 1)
		die("command line too long");
	return true;
}

static void run(int timeout, bool interactive)
{
	struct pollfd pfd[2 + MAX_VECTORS];
	unsigned int in = 1 + nr_vectors;
	time_t deadline = timeout ? time(NULL) + timeout : 0;
	unsigned int v;
	uint64_t cnt;
	int64_t val;
	int fd;

	for (;;) {
		pfd[0] = (struct pollfd){ .fd = sock, .events = POLLIN };
		for (v = 0; v < nr_vectors; v++)
			pfd[1 + v] = (struct pollfd){ .fd = own_efd[v], .events = POLLIN };
		pfd[in] = (struct pollfd){ .fd = interactive ? STDIN_FILENO : -1,
					   .events = POLLIN };
		if (poll(pfd, in + 1, 200) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		/*
		 * Drain the socket before looking at the doorbells: the server
		 * queues a join/leave notification before it rings, so this
		 * prints events in the order they happened.
		 */
		while (pfd[0].revents) {
			if (!recv_msg(&val, &fd)) {
				printf("server closed\n");
				return;
			}
			handle_peer_msg(val, fd);
			if (poll(pfd, 1, 0) < 0)
				pfd[0].revents = 0;
		}
		for (v = 0; v < nr_vectors; v++) {
			if (!(pfd[1 + v].revents & POLLIN))
				continue;
			if (read(own_efd[v], &cnt, sizeof(cnt)) != sizeof(cnt))
				die("read eventfd: %s", strerror(errno));
			total[v] += cnt;
			printf("vector %u rung count=%llu", v, (unsigned long long)cnt);
			print_epoch();
			putchar('\n');
		}
		/* After the doorbells, so that "total" includes what is in. */
		if (pfd[in].revents && !read_commands())
			return;
		if (deadline && time(NULL) >= deadline) {
			printf("timeout\n");
			exit(3);
		}
	}
}

/* -c: send each argument as a line to the control socket, print the replies. */
static int control(const char *path, int argc, char **argv)
{
	char buf[4096];
	size_t len = 0, lines = 0;
	struct pollfd pfd;
	ssize_t r;
	char *nl;
	int i;

	do_connect(path);
	for (i = 0; i < argc; i++) {
		if (dprintf(sock, "%s\n", argv[i]) < 0)
			die("write %s: %s", path, strerror(errno));
		lines++;
		for (nl = argv[i]; (nl = strchr(nl, '\n')); nl++)
			lines++;
	}
	while (lines) {
		pfd = (struct pollfd){ .fd = sock, .events = POLLIN };
		if (poll(&pfd, 1, 10000) != 1)
			die("no reply from %s", path);
		r = read(sock, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			die("%s closed the connection with %zu replies missing", path, lines);
		len += r;
		while (lines && (nl = memchr(buf, '\n', len))) {
			fwrite(buf, 1, nl + 1 - buf, stdout);
			len -= nl + 1 - buf;
			memmove(buf, nl + 1, len);
			lines--;
		}
		if (len == sizeof(buf) - 1)
			die("reply line too long");
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *ctl = NULL;
	bool once = false, hangup = false, interactive = false;
	int timeout = 0, c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "+S:1xit:c:")) != -1) {
		switch (c) {
		case 'S':
			path = optarg;
			break;
		case '1':
			once = true;
			break;
		case 'x':
			hangup = true;
			break;
		case 't':
			timeout = atoi(optarg);
			break;
		case 'i':
			interactive = true;
			break;
		case 'c':
			ctl = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (ctl)
		return control(ctl, argc - optind, argv + optind);
	if (!path || optind < argc)
		goto usage;
	do_connect(path);
	if (hangup)
		return 0;
	setup();
	if (!once)
		run(timeout, interactive);
	return 0;
usage:
	fprintf(stderr, "usage: fabric-client -S SOCKET [-1 | -x | -i] [-t SECONDS]\n"
			"       fabric-client -c CONTROL_SOCKET COMMAND...\n");
	return 1;
}
