#pragma once
// Glue between the dwconv family and the generic tuner: candidates, the benchmark harness
// (random inputs, float64 reference, rotation slots), and the one launch function.

#include <memory>
#include <vector>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_params.h"
#include "tuner/tuner.h"

namespace kvtune::dwconv {

std::vector<tuner::Candidate> make_candidates(const Problem& problem, const std::vector<Config>& configs,
                                              const std::string& arch);

std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t l2_bytes, cudaStream_t stream);

/// Tensors of one call, already mapped to the kernels' roles (see dwconv_params.h).
struct LaunchArgs {
  const void* src;
  void* dst;
  const void* weight;
  const void* bias;
  const void* aux;
  void* bias_grad;
  std::int64_t batch;
  void* workspace;  // geometry().workspace_bytes, or null when that is 0
  const std::int32_t* seq_idx;  // the fused weight gradient with seq_idx; else null
};
/// Maps user arguments to kernel roles (workspace left null).
LaunchArgs launch_args(const DwConvArgs& args);
/// The kernels' argument struct for `args` (splits 1, no workspace: launch() sets those for the
/// weight gradient).
KvtDwConvParams kernel_params(const Problem& problem, const LaunchArgs& args);

/// Zeroes the workspace counters (backward_weight) and launches the variant.
cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& args, cudaStream_t stream);

/// The float64 reference on `args`: out is f32 (dst layout; dw for backward_weight), bias_out the
/// dbias (backward_weight with bias) or null.
void run_reference(const Problem& problem, const std::string& arch, const LaunchArgs& args, float* out,
                   float* bias_out, cudaStream_t stream);

}  // namespace kvtune::dwconv
