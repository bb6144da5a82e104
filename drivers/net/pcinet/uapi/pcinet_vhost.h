/* SPDX-License-Identifier: ((GPL-2.0-only WITH Linux-syscall-note) OR MIT) */
/*
 * pcinet vhost: the device side of pcinet's virtio channel, for userspace.
 * Implemented by drivers/net/pcinet/pcinet_vhost.c (the ioctl type is
 * still a placeholder); docs/design.md, "Virtio channel", "The host's
 * character device", is the description.
 *
 * Every link whose window has virtio regions (our dev region and the
 * peer's drv region) has a character device, /dev/pcinet-vhost<N> for
 * pcinet<N> (root only, 0600).  Errors: EINVAL a bad argument (pads and
 * the queues past nr_vq must be zero; out fields are ignored), ENOENT a
 * slot this control file did not offer, EBUSY every slot taken, ENOSPC
 * no room in a region, ENODEV the link is gone (poll() then reports
 * EPOLLHUP), EOPNOTSUPP a memory file on a backend that cannot map the
 * window into userspace.
 *
 * Opening it gives a *control* file: through it a process (pcinet-vhost)
 * offers virtio devices to the peer, reads what the peer's driver does
 * with them, answers it, and binds eventfds to the doorbells.  The devices
 * a control file offered are withdrawn when it is released.
 *
 * Memory: PCINET_VHOST_GET_MEM_FD returns, for one offered device, a
 * *memory* file to hand a vhost-user back end as its memory table.  Its
 * file offsets are window offsets (guest physical address = offset = the
 * addresses in the device's descriptors); mmap() accepts any page-aligned
 * range of the window with MAP_SHARED, but only the device's two spans
 * (struct pcinet_vhost_dev) are backed: a page outside them, or any page
 * once the device is withdrawn, raises SIGBUS.  (libvhost-user maps the
 * file from offset 0 to the end of each region; it only touches what its
 * memory table covers.)  The mapping is cacheable on ivshmem; on real
 * PCIe the span in the peer's memory is mapped write-combining.
 *
 * Doorbells: all virtqueues of the link share one doorbell vector in each
 * direction.  A kick eventfd (PCINET_VHOST_SET_KICK) is signalled when the
 * peer's notify word for that queue changed, as KVM's ioeventfd is when a
 * guest writes a register; a call eventfd (PCINET_VHOST_SET_CALL) is
 * waited on by the kernel, and every signal rings the peer, as KVM's
 * irqfd injects an interrupt.  Neither passes through the process.
 *
 * Events: poll() on the control file reports EPOLLIN when anything it
 * should look at changed since its last PCINET_VHOST_GET_DRV or
 * PCINET_VHOST_GET_INFO: a driver state block of one of its devices, the
 * peer's liveness or instance.
 */
#ifndef _UAPI_PCINET_VHOST_H
#define _UAPI_PCINET_VHOST_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PCINET_VHOST_ABI_VERSION	1
#define PCINET_VHOST_MAX_DEV		8	/* = PCINET_VIO_MAX_DEV */
#define PCINET_VHOST_MAX_VQ		8	/* = PCINET_VIO_MAX_VQ */
#define PCINET_VHOST_CONFIG_SIZE	256	/* = PCINET_VIO_CONFIG_SIZE */

/* struct pcinet_vhost_info @flags */
#define PCINET_VHOST_F_PEER_ALIVE	0x00000001	/* the peer runs (heartbeat, attach) */
#define PCINET_VHOST_F_PEER_VIRTIO	0x00000002	/* and speaks the virtio channel */
#define PCINET_VHOST_F_LINK_UP		0x00000004	/* the link is up (net, tty) */

/**
 * struct pcinet_vhost_info - the link, as PCINET_VHOST_GET_INFO reports it
 * @abi_version: PCINET_VHOST_ABI_VERSION
 * @link: N of pcinet<N>
 * @side: our side of the window, 0 or 1
 * @flags: PCINET_VHOST_F_*
 * @peer_inst: the peer's virtio instance (0: none); it changes when the
 *	peer's driver restarts: every driver state is then void
 * @events: bumped on every change poll() reports
 * @win_size: size of the window
 * @dev_off: window offset of our dev region (rings and OUT pools of the
 *	devices we offer)
 * @dev_size: its size; 0: the window has no room for devices we offer
 * @drv_off: window offset of the peer's drv region (used rings, IN pools)
 * @drv_size: its size; 0: the peer cannot use devices
 * @dev_free: largest span still free in our dev region
 * @drv_free: largest span still free in the peer's drv region
 */
