#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make bench: install what is missing, build the module, the fabric and the
# guest-side bench tools, then run bench/bench.py: pcinet against
# virtio-net over QEMU's -netdev stream, in one pair of QEMU guests.
# Writes bench/results/latest.{json,md,png}.  Not part of `make check`.
#
#   scripts/bench.sh [--reps N] [--secs S] [--keep]   (or BENCH_REPS=, BENCH_SECS=)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

echo "== setup (packages, kernel image and headers)"
scripts/setup.sh | tail -n 2

echo "== build (module, fabric, guest bench tools)"
make -s module fabric >/dev/null
# Static, like pcinet-poke: the guests have no libc of their own.
# (tools/testing/pcinet/Makefile builds only the ring tests.)
tools=tools/testing/pcinet
for t in pcinet-memcpy pcinet-ttyperf; do
	if [ ! -x "$tools/$t" ] || [ "$tools/$t.c" -nt "$tools/$t" ] ||
	   [ drivers/net/pcinet/pcinet_layout.h -nt "$tools/$t" ]; then
		gcc -O2 -static -Wall -Wextra -I"$tools" -Idrivers/net/pcinet \
			-o "$tools/$t" "$tools/$t.c"
	fi
done

echo "== bench"
exec python3 bench/bench.py "$@"
