// The tiled dwconv kernel (kernel_templates/dwconv/dwconv_tiled*.cuh) compiled as host C++ and run on
// emulated CUDA threads (tests/emulation/common.cuh), for the 1D causal channel-first forms with a
// fused activation and seq_idx: the forward (act(conv + bias), taps masked across sequences) and the
// fused data gradient (dy * act'(z) formed from an x window beside each dy window); and channel-last
// long windows (NLC K = 63, windows over 64 registers, loaded in segments). Every tensor is a
// host buffer of exactly its size, so under AddressSanitizer (the asan stage of tests/run_all.sh) a
// read or write outside one is an error (compute-sanitizer on the GPU sees only the tuning harness's
// allocations, each at least 256 bytes: not a read a little past a small weight or bias tensor). Each instantiation is one variant of the library's space: the test finds the Config whose
// kernel name is the instantiation's before it runs it, and compares with the float64 reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_reference.h"
#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"

#include "emulation/values.h"
#include "emulation/kernel_begin.h"
#include "kernel_templates/dwconv/dwconv.cu"
#include "emulation/kernel_end.h"

using namespace kvtune;

namespace {

std::vector<double> values(std::size_t n, unsigned seed) { return kvt_emulated_values(n, seed); }

// The variant of `problem`'s space labelled `label`, REQUIREd to exist and to be the instantiation
// `name` that the test runs.
dwconv::Config variant_named(const dwconv::Problem& problem, const std::string& label, const std::string& name) {
  const auto space = dwconv::enumerate(problem);
  const auto it = std::find_if(space.begin(), space.end(), [&](const dwconv::Config& c) { return c.label() == label; });
  REQUIRE(it != space.end());
  if (!name.empty()) REQUIRE(dwconv::compile_request(problem, *it, "sm_90").name_expressions.at(0) == name);
  return *it;
}

// Relative L2 error, as the tuner's verification measures it (kvt_compare).
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// kvt_dwconv_tiled for a 1D causal channel-first f32 problem, K = 4, as kernel_name() writes it: the
// trailing arguments RH, RT, FLAT, EPI, SEQ only up to the last one not at its default.
template <int DIR, int RW, int TX, int TY, int VC, int FILTER, int BIAS, int RT, int EPI, int SEQ>
std::string expected_name() {
  std::string name = "kvt_dwconv_tiled<float, 0, " + std::to_string(DIR) + ", 1, 4, 1, 1, 1, 1, 0, 3, " +
                     std::to_string(RW) + ", " + std::to_string(TX) + ", " + std::to_string(TY) + ", " +
                     std::to_string(VC) + ", 0, " + std::to_string(FILTER) + ", " + std::to_string(BIAS);
  const int trailing[][2] = {{1, 1}, {RT, 1}, {0, 0}, {EPI, 0}, {SEQ, 0}};  // value, default
  int last = -1;
  for (int i = 0; i < 5; ++i)
    if (trailing[i][0] != trailing[i][1]) last = i;
  for (int i = 0; i <= last; ++i) name += ", " + std::to_string(trailing[i][0]);
  return name + ">";
}

// BIAS: the forward's bias input (HAS_BIAS); the fused data gradient reads one for z when given
// (p.bias), with HAS_BIAS 0 either way.
template <int DIR, int RW, int TX, int TY, int VC, int FILTER, int RT, int EPI, int SEQ, bool BIAS = true>
void check(std::int64_t n, std::int64_t c, std::int64_t w, std::int64_t typical_sequence) {
  const Activation act = Activation(EPI & 7);
  DwConvArgs a;
  a.direction = DwDirection(DIR), a.layout = DwLayout::ncl, a.dtype = DType::f32;
  a.n = n, a.c = c, a.w = w, a.kernel_w = 4, a.causal = true, a.activation = act;
  const std::size_t tensor = std::size_t(n * c * w);
  const auto x = values(tensor, 1), weight = values(std::size_t(c * 4), 2), bias = values(std::size_t(c), 3);
  const auto dy = values(tensor, 4);
  const auto seq = SEQ ? dwconv_states::packed_seq_idx(n, w, typical_sequence, 7) : std::vector<std::int32_t>{};
  const std::vector<float> fx(x.begin(), x.end()), fw(weight.begin(), weight.end()), fb(bias.begin(), bias.end());
  const std::vector<float> fdy(dy.begin(), dy.end());
  std::vector<float> out(tensor, NAN);
  a.x = fx.data(), a.weight = fw.data(), a.bias = BIAS ? fb.data() : nullptr, a.seq_idx = SEQ ? seq.data() : nullptr;
  if (DIR == 0) a.y = out.data();
  else a.dy = fdy.data(), a.dx = out.data();
  dwconv::validate(a);
  const dwconv::Problem problem = dwconv::make_problem(a);
  REQUIRE(problem.epilogue() == EPI);
  REQUIRE(problem.seq_idx == bool(SEQ));
  const std::string name = expected_name<DIR, RW, TX, TY, VC, FILTER, DIR == 0 && BIAS ? 1 : 0, RT, EPI, SEQ>();
  INFO(problem.key() << " " << name << " n=" << n << " w=" << w);
  const dwconv::Config* config = nullptr;
  const auto space = dwconv::enumerate(problem);
  for (const auto& candidate : space)
    if (dwconv::compile_request(problem, candidate, "sm_90").name_expressions.at(0) == name) config = &candidate;
  REQUIRE(config != nullptr);  // the instantiation is a variant of the library's space
  const dwconv::Geometry g = dwconv::geometry(problem, *config, n);
  REQUIRE(g.block == unsigned(TX * TY));
  REQUIRE(g.block % 32 == 0);  // whole warps: the emulated shuffles' barriers count 32 lanes
  REQUIRE(g.dynamic_smem <= sizeof(kvt_emulated_dynamic_smem));
  const KvtDwConvParams params = dwconv::kernel_params(problem, dwconv::launch_args(a));

  // The float64 reference of the whole operation (taps masked across sequences, as seq_idx says).
  dwconv_states::Problem ref;
  ref.layout = DwLayout::ncl, ref.n = n, ref.c = c, ref.w = w, ref.k = 4, ref.bias = BIAS, ref.seq_idx = SEQ;
  const std::vector<double> bias_ref = BIAS ? bias : std::vector<double>{};
  std::vector<double> want;
  if (DIR == 0) {
    ref.activation = act;
    want = dwconv_states::reference_forward(ref, n, x, weight, bias_ref, {}, seq, {}, nullptr);
  } else {
    ref.activation = act, ref.gradient_prep = true;
    const auto grad = dwconv_states::reference_forward(ref, n, x, weight, bias_ref, {}, seq, dy, nullptr);
    ref.direction = DwDirection::backward_data, ref.activation = Activation::none, ref.gradient_prep = false;
    want = dwconv_states::reference_backward_data(ref, n, grad, weight, seq, nullptr);
  }
  if (SEQ) {  // the masks change the result: a kernel that ignored seq_idx would fail below
    dwconv_states::Problem plain = ref;
    plain.seq_idx = false;
    std::vector<double> unmasked;
    if (DIR == 0) {
      unmasked = dwconv_states::reference_forward(plain, n, x, weight, bias_ref, {}, {}, {}, nullptr);
    } else {
      plain.direction = DwDirection::forward, plain.activation = act, plain.gradient_prep = true;
      const auto grad = dwconv_states::reference_forward(plain, n, x, weight, bias_ref, {}, {}, dy, nullptr);
      plain.direction = DwDirection::backward_data, plain.activation = Activation::none, plain.gradient_prep = false;
      unmasked = dwconv_states::reference_backward_data(plain, n, grad, weight, {}, nullptr);
    }
    REQUIRE(relative_error(std::vector<float>(unmasked.begin(), unmasked.end()), want) > 1e-2);
  }
  kvt_emulated_launch(g.grid_x, g.grid_y, g.block, static_cast<long long>(g.dynamic_smem), [&params] {
    kvt_dwconv_tiled<float, 0, DIR, 1, 4, 1, 1, 1, 1, 0, 3, RW, TX, TY, VC, 0, FILTER, DIR == 0 && BIAS ? 1 : 0, 1, RT, 0, EPI,
                     SEQ>(params);
  });
  CHECK(relative_error(out, want) < 1e-5);
}

// The seven variants an exhaustive tune runs (after pruning) of the 1D problem that compute-sanitizer's
// synccheck stopped at once on an H200 (bench/results/2026-11-29-h200-sanitize-changed/, problem 47:
// backward_data NCL f32 2 x 6 x 37, K = 4 causal, gelu_tanh, seq_idx, no bias; never reproduced),
// and of the matching forward; the tile shapes, not the problem, set which ones a shape takes.
template <int DIR, int EPI, int SEQ, bool BIAS = true>
void seven_variants(std::int64_t n, std::int64_t c, std::int64_t w, std::int64_t typical) {
  check<DIR, 4, 32, 4, 1, 0, 1, EPI, SEQ, BIAS>(n, c, w, typical);
  check<DIR, 1, 64, 1, 1, 0, 1, EPI, SEQ, BIAS>(n, c, w, typical);
  check<DIR, 1, 128, 1, 1, 0, 1, EPI, SEQ, BIAS>(n, c, w, typical);
  check<DIR, 1, 64, 1, 1, 1, 1, EPI, SEQ, BIAS>(n, c, w, typical);
  check<DIR, 1, 128, 1, 1, 1, 1, EPI, SEQ, BIAS>(n, c, w, typical);
  check<DIR, 2, 64, 1, 1, 0, 1, EPI, SEQ, BIAS>(n, c, w, typical);
  check<DIR, 2, 64, 1, 1, 1, 1, EPI, SEQ, BIAS>(n, c, w, typical);
}

}  // namespace

