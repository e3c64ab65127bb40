#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` and `.h200` carried):
#   bash .h200/run-cubecl.sh .h200/cubecl-suites OUTDIR
# The same two runs `cargo xtask cubecl` makes: every test, noting which
# launched a kernel; then, under the feature probe, the tests that passed
# launching nothing. Leaves results.txt, launched.txt, probe.txt and
# probe-launched.txt in OUTDIR; count them here with
#   cargo xtask cubecl --from OUTDIR
set -u
bin=$1 out=$2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -f "$root/xtask/h200/env.sh" ] && source "$root/xtask/h200/env.sh"
mkdir -p "$out"
rm -f "$out/launched.txt" "$out/probe-launched.txt"
CUBECL_BRIDGE_LAUNCH_LOG="$out/launched.txt" RUST_BACKTRACE=0 \
  timeout "${TEST_TIMEOUT:-540}" "$bin" >"$out/results.txt" 2>"$out/stderr.txt"
echo "cubecl suites: exit $?; $(grep -c ' \.\.\. ok$' "$out/results.txt") ok, $(grep -c ' \.\.\. FAILED$' "$out/results.txt") FAILED"
touch "$out/launched.txt"
mapfile -t quiet < <(sed -n 's/^test \(.*\) \.\.\. ok$/\1/p' "$out/results.txt" | grep -vxF -f "$out/launched.txt")
CUBECL_BRIDGE_LAUNCH_LOG="$out/probe-launched.txt" CUBECL_BRIDGE_PROBE=1 RUST_BACKTRACE=0 \
  timeout 300 "$bin" --exact "${quiet[@]}" >"$out/probe.txt" 2>&1
echo "probe: ${#quiet[@]} quiet passes, $(wc -l <"$out/probe-launched.txt" 2>/dev/null || echo 0) launched under the probe"
