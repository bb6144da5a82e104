/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * pcinet link layer, internal: both of the link's interfaces and the
 * core's table of front-ends, which the link walks for every link.  Only
 * pcinet_link.c and pcinet_core.c include this.
 *
 *   core (pcinet_core.c)       the module: front-end table, backends
 *   front-ends (net, tty)      see rings, kicks and link state only
 *        |  struct pcinet_chan_ops, pcinet_chan_*()     (pcinet_chan.h)
 *   link (pcinet_link.c)       generations, heartbeat, resets
 *        |  struct pcinet_backend_ops, pcinet_link_*()  (pcinet_backend.h)
 *   backends (ivshmem, ...)    map the window, ring and receive doorbells
 */
#ifndef _PCINET_LINK_H
#define _PCINET_LINK_H

#include "pcinet_backend.h"
#include "pcinet_chan.h"

/*
 * The core's table of front-ends, PCINET_NR_FRONTENDS entries: entry c
 * below PCINET_NR_CHAN is channel c's front-end (NULL: none); the entries
 * after them are further users of a channel without a byte ring (the
 * virtio channel's device side, pcinet_vhost.c, beside its driver side).
 * The link gives every entry a handle of its own (struct pcinet_channel),
 * creates a link's front-ends in this order and destroys them in reverse;
 * the core runs their @init in this order and their @exit in reverse.
 */
#define PCINET_NR_FRONTENDS	(PCINET_NR_CHAN + 1)
extern const struct pcinet_frontend *const pcinet_frontends[PCINET_NR_FRONTENDS];

#endif /* _PCINET_LINK_H */
