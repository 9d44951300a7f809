#include "kernel_templates/normalize/normalize_tuning.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/normalize/normalize_params.h"
#include "core/cuda_check.h"
#include "tuner/harness_support.h"

namespace kvtune::normalize {
namespace {

// Relative L2 error a candidate may have against the float64 reference: f32 arithmetic, or the
// rounding of the 16-bit output.
double tolerance(DType dtype, bool backward) {
  switch (dtype) {
    case DType::f32: return backward ? 1e-4 : 1e-5;  // the backward's row sums cancel more
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
  if (p.backward) request.name_expressions.push_back(fmt::format("kvt_normalize_backward_reference_columns<{}>", type));
  return request;
}
// kColumns: the backward's column reference (backward problems only).
enum SupportKernel { kReference, kCompare, kCompareF32, kFill, kFillF32, kColumns };

// The float64 reference kernels' threads a row (normalize.cu; kKvtReferenceBlock threads a block):
// 32 to 64 columns a thread, at most the whole block.
int reference_threads_per_row(std::int64_t cols) {
  int tpr = 1;
  while (tpr < kKvtReferenceBlock && std::int64_t(tpr) * 64 <= cols) tpr *= 2;
  return tpr;
}

// Launches a float64 reference kernel (forward or backward) over `rows` rows of `cols` columns;
// `args` are its arguments before the threads a row, which this appends.
void launch_reference(const detail::LoadedKernel& kernel, std::int64_t rows, std::int64_t cols, cudaStream_t stream,
                      std::vector<void*> args, const char* what) {
  int tpr = reference_threads_per_row(cols);
  const std::int64_t rows_per_block = kKvtReferenceBlock / tpr;
  args.push_back(&tpr);
  tuner::launch_raw(kernel, unsigned((rows + rows_per_block - 1) / rows_per_block), kKvtReferenceBlock, stream,
                    std::move(args), what);
}

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
    const std::size_t planes = 2 + (p.residual ? 1 : 0) + (p.residual_out ? 1 : 0);  // per rotation slot
    std::size_t workspace_bytes = 0;
    for (const Config& c : configs_) workspace_bytes = std::max(workspace_bytes, geometry(p, c, p.rows).workspace_bytes);
    const std::size_t reference_bytes = std::size_t(p.rows) * std::size_t(p.cols) * 4 * (p.residual_out ? 2 : 1) +
                                        std::size_t(p.rows) * 16 + workspace_bytes;
    std::size_t free_bytes = 0, total_bytes = 0;
    detail::cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    // Tuning memory is bounded: one slot must fit in half the free memory, rotation in a quarter.
    if (planes * plane + reference_bytes > free_bytes / 2)
      throw Error(Error::Context{"normalize", p.key(), "", "", ""},
                  fmt::format("not enough free GPU memory to tune: need {} MiB, {} MiB free",
                              (planes * plane + reference_bytes) >> 20, free_bytes >> 20));
    std::size_t slots = std::size_t(std::ceil(2.0 * double(l2_bytes) / double(planes * plane)));
    slots = std::clamp<std::size_t>(slots, 1, 64);
    while (slots > 1 && slots * planes * plane + reference_bytes > free_bytes / 4) --slots;
    for (std::size_t s = 0; s < slots; ++s) {
      x_.emplace_back(plane);
      y_.emplace_back(plane);
      fill(x_.back().get(), std::int64_t(plane / elem), 1000 + s, 0.5f, 2.0f, false, stream);
      if (p.residual) {  // a residual stream of larger spread than the branch it is added to
        r_.emplace_back(plane);
        fill(r_.back().get(), std::int64_t(plane / elem), 5000 + s, -0.25f, 4.0f, false, stream);
      }
      if (p.residual_out) s_.emplace_back(plane);
    }
    if (p.residual_out) ref_s_ = DeviceBuffer(std::size_t(p.rows) * std::size_t(p.cols) * 4);
    if (p.gamma) {
      gamma_ = DeviceBuffer(std::size_t(p.cols) * elem);
      fill(gamma_.get(), p.cols, 7, 1.0f, 0.5f, false, stream);
    }
    if (p.beta) {
      beta_ = DeviceBuffer(std::size_t(p.cols) * elem);
      fill(beta_.get(), p.cols, 8, 0.0f, 0.5f, false, stream);
    }
    if (workspace_bytes > 0) workspace_ = DeviceBuffer(workspace_bytes);
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
    KvtResidualParams residual = residual_params(0);
    residual.residual_out = ref_s_.get();
    residual.ld_s = p.cols;
    launch_reference(kernels_[kReference], p.rows, p.cols, stream, {&params, &residual}, "normalize reference kernel");
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (reference)");
  }

