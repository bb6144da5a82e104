#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make chassis BOARDS=N: a host and N boards, one pcinet link each.

    board1 10.77.0.1   board2 10.77.0.2   ...   boardN 10.77.0.N
       pcinet0            pcinet0                  pcinet0
          |                  |                        |
    pcinet-fabric      pcinet-fabric            pcinet-fabric   (one per link)
          |                  |                        |
       pcinet0            pcinet1       ...        pcinet<N-1>
          +------------ br0 10.77.0.254 ---------------+          host

The host bridges its links, so the boards are on one Ethernet segment and
reach each other through it; the host reaches every board's console on
its /dev/ttyPCI<k>, and knows which board each link leads to from the
board's published identity (device/peer_name, peer_slot: every board
loads pcinet with slot=K, its host name is its machine name).

The same from Python (tests/qemu/test_chassis.py):

    import chassis
    @h.case('chassis-3-boards', topology=chassis.topology(3))
    def _(t):
        h.expect(not chassis.run(t, out=h.info), ...)

Run: python3 tests/qemu/chassis.py [--boards N] [--keep]   (BOARDS, KEEP=1)
--keep leaves the chassis running and takes commands for its machines
("board2 ip -s link") until end of input.  The work dir
(build/qemu-run/chassis.*: initramfs, console logs) is removed on success
and kept, with its path printed, on failure.
"""

import lzma
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

SUBNET = '10.77.0'
HOST = 'host'
HOST_IP = f'{SUBNET}.254'
BRIDGE = 'br0'
EXTRA = '/lib/modules/extra'


def board_names(n):
    """board1 .. boardN."""
    return [f'board{k}' for k in range(1, n + 1)]


def slot(name):
    """The slot of a board (board3: 3), published with insmod slot=."""
    return int(name[len('board'):])


def board_ip(name):
    return f'{SUBNET}.{slot(name)}'


def topology(n):
    """The harness topology of a chassis: host + board1..boardN, one link
    (one pcinet-fabric) host<->boardK each; the host's links are pcinet0..
    in board order, but the chassis reads which is which from sysfs."""
    boards = board_names(n)
    return dict(machines=(HOST, *boards), links=[(HOST, b) for b in boards])


def bridge_ko(env=None):
    """The guest kernel's bridge.ko, uncompressed under build/modules/ (the
    initramfs gets it as an extra module, its stp and llc are loaded at
    boot); None when the kernel has the bridge built in (the debug one)."""
    env = env or h.load_env()
    moddir = Path(env['MODDIR'])
    for p in sorted(moddir.glob('kernel/net/bridge/bridge.ko*')):
        out = h.BUILD / 'modules' / env['KVER'] / 'bridge.ko'
        if not out.exists() or out.stat().st_mtime < p.stat().st_mtime:
            out.parent.mkdir(parents=True, exist_ok=True)
            data = p.read_bytes()
            if p.suffix == '.xz':
                data = lzma.decompress(data)
            elif p.suffix != '.ko':
                raise h.HarnessError(f'{p}: cannot decompress')
            tmp = out.with_suffix('.tmp')
            tmp.write_bytes(data)
            tmp.replace(out)
        return out
    return None


def extra_modules(env=None):
    """pcinet.ko and, when it is a module, bridge.ko."""
    ko = bridge_ko(env)
    return [h.PCINET_KO] + ([ko] if ko else [])


def _each(fn, items):
    """fn(item) for every item at once (each VM's agent answers on its own;
    commands for one VM stay in order); the results, in order."""
    items = list(items)
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as ex:
        return list(ex.map(fn, items))


def boards(t):
    return [vm for vm in t.vms if vm.name != HOST]


# --------------------------------------------------------------------------
# bring-up
# --------------------------------------------------------------------------

def bring_up(t, timeout=30.0):
    """pcinet on every machine (board K with slot=K), the host's links in
    br0 (10.77.0.254), each board's pcinet0 at 10.77.0.K/24; waits for
    carrier everywhere.  Returns the seconds it took."""
    t0 = time.monotonic()
    host, bs = t[HOST], boards(t)
    n = len(bs)
    host_ifs = [f'pcinet{i}' for i in range(n)]

    def up_board(vm):
        h.load(vm, args=f'slot={slot(vm.name)}',
               wait=('/sys/class/net/pcinet0', '/dev/ttyPCI0'))
        h.net_up(vm, board_ip(vm.name))

    def up_host(vm):
        h.load(vm, wait=tuple(f'/sys/class/net/{i}' for i in host_ifs)
               + tuple(f'/dev/ttyPCI{i}' for i in range(n)), timeout=10)
        # bridge.ko is there unless the kernel has it built in (debug)
        vm.run(f'if [ -e {EXTRA}/bridge.ko ] && ! grep -q "^bridge " '
               f'/proc/modules; then insmod {EXTRA}/bridge.ko || exit 1; fi; '
               f'ip link add {BRIDGE} type bridge forward_delay 0 && '
               f'ip addr add {HOST_IP}/24 dev {BRIDGE} && '
               f'ip link set {BRIDGE} up && '
               f'for i in {" ".join(host_ifs)}; do '
               f'ip link set $i master {BRIDGE} && ip link set $i up || '
               'exit 1; done')

    _each(lambda vm: up_host(vm) if vm is host else up_board(vm), t.vms)
    _each(lambda vm: h.wait_carrier(vm, 1, timeout), bs)
    for i in host_ifs:
        h.wait_carrier(host, 1, timeout, i)
    # a bridge port forwards once its carrier is up (no STP, no delay)
    host.wait_until(f'for s in /sys/class/net/{BRIDGE}/brif/*/state; do '
                    '[ "$(cat $s)" = 3 ] || exit 1; done', timeout,
                    what=f'every port of {BRIDGE} forwarding (state 3)',
                    show=f'grep . /sys/class/net/{BRIDGE}/brif/*/state')
    return time.monotonic() - t0


def host_ports(t):
    """[(ifname, tty, peer_name, peer_slot, pci address)] of the host's
    links, read from sysfs: the tty is the ttyPCI whose device/ is the
    interface's."""
    out = t[HOST].run(
        'for n in /sys/class/net/pcinet*; do d=$(readlink -f $n/device); '
        'tty=-; for c in /sys/class/tty/ttyPCI*; do '
        '[ "$(readlink -f $c/device)" = "$d" ] && tty=${c##*/}; done; '
        'echo "${n##*/} $tty $(cat $d/peer_name) $(cat $d/peer_slot) '
        '${d##*/}"; done')
    ports = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 5:
            ports.append((f[0], f[1], f[2], int(f[3]), f[4]))
    return ports


