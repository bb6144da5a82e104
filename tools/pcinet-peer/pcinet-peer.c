// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet-peer - a pcinet side in userspace.
 *
 * Joins a pcinet-fabric (or any ivshmem server) as QEMU's ivshmem-doorbell
 * would: it receives the window (a memfd) and the doorbell eventfds over
 * the server's unix socket.  Then it is a full peer, written from
 * docs/design.md ("Writing a peer") and pcinet_layout.h: the link state
 * machine (generations, handshake, heartbeat, resets), the net channel
 * served as a TAP interface and the tty channel served as a pty.
 *
 * It reuses the portable ring code (pcinet_ring.c: the tx/rx views and
 * pcinet_layout_parse()); the link is its own (the kernel's pcinet_link.c
 * is not used), and so is the handshake rule (peer_hs.c, checked against
 * the kernel's pcinet_handshake() by hs_test.c).
 *
 * One thread, one poll loop.  Everything read from the window is written
 * by another machine: every word is read once into a local and checked
 * (the ring code does it for the indices and record headers), every loop
 * over window data is bounded by a budget.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "pcinet_grace.h"
#include "pcinet_ring.h"
#include "crc32c.h"
#include "peer_hs.h"
#include "peer_vio.h"
#include "tap.h"

#define MAX_VEC		16	/* doorbell vectors we take from the server */
#define BUDGET		64	/* records or frames per channel per round */
#define BAD_RESET	8	/* bad records in a row: reset */
#define FRAME_MAX	(PCINET_NET_MAX_LEN + 64)
#define ETH_HLEN_MIN	14
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

struct chan {
	struct pcinet_tx tx;
	struct pcinet_rx rx;
	bool need_space;	/* we asked for a doorbell on free space */
	unsigned int bad;	/* bad records in a row */
	/* a record read from the host side, waiting for ring space */
	u8 *out_buf;
	u32 out_len;
	struct pcinet_vnet_hdr out_vnet;
	/* tty: bytes taken from the ring, waiting for the pty */
	u8 *in_buf;
	u32 in_len;
	u32 in_off;
	/* counters */
	u64 tx_recs, tx_bytes, rx_recs, rx_bytes;
	u64 crc_errors, len_errors, drops;
};

static struct {
	/* options */
	const char *sock_path;
	const char *ifpattern;
	const char *pty_link;
	const char *status_path;
	bool offload;
	bool integrity;
	bool verbose;
	unsigned int timeout_ms;
	struct pcinet_ident ident;	/* ours: --name, --slot */

	/* the fabric */
	int sock;
	int own_id;
	int side, peer;
	int own_efd[MAX_VEC];
	unsigned int own_nfd;
	int peer_id;
	int peer_efd[MAX_VEC];
	unsigned int peer_nfd;
	unsigned int nvec;

	/* the window */
	int win_fd;		/* kept for the virtio back ends (--blk, --fs) */
	u8 *win;
	u64 win_size;
	struct pcinet_win_hdr *hdr;
	struct pcinet_layout lay;
	struct pcinet_ctrl *in;		/* our inbox: the peer writes it */
	struct pcinet_ctrl *out;	/* the peer's inbox: we write it */

	/* the link */
	u32 gen;
	u32 synced_gen;
	bool up;
	u32 heartbeat;
	u32 peer_beat;
	bool peer_beat_seen;
	u64 peer_beat_ms;
	u64 down_since_ms;
	u32 peer_epoch;
	u32 chan_open;
	u32 peer_open;
	struct pcinet_ident peer_ident;	/* as last read from a live block */
	u64 resets;
	u64 ups;
	u64 first_up_ms;	/* when the link first came up; 0: not yet */
	u64 doorbells_out, doorbells_in;
	u64 vio_doorbells_in;	/* the peer's doorbells on the virtio vector */
	const char *last_why;

	/* front-ends */
	struct chan ch[PCINET_NR_RING_CHAN];
	int tap;
	char ifname[32];
	bool carrier;
	int pty, pty_slave;
	char pty_path[64];

	bool status_dirty;
	u64 status_ms;

	/* virtio: the peer is there; how long its block has read wrong */
	bool vio_ok;
	struct pcinet_grace vio_grace;
} P;

static int stop_sig;	/* the signal that stops us, set by on_signal() */

/* --hostile: see "the hostile mode" below */
static struct {
	unsigned int secs;	/* length of a window */
	unsigned int rate;	/* garbage writes a second */
	int after_ms;		/* first window: after the first link up; -1: SIGUSR1 only */
	bool pending;		/* the first window is still to come */
	bool on;
	u64 start_ms, end_ms;
	u64 done;		/* writes in this window */
	u64 writes, doorbells, windows;
	u64 rnd;		/* xorshift64 state */
	unsigned int kinds;	/* H_GARBAGE, H_RECORDS: --hostile-kind */
	u64 records, records_full;	/* hostile records sent, no room */
	/* addresses learned from the peer's frames (h_learn()), as we send */
	bool eth_ok, ip4_ok, ip6_ok;
	u8 eth[12];		/* destination (the peer), source (us) */
	u8 ip4[8];		/* source (us), destination (the peer) */
	u8 ip6[32];
} H;

#define H_GARBAGE	1	/* garbage words and bytes where we write */
#define H_RECORDS	2	/* well-formed records, correct CRC, hostile content */

static void h_learn(const u8 *frame, u32 len);

static int usr1;	/* SIGUSR1 seen: start a window */

static __printf(1, 2) void logmsg(const char *fmt, ...)
{
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "%02ld:%02ld:%02ld.%03ld pcinet-peer[%d]: ",
		(long)(ts.tv_sec / 3600 % 24), (long)(ts.tv_sec / 60 % 60),
		(long)(ts.tv_sec % 60), ts.tv_nsec / 1000000L, P.side);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static __noreturn __printf(1, 2) void die(const char *fmt, ...)
{
	va_list ap;

	fputs("pcinet-peer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* At most 10 messages a second about bad peer data: the peer may be hostile. */
static bool ratelimit(void)
{
	static u64 start;
	static unsigned int n, missed;
	u64 now = now_ms();

	if (now - start >= 1000) {
		if (missed)
			logmsg("%u messages suppressed", missed);
		start = now;
		n = 0;
		missed = 0;
	}
	if (n++ < 10)
		return true;
	missed++;
	return false;
}

/* ----- doorbells ----- */

/*
 * Ring the peer's vector @v.  A side uses min(its doorbells, nr_vectors)
 * vectors; a vector at or above that is rung as vector 0.
 */
static void ring(unsigned int v)
{
	u64 one = 1;

	if (v >= P.nvec)
		v = PCINET_VEC_LINK;
	if (P.peer_id < 0 || v >= P.peer_nfd)
		return;
	if (write(P.peer_efd[v], &one, sizeof(one)) == sizeof(one))
		P.doorbells_out++;
}

/* ----- the control block we write (in the peer's inbox) ----- */

static void put(__le32 *w, u32 v)
{
	WRITE_ONCE(*w, cpu_to_le32(v));
}

static u32 get(const __le32 *w)
{
	return le32_to_cpu(READ_ONCE(*w));
}

/* L2: pairs with L1 in the peer (its store-release of gen/peer_gen) */
static u32 get_acquire(const __le32 *w)
{
	return le32_to_cpu(pcinet_load_acquire(w));
}

static u32 peer_epoch_now(void)
{
	return get_acquire(&P.hdr->attach_epoch[P.peer]);
}

/* Zero our indices of every channel, and our local copies. */
static void zero_indices(void)
{
	int c;

	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		pcinet_tx_reset(&P.ch[c].tx);
		pcinet_rx_reset(&P.ch[c].rx);
		P.ch[c].need_space = false;
		P.ch[c].bad = 0;
		P.ch[c].out_len = 0;
	}
}

static void set_carrier(void)
{
	bool on = P.up && (P.peer_open & (1U << PCINET_CHAN_NET));

	if (on == P.carrier)
		return;
	P.carrier = on;
	tap_set_carrier(P.tap, on);
	P.status_dirty = true;
}

/* Step 6: the only way down. */
static void link_reset(const char *why)
{
	if (P.up && ratelimit())
		logmsg("link down: %s (gen 0x%08x)", why, P.gen);
	else if (P.verbose)
		logmsg("reset while down: %s (gen 0x%08x)", why, P.gen);
	P.last_why = why;
	P.up = false;
	set_carrier();
	zero_indices();
	P.gen++;
	if (!P.gen)
		P.gen = 1;
	P.synced_gen = 0;
	put(&P.out->peer_gen, 0);
	put(&P.out->ack_gen, 0);
	/* L1: pairs with L2 in the peer; zeroed indices before the new gen */
	pcinet_store_release(&P.out->gen, cpu_to_le32(P.gen));
	ring(PCINET_VEC_LINK);
	P.down_since_ms = now_ms();
	P.resets++;
	P.status_dirty = true;
}

/* Step 5, sync: adopt the peer's generation @their_gen. */
static void link_sync(u32 their_gen)
{
	zero_indices();
	P.synced_gen = their_gen;
	P.peer_beat_ms = now_ms();
	put(&P.out->ack_gen, P.gen);
	/* L1: pairs with L2 in the peer; indices and ack_gen first */
	pcinet_store_release(&P.out->peer_gen, cpu_to_le32(their_gen));
	ring(PCINET_VEC_LINK);
	if (P.verbose)
		logmsg("synced to peer gen 0x%08x (ours 0x%08x)", their_gen, P.gen);
}

static void link_up(void)
{
	P.up = true;
	P.ups++;
	if (!P.first_up_ms)
		P.first_up_ms = now_ms();
	P.peer_beat_ms = now_ms();
	if (ratelimit())
		logmsg("link up (gen 0x%08x, peer gen 0x%08x, peer features 0x%x)",
		       P.gen, P.synced_gen, get(&P.in->features));
	set_carrier();
	P.status_dirty = true;
}

/*
 * The peer's identity (slot, name), read while its block is live, after
 * the load-acquire of its gen (L2: pairs with L1 in the peer, which
 * writes its identity before its gen); kept as last seen otherwise.
 */
static void peer_ident_poll(void)
{
	struct pcinet_ident id;
	u32 gen = get_acquire(&P.in->gen);

	if (!pcinet_ctrl_live(get(&P.in->magic), gen))
		return;
	pcinet_ident_read(P.in, &id);
	if (!memcmp(&id, &P.peer_ident, sizeof(id)))
		return;
	P.peer_ident = id;
	P.status_dirty = true;
	logmsg("peer: name \"%s\", slot %u", id.name, id.slot);
}

/* Steps 5 and 11: the handshake, and the peer's open channels. */
static void link_run(void)
{
	struct peer_hs h;
	enum peer_act act;
	const char *why = "";
	u32 epoch, open;
	int round;

	epoch = peer_epoch_now();
	if (epoch != P.peer_epoch) {
		P.peer_epoch = epoch;
		if (P.synced_gen)
			link_reset("peer's attach epoch changed");
	}
	/* SYNC and RESTART ask again; the answer is then UP or WAIT */
	for (round = 0; round < 3; round++) {
		h.gen = P.gen;
		h.synced_gen = P.synced_gen;
		h.up = P.up;
		/* L2: pairs with L1 in the peer */
		h.their_gen = get_acquire(&P.in->gen);
		h.magic = get(&P.in->magic);
		/* L2: ack_gen is stored before peer_gen */
		h.their_peer_gen = get_acquire(&P.in->peer_gen);
		h.their_ack_gen = get(&P.in->ack_gen);
		act = peer_hs_decide(&h, &why);
		if (act == PEER_SYNC) {
			link_sync(h.their_gen);
			continue;
		}
		if (act == PEER_RESTART) {
			link_reset(why);
			link_sync(h.their_gen);
			continue;
		}
		if (act == PEER_UP)
			link_up();
		else if (act == PEER_RESET)
			link_reset(why);
		break;
	}
	open = get(&P.in->chan_open);
	if (open != P.peer_open) {
		P.peer_open = open;
		P.status_dirty = true;
	}
	set_carrier();
	peer_ident_poll();
}

/*
 * Step 12: an impossible index or record.  A reset of our own only if
 * the peer still runs the generation we synchronised with; otherwise it
 * is resetting and the handshake resyncs us.
 */
static void proto_error(int c, const char *what)
{
	u32 gen = get_acquire(&P.in->gen);

	if (ratelimit())
		logmsg("%s: bad peer data (%s)",
		       c == PCINET_CHAN_NET ? "net" : "tty", what);
	if (P.synced_gen && gen == P.synced_gen)
		link_reset("protocol error");
	link_run();
}

/* ----- records ----- */

static u32 rec_crc(const struct pcinet_rec *rec, const void *data, u32 len)
{
	u32 crc = crc32c_update(~0U, rec, offsetof(struct pcinet_rec, crc));

	return ~crc32c_update(crc, data, len);
}

/*
 * Step 8: put the pending record of channel @c on the ring.
 * Return: 1 done, 0 no room (need_space set), -1 protocol error.
 */
static int chan_put(int c)
{
	struct chan *ch = &P.ch[c];
	struct pcinet_span sp;
	struct pcinet_rec rec;
	int size;

	size = pcinet_tx_reserve(&ch->tx, ch->out_len, &sp);
	if (size == 0) {
		size = pcinet_tx_wait_space(&ch->tx);
		if (size < 0)
			goto bad;
		ch->need_space = true;
		if ((u32)size < pcinet_rec_size(ch->out_len))
			return 0;
		size = pcinet_tx_reserve(&ch->tx, ch->out_len, &sp);
		if (size <= 0)
			goto bad;
	}
	if (size < 0)
		goto bad;
	if (ch->need_space) {
		pcinet_tx_space_ok(&ch->tx);
		ch->need_space = false;
	}
	memset(&rec, 0, sizeof(rec));
	rec.len = cpu_to_le32(ch->out_len);
	if (c == PCINET_CHAN_NET)
		rec.vnet = ch->out_vnet;
	rec.flags = cpu_to_le16(PCINET_REC_F_CRC);
	rec.crc = cpu_to_le32(rec_crc(&rec, ch->out_buf, ch->out_len));
	pcinet_tx_write(&ch->tx, 0, &rec, sizeof(rec));
	pcinet_tx_write(&ch->tx, sizeof(rec), ch->out_buf, ch->out_len);
	/* A: in pcinet_tx_commit(), record before prod */
	pcinet_tx_commit(&ch->tx, size);
	ch->tx_recs++;
	ch->tx_bytes += ch->out_len;
	ch->out_len = 0;
	return 1;
bad:
	proto_error(c, "impossible consumer index");
	return -1;
}

/* Read one frame (or tty chunk) from the host side; false if none. */
static bool host_read(int c)
{
	struct chan *ch = &P.ch[c];
	struct iovec iov[2];
	ssize_t n;

	if (c == PCINET_CHAN_TTY) {
		n = read(P.pty, ch->out_buf, PCINET_TTY_REC_MAX);
		if (n <= 0)
			return false;
		ch->out_len = n;
		return true;
	}
	iov[0].iov_base = &ch->out_vnet;
	iov[0].iov_len = TAP_VNET_HDR_LEN;
	iov[1].iov_base = ch->out_buf;
	iov[1].iov_len = FRAME_MAX;
	n = readv(P.tap, iov, 2);
	if (n <= TAP_VNET_HDR_LEN)
		return false;
	n -= TAP_VNET_HDR_LEN;
	if (!P.carrier || n > PCINET_NET_MAX_LEN) {
		ch->drops++;
		return true;	/* consumed, nothing to send */
	}
	ch->out_len = n;
	return true;
}

/*
 * Producer side of channel @c: move host data into the ring.
 * Return: true if there may be more to do right away.
 */
static bool chan_tx(int c)
{
	struct chan *ch = &P.ch[c];
	bool more = false;
	int n, r;

	for (n = 0; n < BUDGET; n++) {
		if (!ch->out_len) {
			if (!host_read(c))
				break;
			if (!ch->out_len)
				continue;
		}
		if (!P.up)
			break;
		r = chan_put(c);
		if (r < 0)
			return false;
		if (r == 0)
			break;
		if (n == BUDGET - 1)
			more = true;
	}
	/* E: in pcinet_tx_end_batch() */
	if (P.up && pcinet_tx_end_batch(&ch->tx))
		ring(pcinet_chan_vector(c));
	return more;
}

/* Deliver a checked record's payload to the host side. */
static void host_write(int c, const struct pcinet_rec *rec, u8 *buf, u32 len)
{
	struct chan *ch = &P.ch[c];
	struct iovec iov[2];

	if (c == PCINET_CHAN_TTY) {
		ch->in_buf = buf;
		ch->in_len = len;
		ch->in_off = 0;
		return;
	}
	if (len < ETH_HLEN_MIN) {
		ch->len_errors++;
		return;
	}
	if (H.kinds & H_RECORDS)
		h_learn(buf, len);
	iov[0].iov_base = (void *)&rec->vnet;
	iov[0].iov_len = TAP_VNET_HDR_LEN;
	iov[1].iov_base = buf;
	iov[1].iov_len = len;
	if (writev(P.tap, iov, 2) < 0)
		ch->drops++;
}

/* tty: push what we took from the ring into the pty; true when empty. */
static bool tty_flush(void)
{
	struct chan *ch = &P.ch[PCINET_CHAN_TTY];
	ssize_t n;

	while (ch->in_off < ch->in_len) {
		n = write(P.pty, ch->in_buf + ch->in_off, ch->in_len - ch->in_off);
		if (n <= 0)
			return false;
		ch->in_off += n;
	}
	ch->in_len = 0;
	ch->in_off = 0;
	return true;
}

/*
 * Step 9: consumer side of channel @c.
 * Return: true if there may be more to do right away.
 */
static bool chan_rx(int c, u8 *buf)
{
	struct chan *ch = &P.ch[c];
	u32 max = c == PCINET_CHAN_NET ? PCINET_NET_MAX_LEN : PCINET_TTY_REC_MAX;
	struct pcinet_rec rec;
	bool ok;
	u32 len;
	int n, size;

	for (n = 0; n < BUDGET; n++) {
		if (c == PCINET_CHAN_TTY && !tty_flush())
			break;		/* the pty is full: end-to-end flow control */
		/* B: in pcinet_rx_avail(); header copied out, then checked */
		size = pcinet_rx_peek_rec(&ch->rx, &rec, max);
		if (size < 0) {
			proto_error(c, "impossible producer index or record length");
			return false;
		}
		if (size == 0) {
			/* C, H: in pcinet_rx_give_back() */
			if (pcinet_rx_give_back(&ch->rx))
				ring(pcinet_chan_vector(c));
			/* F: in pcinet_rx_arm() */
			if (!pcinet_rx_arm(&ch->rx))
				return false;
			continue;
		}
		len = le32_to_cpu(rec.len);
		pcinet_rx_read(&ch->rx, sizeof(rec), buf, len);
		pcinet_rx_consume(&ch->rx, size);
		if (pcinet_rx_give_back_due(&ch->rx) &&
		    pcinet_rx_give_back(&ch->rx))
			ring(pcinet_chan_vector(c));
		/* our copy is checked, never the window */
		if (le16_to_cpu(rec.flags) & PCINET_REC_F_CRC)
			ok = rec_crc(&rec, buf, len) == le32_to_cpu(rec.crc);
		else
			ok = c == PCINET_CHAN_NET && !P.integrity;
		if (!ok) {
			ch->crc_errors++;
			if (++ch->bad >= BAD_RESET) {
				proto_error(c, "bad records in a row");
				return false;
			}
			continue;
		}
		ch->bad = 0;
		ch->rx_recs++;
		ch->rx_bytes += len;
		host_write(c, &rec, buf, len);
	}
	if (pcinet_rx_give_back(&ch->rx))
		ring(pcinet_chan_vector(c));
	return n == BUDGET;
}

static u8 *net_rx_buf, *tty_rx_buf;

/* Serve every channel once; true if any has more to do now. */
static bool serve(void)
{
	bool more = false;

	if (!P.up) {
		/* frames the stack sent before the carrier went: drop */
		chan_tx(PCINET_CHAN_NET);
		return false;
	}
	more |= chan_rx(PCINET_CHAN_NET, net_rx_buf);
	if (P.up)
		more |= chan_rx(PCINET_CHAN_TTY, tty_rx_buf);
	if (P.up)
		more |= chan_tx(PCINET_CHAN_NET);
	if (P.up)
		more |= chan_tx(PCINET_CHAN_TTY);
	return more && P.up;
}

/* ----- the tick ----- */

static void status_write(void)
{
	struct chan *n = &P.ch[PCINET_CHAN_NET], *t = &P.ch[PCINET_CHAN_TTY];
	u64 vio_kicks, vio_rings;
	char tmp[4096];
	FILE *f;

	if (!P.status_path)
		return;
	pvio_counts(&vio_kicks, &vio_rings);
	snprintf(tmp, sizeof(tmp), "%s.tmp", P.status_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "link=%s\nside=%d\nid=%d\ngen=0x%08x\npeer_gen=0x%08x\n"
		"carrier=%d\ndcd=%d\npeer_open=0x%x\nresets=%llu\nups=%llu\n"
		"last_reset=%s\nifname=%s\npty=%s\n"
		"net_tx=%llu net_tx_bytes=%llu net_rx=%llu net_rx_bytes=%llu\n"
		"net_crc_errors=%llu net_len_errors=%llu net_drops=%llu\n"
		"tty_tx_bytes=%llu tty_rx_bytes=%llu tty_frame_errors=%llu\n"
		"doorbells_out=%llu doorbells_in=%llu\n"
		"vio_doorbells_in=%llu vio_kicks=%llu vio_doorbells_out=%llu\n"
		"name=%s\nslot=%u\npeer_name=%s\npeer_slot=%u\n"
		"hostile=%d\nhostile_windows=%llu\nhostile_writes=%llu\n"
		"hostile_records=%llu\nhostile_records_full=%llu\n",
		P.up ? "up" : "down", P.side, P.own_id, P.gen, P.synced_gen,
		P.carrier, P.up && (P.peer_open & (1U << PCINET_CHAN_TTY)),
		P.peer_open, (unsigned long long)P.resets,
		(unsigned long long)P.ups, P.last_why ? P.last_why : "-",
		P.ifname, P.pty_path,
		(unsigned long long)n->tx_recs, (unsigned long long)n->tx_bytes,
		(unsigned long long)n->rx_recs, (unsigned long long)n->rx_bytes,
		(unsigned long long)n->crc_errors,
		(unsigned long long)n->len_errors, (unsigned long long)n->drops,
		(unsigned long long)t->tx_bytes, (unsigned long long)t->rx_bytes,
		(unsigned long long)t->crc_errors,
		(unsigned long long)P.doorbells_out,
		(unsigned long long)P.doorbells_in,
		(unsigned long long)P.vio_doorbells_in,
		(unsigned long long)vio_kicks, (unsigned long long)vio_rings,
		P.ident.name, P.ident.slot,
		P.peer_ident.name, P.peer_ident.slot, H.on,
		(unsigned long long)H.windows, (unsigned long long)H.writes,
		(unsigned long long)H.records,
		(unsigned long long)H.records_full);
	if (fclose(f) == 0)
		rename(tmp, P.status_path);
}

/* Step 7, every PCINET_TICK_MS. */
static void tick(void)
{
	u64 now = now_ms();
	u32 beat, open;
	int c, up;

	P.heartbeat++;
	put(&P.out->heartbeat, P.heartbeat);

	/* soft state: every word we own, again */
	put(&P.out->magic, PCINET_CTRL_MAGIC);
	put(&P.out->features, PCINET_F_TTY_CRC | pvio_features());
	pcinet_ident_write(P.out, &P.ident);
	put(&P.out->ack_gen, P.synced_gen ? P.gen : 0);
	/* L1: pairs with L2 in the peer; ack_gen before peer_gen before gen */
	pcinet_store_release(&P.out->peer_gen, cpu_to_le32(P.synced_gen));
	pcinet_store_release(&P.out->gen, cpu_to_le32(P.gen));
	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		struct chan *ch = &P.ch[c];

		pcinet_tx_refresh(&ch->tx);
		pcinet_rx_refresh(&ch->rx);
		put(&P.out->chan[c].need_space, ch->need_space);
		put(&P.out->chan[c].event, ch->rx.cons);
	}

	/* our open channels: the TAP's IFF_UP, and the pty (always open) */
	open = 1U << PCINET_CHAN_TTY;
	up = tap_is_up(P.ifname);
	if (up > 0)
		open |= 1U << PCINET_CHAN_NET;
	put(&P.out->chan_open, open);
	if (open != P.chan_open) {
		P.chan_open = open;
		ring(PCINET_VEC_LINK);
		P.status_dirty = true;
	}

	/* the peer's heartbeat: any change is a beat */
	beat = get(&P.in->heartbeat);
	if (beat != P.peer_beat || !P.peer_beat_seen) {
		if (beat != P.peer_beat)
			P.peer_beat_seen = true;
		P.peer_beat = beat;
		P.peer_beat_ms = now;
	}
	if (P.up && now - P.peer_beat_ms > P.timeout_ms)
		link_reset("peer's heartbeat silent");
	else if (!P.up && P.peer_beat_seen &&
		 pcinet_ctrl_live(get(&P.in->magic), get(&P.in->gen)) &&
		 now - P.peer_beat_ms <= P.timeout_ms &&
		 now - P.down_since_ms > P.timeout_ms)
		link_reset("no handshake while the peer runs");
	link_run();
	if (P.status_dirty || now - P.status_ms >= 1000) {
		status_write();
		P.status_dirty = false;
		P.status_ms = now;
	}
}

/* ----- the fabric (ivshmem server protocol, version 0) ----- */

/* One 8-byte message and at most one fd; false on EOF. */
static bool recv_msg(int64_t *val, int *fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct cmsghdr *cmsg;
	size_t got = 0;
	u64 le;

	*fd = -1;
	while (got < sizeof(le)) {
		struct iovec iov = { (char *)&le + got, sizeof(le) - got };
		struct msghdr msg = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
		};
		ssize_t r = recvmsg(P.sock, &msg, MSG_CMSG_CLOEXEC);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		for (cmsg = CMSG_FIRSTHDR(&msg); cmsg;
		     cmsg = CMSG_NXTHDR(&msg, cmsg)) {
			int nfd = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			if (cmsg->cmsg_level != SOL_SOCKET ||
			    cmsg->cmsg_type != SCM_RIGHTS || nfd < 1)
				continue;
			if (*fd >= 0)
				close(*fd);
			memcpy(fd, CMSG_DATA(cmsg), sizeof(int));
		}
		got += r;
	}
	*val = (int64_t)le64_to_cpu(le);
	return true;
}

