// One tuning run of a problem on a device: the space (plus a stored incumbent), the cost model's
// order, the tuner (tuner/tuner.h) on a stream of its own, and the result stored: the winner, every
// verified binary, the trials and the run's record. Called by the fallback ladder under the key's
// lease and the device's tuning lock.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/cuda_check.h"
#include "core/nvml.h"
#include "lib/src/entries.h"
#include "tuner/tuner.h"

namespace kvtune::detail {

// Test-only: a copy of the cost model's favourite with a fault compiled in, tried first.
template <class F>
void add_faulty_candidate(const ContextState& s, std::vector<tuner::Candidate>& candidates, tuner::Options& topt) {
  if (s.options.test_fault.empty() || std::string(F::kOp) != "normalize" || candidates.empty()) return;
  const auto best = std::min_element(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.predicted_seconds < b.predicted_seconds;
  });
  tuner::Candidate faulty = *best;
  faulty.label += ",fault=" + s.options.test_fault;
  faulty.request.extra_options.push_back(fmt::format("-DKVT_INJECT_FAULT={}", fault_define(s.options.test_fault)));
  faulty.request.extra_options.push_back("-DKVT_FAULT_SPIN_CYCLES=16000000000ll");  // ~8 s at 2 GHz
  faulty.predicted_seconds = -1;
  faulty.tie_rank = -1e9;  // it would win every tie
  topt.required.push_back(static_cast<int>(candidates.size()));
  candidates.push_back(std::move(faulty));
  s.log("warn", fmt::format("test fault '{}' injected as candidate {}", s.options.test_fault, candidates.back().label));
}

