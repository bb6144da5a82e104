#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# no-diagnostics.sh CMD...: run a build or a checker; fail if it fails or
# prints any compiler, sparse, checkpatch or kernel-doc diagnostic.  The
# gates of `make gates` run through this, so a warning is a failure.
set -uo pipefail
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || exit $rc
if grep -qE '(warning|error|sparse|WARNING|ERROR|CHECK):' "$out"; then
	echo "no-diagnostics: $* printed diagnostics (above)" >&2
	exit 1
fi