static void forget_peer(void)
{
	unsigned int v;

	for (v = 0; v < P.peer_nfd; v++)
		close(P.peer_efd[v]);
	P.peer_nfd = 0;
	P.peer_id = -1;
}

/* A peer message: @id with an eventfd (one per vector, in order) or none. */
static void peer_msg(int64_t id, int fd)
{
	if (id == P.own_id) {
		if (fd >= 0 && P.own_nfd < MAX_VEC)
			P.own_efd[P.own_nfd++] = fd;
		else if (fd >= 0)
			close(fd);
		return;
	}
	if (id < 0 || (id & 1) == (P.own_id & 1)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fd < 0) {
		if (id == P.peer_id) {
			logmsg("peer id %lld left the fabric", (long long)id);
			forget_peer();
		}
		return;
	}
	if (id != P.peer_id) {
		forget_peer();
		P.peer_id = id;
		logmsg("peer id %lld joined the fabric", (long long)id);
	}
	if (P.peer_nfd < MAX_VEC)
		P.peer_efd[P.peer_nfd++] = fd;
	else
		close(fd);
}

static void fabric_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct pollfd pfd;
	u64 deadline = now_ms() + 5000;
	int64_t val;
	off_t size;
	int fd;
	unsigned int nr;

	if (strlen(P.sock_path) >= sizeof(sa.sun_path))
		die("socket path too long");
	memcpy(sa.sun_path, P.sock_path, strlen(P.sock_path) + 1);
	P.sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (P.sock < 0 || connect(P.sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect %s: %s", P.sock_path, strerror(errno));
	pfd.fd = P.sock;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 5000) != 1 || !recv_msg(&val, &fd) || val != 0 || fd >= 0)
		die("%s: no ivshmem version 0 greeting (refused?)", P.sock_path);
	if (!recv_msg(&val, &fd) || fd >= 0 || val < 0 || val > 0xffff)
		die("%s: bad peer id message", P.sock_path);
	P.own_id = (int)val;
	P.side = P.own_id & 1;
	P.peer = !P.side;
	if (!recv_msg(&val, &fd) || fd < 0 || val != -1)
		die("%s: bad shared memory message", P.sock_path);
	size = lseek(fd, 0, SEEK_END);
	if (size < PCINET_HDR_SIZE)
		die("window too small (%lld bytes)", (long long)size);
	P.win = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (P.win == MAP_FAILED)
		die("mmap window: %s", strerror(errno));
	P.win_fd = fd;
	P.win_size = size;
	P.hdr = (struct pcinet_win_hdr *)P.win;
	/* steps 1, 2: P2 and every check of "The window" */
	if (pcinet_layout_parse(P.win, P.win_size, &P.lay))
		die("not a usable pcinet window");
	nr = P.lay.nr_vectors;
	/* the server sends the peers' eventfds, then our own, one per vector */
	while (P.own_nfd < nr && P.own_nfd < MAX_VEC) {
		int left = (int)(deadline - now_ms());

		if (left <= 0 || poll(&pfd, 1, left) != 1 || !recv_msg(&val, &fd))
			die("%s: setup did not complete", P.sock_path);
		peer_msg(val, fd);
	}
	P.nvec = P.own_nfd < nr ? P.own_nfd : nr;
}

