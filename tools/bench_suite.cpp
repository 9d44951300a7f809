// kvtune-bench suites. Sizes are chosen so that `--suite all` tunes about 35 problems (kvtune's cold
// tuning costs 7-10 s each on 16 cores) and every problem but the seed's small normalize shapes
// moves more than twice an H100/H200 L2 per call.
#include "tools/bench_suite.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/normalize/normalize_family.h"

namespace kvtune::bench {
namespace {

// Distinct, widely spaced, 256-byte aligned stand-ins: the models only read the alignment.
void* fake_pointer(int index) { return reinterpret_cast<void*>(std::uintptr_t(index) << 36); }

const char* short_direction(DwDirection d) {
  switch (d) {
    case DwDirection::forward: return "fwd";
    case DwDirection::backward_data: return "bwd_data";
    case DwDirection::backward_weight: return "bwd_weight";
  }
  return "?";
}

BenchProblem norm(const std::string& suite, std::int64_t rows, std::int64_t cols, DType dtype, NormMode mode,
                  const std::string& source) {
  BenchProblem p;
  p.suite = suite;
  p.family = Family::normalize;
  p.source = source;
  NormalizeArgs& a = p.normalize;
  a.rows = rows;
  a.cols = cols;
  a.dtype = dtype;
  a.mode = mode;
  a.eps = 1e-5f;
  // The PyTorch peers: F.layer_norm with weight and bias, F.rms_norm with weight, and the three-op
  // standardize with torch.std's default ddof = 1.
  a.ddof = mode == NormMode::standardize ? 1 : 0;
  a.gamma = mode == NormMode::standardize ? nullptr : fake_pointer(3);
  a.beta = mode == NormMode::layernorm ? fake_pointer(4) : nullptr;
  p.id = fmt::format("{}/{}-{}-{}x{}", suite, to_string(mode), to_string(dtype), rows, cols);
  p.what = fmt::format("{} x {} {} {}", rows, cols, to_string(mode), to_string(dtype));
  return p;
}

struct DwShape {
  DwLayout layout;
  std::int64_t n, c, h, w;
  int kernel;  // kernel_w (and kernel_h in 2D)
  int stride = 1;
  bool causal = false;  // 1D only
};

BenchProblem dw(const std::string& suite, DwDirection direction, DType dtype, const DwShape& s,
                const std::string& source) {
  BenchProblem p;
  p.suite = suite;
  p.family = Family::dwconv;
  p.source = source;
  DwConvArgs& a = p.dwconv;
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
  // No bias (cuDNN's convolution calls have none and the weight gradient is timed alone), except in
  // the fused-activation rows (with_activation).
  const std::string shape = two_d ? fmt::format("{}x{}x{}x{}", s.n, s.c, s.h, s.w) : fmt::format("{}x{}x{}", s.n, s.c, s.w);
  const std::string kernel = two_d ? fmt::format("{}x{}", s.kernel, s.kernel) : fmt::format("{}", s.kernel);
  p.id = fmt::format("{}/{}-{}-{}-{}-k{}{}{}", suite, short_direction(direction), to_string(s.layout),
                     to_string(dtype), shape, kernel, s.stride > 1 ? fmt::format("-s{}", s.stride) : "",
                     s.causal ? "-causal" : "");
  p.what = fmt::format("{} {} {} [{}] k={}{}{}", to_string(direction), to_string(s.layout), to_string(dtype), shape,
                       kernel, s.stride > 1 ? fmt::format(" stride {}", s.stride) : "", s.causal ? " causal" : "");
  return p;
}

// A forward row with bias and a fused activation: y = act(conv(x) + bias), against the same
// composition in PyTorch (the convolution with bias, then the activation as its own op).
BenchProblem with_activation(BenchProblem p, Activation activation) {
  p.bias = true;
  p.dwconv.activation = activation;
  const auto dash = p.id.find('/');
  p.id = p.id.substr(0, dash + 1) + "fwd+bias+" + to_string(activation) + p.id.substr(p.id.find('-', dash));
  p.what += fmt::format(" +bias {} (fused)", to_string(activation));
  return p;
}

// The three directions of one shape in one dtype and layout.
void all_directions(std::vector<BenchProblem>& out, const std::string& suite, DType dtype, const DwShape& s,
                    const std::string& source) {
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    out.push_back(dw(suite, d, dtype, s, source));
}

std::vector<BenchProblem> build(const std::string& name) {
  std::vector<BenchProblem> v;
  const DType f32 = DType::f32, f16 = DType::f16, bf16 = DType::bf16;
  if (name == "normalize-ids") {
    const std::string src = "the seed study's four shapes (kvtune-demo), standardize as (x - mean) / (std + eps)";
    for (auto [rows, cols] : {std::pair{1024, 128}, {4096, 256}, {8192, 512}, {16384, 1024}})
      v.push_back(norm(name, rows, cols, f32, NormMode::standardize, src));
  } else if (name == "normalize-large") {
    const std::string src = "transformer activations, >= 256 MB of traffic per call";
    v.push_back(norm(name, 65536, 1024, f32, NormMode::layernorm, src));
    v.push_back(norm(name, 65536, 1024, bf16, NormMode::layernorm, src));
    v.push_back(norm(name, 32768, 4096, bf16, NormMode::rmsnorm, src));
    v.push_back(norm(name, 32768, 4096, f16, NormMode::layernorm, src));
  } else if (name == "normalize-narrow") {
    const std::string src = "narrow rows (cols < 64): per-feature-group statistics, issue 6's 100000 x 37";
    v.push_back(norm(name, 100000, 37, f32, NormMode::layernorm, src));
    v.push_back(norm(name, 100000, 37, bf16, NormMode::layernorm, src));
    v.push_back(norm(name, 262144, 32, f16, NormMode::rmsnorm, src));
    v.push_back(norm(name, 1048576, 16, f32, NormMode::layernorm, src));
  } else if (name == "normalize-wide") {
    const std::string src = "rows of 2^20 and 2^22 columns (per-sample normalization of a whole image or "
                            "waveform), few rows and many: split across blocks (issue 25)";
    v.push_back(norm(name, 2, 1 << 20, f32, NormMode::layernorm, src));
    v.push_back(norm(name, 128, 1 << 20, f32, NormMode::layernorm, src));
    v.push_back(norm(name, 4, 1 << 22, bf16, NormMode::layernorm, src));
    v.push_back(norm(name, 64, 1 << 22, bf16, NormMode::layernorm, src));
    v.push_back(norm(name, 8, 1 << 22, f32, NormMode::rmsnorm, src));
    v.push_back(norm(name, 256, 1 << 20, bf16, NormMode::rmsnorm, src));
  } else if (name == "mamba") {
    const std::string src = "Mamba's causal conv1d (d_conv = 4) on d_inner = 4096, 2048 tokens, batch 8";
    const DwShape s{DwLayout::ncl, 8, 4096, 1, 2048, 4, 1, true};
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, DwDirection::forward, bf16, s, src));
    v.push_back(dw(name, DwDirection::forward, bf16, {DwLayout::nlc, 8, 4096, 1, 2048, 4, 1, true}, src));
    v.push_back(with_activation(dw(name, DwDirection::forward, bf16, s, src), Activation::silu));
  } else if (name == "s4") {
    const std::string src = "S4/H3-style short 1D convolutions: H3's causal shift conv (K = 3) on 512 channels "
                            "x 4096 tokens, and a wider local conv (K = 31) in channel-last layout";
    const DwShape s{DwLayout::ncl, 16, 512, 1, 4096, 3, 1, true};
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, DwDirection::forward, bf16, {DwLayout::nlc, 16, 512, 1, 4096, 31, 1, false}, src));
  } else if (name == "mobilenetv2") {
    const std::string src = "MobileNetV2 inverted-residual depthwise 3x3 (56x56x144 stride 1, 112x112x96 stride 2), batch 32";
    const DwShape s{DwLayout::nchw, 32, 144, 56, 56, 3};
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, DwDirection::forward, bf16, {DwLayout::nhwc, 32, 144, 56, 56, 3}, src));
    v.push_back(dw(name, DwDirection::forward, f32, {DwLayout::nhwc, 32, 96, 112, 112, 3, 2}, src));
    v.push_back(with_activation(dw(name, DwDirection::forward, f32, s, src), Activation::relu));
  } else if (name == "convnext") {
    const std::string src = "ConvNeXt-T depthwise 7x7 (stage 1: 96 x 56x56, stage 3: 384 x 14x14), batch 32";
    const DwShape s{DwLayout::nchw, 32, 96, 56, 56, 7};
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, DwDirection::forward, bf16, {DwLayout::nhwc, 32, 96, 56, 56, 7}, src));
    v.push_back(dw(name, DwDirection::forward, f32, {DwLayout::nhwc, 32, 384, 14, 14, 7}, src));
    v.push_back(with_activation(dw(name, DwDirection::forward, f32, s, src), Activation::gelu_erf));
  } else if (name == "large-kernel") {
    const std::string src = "RepLKNet-31B stage 1 depthwise 31x31 (128 x 56x56), batch 16";
    const DwShape s{DwLayout::nchw, 16, 128, 56, 56, 31};
    all_directions(v, name, f32, s, src);
    v.push_back(dw(name, DwDirection::forward, bf16, {DwLayout::nhwc, 16, 128, 56, 56, 31}, src));
  } else {
    throw Error(fmt::format("kvtune-bench: unknown suite '{}' (known: normalize-ids, normalize-large, "
                            "normalize-narrow, normalize-wide, mamba, s4, mobilenetv2, convnext, large-kernel, all)",
                            name));
  }
  return v;
}

