// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/*
 * Userspace tests for the pcinet rings.
 *
 * drivers/net/pcinet/pcinet_ring.c is compiled unmodified next to this
 * file, with pcinet_user.h standing in for the kernel.  Build with ASan
 * and UBSan (see the Makefile): every ring in the unit tests is a heap
 * block of exactly the ring size, so any access outside it is caught.
 *
 *   ring_test                  table-driven unit tests
 *   ring_test --stress [secs]  two processes share one window file and
 *                              run both channels in both directions
 *
 * Output is one "ok - <name>" or "FAIL - <name>: <why>" line per case,
 * "# ..." info lines, and a final "N passed, N failed" line; the exit
 * status is 1 if anything failed.
 *
 * Naming in the unit tests: side P produces, side C consumes.  The ring
 * data lives in C's data inbox.  P writes prod and need_space into C's
 * control inbox (to_c); C writes cons and event into P's control inbox
 * (to_p).  That is exactly how pcinet_link.c wires its views.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pcinet_ring.h"

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define __maybe_unused	__attribute__((__unused__))

#define EPROTO_RET	(-PCINET_EPROTO)
#define REC_HDR		((u32)sizeof(struct pcinet_rec))
#define FUZZ_ITERS	100000
#define SENTINEL	0xa5

/* ------------------------------------------------------------------ */
/* Pseudo-random numbers and payload patterns                          */
/* ------------------------------------------------------------------ */

/* splitmix64 finaliser: a good 64-bit hash */
static u64 mix64(u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* xorshift64; the state must not be zero */
static u64 rnd64(u64 *s)
{
	u64 x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static u32 rnd32(u64 *s)
{
	return (u32)(rnd64(s) >> 32);
}

/* uniform in [0, n), n > 0 */
static u32 rnd_below(u64 *s, u32 n)
{
	return (u32)(((u64)rnd32(s) * n) >> 32);
}

/* Fill @buf with @len bytes that depend only on @seed. */
static void fill(u8 *buf, u32 len, u64 seed)
{
	u64 x = mix64(seed) | 1;
	u32 i;

	for (i = 0; i < len; i += 8) {
		u64 v;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		v = x * 0x2545f4914f6cdd1dull;
		memcpy(buf + i, &v, min(8u, len - i));
	}
}

/* Byte @off of byte stream @id: a displaced or lost byte shows up. */
static u8 sbyte(u32 id, u64 off)
{
	u32 h = (u32)off * 0x9e3779b1u ^ (u32)(off >> 32) * 0x85ebca6bu ^
		id * 0xc2b2ae35u;

	return (u8)(h >> 24 ^ h >> 11);
}

static u32 fnv32(const u8 *p, u32 n)
{
	u32 h = 0x811c9dc5u;

	while (n--)
		h = (h ^ *p++) * 0x01000193u;
	return h;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ */
/* Unit test scaffolding                                               */
/* ------------------------------------------------------------------ */

static char why[512];

static int failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int failf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

/* Fail the current case (return -1) unless @cond holds. */
#define CHECK(cond, fmt, ...)						\
	do {								\
		if (!(cond))						\
			return failf("line %d: %s: " fmt, __LINE__,	\
				     #cond, ##__VA_ARGS__);		\
	} while (0)

/* Propagate a failure from a helper. */
#define TRY(expr)							\
	do {								\
		if ((expr) < 0)						\
			return -1;					\
	} while (0)

/* Scratch buffers, each big enough for the largest net record. */
static u8 buf_tx[PCINET_NET_MAX_LEN + 64];
static u8 buf_rx[PCINET_NET_MAX_LEN + 64];
static u8 buf_ref[PCINET_NET_MAX_LEN + 64];

/**
 * struct fx - a fake window holding one ring and both views of it
 * @inbox_p: control inbox of the producer side (the consumer writes it)
 * @inbox_c: control inbox of the consumer side (the producer writes it)
 * @to_c: &inbox_c->chan[chan]: carries prod and need_space
 * @to_p: &inbox_p->chan[chan]: carries cons and event
 * @data: ring data, a heap block of exactly @size bytes
 * @size: ring size
 * @chan: channel slot used in the control blocks
 * @tx: producer view
 * @rx: consumer view
 * @straddled: records whose payload wrapped at the ring end, as seen by
 *	recv_rec()
 */
struct fx {
	struct pcinet_ctrl *inbox_p;
	struct pcinet_ctrl *inbox_c;
	struct pcinet_chan_ctrl *to_c;
	struct pcinet_chan_ctrl *to_p;
	u8 *data;
	u32 size;
	int chan;
	struct pcinet_tx tx;
	struct pcinet_rx rx;
	u32 straddled;
};

struct tcase;
typedef int (*tcase_fn)(struct fx *f, const struct tcase *tc);

/**
 * struct tcase - one row of the test table
 * @name: printed name; " @<start>" is appended for ring cases
 * @fn: the test; returns 0 or -1 with why[] set
 * @size: ring size; 0 for cases that need no ring
 * @chan: PCINET_CHAN_NET (record ring) or PCINET_CHAN_TTY (byte stream)
 * @start: index both views are fast-forwarded to before @fn runs
 */
struct tcase {
	const char *name;
	tcase_fn fn;
	u32 size;
	int chan;
	u32 start;
};

static void fx_setup(struct fx *f, u32 size, int chan)
{
	memset(f, 0, sizeof(*f));
	f->inbox_p = malloc(sizeof(*f->inbox_p));
	f->inbox_c = malloc(sizeof(*f->inbox_c));
	f->data = malloc(size);
	if (!f->inbox_p || !f->inbox_c || !f->data) {
		perror("malloc");
		exit(2);
	}
	/*
	 * Everything but the four index words of our channel holds a
	 * sentinel, so fx_check_fences() can tell what the ring code wrote.
	 */
	memset(f->inbox_p, SENTINEL, sizeof(*f->inbox_p));
	memset(f->inbox_c, SENTINEL, sizeof(*f->inbox_c));
	memset(f->data, 0xee, size);
	f->size = size;
	f->chan = chan;
	f->to_c = &f->inbox_c->chan[chan];
	f->to_p = &f->inbox_p->chan[chan];
	f->to_c->prod = 0;
	f->to_c->need_space = 0;
	f->to_p->cons = 0;
	f->to_p->event = 0;
	pcinet_tx_init(&f->tx, f->data, size, f->to_c, f->to_p);
	pcinet_rx_init(&f->rx, f->data, size, f->to_p, f->to_c);
}

static void fx_teardown(struct fx *f)
{
	free(f->inbox_p);
	free(f->inbox_c);
	free(f->data);
}

/*
 * Fast-forward the (empty) ring to index @idx, as if @idx bytes had
 * already gone through: local and shared indices agree, the consumer is
 * armed at @idx and nobody waits for space.  This pokes at the views'
 * private fields; it is the only place that does.
 */
static void fx_seek(struct fx *f, u32 idx)
{
	f->tx.prod = idx;
	f->tx.cons = idx;
	f->tx.kick_base = idx;
	f->rx.cons = idx;
	f->rx.prod = idx;
	f->rx.published = idx;
	f->to_c->prod = cpu_to_le32(idx);
	f->to_c->need_space = 0;
	f->to_p->cons = cpu_to_le32(idx);
	f->to_p->event = cpu_to_le32(idx);
}

static u32 fx_align(const struct fx *f)
{
	return f->chan == PCINET_CHAN_NET ? PCINET_REC_ALIGN : 1;
}

/*
 * The ring code may write only prod and need_space of our channel in
 * the consumer's inbox and cons and event in the producer's inbox;
 * everything else in both control blocks must still hold the sentinel.
 */
static int fx_check_fences(struct fx *f)
{
	struct pcinet_ctrl want, got;
	const u32 s32 = 0xa5a5a5a5u;

	memset(&want, SENTINEL, sizeof(want));

	got = *f->inbox_c;
	got.chan[f->chan].prod = s32;
	got.chan[f->chan].need_space = s32;
	CHECK(!memcmp(&got, &want, sizeof(got)),
	      "a word of the consumer's inbox other than prod/need_space changed");

	got = *f->inbox_p;
	got.chan[f->chan].cons = s32;
	got.chan[f->chan].event = s32;
	CHECK(!memcmp(&got, &want, sizeof(got)),
	      "a word of the producer's inbox other than cons/event changed");
	return 0;
}

/* A span must lie in the ring and, if split, be split at its end. */
static int span_ok(const struct fx *f, const struct pcinet_span *sp, u32 len)
{
	const u8 *end = f->data + f->size;

	CHECK(sp->p[0] >= f->data && sp->p[0] < end, "p[0] outside the ring");
	CHECK(sp->len[0] <= (u32)(end - sp->p[0]), "piece 0 runs past the end");
	CHECK(sp->p[1] == f->data, "p[1] not at the ring start");
	CHECK(sp->len[0] + sp->len[1] == len, "pieces %u+%u for %u",
	      sp->len[0], sp->len[1], len);
	CHECK(!sp->len[1] || sp->p[0] + sp->len[0] == end,
	      "split before the ring end");
	return 0;
}

static void rec_hdr(struct pcinet_rec *rec, u32 seq, u32 len)
{
	memset(rec, 0, sizeof(*rec));
	rec->len = cpu_to_le32(len);
	rec->vnet.flags = (u8)seq;
	rec->vnet.gso_type = (u8)(seq >> 8);
	rec->vnet.hdr_len = cpu_to_le16((u16)seq);
	rec->vnet.gso_size = cpu_to_le16((u16)(seq >> 16));
	rec->vnet.csum_start = cpu_to_le16((u16)len);
	rec->vnet.csum_offset = cpu_to_le16((u16)(len >> 16));
}

/*
 * Send record @seq with @len payload bytes, as the net driver would:
 * reserve, header, payload into the span, commit.
 * Return: 1 sent, 0 no room, -1 failure.
 */
static int send_rec(struct fx *f, u32 seq, u32 len)
{
	struct pcinet_span sp;
	struct pcinet_rec rec;
	int size = pcinet_tx_reserve(&f->tx, len, &sp);

	CHECK(size >= 0, "tx_reserve %d", size);
	if (!size) {
		CHECK((u32)pcinet_tx_free(&f->tx) < pcinet_rec_size(len),
		      "record %u (%u bytes) refused with room", seq, len);
		return 0;
	}
	CHECK((u32)size == pcinet_rec_size(len), "tx_reserve %d for %u",
	      size, len);
	TRY(span_ok(f, &sp, len));
	rec_hdr(&rec, seq, len);
	fill(buf_tx, len, seq);
	pcinet_tx_write(&f->tx, 0, &rec, sizeof(rec));
	memcpy(sp.p[0], buf_tx, sp.len[0]);
	memcpy(sp.p[1], buf_tx + sp.len[0], sp.len[1]);
	pcinet_tx_commit(&f->tx, size);
	return 1;
}

/* Like send_rec(), but there must be room. */
static int send_ok(struct fx *f, u32 seq, u32 len)
{
	int r = send_rec(f, seq, len);

	TRY(r);
	CHECK(r == 1, "no room for record %u (%u bytes)", seq, len);
	return 0;
}

/*
 * Receive the next record, which must be record @seq of @len bytes,
 * reading the payload with pcinet_rx_span() if @by_span, else with
 * pcinet_rx_read(), and consume it (without publishing).
 */
static int recv_rec(struct fx *f, u32 seq, u32 len, bool by_span)
{
	struct pcinet_rec rec, want;
	int r;

	r = pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN);
	CHECK(r == (int)pcinet_rec_size(len), "record %u: peek %d, want %u",
	      seq, r, pcinet_rec_size(len));
	rec_hdr(&want, seq, len);
	CHECK(!memcmp(&rec, &want, sizeof(rec)), "record %u: header differs",
	      seq);
	fill(buf_ref, len, seq);
	if (by_span) {
		struct pcinet_span sp;

		pcinet_rx_span(&f->rx, REC_HDR, len, &sp);
		TRY(span_ok(f, &sp, len));
		CHECK(!memcmp(sp.p[0], buf_ref, sp.len[0]) &&
		      !memcmp(sp.p[1], buf_ref + sp.len[0], sp.len[1]),
		      "record %u: payload differs (span %u+%u)", seq,
		      sp.len[0], sp.len[1]);
		if (sp.len[1])
			f->straddled++;
	} else {
		pcinet_rx_read(&f->rx, REC_HDR, buf_rx, len);
		CHECK(!memcmp(buf_rx, buf_ref, len),
		      "record %u: payload differs", seq);
		if (((f->rx.cons + REC_HDR) & (f->size - 1)) + len > f->size)
			f->straddled++;
	}
	pcinet_rx_consume(&f->rx, r);
	return 0;
}

/* Write stream bytes [@off, @off + @len) of stream 0 at the producer. */
static void send_bytes(struct fx *f, u64 off, u32 len, bool by_span)
{
	u32 i;

	if (by_span) {
		struct pcinet_span sp;

		pcinet_tx_span(&f->tx, 0, len, &sp);
		for (i = 0; i < sp.len[0]; i++)
			sp.p[0][i] = sbyte(0, off + i);
		for (i = 0; i < sp.len[1]; i++)
			sp.p[1][i] = sbyte(0, off + sp.len[0] + i);
	} else {
		for (i = 0; i < len; i++)
			buf_tx[i] = sbyte(0, off + i);
		pcinet_tx_write(&f->tx, 0, buf_tx, len);
	}
	pcinet_tx_commit(&f->tx, len);
}

/* Read and check stream bytes [@off, @off + @len) at the consumer. */
static int recv_bytes(struct fx *f, u64 off, u32 len, bool by_span)
{
	u32 i;

	if (by_span) {
		struct pcinet_span sp;

		pcinet_rx_span(&f->rx, 0, len, &sp);
		TRY(span_ok(f, &sp, len));
		for (i = 0; i < sp.len[0]; i++)
			CHECK(sp.p[0][i] == sbyte(0, off + i),
			      "stream byte %" PRIu64, off + i);
		for (i = 0; i < sp.len[1]; i++)
			CHECK(sp.p[1][i] == sbyte(0, off + sp.len[0] + i),
			      "stream byte %" PRIu64, off + sp.len[0] + i);
	} else {
		pcinet_rx_read(&f->rx, 0, buf_rx, len);
		for (i = 0; i < len; i++)
			CHECK(buf_rx[i] == sbyte(0, off + i),
			      "stream byte %" PRIu64, off + i);
	}
	pcinet_rx_consume(&f->rx, len);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Basic cases                                                         */
/* ------------------------------------------------------------------ */

static int t_empty(struct fx *f, const struct tcase *tc)
{
	struct pcinet_rec rec;

	CHECK(pcinet_rx_avail(&f->rx, fx_align(f)) == 0, "");
	CHECK(pcinet_rx_avail(&f->rx, 1) == 0, "");
	if (f->chan == PCINET_CHAN_NET)
		CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) == 0,
		      "");
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");
	CHECK(pcinet_tx_wait_space(&f->tx) == (int)f->size, "");
	pcinet_tx_space_ok(&f->tx);
	CHECK(!pcinet_tx_need_kick(&f->tx, f->tx.prod), "empty batch kicked");
	CHECK(!pcinet_rx_publish(&f->rx), "");
	CHECK(!pcinet_rx_arm(&f->rx), "");
	CHECK(le32_to_cpu(f->to_p->event) == tc->start, "");
	CHECK(le32_to_cpu(f->to_p->cons) == tc->start, "");
	CHECK(le32_to_cpu(f->to_c->prod) == tc->start, "");
	return 0;
}

static int t_rec_size(struct fx *f __maybe_unused,
		      const struct tcase *tc __maybe_unused)
{
	static const u32 tab[][2] = {
		{ 0, 64 }, { 1, 64 }, { 15, 64 }, { 16, 64 }, { 17, 64 },
		{ 63 - REC_HDR, 64 }, { 64 - REC_HDR, 64 },
		{ 65 - REC_HDR, 128 }, { 63, 128 }, { 64, 128 },
		{ 128 - REC_HDR, 128 }, { 129 - REC_HDR, 192 }, { 1500, 1536 },
		{ PCINET_NET_MAX_LEN, 66112 },
	};
	u32 i;

	for (i = 0; i < ARRAY_SIZE(tab); i++)
		CHECK(pcinet_rec_size(tab[i][0]) == tab[i][1],
		      "len %u: %u, want %u", tab[i][0],
		      pcinet_rec_size(tab[i][0]), tab[i][1]);
	return 0;
}

static const u32 rec_lens[] = {
	0, 1, 15, 16, 17, 47, 48, 49, 63, 64, 1500, PCINET_NET_MAX_LEN,
};

/*
 * Every length once into an empty ring, then back out; the free and
 * available counts follow every step, and consumed space comes back
 * only when published.
 */
static int t_rec_lengths(struct fx *f, const struct tcase *tc)
{
	u32 used = 0, unpub = 0, i;

	for (i = 0; i < ARRAY_SIZE(rec_lens); i++) {
		TRY(send_ok(f, i, rec_lens[i]));
		used += pcinet_rec_size(rec_lens[i]);
		CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - used), "");
		CHECK(pcinet_rx_avail(&f->rx, PCINET_REC_ALIGN) == (int)used,
		      "");
		CHECK(le32_to_cpu(f->to_c->prod) == tc->start + used, "");
	}
	for (i = 0; i < ARRAY_SIZE(rec_lens); i++) {
		u32 rs = pcinet_rec_size(rec_lens[i]);

		TRY(recv_rec(f, i, rec_lens[i], i & 1));
		unpub += rs;
		/* consumed but not published: not free yet */
		CHECK(le32_to_cpu(f->to_p->cons) == f->rx.cons - unpub, "");
		CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - used), "");
		CHECK(pcinet_rx_avail(&f->rx, PCINET_REC_ALIGN) ==
		      (int)(used - unpub), "");
		if (i % 3 == 2) {
			CHECK(!pcinet_rx_publish(&f->rx), "");
			used -= unpub;
			unpub = 0;
			CHECK(le32_to_cpu(f->to_p->cons) == f->rx.cons, "");
			CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - used),
			      "");
		}
	}
	pcinet_rx_publish(&f->rx);
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");
	CHECK(pcinet_rx_avail(&f->rx, PCINET_REC_ALIGN) == 0, "");
	return 0;
}

