#include "tuner/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "kvtune/error.h"
#include "lib/src/cuda_check.h"

namespace kvtune::tuner {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Owns a pair of CUDA events.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    detail::cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    detail::cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  float elapsed_ms() const {
    float ms = 0;
    detail::cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    detail::cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms;
  }
};

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

}  // namespace

const char* to_string(Status status) {
  switch (status) {
    case Status::ok: return "ok";
    case Status::compile_failed: return "compile_failed";
    case Status::resources_exceeded: return "resources_exceeded";
    case Status::launch_failed: return "launch_failed";
    case Status::wrong_result: return "wrong_result";
    case Status::timed_out: return "timed_out";
  }
  return "?";
}

std::vector<Compiled> compile_all(const std::vector<Candidate>& candidates, int threads) {
  std::vector<Compiled> results(candidates.size());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(candidates.size()));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < candidates.size(); i = next++) {
      Compiled& out = results[i];
      try {
        auto compiled = detail::nvrtc_compile(candidates[i].request);
        out.cubin = std::move(compiled.cubin);
        out.lowered_name = compiled.lowered_names.at(0);
        out.seconds = compiled.seconds;
        out.binary_hash = detail::compile_hash(candidates[i].request);
      } catch (const std::exception& e) {
        out.status = Status::compile_failed;
        out.message = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return results;
}

Timing time_kernel(const Candidate& candidate, const detail::LoadedKernel& kernel, Harness& harness,
                   const Options& options, cudaStream_t stream) {
  EventPair events;
  int slot = 0;
  auto launch_batch = [&](int count) {
    for (int i = 0; i < count; ++i) {
      const cudaError_t status = harness.launch(candidate, kernel, slot, stream);
      if (status != cudaSuccess) detail::cuda_check(status, "cudaLaunchKernel");
      slot = (slot + 1) % harness.slots();
    }
  };
  // Warm-up by time, which also measures one launch to size the timed batches.
  int batch = 1;
  double warm_ms = 0;
  for (int round = 0; round < 20 && warm_ms < options.warmup_ms; ++round) {
    detail::cuda_check(cudaEventRecord(events.start, stream), "cudaEventRecord");
    launch_batch(batch);
    detail::cuda_check(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    const double ms = events.elapsed_ms();
    warm_ms += ms;
    const double per_launch = std::max(ms / batch, 1e-4);
    batch = static_cast<int>(std::clamp(std::ceil(options.batch_ms / per_launch), 1.0, 2000.0));
  }
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(options.samples));
  for (int s = 0; s < options.samples; ++s) {
    detail::cuda_check(cudaEventRecord(events.start, stream), "cudaEventRecord");
    launch_batch(batch);
    detail::cuda_check(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    samples.push_back(events.elapsed_ms() / batch);
  }
  Timing t;
  t.median_ms = percentile(samples, 0.5);
  t.spread = (percentile(samples, 0.9) - percentile(samples, 0.1)) / t.median_ms;
  return t;
}

Outcome tune(const std::vector<Candidate>& candidates, Harness& harness, const Options& options,
             cudaStream_t stream) {
  Outcome outcome;
  const auto compile_start = std::chrono::steady_clock::now();
  outcome.compiled = compile_all(candidates, options.compile_threads);
  outcome.compile_seconds = seconds_since(compile_start);
  outcome.compiles = static_cast<int>(candidates.size());

  const auto bench_start = std::chrono::steady_clock::now();
  std::vector<Timing> timings(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    Compiled& compiled = outcome.compiled[i];
    cache::Trial trial;
    trial.label = c.label;
    trial.config_json = c.config_json;
    Status status = compiled.status;
    std::string message = compiled.message;
    detail::LoadedKernel kernel;
    if (status == Status::ok) {
      try {
        kernel = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_name);
        const auto& attr = kernel.attributes();
        if (static_cast<int>(c.block_threads) > attr.max_threads_per_block) {
          status = Status::resources_exceeded;
          message = fmt::format("{} threads per block, the compiled kernel allows {} ({} registers)",
                                c.block_threads, attr.max_threads_per_block, attr.num_regs);
        } else if (c.dynamic_smem + attr.static_smem > static_cast<std::size_t>(options.max_dynamic_smem)) {
          status = Status::resources_exceeded;
          message = fmt::format("{} B of shared memory, the device allows {}", c.dynamic_smem + attr.static_smem,
                                options.max_dynamic_smem);
        } else {
          kernel.allow_dynamic_smem(c.dynamic_smem);
        }
      } catch (const Error& e) {
        status = Status::launch_failed;
        message = e.what();
      }
    }
    if (status == Status::ok) {
      const Verdict verdict = harness.verify(c, kernel, stream);
      if (!verdict.ok) {
        status = verdict.message.rfind("launch", 0) == 0 ? Status::launch_failed : Status::wrong_result;
        message = verdict.message;
      }
    }
    if (status == Status::ok) {
      timings[i] = time_kernel(c, kernel, harness, options, stream);
      trial.median_ms = timings[i].median_ms;
      trial.spread = timings[i].spread;
      trial.gbps = harness.model_bytes() / (timings[i].median_ms * 1e-3) / 1e9;
    }
    trial.status = to_string(status);
    trial.message = message;
    if (options.debug)
      options.debug(fmt::format("  {:<48} {:>14} {:>10.4f} ms {:>8.1f} GB/s {}", c.label, trial.status,
                                trial.median_ms, trial.gbps, message.substr(0, 120)));
    outcome.trials.push_back(std::move(trial));
  }
  outcome.bench_seconds = seconds_since(bench_start);

  // Fastest median wins; candidates within the winner's noise tie and the static rank decides.
  int best = -1;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (outcome.trials[i].status == "ok" && (best < 0 || timings[i].median_ms < timings[best].median_ms))
      best = static_cast<int>(i);
  if (best >= 0) {
    const double tolerance = std::max(0.01, timings[best].spread / 2);
    const double limit = timings[best].median_ms * (1 + tolerance);
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (outcome.trials[i].status == "ok" && timings[i].median_ms <= limit &&
          candidates[i].tie_rank < candidates[best].tie_rank)
        best = static_cast<int>(i);
  }
  outcome.winner = best;
  return outcome;
}

}  // namespace kvtune::tuner
