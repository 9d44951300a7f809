#!/usr/bin/env bash
# Every test CI runs, in order (README.md, "Run the tests"); stops at the first failing stage.
#   release  Release build in build/, its whole ctest suite, two tests at a time: CPU tests
#            everywhere, [gpu] tests skip with a printed reason where there is no GPU (ctest:
#            "Skipped"). The two NVRTC compile sweeps ([slow]) compile a seeded quarter of each
#            problem's variants; the other tests that compile many variants compile every 8th
#            NVRTC program (KVTUNE_TEST_NVRTC_EVERY=8, tests/compile_batches.h); the sweeps stage
#            compiles them all.
#   asan     clang build in build-san/ with AddressSanitizer + UndefinedBehaviorSanitizer (-O1 -g,
#            any UB fatal) and libFuzzer's coverage instrumentation; the Catch2 CPU suite
#            (kvtune_tests, which runs the tools it tests from the same build) except [slow] and
#            [compiles]: the two NVRTC compile sweeps and five cases that only compile batches of
#            kernels, whose time is spent in NVRTC (not instrumented) and which the release stage
#            runs; and except [heavy]: six cases that enumerate the whole variant spaces of large
#            problems (1-1.5 minutes each when instrumented), code the other cases run on small
#            problems here and the release stage runs on the large ones, and three normalize cases
#            on emulated threads over many blocks (a host thread per CUDA thread: 43-120 s each
#            when instrumented; the smaller emulated cases stay). Three processes side by
#            side (the two longest [tools] cases, the other [tools] cases, the rest), then
#            [reliability] alone (its forked cache writers are slow when forked from the whole suite).
#   fuzz     the libFuzzer targets of the same build (fuzz/README.md): every regression input
#            replayed, then each target fuzzed for FUZZ_SECONDS (20) seconds.
#   python   the Python package's tests (python/tests) with PYTHON (/usr/bin/python3) against the
#            release build's libkvtune.so: the C ABI and argument handling run everywhere; tests
#            that need torch >= 2.4 or a GPU report themselves skipped (pytest -rs prints why).
# Not run by default (name it):
#   sweeps   [sweep-full] on the release build: every variant of the NVRTC compile sweeps' problems
#            (dwconv for sm_90, normalize for sm_80 and sm_90), where the release stage compiles a
#            quarter; then the [nvrtc] tests with every program (the release stage: every other). CPU time: about 4x that of the release stage's two [slow] cases.
# The sanitizer build uses clang (libFuzzer; a third faster to build than gcc with these flags)
# and Ninja; asan and fuzz share it, so it is compiled once.
# usage: tests/run_all.sh [release] [python] [asan] [fuzz] [sweeps]   (no argument: release python asan fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."

readonly FUZZ_SECONDS=20
readonly PYTHON=${PYTHON:-/usr/bin/python3}
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(release python asan fuzz)

# Sanitizer settings of the asan and fuzz stages. Leak checking is on and nothing is suppressed:
# NVRTC and the static CUDA runtime leave no leak reports on a machine without a GPU. The CUDA
# runtime maps memory where ASan would otherwise put its guard pages (protect_shadow_gap=0, which
# GPU machines need). Every UB report is fatal, with its stack.
sanitizer_environment() {
  export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
}

# Per-stage test counts, printed at the end ("release: 310 passed, 0 failed, 52 skipped"); a stage
# sets counts[<stage>] from its own log (count_ctest, count_catch) before it fails or returns.
declare -A counts=()

