// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet backend for QEMU's ivshmem-doorbell device (PCI 1af4:1110).
 *
 * BAR0 holds the registers (IVPosition: our peer ID, whose low bit is our
 * side of the window; Doorbell: write peer ID << 16 | vector to interrupt
 * a peer; the peer's current ID is in the window header, doorbell_id),
 * BAR1 the MSI-X table, BAR2 the shared memory, which is plain RAM on the
 * host and so mapped write-back.  The backend knows nothing of packets:
 * it maps the window, rings doorbells and forwards interrupts.
 *
 * Only windows carrying a pcinet header are claimed; other users of
 * ivshmem in the same machine are left alone.
 *
 * The device carries the link's identities in sysfs, where the link's
 * netdev and tty find them as device/<attr>: peer_name and peer_slot
 * (what the peer published, sanitized: docs/design.md, "Identity"),
 * local_name and local_slot (what we publish); and the link's doorbell
 * counters in doorbells/: <what>_rung and <what>_received for the link
 * itself and each channel (link, net, tty, virtio).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/sysfs.h>

#include "pcinet_backend.h"

#define IVSHMEM_VENDOR		0x1af4
#define IVSHMEM_DEVICE		0x1110

#define IVSHMEM_REG_BAR		0
#define IVSHMEM_MEM_BAR		2

#define IVSHMEM_INTR_MASK	0x00
#define IVSHMEM_INTR_STATUS	0x04
#define IVSHMEM_IV_POSITION	0x08
#define IVSHMEM_DOORBELL	0x0c

/**
 * struct pcinet_ivshmem - one ivshmem device driven by pcinet
 * @pdev: the device
 * @regs: BAR0
 * @win: BAR2, mapped write-back
 * @hdr: the window header, at the start of @win
 * @peer: the peer's side of the window
 * @nr_vectors: MSI-X vectors in use
 * @link: the link on top
 * @vec: per-vector interrupt context
 * @irq_name: names shown in /proc/interrupts
 */
struct pcinet_ivshmem {
	struct pci_dev *pdev;
	void __iomem *regs;
	void *win;
	const struct pcinet_win_hdr *hdr;
	u32 peer;
	unsigned int nr_vectors;
	struct pcinet_link *link;
	struct pcinet_ivshmem_vec {
		struct pcinet_ivshmem *iv;
		unsigned int vector;
	} vec[PCINET_NR_VEC];
	char irq_name[PCINET_NR_VEC][32];
};

static void pcinet_ivshmem_notify(void *bdata, unsigned int vector)
{
	struct pcinet_ivshmem *iv = bdata;
	u32 id = le32_to_cpu(READ_ONCE(iv->hdr->doorbell_id[iv->peer]));

	/* The ID is the platform's word; the register takes 16 bits of it. */
	writel((id & 0xffff) << 16 | vector, iv->regs + IVSHMEM_DOORBELL);
}

static const struct pcinet_backend_ops pcinet_ivshmem_ops = {
	.notify = pcinet_ivshmem_notify,
};

static irqreturn_t pcinet_ivshmem_irq(int irq, void *data)
{
	struct pcinet_ivshmem_vec *vec = data;

	pcinet_link_doorbell(vec->iv->link, vec->vector);
	return IRQ_HANDLED;
}

static void pcinet_ivshmem_free_irqs(struct pcinet_ivshmem *iv,
				     unsigned int n)
{
	while (n--)
		free_irq(pci_irq_vector(iv->pdev, n), &iv->vec[n]);
}

static int pcinet_ivshmem_request_irqs(struct pcinet_ivshmem *iv)
{
	unsigned int v;
	int err;

	for (v = 0; v < iv->nr_vectors; v++) {
		snprintf(iv->irq_name[v], sizeof(iv->irq_name[v]), "pcinet-%s-%u",
			 pci_name(iv->pdev), v);
		iv->vec[v].iv = iv;
		iv->vec[v].vector = v;
		err = request_irq(pci_irq_vector(iv->pdev, v),
				  pcinet_ivshmem_irq, 0, iv->irq_name[v],
				  &iv->vec[v]);
		if (err) {
			pcinet_ivshmem_free_irqs(iv, v);
			return err;
		}
	}
	return 0;
}

/* ----- sysfs: who is at either end ----- */

static struct pcinet_link *pcinet_ivshmem_link(struct device *dev)
{
	struct pcinet_ivshmem *iv = dev_get_drvdata(dev);

	return iv->link;
}

static ssize_t peer_name_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	struct pcinet_ident id;

	pcinet_link_peer_ident(pcinet_ivshmem_link(dev), &id);
	return sysfs_emit(buf, "%s\n", id.name);
}
static DEVICE_ATTR_RO(peer_name);