TEST_CASE("emulated tiled dwconv: the fused 1D data gradient with seq_idx, exact buffers", "[dwconv][emulated]") {
  seven_variants<1, 2, 1, false>(2, 6, 37, 6);  // the GPU run's problem: gelu_tanh, no bias, one block a row
  seven_variants<1, 2, 1>(1, 2, 301, 9);        // with a bias; several blocks a row, the last one partial
  seven_variants<1, 1, 0>(2, 3, 70, 0);         // silu without seq_idx
  seven_variants<1, 4, 1>(1, 2, 129, 1);        // relu, sequences of about one position
  // Rows of a multiple of 4: the ids read as 16-byte vectors (runs of 4), and channel-first vectors
  // of 2 with runs per thread, whose windows pass halos between lanes by shuffles.
  check<1, 4, 64, 1, 1, 0, 1, 2, 1>(1, 2, 300, 5);
  check<1, 2, 64, 1, 2, 0, 2, 2, 1>(1, 2, 300, 5);
  check<1, 2, 64, 1, 2, 1, 4, 2, 1, false>(1, 2, 300, 5);
}

TEST_CASE("emulated tiled dwconv: the 1D forward with an activation and seq_idx, exact buffers", "[dwconv][emulated]") {
  seven_variants<0, 2, 1>(2, 6, 37, 6);
  seven_variants<0, 3, 1>(1, 2, 301, 9);  // gelu_erf
  check<0, 4, 64, 1, 1, 0, 1, 2, 1>(1, 2, 300, 5);
}

