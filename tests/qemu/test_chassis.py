#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A chassis in short: a host and three boards, one pcinet link each
(tests/qemu/chassis.py, `make chassis` with BOARDS=3).

    board1 10.77.0.1    board2 10.77.0.2    board3 10.77.0.3
          \\                  |                   /
           +--- host: br0 10.77.0.254 (its pcinet0..2) ---+

Run: python3 tests/qemu/test_chassis.py [-k PATTERN], or make check
TESTS=chassis.  The case fails unless every board pings every other board
(through the host's bridge, their only path) and the host, the host finds
each board on the link that device/peer_name and peer_slot say, and each of
the host's /dev/ttyPCI<k> reaches the shell of the board named there.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chassis  # noqa: E402
import pcinet_harness as h  # noqa: E402

h.configure(extra_modules=chassis.extra_modules())


@h.case('chassis-3-boards', topology=chassis.topology(3))
def _(t):
    # one line per check on stderr with -v; the chassis' summary always
    failed = chassis.run(t, out=lambda s: h.info(s) if h.VERBOSE or
                         s.startswith('== chassis:') else None)
    t.mark_dirty('bridge, addresses and console shells set up')
    h.expect(not failed, f'{len(failed)} checks failed:\n' + '\n'.join(failed))


if __name__ == '__main__':
    raise SystemExit(h.main())
