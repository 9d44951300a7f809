#include "tuner/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "kvtune/error.h"
#include "core/cuda_check.h"
#include "tuner/event_timer.h"

namespace kvtune::tuner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Timing summarize(const std::vector<double>& samples, int batch, bool graph) {
  Timing t;
  t.median_ms = percentile(samples, 0.5);
  t.spread = (percentile(samples, 0.9) - percentile(samples, 0.1)) / t.median_ms;
  t.batch = batch;
  t.graph = graph;
  return t;
}

// One candidate on the GPU, warmed up: a batch size that lasts about options.batch_ms, and for
// short kernels the batch captured as a CUDA graph, so that launch gaps are not timed.
class Bench {
 public:
  Bench(const Candidate& candidate, const detail::LoadedKernel& kernel, Harness& harness, const Options& options,
        cudaStream_t stream)
      : candidate_(candidate), kernel_(kernel), harness_(harness), stream_(stream) {
    double warm_ms = 0;
    for (int round = 0; round < 20 && warm_ms < options.warmup_ms; ++round) {
      const double ms = time_plain();
      warm_ms += ms;
      const double per_launch = std::max(ms / batch_, 1e-4);
      batch_ = static_cast<int>(std::clamp(std::ceil(options.batch_ms / per_launch), 1.0, 2000.0));
    }
    const double per_launch = time_plain() / batch_;
    if (per_launch < options.graph_below_ms) capture();
  }
  ~Bench() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  /// One timed batch: milliseconds per launch.
  double sample() { return (exec_ != nullptr ? time_graph() : time_plain()) / batch_; }
  int batch() const { return batch_; }
  bool graph() const { return exec_ != nullptr; }

 private:
  void launch_batch() {
    for (int i = 0; i < batch_; ++i) {
      const cudaError_t status = harness_.launch(candidate_, kernel_, slot_, stream_);
      if (status != cudaSuccess) detail::cuda_check(status, "cudaLaunchKernel");
      slot_ = (slot_ + 1) % harness_.slots();
    }
  }
  double time_plain() {
    timer_.start(stream_);
    launch_batch();
    timer_.stop(stream_);
    return timer_.elapsed_ms();
  }
  double time_graph() {
    timer_.start(stream_);
    detail::cuda_check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
    timer_.stop(stream_);
    return timer_.elapsed_ms();
  }
  // Captures one batch; on any failure the candidate is simply timed with plain launches.
  void capture() {
    cudaGraph_t graph = nullptr;
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    bool launched = true;
    for (int i = 0; i < batch_ && launched; ++i) {
      launched = harness_.launch(candidate_, kernel_, slot_, stream_) == cudaSuccess;
      slot_ = (slot_ + 1) % harness_.slots();
    }
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (!launched || end != cudaSuccess || graph == nullptr ||
        cudaGraphInstantiate(&exec_, graph, 0) != cudaSuccess) {
      cudaGetLastError();
      exec_ = nullptr;
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (exec_ != nullptr) time_graph();  // upload and warm the graph
  }

  const Candidate& candidate_;
  const detail::LoadedKernel& kernel_;
  Harness& harness_;
  cudaStream_t stream_;
  EventTimer timer_;
  int batch_ = 1;
  int slot_ = 0;
  cudaGraphExec_t exec_ = nullptr;
};

// Compiles the chosen candidates on threads (each handing its compiles to a worker process when
// there is one: core/compile_workers.h) while the caller benchmarks them as they are ready:
// next_ready() waits for any candidate not yet taken. Stored cubins are filled in first and never
// recompiled, and candidates whose programs are identical (one compile hash: variants that differ
// only in how they are launched, such as the normalize backward's cooperative twins) are compiled
// once. With `costliest_first` the compiles start in decreasing Candidate::compile_cost (ties in
// the given order), else in the given order.
class CompilePipeline {
 public:
  CompilePipeline(const std::vector<Candidate>& candidates, std::vector<int> order, std::vector<Compiled>& results,
                  int threads, std::string worker_path, bool costliest_first)
      : candidates_(candidates),
        order_(std::move(order)),
        worker_(std::move(worker_path)),
        results_(results),
        ready_(candidates.size(), 0),
        taken_(order_.size(), 0) {
    start_ = Clock::now();
    std::vector<int> work;
    std::unordered_map<std::string, int> first;  // compile hash -> the candidate that compiles it
    for (int i : order_) {
      if (results_[std::size_t(i)].reused) {
        ready_[std::size_t(i)] = 1;
        continue;
      }
      const auto [at, inserted] = first.emplace(detail::compile_hash(candidates_[std::size_t(i)].request), i);
      if (inserted) work.push_back(i);
      else twins_[at->second].push_back(i);
    }
    if (costliest_first)
      std::stable_sort(work.begin(), work.end(), [&](int a, int b) {
        return candidates_[std::size_t(a)].compile_cost > candidates_[std::size_t(b)].compile_cost;
      });
    work_ = std::move(work);
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::min<int>(threads, static_cast<int>(work_.size()));
    for (int t = 0; t < threads; ++t) pool_.emplace_back([this] { worker(); });
    if (work_.empty()) finished_seconds_ = 0;
  }
  ~CompilePipeline() {
    stop_ = true;
    for (auto& t : pool_) t.join();
  }
  CompilePipeline(const CompilePipeline&) = delete;
  CompilePipeline& operator=(const CompilePipeline&) = delete;

