// The normalize kernels (kernel_templates/normalize/normalize.cu, normalize_backward.cuh and
// normalize_split.cuh) compiled as host C++ and run on emulated CUDA threads (tests/emulation/
// common.cuh: f32 only, a block's threads as host threads meeting at barriers, a warp's shuffles
// through an exchange, blocks in turn), against
// the float64 reference: the fused residual add (s = x + residual, written in place over an input or
// apart) and its backward with the gradient into s, in every keep (registers, FULL, shared, re-read),
// in the phased split-row kernels and in the backward's dgamma/dbeta reduction. It checks the kernels'
// logic on machines without a GPU; the [gpu] tests check the compiled kernels in every dtype. (The
// cooperative split kernel needs co-resident blocks and is not emulated.) Also the float64 reference
// kernels the tuner verifies every candidate against, a row over tpr threads.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_reference.h"
#include "kernel_templates/normalize/normalize_split.h"

#include "emulation/kernel_begin.h"
#include "kernel_templates/normalize/normalize.cu"
#include "emulation/kernel_end.h"

using namespace kvtune;
using normalize::Config;
using normalize::Keep;
using normalize::Problem;
using normalize::Stat;

namespace {

// Runs body() on grid x block emulated threads, one block after another.
template <class Body>
void emulate(unsigned grid, unsigned block, const Body& body) {
  REQUIRE(block >= 32);
  REQUIRE(block % 32 == 0);
  kvt_emulated_launch(grid, 1, block, -1, body);  // shared memory size not tracked here: left as it is
}

std::vector<float> random_rows(std::size_t n, unsigned seed, float offset, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& e : v) e = offset + scale * u(rng);
  return v;
}

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double relative_error(const std::vector<float>& out, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / std::max(norm, 1e-300));
}

Problem forward_problem(NormMode mode, std::int64_t cols, std::int64_t rows, bool affine, bool residual_out) {
  Problem p;
  p.mode = mode;
  p.cols = cols;
  p.rows = rows;
  p.gamma = affine;
  p.beta = affine && mode != NormMode::rmsnorm;
  p.rstd_out = true;
  p.mean_out = mode != NormMode::rmsnorm;
  p.residual = true;
  p.residual_out = residual_out;
  return p;
}

enum class Where { apart, over_x, over_r };  // where residual_out (s) goes

// The phase kernels of one kvt_normalize_split instantiation, by phase (as LoadedKernel::launch_phase).
template <class T, int TPR, int VW, int ITEMS, int MODE, int AFFINE, int STATS_OUT, int RES, int LOOP = 0>
void split_phase(int phase, const KvtNormalizeParams p, const KvtResidualParams rp) {
  if (phase == 0) kvt_normalize_split<0, T, TPR, VW, ITEMS, MODE, AFFINE, STATS_OUT, RES, LOOP>(p, rp);
  if (phase == 1) kvt_normalize_split<1, T, TPR, VW, ITEMS, MODE, AFFINE, STATS_OUT, RES, LOOP>(p, rp);
  if (phase == 2) kvt_normalize_split<2, T, TPR, VW, ITEMS, MODE, AFFINE, STATS_OUT, RES, LOOP>(p, rp);
}

