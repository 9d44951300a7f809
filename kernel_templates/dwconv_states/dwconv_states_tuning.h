#pragma once
// Glue between the dwconv_states family and the generic tuner: candidates, the benchmark harness (the
// destination starts as the plain convolution's result, rounded to the dtype, and must end as the
// float64 reference of the whole operation), and the one launch function.

#include <cstdint>
#include <memory>
#include <vector>

#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "tuner/tuner.h"

namespace kvtune::dwconv_states {

std::vector<tuner::Candidate> make_candidates(const Problem& problem, const std::vector<Config>& configs,
                                              const std::string& arch);

std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t l2_bytes, cudaStream_t stream);

/// Tensors of one fix-up launch, mapped to the kernel's roles (dwconv_states_params.h).
struct LaunchArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  const void* aux = nullptr;
  const void* initial_state = nullptr;
  void* state_out = nullptr;
  const std::int32_t* seq_idx = nullptr;
  std::int64_t batch = 0;
};

/// The fix-up `problem` of a call (one of make_plan(args)'s): `gradient` is dy, or where the backward
/// directions' gradient prep left dy * act'(z); `prep_out` is that output (for the prep's fix-up).
LaunchArgs launch_args(const DwConvArgs& args, const Problem& problem, const void* gradient, void* prep_out);

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& args, cudaStream_t stream);

/// The bits of `v` rounded to nearest even in `dtype` (the low 16 bits for 16-bit types).
std::uint32_t round_bits(DType dtype, double v);

/// Seq_idx of `rows` rows of `length` positions for tests and the harness: packed sequences of
/// lengths 1 to 2 * typical (some of one position), ids increasing along a row from a row-dependent start.
std::vector<std::int32_t> packed_seq_idx(std::int64_t rows, std::int64_t length, std::int64_t typical, std::uint64_t seed);

}  // namespace kvtune::dwconv_states
