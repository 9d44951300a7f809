// What every part of a Context shares: its options, buckets, cache store, lease owner, counters
// and log. The parts: devices.h (per-device state and pools), fallback_ladder.h (the miss path),
// tuning_run.h (one tuning), background_worker.h (the background policy's thread); context.cpp
// composes them behind the hot path.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/store.h"
#include "core/buckets.h"
#include "kvtune/kvtune.h"

namespace kvtune::detail {

constexpr double kRecheckSeconds = 0.5;  // provisional entries look for a landed winner this often

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ContextOptions::log_level as a rank: 0 off (or unknown), 1 warn, 2 info, 3 debug.
int log_level_rank(const std::string& level);

// The -DKVT_INJECT_FAULT value of a test fault ("wrong" 1, "oob" 2, "hang" 3; 0: not a fault).
int fault_define(const std::string& fault);

struct AtomicCounters {
  std::atomic<std::uint64_t> calls{0}, table_hits{0}, cache_hits{0}, tunes{0}, heuristic_uses{0}, compiles{0},
      variants_timed{0}, variants_rejected{0}, fallback_exact{0}, fallback_bucket{0}, fallback_nearest{0},
      fallback_heuristic{0}, binaries_reused{0}, lease_waits{0}, background_swaps{0}, records{0},
      cache_rows_rejected{0};
  Counters snapshot() const;
};

class ContextState {
 public:
  // Validates every option (kvtune::Error naming the field) before the store is opened.
  explicit ContextState(ContextOptions o);

  const ContextOptions options;
  const Buckets buckets;
  const std::string compile_worker;  // the resolved worker executable; "": compiles in this process
  std::unique_ptr<cache::Store> store;
  std::string owner;  // lease owner: host, process and context
  const int log_rank;
  AtomicCounters counters;

  void log(const char* level, const std::string& message) const;
  // A cache row that cannot be trusted is not used: logged and counted (stored_entry.h).
  void reject_row(const char* op, const std::string& key, const std::string& why);
  // Stores a result; a failing store is logged, never thrown (the call goes on with its entry).
  void store_result(const cache::Winner& winner, const std::vector<cache::Binary>& binaries,
                    const std::vector<cache::Trial>& trials, const std::optional<cache::TuningRun>& run);
};

}  // namespace kvtune::detail
