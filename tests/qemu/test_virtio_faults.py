#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The virtio channel's faults, stage 2: the board in QEMU, the device
side (pcinet-peer --blk, qemu-storage-daemon behind it) on the host, as
in test_virtio.py, on a fabric with fault injection.

    +------- a (QEMU) ---------+  pcinet-fabric -C   +---- host, netns pnv-<pid> ----+
    | pcinet.ko: the transport |<= -m 64M -V 8M =>  | pcinet-peer --blk IMAGE       |
    | virtio_blk: /dev/vda     |   scribble, -n 4    |   qemu-storage-daemon behind  |
    +--------------------------+                     +-------------------------------+

docs/design.md, "Instances, reset and hot-unplug", "Untrusted input" and
the "Test plan" table.  What the board's user relies on: a device side
that dies, freezes or restarts, or a window scribbled by a third party,
costs I/O errors or an unplug within a bounded time, never a hang (dd
ends, sync and rmmod return) or a splat; the device comes back by itself
and holds what was written before; net and tty resets leave it alone.

Cases:
  virtio-peer-cycles  10 cycles (4 on the debug kernel) of kill -9,
                      SIGSTOP 3.5 s / SIGCONT, SIGTERM + restart of
                      pcinet-peer under a dd on /dev/vda: /dev/vda goes
                      within a bound, the dd ends, sync returns, the
                      device comes back with the data written before,
                      and after a kill or restart no probe failed (a gone
                      device side's offer registered); then rmmod pcinet
                      during a dd returns within 5 s (10 s on the debug
                      kernel) and the dd ends
  virtio-net-reset    net and tty rings scribbled under traffic both
                      ways and a dd (link resets and dropped records
                      counted, > 0): /dev/vda stays, the dd succeeds, a
                      pattern written during the faults reads back equal
  virtio-scribble     the fixed parts and rings of the board's drv region
                      and the device side's dev region scribbled under a
                      dd: unplugs or I/O errors (at least one), no hang,
                      no splat; /dev/vda back within 30 s after, and a new
                      pattern reads back equal
  virtio-old-peer     a device side that offers without PCINET_F_VIRTIO
                      (--blk-fault=no-feature): no device; net and tty work
  virtio-stale-used   a used entry no request of the session made, in a
                      fresh used ring (--blk-fault=stale-used: what a back
                      end completing a request after it answered a reset
                      does): the board unplugs (ratelimited message, no
                      splat), the device side offers again, /dev/vda is
                      back with its data
  virtio-probe-fails  virtio-blk's first offer with blk_size 3
                      (--blk-fault=bad-size-once): virtio_blk's probe
                      fails the device, the board unplugs it, the next
                      (honest) offer is probed: /dev/vda back by itself,
                      a pattern reads back equal
  virtio-bad-config   virtio-blk's config with wce 2 (--blk-fault=bad-wce),
                      a value virtio_blk turns into an index with a BUG_ON:
                      the board reads "write back", no splat
  virtio-reset-in-flight  qemu-storage-daemon with writes throttled to
                      4 KiB/s: a dd's second 64 KiB write is held, the
                      board finds the device wedged (10 s) and drops it;
                      pcinet-peer's GET_VRING_BASE returns with the write
                      still in the back end (logged: what qemu-storage-
                      daemon does), pcinet-peer waits for it, gives up,
                      kills the back end: no completion of the old
                      session reaches the new one's used ring (no "used"
                      error on the board), /dev/vda is back with the data
                      the image held
  virtio-ctl-scribble the words saying whether a side runs (magic, gen) of
                      both control blocks scribbled, one write every 0.5 s
                      for 8 s, under a dd: the link resets (counted, > 0)
                      but /dev/vda is not unplugged, the dd succeeds, a
                      pattern written meanwhile reads back equal
  virtio-word-poke    one word at a time of those that tell a side whether
                      the other is there and which instance it is (the
                      features word of its control block, the magic and
                      inst of its virtio region header; the host's words
                      for the board, the board's for pcinet-peer) set to
                      a wrong random value and put back a tick later, 24
                      times in 6 s, under a dd: no unplug, no "gone" or
                      "unplugging" line on the board, no session ended by
                      pcinet-peer, /dev/vda stays, the dd succeeds, a
                      pattern written meanwhile reads back equal
                      (PCINET_PEER_GRACE_MS)
  virtio-hostile-ids  a host that offers, beside the disk, a device of ID
                      5, 18, 24 or 27 (balloon, input, mem, pmem; one
                      pcinet-peer run each, --blk-fault=id=N on its
                      virtio-fs device; 24 only on the debug kernel): the
                      board refuses it (its line), registers no device of
                      that ID, MemTotal unchanged, and /dev/vda beside it
                      takes a pattern that reads back equal
  virtio-config-storm the disk's config_gen incremented 1e6 times/s (the
                      fabric's storm) for 60 s, under I/O, an rmmod and
                      the probe after an insmod: no soft lockup, the dd
                      succeeds, rmmod returns within 5 s, /dev/vda comes
                      back during the storm and holds the pattern
  virtio-status-read  the disk's status file (any user may read it) read
                      in a loop for 7 s while its answer word (status_seq)
                      is stormed at 10 kHz: every read returns within 1.5 s,
                      no unplug, the pattern intact
  virtio-dev-gen-flip the disk's dev_gen incremented 10000 times/s for
                      60 s: the board backs off (fewer than 20 plugs,
                      fewer than 100 lines of log), /dev/vda is back
                      afterwards with the data written before
"""

import contextlib
import hashlib
import os
import random
import re
import select
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
QSD = os.environ.get('PCINET_QSD', 'qemu-storage-daemon')
IMG_MIB = 64
# The data written before the faults (1 MiB at 1 MiB) and where the
# background dd writes (32 MiB from 16 MiB): apart.
PAT_OFF, PAT_MIB = 1, 1
DD_SEEK_64K, DD_COUNT_64K = 256, 512
DD_NODE = '/tmp/vda.node'	# the background dd's block device node
# Bounds (seconds): the design's are ~1 s for a gone device side; TCG and
# the debug kernel are slower.
SLOW = 3 if h.KERNEL == 'debug' else 1
GONE = 5 * SLOW			# /dev/vda gone after a kill or a freeze
DD_END = 10 * SLOW		# the background dd ended after that
BACK = 60			# /dev/vda back (probe, partition scan)
RMMOD = 5 * (2 if h.KERNEL == 'debug' else 1)	# rmmod during a dd
# Scribbles: writes/s.  The words that matter in 128 KiB of a virtio
# region (dev_gen, used->idx, a used entry in flight) are a few: at this
# rate each is hit a few times in 5 s.
RATE = 50000
IP = '10.79.0.1'
HOST_IP = '10.79.0.2'

h.configure(machines=('a',), links=[('a',)], extra_modules=[h.PCINET_KO],
            fabric_size='64M', fabric_vio='8M', vectors=4,
            fabric_control=True)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def need_stage2():
    if not TRANSPORT.exists():
        h.skip('the board transport (drivers/net/pcinet/pcinet_vio.c) is '
               'not in this tree')
    if not shutil.which(QSD):
        h.skip(f'{QSD} not installed')


def peer_start(peer, *extra):
    """pcinet-peer --blk with extra options; its TAP gets HOST_IP."""
    mark = peer.spawn('-i', 'pnv0', '-l', peer.t.workdir / 'peer.tty',
                      '--blk', peer.img, *extra)
    peer.wait_log('vio: back end ready', 15, mark)
    sh(['ip', '-n', peer.ns, 'addr', 'replace', f'{HOST_IP}/24', 'dev',
        'pnv0'])
    sh(['ip', '-n', peer.ns, 'link', 'set', 'pnv0', 'up'])
    return mark


def wait_vda(t, timeout=BACK, why=''):
    took = t.a.wait_until('[ -b /dev/vda ]', timeout,
                          what=f'/dev/vda back{why}',
                          show='ls /sys/bus/virtio/devices/ /sys/block; '
                          'dmesg | grep -iE "pcinet|virtio|vda" | tail -n 15')
    # a capacity read while a scribble hit the config is read again
    # once D repaired it (pcinet_vio_config_moved(): the next tick)
    want = IMG_MIB << 11
    t.a.wait_until(f'[ "$(cat /sys/block/vda/size)" = {want} ]', 3 * SLOW,
                   must=False)
    size = t.a.run('cat /sys/block/vda/size 2>/dev/null || echo 0').strip()
    h.expect(size == str(want), f'/dev/vda has {size} sectors, the image '
             f'{want}{why} ({3 * SLOW} s after it came)')
    return took


def wait_vda_settled(t, timeout, why='', quiet=2):
    """wait_vda(), and the same device still there quiet s later: a
    back end that a fault broke just before it stopped may be withdrawn
    a tick afterwards (pcinet-peer sees its socket closed), and the one
    offered next is the one to test."""
    t0 = time.monotonic()
    dev = 'readlink -f /sys/block/vda/device 2>/dev/null || true'
    while True:
        left = timeout - (time.monotonic() - t0)
        wait_vda(t, max(left, 1), why)
        was = t.a.run(dev).strip()
        time.sleep(quiet)
        if was and t.a.run(dev).strip() == was:
            return time.monotonic() - t0 - quiet
        h.expect(time.monotonic() - t0 < timeout,
                 f'/dev/vda did not settle{why}: still replaced '
                 f'{timeout} s after')


def vda_gone(t, timeout, why):
    return t.a.wait_until('! [ -b /dev/vda ]', timeout,
                          what=f'/dev/vda gone {why}',
                          show='ls /sys/block; dmesg | tail -n 12')


def started(t, *extra):
    need_stage2()
    peer = BlkPeer(t, IMG_MIB)
    try:
        peer_start(peer, *extra)
        h.load(t.a)
        wait_vda(t)
    except BaseException:
        peer.close()
        raise
    return peer


def board_logged(t, regex, what, timeout=20):
    """Wait until the board's kernel log has a line matching regex (grep
    -E, no double quote in it); not in time: its last virtio lines."""
    t.a.wait_until(f'dmesg | grep -qE "{regex}"', timeout, what=what,
                   show='dmesg | grep -i virtio | tail -n 8')


def guest_sha(t, off_mib, mib):
    """sha256 of /dev/vda's bytes, past the page cache."""
    out = t.a.run(f'dd if=/dev/vda bs=1M skip={off_mib} count={mib} '
                  'iflag=direct 2>/dev/null | sha256sum', timeout=300)
    return out.split()[0]


