// [gpu][normalize][wide] tests of split rows (issue 25): the split variants of the space against the
// float64 reference kernels (forward and backward, every mode and dtype, widths just above what one
// block holds and beyond 2^20, few rows and enough rows for several dgamma/dbeta groups), and calls
// through a Context (heuristic and tuned) with every optional tensor, leading dimensions, in place,
// |mean| >> std, the caller's workspace or the pool, against the CPU float64 reference.
// The quick tier samples the split variants; [gpu-exhaustive][wide] checks every one and wider rows.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "gpu_support.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_reference.h"
#include "kernel_templates/normalize/normalize_tuning.h"
#include "kvtune/kvtune.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "normalize_gpu_helpers.h"
#include "sample.h"

using namespace kvtune;
using namespace kvtune::test_normalize;

namespace {

struct Setup {
  NormMode mode;
  bool gamma, beta, mean, rstd;
  int ddof;
};
const Setup kForwardSetups[] = {
    {NormMode::standardize, false, false, true, true, 1},
    {NormMode::layernorm, true, true, true, true, 0},
    {NormMode::rmsnorm, true, false, false, true, 0},
};

struct BackwardSetup {
  NormMode mode;
  bool gamma, dgamma, dbeta, saved;
  int ddof;
};
const BackwardSetup kBackwardSetups[] = {
    {NormMode::layernorm, true, true, true, true, 0},
    {NormMode::layernorm, false, false, true, false, 0},
    {NormMode::rmsnorm, true, true, false, false, 0},
    {NormMode::rmsnorm, false, false, false, true, 0},
    {NormMode::standardize, false, false, false, true, 1},
    {NormMode::standardize, true, true, true, false, 0},
};

// A width and the alignment class its calls have (16: aligned rows; the element size: odd rows).
struct Width {
  std::int64_t cols;
  bool aligned;
};

normalize::Problem forward_problem(DType d, const Setup& s, Width w) {
  normalize::Problem p;
  p.dtype = d;
  p.mode = s.mode;
  p.cols = w.cols;
  p.align_bytes = w.aligned ? 16 : int(elem_size(d));
  p.gamma = s.gamma;
  p.beta = s.beta;
  p.mean_out = s.mean;
  p.rstd_out = s.rstd;
  return p;
}

normalize::Problem backward_problem(DType d, const BackwardSetup& s, Width w) {
  normalize::Problem p;
  p.backward = true;
  p.dtype = d;
  p.mode = s.mode;
  p.cols = w.cols;
  p.align_bytes = w.aligned ? 16 : int(elem_size(d));
  p.gamma = s.gamma;
  p.dgamma = s.dgamma;
  p.dbeta = s.dbeta;
  p.saved_stats = s.saved;
  return p;
}

// Whether the device holds all of a row's slices of the one-pass variant `c` at once (cooperative:
// co-resident blocks; cluster: at least one cluster of them).
// The same query as the launch's (kept per device and kernel: the staged form's shared memory too).
bool row_fits(const detail::LoadedKernel& kernel, const normalize::Problem& p, const normalize::Config& c) {
  if (c.cluster) {
    int clusters = 0;
    const auto g = normalize::geometry(p, c, 1);
    detail::cuda_check(kernel.active_clusters(g.grid, g.block, g.dynamic_smem, unsigned(g.cluster), &clusters),
                       "active_clusters");
    return clusters > 0;
  }
  int blocks = 0;
  detail::cuda_check(kernel.co_resident_blocks(unsigned(c.threads_per_row), 0, &blocks), "co_resident_blocks");
  return blocks >= c.splits;
}

// The split variants of `p` (a sample with the heuristic's, or all) verified by the tuner's harness
// (float64 reference kernel, poisoned outputs, every output compared) on each of `row_counts`.
template <class MakeProblem>
std::size_t check_split_variants(const test::Sample& sample, const MakeProblem& problems,
                                 const std::vector<std::int64_t>& row_counts) {
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  test::CompileMemo memo;
  std::size_t checked = 0;
  const std::vector<normalize::Problem> all = problems();
  for (int pass = 0; pass < 2; ++pass) {  // 0: gather every problem's candidates, compiled together
    if (pass == 1) memo.compile_pending();
    for (normalize::Problem p : all) {
      p.rows = row_counts.back();
      std::vector<normalize::Config> split;
      for (const auto& c : normalize::enumerate(p))
        if (c.splits > 1) split.push_back(c);
      REQUIRE_FALSE(split.empty());
      if (!sample.all()) {
        // The forward's one-pass variants (cooperative, cluster) are sampled on their own too, so
        // each forward problem checks every form it has (at least one variant of each).
        std::vector<normalize::Config> coop, cluster;
        for (const auto& c : split)
          if (c.cooperative) coop.push_back(c);
          else if (c.cluster) cluster.push_back(c);
        split = sample.apply(split, p.key());
        for (const auto* form : {&coop, &cluster}) {
          std::vector<normalize::Config> more = sample.apply(*form, p.key() + (form == &coop ? ",coop" : ",cluster"));
          if (more.empty() && !form->empty()) more.push_back((*form)[form->size() / 2]);
          for (const auto& c : more)
            if (std::find(split.begin(), split.end(), c) == split.end()) split.push_back(c);
        }
      }
      const normalize::Config h = normalize::heuristic_config(p, fingerprint.cc_major, fingerprint.name);
      if (h.splits > 1 && std::find(split.begin(), split.end(), h) == split.end()) split.push_back(h);
      const auto candidates = normalize::make_candidates(p, split, fingerprint.arch());
      if (pass == 0) {
        memo.add(candidates);
        continue;
      }
      const auto compiled = memo.compile(candidates);
      std::vector<detail::LoadedKernel> kernels;
      for (std::size_t i = 0; i < compiled.size(); ++i) {
        INFO(p.key() << " " << candidates[i].label << " " << compiled[i].message);
        REQUIRE(compiled[i].status == tuner::Status::ok);
        kernels.push_back(detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name, candidates[i].phases()));
        kernels.back().allow_dynamic_smem(candidates[i].dynamic_smem);  // the staged cluster form's two slices
      }
      for (std::int64_t rows : row_counts) {
        p.rows = rows;
        auto harness = normalize::make_harness(p, split, fingerprint.arch(), 0, stream);
        for (std::size_t i = 0; i < candidates.size(); ++i) {
          const auto verdict = harness->verify(candidates[i], kernels[i], stream);
          INFO(p.key() << " rows=" << rows << " " << candidates[i].label << ": " << verdict.message);
          if ((split[i].cooperative || split[i].cluster) && !row_fits(kernels[i], p, split[i])) {
            // A row's slices cannot all be co-resident here: refused at launch, never run.
            CHECK_FALSE(verdict.ok);
            CHECK(verdict.message.rfind(tuner::kResourcesRefused, 0) == 0);
            continue;
          }
          CHECK(verdict.ok);
          ++checked;
        }
      }
    }
  }
  cudaStreamDestroy(stream);
  return checked;
}

