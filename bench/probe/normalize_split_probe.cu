// Times each phase of the split-row forward (kernel_templates/normalize/normalize_split.cuh) on its
// own, outside the tuner, for hand-picked shapes and configurations, so that the wide rows' time can
// be placed phase by phase (bench/NOTES.md, 2026-11-29):
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ikernel_templates -Ikernel_templates/normalize \
//        bench/probe/normalize_split_probe.cu -o /tmp/split_probe && /tmp/split_probe
// Two buffer sets alternate round by round (each plane is larger than the L2), so a round's phase 0
// reads x from DRAM; its phase 2 re-reads it as the library's does. Each phase is its own kernel
// (the template's first argument), as in the library since 2026-11-29. Per case: each
// phase's median time over 15 rounds, and the bandwidth of the bytes it must move (phase 0: x;
// phase 2: x, y, gamma / beta once).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "normalize.cu"

namespace {

int g_persistent = 0;  // PROBE_PERSISTENT
const char* g_only = nullptr;  // PROBE_ONLY: run only the cases whose name holds this text (for ncu)

template <class T>
__global__ void fill(T* p, long long n, unsigned seed, float offset) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = kvt_from_float<T>(offset + ((x & 0xffffff) / 16777216.0f) - 0.5f);
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T, int TPR, int VW, int ITEMS, int MODE, int AFFINE, int LOOP = 0>
void run_case(const char* name, long long rows, long long cols) {
  if (g_only != nullptr && std::strstr(name, g_only) == nullptr) return;
  constexpr long long kSlice = (long long)ITEMS * TPR * VW;
  const long long splits = (cols + kSlice - 1) / kSlice;
  const long long n = rows * cols;
  T *x[2], *y[2], *gamma, *beta;
  float *partials, *finals;
  for (int s = 0; s < 2; ++s) {
    check(cudaMalloc(&x[s], n * sizeof(T)), "cudaMalloc x");
    check(cudaMalloc(&y[s], n * sizeof(T)), "cudaMalloc y");
    fill<<<1024, 256>>>(x[s], n, 17u + s, 0.5f);
  }
  check(cudaMalloc(&gamma, cols * sizeof(T)), "cudaMalloc gamma");
  check(cudaMalloc(&beta, cols * sizeof(T)), "cudaMalloc beta");
  fill<<<1024, 256>>>(gamma, cols, 5u, 1.0f);
  fill<<<1024, 256>>>(beta, cols, 6u, 0.0f);
  check(cudaMalloc(&partials, rows * splits * (TPR / 32) * 4 * sizeof(float)), "cudaMalloc partials");
  check(cudaMalloc(&finals, rows * 3 * sizeof(float)), "cudaMalloc finals");
  check(cudaDeviceSynchronize(), "fill");

  KvtNormalizeParams p{};
  p.gamma = (AFFINE & 1) ? gamma : nullptr;
  p.beta = (AFFINE & 2) ? beta : nullptr;
  p.rows = rows;
  p.cols = cols;
  p.ld_x = p.ld_y = cols;
  p.eps = 1e-5f;
  p.ddof = 0;
  p.row_partials = partials;
  p.row_final = finals;
  p.splits = splits;
  p.row_loop = LOOP != 0 ? 4 : 1;  // LOOP: the output phase takes 4 rows a block (config `loop=4`)
  const std::vector<int> phases = {0, 1, 2};

  // PROBE_PERSISTENT=k: phases 0 and 2 launch k x (the blocks the GPU holds at once) and loop over
  // the (row, slice) items; unset or 0: one block per item (the library's grid).
  unsigned resident[2] = {0, 0};
  {
    int sms = 0, per_sm0 = 0, per_sm2 = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm0, kvt_normalize_split<0, T, TPR, VW, ITEMS, MODE, AFFINE, 0, 0, LOOP>, TPR, 0);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm2, kvt_normalize_split<2, T, TPR, VW, ITEMS, MODE, AFFINE, 0, 0, LOOP>, TPR, 0);
    resident[0] = unsigned(sms * per_sm0), resident[1] = unsigned(sms * per_sm2);
  }
  cudaEvent_t ev[4];
  for (auto& e : ev) check(cudaEventCreate(&e), "cudaEventCreate");
  std::vector<std::vector<float>> times(phases.size());
  std::vector<float> totals;
  const int rounds = 18, warm = 3;
  for (int r = 0; r < rounds; ++r) {
    p.x = x[r % 2];
    p.y = y[r % 2];
    cudaEventRecord(ev[0]);
    for (std::size_t i = 0; i < phases.size(); ++i) {
      unsigned grid = (unsigned)(phases[i] == 1 ? rows : phases[i] == 2 ? (rows + p.row_loop - 1) / p.row_loop * splits
                                                                       : rows * splits);
      if (phases[i] != 1 && g_persistent > 0) grid = std::min<unsigned>(grid, resident[phases[i] / 2] * g_persistent);
      if (phases[i] == 0) kvt_normalize_split<0, T, TPR, VW, ITEMS, MODE, AFFINE, 0, 0, LOOP><<<grid, TPR>>>(p, KvtResidualParams{});
      if (phases[i] == 1) kvt_normalize_split<1, T, TPR, VW, ITEMS, MODE, AFFINE, 0, 0, LOOP><<<grid, TPR>>>(p, KvtResidualParams{});
      if (phases[i] == 2) kvt_normalize_split<2, T, TPR, VW, ITEMS, MODE, AFFINE, 0, 0, LOOP><<<grid, TPR>>>(p, KvtResidualParams{});
      cudaEventRecord(ev[i + 1]);
    }
    check(cudaEventSynchronize(ev[phases.size()]), "round");
    if (r < warm) continue;
    for (std::size_t i = 0; i < phases.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, ev[i], ev[i + 1]);
      times[i].push_back(ms * 1e3f);
    }
    float total = 0;
    cudaEventElapsedTime(&total, ev[0], ev[phases.size()]);
    totals.push_back(total * 1e3f);
  }
  check(cudaGetLastError(), "launch");
  const double plane = double(n) * sizeof(T);
  const double affine_bytes = double(cols) * sizeof(T) * (((AFFINE & 1) ? 1 : 0) + ((AFFINE & 2) ? 1 : 0));
  std::printf("%-44s tpr=%d items=%d slice=%lld splits=%lld loop=%d resident=%u/%u persistent=%d\n", name, TPR, ITEMS,
              kSlice, splits, p.row_loop, resident[0], resident[1], g_persistent);
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const float us = median(times[i]);
    const double bytes = phases[i] == 0 ? plane : phases[i] == 2 ? 2 * plane + affine_bytes : 0;
    std::printf("    phase %d: %9.1f us", phases[i], us);
    if (bytes > 0) std::printf("  %7.0f GB/s", bytes / (us * 1e-6) / 1e9);
    std::printf("\n");
  }
  const float total = median(totals);
  std::printf("    round:   %9.1f us  (model 2 planes + affine: %.0f GB/s)\n", total,
              (2 * plane + affine_bytes) / (total * 1e-6) / 1e9);
  for (int s = 0; s < 2; ++s) cudaFree(x[s]), cudaFree(y[s]);
  cudaFree(gamma), cudaFree(beta), cudaFree(partials), cudaFree(finals);
  for (auto& e : ev) cudaEventDestroy(e);
}

}  // namespace