/*
 * Push records with lengths @lens[i % @n] through the ring until @total
 * bytes went round, keeping the ring as full as it gets; every record is
 * checked byte for byte and the accounting after every step.
 */
static int pipe_records(struct fx *f, const u32 *lens, u32 n, u32 total,
			u32 *passed)
{
	u32 tx_seq = 0, rx_seq = 0, queued = 0, unpub = 0, k;
	struct pcinet_rec rec;
	int r;

	*passed = 0;
	while (*passed < total || rx_seq != tx_seq) {
		u32 len = lens[tx_seq % n];

		if (*passed < total) {
			r = send_rec(f, tx_seq, len);
			TRY(r);
			if (r) {
				queued += pcinet_rec_size(len);
				tx_seq++;
				CHECK(pcinet_tx_free(&f->tx) ==
				      (int)(f->size - queued), "");
				CHECK(pcinet_rx_avail(&f->rx, PCINET_REC_ALIGN)
				      == (int)queued, "");
				continue;
			}
			CHECK(f->size - queued < pcinet_rec_size(len),
			      "refused record %u with room", tx_seq);
		}
		/* full, or done sending: take one to three records */
		for (k = 0; k <= rx_seq % 3 && rx_seq != tx_seq; k++) {
			u32 rlen = lens[rx_seq % n];

			TRY(recv_rec(f, rx_seq, rlen, rx_seq & 1));
			queued -= pcinet_rec_size(rlen);
			unpub += pcinet_rec_size(rlen);
			rx_seq++;
		}
		CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - queued - unpub),
		      "unpublished space counted free");
		pcinet_rx_publish(&f->rx);
		*passed += unpub;
		unpub = 0;
		CHECK(le32_to_cpu(f->to_p->cons) == f->rx.cons, "");
		CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - queued), "");
	}
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) == 0, "");
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");
	return 0;
}

/* Check that all indices moved by @passed from the start, wrapping. */
static int check_moved(struct fx *f, const struct tcase *tc, u32 passed)
{
	u32 end = tc->start + passed;

	CHECK(f->tx.prod == end && f->rx.cons == end, "");
	CHECK(le32_to_cpu(f->to_c->prod) == end, "");
	CHECK(le32_to_cpu(f->to_p->cons) == end, "");
	if (tc->start >= 0xfff00000u)
		CHECK(end < tc->start, "the index did not wrap at 2^32");
	return 0;
}

/* Many records of every length, several times round the ring. */
static int t_rec_pipe(struct fx *f, const struct tcase *tc)
{
	u32 passed;

	TRY(pipe_records(f, rec_lens, ARRAY_SIZE(rec_lens), 4 * f->size,
			 &passed));
	TRY(check_moved(f, tc, passed));
	CHECK(f->straddled >= 3, "only %u payloads wrapped", f->straddled);
	return 0;
}

/*
 * A full ring: records until the next does not fit; nothing is
 * overwritten; space comes back after consume + publish.
 */
static int t_rec_full(struct fx *f, const struct tcase *tc __maybe_unused)
{
	u32 n = f->size / pcinet_rec_size(100), i;
	int r;

	for (i = 0; i < n; i++)
		TRY(send_ok(f, i, 100));
	CHECK(pcinet_tx_free(&f->tx) == 0, "");
	r = send_rec(f, n, 0);
	TRY(r);
	CHECK(r == 0, "sent into a full ring");
	CHECK(pcinet_tx_wait_space(&f->tx) == 0, "");
	pcinet_tx_space_ok(&f->tx);
	CHECK(pcinet_rx_avail(&f->rx, PCINET_REC_ALIGN) == (int)f->size, "");

	/* one out, one in: the new one reuses the oldest slot */
	TRY(recv_rec(f, 0, 100, false));
	CHECK(pcinet_tx_free(&f->tx) == 0, "freed before publish");
	pcinet_rx_publish(&f->rx);
	CHECK(pcinet_tx_free(&f->tx) == (int)pcinet_rec_size(100), "");
	TRY(send_ok(f, n, 100));
	CHECK(pcinet_tx_free(&f->tx) == 0, "");
	for (i = 1; i <= n; i++)
		TRY(recv_rec(f, i, 100, i & 1));
	pcinet_rx_publish(&f->rx);
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");

	/* uneven sizes: 3 x 1152 leaves 640, which takes 640 - REC_HDR */
	CHECK(f->size == 4096, "case assumes a 4 KiB ring");
	for (i = 0; i < 3; i++)
		TRY(send_ok(f, 100 + i, 1100));
	CHECK(pcinet_tx_free(&f->tx) == 640, "");
	r = send_rec(f, 103, 641 - REC_HDR);
	TRY(r);
	CHECK(r == 0, "a 704-byte record went into 640 bytes");
	TRY(send_ok(f, 103, 640 - REC_HDR));
	CHECK(pcinet_tx_free(&f->tx) == 0, "");
	for (i = 0; i < 3; i++)
		TRY(recv_rec(f, 100 + i, 1100, i & 1));
	TRY(recv_rec(f, 103, 640 - REC_HDR, true));
	pcinet_rx_publish(&f->rx);
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");
	return 0;
}

/*
 * A record whose payload straddles the ring end: check the span pieces
 * on both sides and the raw bytes in the ring.  The case's start index
 * puts the header in the last 64-byte slot of the ring.
 */
static int t_rec_straddle(struct fx *f, const struct tcase *tc)
{
	static const u32 lens[] = {
		200, 64 - REC_HDR, 65 - REC_HDR, 0, 4096 - 64 - REC_HDR
	};
	struct pcinet_span sp;
	u32 i, tail = 64 - REC_HDR;	/* payload bytes before the ring end */

	CHECK((tc->start & (f->size - 1)) == f->size - 64,
	      "case needs the header in the last slot");
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		u32 len = lens[i], first = min(len, tail);

		fx_seek(f, tc->start);
		pcinet_tx_span(&f->tx, REC_HDR, len, &sp);
		TRY(span_ok(f, &sp, len));
		CHECK(len == 0 || sp.p[0] == f->data + f->size - tail, "");
		CHECK(sp.len[0] == first && sp.len[1] == len - first,
		      "len %u: pieces %u+%u", len, sp.len[0], sp.len[1]);
		/* past the wrap, a span is one piece from the start */
		pcinet_tx_span(&f->tx, 64, 10, &sp);
		CHECK(sp.p[0] == f->data && sp.len[0] == 10 && !sp.len[1], "");

		TRY(send_ok(f, i, len));
		/* raw check, independent of the ring code */
		fill(buf_ref, len, i);
		CHECK(!memcmp(f->data + f->size - tail, buf_ref, first), "");
		CHECK(!memcmp(f->data, buf_ref + first, len - first), "");

		pcinet_rx_span(&f->rx, REC_HDR, len, &sp);
		CHECK(sp.len[0] == first && sp.len[1] == len - first, "");
		TRY(recv_rec(f, i, len, i & 1));
		pcinet_rx_publish(&f->rx);

		/* the next record's header is at the start of the ring */
		TRY(send_ok(f, 1000 + i, 7));
		CHECK(((f->tx.prod - pcinet_rec_size(7)) & (f->size - 1)) ==
		      pcinet_rec_size(len) - 64, "");
		TRY(recv_rec(f, 1000 + i, 7, false));
		pcinet_rx_publish(&f->rx);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Byte stream (tty channel)                                           */
/* ------------------------------------------------------------------ */

/*
 * Random chunk sizes in and out, random publish points, until @total
 * bytes went through; checks the accounting and the byte sequence.
 */
static int pipe_bytes(struct fx *f, u32 total, u64 seed, u32 *passed)
{
	u64 rs = seed | 1, wr = 0, rd = 0, pub = 0;
	u32 maxc = f->size + f->size / 2;

	*passed = 0;
	while (pub < total) {
		if (wr < total && (rnd32(&rs) & 1)) {
			int room = pcinet_tx_free(&f->tx);
			u32 n = 1 + rnd_below(&rs, maxc);

			CHECK(room == (int)(f->size - (wr - pub)), "tx_free %d",
			      room);
			n = min(n, (u32)room);
			n = min(n, (u32)(total - wr));
			if (!n)
				continue;
			send_bytes(f, wr, n, rnd32(&rs) & 1);
			wr += n;
		} else {
			int avail = pcinet_rx_avail(&f->rx, 1);
			u32 n = 1 + rnd_below(&rs, maxc);

			CHECK(avail == (int)(wr - rd), "rx_avail %d", avail);
			n = min(n, (u32)avail);
			if (n) {
				TRY(recv_bytes(f, rd, n, rnd32(&rs) & 1));
				rd += n;
			}
			if (rd != pub && (!n || (rnd32(&rs) & 1))) {
				pcinet_rx_publish(&f->rx);
				pub = rd;
			}
		}
	}
	*passed = (u32)pub;
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");
	CHECK(pcinet_rx_avail(&f->rx, 1) == 0, "");
	return 0;
}

static int t_bytes_pipe(struct fx *f, const struct tcase *tc)
{
	u32 passed;

	TRY(pipe_bytes(f, 4 * f->size, tc->start ^ 0x5eed, &passed));
	TRY(check_moved(f, tc, passed));
	return 0;
}

/* ------------------------------------------------------------------ */
/* Doorbells: event index and need_space                               */
/* ------------------------------------------------------------------ */

static int t_kick(struct fx *f, const struct tcase *tc)
{
	u32 s = tc->start, r1 = pcinet_rec_size(10), old, i;

	/* the idle consumer arms at its cons and goes to sleep */
	CHECK(!pcinet_rx_arm(&f->rx), "nothing was published");
	CHECK(le32_to_cpu(f->to_p->event) == s, "");

	/* one record: the sleeper needs a kick */
	old = f->tx.prod;
	TRY(send_ok(f, 0, 10));
	CHECK(pcinet_tx_need_kick(&f->tx, old), "sleeping consumer not kicked");
	CHECK(!pcinet_tx_need_kick(&f->tx, f->tx.prod), "empty batch kicked");

	/* kicked, the consumer polls with its event behind: no more kicks */
	old = f->tx.prod;
	TRY(send_ok(f, 1, 10));
	CHECK(!pcinet_tx_need_kick(&f->tx, old), "polling consumer kicked");

	/* it takes one record, arms, and sees the second one: poll on */
	TRY(recv_rec(f, 0, 10, false));
	CHECK(pcinet_rx_arm(&f->rx), "arm missed a published record");
	CHECK(le32_to_cpu(f->to_p->event) == s + r1, "");
	/* a producer deciding now about its last batch would kick */
	CHECK(pcinet_tx_need_kick(&f->tx, s + r1), "");
	TRY(recv_rec(f, 1, 10, true));
	pcinet_rx_publish(&f->rx);

	/* caught up: arm says sleep, the event sits at prod */
	CHECK(!pcinet_rx_arm(&f->rx), "");
	CHECK(le32_to_cpu(f->to_p->event) == s + 2 * r1, "");
	CHECK(!pcinet_tx_need_kick(&f->tx, s + r1),
	      "consumer saw the whole batch, yet kicked");

	/* a batch of three is kicked once, at the end */
	old = f->tx.prod;
	for (i = 0; i < 3; i++)
		TRY(send_ok(f, 2 + i, 10));
	CHECK(pcinet_tx_need_kick(&f->tx, old), "");

	/* the consumer keeps polling and never re-arms: no kicks */
	for (i = 0; i < 3; i++)
		TRY(recv_rec(f, 2 + i, 10, false));
	pcinet_rx_publish(&f->rx);
	for (i = 0; i < 8; i++) {
		old = f->tx.prod;
		TRY(send_ok(f, 5 + i, 10));
		CHECK(!pcinet_tx_need_kick(&f->tx, old), "batch %u kicked", i);
		TRY(recv_rec(f, 5 + i, 10, false));
		pcinet_rx_publish(&f->rx);
	}

	/* it arms again when empty: the next batch kicks again */
	CHECK(!pcinet_rx_arm(&f->rx), "");
	old = f->tx.prod;
	TRY(send_ok(f, 13, 10));
	TRY(send_ok(f, 14, 10));
	CHECK(pcinet_tx_need_kick(&f->tx, old), "");
	CHECK(!pcinet_tx_need_kick(&f->tx, old + r1),
	      "second half of the batch kicked");

	/* an event half the index space behind, or ahead of prod: no kick */
	f->to_p->event = cpu_to_le32(f->tx.prod - 0x80000000u);
	CHECK(!pcinet_tx_need_kick(&f->tx, old), "");
	f->to_p->event = cpu_to_le32(f->tx.prod + 64);
	CHECK(!pcinet_tx_need_kick(&f->tx, old), "");
	f->to_p->event = cpu_to_le32(f->tx.prod);
	CHECK(!pcinet_tx_need_kick(&f->tx, old), "");
	f->to_p->event = cpu_to_le32(f->tx.prod - 1);
	CHECK(pcinet_tx_need_kick(&f->tx, old), "");
	/* the window is [old_prod, prod): both ends exact */
	f->to_p->event = cpu_to_le32(old);
	CHECK(pcinet_tx_need_kick(&f->tx, old), "");
	f->to_p->event = cpu_to_le32(old - 1);
	CHECK(!pcinet_tx_need_kick(&f->tx, old), "event before the batch");
	f->to_p->event = cpu_to_le32(old - r1);
	CHECK(!pcinet_tx_need_kick(&f->tx, old), "event before the batch");
	return 0;
}

static int t_need_space(struct fx *f, const struct tcase *tc __maybe_unused)
{
	u32 n = f->size / pcinet_rec_size(100), i;

	CHECK(!pcinet_rx_publish(&f->rx), "nobody waits yet");
	for (i = 0; i < n; i++)
		TRY(send_ok(f, i, 100));

	/* full: the producer asks for a doorbell */
	CHECK(pcinet_tx_wait_space(&f->tx) == 0, "");
	CHECK(le32_to_cpu(f->to_c->need_space) == 1, "");

	/* every publish while the flag is up asks for a kick */
	TRY(recv_rec(f, 0, 100, false));
	CHECK(pcinet_rx_publish(&f->rx), "waiting producer not kicked");
	CHECK(pcinet_tx_free(&f->tx) == (int)pcinet_rec_size(100), "");
	CHECK(pcinet_tx_wait_space(&f->tx) == (int)pcinet_rec_size(100), "");
	TRY(recv_rec(f, 1, 100, false));
	CHECK(pcinet_rx_publish(&f->rx), "");

	/* the producer has room again and withdraws its request */
	pcinet_tx_space_ok(&f->tx);
	CHECK(le32_to_cpu(f->to_c->need_space) == 0, "");
	TRY(recv_rec(f, 2, 100, false));
	CHECK(!pcinet_rx_publish(&f->rx), "kicked after space_ok");

	/* any nonzero value from the peer counts as set */
	f->to_c->need_space = cpu_to_le32(0xdeadbeef);
	CHECK(pcinet_rx_publish(&f->rx), "");
	pcinet_tx_space_ok(&f->tx);
	CHECK(!pcinet_rx_publish(&f->rx), "");
	return 0;
}

/* ------------------------------------------------------------------ */
/* The channel view: kick base, give-back, reserve                     */
/* ------------------------------------------------------------------ */

/* pcinet_tx_end_batch(): the kick decision, with the kick base. */
static int t_end_batch(struct fx *f, const struct tcase *tc)
{
	u32 s = tc->start, r1 = pcinet_rec_size(10), i;
	unsigned long mb;

	/* nothing published: no doorbell, and not even a barrier */
	mb = pcinet_user_mb_count;
	CHECK(!pcinet_tx_end_batch(&f->tx), "empty batch kicked");
	CHECK(pcinet_user_mb_count == mb, "early-out issued a barrier");
	CHECK(f->tx.kick_base == s, "");

	/* the consumer sleeps at s: the first batch kicks, then nothing new */
	CHECK(!pcinet_rx_arm(&f->rx), "");
	TRY(send_ok(f, 0, 10));
	mb = pcinet_user_mb_count;
	CHECK(pcinet_tx_end_batch(&f->tx), "sleeping consumer not kicked");
	CHECK(pcinet_user_mb_count == mb + 1, "kick decision without E");
	CHECK(f->tx.kick_base == s + r1, "kick base not moved");
	mb = pcinet_user_mb_count;
	CHECK(!pcinet_tx_end_batch(&f->tx), "nothing new, yet kicked");
	CHECK(pcinet_user_mb_count == mb, "early-out issued a barrier");

	/* it polls (its event stays behind): no kick, the base moves on */
	TRY(send_ok(f, 1, 10));
	TRY(send_ok(f, 2, 10));
	CHECK(!pcinet_tx_end_batch(&f->tx), "polling consumer kicked");
	CHECK(f->tx.kick_base == s + 3 * r1, "");

	/* it drains, gives back, arms and sleeps */
	for (i = 0; i < 3; i++)
		TRY(recv_rec(f, i, 10, i & 1));
	CHECK(!pcinet_rx_give_back(&f->rx), "");
	CHECK(!pcinet_rx_arm(&f->rx), "");

	/* records committed without a decision belong to the next batch */
	TRY(send_ok(f, 3, 10));
	TRY(send_ok(f, 4, 10));
	CHECK(pcinet_tx_end_batch(&f->tx),
	      "records without a decision lost their doorbell");
	CHECK(f->tx.kick_base == s + 5 * r1, "");

	/* the consumer armed behind the base: the old batch kicks no more */
	f->to_p->event = cpu_to_le32(s + 4 * r1);
	TRY(send_ok(f, 5, 10));
	CHECK(!pcinet_tx_end_batch(&f->tx), "event before the batch kicked");

	/* a reset starts the base over at zero */
	pcinet_tx_reset(&f->tx);
	CHECK(f->tx.kick_base == 0, "");
	mb = pcinet_user_mb_count;
	CHECK(!pcinet_tx_end_batch(&f->tx), "");
	CHECK(pcinet_user_mb_count == mb, "");
	return 0;
}

/* pcinet_rx_give_back(), _due(), and rx_refresh() after them. */
static int t_give_back(struct fx *f, const struct tcase *tc)
{
	u32 s = tc->start, r1 = pcinet_rec_size(100), eighth = f->size / 8;
	u32 n = f->size / r1, i, sent = 0;
	unsigned long mb;

	/* nothing consumed: nothing published, no barrier, no kick */
	mb = pcinet_user_mb_count;
	CHECK(!pcinet_rx_give_back(&f->rx), "");
	CHECK(pcinet_user_mb_count == mb, "early-out issued a barrier");
	CHECK(!pcinet_rx_give_back_due(&f->rx), "");

	/* a full ring and a producer waiting for room */
	for (i = 0; i < n; i++)
		TRY(send_ok(f, i, 100));
	CHECK(pcinet_tx_wait_space(&f->tx) == (int)(f->size - n * r1), "");

	/* consumed, not given back: the producer does not see it yet */
	TRY(recv_rec(f, 0, 100, false));
	CHECK(le32_to_cpu(f->to_p->cons) == s, "consumed is not published");
	CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - n * r1), "");
	pcinet_rx_refresh(&f->rx);
	CHECK(le32_to_cpu(f->to_p->cons) == s,
	      "refresh released an unpublished index");

	/* due only from an eighth of the ring on */
	for (i = 1; f->rx.cons - s < eighth; i++) {
		CHECK(!pcinet_rx_give_back_due(&f->rx), "due at %u bytes",
		      f->rx.cons - s);
		TRY(recv_rec(f, i, 100, i & 1));
	}
	CHECK(pcinet_rx_give_back_due(&f->rx), "not due at %u of %u",
	      f->rx.cons - s, f->size);

	/* giving back publishes cons (C) and, with need_space, kicks (H) */
	mb = pcinet_user_mb_count;
	CHECK(pcinet_rx_give_back(&f->rx), "waiting producer not kicked");
	CHECK(pcinet_user_mb_count == mb + 1, "give-back without H");
	CHECK(le32_to_cpu(f->to_p->cons) == f->rx.cons, "");
	CHECK(f->rx.published == f->rx.cons, "");
	CHECK(!pcinet_rx_give_back_due(&f->rx), "");
	CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - (n - i) * r1), "");

	/* again with nothing new: no second kick */
	CHECK(!pcinet_rx_give_back(&f->rx), "nothing new, yet kicked");

	/* refresh writes back exactly what was published */
	f->to_p->cons = cpu_to_le32(0xdeadbeef);
	pcinet_rx_refresh(&f->rx);
	CHECK(le32_to_cpu(f->to_p->cons) == f->rx.cons, "refresh");

	/* the producer withdrew its request: give-backs publish, no kick */
	pcinet_tx_space_ok(&f->tx);
	TRY(recv_rec(f, i, 100, false));
	CHECK(!pcinet_rx_give_back(&f->rx), "kicked after space_ok");
	CHECK(le32_to_cpu(f->to_p->cons) == f->rx.cons, "");
	sent = n;
	for (i++; i < sent; i++)
		TRY(recv_rec(f, i, 100, i & 1));
	CHECK(!pcinet_rx_give_back(&f->rx), "");
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");

	/* a reset forgets what was published */
	pcinet_rx_reset(&f->rx);
	CHECK(f->rx.published == 0 && !f->to_p->cons, "");
	return 0;
}

