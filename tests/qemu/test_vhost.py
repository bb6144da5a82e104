#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The virtio channel's device side in the kernel: /dev/pcinet-vhost<N>.

    +---- a (QEMU) -----------+   pcinet-fabric    +---- b (QEMU) ---------+
    | pcinet.ko: device side  |<== -m 64M -V 8M ==>| pcinet.ko: the board's |
    | vhost_probe             |    -n 4            | transport              |
    +-------------------------+                    +------------------------+

docs/design.md, "Virtio channel", "The host's character device".  The
probe (tools/pcinet-vhost/vhost_probe, one line per check) offers a
virtio-blk shaped device that nothing serves, checks every ioctl, the
eventfds and the memory file, and withdraws it; b sees it come and go
(its driver's status writes stay unanswered): vhost_probe --board
checks that b's transport registered it (GET_DRV valid, poll()).

Cases:
  vhost-probe  /dev/pcinet-vhost0 on a; vhost_probe passes every check
  vhost-off    a window without virtio regions: no /dev/pcinet-vhost0,
               and net still comes up
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcinet_harness as h  # noqa: E402

PROBE = h.ROOT / 'tools/pcinet-vhost/vhost_probe'

h.configure(machines=('a', 'b'), extra_modules=[h.PCINET_KO],
            fabric_size='64M', fabric_vio='8M', vectors=4)


def need_probe():
    if not os.access(PROBE, os.X_OK):
        h.skip('vhost_probe not built (make -C tools/pcinet-vhost '
               'vhost_probe)')


@h.case('vhost-probe', fresh=True)
def _(t):
    """Every check of vhost_probe against the kernel's character device."""
    need_probe()
    h.load(t.a)
    h.load(t.b)
    t.a.wait_until('[ -c /dev/pcinet-vhost0 ]', 5, what='/dev/pcinet-vhost0')
    rc, out = t.a.sh('vhost_probe --board 2>&1', timeout=60)
    for line in out.strip().splitlines():
        h.info(line)
    h.expect(rc == 0 and ', 0 failed' in out, f'vhost_probe exited {rc}')
    h.unload(t.a, 10)
    h.unload(t.b, 10)


@h.case('vhost-off', fresh=True, topology={'fabric_vio': None,
                                            'fabric_size': '16M'})
def _(t):
    """No virtio block in the window: no character device, net unchanged."""
    h.load(t.a)
    h.load(t.b)
    h.load_and_wait({t.a: '10.0.0.1', t.b: '10.0.0.2'})
    rc, _ = t.a.sh('[ -e /dev/pcinet-vhost0 ]')
    h.expect(rc != 0, '/dev/pcinet-vhost0 exists without virtio')
    h.unload(t.a, 10)
    h.unload(t.b, 10)


if __name__ == '__main__':
    raise SystemExit(h.main())
