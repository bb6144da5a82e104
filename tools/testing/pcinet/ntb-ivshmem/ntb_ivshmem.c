// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test-only hardware, not product code: an NTB device emulated over QEMU's
 * ivshmem-doorbell, so that the kernel's NTB stack (ntb core, ntb_transport,
 * ntb_netdev, ntb_tool, ntb_perf) and pcinet_ntb run between two QEMU
 * guests.  QEMU emulates no non-transparent bridge; this driver is the
 * hardware driver (struct ntb_dev_ops) of one made of shared memory.
 *
 * The shared memory comes from pcinet-fabric -N, which lays it out
 * (ntb_ivshmem_layout.h): per side a block of "registers" (scratchpads,
 * doorbell counters, link enable) and an inbound memory window.  What the
 * peer writes through its outbound window (ntb_peer_mw_get_addr(): the
 * other side's inbound window in the BAR) lands in this side's inbound
 * window, which this side reads through its own mapping: reads stay
 * local, as on an NTB whose inbound window is translated to local RAM.
 *
 * What the emulation cannot do is translate the inbound window to any
 * address: the peer's writes can only land in the shared memory.  So the
 * device's DMA allocations (dma_alloc_coherent() on the PCI device, what
 * every NTB client uses for its inbound buffer) come from this side's
 * inbound window, and ntb_mw_set_trans() accepts only an address that
 * starts it.  A client that allocates its buffer first and translates
 * the window to it, as all of them do, sees a real NTB.
 *
 * Doorbell bits: the ringer counts each bit it rings in the receiver's
 * registers (one writer per word) and rings the receiver's ivshmem vector
 * (bit % vectors); the receiver reports a bit pending while the count
 * differs from the one it last cleared.  Link: up while both sides have
 * enabled it during their current attachment (the fabric's attach epoch),
 * checked on every vector-0 interrupt and every 50 ms.
 *
 * Binds only an ivshmem device whose shared memory starts with the
 * emulation's magic; pcinet's own ivshmem backend leaves such a device
 * alone (no pcinet header).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitops.h>
#include <linux/dma-map-ops.h>
#include <linux/genalloc.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/ntb.h>
#include <linux/pci.h>
#include <linux/workqueue.h>

#include "ntb_ivshmem_layout.h"

#define IVSHMEM_VENDOR		0x1af4
#define IVSHMEM_DEVICE		0x1110
#define IVSHMEM_REG_BAR		0
#define IVSHMEM_MEM_BAR		2
#define IVSHMEM_IV_POSITION	0x08
#define IVSHMEM_DOORBELL	0x0c
#define NTBE_MAX_VECTORS	16
#define NTBE_LINK_POLL_MS	50

/**
 * struct ntbe - one emulated NTB device
 * @ntb: the NTB device the core sees
 * @pdev: the ivshmem device under it
 * @regs: ivshmem's BAR0 (doorbell register)
 * @meta: the first 64 KiB of the shared memory (header, registers)
 * @hdr: the fabric's header, in @meta
 * @own: our registers, in @meta
 * @peer_regs: the peer's registers, in @meta
 * @mw: our inbound window, mapped write-back
 * @mw_dma: its bus address (what ntb_mw_set_trans() must be given)
 * @peer_mw_phys: the peer's inbound window, our outbound window
 * @mw_size: bytes of each window
 * @side: our side, the low bit of our IVPosition
 * @nr_vectors: MSI-X vectors in use
 * @pool: the DMA allocations, carved from @mw
 * @lock: protects @seen, @mask and the peer's db_count words
 * @link_lock: serialises link checks: one event per change
 * @seen: db_count of each bit when it was last cleared
 * @mask: masked doorbell bits
 * @link_up: the link state last reported to the core
 * @link_work: polls the link state
 * @db_work: reports pending bits that a db_clear_mask() unmasked
 * @vec: per-vector interrupt context
 * @irq_name: names in /proc/interrupts
 */
struct ntbe {
	struct ntb_dev ntb;
	struct pci_dev *pdev;
	void __iomem *regs;
	void *meta;
	const struct ntbe_hdr *hdr;
	struct ntbe_regs *own;
	struct ntbe_regs *peer_regs;
	void *mw;
	dma_addr_t mw_dma;
	phys_addr_t peer_mw_phys;
	u64 mw_size;
	unsigned int side;
	unsigned int nr_vectors;
	struct gen_pool *pool;
	spinlock_t lock;	/* see above */
	struct mutex link_lock;	/* see above */
	u32 seen[NTBE_DB_BITS];
	u64 mask;
	bool link_up;
	struct delayed_work link_work;
	struct work_struct db_work;
	struct ntbe_vec {
		struct ntbe *e;
		unsigned int v;
	} vec[NTBE_MAX_VECTORS];
	char irq_name[NTBE_MAX_VECTORS][32];
};

#define NTBE_DB_VALID	GENMASK_ULL(NTBE_DB_BITS - 1, 0)

static struct ntbe *to_ntbe(struct ntb_dev *ntb)
{
	return container_of(ntb, struct ntbe, ntb);
}

static u32 ntbe_rd(const __le32 *p)
{
	return le32_to_cpu(READ_ONCE(*p));
}

static void ntbe_wr(__le32 *p, u32 v)
{
	WRITE_ONCE(*p, cpu_to_le32(v));
}

/* Ring vector @v of the peer. */
static void ntbe_ring(struct ntbe *e, unsigned int v)
{
	u32 id = ntbe_rd(&e->hdr->doorbell_id[!e->side]);

	writel((id & 0xffff) << 16 | v, e->regs + IVSHMEM_DOORBELL);
}

/* ----- link ----- */

static bool ntbe_link_state(struct ntbe *e)
{
	u32 own = ntbe_rd(&e->hdr->attach_epoch[e->side]);
	u32 peer = ntbe_rd(&e->hdr->attach_epoch[!e->side]);

	return (own & 1) && (peer & 1) &&
	       ntbe_rd(&e->own->link_epoch) == own &&
	       ntbe_rd(&e->peer_regs->link_epoch) == peer;
}

/* Report a change of the link state to the client; process context. */
static void ntbe_link_check(struct ntbe *e)
{
	bool up, changed;

	mutex_lock(&e->link_lock);
	up = ntbe_link_state(e);
	changed = up != e->link_up;
	WRITE_ONCE(e->link_up, up);
	if (changed) {
		dev_info(&e->pdev->dev, "link %s\n", up ? "up" : "down");
		ntb_link_event(&e->ntb);
	}
	mutex_unlock(&e->link_lock);
}

static void ntbe_link_work(struct work_struct *work)
{
	struct ntbe *e = container_of(to_delayed_work(work), struct ntbe,
				      link_work);

	ntbe_link_check(e);
	mod_delayed_work(system_wq, &e->link_work,
			 msecs_to_jiffies(NTBE_LINK_POLL_MS));
}

static u64 ntbe_link_is_up(struct ntb_dev *ntb, enum ntb_speed *speed,
			   enum ntb_width *width)
{
	struct ntbe *e = to_ntbe(ntb);
	bool up = READ_ONCE(e->link_up);

	if (speed)
		*speed = up ? NTB_SPEED_GEN3 : NTB_SPEED_NONE;
	if (width)
		*width = up ? NTB_WIDTH_4 : NTB_WIDTH_NONE;
	return up;
}

static int ntbe_link_enable(struct ntb_dev *ntb, enum ntb_speed max_speed,
			    enum ntb_width max_width)
{
	struct ntbe *e = to_ntbe(ntb);

	ntbe_wr(&e->own->link_epoch,
		ntbe_rd(&e->hdr->attach_epoch[e->side]));
	ntbe_ring(e, 0);
	/*
	 * At once, not from the work: a client that asks ntb_link_is_up()
	 * right after this (ntb_transport) must see the state that its
	 * own enable made, or a down-then-up pair of events races it.
	 */
	ntbe_link_check(e);
	return 0;
}

static int ntbe_link_disable(struct ntb_dev *ntb)
{
	struct ntbe *e = to_ntbe(ntb);

	ntbe_wr(&e->own->link_epoch, 0);
	ntbe_ring(e, 0);
	ntbe_link_check(e);
	return 0;
}

/* ----- memory windows ----- */

static int ntbe_mw_count(struct ntb_dev *ntb, int pidx)
{
	return pidx ? -EINVAL : 1;
}

static int ntbe_mw_get_align(struct ntb_dev *ntb, int pidx, int widx,
			     resource_size_t *addr_align,
			     resource_size_t *size_align,
			     resource_size_t *size_max)
{
	struct ntbe *e = to_ntbe(ntb);

	if (pidx || widx)
		return -EINVAL;
	if (addr_align)
		*addr_align = PAGE_SIZE;
	if (size_align)
		*size_align = PAGE_SIZE;
	if (size_max)
		*size_max = e->mw_size;
	return 0;
}

static int ntbe_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx,
			     dma_addr_t addr, resource_size_t size)
{
	struct ntbe *e = to_ntbe(ntb);

	if (pidx || widx || !size || size > e->mw_size)
		return -EINVAL;
	/* The only translation the emulation can do: see the top. */
	if (addr != e->mw_dma) {
		dev_err(&e->pdev->dev,
			"translation to %pad: only the window's own %pad\n",
			&addr, &e->mw_dma);
		return -EINVAL;
	}
	WRITE_ONCE(e->own->xlat_addr, cpu_to_le64(addr));
	WRITE_ONCE(e->own->xlat_size, cpu_to_le64(size));
	return 0;
}