// One forward call of `kernel` (a kvt_normalize instantiation, or split_phase's, matching
// `config`), emulated, against the float64 reference of the rounded sum; s bit for bit.
template <class Kernel>
void check_forward(Kernel kernel, const Problem& p, const Config& config, Where where) {
  std::string why;
  INFO(p.key() << " " << config.label() << " s " << (where == Where::apart ? "apart" : where == Where::over_x ? "over x" : "over residual"));
  const bool runnable = normalize::is_runnable(p, config, &why);
  INFO(why);
  REQUIRE(runnable);
  const std::int64_t rows = p.rows, cols = p.cols, n = rows * cols;
  auto x = random_rows(std::size_t(n), 1, 0.5f, 2.f), r = random_rows(std::size_t(n), 2, -0.25f, 4.f);
  const auto gamma = random_rows(std::size_t(cols), 3, 1.f, 0.5f), beta = random_rows(std::size_t(cols), 4, 0.f, 0.5f);
  std::vector<float> s_expected(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < s_expected.size(); ++i) s_expected[i] = x[i] + r[i];
  std::vector<float> y(static_cast<std::size_t>(n), NAN), s_apart(static_cast<std::size_t>(n), NAN);
  std::vector<float> mean(static_cast<std::size_t>(rows)), rstd(static_cast<std::size_t>(rows));
  float* s = where == Where::apart ? s_apart.data() : where == Where::over_x ? x.data() : r.data();

  KvtNormalizeParams params{};
  params.x = x.data();
  params.y = y.data();
  params.gamma = p.gamma ? gamma.data() : nullptr;
  params.beta = p.beta ? beta.data() : nullptr;
  params.mean = p.mean_out ? mean.data() : nullptr;
  params.rstd = rstd.data();
  params.rows = rows;
  params.cols = cols;
  params.ld_x = params.ld_y = cols;
  params.eps = 1e-5f;
  params.ddof = p.mode == NormMode::standardize ? 1 : 0;
  const KvtResidualParams residual{r.data(), p.residual_out ? s : nullptr, cols, cols};
  const normalize::Geometry g = normalize::geometry(p, config, rows);
  REQUIRE(g.dynamic_smem <= sizeof(kvt_emulated_dynamic_smem));
  std::vector<float> workspace(g.workspace_bytes / 4 + 1);
  if constexpr (!std::is_invocable_v<Kernel, int, KvtNormalizeParams, KvtResidualParams>) {
    REQUIRE(g.phase_count == 0);
    emulate(g.grid, g.block, [&] { kernel(params, residual); });
  } else {  // the phases, as normalize::launch runs them (one chunk: every row)
    REQUIRE(g.phase_count == 3);
    REQUIRE(g.row_chunk >= rows);
    auto* base = reinterpret_cast<unsigned char*>(workspace.data());
    params.row_partials = workspace.data();
    params.row_final = reinterpret_cast<float*>(base + g.stat_final_offset);
    params.splits = config.splits;
    params.row_loop = config.row_loop;
    for (int i = 0; i < g.phase_count; ++i)
      emulate(g.phase_grid[i], g.block, [&] { kernel(g.phases[i], params, residual); });
  }
  const auto ref = normalize::reference(widened(s_expected), rows, cols, cols, p.mode, 1e-5, params.ddof,
                                        p.gamma ? widened(gamma) : std::vector<double>{},
                                        p.beta ? widened(beta) : std::vector<double>{});
  CHECK(relative_error(y, ref.y) < 1e-5);
  CHECK(relative_error(rstd, ref.rstd) < 1e-4);
  if (p.mean_out) CHECK(relative_error(mean, ref.mean) < 1e-5);
  if (p.residual_out) CHECK(std::memcmp(s, s_expected.data(), s_expected.size() * 4) == 0);
}

