#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# tests/qemu/mkinitramfs.sh - build the busybox initramfs the QEMU guests boot.
#
# Usage: tests/qemu/mkinitramfs.sh [--storage] OUT.cpio.gz [extra.ko ...]
#
# --storage: also the storage tools of make bench's storage section (~30 MB
# more, most of it fio's libraries, so `make check` leaves it out): fio,
# qemu-storage-daemon (NBD server), nbd-client, diod (9P server), mke2fs,
# and the modules nbd, 9p + 9pnet_fd, virtio_blk, crc32c_generic and ext4,
# loaded at boot.
#
# Contents:
#   /init                  tests/qemu/guest-init (busybox sh; agent on ttyS1)
#   /bin/busybox + applet symlinks (bin/, sbin/, usr/bin/, usr/sbin/)
#   /bin/sh = dash (see the comment at copy_bin below for why not ash)
#   iproute2 ip/tc/ss, iperf3, ethtool, tcpdump, socat, sockperf (if
#       installed) (host binaries + their
#       shared libraries as resolved by ldd, including the dynamic loader);
#       iproute2's ip and tc replace busybox's in /sbin
#   /lib/modules/boot/*.ko  modules loaded by /init at boot, in the order of
#       /lib/modules/boot.order (dependencies first): virtio_net, virtio_blk
#       and their deps (unless built in), plus the in-kernel dependencies of
#       the extra .ko
#   /lib/modules/extra/*.ko  the extra modules given on the command line;
#       NOT loaded at boot - tests insmod/rmmod them themselves
#   /etc: passwd, group, shadow (root, empty password, /bin/sh), hosts,
#       services, protocols
#
# Modules come from $MODDIR (build/env.sh, written by scripts/setup.sh);
# compressed modules (.ko.xz/.zst/.gz) are decompressed so plain busybox
# insmod works.  The archive is reproducible-ish: sorted file list, fixed
# mtimes, cpio --reproducible, gzip -n.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

die() { printf 'mkinitramfs: ERROR: %s\n' "$*" >&2; exit 1; }

