#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# make chassis [BOARDS=N] [KEEP=1]: install what is missing, build, boot a
# host and N boards (default 4), one pcinet link each, bridged on the host;
# show names, every board reaching every other and every board's console
# from the host; shut down (KEEP=1: stay up, take commands).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
echo "== setup (packages, kernel image and headers)"
scripts/setup.sh | tail -n 2
echo "== build (module, fabric)"
make -s module fabric >/dev/null
exec python3 tests/qemu/chassis.py
