#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Harness self-tests: they need the fabric but not the pcinet module.

Run: python3 tests/qemu/test_boot.py [-k PATTERN]
"""

import hashlib
import signal
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True	# no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

IVSHMEM_VENDOR, IVSHMEM_DEVICE = '0x1af4', '0x1110'


@h.case('boot')
def _(t):
    kver = h.load_env()['KVER']
    for vm in t.vms:
        out = vm.run('uname -r; hostname').split()
        h.expect(out == [kver, vm.name],
                 f'{vm.name}: uname -r/hostname = {out}, want [{kver}, {vm.name}]')


@h.case('ivshmem-present')
def _(t):
    # One line per PCI device: "<bdf> <vendor> <device>", plus BAR2's
    # (the shared window) start and end from the resource file.
    script = r'''
for d in /sys/bus/pci/devices/*; do
    set -- $(sed -n 3p $d/resource)
    echo "${d##*/} $(cat $d/vendor) $(cat $d/device) $1 $2"
done'''
    for vm in t.vms:
        found = [l.split() for l in vm.run(script).splitlines()
                 if l.split()[1:3] == [IVSHMEM_VENDOR, IVSHMEM_DEVICE]]
        h.expect(len(found) == 1, f'{vm.name}: {len(found)} ivshmem devices')
        start, end = (int(x, 16) for x in found[0][3:5])
        h.expect(end - start + 1 == 16 << 20,
                 f'{vm.name}: BAR2 is {end - start + 1:#x} bytes, want 16M')


@h.case('agent-binary-output')
def _(t):
    # Every byte value, including NUL, CR, LF and '@', exactly once.
    want = bytes(range(256))
    rc, out = t.a.sh_bytes("printf '%s'" % ''.join('\\%03o' % b for b in want))
    h.expect(rc == 0 and out == want, f'rc={rc}, got {out[:64]!r}...')
    # Output that mimics the framing, no trailing newline, rc and stderr.
    rc, out = t.a.sh_bytes('echo "@@END 1 0"; echo "@@OUT 2"; echo -n tail; '
                           'echo err >&2; exit 7')
    h.expect(rc == 7 and out == b'@@END 1 0\n@@OUT 2\ntailerr\n',
             f'rc={rc}, out={out!r}')
    # Empty output, and a large random blob checked against the guest's md5.
    h.expect(t.b.sh_bytes('true') == (0, b''), 'empty output not empty')
    rc, out = t.b.sh_bytes('head -c 200000 /dev/urandom >/tmp/blob; cat /tmp/blob')
    md5 = t.b.run('md5sum </tmp/blob').split()[0]
    h.expect(rc == 0 and len(out) == 200000 and
             hashlib.md5(out).hexdigest() == md5, 'random blob mismatch')
    # str API: invalid UTF-8 survives as surrogate escapes.
    rc, s = t.b.sh("printf 'caf\\303\\251 \\377'")
    h.expect(s.encode('utf-8', 'surrogateescape') == b'caf\xc3\xa9 \xff', repr(s))


@h.case('agent-wait-until')
def _(t):
    # vm.wait_until(): true at once, true later (guest clock), a timeout
    # with the diagnosis, and must=False.
    vm = t.a
    took = vm.wait_until('true', 5)
    h.expect(0 <= took < 1, f'true took {took}s')
    vm.run('rm -f /tmp/wu; (sleep 1; touch /tmp/wu) >/dev/null 2>&1 &')
    took = vm.wait_until('[ -e /tmp/wu ]', 10)
    h.expect(0.8 <= took < 5, f'a file made after 1 s appeared after {took}s')
    t0 = time.monotonic()
    try:
        vm.wait_until('[ -e /nonexistent ]', 1, what='the impossible',
                      show='echo diagnosis-here')
        raise h.CaseFailure('wait_until did not time out')
    except h.CaseFailure as e:
        h.expect('the impossible not within 1s' in str(e) and
                 'diagnosis-here' in str(e), f'timeout message: {e}')
    h.expect(time.monotonic() - t0 < 10, 'a 1 s wait took long')
    h.expect(vm.wait_until('false', 0.5, must=False) is None,
             'must=False did not give None')


# One line of each kind of report a case must fail on, as the kernel prints
# it: Debian's kernel's allocator checks (harness DEBIAN_CHECKS: SLUB and
# KFENCE) and the debug kernel's checkers.
REPORTS = [
    'BUG skbuff_head_cache (Tainted: G           OE     ): Poison overwritten',
    'FIX skbuff_head_cache: Restoring Poison 0xffff8880 -0xffff8881=0x6b',
    'BUG: KFENCE: use-after-free write in pcinet_poll+0x1f0/0x4a0 [pcinet]',
    'BUG: KASAN: slab-use-after-free in napi_skb_cache_get+0x8d/0x120',
    'WARNING: CPU: 0 PID: 7 at net/core/dev.c:1 __napi_poll+0x1/0x2',
    'kernel BUG at drivers/block/virtio_blk.c:1123!',
    'unreferenced object 0xffff888004e4c000 (size 2048):',
]


@h.case('splat-detect', splat_ok=True)
def _(t):
    """Every kind of kernel report fails a case: written to the kernel log
    (/dev/kmsg, error level: the console shows it), each is found by the
    check the runner applies to every case's consoles."""
    mark = t.a.console_mark()
    for line in REPORTS:
        t.a.run(f"echo '<3>{line}' >/dev/kmsg")
    t.a.wait_until("dmesg | grep -q 'unreferenced object'", 10)
    time.sleep(0.5)		# the console file lags the kernel log a little
    found = '\n'.join(h.dmesg_check(t.a.console_since(mark)))
    missed = [line for line in REPORTS if line.split(' (')[0] not in found]
    h.expect(not missed, f'reports not detected: {missed}')
    t.mark_dirty()		# the next case must not inherit the reports


