// The production tuner's targets, measured on one GPU (bench/run_tuner_targets.sh runs it):
//   dispatch  host time per cached call vs. a bare launch of the same kernel (median over 100k
//             calls, in batches short enough that the launch queue never fills)
//   warm      first call in a fresh process with a populated cache (a child process of this one)
//   cold      wall time of the first call of a problem in a fresh context: tuning from nothing,
//             budgeted (the default) and exhaustive
//   repeat    one problem tuned 5 times from scratch: the winners and their times
// Prints a Markdown report on stdout and writes the numbers as JSON to argv[1]; with
// --dispatch-only OUT_JSON, only the dispatch row.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_tuning.h"
#include "kvtune/kvtune.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/module.h"

using namespace kvtune;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Device {
  std::vector<void*> ptrs;
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, bytes), "cudaMalloc");
    detail::cuda_check(cudaMemset(p, 0x3c, bytes), "cudaMemset");
    ptrs.push_back(p);
    return p;
  }
  ~Device() {
    for (void* p : ptrs) cudaFree(p);
  }
};

NormalizeArgs norm_args(Device& mem, std::int64_t rows, std::int64_t cols, DType dtype, NormMode mode) {
  NormalizeArgs a;
  const std::size_t bytes = std::size_t(rows * cols) * (dtype == DType::f32 ? 4 : 2);
  a.x = mem.alloc(bytes);
  a.y = mem.alloc(bytes);
  a.rows = rows, a.cols = cols, a.dtype = dtype, a.mode = mode;
  return a;
}

DwConvArgs dw_args(Device& mem, DwDirection dir, DwLayout layout, DType dtype, std::int64_t n, std::int64_t c,
                   std::int64_t h, std::int64_t w, int k) {
  DwConvArgs a;
  a.direction = dir, a.layout = layout, a.dtype = dtype, a.n = n, a.c = c, a.h = h, a.w = w;
  a.kernel_w = k;
  if (h > 1) {
    a.kernel_h = k;
    a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = k / 2;
  } else {
    a.causal = true;
  }
  const std::size_t elems = std::size_t(n * c * h * w) * (dtype == DType::f32 ? 4 : 2);
  void* x = mem.alloc(elems);
  void* y = mem.alloc(elems);
  void* weight = mem.alloc(std::size_t(c * k * k) * 4);
  if (dir == DwDirection::forward) a.x = x, a.y = y, a.weight = weight;
  else if (dir == DwDirection::backward_data) a.dy = x, a.dx = y, a.weight = weight;
  else a.x = x, a.dy = y, a.dweight = weight;
  return a;
}

ContextOptions fresh(Policy policy, const std::string& cache, int budget) {
  ContextOptions o;
  o.policy = policy;
  o.cache_path = cache;
  o.budget_variants = budget;
  return o;
}

