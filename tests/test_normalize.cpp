// CPU tests of the normalize family: space and constraints, keys, validation, the float64
// reference against hand-computed values, and NVRTC compilation of every valid variant.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cmath>
#include <cstdint>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_reference.h"
#include "compile_batches.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "sample.h"

using namespace kvtune;
using normalize::Config;
using normalize::Keep;
using normalize::Problem;
using normalize::Stat;

namespace {

Problem make(DType dtype, NormMode mode, std::int64_t cols, int align = 16) {
  Problem p;
  p.dtype = dtype;
  p.mode = mode;
  p.cols = cols;
  p.rows = 4096;
  p.align_bytes = align;
  return p;
}

// A device-looking address that is aligned to 256 bytes (never dereferenced on the CPU).
void* fake_ptr(std::uintptr_t offset = 0) { return reinterpret_cast<void*>(std::uintptr_t(1) << 20 | offset); }

NormalizeArgs valid_args() {
  NormalizeArgs a;
  a.x = fake_ptr(0);
  a.y = fake_ptr(0);  // in place
  a.rows = 64;
  a.cols = 128;
  return a;
}

}  // namespace

TEST_CASE("seed design is a point of the space", "[normalize]") {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    const Problem p = make(d, NormMode::standardize, 1024);
    const Config seed = normalize::seed_config(p);
    CHECK(seed.label() == "tpr=256,rpb=1,vw=16B,keep=reread,stat=welford");
    const auto all = normalize::enumerate(p);
    REQUIRE(!all.empty());
    CHECK(all.front() == seed);
  }
}

TEST_CASE("enumerated variants are valid, unique and cover every axis", "[normalize]") {
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (NormMode m : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm})
      for (std::int64_t cols : {1, 3, 37, 128, 1000, 4097, 16384, 65536}) {
        const Problem p = make(d, m, cols);
        const auto all = normalize::enumerate(p);
        INFO(p.key());
        REQUIRE(!all.empty());
        std::set<std::string> labels;
        for (const auto& c : all) {
          CHECK((normalize::is_valid(p, c) || (c == normalize::seed_config(p) && normalize::is_runnable(p, c))));
          labels.insert(c.label());
          const auto g = normalize::geometry(p, c, 4096);
          CHECK(g.block == unsigned(c.threads_per_row * c.rows_per_block));
          if (c.splits == 1) CHECK(g.grid == unsigned((4096 + c.rows_per_block - 1) / c.rows_per_block));
          else CHECK(g.grid == unsigned(g.row_chunk * c.splits));  // split rows: a block per slice of a chunk
        }
        CHECK(labels.size() == all.size());
        CHECK(normalize::is_valid(p, normalize::heuristic_config(p, 9)));
      }
  // The space has every kind of each axis somewhere.
  const auto all = normalize::enumerate(make(DType::f32, NormMode::layernorm, 1000));
  std::set<int> tpr, vw;
  std::set<Keep> keep;
  std::set<Stat> stat;
  std::set<int> rpb;
  for (const auto& c : all) {
    tpr.insert(c.threads_per_row);
    vw.insert(c.vector_bytes);
    keep.insert(c.keep);
    stat.insert(c.stat);
    rpb.insert(c.rows_per_block);
  }
  CHECK(tpr.count(8) == 1);     // sub-warp
  CHECK(tpr.count(32) == 1);    // one warp
  CHECK(tpr.count(128) == 1);   // several warps
  CHECK(tpr.count(512) == 1);   // a whole block
  CHECK(vw == std::set<int>{4, 8, 16});
  CHECK(keep.size() == 3);
  CHECK(stat.size() == 2);
  CHECK(rpb.size() >= 4);
}

