#pragma once
// Pieces every family's benchmark harness needs: device buffers, raw launches of support
// kernels (fill, reference, compare), and a process-wide cache of compiled support programs.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "core/parallel.h"
#include "tuner/tuner.h"

namespace kvtune::tuner {

/// A device allocation freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) {
    detail::cuda_check(cudaMalloc(&ptr_, bytes < 256 ? 256 : bytes), "cudaMalloc (tuning scratch)");
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

/// Launches a support kernel with pointers to its arguments; throws kvtune::Error on failure.
void launch_raw(const detail::LoadedKernel& kernel, unsigned grid, unsigned block, cudaStream_t stream,
                std::vector<void*> args, const char* what);

/// The kernels of `request`, compiled once per process and loaded once per device (in the order
/// of its name expressions). The returned reference stays valid for the process.
const std::vector<detail::LoadedKernel>& support_kernels(const detail::CompileRequest& request);

/// Fills n elements at `out` with kvt_fill_random values (offset + scale * U[-1, 1)).
void fill_random(const detail::LoadedKernel& fill, void* out, long long n, unsigned long long seed, float offset,
                 float scale, cudaStream_t stream);

/// Copies `values` into a new device buffer.
template <class V> DeviceBuffer upload_raw(const std::vector<V>& values) {
  DeviceBuffer d(values.size() * sizeof(V));
  detail::cuda_check(cudaMemcpy(d.get(), values.data(), values.size() * sizeof(V), cudaMemcpyHostToDevice),
                     "cudaMemcpy (tuning inputs)");
  return d;
}

/// Host inputs exact in every dtype (multiples of 1/64 in [-range/64, range/64]) for harnesses whose
/// float64 reference runs on the CPU: drawn on all cores in chunks of 2^16, each from a seed of its
/// own, so the values depend on n, seed and range only.
std::vector<double> exact_values(std::size_t n, std::uint64_t seed, int range);

/// `values` in a new device buffer as elements of `elem_bytes` (1 to 4) bytes, each the low bytes
/// of bits(value) (the dtype's bits, little-endian), converted on all cores.
template <class Bits> DeviceBuffer upload_values(const std::vector<double>& values, std::size_t elem_bytes, Bits bits) {
  std::vector<unsigned char> bytes(values.size() * elem_bytes);
  detail::parallel_for(
      std::int64_t(values.size()),
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          const std::uint32_t b = bits(values[std::size_t(i)]);
          std::memcpy(bytes.data() + std::size_t(i) * elem_bytes, &b, elem_bytes);
        }
      },
      std::int64_t(1) << 16);
  return upload_raw(bytes);
}

/// `values` as floats in a new device buffer (a float64 reference's results), converted on all cores.
DeviceBuffer upload_floats(const std::vector<double>& values);

/// Seconds a verification launch may take before its variant is rejected as timed out.
inline constexpr double kVerifyTimeoutSeconds = 2.0;

/// The first half of every harness's verify(): given the status of the candidate's launch on
/// `stream`, waits for it (at most kVerifyTimeoutSeconds; a longer one is waited out, so that its
/// buffers can be reused). Returns true when it ran; false with `verdict.message` "launch failed:
/// ...", kResourcesRefused + ": ..." or "timed out: ..." otherwise. A kernel error (a sticky one:
/// the context is lost) throws kvtune::Error with `where`. A hanging kernel cannot be stopped in process; `kvtune-tune
/// --isolate` kills the child instead.
bool finish_candidate(cudaError_t launch_status, cudaStream_t stream, const Error::Context& where, Verdict& verdict);

/// Relative L2 error of `out` (rows x cols, leading dimension ld_out, the problem's dtype) against
/// an f32 reference, through kvt_compare; adds unwritten / non-finite elements to `bad`.
double compare_on_device(const detail::LoadedKernel& compare, const void* out, long long ld_out, const float* ref,
                         long long ld_ref, long long rows, long long cols, double* bad, cudaStream_t stream);

}  // namespace kvtune::tuner