/* pcinet_tx_reserve() and pcinet_tx_left(): room, the span, a full ring. */
static int t_reserve(struct fx *f, const struct tcase *tc)
{
	u32 s = tc->start, adv, tail, len, i;
	struct pcinet_span sp;
	int r;

	/* the empty ring: any record up to the ring fits, the span after
	 * the header; one larger than the ring never does
	 */
	r = pcinet_tx_reserve(&f->tx, 0, &sp);
	CHECK(r == (int)pcinet_rec_size(0), "reserve(0) = %d", r);
	CHECK(sp.len[0] == 0 && sp.len[1] == 0, "");
	r = pcinet_tx_reserve(&f->tx, f->size - REC_HDR, &sp);
	CHECK(r == (int)f->size, "the whole ring: %d", r);
	TRY(span_ok(f, &sp, f->size - REC_HDR));
	CHECK(pcinet_tx_reserve(&f->tx, f->size - REC_HDR + 1, &sp) == 0, "");
	CHECK(pcinet_tx_reserve(&f->tx, f->size, &sp) == 0, "");
	CHECK(pcinet_tx_reserve(&f->tx, 0xffffffffu, &sp) == 0,
	      "a huge length wrapped to a small record");
	CHECK(pcinet_tx_left(&f->tx) == f->size, "");
	CHECK(f->tx.prod == s && le32_to_cpu(f->to_c->prod) == s,
	      "reserve published something");

	/* to the last slot: the span starts after the header and wraps */
	adv = (f->size - 64 - (s & (f->size - 1))) & (f->size - 1);
	if (adv) {
		TRY(send_ok(f, 1000, adv - REC_HDR));
		TRY(recv_rec(f, 1000, adv - REC_HDR, false));
		CHECK(!pcinet_rx_give_back(&f->rx), "");
	}
	tail = 64 - REC_HDR;
	len = tail + 100;
	r = pcinet_tx_reserve(&f->tx, len, &sp);
	CHECK(r == (int)pcinet_rec_size(len), "");
	TRY(span_ok(f, &sp, len));
	CHECK(sp.p[0] == f->data + f->size - tail, "");
	CHECK(sp.len[0] == tail && sp.len[1] == 100, "pieces %u+%u",
	      sp.len[0], sp.len[1]);
	TRY(send_ok(f, 0, len));
	CHECK(pcinet_tx_left(&f->tx) == f->size - pcinet_rec_size(len), "");
	TRY(recv_rec(f, 0, len, true));
	CHECK(!pcinet_rx_give_back(&f->rx), "");

	/* fill the ring: reserve says 0 at the end, exactly */
	for (i = 0; pcinet_tx_left(&f->tx) >= pcinet_rec_size(100); i++)
		TRY(send_ok(f, 1 + i, 100));
	len = pcinet_tx_left(&f->tx);
	if (len >= pcinet_rec_size(0)) {
		r = pcinet_tx_reserve(&f->tx, len - REC_HDR + 1, &sp);
		CHECK(r == 0, "a record past the free space: %d", r);
		r = pcinet_tx_reserve(&f->tx, len - REC_HDR, &sp);
		CHECK(r == (int)len, "the last free bytes: %d of %u", r, len);
		TRY(send_ok(f, 1 + i++, len - REC_HDR));
	}
	CHECK(pcinet_tx_left(&f->tx) == 0, "");
	CHECK(pcinet_tx_reserve(&f->tx, 0, &sp) == 0, "reserved in a full ring");

	/* consumed is not free until given back; then it is again */
	TRY(recv_rec(f, 1, 100, false));
	CHECK(pcinet_tx_reserve(&f->tx, 0, &sp) == 0, "freed before give-back");
	pcinet_rx_give_back(&f->rx);
	CHECK(pcinet_tx_reserve(&f->tx, 100, &sp) == (int)pcinet_rec_size(100),
	      "");
	CHECK(pcinet_tx_left(&f->tx) == pcinet_rec_size(100), "");

	/* an impossible consumer index is an error, not room */
	f->to_p->cons = cpu_to_le32(f->tx.prod + 64);
	CHECK(pcinet_tx_reserve(&f->tx, 0, &sp) == EPROTO_RET, "");
	return 0;
}

/* ------------------------------------------------------------------ */
/* A broken peer                                                       */
/* ------------------------------------------------------------------ */

/*
 * Act as a broken producer: write a record header claiming @len at the
 * consumer index and publish prod = cons + @delta.
 */
static void plant(struct fx *f, u32 len, u32 delta)
{
	struct pcinet_rec rec;

	rec_hdr(&rec, 0, len);
	memcpy(f->data + (f->rx.cons & (f->size - 1)), &rec, sizeof(rec));
	f->to_c->prod = cpu_to_le32(f->rx.cons + delta);
}

/* rx_avail (and peek on a record ring) must reject the current prod. */
static int rx_rejects(struct fx *f, u32 align)
{
	struct pcinet_rec rec;
	u32 cons = f->rx.cons;
	int r;

	r = pcinet_rx_avail(&f->rx, align);
	CHECK(r == EPROTO_RET, "prod %#x, cons %#x: avail %d",
	      le32_to_cpu(f->to_c->prod), cons, r);
	if (align == PCINET_REC_ALIGN) {
		r = pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN);
		CHECK(r == EPROTO_RET, "prod %#x, cons %#x: peek %d",
		      le32_to_cpu(f->to_c->prod), cons, r);
	}
	CHECK(f->rx.cons == cons, "cons moved");
	return 0;
}

static int t_bad_prod_behind(struct fx *f, const struct tcase *tc)
{
	u32 a = fx_align(f), s = tc->start;

	f->to_c->prod = cpu_to_le32(s - a);
	TRY(rx_rejects(f, a));
	f->to_c->prod = cpu_to_le32(s - 0x80000000u);
	TRY(rx_rejects(f, a));
	f->to_c->prod = cpu_to_le32(s - f->size);
	TRY(rx_rejects(f, a));

	/* after the consumer moved on, the old prod is behind it */
	f->to_c->prod = cpu_to_le32(s);
	if (a == 1) {
		send_bytes(f, 0, 100, false);
		TRY(recv_bytes(f, 0, 60, false));
	} else {
		TRY(send_ok(f, 0, 100));
		TRY(send_ok(f, 1, 100));
		TRY(recv_rec(f, 0, 100, false));
	}
	f->to_c->prod = cpu_to_le32(s);
	TRY(rx_rejects(f, a));

	/* the view is intact: with the true prod back, all is well */
	f->to_c->prod = cpu_to_le32(f->tx.prod);
	CHECK(pcinet_rx_avail(&f->rx, a) == (int)(f->tx.prod - f->rx.cons),
	      "");
	return 0;
}

static int t_bad_prod_ahead(struct fx *f, const struct tcase *tc)
{
	u32 a = fx_align(f), s = tc->start;

	f->to_c->prod = cpu_to_le32(s + f->size + a);
	TRY(rx_rejects(f, a));
	f->to_c->prod = cpu_to_le32(s + 2 * f->size);
	TRY(rx_rejects(f, a));
	f->to_c->prod = cpu_to_le32(s + 0x7fffffffu + 1 - a);
	TRY(rx_rejects(f, a));
	/* exactly one ring ahead is a full ring, not an error */
	f->to_c->prod = cpu_to_le32(s + f->size);
	CHECK(pcinet_rx_avail(&f->rx, a) == (int)f->size, "");
	return 0;
}

static int t_bad_prod_misaligned(struct fx *f,
				 const struct tcase *tc __maybe_unused)
{
	static const u32 deltas[] = { 1, 8, 16, 63, 65, 100, 4095 };
	u32 i;

	for (i = 0; i < ARRAY_SIZE(deltas); i++) {
		plant(f, 0, deltas[i]);
		TRY(rx_rejects(f, PCINET_REC_ALIGN));
		/* the same prod is fine for a byte-stream reader */
		CHECK(pcinet_rx_avail(&f->rx, 1) == (int)deltas[i], "");
	}
	return 0;
}

/* A header claiming more than the caller accepts. */
static int t_bad_len_max(struct fx *f, const struct tcase *tc __maybe_unused)
{
	struct pcinet_rec rec;

	plant(f, 1501, pcinet_rec_size(1501));
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, 1500) == EPROTO_RET, "");
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, 1501) ==
	      (int)pcinet_rec_size(1501), "");
	plant(f, PCINET_NET_MAX_LEN + 1,
	      pcinet_rec_size(PCINET_NET_MAX_LEN + 1));
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) ==
	      EPROTO_RET, "");
	plant(f, 1, 64);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, 0) == EPROTO_RET, "");
	plant(f, 0, 64);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, 0) == 64, "");
	return 0;
}

/* A header claiming more than was published. */
static int t_bad_len_avail(struct fx *f, const struct tcase *tc __maybe_unused)
{
	struct pcinet_rec rec;
	u32 big = f->size - REC_HDR;

	plant(f, 100, 64);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) ==
	      EPROTO_RET, "");
	plant(f, 100, 128);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) == 128, "");
	plant(f, 65 - REC_HDR, 64);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) ==
	      EPROTO_RET, "");
	plant(f, 64 - REC_HDR, 64);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) == 64, "");

	/* a record filling the whole ring is fine; one byte more is not */
	plant(f, big, f->size);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, f->size) == (int)f->size, "");
	plant(f, big + 1, f->size);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, f->size) == EPROTO_RET, "");
	plant(f, f->size, f->size);
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, f->size) == EPROTO_RET, "");

	/* a good record, then a bad one behind it */
	f->to_c->prod = cpu_to_le32(f->rx.cons);
	TRY(send_ok(f, 0, 30));
	rec_hdr(&rec, 0, 500);
	memcpy(f->data + (f->tx.prod & (f->size - 1)), &rec, sizeof(rec));
	f->to_c->prod = cpu_to_le32(f->tx.prod + 128);
	TRY(recv_rec(f, 0, 30, false));
	CHECK(pcinet_rx_peek_rec(&f->rx, &rec, PCINET_NET_MAX_LEN) ==
	      EPROTO_RET, "");
	return 0;
}

/* Huge lengths, including ones that overflow u32 arithmetic. */
static int t_bad_len_huge(struct fx *f, const struct tcase *tc __maybe_unused)
{
	static const u32 lens[] = {
		0xffffffffu, 0xfffffff0u, 0xffffffc1u, 0xffffffc0u,
		0xffffffb1u, 0xffffffb0u, 0x80000000u, 0x7fffffffu,
		0x7fffffc0u, 0x10000000u,
	};
	const u32 maxes[] = { PCINET_NET_MAX_LEN, f->size, 0x7fffffffu };
	struct pcinet_rec rec;
	u32 i, j;
	int r;

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		plant(f, lens[i], f->size);
		for (j = 0; j < ARRAY_SIZE(maxes); j++) {
			r = pcinet_rx_peek_rec(&f->rx, &rec, maxes[j]);
			CHECK(r == EPROTO_RET, "len %#x, max_len %#x: %d",
			      lens[i], maxes[j], r);
		}
	}
	return 0;
}

/* The producer must reject a consumer index that is not in [cons, prod]. */
static int t_bad_cons(struct fx *f, const struct tcase *tc)
{
	u32 s = tc->start, a = fx_align(f), r1, i;
	u32 bad[6];

	/* three units out, two consumed and published */
	if (a == 1) {
		r1 = 100;
		send_bytes(f, 0, 3 * r1, false);
		TRY(recv_bytes(f, 0, 2 * r1, true));
	} else {
		r1 = pcinet_rec_size(100);
		for (i = 0; i < 3; i++)
			TRY(send_ok(f, i, 100));
		for (i = 0; i < 2; i++)
			TRY(recv_rec(f, i, 100, false));
	}
	pcinet_rx_publish(&f->rx);
	CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - r1), "");

	bad[0] = s + r1;		/* backwards */
	bad[1] = s + 2 * r1 - 1;	/* backwards by one */
	bad[2] = s + 3 * r1 + 1;	/* beyond prod */
	bad[3] = s + 3 * r1 + f->size;	/* far beyond prod */
	bad[4] = s - 0x80000000u;	/* half the index space away */
	bad[5] = s - 64;		/* before anything was sent */
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		f->to_p->cons = cpu_to_le32(bad[i]);
		CHECK(pcinet_tx_free(&f->tx) == EPROTO_RET, "cons %#x", bad[i]);
		CHECK(pcinet_tx_wait_space(&f->tx) == EPROTO_RET, "cons %#x",
		      bad[i]);
		pcinet_tx_space_ok(&f->tx);
	}
	/* the last good value still works; so does cons == prod */
	f->to_p->cons = cpu_to_le32(s + 2 * r1);
	CHECK(pcinet_tx_free(&f->tx) == (int)(f->size - r1), "");
	f->to_p->cons = cpu_to_le32(s + 3 * r1);
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");
	/* and now that one is the floor */
	f->to_p->cons = cpu_to_le32(s + 2 * r1);
	CHECK(pcinet_tx_free(&f->tx) == EPROTO_RET, "");
	return 0;
}

/*
 * Fuzz a record ring: between operations, a "peer" writes garbage into
 * every word it may write (prod, need_space, cons, event, ring data).
 * Every result must stay in bounds; ASan checks the memory accesses.
 */
