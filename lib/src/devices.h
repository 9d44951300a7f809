// Per-device state of a Context: the device's fingerprint and cost-model bandwidth, one lock-free
// dispatch table per family, the miss and tuning locks, and the workspace pool. Created on a
// device's first call, never freed before the context (the hot path reads it without a lock).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "core/module.h"
#include "lib/src/context_state.h"
#include "lib/src/dispatch_table.h"
#include "lib/src/families.h"

namespace kvtune::detail {

// What the dispatch table holds for a problem: the loaded kernel and the variant it runs.
template <class F>
struct Entry {
  LoadedKernel kernel;
  typename F::Config config;
  std::string origin;  // "tuned", "cached", "heuristic", "nearest"
  // A stand-in while the real winner is being tuned (background, or by another process holding
  // the lease): the hot path re-checks the cache for it every kRecheckSeconds.
  bool provisional = false;
  mutable std::atomic<std::int64_t> recheck_at_ns{0};
};

template <class F>
using Table = DispatchTable<typename F::Problem, Entry<F>, typename F::ProblemHash>;

template <class Tuple> struct TablesOf;
template <class... F> struct TablesOf<std::tuple<F...>> {
  using type = std::tuple<Table<F>...>;
};

struct DeviceState {
  int ordinal = 0;
  std::once_flag init;
  std::atomic<bool> ready{false};  // init has run: the fields below are set
  DeviceFingerprint fingerprint;
  std::string device_id;
  double bandwidth = 3.0e12;  // for the cost model: the stored copy ceiling once measured
  TablesOf<Families>::type tables;  // one lock-free dispatch table per family
  // Per family: whether any exact-size entry was published; only then does the hot path look
  // up the call's exact size before its bucket.
  std::array<std::atomic<bool>, std::tuple_size_v<Families>> has_exact{};
  std::mutex miss_mutex;  // one miss at a time per device
  std::mutex tune_mutex;  // one tuning at a time per device (foreground or background)
  // backward_weight and split-row workspaces: a stream-ordered pool of the context's own that
  // keeps its memory (the default pool gives it back at every synchronization, and mapping it
  // again cost ~10 us a call on an H200). Null where the pool could not be made: then the
  // device's default pool.
  std::once_flag pool_init;
  cudaMemPool_t workspace_pool = nullptr;

  template <class F>
  Table<F>& table() {
    return std::get<Table<F>>(tables);
  }
  template <class F>
  std::atomic<bool>& exact_published() {
    return has_exact[FamilyIndex<F>::value];
  }
};

class Devices {
 public:
  explicit Devices(ContextState& state) : state_(state) {}
  ~Devices();  // destroys the pools (each frees its memory once unused)
  Devices(const Devices&) = delete;
  Devices& operator=(const Devices&) = delete;

  // The device's state; on first use reads its fingerprint and records it in the cache (with
  // the stored copy ceiling as the cost model's bandwidth). kvtune::Error for an ordinal out of
  // range. Inline for the hot path: one acquire load and a flag once the device is set up.
  DeviceState& get(int ordinal) {
    if (ordinal >= 0 && ordinal < kMaxDevices)
      if (DeviceState* d = devices_[ordinal].load(std::memory_order_acquire);
          d != nullptr && d->ready.load(std::memory_order_acquire))
        return *d;
    return set_up(ordinal);
  }
  // The device's workspace pool, made on first use; null: use the default pool.
  cudaMemPool_t workspace_pool(int ordinal);

 private:
  static constexpr int kMaxDevices = 64;
  ContextState& state_;
  std::array<std::atomic<DeviceState*>, kMaxDevices> devices_{};  // read without a lock
  std::vector<std::unique_ptr<DeviceState>> storage_;               // written under mutex_
  std::mutex mutex_;

  DeviceState& set_up(int ordinal);  // get()'s first call on a device (and its error)
};

}  // namespace kvtune::detail
