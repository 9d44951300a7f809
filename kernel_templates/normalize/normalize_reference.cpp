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

BackwardReferenceResult reference_backward(const std::vector<double>& x, const std::vector<double>& dy,
                                           std::int64_t rows, std::int64_t cols, std::int64_t ld, NormMode mode,
                                           double eps, int ddof, const std::vector<double>& gamma) {
  const ReferenceResult forward = reference(x, rows, cols, ld, mode, eps, ddof, {}, {});
  BackwardReferenceResult r;
  r.dx.resize(static_cast<std::size_t>(rows * cols));
  r.dgamma.assign(static_cast<std::size_t>(cols), 0.0);
  r.dbeta.assign(static_cast<std::size_t>(cols), 0.0);
  const double n = static_cast<double>(cols);
  for (std::int64_t i = 0; i < rows; ++i) {
    const double* xr = x.data() + i * ld;
    const double* dyr = dy.data() + i * ld;
    const double mean = forward.mean[static_cast<std::size_t>(i)];
    const double s = forward.rstd[static_cast<std::size_t>(i)];
    const auto g = [&](std::int64_t j) { return dyr[j] * (gamma.empty() ? 1.0 : gamma[static_cast<std::size_t>(j)]); };
    double a = 0.0, b = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) {
      a += g(j);
      b += g(j) * (xr[j] - mean) * s;
    }
    // y = xhat (times gamma): layernorm and rmsnorm differentiate s = (var + eps)^-1/2, standardize
    // s = 1 / (sigma + eps) with sigma = sqrt(sum (x - mean)^2 / (n - ddof)).
    const double ca = mode == NormMode::rmsnorm ? 0.0 : a / n;
    double cb = s * b / n;
    // A constant row (sigma = 0) takes the sigma term as 0, as PyTorch's std backward does.
    if (mode == NormMode::standardize) {
      const double sigma = 1.0 / s - eps;
      cb = sigma > 0 ? b / (sigma * (n - ddof)) : 0.0;
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      const double xhat = (xr[j] - mean) * s;
      r.dx[static_cast<std::size_t>(i * cols + j)] = s * (g(j) - ca) - xhat * cb;
      r.dgamma[static_cast<std::size_t>(j)] += dyr[j] * xhat;
      r.dbeta[static_cast<std::size_t>(j)] += dyr[j];
    }
  }
  return r;
}

}  // namespace kvtune::normalize