template <class F>
std::shared_ptr<Entry<F>> tune(ContextState& s, DeviceState& dev, const typename F::Problem& problem,
                               const std::string& key, const std::string& template_hash) {
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t started_at = static_cast<std::int64_t>(std::time(nullptr));
  const std::string arch = dev.fingerprint.arch();
  auto configs = detail::tuning_configs<F>(problem, dev.fingerprint.cc_major, dev.fingerprint.name);
  if (configs.empty()) throw Error(Error::Context{F::kOp, key, "", "", ""}, "no valid variant");
  // A stored winner is timed again (the incumbent), also one outside the space (imported from
  // another build) as long as it can run.
  const auto stored = s.store->find_winner(key, dev.device_id, template_hash);
  std::optional<typename F::Config> stored_config;
  if (stored && stored->origin != "heuristic") {
    try {
      stored_config = F::Config::from_json(detail::parse_stored_config(stored->config_json));
      if (std::find(configs.begin(), configs.end(), *stored_config) == configs.end()) {
        if (F::is_valid(problem, *stored_config)) configs.push_back(*stored_config);
        else stored_config.reset();
      }
    } catch (const std::exception&) {
      stored_config.reset();  // an unreadable config is no incumbent
    }
  }
  auto candidates = F::candidates(problem, configs, arch);
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].predicted_seconds =
        F::predicted_seconds(problem, configs[i], dev.fingerprint.sm_count, dev.bandwidth);

  tuner::Options topt;
  topt.samples = s.options.timing_samples;
  topt.compile_threads = s.options.compile_threads;
  topt.compile_worker = s.compile_worker;
  topt.max_dynamic_smem = dev.fingerprint.max_smem_per_block_optin;
  topt.budget_variants = s.options.budget_variants;
  topt.budget_ms = s.options.budget_ms;
  topt.seed = std::hash<std::string>{}(key);
  const auto index_of = [&](const typename F::Config& c) {
    const auto it = std::find(configs.begin(), configs.end(), c);
    return it == configs.end() ? -1 : static_cast<int>(it - configs.begin());
  };
  topt.required.push_back(index_of(F::heuristic(problem, dev.fingerprint.cc_major, dev.fingerprint.name)));
  for (const auto& c : F::learned_picks(problem, dev.fingerprint.cc_major, dev.fingerprint.name, tuner::kLearnedPicks))
    topt.preferred.push_back(index_of(c));  // (-1, outside this space: skipped)
  std::string incumbent_label;
  if (stored_config) {
    topt.incumbent = index_of(*stored_config);
    incumbent_label = stored->label;
    topt.required.push_back(topt.incumbent);
  }
  topt.find_binaries = [&s](const std::vector<std::string>& hashes) { return s.store->find_binaries(hashes); };
  add_faulty_candidate<F>(s, candidates, topt);
  if (s.options.on_progress)
    topt.on_progress = [&s, &key](const tuner::Progress& p) {
      TuningProgress out;
      out.op = F::kOp;
      out.problem_key = key;
      out.done = p.done;
      out.total = p.total;
      out.label = p.trial->label;
      out.status = p.trial->status;
      out.median_ms = p.trial->median_ms;
      out.final = p.final;
      s.options.on_progress(out);
    };
  if (s.log_rank >= 3) topt.debug = [&s](const std::string& line) { s.log("debug", line); };

  cudaStream_t stream = nullptr;
  detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> stream_guard(stream, [](cudaStream_t s) {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  });
  const detail::GpuConditions before = detail::read_gpu_conditions(dev.ordinal);
  // The candidates compile while the harness allocates its buffers and runs its float64 reference.
  tuner::StartedCompiles compiles(candidates, topt);
  const auto harness_start = std::chrono::steady_clock::now();
  auto harness = F::harness(problem, configs, arch, s.options.hot_l2 ? 0 : dev.fingerprint.l2_bytes, stream);
  const double harness_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - harness_start).count();
  s.log("info", fmt::format("{} {}: tuning on {} ({} variants, budget {})", F::kOp, key, dev.fingerprint.name,
                          candidates.size(), topt.budget_variants));
  tuner::Outcome outcome = tuner::tune(candidates, *harness, topt, stream, &compiles);
  ++s.counters.tunes;
  s.counters.compiles += static_cast<std::uint64_t>(outcome.compiles);
  s.counters.binaries_reused += static_cast<std::uint64_t>(outcome.reused);
  for (const auto& why : outcome.rejected_binaries) s.reject_row(F::kOp, key, "a stored binary of " + why);
  for (const auto& t : outcome.trials) {
    if (t.status == "ok") ++s.counters.variants_timed;
    else ++s.counters.variants_rejected;
  }
  if (outcome.winner < 0)
    throw Error(Error::Context{F::kOp, key, "", dev.fingerprint.name, ""},
                fmt::format("all {} variants tried failed; first failure: {}", outcome.trials.size(),
                            outcome.trials.empty() ? "" : outcome.trials.front().message));
  const auto w = static_cast<std::size_t>(outcome.winner);
  const auto& compiled = outcome.compiled[w];
  const auto& config = configs[static_cast<std::size_t>(candidates[w].index)];
  if (candidates[w].label != config.label())  // a test fault must never become a winner
    throw Error(Error::Context{F::kOp, key, candidates[w].label, dev.fingerprint.name, ""},
                "the winner is not a variant of the space");
  auto entry = make_entry<F>(problem, config, compiled.cubin, compiled.lowered_name, "tuned");
  cache::Winner winner = make_winner<F>(dev, key, template_hash, config, compiled.binary_hash, "tuned");
  winner.median_ms = outcome.winner_ms;
  winner.gbps = harness->model_bytes() / (outcome.winner_ms * 1e-3) / 1e9;
  // Every verified binary is kept: another bucket of the same shape compiles the same sources.
  std::vector<cache::Binary> binaries;
  for (int i : outcome.chosen) {
    const auto& c = outcome.compiled[std::size_t(i)];
    const int t = outcome.trial_index[std::size_t(i)];
    if (c.reused || c.cubin.empty() || t < 0 || outcome.trials[std::size_t(t)].status != "ok") continue;
    binaries.push_back(cache::Binary{c.binary_hash, arch, c.lowered_name, c.cubin, detail::hash_hex(c.cubin)});
  }
  if (compiled.reused)
    binaries.push_back(cache::Binary{compiled.binary_hash, arch, compiled.lowered_name, compiled.cubin,
                                     detail::hash_hex(compiled.cubin)});
  cache::TuningRun run;
  run.op = F::kOp;
  run.problem_key = key;
  run.device_id = dev.device_id;
  run.template_hash = template_hash;
  run.started_at = started_at;
  run.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.compile_seconds = outcome.compile_seconds;
  run.bench_seconds = outcome.bench_seconds;
  run.variants_total = static_cast<int>(configs.size());
  run.variants_timed = static_cast<int>(outcome.trials.size());
  run.compiles = outcome.compiles;
  run.binaries_reused = outcome.reused;
  run.search = outcome.budgeted ? "budgeted" : "exhaustive";
  run.sm_clock_mhz = before.sm_clock_mhz;
  run.mem_clock_mhz = before.mem_clock_mhz;
  run.temperature_c = before.temperature_c;
  run.power_w = before.power_w;
  run.winner_label = winner.label;
  run.winner_ms = outcome.winner_ms;
  run.incumbent_label = incumbent_label;
  run.incumbent_ms = outcome.incumbent_ms;
  run.replaced_incumbent = !incumbent_label.empty() && !outcome.kept_incumbent;
  const detail::GpuConditions after = detail::read_gpu_conditions(dev.ordinal);
  // Where the wall time went: the harness (buffers, inputs, the reference), then on the thread that
  // drives the GPU the waits for compiles, verification, timing and the finalists' re-measure.
  const nlohmann::json split{{"harness", harness_seconds},      {"compile_wait", outcome.wait_seconds},
                             {"verify", outcome.verify_seconds}, {"time", outcome.time_seconds},
                             {"final", outcome.final_seconds},   {"bench", outcome.bench_seconds}};
  run.json = nlohmann::json{{"winner_spread", outcome.winner_spread},
                            {"seconds", split},
                            {"budget_variants", s.options.budget_variants},
                            {"budget_ms", s.options.budget_ms},
                            {"hot_l2", s.options.hot_l2},
                            {"sm_clock_mhz_after", after.sm_clock_mhz},
                            {"temperature_c_after", after.temperature_c}}
                 .dump();
  s.store_result(winner, binaries, outcome.trials, run);
  s.log("info", fmt::format("{} {}: winner {} {:.4f} ms {:.0f} GB/s ({} of {} variants, {} compiled, {} reused; "
                          "compile {:.2f} s, benchmark {:.2f} s; harness {:.2f}, compile wait {:.2f}, verify {:.2f}, "
                          "timing {:.2f}, finalists {:.2f}; SM clock {} MHz){}",
                          F::kOp, key, winner.label, winner.median_ms, winner.gbps, outcome.trials.size(),
                          candidates.size(), outcome.compiles, outcome.reused, outcome.compile_seconds,
                          outcome.bench_seconds, harness_seconds, outcome.wait_seconds, outcome.verify_seconds,
                          outcome.time_seconds, outcome.final_seconds, before.sm_clock_mhz,
                          incumbent_label.empty() ? ""
                          : outcome.kept_incumbent
                              ? fmt::format("; incumbent {} kept", incumbent_label)
                              : fmt::format("; replaces {} ({:.4f} ms)", incumbent_label, outcome.incumbent_ms)));
  return entry;
}

}  // namespace kvtune::detail
