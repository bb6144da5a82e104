#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The kernel's NTB stack between two guests, on the emulated NTB device.

The link is pcinet-fabric -N's memory, driven by the test-only NTB hardware
driver tools/testing/pcinet/ntb-ivshmem/ntb_ivshmem.ko; the NTB core,
ntb_transport, ntb_netdev and ntb_tool are mainline's, built unchanged from
linux-source-6.12 by scripts/ntb-modules.sh (Debian's kernel has no NTB).

  ntb-tool     mainline ntb_tool's own checks on the emulated device: link
               up on both sides, scratchpads both ways, doorbell bits set,
               seen, cleared, memory windows both ways (proves the
               emulation, not pcinet)
  ntb-netdev   mainline ntb_netdev over ntb_transport: ping, then 8 MiB
               sha256-checked each way (the anchor make bench compares
               pcinet against)
  ntb-pcinet   pcinet_ntb: pcinet0 carrier on both sides, ping, 8 MiB
               sha256-checked each way, ttyPCI0 both ways; then b's
               QEMU killed: a's carrier down within 1 s; b booted again:
               carrier back by itself, bytes intact
  ntb-pcinet-stop    b's QEMU SIGSTOPped for 3 s (the NTB link stays up:
               pcinet's heartbeat is what notices): a's carrier down
               within 1 s; SIGCONT: back by itself, 8 MiB intact
  ntb-pcinet-faults  the fabric (-C) as a hostile third party on the NTB
               path: side 0's control inbox and side 1's net ring (each in
               its owner's inbound window) scribbled for 3 s under iperf3
               both ways; the link back within 1 s by itself, then half
               the doorbells dropped under an 8 MiB transfer; 8 MiB each
               way intact, ratelimited logs only
  ntb-both     two emulated NTB devices in the same guests, pcinet_ntb on
               the first (pcinet0), ntb_transport + ntb_netdev on the
               second (eth0): both carry 8 MiB each way at once, intact
  ntb-pcinet-reload  pcinet_ntb removed and loaded again on each side in
               turn under a TCP stream the other way: the other side's
               carrier goes down and comes back by itself, no splat, and
               8 MiB cross intact afterwards

Run: python3 tests/qemu/test_ntb.py [-k PATTERN]
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True	# no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

NTB_KOS = ('ntb', 'ntb_transport', 'ntb_netdev', 'ntb_tool')
EMU = h.ROOT / 'tools/testing/pcinet/ntb-ivshmem/ntb_ivshmem.ko'
PCINET_NTB_KO = h.PCINET_KO.with_name('pcinet_ntb.ko')


def ntb_modules():
    """Build (once, cached) the NTB stack and the emulated device; the .ko
    files the guests get."""
    r = subprocess.run(['make', '-s', '-C', str(h.ROOT), 'ntb'],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode:
        raise h.HarnessError('make ntb failed:\n' + r.stdout)
    ntb_dir = None
    for line in (h.BUILD / 'env-ntb.sh').read_text().splitlines():
        if line.startswith('export NTB_DIR='):
            ntb_dir = Path(line.split('=', 1)[1])
    return ([ntb_dir / f'{m}.ko' for m in NTB_KOS] +
            [EMU, h.PCINET_KO, PCINET_NTB_KO])


if h.KERNEL == 'debian':
    h.configure(extra_modules=ntb_modules, fabric_ntb=True,
                fabric_size='64M')

TOOL = '/sys/kernel/debug/ntb_tool/*'


def insmod(vm, *mods):
    vm.run(' && '.join(f'insmod /lib/modules/extra/{m}.ko' for m in mods))


def emulated_ntb(t, vms=None):
    """The NTB core and the emulated device on vms (default: both)."""
    if h.KERNEL != 'debian':
        h.skip('the NTB modules are built for Debian\'s kernel only')
    for vm in vms or t.vms:
        insmod(vm, 'ntb', 'ntb_ivshmem')
        out = vm.run('ls /sys/bus/ntb/devices')
        h.expect(out.strip(), f'{vm.name}: no NTB device')
    t.mark_dirty('NTB modules loaded')


IRQS = "awk '/ntb-ivshmem/ { n += $2 } END { print n + 0 }' /proc/interrupts"


def irqs(vm):
    """Interrupts the emulated device took on vm, all vectors."""
    return int(vm.run(IRQS).strip())


def tool_write(vm, path, val):
    vm.run(f'd=$(echo {TOOL}); echo "{val}" > $d/{path}')


def tool_read(vm, path):
    return vm.run(f'd=$(echo {TOOL}); cat $d/{path}').strip()


@h.case('ntb-tool')
def _(t):
    emulated_ntb(t)
    for vm in t.vms:
        insmod(vm, 'ntb_tool')
    for vm in t.vms:
        tool_write(vm, 'link', 'Y')
    for vm in t.vms:
        vm.wait_until(f'[ "$(cat {TOOL}/peer0/link)" = Y ]', 5,
                      what='ntb_tool peer0/link Y',
                      show='dmesg | grep -i ntb | tail -n 5')
    # scratchpads: each side writes the other's, and its own
    for vm, peer, val in ((t.a, t.b, '0x12345678'), (t.b, t.a, '0x9abcdef0')):
        tool_write(vm, 'peer0/spad3', val)
        got = tool_read(peer, 'spad3')
        h.expect(int(got, 0) == int(val, 0),
                 f'{peer.name}: spad3 = {got}, {vm.name} wrote {val}')
        tool_write(peer, 'spad5', '0x55aa55aa')
        got = tool_read(vm, 'peer0/spad5')
        h.expect(int(got, 0) == 0x55aa55aa,
                 f'{vm.name}: peer0/spad5 = {got}, {peer.name} wrote 0x55aa55aa')
    # doorbells: set by the peer, seen (db_event blocks until it is),
    # cleared; bits on every vector
    for vm, peer in ((t.a, t.b), (t.b, t.a)):
        before = irqs(peer)
        tool_write(vm, 'peer_db', 's 0x80000005')
        # delivered as interrupts, not only readable (db_event returns at
        # once when the bits are already set)
        peer.wait_until(f'[ "$({IRQS})" -gt {before} ]', 5,
                        what=f'a doorbell interrupt on {peer.name}',
                        show='grep ntb /proc/interrupts')
        rc, out = peer.sh(f'd=$(echo {TOOL}); timeout 5 sh -c '
                          f'"echo 0x80000005 > $d/db_event"; cat $d/db', 10)
        h.expect(rc == 0 and int(out.split()[-1], 0) == 0x80000005,
                 f'{peer.name}: doorbells {out.strip()}, {vm.name} rang 0x80000005')
        tool_write(peer, 'db', 'c 0x80000005')
        got = tool_read(peer, 'db')
        h.expect(int(got, 0) == 0, f'{peer.name}: db {got} after clearing')
    # memory windows: the receiver sets up its inbound window, the sender
    # maps its outbound one and writes 64 KiB; both ways
    for vm, peer in ((t.a, t.b), (t.b, t.a)):
        tool_write(peer, 'peer0/mw_trans0', '65536')
        tool_write(vm, 'peer0/peer_mw_trans0', '0:65536')
        want = vm.run(f'd=$(echo {TOOL}); head -c 65536 /dev/urandom >/tmp/mw; '
                      f'dd if=/tmp/mw of=$d/peer0/peer_mw0 bs=4096 2>/dev/null; '
                      f'sha256sum </tmp/mw').split()[0]
        got = peer.run(f'd=$(echo {TOOL}); head -c 65536 $d/peer0/mw0 | '
                       'sha256sum').split()[0]
        h.expect(got == want, f'{peer.name}: inbound window holds {got}, '
                 f'{vm.name} wrote {want}')
    h.info('ntb_tool: link, spads, doorbells and windows both ways')


@h.case('ntb-netdev')
def _(t):
    emulated_ntb(t)
    addrs = {t.a: '10.9.0.1', t.b: '10.9.0.2'}
    for vm, ip in addrs.items():
        insmod(vm, 'ntb_transport', 'ntb_netdev')
        vm.wait_until('[ -e /sys/class/net/eth0 ]', 5, what='ntb_netdev eth0')
        vm.run(f'ip addr add {ip}/24 dev eth0 && ip link set eth0 up')
    for vm in t.vms:
        h.wait_carrier(vm, 1, 15, ifname='eth0')
    ok, out = h.ping(t.a, addrs[t.b], count=3)
    h.expect(ok, 'ping over ntb_netdev failed:\n' + out)
    h.tcp_transfer(t.a, t.b, addrs[t.b], 8)
    h.tcp_transfer(t.b, t.a, addrs[t.a], 8, port=5002)


def pcinet_ntb_up(vm, ip):
    """pcinet and its NTB backend on vm, pcinet0 up at ip."""
    h.load(vm, wait=())
    insmod(vm, 'pcinet_ntb')
    vm.wait_until('[ -e /sys/class/net/pcinet0 ]', 5, what='pcinet0',
                  show='dmesg | grep -i -e ntb -e pcinet | tail -n 8')
    vm.run(f'ip addr add {ip}/24 dev pcinet0 && ip link set pcinet0 up')


def tty_both_ways(t):
    for src, dst in ((t.a, t.b), (t.b, t.a)):
        msg = f'hello from {src.name} over NTB'
        dst.run('rm -f /tmp/tty.rx; (cat /dev/ttyPCI0 >/tmp/tty.rx &) ; '
                'usleep 200000')
        src.run(f'stty -F /dev/ttyPCI0 raw -echo; echo "{msg}" >/dev/ttyPCI0')
        dst.wait_until(f'grep -q "{msg}" /tmp/tty.rx', 5,
                       what=f'{msg!r} on {dst.name}', show='cat /tmp/tty.rx')
        dst.run('killall cat >/dev/null 2>&1; true')


@h.case('ntb-pcinet')
def _(t):
    emulated_ntb(t)
    addrs = {t.a: '10.8.0.1', t.b: '10.8.0.2'}
    for vm, ip in addrs.items():
        pcinet_ntb_up(vm, ip)
    for vm in t.vms:
        h.wait_carrier(vm, 1, 15)
    ok, out = h.ping(t.a, addrs[t.b], count=3)
    h.expect(ok, 'ping over pcinet_ntb failed:\n' + out)
    h.tcp_transfer(t.a, t.b, addrs[t.b], 8)
    h.tcp_transfer(t.b, t.a, addrs[t.a], 8, port=5002)
    tty_both_ways(t)

    # the peer dies: carrier follows it, and comes back with a new one
    t.b.kill()
    took = h.wait_carrier(t.a, 0, 1.5)
    h.expect(took <= 1.0, f'a: carrier still up {took:.2f} s after b died')
    t.b.restart()
    emulated_ntb(t, [t.b])
    pcinet_ntb_up(t.b, addrs[t.b])
    for vm in t.vms:
        h.wait_carrier(vm, 1, 15)
    h.tcp_transfer(t.b, t.a, addrs[t.a], 8, port=5003)
    h.info(f'carrier down {took:.2f} s after the peer died, back by itself')


def pcinet_ntb_pair(t):
    addrs = {t.a: '10.8.0.1', t.b: '10.8.0.2'}
    emulated_ntb(t)
    for vm, ip in addrs.items():
        pcinet_ntb_up(vm, ip)
    for vm in t.vms:
        h.wait_carrier(vm, 1, 15)
    return addrs


@h.case('ntb-pcinet-stop')
def _(t):
    addrs = pcinet_ntb_pair(t)
    t.b.kill(signal.SIGSTOP)
    try:
        took = h.wait_carrier(t.a, 0, 2.0)
        time.sleep(3)
    finally:
        t.b.kill(signal.SIGCONT)
    h.expect(took <= 1.0, f'a: carrier still up {took:.2f} s after b froze')
    for vm in t.vms:
        h.wait_carrier(vm, 1, 10)
    h.tcp_transfer(t.a, t.b, addrs[t.b], 8)
    h.info(f'carrier down {took:.2f} s after the peer froze, back by itself')


HEAL_LIMIT = 1.0
LOG_LIMIT = 200


@h.case('ntb-pcinet-faults', topology=dict(fabric_control=True))
def _(t):
    addrs = pcinet_ntb_pair(t)
    marks = {vm: int(vm.run('dmesg | wc -l')) for vm in t.vms}
    for vm, peer in ((t.a, t.b), (t.b, t.a)):
        vm.run('killall iperf3 >/dev/null 2>&1; iperf3 -s -D >/dev/null 2>&1')
    for vm, peer in ((t.a, t.b), (t.b, t.a)):
        vm.run(f'(iperf3 -c {addrs[peer]} -t 3600 >/dev/null 2>&1 &) '
               '>/dev/null 2>&1')
    time.sleep(1)
    seed = int(time.time())
    for region in ('ctrl0', 'net1'):
        h.info(t.fabric.fault(f'scribble {region} 2000 3 random {seed}'))
    time.sleep(3)
    while 'scribble=none' not in t.fabric.fault('status'):
        time.sleep(0.05)
    took = max(h.wait_carrier(vm, 1, HEAL_LIMIT) for vm in t.vms)
    for vm in t.vms:
        vm.run('killall iperf3 >/dev/null 2>&1; usleep 200000; true')
    h.info(f'link back {took:.2f} s after the writes stopped (seed {seed})')
    t.fabric.fault('doorbell drop 50')
    try:
        h.tcp_transfer(t.a, t.b, addrs[t.b], 8)
    finally:
        t.fabric.fault('doorbell normal')
    h.tcp_transfer(t.b, t.a, addrs[t.a], 8, port=5002)
    for vm in t.vms:
        n = int(vm.run('dmesg | wc -l')) - marks[vm]
        h.expect(n <= LOG_LIMIT, f'{vm.name} logged {n} lines: not '
                 'ratelimited')


@h.case('ntb-both', topology=dict(links=[('a', 'b')] * 2))
def _(t):
    emulated_ntb(t)
    ip = {'pcinet0': ('10.8.0.1', '10.8.0.2'), 'eth0': ('10.9.0.1', '10.9.0.2')}
    for vm in t.vms:
        h.load(vm, wait=())
        insmod(vm, 'pcinet_ntb')
        devs = sorted(vm.run('ls /sys/bus/ntb/devices').split())
        h.expect(len(devs) == 2, f'{vm.name}: NTB devices {devs}')
        vm.run(f'echo {devs[1]} >/sys/bus/ntb/drivers/pcinet_ntb/unbind')
        insmod(vm, 'ntb_transport', 'ntb_netdev')
        h.expect(vm.run(f'ls /sys/bus/ntb/drivers/ntb_transport/ | '
                        f'grep -c {devs[1]}').strip() == '1',
                 f'{vm.name}: ntb_transport did not bind {devs[1]}')
    for ifn, (ipa, ipb) in ip.items():
        for vm, addr in ((t.a, ipa), (t.b, ipb)):
            vm.wait_until(f'[ -e /sys/class/net/{ifn} ]', 5, what=ifn)
            vm.run(f'ip addr add {addr}/24 dev {ifn} && ip link set {ifn} up')
        for vm in t.vms:
            h.wait_carrier(vm, 1, 15, ifname=ifn)
    # both at once: a -> b on pcinet0 in the background, b -> a on eth0
    t.b.run('rm -f /tmp/bg.sha; (socat -u TCP-LISTEN:5020,reuseaddr STDOUT | '
            'sha256sum >/tmp/bg.part && mv /tmp/bg.part /tmp/bg.sha) '
            '>/dev/null 2>&1 &')
    want = t.a.run('head -c 8388608 /dev/urandom >/tmp/bg.tx; sha256sum </tmp/bg.tx').split()[0]
    t.a.wait_until(f'socat -u FILE:/tmp/bg.tx TCP:{ip["pcinet0"][1]}:5020 '
                   '& echo $! >/tmp/bg.pid; true', 10)
    h.tcp_transfer(t.b, t.a, ip['eth0'][0], 8, port=5021)
    t.b.wait_until('[ -e /tmp/bg.sha ]', 60, what='the pcinet0 transfer')
    got = t.b.run('cat /tmp/bg.sha').split()[0]
    h.expect(got == want, f'pcinet0 a->b: sha256 {got}, sent {want}')
    h.tcp_transfer(t.a, t.b, ip['eth0'][1], 8, port=5022)


@h.case('ntb-pcinet-reload')
def _(t):
    addrs = pcinet_ntb_pair(t)
    for vm, other in ((t.b, t.a), (t.a, t.b)):
        # a stream toward vm while its backend goes away and comes back
        vm.run('(socat -u TCP-LISTEN:5010,reuseaddr /dev/null '
               '>/dev/null 2>&1 &)')
        other.run(f'(timeout 20 socat -u /dev/zero TCP:{addrs[vm]}:5010 '
                  '>/dev/null 2>&1 &) ; usleep 500000')
        vm.run('rmmod pcinet_ntb')
        h.wait_carrier(other, 0, 2.0)
        insmod(vm, 'pcinet_ntb')
        vm.wait_until('[ -e /sys/class/net/pcinet0 ]', 5, what='pcinet0')
        vm.run(f'ip addr add {addrs[vm]}/24 dev pcinet0 && '
               'ip link set pcinet0 up')
        for x in t.vms:
            h.wait_carrier(x, 1, 15)
        for x in t.vms:
            x.run('killall socat >/dev/null 2>&1; true')
    h.tcp_transfer(t.a, t.b, addrs[t.b], 8)
    h.tcp_transfer(t.b, t.a, addrs[t.a], 8, port=5002)


if __name__ == '__main__':
    raise SystemExit(h.main())
