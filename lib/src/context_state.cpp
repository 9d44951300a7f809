// ContextOptions from the environment, their validation, and what the parts of a Context share
// (context_state.h).

#include "lib/src/context_state.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "core/compile_workers.h"

namespace kvtune {
namespace {

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

// A non-negative integer (or number) environment setting; throws naming the variable.
double env_number(const char* name, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= 0) || v > 1e12)
    throw Error(Error::Context{"context", "", "", "", name},
                fmt::format("{} must be a non-negative number, got '{}'", name, text));
  return v;
}

// Every setting in range, before anything is opened; kvtune::Error naming the field otherwise.
ContextOptions validated(ContextOptions o) {
  const auto refuse = [](const char* field, const std::string& why) {
    throw Error(Error::Context{"context", "", "", "", field}, fmt::format("{} {}", field, why));
  };
  if (static_cast<int>(o.policy) > static_cast<int>(Policy::record))
    refuse("policy", fmt::format("is not a Policy (value {})", static_cast<int>(o.policy)));
  if (!o.log_level.empty() && detail::log_level_rank(o.log_level) == 0)
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
  if (!o.compile_worker.empty() && o.compile_worker != "off" && access(o.compile_worker.c_str(), X_OK) != 0)
    refuse("compile_worker", fmt::format("must be \"\" (the worker beside the library), \"off\" or an executable, got '{}'",
                                         o.compile_worker));
  if (!o.test_fault.empty() && detail::fault_define(o.test_fault) == 0)
    refuse("test_fault", fmt::format("must be wrong, oob or hang, got '{}'", o.test_fault));
  return o;
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
    if (!o.log_level.empty() && detail::log_level_rank(o.log_level) == 0)
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
  if (const char* v = std::getenv("KVTUNE_COMPILE_WORKER"); v != nullptr) o.compile_worker = v;
  if (const char* v = std::getenv("KVTUNE_BUCKETS"); v != nullptr && *v != '\0') {
    detail::Buckets::parse(v, "KVTUNE_BUCKETS");  // refuse a bad spec here, naming the variable
    o.buckets = v;
  }
  return o;
}

namespace detail {

int log_level_rank(const std::string& level) {
  if (level == "warn") return 1;
  if (level == "info") return 2;
  if (level == "debug") return 3;
  return 0;
}

int fault_define(const std::string& fault) {
  return fault == "wrong" ? 1 : fault == "oob" ? 2 : fault == "hang" ? 3 : 0;
}

Counters AtomicCounters::snapshot() const {
  Counters out;
  out.calls = calls.load();
  out.table_hits = table_hits.load();
  out.cache_hits = cache_hits.load();
  out.tunes = tunes.load();
  out.heuristic_uses = heuristic_uses.load();
  out.compiles = compiles.load();
  out.variants_timed = variants_timed.load();
  out.variants_rejected = variants_rejected.load();
  out.fallback_exact = fallback_exact.load();
  out.fallback_bucket = fallback_bucket.load();
  out.fallback_nearest = fallback_nearest.load();
  out.fallback_heuristic = fallback_heuristic.load();
  out.binaries_reused = binaries_reused.load();
  out.lease_waits = lease_waits.load();
  out.background_swaps = background_swaps.load();
  out.records = records.load();
  out.cache_rows_rejected = cache_rows_rejected.load();
  return out;
}

ContextState::ContextState(ContextOptions o)
    : options(validated(std::move(o))),
      buckets(Buckets::parse(options.buckets, "buckets")),
      compile_worker(options.compile_worker == "off" ? std::string()
                     : options.compile_worker.empty() ? find_compile_worker()
                                                      : options.compile_worker),
      log_rank(log_level_rank(options.log_level)) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  owner = fmt::format("{}:{}:{}", host, static_cast<long>(getpid()), static_cast<const void*>(this));
  store = cache::Store::open(options.cache_path, [this](const char* level, const std::string& message) {
    log(level, "cache: " + message);
  });
}

void ContextState::log(const char* level, const std::string& message) const {
  if (log_level_rank(level) > log_rank || log_rank == 0) return;
  if (options.log) options.log(level, message);
  else std::fprintf(stderr, "[kvtune %s] %s\n", level, message.c_str());
}

void ContextState::reject_row(const char* op, const std::string& key, const std::string& why) {
  ++counters.cache_rows_rejected;
  log("warn", fmt::format("{} {}: not using a cache row: {}", op, key, why));
}

void ContextState::store_result(const cache::Winner& winner, const std::vector<cache::Binary>& binaries,
                                const std::vector<cache::Trial>& trials, const std::optional<cache::TuningRun>& run) {
  try {
    store->put_result(winner, binaries, trials, run);
  } catch (const std::exception& e) {
    log("warn", fmt::format("could not store the result for {}: {}", winner.problem_key, e.what()));
  }
}

}  // namespace detail
}  // namespace kvtune