namespace {

// Channel-last long windows (NLC f32, K = 63, pad 31: "same"): a run of RW outputs reads RW + 62
// positions, over the 64 registers other windows keep to. Forward and backward_data against float64,
// exact buffers; C = 40 (no multiple of a block's channels) and L = 300 (runs past both row ends).
template <int DIR, int RW, int TX, int FILTER>
void check_long(std::int64_t n, std::int64_t c, std::int64_t w) {
  DwConvArgs a;
  a.direction = DwDirection(DIR), a.layout = DwLayout::nlc, a.dtype = DType::f32;
  a.n = n, a.c = c, a.w = w, a.kernel_w = 63, a.pad_left = a.pad_right = 31;
  const std::size_t tensor = std::size_t(n * c * w);
  const auto x = values(tensor, 5), weight = values(std::size_t(c * 63), 6), bias = values(std::size_t(c), 7);
  const std::vector<float> fx(x.begin(), x.end()), fw(weight.begin(), weight.end()), fb(bias.begin(), bias.end());
  std::vector<float> out(tensor, NAN);
  a.weight = fw.data();
  if (DIR == 0) a.x = fx.data(), a.bias = fb.data(), a.y = out.data();
  else a.dy = fx.data(), a.dx = out.data();
  dwconv::validate(a);
  const dwconv::Problem problem = dwconv::make_problem(a);
  const std::string name = "kvt_dwconv_tiled<float, 1, " + std::to_string(DIR) + ", 1, 63, 1, 1, 1, 1, 0, 31, " +
                           std::to_string(RW) + ", " + std::to_string(TX) + ", 1, 1, 0, " + std::to_string(FILTER) +
                           ", " + std::to_string(DIR == 0 ? 1 : 0) + ">";
  INFO(problem.key() << " " << name);
  const dwconv::Config* config = nullptr;
  const auto space = dwconv::enumerate(problem);
  for (const auto& candidate : space)
    if (dwconv::compile_request(problem, candidate, "sm_90").name_expressions.at(0) == name) config = &candidate;
  REQUIRE(config != nullptr);  // a variant of the library's space
  const dwconv::Geometry g = dwconv::geometry(problem, *config, n);
  REQUIRE(g.block == unsigned(TX));
  REQUIRE(g.dynamic_smem <= sizeof(kvt_emulated_dynamic_smem));
  const KvtDwConvParams params = dwconv::kernel_params(problem, dwconv::launch_args(a));
  const std::vector<double> want = DIR == 0 ? dwconv::reference_forward(problem, n, x, weight, bias)
                                            : dwconv::reference_backward_data(problem, n, x, weight);
  kvt_emulated_launch(g.grid_x, g.grid_y, g.block, static_cast<long long>(g.dynamic_smem), [&params] {
    kvt_dwconv_tiled<float, 1, DIR, 1, 63, 1, 1, 1, 1, 0, 31, RW, TX, 1, 1, 0, FILTER, DIR == 0 ? 1 : 0>(params);
  });
  CHECK(relative_error(out, want) < 1e-5);
}

}  // namespace

