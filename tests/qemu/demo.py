#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make demo: two machines joined by pcinet, traffic shown, all shut down.

    a (10.77.0.1) pcinet0 <== pcinet-fabric (ivshmem-doorbell) ==> pcinet0 b (10.77.0.2)

Its work directory (build/qemu-run/demo.*: initramfs, console logs) is
removed when the demo succeeds and kept, with its path printed, when it
fails or with --keep / PCINET_KEEP=1.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

IP = {'a': '10.77.0.1', 'b': '10.77.0.2'}
TTY = '/dev/ttyPCI0'


def show(vm, cmd, timeout=120):
    print(f'\n{vm.name}# {cmd}', flush=True)
    rc, out = vm.sh(cmd, timeout)
    print(out.rstrip(), flush=True)
    if rc:
        print(f'(exit {rc})', flush=True)
    return rc


def demo(topo):
    """The show; returns 0 if everything worked."""
    print('== booting two QEMU machines (TCG) joined by pcinet-fabric',
          flush=True)
    topo.boot()
    a, b = topo.a, topo.b
    print(f'   booted in {topo.boot_time:.1f}s', flush=True)
    print('\n== loading pcinet on both and configuring pcinet0', flush=True)
    for vm in (a, b):
        print(f'\n{vm.name}# insmod {h.KO} && ip addr add {IP[vm.name]}/24 '
              'dev pcinet0 && ip link set pcinet0 up', flush=True)
    took = h.load_and_wait({a: IP['a'], b: IP['b']}, ping_peer=False)
    print(f'\n   carrier on both sides after {took:.1f}s (sysfs)', flush=True)
    rc = 0
    for vm in (a, b):
        rc |= show(vm, 'cat /sys/class/net/pcinet0/operstate; '
                   'dmesg | grep pcinet | tail -n 3')
    rc |= show(a, 'ethtool -i pcinet0 | head -n 3; ip -s link show pcinet0')
    rc |= show(a, f'ping -c 5 {IP["b"]}')
    rc |= show(b, f'ping -c 5 -s 8000 {IP["a"]}')
    for c, s in ((a, b), (b, a)):
        print(f'\n{c.name}# iperf3 -c {IP[s.name]} -t 5', flush=True)
        res = h.iperf3(c, IP[s.name], secs=5, server=s)
        sent = res['end']['sum_sent']
        print(f'   {h.iperf3_mbps(res):.0f} Mbit/s received, '
              f'{sent["bytes"] / 2**20:.0f} MiB sent, '
              f'{sent.get("retransmits", 0)} retransmits', flush=True)
    if a.sh(f'[ -e {TTY} ]')[0] == 0:
        print(f'\n== a command run over the serial line {TTY}', flush=True)
        # a's termios first: what b writes waits in the ring until a
        # opens, and a first open with the default termios (echo on)
        # would type it back at b's shell.  b's shell is not
        # interactive (+i): no prompt, and no "can't access tty" whose
        # quote would swallow the command.
        a.run(f'stty -F {TTY} raw -echo')
        b.run(f'stty -F {TTY} raw -echo; (while :; do sh +i '
              f'<{TTY} >{TTY} 2>&1; done) >/dev/null 2>&1 &')
        rc |= show(a, f'exec 3<>{TTY}; echo "echo hello from '
                   '\\$(hostname) over ttyPCI0; uname -r" >&3; '
                   'timeout 10 head -n 2 <&3')
    rc |= show(a, 'ip -s link show pcinet0; ethtool -S pcinet0')
    for vm in (a, b):
        splats = h.dmesg_check(vm.console_log())
        if splats:
            print(f'\nkernel splat on {vm.name}: {splats[0]}', flush=True)
            rc = 1
    return rc


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--keep', action='store_true',
                    help='keep the work dir (logs); also PCINET_KEEP=1')
    args = ap.parse_args()
    keep = args.keep or os.environ.get('PCINET_KEEP') == '1'
    t0 = time.monotonic()
    env = h.load_env()
    h.check_fresh_build()
    wd = h.make_workdir('demo.')
    print('== building the guests\' initramfs', flush=True)
    rc = 1
    topo = None
    try:
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz', [h.PCINET_KO],
                                   env)
        topo = h.Topology(wd, env['VMLINUZ'], initrd)
        rc = demo(topo)
        print('\n== shutting down', flush=True)
    except (h.HarnessError, h.CaseFailure) as e:
        print(f'\ndemo failed: {e}', flush=True)
        if topo is not None:
            h.print_console_tails(topo.vms, 30)
    finally:
        if topo is not None:
            topo.teardown()
        if h.release_workdir(wd, keep=bool(rc or keep)):
            print(f'work dir kept: {wd} (console logs, initramfs)', flush=True)
    print(f'demo {"done" if rc == 0 else "FAILED"} in '
          f'{time.monotonic() - t0:.0f}s', flush=True)
    return 1 if rc else 0


if __name__ == '__main__':
    raise SystemExit(main())
