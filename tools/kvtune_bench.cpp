// kvtune-bench: times, on one GPU in one process, kvtune's tuned winner (public API), its heuristic
// variant, the seed designs, cuDNN, and a device-to-device copy of the same bytes, against the copy
// roofline and the f32 FMA rate measured in the same run; merges PyTorch peers from --peers files.
// Method and suites: docs/PERFORMANCE.md. Exit status: 0 ok, 1 no GPU or a failed run, 2 bad
// command line or peers file.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/normalize/normalize_tuning.h"
#include "kvtune/kvtune.h"
#include "core/device.h"
#include "core/nvrtc.h"
#include "tools/bench_cudnn.h"
#include "tools/bench_tensors.h"
#include "tools/bench_report.h"
#include "tools/bench_suite.h"
#include "tools/bench_timing.h"
#include "tools/ceilings.h"
#include "tuner/harness_support.h"

namespace kb = kvtune::bench;
using kb::Fill;
using kb::TensorSpec;
using kb::each_tensor;
using kb::element_bytes;
using kb::index_values;
using kvtune::DType;
using kvtune::DwDirection;

namespace {

struct Settings {
  std::vector<std::string> suites;
  bool quick = false;
  std::string cache;  // "" = in memory
  kb::TimingOptions timing;
  bool cudnn = true;
  int device = 0;
  // "held": every rotated set has its own outputs, written a whole rotation apart (the default);
  // "reused": the tensors a call writes are one copy shared by the sets, as PyTorch's caching
  // allocator hands each call the block its previous output freed, still in L2.
  std::string outputs = "held";
  std::size_t cudnn_workspace = std::size_t(512) << 20;
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return text;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw kvtune::Error(fmt::format("kvtune-bench: cannot write '{}'", path));
  out << text;
}

// Runs one timing, turning any failure into a "failed"/"unsupported" Timing (failed variants are data).
template <class F>
kb::Timing attempt(F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    cudaGetLastError();
    const std::string what = e.what();
    if (what.rfind("unsupported:", 0) == 0) return kb::Timing::failed(what.substr(13), "unsupported");
    return kb::Timing::failed(what);
  }
}

// Rotated sets of one problem's tensors (inputs and outputs), the shared ones once, and a
// device-to-device copy's source and destination per set.
struct Slots {
  std::vector<std::vector<void*>> sets;  // per set: every tensor's pointer, in each_tensor's order
  std::vector<kvtune::tuner::DeviceBuffer> memory;
  std::vector<kvtune::tuner::DeviceBuffer> copy_in, copy_out;
  std::size_t copy_bytes = 0;  // model bytes / 2: the copy of the same bytes
  int count = 0;
  double set_bytes = 0;
};

