/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pcinet link layer: the state machine that brings a window up between two
 * machines, its doorbells, and the interfaces on either side of it.
 *
 *   front-ends (net, tty)      see rings, kicks and link state only
 *        |  struct pcinet_chan_ops, pcinet_link_*()
 *   link (this)                generations, heartbeat, resets
 *        |  struct pcinet_backend_ops, pcinet_link_doorbell()
 *   backends (ivshmem, ...)    map the window, ring and receive doorbells
 */
#ifndef _PCINET_LINK_H
#define _PCINET_LINK_H

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
 * @size: its size in bytes
 * @side: which side of the window we are, 0 or 1
 * @nr_vectors: doorbell vectors the backend can ring and receive
 * @ops: backend operations
 * @bdata: passed back to @ops
 */
struct pcinet_link_cfg {
	struct device *dev;
	void *win;
	u64 size;
	unsigned int side;
	unsigned int nr_vectors;
	const struct pcinet_backend_ops *ops;
	void *bdata;
};

/**
 * struct pcinet_chan_ops - what the link calls in a front-end
 * @kick: the peer rang this channel's doorbell; hard interrupt context
 * @stop: the rings are about to be reset: stop touching them and return
 *	only when nothing does; process context, may sleep
 * @start: the rings are fresh and both sides run; process context
 * @peer_changed: the peer opened or closed this channel; process context
 * @tick: while the link is up, every link tick: look for work a lost
 *	doorbell left behind (records not consumed, a stopped queue, a
 *	waiting writer) and write the ring words we own again (soft state);
 *	process context, under the link's lock, must not sleep
 */
struct pcinet_chan_ops {
	void (*kick)(void *priv);
	void (*stop)(void *priv);
	void (*start)(void *priv);
	void (*peer_changed)(void *priv);
	void (*tick)(void *priv);
};

bool pcinet_window_is_pcinet(const void *win, u64 size);
struct pcinet_link *pcinet_link_create(const struct pcinet_link_cfg *cfg);
void pcinet_link_start(struct pcinet_link *link);
void pcinet_link_stop(struct pcinet_link *link);
void pcinet_link_destroy(struct pcinet_link *link);
void pcinet_link_doorbell(struct pcinet_link *link, unsigned int vector);

int pcinet_link_index(const struct pcinet_link *link);
struct device *pcinet_link_dev(const struct pcinet_link *link);
void pcinet_link_attach(struct pcinet_link *link, enum pcinet_chan chan,
			const struct pcinet_chan_ops *ops, void *priv);
void pcinet_link_detach(struct pcinet_link *link, enum pcinet_chan chan);
struct pcinet_tx *pcinet_link_tx(struct pcinet_link *link,
				 enum pcinet_chan chan);
struct pcinet_rx *pcinet_link_rx(struct pcinet_link *link,
				 enum pcinet_chan chan);
void pcinet_link_kick(struct pcinet_link *link, enum pcinet_chan chan);
void pcinet_link_fault(struct pcinet_link *link, enum pcinet_chan chan,
		       const char *what);
void pcinet_link_set_open(struct pcinet_link *link, enum pcinet_chan chan,
			  bool open);
bool pcinet_link_is_up(const struct pcinet_link *link);
bool pcinet_link_own_open(const struct pcinet_link *link,
			  enum pcinet_chan chan);
bool pcinet_link_peer_open(const struct pcinet_link *link,
			   enum pcinet_chan chan);

/* Front-ends, created and destroyed by the link. */
struct pcinet_net;
struct pcinet_net *pcinet_net_create(struct pcinet_link *link);
void pcinet_net_destroy(struct pcinet_net *net);
struct pcinet_tty;
struct pcinet_tty *pcinet_tty_create(struct pcinet_link *link);
void pcinet_tty_destroy(struct pcinet_tty *tty);

/* Module-wide parts of the front-ends, around the backends' drivers. */
int pcinet_tty_init(void);
void pcinet_tty_exit(void);

#endif /* _PCINET_LINK_H */