struct pcinet_vhost_info {
	__u32 abi_version;
	__u32 link;
	__u32 side;
	__u32 flags;
	__u32 peer_inst;
	__u32 events;
	__u64 win_size;
	__u64 dev_off;
	__u64 dev_size;
	__u64 drv_off;
	__u64 drv_size;
	__u64 dev_free;
	__u64 drv_free;
};

/**
 * struct pcinet_vhost_vq - one virtqueue of a device offered
 * @num_max: in: largest queue size, a power of two, 1..1024
 * @pad0: zero
 * @pad1: zero
 * @desc_off: out: window offset of its descriptor table (our dev region)
 * @avail_off: out: window offset of its avail ring (our dev region)
 * @used_off: out: window offset of its used ring (the peer's drv region)
 */
struct pcinet_vhost_vq {
	__u16 num_max;
	__u16 pad0;
	__u32 pad1;
	__u64 desc_off;
	__u64 avail_off;
	__u64 used_off;
};

/**
 * struct pcinet_vhost_dev - a device to offer (PCINET_VHOST_ADD_DEV)
 * @device_id: in: virtio device ID
 * @vendor_id: in: virtio vendor ID
 * @features: in: device features offered: VIRTIO_F_VERSION_1 required;
 *	VIRTIO_F_ACCESS_PLATFORM and vhost-user's own bits refused
 * @nr_vq: in: virtqueues, 1..PCINET_VHOST_MAX_VQ
 * @config_len: in: bytes of @config, at most PCINET_VHOST_CONFIG_SIZE
 * @out_pool_size: in: OUT pool bytes (driver to device data), a multiple
 *	of 4096 (docs/design.md, "Pool sizing")
 * @in_pool_size: in: IN pool bytes (device to driver data), the same
 * @slot: out: the device's slot, 0..PCINET_VHOST_MAX_DEV - 1
 * @dev_gen: out: the instance published for this offer
 * @out_pool_off: out: window offset of the OUT pool
 * @in_pool_off: out: window offset of the IN pool
 * @dev_span_off: out: the device's span of our dev region (64 KiB aligned)
 * @dev_span_size: out: its size
 * @drv_span_off: out: the device's span of the peer's drv region
 * @drv_span_size: out: its size
 * @vq: in: num_max of the first @nr_vq; out: where they live
 * @config: in: the device-specific configuration space
 *
 * The two spans are what the device's memory file backs, and the two
 * regions of the vhost-user memory table (gpa = mmap_offset = span
 * offset).
 */
struct pcinet_vhost_dev {
	__u32 device_id;
	__u32 vendor_id;
	__u64 features;
	__u32 nr_vq;
	__u32 config_len;
	__u64 out_pool_size;
	__u64 in_pool_size;
	__u32 slot;
	__u32 dev_gen;
	__u64 out_pool_off;
	__u64 in_pool_off;
	__u64 dev_span_off;
	__u64 dev_span_size;
	__u64 drv_span_off;
	__u64 drv_span_size;
	struct pcinet_vhost_vq vq[PCINET_VHOST_MAX_VQ];
	__u8 config[PCINET_VHOST_CONFIG_SIZE];
};

/**
 * struct pcinet_vhost_vqstate - one virtqueue as the peer's driver runs it
 * @num: queue size in use (0: not set up); check it against num_max
 * @ready: 1 once the queue is set up
 * @notify: the peer's kick counter (the kick eventfd follows it)
 */
struct pcinet_vhost_vqstate {
	__u16 num;
	__u16 ready;
	__u32 notify;
};

/**
 * struct pcinet_vhost_drv - what the peer's driver did with a device
 * @slot: in: the device's slot
 * @valid: out: 1 if the peer runs, speaks virtio and its block names this
 *	slot's current @dev_gen; 0: treat the driver as gone (reset the
 *	back end), the other fields are zero
 * @drv_gen: out: the driver's registration; a new value means a new driver
 * @dev_gen: out: the device instance it talks to
 * @status: out: the virtio status the driver wrote last
 * @status_seq: out: bumped on every status write; answer it with
 *	PCINET_VHOST_SET_STATUS
 * @features: out: the driver's features (valid with FEATURES_OK)
 * @config_seq: out: bumped on every configuration write
 * @error: out: PCINET_VIO_ERR_* why the driver refused or dropped the
 *	device; also with @valid 0 (then only @dev_gen and @error are set):
 *	the board will not register that @dev_gen again, so offer anew
 * @peer_inst: out: the peer's virtio instance
 * @events: out: the control file's event count this snapshot covers
 * @config_dirty: out: bit n: the driver wrote byte n of @config
 * @vq: out: per virtqueue
 * @config: out: what the driver wrote into the configuration space
 *
 * A snapshot copied out of the window in one go: every value is the
 * peer's, unchecked, and must be checked before use.
 */