Slots make_slots(const kb::BenchProblem& p, const kvtune::detail::DeviceFingerprint& fp, const kb::SupportKernels& support,
                 bool reuse_outputs, cudaStream_t stream) {
  std::vector<TensorSpec> specs;
  kb::BenchCall call = p.call;
  std::visit(
      [&](auto& a) {
        each_tensor(a, [&](auto& field, TensorSpec s) {
          // A pointer to non-const is written by the call (an output, or a state updated in place).
          using Field = std::decay_t<decltype(field)>;
          if (reuse_outputs && !std::is_const_v<std::remove_pointer_t<Field>>) s.rotated = false;
          specs.push_back(s);
        });
      },
      call);
  const DType dtype = std::visit([](const auto& a) { return a.dtype; }, p.call);
  Slots s;
  s.copy_bytes = std::max<std::size_t>(std::size_t(p.model_bytes() / 2), 256);
  double set_bytes = 2.0 * double(s.copy_bytes);
  for (const auto& spec : specs)
    if (spec.rotated) set_bytes += double(spec.elements * std::size_t(spec.element_bytes));
  // Enough sets that one rotation exceeds twice the L2, within 60 % of free memory.
  std::size_t free_bytes = 0, total_bytes = 0;
  kb::check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  int count = int(std::clamp(std::ceil(2.0 * double(fp.l2_bytes) / set_bytes) + 1, 1.0, 64.0));
  while (count > 1 && double(count) * set_bytes > 0.6 * double(free_bytes)) --count;
  s.count = count;
  s.set_bytes = set_bytes;
  s.sets.assign(std::size_t(count), {});
  for (std::size_t t = 0; t < specs.size(); ++t) {
    const TensorSpec& spec = specs[t];
    const std::size_t bytes = std::max<std::size_t>(spec.elements * std::size_t(spec.element_bytes), 256);
    for (int i = 0; i < count; ++i) {
      if (!spec.rotated && i > 0) {
        s.sets[std::size_t(i)].push_back(s.sets[0][t]);
        continue;
      }
      s.memory.emplace_back(bytes);
      void* ptr = s.memory.back().get();
      s.sets[std::size_t(i)].push_back(ptr);
      if (spec.fill == Fill::values || spec.fill == Fill::floats) {
        support.fill(ptr, (long long)spec.elements, spec.fill == Fill::floats ? DType::f32 : dtype,
                     1000ull * unsigned(i + 1) + t, spec.offset, spec.scale, stream);
      } else {
        const auto values = index_values(spec.fill, spec.elements, p);
        kb::check(cudaMemcpyAsync(ptr, values.data(), values.size() * 4, cudaMemcpyHostToDevice, stream),
                  "copying an index tensor");
        kb::check(cudaStreamSynchronize(stream), "copying an index tensor");
      }
    }
  }
  for (int i = 0; i < count; ++i) {
    s.copy_in.emplace_back(s.copy_bytes);
    s.copy_out.emplace_back(s.copy_bytes);
    support.fill(s.copy_in.back().get(), (long long)(s.copy_bytes / 2), DType::f16, 77 + unsigned(i), 0.5f, 1.0f,
                 stream);
  }
  kb::check(cudaStreamSynchronize(stream), "filling the input buffers");
  return s;
}

// The call of `Args` on rotated set `slot`.
template <class Args>
Args bound(const kb::BenchProblem& p, const Slots& s, int slot) {
  Args a = std::get<Args>(p.call);
  std::size_t t = 0;
  each_tensor(a, [&](auto& field, const TensorSpec&) { kb::bind(field, s.sets[std::size_t(slot)][t++]); });
  return a;
}

// A seed design compiled and loaded outside the Context, launched through the family's launch().
kvtune::detail::LoadedKernel load_variant(const kvtune::detail::CompileRequest& request, std::size_t dynamic_smem) {
  const auto compiled = kvtune::detail::nvrtc_compile(request);
  auto kernel = kvtune::detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(0),
                                                   static_cast<int>(request.name_expressions.size()));
  kernel.allow_dynamic_smem(dynamic_smem);
  return kernel;
}

// The public API's two calls of each argument type: the variant it chose (tuning or loading, outside
// any timing) and the call.
std::string variant(kvtune::Context& c, const kvtune::NormalizeArgs& a, cudaStream_t s) {
  return c.normalize_variant(a, s);
}
std::string variant(kvtune::Context& c, const kvtune::NormalizeBackwardArgs& a, cudaStream_t s) {
  return c.normalize_backward_variant(a, s);
}
std::string variant(kvtune::Context& c, const kvtune::DwConvArgs& a, cudaStream_t s) { return c.dwconv_variant(a, s); }
std::string variant(kvtune::Context& c, const kvtune::DwConvDecodeArgs& a, cudaStream_t s) {
  return c.dwconv_decode_variant(a, s);
}
void call(kvtune::Context& c, const kvtune::NormalizeArgs& a, cudaStream_t s) { c.normalize(a, s); }
void call(kvtune::Context& c, const kvtune::NormalizeBackwardArgs& a, cudaStream_t s) { c.normalize_backward(a, s); }
void call(kvtune::Context& c, const kvtune::DwConvArgs& a, cudaStream_t s) { c.dwconv(a, s); }
void call(kvtune::Context& c, const kvtune::DwConvDecodeArgs& a, cudaStream_t s) { c.dwconv_decode(a, s); }

