#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench: pcinet against virtio-net over QEMU's `-netdev stream`.

One pair of QEMU guests (TCG, same vCPUs, memory and kernel as the tests)
carries both links at once:

    +------------- a -------------+              +------------- b -------------+
    | pcinet0 10.77.0.1           |<== fabric ==>| pcinet0 10.77.0.2           |
    | eth0    10.88.0.1 (virtio)  |<== stream ==>| eth0    10.88.0.2 (virtio)  |
    +-----------------------------+  unix socket +-----------------------------+

and measures, each figure the median of --reps repetitions (default 3)
with min and max:

  - iperf3 TCP, a->b ("tx") and b->a ("rx", iperf3 -R), 1 and 4 streams,
    at MTU 1500, 9000 and 65535 on both links (virtio-net's host_mtu is
    65535, the most QEMU's uint16 property takes; its best MTU is picked
    from the three); guest CPU busy seconds per GB from /proc/stat on
    both sides; pcinet's doorbells and interrupts per packet from
    `ethtool -S pcinet0` and /proc/interrupts;
  - iperf3 UDP with 64-byte payloads, unlimited rate, a->b: packets per
    second received, loss;
  - latency: busybox `ping -A` (ping-pong, 1000 requests per repetition:
    p50, p99, mean) and sockperf ping-pong (UDP, user to user);
  - the raw limit: the guest's copy bandwidth into the shared window
    (tools/testing/pcinet/pcinet-memcpy), 1500-byte and 64 KiB chunks;
  - the ttyPCI byte throughput and echo round trip if /dev/ttyPCI0 exists
    (tools/testing/pcinet/pcinet-ttyperf), else "n/a";
  - evidence: kprobe + hist-trigger counts of every skb copy and software
    checksum function, by caller, during one bulk run on each link;
  - storage: disks and folders as users serve them across pcinet0 today,
    NBD (qemu-storage-daemon on a, nbd-client on b) and 9P over TCP (diod
    on a, the kernel's 9p client on b), with QEMU's own virtio-blk disk of
    b for reference: fio sequential 1 MiB (iodepth 8) and random 4 KiB
    (iodepth 32 and 1) I/O, guest CPU per GB, a tar copy of a source-like
    tree and a create/stat/unlink loop (measure_storage()).
  - scaling (scale_sweep(), after the pair, on machines of its own): one
    guest with N = 1, 2, 4, 8, 16, 19 links to N pcinet-peers on this
    machine (tests/qemu/scale.py): seconds from insmod to the last
    carrier, aggregate and per-link (min, max) iperf3 TCP Mbit/s with
    every peer sending to the guest at once, the guest's MemAvailable
    drop per link, pcinet interrupts per second over 5 s of idle.
  - the chassis (chassis_bench(), after the scaling, on machines of its
    own): make chassis's host and 4 boards (tests/qemu/chassis.py), iperf3
    TCP board1 -> board2 through the host's br0, board1 -> the host, and
    every board to the next at once (aggregate, per pair min and max, the
    host's CPU busy share).

Measuring and reporting are apart: this file measures and writes
bench/results/latest.json (every figure, the runs, the trace, the
metadata); bench/report.py turns that file into latest.md and latest.png
(gnuplot), at the end of a run or again later from saved results
(--report-only).  bench/figures.py defines every figure's key, unit and
label, for both.  Progress goes to stdout.  Usage:

    python3 bench/bench.py [--reps N] [--secs S] [--keep] [--out DIR]
    python3 bench/bench.py --report-only [--out DIR]   (= bench/report.py)
    python3 bench/bench.py --smoke    (boot, set up, 1 s of iperf3 per link,
                                       16 MiB through NBD and 9P, sha256 checked)
    python3 bench/bench.py --only storage   (the storage section alone, ~6 min:
                                       results/storage.json and storage.md)
    python3 bench/bench.py --only scale [--scale-n 1,2,4,8]
                                      (the scaling section alone, ~15 min:
                                       results/scale.json, scale.md, scale.png)
    python3 bench/bench.py --only chassis   (the chassis section alone, ~1.5 min:
                                       results/chassis.json and chassis.md)
    python3 bench/bench.py --only vhost     (stage 3: virtio-blk served by
                                       pcinet-vhost in a host guest against
                                       NBD over pcinet0 from that guest;
                                       results/vhost.json and vhost.md;
                                       bench/vhost_route.py)
    python3 bench/bench.py --only virtio    (virtio-blk over pcinet against NBD
                                       over pcinet0 with QEMU's own virtio-blk
                                       as reference, virtio-fs over pcinet
                                       against 9P/TCP over pcinet0, all served
                                       from this machine by pcinet-peer,
                                       ~15 min; not in the full run:
                                       results/virtio.json and virtio.md;
                                       bench/virtio_route.py)

Environment: BENCH_REPS, BENCH_SECS, BENCH_STORAGE_SECS, BENCH_META_FILES
(defaults for the options); those of
tests/qemu/pcinet_harness.py (QEMU, PCINET_FABRIC, PCINET_BOOT_TIMEOUT).
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests/qemu'))
sys.path.insert(0, str(HERE))
import pcinet_harness as h  # noqa: E402
import figures as F  # noqa: E402
import report  # noqa: E402
from figures import HOST_MTU, LABEL, LINKS, MTUS, PING_COUNT  # noqa: E402

ROOT = h.ROOT
TRACEFS = '/sys/kernel/tracing'
SOCKPERF_PORT = 11111
USER_HZ = 100
# the storage section
STORAGE_MIB = 128		# the NBD image, the 9P fio file, the virtio-blk disk
NBD_PORT = 10809
NINEP_PORT = 5640
SRV = '/srv'			# a: tmpfs with the NBD image and the 9P export
MNT9P = '/mnt/9p'		# b: the 9P mount
FIO_RAMP = 1			# s of each fio run not counted
TREE_FILES = 2000		# the tar copy's source-like tree
STORAGE_MTU = 65535		# pcinet0's MTU for the storage section

T0 = time.monotonic()


def mounted(path):
    """A guest shell test: is something mounted on path?  (The guests'
    busybox has no mountpoint applet.)"""
    return f'grep -q " {path} " /proc/mounts'


def progress(msg):
    t = int(time.monotonic() - T0)
    print(f'[{t // 60:2d}:{t % 60:02d}] {msg}', flush=True)


class BenchError(Exception):
    pass


def sh(vm, cmd, timeout=60):
    rc, out = vm.sh(cmd, timeout)
    return rc, out


def run(vm, cmd, timeout=60):
    rc, out = vm.sh(cmd, timeout)
    if rc != 0:
        raise BenchError(f'{vm.name}: `{cmd[:120]}` exited {rc}:\n{out[-1500:]}')
    return out


# --------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------

def fig(values, unit, note=None):
    """A figure: median, min, max of the repetitions."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return None
    f = {'median': statistics.median(vals), 'min': min(vals),
         'max': max(vals), 'n': len(vals), 'unit': unit,
         'reps': [round(v, 6) for v in vals]}
    if note:
        f['note'] = note
    return f


def pctl(sorted_vals, p):
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, math.ceil(p / 100 * len(sorted_vals)) - 1))
    return sorted_vals[k]


# --------------------------------------------------------------------------
# guest snapshots: /proc/stat, interface counters, ethtool -S, interrupts
# --------------------------------------------------------------------------

SNAP_CMD = (
    'echo @stat; head -1 /proc/stat; '
    'for i in pcinet0 eth0; do for f in tx_bytes tx_packets rx_bytes rx_packets; do '
    'echo "@net $i $f $(cat /sys/class/net/$i/statistics/$f 2>/dev/null || echo 0)"; '
    'done; done; echo @ethtool; ethtool -S pcinet0 2>/dev/null; '
    'echo @irq; grep -E "pcinet|virtio" /proc/interrupts')


def snapshot(vm):
    out = run(vm, SNAP_CMD)
    s = {'cpu': None, 'net': {}, 'eth': {}, 'irq': {}}
    sect = None
    for line in out.splitlines():
        if line.startswith('@net '):
            _, ifn, f, v = line.split()
            s['net'][(ifn, f)] = int(v)
            continue
        if line.startswith('@'):
            sect = line[1:].strip()
            continue
        if sect == 'stat' and line.startswith('cpu '):
            s['cpu'] = [int(x) for x in line.split()[1:]]
        elif sect == 'ethtool' and ':' in line:
            k, _, v = line.strip().partition(':')
            if v.strip().isdigit():
                s['eth'][k.strip()] = int(v)
        elif sect == 'irq':
            f = line.split()
            if len(f) < 3:
                continue
            n = 0
            for x in f[1:]:
                if x.isdigit():
                    n += int(x)
                else:
                    break
            s['irq'][f[-1]] = n
    return s


def cpu_busy_s(s0, s1):
    """Busy seconds (user+nice+system+irq+softirq+steal) and busy share."""
    d = [b - a for a, b in zip(s0['cpu'], s1['cpu'])]
    d += [0] * (8 - len(d))
    user, nice, system, idle, iowait, irq, softirq, steal = d[:8]
    busy = user + nice + system + irq + softirq + steal
    total = busy + idle + iowait
    return busy / USER_HZ, (busy / total if total else 0.0)


def delta(d0, d1):
    return {k: d1.get(k, 0) - v for k, v in d0.items()}


# --------------------------------------------------------------------------
# the bench
# --------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.reps = args.reps
        self.secs = args.secs
        self.raw = {}		# name -> list of per-repetition values
        self.units = {}
        self.notes = {}
        self.runs = []		# every TCP run, with its counter deltas
        self.trace = {}
        self.errors = []
        self.info = {}
        self.a = self.b = self.fabric = self.topo = None
        self.workdir = None

    def add(self, name, value, unit):
        self.raw.setdefault(name, []).append(value)
        self.units[name] = unit

    def addf(self, link, name, value):
        """add() a figure of bench/figures.py's tables: its key (name on
        link; a full key if link is None) and unit from there."""
        self.add(F.key(link, name) if link else name, value, F.unit(name))

    def attempt(self, what, fn, *args):
        """fn(*args); a BenchError is recorded as a missing figure, not fatal."""
        try:
            fn(*args)
        except (BenchError, h.CaseFailure) as e:
            self.error(what, e)

    def error(self, what, e):
        msg = f'{what}: {type(e).__name__}: {e}'
        self.errors.append(msg)
        progress('ERROR ' + msg.splitlines()[0][:200])
        if isinstance(e, h.VMError):
            raise

    # -- machines -----------------------------------------------------------

    def boot(self):
        env = h.load_env()
        wd = self.workdir = h.make_workdir('run.bench.')
        progress(f'building the guest initramfs (work dir {wd})')
        h.check_fresh_build()
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz', [h.PCINET_KO], env,
                                   storage=True)
        sock = wd / 'net.sock'
        # b's virtio-blk disk (the storage section's reference): a file in
        # the work dir, in the host's page cache like a's tmpfs image
        disk = wd / 'vda.img'
        with open(disk, 'wb') as f:
            for _ in range(STORAGE_MIB):
                f.write(os.urandom(1 << 20))
        vda = ['-drive', f'file={disk},format=raw,if=none,id=vd0,cache=writeback,aio=threads',
               '-device', 'virtio-blk-pci,drive=vd0']

        def nic(server, mac):
            nd = (f'stream,id=n0,server={"on" if server else "off"},'
                  f'addr.type=unix,addr.path={sock}')
            return ['-netdev', nd, '-device',
                    f'virtio-net-pci,netdev=n0,host_mtu={HOST_MTU},mac={mac}']
        # the harness's two machines and their pcinet link, each with a
        # virtio-net NIC too (a is the stream server)
        self.topo = h.Topology(wd, env['VMLINUZ'], initrd, dict(
            nic=True, fabric_control=False,
            vm_args={'a': nic(True, '52:54:00:77:88:01'),
                     'b': nic(False, '52:54:00:77:88:02') + vda}))
        self.a, self.b, self.fabric = self.topo.a, self.topo.b, self.topo.fabric
        self.info['qemu_cmdline_a'] = ' '.join(self.a.cmdline())

        def before_start(vm):		# the stream server must listen first
            if vm.name != 'b':
                return
            deadline = time.monotonic() + 30
            while not sock.exists():
                if time.monotonic() > deadline or not self.a.alive():
                    raise BenchError('a did not create the -netdev stream socket')
                time.sleep(0.05)
        progress('booting a (pcinet fabric + virtio-net stream server) and b '
                 '(pcinet fabric + virtio-net stream client)')
        self.topo.boot(before_start)
        progress(f'guests up (a {self.a.boot_time:.1f}s, b {self.b.boot_time:.1f}s)')

    def teardown(self):
        if self.topo is not None:
            self.topo.teardown()
        if self.workdir is not None:
            h.release_workdir(self.workdir, self.args.keep)

    def setup_guests(self):
        a, b = self.a, self.b
        for vm, n in ((a, 1), (b, 2)):
            h.load(vm)		# checks that it is the module built here
            run(vm, f'ip addr add 10.77.0.{n}/24 dev pcinet0 && ip link set pcinet0 up && '
                f'ip addr add 10.88.0.{n}/24 dev eth0 && ip link set eth0 up')
            run(vm, f'{mounted(TRACEFS)} || mount -t tracefs nodev {TRACEFS}')
        for vm in (a, b):
            h.wait_carrier(vm, 1, 15)
        for link in LINKS:
            self.reachable(link)
        run(b, 'iperf3 -s -D >/dev/null 2>&1; '
            f'[ -x /usr/bin/sockperf ] && sockperf server -i 0.0.0.0 -p {SOCKPERF_PORT} '
            '--daemonize >/dev/null 2>&1; usleep 300000; pidof iperf3 >/dev/null')
        g = {}
        g['kernel'] = run(a, 'uname -r').strip()
        g['cpu'] = run(a, "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
        g['vcpus'] = int(run(a, 'nproc').strip())
        g['mem_kib'] = int(run(a, "awk '/MemTotal/ {print $2}' /proc/meminfo").strip())
        g['iperf3'] = run(a, 'iperf3 --version | head -1').strip()
        rc, out = sh(a, 'sockperf --version 2>&1 | head -3')
        g['sockperf'] = (out.strip().splitlines() or ['?'])[0] if rc == 0 else 'not in the initramfs'
        g['has_sockperf'] = rc == 0
        g['pcinet_napi'] = run(a, 'echo gro_flush_timeout=$(cat /sys/class/net/pcinet0/gro_flush_timeout)ns '
                               'napi_defer_hard_irqs=$(cat /sys/class/net/pcinet0/napi_defer_hard_irqs) '
                               'threaded=$(cat /sys/class/net/pcinet0/threaded)').strip()
        g['pcinet_features'] = run(a, "ethtool -k pcinet0 | grep -E '^(tx-checksumming|scatter-gather|"
                                   "tcp-segmentation-offload|rx-checksumming):' | tr -s ' ' | tr '\\n' ';'").strip()
        g['virtio_features'] = run(a, "ethtool -k eth0 | grep -E '^(tx-checksumming|scatter-gather|"
                                   "tcp-segmentation-offload|rx-checksumming):' | tr -s ' ' | tr '\\n' ';'").strip()
        g['virtio_maxmtu'] = run(a, "ip -d link show eth0 | grep -o 'maxmtu [0-9]*'").strip()
        g['tty'] = sh(a, '[ -c /dev/ttyPCI0 ] && [ -x /usr/bin/pcinet-ttyperf ]')[0] == 0 and \
            sh(b, '[ -c /dev/ttyPCI0 ]')[0] == 0
        g['has_memcpy'] = sh(a, '[ -x /usr/bin/pcinet-memcpy ]')[0] == 0
        self.info['guest'] = g
        progress(f"guest: {g['kernel']}, {g['vcpus']} vCPU, {g['mem_kib'] // 1024} MiB; "
                 f"pcinet {g['pcinet_napi']}; /dev/ttyPCI0 {'present' if g['tty'] else 'absent'}")

    def set_mtu(self, link, mtu):
        ifn = LINKS[link][0]
        for vm in (self.a, self.b):
            run(vm, f'ip link set {ifn} mtu {mtu}')
        self.reachable(link)

    def reachable(self, link):
        """a pings b over link (10 s to answer)."""
        try:
            self.a.wait_until(f'ping -c1 -W2 {LINKS[link][2]}', 10,
                              what=f'a ping of b over {LABEL[link]}')
        except h.CaseFailure as e:
            raise BenchError(str(e)) from None

    # -- iperf3 -------------------------------------------------------------

    def iperf(self, server_ip, secs, args=''):
        """iperf3 on a against b's server (started by setup_guests(), again
        if it is gone); the parsed JSON."""
        try:
            return h.iperf3(self.a, server_ip, args, secs, server=self.b,
                            one_off=False, timeout=secs + 60, tries=4)
        except h.CaseFailure as e:
            raise BenchError(str(e)) from None

    def tcp(self, link, mtu, direction, streams, rep, fig_link=None):
        ifn, _, ipb = LINKS[link]
        label = LABEL.get(fig_link, LABEL[link])
        sender, receiver = (self.a, self.b) if direction == 'tx' else (self.b, self.a)
        s0 = {vm.name: snapshot(vm) for vm in (self.a, self.b)}
        res = self.iperf(ipb, self.secs, f'-P {streams}' + (' -R' if direction == 'rx' else ''))
        s1 = {vm.name: snapshot(vm) for vm in (self.a, self.b)}
        mbps = h.iperf3_mbps(res)
        sent = (s1[sender.name]['net'][(ifn, 'tx_bytes')]
                - s0[sender.name]['net'][(ifn, 'tx_bytes')])
        r = {'link': link, 'mtu': mtu, 'dir': direction, 'streams': streams,
             'rep': rep, 'mbps': mbps, 'sent_bytes': sent, 'cpu': {}, 'side': {}}
        for vm in (self.a, self.b):
            busy, share = cpu_busy_s(s0[vm.name], s1[vm.name])
            r['cpu'][vm.name] = {'busy_s': busy, 'busy_share': share}
            net = {f: s1[vm.name]['net'][(ifn, f)] - s0[vm.name]['net'][(ifn, f)]
                   for f in ('tx_packets', 'rx_packets', 'tx_bytes', 'rx_bytes')}
            irq = delta(s0[vm.name]['irq'], s1[vm.name]['irq'])
            side = {'net': net}
            if link == 'pcinet':
                e = delta(s0[vm.name]['eth'], s1[vm.name]['eth'])
                pk = e.get('tx_packets', 0) + e.get('rx_packets', 0)
                db = e.get('tx_doorbells', 0) + e.get('rx_space_doorbells', 0)
                it = e.get('interrupts', 0)
                pirq = sum(v for k, v in irq.items() if k.startswith('pcinet'))
                side.update(packets=pk, doorbells=db, interrupts=it, proc_irqs=pirq,
                            ethtool=e)
            else:
                pk = net['tx_packets'] + net['rx_packets']
                vi = sum(v for k, v in irq.items() if k.startswith('virtio'))
                side.update(packets=pk, interrupts=vi, proc_irqs=vi)
            r['side'][vm.name] = side
        gb = sent / 1e9
        tag = F.STREAMS[streams]
        fl = fig_link or link
        self.add(F.key(fl, F.tcp(mtu, direction, tag)), mbps, 'Mbit/s')
        if gb > 0:
            self.add(F.key(fl, F.tcp(mtu, direction, tag, 'cpu_sender_s_per_gb')),
                     r['cpu'][sender.name]['busy_s'] / gb, 's/GB')
            self.add(F.key(fl, F.tcp(mtu, direction, tag, 'cpu_receiver_s_per_gb')),
                     r['cpu'][receiver.name]['busy_s'] / gb, 's/GB')
        self.runs.append(r)
        extra = ''
        if link == 'pcinet':
            ev = []
            for n in ('a', 'b'):
                sd = r['side'][n]
                if sd['packets']:
                    ev.append(f"{n} {(sd['doorbells'] + sd['interrupts']) / sd['packets']:.3f}")
            extra = f"; doorbells+irqs/pkt {', '.join(ev)}"
        progress(f"  {label:17s} tcp mtu {mtu:5d} {direction} {streams}x  rep {rep}: "
                 f"{mbps:7.1f} Mbit/s  cpu busy a {r['cpu']['a']['busy_share'] * 100:3.0f}% "
                 f"b {r['cpu']['b']['busy_share'] * 100:3.0f}%{extra}")

    UDP_SNAP = ("awk '/^Udp:/ {n++; if (n == 1) split($0, k); else for (i = 2; i <= NF; i++) "
                "print \"udp\", k[i], $i}' /proc/net/snmp; "
                "for f in tx_packets rx_packets tx_dropped rx_dropped; do "
                "echo \"if $f $(cat /sys/class/net/IF/statistics/$f)\"; done; "
                "echo \"qdisc dropped $(tc -s qdisc show dev IF | grep -o 'dropped [0-9]*' | "
                "awk '{s += $2} END {print s + 0}')\"")

    def udp_snap(self, vm, ifn):
        out = run(vm, self.UDP_SNAP.replace('IF', ifn))
        return {f'{a} {b}': int(c) for a, b, c in
                (l.split() for l in out.splitlines() if len(l.split()) == 3 and l.split()[2].isdigit())}

    def udp(self, link, rep, fig_link=None):
        ifn, _, ipb = LINKS[link]
        label = LABEL.get(fig_link, LABEL[link])
        link = fig_link or link
        s0 = {vm.name: self.udp_snap(vm, ifn) for vm in (self.a, self.b)}
        res = self.iperf(ipb, self.secs, '-u -l 64 -b 0')
        s1 = {vm.name: self.udp_snap(vm, ifn) for vm in (self.a, self.b)}
        d = {n: delta(s0[n], s1[n]) for n in s0}
        e = res['end']
        sent = e['sum_sent']
        recv = e['sum_received']
        got = recv['packets'] - recv['lost_packets']
        rx_pps = got / recv['seconds'] if recv['seconds'] else 0
        tx_pps = sent['packets'] / sent['seconds'] if sent['seconds'] else 0
        loss = recv['lost_percent']
        self.addf(link, 'udp64.rx_pps', rx_pps)
        self.addf(link, 'udp64.tx_pps', tx_pps)
        self.addf(link, 'udp64.loss_pct', loss)
        # where the datagrams went, as % of those iperf3 sent
        n = sent['packets'] or 1
        where = {
            'sender_qdisc_drop_pct': d['a'].get('qdisc dropped', 0),
            'sender_if_drop_pct': d['a'].get('if tx_dropped', 0),
            'receiver_if_drop_pct': d['b'].get('if rx_dropped', 0),
            'receiver_rcvbuf_drop_pct': d['b'].get('udp RcvbufErrors', 0),
        }
        for k, v in where.items():
            self.addf(link, f'udp64.{k}', 100 * v / n)
        wire = d['b'].get('if rx_packets', 0)
        self.addf(link, 'udp64.reached_receiver_pct', 100 * wire / n)
        progress(f'  {label:17s} udp 64 B  rep {rep}: sent {tx_pps:8.0f} pps, '
                 f'received {rx_pps:8.0f} pps, loss {loss:.1f}% (reached b {100 * wire / n:.0f}%, '
                 f'b socket buffer full {100 * where["receiver_rcvbuf_drop_pct"] / n:.0f}%, '
                 f'a qdisc drops {100 * where["sender_qdisc_drop_pct"] / n:.0f}%)')

    def integrity(self, on):
        for vm in (self.a, self.b):
            run(vm, 'ethtool --set-priv-flags pcinet0 integrity '
                + ('on' if on else 'off'))

    def threaded(self, on):
        for vm in (self.a, self.b):
            run(vm, f'echo {int(on)} >/sys/class/net/pcinet0/threaded')

    # -- latency --------------------------------------------------------------

    def ping(self, link, rep, fig_link=None):
        ipb = LINKS[link][2]
        label = LABEL.get(fig_link, LABEL[link])
        link = fig_link or link
        out = run(self.a, f'ping -A -c {PING_COUNT} -W 5 {ipb} >/tmp/ping.out 2>&1; '
                  "grep -o 'time=[0-9.]*' /tmp/ping.out | cut -d= -f2; tail -2 /tmp/ping.out",
                  timeout=PING_COUNT * 0.05 + 120)
        t = sorted(float(x) * 1000 for x in re.findall(r'^([0-9.]+)$', out, re.M))
        if len(t) < PING_COUNT * 0.99:
            raise BenchError(f'ping: only {len(t)} of {PING_COUNT} replies:\n{out[-300:]}')
        p50, p99, avg = pctl(t, 50), pctl(t, 99), sum(t) / len(t)
        self.addf(link, 'ping.p50_us', p50)
        self.addf(link, 'ping.p99_us', p99)
        self.addf(link, 'ping.avg_us', avg)
        self.add(F.key(link, F.PING_REPLIES), len(t), 'replies')
        progress(f'  {label:17s} ping x{len(t)}  rep {rep}: p50 {p50:7.0f} us, '
                 f'p99 {p99:7.0f} us, mean {avg:7.0f} us')

    def sockperf(self, link, rep):
        ipb = LINKS[link][2]
        out = run(self.a, f'sockperf ping-pong -i {ipb} -p {SOCKPERF_PORT} -t 3 --full-rtt '
                  f'-m 64 2>&1', timeout=60)
        out = re.sub(r'\x1b\[[0-9;]*m', '', out)
        p = dict(re.findall(r'percentile (\d+\.\d+) =\s*([0-9.]+)', out))
        m = re.search(r'avg-rtt=([0-9.]+)', out)
        n = re.search(r'Total (\d+) observations', out)
        if '50.000' not in p or '99.000' not in p or not m:
            raise BenchError('sockperf output not understood:\n' + out[-800:])
        self.addf(link, 'udp_rr.p50_us', float(p['50.000']))
        self.addf(link, 'udp_rr.p99_us', float(p['99.000']))
        self.addf(link, 'udp_rr.avg_us', float(m.group(1)))
        progress(f"  {LABEL[link]:17s} sockperf x{n.group(1) if n else '?'}  rep {rep}: "
                 f"p50 {float(p['50.000']):7.0f} us, p99 {float(p['99.000']):7.0f} us")

    # -- raw window bandwidth -------------------------------------------------

    def memcpy(self):
        if not self.info['guest']['has_memcpy']:
            raise BenchError('pcinet-memcpy is not in the initramfs')
        out = run(self.a, f'pcinet-memcpy -r {self.reps} -t 0.3 1500 65536', timeout=300)
        m = re.search(r'area_off=(\S+) area_size=(\d+)', out)
        if m:
            self.info['memcpy_area'] = f'offset {m.group(1)}, {int(m.group(2)) >> 10} KiB'
        for rep, chunk, op, mbps in re.findall(
                r'rep=(\d+) chunk=(\d+) op=(\w+) mbps=([0-9.]+)', out):
            self.add(F.window(F.WINDOW[op][0], int(chunk)), float(mbps), F.WINDOW_UNIT)
        k = F.WINDOW_REF
        if k in self.raw:
            progress(f"  window copy (kernel memcpy loop): 1500 B "
                     f"{statistics.median(self.raw[F.window('window.memcpy', 1500)]):.0f} MB/s, "
                     f"64 KiB {statistics.median(self.raw[k]):.0f} MB/s; rep movsb 64 KiB "
                     f"{statistics.median(self.raw[F.window('window.movsb', 65536)]):.0f} MB/s")

    # -- tty -------------------------------------------------------------------

    def tty(self):
        a, b = self.a, self.b
        dev = '/dev/ttyPCI0'
        run(b, 'killall pcinet-ttyperf 2>/dev/null; '
            f'pcinet-ttyperf echo {dev} {8 * self.reps + 10} >/tmp/tty-echo.log 2>&1 &')
        time.sleep(0.5)
        for rep in range(1, self.reps + 1):
            out = run(a, f'pcinet-ttyperf rtt {dev} 200 1', timeout=120)
            m = re.search(r'p50_us=([0-9.]+) p99_us=([0-9.]+) avg_us=([0-9.]+)', out)
            self.addf(None, 'pcinet.tty.echo_rtt_p50_us', float(m.group(1)))
            self.addf(None, 'pcinet.tty.echo_rtt_p99_us', float(m.group(2)))
            progress(f'  ttyPCI0 echo x200  rep {rep}: p50 {float(m.group(1)):.0f} us, '
                     f'p99 {float(m.group(2)):.0f} us')
        sh(b, 'killall pcinet-ttyperf 2>/dev/null; usleep 200000')
        for rep in range(1, self.reps + 1):
            run(b, f'rm -f /tmp/tty-recv.out; (pcinet-ttyperf recv {dev} 4000000000 '
                f'{self.secs + 2} >/tmp/tty-recv.out 2>&1; echo done >>/tmp/tty-recv.out) &')
            time.sleep(0.3)
            sh(a, f'timeout -s KILL {self.secs} /usr/bin/pcinet-ttyperf send {dev} 4000000000',
               timeout=self.secs + 30)
            b.wait_until('grep -q done /tmp/tty-recv.out', 10, must=False)
            out = run(b, 'cat /tmp/tty-recv.out')
            m = re.search(r'bytes=(\d+) secs=([0-9.]+) kBps=([0-9.]+)', out)
            self.addf(None, 'pcinet.tty.throughput_kBps', float(m.group(3)))
            progress(f'  ttyPCI0 a->b  rep {rep}: {float(m.group(3)):.1f} kB/s '
                     f'({int(m.group(1))} bytes)')

    # -- copy and checksum evidence (kprobes + hist triggers) --------------------

    PROBES = F.PROBES

    def trace_setup(self):
        lines = [f'cd {TRACEFS}', 'echo > kprobe_events']
        for ev, (fn, ln) in self.PROBES.items():
            ev = ev.strip('_')
            lines.append(f"echo 'p:bench/{ev} {fn} caller=+0($stack):x64"
                         f"{' len=' + ln if ln else ''}' >> kprobe_events || echo FAILED {fn}")
        for vm in (self.a, self.b):
            out = run(vm, '\n'.join(lines))
            if 'FAILED' in out:
                self.notes.setdefault('trace', []).append(f'{vm.name}: ' + out.strip())

    def trace_arm(self, on):
        cmds = [f'cd {TRACEFS}']
        for ev, (fn, ln) in self.PROBES.items():
            ev = ev.strip('_')
            vals = 'hitcount,len' if ln else 'hitcount'
            trig = f'hist:keys=caller.sym:vals={vals}:sort=hitcount.descending'
            if on:
                cmds.append(f"[ -d events/bench/{ev} ] && echo '{trig}' > events/bench/{ev}/trigger "
                            f"&& echo 1 > events/bench/{ev}/enable")
            else:
                cmds.append(f'[ -d events/bench/{ev} ] && echo 0 > events/bench/{ev}/enable')
        cmds.append('true')
        for vm in (self.a, self.b):
            run(vm, '\n'.join(cmds))

    def trace_collect(self):
        res = {}
        for vm in (self.a, self.b):
            cmds = [f'cd {TRACEFS}']
            for ev, (fn, ln) in self.PROBES.items():
                e = ev.strip('_')
                vals = 'hitcount,len' if ln else 'hitcount'
                trig = f'hist:keys=caller.sym:vals={vals}:sort=hitcount.descending'
                cmds.append(f'echo "@@ {ev}"; [ -d events/bench/{e} ] && '
                            f"grep -E '^\\{{' events/bench/{e}/hist; "
                            f"[ -d events/bench/{e} ] && echo '!{trig}' > events/bench/{e}/trigger")
            cmds.append('true')
            out = run(vm, '\n'.join(cmds))
            per = {}
            cur = None
            for line in out.splitlines():
                if line.startswith('@@ '):
                    cur = line[3:].strip()
                    per[cur] = []
                    continue
                m = re.match(r'\{ caller: \[[0-9a-f]+\] (\S+)(?: \[(\S+)\])?\s*\}\s*'
                             r'hitcount:\s*(\d+)(?:\s+len:\s*(-?\d+))?', line)
                if m and cur:
                    per[cur].append({'caller': m.group(1) + (f' [{m.group(2)}]' if m.group(2) else ''),
                                     'calls': int(m.group(3)),
                                     'bytes': int(m.group(4)) if m.group(4) else None})
            res[vm.name] = per
        return res

    def trace_run(self, link):
        ifn, _, ipb = LINKS[link]
        self.trace_arm(True)
        s0 = {vm.name: snapshot(vm) for vm in (self.a, self.b)}
        secs = 3
        res = self.iperf(ipb, secs)
        s1 = {vm.name: snapshot(vm) for vm in (self.a, self.b)}
        self.trace_arm(False)
        hist = self.trace_collect()
        net = {}
        for n in ('a', 'b'):
            net[n] = {f: s1[n]['net'][(ifn, f)] - s0[n]['net'][(ifn, f)]
                      for f in ('tx_packets', 'rx_packets', 'tx_bytes', 'rx_bytes')}
        t = {'mbps_with_probes': h.iperf3_mbps(res),
             'mtu': 1500, 'secs': secs, 'net': net, 'hist': hist}
        # sender a: copies into the link per packet/byte sent; receiver b: out of it
        drv = {'pcinet': ('pcinet_xmit', 'pcinet_poll')}.get(link)

        def total(side, ev, pred=lambda c: True):
            rows = hist.get(side, {}).get(ev, [])
            return (sum(r['calls'] for r in rows if pred(r['caller'])),
                    sum(r['bytes'] or 0 for r in rows if pred(r['caller'])))
        # __pskb_pull_tail copies through skb_copy_bits: counted there
        copy_evs = ('skb_copy_bits', 'skb_store_bits', 'skb_copy_and_csum_bits')
        summ = {}
        for side, role, fbytes, fpk in (('a', 'tx', 'tx_bytes', 'tx_packets'),
                                       ('b', 'rx', 'rx_bytes', 'rx_packets')):
            nb, npk = net[side][fbytes], net[side][fpk]
            if drv:
                fn = drv[0] if role == 'tx' else drv[1]
                ev = 'skb_copy_bits' if role == 'tx' else 'skb_store_bits'
                c, by = total(side, ev, lambda cl: cl.startswith(fn))
                summ[f'{role}_driver_copy_calls_per_packet'] = c / npk if npk else None
                summ[f'{role}_driver_copy_bytes_per_byte'] = by / nb if nb else None
                oc = ob = 0
                for e in copy_evs:
                    c2, b2 = total(side, e, lambda cl: not cl.startswith(fn) or e != ev)
                    oc, ob = oc + c2, ob + b2
                summ[f'{role}_other_copy_bytes_per_byte'] = ob / nb if nb else None
            else:
                oc = ob = 0
                for e in copy_evs:
                    c2, b2 = total(side, e)
                    oc, ob = oc + c2, ob + b2
                summ[f'{role}_skb_copy_bytes_per_byte'] = ob / nb if nb else None
                summ[f'{role}_skb_copy_calls_per_packet'] = oc / npk if npk else None
            cc, cb = total(side, 'csum_partial')
            xc, xb = total(side, 'skb_copy_and_csum_bits')	# copy and checksum at once
            cc, cb = cc + xc, cb + xb
            hc, _ = total(side, 'skb_checksum_help')
            kc, _ = total(side, '__skb_checksum_complete')
            summ[f'{role}_csum_bytes_per_byte'] = cb / nb if nb else None
            summ[f'{role}_csum_calls_per_packet'] = cc / npk if npk else None
            summ[f'{role}_checksum_help_calls'] = hc
            summ[f'{role}_checksum_complete_calls'] = kc
        t['summary'] = summ
        self.trace[link] = t
        for k, v in summ.items():
            if v is not None:
                self.add(F.key(link, F.trace(k)), v, 'ratio' if 'per' in k else 'calls')
        s = ', '.join(f'{k} {v:.3f}' if isinstance(v, float) else f'{k} {v}'
                      for k, v in summ.items() if v is not None)
        progress(f'  {LABEL[link]:17s} trace (mtu 1500, a->b, {secs}s): {s}')

    # -- storage: disks and folders over TCP across pcinet0 ---------------------

    def storage_setup(self):
        """a serves a disk image (qemu-storage-daemon, NBD) and a directory
        (diod, 9P) from a tmpfs, on pcinet0; b attaches both (nbd-client,
        mount -t 9p) and has QEMU's virtio-blk disk (/dev/vda) besides."""
        a, b = self.a, self.b
        ipa = LINKS['pcinet'][1]
        mib = STORAGE_MIB
        run(a, f'mkdir -p {SRV} && mount -t tmpfs -o size={4 * mib + 128}m tmpfs {SRV} && '
            f'mkdir -p {SRV}/export && '
            f'dd if=/dev/urandom of={SRV}/disk.img bs=1M count={mib} 2>/dev/null && '
            # fio's file on the 9P mount, made here: fio lays out none
            f'cp {SRV}/disk.img {SRV}/export/fio.dat', timeout=300)
        run(a, f'qemu-storage-daemon --blockdev driver=file,node-name=f0,'
            f'filename={SRV}/disk.img,aio=threads '
            f'--nbd-server addr.type=inet,addr.host={ipa},addr.port={NBD_PORT} '
            f'--export type=nbd,id=e0,node-name=f0,name=disk,writable=on '
            f'>/tmp/qsd.log 2>&1 & '
            f'diod -f -n -l {ipa}:{NINEP_PORT} -e {SRV}/export -L /tmp/diod.log '
            '>/tmp/diod.out 2>&1 &')
        # each target on its own: one that fails to come up is missing
        # from the figures (an error of the run), the others are measured
        self.storage_up = set()

        def nbd():
            a.wait_until(f'ss -ltn | grep -q ":{NBD_PORT} "', 30,
                         what='qemu-storage-daemon listening', show='cat /tmp/qsd.log')
            run(b, f'nbd-client -b 4096 -N disk {ipa} {NBD_PORT} /dev/nbd0', timeout=60)
            g['nbd_size'] = run(b, 'blockdev --getsize64 /dev/nbd0').strip()
            self.storage_up.add('nbd_pcinet')

        def ninep():
            a.wait_until(f'ss -ltn | grep -q ":{NINEP_PORT} "', 30, what='diod listening',
                         show='cat /tmp/diod.out /tmp/diod.log')
            run(b, f'mkdir -p {MNT9P} && mount -t 9p -o trans=tcp,port={NINEP_PORT},'
                f'aname={SRV}/export,version=9p2000.L {ipa} {MNT9P}', timeout=60)
            g['9p_mount'] = run(b, f'grep " {MNT9P} " /proc/mounts').strip()
            self.storage_up.add('ninep_pcinet')

        def vda():
            g['vda_size'] = run(b, 'blockdev --getsize64 /dev/vda').strip()
            self.storage_up.add('virtio_blk')
        g = self.info.setdefault('storage', {})
        g.update(mib=STORAGE_MIB, mtu=STORAGE_MTU, ext4=self.args.storage_ext4)
        self.attempt('NBD setup', nbd)
        self.attempt('9P setup', ninep)
        self.attempt('virtio-blk setup', vda)
        g['fio'] = run(b, 'fio --version').strip()
        # fio's start (its libraries: ~80 MB) under TCG, for the CPU window
        out = run(b, 'read t0 _ </proc/uptime; fio --version >/dev/null; '
                  'read t1 _ </proc/uptime; echo "start $t0 $t1"')
        m = re.search(r'start (\S+) (\S+)', out)
        self.fio_start = float(m.group(2)) - float(m.group(1))
        g['fio_start_s'] = round(self.fio_start, 2)
        g['qsd'] = run(a, 'qemu-storage-daemon --version | head -1').strip()
        g['nbd_client'] = run(b, 'nbd-client -V 2>&1 | head -1').strip()
        progress(f"  NBD /dev/nbd0 {g.get('nbd_size')} bytes; 9P: {g.get('9p_mount')}; "
                 f"virtio-blk /dev/vda {g.get('vda_size')} bytes")

    def storage_targets(self):
        """target -> the file fio works on (on b)."""
        return {'nbd_pcinet': '/dev/nbd0', 'ninep_pcinet': f'{MNT9P}/fio.dat',
                'virtio_blk': '/dev/vda'}

    def fio(self, target, job, rep):
        """One fio run of job (figures.FIO_JOBS) on target, on b."""
        fn = self.storage_targets()[target]
        _, fargs = F.FIO_JOBS[job]
        secs = self.args.storage_secs
        cmd = (f'fio --name={job} --filename={fn} --size={STORAGE_MIB}M --direct=1 '
               f'--ioengine=io_uring {fargs} --time_based --runtime={secs} '
               f'--ramp_time={FIO_RAMP} --norandommap --randrepeat=0 '
               f'--output-format=json --output=/tmp/fio.json >/tmp/fio.err 2>&1; '
               'rc=$?; cat /tmp/fio.json; [ $rc = 0 ] || cat /tmp/fio.err; exit $rc')
        seq = job.startswith('seq_')
        vms = (self.a, self.b)
        # CPU: /proc/stat of both guests over a window inside the measured
        # part of the run (fio's start and ramp left out): win[1] seconds
        # from win[0] after the start, sampled by each guest itself
        start = getattr(self, 'fio_start', 1.0)
        w0 = math.ceil(start + FIO_RAMP + 0.3)
        win = (w0, max(1, int(start + FIO_RAMP + secs - 0.3 - w0)))
        sampler = (f'rm -f /tmp/st0 /tmp/st1; (sleep {win[0]}; head -1 /proc/stat >/tmp/st0; '
                   f'sleep {win[1]}; head -1 /proc/stat >/tmp/st1) >/dev/null 2>&1 &')
        if seq:
            run(self.a, sampler)
            cmd = sampler + ' ' + cmd
        out = run(self.b, cmd, timeout=secs + FIO_RAMP + 120)
        if seq:
            st = {}
            for vm in vms:
                vm.wait_until('[ -s /tmp/st1 ]', win[0] + win[1] + 10,
                              what='the /proc/stat sampler')
                lines = run(vm, 'cat /tmp/st0 /tmp/st1').split('\n')
                st[vm.name] = [{'cpu': [int(x) for x in l.split()[1:]]} for l in lines[:2]]
        try:
            res = json.loads(out[out.index('{'):])
            j = res['jobs'][0]
        except (ValueError, KeyError, IndexError):
            raise BenchError(f'fio output not understood:\n{out[-800:]}') from None
        d = j['write'] if 'write' in job else j['read']
        if d.get('io_bytes', 0) <= 0:
            raise BenchError(f'fio {job} on {target} moved no bytes:\n{out[-800:]}')
        tl = F.STORAGE_TARGETS[target]
        if job.startswith('seq_'):
            mbs = d['bw_bytes'] / 1e6
            self.addf(target, F.storage(f'{job}_mbs'), mbs)
            gb = d['bw_bytes'] * win[1] / 1e9	# fio's mean rate over the window
            cpu = {}
            for vm in vms:
                busy, _ = cpu_busy_s(*st[vm.name])
                cpu[vm.name] = busy / gb
                # virtio-blk: a takes no part
                if vm is self.b or target != 'virtio_blk':
                    self.addf(target, F.storage(f'{job}_cpu_{vm.name}_s_per_gb'), cpu[vm.name])
            progress(f'  {tl:27s} {job:10s} rep {rep}: {mbs:7.1f} MB/s  CPU s/GB '
                     f"a {cpu['a']:5.1f}, b {cpu['b']:5.1f} (window {win[0]}+{win[1]} s)")
        elif job == 'lat_read':
            p = d['clat_ns']['percentile']
            p50, p99 = p['50.000000'] / 1000, p['99.000000'] / 1000
            self.addf(target, F.storage('lat_read_p50_us'), p50)
            self.addf(target, F.storage('lat_read_p99_us'), p99)
            progress(f'  {tl:27s} {job:10s} rep {rep}: p50 {p50:7.0f} us, p99 {p99:7.0f} us '
                     f"({d['iops']:.0f} IOPS)")
        else:
            self.addf(target, F.storage(f'{job}_iops'), d['iops'])
            progress(f"  {tl:27s} {job:10s} rep {rep}: {d['iops']:7.0f} IOPS")

    def make_tree(self):
        """b: /tmp/src, a source-like tree (TREE_FILES files in directories
        of 100, sizes 128 B to 64 KiB, about log-uniform; text), once
        (busybox awk has no math library: no ^)."""
        out = run(self.b, f'rm -rf /tmp/src && mkdir -p /tmp/src && cd /tmp/src && '
                  f'awk -v n={TREE_FILES} \'BEGIN {{ srand(10); line = "'
                  "static int pcinet_fn(struct pcinet_ring *r, u32 len); /* text */\\n"
                  '"; blk = ""; while (length(blk) < 65536) blk = blk line; '
                  'total = 0; for (i = 0; i < n; i++) { d = sprintf("d%02d", int(i / 100)); '
                  'if (i % 100 == 0) system("mkdir " d); '
                  'e = int(9 * rand()); size = 128; while (e-- > 0) size *= 2; '
                  'size = int(size * (1 + rand())); if (size > 65536) size = 65536; total += size; '
                  'f = sprintf("%s/f%04d.c", d, i); printf "%s", substr(blk, 1, size) > f; '
                  'close(f) } print total }\'', timeout=300)
        self.tree_bytes = int(out.split()[-1])
        self.info.setdefault('storage', {})['tree'] = (
            f'{TREE_FILES} files in {(TREE_FILES + 99) // 100} directories, '
            f'{self.tree_bytes / 1e6:.1f} MB')

    def folder_dirs(self):
        """target -> a directory on b where the folder tests write."""
        d = {'ninep_pcinet': f'{MNT9P}/work'}
        if self.args.storage_ext4:
            d.update({'nbd_pcinet': '/mnt/nbd/work', 'virtio_blk': '/mnt/vda/work'})
        return d

    def folder(self, target, rep):
        """tar copy of /tmp/src into the target's directory, then the
        metadata loop: create, stat, unlink N empty files (dash builtins
        for create and stat, one busybox rm for the unlinks)."""
        d = self.folder_dirs()[target]
        tl = F.STORAGE_TARGETS[target]
        n = self.args.meta_files
        # on its mount, never on the initramfs if that is missing
        out = run(self.b, f'{mounted(os.path.dirname(d))} && '
                  f'rm -rf {d} && mkdir -p {d} && sync && '
                  'read t0 _ </proc/uptime && '
                  f'tar -C /tmp -cf - src | tar -C {d} -xf - && sync && '
                  'read t1 _ </proc/uptime && echo "tar $t0 $t1" && '
                  f'rm -rf {d}/src && sync', timeout=600)
        m = re.search(r'tar ([0-9.]+) ([0-9.]+)', out)
        secs = max(0.01, float(m.group(2)) - float(m.group(1)))
        self.addf(target, F.storage('tar_mbs'), self.tree_bytes / 1e6 / secs)
        self.addf(target, F.storage('tar_files_per_s'), TREE_FILES / secs)
        out = run(self.b, f'mkdir -p {d}/meta && cd {d}/meta && '
                  'read t0 _ </proc/uptime; '
                  f'i=0; while [ $i -lt {n} ]; do : >f$i; i=$((i + 1)); done; sync; '
                  'read t1 _ </proc/uptime; '
                  f'i=0; while [ $i -lt {n} ]; do [ -e f$i ] || echo "missing f$i"; '
                  'i=$((i + 1)); done; read t2 _ </proc/uptime; '
                  'rm -f f*; sync; read t3 _ </proc/uptime; '
                  'echo "meta $t0 $t1 $t2 $t3"; cd / && rmdir ' + f'{d}/meta', timeout=900)
        if 'missing' in out:
            raise BenchError(f'{tl}: created files missing:\n{out[-500:]}')
        t = [float(x) for x in re.search(r'meta (\S+) (\S+) (\S+) (\S+)', out).groups()]
        rates = [n / max(0.01, t[i + 1] - t[i]) for i in range(3)]
        for what, r in zip(('create', 'stat', 'unlink'), rates):
            self.addf(target, F.storage(f'meta_{what}_per_s'), r)
        progress(f'  {tl:27s} folder     rep {rep}: tar {self.tree_bytes / 1e6 / secs:6.1f} MB/s '
                 f'({TREE_FILES / secs:5.0f} files/s); {n} files: create {rates[0]:5.0f}/s, '
                 f'stat {rates[1]:6.0f}/s, unlink {rates[2]:6.0f}/s')

    def storage_ext4(self):
        """ext4 on the two block devices, for the folder tests."""
        for t, dev, mnt in (('nbd_pcinet', '/dev/nbd0', '/mnt/nbd'),
                            ('virtio_blk', '/dev/vda', '/mnt/vda')):
            if t not in self.storage_up:
                continue
            run(self.b, f'mke2fs -q -F -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 {dev} && '
                f'mkdir -p {mnt} && '
                f'mount -t ext4 {dev} {mnt}', timeout=300)

    def measure_storage(self):
        reps = self.reps
        secs = self.args.storage_secs
        targets = list(self.storage_targets())
        self.info['storage_plan'] = (
            f'fio {secs} s per run after a {FIO_RAMP} s ramp (io_uring, O_DIRECT, '
            f'{STORAGE_MIB} MiB device or file), {reps} repetitions, interleaved target by '
            f'target within each job; folder: tar of {TREE_FILES} files and a metadata loop '
            f'over {self.args.meta_files} files, {reps} repetitions'
            + ('; folder tests on ext4 on NBD and virtio-blk too' if self.args.storage_ext4 else ''))
        progress('plan: ' + self.info['storage_plan'])
        self.set_mtu('pcinet', STORAGE_MTU)
        self.storage_setup()
        targets = [t for t in targets if t in self.storage_up]
        for rep in range(1, reps + 1):
            for job in F.FIO_JOBS:
                for target in targets:
                    self.attempt(f'{target} fio {job}', self.fio, target, job, rep)
        self.attempt('storage tree', self.make_tree)
        if not getattr(self, 'tree_bytes', None):
            return
        if self.args.storage_ext4:
            self.attempt('ext4 on the block devices', self.storage_ext4)
        for rep in range(1, reps + 1):
            for target in self.folder_dirs():
                if target in self.storage_up:
                    self.attempt(f'{target} folder', self.folder, target, rep)

    def storage_smoke(self):
        """--smoke: 16 MiB of a pattern written through NBD from b, its
        sha256 read back on b and in a's image; a file through 9P, the same."""
        a, b = self.a, self.b
        self.storage_setup()
        if self.errors:
            raise BenchError('storage setup: ' + '; '.join(self.errors))
        out = run(b, 'dd if=/dev/urandom of=/tmp/pat bs=1M count=16 2>/dev/null && '
                  'sha256sum </tmp/pat && '
                  'dd if=/tmp/pat of=/dev/nbd0 bs=1M oflag=direct 2>/dev/null && '
                  'blockdev --flushbufs /dev/nbd0 && '
                  'dd if=/dev/nbd0 bs=1M count=16 iflag=direct 2>/dev/null | sha256sum && '
                  f'cp /tmp/pat {MNT9P}/pat && sync', timeout=300)
        want, back = out.split()[0], out.split()[2]
        srv = run(a, f'head -c 16777216 {SRV}/disk.img | sha256sum; sha256sum <{SRV}/export/pat',
                  timeout=120).split()
        got = {'NBD, read back on b': back, "NBD, a's image": srv[0], "9P, a's file": srv[2]}
        bad = [k for k, v in got.items() if v != want]
        if bad:
            raise BenchError(f'storage: sha256 differs ({", ".join(bad)}): want {want}, got {got}')
        progress(f'  storage: 16 MiB through NBD and 9P intact (sha256 {want[:16]}...)')

    # -- the plan ---------------------------------------------------------------

    def measure(self):
        if self.args.only == 'storage':
            progress('== storage: disks and folders over TCP across pcinet0 (only this section)')
            self.measure_storage()
            return
        reps = self.reps
        links = list(LINKS)
        self.info['plan'] = (f'{reps} repetitions x {self.secs}s per iperf3 figure; TCP a->b and '
                             f'b->a, 1 and 4 streams, MTU {", ".join(map(str, MTUS))} on both links, '
                             'interleaved link by link within each repetition')
        n_tcp = reps * len(MTUS) * len(links) * 4
        progress(f'plan: {n_tcp} TCP runs, {2 * reps} UDP runs, {2 * reps} x {PING_COUNT} pings, '
                 f'{2 * reps} sockperf runs, window memcpy, tty, trace; ~{self.estimate():.0f} min')

        progress('== window copy bandwidth (raw limit of the link)')
        self.attempt('memcpy', self.memcpy)

        progress('== latency and UDP at MTU 1500')
        for link in links:
            self.set_mtu(link, 1500)
        for rep in range(1, reps + 1):
            for link in links:
                self.attempt(f'{link} ping', self.ping, link, rep)
                if self.info['guest']['has_sockperf']:
                    self.attempt(f'{link} sockperf', self.sockperf, link, rep)
        for rep in range(1, reps + 1):
            for link in links:
                self.attempt(f'{link} udp', self.udp, link, rep)
        # pcinet with threaded NAPI (sysfs), the choice for a flooded
        # small receiver: same UDP and ping runs, then back to the default.
        self.threaded(True)
        try:
            for rep in range(1, reps + 1):
                self.attempt('pcinet threaded ping', self.ping, 'pcinet', rep,
                             'pcinet_threaded')
                self.attempt('pcinet threaded udp', self.udp, 'pcinet', rep,
                             'pcinet_threaded')
        finally:
            self.threaded(False)

        progress('== TCP throughput')
        for rep in range(1, reps + 1):
            for mtu in MTUS:
                for link in links:
                    self.set_mtu(link, mtu)
                for streams in (1, 4):
                    for direction in ('tx', 'rx'):
                        for link in links:
                            self.attempt(f'{link} tcp mtu {mtu} {direction} {streams}x',
                                         self.tcp, link, mtu, direction, streams, rep)

        progress('== the cost of the per-record CRC (ethtool private flag "integrity")')
        for mtu in (1500, 65535):
            self.set_mtu('pcinet', mtu)
            for rep in range(1, reps + 1):
                for crc in (True, False):
                    self.integrity(crc)
                    try:
                        self.attempt(f'pcinet crc={crc} tcp mtu {mtu}', self.tcp,
                                     'pcinet', mtu, 'tx', 1, rep,
                                     None if crc else 'pcinet_nocrc')
                    finally:
                        self.integrity(True)

        progress('== ttyPCI')
        if self.info['guest']['tty']:
            try:
                self.tty()
            except (BenchError, AttributeError) as e:
                self.error('tty', e)
        else:
            progress('  /dev/ttyPCI0 does not exist in the guests: n/a')

        progress('== copies and checksums (kprobes + hist triggers, one bulk run per link)')
        for link in links:
            self.set_mtu(link, 1500)
        try:
            self.trace_setup()
            for link in links:
                self.trace_run(link)
        except BenchError as e:
            self.error('trace', e)

        if 'storage' in self.args.skip:
            progress('== storage: skipped (--skip storage)')
            return
        progress('== storage: disks and folders over TCP across pcinet0')
        try:
            self.measure_storage()
        except BenchError as e:
            self.error('storage', e)

    def estimate(self):
        per_iperf = self.secs + 2.0
        n = self.reps * (len(MTUS) * len(LINKS) * 4 + 2 + 4)
        return (n * per_iperf + self.reps * 2 * 8 + 30 + 20) / 60

    # -- results -----------------------------------------------------------------

    def results(self):
        R = {}
        for k, v in self.raw.items():
            f = fig(v, self.units[k])
            if f:
                R[k] = f
        # pcinet doorbells and interrupts per packet, over every bulk TCP run
        for link in LINKS:
            runs = [r for r in self.runs if r['link'] == link]
            for mtu, sel in [(None, runs)] + [(m, [r for r in runs if r['mtu'] == m])
                                              for m in MTUS]:
                for n in ('a', 'b'):
                    sides = [r['side'][n] for r in sel if r['side'][n]['packets']]
                    if not sides:
                        continue
                    if link == 'pcinet':
                        vals = {
                            'doorbells_per_packet': [s['doorbells'] / s['packets'] for s in sides],
                            'interrupts_per_packet': [s['interrupts'] / s['packets'] for s in sides],
                            'events_per_packet': [(s['doorbells'] + s['interrupts']) / s['packets']
                                                  for s in sides],
                            'proc_interrupts_per_packet': [s['proc_irqs'] / s['packets'] for s in sides],
                        }
                    else:
                        vals = {'interrupts_per_packet': [s['interrupts'] / s['packets'] for s in sides]}
                    if mtu:		# per MTU: only the sum that the target is about
                        k = 'events_per_packet' if link == 'pcinet' else 'interrupts_per_packet'
                        vals = {k: vals[k]}
                        if link == 'pcinet':
                            # per MTU-sized frame the same bytes would take on a wire
                            vals['events_per_frame_equiv'] = [
                                (s['doorbells'] + s['interrupts'])
                                / max(1.0, (s['net']['tx_bytes'] + s['net']['rx_bytes']) / mtu)
                                for s in sides]
                    for k, v in vals.items():
                        f = fig(v, 'per packet', 'median over bulk TCP runs')
                        if f:
                            R[F.key(link, F.bulk(n, k, mtu))] = f
            if link == 'pcinet' and runs:
                for what in ('doorbells', 'interrupts'):
                    v = [sum(r['side'][n][what] for n in 'ab') /
                         max(1, sum(r['side'][n]['packets'] for n in 'ab')) for r in runs]
                    R[F.key('pcinet', F.bulk_both(what))] = fig(
                        v, 'per packet', 'both sides together, median over bulk TCP runs')
        # goodput as a fraction of the raw window copy bandwidth
        wm = R.get(F.WINDOW_REF)
        if wm:
            for m in MTUS:
                for d in F.DIRS:
                    for tag in F.STREAMS.values():
                        k = F.key('pcinet', F.tcp(m, d, tag))
                        if k in self.raw:
                            R[F.key('pcinet', F.tcp(m, d, tag, 'window_fraction'))] = fig(
                                [x / (wm['median'] * 8) for x in self.raw[k]], 'fraction',
                                f'goodput / (8 x {F.WINDOW_REF})')
        # tty: n/a unless measured
        for k, _, _ in F.TTY:
            R.setdefault(k, 'n/a')
        # the virtio transport over pcinet: not built yet
        for t in F.STORAGE_PENDING:
            for k, _, _ in F.STORAGE:
                R[F.key(t, k)] = 'not built yet'
        # virtio's best MTU per figure
        for d in F.DIRS:
            for tag in F.STREAMS.values():
                best = None
                for m in MTUS:
                    f = R.get(F.key('virtio_stream', F.tcp(m, d, tag)))
                    if f and (best is None or f['median'] > best[1]['median']):
                        best = (m, f)
                if best:
                    R[F.key('virtio_stream', F.tcp_best(d, tag))] = dict(best[1], mtu=best[0])
        ratios = {}
        for k, v in R.items():
            if not k.startswith('pcinet.') or not isinstance(v, dict) or '.bulk.' in k \
                    or '.trace.' in k or k.endswith('.' + F.PING_REPLIES):
                continue
            suffix = k[len('pcinet.'):]
            w = R.get('virtio_stream.' + suffix)
            if isinstance(w, dict) and w['median']:
                ratios[suffix] = round(v['median'] / w['median'], 4)
        for d in F.DIRS:
            for tag in F.STREAMS.values():
                p = R.get(F.key('pcinet', F.tcp(65535, d, tag)))
                w = R.get(F.key('virtio_stream', F.tcp_best(d, tag)))
                if p and w and w['median']:
                    ratios[F.tcp_vs_best(d, tag)] = round(
                        p['median'] / w['median'], 4)
        R['ratios'] = ratios
        R['targets'] = self.targets(R, ratios)
        return R

    def targets(self, R, ratios):
        T = []

        def add(name, value, cmp, limit, detail=''):
            ok = None if value is None else (value >= limit if cmp == '>=' else value <= limit)
            T.append({'target': name, 'value': None if value is None else round(value, 4),
                      'want': f'{cmp} {limit}', 'met': ok, 'detail': detail})
        for d in ('tx', 'rx'):
            add(f'pcinet TCP / virtio TCP, MTU 1500, {d}, 1 stream',
                ratios.get(F.tcp(1500, d)), '>=', 1.5)
            add(f'pcinet TCP / virtio TCP, MTU 1500, {d}, 4 streams',
                ratios.get(F.tcp(1500, d, 'p4_')), '>=', 1.5)
        for d in ('tx', 'rx'):
            w = R.get(F.key('virtio_stream', F.tcp_best(d)))
            add(f'pcinet TCP MTU 65535 / virtio best, {d}, 1 stream',
                ratios.get(F.tcp_vs_best(d)), '>=', 2.0,
                f"virtio best at MTU {w['mtu']}" if w else '')
            w = R.get(F.key('virtio_stream', F.tcp_best(d, 'p4_')))
            add(f'pcinet TCP MTU 65535 / virtio best, {d}, 4 streams',
                ratios.get(F.tcp_vs_best(d, 'p4_')), '>=', 2.0,
                f"virtio best at MTU {w['mtu']}" if w else '')
        add('pcinet ping p50 / virtio ping p50', ratios.get('ping.p50_us'), '<=', 0.8)
        if 'udp_rr.p50_us' in ratios:
            add('pcinet sockperf p50 / virtio sockperf p50 (UDP, user to user)',
                ratios.get('udp_rr.p50_us'), '<=', 0.8)
        for n in ('a', 'b'):
            f = R.get(F.key('pcinet', F.bulk(n, 'events_per_packet')))
            add(f'pcinet doorbells + interrupts per packet under bulk TCP, side {n}',
                f['median'] if f else None, '<=', 0.1,
                f"max over runs {f['max']:.3f}" if f else '')
        t = self.trace.get('pcinet', {}).get('summary', {})
        for role, side in (('tx', 'a'), ('rx', 'b')):
            v = t.get(f'{role}_driver_copy_bytes_per_byte')
            o = t.get(f'{role}_other_copy_bytes_per_byte')
            c = t.get(f'{role}_driver_copy_calls_per_packet')
            ok = None if v is None else (0.98 <= v <= 1.02 and (o or 0) <= 0.01)
            T.append({'target': f'exactly one copy per packet, {role} side ({side})',
                      'value': None if v is None else round(v, 4),
                      'want': 'driver copy bytes / link bytes = 1, other skb copies ~ 0',
                      'met': ok,
                      'detail': (f'{c:.3f} copy calls per packet (records that wrap the ring '
                                 f'take two); other skb copies {o:.4f} bytes/byte'
                                 if c is not None and o is not None else '')})
            cs = t.get(f'{role}_csum_bytes_per_byte')
            hc = t.get(f'{role}_checksum_help_calls')
            ok = None if cs is None else (cs <= 0.001 and not hc)
            T.append({'target': f'no software checksum on the link, {role} side ({side})',
                      'value': None if cs is None else round(cs, 6),
                      'want': 'csum_partial bytes / link bytes = 0, no skb_checksum_help',
                      'met': ok, 'detail': f'skb_checksum_help calls {hc}' if hc is not None else ''})
        return T