def new_pattern(t, off_mib, mib):
    """mib MiB of random bytes in /tmp/pat: their sha256 and the dd that
    writes them at off_mib MiB (O_DIRECT, fsync)."""
    pat = t.a.run(f'dd if=/dev/urandom of=/tmp/pat bs=1M count={mib} '
                  '2>/dev/null && sha256sum /tmp/pat').split()[0]
    return pat, (f'dd if=/tmp/pat of=/dev/vda bs=1M seek={off_mib} '
                 'oflag=direct conv=fsync 2>&1')


def write_pattern(t, off_mib, mib, timeout=120):
    """new_pattern(), written; its sha256."""
    pat, dd = new_pattern(t, off_mib, mib)
    t.a.run(dd, timeout=timeout)
    return pat


def write_pattern_healed(t, why):
    """write_pattern() at PAT_OFF on the device that is back after a
    scribble.  One offered while the scribble still ran can have had its
    rings hit after its back end started, and a back end may then serve
    them no more without a word: the board finds that out itself (no
    completion in PCINET_VIO_IO_MS, an unplug) and the device offered
    next must work.  So a write may fail once, only if that unplug
    follows; the next one must not."""
    pat, dd = new_pattern(t, PAT_OFF, PAT_MIB)
    n0 = unplugs(t)
    rc, out = t.a.sh(dd, timeout=120)
    if rc == 0:
        return pat
    h.info(f'{why}: the first write failed ({out.strip()[-80:]!r}): '
           'waiting for the board to unplug that device')
    t.a.wait_until(f'[ "$({UNPLUGS})" -gt {n0} ]', 15 * SLOW,
                   what=f'{why}: an unplug after the failed write',
                   show='dmesg | tail -n 30')
    wait_vda_settled(t, 30, f' {why}, after the unplug')
    t.a.run(dd, timeout=120)
    return pat


