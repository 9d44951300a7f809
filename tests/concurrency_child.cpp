// One process of the concurrency test ([gpu][reliability] in test_gpu_tuner.cpp): 4 threads,
// each on its own stream, call normalize and dwconv on an overlapping set of problems through one
// Context against the shared cache file given as argv[1] (policy tune, small budget). Normalize
// outputs are checked against the float64 reference. Prints one line of counters; exit status 1
// when any call failed or any output was wrong.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gpu_check.h"

#include "kvtune/kvtune.h"
#include "lib/src/cuda_check.h"

using namespace kvtune;

namespace {

// A depthwise convolution with device tensors filled with a non-zero pattern.
struct DwCase {
  DwConvArgs args;
  std::vector<void*> buffers;
  DwCase(DwLayout layout, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, int k) {
    args.direction = DwDirection::forward;
    args.layout = layout;
    args.n = n, args.c = c, args.h = h, args.w = w;
    args.kernel_w = k;
    if (h > 1) {
      args.kernel_h = k;
      args.pad_top = args.pad_bottom = args.pad_left = args.pad_right = k / 2;
    } else {
      args.causal = true;
    }
    const std::size_t elems = std::size_t(n * c * h * w) * 4;
    args.x = alloc(elems);
    args.y = alloc(elems);
    args.weight = alloc(std::size_t(c) * std::size_t(k * k) * 4);
    // The memsets ran on the legacy stream; the calls run on non-blocking streams.
    detail::cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
    detail::cuda_check(cudaMemset(p, 0x3c, bytes), "cudaMemset");
    buffers.push_back(p);
    return p;
  }
  ~DwCase() {
    for (void* p : buffers) cudaFree(p);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CACHE PROCESS_INDEX\n", argv[0]);
    return 2;
  }
  ContextOptions o = ContextOptions::from_environment();  // KVTUNE_LOG=info explains a failure
  if (o.log_level.empty()) o.log_level = "warn";
  o.policy = Policy::tune;
  o.cache_path = argv[1];
  o.budget_variants = 6;
  o.timing_samples = 5;
  o.compile_threads = 2;
  const int process = std::atoi(argv[2]);
  std::atomic<int> failures{0};
  std::vector<std::string> errors(4);
  try {
    Context ctx(o);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        try {
          detail::cuda_check(cudaSetDevice(0), "cudaSetDevice");
          cudaStream_t stream = nullptr;
          detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
          const std::int64_t rows[] = {1000, 3000, 9000};
          const std::int64_t cols[] = {256, 1024};
          for (int i = 0; i < 6; ++i) {
            const int pick = (process + t + i) % 6;
            test::LayerNormCase c(rows[pick % 3], cols[pick / 3], std::uint64_t(process * 1000 + t * 10 + i));
            for (int repeat = 0; repeat < 4; ++repeat) ctx.normalize(c.args(), stream);
            if (const double error = c.max_error(stream); error > 1e-4) {
              // Once more with the entry the table holds now: tells a bad provisional entry from a
              // bad final one.
              ctx.normalize(c.args(), stream);
              errors[std::size_t(t)] = fmt::format(
                  "wrong normalize output: rows={} cols={} max error {:.3g}; variant now {}, max error of one more "
                  "call {:.3g}",
                  rows[pick % 3], cols[pick / 3], error, ctx.normalize_variant(c.args(), stream), c.max_error(stream));
              ++failures;
            }
            DwCase d((pick % 2) ? DwLayout::ncl : DwLayout::nchw, 2, 64, (pick % 2) ? 1 : 28, (pick % 2) ? 2048 : 28,
                     (pick % 2) ? 4 : 3);
            ctx.dwconv(d.args, stream);
            detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          }
          cudaStreamDestroy(stream);
        } catch (const std::exception& e) {
          errors[std::size_t(t)] = e.what();
          ++failures;
        }
      });
    for (auto& t : threads) t.join();
    const Counters n = ctx.counters();
    std::printf("process=%d calls=%llu tunes=%llu lease_waits=%llu cache_hits=%llu failures=%d\n", process,
                static_cast<unsigned long long>(n.calls), static_cast<unsigned long long>(n.tunes),
                static_cast<unsigned long long>(n.lease_waits), static_cast<unsigned long long>(n.cache_hits),
                failures.load());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "process %d: %s\n", process, e.what());
    return 1;
  }
  for (const auto& e : errors)
    if (!e.empty()) std::fprintf(stderr, "process %d: %s\n", process, e.c_str());
  return failures == 0 ? 0 : 1;
}