# --------------------------------------------------------------------------
# the scaling section: one guest, N links to N pcinet-peers
# --------------------------------------------------------------------------

def scale_sweep(args):
    """For each N of args.scale_n: boot one guest with N links whose other
    sides are pcinet-peers on this machine (tests/qemu/scale.py), measure
    (scale.measure()), tear it down.  One topology at a time; a failed N
    is an error line, not the end of the sweep."""
    import scale as S		# tests/qemu/scale.py (imports test_peer)
    env = h.load_env()
    wd = h.make_workdir('run.scale.')
    sweep = {'rows': [], 'errors': [], 'splats': [], 'guest': {},
             'secs': args.secs, 'idle_secs': 5}
    try:
        h.check_fresh_build()
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz', [h.PCINET_KO], env)
        for n in args.scale_n:
            progress(f'== scale: one guest, {n} links to {n} pcinet-peers')
            (wd / f'n{n}').mkdir()
            topo = h.Topology(wd / f'n{n}', env['VMLINUZ'], initrd, S.topology(n))
            try:
                topo.boot()
                a = topo.a
                if not sweep['guest']:
                    sweep['guest'] = {
                        'kernel': run(a, 'uname -r').strip(),
                        'vcpus': int(run(a, 'nproc').strip()),
                        'mem_kib': int(run(a, "awk '/MemTotal/ {print $2}' "
                                           '/proc/meminfo').strip())}
                row = S.measure(topo, n, secs=args.secs,
                                idle_secs=sweep['idle_secs'])
                row['boot_s'] = topo.boot_time
                sweep['rows'].append(row)
                progress(f"  N={n}: up {row['up_s']:.2f}s; {row['agg_mbps']:.0f} Mbit/s "
                         f"(per link {row['min_mbps']:.0f}..{row['max_mbps']:.0f}); "
                         f"{row['mem_per_link_kib']:.0f} KiB/link; "
                         f"idle {row['idle_irqs_per_s']:.1f} irq/s")
            except (h.HarnessError, h.CaseFailure) as e:
                msg = f'N={n}: {type(e).__name__}: {e}'
                sweep['errors'].append(msg)
                progress('ERROR ' + msg.splitlines()[0][:200])
            finally:
                sweep['splats'] += [f'N={n}: {s}' for s in
                                    h.dmesg_check(topo.a.console_log())]
                topo.teardown()
    finally:
        h.release_workdir(wd, args.keep)
    return sweep