static ssize_t peer_slot_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	struct pcinet_ident id;

	pcinet_link_peer_ident(pcinet_ivshmem_link(dev), &id);
	return sysfs_emit(buf, "%u\n", id.slot);
}
static DEVICE_ATTR_RO(peer_slot);

static ssize_t local_name_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  pcinet_link_own_ident(pcinet_ivshmem_link(dev))->name);
}
static DEVICE_ATTR_RO(local_name);

static ssize_t local_slot_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  pcinet_link_own_ident(pcinet_ivshmem_link(dev))->slot);
}
static DEVICE_ATTR_RO(local_slot);

static struct attribute *pcinet_ivshmem_attrs[] = {
	&dev_attr_peer_name.attr,
	&dev_attr_peer_slot.attr,
	&dev_attr_local_name.attr,
	&dev_attr_local_slot.attr,
	NULL
};

static const struct attribute_group pcinet_ivshmem_group = {
	.attrs = pcinet_ivshmem_attrs,
};

/* ----- sysfs: doorbells/, the link's doorbell counters ----- */

/**
 * struct pcinet_db_attr - one file of doorbells/
 * @attr: the file
 * @what: PCINET_VEC_LINK, or pcinet_chan_vector() of a channel
 * @received: the doorbells received, else the ones rung
 */
struct pcinet_db_attr {
	struct device_attribute attr;
	unsigned int what;
	bool received;
};

static ssize_t pcinet_db_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	const struct pcinet_db_attr *a =
		container_of(attr, struct pcinet_db_attr, attr);
	struct pcinet_link_doorbells db;

	pcinet_link_doorbells(pcinet_ivshmem_link(dev), &db);
	return sysfs_emit(buf, "%llu\n", a->received ? db.received[a->what] :
			  db.rung[a->what]);
}

#define PCINET_DB_ATTR(_name, _what, _received)				\
	struct pcinet_db_attr pcinet_db_attr_##_name = {			\
		.attr = __ATTR(_name, 0444, pcinet_db_show, NULL),		\
		.what = _what,							\
		.received = _received,						\
	}

static PCINET_DB_ATTR(link_rung, PCINET_VEC_LINK, false);
static PCINET_DB_ATTR(link_received, PCINET_VEC_LINK, true);
static PCINET_DB_ATTR(net_rung, PCINET_CHAN_VECTOR(PCINET_CHAN_NET), false);
static PCINET_DB_ATTR(net_received, PCINET_CHAN_VECTOR(PCINET_CHAN_NET), true);
static PCINET_DB_ATTR(tty_rung, PCINET_CHAN_VECTOR(PCINET_CHAN_TTY), false);
static PCINET_DB_ATTR(tty_received, PCINET_CHAN_VECTOR(PCINET_CHAN_TTY), true);
static PCINET_DB_ATTR(virtio_rung, PCINET_CHAN_VECTOR(PCINET_CHAN_VIRTIO),
		      false);
static PCINET_DB_ATTR(virtio_received, PCINET_CHAN_VECTOR(PCINET_CHAN_VIRTIO),
		      true);

static struct attribute *pcinet_ivshmem_db_attrs[] = {
	&pcinet_db_attr_link_rung.attr.attr,
	&pcinet_db_attr_link_received.attr.attr,
	&pcinet_db_attr_net_rung.attr.attr,
	&pcinet_db_attr_net_received.attr.attr,
	&pcinet_db_attr_tty_rung.attr.attr,
	&pcinet_db_attr_tty_received.attr.attr,
	&pcinet_db_attr_virtio_rung.attr.attr,
	&pcinet_db_attr_virtio_received.attr.attr,
	NULL
};

static const struct attribute_group pcinet_ivshmem_db_group = {
	.name = "doorbells",
	.attrs = pcinet_ivshmem_db_attrs,
};

/* Added by the driver core after probe, removed before remove. */
static const struct attribute_group *pcinet_ivshmem_groups[] = {
	&pcinet_ivshmem_group,
	&pcinet_ivshmem_db_group,
	NULL
};

/* ----- probe and remove ----- */

