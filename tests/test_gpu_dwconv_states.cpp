// [gpu] tests of the causal conv1d's states and packed sequences: (1) Context::dwconv over options
// (initial state, final state, d initial state, seq_idx) x layouts x dtypes x directions x activation,
// odd sizes, against the float64 reference of the whole operation; (2) prefill's final state fed to
// the decode step reproduces the full convolution of the concatenated sequence; (3) every variant of
// the dwconv_states family passes its tuning harness's verification (the plain result in, the whole
// operation's result out). The hidden [gpu-bench][states] times the fix-up against the plain call it
// follows (Mamba prefill / training shape, bf16, tuned).
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "gpu_support.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_reference.h"
#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "tuner/harness_support.h"

using namespace kvtune;

namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

std::size_t esize(DType d) { return d == DType::f32 ? 4 : 2; }

double decode_value(DType d, const unsigned char* in) {
  if (d == DType::f32) {
    float f;
    std::memcpy(&f, in, 4);
    return f;
  }
  if (d == DType::f16) return __half2float(*reinterpret_cast<const __half*>(in));
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(in));
}

// Values exact in every dtype (multiples of 1/64), on the host and on the device.
struct Tensor {
  DType dtype = DType::f32;
  std::vector<double> values;
  tuner::DeviceBuffer device;

