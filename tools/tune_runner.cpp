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
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "cache/store.h"
#include "lib/src/cuda_check.h"
#include "lib/src/device.h"
#include "tools/cache_view.h"
#include "tools/ceilings.h"
#include "tools/common.h"
#include "tools/progress.h"

extern char** environ;

namespace kvtune::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// What a worker's Context tells it through the log: trials as they finish (for the progress bar)
// and the last warning (why tuning fell back to the heuristic, when it does).
struct LibraryLog {
  std::mutex mutex;
  std::string last_warning;
  std::function<void()> on_trial;

  LogCallback callback() {
    return [this](const char* level, const std::string& message) {
      if (std::strcmp(level, "debug") == 0) {
        // The tuner logs one debug line per finished candidate.
        if (on_trial) on_trial();
      } else if (std::strcmp(level, "warn") == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        last_warning = message;
      }
    };
  }
  std::string take_warning() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(last_warning, std::string());
  }
};

ContextOptions context_options(const std::string& cache_path, int samples, LibraryLog& log) {
  ContextOptions o;
  o.policy = Policy::tune;
  o.cache_path = cache_path;
  o.log_level = "debug";
  o.log = log.callback();
  if (samples > 0) o.timing_samples = samples;
  return o;
}

// Fills the result from what the cache holds after the library ran.
void read_back(TuneResult& r, cache::Store& store, const std::string& device_id, const std::string& template_hash,
               double copy_gbps, const std::string& warning) {
  const auto winner = store.find_winner(r.key, device_id, template_hash);
  if (!winner) {
    r.status = "failed";
    r.message = warning.empty() ? "the library stored no result" : warning;
    return;
  }
  r.label = winner->label;
  r.origin = winner->origin;
  r.median_ms = winner->median_ms;
  r.gbps = winner->gbps;
  r.copy_fraction = copy_gbps > 0 ? winner->gbps / copy_gbps : 0;
  for (const auto& t : latest_run(store.trials(r.key, device_id, template_hash)))
    (t.status == "ok" ? r.variants_ok : r.variants_failed)++;
  if (winner->origin == "heuristic") {
    r.status = "failed";
    r.message = "tuning failed and the library fell back to its heuristic" + (warning.empty() ? "" : ": " + warning);
  } else {
    r.status = "tuned";
    if (!warning.empty()) r.message = warning;
  }
}