def write_json(path, doc):
    """doc to path as JSON, replaced in one step (never half written)."""
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(json.dumps(doc, indent=1, default=str) + '\n')
    tmp.replace(path)


def write_section(out, meta, name, sec):
    """OUT/<name>.json and <name>.md from a section that booted machines
    of its own (scale, chassis): sec has its guest, splats and errors."""
    doc = {'meta': dict(meta, only=name, guest=sec['guest'],
                        splats=sec['splats']),
           name: sec, 'errors': sec['errors']}
    write_json(out / f'{name}.json', doc)
    report.write_md(out / f'{name}.md', doc)


def write_scale(out, meta, sweep):
    """OUT/scale.json, scale.md and scale.png from one sweep."""
    report.write_scale_png(out / 'scale.png', sweep)
    write_section(out, meta, 'scale', sweep)


def scale_main(args, meta, out):
    """bench.py --only scale: the sweep alone."""
    sweep = {'rows': [], 'errors': ['interrupted'], 'splats': [], 'guest': {}}
    try:
        sweep = scale_sweep(args)
    except KeyboardInterrupt:
        progress('interrupted')
    meta['load_end'] = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    meta['run_time_min'] = (time.monotonic() - T0) / 60
    write_scale(out, meta, sweep)
    progress(f"done in {meta['run_time_min']:.1f} min: {out / 'scale.md'}"
             + (f"; {len(sweep['errors'])} errors" if sweep['errors'] else ''))
    return 1 if sweep['errors'] or sweep['splats'] else 0


