#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make demo: two machines joined by pcinet, traffic shown, all shut down.

    a (10.77.0.1) pcinet0 <== pcinet-fabric (ivshmem-doorbell) ==> pcinet0 b (10.77.0.2)
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

KO = '/lib/modules/extra/pcinet.ko'
IP = {'a': '10.77.0.1', 'b': '10.77.0.2'}


def show(vm, cmd, timeout=120):
    print(f'\n{vm.name}# {cmd}', flush=True)
    rc, out = vm.sh(cmd, timeout)
    print(out.rstrip(), flush=True)
    if rc:
        print(f'(exit {rc})', flush=True)
    return rc


def main():
    t0 = time.monotonic()
    env = h.load_env()
    (h.BUILD / 'qemu-run').mkdir(parents=True, exist_ok=True)
    wd = Path(tempfile.mkdtemp(prefix='demo.', dir=h.BUILD / 'qemu-run'))
    print('== building the guests\' initramfs', flush=True)
    initrd = h.build_initramfs(wd / 'initramfs.cpio.gz',
                               [h.ROOT / 'drivers/net/pcinet/pcinet.ko'], env)
    topo = h.Topology(wd, env['VMLINUZ'], initrd)
    serial = 0
    try:
        print('== booting two QEMU machines (TCG) joined by pcinet-fabric',
              flush=True)
        topo.boot()
        a, b = topo.a, topo.b
        print(f'   booted in {topo.boot_time:.1f}s', flush=True)
        print('\n== loading pcinet on both and configuring pcinet0', flush=True)
        for vm in (a, b):
            show(vm, f'insmod {KO} && ip addr add {IP[vm.name]}/24 dev pcinet0'
                 f' && ip link set pcinet0 up')
        for vm in (a, b):
            show(vm, 'for i in $(seq 100); do [ "$(cat /sys/class/net/pcinet0/'
                 'carrier)" = 1 ] && break; usleep 100000; done; '
                 'dmesg | grep pcinet | tail -n 3')
        show(a, 'ethtool -i pcinet0 | head -n 3; ip -s link show pcinet0')
        show(a, f'ping -c 5 {IP["b"]}')
        show(b, f'ping -c 5 -s 8000 {IP["a"]}')
        b.run('iperf3 -s -D >/dev/null 2>&1')
        a.run('iperf3 -s -D >/dev/null 2>&1')
        show(a, f'iperf3 -c {IP["b"]} -t 5 | tail -n 4')
        show(b, f'iperf3 -c {IP["a"]} -t 5 | tail -n 4')
        rc, _ = a.sh('[ -e /dev/ttyPCI0 ]')
        if rc == 0:
            print('\n== a command run over the serial line /dev/ttyPCI0',
                  flush=True)
            # a's termios first: what b writes waits in the ring until a
            # opens, and a first open with the default termios (echo on)
            # would type it back at b's shell.  b's shell is not
            # interactive (+i): no prompt, and no "can't access tty" whose
            # quote would swallow the command.
            a.run('stty -F /dev/ttyPCI0 raw -echo')
            b.run('stty -F /dev/ttyPCI0 raw -echo; (while :; do sh +i '
                  '</dev/ttyPCI0 >/dev/ttyPCI0 2>&1; done) >/dev/null 2>&1 &')
            serial = show(a, 'exec 3<>/dev/ttyPCI0; echo "echo hello from '
                          '\\$(hostname) over ttyPCI0; uname -r" >&3; '
                          'timeout 10 head -n 2 <&3')
        show(a, 'ip -s link show pcinet0; ethtool -S pcinet0')
        print('\n== shutting down', flush=True)
    finally:
        topo.teardown()
    print(f'demo done in {time.monotonic() - t0:.0f}s', flush=True)
    return 1 if serial else 0


if __name__ == '__main__':
    raise SystemExit(main())
