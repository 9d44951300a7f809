#!/usr/bin/env bash
# Exhaustive tuning of the built-in suites into one cache, then an export with every trial: the
# data the budgeted search's cost model is checked against (bench/NOTES.md, "cost model").
#
#   bench/run_exhaustive.sh OUT_DIR [BUILD_DIR] [SUITES (comma-separated, default: all)]
set -uo pipefail
out=${1:?usage: run_exhaustive.sh OUT_DIR [BUILD_DIR] [SUITES]}
build=${2:-build}
suites=${3:-ids,large,narrow,mamba,s4,mobilenetv2,convnext}
mkdir -p "$out"
cache="$out/cache.sqlite"
args=()
for s in ${suites//,/ }; do args+=(--suite "$s"); done
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: bench/run_exhaustive.sh $*"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null
} > "$out/run.txt"
start=$(date +%s)
KVTUNE_POLICY=tune timeout 470 "$build/tools/kvtune-tune" "${args[@]}" --cache "$cache" 2>&1 | tee "$out/tune.log"
"$build/tools/kvtune-cache" export "$out/export.json" --cache "$cache"
echo "total: $(( $(date +%s) - start )) s" >> "$out/run.txt"