static int ntbe_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx)
{
	struct ntbe *e = to_ntbe(ntb);

	if (pidx || widx)
		return -EINVAL;
	WRITE_ONCE(e->own->xlat_size, 0);
	WRITE_ONCE(e->own->xlat_addr, 0);
	return 0;
}

static int ntbe_peer_mw_count(struct ntb_dev *ntb)
{
	return 1;
}

static int ntbe_peer_mw_get_addr(struct ntb_dev *ntb, int widx,
				 phys_addr_t *base, resource_size_t *size)
{
	struct ntbe *e = to_ntbe(ntb);

	if (widx)
		return -EINVAL;
	if (base)
		*base = e->peer_mw_phys;
	if (size)
		*size = e->mw_size;
	return 0;
}

/* ----- doorbells ----- */

static u64 ntbe_pending(struct ntbe *e)
{
	u64 bits = 0;
	unsigned int b;

	lockdep_assert_held(&e->lock);
	for (b = 0; b < NTBE_DB_BITS; b++)
		if (ntbe_rd(&e->own->db_count[b]) != e->seen[b])
			bits |= BIT_ULL(b);
	return bits;
}

static u64 ntbe_db_valid_mask(struct ntb_dev *ntb)
{
	return NTBE_DB_VALID;
}

static int ntbe_db_vector_count(struct ntb_dev *ntb)
{
	return to_ntbe(ntb)->nr_vectors;
}