  /// The first candidate of the order, among those not taken yet, whose compile is done (waits
  /// for one); -1 when every candidate was taken. Marks it taken.
  int next_ready() {
    std::unique_lock<std::mutex> lock(mutex_);
    int found = -1;
    cv_.wait(lock, [&] {
      bool left = false;
      for (std::size_t k = first_open_; k < order_.size(); ++k) {
        if (taken_[k]) continue;
        left = true;
        if (ready_[std::size_t(order_[k])]) {
          taken_[k] = 1;
          found = order_[k];
          return true;
        }
      }
      return !left;
    });
    while (first_open_ < order_.size() && taken_[first_open_]) ++first_open_;
    return found;
  }
  const Compiled& result(int i) const { return results_[std::size_t(i)]; }
  /// Abandons what is not compiled yet (the time budget ran out).
  void stop() { stop_ = true; }
  int compiles() const { return compiles_; }
  double seconds() {
    for (auto& t : pool_) t.join();
    pool_.clear();
    return finished_seconds_;
  }

 private:
  void worker() {
    for (std::size_t n = next_++; n < work_.size() && !stop_; n = next_++) {
      const int i = work_[n];
      Compiled out;
      out.queued = static_cast<int>(n);
      try {
        auto compiled = detail::compile_in_worker(worker_, candidates_[std::size_t(i)].request);
        out.cubin = std::move(compiled.cubin);
        out.lowered_name = compiled.lowered_names.at(0);
        out.seconds = compiled.seconds;
        out.binary_hash = detail::compile_hash(candidates_[std::size_t(i)].request);
      } catch (const std::exception& e) {
        out.status = Status::compile_failed;
        out.message = e.what();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (const auto twins = twins_.find(i); twins != twins_.end())
        for (int t : twins->second) {
          results_[std::size_t(t)] = out;
          ready_[std::size_t(t)] = 1;
        }
      results_[std::size_t(i)] = std::move(out);
      ready_[std::size_t(i)] = 1;
      ++compiles_;
      finished_seconds_ = seconds_since(start_);
      cv_.notify_all();
    }
  }

  const std::vector<Candidate>& candidates_;
  std::vector<int> order_;
  const std::string worker_;
  std::vector<int> work_;
  std::unordered_map<int, std::vector<int>> twins_;  // a compiled candidate -> those with its program
  std::vector<Compiled>& results_;
  std::vector<char> ready_;
  std::vector<char> taken_;      // per position of order_: handed out by next_ready()
  std::size_t first_open_ = 0;   // positions before it are all taken
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::thread> pool_;
  Clock::time_point start_;
  int compiles_ = 0;
  double finished_seconds_ = 0;
};

// Loads a compiled candidate and checks the resources the compiled binary needs; on failure
// returns the status and message.
Status load_checked(const Candidate& c, const Compiled& compiled, const Options& options, detail::LoadedKernel& kernel,
                    std::string& message) {
  try {
    kernel = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_name, c.phases());
    const auto& attr = kernel.attributes();
    if (static_cast<int>(c.block_threads) > attr.max_threads_per_block) {
      message = fmt::format("{} threads per block, the compiled kernel allows {} ({} registers)", c.block_threads,
                            attr.max_threads_per_block, attr.num_regs);
      return Status::resources_exceeded;
    }
    if (c.dynamic_smem + attr.static_smem > static_cast<std::size_t>(options.max_dynamic_smem)) {
      message = fmt::format("{} B of shared memory, the device allows {}", c.dynamic_smem + attr.static_smem,
                            options.max_dynamic_smem);
      return Status::resources_exceeded;
    }
    kernel.allow_dynamic_smem(c.dynamic_smem);
  } catch (const Error& e) {
    message = e.what();
    return Status::launch_failed;
  }
  return Status::ok;
}

}  // namespace