TEST_CASE("rows covered exactly by the register slices compile without masks", "[normalize]") {
  // bf16 x 1024: 64 threads x 8 elements x 2 vectors cover the row exactly (FULL).
  Config r;
  r.threads_per_row = 64;
  r.rows_per_block = 2;
  r.vector_bytes = 16;
  r.items = 2;
  r.keep = Keep::registers;
  const Problem exact = make(DType::bf16, NormMode::layernorm, 1024);
  REQUIRE(normalize::is_valid(exact, r));
  CHECK(normalize::compile_request(exact, r, "sm_90").name_expressions.at(0) ==
        "kvt_normalize<kvt_bf16, 64, 2, 8, 2, 0, 0, 1, 0, 0, true>");
  // 1000 columns leave the last slice partial: masked.
  const Problem odd = make(DType::bf16, NormMode::layernorm, 1000);
  REQUIRE(normalize::is_valid(odd, r));
  CHECK(normalize::compile_request(odd, r, "sm_90").name_expressions.at(0) ==
        "kvt_normalize<kvt_bf16, 64, 2, 8, 2, 0, 0, 1, 0, 0, false>");
  // Only register keep can be FULL.
  r.keep = Keep::shared;
  r.items = 0;
  CHECK(normalize::compile_request(exact, r, "sm_90").name_expressions.at(0) ==
        "kvt_normalize<kvt_bf16, 64, 2, 8, 0, 1, 0, 1, 0, 0, false>");
}

TEST_CASE("constraints reject what cannot run", "[normalize]") {
  const Problem p = make(DType::f32, NormMode::layernorm, 1024);
  Config c;
  c.threads_per_row = 32;
  c.rows_per_block = 4;
  c.vector_bytes = 16;
  c.items = 8;
  c.keep = Keep::registers;
  std::string why;
  REQUIRE(normalize::is_valid(p, c, &why));

  auto rejects = [&](Config bad, const Problem& problem, const std::string& fragment) {
    std::string reason;
    CHECK_FALSE(normalize::is_valid(problem, bad, &reason));
    CHECK_THAT(reason, Catch::Contains(fragment));
  };
  Config bad = c;
  bad.threads_per_row = 48;
  rejects(bad, p, "power of two");
  bad = c;
  bad.rows_per_block = 64;  // 2048 threads
  rejects(bad, p, "block size");
  bad = c;
  bad.items = 4;  // does not cover the row
  rejects(bad, p, "items");
  bad = c;
  bad.vector_bytes = 2;  // below the f32 element
  rejects(bad, p, "vector width");
  rejects(c, make(DType::f32, NormMode::layernorm, 1024, 4), "alignment");
  bad = c;
  bad.threads_per_row = 1;
  bad.rows_per_block = 128;
  bad.items = 256;
  rejects(bad, p, "too many vectors");
  bad = c;
  bad.threads_per_row = 1024;
  bad.rows_per_block = 1;
  bad.items = 1;
  rejects(bad, make(DType::f32, NormMode::layernorm, 100), "idle");
  bad = c;
  bad.stat = Stat::welford;
  rejects(bad, make(DType::f32, NormMode::rmsnorm, 1024), "rmsnorm");
  bad = c;
  bad.keep = Keep::shared;
  bad.items = 0;
  bad.threads_per_row = 512;
  bad.rows_per_block = 2;
  rejects(bad, make(DType::f32, NormMode::layernorm, 65536), "shared memory");
  bad = c;
  bad.threads_per_row = 8;
  bad.items = 32;
  rejects(bad, p, "registers");
}

