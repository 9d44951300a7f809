#pragma once
// cuDNN as a depthwise-convolution peer of kvtune-bench: its C API (cudnnConvolutionForward,
// BackwardData, BackwardFilter) with groupCount = C, NCHW or NHWC, 1D as H = 1 2D, and the
// algorithm chosen by cudnnFind*Ex with a workspace. Built only where CMake found cuDNN.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kvtune/kvtune.h"

namespace kvtune::bench {

/// The tensors of one call: forward (x, weight -> y), backward_data (dy, weight -> dx),
/// backward_weight (x, dy -> dweight). Weight is [C, KH, KW] as in kvtune.
struct DwTensors {
  const void* in0 = nullptr;
  const void* in1 = nullptr;
  void* out = nullptr;
};

/// Whether kvtune-bench was built with cuDNN.
bool cudnn_built();
/// "9.14.0 (built against 9.19.0)", or why cuDNN is absent.
std::string cudnn_description();
// cudnn_out_w (the output width cuDNN computes) is in tools/bench_tensors.h, which sizes y and dy.

class CudnnDepthwise {
 public:
  /// Builds descriptors and picks the fastest algorithm on `sample` (whose output it overwrites)
  /// with up to `max_workspace` bytes of workspace. Throws std::runtime_error, beginning with
  /// "unsupported:" for what cuDNN cannot express (asymmetric non-causal padding).
  CudnnDepthwise(const DwConvArgs& args, cudaStream_t stream, const DwTensors& sample, std::size_t max_workspace);
  ~CudnnDepthwise();
  CudnnDepthwise(const CudnnDepthwise&) = delete;
  CudnnDepthwise& operator=(const CudnnDepthwise&) = delete;

  /// Enqueues one call on the stream given at construction.
  void run(const DwTensors& tensors);
  /// "IMPLICIT_PRECOMP_GEMM, workspace 0 B"
  const std::string& algorithm() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtune::bench
