#include "kernel_templates/normalize/normalize_tuning.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/normalize/normalize_params.h"
#include "lib/src/cuda_check.h"
#include "tuner/harness_support.h"

namespace kvtune::normalize {
namespace {

// Relative L2 error a candidate may have against the float64 reference: f32 arithmetic, or the
// rounding of the 16-bit output.
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1e-5;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1e-2;
  }
  return 0;
}

// Reference, compare (dtype and f32) and fill (dtype and f32) kernels of a problem.
detail::CompileRequest support_request(const Problem& p, const std::string& arch) {
  detail::CompileRequest request = reference_request(p, arch);
  const char* type = p.dtype == DType::f32 ? "float" : p.dtype == DType::f16 ? "kvt_f16" : "kvt_bf16";
  request.name_expressions.push_back(fmt::format("kvt_fill_random<{}>", type));
  request.name_expressions.push_back("kvt_fill_random<float>");
  return request;
}
enum SupportKernel { kReference, kCompare, kCompareF32, kFill, kFillF32 };

using tuner::DeviceBuffer;

class NormalizeHarness final : public tuner::Harness {
 public:
  NormalizeHarness(const Problem& p, std::vector<Config> configs, const std::string& arch, std::int64_t l2_bytes,
                   cudaStream_t stream)
      : problem_(p), configs_(std::move(configs)), kernels_(tuner::support_kernels(support_request(p, arch))) {
    const std::int64_t elem = p.element_bytes();
    const std::int64_t align_elems = std::max<std::int64_t>(1, p.align_bytes / elem);
    ld_ = (p.cols + align_elems - 1) / align_elems * align_elems;
    const std::size_t plane = std::size_t(p.rows) * std::size_t(ld_) * std::size_t(elem);
    const std::size_t reference_bytes = std::size_t(p.rows) * std::size_t(p.cols) * 4 + std::size_t(p.rows) * 16;
    std::size_t free_bytes = 0, total_bytes = 0;
    detail::cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    // Tuning memory is bounded: one slot must fit in half the free memory, rotation in a quarter.
    if (2 * plane + reference_bytes > free_bytes / 2)
      throw Error(Error::Context{"normalize", p.key(), "", "", ""},
                  fmt::format("not enough free GPU memory to tune: need {} MiB, {} MiB free",
                              (2 * plane + reference_bytes) >> 20, free_bytes >> 20));
    std::size_t slots = std::size_t(std::ceil(2.0 * double(l2_bytes) / double(2 * plane)));
    slots = std::clamp<std::size_t>(slots, 1, 64);
    while (slots > 1 && slots * 2 * plane + reference_bytes > free_bytes / 4) --slots;
    for (std::size_t s = 0; s < slots; ++s) {
      x_.emplace_back(plane);
      y_.emplace_back(plane);
      fill(x_.back().get(), std::int64_t(plane / elem), 1000 + s, 0.5f, 2.0f, false, stream);
    }
    if (p.gamma) {
      gamma_ = DeviceBuffer(std::size_t(p.cols) * elem);
      fill(gamma_.get(), p.cols, 7, 1.0f, 0.5f, false, stream);
    }
    if (p.beta) {
      beta_ = DeviceBuffer(std::size_t(p.cols) * elem);
      fill(beta_.get(), p.cols, 8, 0.0f, 0.5f, false, stream);
    }
    mean_ = DeviceBuffer(std::size_t(p.rows) * 4);
    rstd_ = DeviceBuffer(std::size_t(p.rows) * 4);
    ref_ = DeviceBuffer(std::size_t(p.rows) * std::size_t(p.cols) * 4);
    ref_mean_ = DeviceBuffer(std::size_t(p.rows) * 4);
    ref_rstd_ = DeviceBuffer(std::size_t(p.rows) * 4);

    KvtNormalizeParams params = base_params(0);
    params.y = ref_.get();
    params.ld_y = p.cols;
    params.mean = ref_mean_.as<float>();
    params.rstd = ref_rstd_.as<float>();
    tuner::launch_raw(kernels_[kReference], unsigned((p.rows + 127) / 128), 128, stream, {&params},
                      "normalize reference kernel");
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (reference)");
  }

  int slots() const override { return static_cast<int>(x_.size()); }

  cudaError_t launch(const tuner::Candidate& c, const detail::LoadedKernel& kernel, int slot,
                     cudaStream_t stream) override {
    const KvtNormalizeParams params = base_params(slot);
    LaunchArgs args{params.x,    params.y,    params.gamma, params.beta, params.mean,
                    params.rstd, problem_.rows, ld_,        ld_,         1e-5f,
                    0};
    return normalize::launch(kernel, problem_, configs_.at(static_cast<std::size_t>(c.index)), args, stream);
  }

