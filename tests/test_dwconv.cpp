// CPU tests of the dwconv family: validation, output sizes, keys, space, configs stored before the
// per-kernel types, the float64 reference (hand-computed values and the adjoint identities), and
// NVRTC compilation of every variant. Each kernel's own space and rules: test_dwconv_variants.cpp.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "compile_batches.h"
#include "dwconv_fixtures.h"
#include "core/nvrtc.h"
#include "sample.h"

using namespace kvtune;
using namespace kvtune::test;
using dwconv::Config;
using dwconv::Problem;

namespace {

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

TEST_CASE("dwconv output sizes follow PyTorch", "[dwconv]") {
  DwConvArgs a = args_2d();
  auto p = dwconv::make_problem(a);
  CHECK(p.out_h() == 9);
  CHECK(p.out_w() == 11);
  a.stride_h = a.stride_w = 2;
  p = dwconv::make_problem(a);
  CHECK(p.out_h() == 5);  // (9 + 2 - 2 - 1) / 2 + 1
  CHECK(p.out_w() == 6);  // (11 + 2 - 2 - 1) / 2 + 1
  a.dilation_w = 2;
  CHECK(dwconv::make_problem(a).out_w() == 5);  // (11 + 2 - 4 - 1) / 2 + 1
  // Causal 1D: left = (K - 1) * dilation, length preserved at stride 1.
  auto c = dwconv::make_problem(args_1d(DwDirection::forward, DwLayout::ncl, 4, 1, 2));
  CHECK(c.pad_left == 6);
  CHECK(c.pad_right == 0);
  CHECK(c.out_w() == 40);
  CHECK(c.key() == "dwconv,forward,ncl,f32,n<=2,c=16,h=1,w=40,k=1x4,s=1x1,d=1x2,pad=0,0,6,0,bias=0,det=1,align=16");
  // The batch is bucketed; N = 3 and N = 4 share a key.
  a = args_2d();
  a.n = 3;
  const auto three = dwconv::make_problem(a);
  a.n = 4;
  CHECK(three == dwconv::make_problem(a));
}

TEST_CASE("dwconv argument validation names the field", "[dwconv]") {
  struct Case {
    const char* field;
    void (*mutate)(DwConvArgs&);
  };
  const Case cases[] = {
      {"direction", [](DwConvArgs& a) { a.direction = static_cast<DwDirection>(7); }},
      {"layout", [](DwConvArgs& a) { a.layout = static_cast<DwLayout>(9); }},
      {"dtype", [](DwConvArgs& a) { a.dtype = static_cast<DType>(5); }},
      {"n", [](DwConvArgs& a) { a.n = 0; }},
      {"c", [](DwConvArgs& a) { a.c = -1; }},
      {"w", [](DwConvArgs& a) { a.w = 0; }},
      {"n", [](DwConvArgs& a) { a.n = std::int64_t(1) << 40; }},
      {"kernel_w", [](DwConvArgs& a) { a.kernel_w = 64; }},
      {"kernel_h", [](DwConvArgs& a) { a.kernel_h = 0; }},
      {"stride_w", [](DwConvArgs& a) { a.stride_w = 0; }},
      {"dilation_h", [](DwConvArgs& a) { a.dilation_h = -2; }},
      {"pad_left", [](DwConvArgs& a) { a.pad_left = -1; }},
      {"kernel_w", [](DwConvArgs& a) { a.kernel_w = 31; }},  // larger than the padded input: empty output
      {"causal", [](DwConvArgs& a) { a.causal = true; }},    // 2D
      {"x", [](DwConvArgs& a) { a.x = nullptr; }},
      {"weight", [](DwConvArgs& a) { a.weight = fake(2); a.dtype = DType::f32; }},
      {"y", [](DwConvArgs& a) { a.y = nullptr; }},
      {"bias", [](DwConvArgs& a) { a.dtype = DType::bf16; a.bias = fake(1); }},
  };
  CHECK_NOTHROW(dwconv::validate(args_2d()));
  for (const auto& c : cases) {
    DwConvArgs a = args_2d();
    c.mutate(a);
    INFO("field " << c.field);
    try {
      dwconv::validate(a);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.context().field == c.field);
      CHECK(e.context().op == "dwconv");
    }
  }
  // Direction-specific tensors.
  DwConvArgs bd = args_2d(DwDirection::backward_data);
  bd.dy = nullptr;
  CHECK_THROWS_WITH(dwconv::validate(bd), Catch::Contains("[field dy]"));
  DwConvArgs bw = args_2d(DwDirection::backward_weight);
  bw.dweight = nullptr;
  CHECK_THROWS_WITH(dwconv::validate(bw), Catch::Contains("[field dweight]"));
  // 1D shapes must be 1D.
  DwConvArgs one = args_1d(DwDirection::forward, DwLayout::nlc, 4, 1, 1);
  one.h = 2;
  CHECK_THROWS_WITH(dwconv::validate(one), Catch::Contains("[field h]"));
  one = args_1d(DwDirection::forward, DwLayout::nlc, 4, 1, 1);
  one.pad_left = 3;
  CHECK_THROWS_WITH(dwconv::validate(one), Catch::Contains("[field causal]"));
}

