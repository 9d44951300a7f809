#!/usr/bin/env bash
# Runs the fuzz targets of a build made with -DKVTUNE_BUILD_FUZZERS=ON (fuzz/README.md):
#   1. replays every input under fuzz/regressions/<target>/ (each must pass);
#   2. fuzzes each target for SECONDS, seeded with fuzz/corpus/<target>/ and its dictionary.
# New corpus entries go to BUILD_DIR/fuzz-work/<target>/corpus (the checked-in corpus is only
# read); a crashing input is written to BUILD_DIR/fuzz-work/<target>/ and named at the end.
# Every target runs even when an earlier one fails; the exit status is 1 if any failed. FUZZ_JOBS
# (default 2) targets run at a time.
#
# usage: fuzz/run_fuzzers.sh BUILD_DIR [SECONDS_PER_TARGET (default 30)] [TARGET...]
set -uo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
seconds=${2:-30}
shift $(($# >= 2 ? 2 : 1))
root=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_shapes fuzz_import fuzz_keys fuzz_cache_db)

# The default 8 MiB stack, whatever the caller has: inputs that recurse too deep fail the same way
# everywhere (fuzz/regressions/*/deep-nesting-*).
ulimit -s 8192

# Every UB report is fatal (the build also says -fno-sanitize-recover), with a stack; ASan options
# are the caller's (tests/run_all.sh sets them) or these.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=1}

# What a failure report says, briefly: the error lines and the first frames in this repository's
# code (the whole report stays in the log file named with it).
brief() {
  grep -E 'FUZZ FINDING|ERROR: (Address|Leak|libFuzzer)|runtime error:|^SUMMARY:' "$1" | cut -c1-300
  grep -E "^ +#[0-9]+ .* $root/" "$1" | grep -v -e /fuzz/fuzz_support.h -e 'in fuzzer::' | head -8 |
    sed -E 's/\(anonymous namespace\)/<anon>/g
            s/^ +(#[0-9]+) 0x[0-9a-f]+ in ([^(]*)(\(.*\))?( const)? ([^ ]+:[0-9]+(:[0-9]+)?)$/  \1 \2 \5/' | cut -c1-300
}

# One target: its regressions, then its fuzzing. Prints its progress; writes its summary line to
# WORK/summary and one line per failure to WORK/failed (the caller collects them).
run_target() {
  local target=$1 exe=$build/fuzz/$1 work=$build/fuzz-work/$1
  mkdir -p "$work/corpus"
  : > "$work/failed"
  if [[ ! -x $exe ]]; then
    echo "$target: $exe is missing (build it first)" >&2
    echo "$target (not built)" >> "$work/failed"
    echo "$target  not built" > "$work/summary"
    return
  fi

  # 1. Regressions: libFuzzer runs each file given by name once and exits.
  local regressions input log
  mapfile -t regressions < <(find "$root/fuzz/regressions/$target" -type f ! -name '.*' 2>/dev/null | sort)
  if [[ ${#regressions[@]} -gt 0 ]]; then
    echo "== $target: replaying ${#regressions[@]} regression inputs"
    for input in "${regressions[@]}"; do
      log=$work/replay-$(basename "$input").log
      if ! "$exe" "$input" > "$log" 2>&1; then
        brief "$log"
        echo "$target: regression ${input#"$root"/} fails (report: $log)" >&2
        echo "$target regression ${input#"$root"/}" >> "$work/failed"
      fi
    done
  fi

  # 2. Bounded fuzzing. -timeout: an input taking 10 s is a hang, reported like a crash.
  echo "== $target: fuzzing for ${seconds} s"
  log=$work/fuzz.log
  "$exe" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
      -dict="$root/fuzz/dict/${target#fuzz_}.dict" -artifact_prefix="$work/" \
      "$work/corpus" "$root/fuzz/corpus/$target" > "$log" 2>&1
  local status=$? runs corpus artifact
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(sed -n 's/^#[0-9]*[[:space:]]*DONE .*corp: \([0-9]*\).*/\1/p' "$log" | tail -1)
  if [[ $status -ne 0 ]]; then
    brief "$log"
    artifact=$(sed -n "s/.*Test unit written to //p" "$log" | tail -1)
    echo "$target: FAILED (status $status) after ${runs:-?} executions; input: ${artifact:-none written}" >&2
    echo "$target fuzzing: ${artifact:-status $status}" >> "$work/failed"
  fi
  printf '%-12s %10s executions in %s s, corpus %s entries%s\n' "$target" "${runs:-?}" "$seconds" \
    "${corpus:-?}" "$([[ $status -ne 0 ]] && echo ', FAILED')" > "$work/summary"
}

# JOBS targets at a time (default 2: libFuzzer runs one process per target, and the fuzzing time is
# wall time, so two cores fuzz two targets in the time of one); each target's output is printed,
# whole, when its group ends.
jobs=${FUZZ_JOBS:-2}
failed=()
summary=()
for ((first = 0; first < ${#targets[@]}; first += jobs)); do
  group=("${targets[@]:first:jobs}")
  for target in "${group[@]}"; do
    mkdir -p "$build/fuzz-work/$target"
    run_target "$target" > "$build/fuzz-work/$target/run.log" 2>&1 &
  done
  wait
  for target in "${group[@]}"; do
    cat "$build/fuzz-work/$target/run.log"
    mapfile -t lines < "$build/fuzz-work/$target/failed"
    failed+=("${lines[@]}")
    summary+=("$(cat "$build/fuzz-work/$target/summary")")
  done
done

echo "== fuzzing summary"
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