// One backward call: x is s, and the gradient into s (ds) is added to dx (dx may be ds itself).
template <class Kernel>
void check_backward(Kernel kernel, const Problem& p, const Config& config, bool dx_is_ds) {
  std::string why;
  INFO(p.key() << " " << config.label() << (dx_is_ds ? " dx == ds" : ""));
  const bool runnable = normalize::is_runnable(p, config, &why);
  INFO(why);
  REQUIRE(runnable);
  const std::int64_t rows = p.rows, cols = p.cols, n = rows * cols;
  const auto s = random_rows(std::size_t(n), 5, 0.5f, 2.f), dy = random_rows(std::size_t(n), 6, 0.f, 1.f);
  auto ds = random_rows(std::size_t(n), 7, 0.f, 1.f);
  const auto ds_in = ds;
  const auto gamma = random_rows(std::size_t(cols), 8, 1.f, 0.5f);
  std::vector<float> dx_apart(std::size_t(n), NAN), dgamma(std::size_t(cols), NAN), dbeta(std::size_t(cols), NAN);
  float* dx = dx_is_ds ? ds.data() : dx_apart.data();

  KvtNormalizeBackwardParams params{};
  params.x = s.data();
  params.dy = dy.data();
  params.dx = dx;
  params.gamma = p.gamma ? gamma.data() : nullptr;
  params.dgamma = p.dgamma ? dgamma.data() : nullptr;
  params.dbeta = p.dbeta ? dbeta.data() : nullptr;
  params.rows = rows;
  params.cols = cols;
  params.ld_x = params.ld_dy = params.ld_dx = params.ld_dres = cols;
  params.eps = 1e-5f;
  params.ddof = p.mode == NormMode::standardize ? 1 : 0;
  params.row_loop = config.row_loop;
  params.dres = p.dresidual ? ds.data() : nullptr;
  // Saved statistics: the forward's f32 mean and rstd from the float64 reference.
  std::vector<float> saved_mean, saved_rstd;
  if (!config.recompute) {
    const auto fwd = normalize::reference(widened(s), rows, cols, cols, p.mode, 1e-5, params.ddof, {}, {});
    saved_mean.assign(fwd.mean.begin(), fwd.mean.end());
    saved_rstd.assign(fwd.rstd.begin(), fwd.rstd.end());
    params.mean = p.mode == NormMode::rmsnorm ? nullptr : saved_mean.data();
    params.rstd = saved_rstd.data();
  }
  const normalize::Geometry g = normalize::geometry(p, config, rows);
  REQUIRE(g.dynamic_smem <= sizeof(kvt_emulated_dynamic_smem));
  std::vector<float> workspace(g.workspace_bytes / 4 + 1, 0.f);
  auto* base = reinterpret_cast<unsigned char*>(workspace.data());
  params.group_blocks = g.group_blocks;
  params.level1_rows = g.level1_rows;
  params.chunks = g.grid;  // the tree form: a block a chunk (the cooperative form's wait needs co-resident blocks)
  if (g.phase_count == 0) {
    params.partials = workspace.data();
    params.level1 = reinterpret_cast<float*>(base + g.level1_offset);
    params.counters = reinterpret_cast<unsigned*>(base + g.counter_offset);  // zero
    emulate(g.grid, g.block, [&] { kernel(params); });
  } else {
    params.stat_partials = workspace.data();
    params.stat_final = reinterpret_cast<float*>(base + g.stat_final_offset);
    params.sum_partials = reinterpret_cast<float*>(base + g.sum_partials_offset);
    params.sum_final = reinterpret_cast<float*>(base + g.sum_final_offset);
    params.partials = reinterpret_cast<float*>(base + g.grad_partials_offset);
    params.splits = config.splits;
    params.direct = g.direct ? 1 : 0;
    params.grad_groups = g.grad_groups;
    for (int i = 0; i < g.phase_count; ++i) {
      params.phase = g.phases[i];
      emulate(g.phase_grid[i], g.block, [&] { kernel(params); });
    }
  }
  auto ref = normalize::reference_backward(widened(s), widened(dy), rows, cols, cols, p.mode, 1e-5, params.ddof,
                                           p.gamma ? widened(gamma) : std::vector<double>{});
  if (p.dresidual)
    for (std::size_t i = 0; i < ref.dx.size(); ++i) ref.dx[i] += double(ds_in[i]);
  CHECK(relative_error(std::vector<float>(dx, dx + n), ref.dx) < 1e-4);
  if (p.dgamma) CHECK(relative_error(dgamma, ref.dgamma) < 1e-4);
  if (p.dbeta) CHECK(relative_error(dbeta, ref.dbeta) < 1e-4);
}

// A layernorm backward problem with gamma, dgamma and dbeta.
Problem layernorm_backward(std::int64_t cols, std::int64_t rows, bool dresidual) {
  Problem p;
  p.backward = true;
  p.mode = NormMode::layernorm;
  p.cols = cols;
  p.rows = rows;
  p.gamma = p.dgamma = p.dbeta = true;
  p.dresidual = dresidual;
  return p;
}

