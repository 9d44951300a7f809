// kvtune-tune: offline tuning of many problems. Problems come from shapes files (docs/TOOLS.md),
// built-in suites and the problems the record policy logged in the cache (--recorded); --dry-run
// sizes their tuning spaces, --compile-only fills the cache with
// every variant's cubin for an architecture without a GPU, and the default mode tunes on the GPUs
// through the library, so that what it stores is exactly what a program would.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <tuple>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cache/store.h"
#include "core/compile_workers.h"
#include "core/device.h"
#include "core/hash.h"
#include "core/nvrtc.h"
#include "tools/cache_view.h"
#include "tools/common.h"
#include "tools/ops.h"
#include "tools/tune_runner.h"

namespace kvtune::tools {
namespace {

constexpr const char* kTool = "kvtune-tune";

struct Settings {
  std::vector<std::string> shapes;
  std::vector<std::string> suites;
  bool recorded = false;
  bool dry_run = false;
  bool variants = false;
  bool compile_only = false;
  std::string arch;
  std::string devices = "all";
  std::string shard;
  bool force = false;
  bool isolate = false;
  double timeout = 1800;
  int samples = 0;
  int budget_variants = -1;  // -1: not given (the library's default)
  double budget_ms = -1;     // -1: not given
  bool exhaustive = false;
  int jobs = 0;
  std::string cache;
  bool json = false;
  // The hidden child side of --isolate.
  bool child = false;
  int child_device = 0;
  std::string child_problem;
  std::string child_key;
  std::string child_result;
  std::string child_progress;
};

// One problem of the run; `recorded` when it comes from the record policy's log.
struct Task {
  const OpProblem* problem = nullptr;
  std::optional<cache::RecordedProblem> recorded;
};

// A recorded problem this build does not tune, and why.
struct SkippedRecord {
  cache::RecordedProblem row;
  std::string reason;
};

struct Problems {
  std::vector<std::unique_ptr<OpProblem>> owned;
  std::vector<Task> selected;  // deduplicated and sharded
  int duplicates = 0;
  int before_shard = 0;
  std::vector<SkippedRecord> skipped_records;
  std::map<std::string, cache::DeviceRow> devices;  // the cache's device rows, for recorded problems
};

std::string cache_path_or_default(const Settings& s) {
  if (!s.cache.empty()) return s.cache;
  try {
    return ContextOptions::from_environment().cache_path;
  } catch (const Error& e) {
    throw InputError(e.what());
  }
}

// The recorded problems of the cache: each becomes a task tied to the device it was recorded on,
// or a skipped record saying why this build cannot tune it.
void collect_recorded(const Settings& s, Problems& p, std::vector<Task>& tasks) {
  const std::string path = cache_path_or_default(s);
  if (path.empty()) throw InputError("--recorded reads a cache file (--cache PATH or KVTUNE_CACHE), not an in-memory one");
  auto store = cache::Store::open_existing(path, false);
  for (auto& d : store->devices()) p.devices[d.id] = d;
  for (auto& row : store->recorded_problems()) {
    std::string why;
    auto problem = problem_from_stored_key(row.op, row.problem_key, row.template_hash, why);
    if (!problem) {
      p.skipped_records.push_back(SkippedRecord{std::move(row), std::move(why)});
      continue;
    }
    p.owned.push_back(std::move(problem));
    tasks.push_back(Task{p.owned.back().get(), std::move(row)});
  }
}

Problems collect(const Settings& s) {
  Problems p;
  std::vector<Task> tasks;
  for (const auto& path : s.shapes)
    for (auto& problem : load_shapes(path)) p.owned.push_back(std::move(problem));
  for (const auto& suite : s.suites)
    for (auto& problem : load_suite(suite)) p.owned.push_back(std::move(problem));
  for (const auto& problem : p.owned) tasks.push_back(Task{problem.get(), std::nullopt});
  if (s.recorded) collect_recorded(s, p, tasks);
  // One task per cache key: rows that share a bucket tune the same entry. A recorded problem is
  // one key on one device; a shapes or suite problem of the same key covers it.
  std::set<std::string> keys;
  std::vector<Task> unique;
  for (auto& task : tasks) {
    const std::string key = task.problem->key();
    const bool covered = task.recorded && keys.count(key) != 0;
    if (!covered && keys.insert(task.recorded ? key + "|" + task.recorded->device_id : key).second)
      unique.push_back(std::move(task));
    else
      ++p.duplicates;
  }
  p.before_shard = static_cast<int>(unique.size());
  int index = 0, count = 1;
  if (!s.shard.empty()) {
    std::smatch m;
    if (!std::regex_match(s.shard, m, std::regex(R"((\d{1,6})/(\d{1,6}))")))
      throw InputError(fmt::format("--shard must be i/n with 0 <= i < n, got '{}'", s.shard));
    index = std::stoi(m[1]);
    count = std::stoi(m[2]);
    if (count < 1 || index >= count)
      throw InputError(fmt::format("--shard must be i/n with 0 <= i < n, got '{}'", s.shard));
  }
  // Round-robin slices: deterministic for a given problem list, and balanced when neighbours in
  // the list have similar cost.
  for (std::size_t i = 0; i < unique.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(count)) == index) p.selected.push_back(std::move(unique[i]));
  return p;
}

void print_json(const nlohmann::json& j) { std::printf("%s\n", json_text(j, 2).c_str()); }

// The search budget of this run: the flags, else the library's defaults (its environment
// variables KVTUNE_BUDGET_VARIANTS and KVTUNE_BUDGET_MS included, as for any program).
struct Budget {
  int variants = 40;  // 0: exhaustive
  double ms = 0;      // 0: no limit
};

Budget resolve_budget(const Settings& s) {
  ContextOptions library;
  try {
    library = ContextOptions::from_environment();
  } catch (const Error& e) {
    throw InputError(e.what());
  }
  Budget b{library.budget_variants, library.budget_ms};
  if (s.exhaustive) b.variants = 0;
  if (s.budget_variants >= 0) b.variants = s.budget_variants;
  if (s.budget_ms >= 0) b.ms = s.budget_ms;
  return b;
}

std::string device_text(const std::string& device_id, const std::map<std::string, cache::DeviceRow>& devices) {
  const auto it = devices.find(device_id);
  return it != devices.end() ? device_label(it->second) : fmt::format("unknown ({})", device_id.substr(0, 6));
}

nlohmann::json recorded_json(const cache::RecordedProblem& row, const std::map<std::string, cache::DeviceRow>& devices) {
  const auto it = devices.find(row.device_id);
  return {{"device_id", row.device_id},
          {"device_name", it != devices.end() ? it->second.name : ""},
          {"template_hash", row.template_hash},
          {"count", row.count},
          {"first_seen", row.first_seen},
          {"last_seen", row.last_seen}};
}

nlohmann::json skipped_records_json(const Problems& p) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& skipped : p.skipped_records) {
    nlohmann::json j = recorded_json(skipped.row, p.devices);
    j["op"] = skipped.row.op;
    j["key"] = skipped.row.problem_key;
    j["reason"] = skipped.reason;
    list.push_back(std::move(j));
  }
  return list;
}