# --------------------------------------------------------------------------
# checks: each returns [(ok, line)], one line per check
# --------------------------------------------------------------------------

def check_names(t, ports):
    """Every board on exactly one host link, with its slot; each link has
    its tty."""
    res = []
    by_board = {p[2]: p for p in ports}
    for vm in boards(t):
        p = by_board.get(vm.name)
        if p is None:
            res.append((False, f'{vm.name}: on no host link (host sees '
                        f'{sorted(by_board)})'))
            continue
        ifname, tty, name, pslot, pci = p
        ok = pslot == slot(vm.name) and tty != '-'
        res.append((ok, f'host {ifname} /dev/{tty} -> {name} slot {pslot} '
                    f'({pci})'))
    if len(ports) != len(boards(t)):
        res.append((False, f'host has {len(ports)} links for '
                    f'{len(boards(t))} boards'))
    return res


def check_pings(t, tries=2):
    """Every board pings every other board (count 1; a second try for
    the ARP race on a slow guest) and the host's bridge address."""
    bs = boards(t)

    def from_board(src):
        dsts = [(b.name, board_ip(b.name)) for b in bs if b is not src]
        dsts.append((f'host {BRIDGE}', HOST_IP))
        script = ''.join(
            f'r=FAIL; for i in {" ".join(["1"] * tries)}; do '
            f'ping -c 1 -W 3 {ip} >/tmp/ping.out 2>&1 && '
            'r="ok $(sed -n "s/.*time=\\([0-9.]*\\) ms.*/\\1 ms/p" '
            '/tmp/ping.out)" && break; done; '
            f'echo "{name}|{ip}|$r"; '
            for name, ip in dsts)
        out = src.run(script, timeout=30 + 10 * len(dsts))
        res = []
        for line in out.splitlines():
            name, ip, r = line.split('|', 2)
            res.append((r.startswith('ok'),
                        f'{src.name} -> {name} ({ip}): {r}'))
        return res
    return [r for rs in _each(from_board, bs) for r in rs]


# the command line the host types; \\$: expanded by the board's shell
TTY_LINE = ('echo console of \\$(hostname), slot '
            '\\$(cat /sys/module/pcinet/parameters/slot)')


def start_consoles(t):
    """Each board serves a shell on its /dev/ttyPCI0 (restarted when it
    ends), as a board would a getty; the host's ends are set raw first, so
    nothing the boards write is echoed back."""
    t[HOST].run('for c in /dev/ttyPCI*; do stty -F $c raw -echo || exit 1; '
                'done')
    # +i: no prompt, so the host reads only the answers
    _each(lambda vm: vm.run(
        'stty -F /dev/ttyPCI0 raw -echo; (while :; do sh +i '
        '</dev/ttyPCI0 >/dev/ttyPCI0 2>&1; done) >/dev/null 2>&1 &'),
        boards(t))