static int pcinet_ivshmem_probe(struct pci_dev *pdev,
				const struct pci_device_id *id)
{
	struct pcinet_link_cfg cfg = {};
	struct pcinet_ivshmem *iv;
	resource_size_t start, len;
	u32 pos;
	int err;

	iv = devm_kzalloc(&pdev->dev, sizeof(*iv), GFP_KERNEL);
	if (!iv)
		return -ENOMEM;
	iv->pdev = pdev;

	/* Managed: BARs, mappings and MSI-X vectors are released on detach. */
	err = pcim_enable_device(pdev);
	if (err)
		return err;
	pci_set_master(pdev);
	start = pci_resource_start(pdev, IVSHMEM_MEM_BAR);
	len = pci_resource_len(pdev, IVSHMEM_MEM_BAR);
	if (!start || len < PCINET_HDR_SIZE)
		return -ENODEV;
	iv->win = devm_memremap(&pdev->dev, start, len, MEMREMAP_WB);
	if (IS_ERR(iv->win))
		return PTR_ERR(iv->win);
	if (!pcinet_window_is_pcinet(iv->win, len)) {
		dev_info(&pdev->dev, "no pcinet header: not ours, leaving it\n");
		return -ENODEV;
	}

	iv->regs = pcim_iomap(pdev, IVSHMEM_REG_BAR, 0);
	if (!iv->regs)
		return -ENOMEM;
	iv->hdr = iv->win;
	pos = readl(iv->regs + IVSHMEM_IV_POSITION) & 1;
	iv->peer = !pos;

	/*
	 * One vector per doorbell (link, net, tty, virtio); a device with
	 * fewer (QEMU's vectors=3) gets the rest rung as vector 0 by both
	 * sides (pcinet_vector_in_use()).
	 */
	err = pci_alloc_irq_vectors(pdev, 1, PCINET_NR_VEC, PCI_IRQ_MSIX);
	if (err < 0) {
		dev_err(&pdev->dev, "no MSI-X vectors: %d\n", err);
		return err;
	}
	iv->nr_vectors = err;

	cfg.dev = &pdev->dev;
	cfg.win = iv->win;
	cfg.phys = start;
	cfg.size = len;
	cfg.side = pos;
	cfg.nr_vectors = iv->nr_vectors;
	cfg.ops = &pcinet_ivshmem_ops;
	cfg.bdata = iv;
	iv->link = pcinet_link_create(&cfg);
	if (IS_ERR(iv->link))
		return PTR_ERR(iv->link);
	err = pcinet_ivshmem_request_irqs(iv);
	if (err)
		goto abort_with_link;
	pci_set_drvdata(pdev, iv);
	pcinet_link_start(iv->link);
	dev_info(&pdev->dev, "pcinet side %u, %llu KiB window, %u vectors\n",
		 pos, (unsigned long long)len >> 10, iv->nr_vectors);
	return 0;

abort_with_link:
	pcinet_link_destroy(iv->link);
	return err;
}

static void pcinet_ivshmem_remove(struct pci_dev *pdev)
{
	struct pcinet_ivshmem *iv = pci_get_drvdata(pdev);

	pcinet_link_stop(iv->link);
	pcinet_ivshmem_free_irqs(iv, iv->nr_vectors);
	pcinet_link_destroy(iv->link);
}

static const struct pci_device_id pcinet_ivshmem_ids[] = {
	{ PCI_DEVICE(IVSHMEM_VENDOR, IVSHMEM_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, pcinet_ivshmem_ids);

static struct pci_driver pcinet_ivshmem_driver = {
	.name = KBUILD_MODNAME,
	.id_table = pcinet_ivshmem_ids,
	.probe = pcinet_ivshmem_probe,
	.remove = pcinet_ivshmem_remove,
	.dev_groups = pcinet_ivshmem_groups,
};

/**
 * pcinet_ivshmem_register - register the ivshmem PCI driver
 *
 * Called by the core at module load, once the front-ends are ready.
 *
 * Return: 0 or a negative errno.
 */
int __init pcinet_ivshmem_register(void)
{
	return pci_register_driver(&pcinet_ivshmem_driver);
}

/**
 * pcinet_ivshmem_unregister - unregister the ivshmem PCI driver
 *
 * Called by the core at module unload: every ivshmem link is gone when
 * this returns.
 */
void __exit pcinet_ivshmem_unregister(void)
{
	pci_unregister_driver(&pcinet_ivshmem_driver);
}
