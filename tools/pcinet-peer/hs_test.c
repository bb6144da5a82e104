// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet-peer's own rules against the kernel's portable code:
 *  - peer_hs_decide() (written from docs/design.md) and the kernel's
 *    pcinet_handshake() agree on every combination of a set of values
 *    chosen to hit every branch (and on random inputs);
 *  - crc32c_update() gives the standard CRC-32C check value, the same
 *    on the table and the instruction paths, and on split buffers.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pcinet_ring.h"
#include "crc32c.h"
#include "peer_hs.h"

static int failed;

static enum pcinet_hs map(enum peer_act a)
{
	switch (a) {
	case PEER_WAIT:
		return PCINET_HS_WAIT;
	case PEER_SYNC:
		return PCINET_HS_SYNC;
	case PEER_UP:
		return PCINET_HS_UP;
	case PEER_KEEP:
		return PCINET_HS_KEEP;
	case PEER_RESET:
		return PCINET_HS_RESET;
	case PEER_RESTART:
		return PCINET_HS_RESTART;
	}
	return -1;
}

static void check(const struct peer_hs *h)
{
	struct pcinet_hs_view v = {
		.gen = h->gen, .synced_gen = h->synced_gen, .up = h->up,
		.their_magic = h->magic, .their_gen = h->their_gen,
		.their_peer_gen = h->their_peer_gen,
		.their_ack_gen = h->their_ack_gen,
	};
	const char *w1 = "", *w2 = "";
	enum pcinet_hs k = pcinet_handshake(&v, &w2);
	enum pcinet_hs p = map(peer_hs_decide(h, &w1));

	if (k != p && failed++ < 10)
		printf("FAIL handshake: %x %x %d, peer %x %x %x %x: %d != %d\n",
		       h->gen, h->synced_gen, h->up, h->magic, h->their_gen,
		       h->their_peer_gen, h->their_ack_gen, k, p);
}

int main(void)
{
	static const u32 vals[] = { 0, 1, 5, 0xffffffff };
	static const u32 magics[] = { PCINET_CTRL_MAGIC, 0, PCINET_CTRL_MAGIC ^ 1 };
	static const unsigned char check_str[] = "123456789";
	unsigned char buf[1000];
	struct peer_hs h;
	unsigned long n = 0;
	u32 a, b;
	unsigned int x, r;
	int i;

	/* every combination: 4 x 4 x 2 x 3 x 4 x 4 x 4 */
	for (x = 0; x < 4 * 4 * 2 * 3 * 4 * 4 * 4; x++) {
		r = x;
		h.gen = vals[r % 4];
		r /= 4;
		h.synced_gen = vals[r % 4];
		r /= 4;
		h.up = r % 2;
		r /= 2;
		h.magic = magics[r % 3];
		r /= 3;
		h.their_gen = vals[r % 4];
		r /= 4;
		h.their_peer_gen = vals[r % 4];
		r /= 4;
		h.their_ack_gen = vals[r % 4];
		check(&h);
		n++;
	}
	srand(1);
	for (i = 0; i < 1000000; i++) {
		h = (struct peer_hs){ rand() % 3, rand() % 3, rand() & 1,
				      rand() % 4 ? PCINET_CTRL_MAGIC : rand(),
				      rand() % 3, rand() % 3, rand() % 3 };
		check(&h);
		n++;
	}
	printf("%s handshake: %lu cases, peer_hs_decide() == pcinet_handshake()\n",
	       failed ? "FAIL" : "ok", n);

	crc32c_init();
	a = ~crc32c_update(~0U, check_str, 9);
	if (a != 0xe3069283) {
		printf("FAIL crc32c(\"123456789\") = %08x, want e3069283\n", a);
		failed++;
	}
	for (i = 0; i < (int)sizeof(buf); i++)
		buf[i] = i * 7 + 3;
	a = crc32c_update(~0U, buf, sizeof(buf));
	b = crc32c_update(crc32c_update(~0U, buf, 333), buf + 333,
			  sizeof(buf) - 333);
	if (a != b) {
		printf("FAIL crc32c split\n");
		failed++;
	}
	printf("%s crc32c: check value and split buffers\n", failed ? "FAIL" : "ok");
	return failed ? 1 : 0;
}
