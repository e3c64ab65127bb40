#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` and the test binaries carried):
#   bash xtask/h200/validate.sh
# The GPU suite's record for docs/bench/h200-tests.txt: every build and
# thread count, three runs each, one after another (nothing else running).
cd "$(dirname "$0")/../.."
echo "commit $(cat .h200/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export TEST_TIMEOUT=${TEST_TIMEOUT:-200}
bash xtask/h200/run-tests.sh .h200/test-gpu "${RUNS:-3}" 1 4
bash xtask/h200/run-tests.sh .h200/test-gpu-release "${RUNS:-3}" 1 4
