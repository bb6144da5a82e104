# SPDX-License-Identifier: GPL-2.0-only
"""One guest, N links, N pcinet-peers: the rig of test_scale.py and of
make bench's scaling section (bench.py --only scale).

    +---------- a (QEMU) ----------+   fabric k    +-- host, netns pnq-<pid>-k --+
    | pcinet<i> 10.80.k.1/24       |<== ivshmem ==>| pcinet-peer --slot k+1      |
    |   (i: the link whose peer    |   k = 0..N-1  | TAP pnq0 10.80.k.2/24       |
    |    publishes slot k+1)       |               |                             |
    +------------------------------+               +-----------------------------+

Each link is a fabric of its own (topology(n): machines ('a',), links
[('a',)] * n: N ivshmem devices in a).  The guest names its links in
probe order; which interface reaches which peer is read from the peer's
identity (device/peer_slot), not assumed.  IPv6 is off on both sides, so
an idle link carries only its heartbeat.
"""

import json
import subprocess
import time

import pcinet_harness as h

import peer_lib

IPERF_PORT = 5201
NO_IPV6 = ('net.ipv6.conf.all.disable_ipv6=1',
           'net.ipv6.conf.default.disable_ipv6=1')
# /proc/interrupts: the sum of the CPU columns of every pcinet vector
IRQ_SUM = ("awk '/pcinet-/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) "
           "s += $i } END { print s + 0 }' /proc/interrupts")


def topology(n):
    """The @case / Topology options of a guest with n links."""
    return dict(machines=('a',), links=[('a',)] * n)


def guest_ip(k):
    return f'10.80.{k}.1'


def peer_ip(k):
    return f'10.80.{k}.2'


