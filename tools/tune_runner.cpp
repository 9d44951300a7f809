#include "tools/tune_runner.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "cache/store.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "tools/cache_view.h"
#include "tools/ceilings.h"
#include "tools/common.h"
#include "tools/progress.h"

extern char** environ;

namespace kvtune::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// What a worker's Context tells it through the log: the last warning (why tuning fell back to the
// heuristic, when it does). Candidates are reported through ContextOptions::on_progress instead.
struct LibraryLog {
  std::mutex mutex;
  std::string last_warning;

  LogCallback callback() {
    return [this](const char* level, const std::string& message) {
      if (std::strcmp(level, "warn") != 0) return;
      std::lock_guard<std::mutex> lock(mutex);
      last_warning = message;
    };
  }
  std::string take_warning() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(last_warning, std::string());
  }
};

// The library settings of one tuning: the same in a worker's contexts and in an isolated child.
struct LibrarySettings {
  std::string cache_path;
  int samples = 0;
  int budget_variants = 32;
  double budget_ms = 0;
  bool retune = false;
};

// The library's settings as any program gets them (its environment: e.g. KVTUNE_TEST_FAULT), then
// what the tool decides itself. kvtune-tune has read the environment once already, so a bad value
// was refused there.
ContextOptions context_options(const LibrarySettings& settings, const std::string& buckets, LibraryLog& log) {
  ContextOptions o = ContextOptions::from_environment();
  o.policy = Policy::tune;
  o.cache_path = settings.cache_path;
  o.log_level = "warn";
  o.log = log.callback();
  if (settings.samples > 0) o.timing_samples = settings.samples;
  o.budget_variants = settings.budget_variants;
  o.budget_ms = settings.budget_ms;
  o.buckets = buckets;  // so that the library keys the call exactly as the problem's key()
  o.retune = settings.retune;
  return o;
}

LibrarySettings library_settings(const TuneOptions& options) {
  return LibrarySettings{options.cache_path, options.samples, options.budget_variants, options.budget_ms,
                         options.force};
}

// "tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass: 12.30 us", or the failure status.
std::string candidate_text(const TuningProgress& p) {
  std::string text = p.label + ": " + (p.status == "ok" ? format_us(p.median_ms) + " us" : p.status);
  if (p.final) text += " (final)";
  return text;
}

// What one library call did, beyond what it stored.
struct Observed {
  std::string warning;
  std::uint64_t tunes = 0;        // tunings it ran (0: it found a winner, or another process holds the lease)
  std::uint64_t lease_waits = 0;  // keys it left to another process's lease
};

std::optional<RunSummary> newest_run(cache::Store& store, const std::string& key, const std::string& device_id,
                                     const std::string& template_hash) {
  const auto runs = store.tuning_runs(key);  // oldest first
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->device_id != device_id || it->template_hash != template_hash) continue;
    RunSummary r;
    r.started_at = it->started_at;
    r.wall_seconds = it->wall_seconds;
    r.variants_total = it->variants_total;
    r.variants_timed = it->variants_timed;
    r.compiles = it->compiles;
    r.binaries_reused = it->binaries_reused;
    r.search = it->search;
    r.sm_clock_mhz = it->sm_clock_mhz;
    r.incumbent_label = it->incumbent_label;
    r.replaced_incumbent = it->replaced_incumbent;
    return r;
  }
  return std::nullopt;
}

// Fills the result from what the cache holds after the library ran.
void read_back(TuneResult& r, cache::Store& store, const std::string& device_id, const std::string& template_hash,
               double copy_gbps, const Observed& seen) {
  const auto winner = store.find_winner(r.key, device_id, template_hash);
  const bool leased_elsewhere = seen.tunes == 0 && seen.lease_waits > 0;
  if (leased_elsewhere) {
    // Not a failure: the lease holder stores the winner (the library uses a fallback meanwhile).
    r.status = "skipped";
    r.message = "another process holds this key's tuning lease and is tuning it";
  }
  if (!winner) {
    if (!leased_elsewhere) {
      r.status = "failed";
      r.message = seen.warning.empty() ? "the library stored no result" : seen.warning;
    }
    return;
  }
  r.label = winner->label;
  r.origin = winner->origin;
  r.median_ms = winner->median_ms;
  r.gbps = winner->gbps;
  r.copy_fraction = copy_gbps > 0 ? winner->gbps / copy_gbps : 0;
  for (const auto& t : latest_run(store.trials(r.key, device_id, template_hash)))
    (t.status == "ok" ? r.variants_ok : r.variants_failed)++;
  r.run = newest_run(store, r.key, device_id, template_hash);
  if (leased_elsewhere) return;
  if (winner->origin == "heuristic") {
    r.status = "failed";
    r.message = "tuning failed and the library fell back to its heuristic" +
                (seen.warning.empty() ? "" : ": " + seen.warning);
  } else if (seen.tunes == 0) {
    r.status = "skipped";
    r.message = "the library found a stored winner and did not tune (an exact-size entry, or another process "
                "tuned it meanwhile)";
  } else {
    r.status = "tuned";
    if (!seen.warning.empty()) r.message = seen.warning;
  }
}