TEST_CASE("emulated tiled dwconv: a channel-last long window (K = 63, runs of 32 in segments), exact buffers",
          "[dwconv][emulated]") {
  // One variant: each K = 63 instantiation costs 20-30 s of the ASan build's compile (five took 82 s).
  // Runs of 32 load their 94-position window in three segments (kvt_last_segments), the path whose
  // bounds are the easiest to get wrong. The [gpu][dwconv][long] cases run every long-window variant
  // on the GPU.
  check_long<0, 32, 64, 0>(2, 40, 300);
}

namespace {

// A 2D f32 weight gradient (7x7, padding 3, bias) through one register-tiled variant of the library's
// space, found by its label; `launch` runs the instantiation the test names (REQUIREd to be the
// variant's kernel, unless the name is empty). The image (dy 9 x 13) leaves edge tiles in both directions for 4 rows x runs of 8:
// row groups 4, 4, 1 and runs 8, 5. With `inf`, x's last pixel of image 0, channel 0 is an inf: the
// taps that read it for some output are inf or NaN, every other tap stays finite (the corner tile
// then takes the one-row loop and its selects of dy rows; the whole tile's body would spread NaNs).
template <class Launch>
void check_wgrad(DwLayout layout, std::int64_t c, bool inf, const std::string& label, const std::string& name,
                 const Launch& launch) {
  DwConvArgs a;
  a.direction = DwDirection::backward_weight, a.layout = layout, a.dtype = DType::f32;
  a.n = 2, a.c = c, a.h = 9, a.w = 13, a.kernel_h = 7, a.kernel_w = 7;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 3;
  const std::size_t tensor = std::size_t(a.n * c * a.h * a.w);
  auto x = values(tensor, 11);
  const auto dy = values(tensor, 12);
  if (inf) x[std::size_t(layout == DwLayout::nchw ? 8 * 13 + 12 : (8 * 13 + 12) * c)] = INFINITY;
  const std::vector<float> fx(x.begin(), x.end()), fdy(dy.begin(), dy.end());
  std::vector<float> dw(std::size_t(c * 49), NAN), db(std::size_t(c), NAN);
  a.x = fx.data(), a.dy = fdy.data(), a.dweight = dw.data(), a.dbias = db.data();
  dwconv::validate(a);
  const dwconv::Problem problem = dwconv::make_problem(a);
  INFO(problem.key() << " " << label);
  const dwconv::Geometry g = dwconv::geometry(problem, variant_named(problem, label, name), a.n);
  REQUIRE(g.workspace_bytes == 0);  // one split: dw written by the block
  REQUIRE(g.dynamic_smem <= sizeof(kvt_emulated_dynamic_smem));
  const KvtDwConvParams params = dwconv::kernel_params(problem, dwconv::launch_args(a));
  kvt_emulated_launch(g.grid_x, g.grid_y, g.block, static_cast<long long>(g.dynamic_smem), [&] { launch(params); });
  std::vector<double> want_dw, want_db;
  dwconv::reference_backward_weight(problem, a.n, x, dy, want_dw, want_db);
  // The finite taps against the reference; the others inf or NaN where the reference's are.
  std::vector<float> finite_dw;
  std::vector<double> finite_want;
  int not_finite = 0;
  for (std::size_t i = 0; i < dw.size(); ++i) {
    if (std::isfinite(want_dw[i])) {
      finite_dw.push_back(dw[i]), finite_want.push_back(want_dw[i]);
    } else {
      ++not_finite;
      CHECK(!std::isfinite(dw[i]));
    }
  }
  CHECK(not_finite == (inf ? 16 : 0));  // taps (3..6, 3..6) read x's last pixel: dy rows 5..8, columns 9..12
  CHECK(relative_error(finite_dw, finite_want) < 1e-5);
  CHECK(relative_error(db, want_db) < 1e-5);
}

}  // namespace