TEST_CASE("config labels and JSON round trip", "[normalize]") {
  for (const auto& c : normalize::enumerate(make(DType::bf16, NormMode::layernorm, 4097))) {
    const Config back = Config::from_json(nlohmann::json::parse(c.to_json().dump()));
    CHECK(back == c);
    CHECK(back.label() == c.label());
  }
  CHECK_THROWS_AS(Config::from_json(nlohmann::json{{"tpr", 32}}), Error);
  CHECK_THROWS_WITH(Config::from_json(nlohmann::json::parse(
                        R"({"tpr":32,"rpb":4,"vw":16,"items":1,"keep":"disk","stat":"twopass"})")),
                    Catch::Contains("unknown keep"));
  // Found by fuzz_keys: floats outside int were converted (undefined behaviour), fractions truncated.
  for (const char* tpr : {"1e72", "4e9", "-3e9", "32.5", "4294967296", "\"32\"", "true"}) {
    INFO(tpr);
    CHECK_THROWS_WITH(Config::from_json(nlohmann::json::parse(fmt::format(
                          R"({{"tpr":{},"rpb":4,"vw":16,"items":1,"keep":"reg","stat":"twopass"}})", tpr))),
                      Catch::Contains("field 'tpr' must be an integer within int range"));
  }
  CHECK(Config::from_json(nlohmann::json::parse(
                              R"({"tpr":-7,"rpb":4,"vw":16,"items":1,"keep":"reg","stat":"twopass"})"))
            .threads_per_row == -7);  // an integer: read as it is, refused later by the constraints
}

TEST_CASE("problem keys carry everything that changes the winner", "[normalize]") {
  NormalizeArgs a = valid_args();
  a.rows = 3000;
  a.dtype = DType::bf16;
  a.mode = NormMode::layernorm;
  const Problem p = normalize::make_problem(a);
  CHECK(p.rows == 4096);  // bucketed
  CHECK(p.align_bytes == 16);
  CHECK(p.key() == "normalize,bf16,layernorm,cols=128,rows<=4096,align=16,affine=,stats=");

  a.rows = 4096;
  CHECK(normalize::make_problem(a) == p);  // same bucket, same key
  a.rows = 4097;
  CHECK_FALSE(normalize::make_problem(a) == p);

  // Misaligned by one element: only scalar (2-byte) accesses remain.
  a = valid_args();
  a.dtype = DType::f16;
  a.x = fake_ptr(2);
  a.y = fake_ptr(1 << 16);
  CHECK(normalize::make_problem(a).align_bytes == 2);
  // A leading dimension that breaks row alignment.
  a = valid_args();
  a.ld_x = 130;
  a.y = fake_ptr(1 << 16);
  CHECK(normalize::make_problem(a).align_bytes == 8);
  // Optional tensors are part of the key.
  a = valid_args();
  a.gamma = fake_ptr(1 << 18);
  a.rstd = static_cast<float*>(fake_ptr(1 << 19));
  CHECK(normalize::make_problem(a).key() == "normalize,f32,standardize,cols=128,rows<=64,align=16,affine=g,stats=r");
  CHECK(normalize::rows_bucket(1) == 1);
  CHECK(normalize::rows_bucket(7) == 8);
  CHECK(normalize::rows_bucket(1024) == 1024);
  normalize::ProblemHash hash;
  CHECK(hash(p) == hash(p));
}