Config one_block(int tpr, int rpb, int vector_bytes, int items, Keep keep, Stat stat) {
  Config c;
  c.threads_per_row = tpr;
  c.rows_per_block = rpb;
  c.vector_bytes = vector_bytes;
  c.items = items;
  c.keep = keep;
  c.stat = stat;
  return c;
}

}  // namespace

TEST_CASE("emulated: the fused residual add in every keep, s apart and over an input", "[normalize][residual][emulated]") {
  // Registers, masked (1000 columns: 8 vectors of 4 a thread, the last partly past the row).
  const Problem ln = forward_problem(NormMode::layernorm, 1000, 9, true, true);
  const auto reg = &kvt_normalize<float, 32, 4, 4, 8, 0, 0, 1, 3, 3, false, 2>;
  for (Where w : {Where::apart, Where::over_x, Where::over_r})
    check_forward(reg, ln, one_block(32, 4, 16, 8, Keep::registers, Stat::two_pass), w);
  // Registers, FULL (1024 columns exactly), rmsnorm with gamma.
  const Problem rms = forward_problem(NormMode::rmsnorm, 1024, 5, true, true);
  check_forward(&kvt_normalize<float, 32, 4, 4, 8, 0, 0, 2, 1, 2, true, 2>, rms,
                one_block(32, 4, 16, 8, Keep::registers, Stat::two_pass), Where::over_r);
  // Shared memory, Welford, standardize (ddof 1), s over x.
  const Problem st = forward_problem(NormMode::standardize, 777, 6, false, true);
  check_forward(&kvt_normalize<float, 64, 2, 2, 0, 1, 1, 0, 0, 3, false, 2>, st,
                one_block(64, 2, 8, 0, Keep::shared, Stat::welford), Where::over_x);
  // Re-read: the output pass reads x + residual again; without residual_out (RES 1).
  const Problem rr = forward_problem(NormMode::layernorm, 3000, 3, true, false);
  check_forward(&kvt_normalize<float, 128, 1, 4, 0, 2, 0, 1, 3, 3, false, 1>, rr,
                one_block(128, 1, 16, 0, Keep::reread, Stat::two_pass), Where::apart);
}

TEST_CASE("emulated: the bf16 residual sum is rounded once, as a separate add writes it", "[normalize][residual][emulated]") {
  const Problem p = [] {
    Problem q = forward_problem(NormMode::layernorm, 1000, 5, true, true);
    q.dtype = DType::bf16;
    return q;
  }();
  const Config c = one_block(32, 4, 16, 4, Keep::registers, Stat::two_pass);
  std::string why;
  REQUIRE(normalize::is_runnable(p, c, &why));
  const std::size_t n = std::size_t(p.rows * p.cols);
  const auto to_bf16 = [](const std::vector<float>& v) {
    std::vector<kvt_bf16> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = kvt_from_float<kvt_bf16>(v[i]);
    return out;
  };
  auto x = to_bf16(random_rows(n, 11, 0.5f, 2.f)), r = to_bf16(random_rows(n, 12, -0.25f, 40.f));
  const auto gamma = to_bf16(random_rows(std::size_t(p.cols), 13, 1.f, 0.5f));
  const auto beta = to_bf16(random_rows(std::size_t(p.cols), 14, 0.f, 0.5f));
  std::vector<kvt_bf16> s_expected(n), y(n);
  std::vector<double> s_values(n);
  for (std::size_t i = 0; i < n; ++i) {
    s_expected[i] = kvt_from_float<kvt_bf16>(kvt_to_float(x[i]) + kvt_to_float(r[i]));
    s_values[i] = kvt_to_float(s_expected[i]);
  }
  std::vector<float> mean(std::size_t(p.rows)), rstd(std::size_t(p.rows));
  KvtNormalizeParams params{};
  params.x = x.data();
  params.y = y.data();
  params.gamma = gamma.data();
  params.beta = beta.data();
  params.mean = mean.data();
  params.rstd = rstd.data();
  params.rows = p.rows;
  params.cols = p.cols;
  params.ld_x = params.ld_y = p.cols;
  params.eps = 1e-5f;
  const KvtResidualParams residual{r.data(), r.data(), p.cols, p.cols};  // s over the residual stream
  const normalize::Geometry g = normalize::geometry(p, c, p.rows);
  emulate(g.grid, g.block, [&] { kvt_normalize<kvt_bf16, 32, 4, 8, 4, 0, 0, 1, 3, 3, false, 2>(params, residual); });
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += r[i].bits != s_expected[i].bits;
  CHECK(wrong == 0);
  std::vector<double> gv(gamma.size()), bv(beta.size());
  for (std::size_t j = 0; j < gv.size(); ++j) gv[j] = kvt_to_float(gamma[j]), bv[j] = kvt_to_float(beta[j]);
  const auto ref = normalize::reference(s_values, p.rows, p.cols, p.cols, p.mode, 1e-5, 0, gv, bv);
  std::vector<float> yf(n);
  for (std::size_t i = 0; i < n; ++i) yf[i] = kvt_to_float(y[i]);
  CHECK(relative_error(yf, ref.y) < 1e-2);
  CHECK(relative_error(mean, ref.mean) < 1e-5);
}

