#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/dwconv_states/dwconv_states_params.h"
#include "kernel_templates/dwconv_states/dwconv_states_reference.h"
#include "core/cuda_check.h"
#include "tuner/harness_support.h"

namespace kvtune::dwconv_states {
namespace {

using tuner::DeviceBuffer;

constexpr std::int64_t kMaxReferenceElements = std::int64_t(1) << 23;

// Relative L2 error allowed against the float64 reference: f32 arithmetic, or 16-bit rounding (the
// weight gradient's correction is added to an already rounded value: two roundings).
double tolerance(const Problem& p) {
  switch (p.dtype) {
    case DType::f32: return 1e-5;
    case DType::f16: return 3e-3;
    case DType::bf16: return 2e-2;
  }
  return 0;
}

DeviceBuffer upload(DType dtype, const std::vector<double>& values) {
  return tuner::upload_values(values, dtype == DType::f32 ? 4 : 2, [dtype](double v) { return round_bits(dtype, v); });
}

class StatesHarness final : public tuner::Harness {
 public:
  StatesHarness(const Problem& p, std::vector<Config> configs, const std::string& arch, cudaStream_t stream)
      : problem_(p), configs_(std::move(configs)), kernels_(tuner::support_kernels(support_request(p, arch))) {
    // The float64 reference of the whole operation runs on the CPU, on all cores: at most
    // kMaxReferenceElements a tensor, but at least one row (the rows of the bucket beyond them are
    // left out; the fix-up's work is per row, so its variants rank alike on fewer rows).
    batch_ = std::clamp<std::int64_t>(kMaxReferenceElements / (p.c * p.w), 1, p.n);
    const std::int64_t s = p.state_len();
    tensor_ = batch_ * p.c * p.w;
    state_count_ = batch_ * p.c * s;
    // x (the input gradient never reads it) and dy (the gradients', or the gradient prep's).
    const bool reads_x = p.direction != DwDirection::backward_data;
    const bool reads_g = p.direction != DwDirection::forward || p.gradient_prep;
    const auto x = reads_x ? tuner::exact_values(std::size_t(tensor_), 21, 64) : std::vector<double>{};
    const auto w = tuner::exact_values(std::size_t(p.c * p.k), 22, 32);
    const auto bias = p.bias ? tuner::exact_values(std::size_t(p.c), 23, 64) : std::vector<double>{};
    const auto g = reads_g ? tuner::exact_values(std::size_t(tensor_), 24, 64) : std::vector<double>{};
    const auto init = p.initial_state ? tuner::exact_values(std::size_t(state_count_), 25, 64) : std::vector<double>{};
    // Packed sequences of about w / 8 positions (at least the state's length, at most 2048): several
    // boundaries a row for the verification, and the fix-up's work what packed training data asks
    // of it. Sequences of a few positions marked nearly every output and ranked the variants on a
    // workload no model packs (H100: 0.9 ms for 1 x 4096 x 16384 bf16, bench/NOTES.md).
    const std::int64_t typical = std::clamp<std::int64_t>(p.w / 8, std::max<std::int64_t>(2, s + 1), 2048);
    const auto seq = p.seq_idx ? packed_seq_idx(batch_, p.w, typical, 26) : std::vector<std::int32_t>{};
    // The whole operation's result (the reference), then in its place the plain convolution's (what
    // the tuned kernel leaves, the fix-up's input): forward and backward_data recompute only the
    // outputs the options change (plain_from_full), the weight gradient sums everything twice.
    std::vector<double> values, state, plain_weight;
    switch (p.direction) {
      case DwDirection::forward:
        values = reference_forward(p, batch_, x, w, bias, init, seq, g, p.state_out ? &state : nullptr);
        break;
      case DwDirection::backward_data:
        values = reference_backward_data(p, batch_, g, w, seq, p.state_out ? &state : nullptr);
        break;
      case DwDirection::backward_weight: {
        std::vector<double> dbias;
        reference_backward_weight(p, batch_, x, g, init, seq, values, dbias);
        reference_backward_weight(p, batch_, x, g, {}, {}, plain_weight, dbias);
        break;
      }
    }
    dst_count_ = static_cast<std::int64_t>(values.size());
    ref_dst_ = tuner::upload_floats(values);
    if (p.direction == DwDirection::backward_weight)
      values = std::move(plain_weight);
    else
      plain_from_full(p, batch_, values, p.direction == DwDirection::backward_data ? g : x, w, bias, seq, g);
    pristine_ = upload(p.dtype, values);
    src_ = upload(p.dtype, p.direction == DwDirection::backward_data ? g : x);
    if (p.gradient_prep || p.direction == DwDirection::backward_weight) aux_ = upload(p.dtype, g);
    weight_ = upload(p.dtype, w);
    if (p.bias) bias_ = upload(p.dtype, bias);
    if (p.initial_state) init_ = upload(p.dtype, init);
    if (p.seq_idx) seq_ = tuner::upload_raw(seq);
    dst_ = DeviceBuffer(std::size_t(dst_count_) * std::size_t(p.element_bytes()));
    if (p.state_out) {
      ref_state_ = tuner::upload_floats(state);
      state_ = DeviceBuffer(std::size_t(state_count_) * std::size_t(p.element_bytes()));
    }
    detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (states harness)");
  }

