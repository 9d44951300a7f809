#include "kernel_templates/normalize/normalize_tuning.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/normalize/normalize_params.h"
#include "lib/src/cuda_check.h"

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

// Reference, compare and fill kernels, compiled once per (problem shape class, arch) per process.
struct SupportKernels {
  detail::LoadedKernel reference, compare, compare_f32, fill, fill_f32;
};

const SupportKernels& support_kernels(const Problem& p, const std::string& arch) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<detail::CompileResult, std::string>> compiled;
  detail::CompileRequest request = reference_request(p, arch);
  const char* type = p.dtype == DType::f32 ? "float" : p.dtype == DType::f16 ? "kvt_f16" : "kvt_bf16";
  request.name_expressions.push_back(fmt::format("kvt_fill_random<{}>", type));
  request.name_expressions.push_back("kvt_fill_random<float>");
  const std::string hash = detail::compile_hash(request);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = compiled.find(hash);
  if (it == compiled.end()) it = compiled.emplace(hash, std::make_pair(detail::nvrtc_compile(request), hash)).first;
  // Modules are loaded per call site and device; the kernels below stay valid for the process.
  static std::map<std::pair<std::string, int>, SupportKernels> loaded;
  int device = 0;
  detail::cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  auto& slot = loaded[{hash, device}];
  if (!slot.reference) {
    const auto& result = it->second.first;
    slot.reference = detail::LoadedKernel::load(result.cubin, result.lowered_names[0]);
    slot.compare = detail::LoadedKernel::load(result.cubin, result.lowered_names[1]);
    slot.compare_f32 = detail::LoadedKernel::load(result.cubin, result.lowered_names[2]);
    slot.fill = detail::LoadedKernel::load(result.cubin, result.lowered_names[3]);
    slot.fill_f32 = detail::LoadedKernel::load(result.cubin, result.lowered_names[4]);
  }
  return slot;
}

// A device allocation freed on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) {
    detail::cuda_check(cudaMalloc(&ptr, std::max<std::size_t>(bytes, 256)), "cudaMalloc (tuning scratch)");
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr) { o.ptr = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr, o.ptr);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  template <class T> T* as() const { return static_cast<T*>(ptr); }
};

void launch_support(const detail::LoadedKernel& k, unsigned grid, unsigned block, cudaStream_t stream,
                    std::vector<void*> args, const char* what) {
  detail::cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(k.kernel()), dim3(grid), dim3(block), args.data(),
                                      0, stream),
                     what);
}

class NormalizeHarness final : public tuner::Harness {
 public:
  NormalizeHarness(const Problem& p, std::vector<Config> configs, const std::string& arch, std::int64_t l2_bytes,
                   cudaStream_t stream)
      : problem_(p), configs_(std::move(configs)), kernels_(support_kernels(p, arch)) {
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
      fill(x_.back().ptr, std::int64_t(plane / elem), 1000 + s, 0.5f, 2.0f, false, stream);
    }
    if (p.gamma) {
      gamma_ = DeviceBuffer(std::size_t(p.cols) * elem);
      fill(gamma_.ptr, p.cols, 7, 1.0f, 0.5f, false, stream);
    }
    if (p.beta) {
      beta_ = DeviceBuffer(std::size_t(p.cols) * elem);
      fill(beta_.ptr, p.cols, 8, 0.0f, 0.5f, false, stream);
    }
    mean_ = DeviceBuffer(std::size_t(p.rows) * 4);
    rstd_ = DeviceBuffer(std::size_t(p.rows) * 4);
    ref_ = DeviceBuffer(std::size_t(p.rows) * std::size_t(p.cols) * 4);
    ref_mean_ = DeviceBuffer(std::size_t(p.rows) * 4);
    ref_rstd_ = DeviceBuffer(std::size_t(p.rows) * 4);
    acc_ = DeviceBuffer(3 * sizeof(double));

