/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pcinet backend interface: what a backend sees of the link on top of it.
 *
 *   core (pcinet_core.c)       the module: front-end table, backends
 *   front-ends (net, tty)      see rings, kicks and link state only
 *        |  struct pcinet_chan_ops, pcinet_chan_*()     (pcinet_chan.h)
 *   link (pcinet_link.c)       generations, heartbeat, resets
 *        |  struct pcinet_backend_ops, pcinet_link_*()  (this header)
 *   backends (ivshmem, ...)    map the window, ring and receive doorbells
 *
 * A backend hands the link a mapped window and a way to ring the peer,
 * and forwards the peer's doorbells; it never sees a front-end.
 */
#ifndef _PCINET_BACKEND_H
#define _PCINET_BACKEND_H

#include <linux/device.h>
#include <linux/types.h>

#include "pcinet_ring.h"

struct pcinet_link;

/**
 * struct pcinet_backend_ops - what the link needs from the hardware
 * @notify: ring the peer's doorbell @vector; any context, must not sleep
 */
struct pcinet_backend_ops {
	void (*notify)(void *bdata, unsigned int vector);
};

/**
 * struct pcinet_link_cfg - a mapped window, as a backend hands it over
 * @dev: the device, for logging and as parent of the front-ends
 * @win: the whole window, mapped cacheable
 * @phys: its physical address, for mappings into userspace (the virtio
 *	channel's memory files); 0: the window cannot be mapped there
 * @size: its size in bytes
 * @side: which side of the window we are, 0 or 1
 * @nr_vectors: doorbell vectors the backend can ring and receive
 * @ops: backend operations
 * @bdata: passed back to @ops
 * @gated: the sides do not share @win: the peer's regions (same offsets)
 *	are in a window of the peer's that the backend maps and hands over
 *	with pcinet_link_set_peer_window() whenever it may be written (NTB:
 *	once the peer set its inbound translation); until then, and while
 *	it is NULL, the link writes nothing the peer sees.  @win then holds
 *	the header and our own regions
 */
struct pcinet_link_cfg {
	struct device *dev;
	void *win;
	phys_addr_t phys;
	u64 size;
	unsigned int side;
	unsigned int nr_vectors;
	const struct pcinet_backend_ops *ops;
	void *bdata;
	bool gated;
};

/**
 * struct pcinet_link_doorbells - what pcinet_link_doorbells() reports
 * @rung: doorbells rung toward the peer, indexed by what they were for:
 *	PCINET_VEC_LINK for the link, pcinet_chan_vector(c) for channel c
 * @received: doorbells received from the peer, likewise; one doorbell
 *	on a vector shared by several (fewer than PCINET_NR_VEC vectors)
 *	counts for each
 */
struct pcinet_link_doorbells {
	u64 rung[PCINET_NR_VEC];
	u64 received[PCINET_NR_VEC];
};

bool pcinet_window_is_pcinet(const void *win, u64 size);
struct pcinet_link *pcinet_link_create(const struct pcinet_link_cfg *cfg);
void pcinet_link_start(struct pcinet_link *link);
void pcinet_link_stop(struct pcinet_link *link);
void pcinet_link_destroy(struct pcinet_link *link);
void pcinet_link_doorbell(struct pcinet_link *link, unsigned int vector);
void pcinet_link_peer_ident(struct pcinet_link *link, struct pcinet_ident *id);
const struct pcinet_ident *pcinet_link_own_ident(const struct pcinet_link *link);
void pcinet_link_doorbells(struct pcinet_link *link,
			   struct pcinet_link_doorbells *db);
void pcinet_link_set_peer_window(struct pcinet_link *link, void *peer_win);

/* The backends' drivers, registered by the core at module load. */
int pcinet_ivshmem_register(void);
void pcinet_ivshmem_unregister(void);

#endif /* _PCINET_BACKEND_H */
