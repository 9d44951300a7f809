// The tools' handler of the depthwise-convolution operator (dwconv): shapes entries, suites, space
// sizes, variants, tuning through the library, and stored keys.

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "core/cuda_check.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/op_family.h"
#include "tools/ops.h"

namespace kvtune::tools {
namespace {

namespace dw = kvtune::dwconv;

// Sizes beyond these are refused as absurd before anything is allocated (as for normalize): each
// dimension at most 2^31, each tensor (input and output) at most 2^34 elements.
constexpr std::int64_t kMaxDimension = std::int64_t(1) << 31;
constexpr std::int64_t kMaxElements = std::int64_t(1) << 34;

const std::set<std::string> kFields = {"op",      "direction", "layout", "dtype",         "n",          "c",
                                       "h",       "w",         "l",      "kernel",        "stride",     "dilation",
                                       "padding", "causal",    "bias",   "deterministic", "activation", "seq_idx"};

struct Entry {
  DwConvArgs args;  // pointers null; n is the call's batch
  dw::Problem problem;
  bool seq_idx = false;  // the call passes seq_idx (one sequence a row)
};

bool one_d(DwLayout layout) { return layout == DwLayout::ncl || layout == DwLayout::nlc; }


// A small integer field (kernel, stride, dilation, padding): refused as absurd beyond int.
int to_small(const nlohmann::json& v, const std::string& field, const std::string& where) {
  const std::int64_t value = json_integer(v, field, where);
  if (value < -65536 || value > 65536) throw InputError(fmt::format("{}: '{}' = {} is absurd", where, field, value));
  return static_cast<int>(value);
}

// An int, or an array of exactly `count` ints, for `field`. An int stands for all of them.
std::vector<int> get_ints(const nlohmann::json& entry, const char* field, std::size_t count, const std::string& what,
                          const std::string& where, int fallback) {
  if (!entry.contains(field)) return std::vector<int>(count, fallback);
  const auto& v = entry.at(field);
  if (v.is_number()) return std::vector<int>(count, to_small(v, field, where));
  if (!v.is_array() || v.size() != count)
    throw InputError(fmt::format("{}: '{}' must be an integer or {}, got {}", where, field, what, v.dump()));
  std::vector<int> out;
  for (const auto& item : v) out.push_back(to_small(item, field, where));
  return out;
}

// The shapes-entry field behind one of DwConvArgs' fields, for the library's validation messages.
std::string entry_field(const std::string& args_field, bool w_named_l) {
  if (args_field.rfind("kernel", 0) == 0) return "kernel";
  if (args_field.rfind("stride", 0) == 0) return "stride";
  if (args_field.rfind("dilation", 0) == 0) return "dilation";
  if (args_field.rfind("pad", 0) == 0) return "padding";
  if (args_field == "w" && w_named_l) return "l";
  return args_field;
}

using dw::set_placeholders;

Entry parse_entry(const nlohmann::json& entry, const std::string& where) {
  for (const auto& [name, value] : entry.items()) {
    (void)value;
    if (kFields.count(name) == 0) {
      std::string known;
      for (const auto& f : kFields) known += (known.empty() ? "" : ", ") + f;
      throw InputError(fmt::format("{}: unknown field '{}' for operator dwconv (known: {})", where, name, known));
    }
  }
  DwConvArgs a;
  a.direction = parse_direction(json_string(entry, "direction", where, "forward"), where);
  a.layout = parse_layout(json_string(entry, "layout", where, "nchw"), where);
  a.dtype = parse_dtype_name(json_string(entry, "dtype", where, "f32"), where);
  const bool is_1d = one_d(a.layout);
  const std::string layout = to_string(a.layout);

  // Sizes.
  if (entry.contains("w") && entry.contains("l"))
    throw InputError(fmt::format("{}: give 'w' or 'l', not both", where));
  if (entry.contains("l") && !is_1d)
    throw InputError(fmt::format("{}: 'l' is for 1D layouts (ncl, nlc); layout {} takes 'h' and 'w'", where, layout));
  const char* w_name = entry.contains("l") ? "l" : "w";
  for (const char* field : {"n", "c"})
    if (!entry.contains(field)) throw InputError(fmt::format("{}: missing field '{}'", where, field));
  if (!entry.contains(w_name))
    throw InputError(fmt::format("{}: missing field '{}'", where, is_1d ? "l' (or 'w" : "w"));
  if (!is_1d && !entry.contains("h")) throw InputError(fmt::format("{}: missing field 'h'", where));
  if (!entry.contains("kernel")) throw InputError(fmt::format("{}: missing field 'kernel'", where));
  a.n = json_integer(entry.at("n"), "n", where);
  a.c = json_integer(entry.at("c"), "c", where);
  a.h = entry.contains("h") ? json_integer(entry.at("h"), "h", where) : 1;
  a.w = json_integer(entry.at(w_name), w_name, where);
  if (is_1d && a.h != 1)
    throw InputError(fmt::format("{}: 'h' must be omitted or 1 for the 1D layout {}, got {}", where, layout, a.h));
  for (auto [value, field] : {std::pair{a.n, "n"}, std::pair{a.c, "c"}, std::pair{a.h, "h"}, std::pair{a.w, w_name}}) {
    if (value <= 0) throw InputError(fmt::format("{}: '{}' must be positive, got {}", where, field, value));
    if (value > kMaxDimension)
      throw InputError(fmt::format("{}: '{}' = {} is absurd: each dimension is at most 2^31", where, field, value));
  }
  if (a.c > kMaxElements / a.n || a.h > kMaxElements / (a.n * a.c) || a.w > kMaxElements / (a.n * a.c * a.h))
    throw InputError(fmt::format("{}: {} x {} x {} x {} = {:.3g} elements is absurd: at most 2^34 per tensor", where,
                                 a.n, a.c, a.h, a.w, double(a.n) * double(a.c) * double(a.h) * double(a.w)));

  // Kernel, stride, dilation, padding: [h, w] in 2D, one value in 1D.
  const std::size_t dims = is_1d ? 1 : 2;
  const char* pair = is_1d ? "[k] (1D)" : "[h, w]";
  const auto kernel = get_ints(entry, "kernel", dims, pair, where, 1);
  const auto stride = get_ints(entry, "stride", dims, pair, where, 1);
  const auto dilation = get_ints(entry, "dilation", dims, pair, where, 1);
  a.kernel_w = kernel.back(), a.stride_w = stride.back(), a.dilation_w = dilation.back();
  if (!is_1d) a.kernel_h = kernel[0], a.stride_h = stride[0], a.dilation_h = dilation[0];
  for (auto [values, field] : {std::pair{&kernel, "kernel"}, std::pair{&stride, "stride"},
                               std::pair{&dilation, "dilation"}})
    for (int v : *values)
      if (v < 1) throw InputError(fmt::format("{}: '{}' must be at least 1, got {}", where, field, v));
  const auto padding = get_ints(entry, "padding", is_1d ? 2 : 4,
                                is_1d ? "[left, right] (1D)" : "[top, bottom, left, right]", where, 0);
  for (int v : padding)
    if (v < 0) throw InputError(fmt::format("{}: 'padding' must not be negative, got {}", where, v));
  if (is_1d) {
    a.pad_left = padding[0], a.pad_right = padding[1];
  } else {
    a.pad_top = padding[0], a.pad_bottom = padding[1], a.pad_left = padding[2], a.pad_right = padding[3];
  }
  a.causal = json_bool(entry, "causal", where, false);
  if (a.causal && !is_1d)
    throw InputError(fmt::format("{}: 'causal' applies to the 1D layouts (ncl, nlc) only, not {}", where, layout));
  if (a.causal && (a.pad_left != 0 || a.pad_right != 0))
    throw InputError(fmt::format("{}: 'causal' sets the padding itself ((k - 1) x dilation on the left): omit "
                                 "'padding' or give 0",
                                 where));
  const bool bias = json_bool(entry, "bias", where, false);
  if (bias && a.direction == DwDirection::backward_data)
    throw InputError(fmt::format("{}: 'bias' is for forward (bias input) and backward_weight (dbias output), not "
                                 "backward_data",
                                 where));
  a.deterministic = json_bool(entry, "deterministic", where, true);
  a.activation = parse_activation(json_string(entry, "activation", where, "none"), where);
  const bool seq_idx = json_bool(entry, "seq_idx", where, false);

  // The library's own checks, on placeholder pointers; the output tensor's size last.
  set_placeholders(a, bias);
  if (seq_idx) {
    // Only calls whose kernel masks seq_idx key it as a dwconv problem (the others are the plain
    // problems plus a dwconv_states fix-up: that operator's entries).
    a.seq_idx = reinterpret_cast<const std::int32_t*>(std::uintptr_t(6) << 44);
    if (!a.causal || !dw::in_kernel_seq_idx(a))
      throw InputError(fmt::format("{}: 'seq_idx' is for causal 1D calls whose kernel masks it (forward; backward_data "
                                   "and backward_weight with an activation; stride 1, rows of 32 or more); other calls "
                                   "with seq_idx are dwconv_states entries",
                                   where));
  }
  try {
    dw::validate(a);
  } catch (const Error& e) {
    throw InputError(
        fmt::format("{}: '{}': {}", where, entry_field(e.context().field, std::string(w_name) == "l"), e.cause()));
  }
  Entry out;
  out.problem = dw::make_problem(a);
  const std::int64_t oh = out.problem.out_h(), ow = out.problem.out_w();
  if (oh > kMaxDimension || ow > kMaxDimension || a.c * oh > kMaxElements / a.n ||
      ow > kMaxElements / (a.n * a.c * oh))
    throw InputError(fmt::format("{}: the output {} x {} x {} x {} is absurd: at most 2^34 elements per tensor", where,
                                 a.n, a.c, oh, ow));
  a.x = a.weight = a.bias = a.dy = nullptr;
  a.y = a.dx = a.dweight = a.dbias = nullptr;
  out.seq_idx = a.seq_idx != nullptr;
  a.seq_idx = nullptr;
  out.args = a;
  return out;
}

bool is_causal(const dw::Problem& p) {
  return (p.layout == DwLayout::ncl || p.layout == DwLayout::nlc) && p.kw > 1 &&
         p.pad_left == (p.kw - 1) * p.dw && p.pad_right == 0;
}

std::string describe_problem(const dw::Problem& p, std::int64_t n) {
  const bool is_1d = one_d(p.layout);
  std::string s = fmt::format("{} {} {} ", to_string(p.direction), to_string(p.layout), to_string(p.dtype));
  if (is_1d) {
    s += fmt::format("{}x{}x{} k={}", n, p.c, p.w, p.kw);
    if (p.sw != 1) s += fmt::format(" s={}", p.sw);
    if (p.dw != 1) s += fmt::format(" d={}", p.dw);
    if (is_causal(p))
      s += " causal";
    else if (p.pad_left != 0 || p.pad_right != 0)
      s += p.pad_left == p.pad_right ? fmt::format(" pad={}", p.pad_left)
                                     : fmt::format(" pad={},{}", p.pad_left, p.pad_right);
  } else {
    s += fmt::format("{}x{}x{}x{} k={}x{}", n, p.c, p.h, p.w, p.kh, p.kw);
    if (p.sh != 1 || p.sw != 1) s += p.sh == p.sw ? fmt::format(" s={}", p.sw) : fmt::format(" s={}x{}", p.sh, p.sw);
    if (p.dh != 1 || p.dw != 1) s += p.dh == p.dw ? fmt::format(" d={}", p.dw) : fmt::format(" d={}x{}", p.dh, p.dw);
    const bool symmetric = p.pad_top == p.pad_bottom && p.pad_top == p.pad_left && p.pad_top == p.pad_right;
    if (symmetric && p.pad_top != 0)
      s += fmt::format(" pad={}", p.pad_top);
    else if (!symmetric)
      s += fmt::format(" pad={},{},{},{}", p.pad_top, p.pad_bottom, p.pad_left, p.pad_right);
  }
  if (p.bias) s += p.direction == DwDirection::backward_weight ? " +dbias" : " +bias";
  if (p.activation != Activation::none) s += fmt::format(" {}{}", to_string(p.activation), p.gradient_prep ? " grad" : "");
  if (p.seq_idx) s += " seq_idx";
  if (!p.deterministic) s += " nondet";
  const int natural = [&] {
    for (int v = 16; v > p.element_bytes(); v /= 2)
      if ((p.c * p.element_bytes()) % v == 0) return v;
    return p.element_bytes();
  }();
  if (p.align_bytes != natural) s += fmt::format(" align={}", p.align_bytes);
  return s;
}

// The label of the seed design reports compare with: smem-blocked where it runs, else the first.
std::string seed_label(const dw::Problem& p) {
  const auto seeds = dw::seed_configs(p);
  for (const auto& [name, config] : seeds)
    if (name == "smem-blocked") return config.label();
  return seeds.empty() ? std::string() : seeds.front().second.label();
}

// Suite entries.
nlohmann::json conv2d(const char* direction, const char* layout, const char* dtype, std::int64_t n, std::int64_t c,
                      std::int64_t hw, int k, int stride, int pad, bool bias = false) {
  return {{"op", "dwconv"}, {"direction", direction}, {"layout", layout}, {"dtype", dtype},
          {"n", n},         {"c", c},                 {"h", hw},         {"w", hw},
          {"kernel", {k, k}}, {"stride", stride},     {"padding", pad},  {"bias", bias}};
}

nlohmann::json conv1d_causal(const char* direction, const char* layout, const char* dtype, std::int64_t n,
                             std::int64_t c, std::int64_t l, int k, bool bias = false) {
  return {{"op", "dwconv"}, {"direction", direction}, {"layout", layout}, {"dtype", dtype}, {"n", n},
          {"c", c},         {"l", l},                 {"kernel", k},     {"causal", true},  {"bias", bias}};
}

// The tools' side of the family (tools/op_family.h, FamilyProblem).
struct DwConvSide {
  using Entry = tools::Entry;
  static std::int64_t call_size(const Entry& e) { return e.args.n; }
  static std::string describe(const dw::Problem& p, std::int64_t n) { return describe_problem(p, n); }
  static Entry parse(const nlohmann::json& entry, const std::string& where) { return parse_entry(entry, where); }
  static std::string seed_label(const dw::Problem& p) { return tools::seed_label(p); }
  static std::vector<std::string> suite_names() { return {"mobilenetv2", "convnext", "mamba", "s4", "large31"}; }
  // The shapes entry of a call of `n` images; `causal` writes a causal 1D convolution as such
  // (otherwise its padding is explicit: causal is only a padding).
  static nlohmann::json entry_json(const dw::Problem& p, std::int64_t n, bool causal) {
    nlohmann::json j = {{"op", "dwconv"},
                        {"direction", to_string(p.direction)},
                        {"layout", to_string(p.layout)},
                        {"dtype", to_string(p.dtype)},
                        {"n", n},
                        {"c", p.c},
                        {"bias", p.bias},
                        {"deterministic", p.deterministic}};
    if (p.gradient_prep)
      throw InputError("a gradient prep problem: the backward_data call with the activation tunes it");
    if (p.activation != Activation::none) j["activation"] = to_string(p.activation);
    if (p.seq_idx) j["seq_idx"] = true;
    if (one_d(p.layout)) {
      if (p.h != 1 || p.kh != 1 || p.sh != 1 || p.dh != 1 || p.pad_top != 0 || p.pad_bottom != 0)
        throw InputError("a 1D key with a height, vertical kernel, stride, dilation or padding");
      j["l"] = p.w;
      j["kernel"] = p.kw;
      j["stride"] = p.sw;
      j["dilation"] = p.dw;
      if (causal) j["causal"] = true;
      j["padding"] = causal ? nlohmann::json::array({0, 0}) : nlohmann::json::array({p.pad_left, p.pad_right});
    } else {
      j["h"] = p.h;
      j["w"] = p.w;
      j["kernel"] = {p.kh, p.kw};
      j["stride"] = {p.sh, p.sw};
      j["dilation"] = {p.dh, p.dw};
      j["padding"] = {p.pad_top, p.pad_bottom, p.pad_left, p.pad_right};
    }
    return j;
  }
  static nlohmann::json entry_of(const Entry& e) {
    nlohmann::json j = entry_json(e.problem, e.args.n, e.args.causal);
    if (one_d(e.problem.layout)) j["causal"] = e.args.causal;
    // The call's activation (a backward problem that is not fused is keyed as the plain one: the call
    // still has it).
    if (e.args.activation != Activation::none) j["activation"] = to_string(e.args.activation);
    return j;
  }
  // seq_idx takes a causal call (its padding is the same).
  static nlohmann::json entry_of_key(const dw::Problem& p) { return entry_json(p, p.n, p.seq_idx); }
  static std::vector<nlohmann::json> suite(const std::string& name) {
    if (name == "mobilenetv2") {
      // MobileNetV2's 3x3 depthwise layers at batch 32 (pad 1), training directions mixed.
      return {conv2d("forward", "nchw", "f32", 32, 32, 112, 3, 1, 1),
              conv2d("forward", "nchw", "f32", 32, 96, 112, 3, 2, 1),
              conv2d("backward_data", "nchw", "f32", 32, 144, 56, 3, 1, 1),
              conv2d("backward_weight", "nchw", "f32", 32, 192, 28, 3, 1, 1),
              conv2d("forward", "nhwc", "bf16", 32, 576, 14, 3, 1, 1),
              conv2d("backward_data", "nhwc", "bf16", 32, 96, 112, 3, 2, 1)};
    }
    if (name == "convnext") {
      // ConvNeXt-T's 7x7 depthwise layers (pad 3, with bias) at batch 32, NCHW and NHWC.
      return {conv2d("forward", "nchw", "f32", 32, 96, 56, 7, 1, 3, true),
              conv2d("backward_data", "nchw", "f32", 32, 192, 28, 7, 1, 3),
              conv2d("backward_weight", "nchw", "f32", 32, 384, 14, 7, 1, 3, true),
              conv2d("forward", "nhwc", "f32", 32, 192, 28, 7, 1, 3, true),
              conv2d("backward_data", "nhwc", "f32", 32, 384, 14, 7, 1, 3),
              conv2d("backward_weight", "nhwc", "f32", 32, 96, 56, 7, 1, 3, true)};
    }
    if (name == "mamba") {
      // Mamba's causal conv1d (K = 4, with bias), NCL: d_inner 2048 at L 2048 (bf16) and 4096 at
      // L 4096 (f32).
      return {conv1d_causal("forward", "ncl", "bf16", 8, 2048, 2048, 4, true),
              conv1d_causal("backward_data", "ncl", "bf16", 8, 2048, 2048, 4),
              conv1d_causal("backward_weight", "ncl", "bf16", 8, 2048, 2048, 4, true),
              conv1d_causal("forward", "ncl", "f32", 4, 4096, 4096, 4, true),
              conv1d_causal("backward_data", "ncl", "f32", 4, 4096, 4096, 4),
              conv1d_causal("backward_weight", "ncl", "f32", 4, 4096, 4096, 4, true)};
    }
    if (name == "s4") {
      // Long causal kernels (S4ConvD-style short convolutions), f32, N 8, C 1024, L 4096.
      return {conv1d_causal("forward", "ncl", "f32", 8, 1024, 4096, 31),
              conv1d_causal("forward", "nlc", "f32", 8, 1024, 4096, 63),
              conv1d_causal("backward_data", "ncl", "f32", 8, 1024, 4096, 31),
              conv1d_causal("backward_data", "nlc", "f32", 8, 1024, 4096, 63),
              conv1d_causal("backward_weight", "ncl", "f32", 8, 1024, 4096, 31),
              conv1d_causal("backward_weight", "nlc", "f32", 8, 1024, 4096, 63)};
    }
    if (name == "large31") {
      // RepLKNet-style 31x31 depthwise kernels (pad 15), NCHW f32, batch 16, C 128.
      return {conv2d("forward", "nchw", "f32", 16, 128, 14, 31, 1, 15),
              conv2d("backward_data", "nchw", "f32", 16, 128, 14, 31, 1, 15),
              conv2d("forward", "nchw", "f32", 16, 128, 56, 31, 1, 15),
              conv2d("backward_data", "nchw", "f32", 16, 128, 56, 31, 1, 15)};
    }
    throw InputError(fmt::format("dwconv has no suite '{}'", name));
  }

