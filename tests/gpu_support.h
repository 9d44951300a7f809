#pragma once
// Shared by the [gpu] tests: whether a usable GPU is present, and why not; skipping a test case
// (main.cpp counts skipped cases and turns a run whose every case skipped into exit code 77, which
// ctest reports as "Skipped": tests/CMakeLists.txt, SKIP_RETURN_CODE).
#include <cuda_runtime_api.h>

#include <string>

#include "kvtune/kvtune.h"

namespace kvtune::test {

/// Options of a Context on an in-memory cache with `policy`.
inline ContextOptions in_memory(Policy policy) {
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = policy;
  return o;
}

inline bool gpu_available(std::string* why = nullptr) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

/// Set by KVTUNE_SKIP in the running test case; main.cpp's listener reads and clears it when the
/// case ends.
inline bool& current_case_skipped() {
  static bool skipped = false;
  return skipped;
}

/// Exit code of a run whose every test case skipped (ctest's SKIP_RETURN_CODE).
inline constexpr int kSkipExitCode = 77;

}  // namespace kvtune::test

// Ends the running test case as skipped, with its reason printed. Use at the top of a TEST_CASE
// body (outside SECTIONs).
#define KVTUNE_SKIP(reason)                              \
  do {                                                   \
    ::kvtune::test::current_case_skipped() = true;       \
    WARN("SKIPPED " << reason);                          \
    return;                                              \
  } while (0)

// Skips a [gpu] test with its reason printed when there is no GPU.
#define KVTUNE_REQUIRE_GPU()                                                            \
  do {                                                                                  \
    std::string kvtune_why_;                                                            \
    if (!::kvtune::test::gpu_available(&kvtune_why_)) KVTUNE_SKIP("(needs a GPU): " << kvtune_why_); \
  } while (0)
