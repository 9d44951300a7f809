// kvtune-bench's timing and roofline measurements (see bench_timing.h and docs/PERFORMANCE.md).
#include "tools/bench_timing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "lib/src/nvrtc.h"
#include "tuner/harness_support.h"

namespace kvtune::bench {
namespace {

// Support kernels. The fill converts with PTX cvt so that no CUDA header is needed under NVRTC.
constexpr const char* kSupportSource = R"(
__device__ unsigned long long kvb_mix(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void kvb_fill(void* out, long long n, int kind, unsigned long long seed, float offset, float scale) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const unsigned long long bits = kvb_mix(seed * 0x632BE59BD9B4E019ull + (unsigned long long)i);
    const float u = (float)(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
    const float v = offset + scale * u;
    if (kind == 0) {
      ((float*)out)[i] = v;
    } else {
      unsigned short h;
      if (kind == 1) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
      else asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
      ((unsigned short*)out)[i] = h;
    }
  }
}

// 8 independent dependency chains per thread hide the FMA latency at full occupancy.
__global__ void kvb_fma(float* out, int iterations, float a) {
  float x0 = threadIdx.x * 1e-3f, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
  float x4 = x0 + 4.f, x5 = x0 + 5.f, x6 = x0 + 6.f, x7 = x0 + 7.f;
  const float c = 0.5f;
#pragma unroll 4
  for (int i = 0; i < iterations; ++i) {
    x0 = fmaf(x0, a, c); x1 = fmaf(x1, a, c); x2 = fmaf(x2, a, c); x3 = fmaf(x3, a, c);
    x4 = fmaf(x4, a, c); x5 = fmaf(x5, a, c); x6 = fmaf(x6, a, c); x7 = fmaf(x7, a, c);
  }
  const float s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
  if (s == 1234.5678f) out[0] = s;  // never true; keeps the chains alive
}

__global__ void kvb_empty() {}
)";

constexpr int kFmaChains = 8;
constexpr int kFmaIterations = 4096;
constexpr int kFmaBlock = 256;

struct Events {
  cudaEvent_t start{}, stop{};
  Events() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  double elapsed_ms() const {
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms;
  }
};

struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

Timing summarize(std::vector<double> per_call_ms, const char* mode) {
  std::sort(per_call_ms.begin(), per_call_ms.end());
  const auto at = [&](double q) { return per_call_ms[std::size_t(q * double(per_call_ms.size() - 1) + 0.5)]; };
  Timing t;
  t.status = "ok";
  t.median_ms = at(0.5);
  t.spread = t.median_ms > 0 ? (at(0.9) - at(0.1)) / t.median_ms : 0;
  t.mode = mode;
  return t;
}

}  // namespace

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(fmt::format("kvtune-bench: {}: {}", what, cudaGetErrorString(status)));
}

Timing measure(const Call& call, int slots, cudaStream_t stream, const TimingOptions& options, bool force_graph) {
  slots = std::max(slots, 1);
  int next = 0;
  const auto one = [&] {
    call(next, stream);
    next = (next + 1) % slots;
  };
  Events events;
  // Warm-up: every slot once (loads, first-touch), then an estimate over one rotation.
  for (int i = 0; i < slots; ++i) one();
  check(cudaStreamSynchronize(stream), "warm-up");
  check(cudaEventRecord(events.start, stream), "cudaEventRecord");
  for (int i = 0; i < slots; ++i) one();
  check(cudaEventRecord(events.stop, stream), "cudaEventRecord");
  const double estimate_ms = std::max(events.elapsed_ms() / slots, 1e-4);
  const int warm = int(std::min(10000.0, std::ceil(options.warmup_ms / estimate_ms)));
  for (int i = 0; i < warm; ++i) one();
  check(cudaStreamSynchronize(stream), "warm-up");

  std::string fallback;
  if (options.graphs && (force_graph || estimate_ms * 1e3 < options.graph_threshold_us)) {
    const int batch = int(std::clamp(std::ceil(options.graph_batch_ms / estimate_ms), double(slots), 5000.0));
    Graph g;
    bool captured = false;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      for (int i = 0; i < batch; ++i) one();
      captured = true;
    } catch (const std::exception& e) {
      fallback = e.what();
    }
    const cudaError_t end = cudaStreamEndCapture(stream, &g.graph);
    if (captured && end == cudaSuccess && g.graph != nullptr &&
        cudaGraphInstantiate(&g.exec, g.graph, 0) == cudaSuccess) {
      check(cudaGraphLaunch(g.exec, stream), "cudaGraphLaunch (warm-up)");
      check(cudaStreamSynchronize(stream), "graph warm-up");
      std::vector<double> per_call;
      for (int s = 0; s < options.samples; ++s) {
        check(cudaEventRecord(events.start, stream), "cudaEventRecord");
        check(cudaGraphLaunch(g.exec, stream), "cudaGraphLaunch");
        check(cudaEventRecord(events.stop, stream), "cudaEventRecord");
        per_call.push_back(events.elapsed_ms() / batch);
      }
      return summarize(std::move(per_call), "graph");
    }
    if (fallback.empty()) fallback = cudaGetErrorString(end != cudaSuccess ? end : cudaGetLastError());
    cudaGetLastError();  // capture failures are not sticky; clear them before timing with events
    check(cudaStreamSynchronize(stream), "after a failed capture");
  }
  const int batch = int(std::clamp(std::ceil(options.batch_ms / estimate_ms), 1.0, 10000.0));
  std::vector<double> per_call;
  for (int s = 0; s < options.samples; ++s) {
    check(cudaEventRecord(events.start, stream), "cudaEventRecord");
    for (int i = 0; i < batch; ++i) one();
    check(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    per_call.push_back(events.elapsed_ms() / batch);
  }
  Timing t = summarize(std::move(per_call), "events");
  if (!fallback.empty()) t.message = "graph capture failed, timed with events: " + fallback;
  return t;
}

