#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# test-vio.sh: pcinet-peer --blk, the virtio channel's device side, against
# a userspace board, on this machine (stage 2 of the virtio test plan
# without a VM).
#
#   pcinet-fabric -m 64M -V 8M -n 4
#   pcinet-peer --blk IMAGE           side 0: D, qemu-storage-daemon behind it
#   vu_relay_test -S FABRIC -W        side 1: B, the board's relay
#                                     (pcinet_vio_ring.c) and a small
#                                     virtio-blk driver
#
# With virtiofsd installed, pcinet-peer also gets --fs DIR:share: a
# virtio-fs device in slot 1 beside the blk one in slot 0 (B uses slot 0
# only); checked: it is offered, and virtiofsd ends with pcinet-peer.
#
# B finds the device, negotiates through its driver state block, runs
# I/O (several thousand requests, data checked), resets the device; then
# pcinet-peer gets SIGTERM and B checks the device is withdrawn.  The
# image is compared with what B wrote (dd | cmp).  B's own lines come
# first, then one line per check of this script and "N passed, N failed".
# Needs root (pcinet-peer's TAP, in a network namespace of its own).
#
#   ./test-vio.sh [-v]        -v: print the logs at the end
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
peer=${PCINET_PEER:-$here/pcinet-peer}
fabric=$top/tools/pcinet-fabric/pcinet-fabric
board=$top/tools/pcinet-vhost/vu_relay_test
qsd=${PCINET_QSD:-qemu-storage-daemon}
virtiofsd=${PCINET_VIRTIOFSD:-/usr/lib/qemu/virtiofsd}
verbose=${1:-}
IMG_MIB=64
SECTORS=$((IMG_MIB * 2048))
passed=0
failed=0

ok()   { echo "ok - $*"; passed=$((passed + 1)); }
nok()  { echo "FAIL - $*"; failed=$((failed + 1)); }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

[ "$(id -u)" -eq 0 ] || { echo "test-vio.sh: needs root (TAP)"; echo "0 passed, 1 failed"; exit 1; }
if ! command -v "$qsd" >/dev/null; then
	echo "SKIP - $qsd not installed"
	exit 0
fi
make -s -C "$here" pcinet-peer >/dev/null && make -s -C "$top/tools/pcinet-fabric" >/dev/null &&
	make -s -C "$top/tools/pcinet-vhost" vu_relay_test >/dev/null ||
	{ echo "FAIL - build"; echo "0 passed, 1 failed"; exit 1; }

dir=$(mktemp -d /tmp/pcinet-vio-test.XXXXXX)
fpid=
ppid_=
bpid=
cleanup() {
	local p
	for p in $bpid $ppid_ $fpid; do
		kill "$p" 2>/dev/null
	done
	sleep 0.3
	for p in $bpid $ppid_ $fpid; do
		kill -9 "$p" 2>/dev/null
	done
	if [ -n "$verbose" ]; then
		for p in "$dir"/*.log; do echo "--- $p"; cat "$p"; done
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

# wait_for FILE REGEX [TENTHS]
wait_for() {
	local i
	for ((i = 0; i < ${3:-100}; i++)); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

img=$dir/disk.raw
truncate -s ${IMG_MIB}M "$img"
sock=$dir/fabric.sock

"$fabric" -S "$sock" -m 64M -V 8M -n 4 2>"$dir/fabric.log" &
fpid=$!
wait_for "$dir/fabric.log" "listening on" || { nok "fabric starts"; echo "$passed passed, $failed failed"; exit 1; }

fs=()
if [ -x "$virtiofsd" ]; then
	mkdir "$dir/share"
	fs=(--fs "$dir/share:share")
fi
unshare -n "$peer" -S "$sock" --blk "$img" "${fs[@]}" -i vio%d >"$dir/peer.out" 2>"$dir/peer.log" &
ppid_=$!
check "pcinet-peer --blk: the back end is ready" wait_for "$dir/peer.log" "vio: back end ready: virtio-blk"
qpid=$(sed -n 's/.*vio: virtio-blk: started .* (pid \([0-9]*\)).*/\1/p' "$dir/peer.log" | head -1)
vpid=$(sed -n 's/.*vio: virtio-fs: started .* (pid \([0-9]*\)).*/\1/p' "$dir/peer.log" | head -1)

timeout 300 "$board" -S "$sock" -e $SECTORS -d "$dir/expect" -W >"$dir/board.log" 2>&1 &
bpid=$!
if wait_for "$dir/board.log" "^# waiting for the device to be withdrawn" 1200; then
	kill -TERM "$ppid_"
fi
wait "$bpid"
rc=$?
bpid=
grep -E "^(ok|FAIL|#) " "$dir/board.log"
check "the board (vu_relay_test -S) exits 0" [ $rc -eq 0 ]

wait "$ppid_"
rc=$?
ppid_=
check "pcinet-peer exits 0 on SIGTERM" [ $rc -eq 0 ]
check "pcinet-peer withdrew the device on SIGTERM" grep -q "vio: virtio-blk withdrawn .*stopping" "$dir/peer.log"
check "qemu-storage-daemon (pid ${qpid:-?}) ended with pcinet-peer" \
	eval '[ -n "$qpid" ] && ! kill -0 "$qpid" 2>/dev/null'
if [ ${#fs[@]} -gt 0 ]; then
	check "pcinet-peer --fs: virtio-fs offered in slot 1 beside virtio-blk" \
		grep -q "vio: device offered: virtio-fs in slot 1" "$dir/peer.log"
	check "virtiofsd (pid ${vpid:-?}) ended with pcinet-peer" \
		eval '[ -n "$vpid" ] && ! kill -0 "$vpid" 2>/dev/null'
else
	echo "# $virtiofsd not installed: --fs not checked"
fi
check "DRIVER_OK ran the back end's ring on the window (two spans)" \
	grep -q "vio: virtio-blk: queue 0 running" "$dir/peer.log"
check "qemu-storage-daemon logged no errors" eval '! grep -v "pcinet-peer" "$dir/peer.log" "$dir/peer.out" | grep -qiE "panic|error"'

check "image sectors 8-23 hold what the board wrote (dd | cmp)" \
	eval 'dd if="$img" bs=512 skip=8 count=16 status=none | cmp -s - "$dir/expect"'
wrap_sectors=$(( $(stat -c %s "$dir/expect.wrap" 2>/dev/null || echo 0) / 512 ))
check "image sectors 4096-$((4096 + wrap_sectors - 1)) hold the in-flight writes (dd | cmp)" \
	eval '[ $wrap_sectors -gt 0 ] && dd if="$img" bs=512 skip=4096 count=$wrap_sectors status=none | cmp -s - "$dir/expect.wrap"'
check "image sectors 0-7 untouched (still zero)" \
	eval 'dd if="$img" bs=512 count=8 status=none | cmp -s - <(head -c 4096 /dev/zero)'

kill -TERM "$fpid" 2>/dev/null
wait "$fpid" 2>/dev/null
fpid=
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
