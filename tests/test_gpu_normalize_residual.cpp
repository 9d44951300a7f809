// [gpu] tests of the fused residual add: y = norm(x + residual), s = x + residual (residual_out),
// and the backward's gradient into s (dresidual_out) added to dx. Every variant checked here is
// verified against float64: y against the reference of the rounded sum s, s bit for bit against
// the host's f32 sum rounded to the dtype (what a separate add writes).
// Each test skips, saying why, where there is no GPU.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>

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

struct Mode {
  NormMode mode;
  bool gamma, beta, stats;
  int ddof;
};
const Mode kModes[] = {
    {NormMode::layernorm, true, true, true, 0},
    {NormMode::rmsnorm, true, false, true, 0},
    {NormMode::standardize, false, false, false, 1},
};

// s = x + r as the kernel (and a separate add) computes it: the f32 sum rounded to the dtype.
HostTensor rounded_sum(DType d, const HostTensor& x, const HostTensor& r) {
  HostTensor s;
  const std::size_t e = elem_size(d);
  s.bytes.resize(x.bytes.size());
  s.values.resize(x.values.size());
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    encode(d, double(float(x.values[i]) + float(r.values[i])), s.bytes.data() + i * e);
    s.values[i] = decode(d, s.bytes.data() + i * e);
  }
  return s;
}

