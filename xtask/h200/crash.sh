#!/bin/bash
# Hunt the start-up SIGSEGV of the test binary on 4 threads: loop the first
# tests with core dumps on; on a crash, print every thread's stack from the
# core (no debugger attached while it runs, so the timing is the real one).
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"; source xtask/h200/env.sh
bin="$root/${BIN:-.h200/test-gpu-release}"
echo "core_pattern: $(cat /proc/sys/kernel/core_pattern)"
which gdb cuda-gdb
ulimit -c unlimited
mkdir -p /tmp/cores; cd /tmp/cores; rm -f core*
for i in $(seq 1 ${RUNS:-100}); do
  timeout 60 "$bin" --test-threads 4 ${FILTER:-bad_input::} > run.log 2>&1; rc=$?
  if [ $rc -ne 0 ]; then
    echo "run $i: exit $rc"; tail -5 run.log; ls -la /tmp/cores
    core=$(ls -t /tmp/cores/core* 2>/dev/null | head -1)
    [ -z "$core" ] && core=$(ls -t /tmp/core* "$root"/core* 2>/dev/null | head -1)
    if [ -n "$core" ]; then
      g=$(which gdb || which cuda-gdb)
      $g -q -batch -ex 'set pagination off' -ex 'info threads' -ex 'info sharedlibrary' -ex 'thread apply all bt 40' "$bin" "$core" > $OUT/bt.txt 2>&1
      echo "backtrace: $(wc -l < $OUT/bt.txt) lines"
    fi
    cp run.log $OUT/crash-run.log
    [ $rc -eq 139 ] || [ $rc -eq 134 ] && break
  fi
done
echo "loop ended at run $i"
