// [gpu] tests of dwconv's fused activation: (1) the forward epilogues and the gradient preps of a
// sample of each space (the kernel kinds the sample meets, the heuristic's choice, the tensor-core
// tiles where they exist) against the float64 GPU reference, itself first checked against the CPU
// one, for every layout x activation (dtypes rotating); (2) Context calls in every direction x layout x
// activation, the dtype rotating so that each (layout, direction) meets all three, against the
// float64 CPU composition; the caller's workspace honoured. Small odd sizes, quick.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include <fmt/format.h>

#include "gpu_support.h"
#include "sample.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kernel_templates/dwconv/dwconv_params.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "kernel_templates/dwconv_states/dwconv_states_reference.h"
#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/embedded.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "tuner/harness_support.h"

using namespace kvtune;

namespace {

constexpr Activation kActivations[] = {Activation::silu, Activation::gelu_tanh, Activation::gelu_erf, Activation::relu};
constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

std::size_t esize(DType d) { return d == DType::f32 ? 4 : 2; }
void put(DType d, double v, unsigned char* out) {
  if (d == DType::f32) *reinterpret_cast<float*>(out) = float(v);
  else if (d == DType::f16) *reinterpret_cast<__half*>(out) = __float2half_rn(float(v));
  else *reinterpret_cast<__nv_bfloat16*>(out) = __float2bfloat16_rn(float(v));
}
double get(DType d, const unsigned char* in) {
  if (d == DType::f32) return *reinterpret_cast<const float*>(in);
  if (d == DType::f16) return __half2float(*reinterpret_cast<const __half*>(in));
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(in));
}