  int slots() const override { return static_cast<int>(x_.size()); }

  cudaError_t launch(const tuner::Candidate& c, const detail::LoadedKernel& kernel, int slot,
                     cudaStream_t stream) override {
    const KvtNormalizeParams params = base_params(slot);
    LaunchArgs args{params.x,    params.y,    params.gamma, params.beta, params.mean,
                    params.rstd, problem_.rows, ld_,        ld_,         1e-5f,
                    0,           workspace_.get()};
    const KvtResidualParams residual = residual_params(slot);
    args.residual = residual.residual;
    args.residual_out = residual.residual_out;
    args.ld_residual = args.ld_residual_out = ld_;
    return normalize::launch(kernel, problem_, configs_.at(static_cast<std::size_t>(c.index)), args, stream);
  }

  tuner::Verdict verify(const tuner::Candidate& c, const detail::LoadedKernel& kernel, cudaStream_t stream) override {
    tuner::Verdict v;
    const std::size_t plane = std::size_t(problem_.rows) * std::size_t(ld_) * std::size_t(problem_.element_bytes());
    detail::cuda_check(cudaMemsetAsync(y_[0].get(), 0xFF, plane, stream), "cudaMemsetAsync (poison)");
    if (problem_.residual_out)
      detail::cuda_check(cudaMemsetAsync(s_[0].get(), 0xFF, plane, stream), "cudaMemsetAsync (poison)");
    detail::cuda_check(cudaMemsetAsync(mean_.get(), 0xFF, std::size_t(problem_.rows) * 4, stream), "cudaMemsetAsync");
    detail::cuda_check(cudaMemsetAsync(rstd_.get(), 0xFF, std::size_t(problem_.rows) * 4, stream), "cudaMemsetAsync");
    if (!tuner::finish_candidate(launch(c, kernel, 0, stream), stream,
                                 Error::Context{"normalize", problem_.key(), c.label, "", ""}, v))
      return v;
    const long long rows = problem_.rows;
    double worst = tuner::compare_on_device(kernels_[kCompare], y_[0].get(), ld_, ref_.as<float>(), problem_.cols,
                                            rows, problem_.cols, &v.bad_elements, stream);
    if (problem_.residual_out)
      worst = std::max(worst, tuner::compare_on_device(kernels_[kCompare], s_[0].get(), ld_, ref_s_.as<float>(),
                                                       problem_.cols, rows, problem_.cols, &v.bad_elements, stream));
    if (problem_.mean_out)
      worst = std::max(worst, tuner::compare_on_device(kernels_[kCompareF32], mean_.get(), 1, ref_mean_.as<float>(), 1,
                                                       rows, 1, &v.bad_elements, stream));
    if (problem_.rstd_out)
      worst = std::max(worst, tuner::compare_on_device(kernels_[kCompareF32], rstd_.get(), 1, ref_rstd_.as<float>(), 1,
                                                       rows, 1, &v.bad_elements, stream));
    v.relative_error = worst;
    v.ok = v.bad_elements == 0 && worst <= tolerance(problem_.dtype, false);
    if (!v.ok)
      v.message = fmt::format("wrong result: relative error {:.3g} (tolerance {:.3g}), {} bad elements", worst,
                              tolerance(problem_.dtype, false), v.bad_elements);
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
  KvtResidualParams residual_params(int slot) const {
    KvtResidualParams r{};
    r.residual = problem_.residual ? r_[std::size_t(slot)].get() : nullptr;
    r.residual_out = problem_.residual_out ? s_[std::size_t(slot)].get() : nullptr;
    r.ld_r = r.ld_s = ld_;
    return r;
  }

  void fill(void* out, std::int64_t n, unsigned long long seed, float offset, float scale, bool f32,
            cudaStream_t stream) {
    tuner::fill_random(kernels_[f32 ? kFillF32 : kFill], out, n, seed, offset, scale, stream);
  }

  Problem problem_;
  std::vector<Config> configs_;
  const std::vector<detail::LoadedKernel>& kernels_;
  std::int64_t ld_ = 0;
  std::vector<DeviceBuffer> x_, y_, r_, s_;  // r_, s_: the residual and residual_out, when the problem has them
  DeviceBuffer gamma_, beta_, workspace_, mean_, rstd_, ref_, ref_mean_, ref_rstd_, ref_s_;
};

// The backward's harness: rotation slots of (x, dy, dx), the forward's saved statistics and the
// float64 reference of dx, dgamma and dbeta (from slot 0, which verification uses).
class NormalizeBackwardHarness final : public tuner::Harness {
 public:
  NormalizeBackwardHarness(const Problem& p, std::vector<Config> configs, const std::string& arch,
                           std::int64_t l2_bytes, cudaStream_t stream)
      : problem_(p), configs_(std::move(configs)), kernels_(tuner::support_kernels(support_request(p, arch))) {
    const std::int64_t elem = p.element_bytes();
    const std::int64_t align_elems = std::max<std::int64_t>(1, p.align_bytes / elem);
    ld_ = (p.cols + align_elems - 1) / align_elems * align_elems;
    const std::size_t plane = std::size_t(p.rows) * std::size_t(ld_) * std::size_t(elem);
    std::size_t workspace_bytes = 0;
    for (const Config& c : configs_) workspace_bytes = std::max(workspace_bytes, geometry(p, c, p.rows).workspace_bytes);
    const std::size_t fixed = std::size_t(p.rows) * std::size_t(p.cols) * 4 + std::size_t(p.rows) * 24 +
                              std::size_t(p.cols) * 16 + workspace_bytes;
    const std::size_t planes = p.dresidual ? 4 : 3;  // per rotation slot
    std::size_t free_bytes = 0, total_bytes = 0;
    detail::cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    if (planes * plane + fixed > free_bytes / 2)
      throw Error(Error::Context{"normalize", p.key(), "", "", ""},
                  fmt::format("not enough free GPU memory to tune: need {} MiB, {} MiB free",
                              (planes * plane + fixed) >> 20, free_bytes >> 20));
    std::size_t slots = std::size_t(std::ceil(2.0 * double(l2_bytes) / double(planes * plane)));
    slots = std::clamp<std::size_t>(slots, 1, 64);
    while (slots > 1 && slots * planes * plane + fixed > free_bytes / 4) --slots;
    for (std::size_t s = 0; s < slots; ++s) {
      x_.emplace_back(plane);
      dy_.emplace_back(plane);
      dx_.emplace_back(plane);
      fill(x_.back().get(), std::int64_t(plane / elem), 1000 + s, 0.5f, 2.0f, false, stream);
      fill(dy_.back().get(), std::int64_t(plane / elem), 3000 + s, 0.0f, 1.0f, false, stream);
      if (p.dresidual) {
        ds_.emplace_back(plane);
        fill(ds_.back().get(), std::int64_t(plane / elem), 6000 + s, 0.0f, 1.0f, false, stream);
      }
    }
    if (p.gamma) {
      gamma_ = DeviceBuffer(std::size_t(p.cols) * elem);
      fill(gamma_.get(), p.cols, 7, 1.0f, 0.5f, false, stream);
    }
    dgamma_ = DeviceBuffer(std::size_t(p.cols) * elem);
    dbeta_ = DeviceBuffer(std::size_t(p.cols) * elem);
    if (workspace_bytes > 0) workspace_ = DeviceBuffer(workspace_bytes);
    mean_ = DeviceBuffer(std::size_t(p.rows) * 4);
    rstd_ = DeviceBuffer(std::size_t(p.rows) * 4);
    stats_ = DeviceBuffer(std::size_t(p.rows) * 16);
    ref_dx_ = DeviceBuffer(std::size_t(p.rows) * std::size_t(p.cols) * 4);
    ref_dgamma_ = DeviceBuffer(std::size_t(p.cols) * 4);
    ref_dbeta_ = DeviceBuffer(std::size_t(p.cols) * 4);

    KvtNormalizeBackwardParams params = base_params(0);
    params.dx = ref_dx_.get();
    params.ld_dx = p.cols;
    params.dgamma = ref_dgamma_.get();
    params.dbeta = ref_dbeta_.get();
    double* stats = stats_.as<double>();
    float* mean = problem_.mode == NormMode::rmsnorm ? nullptr : mean_.as<float>();
    float* rstd = rstd_.as<float>();
    launch_reference(kernels_[kReference], p.rows, p.cols, stream, {&params, &stats, &mean, &rstd},
                     "normalize backward reference kernel");
    tuner::launch_raw(kernels_[kColumns], unsigned((p.cols + 127) / 128), 128, stream, {&params, &stats},
                      "normalize backward reference kernel (columns)");
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (reference)");
  }

