#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The virtio channel's device side in the kernel: /dev/pcinet-vhost<N>.

    +---- a (QEMU) -----------+   pcinet-fabric    +---- b (QEMU) ---------+
    | pcinet.ko: device side  |<== -m 64M -V 8M ==>| pcinet.ko: the board's |
    | vhost_probe             |    -n 4            | transport              |
    +-------------------------+                    +------------------------+

docs/design.md, "Virtio channel", "The host's character device".  The
probe (tools/pcinet-vhost/vhost_probe, one line per check) offers a
virtio-blk shaped device that nothing serves, checks every ioctl, the
eventfds and the memory file, and withdraws it; b sees it come and go
(its driver's status writes stay unanswered): vhost_probe --board
checks that b's transport registered it (GET_DRV valid, poll()).

Stage 3 (docs/design.md, "Test plan"): the product path, both sides in
QEMU.  a runs pcinet-vhost (tools/pcinet-vhost, in the initramfs with
qemu-storage-daemon and virtiofsd when built), the back ends on a's
tmpfs; b only loads pcinet:

    +---- a (QEMU): the host ---------+             +---- b: the board ---+
    | pcinet-vhost --link pcinet0     |             | pcinet.ko transport |
    |   --blk /tmp/board.img          |<== fabric ==>| virtio_blk /dev/vda |
    |   qemu-storage-daemon (child)   |             |                     |
    | pcinet.ko /dev/pcinet-vhost0    |             |                     |
    +---------------------------------+             +---------------------+

Cases:
  vhost-probe     /dev/pcinet-vhost0 on a; vhost_probe passes every check
  vhost-off       a window without virtio regions: no /dev/pcinet-vhost0,
                  and net still comes up
  vhost-blk       pcinet-vhost --blk on a: /dev/vda on b unprompted, its
                  size; 16 MiB of random bytes written on b read back
                  equal after drop_caches, and equal in a's image (sha256)
  vhost-fs        pcinet-vhost --blk ... --fs /tmp/share:share on a (the
                  issue's command line): on b, /dev/vda and `mount -t
                  virtiofs share /mnt`; a file written on a reads the same
                  on b, one written on b the same on a (sha256, 1 MiB each)
  vhost-withdraw  SIGTERM to pcinet-vhost: it exits 0 and /dev/vda goes
                  from b within 2 s; started again: back, with its data
  vhost-withdraw-in-probe  pcinet-vhost with a qemu-storage-daemon whose
                  reads are throttled to 512 B/s, SIGTERMed while b's
                  virtio_blk probe waits for its partition-table read:
                  the device unplugs within 5 s, /dev/vda goes, rmmod on b
                  returns; started again (no throttle): back
  vhost-peer-cycles  under a loop of direct 64 KiB writes and reads on b,
                  CYCLES rounds of: kill -9 pcinet-vhost (/dev/vda gone
                  from b within 2 s, qemu-storage-daemon gone with it;
                  restarted: back), kill -9 qemu-storage-daemon (/dev/vda
                  gone within 2 s, back by itself), SIGSTOP for 1.5 s (the data path does
                  not go through it: I/O goes on, /dev/vda stays), rmmod
                  pcinet on b (returns within 5 s), the back end killed
                  meanwhile (replaced under the same offer), insmod:
                  back; then
                  1 MiB written and read back equal on b and in a's image
  vhost-image-swap  a's IMAGE moved away and a symlink to another file
                  put in its place, qemu-storage-daemon killed: the
                  restarted back end serves the image pcinet-vhost opened
                  (b reads the 1 MiB it wrote); pcinet-vhost --blk SYMLINK
                  exits 1 ("a symlink")
  vhost-hotplug   pcinet-vhost --config FILE, one disk: under a loop of
                  direct 1 MiB writes read back and compared on b's
                  /dev/vda, a second disk added to FILE + SIGHUP: /dev/vdb
                  on b, 4 MiB written there equal on b and in a's image;
                  the loop saw no error, blk0 untouched (no log line),
                  /dev/vda's data intact; the first disk taken out of FILE
                  + SIGHUP: /dev/vda gone within 2 s, the same loop on
                  /dev/vdb without an error; a folder added: mountable,
                  a file of a's read equal on b
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

PROBE = h.ROOT / 'tools/pcinet-vhost/vhost_probe'
VHOST = h.ROOT / 'tools/pcinet-vhost/pcinet-vhost'
IMG = '/tmp/board.img'
IMG_MIB = 64
PAT_MIB = 16
PAT_OFF_MIB = 4
LOG = '/tmp/pcinet-vhost.log'
CYCLES = int(os.environ.get('PCINET_VHOST_CYCLES', '2'))

h.configure(machines=('a', 'b'), extra_modules=[h.PCINET_KO],
            fabric_size='64M', fabric_vio='8M', vectors=4)


def need_probe():
    if not os.access(PROBE, os.X_OK):
        h.skip('vhost_probe not built (make -C tools/pcinet-vhost '
               'vhost_probe)')


@h.case('vhost-probe', fresh=True)
def _(t):
    """Every check of vhost_probe against the kernel's character device."""
    need_probe()
    h.load(t.a)
    h.load(t.b)
    t.a.wait_until('[ -c /dev/pcinet-vhost0 ]', 5, what='/dev/pcinet-vhost0')
    rc, out = t.a.sh('vhost_probe --board 2>&1', timeout=60)
    for line in out.strip().splitlines():
        h.info(line)
    h.expect(rc == 0 and ', 0 failed' in out, f'vhost_probe exited {rc}')
    h.unload(t.a, 10)
    h.unload(t.b, 10)


@h.case('vhost-off', fresh=True, topology={'fabric_vio': None,
                                            'fabric_size': '16M'})
def _(t):
    """No virtio block in the window: no character device, net unchanged."""
    h.load(t.a)
    h.load(t.b)
    h.load_and_wait({t.a: '10.0.0.1', t.b: '10.0.0.2'})
    rc, _ = t.a.sh('[ -e /dev/pcinet-vhost0 ]')
    h.expect(rc != 0, '/dev/pcinet-vhost0 exists without virtio')
    h.unload(t.a, 10)
    h.unload(t.b, 10)


def need_vhost(t):
    if not os.access(VHOST, os.X_OK):
        h.skip('pcinet-vhost not built (make -C tools/pcinet-vhost '
               'pcinet-vhost)')
    rc, _ = t.a.sh('command -v qemu-storage-daemon')
    if rc:
        h.skip('qemu-storage-daemon not in the initramfs')


def vhost_start(t, args, wait='offered', env=''):
    """pcinet-vhost on a in the background (its log in LOG, its exit
    status into /tmp/pcinet-vhost.rc), env (VAR=value ...) in its
    environment; waits for its log line `wait`."""
    mark = int(t.a.run(f'[ -f {LOG} ] && wc -c <{LOG} || echo 0').strip())
    t.a.run('rm -f /tmp/pcinet-vhost.rc; '
            f'({env} pcinet-vhost --link pcinet0 {args}; echo $? '
            f'>/tmp/pcinet-vhost.rc) </dev/null >>{LOG} 2>&1 &')
    t.a.wait_until(f'tail -c +{mark + 1} {LOG} | grep -q ": {wait}"', 30,
                   what=f'pcinet-vhost: "{wait}"', show=f'cat {LOG}')


def vhost_stop(t):
    """SIGTERM to pcinet-vhost; its exit status."""
    t.a.run('kill -TERM $(pidof pcinet-vhost)')
    took = t.a.wait_until('[ -s /tmp/pcinet-vhost.rc ]', 10,
                          what='pcinet-vhost exits', show=f'cat {LOG}')
    h.info(f'pcinet-vhost exited {took:.2f} s after SIGTERM')
    return int(t.a.run('cat /tmp/pcinet-vhost.rc').strip())


def finish(t, timeout=10):
    """The end of a case: pcinet-vhost stops cleanly on SIGTERM (exit 0,
    its devices withdrawn), then both sides' pcinet unloads."""
    rc = vhost_stop(t)
    h.expect(rc == 0, f'pcinet-vhost exited {rc} on SIGTERM')
    h.unload(t.a, timeout)
    h.unload(t.b, timeout)


def vhost_cleanup(t):
    """Whatever is left of pcinet-vhost and its back ends; its log."""
    try:
        t.a.sh('kill -TERM $(pidof pcinet-vhost) 2>/dev/null; sleep 0.5; '
               'kill -9 $(pidof pcinet-vhost qemu-storage-daemon virtiofsd) '
               '2>/dev/null; true')
        _, out = t.a.sh(f'cat {LOG}')
    except Exception as e:  # the case's own failure matters more
        h.info(f'a: no log ({e})')
        return
    for line in out.strip().splitlines()[-40:]:
        h.info('a: ' + line)


def wait_vda(t, timeout=60, dev='vda'):
    """b's /dev/<dev> (default vda) there within timeout, of the image's
    size; the seconds it took."""
    took = t.b.wait_until(f'[ -b /dev/{dev} ]', timeout,
                          what=f'/dev/{dev} on b',
                          show='ls /sys/bus/virtio/devices/ /sys/block; '
                          'dmesg | grep -iE "pcinet|virtio" | tail -n 15')
    h.info(f'/dev/{dev} on b after {took:.1f} s')
    size = int(t.b.run(f'cat /sys/block/{dev}/size').strip())
    h.expect(size == IMG_MIB << 11,
             f'/dev/{dev} has {size} sectors, the image {IMG_MIB << 11}')
    return took


def b_write(t, off_mib, mib, timeout, dev='vda'):
    """mib MiB of random bytes written to b's /dev/<dev> (fsync); sha256."""
    pat = t.b.run(f'dd if=/dev/urandom of=/tmp/pat bs=1M count={mib} '
                  '2>/dev/null && sha256sum /tmp/pat').split()[0]
    t.b.run(f'dd if=/tmp/pat of=/dev/{dev} bs=1M seek={off_mib} '
            'conv=fsync 2>&1', timeout=timeout)
    return pat


def b_sha(t, off_mib, mib, dev='vda'):
    """sha256 of b's /dev/<dev> bytes, read past the page cache."""
    return t.b.run('sync; echo 3 >/proc/sys/vm/drop_caches; '
                   f'dd if=/dev/{dev} bs=1M skip={off_mib} count={mib} '
                   '2>/dev/null | sha256sum', timeout=600).split()[0]


def a_sha(t, off_mib, mib, img=IMG):
    """sha256 of a's image file (default IMG) at the same place."""
    return t.a.run(f'dd if={img} bs=1M skip={off_mib} count={mib} '
                   '2>/dev/null | sha256sum', timeout=120).split()[0]


def started(t, args=f'--blk {IMG}', prep='', wait='offered', env='',
            board=True):
    """The stage-3 start: a (and b unless board=False) loaded,
    /dev/pcinet-vhost0 on a, a fresh IMG (and no LOG) on a's tmpfs, the
    shell commands prep run on a, pcinet-vhost started with args and env
    (vhost_start(), waiting for `wait`).  Returns prep's output."""
    need_vhost(t)
    h.load(t.a)
    if board:
        h.load(t.b)
    t.a.wait_until('[ -c /dev/pcinet-vhost0 ]', 5, what='/dev/pcinet-vhost0')
    out = t.a.run(f'rm -f {IMG} {LOG}; truncate -s {IMG_MIB}M {IMG}'
                  + (f'; {prep}' if prep else ''))
    vhost_start(t, args, wait=wait, env=env)
    return out


def blk_started(t):
    """started() with pcinet-vhost --blk IMG, then /dev/vda on b."""
    started(t)
    wait_vda(t)


@h.case('vhost-blk', fresh=True)
def _(t):
    """/dev/vda on b served by pcinet-vhost on a: 16 MiB written on b,
    read back equal, equal in a's image."""
    try:
        blk_started(t)
        t0 = time.monotonic()
        pat = b_write(t, PAT_OFF_MIB, PAT_MIB, timeout=600)
        h.info(f'{PAT_MIB} MiB made and written on b in '
               f'{time.monotonic() - t0:.1f} s')
        back = b_sha(t, PAT_OFF_MIB, PAT_MIB)
        h.expect(back == pat, f'read back {back}, written {pat}')
        img = a_sha(t, PAT_OFF_MIB, PAT_MIB)
        h.expect(img == pat, f"a's image {img}, written {pat}")
        rc = vhost_stop(t)
        h.expect(rc == 0, f'pcinet-vhost exited {rc} on SIGTERM')
        t.b.wait_until('! [ -b /dev/vda ]', 5, what='/dev/vda gone')
        h.unload(t.a, 10)
        h.unload(t.b, 10)
    finally:
        vhost_cleanup(t)


def need_virtiofsd(t):
    rc, _ = t.a.sh('[ -x /usr/lib/qemu/virtiofsd ]')
    if rc:
        h.skip('virtiofsd not in the initramfs')


# a's /tmp/share with 1 MiB of random bytes in from-a; its sha256 printed
SHARE_PREP = ('rm -rf /tmp/share; mkdir /tmp/share; '
              'dd if=/dev/urandom of=/tmp/share/from-a bs=1M count=1 '
              '2>/dev/null; sha256sum /tmp/share/from-a')


def b_mount_share(t, a_pat):
    """A virtio-fs device on b, `mount -t virtiofs share /mnt`, a's from-a
    read there equal to a_pat."""
    took = t.b.wait_until('grep -q 0x001a /sys/bus/virtio/devices/*/device',
                          30, what='a virtio-fs device on b',
                          show='cat /sys/bus/virtio/devices/*/device; '
                          'dmesg | tail -n 15')
    h.info(f'virtio-fs device on b after {took:.1f} s')
    t.b.run('mkdir -p /mnt && mount -t virtiofs share /mnt', timeout=30)
    got = t.b.run('sha256sum /mnt/from-a', timeout=60).split()[0]
    h.expect(got == a_pat, f'b reads {got}, a wrote {a_pat}')


@h.case('vhost-fs', fresh=True)
def _(t):
    """virtio-fs beside virtio-blk: files cross both ways intact."""
    need_vhost(t)
    need_virtiofsd(t)
    try:
        a_pat = started(t, f'--blk {IMG} --fs /tmp/share:share',
                        prep=SHARE_PREP, wait='fs0: offered').split()[0]
        wait_vda(t)
        b_mount_share(t, a_pat)
        b_pat = t.b.run('dd if=/dev/urandom of=/tmp/from-b bs=1M count=1 '
                        '2>/dev/null && cp /tmp/from-b /mnt/from-b && sync '
                        '&& sha256sum /tmp/from-b', timeout=60).split()[0]
        got = t.a.run('sha256sum /tmp/share/from-b').split()[0]
        h.expect(got == b_pat, f'a reads {got}, b wrote {b_pat}')
        t.b.run('umount /mnt', timeout=30)
        finish(t)
    finally:
        vhost_cleanup(t)


@h.case('vhost-withdraw', fresh=True)
def _(t):
    """SIGTERM to pcinet-vhost: /dev/vda goes from b within 2 s; back
    after a restart, with the data written before."""
    try:
        blk_started(t)
        pat = b_write(t, 1, 1, timeout=120)
        rc = vhost_stop(t)
        h.expect(rc == 0, f'pcinet-vhost exited {rc} on SIGTERM')
        took = t.b.wait_until('! [ -b /dev/vda ]', 2, what='/dev/vda gone',
                              show='ls /sys/block; dmesg | tail -n 10')
        h.info(f'/dev/vda gone from b {took:.2f} s after the exit')
        vhost_start(t, f'--blk {IMG}')
        wait_vda(t)
        back = b_sha(t, 1, 1)
        h.expect(back == pat, f'after the restart: {back}, written {pat}')
        finish(t)
    finally:
        vhost_cleanup(t)


# qemu-storage-daemon with reads throttled to 512 bytes/s (PCINET_QSD for
# pcinet-vhost): virtio_blk's partition scan after DRIVER_OK then waits
# seconds for its first read, inside the board's probe.
SLOW_QSD = r"""#!/bin/sh
for a; do case "$a" in *addr.path=*) sock=${a##*addr.path=}; sock=${sock%%,*};; esac; done
exec qemu-storage-daemon --object throttle-group,id=tg0,x-bps-read=512 \
	--blockdev driver=file,node-name=f0,filename=/tmp/board.img \
	--blockdev driver=throttle,node-name=blk0,throttle-group=tg0,file=f0 \
	--export type=vhost-user-blk,id=blk0,node-name=blk0,addr.type=unix,addr.path=$sock,writable=on
"""


@h.case('vhost-withdraw-in-probe', fresh=True)
def _(t):
    """Withdrawn while b's virtio_blk probe waits for its first read:
    the probe ends (the transport aborts the read), /dev/vda goes, rmmod
    on b returns; started again: back."""
    try:
        started(t, prep="cat >/tmp/qsd-slow <<'EOS'\n" + SLOW_QSD + 'EOS\n'
                'chmod 755 /tmp/qsd-slow', env='PCINET_QSD=/tmp/qsd-slow',
                board=False)
        h.load(t.b)
        t.a.wait_until(f'grep -q ": running" {LOG}', 30, what='running',
                       show=f'cat {LOG}')
        # the partition scan's first read is now held by the throttle
        t.b.run('sleep 0.5')
        rc = vhost_stop(t)
        h.expect(rc == 0, f'pcinet-vhost exited {rc} on SIGTERM')
        took = t.b.wait_until('dmesg | grep -q "virtio slot 0: device 2 '
                              'unplugged"', 5, what='the device unplugged '
                              'from inside its probe',
                              show='ls /sys/block; dmesg | tail -n 12')
        h.info(f'unplugged {took:.2f} s after pcinet-vhost exited')
        t.b.wait_until('! [ -b /dev/vda ]', 2, what='/dev/vda gone')
        t0 = time.monotonic()
        h.unload(t.b, 5)
        h.info(f'rmmod on b: {time.monotonic() - t0:.2f} s')
        h.load(t.b)
        vhost_start(t, f'--blk {IMG}')
        wait_vda(t)
        finish(t)
    finally:
        vhost_cleanup(t)


# b's I/O loop: direct 64 KiB writes (past the data the case checks) and
# reads through a node of its own, made again from /sys/block/vda/dev
# each round: dd never creates a regular /dev/vda while the disk is gone.
# Each round appends ok or err to /tmp/io.log.
IO_LOOP = (
    "while :; do "
    "d=$(cat /sys/block/vda/dev 2>/dev/null) || { sleep 0.2; continue; }; "
    "rm -f /tmp/vdanode; mknod /tmp/vdanode b ${d%:*} ${d#*:}; "
    "if dd if=/dev/zero of=/tmp/vdanode bs=64k count=32 seek=512 "
    "oflag=direct conv=notrunc 2>/dev/null && "
    "dd if=/tmp/vdanode of=/dev/null bs=64k count=64 iflag=direct "
    "2>/dev/null; then echo ok; else echo err; sleep 0.1; fi; "
    "done >>/tmp/io.log 2>&1")


def io_wait_ok(t, what):
    """The I/O loop on b completes a round from now on (within 30 s)."""
    n = int(t.b.run('grep -c ok /tmp/io.log || true').strip() or 0)
    t.b.wait_until(f'[ $(grep -c ok /tmp/io.log) -gt {n} ]', 30,
                   what=f'I/O on b {what}',
                   show='tail -n 3 /tmp/io.log; ls /sys/block; '
                   'dmesg | grep -iE "pcinet|virtio" | tail -n 20')


@h.case('vhost-peer-cycles', fresh=True)
def _(t):
    """kill -9 and SIGSTOP of pcinet-vhost, rmmod of b's pcinet, under
    I/O: nothing hangs, /dev/vda comes back, the data is intact."""
    try:
        blk_started(t)
        pat = b_write(t, 1, 1, timeout=120)
        t.b.run(f'rm -f /tmp/io.log; ({IO_LOOP}) </dev/null >/dev/null '
                '2>&1 & echo $! >/tmp/io.pid')
        for i in range(CYCLES):
            io_wait_ok(t, f'before kill -9 ({i})')
            t.a.run('kill -9 $(pidof pcinet-vhost)')
            took = t.b.wait_until('! [ -b /dev/vda ]', 2,
                                  what='/dev/vda gone after kill -9',
                                  show='ls /sys/block; dmesg | tail -n 10')
            t.a.wait_until('! pidof qemu-storage-daemon', 5,
                           what='qemu-storage-daemon gone with pcinet-vhost')
            h.info(f'cycle {i}: kill -9: /dev/vda gone in {took:.2f} s')
            vhost_start(t, f'--blk {IMG}', wait='running')
            io_wait_ok(t, f'after the restart ({i})')

            t.a.run('kill -9 $(pidof qemu-storage-daemon)')
            took = t.b.wait_until('! [ -b /dev/vda ]', 2,
                                  what='/dev/vda gone after the back end',
                                  show='ls /sys/block; dmesg | tail -n 10')
            h.info(f'cycle {i}: back end killed: /dev/vda gone in '
                   f'{took:.2f} s')
            wait_vda(t)
            io_wait_ok(t, f'after the back end came back ({i})')

            t.a.run('kill -STOP $(pidof pcinet-vhost)')
            try:
                io_wait_ok(t, f'with pcinet-vhost stopped ({i})')
                t.b.run('sleep 1.5; [ -b /dev/vda ]')
            finally:
                t.a.run('kill -CONT $(pidof pcinet-vhost)')
            h.info(f'cycle {i}: SIGSTOP: I/O went on')

            t0 = time.monotonic()
            h.unload(t.b, 5)
            h.info(f'cycle {i}: rmmod on b under I/O: '
                   f'{time.monotonic() - t0:.2f} s')
            # no ring runs now: a dead back end is replaced in place
            mark = int(t.a.run(f'wc -c <{LOG}').strip())
            t.a.run('kill -9 $(pidof qemu-storage-daemon)')
            t.a.wait_until(f'tail -c +{mark + 1} {LOG} | grep -q '
                           '"restarted under the same offer"', 10,
                           what='the back end restarted in place',
                           show=f'tail -n 5 {LOG}')
            h.load(t.b)
            wait_vda(t)
            io_wait_ok(t, f'after insmod ({i})')
        t.b.run('kill $(cat /tmp/io.pid); sleep 0.5; '
                'echo "I/O rounds: $(grep -c ok /tmp/io.log) ok, '
                '$(grep -c err /tmp/io.log) failed"')
        back = b_sha(t, 1, 1)
        h.expect(back == pat, f'after the cycles: {back}, written {pat}')
        img = a_sha(t, 1, 1)
        h.expect(img == pat, f"a's image {img}, written {pat}")
        finish(t)
    finally:
        vhost_cleanup(t)

@h.case('vhost-image-swap', fresh=True)
def _(t):
    """IMAGE replaced by a symlink to another file, the back end then
    restarted: b still reads the image pcinet-vhost was given; a symlink
    given as IMAGE is refused."""
    try:
        blk_started(t)
        pat = b_write(t, PAT_OFF_MIB, 1, timeout=120)
        # what a local user who can write IMAGE's directory could do
        t.a.run(f'mv {IMG} {IMG}.orig && truncate -s {IMG_MIB}M '
                f'/tmp/other.img && ln -s /tmp/other.img {IMG}')
        t.a.run('kill -9 $(pidof qemu-storage-daemon)')
        t.b.wait_until('! [ -b /dev/vda ]', 2,
                       what='/dev/vda gone after the back end',
                       show='ls /sys/block; dmesg | tail -n 10')
        wait_vda(t)
        back = b_sha(t, PAT_OFF_MIB, 1)
        h.expect(back == pat, f'after the swap and the restart b reads '
                 f'{back}, written {pat}: the back end opened the symlink')
        img = a_sha(t, PAT_OFF_MIB, 1, img=f'{IMG}.orig')
        h.expect(img == pat, f"a's image {img}, written {pat}")
        rc, out = t.a.sh(f'timeout 5 pcinet-vhost --link pcinet0 --blk {IMG} '
                         '2>&1')
        h.info(f'pcinet-vhost --blk SYMLINK: exit {rc}: {out.strip()}')
        h.expect(rc == 1 and 'a symlink' in out,
                 f'a symlink as IMAGE: exit {rc}, {out.strip()}')
        finish(t)
    finally:
        vhost_cleanup(t)


CFG = '/tmp/pcinet-vhost.conf'
IMG2 = '/tmp/board2.img'


def verify_loop(t, dev):
    """On b, in the background: rounds of 1 MiB of random bytes written
    to /dev/<dev> at 16 MiB (direct) and read back (direct), compared by
    sha256; a line ok or err per round in /tmp/vl-<dev>.log, `done` when
    verify_stop() ends it."""
    log = f'/tmp/vl-{dev}.log'
    t.b.run(f'rm -f {log} /tmp/vl-{dev}.stop; dd if=/dev/urandom '
            f'of=/tmp/vl-{dev}.pat bs=64k count=16 2>/dev/null')
    t.b.run(f'(s=$(sha256sum </tmp/vl-{dev}.pat); '
            f'while [ ! -e /tmp/vl-{dev}.stop ]; do '
            f'if dd if=/tmp/vl-{dev}.pat of=/dev/{dev} bs=64k seek=256 '
            'oflag=direct conv=notrunc 2>/dev/null && '
            f'[ "$(dd if=/dev/{dev} bs=64k skip=256 count=16 iflag=direct '
            '2>/dev/null | sha256sum)" = "$s" ]; '
            f'then echo ok; else echo err; fi; done >>{log} 2>&1; '
            f'echo done >>{log}) </dev/null >/dev/null 2>&1 &')


def verify_oks(t, dev):
    return int(t.b.run(f'grep -c ok /tmp/vl-{dev}.log || true').strip()
               or 0)


def verify_stop(t, dev):
    """The loop ended; (ok, err) rounds."""
    log = f'/tmp/vl-{dev}.log'
    t.b.run(f'touch /tmp/vl-{dev}.stop')
    t.b.wait_until(f'grep -q done {log}', 60, what=f'the loop on {dev} ends',
                   show=f'tail -n 3 {log}')
    ok, err = (int(x) for x in t.b.run(
        f'echo $(grep -c ok {log}) $(grep -c err {log})').split())
    return ok, err


def reload(t, lines, wait=True):
    """CFG on a rewritten with lines, SIGHUP to pcinet-vhost, its log
    line that it read CFG waited for (reload_done()) unless wait=False;
    the LOG offset before it."""
    mark = int(t.a.run(f'wc -c <{LOG}').strip())
    body = ''.join(f'{x}\n' for x in lines)
    t.a.run(f"cat >{CFG} <<'EOC'\n{body}EOC\n"
            'kill -HUP $(pidof pcinet-vhost)')
    if wait:
        reload_done(t, mark)
    return mark


def reload_done(t, mark):
    t.a.wait_until(f'tail -c +{mark + 1} {LOG} | grep -q "{CFG} read"', 30,
                   what='pcinet-vhost reads the file again',
                   show=f'tail -n 10 {LOG}')


# Two disks and a folder: 4 + 4 + 2 MiB of pools each way, more than an
# 8 MiB virtio region holds (the second disk would wait for room).
@h.case('vhost-hotplug', fresh=True, topology={'fabric_size': '128M',
                                                'fabric_vio': '16M'})
def _(t):
    """pcinet-vhost --config: a disk added under I/O on the first, the
    first removed under I/O on the second, a folder added; nothing else
    disturbed."""
    need_vhost(t)
    need_virtiofsd(t)
    try:
        a_pat = started(t, f'--config {CFG}', prep=(
            f'rm -f {IMG2}; truncate -s {IMG_MIB}M {IMG2}; '
            f'printf "# one disk\\nblk {IMG}\\n" >{CFG}; ' + SHARE_PREP)
            ).split()[0]
        wait_vda(t)
        pat = b_write(t, 1, 1, timeout=120)
        verify_loop(t, 'vda')
        t.b.wait_until('grep -q ok /tmp/vl-vda.log', 30,
                       what='the loop on vda runs',
                       show='tail -n 3 /tmp/vl-vda.log')

        # a second disk, under I/O on the first
        n0 = verify_oks(t, 'vda')
        mark = reload(t, ['# two disks', f'blk {IMG}', f'blk {IMG2}'],
                      wait=False)
        took = wait_vda(t, 30, dev='vdb')
        h.info(f'/dev/vdb on b {took:.1f} s after SIGHUP')
        reload_done(t, mark)
        pat2 = b_write(t, 4, 4, timeout=300, dev='vdb')
        back = b_sha(t, 4, 4, dev='vdb')
        h.expect(back == pat2, f'vdb read back {back}, written {pat2}')
        img = a_sha(t, 4, 4, img=IMG2)
        h.expect(img == pat2, f"a's second image {img}, written {pat2}")
        n1 = verify_oks(t, 'vda')
        ok, err = verify_stop(t, 'vda')
        h.info(f'vda loop while vdb came: {n1 - n0} rounds ok; '
               f'in all {ok} ok, {err} failed')
        h.expect(n1 > n0, 'no round of the loop on vda while vdb came')
        h.expect(err == 0, f'{err} rounds failed on vda')
        _, out = t.a.sh(f'tail -c +{mark + 1} {LOG} | grep "blk0:"')
        h.expect(not out.strip(), f'blk0 touched by the reload: {out}')
        back = b_sha(t, 1, 1)
        h.expect(back == pat, f'vda after the reload: {back}, written {pat}')

        # the first disk removed, under I/O on the second
        verify_loop(t, 'vdb')
        t.b.wait_until('grep -q ok /tmp/vl-vdb.log', 30,
                       what='the loop on vdb runs',
                       show='tail -n 3 /tmp/vl-vdb.log')
        # timed from the return of the kill on a
        mark = reload(t, ['# the second disk only', f'blk {IMG2}'],
                      wait=False)
        took = t.b.wait_until('! [ -b /dev/vda ]', 2,
                              what='/dev/vda gone after SIGHUP',
                              show='ls /sys/block; dmesg | tail -n 10')
        h.info(f'/dev/vda gone from b {took:.2f} s after SIGHUP')
        reload_done(t, mark)
        n0 = verify_oks(t, 'vdb')
        t.b.wait_until(f'[ $(grep -c ok /tmp/vl-vdb.log) -gt {n0} ]', 30,
                       what='a round on vdb after vda went',
                       show='tail -n 3 /tmp/vl-vdb.log')
        ok, err = verify_stop(t, 'vdb')
        h.info(f'vdb loop across the removal: {ok} ok, {err} failed')
        h.expect(err == 0, f'{err} rounds failed on vdb')
        _, out = t.a.sh(f'tail -c +{mark + 1} {LOG} | grep "blk1:"')
        h.expect(not out.strip(), f'blk1 touched by the reload: {out}')
        back = b_sha(t, 4, 4, dev='vdb')
        h.expect(back == pat2, f'vdb after the removal: {back}, was {pat2}')
        rc, _ = t.a.sh('[ $(pidof qemu-storage-daemon | wc -w) -eq 1 ]')
        h.expect(rc == 0, "the first disk's back end still runs on a")

        # a folder added
        reload(t, ['# the second disk and a folder', f'blk {IMG2}',
                   'fs /tmp/share share'])
        b_mount_share(t, a_pat)
        t.b.run('umount /mnt', timeout=30)
        finish(t)
    finally:
        vhost_cleanup(t)


if __name__ == '__main__':
    raise SystemExit(h.main())