double copy_gbps(cudaStream_t stream, const TimingOptions& options) {
  const std::size_t bytes = std::size_t(1) << 30;
  tuner::DeviceBuffer a(bytes), b(bytes);
  check(cudaMemsetAsync(a.get(), 0x5A, bytes, stream), "cudaMemsetAsync");
  TimingOptions o = options;
  o.graphs = false;
  const Timing t = measure(
      [&](int, cudaStream_t s) {
        check(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync (1 GiB)");
      },
      1, stream, o);
  return 2.0 * double(bytes) / (t.median_ms * 1e-3) / 1e9;
}

SupportKernels::SupportKernels(const std::string& arch) {
  detail::CompileRequest request;
  request.program_name = "kvtune_bench_support.cu";
  request.source = kSupportSource;
  request.name_expressions = {"kvb_fill", "kvb_fma", "kvb_empty"};
  request.arch = arch;
  const detail::CompileResult compiled = detail::nvrtc_compile(request);
  fill_ = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(0));
  fma_ = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(1));
  empty_ = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(2));
}

void SupportKernels::fill(void* out, long long count, DType dtype, unsigned long long seed, float offset, float scale,
                          cudaStream_t stream) const {
  int kind = dtype == DType::f32 ? 0 : dtype == DType::f16 ? 1 : 2;
  const unsigned grid = unsigned(std::clamp<long long>((count + 255) / 256, 1, 65536));
  tuner::launch_raw(fill_, grid, 256, stream, {&out, &count, &kind, &seed, &offset, &scale}, "kvb_fill");
}

double SupportKernels::fma_tflops(cudaStream_t stream, int sm_count, const TimingOptions& options) const {
  tuner::DeviceBuffer sink(256);
  float* out = sink.as<float>();
  int iterations = kFmaIterations;
  float a = 0.999f;
  const unsigned grid = unsigned(sm_count * (2048 / kFmaBlock));
  TimingOptions o = options;
  o.graphs = false;
  const Timing t = measure(
      [&](int, cudaStream_t s) {
        tuner::launch_raw(fma_, grid, kFmaBlock, s, {&out, &iterations, &a}, "kvb_fma");
      },
      1, stream, o);
  const double flops = 2.0 * kFmaChains * double(kFmaIterations) * double(grid) * kFmaBlock;
  return flops / (t.median_ms * 1e-3) / 1e12;
}

Timing SupportKernels::empty_launch(cudaStream_t stream, const TimingOptions& options, bool graph) const {
  TimingOptions o = options;
  o.graphs = graph;
  const auto launch = [&](int, cudaStream_t s) { tuner::launch_raw(empty_, 1, 32, s, {}, "kvb_empty"); };
  Timing t = measure(launch, 1, stream, o, graph);
  t.label = "empty kernel <<<1, 32>>>";
  return t;
}

}  // namespace kvtune::bench
