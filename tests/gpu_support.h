#pragma once
// Shared by the [gpu] tests: whether a usable GPU is present, and why not.
#include <cuda_runtime_api.h>

#include <string>

namespace kvtune::test {

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

}  // namespace kvtune::test

// Skips a [gpu] test with its reason printed when there is no GPU.
#define KVTUNE_REQUIRE_GPU()                                 \
  do {                                                       \
    std::string kvtune_why_;                                 \
    if (!::kvtune::test::gpu_available(&kvtune_why_)) {      \
      WARN("SKIPPED (needs a GPU): " << kvtune_why_);        \
      return;                                                \
    }                                                        \
  } while (0)