void print_skipped_records(const Problems& p) {
  for (const auto& skipped : p.skipped_records)
    std::printf("skipped recorded %s on %s (count %lld): %s\n", skipped.row.problem_key.c_str(),
                device_text(skipped.row.device_id, p.devices).c_str(), static_cast<long long>(skipped.row.count),
                skipped.reason.c_str());
}

// --- --dry-run ------------------------------------------------------------------------------------

int dry_run(const Settings& s, const Problems& p, const Budget& budget) {
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::string> header = {"#", "OP", "PROBLEM", "KEY", "SPACE", "RUNNABLE", "TUNED"};
  if (s.recorded) header.insert(header.end(), {"DEVICE", "COUNT", "LAST SEEN"});
  Table table(header);
  std::int64_t total = 0, to_try = 0;
  for (std::size_t i = 0; i < p.selected.size(); ++i) {
    const OpProblem& problem = *p.selected[i].problem;
    const auto& recorded = p.selected[i].recorded;
    const SpaceSize size = problem.space();
    total += size.tuned;
    to_try += budget.variants > 0 ? std::min<std::int64_t>(size.tuned, budget.variants) : size.tuned;
    std::vector<std::string> row = {std::to_string(i + 1),       problem.op(),
                                    problem.describe(),          problem.key(),
                                    std::to_string(size.total),  std::to_string(size.runnable),
                                    std::to_string(size.tuned)};
    if (s.recorded) {
      if (recorded)
        row.insert(row.end(), {device_text(recorded->device_id, p.devices), std::to_string(recorded->count),
                               format_time(recorded->last_seen)});
      else
        row.insert(row.end(), {"every GPU", "-", "-"});
    }
    table.add(std::move(row));
    nlohmann::json item = {{"op", problem.op()},
                           {"describe", problem.describe()},
                           {"key", problem.key()},
                           {"template_hash", require_handler(problem.op(), "").template_hash()},
                           {"problem", problem.to_json()},
                           {"space", {{"total", size.total}, {"runnable", size.runnable}, {"tuned", size.tuned}}},
                           {"recorded", recorded ? recorded_json(*recorded, p.devices) : nlohmann::json()}};
    if (s.variants) {
      nlohmann::json variants = nlohmann::json::array();
      for (const auto& v : problem.variants(s.arch.empty() ? "sm_90" : s.arch)) variants.push_back({{"label", v.label}, {"config", v.config}});
      item["variants"] = std::move(variants);
    }
    list.push_back(std::move(item));
  }
  if (s.json) {
    print_json({{"problems", list},
                {"variants", total},
                {"variants_to_try", to_try},
                {"budget_variants", budget.variants},
                {"budget_ms", budget.ms},
                {"duplicates", p.duplicates},
                {"recorded_skipped", skipped_records_json(p)},
                {"shard", s.shard.empty() ? "0/1" : s.shard}});
    return kExitOk;
  }
  std::fputs(table.render().c_str(), stdout);
  print_skipped_records(p);
  std::printf("%zu problems%s, %lld variants to tune (SPACE: every axis combined; RUNNABLE: after the hard "
              "constraints; TUNED: after pruning)\n",
              p.selected.size(),
              p.duplicates > 0 ? fmt::format(" ({} duplicate keys dropped)", p.duplicates).c_str() : "",
              static_cast<long long>(total));
  if (budget.variants > 0)
    std::printf("search budget: at most %d variants per problem, %lld in all%s\n", budget.variants,
                static_cast<long long>(to_try),
                budget.ms > 0 ? fmt::format(", {:g} ms per problem", budget.ms).c_str() : "");
  else
    std::printf("search: exhaustive%s\n", budget.ms > 0 ? fmt::format(", {:g} ms per problem", budget.ms).c_str() : "");
  return kExitOk;
}

