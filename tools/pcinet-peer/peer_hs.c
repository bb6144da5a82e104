// SPDX-License-Identifier: GPL-2.0-only
/*
 * docs/design.md, "Writing a peer", step 5, as a function.
 */
#include "peer_hs.h"

#define CTRL_MAGIC	0x4c525443u	/* "CTRL", struct pcinet_ctrl @magic */

/**
 * peer_hs_decide - one round of the handshake
 * @h: our state and the peer's words, as read
 * @why: set to a reason when the answer goes down
 *
 * Return: what to do.
 */
enum peer_act peer_hs_decide(const struct peer_hs *h, const char **why)
{
	/* "peer block not live (magic wrong or gen 0)": if up, reset; else wait */
	if (h->magic != CTRL_MAGIC || !h->their_gen) {
		*why = "peer not running";
		return h->up ? PEER_RESET : PEER_WAIT;
	}
	/* "peer gen is not the one you synchronised with": if up, reset first; sync */
	if (h->their_gen != h->synced_gen) {
		*why = "peer has a new generation";
		return h->up ? PEER_RESTART : PEER_SYNC;
	}
	/* "their peer_gen == your gen and their ack_gen == their gen": up */
	if (h->their_peer_gen == h->gen && h->their_ack_gen == h->their_gen)
		return h->up ? PEER_KEEP : PEER_UP;
	/* "otherwise, if up, reset; else wait" */
	*why = "peer no longer acknowledges us";
	return h->up ? PEER_RESET : PEER_WAIT;
}
