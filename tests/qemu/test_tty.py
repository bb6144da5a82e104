#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""/dev/ttyPCI0 as users meet it: a serial line over the pcinet link.

    a  /dev/ttyPCI0  <== tty channel of the pcinet link ==>  /dev/ttyPCI0  b
"""

import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402
import test_net as net  # noqa: E402  (shares the topology setup)

TTY = '/dev/ttyPCI0'
h.CASES[:] = []		# only the tty cases from this file


def tty_up(t):
    for vm in (t.a, t.b):
        vm.run(f"grep -q '^pcinet ' /proc/modules || insmod {net.KO}; "
               f"for i in $(seq 100); do [ -e {TTY} ] && break; usleep 100000; done; "
               f"[ -e {TTY} ]")
    for vm in (t.a, t.b):
        vm.run(f'stty -F {TTY} raw -echo clocal')


def xfer(src, dst, n, pause=0, timeout=600):
    """n random bytes src -> dst over the tty in raw mode; sha256 equal."""
    dst.run(f'rm -f /tmp/trx.*; (head -c {n} {TTY} | sha256sum >/tmp/trx.part '
            f'&& mv /tmp/trx.part /tmp/trx.sha) >/dev/null 2>&1 & '
            f'echo $! >/tmp/trx.pid; usleep 300000')
    src.run(f'head -c {n} /dev/urandom >/tmp/ttx.bin; sha256sum </tmp/ttx.bin >/tmp/ttx.sha')
    src.run(f'(cat /tmp/ttx.bin >{TTY}; echo $? >/tmp/ttx.rc) >/dev/null 2>&1 &')
    if pause:
        time.sleep(1)
        dst.run("kill -STOP $(pidof head); true")
        time.sleep(pause)
        dst.run("kill -CONT $(pidof head); true")
    t0 = time.monotonic()
    dst.run('for i in $(seq 6000); do [ -e /tmp/trx.sha ] && break; '
            'usleep 100000; done; [ -e /tmp/trx.sha ]', timeout=timeout)
    dt = time.monotonic() - t0
    tx = src.run('cat /tmp/ttx.sha').split()[0]
    rx = dst.run('cat /tmp/trx.sha').split()[0]
    h.expect(tx == rx, f'{src.name}->{dst.name}: sha256 differs')
    return dt


@h.case('tty-raw-4M-each-way')
def _(t):
    """Random bytes (all 256 values) each way in raw mode arrive intact."""
    tty_up(t)
    for s, d in ((t.a, t.b), (t.b, t.a)):
        dt = xfer(s, d, 4 << 20)
        h.info(f'tty {s.name}->{d.name}: 4 MiB in {dt:.1f}s')


@h.case('tty-flow-control')
def _(t):
    """A reader paused for seconds mid-transfer loses nothing."""
    tty_up(t)
    xfer(t.a, t.b, 2 << 20, pause=4)


@h.case('tty-login')
def _(t):
    """A shell on b's ttyPCI0, driven from a: the command runs on b."""
    tty_up(t)
    t.b.run(f'(while :; do sh <{TTY} >{TTY} 2>&1; done) >/dev/null 2>&1 &')
    out = t.a.run(f'exec 3<>{TTY}; echo "echo on-\\$(hostname)-ok" >&3; '
                  f'timeout 10 grep -m 1 on- <&3', timeout=30)
    h.expect('on-b-ok' in out, 'no answer from b\'s shell:\n' + out)
    t.mark_dirty('shell left on the tty')


@h.case('tty-console')
def _(t):
    """Kernel messages of b appear on a's ttyPCI0 with the console on."""
    tty_up(t)
    t.b.run(f'rmmod pcinet && insmod {net.KO} console=1 && '
            f'for i in $(seq 100); do [ -e {TTY} ] && break; usleep 100000; done')
    t.a.run(f'(timeout 30 cat {TTY} >/tmp/con.out) >/dev/null 2>&1 & '
            f'usleep 500000')
    t.b.run('for i in $(seq 100); do grep -q "link 0 up" /dev/null; '
            'usleep 100000; done 2>/dev/null | true; sleep 3; '
            'echo "<3>pcinet-console-marker-42" >/dev/kmsg')
    out = t.a.run('for i in $(seq 100); do grep -q marker-42 /tmp/con.out '
                  '&& break; usleep 100000; done; cat /tmp/con.out', timeout=30)
    h.expect('pcinet-console-marker-42' in out,
             'kernel message did not arrive:\n' + out[-500:])
    t.mark_dirty('console left enabled')


@h.case('tty-hangup-on-peer-close')
def _(t):
    """The peer closing its end drops carrier (-clocal): the reader gets a
    hangup; after the peer unloads and reloads, the line works again."""
    tty_up(t)
    # b keeps its end open (DTR up), so a has carrier
    t.b.run(f'(sleep 600 <{TTY}) >/dev/null 2>&1 & usleep 500000')
    t.a.run(f'rm -f /tmp/hup; stty -F {TTY} -clocal; (cat {TTY} >/dev/null; '
            f'echo done >/tmp/hup) >/dev/null 2>&1 & usleep 1000000; '
            f'[ ! -e /tmp/hup ]')
    t.b.run('kill $(pidof sleep) 2>/dev/null; true')
    t.a.run('for i in $(seq 100); do [ -e /tmp/hup ] && break; usleep 100000; '
            'done; [ -e /tmp/hup ]', timeout=30)
    t.b.run('rmmod pcinet')
    tty_up(t)
    xfer(t.a, t.b, 64 << 10)


if __name__ == '__main__':
    raise SystemExit(h.main())
