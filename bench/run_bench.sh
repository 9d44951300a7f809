#!/usr/bin/env bash
# The benchmark of docs/PERFORMANCE.md in one command, on the GPU machine. Builds nothing.
#
#   bench/run_bench.sh [BUILD_DIR] [OUT_DIR] [--quick] [--suite S1,S2,...] [--cache FILE] [--no-compile]
#
#   BUILD_DIR  an existing build folder holding tools/kvtune-bench (default ./build)
#   OUT_DIR    where everything goes (default bench/results/<UTC date>-<host>)
#   --quick    the first two problems of each suite (smoke test, about a minute)
#   --suite    suites, comma-separated (default: all); see `kvtune-bench --help`
#   --cache    kvtune cache file: tuning winners survive between runs (default: in memory, cold tuning)
#   --no-compile  skip torch.compile in the PyTorch peers
#   --outputs held|reused  held (default): every rotated set keeps its own outputs, kvtune's and the
#              peers'; reused: the tensors a call writes are one block for all sets on both sides (as
#              PyTorch's caching allocator reuses a freed output)
#
# Steps: kvtune-bench --list-suite (the shapes, one source of truth) -> bench/peers/torch_peers.py
# (PyTorch eager and torch.compile) -> kvtune-bench --peers (kvtune, heuristic, seeds, cuDNN, copy,
# merged table). Outputs: suite.json, peers.json, report.json, report.md and a log of each step.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="./build"
out=""
positional=0
suites="all"
quick=()
cache=()
no_compile=()
outputs=held
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=(--quick); shift ;;
    --suite) suites="$2"; shift 2 ;;
    --cache) cache=(--cache "$2"); shift 2 ;;
    --no-compile) no_compile=(--no-compile); shift ;;
    --outputs) outputs="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "run_bench.sh: unknown option $1" >&2; exit 2 ;;
    *)
      if [[ $positional -eq 0 ]]; then build="$1"; elif [[ $positional -eq 1 ]]; then out="$1";
      else echo "run_bench.sh: unexpected argument $1" >&2; exit 2; fi
      positional=$((positional + 1)); shift ;;
  esac
done
bench="$build/tools/kvtune-bench"
if [[ ! -x "$bench" ]]; then
  echo "run_bench.sh: $bench not found; build first: cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release && cmake --build $build --target kvtune-bench" >&2
  exit 2
fi
[[ -n "$out" ]] || out="$here/results/$(date -u +%Y-%m-%d)-$(hostname -s)"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python="${PYTHON:-python3}"

start=$(date +%s)
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname)"
  echo "command: $0 $build $out ${quick[*]} --suite $suites ${cache[*]} ${no_compile[*]} --outputs $outputs"
  echo "git: $(git -C "$here/.." rev-parse HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null || true
} > "$out/run.txt"

echo "== 1/3 suite listing" >&2
"$bench" --list-suite "$suites" "${quick[@]}" --json "$out/suite.json"

echo "== 2/3 PyTorch peers" >&2
peers=()
if "$python" "$here/peers/torch_peers.py" --suite-json "$out/suite.json" --out "$out/peers.json" \
     --outputs "$outputs" "${no_compile[@]}" 2> >(tee "$out/peers.log" >&2); then
  peers=(--peers "$out/peers.json")
else
  echo "run_bench.sh: the PyTorch peers failed (see $out/peers.log); the table will have no PyTorch columns" >&2
fi

echo "== 3/3 kvtune-bench" >&2
"$bench" --suite "$suites" --outputs "$outputs" "${quick[@]}" "${cache[@]}" "${peers[@]}" \
  --json "$out/report.json" --markdown "$out/report.md" 2> >(tee "$out/bench.log" >&2) > /dev/null

echo "total: $(( $(date +%s) - start )) s" | tee -a "$out/run.txt" >&2
cat "$out/report.md"
echo "results in $out" >&2
