#include "core/compile_workers.h"

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtune/error.h"

extern char** environ;

namespace kvtune::detail {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Part of every answer: a worker of another build (another protocol or NVRTC) is not used.
constexpr int kProtocol = 1;
constexpr std::uint64_t kMaxFrame = std::uint64_t(1) << 30;
// Workers that fail in a row before the pool stops starting them.
constexpr int kMaxFailures = 3;
std::atomic<double> idle_seconds{kIdleSeconds};
// The process that made the pools: a forked child compiles in itself (its copies of the pools'
// sockets and mutexes belong to the parent).
std::atomic<pid_t> pools_owner{0};

bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);  // a dead peer is an error, not SIGPIPE
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= std::size_t(n);
  }
  return true;
}

// 1: read; 0: end-of-file before the first byte; -1: error or a short read.
int read_all(int fd, void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::recv(fd, p + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && got == 0) return 0;
    if (n <= 0) return -1;
    got += std::size_t(n);
  }
  return 1;
}

// A frame: the payload's length (8 bytes, little-endian), then the payload (MessagePack).
bool write_frame(int fd, const std::vector<std::uint8_t>& payload) {
  std::uint8_t head[8];
  for (int i = 0; i < 8; ++i) head[i] = std::uint8_t(std::uint64_t(payload.size()) >> (8 * i));
  return write_all(fd, head, sizeof head) && write_all(fd, payload.data(), payload.size());
}

int read_frame(int fd, std::vector<std::uint8_t>& payload) {
  std::uint8_t head[8];
  const int r = read_all(fd, head, sizeof head);
  if (r <= 0) return r;
  std::uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= std::uint64_t(head[i]) << (8 * i);
  if (size > kMaxFrame) return -1;
  payload.resize(std::size_t(size));
  return size == 0 ? 1 : read_all(fd, payload.data(), payload.size()) == 1 ? 1 : -1;
}

json context_json(const Error::Context& c) {
  return {{"op", c.op}, {"problem", c.problem}, {"variant", c.variant}, {"device", c.device}, {"field", c.field}};
}

Error::Context context_from(const json& j) {
  return Error::Context{j.at("op").get<std::string>(), j.at("problem").get<std::string>(),
                        j.at("variant").get<std::string>(), j.at("device").get<std::string>(),
                        j.at("field").get<std::string>()};
}

json request_json(const CompileRequest& r) {
  json headers = json::array();
  for (const auto& h : r.headers) headers.push_back({h.name, std::string(h.text)});
  return {{"program", r.program_name}, {"source", std::string(r.source)}, {"headers", std::move(headers)},
          {"names", r.name_expressions},  {"arch", r.arch},                 {"options", r.extra_options}};
}

struct Worker {
  pid_t pid = -1;
  int fd = -1;
  Clock::time_point idle_since;
};