TEST_CASE("emulated: the fused residual add on rows split across blocks", "[normalize][residual][emulated][heavy]") {
  // 40000 f32 columns: slices of 256 threads x 4 vectors of 4 (4096 columns), 10 slices a row.
  for (Where w : {Where::apart, Where::over_x}) {
    const Problem p = forward_problem(NormMode::layernorm, 40000, 3, true, true);
    const Config c = normalize::split_rows::make(p, 256, 16, 4, 1, false);
    REQUIRE(c.splits == 10);
    check_forward(&split_phase<float, 256, 4, 4, 1, 3, 3, 2>, p, c, w);
  }
  // 2 x 4096 + 100 columns: the last slice's 100 columns lie in its first warp, so its other seven
  // warps write partials of count 0, which the merge must skip.
  const Problem tail = forward_problem(NormMode::layernorm, 8292, 3, true, false);
  const Config t = normalize::split_rows::make(tail, 256, 16, 4, 1, false);
  REQUIRE(t.splits == 3);
  check_forward(&split_phase<float, 256, 4, 4, 1, 3, 3, 1>, tail, t, Where::apart);
  // The output phase's row loop (gamma / beta loaded once for 4 rows): 9 rows, the last group one row.
  const Problem looped = forward_problem(NormMode::layernorm, 40000, 9, true, true);
  const Config l = normalize::split_rows::make(looped, 256, 16, 4, 4, false);
  REQUIRE(normalize::geometry(looped, l, 9).phase_grid[2] == 3 * 10);
  check_forward(&split_phase<float, 256, 4, 4, 1, 3, 3, 2, 1>, looped, l, Where::over_x);
  const Problem rms = forward_problem(NormMode::rmsnorm, 20000, 2, false, false);
  check_forward(&split_phase<float, 128, 4, 8, 2, 0, 2, 1>, rms, normalize::split_rows::make(rms, 128, 16, 8, 1, false),
                Where::apart);
}