TEST_CASE("emulated dwconv weight gradient: 2D register tiles of 4 rows x 8 with edge tiles", "[dwconv][emulated]") {
  const bool inf = GENERATE(false, true);
  // Every 2D variant is compiled for its shape: 3 (or 10) channels, x and dy 9 x 13, after the
  // kernels' other arguments (the plain kernel's PIPE, EPI and SEQ at their defaults).
  SECTION("channel-first, x rows from global memory") {
    check_wgrad(DwLayout::nchw, 3, inf, "wgrad,ct=1,py=128,tg=49,split=1,reduce=ordered,rw=8,rh=4",
                "kvt_dwconv_wgrad<float, 0, 7, 7, 1, 1, 1, 1, 3, 3, 1, 128, 49, 0, 1, 8, 4, 1, -1, 0, 0, 3, 9, 13, 9, 13>",
                [](const KvtDwConvParams& p) {
                  kvt_dwconv_wgrad<float, 0, 7, 7, 1, 1, 1, 1, 3, 3, 1, 128, 49, 0, 1, 8, 4, 1, -1, 0, 0, 3, 9, 13, 9, 13>(p);
                });
  }
  SECTION("channel-first, x planes staged in shared memory") {
    check_wgrad(DwLayout::nchw, 3, inf, "wgrad,ct=1,py=128,tg=49,split=1,reduce=ordered,rw=8,rh=4,staged",
                "kvt_dwconv_wgrad_staged<float, 7, 7, 1, 1, 1, 1, 3, 3, 128, 0, 1, 8, 4, 1, 3, 9, 13, 9, 13>",
                [](const KvtDwConvParams& p) {
                  kvt_dwconv_wgrad_staged<float, 7, 7, 1, 1, 1, 1, 3, 3, 128, 0, 1, 8, 4, 1, 3, 9, 13, 9, 13>(p);
                });
  }
  SECTION("channel-first, x planes staged, the run-time form") {
    // Its name is not the library's (which always gives the shape), so no name check: the body
    // without constants, against the same float64 reference.
    check_wgrad(DwLayout::nchw, 3, inf, "wgrad,ct=1,py=128,tg=49,split=1,reduce=ordered,rw=8,rh=4,staged", "",
                [](const KvtDwConvParams& p) { kvt_dwconv_wgrad_staged<float, 7, 7, 1, 1, 1, 1, 3, 3, 128, 0, 1, 8, 4, 1>(p); });
  }
  SECTION("channel-last, a partial tile of channels, compiled for its shape") {
    // The shape constants after PIPE, EPI and SEQ at their defaults: 10 channels, x and dy 9 x 13.
    check_wgrad(DwLayout::nhwc, 10, inf, "wgrad,ct=8,py=32,tg=49,split=1,reduce=ordered,rw=8,rh=4",
                "kvt_dwconv_wgrad<float, 1, 7, 7, 1, 1, 1, 1, 3, 3, 8, 32, 49, 0, 1, 8, 4, 1, -1, 0, 0, 10, 9, 13, 9, 13>",
                [](const KvtDwConvParams& p) {
                  kvt_dwconv_wgrad<float, 1, 7, 7, 1, 1, 1, 1, 3, 3, 8, 32, 49, 0, 1, 8, 4, 1, -1, 0, 0, 10, 9, 13, 9, 13>(p);
                });
  }
}