static u64 ntbe_db_vector_mask(struct ntb_dev *ntb, int v)
{
	struct ntbe *e = to_ntbe(ntb);
	u64 bits = 0;
	unsigned int b;

	if (v < 0 || v >= e->nr_vectors)
		return 0;
	for (b = v; b < NTBE_DB_BITS; b += e->nr_vectors)
		bits |= BIT_ULL(b);
	return bits;
}

static u64 ntbe_db_read(struct ntb_dev *ntb)
{
	struct ntbe *e = to_ntbe(ntb);
	unsigned long flags;
	u64 bits;

	spin_lock_irqsave(&e->lock, flags);
	bits = ntbe_pending(e);
	spin_unlock_irqrestore(&e->lock, flags);
	return bits;
}

static int ntbe_db_clear(struct ntb_dev *ntb, u64 bits)
{
	struct ntbe *e = to_ntbe(ntb);
	unsigned long flags;
	unsigned int b;

	if (bits & ~NTBE_DB_VALID)
		return -EINVAL;
	spin_lock_irqsave(&e->lock, flags);
	for_each_set_bit(b, (unsigned long *)&bits, NTBE_DB_BITS)
		e->seen[b] = ntbe_rd(&e->own->db_count[b]);
	spin_unlock_irqrestore(&e->lock, flags);
	return 0;
}

