/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The handshake rule of docs/design.md ("Writing a peer", step 5),
 * written from the document: pcinet-peer does not call the kernel's
 * pcinet_handshake(); hs_test.c checks that both agree on every input.
 */
#ifndef _PCINET_PEER_HS_H
#define _PCINET_PEER_HS_H

#include <stdbool.h>
#include <stdint.h>

enum peer_act {
	PEER_WAIT,	/* down, stay down */
	PEER_SYNC,	/* down: adopt the peer's gen (zero, ack, ring) */
	PEER_UP,	/* down, acknowledged: come up */
	PEER_KEEP,	/* up, all holds */
	PEER_RESET,	/* up: reset (new gen) */
	PEER_RESTART,	/* up: reset, then sync */
};

/**
 * struct peer_hs - what the decision looks at
 * @gen: our generation
 * @synced_gen: the peer generation we synchronised with, 0 if none
 * @up: we are up
 * @magic: the peer's @magic in our inbox
 * @their_gen: the peer's @gen (load-acquire)
 * @their_peer_gen: the peer's @peer_gen (load-acquire)
 * @their_ack_gen: the peer's @ack_gen
 */
struct peer_hs {
	uint32_t gen;
	uint32_t synced_gen;
	bool up;
	uint32_t magic;
	uint32_t their_gen;
	uint32_t their_peer_gen;
	uint32_t their_ack_gen;
};

enum peer_act peer_hs_decide(const struct peer_hs *h, const char **why);

#endif /* _PCINET_PEER_HS_H */
