#pragma once
// [gpu] test helper: a random f32 row-normalization problem on the device and its float64 host
// check (layernorm, no affine), for the tests of the dispatch machinery (policies, threads,
// processes) that need correct outputs but not every dtype.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kvtune/kvtune.h"
#include "core/cuda_check.h"

namespace kvtune::test {

class LayerNormCase {
 public:
  LayerNormCase(std::int64_t rows, std::int64_t cols, std::uint64_t seed) : rows_(rows), cols_(cols) {
    host_.resize(std::size_t(rows * cols));
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-2.0f, 3.0f);
    for (auto& v : host_) v = u(rng);
    const std::size_t bytes = host_.size() * sizeof(float);
    detail::cuda_check(cudaMalloc(&x_, bytes), "cudaMalloc");
    detail::cuda_check(cudaMalloc(&y_, bytes), "cudaMalloc");
    detail::cuda_check(cudaMemcpy(x_, host_.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    // From pageable memory, cudaMemcpy may return before the DMA into x has landed, and callers
    // run the operator on non-blocking streams, which do not wait for the legacy stream: without
    // this, the first call can read a partly written x (seen as wrong outputs in the 8-process test).
    detail::cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  ~LayerNormCase() {
    cudaFree(x_);
    cudaFree(y_);
  }
  LayerNormCase(const LayerNormCase&) = delete;
  LayerNormCase& operator=(const LayerNormCase&) = delete;

  NormalizeArgs args() const {
    NormalizeArgs a;
    a.x = x_;
    a.y = y_;
    a.rows = rows_;
    a.cols = cols_;
    a.mode = NormMode::layernorm;
    a.eps = 1e-5f;
    return a;
  }

  /// Largest absolute error of y against the float64 reference (after synchronizing `stream`).
  double max_error(cudaStream_t stream = nullptr) const {
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::vector<float> y(host_.size());
    detail::cuda_check(cudaMemcpy(y.data(), y_, y.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    double worst = 0;
    for (std::int64_t r = 0; r < rows_; ++r) {
      const float* x = host_.data() + r * cols_;
      double mean = 0, var = 0;
      for (std::int64_t c = 0; c < cols_; ++c) mean += x[c];
      mean /= double(cols_);
      for (std::int64_t c = 0; c < cols_; ++c) var += (x[c] - mean) * (x[c] - mean);
      var /= double(cols_);
      const double rstd = 1.0 / std::sqrt(var + 1e-5);
      for (std::int64_t c = 0; c < cols_; ++c)
        worst = std::max(worst, std::fabs((x[c] - mean) * rstd - double(y[std::size_t(r * cols_ + c)])));
    }
    return worst;
  }

 private:
  std::int64_t rows_, cols_;
  std::vector<float> host_;
  void* x_ = nullptr;
  void* y_ = nullptr;
};

}  // namespace kvtune::test
