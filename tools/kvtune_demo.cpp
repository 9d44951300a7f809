// kvtune-demo: the main job. Measures the copy roofline, then tunes and runs tuned_normalize on a
// few shapes and prints shape, chosen variant, time, GB/s and % of the measured copy bandwidth.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kvtune/kvtune.h"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw kvtune::Error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

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
};

template <class F>
double median_ms(F&& body, int batch, int samples = 15) {
  Events e;
  body();  // warm-up
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    check(cudaEventRecord(e.start), "cudaEventRecord");
    for (int i = 0; i < batch; ++i) body();
    check(cudaEventRecord(e.stop), "cudaEventRecord");
    check(cudaEventSynchronize(e.stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e.start, e.stop), "cudaEventElapsedTime");
    t.push_back(ms / batch);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Device-to-device copy of 1 GiB, bytes read + written per second.
double copy_bandwidth_gbps() {
  const std::size_t bytes = std::size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  check(cudaMalloc(&b, bytes), "cudaMalloc");
  check(cudaMemset(a, 1, bytes), "cudaMemset");
  const double ms = median_ms([&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); }, 3, 9);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtune-demo: tune and run tuned_normalize on a few shapes against the copy roofline"};
  std::string policy = "tune";
  app.add_option("--policy", policy, "tune, heuristic or cached")->check(CLI::IsMember({"tune", "heuristic", "cached"}));
  CLI11_PARSE(app, argc, argv);

  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "kvtune-demo: no CUDA GPU available (%s). kvtune needs an NVIDIA GPU with compute "
                 "capability 8.0 or newer; the tests still run without one.\n",
                 status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 2;
  }
  try {
    kvtune::ContextOptions options = kvtune::ContextOptions::from_environment();
    options.policy = kvtune::parse_policy(policy);
    kvtune::Context context(options);
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    const double copy = copy_bandwidth_gbps();
    fmt::print("kvtune {} on {} ({} SMs, {} MiB L2); cache {}\n", kvtune::version(), prop.name,
               prop.multiProcessorCount, prop.l2CacheSize >> 20,
               context.cache_path_in_use().empty() ? "in memory" : context.cache_path_in_use());
    fmt::print("copy bandwidth (1 GiB device-to-device, read + write): {:.0f} GB/s\n\n", copy);
    fmt::print("{:>14} {:>5} {:>11} {:<46} {:>9} {:>8} {:>7}\n", "rows x cols", "dtype", "mode", "variant",
               "time us", "GB/s", "% copy");

    struct Shape {
      std::int64_t rows, cols;
      kvtune::DType dtype;
      kvtune::NormMode mode;
    };
    const Shape shapes[] = {
        {1024, 128, kvtune::DType::f32, kvtune::NormMode::standardize},
        {4096, 256, kvtune::DType::f32, kvtune::NormMode::standardize},
        {8192, 512, kvtune::DType::f32, kvtune::NormMode::standardize},
        {16384, 1024, kvtune::DType::f32, kvtune::NormMode::standardize},
        {100000, 37, kvtune::DType::f32, kvtune::NormMode::layernorm},
        {65536, 1024, kvtune::DType::f32, kvtune::NormMode::layernorm},
        {32768, 4096, kvtune::DType::bf16, kvtune::NormMode::rmsnorm},
    };
    for (const auto& s : shapes) {
      const std::size_t elem = s.dtype == kvtune::DType::f32 ? 4 : 2;
      const std::size_t bytes = std::size_t(s.rows * s.cols) * elem;
      // Rotate through enough buffers that one round exceeds twice the L2.
      const int copies = int(std::clamp<std::size_t>(2 * std::size_t(prop.l2CacheSize) / (2 * bytes) + 1, 1, 64));
      std::vector<void*> xs(copies), ys(copies);
      for (int i = 0; i < copies; ++i) {
        check(cudaMalloc(&xs[i], bytes), "cudaMalloc");
        check(cudaMalloc(&ys[i], bytes), "cudaMalloc");
        std::vector<unsigned short> noise(bytes / 2);
        for (std::size_t k = 0; k < noise.size(); ++k)
          noise[k] = static_cast<unsigned short>(0x3C00u + ((k * 2654435761u + i) >> 7) % 0x0400u);  // finite values
        check(cudaMemcpy(xs[i], noise.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      }
      kvtune::NormalizeArgs args;
      args.rows = s.rows;
      args.cols = s.cols;
      args.dtype = s.dtype;
      args.mode = s.mode;
      args.x = xs[0];
      args.y = ys[0];
      const std::string variant = context.normalize_variant(args);  // tunes on first sight
      int next = 0;
      const double ms = median_ms(
          [&] {
            args.x = xs[next];
            args.y = ys[next];
            next = (next + 1) % copies;
            context.normalize(args);
          },
          20);
      const double gbps = 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
      fmt::print("{:>14} {:>5} {:>11} {:<46} {:>9.2f} {:>8.0f} {:>6.1f}%\n", fmt::format("{}x{}", s.rows, s.cols),
                 kvtune::to_string(s.dtype), kvtune::to_string(s.mode), variant, ms * 1e3, gbps, 100 * gbps / copy);
      for (int i = 0; i < copies; ++i) {
        cudaFree(xs[i]);
        cudaFree(ys[i]);
      }
    }
    const auto c = context.counters();
    fmt::print("\ncounters: calls={} table_hits={} cache_hits={} tunes={} heuristic={} compiles={} timed={} "
               "rejected={}\n",
               c.calls, c.table_hits, c.cache_hits, c.tunes, c.heuristic_uses, c.compiles, c.variants_timed,
               c.variants_rejected);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune-demo: %s\n", e.what());
    return 1;
  }
}
