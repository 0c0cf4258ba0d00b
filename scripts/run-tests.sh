#!/usr/bin/env bash
# Runs a tap suite, keeping its whole output in a log, and on failure prints
# every failed assertion again at the very end, with the test file it is in
# and the lines around it: whoever reads only the tail of a CI log still sees
# what failed and why.
#   scripts/run-tests.sh LOG [tap arguments...]
set -uo pipefail
log="$1"
shift
mkdir -p "$(dirname "$log")"
npx tap "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo
  echo "==== failures (full output in $log) ===="
  node "$(dirname "$0")/test-failures.mjs" "$log"
fi
exit "$status"
