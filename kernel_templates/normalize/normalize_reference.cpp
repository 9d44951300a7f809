#include "kernel_templates/normalize/normalize_reference.h"

#include <cmath>

namespace kvtune::normalize {

ReferenceResult reference(const std::vector<double>& x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                          NormMode mode, double eps, int ddof, const std::vector<double>& gamma,
                          const std::vector<double>& beta) {
  ReferenceResult r;
  r.y.resize(static_cast<std::size_t>(rows * cols));
  r.mean.resize(static_cast<std::size_t>(rows));
  r.rstd.resize(static_cast<std::size_t>(rows));
  const double n = static_cast<double>(cols);
  for (std::int64_t i = 0; i < rows; ++i) {
    const double* row = x.data() + i * ld;
    double mean = 0.0, scale = 0.0;
    if (mode == NormMode::rmsnorm) {
      double squares = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) squares += row[j] * row[j];
      scale = 1.0 / std::sqrt(squares / n + eps);
    } else {
      for (std::int64_t j = 0; j < cols; ++j) mean += row[j];
      mean /= n;
      double centred = 0.0;  // two-pass: exact when |mean| >> std
      for (std::int64_t j = 0; j < cols; ++j) centred += (row[j] - mean) * (row[j] - mean);
      if (mode == NormMode::standardize)
        scale = 1.0 / (std::sqrt(centred / (n - ddof)) + eps);
      else
        scale = 1.0 / std::sqrt(centred / n + eps);
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      double v = (row[j] - mean) * scale;
      if (!gamma.empty()) v *= gamma[static_cast<std::size_t>(j)];
      if (!beta.empty()) v += beta[static_cast<std::size_t>(j)];
      r.y[static_cast<std::size_t>(i * cols + j)] = v;
    }
    r.mean[static_cast<std::size_t>(i)] = mean;
    r.rstd[static_cast<std::size_t>(i)] = scale;
  }
  return r;
}

}  // namespace kvtune::normalize
