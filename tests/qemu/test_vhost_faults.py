#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Stage 3 faults of the host's side: the VM of the host killed or
frozen, pcinet unloaded on the host, while the board does I/O.

    +---- a (QEMU): the host ----------+            +---- b: the board ---+
    | pcinet-vhost --link pcinet0      |            | pcinet.ko transport |
    |   --blk /dev/vda                 |<= fabric =>| virtio_blk /dev/vda |
    |   qemu-storage-daemon (child)    |            | direct I/O loop     |
    | /dev/vda: virtio-blk-pci on DISK |            |                     |
    +----------------------------------+            +---------------------+

test_vhost.py's rig (its helpers are imported, not copied), except for
the board's image: a file on this machine (DISK) that a's QEMU gives a
as a virtio-blk-pci disk, so that what b synced survives a's death and
is there again when a boots anew.  qemu-storage-daemon opens it with
driver=host_device (a wrapper that pcinet-vhost finds first on $PATH:
its driver=file refuses a block device); b's FLUSH reaches DISK
through qsd's fdatasync and a's virtio-blk.

The cases leave both sides unloaded and pcinet-vhost stopped, so the
second and third reuse the first's topology (a booted again in it): on
the debug kernel a boot costs 30-40 s.

What /dev/pcinet-vhost0 does on release and on module removal
(drivers/net/pcinet/pcinet_vhost.c): its file_operations and those of
its memory files name THIS_MODULE as owner, so every open control file
and every memory file (mapped or not) holds a reference on pcinet.ko:
`rmmod pcinet` on a while pcinet-vhost runs fails at once (EAGAIN:
busybox's rmmod passes O_NONBLOCK; EBUSY without it) and changes
nothing.  The last close of the control file
(exit, kill -9) withdraws every device it offered (dev_gen 0 for the
board, eventfds unbound) and revokes the memory files' mappings (later
faults SIGBUS).  Only when the PCI device goes with files still open
(unbind) does destroy() withdraw everything, write instance 0 and mark
the files gone.

