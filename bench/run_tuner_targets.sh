#!/usr/bin/env bash
# The production tuner's targets (docs/PERFORMANCE.md, "Tuner") in one command on a GPU machine.
#
#   bench/run_tuner_targets.sh OUT_DIR [BUILD_DIR]
#
# 1. build/tests/kvtune_tuner_targets: dispatch overhead, warm start, cold tuning, 5 repeats.
# 2. bench/run_search_compare.sh: kvtune-tune of every suite twice into fresh caches, exhaustive
#    and with the default budget, timed; bench/compare_tuning.py compares the winners' times and
#    the tuning time spent.
set -uo pipefail
out=${1:?usage: run_tuner_targets.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
mkdir -p "$out"
suites=(--suite ids --suite large --suite narrow --suite mamba --suite s4 --suite mobilenetv2 --suite convnext)
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: bench/run_tuner_targets.sh $*"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null
  echo "cpu cores: $(nproc)"
} > "$out/run.txt"

"$build/tests/kvtune_tuner_targets" "$out/targets.json" > "$out/targets.md" 2> "$out/targets.log"
echo "kvtune_tuner_targets: exit $?" >> "$out/run.txt"

"$(dirname "$0")/run_search_compare.sh" "$out/search" "$build" > /dev/null
cat "$out/run.txt" "$out/targets.md" "$out/search/run.txt" "$out/search/search.md"
