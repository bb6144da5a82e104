// SPDX-License-Identifier: GPL-2.0-only
/*
 * TAP and pty plumbing for pcinet-peer.
 *
 * The TAP carries a struct virtio_net_hdr (IFF_VNET_HDR, 10 bytes,
 * little-endian on the little-endian hosts the ring shims accept) before
 * every frame: the same metadata a pcinet net record carries, so offloads
 * (checksum, TSO) cross the link as they do between two pcinet drivers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <net/if.h>
#include <linux/if_tun.h>

#include "tap.h"

#ifndef TUNSETCARRIER
#define TUNSETCARRIER	_IOW('T', 226, int)
#endif

/**
 * tap_open - create (or attach to) a TAP interface
 * @name: interface name or pattern ("pcinet%d")
 * @ifname: filled in with the name the kernel chose
 * @ifname_len: room in @ifname
 * @offload: accept and produce checksum-offloaded and TSO frames
 *
 * Return: a non-blocking fd, or -errno.
 */
int tap_open(const char *name, char *ifname, unsigned int ifname_len,
	     bool offload)
{
	struct ifreq ifr;
	unsigned int off = 0;
	int fd, hdr_len = TAP_VNET_HDR_LEN;

	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		goto fail;
	if (ioctl(fd, TUNSETVNETHDRSZ, &hdr_len) < 0)
		goto fail;
	if (offload)
		off = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
	if (ioctl(fd, TUNSETOFFLOAD, off) < 0)
		goto fail;
	snprintf(ifname, ifname_len, "%s", ifr.ifr_name);
	return fd;
fail:
	off = errno;
	close(fd);
	return -(int)off;
}

/**
 * tap_set_carrier - carrier of the TAP interface
 * @fd: the TAP fd
 * @on: carrier on
 *
 * Return: 0 or -errno (kernels before 5.0 have no TUNSETCARRIER).
 */
int tap_set_carrier(int fd, bool on)
{
	int v = on;

	return ioctl(fd, TUNSETCARRIER, &v) < 0 ? -errno : 0;
}

/**
 * tap_is_up - is the interface administratively up?
 * @ifname: the interface
 *
 * Return: 1, 0, or -errno.
 */
int tap_is_up(const char *ifname)
{
	struct ifreq ifr;
	int s, ret;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ret = ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ? -errno :
	      !!(ifr.ifr_flags & IFF_UP);
	close(s);
	return ret;
}

/**
 * pty_open - a pty for the tty channel, raw on both ends
 * @path: filled in with the slave's path
 * @path_len: room in @path
 * @slave: filled in with an fd of the slave, which we keep open: the
 *	master never sees a hangup, and the slave's termios (raw, set here)
 *	stay for whoever opens it next
 *
 * Return: the master fd (non-blocking), or -errno.
 */
int pty_open(char *path, unsigned int path_len, int *slave)
{
	struct termios t;
	int m, s, err;

	m = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (m < 0)
		return -errno;
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, path, path_len))
		goto fail;
	s = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		goto fail;
	if (tcgetattr(s, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(s, TCSANOW, &t);
	}
	*slave = s;
	return m;
fail:
	err = errno;
	close(m);
	return -err;
}