static u64 ntbe_db_read_mask(struct ntb_dev *ntb)
{
	return READ_ONCE(to_ntbe(ntb)->mask);
}

static int ntbe_db_set_mask(struct ntb_dev *ntb, u64 bits)
{
	struct ntbe *e = to_ntbe(ntb);
	unsigned long flags;

	if (bits & ~NTBE_DB_VALID)
		return -EINVAL;
	spin_lock_irqsave(&e->lock, flags);
	e->mask |= bits;
	spin_unlock_irqrestore(&e->lock, flags);
	return 0;
}

static int ntbe_db_clear_mask(struct ntb_dev *ntb, u64 bits)
{
	struct ntbe *e = to_ntbe(ntb);
	unsigned long flags;
	bool pending;

	if (bits & ~NTBE_DB_VALID)
		return -EINVAL;
	spin_lock_irqsave(&e->lock, flags);
	e->mask &= ~bits;
	pending = ntbe_pending(e) & bits;
	spin_unlock_irqrestore(&e->lock, flags);
	/* Unmasking a pending bit interrupts, as on hardware. */
	if (pending)
		schedule_work(&e->db_work);
	return 0;
}

static void ntbe_db_work(struct work_struct *work)
{
	struct ntbe *e = container_of(work, struct ntbe, db_work);
	unsigned int v;
	u64 bits;

	spin_lock_irq(&e->lock);
	bits = ntbe_pending(e) & ~e->mask;
	spin_unlock_irq(&e->lock);
	for (v = 0; v < e->nr_vectors; v++)
		if (bits & ntbe_db_vector_mask(&e->ntb, v))
			ntb_db_event(&e->ntb, v);
}

static int ntbe_peer_db_set(struct ntb_dev *ntb, u64 bits)
{
	struct ntbe *e = to_ntbe(ntb);
	unsigned long vectors = 0, flags;
	unsigned int b, v;

	if (bits & ~NTBE_DB_VALID)
		return -EINVAL;
	/*
	 * What the client wrote to the peer's window (write-combining) is
	 * out before the count: pairs with the peer's read of the count in
	 * ntbe_pending(), after the interrupt the vector raises.
	 */
	wmb();
	spin_lock_irqsave(&e->lock, flags);
	for_each_set_bit(b, (unsigned long *)&bits, NTBE_DB_BITS) {
		__le32 *c = &e->peer_regs->db_count[b];

		ntbe_wr(c, ntbe_rd(c) + 1);
		vectors |= BIT(b % e->nr_vectors);
	}
	spin_unlock_irqrestore(&e->lock, flags);
	/* writel() orders the counts before the doorbell. */
	for_each_set_bit(v, &vectors, NTBE_MAX_VECTORS)
		ntbe_ring(e, v);
	return 0;
}

/* ----- scratchpads ----- */

static int ntbe_spad_count(struct ntb_dev *ntb)
{
	return NTBE_SPADS;
}

static u32 ntbe_spad_read(struct ntb_dev *ntb, int sidx)
{
	struct ntbe *e = to_ntbe(ntb);

	if (sidx < 0 || sidx >= NTBE_SPADS)
		return 0;
	return ntbe_rd(&e->own->spad[sidx]);
}

static int ntbe_spad_write(struct ntb_dev *ntb, int sidx, u32 val)
{
	struct ntbe *e = to_ntbe(ntb);

	if (sidx < 0 || sidx >= NTBE_SPADS)
		return -EINVAL;
	ntbe_wr(&e->own->spad[sidx], val);
	return 0;
}

static u32 ntbe_peer_spad_read(struct ntb_dev *ntb, int pidx, int sidx)
{
	struct ntbe *e = to_ntbe(ntb);

	if (pidx || sidx < 0 || sidx >= NTBE_SPADS)
		return 0;
	return ntbe_rd(&e->peer_regs->spad[sidx]);
}

static int ntbe_peer_spad_write(struct ntb_dev *ntb, int pidx, int sidx,
				u32 val)
{
	struct ntbe *e = to_ntbe(ntb);

	if (pidx || sidx < 0 || sidx >= NTBE_SPADS)
		return -EINVAL;
	ntbe_wr(&e->peer_regs->spad[sidx], val);
	return 0;
}