# --------------------------------------------------------------------------
# the chassis section: a host and 4 boards, board to board through br0
# --------------------------------------------------------------------------

RING_WARMUP = 2		# s of each all-at-once run before and after its window


def proc_stat_cpu(text):
    """The 'cpu ' line of /proc/stat in text, as snapshot() keeps it."""
    for line in text.splitlines():
        if line.startswith('cpu '):
            return {'cpu': [int(x) for x in line.split()[1:]]}
    raise BenchError(f'no cpu line in /proc/stat:\n{text[-300:]}')


def chassis_ring(t, ports, secs, warmup=RING_WARMUP):
    """Every board sends to the next (board1->board2, ..., boardN->board1),
    all at once, for secs + 2 * warmup s.  Returns (per pair Mbit/s: what
    the host's bridge port towards the receiver sent over one common window
    of secs s after warmup s, from its tx_bytes; the host's CPU busy share
    over that window; each pair's own iperf3 receiver figure).  ports:
    board name -> the host's interface of its link."""
    import chassis as CH	# tests/qemu/chassis.py
    host, bs = t[CH.HOST], CH.boards(t)
    pairs = [(b, bs[(i + 1) % len(bs)]) for i, b in enumerate(bs)]
    total = secs + 2 * warmup
    CH._each(lambda p: run(p[0], (
        'rm -f /tmp/ring.json /tmp/ring.done; '
        f'(iperf3 -J -i 0 -c {CH.board_ip(p[1].name)} -t {total} '
        '>/tmp/ring.json 2>&1; touch /tmp/ring.done) >/dev/null 2>&1 &')),
        pairs)
    tx = ' '.join(f'/sys/class/net/{ports[dst.name]}/statistics/tx_bytes'
                  for _, dst in pairs)
    snap = f'cat /proc/uptime {tx}; head -1 /proc/stat'
    out = run(host, f'sleep {warmup}; {snap}; echo @; sleep {secs}; {snap}',
              timeout=total + 60)
    before, after = out.split('@')
    (u0, *b0), (u1, *b1) = ([float(v) for v in s.split()[:len(pairs) + 2]]
                            for s in (before, after))
    b0, b1 = b0[1:], b1[1:]		# the second field of /proc/uptime
    mbps = [(y - x) * 8 / (u1 - u0) / 1e6 for x, y in zip(b0, b1)]
    _, busy = cpu_busy_s(proc_stat_cpu(before), proc_stat_cpu(after))
    own = []
    for src, dst in pairs:
        src.wait_until('[ -e /tmp/ring.done ]', total + 60,
                       what=f'iperf3 {src.name} -> {dst.name} ending')
        res = h.iperf3_parse(run(src, 'cat /tmp/ring.json'),
                             f'{src.name} -> {dst.name}')
        own.append(h.iperf3_mbps(res))
    return mbps, busy, own


