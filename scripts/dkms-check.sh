#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make dkms: build pcinet the way a real machine would get it, through DKMS,
# against each kernel whose headers scripts/setup.sh installed (6.12 and
# 6.1).  The source tree is registered under a private version, built,
# checked for pcinet.ko, and removed again: nothing is installed into
# /lib/modules and nothing is loaded.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
. "$top/build/env.sh"
command -v dkms >/dev/null || { echo "dkms: not installed (scripts/setup.sh)"; exit 1; }
ver=0.1+check$$
src=/usr/src/pcinet-$ver
cleanup() {
	dkms remove -m pcinet -v "$ver" --all >/dev/null 2>&1 || true
	rm -rf "$src"
}
trap cleanup EXIT
mkdir -p "$src/drivers/net/pcinet"
cp "$top/dkms.conf" "$src/"
cp "$top"/drivers/net/pcinet/{Makefile,Kconfig,*.[ch]} "$src/drivers/net/pcinet/"
mkdir -p "$src/drivers/net/pcinet/uapi"
cp "$top"/drivers/net/pcinet/uapi/*.h "$src/drivers/net/pcinet/uapi/"
sed -i "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$ver\"/" "$src/dkms.conf"
dkms add -m pcinet -v "$ver" >/dev/null
for k in "$KVER" "$KVER_61"; do
	dkms build -m pcinet -v "$ver" -k "$k" >/dev/null
	ko=$(find "/var/lib/dkms/pcinet/$ver/$k" -name 'pcinet.ko*' | head -n1)
	[ -n "$ko" ] || { echo "dkms: no pcinet.ko built for $k"; exit 1; }
	echo "dkms: built $(basename "$ko") for $k"
done
