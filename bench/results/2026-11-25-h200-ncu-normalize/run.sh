#!/usr/bin/env bash
# Nsight Compute of three normalize winners of the 2026-11-25 benchmark, and of torch.compile's
# kernel for 1024x128. Usage (repository root, GPU machine): bench/results/2026-11-25-h200-ncu-normalize/run.sh BUILD OUT
set -uo pipefail
build="$1"; out="$2"; here="$(dirname "$0")"
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis)
profile() {  # name regex shapes
  KVTUNE_CACHE="$out/cache-$1.sqlite" timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$2" --launch-count 1 \
    "${sections[@]}" "$build/tools/kvtune-tune" --shapes "$here/$3" > "$out/ncu-$1.txt" 2>&1
  echo "$1: rc=$?"
}
profile f16-layernorm 'kvt_normalize<kvt_f16, \(int\)128, \(int\)1, \(int\)8, \(int\)4,' f16-layernorm.json
profile bf16-rmsnorm 'kvt_normalize<kvt_bf16, \(int\)128, \(int\)4, \(int\)8, \(int\)4,' bf16-rmsnorm.json
profile f32-standardize-1024x128 'kvt_normalize<float, \(int\)32, \(int\)4, \(int\)4, \(int\)1,' f32-standardize-1024x128.json
timeout 150 ncu --clock-control none --kernel-name regex:triton_per --launch-count 1 "${sections[@]}" \
  python3 bench/peers/torch_compile_kernels.py > "$out/ncu-torch-compile-1024x128.txt" 2>&1
echo "torch-compile: rc=$?"