Status failed_status(const Verdict& verdict) {
  const auto starts = [&](const char* prefix) { return verdict.message.rfind(prefix, 0) == 0; };
  return starts(kResourcesRefused) ? Status::resources_exceeded
         : starts("launch")        ? Status::launch_failed
         : starts("timed out")     ? Status::timed_out
                                   : Status::wrong_result;
}

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

std::vector<Compiled> compile_all(const std::vector<Candidate>& candidates, int threads, const std::string& worker) {
  std::vector<Compiled> results(candidates.size());
  std::vector<int> all(candidates.size());
  std::iota(all.begin(), all.end(), 0);
  CompilePipeline pipeline(candidates, all, results, threads, worker, true);
  pipeline.seconds();  // joins the workers
  return results;
}

std::vector<int> choose(const std::vector<Candidate>& candidates, const Options& options) {
  const int n = static_cast<int>(candidates.size());
  std::vector<int> by_model(static_cast<std::size_t>(n));
  std::iota(by_model.begin(), by_model.end(), 0);
  std::stable_sort(by_model.begin(), by_model.end(), [&](int a, int b) {
    return candidates[std::size_t(a)].predicted_seconds < candidates[std::size_t(b)].predicted_seconds;
  });
  if (options.budget_variants <= 0) return by_model;
  const int limit = std::min(options.budget_variants,
                             std::max(options.min_variants, static_cast<int>(std::ceil(options.budget_fraction * n))));
  if (n <= limit) return by_model;
  std::vector<char> taken(static_cast<std::size_t>(n), 0);
  std::vector<int> out;
  const auto take = [&](int i) {
    if (i >= 0 && i < n && !taken[std::size_t(i)]) {
      taken[std::size_t(i)] = 1;
      out.push_back(i);
    }
  };
  for (int i : options.required) take(i);
  const int budget = std::max<int>(limit, static_cast<int>(out.size()));
  const int exploit = std::max(1, static_cast<int>(std::lround(budget * (1.0 - options.explore))));
  for (int i : options.preferred) {
    if (static_cast<int>(out.size()) >= exploit) break;
    take(i);
  }
  for (int i : by_model) {
    if (static_cast<int>(out.size()) >= exploit) break;
    take(i);
  }
  std::vector<int> rest;
  for (int i : by_model)
    if (!taken[std::size_t(i)]) rest.push_back(i);
  std::mt19937_64 rng(options.seed);
  std::shuffle(rest.begin(), rest.end(), rng);
  for (int i : rest) {
    if (static_cast<int>(out.size()) >= budget) break;
    take(i);
  }
  // Best predicted first: with a time budget, the likely winners are timed before it runs out.
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    return candidates[std::size_t(a)].predicted_seconds < candidates[std::size_t(b)].predicted_seconds;
  });
  return out;
}

Timing time_kernel(const Candidate& candidate, const detail::LoadedKernel& kernel, Harness& harness,
                   const Options& options, cudaStream_t stream) {
  Bench bench(candidate, kernel, harness, options, stream);
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(options.samples));
  for (int s = 0; s < options.samples; ++s) samples.push_back(bench.sample());
  return summarize(samples, bench.batch(), bench.graph());
}

struct StartedCompiles::State {
  Outcome outcome;
  std::vector<int> order;
  std::unique_ptr<CompilePipeline> pipeline;
};

StartedCompiles::StartedCompiles(const std::vector<Candidate>& candidates, const Options& options)
    : state_(std::make_unique<State>()) {
  Outcome& outcome = state_->outcome;
  std::vector<int>& order = state_->order;
  outcome.compiled.resize(candidates.size());
  order = choose(candidates, options);
  outcome.budgeted = order.size() < candidates.size();

  if (options.find_binaries) {
    std::vector<std::string> hashes;
    for (int i : order) hashes.push_back(detail::compile_hash(candidates[std::size_t(i)].request));
    std::unordered_map<std::string, cache::Binary> found;
    for (auto& b : options.find_binaries(hashes)) found.emplace(b.hash, std::move(b));
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto it = found.find(hashes[k]);
      if (it == found.end()) continue;
      std::string why;
      if (!detail::binary_matches_request(it->second.hash, it->second.arch, it->second.lowered_name,
                                          candidates[std::size_t(order[k])].request, &why)) {
        outcome.rejected_binaries.push_back(candidates[std::size_t(order[k])].label + ": " + why);
        continue;  // compiled instead
      }
      Compiled& c = outcome.compiled[std::size_t(order[k])];
      c.cubin = it->second.image;
      c.lowered_name = it->second.lowered_name;
      c.binary_hash = it->second.hash;
      c.reused = true;
      ++outcome.reused;
    }
  }
  state_->pipeline = std::make_unique<CompilePipeline>(candidates, order, outcome.compiled, options.compile_threads,
                                                       options.compile_worker, options.budget_ms <= 0);
}