struct pcinet_vhost_drv {
	__u32 slot;
	__u32 valid;
	__u32 drv_gen;
	__u32 dev_gen;
	__u32 status;
	__u32 status_seq;
	__u64 features;
	__u32 config_seq;
	__u32 error;
	__u32 peer_inst;
	__u32 events;
	__u32 config_dirty[PCINET_VHOST_CONFIG_SIZE / 32];
	struct pcinet_vhost_vqstate vq[PCINET_VHOST_MAX_VQ];
	__u8 config[PCINET_VHOST_CONFIG_SIZE];
};

/**
 * struct pcinet_vhost_status - the device's answer to a status write
 * @slot: the device's slot
 * @drv_gen: the driver registration answered (from struct pcinet_vhost_drv)
 * @status_seq: the status write answered
 * @status: the status applied: the driver's, less any bit refused
 *	(FEATURES_OK for features not offered); 0 answers a reset, and
 *	promises that the back end no longer touches the rings or pools
 */
struct pcinet_vhost_status {
	__u32 slot;
	__u32 drv_gen;
	__u32 status_seq;
	__u32 status;
};

/**
 * struct pcinet_vhost_config - a change of a device's configuration space
 * @slot: the device's slot
 * @offset: first byte changed
 * @len: bytes changed; @offset + @len at most PCINET_VHOST_CONFIG_SIZE
 * @data: the new bytes, the first @len used
 *
 * The bytes are published, then the configuration generation is bumped
 * and the peer rung: its driver sees a configuration change (a resize).
 */
struct pcinet_vhost_config {
	__u32 slot;
	__u16 offset;
	__u16 len;
	__u8 data[PCINET_VHOST_CONFIG_SIZE];
};

/**
 * struct pcinet_vhost_vring_fd - bind an eventfd to a virtqueue
 * @slot: the device's slot
 * @vq: the virtqueue
 * @fd: an eventfd, or -1 to unbind
 * @pad: zero
 */
struct pcinet_vhost_vring_fd {
	__u32 slot;
	__u32 vq;
	__s32 fd;
	__u32 pad;
};

/* The ioctl type is a draft: to be checked against ioctl-number.rst. */
#define PCINET_VHOST_IOC	0xb7

/* Link, regions, peer state; clears EPOLLIN. */
#define PCINET_VHOST_GET_INFO	_IOR(PCINET_VHOST_IOC, 0x00, struct pcinet_vhost_info)
/* Place a device in both regions and publish it; fills the out fields. */
#define PCINET_VHOST_ADD_DEV	_IOWR(PCINET_VHOST_IOC, 0x01, struct pcinet_vhost_dev)
/* Withdraw a device: the peer unplugs it; its memory files SIGBUS. */
#define PCINET_VHOST_DEL_DEV	_IOW(PCINET_VHOST_IOC, 0x02, __u32)
/* Snapshot the peer's driver state of a device; clears EPOLLIN. */
#define PCINET_VHOST_GET_DRV	_IOWR(PCINET_VHOST_IOC, 0x03, struct pcinet_vhost_drv)
/* Answer a status write. */
#define PCINET_VHOST_SET_STATUS	_IOW(PCINET_VHOST_IOC, 0x04, struct pcinet_vhost_status)
/* Change configuration bytes, bump the generation, ring the peer. */
#define PCINET_VHOST_SET_CONFIG	_IOW(PCINET_VHOST_IOC, 0x05, struct pcinet_vhost_config)
/* Signal an eventfd when the peer kicks a virtqueue (ioeventfd). */
#define PCINET_VHOST_SET_KICK	_IOW(PCINET_VHOST_IOC, 0x06, struct pcinet_vhost_vring_fd)
/* Ring the peer when an eventfd is signalled (irqfd). */
#define PCINET_VHOST_SET_CALL	_IOW(PCINET_VHOST_IOC, 0x07, struct pcinet_vhost_vring_fd)
/* A memory file for one device (the return value, O_CLOEXEC). */
#define PCINET_VHOST_GET_MEM_FD	_IOW(PCINET_VHOST_IOC, 0x08, __u32)

#endif /* _UAPI_PCINET_VHOST_H */