// Rows of `ld` elements, the first `cols` of each, densely.
std::vector<double> dense(const std::vector<double>& v, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  std::vector<double> out(std::size_t(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[std::size_t(r * cols + c)] = v[std::size_t(r * ld + c)];
  return out;
}

// Where the outputs go: separate buffers, s over x, s over the residual, y over the residual.
enum class Alias { none, s_is_x, s_is_r, y_is_r, no_s };
const char* alias_name(Alias a) {
  switch (a) {
    case Alias::none: return "separate";
    case Alias::s_is_x: return "s == x";
    case Alias::s_is_r: return "s == residual";
    case Alias::y_is_r: return "y == residual";
    case Alias::no_s: return "no residual_out";
  }
  return "?";
}

// One forward call through `context`; checks y against float64 of the rounded sum and s bit for bit.
void check_forward(Context& context, DType d, const Mode& m, std::int64_t rows, std::int64_t cols, Alias alias,
                   bool pad) {
  const std::size_t e = elem_size(d);
  const std::int64_t ld = pad ? cols + 5 : cols;
  const auto x = random_tensor(d, std::size_t(rows * ld), 301 + cols, 0.5, 2.0);
  const auto r = random_tensor(d, std::size_t(rows * ld), 302 + cols, -0.25, 4.0);
  const auto g = random_tensor(d, std::size_t(cols), 303, 1.0, 0.5);
  const auto b = random_tensor(d, std::size_t(cols), 304, 0.0, 0.5);
  const auto s = rounded_sum(d, x, r);
  Buffer bx(x), br(r), by(x.bytes.size()), bs(x.bytes.size()), bg(g), bb(b), bstats(std::size_t(rows) * 8);
  NormalizeArgs a;
  a.x = bx.ptr;
  a.residual = br.ptr;
  a.y = alias == Alias::y_is_r ? br.ptr : by.ptr;
  a.residual_out = alias == Alias::s_is_x ? bx.ptr : alias == Alias::s_is_r ? br.ptr : alias == Alias::no_s ? nullptr : bs.ptr;
  a.rows = rows;
  a.cols = cols;
  a.ld_x = a.ld_y = a.ld_residual = a.ld_residual_out = ld;
  a.dtype = d;
  a.mode = m.mode;
  a.ddof = m.ddof;
  a.gamma = m.gamma ? bg.ptr : nullptr;
  a.beta = m.beta ? bb.ptr : nullptr;
  a.mean = m.stats && m.mode != NormMode::rmsnorm ? bstats.as<float>() : nullptr;
  a.rstd = m.stats ? bstats.as<float>(std::size_t(rows) * 4) : nullptr;
  context.normalize(a);
  detail::cuda_check(cudaDeviceSynchronize(), "normalize with residual");
  const auto ref = normalize::reference(s.values, rows, cols, ld, m.mode, 1e-5, m.ddof,
                                        m.gamma ? g.values : std::vector<double>{},
                                        m.beta ? b.values : std::vector<double>{});
  INFO(to_string(d) << " " << to_string(m.mode) << " rows=" << rows << " cols=" << cols << (pad ? " ld+5" : "") << " "
                    << alias_name(alias) << " variant " << context.normalize_variant(a));
  CHECK(relative_error(d, a.y, rows, cols, ld, ref.y) < tolerance(d));
  if (a.rstd != nullptr) CHECK(relative_error(DType::f32, a.rstd, rows, 1, 1, ref.rstd) < 1e-4);
  if (a.residual_out != nullptr) {  // bit for bit, every row's first cols elements
    std::vector<unsigned char> out(s.bytes.size());
    cudaMemcpy(out.data(), a.residual_out, out.size(), cudaMemcpyDeviceToHost);
    std::size_t wrong = 0;
    for (std::int64_t row = 0; row < rows; ++row)
      wrong += std::memcmp(out.data() + std::size_t(row * ld) * e, s.bytes.data() + std::size_t(row * ld) * e,
                           std::size_t(cols) * e) != 0;
    CHECK(wrong == 0);
  }
}

// One backward call with the gradient into s: dx = norm's backward at s + ds.
void check_backward(Context& context, DType d, const Mode& m, std::int64_t rows, std::int64_t cols, bool dx_is_ds) {
  const auto s = random_tensor(d, std::size_t(rows * cols), 311 + cols, 0.5, 2.0);
  const auto dy = random_tensor(d, std::size_t(rows * cols), 312 + cols, 0.0, 1.0);
  const auto ds = random_tensor(d, std::size_t(rows * cols), 313 + cols, 0.0, 1.0);
  const auto g = random_tensor(d, std::size_t(cols), 314, 1.0, 0.5);
  Buffer bs(s), bdy(dy), bds(ds), bdx(s.bytes.size()), bg(g), bdg(g.bytes.size());
  NormalizeBackwardArgs a;
  a.x = bs.ptr;
  a.dy = bdy.ptr;
  a.dresidual_out = bds.ptr;
  a.dx = dx_is_ds ? bds.ptr : bdx.ptr;
  a.rows = rows;
  a.cols = cols;
  a.dtype = d;
  a.mode = m.mode;
  a.ddof = m.ddof;
  a.gamma = m.gamma ? bg.ptr : nullptr;
  a.dgamma = m.gamma ? bdg.ptr : nullptr;
  context.normalize_backward(a);
  detail::cuda_check(cudaDeviceSynchronize(), "normalize_backward with dresidual_out");
  auto ref = normalize::reference_backward(s.values, dy.values, rows, cols, cols, m.mode, 1e-5, m.ddof,
                                           m.gamma ? g.values : std::vector<double>{});
  for (std::size_t i = 0; i < ref.dx.size(); ++i) ref.dx[i] += ds.values[i];
  INFO(to_string(d) << " " << to_string(m.mode) << " rows=" << rows << " cols=" << cols
                    << (dx_is_ds ? " dx == dresidual_out" : "") << " variant " << context.normalize_backward_variant(a));
  const double tol = (d == DType::f32 ? 1e-4 : tolerance(d)) * (m.mode == NormMode::rmsnorm && cols == 1 ? 100 : 1);
  CHECK(relative_error(d, a.dx, rows, cols, cols, ref.dx) < tol);
  if (m.gamma) CHECK(relative_error(d, bdg.ptr, 1, cols, cols, ref.dgamma) < tol);
}

}  // namespace

TEST_CASE("residual: a sample of forward and backward variants matches the float64 reference",
          "[gpu][normalize][residual]") {
  KVTUNE_REQUIRE_GPU();
  const auto fingerprint = detail::read_fingerprint(detail::current_device());
  const test::Sample sample{24};
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  std::size_t checked = 0;
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  int turn = 0;
  for (const auto& m : kModes)
    for (std::int64_t cols : {1, 37, 1024, 4097, 40000})
      for (int direction = 0; direction < 3; ++direction) {  // forward, forward with s, backward with ds
        const DType d = dtypes[turn++ % 3];
        normalize::Problem p;
        p.dtype = d;
        p.mode = m.mode;
        p.rows = 300;  // the candidates' geometry needs rows; the loop below sets each
        p.cols = cols;
        p.align_bytes = 16;
        p.gamma = m.gamma;
        if (direction < 2) {
          p.beta = m.beta;
          p.rstd_out = m.stats;
          p.residual = true;
          p.residual_out = direction == 1;
        } else {
          p.backward = true;
          p.dgamma = m.gamma;
          p.saved_stats = false;
          p.dresidual = true;
        }
        auto configs = normalize::enumerate(p);
        REQUIRE(!configs.empty());
        const auto heuristic = normalize::heuristic_config(p, fingerprint.cc_major, fingerprint.name);
        const auto sampled = sample_variants(p, configs, sample, fingerprint,
                                             std::size_t(std::find(configs.begin(), configs.end(), heuristic) -
                                                         configs.begin()));
        for (std::int64_t rows : {3, 300}) checked += verify_variants(p, rows, sampled, fingerprint, stream);
      }
  cudaStreamDestroy(stream);
  WARN("verified " << checked << " (residual variant, rows) pairs");
  CHECK(checked > 200);
}

TEST_CASE("residual: calls in every mode and dtype, outputs over the inputs, ld, split rows, tuned",
          "[gpu][normalize][residual]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = "";
  o.policy = Policy::heuristic;
  Context heuristic(o);
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  int turn = 0;
  for (const auto& m : kModes)
    for (std::int64_t cols : {1, 37, 1024, 4097}) {
      const DType d = dtypes[turn++ % 3];
      check_forward(heuristic, d, m, 33, cols, Alias::none, false);
      check_backward(heuristic, d, m, 33, cols, false);
    }
  for (const auto& m : kModes)
    for (Alias alias : {Alias::s_is_x, Alias::s_is_r, Alias::y_is_r, Alias::no_s}) {
      check_forward(heuristic, DType::bf16, m, 100, 768, alias, true);
      check_forward(heuristic, DType::f32, m, 3, 1 << 20, alias, false);  // split across blocks
    }
  for (const auto& m : kModes) check_backward(heuristic, DType::f32, m, 3, 1 << 20, true);  // split, dx == ds
  // Tuned: a pre-norm transformer step (bf16 LayerNorm with s), and its backward.
  o.policy = Policy::tune;
  Context tuned(o);
  check_forward(tuned, DType::bf16, kModes[0], 4096, 1024, Alias::s_is_r, false);
  check_backward(tuned, DType::bf16, kModes[0], 4096, 1024, false);
  CHECK(tuned.counters().tunes == 2);
}
