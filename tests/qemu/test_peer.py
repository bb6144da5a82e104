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
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

GUEST_IP = '10.79.0.1'
HOST_IP = '10.79.0.2'
TTY = '/dev/ttyPCI0'
PEER_DIR = h.ROOT / 'tools/pcinet-peer'
PEER_BIN = PEER_DIR / 'pcinet-peer'

# One machine on a link of its own: the fabric's second slot is the peer's.
h.configure(machines=('a',), links=[('a',)], extra_modules=[h.PCINET_KO])


def sh(cmd, timeout=30, check=True):
    """A host command (a list); its output.  Fails the case on error."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if check and r.returncode:
        raise h.CaseFailure(f'{" ".join(map(str, cmd))}: exit '
                            f'{r.returncode}:\n{r.stdout}')
    return r.stdout


class Peer:
    """pcinet-peer in a netns of its own, on the topology's fabric.

    k: the peer of link k (t.fabrics[k], netns pnq-<pid>-k, files
    peer<k>.*, --slot k+1) when one guest has several links (test_scale);
    ip: the TAP's address (HOST_IP)."""

    def __init__(self, t, k=None, ip=HOST_IP):
        self.t = t
        tag = '' if k is None else str(k)
        self.ns = f'pnq-{os.getpid()}' + ('' if k is None else f'-{k}')
        self.fabric = t.fabric if k is None else t.fabrics[k]
        self.ip = ip
        self.args = [] if k is None else ['--slot', str(k + 1)]
        self.dir = t.workdir
        self.status = self.dir / f'peer{tag}.status'
        self.tty = self.dir / f'peer{tag}.tty'
        self.log = self.dir / f'peer{tag}.log'
        self.proc = None
        if not PEER_BIN.exists():
            r = subprocess.run(['make', '-C', str(PEER_DIR), 'pcinet-peer'],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode:
                raise h.HarnessError('building pcinet-peer failed:\n'
                                     + r.stdout)
        subprocess.run(['ip', 'netns', 'del', self.ns],
                       stderr=subprocess.DEVNULL)
        sh(['ip', 'netns', 'add', self.ns])
        sh(['ip', '-n', self.ns, 'link', 'set', 'lo', 'up'])

    def run(self, *cmd, timeout=60, check=True):
        return sh(['ip', 'netns', 'exec', self.ns, *map(str, cmd)], timeout,
                  check)

    def start(self, mtu=None):
        with open(self.log, 'ab') as log:
            self.proc = subprocess.Popen(
                ['ip', 'netns', 'exec', self.ns, str(PEER_BIN),
                 '-S', str(self.fabric.sockpath), '-i', 'pnq0',
                 '-l', str(self.tty), '-s', str(self.status), *self.args],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while subprocess.run(['ip', '-n', self.ns, 'link', 'show', 'pnq0'],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise h.CaseFailure('pcinet-peer did not start:\n'
                                    + self.log_tail())
            time.sleep(0.05)
        sh(['ip', '-n', self.ns, 'link', 'set', 'pnq0', 'address',
            '02:70:63:69:00:02'])
        sh(['ip', '-n', self.ns, 'addr', 'add', f'{self.ip}/24', 'dev',
            'pnq0'])
        sh(['ip', '-n', self.ns, 'link', 'set', 'pnq0', 'up']
           + (['mtu', str(mtu)] if mtu else []))

    def state(self):
        try:
            return dict(line.split('=', 1) for line in
                        self.status.read_text().split('\n')
                        if '=' in line and ' ' not in line)
        except FileNotFoundError:
            return {}

    def wait(self, link, timeout=10.0):
        """Wait until the status file says link=<link>; seconds taken."""
        t0 = time.monotonic()
        while self.state().get('link') != link:
            if time.monotonic() - t0 > timeout:
                raise h.CaseFailure(f'pcinet-peer: no link={link} after '
                                    f'{timeout}s; status {self.state()}\n'
                                    + self.log_tail())
            time.sleep(0.05)
        return time.monotonic() - t0

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self):
        if self.proc:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self):
        if self.proc:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()
            self.proc = None

    def close(self):
        self.stop()
        subprocess.run(['ip', 'netns', 'del', self.ns],
                       stderr=subprocess.DEVNULL)

    def log_tail(self, n=15):
        try:
            return '\n'.join(self.log.read_text().splitlines()[-n:])
        except FileNotFoundError:
            return '(no log)'


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


@h.case('peer-mtu-9000')
@with_peer
def _(t, peer):
    """MTU 9000 on both sides: unfragmented 9000-byte packets both ways."""
    t.a.run('ip link set pcinet0 mtu 9000')
    peer.run('ip', 'link', 'set', 'pnq0', 'mtu', 9000)
    ping_both(t, peer, 8972)
    t.a.run('ip link set pcinet0 mtu 1500')


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


@h.case('peer-tty-all-bytes')
@with_peer
def _(t, peer):
    """Every byte value 0..255 (x4) both ways between /dev/ttyPCI0 and the
    peer's pty, raw on both ends."""
    data = bytes(range(256)) * 4
    want = hashlib.sha256(data).hexdigest()
    t.a.run(f'stty -F {TTY} raw -echo clocal')
    # guest -> peer
    fd = os.open(peer.tty, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    try:
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
        # traffic through the window: TCP guest -> peer, pings peer -> guest
        flood.append(subprocess.Popen(
            ['ip', 'netns', 'exec', peer.ns, 'socat', '-u',
             'TCP-LISTEN:5003,reuseaddr,fork', 'OPEN:/dev/null'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        flood.append(subprocess.Popen(
            ['ip', 'netns', 'exec', peer.ns,
             *(['ping'] if shutil.which('ping') else ['busybox', 'ping']),
             '-q', '-c',
             str(HOSTILE_SECS * 20), '-i', '0.05', '-W', '1', GUEST_IP],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        t.a.run('(while :; do socat -u /dev/zero '
                f'TCP:{HOST_IP}:5003,connect-timeout=2; usleep 200000; '
                'done) >/dev/null 2>&1 & echo $! >/tmp/flood.pid')
        time.sleep(1)
        peer.signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while peer.state().get('hostile') != '1':
            h.expect(time.monotonic() < deadline,
                     'pcinet-peer did not turn hostile on SIGUSR1:\n'
                     + peer.log_tail())
            time.sleep(0.05)
        t.a.run('echo "pcinet test: peer hostile from here" >/dev/kmsg')
        deadline = time.monotonic() + HOSTILE_SECS + 10
        while peer.state().get('hostile') != '0':
            h.expect(time.monotonic() < deadline and peer.proc.poll() is None,
                     'the hostile window did not end:\n' + peer.log_tail())
            time.sleep(0.05)
        # the window is over: pcinet-peer restarted its link; time the heal
        t0 = time.monotonic()
        t.a.run('kill $(cat /tmp/flood.pid) 2>/dev/null; '
                'killall socat >/dev/null 2>&1; true')
        h.wait_carrier(t.a, 1, HEAL_LIMIT)
        ok, out = h.ping(t.a, HOST_IP, count=1, wait=1)
        while not ok and time.monotonic() - t0 < HEAL_LIMIT:
            ok, out = h.ping(t.a, HOST_IP, count=1, wait=1)
        healed = time.monotonic() - t0
        h.expect(ok and healed <= HEAL_LIMIT,
                 f'no ping through the link {healed:.1f}s after the hostile '
                 f'window:\n{out}\npeer: {peer.state()}\n' + peer.log_tail())
        st = peer.state()
        h.info(f'link healed {healed:.2f}s after the hostile window '
               f'({st.get("hostile_writes")} garbage writes; peer resets '
               f'{st.get("resets")}, ups {st.get("ups")})')
        bad = t.a.run('dmesg | grep -cE "pcinet.*(bad|error|reset)" '
                      '|| true').strip()
        h.info(f'guest: {bad} pcinet messages about bad data/resets')
        for p in flood:
            p.kill()
            p.wait()
        flood = []
        ping_both(t, peer)
        dt = tcp_to_peer(t, peer, 16)
        h.info('16 MiB guest->peer intact after the garbage (%.1f MiB/s)'
               % (16 / dt))
        h.expect(peer.proc.poll() is None, 'pcinet-peer died:\n'
                 + peer.log_tail())
        # nothing the garbage did keeps the module busy
        h.unload(t.a)
        peer.wait('down', 5)
    finally:
        for p in flood:
            p.kill()
            p.wait()
        peer.close()


if __name__ == '__main__':
    raise SystemExit(h.main())