def chassis_bench(args):
    """make chassis's topology (tests/qemu/chassis.py: topology(),
    bring_up()) with F.CHASSIS_BOARDS boards, then args.reps repetitions
    of, side by side: iperf3 board1 -> board2 through the host's br0,
    board1 -> the host's br0 address, and every board to the next at once
    (chassis_ring()).  Returns the section's document ('figures': name
    -> fig(); 'runs': every repetition's values)."""
    import chassis as CH
    env = h.load_env()
    wd = h.make_workdir('run.chassis.')
    n = F.CHASSIS_BOARDS
    sec = {'boards': n, 'secs': args.secs, 'reps': args.reps,
           'warmup': RING_WARMUP, 'figures': {}, 'runs': [], 'errors': [],
           'splats': [], 'guest': {}}
    topo = None
    raw = {name: [] for name, _, _ in F.CHASSIS}
    try:
        h.check_fresh_build()
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz',
                                   CH.extra_modules(env), env)
        topo = h.Topology(wd, env['VMLINUZ'], initrd, CH.topology(n))
        progress(f'== chassis: booting a host and {n} boards (one fabric per link)')
        topo.boot()
        sec['boot_s'] = topo.boot_time
        sec['up_s'] = CH.bring_up(topo)
        host, bs = topo[CH.HOST], CH.boards(topo)
        ports = {p[2]: p[0] for p in CH.host_ports(topo)}
        if sorted(ports) != sorted(b.name for b in bs):
            raise BenchError(f'the host\'s links lead to {sorted(ports)}')
        sec['guest'] = {'kernel': run(host, 'uname -r').strip(),
                        'vcpus': int(run(host, 'nproc').strip()),
                        'mem_kib': int(run(host, "awk '/MemTotal/ {print $2}' "
                                           '/proc/meminfo').strip()),
                        'mtu': int(run(host, f'cat /sys/class/net/{CH.BRIDGE}/mtu'))}
        CH._each(lambda vm: run(vm, 'iperf3 -s -D >/dev/null 2>&1; usleep 300000; '
                                'pidof iperf3 >/dev/null'), topo.vms)
        for vm in bs:			# ARP and the bridge's FDB, filled
            run(vm, ' ; '.join(f'ping -c 1 -W 3 {CH.board_ip(b.name)} >/dev/null'
                               for b in bs if b is not vm) + '; true', timeout=60)
        progress(f"  up in {sec['boot_s']:.1f} + {sec['up_s']:.1f}s; host "
                 f"{sec['guest']['vcpus']} vCPU, MTU {sec['guest']['mtu']}")
        b1, b2 = bs[0], bs[1]
        for rep in range(args.reps):
            r = {'rep': rep}
            try:
                r['b2b_mbps'] = h.iperf3_mbps(h.iperf3(
                    b1, CH.board_ip(b2.name), '', args.secs, server=b2,
                    one_off=False, tries=4))
                r['b2h_mbps'] = h.iperf3_mbps(h.iperf3(
                    b1, CH.HOST_IP, '', args.secs, server=host,
                    one_off=False, tries=4))
                mbps, busy, own = chassis_ring(topo, ports, args.secs)
                r.update(ring_mbps=mbps, ring_iperf3_mbps=own,
                         ring_agg_mbps=sum(mbps), ring_min_mbps=min(mbps),
                         ring_max_mbps=max(mbps), ring_host_busy_pct=100 * busy)
            except (BenchError, h.CaseFailure) as e:
                msg = f'repetition {rep + 1}: {type(e).__name__}: {e}'
                sec['errors'].append(msg)
                progress('ERROR ' + msg.splitlines()[0][:200])
            sec['runs'].append(r)
            for name in raw:
                if name in r:
                    raw[name].append(r[name])
            progress(f"  rep {rep + 1}: board1->board2 {r.get('b2b_mbps', 0):.0f}, "
                     f"board1->host {r.get('b2h_mbps', 0):.0f}, all at once "
                     f"{r.get('ring_agg_mbps', 0):.0f} Mbit/s (pairs "
                     f"{r.get('ring_min_mbps', 0):.0f}..{r.get('ring_max_mbps', 0):.0f}; "
                     f"host busy {r.get('ring_host_busy_pct', 0):.0f}%)")
    except (h.HarnessError, h.CaseFailure, BenchError) as e:
        msg = f'{type(e).__name__}: {e}'
        sec['errors'].append(msg)
        progress('ERROR ' + msg.splitlines()[0][:200])
    finally:
        if topo is not None:
            for vm in topo.vms:
                sec['splats'] += [f'{vm.name}: {s}' for s in
                                  h.dmesg_check(vm.console_log())]
            topo.teardown()
        h.release_workdir(wd, args.keep or bool(sec['errors']))
    for name, _, unit in F.CHASSIS:
        f = fig(raw[name], unit)
        if f is not None:
            sec['figures'][name] = f
    return sec


