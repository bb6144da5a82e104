#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""QEMU test harness of pcinet (python3, stdlib only).

Pieces, bottom up:

  Fabric    runs tools/pcinet-fabric/pcinet-fabric (the ivshmem server that
            joins the guests) on a UNIX socket.
  VM        one qemu-system-x86_64 guest (TCG) booting the Debian kernel
            unpacked by scripts/setup.sh and the busybox initramfs built by
            tests/qemu/mkinitramfs.sh.  Its /init (tests/qemu/guest-init)
            runs an agent on the second serial port; VM.sh() runs a shell
            command in the guest through it and returns (rc, output).
  Topology  machines and the links between them, each link one fabric
            (default: machines 'a' and 'b', one link), booted once and
            reused by consecutive cases (the fixture).  A case may ask for
            another topology: @case(name, topology=dict(machines=('a', 'b',
            'c'), links=[('a', 'b'), ('b', 'c')])).  A machine's links
            become pcinet0, pcinet1, ... in the order of `links`
            (t.ifname('b', 'c') says which).
  guest     helpers every test shares: vm.wait_until(shell condition,
  helpers   timeout) instead of polling loops; load() (insmod, checking
            that the module loaded is the one built here), net_up(),
            load_and_wait(), wait_carrier() and link_state() (link state
            from sysfs), ping(), ethtool_stat(), tcp_transfer(), iperf3()
            and iperf3_mbps(); need_tool() skips a case whose guest tool
            is not built.
  runner    @case(name) registers a test function; main() runs them and
            prints one line per case ([ OK ], [FAIL] with the consoles,
            [SKIP] for a case that called skip(reason)), then
            "N passed, N failed" (", N skipped" appended if any).

A test file looks like:

    import pcinet_harness as h

    h.configure(extra_modules=[h.PCINET_KO])

    @h.case('ping')
    def _(t):                     # t: the Topology; t.a, t.b: the VMs
        h.load_and_wait({t.a: '10.0.0.1', t.b: '10.0.0.2'})
        ok, out = h.ping(t.b, '10.0.0.1')
        h.expect(ok, 'ping failed:\\n' + out)

    if __name__ == '__main__':
        raise SystemExit(h.main())

Run it:  python3 tests/qemu/test_x.py [-k PATTERN] [--keep] [-l] [-v]
         TESTS=PATTERN python3 tests/qemu/test_x.py

Every case also fails if a kernel splat (dmesg_check) shows up on the
console of any VM while it runs.  A case that breaks its topology on purpose
(kills a VM, ...) does not need to clean up: the runner boots a fresh
topology before the next case whenever a VM is dead, an agent timed out, a
case failed, or the case called t.mark_dirty().  @case(name, fresh=True)
asks for a freshly booted topology before the case.

