// Times chosen variants of one dwconv problem, kernel only: the same buffers, launch path and timing
// for every variant, so two trees' kernel templates can be compared variant by variant without the
// tuner (with --source DIR, bench/source_override.h) or one tree's variants against each other.
//   kvtune_variant_time --layout nhwc --dtype f32 --n 32 --c 192 --h 28 --w 28 --kernel 7 --pad 3
//                       [--direction forward|backward_data] [--bias] [--source DIR] [--rounds R] LABEL...
// LABEL: a variant's label as `kvtune-tune --dry-run --variants --json` lists it. Each label is
// compiled with NVRTC for the device, launched 20 times to warm up, then timed with CUDA events over
// 15 batches of 20 launches (median per launch); the inputs are random and rotated over copies that
// together exceed twice the L2 cache, so no launch finds its input in L2. Prints "<us> <label>" per
// variant and round.
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "bench/source_override.h"
#include "core/cuda_check.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "kvtune/kvtune.h"

using namespace kvtune;

namespace {

// Random values in [-1, 1) of the given dtype, as bytes.
std::vector<unsigned char> random_bytes(std::size_t elements, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const std::size_t size = dtype == DType::f32 ? 4 : 2;
  std::vector<unsigned char> out(elements * size);
  for (std::size_t i = 0; i < elements; ++i) {
    const float v = u(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (dtype == DType::f32) std::memcpy(&out[i * 4], &bits, 4);
    else {
      // bf16: the top half; f16: a value of the same magnitude range built from the float
      std::uint16_t h = static_cast<std::uint16_t>(bits >> 16);
      if (dtype == DType::f16) {
        const std::uint32_t sign = bits >> 31, mant = (bits >> 13) & 0x3ff;
        h = static_cast<std::uint16_t>((sign << 15) | (14u << 10) | mant);  // +-[0.5, 1)
      }
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

void* device_copy(const std::vector<unsigned char>& bytes) {
  void* p = nullptr;
  detail::cuda_check(cudaMalloc(&p, bytes.size()), "cudaMalloc");
  detail::cuda_check(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtune_variant_time: time chosen variants of one dwconv problem, kernel only"};
  std::string layout = "nchw", dtype = "f32", direction = "forward", source_dir;
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  int kernel = 3, pad = 0, rounds = 1;
  bool bias = false;
  std::vector<std::string> labels;
  app.add_option("--layout", layout)->check(CLI::IsMember({"ncl", "nlc", "nchw", "nhwc"}));
  app.add_option("--dtype", dtype)->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--direction", direction)->check(CLI::IsMember({"forward", "backward_data"}));
  app.add_option("--n", n)->required();
  app.add_option("--c", c)->required();
  app.add_option("--h", h);
  app.add_option("--w", w)->required();
  app.add_option("--kernel", kernel, "taps per axis (square in 2D)");
  app.add_option("--pad", pad, "padding on every side");
  app.add_flag("--bias", bias, "forward with a bias");
  app.add_option("--source", source_dir, "compile DIR/dwconv.cu and the headers DIR holds instead of the built-in ones");
  app.add_option("--rounds", rounds, "time every label this many times, in turn")->check(CLI::Range(1, 100));
  app.add_option("labels", labels, "variant labels")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    const bool two_d = layout == "nchw" || layout == "nhwc";
    DwConvArgs a;
    a.direction = direction == "forward" ? DwDirection::forward : DwDirection::backward_data;
    a.layout = layout == "ncl" ? DwLayout::ncl : layout == "nlc" ? DwLayout::nlc : layout == "nchw" ? DwLayout::nchw : DwLayout::nhwc;
    a.dtype = dtype == "f32" ? DType::f32 : dtype == "f16" ? DType::f16 : DType::bf16;
    a.n = n, a.c = c, a.h = two_d ? h : 1, a.w = w;
    a.kernel_h = two_d ? kernel : 1, a.kernel_w = kernel;
    a.pad_top = a.pad_bottom = two_d ? pad : 0;
    a.pad_left = a.pad_right = pad;
    dwconv::set_placeholders(a, bias && a.direction == DwDirection::forward);
    const dwconv::Problem problem = dwconv::make_problem(a);
    // Kernel source and destination (forward: x and y; backward_data: dy and dx), batch n.
    const std::size_t src_elements = std::size_t(a.n * a.c * problem.src_h() * problem.src_w());
    const std::size_t dst_elements = std::size_t(a.n * a.c * problem.dst_h() * problem.dst_w());
    std::mt19937 rng(20261128);
    int l2 = 0;
    detail::cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "cudaDeviceGetAttribute");
    const std::size_t elem = a.dtype == DType::f32 ? 4 : 2;
    const std::size_t pair_bytes = (src_elements + dst_elements) * elem;
    const int copies = static_cast<int>(std::max<std::size_t>(1, (2 * std::size_t(l2) + pair_bytes - 1) / pair_bytes));
    std::vector<dwconv::LaunchArgs> launches;
    std::vector<void*> buffers;
    void* weight = device_copy(random_bytes(std::size_t(a.c * a.kernel_h * a.kernel_w), a.dtype, rng));
    void* bias_buffer = bias ? device_copy(random_bytes(a.c, a.dtype, rng)) : nullptr;
    for (int i = 0; i < copies; ++i) {
      DwConvArgs copy = a;
      void* src = device_copy(random_bytes(src_elements, a.dtype, rng));
      void* dst = device_copy(std::vector<unsigned char>(dst_elements * elem, 0));
      buffers.insert(buffers.end(), {src, dst});
      if (a.direction == DwDirection::forward) copy.x = src, copy.y = dst, copy.bias = bias_buffer;
      else copy.dy = src, copy.dx = dst;
      copy.weight = weight;
      launches.push_back(dwconv::launch_args(copy));
    }
    int device = 0;
    cudaDeviceProp prop{};
    detail::cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    const std::string arch = fmt::format("sm_{}{}", prop.major, prop.minor);
    std::printf("# %s, %s, %d input copies rotated (L2 %d MiB)%s\n", problem.key().c_str(), prop.name, copies, l2 >> 20,
                source_dir.empty() ? "" : (", templates from " + source_dir).c_str());
    struct Variant {
      std::string label;
      dwconv::Config config;
      detail::LoadedKernel kernel;
    };
    std::vector<Variant> variants;
    for (const auto& config : dwconv::enumerate(problem)) {
      const std::string label = config.label();
      if (std::find(labels.begin(), labels.end(), label) == labels.end()) continue;
      auto request = dwconv::compile_request(problem, config, arch);
      if (!source_dir.empty()) bench::use_sources(request, source_dir);
      const auto compiled = detail::nvrtc_compile(request);
      variants.push_back({label, config, detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(0))});
    }
    for (const auto& label : labels)
      if (std::none_of(variants.begin(), variants.end(), [&](const Variant& v) { return v.label == label; }))
        std::printf("# not a variant of this problem: %s\n", label.c_str());
    cudaEvent_t start, stop;
    detail::cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    detail::cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
    std::size_t turn = 0;
    const auto launch = [&](const Variant& v) {
      const cudaError_t s = dwconv::launch(v.kernel, problem, v.config, launches[turn++ % launches.size()], nullptr);
      if (s != cudaSuccess) detail::cuda_check(s, ("launch " + v.label).c_str());
    };
    for (int round = 0; round < rounds; ++round)
      for (const auto& v : variants) {
        for (int i = 0; i < 20; ++i) launch(v);
        std::vector<float> per_launch;
        for (int batch = 0; batch < 15; ++batch) {
          detail::cuda_check(cudaEventRecord(start), "cudaEventRecord");
          for (int i = 0; i < 20; ++i) launch(v);
          detail::cuda_check(cudaEventRecord(stop), "cudaEventRecord");
          detail::cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
          float ms = 0;
          detail::cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
          per_launch.push_back(ms * 1000.f / 20.f);
        }
        std::sort(per_launch.begin(), per_launch.end());
        std::printf("%9.2f us  %s\n", per_launch[per_launch.size() / 2], v.label.c_str());
      }
    for (void* p : buffers) cudaFree(p);
    cudaFree(weight);
    if (bias_buffer != nullptr) cudaFree(bias_buffer);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune_variant_time: %s\n", e.what());
    return 1;
  }
}
