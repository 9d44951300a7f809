// The miss path of a Context (under the device's miss lock): a stored winner of the call's exact
// size -> of its bucket -> (policy tune: tune now under the key's lease; background: queue the
// tuning) -> the nearest tuned shape -> the heuristic. Stand-ins while a winner is tuned elsewhere
// are provisional: recheck() swaps in the stored winner once it lands.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/cuda_check.h"
#include "lib/src/background_worker.h"
#include "lib/src/entries.h"
#include "lib/src/tuning_run.h"

namespace kvtune::detail {

class FallbackLadder {
 public:
  FallbackLadder(ContextState& state, BackgroundWorker& worker) : s_(state), worker_(worker) {}

  // The entry of `problem` on `dev` (published in its table), by the ladder.
  template <class F>
  const Entry<F>& resolve(DeviceState& dev, const typename F::Problem& problem, std::int64_t batch, Stream stream) {
    std::lock_guard<std::mutex> lock(dev.miss_mutex);
    auto& table = dev.table<F>();
    if (const Entry<F>* entry = table.find(problem)) return *entry;
    const std::string key = problem.key();
    const std::string template_hash = F::template_hash();

    // Never tune, compile, load or allocate while the caller's stream is being captured.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    detail::cuda_check(cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &capture),
                       "cudaStreamIsCapturing");
    if (capture != cudaStreamCaptureStatusNone)
      throw Error(Error::Context{F::kOp, key, "", dev.fingerprint.name, ""},
                  "no variant is loaded for this problem and the stream is being captured: run it once "
                  "before capture (kvtune never tunes, compiles or allocates during capture)");

    const Policy policy = s_.options.policy;
    // 1. A stored winner for the exact size (kvtune-tune of exact shapes, or exact bucketing):
    // every exact-size entry of this bucket is published at once, the call's own size counts.
    if (!s_.buckets.exact() && publish_exact_entries<F>(dev, problem, template_hash)) {
      if (const Entry<F>* entry = table.find(F::with_batch(problem, batch, true))) {
        ++s_.counters.fallback_exact;
        ++s_.counters.cache_hits;
        s_.log("info", fmt::format("{} {}: exact-size entry {} ({})", F::kOp, key, entry->config.label(),
                                   entry->origin));
        return *entry;
      }
    }
    // 2. A stored winner for the bucket (retune: a tuned one becomes the incumbent instead).
    if (auto stored = lookup_stored<F>(dev, problem, key, template_hash);
        stored && !(s_.options.retune && policy == Policy::tune)) {
      ++s_.counters.fallback_bucket;
      ++s_.counters.cache_hits;
      s_.log("info", fmt::format("{} {}: cached {} ({})", F::kOp, key, stored->config.label(), stored->origin));
      return publish<F>(dev, problem, stored);
    }
    bool provisional = false;
    if (policy == Policy::tune) {
      if (auto entry = tune_with_lease<F>(dev, problem, key, template_hash)) return publish<F>(dev, problem, entry);
      provisional = true;  // another process is tuning it, or tuning failed: fall back below
    } else if (policy == Policy::background) {
      enqueue_background<F>(dev, problem, key, template_hash);
      provisional = true;
    } else if (policy == Policy::record) {
      try {
        s_.store->record_problem(F::kOp, key, dev.device_id, template_hash);
        ++s_.counters.records;
        s_.log("info", fmt::format("{} {}: recorded for offline tuning", F::kOp, key));
      } catch (const std::exception& e) {
        s_.log("warn", fmt::format("{} {}: could not record the problem: {}", F::kOp, key, e.what()));
      }
    }
    // 3. The nearest tuned shape of the same op, dtype and layout (not for the heuristic policy).
    if (policy != Policy::heuristic) {
      if (auto entry = nearest<F>(dev, problem, key, template_hash)) {
        entry->provisional = provisional;
        ++s_.counters.fallback_nearest;
        return publish<F>(dev, problem, entry);
      }
    }
    // 4. The heuristic variant.
    auto entry = heuristic<F>(dev, problem, key, template_hash);
    entry->provisional = provisional;
    ++s_.counters.fallback_heuristic;
    return publish<F>(dev, problem, entry);
  }

