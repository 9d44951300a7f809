#pragma once
// Glue between the normalize family and the generic tuner: candidates for a problem, and the
// benchmark harness that owns the scratch buffers (random inputs, reference, rotation slots).

#include <memory>
#include <vector>

#include "kernel_templates/normalize/normalize_family.h"
#include "tuner/tuner.h"

namespace kvtune::normalize {

/// Candidates for `configs` (index i refers to configs[i]).
std::vector<tuner::Candidate> make_candidates(const Problem& problem, const std::vector<Config>& configs,
                                              const std::string& arch);

/// Creates the harness for `problem` on the current device: allocates scratch buffers (rotation
/// slots so that one pass over them exceeds `l2_bytes` twice, bounded by free memory), fills them
/// with random data, and computes the float64 reference. Throws kvtune::Error when memory is short.
std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t l2_bytes, cudaStream_t stream);

/// Launch arguments of a call (shared by the dispatch path and the harness).
struct LaunchArgs {
  const void* x;
  void* y;
  const void* gamma;
  const void* beta;
  float* mean;
  float* rstd;
  std::int64_t rows, ld_x, ld_y;
  float eps;
  int ddof;
  void* workspace = nullptr;  // geometry().workspace_bytes, 256-byte aligned (split rows only)
  const void* residual = nullptr;  // problem.residual: the rows normalized are x + residual
  void* residual_out = nullptr;    // problem.residual_out: receives x + residual
  std::int64_t ld_residual = 0, ld_residual_out = 0;
};
/// Runs the naive float64 variant on `args`: y is f32 (args.ld_y elements per row), mean/rstd
/// optional; residual_out, when given, receives x + residual as f32 (args.ld_residual_out). For
/// verification and tests.
void run_reference(const Problem& problem, const std::string& arch, const LaunchArgs& args, cudaStream_t stream);

/// Launches the variant: one kernel launch, or one per phase for split rows (which need
/// args.workspace: cudaErrorInvalidValue without it).
cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& args, cudaStream_t stream);

/// Launch arguments of a backward call. `workspace` holds geometry().workspace_bytes (null when 0).
struct BackwardLaunchArgs {
  const void* x;
  const void* dy;
  void* dx;
  const void* gamma;
  const float* mean;
  const float* rstd;
  void* dgamma;
  void* dbeta;
  void* workspace;
  std::int64_t rows, ld_x, ld_dy, ld_dx;
  float eps;
  int ddof;
  const void* dresidual_out = nullptr;  // problem.dresidual: added to dx
  std::int64_t ld_dresidual_out = 0;
};
/// Zeroes the workspace's arrival counters (dgamma/dbeta) and launches the backward variant (one
/// launch per phase for split rows).
cudaError_t launch_backward(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                            const BackwardLaunchArgs& args, cudaStream_t stream);
/// The backward's float64 reference: dx as f32 (ld_dx), dgamma/dbeta as f32 when non-null; its
/// own statistics (the given mean/rstd are not read). For tests.
void run_backward_reference(const Problem& problem, const std::string& arch, const BackwardLaunchArgs& args,
                            cudaStream_t stream);

}  // namespace kvtune::normalize