  int slots() const override { return static_cast<int>(x_.size()); }

  cudaError_t launch(const tuner::Candidate& c, const detail::LoadedKernel& kernel, int slot,
                     cudaStream_t stream) override {
    const auto s = std::size_t(slot);
    const BackwardLaunchArgs args{x_[s].get(),
                                  dy_[s].get(),
                                  dx_[s].get(),
                                  gamma_.get(),
                                  problem_.saved_stats && problem_.mode != NormMode::rmsnorm ? mean_.as<float>() : nullptr,
                                  problem_.saved_stats ? rstd_.as<float>() : nullptr,
                                  problem_.dgamma ? dgamma_.get() : nullptr,
                                  problem_.dbeta ? dbeta_.get() : nullptr,
                                  workspace_.get(),
                                  problem_.rows,
                                  ld_,
                                  ld_,
                                  ld_,
                                  1e-5f,
                                  0,
                                  problem_.dresidual ? ds_[s].get() : nullptr,
                                  ld_};
    return normalize::launch_backward(kernel, problem_, configs_.at(static_cast<std::size_t>(c.index)), args, stream);
  }

  tuner::Verdict verify(const tuner::Candidate& c, const detail::LoadedKernel& kernel, cudaStream_t stream) override {
    tuner::Verdict v;
    const std::size_t elem = std::size_t(problem_.element_bytes());
    const std::size_t plane = std::size_t(problem_.rows) * std::size_t(ld_) * elem;
    detail::cuda_check(cudaMemsetAsync(dx_[0].get(), 0xFF, plane, stream), "cudaMemsetAsync (poison)");
    detail::cuda_check(cudaMemsetAsync(dgamma_.get(), 0xFF, std::size_t(problem_.cols) * elem, stream), "cudaMemsetAsync");
    detail::cuda_check(cudaMemsetAsync(dbeta_.get(), 0xFF, std::size_t(problem_.cols) * elem, stream), "cudaMemsetAsync");
    if (!tuner::finish_candidate(launch(c, kernel, 0, stream), stream,
                                 Error::Context{"normalize", problem_.key(), c.label, "", ""}, v))
      return v;
    double worst = tuner::compare_on_device(kernels_[kCompare], dx_[0].get(), ld_, ref_dx_.as<float>(), problem_.cols,
                                            problem_.rows, problem_.cols, &v.bad_elements, stream);
    const char* worst_output = "dx";
    const auto also = [&](bool asked, const DeviceBuffer& out, const DeviceBuffer& ref, const char* name) {
      if (!asked) return;
      const double e = tuner::compare_on_device(kernels_[kCompare], out.get(), problem_.cols, ref.as<float>(),
                                                problem_.cols, 1, problem_.cols, &v.bad_elements, stream);
      if (e > worst) worst = e, worst_output = name;
    };
    also(problem_.dgamma, dgamma_, ref_dgamma_, "dgamma");
    also(problem_.dbeta, dbeta_, ref_dbeta_, "dbeta");
    v.relative_error = worst;
    // RMSNorm of one element: dx = s * g * (1 - xhat^2) with xhat^2 = x^2 / (x^2 + eps), a difference
    // of nearly equal terms that loses digits in any f32 evaluation (PyTorch's too).
    // (1 - xhat^2 ~ eps / x^2: one f32 rounding of xhat^2 is a relative error of x^2 / eps * 6e-8.)
    const double tol = tolerance(problem_.dtype, true) * (problem_.mode == NormMode::rmsnorm && problem_.cols == 1 ? 100 : 1);
    v.ok = v.bad_elements == 0 && worst <= tol;
    if (!v.ok)
      v.message = fmt::format("wrong result: relative error {:.3g} in {} (tolerance {:.3g}), {} bad elements", worst,
                              worst_output, tol, v.bad_elements);
    return v;
  }

