// Context: the path of one call. Validate -> key -> lock-free table -> launch; on a miss, under the
// device's miss mutex: SQLite winner -> load its cubin; else the policy (tune / heuristic).

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "kvtune/kvtune.h"
#include "lib/src/cuda_check.h"
#include "lib/src/device.h"
#include "lib/src/dispatch_table.h"
#include "lib/src/families.h"
#include "lib/src/hash.h"
#include "lib/src/module.h"
#include "tuner/tuner.h"

namespace kvtune {
namespace {

constexpr int kMaxDevices = 64;

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

template <class F>
struct Entry {
  detail::LoadedKernel kernel;
  typename F::Config config;
  std::string origin;  // "tuned", "cached", "heuristic"
};

template <class F>
using Table = detail::DispatchTable<typename F::Problem, Entry<F>, typename F::ProblemHash>;

template <class Tuple> struct TablesOf;
template <class... F> struct TablesOf<std::tuple<F...>> {
  using type = std::tuple<Table<F>...>;
};

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
  return o;
}

struct Context::Impl {
  struct Device {
    std::once_flag init;
    detail::DeviceFingerprint fingerprint;
    std::string device_id;
    TablesOf<detail::Families>::type tables;  // one lock-free dispatch table per family
    std::mutex miss_mutex;  // one miss at a time per device: tuning owns the GPU while it runs
  };

  ContextOptions options;
  std::unique_ptr<cache::Store> store;
  // Per-device state, created once and never freed before the context: readers load the pointer
  // without a lock (the hot path), creation happens under devices_mutex.
  std::array<std::atomic<Device*>, kMaxDevices> devices{};
  std::vector<std::unique_ptr<Device>> device_storage;
  std::mutex devices_mutex;
  int log_rank = 0;

  struct AtomicCounters {
    std::atomic<std::uint64_t> calls{0}, table_hits{0}, cache_hits{0}, tunes{0}, heuristic_uses{0}, compiles{0},
        variants_timed{0}, variants_rejected{0};
  } counters;

