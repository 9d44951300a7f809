// kvtune-bench's dwconv suites: the convolutions of Mamba, S4/H3, MobileNetV2, ConvNeXt and
// RepLKNet in the three directions, and forward rows with a fused bias and activation.
#include <fmt/format.h>

#include "lib/src/families.h"
#include "tools/bench_rows.h"

namespace kvtune::bench {
namespace {

const char* short_direction(DwDirection d) {
  switch (d) {
    case DwDirection::forward: return "fwd";
    case DwDirection::backward_data: return "bwd_data";
    case DwDirection::backward_weight: return "bwd_weight";
  }
  return "?";
}

}  // namespace

BenchProblem dw(const std::string& suite, DwDirection direction, DType dtype, const DwShape& s,
                const std::string& source) {
  BenchProblem p;
  p.suite = suite;
  p.family = detail::DwConvFamily::kOp;
  p.group = std::string("dwconv ") + to_string(direction);
  p.source = source;
  DwConvArgs a;
  const bool two_d = s.layout == DwLayout::nchw || s.layout == DwLayout::nhwc;
  a.direction = direction;
  a.layout = s.layout;
  a.dtype = dtype;
  a.n = s.n;
  a.c = s.c;
  a.h = two_d ? s.h : 1;
  a.w = s.w;
  a.kernel_w = s.kernel;
  a.kernel_h = two_d ? s.kernel : 1;
  a.stride_w = s.stride;
  a.stride_h = two_d ? s.stride : 1;
  a.causal = s.causal;
  if (!s.causal) {
    a.pad_left = a.pad_right = s.kernel / 2;
    if (two_d) a.pad_top = a.pad_bottom = s.kernel / 2;
  }
  p.call = a;
  const std::string shape = two_d ? fmt::format("{}x{}x{}x{}", s.n, s.c, s.h, s.w) : fmt::format("{}x{}x{}", s.n, s.c, s.w);
  const std::string kernel = two_d ? fmt::format("{}x{}", s.kernel, s.kernel) : fmt::format("{}", s.kernel);
  p.id = fmt::format("{}/{}-{}-{}-{}-k{}{}{}", suite, short_direction(direction), to_string(s.layout),
                     to_string(dtype), shape, kernel, s.stride > 1 ? fmt::format("-s{}", s.stride) : "",
                     s.causal ? "-causal" : "");
  p.what = fmt::format("{} {} {} [{}] k={}{}{}", to_string(direction), to_string(s.layout), to_string(dtype), shape,
                       kernel, s.stride > 1 ? fmt::format(" stride {}", s.stride) : "", s.causal ? " causal" : "");
  return p;
}

BenchProblem with_activation(BenchProblem p, Activation activation) {
  DwConvArgs& a = std::get<DwConvArgs>(p.call);
  a.bias = passed();
  if (a.direction == DwDirection::backward_weight) a.dbias = passed();
  a.activation = activation;
  const auto dash = p.id.find('/');
  p.id = p.id.substr(0, dash + 1) + short_direction(a.direction) + "+bias+" + to_string(activation) +
         p.id.substr(p.id.find('-', dash));
  p.what += fmt::format(" +bias {} (fused)", to_string(activation));
  return p;
}

void all_directions(std::vector<BenchProblem>& out, const std::string& suite, DType dtype, const DwShape& s,
                    const std::string& source) {
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    out.push_back(dw(suite, d, dtype, s, source));
}

template <>
std::vector<BenchSuite> bench_suites<detail::DwConvFamily>() {
  const DType f32 = DType::f32, bf16 = DType::bf16;
  const DwDirection fwd = DwDirection::forward;
  std::vector<BenchSuite> out;
  out.push_back({"mamba", [=] {
    const std::string name = "mamba";
    const std::string src = "Mamba's causal conv1d (d_conv = 4) on d_inner = 4096, 2048 tokens, batch 8";
    const DwShape s{DwLayout::ncl, 8, 4096, 1, 2048, 4, 1, true};
    std::vector<BenchProblem> v;
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, fwd, bf16, s, src));
    v.push_back(dw(name, fwd, bf16, {DwLayout::nlc, 8, 4096, 1, 2048, 4, 1, true}, src));
    v.push_back(with_activation(dw(name, fwd, bf16, s, src), Activation::silu));
    return v;
  }});
  out.push_back({"s4", [=] {
    const std::string name = "s4";
    const std::string src = "S4/H3-style short 1D convolutions: H3's causal shift conv (K = 3) on 512 channels "
                            "x 4096 tokens, and a wider local conv (K = 31) in channel-last layout";
    std::vector<BenchProblem> v;
    all_directions(v, name, f32, {DwLayout::ncl, 16, 512, 1, 4096, 3, 1, true}, src);
    v.push_back(dw(name, fwd, bf16, {DwLayout::nlc, 16, 512, 1, 4096, 31, 1, false}, src));
    return v;
  }});
  out.push_back({"mobilenetv2", [=] {
    const std::string name = "mobilenetv2";
    const std::string src =
        "MobileNetV2 inverted-residual depthwise 3x3 (56x56x144 stride 1, 112x112x96 stride 2), batch 32";
    const DwShape s{DwLayout::nchw, 32, 144, 56, 56, 3};
    std::vector<BenchProblem> v;
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, fwd, bf16, {DwLayout::nhwc, 32, 144, 56, 56, 3}, src));
    v.push_back(dw(name, fwd, f32, {DwLayout::nhwc, 32, 96, 112, 112, 3, 2}, src));
    v.push_back(with_activation(dw(name, fwd, f32, s, src), Activation::relu));
    return v;
  }});
  out.push_back({"convnext", [=] {
    const std::string name = "convnext";
    const std::string src = "ConvNeXt-T depthwise 7x7 (stage 1: 96 x 56x56, stage 3: 384 x 14x14), batch 32";
    const DwShape s{DwLayout::nchw, 32, 96, 56, 56, 7};
    std::vector<BenchProblem> v;
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, fwd, bf16, {DwLayout::nhwc, 32, 96, 56, 56, 7}, src));
    v.push_back(dw(name, fwd, f32, {DwLayout::nhwc, 32, 384, 14, 14, 7}, src));
    v.push_back(with_activation(dw(name, fwd, f32, s, src), Activation::gelu_erf));
    return v;
  }});
  out.push_back({"large-kernel", [=] {
    const std::string name = "large-kernel";
    const std::string src = "RepLKNet-31B stage 1 depthwise 31x31 (128 x 56x56), batch 16";
    const DwShape s{DwLayout::nchw, 16, 128, 56, 56, 31};
    std::vector<BenchProblem> v;
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, fwd, bf16, {DwLayout::nhwc, 16, 128, 56, 56, 31}, src));
    return v;
  }});
  return out;
}

}  // namespace kvtune::bench
