/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * peer_vio - pcinet-peer as the device side D of the virtio channel
 * (docs/design.md, "Virtio channel"): a virtio-blk device (slot 0) and a
 * virtio-fs device (slot 1), each served by a stock vhost-user back end
 * (qemu-storage-daemon, virtiofsd), offered to the peer.
 *
 * pcinet-peer.c calls in at four points: the options (pvio_setup_blk(),
 * pvio_setup_fs()), the start (pvio_start(), once the window is mapped),
 * every virtio doorbell and every tick (pvio_run()), and the stop
 * (pvio_stop()).  It also advertises pvio_features() in its control
 * block.
 */
#ifndef _PEER_VIO_H
#define _PEER_VIO_H

#include "pcinet_ring.h"

void pvio_setup_blk(const char *image);
int pvio_setup_fs(const char *dir_tag);
bool pvio_fault(const char *kind);
bool pvio_enabled(void);
u32 pvio_features(void);
void pvio_counts(u64 *kicks, u64 *rings);
int pvio_start(u8 *win, u64 win_size, int win_fd,
	       const struct pcinet_layout *lay, int side);
void pvio_run(bool peer_ok, int peer_id, int call_fd);
void pvio_stop(int call_fd);
/* The program's: our heartbeat goes on while a pvio_*() call waits. */
void pvio_beat(void);

#endif /* _PEER_VIO_H */
