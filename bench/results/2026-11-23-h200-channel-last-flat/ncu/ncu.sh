#!/bin/bash
# Nsight Compute on the NHWC bf16 7x7 forward winner (32x96x56x56) inside an exhaustive tuning
# usage (repository root, Release build in ./build, Nsight Compute on PATH): OUT=DIR bash bench/results/2026-11-23-h200-channel-last-flat/ncu/ncu.sh
export KVTUNE_POLICY=tune
command -v ncu > /dev/null || export PATH=$PATH:/usr/local/cuda/bin
cat > /tmp/nhwc7.json <<'J'
{"problems":[{"op":"dwconv","direction":"forward","layout":"nhwc","dtype":"bf16","n":32,"c":96,"h":56,"w":56,"kernel":[7,7],"padding":[3,3,3,3]}]}
J
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis"
run() {  # tag shapes regex
  rm -f /tmp/ncu-$1.sqlite
  timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$3" --launch-skip 3 --launch-count 1 $S \
    build/tools/kvtune-tune --shapes $2 --exhaustive --cache /tmp/ncu-$1.sqlite > $OUT/ncu-$1.txt 2>&1
  echo "$1 rc=$? $(grep -c 'Section: GPU Speed Of Light' $OUT/ncu-$1.txt) profiled"
}
P='kvt_dwconv_tiled<kvt_bf16, \(int\)1, \(int\)0, \(int\)7, \(int\)7, \(int\)1, \(int\)1, \(int\)1, \(int\)1, \(int\)3, \(int\)3'
run nhwc7-rw4-vc1 /tmp/nhwc7.json "$P"', \(int\)4, \(int\)64, \(int\)2, \(int\)1, \(int\)0, \(int\)0, \(int\)0, \(int\)4>'
run nhwc7-rw4-vc4-smem /tmp/nhwc7.json "$P"', \(int\)4, \(int\)128, \(int\)2, \(int\)4, \(int\)0, \(int\)1, \(int\)0, \(int\)4>'
