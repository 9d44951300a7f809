#include "kernel_templates/dwconv/dwconv_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/dwconv/dwconv_params.h"
#include "core/cuda_check.h"
#include "tuner/harness_support.h"

namespace kvtune::dwconv {
namespace {

using tuner::DeviceBuffer;
enum SupportKernel { kReference, kCompare, kFill };

// Relative L2 error allowed against the float64 reference: f32 arithmetic, or the 16-bit output
// rounding (a long reduction in backward_weight adds f32 accumulation error on top).
double tolerance(const Problem& p) {
  switch (p.dtype) {
    case DType::f32: return p.direction == DwDirection::backward_weight ? 1e-4 : 1e-5;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1e-2;
  }
  return 0;
}

std::int64_t elements(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) { return n * c * h * w; }

}  // namespace

KvtDwConvParams kernel_params(const Problem& p, const LaunchArgs& a) {
  KvtDwConvParams k{};
  k.src = a.src;
  k.dst = a.dst;
  k.weight = a.weight;
  k.bias = a.bias;
  k.aux = a.aux;
  k.bias_grad = a.bias_grad;
  k.batch = a.batch;
  k.channels = p.c;
  k.src_h = p.src_h();
  k.src_w = p.src_w();
  k.dst_h = p.dst_h();
  k.dst_w = p.dst_w();
  k.splits = 1;
  k.seq_idx = a.seq_idx;
  return k;
}

namespace {

class DwConvHarness final : public tuner::Harness {
 public:
  DwConvHarness(const Problem& p, std::vector<Config> configs, const std::string& arch, std::int64_t l2_bytes,
                cudaStream_t stream)
      : problem_(p), configs_(std::move(configs)), kernels_(tuner::support_kernels(reference_request(p, arch))) {
    const std::size_t elem = std::size_t(p.element_bytes());
    const bool wgrad = p.direction == DwDirection::backward_weight;
    const bool with_aux = wgrad || p.gradient_prep || p.fused_data();
    src_count_ = elements(p.n, p.c, p.src_h(), p.src_w());
    dst_count_ = elements(p.n, p.c, p.dst_h(), p.dst_w());
    // backward_weight reads x (src) and dy (aux, dst-shaped) and writes dw; the gradient prep reads dy
    // (aux) too, the fused data gradient x (aux, dx-shaped: dst); the others read src, write dst.
    const std::size_t in_bytes = std::size_t(src_count_) * elem + (with_aux ? std::size_t(dst_count_) * elem : 0);
    const std::size_t out_count = wgrad ? std::size_t(p.c * p.kh * p.kw) : std::size_t(dst_count_);
    out_count_ = static_cast<std::int64_t>(out_count);
    const std::size_t slot_bytes = in_bytes + out_count * elem;
    std::size_t workspace = 0;
    for (const auto& c : configs_) workspace = std::max(workspace, geometry(p, c, p.n).workspace_bytes);
    std::size_t free_bytes = 0, total_bytes = 0;
    detail::cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    const std::size_t fixed = out_count * 4 + workspace + std::size_t(p.c) * 8;
    if (slot_bytes + fixed > free_bytes / 2)
      throw Error(Error::Context{"dwconv", p.key(), "", "", ""},
                  fmt::format("not enough free GPU memory to tune: need {} MiB, {} MiB free",
                              (slot_bytes + fixed) >> 20, free_bytes >> 20));
    std::size_t slots = std::clamp<std::size_t>(std::size_t(std::ceil(2.0 * double(l2_bytes) / double(slot_bytes))), 1, 64);
    while (slots > 1 && slots * slot_bytes + fixed > free_bytes / 4) --slots;
    for (std::size_t s = 0; s < slots; ++s) {
      src_.emplace_back(std::size_t(src_count_) * elem);
      tuner::fill_random(kernels_[kFill], src_.back().get(), src_count_, 100 + s, 0.25f, 1.0f, stream);
      if (with_aux) {
        aux_.emplace_back(std::size_t(dst_count_) * elem);
        tuner::fill_random(kernels_[kFill], aux_.back().get(), dst_count_, 200 + s, 0.0f, 1.0f, stream);
      }
      dst_.emplace_back(out_count * elem);
    }
    const std::int64_t taps = std::int64_t(p.kh) * p.kw;
    weight_ = DeviceBuffer(std::size_t(p.c * taps) * elem);
    tuner::fill_random(kernels_[kFill], weight_.get(), p.c * taps, 7, 0.0f, 0.5f, stream);
    bias_ = DeviceBuffer(std::size_t(p.c) * elem);
    tuner::fill_random(kernels_[kFill], bias_.get(), p.c, 8, 0.0f, 1.0f, stream);
    bias_grad_ = DeviceBuffer(std::size_t(p.c) * elem);
    if (p.seq_idx) {
      // Packed sequences of 1 to ~2 windows and longer ones, so that windows cross boundaries often
      // (and now and then one sequence id comes back after another, which seq_idx allows).
      const std::int64_t len = p.src_w(), window = std::int64_t(p.kw - 1) * p.dw + 1;
      std::vector<std::int32_t> ids(std::size_t(p.n * len));
      std::uint64_t state = 0x9E3779B97F4A7C15ull;
      for (std::int64_t n = 0; n < p.n; ++n) {
        std::int32_t id = 0;
        for (std::int64_t t = 0; t < len;) {
          state = state * 6364136223846793005ull + 1442695040888963407ull;
          const std::int64_t run = (state >> 33) % 4 == 0 ? 1 + std::int64_t(state >> 40) % (2 * window)
                                                          : 1 + std::int64_t(state >> 40) % std::max<std::int64_t>(len / 4, 1);
          for (std::int64_t i = 0; i < run && t < len; ++i, ++t) ids[std::size_t(n * len + t)] = id;
          id = (state >> 20) % 8 == 0 && id > 0 ? id - 1 : id + 1;
        }
      }
      seq_ = DeviceBuffer(ids.size() * sizeof(std::int32_t));
      detail::cuda_check(cudaMemcpy(seq_.get(), ids.data(), ids.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
                         "cudaMemcpy (seq_idx)");
    }
    if (workspace > 0) workspace_ = DeviceBuffer(workspace);
    ref_ = DeviceBuffer(out_count * 4);
    ref_bias_ = DeviceBuffer(std::size_t(p.c) * 4);
    LaunchArgs a = args(0);
    run_reference(p, arch, a, ref_.as<float>(), ref_bias_.as<float>(), stream);
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (reference)");
  }

  int slots() const override { return static_cast<int>(src_.size()); }

  cudaError_t launch(const tuner::Candidate& c, const detail::LoadedKernel& kernel, int slot,
                     cudaStream_t stream) override {
    return dwconv::launch(kernel, problem_, configs_.at(std::size_t(c.index)), args(slot), stream);
  }

  tuner::Verdict verify(const tuner::Candidate& c, const detail::LoadedKernel& kernel, cudaStream_t stream) override {
    tuner::Verdict v;
    const std::size_t elem = std::size_t(problem_.element_bytes());
    detail::cuda_check(cudaMemsetAsync(dst_[0].get(), 0xFF, std::size_t(out_count_) * elem, stream), "poison");
    detail::cuda_check(cudaMemsetAsync(bias_grad_.get(), 0xFF, std::size_t(problem_.c) * elem, stream), "poison");
    if (!tuner::finish_candidate(launch(c, kernel, 0, stream), stream,
                                 Error::Context{"dwconv", problem_.key(), c.label, "", ""}, v))
      return v;
    double worst = tuner::compare_on_device(kernels_[kCompare], dst_[0].get(), out_count_, ref_.as<float>(),
                                            out_count_, 1, out_count_, &v.bad_elements, stream);
    if (problem_.direction == DwDirection::backward_weight && problem_.bias)
      worst = std::max(worst, tuner::compare_on_device(kernels_[kCompare], bias_grad_.get(), problem_.c,
                                                       ref_bias_.as<float>(), problem_.c, 1, problem_.c,
                                                       &v.bad_elements, stream));
    v.relative_error = worst;
    v.ok = v.bad_elements == 0 && worst <= tolerance(problem_);
    if (!v.ok)
      v.message = fmt::format("wrong result: relative error {:.3g} (tolerance {:.3g}), {} bad elements", worst,
                              tolerance(problem_), v.bad_elements);
    return v;
  }

  double model_bytes() const override { return dwconv::model_bytes(problem_, problem_.n); }

 private:
  LaunchArgs args(int slot) const {
    const bool wgrad = problem_.direction == DwDirection::backward_weight;
    const bool with_aux = wgrad || problem_.gradient_prep || problem_.fused_data();
    const bool fused = problem_.fused_weight() || problem_.fused_data();
    LaunchArgs a{};
    a.src = src_[std::size_t(slot)].get();
    a.dst = dst_[std::size_t(slot)].get();
    a.weight = weight_.get();
    // The fused gradients' z reads a bias (optional there: the tests pass none too).
    a.bias = (problem_.bias && problem_.direction == DwDirection::forward) || fused ? bias_.get() : nullptr;
    a.seq_idx = problem_.seq_idx ? static_cast<const std::int32_t*>(seq_.get()) : nullptr;
    a.aux = with_aux ? aux_[std::size_t(slot)].get() : nullptr;
    a.bias_grad = wgrad && problem_.bias ? bias_grad_.get() : nullptr;
    a.batch = problem_.n;
    a.workspace = workspace_.get();
    return a;
  }

  Problem problem_;
  std::vector<Config> configs_;
  const std::vector<detail::LoadedKernel>& kernels_;
  std::int64_t src_count_ = 0, dst_count_ = 0, out_count_ = 0;
  std::vector<DeviceBuffer> src_, aux_, dst_;
  DeviceBuffer weight_, bias_, bias_grad_, seq_, workspace_, ref_, ref_bias_;
};

}  // namespace

std::vector<tuner::Candidate> make_candidates(const Problem& p, const std::vector<Config>& configs,
                                              const std::string& arch) {
  std::vector<tuner::Candidate> out;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    tuner::Candidate candidate;
    candidate.label = c.label();
    candidate.config_json = c.to_json().dump();
    candidate.request = compile_request(p, c, arch);
    const Geometry g = geometry(p, c, p.n);
    candidate.block_threads = g.block;
    candidate.dynamic_smem = g.dynamic_smem;
    candidate.compile_cost = compile_cost(p, c);
    // Ties go to deterministic, fewer splits, register filters, no staging.
    if (const auto* w = std::get_if<WgradConfig>(&c.variant()))
      candidate.tie_rank = (w->atomic ? 1000 : 0) + w->splits + (w->staged ? 1 : 0);
    else if (const auto* t = std::get_if<TiledConfig>(&c.variant()))
      candidate.tie_rank = (t->smem_filter ? 1 : 0) + (t->smem_halo ? 1 : 0);
    candidate.index = static_cast<int>(i);
    out.push_back(std::move(candidate));
  }
  return out;
}

std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t l2_bytes, cudaStream_t stream) {
  return std::make_unique<DwConvHarness>(problem, std::move(configs), arch, l2_bytes, stream);
}

