// What a pure stream of a normalization's access pattern reaches, with no row structure: the
// ceiling a row kernel of that pattern can approach (issue 25's "≥ 85 % of the byte floor" for the
// backward, "≥ 90 %" for the fused residual add). Patterns, 16-byte vectors, inputs rotated over
// sets that together exceed twice the L2 cache, random data:
//   2-in-1-out  the backward's x, dy -> dx (8192 x 4096 bf16: 64 MiB a stream)
//   2-in-2-out  the residual add's x, r -> s, y (16384 x 1024 bf16: 32 MiB a stream)
//   1-in-1-out  a copy kernel of the same bytes as the pattern
// Each beside cudaMemcpyAsync of the same bytes and of 1 GiB. Variants: U vectors a thread per
// step, all U loads of every input issued before any store; a one-shot grid (each thread its U
// vectors once) or a persistent one (blocks = SMs x k, a grid-stride loop); loads plain or
// ld.global.nc / evict-first (.cs), stores plain or streaming (st.global.cs).
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probe/stream_probe.cu -o stream_probe && ./stream_probe
// Prints a markdown table: µs per call (median of 9 batches of 20 calls) and GB/s of the pattern's
// bytes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.h"

enum Load { kPlain, kNc, kCs };
enum Store { kStore, kStoreCs };

template <int L> __device__ __forceinline__ uint4 load(const uint4* p) {
  if constexpr (L == kNc) return __ldg(p);
  else if constexpr (L == kCs) return __ldcs(p);
  else return *p;
}
template <int S> __device__ __forceinline__ void store(uint4* p, uint4 v) {
  if constexpr (S == kStoreCs) __stcs(p, v);
  else *p = v;
}

__device__ __forceinline__ uint4 mix(uint4 a, uint4 b) { return {a.x + b.x, a.y ^ b.y, a.z + b.z, a.w ^ b.w}; }

struct Streams {
  const uint4* in[2];
  uint4* out[2];
  long long vectors;  // per stream
};

// IN inputs, OUT outputs; out0 = mix(in0, in1), out1 = mix(in1, in0).
template <int IN, int OUT, int U, int L, int S>
__global__ void __launch_bounds__(256) k_stream(Streams s) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x * U;
  for (long long base = (static_cast<long long>(blockIdx.x) * blockDim.x * U) + threadIdx.x; base < s.vectors;
       base += step) {
    uint4 a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = base + static_cast<long long>(u) * blockDim.x;
      if (i < s.vectors) {
        a[u] = load<L>(s.in[0] + i);
        if (IN > 1) b[u] = load<L>(s.in[1] + i);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = base + static_cast<long long>(u) * blockDim.x;
      if (i < s.vectors) {
        store<S>(s.out[0] + i, IN > 1 ? mix(a[u], b[u]) : a[u]);
        if (OUT > 1) store<S>(s.out[1] + i, mix(b[u], a[u]));
      }
    }
  }
}

__global__ void k_fill(unsigned* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += 256LL * gridDim.x) {
    unsigned v = static_cast<unsigned>(i) * 2654435761u ^ seed;
    v ^= v >> 13, v *= 0x5bd1e995u, v ^= v >> 15;
    p[i] = v & 0x3f7f3f7fu;  // finite bf16 pairs / floats
  }
}