# ctest's per-test lines ("  7/362 Test   #7: name ....   Passed    0.02 sec", "***Skipped",
# "***Failed", "***Timeout", ...) in LOG.
count_ctest() {  # STAGE LOG
  local total passed skipped
  total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$2" || true)
  passed=$(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$2" | grep -cE ' Passed +[0-9.]+ sec' || true)
  skipped=$(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$2" | grep -cE '\*\*\*Skipped' || true)
  counts[$1]="$passed passed, $((total - passed - skipped)) failed, $skipped skipped"
}

# The closing lines of kvtune_tests runs (tests/main.cpp), "kvtune_tests: N test cases: P passed,
# F failed, S skipped", summed over LOGs.
count_catch() {  # STAGE LOG...
  local stage=$1 log line p=0 f=0 s=0 missing=0
  shift
  for log in "$@"; do
    line=$(grep -E '^kvtune_tests: [0-9]+ test cases: ' "$log" | tail -1 || true)
    if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped ]]; then
      p=$((p + BASH_REMATCH[1])) f=$((f + BASH_REMATCH[2])) s=$((s + BASH_REMATCH[3]))
    else
      missing=$((missing + 1))
    fi
  done
  counts[$stage]="$p passed, $f failed, $s skipped"
  [[ $missing -eq 0 ]] || counts[$stage]+=" ($missing of $# runs stopped before their count)"
}

# Test hooks on: the fault-injection tests of kvtune-tune read KVTUNE_TEST_FAULT (docs/RELIABILITY.md).
build_release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKVTUNE_TEST_HOOKS=ON
  cmake --build build -j2
}

stage_release() {
  build_release
  # Two tests at a time: each test is its own process with its own files (ctest runs the longest
  # first, by the times of the last run in build/Testing).
  local status=0
  KVTUNE_TEST_NVRTC_EVERY=8 ctest --test-dir build --output-on-failure -j2 2>&1 | tee build/ctest.log || status=$?
  count_ctest release build/ctest.log
  return "$status"
}

# Configures build-san/ with clang and Ninja for both sanitizer stages (KVTUNE_BUILD_FUZZERS implies
# ASan + UBSan); a folder made with another generator is started afresh.
configure_sanitized() {
  if [[ -f build-san/CMakeCache.txt ]] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' build-san/CMakeCache.txt; then
    echo "build-san was configured with another generator: starting it afresh"
    rm -rf build-san
  fi
  # Debug keeps assertions; its own -g (full debug information) is dropped for the line tables the
  # sanitizer flags carry (CMakeLists.txt): a fifth of the build time.
  # The GPU test sources (tests/test_gpu_*.cpp: [gpu] cases only) are left out: these stages run no
  # GPU, where those cases would only skip, and they are 28 % of the test drivers' lines.
  cmake -G Ninja -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= -DCMAKE_CXX_COMPILER=clang++ -DKVTUNE_BUILD_FUZZERS=ON \
    -DKVTUNE_GPU_TEST_SOURCES=OFF
}

stage_asan() {
  configure_sanitized
  cmake --build build-san -j2 --target kvtune_tests
  sanitizer_environment
  # The CPU tests that compile many variants compile every 16th NVRTC program here
  # (tests/compile_batches.h): NVRTC is not instrumented, and the release stage compiles every 8th one.
  export KVTUNE_TEST_NVRTC_EVERY=16
  # Three processes side by side on two cores (each test case uses its own files; their CPU times,
  # 2 cores, 2026-11-27: about 70, 113 and 97 s): the two longest tools tests (each runs sanitized
  # kvtune-cache processes over a populated cache), the other tools tests, everything else.
  # (~[.]: a filter of exclusions alone would also select the hidden exhaustive and [sweep-full] cases.)
  # [reliability] then runs alone: its SIGKILL test forks cache writers, and a fork of the whole
  # suite's sanitized process pays a copy-on-write fault per page it touches (shadow memory
  # included), which made the writers too slow to commit before their kills.
  local status=0 pids=() log logs=() i pid
  # (Catch2 test specs: names in double quotes, * a wildcard; the merge test's name has a comma.)
  local long_tools='"tools: verify finds a damaged binary","tools: merge joins shards*"'
  local -a specs=("$long_tools" '[tools]~[heavy]~"tools: verify finds a damaged binary"~"tools: merge joins shards*"'
                  '~[slow]~[compiles]~[heavy]~[tools]~[reliability]~[.]')
  local -a names=(tools-long tools rest)
  for i in 0 1 2; do
    log=build-san/asan-tests-${names[$i]}.log
    logs+=("$log")
    echo "kvtune_tests '${specs[$i]}' > $log"
    (cd build-san/tests && exec ./kvtune_tests "${specs[$i]}") > "$log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  log=build-san/asan-tests-reliability.log
  logs+=("$log")
  echo "then kvtune_tests '[reliability]~[slow]~[.]' > $log"
  (cd build-san/tests && exec ./kvtune_tests '[reliability]~[slow]~[.]') > "$log" 2>&1 || status=$?
  cat "${logs[@]}"
  count_catch asan "${logs[@]}"
  return "$status"
}

