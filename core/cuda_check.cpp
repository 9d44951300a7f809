#include "core/cuda_check.h"

#include <fmt/format.h>

namespace kvtune::detail {

void cuda_check(cudaError_t status, const char* what, const Error::Context& context) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so later calls are not blamed for it
  Error::Context c = context;
  if (c.op.empty()) c.op = "cuda";
  if (c.device.empty()) {
    int ordinal = -1;
    if (cudaGetDevice(&ordinal) == cudaSuccess) c.device = device_label(ordinal);
  }
  throw Error(c, fmt::format("{} failed: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status)));
}

std::string device_label(int ordinal) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) return fmt::format("device {}", ordinal);
  return fmt::format("device {} ({})", ordinal, prop.name);
}

}  // namespace kvtune::detail
