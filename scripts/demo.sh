#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# make demo: install what is missing, build, boot two machines joined by
# pcinet, show the link, pings and iperf3 each way, shut down.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "== setup (packages, kernel image and headers)"
scripts/setup.sh | tail -n 2
echo "== build (module, fabric)"
make -s module fabric >/dev/null
exec python3 tests/qemu/demo.py
