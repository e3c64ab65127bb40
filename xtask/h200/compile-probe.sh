#!/bin/bash
# Run ON THE DEVICE (from the repo root, `.gl` and `.burn` carried; what
# `cargo xtask burn --bundle` leaves there):
#   bash xtask/h200/compile-probe.sh OUTDIR [MODULES [SECONDS]]
# Dumps the modules of a few MLP steps of burn on this server (with
# wgpu's loop counter, the default), then compiles the MODULES (default 4)
# largest under each VARIANTS (default: cubecl's own SPIR-V as the bridge
# rewrote it, naga's with no checks, without the counter, checked, cubecl's
# SPIR-V before the rewrite; see bridge/examples/compile_probe.rs), each
# compile in its own process bounded by SECONDS (default 60), NVIDIA's disk
# cache off.
# Prints and leaves in OUTDIR/compile.txt `VARIANT FILE ms` lines (a
# timed-out compile prints `VARIANT FILE timeout`).
set -u
out=$1 modules=${2:-4} seconds=${3:-60}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source xtask/h200/env.sh
mkdir -p "$out" .burn/bin /tmp/probe-dump
for f in burn-suite compile_probe; do
  [ -x .burn/bin/$f ] || { xz -d -c .burn/$f.xz > .burn/bin/$f && chmod +x .burn/bin/$f; }
done
CUBECL_BRIDGE_SPIRV_DUMP=/tmp/probe-dump timeout 200 .burn/bin/burn-suite mlp 3 > "$out/mlp.log" 2>&1
echo "dumped $(ls /tmp/probe-dump/*.wgsl | wc -l) modules at ${SECONDS}s"
export __GL_SHADER_DISK_CACHE=0
for f in $(ls -S /tmp/probe-dump/*.wgsl | head -"$modules"); do
  for v in ${VARIANTS:-spirv none noloop checked spirv-orig}; do
    timeout "$seconds" .burn/bin/compile_probe "$f" "$v" 2>/dev/null
    rc=$?; [ $rc = 124 ] && echo "$v $f timeout"; [ $rc != 0 ] && [ $rc != 124 ] && echo "$v $f error $rc"
  done
done | tee "$out/compile.txt"
