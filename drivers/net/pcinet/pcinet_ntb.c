// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet backend on the kernel's NTB API (include/linux/ntb.h): a pcinet
 * link on every NTB port, for two hosts behind a non-transparent bridge
 * (Intel, AMD, IDT, Switchtec, pci-epf-vntb...).
 *
 * Each side allocates a local window of win_size bytes, lays the pcinet
 * header out in it (both sides compute the same one) and translates its
 * inbound memory window mw to it (ntb_mw_set_trans()): that copy is
 * where it reads its own regions, from its own RAM.  It writes the
 * peer's regions, at the same offsets, through its outbound window
 * (ntb_peer_mw_get_addr(), mapped write-combining): posted writes that
 * land in the peer's copy.  No side reads across the bridge.
 *
 * Setup goes through the peer's scratchpads (each side writes the
 * other's, reads its own): a magic, the window size and a nonce, written
 * once the translation is set and cleared before it goes away; and the
 * peer's nonce whose window a side writes to, so that a side that goes
 * away frees its window only once the peer stopped writing there.  The link
 * writes to the peer's window only while the NTB link is up and the
 * peer's scratchpads say its translation is set, for the nonce it last
 * read (pcinet_link_set_peer_window()); a peer that reloads or reboots
 * shows a new nonce, which the link takes for a peer that went away and
 * came back (its attach epoch, in our copy of the header).  Doorbells
 * are doorbell bits: pcinet vector v is bit v.  What the peer writes
 * stays untrusted, as on every backend: the link checks it all.
 *
 * Knows no skbs and no channel.  Several NTB devices: several links.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/ntb.h>
#include <linux/random.h>
#include <linux/workqueue.h>

#include "pcinet_backend.h"

/* Scratchpads, written by the peer into ours (and by us into its). */
#define PCINET_NTB_SPAD_MAGIC	0
#define PCINET_NTB_SPAD_SIZE	1	/* window size, in 64 KiB units */
#define PCINET_NTB_SPAD_NONCE	2	/* nonzero: translation set */
#define PCINET_NTB_SPAD_USING	3	/* the nonce whose window one writes */
#define PCINET_NTB_NR_SPADS	4
#define PCINET_NTB_MAGIC	0x42544e50	/* "PNTB" */
#define PCINET_NTB_SIZE_UNIT	0x10000
#define PCINET_NTB_POLL		(HZ / 10)
/* Doorbell bit of the setup: the peer's scratchpads changed. */
#define PCINET_NTB_DB_SETUP	PCINET_NR_VEC

static unsigned int win_size_mb = 16;
module_param(win_size_mb, uint, 0444);
MODULE_PARM_DESC(win_size_mb,
		 "window size in MiB, at most the memory window (default 16)");

static unsigned int mw;
module_param(mw, uint, 0444);
MODULE_PARM_DESC(mw, "memory window to use on each NTB device (default 0)");

/**
 * struct pcinet_ntb - pcinet on one NTB device
 * @ntb: the device
 * @win: our copy of the window: inbound translation target, read locally
 * @win_dma: its bus address
 * @size: its size
 * @peer_win: the peer's copy, through our outbound window (WC)
 * @link: the link on top
 * @nonce: what we published in the peer's scratchpads
 * @peer_nonce: the peer's nonce while we write to its window, else 0
 * @epoch: attach_epoch of the peer in our header copy: odd while we
 *	write to its window
 * @side: our side of the window
 * @announced: the peer was rung once for our scratchpads
 * @translated: our inbound window is translated to @win (it can be done
 *	only with the link up: ntb_mw_get_align() needs it)
 * @bad_window: the device cannot translate to @win: said once, given up
 * @lock: serialises @setup_work against remove
 * @setup_work: follows the NTB link and the peer's scratchpads
 * @stopping: remove began: no more setup
 */
struct pcinet_ntb {
	struct ntb_dev *ntb;
	void *win;
	dma_addr_t win_dma;
	u64 size;
	void *peer_win;
	struct pcinet_link *link;
	u32 nonce;
	u32 peer_nonce;
	u32 epoch;
	unsigned int side;
	bool announced;
	bool translated;
	bool bad_window;
	struct mutex lock;	/* setup against remove */
	struct delayed_work setup_work;
	bool stopping;
};