// The seed designs and cuDNN, where the call has them.
void time_others(kb::ProblemResult& r, const kvtune::NormalizeArgs&, const Slots& s,
                 const kvtune::detail::DeviceFingerprint& fp, cudaStream_t stream, const Settings& settings) {
  const auto args = [&](int slot) { return bound<kvtune::NormalizeArgs>(r.problem, s, slot); };
  kb::Timing seed = attempt([&] {
    const auto problem = kvtune::normalize::make_problem(args(0));
    if (problem.residual)  // its LaunchArgs below carry no residual: the kernel would read a null one
      throw std::runtime_error("unsupported: the seed design has no residual add");
    const auto config = kvtune::normalize::seed_config(problem);
    std::string why;
    if (!kvtune::normalize::is_runnable(problem, config, &why))
      throw std::runtime_error("unsupported: the seed design cannot run this problem: " + why);
    const auto kernel = load_variant(
        kvtune::normalize::compile_request(problem, config, fp.arch()),
        kvtune::normalize::geometry(problem, config, 1).dynamic_smem);
    kb::Timing t = kb::measure(
        [&](int slot, cudaStream_t st) {
          const auto a = args(slot);
          const kvtune::normalize::LaunchArgs launch{a.x,    a.y,    a.gamma, a.beta, a.mean, a.rstd,
                                                     a.rows, a.cols, a.cols,  a.eps,  a.ddof};
          kb::check(kvtune::normalize::launch(kernel, problem, config, launch, st), "seed launch");
        },
        s.count, stream, settings.timing);
    t.label = config.label();
    return t;
  });
  r.seeds.emplace_back("seed (block per row, Welford)", seed);
}

void time_others(kb::ProblemResult& r, const kvtune::DwConvArgs& plain, const Slots& s,
                 const kvtune::detail::DeviceFingerprint& fp, cudaStream_t stream, const Settings& settings) {
  const auto args = [&](int slot) { return bound<kvtune::DwConvArgs>(r.problem, s, slot); };
  const bool states = kvtune::dwconv_states::uses_states(plain);
  const bool fused_backward =
      plain.activation != kvtune::Activation::none && plain.direction != DwDirection::forward;
  // The seeds are one plain kernel: not the work of a call with states or a backward activation.
  if (!states && !fused_backward) {
    const auto problem = kvtune::dwconv::make_problem(args(0));
    for (const auto& [name, config] : kvtune::dwconv::seed_configs(problem)) {
      const auto& seed_config = config;
      kb::Timing t = attempt([&] {
        const auto geometry = kvtune::dwconv::geometry(problem, seed_config, plain.n);
        const auto kernel =
            load_variant(kvtune::dwconv::compile_request(problem, seed_config, fp.arch()), geometry.dynamic_smem);
        kvtune::tuner::DeviceBuffer workspace(std::max<std::size_t>(geometry.workspace_bytes, 256));
        kb::Timing timing = kb::measure(
            [&](int slot, cudaStream_t st) {
              auto launch = kvtune::dwconv::launch_args(args(slot));
              launch.workspace = geometry.workspace_bytes > 0 ? workspace.get() : nullptr;
              kb::check(kvtune::dwconv::launch(kernel, problem, seed_config, launch, st), "seed launch");
            },
            s.count, stream, settings.timing);
        timing.label = seed_config.label();
        return timing;
      });
      r.seeds.emplace_back(name, t);
    }
  }
  if (!settings.cudnn) {
    r.cudnn = kb::Timing::failed("--no-cudnn", "skipped");
    return;
  }
  if (plain.bias != nullptr || plain.activation != kvtune::Activation::none || states) {
    r.cudnn = kb::Timing::failed("the cuDNN peer times the convolution alone (no bias, activation or states)",
                                 "unsupported");
    return;
  }
  r.cudnn = attempt([&] {
    const auto tensors = [&](int slot) {
      const auto a = args(slot);
      switch (a.direction) {
        case DwDirection::forward: return kb::DwTensors{a.x, a.weight, a.y};
        case DwDirection::backward_data: return kb::DwTensors{a.dy, a.weight, a.dx};
        case DwDirection::backward_weight: break;
      }
      return kb::DwTensors{a.x, a.dy, a.dweight};
    };
    kb::CudnnDepthwise conv(plain, stream, tensors(0), settings.cudnn_workspace);
    kb::Timing t = kb::measure([&](int slot, cudaStream_t) { conv.run(tensors(slot)); }, s.count, stream, settings.timing);
    t.label = conv.algorithm();
    return t;
  });
}

