#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# scripts/setup.sh - prepare this machine to build pcinet and run its QEMU tests.
#
# Idempotent and fast when everything is already there:
#   1. installs the Debian packages the build and the tests need (apt is only
#      touched when dpkg-query says something is missing);
#   2. resolves the exact 6.12 kernel version from the installed
#      linux-headers-6.12-amd64 meta package (e.g. 6.12.117+deb12-amd64);
#   3. downloads (does NOT install) the matching linux-image-<ver>-unsigned
#      .deb into build/cache/ and unpacks it into build/kernel/<ver>/, so the
#      QEMU guests boot exactly the kernel the module is built against;
#   4. writes build/env.mk (for make) and build/env.sh (for shells).
#
# Usage: scripts/setup.sh            (from any directory)
#        scripts/setup.sh --debug-kernel-deps
#                                   step 1 only, for the packages that
#                                   scripts/debug-kernel.sh needs: make check
#                                   starts that build while the rest installs
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
export DEBIAN_FRONTEND=noninteractive

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, dpkg)"

# --- 1. Debian packages -----------------------------------------------------
PKGS=(
	# module build (kbuild of an external module)
	gcc libc6-dev make bc flex bison libelf-dev kmod sparse
	# checkpatch.pl and kernel-doc for the style gate
	linux-source-6.12 perl
	# kernel headers: 6.12 (main target) and the default 6.1 (second gate)
	linux-headers-6.12-amd64 linux-headers-amd64
	# initramfs (dash: the guests' /bin/sh) and kernel unpacking
	cpio zstd xz-utils gzip busybox-static dash
	# QEMU test harness and guest tools (netbase: /etc/services)
	qemu-system-x86 qemu-system-common python3 iperf3 ethtool tcpdump iproute2 procps socat netbase
	# make bench: the chart, and UDP request/response latency in the guests
	gnuplot-nox sockperf
	# make bench's storage section, in the guests (mkinitramfs.sh --storage;
	# qemu-storage-daemon, the NBD server, is in qemu-system-common)
	fio nbd-client diod e2fsprogs
	# make dkms: the module built as real machines get it
	dkms
)

# what scripts/debug-kernel.sh builds with (a subset of PKGS)
DEBUG_KERNEL_PKGS=(gcc libc6-dev make bc flex bison libelf-dev kmod perl
	linux-source-6.12 xz-utils)
[ "${1:-}" = --debug-kernel-deps ] && PKGS=("${DEBUG_KERNEL_PKGS[@]}")

missing=()
for p in "${PKGS[@]}"; do
	st="$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)"
	[ "${st:0:2}" = "ii" ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	log "installing: ${missing[*]}"
	# one update per hour is enough (the two steps of make check share it)
	mkdir -p "$BUILD/cache"
	stamp="$BUILD/cache/apt-updated"
	if [ -z "$(find "$stamp" -mmin -60 2>/dev/null)" ]; then
		apt-get update -qq
		touch "$stamp"
	fi
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
	log "packages: all ${#PKGS[@]} present"
fi
[ "${1:-}" = --debug-kernel-deps ] && exit 0

# --- 2. resolve the exact kernel versions -----------------------------------
# The meta package depends on e.g. "linux-headers-6.12.117+deb12-amd64 (= 6.12.117-1~deb12u1)".
headers_dep() {	# $1 = meta package -> "<abi-pkg> <pkg-version>"
	dpkg-query -W -f='${Depends}' "$1" | tr ',' '\n' |
		sed -n 's/^ *\(linux-headers-[^ ]*\) *(= *\([^)]*\)).*/\1 \2/p' | head -n1
}
read -r HDR_PKG PKGVER <<<"$(headers_dep linux-headers-6.12-amd64)"
[ -n "${HDR_PKG:-}" ] || die "cannot parse the dependency of linux-headers-6.12-amd64"
KVER="${HDR_PKG#linux-headers-}"			# 6.12.117+deb12-amd64
KDIR="/usr/src/linux-headers-$KVER"
[ -f "$KDIR/Makefile" ] || die "$KDIR missing (is $HDR_PKG installed?)"

read -r HDR61_PKG _ <<<"$(headers_dep linux-headers-amd64)"
KVER_61="${HDR61_PKG#linux-headers-}"			# 6.1.0-57-amd64
KDIR_61="/usr/src/linux-headers-$KVER_61"
[ -f "$KDIR_61/Makefile" ] || die "$KDIR_61 missing (is $HDR61_PKG installed?)"
log "kernel: $KVER (package $PKGVER); second gate: $KVER_61"

# --- 3. matching kernel image, unpacked (never installed) -------------------
IMG_PKG="linux-image-$KVER-unsigned"
KROOT="$BUILD/kernel/$KVER"
VMLINUZ="$KROOT/boot/vmlinuz-$KVER"
MODDIR="$KROOT/lib/modules/$KVER"
mkdir -p "$BUILD/cache"

if [ -f "$VMLINUZ" ] && [ -f "$MODDIR/modules.dep" ] && [ -f "$KROOT/.pkgver" ] &&
   [ "$(cat "$KROOT/.pkgver")" = "$PKGVER" ]; then
	log "image: $KROOT already unpacked"
else
	# apt-get download names files <pkg>_<version, ':' as %3a>_<arch>.deb
	deb="$BUILD/cache/${IMG_PKG}_${PKGVER//:/%3a}_$(dpkg --print-architecture).deb"
	if [ ! -f "$deb" ]; then
		log "downloading $IMG_PKG=$PKGVER"
		# apt-get download fetches into the cwd; a stale package list may not
		# know this version yet, so retry once after an update.
		if ! (cd "$BUILD/cache" && apt-get download -qq "$IMG_PKG=$PKGVER" 2>/dev/null); then
			apt-get update -qq
			(cd "$BUILD/cache" && apt-get download -qq "$IMG_PKG=$PKGVER") ||
				die "cannot download $IMG_PKG=$PKGVER; if the archive moved on," \
				    "upgrade the headers (apt-get install linux-headers-6.12-amd64) and rerun"
		fi
		[ -f "$deb" ] || die "apt-get download did not produce $deb"
	fi
	log "unpacking $(basename "$deb")"
	rm -rf "$KROOT"
	mkdir -p "$KROOT"
	dpkg-deb -x "$deb" "$KROOT"
	[ -f "$VMLINUZ" ] || die "no $VMLINUZ in $deb"
	# depmod output (modules.dep etc.) ships in the .deb? Regenerate to be sure.
	[ -f "$MODDIR/modules.dep" ] || depmod -b "$KROOT" "$KVER"
	echo "$PKGVER" >"$KROOT/.pkgver"
fi

# --- 4. environment files ----------------------------------------------------
# Written to a temp file first so a reader never sees a half-written file.
tmp="$(mktemp "$BUILD/.env.XXXXXX")"
cat >"$tmp" <<EOM
# Generated by scripts/setup.sh - do not edit.
KVER := $KVER
KDIR := $KDIR
KVER_61 := $KVER_61
KDIR_61 := $KDIR_61
VMLINUZ := $VMLINUZ
MODDIR := $MODDIR
EOM
mv "$tmp" "$BUILD/env.mk"
tmp="$(mktemp "$BUILD/.env.XXXXXX")"
sed -e '/^#/!s/ := /=/' -e '/^#/!s/^/export /' "$BUILD/env.mk" >"$tmp"
mv "$tmp" "$BUILD/env.sh"
log "wrote build/env.mk and build/env.sh (KVER=$KVER)"
