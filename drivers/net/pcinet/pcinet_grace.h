/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * pcinet: a reading of the peer's words that must hold for a grace
 * before it counts.  docs/design.md, "Instances, reset and hot-unplug",
 * states the rule (PCINET_PEER_GRACE_MS in pcinet_layout.h): a soft
 * signal read from the window ("the peer is gone", "the peer was
 * replaced") is acted upon only once it read so on every look for the
 * grace; one good look in between starts the count again.  A word a third
 * party overwrote lasts until its writer's next refresh (a tick), so it
 * never unplugs a device; a real change is acted upon at most a grace
 * (plus a look) late.
 *
 * Portable C, as pcinet_ring.c: compiled in the kernel and, with
 * tools/testing/pcinet/pcinet_user.h, in userspace (the unit test,
 * pcinet-peer).  The clock is the caller's (jiffies, milliseconds), any
 * free-running unsigned count that wraps modulo 2^32.  No locking: the
 * caller serialises the looks at one struct pcinet_grace.
 */
#ifndef _PCINET_GRACE_H
#define _PCINET_GRACE_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include "pcinet_user.h"
#endif

/**
 * struct pcinet_grace - how long a reading has been bad
 * @since: the caller's clock at the first look of the current bad run
 * @bad: a bad run is under way (the last look was bad)
 */
struct pcinet_grace {
	u32 since;
	bool bad;
};

bool pcinet_grace_look(struct pcinet_grace *g, bool bad, u32 now, u32 grace);

#endif /* _PCINET_GRACE_H */
