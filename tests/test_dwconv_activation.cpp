// CPU tests of dwconv's fused activation (DwConvArgs::activation): problem keys (unchanged without an
// activation), argument rules, the space of activation and gradient-prep problems, the float64
// reference (values, derivatives, and the backward passes with an activation against finite
// differences), and NVRTC compilation of a sample of every kernel kind with each epilogue.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>

#include "compile_batches.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "core/nvrtc.h"

using namespace kvtune;
using dwconv::Config;
using dwconv::Problem;

namespace {

constexpr Activation kActivations[] = {Activation::silu, Activation::gelu_tanh, Activation::gelu_erf, Activation::relu};

void* fake(std::uintptr_t offset) { return reinterpret_cast<void*>((std::uintptr_t(1) << 24) + offset); }

// A 2D 3x3 "same" convolution on [2, 16, 9, 11] with every tensor pointer set (16-byte aligned).
DwConvArgs args_2d(DwDirection d, DwLayout l = DwLayout::nchw, Activation act = Activation::none) {
  DwConvArgs a;
  a.direction = d;
  a.layout = l;
  a.activation = act;
  a.n = 2, a.c = 16, a.h = 9, a.w = 11;
  a.kernel_h = a.kernel_w = 3;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
  a.x = fake(0), a.weight = fake(1 << 20), a.y = fake(2 << 20), a.dy = fake(3 << 20), a.dx = fake(4 << 20);
  a.dweight = fake(5 << 20);
  return a;
}

// Mamba's causal conv1d, K = 4, NLC.
DwConvArgs args_causal(DwDirection d, Activation act) {
  DwConvArgs a = args_2d(d, DwLayout::nlc, act);
  a.h = 1, a.w = 37, a.kernel_h = 1, a.kernel_w = 4;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 0;
  a.causal = true;
  return a;
}

void check_invalid(const DwConvArgs& a, const std::string& field, const std::string& part) {
  try {
    dwconv::validate(a);
    FAIL("accepted; expected an error naming " << field);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.context().field == field);
    CHECK(std::string(e.what()).find(part) != std::string::npos);
  }
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

TEST_CASE("dwconv activation keys: unchanged without one, a suffix with one, parsed back", "[dwconv][activation]") {
  // Keys without an activation are exactly as before activations existed (existing caches keep them).
  DwConvArgs plain = args_2d(DwDirection::forward);
  CHECK(dwconv::make_problem(plain).key() ==
        "dwconv,forward,nchw,f32,n<=2,c=16,h=9,w=11,k=3x3,s=1x1,d=1x1,pad=1,1,1,1,bias=0,det=1,align=16");
  for (Activation act : kActivations) {
    INFO(to_string(act));
    DwConvArgs a = args_2d(DwDirection::forward, DwLayout::nhwc, act);
    const Problem p = dwconv::make_problem(a);
    CHECK(p.activation == act);
    CHECK(p.key() == dwconv::make_problem(args_2d(DwDirection::forward, DwLayout::nhwc)).key() +
                         fmt::format(",act={}", to_string(act)));
    CHECK(dwconv::problem_from_key(p.key()) == p);
    CHECK_FALSE(dwconv::gradient_prep_problem(a));

    // The backward directions: the plain problem (no activation in its key) and the gradient prep, a
    // forward problem of the same convolution with the forward's bias.
    for (DwDirection d : {DwDirection::backward_data, DwDirection::backward_weight}) {
      DwConvArgs b = args_2d(d, DwLayout::nhwc, act);
      b.bias = fake(6 << 20);
      const Problem q = dwconv::make_problem(b);
      CHECK(q.activation == Activation::none);
      CHECK_FALSE(q.gradient_prep);
      CHECK(q.key().find("act=") == std::string::npos);
      const auto prep = dwconv::gradient_prep_problem(b);
      REQUIRE(prep);
      CHECK(prep->direction == DwDirection::forward);
      CHECK(prep->bias);
      CHECK(prep->gradient_prep);
      CHECK(prep->epilogue() == 8 + static_cast<int>(act));
      CHECK(prep->key() == p.key().replace(p.key().find("bias=0"), 6, "bias=1") + "_grad");
      CHECK(dwconv::problem_from_key(prep->key()) == *prep);
    }
  }
  // The prep's bias is the forward's (an input), the weight gradient's its dbias output; the prep reads
  // dy (its alignment counts), the plain backward problem reads the prep's 256-byte aligned output.
  DwConvArgs wg = args_2d(DwDirection::backward_weight, DwLayout::nchw, Activation::gelu_tanh);
  wg.dtype = DType::f16;
  wg.dbias = fake(6 << 20);
  wg.dy = fake((3 << 20) + 2);
  CHECK(dwconv::make_problem(wg).bias);
  CHECK(dwconv::make_problem(wg).align_bytes == 16);
  CHECK_FALSE(dwconv::gradient_prep_problem(wg)->bias);
  CHECK(dwconv::gradient_prep_problem(wg)->align_bytes == 2);
  wg.activation = Activation::none;
  CHECK(dwconv::make_problem(wg).align_bytes == 2);  // without an activation the kernel reads dy itself
  // Keys the library would never build.
  const std::string base = dwconv::make_problem(plain).key();
  CHECK_FALSE(dwconv::problem_from_key(base + ",act=none"));
  CHECK_FALSE(dwconv::problem_from_key(base + ",act=tanh"));
  CHECK_FALSE(dwconv::problem_from_key(base + ",act=silu,act=relu"));
  CHECK_FALSE(dwconv::problem_from_key(base + ",silu"));
  const std::string backward = dwconv::make_problem(args_2d(DwDirection::backward_data)).key();
  CHECK_FALSE(dwconv::problem_from_key(backward + ",act=silu"));
  CHECK_FALSE(dwconv::problem_from_key(backward + ",act=silu_grad"));
  // The gradient prep's workspace: y's elements, rounded up to 256 bytes.
  DwConvArgs b = args_2d(DwDirection::backward_data, DwLayout::nchw, Activation::silu);
  CHECK(dwconv::gradient_prep_bytes(b) == (2 * 16 * 9 * 11 * 4 + 255) / 256 * 256);
  b.dtype = DType::bf16;
  b.stride_h = b.stride_w = 2;
  CHECK(dwconv::gradient_prep_bytes(b) == (2 * 16 * 5 * 6 * 2 + 255) / 256 * 256);
}

TEST_CASE("dwconv activation: hash and equality see the epilogue", "[dwconv][activation]") {
  const Problem p = dwconv::make_problem(args_2d(DwDirection::forward));
  dwconv::ProblemHash hash;
  std::set<std::size_t> hashes{hash(p)};
  for (Activation act : kActivations)
    for (bool grad : {false, true}) {
      Problem q = p;
      q.activation = act;
      q.gradient_prep = grad;
      CHECK_FALSE(q == p);
      hashes.insert(hash(q));
    }
  CHECK(hashes.size() == 9);
}

TEST_CASE("dwconv activation argument rules name the field", "[dwconv][activation]") {
  DwConvArgs a = args_2d(DwDirection::forward);
  a.activation = static_cast<Activation>(5);
  check_invalid(a, "activation", "unknown activation value 5");

  // forward: as without an activation.
  for (Activation act : kActivations) dwconv::validate(args_2d(DwDirection::forward, DwLayout::nchw, act));

  // backward_data recomputes z: x and weight (and the forward's bias, optional) besides dy and dx.
  a = args_2d(DwDirection::backward_data, DwLayout::nchw, Activation::silu);
  dwconv::validate(a);
  a.x = nullptr;
  check_invalid(a, "x", "x is a null pointer");
  a.x = nullptr, a.activation = Activation::none;
  dwconv::validate(a);  // without an activation x is not read
  a = args_2d(DwDirection::backward_data, DwLayout::nchw, Activation::gelu_erf);
  a.dx = const_cast<void*>(a.x);
  check_invalid(a, "dx", "dx overlaps x");
  a = args_2d(DwDirection::backward_data, DwLayout::nchw, Activation::gelu_erf);
  a.bias = fake((4 << 20) + 64);
  check_invalid(a, "dx", "dx overlaps bias");
  a.dtype = DType::f16;
  a.bias = fake((6 << 20) + 1);
  check_invalid(a, "bias", "aligned to 2 bytes");

  // backward_weight: weight too.
  a = args_2d(DwDirection::backward_weight, DwLayout::nhwc, Activation::relu);
  dwconv::validate(a);
  a.weight = nullptr;
  check_invalid(a, "weight", "weight is a null pointer");
  a.activation = Activation::none;
  dwconv::validate(a);
  a = args_2d(DwDirection::backward_weight, DwLayout::nhwc, Activation::relu);
  a.dweight = const_cast<void*>(a.weight);
  check_invalid(a, "dweight", "dweight overlaps weight");
  a = args_2d(DwDirection::backward_weight, DwLayout::nhwc, Activation::relu);
  a.bias = fake(6 << 20);
  a.dbias = fake(6 << 20);
  check_invalid(a, "dbias", "dbias overlaps bias");
}

TEST_CASE("dwconv activation space: every kernel kind applies it, tensor cores no gradient prep", "[dwconv][activation]") {
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
    for (DType t : {DType::f32, DType::bf16}) {
      const bool one_d = l == DwLayout::ncl || l == DwLayout::nlc;
      DwConvArgs a = one_d ? args_causal(DwDirection::forward, Activation::silu) : args_2d(DwDirection::forward, l, Activation::silu);
      a.layout = l;
      a.dtype = t;
      a.c = 32;
      if (!one_d) a.h = a.w = 32;  // planes the tensor-core tiles fit
      const Problem forward = dwconv::make_problem(a);
      a.activation = Activation::none;
      const Problem plain = dwconv::make_problem(a);
      a.direction = DwDirection::backward_data;
      a.activation = Activation::silu;
      if (one_d) a.initial_state = fake(9 << 20);  // keeps the prep (1D stride 1 is the fused data gradient)
      const Problem prep = *dwconv::gradient_prep_problem(a);
      INFO(forward.key());
      // An activation is an epilogue: the forward space is the plain one.
      const auto space = dwconv::enumerate(forward);
      CHECK(space == dwconv::enumerate(plain));
      CHECK(dwconv::heuristic_config(forward, 8) == dwconv::heuristic_config(plain, 8));
      // The gradient prep: the same space without the tensor-core tiles, with a reason.
      std::vector<Config> without_mma;
      for (const auto& c : space)
        if (c.kernel() != dwconv::Kernel::mma) without_mma.push_back(c);
      CHECK(dwconv::enumerate(prep) == without_mma);
      for (const auto& c : space)
        if (c.kernel() == dwconv::Kernel::mma) {
          std::string why;
          CHECK_FALSE(dwconv::is_runnable(prep, c, &why));
          CHECK(why.find("no gradient prep") != std::string::npos);
        }
      CHECK(dwconv::heuristic_config(prep, 8).kernel() != dwconv::Kernel::mma);
      if (t == DType::bf16 && l == DwLayout::nhwc) CHECK(space.size() > without_mma.size());  // the tensor-core tiles exist
      // The gradient prep reads dy: its model bytes count it.
      CHECK(dwconv::model_bytes(prep, prep.n) > dwconv::model_bytes(forward, forward.n));
    }
  // backward_data's activation is the fused 1D data gradient: not 2D.
  Problem p = dwconv::make_problem(args_2d(DwDirection::backward_data));
  p.activation = Activation::silu;
  std::string why;
  CHECK_FALSE(dwconv::is_runnable(p, dwconv::heuristic_config(dwconv::make_problem(args_2d(DwDirection::backward_data)), 8), &why));
  CHECK(why.find("1D, stride 1") != std::string::npos);
  // backward_weight's is the fused 1D weight gradient: not 2D.
  p = dwconv::make_problem(args_2d(DwDirection::backward_weight));
  p.activation = Activation::silu;
  CHECK_FALSE(dwconv::is_runnable(p, dwconv::heuristic_config(dwconv::make_problem(args_2d(DwDirection::backward_weight)), 8), &why));
  CHECK(why.find("is 1D") != std::string::npos);
}

TEST_CASE("the fused 1D weight gradient: which calls, keys, plans, its space", "[dwconv][activation]") {
  DwConvArgs a = args_causal(DwDirection::backward_weight, Activation::silu);
  a.bias = fake(6 << 20), a.dbias = fake(7 << 20);
  REQUIRE(dwconv::fused_weight_gradient(a));
  const Problem p = dwconv::make_problem(a);
  // One problem: the activation in its key, no gradient prep, no fix-up, x and dy read by the kernel.
  CHECK(p.activation == Activation::silu);
  CHECK_FALSE(p.gradient_prep);
  CHECK(p.epilogue() == 1);
  CHECK_FALSE(dwconv::gradient_prep_problem(a));
  DwConvArgs plain = a;
  plain.activation = Activation::none;
  CHECK(p.key() == dwconv::make_problem(plain).key() + ",act=silu");
  CHECK(dwconv::problem_from_key(p.key()) == p);
  a.dy = fake((3 << 20) + 4);  // dy's alignment counts (the unfused form read the prep's output instead)
  CHECK(dwconv::make_problem(a).align_bytes == 4);  // f32
  a.dy = fake(3 << 20);
  // seq_idx: masked in the kernel (",seq=1"), no dwconv_states problem.
  DwConvArgs packed = a;
  packed.seq_idx = static_cast<const std::int32_t*>(fake(8 << 20));
  const Problem q = dwconv::make_problem(packed);
  CHECK(q.seq_idx);
  CHECK(q.key() == p.key() + ",seq=1");
  CHECK(dwconv::problem_from_key(q.key()) == q);
  CHECK_FALSE(dwconv_states::make_plan(packed).prep);
  CHECK_FALSE(dwconv_states::make_plan(packed).fix);
  // Not fused: an initial state (its z reads the state), 2D, a window over the register budget, rows
  // shorter than a run; those keep the gradient prep and the plain problem.
  DwConvArgs init = a;
  init.initial_state = fake(9 << 20);
  DwConvArgs wide = a;
  wide.dilation_w = 20;  // (4 - 1) x 20 + 4 + 1 registers > 64
  DwConvArgs short_rows = a;
  short_rows.w = 3;
  for (const DwConvArgs& b : {init, wide, short_rows, args_2d(DwDirection::backward_weight, DwLayout::nchw, Activation::silu)}) {
    INFO(dwconv::make_problem(b).key());
    CHECK_FALSE(dwconv::fused_weight_gradient(b));
    CHECK(dwconv::make_problem(b).activation == Activation::none);
    CHECK(dwconv::gradient_prep_problem(b));
  }
  // The fix-up kernel's grid limits (channels, rows x length) do not bind the fused call, which runs none.
  DwConvArgs many = args_causal(DwDirection::backward_weight, Activation::silu);
  many.c = 65535 * 32 + 8;
  dwconv::set_placeholders(many, false);
  many.seq_idx = reinterpret_cast<const std::int32_t*>(std::uintptr_t(7) << 44);
  CHECK_NOTHROW(dwconv_states::validate(many));
  many.activation = Activation::none;
  CHECK_THROWS_AS(dwconv_states::validate(many), Error);
  DwConvArgs dilated = a;
  dilated.dilation_w = 19;  // (4 - 1) x 19 + 4 + 1 = 62: fused
  CHECK(dwconv::fused_weight_gradient(dilated));
  // Keys the library never builds.
  for (const std::string& bad : {p.key() + ",seq=1,seq=1", p.key() + ",seq=0", dwconv::make_problem(plain).key() + ",seq=1",
                                 dwconv::make_problem(plain).key() + ",act=silu_grad",
                                 dwconv::make_problem(wide).key() + ",act=silu"})
    CHECK_FALSE(dwconv::problem_from_key(bad));
  // Its space: register-tiled runs of one row with every tap, never staged; the heuristic among them; the
  // kernel name gains EPI and SEQ, the plain problem's names stay.
  for (const Problem& r : {p, q}) {
    const auto space = dwconv::enumerate(r);
    REQUIRE(!space.empty());
    for (const Config& c : space) {
      const auto& w = c.wgrad();
      CHECK(w.outputs_per_thread > 1);
      CHECK(w.taps_per_block == 4);
      CHECK_FALSE(w.staged);
      CHECK(w.rows_per_thread == 1);
      const std::string name = dwconv::compile_request(r, c, "compute_90").name_expressions[0];
      CHECK(name.size() > 12);
      CHECK(name.compare(name.size() - 11, 11, r.seq_idx ? ", -1, 1, 1>" : ", -1, 1, 0>") == 0);
    }
    CHECK(dwconv::is_valid(r, dwconv::heuristic_config(r, 8)));
  }
  for (const Config& c : dwconv::enumerate(dwconv::make_problem(plain)))
    CHECK(dwconv::compile_request(dwconv::make_problem(plain), c, "compute_90").name_expressions[0].find("-1") ==
          std::string::npos);
  // Every shape the rule calls fused has a space and a valid heuristic (both layouts, K and dilation
  // up to the register budget, strides, short rows).
  int fused = 0;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
    for (int k : {1, 2, 4, 7, 31, 63})
      for (int d : {1, 2, 8})
        for (int s : {1, 2})
          for (std::int64_t w : {3, 4, 9, 64, 200})
            for (std::int64_t c : {1, 3, 4, 16}) {
            DwConvArgs b = args_causal(DwDirection::backward_weight, Activation::gelu_tanh);
            b.layout = l, b.kernel_w = k, b.dilation_w = d, b.stride_w = s, b.w = w, b.c = c;
            b.causal = s == 1;
            try {
              dwconv::validate(b);
            } catch (const Error&) {
              continue;
            }
            if (!dwconv::fused_weight_gradient(b)) continue;
            const Problem r = dwconv::make_problem(b);
            INFO(r.key());
            CHECK(!dwconv::enumerate(r).empty());
            CHECK(dwconv::is_valid(r, dwconv::heuristic_config(r, 8)));
            ++fused;
          }
  CHECK(fused > 200);
}

TEST_CASE("the fused 1D data gradient: which calls, keys, its space", "[dwconv][activation]") {
  DwConvArgs a = args_causal(DwDirection::backward_data, Activation::silu);
  a.bias = fake(6 << 20);
  REQUIRE(dwconv::fused_data_gradient(a));
  const Problem p = dwconv::make_problem(a);
  // One problem: the activation in its key (no bias flag: backward_data has no bias output), no
  // gradient prep, no fix-up; x is read by the kernel, so its alignment counts.
  CHECK(p.activation == Activation::silu);
  CHECK_FALSE(p.gradient_prep);
  CHECK_FALSE(p.bias);
  CHECK(p.epilogue() == 1);
  CHECK_FALSE(dwconv::gradient_prep_problem(a));
  CHECK_FALSE(dwconv_states::make_plan(a).fix);
  DwConvArgs plain = a;
  plain.activation = Activation::none;
  CHECK(p.key() == dwconv::make_problem(plain).key() + ",act=silu");
  CHECK(dwconv::problem_from_key(p.key()) == p);
  a.x = fake(4);
  CHECK(dwconv::make_problem(a).align_bytes == 4);
  a.x = fake(0);
  // The kernel reads x and the bias besides dy: its model bytes count them.
  CHECK(dwconv::model_bytes(p, p.n) ==
        Approx(dwconv::model_bytes(dwconv::make_problem(plain), p.n) + 4.0 * double(p.n * p.c * p.w + p.c)));
  // seq_idx: masked in the kernel (",seq=1"), no dwconv_states problem.
  DwConvArgs packed = a;
  packed.seq_idx = static_cast<const std::int32_t*>(fake(8 << 20));
  REQUIRE(dwconv::fused_data_gradient(packed));
  CHECK(dwconv::in_kernel_seq_idx(packed));
  const Problem q = dwconv::make_problem(packed);
  CHECK(q.key() == p.key() + ",seq=1");
  CHECK(dwconv::problem_from_key(q.key()) == q);
  CHECK_FALSE(dwconv_states::make_plan(packed).prep);
  CHECK_FALSE(dwconv_states::make_plan(packed).fix);
  // Not fused: stride 2, 2D, states (their fix-ups patch the prep's output), a window over the register
  // budget, short rows. Those keep the gradient prep and the plain problem.
  DwConvArgs strided = args_causal(DwDirection::backward_data, Activation::silu);
  strided.causal = false, strided.stride_w = 2, strided.pad_left = 1;
  DwConvArgs init = a, dinit = a, wide = a, short_rows = a;
  short_rows.w = 31;
  init.initial_state = fake(9 << 20);
  dinit.dinitial_state = fake(10 << 20);
  wide.dilation_w = 11;  // 1 + 2 x 33 registers > 64
  for (const DwConvArgs& b : {strided, init, dinit, wide, short_rows,
                              args_2d(DwDirection::backward_data, DwLayout::nchw, Activation::silu)}) {
    INFO(dwconv::make_problem(b).key());
    CHECK_FALSE(dwconv::fused_data_gradient(b));
    CHECK(dwconv::make_problem(b).activation == Activation::none);
    CHECK(dwconv::gradient_prep_problem(b));
  }
  DwConvArgs dilated = a;
  dilated.dilation_w = 10;  // 1 + 2 x 30 = 61
  CHECK(dwconv::fused_data_gradient(dilated));
  // Keys the library never builds.
  for (const std::string& bad : {p.key() + ",seq=1,seq=1", q.key() + ",act=silu", dwconv::make_problem(plain).key() + ",act=silu_grad",
                                 dwconv::make_problem(wide).key() + ",act=silu",
                                 dwconv::make_problem(strided).key() + ",act=relu"})
    CHECK_FALSE(dwconv::problem_from_key(bad));
  // Its space: tiled variants with windows from global memory and one row a thread (no direct, staged or
  // tensor-core kernels); the heuristic among them; the names gain EPI (and SEQ), the plain problem's stay.
  for (const Problem& r : {p, q}) {
    const auto space = dwconv::enumerate(r);
    REQUIRE(space.size() > 10);
    for (const Config& c : space) {
      INFO(c.label());
      REQUIRE(c.kernel() == dwconv::Kernel::tiled);
      CHECK_FALSE(c.tiled().smem_halo);
      CHECK(c.tiled().rows_per_thread == 1);
      const std::string name = dwconv::compile_request(r, c, "compute_90").name_expressions[0];
      const std::string end = r.seq_idx ? ", 1, 1>" : ", 0, 1>";  // EPI (and SEQ) last
      CHECK(name.compare(name.size() - end.size(), end.size(), end) == 0);
    }
    CHECK(dwconv::is_valid(r, dwconv::heuristic_config(r, 8)));
  }
  std::string why;
  CHECK_FALSE(dwconv::is_runnable(p, dwconv::DirectConfig{true}, &why));
  CHECK(why.find("tiled kernels only") != std::string::npos);
  // Every shape the rule calls fused has a space and a valid heuristic (both layouts, K and dilation up
  // to the register budget, padding, lengths, channels).
  int fused = 0;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
    for (int k : {1, 2, 4, 7, 31})
      for (int d : {1, 2, 8})
        for (int pad : {-1, 0, 3})
          for (std::int64_t w : {1, 9, 32, 33, 64, 200})
            for (std::int64_t c : {1, 3, 4, 16}) {
              DwConvArgs b = args_causal(DwDirection::backward_data, Activation::gelu_erf);
              b.layout = l, b.kernel_w = k, b.dilation_w = d, b.w = w, b.c = c;
              b.causal = pad < 0;
              if (pad >= 0) b.pad_left = b.pad_right = pad;
              try {
                dwconv::validate(b);
              } catch (const Error&) {
                continue;
              }
              if (!dwconv::fused_data_gradient(b)) continue;
              const Problem r = dwconv::make_problem(b);
              INFO(r.key());
              CHECK(!dwconv::enumerate(r).empty());
              CHECK(dwconv::is_valid(r, dwconv::heuristic_config(r, 8)));
              CHECK(dwconv::problem_from_key(r.key()) == r);
              ++fused;
            }
  CHECK(fused > 200);
}

TEST_CASE("seq_idx masked in the forward kernel: which calls, keys, and a valid heuristic for every shape", "[dwconv][states]") {
  DwConvArgs a = args_causal(DwDirection::forward, Activation::none);
  a.seq_idx = static_cast<const std::int32_t*>(fake(8 << 20));
  REQUIRE(dwconv::in_kernel_seq_idx(a));
  const Problem p = dwconv::make_problem(a);
  DwConvArgs plain = a;
  plain.seq_idx = nullptr;
  CHECK(p.key() == dwconv::make_problem(plain).key() + ",seq=1");
  CHECK(dwconv::problem_from_key(p.key()) == p);
  CHECK_FALSE(dwconv_states::make_plan(a).fix);
  // With a state, or rows under 32, the fix-up stays (and the key is the plain one).
  DwConvArgs state = a, short_rows = a;
  state.final_state = fake(9 << 20);
  short_rows.w = 31;
  for (const DwConvArgs& b : {state, short_rows}) {
    CHECK_FALSE(dwconv::in_kernel_seq_idx(b));
    CHECK_FALSE(dwconv::make_problem(b).seq_idx);
    CHECK(dwconv_states::make_plan(b).fix);
  }
  // Every shape the rule admits: a space of tiled variants only, a valid heuristic, its key parsed back.
  int shapes = 0;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
    for (int k : {2, 4, 31, 63})
      for (int d : {1, 8})
        for (std::int64_t w : {32, 33, 200})
          for (std::int64_t c : {1, 3, 16})
            for (bool act : {false, true}) {
              DwConvArgs b = args_causal(DwDirection::forward, act ? Activation::silu : Activation::none);
              b.layout = l, b.kernel_w = k, b.dilation_w = d, b.w = w, b.c = c, b.dtype = act ? DType::bf16 : DType::f32;
              b.seq_idx = a.seq_idx;
              try {
                dwconv::validate(b);
              } catch (const Error&) {
                continue;
              }
              if (!dwconv::in_kernel_seq_idx(b)) continue;
              const Problem r = dwconv::make_problem(b);
              INFO(r.key());
              const auto space = dwconv::enumerate(r);
              REQUIRE(!space.empty());
              for (const Config& cfg : space) CHECK(cfg.kernel() == dwconv::Kernel::tiled);
              CHECK(dwconv::is_valid(r, dwconv::heuristic_config(r, 8)));
              CHECK(dwconv::problem_from_key(r.key()) == r);
              ++shapes;
            }
  CHECK(shapes > 150);
}

TEST_CASE("dwconv activation reference: values, derivatives, PyTorch's definitions", "[dwconv][activation]") {
  using dwconv::activation_derivative;
  using dwconv::activation_value;
  // Hand values (PyTorch: F.silu(1), F.gelu(1, approximate='tanh'), F.gelu(1)).
  CHECK(activation_value(Activation::silu, 1.0) == Approx(0.7310585786300049).epsilon(1e-14));
  CHECK(activation_value(Activation::gelu_tanh, 1.0) == Approx(0.8411919906082768).epsilon(1e-14));
  CHECK(activation_value(Activation::gelu_erf, 1.0) == Approx(0.8413447460685429).epsilon(1e-14));
  CHECK(activation_value(Activation::gelu_erf, -2.0) == Approx(-0.04550026389635842).epsilon(1e-12));
  CHECK(activation_value(Activation::relu, -0.5) == 0.0);
  CHECK(activation_value(Activation::relu, 0.5) == 0.5);
  CHECK(activation_value(Activation::none, -0.5) == -0.5);
  CHECK(activation_derivative(Activation::relu, 0.0) == 0.0);
  CHECK(activation_derivative(Activation::relu, 1e-300) == 1.0);
  // Derivatives against central differences, away from relu's kink.
  for (Activation act : kActivations)
    for (double z : {-4.0, -1.3, -0.2, 0.1, 0.7, 2.5, 6.0}) {
      const double h = 1e-6;
      const double numeric = (activation_value(act, z + h) - activation_value(act, z - h)) / (2 * h);
      INFO(to_string(act) << " at " << z);
      CHECK(activation_derivative(act, z) == Approx(numeric).epsilon(1e-7).margin(1e-9));
    }
}

TEST_CASE("dwconv activation reference: backward passes are gradients of <dy, act(conv)>", "[dwconv][activation]") {
  // L(x, w, b) = <dy, act(conv(x, w) + b)>. backward_data of the gradient prep is dL/dx, backward_weight
  // of it dL/dw and dL/db; checked along random directions by central differences.
  for (DwLayout l : {DwLayout::ncl, DwLayout::nhwc})
    for (Activation act : {Activation::silu, Activation::gelu_tanh, Activation::gelu_erf}) {
      DwConvArgs a = l == DwLayout::ncl ? args_causal(DwDirection::forward, act) : args_2d(DwDirection::forward, l, act);
      a.layout = l;
      a.c = 3, a.stride_w = 2;
      if (l == DwLayout::nhwc) a.dilation_h = 2, a.pad_top = a.pad_bottom = 2;
      const Problem p = dwconv::make_problem(a);
      const std::int64_t n = a.n;
      const auto x = random_vector(std::size_t(n * p.c * p.h * p.w), 1);
      const auto w = random_vector(std::size_t(p.c * p.kh * p.kw), 2);
      const auto b = random_vector(std::size_t(p.c), 3);
      const auto dy = random_vector(std::size_t(n * p.c * p.out_h() * p.out_w()), 4);
      const auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww, const std::vector<double>& bb) {
        return dot(dy, dwconv::reference_forward(p, n, xx, ww, bb));
      };
      const auto g = dwconv::reference_gradient_prep(p, n, x, w, b, dy);
      Problem data = p;
      data.direction = DwDirection::backward_data;
      data.activation = Activation::none;
      const auto dx = dwconv::reference_backward_data(data, n, g, w);
      std::vector<double> dw, db;
      dwconv::reference_backward_weight(p, n, x, g, dw, db);
      const double h = 1e-5;
      const auto along = [&](const std::vector<double>& v, const std::vector<double>& dir, double s) {
        std::vector<double> out = v;
        for (std::size_t i = 0; i < out.size(); ++i) out[i] += s * dir[i];
        return out;
      };
      INFO(p.key());
      const auto vx = random_vector(x.size(), 5), vw = random_vector(w.size(), 6), vb = random_vector(b.size(), 7);
      CHECK(dot(dx, vx) == Approx((loss(along(x, vx, h), w, b) - loss(along(x, vx, -h), w, b)) / (2 * h)).epsilon(1e-6));
      CHECK(dot(dw, vw) == Approx((loss(x, along(w, vw, h), b) - loss(x, along(w, vw, -h), b)) / (2 * h)).epsilon(1e-6));
      CHECK(dot(db, vb) == Approx((loss(x, w, along(b, vb, h)) - loss(x, w, along(b, vb, -h))) / (2 * h)).epsilon(1e-6));
    }
}

