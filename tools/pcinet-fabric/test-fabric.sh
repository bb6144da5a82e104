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
check "bad args: -V 100K (not a multiple of 64K) exits 1" bad_args -S "$S" -V 100K
check "bad args: -V 0 exits 1"			bad_args -S "$S" -V 0
check "bad args: -V 4M in a 16M window (over 1/8) exits 1" bad_args -S "$S" -V 4M
check "bad args: unknown option exits 1"	bad_args -S "$S" -Z
check "bad args: stray argument exits 1"	bad_args -S "$S" extra
check "bad args: -C same as -S exits 1"		bad_args -S "$S" -C "$S"
check "bad args: -X with a bad command exits 1"	bad_args -S "$S" -X "doorbell drop 200"
touch "$T/file"
check "path that is not a socket is refused"	bad_args -S "$T/file"
check "control path that is not a socket is refused" bad_args -S "$S" -C "$T/file"

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
check "first client gets id 0" wait_for "$A" "^setup done id=0 vectors=4"
check "window header: magic, 16M, 3 vectors, data inboxes" \
	grep -q "^shm size=16777216 magic=ok version=1 vectors=4 $(
		)data0=0x10000+0x7f0000 data1=0x800000+0x7f0000" "$A"
check "first client sees attach_epoch = 1,0" grep -q "^shm .* epoch=1,0 state=up,down" "$A"
check "without -V: no virtio regions in the header" eval '! grep -q "^vio" "$A"'

B=$T/b.out
"$CLIENT" -S "$S" -t 60 >"$B" 2>&1 &
BP=$!
pids+=("$BP")
check "second client gets id 1" wait_for "$B" "^setup done id=1 vectors=4"
check "second client is told about peer 0 during setup" grep -q "^peer 0 joined vectors=4" "$B"
check "first client is told peer 1 joined" wait_for "$A" "^peer 1 joined vectors=4"
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

# -V: the layout of docs/design.md "Where everything lives" (64M, 8M regions).
"$FABRIC" -S "$S" -m 64M -V 8M -n 4 -C "$T/vctl" 2>"$T/vio.err" &
FP=$!
pids+=("$FP")
wait_for "$T/vio.err" "listening on" >/dev/null
"$CLIENT" -S "$S" -1 >"$T/v.out" 2>&1
check "-m 64M -V 8M -n 4: 4 vectors, inboxes 0xff0000 each below the regions" \
	grep -q "^shm size=67108864 magic=ok version=1 vectors=4 $(
		)data0=0x10000+0xff0000 data1=0x1000000+0xff0000" "$T/v.out"
check "-V 8M: dev 0, drv 0, dev 1, drv 1 at the window's end" \
	grep -q "^vio dev0=0x2000000+0x800000 drv0=0x2800000+0x800000 $(
		)dev1=0x3000000+0x800000 drv1=0x3800000+0x800000$" "$T/v.out"