TEST_CASE("dwconv reference: hand-computed values", "[dwconv]") {
  // 1D, one channel, x = 1 2 3 4, w = [1, 10], causal (left pad 1): y = 1*10, 1+20, 2+30, 3+40.
  DwConvArgs a = args_1d(DwDirection::forward, DwLayout::ncl, 2, 1, 1);
  a.n = 1;
  a.c = 1;
  a.w = 4;
  const Problem p = dwconv::make_problem(a);
  const auto y = dwconv::reference_forward(p, 1, {1, 2, 3, 4}, {1, 10}, {});
  CHECK(y == std::vector<double>{10, 21, 32, 43});
  const auto yb = dwconv::reference_forward(p, 1, {1, 2, 3, 4}, {1, 10}, {0.5});
  CHECK(yb[0] == Approx(10.5));
  // backward_data: dx[i] = sum over outputs that read x[i]: dx = dy[i]*10 + dy[i+1]*1.
  const auto dx = dwconv::reference_backward_data(p, 1, {1, 1, 1, 1}, {1, 10});
  CHECK(dx == std::vector<double>{11, 11, 11, 10});
  std::vector<double> dw, db;
  dwconv::reference_backward_weight(p, 1, {1, 2, 3, 4}, {1, 1, 1, 1}, dw, db);
  CHECK(dw == std::vector<double>{6, 10});  // tap 0 sees x[-1..2] = 0+1+2+3, tap 1 sees x[0..3]
  CHECK(db == std::vector<double>{4});
  // 2D 3x3 all-ones filter, padding 1, on a 3x3 ones image: corner 4, edge 6, centre 9.
  DwConvArgs b = args_2d();
  b.n = 1;
  b.c = 1;
  b.h = b.w = 3;
  const Problem q = dwconv::make_problem(b);
  const auto y2 = dwconv::reference_forward(q, 1, std::vector<double>(9, 1.0), std::vector<double>(9, 1.0), {});
  CHECK(y2 == std::vector<double>{4, 6, 4, 6, 9, 6, 4, 6, 4});
}

TEST_CASE("dwconv reference: backward passes are the adjoints of forward", "[dwconv]") {
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
    for (int s : {1, 2})
      for (int d : {1, 2}) {
        const bool one = l == DwLayout::ncl || l == DwLayout::nlc;
        DwConvArgs a = one ? args_1d(DwDirection::forward, l, 3, s, d) : args_2d(DwDirection::forward, l);
        if (!one) {
          a.stride_h = a.stride_w = s;
          a.dilation_h = a.dilation_w = d;
          a.pad_left = 2;
          a.pad_bottom = 0;
        }
        const Problem p = dwconv::make_problem(a);
        INFO(p.key());
        const auto x = random_vector(std::size_t(a.n * p.c * p.h * p.w), 1);
        const auto w = random_vector(std::size_t(p.c * p.kh * p.kw), 2);
        const auto g = random_vector(std::size_t(a.n * p.c * p.out_h() * p.out_w()), 3);
        // <conv(x, w), g> = <x, conv_data^T(g, w)> = <w, conv_weight^T(x, g)>
        const double lhs = dot(dwconv::reference_forward(p, a.n, x, w, {}), g);
        CHECK(lhs == Approx(dot(x, dwconv::reference_backward_data(p, a.n, g, w))).epsilon(1e-12));
        std::vector<double> dw, db;
        dwconv::reference_backward_weight(p, a.n, x, g, dw, db);
        CHECK(lhs == Approx(dot(w, dw)).epsilon(1e-12));
      }
}