  // On a hit of a provisional entry whose recheck time has come: a stored winner replaces it.
  template <class F>
  void recheck(DeviceState& dev, const typename F::Problem& problem, const Entry<F>& entry) {
    std::int64_t due = entry.recheck_at_ns.load(std::memory_order_relaxed);
    const std::int64_t now = now_ns();
    if (now < due || !entry.recheck_at_ns.compare_exchange_strong(due, now + std::int64_t(kRecheckSeconds * 1e9)))
      return;
    std::unique_lock<std::mutex> lock(dev.miss_mutex, std::try_to_lock);
    if (!lock.owns_lock()) return;
    const std::string key = problem.key();
    if (auto stored = lookup_stored<F>(dev, problem, key, F::template_hash());
        stored && stored->origin != "heuristic") {
      s_.log("info", fmt::format("{} {}: the tuned winner landed: {}", F::kOp, key, stored->config.label()));
      ++s_.counters.cache_hits;
      dev.table<F>().insert(problem, stored);
    }
  }

 private:
  template <class F>
  const Entry<F>& publish(DeviceState& dev, const typename F::Problem& problem, std::shared_ptr<Entry<F>> entry) {
    if (entry->provisional) entry->recheck_at_ns.store(now_ns() + std::int64_t(kRecheckSeconds * 1e9));
    auto& table = dev.table<F>();
    table.insert(problem, std::move(entry));
    return *table.find(problem);
  }

  // Publishes the stored exact-size winners whose size falls in `bucket`'s bucket; returns
  // whether there were any.
  template <class F>
  bool publish_exact_entries(DeviceState& dev, const typename F::Problem& bucket, const std::string& template_hash) {
    bool any = false;
    try {
      auto& table = dev.table<F>();
      for (const auto& w : s_.store->winners_for(F::kOp, dev.device_id, template_hash)) {
        const auto q = F::from_key(w.problem_key);
        if (!q || !F::exact(*q) || !(F::with_batch(*q, s_.buckets.bucket(F::batch(*q)), false) == bucket)) continue;
        if (table.find(*q) != nullptr) {
          any = true;
          continue;
        }
        if (auto entry = lookup_stored<F>(dev, *q, w.problem_key, template_hash)) {
          table.insert(*q, std::move(entry));
          any = true;
        }
      }
    } catch (const std::exception& e) {
      s_.log("warn", fmt::format("{}: exact-size entries unavailable: {}", F::kOp, e.what()));
    }
    if (any) dev.exact_published<F>().store(true, std::memory_order_release);
    return any;
  }

  template <class F>
  std::shared_ptr<Entry<F>> lookup_stored(DeviceState& dev, const typename F::Problem& problem, const std::string& key,
                                          const std::string& template_hash) {
    try {
      std::string refused;
      auto stored = read_stored<F>(*s_.store, problem, key, dev.device_id, template_hash, dev.fingerprint.arch(),
                                           refused);
      if (!refused.empty()) s_.reject_row(F::kOp, key, refused + (stored ? "; compiling it" : ""));
      if (!stored) return nullptr;
      cache::Winner& winner = stored->winner;
      const Policy policy = s_.options.policy;
      if (winner.origin == "heuristic" && (policy == Policy::tune || policy == Policy::background))
        return nullptr;
      if (!stored->binary && (winner.origin == "imported" || winner.binary_hash.empty() || !refused.empty())) {
        // `kvtune-cache import` and `merge` bring configs, not binaries, and a refused binary is
        // replaced: compile once (unless `kvtune-tune --compile-only` stored this binary already)
        // and keep it for later processes.
        stored->binary = binary_for<F>(s_, dev, problem, stored->config);
        winner.binary_hash = stored->binary->hash;
        s_.store_result(winner, {*stored->binary}, {}, std::nullopt);
      }
      if (!stored->binary) return nullptr;  // a tuned winner whose binary is gone: tuned again
      return make_entry<F>(problem, stored->config, stored->binary->image, stored->binary->lowered_name,
                           winner.origin == "heuristic" ? "heuristic" : "cached");
    } catch (const std::exception& e) {
      s_.log("warn", fmt::format("{} {}: ignoring the cached entry: {}", F::kOp, key, e.what()));
      return nullptr;
    }
  }

  template <class F>
  std::shared_ptr<Entry<F>> nearest(DeviceState& dev, const typename F::Problem& problem, const std::string& key,
                                    const std::string& template_hash) {
    try {
      double best = std::numeric_limits<double>::infinity();
      std::optional<typename F::Config> chosen;
      std::string from;
      for (const auto& w : s_.store->winners_for(F::kOp, dev.device_id, template_hash)) {
        if (w.origin == "heuristic" || w.problem_key == key) continue;
        const auto other = F::from_key(w.problem_key);
        if (!other) continue;
        const double d = F::distance(problem, *other);
        if (!(d < best)) continue;
        std::string why;
        const auto config = detail::stored_config<F>(w.config_json, problem, why);
        if (!config) continue;  // another shape's winner need not be valid for this one
        best = d;
        chosen = config;
        from = w.problem_key;
      }
      if (!chosen) return nullptr;
      const cache::Binary binary = binary_for<F>(s_, dev, problem, *chosen);
      s_.log("info", fmt::format("{} {}: nearest tuned shape {} -> {}", F::kOp, key, from, chosen->label()));
      return make_entry<F>(problem, *chosen, binary.image, binary.lowered_name, "nearest");
    } catch (const std::exception& e) {
      s_.log("warn", fmt::format("{} {}: no nearest shape: {}", F::kOp, key, e.what()));
      return nullptr;
    }
  }

