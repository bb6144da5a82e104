// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet-memcpy: the raw limit of a pcinet link on this machine, measured
 * from inside a guest: how fast the CPU copies into (and out of) the
 * shared window, in the chunk sizes the net front-end copies.
 *
 *   pcinet-memcpy [-t SECONDS] [-r REPS] [CHUNK...]
 *
 * For each repetition and chunk size (default 1500 and 65536 bytes) it
 * prints lines such as
 *
 *   rep=1 chunk=65536 op=write_memcpy mbps=1234.5
 *
 * (mbps: 10^6 bytes per second) for these copies:
 *
 *   write_kernel  RAM -> window with the loop of the kernel's memcpy()
 *                 on a CPU without FSRM (memcpy_orig: 4 x 8-byte moves per
 *                 round), which is what skb_copy_bits() into the ring runs
 *                 in these guests (QEMU's TCG "max" CPU has ERMS, no FSRM)
 *   read_kernel   window -> RAM, the same loop (skb_store_bits() on the
 *                 receive side)
 *   write_movsb   RAM -> window, "rep movsb" (the kernel's memcpy() with
 *                 FSRM, and its copy_{to,from}_user() with ERMS)
 *   write_glibc   RAM -> window, glibc memcpy()
 *   ram_kernel    RAM -> RAM, the kernel's loop, for reference
 *
 * Destinations are laid out like net records (a 16-byte record header,
 * the payload, padding to 64 bytes) walking through a part of the window
 * that no ring uses: the tail of the peer's data inbox after its net ring
 * (about 3.9 MiB in the default 16 MiB window).  So it runs while the
 * driver is bound and the link is up, without disturbing it.  The window
 * is BAR2 of the first ivshmem device, mapped through sysfs (root).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pcinet_user.h"
#include "guest_window.h"

#define REC_HDR		16
#define MIN_AREA	(1024 * 1024)
#define SRC_SIZE	(4 * 1024 * 1024)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* arch/x86/lib/memcpy_64.S, memcpy_orig: the 32-byte loop, then a tail. */
static void copy_kernel(void *dst, const void *src, size_t n)
{
	size_t rounds = n / 32;

	if (rounds)
		__asm__ volatile("1:\n\t"
				 "movq 0(%%rsi), %%r8\n\t"
				 "movq 8(%%rsi), %%r9\n\t"
				 "movq 16(%%rsi), %%r10\n\t"
				 "movq 24(%%rsi), %%r11\n\t"
				 "movq %%r8, 0(%%rdi)\n\t"
				 "movq %%r9, 8(%%rdi)\n\t"
				 "movq %%r10, 16(%%rdi)\n\t"
				 "movq %%r11, 24(%%rdi)\n\t"
				 "leaq 32(%%rsi), %%rsi\n\t"
				 "leaq 32(%%rdi), %%rdi\n\t"
				 "decq %%rcx\n\t"
				 "jnz 1b"
				 : "+D"(dst), "+S"(src), "+c"(rounds)
				 : : "r8", "r9", "r10", "r11", "memory", "cc");
	/* the tail: at most 31 bytes */
	memcpy(dst, src, n % 32);
}

static void copy_movsb(void *dst, const void *src, size_t n)
{
	__asm__ volatile("rep movsb"
			 : "+D"(dst), "+S"(src), "+c"(n)
			 : : "memory");
}

enum op { WRITE_KERNEL, READ_KERNEL, WRITE_MOVSB, WRITE_GLIBC, RAM_KERNEL,
	  NR_OPS };
static const char *const op_name[NR_OPS] = {
	"write_kernel", "read_kernel", "write_movsb", "write_glibc",
	"ram_kernel",
};

/*
 * Copy chunk-sized records through [area, area + size) for about secs
 * seconds; the other side of each copy walks through a RAM buffer.
 * Returns 10^6 bytes per second.
 */
static double run(enum op op, u8 *area, size_t size, u8 *ram, u8 *ram2,
		  size_t chunk, double secs)
{
	size_t stride = (REC_HDR + chunk + 63) & ~(size_t)63;
	size_t slots = size / stride, sslots = SRC_SIZE / stride;
	size_t i = 0, j = 0, batch = 1 + (4u << 20) / chunk;
	unsigned long long bytes = 0;
	double t0 = now(), t;
	volatile u8 sink;

	if (!slots || !sslots)
		return 0;
	do {
		for (size_t k = 0; k < batch; k++) {
			u8 *w = area + i * stride + REC_HDR;
			u8 *r = ram + j * stride;

			switch (op) {
			case WRITE_KERNEL:
				copy_kernel(w, r, chunk);
				break;
			case READ_KERNEL:
				copy_kernel(r, w, chunk);
				break;
			case WRITE_MOVSB:
				copy_movsb(w, r, chunk);
				break;
			case WRITE_GLIBC:
				memcpy(w, r, chunk);
				break;
			default:
				copy_kernel(ram2 + i % sslots * stride, r, chunk);
				break;
			}
			if (++i == slots)
				i = 0;
			if (++j == sslots)
				j = 0;
		}
		bytes += (unsigned long long)batch * chunk;
		t = now() - t0;
	} while (t < secs);
	sink = area[REC_HDR];
	(void)sink;
	return bytes / t / 1e6;
}

int main(int argc, char **argv)
{
	size_t chunks[16] = { 1500, 65536 };
	int nchunks = 2, reps = 3, opt, r, c, o;
	volatile u32 *regs;
	const struct pcinet_win_hdr *hdr;
	struct pcinet_ring_loc net;
	u64 doff, dsize, aoff, asize;
	double secs = 0.5;
	unsigned int side, other;
	size_t rlen, wlen;
	char dev[300];
	u8 *win, *ram, *ram2;

	while ((opt = getopt(argc, argv, "t:r:")) != -1) {
		switch (opt) {
		case 't':
			secs = atof(optarg);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: pcinet-memcpy [-t SECONDS] [-r REPS] [CHUNK...]\n");
			return 1;
		}
	}
	if (optind < argc) {
		nchunks = 0;
		for (; optind < argc && nchunks < 16; optind++)
			chunks[nchunks++] = strtoul(argv[optind], NULL, 0);
	}
	if (find_dev(dev, sizeof(dev))) {
		fprintf(stderr, "pcinet-memcpy: no ivshmem device\n");
		return 1;
	}
	regs = map_bar(dev, 0, &rlen);
	win = map_bar(dev, 2, &wlen);
	hdr = (const struct pcinet_win_hdr *)win;
	if (wlen < PCINET_HDR_SIZE || le32_to_cpu(hdr->magic) != PCINET_WIN_MAGIC) {
		fprintf(stderr, "pcinet-memcpy: no pcinet window\n");
		return 1;
	}
	side = regs[2] & 1;
	other = !side;
	doff = le64_to_cpu(hdr->side[other].data_off);
	dsize = le64_to_cpu(hdr->side[other].data_size);
	if (doff > wlen || dsize > wlen - doff ||
	    pcinet_layout_ring(doff, dsize, PCINET_CHAN_NET, &net)) {
		fprintf(stderr, "pcinet-memcpy: bad window header\n");
		return 1;
	}
	aoff = net.off + net.size;
	asize = doff + dsize - aoff;
	if (asize < MIN_AREA) {
		fprintf(stderr, "pcinet-memcpy: only %llu unused bytes after the net ring\n",
			(unsigned long long)asize);
		return 1;
	}
	ram = aligned_alloc(4096, SRC_SIZE);
	ram2 = aligned_alloc(4096, SRC_SIZE);
	if (!ram || !ram2)
		return 1;
	memset(ram, 0x5a, SRC_SIZE);
	memset(ram2, 0xa5, SRC_SIZE);
	printf("window=%zu side=%u area_off=0x%llx area_size=%llu\n", wlen,
	       side, (unsigned long long)aoff, (unsigned long long)asize);
	for (r = 1; r <= reps; r++)
		for (c = 0; c < nchunks; c++)
			for (o = 0; o < NR_OPS; o++)
				printf("rep=%d chunk=%zu op=%s mbps=%.1f\n", r,
				       chunks[c], op_name[o],
				       run(o, win + aoff, asize, ram, ram2,
					   chunks[c], secs));
	return 0;
}