// --- --compile-only -------------------------------------------------------------------------------

struct Job {
  std::string hash;
  std::string key;  // the first problem that needs it
  Variant variant;
};

struct Failure {
  std::string key;
  std::string label;
  std::string message;
};

// The NVRTC log's first line that says "error", else the cause.
std::string first_error_line(const CompileError& e) {
  std::size_t start = 0;
  const std::string& log = e.log();
  while (start < log.size()) {
    const auto end = log.find('\n', start);
    const std::string line = log.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.find("error") != std::string::npos) return line;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return e.cause();
}

int compile_only(const Settings& s, const Problems& p) {
  if (s.arch.empty()) throw InputError("--compile-only needs --arch (e.g. --arch sm_90)");
  if (s.arch.rfind("sm_", 0) != 0)
    throw InputError(fmt::format("--arch {}: --compile-only stores cubins, which the library loads by sm_XX "
                                 "architecture; give e.g. sm_90",
                                 s.arch));
  try {
    detail::parse_arch(s.arch);
  } catch (const Error& e) {
    throw InputError(fmt::format("--arch {}: {}", s.arch, e.cause()));
  }
  auto store = cache::Store::open_existing(cache_path_or_default(s), true);
  std::set<std::string> cached;
  for (const auto& b : store->binary_infos()) cached.insert(b.hash);

  // Distinct variants over every problem: problems that differ only in rows share kernels.
  std::vector<Job> jobs;
  std::set<std::string> seen;
  int already = 0;
  nlohmann::json per_problem = nlohmann::json::array();
  for (const Task& task : p.selected) {
    const OpProblem* problem = task.problem;
    int mine = 0, shared = 0, in_cache = 0;
    for (auto& v : problem->variants(s.arch)) {
      const std::string hash = detail::compile_hash(v.request);
      if (!seen.insert(hash).second) {
        ++shared;
        continue;
      }
      if (cached.count(hash) != 0) {
        ++already;
        ++in_cache;
        continue;
      }
      ++mine;
      jobs.push_back(Job{hash, problem->key(), std::move(v)});
    }
    per_problem.push_back({{"key", problem->key()},
                           {"describe", problem->describe()},
                           {"to_compile", mine},
                           {"in_cache", in_cache},
                           {"shared", shared}});
    if (!s.json)
      std::printf("%s: %d variants to compile, %d already in the cache, %d shared with an earlier problem\n",
                  problem->describe().c_str(), mine, in_cache, shared);
  }
  std::fflush(stdout);

  // Compile on every core, in compile worker processes when there are (core/compile_workers.h); each
  // cubin goes into the cache as soon as it exists.
  const std::string compile_worker = detail::find_compile_worker();
  const int threads = std::max(1, std::min<int>(s.jobs > 0 ? s.jobs : static_cast<int>(std::thread::hardware_concurrency()),
                                                static_cast<int>(jobs.size())));
  std::atomic<std::size_t> next{0};
  std::atomic<int> finished{0};
  std::mutex mutex;
  std::vector<Failure> failures;
  std::string store_error;
  const bool bar = stdout_is_terminal() && !s.json;
  const auto worker = [&] {
    for (std::size_t i = next++; i < jobs.size(); i = next++) {
      const Job& job = jobs[i];
      try {
        const auto compiled = detail::compile_in_worker(compile_worker, job.variant.request);
        store->put_binary(cache::Binary{job.hash, s.arch, compiled.lowered_names.at(0), compiled.cubin,
                                        detail::hash_hex(compiled.cubin)});
      } catch (const CompileError& e) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(Failure{job.key, job.variant.label, first_error_line(e)});
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (std::string(e.what()).rfind("kvtune cache", 0) == 0) store_error = e.what();
        failures.push_back(Failure{job.key, job.variant.label, std::string(e.what()).substr(0, 300)});
      }
      const int done = ++finished;
      if (bar) {
        std::lock_guard<std::mutex> lock(mutex);
        std::printf("\r\033[Kcompiling for %s: %d/%zu", s.arch.c_str(), done, jobs.size());
        std::fflush(stdout);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  if (!jobs.empty()) worker();
  for (auto& t : pool) t.join();
  if (bar) std::printf("\r\033[K");
  if (!store_error.empty()) throw Error(store_error);

  std::sort(failures.begin(), failures.end(),
            [](const Failure& a, const Failure& b) { return std::tie(a.key, a.label) < std::tie(b.key, b.label); });
  const std::size_t variants = jobs.size() + static_cast<std::size_t>(already);
  if (s.json) {
    nlohmann::json failed = nlohmann::json::array();
    for (const auto& f : failures) failed.push_back({{"key", f.key}, {"variant", f.label}, {"message", f.message}});
    print_json({{"arch", s.arch},
                {"variants", variants},
                {"compiled", jobs.size() - failures.size()},
                {"already_cached", already},
                {"failed", failures.size()},
                {"failures", failed},
                {"problems", per_problem}});
  } else {
    for (const auto& f : failures)
      std::printf("failed: %s variant %s: %s\n", f.key.c_str(), f.label.c_str(), f.message.c_str());
    std::printf("compiled %zu variants, %zu failed\n", variants, failures.size());
  }
  return failures.empty() ? kExitOk : kExitFailure;
}

// --- tuning -----------------------------------------------------------------------------------------

std::vector<int> parse_devices(const std::string& text, int count) {
  std::vector<int> out;
  if (text == "all") {
    for (int d = 0; d < count; ++d) out.push_back(d);
    return out;
  }
  std::set<int> seen;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part.empty() || part.size() > 4 || part.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(fmt::format("--devices must be 'all' or a comma-separated list of GPU ordinals, got '{}'", text));
    const int d = std::stoi(part);
    if (d >= count)
      throw InputError(fmt::format("--devices: there is no GPU {} (this machine has {})", d, count));
    if (seen.insert(d).second) out.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string self_path() {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) throw Error("cannot find this executable (/proc/self/exe) to run --isolate children");
  return std::string(buffer, static_cast<std::size_t>(n));
}

nlohmann::json run_json(const std::optional<RunSummary>& run) {
  if (!run) return nullptr;
  return {{"started_at", run->started_at},
          {"wall_seconds", run->wall_seconds},
          {"variants_total", run->variants_total},
          {"variants_timed", run->variants_timed},
          {"compiles", run->compiles},
          {"binaries_reused", run->binaries_reused},
          {"search", run->search},
          {"sm_clock_mhz", run->sm_clock_mhz},
          {"incumbent", run->incumbent_label},
          {"replaced_incumbent", run->replaced_incumbent}};
}

int tune(const Settings& s, const Problems& p, const Budget& budget) {
  if (!s.arch.empty()) throw InputError("--arch applies to --compile-only only (tuning uses each GPU's own)");
  const std::string cache = cache_path_or_default(s);
  if (cache.empty()) throw InputError("tuning needs a cache file (--cache PATH or KVTUNE_CACHE), not an in-memory one");
  if (p.selected.empty()) {
    // Nothing recorded (or an empty shard): no GPU is needed to do nothing.
    if (s.json) {
      print_json({{"devices", nlohmann::json::array()},
                  {"results", nlohmann::json::array()},
                  {"recorded_skipped", skipped_records_json(p)},
                  {"tuned", 0},
                  {"skipped", 0},
                  {"failed", 0},
                  {"seconds", 0}});
    } else {
      print_skipped_records(p);
      std::printf("nothing to tune\n");
    }
    return kExitOk;
  }
  const int count = detail::device_count();  // the clear "no CUDA device" error, exit status 1
  TuneOptions options;
  options.cache_path = cache;
  options.devices = parse_devices(s.devices, count);
  options.force = s.force;
  options.isolate = s.isolate;
  options.timeout_seconds = s.timeout;
  options.samples = s.samples;
  options.budget_variants = budget.variants;
  options.budget_ms = budget.ms;
  options.progress_bar = stdout_is_terminal() && !s.json;
  options.quiet = s.json;
  if (s.isolate) options.self_path = self_path();
  // Refuse a file that is not a kvtune cache before any GPU work (the library would set it aside).
  cache::Store::open_existing(cache, true);

  std::vector<TuneTask> tasks;
  for (const Task& task : p.selected) tasks.push_back(TuneTask{task.problem, task.recorded ? task.recorded->device_id : ""});
  const auto start = std::chrono::steady_clock::now();
  const TuneRun run = run_tuning(tasks, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int tuned = 0, skipped = 0, failed = 0;
  for (const auto& r : run.results) {
    if (r.status == "tuned") ++tuned;
    else if (r.status == "skipped") ++skipped;
    else ++failed;
  }
  if (s.json) {
    nlohmann::json devices = nlohmann::json::array(), results = nlohmann::json::array();
    for (const auto& d : run.devices)
      devices.push_back({{"ordinal", d.ordinal},
                         {"name", d.name},
                         {"id", d.id},
                         {"copy_gbps", d.copy_gbps},
                         {"fma_gflops", d.fma_gflops},
                         {"note", d.note}});
    for (const auto& r : run.results) {
      const auto& recorded = p.selected[static_cast<std::size_t>(r.index)].recorded;
      results.push_back({{"index", r.index},     {"op", r.op},
                         {"key", r.key},         {"describe", r.describe},
                         {"device", r.device},   {"device_name", r.device_name},
                         {"status", r.status},   {"variant", r.label},
                         {"origin", r.origin},   {"median_ms", r.median_ms},
                         {"gbps", r.gbps},       {"copy_fraction", r.copy_fraction},
                         {"variants_ok", r.variants_ok}, {"variants_failed", r.variants_failed},
                         {"run", run_json(r.run)},
                         {"recorded", recorded ? recorded_json(*recorded, p.devices) : nlohmann::json()},
                         {"seconds", r.seconds}, {"message", r.message}});
    }
    print_json({{"devices", devices},
                {"results", results},
                {"recorded_skipped", skipped_records_json(p)},
                {"budget_variants", budget.variants},
                {"budget_ms", budget.ms},
                {"tuned", tuned},
                {"skipped", skipped},
                {"failed", failed},
                {"seconds", seconds}});
  } else {
    for (const auto& d : run.devices) {
      std::printf("gpu%d %s: copy %s GB/s, FMA %s GFLOP/s%s\n", d.ordinal, d.name.c_str(),
                  d.copy_gbps > 0 ? fmt::format("{:.0f}", d.copy_gbps).c_str() : "not measured",
                  d.fma_gflops > 0 ? fmt::format("{:.0f}", d.fma_gflops).c_str() : "not measured",
                  d.note.empty() ? "" : (" (" + d.note + ")").c_str());
    }
    Table table({"#", "PROBLEM", "GPU", "STATUS", "VARIANT", "US", "GB/S", "% COPY", "TRIED", "COMPILED", "REUSED",
                 "SEARCH", "SM MHZ", "TIME"});
    for (const auto& r : run.results) {
      const bool said = r.status == "failed" || (r.status == "skipped" && !r.message.empty());
      const RunSummary* rs = r.run ? &*r.run : nullptr;
      table.add({std::to_string(r.index + 1), r.describe, r.device < 0 ? "-" : std::to_string(r.device), r.status,
                 said ? r.message.substr(0, 60) : r.label, format_us(r.median_ms),
                 r.gbps > 0 ? fmt::format("{:.0f}", r.gbps) : "-",
                 r.copy_fraction > 0 ? fmt::format("{:.1f}", 100 * r.copy_fraction) : "-",
                 rs != nullptr                ? fmt::format("{}/{}", rs->variants_timed, rs->variants_total)
                 : r.status == "tuned" ? fmt::format("{}", r.variants_ok + r.variants_failed)
                                       : "-",
                 rs != nullptr ? std::to_string(rs->compiles) : "-",
                 rs != nullptr ? std::to_string(rs->binaries_reused) : "-",
                 rs != nullptr && !rs->search.empty() ? rs->search : "-",
                 rs != nullptr && rs->sm_clock_mhz > 0 ? std::to_string(rs->sm_clock_mhz) : "-",
                 format_duration(r.seconds)});
    }
    std::printf("\n");
    print_skipped_records(p);
    std::printf("%s", table.render().c_str());
    std::printf("tuned %d, skipped %d, failed %d of %zu in %s\n", tuned, skipped, failed, run.results.size(),
                format_duration(seconds).c_str());
  }
  return failed > 0 ? kExitFailure : kExitOk;
}

int main_body(int argc, char** argv) {
  Settings s;
  CLI::App app{"kvtune-tune: tune many problems offline into the kvtune cache (see docs/TOOLS.md)"};
  app.add_option("--shapes", s.shapes, "shapes file (JSON, see docs/TOOLS.md); repeatable")->type_name("FILE");
  app.add_option("--suite", s.suites, "built-in suite: " + describe_suites())->delimiter(',')->type_name("NAME");
  app.add_flag("--recorded", s.recorded,
               "the problems the record policy logged in the cache (this build's templates), each on the GPU "
               "model it was recorded on");
  app.add_flag("--dry-run", s.dry_run, "print each problem's space size before and after pruning; no GPU");
  app.add_flag("--variants", s.variants, "with --dry-run --json: list every variant (label and config)");
  app.add_flag("--compile-only", s.compile_only, "compile every variant for --arch into the cache; no GPU");
  app.add_option("--arch", s.arch, "architecture for --compile-only, e.g. sm_90");
  app.add_option("--devices", s.devices, "GPUs to tune on: all, or ordinals like 0,2")->capture_default_str();
  app.add_option("--shard", s.shard, "tune only the i-th of n round-robin slices (0 <= i < n)")->type_name("i/n");
  app.add_flag("--force", s.force,
               "tune problems that already have a winner again; the stored winner stays unless beaten beyond noise");
  app.add_flag("--isolate", s.isolate, "tune each problem in a child process with a watchdog");
  app.add_option("--timeout", s.timeout, "seconds one problem may take with --isolate")
      ->check(CLI::Range(1.0, 7.0 * 24 * 3600))
      ->capture_default_str();
  app.add_option("--samples", s.samples, "timing samples per variant (default: the library's)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--budget-variants", s.budget_variants,
                 "at most N variants compiled and timed per problem; 0: every variant (default: the library's, 32)")
      ->check(CLI::Range(0, 1000000))
      ->type_name("N");
  app.add_option("--budget-ms", s.budget_ms,
                 "no new candidate starts after MS milliseconds of a problem's tuning; 0: no limit (default: the "
                 "library's, none)")
      ->check(CLI::Range(0.0, 1e10))
      ->type_name("MS");
  app.add_flag("--exhaustive", s.exhaustive, "every variant of every problem: --budget-variants 0");
  app.add_option("--jobs", s.jobs, "compile threads for --compile-only (default: all cores)")->check(CLI::Range(1, 1024));
  app.add_option("--cache", s.cache, "cache file (default: the library's, $KVTUNE_CACHE or ~/.cache/kvtune)")
      ->type_name("PATH");
  app.add_flag("--json", s.json, "machine-readable output on stdout");
  app.add_flag(kChildFlag, s.child)->group("");
  app.add_option("--child-device", s.child_device)->group("");
  app.add_option("--child-problem", s.child_problem)->group("");
  app.add_option("--child-key", s.child_key)->group("");
  app.add_option("--child-result", s.child_result)->group("");
  app.add_option("--child-progress", s.child_progress)->group("");
  app.footer("Exit status: 0 ok, 1 failure (no GPU, a failed problem or variant), 2 bad usage or input.");
  if (const int code = parse_command_line(app, argc, argv, kTool); code >= 0) return code;

  if (s.exhaustive && s.budget_variants >= 0)
    throw InputError("--exhaustive and --budget-variants exclude each other (--exhaustive is --budget-variants 0)");
  if (s.child) {
    const Budget budget = resolve_budget(s);
    ChildRequest request;
    request.cache_path = s.cache;
    request.device = s.child_device;
    request.problem_json = s.child_problem;
    request.key = s.child_key;
    request.result_path = s.child_result;
    request.progress_path = s.child_progress;
    request.samples = s.samples;
    request.budget_variants = budget.variants;
    request.budget_ms = budget.ms;
    request.retune = s.force;
    return run_isolated_child(request);
  }
  if (s.dry_run && s.compile_only) throw InputError("--dry-run and --compile-only exclude each other");
  if (s.variants && !(s.dry_run && s.json)) throw InputError("--variants goes with --dry-run --json");
  if (s.compile_only && (s.exhaustive || s.budget_variants >= 0 || s.budget_ms >= 0))
    throw InputError("--budget-variants, --budget-ms and --exhaustive apply to tuning; --compile-only compiles every "
                     "variant");
  if (s.shapes.empty() && s.suites.empty() && !s.recorded)
    throw InputError("no problems: give --shapes FILE, --suite NAME or --recorded (suites: " + describe_suites() + ")");
  const Budget budget = resolve_budget(s);
  const Problems problems = collect(s);
  if (s.dry_run) return dry_run(s, problems, budget);
  if (s.compile_only) return compile_only(s, problems);
  return tune(s, problems, budget);
}

}  // namespace
}  // namespace kvtune::tools

int main(int argc, char** argv) {
  return kvtune::tools::guarded_main("kvtune-tune", [&] { return kvtune::tools::main_body(argc, argv); });
}