// The backward has no seed design (the seed kernel is forward only) and cuDNN no normalization:
// PyTorch's backward is its peer.
void time_others(kb::ProblemResult&, const kvtune::NormalizeBackwardArgs&, const Slots&,
                 const kvtune::detail::DeviceFingerprint&, cudaStream_t, const Settings&) {}

// The decode step has no seed study and no cuDNN counterpart: PyTorch's composition is its peer.
void time_others(kb::ProblemResult&, const kvtune::DwConvDecodeArgs&, const Slots&, const kvtune::detail::DeviceFingerprint&,
                 cudaStream_t, const Settings&) {}

// kvtune's tuned winner and its heuristic through the public API, then the call's other designs.
template <class Args>
void time_call(kb::ProblemResult& r, const Args& plain, const Slots& s, kvtune::Context& tuned,
               kvtune::Context& heuristic, const kvtune::detail::DeviceFingerprint& fp, cudaStream_t stream,
               const Settings& settings) {
  for (auto [context, timing] : {std::pair{&tuned, &r.kvtune}, std::pair{&heuristic, &r.heuristic}}) {
    kvtune::Context& ctx = *context;
    *timing = attempt([&] {
      const std::string label = variant(ctx, bound<Args>(r.problem, s, 0), stream);
      kb::Timing t = kb::measure([&](int slot, cudaStream_t st) { call(ctx, bound<Args>(r.problem, s, slot), st); },
                                 s.count, stream, settings.timing);
      t.label = label;
      return t;
    });
  }
  time_others(r, plain, s, fp, stream, settings);
}