// Each kernel kind with each epilogue compiles to sm_90: per layout and epilogue (4 activations, 4
// gradient preps; dtypes rotating), the first variant of every kind in the space (kernel, staging,
// flat items, rows and runs per thread, vectors, shared filter) and the float64 reference kernel.
TEST_CASE("dwconv activation: every kernel kind compiles with each epilogue for sm_90", "[dwconv][activation][nvrtc][compiles]") {
  std::vector<detail::CompileRequest> batches;
  std::size_t kernels = 0;
  std::set<std::string> kinds_seen;
  int i = 0;
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
    for (Activation act : kActivations)
      for (bool grad : {false, true}) {
        const DType t = std::array<DType, 3>{DType::f32, DType::f16, DType::bf16}[std::size_t(i++ % 3)];
        const bool one_d = l == DwLayout::ncl || l == DwLayout::nlc;
        DwConvArgs a = one_d ? args_causal(DwDirection::forward, act) : args_2d(DwDirection::forward, l, act);
        a.layout = l;
        a.dtype = t == DType::f32 && l == DwLayout::nhwc ? DType::bf16 : t;  // NHWC: the tensor-core tiles too
        a.c = 32;
        if (i % 2) a.bias = fake(6 << 20);
        if (!one_d) a.h = a.w = 32, a.kernel_h = a.kernel_w = 5, a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 2;
        Problem p = dwconv::make_problem(a);
        p.gradient_prep = grad;
        std::set<std::string> kinds;
        std::vector<detail::CompileRequest> requests{dwconv::reference_request(p, "sm_90")};
        requests[0].name_expressions.resize(1);  // the reference kernel only
        for (const auto& c : dwconv::enumerate(p)) {
          std::string kind = dwconv::to_string(c.kernel());
          if (const auto* t = std::get_if<dwconv::TiledConfig>(&c.variant()))
            kind += fmt::format(",{},{},{},{},{},{}", t->smem_halo, t->flat, t->rows_per_thread > 1, t->runs_per_thread > 1,
                                t->vector_channels > 1, t->smem_filter);
          else if (const auto* d = std::get_if<dwconv::DirectConfig>(&c.variant()))
            kind += fmt::format(",{}", d->coalesced);
          if (!kinds.insert(kind).second) continue;
          requests.push_back(dwconv::compile_request(p, c, "sm_90"));
          // EPI closes the name, but for 2D tiled and tensor-core variants' shape constants after
          // it (the tiled kernel's after SEQ = 0), which are stripped first.
          std::string name = requests.back().name_expressions[0];
          const bool tiled = c.kernel() == dwconv::Kernel::tiled;
          const std::string shape = fmt::format("{}, {}, {}, {}, {}, {}>", tiled ? ", 0" : "", p.c, p.src_h(), p.src_w(),
                                                p.dst_h(), p.dst_w());
          const bool shaped = p.fixed_shape() && (tiled || c.kernel() == dwconv::Kernel::mma);
          CHECK(Catch::endsWith(name, shape) == shaped);
          if (shaped) name = name.substr(0, name.size() - shape.size()) + ">";
          CHECK(name.find(fmt::format(", {}>", p.epilogue())) != std::string::npos);
          kinds_seen.insert(fmt::format("{}/{}", to_string(l), kind));
        }
        kernels += requests.size();
        test::add_batched(batches, requests, 64);
      }
  // The fused 1D data gradient (backward_data with an activation): each kind of its space, and the
  // reference kernel in that mode.
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc})
    for (Activation act : kActivations) {
      DwConvArgs a = args_causal(DwDirection::backward_data, act);
      a.layout = l;
      a.dtype = std::array<DType, 3>{DType::f32, DType::f16, DType::bf16}[std::size_t(i++ % 3)];
      a.c = 32;
      a.dilation_w = 1 + int(act) % 2;
      const Problem p = dwconv::make_problem(a);
      REQUIRE(p.activation == act);
      std::set<std::string> kinds;
      std::vector<detail::CompileRequest> requests{dwconv::reference_request(p, "sm_90")};
      requests[0].name_expressions.resize(1);
      for (const auto& c : dwconv::enumerate(p)) {
        const auto& t = c.tiled();
        const std::string kind = fmt::format("fused-data,{},{},{}", t.runs_per_thread > 1, t.vector_channels > 1, t.smem_filter);
        if (!kinds.insert(kind).second) continue;
        requests.push_back(dwconv::compile_request(p, c, "sm_90"));
        kinds_seen.insert(fmt::format("{}/{}", to_string(l), kind));
      }
      kernels += requests.size();
      test::add_batched(batches, requests, 64);
    }
  const auto results = test::compile_batches(batches);
  for (const auto& failure : results.failures) {
    INFO(failure);
    CHECK(failure.empty());
  }
  CHECK(results.compiled + results.left_out == kernels);
  CHECK(kinds_seen.size() > 20);
  CHECK(kinds_seen.count("nhwc/mma") == 1);  // the tensor-core tiles (activations only)
  WARN("compiled " << results.compiled << " dwconv kernels with epilogues (" << kinds_seen.size()
                   << " layout x kernel kinds) for sm_90");
}