def write_chassis(out, meta, sec):
    """OUT/chassis.json and chassis.md from one chassis section."""
    write_section(out, meta, 'chassis', sec)


def chassis_main(args, meta, out):
    """bench.py --only chassis: the chassis section alone."""
    sec = {'figures': {}, 'runs': [], 'errors': ['interrupted'], 'splats': [],
           'guest': {}}
    try:
        sec = chassis_bench(args)
    except KeyboardInterrupt:
        progress('interrupted')
    meta['load_end'] = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    meta['run_time_min'] = (time.monotonic() - T0) / 60
    write_chassis(out, meta, sec)
    progress(f"done in {meta['run_time_min']:.1f} min: {out / 'chassis.md'}"
             + (f"; {len(sec['errors'])} errors" if sec['errors'] else ''))
    return 1 if sec['errors'] or sec['splats'] else 0


def route_main(args, meta, out, name, measure, heads):
    """bench.py --only NAME for a section measured by measure(args,
    progress, fig): OUT/NAME.json and .md; its ratios (heads: section key
    -> what the ratio is, the key '' for the section's own) echoed."""
    sec = {'figures': {}, 'ratios': {}, 'runs': [], 'errors': ['interrupted'],
           'splats': [], 'guest': {}}
    try:
        sec = measure(args, progress, fig)
    except KeyboardInterrupt:
        progress('interrupted')
    meta['load_end'] = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    meta['run_time_min'] = (time.monotonic() - T0) / 60
    write_section(out, meta, name, sec)
    for key, what in heads.items():
        ratios = (sec.get(key) or {}).get('ratios', {}) if key else sec['ratios']
        for fname, r in ratios.items():
            progress(f"  {what} {fname}: {r['ratio']:.2f} (target "
                     f"{'>=' if r['how'] == 'min' else '<='} {r['goal']}: "
                     f"{'met' if r['met'] else 'not met'})")
    progress(f"done in {meta['run_time_min']:.1f} min: {out / f'{name}.md'}"
             + (f"; {len(sec['errors'])} errors" if sec['errors'] else ''))
    return 1 if sec['errors'] or sec['splats'] else 0


