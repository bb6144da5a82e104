# SPDX-License-Identifier: GPL-2.0-only
"""bench.py --only ntb: pcinet on an NTB against mainline ntb_netdev on the
identical emulated NTB, and against pcinet on ivshmem (issue 23), side by
side in one run, in the same two guests.

    +------------ a ------------+                   +------------ b ------------+
    | pcinet0  10.81.0.1 ivshmem |<== fabric 0 ====>| pcinet0  10.81.0.2         |
    | pcinet1  10.82.0.1 NTB dev |<== fabric 1 -N ==>| pcinet1  10.82.0.2 (pcinet_ntb) |
    | eth0     10.83.0.1 NTB dev |<== fabric 2 -N ==>| eth0     10.83.0.2 (ntb_netdev) |
    +----------------------------+                   +---------------------------+

The two emulated NTB devices are the same device (tools/testing/pcinet/
ntb-ivshmem, each on a 64 MiB fabric -N: two 16 MiB memory windows); the
ivshmem window is 16 MiB too, so both pcinet links have the same rings.
pcinet_ntb binds the first NTB device, ntb_transport (with ntb_netdev) the
second.  Per route, interleaved within each repetition: iperf3 TCP a->b
with 1 and 4 streams at MTU 1500 and at the route's largest MTU (its
maxmtu, at most 65521), each with both guests' CPU busy seconds per GB
(their /proc/stat over the run); ping -A (p50, p99); sockperf UDP
ping-pong of 64 B (p50) when the guests have sockperf.  The ratios: pcinet
on NTB over ntb_netdev (TCP: at least 2x; ping p50: at most 0.5x) and over
pcinet on ivshmem (TCP: at least 0.9x, what the backend costs).
"""

import re
import statistics
import time

import pcinet_harness as h
import test_ntb as T

ROUTES = {		# name -> (interface, a's address, b's address, label)
    'pcinet_ntb': ('pcinet1', '10.82.0.1', '10.82.0.2', 'pcinet over NTB'),
    'ntb_netdev': ('eth0', '10.83.0.1', '10.83.0.2', 'ntb_netdev over NTB'),
    'pcinet_ivshmem': ('pcinet0', '10.81.0.1', '10.81.0.2', 'pcinet over ivshmem'),
}
MAX_MTU = 65521
PING_COUNT = 500
# name -> (label, unit)
FIGURES = {}
for _s in (1, 4):
    for _m in ('1500', 'best'):
        FIGURES[f'tcp{_s}_{_m}'] = (f'TCP a->b, {_s} stream(s), MTU {_m}', 'Mbit/s')
FIGURES['cpu_s_per_gb'] = ('CPU (both guests) per GB, TCP 1 stream MTU 1500', 's/GB')
FIGURES['ping_p50'] = ('ping -A p50', 'us')
FIGURES['ping_p99'] = ('ping -A p99', 'us')
FIGURES['udp_rr_p50'] = ('sockperf UDP 64 B ping-pong p50', 'us')
# (numerator route, denominator route, figure) -> (goal, 'min' | 'max')
GOALS = {}
for _f in ('tcp1_1500', 'tcp4_1500', 'tcp1_best', 'tcp4_best'):
    GOALS[('pcinet_ntb', 'ntb_netdev', _f)] = (2.0, 'min')
    GOALS[('pcinet_ntb', 'pcinet_ivshmem', _f)] = (0.9, 'min')
GOALS[('pcinet_ntb', 'ntb_netdev', 'ping_p50')] = (0.5, 'max')
GOALS[('pcinet_ntb', 'ntb_netdev', 'udp_rr_p50')] = (0.5, 'max')


class BenchError(Exception):
    pass


def busy(vm):
    """(busy, total) jiffies of vm's CPUs."""
    f = [int(x) for x in vm.run('head -n1 /proc/stat').split()[1:]]
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return sum(f) - idle, sum(f)