static int t_fuzz_rec(struct fx *f, const struct tcase *tc)
{
	static const u32 maxes[] = { PCINET_NET_MAX_LEN, 4096, 100, 0 };
	u64 rs = 0x9e3779b97f4a7c15ull ^ tc->start;
	unsigned long n_rec = 0, n_proto = 0, n_sent = 0, n_reset = 0;
	u32 size = f->size, mask = size - 1, i;
	int streak = 0;

	CHECK(size <= 4096, "max_len table assumes a small ring");
	for (i = 0; i < FUZZ_ITERS; i++) {
		u32 r = rnd32(&rs), v = rnd32(&rs);
		struct pcinet_rec rec;
		struct pcinet_span sp;
		int ret = 0;

		/* the peer scribbles, in a third of the iterations */
		switch (r % 24) {
		case 0:	/* prod near cons, often aligned */
			v = f->rx.cons + rnd_below(&rs, 2 * size + 256) - 128;
			if (r & 0x100)
				v &= ~(PCINET_REC_ALIGN - 1);
			f->to_c->prod = cpu_to_le32(v);
			break;
		case 1:
			f->to_c->prod = cpu_to_le32(v);
			break;
		case 2:	/* cons near the producer's window */
			v = f->tx.cons + rnd_below(&rs, size + 256) - 128;
			f->to_p->cons = cpu_to_le32(v);
			break;
		case 3:
			f->to_p->cons = cpu_to_le32(v);
			break;
		case 4:
			f->to_p->event = cpu_to_le32(r & 0x200 ? v :
					f->tx.prod - rnd_below(&rs, 256));
			break;
		case 5:
			f->to_c->need_space = cpu_to_le32(r & 0x200 ? v : 1);
			break;
		case 6:	/* a record length at the consumer's slot */
			v = r & 0x200 ? v : rnd_below(&rs, size + 128);
			memcpy(f->data + (f->rx.cons & mask), &v, sizeof(v));
			break;
		case 7:	/* any word of the ring */
			memcpy(f->data + (rnd32(&rs) & mask & ~3u), &v,
			       sizeof(v));
			break;
		default:
			break;
		}

		/* then one end does something */
		switch ((r >> 12) % 8) {
		case 0:
		case 1:	/* producer: a record that fits */
			ret = pcinet_tx_free(&f->tx);
			CHECK(ret == EPROTO_RET || (ret >= 0 && (u32)ret <= size),
			      "tx_free %d", ret);
			if (ret >= 64) {
				u32 room = (u32)ret & ~(PCINET_REC_ALIGN - 1);
				u32 len = rnd_below(&rs, room - REC_HDR + 1);

				rec_hdr(&rec, i, len);
				fill(buf_tx, len, i);
				pcinet_tx_write(&f->tx, 0, &rec, sizeof(rec));
				pcinet_tx_write(&f->tx, REC_HDR, buf_tx, len);
				pcinet_tx_commit(&f->tx, pcinet_rec_size(len));
				n_sent++;
			}
			break;
		case 2:
		case 3: { /* consumer: the next record, whatever it says */
			u32 max = maxes[rnd_below(&rs, ARRAY_SIZE(maxes))];
			u32 len, k, sum = 0;

			ret = pcinet_rx_peek_rec(&f->rx, &rec, max);
			if (ret <= 0) {
				CHECK(ret == 0 || ret == EPROTO_RET,
				      "peek %d", ret);
				break;
			}
			len = le32_to_cpu(rec.len);
			CHECK(len <= max, "len %u > max_len %u", len, max);
			CHECK((u32)ret == pcinet_rec_size(len), "peek %d, len %u",
			      ret, len);
			CHECK((u32)ret <= f->rx.prod - f->rx.cons &&
			      (u32)ret <= size, "peek %d beyond avail", ret);
			pcinet_rx_span(&f->rx, REC_HDR, len, &sp);
			TRY(span_ok(f, &sp, len));
			for (k = 0; k < sp.len[0]; k++)
				sum += sp.p[0][k];
			for (k = 0; k < sp.len[1]; k++)
				sum += sp.p[1][k];
			pcinet_rx_read(&f->rx, REC_HDR, buf_rx, len);
			pcinet_rx_consume(&f->rx, ret);
			if (r & 0x400)
				pcinet_rx_publish(&f->rx);
			(void)sum;
			n_rec++;
			break;
		}
		case 4:
			ret = pcinet_rx_avail(&f->rx, PCINET_REC_ALIGN);
			CHECK(ret == EPROTO_RET || (ret >= 0 && (u32)ret <= size &&
			      !(ret % PCINET_REC_ALIGN)), "avail %d", ret);
			ret = pcinet_rx_avail(&f->rx, 1);
			CHECK(ret == EPROTO_RET || (ret >= 0 && (u32)ret <= size),
			      "avail %d", ret);
			break;
		case 5:
			pcinet_tx_need_kick(&f->tx,
					    f->tx.prod - rnd_below(&rs, size));
			pcinet_rx_arm(&f->rx);
			break;
		case 6:
			ret = pcinet_tx_wait_space(&f->tx);
			CHECK(ret == EPROTO_RET || (ret >= 0 && (u32)ret <= size),
			      "wait_space %d", ret);
			if (r & 0x800)
				pcinet_tx_space_ok(&f->tx);
			break;
		case 7:
			pcinet_rx_publish(&f->rx);
			break;
		}
		if (ret == EPROTO_RET) {
			n_proto++;
			streak++;
		} else if (ret > 0) {
			streak = 0;
		}
		/* local state the peer cannot touch stays sane */
		CHECK(f->tx.prod - f->tx.cons <= size, "tx window %u",
		      f->tx.prod - f->tx.cons);
		CHECK(!(f->rx.cons % PCINET_REC_ALIGN), "rx cons %#x misaligned",
		      f->rx.cons);

		/* a real link resets when the peer is broken; so do we */
		if (streak > 16 || !rnd_below(&rs, 2000)) {
			pcinet_tx_reset(&f->tx);
			pcinet_rx_reset(&f->rx);
			streak = 0;
			n_reset++;
		}
	}
	printf("# fuzz records: %lu received, %lu sent, %lu rejected, %lu resets\n",
	       n_rec, n_sent, n_proto, n_reset);
	CHECK(n_rec > 1000 && n_sent > 1000 && n_proto > 1000 && n_reset > 10,
	      "fuzzing too narrow");
	return 0;
}

/* The same for a byte-stream ring. */
static int t_fuzz_bytes(struct fx *f, const struct tcase *tc)
{
	u64 rs = 0xc2b2ae3d27d4eb4full ^ tc->start;
	unsigned long n_read = 0, n_proto = 0, n_reset = 0;
	u32 size = f->size, mask = size - 1, i;
	int streak = 0;

	for (i = 0; i < FUZZ_ITERS / 2; i++) {
		u32 r = rnd32(&rs), v = rnd32(&rs), n;
		struct pcinet_span sp;
		int ret = 0;

		switch (r % 18) {
		case 0:
			v = f->rx.cons + rnd_below(&rs, 2 * size + 256) - 128;
			/* fall through */
		case 1:
			f->to_c->prod = cpu_to_le32(v);
			break;
		case 2:
			v = f->tx.cons + rnd_below(&rs, size + 256) - 128;
			/* fall through */
		case 3:
			f->to_p->cons = cpu_to_le32(v);
			break;
		case 4:
			f->to_p->event = cpu_to_le32(v);
			f->to_c->need_space = cpu_to_le32(rnd32(&rs));
			break;
		case 5:
			f->data[v & mask] = (u8)r;
			break;
		default:
			break;
		}

		switch ((r >> 12) % 5) {
		case 0:
		case 1:
			ret = pcinet_tx_free(&f->tx);
			CHECK(ret == EPROTO_RET || (ret >= 0 && (u32)ret <= size),
			      "tx_free %d", ret);
			if (ret > 0) {
				n = 1 + rnd_below(&rs, (u32)ret);
				pcinet_tx_write(&f->tx, 0, buf_tx, n);
				pcinet_tx_commit(&f->tx, n);
			}
			break;
		case 2:
		case 3:
			ret = pcinet_rx_avail(&f->rx, 1);
			CHECK(ret == EPROTO_RET || (ret >= 0 && (u32)ret <= size),
			      "avail %d", ret);
			if (ret > 0) {
				n = 1 + rnd_below(&rs, (u32)ret);
				pcinet_rx_span(&f->rx, 0, n, &sp);
				TRY(span_ok(f, &sp, n));
				pcinet_rx_read(&f->rx, 0, buf_rx, n);
				pcinet_rx_consume(&f->rx, n);
				n_read++;
			}
			if (r & 0x400)
				pcinet_rx_publish(&f->rx);
			break;
		case 4:
			ret = pcinet_tx_wait_space(&f->tx);
			CHECK(ret == EPROTO_RET || (ret >= 0 && (u32)ret <= size),
			      "wait_space %d", ret);
			pcinet_tx_space_ok(&f->tx);
			pcinet_rx_arm(&f->rx);
			break;
		}
		if (ret == EPROTO_RET) {
			n_proto++;
			streak++;
		} else if (ret > 0) {
			streak = 0;
		}
		CHECK(f->tx.prod - f->tx.cons <= size, "tx window %u",
		      f->tx.prod - f->tx.cons);
		if (streak > 16 || !rnd_below(&rs, 2000)) {
			pcinet_tx_reset(&f->tx);
			pcinet_rx_reset(&f->rx);
			streak = 0;
			n_reset++;
		}
	}
	printf("# fuzz bytes: %lu reads, %lu rejected, %lu resets\n",
	       n_read, n_proto, n_reset);
	CHECK(n_read > 1000 && n_proto > 1000, "fuzzing too narrow");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Reset and layout                                                    */
/* ------------------------------------------------------------------ */

static int t_reset(struct fx *f, const struct tcase *tc __maybe_unused)
{
	u32 passed, i;

	/* traffic in flight, a waiting producer, an armed consumer */
	for (i = 0; i < 3; i++)
		TRY(send_ok(f, i, 300));
	TRY(recv_rec(f, 0, 300, false));
	pcinet_rx_publish(&f->rx);
	pcinet_rx_arm(&f->rx);
	pcinet_tx_wait_space(&f->tx);
	CHECK(f->to_c->need_space && f->to_c->prod && f->to_p->cons &&
	      f->to_p->event, "case needs nonzero indices");

	/* the producer's reset touches only what it writes */
	pcinet_tx_reset(&f->tx);
	CHECK(!f->to_c->prod && !f->to_c->need_space, "");
	CHECK(!f->tx.prod && !f->tx.cons, "");
	CHECK(f->to_p->cons && f->to_p->event, "tx_reset wrote the peer's words");

	pcinet_rx_reset(&f->rx);
	CHECK(!f->to_p->cons && !f->to_p->event, "");
	CHECK(!f->rx.cons && !f->rx.prod, "");

	CHECK(pcinet_rx_avail(&f->rx, PCINET_REC_ALIGN) == 0, "");
	CHECK(pcinet_tx_free(&f->tx) == (int)f->size, "");

	/* and the ring works from zero */
	TRY(pipe_records(f, rec_lens, 11, 2 * f->size, &passed));
	CHECK(f->tx.prod == passed && f->rx.cons == passed, "");
	return 0;
}

#define MIB (1024ull * 1024)

/* The 16 MiB example window of pcinet_layout.h, as pcinet-fabric has it. */
static void lay_good(struct pcinet_win_hdr *h)
{
	if (pcinet_layout_fill(h, 16 * MIB, PCINET_NR_VEC)) {
		fprintf(stderr, "pcinet_layout_fill refused 16 MiB\n");
		exit(2);
	}
}

static int t_layout(struct fx *f __maybe_unused,
		    const struct tcase *tc __maybe_unused)
{
	static const char * const bad[] = {
		"bad magic", "bad version", "bad hdr_size", "no vectors",
		"ctrl misaligned", "data misaligned", "ctrl past the end",
		"ctrl offset huge", "data past the end", "data size overflow",
		"ctrl over the header", "ctrl over ctrl", "ctrl over data",
		"data over data", "data inbox too small", "mapping too small",
		"mapping smaller than the header",
	};
	struct pcinet_win_hdr h;
	struct pcinet_layout lay;
	u8 win[PCINET_HDR_SIZE], *small;
	u32 i;
	int r;

	lay_good(&h);
	memcpy(win, &h, sizeof(h));
	r = pcinet_layout_parse(win, 16 * MIB, &lay);
	CHECK(r == 0, "good window: %d", r);
	CHECK(lay.win_size == 16 * MIB && lay.nr_vectors == PCINET_NR_VEC, "");
	CHECK(lay.ctrl_off[0] == 0x1000 && lay.ctrl_off[1] == 0x2000, "");
	CHECK(lay.ring[0][PCINET_CHAN_TTY].off == 0x10000 &&
	      lay.ring[0][PCINET_CHAN_TTY].size == PCINET_TTY_RING_SIZE, "");
	CHECK(lay.ring[0][PCINET_CHAN_NET].off == 0x20000 &&
	      lay.ring[0][PCINET_CHAN_NET].size == 4 * MIB, "");
	CHECK(lay.ring[1][PCINET_CHAN_TTY].off == 0x800000 &&
	      lay.ring[1][PCINET_CHAN_TTY].size == PCINET_TTY_RING_SIZE, "");
	CHECK(lay.ring[1][PCINET_CHAN_NET].off == 0x810000 &&
	      lay.ring[1][PCINET_CHAN_NET].size == 4 * MIB, "");

	/* a header claiming more than is mapped is clipped */
	h.win_size = cpu_to_le64(32 * MIB);
	memcpy(win, &h, sizeof(h));
	CHECK(pcinet_layout_parse(win, 16 * MIB, &lay) == 0 &&
	      lay.win_size == 16 * MIB, "");

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		u64 size = 16 * MIB;

		lay_good(&h);
		switch (i) {
		case 0: h.magic ^= 1; break;
		case 1: h.version = cpu_to_le16(PCINET_VERSION + 1); break;
		case 2: h.hdr_size = cpu_to_le16(2048); break;
		case 3: h.nr_vectors = 0; break;
		case 4: h.side[1].ctrl_off = cpu_to_le64(0x2020); break;
		case 5: h.side[0].data_off = cpu_to_le64(0x10020); break;
		case 6: h.side[1].ctrl_off = cpu_to_le64(16 * MIB - 2048); break;
		case 7: h.side[1].ctrl_off = cpu_to_le64(~0ull << 6); break;
		case 8: h.side[1].data_off = cpu_to_le64(0x811000); break;
		case 9: h.side[1].data_size = cpu_to_le64(~0ull - 0x1000); break;
		case 10: h.side[0].ctrl_off = 0; break;
		case 11: h.side[1].ctrl_off = cpu_to_le64(0x1800); break;
		case 12: h.side[1].ctrl_off = cpu_to_le64(0x20000); break;
		case 13: h.side[1].data_off = cpu_to_le64(0x7f0000); break;
		case 14: h.side[0].data_size = cpu_to_le64(0x8f000); break;
		case 15: size = 8 * MIB; break;
		case 16: size = PCINET_HDR_SIZE - 1; break;
		}
		memcpy(win, &h, sizeof(h));
		r = pcinet_layout_parse(win, size, &lay);
		CHECK(r == EPROTO_RET, "%s: accepted (%d)", bad[i], r);
	}

	/* a mapping too small for the header: not even read (ASan checks) */
	small = malloc(40);
	if (!small)
		return failf("out of memory");
	memcpy(small, win, 40);
	r = pcinet_layout_parse(small, 40, &lay);
	free(small);
	CHECK(r == EPROTO_RET, "40-byte window accepted (%d)", r);
	return 0;
}

/*
 * pcinet_layout_init(): pcinet-fabric's placement for several window
 * sizes, the whole header page written (zeroes after the structure),
 * magic stored, the result accepted by pcinet_layout_parse(); windows
 * too small for the rings, or no vectors, refused with nothing written.
 */
static int t_layout_init(struct fx *f __maybe_unused,
			 const struct tcase *tc __maybe_unused)
{
	static const struct {
		u64 win;
		u64 data_size;	/* of each side */
	} sizes[] = {
		{ 16 * MIB, 0x7f0000 },
		{ 4 * MIB, 0x1f0000 },
		{ 1024 * MIB, 0x1fff0000 },
		{ 0x230000, 0x110000 },		/* the stress test's */
		{ 0x130000, 0x90000 },		/* the smallest */
	};
	static const u64 too_small[] = { 0, 0x1000, 0xffff, 0x10000, 0x12ffff };
	struct pcinet_win_hdr h;
	struct pcinet_layout lay;
	u8 *page;
	u32 i, j;
	int r;

	page = malloc(PCINET_HDR_SIZE);
	if (!page)
		return failf("out of memory");
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		u64 ds = sizes[i].data_size;

		memset(page, 0x5a, PCINET_HDR_SIZE);
		r = pcinet_layout_init(page, sizes[i].win, 3);
		memcpy(&h, page, sizeof(h));
		if (r || le32_to_cpu(h.magic) != PCINET_WIN_MAGIC ||
		    le16_to_cpu(h.version) != PCINET_VERSION ||
		    le16_to_cpu(h.hdr_size) != PCINET_HDR_SIZE ||
		    le64_to_cpu(h.win_size) != sizes[i].win ||
		    le32_to_cpu(h.nr_vectors) != 3 || h.reserved0 ||
		    h.attach_epoch[0] || h.attach_epoch[1] ||
		    h.doorbell_id[0] || h.doorbell_id[1] ||
		    le64_to_cpu(h.side[0].ctrl_off) != 0x1000 ||
		    le64_to_cpu(h.side[1].ctrl_off) != 0x2000 ||
		    le64_to_cpu(h.side[0].data_off) != 0x10000 ||
		    le64_to_cpu(h.side[1].data_off) != 0x10000 + ds ||
		    le64_to_cpu(h.side[0].data_size) != ds ||
		    le64_to_cpu(h.side[1].data_size) != ds) {
			free(page);
			return failf("window 0x%llx: wrong header (%d)",
				     (unsigned long long)sizes[i].win, r);
		}
		for (j = sizeof(h); j < PCINET_HDR_SIZE; j++)
			if (page[j]) {
				free(page);
				return failf("window 0x%llx: byte %u not zero",
					     (unsigned long long)sizes[i].win, j);
			}
		/* parse reads only the header page */
		r = pcinet_layout_parse(page, sizes[i].win, &lay);
		if (r || lay.ring[1][PCINET_CHAN_NET].off +
			 lay.ring[1][PCINET_CHAN_NET].size > sizes[i].win) {
			free(page);
			return failf("window 0x%llx: parse %d",
				     (unsigned long long)sizes[i].win, r);
		}
	}
	for (i = 0; i < ARRAY_SIZE(too_small); i++) {
		memset(page, 0x5a, PCINET_HDR_SIZE);
		r = pcinet_layout_init(page, too_small[i], 3);
		for (j = 0; j < PCINET_HDR_SIZE && page[j] == 0x5a; j++)
			;
		if (r != -1 || j != PCINET_HDR_SIZE) {
			free(page);
			return failf("window 0x%llx: accepted or written",
				     (unsigned long long)too_small[i]);
		}
	}
	r = pcinet_layout_init(page, 16 * MIB, 0);
	free(page);
	CHECK(r == -1, "no vectors accepted");
	return 0;
}

