#include "tools/ceilings.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include <fmt/format.h>

#include "kvtune/error.h"
#include "core/cuda_check.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "tuner/event_timer.h"
#include "tuner/harness_support.h"

namespace kvtune::tools {
namespace {

constexpr std::size_t kCopyBytes = std::size_t(1) << 30;
constexpr int kChains = 8;         // independent FMA chains per thread: hides the FMA latency
constexpr int kUnroll = 16;        // FMAs per chain per loop iteration
constexpr int kIterations = 4096;  // about 5 ms per launch on an H100
constexpr int kBlock = 256;

// Eight chains of dependent FMAs per thread; the result is stored only under a condition the
// compiler cannot decide, so the arithmetic stays.
constexpr char kFmaSource[] = R"cuda(
struct KvtFmaParams {
  float* out;
  int iterations;
};
__global__ void kvt_fma_rate(KvtFmaParams p) {
  float a0 = threadIdx.x * 1e-7f, a1 = a0 + 1e-7f, a2 = a0 + 2e-7f, a3 = a0 + 3e-7f;
  float a4 = a0 + 4e-7f, a5 = a0 + 5e-7f, a6 = a0 + 6e-7f, a7 = a0 + 7e-7f;
  const float m = 0.9999999f, c = 1e-7f;
  for (int i = 0; i < p.iterations; ++i) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
      a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
    }
  }
  const float s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
  if (s == -1.0f) p.out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
)cuda";

struct KvtFmaParams {
  float* out;
  int iterations;
};

struct StreamGuard {
  cudaStream_t stream = nullptr;
  StreamGuard() { detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~StreamGuard() {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
};

}  // namespace

double measure_copy_gbps(cudaStream_t stream, int samples) {
  tuner::DeviceBuffer a(kCopyBytes), b(kCopyBytes);
  detail::cuda_check(cudaMemsetAsync(a.get(), 1, kCopyBytes, stream), "cudaMemsetAsync");
  const double ms = tuner::median_ms(
      [&] {
        detail::cuda_check(cudaMemcpyAsync(b.get(), a.get(), kCopyBytes, cudaMemcpyDeviceToDevice, stream),
                           "cudaMemcpyAsync");
      },
      stream, 1, samples);
  return 2.0 * double(kCopyBytes) / (ms * 1e-3) / 1e9;
}

double measure_fma_gflops(const std::string& arch, cudaStream_t stream, int samples) {
  detail::CompileRequest request;
  request.program_name = "kvt_fma_rate.cu";
  request.source = kFmaSource;
  request.name_expressions = {"kvt_fma_rate"};
  request.arch = arch;
  const auto compiled = detail::nvrtc_compile(request);
  const auto kernel = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(0));
  int device = 0, sms = 0, threads_per_sm = 0;
  detail::cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  detail::cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  detail::cuda_check(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device),
                     "cudaDeviceGetAttribute");
  const unsigned grid = static_cast<unsigned>(sms * std::max(1, threads_per_sm / kBlock));
  tuner::DeviceBuffer out(std::size_t(grid) * kBlock * sizeof(float));
  const KvtFmaParams params{out.as<float>(), kIterations};
  const double ms = tuner::median_ms(
      [&] { detail::cuda_check(kernel.launch(dim3(grid), dim3(kBlock), 0, stream, params), "FMA kernel launch"); },
      stream, 1, samples);
  const double flops = 2.0 * kChains * kUnroll * double(kIterations) * double(grid) * kBlock;
  return flops / (ms * 1e-3) / 1e9;
}

MeasuredCeilings measure_ceilings(const std::string& arch) {
  MeasuredCeilings m;
  try {
    StreamGuard stream;
    try {
      m.copy_gbps = measure_copy_gbps(stream.stream);
    } catch (const Error& e) {
      m.note = fmt::format("copy bandwidth not measured: {}", e.what());
      cudaGetLastError();
    }
    try {
      m.fma_gflops = measure_fma_gflops(arch, stream.stream);
    } catch (const Error& e) {
      m.note += fmt::format("{}FMA rate not measured: {}", m.note.empty() ? "" : "; ", e.what());
      cudaGetLastError();
    }
  } catch (const Error& e) {
    m.note = fmt::format("ceilings not measured: {}", e.what());
  }
  return m;
}

}  // namespace kvtune::tools
