#!/bin/bash
# Run HERE on cubecl's logs (`CUBECL_DEBUG_LOG`, plain or gzipped; what
# `run-burn.sh OUT logs` or `phases` leaves):
#   bash xtask/h200/kernel-times.sh LOG...
# Prints, per log, the kernels cubecl profiled (autotune candidates and
# its throughput probes included) with their total time, count and mean,
# the largest totals first: where two builds of one program differ.
set -u
for log in "$@"; do
  echo "== $log"
  { case $log in *.gz) zcat "$log" ;; *) cat "$log" ;; esac; } |
    awk -F'|' '/^\| [0-9.]+(ms|µs|ns|s) / {
        v = $2; gsub(/ /, "", v); name = $3; gsub(/^ +| +$/, "", name)
        if (v ~ /ms$/) { sub(/ms$/, "", v); v *= 1000 }
        else if (v ~ /µs$/) { sub(/µs$/, "", v) }
        else if (v ~ /ns$/) { sub(/ns$/, "", v); v /= 1000 }
        else { sub(/s$/, "", v); v *= 1000000 }
        total[name] += v; count[name]++
      }
      END { for (k in total) printf "%12.1f us %7d x %10.2f us  %s\n", total[k], count[k], total[k] / count[k], k }' |
    sort -rn | head -"${TOP:-25}"
done