  explicit Impl(ContextOptions o) : options(std::move(o)) {
    log_rank = level_rank(options.log_level);
    store = cache::Store::open(options.cache_path, [this](const char* level, const std::string& message) {
      log(level, "cache: " + message);
    });
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
      } catch (const Error& e) {
        log("warn", std::string("could not record the device in the cache: ") + e.what());
      }
    });
    return *d;
  }

  // Dispatch-path helpers below run only on a miss.
  template <class F>
  const Entry<F>& resolve(Device& dev, const typename F::Problem& problem, Stream stream) {
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

    // 1. A stored winner (a tuned one, or a heuristic one when the policy does not ask for tuning).
    if (auto stored = lookup_stored<F>(dev, problem, key, template_hash)) {
      ++counters.cache_hits;
      log("info", fmt::format("{} {}: cached {} ({})", F::kOp, key, stored->config.label(), stored->origin));
      table.insert(problem, stored);
      return *table.find(problem);
    }
    std::shared_ptr<const Entry<F>> entry;
    if (options.policy == Policy::tune) {
      try {
        entry = tune<F>(dev, problem, key, template_hash);
      } catch (const Error& e) {
        log("warn", fmt::format("{} {}: tuning failed, using the heuristic variant: {}", F::kOp, key, e.what()));
      }
    }
    if (!entry) entry = heuristic<F>(dev, problem, key, template_hash);
    table.insert(problem, entry);
    return *table.find(problem);
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

  template <class F>
  std::shared_ptr<Entry<F>> lookup_stored(Device& dev, const typename F::Problem& problem, const std::string& key,
                                          const std::string& template_hash) {
    try {
      auto winner = store->find_winner(key, dev.device_id, template_hash);
      if (!winner) return nullptr;
      if (winner->origin == "heuristic" && options.policy == Policy::tune) return nullptr;
      const auto config = F::Config::from_json(nlohmann::json::parse(winner->config_json));
      if (!F::is_valid(problem, config)) return nullptr;
      std::optional<cache::Binary> binary;
      if (!winner->binary_hash.empty()) binary = store->find_binary(winner->binary_hash);
      if (!binary && winner->origin == "imported") {
        // `kvtune-cache import` brings configs, never binaries: compile once (unless
        // `kvtune-tune --compile-only` stored this binary already) and keep it for later processes.
        const auto request = F::compile_request(problem, config, dev.fingerprint.arch());
        const std::string hash = detail::compile_hash(request);
        binary = store->find_binary(hash);
        if (!binary) {
          auto compiled = detail::nvrtc_compile(request);
          ++counters.compiles;
          binary = cache::Binary{hash, dev.fingerprint.arch(), compiled.lowered_names.at(0), compiled.cubin,
                                 detail::hash_hex(compiled.cubin)};
        }
        winner->binary_hash = binary->hash;
        store_result(*winner, binary, {});
      }
      if (!binary) return nullptr;
      return make_entry<F>(problem, config, binary->image, binary->lowered_name, "cached");
    } catch (const std::exception& e) {
      log("warn", fmt::format("{} {}: ignoring the cached entry: {}", F::kOp, key, e.what()));
      return nullptr;
    }
  }

  void store_result(const cache::Winner& winner, const std::optional<cache::Binary>& binary,
                    const std::vector<cache::Trial>& trials) {
    try {
      store->put_result(winner, binary, trials);
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
    const auto request = F::compile_request(problem, config, dev.fingerprint.arch());
    auto compiled = detail::nvrtc_compile(request);
    ++counters.compiles;
    ++counters.heuristic_uses;
    auto entry = make_entry<F>(problem, config, compiled.cubin, compiled.lowered_names.at(0), "heuristic");
    cache::Binary binary{detail::compile_hash(request), dev.fingerprint.arch(), compiled.lowered_names.at(0),
                         compiled.cubin, detail::hash_hex(compiled.cubin)};
    store_result(make_winner<F>(dev, key, template_hash, config, binary.hash, "heuristic"), binary, {});
    log("info", fmt::format("{} {}: heuristic {}", F::kOp, key, config.label()));
    return entry;
  }

  template <class F>
  std::shared_ptr<Entry<F>> tune(Device& dev, const typename F::Problem& problem, const std::string& key,
                                 const std::string& template_hash) {
    const std::string arch = dev.fingerprint.arch();
    const auto configs = F::enumerate(problem);
    if (configs.empty()) throw Error(Error::Context{F::kOp, key, "", "", ""}, "no valid variant");
    const auto candidates = F::candidates(problem, configs, arch);
    cudaStream_t stream = nullptr;
    detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    std::unique_ptr<CUstream_st, void (*)(cudaStream_t)> stream_guard(stream, [](cudaStream_t s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    });
    auto harness = F::harness(problem, configs, arch, dev.fingerprint.l2_bytes, stream);
    tuner::Options topt;
    topt.samples = options.timing_samples;
    topt.compile_threads = options.compile_threads;
    topt.max_dynamic_smem = dev.fingerprint.max_smem_per_block_optin;
    if (log_rank >= 3) topt.debug = [this](const std::string& line) { log("debug", line); };
    log("info", fmt::format("{} {}: tuning {} variants on {}", F::kOp, key, candidates.size(), dev.fingerprint.name));
    tuner::Outcome outcome = tuner::tune(candidates, *harness, topt, stream);
    ++counters.tunes;
    counters.compiles += static_cast<std::uint64_t>(outcome.compiles);
    for (const auto& t : outcome.trials) {
      if (t.status == "ok") ++counters.variants_timed;
      else ++counters.variants_rejected;
    }
    if (outcome.winner < 0)
      throw Error(Error::Context{F::kOp, key, "", dev.fingerprint.name, ""},
                  fmt::format("all {} variants failed; first failure: {}", candidates.size(),
                              outcome.trials.empty() ? "" : outcome.trials.front().message));
    const auto w = static_cast<std::size_t>(outcome.winner);
    const auto& compiled = outcome.compiled[w];
    auto entry = make_entry<F>(problem, configs[w], compiled.cubin, compiled.lowered_name, "tuned");
    cache::Winner winner = make_winner<F>(dev, key, template_hash, configs[w], compiled.binary_hash, "tuned");
    winner.median_ms = outcome.trials[w].median_ms;
    winner.gbps = outcome.trials[w].gbps;
    store_result(winner,
                 cache::Binary{compiled.binary_hash, arch, compiled.lowered_name, compiled.cubin,
                               detail::hash_hex(compiled.cubin)},
                 outcome.trials);
    log("info", fmt::format("{} {}: winner {} {:.4f} ms {:.0f} GB/s (compile {:.2f} s, benchmark {:.2f} s)", F::kOp,
                            key, winner.label, winner.median_ms, winner.gbps, outcome.compile_seconds,
                            outcome.bench_seconds));
    return entry;
  }

  // The hot path: key -> lock-free table -> entry. Misses go to resolve().
  template <class F>
  const Entry<F>& entry_for(const typename F::Problem& problem, Stream stream) {
    int ordinal = 0;
    const cudaError_t status = cudaGetDevice(&ordinal);
    if (status != cudaSuccess) detail::device_count();  // throws the clear "no CUDA device" error
    Device& dev = device(ordinal);
    ++counters.calls;
    if (const Entry<F>* entry = std::get<Table<F>>(dev.tables).find(problem)) {
      ++counters.table_hits;
      return *entry;
    }
    return resolve<F>(dev, problem, stream);
  }
};

Context::Context(ContextOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Context::~Context() = default;

void Context::normalize(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, stream);
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
                                          args.ddof};
  const cudaError_t status =
      normalize::launch(entry.kernel, problem, entry.config, launch_args, reinterpret_cast<cudaStream_t>(stream));
  if (status != cudaSuccess)
    detail::cuda_check(status, "cudaLaunchKernel", Error::Context{"normalize", problem.key(), entry.config.label(), "", ""});
}