def check_pattern(t, peer, pat, when):
    back = guest_sha(t, PAT_OFF, PAT_MIB)
    h.expect(back == pat, f'{when}: /dev/vda reads {back}, written {pat}')
    host = peer.image_sha(PAT_OFF, PAT_MIB)
    h.expect(host == pat, f'{when}: the host image has {host}, written '
             f'{pat}')


def dd_start(t, rw='write', loop=False, moved=2):
    """A dd on /dev/vda in the background (O_DIRECT, 64 KiB blocks, 32
    MiB), its exit status in /tmp/dd.rc; once it moves.  rw: write or
    read.  loop: dd again and again until one fails (its status), so that
    the fault surely meets one under way; 'stop': also until /tmp/dd.stop
    exists (then status 0 if none failed).  moved: it counts as under way
    once more than that many requests completed."""
    # A node of our own for this disk: once the disk is gone, opening it
    # fails (ENXIO).  of=/dev/vda would create a regular file in
    # devtmpfs instead, the next dd of the loop would write 32 MiB into
    # it and succeed, and the loop would never end (seen on the debug
    # kernel: dd in shmem_file_write_iter), nor could the disk's node
    # come back.
    t.a.run(f'rm -f {DD_NODE}; mknod {DD_NODE} b '
            '$(tr ":" " " </sys/block/vda/dev)')
    io = (f'if=/dev/zero of={DD_NODE} seek={DD_SEEK_64K} oflag=direct'
          if rw == 'write' else
          f'if={DD_NODE} of=/dev/null skip={DD_SEEK_64K} iflag=direct')
    ios = 'awk \'$3 == "vda" {print $4 + $8}\' /proc/diskstats'
    n0 = int(t.a.run(ios).strip() or 0)
    dd = f'dd {io} bs=64k count={DD_COUNT_64K} >/tmp/dd.log 2>&1'
    if loop == 'stop':
        job = (f'while [ ! -e /tmp/dd.stop ]; do {dd} || '
               '{ echo $? >/tmp/dd.rc; break; }; done; '
               '[ -e /tmp/dd.rc ] || echo 0 >/tmp/dd.rc')
    elif loop:
        job = f'while true; do {dd} || {{ echo $? >/tmp/dd.rc; break; }}; done'
    else:
        job = f'{dd}; echo $? >/tmp/dd.rc'
    t.a.run('rm -f /tmp/dd.rc /tmp/dd.log /tmp/dd.stop; '
            f'(({job}) &) >/dev/null 2>&1')
    # requests in flight before the fault: the dd's first ones completed
    t.a.wait_until(f'[ "$({ios})" -gt {n0 + moved} ]', 20,
                   what='the dd under way', show='cat /tmp/dd.log')


def dd_end(t, timeout, why):
    """The background dd ended within timeout s; its exit status."""
    took = t.a.wait_until('[ -e /tmp/dd.rc ]', timeout,
                          what=f'the dd ended {why}',
                          show='cat /tmp/dd.log; ps; '
                          'for p in $(pidof dd); do cat /proc/$p/stack; done; '
                          # the tasks that wait (the remove, a probe)
                          'echo w >/proc/sysrq-trigger; sleep 1; '
                          'dmesg | tail -n 120')
    return int(t.a.run('cat /tmp/dd.rc').strip() or -1), took


def sync_returns(t, why, timeout=5 * SLOW):
    t0 = time.monotonic()
    rc, out = t.a.sh('sync', timeout=timeout + 30)
    took = time.monotonic() - t0
    h.expect(took < timeout, f'sync {why} took {took:.1f} s')
    return took


UNPLUGS = 'dmesg | grep -c "virtio slot .*unplugged"'


def unplugs(t):
    return int(t.a.run(f'{UNPLUGS} || true').strip() or 0)


def failed_probes(t):
    """Probes that failed (a device gone while its driver probed it)."""
    return int(t.a.run('dmesg | grep -c "device refuses features" || true')
               .strip() or 0)


def ring_faults(t):
    """What the board's link counted: carrier changes (link resets), net
    records dropped as changed or too long, tty records dropped."""
    out = t.a.run('cat /sys/class/net/pcinet0/carrier_changes; '
                  'ethtool -S pcinet0 | grep -E "rx_(crc|length)_errors"')
    lines = out.split('\n')
    r = {'resets': int(lines[0].strip())}
    for line in lines[1:]:
        if ':' in line:
            k, v = line.split(':')
            r[k.strip()] = int(v)
    return r


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------

