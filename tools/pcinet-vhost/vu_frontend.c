// SPDX-License-Identifier: GPL-2.0-only
/*
 * vu_frontend - a small vhost-user front end.  See vu_frontend.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <signal.h>
#include <sys/wait.h>

#include "vu_frontend.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static const char *const req_names[] = {
	[VU_GET_FEATURES] = "GET_FEATURES",
	[VU_SET_FEATURES] = "SET_FEATURES",
	[VU_SET_OWNER] = "SET_OWNER",
	[VU_RESET_OWNER] = "RESET_OWNER",
	[VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VU_SET_VRING_NUM] = "SET_VRING_NUM",
	[VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VU_SET_VRING_BASE] = "SET_VRING_BASE",
	[VU_GET_VRING_BASE] = "GET_VRING_BASE",
	[VU_SET_VRING_KICK] = "SET_VRING_KICK",
	[VU_SET_VRING_CALL] = "SET_VRING_CALL",
	[VU_SET_VRING_ERR] = "SET_VRING_ERR",
	[VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VU_GET_CONFIG] = "GET_CONFIG",
	[VU_SET_CONFIG] = "SET_CONFIG",
	[VU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
};

static const char *const pf_names[VU_PF_NR] = {
	[VU_PF_MQ] = "MQ",
	[VU_PF_LOG_SHMFD] = "LOG_SHMFD",
	[VU_PF_RARP] = "RARP",
	[VU_PF_REPLY_ACK] = "REPLY_ACK",
	[VU_PF_NET_MTU] = "NET_MTU",
	[VU_PF_BACKEND_REQ] = "BACKEND_REQ",
	[VU_PF_CROSS_ENDIAN] = "CROSS_ENDIAN",
	[VU_PF_CRYPTO_SESSION] = "CRYPTO_SESSION",
	[VU_PF_PAGEFAULT] = "PAGEFAULT",
	[VU_PF_CONFIG] = "CONFIG",
	[VU_PF_BACKEND_SEND_FD] = "BACKEND_SEND_FD",
	[VU_PF_HOST_NOTIFIER] = "HOST_NOTIFIER",
	[VU_PF_INFLIGHT_SHMFD] = "INFLIGHT_SHMFD",
	[VU_PF_RESET_DEVICE] = "RESET_DEVICE",
	[VU_PF_INBAND_NOTIFICATIONS] = "INBAND_NOTIFICATIONS",
	[VU_PF_CONFIGURE_MEM_SLOTS] = "CONFIGURE_MEM_SLOTS",
	[VU_PF_STATUS] = "STATUS",
};

const char *vu_request_name(uint32_t req)
{
	if (req < ARRAY_SIZE(req_names) && req_names[req])
		return req_names[req];
	return "?";
}

const char *vu_protocol_feature_name(unsigned int bit)
{
	if (bit < VU_PF_NR && pf_names[bit])
		return pf_names[bit];
	return NULL;
}

void vu_format_protocol_features(uint64_t pf, char *buf, size_t len)
{
	size_t n = 0;
	unsigned int bit;

	if (!len)
		return;
	buf[0] = '\0';
	for (bit = 0; bit < 64 && n < len; bit++) {
		const char *name;
		int r;

		if (!(pf & (1ull << bit)))
			continue;
		name = vu_protocol_feature_name(bit);
		if (name)
			r = snprintf(buf + n, len - n, "%s%s", n ? "," : "",
				     name);
		else
			r = snprintf(buf + n, len - n, "%sbit%u", n ? "," : "",
				     bit);
		if (r < 0)
			break;
		n += (size_t)r;
	}
}

int vu_connect(struct vu_dev *d, const char *path, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv;

	memset(d, 0, sizeof(*d));
	d->sock = -1;
	d->mem.fd = -1;
	d->timeout_ms = timeout_ms;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);

	d->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (d->sock < 0)
		return -errno;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	if (setsockopt(d->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(d->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    connect(d->sock, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;

		close(d->sock);
		d->sock = -1;
		return err;
	}
	return 0;
}

void vu_close(struct vu_dev *d)
{
	if (d->sock >= 0)
		close(d->sock);
	d->sock = -1;
}

bool vu_hung_up(const struct vu_dev *d)
{
	struct pollfd p = { .fd = d->sock, .events = POLLIN };

	return d->sock >= 0 && poll(&p, 1, 0) == 1 && p.revents;
}

int vu_send(struct vu_dev *d, uint32_t req, uint32_t flags,
	    const void *payload, uint32_t size, const int *fds, int nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * VU_MAX_REGIONS)];
	struct vu_hdr hdr = {
		.request = req,
		.flags = VU_FLAG_VERSION | flags,
		.size = size,
	};
	struct iovec iov[2] = {
		{ .iov_base = &hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)payload, .iov_len = size },
	};
	struct msghdr mh = {
		.msg_iov = iov,
		.msg_iovlen = size ? 2 : 1,
	};
	size_t total = sizeof(hdr) + size;
	ssize_t r;

	if (size > sizeof(union vu_payload) || nfds < 0 ||
	    nfds > VU_MAX_REGIONS)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	if (d->verbose)
		fprintf(stderr, "vu: -> %s size %u nfds %d%s\n",
			vu_request_name(req), size, nfds,
			flags & VU_FLAG_NEED_REPLY ? " need_reply" : "");
	do {
		r = sendmsg(d->sock, &mh, MSG_NOSIGNAL);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	/* Unix stream sockets do not split a message this small. */
	if ((size_t)r != total)
		return -EIO;
	return 0;
}