static void pcinet_ntb_notify(void *bdata, unsigned int vector)
{
	struct pcinet_ntb *pn = bdata;

	/*
	 * The write-combined stores before the doorbell reach the peer
	 * first: pairs with the peer's reads after its doorbell interrupt.
	 */
	wmb();
	ntb_peer_db_set(pn->ntb, BIT_ULL(vector));
}

static const struct pcinet_backend_ops pcinet_ntb_ops = {
	.notify = pcinet_ntb_notify,
};

/* The peer's nonce, if its scratchpads describe a window like ours. */
static u32 pcinet_ntb_peer_nonce(struct pcinet_ntb *pn)
{
	struct ntb_dev *ntb = pn->ntb;

	if (ntb_link_is_up(ntb, NULL, NULL) != 1)
		return 0;
	if (ntb_spad_read(ntb, PCINET_NTB_SPAD_MAGIC) != PCINET_NTB_MAGIC)
		return 0;
	if (ntb_spad_read(ntb, PCINET_NTB_SPAD_SIZE) !=
	    pn->size / PCINET_NTB_SIZE_UNIT) {
		dev_warn_ratelimited(&ntb->dev,
				     "peer's window is %u x 64 KiB, ours %llu: set win_size_mb alike\n",
				     ntb_spad_read(ntb, PCINET_NTB_SPAD_SIZE),
				     pn->size / PCINET_NTB_SIZE_UNIT);
		return 0;
	}
	return ntb_spad_read(ntb, PCINET_NTB_SPAD_NONCE);
}

/* Our attach_epoch[peer]: odd while the peer's window is ours to write. */
static void pcinet_ntb_set_epoch(struct pcinet_ntb *pn, bool attached)
{
	struct pcinet_win_hdr *hdr = pn->win;

	if ((pn->epoch & 1) == attached)
		return;
	pn->epoch++;
	WRITE_ONCE(hdr->attach_epoch[!pn->side], cpu_to_le32(pn->epoch));
}

static unsigned int pcinet_ntb_side(struct ntb_dev *ntb)
{
	return ntb_port_number(ntb) < ntb_peer_port_number(ntb, 0) ? 0 : 1;
}

/* Translate our inbound window to @win, if the device can. */
static void pcinet_ntb_translate(struct pcinet_ntb *pn)
{
	resource_size_t addr_align, size_align, size_max;
	struct ntb_dev *ntb = pn->ntb;
	int err;

	err = ntb_mw_get_align(ntb, 0, mw, &addr_align, &size_align,
			       &size_max);
	if (!err && (!IS_ALIGNED(pn->win_dma, addr_align) ||
		     !IS_ALIGNED(pn->size, size_align) || pn->size > size_max))
		err = -ERANGE;
	if (!err)
		err = ntb_mw_set_trans(ntb, 0, mw, pn->win_dma, pn->size);
	if (err) {
		dev_err(&ntb->dev,
			"memory window %u cannot be translated to the %llu KiB window at %pad: %d\n",
			mw, pn->size >> 10, &pn->win_dma, err);
		pn->bad_window = true;
		return;
	}
	pn->translated = true;
}

/*
 * Forget what the peer wrote in our scratchpads: a peer that went away
 * left its nonce there, and the next one (a reboot) must not be taken
 * for it before it wrote its own.  A running peer rewrites them within
 * a poll.
 */
static void pcinet_ntb_forget_peer(struct pcinet_ntb *pn)
{
	ntb_spad_write(pn->ntb, PCINET_NTB_SPAD_NONCE, 0);
	ntb_spad_write(pn->ntb, PCINET_NTB_SPAD_MAGIC, 0);
}