@h.case('virtio-peer-cycles', fresh=True)
def _(t):
    """kill -9, SIGSTOP/SIGCONT and restart of the device side, in turn,
    under a dd: gone within a bound, the dd ends, sync returns, back with
    the data; then rmmod during a dd within 5 s."""
    peer = started(t)
    try:
        pat = write_pattern(t, PAT_OFF, PAT_MIB)
        n = 4 if h.KERNEL == 'debug' else 10
        took = {'kill': [], 'stop': [], 'restart': []}
        for i in range(n):
            kind = ('kill', 'stop', 'restart')[i % 3]
            try:
                probes0 = failed_probes(t)
                dd_start(t, loop=True)
                if kind == 'kill':
                    peer.kill()
                    gone = vda_gone(t, GONE, 'after kill -9')
                elif kind == 'stop':
                    peer.signal(signal.SIGSTOP)
                    t0 = time.monotonic()
                    # gone while still frozen: the peer timeout, not a
                    # withdrawal, took it
                    gone = vda_gone(t, GONE, 'while pcinet-peer is stopped')
                    time.sleep(max(0.0, 3.5 - (time.monotonic() - t0)))
                    peer.expect_alive()
                else:
                    rc = peer.stop()
                    h.expect(rc == 0, f'pcinet-peer exited {rc} on SIGTERM:\n'
                             + peer.log_tail())
                    gone = vda_gone(t, GONE, 'after SIGTERM')
                rc, ended = dd_end(t, DD_END, f'after the {kind}')
                h.expect(rc != 0, f'the dd succeeded through a {kind} of '
                         'the device side:\n' + t.a.run('cat /tmp/dd.log'))
                sync_returns(t, f'after the {kind}')
                if kind == 'stop':
                    peer.signal(signal.SIGCONT)
                else:
                    peer_start(peer)
                back = wait_vda(t, why=f' after the {kind}')
                took[kind].append((gone, back))
                check_pattern(t, peer, pat, f'cycle {i + 1} ({kind})')
                # a killed or stopped device side's offer left in the
                # window is not registered again (a frozen one may be,
                # once, when it looks alive after the link's reset)
                if kind != 'stop':
                    h.expect(failed_probes(t) == probes0, 'a probe failed: '
                             'the offer of a device side that was gone was '
                             'registered')
            except h.CaseFailure as e:
                raise h.CaseFailure(f'cycle {i + 1} ({kind}): {e}') from None
        # kept with --keep: the transport's messages of every cycle
        (t.workdir / 'a.dmesg').write_text(t.a.run('dmesg', timeout=60))
        h.info('gone / back after (s, guest clock), max: ' + ', '.join(
            f'{k} {max(g for g, _ in v):.2f} / {max(b for _, b in v):.1f}'
            for k, v in took.items() if v) + f'; {failed_probes(t)} failed '
            'probes')
        # rmmod of the board's driver during a dd: returns within 5 s
        dd_start(t, loop=True)
        t0 = time.monotonic()
        rc, out = t.a.sh('rmmod pcinet', timeout=60)
        took_rmmod = time.monotonic() - t0
        h.expect(rc == 0, f'rmmod pcinet during a dd: {out}')
        h.expect(took_rmmod < RMMOD, f'rmmod pcinet during a dd took '
                 f'{took_rmmod:.1f} s')
        # it ends: the remove lets the requests in flight complete (the
        # device side is alive), the next dd fails on the gone disk
        rc, _ = dd_end(t, DD_END, 'after rmmod')
        h.info(f'rmmod during dd: {took_rmmod:.2f} s (host clock), the dd '
               f'exited {rc}')
        h.load(t.a)
        wait_vda(t, why=' after insmod')
        check_pattern(t, peer, pat, 'after rmmod and insmod')
        peer.expect_alive()
        h.unload(t.a, 5)
    finally:
        peer.close()


def scribble(t, regions, secs, rate=RATE, mode='random'):
    """Scribble regions for secs s (their writes reported), then wait
    until the fabric says they stopped."""
    seed = int(os.environ.get('PCINET_FAULT_SEED') or time.time())
    for r in regions:
        h.info(t.fabric.fault(f'scribble {r} {rate} {secs} {mode} {seed}'))
    time.sleep(secs)
    deadline = time.monotonic() + 10
    while 'scribble=none' not in t.fabric.fault('status'):
        h.expect(time.monotonic() < deadline, 'scribbles did not stop')
        time.sleep(0.05)


def pattern_start(t):
    """1 MiB of random bytes written to /dev/vda at 1 MiB in the background
    (64 KiB O_DIRECT writes, fsync; pattern_written() waits for it); its
    sha256."""
    pat = t.a.run('dd if=/dev/urandom of=/tmp/pat bs=1M count=1 '
                  '2>/dev/null && sha256sum /tmp/pat').split()[0]
    t.a.run('((dd if=/tmp/pat of=/dev/vda bs=64k seek=16 oflag=direct '
            'conv=fsync >/tmp/pat.log 2>&1; echo $? >/tmp/pat.rc) &) '
            '>/dev/null 2>&1')
    return pat


def pattern_written(t):
    """The pattern's background dd (/tmp/pat.rc) ended, successfully."""
    t.a.wait_until('[ -e /tmp/pat.rc ]', 120, what='the pattern written')
    h.expect(t.a.run('cat /tmp/pat.rc').strip() == '0',
             'writing the pattern failed: ' + t.a.run('cat /tmp/pat.log'))


