#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Smoke test for pcinet-fabric: builds it and fabric-client, runs a fabric
# on a temporary socket and checks the ivshmem protocol, slot handling,
# attach_epoch and doorbells, argument checking and cleanup.  If
# qemu-system-x86_64 is installed, also attaches a real ivshmem-doorbell.
#
# Prints "ok - ..." or "FAIL - ..." per case and "N passed, N failed".

# The check "eval '...'" cases expand their variables when they run.
# shellcheck disable=SC2016,SC2012

set -u
cd "$(dirname "$0")" || exit 1

FABRIC=./pcinet-fabric
CLIENT=./fabric-client
pass=0
fail=0
pids=()

ok()   { echo "ok - $*"; pass=$((pass + 1)); }
nok()  { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

# wait_for FILE REGEX [TENTHS]: wait until a line of FILE matches REGEX.
wait_for() {
	local i
	for ((i = 0; i < ${3:-50}; i++)); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# wait_gone PID [TENTHS]: wait until process PID has exited.
wait_gone() {
	local i
	for ((i = 0; i < ${2:-50}; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

count() { grep -Ec -- "$2" "$1" 2>/dev/null; }
nfds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$T"
}

if ! make -s >/dev/null; then
	echo "FAIL - build"
	echo "0 passed, 1 failed"
	exit 1
fi
ok "build"

T=$(mktemp -d /tmp/pcinet-fabric-test.XXXXXX) || exit 1
trap cleanup EXIT
S=$T/sock

# --- argument checking ------------------------------------------------
bad_args() {
	local err=$T/bad.err
	"$FABRIC" "$@" 2>"$err" >/dev/null &
	local p=$!
	if ! wait_gone $p 30; then
		kill $p
		wait $p 2>/dev/null
		return 1
	fi
	wait $p
	[ $? -eq 1 ] && grep -q '^pcinet-fabric: ' "$err" && [ ! -e "$S" ]
}
check "bad args: no -S exits 1"			bad_args
check "bad args: -m 3M (too small) exits 1"	bad_args -S "$S" -m 3M
check "bad args: -m 2G (too big) exits 1"	bad_args -S "$S" -m 2G
check "bad args: -m 24M (not a power of 2) exits 1" bad_args -S "$S" -m 24M
check "bad args: -m 16X (bad suffix) exits 1"	bad_args -S "$S" -m 16X
check "bad args: -n 0 exits 1"			bad_args -S "$S" -n 0
check "bad args: -n 17 exits 1"			bad_args -S "$S" -n 17
check "bad args: -n x exits 1"			bad_args -S "$S" -n x
check "bad args: unknown option exits 1"	bad_args -S "$S" -Z
check "bad args: stray argument exits 1"	bad_args -S "$S" extra
touch "$T/file"
check "path that is not a socket is refused"	bad_args -S "$T/file"

# --- the fabric ---------------------------------------------------------
L=$T/fabric.log
"$FABRIC" -S "$S" -p "$T/pid" -v 2>"$L" &
FP=$!
pids+=("$FP")
check "fabric starts and listens" wait_for "$L" "listening on"
check "pid file holds the fabric's pid" [ "$(cat "$T/pid" 2>/dev/null)" = "$FP" ]

# A second fabric on the same socket must fail without disturbing the first.
"$FABRIC" -S "$S" 2>"$T/busy.err" &
BP=$!
wait_gone $BP 30 || kill $BP
wait $BP
rc=$?
check "second fabric on the same socket fails with 'busy'" \
	eval '[ $rc -eq 1 ] && grep -q busy "$T/busy.err" && [ -S "$S" ]'

A=$T/a.out
"$CLIENT" -S "$S" -t 60 >"$A" 2>&1 &
AP=$!
pids+=("$AP")
check "first client gets id 0" wait_for "$A" "^setup done id=0 vectors=3"
check "window header: magic, 16M, 3 vectors, data inboxes" \
	grep -q "^shm size=16777216 magic=ok version=1 vectors=3 $(
		)data0=0x10000+0x7f0000 data1=0x800000+0x7f0000" "$A"
check "first client sees attach_epoch = 1,0" grep -q "^shm .* epoch=1,0 state=up,down" "$A"

B=$T/b.out
"$CLIENT" -S "$S" -t 60 >"$B" 2>&1 &
BP=$!
pids+=("$BP")
check "second client gets id 1" wait_for "$B" "^setup done id=1 vectors=3"
check "second client is told about peer 0 during setup" grep -q "^peer 0 joined vectors=3" "$B"
check "first client is told peer 1 joined" wait_for "$A" "^peer 1 joined vectors=3"
check "first client's vector 0 rung on attach, epoch 1,1" \
	wait_for "$A" "^vector 0 rung count=1 epoch=1,1 state=up,up"

"$CLIENT" -S "$S" -1 >"$T/c.out" 2>&1
rc=$?
check "third client is refused" eval '[ $rc -eq 2 ] && grep -q "^refused" "$T/c.out"'
check "fabric logs the refusal" wait_for "$L" "refusing client"

rings_before=$(count "$B" "^vector 0 rung")
kill $AP
wait $AP 2>/dev/null
check "peer 1 gets 'peer 0 left', attach_epoch[0] even" \
	wait_for "$B" "^peer 0 left epoch=2,1 state=down,up"
rung_again() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(count "$B" "^vector 0 rung")" -gt "$rings_before" ] && return 0
		sleep 0.1
	done
	return 1
}
check "peer 1's vector 0 is rung after the leave" rung_again

D=$T/d.out
"$CLIENT" -S "$S" -1 >"$D" 2>&1
check "a new client takes side 0 with a fresh id 2, epoch 3,1" \
	eval 'grep -q "^setup done id=2" "$D" && grep -q "^shm .* epoch=3,1 state=up,up" "$D"'
check "peer 1 sees the new peer (id 2) come and go" \
	wait_for "$B" "^peer 2 left epoch=4,1 state=down,up"

# No fd leak across many attach/detach cycles.
wait_for "$L" "peer 0 \\(id 2\\) left .*pid" >/dev/null
sleep 0.2
before=$(nfds $FP)
for i in $(seq 50); do
	"$CLIENT" -S "$S" -1 >/dev/null 2>&1
done
wait_for "$B" "^peer [0-9]* left epoch=104,1 " 100
after=$(nfds $FP)
check "no fd leak over 50 connect/disconnect cycles ($before -> $after fds)" \
	eval '[ "$before" -gt 0 ] && [ "$before" -eq "$after" ]'
"$CLIENT" -S "$S" -x 2>/dev/null
sleep 0.3
check "fabric copes with a client that hangs up at once" \
	eval 'kill -0 $FP && [ "$(nfds $FP)" -eq "$after" ]'

# Shutdown: SIGTERM removes socket and pid file; remaining clients see EOF.
kill -TERM $FP
wait $FP
rc=$?
check "fabric exits 0 on SIGTERM" [ $rc -eq 0 ]
check "socket file is gone after SIGTERM" [ ! -e "$S" ]
check "pid file is gone after SIGTERM" [ ! -e "$T/pid" ]
check "remaining client sees the server close" wait_for "$B" "^server closed"

# --- stale socket, other sizes, daemon mode ------------------------------
"$FABRIC" -S "$S" 2>/dev/null &
FP=$!
for i in $(seq 30); do [ -S "$S" ] && break; sleep 0.1; done
disown $FP	# no "Killed" job notice
kill -KILL $FP
wait_gone $FP
"$FABRIC" -S "$S" -m 4M -n 1 -d -p "$T/pid2" 2>"$T/stale.err"
rc=$?
check "-d: daemonizes and exits 0 once listening" eval '[ $rc -eq 0 ] && [ -S "$S" ]'
check "stale socket (after SIGKILL) is removed and reused" grep -q "removing stale" "$T/stale.err"
DP=$(cat "$T/pid2" 2>/dev/null)
[ -n "$DP" ] && pids+=("$DP")
check "-d: pid file names the running daemon" eval '[ -n "$DP" ] && kill -0 "$DP"'
"$CLIENT" -S "$S" -1 >"$T/e.out" 2>&1
check "-m 4M -n 1: 4 MiB window, 1 vector, inboxes 0x1f0000 each" \
	grep -q "^shm size=4194304 magic=ok version=1 vectors=1 $(
		)data0=0x10000+0x1f0000 data1=0x200000+0x1f0000" "$T/e.out"
[ -n "$DP" ] && kill -TERM "$DP"
check "-d: SIGTERM removes socket and pid file" \
	eval '[ -n "$DP" ] && wait_gone "$DP" && [ ! -e "$S" ] && [ ! -e "$T/pid2" ]'

# --- a real QEMU ivshmem-doorbell ----------------------------------------
if command -v qemu-system-x86_64 >/dev/null; then
	L=$T/fabric2.log
	"$FABRIC" -S "$S" 2>"$L" &
	FP=$!
	pids+=("$FP")
	wait_for "$L" "listening on" >/dev/null
	Q=$T/q.out
	"$CLIENT" -S "$S" -t 60 >"$T/f.out" 2>&1 &
	pids+=($!)
	wait_for "$T/f.out" "^setup done id=0" >/dev/null
	qemu-system-x86_64 -machine q35,accel=tcg -nodefaults -display none -S \
		-monitor none -serial none -chardev socket,path="$S",id=c0 \
		-device ivshmem-doorbell,chardev=c0,vectors=3 >"$Q" 2>&1 &
	QP=$!
	pids+=("$QP")
	check "qemu ivshmem-doorbell attaches as peer 1 with 3 vectors" \
		eval 'wait_for "$T/f.out" "^peer 1 joined vectors=3" 100 &&
		      wait_for "$L" "peer 1 \\(id 1\\) joined"'
	kill $QP
	wait $QP 2>/dev/null
	check "qemu reports no ivshmem errors" eval '! grep -qi "ivshmem\|error" "$Q"'
	check "qemu's exit is seen as peer 1 leaving" \
		wait_for "$T/f.out" "^peer 1 left epoch=1,2 state=up,down"
	kill -TERM $FP
	wait $FP
else
	ok "qemu ivshmem-doorbell attach # SKIP qemu-system-x86_64 not installed"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