def virtio_main(args, meta, out):
    """bench.py --only virtio: the virtio disk and folder over pcinet
    against NBD and 9P over pcinet0, served by this machine, and QEMU's
    own virtio-blk disk (bench/virtio_route.py)."""
    import virtio_route as VR
    return route_main(args, meta, out, 'virtio', VR.virtio_bench,
                      {'': 'virtio / NBD', 'fs': 'virtio-fs / 9P'})


def ntb_main(args, meta, out):
    """bench.py --only ntb: pcinet on the emulated NTB against mainline
    ntb_netdev on the same device and against pcinet on ivshmem, in the
    same guests (bench/ntb_route.py)."""
    import ntb_route as NR
    return route_main(args, meta, out, 'ntb', NR.ntb_bench, {'': 'ntb'})


def vhost_main(args, meta, out):
    """bench.py --only vhost: the board's virtio disk served by
    pcinet-vhost in a host guest against NBD over pcinet0 from the same
    guest (stage 3, bench/vhost_route.py)."""
    import vhost_route as VH
    return route_main(args, meta, out, 'vhost', VH.vhost_bench,
                      {'': 'virtio / NBD'})


# --------------------------------------------------------------------------
# output: json, md, png
# --------------------------------------------------------------------------

def host_info():
    i = {}
    try:
        cpu = Path('/proc/cpuinfo').read_text()
        m = re.search(r'model name\s*:\s*(.*)', cpu)
        i['cpu'] = m.group(1).strip() if m else platform.processor()
    except OSError:
        i['cpu'] = '?'
    i['cores'] = os.cpu_count()
    try:
        m = re.search(r'MemTotal:\s*(\d+)', Path('/proc/meminfo').read_text())
        i['mem_gib'] = round(int(m.group(1)) / 2**20, 1)
    except (OSError, AttributeError):
        pass
    i['kernel'] = platform.release()
    try:
        i['os'] = 'Debian ' + Path('/etc/debian_version').read_text().strip()
    except OSError:
        i['os'] = platform.platform()
    q = os.environ.get('QEMU', 'qemu-system-x86_64')
    try:
        i['qemu'] = subprocess.run([q, '--version'], capture_output=True,
                                   text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        i['qemu'] = '?'
    return i


def qemu_others():
    """QEMU processes on this machine that are not ours (noise)."""
    me = str(os.getpid())
    n = 0
    for p in Path('/proc').iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / 'cmdline').read_bytes().split(b'\0')
            stat = (p / 'stat').read_text()
        except OSError:
            continue
        if cmd and cmd[0].endswith(b'qemu-system-x86_64'):
            ppid = stat.rsplit(')', 1)[1].split()[1]
            if ppid != me:
                n += 1
    return n


