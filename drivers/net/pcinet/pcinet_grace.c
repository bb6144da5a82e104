// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * pcinet: the grace a soft signal read from the window must hold for,
 * shared by the kernel, pcinet-peer and the userspace tests.
 * pcinet_grace.h has the rule.
 */
#include "pcinet_grace.h"

/**
 * pcinet_grace_look - one look at a reading of the peer's words
 * @g: the reading's state, zeroed before the first look
 * @bad: this look reads "gone" or "replaced"
 * @now: the caller's clock (u32, wraps)
 * @grace: how long a bad run must last, in the clock's units; 0: at once
 *
 * A good look ends the run: bad looks never add up across one.  Once a
 * run lasted @grace the answer stays true for as long as the looks stay
 * bad, also past a wrap of the clock (@since follows @now, @grace
 * behind).
 *
 * Return: true if the reading was bad on every look for @grace: act on it.
 */
bool pcinet_grace_look(struct pcinet_grace *g, bool bad, u32 now, u32 grace)
{
	if (!bad) {
		g->bad = false;
		return false;
	}
	if (!g->bad) {
		g->bad = true;
		g->since = now;
	}
	if ((u32)(now - g->since) < grace)
		return false;
	/* held: kept at exactly @grace behind, so the count never wraps */
	g->since = now - grace;
	return true;
}
