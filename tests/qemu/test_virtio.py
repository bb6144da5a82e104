#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The virtio channel, stage 2: a board in QEMU, the device side on the host.

    +------- a (QEMU) ---------+   pcinet-fabric     +---- host, netns pnv-<pid> ----+
    | pcinet.ko: the transport |<== -m 64M -V 8M ==>| pcinet-peer --blk IMAGE       |
    | virtio_blk: /dev/vda     |    -n 4, vectors=4  |   qemu-storage-daemon behind  |
    +--------------------------+                     +-------------------------------+

docs/design.md, "Virtio channel", "Test plan": the board (the guest) uses
a virtio-blk device that pcinet-peer offers as its device side D, served
by a stock vhost-user back end (qemu-storage-daemon) on the fabric's
memfd.  The guest attaches first (side 0); pcinet-peer is side 1 here,
which the protocol does not care about.

Cases:
  virtio-blk       /dev/vda appears without anything done on the board
                   but loading pcinet; its size is the image's; 16 MiB of
                   random bytes written with dd read back equal, and equal
                   to the host's image at the same offset (sha256)
  virtio-withdraw  SIGTERM to pcinet-peer: /dev/vda goes within 2 s and
                   pcinet unloads; pcinet-peer started again: /dev/vda is
                   back, and still holds what was written
"""

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402
from peer_lib import BlkPeer  # noqa: E402

TRANSPORT = h.ROOT / 'drivers/net/pcinet/pcinet_vio.c'
QSD = os.environ.get('PCINET_QSD', 'qemu-storage-daemon')
IMG_MIB = 64
PAT_MIB = 16
PAT_OFF_MIB = 4

h.configure(machines=('a',), links=[('a',)], extra_modules=[h.PCINET_KO],
            fabric_size='64M', fabric_vio='8M', vectors=4)


def need_stage2():
    """Skip (with the reason printed) what this tree cannot run yet."""
    if not TRANSPORT.exists():
        h.skip('the board transport (drivers/net/pcinet/pcinet_vio.c, '
               'branch vio) is not in this tree')
    if not shutil.which(QSD):
        h.skip(f'{QSD} not installed')


def wait_vda(t, peer, timeout=60):
    took = t.a.wait_until('[ -b /dev/vda ]', timeout, what='/dev/vda',
                          show='ls /sys/bus/virtio/devices/ /sys/block; '
                          'dmesg | grep -iE "pcinet|virtio" | tail -n 15')
    h.info(f'/dev/vda after {took:.1f} s')
    size = int(t.a.run('cat /sys/block/vda/size').strip())
    h.expect(size == IMG_MIB << 11,
             f'/dev/vda has {size} sectors, the image {IMG_MIB << 11}')


def guest_sha(t, off_mib, mib):
    """sha256 of the guest's /dev/vda bytes, read past the page cache."""
    out = t.a.run('sync; echo 3 >/proc/sys/vm/drop_caches; '
                  f'dd if=/dev/vda bs=1M skip={off_mib} count={mib} '
                  '2>/dev/null | sha256sum', timeout=600)
    return out.split()[0]


def started(t):
    """The device side running, pcinet loaded on the board, /dev/vda up
    (the device side is closed again if that fails)."""
    need_stage2()
    peer = BlkPeer(t, IMG_MIB)
    try:
        peer.start()
        h.load(t.a)
        wait_vda(t, peer)
    except BaseException:
        peer.close()
        raise
    return peer


def write_pattern(t, off_mib, mib, timeout):
    """mib MiB of random bytes written to /dev/vda at off_mib MiB (fsync);
    returns their sha256."""
    pat = t.a.run(f'dd if=/dev/urandom of=/tmp/pat bs=1M count={mib} '
                  '2>/dev/null && sha256sum /tmp/pat').split()[0]
    t.a.run(f'dd if=/tmp/pat of=/dev/vda bs=1M seek={off_mib} '
            'conv=fsync 2>&1', timeout=timeout)
    return pat


@h.case('virtio-blk', fresh=True)
def _(t):
    """/dev/vda unprompted, its size, 16 MiB written and read back equal
    on the board and equal to the host's image."""
    peer = started(t)
    try:
        t0 = time.monotonic()
        pat = write_pattern(t, PAT_OFF_MIB, PAT_MIB, timeout=600)
        h.info(f'{PAT_MIB} MiB made and written with dd in '
               f'{time.monotonic() - t0:.1f} s')
        back = guest_sha(t, PAT_OFF_MIB, PAT_MIB)
        h.expect(back == pat, f'read back {back}, written {pat}')
        host = peer.image_sha(PAT_OFF_MIB, PAT_MIB)
        h.expect(host == pat, f'host image {host}, written {pat}')
        h.expect(peer.proc.poll() is None, 'pcinet-peer died:\n'
                 + peer.log_tail())
    finally:
        peer.close()


@h.case('virtio-withdraw', fresh=True)
def _(t):
    """SIGTERM to the device side: /dev/vda goes, pcinet unloads; back
    after a restart, with the data written before."""
    peer = started(t)
    try:
        pat = write_pattern(t, 1, 1, timeout=120)
        rc = peer.stop()
        h.expect(rc == 0, f'pcinet-peer exited {rc} on SIGTERM:\n'
                 + peer.log_tail())
        took = t.a.wait_until('! [ -b /dev/vda ]', 2, what='/dev/vda gone',
                              show='ls /sys/block; dmesg | tail -n 10')
        h.info(f'/dev/vda gone {took:.2f} s after SIGTERM')
        peer.start()
        wait_vda(t, peer)
        back = guest_sha(t, 1, 1)
        h.expect(back == pat, f'after the restart: {back}, written {pat}')
        h.unload(t.a, 10)
    finally:
        peer.close()


if __name__ == '__main__':
    raise SystemExit(h.main())
