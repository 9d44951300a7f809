#!/usr/bin/env bash
# Nsight Compute on three dwconv winners of the 2026-11-25 H100 benchmark (the rows furthest from
# their floor). Usage (repository root, GPU machine): bench/results/2026-11-25-h100-ncu-dwconv/run.sh BUILD OUT
set -uo pipefail
build="$1"; out="$2"; here="$(dirname "$0")"
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
          --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats)
profile() {  # name regex shapes
  KVTUNE_CACHE="$out/cache-$1.sqlite" timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$2" --launch-count 1 \
    "${sections[@]}" "$build/tools/kvtune-tune" --shapes "$here/$3" > "$out/ncu-$1.txt" 2>&1
  echo "$1: rc=$?"
}
# NLC bf16 K=31 [16, 512, 4096]: runs of 32, 64 threads, scalar channels, taps in registers.
profile nlc-bf16-k31 'kvt_dwconv_tiled<kvt_bf16, \(int\)1, \(int\)0, \(int\)1, \(int\)31, .*\(int\)32, \(int\)64, \(int\)1, \(int\)1, \(int\)0, \(int\)0,' nlc-bf16-k31.json
# NHWC bf16 7x7 [32, 96, 56, 56]: runs of 4, 64 x 2 threads, scalar channels, 4 rows.
profile nhwc-bf16-7x7 'kvt_dwconv_tiled<kvt_bf16, \(int\)1, \(int\)0, \(int\)7, \(int\)7, .*\(int\)4, \(int\)64, \(int\)2, \(int\)1, \(int\)0, \(int\)0, \(int\)0, \(int\)4,' nhwc-bf16-7x7.json
# NCHW f32 7x7 [32, 96, 56, 56]: runs of 8 read as 4-vectors, 8 x 8 threads, 4 rows (halo exchange).
profile nchw-f32-7x7 'kvt_dwconv_tiled<float, \(int\)0, \(int\)0, \(int\)7, \(int\)7, .*\(int\)8, \(int\)8, \(int\)8, \(int\)4, \(int\)0, \(int\)0, \(int\)0, \(int\)4,' nchw-f32-7x7.json
