// kvtune-bench's mamba-inference suite: the decode step of Mamba's causal conv1d, the shapes of
// kvtune-tune's suite of the same name (tools/mamba_inference_shapes.h).
#include <fmt/format.h>

#include "lib/src/families.h"
#include "tools/bench_suite.h"
#include "tools/mamba_inference_shapes.h"

namespace kvtune::bench {
namespace {

BenchProblem decode(std::int64_t batch, std::int64_t channels, bool circular, int seqlen = 1) {
  BenchProblem p;
  p.suite = "mamba-inference";
  p.family = detail::DwConvDecodeFamily::kOp;
  p.group = "dwconv_decode";
  p.source = "Mamba's conv1d decode step (d_conv = 4, bias, SiLU, state indices), d_inner of 130M-2.8B models";
  DwConvDecodeArgs a;
  a.dtype = DType::bf16;
  a.batch = batch;
  a.channels = channels;
  a.seqlen = seqlen;
  a.kernel_w = 4;
  a.state_len = circular ? 256 : 0;
  a.activation = Activation::silu;
  a.bias = passed();
  a.state_indices = static_cast<const std::int32_t*>(passed());
  a.cache_seqlens = circular ? static_cast<const std::int32_t*>(passed()) : nullptr;
  p.call = a;
  p.id = fmt::format("mamba-inference/decode-bf16-{}x{}-k4-seq{}{}", batch, channels, seqlen,
                     circular ? "-circular256" : "");
  p.what = fmt::format("decode {} x {} bf16 K=4, {} token{}{} +bias silu", batch, channels, seqlen,
                       seqlen > 1 ? "s" : "", circular ? ", circular state of 256" : "");
  return p;
}

}  // namespace

template <>
std::vector<BenchSuite> bench_suites<detail::DwConvDecodeFamily>() {
  return {{"mamba-inference", [] {
    std::vector<BenchProblem> v;
    for (const auto& s : tools::mamba_inference_shapes()) v.push_back(decode(s.batch, s.channels, s.circular, s.seqlen));
    return v;
  }}};
}

}  // namespace kvtune::bench
