#!/usr/bin/env bash
# The Python package on a GPU machine, in one command: its tests (GPU tier included), the host
# overhead of cached calls, the packet pipeline and the training-step benchmarks; logs and
# JSON/markdown summaries under OUT_DIR.
#   usage: bench/python/run_gpu.sh [BUILD_DIR (build)] [OUT_DIR (bench-python-out)]
# PYTHON picks the interpreter (python3); the package is imported from python/ in this checkout
# (pip install --no-build-isolation --no-deps ./python installs the same code with the library).
# KVTUNE_CACHE defaults to OUT_DIR/cache.sqlite, so that the run tunes from scratch and the cache
# can be inspected afterwards (kvtune-cache --cache OUT_DIR/cache.sqlite list).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-bench-python-out}
python=${PYTHON:-python3}
mkdir -p "$out"
export KVTUNE_LIBRARY
KVTUNE_LIBRARY=$(realpath "$build/libkvtune.so")
export KVTUNE_CACHE=${KVTUNE_CACHE:-$(realpath "$out")/cache.sqlite}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee "$out/gpu.txt"
"$python" -c "import torch, kvtune; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'kvtune', kvtune.version(), kvtune.library_path())" | tee "$out/versions.txt"
status=0
"$python" -m pytest python/tests -q -rs --durations 25 -s 2>&1 | tee "$out/pytest.log" || status=$?
"$python" bench/python/host_overhead.py --json "$out/host_overhead.json" 2>&1 | tee "$out/host_overhead.md"
"$python" bench/python/packet_pipeline.py --json "$out/packet_pipeline.json" --markdown "$out/packet_pipeline.md" \
  2>&1 | tee "$out/packet_pipeline.log"
"$python" bench/python/train_step.py --json "$out/train_step.json" --markdown "$out/train_step.md" \
  2>&1 | tee "$out/train_step.log"
exit "$status"