std::string result_line(const TuneResult& r, int total) {
  const std::string head = r.device < 0 ? fmt::format("[{}/{}] {}", r.index + 1, total, r.describe)
                                        : fmt::format("[{}/{}] gpu{} {}", r.index + 1, total, r.device, r.describe);
  if (r.status == "skipped" && !r.message.empty()) return fmt::format("{}: skipped: {}", head, r.message);
  if (r.status == "skipped") return fmt::format("{}: skipped, already tuned ({})", head, r.label);
  if (r.status == "failed") return fmt::format("{}: FAILED: {}", head, r.message);
  std::string line = fmt::format("{}: {} {} us {:.0f} GB/s", head, r.label, format_us(r.median_ms), r.gbps);
  if (r.copy_fraction > 0) line += fmt::format(" ({:.1f}% of copy)", 100 * r.copy_fraction);
  if (r.run) {
    const RunSummary& run = *r.run;
    line += fmt::format(", {} of {} variants ({}; {} compiled, {} reused", run.variants_timed, run.variants_total,
                        run.search.empty() ? "?" : run.search, run.compiles, run.binaries_reused);
    if (r.variants_failed > 0) line += fmt::format("; {} failed", r.variants_failed);
    line += ")";
    if (run.sm_clock_mhz > 0) line += fmt::format(", SM {} MHz", run.sm_clock_mhz);
    if (!run.incumbent_label.empty())
      line += run.replaced_incumbent ? fmt::format(", replaced {}", run.incumbent_label) : ", incumbent kept";
  } else {
    line += fmt::format(", {} variants", r.variants_ok + r.variants_failed);
    if (r.variants_failed > 0) line += fmt::format(" ({} failed)", r.variants_failed);
  }
  return line + fmt::format(", {}", format_duration(r.seconds));
}

// --- isolation ----------------------------------------------------------------------------------

std::string temp_path(const char* what) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = fmt::format("{}/kvtune-tune-{}-XXXXXX", dir != nullptr && *dir != '\0' ? dir : "/tmp", what);
  const int fd = ::mkstemp(path.data());
  if (fd < 0) throw Error(fmt::format("cannot create a temporary file {}: {}", path, std::strerror(errno)));
  ::close(fd);
  return path;
}