TEST_CASE("argument validation names the field", "[normalize]") {
  struct Case {
    const char* field;
    void (*mutate)(NormalizeArgs&);
  };
  const Case cases[] = {
      {"x", [](NormalizeArgs& a) { a.x = nullptr; }},
      {"y", [](NormalizeArgs& a) { a.y = nullptr; }},
      {"rows", [](NormalizeArgs& a) { a.rows = 0; }},
      {"rows", [](NormalizeArgs& a) { a.rows = -5; }},
      {"cols", [](NormalizeArgs& a) { a.cols = 0; }},
      {"cols", [](NormalizeArgs& a) { a.cols = std::int64_t(1) << 40; }},
      {"ld_x", [](NormalizeArgs& a) { a.ld_x = 100; }},
      {"ld_y", [](NormalizeArgs& a) { a.y = fake_ptr(1 << 19); a.ld_y = 127; }},
      {"rows", [](NormalizeArgs& a) { a.rows = std::int64_t(1) << 50; }},
      {"dtype", [](NormalizeArgs& a) { a.dtype = static_cast<DType>(9); }},
      {"mode", [](NormalizeArgs& a) { a.mode = static_cast<NormMode>(7); }},
      {"eps", [](NormalizeArgs& a) { a.eps = -1.f; }},
      {"eps", [](NormalizeArgs& a) { a.eps = std::nanf(""); }},
      {"ddof", [](NormalizeArgs& a) { a.ddof = 2; }},
      {"ddof", [](NormalizeArgs& a) { a.ddof = 1; a.mode = NormMode::layernorm; }},
      {"beta", [](NormalizeArgs& a) { a.mode = NormMode::rmsnorm; a.beta = fake_ptr(1 << 18); }},
      {"mean", [](NormalizeArgs& a) { a.mode = NormMode::rmsnorm; a.mean = static_cast<float*>(fake_ptr(1 << 18)); }},
      {"gamma", [](NormalizeArgs& a) { a.gamma = fake_ptr((1 << 18) + 1); }},
      {"x", [](NormalizeArgs& a) { a.dtype = DType::f16; a.x = fake_ptr(1); }},
      {"rstd", [](NormalizeArgs& a) { a.rstd = static_cast<float*>(fake_ptr((1 << 18) + 2)); }},
      {"y", [](NormalizeArgs& a) { a.y = fake_ptr(64); }},  // partial overlap
      {"ld_y", [](NormalizeArgs& a) { a.ld_y = 256; }},     // in place with another ld
  };
  CHECK_NOTHROW(normalize::validate(valid_args()));
  for (const auto& c : cases) {
    NormalizeArgs a = valid_args();
    c.mutate(a);
    INFO("field " << c.field);
    try {
      normalize::validate(a);
      FAIL("no error for an invalid " << c.field);
    } catch (const Error& e) {
      CHECK(e.context().field == c.field);
      CHECK(e.context().op == "normalize");
      CHECK_THAT(e.what(), Catch::Contains("[field " + std::string(c.field) + "]"));
    }
  }
}

TEST_CASE("float64 reference matches hand-computed values", "[normalize]") {
  // Row 0: 1 2 3 4 -> mean 2.5, population var 1.25, sample var 5/3.
  // Row 1: 1e4 + {0, 0.01, 0.02, 0.03}: |mean| >> std, still exact.
  const std::vector<double> x = {1, 2, 3, 4, 99, 1e4, 1e4 + 0.01, 1e4 + 0.02, 1e4 + 0.03, 99};
  const auto s = normalize::reference(x, 2, 4, 5, NormMode::standardize, 0.0, 0, {}, {});
  const double sd = std::sqrt(1.25);
  CHECK(s.mean[0] == Approx(2.5));
  CHECK(s.y[0] == Approx(-1.5 / sd));
  CHECK(s.y[3] == Approx(1.5 / sd));
  CHECK(s.rstd[0] == Approx(1 / sd));
  CHECK(s.mean[1] == Approx(1e4 + 0.015));
  CHECK(s.y[4] == Approx(-0.015 / std::sqrt(1.25e-4)).epsilon(1e-9));

  const auto s1 = normalize::reference(x, 1, 4, 5, NormMode::standardize, 0.1, 1, {}, {});
  CHECK(s1.y[1] == Approx(-0.5 / (std::sqrt(5.0 / 3.0) + 0.1)));

  const auto ln = normalize::reference(x, 1, 4, 5, NormMode::layernorm, 0.75, 0, {2, 2, 2, 2}, {1, 1, 1, 1});
  CHECK(ln.y[0] == Approx(-1.5 / std::sqrt(2.0) * 2 + 1));  // rsqrt(1.25 + 0.75) = 1/sqrt(2)
  CHECK(ln.rstd[0] == Approx(1 / std::sqrt(2.0)));

  const auto rms = normalize::reference(x, 1, 4, 5, NormMode::rmsnorm, 0.0, 0, {1, 1, 1, 0.5}, {});
  const double rms_value = std::sqrt(30.0 / 4);  // (1 + 4 + 9 + 16) / 4
  CHECK(rms.y[2] == Approx(3 / rms_value));
  CHECK(rms.y[3] == Approx(4 / rms_value * 0.5));

  // One element with ddof 1 is 0/0, as in torch.std.
  const auto one = normalize::reference({5.0}, 1, 1, 1, NormMode::standardize, 1e-5, 1, {}, {});
  CHECK(std::isnan(one.y[0]));
}

