// SPDX-License-Identifier: GPL-2.0-only
/*
 * pcinet core: the module.
 *
 * Owns module load and unload and the table of front-ends.  Every
 * front-end describes itself with a struct pcinet_frontend; the table
 * below lists them by channel, and the link walks it to create and
 * destroy a link's front-ends.  Load runs each front-end's module-wide
 * @init (the tty registers its driver and console), then registers the
 * backends' drivers, which create links from then on; unload is the exact
 * mirror.  All front-ends are built into this one module; were they ever
 * to become modules of their own, the auxiliary bus is the upstream way
 * to hand them the link's channels.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/init.h>
#include <linux/module.h>

#include "pcinet_link.h"

const struct pcinet_frontend *const pcinet_frontends[PCINET_NR_FRONTENDS] = {
	[PCINET_CHAN_NET] = &pcinet_net_frontend,
	[PCINET_CHAN_TTY] = &pcinet_tty_frontend,
	[PCINET_CHAN_VIRTIO] = &pcinet_vio_frontend,
	[PCINET_NR_CHAN] = &pcinet_vhost_frontend,
};

/* Module-wide teardown of the first @n front-ends, in reverse. */
static void pcinet_frontends_exit(int n)
{
	const struct pcinet_frontend *fe;

	while (n--) {
		fe = pcinet_frontends[n];
		if (fe && fe->exit)
			fe->exit();
	}
}

static int __init pcinet_init(void)
{
	const struct pcinet_frontend *fe;
	int c, err;

	for (c = 0; c < PCINET_NR_FRONTENDS; c++) {
		fe = pcinet_frontends[c];
		/*
		 * The link finds a channel's front-end by its index; a
		 * further user shares no byte ring with another.
		 */
		if (fe && (c < PCINET_NR_CHAN ? fe->chan != c :
			   fe->chan < PCINET_NR_RING_CHAN)) {
			pr_err("front-end %s listed for channel %d\n", fe->name, c);
			err = -EINVAL;
			goto abort_with_frontends;
		}
		if (!fe || !fe->init)
			continue;
		err = fe->init();
		if (err)
			goto abort_with_frontends;
	}
	err = pcinet_ivshmem_register();
	if (err)
		goto abort_with_frontends;
	return 0;

abort_with_frontends:
	pcinet_frontends_exit(c);
	return err;
}
module_init(pcinet_init);

static void __exit pcinet_exit(void)
{
	pcinet_ivshmem_unregister();
	pcinet_frontends_exit(PCINET_NR_FRONTENDS);
}
module_exit(pcinet_exit);

MODULE_DESCRIPTION("pcinet: Ethernet and serial links over PCI shared memory");
MODULE_AUTHOR("The pcinet developers");
MODULE_LICENSE("GPL");