std::string last_line_of(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const InputError&) {
    return "";
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

// The lines a child appends to its progress file, read as they come.
class LineTail {
 public:
  explicit LineTail(std::string path) : path_(std::move(path)) {}
  void poll(const std::function<void(const std::string&)>& on_line) {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return;
    in.seekg(offset_);
    const std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset_ += static_cast<std::streamoff>(chunk.size());
    partial_ += chunk;
    for (auto nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n')) {
      on_line(partial_.substr(0, nl));
      partial_.erase(0, nl + 1);
    }
  }

 private:
  std::string path_;
  std::streamoff offset_ = 0;
  std::string partial_;
};

using CandidateFn = std::function<void(long done, long total, const std::string& text)>;

// Runs the child for one problem; returns what it observed, or throws Error describing how it
// failed (exit status, signal, timeout).
Observed run_child(const OpProblem& problem, int device, const TuneOptions& options, const CandidateFn& on_candidate) {
  const std::string result_path = temp_path("result");
  const std::string stderr_path = result_path + ".stderr";
  const std::string progress_path = result_path + ".progress";
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      for (const auto& p : paths) ::unlink(p.c_str());
    }
  } cleanup{{result_path, stderr_path, progress_path}};

  std::vector<std::string> args = {options.self_path, kChildFlag, "--cache", options.cache_path, "--child-device",
                                   std::to_string(device)};
  // A shapes entry keys by powers of two; any other key is rebuilt from the key itself.
  if (problem.buckets() == "pow2") {
    args.insert(args.end(), {"--child-problem", problem.to_json().dump()});
  } else {
    args.insert(args.end(), {"--child-problem", problem.op(), "--child-key", problem.key()});
  }
  args.insert(args.end(), {"--child-result", result_path, "--child-progress", progress_path, "--budget-variants",
                           std::to_string(options.budget_variants), "--budget-ms",
                           fmt::format("{}", options.budget_ms)});
  if (options.samples > 0) args.insert(args.end(), {"--samples", std::to_string(options.samples)});
  if (options.force) args.push_back("--force");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, options.self_path.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(fmt::format("cannot start the child process: {}", std::strerror(rc)));

  // Watchdog: the child gets timeout_seconds, then SIGKILL. Meanwhile its candidates are relayed.
  LineTail tail(progress_path);
  const auto relay = [&] {
    if (!on_candidate) return;
    tail.poll([&](const std::string& line) {
      // "DONE\tTOTAL\tTEXT"
      const auto a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
      if (b == std::string::npos) return;
      on_candidate(std::atol(line.substr(0, a).c_str()), std::atol(line.substr(a + 1, b - a - 1).c_str()),
                   line.substr(b + 1));
    });
  };
  const auto start = Clock::now();
  int status = 0;
  bool timed_out = false;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw Error(fmt::format("waitpid: {}", std::strerror(errno)));
    if (seconds_since(start) > options.timeout_seconds) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    relay();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  relay();
  const std::string last = last_line_of(stderr_path);
  const std::string said = last.empty() ? "" : ": " + last;
  if (timed_out)
    throw Error(fmt::format("timed out: the child tuning this problem ran past {} and was killed",
                            format_duration(options.timeout_seconds)));
  if (WIFSIGNALED(status))
    throw Error(fmt::format("the child tuning this problem crashed (signal {}, {}){}", WTERMSIG(status),
                            strsignal(WTERMSIG(status)), said));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format("the child tuning this problem exited with status {}{}", WEXITSTATUS(status), said));
  const nlohmann::json result = parse_json_file(result_path);
  Observed seen;
  seen.warning = result.value("warning", std::string());
  seen.tunes = result.value("tunes", std::uint64_t{0});
  seen.lease_waits = result.value("lease_waits", std::uint64_t{0});
  return seen;
}

// --- the workers --------------------------------------------------------------------------------

struct Group {  // the selected GPUs of one model
  std::string device_id;
  std::vector<int> ordinals;
  std::atomic<std::size_t> next{0};
  double copy_gbps = 0;
};

class Runner {
 public:
  Runner(const std::vector<TuneTask>& tasks, const TuneOptions& options) : tasks_(tasks), options_(options) {}

