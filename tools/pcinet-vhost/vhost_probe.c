// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_probe: exercise /dev/pcinet-vhost<N> from inside a guest, one
 * line per check, "N passed, N failed" at the end (the QEMU case of the
 * next session runs it on the device side of a link with virtio regions).
 *
 *   vhost_probe [--info] [--board] [DEVICE]   (default /dev/pcinet-vhost0)
 *
 * --info only prints GET_INFO.  --board: the peer runs pcinet's board
 * transport, so the offer must reach its driver: poll() reports its
 * driver state, GET_DRV says valid and names our dev_gen (within 10 s).  Otherwise: GET_INFO; ADD_DEV refused for
 * bad arguments; a virtio-blk shaped device offered (nothing serves it:
 * a board's driver sees it appear, its status writes stay unanswered);
 * the offsets returned inside the regions; a kick eventfd signalled once
 * on binding; a call eventfd bound; its memory file backing the two spans
 * and nothing else (SIGBUS); DEL_DEV revoking the mapping; the slot gone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pcinet_vhost.h"

static int passed, failed;
static sigjmp_buf bus_jmp;

static void check(int ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void check(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("[%s] %s", ok ? " OK " : "FAIL", name);
	if (fmt && *fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

static void on_bus(int sig)
{
	(void)sig;
	siglongjmp(bus_jmp, 1);
}

/* Read one byte; 1 if it raised SIGBUS. */
static int faults(volatile const unsigned char *p)
{
	unsigned char v;

	if (sigsetjmp(bus_jmp, 1))
		return 1;
	v = *p;
	(void)v;
	return 0;
}

static int inside(uint64_t off, uint64_t len, uint64_t start, uint64_t size)
{
	return off >= start && len <= size && off - start <= size - len;
}

static void print_info(const struct pcinet_vhost_info *i)
{
	printf("link %u side %u abi %u flags 0x%x peer_inst 0x%08x events %u\n"
	       "window 0x%" PRIx64 ", dev region 0x%" PRIx64 "+0x%" PRIx64
	       " (free 0x%" PRIx64 "), peer's drv region 0x%" PRIx64 "+0x%" PRIx64
	       " (free 0x%" PRIx64 ")\n",
	       i->link, i->side, i->abi_version, i->flags, i->peer_inst, i->events,
	       (uint64_t)i->win_size, (uint64_t)i->dev_off, (uint64_t)i->dev_size,
	       (uint64_t)i->dev_free, (uint64_t)i->drv_off, (uint64_t)i->drv_size,
	       (uint64_t)i->drv_free);
}

int main(int argc, char **argv)
{
	const char *path = "/dev/pcinet-vhost0";
	struct pcinet_vhost_info info;
	struct pcinet_vhost_dev dev, bad;
	struct pcinet_vhost_drv drv;
	struct pcinet_vhost_vring_fd vf;
	int info_only = 0, board = 0, polled = 0, fd, kfd, cfd, mfd, ok, i;
	unsigned char *map = MAP_FAILED;
	uint64_t cnt = 0;
	uint32_t slot;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--info"))
			info_only = 1;
		else if (!strcmp(argv[i], "--board"))
			board = 1;
		else
			path = argv[i];
	}
	signal(SIGBUS, on_bus);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		check(0, "open", "%s: %s", path, strerror(errno));
		goto out;
	}
	memset(&info, 0, sizeof(info));
	ok = !ioctl(fd, PCINET_VHOST_GET_INFO, &info);
	if (info_only) {
		if (!ok) {
			perror("PCINET_VHOST_GET_INFO");
			return 1;
		}
		print_info(&info);
		return 0;
	}
	check(ok && info.abi_version == PCINET_VHOST_ABI_VERSION &&
	      info.win_size && info.dev_size && info.drv_size && info.dev_free &&
	      info.drv_free, "get-info", "abi %u, dev 0x%llx free 0x%llx",
	      info.abi_version, (unsigned long long)info.dev_size,
	      (unsigned long long)info.dev_free);

	memset(&dev, 0, sizeof(dev));
	dev.device_id = 2;
	dev.features = 1ULL << 32;	/* VIRTIO_F_VERSION_1 */
	dev.nr_vq = 1;
	dev.config_len = 8;
	dev.out_pool_size = 64 << 10;
	dev.in_pool_size = 64 << 10;
	dev.vq[0].num_max = 128;
	dev.config[0] = 0x80;		/* capacity: 128 sectors */

	bad = dev;
	bad.nr_vq = 0;
	ok = ioctl(fd, PCINET_VHOST_ADD_DEV, &bad) < 0 && errno == EINVAL;
	bad = dev;
	bad.features = 0;
	ok = ok && ioctl(fd, PCINET_VHOST_ADD_DEV, &bad) < 0 && errno == EINVAL;
	bad = dev;
	bad.vq[0].num_max = 100;
	ok = ok && ioctl(fd, PCINET_VHOST_ADD_DEV, &bad) < 0 && errno == EINVAL;
	bad = dev;
	bad.out_pool_size = 4097;
	ok = ok && ioctl(fd, PCINET_VHOST_ADD_DEV, &bad) < 0 && errno == EINVAL;
	check(ok, "add-dev-refused", "nr_vq 0, no VERSION_1, num_max 100, pool 4097");

	if (ioctl(fd, PCINET_VHOST_ADD_DEV, &dev)) {
		check(0, "add-dev", "%s", strerror(errno));
		goto out;
	}
	slot = dev.slot;
	check(dev.slot < PCINET_VHOST_MAX_DEV && dev.dev_gen &&
	      !(dev.dev_span_off & 0xffff) && !(dev.drv_span_off & 0xffff) &&
	      inside(dev.dev_span_off, dev.dev_span_size, info.dev_off, info.dev_size) &&
	      inside(dev.drv_span_off, dev.drv_span_size, info.drv_off, info.drv_size) &&
	      inside(dev.vq[0].desc_off, 16 * 128, dev.dev_span_off, dev.dev_span_size) &&
	      inside(dev.vq[0].avail_off, 6 + 2 * 128, dev.dev_span_off, dev.dev_span_size) &&
	      inside(dev.vq[0].used_off, 6 + 8 * 128, dev.drv_span_off, dev.drv_span_size) &&
	      inside(dev.out_pool_off, dev.out_pool_size, dev.dev_span_off, dev.dev_span_size) &&
	      inside(dev.in_pool_off, dev.in_pool_size, dev.drv_span_off, dev.drv_span_size),
	      "add-dev", "slot %u dev_gen 0x%08x spans 0x%llx+0x%llx 0x%llx+0x%llx",
	      dev.slot, dev.dev_gen, (unsigned long long)dev.dev_span_off,
	      (unsigned long long)dev.dev_span_size,
	      (unsigned long long)dev.drv_span_off,
	      (unsigned long long)dev.drv_span_size);

	/*
	 * --board: poll() first, since GET_DRV marks the events seen: a
	 * board quick enough to register before the first GET_DRV would
	 * otherwise leave nothing for poll() to report.
	 */
	if (board) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		for (i = 0; i < 100 && !polled; i++)
			polled = poll(&pfd, 1, 100) == 1 && (pfd.revents & POLLIN);
	}
	memset(&drv, 0, sizeof(drv));
	drv.slot = slot;
	ok = !ioctl(fd, PCINET_VHOST_GET_DRV, &drv);
	check(ok, "get-drv", "valid %u drv_gen 0x%08x status 0x%x seq %u",
	      drv.valid, drv.drv_gen, drv.status, drv.status_seq);
	if (board) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ms;

		for (ms = 0; ms < 10000 && !drv.valid; ms += 100) {
			polled += poll(&pfd, 1, 100) == 1 && (pfd.revents & POLLIN);
			drv.slot = slot;
			if (ioctl(fd, PCINET_VHOST_GET_DRV, &drv))
				break;
		}
		check(drv.valid && drv.drv_gen && drv.dev_gen == dev.dev_gen &&
		      polled, "board-sees-offer",
		      "after ~%d ms: drv_gen 0x%08x status 0x%x seq %u, %d polls",
		      ms, drv.drv_gen, drv.status, drv.status_seq, polled);
	}
	drv.slot = PCINET_VHOST_MAX_DEV;
	check(ioctl(fd, PCINET_VHOST_GET_DRV, &drv) < 0 && errno == ENOENT,
	      "get-drv-bad-slot", "%s", "");

	kfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	memset(&vf, 0, sizeof(vf));
	vf.slot = slot;
	vf.fd = kfd;
	ok = !ioctl(fd, PCINET_VHOST_SET_KICK, &vf);
	ok = ok && read(kfd, &cnt, sizeof(cnt)) == sizeof(cnt);
	check(ok && cnt >= 1, "set-kick", "signalled %llu on binding",
	      (unsigned long long)cnt);
	vf.vq = 1;
	check(ioctl(fd, PCINET_VHOST_SET_KICK, &vf) < 0 && errno == EINVAL,
	      "set-kick-bad-vq", "%s", "");

	cfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	vf.vq = 0;
	vf.fd = cfd;
	ok = !ioctl(fd, PCINET_VHOST_SET_CALL, &vf);
	cnt = 1;
	ok = ok && write(cfd, &cnt, sizeof(cnt)) == sizeof(cnt);
	/* the kernel consumed the count when it rang the peer */
	check(ok && read(cfd, &cnt, sizeof(cnt)) < 0 && errno == EAGAIN,
	      "set-call", "%s", "");

	mfd = ioctl(fd, PCINET_VHOST_GET_MEM_FD, &slot);
	if (mfd >= 0)
		map = mmap(NULL, info.win_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			   mfd, 0);
	check(map != MAP_FAILED, "mem-fd", "%s", mfd < 0 ? strerror(errno) : "");
	if (map != MAP_FAILED) {
		check(!faults(map + dev.dev_span_off) &&
		      !faults(map + dev.drv_span_off + dev.drv_span_size - 1) &&
		      faults(map) && faults(map + dev.dev_span_off + dev.dev_span_size),
		      "mem-fd-spans", "spans backed, header and beyond SIGBUS");
	}
	check(!ioctl(fd, PCINET_VHOST_DEL_DEV, &slot), "del-dev", "%s", "");
	if (map != MAP_FAILED)
		check(faults(map + dev.dev_span_off), "mem-fd-revoked", "%s", "");
	check(ioctl(fd, PCINET_VHOST_DEL_DEV, &slot) < 0 && errno == ENOENT,
	      "del-dev-again", "%s", "");
out:
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