  double model_bytes() const override { return normalize::model_bytes(problem_, problem_.rows); }

 private:
  KvtNormalizeBackwardParams base_params(int slot) const {
    KvtNormalizeBackwardParams params{};
    params.x = x_[std::size_t(slot)].get();
    params.dy = dy_[std::size_t(slot)].get();
    params.dx = dx_[std::size_t(slot)].get();
    params.gamma = gamma_.get();
    params.rows = problem_.rows;
    params.cols = problem_.cols;
    params.ld_x = ld_;
    params.ld_dy = ld_;
    params.ld_dx = ld_;
    params.eps = 1e-5f;
    params.ddof = 0;
    params.row_loop = 1;
    params.group_blocks = 1;
    params.level1_rows = 1;
    params.dres = problem_.dresidual ? ds_[std::size_t(slot)].get() : nullptr;
    params.ld_dres = ld_;
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
  std::vector<DeviceBuffer> x_, dy_, dx_, ds_;  // ds_: the gradient into residual_out (problem.dresidual)
  DeviceBuffer gamma_, dgamma_, dbeta_, workspace_, mean_, rstd_, stats_, ref_dx_, ref_dgamma_, ref_dbeta_;
};

KvtNormalizeBackwardParams backward_params(const Problem& problem, const Config& config, const Geometry& g,
                                           const BackwardLaunchArgs& a) {
  KvtNormalizeBackwardParams params{};
  params.x = a.x;
  params.dy = a.dy;
  params.dx = a.dx;
  params.gamma = a.gamma;
  params.mean = a.mean;
  params.rstd = a.rstd;
  params.dgamma = a.dgamma;
  params.dbeta = a.dbeta;
  auto* base = static_cast<unsigned char*>(a.workspace);
  params.partials = reinterpret_cast<float*>(base);
  params.level1 = base == nullptr ? nullptr : reinterpret_cast<float*>(base + g.level1_offset);
  params.counters = base == nullptr ? nullptr : reinterpret_cast<unsigned*>(base + g.counter_offset);
  params.rows = a.rows;
  params.cols = problem.cols;
  params.ld_x = a.ld_x;
  params.ld_dy = a.ld_dy;
  params.ld_dx = a.ld_dx;
  params.eps = a.eps;
  params.ddof = a.ddof;
  params.row_loop = config.row_loop;
  params.group_blocks = g.group_blocks;
  params.level1_rows = g.level1_rows;
  params.chunks = g.grid;
  params.grid_sum = 0;
  if (g.phase_count > 0 && base != nullptr) {  // split rows: the workspace holds per-slice arrays
    params.stat_partials = reinterpret_cast<float*>(base);
    params.stat_final = reinterpret_cast<float*>(base + g.stat_final_offset);
    params.sum_partials = reinterpret_cast<float*>(base + g.sum_partials_offset);
    params.sum_final = reinterpret_cast<float*>(base + g.sum_final_offset);
    params.partials = reinterpret_cast<float*>(base + g.grad_partials_offset);
    params.level1 = nullptr;
    params.counters = nullptr;
  }
  params.splits = config.splits;
  params.direct = g.direct ? 1 : 0;
  params.grad_groups = g.grad_groups;
  params.dres = a.dresidual_out;
  params.ld_dres = a.ld_dresidual_out;
  return params;
}

KvtNormalizeParams forward_params(const Problem& problem, const LaunchArgs& a) {
  KvtNormalizeParams params{};
  params.x = a.x;
  params.y = a.y;
  params.gamma = a.gamma;
  params.beta = a.beta;
  params.mean = a.mean;
  params.rstd = a.rstd;
  params.rows = a.rows;
  params.cols = problem.cols;
  params.ld_x = a.ld_x;
  params.ld_y = a.ld_y;
  params.eps = a.eps;
  params.ddof = a.ddof;
  return params;
}

KvtResidualParams residual_params(const LaunchArgs& a) {
  return KvtResidualParams{a.residual, a.residual_out, a.ld_residual, a.ld_residual_out};
}

// The one-pass cooperative split form: one launch of as many whole row slots (splits blocks each)
// as the device holds at once (no memset before it: its barrier is the driver's, kvt_grid_sync).
// Where not even one row's slices fit, or the device has no cooperative launch, the variant is
// refused (never launched without the co-residency guarantee: its blocks wait for each other).
cudaError_t launch_cooperative(const detail::LoadedKernel& kernel, const Config& config, const Geometry& g,
                               KvtNormalizeParams& params, const KvtResidualParams& residual, cudaStream_t stream) {
  int resident = 0;
  cudaError_t status = kernel.co_resident_blocks(g.block, 0, &resident);
  if (status != cudaSuccess) return status;
  if (resident == 0) return cudaErrorNotSupported;
  const std::int64_t slots = std::min<std::int64_t>(resident / config.splits, params.rows);
  if (slots < 1) return cudaErrorCooperativeLaunchTooLarge;
  return kernel.launch_cooperative(dim3(unsigned(slots * config.splits)), dim3(g.block), 0, stream, params, residual);
}

// The one-pass cluster form: as many clusters of `splits` blocks as the device holds at once (at
// most one a row), each looping over its rows. Refused where the device has no cluster launch or
// cannot hold one such cluster (never launched otherwise: its blocks wait for each other).
cudaError_t launch_cluster(const detail::LoadedKernel& kernel, const Geometry& g, KvtNormalizeParams& params,
                           const KvtResidualParams& residual, cudaStream_t stream) {
  int clusters = 0;
  cudaError_t status = kernel.active_clusters(g.grid, g.block, g.dynamic_smem, unsigned(g.cluster), &clusters);
  if (status != cudaSuccess) return status;
  if (clusters == 0) return cudaErrorLaunchOutOfResources;
  const std::int64_t resident = std::min<std::int64_t>(clusters, g.grid / unsigned(g.cluster));
  return kernel.launch_cluster(dim3(unsigned(resident * g.cluster)), dim3(g.block), g.dynamic_smem, stream,
                               unsigned(g.cluster), params, residual);
}

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
  if (problem.backward)
    return std::make_unique<NormalizeBackwardHarness>(problem, std::move(configs), arch, l2_bytes, stream);
  return std::make_unique<NormalizeHarness>(problem, std::move(configs), arch, l2_bytes, stream);
}

void run_reference(const Problem& problem, const std::string& arch, const LaunchArgs& a, cudaStream_t stream) {
  KvtNormalizeParams params = forward_params(problem, a);
  KvtResidualParams residual = residual_params(a);
  launch_reference(tuner::support_kernels(support_request(problem, arch))[kReference], a.rows, problem.cols, stream,
                   {&params, &residual}, "normalize reference kernel");
}

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& a, cudaStream_t stream) {
  // The kernel was compiled for the problem's residual form: a missing tensor would be read as null.
  if (problem.residual != (a.residual != nullptr) || problem.residual_out != (a.residual_out != nullptr))
    return cudaErrorInvalidValue;
  const Geometry g = geometry(problem, config, a.rows);
  KvtNormalizeParams params = forward_params(problem, a);
  KvtResidualParams residual = residual_params(a);
  if (g.phase_count == 0) return kernel.launch(dim3(g.grid), dim3(g.block), g.dynamic_smem, stream, params, residual);
  if (a.workspace == nullptr) return cudaErrorInvalidValue;
  auto* base = static_cast<unsigned char*>(a.workspace);
  params.row_partials = reinterpret_cast<float*>(base);
  params.row_final = reinterpret_cast<float*>(base + g.stat_final_offset);
  params.splits = config.splits;
  params.row_loop = config.row_loop;
  if (g.cooperative) return launch_cooperative(kernel, config, g, params, residual, stream);
  if (g.cluster > 0) return launch_cluster(kernel, g, params, residual, stream);
  // Every phase over one chunk of rows, then the next chunk (one chunk: every row).
  const std::size_t elem = std::size_t(problem.element_bytes());
  for (std::int64_t first = 0; first < a.rows; first += g.row_chunk) {
    params.x = static_cast<const char*>(a.x) + std::size_t(first) * std::size_t(a.ld_x) * elem;
    params.y = static_cast<char*>(a.y) + std::size_t(first) * std::size_t(a.ld_y) * elem;
    if (a.residual != nullptr)
      residual.residual = static_cast<const char*>(a.residual) + std::size_t(first) * std::size_t(a.ld_residual) * elem;
    if (a.residual_out != nullptr)
      residual.residual_out = static_cast<char*>(a.residual_out) + std::size_t(first) * std::size_t(a.ld_residual_out) * elem;
    params.mean = a.mean == nullptr ? nullptr : a.mean + first;
    params.rstd = a.rstd == nullptr ? nullptr : a.rstd + first;
    params.rows = std::min<std::int64_t>(g.row_chunk, a.rows - first);
    for (int i = 0; i < g.phase_count; ++i) {
      const cudaError_t s = kernel.launch_phase(g.phases[i], dim3(g.phase_grid[i]), dim3(g.block), 0, stream, params, residual);
      if (s != cudaSuccess) return s;
    }
  }
  return cudaSuccess;
}

}  // namespace kvtune::normalize

