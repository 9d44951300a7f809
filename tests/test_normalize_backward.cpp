// CPU tests of the normalize backward: the float64 closed form against finite differences of the
// forward reference, keys, the space and its constraints, argument validation, the workspace
// layout, and NVRTC compilation of a sample of the variants.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "compile_batches.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_reference.h"
#include "kernel_templates/normalize/normalize_tuning.h"
#include "tuner/tuner.h"
#include "sample.h"

using namespace kvtune;
using normalize::Config;
using normalize::Keep;
using normalize::Problem;
using normalize::Stat;

namespace {

void* fake_ptr(std::uintptr_t offset = 0) { return reinterpret_cast<void*>(std::uintptr_t(1) << 20 | offset); }

NormalizeBackwardArgs valid_args() {
  NormalizeBackwardArgs a;
  a.x = fake_ptr(0);
  a.dy = fake_ptr(1 << 16);
  a.dx = fake_ptr(2 << 16);
  a.rows = 64;
  a.cols = 128;
  a.mode = NormMode::layernorm;
  return a;
}

Problem backward_problem(DType dtype, NormMode mode, std::int64_t cols, std::int64_t rows, bool grads, bool saved) {
  Problem p;
  p.backward = true;
  p.dtype = dtype;
  p.mode = mode;
  p.cols = cols;
  p.rows = rows;
  p.align_bytes = 16;
  p.gamma = grads;
  p.dgamma = grads;
  p.dbeta = grads && mode != NormMode::rmsnorm;
  p.saved_stats = saved;
  return p;
}

// The scalar loss sum(dy * y) as a function of x (and gamma, beta), in float64.
double loss(const std::vector<double>& x, const std::vector<double>& dy, std::int64_t rows, std::int64_t cols,
            NormMode mode, double eps, int ddof, const std::vector<double>& gamma, const std::vector<double>& beta) {
  const auto y = normalize::reference(x, rows, cols, cols, mode, eps, ddof, gamma, beta).y;
  double l = 0;
  for (std::size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
  return l;
}

}  // namespace

TEST_CASE("backward reference: the closed form matches finite differences", "[normalize][backward]") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  struct Case {
    NormMode mode;
    int ddof;
    double eps;
  };
  for (const Case c : {Case{NormMode::layernorm, 0, 1e-5}, Case{NormMode::rmsnorm, 0, 1e-5},
                       Case{NormMode::standardize, 0, 1e-3}, Case{NormMode::standardize, 1, 0.0}}) {
    for (const std::int64_t cols : {2, 5, 17}) {
      const std::int64_t rows = 3;
      std::vector<double> x(static_cast<std::size_t>(rows * cols)), dy(x.size());
      std::vector<double> gamma(static_cast<std::size_t>(cols)), beta(static_cast<std::size_t>(cols));
      for (auto& v : x) v = 0.3 + 2 * u(rng);
      for (auto& v : dy) v = u(rng);
      for (auto& v : gamma) v = 1 + 0.5 * u(rng);
      for (auto& v : beta) v = 0.5 * u(rng);
      const bool has_beta = c.mode != NormMode::rmsnorm;
      const auto r = normalize::reference_backward(x, dy, rows, cols, cols, c.mode, c.eps, c.ddof, gamma);
      const auto f = [&](const std::vector<double>& xv, const std::vector<double>& g, const std::vector<double>& b) {
        return loss(xv, dy, rows, cols, c.mode, c.eps, c.ddof, g, has_beta ? b : std::vector<double>{});
      };
      const double h = 1e-6;
      INFO("mode " << to_string(c.mode) << " ddof " << c.ddof << " cols " << cols);
      for (std::size_t i = 0; i < x.size(); ++i) {
        auto plus = x, minus = x;
        plus[i] += h;
        minus[i] -= h;
        CHECK(r.dx[i] == Approx((f(plus, gamma, beta) - f(minus, gamma, beta)) / (2 * h)).margin(1e-6).epsilon(1e-5));
      }
      for (std::size_t j = 0; j < gamma.size(); ++j) {
        auto plus = gamma, minus = gamma;
        plus[j] += h;
        minus[j] -= h;
        CHECK(r.dgamma[j] == Approx((f(x, plus, beta) - f(x, minus, beta)) / (2 * h)).margin(1e-6).epsilon(1e-5));
        if (!has_beta) continue;
        plus = beta;
        minus = beta;
        plus[j] += h;
        minus[j] -= h;
        CHECK(r.dbeta[j] == Approx((f(x, gamma, plus) - f(x, gamma, minus)) / (2 * h)).margin(1e-6).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("backward keys: their own form, round trip, forward keys unchanged", "[normalize][backward]") {
  NormalizeBackwardArgs a = valid_args();
  a.rows = 3000;
  a.dtype = DType::bf16;
  a.gamma = fake_ptr(3 << 16);
  a.dgamma = fake_ptr(4 << 16);
  a.dbeta = fake_ptr(5 << 16);
  a.mean = static_cast<const float*>(fake_ptr(6 << 16));
  a.rstd = static_cast<const float*>(fake_ptr(7 << 16));
  const Problem p = normalize::make_problem(a);
  CHECK(p.key() == "normalize,bf16,layernorm,backward,cols=128,rows<=4096,align=16,gamma=g,grads=gb,stats=saved");
  REQUIRE(normalize::problem_from_key(p.key()));
  CHECK(*normalize::problem_from_key(p.key()) == p);
  a.mean = a.rstd = nullptr;
  a.dbeta = nullptr;
  const Problem q = normalize::make_problem(a);
  CHECK(q.key() == "normalize,bf16,layernorm,backward,cols=128,rows<=4096,align=16,gamma=g,grads=g,stats=recompute");
  CHECK(*normalize::problem_from_key(q.key()) == q);
  CHECK_FALSE(q == p);
  normalize::ProblemHash hash;
  CHECK(hash(q) != hash(p));
  // A misaligned dgamma does not narrow the vectors (written element by element); a misaligned dx does.
  a.dgamma = fake_ptr((4 << 16) + 2);
  CHECK(normalize::make_problem(a).align_bytes == 16);
  a.dx = fake_ptr((2 << 16) + 4);
  CHECK(normalize::make_problem(a).align_bytes == 4);
  CHECK_FALSE(normalize::problem_from_key("normalize,bf16,layernorm,backward,cols=128,rows<=4096,align=16,gamma=x,grads=g,stats=saved"));
  CHECK_FALSE(normalize::problem_from_key("normalize,bf16,layernorm,backward,cols=128,rows<=4096,align=16,gamma=g,grads=g"));
  // The forward's key and config JSON keep their form.
  NormalizeArgs f;
  f.x = f.y = fake_ptr(0);
  f.rows = 64;
  f.cols = 128;
  CHECK(normalize::make_problem(f).key() == "normalize,f32,standardize,cols=128,rows<=64,align=16,affine=,stats=");
  CHECK(Config{}.to_json().dump() == R"({"items":0,"keep":"reg","rpb":4,"stat":"twopass","tpr":32,"vw":16})");
}

TEST_CASE("backward space: valid, unique, two-pass, recompute only where nothing is saved", "[normalize][backward]") {
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (NormMode m : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm})
      for (std::int64_t cols : {1, 3, 128, 1025, 4096, 65536})
        for (bool grads : {false, true})
          for (bool saved : {false, true}) {
            const Problem p = backward_problem(d, m, cols, 16384, grads, saved);
            INFO(p.key());
            const auto configs = normalize::enumerate(p);
            REQUIRE_FALSE(configs.empty());
            std::set<std::string> labels;
            bool saw_saved = false, saw_recompute = false, saw_loop = false;
            for (const auto& c : configs) {
              std::string why;
              CHECK(normalize::is_runnable(p, c, &why));
              CHECK(c.stat == Stat::two_pass);
              CHECK(labels.insert(c.label()).second);
              if (!saved) CHECK(c.recompute);
              saw_saved |= !c.recompute;
              saw_recompute |= c.recompute;
              saw_loop |= c.row_loop > 1;
              const Config back = Config::from_json(nlohmann::json::parse(c.to_json().dump()));
              CHECK(back == c);
              const auto g = normalize::geometry(p, c, p.rows);
              if (c.splits > 1) {  // split rows (test_normalize_wide.cpp): per-slice sums always
                CHECK(g.workspace_bytes > 0);
                CHECK(g.grad_groups * p.cols <= (std::int64_t(1) << 24));  // dgamma/dbeta partial rows bounded
              } else if (grads) {
                CHECK(g.workspace_bytes > 0);
                CHECK(std::int64_t(g.grid) <= 2048);  // partial rows stay bounded (pruned beyond)
              } else {
                CHECK(g.workspace_bytes == 0);
              }
            }
            CHECK(saw_recompute);
            CHECK(saw_saved == saved);
            if (grads) CHECK(saw_loop);
            const Config h = normalize::heuristic_config(p, 9);
            CHECK(normalize::is_valid(p, h));
            CHECK(normalize::is_runnable(p, normalize::seed_config(p)));
          }
}

TEST_CASE("backward constraints: what the kernel cannot do is refused with the reason", "[normalize][backward]") {
  const Problem p = backward_problem(DType::f32, NormMode::layernorm, 1024, 4096, true, false);
  Config c = normalize::heuristic_config(p, 8);  // the analytic rule (sm_90 may learn a cooperative one)
  std::string why;
  Config bad = c;
  bad.recompute = false;
  CHECK_FALSE(normalize::is_runnable(p, bad, &why));
  CHECK_THAT(why, Catch::Contains("recompute"));
  bad = c;
  bad.stat = Stat::welford;
  CHECK_FALSE(normalize::is_runnable(p, bad, &why));
  CHECK_THAT(why, Catch::Contains("two passes"));
  bad = c;
  bad.row_loop = 3;
  CHECK_FALSE(normalize::is_runnable(p, bad, &why));
  CHECK_THAT(why, Catch::Contains("row loop"));
  // The forward has no row loop and no recompute.
  Problem forward = p;
  forward.backward = forward.dgamma = forward.dbeta = false;
  CHECK_FALSE(normalize::is_runnable(forward, c, &why));
  CHECK_THAT(why, Catch::Contains("backward fields"));
  // Registers hold x and dy: half the forward's row slice.
  Config wide;
  wide.threads_per_row = 32;
  wide.rows_per_block = 4;
  wide.vector_bytes = 16;
  wide.keep = Keep::registers;
  wide.items = 8;  // 128 bytes of x per thread: fine forward, too much backward
  wide.recompute = true;
  Problem q = backward_problem(DType::f32, NormMode::layernorm, 1024, 4096, false, false);
  CHECK_FALSE(normalize::is_runnable(q, wide, &why));
  CHECK_THAT(why, Catch::Contains("registers"));
}

TEST_CASE("backward cooperative form: only with dgamma/dbeta, a twin of each one-block variant, label and JSON",
          "[normalize][backward][coop]") {
  const Problem p = backward_problem(DType::bf16, NormMode::layernorm, 1024, 1024, true, true);
  const auto space = normalize::enumerate(p);
  std::size_t coop = 0;
  for (const auto& c : space) {
    if (!c.cooperative || c.splits != 1) continue;
    ++coop;
    Config tree = c;
    tree.cooperative = false;
    INFO(c.label());
    CHECK(std::find(space.begin(), space.end(), tree) != space.end());  // its twin is there too
    CHECK(c.label().size() > 5);
    CHECK(c.label().substr(c.label().size() - 5) == ",coop");
    CHECK(Config::from_json(c.to_json()) == c);
    const auto g = normalize::geometry(p, c, 1024);
    CHECK(g.cooperative);
  }
  CHECK(coop > 100);
  // Refused where there is nothing to sum across the grid, and in the forward's one-block kernel.
  // The analytic rule's variant (sm_80: nothing learned) is a tree one.
  const Config rule = normalize::heuristic_config(p, 8);
  REQUIRE_FALSE(rule.cooperative);
  Config c = rule;
  c.cooperative = true;
  std::string why;
  CHECK(normalize::is_runnable(p, c, &why));
  Problem no_grads = p;
  no_grads.dgamma = no_grads.dbeta = false;
  CHECK_FALSE(normalize::is_runnable(no_grads, c, &why));
  CHECK_THAT(why, Catch::Contains("cooperative"));
  for (const auto& v : normalize::enumerate(no_grads)) CHECK_FALSE((v.cooperative && v.splits == 1));
  // The cost model ranks the cooperative twin ahead where the tree's tail dominates (few rows).
  CHECK(normalize::predicted_seconds(p, c, 132, 3e12) < normalize::predicted_seconds(p, rule, 132, 3e12));
}

TEST_CASE("backward cooperative twins share one compiled program: compiled once", "[normalize][backward][coop][nvrtc]") {
  const Problem p = backward_problem(DType::bf16, NormMode::layernorm, 1024, 1024, true, true);
  Config tree = normalize::heuristic_config(p, 9);
  tree.cooperative = false;
  Config coop = tree;
  coop.cooperative = true;
  REQUIRE(normalize::is_runnable(p, tree));
  REQUIRE(normalize::is_runnable(p, coop));
  const auto candidates = normalize::make_candidates(p, {tree, coop, tree}, "sm_90");
  REQUIRE(candidates.size() == 3);
  CHECK(candidates[0].label != candidates[1].label);
  const auto compiled = tuner::compile_all(candidates, 2);
  for (const auto& c : compiled) REQUIRE(c.status == tuner::Status::ok);
  CHECK(compiled[0].cubin == compiled[1].cubin);
  CHECK(compiled[0].binary_hash == compiled[1].binary_hash);
  // One NVRTC run handed to all three: two compiles would not time the same to the last bit.
  CHECK(compiled[0].seconds == compiled[1].seconds);
  CHECK(compiled[0].seconds == compiled[2].seconds);
}

TEST_CASE("backward workspace: partials, level-1 rows and counters laid out without overlap", "[normalize][backward]") {
  const Problem p = backward_problem(DType::bf16, NormMode::layernorm, 1000, 16384, true, true);
  for (const auto& c : normalize::enumerate(p)) {
    const auto g = normalize::geometry(p, c, 10000);
    const std::size_t blocks = g.grid;
    CHECK(std::size_t(g.group_blocks) * std::size_t(g.level1_rows) >= blocks);
    CHECK(std::size_t(g.group_blocks) * std::size_t(g.level1_rows - 1) < blocks);
    const std::size_t per_block = std::size_t(normalize::partial_rows_per_block(p, c));
    const bool in_registers = c.keep == normalize::Keep::registers || c.keep == normalize::Keep::staged;
    CHECK(per_block == (in_registers && c.rows_per_block > 1 ? 1u : std::size_t(c.rows_per_block)));
    CHECK(g.level1_offset >= 2 * blocks * per_block * 1000 * 4);
    CHECK(g.counter_offset >= g.level1_offset + 2 * std::size_t(g.level1_rows) * 1000 * 4);
    CHECK(g.workspace_bytes >= g.counter_offset + std::size_t(g.level1_rows + 1) * 4);
    CHECK(g.level1_offset % 256 == 0);
    CHECK(g.counter_offset % 256 == 0);
  }
}

TEST_CASE("backward geometry of zero rows: an empty grid, no division by zero", "[normalize][backward]") {
  // A Problem whose rows are not yet set (rows 0) once made geometry() divide by zero blocks per group.
  for (const std::int64_t cols : {1, 1000, 300000}) {
    const Problem p = backward_problem(DType::f32, NormMode::layernorm, cols, 0, true, true);
    for (const auto& c : normalize::enumerate(p)) {
      const auto g = normalize::geometry(p, c, 0);
      INFO(c.label());
      CHECK(g.group_blocks >= 1);
      if (c.splits == 1) CHECK(g.grid == 0);
    }
  }
}

TEST_CASE("backward argument validation names the field", "[normalize][backward]") {
  struct Case {
    const char* field;
    void (*mutate)(NormalizeBackwardArgs&);
  };
  const Case cases[] = {
      {"x", [](NormalizeBackwardArgs& a) { a.x = nullptr; }},
      {"dy", [](NormalizeBackwardArgs& a) { a.dy = nullptr; }},
      {"dx", [](NormalizeBackwardArgs& a) { a.dx = nullptr; }},
      {"rows", [](NormalizeBackwardArgs& a) { a.rows = 0; }},
      {"cols", [](NormalizeBackwardArgs& a) { a.cols = -1; }},
      {"cols", [](NormalizeBackwardArgs& a) { a.cols = std::int64_t(1) << 40; }},
      {"ld_x", [](NormalizeBackwardArgs& a) { a.ld_x = 100; }},
      {"ld_dy", [](NormalizeBackwardArgs& a) { a.ld_dy = 127; }},
      {"ld_dx", [](NormalizeBackwardArgs& a) { a.ld_dx = 1; }},
      {"rows", [](NormalizeBackwardArgs& a) { a.rows = std::int64_t(1) << 50; }},
      {"dtype", [](NormalizeBackwardArgs& a) { a.dtype = static_cast<DType>(5); }},
      {"mode", [](NormalizeBackwardArgs& a) { a.mode = static_cast<NormMode>(5); }},
      {"eps", [](NormalizeBackwardArgs& a) { a.eps = INFINITY; }},
      {"ddof", [](NormalizeBackwardArgs& a) { a.ddof = 1; }},  // layernorm
      {"dgamma", [](NormalizeBackwardArgs& a) { a.dgamma = fake_ptr(3 << 16); }},  // without gamma
      {"dbeta", [](NormalizeBackwardArgs& a) { a.mode = NormMode::rmsnorm; a.dbeta = fake_ptr(3 << 16); }},
      {"mean", [](NormalizeBackwardArgs& a) { a.mode = NormMode::rmsnorm; a.mean = static_cast<const float*>(fake_ptr(3 << 16)); }},
      {"mean", [](NormalizeBackwardArgs& a) { a.rstd = static_cast<const float*>(fake_ptr(3 << 16)); }},
      {"rstd", [](NormalizeBackwardArgs& a) { a.mean = static_cast<const float*>(fake_ptr(3 << 16)); }},
      {"dy", [](NormalizeBackwardArgs& a) { a.dtype = DType::bf16; a.dy = fake_ptr((1 << 16) + 1); }},
      {"rstd", [](NormalizeBackwardArgs& a) { a.mean = static_cast<const float*>(fake_ptr(3 << 16)); a.rstd = static_cast<const float*>(fake_ptr((4 << 16) + 2)); }},
      {"dx", [](NormalizeBackwardArgs& a) { a.dx = fake_ptr((1 << 16) + 64); }},   // part of dy
      {"ld_dx", [](NormalizeBackwardArgs& a) { a.dx = const_cast<void*>(a.dy); a.ld_dx = 256; }},    // dx == dy, another ld
      {"dx", [](NormalizeBackwardArgs& a) { a.dx = fake_ptr(256); }},             // overlaps x
      {"dgamma", [](NormalizeBackwardArgs& a) { a.gamma = fake_ptr(3 << 16); a.dgamma = fake_ptr(2 << 16); }},  // in dx
      {"dbeta", [](NormalizeBackwardArgs& a) { a.gamma = fake_ptr(3 << 16); a.dgamma = fake_ptr(4 << 16); a.dbeta = fake_ptr((4 << 16) + 4); }},
  };
  CHECK_NOTHROW(normalize::validate(valid_args()));
  NormalizeBackwardArgs in_place = valid_args();
  in_place.dx = const_cast<void*>(in_place.dy);
  CHECK_NOTHROW(normalize::validate(in_place));
  for (const auto& c : cases) {
    NormalizeBackwardArgs a = valid_args();
    c.mutate(a);
    INFO("field " << c.field);
    try {
      normalize::validate(a);
      FAIL("no error for an invalid " << c.field);
    } catch (const Error& e) {
      CHECK(e.context().field == c.field);
      CHECK(e.context().op == "normalize_backward");
    }
  }
}

TEST_CASE("a sample of the backward variants compiles for sm_90", "[normalize][backward][nvrtc][slow]") {
  std::vector<detail::CompileRequest> batches;
  std::size_t variants = 0;
  const test::Sample sample{6};
  for (const Problem& p :
       {backward_problem(DType::f32, NormMode::layernorm, 1024, 4096, true, true),
        backward_problem(DType::bf16, NormMode::rmsnorm, 4097, 16384, true, false),
        backward_problem(DType::f16, NormMode::standardize, 37, 64, false, true),
        backward_problem(DType::f32, NormMode::standardize, 65536, 8, true, false)}) {
    const auto configs = sample.apply(normalize::enumerate(p), p.key());
    variants += configs.size();
    std::vector<detail::CompileRequest> requests;
    for (const auto& c : configs) requests.push_back(normalize::compile_request(p, c, "sm_90"));
    test::add_batched(batches, requests, 48);
    batches.push_back(normalize::reference_request(p, "sm_90"));
    ++variants;
  }
  const auto results = test::compile_batches(batches);
  for (const auto& failure : results.failures) {
    INFO(failure);
    CHECK(failure.empty());
  }
  CHECK(results.compiled + results.left_out >= variants);
  WARN("compiled " << results.compiled << " normalize backward kernels for sm_90");
}

TEST_CASE("backward staged rows: rules, shared memory, label and JSON", "[normalize][backward][staged]") {
  const Problem p = backward_problem(DType::bf16, NormMode::layernorm, 4096, 8192, true, true);
  Config c;
  c.threads_per_row = 256;
  c.rows_per_block = 2;
  c.vector_bytes = 16;
  c.items = 2;  // 4096 / (256 * 8)
  c.keep = Keep::staged;
  c.row_loop = 16;
  std::string why;
  REQUIRE(normalize::is_valid(p, c, &why));
  CHECK(c.label() == "tpr=256,rpb=2,vw=16B,keep=stage,stat=twopass,loop=16");
  CHECK(Config::from_json(c.to_json()) == c);
  // Two stages of x and dy for each of the block's two row groups.
  CHECK(normalize::geometry(p, c, 8192).dynamic_smem == 2u * 2u * 2u * 4096u * 2u);
  CHECK(normalize::partial_rows_per_block(p, c) == 1);  // folded as the register keep
  CHECK(normalize::compile_request(p, c, "sm_90").name_expressions.at(0) ==
        "kvt_normalize_backward<kvt_bf16, 256, 2, 8, 2, 3, 1, 1, 3, 0, true>");
  // The space has staged points for this problem, and none for rows under 4 KiB: there they were
  // twins of register variants that crowded the budgeted search (bench/NOTES.md, 2026-11-28).
  const auto staged_points = [](const Problem& q) {
    const auto space = normalize::enumerate(q);
    return std::count_if(space.begin(), space.end(), [](const Config& v) { return v.keep == Keep::staged; });
  };
  CHECK(staged_points(p) > 0);
  CHECK(staged_points(backward_problem(DType::bf16, NormMode::layernorm, 128, 65536, true, true)) == 0);
  CHECK(staged_points(backward_problem(DType::bf16, NormMode::layernorm, 1024, 4096, true, true)) == 0);
  CHECK(staged_points(backward_problem(DType::f32, NormMode::layernorm, 1024, 8192, true, true)) > 0);

  const Problem few = backward_problem(DType::bf16, NormMode::layernorm, 4096, 1024, true, true);
  Config no_loop = c;
  no_loop.row_loop = 1;
  CHECK_FALSE(normalize::is_valid(few, no_loop, &why));
  CHECK_THAT(why, Catch::Contains("row loop"));
  CHECK(normalize::is_runnable(few, no_loop));  // pruned, not broken
  Config narrow = c;
  narrow.vector_bytes = 2;
  narrow.items = 8;
  CHECK_FALSE(normalize::is_runnable(p, narrow, &why));
  CHECK_THAT(why, Catch::Contains("4, 8 or 16 bytes"));
  Config items = c;
  items.items = 0;
  CHECK_FALSE(normalize::is_runnable(p, items, &why));
  CHECK_THAT(why, Catch::Contains("items"));
  const Problem huge = backward_problem(DType::f32, NormMode::layernorm, 16384, 8192, true, true);
  Config big = c;
  big.threads_per_row = 1024;
  big.rows_per_block = 1;
  big.vector_bytes = 16;
  big.items = 4;  // 16384 / (1024 * 4): two stages of x and dy, 256 KiB
  CHECK_FALSE(normalize::is_runnable(huge, big, &why));
  CHECK_THAT(why, Catch::Contains("shared memory"));

  Problem forward = p;
  forward.backward = false;
  forward.dgamma = forward.dbeta = forward.saved_stats = false;
  Config f = c;
  f.row_loop = 1;
  CHECK_FALSE(normalize::is_runnable(forward, f, &why));
  CHECK_THAT(why, Catch::Contains("backward"));
}
