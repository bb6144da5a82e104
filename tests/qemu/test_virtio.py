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
                   to the host's image at the same offset (sha256); the
                   doorbells of DB_READS O_DIRECT 4 KiB reads, one at a
                   time: the board's virtio_rung and virtio_received
                   (device/doorbells/) each moved by DB_READS / 4 at
                   least and 2 * DB_READS + DB_SLACK at most, and
                   pcinet-peer received as many as the board rang
                   (vio_doorbells_in in its status file)
  virtio-withdraw  SIGTERM to pcinet-peer: /dev/vda goes within 2 s and
                   pcinet unloads; pcinet-peer started again: /dev/vda is
                   back, and still holds what was written
  virtio-blk-wce   VIRTIO_BLK_F_CONFIG_WCE offered and negotiated; write
                   back at probe (flushes sent, as without CONFIG_WCE);
                   /sys/block/vda/cache_type flipped each way on the
                   board: the write reaches qemu-storage-daemon
                   (SET_CONFIG, its wce read back, in pcinet-peer's log),
                   cache_type and queue/write_cache follow; I/O still
                   intact
  virtio-fs        pcinet-peer --blk IMAGE --fs DIR:share (two devices,
                   slots 0 and 1; virtiofsd behind the second): the guest
                   mounts `-t virtiofs share /mnt` with only pcinet loaded;
                   files created, renamed and deleted on each side seen on
                   the other; 32 MiB each way, sha256 equal at both ends;
                   chmod and touch -d seen across; umount; mounted again,
                   SIGTERM to pcinet-peer with the mount idle: the device
                   goes within 2 s, umount returns, pcinet unloads
  virtio-fs-restart  virtiofsd killed (SIGKILL) under a mount: pcinet-peer
                   withdraws the device, starts virtiofsd again and offers
                   it anew; the dead mount unmounts, a new one reads a
                   file written on the host meanwhile
  virtio-fs-abort  pcinet-peer frozen (SIGSTOP) under a mount: a FUSE
                   request in flight fails with EIO once the board gives
                   the peer up (the relay's abort writes a FUSE error
                   reply, -EIO, that virtiofs takes without complaint:
                   no "oh.len mismatch" in dmesg); SIGCONT: the
                   device is back, the dead mount unmounts, a new mount
                   reads a host file
"""

import hashlib
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402
from peer_lib import BlkPeer  # noqa: E402

TRANSPORT = h.ROOT / 'drivers/net/pcinet/pcinet_vio.c'
QSD = os.environ.get('PCINET_QSD', 'qemu-storage-daemon')
VIRTIOFSD = os.environ.get('PCINET_VIRTIOFSD', '/usr/lib/qemu/virtiofsd')
FS_TAG = 'share'
FS_BIG_MIB = 32
IMG_MIB = 64
PAT_MIB = 16
PAT_OFF_MIB = 4
DB_READS = 256		# 4 KiB O_DIRECT reads, iodepth 1: a kick and a call each
DB_SLACK = 20		# ticks' kicks of a queue with requests in flight
DOORBELLS = '/sys/class/net/pcinet0/device/doorbells'

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


def started(t, fs=None):
    """The device side running, pcinet loaded on the board, /dev/vda up
    (the device side is closed again if that fails)."""
    need_stage2()
    if fs and not os.access(VIRTIOFSD, os.X_OK):
        h.skip(f'{VIRTIOFSD} not installed')
    peer = BlkPeer(t, IMG_MIB, fs=f'{fs}:{FS_TAG}' if fs else None)
    try:
        peer.start()
        h.load(t.a)
        wait_vda(t, peer)
    except BaseException:
        peer.close()
        raise
    return peer


def board_doorbells(t):
    """The board's virtio doorbells so far: (rung, received)."""
    out = t.a.run(f'cat {DOORBELLS}/virtio_rung {DOORBELLS}/virtio_received')
    rung, received = (int(x) for x in out.split())
    return rung, received


def check_doorbells(t, peer):
    """DB_READS reads of 4 KiB, one at a time, past the page cache: the
    board's counters move within bounds, pcinet-peer's count of the
    doorbells it received matches the board's count of those it rang
    (the link idle before and after: no doorbell in between)."""
    b0, p0 = board_doorbells(t), peer.fresh_counters()
    t.a.run(f'dd if=/dev/vda of=/dev/null bs=4k count={DB_READS} '
            'iflag=direct 2>&1', timeout=120)
    b1, p1 = board_doorbells(t), peer.fresh_counters()
    rung, received = b1[0] - b0[0], b1[1] - b0[1]
    host_in = int(p1['vio_doorbells_in']) - int(p0['vio_doorbells_in'])
    fwd = int(p1['vio_kicks']) - int(p0['vio_kicks'])
    h.info(f'{DB_READS} reads: the board rang {rung}, received {received}; '
           f'pcinet-peer received {host_in}, forwarded {fwd} kicks')
    lo, hi = DB_READS // 4, 2 * DB_READS + DB_SLACK
    h.expect(lo <= rung <= hi,
             f'virtio_rung moved by {rung} over {DB_READS} reads, not '
             f'within [{lo}, {hi}]')
    h.expect(lo <= received <= hi,
             f'virtio_received moved by {received} over {DB_READS} reads, '
             f'not within [{lo}, {hi}]')
    h.expect(host_in == rung,
             f'pcinet-peer received {host_in} virtio doorbells, the board '
             f'rang {rung}')


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
    on the board and equal to the host's image; the virtio doorbells of
    DB_READS reads counted on both sides."""
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
        check_doorbells(t, peer)
        peer.expect_alive()
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


@h.case('virtio-blk-wce', fresh=True)
def _(t):
    """Config writes: cache_type on the board reaches the back end."""
    peer = started(t)
    try:
        feats = t.a.run('cat /sys/block/vda/device/features').strip()
        h.expect(len(feats) > 11 and feats[11] == '1',
                 f'CONFIG_WCE (bit 11) not negotiated: {feats}')
        now = t.a.run('cat /sys/block/vda/cache_type').strip()
        h.info(f'cache_type at probe: {now}')
        modes = ['write through', 'write back']	# wce 0, 1
        # pcinet-peer sets the back end's wce to what it does (it caches)
        h.expect(now == 'write back', f'cache_type {now!r} at probe, not '
                 '"write back": the board would never flush')
        for wce in (1 - modes.index(now), modes.index(now)):
            mark = peer.log_size()
            t.a.run(f'echo "{modes[wce]}" >/sys/block/vda/cache_type')
            peer.wait_log(f"config write: wce {wce}, the back end's wce "
                          f'now {wce}', 5, mark)
            t.a.run(f'grep -qx "{modes[wce]}" /sys/block/vda/cache_type '
                    f'&& grep -qx "{modes[wce]}" '
                    '/sys/block/vda/queue/write_cache')
            h.info(f'cache_type {modes[wce]}: at the back end')
        pat = write_pattern(t, 2, 1, timeout=120)
        back = guest_sha(t, 2, 1)
        h.expect(back == pat, f'read back {back}, written {pat}')
        peer.expect_alive()
    finally:
        peer.close()


FS_DEV = 'grep -qx 0x001a /sys/bus/virtio/devices/*/device'


def fs_mount(t):
    """The virtio-fs device up (its tag), mounted on /mnt."""
    took = t.a.wait_until(f'{FS_DEV} && grep -qx {FS_TAG} '
                          '/sys/fs/virtiofs/*/tag', 30, what='virtio-fs',
                          show='grep . /sys/bus/virtio/devices/*/device; '
                          'dmesg | grep -iE "pcinet|virtio" | tail -n 15')
    h.info(f'virtio-fs tag "{FS_TAG}" after {took:.1f} s')
    t.a.run(f'mkdir -p /mnt && mount -t virtiofs {FS_TAG} /mnt && '
            'grep -q " /mnt virtiofs " /proc/mounts')


def guest_sees(t, cond, what):
    """cond (a shell test about /mnt) true in the guest within 5 s (its
    attribute and entry caches: virtiofsd's cache=auto, 1 s)."""
    t.a.wait_until(cond, 5, what=what, show='ls -la /mnt')


def host_sees(path, pred, what, timeout=5):
    """pred(path) true on the host within timeout s."""
    deadline = time.monotonic() + timeout
    while not pred(path):
        if time.monotonic() > deadline:
            raise h.CaseFailure(f'host: {what} not within {timeout}s; '
                                f'{path.parent}: '
                                f'{sorted(os.listdir(path.parent))}')
        time.sleep(0.1)


def file_sha(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


@h.case('virtio-fs', fresh=True)
def _(t):
    """virtio-fs beside virtio-blk: a host directory mounted on the
    board; both sides' creates, renames, deletes, 32 MiB files, chmod and
    mtimes seen across; umount; SIGTERM with the mount idle: the device
    goes and umount returns."""
    share = t.workdir / 'share'
    shutil.rmtree(share, ignore_errors=True)
    share.mkdir()
    peer = started(t, share)
    try:
        fs_mount(t)
        # host -> board: create, rename, delete
        (share / 'h1.txt').write_text('from the host\n')
        guest_sees(t, 'grep -qx "from the host" /mnt/h1.txt', 'h1.txt')
        os.rename(share / 'h1.txt', share / 'h2.txt')
        guest_sees(t, '[ -f /mnt/h2.txt ] && ! [ -e /mnt/h1.txt ]',
                   'h1.txt renamed to h2.txt')
        # board -> host
        t.a.run('echo "from the board" >/mnt/g1.txt')
        host_sees(share / 'g1.txt', lambda p: p.exists() and
                  p.read_text() == 'from the board\n', 'g1.txt')
        t.a.run('mv /mnt/g1.txt /mnt/g2.txt')
        host_sees(share / 'g2.txt', lambda p: p.exists() and
                  not (share / 'g1.txt').exists(), 'g1.txt renamed')
        # permissions and mtimes, each way
        t.a.run('chmod 640 /mnt/g2.txt && '
                'touch -d "2001-02-03 04:05:06" /mnt/g2.txt')
        st = os.stat(share / 'g2.txt')
        h.expect(st.st_mode & 0o7777 == 0o640,
                 f'host sees g2.txt mode {st.st_mode & 0o7777:o}, not 640')
        h.expect(int(st.st_mtime) == 981173106,
                 f'host sees g2.txt mtime {int(st.st_mtime)}, not '
                 '981173106 (2001-02-03 04:05:06 UTC)')
        os.chmod(share / 'h2.txt', 0o604)
        os.utime(share / 'h2.txt', (1234567890, 1234567890))
        guest_sees(t, '[ "$(stat -c %a:%Y /mnt/h2.txt)" = 604:1234567890 ]',
                   'h2.txt mode 604, mtime 1234567890')
        # deletes
        os.unlink(share / 'h2.txt')
        guest_sees(t, '! [ -e /mnt/h2.txt ]', 'h2.txt deleted')
        t.a.run('rm /mnt/g2.txt')
        host_sees(share / 'g2.txt', lambda p: not p.exists(),
                  'g2.txt deleted')
        # 32 MiB each way
        with open(share / 'big-h.bin', 'wb') as f:
            f.write(os.urandom(FS_BIG_MIB << 20))
        want = file_sha(share / 'big-h.bin')
        t0 = time.monotonic()
        got = t.a.run('sha256sum /mnt/big-h.bin', timeout=600).split()[0]
        h.info(f'{FS_BIG_MIB} MiB read and hashed on the board in '
               f'{time.monotonic() - t0:.1f} s')
        h.expect(got == want, f'big-h.bin: board {got}, host {want}')
        t0 = time.monotonic()
        want = t.a.run(f'dd if=/dev/urandom of=/tmp/big bs=1M '
                       f'count={FS_BIG_MIB} 2>/dev/null && '
                       'sha256sum /tmp/big', timeout=600).split()[0]
        t.a.run('cp /tmp/big /mnt/big-g.bin && sync && rm /tmp/big',
                timeout=600)
        h.info(f'{FS_BIG_MIB} MiB made and written on the board in '
               f'{time.monotonic() - t0:.1f} s')
        got = file_sha(share / 'big-g.bin')
        h.expect(got == want, f'big-g.bin: host {got}, board {want}')
        # the blk device beside it still works
        t.a.run('dd if=/dev/vda of=/dev/null bs=64k count=16 2>&1')
        t.a.run('umount /mnt && ! grep -q " /mnt " /proc/mounts')
        # SIGTERM with the mount idle
        fs_mount(t)
        t.a.run('ls /mnt >/dev/null')
        rc = peer.stop()
        h.expect(rc == 0, f'pcinet-peer exited {rc} on SIGTERM:\n'
                 + peer.log_tail())
        took = t.a.wait_until(f'! {FS_DEV}', 2, what='virtio-fs gone',
                              show='grep . /sys/bus/virtio/devices/*/device;'
                              ' dmesg | tail -n 10')
        h.info(f'virtio-fs device gone {took:.2f} s after SIGTERM')
        t.a.run('umount /mnt', timeout=20)
        h.unload(t.a, 10)
    finally:
        peer.close()


@h.case('virtio-fs-restart', fresh=True)
def _(t):
    """A dead virtiofsd: withdrawn, started again, offered anew."""
    share = t.workdir / 'share'
    shutil.rmtree(share, ignore_errors=True)
    share.mkdir()
    peer = started(t, share)
    try:
        fs_mount(t)
        t.a.run('ls /mnt >/dev/null')
        # the log is the run's: this peer's virtiofsd is the last started
        pids = re.findall(r'virtio-fs: started \S+ \(pid (\d+)\)',
                          peer.log.read_text())
        h.expect(pids, 'no virtiofsd in the log')
        mark = peer.log_size()
        os.kill(int(pids[-1]), signal.SIGKILL)
        peer.wait_log('virtio-fs withdrawn', 5, mark)
        peer.wait_log('device offered: virtio-fs', 10, mark)
        (share / 'later.txt').write_text('after the restart\n')
        t.a.wait_until(FS_DEV, 10, what='virtio-fs back')
        t.a.run('umount /mnt', timeout=20)
        fs_mount(t)
        t.a.run('grep -qx "after the restart" /mnt/later.txt')
        t.a.run('umount /mnt', timeout=20)
        peer.expect_alive()
    finally:
        peer.close()


@h.case('virtio-fs-abort', fresh=True)
def _(t):
    """A FUSE request in flight when the device dies fails with EIO;
    the device comes back, a new mount works."""
    share = t.workdir / 'share'
    shutil.rmtree(share, ignore_errors=True)
    share.mkdir()
    peer = started(t, share)
    try:
        fs_mount(t)
        t.a.run('ls /mnt >/dev/null')
        peer.signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            # a name never looked up: a LOOKUP the frozen side never sees
            out = t.a.run('stat /mnt/never-seen 2>&1; echo "rc=$?"',
                          timeout=30)
            took = time.monotonic() - t0
            h.info(f'the request failed after {took:.1f} s: '
                   f'{out.strip().splitlines()[0]}')
            h.expect(re.search(r'i/o error|input/output error', out, re.I)
                     and 'rc=0' not in out,
                     f'stat during the freeze: not EIO:\n{out}')
            t.a.wait_until(f'! {FS_DEV}', 5, what='virtio-fs unplugged')
            # a well-formed reply: virtio_fs_verify_response() (6.12.118)
            # has nothing to say about it
            bad = t.a.run('dmesg | grep -E "virtio-fs: (oh\\.|invalid|'
                          'response too short|error response)" || true')
            h.expect(not bad.strip(), 'the aborted request\'s reply was '
                     f'refused by virtio-fs:\n{bad}')
        finally:
            peer.signal(signal.SIGCONT)
        t.a.wait_until(FS_DEV, 10, what='virtio-fs back after SIGCONT')
        t.a.run('umount /mnt', timeout=20)
        (share / 'after.txt').write_text('after the freeze\n')
        fs_mount(t)
        t.a.run('grep -qx "after the freeze" /mnt/after.txt')
        t.a.run('umount /mnt', timeout=20)
        peer.expect_alive()
    finally:
        peer.close()


if __name__ == '__main__':
    raise SystemExit(h.main())