TEST_CASE("emulated dwconv weight gradient: a 2D variant compiled for its shape writes nothing for another shape",
          "[dwconv][emulated]") {
  // The binaries of check_wgrad's shaped cases (NHWC: 10 channels, NCHW staged: 3 channels, 9 x 13),
  // given the arguments of fewer channels or of 9 x 12 planes: they return at once, dw and dbias
  // stay NaN.
  struct Case {
    DwLayout layout;
    std::int64_t c, w;
  };
  for (const Case& k : {Case{DwLayout::nhwc, 8, 13}, Case{DwLayout::nhwc, 10, 12}, Case{DwLayout::nchw, 2, 13},
                        Case{DwLayout::nchw, 3, 12}}) {
    DwConvArgs a;
    a.direction = DwDirection::backward_weight, a.layout = k.layout, a.dtype = DType::f32;
    a.n = 2, a.c = k.c, a.h = 9, a.w = k.w, a.kernel_h = a.kernel_w = 7;
    a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 3;
    const auto x = values(std::size_t(a.n * k.c * a.h * k.w), 11);
    const std::vector<float> fx(x.begin(), x.end());
    std::vector<float> dw(std::size_t(k.c * 49), NAN), db(std::size_t(k.c), NAN);
    a.x = fx.data(), a.dy = fx.data(), a.dweight = dw.data(), a.dbias = db.data();
    dwconv::validate(a);
    const dwconv::Problem problem = dwconv::make_problem(a);
    INFO(problem.key());
    const KvtDwConvParams params = dwconv::kernel_params(problem, dwconv::launch_args(a));
    kvt_emulated_launch(2, 1, 256, 0, [&params, &k] {
      if (k.layout == DwLayout::nhwc)
        kvt_dwconv_wgrad<float, 1, 7, 7, 1, 1, 1, 1, 3, 3, 8, 32, 49, 0, 1, 8, 4, 1, -1, 0, 0, 10, 9, 13, 9, 13>(params);
      else
        kvt_dwconv_wgrad_staged<float, 7, 7, 1, 1, 1, 1, 3, 3, 128, 0, 1, 8, 4, 1, 3, 9, 13, 9, 13>(params);
    });
    CHECK(std::all_of(dw.begin(), dw.end(), [](float v) { return std::isnan(v); }));
    CHECK(std::all_of(db.begin(), db.end(), [](float v) { return std::isnan(v); }));
  }
}