/* ----- start and stop ----- */

/*
 * Steps 3 and 4: start clean, as a peer that (re)starts: our whole block
 * zeroed, a new generation, nothing synchronised.  At start, and when a
 * hostile window ends (our own garbage may have broken anything we wrote).
 */
static void link_fresh(void)
{
	u32 gen;

	P.up = false;
	set_carrier();
	zero_indices();
	P.synced_gen = 0;
	/* step 3: start clean */
	memset(P.out, 0, sizeof(*P.out));
	/* step 4: a generation unlikely to repeat, odd as the driver's */
	if (getrandom(&gen, sizeof(gen), 0) != sizeof(gen))
		gen = (u32)now_ms() * 2654435761U;
	gen |= 1;
	if (gen == P.gen)
		gen += 2;
	P.gen = gen;
	P.chan_open = 1U << PCINET_CHAN_TTY;
	if (tap_is_up(P.ifname) > 0)
		P.chan_open |= 1U << PCINET_CHAN_NET;
	put(&P.out->magic, PCINET_CTRL_MAGIC);
	put(&P.out->features, PCINET_F_TTY_CRC | pvio_features());
	pcinet_ident_write(P.out, &P.ident);
	put(&P.out->peer_gen, 0);
	put(&P.out->ack_gen, 0);
	put(&P.out->chan_open, P.chan_open);
	/* L1: the zeroed block and our identity before the generation */
	pcinet_store_release(&P.out->gen, cpu_to_le32(P.gen));
	P.peer_epoch = peer_epoch_now();
	P.down_since_ms = now_ms();
	P.peer_beat = get(&P.in->heartbeat);
	P.peer_beat_ms = now_ms();
	P.status_dirty = true;
	ring(PCINET_VEC_LINK);
}

