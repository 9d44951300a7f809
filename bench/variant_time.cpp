// Times chosen variants of one dwconv problem, kernel only: the same buffers, launch path and timing
// for every variant, so two trees' kernel templates can be compared variant by variant without the
// tuner (with --source DIR, bench/source_override.h) or one tree's variants against each other.
//   kvtune_variant_time --layout nhwc --dtype f32 --n 32 --c 192 --h 28 --w 28 --kernel 7 --pad 3
//                       [--direction forward|backward_data|backward_weight] [--bias] [--source DIR] [--ab DIR]
//                       [--kind tiled|direct|wgrad|mma] [--rounds R] [LABEL...]
// LABEL: a variant's label as `kvtune-tune --dry-run --variants --json` lists it; --kind adds every
// variant of that kernel. Each is compiled with NVRTC for the device (on all cores), launched 20 times
// to warm up, then timed with CUDA events over 15 batches of 20 launches (median per launch); the
// inputs are random (the tuning harness's fill kernel) and rotated over copies that together exceed
// twice the L2 cache, so no launch finds its input in L2. Prints "<us> <label>" per variant and round. --ab DIR: each variant also
// compiled from DIR's templates (B; A is --source or the built-in ones), A and B timed in turn in
// every round; prints "<A us> <B us> <B/A> <label>" with the best of the rounds, then the geomean
// of B/A, its 5th-95th percentiles and how many variants B runs more than 5 % slower.
// --machine-code (no GPU needed): A and B compiled for --arch (default sm_90) and compared instead of
// timed: prints "same|differs <A instructions> <B instructions> <label>" per variant (machine code
// byte for byte) and the counts; --emit DIR also writes each variant's PTX of A and B as
// DIR/<n>.a.ptx and DIR/<n>.b.ptx (n: the variant's line) to diff what ptxas was given.
#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <future>
#include <thread>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "bench/cubin_text.h"
#include "bench/source_override.h"
#include "core/cuda_check.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "kvtune/kvtune.h"
#include "tuner/harness_support.h"
#include "tuner/tuner.h"

using namespace kvtune;