int main() {
  if (const char* v = std::getenv("PROBE_PERSISTENT")) g_persistent = std::atoi(v);
  g_only = std::getenv("PROBE_ONLY");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  // Mode: 1 layernorm, 2 rmsnorm. AFFINE: 1 gamma, 2 beta. VW in elements (8 bf16 = 16 B).
  // The tuned winners of normalize-wide (2026-11-29, H200; 64 x 2^22 layernorm bf16 is 256 x 4 since
  // the phases are kernels of their own) and their neighbours.
  run_case<kvt_bf16, 512, 8, 2, 1, 3>("64 x 2^22 layernorm bf16 (winner)", 64, 1LL << 22);
  run_case<kvt_bf16, 512, 8, 2, 1, 0>("64 x 2^22 layernorm bf16, no gamma/beta", 64, 1LL << 22);
  run_case<kvt_bf16, 512, 8, 2, 2, 1>("64 x 2^22 rmsnorm bf16", 64, 1LL << 22);
  run_case<kvt_bf16, 256, 8, 4, 1, 3>("64 x 2^22 layernorm bf16", 64, 1LL << 22);
  run_case<kvt_bf16, 512, 8, 8, 1, 3>("64 x 2^22 layernorm bf16", 64, 1LL << 22);
  run_case<kvt_bf16, 256, 8, 4, 2, 1>("256 x 2^20 rmsnorm bf16 (winner)", 256, 1LL << 20);
  run_case<kvt_bf16, 256, 8, 4, 1, 3>("256 x 2^20 layernorm bf16", 256, 1LL << 20);
  run_case<kvt_bf16, 512, 8, 2, 1, 3>("256 x 2^20 layernorm bf16", 256, 1LL << 20);
  run_case<float, 256, 4, 4, 1, 3>("128 x 2^20 layernorm f32 (winner)", 128, 1LL << 20);
  run_case<float, 1024, 4, 4, 2, 1>("8 x 2^22 rmsnorm f32 (winner)", 8, 1LL << 22);
  // Few rows: phase 1 (one block a row, 4,096 warp partials each) is a large part of the round.
  run_case<kvt_bf16, 256, 8, 4, 1, 3>("4 x 2^22 layernorm bf16 (winner)", 4, 1LL << 22);
  run_case<float, 256, 4, 4, 1, 3>("2 x 2^20 layernorm f32 (phased)", 2, 1LL << 20);
  // The output phase's row loop (gamma / beta loaded once for 4 rows).
  run_case<kvt_bf16, 256, 8, 4, 1, 3, 1>("64 x 2^22 layernorm bf16, loop 4", 64, 1LL << 22);
  run_case<kvt_bf16, 512, 8, 2, 1, 3, 1>("64 x 2^22 layernorm bf16, loop 4", 64, 1LL << 22);
  run_case<kvt_bf16, 256, 8, 4, 2, 1, 1>("256 x 2^20 rmsnorm bf16, loop 4", 256, 1LL << 20);
  run_case<kvt_bf16, 512, 8, 2, 2, 1, 1>("256 x 2^20 rmsnorm bf16, loop 4", 256, 1LL << 20);
  run_case<float, 256, 4, 4, 1, 3, 1>("128 x 2^20 layernorm f32, loop 4", 128, 1LL << 20);
  run_case<float, 1024, 4, 4, 2, 1, 1>("8 x 2^22 rmsnorm f32, loop 4", 8, 1LL << 22);
  run_case<float, 512, 4, 4, 2, 1, 1>("8 x 2^22 rmsnorm f32, loop 4", 8, 1LL << 22);
  return 0;
}