static void link_start(void)
{
	int c;

	P.in = (struct pcinet_ctrl *)(P.win + P.lay.ctrl_off[P.side]);
	P.out = (struct pcinet_ctrl *)(P.win + P.lay.ctrl_off[P.peer]);
	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		const struct pcinet_ring_loc *txl = &P.lay.ring[P.peer][c];
		const struct pcinet_ring_loc *rxl = &P.lay.ring[P.side][c];

		pcinet_tx_init(&P.ch[c].tx, P.win + txl->off, txl->size,
			       &P.out->chan[c], &P.in->chan[c]);
		pcinet_rx_init(&P.ch[c].rx, P.win + rxl->off, rxl->size,
			       &P.out->chan[c], &P.in->chan[c]);
	}
	link_fresh();
	logmsg("started: id %d side %d gen 0x%08x, %u vectors, net ring %u KiB, ifname %s, pty %s",
	       P.own_id, P.side, P.gen, P.nvec, P.ch[PCINET_CHAN_NET].rx.size >> 10,
	       P.ifname, P.pty_path);
	link_run();
}

/* Step 13. */
static void link_stop(void)
{
	put(&P.out->chan_open, 0);
	/* L1: pairs with L2 in the peer; channels closed before gen 0 */
	pcinet_store_release(&P.out->gen, cpu_to_le32(0));
	ring(PCINET_VEC_LINK);
	P.up = false;
	tap_set_carrier(P.tap, false);
	if (P.status_path) {
		status_write();
		/* leave the last status for whoever reads it: link=down */
	}
	if (P.pty_link)
		unlink(P.pty_link);
}

/* ----- the virtio device side (--blk, --fs, peer_vio.c) ----- */