def check_consoles(t, ports):
    """start_consoles(), then the host sends a command line down each of
    its ttys; the board at the other end (device/peer_name) must answer
    with its own name and slot."""
    start_consoles(t)
    res = []
    for ifname, tty, name, pslot, _ in ports:
        if tty == '-':
            continue
        rc, out = t[HOST].sh(f'exec 3<>/dev/{tty}; echo "{TTY_LINE}" >&3; '
                             'timeout 10 head -n 1 <&3', timeout=30)
        got = out.strip().splitlines()[-1] if out.strip() else '(nothing)'
        ok = rc == 0 and got == f'console of {name}, slot {pslot}'
        res.append((ok, f'host /dev/{tty} -> {name}: "{got}"'))
    return res


def run(t, out=print):
    """Bring the chassis up on a booted topology of topology(n) and check
    it, printing one line per check with out(); returns the lines that
    failed (empty: all well)."""
    took = bring_up(t)
    out(f'== links up, br0 on the host, boards on {SUBNET}.0/24 '
        f'({took:.1f}s)')
    ports = host_ports(t)
    failed = []
    sections = (('which board is on which host link (device/peer_name, '
                 'peer_slot)', lambda: check_names(t, ports)),
                ('every board reaches every other through the host\'s br0',
                 lambda: check_pings(t)),
                ('the console of every board from the host (/dev/ttyPCI<k>)',
                 lambda: check_consoles(t, ports)))
    counts = []
    for title, fn in sections:
        out(f'== {title}')
        res = fn()
        for ok, line in res:
            out(f'[{" OK " if ok else "FAIL"}] {line}')
            if not ok:
                failed.append(line)
        counts.append((sum(ok for ok, _ in res), len(res)))
    (nn, tn), (np_, tp), (nc, tc) = counts
    n = len(boards(t))
    out(f'== chassis: host + {n} board{"s" if n != 1 else ""}: '
        f'names {nn}/{tn}, board-to-board and host pings {np_}/{tp}, '
        f'consoles {nc}/{tc}')
    return failed


# --------------------------------------------------------------------------
# make chassis
# --------------------------------------------------------------------------

def interact(t):
    """--keep: run "<machine> <command>" lines from stdin until EOF."""
    names = ' '.join(vm.name for vm in t.vms)
    print(f'\n== the chassis stays up: type "<machine> <command>" '
          f'(machines: {names}), end with Ctrl-D.  A board\'s console from '
          f'the host: "host exec 3<>/dev/ttyPCI0; echo uname -r >&3; '
          f'timeout 3 head -n 1 <&3"', flush=True)
    for line in sys.stdin:
        name, _, cmd = line.strip().partition(' ')
        if not name:
            continue
        try:
            rc, res = t[name].sh(cmd or 'true', timeout=120)
        except KeyError:
            print(f'no machine {name} ({names})', flush=True)
            continue
        except h.HarnessError as e:
            print(f'{name}: {e}', flush=True)
            continue
        print(res.rstrip() + (f'\n(exit {rc})' if rc else ''), flush=True)


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--boards', type=int,
                    default=int(os.environ.get('BOARDS') or 4))
    ap.add_argument('--keep', action='store_true',
                    default=os.environ.get('KEEP') == '1',
                    help='keep the chassis running (also KEEP=1)')
    args = ap.parse_args()
    if not 1 <= args.boards <= 19:
        ap.error('--boards: 1 to 19 (a crate\'s slots)')
    t0 = time.monotonic()
    env = h.load_env()
    h.check_fresh_build()
    wd = h.make_workdir('chassis.')
    rc = 1
    topo = None
    try:
        initrd = h.build_initramfs(wd / 'initramfs.cpio.gz',
                                   extra_modules(env), env)
        topo = h.Topology(wd, env['VMLINUZ'], initrd, topology(args.boards))
        print(f'== booting host and {args.boards} board'
              f'{"s" if args.boards != 1 else ""} (TCG), one '
              f'pcinet-fabric per link', flush=True)
        topo.boot()
        print(f'   booted in {topo.boot_time:.1f}s', flush=True)
        failed = run(topo, out=lambda s: print(s, flush=True))
        for vm in topo.vms:
            splats = h.dmesg_check(vm.console_log())
            if splats:
                failed.append(f'kernel splat on {vm.name}: {splats[0]}')
                print(f'[FAIL] {failed[-1]}', flush=True)
        rc = 1 if failed else 0
        if args.keep:
            interact(topo)
        print('== shutting down', flush=True)
    except (h.HarnessError, h.CaseFailure) as e:
        print(f'\nchassis failed: {e}', flush=True)
        if topo is not None:
            h.print_console_tails(topo.vms, 20)
    except KeyboardInterrupt:
        print('interrupted', flush=True)
    finally:
        if topo is not None:
            topo.teardown()
        if h.release_workdir(wd, keep=bool(rc)):
            print(f'work dir kept: {wd} (console logs, initramfs)', flush=True)
    print(f'chassis {"done" if rc == 0 else "FAILED"} in '
          f'{time.monotonic() - t0:.0f}s', flush=True)
    return rc


if __name__ == '__main__':
    raise SystemExit(main())
