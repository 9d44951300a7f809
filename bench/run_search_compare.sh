#!/usr/bin/env bash
# Budgeted vs exhaustive search over every suite, on one GPU: the second half of
# bench/run_tuner_targets.sh on its own.   bench/run_search_compare.sh OUT_DIR [BUILD_DIR]
set -uo pipefail
out=${1:?usage: run_search_compare.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
mkdir -p "$out"
suites=(--suite ids --suite large --suite narrow --suite mamba --suite s4 --suite mobilenetv2 --suite convnext)
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: bench/run_search_compare.sh $*"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null
  echo "cpu cores: $(nproc)"
} > "$out/run.txt"
for mode in exhaustive budgeted; do
  rm -f "$out/$mode.sqlite"
  flags=()
  [[ $mode == exhaustive ]] && flags=(--exhaustive)
  start=$(date +%s.%N)
  "$build/tools/kvtune-tune" "${suites[@]}" "${flags[@]}" --cache "$out/$mode.sqlite" > "$out/tune-$mode.log" 2>&1
  status=$?
  end=$(date +%s.%N)
  echo "$mode: kvtune-tune exit $status, $(python3 -c "print(round($end - $start, 1))") s" >> "$out/run.txt"
  "$build/tools/kvtune-cache" export "$out/$mode.json" --runs --cache "$out/$mode.sqlite" > /dev/null
done
python3 "$(dirname "$0")/compare_tuning.py" "$out/exhaustive.json" "$out/budgeted.json" > "$out/search.md"
cat "$out/run.txt" "$out/search.md"