  int slots() const override { return 1; }  // a fix-up touches a few rows of each tensor: nothing to rotate

  cudaError_t launch(const tuner::Candidate& c, const detail::LoadedKernel& kernel, int, cudaStream_t stream) override {
    return dwconv_states::launch(kernel, problem_, configs_.at(std::size_t(c.index)), args(), stream);
  }

  tuner::Verdict verify(const tuner::Candidate& c, const detail::LoadedKernel& kernel, cudaStream_t stream) override {
    tuner::Verdict v;
    const std::size_t elem = std::size_t(problem_.element_bytes());
    // Start from the plain result again (timing launches already fixed it; a weight gradient is
    // corrected in place), the state poisoned.
    detail::cuda_check(cudaMemcpyAsync(dst_.get(), pristine_.get(), std::size_t(dst_count_) * elem, cudaMemcpyDeviceToDevice,
                                       stream),
                       "restore the plain result");
    if (problem_.state_out)
      detail::cuda_check(cudaMemsetAsync(state_.get(), 0xFF, std::size_t(state_count_) * elem, stream), "poison");
    if (!tuner::finish_candidate(launch(c, kernel, 0, stream), stream,
                                 Error::Context{"dwconv_states", problem_.key(), c.label, "", ""}, v))
      return v;
    const double dst_error = tuner::compare_on_device(kernels_[0], dst_.get(), dst_count_, ref_dst_.as<float>(), dst_count_,
                                                      1, dst_count_, &v.bad_elements, stream);
    double state_error = 0;
    if (problem_.state_out)
      state_error = tuner::compare_on_device(kernels_[0], state_.get(), state_count_, ref_state_.as<float>(), state_count_,
                                             1, state_count_, &v.bad_elements, stream);
    // A forward's final state is a copy of inputs: exact. d initial_state is a sum: the tolerance.
    const double state_tolerance = problem_.direction == DwDirection::forward ? 0.0 : tolerance(problem_);
    v.relative_error = std::max(dst_error, state_error);
    v.ok = v.bad_elements == 0 && dst_error <= tolerance(problem_) && state_error <= state_tolerance;
    if (!v.ok)
      v.message = fmt::format("wrong result: relative error {:.3g}, state {:.3g} (tolerance {:.3g}), {} bad elements",
                              dst_error, state_error, tolerance(problem_), v.bad_elements);
    return v;
  }

  double model_bytes() const override { return dwconv_states::model_bytes(problem_, batch_); }

 private:
  LaunchArgs args() const {
    LaunchArgs a;
    a.src = src_.get();
    a.dst = dst_.get();
    a.weight = weight_.get();
    a.bias = problem_.bias ? bias_.get() : nullptr;
    a.aux = aux_.get();
    a.initial_state = problem_.initial_state ? init_.get() : nullptr;
    a.state_out = problem_.state_out ? state_.get() : nullptr;
    a.seq_idx = problem_.seq_idx ? seq_.as<std::int32_t>() : nullptr;
    a.batch = batch_;
    return a;
  }

