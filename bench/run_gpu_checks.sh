#!/usr/bin/env bash
# One sitting of GPU checks on a machine with a GPU, logs under OUT_DIR (each with its command):
#   bench/run_gpu_checks.sh OUT_DIR BUILD_DIR STEP...
# Steps (run in the order given; every step runs even when an earlier one failed):
#   tests:FILTER      ./BUILD_DIR/tests/kvtune_tests FILTER --durations yes   (e.g. "tests:[gpu][trust]")
#   tier:TIER         tests/run_gpu_tier.sh TIER (quick, exhaustive-N, wide): a case a process, side by side
#   sanitize:TOOLS:SHAPES   bench/run_sanitizers.sh over SHAPES (bench/sanitize/*.json) with TOOLS
#                     (comma-separated: memcheck, racecheck, synccheck)
#   python[:EXPR]     pip install of python/ (no network), then pytest python/tests (-k EXPR when given)
# Exit status 1 when any step failed. The build must be configured with -DKVTUNE_TEST_HOOKS=ON for
# the fault-injection tests of kvtune-tune.
set -uo pipefail
out=${1:?usage: run_gpu_checks.sh OUT_DIR BUILD_DIR STEP...}
build=${2:?usage: run_gpu_checks.sh OUT_DIR BUILD_DIR STEP...}
shift 2
# Absolute: the Python tests start interpreters of their own in other folders, which inherit
# KVTUNE_LIBRARY (a relative path failed two of them there).
build=$(cd "$build" && pwd) || exit 2
here="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "git: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>/dev/null
} > "$out/summary.txt"
status=0
n=0
for step in "$@"; do
  n=$((n + 1))
  start=$(date +%s)
  case $step in
    tests:*)
      filter=${step#tests:}
      log="$out/$n-tests.log"
      echo "command: $build/tests/kvtune_tests '$filter' --durations yes" > "$log"
      (cd "$build/tests" && ./kvtune_tests "$filter" --durations yes) >> "$log" 2>&1
      rc=$?
      result=$(grep -E "^(All tests passed|test cases:)" "$log" | tail -1) ;;
    tier:*)
      log="$out/$n-tier-${step#tier:}.log"
      echo "command: BUILD=$build tests/run_gpu_tier.sh '${step#tier:}'" > "$log"
      BUILD=$build "$here/tests/run_gpu_tier.sh" "${step#tier:}" >> "$log" 2>&1
      rc=$?
      result=$(grep -E "^gpu tier " "$log" | tail -1) ;;
    sanitize:*)
      rest=${step#sanitize:}
      tools=${rest%%:*}
      shapes=${rest#*:}
      "$here/bench/run_sanitizers.sh" "$out/$n-sanitize" "$build" "$tools" "$here/$shapes" > /dev/null 2>&1
      rc=$?
      result=$(grep -E "^(memcheck|racecheck|synccheck):" "$out/$n-sanitize/run.txt" | tr '\n' ' ') ;;
    python|python:*)
      log="$out/$n-python.log"
      select=()
      [[ $step == python:* ]] && select=(-k "${step#python:}")
      {
        echo "command: pip install --no-build-isolation --no-deps --target /tmp/kvtune-py python; pytest python/tests -q -rs ${select[*]}"
        python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/kvtune-py "$here/python" &&
          PYTHONPATH=/tmp/kvtune-py KVTUNE_LIBRARY="$build/libkvtune.so" python3 -m pytest "$here/python/tests" -q -rs "${select[@]}"
      } > "$log" 2>&1
      rc=$?
      result=$(tail -1 "$log") ;;
    *) echo "unknown step $step" >&2; rc=2; result="unknown step" ;;
  esac
  [[ $rc -ne 0 ]] && status=1
  printf '%-60s exit %d in %4d s  %s\n' "$step" "$rc" $(( $(date +%s) - start )) "$result" >> "$out/summary.txt"
done
cat "$out/summary.txt"
exit $status
