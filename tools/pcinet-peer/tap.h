/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The host side of pcinet-peer's two front-ends: a TAP interface for the
 * net channel and a pty for the tty channel.  Kept apart from the ring
 * code: <linux/if_tun.h> brings the UAPI integer types, which clash with
 * the userspace ring shims (tools/testing/pcinet/pcinet_user.h).
 */
#ifndef _PCINET_PEER_TAP_H
#define _PCINET_PEER_TAP_H

#include <stdbool.h>

/* Bytes of the virtio_net_hdr that precedes every frame on the TAP fd. */
#define TAP_VNET_HDR_LEN	10

int tap_open(const char *name, char *ifname, unsigned int ifname_len,
	     bool offload);
int tap_set_carrier(int fd, bool on);
int tap_is_up(const char *ifname);
int pty_open(char *path, unsigned int path_len, int *slave);

#endif /* _PCINET_PEER_TAP_H */