  TuneRun run() {
    // One fingerprint per selected GPU; GPUs of one model share a queue.
    std::map<std::string, std::unique_ptr<Group>> groups;
    std::vector<std::pair<int, Group*>> workers;
    for (int ordinal : options_.devices) {
      const auto fp = detail::read_fingerprint(ordinal);
      auto& group = groups[fp.id()];
      if (!group) {
        group = std::make_unique<Group>();
        group->device_id = fp.id();
      }
      group->ordinals.push_back(ordinal);
      workers.emplace_back(ordinal, group.get());
      run_.devices.push_back(DeviceSummary{ordinal, fp.name, fp.id(), 0, 0, ""});
    }
    store_ = cache::Store::open_existing(options_.cache_path, true);
    // A recorded problem is tuned only on GPUs of the device it was recorded on; where none is
    // selected it is skipped, saying so.
    int total = 0;
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      const TuneTask& task = tasks_[i];
      if (task.device_id.empty()) {
        total += static_cast<int>(groups.size());
      } else if (groups.count(task.device_id) != 0) {
        ++total;
      } else {
        run_.results.push_back(not_here(static_cast<int>(i), task, groups));
      }
    }
    progress_ = std::make_unique<Progress>(total, options_.progress_bar, options_.quiet);
    for (const auto& r : run_.results) progress_->note(result_line(r, static_cast<int>(tasks_.size())));
    std::vector<std::thread> threads;
    for (const auto& [ordinal, group] : workers)
      threads.emplace_back([this, ordinal = ordinal, group = group] { work(ordinal, *group); });
    for (auto& t : threads) t.join();
    progress_->close();
    add_not_run(groups);
    std::sort(run_.results.begin(), run_.results.end(), [](const TuneResult& a, const TuneResult& b) {
      return a.index != b.index ? a.index < b.index : a.device < b.device;
    });
    return std::move(run_);
  }

 private:
  static bool applies(const TuneTask& task, const Group& group) {
    return task.device_id.empty() || task.device_id == group.device_id;
  }

  TuneResult blank(int index, const TuneTask& task) const {
    TuneResult r;
    r.index = index;
    r.op = task.problem->op();
    r.key = task.problem->key();
    r.describe = task.problem->describe();
    return r;
  }

  TuneResult not_here(int index, const TuneTask& task, const std::map<std::string, std::unique_ptr<Group>>& groups) {
    TuneResult r = blank(index, task);
    r.status = "skipped";
    const auto row = store_->find_device(task.device_id);
    std::string selected;
    for (const auto& [id, group] : groups) selected += (selected.empty() ? "" : ", ") + id.substr(0, 6);
    r.message = fmt::format("recorded on {}, which is none of the selected GPUs (device ids {})",
                            row ? device_label(*row) : fmt::format("unknown device ({})", task.device_id.substr(0, 6)),
                            selected);
    return r;
  }

  void work(int ordinal, Group& group) {
    try {
      detail::cuda_check(cudaSetDevice(ordinal), "cudaSetDevice");
      const auto fp = detail::read_fingerprint(ordinal);
      if (ordinal == group.ordinals.front()) measure(ordinal, fp, group);
      LibraryLog log;
      // One context per bucketing the problems need (shapes entries all use pow2).
      std::map<std::string, std::unique_ptr<Context>> contexts;
      const auto context_for = [&](const std::string& buckets) -> Context& {
        auto& context = contexts[buckets];
        if (!context) {
          ContextOptions o = context_options(library_settings(options_), buckets, log);
          if (!options_.quiet)
            o.on_progress = [this, ordinal](const TuningProgress& p) {
              progress_->candidate(ordinal, p.done, p.total, candidate_text(p));
            };
          context = std::make_unique<Context>(std::move(o));
        }
        return *context;
      };
      for (std::size_t i = group.next++; i < tasks_.size(); i = group.next++) {
        const TuneTask& task = tasks_[i];
        if (!applies(task, group)) continue;
        const OpProblem& problem = *task.problem;
        TuneResult r = blank(static_cast<int>(i), task);
        r.device = ordinal;
        r.device_name = fp.name;
        const auto start = Clock::now();
        const std::string template_hash = require_handler(problem.op(), "").template_hash();
        const bool skipped = prepare(r, group.device_id, template_hash);
        if (skipped && copy_gbps(group) > 0) r.copy_fraction = r.gbps / copy_gbps(group);
        if (!skipped) {
          progress_->start(ordinal, problem.describe(), 0);  // the library tells the count
          try {
            Observed seen;
            if (options_.isolate) {
              CandidateFn relay;
              if (!options_.quiet)
                relay = [this, ordinal](long done, long total, const std::string& text) {
                  progress_->candidate(ordinal, done, total, text);
                };
              seen = run_child(problem, ordinal, options_, relay);
            } else {
              Context& context = context_for(problem.buckets());
              const Counters before = context.counters();
              problem.run_library(context);
              const Counters after = context.counters();
              seen.warning = log.take_warning();
              seen.tunes = after.tunes - before.tunes;
              seen.lease_waits = after.lease_waits - before.lease_waits;
            }
            read_back(r, *store_, group.device_id, template_hash, copy_gbps(group), seen);
          } catch (const std::exception& e) {
            r.status = "failed";
            r.message = e.what();
            if (const auto nl = r.message.find('\n'); nl != std::string::npos) r.message.resize(nl);
            if (!options_.isolate) cudaGetLastError();  // a sticky error ends this worker below
          }
        }
        r.seconds = seconds_since(start);
        progress_->finish(ordinal, result_line(r, static_cast<int>(tasks_.size())), skipped);
        add(std::move(r), group);
        if (!options_.isolate) {
          const cudaError_t sticky = cudaDeviceSynchronize();
          if (sticky != cudaSuccess)
            throw Error(fmt::format("gpu{} is unusable after a failure ({}); its worker stops (run with --isolate "
                                    "to contain such failures)",
                                    ordinal, cudaGetErrorString(sticky)));
        }
      }
    } catch (const std::exception& e) {
      // The worker cannot go on (no device, broken context): the problems it would have taken
      // go to the other GPUs of its model, or are reported as not run.
      std::string what = e.what();
      if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        worker_errors_.push_back(what);
      }
      progress_->note(fmt::format("gpu{}: worker stopped: {}", ordinal, what));
    }
  }

  // Problems no worker of a model reached (all of them stopped) are failures too.
  void add_not_run(const std::map<std::string, std::unique_ptr<Group>>& groups) {
    for (const auto& [id, group] : groups) {
      for (std::size_t i = 0; i < tasks_.size(); ++i) {
        if (!applies(tasks_[i], *group) || done_.count({static_cast<int>(i), id}) != 0) continue;
        TuneResult r = blank(static_cast<int>(i), tasks_[i]);
        r.device = group->ordinals.front();
        for (const auto& d : run_.devices)
          if (d.ordinal == r.device) r.device_name = d.name;
        r.status = "failed";
        r.message = "not run: " + (worker_errors_.empty() ? std::string("no worker reached it") : worker_errors_.front());
        run_.results.push_back(std::move(r));
      }
    }
  }

  // Skips a problem that already has a tuned or imported winner, unless forced: then the library
  // tunes it again with that winner as the incumbent (ContextOptions::retune), which stays unless
  // a variant beats it beyond the measured noise. Returns whether the problem is skipped.
  bool prepare(TuneResult& r, const std::string& device_id, const std::string& template_hash) {
    const auto winner = store_->find_winner(r.key, device_id, template_hash);
    if (!winner || winner->origin == "heuristic" || options_.force) return false;
    r.status = "skipped";
    r.label = winner->label;
    r.origin = winner->origin;
    r.median_ms = winner->median_ms;
    r.gbps = winner->gbps;
    r.run = newest_run(*store_, r.key, device_id, template_hash);
    return true;
  }

  void measure(int ordinal, const detail::DeviceFingerprint& fp, Group& group) {
    auto stored = store_->find_ceilings(group.device_id);
    if (!stored || options_.force || stored->copy_gbps <= 0 || stored->fma_gflops <= 0) {
      const MeasuredCeilings m = measure_ceilings(fp.arch());
      cache::Ceilings c{group.device_id, m.copy_gbps, m.fma_gflops, 0};
      if (m.copy_gbps > 0 || m.fma_gflops > 0) store_->put_ceilings(c);
      stored = c;
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& d : run_.devices)
        if (d.ordinal == ordinal) d.note = m.note;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    group.copy_gbps = stored->copy_gbps;
    for (auto& d : run_.devices)
      if (d.id == group.device_id) {
        d.copy_gbps = stored->copy_gbps;
        d.fma_gflops = stored->fma_gflops;
      }
  }

  double copy_gbps(const Group& group) {
    std::lock_guard<std::mutex> lock(mutex_);
    return group.copy_gbps;
  }

  void add(TuneResult r, const Group& group) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_.insert({r.index, group.device_id});
    run_.results.push_back(std::move(r));
  }

  const std::vector<TuneTask>& tasks_;
  const TuneOptions& options_;
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<Progress> progress_;
  std::mutex mutex_;
  TuneRun run_;
  std::set<std::pair<int, std::string>> done_;  // (task index, device id) with a result
  std::vector<std::string> worker_errors_;
};

}  // namespace