template <class F> float median_us(F&& launch, int calls = 20, int batches = 9) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < calls; ++i) launch(i);
  std::vector<float> t;
  for (int r = 0; r < batches; ++r) {
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < calls; ++i) launch(i);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f / calls);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Pattern {
  const char* name;
  int in, out;
  long long bytes_per_stream;
};

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const long long l2 = prop.l2CacheSize;
  std::printf("device: %s, %d SMs, L2 %lld MiB\n\n", prop.name, sms, l2 >> 20);

  // One pool; each set's streams are consecutive slices, sets rotate so the calls of a batch
  // together read more than twice the L2.
  const long long gib = 1LL << 30;
  char* pool = nullptr;
  const long long pool_bytes = 4 * gib;
  CHECK(cudaMalloc(&pool, pool_bytes));
  k_fill<<<4 * sms, 256>>>(reinterpret_cast<unsigned*>(pool), pool_bytes / 4, 12345u);
  CHECK(cudaDeviceSynchronize());

  {
    const float us = median_us([&](int i) {
      CHECK(cudaMemcpyAsync(pool + (i % 2) * 2 * gib, pool + gib + (i % 2) * 2 * gib, gib, cudaMemcpyDeviceToDevice));
    }, 5, 9);
    std::printf("cudaMemcpyAsync 1 GiB: %.1f us, %.0f GB/s (read + write)\n\n", us, 2.0 * gib / us / 1e3);
  }

  const Pattern patterns[] = {{"2-in-1-out (backward 8192x4096 bf16)", 2, 1, 64LL << 20},
                              {"2-in-2-out (residual 16384x1024 bf16)", 2, 2, 32LL << 20},
                              {"2-in-1-out (backward 1024x65536 bf16)", 2, 1, 128LL << 20},
                              {"2-in-1-out (backward 1024x1024 bf16)", 2, 1, 2LL << 20}};
  for (const Pattern& pat : patterns) {
    const long long set_bytes = pat.bytes_per_stream * (pat.in + pat.out);
    const int sets = static_cast<int>(std::max<long long>(1, std::min<long long>(pool_bytes / set_bytes,
                                                                                  (2 * l2 + set_bytes - 1) / set_bytes + 1)));
    const long long vectors = pat.bytes_per_stream / 16;
    auto streams = [&](int i) {
      char* base = pool + static_cast<long long>(i % sets) * set_bytes;
      Streams s{};
      for (int k = 0; k < pat.in; ++k) s.in[k] = reinterpret_cast<const uint4*>(base + k * pat.bytes_per_stream);
      for (int k = 0; k < pat.out; ++k) s.out[k] = reinterpret_cast<uint4*>(base + (pat.in + k) * pat.bytes_per_stream);
      s.vectors = vectors;
      return s;
    };
    std::printf("## %s: %lld MiB a stream, %lld MiB moved a call, %d sets\n\n", pat.name, pat.bytes_per_stream >> 20,
                set_bytes >> 20, sets);
    std::printf("| variant | us | GB/s |\n|---|---|---|\n");
    const auto row = [&](const std::string& name, float us) {
      std::printf("| %s | %.2f | %.0f |\n", name.c_str(), us, double(set_bytes) / us / 1e3);
    };
    row("cudaMemcpyAsync, same bytes", median_us([&](int i) {
          char* base = pool + static_cast<long long>(i % sets) * set_bytes;
          CHECK(cudaMemcpyAsync(base + set_bytes / 2, base, set_bytes / 2, cudaMemcpyDeviceToDevice));
        }));
    const auto run = [&](auto kernel, const char* name, int blocks_per_sm, int u) {
      const long long threads_needed = (vectors + u - 1) / u;
      const int grid = blocks_per_sm > 0 ? sms * blocks_per_sm : static_cast<int>((threads_needed + 255) / 256);
      row(std::string(name) + (blocks_per_sm > 0 ? ", persistent " + std::to_string(blocks_per_sm) + "/SM" : ", one-shot"),
          median_us([&](int i) { kernel<<<grid, 256>>>(streams(i)); }));
    };
#define KV(U, L, S)                                                                                  \
  do {                                                                                               \
    const char* nm = "U=" #U ", load " #L ", store " #S;                                               \
    if (pat.out == 1) {                                                                              \
      run(k_stream<2, 1, U, L, S>, nm, 0, U);                                                        \
      run(k_stream<2, 1, U, L, S>, nm, 8, U);                                                        \
    } else {                                                                                         \
      run(k_stream<2, 2, U, L, S>, nm, 0, U);                                                        \
      run(k_stream<2, 2, U, L, S>, nm, 8, U);                                                        \
    }                                                                                                \
  } while (0)
    KV(1, kPlain, kStore);
    KV(2, kPlain, kStore);
    KV(4, kPlain, kStore);
    KV(8, kPlain, kStore);
    KV(2, kNc, kStore);
    KV(4, kNc, kStore);
    KV(2, kPlain, kStoreCs);
    KV(4, kPlain, kStoreCs);
    KV(4, kCs, kStoreCs);
    KV(4, kNc, kStoreCs);
#undef KV
    std::printf("\n");
  }
  CHECK(cudaFree(pool));
  return 0;
}
