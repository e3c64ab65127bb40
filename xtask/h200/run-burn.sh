#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` and `.burn` carried; what
# `cargo xtask burn --bundle` leaves in `.burn`: release builds of
# burn-suite, this server, and burn-upstream, published cubecl-wgpu):
#   bash xtask/h200/run-burn.sh OUTDIR [bench|suite|programs]...
# Steps: bench, suite, programs, phases (the training step's parts, with
# cubecl's autotune and profiling logs), logs (the bench under cubecl's
# logs: ours, ours with plane operations, upstream). Leaves in OUTDIR: bench-ours.txt / bench-upstream.txt (`burn.*`
# figures, both builds in this one call), ours.txt / upstream.txt (the
# suite's records; compare them here with `cargo xtask burn --from
# OUTDIR`), and the programs' outputs (*.log).
set -u
out=$1; shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source xtask/h200/env.sh
mkdir -p "$out" .burn/bin
for f in burn-suite burn-upstream; do
  [ -x .burn/bin/$f ] || { xz -d -c .burn/$f.xz > .burn/bin/$f && chmod +x .burn/bin/$f; }
done
echo "burn commit $(cat .burn/COMMIT)"; cp .burn/COMMIT "$out/commit.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
export RUST_BACKTRACE=0
# One build's suite to the end: a case whose process dies or hangs is
# recorded as an error and a new process goes on after it (what
# `cargo xtask burn` does on this machine).
suite() {
  local exe=.burn/bin/$1 file=$out/$2
  $exe list > "$out/$1.keys"; rm -f "$file"
  for _ in $(seq 50); do
    BURN_SUITE_CASE_SECONDS=60 timeout 1500 $exe suite "$file" > /dev/null 2>> "$out/$1-suite.err"
    local rc=$? lost
    lost=$( (cut -f1,2 "$file" 2>/dev/null | tr '\t' / ) | grep -vxFf - "$out/$1.keys" | head -1)
    [ -z "$lost" ] && break
    [ $rc = 0 ] && { echo "$1 ended without $lost"; break; }
    echo "$1: the process ended (rc $rc) in $lost"
    printf '%s\t%s\texact\tERROR the process ended (exit %s) in this case\n' "${lost%%/*}" "${lost#*/}" "$rc" >> "$file"
  done
  echo "$1 suite: $(wc -l < "$file") records at ${SECONDS}s"
}
for what in "$@"; do
  case $what in
    bench)
      for b in burn-suite:ours burn-upstream:upstream; do
        timeout 280 .burn/bin/${b%%:*} bench 3 10 > "$out/bench-${b#*:}.txt" 2> "$out/bench-${b#*:}.err"
        echo "bench ${b#*:} rc=$? at ${SECONDS}s"; cat "$out/bench-${b#*:}.txt"
      done ;;
    suite)
      # Both at once: separate processes on one GPU, as on the CI machine.
      suite burn-suite ours.txt & suite burn-upstream upstream.txt & wait ;;
    phases)
      # The encoder's training step split into forward, backward and the
      # update, with cubecl's own logs (autotune choices, kernel times).
      for b in burn-suite:ours burn-upstream:upstream; do
        CUBECL_DEBUG_LOG="$out/cubecl-${b#*:}.log" timeout 200 .burn/bin/${b%%:*} phases full \
          > "$out/phases-${b#*:}.txt" 2>&1
        echo "phases ${b#*:} rc=$?: $(grep '^transformer' "$out/phases-${b#*:}.txt")"
      done ;;
    logs)
      # cubecl's logs of the bench (autotune choices, every kernel's time):
      # ours, ours with plane operations claimed, upstream. Compare them
      # here with `bash xtask/h200/kernel-times.sh OUT/cubecl-*.log.gz`.
      # LOGS names the runs (default all three: ours ours-planes upstream).
      for b in ${LOGS:-ours ours-planes upstream}; do
        case $b in upstream) b=burn-upstream:$b ;; *) b=burn-suite:$b ;; esac
        planes=off; [ "${b#*:}" = ours-planes ] && planes=on
        CUBECL_BRIDGE_PLANES=$planes CUBECL_DEBUG_LOG="$out/cubecl-${b#*:}.log" timeout 150 \
          .burn/bin/${b%%:*} bench 3 10 > "$out/logs-${b#*:}.txt" 2>&1
        echo "logs ${b#*:} rc=$? at ${SECONDS}s"; gzip -f "$out/cubecl-${b#*:}.log"
      done ;;
    programs)
      for b in burn-suite burn-upstream; do
        timeout 120 .burn/bin/$b mlp 200 > "$out/$b-mlp.log" 2>&1; echo "$b mlp rc=$?"
        timeout 120 .burn/bin/$b transformer full > "$out/$b-transformer.log" 2>&1; echo "$b transformer rc=$?"
        grep -E '^forward|^step (before|after)' "$out/$b-transformer.log"
      done
      timeout 200 .burn/bin/burn-suite data-parallel 3 20 > "$out/data-parallel.log" 2>&1
      echo "data-parallel rc=$?"; grep -E '^ranks|^one device' "$out/data-parallel.log" ;;
  esac
done
echo "end at ${SECONDS}s"
