/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pcinet channel interface: what a front-end sees of the link under it.
 *
 *   core (pcinet_core.c)       the module: front-end table, backends
 *   front-ends (net, tty)      see rings, kicks and link state only
 *        |  struct pcinet_chan_ops, pcinet_chan_*()     (this header)
 *   link (pcinet_link.c)       generations, heartbeat, resets
 *        |  struct pcinet_backend_ops, pcinet_link_*()  (pcinet_backend.h)
 *   backends (ivshmem, ...)    map the window, ring and receive doorbells
 *
 * Each front-end describes itself with a struct pcinet_frontend, listed
 * in the core's table.  For every link the link calls its @create with an
 * opaque handle on the channel it drives; from then on the front-end
 * talks to the link only through that handle, as an ntb_transport client
 * does through its queue: it never names the link, a backend or another
 * front-end, and the link never names a front-end.
 */
#ifndef _PCINET_CHAN_H
#define _PCINET_CHAN_H

#include <linux/device.h>
#include <linux/types.h>

#include "pcinet_ring.h"

/* One channel of one link; opaque, owned by the link. */
struct pcinet_channel;

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
 * @peer_gone: the peer instance we knew is gone: its heartbeat went
 *	silent for peer_timeout_ms, its attach epoch changed or its control
 *	block read "not live" on every look for two ticks (one bad read, a
 *	third party's write the peer repairs, is not enough: the link only
 *	resets on it); pcinet_chan_peer_alive() says when a peer
 *	is back.  Not a link reset: a reset of the rings alone (a protocol
 *	error, a handshake timeout) does not call it.  Optional; process
 *	context, under the link's lock, must not sleep
 * @while_down: call @kick and @tick whether or not the link is up: the
 *	channel keeps no state tied to the link's generation (virtio, whose
 *	liveness is the peer instance)
 */
struct pcinet_chan_ops {
	void (*kick)(void *priv);
	void (*stop)(void *priv);
	void (*start)(void *priv);
	void (*peer_changed)(void *priv);
	void (*tick)(void *priv);
	void (*peer_gone)(void *priv);
	bool while_down;
};

/**
 * struct pcinet_frontend - a front-end, as the core lists it
 * @name: "net", "tty", "virtio": names its channel in messages
 * @chan: the channel it drives
 * @init: module load, before any link exists; optional
 * @exit: module unload, after every link is gone; optional
 * @create: a link appeared: create the front-end on channel @ch; process
 *	context.  Return it; NULL if this link gets no such front-end (the
 *	link then works without it); or an ERR_PTR(), which fails the link
 * @destroy: the link goes: destroy what @create returned (never called
 *	for NULL); process context, the link is already stopped
 */
struct pcinet_frontend {
	const char *name;
	enum pcinet_chan chan;
	int (*init)(void);
	void (*exit)(void);
	void *(*create)(struct pcinet_channel *ch);
	void (*destroy)(void *fe);
};

/**
 * struct pcinet_chan_vio - the virtio regions of a link's window
 * @win: our mapping of the window (offset 0)
 * @phys: its physical address; 0: not mappable into userspace
 * @win_size: its usable size
 * @side: our side of the window
 * @vio: the virtio regions of side 0 and side 1, checked by
 *	pcinet_layout_parse()
 */
struct pcinet_chan_vio {
	u8 *win;
	phys_addr_t phys;
	u64 win_size;
	unsigned int side;
	struct pcinet_vio_regions vio[2];
};

/* The front-ends, listed in the core's table (pcinet_core.c). */
extern const struct pcinet_frontend pcinet_net_frontend;
extern const struct pcinet_frontend pcinet_tty_frontend;
extern const struct pcinet_frontend pcinet_vio_frontend;
extern const struct pcinet_frontend pcinet_vhost_frontend;

int pcinet_chan_index(const struct pcinet_channel *ch);
struct device *pcinet_chan_dev(const struct pcinet_channel *ch);
void pcinet_chan_attach(struct pcinet_channel *ch,
			const struct pcinet_chan_ops *ops, void *priv);
void pcinet_chan_detach(struct pcinet_channel *ch);
struct pcinet_tx *pcinet_chan_tx(struct pcinet_channel *ch);
struct pcinet_rx *pcinet_chan_rx(struct pcinet_channel *ch);
void pcinet_chan_kick(struct pcinet_channel *ch);
void pcinet_chan_fault(struct pcinet_channel *ch, const char *what);
void pcinet_chan_set_open(struct pcinet_channel *ch, bool open);
bool pcinet_chan_link_up(const struct pcinet_channel *ch);
bool pcinet_chan_own_open(const struct pcinet_channel *ch);
bool pcinet_chan_peer_open(const struct pcinet_channel *ch);
bool pcinet_chan_peer_alive(const struct pcinet_channel *ch);
u32 pcinet_chan_peer_features(const struct pcinet_channel *ch);
int pcinet_chan_vio(const struct pcinet_channel *ch, struct pcinet_chan_vio *v);
void pcinet_chan_peer_ident(const struct pcinet_channel *ch,
			    struct pcinet_ident *id);

#endif /* _PCINET_CHAN_H */