stage_sweeps() {
  build_release
  local status=0
  ./build/tests/kvtune_tests '[sweep-full]' --durations yes 2>&1 | tee build/sweeps.log || status=$?
  KVTUNE_TEST_NVRTC_EVERY=1 ./build/tests/kvtune_tests '[nvrtc]~[slow]' --durations yes 2>&1 | tee build/sweeps-nvrtc.log ||
    status=$?
  count_catch sweeps build/sweeps.log build/sweeps-nvrtc.log
  return "$status"
}

# pytest exits 5 when it collected no test (e.g. a trimmed checkout): not a failure here. Skipped
# tests exit 0 and are listed with their reason.
stage_python() {
  build_release
  local status=0
  KVTUNE_LIBRARY="$PWD/build/libkvtune.so" "$PYTHON" -m pytest python/tests -q -rs 2>&1 | tee build/pytest.log || status=$?
  local line
  line=$(tail -1 build/pytest.log)
  counts[python]="$(grep -oE '[0-9]+ passed' <<< "$line" || echo '0 passed'), $(grep -oE '[0-9]+ failed' <<< "$line" || echo '0 failed'), $(grep -oE '[0-9]+ skipped' <<< "$line" || echo '0 skipped')"
  [[ $status -eq 0 || $status -eq 5 ]] || return "$status"
}

stage_fuzz() {
  configure_sanitized
  cmake --build build-san -j2 --target fuzz_shapes fuzz_import fuzz_keys fuzz_cache_db
  sanitizer_environment
  local status=0
  fuzz/run_fuzzers.sh build-san "$FUZZ_SECONDS" 2>&1 | tee build-san/fuzz.log || status=$?
  # Regression inputs replayed, each target's fuzzing: "N passed, F failed" over both.
  local replayed fuzzed failed
  replayed=$(sed -n 's/^== .*: replaying \([0-9]*\) regression inputs$/\1/p' build-san/fuzz.log | awk '{n += $1} END {print n + 0}')
  fuzzed=$(grep -cE '^== .*: fuzzing for ' build-san/fuzz.log || true)
  failed=$(grep -cE '^failed: ' build-san/fuzz.log || true)
  counts[fuzz]="$((${replayed:-0} + fuzzed - failed)) passed, $failed failed, 0 skipped (${replayed:-0} regression inputs, $fuzzed targets fuzzed ${FUZZ_SECONDS} s each)"
  return "$status"
}

timings=()
current=""
start=0
report() {
  [[ -z $current ]] || timings+=("$(printf '%-8s %5d s  FAILED' "$current" $((SECONDS - start)))")
  echo "==== stage times"
  printf '%s\n' "${timings[@]}"
  echo "==== test counts"
  local stage
  for stage in "${stages[@]}"; do
    [[ -z ${counts[$stage]:-} ]] || echo "$stage: ${counts[$stage]}"
  done
}
trap report EXIT

for stage in "${stages[@]}"; do
  [[ $stage =~ ^(release|python|asan|fuzz|sweeps)$ ]] || { echo "unknown stage '$stage' (release, python, asan, fuzz, sweeps)" >&2; exit 2; }
done
for stage in "${stages[@]}"; do
  echo "==== stage $stage"
  current=$stage
  start=$SECONDS
  "stage_$stage"  # a failing command ends the script (set -e); report() names the stage
  timings+=("$(printf '%-8s %5d s' "$stage" $((SECONDS - start)))")
  current=""
done