static const struct ntb_dev_ops ntbe_ops = {
	.link_is_up		= ntbe_link_is_up,
	.link_enable		= ntbe_link_enable,
	.link_disable		= ntbe_link_disable,
	.mw_count		= ntbe_mw_count,
	.mw_get_align		= ntbe_mw_get_align,
	.mw_set_trans		= ntbe_mw_set_trans,
	.mw_clear_trans		= ntbe_mw_clear_trans,
	.peer_mw_count		= ntbe_peer_mw_count,
	.peer_mw_get_addr	= ntbe_peer_mw_get_addr,
	.db_valid_mask		= ntbe_db_valid_mask,
	.db_vector_count	= ntbe_db_vector_count,
	.db_vector_mask		= ntbe_db_vector_mask,
	.db_read		= ntbe_db_read,
	.db_clear		= ntbe_db_clear,
	.db_read_mask		= ntbe_db_read_mask,
	.db_set_mask		= ntbe_db_set_mask,
	.db_clear_mask		= ntbe_db_clear_mask,
	.peer_db_set		= ntbe_peer_db_set,
	.spad_count		= ntbe_spad_count,
	.spad_read		= ntbe_spad_read,
	.spad_write		= ntbe_spad_write,
	.peer_spad_read		= ntbe_peer_spad_read,
	.peer_spad_write	= ntbe_peer_spad_write,
};

/* ----- DMA: allocations come from the inbound window ----- */

static struct ntbe *dev_to_ntbe(struct device *dev)
{
	return pci_get_drvdata(to_pci_dev(dev));
}

static void *ntbe_dma_alloc(struct device *dev, size_t size,
			    dma_addr_t *dma, gfp_t gfp, unsigned long attrs)
{
	struct ntbe *e = dev_to_ntbe(dev);
	unsigned long va;

	va = gen_pool_alloc(e->pool, PAGE_ALIGN(size));
	if (!va)
		return NULL;
	memset((void *)va, 0, size);
	*dma = e->mw_dma + (va - (unsigned long)e->mw);
	return (void *)va;
}

static void ntbe_dma_free(struct device *dev, size_t size, void *va,
			  dma_addr_t dma, unsigned long attrs)
{
	gen_pool_free(dev_to_ntbe(dev)->pool, (unsigned long)va,
		      PAGE_ALIGN(size));
}

/* The emulated device does no DMA of its own: nothing maps for it. */
static dma_addr_t ntbe_map_page(struct device *dev, struct page *page,
				unsigned long off, size_t size,
				enum dma_data_direction dir,
				unsigned long attrs)
{
	return DMA_MAPPING_ERROR;
}

static int ntbe_map_sg(struct device *dev, struct scatterlist *sg, int n,
		       enum dma_data_direction dir, unsigned long attrs)
{
	return -EIO;
}

static const struct dma_map_ops ntbe_dma_ops = {
	.alloc		= ntbe_dma_alloc,
	.free		= ntbe_dma_free,
	.map_page	= ntbe_map_page,
	.map_sg		= ntbe_map_sg,
};

/* ----- probe and remove ----- */

static irqreturn_t ntbe_irq(int irq, void *data)
{
	struct ntbe_vec *vec = data;
	struct ntbe *e = vec->e;

	/* Vector 0 also says that the peer enabled or disabled its link. */
	if (!vec->v)
		mod_delayed_work(system_wq, &e->link_work, 0);
	ntb_db_event(&e->ntb, vec->v);
	return IRQ_HANDLED;
}