/* Read exactly LEN bytes; closes any fds the peer attaches. */
static int recv_full(struct vu_dev *d, void *buf, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int) * VU_MAX_REGIONS)];
	size_t got = 0;

	while (got < len) {
		struct iovec iov = {
			.iov_base = (char *)buf + got,
			.iov_len = len - got,
		};
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = cbuf,
			.msg_controllen = sizeof(cbuf),
		};
		struct cmsghdr *cm;
		ssize_t r;

		r = recvmsg(d->sock, &mh, MSG_CMSG_CLOEXEC);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (r == 0)
			return -ECONNRESET;
		/* We never ask for fds; do not leak any we are given. */
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t n, i;
			int fd;

			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS ||
			    cm->cmsg_len < CMSG_LEN(0))
				continue;
			n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < n; i++) {
				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(int));
				close(fd);
			}
		}
		got += (size_t)r;
	}
	return 0;
}

int vu_recv_reply(struct vu_dev *d, uint32_t req, void *p, uint32_t *size)
{
	union vu_payload scratch;
	struct vu_hdr hdr;
	int err;

	err = recv_full(d, &hdr, sizeof(hdr));
	if (err)
		return err;
	if ((hdr.flags & VU_FLAG_VERSION_MASK) != VU_FLAG_VERSION ||
	    !(hdr.flags & VU_FLAG_REPLY) || hdr.request != req ||
	    hdr.size > sizeof(scratch) || hdr.size > *size) {
		if (d->verbose)
			fprintf(stderr,
				"vu: bad reply to %s: req %u flags %#x size %u\n",
				vu_request_name(req), hdr.request, hdr.flags,
				hdr.size);
		return -EPROTO;
	}
	err = recv_full(d, &scratch, hdr.size);
	if (err)
		return err;
	memcpy(p, &scratch, hdr.size);
	*size = hdr.size;
	if (d->verbose)
		fprintf(stderr, "vu: <- %s size %u\n", vu_request_name(req),
			hdr.size);
	return 0;
}

static int recv_u64(struct vu_dev *d, uint32_t req, uint64_t *v)
{
	uint32_t size = sizeof(*v);
	int err;

	err = vu_recv_reply(d, req, v, &size);
	if (err)
		return err;
	return size == sizeof(*v) ? 0 : -EPROTO;
}

