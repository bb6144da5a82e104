#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# test-peer.sh: two pcinet-peers on one pcinet-fabric, on this machine.
#
# Each peer runs in a network namespace of its own (created here and
# removed on exit), so the TAPs and their addresses exist only there.
# One line per case, then "N passed, N failed".  Every wait has a
# timeout; the whole run takes about 30 s.  Needs root (netns, TAP).
#
#   ./test-peer.sh [-v]        -v: print the peers' logs at the end
#   PCINET_PEER=path           another build (make check-san: ASan/UBSan)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
peer=${PCINET_PEER:-$here/pcinet-peer}
fabric=$top/tools/pcinet-fabric/pcinet-fabric
verbose=${1:-}

[ "$(id -u)" -eq 0 ] || { echo "test-peer.sh: needs root (netns, TAP)"; echo "0 passed, 1 failed"; exit 1; }
for t in "$peer" "$fabric"; do
	[ -x "$t" ] || { echo "test-peer.sh: $t missing (make)"; echo "0 passed, 1 failed"; exit 1; }
done
for t in socat python3 sha256sum ip timeout; do
	command -v $t >/dev/null || { echo "test-peer.sh: $t missing"; echo "0 passed, 1 failed"; exit 1; }
done
if command -v ping >/dev/null; then PING=(ping); else PING=(busybox ping); fi

dir=$(mktemp -d /tmp/pcinet-peer-test.XXXXXX)
ns=(pnp0-$$ pnp1-$$)
addr=(10.251.0.1 10.251.0.2)
pids=()
fpid=
passed=0
failed=0