namespace {

// f32 3x3, padding 1, bias, 2 x 8 x 9 x 13 in `layout`, through the variant `label` whose kernel name
// (with the shape constants 8, 9, 13, 9, 13) is `name`: runs of 4 and rows of 4 leave edge tiles
// both ways. `launch(params, shaped)` runs the shaped instantiation or its run-time form. The shaped
// one matches float64 and the run-time form bit for bit, and writes nothing for another shape.
template <class Launch>
void check_shaped_tiled(DwLayout layout, const std::string& label, const std::string& name, const Launch& launch) {
  DwConvArgs a;
  a.direction = DwDirection::forward, a.layout = layout, a.dtype = DType::f32;
  a.n = 2, a.c = 8, a.h = 9, a.w = 13, a.kernel_h = a.kernel_w = 3;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
  const std::size_t tensor = std::size_t(a.n * a.c * a.h * a.w);
  const auto x = values(tensor, 21), weight = values(std::size_t(a.c * 9), 22), bias = values(std::size_t(a.c), 23);
  const std::vector<float> fx(x.begin(), x.end()), fw(weight.begin(), weight.end()), fb(bias.begin(), bias.end());
  std::vector<float> fixed(tensor, NAN), run_time(tensor, NAN);
  a.x = fx.data(), a.weight = fw.data(), a.bias = fb.data(), a.y = fixed.data();
  dwconv::validate(a);
  const dwconv::Problem problem = dwconv::make_problem(a);
  REQUIRE(problem.fixed_shape());
  INFO(problem.key() << " " << label);
  const dwconv::Geometry g = dwconv::geometry(problem, variant_named(problem, label, name), a.n);
  const auto run = [&](const KvtDwConvParams& params, bool shaped) {
    kvt_emulated_launch(g.grid_x, g.grid_y, g.block, static_cast<long long>(g.dynamic_smem),
                        [&params, shaped, &launch] { launch(params, shaped); });
  };
  run(dwconv::kernel_params(problem, dwconv::launch_args(a)), true);
  CHECK(relative_error(fixed, dwconv::reference_forward(problem, a.n, x, weight, bias)) < 1e-6);
  a.y = run_time.data();
  run(dwconv::kernel_params(problem, dwconv::launch_args(a)), false);
  CHECK(std::memcmp(fixed.data(), run_time.data(), tensor * sizeof(float)) == 0);
  // Arguments of another plane (one column fewer) or channel count: the shaped binary returns at once.
  for (const auto& [c, w] : {std::pair<std::int64_t, std::int64_t>{8, 12}, {4, 13}}) {
    DwConvArgs b = a;
    b.c = c, b.w = w;
    std::vector<float> untouched(tensor, NAN);
    b.y = untouched.data();
    dwconv::validate(b);
    run(dwconv::kernel_params(dwconv::make_problem(b), dwconv::launch_args(b)), true);
    CHECK(std::all_of(untouched.begin(), untouched.end(), [](float v) { return std::isnan(v); }));
  }
}

// The channel-first data gradient of a 2D problem (5 x 5 taps, stride `stride`) through one variant,
// the dy tile in shared memory (halo=smem), against float64: its taps go from the last
// (kvt_first_accumulate), and stride 2 leaves taps that land on no dy position.
template <class Launch>
void check_data_gradient(int stride, const std::string& label, const std::string& name, const Launch& launch) {
  DwConvArgs a;
  a.direction = DwDirection::backward_data, a.layout = DwLayout::nchw, a.dtype = DType::f32;
  a.n = 2, a.c = 3, a.h = 11, a.w = 14, a.kernel_h = a.kernel_w = 5, a.stride_h = a.stride_w = stride;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 2;
  const std::int64_t ho = (a.h + a.pad_top + a.pad_bottom - a.kernel_h) / stride + 1;
  const std::int64_t wo = (a.w + a.pad_left + a.pad_right - a.kernel_w) / stride + 1;
  const auto dy = values(std::size_t(a.n * a.c * ho * wo), 31), weight = values(std::size_t(a.c * a.kernel_h * a.kernel_w), 32);
  const std::vector<float> fdy(dy.begin(), dy.end()), fw(weight.begin(), weight.end());
  std::vector<float> dx(std::size_t(a.n * a.c * a.h * a.w), NAN);
  a.dy = fdy.data(), a.weight = fw.data(), a.dx = dx.data();
  dwconv::validate(a);
  const dwconv::Problem problem = dwconv::make_problem(a);
  INFO(problem.key() << " " << label);
  const dwconv::Geometry g = dwconv::geometry(problem, variant_named(problem, label, name), a.n);
  const KvtDwConvParams params = dwconv::kernel_params(problem, dwconv::launch_args(a));
  kvt_emulated_launch(g.grid_x, g.grid_y, g.block, static_cast<long long>(g.dynamic_smem), [&params, &launch] { launch(params); });
  CHECK(relative_error(dx, dwconv::reference_backward_data(problem, a.n, dy, weight)) < 1e-6);
}

}  // namespace

