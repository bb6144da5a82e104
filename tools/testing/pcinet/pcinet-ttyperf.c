// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet-ttyperf: byte throughput and echo round trip of a tty, for the
 * ttyPCI front-end of pcinet (or any tty pair: test it on a pty).
 *
 *   pcinet-ttyperf echo DEV SECONDS      echo what arrives, for SECONDS
 *   pcinet-ttyperf rtt DEV N [SIZE]      N round trips of SIZE bytes
 *                                        (default 1) through an echo
 *   pcinet-ttyperf send DEV BYTES        write BYTES bytes
 *   pcinet-ttyperf recv DEV BYTES SECS   read BYTES bytes (give up after
 *                                        SECS); time first to last byte
 *   pcinet-ttyperf drain DEV BYTES       write up to BYTES without blocking
 *                                        (stop when no room came for 1 s),
 *                                        then tcdrain(); report the output
 *                                        queue (TIOCOUTQ) around it
 *   pcinet-ttyperf quiet DEV MS SECS     read and discard until nothing came
 *                                        for MS ms and our output queue
 *                                        (TIOCOUTQ) is empty: both rings
 *                                        drained when both ends run it;
 *                                        fails after SECS
 *   pcinet-ttyperf modem DEV             print the modem lines (TIOCMGET)
 *   pcinet-ttyperf icount DEV            print the counters (TIOCGICOUNT)
 *   pcinet-ttyperf gen FILE BYTES SEED   write a pseudo-random stream
 *   pcinet-ttyperf verify FILE BYTES SEED
 *                                        check that FILE is gen's stream of
 *                                        BYTES with runs left out, no byte
 *                                        changed (a lossy line: gaps are
 *                                        counted, a changed byte fails)
 *
 * The tty is put in raw mode (no echo, no translation, VMIN 1).  Output
 * is key=value lines:  rtt: n= p50_us= p99_us= avg_us= min_us= max_us=
 * recv: bytes= secs= kBps= (10^3 bytes per second); drain: wrote=
 * outq_before= drain_secs= outq_after= modem=; quiet: discarded= outq=
 * secs=; modem: dtr= rts= cd= dsr= cts=;
 * icount: rx= tx= frame= overrun= buf_overrun=; verify: bytes= gaps=
 * dropped= corrupt= (corrupt=1 also gives at=, the offset in FILE).
 */
#define _GNU_SOURCE	/* memmem */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/serial.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int open_raw(const char *dev)
{
	struct termios t;
	int fd = open(dev, O_RDWR | O_NOCTTY);

	if (fd < 0) {
		perror(dev);
		exit(1);
	}
	if (tcgetattr(fd, &t) == 0) {
		cfmakeraw(&t);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		t.c_cflag |= CLOCAL;
		tcsetattr(fd, TCSANOW, &t);
	}
	tcflush(fd, TCIOFLUSH);
	return fd;
}

/* Wait up to ms for input; 1 if readable. */
static int wait_in(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) > 0;
}

static int write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);

		if (w < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -1;
		}
		buf += w;
		n -= w;
	}
	return 0;
}

static int outq(int fd)
{
	int n = -1;

	return ioctl(fd, TIOCOUTQ, &n) ? -1 : n;
}

static int modem(int fd)
{
	int lines = -1;

	return ioctl(fd, TIOCMGET, &lines) ? -1 : lines;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The stream of gen and verify: splitmix64 of each 8-byte word's index. */
static void seq_fill(unsigned char *p, size_t n, uint64_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t z = seed + (i / 8 + 1) * 0x9e3779b97f4a7c15ULL;

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		z ^= z >> 31;
		p[i] = (unsigned char)(z >> (8 * (i % 8)));
	}
}

static unsigned char *seq_make(size_t n, uint64_t seed)
{
	unsigned char *p = malloc(n ? n : 1);

	if (!p) {
		perror("malloc");
		exit(1);
	}
	seq_fill(p, n, seed);
	return p;
}

static int cmd_gen(const char *path, size_t n, uint64_t seed)
{
	unsigned char *p = seq_make(n, seed);
	FILE *f = fopen(path, "w");

	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		perror(path);
		return 1;
	}
	free(p);
	return 0;
}

