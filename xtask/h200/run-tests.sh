#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` and the test binaries carried):
#   bash xtask/h200/run-tests.sh BINARY RUNS THREADS...
# runs the GPU test binary RUNS times per thread count, each run bounded by
# TEST_TIMEOUT seconds (default 280), and prints every `test result:` line
# with the command that printed it. Full logs go to $OUT when it is set.
set -u
bin=$1 runs=$2
shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
source xtask/h200/env.sh
for threads in "$@"; do
  for run in $(seq 1 "$runs"); do
    log="${OUT:-/tmp}/$(basename "$bin")-t$threads-$run.log"
    start=$(date +%s)
    timeout "${TEST_TIMEOUT:-280}" "$bin" --test-threads "$threads" >"$log" 2>&1
    rc=$?
    echo "\$ $bin --test-threads $threads   # run $run: exit $rc in $(( $(date +%s) - start )) s"
    grep "test result:" "$log" || { echo "no test result (exit $rc)"; tail -5 "$log"; }
  done
done
