#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` and `.h200/{bench,test-gpu,COMMIT}`
# carried; issue 22's device calls): the GPU tests (debug, 1 and 4 threads),
# the full bench into $OUT/report.json, then probes, each bounded by timeout.
# Few files under $OUT (only so many come back): report.json/.svg, bench.log.
source xtask/h200/env.sh
echo "commit $(cat .h200/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/logs
OUT=/tmp/logs TEST_TIMEOUT=130 bash xtask/h200/run-tests.sh .h200/test-gpu 1 1
OUT=/tmp/logs TEST_TIMEOUT=70 bash xtask/h200/run-tests.sh .h200/test-gpu 1 4
grep -h -E "FAILED|panicked" /tmp/logs/*.log | head -20
echo "== full bench at ${SECONDS}s"
timeout 300 .h200/bench --out $OUT/report.json > $OUT/bench.log 2>&1; echo "bench rc=$? at ${SECONDS}s"
grep -E "^kernel|rror|panick|wrong" $OUT/bench.log | cut -c1-90
run() { local t=$1; shift; echo "== $* at ${SECONDS}s"; timeout $t .h200/bench --filter "$@" --out /tmp/logs/$1.json > /tmp/logs/$1.log 2>&1; local rc=$?; grep -E "^(probe|kernel)|wrong|panick|rror" /tmp/logs/$1.log | cut -c1-82; echo "rc=$rc"; }
for p in probe.scan_copy probe.scan_tiles_alone probe.scan_serial_look_back_gbps probe.scan_single_pass_8_gbps probe.coop_vec_staged_prefetched probe.histogram_32_lanes_packed; do
  [ $(( 420 - SECONDS )) -lt 35 ] && break
  run 30 $p
done
echo "end at ${SECONDS}s"
