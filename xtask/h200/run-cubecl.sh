#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` and `.h200` carried):
#   bash .h200/run-cubecl.sh .h200/cubecl-suites OUTDIR
# The runs `cargo xtask cubecl` makes (docs/cubecl.md, "How skipped tests
# are counted"): every test, logging the tests that used the device on
# their own stream; the passes that did not, again one at a time; those
# still untouched, under the feature probe. Leaves results.txt,
# launched.txt, serial-launched.txt, probe.txt and probe-launched.txt in
# OUTDIR; count them here with
#   cargo xtask cubecl --from OUTDIR
# A test that crashes the process (lavapipe's 64-bit reverseBits does) ends
# the first run; the tests it did not report then run one per process.
set -u
bin=$1 out=$2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -f "$root/xtask/h200/env.sh" ] && source "$root/xtask/h200/env.sh"
mkdir -p "$out"
rm -f "$out/launched.txt" "$out/serial-launched.txt" "$out/probe-launched.txt"
CUBECL_BRIDGE_LAUNCH_LOG="$out/launched.txt" RUST_BACKTRACE=0 \
  timeout "${TEST_TIMEOUT:-540}" "$bin" >"$out/results.txt" 2>"$out/stderr.txt"
echo "cubecl suites: exit $?"
# A test that took the process down (a driver crash) ended the run: every
# test it did not report runs again in a process of its own, and one that
# dies there fails.
if ! grep -q '^test result:' "$out/results.txt"; then
  "$bin" --list --format terse 2>/dev/null | sed -n 's/: test$//p' >"$out/all.txt"
  sed -n 's/^test \(.*\) \.\.\. \(ok\|FAILED\|ignored.*\)$/\1/p' "$out/results.txt" >"$out/done.txt"
  grep -vxF -f "$out/done.txt" "$out/all.txt" | while read -r t; do
    CUBECL_BRIDGE_LAUNCH_LOG="$out/launched.txt" RUST_BACKTRACE=0 timeout 120 "$bin" --exact "$t" \
      >"$out/one.txt" 2>&1
    grep -q "^test $t \.\.\. " "$out/one.txt" && grep "^test $t \.\.\. " "$out/one.txt" >>"$out/results.txt" \
      || echo "test $t ... FAILED" >>"$out/results.txt"
  done
  echo "test result: (run-cubecl.sh: the rest one at a time)" >>"$out/results.txt"
fi
echo "$(grep -c ' \.\.\. ok$' "$out/results.txt") ok, $(grep -c ' \.\.\. FAILED$' "$out/results.txt") FAILED"
touch "$out/launched.txt" "$out/serial-launched.txt"
mapfile -t quiet < <(sed -n 's/^test \(.*\) \.\.\. ok$/\1/p' "$out/results.txt" | grep -vxF -f "$out/launched.txt")
# (With no name the harness would run every test: each pass needs one.)
[ "${#quiet[@]}" -gt 0 ] && CUBECL_BRIDGE_LAUNCH_LOG="$out/serial-launched.txt" CUBECL_BRIDGE_SERIAL=1 \
  RUST_BACKTRACE=0 timeout 300 "$bin" --test-threads 1 --exact "${quiet[@]}" >"$out/serial.txt" 2>&1
mapfile -t untouched < <(printf '%s\n' "${quiet[@]}" | grep -v '^$' | grep -vxF -f "$out/serial-launched.txt")
[ "${#untouched[@]}" -gt 0 ] && CUBECL_BRIDGE_LAUNCH_LOG="$out/probe-launched.txt" CUBECL_BRIDGE_PROBE=1 \
  CUBECL_BRIDGE_SERIAL=1 RUST_BACKTRACE=0 timeout 300 "$bin" --test-threads 1 --exact "${untouched[@]}" >"$out/probe.txt" 2>&1
touch "$out/probe-launched.txt"
echo "quiet passes: ${#quiet[@]}; untouched one at a time: ${#untouched[@]}; used the device under the probe: $(wc -l <"$out/probe-launched.txt")"