class Rig:
    """N pcinet-peers on the fabrics of topology t (from topology(n)) and
    the guest's side of every link.  close() removes the peers and their
    namespaces."""

    def __init__(self, t, n):
        self.t, self.vm, self.n = t, t.a, n
        self.peers = []
        self.ifname = {}		# k -> pcinet<i> in the guest
        self.mem_before = None

    def start_peers(self):
        for k in range(self.n):
            p = peer_lib.Peer(self.t, k, ip=peer_ip(k))
            self.peers.append(p)
            for s in NO_IPV6:
                p.run('sysctl', '-qw', s)
            p.start()

    def meminfo(self, field='MemAvailable'):
        """field of the guest's /proc/meminfo, KiB, after dropping caches."""
        out = self.vm.run(f'sync; echo 3 >/proc/sys/vm/drop_caches; '
                          f'usleep 300000; grep "^{field}:" /proc/meminfo')
        return int(out.split()[-2])

    def bring_up(self, timeout=60.0):
        """insmod, every pcinet<i> up, until all carriers are on; returns
        the seconds from insmod to the last carrier (guest clock)."""
        vm, n = self.vm, self.n
        vm.run('; '.join(f'sysctl -qw {s}' for s in NO_IPV6))
        self.mem_before = self.meminfo()
        vm.run(f'cat /proc/uptime >/tmp/up.t0; insmod {h.KO}')
        names = ' '.join(f'pcinet{i}' for i in range(n))
        vm.wait_until(' && '.join(f'[ -e /sys/class/net/pcinet{i} ]'
                                  for i in range(n)), timeout,
                      what=f'{n} pcinet interfaces',
                      show='ls /sys/class/net; dmesg | grep pcinet | tail')
        vm.run(f'for i in {names}; do ip link set $i up; done')
        carriers = ' && '.join(h.carrier_cond(1, f'pcinet{i}')
                               for i in range(n))
        vm.wait_until(f'{carriers} && cat /proc/uptime >/tmp/up.t1', timeout,
                      what=f'carrier on all {n} links', interval=0.02,
                      show=f'for i in {names}; do echo "$i carrier '
                      '$(cat /sys/class/net/$i/carrier)"; done; '
                      'dmesg | grep pcinet | tail')
        t0, t1 = (float(vm.run(f'cat /tmp/up.{x}').split()[0])
                  for x in ('t0', 't1'))
        h.check_module(vm)
        for p in self.peers:
            p.wait('up', timeout)
        return t1 - t0

    def address(self):
        """Map each link to its peer by the peer's slot; addresses on it."""
        out = self.vm.run('for d in /sys/class/net/pcinet*; do '
                          'echo "${d##*/} $(cat $d/device/peer_slot)"; done')
        for line in out.splitlines():
            ifn, slot = line.split()
            self.ifname[int(slot) - 1] = ifn
        h.expect(sorted(self.ifname) == list(range(self.n)),
                 f'peer slots seen by the guest: {out}')
        self.vm.run('; '.join(
            f'ip addr add {guest_ip(k)}/24 dev {self.ifname[k]}'
            for k in range(self.n)))

    def ping_all(self):
        """Each link passes traffic: the guest pings every peer."""
        bad = []
        for k in range(self.n):
            ok, out = h.ping(self.vm, peer_ip(k), count=1)
            if not ok:		# the first packet may race ARP
                ok, out = h.ping(self.vm, peer_ip(k), count=2)
            if not ok:
                bad.append(f'{self.ifname[k]} -> {peer_ip(k)}:\n{out}')
        h.expect(not bad, 'ping failed on:\n' + '\n'.join(bad))

    def idle_irqs(self, secs=5):
        """pcinet interrupts per second in the guest over secs of idle."""
        out = self.vm.run(f'cat /proc/uptime; {IRQ_SUM}; sleep {secs}; '
                          f'cat /proc/uptime; {IRQ_SUM}', timeout=secs + 60)
        u0, _, i0, u1, _, i1 = out.split()
        return (int(i1) - int(i0)) / (float(u1) - float(u0))

    def iperf_all(self, secs=5, warmup=2):
        """iperf3 from every peer's namespace to the guest at once (the
        load); returns (per-link Mbit/s received by the guest's pcinet<i>
        over one common window of secs, after warmup s, from rx_bytes;
        each link's iperf3 receiver figure over its own run).  The
        clients start one after another: only the common window is
        fair."""
        vm, n = self.vm, self.n
        vm.run('killall iperf3 >/dev/null 2>&1; ' + '; '.join(
            f'iperf3 -s -1 -D -p {IPERF_PORT + k} >/dev/null 2>&1'
            for k in range(n)) + '; usleep 500000')
        procs = [subprocess.Popen(
            ['ip', 'netns', 'exec', p.ns, 'iperf3', '-J', '-i', '0', '-c',
             guest_ip(k), '-p', str(IPERF_PORT + k), '-t',
             str(secs + 2 * warmup)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for k, p in enumerate(self.peers)]
        time.sleep(warmup)
        rx = ' '.join(f'/sys/class/net/{self.ifname[k]}/statistics/rx_bytes'
                      for k in range(n))
        out = vm.run(f'cat /proc/uptime {rx}; sleep {secs}; '
                     f'cat /proc/uptime {rx}', timeout=secs + 60).split()
        u0, b0 = float(out[0]), out[2:2 + n]
        u1, b1 = float(out[2 + n]), out[4 + n:]
        window = [(int(y) - int(x)) * 8 / (u1 - u0) / 1e6
                  for x, y in zip(b0, b1)]
        own = []
        for k, pr in enumerate(procs):
            try:
                out = pr.communicate(timeout=secs + 90)[0]
            except subprocess.TimeoutExpired:
                pr.kill()
                raise h.CaseFailure(f'iperf3 to {guest_ip(k)}: no end')
            try:
                res = json.loads(out[out.index('{'):])
            except ValueError:
                raise h.CaseFailure(f'iperf3 to {guest_ip(k)}: {out[-500:]}')
            if res.get('error'):
                raise h.CaseFailure(f'iperf3 to {guest_ip(k)}: '
                                    f'{res["error"]}')
            own.append(h.iperf3_mbps(res))
        return window, own

    def close(self):
        for p in self.peers:
            p.close()
        self.peers = []


def measure(t, n, secs=5, idle_secs=5):
    """The scaling figures of one topology(n) (bench.py --only scale)."""
    rig = Rig(t, n)
    try:
        rig.start_peers()
        up = rig.bring_up()
        rig.address()
        time.sleep(1)		# the first ARP and TCP of the pings, settled
        rig.ping_all()
        mem_after = rig.meminfo()
        irqs = rig.idle_irqs(idle_secs)
        mbps, own = rig.iperf_all(secs)
        return {'n': n, 'up_s': up, 'agg_mbps': sum(mbps),
                'min_mbps': min(mbps), 'max_mbps': max(mbps),
                'per_link_mbps': mbps, 'iperf3_mbps': own,
                'mem_drop_kib': rig.mem_before - mem_after,
                'mem_per_link_kib': (rig.mem_before - mem_after) / n,
                'idle_irqs_per_s': irqs}
    finally:
        rig.close()
