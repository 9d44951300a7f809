#include "kernel_templates/dwconv_decode/dwconv_decode_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/dwconv_decode/dwconv_decode_params.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_reference.h"
#include "core/cuda_check.h"
#include "tuner/harness_support.h"

namespace kvtune::dwconv_decode {
namespace {

using tuner::DeviceBuffer;

// Relative L2 error allowed against the float64 reference: f32 arithmetic or the 16-bit output rounding.
double tolerance(const Problem& p) {
  switch (p.dtype) {
    case DType::f32: return 1e-5;
    case DType::f16: return 2e-3;
    case DType::bf16: return 1e-2;
  }
  return 0;
}

// Host values exact in every dtype (tuner::exact_values), and their bytes in the problem's dtype.
DeviceBuffer upload(DType dtype, const std::vector<double>& values) {
  return tuner::upload_values(values, dtype == DType::f32 ? 4 : 2, [dtype](double v) { return exact_bits(dtype, v); });
}

class DecodeHarness final : public tuner::Harness {
 public:
  DecodeHarness(const Problem& p, std::vector<Config> configs, const std::string& arch, std::int64_t l2_bytes,
                cudaStream_t stream)
      : problem_(p), configs_(std::move(configs)), kernels_(tuner::support_kernels(support_request(p, arch))) {
    const std::size_t elem = std::size_t(p.element_bytes());
    batch_ = p.n;
    // With state indices: one spare slot, rows in reverse order, every fifth row padding.
    slots_ = p.indices ? batch_ + 1 : batch_;
    tokens_ = batch_ * p.c * p.seqlen;
    state_count_ = slots_ * p.c * p.state_len;
    std::vector<std::int32_t> indices, positions;
    if (p.indices)
      for (std::int64_t b = 0; b < batch_; ++b) indices.push_back(b % 5 == 3 ? -1 : std::int32_t(batch_ - b));
    if (p.circular)  // positions before, at and past one turn of the buffer; 0 is a fresh sequence
      for (std::int64_t b = 0; b < batch_; ++b) positions.push_back(std::int32_t((b * 37) % (3 * p.state_len + 1)));
    const auto x = tuner::exact_values(std::size_t(tokens_), 11, 64);
    const auto w = tuner::exact_values(std::size_t(p.c * p.k), 12, 32);
    const auto bias = p.bias ? tuner::exact_values(std::size_t(p.c), 13, 64) : std::vector<double>{};
    auto state = tuner::exact_values(std::size_t(state_count_), 14, 64);
    std::vector<double> y(std::size_t(tokens_), std::nan(""));  // padding rows stay as poisoned
    pristine_state_ = upload(p.dtype, state);
    reference_decode(p, batch_, slots_, x, w, bias, positions, indices, state, y);
    ref_y_ = tuner::upload_floats(y);
    ref_state_ = tuner::upload_floats(state);
    weight_ = upload(p.dtype, w);
    if (p.bias) bias_ = upload(p.dtype, bias);
    if (p.indices) indices_ = tuner::upload_raw(indices);
    if (p.circular) positions_ = tuner::upload_raw(positions);
    const std::size_t slot_bytes = (2 * std::size_t(tokens_) + std::size_t(state_count_)) * elem;
    std::size_t free_bytes = 0, total_bytes = 0;
    detail::cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    if (slot_bytes * 2 > free_bytes / 2)
      throw Error(Error::Context{"dwconv_decode", p.key(), "", "", ""},
                  fmt::format("not enough free GPU memory to tune: need {} MiB, {} MiB free", (slot_bytes * 2) >> 20,
                              free_bytes >> 20));
    std::size_t slots = std::clamp<std::size_t>(std::size_t(std::ceil(2.0 * double(l2_bytes) / double(slot_bytes))), 1, 64);
    while (slots > 1 && slots * slot_bytes > free_bytes / 4) --slots;
    for (std::size_t s = 0; s < slots; ++s) {
      x_.push_back(upload(p.dtype, x));
      y_.emplace_back(std::size_t(tokens_) * elem);
      state_.emplace_back(std::size_t(state_count_) * elem);
      detail::cuda_check(cudaMemcpyAsync(state_.back().get(), pristine_state_.get(), std::size_t(state_count_) * elem,
                                         cudaMemcpyDeviceToDevice, stream),
                         "cudaMemcpyAsync (decode state)");
    }
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (decode harness)");
  }

  int slots() const override { return static_cast<int>(x_.size()); }

  cudaError_t launch(const tuner::Candidate& c, const detail::LoadedKernel& kernel, int slot,
                     cudaStream_t stream) override {
    return dwconv_decode::launch(kernel, problem_, configs_.at(std::size_t(c.index)), args(slot), stream);
  }