Cases:
  vhost-host-vm-kill  under a long O_DIRECT dd on b's /dev/vda, a's QEMU
                      SIGKILLed: /dev/vda gone from b within 5 s (15 s
                      on the debug kernel; measured, it follows the
                      link's peer-gone detection), the dd ends with an
                      error within 10 s (30 s), `sync` returns within
                      10 s, rmmod on b returns within 5 s (10 s); a
                      booted again, pcinet-vhost started: /dev/vda back
                      on b with the 1 MiB synced before the kill (sha256,
                      also in DISK itself)
  vhost-host-vm-stop  a's QEMU SIGSTOPped for 15 s under b's I/O loop,
                      then SIGCONT: on b the disk goes (peer gone) or
                      the I/O fails within the transport's 10 s wedge
                      detection, nothing hangs (sync returns within 10
                      s), /dev/vda is there within 30 s (60 s) of the
                      SIGCONT, the loop's I/O works again, the data is
                      intact; the times printed
  vhost-host-rmmod    `rmmod pcinet` on a while pcinet-vhost holds
                      /dev/pcinet-vhost0 and b does I/O: refused
                      (EAGAIN from busybox's O_NONBLOCK delete_module,
                      module in use) within 5 s, b's I/O goes on; pcinet-vhost
                      SIGKILLed: /dev/vda gone from b within 2 s (5 s),
                      rmmod on a right after returns; insmod and
                      pcinet-vhost again: /dev/vda back, I/O works, data
                      intact
  vhost-host-unbind   the path rmmod cannot take: a's pcinet PCI device
                      unbound under b's I/O while pcinet-vhost holds the
                      control file and its memory mapped (destroy() with
                      files open): /dev/vda gone from b within 5 s (15
                      s), pcinet-vhost logs the link gone and stays;
                      bound again: it offers anew by itself, /dev/vda
                      back, I/O works, data intact, rmmod on both sides
  vhost-reset-in-flight  a write held in a's back end across the board's
                      reset (design.md, virtio open question 11): on a
                      tmpfs image (test_vhost.py's rig, not DISK),
                      qemu-storage-daemon with writes throttled to 4
                      KiB/s (PCINET_QSD) holds b's dd's second 64 KiB
                      write for ~16 s; rmmod pcinet on b (the write
                      aborted, the dd fails), insmod again once
                      pcinet-vhost has stopped the rings (or replaced
                      the back end): pcinet-vhost logs the request still
                      in the back end, no completion of the old session
                      reaches the new one's used ring (no "used" error,
                      no unplug on b after the insmod, past the time the
                      write would complete), /dev/vda stays, data intact.
                      Failed before pcinet-vhost waited for the back end
                      (ring_drain()): the held write completed 15.6 s
                      after the rings were stopped, into the new
                      session ("used idx ahead of the requests in
                      flight: unplugging" on b)
  vhost-wedge-heals      the same throttled back end holds a write past
                      the board's 10 s wedge check: b unplugs the
                      device with an error; pcinet-vhost sees it (GET_DRV
                      reports the error with no driver), replaces the
                      back end and offers anew: /dev/vda back by itself
                      within 20 s, data intact.  Failed before ("/dev/vda
                      back by itself not within 20s")
  vhost-drain-other   two disks (blk0 throttled as above, blk1 not, told
                      apart on b by their sizes), a write held in blk0's
                      back end, rmmod pcinet on b: pcinet-vhost handles
                      blk1's driver gone while blk0 still drains (its log:
                      blk1's line before blk0's "not completed"), then
                      kills blk0's back end; insmod: both disks back, no
                      unplug, blk1's data intact
  vhost-fs-reset-held virtiofsd SIGSTOPped under b's long write on the
                      folder (its requests held: it answers GET_VRING_BASE
                      only once they completed), rmmod pcinet on b:
                      pcinet-vhost done with the reset (stop given up,
                      virtiofsd killed) within the board's 3 s, b's write
                      fails (EIO); insmod: the folder mounts again, files
                      intact, no stale completion, no unplug
"""

import atexit
import hashlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

# test_vhost.py configures the rig and registers its own cases; only its
# helpers are wanted here.
_n_cases = len(h.CASES)
import test_vhost as tv  # noqa: E402
del h.CASES[_n_cases:]

DEBUG = h.KERNEL == 'debug'
SLOW = 3 if DEBUG else 1		# the debug kernel's bounds
PAT_OFF_MIB = 1
PAT_MIB = 1

# The board's image, kept on this machine: a's /dev/vda.
_fd, _disk = tempfile.mkstemp(prefix='pcinet-vhfault-', suffix='.img')
os.close(_fd)
DISK = Path(_disk)
os.truncate(DISK, tv.IMG_MIB << 20)
atexit.register(lambda: DISK.unlink(missing_ok=True))

TOPO = {'vm_args': {'a': ['-drive', f'file={DISK},if=none,id=hd0,'
                          'format=raw,cache=writeback',
                          '-device', 'virtio-blk-pci,drive=hd0']}}

# qemu-storage-daemon on a block device: pcinet-vhost's driver=file
# becomes driver=host_device, every other argument as given.
QSD_WRAPPER = r"""#!/bin/sh
for a; do
	shift
	case "$a" in driver=file,*) a="driver=host_device,${a#driver=file,}";; esac
	set -- "$@" "$a"
done
exec /usr/bin/qemu-storage-daemon "$@"
"""


def a_prepare(t):
    """a's side after a boot: the wrapper first on $PATH, pcinet loaded,
    pcinet-vhost offering /dev/vda."""
    t.a.run('[ -b /dev/vda ] && cat >/usr/sbin/qemu-storage-daemon '
            "<<'EOS'\n" + QSD_WRAPPER + 'EOS\n'
            'chmod 755 /usr/sbin/qemu-storage-daemon')
    h.load(t.a)
    t.a.wait_until('[ -c /dev/pcinet-vhost0 ]', 5, what='/dev/pcinet-vhost0')
    tv.vhost_start(t, '--blk /dev/vda')


def started(t):
    """Both sides up, /dev/vda on b, PAT_MIB MiB of random bytes written
    and synced at PAT_OFF_MIB; its sha256."""
    tv.need_vhost(t)
    t.a.run(f'rm -f {tv.LOG}')
    a_prepare(t)
    h.load(t.b)
    tv.wait_vda(t)
    return tv.b_write(t, PAT_OFF_MIB, PAT_MIB, timeout=120)


def a_sha(t):
    """sha256 of the pattern's place in a's /dev/vda."""
    return t.a.run(f'dd if=/dev/vda bs=1M skip={PAT_OFF_MIB} '
                   f'count={PAT_MIB} 2>/dev/null | sha256sum',
                   timeout=120).split()[0]


def disk_sha():
    """sha256 of the pattern's place in DISK, read here."""
    with open(DISK, 'rb') as f:
        f.seek(PAT_OFF_MIB << 20)
        return hashlib.sha256(f.read(PAT_MIB << 20)).hexdigest()


def check_data(t, pat, when):
    back = tv.b_sha(t, PAT_OFF_MIB, PAT_MIB)
    h.expect(back == pat, f'{when}: b reads {back}, written {pat}')
    img = a_sha(t)
    h.expect(img == pat, f"{when}: a's /dev/vda {img}, written {pat}")


def timed(vm, cmd, limit, what):
    """cmd on vm must return 0 within limit seconds; the time it took."""
    t0 = time.monotonic()
    rc, out = vm.sh(cmd, timeout=limit + 5)
    took = time.monotonic() - t0
    h.expect(rc == 0, f'{what}: exit {rc}: {out.strip()}')
    h.expect(took <= limit, f'{what} took {took:.1f} s (limit {limit} s)')
    return took


# One long O_DIRECT dd on b (64 MiB past the pattern, far longer than the
# case runs), through a node of its own (see tv.IO_LOOP); its exit status
# goes to /tmp/dd.rc.
LONG_DD = ('d=$(cat /sys/block/vda/dev) && rm -f /tmp/vdanode && '
           'mknod /tmp/vdanode b ${d%:*} ${d#*:} && '
           '(dd if=/dev/urandom of=/tmp/vdanode bs=64k count=1024 '
           'seek=128 oflag=direct conv=notrunc >/tmp/dd.log 2>&1; '
           'echo $? >/tmp/dd.rc) </dev/null >/dev/null 2>&1 &')


@h.case('vhost-host-vm-kill', fresh=True, topology=TOPO)
def _(t):
    """a's QEMU SIGKILLed under b's I/O: the disk goes, the I/O fails,
    nothing hangs on b; a booted again: the disk is back with what was
    synced."""
    try:
        pat = started(t)
        h.expect(disk_sha() == pat, 'the synced pattern is not in DISK')
        t.b.run('rm -f /tmp/dd.rc; ' + LONG_DD)
        # the dd is moving: its writes reach a's back end
        t.b.run('sleep 1; [ ! -s /tmp/dd.rc ] || { cat /tmp/dd.log; '
                'false; }')
        t.a.kill(signal.SIGKILL)
        t0 = time.monotonic()
        gone = t.b.wait_until('! [ -b /dev/vda ]', 5 * SLOW,
                              what='/dev/vda gone after a was killed',
                              show='ls /sys/block; dmesg | tail -n 15')
        h.info(f'/dev/vda gone from b {gone:.2f} s after the kill')
        t.b.wait_until('[ -s /tmp/dd.rc ]', 10 * SLOW,
                       what='the dd ends', show='cat /tmp/dd.log')
        ended = time.monotonic() - t0
        rc = int(t.b.run('cat /tmp/dd.rc').strip())
        h.info(f'the dd ended {ended:.2f} s after the kill, exit {rc}: ' +
               t.b.run('tail -n 3 /tmp/dd.log').strip().replace('\n', '; '))
        h.expect(rc != 0, 'the dd succeeded on a disk that went')
        took = timed(t.b, 'sync', 10, 'sync on b')
        h.info(f'sync on b: {took:.2f} s')
        t1 = time.monotonic()
        h.unload(t.b, 5 * SLOW)
        h.info(f'rmmod on b: {time.monotonic() - t1:.2f} s')
        h.load(t.b)
        t.a.restart()
        h.info(f'a booted again in {t.a.boot_time:.1f} s')
        h.expect(disk_sha() == pat, 'DISK lost the synced pattern')
        a_prepare(t)
        tv.wait_vda(t, 60 * SLOW)
        check_data(t, pat, 'after a was booted again')
        tv.finish(t)
    finally:
        if t.a.alive():
            tv.vhost_cleanup(t)


def io_loop_start(t):
    t.b.run(f'rm -f /tmp/io.log; ({tv.IO_LOOP}) </dev/null >/dev/null '
            '2>&1 & echo $! >/tmp/io.pid')
    tv.io_wait_ok(t, 'at the start')


def io_loop_stop(t):
    out = t.b.run('kill $(cat /tmp/io.pid); sleep 0.5; '
                  'echo "$(grep -c ok /tmp/io.log) ok, '
                  '$(grep -c err /tmp/io.log) failed"')
    h.info(f'I/O rounds on b: {out.strip()}')


@h.case('vhost-host-vm-stop', topology=TOPO)
def _(t):
    """a's QEMU frozen for 15 s under b's I/O: nothing hangs for good on
    b; after SIGCONT the disk is there, works and holds its data."""
    stop_s = 15
    try:
        pat = started(t)
        io_loop_start(t)
        errs0 = int(t.b.run('grep -c err /tmp/io.log || true').strip()
                    or 0)
        t.a.kill(signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            # what b's user sees while a is frozen: the disk goes, or
            # its I/O fails once the transport calls the device side
            # wedged (10 s)
            seen = t.b.wait_until(
                f'! [ -b /dev/vda ] || [ $(grep -c err /tmp/io.log) '
                f'-gt {errs0} ]', 12 * SLOW,
                what='the disk gone or an I/O error with a frozen',
                show='tail -n 3 /tmp/io.log; ls /sys/block; '
                'dmesg | tail -n 15')
            rc, _ = t.b.sh('[ -b /dev/vda ]')
            h.info(f'{"an I/O error" if rc == 0 else "/dev/vda gone"} '
                   f'on b {seen:.2f} s after SIGSTOP')
            took = timed(t.b, 'sync', 10, 'sync on b with a frozen')
            h.info(f'sync on b with a frozen: {took:.2f} s')
            rest = stop_s - (time.monotonic() - t0)
            if rest > 0:
                time.sleep(rest)
            rc, _ = t.b.sh('[ -b /dev/vda ]')
            h.info(f'/dev/vda {"still there" if rc == 0 else "absent"} '
                   f'after {time.monotonic() - t0:.1f} s of SIGSTOP')
        finally:
            t.a.kill(signal.SIGCONT)
        t1 = time.monotonic()
        tv.io_wait_ok(t, 'after SIGCONT')
        h.info(f'I/O on b works again {time.monotonic() - t1:.2f} s '
               'after SIGCONT')
        back = time.monotonic() - t1
        h.expect(back <= 30 * SLOW, f'I/O back {back:.1f} s after '
                 f'SIGCONT (limit {30 * SLOW} s)')
        rc, _ = t.a.sh('pidof pcinet-vhost qemu-storage-daemon')
        h.expect(rc == 0, 'pcinet-vhost or its back end died on a: ' +
                 t.a.run(f'tail -n 5 {tv.LOG}'))
        io_loop_stop(t)
        check_data(t, pat, 'after SIGCONT')
        tv.finish(t)
    finally:
        if t.a.alive():
            t.a.kill(signal.SIGCONT)
            tv.vhost_cleanup(t)


@h.case('vhost-host-rmmod', topology=TOPO)
def _(t):
    """rmmod pcinet on a while pcinet-vhost holds /dev/pcinet-vhost0 and
    b does I/O: refused (module in use); once pcinet-vhost is gone it
    succeeds, b's disk goes, and comes back after insmod + restart."""
    try:
        pat = started(t)
        io_loop_start(t)
        refs = t.a.run('cat /sys/module/pcinet/refcnt').strip()
        h.info(f'pcinet on a: {refs} references')
        t0 = time.monotonic()
        rc, out = t.a.sh('rmmod pcinet 2>&1', timeout=5 * SLOW + 5)
        took = time.monotonic() - t0
        h.info(f'rmmod on a under I/O: exit {rc} in {took:.2f} s: '
               f'{out.strip()}')
        # busybox's rmmod asks O_NONBLOCK: EAGAIN rather than EBUSY
        h.expect(rc != 0 and ('in use' in out or 'busy' in out or
                              'temporarily unavailable' in out),
                 'rmmod pcinet on a was not refused while '
                 '/dev/pcinet-vhost0 was open')
        h.expect(took <= 5 * SLOW, f'the refusal took {took:.1f} s')
        t.a.run('[ -c /dev/pcinet-vhost0 ] && pidof pcinet-vhost')
        tv.io_wait_ok(t, 'after the refused rmmod on a')

        t.a.run('kill -9 $(pidof pcinet-vhost)')
        t1 = time.monotonic()
        took = t.b.wait_until('! [ -b /dev/vda ]', 2 * SLOW,
                              what='/dev/vda gone after kill -9',
                              show='ls /sys/block; dmesg | tail -n 10')
        h.info(f'kill -9: /dev/vda gone from b in {took:.2f} s')
        t.a.wait_until('! pidof pcinet-vhost qemu-storage-daemon', 5,
                       what='pcinet-vhost and its back end gone')
        h.unload(t.a, 5 * SLOW)
        h.info(f'rmmod on a {time.monotonic() - t1:.2f} s after the kill')
        a_prepare(t)
        tv.wait_vda(t, 60 * SLOW)
        tv.io_wait_ok(t, 'after insmod and restart on a')
        io_loop_stop(t)
        check_data(t, pat, 'after the reload on a')
        tv.finish(t)
    finally:
        tv.vhost_cleanup(t)


@h.case('vhost-host-unbind', topology=TOPO)
def _(t):
    """a's pcinet PCI device unbound while pcinet-vhost holds
    /dev/pcinet-vhost0 (and its memory mapped) under b's I/O: the path
    rmmod cannot take; destroy() with files open.  b's disk goes,
    pcinet-vhost sees the link gone and stays; bound again, it offers
    anew by itself: /dev/vda back on b, data intact."""
    try:
        pat = started(t)
        io_loop_start(t)
        dev = t.a.run('ls /sys/bus/pci/drivers/pcinet/ | grep ^0000').strip()
        mark = int(t.a.run(f'wc -c <{tv.LOG}').strip())
        t0 = time.monotonic()
        t.a.run(f'echo {dev} >/sys/bus/pci/drivers/pcinet/unbind',
                timeout=10 * SLOW)
        h.info(f'unbind on a with pcinet-vhost running: '
               f'{time.monotonic() - t0:.2f} s')
        took = t.b.wait_until('! [ -b /dev/vda ]', 5 * SLOW,
                              what='/dev/vda gone after the unbind on a',
                              show='ls /sys/block; dmesg | tail -n 10')
        h.info(f'/dev/vda gone from b {took:.2f} s after the unbind')
        t.a.wait_until(f'tail -c +{mark + 1} {tv.LOG} | '
                       'grep -q "the link is gone"', 5 * SLOW,
                       what='pcinet-vhost sees the link gone',
                       show=f'tail -n 5 {tv.LOG}')
        t.a.run('pidof pcinet-vhost >/dev/null')
        t.a.run(f'echo {dev} >/sys/bus/pci/drivers/pcinet/bind',
                timeout=10 * SLOW)
        t1 = time.monotonic()
        tv.wait_vda(t, 60 * SLOW)
        tv.io_wait_ok(t, 'after the bind on a')
        h.info(f'I/O on b again {time.monotonic() - t1:.2f} s after '
               'the bind')
        io_loop_stop(t)
        check_data(t, pat, 'after unbind and bind on a')
        tv.finish(t, 10 * SLOW)
    finally:
        tv.vhost_cleanup(t)


# qemu-storage-daemon as pcinet-vhost starts it ($2: driver=file,
# node-name=blk0,filename=...; $4: the export of node blk0), writes
# throttled to 4 KiB/s as test_virtio_faults.py's THROTTLED_QSD: the
# throttle lets a 64 KiB write through, then holds the next for ~16 s.
# Only blk0's: any other disk's back end runs as given.
THROTTLED_QSD = r"""#!/bin/sh
case "$2" in *node-name=blk0,*) ;; *) exec qemu-storage-daemon "$@";; esac
exec qemu-storage-daemon --object throttle-group,id=tg0,x-bps-write=4096 \
	--blockdev "driver=file,node-name=f0,${2#*node-name=blk0,}" \
	--blockdev driver=throttle,node-name=blk0,throttle-group=tg0,file=f0 \
	"$3" "$4"
"""

# b's writes completed on vda (/proc/diskstats' 8th field)
B_WRITES = 'awk \'$3 == "vda" {print $8}\' /proc/diskstats'
# how long after it started the held write would complete, and more
HELD_S = 22


def held_write(t):
    """test_vhost.py's rig with qemu-storage-daemon's writes throttled to
    4 KiB/s (THROTTLED_QSD) and a PAT_MIB MiB pattern in a's image at
    PAT_OFF_MIB; a dd started on b; returns, with the pattern's sha256,
    once the dd's first 64 KiB write passed the throttle: its second is
    held (HELD_S)."""
    out = tv.started(
        t, prep="cat >/tmp/qsd-throttled <<'EOS'\n" + THROTTLED_QSD +
        'EOS\nchmod 755 /tmp/qsd-throttled; '
        f'dd if=/dev/urandom of=/tmp/pat bs=1M count={PAT_MIB} '
        f'2>/dev/null && dd if=/tmp/pat of={tv.IMG} bs=1M '
        f'seek={PAT_OFF_MIB} conv=notrunc 2>/dev/null && '
        'sha256sum </tmp/pat', env='PCINET_QSD=/tmp/qsd-throttled')
    tv.wait_vda(t)
    n0 = int(t.b.run(B_WRITES).strip() or 0)
    t.b.run('rm -f /tmp/dd.rc; ' + LONG_DD.replace('urandom', 'zero'))
    t.b.wait_until(f'[ "$({B_WRITES})" -gt {n0} ]', 10 * SLOW,
                   what="the dd's first write done",
                   show='cat /tmp/dd.log /proc/diskstats')
    return out.strip().split()[0]


@h.case('vhost-reset-in-flight', fresh=True)
def _(t):
    """A write held in a's back end when b's transport goes and comes
    back (rmmod, insmod): none of its completion may reach the next
    session's used ring (design.md, virtio open question 11)."""
    try:
        pat = held_write(t)
        t0 = time.monotonic()
        t.b.run('[ ! -s /tmp/dd.rc ] || { cat /tmp/dd.log; false; }')
        mark = int(t.a.run(f'wc -c <{tv.LOG}').strip())
        h.unload(t.b, 5 * SLOW)
        t.b.wait_until('[ -s /tmp/dd.rc ]', 5 * SLOW, what='the dd ends',
                       show='cat /tmp/dd.log')
        rc = int(t.b.run('cat /tmp/dd.rc').strip())
        h.expect(rc != 0, 'the dd succeeded: no write was held')
        # pcinet-vhost done with the reset: rings stopped, or a new back
        # end in place of one that kept the write
        took = t.a.wait_until(
            f'tail -c +{mark + 1} {tv.LOG} | '
            'grep -qE ": rings stopped$|: rings stopped:|: back end '
            'killed|: back end ready"', 10 * SLOW,
            what='pcinet-vhost handled the reset',
            show=f'tail -n 8 {tv.LOG}')
        h.info(f'pcinet-vhost handled the reset {took:.2f} s after rmmod')
        unplugs0 = int(t.b.run('dmesg | grep -c "virtio slot .*unplugged"'
                               ' || true').strip() or 0)
        h.load(t.b)
        back = tv.wait_vda(t, 30 * SLOW)
        rest = HELD_S - (time.monotonic() - t0)
        if rest > 0:
            # the held write, if it survived, completes meanwhile
            t.b.run(f'sleep {rest:.1f}', timeout=rest + 10)
        stale = t.b.run('dmesg | grep "virtio slot .*used" || true').strip()
        h.expect(not stale, 'a completion of the old session reached the '
                 'new one:\n' + stale + '\n' +
                 t.a.run(f'tail -c +{mark + 1} {tv.LOG} | tail -n 12'))
        unplugs = int(t.b.run('dmesg | grep -c "virtio slot .*unplugged"'
                              ' || true').strip() or 0) - unplugs0
        h.expect(unplugs == 0, f'{unplugs} unplug(s) after the insmod')
        t.b.run('[ -b /dev/vda ]')
        # what qemu-storage-daemon did: GET_VRING_BASE answered with the
        # write still held (else the case tested nothing)
        log = t.a.run(f'tail -c +{mark + 1} {tv.LOG}')
        h.expect('request(s) still in the back end' in log,
                 'pcinet-vhost saw no request left in the back end:\n' +
                 log[-1200:])
        h.info('pcinet-vhost: ' + ' / '.join(
            line.split('blk0: ', 1)[-1] for line in log.splitlines()
            if 'back end' in line or 'completed' in line)[:400])
        h.info(f'/dev/vda back {back:.1f} s after the insmod, no stale '
               'completion')
        back = tv.b_sha(t, PAT_OFF_MIB, PAT_MIB)
        h.expect(back == pat, f'b reads {back}, written {pat}')
        img = tv.a_sha(t, PAT_OFF_MIB, PAT_MIB)
        h.expect(img == pat, f'the image has {img}, written {pat}')
        tv.finish(t)
    finally:
        tv.vhost_cleanup(t)


@h.case('vhost-wedge-heals', fresh=True)
def _(t):
    """A write held in a's back end past the board's wedge timeout: the
    board unplugs the device with an error and registers that dev_gen no
    more; pcinet-vhost must see why (GET_DRV's error with no driver) and
    offer the device anew: /dev/vda comes back by itself, nothing on
    either side touched.  Before: the disk stayed away until pcinet-vhost
    or b's module was restarted."""
    try:
        pat = held_write(t)
        # the second write is held (16 s): the board's 10 s wedge check
        took = t.b.wait_until('dmesg | grep -q "virtio slot .*unplugged"',
                              20 * SLOW, what='the wedged device unplugged',
                              show='dmesg | tail -n 5')
        h.info(f'b unplugged the wedged device {took:.1f} s after the write')
        t.b.wait_until('[ -s /tmp/dd.rc ]', 10 * SLOW, what='the dd ends',
                       show='cat /tmp/dd.log')
        back = t.b.wait_until('[ -b /dev/vda ] && '
                              f'dd if=/dev/vda of=/dev/null bs=4k count=1 '
                              '2>/dev/null', 20 * SLOW,
                              what='/dev/vda back by itself',
                              show='dmesg | tail -n 5')
        h.info(f'/dev/vda back {back:.1f} s after the unplug')
        log = t.a.run(f'cat {tv.LOG}')
        h.expect('the board dropped dev_gen' in log,
                 'pcinet-vhost did not see the drop:\n' + log[-1000:])
        got = tv.b_sha(t, PAT_OFF_MIB, PAT_MIB)
        h.expect(got == pat, f'b reads {got}, written {pat}')
        tv.finish(t)
    finally:
        tv.vhost_cleanup(t)


IMG2 = '/tmp/board2.img'	# vhost-drain-other's second disk
IMG2_MIB = 32			# told from blk0's image by its size on b


def disks_by_size(t):
    """b's two disks: (blk0's, of tv.IMG_MIB MiB; blk1's, IMG2_MIB)."""
    t.b.wait_until('[ -b /dev/vda ] && [ -b /dev/vdb ]', 30 * SLOW,
                   what='/dev/vda and /dev/vdb on b',
                   show='ls /sys/block; dmesg | tail -n 10')
    size = {d: int(t.b.run(f'cat /sys/block/{d}/size').strip())
            for d in ('vda', 'vdb')}
    held = [d for d in size if size[d] == tv.IMG_MIB << 11]
    other = [d for d in size if size[d] == IMG2_MIB << 11]
    h.expect(len(held) == 1 and len(other) == 1, f'disk sizes {size}')
    return held[0], other[0]


def log_lines(t, mark):
    return t.a.run(f'tail -c +{mark + 1} {tv.LOG}').splitlines()


def first(lines, *words):
    """Index of the first line holding every word, or None."""
    for i, line in enumerate(lines):
        if all(w in line for w in words):
            return i
    return None


# two 4 MiB-pool disks need more than test_vhost.py's 8 MiB regions
TWO_DISKS = {'fabric_size': '128M', 'fabric_vio': '16M'}


@h.case('vhost-drain-other', fresh=True, topology=TWO_DISKS)
def _(t):
    """Two disks; a write held in blk0's back end when b's transport goes
    (rmmod): while pcinet-vhost waits for blk0's back end (its drain,
    PV_DRAIN_MS), blk1's session end is handled at once, not after it;
    insmod: both disks back, no unplug, blk1's data intact.  Failed
    before the drain was looked at from the poll loop: blk1 waited for
    blk0's whole drain and back end restart."""
    try:
        tv.started(
            t, args=f'--blk {tv.IMG} --blk {IMG2}',
            prep=f'truncate -s {IMG2_MIB}M {IMG2}; '
            "cat >/tmp/qsd-throttled <<'EOS'\n" + THROTTLED_QSD +
            'EOS\nchmod 755 /tmp/qsd-throttled',
            env='PCINET_QSD=/tmp/qsd-throttled', wait='blk1: offered')
        held, other = disks_by_size(t)
        pat = tv.b_write(t, 1, 1, timeout=60, dev=other)
        writes = B_WRITES.replace('vda', held)
        n0 = int(t.b.run(writes).strip() or 0)
        t.b.run('rm -f /tmp/dd.rc; ' +
                LONG_DD.replace('urandom', 'zero').replace('vda', held))
        t.b.wait_until(f'[ "$({writes})" -gt {n0} ]', 10 * SLOW,
                       what="the dd's first write done",
                       show='cat /tmp/dd.log /proc/diskstats')
        t.b.run('[ ! -s /tmp/dd.rc ] || { cat /tmp/dd.log; false; }')
        mark = int(t.a.run(f'wc -c <{tv.LOG}').strip())
        h.unload(t.b, 5 * SLOW)
        t.a.wait_until(
            f'tail -c +{mark + 1} {tv.LOG} | grep -qE '
            '"blk0: (back end killed|rings stopped$|rings stopped:|'
            'back end ready)"',
            10 * SLOW,
            what="pcinet-vhost done with blk0's reset",
            show=f'tail -n 12 {tv.LOG}')
        lines = log_lines(t, mark)
        i_held = first(lines, 'blk0: ', 'not completed')
        i_other = first(lines, 'blk1: driver 0x', 'gone')
        h.expect(i_held is not None, 'no request was held in blk0\'s back '
                 'end:\n' + '\n'.join(lines[-12:]))
        h.expect(i_other is not None and i_other < i_held,
                 "blk1's driver gone handled only after blk0's drain:\n" +
                 '\n'.join(lines[:16]))
        h.info('a: ' + lines[i_other].strip())
        h.info('a: ' + lines[i_held].strip())
        unplugs0 = int(t.b.run('dmesg | grep -c "virtio slot .*unplugged"'
                               ' || true').strip() or 0)
        h.load(t.b)
        held, other = disks_by_size(t)
        unplugs = int(t.b.run('dmesg | grep -c "virtio slot .*unplugged"'
                              ' || true').strip() or 0) - unplugs0
        h.expect(unplugs == 0, f'{unplugs} unplug(s) after the insmod')
        back = tv.b_sha(t, 1, 1, dev=other)
        h.expect(back == pat, f'{other}: b reads {back}, written {pat}')
        tv.finish(t)
    finally:
        tv.vhost_cleanup(t)


# b's long write on the folder (up to 256 MiB, stopped long before)
VFS_HELD = 'dd if=/dev/zero of=/mnt/big bs=64k count=4096'


@h.case('vhost-fs-reset-held', fresh=True)
def _(t):
    """A folder's requests held in virtiofsd (SIGSTOPped under a long
    write of b's) across b's rmmod and insmod of pcinet.  virtiofsd
    (QEMU's, Debian's 7.2) answers GET_VRING_BASE only once the queue's
    thread ended, which waits for every request it took
    (fv_queue_set_started() -> fv_queue_cleanup_thread() ->
    pthread_join()): a held request holds the answer, not the used
    ring.  pcinet-vhost must give up on the stop within its budget
    (PV_STOP_MS), kill virtiofsd and be done with the reset well inside
    the board's PCINET_VIO_ACK_MS (3 s); b's write fails cleanly; after
    the insmod the folder is back with its files intact, no stale
    completion or unplug.  Failed before (GET_VRING_BASE waited for 2 s,
    then SIGTERM with 2 s grace: the reset took over 4 s)."""
    tv.need_vhost(t)
    tv.need_virtiofsd(t)
    try:
        a_pat = tv.started(t, '--fs /tmp/share:share',
                           prep=tv.SHARE_PREP,
                           wait='fs0: offered').split()[0]
        tv.b_mount_share(t, a_pat)
        b_pat = t.b.run('dd if=/dev/urandom of=/tmp/from-b bs=1M count=1 '
                        '2>/dev/null && cp /tmp/from-b /mnt/from-b && sync '
                        '&& sha256sum /tmp/from-b', timeout=60).split()[0]
        t.b.run(f'rm -f /tmp/dd.rc; ({VFS_HELD} >/tmp/dd.log 2>&1; '
                'echo $? >/tmp/dd.rc) </dev/null >/dev/null 2>&1 &')
        t.a.wait_until('[ -s /tmp/share/big ]', 10 * SLOW,
                       what="b's write reaching a's folder")
        t.a.run('kill -STOP $(pidof virtiofsd)')
        size0 = t.a.run('stat -c %s /tmp/share/big').strip()
        t.b.run('sleep 1; [ ! -s /tmp/dd.rc ] || { cat /tmp/dd.log; '
                'false; }', timeout=30)
        h.info(f'virtiofsd stopped with b\'s write under way ({size0} '
               'bytes in a\'s file)')
        mark = int(t.a.run(f'wc -c <{tv.LOG}').strip())
        t0 = time.monotonic()
        h.unload(t.b, 5 * SLOW)
        t.a.wait_until(
            f'tail -c +{mark + 1} {tv.LOG} | grep -qE '
            '"fs0: (back end killed|rings stopped$|rings stopped:|'
            'back end ready)"',
            10 * SLOW, what='pcinet-vhost done with the reset',
            show=f'tail -n 12 {tv.LOG}')
        took = time.monotonic() - t0
        lines = log_lines(t, mark)
        h.info(f'pcinet-vhost done with the reset {took:.2f} s after the '
               'rmmod: ' + ' / '.join(
                   line.split('fs0: ', 1)[-1] for line in lines
                   if 'fs0: ' in line)[:400])
        h.expect(took <= 3.0 * SLOW, f'the reset took {took:.1f} s: past '
                 "the board's status wait (3 s)")
        t.b.wait_until('[ -s /tmp/dd.rc ]', 10 * SLOW, what='the dd ends',
                       show='cat /tmp/dd.log')
        rc = int(t.b.run('cat /tmp/dd.rc').strip())
        h.info(f"b's write: exit {rc}: " +
               t.b.run('tail -n 2 /tmp/dd.log').strip().replace('\n', '; '))
        h.expect(rc != 0, "b's write succeeded: nothing was held")
        t.b.run('umount -l /mnt 2>/dev/null; true')
        unplugs0 = int(t.b.run('dmesg | grep -c "virtio slot .*unplugged"'
                               ' || true').strip() or 0)
        h.load(t.b)
        tv.b_mount_share(t, a_pat)
        got = t.b.run('sha256sum /mnt/from-b', timeout=60).split()[0]
        h.expect(got == b_pat, f'from-b: b reads {got}, wrote {b_pat}')
        stale = t.b.run('dmesg | grep "virtio slot .*used" || true').strip()
        h.expect(not stale, 'a stale completion reached the new session:\n'
                 + stale)
        unplugs = int(t.b.run('dmesg | grep -c "virtio slot .*unplugged"'
                              ' || true').strip() or 0) - unplugs0
        h.expect(unplugs == 0, f'{unplugs} unplug(s) after the insmod')
        t.b.run('umount /mnt', timeout=30)
        tv.finish(t)
    finally:
        t.a.sh('kill -CONT $(pidof virtiofsd) 2>/dev/null; true')
        tv.vhost_cleanup(t)


if __name__ == '__main__':
    raise SystemExit(h.main())
