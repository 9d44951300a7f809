// Context: the path of one call. Validate -> key -> lock-free table -> launch. On a miss, under
// the device's miss mutex, the fallback ladder: a stored winner of the exact size -> of the
// bucket -> (policy tune: tune now under the key's lease) -> the nearest tuned shape -> the
// heuristic. Stand-ins while a winner is tuned elsewhere (background policy, another process's
// lease) are provisional: the hot path re-checks the cache for the winner twice a second.

#include <cuda_runtime_api.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "kvtune/kvtune.h"
#include "core/buckets.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "lib/src/dispatch_table.h"
#include "lib/src/families.h"
#include "core/hash.h"
#include "core/module.h"
#include "core/nvml.h"
#include "lib/src/stored_entry.h"
#include "tuner/tuner.h"

namespace kvtune {
namespace {

constexpr int kMaxDevices = 64;
constexpr double kRecheckSeconds = 0.5;  // provisional entries look for a landed winner this often
constexpr double kDefaultBandwidth = 3.0e12;  // cost-model bandwidth before a copy was measured
// Upper bounds of ContextOptions: far above any useful value, low enough that nothing overflows.
constexpr int kMaxTimingSamples = 10000;
constexpr int kMaxCompileThreads = 4096;
constexpr double kMaxLeaseSeconds = 7 * 24 * 3600.0;

std::string default_cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::string(xdg) + "/kvtune/cache.sqlite";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/kvtune/cache.sqlite";
  return "";
}

int level_rank(const std::string& level) {
  if (level == "warn") return 1;
  if (level == "info") return 2;
  if (level == "debug") return 3;
  return 0;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A non-negative integer (or number) environment setting; throws naming the variable.
double env_number(const char* name, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= 0) || v > 1e12)
    throw Error(Error::Context{"context", "", "", "", name},
                fmt::format("{} must be a non-negative number, got '{}'", name, text));
  return v;
}

template <class F>
struct Entry {
  detail::LoadedKernel kernel;
  typename F::Config config;
  std::string origin;  // "tuned", "cached", "heuristic", "nearest"
  // A stand-in while the real winner is being tuned (background, or by another process holding
  // the lease): the hot path re-checks the cache for it every kRecheckSeconds.
  bool provisional = false;
  mutable std::atomic<std::int64_t> recheck_at_ns{0};
};

template <class F>
using Table = detail::DispatchTable<typename F::Problem, Entry<F>, typename F::ProblemHash>;

template <class Tuple> struct TablesOf;
template <class... F> struct TablesOf<std::tuple<F...>> {
  using type = std::tuple<Table<F>...>;
};

// Background workers still running at exit are stopped before the CUDA runtime tears down.
std::mutex g_workers_mutex;
std::vector<std::function<void()>*> g_worker_stops;
void stop_all_workers() {
  std::vector<std::function<void()>*> stops;
  {
    std::lock_guard<std::mutex> lock(g_workers_mutex);
    stops.swap(g_worker_stops);
  }
  for (auto* stop : stops) (*stop)();
}

}  // namespace

ContextOptions ContextOptions::from_environment() {
  // Every environment variable kvtune reads is read here.
  ContextOptions o;
  o.cache_path = default_cache_path();
  if (const char* v = std::getenv("KVTUNE_POLICY"); v != nullptr && *v != '\0') o.policy = parse_policy(v);
  if (const char* v = std::getenv("KVTUNE_CACHE"); v != nullptr) o.cache_path = v;
  if (const char* v = std::getenv("KVTUNE_LOG"); v != nullptr) {
    o.log_level = v;
    if (!o.log_level.empty() && level_rank(o.log_level) == 0)
      throw Error(Error::Context{"context", "", "", "", "KVTUNE_LOG"},
                  fmt::format("KVTUNE_LOG must be warn, info or debug, got '{}'", o.log_level));
  }
  if (const char* v = std::getenv("KVTUNE_BUDGET_VARIANTS"); v != nullptr && *v != '\0')
    o.budget_variants = static_cast<int>(std::min(env_number("KVTUNE_BUDGET_VARIANTS", v), 1e6));
  if (const char* v = std::getenv("KVTUNE_BUDGET_MS"); v != nullptr && *v != '\0')
    o.budget_ms = env_number("KVTUNE_BUDGET_MS", v);
#if defined(KVTUNE_TEST_HOOKS)
  // Test builds only (cmake -DKVTUNE_TEST_HOOKS=ON): a library users get never reads it.
  if (const char* v = std::getenv("KVTUNE_TEST_FAULT"); v != nullptr) o.test_fault = v;
#endif
  if (const char* v = std::getenv("KVTUNE_BUCKETS"); v != nullptr && *v != '\0') {
    detail::Buckets::parse(v, "KVTUNE_BUCKETS");  // refuse a bad spec here, naming the variable
    o.buckets = v;
  }
  return o;
}

struct Context::Impl {
  struct Device {
    int ordinal = 0;
    std::once_flag init;
    detail::DeviceFingerprint fingerprint;
    std::string device_id;
    double bandwidth = kDefaultBandwidth;  // for the cost model: the stored copy ceiling when known
    TablesOf<detail::Families>::type tables;  // one lock-free dispatch table per family
    // Per family: whether any exact-size entry was published; only then does the hot path look
    // up the call's exact size before its bucket.
    std::array<std::atomic<bool>, std::tuple_size_v<detail::Families>> has_exact{};
    std::mutex miss_mutex;  // one miss at a time per device
    std::mutex tune_mutex;  // one tuning at a time per device (foreground or background)
    // backward_weight workspaces: a stream-ordered pool of the context's own that keeps its memory
    // (the default pool gives it back at every synchronization, and mapping it again cost ~10 us a
    // call on an H200). Null where the pool could not be made: then the device's default pool.
    std::once_flag pool_init;
    cudaMemPool_t workspace_pool = nullptr;
  };

  ContextOptions options;
  detail::Buckets buckets;
  std::unique_ptr<cache::Store> store;
  std::string owner;  // lease owner: host, process and context
  // Per-device state, created once and never freed before the context: readers load the pointer
  // without a lock (the hot path), creation happens under devices_mutex.
  std::array<std::atomic<Device*>, kMaxDevices> devices{};
  std::vector<std::unique_ptr<Device>> device_storage;
  std::mutex devices_mutex;
  int log_rank = 0;

