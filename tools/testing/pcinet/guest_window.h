/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Guest-side test tools: find the pcinet window among the ivshmem devices
 * and map its BARs through sysfs (root only).  Header-only, for the small
 * static tools in this folder.
 */
#ifndef _PCINET_GUEST_WINDOW_H
#define _PCINET_GUEST_WINDOW_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pcinet_ring.h"

static void *map_bar(const char *dev, int bar, size_t *len)
{
	char path[512];
	struct stat st;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/resource%d", dev, bar);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0 || fstat(fd, &st)) {
		perror(path);
		exit(1);
	}
	*len = st.st_size;
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	close(fd);
	return p;
}

/* A hex sysfs attribute of PCI device @dev, or 0 if unreadable. */
static unsigned int pci_attr(const char *dev, const char *name)
{
	unsigned int v = 0;
	char buf[320];
	FILE *f;

	snprintf(buf, sizeof(buf), "/sys/bus/pci/devices/%s/%s", dev, name);
	f = fopen(buf, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%x", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* The first ivshmem device whose window carries a pcinet header. */
static int find_dev(char *path, size_t len)
{
	struct pcinet_layout lay;
	struct dirent *de;
	DIR *d = opendir("/sys/bus/pci/devices");

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		size_t wlen;
		void *win;

		if (de->d_name[0] == '.' ||
		    pci_attr(de->d_name, "vendor") != 0x1af4 ||
		    pci_attr(de->d_name, "device") != 0x1110)
			continue;
		snprintf(path, len, "/sys/bus/pci/devices/%s", de->d_name);
		win = map_bar(path, 2, &wlen);
		if (!pcinet_layout_parse(win, wlen, &lay)) {
			munmap(win, wlen);
			closedir(d);
			return 0;
		}
		munmap(win, wlen);
	}
	closedir(d);
	return -1;
}

#endif /* _PCINET_GUEST_WINDOW_H */
