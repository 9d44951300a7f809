#!/usr/bin/env bash
# Nsight Compute on the staged channel-last heuristics of the two 7x7 NHWC benchmark rows.
# Usage (repository root, GPU machine): bench/results/2026-11-25-h100-staged-channel-last/ncu.sh BUILD OUT
set -uo pipefail
build="$1"; out="$2"; here="$(dirname "$0")"
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
          --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats)
profile() {  # name regex shapes
  KVTUNE_CACHE="$out/cache-$1.sqlite" timeout 120 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$2" --launch-count 1 \
    "${sections[@]}" "$build/tools/kvtune-tune" --shapes "$here/$3" > "$out/ncu-$1.txt" 2>&1
  echo "$1: rc=$?"
  rm -f "$out/cache-$1.sqlite"*
}
# NHWC bf16 7x7 [32, 96, 56, 56]: 32 channels x 2 runs of 4 x 4 rows, 4 tiles a block.
profile nhwc-bf16-7x7 'kvt_dwconv_tiled<kvt_bf16, \(int\)1, \(int\)0, \(int\)7, \(int\)7, .*\(int\)4, \(int\)32, \(int\)2, \(int\)1, \(int\)1, \(int\)0, \(int\)0, \(int\)4, \(int\)4,' nhwc-bf16-7x7.json
# NHWC f32 7x7 [32, 384, 14, 14]: 32 channels x 4 runs of 4 x 4 rows, 4 tiles a block.
profile nhwc-f32-7x7-14 'kvt_dwconv_tiled<float, \(int\)1, \(int\)0, \(int\)7, \(int\)7, .*\(int\)4, \(int\)32, \(int\)4, \(int\)1, \(int\)1, \(int\)0, \(int\)0, \(int\)4, \(int\)4,' nhwc-f32-7x7-14.json