STORAGE=0
if [ "${1:-}" = --storage ]; then STORAGE=1; shift; fi
[ $# -ge 1 ] || die "usage: $0 [--storage] OUT.cpio.gz [extra.ko ...]"
OUT="$1"; shift
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
EXTRA=()
for ko in "$@"; do
	[ -f "$ko" ] || die "no such module: $ko"
	EXTRA+=("$(cd "$(dirname "$ko")" && pwd)/$(basename "$ko")")
done

if [ -z "${MODDIR:-}" ]; then
	[ -f "$ROOT/build/env.sh" ] || die "build/env.sh missing: run scripts/setup.sh"
	# shellcheck source=/dev/null
	. "$ROOT/build/env.sh"
fi
[ -f "$MODDIR/modules.dep" ] || die "MODDIR=$MODDIR has no modules.dep"

BUSYBOX=/bin/busybox	# from busybox-static
[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (apt-get install busybox-static)"

STAGE="$(mktemp -d "${TMPDIR:-/tmp}/pcinet-initramfs.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
cd "$STAGE"
mkdir -p bin sbin usr/bin usr/sbin etc proc sys dev tmp run root var/run \
	lib/modules/boot lib/modules/extra

# The kernel opens /dev/console for /init before /init mounts devtmpfs.
mknod -m 600 dev/console c 5 1
mknod -m 666 dev/null c 1 3

# --- busybox and its applets ---------------------------------------------
cp "$BUSYBOX" bin/busybox
# --list-full prints paths such as "bin/ls", "sbin/ip", "usr/bin/wget".
"$BUSYBOX" --list-full | while read -r app; do
	[ "$app" = bin/busybox ] && continue
	mkdir -p "$(dirname "$app")"
	ln -sf /bin/busybox "$app"
done

# --- dynamically linked host tools -----------------------------------------
copy_lib() {	# copy one file and, if it is a symlink, the chain it points to
	local f="$1"
	while :; do
		mkdir -p "./$(dirname "$f")"
		[ -e "./$f" ] || cp -a "$f" "./$f"
		[ -L "$f" ] || break
		local t; t="$(readlink "$f")"
		case "$t" in /*) f="$t" ;; *) f="$(dirname "$f")/$t" ;; esac
	done
}
copy_bin() {	# $1 = host binary, $2 = path in the initramfs
	local src="$1" dst="$2" lib
	[ -x "$src" ] || die "$src missing"
	rm -f "./$dst"
	cp -L "$src" "./$dst"
	# ldd lines: "libfoo.so.1 => /lib/.../libfoo.so.1 (0x..)" or "/lib64/ld-linux-x86-64.so.2 (0x..)"
	if ldd "$src" | grep -q 'not found'; then die "$src: unresolved libraries"; fi
	for lib in $(ldd "$src" | sed -n -e 's/.*=> \(\/[^ ]*\) .*/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) .*/\1/p'); do
		copy_lib "$lib"
	done
}
# /bin/sh is dash, not busybox ash: Debian's busybox-static is built with
# FEATURE_SH_STANDALONE/PREFER_APPLETS, so its ash runs its own applets ahead
# of $PATH - "ip" would always be busybox's ip.  (busybox applets that exec
# programs - timeout, xargs, env, setsid, nsenter... - still prefer applets:
# give them full paths, e.g. `timeout 5 /sbin/ip ...`.)  ash stays as /bin/ash.
copy_bin /bin/dash        bin/sh
ln -sf sh bin/dash
copy_bin /bin/ip          sbin/ip	# busybox ip is too limited
copy_bin /sbin/tc         sbin/tc
copy_bin /bin/ss          sbin/ss
copy_bin /usr/bin/iperf3  usr/bin/iperf3
copy_bin /usr/sbin/ethtool usr/sbin/ethtool
copy_bin /usr/bin/tcpdump usr/bin/tcpdump
copy_bin /usr/bin/socat   usr/bin/socat	# bulk transfers (busybox nc resets)
# UDP request/response latency for make bench; optional (scripts/setup.sh
# installs it, but older setups may lack it)
[ -x /usr/bin/sockperf ] && copy_bin /usr/bin/sockperf usr/bin/sockperf
if [ "$STORAGE" = 1 ]; then	# scripts/setup.sh installs them
	copy_bin /usr/bin/fio                 usr/bin/fio
	copy_bin /usr/bin/qemu-storage-daemon usr/bin/qemu-storage-daemon
	copy_bin /usr/sbin/nbd-client         usr/sbin/nbd-client
	copy_bin /usr/sbin/diod               usr/sbin/diod
	copy_bin /sbin/mke2fs                 sbin/mke2fs
	ln -sf mke2fs sbin/mkfs.ext4
	# mke2fs reads its defaults (ext4's features) from here
	[ -f /etc/mke2fs.conf ] && cp /etc/mke2fs.conf etc/mke2fs.conf
fi
# pcinet's own guest-side test tools, when built (tools/testing/pcinet)
for t in pcinet-poke pcinet-memcpy pcinet-ttyperf; do
	f="$(dirname "$0")/../../tools/testing/pcinet/$t"
	[ -x "$f" ] && cp "$f" usr/bin/
done
# the virtio channel's character device probe, when built (tools/pcinet-vhost)
f="$(dirname "$0")/../../tools/pcinet-vhost/vhost_probe"
[ -x "$f" ] && cp "$f" usr/bin/
# rmmod, then on a kernel with kmemleak (the debug kernel) a scan: whatever
# the module leaked is printed on the console, where the harness's splat
# check fails the case ("unreferenced object").  Two scans: kmemleak only
# reports an object whose contents did not change over a whole scan.
rm -f sbin/rmmod
cat >sbin/rmmod <<'EOS'
#!/bin/sh
/bin/busybox rmmod "$@" || exit $?
k=/sys/kernel/debug/kmemleak
[ -w $k ] || exit 0
echo scan >$k && echo scan >$k
if [ -s $k ]; then
	{ echo "kmemleak after rmmod $*:"; cat $k; } >/dev/console
	echo clear >$k
fi
exit 0
EOS
chmod 755 sbin/rmmod
# busybox put "ip"/"tc" symlinks in sbin/ only, but be sure none shadow ours.
for p in bin/ip bin/tc bin/ss usr/bin/ip usr/sbin/ip; do
	[ -L "$p" ] && rm -f "$p"
done

# --- kernel modules ----------------------------------------------------------
declare -A DEP=() SEEN=()
while IFS= read -r line; do	# "kernel/a/b.ko.xz: kernel/c.ko.xz kernel/d.ko.xz"
	m="${line%%:*}"
	DEP[$m]="${line#*:}"
done <"$MODDIR/modules.dep"
declare -A BYNAME=()
for m in "${!DEP[@]}"; do	# no subshells here: ~6000 modules
	n="${m##*/}"; n="${n%%.ko*}"; BYNAME[${n//-/_}]="$m"
done
ORDER=()
add_mod() {	# $1 = path relative to MODDIR; dependencies first
	local m="$1" d
	[ -n "${SEEN[$m]:-}" ] && return 0
	SEEN[$m]=1
	for d in ${DEP[$m]}; do add_mod "$d"; done
	ORDER+=("$m")
}
declare -A EXTRANAME=()
for ko in "${EXTRA[@]}"; do
	n="$(basename "$ko")"; n="${n%%.ko*}"; EXTRANAME[${n//-/_}]=1
done
want_mod() {	# $1 = module name; silently OK if built in or an extra module
	local n="${1//-/_}"
	[ -n "${EXTRANAME[$n]:-}" ] && return 0
	if grep -qE "/${n//_/[-_]}\.ko\$" "$MODDIR/modules.builtin"; then return 0; fi
	[ -n "${BYNAME[$n]:-}" ] || die "module $1 neither built in nor in $MODDIR"
	add_mod "${BYNAME[$n]}"
}
# virtio_blk: the stock driver of pcinet's virtio channel (virtiofs is
# built into Debian's 6.12 and the debug kernel; virtio_blk only into the
# latter)
for n in virtio_net virtio_pci virtio_blk; do want_mod "$n"; done
if [ "$STORAGE" = 1 ]; then
	# crc32c_generic: ext4's metadata checksums ask the crypto API for
	# crc32c, which would load it on demand; the guests have no modprobe.
	# The debug kernel (allnoconfig + a fragment) has none of nbd, 9p and
	# ext4: left out there, said here; what needs them skips in the guest.
	for n in nbd 9p 9pnet_fd virtio_blk crc32c_generic ext4; do
		if [ -n "${BYNAME[$n]:-}" ] ||
		   grep -qE "/${n//_/[-_]}\.ko\$" "$MODDIR/modules.builtin"; then
			want_mod "$n"
		else
			echo "mkinitramfs: --storage: this kernel has no $n" >&2
		fi
	done
fi
for ko in "${EXTRA[@]}"; do
	cp "$ko" lib/modules/extra/
	for d in $(modinfo -F depends "$ko" | tr ',' ' '); do want_mod "$d"; done
done
: >lib/modules/boot.order
for m in "${ORDER[@]}"; do
	n="$(basename "$m")"; n="${n%%.ko*}"
	case "$m" in
	*.ko.xz)  xz -dc   "$MODDIR/$m" ;;
	*.ko.zst) zstd -dcq "$MODDIR/$m" ;;
	*.ko.gz)  gzip -dc "$MODDIR/$m" ;;
	*.ko)     cat      "$MODDIR/$m" ;;
	*) die "unknown module format: $m" ;;
	esac >"lib/modules/boot/$n.ko"
	echo "$n" >>lib/modules/boot.order
