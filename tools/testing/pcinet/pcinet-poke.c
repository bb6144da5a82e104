// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet-poke: play a broken or hostile peer, from inside a test guest.
 *
 *   pcinet-poke garbage N   N rounds of random values written into the
 *                           peer's inbox (net and tty indices, record
 *                           headers in its rings), ~1 ms apart
 *   pcinet-poke dump        print the window header and both inboxes
 *
 * It maps BAR0 (for our side: IVPosition) and BAR2 (the window) of the
 * first ivshmem device through sysfs, as root.  The peer must survive
 * all of it: at most dropped packets and link resets.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pcinet_user.h"
#include "guest_window.h"

static u32 rnd(void)
{
	static const u32 specials[] = {
		0, 1, 15, 16, 63, 64, 65, 0x7fffffff, 0x80000000, 0xffffffff,
		0xfffffff0, 0x10000, 0x10040, 0x400000, 0x400040,
	};

	if (random() % 3 == 0)
		return specials[random() % (sizeof(specials) / sizeof(specials[0]))];
	return (u32)random() ^ ((u32)random() << 16);
}

int main(int argc, char **argv)
{
	struct pcinet_layout lay;
	struct pcinet_ctrl *peer;
	volatile u32 *regs;
	size_t rlen, wlen;
	char dev[300];
	unsigned int side, other;
	long i, n;
	u8 *win;

	if (argc < 2 || find_dev(dev, sizeof(dev))) {
		fprintf(stderr, "usage: pcinet-poke garbage N | dump (needs an ivshmem device)\n");
		return 1;
	}
	regs = map_bar(dev, 0, &rlen);
	win = map_bar(dev, 2, &wlen);
	if (pcinet_layout_parse(win, wlen, &lay)) {
		fprintf(stderr, "pcinet-poke: no valid pcinet window\n");
		return 1;
	}
	side = regs[2];
	other = !side;
	peer = (struct pcinet_ctrl *)(win + lay.ctrl_off[other]);

	if (!strcmp(argv[1], "dump")) {
		struct pcinet_ctrl *mine = (struct pcinet_ctrl *)(win + lay.ctrl_off[side]);
		int s;

		printf("side %u window %llu vectors %u\n", side,
		       (unsigned long long)lay.win_size, lay.nr_vectors);
		for (s = 0; s < 2; s++) {
			struct pcinet_ctrl *c = s ? peer : mine;

			printf("%s inbox: magic %08x gen %08x peer_gen %08x hb %u open %x "
			       "net prod %u cons %u event %u need %u\n",
			       s ? "peer" : "our", c->magic, c->gen, c->peer_gen,
			       c->heartbeat, c->chan_open, c->chan[0].prod,
			       c->chan[0].cons, c->chan[0].event, c->chan[0].need_space);
		}
		return 0;
	}
	if (strcmp(argv[1], "garbage") || argc < 3)
		return 1;
	n = atol(argv[2]);
	srandom(time(NULL));
	for (i = 0; i < n; i++) {
		int c = random() % PCINET_NR_RING_CHAN;
		struct pcinet_ring_loc *rl = &lay.ring[other][c];

		switch (random() % 6) {
		case 0:
			peer->chan[c].prod = rnd();
			break;
		case 1:
			peer->chan[c].cons = rnd();
			break;
		case 2:
			peer->chan[c].event = rnd();
			break;
		case 3:
			peer->chan[c].need_space = rnd();
			break;
		case 4: {
			/* a record header at a random aligned spot */
			u32 off = (rnd() % rl->size) & ~(PCINET_REC_ALIGN - 1);

			*(u32 *)(win + rl->off + off) = rnd();
			break;
		}
		default:
			/* push prod forward by a plausible, aligned amount */
			peer->chan[c].prod += (rnd() % 4096) & ~(PCINET_REC_ALIGN - 1);
			break;
		}
		if (i % 8 == 0)
			regs[3] = other << 16 | (1 + c);	/* ring the peer */
		usleep(1000);
	}
	printf("pcinet-poke: %ld rounds of garbage written\n", n);
	return 0;
}