check "-V: a client gets 4 eventfds per peer" grep -q "^setup done id=0 vectors=4" "$T/v.out"
vio_restored() {
	local r i
	r=$("$CLIENT" -c "$T/vctl" "scribble hdr 20000 0.1 random")
	[[ $r =~ ^ok ]] || return 1
	for ((i = 0; i < 30; i++)); do
		"$CLIENT" -c "$T/vctl" status | grep -q " scribble=none " && break
		sleep 0.1
	done
	[[ $("$CLIENT" -c "$T/vctl" restore) == "ok restore" ]] || return 1
	"$CLIENT" -S "$S" -1 >"$T/v2.out" 2>&1
	grep -q "^vio dev0=0x2000000+0x800000 drv0=0x2800000+0x800000 " "$T/v2.out"
}
check "-V: restore rewrites the virtio regions too" vio_restored
vio_regions() {
	local r
	r=$("$CLIENT" -c "$T/vctl" "scribble vdrv0 1 0.001 random 1")
	[[ $r == "ok scribble vdrv0 off=0x2800000 len=0x20000 "* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "scribble vdev1 1 0.001 random 1")
	[[ $r == "ok scribble vdev1 off=0x3000000 len=0x20000 "* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "scribble vio 1 0.001 random 1")
	[[ $r == "ok scribble vio off=0x2000000 len=0x2000000 "* ]]
}
check "-V: scribble regions vdrv0, vdev1 (128 KiB each) and vio (all four)" vio_regions
live_regions() {
	local r
	r=$("$CLIENT" -c "$T/vctl" "scribble live0 1 0.001 random 1")
	[[ $r == "ok scribble live0 off=0x1000 len=0x8 "* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "scribble live1 1 0.001 random 1")
	[[ $r == "ok scribble live1 off=0x2000 len=0x8 "* ]]
}
check "scribble regions live0, live1: magic and gen of control inbox 0, 1" live_regions
poke_word() {
	local r
	r=$("$CLIENT" -c "$T/vctl" "poke vdrv0 4 0x12345678")
	[[ $r == "ok poke vdrv0+0x4 old=0x"*" new=0x12345678" ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "poke vdrv0 4 7")
	[[ $r == "ok poke vdrv0+0x4 old=0x12345678 new=0x00000007" ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "poke ctrl0 2 1")
	[[ $r == "err OFFSET must be"* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "poke live1 8 1")
	[[ $r == "err OFFSET must be"* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "poke ctrl0 24 0x100000000")
	[[ $r == "err VALUE must be"* ]]
}
check "poke: one word set, its former value answered; bad offset, value refused" poke_word
storm_word() {
	local r n
	"$CLIENT" -c "$T/vctl" "poke vdrv0 8 0" >/dev/null || return 1
	r=$("$CLIENT" -c "$T/vctl" "storm vdrv0 8 1000 0.2")
	[[ $r == "ok storm vdrv0+0x8 rate=1000 seconds=0.200" ]] || return 1
	sleep 0.5
	# the count is the storm's alone: about 200 writes, then it stopped
	r=$("$CLIENT" -c "$T/vctl" "poke vdrv0 8 0")
	n=${r#*old=}
	n=$((${n%% *}))
	((n >= 100 && n <= 201)) || return 1
	r=$("$CLIENT" -c "$T/vctl" "storm vdrv0 6 1000 1")
	[[ $r == "err OFFSET must be"* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "storm vdrv0 8 0 1")
	[[ $r == "err RATE must be"* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "storm vdrv0 8 1000 30")
	[[ $r == "ok storm "* ]] || return 1
	r=$("$CLIENT" -c "$T/vctl" "storm stop")
	[[ $r == "ok storm stopped=1" ]]
}
check "storm: one word counted at RATE for SECONDS, then left alone; stop; bad offset, rate refused" storm_word
kill -TERM $FP
wait $FP

# --- without -I: doorbells go straight from guest to guest ------------------
# Interactive clients (fabric-client -i) take commands on a FIFO: client A
# on fd 7, client B on fd 8.  They are restarted for each fabric below.

# ask FD OUT CMD PREFIX: send CMD to an interactive client, print its answer
# (the next new line of OUT starting with PREFIX).
ask() {
	local n i
	n=$(count "$2" "^$4")
	echo "$3" >&"$1" || return 1
	for ((i = 0; i < 100; i++)); do
		if [ "$(count "$2" "^$4")" -gt "$n" ]; then
			grep -E "^$4" "$2" | tail -1
			return 0
		fi
		sleep 0.1
	done
	return 1
}
# total FD OUT V: doorbells client FD has received on vector V so far.
total() { ask "$1" "$2" total total | sed -n "s/.* v$3=\\([0-9]*\\).*/\\1/p"; }
# wait_total FD OUT V N: until client FD has received N doorbells on V.
wait_total() {
	local i
	for ((i = 0; i < ${5:-50}; i++)); do
		[ "$(total "$1" "$2" "$3")" = "$4" ] && return 0
		sleep 0.1
	done
	return 1
}
ring() { ask "$1" "$2" "ring $3 $4 ${5:-0}" "rang|ring error" >/dev/null; }

# start_clients SOCKET: interactive clients A (id even) and B (id odd).
start_clients() {
	rm -f "$T/a.in" "$T/b.in"
	mkfifo "$T/a.in" "$T/b.in"
	IA=$T/ia.out
	IB=$T/ib.out
	"$CLIENT" -S "$1" -i -t 300 <"$T/a.in" >"$IA" 2>&1 &
	pids+=($!)
	exec 7>"$T/a.in"
	wait_for "$IA" "^setup done" >/dev/null
	"$CLIENT" -S "$1" -i -t 300 <"$T/b.in" >"$IB" 2>&1 &
	pids+=($!)
	exec 8>"$T/b.in"
	wait_for "$IB" "^setup done" >/dev/null && wait_for "$IA" "^peer [0-9]+ joined"
}
stop_clients() { exec 7>&- 8>&-; sleep 0.2; }

S2=$T/fsock
L=$T/fabric3.log
"$FABRIC" -S "$S2" 2>"$L" &
FP=$!
pids+=("$FP")
wait_for "$L" "listening on" >/dev/null
start_clients "$S2"
kill -STOP $FP
ring 7 "$IA" 1 3
direct_ok() { wait_total 8 "$IB" 1 3 20; }
check "without -I: doorbells reach the peer while the fabric is stopped (direct eventfds)" \
	direct_ok
kill -CONT $FP
check "without -I: the fabric holds just the guests' 8 eventfds (4 vectors x 2), as before" \
	eval '[ "$(ls -l /proc/$FP/fd | grep -c "anon_inode:\[eventfd\]")" -eq 8 ]'
stop_clients
kill -TERM $FP
wait $FP

# --- fault injection: control socket --------------------------------------
CTL=$T/ctl
L=$T/fabric4.log
ctl() { "$CLIENT" -c "$CTL" "$@" 2>&1; }
# reply CMD REGEX: the reply to CMD matches REGEX
reply() {
	local r
	r=$(ctl "$1")
	[[ $r =~ $2 ]] && return 0
	echo "  # '$1' -> '$r'"
	return 1
}
stat_of() { ctl stats | sed -n "s/.* $1=\\([0-9]*\\).*/\\1/p"; }

"$FABRIC" -S "$S2" -C "$CTL" 2>"$L" &
FP=$!
pids+=("$FP")
check "-C: fabric starts with a control socket, interposed" \
	eval 'wait_for "$L" "doorbells interposed, control socket" && [ -S "$CTL" ]'
check "control: help"	reply help '^ok commands: '
check "control: stats line" reply stats \
	'^ok writes=0 doorbells=0 dropped=0 delayed=0 duplicated=0 frozen=0$'
check "control: status line" reply status \
	'^ok interpose=on peers=down,down scribble=none 0to1=normal 1to0=normal queued=0$'
while IFS='|' read -r cmd re; do
	check "control: '$cmd' -> err" reply "$cmd" "^err $re"
done <<'CASES'
bogus|unknown command 'bogus'
|empty command
stats foo|unknown command
scribble|usage: scribble
scribble stack 10 1|bad region 'stack'
scribble vdrv0 10 1|no virtio regions
scribble net0 0 1|RATE must be
scribble net0 1000001 1|RATE must be
scribble net0 10 0|SECONDS must be
scribble net0 10 3601|SECONDS must be
scribble net0 10 0.0001|SECONDS must be
scribble net0 10 1 wild|bad mode or seed 'wild'
doorbell|usage: doorbell
doorbell drop|usage: doorbell
doorbell drop 101|PCT must be 0..100
doorbell drop 10 1 sideways|unexpected 'sideways'
doorbell drop 10 1 2|unexpected '2'
doorbell drop 10 seed=x|bad seed
doorbell delay 10001|MS must be 0..10000
doorbell dup -1|PCT must be 0..100
doorbell freeze 2|bad SIDE
doorbell freeze 0 up|bad SIDE
doorbell thaw|usage: doorbell
a b c d e f g h i|too many arguments
CASES
check "control: several commands in one write, one reply line each, in order" \
	eval '[ "$(ctl "stats
status
bogus" | cut -c1-3 | tr "\n" " ")" = "ok  ok  err " ]'
long=$(printf 'x%.0s' $(seq 400))
overlong() {
	local r
	r=$(ctl "$long" stats | tr '\n' '|')
	[[ $r =~ ^err\ line\ too\ long\|ok\ writes=0\ [^|]*\|$ ]]
}
check "control: overlong line -> err, the connection goes on" overlong
check "control: the fabric survives all that" eval 'kill -0 $FP'

# --- fault injection: scribbling ------------------------------------------
rm -f "$T/a.in"
mkfifo "$T/a.in"
IA=$T/ia.out
"$CLIENT" -S "$S2" -i -t 300 <"$T/a.in" >"$IA" 2>&1 &
pids+=($!)
exec 7>"$T/a.in"
wait_for "$IA" "^setup done" >/dev/null

# scribble_done: until no scribble is running.
scribble_done() {
	local i
	for ((i = 0; i < ${1:-50}; i++)); do
		ctl status | grep -q " scribble=none " && return 0
		sleep 0.1
	done
	return 1
}
# Same seed, same number of writes: same bytes (relative to the region).
ctl "scribble ctrl0 1000 0.1 random 7" "scribble ctrl1 1000 0.1 random 7" \
	"scribble tty0 1000 0.1 random 7" "scribble tty1 1000 0.1 random 8" >/dev/null
scribble_done
seed_same() {
	[ "$(ask 7 "$IA" "sum 0x1000 0x1000" sum)" = "$(ask 7 "$IA" "sum 0x2000 0x1000" sum)" ] &&
	[ "$(ask 7 "$IA" "sum 0x10000 0x10000" sum)" != "$(ask 7 "$IA" "sum 0x800000 0x10000" sum)" ]
}
check "scribble: a seed repeats its writes, another seed does not" seed_same

# scribble_in REGION OFF LEN MODE: the writes land in OFF..OFF+LEN only.
scribble_in() {
	local r d words first last
	ask 7 "$IA" snap "snap" >/dev/null || return 1
	r=$(ctl "scribble $1 20000 0.2 $4 $((RANDOM))")
	if ! [[ $r =~ ^ok\ scribble\ $1\ off=$2\ len=$3\ rate=20000\ seconds=0.200\ mode=$4\ seed=[0-9]+$ ]]; then
		echo "  # reply: $r"
		return 1
	fi
	scribble_done || return 1
	d=$(ask 7 "$IA" diff "diff")
	words=$(sed -n 's/.*words=\([0-9]*\).*/\1/p' <<<"$d")
	first=$(sed -n 's/.*first=\(0x[0-9a-f]*\).*/\1/p' <<<"$d")
	last=$(sed -n 's/.*last=\(0x[0-9a-f]*\).*/\1/p' <<<"$d")
	if [ "${words:-0}" -gt 0 ] && ((first >= $2 && last < $2 + $3)); then
		return 0
	fi
	echo "  # $1 is $2+$3, $d"
	return 1
}
check "scribble ctrl0: random words land in 0x1000+0x1000 only" scribble_in ctrl0 0x1000 0x1000 random
check "scribble ctrl1: bounds words land in 0x2000+0x1000 only" scribble_in ctrl1 0x2000 0x1000 bounds
check "scribble tty0: land in 0x10000+0x10000 only"  scribble_in tty0 0x10000 0x10000 random
check "scribble tty1: byte runs land in 0x800000+0x10000 only" scribble_in tty1 0x800000 0x10000 bytes
check "scribble net0: land in 0x20000+0x400000 only" scribble_in net0 0x20000 0x400000 bounds
check "scribble net1: land in 0x810000+0x400000 only" scribble_in net1 0x810000 0x400000 random
check "scribble hdr: lands in 0x0+0x1000 only" scribble_in hdr 0x0 0x1000 bounds
# Repair, snapshot, scribble again: restore must give the snapshot back.
restored() {
	reply restore '^ok restore$' && ask 7 "$IA" snap snap >/dev/null &&
	reply "scribble hdr 20000 0.2 random" "^ok" && scribble_done &&
	[ "$(ask 7 "$IA" diff diff)" != "diff words=0" ] &&
	reply restore '^ok restore$' &&
	[ "$(ask 7 "$IA" diff diff)" = "diff words=0" ]
}
check "restore: rewrites the scribbled header as the fabric keeps it" restored
check "scribble all: the whole window (0x0+0x1000000)" scribble_in all 0x0 0x1000000 bytes
ctl restore >/dev/null
check "after restore a new client attaches (header valid, epochs kept)" \
	eval '"$CLIENT" -S "$S2" -1 2>&1 | grep -q "^shm .* epoch=1,1 state=up,up"'

# Rate and duration.
ctl "stats reset" >/dev/null
t0=$(date +%s%N)
ctl "scribble net1 1000 1.5 bounds" >/dev/null
scribble_done 100
t1=$(date +%s%N)
w=$(stat_of writes)
ms=$(((t1 - t0) / 1000000))
check "scribble 1000/s for 1.5s: $w writes, ended after ~${ms}ms" \
	eval '[ "$w" -eq 1500 ] && [ $ms -ge 1400 ] && [ $ms -le 4000 ]'
sleep 0.3
check "scribble stops by itself (no writes after the end, logged)" \
	eval '[ "$(stat_of writes)" -eq 1500 ] &&
	      grep -q "scribble net1 done: 1500 writes" "$L"'
scribble_max() {
	reply "scribble ctrl0 10 60" "^ok" && reply "scribble ctrl1 10 60" "^ok" &&
	reply "scribble tty0 10 60" "^ok" && reply "scribble tty1 10 60" "^ok" &&
	reply "scribble net0 10 60" "^err busy" &&
	reply "scribble tty1 100 60 bounds 5" "^ok" &&
	reply status "scribble=ctrl0:10/s:random:seed=[0-9]+:left=[0-9]+ms:writes=[0-9]+,ctrl1:.*,tty0:.*,tty1:100/s:bounds:seed=5:" &&
	reply "scribble stop" "^ok scribble stopped=4$" &&
	reply status " scribble=none "
}
check "scribble: 4 at once, a 5th is refused, same region replaces, 'scribble stop'" scribble_max
exec 7>&-
sleep 0.2

# --- fault injection: doorbells -------------------------------------------
start_clients "$S2"
check "-I: nothing is forwarded while the fabric is stopped" \
	eval 'kill -STOP $FP; ring 7 "$IA" 1 3; sleep 0.5; [ "$(total 8 "$IB" 1)" = 0 ]'
kill -CONT $FP
check "-I: ... and all of it once it runs again" wait_total 8 "$IB" 1 3
check "-I: the fabric holds 2 eventfds per vector and peer" \
	eval '[ "$(ls -l /proc/$FP/fd | grep -c "anon_inode:\[eventfd\]")" -eq 16 ]'

ctl "stats reset" >/dev/null
ring 7 "$IA" 1 200 1000
ring 8 "$IB" 2 50 1000
check "-I: doorbells forwarded 1:1 both ways (200 + 50)" \
	eval 'wait_total 8 "$IB" 1 203 && wait_total 7 "$IA" 2 50 &&
	      [ "$(stat_of dropped)$(stat_of delayed)$(stat_of duplicated)" = 000 ] &&
	      [ "$(stat_of doorbells)" -gt 0 ]'

ctl "stats reset" >/dev/null
check "doorbell drop 30" reply "doorbell drop 30" '^ok doorbell drop pct=30 dir=both seconds=0.000 seed=[0-9]+$'
b0=$(total 8 "$IB" 1)
ring 7 "$IA" 1 400 1000
sleep 0.5
b1=$(total 8 "$IB" 1)
db=$(stat_of doorbells)
dr=$(stat_of dropped)
check "drop 30%: $dr of $db doorbells dropped, $((b1 - b0)) of 400 arrived" \
	eval '[ $((dr * 100)) -ge $((db * 15)) ] && [ $((dr * 100)) -le $((db * 45)) ] &&
	      [ $((b1 - b0)) -ge $((db - dr)) ] && [ $((b1 - b0 + dr)) -le 400 ]'
ctl "doorbell normal" >/dev/null

drop_dir() {
	local a0 b0
	reply "doorbell drop 100 1to0" "dir=1to0" || return 1
	a0=$(total 7 "$IA" 1)
	b0=$(total 8 "$IB" 1)
	ring 7 "$IA" 1 10 1000
	ring 8 "$IB" 1 10 1000
	wait_total 8 "$IB" 1 $((b0 + 10)) && sleep 0.3 &&
	[ "$(total 7 "$IA" 1)" = "$a0" ] && reply status "0to1=normal 1to0=drop:100%"
}
check "drop 100% 1to0: side 1's doorbells all dropped, side 0's all delivered" drop_dir
ctl "doorbell normal" >/dev/null

drop_timed() {
	local b0
	reply "doorbell drop 100 0.5" "seconds=0.500" || return 1
	b0=$(total 8 "$IB" 1)
	ring 7 "$IA" 1 5
	sleep 0.7
	[ "$(total 8 "$IB" 1)" = "$b0" ] && reply status "0to1=normal 1to0=normal" &&
	ring 7 "$IA" 1 5 && wait_total 8 "$IB" 1 $((b0 + 5))
}
check "drop 100% for 0.5s: dropped, then back to normal by itself" drop_timed

dup_all() {
	local b0 d
	ctl "stats reset" >/dev/null
	reply "doorbell dup 100 seed=99" "^ok doorbell dup pct=100 dir=both seconds=0.000 seed=99$" ||
		return 1
	b0=$(total 8 "$IB" 1)
	ring 7 "$IA" 1 20 20000
	sleep 0.3
	d=$(stat_of duplicated)
	[ "$d" -gt 0 ] && [ "$d" = "$(stat_of doorbells)" ] &&
	wait_total 8 "$IB" 1 $((b0 + 20 + d))
}
check "dup 100%: every doorbell delivered twice" dup_all
ctl "doorbell normal" >/dev/null

delay_1s() {
	local b0 t0 t1
	ctl "stats reset" >/dev/null
	reply "doorbell delay 1000 0to1" "^ok doorbell delay ms=1000 dir=0to1" || return 1
	b0=$(total 8 "$IB" 1)
	t0=$(date +%s%N)
	ring 7 "$IA" 1 1
	sleep 0.2
	[ "$(total 8 "$IB" 1)" = "$b0" ] || return 1
	reply status "0to1=delay:1000ms .* queued=1" || return 1
	wait_total 8 "$IB" 1 $((b0 + 1)) || return 1
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -ge 900 ] && [ "$(stat_of delayed)" = 1 ]
}
check "delay 1000ms 0to1: the doorbell arrives after ~1s, not before" delay_1s
ctl "doorbell normal" >/dev/null

freeze_thaw() {
	local b1 b2 a2 f
	ctl "stats reset" >/dev/null
	reply "doorbell freeze 0" "^ok doorbell freeze 0to1$" || return 1
	b1=$(total 8 "$IB" 1)
	b2=$(total 8 "$IB" 2)
	a2=$(total 7 "$IA" 2)
	ring 7 "$IA" 1 5 2000
	ring 7 "$IA" 2 3 2000
	ring 8 "$IB" 2 4 2000
	wait_total 7 "$IA" 2 $((a2 + 4)) || return 1	# the other way is open
	sleep 0.3
	[ "$(total 8 "$IB" 1)" = "$b1" ] && [ "$(total 8 "$IB" 2)" = "$b2" ] || return 1
	reply status "0to1=frozen:pending=0x6 1to0=normal" || return 1
	f=$(stat_of frozen)
	[ "$f" -ge 2 ] && [ "$f" -le 8 ] || return 1
	reply "doorbell thaw 0" "^ok doorbell thaw 0to1 delivered=2$" &&
	wait_total 8 "$IB" 1 $((b1 + 1)) && wait_total 8 "$IB" 2 $((b2 + 1)) &&
	sleep 0.3 && [ "$(total 8 "$IB" 1)" = $((b1 + 1)) ] &&
	reply status "0to1=normal 1to0=normal"
}
check "freeze 0: side 0's doorbells held; thaw delivers one per pending vector" freeze_thaw

freeze_in() {
	local a1
	reply "doorbell freeze 0 in" "^ok doorbell freeze 1to0$" || return 1
	reply "doorbell delay 300 1to0" "^ok" || return 1
	a1=$(total 7 "$IA" 1)
	ring 8 "$IB" 1 3 1000
	sleep 0.6	# delayed doorbells that come due while frozen are latched too
	[ "$(total 7 "$IA" 1)" = "$a1" ] && reply status "1to0=delay:300ms,frozen:pending=0x2" &&
	reply "doorbell normal" "^ok doorbell normal delivered=1$" &&
	wait_total 7 "$IA" 1 $((a1 + 1))
}
check "freeze 0 in (= 1to0) latches delayed doorbells too; 'normal' thaws" freeze_in

# A guest leaves while doorbells to it are queued, latched, dropped.
leave_active() {
	reply "doorbell delay 3000 0to1" "^ok" && reply "doorbell freeze 1to0" "^ok" &&
	reply "doorbell dup 50" "^ok" || return 1
	ring 7 "$IA" 1 10 1000
	ring 8 "$IB" 1 3
	reply status "queued=[1-9]" || return 1
	exec 8>&-	# client B exits
	wait_for "$L" "peer 1 \\(id [0-9]+\\) left" || return 1
	reply status "peers=up,down .*queued=0$" &&
	reply "doorbell thaw 1to0" "^ok doorbell thaw 1to0 delivered=1$" && kill -0 $FP
}
check "a guest leaves with doorbells queued for it: they are discarded" leave_active
reply "doorbell drop 20" "^ok" >/dev/null
reply "doorbell freeze both" "^ok" >/dev/null
sleep 0.2
before=$(nfds $FP)
for i in $(seq 30); do
	"$CLIENT" -S "$S2" -1 >/dev/null 2>&1
	echo "ring 1 2 0" >&7
done
sleep 0.5
after=$(nfds $FP)
check "faults active: no fd leak over 30 attach/detach cycles ($before -> $after fds)" \
	eval 'kill -0 $FP && [ "$before" -gt 0 ] && [ "$before" -eq "$after" ]'
check "doorbell normal: everything off" \
	eval 'reply "doorbell normal" "^ok doorbell normal delivered=[0-9]+$" &&
	      reply status "0to1=normal 1to0=normal queued=0$"'
exec 7>&-
kill -TERM $FP
wait $FP
rc=$?
check "-C: SIGTERM exits 0 and removes the control socket" \
	eval '[ $rc -eq 0 ] && [ ! -e "$CTL" ] && [ ! -e "$S2" ]'

# -X: faults from the command line.
"$FABRIC" -S "$S2" -C "$CTL" -X "doorbell drop 10 1to0" -X "doorbell delay 5" 2>"$L" &
FP=$!
pids+=("$FP")
check "-X: startup commands are applied" \
	eval 'wait_for "$L" "listening on" &&
	      reply status "0to1=delay:5ms 1to0=drop:10%,delay:5ms"'
kill -TERM $FP
wait $FP

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
		-device ivshmem-doorbell,chardev=c0,vectors=4 >"$Q" 2>&1 &
	QP=$!
	pids+=("$QP")
	check "qemu ivshmem-doorbell attaches as peer 1 with 4 vectors" \
		eval 'wait_for "$T/f.out" "^peer 1 joined vectors=4" 100 &&
		      wait_for "$L" "peer 1 \\(id 1\\) joined"'
	kill $QP
	wait $QP 2>/dev/null
	check "qemu reports no ivshmem errors" eval '! grep -qi "ivshmem\|error" "$Q"'
	check "qemu's exit is seen as peer 1 leaving" \
		wait_for "$T/f.out" "^peer 1 left epoch=1,2 state=up,down"
	kill -TERM $FP
	wait $FP

	# The same with interposed doorbells: QEMU must not see a difference.
	L=$T/fabric5.log
	"$FABRIC" -S "$S" -C "$CTL" 2>"$L" &
	FP=$!
	pids+=("$FP")
	wait_for "$L" "listening on" >/dev/null
	rm -f "$T/a.in"
	mkfifo "$T/a.in"
	"$CLIENT" -S "$S" -i -t 60 <"$T/a.in" >"$T/g.out" 2>&1 &
	pids+=($!)
	exec 7>"$T/a.in"
	wait_for "$T/g.out" "^setup done id=0" >/dev/null
	qemu-system-x86_64 -machine q35,accel=tcg -nodefaults -display none -S \
		-monitor none -serial none -chardev socket,path="$S",id=c0 \
		-device ivshmem-doorbell,chardev=c0,vectors=4 >"$Q" 2>&1 &
	QP=$!
	pids+=("$QP")
	check "-I: qemu attaches to an interposed fabric with 4 vectors, no errors" \
		eval 'wait_for "$T/g.out" "^peer 1 joined vectors=4" 100 &&
		      wait_for "$L" "peer 1 \\(id 1\\) joined" && sleep 0.5 &&
		      ! grep -qi "ivshmem\|error" "$Q"'
	ring 7 "$T/g.out" 1 4 1000
	check "-I: doorbells to qemu go through the fabric" \
		eval 'sleep 0.3; [ "$(stat_of doorbells)" -ge 1 ] && [ "$(stat_of dropped)" = 0 ]'
	kill $QP
	wait $QP 2>/dev/null
	exec 7>&-
	kill -TERM $FP
	wait $FP
else
	ok "qemu ivshmem-doorbell attach # SKIP qemu-system-x86_64 not installed"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