TEST_CASE("emulated tiled dwconv: 2D variants compiled for their shape, against float64 and bit for bit the "
          "run-time form, and writing nothing for another shape", "[dwconv][emulated]") {
  SECTION("NHWC tiles") {
    check_shaped_tiled(
        DwLayout::nhwc, "tiled,rw=4,tx=16,ty=2,vc=2,halo=global,filter=reg,rh=4",
        "kvt_dwconv_tiled<float, 1, 0, 3, 3, 1, 1, 1, 1, 1, 1, 4, 16, 2, 2, 0, 0, 1, 4, 1, 0, 0, 0, 8, 9, 13, 9, 13>",
        [](const KvtDwConvParams& params, bool shaped) {
          if (shaped) kvt_dwconv_tiled<float, 1, 0, 3, 3, 1, 1, 1, 1, 1, 1, 4, 16, 2, 2, 0, 0, 1, 4, 1, 0, 0, 0, 8, 9, 13, 9, 13>(params);
          else kvt_dwconv_tiled<float, 1, 0, 3, 3, 1, 1, 1, 1, 1, 1, 4, 16, 2, 2, 0, 0, 1, 4>(params);
        });
  }
  SECTION("NCHW tiles") {
    check_shaped_tiled(
        DwLayout::nchw, "tiled,rw=2,tx=16,ty=4,vc=1,halo=global,filter=reg,rh=4",
        "kvt_dwconv_tiled<float, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 2, 16, 4, 1, 0, 0, 1, 4, 1, 0, 0, 0, 8, 9, 13, 9, 13>",
        [](const KvtDwConvParams& params, bool shaped) {
          if (shaped) kvt_dwconv_tiled<float, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 2, 16, 4, 1, 0, 0, 1, 4, 1, 0, 0, 0, 8, 9, 13, 9, 13>(params);
          else kvt_dwconv_tiled<float, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 2, 16, 4, 1, 0, 0, 1, 4>(params);
        });
  }
  SECTION("NCHW flat items") {
    check_shaped_tiled(
        DwLayout::nchw, "tiled,rw=4,tx=64,ty=1,vc=1,halo=global,filter=reg,rh=4,flat",
        "kvt_dwconv_tiled<float, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 4, 64, 1, 1, 0, 0, 1, 4, 1, 1, 0, 0, 8, 9, 13, 9, 13>",
        [](const KvtDwConvParams& params, bool shaped) {
          if (shaped) kvt_dwconv_tiled<float, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 4, 64, 1, 1, 0, 0, 1, 4, 1, 1, 0, 0, 8, 9, 13, 9, 13>(params);
          else kvt_dwconv_tiled<float, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 4, 64, 1, 1, 0, 0, 1, 4, 1, 1>(params);
        });
  }
}

TEST_CASE("emulated tiled dwconv: the 2D channel-first data gradient from a shared tile, stride 1 and 2",
          "[dwconv][emulated]") {
  check_data_gradient(1, "tiled,rw=4,tx=8,ty=8,vc=1,halo=smem,filter=smem",
                      "kvt_dwconv_tiled<float, 0, 1, 5, 5, 1, 1, 1, 1, 2, 2, 4, 8, 8, 1, 1, 1, 0, 1, 1, 0, 0, 0, 3, 11, 14, 11, 14>",
                      [](const KvtDwConvParams& params) {
                        kvt_dwconv_tiled<float, 0, 1, 5, 5, 1, 1, 1, 1, 2, 2, 4, 8, 8, 1, 1, 1, 0, 1, 1, 0, 0, 0, 3, 11, 14, 11, 14>(params);
                      });
  check_data_gradient(2, "tiled,rw=4,tx=8,ty=8,vc=1,halo=smem,filter=smem",
                      "kvt_dwconv_tiled<float, 0, 1, 5, 5, 2, 2, 1, 1, 2, 2, 4, 8, 8, 1, 1, 1, 0, 1, 1, 0, 0, 0, 3, 6, 7, 11, 14>",
                      [](const KvtDwConvParams& params) {
                        kvt_dwconv_tiled<float, 0, 1, 5, 5, 2, 2, 1, 1, 2, 2, 4, 8, 8, 1, 1, 1, 0, 1, 1, 0, 0, 0, 3, 6, 7, 11, 14>(params);
                      });
  check_data_gradient(1, "tiled,rw=4,tx=8,ty=8,vc=1,halo=global,filter=reg",
                      "kvt_dwconv_tiled<float, 0, 1, 5, 5, 1, 1, 1, 1, 2, 2, 4, 8, 8, 1, 0, 0, 0, 1, 1, 0, 0, 0, 3, 11, 14, 11, 14>",
                      [](const KvtDwConvParams& params) {
                        kvt_dwconv_tiled<float, 0, 1, 5, 5, 1, 1, 1, 1, 2, 2, 4, 8, 8, 1, 0, 0, 0, 1, 1, 0, 0, 0, 3, 11, 14, 11, 14>(params);
                      });
}