  // The background policy's worker: one thread, a queue of tunings, started on first use.
  std::mutex queue_mutex;
  std::condition_variable queue_cv, idle_cv;
  std::deque<std::pair<std::string, std::function<void()>>> queue;  // (key, job)
  std::set<std::string> queued_keys;
  bool worker_busy = false;
  bool stopping = false;
  std::thread worker;
  std::function<void()> stop_worker_fn;

  struct AtomicCounters {
    std::atomic<std::uint64_t> calls{0}, table_hits{0}, cache_hits{0}, tunes{0}, heuristic_uses{0}, compiles{0},
        variants_timed{0}, variants_rejected{0}, fallback_exact{0}, fallback_bucket{0}, fallback_nearest{0},
        fallback_heuristic{0}, binaries_reused{0}, lease_waits{0}, background_swaps{0}, records{0},
        cache_rows_rejected{0};
  } counters;

  explicit Impl(ContextOptions o) : options(std::move(o)) {
    validate(options);
    log_rank = level_rank(options.log_level);
    buckets = detail::Buckets::parse(options.buckets, "buckets");
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    owner = fmt::format("{}:{}:{}", host, static_cast<long>(getpid()), static_cast<const void*>(this));
    store = cache::Store::open(options.cache_path, [this](const char* level, const std::string& message) {
      log(level, "cache: " + message);
    });
  }

  // Every setting in range, before anything is opened; kvtune::Error naming the field otherwise.
  static void validate(const ContextOptions& o) {
    const auto refuse = [](const char* field, const std::string& why) {
      throw Error(Error::Context{"context", "", "", "", field}, fmt::format("{} {}", field, why));
    };
    if (static_cast<int>(o.policy) > static_cast<int>(Policy::record))
      refuse("policy", fmt::format("is not a Policy (value {})", static_cast<int>(o.policy)));
    if (!o.log_level.empty() && level_rank(o.log_level) == 0)
      refuse("log_level", fmt::format("must be \"\", warn, info or debug, got '{}'", o.log_level));
    if (o.timing_samples < 1 || o.timing_samples > kMaxTimingSamples)
      refuse("timing_samples", fmt::format("must be 1..{}, got {}", kMaxTimingSamples, o.timing_samples));
    if (o.compile_threads < 0 || o.compile_threads > kMaxCompileThreads)
      refuse("compile_threads", fmt::format("must be 0 (all cores)..{}, got {}", kMaxCompileThreads, o.compile_threads));
    if (o.budget_variants < 0)
      refuse("budget_variants", fmt::format("must be >= 0 (0: exhaustive), got {}", o.budget_variants));
    if (!(o.budget_ms >= 0) || !std::isfinite(o.budget_ms))
      refuse("budget_ms", fmt::format("must be a finite number >= 0 (0: none), got {}", o.budget_ms));
    if (!(o.lease_seconds > 0) || o.lease_seconds > kMaxLeaseSeconds)
      refuse("lease_seconds", fmt::format("must be > 0 and <= {} seconds, got {}", kMaxLeaseSeconds, o.lease_seconds));
    if (!o.test_fault.empty() && fault_define(o.test_fault) == 0)
      refuse("test_fault", fmt::format("must be wrong, oob or hang, got '{}'", o.test_fault));
  }

  ~Impl() {
    stop_worker();
    for (const auto& d : device_storage)
      if (d->workspace_pool != nullptr) cudaMemPoolDestroy(d->workspace_pool);  // frees once unused
  }

