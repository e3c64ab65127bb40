#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` carried, and the binaries of
# one commit: `.h200/{bench,test-gpu,test-gpu-release,COMMIT}`, or the same
# xz-compressed as `.device/{bench,test-gpu,test-gpu-release}.xz` with
# `.device/COMMIT`, which stays under the 64 MiB a call carries): the device
# call the session of 2026-12-07 could not make, most wanted first, each
# bounded by timeout, full outputs under $OUT (8 files come back at most):
# 1. the single-pass scan test in the debug binary (BoundsChecks::Reported
#    by default) and the release one (Checked): which build fails on NVIDIA;
# 2. the GPU suite, debug, 1 and 4 threads;
# 3. while the call has time: the register matmul checked and Reported
#    (the branch-free checks' cost), the transfers (reads imported, writes
#    mapped: the defaults since fbabe7f), the collective tables (the
#    device path, the default on GPUs).
set -u
mkdir -p .h200
for f in test-gpu test-gpu-release bench; do
  if [ -e .device/$f.xz ]; then xz -d -c .device/$f.xz > .h200/$f; chmod +x .h200/$f; fi
done
[ -e .device/COMMIT ] && cp .device/COMMIT .h200/COMMIT
source xtask/h200/env.sh
echo "commit $(cat .h200/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in test-gpu test-gpu-release; do
  echo "== $b ir_kernels::single_pass"
  timeout 60 .h200/$b ir_kernels::single_pass 2>&1 | grep -E "test result|first wrong"
  timeout 120 .h200/$b scan_policies 2>&1 | grep -E "test result|Every|Unproven|Checked|Reported"
done
WGPU_SERVER_COLLECTIVE_PATH=device timeout 30 .h200/test-gpu collective::device --nocapture 2>&1 | grep -E "float products|test result"
mkdir -p /tmp/logs
OUT=/tmp/logs TEST_TIMEOUT=150 bash xtask/h200/run-tests.sh .h200/test-gpu 1 1 4 | tee $OUT/tests.txt
WGPU_SERVER_COLLECTIVE_PATH=device timeout 120 .h200/test-gpu collective model 2>&1 | grep -E "test result|FAILED" | tee -a $OUT/tests.txt
grep -h -E "FAILED|panicked" /tmp/logs/*.log | head -20
# What is left runs only while the call has time: LIMIT seconds (600, a
# call's most, unless given), each step starting only when its own bound
# still fits.
LIMIT=${LIMIT:-600}
left() { [ "$SECONDS" -lt $((LIMIT - $1)) ] || { echo "skipped past ${SECONDS}s: $2"; return 1; }; }
bench() { # NAME FILTER TIMEOUT [ENV...]
  local name=$1 filter=$2 limit=$3; shift 3
  echo "== $name at ${SECONDS}s"
  env "$@" timeout "$limit" .h200/bench --filter "$filter" --out /tmp/logs/$name.json > $OUT/$name.txt 2>&1
  grep -E "^(collective|transfer|probe|raw|kernel)" $OUT/$name.txt | cut -c1-90
}
left 300 "matmul (the cost of Reported)" && bench matmul kernel.matmul_f32 60
left 240 "transfers (reads imported, writes mapped)" && bench transfer transfer. 50
left 130 "collectives (the device path, the default)" && bench collective collective. 120
echo "end at ${SECONDS}s"