@h.case('tools')
def _(t):
    vm = t.a
    for cmd in ('iperf3 --version', 'ethtool --version', 'tcpdump --version',
                'ip -V', 'tc -V', 'ss -V', 'base64 --help', 'ping -h'):
        rc, out = vm.sh(cmd)
        # busybox --help and ping -h exit 1 after printing their usage
        h.expect(rc == 0 or cmd.endswith(('--help', '-h')) and 'Usage' in out,
                 f'`{cmd}` exited {rc}:\n{out}')
    h.expect('iproute2' in vm.run('ip -V'), 'ip is not iproute2')
    vm.run('ip -br addr show lo | grep -q 127.0.0.1')
    # Big pings on loopback (busybox ping, -s up to 65507).
    vm.run('ping -c 2 -i 0.2 -W 2 -s 65507 127.0.0.1')
    # iperf3 over loopback; the server is a background job (output redirected).
    vm.run('iperf3 -s -1 -D --logfile /tmp/iperf3-s.log; sleep 0.5')
    out = vm.run('iperf3 -c 127.0.0.1 -t 1 -f m', timeout=60)
    h.expect('receiver' in out, 'iperf3 client output:\n' + out)
    # tcpdump captures on lo.
    vm.run('tcpdump -i lo -c 2 -n icmp >/tmp/td.log 2>&1 & sleep 1; '
           'ping -c 2 -W 1 127.0.0.1 >/dev/null; wait')
    td = vm.run('cat /tmp/td.log')
    h.expect('ICMP echo' in td, 'tcpdump saw no ICMP:\n' + td)
    h.expect('Link detected' in vm.run('ethtool lo'), 'ethtool lo')


@h.case('vm-stop-cont-restart')
def _(t):
    # SIGSTOP makes the agent time out with a clear error ...
    t.a.kill(signal.SIGSTOP)
    try:
        t.a.sh('true', timeout=2)
        raise h.CaseFailure('stopped VM answered')
    except h.AgentTimeout as e:
        h.expect('SIGSTOP' in str(e), f'unclear timeout message: {e}')
    t.a.kill(signal.SIGCONT)
    # ... and a restart (SIGKILL + fresh boot, reattaching to the fabric)
    # brings it back; b is unaffected.
    t.a.restart()
    h.expect(t.a.run('hostname').strip() == 'a', 'a after restart')
    h.expect(t.b.run('echo hi').strip() == 'hi', 'b after a restarted')


@h.case('vm-dies', fresh=True)
def _(t):
    # A VM that dies is reported, not hung on; the runner reboots the
    # topology before the next case.
    t.b.kill(signal.SIGKILL)
    try:
        t.b.sh('true', timeout=10)
        raise h.CaseFailure('dead VM answered')
    except h.VMError as e:
        h.expect('exited' in str(e), f'unclear error: {e}')
    h.expect(t.health() is not None, 'topology still looks healthy')


@h.case('topology-links', topology=dict(machines=('a', 'b', 'c'),
                                        links=[('a', 'b'), ('b', 'c')]))
def _(t):
    # Each machine has one ivshmem-doorbell device per link, in the order
    # of the links; a and c share nothing.
    h.expect([vm.name for vm in t.vms] == ['a', 'b', 'c'], 'machines')
    for vm in t.vms:
        n = int(vm.run('grep -l 0x1110 /sys/bus/pci/devices/*/device | wc -l'))
        want = len(t.vm_links(vm))
        h.expect(n == want, f'{vm.name}: {n} ivshmem devices, want {want}')
    h.expect((t.ifname('b', 'a'), t.ifname('b', 'c'), t.ifname('c', 'b'))
             == ('pcinet0', 'pcinet1', 'pcinet0'), 'interface names')
    h.expect(t.fabric_of('a', 'b') is not t.fabric_of('b', 'c'),
             'two links share a fabric')


if __name__ == '__main__':
    sys.exit(h.main())