std::vector<normalize::Problem> forward_problems(const std::vector<Width>& widths) {
  std::vector<normalize::Problem> out;
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (const auto& s : kForwardSetups)
      for (const Width& w : widths) out.push_back(forward_problem(d, s, w));
  return out;
}

std::vector<normalize::Problem> backward_problems(const std::vector<Width>& widths) {
  std::vector<normalize::Problem> out;
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (const auto& s : kBackwardSetups)
      for (const Width& w : widths) out.push_back(backward_problem(d, s, w));
  return out;
}

// Widths: just above the one-block limit of odd 16-bit rows (65,536 two-byte vectors) and of f32
// rows of 4-byte vectors (262,144), and 2^20.
const std::vector<Width> kQuickWidths = {{65537, false}, {262145, false}, {1 << 20, true}};

}  // namespace

TEST_CASE("split rows: a sample of forward variants matches the float64 reference", "[gpu][normalize][wide]") {
  KVTUNE_REQUIRE_GPU();
  const std::size_t checked =
      check_split_variants(test::Sample{8}, [] { return forward_problems(kQuickWidths); }, {1, 5});
  WARN("verified " << checked << " (split variant, rows) pairs");
  CHECK(checked >= 3 * 3 * 3 * 2);
}

TEST_CASE("split rows: a sample of backward variants matches the float64 reference", "[gpu][normalize][wide]") {
  KVTUNE_REQUIRE_GPU();
  // 1 row: dgamma/dbeta written directly; 300 rows: groups of rows with their own partial rows.
  const std::size_t checked =
      check_split_variants(test::Sample{8}, [] { return backward_problems({{65537, false}, {1 << 18, true}}); },
                           {1, 300});
  WARN("verified " << checked << " (split variant, rows) pairs");
  CHECK(checked >= 3 * 6 * 2 * 2);
}

