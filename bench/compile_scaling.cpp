// How NVRTC compiles scale with the cores: the tuning variants of one problem compiled on T threads
// of this process, or on T threads each handing its compile to a compile worker process
// (core/compile_workers.h). No GPU needed.
//   kvtune_compile_scaling --key KEY [--programs N] [--threads T] [--workers] [--each] [--source DIR]
//                          [--label L] [--nvrtc-option O]...
// Takes N of the problem's tuning variants evenly over its space (the family's enumeration order),
// compiles one first (NVRTC's and the workers' start-up, not counted), then all N; prints the wall
// time, programs a second, and the mean and largest time of one compile as seen by its thread.
// --each: every distinct program once (variants of one compile hash are one program), then each
// one's compile time, the family's compile cost estimate and the label of its first variant,
// slowest first. --source DIR: the program and the headers DIR holds replace the built-in templates
// (bench/source_override.h), to see what a template change does to compile times. --label L: only
// the tuning variant labelled L. --nvrtc-option O (repeatable): O added to every program's options,
// to see what an NVRTC or ptxas option does to a program's compile time. --arch compute_90: PTX only,
// to part the front end's time from ptxas's. --output FILE: the first program's cubin or PTX.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/compile_workers.h"
#include "bench/source_override.h"
#include "core/nvrtc.h"
#include "kvtune/error.h"
#include "lib/src/families.h"

using namespace kvtune;

namespace {

using Clock = std::chrono::steady_clock;

struct Program {
  std::string label;  // the first variant's
  detail::CompileRequest request;
  double compile_cost = 0;  // the family's estimate (tuner::Candidate::compile_cost)
};

template <class F>
std::vector<Program> requests(const std::string& key, int programs, bool each, const std::string& source_dir,
                              const std::string& label, const std::vector<std::string>& options,
                              const std::string& arch) {
  const auto problem = F::from_key(key);
  if (!problem) throw Error("not a " + std::string(F::kOp) + " problem key: " + key);
  const auto candidates = F::candidates(*problem, detail::tuning_configs<F>(*problem, 9), arch);
  std::vector<Program> out;
  const auto program = [&](const auto& c) {
    Program p{c.label, c.request, c.compile_cost};
    if (!source_dir.empty()) bench::use_sources(p.request, source_dir);
    p.request.extra_options.insert(p.request.extra_options.end(), options.begin(), options.end());
    return p;
  };
  if (each || !label.empty()) {
    std::vector<std::string> seen;
    for (const auto& c : candidates) {
      if (!label.empty() && c.label != label) continue;
      const auto hash = detail::compile_hash(c.request);
      if (std::find(seen.begin(), seen.end(), hash) != seen.end()) continue;
      seen.push_back(hash);
      out.push_back(program(c));
    }
    return out;
  }
  const int n = std::min<int>(programs, int(candidates.size()));
  for (int i = 0; i < n; ++i) {
    out.push_back(program(candidates[std::size_t(i) * candidates.size() / n]));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtune_compile_scaling: NVRTC compiles on threads of one process or in compile workers"};
  std::string key;
  int programs = 48, threads = int(std::max(1u, std::thread::hardware_concurrency()));
  bool workers = false, each = false;
  std::string source_dir, label, arch = "sm_90", output;
  std::vector<std::string> options;
  app.add_option("--key", key, "problem key (normalize,... or dwconv,...)")->required();
  app.add_option("--programs", programs, "variants to compile")->check(CLI::Range(1, 100000));
  app.add_option("--threads", threads, "compiling threads")->check(CLI::Range(1, 1024));
  app.add_flag("--workers", workers, "each thread compiles in a compile worker process");
  app.add_flag("--each", each, "every distinct program of the space once, each one's time printed (slowest first)");
  app.add_option("--source", source_dir, "compile DIR's templates instead of the built-in ones (bench/source_override.h)");
  app.add_option("--arch", arch, "target (default sm_90); compute_90 stops at PTX (no ptxas)")->capture_default_str();
  app.add_option("--output", output, "write the first program's cubin (PTX for compute_XX) to FILE");
  app.add_option("--label", label, "only the variant with this label (its program once)");
  app.add_option("--nvrtc-option", options, "an NVRTC option added to every program's (repeatable), e.g. --nvrtc-option=-Xptxas=-O2")
      ->allow_extra_args(false);
  CLI11_PARSE(app, argc, argv);
  try {
    const auto reqs = key.rfind("normalize", 0) == 0 ? requests<detail::NormalizeFamily>(key, programs, each, source_dir, label, options, arch)
                                                      : requests<detail::DwConvFamily>(key, programs, each, source_dir, label, options, arch);
    if (reqs.empty()) throw Error("no tuning variant of this problem is labelled " + label);
    const std::string worker = workers ? detail::find_compile_worker() : std::string();
    if (workers && worker.empty()) throw Error("no kvtune-compile-worker beside this executable");
    // Start-up outside the measurement: NVRTC's first compile, and one worker per thread.
    std::vector<std::thread> warm;
    for (int t = 0; t < (workers ? threads : 1); ++t) warm.emplace_back([&] { detail::compile_in_worker(worker, reqs[0].request); });
    for (auto& t : warm) t.join();
    std::atomic<std::size_t> next{0};
    std::string first_binary;
    std::vector<double> seconds(reqs.size());
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (std::size_t i = next++; i < reqs.size(); i = next++) {
          const auto s = Clock::now();
          auto result = detail::compile_in_worker(worker, reqs[i].request);
          if (i == 0 && !output.empty()) first_binary = std::move(result.cubin);
          seconds[i] = std::chrono::duration<double>(Clock::now() - s).count();
        }
      });
    for (auto& t : pool) t.join();
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    double sum = 0, most = 0;
    for (double s : seconds) sum += s, most = std::max(most, s);
    const auto stats = detail::compile_worker_stats(worker);
    std::printf("%zu programs, %d threads, %s: wall %.3f s, %.1f programs/s, one compile %.3f s mean, %.3f s max%s\n",
                reqs.size(), threads, workers ? "worker processes" : "this process", wall, double(reqs.size()) / wall,
                sum / double(reqs.size()), most,
                workers ? (", " + std::to_string(stats.started) + " workers, " + std::to_string(stats.fell_back) +
                           " compiled here after a worker failed").c_str()
                        : "");
    if (!output.empty()) std::ofstream(output, std::ios::binary) << first_binary;
    if (each) {
      std::vector<std::size_t> slowest(reqs.size());
      for (std::size_t i = 0; i < slowest.size(); ++i) slowest[i] = i;
      std::sort(slowest.begin(), slowest.end(), [&](std::size_t a, std::size_t b) { return seconds[a] > seconds[b]; });
      for (std::size_t i : slowest) std::printf("%8.3f s  cost %7.0f  %s\n", seconds[i], reqs[i].compile_cost, reqs[i].label.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune_compile_scaling: %s\n", e.what());
    return 1;
  }
  return 0;
}
