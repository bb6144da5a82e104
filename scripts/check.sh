#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make check: install what is missing, build everything, run every test.
#
#   scripts/check.sh [PATTERN...]     (or TESTS="PATTERN..." make check)
#   KERNEL=debian|debug               one kernel only (default: the whole
#                                     suite on Debian's, then the traffic,
#                                     reload and fault cases on the debug
#                                     kernel, built once and cached)
#   REPEAT=N                          run the QEMU cases N times
#
# Cases run on this machine (build gates, userspace ring tests, the fabric's
# own tests) and in QEMU guests (tests/qemu/test_*.py).  Each prints one
# line; the last line is the total, "N passed, N failed" (", N skipped"
# appended when a case skipped itself: [SKIP], not a failure).  Nothing is ever
# loaded into this machine's kernel.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || read -r -a patterns <<<"${TESTS:-}"
export TESTS="${patterns[*]:-}"

passed=0
failed=0
skipped=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

selected() {	# $1 = case name; true if it matches a pattern (or none given)
	local p
	[ ${#patterns[@]} -eq 0 ] && return 0
	for p in "${patterns[@]}"; do
		# shellcheck disable=SC2053
		[[ $1 == *"$p"* || $1 == $p ]] && return 0
	done
	return 1
}

host_case() {	# $1 = name, rest = command; one line, output on failure
	local name=$1 t0 rc
	shift
	selected "$name" || return 0
	t0=$(date +%s.%N)
	"$@" >"$log/out" 2>&1
	rc=$?
	dt=$(echo "$(date +%s.%N) - $t0" | bc)
	if [ $rc -eq 0 ]; then
		printf '[ OK ] %s (%.1fs)\n' "$name" "$dt"
		passed=$((passed + 1))
	else
		printf '[FAIL] %s: exit %d\n' "$name" "$rc"
		tail -n 60 "$log/out" | sed 's/^/    | /'
		failed=$((failed + 1))
	fi
}

part() {	# $1 = title; prints the time the previous part took
	local now
	now=$(date +%s)
	[ -n "${part_t0:-}" ] && printf '== (%s took %d s)\n' "$part_name" $((now - part_t0))
	part_name=$1
	part_t0=$now
	[ -n "$1" ] && echo "== $1"
}

# ---- install and build ------------------------------------------------------
part "setup (packages, kernel image and headers)"
if ! scripts/setup.sh >"$log/setup" 2>&1; then
	cat "$log/setup"
	echo "setup failed"
	echo "0 passed, 1 failed"
	exit 1
fi
tail -n 3 "$log/setup"
# shellcheck disable=SC1091
. build/env.sh

part "build"
if ! { make -s module && make -s fabric && make -s -C tools/testing/pcinet all &&
	make -s -C tools/pcinet-vhost all && make -s -C tools/pcinet-peer all; } \
	>"$log/build" 2>&1; then
	cat "$log/build"
	echo "build failed"
	echo "0 passed, 1 failed"
	exit 1
fi

# ---- cases on this machine -------------------------------------------------
# The gates are the Makefile's (make gates): each fails on any diagnostic.
part "cases on this machine (gates, unit tests)"
host_case gate-w1-6.1 make -s w1-6.1
host_case gate-sparse make -s sparse
host_case gate-checkpatch make -s style
host_case gate-w1-6.12 make -s w1-6.12	# last: leaves the 6.12 module built
host_case dkms-build make -s dkms
host_case unit-ring make -s -C tools/testing/pcinet check
host_case unit-fabric make -s -C tools/pcinet-fabric check
host_case vhost-user-handoff make -s -C tools/pcinet-vhost check
host_case userspace-peer make -s -C tools/pcinet-peer check

# ---- cases in QEMU -----------------------------------------------------------
qemu_suite() {	# $1 = debian|debug; patterns from $TESTS
	local t line p f s
	for t in tests/qemu/test_*.py; do
		[ -e "$t" ] || continue
		# the per-file total is folded into ours: only one closing line
		PCINET_KERNEL=$1 python3 "$t" 2>&1 | tee "$log/qemu" |
			sed -E "s/^([0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?)\$/(\1 in ${t##*/})/"
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log/qemu" | tail -n1)
		if [ -z "$line" ]; then
			echo "[FAIL] $t: no result line"
			failed=$((failed + 1))
			continue
		fi
		s=
		read -r p _ f _ s _ <<<"$line"
		passed=$((passed + p))
		failed=$((failed + f))
		skipped=$((skipped + ${s:-0}))
	done
}


# The debug kernel (scripts/debug-kernel.sh) and the module built for it.
debug_build() {
	if ! make -s debug-module >"$log/debug" 2>&1; then
		tail -n 40 "$log/debug"
		echo "[FAIL] debug-kernel: build failed"
		failed=$((failed + 1))
		return 1
	fi
	grep '^debug-kernel:' "$log/debug"
}

# On the debug kernel by default: the cases that move traffic, reload a
# driver, kill or stop a peer, or inject faults (an exact name each: "=").
# KERNEL=debug runs every case there instead.
DEBUG_CASES=(
	=net-load-unload =net-ping =net-tcp-256M =net-iperf3-tcp
	=net-link-down-up =net-down-up-in-flight =net-reload-under-traffic
	=net-kill9-peer =net-sigstop-peer =net-bad-peer
	=tty-16M-both-ways =tty-reader-stopped
	=tty-peer-frozen =tty-peer-killed =tty-unbind-under-traffic =tty-bad-peer
	=tty-cooked-flow-control =tty-under-iperf3
	=fault-ctrl0 =fault-net1 =fault-integrity =fault-doorbells
	=fault-rmmod-scribbled =fault-tty-integrity =peer-cycles =peer-hostile-crc
	=virtio-blk =virtio-withdraw =virtio-blk-ext4 =virtio-blk-sync-kill
	=virtio-blk-fio =vhost-blk =vhost-fs =vhost-withdraw =vhost-withdraw-in-probe
	=vhost-peer-cycles =vhost-hotplug =vhost-host-rmmod =vhost-host-unbind
	=virtio-blk-wce =virtio-fs =virtio-fs-restart =virtio-fs-abort
	=virtio-peer-cycles =virtio-net-reset =virtio-scribble =virtio-old-peer
	=virtio-stale-used =virtio-bad-config =virtio-reset-in-flight
	=virtio-ctl-scribble =vhost-reset-in-flight
)

rounds=${REPEAT:-1}
for ((round = 1; round <= rounds; round++)); do
	[ "$rounds" -gt 1 ] && echo "== round $round of $rounds"
	case "${KERNEL:-}" in
	debian)
		part "QEMU cases, Debian kernel $KVER"
		qemu_suite debian
		;;
	debug)
		part "debug kernel and module"
		debug_build &&
			{ part "QEMU cases, debug kernel"; qemu_suite debug; }
		;;
	"")
		part "QEMU cases, Debian kernel $KVER"
		qemu_suite debian
		part "debug kernel and module"
		if debug_build; then
			part "QEMU cases, debug kernel (${TESTS:-${DEBUG_CASES[*]}})"
			TESTS=${TESTS:-${DEBUG_CASES[*]}} qemu_suite debug
		fi
		;;
	*)
		echo "KERNEL=$KERNEL: want debian, debug or nothing (both)"
		failed=$((failed + 1))
		;;
	esac
done
part ""

if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] && [ $((passed + failed)) -gt 0 ]