  tuner::Verdict verify(const tuner::Candidate& c, const detail::LoadedKernel& kernel, cudaStream_t stream) override {
    tuner::Verdict v;
    const std::size_t plane = std::size_t(problem_.rows) * std::size_t(ld_) * std::size_t(problem_.element_bytes());
    detail::cuda_check(cudaMemsetAsync(y_[0].get(), 0xFF, plane, stream), "cudaMemsetAsync (poison)");
    detail::cuda_check(cudaMemsetAsync(mean_.get(), 0xFF, std::size_t(problem_.rows) * 4, stream), "cudaMemsetAsync");
    detail::cuda_check(cudaMemsetAsync(rstd_.get(), 0xFF, std::size_t(problem_.rows) * 4, stream), "cudaMemsetAsync");
    if (!tuner::finish_candidate(launch(c, kernel, 0, stream), stream,
                                 Error::Context{"normalize", problem_.key(), c.label, "", ""}, v))
      return v;
    const long long rows = problem_.rows;
    double worst = tuner::compare_on_device(kernels_[kCompare], y_[0].get(), ld_, ref_.as<float>(), problem_.cols,
                                            rows, problem_.cols, &v.bad_elements, stream);
    if (problem_.mean_out)
      worst = std::max(worst, tuner::compare_on_device(kernels_[kCompareF32], mean_.get(), 1, ref_mean_.as<float>(), 1,
                                                       rows, 1, &v.bad_elements, stream));
    if (problem_.rstd_out)
      worst = std::max(worst, tuner::compare_on_device(kernels_[kCompareF32], rstd_.get(), 1, ref_rstd_.as<float>(), 1,
                                                       rows, 1, &v.bad_elements, stream));
    v.relative_error = worst;
    v.ok = v.bad_elements == 0 && worst <= tolerance(problem_.dtype);
    if (!v.ok)
      v.message = fmt::format("wrong result: relative error {:.3g} (tolerance {:.3g}), {} bad elements", worst,
                              tolerance(problem_.dtype), v.bad_elements);
    return v;
  }

  double model_bytes() const override { return normalize::model_bytes(problem_, problem_.rows); }

 private:
  KvtNormalizeParams base_params(int slot) const {
    KvtNormalizeParams params{};
    params.x = x_[std::size_t(slot)].get();
    params.y = y_[std::size_t(slot)].get();
    params.gamma = gamma_.get();
    params.beta = beta_.get();
    params.mean = problem_.mean_out ? mean_.as<float>() : nullptr;
    params.rstd = problem_.rstd_out ? rstd_.as<float>() : nullptr;
    params.rows = problem_.rows;
    params.cols = problem_.cols;
    params.ld_x = ld_;
    params.ld_y = ld_;
    params.eps = 1e-5f;
    params.ddof = 0;
    return params;
  }

  void fill(void* out, std::int64_t n, unsigned long long seed, float offset, float scale, bool f32,
            cudaStream_t stream) {
    tuner::fill_random(kernels_[f32 ? kFillF32 : kFill], out, n, seed, offset, scale, stream);
  }

  Problem problem_;
  std::vector<Config> configs_;
  const std::vector<detail::LoadedKernel>& kernels_;
  std::int64_t ld_ = 0;
  std::vector<DeviceBuffer> x_, y_;
  DeviceBuffer gamma_, beta_, mean_, rstd_, ref_, ref_mean_, ref_rstd_;
};

}  // namespace

std::vector<tuner::Candidate> make_candidates(const Problem& p, const std::vector<Config>& configs,
                                              const std::string& arch) {
  std::vector<tuner::Candidate> out;
  out.reserve(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    tuner::Candidate candidate;
    candidate.label = c.label();
    candidate.config_json = c.to_json().dump();
    candidate.request = compile_request(p, c, arch);
    const Geometry g = geometry(p, c, p.rows);
    candidate.block_threads = g.block;
    candidate.dynamic_smem = g.dynamic_smem;
    // Ties go to fewer global passes, then wider vectors, then two-pass statistics.
    candidate.tie_rank = static_cast<int>(c.keep) * 100 + (16 - c.vector_bytes) * 2 + static_cast<int>(c.stat);
    candidate.index = static_cast<int>(i);
    out.push_back(std::move(candidate));
  }
  return out;
}

std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t l2_bytes, cudaStream_t stream) {
  return std::make_unique<NormalizeHarness>(problem, std::move(configs), arch, l2_bytes, stream);
}

void run_reference(const Problem& problem, const std::string& arch, const LaunchArgs& a, cudaStream_t stream) {
  KvtNormalizeParams params{a.x,    a.y,          a.gamma, a.beta, a.mean, a.rstd,
                            a.rows, problem.cols, a.ld_x,  a.ld_y, a.eps,  a.ddof};
  tuner::launch_raw(tuner::support_kernels(support_request(problem, arch))[kReference], unsigned((a.rows + 127) / 128),
                    128, stream, {&params}, "normalize reference kernel");
}

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& a, cudaStream_t stream) {
  const Geometry g = geometry(problem, config, a.rows);
  const KvtNormalizeParams params{a.x,    a.y,          a.gamma, a.beta, a.mean, a.rstd,
                                  a.rows, problem.cols, a.ld_x,  a.ld_y, a.eps,  a.ddof};
  return kernel.launch(dim3(g.grid), dim3(g.block), g.dynamic_smem, stream, params);
}

}  // namespace kvtune::normalize