TEST_CASE("emulated: the backward adds the gradient into s, one block a row and split rows", "[normalize][residual][emulated][heavy]") {
  Problem p = layernorm_backward(1000, 37, true);
  Config c = one_block(64, 2, 16, 4, Keep::registers, Stat::two_pass);
  c.recompute = true;
  for (bool dx_is_ds : {false, true})
    check_backward(&kvt_normalize_backward<float, 64, 2, 4, 4, 0, 1, 1, 3, 1, false, 1>, p, c, dx_is_ds);
  Config shared = one_block(64, 2, 16, 0, Keep::shared, Stat::two_pass);
  shared.recompute = true;
  check_backward(&kvt_normalize_backward<float, 64, 2, 4, 0, 1, 1, 1, 3, 1, false, 1>, p, shared, false);

  // p with another width and row count; a register variant recomputing its statistics.
  const auto shaped = [&](std::int64_t cols, std::int64_t rows) {
    Problem q = p;
    q.cols = cols;
    q.rows = rows;
    return q;
  };
  const auto recomputing = [](int tpr, int rpb, int vector_bytes, int items, int row_loop) {
    Config c = one_block(tpr, rpb, vector_bytes, items, Keep::registers, Stat::two_pass);
    c.recompute = true;
    c.row_loop = row_loop;
    return c;
  };
  // The dgamma/dbeta level sums in both widths: 999 columns (one float a thread and column) and
  // 1000 (16-byte loads), 75 blocks in 9 groups with a row loop.
  for (const std::int64_t cols : {999, 1000})
    check_backward(&kvt_normalize_backward<float, 64, 1, 1, 16, 0, 1, 1, 3, 1, false, 1>, shaped(cols, 300),
                   recomputing(64, 1, 4, 16, 4), false);
  // Eight row groups a block folding their dgamma/dbeta accumulators on chip, a row shorter than
  // the group's stride (37 columns of 48), the last block's rows partly past the end.
  check_backward(&kvt_normalize_backward<float, 16, 8, 1, 3, 0, 1, 1, 3, 1, false, 1>, shaped(37, 300),
                 recomputing(16, 8, 4, 3, 1), false);
  // A row loop with the row exactly in registers (FULL), the last group's last row past the end:
  // 1024 columns, 299 rows, a loop of 4.
  check_backward(&kvt_normalize_backward<float, 64, 1, 4, 4, 0, 1, 1, 3, 1, true, 1>, shaped(1024, 299),
                 recomputing(64, 1, 16, 4, 4), false);

  Problem wide;
  wide.backward = true;
  wide.mode = NormMode::rmsnorm;
  wide.cols = 20000;
  wide.rows = 3;
  wide.gamma = wide.dgamma = true;
  wide.dresidual = true;
  const Config split = normalize::split_rows::make(wide, 256, 16, 4, 1, true);
  for (bool dx_is_ds : {false, true})
    check_backward(&kvt_normalize_backward_split<float, 256, 4, 4, 2, 1, 1, 1, 1>, wide, split, dx_is_ds);
}

TEST_CASE("emulated: the backward's staged rows (copied one row of the loop ahead)", "[normalize][backward][emulated][heavy]") {
  // keep=stage: the row group's next row copied to shared memory while this one is reduced. A row
  // loop of 4 with the last block's rows partly past the end; saved and recomputed statistics;
  // a masked row (1000 columns: the last vector partial, then vectors past the row) and a FULL one.
  Problem p = layernorm_backward(0, 37, true);  // cols: per check below
  // 64 threads a row, 2 row groups, 4 vectors of 4 a thread; RECOMPUTE and FULL as template arguments.
  const auto check_staged = [&](auto recompute, auto full, std::int64_t cols, std::int64_t rows) {
    constexpr int kRecompute = decltype(recompute)::value;
    constexpr bool kFull = decltype(full)::value;
    Problem q = p;
    q.saved_stats = kRecompute == 0;
    q.cols = cols;
    q.rows = rows;
    Config c = one_block(64, 2, 16, 4, Keep::staged, Stat::two_pass);
    c.recompute = kRecompute != 0;
    c.row_loop = 4;
    for (const bool dx_is_ds : {false, true})
      check_backward(&kvt_normalize_backward<float, 64, 2, 4, 4, 3, 1, 1, 3, kRecompute, kFull, 1>, q, c, dx_is_ds);
  };
  using Saved = std::integral_constant<int, 0>;
  using Recomputed = std::integral_constant<int, 1>;
  check_staged(Saved{}, std::false_type{}, 1000, 37);
  check_staged(Recomputed{}, std::false_type{}, 1000, 37);
  check_staged(Saved{}, std::true_type{}, 1024, 299);
  check_staged(Recomputed{}, std::true_type{}, 1024, 299);
  // rmsnorm (no mean; recomputed from the sum of squares, which needs zeros outside the row) and
  // standardize (ddof 1) from saved statistics, 4-byte vectors, one row group a block.
  Problem rms = p;
  rms.mode = NormMode::rmsnorm;
  rms.cols = 333;
  rms.rows = 50;
  rms.dbeta = false;
  rms.saved_stats = false;
  Config one = one_block(128, 1, 4, 3, Keep::staged, Stat::two_pass);
  one.recompute = true;
  one.row_loop = 4;
  check_backward(&kvt_normalize_backward<float, 128, 1, 1, 3, 3, 2, 1, 1, 1, false, 1>, rms, one, false);
  Problem standardize = rms;
  standardize.mode = NormMode::standardize;
  standardize.gamma = standardize.dgamma = false;
  standardize.saved_stats = true;
  one.recompute = false;
  check_backward(&kvt_normalize_backward<float, 128, 1, 1, 3, 3, 0, 0, 0, 0, false, 1>, standardize, one, false);
}

