#!/usr/bin/env bash
# Every test CI runs, in order (README.md, "Run the tests"); stops at the first failing stage.
#   release  Release build in build/, its whole ctest suite: CPU tests everywhere, [gpu] tests
#            skip with a printed reason where there is no GPU.
#   asan     clang build in build-san/ with AddressSanitizer + UndefinedBehaviorSanitizer (-O1 -g,
#            any UB fatal) and libFuzzer's coverage instrumentation; the Catch2 CPU suite
#            (kvtune_tests, which runs the tools it tests from the same build) except [slow]: the
#            two NVRTC compile sweeps, whose time is spent in NVRTC (not instrumented) and which the
#            release stage runs in full.
#   fuzz     the libFuzzer targets of the same build (fuzz/README.md): every regression input
#            replayed, then each target fuzzed for FUZZ_SECONDS (30) seconds.
#   python   the Python package's tests (python/tests) with PYTHON (/usr/bin/python3) against the
#            release build's libkvtune.so: the C ABI and argument handling run everywhere; tests
#            that need torch >= 2.4 or a GPU report themselves skipped (pytest -rs prints why).
# The sanitizer build uses clang (libFuzzer; a third faster to build than gcc with these flags)
# and Ninja; asan and fuzz share it, so it is compiled once.
# usage: tests/run_all.sh [release] [python] [asan] [fuzz]   (no argument: all four)
set -euo pipefail
cd "$(dirname "$0")/.."

readonly FUZZ_SECONDS=30
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

stage_release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j2
  ctest --test-dir build --output-on-failure
}

# Configures build-san/ with clang and Ninja for both sanitizer stages (KVTUNE_BUILD_FUZZERS implies
# ASan + UBSan); a folder made with another generator is started afresh.
configure_sanitized() {
  if [[ -f build-san/CMakeCache.txt ]] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' build-san/CMakeCache.txt; then
    echo "build-san was configured with another generator: starting it afresh"
    rm -rf build-san
  fi
  cmake -G Ninja -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DKVTUNE_BUILD_FUZZERS=ON
}

stage_asan() {
  configure_sanitized
  cmake --build build-san -j2 --target kvtune_tests
  sanitizer_environment
  (cd build-san/tests && ./kvtune_tests '~[slow]')
}

# pytest exits 5 when it collected no test (e.g. a trimmed checkout): not a failure here. Skipped
# tests exit 0 and are listed with their reason.
stage_python() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j2 --target kvtune
  local status=0
  KVTUNE_LIBRARY="$PWD/build/libkvtune.so" "$PYTHON" -m pytest python/tests -q -rs || status=$?
  [[ $status -eq 0 || $status -eq 5 ]] || return "$status"
}

stage_fuzz() {
  configure_sanitized
  cmake --build build-san -j2 --target fuzz_shapes fuzz_import fuzz_keys fuzz_cache_db
  sanitizer_environment
  fuzz/run_fuzzers.sh build-san "$FUZZ_SECONDS"
}

timings=()
current=""
start=0
report() {
  [[ -z $current ]] || timings+=("$(printf '%-8s %5d s  FAILED' "$current" $((SECONDS - start)))")
  echo "==== stage times"
  printf '%s\n' "${timings[@]}"
}
trap report EXIT

for stage in "${stages[@]}"; do
  [[ $stage =~ ^(release|python|asan|fuzz)$ ]] || { echo "unknown stage '$stage' (release, python, asan, fuzz)" >&2; exit 2; }
done
for stage in "${stages[@]}"; do
  echo "==== stage $stage"
  current=$stage
  start=$SECONDS
  "stage_$stage"  # a failing command ends the script (set -e); report() names the stage
  timings+=("$(printf '%-8s %5d s' "$stage" $((SECONDS - start)))")
  current=""
done