TEST_CASE("architectures are checked", "[normalize][nvrtc]") {
  CHECK(detail::parse_arch("sm_90") == 90);
  CHECK(detail::parse_arch("sm_80") == 80);
  CHECK(detail::parse_arch("sm_100") == 100);
  CHECK_THROWS_WITH(detail::parse_arch("sm_75"), Catch::Contains("sm_80 or newer"));
  CHECK_THROWS_WITH(detail::parse_arch("sm_999"), Catch::Contains("unknown architecture"));
  CHECK_THROWS_WITH(detail::parse_arch("gfx90a"), Catch::Contains("unknown architecture"));
  CHECK(detail::nvrtc_version() >= 12000);
}

TEST_CASE("compile errors carry the NVRTC log", "[normalize][nvrtc]") {
  detail::CompileRequest r = normalize::compile_request(make(DType::f32, NormMode::layernorm, 128),
                                                        normalize::seed_config(make(DType::f32, NormMode::layernorm, 128)),
                                                        "sm_90");
  r.name_expressions = {"kvt_normalize<float, 32, 4, 4, 0, 0, 0, 1, 0, 0>"};  // register keep with ITEMS 0 fails a static_assert
  try {
    detail::nvrtc_compile(r);
    FAIL("expected a compile error");
  } catch (const CompileError& e) {
    CHECK_THAT(e.log(), Catch::Contains("register keep needs ITEMS"));
    CHECK_THAT(e.what(), Catch::Contains("NVRTC log"));
    CHECK(e.name_expressions() == r.name_expressions);
    CHECK(std::find(e.options().begin(), e.options().end(), "--gpu-architecture=sm_90") != e.options().end());
  }
}

TEST_CASE("a phased split variant compiles one kernel per phase, found from phase 0's name", "[normalize][nvrtc][wide]") {
  // What LoadedKernel::load relies on: the binary stores phase 0's lowered name, and every other
  // kernel of the image is the same template at another phase.
  for (const NormMode mode : {NormMode::layernorm, NormMode::rmsnorm}) {
    Problem p = make(DType::bf16, mode, std::int64_t(1) << 20);
    p.rows = 4;
    p.residual = p.residual_out = mode == NormMode::rmsnorm;
    const Config c = normalize::heuristic_config(p, 9);
    REQUIRE(c.splits > 1);
    REQUIRE_FALSE(c.cooperative);
    const auto r = normalize::compile_request(p, c, "sm_90");
    REQUIRE(r.name_expressions.size() == 3);
    const auto out = detail::nvrtc_compile(r);
    REQUIRE(out.lowered_names.size() == 3);
    for (int phase = 0; phase < 3; ++phase) {
      INFO(out.lowered_names[std::size_t(phase)]);
      CHECK(detail::phase_kernel_name(out.lowered_names[0], phase) == out.lowered_names[std::size_t(phase)]);
    }
    Config coop = c;
    coop.cooperative = true;
    CHECK(normalize::compile_request(p, coop, "sm_90").name_expressions.size() == 1);
  }
  // Names that are not phase 0 of a template whose first argument is an int: none.
  CHECK(detail::phase_kernel_name("_Z19kvt_normalize_splitILi1E8kvt_bf16EvPv", 2).empty());
  CHECK(detail::phase_kernel_name("_Z13kvt_normalizeIfLi32EEvPv", 1).empty());
  CHECK(detail::phase_kernel_name("kvt_normalize", 1).empty());
  CHECK(detail::phase_kernel_name("_Z99x", 1).empty());
  CHECK(detail::phase_kernel_name("_Z3abcILi0EEvv", 12) == "_Z3abcILi12EEvv");
  // Phases of a kernel that is not phased, or too many: refused before any CUDA call.
  CHECK_THROWS_WITH(detail::LoadedKernel::load("", "_Z13kvt_normalizeIfLi32EEvPv", 3), Catch::Contains("phases of"));
  CHECK_THROWS_WITH(detail::LoadedKernel::load("", "_Z3abcILi0EEvv", 9), Catch::Contains("1 to 8 phases"));
  CHECK_THROWS_WITH(detail::LoadedKernel::load("", "_Z3abcILi0EEvv", 0), Catch::Contains("1 to 8 phases"));
  // Every variant's request names as many kernels as it has phases.
  Problem wide = make(DType::f32, NormMode::layernorm, std::int64_t(1) << 20);
  wide.rows = 64;
  for (const Config& c : normalize::enumerate(wide))
    CHECK(normalize::compile_request(wide, c, "sm_90").name_expressions.size() ==
          std::size_t(normalize::kernel_phases(wide, c)));
}

