#!/usr/bin/env bash
# Cold tuning of every kvtune-tune suite on an empty cache, and where each problem's time went
# (issue 28's target: median <= 1 s, every problem <= 3 s), in one command on a GPU machine:
#
#   bench/run_cold_tuning.sh OUT_DIR [BUILD_DIR] [kvtune-tune options...]
#
# Writes OUT_DIR/run.txt (date, commit, GPU, cores), cold-tune.log (kvtune-tune's output),
# cold-split.md (bench/cold_split.py: a row a problem, then the median, the maximum and the
# problems over 3 s) and cold-export.json (kvtune-cache export --runs; about 1 MB: keep it out
# of bench/results). The cache is a new file in a private temporary folder, removed at the end.
set -uo pipefail
out=${1:?usage: run_cold_tuning.sh OUT_DIR [BUILD_DIR] [kvtune-tune options...]}
build=${2:-build}
shift $(( $# >= 2 ? 2 : 1 ))
here="$(cd "$(dirname "$0")/.." && pwd)"
suites=ids,large,narrow,backward,wide,residual,mobilenetv2,convnext,mamba,s4,large31,mamba-inference,mamba-states
mkdir -p "$out"
dir=$(mktemp -d) || exit 1
chmod 700 "$dir"  # the cache refuses folders others can write to
trap 'rm -rf "$dir"' EXIT
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "command: bench/run_cold_tuning.sh $out $build $*"
  echo "git: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null
  echo "cpu cores: $(nproc)"
} > "$out/run.txt"
start=$(date +%s)
"$build/tools/kvtune-tune" --suite "$suites" --cache "$dir/cold.sqlite" "$@" > "$out/cold-tune.log" 2>&1
echo "kvtune-tune: exit $?, $(( $(date +%s) - start )) s" >> "$out/run.txt"
"$build/tools/kvtune-cache" --cache "$dir/cold.sqlite" export --runs "$out/cold-export.json" >> "$out/cold-tune.log" 2>&1 &&
  python3 "$here/bench/cold_split.py" "$out/cold-export.json" > "$out/cold-split.md"
status=$?
cat "$out/run.txt"
tail -n 12 "$out/cold-split.md" 2>/dev/null
exit $status