TEST_CASE("emulated: the backward of one-column rows is exactly zero", "[normalize][backward][emulated]") {
  // dx = s * (g - mean(g)) - xhat * cb with g equal to its mean and xhat 0: exactly 0 in float64, so
  // any rounding residue is the whole relative error (a product form s * g - s * ca left 2e-4 to
  // 8e-2, the larger where s is 1 / eps; [gpu] sample, H200, 2026-12-02). Saved and recomputed
  // statistics, with gamma and without. (Standardize's one column has ddof 1 here: no variance.)
  Problem p = layernorm_backward(1, 300, false);
  for (const bool saved : {true, false}) {
    p.saved_stats = saved;
    Config c = one_block(1, 128, 4, 1, Keep::registers, Stat::two_pass);
    c.recompute = !saved;
    if (saved) check_backward(&kvt_normalize_backward<float, 1, 128, 1, 1, 0, 1, 1, 3, 0, false, 0>, p, c, false);
    else check_backward(&kvt_normalize_backward<float, 1, 128, 1, 1, 0, 1, 1, 3, 1, false, 0>, p, c, false);
  }
  Problem plain = p;  // no gamma, dbeta alone
  plain.gamma = plain.dgamma = false;
  plain.saved_stats = true;
  check_backward(&kvt_normalize_backward<float, 1, 128, 1, 1, 0, 1, 0, 2, 0, false, 0>, plain,
                 one_block(1, 128, 4, 1, Keep::registers, Stat::two_pass), false);
}

