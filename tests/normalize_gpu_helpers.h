#pragma once
// Shared by the normalize [gpu] tests (test_gpu_normalize.cpp, test_gpu_normalize_wide.cpp): device
// buffers, host encoding of f32/f16/bf16, random tensors as stored and as the reference sees them,
// and the relative error of a device output against a float64 reference.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kvtune/kvtune.h"
#include "core/cuda_check.h"

namespace kvtune::test_normalize {

// Random rows as stored (encoded) and as the reference sees them (decoded, so the reference sees
// exactly the rounded inputs).
struct HostTensor {
  std::vector<unsigned char> bytes;
  std::vector<double> values;
};

struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(std::size_t bytes) { detail::cuda_check(cudaMalloc(&ptr, std::max<std::size_t>(bytes, 16)), "cudaMalloc"); }
  /// A device copy of the tensor's stored bytes.
  explicit Buffer(const HostTensor& t) : Buffer(t.bytes.size()) {
    detail::cuda_check(cudaMemcpy(ptr, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  template <class T> T* as(std::size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(ptr) + byte_offset);
  }
};

inline std::size_t elem_size(DType d) { return d == DType::f32 ? 4 : 2; }

// Host encode/decode of one element.
inline void encode(DType d, double v, void* out) {
  if (d == DType::f32) *static_cast<float*>(out) = static_cast<float>(v);
  else if (d == DType::f16) *static_cast<__half*>(out) = __float2half_rn(static_cast<float>(v));
  else *static_cast<__nv_bfloat16*>(out) = __float2bfloat16_rn(static_cast<float>(v));
}
inline double decode(DType d, const void* in) {
  if (d == DType::f32) return *static_cast<const float*>(in);
  if (d == DType::f16) return __half2float(*static_cast<const __half*>(in));
  return __bfloat162float(*static_cast<const __nv_bfloat16*>(in));
}

inline HostTensor random_tensor(DType d, std::size_t count, std::uint64_t seed, double offset, double scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  HostTensor t;
  t.bytes.resize(count * elem_size(d));
  t.values.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    encode(d, offset + scale * u(rng), t.bytes.data() + i * elem_size(d));
    t.values[i] = decode(d, t.bytes.data() + i * elem_size(d));
  }
  return t;
}

inline double tolerance(DType d) { return d == DType::f32 ? 1e-5 : d == DType::f16 ? 2e-3 : 1e-2; }

// Relative L2 error of a device output (rows x cols, leading dimension ld) against the reference;
// NaN in the output where the reference is finite counts as infinitely wrong.
inline double relative_error(DType d, const void* device_out, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                      const std::vector<double>& ref) {
  std::vector<unsigned char> host(std::size_t(rows * ld) * elem_size(d));
  detail::cuda_check(cudaMemcpy(host.data(), device_out, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  double err = 0, norm = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double o = decode(d, host.data() + std::size_t(r * ld + c) * elem_size(d));
      const double f = ref[std::size_t(r * cols + c)];
      if (std::isnan(f) && std::isnan(o)) continue;
      if (!std::isfinite(o)) return INFINITY;
      err += (o - f) * (o - f);
      norm += f * f;
    }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

}  // namespace kvtune::test_normalize