class NtbRoute:
    def __init__(self, args, progress):
        self.args, self.progress = args, progress
        self.topo = self.wd = None
        self.raw = {}
        self.runs = []
        self.mtu = {}
        self.info = {}

    def up(self):
        env = h.load_env()
        self.wd = h.make_workdir('run.bench-ntb.')
        h.check_fresh_build()
        initrd = h.build_initramfs(self.wd / 'initramfs.cpio.gz',
                                   T.ntb_modules(), env, storage=True)
        self.topo = h.Topology(self.wd, env['VMLINUZ'], initrd, dict(
            links=[('a', 'b')] * 3, fabric_size=['16M', '64M', '64M'],
            fabric_ntb=[False, True, True]))
        self.progress('booting a and b: one ivshmem link, two emulated NTBs')
        self.topo.boot()
        t = self.topo
        for vm in t.vms:
            T.insmod(vm, 'ntb', 'ntb_ivshmem')
            h.load(vm)
            T.insmod(vm, 'pcinet_ntb')
            devs = sorted(vm.run('ls /sys/bus/ntb/devices').split())
            if len(devs) != 2:
                raise BenchError(f'{vm.name}: NTB devices {devs}, want 2')
            # the second NTB device is ntb_transport's
            vm.run(f'echo {devs[1]} >/sys/bus/ntb/drivers/pcinet_ntb/unbind')
            T.insmod(vm, 'ntb_transport', 'ntb_netdev')
        for name, (ifn, ipa, ipb, _) in ROUTES.items():
            for vm, ip in ((t.a, ipa), (t.b, ipb)):
                vm.wait_until(f'[ -e /sys/class/net/{ifn} ]', 10, what=ifn)
                vm.run(f'ip addr add {ip}/24 dev {ifn} && ip link set {ifn} up')
            for vm in t.vms:
                h.wait_carrier(vm, 1, 20, ifname=ifn)
            out = t.a.run(f'ip -d link show {ifn}')
            m = re.search(r'maxmtu (\d+)', out)
            top = min(int(m.group(1)) if m else 1500, MAX_MTU)
            # the largest MTU both ends take (ntb_netdev's maxmtu is more
            # than its transport's frames allow)
            for mtu in [top] + [x for x in (65000, 32768, 16384, 9000)
                                if x < top] + [1500]:
                if all(vm.sh(f'ip link set {ifn} mtu {mtu}')[0] == 0
                       for vm in t.vms):
                    break
            self.mtu[name] = mtu
            for vm in t.vms:
                vm.run(f'ip link set {ifn} mtu 1500')
            ok, out = h.ping(t.a, ipb, count=1)
            if not ok:
                ok, out = h.ping(t.a, ipb, count=1)
            if not ok:
                raise BenchError(f'{name}: no ping\n{out}')
        self.info['best_mtu'] = dict(self.mtu)
        self.info['sockperf'] = t.b.sh('command -v sockperf')[0] == 0
        t.b.run('iperf3 -s -D >/dev/null 2>&1')
        if self.info['sockperf']:
            for name, (_, _, ipb, _) in ROUTES.items():
                t.b.run(f'(sockperf server -i {ipb} -p 11111 >/dev/null 2>&1 &)')
        self.progress('up: best MTUs ' + ', '.join(
            f'{ROUTES[n][3]} {m}' for n, m in self.mtu.items()))

    def down(self):
        if self.topo is not None:
            self.topo.teardown()

    def add(self, route, name, value):
        self.raw.setdefault((route, name), []).append(value)

    def set_mtu(self, route, mtu):
        ifn = ROUTES[route][0]
        for vm in self.topo.vms:
            vm.run(f'ip link set {ifn} mtu {mtu}')
        time.sleep(0.3)

    def tcp(self, route, streams, mtu_tag, rep):
        t = self.topo
        ifn, _, ipb, label = ROUTES[route]
        s0 = {vm.name: busy(vm) for vm in t.vms}
        try:
            res = h.iperf3(t.a, ipb, f'-P {streams}', self.args.secs,
                           server=t.b, one_off=False, tries=3)
        except h.CaseFailure as e:
            raise BenchError(str(e)) from None
        s1 = {vm.name: busy(vm) for vm in t.vms}
        mbps = h.iperf3_mbps(res)
        gb = res['end']['sum_received']['bytes'] / 1e9
        cpu = sum((s1[n][0] - s0[n][0]) / 100 for n in s0)	# USER_HZ
        self.add(route, f'tcp{streams}_{mtu_tag}', mbps)
        if streams == 1 and mtu_tag == '1500' and gb > 0:
            self.add(route, 'cpu_s_per_gb', cpu / gb)
        self.runs.append({'route': route, 'streams': streams, 'mtu': mtu_tag,
                          'rep': rep, 'mbps': mbps, 'gb': gb, 'cpu_s': cpu})
        self.progress(f'  {label:20s} tcp {streams}x mtu {mtu_tag:4s} rep {rep}: '
                      f'{mbps:8.1f} Mbit/s, {cpu / gb if gb else 0:5.1f} CPU s/GB')

    def ping(self, route, rep):
        _, _, ipb, label = ROUTES[route]
        out = self.topo.a.run(
            f'ping -A -c {PING_COUNT} -W 5 {ipb} 2>&1 | '
            "grep -o 'time=[0-9.]*' | cut -d= -f2", timeout=300)
        v = sorted(float(x) * 1000 for x in out.split())
        if len(v) < PING_COUNT * 0.99:
            raise BenchError(f'{route} ping: {len(v)} of {PING_COUNT} replies')
        p50 = statistics.median(v)
        p99 = v[min(len(v) - 1, int(len(v) * 0.99))]
        self.add(route, 'ping_p50', p50)
        self.add(route, 'ping_p99', p99)
        self.progress(f'  {label:20s} ping rep {rep}: p50 {p50:6.0f} us, p99 {p99:6.0f} us')

    def udp_rr(self, route, rep):
        _, _, ipb, label = ROUTES[route]
        out = self.topo.a.run(f'sockperf ping-pong -i {ipb} -p 11111 -t 3 '
                              '--full-rtt -m 64 2>&1', timeout=60)
        out = re.sub(r'\x1b\[[0-9;]*m', '', out)
        p = dict(re.findall(r'percentile (\d+\.\d+) =\s*([0-9.]+)', out))
        if '50.000' not in p:
            raise BenchError('sockperf output not understood:\n' + out[-500:])
        self.add(route, 'udp_rr_p50', float(p['50.000']))
        self.progress(f"  {label:20s} sockperf rep {rep}: p50 {float(p['50.000']):6.0f} us")


