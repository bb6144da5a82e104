#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# checkpatch.pl --strict over every kernel source file, pcinet-peer's and
# pcinet-vhost's (the front end proper and its blk offer), from the
# linux-source-6.12 package: the debug kernel's unpacked tree if it is there
# (scripts/debug-kernel.sh), else its four files unpacked once into
# $PCINET_CACHE (default /var/cache/pcinet), shared by every checkout.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${PCINET_CACHE:-/var/cache/pcinet}
pkgver=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || true)
if [ -z "$pkgver" ]; then
	echo "checkpatch: linux-source-6.12 is not installed (scripts/setup.sh installs it)" >&2
	exit 1
fi
dir=$cache/debug-kernel/src-${pkgver//[~:]/_}
[ -f "$dir/.unpacked" ] || dir=$cache/checkpatch-${pkgver//[~:]/_}
if [ ! -x "$dir/scripts/checkpatch.pl" ]; then
	tarball=/usr/src/linux-source-6.12.tar.xz
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	tar -xJf "$tarball" -C "$dir.tmp" --strip-components=1 --wildcards \
		'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
		'*/scripts/const_structs.checkpatch' '*/scripts/kernel-doc'
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
fi
cd "$top"
files=$(git ls-files 'drivers/net/pcinet/*.[ch]' 'tools/pcinet-peer/*.[ch]' \
	'tools/pcinet-vhost/pcinet-vhost.c' 'tools/pcinet-vhost/vio_blk.[ch]' \
	'tools/testing/pcinet/ntb-ivshmem/*.[ch]')
# one pass: its status says whether anything was found, its output where
rc=0
out=$("$dir/scripts/checkpatch.pl" --strict --no-tree --terse --show-types -f $files) || rc=$?
grep -v -e '^total: 0 errors, 0 warnings, 0 checks' -e '^$' <<<"$out" || true
[ $rc -eq 0 ] || exit $rc
# kernel-doc: every documented symbol complete
"$dir/scripts/kernel-doc" -none $files
echo "checkpatch --strict and kernel-doc: clean"