cleanup() {
	local p
	kill "$watchdog" 2>/dev/null
	for p in "${pids[@]}" $fpid; do
		[ -n "$p" ] && kill -CONT "$p" 2>/dev/null && kill "$p" 2>/dev/null
	done
	sleep 0.2
	for p in "${pids[@]}" $fpid; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null
	done
	for p in "${ns[@]}"; do
		ip netns pids "$p" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$p" 2>/dev/null
	done
	if [ -n "$verbose" ]; then
		for p in "$dir"/*.log; do echo "--- $p"; cat "$p"; done
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'echo "test-peer.sh: interrupted"; echo "$passed passed, $((failed + 1)) failed"; exit 1' INT TERM
# the watchdog: whatever hangs, the run ends (and cleans up) within 300 s
(trap 'kill $s 2>/dev/null; exit 0' TERM; sleep 300 & s=$!; wait $s &&
	kill -TERM $$ 2>/dev/null) >/dev/null 2>&1 &
watchdog=$!

result() {	# $1 = name, $2 = 0 for pass, rest = detail
	local name=$1 rc=$2
	shift 2
	if [ "$rc" -eq 0 ]; then
		echo "[ OK ] $name${*:+ ($*)}"
		passed=$((passed + 1))
	else
		echo "[FAIL] $name${*:+: $*}"
		failed=$((failed + 1))
	fi
}

# wait_status SIDE VALUE SECONDS: the peer's status file says link=VALUE
wait_status() {
	local i n=$(($3 * 20))
	for ((i = 0; i < n; i++)); do
		grep -qx "link=$2" "$dir/st$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# start_peer SIDE [OPTION...]: run the peer in its netns, then configure
# its TAP
start_peer() {
	local s=$1
	shift
	ip netns exec "${ns[$s]}" "$peer" -S "$dir/sock" -i pn$s -l "$dir/tty$s" \
		-s "$dir/st$s" --name "board $s" --slot $((s + 1)) "$@" \
		>>"$dir/peer$s.out" 2>>"$dir/peer$s.log" &
	pids[s]=$!
	local i
	for ((i = 0; i < 50; i++)); do
		ip -n "${ns[$s]}" link show pn$s >/dev/null 2>&1 && break
		sleep 0.05
	done
	# a fixed MAC: a restarted peer's new TAP must not leave the other
	# side's neighbour entry pointing at a MAC nobody has
	ip -n "${ns[$s]}" link set pn$s address 02:70:63:69:00:0$s &&
		ip -n "${ns[$s]}" addr add "${addr[$s]}/24" dev pn$s &&
		ip -n "${ns[$s]}" link set pn$s up
}

set_mtu() {
	ip -n "${ns[0]}" link set pn0 mtu "$1" && ip -n "${ns[1]}" link set pn1 mtu "$1"
}

# ping_both SIZE: one ping each way with SIZE bytes of ICMP payload
ping_both() {
	timeout 10 ip netns exec "${ns[0]}" "${PING[@]}" -c 2 -W 2 -s "$1" "${addr[1]}" >/dev/null &&
		timeout 10 ip netns exec "${ns[1]}" "${PING[@]}" -c 2 -W 2 -s "$1" "${addr[0]}" >/dev/null
}

# ping_until SECONDS: traffic passes 0 -> 1 within SECONDS
ping_until() {
	local end=$((SECONDS + $1))
	while [ $SECONDS -lt $end ]; do
		timeout 3 ip netns exec "${ns[0]}" "${PING[@]}" -c 1 -W 1 "${addr[1]}" >/dev/null && return 0
	done
	return 1
}

# transfer FROM TO FILE PORT: send FILE from side FROM to side TO over TCP,
# compare sha256; prints MiB/s
transfer() {
	local from=$1 to=$2 file=$3 port=$4 t0 t1 want got
	want=$(sha256sum <"$file" | cut -d' ' -f1)
	timeout 60 ip netns exec "${ns[$to]}" socat -u TCP-LISTEN:$port,reuseaddr - \
		2>>"$dir/socat.log" | sha256sum | cut -d' ' -f1 >"$dir/got" &
	local rpid=$!
	sleep 0.3
	t0=$(date +%s.%N)
	timeout 60 ip netns exec "${ns[$from]}" socat -u "FILE:$file" \
		"TCP:${addr[$to]}:$port,retry=20,interval=0.1" 2>>"$dir/socat.log" || return 1
	wait $rpid
	t1=$(date +%s.%N)
	got=$(cat "$dir/got")
	[ "$got" = "$want" ] || { echo "sha256 $got != $want"; return 1; }
	echo "$(echo "64 / ($t1 - $t0)" | bc -l | cut -c1-6) MiB/s"
}

# tty_check: bytes 0..255 (x REPS) each way through the two ptys
tty_check() {
	timeout 30 python3 - "$dir/tty0" "$dir/tty1" "$1" <<'EOF'
import os, select, sys, termios, time
def raw(fd):
    a = termios.tcgetattr(fd)
    a[0] = a[1] = a[3] = 0
    a[2] = (a[2] & ~(termios.CSIZE | termios.PARENB)) | termios.CS8 | termios.CREAD
    a[6][termios.VMIN], a[6][termios.VTIME] = 1, 0
    termios.tcsetattr(fd, termios.TCSANOW, a)
fds = [os.open(p, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK) for p in sys.argv[1:3]]
for fd in fds:
    raw(fd)
    termios.tcflush(fd, termios.TCIOFLUSH)
data = bytes(range(256)) * int(sys.argv[3])
def xfer(w, r):
    got, off, end = b'', 0, time.time() + 12
    while len(got) < len(data) and time.time() < end:
        rl, wl, _ = select.select([r], [w] if off < len(data) else [], [], 0.2)
        if wl:
            try:
                off += os.write(w, data[off:off + 4096])
            except BlockingIOError:
                pass
        if rl:
            got += os.read(r, 65536)
    return got == data
ok = [xfer(fds[0], fds[1]), xfer(fds[1], fds[0])]
print("0->1", ok[0], "1->0", ok[1])
sys.exit(0 if all(ok) else 1)
EOF
}

# ---- setup -----------------------------------------------------------------
t_start=$SECONDS
for n in "${ns[@]}"; do
	ip netns add "$n" || { echo "cannot create netns $n"; echo "0 passed, 1 failed"; exit 1; }
	ip -n "$n" link set lo up
done
# -C: the fabric's control socket, for the fault cases at the end (it
# interposes doorbells, so every case runs through a forwarding fabric)
"$fabric" -S "$dir/sock" -C "$dir/ctl" >"$dir/fabric.log" 2>&1 &
fpid=$!
for ((i = 0; i < 50; i++)); do [ -S "$dir/sock" ] && break; sleep 0.05; done
start_peer 0
start_peer 1

# ---- cases -----------------------------------------------------------------
wait_status 0 up 5 && wait_status 1 up 5
result link-up $? "$(grep -h '^gen=' "$dir/st0" "$dir/st1" | tr '\n' ' ')"

# Identity: each side shows the other's name (sanitized: the space
# becomes '_') and slot, within a status rewrite (one second)
ident_ok() {
	grep -qx "peer_name=board_$2" "$dir/st$1" &&
		grep -qx "peer_slot=$(($2 + 1))" "$dir/st$1" &&
		grep -qx "name=board_$1" "$dir/st$1"
}
for ((i = 0; i < 40; i++)); do
	ident_ok 0 1 && ident_ok 1 0 && break
	sleep 0.05
done
ident_ok 0 1 && ident_ok 1 0
result identity $? "$(grep -h '^peer_name=' "$dir/st0" "$dir/st1" | tr '\n' ' ')"

ping_both 56 && ping_both 1472
result ping-both-ways $?

set_mtu 9000 && ping_both 8972
result mtu-9000 $?

# The TAP's own limit is 65535 - 14 (tun's max_mtu); pcinet0 takes 65535.
set_mtu 65521 && ping_both 65493
result mtu-65521 $? "largest TAP MTU"
set_mtu 1500

head -c $((64 << 20)) /dev/urandom >"$dir/blob0"
head -c $((64 << 20)) /dev/urandom >"$dir/blob1"
out=$(transfer 0 1 "$dir/blob0" 5001)
result tcp-64M-0to1 $? "$out"
out=$(transfer 1 0 "$dir/blob1" 5002)
result tcp-64M-1to0 $? "$out"
rm -f "$dir/blob0" "$dir/blob1"

out=$(tty_check 1 2>&1)
result tty-bytes-0-255 $? "$out"
out=$(tty_check 1024 2>&1)
result tty-256K-both-ways $? "$out"

# kill -9 one peer: the other goes down (the fabric's attach epoch), a new
# one comes up with it, traffic passes.
kill -9 "${pids[1]}"
wait "${pids[1]}" 2>/dev/null
wait_status 0 down 3
rc=$?
[ $rc -eq 0 ] || echo "kill9: peer 0 did not see the peer go"
start_peer 1
step=link
wait_status 0 up 5 && wait_status 1 up 5 && step=ping && ping_until 10 &&
	step=tty && tty_check 1 >/dev/null && step=
result kill9-restart $((rc | ${#step})) "${step:+failed at $step}"

# SIGSTOP one peer: the other sees it gone (heartbeat silent > 700 ms),
# SIGCONT: back.
kill -STOP "${pids[1]}"
t0=$(date +%s%N)
wait_status 0 down 3
rc=$?
t_down=$((($(date +%s%N) - t0) / 1000000))
sleep 0.5
kill -CONT "${pids[1]}"
t0=$(date +%s%N)
wait_status 0 up 5 && wait_status 1 up 5 && ping_until 10
rc2=$?
t_up=$((($(date +%s%N) - t0) / 1000000))
result sigstop-sigcont $((rc | rc2)) "down after ${t_down} ms, up again ${t_up} ms after SIGCONT"

# interface down on one side: the other side's carrier goes (chan_open)
ip -n "${ns[1]}" link set pn1 down
ok=1
for ((i = 0; i < 40; i++)); do
	grep -qx carrier=0 "$dir/st0" && { ok=0; break; }
	sleep 0.05
done
ip -n "${ns[1]}" link set pn1 up
ip -n "${ns[1]}" addr add "${addr[1]}/24" dev pn1 2>/dev/null
rc=$ok
ping_until 5
result peer-ifdown-carrier $((rc | $?))

# SIGTERM one peer: it stops (gen 0), the other goes down at once
kill "${pids[1]}"
t0=$(date +%s%N)
wait_status 0 down 2
rc=$?
t_down=$((($(date +%s%N) - t0) / 1000000))
for ((i = 0; i < 60; i++)); do kill -0 "${pids[1]}" 2>/dev/null || break; sleep 0.05; done
kill -0 "${pids[1]}" 2>/dev/null && kill -9 "${pids[1]}"	# stuck: fails below
wait "${pids[1]}" 2>/dev/null
rc2=$?
start_peer 1
wait_status 0 up 5 && wait_status 1 up 5 && ping_until 10
result sigterm-stop-restart $((rc | rc2 | $?)) "down after ${t_down} ms"

# nothing wrong was seen on the way: no CRC or length error, no crash
errs=$(grep -h -E '^net_crc_errors=' "$dir/st0" "$dir/st1" | tr '\n' ' ')
! grep -q -E 'net_crc_errors=[1-9]|tty_frame_errors=[1-9]' "$dir/st0" "$dir/st1"
result no-integrity-errors $? "$errs"

# ---- faults: the window is untrusted ----------------------------------------
ctl() {	# one command to the fabric's control socket; fails on "err"
	local r
	r=$(echo "$*" | timeout 5 socat - UNIX-CONNECT:"$dir/ctl") || return 1
	[ "${r#ok}" != "$r" ] || { echo "fabric: $* -> $r" >&2; return 1; }
}

# every doorbell lost for 2 s: traffic still passes, a tick per doorbell
ctl doorbell drop 100 2
rc=$?
t0=$(date +%s%N)
timeout 10 ip netns exec "${ns[0]}" "${PING[@]}" -c 3 -W 2 "${addr[1]}" >/dev/null
rc2=$?
t_ping=$((($(date +%s%N) - t0) / 1000000))
ctl doorbell normal
result doorbells-lost $((rc | rc2)) "3 pings in ${t_ping} ms without doorbells"

# a third party scribbles each region a peer reads (control words, both
# rings of both sides; boundary values, random words, random bytes) while
# traffic runs: no crash, no hang, the link heals
ip netns exec "${ns[0]}" "${PING[@]}" -i 0.05 -c 400 -W 1 "${addr[1]}" >/dev/null 2>&1 &
bg=$!
rc=0
seed=1
for r in ctrl0 ctrl1 tty0 tty1 net0 net1; do
	for m in bounds random bytes; do
		ctl scribble $r 20000 0.3 $m $seed || rc=1
		seed=$((seed + 1))
		sleep 0.35
	done
done
kill "$bg" 2>/dev/null
wait "$bg" 2>/dev/null
alive=0
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || alive=1; done
wait_status 0 up 3 && wait_status 1 up 3 && ping_until 5 && tty_check 1 >/dev/null
rc2=$?
resets=$(grep -h '^resets=' "$dir/st0" "$dir/st1" | tr '\n' ' ')
result scribble-heals $((rc | alive | rc2)) "$resets"

# a hostile peer: peer 1 restarted with --hostile, turned hostile for 3 s
# (SIGUSR1) under traffic, writes garbage into its control block and its
# rings and rings random doorbells; then it restarts its link: both
# survive, the link heals, bytes cross intact
kill "${pids[1]}"
wait "${pids[1]}" 2>/dev/null
start_peer 1 --hostile=3:2000:usr1
wait_status 0 up 5 && wait_status 1 up 5 && ping_until 10
rc=$?
ip netns exec "${ns[0]}" "${PING[@]}" -i 0.05 -c 100 -W 1 "${addr[1]}" >/dev/null 2>&1 &
bg=$!
kill -USR1 "${pids[1]}"
for ((i = 0; i < 100; i++)); do grep -qx hostile=1 "$dir/st1" && break; sleep 0.05; done
grep -qx hostile=1 "$dir/st1" || rc=1
for ((i = 0; i < 200; i++)); do grep -qx hostile=0 "$dir/st1" && break; sleep 0.05; done
t0=$(date +%s%N)
wait_status 0 up 5 && wait_status 1 up 5 && ping_until 5 && tty_check 1 >/dev/null
rc2=$?
t_up=$((($(date +%s%N) - t0) / 1000000))
kill "$bg" 2>/dev/null
wait "$bg" 2>/dev/null
alive=0
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || alive=1; done
writes=$(grep -h '^hostile_writes=' "$dir/st1")
result hostile-peer $((rc | alive | rc2)) "$writes, healed in ${t_up} ms"

echo "($((SECONDS - t_start)) s)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
