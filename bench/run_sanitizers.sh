#!/usr/bin/env bash
# compute-sanitizer over every tuned variant of odd-sized problems of both families
# (bench/sanitize/odd-shapes.json): memcheck over all of them, racecheck over the same run (the
# shared-memory variants are among them: keep=smem, halo=smem, filter=smem, split reductions).
# Each variant is verified against the float64 reference and timed once (--samples 1).
#
#   bench/run_sanitizers.sh OUT_DIR [BUILD_DIR] [TOOLS (default: memcheck,racecheck)] [SHAPES]
#
# SHAPES defaults to bench/sanitize/odd-shapes.json (11 problems, 478 variants);
# bench/sanitize/sweep-shapes.json (bench/sanitize/make_shapes.py: 126 problems, 6,324 variants:
# every dtype x mode x optional tensor of normalize, every direction x layout of dwconv) is the
# memcheck sweep; bench/sanitize/changed-shapes.json (make_changed_shapes.py: 77 distinct problems, 5,112
# variants) covers the kernels added after it (residual add, normalize backward, split rows, fused
# activations, seq_idx, states, decode); bench/sanitize/split-phases-shapes.json (3 problems) the
# split-row forward as one kernel per phase (2026-11-29: per-warp statistics, the output phase's row
# loop, evict-first x and y). On an H200 (2026-11-29) memcheck took 487 s over it and
# racecheck 18-60 s a normalize-backward problem (three tools sharing the GPU): give each tool its own call, over sub-lists when
# a call has a time limit. Run the tools one at a time: run as three processes side by side, one
# synccheck process stopped once on an illegal address that five reruns did not reproduce
# (bench/results/2026-11-29-h200-sanitize-changed/).
set -uo pipefail
out=${1:?usage: run_sanitizers.sh OUT_DIR [BUILD_DIR] [TOOLS]}
build=${2:-build}
tools=${3:-memcheck,racecheck}
here="$(cd "$(dirname "$0")" && pwd)"
shapes=${4:-$here/sanitize/odd-shapes.json}
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
mkdir -p "$out"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: bench/run_sanitizers.sh $*"
  echo "shapes: $shapes"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  "$sanitizer" --version | tail -1
} > "$out/run.txt"
status=0
for tool in ${tools//,/ }; do
  rm -f "$out/$tool.sqlite"
  start=$(date +%s)
  KVTUNE_BUDGET_VARIANTS=0 "$sanitizer" --tool "$tool" --error-exitcode 9 --print-limit 50 \
    "$build/tools/kvtune-tune" --shapes "$shapes" --exhaustive --samples 1 \
    --cache "$out/$tool.sqlite" > "$out/$tool.log" 2>&1
  rc=$?
  echo "$tool: exit $rc in $(( $(date +%s) - start )) s; $(grep -c 'variants' "$out/$tool.log") problem lines; \
$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' "$out/$tool.log" | tail -1)" >> "$out/run.txt"
  [[ $rc -ne 0 ]] && status=1
done
cat "$out/run.txt"
exit $status