/* The header is the fabric's, but it is read as from any device: checked. */
static int ntbe_check_hdr(struct ntbe *e, const struct ntbe_hdr *h,
			  u64 bar_len)
{
	u64 size = le64_to_cpu(h->shm_size), mw = le64_to_cpu(h->mw_size);
	unsigned int s;

	if (le32_to_cpu(h->magic) != NTBE_MAGIC)
		return -ENODEV;
	if (le16_to_cpu(h->version) != NTBE_VERSION ||
	    le16_to_cpu(h->hdr_size) != NTBE_HDR_SIZE ||
	    size > bar_len || le32_to_cpu(h->mw_count) != 1 ||
	    !le32_to_cpu(h->nr_vectors) || !mw || mw % PAGE_SIZE)
		return -EINVAL;
	for (s = 0; s < 2; s++) {
		u64 off = le64_to_cpu(h->mw_off[s]);
		u64 roff = le64_to_cpu(h->regs_off[s]);

		if (off % PAGE_SIZE || off < NTBE_META_SIZE || off > size ||
		    mw > size - off || roff < NTBE_HDR_SIZE ||
		    roff > NTBE_META_SIZE - NTBE_REGS_SIZE)
			return -EINVAL;
	}
	if (le64_to_cpu(h->mw_off[0]) + mw > le64_to_cpu(h->mw_off[1]) &&
	    le64_to_cpu(h->mw_off[1]) + mw > le64_to_cpu(h->mw_off[0]))
		return -EINVAL;
	if (abs_diff(le64_to_cpu(h->regs_off[0]),
		     le64_to_cpu(h->regs_off[1])) < NTBE_REGS_SIZE)
		return -EINVAL;
	return 0;
}

static void ntbe_free_irqs(struct ntbe *e, unsigned int n)
{
	while (n--)
		free_irq(pci_irq_vector(e->pdev, n), &e->vec[n]);
}

static int ntbe_request_irqs(struct ntbe *e)
{
	unsigned int v;
	int err;

	for (v = 0; v < e->nr_vectors; v++) {
		snprintf(e->irq_name[v], sizeof(e->irq_name[v]), "ntb-ivshmem-%s-%u",
			 pci_name(e->pdev), v);
		e->vec[v].e = e;
		e->vec[v].v = v;
		err = request_irq(pci_irq_vector(e->pdev, v), ntbe_irq, 0,
				  e->irq_name[v], &e->vec[v]);
		if (err) {
			ntbe_free_irqs(e, v);
			return err;
		}
	}
	return 0;
}

