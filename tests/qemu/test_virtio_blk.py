#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The virtio channel's disk carrying real data, stage 2 (issue 10, Block).

    +------- a (QEMU) ---------+   pcinet-fabric     +---- host, netns pnv-<pid> ----+
    | pcinet.ko: the transport |<== -m 64M -V 8M ==>| pcinet-peer --blk IMAGE       |
    | virtio_blk: /dev/vda     |    -n 4, vectors=4  |   qemu-storage-daemon behind  |
    | ext4, fio (--storage)    |                     |   e2fsck, debugfs on IMAGE    |
    +--------------------------+                     +-------------------------------+

The topology of test_virtio.py with the storage initramfs (mke2fs, ext4,
fio).  Nothing is ever mounted on the host: the image is checked with
e2fsck and read with debugfs (rdump), never through this machine's kernel.

Cases:
  virtio-blk-ext4       mkfs.ext4 on /dev/vda on the board and a tree of 301
                        files written into it (0 B to 64 KiB, and one of
                        4 MiB), its sha256 list taken, umount; on the host
                        e2fsck -fn is clean and debugfs's rdump of the image
                        holds the same files with the same sha256s, and no
                        others
  virtio-blk-sync-kill  8 MiB written with periodic writeback off, so it
                        sits in the board's page cache: not yet in the image
                        (so the check below can fail); then `sync` and QEMU
                        SIGKILLed the moment it returns: the image holds it
                        (a file on ext4, the check on a copy of the image
                        whose journal e2fsck replayed, clean after)
  virtio-blk-fio        fio on /dev/vda: 4 KiB random writes verified as
                        they go (--verify=crc32c, verify_backlog) for a
                        minute (20 s on the debug kernel, which is there
                        for its memory checks, not for the volume),
                        then 10 s of 4 KiB random read+write at iodepth
                        128, the queue's whole depth (nr_tags) in flight:
                        when the bounce pool runs short, submissions wait;
                        no error from fio, no I/O error in dmesg

Both kernels have ext4 and SysV IPC (fio allocates its job area with
shmget, even with --thread): the debug kernel's config carries them.
"""

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402
from peer_lib import BlkPeer, sh  # noqa: E402

TRANSPORT = h.ROOT / 'drivers/net/pcinet/pcinet_vio.c'
IMG_MIB = 64
MNT = '/mnt/v'
TREE_FILES = 300		# small files, plus one of 4 MiB
VERIFY_S = 20 if h.KERNEL == 'debug' else 60	# fio --verify: seconds
QD128_S = 10			# fio at iodepth 128: seconds

h.configure(machines=('a',), links=[('a',)], extra_modules=[h.PCINET_KO],
            fabric_size='64M', fabric_vio='8M', vectors=4, storage=True)


def need_tools():
    """Skip (with the reason) what this tree or machine cannot run."""
    if not TRANSPORT.exists():
        h.skip('the board transport (drivers/net/pcinet/pcinet_vio.c) is '
               'not in this tree')
    for tool in ('qemu-storage-daemon', 'e2fsck', 'debugfs'):
        if not shutil.which(tool):
            h.skip(f'{tool} not installed on the host')


def started(t):
    """pcinet-peer --blk up, pcinet loaded on the board, /dev/vda there
    with the image's size (the peer is closed again if that fails)."""
    need_tools()
    peer = BlkPeer(t, IMG_MIB)
    try:
        peer.start()
        h.load(t.a)
        took = t.a.wait_until('[ -b /dev/vda ]', 60, what='/dev/vda',
                              show='ls /sys/block; dmesg | grep -iE '
                              '"pcinet|virtio" | tail -n 15')
        h.info(f'/dev/vda after {took:.1f} s')
        size = int(t.a.run('cat /sys/block/vda/size').strip())
        h.expect(size == IMG_MIB << 11,
                 f'/dev/vda has {size} sectors, the image {IMG_MIB << 11}')
    except BaseException:
        peer.close()
        raise
    return peer


