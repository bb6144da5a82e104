/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vu_frontend - a small vhost-user front end (the side QEMU usually plays).
 *
 * Written from the protocol description in QEMU's
 * docs/interop/vhost-user.rst.  One connection drives one device; the
 * guest memory is one region: an mmap'able fd whose offset is the guest
 * physical address (for pcinet: the shared window, gpa = window offset).
 *
 * Every call returns 0 or a negative errno; anything the back end sends is
 * length-checked against the request it answers.
 */
#ifndef VU_FRONTEND_H
#define VU_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Requests (front end -> back end) used here. */
enum vu_request {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_GET_MAX_MEM_SLOTS = 36,
};

/* Header flags. */
#define VU_FLAG_VERSION		0x1u
#define VU_FLAG_VERSION_MASK	0x3u
#define VU_FLAG_REPLY		(1u << 2)
#define VU_FLAG_NEED_REPLY	(1u << 3)

/* Virtio feature bit reused by vhost-user for protocol negotiation. */
#define VU_F_PROTOCOL_FEATURES	30

/* Protocol feature bits. */
enum vu_protocol_feature {
	VU_PF_MQ = 0,
	VU_PF_LOG_SHMFD = 1,
	VU_PF_RARP = 2,
	VU_PF_REPLY_ACK = 3,
	VU_PF_NET_MTU = 4,
	VU_PF_BACKEND_REQ = 5,
	VU_PF_CROSS_ENDIAN = 6,
	VU_PF_CRYPTO_SESSION = 7,
	VU_PF_PAGEFAULT = 8,
	VU_PF_CONFIG = 9,
	VU_PF_BACKEND_SEND_FD = 10,
	VU_PF_HOST_NOTIFIER = 11,
	VU_PF_INFLIGHT_SHMFD = 12,
	VU_PF_RESET_DEVICE = 13,
	VU_PF_INBAND_NOTIFICATIONS = 14,
	VU_PF_CONFIGURE_MEM_SLOTS = 15,
	VU_PF_STATUS = 16,
	VU_PF_NR = 17,
};

/* SET_VRING_KICK/CALL/ERR payload: index in bits 0-7, bit 8 = no fd. */
#define VU_VRING_IDX_MASK	0xffu
#define VU_VRING_NOFD		(1u << 8)

#define VU_MAX_REGIONS		8
#define VU_MAX_CONFIG		256
#define VU_MAX_QUEUES		8

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc;		/* front-end user addresses (not gpa) */
	uint64_t used;
	uint64_t avail;
	uint64_t log;
};

struct vu_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uaddr;
	uint64_t mmap_offset;
};

struct vu_mem_table {
	uint32_t nregions;
	uint32_t padding;
	struct vu_region regions[VU_MAX_REGIONS];
};

struct vu_config {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t data[VU_MAX_CONFIG];
};

struct vu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
} __attribute__((packed));

union vu_payload {
	uint64_t u64;
	struct vu_vring_state state;
	struct vu_vring_addr addr;
	struct vu_mem_table mem;
	struct vu_config config;
};

struct vu_msg {
	struct vu_hdr hdr;
	union vu_payload p;
} __attribute__((packed));

/*
 * One guest memory region as the front end sees it: bytes OFFSET to
 * OFFSET + SIZE of FD, mapped by us at BASE, at guest physical address
 * GPA.  For pcinet, FD is the window and GPA == OFFSET.
 */
struct vu_mem {
	int fd;			/* mmap'able: memfd, or the window's fd */
	void *base;		/* our mapping of the region's first byte */
	uint64_t size;
	uint64_t gpa;		/* guest physical address of its first byte */
	uint64_t offset;	/* its offset in FD (mmap_offset) */
};

/* One split virtqueue's placement, as guest physical addresses. */
struct vu_vring_cfg {
	unsigned int num;
	uint64_t desc_gpa;
	uint64_t avail_gpa;
	uint64_t used_gpa;
	uint16_t base;		/* first avail index the back end reads */
	int kick_fd;		/* we write, the back end polls */
	int call_fd;		/* the back end writes, we poll */
};

struct vu_dev {
	int sock;
	int timeout_ms;		/* socket receive timeout */
	uint64_t features;		/* offered by the back end */
	uint64_t protocol_features;	/* offered by the back end */
	uint64_t acked_features;
	uint64_t acked_protocol_features;
	struct vu_mem mem;
	/*
	 * vu_set_mem_regions(): several regions of one fd instead of @mem
	 * (pcinet-peer gives a back end only its device's two spans).
	 */
	struct vu_mem regs[VU_MAX_REGIONS];
	unsigned int nregs;
	int verbose;
};