/*
 * pcinet_layout_init_vio(): with no virtio regions, byte for byte what
 * pcinet_layout_init() writes; with them, a header that a side without the
 * virtio channel (pcinet_layout_parse()) still accepts, whose four regions
 * are aligned, inside the window and clear of everything that side uses
 * (header page, control inboxes, data inboxes and their rings) and of each
 * other.
 */
static int t_layout_vio(struct fx *f __maybe_unused,
			const struct tcase *tc __maybe_unused)
{
	static const struct {
		u64 win;
		u64 vio;
	} sizes[] = {
		{ 16 * MIB, 0 },
		{ 16 * MIB, 2 * MIB },
		{ 64 * MIB, 8 * MIB },
		{ 1024 * MIB, 64 * MIB },
		{ 4 * MIB, 0x10000 },
	};
	static const struct {
		u64 win;
		u64 vio;
	} bad[] = {
		{ 16 * MIB, 0x8000 },		/* not aligned */
		{ 16 * MIB, 4 * MIB },		/* more than half */
		{ 0x130000, 0x10000 },		/* no room left for the rings */
	};
	struct pcinet_win_hdr h;
	struct pcinet_win_vio v;
	struct pcinet_layout lay;
	u64 start[9], len[9];
	u8 *a, *b;
	u32 i, j, k;
	int r;

	a = malloc(PCINET_HDR_SIZE);
	b = malloc(PCINET_HDR_SIZE);
	if (!a || !b) {
		free(a);
		free(b);
		return failf("out of memory");
	}
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		memset(a, 0x5a, PCINET_HDR_SIZE);
		memset(b, 0xa5, PCINET_HDR_SIZE);
		r = pcinet_layout_init_vio(a, sizes[i].win, 3, sizes[i].vio);
		if (r || pcinet_layout_parse(a, sizes[i].win, &lay))
			goto fail;
		if (!sizes[i].vio) {
			if (pcinet_layout_init(b, sizes[i].win, 3) ||
			    memcmp(a, b, PCINET_HDR_SIZE))
				goto fail;
			continue;
		}
		memcpy(&h, a, sizeof(h));
		memcpy(&v, a + PCINET_HDR_VIO_OFF, sizeof(v));
		if (le32_to_cpu(v.magic) != PCINET_WIN_VIO_MAGIC ||
		    le16_to_cpu(v.version) != PCINET_WIN_VIO_VERSION ||
		    le16_to_cpu(v.size) != sizeof(v) ||
		    le64_to_cpu(h.win_size) != sizes[i].win)
			goto fail;
		start[0] = 0;
		len[0] = PCINET_HDR_SIZE;
		for (j = 0; j < 2; j++) {
			start[1 + j] = le64_to_cpu(h.side[j].ctrl_off);
			len[1 + j] = PCINET_CTRL_SIZE;
			start[3 + j] = le64_to_cpu(h.side[j].data_off);
			len[3 + j] = le64_to_cpu(h.side[j].data_size);
			start[5 + 2 * j] = le64_to_cpu(v.side[j].dev_off);
			len[5 + 2 * j] = le64_to_cpu(v.side[j].dev_size);
			start[6 + 2 * j] = le64_to_cpu(v.side[j].drv_off);
			len[6 + 2 * j] = le64_to_cpu(v.side[j].drv_size);
		}
		for (j = 5; j < 9; j++)
			if (start[j] % PCINET_VIO_ALIGN ||
			    len[j] != sizes[i].vio ||
			    start[j] + len[j] > sizes[i].win)
				goto fail;
		for (j = 0; j < 9; j++)
			for (k = j + 1; k < 9; k++)
				if (start[j] < start[k] + len[k] &&
				    start[k] < start[j] + len[j])
					goto fail;
		/* the rings an old side places stay inside its data inboxes */
		for (j = 0; j < 2; j++)
			for (k = 0; k < PCINET_NR_RING_CHAN; k++)
				if (lay.ring[j][k].off + lay.ring[j][k].size >
				    start[3 + j] + len[3 + j])
					goto fail;
	}
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(a, 0x5a, PCINET_HDR_SIZE);
		r = pcinet_layout_init_vio(a, bad[i].win, 3, bad[i].vio);
		for (j = 0; j < PCINET_HDR_SIZE && a[j] == 0x5a; j++)
			;
		if (r != -1 || j != PCINET_HDR_SIZE) {
			i += ARRAY_SIZE(sizes);
			goto fail;
		}
	}
	free(a);
	free(b);
	return 0;
fail:
	free(a);
	free(b);
	return failf("case %u: wrong virtio layout", i);
}

/*
 * pcinet_layout_parse() on the virtio block: the regions of a good one
 * decoded; each kind of bad field only clears has_vio (the window parses,
 * net and tty rings as without virtio); an old-style window has none.
 */
enum vio_mut {
	VM_NONE, VM_MAGIC, VM_VERSION, VM_SIZE, VM_OFF_ALIGN, VM_SIZE_ALIGN,
	VM_OUTSIDE, VM_PAST_MAP, VM_HUGE, VM_HDR, VM_CTRL, VM_DATA, VM_EACH,
	VM_EMPTY_OK, VM_OLD,
};

static int t_layout_vio_parse(struct fx *f __maybe_unused,
			      const struct tcase *tc __maybe_unused)
{
	static const struct {
		enum vio_mut m;
		bool ok;
		const char *what;
	} rows[] = {
		{ VM_NONE, true, "good" },
		{ VM_MAGIC, false, "bad magic" },
		{ VM_VERSION, false, "version 2" },
		{ VM_SIZE, false, "size 88" },
		{ VM_OFF_ALIGN, false, "offset not 64 KiB aligned" },
		{ VM_SIZE_ALIGN, false, "size not 64 KiB aligned" },
		{ VM_OUTSIDE, false, "region past win_size" },
		{ VM_PAST_MAP, false, "region past the mapping" },
		{ VM_HUGE, false, "offset + size overflows" },
		{ VM_HDR, false, "region over the header page" },
		{ VM_CTRL, false, "region over the control inboxes" },
		{ VM_DATA, false, "region over a data inbox" },
		{ VM_EACH, false, "two regions overlap" },
		{ VM_EMPTY_OK, true, "one side without regions (offsets ignored)" },
		{ VM_OLD, false, "old-style window, no virtio block" },
	};
	const u64 win = 64 * MIB, vsz = 8 * MIB;
	struct pcinet_layout lay, plain;
	struct pcinet_win_vio v;
	struct pcinet_win_hdr h;
	u64 map;
	u8 *page;
	u32 i;
	int r = 0;

	lay.has_vio = false;
	page = malloc(PCINET_HDR_SIZE);
	if (!page)
		return failf("out of memory");
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		map = win;
		if (pcinet_layout_fill_vio(&h, &v, win, 4,
					   rows[i].m == VM_OLD ? 0 : vsz))
			goto fail;
		switch (rows[i].m) {
		case VM_MAGIC:
			v.magic = cpu_to_le32(PCINET_WIN_VIO_MAGIC + 1);
			break;
		case VM_VERSION:
			v.version = cpu_to_le16(2);
			break;
		case VM_SIZE:
			v.size = cpu_to_le16(88);
			break;
		case VM_OFF_ALIGN:
			v.side[1].drv_off = cpu_to_le64(le64_to_cpu(v.side[1].drv_off) + 0x1000);
			v.side[1].drv_size = cpu_to_le64(vsz - PCINET_VIO_ALIGN);
			break;
		case VM_SIZE_ALIGN:
			v.side[0].dev_size = cpu_to_le64(vsz - 0x1000);
			break;
		case VM_OUTSIDE:
			v.side[1].drv_size = cpu_to_le64(vsz + PCINET_VIO_ALIGN);
			break;
		case VM_PAST_MAP:
			map = win - PCINET_VIO_ALIGN;
			break;
		case VM_HUGE:
			v.side[1].drv_off = cpu_to_le64(~0ull << 16);
			break;
		case VM_HDR:
			v.side[0].dev_off = cpu_to_le64(0);
			break;
		case VM_CTRL:
			/* the first 64 KiB: header page and both control inboxes */
			v.side[0].dev_off = cpu_to_le64(0);
			v.side[0].dev_size = cpu_to_le64(PCINET_VIO_ALIGN);
			break;
		case VM_DATA:
			v.side[0].dev_off = h.side[1].data_off;
			v.side[0].dev_off = cpu_to_le64(le64_to_cpu(v.side[0].dev_off) &
							~(u64)(PCINET_VIO_ALIGN - 1));
			break;
		case VM_EACH:
			v.side[1].dev_off = v.side[0].drv_off;
			break;
		case VM_EMPTY_OK:
			v.side[1].dev_size = 0;
			v.side[1].drv_size = 0;
			v.side[1].dev_off = cpu_to_le64(3);
			v.side[1].drv_off = cpu_to_le64(~0ull);
			break;
		default:
			break;
		}
		memset(page, 0x5a, PCINET_HDR_SIZE);
		pcinet_layout_write_vio(page, &h, &v);
		memset(&lay, 0xee, sizeof(lay));
		r = pcinet_layout_parse(page, map, &lay);
		if (r || lay.has_vio != rows[i].ok)
			goto fail;
		/* net and tty see the same window with or without virtio */
		pcinet_layout_write(page, &h);
		if (pcinet_layout_parse(page, map, &plain) || plain.has_vio ||
		    memcmp(plain.ring, lay.ring, sizeof(lay.ring)) ||
		    memcmp(plain.ctrl_off, lay.ctrl_off, sizeof(lay.ctrl_off)) ||
		    plain.win_size != lay.win_size)
			goto fail;
		if (!lay.has_vio) {
			if (lay.vio[0].dev_off || lay.vio[0].dev_size ||
			    lay.vio[1].drv_off || lay.vio[1].drv_size)
				goto fail;
			continue;
		}
		if (lay.vio[0].dev_off != le64_to_cpu(v.side[0].dev_off) ||
		    lay.vio[0].dev_size != vsz ||
		    lay.vio[0].drv_off != le64_to_cpu(v.side[0].drv_off) ||
		    lay.vio[0].drv_size != vsz)
			goto fail;
		if (rows[i].m == VM_EMPTY_OK ?
		    (lay.vio[1].dev_off || lay.vio[1].drv_off ||
		     lay.vio[1].dev_size || lay.vio[1].drv_size) :
		    (lay.vio[1].drv_off != win - vsz || lay.vio[1].drv_size != vsz))
			goto fail;
	}
	free(page);
	return 0;
fail:
	free(page);
	return failf("row %u (%s): parse %d, has_vio %d", i, rows[i].what, r,
		     lay.has_vio);
}

/* The rules a peer reads in pcinet_layout.h, checked as numbers. */
static int t_rules(struct fx *f __maybe_unused,
		   const struct tcase *tc __maybe_unused)
{
	CHECK(pcinet_chan_vector(PCINET_CHAN_NET) == PCINET_VEC_NET, "");
	CHECK(pcinet_chan_vector(PCINET_CHAN_TTY) == PCINET_VEC_TTY, "");
	CHECK(pcinet_chan_vector(PCINET_CHAN_VIRTIO) == PCINET_VEC_VIRTIO, "");
	/* a vector not in use is rung (and served) as vector 0 */
	CHECK(pcinet_vector_in_use(PCINET_VEC_VIRTIO, 4) == PCINET_VEC_VIRTIO, "");
	CHECK(pcinet_vector_in_use(PCINET_VEC_VIRTIO, 3) == PCINET_VEC_LINK, "");
	CHECK(pcinet_vector_in_use(PCINET_VEC_TTY, 3) == PCINET_VEC_TTY, "");
	CHECK(pcinet_vector_in_use(PCINET_VEC_TTY, 2) == PCINET_VEC_LINK, "");
	CHECK(pcinet_vector_in_use(PCINET_VEC_NET, 1) == PCINET_VEC_LINK, "");
	CHECK(pcinet_vector_in_use(PCINET_VEC_LINK, 1) == PCINET_VEC_LINK, "");
	{
		struct pcinet_ring_loc loc;

		/* the virtio channel has no byte ring in a data inbox */
		CHECK(pcinet_layout_ring(0x10000, 8 << 20, PCINET_CHAN_VIRTIO,
					 &loc) == -1, "");
	}
	CHECK(PCINET_PEER_TIMEOUT_MS > 2 * PCINET_HEARTBEAT_MS, "");
	/* need_event: is event in [old, new), modulo 2^32? */
	CHECK(pcinet_need_event(10, 11, 10), "");
	CHECK(!pcinet_need_event(11, 11, 10), "");
	CHECK(!pcinet_need_event(9, 11, 10), "");
	CHECK(!pcinet_need_event(10, 10, 10), "empty move");
	CHECK(pcinet_need_event(0xfffffff0u, 0x10, 0xffffff00u), "wrap");
	CHECK(pcinet_need_event(0x8, 0x10, 0xffffff00u), "wrap");
	CHECK(!pcinet_need_event(0x10, 0x10, 0xffffff00u), "wrap");
	CHECK(!pcinet_need_event(0xfffffe00u, 0x10, 0xffffff00u), "wrap");
	CHECK(pcinet_ctrl_live(PCINET_CTRL_MAGIC, 1), "");
	CHECK(!pcinet_ctrl_live(PCINET_CTRL_MAGIC, 0), "");
	CHECK(!pcinet_ctrl_live(PCINET_CTRL_MAGIC ^ 1, 5), "");
	return 0;
}

/*
 * Identity (struct pcinet_ctrl @slot and @name): what a peer wrote in the
 * field, byte for byte, and what pcinet_ident_read() must make of it.
 * The field is untrusted: no NUL, control bytes, bytes past the bound.
 */
static int t_ident(struct fx *f __maybe_unused,
		   const struct tcase *tc __maybe_unused)
{
	static const struct {
		const char *what;
		u8 field[PCINET_NAME_LEN];
		u32 slot;
		const char *want;
	} rows[] = {
		{ "all zero: none published (an old peer)", { 0 }, 0, "" },
		{ "plain", "board3", 3, "board3" },
		{ "every allowed character", "aZ09-_.", 19, "aZ09-_." },
		{ "15 characters, the last byte 0", "abcdefghijklmno", 1,
		  "abcdefghijklmno" },
		{ "no NUL at all: cut at 15",
		  { 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l',
		    'm', 'n', 'o', 'p' }, 0, "abcdefghijklmno" },
		{ "no NUL, bytes >= 0x80", { [0 ... 15] = 0xff }, 0,
		  "_______________" },
		{ "control, space, slash, colon, quote",
		  { 'a', '\n', ' ', '/', ':', '"', '\x1b', 'b' }, 0, "a______b" },
		{ "stops at the first NUL, ignores the rest",
		  { 'x', 'y', 0, 'S', 'E', 'C', 'R', 'E', 'T' }, 0, "xy" },
		{ "leading NUL: no name, slot still read",
		  { 0, 'z' }, 0xffffffffu, "" },
	};
	struct pcinet_ctrl *ctrl;
	struct pcinet_ident id;
	char name[64];
	u32 i;

	ctrl = calloc(1, sizeof(*ctrl));
	if (!ctrl)
		return failf("out of memory");
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		memset(&id, 0xa5, sizeof(id));
		ctrl->slot = cpu_to_le32(rows[i].slot);
		memcpy(ctrl->name, rows[i].field, PCINET_NAME_LEN);
		pcinet_ident_read(ctrl, &id);
		if (id.slot != rows[i].slot || strcmp(id.name, rows[i].want) ||
		    /* NUL-terminated and zero to the end: nothing left over */
		    id.name[PCINET_NAME_LEN - 1] ||
		    memcmp(id.name + strlen(id.name),
			   "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
			   PCINET_NAME_LEN - strlen(id.name))) {
			free(ctrl);
			return failf("row %u (%s): slot %u name \"%.*s\"", i,
				     rows[i].what, id.slot, PCINET_NAME_LEN,
				     id.name);
		}
	}

	/*
	 * Writing: a long host name with bad characters is cut and mapped,
	 * every byte of the field is written (no stale byte survives), and
	 * what a peer reads back is exactly what was written.
	 */
	memset(ctrl, 0xee, sizeof(*ctrl));
	pcinet_ident_set(&id, 7, "very-long host.name.example");
	CHECK(!strcmp(id.name, "very-long_host."), "%s", id.name);
	pcinet_ident_write(ctrl, &id);
	CHECK(le32_to_cpu(ctrl->slot) == 7, "");
	CHECK(!memcmp(ctrl->name, "very-long_host.", PCINET_NAME_LEN), "");
	CHECK(ctrl->pad[0] == 0xeeeeeeee && ctrl->features == 0xeeeeeeee,
	      "only slot and name written");
	memset(&id, 0, sizeof(id));
	pcinet_ident_read(ctrl, &id);
	CHECK(id.slot == 7 && !strcmp(id.name, "very-long_host."), "");
	pcinet_ident_set(&id, 0, "b");
	pcinet_ident_write(ctrl, &id);
	snprintf(name, sizeof(name), "%.*s", PCINET_NAME_LEN,
		 (const char *)ctrl->name);
	CHECK(!strcmp(name, "b") && !ctrl->name[1] &&
	      !ctrl->name[PCINET_NAME_LEN - 1], "the old name's tail is zeroed");
	pcinet_ident_set(&id, 0, NULL);
	CHECK(!id.name[0], "");
	free(ctrl);
	CHECK(PCINET_NAME_MAX + 1 == PCINET_NAME_LEN, "");
	CHECK(!pcinet_name_char_ok(0) && !pcinet_name_char_ok(' ') &&
	      !pcinet_name_char_ok('/') && !pcinet_name_char_ok(0x7f) &&
	      pcinet_name_char_ok('.'), "");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Handshake                                                           */
/* ------------------------------------------------------------------ */

