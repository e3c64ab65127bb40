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
# 3. transfers with imported host memory and with mapped staging (A/B);
# 4. collectives on the device path and host-staged, full tables, and the
#    one-context probe (both ranks on one device).
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
for m in imported mapped; do
  echo "== transfers, $m, at ${SECONDS}s"
  WGPU_SERVER_HOST_MEMORY=$m timeout 120 .h200/bench --filter transfer. --out /tmp/logs/transfer-$m.json > $OUT/transfer-$m.txt 2>&1
  grep -E "^transfer" $OUT/transfer-$m.txt | cut -c1-70
done
for p in device host; do
  echo "== collectives, $p path, at ${SECONDS}s"
  WGPU_SERVER_COLLECTIVE_PATH=$p timeout 200 .h200/bench --filter collective. --out /tmp/logs/collective-$p.json > $OUT/collective-$p.txt 2>&1
  grep -E "^collective" $OUT/collective-$p.txt | cut -c1-80
done
echo "== one-context probe at ${SECONDS}s"
timeout 200 .h200/bench --filter probe.one_context --out /tmp/logs/one-context.json > $OUT/one-context.txt 2>&1
grep -E "^probe" $OUT/one-context.txt | cut -c1-80
echo "end at ${SECONDS}s"