int vu_connect(struct vu_dev *d, const char *path, int timeout_ms);
void vu_close(struct vu_dev *d);
/*
 * The back end closed the connection.  Its socket is quiet between our
 * requests (vhost-user replies only to what the front end asks), so
 * readable (end of file) or hung up, it is gone: libvhost-user closes it
 * on vu_panic() (a ring that makes no sense to it, say an avail index a
 * third party scribbled) and serves nothing more, while its process
 * lives on.  Nothing else tells the front end before it next asks.
 */
bool vu_hung_up(const struct vu_dev *d);

/* Raw message exchange: send with up to VU_MAX_REGIONS fds. */
int vu_send(struct vu_dev *d, uint32_t req, uint32_t flags,
	    const void *payload, uint32_t size, const int *fds, int nfds);
/* Receive the reply to REQ into P; *size in: room, out: payload size. */
int vu_recv_reply(struct vu_dev *d, uint32_t req, void *p, uint32_t *size);

int vu_get_features(struct vu_dev *d, uint64_t *features);
int vu_set_features(struct vu_dev *d, uint64_t features);
int vu_get_protocol_features(struct vu_dev *d, uint64_t *pf);
int vu_set_protocol_features(struct vu_dev *d, uint64_t pf);
int vu_get_queue_num(struct vu_dev *d, uint64_t *n);
int vu_set_owner(struct vu_dev *d);
int vu_set_mem_table(struct vu_dev *d, const struct vu_mem *mem);
/*
 * SET_MEM_TABLE with @n regions (1..VU_MAX_REGIONS, each with its fd);
 * ring addresses are then looked up in them (vu_set_vring_addr()).
 */
int vu_set_mem_regions(struct vu_dev *d, const struct vu_mem *regs,
		       unsigned int n);
int vu_get_config(struct vu_dev *d, uint32_t offset, void *buf, uint32_t len);
/*
 * SET_CONFIG from the front end (flags 0).  libvhost-user panics (drops
 * the connection) when the back end's set_config refuses: send only what
 * the back end takes (qemu-storage-daemon: the one wce byte).
 */
int vu_set_config(struct vu_dev *d, uint32_t offset, const void *buf,
		  uint32_t len);
int vu_set_vring_num(struct vu_dev *d, unsigned int idx, unsigned int num);
int vu_set_vring_addr(struct vu_dev *d, unsigned int idx,
		      uint64_t desc_gpa, uint64_t avail_gpa, uint64_t used_gpa);
int vu_set_vring_base(struct vu_dev *d, unsigned int idx, unsigned int base);
int vu_get_vring_base(struct vu_dev *d, unsigned int idx, unsigned int *base);
int vu_set_vring_kick(struct vu_dev *d, unsigned int idx, int fd);
int vu_set_vring_call(struct vu_dev *d, unsigned int idx, int fd);
int vu_set_vring_enable(struct vu_dev *d, unsigned int idx, int enable);

/*
 * The usual bring-up: GET_FEATURES, GET/SET_PROTOCOL_FEATURES (the
 * intersection of WANT_PF and what is offered), SET_OWNER, SET_FEATURES
 * (the intersection of WANT and what is offered; VERSION_1 and
 * PROTOCOL_FEATURES must be offered), SET_MEM_TABLE (not with MEM NULL:
 * the caller sends it later, e.g. with vu_set_mem_regions()).
 */
int vu_negotiate(struct vu_dev *d, uint64_t want, uint64_t want_pf,
		 const struct vu_mem *mem);
/* NUM, BASE, ADDR, CALL, KICK, ENABLE for one queue. */
int vu_start_vring(struct vu_dev *d, unsigned int idx,
		   const struct vu_vring_cfg *c);
/* Stop a queue: GET_VRING_BASE; returns the back end's next avail index. */
int vu_stop_vring(struct vu_dev *d, unsigned int idx, unsigned int *base);

const char *vu_request_name(uint32_t req);
const char *vu_protocol_feature_name(unsigned int bit);
/* Writes "NAME,NAME,..." for set bits; unknown bits as "bitN". */
void vu_format_protocol_features(uint64_t pf, char *buf, size_t len);

/**
 * vu_stop_backend() - end a back end process the front end started
 * @pid: its pid (nothing is done for <= 0)
 * @timeout_ms: how long SIGTERM gets before SIGKILL
 *
 * Reaps it either way.
 */
void vu_stop_backend(int pid, unsigned int timeout_ms);

#endif /* VU_FRONTEND_H */