def mkfs_mount(t):
    t.a.run(f'mkfs.ext4 -F -q /dev/vda 2>&1 && mkdir -p {MNT} && '
            f'mount -t ext4 /dev/vda {MNT}', timeout=300)


def host_fsck(img, repair=False):
    """e2fsck -f on the image: -n (read-only), or -y on a copy to replay
    the journal; returns (rc, output)."""
    r = subprocess.run(['e2fsck', '-f', '-y' if repair else '-n', str(img)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    return r.returncode, r.stdout


def host_dump(img, out):
    """The whole file system of img into the directory out (debugfs
    rdump: read from the image file, nothing mounted)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sh(['debugfs', '-R', f'rdump / {out}', str(img)], timeout=120)


def sha_file(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def parse_sums(text):
    """sha256sum's lines -> {relative path: sha256}."""
    sums = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and len(parts[0]) == 64:
            sums[parts[1].strip().removeprefix('./')] = parts[0]
    return sums


def tree_script(top):
    """Shell: TREE_FILES + 1 files under top (0 B to 64 KiB in 60
    directories, and one of 4 MiB), their sha256 list in /tmp/tree.sha
    (paths relative to top); prints how many."""
    return f"""set -e
mkdir -p {top}
cd {top}
i=0
while [ $i -lt {TREE_FILES} ]; do
	d=d$((i % 12))/s$((i % 5))
	mkdir -p $d
	head -c $(((i * 7919) % 65537)) /dev/urandom >$d/f$i
	i=$((i + 1))
done
head -c 4194304 /dev/urandom >big
find . -type f | sort | xargs sha256sum >/tmp/tree.sha
wc -l </tmp/tree.sha
"""


@h.case('virtio-blk-ext4', fresh=True)
def _(t):
    """ext4 made and filled on the board; e2fsck and a content check of
    the image on the host."""
    peer = started(t)
    try:
        t0 = time.monotonic()
        mkfs_mount(t)
        n = int(t.a.run(tree_script(MNT), timeout=600).split()[-1])
        t.a.run(f'umount {MNT}', timeout=120)
        h.info(f'{n} files written into ext4 in {time.monotonic() - t0:.1f} s')
        h.expect(n == TREE_FILES + 1, f'{n} files listed, '
                 f'{TREE_FILES + 1} written')
        sums = parse_sums(t.a.run('cat /tmp/tree.sha'))
        h.expect(len(sums) == n, f'{len(sums)} sums parsed of {n}')
        rc, out = host_fsck(peer.img)
        h.expect(rc == 0, f'e2fsck -fn on the image: exit {rc}:\n{out}')
        h.info(out.strip().splitlines()[-1])
        dump = t.workdir / 'rdump'
        host_dump(peer.img, dump)
        found = {str(p.relative_to(dump)) for p in dump.rglob('*')
                 if p.is_file()}
        h.expect(found == set(sums),
                 f'files only on the board: {sorted(set(sums) - found)[:5]}, '
                 f'only in the image: {sorted(found - set(sums))[:5]}')
        bad = [p for p, s in sums.items() if sha_file(dump / p) != s]
        h.expect(not bad, f'{len(bad)} of {n} files differ: {bad[:5]}')
        peer.expect_alive()
    finally:
        peer.close()


# no periodic writeback: until the sync, what is written stays in the
# board's page cache
NO_WRITEBACK = ('echo 0 >/proc/sys/vm/dirty_writeback_centisecs && '
                'echo 360000 >/proc/sys/vm/dirty_expire_centisecs && '
                'head -c 8388608 /dev/urandom >/tmp/pat && ')


def synced_file(t, img, name):
    """The sha256 of the file /data in a copy of img whose journal e2fsck
    replayed (None if it is not there); the copy must then be clean."""
    copy = t.workdir / f'{name}.raw'
    shutil.copyfile(img, copy)
    rc, out = host_fsck(copy, repair=True)
    h.expect(rc in (0, 1), f'{name}: e2fsck -fy (journal replay): exit '
             f'{rc}:\n{out}')
    rc, out = host_fsck(copy)
    h.expect(rc == 0, f'{name}: e2fsck -fn after the replay: exit {rc}:\n'
             f'{out}')
    dump = t.workdir / name
    host_dump(copy, dump)
    return sha_file(dump / 'data') if (dump / 'data').is_file() else None


@h.case('virtio-blk-sync-kill', fresh=True)
def _(t):
    """Written, `sync`, the board killed at once: the image holds it."""
    peer = started(t)
    try:
        # ext4's delayed allocation keeps even the blocks unallocated
        mkfs_mount(t)
        pat = t.a.run(NO_WRITEBACK + f'cp /tmp/pat {MNT}/data && '
                      'sha256sum /tmp/pat', timeout=120).split()[0]
        before = synced_file(t, peer.img, 'before')
        h.expect(before != pat, 'the data reached the image before the '
                 'sync: this case would not notice a flush ignored')
        t0 = time.monotonic()
        t.a.run('sync', timeout=300)
        t.a.kill(signal.SIGKILL)
        t.mark_dirty('the board was killed')
        h.info(f'sync returned, board killed '
               f'{time.monotonic() - t0:.1f} s after the sync started '
               '(a file on ext4)')
        got = synced_file(t, peer.img, 'after')
        h.expect(got is not None, 'the file is not in the image')
        h.expect(got == pat, f'in the image: {got}, written {pat}')
    finally:
        peer.close()


def fio(t, args, secs):
    """fio on /dev/vda (io_uring, O_DIRECT, 4 KiB) for secs seconds; its
    job's JSON.  A non-zero exit, an error or nothing moved fails."""
    cmd = ('fio --name=vblk --filename=/dev/vda --ioengine=io_uring '
           f'--direct=1 --bs=4k --size={IMG_MIB - 8}M --time_based '
           f'--runtime={secs} {args} --output-format=json '
           '--output=/tmp/fio.json >/tmp/fio.err 2>&1; rc=$?; '
           'cat /tmp/fio.json; [ $rc = 0 ] || cat /tmp/fio.err; exit $rc')
    out = t.a.run(cmd, timeout=secs * 4 + 300)
    try:
        job = json.loads(out[out.index('{'):])['jobs'][0]
    except (ValueError, KeyError, IndexError):
        raise h.CaseFailure(f'fio output not understood:\n{out[-800:]}') \
            from None
    h.expect(job['error'] == 0, f'fio: error {job["error"]}')
    return job


@h.case('virtio-blk-fio', fresh=True)
def _(t):
    """fio --verify=crc32c for a minute (20 s on the debug kernel), then
    iodepth 128 for 10 s: no error."""
    need_tools()
    peer = started(t)
    try:
        tags = t.a.run('cat /sys/block/vda/mq/*/nr_tags 2>/dev/null | '
                       'head -n 1; cat /sys/block/vda/queue/nr_requests')
        h.info('vda: nr_tags, nr_requests: ' + ' '.join(tags.split()))
        job = fio(t, '--rw=randwrite --iodepth=16 --verify=crc32c '
                  '--verify_backlog=512 --verify_fatal=1 --do_verify=1',
                  VERIFY_S)
        w, r = job['write']['io_kbytes'], job['read']['io_kbytes']
        h.info(f'verify: {w} KiB written, {r} KiB read back and verified '
               f'in {VERIFY_S} s')
        h.expect(w > 0 and r > 0, f'fio wrote {w} KiB, verified {r} KiB')
        job = fio(t, '--rw=randrw --iodepth=128', QD128_S)
        w, r = job['write']['iops'], job['read']['iops']
        h.info(f'iodepth 128: {r:.0f} read + {w:.0f} write IOPS')
        h.expect(job['write']['total_ios'] > 0 and
                 job['read']['total_ios'] > 0, 'iodepth 128: no I/O done')
        err = t.a.run('dmesg | grep -ciE "I/O error|blk_update_request|'
                      'critical .*error" || true').strip()
        h.expect(err == '0', f'{err} I/O error lines in dmesg')
        peer.expect_alive()
    finally:
        peer.close()


if __name__ == '__main__':
    raise SystemExit(h.main())