// A device tensor of random values in [-1, 1) and the decoded values the reference sees.
struct Tensor {
  std::vector<double> values;
  tuner::DeviceBuffer device;
};
Tensor random_tensor(DType d, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<unsigned char> bytes(n * esize(d));
  Tensor t;
  t.values.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    put(d, u(rng), bytes.data() + i * esize(d));
    t.values[i] = get(d, bytes.data() + i * esize(d));
  }
  t.device = tuner::DeviceBuffer(std::max<std::size_t>(bytes.size(), 16));
  detail::cuda_check(cudaMemcpy(t.device.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return t;
}

// Relative L2 error of `count` elements of type d at `device` against `ref`; +Inf in a float64 GPU
// reference (f32 output) marks an element relu's gradient leaves open (dwconv.cu), skipped and counted.
double rel_error(DType d, const void* device, const std::vector<double>& ref, std::size_t* skipped = nullptr) {
  std::vector<unsigned char> host(ref.size() * esize(d));
  detail::cuda_check(cudaMemcpy(host.data(), device, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double o = get(d, host.data() + i * esize(d));
    if (skipped != nullptr && std::isinf(o) && o > 0) {
      ++*skipped;
      continue;
    }
    if (!std::isfinite(o)) return INFINITY;
    err += (o - ref[i]) * (o - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

double tolerance(DType d) { return d == DType::f32 ? 1e-4 : d == DType::f16 ? 3e-3 : 1.5e-2; }

// One small odd shape per layout: Mamba's causal K=4, a strided 1D channel-last, 2D 3x3 and 5x5.
DwConvArgs shape_of(DwLayout l) {
  DwConvArgs a;
  a.layout = l;
  a.n = 2;
  switch (l) {
    case DwLayout::ncl:
      a.c = 24, a.w = 67, a.kernel_w = 4, a.causal = true;
      break;
    case DwLayout::nlc:
      a.c = 40, a.w = 53, a.kernel_w = 3, a.stride_w = 2, a.pad_left = a.pad_right = 1;
      break;
    case DwLayout::nchw:
      a.c = 12, a.h = 13, a.w = 11, a.kernel_h = a.kernel_w = 3, a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
      break;
    case DwLayout::nhwc:  // channels a multiple of 8: the tensor-core tiles for 16-bit types
      a.c = 24, a.h = 15, a.w = 14, a.kernel_h = a.kernel_w = 5, a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 2;
      break;
  }
  return a;
}

// The current device's fingerprint and a stream of the case's own, destroyed with it.
struct DeviceAndStream {
  detail::DeviceFingerprint fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  DeviceAndStream() { REQUIRE(cudaStreamCreate(&stream) == cudaSuccess); }
  ~DeviceAndStream() { cudaStreamDestroy(stream); }
  DeviceAndStream(const DeviceAndStream&) = delete;
  DeviceAndStream& operator=(const DeviceAndStream&) = delete;
};

// A problem and the variants of it a test verifies, with their candidates (compiled together first).
struct VariantCase {
  dwconv::Problem problem;
  std::vector<dwconv::Config> configs;
  std::vector<tuner::Candidate> candidates;
};

// The variant case of the call `a` (its problem at the call's exact batch, every variant of its
// space), appended to `cases`; its candidates are queued in `memo` to compile together.
const dwconv::Problem& add_variant_case(std::vector<VariantCase>& cases, test::CompileMemo& memo,
                                        const DeviceAndStream& gpu, const DwConvArgs& a) {
  dwconv::Problem p = dwconv::make_problem(a);
  p.n = a.n;
  VariantCase c{p, dwconv::enumerate(p), {}};
  REQUIRE(!c.configs.empty());
  c.candidates = dwconv::make_candidates(p, c.configs, gpu.fp.arch());
  memo.add(c.candidates);
  cases.push_back(std::move(c));
  return cases.back().problem;
}

// Every variant of `c` (compiled by `memo`) through the tuning harness's float64 verification; those
// over the device's opt-in shared memory are left out. Returns how many were verified, and adds the
// tensor-core tiles among them to *mma when asked.
std::size_t verify_variants(const VariantCase& c, test::CompileMemo& memo, const DeviceAndStream& gpu,
                            std::size_t* mma = nullptr) {
  const auto compiled = memo.compile(c.candidates);
  auto harness = dwconv::make_harness(c.problem, c.configs, gpu.fp.arch(), 0, gpu.stream);
  std::size_t verified = 0;
  for (std::size_t i = 0; i < c.candidates.size(); ++i) {
    INFO(c.candidates[i].label << " " << compiled[i].message.substr(0, 2000));
    REQUIRE(compiled[i].status == tuner::Status::ok);
    if (c.candidates[i].dynamic_smem > std::size_t(gpu.fp.max_smem_per_block_optin)) continue;
    auto kernel = detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name);
    kernel.allow_dynamic_smem(c.candidates[i].dynamic_smem);
    const auto verdict = harness->verify(c.candidates[i], kernel, gpu.stream);
    INFO(verdict.message);
    CHECK(verdict.ok);
    ++verified;
    if (mma != nullptr) *mma += c.configs[i].kernel() == dwconv::Kernel::mma;
  }
  return verified;
}

// A variant test's summary: at least 10 variants a problem on average, under 10 elements at relu's kink.
void check_verified(const char* what, std::size_t verified, std::size_t problems, std::size_t skipped) {
  WARN("verified " << verified << " " << what << " variants of " << problems << " problems; " << skipped
                   << " relu-gradient elements at the kink skipped");
  CHECK(verified >= 10 * problems);
  CHECK(skipped < 10);
}

// The float64 GPU reference kernel of `p` on `la` against `ref` (f32 output): its relative L2 error,
// relu's open elements counted into *skipped.
double reference_error(const dwconv::Problem& p, const dwconv::LaunchArgs& la, const std::vector<double>& ref,
                       const DeviceAndStream& gpu, std::size_t* skipped = nullptr) {
  tuner::DeviceBuffer out(ref.size() * 4), bias_out(std::size_t(p.c) * 4);
  dwconv::run_reference(p, gpu.fp.arch(), la, out.as<float>(), bias_out.as<float>(), gpu.stream);
  REQUIRE(cudaStreamSynchronize(gpu.stream) == cudaSuccess);
  return rel_error(DType::f32, out.get(), ref, skipped);
}

}  // namespace

TEST_CASE("dwconv activation and gradient-prep variants match the float64 reference", "[gpu][dwconv][activation]") {
  KVTUNE_REQUIRE_GPU();
  const DeviceAndStream gpu;
  const auto& fp = gpu.fp;
  // Every layout x epilogue (4 activations, 4 gradient preps), the dtype rotating so that each
  // (layout, dtype) meets 2-3 activations both ways: the heuristic's variant, the first tensor-core
  // tile, and a seeded sample of the rest; compiled together first. (The full dtype product costs a
  // reference program compile per problem: 96 against 32, over a minute of NVRTC more.)
  std::vector<VariantCase> cases;
  test::CompileMemo memo;
  const auto seed = test::sample_seed();
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
    for (Activation act : kActivations)
      for (bool grad : {false, true}) {
        const DType t = kDTypes[std::size_t(int(l) + int(act) + int(grad)) % 3];
        DwConvArgs a = shape_of(l);
        a.dtype = t;
        a.activation = act;
        dwconv::set_placeholders(a, (int(act) + int(grad)) % 2 == 0);
        dwconv::Problem p = dwconv::make_problem(a);
        p.n = a.n;
        p.gradient_prep = grad;
        const auto space = dwconv::enumerate(p);
        REQUIRE(!space.empty());
        std::vector<dwconv::Config> configs{dwconv::heuristic_config(p, fp.cc_major)};
        const auto mma = std::find_if(space.begin(), space.end(), [](const auto& c) { return c.kernel() == dwconv::Kernel::mma; });
        if (mma != space.end()) configs.push_back(*mma);
        std::mt19937_64 rng(seed + cases.size());
        for (int k = 0; k < 2; ++k) configs.push_back(space[rng() % space.size()]);
        std::sort(configs.begin(), configs.end(), [](const auto& x, const auto& y) { return x.label() < y.label(); });
        configs.erase(std::unique(configs.begin(), configs.end()), configs.end());
        VariantCase c{p, configs, dwconv::make_candidates(p, configs, fp.arch())};
        memo.add(c.candidates);
        cases.push_back(std::move(c));
      }
  memo.compile_pending();
  std::size_t verified = 0, mma_verified = 0, skipped = 0;
  for (const VariantCase& c : cases) {
    const dwconv::Problem& p = c.problem;
    INFO(p.key());
    // The float64 GPU reference with the epilogue against the CPU one.
    {
      const auto x = random_tensor(p.dtype, std::size_t(p.n * p.c * p.h * p.w), 1);
      const auto w = random_tensor(p.dtype, std::size_t(p.c * p.kh * p.kw), 2);
      const auto b = random_tensor(p.dtype, std::size_t(p.c), 3);
      const auto dy = random_tensor(p.dtype, std::size_t(p.n * p.c * p.out_h() * p.out_w()), 4);
      const std::vector<double> bias = p.bias ? b.values : std::vector<double>{};
      const auto ref = p.gradient_prep ? dwconv::reference_gradient_prep(p, p.n, x.values, w.values, bias, dy.values)
                                       : dwconv::reference_forward(p, p.n, x.values, w.values, bias);
      dwconv::LaunchArgs la{};
      la.src = x.device.get(), la.weight = w.device.get(), la.bias = p.bias ? b.device.get() : nullptr;
      la.aux = dy.device.get(), la.batch = p.n;
      CHECK(reference_error(p, la, ref, gpu, &skipped) < 1e-6);
    }
    verified += verify_variants(c, memo, gpu, &mma_verified);
  }
  WARN("verified " << verified << " variants of " << cases.size() << " activation and gradient-prep problems ("
                   << mma_verified << " tensor-core tiles); " << skipped << " relu-gradient elements at the kink skipped");
  CHECK(verified >= 2 * cases.size());
  CHECK(mma_verified >= 2);  // NHWC f16 / bf16 forward activations
  CHECK(skipped < 10);
}

TEST_CASE("the fused 1D weight gradient: every variant, with and without seq_idx, against float64", "[gpu][dwconv][activation]") {
  KVTUNE_REQUIRE_GPU();
  const DeviceAndStream gpu;
  // Both layouts x seq_idx or not x two shapes (K 7 dilation 1 with dbias, K 4 dilation 2 without), the
  // activation and dtype rotating; every variant of each space, compiled together first.
  std::vector<VariantCase> cases;
  test::CompileMemo memo;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
    for (bool seq : {false, true})
      for (int i = 0; i < 2; ++i) {
        DwConvArgs a;
        a.direction = DwDirection::backward_weight, a.layout = l;
        a.dtype = kDTypes[std::size_t(int(l) + int(seq) + i) % 3];
        a.activation = kActivations[std::size_t(int(l) + 2 * int(seq) + i) % 4];
        a.n = 2, a.c = l == DwLayout::ncl ? 24 : 40, a.w = 67 + 29 * i;  // 96: seq_idx read as vectors
        a.kernel_w = i == 0 ? 7 : 4, a.dilation_w = 1 + i, a.causal = true;
        dwconv::set_placeholders(a, i == 0);
        if (seq) a.seq_idx = reinterpret_cast<const std::int32_t*>(std::uintptr_t(6) << 44);
        REQUIRE(dwconv::fused_weight_gradient(a));
        add_variant_case(cases, memo, gpu, a);
      }
  memo.compile_pending();
  std::size_t verified = 0;
  for (const VariantCase& c : cases) {
    const dwconv::Problem& p = c.problem;
    INFO(p.key());
    // The float64 GPU reference against the CPU one of the whole operation (dwconv_states' reference:
    // z with the taps masked by seq_idx, dy * act'(z), then dw and dbias).
    {
      const std::int64_t n = p.n, w = p.w;
      const auto x = random_tensor(p.dtype, std::size_t(n * p.c * w), 1), wt = random_tensor(p.dtype, std::size_t(p.c * p.kw), 2);
      const auto b = random_tensor(p.dtype, std::size_t(p.c), 3), dy = random_tensor(p.dtype, std::size_t(n * p.c * w), 4);
      const auto seq = p.seq_idx ? dwconv_states::packed_seq_idx(n, w, 5, 11) : std::vector<std::int32_t>{};
      tuner::DeviceBuffer seq_device(std::max<std::size_t>(seq.size() * 4, 16));
      if (!seq.empty())
        detail::cuda_check(cudaMemcpy(seq_device.get(), seq.data(), seq.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      dwconv_states::Problem sp;
      sp.layout = p.layout, sp.dtype = p.dtype, sp.c = p.c, sp.w = w, sp.k = p.kw, sp.d = p.dw, sp.bias = true;
      sp.activation = p.activation, sp.gradient_prep = true, sp.seq_idx = p.seq_idx;
      const auto g = dwconv_states::reference_forward(sp, n, x.values, wt.values, b.values, {}, seq, dy.values, nullptr);
      sp.direction = DwDirection::backward_weight, sp.activation = Activation::none, sp.gradient_prep = false, sp.bias = false;
      std::vector<double> ref_dw, ref_db;
      dwconv_states::reference_backward_weight(sp, n, x.values, g, {}, seq, ref_dw, ref_db);
      dwconv::LaunchArgs la{};
      la.src = x.device.get(), la.aux = dy.device.get(), la.weight = wt.device.get(), la.bias = b.device.get();
      la.seq_idx = p.seq_idx ? seq_device.as<std::int32_t>() : nullptr, la.batch = n;
      tuner::DeviceBuffer out(ref_dw.size() * 4), out_bias(std::size_t(p.c) * 4);
      dwconv::run_reference(p, gpu.fp.arch(), la, out.as<float>(), out_bias.as<float>(), gpu.stream);
      REQUIRE(cudaStreamSynchronize(gpu.stream) == cudaSuccess);
      CHECK(rel_error(DType::f32, out.get(), ref_dw) < 1e-6);
      if (p.bias) CHECK(rel_error(DType::f32, out_bias.get(), ref_db) < 1e-6);
    }
    verified += verify_variants(c, memo, gpu);
  }
  WARN("verified " << verified << " fused weight-gradient variants of " << cases.size() << " problems");
  CHECK(verified >= 4 * cases.size());
}

TEST_CASE("the fused 1D data gradient: every variant against float64", "[gpu][dwconv][activation]") {
  KVTUNE_REQUIRE_GPU();
  const DeviceAndStream gpu;
  // Both layouts x three shapes (causal K 4; K 7 dilation 2 with symmetric padding and rows of 96, so
  // vectors along W; K 2 over rows of 33), the activation and dtype rotating, the bias on and off;
  // every variant of each space, compiled together first.
  std::vector<VariantCase> cases;
  test::CompileMemo memo;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
    for (int i = 0; i < 3; ++i) {
      DwConvArgs a;
      a.direction = DwDirection::backward_data, a.layout = l;
      a.dtype = kDTypes[std::size_t(int(l) + i) % 3];
      a.activation = kActivations[std::size_t(2 * int(l) + i) % 4];
      a.n = 2, a.c = l == DwLayout::ncl ? 24 : 40;
      if (i == 0) a.w = 67, a.kernel_w = 4, a.causal = true;
      if (i == 1) a.w = 96, a.kernel_w = 7, a.dilation_w = 2, a.pad_left = a.pad_right = 6;
      if (i == 2) a.w = 33, a.kernel_w = 2, a.pad_left = 1, a.c = l == DwLayout::ncl ? 3 : 8;
      dwconv::set_placeholders(a, false);
      REQUIRE(dwconv::fused_data_gradient(a));
      add_variant_case(cases, memo, gpu, a);
    }
  memo.compile_pending();
  std::size_t verified = 0, skipped = 0;
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const VariantCase& c = cases[ci];
    const dwconv::Problem& p = c.problem;
    INFO(p.key());
    // The float64 GPU reference against the CPU one of the two-step form: the gradient prep
    // dy * act'(z) of the forward problem, then the plain backward_data on it.
    {
      dwconv::Problem forward = p;
      forward.direction = DwDirection::forward, forward.bias = ci % 2 == 0;
      dwconv::Problem plain = p;
      plain.activation = Activation::none;
      const std::size_t xs = std::size_t(p.n * p.c * p.w), ys = std::size_t(p.n * p.c * forward.out_w());
      const auto x = random_tensor(p.dtype, xs, 1), wt = random_tensor(p.dtype, std::size_t(p.c * p.kw), 2);
      const auto b = random_tensor(p.dtype, std::size_t(p.c), 3), dy = random_tensor(p.dtype, ys, 4);
      const std::vector<double> bias = forward.bias ? b.values : std::vector<double>{};
      const auto g = dwconv::reference_gradient_prep(forward, p.n, x.values, wt.values, bias, dy.values);
      const auto ref = dwconv::reference_backward_data(plain, p.n, g, wt.values);
      dwconv::LaunchArgs la{};
      la.src = dy.device.get(), la.aux = x.device.get(), la.weight = wt.device.get();
      la.bias = forward.bias ? b.device.get() : nullptr, la.batch = p.n;
      CHECK(reference_error(p, la, ref, gpu, &skipped) < 1e-6);
    }
    verified += verify_variants(c, memo, gpu);
  }
  check_verified("fused data-gradient", verified, cases.size(), skipped);
}

TEST_CASE("seq_idx masked in the forward kernel and the fused data gradient: every variant against float64", "[gpu][dwconv][states]") {
  KVTUNE_REQUIRE_GPU();
  const DeviceAndStream gpu;
  // Both layouts x forward without an activation, forward with one, the fused data gradient; K 4, or K 3
  // dilation 2 over rows of 96 (seq_idx and windows read as vectors); the dtype and activation
  // rotating; every variant of each space.
  std::vector<VariantCase> cases;
  test::CompileMemo memo;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
    for (int i = 0; i < 3; ++i) {
      DwConvArgs a;
      a.direction = i == 2 ? DwDirection::backward_data : DwDirection::forward, a.layout = l;
      a.dtype = kDTypes[std::size_t(int(l) + i) % 3];
      a.activation = i == 0 ? Activation::none : kActivations[std::size_t(2 * int(l) + i) % 4];
      a.n = 2, a.c = l == DwLayout::ncl ? 24 : 40, a.causal = true;
      a.w = i == 1 ? 96 : 67, a.kernel_w = i == 1 ? 3 : 4, a.dilation_w = i == 1 ? 2 : 1;
      dwconv::set_placeholders(a, i != 2);
      a.seq_idx = reinterpret_cast<const std::int32_t*>(std::uintptr_t(6) << 44);
      REQUIRE(dwconv::in_kernel_seq_idx(a));
      REQUIRE(add_variant_case(cases, memo, gpu, a).seq_idx);
    }
  memo.compile_pending();
  std::size_t verified = 0, skipped = 0;
  for (const VariantCase& c : cases) {
    const dwconv::Problem& p = c.problem;
    INFO(p.key());
    // The float64 GPU reference against dwconv_states' CPU reference of the whole operation.
    {
      const std::int64_t n = p.n, w = p.w;
      const auto x = random_tensor(p.dtype, std::size_t(n * p.c * w), 1), wt = random_tensor(p.dtype, std::size_t(p.c * p.kw), 2);
      const auto b = random_tensor(p.dtype, std::size_t(p.c), 3), dy = random_tensor(p.dtype, std::size_t(n * p.c * w), 4);
      const auto seq = dwconv_states::packed_seq_idx(n, w, 5, 11);
      tuner::DeviceBuffer seq_device(seq.size() * 4);
      detail::cuda_check(cudaMemcpy(seq_device.get(), seq.data(), seq.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      dwconv_states::Problem sp;
      sp.layout = p.layout, sp.dtype = p.dtype, sp.c = p.c, sp.w = w, sp.k = p.kw, sp.d = p.dw, sp.seq_idx = true;
      sp.activation = p.activation;
      dwconv::LaunchArgs la{};
      la.weight = wt.device.get(), la.seq_idx = seq_device.as<std::int32_t>(), la.batch = n;
      std::vector<double> ref;
      if (p.direction == DwDirection::forward) {
        sp.bias = p.bias;
        ref = dwconv_states::reference_forward(sp, n, x.values, wt.values, p.bias ? b.values : std::vector<double>{}, {}, seq,
                                               {}, nullptr);
        la.src = x.device.get(), la.bias = p.bias ? b.device.get() : nullptr;
      } else {
        sp.bias = true, sp.gradient_prep = true;
        const auto g = dwconv_states::reference_forward(sp, n, x.values, wt.values, b.values, {}, seq, dy.values, nullptr);
        sp.direction = DwDirection::backward_data, sp.activation = Activation::none, sp.gradient_prep = false, sp.bias = false;
        ref = dwconv_states::reference_backward_data(sp, n, g, wt.values, seq, nullptr);
        la.src = dy.device.get(), la.aux = x.device.get(), la.bias = b.device.get();
      }
      CHECK(reference_error(p, la, ref, gpu, &skipped) < 1e-6);
    }
    verified += verify_variants(c, memo, gpu);
  }
  check_verified("seq_idx", verified, cases.size(), skipped);
}

TEST_CASE("dwconv with an activation through the Context: every direction and layout against float64", "[gpu][dwconv][activation]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::heuristic;
  Context context(o);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  int calls = 0;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
    for (int ai = 0; ai < 4; ++ai)
      for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight}) {
        DwConvArgs a = shape_of(l);
        a.direction = dir;
        a.activation = kActivations[ai];
        a.dtype = kDTypes[std::size_t(int(l) + ai + int(dir)) % 3];
        const bool with_bias = ai % 2 == 0;
        const dwconv::Problem shape = dwconv::make_problem(a);
        const std::size_t xs = std::size_t(a.n * a.c * a.h * a.w), ys = std::size_t(a.n * a.c * shape.out_h() * shape.out_w());
        const std::size_t ws = std::size_t(a.c * a.kernel_h * a.kernel_w);
        const std::uint64_t seed = std::uint64_t(calls) * 10;
        const auto x = random_tensor(a.dtype, xs, seed + 1), w = random_tensor(a.dtype, ws, seed + 2);
        const auto b = random_tensor(a.dtype, std::size_t(a.c), seed + 3), dy = random_tensor(a.dtype, ys, seed + 4);
        a.x = x.device.get(), a.weight = w.device.get(), a.bias = with_bias ? b.device.get() : nullptr;
        const std::vector<double> bias = with_bias ? b.values : std::vector<double>{};
        dwconv::Problem p = shape;  // the forward problem with the activation (the reference's)
        p.direction = DwDirection::forward;
        p.activation = a.activation;
        INFO(to_string(dir) << " " << to_string(l) << " " << to_string(a.dtype) << " " << to_string(a.activation)
                            << (with_bias ? " bias" : ""));
        const std::size_t out_count = dir == DwDirection::forward ? ys : dir == DwDirection::backward_data ? xs : ws;
        tuner::DeviceBuffer out(out_count * esize(a.dtype)), out_bias(std::size_t(a.c) * esize(a.dtype));
        cudaMemset(out.get(), 0xFF, out_count * esize(a.dtype));  // NaN: unwritten outputs fail
        std::vector<double> ref, ref_bias;
        if (dir == DwDirection::forward) {
          a.y = out.get();
          ref = dwconv::reference_forward(p, a.n, x.values, w.values, bias);
        } else {
          a.dy = dy.device.get();
          const auto g = dwconv::reference_gradient_prep(p, a.n, x.values, w.values, bias, dy.values);
          if (dir == DwDirection::backward_data) {
            a.dx = out.get();
            ref = dwconv::reference_backward_data(p, a.n, g, w.values);
          } else {
            a.dweight = out.get(), a.dbias = out_bias.get();
            dwconv::reference_backward_weight(p, a.n, x.values, g, ref, ref_bias);
          }
        }
        context.dwconv(a, stream);
        REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
        CHECK(rel_error(a.dtype, out.get(), ref) < tolerance(a.dtype));
        if (dir == DwDirection::backward_weight) CHECK(rel_error(a.dtype, out_bias.get(), ref_bias) < tolerance(a.dtype));
        // Backward directions: two problems, the gradient prep first; its output in front of the workspace.
        // The fused 1D weight gradient is one problem, and so is the fused data gradient (stride 1).
        const bool fused = dwconv::fused_weight_gradient(a) || dwconv::fused_data_gradient(a);
        const bool one_d = l == DwLayout::ncl || l == DwLayout::nlc;
        CHECK(fused == (one_d && (dir == DwDirection::backward_weight || (dir == DwDirection::backward_data && a.stride_w == 1))));
        const std::string label = context.dwconv_variant(a, stream);
        CHECK((label.find(" then ") != std::string::npos) == (dir != DwDirection::forward && !fused));
        if (dir != DwDirection::forward && !fused) {
          const std::size_t need = context.dwconv_workspace_size(a, stream);
          CHECK(need >= dwconv::gradient_prep_bytes(a));
          // The caller's workspace: too small is refused naming the field; enough is used.
          tuner::DeviceBuffer workspace(need);
          a.workspace = workspace.get(), a.workspace_bytes = need - 256;
          try {
            context.dwconv(a, stream);
            FAIL("a workspace 256 bytes short was accepted");
          } catch (const Error& e) {
            CHECK(e.context().field == "workspace_bytes");
          }
          a.workspace_bytes = need;
          cudaMemset(out.get(), 0xFF, out_count * esize(a.dtype));
          context.dwconv(a, stream);
          REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
          CHECK(rel_error(a.dtype, out.get(), ref) < tolerance(a.dtype));
        }
        ++calls;
      }
  cudaStreamDestroy(stream);
  CHECK(calls == 48);
  CHECK(context.counters().tunes == 0);
}

// ---- fused against unfused (a benchmark: bench/results/<date>-h100-dwconv-activation) ----------

namespace {

// The activation as its own elementwise kernel, vectorized (16-byte accesses), in place: the unfused
// pair's second op, as PyTorch's vectorized silu would run it.
constexpr const char* kElementwise = R"(
#include "common.cuh"
#include "dwconv_params.h"
#include "dwconv_activation.cuh"
template <class T, int ACT, int VC>
__global__ void kvt_act_inplace(const KvtDwConvParams p) {
  const long long n = p.batch * p.channels * p.dst_h * p.dst_w / VC;
  Vec<T, VC>* y = static_cast<Vec<T, VC>*>(p.dst);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    Vec<T, VC> v = y[i];
#pragma unroll
    for (int u = 0; u < VC; ++u) v.v[u] = kvt_from_float<T>(kvt_act_value<ACT>(kvt_to_float(v.v[u])));
    y[i] = v;
  }
}
)";

// Median of `reps` timed launches of `run` on `stream` (after warm-up), in microseconds.
double median_us(cudaStream_t stream, int reps, const std::function<void()>& run) {
  for (int i = 0; i < 3; ++i) run();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(start, stream);
    run();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms * 1000.0);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

TEST_CASE("dwconv fused activation against plain and conv-then-activation", "[.][gpu-bench][dwconv][activation]") {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::tune;
  o.budget_variants = 12;  // the cost model's best 12 (and the heuristic): a short run on shared device time
  Context context(o);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  struct Bench {
    const char* what;
    DwConvArgs args;
  };
  std::vector<Bench> benches;
  {
    DwConvArgs a;  // Mamba: causal conv1d K=4 + SiLU, NLC bf16 [16, 1024 channels, 4096 tokens]
    a.layout = DwLayout::nlc, a.dtype = DType::bf16, a.n = 16, a.c = 1024, a.w = 4096, a.kernel_w = 4, a.causal = true;
    benches.push_back({"mamba NLC bf16 16x1024x4096 K=4 silu", a});
    a.layout = DwLayout::ncl;
    benches.push_back({"mamba NCL bf16 16x1024x4096 K=4 silu", a});
    DwConvArgs b;  // ConvNeXt 7x7 + GELU (in ConvNeXt a norm sits between; MobileNet-style fused act)
    b.layout = DwLayout::nhwc, b.dtype = DType::bf16, b.n = 32, b.c = 96, b.h = b.w = 56, b.kernel_h = b.kernel_w = 7;
    b.pad_top = b.pad_bottom = b.pad_left = b.pad_right = 3;
    benches.push_back({"convnext NHWC bf16 32x96x56x56 7x7 gelu", b});
    DwConvArgs m;  // MobileNetV2 3x3 + ReLU(6), NCHW f32 [32, 144, 56, 56]
    m.layout = DwLayout::nchw, m.dtype = DType::f32, m.n = 32, m.c = 144, m.h = m.w = 56, m.kernel_h = m.kernel_w = 3;
    m.pad_top = m.pad_bottom = m.pad_left = m.pad_right = 1;
    benches.push_back({"mobilenetv2 NCHW f32 32x144x56x56 3x3 relu", m});
  }
  const Activation acts[] = {Activation::silu, Activation::silu, Activation::gelu_erf, Activation::relu};
  for (std::size_t i = 0; i < benches.size(); ++i) {
    DwConvArgs a = benches[i].args;
    const Activation act = acts[i];
    const dwconv::Problem p = dwconv::make_problem(a);
    const std::size_t e = esize(a.dtype);
    const std::size_t xs = std::size_t(a.n * a.c * a.h * a.w), ys = std::size_t(a.n * a.c * p.out_h() * p.out_w());
    tuner::DeviceBuffer x(xs * e), y(ys * e), dy(ys * e), dx(xs * e), w(std::size_t(a.c * a.kernel_h * a.kernel_w) * e),
        bias(std::size_t(a.c) * e);
    cudaMemset(x.get(), 0x3c, xs * e), cudaMemset(dy.get(), 0x3c, ys * e), cudaMemset(w.get(), 0x30, a.c * a.kernel_h * a.kernel_w * e);
    cudaMemset(bias.get(), 0, a.c * e);
    a.x = x.get(), a.weight = w.get(), a.bias = bias.get(), a.y = y.get();
    // The elementwise kernel of this dtype and activation.
    detail::CompileRequest r;
    r.program_name = "act_inplace.cu";
    r.source = kElementwise;
    r.headers = {{"common.cuh", embedded::common_cuh}, {"dwconv_params.h", embedded::dwconv_params_h},
                 {"dwconv_activation.cuh", embedded::dwconv_activation_cuh}};
    r.arch = fp.arch();
    const int vc = int(16 / e);
    r.name_expressions = {fmt::format("kvt_act_inplace<{}, {}, {}>", a.dtype == DType::f32 ? "float" : a.dtype == DType::f16 ? "kvt_f16" : "kvt_bf16",
                                      int(act), vc)};
    const auto compiled = detail::nvrtc_compile(r);
    auto elementwise = detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names[0]);
    KvtDwConvParams ep{};
    ep.dst = y.get(), ep.batch = a.n, ep.channels = a.c, ep.dst_h = p.out_h(), ep.dst_w = p.out_w();
    const unsigned grid = unsigned(std::min<std::size_t>((ys / vc + 255) / 256, 132 * 16));

    DwConvArgs fused = a;
    fused.activation = act;
    context.dwconv(a, stream), context.dwconv(fused, stream);  // tune both
    const double plain_us = median_us(stream, 50, [&] { context.dwconv(a, stream); });
    const double fused_us = median_us(stream, 50, [&] { context.dwconv(fused, stream); });
    const double act_us = median_us(stream, 50, [&] { REQUIRE(elementwise.launch(dim3(grid), dim3(256), 0, stream, ep) == cudaSuccess); });
    const double unfused_us = median_us(stream, 50, [&] {
      context.dwconv(a, stream);
      REQUIRE(elementwise.launch(dim3(grid), dim3(256), 0, stream, ep) == cudaSuccess);
    });
    // backward_data: plain (on dy), fused (gradient prep from x, w, bias, dy, then plain).
    DwConvArgs bd = a;
    bd.direction = DwDirection::backward_data, bd.dy = dy.get(), bd.dx = dx.get(), bd.y = nullptr;
    DwConvArgs bd_fused = bd;
    bd_fused.activation = act;
    context.dwconv(bd, stream), context.dwconv(bd_fused, stream);
    const double bd_us = median_us(stream, 30, [&] { context.dwconv(bd, stream); });
    const double bd_fused_us = median_us(stream, 30, [&] { context.dwconv(bd_fused, stream); });
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    WARN(fmt::format("{} ({}): forward plain {:.1f} us [{}], fused {:.1f} us [{}] ({:+.1f} %), activation alone {:.1f} us, "
                     "conv then activation {:.1f} us (fused {:.2f}x faster); backward_data plain {:.1f} us, with the "
                     "activation {:.1f} us [{}]",
                     benches[i].what, fp.name, plain_us, context.dwconv_variant(a, stream), fused_us,
                     context.dwconv_variant(fused, stream), 100 * (fused_us / plain_us - 1), act_us, unfused_us,
                     unfused_us / fused_us, bd_us, bd_fused_us, context.dwconv_variant(bd_fused, stream)));
  }
  cudaStreamDestroy(stream);
}
