#!/usr/bin/env bash
# The production tuner's targets (docs/PERFORMANCE.md, "Tuner") in one command on a GPU machine.
#
#   bench/run_tuner_targets.sh OUT_DIR [BUILD_DIR]
#
# 1. build/tests/kvtune_tuner_targets: dispatch overhead, warm start, cold tuning, 5 repeats.
# 2. kvtune-tune of every suite twice into fresh caches, exhaustive (KVTUNE_BUDGET_VARIANTS=0) and
#    with the default budget, timed; bench/compare_tuning.py compares the winners' times and the
#    tuning time spent.
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

for mode in exhaustive budgeted; do
  rm -f "$out/$mode.sqlite"
  budget=()
  [[ $mode == exhaustive ]] && budget=(env KVTUNE_BUDGET_VARIANTS=0)
  start=$(date +%s.%N)
  "${budget[@]}" "$build/tools/kvtune-tune" "${suites[@]}" --cache "$out/$mode.sqlite" > "$out/tune-$mode.log" 2>&1
  status=$?
  end=$(date +%s.%N)
  echo "$mode: kvtune-tune exit $status, $(python3 -c "print(round($end - $start, 1))") s" >> "$out/run.txt"
  "$build/tools/kvtune-cache" export "$out/$mode.json" --cache "$out/$mode.sqlite" > /dev/null
done
python3 "$(dirname "$0")/compare_tuning.py" "$out/exhaustive.json" "$out/budgeted.json" > "$out/search.md"
cat "$out/run.txt" "$out/targets.md" "$out/search.md"
