#pragma once
// Host loops over independent items spread over the cores: the tuning harnesses' float64 references
// and input generation, which a tuning run waits for (a 1 x 4096 x 16384 states problem's took 4.4-6.4
// s on one core of an H200 host, bench/NOTES.md, "harness on all cores").

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace kvtune::detail {

/// Runs fn(begin, end) over contiguous slices of [0, n), one a hardware thread (the calling
/// thread takes the first), slices of at least `grain` items; returns when all are done and
/// rethrows the first exception a slice threw. fn must be safe to run on several threads at once.
template <class F>
void parallel_for(std::int64_t n, F&& fn, std::int64_t grain = 1) {
  if (n <= 0) return;
  const std::int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t slices = std::clamp<std::int64_t>(n / std::max<std::int64_t>(1, grain), 1, cores);
  if (slices == 1) {
    fn(std::int64_t(0), n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(slices));
  const auto run = [&](std::int64_t s) {
    try {
      fn(n * s / slices, n * (s + 1) / slices);
    } catch (...) {
      errors[std::size_t(s)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(std::size_t(slices - 1));
  for (std::int64_t s = 1; s < slices; ++s) threads.emplace_back(run, s);
  run(0);
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace kvtune::detail
