#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# make demo, make chassis: install what is missing, build, then run
# tests/qemu/<program>.py (default demo):
#   demo     boot two machines joined by pcinet, show the link, pings and
#            iperf3 each way, shut down
#   chassis  [BOARDS=N] [KEEP=1] boot a host and N boards (default 4), one
#            pcinet link each, bridged on the host; show names, every board
#            reaching every other and every board's console from the host;
#            shut down (KEEP=1: stay up, take commands)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
program=${1:-demo}
case $program in
demo | chassis) ;;
*) echo "usage: $0 [demo|chassis]" >&2; exit 2 ;;
esac
echo "== setup (packages, kernel image and headers)"
scripts/setup.sh | tail -n 2
echo "== build (module, fabric)"
make -s module fabric >/dev/null
exec python3 "tests/qemu/$program.py"