def ntb_bench(args, progress, fig):
    """The section: 'figures' ('route.name' -> fig()), 'ratios', 'runs',
    'errors', 'splats', 'guest'."""
    reps = args.reps
    sec = {'secs': args.secs, 'reps': reps, 'routes': {n: r[3] for n, r in ROUTES.items()},
           'labels': {n: f'{lab}, {u}' for n, (lab, u) in FIGURES.items()},
           'figures': {}, 'ratios': {}, 'runs': [], 'errors': [], 'splats': [],
           'guest': {}}
    sec['plan'] = (f'iperf3 {args.secs} s per run, ping -A x{PING_COUNT}, sockperf 3 s; '
                   f'{reps} repetitions, the routes interleaved within each')
    progress('plan: ' + sec['plan'])
    R = NtbRoute(args, progress)

    def attempt(what, fn, *a):
        try:
            fn(*a)
        except (BenchError, h.CaseFailure) as e:
            sec['errors'].append(f'{what}: {e}')
            progress(f'ERROR {what}: {str(e).splitlines()[0][:200]}')
    try:
        R.up()
        for rep in range(1, reps + 1):
            for mtu_tag in ('1500', 'best'):
                for route in ROUTES:
                    R.set_mtu(route, 1500 if mtu_tag == '1500' else R.mtu[route])
                    for streams in (1, 4):
                        attempt(f'{route} tcp {streams} {mtu_tag}', R.tcp, route,
                                streams, mtu_tag, rep)
            for route in ROUTES:
                R.set_mtu(route, 1500)
                attempt(f'{route} ping', R.ping, route, rep)
                if R.info.get('sockperf'):
                    attempt(f'{route} sockperf', R.udp_rr, route, rep)
    except (h.HarnessError, h.CaseFailure, h.CaseSkip, BenchError) as e:
        sec['errors'].append(f'{type(e).__name__}: {e}')
        progress(f'ERROR {type(e).__name__}: {str(e).splitlines()[0][:200]}')
    finally:
        if R.topo is not None:
            for vm in R.topo.vms:
                sec['splats'] += [f'{vm.name}: {s}' for s in
                                  h.dmesg_check(vm.console_log())]
        R.down()
        if R.wd is not None:
            h.release_workdir(R.wd, args.keep or bool(sec['errors']))
    sec.update(R.info)
    sec['runs'] = R.runs
    for (route, name), vals in R.raw.items():
        f = fig(vals, FIGURES[name][1])
        if f is not None:
            sec['figures'][f'{route}.{name}'] = f
    for (num, den, name), (goal, how) in GOALS.items():
        v = sec['figures'].get(f'{num}.{name}')
        d = sec['figures'].get(f'{den}.{name}')
        if v and d and d['median']:
            r = v['median'] / d['median']
            sec['ratios'][f'{num}/{den} {name}'] = {
                'ratio': r, 'goal': goal, 'how': how,
                'met': r >= goal if how == 'min' else r <= goal}
    return sec


def ntb_md(R, w):
    """The section into w() (report.write_section_md)."""
    sec = R.get('ntb') or {}
    w('## pcinet on an NTB, against ntb_netdev and against pcinet on ivshmem\n')
    w(f"Plan: {sec.get('plan', '?')}; best MTUs {sec.get('best_mtu', {})}.\n")
    routes = sec.get('routes', {})
    figs = sec.get('figures', {})
    w('| figure | ' + ' | '.join(routes.values()) + ' |')
    w('|---|' + '---|' * len(routes))
    for name, label in sec.get('labels', {}).items():
        cells = []
        for r in routes:
            f = figs.get(f'{r}.{name}')
            cells.append(f"{f['median']:.1f} ({f['min']:.1f}-{f['max']:.1f})" if f else '-')
        w(f'| {label} | ' + ' | '.join(cells) + ' |')
    w('')
    w('| ratio | value | target | met |')
    w('|---|---|---|---|')
    for name, r in sec.get('ratios', {}).items():
        w(f"| {name} | {r['ratio']:.2f} | {'>=' if r['how'] == 'min' else '<='} "
          f"{r['goal']} | {'yes' if r['met'] else 'no'} |")
    w('')