std::string Context::normalize_variant(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  return impl_->entry_for<detail::NormalizeFamily>(normalize::make_problem(args), stream).config.label();
}

void Context::dwconv(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  const dwconv::Problem problem = dwconv::make_problem(args);
  const auto& entry = impl_->entry_for<detail::DwConvFamily>(problem, stream);
  dwconv::LaunchArgs launch_args = dwconv::launch_args(args);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  const std::size_t workspace_bytes = dwconv::geometry(problem, entry.config, args.n).workspace_bytes;
  auto fail = [&](cudaError_t status, const char* what) {
    detail::cuda_check(status, what, Error::Context{"dwconv", problem.key(), entry.config.label(), "", ""});
  };
  // backward_weight partials come from the stream-ordered pool: no synchronization, capture-safe.
  if (workspace_bytes > 0) {
    if (cudaError_t s = cudaMallocAsync(&launch_args.workspace, workspace_bytes, cuda_stream); s != cudaSuccess)
      fail(s, "cudaMallocAsync (backward_weight workspace)");
  }
  const cudaError_t status = dwconv::launch(entry.kernel, problem, entry.config, launch_args, cuda_stream);
  if (workspace_bytes > 0) cudaFreeAsync(launch_args.workspace, cuda_stream);
  if (status != cudaSuccess) fail(status, "cudaLaunchKernel");
}

std::string Context::dwconv_variant(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  return impl_->entry_for<detail::DwConvFamily>(dwconv::make_problem(args), stream).config.label();
}

Counters Context::counters() const {
  const auto& c = impl_->counters;
  return Counters{c.calls.load(),     c.table_hits.load(), c.cache_hits.load(),     c.tunes.load(),
                  c.heuristic_uses.load(), c.compiles.load(), c.variants_timed.load(), c.variants_rejected.load()};
}

const ContextOptions& Context::options() const { return impl_->options; }

std::string Context::cache_path_in_use() const { return impl_->store->path(); }

Context& default_context() {
  // Intentionally never destroyed: kernels must not be unloaded after the CUDA runtime shut down.
  static Context* context = new Context(ContextOptions::from_environment());
  return *context;
}

void tuned_normalize(const NormalizeArgs& args, Stream stream) { default_context().normalize(args, stream); }

void tuned_dwconv(const DwConvArgs& args, Stream stream) { default_context().dwconv(args, stream); }

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

Policy parse_policy(const std::string& text) {
  for (Policy p : {Policy::tune, Policy::heuristic, Policy::cached})
    if (text == to_string(p)) return p;
  throw Error(Error::Context{"context", "", "", "", "policy"},
              fmt::format("unknown policy '{}': expected tune, heuristic or cached", text));
}

const char* version() { return KVTUNE_VERSION; }

}  // namespace kvtune
