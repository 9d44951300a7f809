#!/usr/bin/env bash
# Nsight Compute on two tensor-core tiles (the forms of this folder's README).
# Usage (repository root, GPU machine): bench/results/2026-11-25-h100-tensor-core/column-pairs/ncu.sh BUILD OUT
set -uo pipefail
build="$1"; out="$2"; here="$(dirname "$0")"
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats
          --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters)
profile() {  # name regex shapes
  KVTUNE_CACHE="$out/cache-$1.sqlite" timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$2" \
    --launch-count 1 "${sections[@]}" "$build/tools/kvtune-tune" --shapes "$here/$3" --exhaustive > "$out/ncu-$1.txt" 2>&1
  echo "$1: rc=$?"
  rm -f "$out/cache-$1.sqlite"*
}
# NHWC bf16 7x7 [32, 96, 56, 56]: 32 channels, 16 rows x runs of 56, 8 warps.
profile mma-7x7 'kvt_dwconv_mma<kvt_bf16, \(int\)1, \(int\)0, \(int\)7, \(int\)7, .*\(int\)32, \(int\)16, \(int\)7, \(int\)8,' s77.json
# NHWC bf16 3x3 [32, 144, 56, 56]: 32 channels, 8 rows x 2 runs of 16, 8 warps.
profile mma-3x3 'kvt_dwconv_mma<kvt_bf16, \(int\)1, \(int\)0, \(int\)3, \(int\)3, .*\(int\)32, \(int\)8, \(int\)2, \(int\)8,' s33.json
