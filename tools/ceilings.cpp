#include "tools/ceilings.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "kvtune/error.h"
#include "lib/src/cuda_check.h"
#include "lib/src/module.h"
#include "lib/src/nvrtc.h"

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

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    detail::cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    detail::cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(std::size_t bytes) { detail::cuda_check(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~Buffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

struct StreamGuard {
  cudaStream_t stream = nullptr;
  StreamGuard() { detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~StreamGuard() {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
};

// Median milliseconds of `body` over `samples` timed runs after one warm-up run.
template <class Body>
double median_ms(Body&& body, cudaStream_t stream, int samples) {
  Events events;
  body();
  detail::cuda_check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> times;
  for (int s = 0; s < samples; ++s) {
    detail::cuda_check(cudaEventRecord(events.start, stream), "cudaEventRecord");
    body();
    detail::cuda_check(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    detail::cuda_check(cudaEventSynchronize(events.stop), "cudaEventSynchronize");
    float ms = 0;
    detail::cuda_check(cudaEventElapsedTime(&ms, events.start, events.stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double copy_gbps(cudaStream_t stream) {
  Buffer a(kCopyBytes), b(kCopyBytes);
  detail::cuda_check(cudaMemsetAsync(a.ptr, 1, kCopyBytes, stream), "cudaMemsetAsync");
  const double ms = median_ms(
      [&] {
        detail::cuda_check(cudaMemcpyAsync(b.ptr, a.ptr, kCopyBytes, cudaMemcpyDeviceToDevice, stream),
                           "cudaMemcpyAsync");
      },
      stream, 7);
  return 2.0 * double(kCopyBytes) / (ms * 1e-3) / 1e9;
}

double fma_gflops(const std::string& arch, cudaStream_t stream) {
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
  Buffer out(std::size_t(grid) * kBlock * sizeof(float));
  const KvtFmaParams params{static_cast<float*>(out.ptr), kIterations};
  const double ms = median_ms(
      [&] { detail::cuda_check(kernel.launch(dim3(grid), dim3(kBlock), 0, stream, params), "FMA kernel launch"); },
      stream, 5);
  const double flops = 2.0 * kChains * kUnroll * double(kIterations) * double(grid) * kBlock;
  return flops / (ms * 1e-3) / 1e9;
}

}  // namespace

MeasuredCeilings measure_ceilings(const std::string& arch) {
  MeasuredCeilings m;
  try {
    StreamGuard stream;
    try {
      m.copy_gbps = copy_gbps(stream.stream);
    } catch (const Error& e) {
      m.note = fmt::format("copy bandwidth not measured: {}", e.what());
      cudaGetLastError();
    }
    try {
      m.fma_gflops = fma_gflops(arch, stream.stream);
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
