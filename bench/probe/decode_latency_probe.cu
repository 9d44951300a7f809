// Where a decode step's time goes under CUDA-graph replay (issue 27's latency target), hand-written
// kernels beside an empty one: each adds one piece of the dwconv_decode step (a dependent load, the
// state's gather, the whole bf16 K = 4 SiLU step), launched plainly and with programmatic dependent
// launch (PDL: the next step's grid starts while this one runs, loads what no earlier kernel writes,
// then waits in griddepcontrol.wait before touching the state and x).
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probe/decode_latency_probe.cu -o decode_latency_probe
//   ./decode_latency_probe            (prints a markdown table, µs per step, 20 steps a graph)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "probe_check.h"

struct Params {
  const __nv_bfloat16* x;       // [batch, channels]
  __nv_bfloat16* y;             // [batch, channels]
  __nv_bfloat16* state;         // [slots, channels, 3]
  const __nv_bfloat16* weight;  // [channels, 4]
  const __nv_bfloat16* bias;    // [channels]
  const int* indices;           // [batch]
  int channels;
};

__device__ __forceinline__ void pdl_wait(bool on) {
  if (on) asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_launch(bool on) {
  if (on) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void k_empty(Params) {}

// One dependent round trip: read the row's index, write it out.
template <bool PDL> __global__ void k_index(Params p) {
  pdl_launch(PDL);
  pdl_wait(PDL);
  if (threadIdx.x == 0) reinterpret_cast<int*>(p.y)[blockIdx.x] = p.indices[blockIdx.x] + 1;
}

// The step: 8 channels a thread, K = 4, bias, SiLU, state indices; a block of 256 threads serves
// 2048 channels of one batch row. EARLY: weights, bias and the index load before the wait; else the
// wait comes first (what the library does: nothing is read before the previous kernel ends).
template <bool PDL, bool IDX, bool EARLY> __global__ void __launch_bounds__(256) k_step(Params p) {
  constexpr int VC = 8, K = 4, H = 3;
  pdl_launch(PDL);
  if (!EARLY) pdl_wait(PDL);
  const int blocks_per_row = p.channels / (256 * VC);
  const int b = blockIdx.x / blocks_per_row;
  const int c0 = ((blockIdx.x % blocks_per_row) * 256 + threadIdx.x) * VC;
  float taps[VC * K], bias[VC], win[VC][K];
  {
    const uint4* w = reinterpret_cast<const uint4*>(p.weight + c0 * K);
#pragma unroll
    for (int i = 0; i < VC * K / 8; ++i) {
      uint4 v = w[i];
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
      for (int u = 0; u < 8; ++u) taps[i * 8 + u] = __bfloat162float(e[u]);
    }
    uint4 v = *reinterpret_cast<const uint4*>(p.bias + c0);
    const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
    for (int u = 0; u < 8; ++u) bias[u] = __bfloat162float(e[u]);
  }
  int slot = b;
  if (IDX) slot = p.indices[b];
  if (EARLY) pdl_wait(PDL);
  {
    uint4 v = *reinterpret_cast<const uint4*>(p.x + b * p.channels + c0);
    const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
    for (int u = 0; u < 8; ++u) win[u][H] = __bfloat162float(e[u]);
  }
  if (slot < 0) return;
  __nv_bfloat16* st = p.state + (static_cast<long long>(slot) * p.channels + c0) * H;
  {
    uint4 v[3];
#pragma unroll
    for (int i = 0; i < 3; ++i) v[i] = reinterpret_cast<const uint4*>(st)[i];
    const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(v);
#pragma unroll
    for (int u = 0; u < VC; ++u)
#pragma unroll
      for (int j = 0; j < H; ++j) win[u][j] = __bfloat162float(e[u * H + j]);
  }
  __align__(16) __nv_bfloat16 out[VC], next[VC * H];
#pragma unroll
  for (int u = 0; u < VC; ++u) {
    float z = bias[u];
#pragma unroll
    for (int k = 0; k < K; ++k) z = fmaf(taps[u * K + k], win[u][k], z);
    out[u] = __float2bfloat16(z / (1.0f + __expf(-z)));
#pragma unroll
    for (int j = 0; j < H; ++j) next[u * H + j] = __float2bfloat16(win[u][j + 1]);
  }
  *reinterpret_cast<uint4*>(p.y + b * p.channels + c0) = *reinterpret_cast<uint4*>(out);
#pragma unroll
  for (int i = 0; i < 3; ++i) reinterpret_cast<uint4*>(st)[i] = reinterpret_cast<uint4*>(next)[i];
}

using Kernel = void (*)(Params);

double graph_us(cudaStream_t s, const std::function<void()>& launch, int steps = 20, int reps = 50) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < steps; ++i) launch();
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&e, g, 0));
  for (int i = 0; i < 5; ++i) CHECK(cudaGraphLaunch(e, s));
  CHECK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, s);
    CHECK(cudaGraphLaunch(e, s));
    cudaEventRecord(b, s);
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.0 / steps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void launch(Kernel k, bool pdl, int grid, int block, cudaStream_t s, const Params& p) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c{};
  c.gridDim = dim3(grid);
  c.blockDim = dim3(block);
  c.stream = s;
  c.attrs = &attr;
  c.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&c, k, p));
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int max_batch = 1024, channels_max = 8192;
  const size_t n = size_t(max_batch) * channels_max;
  Params p{};
  __nv_bfloat16 *x, *y, *state, *w, *bias;
  int* idx;
  CHECK(cudaMalloc(&x, n * 2));
  CHECK(cudaMalloc(&y, n * 2));
  CHECK(cudaMalloc(&state, n * 3 * 2));
  CHECK(cudaMalloc(&w, channels_max * 4 * 2));
  CHECK(cudaMalloc(&bias, channels_max * 2));
  CHECK(cudaMalloc(&idx, max_batch * 4));
  std::vector<unsigned short> h(n * 3);
  for (size_t i = 0; i < h.size(); ++i) h[i] = 0x3c00 + (std::rand() & 0x7f);  // bf16 in [0.0078, 0.0156)
  CHECK(cudaMemcpy(x, h.data(), n * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(state, h.data(), n * 6, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(w, h.data(), channels_max * 8, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(bias, h.data(), channels_max * 2, cudaMemcpyHostToDevice));
  std::vector<int> hi(max_batch);
  for (int i = 0; i < max_batch; ++i) hi[i] = i;
  CHECK(cudaMemcpy(idx, hi.data(), max_batch * 4, cudaMemcpyHostToDevice));
  p = Params{x, y, state, w, bias, idx, 2048};

  std::printf("%s, %d SMs; us a step, median of 50 replays of a 20-step graph\n\n", prop.name, prop.multiProcessorCount);
  std::printf("| kernel | batch x channels | plain | PDL |\n|---|---|---|---|\n");
  auto row = [&](const char* name, Kernel plain, Kernel pdl, int grid, int block, int batch, int channels) {
    Params q = p;
    q.channels = channels;
    const double a = graph_us(s, [&] { launch(plain, false, grid, block, s, q); });
    const double b = graph_us(s, [&] { launch(pdl, true, grid, block, s, q); });
    std::printf("| %s | %d x %d | %.2f | %.2f |\n", name, batch, channels, a, b);
  };
  row("empty, 1 block of 32", k_empty, k_empty, 1, 32, 1, 0);
  row("empty, 1 block of 256", k_empty, k_empty, 1, 256, 1, 0);
  row("empty, 256 blocks of 256", k_empty, k_empty, 256, 256, 1, 0);
  row("index load + store", k_index<false>, k_index<true>, 1, 32, 1, 0);
  for (auto [batch, channels] : std::vector<std::pair<int, int>>{{1, 2048}, {8, 4096}, {64, 4096}, {64, 8192}, {1024, 8192}}) {
    const int grid = batch * channels / 2048;
    row("step, state indices, wait first", k_step<false, true, false>, k_step<true, true, false>, grid, 256, batch, channels);
    row("step, state indices, weights and index before the wait", k_step<false, true, true>, k_step<true, true, true>, grid, 256, batch, channels);
    row("step, no indices, wait first", k_step<false, false, false>, k_step<true, false, false>, grid, 256, batch, channels);
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}