LaunchArgs launch_args(const DwConvArgs& a) {
  LaunchArgs l{};
  l.batch = a.n;
  l.weight = a.weight;
  switch (a.direction) {
    case DwDirection::forward:
      l.src = a.x, l.dst = a.y, l.bias = a.bias;
      break;
    case DwDirection::backward_data:
      l.src = a.dy, l.dst = a.dx;
      if (fused_data_gradient(a)) l.aux = a.x, l.bias = a.bias;
      break;
    case DwDirection::backward_weight:
      l.src = a.x, l.aux = a.dy, l.dst = a.dweight, l.bias_grad = a.dbias;
      if (fused_weight_gradient(a)) l.bias = a.bias;
      break;
  }
  if (in_kernel_seq_idx(a)) l.seq_idx = a.seq_idx;
  return l;
}

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& a, cudaStream_t stream) {
  const Geometry g = geometry(problem, config, a.batch);
  KvtDwConvParams params = kernel_params(problem, a);
  if (config.kernel() == Kernel::wgrad) {
    params.splits = config.wgrad().splits;
    if (g.workspace_bytes > 0) {
      // Layout: [f32 partials or accumulator][one arrival counter per block column]; the tail
      // geometry().counter_bytes (counters, plus the accumulator for atomics) starts at zero.
      char* base = static_cast<char*>(a.workspace);
      params.workspace = reinterpret_cast<float*>(base);
      params.counters = reinterpret_cast<unsigned*>(base + (g.workspace_bytes - std::size_t(g.grid_x) * 4));
      const cudaError_t zeroed =
          cudaMemsetAsync(base + (g.workspace_bytes - g.counter_bytes), 0, g.counter_bytes, stream);
      if (zeroed != cudaSuccess) return zeroed;
    }
  }
  return kernel.launch(dim3(g.grid_x, g.grid_y), dim3(g.block), g.dynamic_smem, stream, params);
}

void run_reference(const Problem& problem, const std::string& arch, const LaunchArgs& a, float* out, float* bias_out,
                   cudaStream_t stream) {
  KvtDwConvParams params = kernel_params(problem, a);
  const auto& kernels = tuner::support_kernels(reference_request(problem, arch));
  tuner::launch_raw(kernels[kReference], 4096, 128, stream, {&params, &out, &bias_out}, "dwconv reference kernel");
}

}  // namespace kvtune::dwconv
