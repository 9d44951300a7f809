// A separate process for the cross-process cache test: one tuned_normalize call on the default
// context (policy and cache from the environment), then its counters on stdout.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "kvtune/kvtune.h"

int main() {
  try {
    const std::int64_t rows = 4096, cols = 1024;
    std::vector<float> host(std::size_t(rows * cols));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = float((i * 2654435761u) % 1000) / 500.f - 1.f;
    void *x = nullptr, *y = nullptr;
    if (cudaMalloc(&x, host.size() * 4) != cudaSuccess || cudaMalloc(&y, host.size() * 4) != cudaSuccess) return 3;
    cudaMemcpy(x, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
    kvtune::NormalizeArgs args;
    args.x = x;
    args.y = y;
    args.rows = rows;
    args.cols = cols;
    args.mode = kvtune::NormMode::layernorm;
    kvtune::tuned_normalize(args);
    if (cudaDeviceSynchronize() != cudaSuccess) return 4;
    const auto c = kvtune::default_context().counters();
    std::printf("tunes=%llu\ncompiles=%llu\ncache_hits=%llu\ntable_hits=%llu\nvariant=%s\n",
                (unsigned long long)c.tunes, (unsigned long long)c.compiles, (unsigned long long)c.cache_hits,
                (unsigned long long)c.table_hits, kvtune::default_context().normalize_variant(args).c_str());
    cudaFree(x);
    cudaFree(y);
    return 0;
  } catch (const kvtune::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
