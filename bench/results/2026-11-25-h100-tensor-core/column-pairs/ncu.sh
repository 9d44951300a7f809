#!/usr/bin/env bash
# ncu on tensor-core tiles: $1 out dir
out=$1
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters)
prof() { KVTUNE_CACHE=/tmp/ncu-$1.sqlite timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$2" --launch-count 1 "${sections[@]}" gpubuild/tools/kvtune-tune --shapes gpubuild/$3 --exhaustive > $out/ncu-$1.txt 2>&1; echo "$1 rc=$?"; }
prof mma-7x7 'kvt_dwconv_mma<kvt_bf16, \(int\)1, \(int\)0, \(int\)7, \(int\)7, .*\(int\)32, \(int\)16, \(int\)7, \(int\)8,' s77.json
prof mma-3x3 'kvt_dwconv_mma<kvt_bf16, \(int\)1, \(int\)0, \(int\)3, \(int\)3, .*\(int\)32, \(int\)8, \(int\)2, \(int\)8,' s33.json