  Problem problem_;
  std::vector<Config> configs_;
  const std::vector<detail::LoadedKernel>& kernels_;
  std::int64_t batch_ = 0, tensor_ = 0, state_count_ = 0, dst_count_ = 0;
  DeviceBuffer src_, dst_, aux_, weight_, bias_, init_, seq_, state_, pristine_, ref_dst_, ref_state_;
};

}  // namespace

std::uint32_t round_bits(DType dtype, double v) {
  const float f = static_cast<float>(v);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  if (dtype == DType::f32) return bits;
  if (std::isnan(f)) return dtype == DType::bf16 ? 0x7fc0u : 0x7e00u;
  if (dtype == DType::bf16) return (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  // f16: round to nearest even, through the subnormals; overflow to infinity.
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return sign | 0x7c00u;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<std::uint32_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  int exponent = 0;
  const double mantissa = std::frexp(a, &exponent);  // a = mantissa * 2^exponent, mantissa in [0.5, 1)
  std::uint32_t m = static_cast<std::uint32_t>(std::nearbyint(mantissa * 2048.0));  // 11 significant bits
  if (m == 2048) m = 1024, ++exponent;
  const std::uint32_t e = static_cast<std::uint32_t>(exponent - 1 + 15);
  if (e >= 31) return sign | 0x7c00u;
  return sign | (e << 10) | (m & 0x3ffu);
}

std::vector<std::int32_t> packed_seq_idx(std::int64_t rows, std::int64_t length, std::int64_t typical, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> span(1, 2 * std::max<std::int64_t>(1, typical));
  std::vector<std::int32_t> out(std::size_t(rows * length));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int32_t id = static_cast<std::int32_t>(r * 3);
    std::int64_t left = span(rng);
    for (std::int64_t t = 0; t < length; ++t) {
      if (left-- == 0) ++id, left = span(rng) - 1;
      out[std::size_t(r * length + t)] = id;
    }
  }
  return out;
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
    const Geometry g = geometry(p, c, p.n);
    candidate.block_threads = static_cast<int>(g.block * g.block_y);
    candidate.tie_rank = c.block_threads / 32 + c.chunk_positions / 32;  // ties: smaller blocks and chunks
    candidate.index = static_cast<int>(i);
    out.push_back(std::move(candidate));
  }
  return out;
}

std::unique_ptr<tuner::Harness> make_harness(const Problem& problem, std::vector<Config> configs,
                                             const std::string& arch, std::int64_t, cudaStream_t stream) {
  return std::make_unique<StatesHarness>(problem, std::move(configs), arch, stream);
}

LaunchArgs launch_args(const DwConvArgs& args, const Problem& problem, const void* gradient, void* prep_out) {
  LaunchArgs a;
  a.weight = args.weight;
  a.seq_idx = args.seq_idx;
  a.batch = args.n;
  if (problem.gradient_prep) {  // the forward of x, weight and bias, storing dy * act'(z) in prep_out
    a.src = args.x, a.dst = prep_out, a.bias = args.bias, a.aux = args.dy, a.initial_state = args.initial_state;
    return a;
  }
  switch (problem.direction) {
    case DwDirection::forward:
      a.src = args.x, a.dst = args.y, a.bias = args.bias, a.initial_state = args.initial_state;
      a.state_out = args.final_state;
      break;
    case DwDirection::backward_data:
      a.src = gradient, a.dst = args.dx, a.state_out = args.dinitial_state;
      break;
    case DwDirection::backward_weight:
      a.src = args.x, a.aux = gradient, a.dst = args.dweight, a.initial_state = args.initial_state;
      break;
  }
  return a;
}

cudaError_t launch(const detail::LoadedKernel& kernel, const Problem& problem, const Config& config,
                   const LaunchArgs& a, cudaStream_t stream) {
  const Geometry g = geometry(problem, config, a.batch);
  if (g.grid_x == 0) return cudaSuccess;  // nothing of this call changes (e.g. no row is long enough)
  KvtDwConvStatesParams params{};
  params.src = a.src, params.dst = a.dst, params.weight = a.weight, params.bias = a.bias, params.aux = a.aux;
  params.initial_state = a.initial_state, params.state_out = a.state_out, params.seq_idx = a.seq_idx;
  params.batch = a.batch, params.channels = problem.c, params.length = problem.w, params.chunks = g.chunks;
  return kernel.launch(dim3(g.grid_x, g.grid_y), dim3(g.block, g.block_y), 0, stream, params);
}

}  // namespace kvtune::dwconv_states
