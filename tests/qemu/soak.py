#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make soak MINUTES=N: a link under traffic and faults of every kind.

Two guests (the debug kernel unless PCINET_KERNEL says otherwise) carry
bulk TCP both ways (iperf3) and a ttyPCI stream each way, while the
fabric's faults come one after another: scribbles of every region and
mode, dropped, delayed, duplicated and frozen doorbells, a peer frozen
(SIGSTOP/SIGCONT) and a driver reloaded.  After each fault the link must
come back by itself; the time it took is recorded.  At the end: bytes
moved, faults injected, link resets, recovery time p50/p99/max, and every
kernel report seen on a console (any report fails the soak).

    python3 tests/qemu/soak.py --minutes 30 [--seed N] [--keep]
"""

import argparse
import random
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import os  # noqa: E402
os.environ.setdefault('PCINET_KERNEL', 'debug')
import pcinet_harness as h  # noqa: E402

TTY = '/dev/ttyPCI0'
IP = {'a': '10.79.0.1', 'b': '10.79.0.2'}
PEER = {'a': 'b', 'b': 'a'}
REGIONS = ('hdr', 'ctrl0', 'ctrl1', 'net0', 'net1', 'tty0', 'tty1', 'all')


def setup(vm):
    h.net_up(vm, IP[vm.name])


def traffic(t):
    """Start, once per driver load, the traffic that runs for the whole soak
    on both sides: an iperf3 server, a client restarted whenever it ends,
    a ttyPCI writer and reader, each in a loop that restarts it.  The loops'
    PIDs go to /tmp/soak.pids, which stop_traffic() uses.  The termios are
    set before anything writes, so stty never waits for a drain."""
    for vm in (t.a, t.b):
        peer = IP[PEER[vm.name]]
        vm.run('if [ ! -e /tmp/soak.pids ]; then '
               f'stty -F {TTY} raw -echo clocal; '
               'pidof iperf3 >/dev/null || iperf3 -s -D >/dev/null 2>&1; '
               f'(while :; do iperf3 -c {peer} -t 86400; sleep 1; done '
               '>/dev/null 2>&1 & echo $! >>/tmp/soak.pids); '
               f'(while :; do cat /dev/urandom >{TTY}; sleep 1; done '
               '>/dev/null 2>&1 & echo $! >>/tmp/soak.pids); '
               f'(while :; do cat {TTY} >/dev/null; sleep 1; done '
               '>/dev/null 2>&1 & echo $! >>/tmp/soak.pids); fi', timeout=120)


def stop_traffic(vm):
    vm.run('[ -e /tmp/soak.pids ] && kill $(cat /tmp/soak.pids); '
           'killall iperf3 cat >/dev/null 2>&1; rm -f /tmp/soak.pids; true',
           timeout=120)


def agent_overhead(vm):
    """Median time of a command that does nothing: what recovered() pays
    for asking the guest, subtracted from its figure."""
    times = []
    for _ in range(5):
        t0 = time.monotonic()
        vm.run('true')
        times.append(time.monotonic() - t0)
    return sorted(times)[2]


def recovered(t, overhead, limit=30.0):
    """Seconds until a has carrier and a ping crosses to b and back (both
    directions of the link), polled in the guest; then b pings a too."""
    t0 = time.monotonic()
    n = int(limit * 20)
    rc, out = t.a.sh(f'i=0; while [ $i -lt {n} ]; do i=$((i + 1)); '
                     '[ "$(cat /sys/class/net/pcinet0/carrier 2>/dev/null)" = 1 ] '
                     f'&& ping -c 1 -W 1 {IP["b"]} >/dev/null 2>&1 && exit 0; '
                     'usleep 50000; done; exit 1', timeout=limit + 60)
    secs = max(0.0, time.monotonic() - t0 - overhead)
    if rc != 0:
        raise h.CaseFailure(f'a: link not back {limit}s after a fault')
    rc, _ = t.b.sh(f'ping -c 1 -W 2 {IP["a"]}', timeout=60)
    if rc != 0:
        raise h.CaseFailure('b cannot ping a although a pings b')
    return secs


def bytes_moved(vm):
    out = vm.run('cat /sys/class/net/pcinet0/statistics/tx_bytes 2>/dev/null '
                 '|| echo 0')
    return int(out.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--minutes', type=float, default=float(
        os.environ.get('MINUTES', '10')))
    ap.add_argument('--seed', type=int, default=int(time.time()))
    ap.add_argument('--keep', action='store_true')
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(f'soak: {args.minutes} min on the {h.KERNEL} kernel, seed '
          f'{args.seed}', flush=True)

    env = h.load_env()
    try:
        h.check_fresh_build()
    except h.HarnessError as e:
        print(f'soak: {e}')
        print(h.summary(0, 1))
        return 1
    wd = h.make_workdir('soak.')
    initrd = h.build_initramfs(wd / 'initramfs.cpio.gz', [h.PCINET_KO], env)
    h.configure(fabric_control=True)
    t = h.Topology(wd, env['VMLINUZ'], initrd)
    faults, recov, moved, reports = {}, [], 0, []
    failed = None
    try:
        t.boot()
        for vm in (t.a, t.b):
            setup(vm)
        overhead = agent_overhead(t.a)
        print(f'soak: a guest command costs {overhead:.2f}s; recovery times '
              'below are net of it', flush=True)
        recovered(t, overhead)
        traffic(t)
        base = {vm.name: bytes_moved(vm) for vm in (t.a, t.b)}
        start = time.monotonic()
        end = start + args.minutes * 60
        while time.monotonic() < end:
            time.sleep(rng.uniform(5, 15))
            kind = rng.choice(('scribble', 'scribble', 'drop', 'delay',
                               'freeze', 'sigstop', 'reload'))
            vm = rng.choice((t.a, t.b))
            if kind == 'scribble':
                region = rng.choice(REGIONS)
                mode = rng.choice(('random', 'bounds', 'bytes'))
                secs = rng.uniform(0.5, 5)
                t.fabric.fault(f'scribble {region} {rng.choice((100, 1000, 5000))} '
                               f'{secs:.3f} {mode} {rng.getrandbits(31)}')
                time.sleep(secs)
                while 'scribble=none' not in t.fabric.fault('status'):
                    time.sleep(0.05)
                t.fabric.fault('restore')
                kind = f'scribble {region} {mode}'
            elif kind == 'drop':
                t.fabric.fault(f'doorbell drop {rng.choice((20, 50, 90))}')
                time.sleep(rng.uniform(2, 8))
                t.fabric.fault('doorbell normal')
            elif kind == 'delay':
                t.fabric.fault(f'doorbell delay {rng.choice((5, 50, 200))}')
                t.fabric.fault(f'doorbell dup {rng.choice((10, 50))}')
                time.sleep(rng.uniform(2, 8))
                t.fabric.fault('doorbell normal')
            elif kind == 'freeze':
                t.fabric.fault(f'doorbell freeze {rng.choice((0, 1))}')
                time.sleep(rng.uniform(1, 4))
                t.fabric.fault('doorbell normal')
            elif kind == 'sigstop':
                vm.kill(signal.SIGSTOP)
                time.sleep(rng.uniform(0.2, 3))
                vm.kill(signal.SIGCONT)
            else:
                moved += bytes_moved(vm) - base[vm.name]
                stop_traffic(vm)
                vm.run('usleep 500000; rmmod pcinet', timeout=120)
                setup(vm)
                base[vm.name] = bytes_moved(vm)
            faults[kind] = faults.get(kind, 0) + 1
            recov.append(recovered(t, overhead))
            print(f'soak: {(time.monotonic() - start) / 60:5.1f} min: '
                  f'{kind} ({vm.name}): back in {recov[-1]:.2f}s', flush=True)
            traffic(t)
            for v in (t.a, t.b):
                reports += h.dmesg_check(v.console_log())
            if reports:
                failed = f'kernel report after {kind}'
                break
        moved += sum(bytes_moved(v) - base[v.name] for v in (t.a, t.b))
        resets = {v.name: int(v.run('dmesg | grep -cE "link [0-9]+ '
                                    '(reset|down)" || true').split()[-1])
                  for v in (t.a, t.b)}
    except (h.HarnessError, h.CaseFailure) as e:
        failed = str(e)
        resets = {}
    finally:
        t.teardown()
    recov.sort()

    def pct(p):
        return recov[min(len(recov) - 1, int(p / 100 * len(recov)))] if recov else 0
    print(f'soak: {args.minutes} min, {sum(faults.values())} faults '
          f'({", ".join(f"{k} {v}" for k, v in sorted(faults.items()))})')
    print(f'soak: {moved / 1e9:.2f} GB moved by pcinet0 (tx, both sides); '
          f'link resets/downs logged: {resets}')
    print(f'soak: recovery p50 {pct(50):.2f}s p99 {pct(99):.2f}s max '
          f'{(recov[-1] if recov else 0):.2f}s')
    for r in reports[:20]:
        print(f'soak: report: {r}')
    if h.release_workdir(wd, keep=bool(failed or args.keep)) and failed:
        print(f'soak: FAILED: {failed} (logs in {wd})')
    print(h.summary(0 if failed else 1, 1 if failed else 0))
    return 1 if failed else 0


if __name__ == '__main__':
    raise SystemExit(main())