kb::Report run(const std::vector<kb::BenchProblem>& problems, const Settings& settings, const std::string& command) {
  kb::check(cudaSetDevice(settings.device), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  kb::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const auto fp = kvtune::detail::read_fingerprint(settings.device);

  kb::Report report;
  kb::MachineInfo& m = report.machine;
  m.device = fp.name;
  m.sm_count = fp.sm_count;
  m.l2_bytes = fp.l2_bytes;
  m.driver = fmt::format("{}.{}", fp.driver_version / 1000, (fp.driver_version % 1000) / 10);
  m.kvtune_version = kvtune::version();
  m.cudnn = kb::cudnn_description();
  m.date = utc_now();
  m.command = command;

  std::fprintf(stderr, "kvtune-bench: %s, %zu problems; measuring copy bandwidth, FMA rate, launch time\n",
               fp.name.c_str(), problems.size());
  const kb::SupportKernels support(fp.arch());
  m.copy_gbps = kvtune::tools::measure_copy_gbps(stream, settings.timing.samples);
  m.fma_tflops = kvtune::tools::measure_fma_gflops(fp.arch(), stream, settings.timing.samples) / 1e3;
  m.launch_us_events = support.empty_launch(stream, settings.timing, false).median_ms * 1e3;
  m.launch_us_graph = support.empty_launch(stream, settings.timing, true).median_ms * 1e3;

  kvtune::ContextOptions tuned_options;  // explicit: the environment does not change what is measured
  tuned_options.policy = kvtune::Policy::tune;
  tuned_options.cache_path = settings.cache;
  kvtune::Context tuned(tuned_options);
  kvtune::ContextOptions heuristic_options;
  heuristic_options.policy = kvtune::Policy::heuristic;
  heuristic_options.cache_path = "";
  kvtune::Context heuristic(heuristic_options);
  m.cache = tuned.cache_path_in_use().empty() ? "in memory" : tuned.cache_path_in_use();

  for (std::size_t i = 0; i < problems.size(); ++i) {
    const kb::BenchProblem& p = problems[i];
    std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, problems.size(), p.id.c_str());
    kb::ProblemResult r;
    r.problem = p;
    r.model_bytes = p.model_bytes();
    r.model_flops = p.model_flops();
    try {
      const Slots s = make_slots(p, fp, support, settings.outputs == "reused", stream);
      r.slots = s.count;
      r.slot_bytes = s.set_bytes;
      std::visit([&](const auto& a) { time_call(r, a, s, tuned, heuristic, fp, stream, settings); }, p.call);
      r.copy = attempt([&] {
        // Graph replay below 10 µs only: a captured device-to-device copy becomes a memcpy node,
        // which ran 134 MB in 98.8 µs on an H200 against 69.3 µs for the same cudaMemcpyAsync on a
        // stream (2026-11-25); the copy's host cost is a few µs, so events time it fairly above that.
        kb::TimingOptions copy_timing = settings.timing;
        copy_timing.graph_threshold_us = std::min(copy_timing.graph_threshold_us, 10.0);
        kb::Timing t = kb::measure(
            [&](int slot, cudaStream_t st) {
              kb::check(cudaMemcpyAsync(s.copy_out[std::size_t(slot)].get(), s.copy_in[std::size_t(slot)].get(), s.copy_bytes,
                                        cudaMemcpyDeviceToDevice, st),
                        "cudaMemcpyAsync");
            },
            s.count, stream, copy_timing);
        t.label = fmt::format("cudaMemcpyAsync {} B", s.copy_bytes);
        return t;
      });
      kb::check(cudaStreamSynchronize(stream), "end of problem");
    } catch (const std::exception& e) {
      // Out of memory or a sticky error: recorded, and the run goes on where the device still works.
      r.kvtune = kb::Timing::failed(e.what());
      cudaGetLastError();
    }
    if (r.kvtune.ok())
      std::fprintf(stderr, "    kvtune %.2f us (%s, %s)\n", r.kvtune.median_ms * 1e3, r.kvtune.mode.c_str(),
                   r.kvtune.label.c_str());
    else
      std::fprintf(stderr, "    kvtune %s: %s\n", r.kvtune.status.c_str(), r.kvtune.message.c_str());
    report.problems.push_back(std::move(r));
  }
  const auto c = tuned.counters();
  report.notes.push_back(fmt::format(
      "kvtune's winner is verified against a float64 reference by the tuner before it can win (variants with "
      "wrong results are rejected); the heuristic, seed, cuDNN and copy timings are not re-verified here. "
      "Tuning counters: tunes={} cache_hits={} compiles={} variants_timed={} variants_rejected={}.",
      c.tunes, c.cache_hits, c.compiles, c.variants_timed, c.variants_rejected));
  report.notes.push_back(fmt::format(
      "Timing: CUDA events on one non-blocking stream; {} samples, median reported; warm-up first; inputs rotated "
      "over sets whose total exceeds twice the L2 ({} MiB); random inputs; calls under {:.0f} µs timed by CUDA-graph "
      "replay{}{}.",
      settings.timing.samples, fp.l2_bytes >> 20, settings.timing.graph_threshold_us,
      settings.timing.graphs ? "" : " (disabled by --no-graphs)",
      settings.outputs == "reused" ? "; --outputs reused: the tensors a call writes are one copy shared by the sets "
                                     "(as PyTorch's caching allocator reuses a freed output), the copy's destination "
                                     "still rotated"
                                   : "; each set has its own outputs"));
  report.notes.push_back("kvtune and heuristic times include the public API's host path (validate, key, table "
                         "lookup) — through graph replay only the kernels remain.");
  report.notes.push_back("cuDNN runs causal 1D convolutions as PyTorch does: padded K - 1 on both sides, K - 1 "
                         "extra outputs per row; f32 with CUDNN_FMA_MATH (no TF32).");
  cudaStreamDestroy(stream);
  return report;
}