static void pcinet_ntb_setup_work(struct work_struct *work)
{
	struct pcinet_ntb *pn = container_of(to_delayed_work(work),
					     struct pcinet_ntb, setup_work);
	u32 nonce;

	mutex_lock(&pn->lock);
	if (pn->stopping)
		goto out;
	if (!pn->translated && !pn->bad_window &&
	    ntb_link_is_up(pn->ntb, NULL, NULL) == 1)
		pcinet_ntb_translate(pn);
	/* Ours, again: a peer that rebooted lost what we wrote there. */
	ntb_peer_spad_write(pn->ntb, 0, PCINET_NTB_SPAD_SIZE,
			    pn->size / PCINET_NTB_SIZE_UNIT);
	ntb_peer_spad_write(pn->ntb, 0, PCINET_NTB_SPAD_NONCE,
			    pn->translated ? pn->nonce : 0);
	ntb_peer_spad_write(pn->ntb, 0, PCINET_NTB_SPAD_MAGIC,
			    PCINET_NTB_MAGIC);
	ntb_peer_spad_write(pn->ntb, 0, PCINET_NTB_SPAD_USING, pn->peer_nonce);
	if (!pn->announced) {
		pn->announced = true;
		ntb_peer_db_set(pn->ntb, BIT_ULL(PCINET_NTB_DB_SETUP));
	}

	if (ntb_link_is_up(pn->ntb, NULL, NULL) != 1)
		pcinet_ntb_forget_peer(pn);
	nonce = pcinet_ntb_peer_nonce(pn);
	if (nonce == pn->peer_nonce)
		goto out;
	if (pn->peer_nonce) {
		/* Gone, or back with a new window: stop writing first. */
		pcinet_link_set_peer_window(pn->link, NULL);
		pcinet_ntb_set_epoch(pn, false);
		dev_info(&pn->ntb->dev, "peer window gone\n");
	}
	pn->peer_nonce = nonce;
	if (nonce) {
		pcinet_ntb_set_epoch(pn, true);
		pcinet_link_set_peer_window(pn->link, pn->peer_win);
		dev_info(&pn->ntb->dev, "peer window up\n");
	}
	ntb_peer_spad_write(pn->ntb, 0, PCINET_NTB_SPAD_USING, nonce);
	ntb_peer_db_set(pn->ntb, BIT_ULL(PCINET_NTB_DB_SETUP));
out:
	if (!pn->stopping)
		mod_delayed_work(system_wq, &pn->setup_work, PCINET_NTB_POLL);
	mutex_unlock(&pn->lock);
}

static void pcinet_ntb_link_event(void *ctx)
{
	struct pcinet_ntb *pn = ctx;

	mod_delayed_work(system_wq, &pn->setup_work, 0);
}

static void pcinet_ntb_db_event(void *ctx, int vec)
{
	struct pcinet_ntb *pn = ctx;
	u64 bits = ntb_db_read(pn->ntb) & ntb_db_vector_mask(pn->ntb, vec);
	unsigned int v;

	/* Cleared before the handlers read: a later ring is not lost. */
	ntb_db_clear(pn->ntb, bits);
	for (v = 0; v < PCINET_NR_VEC; v++)
		if (bits & BIT_ULL(v))
			pcinet_link_doorbell(pn->link, v);
	if (bits & BIT_ULL(PCINET_NTB_DB_SETUP))
		mod_delayed_work(system_wq, &pn->setup_work, 0);
}

static const struct ntb_ctx_ops pcinet_ntb_ctx_ops = {
	.link_event = pcinet_ntb_link_event,
	.db_event = pcinet_ntb_db_event,
};