std::string result_line(const TuneResult& r, int total) {
  const std::string head = fmt::format("[{}/{}] gpu{} {}", r.index + 1, total, r.device, r.describe);
  if (r.status == "skipped") return fmt::format("{}: skipped, already tuned ({})", head, r.label);
  if (r.status == "failed") return fmt::format("{}: FAILED: {}", head, r.message);
  std::string line = fmt::format("{}: {} {} us {:.0f} GB/s", head, r.label, format_us(r.median_ms), r.gbps);
  if (r.copy_fraction > 0) line += fmt::format(" ({:.1f}% of copy)", 100 * r.copy_fraction);
  line += fmt::format(", {} variants", r.variants_ok + r.variants_failed);
  if (r.variants_failed > 0) line += fmt::format(" ({} failed)", r.variants_failed);
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

// Runs the child for one problem; returns the warning it reported, or throws Error describing
// how it failed (exit status, signal, timeout).
std::string run_child(const OpProblem& problem, int device, const TuneOptions& options) {
  const std::string result_path = temp_path("result");
  const std::string stderr_path = result_path + ".stderr";
  struct Cleanup {
    std::string a, b;
    ~Cleanup() {
      ::unlink(a.c_str());
      ::unlink(b.c_str());
    }
  } cleanup{result_path, stderr_path};

  std::vector<std::string> args = {options.self_path,
                                   kChildFlag,
                                   "--cache",
                                   options.cache_path,
                                   "--child-device",
                                   std::to_string(device),
                                   "--child-problem",
                                   problem.to_json().dump(),
                                   "--child-result",
                                   result_path};
  if (options.samples > 0) {
    args.push_back("--samples");
    args.push_back(std::to_string(options.samples));
  }
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

  // Watchdog: the child gets timeout_seconds, then SIGKILL.
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
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string tail = last_line_of(stderr_path);
  const std::string said = tail.empty() ? "" : ": " + tail;
  if (timed_out)
    throw Error(fmt::format("timed out: the child tuning this problem ran past {} and was killed",
                            format_duration(options.timeout_seconds)));
  if (WIFSIGNALED(status))
    throw Error(fmt::format("the child tuning this problem crashed (signal {}, {}){}", WTERMSIG(status),
                            strsignal(WTERMSIG(status)), said));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format("the child tuning this problem exited with status {}{}", WEXITSTATUS(status), said));
  const nlohmann::json result = parse_json_file(result_path);
  return result.value("warning", std::string());
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
  Runner(const std::vector<const OpProblem*>& problems, const TuneOptions& options)
      : problems_(problems), options_(options) {}

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
    const int total = static_cast<int>(problems_.size() * groups.size());
    progress_ = std::make_unique<Progress>(total, options_.progress_bar, options_.quiet);
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
  void work(int ordinal, Group& group) {
    try {
      detail::cuda_check(cudaSetDevice(ordinal), "cudaSetDevice");
      const auto fp = detail::read_fingerprint(ordinal);
      if (ordinal == group.ordinals.front()) measure(ordinal, fp, group);
      LibraryLog log;
      std::unique_ptr<Context> context;
      if (!options_.isolate) {
        log.on_trial = [this, ordinal] { progress_->variant_done(ordinal); };
        context = std::make_unique<Context>(context_options(options_.cache_path, options_.samples, log));
      }
      for (std::size_t i = group.next++; i < problems_.size(); i = group.next++) {
        const OpProblem& problem = *problems_[i];
        TuneResult r;
        r.index = static_cast<int>(i);
        r.op = problem.op();
        r.key = problem.key();
        r.describe = problem.describe();
        r.device = ordinal;
        r.device_name = fp.name;
        const auto start = Clock::now();
        const std::string template_hash = require_handler(problem.op(), "").template_hash();
        const bool skipped = prepare(r, group.device_id, template_hash);
        if (skipped && copy_gbps(group) > 0) r.copy_fraction = r.gbps / copy_gbps(group);
        if (!skipped) {
          // A child's variants are not visible from here: isolated problems show no variant count.
          progress_->start(ordinal, problem.describe(),
                           options_.isolate ? 0L : static_cast<long>(problem.space().tuned));
          std::string warning;
          try {
            if (options_.isolate) {
              warning = run_child(problem, ordinal, options_);
            } else {
              problem.run_library(*context);
              warning = log.take_warning();
            }
            read_back(r, *store_, group.device_id, template_hash, copy_gbps(group), warning);
          } catch (const std::exception& e) {
            r.status = "failed";
            r.message = e.what();
            if (const auto nl = r.message.find('\n'); nl != std::string::npos) r.message.resize(nl);
            if (!options_.isolate) cudaGetLastError();  // a sticky error ends this worker below
          }
        }
        r.seconds = seconds_since(start);
        progress_->finish(ordinal, result_line(r, static_cast<int>(problems_.size())), skipped);
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
      for (std::size_t i = 0; i < problems_.size(); ++i) {
        if (done_.count({static_cast<int>(i), id}) != 0) continue;
        TuneResult r;
        r.index = static_cast<int>(i);
        r.op = problems_[i]->op();
        r.key = problems_[i]->key();
        r.describe = problems_[i]->describe();
        r.device = group->ordinals.front();
        for (const auto& d : run_.devices)
          if (d.ordinal == r.device) r.device_name = d.name;
        r.status = "failed";
        r.message = "not run: " + (worker_errors_.empty() ? std::string("no worker reached it") : worker_errors_.front());
        run_.results.push_back(std::move(r));
      }
    }
  }

  // Skip (already tuned) or clear (force) the stored entry. Returns whether the problem is skipped.
  bool prepare(TuneResult& r, const std::string& device_id, const std::string& template_hash) {
    const auto winner = store_->find_winner(r.key, device_id, template_hash);
    if (!winner || winner->origin == "heuristic") return false;
    if (options_.force) {
      store_->remove_result(r.key, device_id, template_hash);
      return false;
    }
    r.status = "skipped";
    r.label = winner->label;
    r.origin = winner->origin;
    r.median_ms = winner->median_ms;
    r.gbps = winner->gbps;
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

  const std::vector<const OpProblem*>& problems_;
  const TuneOptions& options_;
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<Progress> progress_;
  std::mutex mutex_;
  TuneRun run_;
  std::set<std::pair<int, std::string>> done_;  // (problem index, device id) with a result
  std::vector<std::string> worker_errors_;
};

}  // namespace

TuneRun run_tuning(const std::vector<const OpProblem*>& problems, const TuneOptions& options) {
  return Runner(problems, options).run();
}

int run_isolated_child(const std::string& cache_path, int device, const std::string& problem_json,
                       const std::string& result_path, int samples) {
  return guarded_main("kvtune-tune (child)", [&] {
    auto problems = parse_entries(nlohmann::json::array({parse_json_text(problem_json, "--child-problem")}),
                                  "--child-problem");
    detail::cuda_check(cudaSetDevice(device), "cudaSetDevice");
    LibraryLog log;
    Context context(context_options(cache_path, samples, log));
    const std::string label = problems.front()->run_library(context);
    write_text_file(result_path, nlohmann::json{{"label", label}, {"warning", log.take_warning()}}.dump());
    return 0;
  });
}

}  // namespace kvtune::tools
