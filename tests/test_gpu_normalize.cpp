// [gpu] tests of the normalize family: every variant against the float64 reference on random data,
// odd sizes, misaligned pointers, in place, |mean| >> std, and tune -> cache -> dispatch.
// Each test skips, saying why, where there is no GPU.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <unistd.h>

#include "gpu_support.h"
#include "normalize_gpu_helpers.h"
#include "normalize_variants.h"
#include "sample.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_reference.h"
#include "kernel_templates/normalize/normalize_tuning.h"
#include "kvtune/kvtune.h"
#include "core/cuda_check.h"
#include "core/device.h"

using namespace kvtune;
using namespace kvtune::test_normalize;

namespace {

std::string arch_of_current_device() { return detail::read_fingerprint(detail::current_device()).arch(); }

struct ModeSetup {
  NormMode mode;
  bool gamma, beta, mean, rstd;
  int ddof;
};
const ModeSetup kModes[] = {
    {NormMode::standardize, false, false, true, true, 1},  // torch.std semantics, both stats
    {NormMode::layernorm, true, true, true, true, 0},
    {NormMode::rmsnorm, true, false, false, true, 0},
};

}  // namespace

TEST_CASE("the float64 reference kernel matches the CPU reference", "[gpu][normalize]") {
  KVTUNE_REQUIRE_GPU();
  const std::string arch = arch_of_current_device();
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (const auto& m : kModes)
      for (std::int64_t cols : {1, 3, 37, 128, 1000, 4097, 16384, 65536})
        for (std::int64_t rows : {1, 7, 64}) {
          normalize::Problem p;
          p.dtype = d;
          p.mode = m.mode;
          p.cols = cols;
          p.rows = rows;
          p.gamma = m.gamma;
          p.beta = m.beta;
          const auto x = random_tensor(d, std::size_t(rows * cols), 11 + cols, 0.5, 2.0);
          const auto g = random_tensor(d, std::size_t(cols), 12, 1.0, 0.5);
          const auto b = random_tensor(d, std::size_t(cols), 13, 0.0, 0.5);
          Buffer dx(x.bytes.size()), dy(std::size_t(rows * cols) * 4), dg(g.bytes.size()), db(b.bytes.size()),
              dmean(std::size_t(rows) * 4), drstd(std::size_t(rows) * 4);
          cudaMemcpy(dx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(dg.ptr, g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(db.ptr, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
          normalize::LaunchArgs a{dx.ptr, dy.ptr, m.gamma ? dg.ptr : nullptr, m.beta ? db.ptr : nullptr,
                                  dmean.as<float>(), drstd.as<float>(), rows, cols, cols, 1e-5f, m.ddof};
          normalize::run_reference(p, arch, a, nullptr);
          detail::cuda_check(cudaDeviceSynchronize(), "reference kernel");
          const auto ref = normalize::reference(x.values, rows, cols, cols, m.mode, 1e-5, m.ddof,
                                                m.gamma ? g.values : std::vector<double>{},
                                                m.beta ? b.values : std::vector<double>{});
          INFO(p.key() << " rows=" << rows);
          CHECK(relative_error(DType::f32, dy.ptr, rows, cols, cols, ref.y) < 1e-6);
          CHECK(relative_error(DType::f32, drstd.ptr, rows, 1, 1, ref.rstd) < 1e-6);
        }
}

// Every dtype, mode and width, aligned and scalar-only; the variants (all, or `sample`'s choice with
// the heuristic's) on 1, 7 and 4096 rows.
static void check_normalize_variants(const test::Sample& sample,
                                     std::initializer_list<DType> dtypes = {DType::f32, DType::f16, DType::bf16}) {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  std::size_t checked = 0, compiled_total = 0;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  // A sample: every problem's candidates first, compiled together (test::CompileMemo), then checked.
  test::CompileMemo memo;
  for (int pass = sample.all() ? 1 : 0; pass < 2; ++pass) {  // 0: gather a sample's candidates
    const bool collecting = pass == 0;
    if (pass == 1 && !sample.all()) memo.compile_pending();
    for (DType d : dtypes)
      for (const auto& m : kModes)
        for (std::int64_t cols : {1, 3, 37, 128, 1000, 4097, 16384, 65536})
          for (int align : {16, int(elem_size(d))}) {
            if (align == int(elem_size(d)) && cols != 37 && cols != 4097) continue;  // scalar-only spaces: two widths
            normalize::Problem p;
            p.dtype = d;
            p.mode = m.mode;
            p.cols = cols;
            p.align_bytes = align;
            p.gamma = m.gamma;
            p.beta = m.beta;
            p.mean_out = m.mean;
            p.rstd_out = m.rstd;
            auto configs = normalize::enumerate(p);
            if (!sample.all()) {
              const auto heuristic = normalize::heuristic_config(p, fingerprint.cc_major, fingerprint.name);
              configs = sample.apply(configs, p.key(),
                                     std::size_t(std::find(configs.begin(), configs.end(), heuristic) - configs.begin()));
            }
            const auto candidates = normalize::make_candidates(p, configs, fingerprint.arch());
            if (collecting) {
              memo.add(candidates);
              continue;
            }
            const auto compiled = sample.all() ? tuner::compile_all(candidates, 0) : memo.compile(candidates);
            compiled_total += compiled.size();
            const auto kernels = load_variants(p, candidates, compiled, fingerprint);
            for (std::int64_t rows : {1, 7, 4096})
              checked += verify_variants(p, rows, configs, candidates, kernels, fingerprint, stream);
          }
  }
  cudaStreamDestroy(stream);
  WARN("verified " << checked << " (variant, rows) pairs; " << compiled_total << " variants compiled");
  CHECK(checked > 10000 / sample.every);
}

TEST_CASE("a sample of normalize variants matches the float64 reference", "[gpu][normalize]") {
  check_normalize_variants(test::Sample{32});
}

// One case a dtype, so that the tier runner runs them side by side (together: 507 s on an H100).
TEST_CASE("every f32 normalize variant matches the float64 reference", "[.][gpu-exhaustive][exhaustive-2][normalize]") {
  check_normalize_variants(test::kEveryVariant, {DType::f32});
}

TEST_CASE("every f16 normalize variant matches the float64 reference", "[.][gpu-exhaustive][exhaustive-2][normalize]") {
  check_normalize_variants(test::kEveryVariant, {DType::f16});
}

TEST_CASE("every bf16 normalize variant matches the float64 reference", "[.][gpu-exhaustive][exhaustive-2][normalize]") {
  check_normalize_variants(test::kEveryVariant, {DType::bf16});
}

namespace {

// Runs one call through a Context on caller buffers at the given element offsets and checks it
// against the CPU reference.
void check_call(Context& context, DType d, const ModeSetup& m, std::int64_t rows, std::int64_t cols,
                std::size_t x_offset, std::size_t y_offset, bool in_place, double offset, double scale) {
  const std::size_t e = elem_size(d);
  const auto x = random_tensor(d, std::size_t(rows * cols), 77 + cols, offset, scale);
  const auto g = random_tensor(d, std::size_t(cols), 78, 1.0, 0.5);
  const auto b = random_tensor(d, std::size_t(cols), 79, 0.0, 0.5);
  Buffer dx(x.bytes.size() + 64), dy(x.bytes.size() + 64), dg(g.bytes.size() + 64), db(b.bytes.size() + 64),
      dstats(std::size_t(rows) * 8 + 64);
  char* xp = dx.as<char>(x_offset * e);
  char* yp = in_place ? xp : dy.as<char>(y_offset * e);
  char* gp = dg.as<char>(x_offset * e);
  char* bp = db.as<char>(x_offset * e);
  cudaMemcpy(xp, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(gp, g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bp, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  NormalizeArgs a;
  a.x = xp;
  a.y = yp;
  a.rows = rows;
  a.cols = cols;
  a.dtype = d;
  a.mode = m.mode;
  a.ddof = m.ddof;
  a.gamma = m.gamma ? gp : nullptr;
  a.beta = m.beta ? bp : nullptr;
  a.mean = m.mean ? dstats.as<float>() : nullptr;
  a.rstd = m.rstd ? dstats.as<float>(std::size_t(rows) * 4) : nullptr;
  context.normalize(a);
  detail::cuda_check(cudaDeviceSynchronize(), "normalize");
  const auto ref = normalize::reference(x.values, rows, cols, cols, m.mode, 1e-5, m.ddof,
                                        m.gamma ? g.values : std::vector<double>{},
                                        m.beta ? b.values : std::vector<double>{});
  INFO(to_string(d) << " " << to_string(m.mode) << " rows=" << rows << " cols=" << cols << " x+" << x_offset
                    << " y+" << y_offset << (in_place ? " in place" : "") << " variant "
                    << context.normalize_variant(a));
  CHECK(relative_error(d, yp, rows, cols, cols, ref.y) < tolerance(d));
  if (m.mean) CHECK(relative_error(DType::f32, dstats.ptr, rows, 1, 1, ref.mean) < 1e-5);
  if (m.rstd) CHECK(relative_error(DType::f32, dstats.as<float>(std::size_t(rows) * 4), rows, 1, 1, ref.rstd) < 1e-4);
}

}  // namespace

TEST_CASE("tuned calls: misaligned pointers, in place, large mean", "[gpu][normalize]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = "";
  o.policy = Policy::tune;
  Context context(o);
  // Each mode meets every dtype across the four cases (dtypes rotate: every call tunes, and a tune
  // compiles the problem's space, so the full product took a quarter of the quick tier's budget).
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  int i = 0;
  for (const auto& m : kModes) {
    check_call(context, dtypes[i++ % 3], m, 7, 1000, 1, 1, false, 0.5, 2.0);   // misaligned by one element
    check_call(context, dtypes[i++ % 3], m, 33, 37, 1, 3, false, 0.5, 2.0);    // odd size, odd offsets
    check_call(context, dtypes[i++ % 3], m, 64, 4097, 0, 0, true, 0.5, 2.0);   // in place
    check_call(context, dtypes[i++ % 3], m, 4096, 128, 0, 0, false, 0.5, 2.0); // aligned, vectorized
    ++i;  // the next mode starts one dtype later
  }
  // |mean| >> std: mean 1e4, std 1e-2 (f32: the 16-bit types cannot hold such rows).
  for (const auto& m : {kModes[0], kModes[1]}) {
    check_call(context, DType::f32, m, 64, 1000, 0, 0, false, 1e4, 1e-2);
    check_call(context, DType::f32, m, 16, 16384, 0, 0, false, 1e4, 1e-2);
  }
  const auto c = context.counters();
  CHECK(c.tunes > 0);
  CHECK(c.variants_rejected == 0);
}

TEST_CASE("heuristic and cached policies dispatch without benchmarking", "[gpu][normalize]") {
  KVTUNE_REQUIRE_GPU();
  for (Policy policy : {Policy::heuristic, Policy::cached}) {
    ContextOptions o;
    o.cache_path = "";
    o.policy = policy;
    Context context(o);
    check_call(context, DType::bf16, kModes[1], 100, 768, 0, 0, false, 0.5, 2.0);
    check_call(context, DType::bf16, kModes[1], 100, 768, 0, 0, false, 0.5, 2.0);
    const auto c = context.counters();
    CHECK(c.tunes == 0);
    CHECK(c.heuristic_uses == 1);
    CHECK(c.compiles == 1);
    CHECK(c.table_hits >= 2);  // normalize_variant() and the second call
  }
}

// End to end across processes: the child tunes into a cache file; a second child finds the winner
// there and compiles nothing.
TEST_CASE("a second process dispatches from the cache with zero compilations", "[gpu][normalize]") {
  KVTUNE_REQUIRE_GPU();
  const auto dir = std::filesystem::temp_directory_path() / ("kvtune-e2e-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cache = (dir / "cache.sqlite").string();
  // Beside this test binary, wherever the build folder was moved.
  const std::string child = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kvtune_cache_child").string();
  auto run = [&](const std::string& tag) {
    const auto out = (dir / (tag + ".txt")).string();
    const std::string command = "KVTUNE_POLICY=tune KVTUNE_CACHE=" + cache + " " + child + " > " + out;
    REQUIRE(std::system(command.c_str()) == 0);
    std::ifstream in(out);
    std::string line, all;
    while (std::getline(in, line)) all += line + "\n";
    return all;
  };
  const std::string first = run("first");
  const std::string second = run("second");
  WARN("first process:\n" << first << "second process:\n" << second);
  CHECK_THAT(first, Catch::Contains("tunes=1"));
  CHECK_THAT(second, Catch::Contains("tunes=0"));
  CHECK_THAT(second, Catch::Contains("compiles=0"));
  CHECK_THAT(second, Catch::Contains("cache_hits=1"));
  // Same variant in both.
  const auto variant = [](const std::string& s) { return s.substr(s.find("variant=")); };
  CHECK(variant(first).substr(0, variant(first).find('\n')) == variant(second).substr(0, variant(second).find('\n')));
  std::filesystem::remove_all(dir);
}

TEST_CASE("stream capture: loaded problems are captured, others fail without breaking the capture",
          "[gpu][normalize]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = "";
  o.policy = Policy::heuristic;
  Context context(o);
  const std::int64_t rows = 256, cols = 512;
  const auto x = random_tensor(DType::f32, std::size_t(rows * cols), 5, 0.5, 2.0);
  Buffer dx(x.bytes.size()), dy(x.bytes.size());
  cudaMemcpy(dx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  NormalizeArgs a;
  a.x = dx.ptr;
  a.y = dy.ptr;
  a.rows = rows;
  a.cols = cols;
  a.mode = NormMode::layernorm;
  context.normalize(a, stream);  // loads the variant
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  cudaMemset(dy.ptr, 0xFF, x.bytes.size());

  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  context.normalize(a, stream);
  NormalizeArgs other = a;
  other.cols = 500;  // never seen: must fail, not tune
  CHECK_THROWS_WITH(context.normalize(other, stream), Catch::Contains("being captured"));
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);  // the capture survived
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  const auto ref = normalize::reference(x.values, rows, cols, cols, NormMode::layernorm, 1e-5, 0, {}, {});
  CHECK(relative_error(DType::f32, dy.ptr, rows, cols, cols, ref.y) < 1e-5);
  CHECK(context.counters().compiles == 1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Every mode, affine and stats combination on widths 256 and 1024: the FULL variants (all, or
// `sample`'s choice).
static void check_full_variants(const test::Sample& sample) {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  std::size_t checked = 0;
  test::CompileMemo memo;  // a sample: compiled together first, as above
  for (int pass = sample.all() ? 1 : 0; pass < 2; ++pass) {  // 0: gather a sample's candidates
    const bool collecting = pass == 0;
    if (pass == 1 && !sample.all()) memo.compile_pending();
    for (DType d : {DType::f32, DType::bf16})
      for (NormMode mode : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm})
        for (int affine = 0; affine < 4; ++affine)
          for (bool stats : {false, true})
            for (std::int64_t cols : {256, 1024}) {
              normalize::Problem p;
              p.dtype = d;
              p.mode = mode;
              p.cols = cols;
              p.gamma = (affine & 1) != 0;
              p.beta = (affine & 2) != 0;
              p.mean_out = p.rstd_out = stats;
              std::vector<normalize::Config> full;
              for (const auto& c : normalize::enumerate(p))
                if (c.keep == normalize::Keep::registers &&
                    std::int64_t(c.items) * c.threads_per_row * (c.vector_bytes / int(elem_size(d))) == cols)
                  full.push_back(c);
              full = sample.apply(full, p.key());
              const auto candidates = normalize::make_candidates(p, full, fingerprint.arch());
              if (collecting) {
                memo.add(candidates);
                continue;
              }
              const auto compiled = sample.all() ? tuner::compile_all(candidates, 0) : memo.compile(candidates);
              const auto kernels = load_variants(p, candidates, compiled, fingerprint);
              for (std::int64_t rows : {1000, 7})
                checked += verify_variants(p, rows, full, candidates, kernels, fingerprint, stream);
            }
  }
  cudaStreamDestroy(stream);
  WARN("verified " << checked << " (FULL variant, rows) pairs");
  CHECK(checked > 500 / sample.every);
}

TEST_CASE("a sample of the variants whose register slices cover rows exactly (FULL), every mode, affine and stats",
          "[gpu][normalize]") {
  check_full_variants(test::Sample{16});
}

TEST_CASE("rows covered exactly by register slices (FULL) in every mode, affine and stats combination",
          "[.][gpu-exhaustive][exhaustive-3][normalize]") {
  check_full_variants(test::kEveryVariant);
}

// ---------------------------------------------------------------------------------------------
// Backward.

namespace {

struct BackwardSetup {
  NormMode mode;
  bool gamma, dgamma, dbeta, saved;
  int ddof;
};
const BackwardSetup kBackwardSetups[] = {
    {NormMode::layernorm, true, true, true, true, 0},     // training LayerNorm, saved stats
    {NormMode::layernorm, false, false, true, false, 0},  // no gamma, dbeta only, recomputed
    {NormMode::rmsnorm, true, true, false, true, 0},
    {NormMode::rmsnorm, false, false, false, false, 0},
    {NormMode::standardize, false, false, false, true, 1},  // the packet standardization, torch.std
    {NormMode::standardize, true, true, true, false, 0},
};

normalize::Problem backward_problem(DType d, const BackwardSetup& s, std::int64_t cols, int align) {
  normalize::Problem p;
  p.backward = true;
  p.dtype = d;
  p.mode = s.mode;
  p.cols = cols;
  p.align_bytes = align;
  p.gamma = s.gamma;
  p.dgamma = s.dgamma;
  p.dbeta = s.dbeta;
  p.saved_stats = s.saved;
  return p;
}

// One backward call through a Context on caller buffers, against the CPU float64 closed form
// (itself checked against finite differences in the CPU tests). ld > cols when `pad`, dx == dy
// when `in_place`, the caller's workspace when `own_workspace`. Returns the dgamma bytes.
std::vector<unsigned char> check_backward_call(Context& context, DType d, const BackwardSetup& s, std::int64_t rows,
                                               std::int64_t cols, bool pad, bool in_place, bool own_workspace,
                                               double x_offset = 0.5, double x_scale = 2.0) {
  const std::size_t e = elem_size(d);
  const std::int64_t ld = pad ? cols + 3 : cols;
  const auto x = random_tensor(d, std::size_t(rows * ld), 91 + cols, x_offset, x_scale);
  const auto dy = random_tensor(d, std::size_t(rows * ld), 92 + cols, 0.0, 1.0);
  const auto g = random_tensor(d, std::size_t(cols), 93, 1.0, 0.5);
  Buffer bx(x.bytes.size()), bdy(dy.bytes.size()), bdx(dy.bytes.size()), bg(g.bytes.size()), bdg(g.bytes.size()),
      bdb(g.bytes.size()), bstats(std::size_t(rows) * 8);
  cudaMemcpy(bx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bdy.ptr, dy.bytes.data(), dy.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(bg.ptr, g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
  // The saved statistics as the forward writes them.
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
    f.mean = s.mode == NormMode::rmsnorm ? nullptr : bstats.as<float>();
    f.rstd = bstats.as<float>(std::size_t(rows) * 4);
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
    a.mean = s.mode == NormMode::rmsnorm ? nullptr : bstats.as<float>();
    a.rstd = bstats.as<float>(std::size_t(rows) * 4);
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
  // Relative L2 against float64: the forward's tolerance, 10x for f32 (the row sums cancel).
  const double tol = (d == DType::f32 ? 1e-4 : tolerance(d)) * (s.mode == NormMode::rmsnorm && cols == 1 ? 100 : 1);
  CHECK(relative_error(d, a.dx, rows, cols, ld, ref.dx) < tol);
  if (s.dgamma) CHECK(relative_error(d, bdg.ptr, 1, cols, cols, ref.dgamma) < tol);
  if (s.dbeta) CHECK(relative_error(d, bdb.ptr, 1, cols, cols, ref.dbeta) < tol);
  std::vector<unsigned char> dgamma(g.bytes.size());
  cudaMemcpy(dgamma.data(), s.dgamma ? bdg.ptr : bdb.ptr, dgamma.size(), cudaMemcpyDeviceToHost);
  return dgamma;
}

}  // namespace

TEST_CASE("backward: the float64 reference kernel matches the CPU closed form", "[gpu][normalize][backward]") {
  KVTUNE_REQUIRE_GPU();
  const std::string arch = arch_of_current_device();
  for (DType d : {DType::f32, DType::bf16})
    for (const auto& s : kBackwardSetups)
      for (std::int64_t cols : {1, 37, 1024}) {
        const std::int64_t rows = 9;
        const auto x = random_tensor(d, std::size_t(rows * cols), 5, 0.5, 2.0);
        const auto dy = random_tensor(d, std::size_t(rows * cols), 6, 0.0, 1.0);
        const auto g = random_tensor(d, std::size_t(cols), 7, 1.0, 0.5);
        Buffer bx(x.bytes.size()), bdy(dy.bytes.size()), bg(g.bytes.size()), dx(std::size_t(rows * cols) * 4),
            dg(std::size_t(cols) * 4), db(std::size_t(cols) * 4);
        cudaMemcpy(bx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
        cudaMemcpy(bdy.ptr, dy.bytes.data(), dy.bytes.size(), cudaMemcpyHostToDevice);
        cudaMemcpy(bg.ptr, g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
        const auto p = backward_problem(d, s, cols, int(elem_size(d)));
        normalize::BackwardLaunchArgs a{bx.ptr, bdy.ptr, dx.ptr, s.gamma ? bg.ptr : nullptr, nullptr, nullptr,
                                        dg.ptr, db.ptr,  nullptr, rows,  cols,  cols,  cols, 1e-5f, s.ddof};
        normalize::run_backward_reference(p, arch, a, nullptr);
        const auto ref = normalize::reference_backward(x.values, dy.values, rows, cols, cols, s.mode, 1e-5, s.ddof,
                                                       s.gamma ? g.values : std::vector<double>{});
        INFO(p.key());
        CHECK(relative_error(DType::f32, dx.ptr, rows, cols, cols, ref.dx) < 1e-6);
        CHECK(relative_error(DType::f32, dg.ptr, 1, cols, cols, ref.dgamma) < 1e-6);
        CHECK(relative_error(DType::f32, db.ptr, 1, cols, cols, ref.dbeta) < 1e-6);
      }
}

// Every dtype, setup and width class (1, odd, 2^k, 2^k + 1, wide), aligned and scalar-only; the
// variants (all, or `sample`'s choice with the heuristic's) on 1, 7 and 3000 rows.
// Which variants of the backward space a check takes: all, all but the cooperative twins of the
// one-block variants, or only those twins (the exhaustive parts split the space that way).
enum class Forms { all, tree, coop };

static void check_backward_variants(const test::Sample& sample,
                                    std::initializer_list<DType> dtypes = {DType::f32, DType::f16, DType::bf16},
                                    std::initializer_list<std::int64_t> widths = {1, 37, 1024, 1025, 65536},
                                    Forms forms = Forms::all) {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  std::size_t checked = 0;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  test::CompileMemo memo;
  for (int pass = sample.all() ? 1 : 0; pass < 2; ++pass) {
    const bool collecting = pass == 0;
    if (pass == 1 && !sample.all()) memo.compile_pending();
    for (DType d : dtypes)
      for (const auto& s : kBackwardSetups)
        for (std::int64_t cols : widths)
          for (int align : {16, int(elem_size(d))}) {
            if (align == int(elem_size(d)) && cols != 37 && cols != 1025) continue;
            auto p = backward_problem(d, s, cols, align);
            p.rows = 4096;  // the space of the largest row count checked
            auto configs = normalize::enumerate(p);
            if (forms != Forms::all) {
              const bool want_coop = forms == Forms::coop;
              configs.erase(std::remove_if(configs.begin(), configs.end(),
                                           [&](const normalize::Config& c) {
                                             return (c.cooperative && c.splits == 1) != want_coop;
                                           }),
                            configs.end());
              if (configs.empty()) continue;
            }
            if (!sample.all()) {
              const auto heuristic = normalize::heuristic_config(p, fingerprint.cc_major, fingerprint.name);
              configs = sample.apply(configs, p.key(),
                                     std::size_t(std::find(configs.begin(), configs.end(), heuristic) - configs.begin()));
            }
            const auto candidates = normalize::make_candidates(p, configs, fingerprint.arch());
            if (collecting) {
              memo.add(candidates);
              continue;
            }
            const auto compiled = sample.all() ? tuner::compile_all(candidates, 0) : memo.compile(candidates);
            const auto kernels = load_variants(p, candidates, compiled, fingerprint);
            for (std::int64_t rows : {1, 7, 3000}) {
              if (cols == 65536 && rows == 3000) continue;  // 0.8 GB of references for one width: 7 rows cover it
              checked += verify_variants(p, rows, configs, candidates, kernels, fingerprint, stream);
            }
          }
  }
  cudaStreamDestroy(stream);
  WARN("verified " << checked << " backward (variant, rows) pairs");
  CHECK(checked > (forms == Forms::all ? 2000 : 500) / sample.every);
}

TEST_CASE("backward: a sample of variants matches the float64 reference", "[gpu][normalize][backward]") {
  // Every 48th variant per problem, and the heuristic's; the cooperative twins have a sample of
  // their own ("backward: cooperative variants ...").
  check_backward_variants(test::Sample{48}, {DType::f32, DType::f16, DType::bf16}, {1, 37, 1024, 1025, 65536},
                          Forms::tree);
}

// Staged rows (keep=stage: the next row of the row loop copied to shared memory by cp.async) are
// pruned to rows of 4 KiB or more, so the sample above meets few of them: here a sample of every
// runnable staged variant (unpruned: 4-, 8- and 16-byte copies, row loops of 4 and 16, threads per
// row up to a block) in every setup, on widths with a partial last vector and exact ones, on row
// counts that leave the last block's row groups partly or wholly past the end.
TEST_CASE("backward: staged variants match the float64 reference", "[gpu][normalize][backward][staged]") {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  const test::Sample sample{8};
  std::size_t checked = 0;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  for (DType d : {DType::f32, DType::bf16})
    for (const auto& s : kBackwardSetups)
      for (std::int64_t cols : {1024, 1025, 4096}) {
        auto p = backward_problem(d, s, cols, 16);
        p.rows = 3000;
        std::vector<normalize::Config> configs;
        const int elem = int(elem_size(d));
        for (int vb = std::max(4, elem); vb <= 16; vb *= 2)
          for (int tpr = 32; tpr <= 1024; tpr *= 2)
            for (int rpb = 1; tpr * rpb <= 1024; rpb *= 2)
              for (int loop : {4, 16}) {
                normalize::Config c;
                c.threads_per_row = tpr;
                c.rows_per_block = rpb;
                c.vector_bytes = vb;
                c.items = int((cols + std::int64_t(tpr) * (vb / elem) - 1) / (std::int64_t(tpr) * (vb / elem)));
                c.keep = normalize::Keep::staged;
                c.row_loop = loop;
                c.recompute = !s.saved;
                if (normalize::is_runnable(p, c)) configs.push_back(c);
              }
        REQUIRE(!configs.empty());
        const auto sampled = sample_variants(p, configs, sample, fingerprint);
        for (std::int64_t rows : {1, 7, 3000}) checked += verify_variants(p, rows, sampled, fingerprint, stream);
      }
  cudaStreamDestroy(stream);
  WARN("verified " << checked << " staged (variant, rows) pairs");
  CHECK(checked > 150);
}

// The cooperative backward (dgamma/dbeta summed by the whole grid after one arrival): a sample of
// its variants of every setup with gradients, on row counts from one block to many more chunks than
// the device holds at once (each block then loops over several chunks of rows).
TEST_CASE("backward: cooperative variants match the float64 reference, also with more chunks than blocks",
          "[gpu][normalize][backward][coop]") {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  const test::Sample sample{96};
  std::size_t checked = 0, looped = 0;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  for (DType d : {DType::f32, DType::bf16})
    for (const auto& s : kBackwardSetups)
      for (std::int64_t cols : {1, 33, 1024, 1025}) {
        auto p = backward_problem(d, s, cols, 16);
        if (!p.dgamma && !p.dbeta) continue;
        p.rows = 3000;
        std::vector<normalize::Config> configs;
        for (const auto& c : normalize::enumerate(p))
          if (c.cooperative) configs.push_back(c);
        REQUIRE(!configs.empty());
        const auto sampled = sample_variants(p, configs, sample, fingerprint);
        const std::int64_t many = cols <= 33 ? 200000 : 20000;
        for (std::int64_t rows : {std::int64_t{1}, std::int64_t{7}, std::int64_t{3000}, many}) {
          checked += verify_variants(p, rows, sampled, fingerprint, stream);
          for (std::size_t i = 0; i < sampled.configs.size(); ++i) {
            const auto g = normalize::geometry(p, sampled.configs[i], rows);
            int resident = 0;
            REQUIRE(sampled.kernels[i].co_resident_blocks(g.block, g.dynamic_smem, &resident) == cudaSuccess);
            looped += resident > 0 && std::int64_t(g.grid) > resident;
          }
        }
      }
  cudaStreamDestroy(stream);
  WARN("verified " << checked << " cooperative (variant, rows) pairs, " << looped << " with more chunks than blocks");
  CHECK(checked > 150);
  CHECK(looped > 20);
}

// The cooperative backward's grid barrier is the driver's per-launch grid workspace word, which
// no memset resets (kvt_grid_sync: each barrier adds 2^31 in all and leaves the word's other bits as
// they were): launches of different grid sizes in turn, over several rounds, each against float64.
TEST_CASE("backward: the cooperative barrier holds over many launches of different grid sizes",
          "[gpu][normalize][backward][coop]") {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  auto p = backward_problem(DType::bf16, kBackwardSetups[0], 1024, 16);
  p.rows = 3000;
  std::vector<normalize::Config> configs;
  for (const auto& c : normalize::enumerate(p))
    if (c.cooperative && c.splits == 1) configs.push_back(c);
  REQUIRE(configs.size() >= 4);
  const auto sampled = sample_variants(p, configs, test::Sample{std::max<std::size_t>(1, configs.size() / 4)}, fingerprint);
  std::size_t checked = 0;
  std::set<unsigned> grids;
  for (int round = 0; round < 4; ++round)
    for (std::int64_t rows : {std::int64_t{5}, std::int64_t{3000}, std::int64_t{20000}, std::int64_t{700}}) {
      checked += verify_variants(p, rows, sampled, fingerprint, stream);
      for (const auto& c : sampled.configs) grids.insert(normalize::geometry(p, c, rows).grid);
    }
  cudaStreamDestroy(stream);
  CHECK(checked >= 4 * 4 * 4);
  CHECK(grids.size() >= 4);
}

// Every backward variant but the cooperative twins (23,973 of them, 70,683 checks; 48 times the
// quick tier's sample): three parts of their own by width (about a third of the variants each), a
// case a dtype (three cases of every width ran over 570 s on an H100). The cooperative twins of the
// one-block variants with dgamma/dbeta (about as many again) have parts 7 and 8.
TEST_CASE("backward: every f32 variant of widths 1, 37 and 65536 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-4][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f32}, {1, 37, 65536}, Forms::tree);
}

TEST_CASE("backward: every f16 variant of widths 1, 37 and 65536 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-4][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f16}, {1, 37, 65536}, Forms::tree);
}

TEST_CASE("backward: every bf16 variant of widths 1, 37 and 65536 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-4][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::bf16}, {1, 37, 65536}, Forms::tree);
}

TEST_CASE("backward: every f32 variant of width 1024 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-5][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f32}, {1024}, Forms::tree);
}

TEST_CASE("backward: every f16 variant of width 1024 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-5][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f16}, {1024}, Forms::tree);
}

TEST_CASE("backward: every bf16 variant of width 1024 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-5][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::bf16}, {1024}, Forms::tree);
}

TEST_CASE("backward: every f32 variant of width 1025 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-6][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f32}, {1025}, Forms::tree);
}

TEST_CASE("backward: every f16 variant of width 1025 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-6][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f16}, {1025}, Forms::tree);
}

TEST_CASE("backward: every bf16 variant of width 1025 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-6][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::bf16}, {1025}, Forms::tree);
}

TEST_CASE("backward: every cooperative f32 variant of widths 1, 37 and 65536 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-7][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f32}, {1, 37, 65536}, Forms::coop);
}

TEST_CASE("backward: every cooperative f16 variant of widths 1, 37 and 65536 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-7][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f16}, {1, 37, 65536}, Forms::coop);
}

TEST_CASE("backward: every cooperative bf16 variant of widths 1, 37 and 65536 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-7][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::bf16}, {1, 37, 65536}, Forms::coop);
}

TEST_CASE("backward: every cooperative f32 variant of width 1024 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-8][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f32}, {1024}, Forms::coop);
}

TEST_CASE("backward: every cooperative f16 variant of width 1024 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-8][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f16}, {1024}, Forms::coop);
}

TEST_CASE("backward: every cooperative bf16 variant of width 1024 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-8][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::bf16}, {1024}, Forms::coop);
}

TEST_CASE("backward: every cooperative f32 variant of width 1025 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-9][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f32}, {1025}, Forms::coop);
}

TEST_CASE("backward: every cooperative f16 variant of width 1025 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-9][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::f16}, {1025}, Forms::coop);
}

TEST_CASE("backward: every cooperative bf16 variant of width 1025 matches the float64 reference",
          "[.][gpu-exhaustive][exhaustive-9][normalize]") {
  check_backward_variants(test::kEveryVariant, {DType::bf16}, {1025}, Forms::coop);
}

// The heuristic policy launches the learned choice of this GPU's model (normalize_learned_sm90.json
// keeps rankings per model; docs/TUNER.md), not another model's: the Context passes the device's
// name to the family's heuristic. Checked on narrow affine rows, where the models' rankings differ.
TEST_CASE("heuristic policy: the learned choice of this GPU model", "[gpu][normalize][heuristic]") {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  ContextOptions o;
  o.cache_path = "";
  o.policy = Policy::heuristic;
  Context ctx(o);
  struct Case {
    std::int64_t rows, cols;
    DType dtype;
    NormMode mode;
    const char* key;
  };
  const Case cases[] = {
      {100000, 37, DType::f32, NormMode::layernorm, "normalize,f32,layernorm,cols=37,rows<=131072,align=4,affine=gb,stats="},
      {262144, 32, DType::f16, NormMode::rmsnorm, "normalize,f16,rmsnorm,cols=32,rows<=262144,align=16,affine=g,stats="},
      {1048576, 16, DType::f32, NormMode::layernorm, "normalize,f32,layernorm,cols=16,rows<=1048576,align=16,affine=gb,stats="}};
  for (const Case& c : cases) {
    const std::size_t elem = c.dtype == DType::f32 ? 4 : 2;
    Buffer x(std::size_t(c.rows * c.cols) * elem), y(std::size_t(c.rows * c.cols) * elem), g(std::size_t(c.cols) * elem),
        b(std::size_t(c.cols) * elem);
    NormalizeArgs a;
    a.x = x.ptr;
    a.y = y.ptr;
    a.rows = c.rows;
    a.cols = c.cols;
    a.dtype = c.dtype;
    a.mode = c.mode;
    a.gamma = g.ptr;
    if (c.mode == NormMode::layernorm) a.beta = b.ptr;
    const auto p = normalize::problem_from_key(c.key);
    REQUIRE(p);
    INFO(c.key << " on " << fingerprint.name);
    CHECK(ctx.normalize_variant(a) == normalize::heuristic_config(*p, fingerprint.cc_major, fingerprint.name).label());
  }
  CHECK(ctx.counters().tunes == 0);
}

TEST_CASE("backward: tuned and heuristic calls, every mode and dtype, ld, dx == dy, caller workspace, deterministic",
          "[gpu][normalize][backward]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = "";
  o.policy = Policy::heuristic;
  Context heuristic(o);
  // Every setup and width once, dtypes rotating (each call compiles its heuristic variant).
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  int i = 0;
  for (const auto& s : kBackwardSetups)
    for (std::int64_t cols : {1, 37, 1024, 4097}) check_backward_call(heuristic, dtypes[i++ % 3], s, 33, cols, false, false, false);
  // Strided rows, in place, the caller's workspace; the same call twice gives the same bits.
  for (const auto& s : kBackwardSetups) {
    const auto first = check_backward_call(heuristic, DType::bf16, s, 1000, 768, true, true, true);
    const auto again = check_backward_call(heuristic, DType::bf16, s, 1000, 768, true, true, false);
    CHECK(first == again);
  }
  // |mean| >> std: the saved f32 mean is coarse against the spread; the kernel re-centres.
  for (const auto& s : kBackwardSetups)
    if (s.mode != NormMode::rmsnorm) check_backward_call(heuristic, DType::f32, s, 64, 1000, false, false, false, 1000.0, 0.01);
  // Tuned: a transformer-sized LayerNorm and RMSNorm, and the packet standardization.
  o.policy = Policy::tune;
  Context tuned(o);
  check_backward_call(tuned, DType::bf16, kBackwardSetups[0], 4096, 1024, false, false, false);
  check_backward_call(tuned, DType::f32, kBackwardSetups[2], 2048, 4096, false, false, false);
  check_backward_call(tuned, DType::f32, kBackwardSetups[4], 16384, 128, false, false, false);
  CHECK(tuned.counters().tunes == 6);  // three backward problems and the forwards that saved statistics for them
  // A workspace that is too small is refused, naming the field.
  const auto x = random_tensor(DType::f32, 64 * 128, 1, 0.5, 2.0);
  Buffer bx(x.bytes.size()), bdy(x.bytes.size()), bdx(x.bytes.size()), bg(512), bdg(512), small(256);
  NormalizeBackwardArgs a;
  a.x = bx.ptr;
  a.dy = bdy.ptr;
  a.dx = bdx.ptr;
  a.rows = 64;
  a.cols = 128;
  a.mode = NormMode::layernorm;
  a.gamma = bg.ptr;
  a.dgamma = bdg.ptr;
  a.workspace = small.ptr;
  a.workspace_bytes = 16;
  try {
    heuristic.normalize_backward(a);
    FAIL("a 16-byte workspace was accepted");
  } catch (const Error& e) {
    CHECK(e.context().field == "workspace_bytes");
  }
}
