#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make bench: install what is missing, build the module, the fabric and the
# guest-side bench tools, then run bench/bench.py: pcinet against
# virtio-net over QEMU's -netdev stream, in one pair of QEMU guests.
# Writes bench/results/latest.{json,md,png}.  Not part of `make check`.
#
#   scripts/bench.sh [--reps N] [--secs S] [--keep]   (or BENCH_REPS=, BENCH_SECS=)
#   scripts/bench.sh --report-only    latest.md/png again from latest.json
#   scripts/bench.sh --only storage   the storage section alone (make bench-storage)
#   scripts/bench.sh --only scale     the scaling section alone (make bench-scale)
#   scripts/bench.sh --only chassis   the chassis section alone (make bench-chassis)
#   scripts/bench.sh --only virtio    the virtio disk against NBD, from this
#                                     machine (make bench-virtio)
#   scripts/bench.sh --only vhost     stage 3: the virtio disk served by
#                                     pcinet-vhost in a host guest against
#                                     NBD from it (make bench-vhost)
#   scripts/bench.sh --only ntb       pcinet on the emulated NTB against
#                                     ntb_netdev and pcinet on ivshmem
#                                     (make bench-ntb)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

echo "== setup (packages, kernel image and headers)"
scripts/setup.sh | tail -n 2

echo "== build (module, fabric, guest tools)"
make -s module fabric >/dev/null
# pcinet-memcpy and pcinet-ttyperf (static, for the guests; mkinitramfs.sh
# copies them in), with pcinet-poke
make -s -C tools/testing/pcinet pcinet-memcpy pcinet-ttyperf pcinet-poke >/dev/null
# pcinet-peer: the other side of each link of the scaling section
make -s -C tools/pcinet-peer pcinet-peer >/dev/null
# pcinet-vhost: the host guest's side of the stage-3 section (mkinitramfs.sh
# puts it and qemu-storage-daemon in when it is built)
make -s -C tools/pcinet-vhost pcinet-vhost >/dev/null
# the NTB stack and the emulated NTB device (the ntb section)
make -s ntb >/dev/null

echo "== bench"
exec python3 bench/bench.py "$@"
