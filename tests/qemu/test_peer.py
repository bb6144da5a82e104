#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Interop: the kernel driver in a QEMU guest against pcinet-peer on the host.

    +------- a (QEMU) --------+   pcinet-fabric   +---- host, netns pnq-<pid> ----+
    | pcinet.ko               |<== ivshmem ======>| tools/pcinet-peer/pcinet-peer |
    | pcinet0 10.79.0.1       |                   | TAP pnq0 10.79.0.2            |
    | /dev/ttyPCI0            |                   | pty (symlink peer.tty)        |
    +-------------------------+                   +-------------------------------+

One guest, one fabric; the guest attaches first (side 0), pcinet-peer
joins as the second ivshmem client (side 1).  Its TAP lives in a network
namespace the test creates and removes, so the host's own network never
sees the addresses.  pcinet-peer is written from docs/design.md, not from
the driver: these cases are the proof that the document is enough.

Each case asserts what a user of either side relies on: carrier and
link state follow the other side, bytes cross intact both ways, and the
link comes back after the peer is killed, frozen or the driver reloaded.
"""

import hashlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402
from peer_lib import HOST_IP, Peer  # noqa: E402

GUEST_IP = '10.79.0.1'
TTY = '/dev/ttyPCI0'
NETNS_ICMP = Path(__file__).resolve().parent / 'netns_icmp.py'
# The largest MTU a TAP takes: tun limits a whole frame, Ethernet header
# included, to 65535 bytes (its MAX_MTU), so max_mtu = 65535 - 14.  A
# pcinet0 goes to 65535, but a link to pcinet-peer runs at 65521 at most.
TAP_MTU_MAX = 65521

# One machine on a link of its own: the fabric's second slot is the peer's.
h.configure(machines=('a',), links=[('a',)], extra_modules=[h.PCINET_KO])


def with_peer(func):
    """Run func(t, peer) with the guest's pcinet0 and a running peer, both
    configured and the link up; the peer and its netns go afterwards."""
    def case(t):
        peer = Peer(t)
        try:
            h.net_up(t.a, GUEST_IP)
            peer.start()
            peer.wait('up', 15)
            h.wait_carrier(t.a, 1, 15)
            func(t, peer)
        finally:
            peer.close()
    case.__doc__ = func.__doc__
    return case


def ping_both(t, peer, size=56):
    ok, out = h.ping(t.a, HOST_IP, count=2, size=size)
    if not ok:		# the first packet may race ARP on a slow guest
        ok, out = h.ping(t.a, HOST_IP, count=2, size=size)
    h.expect(ok, f'guest -> peer, {size} bytes:\n{out}')
    out = peer.run('busybox', 'ping', '-c', '2', '-W', '5', '-s', size,
                   GUEST_IP, check=False)
    h.expect('2 packets received' in out, f'peer -> guest, {size} bytes:\n'
             + out)


@h.case('peer-link')
@with_peer
def _(t, peer):
    """Link up on both (guest carrier, peer status), ping both ways."""
    ping_both(t, peer)
    h.info('peer status: link=%s gen=%s peer_gen=%s' % (
        peer.state().get('link'), peer.state().get('gen'),
        peer.state().get('peer_gen')))


@h.case('peer-identity')
@with_peer
def _(t, peer):
    """Each side shows the other's identity: the guest pcinet-peer's
    default name on the PCI device and as pcinet0's phys_port_name, the
    peer the guest's host name in its status file."""
    out = t.a.run('cat /sys/class/net/pcinet0/device/peer_name '
                  '/sys/class/net/pcinet0/device/peer_slot '
                  '/sys/class/net/pcinet0/phys_port_name').split()
    h.expect(out == ['pcinet-peer', '0', 'pcinet-peer'],
             f'guest: peer_name, peer_slot, phys_port_name = {out}')
    deadline = time.monotonic() + 5
    while peer.state().get('peer_name') != 'a' and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    st = peer.state()
    h.expect(st.get('peer_name') == 'a' and st.get('peer_slot') == '0',
             f'pcinet-peer: peer_name {st.get("peer_name")!r}, '
             f'peer_slot {st.get("peer_slot")!r}, expected a, 0')


