#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# pcinet-vhost's config file and SIGHUP, on the host alone: pcinet-vhost
# runs for a link that does not exist here (pcinet99: it waits for
# /dev/pcinet-vhost99, loads no module), so only its device set and its
# back ends (qemu-storage-daemon, virtiofsd, started before any link) are
# seen: a bad file ends the start, a reload adds and removes back ends,
# leaves the listed ones and the command line's alone, skips bad lines,
# keeps everything when the file is gone, and stops at 8 devices.
#
# Usage: test-config.sh
# Prints "ok - ..." or "FAIL - ..." per case and "N passed, N failed".

set -u
cd "$(dirname "$0")" || exit 1

QSD=${QSD:-qemu-storage-daemon}
VIRTIOFSD=${VIRTIOFSD:-/usr/lib/qemu/virtiofsd}
pass=0
fail=0
pid=

ok()   { echo "ok - $*"; pass=$((pass + 1)); }
nok()  { echo "FAIL - $*"; fail=$((fail + 1)); }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

if ! command -v "$QSD" >/dev/null || [ ! -x "$VIRTIOFSD" ]; then
	echo "SKIP - $QSD or $VIRTIOFSD not installed"
	exit 0
fi
[ -x ./pcinet-vhost ] || { echo "FAIL - pcinet-vhost not built"; exit 1; }

dir=$(mktemp -d /tmp/pv-config.XXXXXX)
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT
for i in 0 1 2 3 4 5 6 7 8; do truncate -s 1M "$dir/d$i.img"; done
mkdir "$dir/share"
cfg=$dir/pcinet-vhost.conf
log=$dir/log

# the back ends running for pcinet-vhost: "kind path" a line, sorted (a
# disk's back end names the image it inherited, /proc/self/fd/N: its path
# is that descriptor's, read in the back end's /proc)
backends() {
	local c l
	for c in $(pgrep -P "$pid"); do
		{ tr '\0' ' ' </proc/"$c"/cmdline; echo; } |
			sed -n -e 's/.*filename=\([^,]*\),.*/blk \1/p' \
			       -e 's/.*-o source=\([^ ]*\) .*/fs \1/p' |
			while read -r k l; do
				case $l in
				/proc/self/fd/*) l=$(readlink "/proc/$c/fd/${l##*/}") ;;
				esac
				echo "$k $l"
			done
	done | sort
}

# SIGHUP, then the log line of the reload
reload() {
	local n
	n=$(grep -c ' read: ' "$log")
	kill -HUP "$pid"
	for _ in $(seq 100); do
		[ "$(grep -c ' read: ' "$log")" -gt "$n" ] && break
		sleep 0.05
	done
	sleep 0.5	# a new back end's start
}

want() {
	local got exp
	got=$(backends)
	exp=$(printf "%s\n" "$@" | sort)
	[ "$got" = "$exp" ] && return 0
	echo "# running: $got" | tr "\n" " "; echo
	echo "# wanted: $exp" | tr "\n" " "; echo
	return 1
}

# a bad line at the start: exit 1, the line named
printf 'blk %s/d0.img\nblk relative.img\n' "$dir" >"$cfg"
./pcinet-vhost --link pcinet99 --config "$cfg" >"$log" 2>&1
rc=$?
check "a bad line at the start: exit 1 ($rc), line 2 named" \
	test $rc -eq 1 -a -n "$(grep ':2: skipped' "$log")"

printf '# two\nblk %s/d0.img   # first\nfs %s/share share\n' "$dir" "$dir" \
	>"$cfg"
./pcinet-vhost --link pcinet99 --blk "$dir/d8.img" --config "$cfg" \
	>"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ "$(backends | wc -l)" -eq 3 ] && break; sleep 0.05; done
check "start: the command line's disk and the file's disk and folder" \
	want "blk $dir/d8.img" "blk $dir/d0.img" "fs $dir/share"
before=$(pgrep -P "$pid" | sort)

printf 'fs %s/share share\nblk %s/d0.img\nblk %s/d1.img\n' \
	"$dir" "$dir" "$dir" >"$cfg"
reload
check "reload: a disk added" \
	want "blk $dir/d8.img" "blk $dir/d0.img" "blk $dir/d1.img" "fs $dir/share"
check "reload: the listed back ends are the same processes" \
	test -z "$(comm -23 <(echo "$before") <(pgrep -P "$pid" | sort))"

printf 'blk %s/d1.img\nbogus\nfs %s/share\nblk %s/d1.img\nblk %s/d8.img\n' \
	"$dir" "$dir" "$dir" "$dir" >"$cfg"
reload
check "reload: removed, bad lines skipped, the command line's disk kept" \
	want "blk $dir/d8.img" "blk $dir/d1.img"
# bogus, fs without a tag, d1 twice, d8 of the command line
check "reload: 4 lines reported skipped" \
	test -n "$(grep 'read: 2 devices now, 4 lines skipped' "$log")"
check "reload: pcinet-vhost still runs" kill -0 "$pid"

mv "$cfg" "$cfg.away"
reload
check "reload without the file: nothing changes" \
	want "blk $dir/d8.img" "blk $dir/d1.img"
mv "$cfg.away" "$cfg"

for i in 0 1 2 3 4 5 6 7; do echo "blk $dir/d$i.img"; done >"$cfg"
reload
check "reload: at most 8 devices, the 8th line of the file skipped" \
	test "$(backends | wc -l)" -eq 8 -a -n "$(grep 'd7.img skipped: every slot taken' "$log")"

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "SIGTERM: exit 0 ($rc)" test $rc -eq 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