/*
 * A request without a reply of its own.  With REPLY_ACK negotiated, ask
 * for the acknowledgment so a failure shows up here, at the message that
 * caused it, and so the back end has acted on it before we go on.
 */
static int vu_set(struct vu_dev *d, uint32_t req, const void *payload,
		  uint32_t size, const int *fds, int nfds)
{
	int ack = !!(d->acked_protocol_features & (1ull << VU_PF_REPLY_ACK));
	uint64_t status;
	int err;

	err = vu_send(d, req, ack ? VU_FLAG_NEED_REPLY : 0, payload, size,
		      fds, nfds);
	if (err || !ack)
		return err;
	err = recv_u64(d, req, &status);
	if (err)
		return err;
	return status ? -EREMOTEIO : 0;
}

static int vu_get_u64(struct vu_dev *d, uint32_t req, uint64_t *v)
{
	int err = vu_send(d, req, 0, NULL, 0, NULL, 0);

	return err ? err : recv_u64(d, req, v);
}

int vu_get_features(struct vu_dev *d, uint64_t *features)
{
	return vu_get_u64(d, VU_GET_FEATURES, features);
}

int vu_set_features(struct vu_dev *d, uint64_t features)
{
	return vu_set(d, VU_SET_FEATURES, &features, sizeof(features), NULL, 0);
}

int vu_get_protocol_features(struct vu_dev *d, uint64_t *pf)
{
	return vu_get_u64(d, VU_GET_PROTOCOL_FEATURES, pf);
}

int vu_set_protocol_features(struct vu_dev *d, uint64_t pf)
{
	/* Not acked: REPLY_ACK is only in force once this has been sent. */
	return vu_send(d, VU_SET_PROTOCOL_FEATURES, 0, &pf, sizeof(pf), NULL,
		       0);
}

int vu_get_queue_num(struct vu_dev *d, uint64_t *n)
{
	return vu_get_u64(d, VU_GET_QUEUE_NUM, n);
}

int vu_set_owner(struct vu_dev *d)
{
	return vu_set(d, VU_SET_OWNER, NULL, 0, NULL, 0);
}

int vu_set_mem_table(struct vu_dev *d, const struct vu_mem *mem)
{
	struct vu_mem_table t;
	uint32_t size;

	memset(&t, 0, sizeof(t));
	t.nregions = 1;
	t.regions[0].gpa = mem->gpa;
	t.regions[0].size = mem->size;
	t.regions[0].uaddr = (uintptr_t)mem->base;
	t.regions[0].mmap_offset = mem->offset;
	/* Only the regions in use are sent (QEMU does the same). */
	size = offsetof(struct vu_mem_table, regions) +
	       t.nregions * sizeof(t.regions[0]);
	return vu_set(d, VU_SET_MEM_TABLE, &t, size, &mem->fd, 1);
}

int vu_set_mem_regions(struct vu_dev *d, const struct vu_mem *regs,
		       unsigned int n)
{
	struct vu_mem_table t;
	int fds[VU_MAX_REGIONS];
	unsigned int i;
	uint32_t size;

	if (!n || n > VU_MAX_REGIONS)
		return -EINVAL;
	memset(&t, 0, sizeof(t));
	t.nregions = n;
	for (i = 0; i < n; i++) {
		t.regions[i].gpa = regs[i].gpa;
		t.regions[i].size = regs[i].size;
		t.regions[i].uaddr = (uintptr_t)regs[i].base;
		t.regions[i].mmap_offset = regs[i].offset;
		fds[i] = regs[i].fd;
		d->regs[i] = regs[i];
	}
	d->nregs = n;
	memset(&d->mem, 0, sizeof(d->mem));
	d->mem.fd = -1;
	size = offsetof(struct vu_mem_table, regions) +
	       t.nregions * sizeof(t.regions[0]);
	return vu_set(d, VU_SET_MEM_TABLE, &t, size, fds, (int)n);
}