static int pcinet_ntb_probe(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct device *dma_dev = ntb_get_dma_dev(ntb);
	struct pcinet_link_cfg cfg = {};
	resource_size_t out_size;
	phys_addr_t out_base;
	struct pcinet_ntb *pn;
	u64 size;
	int err;

	if (ntb_peer_port_count(ntb) != 1 || (int)mw >= ntb_mw_count(ntb, 0) ||
	    ntb_spad_count(ntb) < PCINET_NTB_NR_SPADS ||
	    !(ntb_db_valid_mask(ntb) & BIT_ULL(PCINET_NTB_DB_SETUP))) {
		dev_info(&ntb->dev, "not usable: needs one peer, memory window %u, %d scratchpads, %d doorbell bits\n",
			 mw, PCINET_NTB_NR_SPADS, PCINET_NTB_DB_SETUP + 1);
		return -ENODEV;
	}
	err = ntb_peer_mw_get_addr(ntb, mw, &out_base, &out_size);
	if (err)
		return err;
	/* The alignment rules are known only with the link up: see there. */
	size = min_t(u64, (u64)win_size_mb << 20, out_size);
	size = round_down(size, PCINET_NTB_SIZE_UNIT);
	if (!size)
		return -ENOSPC;

	pn = devm_kzalloc(&ntb->dev, sizeof(*pn), GFP_KERNEL);
	if (!pn)
		return -ENOMEM;
	pn->ntb = ntb;
	pn->size = size;
	mutex_init(&pn->lock);
	INIT_DELAYED_WORK(&pn->setup_work, pcinet_ntb_setup_work);
	pn->nonce = get_random_u32() | 1;
	pn->side = pcinet_ntb_side(ntb);

	pn->win = dma_alloc_coherent(dma_dev, size, &pn->win_dma, GFP_KERNEL);
	if (!pn->win)
		return -ENOMEM;
	/* The platform's job on this bus: both sides write the same. */
	if (pcinet_layout_init(pn->win, size, PCINET_NR_VEC)) {
		err = -ENOSPC;
		goto abort_with_win;
	}
	pn->peer_win = memremap(out_base, size, MEMREMAP_WC);
	if (!pn->peer_win) {
		err = -ENOMEM;
		goto abort_with_win;
	}

	cfg.dev = &ntb->dev;
	cfg.win = pn->win;
	cfg.size = size;
	cfg.side = pn->side;
	cfg.nr_vectors = PCINET_NR_VEC;
	cfg.ops = &pcinet_ntb_ops;
	cfg.bdata = pn;
	cfg.gated = true;
	pn->link = pcinet_link_create(&cfg);
	if (IS_ERR(pn->link)) {
		err = PTR_ERR(pn->link);
		goto abort_with_map;
	}
	err = ntb_set_ctx(ntb, pn, &pcinet_ntb_ctx_ops);
	if (err)
		goto abort_with_link;
	pcinet_ntb_forget_peer(pn);
	ntb_db_clear_mask(ntb, GENMASK_ULL(PCINET_NTB_DB_SETUP, 0));
	pcinet_link_start(pn->link);
	ntb_link_enable(ntb, NTB_SPEED_AUTO, NTB_WIDTH_AUTO);
	schedule_delayed_work(&pn->setup_work, 0);
	dev_info(&ntb->dev, "pcinet side %u, %llu KiB window in memory window %u\n",
		 cfg.side, size >> 10, mw);
	return 0;

abort_with_link:
	pcinet_link_destroy(pn->link);
abort_with_map:
	memunmap(pn->peer_win);
abort_with_win:
	dma_free_coherent(dma_dev, size, pn->win, pn->win_dma);
	return err;
}

static void pcinet_ntb_remove(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct pcinet_ntb *pn = ntb->ctx;
	unsigned long deadline;

	mutex_lock(&pn->lock);
	pn->stopping = true;
	mutex_unlock(&pn->lock);
	cancel_delayed_work_sync(&pn->setup_work);
	/*
	 * The peer stops writing to us before our window goes away: it
	 * says so in our USING scratchpad (a peer that is gone writes
	 * nothing; one that does not answer is given a second).
	 */
	ntb_peer_spad_write(ntb, 0, PCINET_NTB_SPAD_NONCE, 0);
	ntb_peer_db_set(ntb, BIT_ULL(PCINET_NTB_DB_SETUP));
	deadline = jiffies + HZ;
	while (ntb_link_is_up(ntb, NULL, NULL) == 1 &&
	       ntb_spad_read(ntb, PCINET_NTB_SPAD_USING) == pn->nonce &&
	       time_before(jiffies, deadline))
		usleep_range(10000, 20000);
	pcinet_link_stop(pn->link);
	ntb_link_disable(ntb);
	ntb_db_set_mask(ntb, GENMASK_ULL(PCINET_NTB_DB_SETUP, 0));
	ntb_clear_ctx(ntb);
	pcinet_link_destroy(pn->link);
	if (pn->translated)
		ntb_mw_clear_trans(ntb, 0, mw);
	memunmap(pn->peer_win);
	dma_free_coherent(ntb_get_dma_dev(ntb), pn->size, pn->win, pn->win_dma);
}

static struct ntb_client pcinet_ntb_client = {
	.ops = {
		.probe = pcinet_ntb_probe,
		.remove = pcinet_ntb_remove,
	},
};
module_ntb_client(pcinet_ntb_client);

MODULE_DESCRIPTION("pcinet backend on NTB devices");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(PCINET);
