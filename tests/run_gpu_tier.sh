#!/usr/bin/env bash
# The GPU test tiers (README.md, "On a GPU machine"), one process per test case of the release
# build's kvtune_tests:
#   quick          '[gpu]': every behaviour, a sample of each variant space
#   exhaustive-N   '[exhaustive-N]' (N = 1..9): every variant of the sweep shapes, in parts
#   wide           '[gpu-exhaustive][wide]': every split-row variant
#   '<tags>'       any other Catch2 test spec
# Most of a case's time is spent on the host (NVRTC, the float64 references, the verification),
# which one process leaves mostly idle on a many-core host, so JOBS cases (default: a third of the
# cores, 2 to 6) run side by side; the cases tagged [exclusive] (they time kernels, fill the GPU's
# memory, make kernels hang or start processes of their own) then run one at a time, alone.
# Each case has a cache file of its own (KVTUNE_CACHE, under BUILD/gpu-tier-logs/), so that cases
# side by side never see each other's winners. Cases start longest first, by the durations of the last run (BUILD/gpu-tier-times.tsv).
# Ends with every case's time, the failing cases' logs, and the counts of run, passed, failed and
# skipped cases (a case skips where there is no GPU). Exit status: 0 when no case failed.
#
# usage: tests/run_gpu_tier.sh TIER [JOBS]      (BUILD=build: the build folder)
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 ]]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
case $1 in
  quick) spec='[gpu]' ;;
  exhaustive-[0-9]*) spec="[$1]" ;;
  wide) spec='[gpu-exhaustive][wide]' ;;
  *) spec=$1 ;;
esac
cores=$(nproc)
jobs=${2:-$((cores / 3 < 2 ? 2 : (cores / 3 > 6 ? 6 : cores / 3)))}
build=${BUILD:-build}
exe=$build/tests/kvtune_tests
[[ -x $exe ]] || { echo "$exe is missing: build the release configuration first (README.md)" >&2; exit 2; }
logs=$build/gpu-tier-logs
rm -rf "$logs"
mkdir -p "$logs"
times=$build/gpu-tier-times.tsv
# Before a build's first run, the times recorded with the repository (an H100 run; README.md).
order=$times
[[ -f $order ]] || order=tests/data/gpu-tier-times.tsv

# The cases of SPEC (one name a line), longest first by the last run's times.
list_cases() {
  "$exe" --list-test-names-only "$1" | grep -v '^variant sample: ' | grep . |
    awk -F'\t' -v order="$order" '
      BEGIN { while ((getline line < order) > 0) { split(line, f, "\t"); t[f[3]] = f[1] } }
      { printf "%012.3f\t%s\n", ($0 in t) ? t[$0] : 9999, $0 }' | sort -r | cut -f2-
}

# Seconds since START (date +%s.%N).
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }

# One case in its own process; its log is LOGS/<index>.log, its line in LOGS/results.tsv:
# seconds, status (passed, failed, skipped), name.
run_case() {  # INDEX NAME
  local name=$2 escaped log=$logs/$1.log start status line
  escaped=$(sed 's/[],[]/\\&/g' <<< "$name")  # Catch2 reads , [ ] in a name as syntax
  start=$(date +%s.%N)
  KVTUNE_CACHE=$logs/$1.cache.sqlite "$exe" "$escaped" --durations yes > "$log" 2>&1
  line=$(grep -E '^kvtune_tests: 1 test cases: ' "$log" | tail -1)
  if [[ $line == *' 1 passed,'* ]]; then status=passed
  elif [[ $line == *' 1 skipped'* ]]; then status=skipped
  else status=failed; printf '%s\n' "$name" > "$logs/$1.failed"
  fi
  printf '%s\t%s\t%s\n' "$(since "$start")" "$status" "$name" >> "$logs/results.tsv"
  printf 'done %8.1f s  %-7s %s\n' "$(since "$start")" "$status" "$name"  # progress, should a time limit stop the run
}

started=$(date +%s.%N)
declare -A exclusive=()
while IFS= read -r name; do exclusive[$name]=1; done < <(list_cases '[exclusive]')
shared=() alone=()
while IFS= read -r name; do
  if [[ -n ${exclusive[$name]:-} ]]; then alone+=("$name"); else shared+=("$name"); fi
done < <(list_cases "$spec")
echo "gpu tier '$spec': ${#shared[@]} cases $jobs at a time, then ${#alone[@]} [exclusive] cases alone"
index=0
for name in "${shared[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
  run_case "$index" "$name" &
  index=$((index + 1))
done
wait
for name in "${alone[@]}"; do
  run_case "$index" "$name"
  index=$((index + 1))
done
wall=$(since "$started")

touch "$logs/results.tsv"
for marker in "$logs"/*.failed; do  # failing cases' logs, whole (LOGS/<index>.failed names the case)
  [[ -e $marker ]] || continue
  echo "==== FAILED: $(cat "$marker") (${marker%.failed}.log)"
  cat "${marker%.failed}.log"
done
echo "==== case times (s)"
sort -rn "$logs/results.tsv" | awk -F'\t' '{printf "%8.1f  %-7s %s\n", $1, $2, $3}'
# The next run starts the longest cases first: these times, with those of cases this run left out.
cat "$logs/results.tsv" $([[ -f $times ]] && echo "$times") | awk -F'\t' '!seen[$3]++' > "$times.new" &&
  mv "$times.new" "$times"
passed=$(grep -c $'\tpassed\t' "$logs/results.tsv")
failed=$(grep -c $'\tfailed\t' "$logs/results.tsv")
skipped=$(grep -c $'\tskipped\t' "$logs/results.tsv")
printf "gpu tier '%s': %d cases: %d passed, %d failed, %d skipped; %.1f s wall, %d at a time\n" \
  "$spec" "$index" "$passed" "$failed" "$skipped" "$wall" "$jobs"
[[ $failed -eq 0 && $((passed + failed + skipped)) -eq $index ]]
