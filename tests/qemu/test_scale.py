#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Scale, short form: one guest with 4 links to 4 pcinet-peers (the rig
and its drawing: scale.py; the sweep N = 1..19: make bench, bench.py
--only scale).

peer-scale-4 asserts what a crate of boards relies on: every link comes
up (carrier on each pcinet<i>), each passes traffic (the guest pings
every peer, one subnet per link, 10.80.k.0/24), and idle links cost only
their heartbeat: the pcinet lines of /proc/interrupts over 5 s stay below
IRQ_BOUND per link and second (the heartbeat is 10 Hz per link).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402
import scale  # noqa: E402

N = 4
IRQ_BOUND = 25		# per link and second; the heartbeat is 10

h.configure(machines=('a',), links=[('a',)], extra_modules=[h.PCINET_KO])


@h.case(f'peer-scale-{N}', topology=scale.topology(N))
def _(t):
    """4 links, 4 peers: all up, each pings, idle interrupts < 4 x 25/s."""
    rig = scale.Rig(t, N)
    try:
        rig.start_peers()
        up = rig.bring_up()
        rig.address()
        rig.ping_all()
        irqs = rig.idle_irqs(5)
        h.info(f'{N} links up in {up:.2f}s (insmod to the last carrier); '
               f'idle: {irqs:.1f} pcinet interrupts/s ({irqs / N:.1f} per '
               f'link; bound {N * IRQ_BOUND})')
        h.expect(irqs < N * IRQ_BOUND,
                 f'idle: {irqs:.1f} pcinet interrupts/s with {N} links, '
                 f'want < {N * IRQ_BOUND}')
    finally:
        rig.close()


if __name__ == '__main__':
    raise SystemExit(h.main())