/* The virtio channel's vector: 3, or 0 with fewer vectors. */
static unsigned int vio_vector(void)
{
	return P.nvec > PCINET_VEC_VIRTIO ? PCINET_VEC_VIRTIO : PCINET_VEC_LINK;
}

/* The eventfd that rings the peer's virtio vector (vector 0 without one). */
static int vio_call_fd(void)
{
	unsigned int v = vio_vector();

	return P.peer_id >= 0 && v < P.peer_nfd ? P.peer_efd[v] : -1;
}

/* A heartbeat while the virtio part waits for its back end (ring_drain()). */
void pvio_beat(void)
{
	P.heartbeat++;
	put(&P.out->heartbeat, P.heartbeat);
}

/*
 * Virtio liveness is the peer's, not the link's (a net or tty reset
 * leaves the devices alone): attached, its block live, PCINET_F_VIRTIO
 * set, its heartbeat not silent.  A block that reads "not live" or
 * without PCINET_F_VIRTIO while the peer was there (a word overwritten
 * by a third party, the peer repairs it on its next tick) ends the
 * sessions only once it read so on every look for PCINET_PEER_GRACE_MS
 * (pcinet_grace.c); the link resets at once meanwhile.
 */
static void vio_run(void)
{
	bool soft = pcinet_ctrl_live(get(&P.in->magic), get(&P.in->gen)) &&
		    (get(&P.in->features) & PCINET_F_VIRTIO);
	u64 now = now_ms();
	bool hard, bad, held, ok;

	hard = P.peer_id >= 0 && (peer_epoch_now() & 1) &&
	       now - P.peer_beat_ms <= P.timeout_ms;
	bad = P.vio_ok && hard && !soft;
	held = pcinet_grace_look(&P.vio_grace, bad, (u32)now,
				 PCINET_PEER_GRACE_MS);
	ok = hard && (soft || (bad && !held));
	P.vio_ok = ok;
	pvio_run(ok, P.peer_id, vio_call_fd());
}

/* ----- the hostile mode (--hostile) ----- */

/*
 * A broken or hostile peer, for the other side's fault tests: for a
 * window of H.secs seconds, besides running normally, write garbage about
 * H.rate times a second where the protocol lets this side write, and
 * nowhere else: the words of our control block (the peer's inbox) and
 * the records of the rings we produce into (the peer's data inbox); and
 * ring the peer's doorbells at random.  The tick still rewrites the block
 * every 100 ms, so the garbage competes with the real state.  When the
 * window ends we start again as a peer that restarted (link_fresh(): our
 * block zeroed, a new generation, indices zero): the peer resynchronises
 * as after any restart, whatever our garbage did to either side.
 *
 * Garbage mostly fails the peer's CRC check and is dropped there, before
 * anything parses it.  --hostile-kind=records writes the other kind (in
 * place of the garbage, or with it: "all"): well-formed records with a
 * correct CRC whose content is hostile, frames with offload headers that
 * contradict them and tty records of any bytes (h_record()), which only
 * the peer's own checks of what it hands to its stack stand against.
 */
static u32 h_rnd(void)
{
	H.rnd ^= H.rnd << 13;
	H.rnd ^= H.rnd >> 7;
	H.rnd ^= H.rnd << 17;
	return (u32)(H.rnd >> 16);
}

/*
 * A value for a word now holding @cur, in a ring of @size bytes (0: not
 * about a ring): a third special values, boundaries and indices a ring
 * ahead or behind, the rest random.
 */
static u32 h_value(u32 cur, u32 size)
{
	u32 sz = size ? size : PCINET_TTY_RING_SIZE;
	const u32 specials[] = {
		0, 1, 0xffffffff, 0x7fffffff, 0x80000000, 64, 65, sz, sz + 64,
		cur + sz, cur - sz, cur + sz + 64, cur - 64, cur + 64, cur + 1,
		cur ^ 0x80000000, P.gen, P.gen + 1, get(&P.in->gen),
		PCINET_CTRL_MAGIC, PCINET_NET_MAX_LEN + 1,
	};

	switch (h_rnd() % 3) {
	case 0:
		return specials[h_rnd() % ARRAY_SIZE(specials)];
	case 1:
		return cur + (h_rnd() % 4096 & ~(PCINET_REC_ALIGN - 1));
	default:
		return h_rnd();
	}
}

struct h_word {
	__le32 *w;
	u32 ring;	/* the size of the ring the word indexes; 0: none */
};

/* A word of our control block: the block-wide ones and each channel's. */
static void h_ctrl_word(void)
{
	int c = h_rnd() % PCINET_NR_RING_CHAN;
	struct pcinet_chan_ctrl *cc = &P.out->chan[c];
	u32 tx_size = P.ch[c].tx.size, rx_size = P.ch[c].rx.size;
	__le32 *name = (__le32 *)P.out->name;
	const struct h_word words[] = {
		{ &P.out->magic, 0 },
		{ &P.out->gen, 0 },
		{ &P.out->peer_gen, 0 },
		{ &P.out->ack_gen, 0 },
		{ &P.out->chan_open, 0 },
		{ &P.out->heartbeat, 0 },
		{ &P.out->features, 0 },
		{ &P.out->slot, 0 },
		{ &name[h_rnd() % (PCINET_NAME_LEN / 4)], 0 },
		{ &cc->prod, tx_size },
		{ &cc->prod, tx_size },
		{ &cc->need_space, tx_size },
		{ &cc->cons, rx_size },
		{ &cc->cons, rx_size },
		{ &cc->event, rx_size },
	};
	const struct h_word *hw = &words[h_rnd() % ARRAY_SIZE(words)];

	put(hw->w, h_value(get(hw->w), hw->ring));
}

/*
 * A record header word or payload bytes in a ring we produce into: at the
 * record the peer reads next, at one it may be reading (published, not yet
 * consumed), or anywhere.
 */
static void h_ring(bool header)
{
	struct pcinet_tx *tx = &P.ch[h_rnd() % PCINET_NR_RING_CHAN].tx;
	u32 mask = tx->size - 1, off, len, i;
	u32 used = tx->prod - tx->cons;

	switch (h_rnd() % 3) {
	case 0:
		off = tx->cons;
		break;
	case 1:
		off = tx->cons + (used <= tx->size && used ? h_rnd() % used : 0);
		break;
	default:
		off = h_rnd();
		break;
	}
	if (header) {
		/* one of the 5 words of struct pcinet_rec, at a record's start */
		__le32 *w = (__le32 *)(tx->data + (off & mask & ~(PCINET_REC_ALIGN - 1)));

		w += h_rnd() % (sizeof(struct pcinet_rec) / 4);
		put(w, h_value(get(w), tx->size));
		return;
	}
	len = 1 + h_rnd() % 256;
	for (i = 0; i < len; i++)
		WRITE_ONCE(tx->data[(off + i) & mask], (u8)h_rnd());
}

/* ----- hostile records (--hostile-kind=records) ----- */

/* virtio_net_hdr values (include/uapi/linux/virtio_net.h) */
#define H_F_NEEDS_CSUM	1
#define H_F_DATA_VALID	2
#define H_GSO_TCPV4	1
#define H_GSO_UDP	3
#define H_GSO_TCPV6	4
#define H_GSO_UDP_L4	5
#define H_GSO_ECN	0x80
#define H_GSO_BY_FRAGS	0xffff

/*
 * Where hostile frames go, learned from the first unicast IPv4 and IPv6
 * frames the peer sends: its MAC and address become our destination, the
 * ones it sent to our source, so that the peer's stack takes them in, not
 * only its driver.  Once: a hostile frame it forwards back to us later
 * has our own address as its source.  @len is at least an Ethernet header.
 */
static void h_learn(const u8 *f, u32 len)
{
	u16 type = f[12] << 8 | f[13];

	if (f[0] & 1)		/* a group address: not ours */
		return;
	if (type == 0x0800 && len >= 34 && !H.ip4_ok) {
		memcpy(H.ip4, f + 30, 4);
		memcpy(H.ip4 + 4, f + 26, 4);
		H.ip4_ok = true;
	} else if (type == 0x86dd && len >= 54 && !H.ip6_ok) {
		memcpy(H.ip6, f + 38, 16);
		memcpy(H.ip6 + 16, f + 22, 16);
		H.ip6_ok = true;
	} else {
		return;
	}
	memcpy(H.eth, f + 6, 6);
	memcpy(H.eth + 6, f, 6);
	H.eth_ok = true;
}