void stop_worker(Worker& w, bool kill_it) {
  if (w.fd >= 0) ::close(w.fd);  // the worker reads end-of-file and exits
  if (w.pid > 0) {
    if (kill_it) ::kill(w.pid, SIGKILL);
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  w = Worker{};
}

class WorkerPool {
 public:
  explicit WorkerPool(std::string path)
      : path_(std::move(path)), max_(int(std::max(1u, std::thread::hardware_concurrency()))) {}

  CompileResult compile(const CompileRequest& request) {
    Worker w;
    if (!acquire(w)) return fall_back(request);
    std::optional<CompileResult> result;
    try {
      result = exchange(w, request);
    } catch (const Error&) {  // the worker answered with the compile's error: it is healthy
      release(w);
      throw;
    } catch (...) {  // out of memory reading the answer, say: the exchange is in an unknown state
      discard(w);
      throw;
    }
    if (!result) {
      discard(w);
      return fall_back(request);
    }
    release(w);
    return std::move(*result);
  }

  WorkerPoolStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    WorkerPoolStats s{alive_, started_, compiled_, fell_back_.load(), {}};
    for (const auto& w : idle_) s.idle_pids.push_back(int(w.pid));
    return s;
  }

 private:
  CompileResult fall_back(const CompileRequest& request) {
    ++fell_back_;
    return nvrtc_compile(request);
  }

  bool acquire(Worker& w) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (failures_ >= kMaxFailures) return false;
      while (!idle_.empty()) {
        w = idle_.back();
        idle_.pop_back();
        int status = 0;
        // Alive unless reaped here (-1: a process that ignores SIGCHLD has its children reaped for it).
        if (::waitpid(w.pid, &status, WNOHANG) != w.pid) return true;
        // It exited (killed, or by itself) while idle: reaped, replaced below.
        ::close(w.fd);
        w = Worker{};
        --alive_;
      }
      if (alive_ < max_) break;
      available_.wait(lock);
    }
    ++alive_;  // reserved while it starts, outside the lock
    lock.unlock();
    const bool ok = spawn(w);
    lock.lock();
    if (!ok) {
      --alive_;
      ++failures_;
      available_.notify_one();
      return false;
    }
    ++started_;
    return true;
  }

  bool spawn(Worker& w) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 0);  // the worker talks on its stdin
    posix_spawnattr_init(&attr);
    // Its own process group (a terminal's Ctrl-C stops the caller, whose exit then ends the worker),
    // no blocked signals inherited from the calling thread.
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    std::string arg0 = path_, arg1 = "--serve";
    char* argv[] = {arg0.data(), arg1.data(), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, path_.c_str(), &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(sv[1]);
    if (rc != 0) {
      ::close(sv[0]);
      return false;
    }
    w.pid = pid;
    w.fd = sv[0];
    return true;
  }

  // The compiled result; nullopt when the worker failed (died, or answered what this build cannot
  // read); throws the compile's own kvtune::Error.
  std::optional<CompileResult> exchange(Worker& w, const CompileRequest& request) {
    std::vector<std::uint8_t> frame = json::to_msgpack(request_json(request));
    if (!write_frame(w.fd, frame) || read_frame(w.fd, frame) != 1) return std::nullopt;
    json answer;
    try {
      answer = json::from_msgpack(frame);
      if (answer.at("protocol").get<int>() != kProtocol || answer.at("nvrtc").get<int>() != nvrtc_version())
        return std::nullopt;
      if (!answer.at("ok").get<bool>()) {
        const json& e = answer.at("error");
        if (e.at("kind").get<std::string>() == "compile")
          throw CompileError(context_from(e.at("context")), e.at("cause").get<std::string>(),
                             e.at("log").get<std::string>(), e.at("options").get<std::vector<std::string>>(),
                             e.at("names").get<std::vector<std::string>>());
        if (e.contains("context")) throw Error(context_from(e.at("context")), e.at("cause").get<std::string>());
        throw Error(e.at("what").get<std::string>());
      }
      CompileResult result;
      const auto& cubin = answer.at("cubin").get_binary();
      result.cubin.assign(cubin.begin(), cubin.end());
      result.lowered_names = answer.at("lowered").get<std::vector<std::string>>();
      result.log = answer.at("log").get<std::string>();
      result.seconds = answer.at("seconds").get<double>();
      if (result.lowered_names.size() != request.name_expressions.size()) return std::nullopt;
      std::lock_guard<std::mutex> lock(mutex_);
      ++compiled_;
      failures_ = 0;
      return result;
    } catch (const json::exception&) {
      return std::nullopt;
    }
  }

  void release(Worker& w) {
    std::lock_guard<std::mutex> lock(mutex_);
    w.idle_since = Clock::now();
    idle_.push_back(w);
    available_.notify_one();
    if (!reaper_started_) {
      reaper_started_ = true;
      std::thread([this] { reap(); }).detach();  // the pool lives as long as the process
    }
    reaper_wake_.notify_one();
  }

  void discard(Worker& w) {
    stop_worker(w, true);
    std::lock_guard<std::mutex> lock(mutex_);
    --alive_;
    ++failures_;
    available_.notify_one();
  }

  // Stops workers idle for kIdleSeconds; sleeps while none is idle.
  void reap() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (idle_.empty()) {
        reaper_wake_.wait(lock);
        continue;
      }
      const double limit = idle_seconds.load();
      reaper_wake_.wait_for(lock, std::chrono::duration<double>(limit / 4));
      const auto now = Clock::now();
      std::vector<Worker> expired;
      for (std::size_t i = 0; i < idle_.size();) {
        if (std::chrono::duration<double>(now - idle_[i].idle_since).count() >= limit) {
          expired.push_back(idle_[i]);
          idle_.erase(idle_.begin() + std::ptrdiff_t(i));
        } else {
          ++i;
        }
      }
      alive_ -= int(expired.size());
      if (expired.empty()) continue;
      lock.unlock();
      for (auto& w : expired) stop_worker(w, false);
      lock.lock();
      available_.notify_all();
    }
  }

  const std::string path_;
  const int max_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::condition_variable reaper_wake_;
  std::vector<Worker> idle_;
  int alive_ = 0;
  int started_ = 0;
  int compiled_ = 0;
  std::atomic<int> fell_back_{0};
  int failures_ = 0;
  bool reaper_started_ = false;
};