/*
 * A side of a link, as pcinet_link.c runs it, reduced to the handshake:
 * the words it writes into the peer's control inbox (@out), what it reads
 * from its own (@in), its generation, the peer generation it synced
 * with, whether it is up.  hs_round() is one run of pcinet_link_work()
 * without the timers: read, ask pcinet_handshake(), act, ask again after
 * a sync, then rewrite the soft state (pcinet_link_refresh()).
 */
struct hs_side {
	struct pcinet_ctrl *in;
	struct pcinet_ctrl *out;
	u32 gen;
	u32 synced_gen;
	bool up;
	bool running;
	u32 resets;
	u32 ups;
	enum pcinet_hs last;	/* first answer of the last round */
};

static void hs_refresh(struct hs_side *s)
{
	s->out->magic = cpu_to_le32(PCINET_CTRL_MAGIC);
	s->out->features = cpu_to_le32(PCINET_F_TTY_CRC);
	s->out->ack_gen = cpu_to_le32(s->synced_gen ? s->gen : 0);
	s->out->peer_gen = cpu_to_le32(s->synced_gen);
	s->out->gen = cpu_to_le32(s->gen);
}

static void hs_start(struct hs_side *s, u32 gen)
{
	memset(s->out, 0, sizeof(*s->out));
	s->gen = gen;
	s->synced_gen = 0;
	s->up = false;
	s->running = true;
	hs_refresh(s);
}

/* pcinet_link_stop(): gen 0, the rest left as it was */
static void hs_stop(struct hs_side *s)
{
	s->running = false;
	s->up = false;
	s->out->gen = 0;
}

static void hs_reset(struct hs_side *s)
{
	s->up = false;
	s->gen = s->gen + 1 ? s->gen + 1 : 1;
	s->synced_gen = 0;
	s->out->peer_gen = 0;
	s->out->ack_gen = 0;
	s->out->gen = cpu_to_le32(s->gen);
	s->resets++;
}

static void hs_view(const struct hs_side *s, struct pcinet_hs_view *v)
{
	v->gen = s->gen;
	v->synced_gen = s->synced_gen;
	v->up = s->up;
	v->their_peer_gen = le32_to_cpu(s->in->peer_gen);
	v->their_ack_gen = le32_to_cpu(s->in->ack_gen);
}

static enum pcinet_hs hs_round(struct hs_side *s)
{
	struct pcinet_hs_view v;
	const char *why = NULL;
	enum pcinet_hs act;
	u32 gen;

	if (!s->running)
		return PCINET_HS_WAIT;
	gen = le32_to_cpu(s->in->gen);
	v.their_gen = gen;
	v.their_magic = le32_to_cpu(s->in->magic);
	hs_view(s, &v);
	act = pcinet_handshake(&v, &why);
	s->last = act;
	if (act == PCINET_HS_RESET || act == PCINET_HS_RESTART) {
		if (!why)
			return (enum pcinet_hs)-1;
		hs_reset(s);
	}
	if (act == PCINET_HS_SYNC || act == PCINET_HS_RESTART) {
		s->synced_gen = gen;
		s->out->ack_gen = cpu_to_le32(s->gen);
		s->out->peer_gen = cpu_to_le32(gen);
		hs_view(s, &v);
		act = pcinet_handshake(&v, &why);
		if (act != PCINET_HS_UP && act != PCINET_HS_WAIT)
			return (enum pcinet_hs)-1;
	}
	if (act == PCINET_HS_UP) {
		s->up = true;
		s->ups++;
	}
	hs_refresh(s);
	return act;
}

/* Two sides, each inbox a heap block: a writes b.in, b writes a.in. */
struct hs_pair {
	struct pcinet_ctrl inbox[2];
	struct hs_side s[2];
};

static void hs_pair_init(struct hs_pair *p)
{
	memset(p, 0, sizeof(*p));
	p->s[0].in = &p->inbox[0];
	p->s[0].out = &p->inbox[1];
	p->s[1].in = &p->inbox[1];
	p->s[1].out = &p->inbox[0];
}

/* Run rounds, alternating, until both sides are up and stay up. */
static int hs_settle(struct hs_pair *p, u32 max_rounds)
{
	u32 i;

	for (i = 0; i < max_rounds; i++) {
		if ((int)hs_round(&p->s[i & 1]) < 0)
			return -1;
		if (p->s[0].up && p->s[1].up &&
		    p->s[0].synced_gen == p->s[1].gen &&
		    p->s[1].synced_gen == p->s[0].gen)
			return 0;
	}
	return -1;
}

static int hs_ask(u32 gen, u32 synced, bool up, u32 magic, u32 their_gen,
		  u32 their_peer_gen, u32 their_ack)
{
	struct pcinet_hs_view v = {
		.gen = gen, .synced_gen = synced, .up = up,
		.their_magic = magic, .their_gen = their_gen,
		.their_peer_gen = their_peer_gen, .their_ack_gen = their_ack,
	};
	const char *why = NULL;
	enum pcinet_hs r = pcinet_handshake(&v, &why);

	if ((r == PCINET_HS_RESET || r == PCINET_HS_RESTART) && !why)
		return -1;
	return r;
}

/* The decision table, one row per rule and state. */
static int t_hs_table(struct fx *f __maybe_unused,
		      const struct tcase *tc __maybe_unused)
{
	const u32 M = PCINET_CTRL_MAGIC;

	/* peer not running: gen 0 or bad magic */
	CHECK(hs_ask(5, 0, false, 0, 0, 0, 0) == PCINET_HS_WAIT, "");
	CHECK(hs_ask(5, 0, false, M, 0, 0, 0) == PCINET_HS_WAIT, "");
	CHECK(hs_ask(5, 0, false, M ^ 1, 7, 5, 7) == PCINET_HS_WAIT, "");
	CHECK(hs_ask(5, 7, true, M, 0, 5, 7) == PCINET_HS_RESET, "unloading");
	CHECK(hs_ask(5, 7, true, 0, 7, 5, 7) == PCINET_HS_RESET, "bad magic");
	/* a generation we have not synced with */
	CHECK(hs_ask(5, 0, false, M, 7, 0, 0) == PCINET_HS_SYNC, "");
	CHECK(hs_ask(5, 6, false, M, 7, 5, 7) == PCINET_HS_SYNC, "");
	CHECK(hs_ask(5, 7, true, M, 8, 5, 7) == PCINET_HS_RESTART, "");
	/* synced: is the ack current? */
	CHECK(hs_ask(5, 7, false, M, 7, 5, 7) == PCINET_HS_UP, "");
	CHECK(hs_ask(5, 7, true, M, 7, 5, 7) == PCINET_HS_KEEP, "");
	CHECK(hs_ask(5, 7, false, M, 7, 0, 0) == PCINET_HS_WAIT, "no ack yet");
	CHECK(hs_ask(5, 7, false, M, 7, 4, 7) == PCINET_HS_WAIT,
	      "ack of our old generation");
	CHECK(hs_ask(5, 7, false, M, 7, 5, 6) == PCINET_HS_WAIT,
	      "ack made by the peer's old generation");
	CHECK(hs_ask(5, 7, true, M, 7, 4, 7) == PCINET_HS_RESET, "");
	CHECK(hs_ask(5, 7, true, M, 7, 5, 6) == PCINET_HS_RESET, "");
	CHECK(hs_ask(5, 7, true, M, 7, 0, 0) == PCINET_HS_RESET, "");
	return 0;
}

/* Both sides start fresh, one after the other, in either order. */
static int t_hs_fresh(struct fx *f __maybe_unused,
		      const struct tcase *tc __maybe_unused)
{
	static struct hs_pair pair;
	struct hs_pair *p = &pair;
	int first;

	for (first = 0; first < 2; first++) {
		struct hs_side *a, *b;

		hs_pair_init(p);
		a = &p->s[first];
		b = &p->s[!first];
		hs_start(a, 0x1001);
		if (hs_round(a) != PCINET_HS_WAIT || a->up)
			goto fail;
		hs_start(b, 0x2001);
		/* b adopts a's gen, waits: a has not acked b yet */
		if (hs_round(b) != PCINET_HS_WAIT || b->synced_gen != 0x1001)
			goto fail;
		/* a adopts b's gen and finds itself acked: up */
		if (hs_round(a) != PCINET_HS_UP || a->last != PCINET_HS_SYNC)
			goto fail;
		if (hs_round(b) != PCINET_HS_UP)
			goto fail;
		if (hs_round(a) != PCINET_HS_KEEP || hs_round(b) != PCINET_HS_KEEP)
			goto fail;
		if (a->resets || b->resets || a->ups != 1 || b->ups != 1)
			goto fail;
		if (le32_to_cpu(p->inbox[0].features) != PCINET_F_TTY_CRC)
			goto fail;
	}
	return 0;
fail:
	return failf("fresh start, side %d first", first);
}

/* The peer restarts with a new generation: one reset, then up again. */
static int t_hs_restart(struct fx *f __maybe_unused,
			const struct tcase *tc __maybe_unused)
{
	static struct hs_pair pair;
	struct hs_pair *p = &pair;
	struct hs_side *a, *b;
	u32 old;

	hs_pair_init(p);
	a = &p->s[0];
	b = &p->s[1];
	hs_start(a, 0x1001);
	hs_start(b, 0x2001);
	if (hs_settle(p, 8))
		goto fail;
	old = a->gen;
	/* b's driver reloads: a new block, a new generation */
	hs_start(b, 0x3001);
	if (hs_round(a) != PCINET_HS_WAIT || a->last != PCINET_HS_RESTART ||
	    a->gen != old + 1 || a->synced_gen != 0x3001 || a->up)
		goto fail;
	if (hs_round(b) != PCINET_HS_UP || hs_round(a) != PCINET_HS_UP)
		goto fail;
	if (a->resets != 1 || b->resets)
		goto fail;
	/* gen wraps past 0 on reset: never 0 */
	a->gen = 0xffffffffu;
	hs_reset(a);
	if (a->gen != 1 || hs_settle(p, 8))
		goto fail;
	return 0;
fail:
	return failf("restart: a gen %#x synced %#x up %d resets %u",
		     a->gen, a->synced_gen, a->up, a->resets);
}

/*
 * A third party writes a made-up gen into a's inbox.  a resets and syncs
 * to the forged gen, but never comes up on it (nobody acks with it); b's
 * refresh puts the real gen back; both end up with fresh generations.
 */
static int t_hs_forged(struct fx *f __maybe_unused,
		       const struct tcase *tc __maybe_unused)
{
	static struct hs_pair pair;
	struct hs_pair *p = &pair;
	struct hs_side *a, *b;
	u32 a0, b0, i;

	hs_pair_init(p);
	a = &p->s[0];
	b = &p->s[1];
	hs_start(a, 0x1001);
	hs_start(b, 0x2001);
	if (hs_settle(p, 8))
		goto fail;
	a0 = a->gen;
	b0 = b->gen;
	a->in->gen = cpu_to_le32(0xbad);
	if (hs_round(a) != PCINET_HS_WAIT || a->last != PCINET_HS_RESTART ||
	    a->synced_gen != 0xbad)
		goto fail;
	/* forged gen with a forged ack of a's new gen: still no ack_gen */
	for (i = 0; i < 3; i++)
		if (hs_round(a) != PCINET_HS_WAIT)
			goto fail;
	/* b rewrites its soft state (its tick), then the handshake runs */
	hs_refresh(b);
	if (hs_settle(p, 12))
		goto fail;
	if (a->gen == a0 || b->gen == b0)
		goto fail;
	return 0;
fail:
	return failf("forged gen: a gen %#x synced %#x, b gen %#x synced %#x",
		     a->gen, a->synced_gen, b->gen, b->synced_gen);
}

/*
 * An acknowledgment naming an old generation: b's peer_gen is a's
 * current gen, but its ack_gen is not b's current gen (it was written by
 * an earlier b, or forged).  a must not come up on it.
 */
static int t_hs_old_ack(struct fx *f __maybe_unused,
			const struct tcase *tc __maybe_unused)
{
	static struct hs_pair pair;
	struct hs_pair *p = &pair;
	struct hs_side *a, *b;

	hs_pair_init(p);
	a = &p->s[0];
	b = &p->s[1];
	hs_start(a, 0x1001);
	/* b (stopped) left peer_gen = a's gen, ack_gen = its old gen */
	b->out->magic = cpu_to_le32(PCINET_CTRL_MAGIC);
	b->out->peer_gen = cpu_to_le32(0x1001);
	b->out->ack_gen = cpu_to_le32(0x2001);
	b->out->gen = cpu_to_le32(0x2003);	/* b runs again, new gen */
	if (hs_round(a) != PCINET_HS_WAIT || a->up || a->synced_gen != 0x2003)
		goto fail;
	if (hs_round(a) != PCINET_HS_WAIT || a->up)
		goto fail;
	/* once b itself syncs, the ack is current */
	b->running = true;
	b->gen = 0x2003;
	if (hs_round(b) != PCINET_HS_UP || hs_round(a) != PCINET_HS_UP)
		goto fail;
	/* up, then the ack goes stale: reset */
	b->out->ack_gen = cpu_to_le32(0x2001);
	if (hs_round(a) != PCINET_HS_RESET || a->up || a->synced_gen)
		goto fail;
	return 0;
fail:
	return failf("old ack: a gen %#x synced %#x up %d", a->gen,
		     a->synced_gen, a->up);
}

/* The peer unloads (gen 0) or its magic goes: down, no sync, wait. */
static int t_hs_gone(struct fx *f __maybe_unused,
		     const struct tcase *tc __maybe_unused)
{
	static struct hs_pair pair;
	struct hs_pair *p = &pair;
	struct hs_side *a, *b;
	int how;

	for (how = 0; how < 2; how++) {
		hs_pair_init(p);
		a = &p->s[0];
		b = &p->s[1];
		hs_start(a, 0x1001);
		hs_start(b, 0x2001);
		if (hs_settle(p, 8))
			goto fail;
		if (how == 0)
			hs_stop(b);
		else
			a->in->magic ^= cpu_to_le32(1);
		if (hs_round(a) != PCINET_HS_RESET || a->up || a->synced_gen ||
		    a->resets != 1)
			goto fail;
		if (hs_round(a) != PCINET_HS_WAIT || a->synced_gen ||
		    a->resets != 1)
			goto fail;
		if (how == 0) {
			/* b loads again */
			hs_start(b, 0x4001);
		} else {
			/* b's tick repairs its magic */
			hs_refresh(b);
		}
		if (hs_settle(p, 8))
			goto fail;
	}
	return 0;
fail:
	return failf("%s: a gen %#x synced %#x up %d resets %u",
		     how ? "bad magic" : "gen 0", a->gen, a->synced_gen,
		     a->up, a->resets);
}

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

#define NET		PCINET_CHAN_NET
#define TTY		PCINET_CHAN_TTY
#define K4		4096u
#define K64		(64u * 1024)
#define K256		(256u * 1024)