  tuner::Verdict verify(const tuner::Candidate& c, const detail::LoadedKernel& kernel, cudaStream_t stream) override {
    tuner::Verdict v;
    const std::size_t elem = std::size_t(problem_.element_bytes());
    // Timing launches moved the state on: start again from the reference's input.
    detail::cuda_check(cudaMemcpyAsync(state_[0].get(), pristine_state_.get(), std::size_t(state_count_) * elem,
                                       cudaMemcpyDeviceToDevice, stream),
                       "restore the state");
    detail::cuda_check(cudaMemsetAsync(y_[0].get(), 0xFF, std::size_t(tokens_) * elem, stream), "poison");
    if (!tuner::finish_candidate(launch(c, kernel, 0, stream), stream,
                                 Error::Context{"dwconv_decode", problem_.key(), c.label, "", ""}, v))
      return v;
    const double y_error = tuner::compare_on_device(kernels_[0], y_[0].get(), tokens_, ref_y_.as<float>(), tokens_, 1,
                                                    tokens_, &v.bad_elements, stream);
    const double state_error = tuner::compare_on_device(kernels_[0], state_[0].get(), state_count_, ref_state_.as<float>(),
                                                        state_count_, 1, state_count_, &v.bad_elements, stream);
    v.relative_error = std::max(y_error, state_error);
    v.ok = v.bad_elements == 0 && y_error <= tolerance(problem_) && state_error == 0;
    if (!v.ok)
      v.message = fmt::format("wrong result: relative error y {:.3g} (tolerance {:.3g}), state {:.3g} (exact), {} bad "
                              "elements",
                              y_error, tolerance(problem_), state_error, v.bad_elements);
    return v;
  }

  double model_bytes() const override { return dwconv_decode::model_bytes(problem_, batch_); }

 private:
  LaunchArgs args(int slot) const {
    LaunchArgs a{};
    a.x = x_[std::size_t(slot)].get();
    a.y = y_[std::size_t(slot)].get();
    a.state = state_[std::size_t(slot)].get();
    a.weight = weight_.get();
    a.bias = problem_.bias ? bias_.get() : nullptr;
    a.cache_seqlens = problem_.circular ? positions_.as<std::int32_t>() : nullptr;
    a.state_indices = problem_.indices ? indices_.as<std::int32_t>() : nullptr;
    a.batch = batch_;
    a.state_len = problem_.state_len;
    a.state_slots = slots_;
    return a;
  }

  Problem problem_;
  std::vector<Config> configs_;
  const std::vector<detail::LoadedKernel>& kernels_;
  std::int64_t batch_ = 0, slots_ = 0, tokens_ = 0, state_count_ = 0;
  std::vector<DeviceBuffer> x_, y_, state_;
  DeviceBuffer pristine_state_, weight_, bias_, indices_, positions_, ref_y_, ref_state_;
};

}  // namespace

std::uint32_t exact_bits(DType dtype, double v) {
  const float f = static_cast<float>(v);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  if (dtype == DType::f32) return bits;
  if (dtype == DType::bf16) return bits >> 16;  // exact: at most 8 significant bits
  // f16: sign, exponent rebiased from 127 to 15, the top 10 mantissa bits (exact for these values).
  if ((bits & 0x7fffffffu) == 0) return (bits >> 16) & 0x8000u;
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t exponent = ((bits >> 23) & 0xffu) - 127 + 15;
  return sign | (exponent << 10) | ((bits >> 13) & 0x3ffu);
}

std::vector<tuner::Candidate> make_candidates(const Problem& p, const std::vector<Config>& configs,
                                              const std::string& arch) {
  std::vector<tuner::Candidate> out;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    tuner::Candidate candidate;
    candidate.label = c.label();
    candidate.config_json = c.to_json().dump();
    candidate.request = compile_request(p, c, arch);
    candidate.block_threads = geometry(p, c, p.n).block;
    // Ties go to fewer registers a thread, then fewer token groups (no block barrier).
    candidate.tie_rank = c.channels_per_thread * (c.tokens_per_thread + p.k) + (c.tokens_per_thread < p.seqlen ? 100 : 0);
    candidate.index = static_cast<int>(i);
    out.push_back(std::move(candidate));
  }
  return out;
}

std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t l2_bytes, cudaStream_t stream) {
  return std::make_unique<DecodeHarness>(problem, std::move(configs), arch, l2_bytes, stream);
}

LaunchArgs launch_args(const DwConvDecodeArgs& a) {
  LaunchArgs l{};
  l.x = a.x, l.weight = a.weight, l.bias = a.bias, l.y = a.y, l.state = a.state;
  l.cache_seqlens = a.cache_seqlens, l.state_indices = a.state_indices;
  l.batch = a.batch;
  l.state_len = a.state_len == 0 ? a.kernel_w - 1 : a.state_len;
  l.state_slots = a.state_slots == 0 ? a.batch : a.state_slots;
  return l;
}

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& a, cudaStream_t stream) {
  const Geometry g = geometry(problem, config, a.batch);
  KvtDwConvDecodeParams params{};
  params.x = a.x, params.weight = a.weight, params.bias = a.bias, params.y = a.y, params.state = a.state;
  params.cache_seqlens = a.cache_seqlens, params.state_indices = a.state_indices;
  params.batch = a.batch, params.channels = problem.c, params.state_len = a.state_len, params.state_slots = a.state_slots;
  // A step is latency-bound: on sm_90 its grid is launched while the stream's previous kernel runs
  // and waits for it in the kernel (griddepcontrol.wait before its first read, or with
  // overlap_prologue before its first read of x, the state and cache_seqlens), which hides the launch.
  if (kernel.attributes().binary_version >= 90)
    return kernel.launch_programmatic(dim3(g.grid), dim3(g.block), 0, stream, params);
  return kernel.launch(dim3(g.grid), dim3(g.block), 0, stream, params);
}

}  // namespace kvtune::dwconv_decode