template <class Args>
Args with_fake_pointers(Args a);

template <>
NormalizeArgs with_fake_pointers(NormalizeArgs a) {
  a.x = fake_pointer(1);
  a.y = fake_pointer(2);
  return a;
}

template <>
DwConvArgs with_fake_pointers(DwConvArgs a) {
  a.x = a.dy = a.weight = fake_pointer(1);
  a.y = a.dx = a.dweight = fake_pointer(2);
  a.bias = nullptr;
  a.dbias = nullptr;
  return a;
}

}  // namespace

std::string BenchProblem::group() const {
  if (family == Family::normalize) return "normalize";
  return std::string("dwconv ") + to_string(dwconv.direction);
}

double BenchProblem::model_bytes() const {
  if (family == Family::normalize) {
    const auto a = with_fake_pointers(normalize);
    return kvtune::normalize::model_bytes(kvtune::normalize::make_problem(a), a.rows);
  }
  auto a = with_fake_pointers(dwconv);
  if (bias) a.bias = fake_pointer(3);
  return kvtune::dwconv::model_bytes(kvtune::dwconv::make_problem(a), a.n);
}

double BenchProblem::model_flops() const {
  if (family == Family::normalize) {
    const auto a = with_fake_pointers(normalize);
    return kvtune::normalize::model_flops(kvtune::normalize::make_problem(a), a.rows);
  }
  auto a = with_fake_pointers(dwconv);
  if (bias) a.bias = fake_pointer(3);
  return kvtune::dwconv::model_flops(kvtune::dwconv::make_problem(a), a.n);
}

