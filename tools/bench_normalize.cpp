// kvtune-bench's normalize suites: the seed study's packet shapes, large transformer activations,
// narrow rows, rows split across blocks, the fused residual add and the backward.
#include <fmt/format.h>

#include "lib/src/families.h"
#include "tools/bench_suite.h"

namespace kvtune::bench {
namespace {

// The fields both directions share: shape, dtype, eps and, as the PyTorch peers run them (F.layer_norm
// with weight, F.rms_norm with weight, the three-op standardize with torch.std's default ddof = 1),
// ddof and gamma.
template <class Args>
Args norm_args(std::int64_t rows, std::int64_t cols, DType dtype, NormMode mode) {
  Args a;
  a.rows = rows;
  a.cols = cols;
  a.dtype = dtype;
  a.mode = mode;
  a.eps = 1e-5f;
  a.ddof = mode == NormMode::standardize ? 1 : 0;
  a.gamma = mode == NormMode::standardize ? nullptr : passed();
  return a;
}

template <class Args>
BenchProblem norm_row(const std::string& suite, const std::string& group, const std::string& source, const Args& a,
                      const char* what_suffix) {
  BenchProblem p;
  p.suite = suite;
  p.family = detail::NormalizeFamily::kOp;
  p.group = group;
  p.source = source;
  p.call = a;
  p.id = fmt::format("{}/{}-{}-{}x{}", suite, to_string(a.mode), to_string(a.dtype), a.rows, a.cols);
  p.what = fmt::format("{} x {} {} {}{}", a.rows, a.cols, to_string(a.mode), to_string(a.dtype), what_suffix);
  return p;
}

BenchProblem norm(const std::string& suite, std::int64_t rows, std::int64_t cols, DType dtype, NormMode mode,
                  const std::string& source) {
  auto a = norm_args<NormalizeArgs>(rows, cols, dtype, mode);
  a.beta = mode == NormMode::layernorm ? passed() : nullptr;  // F.layer_norm's bias
  return norm_row(suite, "normalize", source, a, "");
}

// The backward of a training step: dx, dgamma and dbeta (dbeta with layernorm) from x, dy, gamma and
// the forward's saved mean/rstd, as PyTorch's layer_norm backward reads them.
BenchProblem norm_backward(const std::string& suite, std::int64_t rows, std::int64_t cols, DType dtype, NormMode mode,
                           const std::string& source) {
  auto a = norm_args<NormalizeBackwardArgs>(rows, cols, dtype, mode);
  a.dgamma = a.gamma != nullptr ? passed() : nullptr;
  a.dbeta = mode == NormMode::layernorm ? passed() : nullptr;
  a.mean = mode == NormMode::rmsnorm ? nullptr : static_cast<const float*>(passed());
  a.rstd = static_cast<const float*>(passed());
  return norm_row(suite, "normalize backward", source, a, " backward");
}

}  // namespace

template <>
std::vector<BenchSuite> bench_suites<detail::NormalizeFamily>() {
  const DType f32 = DType::f32, f16 = DType::f16, bf16 = DType::bf16;
  std::vector<BenchSuite> out;
  out.push_back({"normalize-ids", [=] {
    const std::string name = "normalize-ids";
    const std::string src = "the seed study's four shapes (kvtune-demo), standardize as (x - mean) / (std + eps)";
    std::vector<BenchProblem> v;
    for (auto [rows, cols] : {std::pair{1024, 128}, {4096, 256}, {8192, 512}, {16384, 1024}})
      v.push_back(norm(name, rows, cols, f32, NormMode::standardize, src));
    return v;
  }});
  out.push_back({"normalize-large", [=] {
    const std::string name = "normalize-large";
    const std::string src = "transformer activations, >= 256 MB of traffic per call";
    return std::vector<BenchProblem>{norm(name, 65536, 1024, f32, NormMode::layernorm, src),
                                     norm(name, 65536, 1024, bf16, NormMode::layernorm, src),
                                     norm(name, 32768, 4096, bf16, NormMode::rmsnorm, src),
                                     norm(name, 32768, 4096, f16, NormMode::layernorm, src)};
  }});
  out.push_back({"normalize-narrow", [=] {
    const std::string name = "normalize-narrow";
    const std::string src = "narrow rows (cols < 64): per-feature-group statistics, issue 6's 100000 x 37";
    return std::vector<BenchProblem>{norm(name, 100000, 37, f32, NormMode::layernorm, src),
                                     norm(name, 100000, 37, bf16, NormMode::layernorm, src),
                                     norm(name, 262144, 32, f16, NormMode::rmsnorm, src),
                                     norm(name, 1048576, 16, f32, NormMode::layernorm, src)};
  }});
  out.push_back({"normalize-residual", [=] {
    const std::string name = "normalize-residual";
    const std::string src = "pre-norm transformer steps: s = x + residual written, y = norm(s) (issue 25); the "
                            "peers run the add and the norm";
    std::vector<BenchProblem> v = {norm(name, 16384, 1024, bf16, NormMode::layernorm, src),
                                   norm(name, 16384, 2048, bf16, NormMode::rmsnorm, src),
                                   norm(name, 8192, 1024, f32, NormMode::layernorm, src),
                                   norm(name, 1024, 1024, bf16, NormMode::layernorm, src)};
    for (BenchProblem& p : v) {
      auto& a = std::get<NormalizeArgs>(p.call);
      a.residual = passed();
      a.residual_out = passed();
      p.id += "+res";
      p.what += " + residual";
    }
    return v;
  }});
  out.push_back({"normalize-backward", [=] {
    const std::string name = "normalize-backward";
    const std::string src = "a training step's LayerNorm/RMSNorm backward from saved statistics, dgamma and dbeta "
                            "included (issue 25); bench/python/norm_backward.py's rows";
    return std::vector<BenchProblem>{norm_backward(name, 8192, 4096, bf16, NormMode::layernorm, src),
                                     norm_backward(name, 8192, 1024, f32, NormMode::layernorm, src),
                                     norm_backward(name, 4096, 1024, bf16, NormMode::layernorm, src),
                                     norm_backward(name, 1024, 1024, bf16, NormMode::layernorm, src),
                                     norm_backward(name, 8192, 4096, bf16, NormMode::rmsnorm, src),
                                     norm_backward(name, 4096, 1024, f32, NormMode::rmsnorm, src)};
  }});
  out.push_back({"normalize-wide", [=] {
    const std::string name = "normalize-wide";
    const std::string src = "rows of 2^20 and 2^22 columns (per-sample normalization of a whole image or "
                            "waveform), few rows and many: split across blocks (issue 25)";
    return std::vector<BenchProblem>{norm(name, 2, 1 << 20, f32, NormMode::layernorm, src),
                                     norm(name, 128, 1 << 20, f32, NormMode::layernorm, src),
                                     norm(name, 4, 1 << 22, bf16, NormMode::layernorm, src),
                                     norm(name, 64, 1 << 22, bf16, NormMode::layernorm, src),
                                     norm(name, 8, 1 << 22, f32, NormMode::rmsnorm, src),
                                     norm(name, 256, 1 << 20, bf16, NormMode::rmsnorm, src)};
  }});
  return out;
}

}  // namespace kvtune::bench
