#pragma once
// Progress of a multi-problem run. On a terminal: finished problems scroll as lines and one bar
// stays at the bottom (problems done, the problems in flight with their variants, ETA). Elsewhere:
// only the finished-problem lines, one per problem, so that logs stay readable.

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace kvtune::tools {

class Progress {
 public:
  /// `total` problems; `bar` draws the bar (stdout is a terminal); `quiet` prints nothing at all.
  Progress(int total, bool bar, bool quiet, std::FILE* out = stdout);
  ~Progress();

  /// A worker (one per device) starts a problem of `variants` variants (0: not known yet).
  void start(int worker, const std::string& what, long variants);
  /// A candidate of the worker's problem finished: `done` of `total` (the library's count for this
  /// tuning, within its budget); `last` says which and how it went ("tpr=32,...: 12.30 us").
  void candidate(int worker, long done, long total, const std::string& last);
  /// The worker's problem finished; `line` is printed; `skipped` problems do not count towards
  /// the ETA (they take no time).
  void finish(int worker, const std::string& line, bool skipped);

  /// Prints a line that is not a problem's (a worker's trouble), above the bar.
  void note(const std::string& line);

  /// Clears the bar (before printing a summary).
  void close();

 private:
  struct InFlight {
    std::string what;
    long variants = 0;
    long done = 0;
    std::string last;
  };
  void draw(bool force);
  std::string bar_text() const;

  std::mutex mutex_;
  std::FILE* out_;
  int total_;
  bool bar_;
  bool quiet_;
  bool bar_visible_ = false;
  int finished_ = 0;
  int skipped_ = 0;
  std::map<int, InFlight> in_flight_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace kvtune::tools