  static std::string fields() {
    return "n, c, w (or l in 1D), h (2D), kernel (required), direction (forward|backward_data|backward_weight), "
           "layout (ncl|nlc|nchw|nhwc), dtype (f32|f16|bf16), stride, dilation, padding, causal, bias, "
           "deterministic, activation (none|silu|gelu_tanh|gelu_erf|relu), seq_idx (causal 1D calls whose kernel masks it)";
  }

  static SpaceSize space(const dw::Problem& p) {
    // The declared axes. tiled: outputs per thread 1..32, threads along W (or C) and rows per block
    // 1..1024 (powers of two), vector channels 1..8, halo and filter staging, rows per thread 1..8,
    // runs per thread 1..8 (powers of two), flat items (one row of 32+ threads, global halo, taps in
    // registers); plus the two direct designs; mma: 8..64 channels a block (multiples of 8), 1..16
    // warps, 1..16 rows (powers of two), 1..16 n-tiles a segment. wgrad: channels per block and position threads 1..1024, taps per
    // block 1..64, splits 1..32768 (powers of two), ordered or atomic reduction, register-tiled runs of
    // 4 or 8 outputs (or none) with vectors of 2..8 along W and 2..8 rows per thread (or none); staged x
    // planes: one channel a block, position threads 1..1024, taps 1..64, splits 1..64 (whole images),
    // both reductions, the same tiling points. Seeds and a heuristic outside the axes count too, and
    // so do 1D rows' runs of 16.
    const auto tuned = detail::tuning_configs<detail::DwConvFamily>(p, 0);
    std::set<std::string> runnable;
    std::int64_t total = 0;
    const auto count = [&](const dw::Config& c) {  // a declared point; only the runnable ones named
      ++total;
      if (dw::is_runnable(p, c)) runnable.insert(c.label());
    };
    if (p.direction == DwDirection::backward_weight) {
      // ~7M points: counted, and only the valid ones named (a set of every label took minutes).
      const auto pow2 = [](int v, int hi) { return v >= 1 && v <= hi && (v & (v - 1)) == 0; };
      const auto tiling = [&](int rw, int vc, int rh) {  // runs, their vectors and rows: canonical points
        return (rw == 1 || rw == 4 || rw == 8) && pow2(vc, 8) && pow2(rh, 8) && vc <= rw && (rw > 1 || rh == 1);
      };
      const auto declared = [&](const dw::Config& config) {
        if (config.kernel() != dw::Kernel::wgrad) return false;
        const dw::WgradConfig& c = config.wgrad();
        const bool splits = c.staged ? c.channels_per_block == 1 && c.splits >= 1 && c.splits <= 64 : pow2(c.splits, 32768);
        return pow2(c.channels_per_block, 1024) && pow2(c.position_threads, 1024) && c.taps_per_block >= 1 &&
               c.taps_per_block <= 64 && splits && tiling(c.outputs_per_thread, c.vector_channels, c.rows_per_thread);
      };
      // Every canonical (runs, vectors, rows) point of a block shape, splits and reduction; staged or not.
      const auto tilings = [&](int ct, int py, int tg, int splits, int atomic, bool staged) {
        for (int rw : {1, 4, 8})
          for (int vc : {1, 2, 4, 8})
            for (int rh : {1, 2, 4, 8}) {
              if (!tiling(rw, vc, rh)) continue;
              auto c = dw::wgrad_config(ct, py, tg, splits, atomic, rw, vc, rh);
              c.staged = staged;
              count(c);
            }
      };
      for (int ct = 1; ct <= 1024; ct *= 2)
        for (int py = 1; py <= 1024; py *= 2)
          for (int tg = 1; tg <= 64; ++tg)
            for (int splits = 1; splits <= 32768; splits *= 2)
              for (int atomic : {0, 1}) tilings(ct, py, tg, splits, atomic, false);
      for (int py = 1; py <= 1024; py *= 2)
        for (int tg = 1; tg <= 64; ++tg)
          for (int splits = 1; splits <= 64; ++splits)
            for (int atomic : {0, 1}) tilings(1, py, tg, splits, atomic, true);
      for (const auto& c : tuned) total += declared(c) ? 0 : 1;
    } else {
      // ~1M points: counted, and only the runnable ones named.
      const auto pow2 = [](int v, int hi) { return v >= 1 && v <= hi && (v & (v - 1)) == 0; };
      const auto declared = [&](const dw::Config& config) {
        switch (config.kernel()) {
          case dw::Kernel::mma: {
            const dw::MmaConfig& c = config.mma();
            return c.channels_per_block % 8 == 0 && c.channels_per_block >= 8 && c.channels_per_block <= 64 &&
                   pow2(c.warps, 16) && pow2(c.tile_rows, 16) && c.segment_tiles >= 1 && c.segment_tiles <= 16;
          }
          case dw::Kernel::tiled: {
            const dw::TiledConfig& c = config.tiled();
            return c.outputs_per_thread >= 1 && c.outputs_per_thread <= 32 && pow2(c.threads_x, 1024) &&
                   pow2(c.threads_y, 1024) && pow2(c.vector_channels, 8) && pow2(c.rows_per_thread, 8) &&
                   pow2(c.runs_per_thread, 8);
          }
          case dw::Kernel::direct: return true;
          case dw::Kernel::wgrad: break;
        }
        return false;
      };
      for (bool coalesced : {false, true}) count(dw::DirectConfig{coalesced});
      for (int rw = 1; rw <= 32; ++rw)
        for (int tx = 1; tx <= 1024; tx *= 2)
          for (int ty = 1; ty <= 1024; ty *= 2)
            for (int vc = 1; vc <= 8; vc *= 2)
              for (int halo : {0, 1})
                for (int filter : {0, 1})
                  for (int rh : {1, 2, 4, 8})
                    for (int rt : {1, 2, 4, 8}) {
                      count(dw::tiled_config(rw, tx, ty, vc, halo, filter, rh, rt));
                      if (ty == 1 && tx >= 32 && !halo && !filter && rt == 1) count(dw::flat_config(rw, tx, vc, rh));
                    }
      for (int cb = 8; cb <= 64; cb += 8)
        for (int warps = 1; warps <= 16; warps *= 2)
          for (int tr = 1; tr <= 16; tr *= 2)
            for (int nt = 1; nt <= 16; ++nt) count(dw::mma_config(cb, tr, nt, warps));
      for (const auto& c : tuned) total += declared(c) ? 0 : 1;
    }
    SpaceSize s;
    s.total = total;
    s.runnable = static_cast<std::int64_t>(runnable.size());
    s.tuned = static_cast<std::int64_t>(tuned.size());
    return s;
  }

