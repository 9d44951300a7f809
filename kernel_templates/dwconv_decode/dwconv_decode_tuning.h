#pragma once
// Glue between the dwconv_decode family and the generic tuner: candidates, the benchmark harness
// (inputs exact in every dtype, the float64 CPU reference, rotation slots, the state restored before
// each verification), and the one launch function.

#include <cstdint>
#include <memory>
#include <vector>

#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "tuner/tuner.h"

namespace kvtune::dwconv_decode {

std::vector<tuner::Candidate> make_candidates(const Problem& problem, const std::vector<Config>& configs,
                                              const std::string& arch);

std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t l2_bytes, cudaStream_t stream);

/// The kernel's view of validated arguments (state_len and state_slots resolved).
struct LaunchArgs {
  const void* x;
  const void* weight;
  const void* bias;
  void* y;
  void* state;
  const std::int32_t* cache_seqlens;
  const std::int32_t* state_indices;
  std::int64_t batch;
  std::int64_t state_len;
  std::int64_t state_slots;
};
LaunchArgs launch_args(const DwConvDecodeArgs& args);

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& args, cudaStream_t stream);

/// The bits of `v` in `dtype` for values exact in every dtype (multiples of 1/64 in [-2, 2]: the
/// harness's and the tests' inputs, so the reference sees exactly what the kernel reads).
std::uint32_t exact_bits(DType dtype, double v);

}  // namespace kvtune::dwconv_decode