/*
 * FILE must be the stream with whole runs left out (records a lossy line
 * dropped) and nothing else: walk it along the stream; where they part,
 * find the next bytes of FILE further on in the stream (a gap).  A byte
 * that was changed is found nowhere further on.  Patterns down to 4 bytes
 * are tried, so a run shorter than that between two gaps reads as a
 * change (never seen with the records the tests send).
 */
static int cmd_verify(const char *path, size_t total, uint64_t seed)
{
	unsigned char *src = seq_make(total, seed), *got;
	size_t n, j = 0, p = 0, gaps = 0;
	struct stat st;
	FILE *f = fopen(path, "r");

	if (!f || fstat(fileno(f), &st)) {
		perror(path);
		return 1;
	}
	n = st.st_size;
	got = malloc(n ? n : 1);
	if (!got || fread(got, 1, n, f) != n) {
		perror(path);
		return 1;
	}
	fclose(f);
	while (j < n) {
		const unsigned char *q = NULL;
		size_t len;

		while (j < n && p < total && got[j] == src[p]) {
			j++;
			p++;
		}
		if (j == n)
			break;
		for (len = 16; len >= 4 && !q; len /= 2) {
			size_t l = len < n - j ? len : n - j;

			if (p + 1 < total)
				q = memmem(src + p + 1, total - p - 1, got + j, l);
		}
		if (!q) {
			printf("verify: bytes=%zu gaps=%zu corrupt=1 at=%zu\n",
			       n, gaps, j);
			return 1;
		}
		gaps++;
		p = q - src;
	}
	printf("verify: bytes=%zu gaps=%zu dropped=%zu corrupt=0\n", n, gaps,
	       total - n);
	free(src);
	free(got);
	return 0;
}