static const struct tcase cases[] = {
	{ "layout: window header parse",	t_layout,	0, NET, 0 },
	{ "layout: pcinet_layout_init",		t_layout_init,	0, NET, 0 },
	{ "layout: virtio regions",		t_layout_vio,	0, NET, 0 },
	{ "layout: virtio block parse",		t_layout_vio_parse, 0, NET, 0 },
	{ "layout: peer rules",			t_rules,	0, NET, 0 },
	{ "layout: identity (slot, name sanitizer)", t_ident,	0, NET, 0 },
	{ "handshake: decision table",		t_hs_table,	0, NET, 0 },
	{ "handshake: fresh start both sides",	t_hs_fresh,	0, NET, 0 },
	{ "handshake: peer restart",		t_hs_restart,	0, NET, 0 },
	{ "handshake: forged gen",		t_hs_forged,	0, NET, 0 },
	{ "handshake: ack of an old generation", t_hs_old_ack,	0, NET, 0 },
	{ "handshake: peer gen 0, bad magic",	t_hs_gone,	0, NET, 0 },
	{ "records: pcinet_rec_size",		t_rec_size,	K4, NET, 0 },

	{ "records: empty ring",		t_empty,	K4, NET, 0 },
	{ "records: empty ring",		t_empty,	K4, NET, 0xffffffc0u },
	{ "bytes: empty ring",			t_empty,	K64, TTY, 0 },
	{ "bytes: empty ring",			t_empty,	K64, TTY, 0xffffffffu },

	{ "records: every length, accounting",	t_rec_lengths,	K256, NET, 0 },
	{ "records: every length, accounting",	t_rec_lengths,	K256, NET, K256 - 64 },
	{ "records: every length, accounting",	t_rec_lengths,	K256, NET, 0xffffff00u },

	{ "records: round trips",		t_rec_pipe,	K256, NET, 0 },
	{ "records: round trips",		t_rec_pipe,	K256, NET, K256 - 64 },
	{ "records: round trips",		t_rec_pipe,	K256, NET, K256 - 128 },
	{ "records: round trips",		t_rec_pipe,	K256, NET, 0x7fffffc0u },
	{ "records: round trips",		t_rec_pipe,	K256, NET, 0xffffffc0u },
	{ "records: round trips",		t_rec_pipe,	K256, NET, 0xfffc0000u },
	{ "records: round trips",		t_rec_pipe,	K256, NET, 0u - K256 / 2 },

	{ "records: full ring",			t_rec_full,	K4, NET, 0 },
	{ "records: full ring",			t_rec_full,	K4, NET, 0xffffff80u },
	{ "records: payload straddles ring end", t_rec_straddle, K4, NET, K4 - 64 },
	{ "records: payload straddles ring end", t_rec_straddle, K4, NET, 0xffffffc0u },

	{ "bytes: random chunks",		t_bytes_pipe,	K64, TTY, 0 },
	{ "bytes: random chunks",		t_bytes_pipe,	K64, TTY, K64 - 1 },
	{ "bytes: random chunks",		t_bytes_pipe,	K64, TTY, 0x7ffffffdu },
	{ "bytes: random chunks",		t_bytes_pipe,	K64, TTY, 0xffffffffu },
	{ "bytes: random chunks",		t_bytes_pipe,	K64, TTY, 0xffffffe9u },
	{ "bytes: random chunks",		t_bytes_pipe,	K64, TTY, 0xfffe0003u },

	{ "kick: event index",			t_kick,		K4, NET, 0 },
	{ "kick: event index",			t_kick,		K4, NET, 0xffffffc0u },
	{ "kick: event index",			t_kick,		K4, NET, 0xffffff40u },
	{ "kick: need_space",			t_need_space,	K4, NET, 0 },
	{ "kick: need_space",			t_need_space,	K4, NET, 0xffffffc0u },

	{ "view: kick decision, kick base",	t_end_batch,	K4, NET, 0 },
	{ "view: kick decision, kick base",	t_end_batch,	K4, NET, 0xffffffc0u },
	{ "view: give-back",			t_give_back,	K4, NET, 0 },
	{ "view: give-back",			t_give_back,	K4, NET, 0xffffff80u },
	{ "view: reserve, wrap, full ring",	t_reserve,	K4, NET, 0 },
	{ "view: reserve, wrap, full ring",	t_reserve,	K4, NET, K4 - 64 },
	{ "view: reserve, wrap, full ring",	t_reserve,	K4, NET, 0xffffffc0u },

	{ "bogus: prod behind cons",		t_bad_prod_behind, K4, NET, 0 },
	{ "bogus: prod behind cons",		t_bad_prod_behind, K4, NET, 0xffffffc0u },
	{ "bogus: prod behind cons (bytes)",	t_bad_prod_behind, K64, TTY, 0 },
	{ "bogus: prod behind cons (bytes)",	t_bad_prod_behind, K64, TTY, 0xfffffffeu },
	{ "bogus: prod over a ring ahead",	t_bad_prod_ahead, K4, NET, 0 },
	{ "bogus: prod over a ring ahead",	t_bad_prod_ahead, K4, NET, 0xffffffc0u },
	{ "bogus: prod over a ring ahead (bytes)", t_bad_prod_ahead, K64, TTY, 0 },
	{ "bogus: prod over a ring ahead (bytes)", t_bad_prod_ahead, K64, TTY, 0xffffffffu },
	{ "bogus: misaligned prod",		t_bad_prod_misaligned, K4, NET, 0 },
	{ "bogus: misaligned prod",		t_bad_prod_misaligned, K4, NET, 0xffffffc0u },
	{ "bogus: record len > max_len",	t_bad_len_max,	K256, NET, 0 },
	{ "bogus: record len > max_len",	t_bad_len_max,	K256, NET, 0xfffff000u },
	{ "bogus: record len > published",	t_bad_len_avail, K4, NET, 0 },
	{ "bogus: record len > published",	t_bad_len_avail, K4, NET, 0xffffffc0u },
	{ "bogus: record len near 2^32",	t_bad_len_huge,	K4, NET, 0 },
	{ "bogus: record len near 2^32",	t_bad_len_huge,	K4, NET, 0xffffffc0u },
	{ "bogus: cons backwards or past prod",	t_bad_cons,	K4, NET, 0 },
	{ "bogus: cons backwards or past prod",	t_bad_cons,	K4, NET, 0xffffffc0u },
	{ "bogus: cons backwards or past prod (bytes)", t_bad_cons, K64, TTY, 0xffffff00u },
	{ "bogus: fuzzed peer, records",	t_fuzz_rec,	K4, NET, 0 },
	{ "bogus: fuzzed peer, records",	t_fuzz_rec,	K4, NET, 0xfffff000u },
	{ "bogus: fuzzed peer, bytes",		t_fuzz_bytes,	K4, TTY, 0xffff0000u },

	{ "reset: indices to zero",		t_reset,	K4, NET, 0 },
	{ "reset: indices to zero",		t_reset,	K4, NET, 0xffffffc0u },
};