TEST_CASE("dwconv space: seeds are points of it, configs round-trip", "[dwconv]") {
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc}) {
      const bool one = l == DwLayout::ncl || l == DwLayout::nlc;
      DwConvArgs a = one ? args_1d(d, l, 4, 1, 1) : args_2d(d, l);
      const Problem p = dwconv::make_problem(a);
      INFO(p.key());
      const auto seeds = dwconv::seed_configs(p);
      CHECK(seeds.size() == 4);
      const auto all = dwconv::enumerate(p);
      std::set<std::string> labels;
      for (const auto& c : all) {
        labels.insert(c.label());
        CHECK(Config::from_json(nlohmann::json::parse(c.to_json().dump())) == c);
      }
      CHECK(labels.size() == all.size());
      // Found by fuzz_keys: an out-of-int float in a config field is refused, not converted.
      nlohmann::json huge = all.front().to_json();
      huge["rw"] = 1e72;
      CHECK_THROWS_WITH(Config::from_json(huge), Catch::Contains("field 'rw' must be an integer"));
      for (const auto& s : seeds) CHECK(std::find(all.begin(), all.end(), s.second) != all.end());
      CHECK(all.size() > seeds.size());
      const Config h = dwconv::heuristic_config(p, 8);
      CHECK(dwconv::is_valid(p, h));
      CHECK(h.kernel() != dwconv::Kernel::direct);
    }
  // Atomics only when the caller allows them.
  DwConvArgs a = args_2d(DwDirection::backward_weight);
  for (const auto& c : dwconv::enumerate(dwconv::make_problem(a))) CHECK_FALSE(c.wgrad().atomic);
  a.deterministic = false;
  bool any_atomic = false;
  for (const auto& c : dwconv::enumerate(dwconv::make_problem(a))) any_atomic |= c.wgrad().atomic;
  CHECK(any_atomic);
}

// Every valid variant of a sample of problems compiles to sm_90 cubins: one problem per
// direction x layout, with K cycling through {1, 3, 4, 7, 31}, dtype, stride {1, 2} and dilation
// {1, 2} rotating, so every value of every axis appears. (The full product is about 25k variants,
// over an hour of NVRTC on two cores; the [gpu] suite compiles and runs every variant of its own
// shapes on the GPU machine.) The release stage compiles a seeded quarter of each problem's variants;
// [sweep-full] (tests/run_all.sh sweeps) every one.
static void compile_dwconv_variants(const test::Sample& sample) {
  std::vector<detail::CompileRequest> batches;
  std::size_t variants = 0, problems = 0;
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc}) {
      const int i = static_cast<int>(d) * 4 + static_cast<int>(l);
      {
        const int k = std::array<int, 5>{1, 3, 4, 7, 31}[std::size_t(i % 5)];
        const DType t = dtypes[i % 3];
        const int s = 1 + i % 2, dil = 1 + (i / 2) % 2;
        const bool one = l == DwLayout::ncl || l == DwLayout::nlc;
        DwConvArgs a = one ? args_1d(d, l, k, s, dil) : args_2d(d, l);
        a.dtype = t;
        a.n = 4;
        a.c = 64;
        a.bias = d == DwDirection::forward ? fake(6 << 20) : nullptr;
        a.dbias = d == DwDirection::backward_weight ? fake(7 << 20) : nullptr;
        a.deterministic = (i % 2) == 0;
        if (one) {
          a.w = 96;
        } else {
          a.h = a.w = 40;
          a.kernel_h = a.kernel_w = k;
          a.stride_h = a.stride_w = s;
          a.dilation_h = a.dilation_w = dil;
          a.pad_top = a.pad_left = (k - 1) * dil / 2;
          a.pad_bottom = a.pad_right = (k - 1) * dil / 2;
        }
        const Problem p = dwconv::make_problem(a);
        const auto configs = sample.apply(dwconv::enumerate(p), p.key());
        variants += configs.size();
        ++problems;
        std::vector<detail::CompileRequest> requests;
        for (const auto& c : configs) requests.push_back(dwconv::compile_request(p, c, "sm_90"));
        test::add_batched(batches, requests, 64);
      }
    }
  const std::size_t total = test::check_compiled(batches, variants);
  WARN("compiled " << total << " dwconv variants of " << problems << " problems for sm_90");
}