static int ntbe_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct ntbe_hdr hdr;
	resource_size_t start, len;
	u64 mw_off, peer_off;
	struct ntbe *e;
	int err, n;

	err = pcim_enable_device(pdev);
	if (err)
		return err;
	pci_set_master(pdev);	/* MSI-X messages are the device's writes */
	start = pci_resource_start(pdev, IVSHMEM_MEM_BAR);
	len = pci_resource_len(pdev, IVSHMEM_MEM_BAR);
	if (!start || len < NTBE_META_SIZE)
		return -ENODEV;

	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	e->pdev = pdev;
	spin_lock_init(&e->lock);
	mutex_init(&e->link_lock);
	INIT_DELAYED_WORK(&e->link_work, ntbe_link_work);
	INIT_WORK(&e->db_work, ntbe_db_work);

	e->meta = devm_memremap(&pdev->dev, start, NTBE_META_SIZE, MEMREMAP_WB);
	if (IS_ERR(e->meta)) {
		err = PTR_ERR(e->meta);
		goto abort;
	}
	e->hdr = e->meta;
	/* Pairs with the fabric's release store of the magic. */
	hdr.magic = smp_load_acquire(&e->hdr->magic);
	memcpy((u8 *)&hdr + sizeof(hdr.magic), (const u8 *)e->hdr + sizeof(hdr.magic),
	       sizeof(hdr) - sizeof(hdr.magic));
	err = ntbe_check_hdr(e, &hdr, len);
	if (err) {
		if (err != -ENODEV)
			dev_err(&pdev->dev, "bad emulated NTB header\n");
		goto abort;
	}

	e->regs = pcim_iomap(pdev, IVSHMEM_REG_BAR, 0);
	if (!e->regs) {
		err = -ENOMEM;
		goto abort;
	}
	e->side = readl(e->regs + IVSHMEM_IV_POSITION) & 1;
	e->own = e->meta + le64_to_cpu(hdr.regs_off[e->side]);
	e->peer_regs = e->meta + le64_to_cpu(hdr.regs_off[!e->side]);
	e->mw_size = le64_to_cpu(hdr.mw_size);
	mw_off = le64_to_cpu(hdr.mw_off[e->side]);
	peer_off = le64_to_cpu(hdr.mw_off[!e->side]);
	e->mw_dma = start + mw_off;
	e->peer_mw_phys = start + peer_off;
	/* Only our window is mapped here; the peer's is the clients' (WC). */
	e->mw = devm_memremap(&pdev->dev, start + mw_off, e->mw_size,
			      MEMREMAP_WB);
	if (IS_ERR(e->mw)) {
		err = PTR_ERR(e->mw);
		goto abort;
	}
	e->pool = gen_pool_create(PAGE_SHIFT, dev_to_node(&pdev->dev));
	if (!e->pool) {
		err = -ENOMEM;
		goto abort;
	}
	err = gen_pool_add_virt(e->pool, (unsigned long)e->mw, e->mw_dma,
				e->mw_size, dev_to_node(&pdev->dev));
	if (err)
		goto abort_with_pool;

	n = pci_alloc_irq_vectors(pdev, 1,
				  min_t(u32, le32_to_cpu(hdr.nr_vectors),
					NTBE_MAX_VECTORS), PCI_IRQ_MSIX);
	if (n < 0) {
		err = n;
		goto abort_with_pool;
	}
	e->nr_vectors = n;
	pci_set_drvdata(pdev, e);
	set_dma_ops(&pdev->dev, &ntbe_dma_ops);

	/* A fresh attachment: nothing of an earlier boot is pending. */
	ntbe_wr(&e->own->link_epoch, 0);
	for (n = 0; n < NTBE_DB_BITS; n++)
		e->seen[n] = ntbe_rd(&e->own->db_count[n]);
	e->ntb.pdev = pdev;
	e->ntb.ops = &ntbe_ops;
	e->ntb.topo = e->side ? NTB_TOPO_B2B_DSD : NTB_TOPO_B2B_USD;
	err = ntb_register_device(&e->ntb);
	if (err)
		goto abort_with_ops;
	/* After the core's state exists: the handlers report to it. */
	err = ntbe_request_irqs(e);
	if (err)
		goto abort_with_ntb;
	schedule_delayed_work(&e->link_work, 0);
	dev_info(&pdev->dev, "emulated NTB, side %u, two %llu KiB windows, %u vectors\n",
		 e->side, e->mw_size >> 10, e->nr_vectors);
	return 0;

abort_with_ntb:
	ntb_unregister_device(&e->ntb);
	cancel_delayed_work_sync(&e->link_work);
abort_with_ops:
	set_dma_ops(&pdev->dev, NULL);
	pci_free_irq_vectors(pdev);
abort_with_pool:
	gen_pool_destroy(e->pool);
abort:
	kfree(e);
	return err;
}

static void ntbe_remove(struct pci_dev *pdev)
{
	struct ntbe *e = pci_get_drvdata(pdev);

	/* Clients detach first: they free their windows' buffers. */
	ntb_unregister_device(&e->ntb);
	ntbe_wr(&e->own->link_epoch, 0);
	ntbe_ring(e, 0);
	ntbe_free_irqs(e, e->nr_vectors);
	cancel_delayed_work_sync(&e->link_work);
	cancel_work_sync(&e->db_work);
	set_dma_ops(&pdev->dev, NULL);
	pci_free_irq_vectors(pdev);
	if (gen_pool_avail(e->pool) == gen_pool_size(e->pool))
		gen_pool_destroy(e->pool);
	else
		dev_warn(&pdev->dev, "a client kept window memory: pool leaked\n");
	kfree(e);
}

static const struct pci_device_id ntbe_ids[] = {
	{ PCI_DEVICE(IVSHMEM_VENDOR, IVSHMEM_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, ntbe_ids);

static struct pci_driver ntbe_driver = {
	.name = KBUILD_MODNAME,
	.id_table = ntbe_ids,
	.probe = ntbe_probe,
	.remove = ntbe_remove,
};
module_pci_driver(ntbe_driver);

MODULE_DESCRIPTION("Test-only: an NTB device emulated over ivshmem-doorbell");
MODULE_LICENSE("GPL");