  std::vector<double> download() const {
    std::vector<unsigned char> bytes(values.size() * esize(dtype));
    detail::cuda_check(cudaMemcpy(bytes.data(), device.get(), bytes.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::vector<double> out(values.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode_value(dtype, bytes.data() + i * esize(dtype));
    return out;
  }
};

Tensor exact_tensor(DType d, std::size_t n, std::uint64_t seed, int range = 64) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(-range, range);
  Tensor t;
  t.dtype = d;
  t.values.resize(n);
  for (auto& v : t.values) v = k(rng) / 64.0;
  t.device = tuner::DeviceBuffer(std::max<std::size_t>(n * esize(d), 16));
  std::vector<unsigned char> bytes(n * esize(d));
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits = dwconv_states::round_bits(d, t.values[i]);
    std::memcpy(bytes.data() + i * esize(d), &bits, esize(d));
  }
  detail::cuda_check(cudaMemcpy(t.device.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return t;
}

tuner::DeviceBuffer upload_ints(const std::vector<std::int32_t>& v) {
  tuner::DeviceBuffer d(std::max<std::size_t>(v.size() * 4, 16));
  detail::cuda_check(cudaMemcpy(d.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

// Relative L2 error (the weight gradient's 16-bit correction is rounded twice).
double tolerance(DType d) { return d == DType::f32 ? 2e-5 : d == DType::f16 ? 3e-3 : 2e-2; }

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

enum class Option { initial_state, seq_idx };

}  // namespace

TEST_CASE("dwconv states through the Context: options x layouts x dtypes x directions", "[gpu][dwconv][states]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::heuristic;
  Context context(o);
  const std::int64_t n = 3, c = 37, w = 53;
  const int k = 4;
  int cases = 0, i = 0;
  for (DType t : kDTypes)
    for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc})
      for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
        for (Option option : {Option::initial_state, Option::seq_idx})
          for (Activation act : {Activation::none, Activation::silu}) {
            // Dilation by dtype and layout: the two options share the plain problems (one compile each).
            const int d = 1 + (static_cast<int>(t) + static_cast<int>(layout)) % 2;
            ++i;
            INFO(to_string(t) << " " << to_string(layout) << " " << to_string(dir) << " "
                              << (option == Option::seq_idx ? "seq_idx" : "initial_state") << " " << to_string(act)
                              << " dilation " << d);
            dwconv_states::Problem p;
            p.layout = layout, p.dtype = t, p.c = c, p.w = w, p.k = k, p.d = d, p.activation = act;
            const std::int64_t s = p.state_len();
            Tensor x = exact_tensor(t, std::size_t(n * c * w), 1 + i), wt = exact_tensor(t, std::size_t(c * k), 2 + i, 32);
            Tensor bias = exact_tensor(t, std::size_t(c), 3 + i), dy = exact_tensor(t, std::size_t(n * c * w), 4 + i);
            Tensor init = exact_tensor(t, std::size_t(n * c * s), 5 + i);
            Tensor out = exact_tensor(t, std::size_t(n * c * w), 6 + i), state = exact_tensor(t, std::size_t(n * c * s), 7 + i);
            Tensor dw = exact_tensor(t, std::size_t(c * k), 8 + i), db = exact_tensor(t, std::size_t(c), 9 + i);
            const bool packed = option == Option::seq_idx;
            const auto seq = packed ? dwconv_states::packed_seq_idx(n, w, 5, 10 + i) : std::vector<std::int32_t>{};
            const tuner::DeviceBuffer seq_device = upload_ints(seq.empty() ? std::vector<std::int32_t>{0} : seq);
            const std::vector<double> init_values = packed ? std::vector<double>{} : init.values;
            DwConvArgs a;
            a.direction = dir, a.layout = layout, a.dtype = t, a.n = n, a.c = c, a.h = 1, a.w = w, a.kernel_w = k;
            a.dilation_w = d, a.causal = true, a.activation = act;
            a.x = x.device.get(), a.weight = wt.device.get(), a.bias = bias.device.get(), a.dy = dy.device.get();
            if (packed) a.seq_idx = seq_device.as<std::int32_t>();
            else if (dir != DwDirection::backward_data || act != Activation::none) a.initial_state = init.device.get();
            // g: the gradient the backward kernels see (dy * act'(z) with an activation).
            dwconv_states::Problem prep = p;
            prep.gradient_prep = true;
            const auto g = act == Activation::none
                               ? dy.values
                               : dwconv_states::reference_forward(prep, n, x.values, wt.values, bias.values, init_values, seq,
                                                                  dy.values, nullptr);
            if (dir == DwDirection::forward) {
              a.y = out.device.get();
              a.final_state = state.device.get();
              context.dwconv(a);
              REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
              std::vector<double> ref_state;
              const auto ref = dwconv_states::reference_forward(p, n, x.values, wt.values, bias.values, init_values, seq, {},
                                                                &ref_state);
              CHECK(relative_error(out.download(), ref) <= tolerance(t));
              CHECK(state.download() == ref_state);  // copies of inputs: exact
            } else if (dir == DwDirection::backward_data) {
              a.dx = out.device.get();
              if (!packed) a.dinitial_state = state.device.get();
              context.dwconv(a);
              REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
              std::vector<double> ref_dinit;
              const auto ref = dwconv_states::reference_backward_data(p, n, g, wt.values, seq, packed ? nullptr : &ref_dinit);
              CHECK(relative_error(out.download(), ref) <= tolerance(t));
              if (!packed) CHECK(relative_error(state.download(), ref_dinit) <= tolerance(t));
            } else {
              a.dweight = dw.device.get(), a.dbias = db.device.get();
              context.dwconv(a);
              REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
              std::vector<double> ref_dw, ref_db;
              dwconv_states::reference_backward_weight(p, n, x.values, g, init_values, seq, ref_dw, ref_db);
              CHECK(relative_error(dw.download(), ref_dw) <= tolerance(t));
              CHECK(relative_error(db.download(), ref_db) <= tolerance(t));
            }
            ++cases;
          }
  WARN(cases << " states calls checked against float64");
}

TEST_CASE("dwconv states: prefill's final state continues in the decode step", "[gpu][dwconv][states]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::heuristic;
  Context context(o);
  const std::int64_t n = 2, c = 40, prompt = 29, steps = 6;
  const int k = 4;
  for (DType t : {DType::f32, DType::bf16})
    for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc})
      for (bool from_state : {false, true}) {
        INFO(to_string(t) << " " << to_string(layout) << " from_state=" << from_state);
        dwconv_states::Problem whole;
        whole.layout = DwLayout::ncl, whole.dtype = t, whole.c = c, whole.w = prompt + steps, whole.k = k;
        whole.activation = Activation::silu;
        const std::int64_t s = whole.state_len();
        // The whole sequence, channel-first on the host; the prompt uploaded in `layout`.
        Tensor all = exact_tensor(t, std::size_t(n * c * (prompt + steps)), 31);
        Tensor wt = exact_tensor(t, std::size_t(c * k), 32, 32), bias = exact_tensor(t, std::size_t(c), 33);
        Tensor init = exact_tensor(t, std::size_t(n * c * s), 34);
        std::vector<double> prompt_values(std::size_t(n * c * prompt));
        for (std::int64_t b = 0; b < n; ++b)
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t q = 0; q < prompt; ++q)
              prompt_values[std::size_t(layout == DwLayout::nlc ? (b * prompt + q) * c + ch : (b * c + ch) * prompt + q)] =
                  all.values[std::size_t((b * c + ch) * (prompt + steps) + q)];
        Tensor x = exact_tensor(t, prompt_values.size(), 0);
        x.values = prompt_values;
        std::vector<unsigned char> bytes(prompt_values.size() * esize(t));
        for (std::size_t i = 0; i < prompt_values.size(); ++i) {
          const std::uint32_t bits = dwconv_states::round_bits(t, prompt_values[i]);
          std::memcpy(bytes.data() + i * esize(t), &bits, esize(t));
        }
        REQUIRE(cudaMemcpy(x.device.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess);
        Tensor y = exact_tensor(t, prompt_values.size(), 35), state = exact_tensor(t, std::size_t(n * c * s), 36);
        const auto full = dwconv_states::reference_forward(whole, n, all.values, wt.values, bias.values,
                                                           from_state ? init.values : std::vector<double>{}, {}, {}, nullptr);
        DwConvArgs a;
        a.layout = layout, a.dtype = t, a.n = n, a.c = c, a.h = 1, a.w = prompt, a.kernel_w = k, a.causal = true;
        a.activation = Activation::silu;
        a.x = x.device.get(), a.weight = wt.device.get(), a.bias = bias.device.get(), a.y = y.device.get();
        a.initial_state = from_state ? init.device.get() : nullptr;
        a.final_state = state.device.get();
        context.dwconv(a);
        // Then one token at a time from the final state, in place: no copy between them.
        Tensor token = exact_tensor(t, std::size_t(n * c), 37), out = exact_tensor(t, std::size_t(n * c), 38);
        std::vector<double> got, want;
        for (std::int64_t q = prompt; q < prompt + steps; ++q) {
          std::vector<unsigned char> tb(std::size_t(n * c) * esize(t));
          for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t ch = 0; ch < c; ++ch) {
              const std::uint32_t bits = dwconv_states::round_bits(t, all.values[std::size_t((b * c + ch) * (prompt + steps) + q)]);
              std::memcpy(tb.data() + std::size_t(b * c + ch) * esize(t), &bits, esize(t));
            }
          REQUIRE(cudaMemcpy(token.device.get(), tb.data(), tb.size(), cudaMemcpyHostToDevice) == cudaSuccess);
          DwConvDecodeArgs step;
          step.dtype = t, step.batch = n, step.channels = c, step.kernel_w = k, step.activation = Activation::silu;
          step.x = token.device.get(), step.weight = wt.device.get(), step.bias = bias.device.get();
          step.y = out.device.get(), step.state = state.device.get();
          context.dwconv_decode(step);
          REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
          const auto ys = out.download();
          for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t ch = 0; ch < c; ++ch) {
              got.push_back(ys[std::size_t(b * c + ch)]);
              want.push_back(full[std::size_t((b * c + ch) * (prompt + steps) + q)]);
            }
        }
        CHECK(relative_error(got, want) <= tolerance(t));
        // The prefill's own outputs are the whole sequence's first positions.
        const auto yp = y.download();
        std::vector<double> prefill_want(yp.size());
        for (std::int64_t b = 0; b < n; ++b)
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t q = 0; q < prompt; ++q)
              prefill_want[std::size_t(layout == DwLayout::nlc ? (b * prompt + q) * c + ch : (b * c + ch) * prompt + q)] =
                  full[std::size_t((b * c + ch) * (prompt + steps) + q)];
        CHECK(relative_error(yp, prefill_want) <= tolerance(t));
      }
}