namespace {

// A config as the single struct before the per-kernel types wrote it: every kernel's field, zeros
// in the fields of the other kernels, 0 for "one" rows and runs (and wgrad's "no" runs and vectors).
nlohmann::json legacy_json(const Config& c) {
  nlohmann::json j = {{"kernel", dwconv::to_string(c.kernel())}};
  for (const char* key : {"rw", "tx", "ty", "vc", "halo", "filter", "rh", "rt", "flat", "coalesced", "ct", "py", "tg",
                          "splits", "atomic", "tr", "nt", "warps"})
    j[key] = 0;
  const auto one_as_zero = [](int v) { return v == 1 ? 0 : v; };
  if (const auto* t = std::get_if<dwconv::TiledConfig>(&c.variant())) {
    j["rw"] = t->outputs_per_thread, j["tx"] = t->threads_x, j["ty"] = t->threads_y, j["vc"] = t->vector_channels;
    j["halo"] = int(t->smem_halo), j["filter"] = int(t->smem_filter), j["flat"] = int(t->flat);
    j["rh"] = one_as_zero(t->rows_per_thread), j["rt"] = one_as_zero(t->runs_per_thread);
  } else if (const auto* d = std::get_if<dwconv::DirectConfig>(&c.variant())) {
    j["coalesced"] = int(d->coalesced);
  } else if (const auto* w = std::get_if<dwconv::WgradConfig>(&c.variant())) {
    j["ct"] = w->channels_per_block, j["py"] = w->position_threads, j["tg"] = w->taps_per_block;
    j["splits"] = w->splits, j["atomic"] = int(w->atomic), j["halo"] = int(w->staged);
    j["rw"] = one_as_zero(w->outputs_per_thread), j["vc"] = one_as_zero(w->vector_channels);
    j["rh"] = one_as_zero(w->rows_per_thread);
  } else {
    const auto& m = c.mma();
    j["ct"] = m.channels_per_block, j["tr"] = m.tile_rows, j["nt"] = m.segment_tiles, j["warps"] = m.warps;
  }
  return j;
}

}  // namespace

TEST_CASE("dwconv configs stored by the single struct before the per-kernel types load as the same variants", "[dwconv]") {
  // Every variant of a problem per direction and layout family (each kernel and flag), written as
  // caches before the types split wrote it: the same config, label and NVRTC name.
  std::size_t checked = 0;
  std::set<dwconv::Kernel> kernels;
  std::vector<DwConvArgs> problems = {convnext_7x7(DwLayout::nhwc, DType::bf16)};  // tensor-core tiles too
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
      for (DType t : {DType::f32, DType::bf16}) {
        problems.push_back(l == DwLayout::ncl || l == DwLayout::nlc ? args_1d(d, l, 4, 1, 1) : args_2d(d, l));
        problems.back().dtype = t;
      }
  for (const DwConvArgs& a : problems) {
    const Problem p = dwconv::make_problem(a);
    for (const Config& c : dwconv::enumerate(p)) {
      const Config loaded = Config::from_json(legacy_json(c));
      INFO(p.key() << " " << c.label() << " " << legacy_json(c).dump());
      CHECK(loaded == c);
      CHECK(loaded.label() == c.label());
      CHECK(dwconv::compile_request(p, loaded, "sm_90").name_expressions == dwconv::compile_request(p, c, "sm_90").name_expressions);
      kernels.insert(c.kernel());
      ++checked;
    }
  }
  CHECK(kernels.size() == 4);
  CHECK(checked > 1000);
  // What the single struct could hold but no kernel reads is refused, with the field named.
  nlohmann::json stray = legacy_json(dwconv::tiled_config(4, 32, 2, 1, 0, 0, 2));
  stray["tg"] = 9;
  CHECK_THROWS_WITH(Config::from_json(stray), Catch::Contains("field 'tg'"));
}

TEST_CASE("a sample of the valid dwconv variants compiles for sm_90", "[dwconv][nvrtc][slow]") {
  compile_dwconv_variants(test::Sample{4});
}

TEST_CASE("every valid dwconv variant compiles for sm_90", "[.][sweep-full][dwconv][nvrtc]") {
  compile_dwconv_variants(test::kEveryVariant);
}

TEST_CASE("dwconv problem hash: equal problems hash equal, any field changes it", "[dwconv]") {
  const Problem p = dwconv::make_problem(args_2d());
  dwconv::ProblemHash hash;
  CHECK(hash(p) == hash(dwconv::make_problem(args_2d())));
  Problem q = p;
  q.pad_right = 2;
  CHECK(hash(q) != hash(p));
  q = p;
  q.layout = DwLayout::nhwc;
  CHECK(hash(q) != hash(p));
  q = p;
  q.deterministic = false;
  CHECK(hash(q) != hash(p));
}