    KvtNormalizeParams params = base_params(0);
    params.y = ref_.ptr;
    params.ld_y = p.cols;
    params.mean = ref_mean_.as<float>();
    params.rstd = ref_rstd_.as<float>();
    launch_support(kernels_.reference, unsigned((p.rows + 127) / 128), 128, stream, {&params},
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
    detail::cuda_check(cudaMemsetAsync(y_[0].ptr, 0xFF, plane, stream), "cudaMemsetAsync (poison)");
    detail::cuda_check(cudaMemsetAsync(mean_.ptr, 0xFF, std::size_t(problem_.rows) * 4, stream), "cudaMemsetAsync");
    detail::cuda_check(cudaMemsetAsync(rstd_.ptr, 0xFF, std::size_t(problem_.rows) * 4, stream), "cudaMemsetAsync");
    const cudaError_t status = launch(c, kernel, 0, stream);
    if (status != cudaSuccess) {
      cudaGetLastError();
      v.message = fmt::format("launch failed: {}", cudaGetErrorString(status));
      return v;
    }
    const cudaError_t done = cudaStreamSynchronize(stream);
    if (done != cudaSuccess)
      detail::cuda_check(done, "candidate kernel", Error::Context{"normalize", problem_.key(), c.label, "", ""});

    double worst = compare(kernels_.compare, y_[0].ptr, ld_, ref_.ptr, problem_.cols, problem_.cols, v, stream);
    if (problem_.mean_out)
      worst = std::max(worst, compare(kernels_.compare_f32, mean_.ptr, 1, ref_mean_.ptr, 1, 1, v, stream));
    if (problem_.rstd_out)
      worst = std::max(worst, compare(kernels_.compare_f32, rstd_.ptr, 1, ref_rstd_.ptr, 1, 1, v, stream));
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
    params.x = x_[std::size_t(slot)].ptr;
    params.y = y_[std::size_t(slot)].ptr;
    params.gamma = gamma_.ptr;
    params.beta = beta_.ptr;
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
    launch_support(f32 ? kernels_.fill_f32 : kernels_.fill, 2048, 256, stream, {&out, &n, &seed, &offset, &scale},
                   "fill kernel");
  }

  // Returns the relative L2 error; adds unwritten / non-finite elements to v.bad_elements.
  double compare(const detail::LoadedKernel& kernel, void* out, std::int64_t ld_out, void* ref, std::int64_t ld_ref,
                 std::int64_t cols, tuner::Verdict& v, cudaStream_t stream) {
    detail::cuda_check(cudaMemsetAsync(acc_.ptr, 0, 3 * sizeof(double), stream), "cudaMemsetAsync");
    std::int64_t rows = problem_.rows;
    double* acc = acc_.as<double>();
    launch_support(kernel, 1024, 256, stream, {&out, &ld_out, &ref, &ld_ref, &rows, &cols, &acc}, "compare kernel");
    double host[3] = {0, 0, 0};
    detail::cuda_check(cudaMemcpyAsync(host, acc_.ptr, sizeof(host), cudaMemcpyDeviceToHost, stream), "cudaMemcpy");
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (compare)");
    v.bad_elements += host[2];
    return host[1] > 0 ? std::sqrt(host[0] / host[1]) : std::sqrt(host[0]);
  }

  Problem problem_;
  std::vector<Config> configs_;
  const SupportKernels& kernels_;
  std::int64_t ld_ = 0;
  std::vector<DeviceBuffer> x_, y_;
  DeviceBuffer gamma_, beta_, mean_, rstd_, ref_, ref_mean_, ref_rstd_, acc_;
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
  launch_support(support_kernels(problem, arch).reference, unsigned((a.rows + 127) / 128), 128, stream, {&params},
                 "normalize reference kernel");
}

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& a, cudaStream_t stream) {
  const Geometry g = geometry(problem, config, a.rows);
  const KvtNormalizeParams params{a.x,    a.y,          a.gamma, a.beta, a.mean, a.rstd,
                                  a.rows, problem.cols, a.ld_x,  a.ld_y, a.eps,  a.ddof};
  return kernel.launch(dim3(g.grid), dim3(g.block), g.dynamic_smem, stream, params);
}

}  // namespace kvtune::normalize