namespace {

// --machine-code: each variant compiled from both trees (dirs[0] = A, dirs[1] = B; empty: the
// built-in templates) for `arch`, its kernel's machine code compared byte for byte; with `emit_dir`,
// the PTX of both written there. Returns 0 when every variant compiled.
int compare_machine_code(const dwconv::Problem& problem, const std::vector<dwconv::Config>& configs,
                         const std::vector<std::string>& dirs, const std::string& arch, const std::string& emit_dir) {
  const std::string ptx_arch = "compute_" + std::to_string(detail::parse_arch(arch));
  if (!emit_dir.empty()) std::filesystem::create_directories(emit_dir);
  // compiled[which][i]: tree `which`, variant i; with --emit, its PTX follows at i + configs.size().
  std::array<std::vector<tuner::Compiled>, 2> compiled;
  for (std::size_t which = 0; which < 2; ++which) {
    std::vector<tuner::Candidate> candidates;
    for (const std::string& target : {arch, ptx_arch}) {
      if (target == ptx_arch && emit_dir.empty()) continue;
      for (const auto& config : configs) {
        tuner::Candidate& candidate = candidates.emplace_back();
        candidate.label = config.label();
        candidate.request = dwconv::compile_request(problem, config, target);
        if (!dirs[which].empty()) bench::use_sources(candidate.request, dirs[which]);
      }
    }
    compiled[which] = tuner::compile_all(candidates, 0);  // on every core
    bool failed = false;
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (compiled[which][i].status != tuner::Status::ok) {
        std::fprintf(stderr, "%s (%s): %s\n", candidates[i].label.c_str(), which ? "B" : "A",
                     compiled[which][i].message.c_str());
        failed = true;
      }
    if (failed) return 1;
  }
  std::size_t same = 0;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    std::array<std::string_view, 2> text;
    for (std::size_t which = 0; which < 2; ++which)
      text[which] = bench::kernel_text(compiled[which][i].cubin, compiled[which][i].lowered_name);
    same += text[0] == text[1];
    std::printf("%-7s %6zu %6zu  %s\n", text[0] == text[1] ? "same" : "differs", text[0].size() / 16, text[1].size() / 16,
                configs[i].label().c_str());
    if (emit_dir.empty()) continue;
    for (std::size_t which = 0; which < 2; ++which) {
      std::ofstream out(std::filesystem::path(emit_dir) / fmt::format("{}.{}.ptx", i, which ? "b" : "a"), std::ios::binary);
      out << compiled[which][i + configs.size()].cubin;
    }
  }
  std::printf("# %zu variants, %s: %zu the same machine code, %zu differ\n", configs.size(), arch.c_str(), same,
              configs.size() - same);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtune_variant_time: time chosen variants of one dwconv problem, kernel only"};
  std::string layout = "nchw", dtype = "f32", direction = "forward", source_dir, ab_dir, kind;
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  int kernel = 3, pad = 0, rounds = 1;
  bool bias = false, machine_code = false;
  std::string arch = "sm_90", emit_dir;
  std::vector<std::string> labels;
  app.add_option("--layout", layout)->check(CLI::IsMember({"ncl", "nlc", "nchw", "nhwc"}));
  app.add_option("--dtype", dtype)->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--direction", direction)->check(CLI::IsMember({"forward", "backward_data", "backward_weight"}));
  app.add_option("--n", n)->required();
  app.add_option("--c", c)->required();
  app.add_option("--h", h);
  app.add_option("--w", w)->required();
  app.add_option("--kernel", kernel, "taps per axis (square in 2D)");
  app.add_option("--pad", pad, "padding on every side");
  app.add_flag("--bias", bias, "forward with a bias; backward_weight: also dbias");
  app.add_option("--source", source_dir, "compile DIR/dwconv.cu and the headers DIR holds instead of the built-in ones");
  app.add_option("--ab", ab_dir, "also compile from DIR's templates and time both in turn (B against A)");
  app.add_option("--kind", kind, "every variant of this kernel")->check(CLI::IsMember({"tiled", "direct", "wgrad", "mma"}));
  app.add_option("--rounds", rounds, "time every label this many times, in turn")->check(CLI::Range(1, 100));
  app.add_flag("--machine-code", machine_code, "compare A's and B's machine code (with --ab) instead of timing; no GPU");
  app.add_option("--arch", arch, "with --machine-code: the architecture compiled for");
  app.add_option("--emit", emit_dir, "with --machine-code: write each variant's PTX of A and B into DIR");
  app.add_option("labels", labels, "variant labels");
  CLI11_PARSE(app, argc, argv);
  if (labels.empty() && kind.empty()) {
    std::fprintf(stderr, "kvtune_variant_time: give variant labels, --kind, or both\n");
    return 2;
  }
  if (machine_code && ab_dir.empty()) {
    std::fprintf(stderr, "kvtune_variant_time: --machine-code compares two trees: give --ab DIR\n");
    return 2;
  }
  try {
    const bool two_d = layout == "nchw" || layout == "nhwc";
    DwConvArgs a;
    a.direction = direction == "forward"         ? DwDirection::forward
                  : direction == "backward_data" ? DwDirection::backward_data
                                                 : DwDirection::backward_weight;
    const bool wgrad = a.direction == DwDirection::backward_weight;
    a.layout = layout == "ncl" ? DwLayout::ncl : layout == "nlc" ? DwLayout::nlc : layout == "nchw" ? DwLayout::nchw : DwLayout::nhwc;
    a.dtype = dtype == "f32" ? DType::f32 : dtype == "f16" ? DType::f16 : DType::bf16;
    a.n = n, a.c = c, a.h = two_d ? h : 1, a.w = w;
    a.kernel_h = two_d ? kernel : 1, a.kernel_w = kernel;
    a.pad_top = a.pad_bottom = two_d ? pad : 0;
    a.pad_left = a.pad_right = pad;
    dwconv::set_placeholders(a, bias && a.direction != DwDirection::backward_data);
    const dwconv::Problem problem = dwconv::make_problem(a);
    struct Variant {
      std::string label;
      dwconv::Config config;
      std::vector<detail::LoadedKernel> kernels;  // A, and B with --ab
    };
    std::vector<Variant> variants;
    std::vector<std::string> dirs = {source_dir};
    if (!ab_dir.empty()) dirs.push_back(ab_dir);
    for (const auto& config : dwconv::enumerate(problem)) {
      const std::string label = config.label();
      const bool of_kind = !kind.empty() && dwconv::to_string(config.kernel()) == kind;
      if (of_kind || std::find(labels.begin(), labels.end(), label) != labels.end()) variants.push_back({label, config, {}});
    }
    for (const auto& label : labels)
      if (std::none_of(variants.begin(), variants.end(), [&](const Variant& v) { return v.label == label; }))
        std::printf("# not a variant of this problem: %s\n", label.c_str());
    if (machine_code) {
      std::vector<dwconv::Config> configs;
      for (const auto& v : variants) configs.push_back(v.config);
      return compare_machine_code(problem, configs, dirs, arch, emit_dir);
    }
    // Kernel source and destination (forward: x and y; backward_data: dy and dx; backward_weight: x and
    // dy, both read, dw written), batch n.
    const std::size_t src_elements = std::size_t(a.n * a.c * problem.src_h() * problem.src_w());
    const std::size_t dst_elements = std::size_t(a.n * a.c * problem.dst_h() * problem.dst_w());
    int l2 = 0;
    detail::cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "cudaDeviceGetAttribute");
    int device = 0;
    cudaDeviceProp prop{};
    detail::cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    arch = fmt::format("sm_{}{}", prop.major, prop.minor);
    // Random inputs from the tuning harness's own fill kernel (the reference program's third kernel).
    const detail::LoadedKernel& fill = tuner::support_kernels(dwconv::reference_request(problem, arch)).at(2);
    const std::size_t elem = a.dtype == DType::f32 ? 4 : 2;
    const std::size_t pair_bytes = (src_elements + dst_elements) * elem;
    const int copies = static_cast<int>(std::max<std::size_t>(1, (2 * std::size_t(l2) + pair_bytes - 1) / pair_bytes));
    std::vector<tuner::DeviceBuffer> buffers;
    const auto random_buffer = [&](std::size_t elements, unsigned long long seed) {
      buffers.emplace_back(elements * elem);
      tuner::fill_random(fill, buffers.back().get(), static_cast<long long>(elements), seed, 0.0f, 1.0f, nullptr);
      return buffers.back().get();
    };
    void* weight = random_buffer(std::size_t(a.c * a.kernel_h * a.kernel_w), 1);
    void* bias_buffer = bias ? random_buffer(std::size_t(a.c), 2) : nullptr;
    // backward_weight: one dw (and dbias) for every launch, and a workspace for the largest variant's
    // split partials and counters (dwconv::launch zeroes the counters).
    void* dweight = wgrad ? random_buffer(std::size_t(a.c * a.kernel_h * a.kernel_w), 3) : nullptr;
    void* dbias = wgrad && bias ? random_buffer(std::size_t(a.c), 4) : nullptr;
    std::size_t workspace_bytes = 0;
    for (const auto& v : variants) workspace_bytes = std::max(workspace_bytes, dwconv::geometry(problem, v.config, a.n).workspace_bytes);
    void* workspace = nullptr;
    if (workspace_bytes > 0) {
      buffers.emplace_back(workspace_bytes);
      workspace = buffers.back().get();
    }
    std::vector<dwconv::LaunchArgs> launches;
    for (int i = 0; i < copies; ++i) {
      DwConvArgs copy = a;
      void* src = random_buffer(src_elements, 100 + i);
      void* dst = random_buffer(dst_elements, 200 + i);  // overwritten by every launch (backward_weight: dy)
      if (a.direction == DwDirection::forward) copy.x = src, copy.y = dst, copy.bias = bias_buffer;
      else if (!wgrad) copy.dy = src, copy.dx = dst;
      else copy.x = src, copy.dy = dst, copy.dweight = dweight, copy.dbias = bias ? dbias : nullptr;
      copy.weight = weight;
      launches.push_back(dwconv::launch_args(copy));
      launches.back().workspace = workspace;
    }
    detail::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (inputs)");
    std::printf("# %s, %s, %d input copies rotated (L2 %d MiB)%s%s\n", problem.key().c_str(), prop.name, copies,
                l2 >> 20, source_dir.empty() ? "" : (", A templates from " + source_dir).c_str(),
                ab_dir.empty() ? "" : (", B templates from " + ab_dir).c_str());
    // Compiled on every core: NVRTC calls are independent. The requests (and the source files they
    // point into) are prepared first, on this thread.
    const std::size_t workers = std::max(1u, std::thread::hardware_concurrency());
    for (const auto& dir : dirs) {
      std::vector<detail::CompileRequest> requests;
      for (const auto& v : variants) {
        requests.push_back(dwconv::compile_request(problem, v.config, arch));
        if (!dir.empty()) bench::use_sources(requests.back(), dir);
      }
      std::vector<std::future<detail::CompileResult>> pending;
      std::size_t loaded = 0;
      const auto load_next = [&] {
        const auto compiled = pending[loaded].get();
        Variant& v = variants[loaded++];
        v.kernels.push_back(detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(0)));
        v.kernels.back().allow_dynamic_smem(dwconv::geometry(problem, v.config, a.n).dynamic_smem);
      };
      for (const auto& request : requests) {
        if (pending.size() - loaded >= workers) load_next();
        pending.push_back(std::async(std::launch::async, [&request] { return detail::nvrtc_compile(request); }));
      }
      while (loaded < pending.size()) load_next();
    }
    cudaEvent_t start, stop;
    detail::cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    detail::cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
    std::size_t turn = 0;
    const auto launch = [&](const Variant& v, std::size_t which) {
      const cudaError_t s = dwconv::launch(v.kernels[which], problem, v.config, launches[turn++ % launches.size()], nullptr);
      if (s != cudaSuccess) detail::cuda_check(s, ("launch " + v.label).c_str());
    };
    // Median time per launch (us) of one build of one variant.
    const auto time = [&](const Variant& v, std::size_t which) {
      for (int i = 0; i < 20; ++i) launch(v, which);
      std::vector<float> per_launch;
      for (int batch = 0; batch < 15; ++batch) {
        detail::cuda_check(cudaEventRecord(start), "cudaEventRecord");
        for (int i = 0; i < 20; ++i) launch(v, which);
        detail::cuda_check(cudaEventRecord(stop), "cudaEventRecord");
        detail::cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        detail::cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        per_launch.push_back(ms * 1000.f / 20.f);
      }
      std::sort(per_launch.begin(), per_launch.end());
      return double(per_launch[per_launch.size() / 2]);
    };
    std::vector<std::array<double, 2>> best(variants.size(), {1e30, 1e30});
    for (int round = 0; round < rounds; ++round)
      for (std::size_t i = 0; i < variants.size(); ++i)
        for (std::size_t which = 0; which < dirs.size(); ++which) {
          const double us = time(variants[i], which);
          best[i][which] = std::min(best[i][which], us);
          if (dirs.size() == 1) std::printf("%9.2f us  %s\n", us, variants[i].label.c_str());
        }
    if (dirs.size() == 2) {
      std::vector<double> ratios;
      for (std::size_t i = 0; i < variants.size(); ++i) {
        ratios.push_back(best[i][1] / best[i][0]);
        std::printf("%9.2f %9.2f %6.3f  %s\n", best[i][0], best[i][1], ratios.back(), variants[i].label.c_str());
      }
      if (!ratios.empty()) {
        double log_sum = 0;
        for (double r : ratios) log_sum += std::log(r);
        std::vector<double> sorted = ratios;
        std::sort(sorted.begin(), sorted.end());
        const auto at = [&](double q) { return sorted[std::size_t(std::lround(q * double(sorted.size() - 1)))]; };
        std::printf("# %zu variants: B/A geomean %.3f, p5 %.3f, p95 %.3f, min %.3f, max %.3f, %zu more than 5 %% slower, "
                    "%zu more than 5 %% faster\n",
                    ratios.size(), std::exp(log_sum / double(ratios.size())), at(0.05), at(0.95), sorted.front(),
                    sorted.back(), std::size_t(std::count_if(ratios.begin(), ratios.end(), [](double r) { return r > 1.05; })),
                    std::size_t(std::count_if(ratios.begin(), ratios.end(), [](double r) { return r < 1 / 1.05; })));
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune_variant_time: %s\n", e.what());
    return 1;
  }
}