TuneRun run_tuning(const std::vector<TuneTask>& tasks, const TuneOptions& options) {
  return Runner(tasks, options).run();
}

int run_isolated_child(const ChildRequest& q) {
  return guarded_main("kvtune-tune (child)", [&] {
    std::unique_ptr<OpProblem> problem;
    if (!q.key.empty()) {
      std::string why;
      problem = require_handler(q.problem_json, "--child-problem").from_key(q.key, &why);
      if (!problem) throw InputError(fmt::format("{}: {}", q.key, why));
    } else {
      auto problems = parse_entries(nlohmann::json::array({parse_json_text(q.problem_json, "--child-problem")}),
                                    "--child-problem");
      problem = std::move(problems.front());
    }
    detail::cuda_check(cudaSetDevice(q.device), "cudaSetDevice");
    LibraryLog log;
    LibrarySettings settings{q.cache_path, q.samples, q.budget_variants, q.budget_ms, q.retune};
    ContextOptions options = context_options(settings, problem->buckets(), log);
    // Each finished candidate goes to the parent as a line "DONE\tTOTAL\tTEXT".
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> progress(
        q.progress_path.empty() ? nullptr : std::fopen(q.progress_path.c_str(), "a"), &std::fclose);
    if (progress)
      options.on_progress = [file = progress.get()](const TuningProgress& p) {
        std::fprintf(file, "%d\t%d\t%s\n", p.done, p.total, candidate_text(p).c_str());
        std::fflush(file);
      };
    Context context(std::move(options));
    const std::string label = problem->run_library(context);
    const Counters counters = context.counters();
    write_text_file(q.result_path, nlohmann::json{{"label", label},
                                                  {"warning", log.take_warning()},
                                                  {"tunes", counters.tunes},
                                                  {"lease_waits", counters.lease_waits}}
                                       .dump());
    return 0;
  });
}

}  // namespace kvtune::tools
