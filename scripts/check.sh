#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make check / make check-all: install what is missing, build everything,
# run the tests.
#
#   scripts/check.sh [PATTERN...]     (or TESTS="PATTERN..." make check)
#   TIER=check|all                    check (make check, README's command,
#                                     .ci/run): every case on Debian's
#                                     kernel but those of ALL_ONLY below,
#                                     and DEBUG_CASES on the debug kernel;
#                                     all (make check-all): every case on
#                                     both kernels
#   KERNEL=debian|debug               one kernel only (every case of the
#                                     tier there)
#   REPEAT=N                          run the QEMU cases N times
#
# A case moves between the tiers by its name in the lists below, never by
# losing an assertion.  The debug kernel's cases run in a lane of their own
# (debug_lane below): its kernel (built once, cached outside the checkout)
# builds at the lowest priority from the moment its packages are in, and its
# cases run beside Debian's.
#
# Cases run on this machine (build gates, userspace ring tests, the fabric's
# own tests) and in QEMU guests (tests/qemu/test_*.py).  Each prints one
# line; the last line is the total, "N passed, N failed" (", N skipped"
# appended when a case skipped itself: [SKIP], not a failure), after the
# time of each part and the ten slowest cases.  Nothing is ever loaded
# into this machine's kernel.
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
debug_pid=
trap '[ -n "$debug_pid" ] && kill -- -"$debug_pid" 2>/dev/null; rm -rf "$log"' EXIT
export PCINET_TIMES=$log/times
: >"$PCINET_TIMES"
TIER=${TIER:-check}
case "$TIER" in
check | all) ;;
*)
	echo "TIER=$TIER: want check or all"
	echo "0 passed, 1 failed"
	exit 1
	;;
esac

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
	printf '%s\t%.1f\t%s\n' "$name" "$dt" "$([ $rc -eq 0 ] && echo ok || echo fail)" \
		>>"$PCINET_TIMES"
	if [ $rc -eq 0 ]; then
		printf '[ OK ] %s (%.1fs)\n' "$name" "$dt"
		passed=$((passed + 1))
	else
		printf '[FAIL] %s: exit %d\n' "$name" "$rc"
		tail -n 60 "$log/out" | sed 's/^/    | /'
		failed=$((failed + 1))
	fi
}

parts=()
part() {	# $1 = title; prints the time the previous part took
	local now
	now=$(date +%s)
	if [ -n "${part_t0:-}" ]; then
		printf '== (%s took %d s)\n' "$part_name" $((now - part_t0))
		parts+=("$(printf '%6d s  %s' $((now - part_t0)) "$part_name")")
	fi
	part_name=$1
	part_t0=$now
	[ -n "$1" ] && echo "== $1"
}

