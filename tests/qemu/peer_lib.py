# SPDX-License-Identifier: GPL-2.0-only
"""pcinet-peer as the tests drive it: one process on a topology's fabric,
its TAP in a network namespace of its own, its log in the case's workdir.

PeerProcess is what every use shares (build, netns, log, signals, stop);
Peer is the net/tty peer of test_peer.py and scale.py, BlkPeer the
virtio-blk device side (`--blk IMAGE`) of the virtio cases.  A module,
not a test file: importing it registers no case and configures nothing.
"""

import hashlib
import os
import signal
import subprocess
import time

import pcinet_harness as h

PEER_DIR = h.ROOT / 'tools/pcinet-peer'
PEER_BIN = PEER_DIR / 'pcinet-peer'
HOST_IP = '10.79.0.2'


def sh(cmd, timeout=30, check=True):
    """A host command (a list); its output.  Fails the case on error."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if check and r.returncode:
        raise h.CaseFailure(f'{" ".join(map(str, cmd))}: exit '
                            f'{r.returncode}:\n{r.stdout}')
    return r.stdout


def build():
    """make pcinet-peer (incremental: a no-op when it is up to date)."""
    r = subprocess.run(['make', '-C', str(PEER_DIR), 'pcinet-peer'],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode:
        raise h.HarnessError('building pcinet-peer failed:\n' + r.stdout)


class PeerProcess:
    """One pcinet-peer in netns ns on fabric, logging to log."""

    def __init__(self, ns, fabric, log):
        self.ns = ns
        self.fabric = fabric
        self.log = log
        self.proc = None
        build()
        subprocess.run(['ip', 'netns', 'del', self.ns],
                       stderr=subprocess.DEVNULL)
        sh(['ip', 'netns', 'add', self.ns])
        sh(['ip', '-n', self.ns, 'link', 'set', 'lo', 'up'])

    def spawn(self, *args):
        """Start pcinet-peer -S <fabric> args... in the namespace; returns
        the log's size before, for wait_log()."""
        mark = self.log_size()
        with open(self.log, 'ab') as log:
            self.proc = subprocess.Popen(
                ['ip', 'netns', 'exec', self.ns, str(PEER_BIN),
                 '-S', str(self.fabric.sockpath), *map(str, args)],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        return mark

    def run(self, *cmd, timeout=60, check=True):
        """A command inside the peer's namespace."""
        return sh(['ip', 'netns', 'exec', self.ns, *map(str, cmd)], timeout,
                  check)

    def log_size(self):
        try:
            return self.log.stat().st_size
        except FileNotFoundError:
            return 0

    def wait_log(self, text, timeout, mark=0):
        """Wait until text is in the log past byte mark."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if text in self.log.read_text()[mark:]:
                    return
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise h.CaseFailure(f'pcinet-peer: no "{text}" within '
                                    f'{timeout}s:\n' + self.log_tail())
            time.sleep(0.05)

    def expect_alive(self):
        """Fail the case, with the log's tail, if pcinet-peer died."""
        h.expect(self.proc is not None and self.proc.poll() is None,
                 'pcinet-peer died:\n' + self.log_tail())

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self):
        if self.proc:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self, timeout=10):
        """SIGTERM (after SIGCONT, in case it is stopped); its exit status,
        or None if it had to be killed or was not running."""
        if not self.proc:
            return None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self.proc = None
        return rc

    def close(self):
        self.stop()
        subprocess.run(['ip', 'netns', 'del', self.ns],
                       stderr=subprocess.DEVNULL)

    def counters(self):
        """Every k=v of the status file (self.status), also those several
        to a line (net_tx=... net_tx_bytes=...), as strings."""
        try:
            text = self.status.read_text()
        except FileNotFoundError:
            return {}
        return dict(w.split('=', 1) for w in text.split() if '=' in w)

    def fresh_counters(self, timeout=5.0):
        """counters() from a status file written after this call (it is
        rewritten every second): what the peer had counted by now."""
        t0 = time.time()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.status.stat().st_mtime > t0:
                    c = self.counters()
                    if c:
                        return c
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise h.CaseFailure(f'pcinet-peer: no status file newer than '
                                    f'{timeout}s ago:\n' + self.log_tail())
            time.sleep(0.05)

    def log_tail(self, n=25):
        try:
            return '\n'.join(self.log.read_text().splitlines()[-n:])
        except FileNotFoundError:
            return '(no log)'

class Peer(PeerProcess):
    """pcinet-peer in a netns of its own, on the topology's fabric.

    k: the peer of link k (t.fabrics[k], netns pnq-<pid>-k, files
    peer<k>.*, --slot k+1) when one guest has several links (test_scale);
    ip: the TAP's address (HOST_IP)."""

    def __init__(self, t, k=None, ip=HOST_IP):
        self.t = t
        tag = '' if k is None else str(k)
        self.ip = ip
        self.args = [] if k is None else ['--slot', str(k + 1)]
        self.dir = t.workdir
        self.status = self.dir / f'peer{tag}.status'
        self.tty = self.dir / f'peer{tag}.tty'
        ns = f'pnq-{os.getpid()}' + ('' if k is None else f'-{k}')
        super().__init__(ns, t.fabric if k is None else t.fabrics[k],
                         self.dir / f'peer{tag}.log')

    def start(self, mtu=None):
        self.spawn('-i', 'pnq0', '-l', self.tty, '-s', self.status,
                   *self.args)
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

    def listening(self, port, timeout=10.0):
        """Wait until a TCP listener on port exists in the namespace."""
        deadline = time.monotonic() + timeout
        while f':{port} ' not in self.run('ss', '-Hltn', check=False):
            if time.monotonic() > deadline:
                raise h.CaseFailure(f'nothing listens on :{port} in '
                                    f'{self.ns} after {timeout}s')
            time.sleep(0.05)

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


class BlkPeer(PeerProcess):
    """pcinet-peer --blk IMAGE (img_mib MiB, made empty) on the topology's
    fabric, its TAP in a netns; with fs ('DIR:TAG'), --fs fs as well (a
    virtio-fs device beside the virtio-blk one).  Its status file (-s) is
    peer.status: counters(), fresh_counters()."""

    def __init__(self, t, img_mib, fs=None):
        self.t = t
        self.fs = fs
        self.img = t.workdir / 'vda.raw'
        self.status = t.workdir / 'peer.status'
        super().__init__(f'pnv-{os.getpid()}', t.fabric,
                         t.workdir / 'peer.log')
        with open(self.img, 'wb') as f:
            f.truncate(img_mib << 20)

    def start(self):
        mark = self.spawn('-i', 'pnv0', '-s', self.status, '--blk', self.img,
                          *(['--fs', self.fs] if self.fs else []))
        self.wait_log('vio: back end ready: virtio-blk', 15, mark)
        if self.fs:
            self.wait_log('vio: back end ready: virtio-fs', 15, mark)

    def image_sha(self, off_mib, mib):
        with open(self.img, 'rb') as f:
            f.seek(off_mib << 20)
            return hashlib.sha256(f.read(mib << 20)).hexdigest()
