#pragma once
// NVRTC compiles in helper processes (kvtune-compile-worker). Threads of one process do not scale
// past a few cores: on a 16-core H200 host, 16 threads compiled 30 normalize programs a second at
// 425 % CPU, while 16 processes compiled 73 (bench/NOTES.md, "compiles in worker processes"). A
// tuning run's compiles therefore go to a pool of worker processes, one request at a time each,
// over a socket (MessagePack frames). The pool is per process and per worker path; workers start
// on demand, are reused across tuning runs and exit after kIdleSeconds without work (or when this
// process exits: they read end-of-file). Whatever goes wrong with a worker (it cannot start, dies,
// answers garbage), the request is compiled in this process instead, so a worker never changes a
// result, only where the time is spent.

#include <string>
#include <vector>

#include "core/nvrtc.h"

namespace kvtune::detail {

/// Seconds an idle worker process lives before it is stopped (tests set less).
constexpr double kIdleSeconds = 10;
void set_compile_worker_idle_seconds(double seconds);

/// The worker executable next to this library (or the executable it is linked into): the same
/// folder, its parent, or ../libexec/kvtune/; "" when there is none.
std::string find_compile_worker();

/// Compiles `request` in a worker process started from `worker` (an executable path), or in this
/// process when `worker` is empty, when this process was forked from the one that started the
/// pool, or when the worker fails. Throws what nvrtc_compile throws.
CompileResult compile_in_worker(const std::string& worker, const CompileRequest& request);

/// Worker processes started from `worker` now alive, and how many requests fell back to this
/// process since start (tests and logs).
struct WorkerPoolStats {
  int alive = 0;
  int started = 0;
  int compiled = 0;
  int fell_back = 0;
  std::vector<int> idle_pids;
};
WorkerPoolStats compile_worker_stats(const std::string& worker);

/// The worker process's loop: reads requests from `fd` until end-of-file, answers each.
/// Returns the exit status (0 at end-of-file, 1 on a broken frame).
int compile_worker_main(int fd);

}  // namespace kvtune::detail