std::vector<std::string> split_suites(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const auto& item : raw) {
    std::stringstream ss(item);
    std::string name;
    while (std::getline(ss, name, ','))
      if (!name.empty()) out.push_back(name);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtune-bench: kvtune against its heuristic, the seed designs, cuDNN, PyTorch peers and the copy "
               "roofline (docs/PERFORMANCE.md)"};
  Settings settings;
  std::vector<std::string> suites_raw = {"all"};
  std::string list_suite, json_path, markdown_path;
  std::vector<std::string> peers_paths;
  std::string known;
  for (const auto& name : kb::suite_names()) known += name + ", ";
  app.add_option("--suite", suites_raw, "suites, repeated or comma-separated: " + known + "all");
  app.add_flag("--quick", settings.quick, "the first two problems of each suite (smoke test)");
  app.add_option("--list-suite", list_suite, "write the suite's problems as JSON (to --json FILE, else stdout); needs no GPU");
  app.add_option("--json", json_path, "write the JSON report (or, with --list-suite, the suite) to FILE");
  app.add_option("--markdown", markdown_path, "also write the Markdown report to FILE (it always goes to stdout)");
  app.add_option("--peers", peers_paths, "merge peer timings (bench/peers/torch_peers.py JSON); repeatable");
  app.add_option("--cache", settings.cache, "kvtune cache file (default: in memory, so every problem is tuned)");
  app.add_option("--samples", settings.timing.samples, "timed batches per measurement (median)")->check(CLI::Range(3, 1000));
  app.add_flag("--no-graphs", [&](std::int64_t) { settings.timing.graphs = false; }, "never time by CUDA-graph replay");
  app.add_option("--graph-threshold-us", settings.timing.graph_threshold_us, "graph replay below this time per call");
  app.add_flag("--no-cudnn", [&](std::int64_t) { settings.cudnn = false; }, "skip cuDNN");
  app.add_option("--device", settings.device, "CUDA device ordinal");
  app.add_option("--outputs", settings.outputs,
                 "held: every rotated set has its own outputs; reused: the tensors a call writes are one copy "
                 "shared by the sets, as PyTorch's caching allocator reuses a freed output")
      ->check(CLI::IsMember({"held", "reused"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  std::string command = "kvtune-bench";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];

  if (!list_suite.empty()) {
    try {
      const std::string text = kb::suite_document(list_suite, settings.quick).dump(2) + "\n";
      if (json_path.empty()) std::cout << text;
      else write_file(json_path, text);
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvtune-bench: %s\n", e.what());
      return 2;
    }
  }

  std::vector<kb::BenchProblem> problems;
  try {
    for (const auto& name : split_suites(suites_raw)) {
      auto more = kb::suite(name, settings.quick);
      problems.insert(problems.end(), more.begin(), more.end());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune-bench: %s\n", e.what());
    return 2;
  }
  // Peers files are checked before any GPU work, so a malformed one costs nothing.
  std::vector<std::pair<std::string, nlohmann::json>> peers;
  try {
    for (const auto& path : peers_paths) peers.emplace_back(path, kb::read_peers_file(path));
  } catch (const kb::PeersError& e) {
    std::fprintf(stderr, "kvtune-bench: %s\n", e.what());
    return 2;
  }

  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::fprintf(stderr,
                 "kvtune-bench: no CUDA GPU available (%s); the benchmark needs an NVIDIA GPU with compute "
                 "capability 8.0 or newer. `kvtune-bench --list-suite NAME` works without one.\n",
                 status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 1;
  }
  try {
    kb::Report report = run(problems, settings, command);
    for (const auto& [path, doc] : peers) {
      const int unmatched = kb::merge_peers(report, doc, fmt::format("peers file '{}'", path));
      if (unmatched > 0)
        report.notes.push_back(fmt::format("{} entries of '{}' belong to problems not run here", unmatched, path));
      // Files written before torch_peers.py had --outputs dropped every output at once: "reused".
      const std::string peer_outputs = doc.value("outputs", std::string("reused"));
      if (peer_outputs != settings.outputs)
        report.notes.push_back(fmt::format(
            "NOT the same timing context: '{}' was timed with outputs {}, kvtune with outputs {} (reused outputs "
            "are written into L2-resident lines; see --outputs)",
            path, peer_outputs, settings.outputs));
    }
    const std::string markdown = kb::to_markdown(report);
    std::cout << markdown << std::flush;
    if (!markdown_path.empty()) write_file(markdown_path, markdown);
    if (!json_path.empty()) write_file(json_path, kb::to_json(report).dump(2) + "\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune-bench: %s\n", e.what());
    return 1;
  }
}