# ---- cases in QEMU -----------------------------------------------------------
qemu_suite() {	# $1 = debian|debug; patterns from $TESTS
	local t line p f s
	for t in tests/qemu/test_*.py; do
		[ -e "$t" ] || continue
		# the per-file total is folded into ours: only one closing line
		PCINET_KERNEL=$1 python3 "$t" 2>&1 | tee "$log/qemu.$1" |
			sed -E "s/^([0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?)\$/(\1 in ${t##*/})/"
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log/qemu.$1" | tail -n1)
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

# The tiers, by case name (exact names: "=").  make check runs every case on
# Debian's kernel but those of ALL_ONLY, and DEBUG_CASES on the debug kernel:
# every capability on Debian's, and on the debug kernel module reload,
# teardown under traffic, hostile peers and virtio reset under KASAN,
# lockdep and kmemleak.  make check-all (TIER=all) runs every case on both.
# A case named in ALL_ONLY has a sibling in make check that proves the same
# capability (see tests/qemu/README.md, "Tiers").
ALL_ONLY=(
	# harness self-tests beyond boot, agent and splat detection
	=tools =vm-stop-cont-restart =vm-dies =topology-links
	# faults: make check keeps fault-all (every region at once),
	# fault-integrity, fault-tty-integrity and fault-doorbells
	=fault-ctrl0 =fault-ctrl1 =fault-net0 =fault-net1 =fault-tty0 =fault-tty1
	=fault-hdr =fault-ctrl-bounds =fault-rmmod-scribbled =peer-cycles
	# net: the long transfers and variants (kept: peer-tcp and
	# fault-integrity carry bytes by sha256, net-mtu the frame sizes,
	# chassis-3-boards forwarding between machines)
	=net-3-vectors =net-virtio-regions =net-ping-sizes =net-tcp-256M
	=net-iperf3-udp =net-tcpdump =net-forward-3-machines =peer-bulk-256M
	# tty (kept: flow control by peer-tty-flow and tty-cooked-flow-control,
	# the console by tty-console-param)
	=tty-reader-stopped =tty-console-cmdline =tty-console-and-writes
	=tty-under-iperf3 =tty-throughput
	# virtio and vhost (kept: each device's data path, withdraw, hotplug,
	# the host VM killed, its rmmod, the reset with a request in flight,
	# scribbles, an old, a stale and a lying device side; virtio-dev-gen-flip
	# for virtio-config-storm: a generation word in a storm)
	=vhost-withdraw-in-probe =vhost-peer-cycles =vhost-host-vm-stop
	=vhost-host-unbind =vhost-wedge-heals =vhost-drain-other
	=vhost-fs-reset-held =virtio-blk-wce =virtio-fs-restart =virtio-fs-abort
	=virtio-blk-sync-kill =virtio-blk-fio =virtio-peer-cycles
	=virtio-net-reset =virtio-reset-in-flight =virtio-ctl-scribble
	=virtio-word-poke =virtio-config-storm
	# NTB (kept: ntb-tool proves the emulated device, ntb-pcinet the link,
	# carrier on the peer's death and its return, ntb-pcinet-faults the
	# heal on the NTB path; ntb-both runs ntb_netdev beside pcinet_ntb)
	=ntb-netdev =ntb-pcinet-stop =ntb-pcinet-reload =ntb-both
)
DEBUG_CASES=(
	# reload and teardown under traffic
	=net-reload-under-traffic =tty-unbind-under-traffic
	# a hostile peer (tty-bad-peer@debug, where stale bytes once looked
	# corrupt, runs in make check-all; make check runs it on Debian's)
	=net-bad-peer
	# virtio reset with a request in flight
	=virtio-reset-in-flight
)

# Every name in the lists is a case (a name that drifted would leave a case
# out of make check or of the debug kernel without a word).
tier_names() {
	local all missing
	# one interpreter for every file (a start-up each cost 2 s loaded)
	all=$(python3 - tests/qemu/test_*.py <<-'EOF'
		import runpy
		import sys
		sys.path.insert(0, 'tests/qemu')
		import pcinet_harness as h
		for f in sys.argv[1:]:
		    h.CASES.clear()
		    runpy.run_path(f, run_name='listed')
		    print('\n'.join(c.name for c in h.CASES))
	EOF
	) || return 1
	missing=$(comm -23 <(printf '%s\n' "${ALL_ONLY[@]#=}" "${DEBUG_CASES[@]#=}" | sort -u) \
		<(sort -u <<<"$all"))
	[ -z "$missing" ] && return 0
	sed 's/^/no case named /' <<<"$missing"
	return 1
}
debian_part() {
	part "QEMU cases, Debian kernel $KVER"
	if [ "$TIER" = check ] && [ -z "$TESTS" ]; then
		TESTS_EXCEPT="${ALL_ONLY[*]}" qemu_suite debian
	else
		qemu_suite debian
	fi
}

# ---- the debug lane ----------------------------------------------------------
# The debug kernel (scripts/debug-kernel.sh, built once and cached), the module
# built against it, then its cases: one lane beside the main one, from the
# moment the kernel's own packages are installed.  The first build runs at
# the lowest CPU and I/O priority, so the setup, the gates and Debian's cases
# keep the machine's time they need; its cases wait for the gates (the
# guests need what the build part makes) and then run beside Debian's, each
# lane about one core.  What it prints is shown, in one block, when the main
# lane is done.
debug_cases() {	# the patterns the lane runs
	if [ "$TIER" = check ] && [ -z "$TESTS" ]; then
		echo "${DEBUG_CASES[*]}"
	else
		echo "$TESTS"
	fi
}

debug_lane() {	# runs in a subshell: its counts go to $log/lane.counts
	local t0 t1 t2 round n=0
	passed=0 failed=0 skipped=0
	t0=$(date +%s)
	if ! nice -n 19 ionice -c 3 make -s debug-module >"$log/lane.build" 2>&1; then
		tail -n 40 "$log/lane.build"
		echo "[FAIL] debug-kernel: build failed"
		echo "0 1 0 $t0 $(date +%s) $(date +%s)" >"$log/lane.counts"
		return
	fi
	grep '^debug-kernel:' "$log/lane.build"
	t1=$(date +%s)
	# the gates are done and the host's programs built (bounded: the main
	# lane kills this one when it exits)
	while [ ! -e "$log/go" ] && [ $n -lt 7200 ]; do
		sleep 1
		n=$((n + 1))
	done
	t2=$(date +%s)
	for ((round = 1; round <= ${REPEAT:-1}; round++)); do
		[ "${REPEAT:-1}" -gt 1 ] && echo "== round $round of $REPEAT (debug kernel)"
		TESTS=$(debug_cases) qemu_suite debug
	done
	echo "$passed $failed $skipped $t0 $t1 $t2" >"$log/lane.counts"
}

debug_lane_start() {	# in its own process group: the EXIT trap kills it
	set -m
	debug_lane >"$log/lane.out" 2>&1 &
	debug_pid=$!
	set +m
}

debug_lane_join() {	# wait for the lane; print it; add its counts
	local p f s t0 t1 t2 now
	# no lane: its packages did not install, a failure counted then
	[ -n "$debug_pid" ] || return 0
	part "debug lane: the wait for it after Debian's cases"
	wait "$debug_pid"
	debug_pid=
	cat "$log/lane.out"
	if ! read -r p f s t0 t1 t2 <"$log/lane.counts" 2>/dev/null; then
		echo "[FAIL] debug lane: no result"
		failed=$((failed + 1))
		return
	fi
	now=$(date +%s)
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	parts+=("$(printf '%6d s  %s' $((t1 - t0)) "debug lane: kernel and module (from setup on, niced)")")
	parts+=("$(printf '%6d s  %s' $((now - t2)) "debug lane: its cases (beside Debian's) and the wait for them")")
}

# ---- install and build ------------------------------------------------------
part "setup (packages, kernel image and headers)"
# The debug lane starts as soon as the debug kernel's own packages are in.
want_debug() { [ "${KERNEL:-}" != debian ]; }
if want_debug; then
	if scripts/setup.sh --debug-kernel-deps >"$log/lane.setup" 2>&1; then
		debug_lane_start
	else
		cat "$log/lane.setup"
		echo "[FAIL] debug-kernel: its packages did not install"
		failed=$((failed + 1))
	fi
fi
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
if ! { make -s module && make -s fabric && make -s ntb && make -s -C tools/testing/pcinet all &&
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
host_case tier-names tier_names
touch "$log/go"	# the debug lane's guests may start

case "${KERNEL:-}" in
debian | debug | "") ;;
*)
	echo "KERNEL=$KERNEL: want debian, debug or nothing (both)"
	failed=$((failed + 1))
	KERNEL=none
	;;
esac
if [ "${KERNEL:-}" = debian ] || [ -z "${KERNEL:-}" ]; then
	rounds=${REPEAT:-1}
	for ((round = 1; round <= rounds; round++)); do
		[ "$rounds" -gt 1 ] && echo "== round $round of $rounds"
		debian_part
	done
fi
want_debug && [ "${KERNEL:-}" != none ] && debug_lane_join
part ""
echo "== where the time went (tier $TIER)"
printf '%s\n' "${parts[@]}"
echo "== the ten slowest cases"
sort -t "$(printf '\t')" -k2,2 -rn "$PCINET_TIMES" | head -n 10 |
	awk -F '\t' '{ printf "%6.0f s  %s%s\n", $2, $1, $3 == "ok" ? "" : " (" $3 ")" }'

if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] && [ $((passed + failed)) -gt 0 ]