static int run_units(void)
{
	int passed = 0, failed = 0;
	u32 i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct tcase *tc = &cases[i];
		char name[160];
		struct fx f;
		int r;

		if (tc->size)
			snprintf(name, sizeof(name), "%s @0x%08x", tc->name,
				 tc->start);
		else
			snprintf(name, sizeof(name), "%s", tc->name);
		why[0] = 0;
		fx_setup(&f, tc->size ? tc->size : K4, tc->chan);
		fx_seek(&f, tc->start);
		r = tc->fn(&f, tc);
		if (!r)
			r = fx_check_fences(&f);
		fx_teardown(&f);
		if (r) {
			printf("FAIL - %s: %s\n", name, why);
			failed++;
		} else {
			printf("ok - %s\n", name);
			passed++;
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* Two-process stress                                                  */
/* ------------------------------------------------------------------ */

/*
 * The window file is laid out like pcinet-fabric would, with a 1 MiB
 * net ring and the 64 KiB tty ring in each data inbox.  The platform's
 * unused space after the control blocks holds what the test needs and a
 * real link has elsewhere: emulated doorbells and the results.
 *
 * Each process is one side of the link and runs both channels in both
 * directions, as the driver does: it sends records on net and bytes on
 * tty, and receives the peer's.  Doorbells are counters in the window;
 * a sleeping endpoint moves only when its counter changes, so a lost
 * wakeup shows as a stall, which fails the test.
 */
#define ST_SHM		0x3000
#define ST_DATA0	PCINET_LAYOUT_DATA_OFF
#define ST_DATA_SIZE	(PCINET_TTY_RING_SIZE + (1u << 20))
#define ST_WIN_SIZE	(ST_DATA0 + 2 * ST_DATA_SIZE)
#define ST_STALL_SECS	10.0
#define ST_LOST_SECS	2.0

#ifdef __SANITIZE_ADDRESS__
#define ST_SANITIZED	1
#else
#define ST_SANITIZED	0
#endif
#define ST_SHIFT	(64 * 1024)	/* side 1's window is offset by this */

enum { DB_DATA, DB_SPACE, NR_DB };

/**
 * struct st_stats - what one side did on one channel
 * @tx_units: records (net) or bytes (tty) sent
 * @tx_bytes: payload bytes sent
 * @rx_units: records or bytes received and verified
 * @rx_bytes: payload bytes received
 * @batches: producer batches, each ending in a kick decision
 * @kicks: data doorbells rung (need_kick said yes)
 * @space_kicks: space doorbells rung (publish said the peer waits)
 * @tx_stops: times the producer slept waiting for space
 * @rx_sleeps: times the consumer armed and slept
 * @rx_arm_races: times arm said records arrived meanwhile
 */
struct st_stats {
	u64 tx_units;
	u64 tx_bytes;
	u64 rx_units;
	u64 rx_bytes;
	u64 batches;
	u64 kicks;
	u64 space_kicks;
	u64 tx_stops;
	u64 rx_sleeps;
	u64 rx_arm_races;
};

/**
 * struct st_shm - the test's area of the window
 * @doorbell: doorbell[s][c][k]: rung by the peer of side s
 * @map_addr: where each side mapped the window
 * @tx_done: side s stopped sending on channel c ...
 * @tx_total: ... after this many records (net) or bytes (tty)
 * @failed: side s failed; @err says why
 * @err: the failure message of side s
 * @stats: per side and channel
 */
struct st_shm {
	u32 doorbell[2][PCINET_NR_RING_CHAN][NR_DB];
	u64 map_addr[2];
	u32 tx_done[2][PCINET_NR_RING_CHAN];
	u64 tx_total[2][PCINET_NR_RING_CHAN];
	u32 failed[2];
	char err[2][256];
	struct st_stats stats[2][PCINET_NR_RING_CHAN];
};

static_assert(ST_SHM + sizeof(struct st_shm) <= ST_DATA0, "st_shm too big");

/* a producer endpoint */
struct st_tx_ep {
	bool stopped;	/* asleep until a space doorbell */
	bool asked;	/* need_space is set */
	bool done;	/* past the deadline, total announced */
	u32 db_seen;	/* doorbell count when it went to sleep */
	u32 need;	/* bytes of room it waits for */
	u32 polls;	/* idle polls, to pace the watchdog */
	double since;	/* watchdog: wake condition met since then */
	u64 seq;	/* next record, or next stream offset */
};

/* a consumer endpoint */
struct st_rx_ep {
	bool asleep;	/* asleep until a data doorbell */
	u32 db_seen;
	u32 polls;
	double since;
	u64 seq;
};

struct st_side {
	int id;
	int peer;
	pid_t child;	/* side 0 only: the other side, to notice it die */
	bool reaped;
	int child_status;
	u8 *win;
	struct st_shm *shm;
	struct pcinet_tx tx[PCINET_NR_RING_CHAN];
	struct pcinet_rx rx[PCINET_NR_RING_CHAN];
	struct st_tx_ep etx[PCINET_NR_RING_CHAN];
	struct st_rx_ep erx[PCINET_NR_RING_CHAN];
	struct st_stats *st;
	double deadline;
	u64 rs;
	u8 *buf;
	u8 *ref;
};

static int st_fail(struct st_side *sd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int st_fail(struct st_side *sd, const char *fmt, ...)
{
	va_list ap;

	if (!__atomic_load_n(&sd->shm->failed[sd->id], __ATOMIC_ACQUIRE)) {
		va_start(ap, fmt);
		vsnprintf(sd->shm->err[sd->id], sizeof(sd->shm->err[0]), fmt, ap);
		va_end(ap);
		__atomic_store_n(&sd->shm->failed[sd->id], 1, __ATOMIC_RELEASE);
	}
	return -1;
}

/* Ring the peer's doorbell (an MSI-X write, say). */
static void st_ring(struct st_side *sd, int chan, int kind)
{
	__atomic_fetch_add(&sd->shm->doorbell[sd->peer][chan][kind], 1,
			   __ATOMIC_SEQ_CST);
}

static u32 st_db(struct st_side *sd, int chan, int kind)
{
	return __atomic_load_n(&sd->shm->doorbell[sd->id][chan][kind],
			       __ATOMIC_SEQ_CST);
}

/* Did our doorbell ring since *@seen?  Then take it. */
static bool st_db_take(struct st_side *sd, int chan, int kind, u32 *seen)
{
	u32 v = st_db(sd, chan, kind);

	if (v == *seen)
		return false;
	*seen = v;
	return true;
}

/* Record @seq of side @sender: its length, header and payload. */
static u32 st_rec_len(int sender, u64 seq)
{
	u64 h = mix64(seq * 2 + sender);

	switch (seq % 1024) {
	case 0:
		return 0;
	case 1:
		return PCINET_NET_MAX_LEN;
	}
	switch (h & 3) {
	case 0:
		return (h >> 8) % 65;
	case 1:
		return (h >> 8) % 1601;
	default:
		return (h >> 8) % (PCINET_NET_MAX_LEN + 1);
	}
}

/* payload: sequence number, checksum of the rest, pseudo-random bytes */
static void st_make_payload(int sender, u64 seq, u8 *buf, u32 len)
{
	fill(buf, len, seq * 2 + sender);
	if (len >= 8) {
		u32 s32 = (u32)seq, sum = fnv32(buf + 8, len - 8);

		memcpy(buf, &s32, 4);
		memcpy(buf + 4, &sum, 4);
	}
}

static void st_announce(struct st_side *sd, int c)
{
	struct st_tx_ep *ep = &sd->etx[c];

	if (ep->asked)
		pcinet_tx_space_ok(&sd->tx[c]);
	ep->asked = false;
	ep->done = true;
	sd->shm->tx_total[sd->id][c] = ep->seq;
	__atomic_store_n(&sd->shm->tx_done[sd->id][c], 1, __ATOMIC_RELEASE);
}

/*
 * Make sure there are @need bytes of room, the way a driver's xmit path
 * would: if not, set need_space, re-check, and go to sleep until a space
 * doorbell.  Return: 1 room, 0 asleep, -1 failure.
 */
static int st_tx_room(struct st_side *sd, int c, u32 need)
{
	struct st_tx_ep *ep = &sd->etx[c];
	struct pcinet_tx *tx = &sd->tx[c];
	int room = pcinet_tx_free(tx);
	u32 snap;

	if (room < 0)
		return st_fail(sd, "chan %d: tx_free %d", c, room);
	if ((u32)room < need) {
		/* read the doorbell before the flag goes up: none is lost */
		snap = st_db(sd, c, DB_SPACE);
		ep->asked = true;
		room = pcinet_tx_wait_space(tx);
		if (room < 0)
			return st_fail(sd, "chan %d: wait_space %d", c, room);
		if ((u32)room < need) {
			ep->stopped = true;
			ep->db_seen = snap;
			ep->need = need;
			ep->since = 0;
			sd->st[c].tx_stops++;
			return 0;
		}
	}
	if (ep->asked) {
		pcinet_tx_space_ok(tx);
		ep->asked = false;
	}
	return 1;
}

/*
 * Lost-wakeup watchdog.  A sleeping endpoint whose wake condition holds
 * (the room it waits for is there, or records are) must get a doorbell
 * within microseconds; if it still sleeps after ST_LOST_SECS, the peer
 * saw the condition change and decided not to ring: a lost wakeup.
 * Without this, a producer that never wakes would go unnoticed: the
 * deadline ends its run anyway.
 */
static int st_watch(struct st_side *sd, int c, bool ready, double *since,
		    const char *who)
{
	double t;

	if (!ready) {
		*since = 0;
		return 0;
	}
	t = now();
	if (!*since)
		*since = t;
	else if (t - *since > ST_LOST_SECS)
		return st_fail(sd, "chan %d: %s asleep %.1f s with its wake "
			       "condition met: lost doorbell", c, who,
			       t - *since);
	return 0;
}

/*
 * End of a producer batch: the kick decision, as the driver's.  Also
 * after a batch that sent nothing (@sent false): the early-out.
 */
static void st_tx_kick(struct st_side *sd, int c, bool sent)
{
	if (sent)
		sd->st[c].batches++;
	if (pcinet_tx_end_batch(&sd->tx[c])) {
		st_ring(sd, c, DB_DATA);
		sd->st[c].kicks++;
	}
}

/* Common producer prologue.  Return: 1 go on, 0 nothing to do, -1 fail. */
static int st_tx_begin(struct st_side *sd, int c)
{
	struct st_tx_ep *ep = &sd->etx[c];
	int room;

	if (ep->done)
		return 0;
	if (now() >= sd->deadline) {
		st_announce(sd, c);
		return 0;
	}
	if (ep->stopped) {
		if (!st_db_take(sd, c, DB_SPACE, &ep->db_seen)) {
			if (++ep->polls & 63)
				return 0;
			room = pcinet_tx_free(&sd->tx[c]);
			if (room < 0)
				return st_fail(sd, "chan %d: tx_free %d", c,
					       room);
			return st_watch(sd, c, (u32)room >= ep->need,
					&ep->since, "producer");
		}
		ep->stopped = false;
	}
	return 1;
}

static int st_net_tx(struct st_side *sd)
{
	const int c = PCINET_CHAN_NET;
	struct st_tx_ep *ep = &sd->etx[c];
	struct pcinet_tx *tx = &sd->tx[c];
	u32 batch, n;
	int r = 0;

	r = st_tx_begin(sd, c);
	if (r <= 0)
		return r;
	batch = 1 + rnd_below(&sd->rs, 16);
	for (n = 0; n < batch; n++) {
		u32 len = st_rec_len(sd->id, ep->seq);
		struct pcinet_span sp;
		struct pcinet_rec rec;
		int size;

		r = st_tx_room(sd, c, pcinet_rec_size(len));
		if (r <= 0)
			break;
		/* as the driver's xmit: header, then payload into the span */
		size = pcinet_tx_reserve(tx, len, &sp);
		if (size != (int)pcinet_rec_size(len)) {
			r = st_fail(sd, "net tx: reserve %d after room", size);
			break;
		}
		rec_hdr(&rec, (u32)ep->seq, len);
		st_make_payload(sd->id, ep->seq, sd->buf, len);
		pcinet_tx_write(tx, 0, &rec, sizeof(rec));
		memcpy(sp.p[0], sd->buf, sp.len[0]);
		memcpy(sp.p[1], sd->buf + sp.len[0], sp.len[1]);
		pcinet_tx_commit(tx, size);
		ep->seq++;
		sd->st[c].tx_units++;
		sd->st[c].tx_bytes += len;
	}
	if (r < 0)
		return -1;
	st_tx_kick(sd, c, n > 0);
	return n > 0;
}

static int st_tty_tx(struct st_side *sd)
{
	const int c = PCINET_CHAN_TTY;
	struct st_tx_ep *ep = &sd->etx[c];
	struct pcinet_tx *tx = &sd->tx[c];
	u32 chunks, n, total = 0;
	int r = 0;

	r = st_tx_begin(sd, c);
	if (r <= 0)
		return r;
	chunks = 1 + rnd_below(&sd->rs, 8);
	for (n = 0; n < chunks; n++) {
		u32 want = 1 + rnd_below(&sd->rs, 4096), len, a, i, k;
		struct pcinet_span sp;
		int room;

		r = st_tx_room(sd, c, 1);
		if (r <= 0)
			break;
		room = pcinet_tx_free(tx);
		if (room <= 0) {
			r = st_fail(sd, "tty tx: tx_free %d after room", room);
			break;
		}
		len = min(want, (u32)room);
		/* two spans at different offsets, filled in place */
		a = rnd_below(&sd->rs, len + 1);
		for (k = 0; k < 2; k++) {
			u32 off = k ? a : 0, l = k ? len - a : a;

			pcinet_tx_span(tx, off, l, &sp);
			for (i = 0; i < sp.len[0]; i++)
				sp.p[0][i] = sbyte(sd->id, ep->seq + off + i);
			for (i = 0; i < sp.len[1]; i++)
				sp.p[1][i] = sbyte(sd->id, ep->seq + off +
						   sp.len[0] + i);
		}
		pcinet_tx_commit(tx, len);
		ep->seq += len;
		total += len;
	}
	if (r < 0)
		return -1;
	sd->st[c].tx_units += total;
	sd->st[c].tx_bytes += total;
	st_tx_kick(sd, c, total > 0);
	return total > 0;
}

/* Give consumed space back, kicking a waiting producer, as the driver. */
static void st_give_back(struct st_side *sd, int c)
{
	if (pcinet_rx_give_back(&sd->rx[c])) {
		st_ring(sd, c, DB_SPACE);
		sd->st[c].space_kicks++;
	}
}

/*
 * Common consumer epilogue, NAPI style: give the space back; if the ring
 * ran dry within the budget, arm and sleep unless something arrived
 * meanwhile.
 */
static void st_rx_end(struct st_side *sd, int c, bool dry)
{
	struct st_rx_ep *ep = &sd->erx[c];
	u32 snap;

	st_give_back(sd, c);
	if (!dry)
		return;
	/* read the doorbell before arming: no kick after the arm is lost */
	snap = st_db(sd, c, DB_DATA);
	if (pcinet_rx_arm(&sd->rx[c])) {
		sd->st[c].rx_arm_races++;
		return;
	}
	ep->asleep = true;
	ep->db_seen = snap;
	ep->since = 0;
	sd->st[c].rx_sleeps++;
}

/* Common consumer prologue.  Return: 1 go on, 0 asleep, -1 fail. */
static int st_rx_begin(struct st_side *sd, int c)
{
	struct st_rx_ep *ep = &sd->erx[c];
	int avail;

	if (ep->asleep) {
		if (!st_db_take(sd, c, DB_DATA, &ep->db_seen)) {
			if (++ep->polls & 63)
				return 0;
			avail = pcinet_rx_avail(&sd->rx[c], 1);
			if (avail < 0)
				return st_fail(sd, "chan %d: rx_avail %d", c,
					       avail);
			return st_watch(sd, c, avail > 0, &ep->since,
					"consumer");
		}
		ep->asleep = false;
	}
	return 1;
}

static int st_net_rx(struct st_side *sd)
{
	const int c = PCINET_CHAN_NET;
	struct st_rx_ep *ep = &sd->erx[c];
	struct pcinet_rx *rx = &sd->rx[c];
	u32 budget, n;
	bool dry = false;
	int r;

	r = st_rx_begin(sd, c);
	if (r <= 0)
		return r;
	budget = 1 + rnd_below(&sd->rs, 32);
	for (n = 0; n < budget; n++) {
		u32 len = st_rec_len(sd->peer, ep->seq), got;
		struct pcinet_rec rec, want;

		r = pcinet_rx_peek_rec(rx, &rec, PCINET_NET_MAX_LEN);
		if (r < 0)
			return st_fail(sd, "net rx: peek %d at record %" PRIu64,
				       r, ep->seq);
		if (!r) {
			dry = true;
			break;
		}
		got = le32_to_cpu(rec.len);
		rec_hdr(&want, (u32)ep->seq, len);
		if (got != len || memcmp(&rec, &want, sizeof(rec)))
			return st_fail(sd, "net rx: record %" PRIu64
				       ": len %u, want %u, or bad header",
				       ep->seq, got, len);
		st_make_payload(sd->peer, ep->seq, sd->ref, len);
		if (ep->seq & 1) {
			struct pcinet_span sp;

			pcinet_rx_span(rx, REC_HDR, len, &sp);
			if (memcmp(sp.p[0], sd->ref, sp.len[0]) ||
			    memcmp(sp.p[1], sd->ref + sp.len[0], sp.len[1]))
				return st_fail(sd, "net rx: record %" PRIu64
					       ": payload differs", ep->seq);
		} else {
			u32 s32, sum;

			pcinet_rx_read(rx, REC_HDR, sd->buf, len);
			if (len >= 8) {
				memcpy(&s32, sd->buf, 4);
				memcpy(&sum, sd->buf + 4, 4);
				if (s32 != (u32)ep->seq)
					return st_fail(sd, "net rx: got record %u, want %" PRIu64,
						       s32, ep->seq);
				if (sum != fnv32(sd->buf + 8, len - 8))
					return st_fail(sd, "net rx: record %" PRIu64
						       ": bad checksum", ep->seq);
			}
			if (memcmp(sd->buf, sd->ref, len))
				return st_fail(sd, "net rx: record %" PRIu64
					       ": payload differs", ep->seq);
		}
		pcinet_rx_consume(rx, r);
		ep->seq++;
		sd->st[c].rx_units++;
		sd->st[c].rx_bytes += len;
		if (pcinet_rx_give_back_due(rx))
			st_give_back(sd, c);
	}
	st_rx_end(sd, c, dry);
	return n > 0;
}

static int st_tty_rx(struct st_side *sd)
{
	const int c = PCINET_CHAN_TTY;
	struct st_rx_ep *ep = &sd->erx[c];
	struct pcinet_rx *rx = &sd->rx[c];
	u32 chunks, n, total = 0, i;
	bool dry = false;
	int r;

	r = st_rx_begin(sd, c);
	if (r <= 0)
		return r;
	chunks = 1 + rnd_below(&sd->rs, 8);
	for (n = 0; n < chunks; n++) {
		int avail = pcinet_rx_avail(rx, 1);
		u32 len;

		if (avail < 0)
			return st_fail(sd, "tty rx: avail %d at byte %" PRIu64,
				       avail, ep->seq);
		if (!avail) {
			dry = true;
			break;
		}
		/* min() evaluates its arguments twice: no calls inside */
		len = 1 + rnd_below(&sd->rs, 8192);
		len = min(len, (u32)avail);
		if (n & 1) {
			struct pcinet_span sp;

			pcinet_rx_span(rx, 0, len, &sp);
			for (i = 0; i < len; i++) {
				u8 b = i < sp.len[0] ? sp.p[0][i] :
					sp.p[1][i - sp.len[0]];

				if (b != sbyte(sd->peer, ep->seq + i))
					goto bad;
			}
		} else {
			pcinet_rx_read(rx, 0, sd->buf, len);
			for (i = 0; i < len; i++)
				if (sd->buf[i] != sbyte(sd->peer, ep->seq + i))
					goto bad;
		}
		pcinet_rx_consume(rx, len);
		ep->seq += len;
		total += len;
		if (pcinet_rx_give_back_due(rx))
			st_give_back(sd, c);
	}
	sd->st[c].rx_units += total;
	sd->st[c].rx_bytes += total;
	st_rx_end(sd, c, dry);
	return total > 0;
bad:
	return st_fail(sd, "tty rx: stream byte %" PRIu64 " differs",
		       ep->seq + i);
}

/* Done: we stopped sending and have everything the peer sent. */
static int st_finished(struct st_side *sd)
{
	int c;

	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		u64 total;

		if (!sd->etx[c].done)
			return 0;
		if (!__atomic_load_n(&sd->shm->tx_done[sd->peer][c],
				     __ATOMIC_ACQUIRE))
			return 0;
		total = sd->shm->tx_total[sd->peer][c];
		if (sd->erx[c].seq > total)
			return st_fail(sd, "chan %d: received %" PRIu64
				       " of %" PRIu64, c, sd->erx[c].seq, total);
		if (sd->erx[c].seq < total)
			return 0;
	}
	return 1;
}

static int st_check_child(struct st_side *sd)
{
	if (!sd->child || sd->reaped)
		return 0;
	if (waitpid(sd->child, &sd->child_status, WNOHANG) != sd->child)
		return 0;
	sd->reaped = true;
	if (__atomic_load_n(&sd->shm->failed[1], __ATOMIC_ACQUIRE))
		return -1;
	if (!WIFEXITED(sd->child_status) || WEXITSTATUS(sd->child_status))
		return st_fail(sd, "side 1 died (status %#x)", sd->child_status);
	return 0;
}

static int st_run(struct st_side *sd)
{
	double last = now();
	unsigned long idle = 0;
	int c, r;

	for (;;) {
		int progress = 0;

		r = st_net_tx(sd);
		if (r < 0)
			return -1;
		progress |= r;
		r = st_tty_tx(sd);
		if (r < 0)
			return -1;
		progress |= r;
		r = st_net_rx(sd);
		if (r < 0)
			return -1;
		progress |= r;
		r = st_tty_rx(sd);
		if (r < 0)
			return -1;
		progress |= r;

		r = st_finished(sd);
		if (r < 0)
			return -1;
		if (r)
			break;
		if (__atomic_load_n(&sd->shm->failed[sd->peer], __ATOMIC_ACQUIRE))
			return st_fail(sd, "peer failed");
		if (progress) {
			last = now();
			idle = 0;
			continue;
		}
		if (!(++idle & 255) && st_check_child(sd) < 0)
			return -1;
		if (now() - last > ST_STALL_SECS)
			return st_fail(sd, "stalled %.0f s (lost doorbell?): "
				       "net tx stopped %d asleep-rx %d, tty tx stopped %d asleep-rx %d",
				       ST_STALL_SECS, sd->etx[0].stopped,
				       sd->erx[0].asleep, sd->etx[1].stopped,
				       sd->erx[1].asleep);
		sched_yield();
	}

	/* everything sent was consumed, and nothing else is on the rings */
	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		r = pcinet_rx_avail(&sd->rx[c], 1);
		if (r)
			return st_fail(sd, "chan %d: %d bytes left over", c, r);
	}
	return 0;
}

/*
 * One side: map the window on its own, check the mapping addresses of
 * the two sides differ, set up the views as pcinet_link.c does, run.
 */
static int st_side(struct st_side *sd, int fd, double secs)
{
	struct pcinet_layout lay;
	void *shift = MAP_FAILED;
	u64 peer_addr = 0;
	double t0;
	int c, r;

	/*
	 * After fork() both address spaces look alike, and the kernel may
	 * align large file mappings, so left alone the two windows tend to
	 * land at the same address.  Side 1 reserves room and maps its
	 * window ST_SHIFT into it instead: whatever pointer a ring function
	 * kept from one mapping would then be wrong in the other.
	 */
	if (sd->id == 1) {
		shift = mmap(NULL, ST_SHIFT + ST_WIN_SIZE, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (shift == MAP_FAILED) {
			perror("mmap");
			return -1;
		}
		sd->win = mmap((u8 *)shift + ST_SHIFT, ST_WIN_SIZE,
			       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			       fd, 0);
	} else {
		sd->win = mmap(NULL, ST_WIN_SIZE, PROT_READ | PROT_WRITE,
			       MAP_SHARED, fd, 0);
	}
	if (sd->win == MAP_FAILED) {
		perror("mmap");
		return -1;
	}
	sd->shm = (struct st_shm *)(sd->win + ST_SHM);
	sd->st = sd->shm->stats[sd->id];
	__atomic_store_n(&sd->shm->map_addr[sd->id], (u64)(uintptr_t)sd->win,
			 __ATOMIC_RELEASE);

	r = -1;
	sd->buf = malloc(PCINET_NET_MAX_LEN + 64);
	sd->ref = malloc(PCINET_NET_MAX_LEN + 64);
	if (!sd->buf || !sd->ref) {
		st_fail(sd, "out of memory");
		goto out;
	}
	for (t0 = now(); !peer_addr && now() - t0 < ST_STALL_SECS;
	     sched_yield())
		peer_addr = __atomic_load_n(&sd->shm->map_addr[sd->peer],
					    __ATOMIC_ACQUIRE);
	if (!peer_addr) {
		st_fail(sd, "the peer never mapped the window");
		goto out;
	}
	if (peer_addr == (u64)(uintptr_t)sd->win) {
		st_fail(sd, "both sides mapped the window at %p", sd->win);
		goto out;
	}

	if (pcinet_layout_parse(sd->win, ST_WIN_SIZE, &lay)) {
		st_fail(sd, "bad window header");
		goto out;
	}
	for (c = 0; c < PCINET_NR_RING_CHAN; c++) {
		struct pcinet_ctrl *in, *out;
		struct pcinet_ring_loc *rl = &lay.ring[sd->id][c];
		struct pcinet_ring_loc *tl = &lay.ring[sd->peer][c];

		in = (struct pcinet_ctrl *)(sd->win + lay.ctrl_off[sd->id]);
		out = (struct pcinet_ctrl *)(sd->win + lay.ctrl_off[sd->peer]);
		pcinet_rx_init(&sd->rx[c], sd->win + rl->off, rl->size,
			       &out->chan[c], &in->chan[c]);
		pcinet_tx_init(&sd->tx[c], sd->win + tl->off, tl->size,
			       &out->chan[c], &in->chan[c]);
	}
	sd->rs = mix64(0x5eed + sd->id) | 1;
	sd->deadline = now() + secs;
	r = st_run(sd);
out:
	free(sd->buf);
	free(sd->ref);
	if (shift != MAP_FAILED)
		munmap(shift, ST_SHIFT + ST_WIN_SIZE);
	else
		munmap(sd->win, ST_WIN_SIZE);
	return r;
}

static int stress(double secs)
{
	const char *dir = getenv("TMPDIR");
	struct st_side sd = { .id = 0, .peer = 1 };
	struct st_stats *n0, *n1, *t0, *t1;
	static u8 hdr[PCINET_HDR_SIZE];
	struct st_shm *shm;
	char path[512];
	double start, el;
	u64 recs, nbytes, tbytes, kicks, skicks, stops, sleeps;
	int fd, r;
	pid_t pid;
	u8 *view;

	snprintf(path, sizeof(path), "%s/pcinet-ring-XXXXXX",
		 dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 2;
	}
	unlink(path);
	/* the platform's job, as pcinet-fabric does it */
	if (pcinet_layout_init(hdr, ST_WIN_SIZE, PCINET_NR_VEC) ||
	    ftruncate(fd, ST_WIN_SIZE) ||
	    pwrite(fd, hdr, sizeof(hdr), 0) != sizeof(hdr)) {
		perror("window file");
		return 2;
	}

	fflush(stdout);
	start = now();
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (!pid) {
		struct st_side child = { .id = 1, .peer = 0 };

		r = st_side(&child, fd, secs);
		close(fd);
		exit(r ? 1 : 0);
	}
	sd.child = pid;
	r = st_side(&sd, fd, secs);
	if (!sd.reaped && waitpid(pid, &sd.child_status, 0) == pid)
		sd.reaped = true;
	el = now() - start;

	/* a third mapping, to read the results */
	view = mmap(NULL, ST_WIN_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (view == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	shm = (struct st_shm *)(view + ST_SHM);
	if (r || shm->failed[0] || shm->failed[1] || !sd.reaped ||
	    !WIFEXITED(sd.child_status) || WEXITSTATUS(sd.child_status)) {
		printf("FAIL - stress: side 0: %s; side 1: %s (status %#x)\n",
		       shm->failed[0] ? shm->err[0] : "ok",
		       shm->failed[1] ? shm->err[1] : "ok", sd.child_status);
		printf("0 passed, 1 failed\n");
		munmap(view, ST_WIN_SIZE);
		return 1;
	}

	n0 = &shm->stats[0][PCINET_CHAN_NET];
	n1 = &shm->stats[1][PCINET_CHAN_NET];
	t0 = &shm->stats[0][PCINET_CHAN_TTY];
	t1 = &shm->stats[1][PCINET_CHAN_TTY];
	recs = n0->rx_units + n1->rx_units;
	nbytes = n0->rx_bytes + n1->rx_bytes;
	tbytes = t0->rx_bytes + t1->rx_bytes;
	kicks = n0->kicks + n1->kicks;
	skicks = n0->space_kicks + n1->space_kicks;
	stops = n0->tx_stops + n1->tx_stops;
	sleeps = n0->rx_sleeps + n1->rx_sleeps;

	printf("# stress: %.2f s, window mapped at %#" PRIx64 " and %#" PRIx64
	       ", %u KiB net rings, %u KiB tty rings, full duplex\n", el,
	       shm->map_addr[0], shm->map_addr[1],
	       (ST_DATA_SIZE - PCINET_TTY_RING_SIZE) / 1024,
	       PCINET_TTY_RING_SIZE / 1024);
	printf("# net: %" PRIu64 " + %" PRIu64 " records, %" PRIu64
	       " data kicks (%.4f kicks/record, %" PRIu64 " batches), %" PRIu64
	       " space kicks, %" PRIu64 " tx stops, %" PRIu64 " rx sleeps, %"
	       PRIu64 " arm races\n", n1->rx_units, n0->rx_units, kicks,
	       recs ? (double)kicks / recs : 0.0, n0->batches + n1->batches,
	       skicks, stops, sleeps, n0->rx_arm_races + n1->rx_arm_races);
	printf("# tty: %" PRIu64 " + %" PRIu64 " bytes, %" PRIu64
	       " data kicks (%" PRIu64 " batches), %" PRIu64 " space kicks, %"
	       PRIu64 " tx stops, %" PRIu64 " rx sleeps\n", t1->rx_bytes,
	       t0->rx_bytes, t0->kicks + t1->kicks, t0->batches + t1->batches,
	       t0->space_kicks + t1->space_kicks, t0->tx_stops + t1->tx_stops,
	       t0->rx_sleeps + t1->rx_sleeps);
	printf("# rate: %.0f records/s, net %.1f MB/s, tty %.1f MB/s "
	       "(both directions%s)\n", recs / el, nbytes / el / 1e6,
	       tbytes / el / 1e6, ST_SANITIZED ? ", ASan build" : "");
	r = !n0->rx_units || !n1->rx_units || !t0->rx_bytes || !t1->rx_bytes;
	munmap(view, ST_WIN_SIZE);
	if (r) {
		printf("FAIL - stress: no traffic in some direction\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	printf("ok - stress: 2 processes, %.0f s, records and byte stream both ways\n",
	       secs);
	printf("1 passed, 0 failed\n");
	return 0;
}

/* ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: ring_test [--stress [seconds]]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "--stress")) {
		double secs = 3.0;

		if (argc > 3)
			usage();
		if (argc == 3) {
			char *end;

			secs = strtod(argv[2], &end);
			if (*end || !(secs > 0))
				usage();
		}
		return stress(secs);
	}
	if (argc != 1)
		usage();
	return run_units();
}