  cudaMemPool_t workspace_pool(int ordinal) {
    Device& d = device(ordinal);
    std::call_once(d.pool_init, [&] {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = ordinal;
      cudaMemPool_t pool = nullptr;
      if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
        cudaGetLastError();
        log("warn", fmt::format("device {}: no memory pool of kvtune's own; workspaces use the default pool", ordinal));
        return;
      }
      std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
      d.workspace_pool = pool;
    });
    return d.workspace_pool;
  }

  static int fault_define(const std::string& fault) {
    return fault == "wrong" ? 1 : fault == "oob" ? 2 : fault == "hang" ? 3 : 0;
  }

  // Test-only: a copy of the cost model's favourite with a fault compiled in, tried first.
  template <class F>
  void add_faulty_candidate(std::vector<tuner::Candidate>& candidates, tuner::Options& topt) const {
    if (options.test_fault.empty() || std::string(F::kOp) != "normalize" || candidates.empty()) return;
    const auto best = std::min_element(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
      return a.predicted_seconds < b.predicted_seconds;
    });
    tuner::Candidate faulty = *best;
    faulty.label += ",fault=" + options.test_fault;
    faulty.request.extra_options.push_back(fmt::format("-DKVT_INJECT_FAULT={}", fault_define(options.test_fault)));
    faulty.request.extra_options.push_back("-DKVT_FAULT_SPIN_CYCLES=16000000000ll");  // ~8 s at 2 GHz
    faulty.predicted_seconds = -1;
    faulty.tie_rank = -1e9;  // it would win every tie
    topt.required.push_back(static_cast<int>(candidates.size()));
    candidates.push_back(std::move(faulty));
    log("warn", fmt::format("test fault '{}' injected as candidate {}", options.test_fault, candidates.back().label));
  }

  void log(const char* level, const std::string& message) const {
    if (level_rank(level) > log_rank || log_rank == 0) return;
    if (options.log) options.log(level, message);
    else std::fprintf(stderr, "[kvtune %s] %s\n", level, message.c_str());
  }

  Device& device(int ordinal) {
    if (ordinal < 0 || ordinal >= kMaxDevices)
      throw Error(Error::Context{"context", "", "", "", "device"}, fmt::format("device ordinal {} out of range", ordinal));
    Device* d = devices[ordinal].load(std::memory_order_acquire);
    if (d == nullptr) {
      std::lock_guard<std::mutex> lock(devices_mutex);
      d = devices[ordinal].load(std::memory_order_relaxed);
      if (d == nullptr) {
        device_storage.push_back(std::make_unique<Device>());
        d = device_storage.back().get();
        d->ordinal = ordinal;
        devices[ordinal].store(d, std::memory_order_release);
      }
    }
    std::call_once(d->init, [&] {
      d->fingerprint = detail::read_fingerprint(ordinal);
      d->device_id = d->fingerprint.id();
      cache::DeviceRow row;
      row.id = d->device_id;
      row.name = d->fingerprint.name;
      row.cc_major = d->fingerprint.cc_major;
      row.cc_minor = d->fingerprint.cc_minor;
      row.sm_count = d->fingerprint.sm_count;
      row.l2_bytes = d->fingerprint.l2_bytes;
      row.memory_bytes = d->fingerprint.memory_bytes;
      row.driver_version = d->fingerprint.driver_version;
      row.nvrtc_version = d->fingerprint.nvrtc_version;
      row.kvtune_version = d->fingerprint.kvtune_version;
      row.json = d->fingerprint.to_json();
      try {
        store->put_device(row);
        if (auto ceilings = store->find_ceilings(d->device_id); ceilings && ceilings->copy_gbps > 0)
          d->bandwidth = ceilings->copy_gbps * 1e9;
      } catch (const Error& e) {
        log("warn", std::string("could not record the device in the cache: ") + e.what());
      }
    });
    return *d;
  }

  // ---- the miss path: the fallback ladder ----------------------------------------------------

  template <class F>
  const Entry<F>& publish(Device& dev, const typename F::Problem& problem, std::shared_ptr<Entry<F>> entry) {
    if (entry->provisional) entry->recheck_at_ns.store(now_ns() + std::int64_t(kRecheckSeconds * 1e9));
    auto& table = std::get<Table<F>>(dev.tables);
    table.insert(problem, std::move(entry));
    return *table.find(problem);
  }

  template <class F>
  const Entry<F>& resolve(Device& dev, const typename F::Problem& problem, std::int64_t batch, Stream stream) {
    std::lock_guard<std::mutex> lock(dev.miss_mutex);
    auto& table = std::get<Table<F>>(dev.tables);
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

    const Policy policy = options.policy;
    // 1. A stored winner for the exact size (kvtune-tune of exact shapes, or exact bucketing):
    // every exact-size entry of this bucket is published at once, the call's own size counts.
    if (!buckets.exact() && publish_exact_entries<F>(dev, problem, template_hash)) {
      if (const Entry<F>* entry = table.find(F::with_batch(problem, batch, true))) {
        ++counters.fallback_exact;
        ++counters.cache_hits;
        log("info", fmt::format("{} {}: exact-size entry {} ({})", F::kOp, key, entry->config.label(), entry->origin));
        return *entry;
      }
    }
    // 2. A stored winner for the bucket (retune: a tuned one becomes the incumbent instead).
    if (auto stored = lookup_stored<F>(dev, problem, key, template_hash);
        stored && !(options.retune && policy == Policy::tune)) {
      ++counters.fallback_bucket;
      ++counters.cache_hits;
      log("info", fmt::format("{} {}: cached {} ({})", F::kOp, key, stored->config.label(), stored->origin));
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
        store->record_problem(F::kOp, key, dev.device_id, template_hash);
        ++counters.records;
        log("info", fmt::format("{} {}: recorded for offline tuning", F::kOp, key));
      } catch (const std::exception& e) {
        log("warn", fmt::format("{} {}: could not record the problem: {}", F::kOp, key, e.what()));
      }
    }
    // 3. The nearest tuned shape of the same op, dtype and layout (not for the heuristic policy).
    if (policy != Policy::heuristic) {
      if (auto entry = nearest<F>(dev, problem, key, template_hash)) {
        entry->provisional = provisional;
        ++counters.fallback_nearest;
        return publish<F>(dev, problem, entry);
      }
    }
    // 4. The heuristic variant.
    auto entry = heuristic<F>(dev, problem, key, template_hash);
    entry->provisional = provisional;
    ++counters.fallback_heuristic;
    return publish<F>(dev, problem, entry);
  }

  template <class F>
  static constexpr std::size_t family_index() {
    return detail::FamilyIndex<F>::value;
  }

  // Publishes the stored exact-size winners whose size falls in `bucket`'s bucket; returns
  // whether there were any.
  template <class F>
  bool publish_exact_entries(Device& dev, const typename F::Problem& bucket, const std::string& template_hash) {
    bool any = false;
    try {
      auto& table = std::get<Table<F>>(dev.tables);
      for (const auto& w : store->winners_for(F::kOp, dev.device_id, template_hash)) {
        const auto q = F::from_key(w.problem_key);
        if (!q || !F::exact(*q) || !(F::with_batch(*q, buckets.bucket(F::batch(*q)), false) == bucket)) continue;
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
      log("warn", fmt::format("{}: exact-size entries unavailable: {}", F::kOp, e.what()));
    }
    if (any) dev.has_exact[family_index<F>()].store(true, std::memory_order_release);
    return any;
  }

  // On a hit of a provisional entry whose recheck time has come: a stored winner replaces it.
  template <class F>
  void recheck(Device& dev, const typename F::Problem& problem, const Entry<F>& entry) {
    std::int64_t due = entry.recheck_at_ns.load(std::memory_order_relaxed);
    const std::int64_t now = now_ns();
    if (now < due || !entry.recheck_at_ns.compare_exchange_strong(due, now + std::int64_t(kRecheckSeconds * 1e9)))
      return;
    std::unique_lock<std::mutex> lock(dev.miss_mutex, std::try_to_lock);
    if (!lock.owns_lock()) return;
    const std::string key = problem.key();
    if (auto stored = lookup_stored<F>(dev, problem, key, F::template_hash()); stored && stored->origin != "heuristic") {
      log("info", fmt::format("{} {}: the tuned winner landed: {}", F::kOp, key, stored->config.label()));
      ++counters.cache_hits;
      std::get<Table<F>>(dev.tables).insert(problem, stored);
    }
  }

  template <class F>
  std::shared_ptr<Entry<F>> make_entry(const typename F::Problem& problem, const typename F::Config& config,
                                       const std::string& image, const std::string& lowered_name, const char* origin) {
    auto entry = std::make_shared<Entry<F>>();
    entry->config = config;
    entry->origin = origin;
    entry->kernel = detail::LoadedKernel::load(image, lowered_name);
    entry->kernel.allow_dynamic_smem(F::dynamic_smem(problem, config));
    return entry;
  }

  // A cache row that cannot be trusted is not used: logged and counted (stored_entry.h).
  void reject_row(const char* op, const std::string& key, const std::string& why) {
    ++counters.cache_rows_rejected;
    log("warn", fmt::format("{} {}: not using a cache row: {}", op, key, why));
  }

  // The binary of `config` for `problem`: from the store by compile hash when it is the one this
  // build makes, else compiled and stored.
  template <class F>
  cache::Binary binary_for(Device& dev, const typename F::Problem& problem, const typename F::Config& config) {
    const auto request = F::compile_request(problem, config, dev.fingerprint.arch());
    const std::string hash = detail::compile_hash(request);
    if (auto found = store->find_binary(hash)) {
      std::string why;
      if (detail::binary_matches_request(found->hash, found->arch, found->lowered_name, request, &why)) return *found;
      reject_row(F::kOp, problem.key(), fmt::format("binary {} of {}: {}; compiling it", hash, config.label(), why));
    }
    auto compiled = detail::nvrtc_compile(request);
    ++counters.compiles;
    cache::Binary binary{hash, dev.fingerprint.arch(), compiled.lowered_names.at(0), compiled.cubin,
                         detail::hash_hex(compiled.cubin)};
    try {
      store->put_binary(binary);
    } catch (const std::exception& e) {
      log("warn", fmt::format("could not store a binary: {}", e.what()));
    }
    return binary;
  }

  template <class F>
  std::shared_ptr<Entry<F>> lookup_stored(Device& dev, const typename F::Problem& problem, const std::string& key,
                                          const std::string& template_hash) {
    try {
      std::string refused;
      auto stored = detail::read_stored<F>(*store, problem, key, dev.device_id, template_hash, dev.fingerprint.arch(),
                                           refused);
      if (!refused.empty()) reject_row(F::kOp, key, refused + (stored ? "; compiling it" : ""));
      if (!stored) return nullptr;
      cache::Winner& winner = stored->winner;
      if (winner.origin == "heuristic" && (options.policy == Policy::tune || options.policy == Policy::background))
        return nullptr;
      if (!stored->binary && (winner.origin == "imported" || winner.binary_hash.empty() || !refused.empty())) {
        // `kvtune-cache import` and `merge` bring configs, not binaries, and a refused binary is
        // replaced: compile once (unless `kvtune-tune --compile-only` stored this binary already)
        // and keep it for later processes.
        stored->binary = binary_for<F>(dev, problem, stored->config);
        winner.binary_hash = stored->binary->hash;
        store_result(winner, {*stored->binary}, {}, std::nullopt);
      }
      if (!stored->binary) return nullptr;  // a tuned winner whose binary is gone: tuned again
      return make_entry<F>(problem, stored->config, stored->binary->image, stored->binary->lowered_name,
                           winner.origin == "heuristic" ? "heuristic" : "cached");
    } catch (const std::exception& e) {
      log("warn", fmt::format("{} {}: ignoring the cached entry: {}", F::kOp, key, e.what()));
      return nullptr;
    }
  }

  template <class F>
  std::shared_ptr<Entry<F>> nearest(Device& dev, const typename F::Problem& problem, const std::string& key,
                                    const std::string& template_hash) {
    try {
      double best = std::numeric_limits<double>::infinity();
      std::optional<typename F::Config> chosen;
      std::string from;
      for (const auto& w : store->winners_for(F::kOp, dev.device_id, template_hash)) {
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
      const cache::Binary binary = binary_for<F>(dev, problem, *chosen);
      log("info", fmt::format("{} {}: nearest tuned shape {} -> {}", F::kOp, key, from, chosen->label()));
      return make_entry<F>(problem, *chosen, binary.image, binary.lowered_name, "nearest");
    } catch (const std::exception& e) {
      log("warn", fmt::format("{} {}: no nearest shape: {}", F::kOp, key, e.what()));
      return nullptr;
    }
  }

  void store_result(const cache::Winner& winner, const std::vector<cache::Binary>& binaries,
                    const std::vector<cache::Trial>& trials, const std::optional<cache::TuningRun>& run) {
    try {
      store->put_result(winner, binaries, trials, run);
    } catch (const std::exception& e) {
      log("warn", fmt::format("could not store the result for {}: {}", winner.problem_key, e.what()));
    }
  }

  template <class F>
  cache::Winner make_winner(Device& dev, const std::string& key, const std::string& template_hash,
                            const typename F::Config& config, const std::string& binary_hash, const char* origin) {
    cache::Winner w;
    w.op = F::kOp;
    w.problem_key = key;
    w.device_id = dev.device_id;
    w.template_hash = template_hash;
    w.label = config.label();
    w.config_json = config.to_json().dump();
    w.binary_hash = binary_hash;
    w.origin = origin;
    w.created_at = static_cast<std::int64_t>(std::time(nullptr));
    return w;
  }

  template <class F>
  std::shared_ptr<Entry<F>> heuristic(Device& dev, const typename F::Problem& problem, const std::string& key,
                                      const std::string& template_hash) {
    const auto config = F::heuristic(problem, dev.fingerprint.cc_major);
    const cache::Binary binary = binary_for<F>(dev, problem, config);
    ++counters.heuristic_uses;
    auto entry = make_entry<F>(problem, config, binary.image, binary.lowered_name, "heuristic");
    // Stored for the non-tuning policies' next process; a tuned winner is never overwritten by it.
    // The record policy stores none: the problem stays recorded until it is tuned.
    try {
      const auto stored = store->find_winner(key, dev.device_id, template_hash);
      if (!stored && options.policy != Policy::record) store_result(make_winner<F>(dev, key, template_hash, config, binary.hash, "heuristic"), {binary}, {},
                                std::nullopt);
    } catch (const std::exception& e) {
      log("warn", fmt::format("{} {}: {}", F::kOp, key, e.what()));
    }
    log("info", fmt::format("{} {}: heuristic {}", F::kOp, key, config.label()));
    return entry;
  }

  // Tunes under the key's lease. nullptr when another process holds the lease (it will store the
  // winner) or when tuning failed; the caller falls back.
  template <class F>
  std::shared_ptr<Entry<F>> tune_with_lease(Device& dev, const typename F::Problem& problem, const std::string& key,
                                            const std::string& template_hash) {
    bool leased = false;
    try {
      leased = store->try_acquire_lease(key, dev.device_id, template_hash, owner, options.lease_seconds);
    } catch (const std::exception& e) {
      log("warn", fmt::format("{} {}: lease unavailable ({}), tuning anyway", F::kOp, key, e.what()));
      leased = true;  // a broken cache must not stop tuning
    }
    if (!leased) {
      ++counters.lease_waits;
      log("info", fmt::format("{} {}: another process is tuning it; using the fallback until its winner lands",
                              F::kOp, key));
      return nullptr;
    }
    std::shared_ptr<Entry<F>> entry;
    try {
      // The winner may have landed between our lookup and the lease.
      if (!options.retune) entry = lookup_stored<F>(dev, problem, key, template_hash);
      if (!entry) {
        std::lock_guard<std::mutex> tune_lock(dev.tune_mutex);
        entry = tune<F>(dev, problem, key, template_hash);
      }
    } catch (const Error& e) {
      log("warn", fmt::format("{} {}: tuning failed, using a fallback: {}", F::kOp, key, e.what()));
    }
    try {
      store->release_lease(key, dev.device_id, template_hash, owner);
    } catch (const std::exception& e) {
      log("warn", fmt::format("{} {}: could not release the lease: {}", F::kOp, key, e.what()));
    }
    return entry;
  }

  template <class F>
  std::shared_ptr<Entry<F>> tune(Device& dev, const typename F::Problem& problem, const std::string& key,
                                 const std::string& template_hash) {
    const auto start = std::chrono::steady_clock::now();
    const std::int64_t started_at = static_cast<std::int64_t>(std::time(nullptr));
    const std::string arch = dev.fingerprint.arch();
    auto configs = detail::tuning_configs<F>(problem, dev.fingerprint.cc_major);
    if (configs.empty()) throw Error(Error::Context{F::kOp, key, "", "", ""}, "no valid variant");
    // A stored winner is timed again (the incumbent), also one outside the space (imported from
    // another build) as long as it can run.
    const auto stored = store->find_winner(key, dev.device_id, template_hash);
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
    topt.samples = options.timing_samples;
    topt.compile_threads = options.compile_threads;
    topt.max_dynamic_smem = dev.fingerprint.max_smem_per_block_optin;
    topt.budget_variants = options.budget_variants;
    topt.budget_ms = options.budget_ms;
    topt.seed = std::hash<std::string>{}(key);
    const auto index_of = [&](const typename F::Config& c) {
      const auto it = std::find(configs.begin(), configs.end(), c);
      return it == configs.end() ? -1 : static_cast<int>(it - configs.begin());
    };
    topt.required.push_back(index_of(F::heuristic(problem, dev.fingerprint.cc_major)));
    std::string incumbent_label;
    if (stored_config) {
      topt.incumbent = index_of(*stored_config);
      incumbent_label = stored->label;
      topt.required.push_back(topt.incumbent);
    }
    topt.find_binaries = [this](const std::vector<std::string>& hashes) { return store->find_binaries(hashes); };
    add_faulty_candidate<F>(candidates, topt);
    if (options.on_progress)
      topt.on_progress = [this, &key](const tuner::Progress& p) {
        TuningProgress out;
        out.op = F::kOp;
        out.problem_key = key;
        out.done = p.done;
        out.total = p.total;
        out.label = p.trial->label;
        out.status = p.trial->status;
        out.median_ms = p.trial->median_ms;
        out.final = p.final;
        options.on_progress(out);
      };
    if (log_rank >= 3) topt.debug = [this](const std::string& line) { log("debug", line); };

    cudaStream_t stream = nullptr;
    detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> stream_guard(stream, [](cudaStream_t s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    });
    const detail::GpuConditions before = detail::read_gpu_conditions(dev.ordinal);
    auto harness = F::harness(problem, configs, arch, options.hot_l2 ? 0 : dev.fingerprint.l2_bytes, stream);
    log("info", fmt::format("{} {}: tuning on {} ({} variants, budget {})", F::kOp, key, dev.fingerprint.name,
                            candidates.size(), topt.budget_variants));
    tuner::Outcome outcome = tuner::tune(candidates, *harness, topt, stream);
    ++counters.tunes;
    counters.compiles += static_cast<std::uint64_t>(outcome.compiles);
    counters.binaries_reused += static_cast<std::uint64_t>(outcome.reused);
    for (const auto& why : outcome.rejected_binaries) reject_row(F::kOp, key, "a stored binary of " + why);
    for (const auto& t : outcome.trials) {
      if (t.status == "ok") ++counters.variants_timed;
      else ++counters.variants_rejected;
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
    run.json = nlohmann::json{{"winner_spread", outcome.winner_spread},
                              {"budget_variants", options.budget_variants},
                              {"budget_ms", options.budget_ms},
                              {"hot_l2", options.hot_l2},
                              {"sm_clock_mhz_after", after.sm_clock_mhz},
                              {"temperature_c_after", after.temperature_c}}
                   .dump();
    store_result(winner, binaries, outcome.trials, run);
    log("info", fmt::format("{} {}: winner {} {:.4f} ms {:.0f} GB/s ({} of {} variants, {} compiled, {} reused; "
                            "compile {:.2f} s, benchmark {:.2f} s, SM clock {} MHz){}",
                            F::kOp, key, winner.label, winner.median_ms, winner.gbps, outcome.trials.size(),
                            candidates.size(), outcome.compiles, outcome.reused, outcome.compile_seconds,
                            outcome.bench_seconds, before.sm_clock_mhz,
                            incumbent_label.empty() ? ""
                            : outcome.kept_incumbent
                                ? fmt::format("; incumbent {} kept", incumbent_label)
                                : fmt::format("; replaces {} ({:.4f} ms)", incumbent_label, outcome.incumbent_ms)));
    return entry;
  }

  // ---- the background policy ------------------------------------------------------------------

  template <class F>
  void enqueue_background(Device& dev, const typename F::Problem& problem, const std::string& key,
                          const std::string& template_hash) {
    std::lock_guard<std::mutex> lock(queue_mutex);
    if (stopping || !queued_keys.insert(key).second) return;
    if (!worker.joinable()) start_worker();
    Device* d = &dev;
    queue.emplace_back(key, [this, d, problem, key, template_hash] {
      detail::cuda_check(cudaSetDevice(d->ordinal), "cudaSetDevice (background tuning)");
      auto entry = tune_with_lease<F>(*d, problem, key, template_hash);
      if (!entry) return;  // another process tunes it: the provisional entry re-checks the cache
      std::lock_guard<std::mutex> miss(d->miss_mutex);
      std::get<Table<F>>(d->tables).insert(problem, entry);
      ++counters.background_swaps;
      log("info", fmt::format("{} {}: background winner {} swapped in", F::kOp, key, entry->config.label()));
    });
    queue_cv.notify_one();
  }

  void start_worker() {  // under queue_mutex
    worker = std::thread([this] {
      for (;;) {
        std::pair<std::string, std::function<void()>> job;
        {
          std::unique_lock<std::mutex> lock(queue_mutex);
          queue_cv.wait(lock, [&] { return stopping || !queue.empty(); });
          if (stopping) break;
          job = std::move(queue.front());
          queue.pop_front();
          worker_busy = true;
        }
        try {
          job.second();
        } catch (const std::exception& e) {
          log("warn", fmt::format("background tuning of {} failed: {}", job.first, e.what()));
        }
        std::lock_guard<std::mutex> lock(queue_mutex);
        worker_busy = false;
        idle_cv.notify_all();
      }
      std::lock_guard<std::mutex> lock(queue_mutex);
      worker_busy = false;
      idle_cv.notify_all();
    });
    stop_worker_fn = [this] { stop_worker(); };
    std::lock_guard<std::mutex> lock(g_workers_mutex);
    static std::once_flag registered;
    std::call_once(registered, [] { std::atexit(stop_all_workers); });
    g_worker_stops.push_back(&stop_worker_fn);
  }

  void stop_worker() {
    {
      std::lock_guard<std::mutex> lock(queue_mutex);
      stopping = true;
      queue.clear();
      queue_cv.notify_all();
    }
    if (worker.joinable() && worker.get_id() != std::this_thread::get_id()) worker.join();
    std::lock_guard<std::mutex> lock(g_workers_mutex);
    g_worker_stops.erase(std::remove(g_worker_stops.begin(), g_worker_stops.end(), &stop_worker_fn),
                         g_worker_stops.end());
  }

  void wait_background() {
    std::unique_lock<std::mutex> lock(queue_mutex);
    idle_cv.wait(lock, [&] { return stopping || (queue.empty() && !worker_busy); });
  }

  // ---- the hot path ---------------------------------------------------------------------------

  // Key -> lock-free table -> entry. Misses go to resolve().
  template <class F>
  const Entry<F>& entry_for(const typename F::Problem& problem, std::int64_t batch, Stream stream) {
    int ordinal = 0;
    const cudaError_t status = cudaGetDevice(&ordinal);
    if (status != cudaSuccess) detail::device_count();  // throws the clear "no CUDA device" error
    Device& dev = device(ordinal);
    ++counters.calls;
    auto& table = std::get<Table<F>>(dev.tables);
    if (dev.has_exact[family_index<F>()].load(std::memory_order_acquire) && !buckets.exact())
      if (const Entry<F>* entry = table.find(F::with_batch(problem, batch, true))) {
        ++counters.table_hits;
        return *entry;
      }
    if (const Entry<F>* entry = table.find(problem)) {
      ++counters.table_hits;
      if (entry->provisional) recheck<F>(dev, problem, *entry);
      return *entry;
    }
    return resolve<F>(dev, problem, batch, stream);
  }
};

Context::Context(ContextOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Context::~Context() = default;

namespace {

// The scratch of one call: the caller's workspace when given (a framework's allocator owns all
// memory), checked for size and alignment, else an allocation from the device's stream-ordered
// pool, freed in stream order when this goes: no synchronization, capture-safe (a captured
// allocation becomes a graph memory node).
class CallWorkspace {
 public:
  CallWorkspace(Context::Impl& impl, std::size_t bytes, void* given, std::size_t given_bytes, cudaStream_t stream,
                const Error::Context& where, const char* size_query)
      : stream_(stream) {
    if (bytes == 0) return;
    if (given != nullptr) {
      Error::Context at = where;
      at.field = "workspace_bytes";
      if (given_bytes < bytes)
        throw Error(at, fmt::format("the workspace holds {} bytes; this variant needs {} ({})", given_bytes, bytes,
                                    size_query));
      at.field = "workspace";
      if (reinterpret_cast<std::uintptr_t>(given) % 256 != 0) throw Error(at, "workspace must be aligned to 256 bytes");
      pointer_ = given;
      return;
    }
    int ordinal = 0;
    if (cudaError_t s = cudaGetDevice(&ordinal); s != cudaSuccess) detail::cuda_check(s, "cudaGetDevice", where);
    const cudaMemPool_t pool = impl.workspace_pool(ordinal);
    const cudaError_t s = pool != nullptr ? cudaMallocFromPoolAsync(&pointer_, bytes, pool, stream)
                                          : cudaMallocAsync(&pointer_, bytes, stream);
    if (s != cudaSuccess) detail::cuda_check(s, "cudaMallocAsync (workspace)", where);
    owned_ = true;
  }
  ~CallWorkspace() {
    if (owned_) cudaFreeAsync(pointer_, stream_);
  }
  CallWorkspace(const CallWorkspace&) = delete;
  CallWorkspace& operator=(const CallWorkspace&) = delete;
  void* get() const { return pointer_; }

 private:
  cudaStream_t stream_;
  void* pointer_ = nullptr;
  bool owned_ = false;
};

}  // namespace

void Context::normalize(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  const Error::Context where{"normalize", problem.key(), entry.config.label(), "", ""};
  // Split rows only: the slices' partial statistics (normalize_workspace_size).
  const CallWorkspace workspace(*impl_, normalize::geometry(problem, entry.config, args.rows).workspace_bytes,
                                args.workspace, args.workspace_bytes, cuda_stream, where, "normalize_workspace_size");
  const normalize::LaunchArgs launch_args{args.x,
                                          args.y,
                                          args.gamma,
                                          args.beta,
                                          args.mean,
                                          args.rstd,
                                          args.rows,
                                          args.ld_x == 0 ? args.cols : args.ld_x,
                                          args.ld_y == 0 ? args.cols : args.ld_y,
                                          args.eps,
                                          args.ddof,
                                          workspace.get()};
  const cudaError_t status = normalize::launch(entry.kernel, problem, entry.config, launch_args, cuda_stream);
  if (status != cudaSuccess)
    detail::cuda_check(status,
                       entry.config.cooperative ? "cooperative launch (a row's slices must all be co-resident)"
                                                : "cudaLaunchKernel",
                       where);
}

std::size_t Context::normalize_workspace_size(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  return normalize::geometry(problem, entry.config, args.rows).workspace_bytes;
}

std::string Context::normalize_variant(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  return impl_->entry_for<detail::NormalizeFamily>(normalize::make_problem(args, impl_->buckets), args.rows, stream)
      .config.label();
}


void Context::normalize_backward(const NormalizeBackwardArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  const Error::Context where{"normalize_backward", problem.key(), entry.config.label(), "", ""};
  const CallWorkspace workspace(*impl_, normalize::geometry(problem, entry.config, args.rows).workspace_bytes,
                                args.workspace, args.workspace_bytes, cuda_stream, where,
                                "normalize_backward_workspace_size");
  const normalize::BackwardLaunchArgs launch_args{args.x,
                                                  args.dy,
                                                  args.dx,
                                                  args.gamma,
                                                  args.mean,
                                                  args.rstd,
                                                  args.dgamma,
                                                  args.dbeta,
                                                  workspace.get(),
                                                  args.rows,
                                                  args.ld_x == 0 ? args.cols : args.ld_x,
                                                  args.ld_dy == 0 ? args.cols : args.ld_dy,
                                                  args.ld_dx == 0 ? args.cols : args.ld_dx,
                                                  args.eps,
                                                  args.ddof};
  const cudaError_t status = normalize::launch_backward(entry.kernel, problem, entry.config, launch_args, cuda_stream);
  if (status != cudaSuccess) detail::cuda_check(status, "cudaLaunchKernel", where);
}

std::string Context::normalize_backward_variant(const NormalizeBackwardArgs& args, Stream stream) {
  normalize::validate(args);
  return impl_->entry_for<detail::NormalizeFamily>(normalize::make_problem(args, impl_->buckets), args.rows, stream)
      .config.label();
}

std::size_t Context::normalize_backward_workspace_size(const NormalizeBackwardArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  return normalize::geometry(problem, entry.config, args.rows).workspace_bytes;
}

void Context::dwconv(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  dwconv_states::validate(args);
  const dwconv::Problem problem = dwconv::make_problem(args, impl_->buckets);
  // States and seq_idx: the fix-up problems around the unchanged tuned kernels (dwconv_states).
  const dwconv_states::Plan plan = dwconv_states::make_plan(args, impl_->buckets);
  using States = detail::DwConvStatesFamily;
  const auto* states_prep = plan.prep ? &impl_->entry_for<States>(*plan.prep, args.n, stream) : nullptr;
  const auto* states_fix = plan.fix ? &impl_->entry_for<States>(*plan.fix, args.n, stream) : nullptr;
  // backward_data / backward_weight with an activation: the gradient prep dy * act'(z) into the front
  // of the workspace first, then the plain backward problem on it in place of dy (two tuned problems).
  const std::optional<dwconv::Problem> prep = dwconv::gradient_prep_problem(args, impl_->buckets);
  const auto* prep_entry = prep ? &impl_->entry_for<detail::DwConvFamily>(*prep, args.n, stream) : nullptr;
  const auto& entry = impl_->entry_for<detail::DwConvFamily>(problem, args.n, stream);
  dwconv::LaunchArgs launch_args = dwconv::launch_args(args);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  const std::size_t prep_bytes = prep ? dwconv::gradient_prep_bytes(args) : 0;
  const std::size_t variant_bytes = dwconv::geometry(problem, entry.config, args.n).workspace_bytes;
  const std::string label = prep ? prep_entry->config.label() + " then " + entry.config.label() : entry.config.label();
  const Error::Context where{"dwconv", problem.key(), label, "", ""};
  // backward_weight partials, and in front of them an activation's gradient prep output (its
  // size rounded to 256 bytes): the caller's workspace or the context's pool.
  const CallWorkspace workspace(*impl_, prep_bytes + variant_bytes, args.workspace, args.workspace_bytes, cuda_stream,
                                where, "dwconv_workspace_size");
  if (variant_bytes > 0) launch_args.workspace = static_cast<char*>(workspace.get()) + prep_bytes;
  cudaError_t status = cudaSuccess;
  if (prep) {
    // The forward convolution of x, weight and bias, reading dy, writing dy * act'(z) to the workspace.
    dwconv::LaunchArgs prep_args{};
    prep_args.src = args.x, prep_args.dst = workspace.get(), prep_args.weight = args.weight, prep_args.bias = args.bias;
    prep_args.aux = args.dy, prep_args.batch = args.n;
    status = dwconv::launch(prep_entry->kernel, *prep, prep_entry->config, prep_args, cuda_stream);
    if (status == cudaSuccess && states_prep != nullptr)
      status = dwconv_states::launch(states_prep->kernel, *plan.prep, states_prep->config,
                                     dwconv_states::launch_args(args, *plan.prep, nullptr, workspace.get()), cuda_stream);
    if (args.direction == DwDirection::backward_data) launch_args.src = workspace.get();
    else launch_args.aux = workspace.get();
  }
  if (status == cudaSuccess) status = dwconv::launch(entry.kernel, problem, entry.config, launch_args, cuda_stream);
  if (status == cudaSuccess && states_fix != nullptr)
    status = dwconv_states::launch(states_fix->kernel, *plan.fix, states_fix->config,
                                   dwconv_states::launch_args(args, *plan.fix, prep ? workspace.get() : args.dy, nullptr),
                                   cuda_stream);
  if (status != cudaSuccess) detail::cuda_check(status, "cudaLaunchKernel", where);
}

std::string Context::dwconv_variant(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  dwconv_states::validate(args);
  const dwconv_states::Plan plan = dwconv_states::make_plan(args, impl_->buckets);
  const auto states = [&](const std::optional<dwconv_states::Problem>& p) {
    return p ? " then states " + impl_->entry_for<detail::DwConvStatesFamily>(*p, args.n, stream).config.label() : "";
  };
  std::string label;
  if (const auto prep = dwconv::gradient_prep_problem(args, impl_->buckets))
    label = impl_->entry_for<detail::DwConvFamily>(*prep, args.n, stream).config.label() + states(plan.prep) + " then ";
  return label +
         impl_->entry_for<detail::DwConvFamily>(dwconv::make_problem(args, impl_->buckets), args.n, stream).config.label() +
         states(plan.fix);
}

std::size_t Context::dwconv_workspace_size(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  dwconv_states::validate(args);  // the fix-ups take no workspace
  const dwconv::Problem problem = dwconv::make_problem(args, impl_->buckets);
  std::size_t prep_bytes = 0;
  if (const auto prep = dwconv::gradient_prep_problem(args, impl_->buckets)) {
    impl_->entry_for<detail::DwConvFamily>(*prep, args.n, stream);  // tunes or loads as a call would
    prep_bytes = dwconv::gradient_prep_bytes(args);
  }
  const auto& entry = impl_->entry_for<detail::DwConvFamily>(problem, args.n, stream);
  return prep_bytes + dwconv::geometry(problem, entry.config, args.n).workspace_bytes;
}

void Context::dwconv_decode(const DwConvDecodeArgs& args, Stream stream) {
  dwconv_decode::validate(args);
  const dwconv_decode::Problem problem = dwconv_decode::make_problem(args, impl_->buckets);
  const auto& entry = impl_->entry_for<detail::DwConvDecodeFamily>(problem, args.batch, stream);
  const cudaError_t status = dwconv_decode::launch(entry.kernel, problem, entry.config, dwconv_decode::launch_args(args),
                                                   reinterpret_cast<cudaStream_t>(stream));
  if (status != cudaSuccess)
    detail::cuda_check(status, "cudaLaunchKernel",
                       Error::Context{"dwconv_decode", problem.key(), entry.config.label(), "", ""});
}

std::string Context::dwconv_decode_variant(const DwConvDecodeArgs& args, Stream stream) {
  dwconv_decode::validate(args);
  return impl_->entry_for<detail::DwConvDecodeFamily>(dwconv_decode::make_problem(args, impl_->buckets), args.batch,
                                                      stream)
      .config.label();
}

Counters Context::counters() const {
  const auto& c = impl_->counters;
  Counters out;
  out.calls = c.calls.load();
  out.table_hits = c.table_hits.load();
  out.cache_hits = c.cache_hits.load();
  out.tunes = c.tunes.load();
  out.heuristic_uses = c.heuristic_uses.load();
  out.compiles = c.compiles.load();
  out.variants_timed = c.variants_timed.load();
  out.variants_rejected = c.variants_rejected.load();
  out.fallback_exact = c.fallback_exact.load();
  out.fallback_bucket = c.fallback_bucket.load();
  out.fallback_nearest = c.fallback_nearest.load();
  out.fallback_heuristic = c.fallback_heuristic.load();
  out.binaries_reused = c.binaries_reused.load();
  out.lease_waits = c.lease_waits.load();
  out.background_swaps = c.background_swaps.load();
  out.records = c.records.load();
  out.cache_rows_rejected = c.cache_rows_rejected.load();
  return out;
}

void Context::wait_background() { impl_->wait_background(); }

const ContextOptions& Context::options() const { return impl_->options; }

std::string Context::cache_path_in_use() const { return impl_->store->path(); }

Context& default_context() {
  // Intentionally never destroyed: kernels must not be unloaded after the CUDA runtime shut down.
  static Context* context = new Context(ContextOptions::from_environment());
  return *context;
}

void tuned_normalize(const NormalizeArgs& args, Stream stream) { default_context().normalize(args, stream); }

void tuned_normalize_backward(const NormalizeBackwardArgs& args, Stream stream) {
  default_context().normalize_backward(args, stream);
}

std::size_t tuned_normalize_workspace_size(const NormalizeArgs& args, Stream stream) {
  return default_context().normalize_workspace_size(args, stream);
}

std::size_t tuned_normalize_backward_workspace_size(const NormalizeBackwardArgs& args, Stream stream) {
  return default_context().normalize_backward_workspace_size(args, stream);
}

void tuned_dwconv(const DwConvArgs& args, Stream stream) { default_context().dwconv(args, stream); }

void tuned_dwconv_decode(const DwConvDecodeArgs& args, Stream stream) { default_context().dwconv_decode(args, stream); }

std::size_t tuned_dwconv_workspace_size(const DwConvArgs& args, Stream stream) {
  return default_context().dwconv_workspace_size(args, stream);
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "unknown";
}

const char* to_string(NormMode mode) {
  switch (mode) {
    case NormMode::standardize: return "standardize";
    case NormMode::layernorm: return "layernorm";
    case NormMode::rmsnorm: return "rmsnorm";
  }
  return "unknown";
}

const char* to_string(Policy policy) {
  switch (policy) {
    case Policy::tune: return "tune";
    case Policy::heuristic: return "heuristic";
    case Policy::cached: return "cached";
    case Policy::background: return "background";
    case Policy::record: return "record";
  }
  return "unknown";
}

const char* to_string(DwLayout layout) {
  switch (layout) {
    case DwLayout::ncl: return "ncl";
    case DwLayout::nlc: return "nlc";
    case DwLayout::nchw: return "nchw";
    case DwLayout::nhwc: return "nhwc";
  }
  return "unknown";
}

const char* to_string(DwDirection direction) {
  switch (direction) {
    case DwDirection::forward: return "forward";
    case DwDirection::backward_data: return "backward_data";
    case DwDirection::backward_weight: return "backward_weight";
  }
  return "unknown";
}

const char* to_string(Activation activation) {
  switch (activation) {
    case Activation::none: return "none";
    case Activation::silu: return "silu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::gelu_erf: return "gelu_erf";
    case Activation::relu: return "relu";
  }
  return "unknown";
}

Policy parse_policy(const std::string& text) {
  for (Policy p : {Policy::tune, Policy::heuristic, Policy::cached, Policy::background, Policy::record})
    if (text == to_string(p)) return p;
  throw Error(Error::Context{"context", "", "", "", "policy"},
              fmt::format("unknown policy '{}': expected tune, heuristic, cached, background or record", text));
}

const char* version() { return KVTUNE_VERSION; }

}  // namespace kvtune
