#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The vhost-user hand-off, proved in userspace: qemu-storage-daemon serves
# a temporary raw image as a vhost-user-blk export, vu_blk_test drives it
# from a virtqueue laid out in a memfd (gpa = memfd offset, kick and call
# eventfds), and the image is then checked with dd and cmp for the
# sectors the test wrote.
#
# Usage: test-blk.sh [--bench] [--escape] [--relay] [-- extra test options]
#   --bench   also measure (vu_blk_test -b)
#   --relay   run vu_relay_test instead: the board's relay
#             (drivers/net/pcinet/pcinet_vio_ring.c) in front of the ring,
#             the window laid out with virtio regions (stage 1 of the
#             virtio channel's test plan); same image checks
#   --escape  first give the back end only part of the memfd and check
#             that a descriptor outside it is refused, then run the test
#             again on the same daemon
# Prints "ok - ..." or "FAIL - ..." per case and "N passed, N failed".

set -u
cd "$(dirname "$0")" || exit 1

QSD=${QSD:-qemu-storage-daemon}
TEST=./vu_blk_test
IMG_MIB=64
SECTORS=$((IMG_MIB * 2048))
pass=0
fail=0
args=()

ok()   { echo "ok - $*"; pass=$((pass + 1)); }
nok()  { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

escape=0
while [ $# -gt 0 ]; do
	case $1 in
	--bench) args+=(-b); shift ;;
	--escape) escape=1; shift ;;
	--relay) TEST=./vu_relay_test; shift ;;
	--) shift; args+=("$@"); break ;;
	*) echo "usage: $0 [--bench] [--escape] [--relay] [-- test options]" >&2; exit 2 ;;
	esac
done

if ! command -v "$QSD" >/dev/null; then
	echo "SKIP - $QSD not installed"
	exit 0
fi
if [ "$TEST" = ./vu_relay_test ] && [ $escape -eq 1 ]; then
	echo "--escape is a vu_blk_test case" >&2
	exit 2
fi
make -s "${TEST#./}" || exit 1

dir=$(mktemp -d /tmp/pcinet-vhost-blk.XXXXXX) || exit 1
qsd_pid=
cleanup() {
	if [ -n "$qsd_pid" ] && kill -0 "$qsd_pid" 2>/dev/null; then
		kill "$qsd_pid"
		wait "$qsd_pid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

img=$dir/disk.raw
sock=$dir/blk.sock
truncate -s ${IMG_MIB}M "$img"

"$QSD" --blockdev driver=file,node-name=f,filename="$img" \
	--export type=vhost-user-blk,id=e,node-name=f,addr.type=unix,addr.path="$sock",writable=on \
	>"$dir/qsd.log" 2>&1 &
qsd_pid=$!
for ((i = 0; i < 50; i++)); do
	[ -S "$sock" ] && break
	sleep 0.1
done
check "qemu-storage-daemon listens on $sock" test -S "$sock"

if [ $escape -eq 1 ]; then
	# The back end gets the memfd from 1 MiB on; a descriptor below that
	# must be refused.  libvhost-user then gives up on the device and
	# drops the connection: a new front end must be able to start over.
	timeout 120 "$TEST" -s "$sock" -e $SECTORS -o 1 -X "${args[@]}"
	check "vu_blk_test -o 1 -X exits 0" test $? -eq 0
	check "qemu-storage-daemon refused the address" \
		grep -q "invalid address" "$dir/qsd.log"
	check "qemu-storage-daemon survived it" kill -0 "$qsd_pid"
	echo "# and again, on the same daemon:"
	: >"$dir/qsd.log"
fi

timeout 120 "$TEST" -s "$sock" -e $SECTORS -d "$dir/expect" "${args[@]}"
check "${TEST#./} exits 0" test $? -eq 0

kill "$qsd_pid"
wait "$qsd_pid" 2>/dev/null
qsd_pid=
if grep -q . "$dir/qsd.log"; then
	sed 's/^/# qsd: /' "$dir/qsd.log"
fi
check "qemu-storage-daemon logged no errors" eval '! grep -qiE "panic|error" "$dir/qsd.log"'

check "image sectors 8-23 hold what was written (dd | cmp)" \
	eval 'dd if="$img" bs=512 skip=8 count=16 status=none | cmp -s - "$dir/expect"'
# As many sectors as vu_blk_test says it wrote (it depends on -q).
wrap_sectors=$(( $(stat -c %s "$dir/expect.wrap" 2>/dev/null || echo 0) / 512 ))
check "image sectors 4096-$((4096 + wrap_sectors - 1)) hold the in-flight writes (dd | cmp)" \
	eval '[ $wrap_sectors -gt 0 ] && dd if="$img" bs=512 skip=4096 count=$wrap_sectors status=none | cmp -s - "$dir/expect.wrap"'
check "image sectors 0-7 untouched (still zero)" \
	eval 'dd if="$img" bs=512 count=8 status=none | cmp -s - <(head -c 4096 /dev/zero)'
check "image size unchanged" test "$(stat -c %s "$img")" -eq $((IMG_MIB << 20))

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