  template <class F>
  std::shared_ptr<Entry<F>> heuristic(DeviceState& dev, const typename F::Problem& problem, const std::string& key,
                                      const std::string& template_hash) {
    const auto config = F::heuristic(problem, dev.fingerprint.cc_major, dev.fingerprint.name);
    const cache::Binary binary = binary_for<F>(s_, dev, problem, config);
    ++s_.counters.heuristic_uses;
    auto entry = make_entry<F>(problem, config, binary.image, binary.lowered_name, "heuristic");
    // Stored for the non-tuning policies' next process; a tuned winner is never overwritten by it.
    // The record policy stores none: the problem stays recorded until it is tuned.
    try {
      const auto stored = s_.store->find_winner(key, dev.device_id, template_hash);
      if (!stored && s_.options.policy != Policy::record)
        s_.store_result(make_winner<F>(dev, key, template_hash, config, binary.hash, "heuristic"), {binary}, {},
                        std::nullopt);
    } catch (const std::exception& e) {
      s_.log("warn", fmt::format("{} {}: {}", F::kOp, key, e.what()));
    }
    s_.log("info", fmt::format("{} {}: heuristic {}", F::kOp, key, config.label()));
    return entry;
  }

  // Tunes under the key's lease. nullptr when another process holds the lease (it will store the
  // winner) or when tuning failed; the caller falls back.
  template <class F>
  std::shared_ptr<Entry<F>> tune_with_lease(DeviceState& dev, const typename F::Problem& problem,
                                            const std::string& key, const std::string& template_hash) {
    bool leased = false;
    try {
      leased = s_.store->try_acquire_lease(key, dev.device_id, template_hash, s_.owner, s_.options.lease_seconds);
    } catch (const std::exception& e) {
      s_.log("warn", fmt::format("{} {}: lease unavailable ({}), tuning anyway", F::kOp, key, e.what()));
      leased = true;  // a broken cache must not stop tuning
    }
    if (!leased) {
      ++s_.counters.lease_waits;
      s_.log("info", fmt::format("{} {}: another process is tuning it; using the fallback until its winner lands",
                              F::kOp, key));
      return nullptr;
    }
    std::shared_ptr<Entry<F>> entry;
    try {
      // The winner may have landed between our lookup and the lease.
      if (!s_.options.retune) entry = lookup_stored<F>(dev, problem, key, template_hash);
      if (!entry) {
        std::lock_guard<std::mutex> tune_lock(dev.tune_mutex);
        entry = tune<F>(s_, dev, problem, key, template_hash);
      }
    } catch (const Error& e) {
      s_.log("warn", fmt::format("{} {}: tuning failed, using a fallback: {}", F::kOp, key, e.what()));
    }
    try {
      s_.store->release_lease(key, dev.device_id, template_hash, s_.owner);
    } catch (const std::exception& e) {
      s_.log("warn", fmt::format("{} {}: could not release the lease: {}", F::kOp, key, e.what()));
    }
    return entry;
  }

  template <class F>
  void enqueue_background(DeviceState& dev, const typename F::Problem& problem, const std::string& key,
                          const std::string& template_hash) {
    DeviceState* d = &dev;
    worker_.enqueue(key, [this, d, problem, key, template_hash] {
      cuda_check(cudaSetDevice(d->ordinal), "cudaSetDevice (background tuning)");
      auto entry = tune_with_lease<F>(*d, problem, key, template_hash);
      if (!entry) return;  // another process tunes it: the provisional entry re-checks the cache
      std::lock_guard<std::mutex> miss(d->miss_mutex);
      d->table<F>().insert(problem, entry);
      ++s_.counters.background_swaps;
      s_.log("info", fmt::format("{} {}: background winner {} swapped in", F::kOp, key, entry->config.label()));
    });
  }

  ContextState& s_;
  BackgroundWorker& worker_;
};

}  // namespace kvtune::detail