TEST_CASE("a compiled variant has a lowered name and a stable hash", "[normalize][nvrtc]") {
  const Problem p = make(DType::bf16, NormMode::rmsnorm, 4097, 2);
  const auto r = normalize::compile_request(p, normalize::heuristic_config(p, 9), "sm_90");
  const auto out = detail::nvrtc_compile(r);
  CHECK(out.cubin.size() > 1000);
  CHECK(out.lowered_names.at(0).rfind("_Z13kvt_normalize", 0) == 0);
  CHECK(detail::compile_hash(r) == detail::compile_hash(r));
  auto other = r;
  other.arch = "sm_80";
  CHECK(detail::compile_hash(other) != detail::compile_hash(r));
  CHECK(normalize::template_hash().size() == 16);
}

// Every valid variant of representative problems compiles for sm_80 and sm_90. Variants are
// compiled many to a program (NVRTC's front end runs once per program), in parallel. The release
// stage compiles a seeded quarter of each problem's variants; [sweep-full] (tests/run_all.sh sweeps)
// every one.
static void compile_normalize_variants(const test::Sample& sample) {
  const std::vector<Problem> problems = {
      make(DType::f32, NormMode::layernorm, 1000),      make(DType::f16, NormMode::standardize, 37, 2),
      make(DType::bf16, NormMode::rmsnorm, 4097, 2),    make(DType::f32, NormMode::standardize, 65536),
      make(DType::bf16, NormMode::layernorm, 16384),    make(DType::f16, NormMode::rmsnorm, 3, 2),
  };
  Problem affine = make(DType::f32, NormMode::layernorm, 128);
  affine.gamma = affine.beta = affine.mean_out = affine.rstd_out = true;
  std::vector<Problem> all_problems = problems;
  all_problems.push_back(affine);
  // The fused residual add: one-block and split-row forwards with s, a backward with ds.
  Problem residual = make(DType::bf16, NormMode::layernorm, 4096);
  residual.residual = residual.residual_out = residual.gamma = residual.beta = true;
  all_problems.push_back(residual);
  Problem residual_wide = make(DType::f32, NormMode::rmsnorm, 1 << 20);
  residual_wide.residual = true;
  residual_wide.rows = 4;
  all_problems.push_back(residual_wide);
  Problem dresidual = make(DType::f16, NormMode::standardize, 37, 2);
  dresidual.backward = dresidual.dresidual = true;
  all_problems.push_back(dresidual);

  std::vector<detail::CompileRequest> batches;
  std::size_t kernels = 0;
  for (const char* arch : {"sm_80", "sm_90"}) {
    for (const auto& p : all_problems) {
      const auto configs = sample.apply(normalize::enumerate(p), p.key() + arch);
      std::vector<detail::CompileRequest> requests;
      for (const auto& c : configs) {
        requests.push_back(normalize::compile_request(p, c, arch));
        kernels += requests.back().name_expressions.size();  // the phased forward: one per phase
      }
      test::add_batched(batches, requests, 48);
    }
  }
  const std::size_t total = test::check_compiled(batches, kernels);
  WARN("compiled " << total << " normalize kernels for sm_80 and sm_90");
}

