// [gpu] tests of dwconv's fused activation: (1) the forward epilogues and the gradient preps of a
// sample of each space (every kernel kind the sample meets, the heuristic's choice, the tensor-core
// tiles where they exist) against the float64 GPU reference, itself first checked against the CPU
// one, for every layout x dtype x activation; (2) Context calls in every direction x layout x
// activation, the dtype rotating so that each (layout, direction) meets all three, against the
// float64 CPU composition; the caller's workspace honoured. Small odd sizes, quick.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "gpu_support.h"
#include "sample.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "lib/src/cuda_check.h"
#include "lib/src/device.h"
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

}  // namespace

TEST_CASE("dwconv activation and gradient-prep variants match the float64 reference", "[gpu][dwconv][activation]") {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  // Every layout x dtype x epilogue (4 activations, 4 gradient preps): the heuristic's variant, the
  // first tensor-core tile, and a seeded sample of the rest; compiled together first.
  struct Case {
    dwconv::Problem problem;
    std::vector<dwconv::Config> configs;
    std::vector<tuner::Candidate> candidates;
  };
  std::vector<Case> cases;
  test::CompileMemo memo;
  const auto seed = test::sample_seed();
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
    for (DType t : kDTypes)
      for (Activation act : kActivations)
        for (bool grad : {false, true}) {
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
          const auto mma = std::find_if(space.begin(), space.end(), [](const auto& c) { return c.kernel == dwconv::Kernel::mma; });
          if (mma != space.end()) configs.push_back(*mma);
          std::mt19937_64 rng(seed + cases.size());
          for (int k = 0; k < 2; ++k) configs.push_back(space[rng() % space.size()]);
          std::sort(configs.begin(), configs.end(), [](const auto& x, const auto& y) { return x.label() < y.label(); });
          configs.erase(std::unique(configs.begin(), configs.end()), configs.end());
          Case c{p, configs, dwconv::make_candidates(p, configs, fp.arch())};
          memo.add(c.candidates);
          cases.push_back(std::move(c));
        }
  memo.compile_pending();
  std::size_t verified = 0, mma_verified = 0, skipped = 0;
  for (const Case& c : cases) {
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
      tuner::DeviceBuffer out(ref.size() * 4), out_bias(std::size_t(p.c) * 4);
      dwconv::run_reference(p, fp.arch(), la, out.as<float>(), out_bias.as<float>(), stream);
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
      CHECK(rel_error(DType::f32, out.get(), ref, &skipped) < 1e-6);
    }
    const auto compiled = memo.compile(c.candidates);
    auto harness = dwconv::make_harness(p, c.configs, fp.arch(), 0, stream);
    for (std::size_t i = 0; i < c.candidates.size(); ++i) {
      INFO(c.candidates[i].label << " " << compiled[i].message.substr(0, 2000));
      REQUIRE(compiled[i].status == tuner::Status::ok);
      if (c.candidates[i].dynamic_smem > std::size_t(fp.max_smem_per_block_optin)) continue;
      auto kernel = detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name);
      kernel.allow_dynamic_smem(c.candidates[i].dynamic_smem);
      const auto verdict = harness->verify(c.candidates[i], kernel, stream);
      INFO(verdict.message);
      CHECK(verdict.ok);
      ++verified;
      mma_verified += c.configs[i].kernel == dwconv::Kernel::mma;
    }
  }
  cudaStreamDestroy(stream);
  WARN("verified " << verified << " variants of " << cases.size() << " activation and gradient-prep problems ("
                   << mma_verified << " tensor-core tiles); " << skipped << " relu-gradient elements at the kink skipped");
  CHECK(verified >= 2 * cases.size());
  CHECK(mma_verified >= 8);  // NHWC f16 and bf16, 4 activations
  CHECK(skipped < 10);
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
        const std::string label = context.dwconv_variant(a, stream);
        CHECK((label.find(" then ") != std::string::npos) == (dir != DwDirection::forward));
        if (dir != DwDirection::forward) {
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