const std::vector<std::string>& suite_names() {
  static const std::vector<std::string> names = {"normalize-ids", "normalize-large", "normalize-narrow",
                                                 "normalize-wide", "mamba",           "s4",
                                                 "mobilenetv2",    "convnext",        "large-kernel"};
  return names;
}

std::vector<BenchProblem> suite(const std::string& name, bool quick) {
  std::vector<std::string> names;  // "all", one suite, or a comma-separated list
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const std::size_t end = std::min(name.find(',', begin), name.size());
    const std::string item = name.substr(begin, end - begin);
    if (item == "all") names.insert(names.end(), suite_names().begin(), suite_names().end());
    else if (!item.empty()) names.push_back(item);
    begin = end + 1;
  }
  if (names.empty()) throw Error("kvtune-bench: no suite named");
  std::vector<BenchProblem> out;
  for (const auto& n : names) {
    auto problems = build(n);
    // Quick mode (smoke test): the first two problems of each suite.
    if (quick && problems.size() > 2) problems.resize(2);
    out.insert(out.end(), problems.begin(), problems.end());
  }
  return out;
}

nlohmann::json to_json(const BenchProblem& p) {
  nlohmann::json j = {{"id", p.id},
                      {"suite", p.suite},
                      {"what", p.what},
                      {"source", p.source},
                      {"group", p.group()},
                      {"model_bytes", p.model_bytes()},
                      {"model_flops", p.model_flops()}};
  if (p.family == Family::normalize) {
    const NormalizeArgs& a = p.normalize;
    j["family"] = "normalize";
    j["dtype"] = to_string(a.dtype);
    j["mode"] = to_string(a.mode);
    j["rows"] = a.rows;
    j["cols"] = a.cols;
    j["eps"] = a.eps;
    j["ddof"] = a.ddof;
    j["gamma"] = a.gamma != nullptr;
    j["beta"] = a.beta != nullptr;
  } else {
    const DwConvArgs& a = p.dwconv;
    j["family"] = "dwconv";
    j["dtype"] = to_string(a.dtype);
    j["direction"] = to_string(a.direction);
    j["layout"] = to_string(a.layout);
    j["n"] = a.n;
    j["c"] = a.c;
    j["h"] = a.h;
    j["w"] = a.w;
    j["kernel_h"] = a.kernel_h;
    j["kernel_w"] = a.kernel_w;
    j["stride_h"] = a.stride_h;
    j["stride_w"] = a.stride_w;
    j["dilation_h"] = a.dilation_h;
    j["dilation_w"] = a.dilation_w;
    j["pad_top"] = a.pad_top;
    j["pad_bottom"] = a.pad_bottom;
    j["pad_left"] = a.pad_left;
    j["pad_right"] = a.pad_right;
    j["causal"] = a.causal;
    j["bias"] = p.bias;
    j["activation"] = to_string(a.activation);
  }
  return j;
}

nlohmann::json suite_document(const std::string& name, bool quick) {
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : suite(name, quick)) problems.push_back(to_json(p));
  return {{"schema", "kvtune-bench-suite/1"}, {"suite", name}, {"quick", quick}, {"problems", problems}};
}

}  // namespace kvtune::bench
