// kvtune-bench's timing and roofline measurements (see bench_timing.h and docs/PERFORMANCE.md).
#include "tools/bench_timing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/nvrtc.h"
#include "tuner/event_timer.h"
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

__global__ void kvb_empty() {}
)";

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
  tuner::EventTimer timer;
  // Warm-up: every slot once (loads, first-touch), then an estimate over one rotation.
  for (int i = 0; i < slots; ++i) one();
  check(cudaStreamSynchronize(stream), "warm-up");
  timer.start(stream);
  for (int i = 0; i < slots; ++i) one();
  timer.stop(stream);
  const double estimate_ms = std::max(timer.elapsed_ms() / slots, 1e-4);
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
        timer.start(stream);
        check(cudaGraphLaunch(g.exec, stream), "cudaGraphLaunch");
        timer.stop(stream);
        per_call.push_back(timer.elapsed_ms() / batch);
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
    timer.start(stream);
    for (int i = 0; i < batch; ++i) one();
    timer.stop(stream);
    per_call.push_back(timer.elapsed_ms() / batch);
  }
  Timing t = summarize(std::move(per_call), "events");
  if (!fallback.empty()) t.message = "graph capture failed, timed with events: " + fallback;
  return t;
}

SupportKernels::SupportKernels(const std::string& arch) {
  detail::CompileRequest request;
  request.program_name = "kvtune_bench_support.cu";
  request.source = kSupportSource;
  request.name_expressions = {"kvb_fill", "kvb_empty"};
  request.arch = arch;
  const detail::CompileResult compiled = detail::nvrtc_compile(request);
  fill_ = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(0));
  empty_ = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(1));
}

void SupportKernels::fill(void* out, long long count, DType dtype, unsigned long long seed, float offset, float scale,
                          cudaStream_t stream) const {
  int kind = dtype == DType::f32 ? 0 : dtype == DType::f16 ? 1 : 2;
  const unsigned grid = unsigned(std::clamp<long long>((count + 255) / 256, 1, 65536));
  tuner::launch_raw(fill_, grid, 256, stream, {&out, &count, &kind, &seed, &offset, &scale}, "kvb_fill");
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