def sniff_start(peer):
    """netns_icmp.py sniff on the peer's TAP, running once it said ready."""
    p = subprocess.Popen(['ip', 'netns', 'exec', peer.ns, sys.executable,
                          str(NETNS_ICMP), 'sniff', 'pnq0'],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    line = p.stdout.readline().strip()
    if line != 'ready':
        p.kill()
        raise h.CaseFailure(f'netns_icmp.py sniff: {line!r} '
                            + p.communicate()[0])
    return p


def sniff_stop(p):
    """The frames a sniff saw: (dir, ip total length, df, mf, offset)."""
    time.sleep(0.3)		# the last frames of a ping that just returned
    p.terminate()
    out = p.communicate(timeout=10)[0]
    return [(f[0], *map(int, f[1:])) for f in
            (line.split() for line in out.splitlines()) if len(f) == 5]


@h.case('peer-mtu')
@with_peer
def _(t, peer):
    """MTU 1500, 9000 and 65521 (TAP_MTU_MAX: a TAP cannot take 65535) on
    both ends.  At each, the largest ping the MTU allows (MTU - 28 payload
    bytes) crosses in one frame with DF, both ways: the guest's busybox
    ping sets DF on a packet that fits (PMTUDISC_WANT), the peer's frame
    log shows it arrive whole; the host sends with IP_PMTUDISC_DO
    (netns_icmp.py) and gets the same bytes back.  One byte more is what
    each sender must make of it: the guest's ping fragments it (WANT:
    fragments of at most the MTU, no DF, reassembled and answered), the
    host's DF ping is refused at the sender (EMSGSIZE): nothing larger
    than the MTU ever goes on the link."""
    sniff = None
    seen = []
    try:
        for mtu in (1500, 9000, TAP_MTU_MAX):
            t.a.run(f'ip link set pcinet0 mtu {mtu}')
            peer.run('ip', 'link', 'set', 'pnq0', 'mtu', mtu)
            top = mtu - 28
            sniff = sniff_start(peer)
            for size in (top, top + 1):
                ok, out = h.ping(t.a, HOST_IP, count=1, size=size)
                if not ok:	# the first packet may race ARP
                    ok, out = h.ping(t.a, HOST_IP, count=1, size=size)
                h.expect(ok, f'MTU {mtu}: guest -> peer, {size} bytes:\n'
                         + out)
            frames = sniff_stop(sniff)
            sniff = None
            got = [f for f in frames if f[0] == 'in']
            h.expect(all(f[1] <= mtu for f in got),
                     f'MTU {mtu}: a frame larger than the MTU came: {got}')
            h.expect(('in', mtu, 1, 0, 0) in got,
                     f'MTU {mtu}: no whole {top}-byte request with DF: {got}')
            h.expect(any(f[3] == 1 and f[4] == 0 and f[2] == 0 for f in got)
                     and any(f[3] == 0 and f[4] + f[1] - 20 == top + 9
                             for f in got),
                     f'MTU {mtu}: the {top + 1}-byte ping was not sent as '
                     f'fragments up to its last byte: {got}')
            for size, want in ((top, f'reply {top}'), (top + 1, 'emsgsize')):
                res = peer.run(sys.executable, NETNS_ICMP, 'ping', GUEST_IP,
                               size).strip()
                h.expect(res == want, f'MTU {mtu}: peer -> guest, {size} '
                         f'bytes with DF: {res}, want {want}')
            seen.append(f'{mtu}: {top} whole, {top + 1} in '
                        f'{sum(1 for f in got if f[3] or f[4])} fragments')
        h.info('MTU ' + '; '.join(seen) + ' (guest -> peer); peer -> guest '
               'with DF: whole, EMSGSIZE')
    finally:
        if sniff:
            sniff.kill()
            sniff.wait()
        t.a.run('ip link set pcinet0 mtu 1500')
        peer.run('ip', 'link', 'set', 'pnq0', 'mtu', 1500, check=False)


def tcp_to_peer(t, peer, mib=16):
    """mib MiB of random data guest -> peer over TCP, sha256 compared;
    the seconds it took."""
    n = mib << 20
    tx = t.a.run(f'head -c {n} /dev/urandom >/tmp/tx; sha256sum </tmp/tx',
                 timeout=60).split()[0]
    rx = subprocess.Popen(['ip', 'netns', 'exec', peer.ns, 'sh', '-c',
                           'socat -u TCP-LISTEN:5001,reuseaddr - | sha256sum'],
                          stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        t.a.wait_until(f'socat -u FILE:/tmp/tx TCP:{HOST_IP}:5001 '
                       '2>/tmp/socat.err', 10, interval=0.2,
                       what=f'sending {mib} MiB to the peer',
                       show='cat /tmp/socat.err')
        got = rx.communicate(timeout=120)[0].split()[0]
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    h.expect(got == tx, f'guest->peer: sha256 {got} != {tx}')
    return time.monotonic() - t0


def tcp_from_peer(t, peer, mib=16):
    """mib MiB of random data peer -> guest over TCP, sha256 compared;
    the seconds it took."""
    blob = t.workdir / 'blob'
    blob.write_bytes(os.urandom(mib << 20))
    want = hashlib.sha256(blob.read_bytes()).hexdigest()
    t.a.run('rm -f /tmp/rx.sha; (socat -u TCP-LISTEN:5002,reuseaddr STDOUT | '
            'sha256sum >/tmp/rx.sha.part && mv /tmp/rx.sha.part /tmp/rx.sha) '
            '>/dev/null 2>&1 &')
    t1 = time.monotonic()
    peer.run('socat', '-u', f'FILE:{blob}',
             f'TCP:{GUEST_IP}:5002,retry=50,interval=0.2', timeout=180)
    t.a.wait_until('[ -e /tmp/rx.sha ]', 120, what='the guest receiving')
    dt = time.monotonic() - t1
    got = t.a.run('cat /tmp/rx.sha').split()[0]
    h.expect(got == want, f'peer->guest: sha256 {got} != {want}')
    blob.unlink()
    return dt


@h.case('peer-tcp')
@with_peer
def _(t, peer):
    """16 MiB over TCP each way (TSO from the driver, TSO from the TAP),
    sha256 compared."""
    dt = tcp_to_peer(t, peer, 16)
    dt2 = tcp_from_peer(t, peer, 16)
    h.info('16 MiB guest->peer %.1f MiB/s, peer->guest %.1f MiB/s (TCG)'
           % (16 / dt, 16 / dt2))


def feed(proc, mib, secs):
    """Write mib MiB of random data into proc's stdin from a thread, for at
    most secs seconds (then proc is killed); the data's sha256."""
    sha = hashlib.sha256()

    def run():
        try:
            for _ in range(mib):
                chunk = os.urandom(1 << 20)
                sha.update(chunk)
                proc.stdin.write(chunk)
            proc.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(secs)
    if th.is_alive():
        proc.kill()
        th.join(10)
        raise h.CaseFailure(f'{mib} MiB not sent in {secs}s')
    return sha.hexdigest()


@h.case('peer-bulk-256M')
@with_peer
def _(t, peer):
    """256 MiB of random data each way over TCP (socat), sha256 taken at
    both ends while the bytes stream (no file of that size anywhere; 32
    MiB on the debug kernel)."""
    mib = h.scaled(256)
    n = mib << 20
    # guest -> peer: urandom | tee (a fifo to sha256sum) | socat
    rx = subprocess.Popen(['ip', 'netns', 'exec', peer.ns, 'sh', '-c',
                           'socat -u TCP-LISTEN:5001,reuseaddr STDOUT | '
                           'sha256sum'], stdout=subprocess.PIPE, text=True)
    try:
        peer.listening(5001)
        t0 = time.monotonic()
        tx = t.a.run('rm -f /tmp/bulk.*; mkfifo /tmp/bulk.fifo; '
                     '(sha256sum </tmp/bulk.fifo >/tmp/bulk.sha) & s=$!; '
                     f'head -c {n} /dev/urandom | tee /tmp/bulk.fifo | '
                     f'socat -u STDIN TCP:{HOST_IP}:5001; wait $s; '
                     'cat /tmp/bulk.sha', timeout=900).split()[0]
        got = rx.communicate(timeout=120)[0].split()[0]
        dt = time.monotonic() - t0
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    h.expect(got == tx, f'guest->peer {mib} MiB: sha256 {got} != {tx}')
    # peer -> guest: the test's random bytes, hashed as they go
    t.a.run('rm -f /tmp/bulk.*; (socat -u TCP-LISTEN:5002,reuseaddr STDOUT '
            '| sha256sum >/tmp/bulk.part && mv /tmp/bulk.part /tmp/bulk.sha) '
            '>/dev/null 2>&1 &')
    t1 = time.monotonic()
    tx = subprocess.Popen(['ip', 'netns', 'exec', peer.ns, 'socat', '-u',
                           'STDIN', f'TCP:{GUEST_IP}:5002,retry=50,'
                           'interval=0.2'], stdin=subprocess.PIPE)
    try:
        want = feed(tx, mib, 900)
        h.expect(tx.wait(60) == 0, f'peer->guest: socat exit {tx.returncode}')
    finally:
        if tx.poll() is None:
            tx.kill()
            tx.wait()
    t.a.wait_until('[ -e /tmp/bulk.sha ]', 120, what='the guest receiving')
    dt2 = time.monotonic() - t1
    got = t.a.run('cat /tmp/bulk.sha').split()[0]
    h.expect(got == want, f'peer->guest {mib} MiB: sha256 {got} != {want}')
    h.info('%d MiB guest->peer %.0fs (%.1f MiB/s), peer->guest %.0fs '
           '(%.1f MiB/s), TCG' % (mib, dt, mib / dt, dt2, mib / dt2))


@h.case('peer-iperf3')
@with_peer
def _(t, peer):
    """iperf3 TCP, 3 s guest -> peer and 3 s peer -> guest (-R), the
    server in the peer's namespace: both complete without an error, with
    bytes sent and received > 0 (Mbit/s printed, not asserted)."""
    rates = []
    for args, what in (('', 'guest->peer'), ('-R', 'peer->guest')):
        srv = subprocess.Popen(['ip', 'netns', 'exec', peer.ns, 'iperf3',
                                '-s', '-1', '-J'], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        try:
            peer.listening(5201)
            res = h.iperf3(t.a, HOST_IP, args, secs=3)
            out = srv.communicate(timeout=30)[0]
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
        h.iperf3_parse(out, f'{what}: the peer\'s server')
        end = res['end']
        h.expect(srv.returncode == 0 and end['sum_sent']['bytes'] > 0 and
                 end['sum_received']['bytes'] > 0,
                 f'{what}: server exit {srv.returncode}, sent '
                 f'{end["sum_sent"]["bytes"]}, received '
                 f'{end["sum_received"]["bytes"]} bytes')
        rates.append(f'{what} {h.iperf3_mbps(res):.0f}')
    h.info('iperf3 Mbit/s (TCG): ' + ', '.join(rates))


def pty_open(peer):
    """The peer's pty (its tty channel), non-blocking."""
    return os.open(peer.tty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)


def pty_read(fd, n, secs):
    """Up to n bytes from the pty within secs seconds."""
    got = bytearray()
    deadline = time.monotonic() + secs
    while len(got) < n and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                got += os.read(fd, min(65536, n - len(got)))
            except BlockingIOError:
                pass
    return bytes(got)


def pty_drain(fd, quiet=0.3):
    """Discard what the pty holds, until it is quiet for `quiet` s."""
    while pty_read(fd, 1 << 20, quiet):
        pass


def pty_write(fd, data, secs):
    """Write data to the pty for at most secs seconds; bytes taken."""
    off = 0
    deadline = time.monotonic() + secs
    while off < len(data) and time.monotonic() < deadline:
        if select.select([], [fd], [], 0.1)[1]:
            try:
                off += os.write(fd, data[off:off + 4096])
            except BlockingIOError:
                pass
    return off


TTY_FLOW = 1 << 20	# far more than the ring, the pty and the tty hold
TTY_HEAD = 65536	# read before the reader stops


@h.case('peer-tty-flow')
@with_peer
def _(t, peer):
    """Flow control across the interop link, 1 MiB each way: the reader
    stops after 64 KiB for 3 s (guest -> peer: the test stops reading the
    peer's pty; peer -> guest: the guest's head is SIGSTOPped).  The writer
    blocks: the guest's cat does not finish and the peer takes nothing
    more from the ring / the pty takes no more of the test's writes, and
    the reader's count stands still; once reading resumes, every byte
    arrives in order (sha256) and the writer finishes."""
    t.a.run(f'stty -F {TTY} raw -echo clocal')
    fd = pty_open(peer)
    try:
        pty_drain(fd)
        # guest -> peer
        want = t.a.run(f'head -c {TTY_FLOW} /dev/urandom >/tmp/flow.tx; '
                       'sha256sum </tmp/flow.tx').split()[0]
        t.a.run(f'rm -f /tmp/flow.rc; (timeout 120 cat /tmp/flow.tx >{TTY}; '
                'echo $? >/tmp/flow.rc) >/dev/null 2>&1 &')
        got = pty_read(fd, TTY_HEAD, 30)
        h.expect(len(got) == TTY_HEAD, f'guest->peer: {len(got)} bytes '
                 f'of the first {TTY_HEAD} in 30 s')
        time.sleep(1.5)		# the status file is rewritten every second
        c1 = peer.counters().get('tty_rx_bytes')
        time.sleep(2)
        c2 = peer.counters().get('tty_rx_bytes')
        rc = t.a.run('cat /tmp/flow.rc 2>/dev/null || echo running').strip()
        h.expect(rc == 'running', f'guest->peer: the writer finished ({rc}) '
                 'while nobody read the pty')
        h.expect(c1 == c2 and int(c1) < TTY_FLOW,
                 f'guest->peer: the peer took {c1} -> {c2} bytes from the '
                 'ring while its pty was not read')
        got += pty_read(fd, TTY_FLOW - len(got), 120)
        h.expect(len(got) == TTY_FLOW and
                 hashlib.sha256(got).hexdigest() == want,
                 f'guest->peer: {len(got)} of {TTY_FLOW} bytes after the '
                 'reader resumed' + (', sha256 differs'
                                     if len(got) == TTY_FLOW else ''))
        t.a.wait_until('[ -e /tmp/flow.rc ]', 30, what='the writer finishing')
        rc = t.a.run('cat /tmp/flow.rc').strip()
        h.expect(rc == '0', f'guest->peer: writer status {rc}')
        # peer -> guest
        data = os.urandom(TTY_FLOW)
        t.a.run(f'rm -f /tmp/flow.*; (timeout 120 head -c {TTY_FLOW} {TTY} '
                '>/tmp/flow.rx & echo $! >/tmp/flow.pid; wait $!; '
                'echo $? >/tmp/flow.rc) >/dev/null 2>&1 &')
        t.a.wait_until('[ -s /tmp/flow.pid ]', 10, what='the reader starting')
        off = pty_write(fd, data[:TTY_HEAD], 30)
        h.expect(off == TTY_HEAD, f'peer->guest: the pty took {off} of the '
                 f'first {TTY_HEAD} bytes in 30 s')
        # busybox head writes through stdio: up to a buffer (4 KiB) late
        t.a.wait_until(f'[ "$(wc -c </tmp/flow.rx)" -ge {TTY_HEAD // 2} ]',
                       30, what='the guest reading the first bytes',
                       show='wc -c </tmp/flow.rx')
        t.a.run('kill -STOP $(cat /tmp/flow.pid)')
        off += pty_write(fd, data[off:], 3)
        more = pty_write(fd, data[off:], 2)
        n1 = int(t.a.run('wc -c </tmp/flow.rx'))
        off += more
        h.expect(more == 0 and off < TTY_FLOW,
                 f'peer->guest: the pty took {more} more bytes after 3 s '
                 f'of a stopped reader ({off} of {TTY_FLOW} in all)')
        n2 = int(t.a.run('wc -c </tmp/flow.rx'))
        h.expect(n1 == n2, f'the stopped reader: {n1} -> {n2} bytes')
        held = off
        t.a.run('kill -CONT $(cat /tmp/flow.pid)')
        off += pty_write(fd, data[off:], 120)
        h.expect(off == TTY_FLOW, f'peer->guest: {off} of {TTY_FLOW} '
                 'bytes written in 120 s after the reader resumed')
        t.a.wait_until('[ -e /tmp/flow.rc ]', 60, what='the guest reader')
        out = t.a.run('cat /tmp/flow.rc; wc -c </tmp/flow.rx; '
                      'sha256sum </tmp/flow.rx').split()
        h.expect(out[0] == '0' and out[2] ==
                 hashlib.sha256(data).hexdigest(),
                 f'peer->guest: reader status {out[0]}, {out[1]} of '
                 f'{TTY_FLOW} bytes, sha256 differs')
        h.info(f'writers held at {c1} (guest->peer) and {held} '
               f'(peer->guest) of {TTY_FLOW} bytes while the reader stopped; '
               f'tty frame errors at the peer: '
               f'{peer.counters().get("tty_frame_errors")}')
    finally:
        os.close(fd)


@h.case('peer-tty-all-bytes')
@with_peer
def _(t, peer):
    """Every byte value 0..255 (x4) both ways between /dev/ttyPCI0 and the
    peer's pty, raw on both ends."""
    tty_all_bytes(t, peer)


def tty_all_bytes(t, peer):
    """Every byte value 0..255 (x4) guest -> peer, then peer -> guest,
    compared; what the pty held before is discarded."""
    data = bytes(range(256)) * 4
    want = hashlib.sha256(data).hexdigest()
    t.a.run(f'stty -F {TTY} raw -echo clocal')
    # guest -> peer
    fd = pty_open(peer)
    try:
        pty_drain(fd)
        t.a.run('i=0; s=; while [ $i -lt 256 ]; do s="$s\\\\$(printf %o $i)";'
                ' i=$((i+1)); done; printf "$s$s$s$s" >/tmp/bytes')
        t.a.run(f'timeout 30 cat /tmp/bytes >{TTY}', timeout=60)
        got = b''
        deadline = time.monotonic() + 15
        while len(got) < len(data) and time.monotonic() < deadline:
            try:
                got += os.read(fd, 4096)
            except BlockingIOError:
                time.sleep(0.02)
        h.expect(got == data, f'guest->peer: got {len(got)} bytes, '
                 f'{"equal" if got == data else "different"}')
        # peer -> guest
        t.a.run(f'rm -f /tmp/rx.bin; (timeout 30 head -c {len(data)} {TTY} '
                '>/tmp/rx.bin.part; mv /tmp/rx.bin.part /tmp/rx.bin) '
                '>/dev/null 2>&1 &')
        time.sleep(0.5)
        off = 0
        while off < len(data):
            try:
                off += os.write(fd, data[off:])
            except BlockingIOError:
                time.sleep(0.02)
        t.a.wait_until('[ -e /tmp/rx.bin ]', 30, what='the guest reading')
        got = t.a.run('sha256sum </tmp/rx.bin').split()[0]
        h.expect(got == want, f'peer->guest: sha256 {got} != {want}')
    finally:
        os.close(fd)


@h.case('peer-kill9')
@with_peer
def _(t, peer):
    """kill -9 the peer: the guest's carrier goes (attach epoch); a new peer:
    back, and traffic passes."""
    peer.kill()
    took = h.wait_carrier(t.a, 0, 5)
    peer.start()
    peer.wait('up', 15)
    took2 = h.wait_carrier(t.a, 1, 15)
    ping_both(t, peer)
    h.info('carrier off %.2fs after kill -9, on %.2fs after restart'
           % (took, took2))


@h.case('peer-sigstop')
@with_peer
def _(t, peer):
    """SIGSTOP the peer: the guest sees it gone (heartbeat silence); SIGCONT:
    back, traffic passes."""
    peer.signal(signal.SIGSTOP)
    try:
        took = h.wait_carrier(t.a, 0, 5)
    finally:
        peer.signal(signal.SIGCONT)
    peer.wait('up', 15)
    took2 = h.wait_carrier(t.a, 1, 15)
    ping_both(t, peer)
    h.info('guest carrier off %.2fs after SIGSTOP, on %.2fs after SIGCONT'
           % (took, took2))


@h.case('peer-guest-reload')
@with_peer
def _(t, peer):
    """rmmod in the guest: the peer goes down (gen 0); insmod: up again."""
    h.unload(t.a)
    peer.wait('down', 5)
    h.net_up(t.a, GUEST_IP)
    peer.wait('up', 15)
    h.wait_carrier(t.a, 1, 15)
    ping_both(t, peer)


HOSTILE_SECS = 10
HEAL_LIMIT = 10.0


def flood_start(t, peer, secs):
    """Traffic through the window for secs seconds: TCP guest -> peer
    (socat from /dev/zero, reconnecting), pings peer -> guest; the host
    processes (stop them with flood_stop())."""
    flood = [subprocess.Popen(
        ['ip', 'netns', 'exec', peer.ns, 'socat', '-u',
         'TCP-LISTEN:5003,reuseaddr,fork', 'OPEN:/dev/null'],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    flood.append(subprocess.Popen(
        ['ip', 'netns', 'exec', peer.ns,
         *(['ping'] if shutil.which('ping') else ['busybox', 'ping']),
         '-q', '-c', str(secs * 20), '-i', '0.05', '-W', '1', GUEST_IP],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    t.a.run('(while :; do socat -u /dev/zero '
            f'TCP:{HOST_IP}:5003,connect-timeout=2; usleep 200000; '
            'done) >/dev/null 2>&1 & echo $! >/tmp/flood.pid')
    return flood


def flood_stop(t, flood):
    """Stop flood_start()'s senders: the guest's (unless t is None: a
    case's clean-up, the guest may be gone) and this machine's."""
    if t is not None:
        t.a.run('kill $(cat /tmp/flood.pid) 2>/dev/null; '
                'killall socat >/dev/null 2>&1; true')
    for p in flood:
        p.kill()
        p.wait()
    flood.clear()


def works_then_unloads(t, peer):
    """After a hostile peer: pings both ways, 16 MiB guest->peer intact,
    the peer still running, and nothing the garbage did keeps the guest's
    module busy (it unloads; the peer sees the guest go)."""
    ping_both(t, peer)
    dt = tcp_to_peer(t, peer, 16)
    h.info('16 MiB guest->peer intact afterwards (%.1f MiB/s)' % (16 / dt))
    peer.expect_alive()
    h.unload(t.a)
    peer.wait('down', 5)


def hostile_window(t, peer, secs):
    """SIGUSR1: the peer's hostile window (marked in the guest's kernel
    log), until the peer says it is over and has restarted its link."""
    peer.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while peer.state().get('hostile') != '1':
        h.expect(time.monotonic() < deadline,
                 'pcinet-peer did not turn hostile on SIGUSR1:\n'
                 + peer.log_tail())
        time.sleep(0.05)
    t.a.run('echo "pcinet test: peer hostile from here" >/dev/kmsg')
    deadline = time.monotonic() + secs + 10
    while peer.state().get('hostile') != '0':
        h.expect(time.monotonic() < deadline and peer.proc.poll() is None,
                 'the hostile window did not end:\n' + peer.log_tail())
        time.sleep(0.05)


def heal(t, peer):
    """After a hostile window: carrier and a ping through within
    HEAL_LIMIT s; the seconds it took."""
    t0 = time.monotonic()
    h.wait_carrier(t.a, 1, HEAL_LIMIT)
    ok, out = h.ping(t.a, HOST_IP, count=1, wait=1)
    while not ok and time.monotonic() - t0 < HEAL_LIMIT:
        ok, out = h.ping(t.a, HOST_IP, count=1, wait=1)
    healed = time.monotonic() - t0
    h.expect(ok and healed <= HEAL_LIMIT,
             f'no ping through the link {healed:.1f}s after the hostile '
             f'window:\n{out}\npeer: {peer.state()}\n' + peer.log_tail())
    return healed


@h.case('peer-hostile')
def _(t):
    """pcinet-peer turns hostile for 10 s (--hostile: garbage into its
    control block and the records of its rings, ~1000 writes/s, random
    doorbells) under TCP and ping traffic both ways, then restarts its
    link.  The driver survives it (no splat), the link comes back by
    itself within 10 s (carrier, a ping through), 16 MiB cross intact
    afterwards, and the module still unloads."""
    peer = Peer(t)
    peer.args += [f'--hostile={HOSTILE_SECS}:1000:usr1']
    flood = []
    try:
        h.net_up(t.a, GUEST_IP)
        peer.start()
        peer.wait('up', 15)
        h.wait_carrier(t.a, 1, 15)
        ping_both(t, peer)
        flood = flood_start(t, peer, HOSTILE_SECS)
        time.sleep(1)
        hostile_window(t, peer, HOSTILE_SECS)
        # the window is over: pcinet-peer restarted its link; time the heal
        t.a.run('kill $(cat /tmp/flood.pid) 2>/dev/null; '
                'killall socat >/dev/null 2>&1; true')
        healed = heal(t, peer)
        st = peer.state()
        h.info(f'link healed {healed:.2f}s after the hostile window '
               f'({st.get("hostile_writes")} garbage writes; peer resets '
               f'{st.get("resets")}, ups {st.get("ups")})')
        bad = t.a.run('dmesg | grep -cE "pcinet.*(bad|error|reset)" '
                      '|| true').strip()
        h.info(f'guest: {bad} pcinet messages about bad data/resets')
        flood_stop(t, flood)
        works_then_unloads(t, peer)
    finally:
        flood_stop(None, flood)
        peer.close()


HOSTILE_CRC_SECS = 8
HOSTILE_CRC_RATE = 2000
# net_warn_ratelimited(): 10 messages per 5 s (net.core.message_burst,
# message_cost), and a "callbacks suppressed" line per burst
HOSTILE_CRC_MSGS = 80
# pcinet-peer sends one hostile IPv4 frame in four to the /24 after ours
HOSTILE_FWD = '10.79.1.0/24'
FORWARDED = "awk '/^Ip: [0-9]/ { print $7 }' /proc/net/snmp"	# ForwDatagrams


@h.case('peer-hostile-crc')
def _(t):
    """pcinet-peer sends, for 8 s, ~2000 a second well-formed records with
    a correct CRC and hostile content between its real ones
    (--hostile-kind=records), under TCP and ping traffic and a tty reader:
    frames to the guest's own addresses (and to a /24 it forwards back out
    pcinet0 with TSO off, through software GSO) whose virtio_net_hdr
    contradicts them (GSO types not offered, gso_size 0/1/0xffff, csum_start,
    csum_offset and hdr_len past the frame, IP and TCP lengths that lie,
    headers cut short), and tty records of random bytes and lengths with
    junk in the fields the tty ignores.  No CRC check can stop them: the
    driver must.  It drops the bad ones (rx_dropped, rx_length_errors)
    with ratelimited messages, no kernel warning (any splat fails the
    case), the link heals after the peer's restart, 16 MiB cross intact,
    the tty carries every byte value both ways, and the module unloads."""
    peer = Peer(t)
    peer.args += [f'--hostile={HOSTILE_CRC_SECS}:{HOSTILE_CRC_RATE}:usr1',
                  '--hostile-kind=records']
    flood = []
    try:
        h.net_up(t.a, GUEST_IP)
        peer.start()
        peer.wait('up', 15)
        h.wait_carrier(t.a, 1, 15)
        ping_both(t, peer)	# the peer learns the guest's addresses
        t.a.run(f'stty -F {TTY} raw -echo clocal; (timeout 120 cat {TTY} '
                '>/dev/null & echo $! >/tmp/ttycat.pid) >/dev/null 2>&1')
        # the frames to the next /24 are forwarded back to the peer, with
        # TSO off: software GSO segments what the driver let through
        t.a.run('echo 1 >/proc/sys/net/ipv4/ip_forward; for i in all '
                'pcinet0; do echo 0 >/proc/sys/net/ipv4/conf/$i/'
                f'send_redirects; done; ip route add {HOSTILE_FWD} via '
                f'{HOST_IP}; ethtool -K pcinet0 tso off')
        fwd = int(t.a.run(FORWARDED))
        flood = flood_start(t, peer, HOSTILE_CRC_SECS)
        before = {k: h.ethtool_stat(t.a, k) for k in
                  ('rx_dropped', 'rx_length_errors', 'rx_packets')}
        ups = int(peer.counters().get('ups', 0))
        time.sleep(1)
        n0 = int(t.a.run('dmesg | wc -l'))	# the kernel log before
        hostile_window(t, peer, HOSTILE_CRC_SECS)
        flood_stop(t, flood)
        t.a.run('kill $(cat /tmp/ttycat.pid) 2>/dev/null; true')
        healed = heal(t, peer)
        c = peer.counters()
        h.expect(int(c.get('hostile_records', 0)) >= HOSTILE_CRC_SECS * 100,
                 f'only {c.get("hostile_records")} hostile records went '
                 f'out ({c.get("hostile_records_full")} found no room)')
        after = {k: h.ethtool_stat(t.a, k) for k in before}
        log = t.a.run(f'dmesg | tail -n +{n0 + 1}')
        msgs = [line for line in log.splitlines()
                if 'pcinet' in line and 'pcinet test:' not in line]
        bad = [line for line in msgs if 'bad offload metadata' in line]
        h.expect(bad, 'no "bad offload metadata" message in the guest:\n'
                 + '\n'.join(msgs[-10:]))
        h.expect(len(msgs) <= HOSTILE_CRC_MSGS,
                 f'{len(msgs)} pcinet messages in the guest since the '
                 f'window began: not ratelimited?\n' + '\n'.join(msgs[-10:]))
        h.expect(after['rx_dropped'] > before['rx_dropped'],
                 f'guest rx_dropped {before["rx_dropped"]} -> '
                 f'{after["rx_dropped"]}: nothing dropped')
        fwd = int(t.a.run(FORWARDED)) - fwd
        h.expect(fwd > 0, 'the guest forwarded none of the frames to '
                 f'{HOSTILE_FWD}')
        d = {k: after[k] - before[k] for k in after}
        h.info(f'{c.get("hostile_records")} hostile records '
               f'({c.get("hostile_records_full")} found the ring full); '
               f'guest: rx_dropped +{d["rx_dropped"]}, rx_length_errors '
               f'+{d["rx_length_errors"]}, rx_packets +{d["rx_packets"]}, '
               f'{len(msgs)} messages ({len(bad)} "bad offload metadata"), '
               f'{fwd} forwarded; '
               f'link ups {int(c.get("ups", 0)) - ups} (1: the restart '
               f'after the window), healed in {healed:.2f}s')
        tty_all_bytes(t, peer)
        works_then_unloads(t, peer)
    finally:
        flood_stop(None, flood)
        peer.close()
        if t.a.alive():
            t.a.run('echo 0 >/proc/sys/net/ipv4/ip_forward; ip route del '
                    f'{HOSTILE_FWD} 2>/dev/null; true')


if __name__ == '__main__':
    raise SystemExit(h.main())
