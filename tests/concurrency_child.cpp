// One process of the concurrency test ([gpu][reliability] in test_gpu_tuner.cpp): 4 threads,
// each on its own stream, call normalize and dwconv on an overlapping set of problems through one
// Context against the shared cache file given as argv[1] (policy tune, small budget). Every
// normalize and dwconv output is checked against the float64 reference. Prints one line of counters; exit status 1
// when any call failed or any output was wrong.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "gpu_check.h"

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kvtune/kvtune.h"
#include "core/cuda_check.h"

using namespace kvtune;

namespace {

// A forward depthwise convolution (f32) on random inputs, checked against the float64 reference.
struct DwCase {
  DwConvArgs args;
  std::vector<void*> buffers;
  std::vector<float> x, weight;
  DwCase(DwLayout layout, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, int k, std::uint64_t seed) {
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
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    x.resize(std::size_t(n * c * h * w));
    weight.resize(std::size_t(c * args.kernel_h * args.kernel_w));
    for (auto& v : x) v = u(rng);
    for (auto& v : weight) v = u(rng);
    args.x = upload(x);
    args.weight = upload(weight);
    const dwconv::Problem p = dwconv::make_problem(args);
    void* y = nullptr;
    detail::cuda_check(cudaMalloc(&y, std::size_t(n * c * p.out_h() * p.out_w()) * 4), "cudaMalloc");
    buffers.push_back(y);
    args.y = y;
    // The copies ran on the legacy stream; the calls run on non-blocking streams.
    detail::cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  void* upload(const std::vector<float>& host) {
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, host.size() * 4), "cudaMalloc");
    buffers.push_back(p);
    detail::cuda_check(cudaMemcpy(p, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    return p;
  }
  // Largest |y - reference| after the call on `stream`.
  double max_error(cudaStream_t stream) const {
    const dwconv::Problem p = dwconv::make_problem(args);
    const auto reference = dwconv::reference_forward(p, args.n, std::vector<double>(x.begin(), x.end()),
                                                     std::vector<double>(weight.begin(), weight.end()), {});
    std::vector<float> y(reference.size());
    detail::cuda_check(cudaMemcpyAsync(y.data(), args.y, y.size() * 4, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    double worst = 0;
    for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(double(y[i]) - reference[i]));
    return worst;
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
                     (pick % 2) ? 4 : 3, std::uint64_t(process * 1000 + t * 10 + i));
            for (int repeat = 0; repeat < 4; ++repeat) ctx.dwconv(d.args, stream);
            if (const double error = d.max_error(stream); error > 1e-4) {
              errors[std::size_t(t)] = fmt::format("wrong dwconv output: {} max error {:.3g}; variant now {}",
                                                   dwconv::make_problem(d.args).key(), error,
                                                   ctx.dwconv_variant(d.args, stream));
              ++failures;
            }
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
