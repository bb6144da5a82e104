#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The vhost-user hand-off for virtio-fs, proved in userspace: virtiofsd
# shares a temporary directory, vu_fs_test drives it from a hiprio queue
# and a request queue laid out in a memfd: FUSE_INIT, LOOKUP, OPEN, READ
# (one at a time and many in flight), RELEASE, FORGET on hiprio, CREATE
# and WRITE.  The written file is then checked on the host with cmp.
#
# Usage: test-fs.sh [--relay] [-- extra vu_fs_test options]
#   --relay  run vu_fs_relay_test: the same test with the board's relay
#            (drivers/net/pcinet/pcinet_vio_ring.c) between its queues and
#            the back end, in a memfd laid out as a window with virtio
#            regions (stage 1 of the virtio channel's test plan)
# Prints "ok - ..." or "FAIL - ..." per case and "N passed, N failed".

set -u
cd "$(dirname "$0")" || exit 1

VIRTIOFSD=${VIRTIOFSD:-/usr/lib/qemu/virtiofsd}
TEST=./vu_fs_test
pass=0
fail=0
args=()

ok()   { echo "ok - $*"; pass=$((pass + 1)); }
nok()  { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

while [ $# -gt 0 ]; do
	case $1 in
	--relay) TEST=./vu_fs_relay_test; shift ;;
	--) shift; args+=("$@"); break ;;
	*) echo "usage: $0 [--relay] [-- vu_fs_test options]" >&2; exit 2 ;;
	esac
done

if [ ! -x "$VIRTIOFSD" ]; then
	echo "SKIP - $VIRTIOFSD not installed"
	exit 0
fi
# Its sandboxes (namespaces, or chroot) both need root.
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP - virtiofsd needs root"
	exit 0
fi
make -s "${TEST#./}" || exit 1

dir=$(mktemp -d /tmp/pcinet-vhost-fs.XXXXXX) || exit 1
vfs_pid=
cleanup() {
	if [ -n "$vfs_pid" ] && kill -0 "$vfs_pid" 2>/dev/null; then
		kill "$vfs_pid"
		wait "$vfs_pid" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

share=$dir/share
sock=$dir/fs.sock
mkdir "$share"
# Not a multiple of the 64 KiB reads, so the last one is short.
head -c 300000 /dev/urandom >"$share/data.bin"

# The C virtiofsd of QEMU 7.2 takes the directory as -o source= (the
# Rust virtiofsd's --shared-dir does not exist here).
"$VIRTIOFSD" --socket-path="$sock" -o source="$share" -o cache=none \
	>"$dir/virtiofsd.log" 2>&1 &
vfs_pid=$!
for ((i = 0; i < 50; i++)); do
	[ -S "$sock" ] && break
	sleep 0.1
done
check "virtiofsd listens on $sock" test -S "$sock"

timeout 120 "$TEST" -s "$sock" -D "$share" -f data.bin -w written.bin "${args[@]}"
check "${TEST#./} exits 0" test $? -eq 0

# virtiofsd exits by itself when its front end goes away.
for ((i = 0; i < 50; i++)); do
	kill -0 "$vfs_pid" 2>/dev/null || break
	sleep 0.1
done
check "virtiofsd exits after the front end disconnects" \
	eval '! kill -0 "$vfs_pid" 2>/dev/null'
wait "$vfs_pid" 2>/dev/null
vfs_pid=
sed 's/^/# virtiofsd: /' "$dir/virtiofsd.log"
check "virtiofsd logged no errors" \
	eval '! grep -qiE "error|panic|fail" "$dir/virtiofsd.log"'

check "written.bin on the host matches what was written through FUSE (cmp)" \
	cmp -s "$share/data.bin" "$share/written.bin"
check "written.bin is mode 0644" \
	test "$(stat -c %a "$share/written.bin" 2>/dev/null)" = 644

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