TEST_CASE("split rows: every split variant matches the float64 reference", "[.][gpu-exhaustive][wide]") {
  KVTUNE_REQUIRE_GPU();
  std::size_t checked = check_split_variants(
      test::kEveryVariant, [] { return forward_problems({{65537, false}, {(1 << 20) + 1, false}, {1 << 22, true}}); },
      {1, 3, 64});
  checked += check_split_variants(
      test::kEveryVariant, [] { return backward_problems({{65537, false}, {(1 << 20) + 1, false}}); }, {1, 3, 300});
  WARN("verified " << checked << " (split variant, rows) pairs");
}

namespace {

// One forward call through `context` against the CPU float64 reference: ld > cols when `pad`, in
// place when `in_place`, the caller's workspace when `own_workspace`. Returns y's bytes.
std::vector<unsigned char> check_forward_call(Context& context, DType d, const Setup& s, std::int64_t rows,
                                              std::int64_t cols, bool pad, bool in_place, bool own_workspace,
                                              double offset = 0.5, double scale = 2.0) {
  const std::size_t e = elem_size(d);
  const std::int64_t ld = pad ? cols + 5 : cols;
  const auto x = random_tensor(d, std::size_t(rows * ld), 501 + cols, offset, scale);
  const auto g = random_tensor(d, std::size_t(cols), 502, 1.0, 0.5);
  const auto b = random_tensor(d, std::size_t(cols), 503, 0.0, 0.5);
  Buffer bx(x.bytes.size()), by(x.bytes.size()), bg(g.bytes.size()), bb(b.bytes.size()), stats(std::size_t(rows) * 8);
  cudaMemcpy(bx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bg.ptr, g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bb.ptr, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  NormalizeArgs a;
  a.x = bx.ptr;
  a.y = in_place ? bx.ptr : by.ptr;
  a.rows = rows;
  a.cols = cols;
  a.ld_x = a.ld_y = ld;
  a.dtype = d;
  a.mode = s.mode;
  a.ddof = s.ddof;
  a.gamma = s.gamma ? bg.ptr : nullptr;
  a.beta = s.beta ? bb.ptr : nullptr;
  a.mean = s.mean ? stats.as<float>() : nullptr;
  a.rstd = s.rstd ? stats.as<float>(std::size_t(rows) * 4) : nullptr;
  std::unique_ptr<Buffer> workspace;
  if (own_workspace) {
    const std::size_t bytes = context.normalize_workspace_size(a);
    workspace = std::make_unique<Buffer>(bytes);
    a.workspace = workspace->ptr;
    a.workspace_bytes = bytes;
  }
  context.normalize(a);
  detail::cuda_check(cudaDeviceSynchronize(), "normalize");
  const auto ref = normalize::reference(x.values, rows, cols, ld, s.mode, 1e-5, s.ddof,
                                        s.gamma ? g.values : std::vector<double>{},
                                        s.beta ? b.values : std::vector<double>{});
  const std::string variant = context.normalize_variant(a);
  INFO(to_string(d) << " " << to_string(s.mode) << " rows=" << rows << " cols=" << cols << (pad ? " ld+5" : "")
                    << (in_place ? " in place" : "") << (own_workspace ? " own workspace" : "") << " variant "
                    << variant);
  CHECK(relative_error(d, a.y, rows, cols, ld, ref.y) < tolerance(d));
  if (s.mean) CHECK(relative_error(DType::f32, stats.ptr, rows, 1, 1, ref.mean) < 1e-5);
  if (s.rstd) CHECK(relative_error(DType::f32, stats.as<float>(std::size_t(rows) * 4), rows, 1, 1, ref.rstd) < 1e-4);
  std::vector<unsigned char> y(std::size_t(rows * ld) * e);
  cudaMemcpy(y.data(), a.y, y.size(), cudaMemcpyDeviceToHost);
  return y;
}

// One backward call through `context` against the CPU float64 closed form (the forward saving the
// statistics first when the setup reads them). Returns dx's bytes.
std::vector<unsigned char> check_backward_call(Context& context, DType d, const BackwardSetup& s, std::int64_t rows,
                                               std::int64_t cols, bool pad, bool in_place, bool own_workspace) {
  const std::int64_t ld = pad ? cols + 3 : cols;
  const auto x = random_tensor(d, std::size_t(rows * ld), 601 + cols, 0.5, 2.0);
  const auto dy = random_tensor(d, std::size_t(rows * ld), 602 + cols, 0.0, 1.0);
  const auto g = random_tensor(d, std::size_t(cols), 603, 1.0, 0.5);
  Buffer bx(x.bytes.size()), bdy(dy.bytes.size()), bdx(dy.bytes.size()), bg(g.bytes.size()), bdg(g.bytes.size()),
      bdb(g.bytes.size()), stats(std::size_t(rows) * 8);
  cudaMemcpy(bx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bdy.ptr, dy.bytes.data(), dy.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bg.ptr, g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
  std::vector<double> xv(std::size_t(rows * cols)), dyv(xv.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      xv[std::size_t(r * cols + c)] = x.values[std::size_t(r * ld + c)];
      dyv[std::size_t(r * cols + c)] = dy.values[std::size_t(r * ld + c)];
    }
  if (s.saved) {
    NormalizeArgs f;
    f.x = bx.ptr;
    f.y = bdx.ptr;  // scratch: overwritten by the backward
    f.rows = rows;
    f.cols = cols;
    f.ld_x = f.ld_y = ld;
    f.dtype = d;
    f.mode = s.mode;
    f.ddof = s.ddof;
    f.mean = s.mode == NormMode::rmsnorm ? nullptr : stats.as<float>();
    f.rstd = stats.as<float>(std::size_t(rows) * 4);
    context.normalize(f);
  }
  NormalizeBackwardArgs a;
  a.x = bx.ptr;
  a.dy = bdy.ptr;
  a.dx = in_place ? bdy.ptr : bdx.ptr;
  a.rows = rows;
  a.cols = cols;
  a.ld_x = a.ld_dy = a.ld_dx = ld;
  a.dtype = d;
  a.mode = s.mode;
  a.ddof = s.ddof;
  a.gamma = s.gamma ? bg.ptr : nullptr;
  a.dgamma = s.dgamma ? bdg.ptr : nullptr;
  a.dbeta = s.dbeta ? bdb.ptr : nullptr;
  if (s.saved) {
    a.mean = s.mode == NormMode::rmsnorm ? nullptr : stats.as<float>();
    a.rstd = stats.as<float>(std::size_t(rows) * 4);
  }
  std::unique_ptr<Buffer> workspace;
  if (own_workspace) {
    const std::size_t bytes = context.normalize_backward_workspace_size(a);
    workspace = std::make_unique<Buffer>(bytes);
    a.workspace = workspace->ptr;
    a.workspace_bytes = bytes;
  }
  context.normalize_backward(a);
  detail::cuda_check(cudaDeviceSynchronize(), "normalize_backward");
  const auto ref = normalize::reference_backward(xv, dyv, rows, cols, cols, s.mode, 1e-5, s.ddof,
                                                 s.gamma ? g.values : std::vector<double>{});
  INFO(to_string(d) << " " << to_string(s.mode) << " rows=" << rows << " cols=" << cols << (pad ? " ld+3" : "")
                    << (in_place ? " dx=dy" : "") << (s.saved ? " saved" : " recomputed") << " variant "
                    << context.normalize_backward_variant(a));
  const double tol = d == DType::f32 ? 1e-4 : tolerance(d);
  CHECK(relative_error(d, a.dx, rows, cols, ld, ref.dx) < tol);
  if (s.dgamma) CHECK(relative_error(d, bdg.ptr, 1, cols, cols, ref.dgamma) < tol);
  if (s.dbeta) CHECK(relative_error(d, bdb.ptr, 1, cols, cols, ref.dbeta) < tol);
  std::vector<unsigned char> out(std::size_t(rows * ld) * elem_size(d));
  cudaMemcpy(out.data(), a.dx, out.size(), cudaMemcpyDeviceToHost);
  return out;
}

}  // namespace

TEST_CASE("split rows: heuristic calls, every mode and dtype, ld, in place, caller workspace, deterministic",
          "[gpu][normalize][wide]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = "";
  o.policy = Policy::heuristic;
  Context context(o);
  // Each setup with a dtype that rotates (every dtype in each kind of call): just above the
  // one-block limit (odd rows: element-wide vectors), and one row beyond 2^20.
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  for (std::size_t i = 0; i < std::size(kForwardSetups); ++i) {
    check_forward_call(context, dtypes[i % 3], kForwardSetups[i], 3, 65537, false, false, false);
    check_forward_call(context, dtypes[(i + 1) % 3], kForwardSetups[i], 1, (1 << 20) + 7, true, true, true);
  }
  // A row of 2^22 + 3 f32 and of 2^22 bf16 (the merge phase: more than 32 slices a row), and many
  // wide rows; each call twice gives the same bits.
  for (const auto& s : kForwardSetups) {
    const auto first = check_forward_call(context, DType::f32, s, 2, (1 << 22) + 3, false, false, true);
    CHECK(first == check_forward_call(context, DType::f32, s, 2, (1 << 22) + 3, false, false, false));
  }
  check_forward_call(context, DType::bf16, kForwardSetups[1], 1, 1 << 22, false, true, false);
  check_forward_call(context, DType::bf16, kForwardSetups[2], 96, 1 << 17, true, false, false);
  // 64 MiB of x, in place and strided (row chunks: the sampled and exhaustive variant tests).
  check_forward_call(context, DType::f32, kForwardSetups[1], 64, (1 << 18) + 1, true, true, false);
  check_forward_call(context, DType::f32, kForwardSetups[0], 67, (1 << 18) + 1, false, false, true);
  // |mean| >> std: the shifted statistics stay exact across slices.
  check_forward_call(context, DType::f32, kForwardSetups[1], 2, 1 << 20, false, false, false, 1000.0, 0.01);
  for (std::size_t i = 0; i < std::size(kBackwardSetups); ++i) {
    check_backward_call(context, i % 2 ? DType::bf16 : DType::f32, kBackwardSetups[i], 2, 65537, false, false, false);
    check_backward_call(context, i % 2 ? DType::f32 : DType::bf16, kBackwardSetups[i], 1, (1 << 20) + 1, true, true, true);
  }
  const auto first = check_backward_call(context, DType::f32, kBackwardSetups[0], 40, 1 << 18, true, false, true);
  CHECK(first == check_backward_call(context, DType::f32, kBackwardSetups[0], 40, 1 << 18, true, false, false));
  check_backward_call(context, DType::bf16, kBackwardSetups[5], 2, (1 << 22) + 1, false, false, false);
  // A workspace that is too small is refused, naming the field.
  NormalizeArgs a;
  Buffer x(std::size_t(1) << 22), small(256);
  a.x = a.y = x.ptr;
  a.rows = 1;
  a.cols = 1 << 20;
  a.workspace = small.ptr;
  a.workspace_bytes = 16;
  REQUIRE(context.normalize_workspace_size(a) > 16);
  try {
    context.normalize(a);
    FAIL("a 16-byte workspace was accepted");
  } catch (const Error& e) {
    CHECK(e.context().field == "workspace_bytes");
  }
}

TEST_CASE("split rows: tuned calls of rows no single block holds", "[gpu][normalize][wide]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = "";
  o.policy = Policy::tune;
  Context context(o);
  check_forward_call(context, DType::f32, kForwardSetups[1], 2, 1 << 20, false, false, false);
  check_forward_call(context, DType::bf16, kForwardSetups[2], 2, (1 << 21) + 1, false, false, false);
  check_backward_call(context, DType::bf16, kBackwardSetups[0], 4, 1 << 20, false, false, false);
  CHECK(context.counters().tunes == 4);  // three problems and the forward that saved statistics for the backward
}

namespace {

struct OnePassRun {
  std::vector<unsigned char> y, stats;
};

// One launch of the one-pass (cooperative or cluster) variant `c` (compiled for the problem of these arguments) on rows of
// `cols` (ld = cols + 5 when `pad`, in place when `in_place`), against the CPU float64 reference.
OnePassRun check_one_pass_launch(const detail::LoadedKernel& kernel, const normalize::Problem& p, const normalize::Config& c,
                          DType d, const Setup& s, std::int64_t rows, std::int64_t cols, bool pad, bool in_place) {
  const std::int64_t ld = pad ? cols + 5 : cols;
  const auto x = random_tensor(d, std::size_t(rows * ld), 701 + cols, 0.5, 2.0);
  const auto g = random_tensor(d, std::size_t(cols), 702, 1.0, 0.5);
  const auto b = random_tensor(d, std::size_t(cols), 703, 0.0, 0.5);
  Buffer bx(x.bytes.size()), by(x.bytes.size()), bg(g.bytes.size()), bb(b.bytes.size()), stats(std::size_t(rows) * 8);
  cudaMemcpy(bx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bg.ptr, g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bb.ptr, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemset(by.ptr, 0xFF, x.bytes.size());
  cudaMemset(stats.ptr, 0xFF, std::size_t(rows) * 8);
  const auto g_shape = normalize::geometry(p, c, rows);
  Buffer workspace(g_shape.workspace_bytes);
  cudaMemset(workspace.ptr, 0x5A, g_shape.workspace_bytes);  // counters are the launch's to zero
  void* y = in_place ? bx.ptr : by.ptr;
  normalize::LaunchArgs a{bx.ptr,
                          y,
                          s.gamma ? bg.ptr : nullptr,
                          s.beta ? bb.ptr : nullptr,
                          s.mean ? stats.as<float>() : nullptr,
                          s.rstd ? stats.as<float>(std::size_t(rows) * 4) : nullptr,
                          rows,
                          ld,
                          ld,
                          1e-5f,
                          s.ddof,
                          workspace.ptr};
  INFO(to_string(d) << " " << to_string(s.mode) << " rows=" << rows << " cols=" << cols << (pad ? " ld+5" : "")
                    << (in_place ? " in place" : "") << " " << c.label());
  REQUIRE(normalize::launch(kernel, p, c, a, nullptr) == cudaSuccess);
  detail::cuda_check(cudaDeviceSynchronize(), "one-pass normalize");
  const auto ref = normalize::reference(x.values, rows, cols, ld, s.mode, 1e-5, s.ddof,
                                        s.gamma ? g.values : std::vector<double>{},
                                        s.beta ? b.values : std::vector<double>{});
  CHECK(relative_error(d, y, rows, cols, ld, ref.y) < tolerance(d));
  if (s.mean) CHECK(relative_error(DType::f32, stats.ptr, rows, 1, 1, ref.mean) < 1e-5);
  if (s.rstd) CHECK(relative_error(DType::f32, stats.as<float>(std::size_t(rows) * 4), rows, 1, 1, ref.rstd) < 1e-4);
  OnePassRun run;
  run.y.resize(x.bytes.size());
  run.stats.resize(std::size_t(rows) * 8);
  cudaMemcpy(run.y.data(), y, run.y.size(), cudaMemcpyDeviceToHost);
  cudaMemcpy(run.stats.data(), stats.ptr, run.stats.size(), cudaMemcpyDeviceToHost);
  return run;
}

// The variants of `form` (of `p`'s space) with the fewest and the most slices a row.
std::vector<normalize::Config> fewest_and_most(const std::vector<normalize::Config>& form) {
  REQUIRE_FALSE(form.empty());
  const auto by_splits = [](const normalize::Config& a, const normalize::Config& b) { return a.splits < b.splits; };
  return {*std::min_element(form.begin(), form.end(), by_splits), *std::max_element(form.begin(), form.end(), by_splits)};
}

struct OnePassCase {
  std::int64_t rows, cols;
  bool pad, in_place;
};

struct OnePassCounts {
  std::size_t launched = 0, refused = 0;
};

// Every forward setup with every case, the dtype rotating (each dtype meets every setup and every
// case): the variants `pick(problem, dtype, case)` chooses, each launched twice against the float64
// reference and bitwise against itself or, where the device cannot hold one row's slices at once,
// refused at launch with `refusal` (never run without the guarantee).
template <class Pick>
OnePassCounts check_one_pass_cases(const std::vector<OnePassCase>& cases, Pick pick, cudaError_t refusal) {
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  test::CompileMemo memo;
  OnePassCounts n;
  for (int pass = 0; pass < 2; ++pass) {  // 0: every variant queued, compiled together
    if (pass == 1) memo.compile_pending();
    for (std::size_t si = 0; si < std::size(kForwardSetups); ++si)
      for (std::size_t ci = 0; ci < cases.size(); ++ci) {
        const DType d = std::array<DType, 3>{DType::f32, DType::f16, DType::bf16}[(si + ci) % 3];
        const Setup& s = kForwardSetups[si];
        const OnePassCase& k = cases[ci];
        normalize::Problem p = forward_problem(d, s, {k.cols, !k.pad && k.cols % 8 == 0});
        p.rows = normalize::rows_bucket(k.rows);
        INFO(p.key());
        const std::vector<normalize::Config> chosen = pick(p, d, k);
        const auto candidates = normalize::make_candidates(p, chosen, fingerprint.arch());
        if (pass == 0) {
          memo.add(candidates);
          continue;
        }
        const auto compiled = memo.compile(candidates);
        for (std::size_t i = 0; i < chosen.size(); ++i) {
          INFO(candidates[i].label << " " << compiled[i].message);
          REQUIRE(compiled[i].status == tuner::Status::ok);
          const auto kernel = detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name, candidates[i].phases());
          kernel.allow_dynamic_smem(candidates[i].dynamic_smem);  // the staged cluster form's two slices
          if (!row_fits(kernel, p, chosen[i])) {
            normalize::LaunchArgs a{};
            a.rows = k.rows;
            Buffer workspace(normalize::geometry(p, chosen[i], k.rows).workspace_bytes);
            a.workspace = workspace.ptr;
            CHECK(normalize::launch(kernel, p, chosen[i], a, nullptr) == refusal);
            ++n.refused;
            continue;
          }
          const OnePassRun first = check_one_pass_launch(kernel, p, chosen[i], d, s, k.rows, k.cols, k.pad, k.in_place);
          const OnePassRun second = check_one_pass_launch(kernel, p, chosen[i], d, s, k.rows, k.cols, k.pad, k.in_place);
          CHECK(first.y == second.y);  // bitwise, run to run
          CHECK(first.stats == second.stats);
          ++n.launched;
        }
      }
  }
  return n;
}

}  // namespace

TEST_CASE("split rows: the cooperative one-pass form matches the float64 reference, in place, ld, deterministic",
          "[gpu][normalize][wide]") {
  KVTUNE_REQUIRE_GPU();
  // Odd rows (element-wide vectors), padded in place; many rows (several rounds of the row slots);
  // an odd row of 1.5 Mi (more than 32 slices: the block-wide merge).
  const std::vector<OnePassCase> cases = {
      {3, 65537, false, false}, {5, (1 << 20) + 7, true, true}, {300, 1 << 16, false, true}, {2, (3 << 19) + 1, true, false}};
  const auto n = check_one_pass_cases(
      cases,
      [](const normalize::Problem& p, DType, const OnePassCase&) {
        std::vector<normalize::Config> coop;
        for (const auto& c : normalize::enumerate(p))
          if (c.cooperative) coop.push_back(c);
        return fewest_and_most(coop);
      },
      cudaErrorCooperativeLaunchTooLarge);
  WARN("checked " << n.launched << " cooperative launches (twice each); " << n.refused
                  << " variants refused: a row's slices exceed what the device holds at once");
  CHECK(n.launched >= 3 * 4);
}

TEST_CASE("split rows: the cluster one-pass form matches the float64 reference, in place, ld, deterministic",
          "[gpu][normalize][wide]") {
  KVTUNE_REQUIRE_GPU();
  // Odd rows (element-wide vectors, a short last slice); many rows in place; an odd padded row of
  // up to 7 slices in place; rows of one 16-bit slice and a half.
  const std::vector<OnePassCase> cases = {
      {3, 65537, false, false}, {300, 1 << 16, false, true}, {5, 100003, true, true}, {1000, 49152, false, false}};
  // The cluster variants with the fewest and the most slices a row, in registers and staged (the
  // staged ones need vectors of 4 bytes or more: none for unaligned 16-bit rows).
  const auto n = check_one_pass_cases(
      cases,
      [](const normalize::Problem& p, DType d, const OnePassCase& k) {
        std::vector<normalize::Config> chosen;
        for (normalize::Keep keep : {normalize::Keep::registers, normalize::Keep::staged}) {
          if (keep == normalize::Keep::staged && elem_size(d) * (k.cols % 8 == 0 && !k.pad ? 8 : 1) < 4) continue;
          std::vector<normalize::Config> cluster;
          for (const auto& c : normalize::enumerate(p))
            if (c.cluster && c.keep == keep) cluster.push_back(c);
          for (const auto& c : fewest_and_most(cluster)) chosen.push_back(c);
        }
        return chosen;
      },
      cudaErrorLaunchOutOfResources);  // before sm_90, or a cluster larger than the device holds
  WARN("checked " << n.launched << " cluster launches (twice each); " << n.refused
                  << " variants refused: no cluster launch, or a cluster larger than the device holds");
  if (detail::read_fingerprint(detail::current_device()).cc_major >= 9) CHECK(n.launched >= 3 * 4);
}