done

# --- /etc ------------------------------------------------------------------
cat >etc/passwd <<'EOP'
root::0:0:root:/root:/bin/sh
tcpdump:x:101:101:tcpdump:/nonexistent:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOP
cat >etc/group <<'EOP'
root:x:0:
tcpdump:x:101:
nogroup:x:65534:
EOP
cat >etc/shadow <<'EOP'
root::19000:0:99999:7:::
tcpdump:*:19000:0:99999:7:::
nobody:*:19000:0:99999:7:::
EOP
chmod 600 etc/shadow
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >etc/hosts
if [ -f /etc/services ]; then cp /etc/services etc/services
else printf 'iperf3\t\t5201/tcp\n' >etc/services; fi
if [ -f /etc/protocols ]; then cp /etc/protocols etc/protocols
else printf 'ip\t0\tIP\nicmp\t1\tICMP\ntcp\t6\tTCP\nudp\t17\tUDP\n' >etc/protocols; fi
echo 'hosts: files' >etc/nsswitch.conf
ln -s /proc/mounts etc/mtab

# --- /init -----------------------------------------------------------------
install -m 755 "$HERE/guest-init" init

# --- archive -----------------------------------------------------------------
find . -exec touch -h -d @0 {} +
mkdir -p "$(dirname "$OUT")"
find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
	cpio -o -H newc --reproducible -R 0:0 --quiet | gzip -n -6 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
printf 'mkinitramfs: %s (%s%s; boot modules: %s; extra: %s)\n' "$OUT" \
	"$(du -h "$OUT" | cut -f1)" "$([ "$STORAGE" = 1 ] && echo ', storage tools')" "$(tr '\n' ' ' <lib/modules/boot.order | sed 's/ $//')" \
	"$(find lib/modules/extra -name '*.ko' -printf '%f ' | sed 's/ $//')"