static int cmd_icount(const char *dev)
{
	struct serial_icounter_struct ic;
	int fd = open(dev, O_RDONLY | O_NOCTTY | O_NONBLOCK);

	if (fd < 0 || ioctl(fd, TIOCGICOUNT, &ic)) {
		perror(dev);
		return 1;
	}
	printf("icount: rx=%d tx=%d frame=%d overrun=%d buf_overrun=%d\n",
	       ic.rx, ic.tx, ic.frame, ic.overrun, ic.buf_overrun);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static char buf[65536];
	int fd;

	if (argc > 4 && !strcmp(argv[1], "gen"))
		return cmd_gen(argv[2], strtoull(argv[3], NULL, 0),
			       strtoull(argv[4], NULL, 0));
	if (argc > 4 && !strcmp(argv[1], "verify"))
		return cmd_verify(argv[2], strtoull(argv[3], NULL, 0),
				  strtoull(argv[4], NULL, 0));
	if (argc > 2 && !strcmp(argv[1], "icount"))
		return cmd_icount(argv[2]);
	if (argc < 3 || (argc < 4 && strcmp(argv[1], "modem"))) {
		fprintf(stderr, "usage: pcinet-ttyperf echo DEV SECS | rtt DEV N [SIZE] | "
			"send DEV BYTES | recv DEV BYTES SECS | drain DEV BYTES | "
			"quiet DEV MS SECS | modem DEV | icount DEV | gen FILE BYTES SEED | "
			"verify FILE BYTES SEED\n");
		return 1;
	}
	fd = open_raw(argv[2]);

	if (!strcmp(argv[1], "echo")) {
		double end = now() + atof(argv[3]);

		while (now() < end) {
			ssize_t n;

			if (!wait_in(fd, 100))
				continue;
			n = read(fd, buf, sizeof(buf));
			if (n > 0 && write_all(fd, buf, n))
				return 1;
		}
		return 0;
	}
	if (!strcmp(argv[1], "rtt")) {
		long i, n = atol(argv[3]);
		size_t size = argc > 4 ? strtoul(argv[4], NULL, 0) : 1;
		double *lat = calloc(n > 0 ? n : 1, sizeof(*lat)), sum = 0;

		if (!lat || n <= 0 || size == 0 || size > sizeof(buf))
			return 1;
		memset(buf, 'x', size);
		for (i = 0; i < n; i++) {
			double t0 = now();
			size_t got = 0;

			if (write_all(fd, buf, size))
				return 1;
			while (got < size) {
				ssize_t r;

				if (!wait_in(fd, 5000)) {
					fprintf(stderr, "rtt: no echo after 5 s (%ld done)\n", i);
					return 1;
				}
				r = read(fd, buf + got, size - got);
				if (r > 0)
					got += r;
			}
			lat[i] = (now() - t0) * 1e6;
			sum += lat[i];
		}
		qsort(lat, n, sizeof(*lat), cmp_double);
		printf("rtt: n=%ld size=%zu p50_us=%.1f p99_us=%.1f avg_us=%.1f "
		       "min_us=%.1f max_us=%.1f\n", n, size, lat[n / 2],
		       lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1],
		       sum / n, lat[0], lat[n - 1]);
		return 0;
	}
	if (!strcmp(argv[1], "send")) {
		long long left = atoll(argv[3]);

		memset(buf, 'y', sizeof(buf));
		while (left > 0) {
			size_t n = left < (long long)sizeof(buf) ? (size_t)left : sizeof(buf);

			if (write_all(fd, buf, n))
				return 1;
			left -= n;
		}
		tcdrain(fd);
		return 0;
	}
	if (!strcmp(argv[1], "recv") && argc > 4) {
		long long want = atoll(argv[3]), got = 0, first = 0;
		double end = now() + atof(argv[4]), t0 = 0, t1 = 0;

		while (got < want && now() < end) {
			ssize_t r;

			if (!wait_in(fd, 100))
				continue;
			r = read(fd, buf, sizeof(buf));
			if (r <= 0)
				continue;
			if (!got) {
				t0 = now();
				first = r;	/* arrived before t0 */
			}
			got += r;
			t1 = now();
		}
		printf("recv: bytes=%lld secs=%.3f kBps=%.1f\n", got, t1 - t0,
		       t1 > t0 ? (got - first) / (t1 - t0) / 1e3 : 0.0);
		return got < want;
	}
	if (!strcmp(argv[1], "drain")) {
		long long left = atoll(argv[3]), wrote = 0;
		int fl = fcntl(fd, F_GETFL), before;
		double t0;

		memset(buf, 'z', sizeof(buf));
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
		while (left > 0) {
			size_t n = left < (long long)sizeof(buf) ? (size_t)left : sizeof(buf);
			ssize_t w = write(fd, buf, n);
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			if (w > 0) {
				wrote += w;
				left -= w;
				continue;
			}
			/* Full: stop once no room came back for a second. */
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				break;
			if (poll(&p, 1, 1000) <= 0)
				break;
		}
		fcntl(fd, F_SETFL, fl);
		before = outq(fd);
		t0 = now();
		if (tcdrain(fd)) {
			perror("tcdrain");
			return 1;
		}
		printf("drain: wrote=%lld outq_before=%d drain_secs=%.3f outq_after=%d "
		       "modem=0x%x\n", wrote, before, now() - t0, outq(fd), modem(fd));
		return 0;
	}
	if (!strcmp(argv[1], "quiet") && argc > 4) {
		double t0 = now(), idle_ms = atof(argv[3]), end = t0 + atof(argv[4]);
		double last = t0;
		long long discarded = 0;
		int q = outq(fd);

		while (now() < end) {
			if (wait_in(fd, 20)) {
				ssize_t r = read(fd, buf, sizeof(buf));

				if (r > 0) {
					discarded += r;
					last = now();
				} else if (r < 0 && errno != EINTR && errno != EAGAIN) {
					perror("read");
					return 1;
				}
				continue;
			}
			q = outq(fd);
			if (q == 0 && (now() - last) * 1e3 >= idle_ms)
				break;
		}
		printf("quiet: discarded=%lld outq=%d secs=%.3f\n", discarded, q,
		       now() - t0);
		return q != 0 || (now() - last) * 1e3 < idle_ms;
	}
	if (!strcmp(argv[1], "modem")) {
		int m = modem(fd);

		if (m < 0) {
			perror("TIOCMGET");
			return 1;
		}
		printf("modem: dtr=%d rts=%d cd=%d dsr=%d cts=%d\n", !!(m & TIOCM_DTR),
		       !!(m & TIOCM_RTS), !!(m & TIOCM_CD), !!(m & TIOCM_DSR),
		       !!(m & TIOCM_CTS));
		return 0;
	}
	fprintf(stderr, "pcinet-ttyperf: unknown command %s\n", argv[1]);
	return 1;
}
