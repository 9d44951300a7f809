// kvtune-demo: the main job. Measures the copy roofline, then tunes and runs both operators —
// tuned_normalize and tuned_dwconv (forward, input gradient, weight gradient) — on a few shapes and
// prints shape, chosen variant, time, GB/s and % of the measured copy bandwidth.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kvtune/kvtune.h"
#include "tools/ceilings.h"
#include "tuner/event_timer.h"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw kvtune::Error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

// Device buffers of `bytes` each, filled with finite pseudo-random 16-bit patterns (f16 values in
// [1, 2) for 16-bit types; small positive floats for f32). Never zeros.
struct Buffers {
  std::vector<void*> ptrs;
  Buffers(int count, std::size_t bytes) : ptrs(std::size_t(count), nullptr) {
    std::vector<unsigned short> noise(bytes / 2);
    for (int i = 0; i < count; ++i) {
      check(cudaMalloc(&ptrs[std::size_t(i)], bytes), "cudaMalloc");
      for (std::size_t k = 0; k < noise.size(); ++k)
        noise[k] = static_cast<unsigned short>(0x3C00u + ((k * 2654435761u + unsigned(i)) >> 7) % 0x0400u);
      check(cudaMemcpy(ptrs[std::size_t(i)], noise.data(), noise.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
  }
  ~Buffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  Buffers(const Buffers&) = delete;
  void* operator[](int i) const { return ptrs[std::size_t(i)]; }
};

// Enough rotation sets that one round of `bytes_per_call` exceeds twice the L2.
int rotation(std::size_t bytes_per_call, int l2_bytes) {
  return int(std::clamp<std::size_t>(2 * std::size_t(l2_bytes) / std::max<std::size_t>(bytes_per_call, 1) + 1, 1, 64));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtune-demo: tune and run tuned_normalize and tuned_dwconv on a few shapes against the copy roofline"};
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
    const double copy = kvtune::tools::measure_copy_gbps(nullptr, 9);
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
      const int copies = rotation(2 * bytes, prop.l2CacheSize);
      const Buffers xs(copies, bytes), ys(copies, bytes);
      kvtune::NormalizeArgs args;
      args.rows = s.rows;
      args.cols = s.cols;
      args.dtype = s.dtype;
      args.mode = s.mode;
      args.x = xs[0];
      args.y = ys[0];
      const std::string variant = context.normalize_variant(args);  // tunes on first sight
      int next = 0;
      const double ms = kvtune::tuner::median_ms(
          [&] {
            args.x = xs[next];
            args.y = ys[next];
            next = (next + 1) % copies;
            context.normalize(args);
          },
          nullptr, 20, 15);
      const double gbps = 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
      fmt::print("{:>14} {:>5} {:>11} {:<46} {:>9.2f} {:>8.0f} {:>6.1f}%\n", fmt::format("{}x{}", s.rows, s.cols),
                 kvtune::to_string(s.dtype), kvtune::to_string(s.mode), variant, ms * 1e3, gbps, 100 * gbps / copy);
    }

    // Depthwise convolution: model bytes are each input read once and each output written once
    // (the filter is negligible), as in kvtune-bench.
    fmt::print("\n{:<34} {:>15} {:<44} {:>9} {:>8} {:>7}\n", "depthwise convolution", "direction", "variant",
               "time us", "GB/s", "% copy");
    struct Conv {
      const char* name;
      kvtune::DwLayout layout;
      std::int64_t n, c, h, w;
      int k;
      bool causal;
    };
    const Conv convs[] = {
        {"Mamba causal K=4 8x4096x2048 NCL", kvtune::DwLayout::ncl, 8, 4096, 1, 2048, 4, true},
        {"MobileNetV2 3x3 32x144x56x56 NCHW", kvtune::DwLayout::nchw, 32, 144, 56, 56, 3, false},
    };
    for (const auto& cv : convs)
      for (kvtune::DwDirection dir :
           {kvtune::DwDirection::forward, kvtune::DwDirection::backward_data, kvtune::DwDirection::backward_weight}) {
        const bool two_d = cv.h > 1;
        const std::size_t tensor = std::size_t(cv.n * cv.c * cv.h * cv.w) * 4;  // f32, same size in and out
        const std::size_t filter = std::size_t(cv.c * cv.k * (two_d ? cv.k : 1)) * 4;
        // Forward and input gradient read one tensor and write one; the weight gradient reads two.
        const std::size_t bytes = 2 * tensor + filter;
        const int copies = rotation(bytes, prop.l2CacheSize);
        const Buffers in(copies, tensor), out(copies, tensor), weights(copies, filter);
        kvtune::DwConvArgs a;
        a.direction = dir;
        a.layout = cv.layout;
        a.n = cv.n;
        a.c = cv.c;
        a.h = cv.h;
        a.w = cv.w;
        a.kernel_w = cv.k;
        a.kernel_h = two_d ? cv.k : 1;
        a.causal = cv.causal;
        if (!cv.causal) a.pad_left = a.pad_right = a.pad_top = a.pad_bottom = cv.k / 2;
        if (!two_d) a.pad_top = a.pad_bottom = 0;
        int next = 0;
        const auto bind = [&] {
          if (dir == kvtune::DwDirection::forward) {
            a.x = in[next], a.weight = weights[next], a.y = out[next];
          } else if (dir == kvtune::DwDirection::backward_data) {
            a.dy = in[next], a.weight = weights[next], a.dx = out[next];
          } else {
            a.x = in[next], a.dy = out[next], a.dweight = weights[next];
          }
          next = (next + 1) % copies;
        };
        bind();
        const std::string variant = context.dwconv_variant(a);  // tunes on first sight
        const double ms = kvtune::tuner::median_ms(
            [&] {
              bind();
              context.dwconv(a);
            },
            nullptr, 20, 15);
        const double gbps = double(bytes) / (ms * 1e-3) / 1e9;
        fmt::print("{:<34} {:>15} {:<44} {:>9.2f} {:>8.0f} {:>6.1f}%\n", cv.name, kvtune::to_string(dir), variant,
                   ms * 1e3, gbps, 100 * gbps / copy);
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
