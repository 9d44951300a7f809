#pragma once
// Float64 CPU reference of the normalize family: the ground truth for tests.

#include <cstdint>
#include <vector>

#include "kvtune/kvtune.h"

namespace kvtune::normalize {

struct ReferenceResult {
  std::vector<double> y;     // rows x cols, dense
  std::vector<double> mean;  // rows
  std::vector<double> rstd;  // rows (the factor applied: 1/(std+eps), rsqrt(var+eps), rsqrt(ms+eps))
};

/// x is rows x cols with leading dimension ld (values already widened to double); gamma and beta
/// may be empty.
ReferenceResult reference(const std::vector<double>& x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                          NormMode mode, double eps, int ddof, const std::vector<double>& gamma,
                          const std::vector<double>& beta);

struct BackwardReferenceResult {
  std::vector<double> dx;      // rows x cols, dense
  std::vector<double> dgamma;  // cols
  std::vector<double> dbeta;   // cols
};

/// The gradients of `reference` for the upstream gradient dy (rows x cols, leading dimension ld):
/// dx, dgamma (as if gamma were given; gamma empty means 1) and dbeta, in closed form.
BackwardReferenceResult reference_backward(const std::vector<double>& x, const std::vector<double>& dy,
                                           std::int64_t rows, std::int64_t cols, std::int64_t ld, NormMode mode,
                                           double eps, int ddof, const std::vector<double>& gamma);

}  // namespace kvtune::normalize