@h.case('virtio-net-reset', fresh=True)
def _(t):
    """The net and tty rings scribbled under traffic both ways and a dd:
    records dropped, link resets; /dev/vda stays, and what is written
    meanwhile reads back equal."""
    peer = started(t)
    host = []
    try:
        h.net_up(t.a, IP)
        h.wait_carrier(t.a, 1, 15)
        before = ring_faults(t)
        unplugs0 = unplugs(t)
        # traffic both ways keeps every scribbled ring read
        tty = t.workdir / 'peer.tty'
        sh(['stty', '-F', str(tty), 'raw', '-echo'])
        host.append(subprocess.Popen(
            ['ip', 'netns', 'exec', peer.ns, 'ping', '-q', '-f', '-s', '1400',
             IP], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        host.append(subprocess.Popen(
            ['sh', '-c', f'cat {tty} >/dev/null & exec cat /dev/urandom '
             f'>{tty}'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        t.a.run('stty -F /dev/ttyPCI0 raw -echo clocal; '
                '(cat /dev/ttyPCI0 >/dev/null &) >/dev/null 2>&1; '
                '(cat /dev/urandom >/dev/ttyPCI0 &) >/dev/null 2>&1; '
                f'(ping -c 100000 -s 1400 {HOST_IP} >/dev/null 2>&1 &) '
                '>/dev/null 2>&1')
        dd_start(t)
        pat = pattern_start(t)
        scribble(t, ('net0', 'net1', 'tty0', 'tty1'), 5, rate=2000,
                 mode='bounds')
        for p in host:
            p.kill()
        t.a.run('killall ping cat >/dev/null 2>&1; true')
        rc, _ = dd_end(t, 300, 'after the ring faults')
        h.expect(rc == 0, 'the dd failed across link resets:\n'
                 + t.a.run('cat /tmp/dd.log'))
        pattern_written(t)
        after = ring_faults(t)
        seen = {k: after[k] - before[k] for k in after}
        h.info('during the dd: ' + ', '.join(f'{k} {v}'
                                               for k, v in seen.items()))
        h.expect(sum(seen.values()) > 0, 'no reset, no record dropped: the '
                 'case tested nothing')
        h.expect(unplugs(t) == unplugs0, '/dev/vda was unplugged by a link '
                 'reset:\n' + t.a.run('dmesg | grep -i virtio | tail -n 5'))
        h.expect(t.a.sh('[ -b /dev/vda ]')[0] == 0, '/dev/vda is gone')
        check_pattern(t, peer, pat, 'afterwards')
        h.wait_carrier(t.a, 1, 15)
        h.unload(t.a, 10)
    finally:
        for p in host:
            p.kill()
            p.wait()
        peer.close()


@h.case('virtio-scribble', fresh=True)
def _(t):
    """The virtio regions' fixed parts and rings scribbled under a dd:
    errors or unplugs, no hang, no splat; back once it stops."""
    peer = started(t)
    try:
        for regions, mode in ((('vdrv0',), 'random'),
                              (('vdev1',), 'random'),
                              (('vdrv0', 'vdev1'), 'bounds')):
            what = '+'.join(regions) + f' ({mode})'
            unplugs0 = unplugs(t)
            dd_start(t, loop=True)
            scribble(t, regions, 5, mode=mode)
            rc, _ = dd_end(t, 60 * SLOW, f'after scribbling {what}')
            hit = unplugs(t) - unplugs0
            h.info(f'{what}: dd exit {rc}, {hit} unplug(s)')
            h.expect(rc != 0 or hit > 0, f'scribbling {what}: no error, no '
                     'unplug: the case tested nothing')
            sync_returns(t, f'after scribbling {what}', timeout=30)
            back = wait_vda_settled(t, 30, f' after scribbling {what}')
            # a device that is back works: new data reads back equal
            pat = write_pattern_healed(t, f'after scribbling {what}')
            check_pattern(t, peer, pat, f'after scribbling {what}')
            h.info(f'{what}: /dev/vda working {back:.1f} s after')
        peer.expect_alive()
        h.unload(t.a, 10)
    finally:
        peer.close()


@h.case('virtio-old-peer', fresh=True)
def _(t):
    """A device side offering without PCINET_F_VIRTIO: no device; net
    and tty work."""
    need_stage2()
    peer = BlkPeer(t, IMG_MIB)
    try:
        mark = peer_start(peer, '--blk-fault=no-feature')
        h.net_up(t.a, IP)
        h.wait_carrier(t.a, 1, 15)
        # it does offer: only the feature bit is missing
        peer.wait_log('device offered', 15, mark)
        time.sleep(3)
        devs = t.a.run('ls /sys/bus/virtio/devices/ 2>/dev/null; '
                       'ls /sys/block').split()
        h.expect('vda' not in devs, 'a device was registered: '
                 + ' '.join(devs))
        h.expect(t.a.run('dmesg | grep -c "virtio slot" || true').strip()
                 == '0', 'the board registered a slot:\n'
                 + t.a.run('dmesg | grep "virtio slot" | tail -n 5'))
        rc, out = t.a.sh(f'ping -c 3 -W 3 {HOST_IP}', timeout=30)
        h.expect(rc == 0, f'no ping through: {out}')
        fd = os.open(t.workdir / 'peer.tty',
                     os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            want = t.a.run('stty -F /dev/ttyPCI0 raw -echo clocal; '
                           'head -c 4096 /dev/urandom >/tmp/t.bin; '
                           'cat /tmp/t.bin >/dev/ttyPCI0; '
                           'sha256sum </tmp/t.bin', timeout=60).split()[0]
            got = _pty_read(fd, 4096, 20)
        finally:
            os.close(fd)
        h.expect(hashlib.sha256(got).hexdigest() == want,
                 f'ttyPCI0 -> pty: {len(got)} of 4096 bytes, or changed')
        h.unload(t.a, 10)
    finally:
        peer.close()


def _pty_read(fd, n, secs):
    got = bytearray()
    deadline = time.monotonic() + secs
    while len(got) < n and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                got += os.read(fd, n - len(got))
            except (BlockingIOError, OSError):
                pass
    return bytes(got)


@h.case('virtio-stale-used', fresh=True)
def _(t):
    """A stale used entry in a new session's used ring: refused (an
    unplug, ratelimited message), no splat; the device comes back with its
    data."""
    peer = started(t, '--blk-fault=stale-used')
    try:
        pat = write_pattern(t, PAT_OFF, PAT_MIB)
        unplugs0 = unplugs(t)
        # a second session: the board's driver reloaded
        mark = peer.log_size()
        h.unload(t.a, 10)
        h.load(t.a)
        peer.wait_log('fault: a stale used entry', 30, mark)
        board_logged(t, 'virtio slot .*used (idx ahead|id)',
                     'the stale entry refused')
        h.expect(unplugs(t) > unplugs0, 'no unplug')
        wait_vda(t, why=' after the stale entry')
        check_pattern(t, peer, pat, 'after the stale entry')
        peer.expect_alive()
        h.unload(t.a, 10)
    finally:
        peer.close()


@h.case('virtio-probe-fails', fresh=True)
def _(t):
    """A first offer whose config virtio_blk's probe refuses (blk_size 3):
    the driver fails the device; the board unplugs it, the device side
    offers again, and the honest offer is probed: /dev/vda by itself."""
    need_stage2()
    peer = BlkPeer(t, IMG_MIB)
    try:
        mark = peer_start(peer, '--blk-fault=bad-size-once')
        h.load(t.a)
        peer.wait_log('first offer with blk_size 3', 15, mark)
        board_logged(t, 'probe (with driver virtio_blk|of virtio[0-9]+) '
                     'failed', 'the probe refusing blk_size 3')
        # before: registered with no driver, holding the slot for good
        wait_vda(t, why=' after the failed probe')
        h.expect(t.a.sh('dmesg | grep -q "its driver failed it"')[0] == 0,
                 'no unplug of the failed device:\n'
                 + t.a.run('dmesg | grep -i virtio | tail -n 8'))
        pat = write_pattern(t, PAT_OFF, PAT_MIB)
        check_pattern(t, peer, pat, 'after the failed probe')
        peer.expect_alive()
        h.unload(t.a, 10)
    finally:
        peer.close()


@h.case('virtio-bad-config', fresh=True)
def _(t):
    """A config byte out of range (wce 2): made 0 or 1 by the transport,
    so virtio_blk's cache_type_show() does not BUG()."""
    peer = started(t, '--blk-fault=bad-wce')
    try:
        peer.wait_log('config published with wce 2', 5)
        mode = t.a.run('cat /sys/block/vda/cache_type').strip()
        h.expect(mode == 'write back', f'cache_type: {mode!r}')
        pat = write_pattern(t, PAT_OFF, PAT_MIB)
        check_pattern(t, peer, pat, 'with wce 2 published')
    finally:
        peer.close()


# qemu-storage-daemon as pcinet-peer starts it, writes throttled to 4 KiB/s
# (PCINET_QSD): the throttle lets a 64 KiB write through, then holds the
# next one for ~16 s.
THROTTLED_QSD = r"""#!/bin/sh
# $1 --blockdev $2 driver=file,node-name=pcinet-vio0,filename=IMG
# $3 --export $4 type=vhost-user-blk,...,node-name=pcinet-vio0,...
exec qemu-storage-daemon --object throttle-group,id=tg0,x-bps-write=4096 \
	--blockdev "$(echo "$2" | sed s/node-name=pcinet-vio0/node-name=f0/)" \
	--blockdev driver=throttle,node-name=pcinet-vio0,throttle-group=tg0,file=f0 \
	"$3" "$4"
"""


@h.case('virtio-reset-in-flight', fresh=True)
def _(t):
    """A write held in the back end when the board drops the device: its
    completion must not reach the next session (design.md, virtio open
    question 11)."""
    need_stage2()
    qsd = t.workdir / 'qsd-throttled'
    qsd.write_text(THROTTLED_QSD)
    qsd.chmod(0o755)
    old = os.environ.get('PCINET_QSD')
    os.environ['PCINET_QSD'] = str(qsd)
    peer = BlkPeer(t, IMG_MIB)
    try:
        # the data the disk holds: written on the host, writes are slow
        pat_bytes = os.urandom(PAT_MIB << 20)
        with open(peer.img, 'r+b') as f:
            f.seek(PAT_OFF << 20)
            f.write(pat_bytes)
        pat = hashlib.sha256(pat_bytes).hexdigest()
        mark = peer_start(peer)
        h.load(t.a)
        wait_vda(t)
        # the first write passes the throttle, the second is held
        dd_start(t, moved=0)
        t0 = time.monotonic()
        # the board's wedge timer (PCINET_VIO_IO_MS, 10 s) drops it
        vda_gone(t, 30 * SLOW, 'after the held write')
        gone = time.monotonic() - t0
        rc, _ = dd_end(t, DD_END, 'after the unplug')
        h.expect(rc != 0, 'the dd succeeded: no write was held')
        back = wait_vda(t, why=' after the held write')
        # the held write would complete ~16 s after it started: past it
        time.sleep(max(0.0, 25 - (time.monotonic() - t0)))
        stale = t.a.run('dmesg | grep "virtio slot .*used" || true').strip()
        h.expect(not stale, 'a completion of the dropped session reached '
                 'the new one:\n' + stale)
        h.expect(unplugs(t) == 1, f'{unplugs(t)} unplugs, expected 1:\n'
                 + t.a.run('dmesg | grep -i "virtio slot" | tail -n 8'))
        # what qemu-storage-daemon did: GET_VRING_BASE answered with the
        # write still held (else the case tested nothing)
        peer.wait_log('request(s) still in the back end', 5, mark)
        h.info(f'unplugged {gone:.1f} s after the dd started; '
               'pcinet-peer: ' + ' / '.join(
                   line.split('vio: ', 1)[-1] for line in
                   peer.log_tail(400).splitlines()
                   if 'in the back end' in line or 'completed' in line
                   or 'back end lost' in line)[:400])
        check_pattern(t, peer, pat, 'after the held write')
        h.info(f'/dev/vda back {back:.1f} s after, no stale completion')
        peer.expect_alive()
        h.unload(t.a, 10)
    finally:
        peer.close()
        if old is None:
            os.environ.pop('PCINET_QSD', None)
        else:
            os.environ['PCINET_QSD'] = old


@h.case('virtio-ctl-scribble', fresh=True)
def _(t):
    """magic and gen of both control blocks scribbled now and then under
    a dd: the link resets, the disk stays (design.md, open question 12)."""
    peer = started(t)
    try:
        h.net_up(t.a, IP)
        h.wait_carrier(t.a, 1, 15)
        before = ring_faults(t)['resets']
        unplugs0 = unplugs(t)
        dd_start(t, loop='stop')
        pat = pattern_start(t)
        # one write every 0.5 s: each is repaired by its writer's next
        # tick (100 ms) before the next one lands
        scribble(t, ('live0', 'live1'), 8, rate=2)
        t.a.run('touch /tmp/dd.stop')
        rc, _ = dd_end(t, 300, 'after the control block scribbles')
        resets = ring_faults(t)['resets'] - before
        hit = unplugs(t) - unplugs0
        h.info(f'{resets} carrier changes (link resets), {hit} unplug(s), '
               f'the dd exited {rc}')
        h.expect(resets > 0, 'no link reset: the case tested nothing')
        h.expect(hit == 0, '/dev/vda was unplugged by a scribbled control '
                 'block:\n' + t.a.run('dmesg | grep -iE "virtio|link" | '
                                      'tail -n 8'))
        h.expect(rc == 0, 'the dd failed across the scribbles:\n'
                 + t.a.run('cat /tmp/dd.log'))
        pattern_written(t)
        check_pattern(t, peer, pat, 'afterwards')
        h.wait_carrier(t.a, 1, 15)
        peer.expect_alive()
        h.unload(t.a, 10)
    finally:
        peer.close()


# The words a side reads to know whether the other is there and which
# instance it is: (fabric region, byte offset, name, magic).  The board is
# side 0.  What the board reads (pcinet_vio_peer_inst()): the host's
# control block in inbox 0 (features at 24), the host's region header at
# the start of the board's drv region (magic at 0, inst at 4).  What
# pcinet-peer reads (vio_run(), pvio_run()): the board's control block in
# inbox 1, the board's region header in the host's dev region.
F_VIRTIO = 0x2				# PCINET_F_VIRTIO
DEVS_MAGIC = 0x53564544			# PCINET_VIO_DEVS_MAGIC
DRVS_MAGIC = 0x53565244			# PCINET_VIO_DRVS_MAGIC
PEER_WORDS = (('ctrl0', 24, 'features', 0), ('vdrv0', 0, 'magic', DEVS_MAGIC),
              ('vdrv0', 4, 'inst', 0),
              ('ctrl1', 24, 'features', 0), ('vdev1', 0, 'magic', DRVS_MAGIC),
              ('vdev1', 4, 'inst', 0))
POKES, POKE_GAP = 24, 0.25		# 6 s of pokes, one word at a time


def poke(t, region, off, val):
    """Set one word through the fabric; its former value."""
    out = t.fabric.fault(f'poke {region} {off} {val:#x}')
    m = re.search(r' old=0x([0-9a-f]{8}) ', out)
    h.expect(m is not None, f'poke {region}+{off}: {out}')
    return int(m.group(1), 16)


def wrong(rng, name, magic):
    """A random value of word name that reads "gone" or "replaced" (an
    inst equal to the writer's: one chance in 2^32)."""
    v = rng.getrandbits(32)
    if name == 'features':
        return v & ~F_VIRTIO
    return v ^ 1 if v == magic else v


def gone_lines(t):
    """The board's lines that say a device went."""
    return int(t.a.run('dmesg | grep -ciE "unplugg|gone" || true').strip()
               or 0)


@h.case('virtio-word-poke', fresh=True)
def _(t):
    """One word at a time of the device side's features, region magic
    and inst set wrong for about a tick under a dd: no unplug."""
    peer = started(t)
    try:
        seed = int(os.environ.get('PCINET_FAULT_SEED') or time.time())
        rng = random.Random(seed)
        h.info(f'seed {seed}')
        lines0 = gone_lines(t)
        unplugs0 = unplugs(t)
        mark = peer.log_size()
        dd_start(t, loop='stop')
        pat = pattern_start(t)
        for n in range(POKES):
            region, off, name, magic = PEER_WORDS[n % len(PEER_WORDS)]
            old = poke(t, region, off, wrong(rng, name, magic))
            # both sides run: their words read right
            h.expect(name != 'features' or old & F_VIRTIO,
                     f'{region}+{off}: features {old:#x} lack F_VIRTIO')
            h.expect(name != 'magic' or old == magic,
                     f'{region}+{off}: magic {old:#x}')
            h.expect(name != 'inst' or old != 0, f'{region}+{off}: inst 0')
            time.sleep(0.1)		# about a tick (the writer may repair
            poke(t, region, off, old)	# it first: same value)
            time.sleep(POKE_GAP - 0.1)
        t.a.run('touch /tmp/dd.stop')
        rc, _ = dd_end(t, 120, 'after the pokes')
        hit = unplugs(t) - unplugs0
        lines = gone_lines(t) - lines0
        ended = [ln for ln in peer.log.read_text()[mark:].splitlines()
                 if 'peer gone' in ln or 'peer restarted' in ln
                 or "peer's virtio instance" in ln]
        h.info(f'{POKES} pokes: {hit} unplug(s), {lines} "gone" or '
               f'"unplugging" line(s), {len(ended)} session(s) ended by '
               f'pcinet-peer, the dd exited {rc}')
        h.expect(not ended, 'a poked word ended a session of pcinet-peer:\n'
                 + '\n'.join(ended[:6]))
        h.expect(hit == 0 and lines == 0, 'a poked word unplugged /dev/vda:'
                 '\n' + t.a.run('dmesg | grep -iE "virtio|gone" | '
                                 'tail -n 8'))
        h.expect(t.a.sh('[ -b /dev/vda ]')[0] == 0, '/dev/vda is gone')
        h.expect(rc == 0, 'the dd failed across the pokes:\n'
                 + t.a.run('cat /tmp/dd.log'))
        pattern_written(t)
        check_pattern(t, peer, pat, 'afterwards')
        peer.expect_alive()
        h.unload(t.a, 10)
    finally:
        peer.close()


# --------------------------------------------------------------------------
# a hostile host: what it offers, and its generation counters
# --------------------------------------------------------------------------

# Where slot n's description is in the board's drv region (fabric region
# vdrv0): PCINET_CACHELINE + n * sizeof(struct pcinet_vio_devdesc), and
# the words in it (pcinet_layout.h static_asserts each).
DESC_AT, DESC_SIZE = 64, 640
DESC_DEV_GEN, DESC_STATUS_SEQ, DESC_CONFIG_GEN = 0, 28, 36
BLK_SLOT = 0
HOSTILE_IDS = (24,) if h.KERNEL == 'debug' else (5, 18, 24, 27)
STORM = 60			# seconds of each storm


def virtio_ids(t):
    """The device IDs of the virtio devices registered on the board."""
    out = t.a.run('cat /sys/bus/virtio/devices/*/device 2>/dev/null || true')
    return [int(x, 16) for x in out.split()]


def mem_total(t):
    return int(t.a.run("awk '/^MemTotal/ {print $2}' /proc/meminfo"))


def dmesg_lines(t):
    return int(t.a.run('dmesg | wc -l').strip())


def plugs(t):
    return int(t.a.run('dmesg | grep -c "virtio slot 0: device 2," || true')
               .strip() or 0)


def storm(t, slot, word, rate, secs):
    out = t.fabric.fault(f'storm vdrv0 {DESC_AT + slot * DESC_SIZE + word} '
                         f'{rate} {secs}')
    h.expect(out.startswith('ok storm'), f'storm: {out}')
    h.info(out)


def storm_over(t):
    deadline = time.monotonic() + STORM + 30
    while 'scribble=none' not in t.fabric.fault('status'):
        h.expect(time.monotonic() < deadline, 'the storm did not stop')
        time.sleep(0.5)


@h.case('virtio-hostile-ids', fresh=True)
def _(t):
    """Devices a host must not be able to bind on the board: refused."""
    need_stage2()
    share = t.workdir / 'share'
    share.mkdir(exist_ok=True)
    peer = BlkPeer(t, IMG_MIB)
    try:
        mem0 = None
        for n, dev_id in enumerate(HOSTILE_IDS):
            mark = peer_start(peer, '--fs', f'{share}:hostile',
                              f'--blk-fault=id={dev_id}')
            if n == 0:
                h.load(t.a)
                mem0 = mem_total(t)
            wait_vda(t, why=f' beside device {dev_id}')
            board_logged(t, f'device {dev_id} refused',
                         f'device {dev_id} refused', 15 * SLOW)
            ids = virtio_ids(t)
            h.info(f'ID {dev_id}: refused; registered: {ids}')
            h.expect(dev_id not in ids, f'device {dev_id} registered: {ids}')
            h.expect(mem_total(t) == mem0, 'MemTotal moved')
            pat = write_pattern(t, PAT_OFF, PAT_MIB)
            check_pattern(t, peer, pat, f'beside device {dev_id}')
            peer.expect_alive()
            h.expect('virtio-fs' in peer.log.read_text()[mark:],
                     'pcinet-peer offered no second device')
            peer.stop()
            vda_gone(t, GONE, f'after pcinet-peer {dev_id} stopped')
        h.unload(t.a, RMMOD)
    finally:
        peer.close()


@contextlib.contextmanager
def stormed_disk(t):
    """The disk, a pattern on it, then the case's storm; after it, the
    pattern intact, pcinet-peer alive and the module's rmmod."""
    peer = started(t)
    try:
        pat = write_pattern(t, PAT_OFF, PAT_MIB)
        yield peer
        check_pattern(t, peer, pat, 'after the storm')
        peer.expect_alive()
        h.unload(t.a, RMMOD)
    finally:
        peer.close()


@h.case('virtio-config-storm', fresh=True)
def _(t):
    """config_gen bumped in a tight loop: I/O, rmmod and a probe go on."""
    with stormed_disk(t):
        t0 = time.monotonic()
        storm(t, BLK_SLOT, DESC_CONFIG_GEN, 1000000, STORM)
        rc, out = t.a.sh('dd if=/dev/vda of=/dev/null bs=64k count=512 '
                         'iflag=direct 2>&1', timeout=60)
        h.expect(rc == 0, f'a read during the storm failed: {out}')
        took = time.monotonic()
        h.unload(t.a, RMMOD)
        took = time.monotonic() - took
        h.load(t.a)
        wait_vda(t, why=' after insmod, during the storm')
        pat2 = write_pattern(t, PAT_OFF + PAT_MIB, PAT_MIB)
        left = STORM - (time.monotonic() - t0)
        h.info(f'read, rmmod ({took:.2f} s), insmod, probe and a write '
               f'done with {left:.0f} s of storm left')
        h.expect(left > 0, 'the storm ended before the probe: it tested '
                 'less than it says')
        storm_over(t)
        h.expect(t.a.sh('dmesg | grep -q "soft lockup"')[0] != 0,
                 'soft lockup:\n' + t.a.run('dmesg | tail -n 20'))
        back = guest_sha(t, PAT_OFF + PAT_MIB, PAT_MIB)
        h.expect(back == pat2, 'the pattern written during the storm '
                 f'reads {back}, written {pat2}')


@h.case('virtio-dev-gen-flip', fresh=True)
def _(t):
    """dev_gen flipped at 10 kHz: the slot backs off, the disk returns."""
    with stormed_disk(t):
        lines0, plugs0 = dmesg_lines(t), plugs(t)
        storm(t, BLK_SLOT, DESC_DEV_GEN, 10000, STORM)
        vda_gone(t, GONE, 'after dev_gen moved')
        storm_over(t)
        lines, n = dmesg_lines(t) - lines0, plugs(t) - plugs0
        h.info(f'{STORM} s of dev_gen at 10 kHz: {n} plug(s), {lines} '
               'line(s) of log')
        h.expect(n < 20, f'{n} plugs: no backoff')
        h.expect(lines < 100, f'{lines} lines of log:\n'
                 + t.a.run('dmesg | tail -n 20'))
        wait_vda_settled(t, 30, ' after the storm')


@h.case('virtio-status-read', fresh=True)
def _(t):
    """The disk's status file read in a loop while its answer word
    (status_seq) is stormed: every read returns at once, the disk stays."""
    secs = 8
    with stormed_disk(t):
        unplugs0 = unplugs(t)
        storm(t, BLK_SLOT, DESC_STATUS_SEQ, 10000, secs)
        reads, worst = 0, 0.0
        end = time.monotonic() + secs - 1
        while time.monotonic() < end:
            t0 = time.monotonic()
            st = t.a.run('cat /sys/block/vda/device/status', timeout=30)
            worst = max(worst, time.monotonic() - t0)
            reads += 1
        storm_over(t)
        h.info(f'{reads} reads of the status file during the storm (last '
               f'{st.strip()}), the slowest {worst:.2f} s')
        # before: each read waited for an answer, and killed the device
        # after PCINET_VIO_ACK_MS (3 s) without one
        h.expect(worst < 1.5, f'a read of the status file took {worst:.2f} s')
        h.expect(unplugs(t) == unplugs0 and t.a.sh('[ -b /dev/vda ]')[0] == 0,
                 'reading the status file unplugged the disk:\n'
                 + t.a.run('dmesg | grep -i virtio | tail -n 5'))


if __name__ == '__main__':
    raise SystemExit(h.main())