def git_info():
    def g(*a):
        r = subprocess.run(['git', '-C', str(ROOT)] + list(a), capture_output=True, text=True)
        return r.stdout.rstrip('\n') if r.returncode == 0 else ''
    return {'commit': g('rev-parse', 'HEAD'), 'describe': g('describe', '--always', '--dirty'),
            'subject': g('log', '-1', '--format=%s'),
            'modified': [l[3:] for l in g('status', '--porcelain', '--untracked-files=no').splitlines()
                         if len(l) > 3]}


def smoke(args):
    """bench.py --smoke: everything but the measuring."""
    bench = Bench(args)
    try:
        bench.boot()
        bench.setup_guests()
        for link in LINKS:
            res = bench.iperf(LINKS[link][2], 1)
            progress(f'  {LABEL[link]:17s} iperf3 1 s: {h.iperf3_mbps(res):.0f} Mbit/s')
        bench.storage_smoke()
        splats = [s for vm in (bench.a, bench.b) for s in h.dmesg_check(vm.console_log())]
        if splats:
            raise BenchError(f'kernel splat: {splats[0]}')
    except (h.HarnessError, h.CaseFailure, BenchError) as e:
        progress(f'smoke FAILED: {type(e).__name__}: {e}')
        return 1
    finally:
        bench.teardown()
    progress('smoke passed')
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description='pcinet against virtio-net/stream')
    ap.add_argument('--reps', type=int, default=int(os.environ.get('BENCH_REPS', '3')))
    ap.add_argument('--secs', type=int, default=int(os.environ.get('BENCH_SECS', '5')))
    ap.add_argument('--out', default=str(HERE / 'results'))
    ap.add_argument('--keep', action='store_true', help='keep the work dir (console logs)')
    ap.add_argument('--report-only', action='store_true',
                    help='measure nothing: write latest.md and latest.png again from '
                    'OUT/latest.json (bench/report.py)')
    ap.add_argument('--smoke', action='store_true',
                    help='a minute\'s check of the machinery: boot, set the guests up, one '
                    '1 s iperf3 per link, 16 MiB through NBD and 9P checked by sha256, '
                    'tear down; no figure is kept, nothing written')
    ap.add_argument('--scale-n', type=lambda v: [int(x) for x in v.split(',')],
                    default=list(F.SCALE_NS),
                    help='the scaling section\'s numbers of links, comma-separated '
                    f'(default {",".join(map(str, F.SCALE_NS))})')
    ap.add_argument('--only', choices=('storage', 'scale', 'chassis', 'virtio',
                                       'vhost', 'ntb'),
                    help='measure one section only; its results go to OUT/<section>.json '
                    'and .md (latest.* stay as they are)')
    ap.add_argument('--skip', action='append', default=[],
                    choices=('storage', 'scale', 'chassis'),
                    help='leave a section out of the full run (repeatable), e.g. '
                    'to compare the net figures of two commits quickly')
    ap.add_argument('--storage-secs', type=int,
                    default=int(os.environ.get('BENCH_STORAGE_SECS', '4')),
                    help='seconds of each fio run of the storage section (after a '
                    f'{FIO_RAMP} s ramp)')
    ap.add_argument('--meta-files', type=int,
                    default=int(os.environ.get('BENCH_META_FILES', '2000')),
                    help='files of the storage section\'s metadata loop')
    ap.add_argument('--no-storage-ext4', dest='storage_ext4', action='store_false',
                    help='folder tests on 9P only, not on ext4 on NBD and virtio-blk')
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        return report.main([str(out / 'latest.json')])
    if args.smoke:
        return smoke(args)
    out.mkdir(parents=True, exist_ok=True)

    def on_term(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    meta = {'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
            'host': host_info(), 'git': git_info(), 'reps': args.reps, 'secs': args.secs,
            'storage_secs': args.storage_secs, 'meta_files': args.meta_files,
            'only': args.only, 'skip': args.skip, 'other_qemus': qemu_others()}
    stem = args.only or 'latest'		# the results' file names
    meta['load_start'] = ', '.join(f'{x:.2f}' for x in os.getloadavg())
    progress(f"pcinet bench: {meta['host']['qemu']}; {meta['host']['cores']} cores; "
             f"{meta['other_qemus']} other QEMU processes running; load {meta['load_start']}")
    if args.only == 'scale':
        return scale_main(args, meta, out)
    if args.only == 'chassis':
        return chassis_main(args, meta, out)
    if args.only == 'virtio':
        return virtio_main(args, meta, out)
    if args.only == 'vhost':
        return vhost_main(args, meta, out)
    if args.only == 'ntb':
        return ntb_main(args, meta, out)
    bench = Bench(args)
    rc = 0
    try:
        bench.boot()
        bench.setup_guests()
        bench.measure()
    except KeyboardInterrupt:
        progress('interrupted')
        bench.errors.append('interrupted')
        rc = 130
    except (h.HarnessError, h.CaseFailure, BenchError) as e:
        bench.errors.append(f'aborted: {type(e).__name__}: {e}')
        progress(f'ABORTED: {type(e).__name__}: {e}')
        rc = 1
    except Exception as e:  # noqa: BLE001 - still write what we have
        bench.errors.append(f'aborted: {type(e).__name__}: {e}')
        progress(f'ABORTED: {type(e).__name__}: {e}')
        import traceback
        traceback.print_exc()
        rc = 1
    splats = []
    for vm in (bench.a, bench.b):
        if vm is not None:
            splats += [f'{vm.name}: {s}' for s in h.dmesg_check(vm.console_log())]
    try:
        meta['guest'] = bench.info.get('guest', {})
        meta['plan'] = bench.info.get('plan', '')
        meta['storage_plan'] = bench.info.get('storage_plan', '')
        meta['storage'] = bench.info.get('storage', {})
        meta['splats'] = splats
        meta['load_end'] = ', '.join(f'{x:.2f}' for x in os.getloadavg())
        meta['run_time_min'] = (time.monotonic() - T0) / 60
        if 'memcpy_area' in bench.info:
            meta['memcpy_area'] = bench.info['memcpy_area']
        R = bench.results()
        # everything the report needs is in the document: measuring ends here
        doc = {'meta': meta}
        doc.update(R)
        doc['trace'] = bench.trace
        doc['runs'] = bench.runs
        doc['errors'] = bench.errors
        doc['notes'] = bench.notes
        write_json(out / f'{stem}.json', doc)
        if bench.a is not None and not args.only:
            report.write_png(out / 'latest.png', doc)
        report.write_md(out / f'{stem}.md', doc)
    finally:
        bench.teardown()
    pair_ok = rc == 0
    if not args.only and pair_ok and 'scale' not in args.skip:
        # the scaling section, its own machines
        try:
            doc['scale'] = scale_sweep(args)
        except KeyboardInterrupt:
            progress('interrupted')
            rc = 130
        if 'scale' in doc:
            write_scale(out, meta, doc['scale'])
            write_json(out / f'{stem}.json', doc)
            report.write_md(out / f'{stem}.md', doc)
            if doc['scale']['errors'] or doc['scale']['splats']:
                rc = 1
    if (not args.only and pair_ok and rc != 130 and
            'chassis' not in args.skip):	# the chassis, its own machines
        try:
            doc['chassis'] = chassis_bench(args)
        except KeyboardInterrupt:
            progress('interrupted')
            rc = 130
        if 'chassis' in doc:
            write_chassis(out, meta, doc['chassis'])
            write_json(out / f'{stem}.json', doc)
            report.write_md(out / f'{stem}.md', doc)
            if doc['chassis']['errors'] or doc['chassis']['splats']:
                rc = 1
    if splats:
        progress(f'kernel splats on the guest consoles: {splats[0]}')
        rc = rc or 1
    met = [t for t in R['targets'] if t['met'] is not None]
    progress(f"done in {(time.monotonic() - T0) / 60:.1f} min: {out / f'{stem}.md'}; targets met "
             f"{sum(1 for t in met if t['met'])}/{len(met)}"
             + (f'; {len(bench.errors)} errors' if bench.errors else ''))
    return rc


if __name__ == '__main__':
    sys.exit(main())