int vu_get_config(struct vu_dev *d, uint32_t offset, void *buf, uint32_t len)
{
	struct vu_config c;
	uint32_t size = sizeof(c);
	uint32_t hdr = offsetof(struct vu_config, data);
	int err;

	if (!(d->acked_protocol_features & (1ull << VU_PF_CONFIG)))
		return -EOPNOTSUPP;
	if (len > VU_MAX_CONFIG)
		return -EINVAL;
	memset(&c, 0, sizeof(c));
	c.offset = offset;
	c.size = len;
	c.flags = 0;
	err = vu_send(d, VU_GET_CONFIG, 0, &c, hdr + len, NULL, 0);
	if (err)
		return err;
	err = vu_recv_reply(d, VU_GET_CONFIG, &c, &size);
	if (err)
		return err;
	/* A back end that cannot answer sends an empty payload. */
	if (size == 0)
		return -EREMOTEIO;
	if (size != hdr + len || c.size != len || c.offset != offset)
		return -EPROTO;
	memcpy(buf, c.data, len);
	return 0;
}

int vu_set_config(struct vu_dev *d, uint32_t offset, const void *buf,
		  uint32_t len)
{
	uint32_t hdr = offsetof(struct vu_config, data);
	struct vu_config c;

	if (!(d->acked_protocol_features & (1ull << VU_PF_CONFIG)))
		return -EOPNOTSUPP;
	if (!len || len > VU_MAX_CONFIG || offset > VU_MAX_CONFIG - len)
		return -EINVAL;
	memset(&c, 0, sizeof(c));
	c.offset = offset;
	c.size = len;
	c.flags = 0;		/* VHOST_SET_CONFIG_TYPE_FRONTEND */
	memcpy(c.data, buf, len);
	return vu_set(d, VU_SET_CONFIG, &c, hdr + len, NULL, 0);
}

static int vring_state(struct vu_dev *d, uint32_t req, unsigned int idx,
		       unsigned int num)
{
	struct vu_vring_state s = { .index = idx, .num = num };

	return vu_set(d, req, &s, sizeof(s), NULL, 0);
}

int vu_set_vring_num(struct vu_dev *d, unsigned int idx, unsigned int num)
{
	return vring_state(d, VU_SET_VRING_NUM, idx, num);
}

int vu_set_vring_base(struct vu_dev *d, unsigned int idx, unsigned int base)
{
	return vring_state(d, VU_SET_VRING_BASE, idx, base);
}

int vu_set_vring_enable(struct vu_dev *d, unsigned int idx, int enable)
{
	return vring_state(d, VU_SET_VRING_ENABLE, idx, !!enable);
}

/* The ring addresses are front-end user addresses, unless an IOMMU is used. */
static int gpa_to_uaddr(const struct vu_mem *m, uint64_t gpa, uint64_t len,
			uint64_t *ua)
{
	if (gpa < m->gpa || gpa - m->gpa > m->size ||
	    len > m->size - (gpa - m->gpa))
		return -ERANGE;
	*ua = (uintptr_t)m->base + (gpa - m->gpa);
	return 0;
}

/* The same, in the region that holds it: @mem, or one of vu_set_mem_regions(). */
static int dev_uaddr(const struct vu_dev *d, uint64_t gpa, uint64_t len,
		     uint64_t *ua)
{
	unsigned int i;

	if (!d->nregs)
		return gpa_to_uaddr(&d->mem, gpa, len, ua);
	for (i = 0; i < d->nregs && i < VU_MAX_REGIONS; i++)
		if (!gpa_to_uaddr(&d->regs[i], gpa, len, ua))
			return 0;
	return -ERANGE;
}