// The float64 reference kernels (what every candidate is verified against): a row's tpr threads sum
// strided columns, added in thread order; rows past the last take part in the block's sums only.
// Against the CPU reference: y / dx as f32, the statistics as the kernel's doubles.
TEST_CASE("emulated: the float64 reference kernels, a row over tpr threads, match the CPU reference",
          "[normalize][emulated]") {
  struct Shape {
    int tpr;
    std::int64_t rows, cols;
  };
  // One thread a row as before; several rows a block with the last block short; one row a block.
  const Shape shapes[] = {{1, 5, 37}, {8, 70, 300}, {32, 9, 1025}, {256, 3, 1}, {256, 2, 5000}};
  for (const auto& shape : shapes)
    for (const NormMode mode : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm}) {
      const std::int64_t rows = shape.rows, cols = shape.cols, n = rows * cols;
      const bool residual = shape.tpr == 8;  // the forward's x + residual, s written out
      INFO("tpr " << shape.tpr << ", " << rows << " x " << cols << ", mode " << int(mode) << ", residual " << residual);
      const int ddof = mode == NormMode::standardize && cols > 1 ? 1 : 0;  // one column: ddof 1 divides by 0
      // |mean| >> std on every row: the statistics must still be exact.
      const auto x = random_rows(std::size_t(n), 11, 100.f, 0.5f), r = random_rows(std::size_t(n), 12, -0.25f, 1.f);
      const auto dy = random_rows(std::size_t(n), 13, 0.f, 1.f), gamma = random_rows(std::size_t(cols), 14, 1.f, 0.5f);
      std::vector<float> s(x.size());
      for (std::size_t i = 0; i < s.size(); ++i) s[i] = residual ? x[i] + r[i] : x[i];
      const unsigned grid = unsigned((rows + 256 / shape.tpr - 1) / (256 / shape.tpr));
      const double eps = double(1e-5f);  // the kernels' eps is a float
      const auto ref = normalize::reference(widened(s), rows, cols, cols, mode, eps, ddof, widened(gamma), {});

      // The fields the forward's and the backward's parameters share.
      const auto rows_of = [&](auto& q) {
        q.gamma = gamma.data();
        q.rows = rows;
        q.cols = cols;
        q.eps = 1e-5f;
        q.ddof = ddof;
      };
      KvtNormalizeParams params{};
      std::vector<float> y(std::size_t(n), NAN), s_out(std::size_t(n), NAN), mean(std::size_t(rows), NAN),
          rstd(std::size_t(rows), NAN);
      rows_of(params);
      params.x = x.data();
      params.y = y.data();
      params.mean = mean.data();
      params.rstd = rstd.data();
      params.ld_x = params.ld_y = cols;
      const KvtResidualParams rp{residual ? r.data() : nullptr, residual ? s_out.data() : nullptr, cols, cols};
      emulate(grid, kKvtReferenceBlock, [&] {
        if (mode == NormMode::standardize) kvt_normalize_reference<float, 0, 1>(params, rp, shape.tpr);
        if (mode == NormMode::layernorm) kvt_normalize_reference<float, 1, 1>(params, rp, shape.tpr);
        if (mode == NormMode::rmsnorm) kvt_normalize_reference<float, 2, 1>(params, rp, shape.tpr);
      });
      CHECK(relative_error(y, ref.y) < 1e-6);
      CHECK(relative_error(rstd, ref.rstd) < 1e-6);
      if (mode != NormMode::rmsnorm) CHECK(relative_error(mean, ref.mean) < 1e-6);
      if (residual) CHECK(std::memcmp(s_out.data(), s.data(), s.size() * 4) == 0);

      KvtNormalizeBackwardParams bp{};
      std::vector<float> dx(std::size_t(n), NAN), saved_mean(std::size_t(rows), NAN), saved_rstd(std::size_t(rows), NAN);
      std::vector<double> stats(std::size_t(2 * rows), NAN);
      rows_of(bp);
      bp.x = s.data();
      bp.dy = dy.data();
      bp.dx = dx.data();
      bp.ld_x = bp.ld_dy = bp.ld_dx = cols;
      double* stats_ptr = stats.data();
      float* mean_ptr = saved_mean.data();
      float* rstd_ptr = saved_rstd.data();
      emulate(grid, kKvtReferenceBlock, [&] {
        if (mode == NormMode::standardize)
          kvt_normalize_backward_reference<float, 0, 1>(bp, stats_ptr, mean_ptr, rstd_ptr, shape.tpr);
        if (mode == NormMode::layernorm)
          kvt_normalize_backward_reference<float, 1, 1>(bp, stats_ptr, mean_ptr, rstd_ptr, shape.tpr);
        if (mode == NormMode::rmsnorm)
          kvt_normalize_backward_reference<float, 2, 1>(bp, stats_ptr, mean_ptr, rstd_ptr, shape.tpr);
      });
      const auto bref = normalize::reference_backward(widened(s), widened(dy), rows, cols, cols, mode, eps, ddof,
                                                      widened(gamma));
      CHECK(relative_error(dx, bref.dx) < 1e-6);
      for (std::int64_t row = 0; row < rows; ++row) {
        if (mode == NormMode::rmsnorm) CHECK(stats[std::size_t(2 * row)] == 0.0);
        else CHECK(stats[std::size_t(2 * row)] == Approx(ref.mean[std::size_t(row)]).epsilon(1e-12));
        CHECK(stats[std::size_t(2 * row + 1)] == Approx(ref.rstd[std::size_t(row)]).epsilon(1e-12));
      }
      CHECK(relative_error(saved_rstd, ref.rstd) < 1e-6);
    }
}