  static std::string run_library(const Entry& e, const OpProblem& self, Context& context) {
    const dw::Problem& p = e.problem;
    const std::size_t elem = static_cast<std::size_t>(p.element_bytes());
    const std::size_t in_elems = static_cast<std::size_t>(e.args.n * p.c * p.h * p.w);
    const std::size_t out_elems = static_cast<std::size_t>(e.args.n * p.c * p.out_h() * p.out_w());
    const std::size_t weight_elems = static_cast<std::size_t>(p.c) * static_cast<std::size_t>(p.kh * p.kw);
    DwConvArgs args = e.args;
    std::vector<std::unique_ptr<DeviceMemory>> buffers;
    const auto alloc = [&](std::size_t elems) {
      buffers.push_back(std::make_unique<DeviceMemory>(elems * elem, 0x3c));
      return buffers.back()->ptr();
    };
    switch (p.direction) {
      case DwDirection::forward:
        args.x = alloc(in_elems), args.weight = alloc(weight_elems), args.y = alloc(out_elems);
        if (p.bias) args.bias = alloc(static_cast<std::size_t>(p.c));
        break;
      case DwDirection::backward_data:
        args.dy = alloc(out_elems), args.weight = alloc(weight_elems), args.dx = alloc(in_elems);
        break;
      case DwDirection::backward_weight:
        args.x = alloc(in_elems), args.dy = alloc(out_elems), args.dweight = alloc(weight_elems);
        if (p.bias) args.dbias = alloc(static_cast<std::size_t>(p.c));
        break;
    }
    if (args.activation != Activation::none && p.direction != DwDirection::forward) {
      // z recomputed from x, weight and a bias.
      if (args.x == nullptr) args.x = alloc(in_elems);
      if (args.weight == nullptr) args.weight = alloc(weight_elems);
      args.bias = alloc(static_cast<std::size_t>(p.c));
    }
    std::unique_ptr<DeviceMemory> seq;
    if (e.seq_idx) {  // one sequence a row: every id the same (the fill's bytes)
      seq = std::make_unique<DeviceMemory>(static_cast<std::size_t>(e.args.n * p.w) * 4, 0x3c);
      args.seq_idx = static_cast<const std::int32_t*>(seq->ptr());
    }
    dw::validate(args);
    return call_library(
        self, dw::make_problem(args, detail::Buckets::parse(self.buckets())).key(),
        [&] { return context.dwconv_variant(args); }, [&] { context.dwconv(args); });
  }
};

}  // namespace

template <>
std::unique_ptr<OpHandler> make_handler<detail::DwConvFamily>() {
  return std::make_unique<FamilyHandler<detail::DwConvFamily, DwConvSide>>();
}

}  // namespace kvtune::tools
