#pragma once
// Compiling many variants in CPU tests: variants are grouped many to an NVRTC program (the front
// end runs once per program) and the programs compiled on two threads.
//
// KVTUNE_TEST_NVRTC_EVERY=<k> compiles only every k-th program (the first always) and counts the
// kernels of the others as left out: tests/run_all.sh's release stage sets 4 and its ASan stage 8
// (NVRTC is not instrumented); its sweeps stage compiles them all.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/nvrtc.h"

namespace kvtune::test {

/// Adds `requests` (same source and arch; one name expression each, or a phased variant's one per
/// phase) to `batches`, `per_batch` requests to a program.
inline void add_batched(std::vector<detail::CompileRequest>& batches, const std::vector<detail::CompileRequest>& requests,
                        std::size_t per_batch) {
  for (std::size_t i = 0; i < requests.size(); i += per_batch) {
    detail::CompileRequest batch = requests[i];
    for (std::size_t j = i + 1; j < std::min(requests.size(), i + per_batch); ++j)
      for (const auto& name : requests[j].name_expressions) batch.name_expressions.push_back(name);
    batches.push_back(std::move(batch));
  }
}

struct BatchResults {
  std::vector<std::string> failures;  // per batch, empty when it compiled
  std::size_t compiled = 0;           // kernels compiled in total
  std::size_t left_out = 0;           // kernels of the programs KVTUNE_TEST_NVRTC_EVERY left out
};

inline std::size_t nvrtc_every() {
  const char* env = std::getenv("KVTUNE_TEST_NVRTC_EVERY");
  const long k = env ? std::strtol(env, nullptr, 10) : 1;
  return k > 1 ? std::size_t(k) : 1;
}

inline BatchResults compile_batches(const std::vector<detail::CompileRequest>& batches) {
  BatchResults r;
  r.failures.resize(batches.size());
  std::vector<std::size_t> counts(batches.size(), 0);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t b = next++; b < batches.size(); b = next++) {
      if (b % nvrtc_every() != 0) continue;
      try {
        counts[b] = detail::nvrtc_compile(batches[b]).lowered_names.size();
      } catch (const std::exception& e) {
        r.failures[b] = std::string(e.what()).substr(0, 4000);
      }
    }
  };
  std::thread helper(worker);
  worker();
  helper.join();
  for (std::size_t c : counts) r.compiled += c;
  for (std::size_t b = 0; b < batches.size(); ++b)
    if (b % nvrtc_every() != 0) r.left_out += batches[b].name_expressions.size();
  return r;
}

/// Compiles `batches` (add_batched); every batch must compile and `expected` kernels come out,
/// compiled or left out. Returns how many were compiled.
inline std::size_t check_compiled(const std::vector<detail::CompileRequest>& batches, std::size_t expected) {
  const auto results = compile_batches(batches);
  for (const auto& failure : results.failures) {
    INFO(failure);
    CHECK(failure.empty());
  }
  CHECK(results.compiled + results.left_out == expected);
  return results.compiled;
}

}  // namespace kvtune::test