int vu_set_vring_addr(struct vu_dev *d, unsigned int idx,
		      uint64_t desc_gpa, uint64_t avail_gpa, uint64_t used_gpa)
{
	struct vu_vring_addr a = { .index = idx };

	if (dev_uaddr(d, desc_gpa, 16, &a.desc) ||
	    dev_uaddr(d, avail_gpa, 4, &a.avail) ||
	    dev_uaddr(d, used_gpa, 4, &a.used))
		return -ERANGE;
	return vu_set(d, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0);
}

int vu_get_vring_base(struct vu_dev *d, unsigned int idx, unsigned int *base)
{
	struct vu_vring_state s = { .index = idx };
	uint32_t size = sizeof(s);
	int err;

	err = vu_send(d, VU_GET_VRING_BASE, 0, &s, sizeof(s), NULL, 0);
	if (err)
		return err;
	err = vu_recv_reply(d, VU_GET_VRING_BASE, &s, &size);
	if (err)
		return err;
	if (size != sizeof(s) || s.index != idx)
		return -EPROTO;
	*base = s.num;
	return 0;
}

static int vring_fd(struct vu_dev *d, uint32_t req, unsigned int idx, int fd)
{
	uint64_t v = idx & VU_VRING_IDX_MASK;

	if (idx > VU_VRING_IDX_MASK)
		return -EINVAL;
	if (fd < 0) {
		v |= VU_VRING_NOFD;
		return vu_set(d, req, &v, sizeof(v), NULL, 0);
	}
	return vu_set(d, req, &v, sizeof(v), &fd, 1);
}

int vu_set_vring_kick(struct vu_dev *d, unsigned int idx, int fd)
{
	return vring_fd(d, VU_SET_VRING_KICK, idx, fd);
}

int vu_set_vring_call(struct vu_dev *d, unsigned int idx, int fd)
{
	return vring_fd(d, VU_SET_VRING_CALL, idx, fd);
}

int vu_negotiate(struct vu_dev *d, uint64_t want, uint64_t want_pf,
		 const struct vu_mem *mem)
{
	uint64_t need = (1ull << VIRTIO_F_VERSION_1) |
			(1ull << VU_F_PROTOCOL_FEATURES);
	int err;

	err = vu_get_features(d, &d->features);
	if (err)
		return err;
	if ((d->features & need) != need)
		return -EOPNOTSUPP;
	err = vu_get_protocol_features(d, &d->protocol_features);
	if (err)
		return err;
	d->acked_protocol_features = d->protocol_features & want_pf;
	err = vu_set_protocol_features(d, d->acked_protocol_features);
	if (err)
		return err;
	err = vu_set_owner(d);
	if (err)
		return err;
	d->acked_features = d->features & (want | need);
	err = vu_set_features(d, d->acked_features);
	if (err || !mem)
		return err;
	d->mem = *mem;
	return vu_set_mem_table(d, mem);
}

int vu_start_vring(struct vu_dev *d, unsigned int idx,
		   const struct vu_vring_cfg *c)
{
	int err;

	err = vu_set_vring_num(d, idx, c->num);
	if (!err)
		err = vu_set_vring_base(d, idx, c->base);
	if (!err)
		err = vu_set_vring_addr(d, idx, c->desc_gpa, c->avail_gpa,
					c->used_gpa);
	if (!err)
		err = vu_set_vring_call(d, idx, c->call_fd);
	if (!err)
		err = vu_set_vring_kick(d, idx, c->kick_fd);
	if (!err && (d->acked_features & (1ull << VU_F_PROTOCOL_FEATURES)))
		err = vu_set_vring_enable(d, idx, 1);
	return err;
}

int vu_stop_vring(struct vu_dev *d, unsigned int idx, unsigned int *base)
{
	int err = 0;

	if (d->acked_features & (1ull << VU_F_PROTOCOL_FEATURES))
		err = vu_set_vring_enable(d, idx, 0);
	if (!err)
		err = vu_get_vring_base(d, idx, base);
	return err;
}

void vu_stop_backend(int pid, unsigned int timeout_ms)
{
	unsigned int i;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (i = 0; i < timeout_ms / 10; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