/* One of the @n values @v, or (one time in four) a random one. */
static u32 h_pick(const u32 *v, unsigned int n)
{
	return h_rnd() % 4 ? v[h_rnd() % n] : h_rnd();
}

static void h_put16(u8 *p, u32 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

/* The Internet checksum of @len bytes at @p. */
static u16 h_csum(const u8 *p, u32 len)
{
	u32 sum = 0, i;

	for (i = 0; i + 1 < len; i += 2)
		sum += p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* IPv4 (@v6 false) or IPv6 header at @f for @len bytes from @f on. */
static u32 h_ip(u8 *f, u32 len, bool v6, u8 proto)
{
	u32 ihl = 20, i;

	if (v6) {
		memset(f, 0, 8);
		f[0] = 0x60;
		h_put16(f + 4, h_rnd() % 8 ? len - 40 : h_rnd());
		f[6] = proto;
		f[7] = 64;
		if (H.ip6_ok)
			memcpy(f + 8, H.ip6, 32);
		else
			for (i = 8; i < 40; i++)
				f[i] = h_rnd();
		return 40;
	}
	if (!(h_rnd() % 8))
		ihl = 4 * (h_rnd() % 16);
	f[0] = 0x40 | ihl / 4;
	f[1] = 0;
	h_put16(f + 2, h_rnd() % 8 ? len : h_rnd());
	h_put16(f + 4, h_rnd());
	h_put16(f + 6, h_rnd() % 8 ? 0x4000 : h_rnd());	/* DF, or anything */
	f[8] = 64;
	f[9] = proto;
	h_put16(f + 10, 0);
	if (H.ip4_ok)
		memcpy(f + 12, H.ip4, 8);
	else
		for (i = 12; i < 20; i++)
			f[i] = h_rnd();
	/* one in four to the /24 after the peer's: for it to forward */
	if (!(h_rnd() % 4))
		f[18]++;
	h_put16(f + 10, h_rnd() % 8 ? h_csum(f, ihl < 20 ? 20 : ihl) : h_rnd());
	return ihl < 20 ? 20 : ihl;
}

/*
 * A frame for the peer (its addresses, h_learn()) in @f, and an offload
 * header in @vh that may contradict it; returns the frame's length.
 * Frames: IPv4 (one in four to the /24 after the peer's address, which
 * the peer may route, so that its forwarding path and software GSO see
 * them too) or IPv6 with TCP, UDP, ICMP or any protocol, VLAN-tagged
 * IPv4, ARP or any ethertype, of any length from a bare Ethernet header
 * to the largest record, with headers cut short or lying about lengths,
 * options and fragments.  Offload header: one time in four what a correct
 * TSO sender would write for a TCP frame (GSO type of the frame's IP
 * version, checksum start and offset of its TCP header, any segment
 * size); otherwise each field from boundary values (0, 1, the frame's
 * length and past it, 0xffff = GSO_BY_FRAGS, GSO types never offered:
 * UDP, UDP_L4, ECN alone) or random.
 */
static u32 h_frame(u8 *f, struct pcinet_vnet_hdr *vh)
{
	static const u32 lens[] = {
		14, 15, 33, 34, 53, 54, 60, 64, 1514, 1515, 1518, 9014, 9018,
		65535, 65536, PCINET_NET_MAX_LEN,
	};
	static const u32 protos[] = { 6, 6, 6, 6, 17, 17, 1, 58 };
	static const u32 ports[] = { 5001, 5003, 5201, 22, 0, 65535 };
	static const u32 tcp_flags[] = { 0x10, 0x18, 0x02, 0x04, 0x11, 0x12 };
	static bool filled;
	u32 len, l3 = 14, l4, i, kind = h_rnd() % 16;
	u8 proto = h_pick(protos, ARRAY_SIZE(protos));
	bool v6 = false, tcp = false;

	if (!filled) {		/* payload bytes: random once, headers each time */
		for (i = 0; i < FRAME_MAX; i++)
			f[i] = h_rnd();
		filled = true;
	}
	switch (h_rnd() % 4) {
	case 0:
		len = lens[h_rnd() % ARRAY_SIZE(lens)];
		break;
	case 1:
		len = ETH_HLEN_MIN + h_rnd() % 1501;
		break;
	case 2:
		len = ETH_HLEN_MIN + h_rnd() % 9001;
		break;
	default:
		len = ETH_HLEN_MIN + h_rnd() % (PCINET_NET_MAX_LEN - 13);
		break;
	}
	if (H.eth_ok) {
		memcpy(f, H.eth, 12);
	} else {
		memset(f, 0xff, 6);
		memcpy(f + 6, "\x02\x70\x63\x69\x00\x99", 6);
	}
	if (kind == 13) {		/* a VLAN tag, then IPv4 */
		h_put16(f + 12, 0x8100);
		h_put16(f + 14, h_rnd() % 4096);
		l3 = 18;
	}
	if (kind >= 9 && kind <= 12)
		v6 = true;
	h_put16(f + l3 - 2, kind == 14 ? 0x0806 : kind == 15 ? h_rnd() :
		v6 ? 0x86dd : 0x0800);
	l4 = l3;
	if (kind < 14)		/* the frame's buffer is larger than any len */
		l4 += h_ip(f + l3, len > l3 ? len - l3 : 0, v6, proto);
	if (kind < 14 && proto == 6) {
		tcp = true;
		h_put16(f + l4, h_rnd());
		h_put16(f + l4 + 2, h_pick(ports, ARRAY_SIZE(ports)));
		for (i = 4; i < 12; i++)	/* seq, ack */
			f[l4 + i] = h_rnd();
		f[l4 + 12] = h_rnd() % 8 ? 5 << 4 : h_rnd() << 4;
		f[l4 + 13] = h_pick(tcp_flags, ARRAY_SIZE(tcp_flags));
		h_put16(f + l4 + 14, h_rnd());
		h_put16(f + l4 + 16, h_rnd());
		h_put16(f + l4 + 18, 0);
	} else if (kind < 14 && proto == 17) {
		h_put16(f + l4, h_rnd());
		h_put16(f + l4 + 2, h_pick(ports, ARRAY_SIZE(ports)));
		h_put16(f + l4 + 4, h_rnd() % 8 ? len - l4 : h_rnd());
		h_put16(f + l4 + 6, h_rnd());
	} else if (kind < 14 && (proto == 1 || proto == 58)) {
		f[l4] = proto == 1 ? 8 : 128;	/* echo request */
		f[l4 + 1] = 0;
	}

	if (tcp && !(h_rnd() % 4)) {
		vh->flags = H_F_NEEDS_CSUM;
		vh->gso_type = (v6 ? H_GSO_TCPV6 : H_GSO_TCPV4) |
			       (h_rnd() % 8 ? 0 : H_GSO_ECN);
		vh->hdr_len = cpu_to_le16(l4 + 20);
		vh->gso_size = cpu_to_le16(1 + h_rnd() % 9000);
		vh->csum_start = cpu_to_le16(l4);
		vh->csum_offset = cpu_to_le16(16);
	} else {
		const u32 flags[] = {
			0, H_F_NEEDS_CSUM, H_F_DATA_VALID,
			H_F_NEEDS_CSUM | H_F_DATA_VALID,
		};
		const u32 gso[] = {
			0, H_GSO_TCPV4, H_GSO_TCPV6, H_GSO_UDP, H_GSO_UDP_L4,
			H_GSO_ECN, H_GSO_TCPV4 | H_GSO_ECN,
			H_GSO_TCPV6 | H_GSO_ECN,
		};
		const u32 sizes[] = {
			0, 1, 2, 8, 536, 1448, 9000, H_GSO_BY_FRAGS, len,
		};
		const u32 offs[] = {
			l4, 0, 1, ETH_HLEN_MIN, l3, len - 2, len - 1, len, 0xffff,
		};
		const u32 csum_offs[] = { 16, 6, 0, 1, 2, 15, 17, len, 0xffff };
		const u32 hdr_lens[] = { 0, l4 + 20, len, len + 1, 0xffff };

		vh->flags = h_pick(flags, ARRAY_SIZE(flags));
		vh->gso_type = h_pick(gso, ARRAY_SIZE(gso));
		vh->hdr_len = cpu_to_le16(h_pick(hdr_lens, ARRAY_SIZE(hdr_lens)));
		vh->gso_size = cpu_to_le16(h_pick(sizes, ARRAY_SIZE(sizes)));
		vh->csum_start = cpu_to_le16(h_pick(offs, ARRAY_SIZE(offs)));
		vh->csum_offset = cpu_to_le16(h_pick(csum_offs,
						     ARRAY_SIZE(csum_offs)));
	}
	return len;
}

/*
 * A tty record's payload in @buf and junk in the header fields the tty
 * ring ignores (vnet, flags other than F_CRC); returns its length: 0, the
 * largest, or any in between.
 */
static u32 h_tty(u8 *buf, struct pcinet_rec *rec)
{
	u8 *vnet = (u8 *)&rec->vnet;
	u32 len, i;

	switch (h_rnd() % 4) {
	case 0:
		len = 0;
		break;
	case 1:
		len = PCINET_TTY_REC_MAX;
		break;
	default:
		len = h_rnd() % (PCINET_TTY_REC_MAX + 1);
		break;
	}
	for (i = 0; i < len; i++)
		buf[i] = h_rnd();
	for (i = 0; i < sizeof(rec->vnet); i++)
		vnet[i] = h_rnd();
	rec->flags = cpu_to_le16(h_rnd() & ~PCINET_REC_F_CRC);
	return len;
}

/*
 * A well-formed record with a correct CRC and hostile content on the ring
 * of channel @c, between the real ones: what no CRC check can stop (a
 * peer that means harm, or a bug above its ring code).  Only while the
 * link is up, and only if it fits: the real traffic's state (a pending
 * record, need_space) is left alone.
 */
static void h_record(int c)
{
	static u8 buf[FRAME_MAX];
	struct chan *ch = &P.ch[c];
	struct pcinet_span sp;
	struct pcinet_rec rec;
	u32 len;
	int size;

	if (!P.up)
		return;
	memset(&rec, 0, sizeof(rec));
	if (c == PCINET_CHAN_NET)
		len = h_frame(buf, &rec.vnet);
	else
		len = h_tty(buf, &rec);
	/* an impossible consumer index is the real producer's to find */
	size = pcinet_tx_reserve(&ch->tx, len, &sp);
	if (size <= 0) {
		H.records_full++;
		return;
	}
	rec.len = cpu_to_le32(len);
	rec.flags |= cpu_to_le16(PCINET_REC_F_CRC);
	rec.crc = cpu_to_le32(rec_crc(&rec, buf, len));
	pcinet_tx_write(&ch->tx, 0, &rec, sizeof(rec));
	pcinet_tx_write(&ch->tx, sizeof(rec), buf, len);
	/* A: in pcinet_tx_commit(), record before prod */
	pcinet_tx_commit(&ch->tx, size);
	/* E: in pcinet_tx_end_batch() */
	if (pcinet_tx_end_batch(&ch->tx))
		ring(pcinet_chan_vector(c));
	H.records++;
}

static void h_write(void)
{
	unsigned int what = h_rnd() % 16;

	if ((H.kinds & H_RECORDS) &&
	    (!(H.kinds & H_GARBAGE) || what % 2)) {
		/* three net records for one tty record */
		h_record(h_rnd() % 4 ? PCINET_CHAN_NET : PCINET_CHAN_TTY);
		H.writes++;
		return;
	}
	if (what < 7) {
		h_ctrl_word();
	} else if (what < 11) {
		h_ring(true);
	} else if (what < 14) {
		h_ring(false);
	} else {
		ring(h_rnd() % PCINET_NR_VEC);
		H.doorbells++;
	}
	H.writes++;
}

static void hostile_begin(u64 now)
{
	H.pending = false;
	H.on = true;
	H.start_ms = now;
	H.end_ms = now + H.secs * 1000ULL;
	H.done = 0;
	H.windows++;
	P.status_dirty = true;
	logmsg("hostile: writing %s for %u s, %u writes/s",
	       H.kinds == H_GARBAGE ? "garbage" : H.kinds == H_RECORDS ?
	       "hostile records" : "garbage and hostile records",
	       H.secs, H.rate);
}

static void hostile_end(void)
{
	H.on = false;
	logmsg("hostile: window over (%llu writes, %llu doorbells, %llu records); restarting",
	       (unsigned long long)H.writes, (unsigned long long)H.doorbells,
	       (unsigned long long)H.records);
	P.resets++;
	P.last_why = "hostile window over";
	link_fresh();
	link_run();
}

/* From the main loop: start, run and end windows; the poll timeout cap. */
static int hostile_run(void)
{
	u64 now = now_ms(), due;
	unsigned int n;

	if (!H.secs)
		return -1;
	if (__atomic_exchange_n(&usr1, 0, __ATOMIC_RELAXED) && !H.on)
		hostile_begin(now);
	if (H.pending && P.first_up_ms && now >= P.first_up_ms + H.after_ms)
		hostile_begin(now);
	if (!H.on)
		return -1;
	if (now >= H.end_ms) {
		hostile_end();
		return -1;
	}
	due = (now - H.start_ms) * H.rate / 1000;
	for (n = 0; H.done < due && n < 4096; n++, H.done++)
		h_write();
	return 1;
}

/* --hostile=SECS[:RATE[:AFTER]]; false if it does not parse. */
static bool hostile_parse(const char *arg)
{
	unsigned long secs, rate = 1000;
	long after = 1000;
	char *end;

	errno = 0;
	secs = strtoul(arg, &end, 10);
	if (*end == ':') {
		rate = strtoul(end + 1, &end, 10);
		if (*end == ':') {
			if (!strcmp(end + 1, "usr1")) {
				after = -1;
				end += strlen(end);
			} else {
				after = (long)(strtod(end + 1, &end) * 1000);
			}
		}
	}
	if (errno || *end || !secs || secs > 3600 || !rate || rate > 1000000 ||
	    after < -1 || after > 3600 * 1000)
		return false;
	H.secs = secs;
	H.rate = rate;
	H.after_ms = (int)after;
	H.pending = after >= 0;
	return true;
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1) {
		__atomic_store_n(&usr1, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&stop_sig, sig, __ATOMIC_RELAXED);
}

static __noreturn void print_usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: pcinet-peer -S SOCKET [-i IFNAME] [-l PTY_LINK] [-s STATUS_FILE]\n"
		"                   [-t PEER_TIMEOUT_MS] [-n NAME] [--slot N]\n"
		"                   [--no-offload] [--no-integrity]\n"
		"                   [--hostile=SECS[:RATE[:AFTER]]]\n"
		"                   [--hostile-kind=garbage|records|all]\n"
		"                   [--blk IMAGE] [--fs DIR:TAG]\n"
		"                   [--blk-fault=no-feature|stale-used|bad-wce|bad-size-once|id=N] [-v]\n"
		"  -S SOCKET        the fabric's (ivshmem server's) unix socket\n"
		"  -i IFNAME        TAP interface name (default pcinet%%d)\n"
		"  -l PTY_LINK      symlink to the tty channel's pty\n"
		"  -s STATUS_FILE   link state and counters, rewritten on change\n"
		"  -t MS            peer timeout (default %d)\n"
		"  -n, --name NAME  the name we publish (default pcinet-peer; at most\n"
		"                   15 of [A-Za-z0-9._-], others become _)\n"
		"  --slot N         the slot number we publish (default 0: unknown)\n"
		"  --no-offload     no checksum/TSO offload on the TAP\n"
		"  --no-integrity   accept net records without a CRC\n"
		"  --hostile=SECS[:RATE[:AFTER]]\n"
		"                   for SECS s, AFTER s (default 1) after the link first\n"
		"                   comes up and on every SIGUSR1, also write garbage\n"
		"                   (RATE writes/s, default 1000) into our control block\n"
		"                   and rings, ring random doorbells; then restart the\n"
		"                   link (AFTER usr1: on SIGUSR1 only)\n"
		"  --hostile-kind=garbage|records|all\n"
		"                   what a hostile window writes: garbage (default),\n"
		"                   records with a correct CRC and hostile content\n"
		"                   (offload headers, frames, tty bytes), or both\n"
		"  --blk IMAGE      serve IMAGE as a virtio-blk device to the peer (the\n"
		"                   virtio channel's device side; qemu-storage-daemon,\n"
		"                   or $PCINET_QSD, is the back end)\n"
		"  --fs DIR:TAG     share DIR as a virtio-fs device with the tag TAG\n"
		"                   (1-36 of [A-Za-z0-9._-]); /usr/lib/qemu/virtiofsd,\n"
		"                   or $PCINET_VIRTIOFSD, is the back end, with\n"
		"                   -o sandbox=$PCINET_VIRTIOFSD_SANDBOX (namespace)\n"
		"  --blk-fault=no-feature|stale-used|bad-wce|bad-size-once|id=N\n"
		"                   a broken device side, for fault tests: offer the\n"
		"                   device without PCINET_F_VIRTIO, put one stale\n"
		"                   used entry into the second session's used ring,\n"
		"                   or publish virtio-blk's wce as 2, or its\n"
		"                   blk_size as 3 in the first offer; id=N: offer\n"
		"                   the --fs device as device ID N\n",
		PCINET_PEER_TIMEOUT_MS);
	exit(status);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "ifname", required_argument, NULL, 'i' },
		{ "link", required_argument, NULL, 'l' },
		{ "status", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "slot", required_argument, NULL, 'L' },
		{ "no-offload", no_argument, NULL, 'O' },
		{ "no-integrity", no_argument, NULL, 'N' },
		{ "hostile", required_argument, NULL, 'H' },
		{ "hostile-kind", required_argument, NULL, 'K' },
		{ "blk", required_argument, NULL, 'B' },
		{ "fs", required_argument, NULL, 'F' },
		{ "blk-fault", required_argument, NULL, 'Q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ }
	};
	struct pollfd pfd[3 + MAX_VEC];
	struct sigaction sa = { .sa_handler = on_signal };
	u64 next_tick, now;
	bool more = false;
	unsigned int v, nfd;
	int c, ret, timeout;
	u64 cnt;
	const char *name = "pcinet-peer";
	unsigned long slot = 0;
	int64_t val;
	char *end;
	int fd;

	P.ifpattern = "pcinet%d";
	P.offload = true;
	P.integrity = true;
	P.timeout_ms = PCINET_PEER_TIMEOUT_MS;
	P.peer_id = -1;
	P.sock = -1;
	H.kinds = H_GARBAGE;
	P.win_fd = -1;
	while ((c = getopt_long(argc, argv, "S:i:l:s:t:n:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'S':
			P.sock_path = optarg;
			break;
		case 'i':
			P.ifpattern = optarg;
			break;
		case 'l':
			P.pty_link = optarg;
			break;
		case 's':
			P.status_path = optarg;
			break;
		case 't':
			P.timeout_ms = atoi(optarg);
			if (P.timeout_ms < 2 * PCINET_TICK_MS)
				print_usage(1);
			break;
		case 'n':
			name = optarg;
			break;
		case 'L':
			errno = 0;
			slot = strtoul(optarg, &end, 0);
			if (errno || *end || !*optarg || slot > UINT32_MAX)
				print_usage(1);
			break;
		case 'O':
			P.offload = false;
			break;
		case 'N':
			P.integrity = false;
			break;
		case 'H':
			if (!hostile_parse(optarg))
				print_usage(1);
			break;
		case 'K':
			if (!strcmp(optarg, "garbage"))
				H.kinds = H_GARBAGE;
			else if (!strcmp(optarg, "records"))
				H.kinds = H_RECORDS;
			else if (!strcmp(optarg, "all"))
				H.kinds = H_GARBAGE | H_RECORDS;
			else
				print_usage(1);
			break;
		case 'B':
			pvio_setup_blk(optarg);
			break;
		case 'F':
			if (pvio_setup_fs(optarg))
				die("--fs %s: not DIR:TAG (see --help)", optarg);
			break;
		case 'Q':
			if (!pvio_fault(optarg))
				print_usage(1);
			break;
		case 'v':
			P.verbose = true;
			break;
		case 'h':
			print_usage(0);
		default:
			print_usage(1);
		}
	}
	if (!P.sock_path || optind != argc)
		print_usage(1);
	pcinet_ident_set(&P.ident, slot, name);

	setvbuf(stdout, NULL, _IOLBF, 0);
	crc32c_init();
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	if (getrandom(&H.rnd, sizeof(H.rnd), 0) != sizeof(H.rnd) || !H.rnd)
		H.rnd = now_ms() | 1;
	signal(SIGPIPE, SIG_IGN);

	net_rx_buf = malloc(FRAME_MAX);
	tty_rx_buf = malloc(PCINET_TTY_REC_MAX);
	P.ch[PCINET_CHAN_NET].out_buf = malloc(FRAME_MAX);
	P.ch[PCINET_CHAN_TTY].out_buf = malloc(PCINET_TTY_REC_MAX);
	if (!net_rx_buf || !tty_rx_buf || !P.ch[0].out_buf || !P.ch[1].out_buf)
		die("out of memory");

	P.tap = tap_open(P.ifpattern, P.ifname, sizeof(P.ifname), P.offload);
	if (P.tap < 0)
		die("TAP %s: %s", P.ifpattern, strerror(-P.tap));
	tap_set_carrier(P.tap, false);
	P.pty = pty_open(P.pty_path, sizeof(P.pty_path), &P.pty_slave);
	if (P.pty < 0)
		die("pty: %s", strerror(-P.pty));
	if (P.pty_link) {
		unlink(P.pty_link);
		if (symlink(P.pty_path, P.pty_link) < 0)
			die("symlink %s: %s", P.pty_link, strerror(errno));
	}

	fabric_connect();
	ret = pvio_start(P.win, P.win_size, P.win_fd, &P.lay, P.side);
	if (ret)
		die("virtio device side: %s", strerror(-ret));
	printf("pcinet-peer: id=%d side=%d ifname=%s pty=%s name=%s slot=%u\n",
	       P.own_id, P.side, P.ifname, P.pty_path, P.ident.name,
	       P.ident.slot);
	link_start();
	status_write();
	next_tick = now_ms() + PCINET_TICK_MS;

	while (!__atomic_load_n(&stop_sig, __ATOMIC_RELAXED)) {
		struct chan *tty = &P.ch[PCINET_CHAN_TTY];

		nfd = 0;
		pfd[nfd++] = (struct pollfd){ .fd = P.sock, .events = POLLIN };
		for (v = 0; v < P.own_nfd; v++)
			pfd[nfd++] = (struct pollfd){ .fd = P.own_efd[v],
						      .events = POLLIN };
		/* the TAP only while it is up (a down TAP polls as an error) */
		pfd[nfd++] = (struct pollfd){
			.fd = P.ch[PCINET_CHAN_NET].out_len ||
			      !(P.chan_open & (1U << PCINET_CHAN_NET)) ? -1 : P.tap,
			.events = POLLIN };
		pfd[nfd] = (struct pollfd){ .fd = P.pty, .events = 0 };
		if (P.up && !tty->out_len)
			pfd[nfd].events |= POLLIN;
		if (tty->in_off < tty->in_len)
			pfd[nfd].events |= POLLOUT;
		nfd++;

		now = now_ms();
		timeout = more ? 0 : next_tick > now ? (int)(next_tick - now) : 0;
		ret = hostile_run();
		if (ret >= 0 && ret < timeout)
			timeout = ret;
		ret = poll(pfd, nfd, timeout);
		if (ret < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (ret < 0)
			continue;

		if (pfd[0].revents) {
			if (recv_msg(&val, &fd)) {
				peer_msg(val, fd);
			} else {
				logmsg("the fabric closed the connection; going on without it");
				close(P.sock);
				P.sock = -1;
			}
		}
		for (v = 0; v < P.own_nfd; v++) {
			if (!(pfd[1 + v].revents & POLLIN))
				continue;
			if (read(P.own_efd[v], &cnt, sizeof(cnt)) != sizeof(cnt))
				continue;
			P.doorbells_in++;
			/* each doorbell the peer rang adds 1 to the count */
			if (v == vio_vector())
				P.vio_doorbells_in += cnt;
			/*
			 * Vector 0 is the link; with fewer vectors than
			 * PCINET_NR_VEC any doorbell means all of them.
			 * Channel doorbells need nothing more than serve().
			 */
			if (v == PCINET_VEC_LINK || P.nvec < PCINET_NR_VEC)
				link_run();
			if (v == PCINET_VEC_VIRTIO || P.nvec <= PCINET_VEC_VIRTIO)
				vio_run();
		}
		now = now_ms();
		if (now >= next_tick) {
			tick();
			vio_run();
			next_tick += PCINET_TICK_MS;
			if (next_tick <= now)	/* we were stopped: no catch-up */
				next_tick = now + PCINET_TICK_MS;
		}
		more = serve();
		if (tty->in_len)
			tty_flush();
	}
	logmsg("stopping on signal %d", stop_sig);
	pvio_stop(vio_call_fd());
	link_stop();
	return 0;
}