// Host time per call of `call`, median over batches of `batch` calls with a sync between batches.
template <class Call>
double host_us_per_call(Call&& call, cudaStream_t stream, int total, int batch) {
  std::vector<double> per_call;
  for (int done = 0; done < total; done += batch) {
    const auto t = Clock::now();
    for (int i = 0; i < batch; ++i) call();
    per_call.push_back(since(t) * 1e6 / batch);
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  return median(per_call);
}

nlohmann::json dispatch(const std::string& dir) {
  const std::string cache = dir + "/dispatch.sqlite";
  Device mem;
  auto a = norm_args(mem, 64, 128, DType::f32, NormMode::layernorm);
  cudaStream_t stream = nullptr;
  detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Context ctx(fresh(Policy::tune, cache, 40));
  ctx.normalize(a, stream);  // tunes and stores
  // The same kernel, launched bare: the stored winner's cubin, loaded once.
  const auto problem = normalize::make_problem(a);
  auto store = cache::Store::open(cache);
  const auto winner = store->find_winner(problem.key(), detail::read_fingerprint(0).id(), normalize::template_hash());
  if (!winner) throw Error("dispatch: no stored winner for " + problem.key() + " in " + cache);
  const auto binary = store->find_binary(winner->binary_hash);
  if (!binary) throw Error("dispatch: the winner's binary " + winner->binary_hash + " is not in " + cache);
  const auto config = normalize::Config::from_json(nlohmann::json::parse(winner->config_json));
  auto kernel = detail::LoadedKernel::load(binary->image, binary->lowered_name, normalize::kernel_phases(problem, config));
  const normalize::LaunchArgs launch{a.x, a.y, nullptr, nullptr, nullptr, nullptr, a.rows, a.cols, a.cols, a.eps, 0};
  const int total = 100000, batch = 200;
  for (int warm = 0; warm < 3; ++warm) {
    host_us_per_call([&] { ctx.normalize(a, stream); }, stream, 20000, batch);
    host_us_per_call([&] { normalize::launch(kernel, problem, config, launch, stream); }, stream, 20000, batch);
  }
  const double tuned = host_us_per_call([&] { ctx.normalize(a, stream); }, stream, total, batch);
  const double bare = host_us_per_call([&] { normalize::launch(kernel, problem, config, launch, stream); }, stream,
                                       total, batch);
  // The dispatch path alone (validation, key, table lookup), without the launch.
  const double variant =
      host_us_per_call([&] { (void)ctx.normalize_variant(a, stream); }, stream, total, batch);
  cudaStreamDestroy(stream);
  return {{"problem", problem.key()},  {"variant", winner->label}, {"calls", total},
          {"kvtune_us", tuned},        {"bare_launch_us", bare},  {"overhead_us", tuned - bare},
          {"lookup_only_us", variant}};
}

// The child side of the warm-start measurement: a fresh process, a populated cache.
int warm_child(const std::string& cache) {
  const auto start = Clock::now();
  detail::cuda_check(cudaFree(nullptr), "cudaFree (CUDA init)");
  const double init = since(start);
  Device mem;
  auto a = norm_args(mem, 65536, 1024, DType::f32, NormMode::layernorm);
  detail::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const auto first = Clock::now();
  Context ctx(fresh(Policy::tune, cache, 40));
  ctx.normalize(a);
  detail::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double first_call = since(first);
  const Counters n = ctx.counters();
  std::printf("%s\n", nlohmann::json{{"cuda_init_ms", init * 1e3},
                                     {"first_call_ms", first_call * 1e3},
                                     {"compiles", n.compiles},
                                     {"tunes", n.tunes},
                                     {"cache_hits", n.cache_hits}}
                          .dump()
                          .c_str());
  return 0;
}

nlohmann::json warm(const std::string& dir, const std::string& self) {
  const std::string cache = dir + "/warm.sqlite";
  {
    Device mem;
    Context ctx(fresh(Policy::tune, cache, 40));
    ctx.normalize(norm_args(mem, 65536, 1024, DType::f32, NormMode::layernorm));
  }
  nlohmann::json runs = nlohmann::json::array();
  for (int i = 0; i < 3; ++i) {
    FILE* pipe = popen((self + " --warm-child " + cache).c_str(), "r");
    char line[4096] = {};
    const bool got = pipe != nullptr && std::fgets(line, sizeof line, pipe) != nullptr;
    if (pipe != nullptr) pclose(pipe);
    if (got) runs.push_back(nlohmann::json::parse(line));
  }
  return runs;
}

nlohmann::json cold(int budget) {
  nlohmann::json out = nlohmann::json::array();
  Device mem;
  struct Case {
    std::string name;
    std::function<void(Context&)> call;
  };
  std::vector<Case> cases;
  const auto norm = [&](std::int64_t rows, std::int64_t cols, DType d, NormMode m) {
    auto a = norm_args(mem, rows, cols, d, m);
    cases.push_back({normalize::make_problem(a).key(), [a](Context& c) { c.normalize(a); }});
  };
  const auto dw = [&](DwDirection dir, DwLayout l, DType d, std::int64_t n, std::int64_t c, std::int64_t h,
                      std::int64_t w, int k) {
    auto a = dw_args(mem, dir, l, d, n, c, h, w, k);
    cases.push_back({dwconv::make_problem(a).key(), [a](Context& ctx) { ctx.dwconv(a); }});
  };
  norm(16384, 1024, DType::f32, NormMode::layernorm);
  norm(4096, 78, DType::f32, NormMode::standardize);
  norm(32768, 4096, DType::bf16, NormMode::rmsnorm);
  norm(100000, 37, DType::f32, NormMode::standardize);
  dw(DwDirection::forward, DwLayout::nchw, DType::f32, 32, 96, 56, 56, 3);
  dw(DwDirection::forward, DwLayout::ncl, DType::bf16, 8, 2048, 1, 2048, 4);
  dw(DwDirection::backward_data, DwLayout::nhwc, DType::f32, 32, 192, 28, 28, 7);
  dw(DwDirection::backward_weight, DwLayout::nchw, DType::f32, 32, 192, 28, 28, 3);
  for (const auto& c : cases) {
    Context ctx(fresh(Policy::tune, "", budget));
    const auto t = Clock::now();
    c.call(ctx);
    detail::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const double seconds = since(t);
    out.push_back({{"problem", c.name},
                   {"seconds", seconds},
                   {"variants_timed", ctx.counters().variants_timed + ctx.counters().variants_rejected},
                   {"compiles", ctx.counters().compiles}});
  }
  return out;
}

nlohmann::json repeat() {
  nlohmann::json out = nlohmann::json::array();
  Device mem;
  const auto n = norm_args(mem, 16384, 1024, DType::f32, NormMode::layernorm);
  const auto d = dw_args(mem, DwDirection::forward, DwLayout::nchw, DType::f32, 32, 96, 56, 56, 3);
  for (const char* which : {"normalize", "dwconv"}) {
    nlohmann::json runs = nlohmann::json::array();
    for (int i = 0; i < 5; ++i) {
      const std::string cache = fmt::format("/tmp/kvtune-repeat-{}-{}-{}.sqlite", ::getpid(), which, i);
      std::string label, key;
      {
        Context ctx(fresh(Policy::tune, cache, 40));
        if (std::string(which) == "normalize") {
          label = ctx.normalize_variant(n);
          key = normalize::make_problem(n).key();
        } else {
          label = ctx.dwconv_variant(d);
          key = dwconv::make_problem(d).key();
        }
      }
      auto store = cache::Store::open(cache);
      const auto runs_of = store->tuning_runs(key);
      const auto& run = runs_of.back();
      runs.push_back({{"winner", label},
                      {"winner_ms", run.winner_ms},
                      {"spread", nlohmann::json::parse(run.json).value("winner_spread", 0.0)},
                      {"sm_clock_mhz", run.sm_clock_mhz},
                      {"temperature_c", run.temperature_c}});
      std::filesystem::remove(cache);
    }
    out.push_back({{"op", which}, {"runs", runs}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "--warm-child") return warm_child(argv[2]);
    // --dispatch-only OUT_JSON: the dispatch row alone (a before/after comparison of the hot path).
    if (argc == 3 && std::string(argv[1]) == "--dispatch-only") {
      const std::string out = argv[2];
      const std::string where = std::filesystem::path(out).parent_path().string();
      const nlohmann::json d = dispatch(where.empty() ? "." : where);
      std::ofstream(out) << d.dump(2) << "\n";
      std::printf("dispatch: kvtune %.3f us, bare launch %.3f us, overhead %.3f us, lookup alone %.3f us\n",
                  d["kvtune_us"].get<double>(), d["bare_launch_us"].get<double>(), d["overhead_us"].get<double>(),
                  d["lookup_only_us"].get<double>());
      return 0;
    }
    if (argc != 2) {
      std::fprintf(stderr, "usage: %s OUT_JSON | --dispatch-only OUT_JSON\n", argv[0]);
      return 2;
    }
    const std::string dir = std::filesystem::path(argv[1]).parent_path().string();
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const auto fp = detail::read_fingerprint(0);
    nlohmann::json report;
    report["device"] = fp.name;
    report["dispatch"] = dispatch(dir.empty() ? "." : dir);
    std::fprintf(stderr, "dispatch done\n");
    report["warm"] = warm(dir.empty() ? "." : dir, self);
    std::fprintf(stderr, "warm done\n");
    report["cold_budgeted"] = cold(ContextOptions{}.budget_variants);
    std::fprintf(stderr, "cold budgeted done\n");
    report["cold_exhaustive"] = cold(0);
    std::fprintf(stderr, "cold exhaustive done\n");
    report["repeat"] = repeat();
    std::ofstream(argv[1]) << report.dump(2) << "\n";

    const auto& d = report["dispatch"];
    std::printf("# Tuner targets on %s\n\n", fp.name.c_str());
    std::printf("| target | measured | goal |\n|---|---|---|\n");
    std::printf("| cached dispatch overhead over a bare launch | %.2f us (%.2f vs %.2f us per call; lookup alone %.2f us) | <= 1 us |\n",
                d["overhead_us"].get<double>(), d["kvtune_us"].get<double>(), d["bare_launch_us"].get<double>(),
                d["lookup_only_us"].get<double>());
    for (const auto& w : report["warm"])
      std::printf("| warm start: first call in a fresh process | %.1f ms, %d compilations (CUDA init %.0f ms, not counted) | <= 20 ms, 0 |\n",
                  w["first_call_ms"].get<double>(), w["compiles"].get<int>(), w["cuda_init_ms"].get<double>());
    for (std::size_t i = 0; i < report["cold_budgeted"].size(); ++i) {
      const auto& b = report["cold_budgeted"][i];
      const auto& e = report["cold_exhaustive"][i];
      const bool is_norm = b["problem"].get<std::string>().rfind("normalize", 0) == 0;
      std::printf("| cold tuning %s | %.2f s budgeted (%d variants), %.2f s exhaustive (%d) | <= %d s |\n",
                  b["problem"].get<std::string>().c_str(), b["seconds"].get<double>(), b["variants_timed"].get<int>(),
                  e["seconds"].get<double>(), e["variants_timed"].get<int>(), is_norm ? 2 : 5);
    }
    for (const auto& r : report["repeat"]) {
      std::string line;
      for (const auto& run : r["runs"])
        line += fmt::format("{} {:.4f} ms; ", run["winner"].get<std::string>(), run["winner_ms"].get<double>());
      std::printf("| 5 tunings of one %s problem | %s | same winner or within noise |\n",
                  r["op"].get<std::string>().c_str(), line.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune_tuner_targets: %s\n", e.what());
    return 1;
  }
  return 0;
}