Environment: TESTS (case pattern), TESTS_EXCEPT (patterns of cases left
out), PCINET_REPEAT (run the selection N times), PCINET_TIMES (a file each case's name, seconds and status are
appended to), PCINET_KEEP=1 (keep the work dir with
console logs), PCINET_VERBOSE=1 (or -v: echo every guest command and its
status on stderr), QEMU (emulator binary), PCINET_FABRIC (fabric binary),
PCINET_BOOT_TIMEOUT (seconds, default 180), PCINET_MODULE (the pcinet.ko
to test instead of the one built here), PCINET_KERNEL (debian: the
Debian kernel the module is built against, the default; debug: the debug
kernel of scripts/debug-kernel.sh, KASAN, lockdep, kmemleak & co., with
the module built against it in build/debug-module), PCINET_APPEND (more
kernel command line for every guest, e.g. slub_debug=FZPU to hunt a
memory corruption on Debian's kernel).
"""

import base64
import ctypes
import json
import fnmatch
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BUILD = ROOT / 'build'

BOOT_TIMEOUT = float(os.environ.get('PCINET_BOOT_TIMEOUT', '180'))
KERNEL = os.environ.get('PCINET_KERNEL', 'debian')
if KERNEL not in ('debian', 'debug'):
    raise SystemExit(f'PCINET_KERNEL={KERNEL}: want debian or debug')
TAG = '@debug' if KERNEL == 'debug' else ''	# after case names in results
# Debian's kernel has no KASAN: its guests run with the allocator's own
# checks on where issue 7's corruption struck twice (a freed sk_buff
# written to, found later as a garbage freelist pointer): the sk_buff
# cache red-zoned, poisoned on free and checked on allocation, with the
# last owner's stack (slub_debug FZPU), and KFENCE sampling every cache
# (Debian builds it in but leaves it off).  A write into a freed sk_buff
# is then reported at the next allocation of that object, with who freed
# it, instead of crashing later elsewhere.  Cost: the sk_buff cache loses
# its fast path; no case asserts a speed.
DEBIAN_CHECKS = ('slub_debug=FZPU,skbuff_head_cache,skbuff_fclone_cache '
                 'kfence.sample_interval=100')
# The module the guests load, built for the kernel they boot.
PCINET_KO = (BUILD / 'debug-module/pcinet.ko' if KERNEL == 'debug'
             else ROOT / 'drivers/net/pcinet/pcinet.ko')
if os.environ.get('PCINET_MODULE'):	# another build, e.g. of an old commit
    PCINET_KO = Path(os.environ['PCINET_MODULE']).resolve()


def scaled(n, debug_div=8):
    """A transfer size for the kernel under test: the debug kernel (KASAN
    and lockdep under TCG) runs ~5x slower, and catches memory bugs with
    fewer bytes: n // debug_div there (at least 1)."""
    return max(1, n // debug_div) if KERNEL == 'debug' else n


class HarnessError(Exception):
    """Something in the test machinery went wrong (not an assertion)."""


class VMError(HarnessError):
    """A VM died, or its control channel broke."""


class AgentTimeout(VMError):
    """The guest agent did not answer in time."""


class CaseFailure(AssertionError):
    """A test expectation failed; raised by expect() and VM.run()."""


class CaseSkip(Exception):
    """The case cannot run here (raised by skip()); not a failure."""


class ModuleMismatch(HarnessError):
    """The pcinet.ko a guest loaded is not the one built here: every case
    after would test something else, so the run stops."""


def skip(reason):
    """End the current case as skipped ([SKIP] reason): only for a case
    that cannot run in this setup, never for one that found a fault."""
    raise CaseSkip(reason)


def expect(cond, msg='expectation failed'):
    """Fail the current case with msg unless cond is true."""
    if not cond:
        raise CaseFailure(msg)


def info(msg):
    """Diagnostics go to stderr, prefixed '# ', so stdout holds only results."""
    print('# ' + msg, file=sys.stderr, flush=True)


# PCINET_VERBOSE=1 or -v: every guest command and its status on stderr.
VERBOSE = os.environ.get('PCINET_VERBOSE', '') not in ('', '0')


def _echo(vm, cmd, rc=None, out=b''):
    if rc is None:
        lines = (cmd if isinstance(cmd, str) else repr(cmd)).splitlines() or ['']
        info(f'{vm.name}$ ' + '\n#   '.join(lines))
    else:
        info(f'{vm.name}: exit {rc}, {len(out)} bytes of output')


# --------------------------------------------------------------------------
# environment (build/env.sh from scripts/setup.sh)
# --------------------------------------------------------------------------

def load_env(run_setup=True):
    """Return build/env.sh as a dict (KVER, KDIR, KDIR_61, VMLINUZ, MODDIR...).

    Runs scripts/setup.sh first if the file or the kernel it names is missing.
    With PCINET_KERNEL=debug: build/env-debug.sh, from scripts/debug-kernel.sh.
    """
    if KERNEL == 'debug':
        return _load_debug_env()
    envsh = BUILD / 'env.sh'

    def parse():
        env = {}
        if envsh.exists():
            for line in envsh.read_text().splitlines():
                m = re.match(r'export (\w+)=(.*)$', line)
                if m:
                    env[m.group(1)] = m.group(2)
        return env

    env = parse()
    if run_setup and not (env.get('VMLINUZ') and Path(env['VMLINUZ']).exists()):
        info('build/env.sh or the kernel is missing: running scripts/setup.sh')
        subprocess.run([str(ROOT / 'scripts/setup.sh')], check=True,
                       stdout=sys.stderr)
        env = parse()
    if not env.get('VMLINUZ'):
        raise HarnessError('build/env.sh incomplete: run scripts/setup.sh')
    return env


def _load_debug_env():
    envsh = BUILD / 'env-debug.sh'
    if not envsh.exists():
        info('build/env-debug.sh missing: running scripts/debug-kernel.sh')
        subprocess.run([str(ROOT / 'scripts/debug-kernel.sh')], check=True,
                       stdout=sys.stderr)
    env = dict(re.findall(r'^export (\w+)=(.*)$', envsh.read_text(), re.M))
    if not Path(env.get('VMLINUZ', '/nonexistent')).exists():
        raise HarnessError('debug kernel missing: run scripts/debug-kernel.sh')
    if not PCINET_KO.exists():
        raise HarnessError(f'{PCINET_KO} missing: make debug-module')
    return env


def build_initramfs(out, extra_modules=(), env=None, storage=False):
    """Build the guest initramfs with tests/qemu/mkinitramfs.sh; returns out.
    storage: with the storage tools and modules of make bench's storage
    section (fio, qemu-storage-daemon, nbd-client, diod, mke2fs; nbd, 9p,
    virtio_blk, ext4), ~30 MB more: not for the tests."""
    e = dict(os.environ)
    if env:
        e.update(env)
    cmd = ([str(HERE / 'mkinitramfs.sh')] + (['--storage'] if storage else [])
           + [str(out)] + [str(m) for m in extra_modules])
    r = subprocess.run(cmd, env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise HarnessError('mkinitramfs.sh failed:\n' + r.stdout)
    info(r.stdout.strip())
    return Path(out)


# --------------------------------------------------------------------------
# child processes
# --------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _child_setup():
    """preexec_fn: the child gets SIGKILL when the harness dies.

    Caveat: PDEATHSIG fires when the *thread* that forked exits, so start
    VMs and fabrics from the main thread (waiting may happen anywhere).
    """
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _tail(path, n=20):
    try:
        lines = Path(path).read_text(errors='replace').splitlines()
    except OSError:
        return ''
    return '\n'.join(lines[-n:])


def print_console_tails(vms, n=30):
    """The last n console lines of each VM, for a failed demo or chassis."""
    for vm in vms:
        print(f'--- {vm.name} console (last lines) ---\n'
              + _printable(_tail(vm.console_path, n)), flush=True)


def _popen(cmd, log):
    with open(log, 'ab') as f:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=_child_setup)


# --------------------------------------------------------------------------
# Fabric
# --------------------------------------------------------------------------

def fabric_binary():
    """Path of pcinet-fabric ($PCINET_FABRIC, else built in tools/)."""
    if os.environ.get('PCINET_FABRIC'):
        return Path(os.environ['PCINET_FABRIC'])
    b = ROOT / 'tools/pcinet-fabric/pcinet-fabric'
    if not b.exists() and (b.parent / 'Makefile').exists():
        info('building tools/pcinet-fabric')
        r = subprocess.run(['make', '-C', str(b.parent), 'pcinet-fabric'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if r.returncode != 0:
            raise HarnessError('building pcinet-fabric failed:\n' + r.stdout)
    if not b.exists():
        raise HarnessError(f'{b} missing')
    return b


class Fabric:
    """The ivshmem server a set of VMs attach to (one pcinet link)."""

    def __init__(self, sockpath, size='16M', vectors=4, binary=None, log=None,
                 control=False):
        self.sockpath = Path(sockpath)
        self.size = size
        self.vectors = vectors
        self.binary = Path(binary) if binary else None
        self.log = Path(log) if log else self.sockpath.with_suffix('.log')
        self.pidfile = self.sockpath.with_suffix('.pid')
        self.proc = None
        # the size of each virtio region (-V, e.g. '8M'); None: none
        self.vio = None
        # True: the memory of an emulated NTB (-N, ntb_ivshmem.ko) instead
        # of a pcinet window
        self.ntb = False
        # control=True: fault injection (-C <sock>.ctl, doorbells interposed
        # with -I); see fault() and tools/pcinet-fabric/README.md.
        self.ctlpath = Path(f'{self.sockpath}.ctl') if control else None

    def start(self, timeout=10):
        binary = self.binary or fabric_binary()
        if self.sockpath.exists() or self.sockpath.is_symlink():
            self.sockpath.unlink()
        cmd = [str(binary), '-S', str(self.sockpath), '-m', str(self.size),
               '-n', str(self.vectors), '-p', str(self.pidfile)]
        if self.ctlpath:
            cmd += ['-I', '-C', str(self.ctlpath)]
        if self.vio:
            cmd += ['-V', str(self.vio)]
        if self.ntb:
            cmd += ['-N']
        self.proc = _popen(cmd, self.log)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise HarnessError(
                    f'fabric exited with status {self.proc.returncode}:\n'
                    + _tail(self.log))
            try:
                if stat.S_ISSOCK(os.stat(self.sockpath).st_mode):
                    return self
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise HarnessError(f'fabric: no socket {self.sockpath} after '
                                   f'{timeout}s:\n' + _tail(self.log))
            time.sleep(0.02)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=5):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        for p in (self.sockpath, self.pidfile):
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def log_text(self):
        return _tail(self.log, 10**9)

    def fault(self, cmd: str) -> str:
        """Send one control command (e.g. 'doorbell drop 10', 'stats') to
        the fabric and return its reply line; HarnessError on an 'err' reply.
        Needs control=True."""
        if not self.ctlpath:
            raise HarnessError('fabric: fault() needs Fabric(control=True)')
        if '\n' in cmd:
            raise HarnessError(f'fabric: one command per call: {cmd!r}')
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            try:
                s.connect(str(self.ctlpath))
                s.sendall(cmd.encode() + b'\n')
                buf = b''
                while not buf.endswith(b'\n'):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
            except OSError as e:
                raise HarnessError(f'fabric control {self.ctlpath}: {e}') from e
        reply = buf.decode(errors='replace').strip()
        if not reply or reply.startswith('err'):
            raise HarnessError(f'fabric fault {cmd!r}: {reply or "no reply"}')
        return reply


# --------------------------------------------------------------------------
# VM
# --------------------------------------------------------------------------

class VM:
    """One QEMU guest with an agent on its second serial port.

    Files in workdir: <name>.console.log (ttyS0; always appended to, across
    restarts and topologies, so console marks stay valid),
    <name>.qemu.log (QEMU's own stdout/stderr), <name>.ctl (control socket:
    the harness listens, QEMU connects as a client at startup, so nothing
    the guest writes can be lost before the harness is there).
    """

    def __init__(self, name, workdir, kernel, initrd, fabrics=(), mem=1024,
                 smp=1, append='', extra_args=(), nic=False, qemu=None):
        self.name = name
        self.workdir = Path(workdir)
        self.kernel = Path(kernel)
        self.initrd = Path(initrd)
        self.fabrics = list(fabrics)
        self.mem = mem
        self.smp = smp
        self.append = append
        self.extra_args = list(extra_args)
        self.nic = nic			# False: "-nic none"
        self.qemu = qemu or os.environ.get('QEMU', 'qemu-system-x86_64')
        self.console_path = self.workdir / f'{name}.console.log'
        self.qemu_log = self.workdir / f'{name}.qemu.log'
        self.ctl_path = self.workdir / f'{name}.ctl'
        self.proc = None
        self.sock = None
        self.lines = None		# queue of control lines (bytes), None = EOF
        self.broken = None		# why the VM is unusable (QEMU gone...)
        self.stale = None		# why it should not be reused (timeout)
        self.stopped = False		# SIGSTOPped by kill()
        self.boot_time = None		# seconds from start() to @@READY
        self._id = 0
        self._quiet = False		# no verbose echo (wait_until's own)
        self._lock = threading.Lock()
        self._qemu_log_mark = 0

    # -- lifecycle --------------------------------------------------------

    def cmdline(self):
        checks = DEBIAN_CHECKS if KERNEL == 'debian' else ''
        # printk.time=1: the console cases find kernel lines by their
        # "[    1.234] " stamp, and the debug kernel is built without
        # CONFIG_PRINTK_TIME (Debian's has it)
        append = (f'console=ttyS0,115200 loglevel=5 printk.time=1 panic=-1 '
                  f'pcinet.name={self.name} {checks} {self.append} '
                  f'{os.environ.get("PCINET_APPEND", "")}').strip()
        # maxcpus >= 2 even for one vCPU.  QEMU before 8.1 (bookworm has
        # 7.2) emits TCG memory barriers only for a guest that may have
        # several CPUs (CF_PARALLEL): with -smp 1 a guest's mfence or
        # locked instruction orders nothing on the host, and each guest
        # (two QEMU processes on two host cores) may load the other's index
        # before its own store is visible.  The doorbell handshakes need
        # that order (pairs E/F and G/H in pcinet_ring.h); without it a
        # writer waiting for room could sleep until the next link tick:
        #   a: need_space = 1; mb; load cons -> old
        #   b: cons = new;     mb; load need_space -> 0: no doorbell
        smp = f'{self.smp},maxcpus={max(2, int(self.smp))}'
        cmd = [self.qemu, '-accel', 'tcg', '-cpu', 'max',
               '-m', str(self.mem), '-smp', smp,
               '-nodefaults', '-nographic', '-no-reboot',
               '-kernel', str(self.kernel), '-initrd', str(self.initrd),
               '-append', append,
               '-chardev', f'file,id=con,path={self.console_path},append=on',
               '-serial', 'chardev:con',
               '-chardev', f'socket,id=ctl,path={self.ctl_path}',
               '-serial', 'chardev:ctl']
        if not self.nic:
            cmd += ['-nic', 'none']
        for i, fab in enumerate(self.fabrics):
            path = fab.sockpath if isinstance(fab, Fabric) else fab
            vectors = fab.vectors if isinstance(fab, Fabric) else 4
            cmd += ['-chardev', f'socket,path={path},id=fab{i}',
                    '-device', f'ivshmem-doorbell,chardev=fab{i},vectors={vectors}']
        return cmd + self.extra_args

    def start(self, connect_timeout=30):
        """Launch QEMU (does not wait for the guest: see wait_ready())."""
        if self.alive():
            raise HarnessError(f'{self.name}: already running')
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._close()
        if self.ctl_path.exists() or self.ctl_path.is_symlink():
            self.ctl_path.unlink()
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lsock.bind(str(self.ctl_path))
            lsock.listen(1)
            lsock.settimeout(0.2)
            with open(self.qemu_log, 'ab') as f:
                f.write(('$ ' + shlex.join(self.cmdline()) + '\n').encode())
            self._qemu_log_mark = self.qemu_log.stat().st_size
            self._boot_mark = self.console_mark()
            self._t0 = time.monotonic()
            self.proc = _popen(self.cmdline(), self.qemu_log)
            deadline = self._t0 + connect_timeout
            while True:
                try:
                    self.sock, _ = lsock.accept()
                    break
                except socket.timeout:
                    pass
                self._check_alive('while starting')
                if time.monotonic() > deadline:
                    self.kill()
                    raise VMError(f'{self.name}: QEMU did not connect to '
                                  f'{self.ctl_path} within {connect_timeout}s')
        finally:
            lsock.close()
            try:
                self.ctl_path.unlink()
            except FileNotFoundError:
                pass
        self.sock.settimeout(None)
        self.lines = queue.Queue()
        self.broken = self.stale = None
        self.stopped = False
        self.boot_time = None
        self.module_checked = False	# check_module() since this boot
        threading.Thread(target=self._reader, args=(self.sock, self.lines),
                         name=f'ctl-{self.name}', daemon=True).start()
        return self

    @staticmethod
    def _reader(sock, q):
        buf = b''
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                buf += data
                *lines, buf = buf.split(b'\n')
                for line in lines:
                    q.put(line.rstrip(b'\r'))
        except OSError:
            pass
        q.put(None)

    def wait_ready(self, timeout=None):
        """Wait for the agent's @@READY; returns the boot time in seconds.

        A boot on which the emulator itself tripped the kernel (see
        EMULATOR_SPLAT_RE) is discarded and done again, at most
        BOOT_RETRIES times: nothing of pcinet has run yet at that point
        (guest-init loads no pcinet module), so the splat says nothing about
        the code under test, while the case would fail on it."""
        timeout = BOOT_TIMEOUT if timeout is None else timeout
        for attempt in range(BOOT_RETRIES + 1):
            deadline = time.monotonic() + timeout
            while True:
                line = self._next_line(deadline, f'@@READY within {timeout}s')
                if line == b'@@READY':
                    self.boot_time = time.monotonic() - self._t0
                    break
            why = emulator_splat(self.console_since(self._boot_mark))
            if why is None or attempt == BOOT_RETRIES:
                return self.boot_time
            saved = self.workdir / f'{self.name}.console.discarded.{attempt}.log'
            saved.write_text(self.console_since(self._boot_mark))
            info(f'{self.name}: boot discarded, the emulator tripped the '
                 f'kernel before any pcinet code ran ({why}); console kept '
                 f'in {saved.name}; booting again')
            self.kill()
            with open(self.console_path, 'r+b') as f:
                f.truncate(self._boot_mark)
            self.start()
        return self.boot_time

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        """Send sig to QEMU (SIGKILL, SIGSTOP, SIGCONT, ...)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.wait()
        elif sig == signal.SIGSTOP:
            self.stopped = True
        elif sig == signal.SIGCONT:
            self.stopped = False

    def wait_exit(self, timeout):
        """Wait for QEMU to exit; returns its status or None on timeout."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout=15):
        """Stop the guest (agent 'reboot -f': QEMU runs with -no-reboot, so
        a reset ends it, with or without ACPI in the guest kernel), SIGKILL
        as the fallback."""
        if self.alive():
            if not (self.broken or self.stale or self.stopped):
                try:
                    self._send('reboot -f')
                except VMError:
                    pass
                self.wait_exit(timeout)
            if self.alive():
                self.proc.send_signal(signal.SIGCONT)
                self.kill(signal.SIGKILL)
        self._close()

    def restart(self, wait=True, timeout=None):
        """Kill (if running) and boot again; waits for @@READY if wait."""
        self.kill(signal.SIGCONT)
        self.kill(signal.SIGKILL)
        self.start()
        if wait:
            self.wait_ready(timeout)
        return self

    def _close(self):
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
            self.sock = None

    def exit_report(self):
        """Why QEMU is gone: exit status and the tail of its own output."""
        rc = self.proc.poll() if self.proc else None
        if rc is None:
            return f'{self.name}: QEMU still running'
        how = f'signal {-rc}' if rc < 0 else f'status {rc}'
        try:
            with open(self.qemu_log, 'rb') as f:
                f.seek(self._qemu_log_mark)
                qout = f.read().decode('utf-8', 'replace').splitlines()[-10:]
        except OSError:
            qout = []
        panic = [l for l in _tail(self.console_path, 300).splitlines()
                 if 'Kernel panic' in l]
        if panic:
            how += ' after "' + panic[-1].strip() + '"'
        return (f'{self.name}: QEMU exited with {how}; QEMU output: '
                + ('\n' + _indent('\n'.join(qout)) if qout else '(none)')
                + '\nconsole tail:\n'
                + _indent(_printable(_tail(self.console_path, 5))))

    def _check_alive(self, doing):
        if self.proc is not None and self.proc.poll() is not None:
            self.broken = 'QEMU exited'
            raise VMError(f'{doing}: ' + self.exit_report())

    # -- agent ------------------------------------------------------------

    def _next_line(self, deadline, what):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._check_alive(f'{self.name}: waiting for {what}')
                state = 'stopped by SIGSTOP' if self.stopped else 'running'
                raise AgentTimeout(
                    f'{self.name}: timed out waiting for {what} (QEMU {state}); '
                    f'last console line: {self.last_console_line()!r}')
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                self._check_alive(f'{self.name}: waiting for {what}')
                continue
            if line is None:
                self.lines.put(None)	# stays at EOF
                time.sleep(0.2)		# let QEMU finish exiting
                self._check_alive(f'{self.name}: waiting for {what}')
                self.broken = 'control channel closed'
                raise VMError(f'{self.name}: control channel closed while '
                              f'waiting for {what}')
            return line

    def _send(self, cmd):
        if self.sock is None:
            raise VMError(f'{self.name}: not started')
        self._id += 1
        data = base64.b64encode(cmd.encode() if isinstance(cmd, str) else cmd)
        try:
            self.sock.sendall(b'%d %s\n' % (self._id, data))
        except OSError as e:
            self._check_alive(f'{self.name}: sending command')
            raise VMError(f'{self.name}: control channel: {e}') from e
        return self._id

    def sh_bytes(self, cmd, timeout=60):
        """Run cmd with `sh -c` in the guest; returns (rc, stdout+stderr bytes).

        Raises AgentTimeout after timeout seconds and VMError if QEMU died.
        After a timeout the VM stays usable (answers are matched by id, a late
        one is skipped) but commands queue behind the one still running in
        the guest, and the runner reboots the topology after the case.
        Background jobs started by cmd must redirect their output.
        """
        with self._lock:
            if self.broken:
                self._check_alive(f'{self.name}: sh({_short(cmd)})')
                raise VMError(f'{self.name}: agent unusable ({self.broken})')
            echo = VERBOSE and not self._quiet
            if echo:
                _echo(self, cmd)
            cid = self._send(cmd)
            what = f'command {cid} ({_short(cmd)}) within {timeout}s'
            deadline = time.monotonic() + timeout
            try:
                # Skip stale answers of earlier (timed out) commands.
                while self._next_line(deadline, what) != b'@@OUT %d' % cid:
                    pass
                chunks = []
                while True:
                    line = self._next_line(deadline, what)
                    if line.startswith(b'@@END %d ' % cid):
                        rc = int(line.split()[2])
                        break
                    if line == b'@@READY':
                        raise VMError(f'{self.name}: agent restarted during '
                                      f'{what}')
                    chunks.append(line)
            except AgentTimeout:
                self.stale = f'command {cid} timed out'
                raise
            try:
                out = base64.b64decode(b''.join(chunks), validate=True)
            except ValueError as e:
                raise VMError(f'{self.name}: garbled agent output for '
                              f'command {cid}: {e}') from e
            if echo:
                _echo(self, cmd, rc, out)
            return rc, out

    def sh(self, cmd, timeout=60):
        """Like sh_bytes() but returns the output as str (invalid UTF-8 is
        kept losslessly as surrogate escapes)."""
        rc, out = self.sh_bytes(cmd, timeout)
        return rc, out.decode('utf-8', 'surrogateescape')

    def run(self, cmd, timeout=60):
        """sh() that fails the case unless rc == 0; returns the output."""
        rc, out = self.sh(cmd, timeout)
        if rc != 0:
            raise CaseFailure(f'{self.name}: `{_short(cmd)}` exited {rc}:\n'
                              + _indent(out.rstrip()[-2000:]))
        return out

    def wait_until(self, cond, timeout=10.0, what=None, show=None,
                   interval=0.1, must=True):
        """Poll the shell condition cond in the guest until it is true
        (exits 0), for at most timeout seconds of the guest's clock (a slow
        guest gets the same time, not the same number of rounds); cond is
        tried at least once after the deadline.  Returns the seconds it
        took (guest clock, 10 ms resolution).

        On timeout: CaseFailure "<vm>: <what> not within <timeout>s" with
        the output of show (a shell command; default: cond run once more)
        for the diagnosis; with must=False, None instead.  cond's own
        output is discarded; it runs in a subshell (exit ends cond only).
        """
        limit = max(1, int(round(timeout * 100)))
        now = 'read t _ </proc/uptime; t=${t%.*}${t#*.}'	# centiseconds
        script = (f'{now}; t0=$t; '
                  f'until ( {cond}\n) >/dev/null 2>&1; do '
                  f'if [ $((t - t0)) -ge {limit} ]; then '
                  f'echo "@@timeout $((t - t0))"; ( {show or cond}\n) 2>&1 | '
                  f'tail -n 30; exit 0; fi; '
                  f'usleep {int(interval * 1e6)}; {now}; done; '
                  f'{now}; echo "@@took $((t - t0))"')
        if VERBOSE:
            info(f'{self.name}$ wait_until {timeout:g}s: {_short(cond, 200)}')
        self._quiet = True
        try:
            out = self.run(script, timeout=timeout + max(60.0, timeout))
        finally:
            self._quiet = False
        m = re.search(r'^@@took (\d+)$', out, re.M)
        if VERBOSE:
            info(f'{self.name}: ' + (f'true after {int(m.group(1)) / 100:g}s'
                                     if m else 'timed out'))
        if m:
            return int(m.group(1)) / 100
        if not must:
            return None
        _, _, diag = out.partition('\n')
        raise CaseFailure(f'{self.name}: {what or _short(cond)} not within '
                          f'{timeout:g}s' + (':\n' + _indent(diag.rstrip())
                                             if diag.strip() else ''))

    # -- console ----------------------------------------------------------

    def console_log(self):
        return self.console_since(0)

    def console_mark(self):
        try:
            return self.console_path.stat().st_size
        except FileNotFoundError:
            return 0

    def console_since(self, mark):
        try:
            with open(self.console_path, 'rb') as f:
                f.seek(mark)
                return f.read().decode('utf-8', 'replace')
        except FileNotFoundError:
            return ''

    def last_console_line(self):
        lines = [l for l in _tail(self.console_path, 5).splitlines() if l.strip()]
        return lines[-1] if lines else ''


def _short(cmd, n=80):
    s = cmd if isinstance(cmd, str) else repr(cmd)
    s = ' '.join(s.split())
    return s if len(s) <= n else s[:n - 3] + '...'


_ANSI_RE = re.compile(r'\x1b(\[[0-9;?]*[A-Za-z]|[A-Za-z])')


def _printable(text):
    """Console text without terminal escapes (SeaBIOS clears the screen)."""
    return _ANSI_RE.sub('', text).replace('\r', '')


def _indent(text, prefix='    '):
    return '\n'.join(prefix + l for l in text.splitlines())


# --------------------------------------------------------------------------
# kernel splat detection
# --------------------------------------------------------------------------

# Debian's kernel and the debug kernel: WARN/BUG/Oops, lockups, list and
# refcount checks; the debug kernel adds KASAN, KFENCE, UBSAN, lockdep and
# RCU checks (all "WARNING:"/"BUG:"), debugobjects (ODEBUG), netdev
# reference tracking, hung tasks and kmemleak (the guests' rmmod prints a
# kmemleak report on the console, see mkinitramfs.sh).
SPLAT_RE = re.compile(
    r'WARNING:|BUG:|Oops|Call Trace|watchdog: BUG|soft lockup|hard LOCKUP|'
    r'refcount_t:|list_add corruption|list_del corruption|kernel BUG|'
    r'general protection|unreferenced object|KASAN|KFENCE|UBSAN|'
    r'ODEBUG:|ref_tracker:|unregister_netdevice: waiting|'
    r'blocked for more than|INFO: task|lockdep|Kernel panic|'
    r'BUG [\w-]+ \(|FIX [\w-]+:')	# SLUB's own reports (slub_debug)


def _splat_lines(text):
    return [l.rstrip() for l in text.splitlines() if SPLAT_RE.search(l)]


def dmesg_check(text):
    """Return the lines of kernel log text that look like a kernel splat,
    leaving out the emulator's own (emulator_warnings())."""
    return _splat_lines(_without_emulator(text)[0])


# Splats the emulator causes, not the guest's code.  QEMU's TCG (no KVM on
# these machines) now and then leaks a single-step #DB into the guest
# kernel; the kernel's exc_debug_kernel() then warns about DR_STEP (its
# comment names QEMU as the known cause).  Seen at 0.6 s into a boot, before
# any module was loaded, and once 105 s into a bench guest's life.  pcinet
# cannot cause it: it sets no trap flag, no debug register and no kprobe.
# A boot whose every warning is of this kind, with no BUG/Oops/panic, is
# discarded (VM.wait_ready()); later, the warning's block (up to its "end
# trace" line) is left out of dmesg_check() and reported by the runner as
# one "#" line, never as a pass of anything else: any other splat in or
# after it still fails the case.
EMULATOR_SPLAT_RE = re.compile(r'WARNING: .* at arch/x86/kernel/traps\.c:\d+ '
                               r'exc_debug_kernel')
_REAL_SPLAT_RE = re.compile(r'WARNING:|BUG:|Oops|Kernel panic|KASAN|KFENCE|'
                            r'UBSAN|general protection')
BOOT_RETRIES = 2


def _without_emulator(text):
    """(text without the emulator's warning blocks, their first lines)."""
    kept, found = [], []
    skip = 0
    for line in text.splitlines(keepends=True):
        if skip:
            if _REAL_SPLAT_RE.search(line):
                skip = 0		# not the warning's own dump: keep it
            else:
                skip -= 1
                if '---[ end trace' in line:
                    skip = 0
                continue
        if EMULATOR_SPLAT_RE.search(line):
            found.append(line.rstrip().split('] ', 1)[-1])
            skip = 120		# the dump's length bound, if no end line
            continue
        kept.append(line)
    return ''.join(kept), found


def emulator_warnings(text):
    """The emulator's #DB warnings (first lines) in kernel log text."""
    return _without_emulator(text)[1]


def emulator_splat(text):
    """The first line of an emulator-caused splat in a boot's console, or
    None if there is none or the boot also shows any other kind."""
    lines = _splat_lines(text)
    warnings = [l for l in lines if 'WARNING:' in l]
    if not warnings or any(not EMULATOR_SPLAT_RE.search(l) for l in warnings):
        return None
    if any(k in l for l in lines for k in ('BUG:', 'Oops', 'Kernel panic',
                                           'KASAN', 'UBSAN', 'KFENCE')):
        return None
    return warnings[0].split('] ', 1)[-1]


# --------------------------------------------------------------------------
# Topology (fixture)
# --------------------------------------------------------------------------

CONFIG = {
    'machines': ('a', 'b'),	# VM names
    'links': None,		# [(x, y), ...]: one fabric each; None: one link
				# joining all machines; [] no ivshmem device
    'fabric': True,		# False: no link at all (same as links=[])
    'fabric_size': '16M',	# or a list: per link
    'fabric_control': False,	# True: fault injection, Fabric.fault()
    'vectors': 4,		# doorbells: link, net, tty, virtio (fewer: the
				# driver rings the missing ones as vector 0)
    'fabric_binary': None,	# default: fabric_binary()
    'mem': 1024,
    'smp': 1,
    'append': '',		# extra kernel command line (+ $PCINET_APPEND)
    'vm_args': {},		# name -> extra QEMU args
    'nic': False,		# False: "-nic none" (vm_args may add a NIC)
    'fabric_vio': None,		# virtio regions of this size ('8M'), fabric -V
    'fabric_ntb': False,	# True: every link an emulated NTB (fabric -N);
				# a list: per link
    'extra_modules': [],	# .ko files put in the guests' /lib/modules/extra
    # (or a function returning them, called when a case is to run)
    'storage': False,		# the initramfs with the storage tools and
				# modules (mkinitramfs.sh --storage: fio,
				# mke2fs, ext4, ...), shared by all
}
# Options that describe the machines and links (those a case may override
# with @case(topology=...)); extra_modules and storage are the initramfs,
# shared by all.
TOPOLOGY_KEYS = tuple(k for k in CONFIG if k not in ('extra_modules',
                                                     'storage'))


def configure(**kw):
    """Set topology options (see CONFIG) before main() runs."""
    if 'vms' in kw:			# the old name of machines
        kw['machines'] = kw.pop('vms')
    for k in kw:
        if k not in CONFIG:
            raise KeyError(f'unknown option {k}')
    CONFIG.update(kw)


def topology_config(override=None):
    """CONFIG with a case's topology options applied (only the keys that
    describe machines and links)."""
    override = dict(override or {})
    if 'vms' in override:
        override['machines'] = override.pop('vms')
    for k in override:
        if k not in TOPOLOGY_KEYS:
            raise KeyError(f'not a topology option: {k}')
    cfg = dict(CONFIG, **override)
    return {k: cfg[k] for k in TOPOLOGY_KEYS}


class Topology:
    """Machines and the links between them, booted together.

    t.a / t['a'] are the VMs, t.vms the list; t.links the links (tuples of
    machine names), t.fabrics the Fabric of each (same order), t.fabric the
    first one (or None); t.ifname(vm, peer) the interface of vm's link to
    peer.  Each link is a fabric of its own (a pcinet link joins two
    machines; a fabric with more is legal but is not one pcinet link).
    """

    def __init__(self, workdir, kernel, initrd, cfg=None):
        """cfg: topology options that differ from CONFIG."""
        cfg = self.cfg = topology_config(cfg)
        self.workdir = Path(workdir)
        names = tuple(cfg['machines'])
        if len(set(names)) != len(names):
            raise HarnessError(f'machine names repeat: {names}')
        links = ([] if not cfg['fabric'] else
                 [names] if cfg['links'] is None else
                 [tuple(l) for l in cfg['links']])
        for link in links:
            bad = [n for n in link if n not in names]
            if bad or len(set(link)) != len(link) or not link:
                raise HarnessError(f'link {link}: machines {names}')
        self.links = links
        self.fabrics = []
        for i, link in enumerate(links):
            # the first link keeps the name every earlier log used
            sock = 'fabric.sock' if i == 0 else f'fabric{i}.sock'
            size, ntb = cfg['fabric_size'], cfg['fabric_ntb']
            self.fabrics.append(Fabric(self.workdir / sock,
                                       size=size[i] if isinstance(
                                           size, (list, tuple)) else size,
                                       vectors=cfg['vectors'],
                                       binary=cfg['fabric_binary'],
                                       control=cfg['fabric_control']))
            self.fabrics[-1].vio = cfg['fabric_vio']
            self.fabrics[-1].ntb = (ntb[i] if isinstance(ntb, (list, tuple))
                                    else ntb)
        self.fabric = self.fabrics[0] if self.fabrics else None
        self.vms = [VM(n, self.workdir, kernel, initrd,
                       fabrics=[f for l, f in zip(links, self.fabrics)
                                if n in l],
                       mem=cfg['mem'], smp=cfg['smp'], append=cfg['append'],
                       extra_args=cfg['vm_args'].get(n, ()), nic=cfg['nic'])
                    for n in names]
        self.dirty = None
        self.boot_time = None

    def __getitem__(self, name):
        for vm in self.vms:
            if vm.name == name:
                return vm
        raise KeyError(name)

    def __getattr__(self, name):
        if name.startswith('_') or name in ('vms', 'fabric', 'fabrics',
                                            'links', 'cfg'):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def _name(self, vm):
        return vm if isinstance(vm, str) else vm.name

    def vm_links(self, vm):
        """The links of vm, in the order its interfaces are numbered."""
        n = self._name(vm)
        return [l for l in self.links if n in l]

    def ifname(self, vm, peer):
        """pcinet<i>: the interface of vm on its link to peer."""
        n, p = self._name(vm), self._name(peer)
        for i, l in enumerate(self.vm_links(n)):
            if p in l:
                return f'pcinet{i}'
        raise KeyError(f'no link between {n} and {p}')

    def fabric_of(self, vm, peer):
        n, p = self._name(vm), self._name(peer)
        for l, f in zip(self.links, self.fabrics):
            if n in l and p in l:
                return f
        raise KeyError(f'no link between {n} and {p}')

    def boot(self, before_start=None):
        """Start the fabrics and every VM, then wait until all are ready.
        before_start(vm), if given, runs before each VM starts (e.g. to
        wait for a socket the VM before it creates)."""
        t0 = time.monotonic()
        for f in self.fabrics:
            f.start()
        for vm in self.vms:		# start all, then wait: they boot in parallel
            if before_start:
                before_start(vm)
            vm.start()
        for vm in self.vms:
            vm.wait_ready()
        self.boot_time = time.monotonic() - t0
        info('topology up in %.1fs (%s%s)' % (self.boot_time, ', '.join(
            '%s %.1fs' % (vm.name, vm.boot_time) for vm in self.vms),
            '; links ' + ' '.join('-'.join(l) for l in self.links)
            if len(self.links) > 1 else ''))
        return self

    def mark_dirty(self, why='requested by the case'):
        """Boot a fresh topology before the next case."""
        self.dirty = why

    def health(self):
        """None if reusable, else why not."""
        if self.dirty:
            return self.dirty
        for f in self.fabrics:
            if not f.alive():
                return 'fabric died'
        for vm in self.vms:
            if not vm.alive():
                return f'{vm.name} is not running'
            if vm.broken or vm.stale or vm.stopped:
                return f'{vm.name}: {vm.broken or vm.stale or "stopped"}'
        return None

    def teardown(self):
        for vm in self.vms:
            vm.kill(signal.SIGCONT)
            vm.kill(signal.SIGKILL)
            vm._close()
        for f in self.fabrics:
            f.stop()


# --------------------------------------------------------------------------
# the module under test: is the one a guest loaded the one built here?
# --------------------------------------------------------------------------

KO = '/lib/modules/extra/pcinet.ko'	# where mkinitramfs.sh puts it
_SOURCES = ROOT / 'drivers/net/pcinet'


def _note_build_id(data):
    """The GNU build id (hex) in a run of ELF notes, or None."""
    off = 0
    while off + 12 <= len(data):
        namesz, descsz, ntype = (int.from_bytes(data[off + i:off + i + 4],
                                                'little') for i in (0, 4, 8))
        name_end = off + 12 + ((namesz + 3) & ~3)
        desc = data[name_end:name_end + descsz]
        if ntype == 3 and data[off + 12:off + 12 + namesz].rstrip(b'\0') \
                == b'GNU':
            return desc.hex()
        off = name_end + ((descsz + 3) & ~3)
    return None


def build_id(ko):
    """The GNU build id of a .ko (ELF64 little-endian), hex."""
    d = Path(ko).read_bytes()
    if d[:4] != b'\x7fELF' or d[4] != 2 or d[5] != 1:
        raise HarnessError(f'{ko}: not an ELF64 little-endian file')
    shoff = int.from_bytes(d[0x28:0x30], 'little')
    shentsize = int.from_bytes(d[0x3a:0x3c], 'little')
    shnum = int.from_bytes(d[0x3c:0x3e], 'little')
    for i in range(shnum):
        sh = d[shoff + i * shentsize:shoff + (i + 1) * shentsize]
        if int.from_bytes(sh[4:8], 'little') != 7:	# SHT_NOTE
            continue
        off = int.from_bytes(sh[0x18:0x20], 'little')
        size = int.from_bytes(sh[0x20:0x28], 'little')
        bid = _note_build_id(d[off:off + size])
        if bid:
            return bid
    raise HarnessError(f'{ko}: no GNU build id')


def check_fresh_build(ko=None):
    """HarnessError unless ko (default PCINET_KO) exists and is newer than
    every source of the module: a test must not pass on a stale build.
    A module given with PCINET_MODULE (another commit's) is not checked."""
    ko = Path(ko or PCINET_KO)
    if not ko.exists():
        raise HarnessError(f'{ko} missing: make module')
    if os.environ.get('PCINET_MODULE'):
        return
    built = ko.stat().st_mtime
    # pcinet_ntb.c is a module of its own (make ntb), not pcinet.ko's
    newer = [p.name for p in sorted(_SOURCES.glob('*.[ch]'))
             + [_SOURCES / 'Makefile'] if p.exists() and
             not p.name.endswith('.mod.c') and p.name != 'pcinet_ntb.c' and
             p.stat().st_mtime > built]
    if newer:
        fix = 'make debug-module' if KERNEL == 'debug' else 'make module'
        raise HarnessError(f'{ko} is older than {", ".join(newer)}: the '
                           f'guests would test a stale build ({fix})')


def check_module(vm, ko=None):
    """ModuleMismatch unless the pcinet module loaded in vm has the build id
    of ko (default PCINET_KO), the file built here."""
    ko = Path(ko or PCINET_KO)
    want = build_id(ko)
    # the agent carries binary output unchanged
    rc, out = vm.sh_bytes('cat /sys/module/pcinet/notes/.note.gnu.build-id')
    got = _note_build_id(out) if rc == 0 else None
    if got != want:
        raise ModuleMismatch(
            f'{vm.name}: the pcinet module loaded has build id {got}, '
            f'{ko} has {want}: the guest is not testing the module built '
            'here (initramfs built from another file? module rebuilt '
            'during the run?)' + ('' if rc == 0 else
                                  '\n' + out.decode(errors='replace').strip()))
    vm.module_checked = True


# --------------------------------------------------------------------------
# guest helpers
# --------------------------------------------------------------------------

def load(vm, args='', wait=('/sys/class/net/pcinet0',), timeout=5.0):
    """insmod pcinet with args unless it is loaded, check that the module
    in the guest is the one built here (check_module()), and wait until
    the paths in wait exist (its devices appear asynchronously)."""
    out = vm.run(f"grep -q '^pcinet ' /proc/modules && echo @@loaded || "
                 f"insmod {KO} {args}")
    if '@@loaded' not in out or not getattr(vm, 'module_checked', False):
        check_module(vm)
    if wait:
        vm.wait_until(' && '.join(f'[ -e {p} ]' for p in wait), timeout,
                      what=' and '.join(wait) + ' after insmod',
                      show='ls /sys/class/net /dev | grep -i pci; '
                      'dmesg | grep pcinet | tail -n 5')


TOOLS = ROOT / 'tools/testing/pcinet'


def need_tool(*names):
    """Skip the case unless pcinet's guest tools names (pcinet-poke,
    pcinet-ttyperf, ...) are built here: mkinitramfs.sh copies them into
    the guests when they are (make check builds them).  Built but missing
    in a guest is a failure, found by the case itself."""
    missing = [n for n in names if not os.access(TOOLS / n, os.X_OK)]
    if missing:
        skip(f'{" ".join(missing)} not built (make -C tools/testing/pcinet '
             f'{" ".join(missing)})')


def unload(vm, timeout=5.0):
    """rmmod pcinet, retried while something (an open tty closing
    asynchronously) still holds it; fails after timeout."""
    vm.wait_until("! grep -q '^pcinet ' /proc/modules || rmmod pcinet",
                  timeout, what='rmmod pcinet', show=UNLOAD_SHOW)


# What holds the module when rmmod keeps failing: the driver's last
# messages, then every user process (pid, name, state, where it sleeps;
# its kernel stack when it sleeps in the tty layer or uninterruptibly),
# marked "ttyPCI" when it has one open.  A process that is exiting has
# no files left but may still be closing one (the tty drains its output
# for up to closing_wait): that is why all are listed.
UNLOAD_SHOW = (
    'rmmod pcinet; grep "^pcinet " /proc/modules; '
    'dmesg | grep -i pcinet | tail -n 4; '
    'for p in /proc/[0-9]*; do '
    'pp=$(sed -n "s/^PPid:[[:space:]]*//p" $p/status 2>/dev/null); '
    '[ -n "$pp" ] && [ "$pp" != 2 ] && [ "${p#/proc/}" != 2 ] || continue; '
    'st=$(sed -n "s/^State:[[:space:]]*//p" $p/status); w=$(cat $p/wchan); '
    'o=; ls -l $p/fd 2>/dev/null | grep -q ttyPCI && o=" ttyPCI"; '
    'echo "proc ${p#/proc/} $(cat $p/comm) ${st%% *} $w$o"; '
    'case "$st $w" in D*|R*|*tty*) head -n 6 $p/stack 2>/dev/null;; esac; '
    'done')


def net_up(vm, addr, ifname='pcinet0', mtu=None, prefix=24):
    """load(), then ifname up with addr/prefix only (and mtu if given)."""
    load(vm, wait=(f'/sys/class/net/{ifname}',))
    vm.run(f'ip addr flush dev {ifname} && '
           f'ip addr add {addr}/{prefix} dev {ifname} && '
           f'ip link set {ifname} up' + (f' mtu {mtu}' if mtu else ''))


def carrier_cond(want, ifname='pcinet0'):
    """A shell condition: ifname's carrier is want (0 when unreadable: the
    interface is down or gone)."""
    return (f'[ "$(cat /sys/class/net/{ifname}/carrier 2>/dev/null '
            f'|| echo 0)" = {int(want)} ]')


def link_state(vm, ifname='pcinet0'):
    """{'carrier': 0/1, 'operstate': str} of ifname, from sysfs
    (operstate 'absent' when there is no such interface)."""
    out = vm.run(f'd=/sys/class/net/{ifname}; [ -e $d ] || '
                 '{ echo "0 absent"; exit 0; }; '
                 'echo "$(cat $d/carrier 2>/dev/null || echo 0) '
                 '$(cat $d/operstate)"')
    c, state = out.split()[-2:]
    return {'carrier': int(c), 'operstate': state}


def wait_carrier(vm, want, timeout=10.0, ifname='pcinet0'):
    """Wait until ifname's carrier is want (1 or 0); returns the seconds
    it took (guest clock).  Fails the case after timeout seconds, with the
    interface's state and the driver's last messages."""
    return vm.wait_until(
        carrier_cond(want, ifname), timeout, what=f'{ifname} carrier {want}',
        show=f'echo "carrier $(cat /sys/class/net/{ifname}/carrier '
        f'2>/dev/null) operstate $(cat /sys/class/net/{ifname}/operstate '
        '2>/dev/null)"; dmesg | grep pcinet | tail -n 5', interval=0.02)


def ping(src, dst_ip, count=3, size=56, timeout=30, wait=5):
    """ping from src; (True if all count replies came, the output)."""
    rc, out = src.sh(f'ping -c {count} -s {size} -W {wait} {dst_ip}', timeout)
    return rc == 0 and f'{count} packets received' in out, out


def load_and_wait(addrs, ifname='pcinet0', timeout=15.0, mtu=None,
                  ping_peer=True):
    """addrs: {vm: address}.  net_up() on every vm, wait for carrier on
    all of them (timeout s each), then (ping_peer) a ping from the first
    vm to each other one (a second try: the first packet may race ARP on
    a slow guest).  Returns the slowest carrier's seconds."""
    vms = list(addrs)
    for vm in vms:
        net_up(vm, addrs[vm], ifname, mtu)
    took = max(wait_carrier(vm, 1, timeout, ifname) for vm in vms)
    if ping_peer:
        for peer in vms[1:]:
            ok, out = ping(vms[0], addrs[peer], count=1)
            if not ok:
                ok, out = ping(vms[0], addrs[peer], count=2)
            expect(ok, f'{vms[0].name} cannot ping {peer.name}:\n' + out)
    return took


def ethtool_stat(vm, name, ifname='pcinet0'):
    """One counter of `ethtool -S ifname`."""
    out = vm.run(f'ethtool -S {ifname}')
    for line in out.splitlines():
        k, _, v = line.strip().partition(':')
        if k == name:
            return int(v)
    raise CaseFailure(f'{vm.name}: no {name} in ethtool -S:\n{out}')


def tcp_transfer(src, dst, dst_ip, mib, port=5001, timeout=600,
                 rx_timeout=60):
    """Send mib MiB of random data src -> dst over TCP (socat); fails the
    case unless the sha256 the receiver computes is the sender's."""
    n = mib << 20
    dst.run(f'rm -f /tmp/rx.sha; (socat -u TCP-LISTEN:{port},reuseaddr '
            f'STDOUT | sha256sum >/tmp/rx.sha.part && mv /tmp/rx.sha.part '
            f'/tmp/rx.sha) >/dev/null 2>&1 &')
    tx = src.run(f'[ "$(stat -c %s /tmp/tx.{mib} 2>/dev/null)" = {n} ] || '
                 f'head -c {n} /dev/urandom >/tmp/tx.{mib}; '
                 f'sha256sum </tmp/tx.{mib}', timeout=timeout).split()[-2]
    # the listener may not be up yet: connect until it is (10 s)
    src.wait_until(f'socat -u FILE:/tmp/tx.{mib} TCP:{dst_ip}:{port} '
                   '2>/tmp/socat.err', 10, interval=0.2,
                   what=f'sending {mib} MiB to {dst_ip}:{port}',
                   show='cat /tmp/socat.err')
    dst.wait_until('[ -e /tmp/rx.sha ]', rx_timeout,
                   what=f'the receiver finishing {mib} MiB')
    rx = dst.run('cat /tmp/rx.sha').split()[0]
    expect(tx == rx, f'{src.name}->{dst.name} {mib} MiB: the receiver got '
           f'other bytes (sha256 sent {tx}, received {rx})')


def iperf3_parse(out, who=''):
    """The JSON document of `iperf3 -J` output; CaseFailure if there is
    none or it reports an error."""
    try:
        res = json.loads(out[out.index('{'):])
    except ValueError as e:
        raise CaseFailure(f'{who}: iperf3 output not JSON ({e}):\n'
                          + out[-1500:]) from None
    if res.get('error'):
        raise CaseFailure(f'{who}: iperf3: {res["error"]}')
    return res


def iperf3_mbps(res):
    """Receiver-side Mbit/s of an iperf3 result (TCP)."""
    return res['end']['sum_received']['bits_per_second'] / 1e6


def iperf3(client, server_ip, args='', secs=4, server=None, one_off=True,
           timeout=None, tries=1):
    """Run `iperf3 -J -i 0 -c server_ip -t secs args` on client; returns
    the parsed result.  server (the VM at server_ip): with one_off, start
    a one-off server there first (-s -1); on "busy"/"refused" between
    tries, start one (-s, or -s -1) if none runs."""
    timeout = timeout or secs + 60
    start = 'iperf3 -s -1 -D' if one_off else 'iperf3 -s -D'
    if server is not None and one_off:
        server.run(f'killall iperf3 >/dev/null 2>&1; {start} >/dev/null '
                   '2>&1; usleep 300000')
    for attempt in range(tries):
        rc, out = client.sh(f'iperf3 -J -i 0 -c {server_ip} -t {secs} {args}',
                            timeout)
        try:
            res = iperf3_parse(out, client.name)
            if rc == 0:
                return res
            err = f'exit {rc}'
        except CaseFailure as e:
            err = str(e)
        if attempt + 1 < tries and ('busy' in err or 'refused' in err):
            if server is not None:	# the last test still ending, or gone
                server.sh(f'pidof iperf3 >/dev/null || {start} '
                          '>/dev/null 2>&1; usleep 500000')
            time.sleep(1)
            continue
        break
    raise CaseFailure(f'{client.name}: iperf3 -c {server_ip} {args}: {err}')


# --------------------------------------------------------------------------
# runner
# --------------------------------------------------------------------------

class Case:
    def __init__(self, name, func, fresh, splat_ok, topology):
        self.name, self.func, self.fresh, self.splat_ok = name, func, fresh, splat_ok
        self.topology = topology


CASES = []


def case(name, fresh=False, splat_ok=False, topology=None):
    """Register a test case: func(t) gets the Topology.

    fresh: boot a new topology for this case.  splat_ok: do not fail the case
    on kernel splats (for cases that provoke them on purpose).  topology:
    options of CONFIG that differ for this case (machines, links, vm_args,
    ...); the runner boots such a topology when the current one differs.
    """
    def deco(func):
        if any(c.name == name for c in CASES):
            raise ValueError(f'duplicate case {name}')
        topology_config(topology)	# unknown options fail here, not later
        CASES.append(Case(name, func, fresh, splat_ok, topology))
        return func
    return deco


def _matches(name, patterns):
    if not patterns:
        return True
    for p in patterns:
        if p.startswith('='):		# exactly this case
            if name == p[1:]:
                return True
        elif any(ch in p for ch in '*?['):
            if fnmatch.fnmatchcase(name, p):
                return True
        elif p in name:
            return True
    return False


def _settle(vms, quiet=0.3, limit=2.0):
    """Wait until the consoles stop growing (late printk after a command)."""
    end = time.monotonic() + limit
    last = None
    while time.monotonic() < end:
        cur = [vm.console_mark() for vm in vms]
        if cur == last:
            return
        last = cur
        time.sleep(quiet)


def _failure_location(exc):
    tb = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(tb):
        if Path(fr.filename).resolve() != Path(__file__).resolve():
            return f'{Path(fr.filename).name}:{fr.lineno}: {fr.line}'
    return ''


def _reason(exc):
    if isinstance(exc, CaseFailure):
        return str(exc) or 'assertion failed'
    if isinstance(exc, AssertionError):
        return str(exc) or ('assertion failed at ' + _failure_location(exc))
    if isinstance(exc, HarnessError):
        return f'{type(exc).__name__}: {exc}'
    return (f'{type(exc).__name__}: {exc} (at {_failure_location(exc)})')


def _remove_stale_runs(runs):
    """Remove work dirs left by harness runs that were killed (-9)."""
    for d in runs.glob('*.*'):
        try:
            pid = int((d / 'harness.pid').read_text())
            os.kill(pid, 0)
            continue			# still running
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue			# no pid file: kept on purpose, or not ours
        shutil.rmtree(d, ignore_errors=True)


def make_workdir(prefix='run.'):
    """A new work dir build/qemu-run/<prefix>XXXX (or in /tmp if its
    socket paths would be too long) holding harness.pid, so that a later
    run removes it if this process dies without cleaning up; work dirs of
    such dead runs are removed now.  release_workdir() ends it."""
    runs = BUILD / 'qemu-run'
    runs.mkdir(parents=True, exist_ok=True)
    _remove_stale_runs(runs)
    wd = Path(tempfile.mkdtemp(prefix=prefix, dir=runs))
    if len(str(wd / 'fabric.sock')) > 100:	# sun_path is 108 bytes
        shutil.rmtree(wd)
        wd = Path(tempfile.mkdtemp(prefix='pcinet-' + prefix))
    (wd / 'harness.pid').write_text(f'{os.getpid()}\n')
    return wd


def release_workdir(wd, keep):
    """Remove the work dir, or with keep leave it (and no later run will
    remove it); returns whether it was kept."""
    if keep:
        (Path(wd) / 'harness.pid').unlink(missing_ok=True)
        info(f'kept {wd}')
    else:
        shutil.rmtree(wd, ignore_errors=True)
    return keep


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description='pcinet QEMU tests')
    ap.add_argument('-k', action='append', default=[], metavar='PATTERN',
                    help='run cases whose name contains PATTERN (or matches '
                    'it as a shell glob); repeatable; default: $TESTS')
    ap.add_argument('-l', '--list', action='store_true', help='list cases')
    ap.add_argument('--keep', action='store_true',
                    help='keep the work dir (logs); also PCINET_KEEP=1')
    ap.add_argument('-v', '--verbose', action='store_true',
                    help='echo every guest command and its status on '
                    'stderr; also PCINET_VERBOSE=1')
    args = ap.parse_args(argv)
    global VERBOSE
    VERBOSE = VERBOSE or args.verbose

    patterns = args.k or os.environ.get('TESTS', '').replace(',', ' ').split()
    # TESTS_EXCEPT: cases left out (the patterns of TESTS): scripts/check.sh
    # leaves the cases of check-all alone out of make check this way
    except_ = os.environ.get('TESTS_EXCEPT', '').replace(',', ' ').split()
    selected = [c for c in CASES if _matches(c.name, patterns)
                and not (except_ and _matches(c.name, except_))]
    # PCINET_REPEAT=N: the selection N times over, in one topology where it
    # allows (a flaky case counted: make check TESTS==name REPEAT=... boots anew)
    selected = selected * max(1, int(os.environ.get('PCINET_REPEAT', '1')))
    if args.list:
        for c in selected:
            print(c.name)
        return 0
    if not selected:
        if patterns:
            info(f'no case here matches (cases: '
                 f'{" ".join(c.name for c in CASES)})')
        print('0 passed, 0 failed')
        return 0

    keep = args.keep or os.environ.get('PCINET_KEEP') == '1'
    env = load_env()
    workdir = make_workdir()
    info(f'work dir {workdir}')

    passed = failed = skipped = 0
    topo = None
    boot_failures = 0
    stop = None

    def on_term(*_):
        raise KeyboardInterrupt
    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        if callable(CONFIG['extra_modules']):	# built only when cases run
            CONFIG['extra_modules'] = CONFIG['extra_modules']()
        if any(Path(m).name == 'pcinet.ko' for m in CONFIG['extra_modules']):
            check_fresh_build()
        initrd = build_initramfs(workdir / 'initramfs.cpio.gz',
                                 CONFIG['extra_modules'], env,
                                 storage=CONFIG['storage'])
        for c in selected:
            t0 = time.monotonic()
            marks = {}
            reason = skip_reason = None
            want = topology_config(c.topology)
            try:
                if topo is not None:
                    why = ('fresh topology requested' if c.fresh else
                           'the case needs another topology'
                           if topo.cfg != want else topo.health())
                    if why:
                        info(f'rebooting the topology: {why}')
                        topo.teardown()
                        topo = None
                if topo is None:
                    if boot_failures >= 2:
                        raise HarnessError('topology failed to boot twice, '
                                           'not trying again')
                    topo = Topology(workdir, env['VMLINUZ'], initrd,
                                    c.topology)
                    marks = {vm.name: vm.console_mark() for vm in topo.vms}
                    boot_failures += 1
                    topo.boot()
                    boot_failures = 0
                else:
                    marks = {vm.name: vm.console_mark() for vm in topo.vms}
                c.func(topo)
            except KeyboardInterrupt:
                raise
            except CaseSkip as e:
                skip_reason = str(e) or 'skipped'
            except BaseException as e:	# noqa: B902 - report everything
                reason = _reason(e)
                if isinstance(e, ModuleMismatch):
                    stop = reason
            if topo is not None:
                _settle(topo.vms)
                for vm in topo.vms:
                    for w in emulator_warnings(
                            vm.console_since(marks.get(vm.name, 0))):
                        info(f'{vm.name}: ignored the emulator\'s #DB '
                             f'warning (QEMU TCG, not pcinet): {w}')
                if reason is None and not c.splat_ok:
                    for vm in topo.vms:
                        splats = dmesg_check(vm.console_since(marks.get(vm.name, 0)))
                        if splats:
                            reason = (f'kernel splat on {vm.name}: {splats[0]}'
                                      + (f' (+{len(splats) - 1} more)'
                                         if len(splats) > 1 else ''))
                            break
            dt = time.monotonic() - t0
            _note_time(f'{c.name}{TAG}', dt, 'fail' if reason else
                       'skip' if skip_reason is not None else 'ok')
            if reason is None and skip_reason is not None:
                skipped += 1
                print(f'[SKIP] {c.name}{TAG}: {skip_reason}', flush=True)
                continue
            if reason is None:
                passed += 1
                print(f'[ OK ] {c.name}{TAG} ({dt:.1f}s)', flush=True)
                continue
            failed += 1
            first, _, rest = reason.partition('\n')
            print(f'[FAIL] {c.name}{TAG}: {first}')
            if rest:
                print(_indent(rest))
            if topo is not None:
                for vm in topo.vms:
                    text = _printable(vm.console_since(marks.get(vm.name, 0)))
                    lines = text.splitlines()[-80:]
                    print(f'    --- {vm.name} console (last {len(lines)} lines '
                          f'since the case started) ---')
                    if lines:
                        print(_indent('\n'.join(lines), '    | '))
                for link, fab in zip(topo.links, topo.fabrics):
                    if not fab.alive():
                        print(f'    --- fabric log (link {"-".join(link)}) ---')
                        print(_indent(_tail(fab.log, 20), '    | '))
                topo.mark_dirty(f'case {c.name} failed')
            sys.stdout.flush()
            if stop:
                print(f'stopping: {stop.splitlines()[0]}', flush=True)
                break
    except KeyboardInterrupt:
        print('interrupted', flush=True)
        failed += 1
    except HarnessError as e:
        print(f'harness error: {e}', flush=True)
        failed += 1
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if topo is not None:
            topo.teardown()
        # a failure keeps every console, QEMU and fabric log for diagnosis
        release_workdir(workdir, keep or failed > 0)
    print(summary(passed, failed, skipped), flush=True)
    return 1 if failed else 0


def _note_time(name, secs, status):
    """One line per case, "name<TAB>seconds<TAB>status", appended to the
    file $PCINET_TIMES names (scripts/check.sh: the ten slowest cases)."""
    path = os.environ.get('PCINET_TIMES')
    if path:
        with open(path, 'a') as f:
            f.write(f'{name}\t{secs:.1f}\t{status}\n')


def summary(passed, failed, skipped=0):
    """The closing line: "N passed, N failed", ", N skipped" if any."""
    return (f'{passed} passed, {failed} failed'
            + (f', {skipped} skipped' if skipped else ''))
