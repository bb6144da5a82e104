#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""/dev/ttyPCI0 as users meet it: two QEMU guests joined by pcinet-fabric.

Run: python3 tests/qemu/test_ttypci.py [-k PATTERN], or make check TESTS=tty

    +------- a -------+      pcinet-fabric       +------- b -------+
    |   /dev/ttyPCI0  |<==== ivshmem-doorbell ==>|   /dev/ttyPCI0  |
    +-----------------+  one 64 KiB ring per way +-----------------+

The line is a null modem: each side's open port is the other's carrier.
Termios default to CLOCAL (as on any serial port); cases that test carrier
clear it.  Every guest command that reads or writes the tty runs under
`timeout`, so a lost byte fails a case instead of hanging the agent.

Each case starts from freshly loaded modules (empty rings, default termios)
and fails if it does not hold what a user relies on; speeds are printed,
not asserted (that is `make bench`).  pcinet0 is up on both sides, with no
address: its carrier (sysfs) is how a case knows the link is up.
"""

import hashlib
import re
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

TTY = '/dev/ttyPCI0'
PEER = {'a': 'b', 'b': 'a'}
MIB = 1024 * 1024
# Status of a command that `timeout` stopped: busybox's timeout execs the
# command and SIGTERMs it, so the shell sees 128 + 15 (GNU's says 124).
TIMED_OUT = '143'

h.configure(extra_modules=[h.PCINET_KO])


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def link_up(t, timeout=15.0):
    """The link is up: pcinet0 (no address, only its carrier is read) up on
    both sides and carrier on both, from sysfs.  Carrier needs the link up
    and the peer's pcinet0 up, so after the peer was reloaded, frozen or
    killed this waits for the link it made again."""
    for vm in (t.a, t.b):
        vm.run('ip link set pcinet0 up')
    for vm in (t.a, t.b):
        h.wait_carrier(vm, 1, timeout)


def load(vm, args=''):
    """insmod (checked to be the module built here); ttyPCI0 and pcinet0
    there."""
    h.load(vm, args, wait=(TTY, '/sys/class/net/pcinet0'))


def release(vm, passes=10):
    """Kill whatever holds the tty (busybox has no fuser here), pass after
    pass until a pass finds nothing: a shell loop writing the tty forks a
    new writer when its child is killed before it, and that one was not in
    the pass that killed the child.  Returns the processes killed after the
    first pass (each was a writer the first pass would have missed)."""
    killed, late = set(), 0
    for i in range(passes):
        pids = set(vm.run('for d in /proc/[0-9]*/fd; do ls -l $d 2>/dev/null'
                          f' | grep -q " -> {TTY}$" && p=${{d%/fd}} && '
                          'kill -9 ${p#/proc/} 2>/dev/null && echo ${p#/proc/};'
                          ' done; true').split())
        if not pids:
            return late
        if i:
            late += len(pids - killed)
        killed |= pids
        time.sleep(0.05)	# the killed ones close their files as they exit
    h.expect(False, f'{vm.name}: {TTY} still held after {passes} passes')
    return late


def unload(vm):
    """Release the tty, then rmmod; the tty's release, and with it the
    module reference, is asynchronous."""
    release(vm)
    h.unload(vm, 5)


def fresh(t, args=''):
    """Both sides reloaded: empty rings, default termios, link up."""
    for vm in (t.a, t.b):
        unload(vm)
    for vm in (t.a, t.b):
        load(vm, args)
    link_up(t)


def raw(vm, modem='clocal'):
    """Raw mode: every byte passes unchanged; modem: clocal or -clocal,
    and more stty flags."""
    vm.run(f'stty -F {TTY} raw -echo {modem}')


def make_file(vm, name, nbytes):
    """Random file /tmp/<name>; returns its sha256."""
    out = vm.run(f'[ "$(stat -c %s /tmp/{name} 2>/dev/null)" = {nbytes} ] || '
                 f'head -c {nbytes} /dev/urandom >/tmp/{name}; '
                 f'sha256sum </tmp/{name}', timeout=120)
    return out.split()[-2]


def start_reader(vm, nbytes, secs=300, tag='rx'):
    """Background `head -c nbytes` of the tty into /tmp/<tag>.bin; the pid
    (of head itself: busybox timeout execs it) is in /tmp/<tag>.pid and its
    status lands in /tmp/<tag>.rc."""
    vm.run(f'rm -f /tmp/{tag}.*; '
           f'(timeout {secs} head -c {nbytes} {TTY} >/tmp/{tag}.bin & '
           f'echo $! >/tmp/{tag}.pid; wait $!; echo $? >/tmp/{tag}.rc) '
           f'>/dev/null 2>&1 &')
    vm.wait_until(f'[ -s /tmp/{tag}.pid ]', 10, what=f'{tag} reader started',
                  interval=0.01)


def start_writer(vm, src, secs=300, tag='tx'):
    """Background `cat src >tty`; status in /tmp/<tag>.rc."""
    vm.run(f'rm -f /tmp/{tag}.rc; (timeout {secs} cat {src} >{TTY}; '
           f'echo $? >/tmp/{tag}.rc) >/dev/null 2>&1 &')


def endless_stream(t):
    """a writes /dev/zero to b's reader without end, so only a hangup can
    stop either; fails unless both are still running after a second (a
    finished transfer would make the hangup checks that follow vacuous)."""
    # b keeps the first 64 KiB (proof that bytes flow), discards the rest
    t.b.run(f'rm -f /tmp/rx.*; (timeout 300 sh -c "head -c 65536 >/tmp/rx.bin'
            f'; exec cat >/dev/null" <{TTY}; echo $? >/tmp/rx.rc) '
            f'>/dev/null 2>&1 &')
    start_writer(t.a, '/dev/zero')
    t.b.wait_until('[ "$(stat -c %s /tmp/rx.bin)" = 65536 ]', 5, must=False)
    got = t.b.run('stat -c %s /tmp/rx.bin').strip()
    h.expect(got == '65536', f'b got {got} bytes of 64 KiB in 5 s')
    for vm, tag in ((t.a, 'tx'), (t.b, 'rx')):
        rc = vm.run(f'cat /tmp/{tag}.rc 2>/dev/null; true').strip()
        h.expect(rc == '', f'{vm.name}: {tag} ended before the event: rc {rc}')


def wait_file(vm, path, secs):
    """Wait in the guest until path exists; returns its content or None."""
    vm.wait_until(f'[ -e {path} ]', secs, must=False)
    out = vm.run(f'cat {path} 2>/dev/null; true')
    return out.strip() if out.strip() else None


def chunk_sums(vm, path, chunk=65536):
    """md5 of each chunk of a guest file, for locating damage."""
    return vm.run(f'n=$(wc -c <{path}); i=0; '
                  f'while [ $((i * {chunk})) -lt $n ]; do '
                  f'dd if={path} bs={chunk} skip=$i count=1 2>/dev/null | '
                  f'md5sum; i=$((i+1)); done', timeout=300).split()[::2]


def where_damaged(src, src_path, dst, dst_path):
    """A description of where dst_path first differs from src_path."""
    a, b = chunk_sums(src, src_path), chunk_sums(dst, dst_path)
    bad = [i for i in range(min(len(a), len(b))) if a[i] != b[i]]
    if not bad:
        return 'no chunk differs'
    i = bad[0]
    dump = (f'dd if={{}} bs=65536 skip={i} count=1 2>/dev/null | '
            'od -A d -t x1 | head -n 6')
    return (f'{len(bad)} of {len(b)} 64 KiB chunks differ, first #{i}:\n'
            f'  sent:     {src.run(dump.format(src_path))}\n'
            f'  received: {dst.run(dump.format(dst_path))}\n'
            f'  termios {src.name}: {src.run(f"stty -F {TTY} -g")}'
            f'  termios {dst.name}: {dst.run(f"stty -F {TTY} -g")}')


def stale_or_corrupt(sent, got, earlier=None):
    """What arrived instead of sent, told apart: the sent stream found in
    got at offset k, and what the k bytes before it were.  earlier: the
    stream the peer's previous writers sent over and over (bytes), to tell
    stale bytes of theirs (a serial line delivers what was on the wire to
    the next reader) from bytes nobody sent (a driver bug)."""
    if got == sent:
        return 'equal'
    k = got.find(sent[:64])
    if k < 0:
        return ('the first 64 bytes sent appear nowhere in the '
                f'{len(got)} received: corrupt (nobody sent these)')
    tail = got[k:]
    j = next((i for i in range(len(tail)) if tail[i] != sent[i]), len(tail))
    msg = (f'the sent stream starts at byte {k} of what arrived and '
           + ('continues intact to the end' if j == len(tail)
              else f'differs again {j} bytes after that'))
    if k:
        msg += f'; the {k} bytes before it start {got[:16].hex()}'
        if earlier:
            ring = earlier + earlier
            pieces = [got[i:i + 64] for i in range(0, k - 63, 64)]
            found = sum(1 for x in pieces if x in ring)
            msg += (f'; {found} of {len(pieces)} 64-byte pieces of them are '
                    "in the peer's earlier writers' stream: "
                    + ('stale bytes' if found == len(pieces)
                       else 'bytes nobody sent'))
    return msg


def check_received(vm, tag, want_sha, nbytes, what, src=None, src_path=None,
                   earlier=None):
    """The reader started by start_reader() got exactly what was sent; on a
    difference, where (chunks) and what (stale_or_corrupt(); earlier: the
    path of the stream src's previous writers sent, on src)."""
    rc = wait_file(vm, f'/tmp/{tag}.rc', 600)
    got = vm.run(f'wc -c </tmp/{tag}.bin; sha256sum </tmp/{tag}.bin').split()
    ok = rc == '0' and int(got[0]) == nbytes and got[1] == want_sha
    if not ok and src is not None and int(got[0]) > 0:
        what += '\n' + where_damaged(src, src_path, vm, f'/tmp/{tag}.bin')
        sent = src.sh_bytes(f'cat {src_path}', timeout=300)[1]
        recv = vm.sh_bytes(f'cat /tmp/{tag}.bin', timeout=300)[1]
        old = (src.sh_bytes(f'cat {earlier}', timeout=300)[1]
               if earlier else None)
        what += '\n  ' + stale_or_corrupt(sent, recv, old)
    h.expect(ok, f'{what}: reader rc {rc}, got {got[0]} of {nbytes} bytes, '
             f'sha256 {"equal" if got[1] == want_sha else "differs"}')


def transfer(src, dst, nbytes, name, earlier=None):
    """nbytes of random data src -> dst in raw mode, sha256 compared."""
    sha = make_file(src, name, nbytes)
    start_reader(dst, nbytes)
    src.run(f'timeout 300 cat /tmp/{name} >{TTY}', timeout=360)
    check_received(dst, 'rx', sha, nbytes, f'{src.name}->{dst.name}',
                   src, f'/tmp/{name}', earlier)


def line_works(t, earlier=None):
    """The line carries 1 MiB each way in raw mode, sha256 compared."""
    for vm in (t.a, t.b):
        raw(vm)
    transfer(t.a, t.b, MIB, 'tx.1', earlier)
    transfer(t.b, t.a, MIB, 'tx.1', earlier)


def quiesce(t, idle_ms=500, secs=30):
    """Both ends read and discard until nothing arrives and neither has
    bytes left in its ring to the other (TIOCOUTQ 0): what earlier writers
    left on the line is gone.  Returns the bytes each end discarded."""
    for vm in (t.a, t.b):
        vm.run(f'rm -f /tmp/quiet.*; (timeout {secs + 10} pcinet-ttyperf quiet '
               f'{TTY} {idle_ms} {secs} >/tmp/quiet.out 2>&1; '
               'echo $? >/tmp/quiet.rc) >/dev/null 2>&1 &')
    gone = {}
    for vm in (t.a, t.b):
        rc = wait_file(vm, '/tmp/quiet.rc', secs + 15)
        out = vm.run('cat /tmp/quiet.out; true').strip()
        h.expect(rc == '0', f'{vm.name}: the line did not go quiet in {secs} s '
                 f'(status {rc}): {out}')
        gone[vm.name] = int(re.search(r'discarded=(\d+)', out).group(1))
    return gone


def first_diff(got, want):
    """Offset where two byte strings first differ, with context."""
    n = min(len(got), len(want))
    i = next((i for i in range(n) if got[i] != want[i]), n)
    return (f'{len(got)} bytes, want {len(want)}; first difference at {i}:'
            f'\n  got  {got[i - 40:i + 60]!r}\n  want {want[i - 40:i + 60]!r}')


def reader_done(vm, tag):
    return vm.run(f'cat /tmp/{tag}.rc 2>/dev/null || true').strip()


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------

@h.case('tty-device')
def _(t):
    """ttyPCI0 appears with the link, goes with the module, comes back."""
    fresh(t)
    for vm in (t.a, t.b):
        out = vm.run(f'ls -l {TTY}; grep ttyPCI /proc/tty/drivers')
        h.expect(re.search(r'^c.* (\d+), +0 .*/dev/ttyPCI0$', out, re.M) and
                 re.search(r'/dev/ttyPCI +\d+ 0-255 serial', out),
                 f'{vm.name}: no ttyPCI0 char device or driver:\n{out}')
        unload(vm)
        vm.run(f'! [ -e {TTY} ] && ! grep -q ttyPCI /proc/tty/drivers')
    fresh(t)


@h.case('tty-all-bytes')
def _(t):
    """Every byte value 0..255, both ways, passes unchanged in raw mode."""
    fresh(t)
    for vm in (t.a, t.b):
        raw(vm)
    script = ('i=0; s=; while [ $i -lt 256 ]; do s="$s\\\\$(printf %o $i)"; '
              'i=$((i+1)); done; printf "$s$s$s$s" >/tmp/bytes')
    want = hashlib.sha256(bytes(range(256)) * 4).hexdigest()
    for src in (t.a, t.b):
        dst = t[PEER[src.name]]
        src.run(script)
        start_reader(dst, 1024, secs=30)
        src.run(f'timeout 30 cat /tmp/bytes >{TTY}', timeout=60)
        check_received(dst, 'rx', want, 1024, f'{src.name}->{dst.name}')


@h.case('tty-16M-each-way')
def _(t):
    """16 MiB of random data a->b, then b->a, sha256 equal at both ends."""
    fresh(t)
    for vm in (t.a, t.b):
        raw(vm)
    transfer(t.a, t.b, h.scaled(16) * MIB, 'tx.16')
    transfer(t.b, t.a, h.scaled(16) * MIB, 'tx.16')


@h.case('tty-16M-both-ways')
def _(t):
    """16 MiB each way at the same time."""
    fresh(t)
    sha = {}
    for vm in (t.a, t.b):
        raw(vm)
        sha[vm.name] = make_file(vm, 'tx.16', h.scaled(16) * MIB)
    for vm in (t.a, t.b):
        start_reader(vm, h.scaled(16) * MIB)
    for vm in (t.a, t.b):
        start_writer(vm, '/tmp/tx.16')
    for vm in (t.a, t.b):
        check_received(vm, 'rx', sha[PEER[vm.name]], h.scaled(16) * MIB,
                       f'{PEER[vm.name]}->{vm.name}')
        h.expect(wait_file(vm, '/tmp/tx.rc', 60) == '0',
                 f'{vm.name}: writer failed')


@h.case('tty-reader-stopped')
def _(t):
    """A reader stopped for 4 s mid-transfer: the writer blocks (flow
    control back through the ring), nothing is lost, both finish."""
    fresh(t)
    for src in (t.a, t.b):
        dst = t[PEER[src.name]]
        for vm in (src, dst):
            raw(vm)
        sha = make_file(src, 'tx.64', h.scaled(64) * MIB)
        start_reader(dst, h.scaled(64) * MIB)
        start_writer(src, '/tmp/tx.64')
        # Stop the reader once bytes flow (a slow guest may take a while
        # to start the writer), then give the ring time to fill.
        dst.wait_until('[ -s /tmp/rx.bin ]', 10, must=False, interval=0.05)
        dst.run('kill -STOP $(cat /tmp/rx.pid)')
        before = int(dst.run('sleep 1; wc -c </tmp/rx.bin'))
        time.sleep(3)
        after = int(dst.run('wc -c </tmp/rx.bin'))
        writer = src.run('cat /tmp/tx.rc 2>/dev/null || echo running').strip()
        dst.run('kill -CONT $(cat /tmp/rx.pid)')
        h.expect(before == after and 0 < before < h.scaled(64) * MIB,
                 f'stopped reader: {before} -> {after} bytes')
        h.expect(writer == 'running', f'writer finished ({writer}) although '
                 'the reader was stopped: bytes went somewhere')
        check_received(dst, 'rx', sha, h.scaled(64) * MIB, f'{src.name}->{dst.name}')
        h.expect(wait_file(src, '/tmp/tx.rc', 60) == '0', 'writer failed')


@h.case('tty-getty')
def _(t):
    """getty on b, driven from a: the shell answers; closing a's end (DTR
    drops with HUPCL) hangs up b's shell like a modem line."""
    fresh(t)
    # a's termios before b's shell prints anything: what b writes waits in
    # the ring until a opens, and an echoing a would type it back at b.
    # -hupcl so that this open and close leaves a's DTR up instead of
    # pulsing it (a pulse would hang b up).
    t.a.run(f'stty -F {TTY} raw -echo -hupcl')
    pid = t.b.run(f'getty -n -l /bin/sh 115200 ttyPCI0 >/dev/null 2>&1 & '
                  f'echo $!').strip()
    # getty flushes the line when it opens it: type only once it has
    # exec'ed the shell (-n: no login prompt).
    t.b.wait_until(f'[ "$(cat /proc/{pid}/comm)" = sh ]', 10, must=False)
    comm = t.b.run(f'cat /proc/{pid}/comm; true')
    h.expect(comm.strip() == 'sh', f'getty did not start the shell: {comm}')
    # HUPCL again for the final close.  One command: fd 3 stays open
    # across the wait (so a loop here, not vm.wait_until()).
    out = t.a.run(
        f'exec 3<>{TTY}; '
        'timeout 20 cat <&3 >/tmp/sess.out & c=$!; usleep 300000; '
        'printf "echo HOST=\\$(hostname) TTY=\\$(tty) SUM=\\$((6*7))\\n" >&3; '
        'for i in $(seq 100); do grep -q "SUM=42" /tmp/sess.out && break; '
        'usleep 100000; done; kill $c; stty hupcl <&3; exec 3>&-; '
        'cat /tmp/sess.out', timeout=60)
    h.expect('HOST=b TTY=/dev/ttyPCI0 SUM=42' in out,
             'the shell on b did not answer:\n' + out)
    gone = t.b.wait_until(f'! kill -0 {pid}', 5, must=False)
    h.expect(gone is not None, "b's shell survived a's hangup")


@h.case('tty-carrier')
def _(t):
    """Without CLOCAL: open waits for the peer's open; the peer's close
    hangs up (HUPCL); with -hupcl carrier stays; the peer unloading hangs
    up."""
    fresh(t)
    t.a.run(f'stty -F {TTY} -clocal -echo')
    # a's blocking open waits: b has not opened its end
    t.a.run(f'rm -f /tmp/c.*; (timeout 30 cat {TTY} >/tmp/c.out; '
            f'echo $? >/tmp/c.rc) >/dev/null 2>&1 & sleep 1')
    h.expect(reader_done(t.a, 'c') == '', 'open did not wait for carrier')
    # b opens (carrier), says hello, closes (HUPCL: hangup on a)
    t.b.run(f'exec 3<>{TTY}; printf "carrier-up\\n" >&3; sleep 1')
    rc = wait_file(t.a, '/tmp/c.rc', 5)
    out = t.a.run('cat /tmp/c.out')
    h.expect(rc == '0' and 'carrier-up' in out,
             f'peer close: reader rc {rc} (0: hung up, {TIMED_OUT}: not), '
             f'got {out!r}')
    # with -hupcl, b's DTR stays up after close: a opens at once, no hangup
    t.b.run(f'stty -F {TTY} -hupcl')
    t.a.run(f'rm -f /tmp/c.*; (timeout 3 cat {TTY} >/tmp/c.out; '
            f'echo $? >/tmp/c.rc) >/dev/null 2>&1 &')
    rc = wait_file(t.a, '/tmp/c.rc', 10)
    h.expect(rc == TIMED_OUT, f'with -hupcl on b: reader rc {rc}, want '
             f'{TIMED_OUT} (still open when its timeout hit)')
    # b unloads: the link goes, a's reader is hung up within a second
    t.a.run(f'rm -f /tmp/c.*; (timeout 30 cat {TTY} >/tmp/c.out; '
            f'echo $? >/tmp/c.rc) >/dev/null 2>&1 & sleep 1')
    h.expect(reader_done(t.a, 'c') == '', 'reader ended early')
    unload(t.b)
    rc = wait_file(t.a, '/tmp/c.rc', 3)
    h.expect(rc == '0', f'peer unloaded: reader rc {rc}, want 0 (hung up)')


@h.case('tty-unbind-under-traffic')
def _(t):
    """While bytes flow: rmmod is refused (the open tty holds the module);
    unbinding the device hangs up both ends; rebinding gives a working
    line once the old tty is closed."""
    fresh(t)
    raw(t.a, '-clocal')
    raw(t.b)
    endless_stream(t)
    for vm in (t.a, t.b):
        rc, _ = vm.sh('rmmod pcinet')
        h.expect(rc != 0, f'{vm.name}: rmmod succeeded with the tty open')
    dev = t.b.run('ls /sys/bus/pci/drivers/pcinet/ | grep ^0000').strip()
    t.b.run(f'echo {dev} >/sys/bus/pci/drivers/pcinet/unbind; ! [ -e {TTY} ]')
    h.expect(wait_file(t.b, '/tmp/rx.rc', 5) is not None,
             "b's reader was not hung up by the unbind")
    rc = wait_file(t.a, '/tmp/tx.rc', 5)
    h.expect(rc not in (None, '0', TIMED_OUT),
             f"a's writer (-clocal) not hung up when b went: rc {rc}")
    t.b.run(f'echo {dev} >/sys/bus/pci/drivers/pcinet/bind')
    t.b.wait_until(f'[ -e {TTY} ] && [ -e /sys/class/net/pcinet0 ]', 5,
                   what='ttyPCI0 and pcinet0 after the bind')
    link_up(t)
    line_works(t)


@h.case('tty-peer-frozen')
def _(t):
    """A frozen peer (SIGSTOP) takes the link down: a -clocal reader is
    hung up; after SIGCONT the line works again."""
    fresh(t)
    raw(t.b, 'clocal -hupcl')	# b's DTR stays up: a has carrier
    raw(t.a, '-clocal')
    t.a.run(f'rm -f /tmp/c.*; (timeout 60 cat {TTY} >/dev/null; '
            f'echo $? >/tmp/c.rc) >/dev/null 2>&1 & sleep 1')
    h.expect(reader_done(t.a, 'c') == '', 'reader ended before the freeze')
    t.b.kill(signal.SIGSTOP)
    try:
        rc = wait_file(t.a, '/tmp/c.rc', 5)
    finally:
        t.b.kill(signal.SIGCONT)
    h.expect(rc == '0', f'reader not hung up by the frozen peer: rc {rc}')
    link_up(t)
    line_works(t)


@h.case('tty-peer-killed')
def _(t):
    """kill -9 of the peer's QEMU mid-transfer: the writer (-clocal) is hung
    up; the restarted peer gets a working line."""
    fresh(t)
    raw(t.a, '-clocal')
    raw(t.b, 'clocal -hupcl')
    endless_stream(t)
    t.b.kill(signal.SIGKILL)
    rc = wait_file(t.a, '/tmp/tx.rc', 5)
    h.expect(rc not in (None, '0', TIMED_OUT),
             f'writer not hung up when the peer died: rc {rc}')
    t.b.restart()
    load(t.b)
    link_up(t)
    line_works(t)


@h.case('tty-bad-peer')
def _(t):
    """A peer scribbling over our inbox while the tty carries data both
    ways costs link resets at most; after it reloads, the line works.  The
    writers send a known stream (pcinet-ttyperf gen), so that bytes of
    theirs still on the line afterwards (stale) are told apart from bytes
    nobody sent (corrupt) if the check after them fails."""
    h.need_tool('pcinet-poke', 'pcinet-ttyperf')
    fresh(t)
    for seed, vm in enumerate((t.a, t.b), 1):
        raw(vm)
        vm.run(f'pcinet-ttyperf gen /tmp/bg.bin 262144 {seed}; '
               f'(timeout 60 cat {TTY} >/dev/null &); '
               f'(timeout 60 sh -c "while :; do cat /tmp/bg.bin; '
               f'done" >{TTY} 2>/dev/null &)')
    rc, out = t.b.sh('pcinet-poke garbage 1000', timeout=180)
    h.expect(rc == 0, 'pcinet-poke failed:\n' + out)
    n = t.a.run('dmesg | grep -c "tty: bad peer data" || true').strip()
    h.info(f'a reported bad tty data {n} times')
    # The case's own readers and writers go; the drivers stay: the line
    # must work again by itself (a reload would hide a wedge).
    late = {vm.name: release(vm) for vm in (t.a, t.b)}
    # pcinet0 up on both sides: its carrier says the link is up again
    link_up(t, 10)
    # what the killed writers had queued is on the line: read it away
    gone = quiesce(t)
    h.info(f'writers killed late {late}, stale bytes discarded {gone}')
    line_works(t, earlier='/tmp/bg.bin')
    # and nothing the garbage did holds a reference to the module
    for vm in (t.a, t.b):
        unload(vm)


@h.case('tty-room-wakeup')
def _(t):
    """n_tty sleeps without writing when the next character needs more room
    than is left ("\\n" as "\\r\\n" with one byte of room); the writer must
    be woken when the peer frees space.  Regression: it was only woken when
    it had found the ring completely full."""
    fresh(t)
    # b's termios first: an open drains the ring into the tty, whose close
    # then discards what nobody read (stty would eat the bytes below)
    raw(t.b)
    raw(t.a)
    # b's end is closed: a's bytes wait in the 64 KiB ring, cut into
    # records of 2048 bytes that take 33 slots of 64 bytes each (header and
    # padding): 31 of them leave one slot, and write_room() says 1
    fill = (65536 // (64 * 33)) * 2048
    t.a.run(f'head -c {fill} /dev/zero >{TTY}')
    t.a.run(f'stty -F {TTY} sane clocal; rm -f /tmp/nl.rc; '
            f'(timeout 30 printf "\\n" >{TTY}; echo $? >/tmp/nl.rc) '
            '>/dev/null 2>&1 & sleep 1')
    h.expect(t.a.run('cat /tmp/nl.rc 2>/dev/null || true').strip() == '',
             'the newline went out although only one byte fit')
    start_reader(t.b, fill + 2, secs=20)
    rc = wait_file(t.a, '/tmp/nl.rc', 15)
    h.expect(rc == '0', f'writer not woken when b made room: status {rc}')
    check_received(t.b, 'rx', hashlib.sha256(bytes(fill) + b'\r\n')
                   .hexdigest(), fill + 2, 'a->b')


@h.case('tty-cooked-flow-control')
def _(t):
    """Cooked output (tabs expanded with tab3, "\\n" as "\\r\\n") through a
    ring that fills again and again while the reader runs in snatches:
    every byte arrives, expanded as termios says, and the writer finishes."""
    fresh(t)
    t.a.run(f'stty -F {TTY} sane clocal tab3; awk \'BEGIN {{ for (i = 0; '
            'i < 8000; i++) printf "L%d\\t%s\\t%s\\tend\\n", i, '
            'substr("aaaaaaa", 1, i % 7), substr("bbbbb", 1, i % 5) }\' '
            '>/tmp/tabs.txt', timeout=120)
    data = t.a.sh_bytes('cat /tmp/tabs.txt')[1]
    want = b''.join(l.expandtabs(8) + b'\r\n' for l in data.split(b'\n')[:-1])
    raw(t.b)
    t.b.run(f'rm -f /tmp/rx.*; timeout 300 cat {TTY} >/tmp/rx.bin & '
            f'echo $! >/tmp/rx.pid; kill -STOP $!')
    start_writer(t.a, '/tmp/tabs.txt', secs=300)
    # let the reader run for moments only: the ring fills again and again
    t.b.run('p=$(cat /tmp/rx.pid); for i in $(seq 40); do usleep 200000; '
            'kill -CONT $p; usleep 3000; kill -STOP $p; done; kill -CONT $p',
            timeout=120)
    rc = wait_file(t.a, '/tmp/tx.rc', 60)
    h.expect(rc == '0', f'cooked writer: status {rc} (None: still blocked)')
    t.b.wait_until(f'[ $(wc -c </tmp/rx.bin) -ge {len(want)} ]', 10,
                   must=False)
    got = t.b.sh_bytes('kill $(cat /tmp/rx.pid); cat /tmp/rx.bin',
                       timeout=120)[1]
    h.expect(got == want, 'cooked stream damaged: ' + first_diff(got, want))


def console_capture(reader, writer, lines, level='<2>'):
    """Lines written to writer's /dev/kmsg, as seen on reader's ttyPCI0."""
    raw(reader)
    reader.run(f'rm -f /tmp/con.*; (timeout 15 cat {TTY} >/tmp/con.out &); '
               'usleep 500000')
    for line in lines:
        writer.run(f'echo "{level}{line}" >/dev/kmsg')
    return reader.sh_bytes('sleep 2; cat /tmp/con.out')[1]


@h.case('tty-console-param')
def _(t):
    """insmod pcinet console=1: kernel messages (at console loglevel) reach
    the peer's ttyPCI0, one "\\r\\n"-terminated line each."""
    fresh(t)
    unload(t.a)
    h.wait_carrier(t.b, 0, 5)	# b saw a go: the link b waits for is new
    load(t.a, 'console=1')
    link_up(t)
    cons = t.a.run('cat /proc/consoles')
    h.expect(re.search(r'^ttyPCI0 .*\(.*E.*\)', cons, re.M),
             'ttyPCI0 not an enabled console:\n' + cons)
    got = console_capture(t.b, t.a, ['pcinet-con-1', 'pcinet-con-2'])
    got_quiet = console_capture(t.b, t.a, ['pcinet-con-quiet'], level='<7>')
    for m in ('pcinet-con-1', 'pcinet-con-2'):
        h.expect(re.search(rb'\] ' + m.encode() + rb'\r\n', got),
                 f'{m} missing on b: {got!r}')
    h.expect(b'pcinet-con-quiet' not in got_quiet,
             'a message below the console loglevel was printed')
    unload(t.a)
    h.expect('ttyPCI' not in t.a.run('cat /proc/consoles'),
             'console still registered after rmmod')


@h.case('tty-console-cmdline')
def _(t):
    """console=ttyPCI0 on the kernel command line enables the console when
    the module registers it, long after boot."""
    t.mark_dirty('a was booted with console=ttyPCI0')
    t.a.append = 'console=ttyPCI0'
    t.a.restart()
    unload(t.b)
    for vm in (t.a, t.b):
        load(vm)
    link_up(t)
    cons = t.a.run('cat /proc/consoles')
    h.expect(re.search(r'^ttyPCI0 .*\(.*E.*\)', cons, re.M),
             'ttyPCI0 not an enabled console:\n' + cons)
    got = console_capture(t.b, t.a, ['pcinet-cmdline-console'])
    h.expect(b'] pcinet-cmdline-console\r\n' in got,
             f'console line missing on b: {got!r}')


@h.case('tty-console-and-writes')
def _(t):
    """Console output and a cooked-mode writer (OPOST/ONLCR, which counts
    on write_room()) share the ring: with the reader stopped a while so the
    ring fills, every data byte still arrives, console lines between."""
    fresh(t, 'console=1')
    t.a.run(f'stty -F {TTY} sane clocal; i=0; while [ $i -lt 4000 ]; do '
            'echo "data line $i abcdefghijklmnopqrstuvwxyz0123456789"; '
            'i=$((i+1)); done >/tmp/data.txt', timeout=120)
    data = t.a.sh_bytes('cat /tmp/data.txt')[1]
    want = data.replace(b'\n', b'\r\n')
    raw(t.b)
    # cat, not head: it writes what it reads at once, so killing it at the
    # end loses nothing (head would lose its stdio buffer)
    t.b.run(f'rm -f /tmp/rx.*; timeout 120 cat {TTY} >/tmp/rx.bin & '
            f'echo $! >/tmp/rx.pid')
    t.a.run('(i=0; while [ $i -lt 200 ]; do echo "<2>CONMARK-$i" '
            '>/dev/kmsg; i=$((i+1)); done; echo 0 >/tmp/k.rc) '
            '>/dev/null 2>&1 &')
    start_writer(t.a, '/tmp/data.txt', secs=120)
    t.b.run('usleep 200000; kill -STOP $(cat /tmp/rx.pid); sleep 2; '
            'kill -CONT $(cat /tmp/rx.pid)')
    rc = wait_file(t.a, '/tmp/tx.rc', 60)
    h.expect(rc == '0', f'writer: status {rc}')
    h.expect(wait_file(t.a, '/tmp/k.rc', 60) == '0', 'kmsg writer failed')
    t.b.run('sleep 2; kill $(cat /tmp/rx.pid)')
    got = t.b.sh_bytes('cat /tmp/rx.bin', timeout=120)[1]
    con = re.findall(rb'\[ *[0-9.]+\] CONMARK-(\d+)\r\n', got)
    data_got = re.sub(rb'\[ *[0-9.]+\] CONMARK-\d+\r\n', b'', got)
    h.info(f'{len(con)} of 200 console lines arrived with the data')
    h.expect(data_got == want, f'data stream damaged (without {len(con)} '
             'console lines): ' + first_diff(data_got, want))


@h.case('tty-tcdrain-modem')
def _(t):
    """tcdrain() waits until the peer took every byte, TIOCOUTQ counts
    them; TIOCMGET shows our DTR/RTS and the peer's as CD/DSR/CTS; with
    the peer's end closed nothing is pending and tcdrain() returns."""
    h.need_tool('pcinet-ttyperf')
    fresh(t)
    for vm in (t.a, t.b):
        raw(vm)
    perf = 'pcinet-ttyperf'
    out = t.a.run(f'{perf} modem {TTY}')
    h.expect('dtr=1 rts=1 cd=0 dsr=0 cts=0' in out,
             f'a, b closed: modem lines {out}')
    # b holds its end open and starts reading after 6 s; a writes until
    # b's tty buffers and the ring are full, then drains.
    t.b.run(f'rm -f /tmp/dr.*; (exec 3<{TTY}; sleep 6; timeout 30 cat <&3 '
            f'>/tmp/dr.bin) >/dev/null 2>&1 & usleep 500000')
    out = t.a.run(f'{perf} modem {TTY}')
    h.expect('dtr=1 rts=1 cd=1 dsr=1 cts=1' in out,
             f'a, b open: modem lines {out}')
    out = t.a.run(f'{perf} drain {TTY} {4 * MIB}', timeout=60)
    m = re.search(r'wrote=(\d+) outq_before=(-?\d+) drain_secs=([\d.]+) '
                  r'outq_after=(-?\d+) modem=(\w+)', out)
    h.expect(m, f'pcinet-ttyperf drain: {out}')
    wrote, before, secs, after = (int(m[1]), int(m[2]), float(m[3]),
                                  int(m[4]))
    h.info(f'wrote {wrote} bytes without blocking, {before} queued; '
           f'tcdrain returned after {secs:.2f} s')
    h.expect(before > 0 and after == 0 and secs >= 1.0,
             f'tcdrain did not wait for the reader: {out}')
    t.b.wait_until(f'[ "$(wc -c </tmp/dr.bin)" -ge {wrote} ]', 10,
                   must=False)
    got = t.b.run('wc -c </tmp/dr.bin')
    h.expect(int(got) == wrote, f'b read {got} of {wrote} bytes')
    t.b.run('killall cat >/dev/null 2>&1; true')
    t.a.wait_until(f'{perf} modem {TTY} | grep -q "cd=0"', 5, must=False)
    out = t.a.run(f'{perf} modem {TTY}')
    h.expect('dtr=1 rts=1 cd=0 dsr=0 cts=0' in out,
             f'a, b closed again: modem lines {out}')
    out = t.a.run(f'{perf} drain {TTY} 1000', timeout=30)
    h.expect(re.search(r'outq_before=0 drain_secs=0\.\d+ outq_after=0', out),
             f'b closed, tcdrain: {out}')


def tty_rtt(vm, n):
    """p50, p99 and max echo round trip in ms over n 1-byte echoes."""
    out = vm.run(f'pcinet-ttyperf rtt {TTY} {n}', timeout=n * 5 + 60)
    m = re.search(r'p50_us=([\d.]+) p99_us=([\d.]+) .*max_us=([\d.]+)', out)
    h.expect(m, f'{vm.name}: echo round trips failed: {out}')
    return tuple(float(x) / 1000 for x in m.groups())


def iperf_mbps(vm, path):
    """Receiver-side Mbit/s from an iperf3 -J log in the guest."""
    res = h.iperf3_parse(vm.run(f'cat {path}'), vm.name)
    try:
        return h.iperf3_mbps(res)
    except KeyError as e:
        raise h.CaseFailure(f'{vm.name}: iperf3 result without {e}')


@h.case('tty-under-iperf3')
def _(t):
    """A saturating iperf3 on pcinet0 does not starve the tty: every echo
    comes back within 2 s (p50/p99/max reported), and iperf3 completes
    with data moved while the tty echoes.  Speeds (iperf3 alone against
    shared) are printed, not asserted: they belong in make bench."""
    h.need_tool('pcinet-ttyperf')
    fresh(t)
    ips = {'a': '10.78.0.1', 'b': '10.78.0.2'}
    for vm in (t.a, t.b):
        vm.run(f'ip addr flush dev pcinet0 && ip addr add {ips[vm.name]}/24 '
               f'dev pcinet0 && ip link set pcinet0 up')
        raw(vm)
    t.a.wait_until(f'ping -c 1 -W 1 {ips["b"]}', 60, what='a ping of b')
    secs = 6
    t.b.run('iperf3 -s -D >/dev/null 2>&1; usleep 300000; '
            f'(pcinet-ttyperf echo {TTY} 120 >/dev/null 2>&1 &)')
    quiet = tty_rtt(t.a, 100)

    def iperf_run(tag, during):
        # The same shape with and without the echoes: iperf3 in the
        # background, the agent busy with `during` meanwhile.
        t.a.run(f'(iperf3 -J -c {ips["b"]} -t {secs} >/tmp/{tag}.json 2>&1 &)'
                '; sleep 1')
        res = during()
        t.a.wait_until(f'grep -q "}}$" /tmp/{tag}.json && ! pidof iperf3',
                       secs + 10, what='iperf3 finishing',
                       show=f'tail -c 500 /tmp/{tag}.json')
        return iperf_mbps(t.a, f'/tmp/{tag}.json'), res

    alone, _ = iperf_run('ip0', lambda: t.a.run('sleep 2'))
    shared, busy = iperf_run('ip1', lambda: tty_rtt(t.a, 200))
    t.a.run('killall iperf3 >/dev/null 2>&1; true')
    t.b.run('killall iperf3 pcinet-ttyperf >/dev/null 2>&1; true')
    h.info(f'echo idle: p50 {quiet[0]:.2f} ms, p99 {quiet[1]:.2f} ms, '
           f'max {quiet[2]:.2f} ms')
    h.info(f'echo under iperf3: p50 {busy[0]:.2f} ms, p99 {busy[1]:.2f} ms, '
           f'max {busy[2]:.2f} ms')
    h.info(f'iperf3 a->b: {alone:.0f} Mbit/s alone, {shared:.0f} Mbit/s '
           f'with the echoes ({shared / alone:.2f}x)')
    h.expect(busy[2] <= 2000, f'an echo took {busy[2]:.0f} ms under iperf3')
    h.expect(shared > 0, 'iperf3 moved nothing while the tty echoed')


@h.case('tty-throughput')
def _(t):
    """Bytes per second each way in raw mode (printed, not asserted)."""
    fresh(t)
    for vm in (t.a, t.b):
        raw(vm)
    n = h.scaled(32) * MIB
    for src in (t.a, t.b):
        dst = t[PEER[src.name]]
        make_file(src, 'tx.32', n)
        # The clock starts at the first byte, on the reader's machine.  One
        # open for both reads: a close discards what the tty has buffered.
        dst.run(f'rm -f /tmp/tp.*; (exec 3<{TTY}; timeout 300 dd '
                f'of=/dev/null bs=1 count=1 <&3; read t0 _ </proc/uptime; '
                f'timeout 300 dd of=/dev/null bs=65536 count={n // 65536} '
                f'iflag=fullblock <&3; read t1 _ </proc/uptime; '
                f'echo $t0 $t1 >/tmp/tp.t) >/dev/null 2>&1 & usleep 300000')
        src.run(f'{{ printf x; cat /tmp/tx.32; }} | timeout 300 cat >{TTY}',
                timeout=360)
        stamps = wait_file(dst, '/tmp/tp.t', 60)
        h.expect(stamps is not None, f'{dst.name} did not receive {n} bytes')
        t0, t1 = (float(x) for x in stamps.split())
        h.info(f'{src.name}->{dst.name}: {n / (t1 - t0) / 1e6:.1f} MB/s')


if __name__ == '__main__':
    raise SystemExit(h.main())
