#!/bin/bash
# Nsight Compute on single instantiations inside exhaustive tunings (names matched demangled)
# usage (repository root, Release build in ./build, Nsight Compute on PATH): OUT=DIR bash bench/results/2026-11-23-h200-dwconv-wgrad-rows/ncu/ncu.sh
export KVTUNE_POLICY=tune
cat > /tmp/ncl.json <<'J'
{"problems":[{"op":"dwconv","direction":"forward","layout":"ncl","dtype":"bf16","n":8,"c":4096,"l":2048,"kernel":4,"causal":true}]}
J
cat > /tmp/w7.json <<'J'
{"problems":[{"op":"dwconv","direction":"backward_weight","layout":"nchw","dtype":"f32","n":32,"c":96,"h":56,"w":56,"kernel":7,"padding":3}]}
J
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
run() {  # tag shapes regex
  rm -f /tmp/ncu-$1.sqlite
  timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$3" --launch-skip 3 --launch-count 1 $S \
    build/tools/kvtune-tune --shapes $2 --exhaustive --cache /tmp/ncu-$1.sqlite > $OUT/ncu-$1.txt 2>&1
  echo "$1 rc=$? $(grep -c 'Section: GPU Speed Of Light' $OUT/ncu-$1.txt) profiled"
}
run ncl-bf16-rw4 /tmp/ncl.json 'kvt_dwconv_tiled<kvt_bf16, \(int\)0, \(int\)0, \(int\)1, \(int\)4, \(int\)1, \(int\)1, \(int\)1, \(int\)1, \(int\)0, \(int\)3, \(int\)4, \(int\)128, \(int\)1, \(int\)4, \(int\)0, \(int\)0, \(int\)0, \(int\)1>'
run ncl-bf16-rw8 /tmp/ncl.json 'kvt_dwconv_tiled<kvt_bf16, \(int\)0, \(int\)0, \(int\)1, \(int\)4, \(int\)1, \(int\)1, \(int\)1, \(int\)1, \(int\)0, \(int\)3, \(int\)8, \(int\)128, \(int\)1, \(int\)8, \(int\)0, \(int\)0, \(int\)0, \(int\)1>'
run wgrad7x7 /tmp/w7.json 'kvt_dwconv_wgrad<float, \(int\)0, \(int\)7, \(int\)7, \(int\)1, \(int\)1, \(int\)1, \(int\)1, \(int\)3, \(int\)3, \(int\)1, \(int\)256, \(int\)49, \(int\)0, \(int\)0, \(int\)8, \(int\)1, \(int\)4>'