TEST_CASE("every dwconv_states variant passes the tuning harness's verification", "[gpu][dwconv][states]") {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  std::size_t verified = 0;
  int i = 0;
  for (DType t : kDTypes)
    for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc})
      for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight}) {
        dwconv_states::Problem p;
        p.direction = dir, p.layout = layout, p.dtype = t, p.n = 3, p.n_exact = true;
        p.c = std::vector<std::int64_t>{37, 300, 8}[std::size_t(i % 3)];
        p.w = std::vector<std::int64_t>{53, 700, 5}[std::size_t(i % 3)];
        p.k = std::vector<int>{4, 2, 9}[std::size_t(i % 3)];
        p.d = 1 + i % 2;
        p.seq_idx = i % 2 == 0;
        if (dir == DwDirection::forward) {
          p.bias = true, p.state_out = true, p.initial_state = !p.seq_idx;
          p.activation = i % 4 == 0 ? Activation::gelu_erf : Activation::silu;
          p.gradient_prep = i % 4 == 2;
          if (p.gradient_prep) p.state_out = false;
        } else if (dir == DwDirection::backward_data) {
          p.state_out = !p.seq_idx;
        } else {
          p.initial_state = !p.seq_idx;
        }
        ++i;
        INFO(p.key());
        REQUIRE(dwconv_states::problem_from_key(p.key()) == p);
        const auto configs = dwconv_states::enumerate(p);
        REQUIRE_FALSE(configs.empty());
        const auto candidates = dwconv_states::make_candidates(p, configs, fp.arch());
        auto harness = dwconv_states::make_harness(p, configs, fp.arch(), 0, stream);
        for (std::size_t v = 0; v < candidates.size(); ++v) {
          const auto compiled = detail::nvrtc_compile(candidates[v].request);
          auto kernel = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names.at(0));
          const auto verdict = harness->verify(candidates[v], kernel, stream);
          INFO(candidates[v].label << ": " << verdict.message);
          CHECK(verdict.ok);
          ++verified;
        }
      }
  cudaStreamDestroy(stream);
  WARN("verified " << verified << " dwconv_states variants");
  CHECK(verified > 18);
}