StartedCompiles::~StartedCompiles() = default;  // stops the pipeline, joins its threads

Outcome tune(const std::vector<Candidate>& candidates, Harness& harness, const Options& options,
             cudaStream_t stream, StartedCompiles* started) {
  const auto tune_start = Clock::now();
  std::optional<StartedCompiles> own;
  if (started == nullptr) started = &own.emplace(candidates, options);
  // The outcome is returned by copy: the pipeline, joined by then, still refers to its cubins.
  Outcome& outcome = started->state_->outcome;
  std::vector<int>& order = started->state_->order;
  CompilePipeline& pipeline = *started->state_->pipeline;
  std::vector<Timing> timings(candidates.size());
  std::vector<int> trial_of(candidates.size(), -1);
  const auto bench_start = Clock::now();
  int timed_ok = 0;
  std::vector<int> timed_order;  // the candidates in the order they were taken
  timed_order.reserve(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (options.budget_ms > 0 && timed_ok > 0 && seconds_since(tune_start) * 1e3 > options.budget_ms) {
      pipeline.stop();
      if (options.debug)
        options.debug(fmt::format("  time budget of {:.0f} ms spent after {} of {} candidates", options.budget_ms, k,
                                  order.size()));
      outcome.budgeted = true;
      break;
    }
    auto phase_start = Clock::now();
    const int i = pipeline.next_ready();
    outcome.wait_seconds += seconds_since(phase_start);
    timed_order.push_back(i);
    const Candidate& c = candidates[std::size_t(i)];
    const Compiled& compiled = pipeline.result(i);
    cache::Trial trial;
    trial.label = c.label;
    trial.config_json = c.config_json;
    Status status = compiled.status;
    std::string message = compiled.message;
    detail::LoadedKernel kernel;
    phase_start = Clock::now();
    if (status == Status::ok) status = load_checked(c, compiled, options, kernel, message);
    if (status == Status::ok) {
      const Verdict verdict = harness.verify(c, kernel, stream);
      if (!verdict.ok) {
        status = failed_status(verdict);
        message = verdict.message;
      }
    }
    outcome.verify_seconds += seconds_since(phase_start);
    if (status == Status::ok) {
      phase_start = Clock::now();
      timings[std::size_t(i)] = time_kernel(c, kernel, harness, options, stream);
      outcome.time_seconds += seconds_since(phase_start);
      trial.median_ms = timings[std::size_t(i)].median_ms;
      trial.spread = timings[std::size_t(i)].spread;
      trial.gbps = harness.model_bytes() / (trial.median_ms * 1e-3) / 1e9;
      ++timed_ok;
    }
    trial.status = to_string(status);
    trial.message = message;
    if (options.debug)
      options.debug(fmt::format("  {:<48} {:>14} {:>10.4f} ms {:>8.1f} GB/s {}{}", c.label, trial.status,
                                trial.median_ms, trial.gbps, timings[std::size_t(i)].graph ? "graph " : "",
                                message.substr(0, 120)));
    trial_of[std::size_t(i)] = static_cast<int>(outcome.trials.size());
    outcome.trials.push_back(std::move(trial));
    if (options.on_progress)
      options.on_progress(Progress{static_cast<int>(k + 1), static_cast<int>(order.size()), &outcome.trials.back(), false});
  }
  order = std::move(timed_order);
  outcome.compile_seconds = pipeline.seconds();
  outcome.compiles = pipeline.compiles();
  outcome.chosen = order;
  outcome.trial_index = trial_of;

  const auto ok = [&](int i) { return trial_of[std::size_t(i)] >= 0 && outcome.trials[std::size_t(trial_of[std::size_t(i)])].status == "ok"; };
  std::vector<int> survivors;
  for (int i : order)
    if (ok(i)) survivors.push_back(i);
  if (survivors.empty()) {
    outcome.bench_seconds = seconds_since(bench_start);
    return outcome;
  }

  // Finalists: the best medians (and the incumbent), re-measured in interleaved rounds so that a
  // drift of clocks or temperature hits them alike.
  std::sort(survivors.begin(), survivors.end(), [&](int a, int b) {
    return timings[std::size_t(a)].median_ms < timings[std::size_t(b)].median_ms;
  });
  std::vector<int> finalists(survivors.begin(),
                             survivors.begin() + std::min<std::ptrdiff_t>(std::max(1, options.finalists),
                                                                          static_cast<std::ptrdiff_t>(survivors.size())));
  const bool incumbent_ok = options.incumbent >= 0 && ok(options.incumbent);
  if (incumbent_ok && std::find(finalists.begin(), finalists.end(), options.incumbent) == finalists.end())
    finalists.push_back(options.incumbent);
  if (finalists.size() > 1 && options.final_rounds > 0) {
    const auto final_start = Clock::now();
    std::vector<detail::LoadedKernel> kernels(finalists.size());
    std::vector<std::unique_ptr<Bench>> benches;
    for (std::size_t f = 0; f < finalists.size(); ++f) {
      const Compiled& compiled = outcome.compiled[std::size_t(finalists[f])];
      kernels[f] = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_name,
                                              candidates[std::size_t(finalists[f])].phases());
      kernels[f].allow_dynamic_smem(candidates[std::size_t(finalists[f])].dynamic_smem);
      benches.push_back(
          std::make_unique<Bench>(candidates[std::size_t(finalists[f])], kernels[f], harness, options, stream));
    }
    std::vector<std::vector<double>> samples(finalists.size());
    for (int round = 0; round < options.final_rounds; ++round)
      for (std::size_t f = 0; f < finalists.size(); ++f) {
        const std::size_t g = (f + std::size_t(round)) % finalists.size();  // rotate who goes first
        samples[g].push_back(benches[g]->sample());
      }
    for (std::size_t f = 0; f < finalists.size(); ++f) {
      const int i = finalists[f];
      timings[std::size_t(i)] = summarize(samples[f], benches[f]->batch(), benches[f]->graph());
      cache::Trial& trial = outcome.trials[std::size_t(trial_of[std::size_t(i)])];
      trial.median_ms = timings[std::size_t(i)].median_ms;
      trial.spread = timings[std::size_t(i)].spread;
      trial.gbps = harness.model_bytes() / (trial.median_ms * 1e-3) / 1e9;
      if (options.on_progress)
        options.on_progress(Progress{static_cast<int>(order.size()), static_cast<int>(order.size()), &trial, true});
      if (options.debug)
        options.debug(fmt::format("  final {:<42} {:>10.4f} ms spread {:.3f}", trial.label, trial.median_ms,
                                  trial.spread));
    }
    outcome.final_seconds = seconds_since(final_start);
  }

  // Fastest final median wins; candidates within its noise tie and the static rank decides.
  int best = finalists.front();
  for (int i : finalists)
    if (timings[std::size_t(i)].median_ms < timings[std::size_t(best)].median_ms) best = i;
  const double tolerance = std::max(0.01, timings[std::size_t(best)].spread / 2);
  const double limit = timings[std::size_t(best)].median_ms * (1 + tolerance);
  for (int i : finalists)
    if (timings[std::size_t(i)].median_ms <= limit && candidates[std::size_t(i)].tie_rank < candidates[std::size_t(best)].tie_rank)
      best = i;
  if (incumbent_ok) {
    const Timing& inc = timings[std::size_t(options.incumbent)];
    outcome.incumbent_ms = inc.median_ms;
    const double noise = std::max(0.01, (timings[std::size_t(best)].spread + inc.spread) / 2);
    if (best != options.incumbent && timings[std::size_t(best)].median_ms >= inc.median_ms * (1 - noise)) {
      best = options.incumbent;
      outcome.kept_incumbent = true;
    } else if (best == options.incumbent) {
      outcome.kept_incumbent = true;
    }
  }
  outcome.winner = best;
  outcome.winner_ms = timings[std::size_t(best)].median_ms;
  outcome.winner_spread = timings[std::size_t(best)].spread;
  outcome.bench_seconds = seconds_since(bench_start);
  return outcome;
}

}  // namespace kvtune::tuner