TEST_CASE("a sample of the valid normalize variants compiles for sm_80 and sm_90", "[normalize][nvrtc][slow]") {
  compile_normalize_variants(test::Sample{4});
}

TEST_CASE("every valid normalize variant compiles for sm_80 and sm_90", "[.][sweep-full][normalize][nvrtc]") {
  compile_normalize_variants(test::kEveryVariant);
}

TEST_CASE("fused residual: keys, round trips, validation and the aliasing rules", "[normalize][residual]") {
  // Keys: ",res=r" / ",res=rs" on the forward, ",dres=1" on the backward; absent otherwise.
  NormalizeArgs a = valid_args();
  a.residual = fake_ptr(1 << 16);
  CHECK(normalize::make_problem(a).key() == "normalize,f32,standardize,cols=128,rows<=64,align=16,affine=,stats=,res=r");
  a.residual_out = fake_ptr(1 << 17);
  const Problem p = normalize::make_problem(a);
  CHECK(p.key() == "normalize,f32,standardize,cols=128,rows<=64,align=16,affine=,stats=,res=rs");
  CHECK(normalize::problem_from_key(p.key()) == p);
  CHECK_FALSE(p == normalize::make_problem(valid_args()));
  normalize::ProblemHash hash;
  CHECK(hash(p) != hash(normalize::make_problem(valid_args())));
  // The residual's alignment and leading dimension bound the vectors like x's.
  a.residual = fake_ptr((1 << 16) + 4);
  CHECK(normalize::make_problem(a).align_bytes == 4);
  a.residual = fake_ptr(1 << 16);
  a.ld_residual = 130;
  CHECK(normalize::make_problem(a).align_bytes == 8);

  NormalizeBackwardArgs b;
  b.x = fake_ptr(0);
  b.dy = fake_ptr(1 << 16);
  b.dx = fake_ptr(1 << 17);
  b.rows = 64;
  b.cols = 128;
  b.dresidual_out = fake_ptr(1 << 18);
  const Problem q = normalize::make_problem(b);
  CHECK(q.key() == "normalize,f32,standardize,backward,cols=128,rows<=64,align=16,gamma=,grads=,stats=recompute,dres=1");
  CHECK(normalize::problem_from_key(q.key()) == q);
  for (const char* bad : {"normalize,f32,standardize,cols=128,rows<=64,align=16,affine=,stats=,res=s",
                          "normalize,f32,standardize,cols=128,rows<=64,align=16,affine=,stats=,dres=1",
                          "normalize,f32,standardize,backward,cols=128,rows<=64,align=16,gamma=,grads=,stats=saved,res=r"})
    CHECK_FALSE(normalize::problem_from_key(bad));
  // Every residual problem has variants and a heuristic in its space, one-block and split rows.
  for (std::int64_t cols : {std::int64_t(1), std::int64_t(37), std::int64_t(4097), std::int64_t(1) << 20}) {
    Problem r = p;
    r.cols = cols;
    r.rows = 8;
    CHECK(normalize::is_valid(r, normalize::heuristic_config(r, 9)));
    Problem s = q;
    s.cols = cols;
    s.rows = 8;
    CHECK(normalize::is_valid(s, normalize::heuristic_config(s, 9)));
  }

  // Validation: each case names its field.
  struct Case {
    const char* field;
    void (*mutate)(NormalizeArgs&);
  };
  const auto with_residual = [] {
    NormalizeArgs v = valid_args();
    v.y = fake_ptr(1 << 15);
    v.residual = fake_ptr(1 << 16);
    v.residual_out = fake_ptr(1 << 17);
    return v;
  };
  const Case cases[] = {
      {"residual_out", [](NormalizeArgs& v) { v.residual = nullptr; }},
      {"residual", [](NormalizeArgs& v) { v.residual = fake_ptr((1 << 16) + 2); }},
      {"residual_out", [](NormalizeArgs& v) { v.residual_out = fake_ptr((1 << 17) + 1); }},
      {"ld_residual", [](NormalizeArgs& v) { v.ld_residual = 100; }},
      {"ld_residual_out", [](NormalizeArgs& v) { v.ld_residual_out = 127; }},
      {"residual_out", [](NormalizeArgs& v) { v.residual_out = fake_ptr((1 << 16) + 64); }},  // part of residual
      {"ld_residual_out", [](NormalizeArgs& v) { v.residual_out = fake_ptr(1 << 16); v.ld_residual_out = 256; }},
      {"y", [](NormalizeArgs& v) { v.y = fake_ptr((1 << 16) + 128); }},                        // part of residual
      {"residual_out", [](NormalizeArgs& v) { v.residual_out = fake_ptr((1 << 15) + 256); }},  // overlaps y
      {"residual_out", [](NormalizeArgs& v) { v.y = fake_ptr(0); v.residual_out = fake_ptr(0); }},            // y == s
      {"mean", [](NormalizeArgs& v) { v.mean = static_cast<float*>(fake_ptr(1 << 17)); }},    // stats over s
      {"gamma", [](NormalizeArgs& v) { v.gamma = fake_ptr(1 << 17); }},                       // input over an output
  };
  CHECK_NOTHROW(normalize::validate(with_residual()));
  for (const auto& alias : {0, 1, 2, 3}) {  // allowed: s == x, s == residual, y == residual, y == x
    NormalizeArgs v = with_residual();
    if (alias == 0) v.residual_out = fake_ptr(0);
    if (alias == 1) v.residual_out = fake_ptr(1 << 16);
    if (alias == 2) v.y = fake_ptr(1 << 16);
    if (alias == 3) v.y = fake_ptr(0);
    INFO("allowed alias " << alias);
    CHECK_NOTHROW(normalize::validate(v));
  }
  for (const auto& c : cases) {
    NormalizeArgs v = with_residual();
    c.mutate(v);
    INFO("field " << c.field);
    try {
      normalize::validate(v);
      FAIL("no error for an invalid " << c.field);
    } catch (const Error& e) {
      CHECK(e.context().field == c.field);
    }
  }
  // The backward: dx may be dresidual_out itself, never a part of it.
  CHECK_NOTHROW(normalize::validate(b));
  b.dx = fake_ptr(1 << 18);
  CHECK_NOTHROW(normalize::validate(b));
  b.ld_dx = 256;
  CHECK_THROWS_WITH(normalize::validate(b), Catch::Contains("[field ld_dx]"));
  b.ld_dx = 0;
  b.dx = fake_ptr((1 << 18) + 64);
  CHECK_THROWS_WITH(normalize::validate(b), Catch::Contains("[field dx]"));
  b.dx = fake_ptr(1 << 17);
  b.dresidual_out = fake_ptr((1 << 18) + 2);
  CHECK_THROWS_WITH(normalize::validate(b), Catch::Contains("[field dresidual_out]"));
  b.dresidual_out = fake_ptr(1 << 18);
  b.ld_dresidual_out = 5;
  CHECK_THROWS_WITH(normalize::validate(b), Catch::Contains("[field ld_dresidual_out]"));
  b.ld_dresidual_out = 0;
  b.gamma = fake_ptr(1 << 19);
  b.dgamma = fake_ptr((1 << 18) + 256);  // inside dresidual_out, which other blocks still read
  CHECK_THROWS_WITH(normalize::validate(b), Catch::Contains("[field dgamma]"));
}