// One pool per worker path, never destroyed: its workers end when this process does.
WorkerPool& pool_for(const std::string& path) {
  static std::mutex mutex;
  static auto* pools = new std::map<std::string, WorkerPool*>();
  std::lock_guard<std::mutex> lock(mutex);
  if (pools_owner == 0) pools_owner = ::getpid();
  auto& pool = (*pools)[path];
  if (pool == nullptr) pool = new WorkerPool(path);
  return *pool;
}

std::string folder_of(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return {};
  std::string s = resolved;
  const auto slash = s.rfind('/');
  return slash == std::string::npos ? std::string() : s.substr(0, slash);
}

}  // namespace

void set_compile_worker_idle_seconds(double seconds) { idle_seconds = seconds; }

std::string find_compile_worker() {
  std::vector<std::string> folders;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&find_compile_worker), &info) != 0 && info.dli_fname != nullptr &&
      *info.dli_fname != '\0')
    folders.push_back(folder_of(info.dli_fname));
  folders.push_back(folder_of("/proc/self/exe"));  // linked statically into an executable
  for (const auto& folder : folders) {
    if (folder.empty()) continue;
    for (const char* relative : {"", "/..", "/../libexec/kvtune", "/../../libexec/kvtune"}) {
      const std::string candidate = folder + relative + "/kvtune-compile-worker";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return {};
}

CompileResult compile_in_worker(const std::string& worker, const CompileRequest& request) {
  if (worker.empty() || (pools_owner != 0 && pools_owner != ::getpid())) return nvrtc_compile(request);
  return pool_for(worker).compile(request);
}

WorkerPoolStats compile_worker_stats(const std::string& worker) {
  if (worker.empty() || (pools_owner != 0 && pools_owner != ::getpid())) return WorkerPoolStats{};
  return pool_for(worker).stats();
}

int compile_worker_main(int fd) {
  std::vector<std::uint8_t> frame;
  for (;;) {
    const int r = read_frame(fd, frame);
    if (r == 0) return 0;
    if (r < 0) return 1;
    json answer = {{"protocol", kProtocol}, {"nvrtc", nvrtc_version()}};
    try {
      const json q = json::from_msgpack(frame);
      CompileRequest request;
      request.program_name = q.at("program").get<std::string>();
      request.source = q.at("source").get_ref<const std::string&>();
      for (const auto& h : q.at("headers"))
        request.headers.push_back(HeaderSource{h.at(0).get<std::string>(), h.at(1).get_ref<const std::string&>()});
      request.name_expressions = q.at("names").get<std::vector<std::string>>();
      request.arch = q.at("arch").get<std::string>();
      request.extra_options = q.at("options").get<std::vector<std::string>>();
      CompileResult result = nvrtc_compile(request);
      answer["ok"] = true;
      answer["cubin"] = json::binary(std::vector<std::uint8_t>(result.cubin.begin(), result.cubin.end()));
      answer["lowered"] = result.lowered_names;
      answer["log"] = result.log;
      answer["seconds"] = result.seconds;
    } catch (const CompileError& e) {
      // CompileError appends the log to its cause; the parent rebuilds it from the parts.
      std::string cause = e.cause();
      if (!e.log().empty()) cause.resize(cause.size() - e.log().size() - std::string("\n--- NVRTC log ---\n").size());
      answer["ok"] = false;
      answer["error"] = {{"kind", "compile"}, {"context", context_json(e.context())}, {"cause", cause},
                         {"log", e.log()},    {"options", e.options()},                {"names", e.name_expressions()}};
    } catch (const Error& e) {
      answer["ok"] = false;
      answer["error"] = e.cause().empty() ? json{{"kind", "error"}, {"what", e.what()}}
                                          : json{{"kind", "error"}, {"context", context_json(e.context())},
                                                 {"cause", e.cause()}};
    } catch (const std::exception& e) {
      answer["ok"] = false;
      answer["error"] = {{"kind", "error"}, {"what", std::string("compile worker: ") + e.what()}};
    }
    if (!write_frame(fd, json::to_msgpack(answer))) return 1;
  }
}

}  // namespace kvtune::detail
