// SPDX-License-Identifier: GPL-2.0-only
/*
 * testutil - shared by the vhost-user tests.  See testutil.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"

int tu_passed, tu_failed;

void tu_result(int good, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", good ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (good)
		tu_passed++;
	else
		tu_failed++;
}

int tu_memfd(struct vu_mem *m, uint64_t size)
{
	void *p;
	int fd;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	fd = memfd_create("pcinet-vhost-window",
			  MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* Sealed as pcinet-fabric seals the window it hands to QEMU. */
	if (ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int err = -errno;

		close(fd);
		return err;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int err = -errno;

		close(fd);
		return err;
	}
	m->fd = fd;
	m->base = p;
	m->size = size;
	m->gpa = 0;
	return 0;
}

void tu_memfd_free(struct vu_mem *m)
{
	if (m->base)
		munmap(m->base, m->size);
	if (m->fd >= 0)
		close(m->fd);
	m->base = NULL;
	m->fd = -1;
}

static const struct feature_name transport_names[] = {
	{ 24, "NOTIFY_ON_EMPTY" },
	{ 26, "LOG_ALL" },
	{ 27, "ANY_LAYOUT" },
	{ 28, "RING_INDIRECT_DESC" },
	{ 29, "RING_EVENT_IDX" },
	{ 30, "PROTOCOL_FEATURES" },
	{ 32, "VERSION_1" },
	{ 33, "ACCESS_PLATFORM" },
	{ 34, "RING_PACKED" },
	{ 35, "IN_ORDER" },
	{ 36, "ORDER_PLATFORM" },
	{ 37, "SR_IOV" },
	{ 38, "NOTIFICATION_DATA" },
	{ 40, "RING_RESET" },
	{ 0, NULL },
};

static const char *lookup(const struct feature_name *t, unsigned int bit)
{
	for (; t && t->name; t++)
		if (t->bit == bit)
			return t->name;
	return NULL;
}

void tu_format_features(uint64_t f, const struct feature_name *dev,
			char *buf, size_t len)
{
	size_t n = 0;
	unsigned int bit;

	buf[0] = '\0';
	for (bit = 0; bit < 64 && n < len; bit++) {
		const char *name;
		int r;

		if (!(f & (1ull << bit)))
			continue;
		name = bit < 24 ? lookup(dev, bit) :
				  lookup(transport_names, bit);
		if (name)
			r = snprintf(buf + n, len - n, "%s%s", n ? "," : "",
				     name);
		else
			r = snprintf(buf + n, len - n, "%sbit%u",
				     n ? "," : "", bit);
		if (r < 0)
			break;
		n += (size_t)r;
	}
}

void tu_print_features(const char *who, const struct vu_dev *d,
		       const struct feature_name *dev)
{
	char buf[1024];

	tu_format_features(d->features, dev, buf, sizeof(buf));
	printf("# %s offers features %#llx: %s\n", who,
	       (unsigned long long)d->features, buf);
	vu_format_protocol_features(d->protocol_features, buf, sizeof(buf));
	printf("# %s offers protocol features %#llx: %s\n", who,
	       (unsigned long long)d->protocol_features, buf);
	tu_format_features(d->acked_features, dev, buf, sizeof(buf));
	printf("# negotiated features %#llx: %s\n",
	       (unsigned long long)d->acked_features, buf);
	vu_format_protocol_features(d->acked_protocol_features, buf,
				    sizeof(buf));
	printf("# negotiated protocol features %#llx: %s\n",
	       (unsigned long long)d->acked_protocol_features, buf);
}

uint8_t tu_pattern(uint64_t s, unsigned int i)
{
	uint32_t x = (uint32_t)s * 2654435761u + i * 40503u + 0x9e3779b9u;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)x;
}

void tu_fill(uint8_t *p, uint64_t sector, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = tu_pattern(sector + i / TU_SECTOR, i % TU_SECTOR);
}

long tu_check(const uint8_t *p, uint64_t sector, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (p[i] != tu_pattern(sector + i / TU_SECTOR, i % TU_SECTOR))
			return i;
	return -1;
}
