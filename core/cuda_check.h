#pragma once
// CUDA runtime error checking: every failure becomes a kvtune::Error naming the call.
#include <cuda_runtime_api.h>

#include <string>

#include "kvtune/error.h"

namespace kvtune::detail {

/// Throws kvtune::Error{op} with the CUDA error text when `status` is not cudaSuccess.
void cuda_check(cudaError_t status, const char* what, const Error::Context& context = {});

/// "device 0 (NVIDIA H100 80GB HBM3)" for error messages.
std::string device_label(int ordinal);

}  // namespace kvtune::detail