namespace {

// Microseconds a call takes, from CUDA events over `reps` calls after a warm-up.
template <class F> double call_us(cudaStream_t stream, int reps, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1e3 * ms / reps;
}

}  // namespace

// The fix-up's cost against the plain call it follows (bench/NOTES.md's prediction): Mamba prefill and
// training shapes, bf16, K = 4, silu, tuned.
TEST_CASE("dwconv states: the fix-up's cost against the plain call", "[.][gpu-bench][states]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::tune;
  Context context(o);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  const std::int64_t n = 8, c = 4096, w = 2048;
  const int k = 4;
  const DType t = DType::bf16;
  Tensor x = exact_tensor(t, std::size_t(n * c * w), 1), dy = exact_tensor(t, std::size_t(n * c * w), 2);
  Tensor y = exact_tensor(t, std::size_t(n * c * w), 3), dx = exact_tensor(t, std::size_t(n * c * w), 4);
  Tensor wt = exact_tensor(t, std::size_t(c * k), 5, 32), bias = exact_tensor(t, std::size_t(c), 6);
  Tensor dw = exact_tensor(t, std::size_t(c * k), 7), db = exact_tensor(t, std::size_t(c), 8);
  Tensor init = exact_tensor(t, std::size_t(n * c * (k - 1)), 9), state = exact_tensor(t, std::size_t(n * c * (k - 1)), 10);
  const auto seq = dwconv_states::packed_seq_idx(n, w, 256, 11);  // a boundary every ~256 positions
  const tuner::DeviceBuffer seq_device = upload_ints(seq);
  std::string table = "| direction | layout | option | plain us | with option us | extra |\n|---|---|---|---|---|---|\n";
  for (DwLayout layout : {DwLayout::nlc, DwLayout::ncl})
    for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight}) {
      DwConvArgs a;
      a.direction = dir, a.layout = layout, a.dtype = t, a.n = n, a.c = c, a.h = 1, a.w = w, a.kernel_w = k;
      a.causal = true, a.activation = Activation::silu;
      a.x = x.device.get(), a.weight = wt.device.get(), a.bias = bias.device.get(), a.dy = dy.device.get();
      if (dir == DwDirection::forward) a.y = y.device.get();
      if (dir == DwDirection::backward_data) a.dx = dx.device.get();
      if (dir == DwDirection::backward_weight) a.dweight = dw.device.get(), a.dbias = db.device.get();
      const double plain = call_us(stream, 20, [&] { context.dwconv(a, stream); });
      for (const char* option : {"initial_state", "seq_idx"}) {
        DwConvArgs s = a;
        if (std::string(option) == "seq_idx") {
          s.seq_idx = seq_device.as<std::int32_t>();
        } else {
          s.initial_state = init.device.get();
          if (dir == DwDirection::backward_data) s.dinitial_state = state.device.get();
        }
        if (dir == DwDirection::forward) s.final_state = state.device.get();
        const double with = call_us(stream, 20, [&] { context.dwconv(s, stream); });
        table += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:+.1f} % |\n", to_string(dir), to_string(layout), option,
                             plain, with, 100 * (with / plain - 1));
      }
    }
  WARN(table);
  cudaStreamDestroy(stream);
}