namespace kvtune::normalize {

cudaError_t launch_backward(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                            const BackwardLaunchArgs& a, cudaStream_t stream) {
  if (problem.dresidual != (a.dresidual_out != nullptr)) return cudaErrorInvalidValue;
  const Geometry g = geometry(problem, config, a.rows);
  KvtNormalizeBackwardParams params = backward_params(problem, config, g, a);
  if (g.phase_count > 0) {
    if (a.workspace == nullptr) return cudaErrorInvalidValue;
    for (int i = 0; i < g.phase_count; ++i) {
      params.phase = g.phases[i];
      const cudaError_t s = kernel.launch(dim3(g.phase_grid[i]), dim3(g.block), 0, stream, params);
      if (s != cudaSuccess) return s;
    }
    return cudaSuccess;
  }
  if (g.workspace_bytes > 0) {
    if (a.workspace == nullptr) return cudaErrorInvalidValue;
    // The arrival tree's counters start at zero; the cooperative form's barrier is the driver's
    // (kvt_grid_sync), so it launches without this memset.
    if (!g.cooperative) {
      const cudaError_t s =
          cudaMemsetAsync(params.counters, 0, std::size_t(g.level1_rows + 1) * sizeof(unsigned), stream);
      if (s != cudaSuccess) return s;
    }
  }
  if (g.cooperative && g.grid > 0) {
    // At most the co-resident blocks, each looping over its chunks of rows; where the device has no
    // cooperative launch or not one block fits, the variant is refused (its blocks wait for each
    // other: never launched without the co-residency guarantee).
    int resident = 0;
    const cudaError_t s = kernel.co_resident_blocks(g.block, g.dynamic_smem, &resident);
    if (s != cudaSuccess) return s;
    if (resident == 0) return cudaErrorNotSupported;
    params.grid_sum = 1;
    return kernel.launch_cooperative(dim3(std::min<unsigned>(g.grid, unsigned(resident))), dim3(g.block),
                                     g.dynamic_smem, stream, params);
  }
  return kernel.launch(dim3(g.grid), dim3(g.block), g.dynamic_smem, stream, params);
}

void run_backward_reference(const Problem& problem, const std::string& arch, const BackwardLaunchArgs& a,
                            cudaStream_t stream) {
  const auto& kernels = tuner::support_kernels(support_request(problem, arch));
  KvtNormalizeBackwardParams params{};
  params.x = a.x;
  params.dy = a.dy;
  params.dx = a.dx;
  params.gamma = a.gamma;
  params.dgamma = a.dgamma;
  params.dbeta = a.dbeta;
  params.rows = a.rows;
  params.cols = problem.cols;
  params.ld_x = a.ld_x;
  params.ld_dy = a.ld_dy;
  params.ld_dx = a.ld_dx;
  params.eps = a.eps;
  params.ddof = a.ddof;
  params.dres = a.dresidual_out;
  params.ld_dres = a.ld_dresidual_out;
  DeviceBuffer stats(std::size_t(a.rows) * 16);
  double* stats_ptr = stats.as<double>();
  float* none = nullptr;
  launch_reference(kernels[kReference], a.rows, problem.cols, stream, {&params, &stats_ptr, &none, &none},
                   "normalize backward reference kernel");
  tuner::launch_raw(kernels[kColumns], unsigned((problem.cols + 127) / 128), 128, stream, {&params, &stats_ptr},
                    "normalize backward reference kernel (columns)");
  detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (backward reference)");
}

}  // namespace kvtune::normalize
