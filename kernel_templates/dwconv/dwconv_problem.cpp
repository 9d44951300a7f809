// The dwconv family's problems as values: equality, keys and their
// decoder, the argument rules (validate), the problem of a call (make_problem, the activation's
// gradient prep) and placeholder tensors for checks without a GPU. The space, heuristic, geometry,
// compile requests and cost model: dwconv_family.cpp.
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_sizes.h"

#include <cstdint>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/byte_range.h"
#include "core/hash.h"
#include "core/json_fields.h"
#include "core/key_text.h"

namespace kvtune::dwconv {
namespace {

constexpr int kMaxKernel = 63;

Error invalid(const DwConvArgs& a, const char* field, const std::string& why) {
  return Error(Error::Context{"dwconv",
                              fmt::format("{} {} {} n={} c={} h={} w={} k={}x{}", to_string(a.direction),
                                          to_string(a.layout), to_string(a.dtype), a.n, a.c, a.h, a.w, a.kernel_h,
                                          a.kernel_w),
                              "", "", field},
               why);
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

bool Problem::operator==(const Problem& o) const {
  return direction == o.direction && layout == o.layout && dtype == o.dtype && n == o.n && c == o.c && h == o.h &&
         w == o.w && kh == o.kh && kw == o.kw && sh == o.sh && sw == o.sw && dh == o.dh && dw == o.dw &&
         pad_top == o.pad_top && pad_bottom == o.pad_bottom && pad_left == o.pad_left && pad_right == o.pad_right &&
         bias == o.bias && deterministic == o.deterministic && align_bytes == o.align_bytes && n_exact == o.n_exact &&
         activation == o.activation && gradient_prep == o.gradient_prep && seq_idx == o.seq_idx;
}

std::string Problem::key() const {
  std::string key =
      fmt::format("dwconv,{},{},{},n{}{},c={},h={},w={},k={}x{},s={}x{},d={}x{},pad={},{},{},{},bias={},det={},align={}",
                  to_string(direction), to_string(layout), to_string(dtype), n_exact ? "=" : "<=", n, c, h, w, kh, kw, sh, sw, dh,
                  dw, pad_top, pad_bottom, pad_left, pad_right, bias ? 1 : 0, deterministic ? 1 : 0, align_bytes);
  // Only with an activation, so that the keys of every other problem (and the caches holding them) stay.
  if (activation != Activation::none) key += fmt::format(",act={}{}", to_string(activation), gradient_prep ? "_grad" : "");
  if (seq_idx) key += ",seq=1";
  return key;
}

int Problem::element_bytes() const { return dtype == DType::f32 ? 4 : 2; }
std::int64_t Problem::out_h() const { return (h + pad_top + pad_bottom - std::int64_t(dh) * (kh - 1) - 1) / sh + 1; }
std::int64_t Problem::out_w() const { return (w + pad_left + pad_right - std::int64_t(dw) * (kw - 1) - 1) / sw + 1; }
std::int64_t Problem::src_h() const { return direction == DwDirection::backward_data ? out_h() : h; }
std::int64_t Problem::src_w() const { return direction == DwDirection::backward_data ? out_w() : w; }
std::int64_t Problem::dst_h() const { return direction == DwDirection::backward_data ? h : out_h(); }
std::int64_t Problem::dst_w() const { return direction == DwDirection::backward_data ? w : out_w(); }

bool Problem::fixed_shape() const {
  constexpr std::int64_t kMax = std::numeric_limits<int>::max();
  const bool two_d = layout == DwLayout::nhwc || layout == DwLayout::nchw;
  return two_d && c <= kMax && h <= kMax && w <= kMax && out_h() <= kMax && out_w() <= kMax;
}

std::size_t ProblemHash::operator()(const Problem& p) const {
  // Over the fields, not key(): this runs on every dispatch, which must not format strings.
  std::uint64_t h = detail::kFnvOffset;
  const auto mix = [&h](std::int64_t v) {
    h ^= static_cast<std::uint64_t>(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  };
  for (std::int64_t v : {std::int64_t(p.direction), std::int64_t(p.layout), std::int64_t(p.dtype), p.n, p.c, p.h, p.w,
                         std::int64_t(p.kh), std::int64_t(p.kw), std::int64_t(p.sh), std::int64_t(p.sw),
                         std::int64_t(p.dh), std::int64_t(p.dw), std::int64_t(p.pad_top), std::int64_t(p.pad_bottom),
                         std::int64_t(p.pad_left), std::int64_t(p.pad_right), std::int64_t(p.bias),
                         std::int64_t(p.deterministic), std::int64_t(p.align_bytes), std::int64_t(p.n_exact),
                         std::int64_t(p.epilogue()), std::int64_t(p.seq_idx)})
    mix(v);
  return static_cast<std::size_t>(h);
}

void validate(const DwConvArgs& a) {
  if (static_cast<unsigned>(a.direction) > static_cast<unsigned>(DwDirection::backward_weight))
    throw invalid(a, "direction", fmt::format("unknown direction value {}", static_cast<int>(a.direction)));
  if (static_cast<unsigned>(a.layout) > static_cast<unsigned>(DwLayout::nhwc))
    throw invalid(a, "layout", fmt::format("unknown layout value {}", static_cast<int>(a.layout)));
  if (static_cast<unsigned>(a.dtype) > static_cast<unsigned>(DType::bf16))
    throw invalid(a, "dtype", fmt::format("unknown dtype value {}", static_cast<int>(a.dtype)));
  if (static_cast<unsigned>(a.activation) > static_cast<unsigned>(Activation::relu))
    throw invalid(a, "activation", fmt::format("unknown activation value {}", static_cast<int>(a.activation)));
  const bool act = a.activation != Activation::none;
  const bool one_d = a.layout == DwLayout::ncl || a.layout == DwLayout::nlc;
  for (auto [value, field] : {std::pair{a.n, "n"}, std::pair{a.c, "c"}, std::pair{a.h, "h"}, std::pair{a.w, "w"}})
    if (value <= 0) throw invalid(a, field, fmt::format("{} must be positive, got {}", field, value));
  constexpr std::int64_t kMaxElements = std::int64_t(1) << 40;
  if (a.c > kMaxElements / a.n || a.h > kMaxElements / (a.n * a.c) || a.w > kMaxElements / (a.n * a.c * a.h))
    throw invalid(a, "n", "n x c x h x w exceeds 2^40 elements");
  for (auto [value, field] : {std::pair{a.kernel_h, "kernel_h"}, std::pair{a.kernel_w, "kernel_w"}})
    if (value < 1 || value > kMaxKernel)
      throw invalid(a, field, fmt::format("{} must be in 1..{}, got {}", field, kMaxKernel, value));
  for (auto [value, field] : {std::pair{a.stride_h, "stride_h"}, std::pair{a.stride_w, "stride_w"},
                              std::pair{a.dilation_h, "dilation_h"}, std::pair{a.dilation_w, "dilation_w"}})
    if (value < 1 || value > 64) throw invalid(a, field, fmt::format("{} must be in 1..64, got {}", field, value));
  for (auto [value, field] : {std::pair{a.pad_top, "pad_top"}, std::pair{a.pad_bottom, "pad_bottom"},
                              std::pair{a.pad_left, "pad_left"}, std::pair{a.pad_right, "pad_right"}})
    if (value < 0 || value > 4096) throw invalid(a, field, fmt::format("{} must be in 0..4096, got {}", field, value));
  if (one_d) {
    if (a.h != 1) throw invalid(a, "h", "1D layouts need h = 1");
    if (a.kernel_h != 1 || a.stride_h != 1 || a.dilation_h != 1 || a.pad_top != 0 || a.pad_bottom != 0)
      throw invalid(a, "kernel_h", "1D layouts need kernel_h = stride_h = dilation_h = 1 and no top/bottom padding");
  }
  if (a.causal) {
    if (!one_d) throw invalid(a, "causal", "causal applies to 1D layouts (ncl, nlc) only");
    if (a.pad_left != 0 || a.pad_right != 0)
      throw invalid(a, "causal", "causal sets the padding itself: pad_left and pad_right must be 0");
  }
  const Problem p = make_problem(a);
  if (p.out_h() < 1 || p.out_w() < 1)
    throw invalid(a, p.out_h() < 1 ? "kernel_h" : "kernel_w",
                  fmt::format("the dilated kernel is larger than the padded input: output {}x{}", p.out_h(), p.out_w()));
  // The output is bounded like the input (padding can make it larger).
  if (p.out_h() > kMaxElements / (a.n * a.c) || p.out_w() > kMaxElements / (a.n * a.c * p.out_h()))
    throw invalid(a, "pad_left", fmt::format("the output n x c x {} x {} exceeds 2^40 elements", p.out_h(), p.out_w()));
  const std::size_t elem = a.dtype == DType::f32 ? 4 : 2;
  auto need = [&](const void* ptr, const char* field) {
    if (ptr == nullptr) throw invalid(a, field, fmt::format("{} is a null pointer", field));
    if (address(ptr) % elem != 0) throw invalid(a, field, fmt::format("{} must be aligned to {} bytes", field, elem));
  };
  auto optional = [&](const void* ptr, const char* field) {
    if (ptr != nullptr && address(ptr) % elem != 0)
      throw invalid(a, field, fmt::format("{} must be aligned to {} bytes", field, elem));
  };
  switch (a.direction) {
    case DwDirection::forward:
      need(a.x, "x"), need(a.weight, "weight"), need(a.y, "y"), optional(a.bias, "bias");
      break;
    case DwDirection::backward_data:
      need(a.dy, "dy"), need(a.weight, "weight"), need(a.dx, "dx");
      if (act) need(a.x, "x"), optional(a.bias, "bias");  // z recomputed from x, weight and bias
      break;
    case DwDirection::backward_weight:
      need(a.x, "x"), need(a.dy, "dy"), need(a.dweight, "dweight"), optional(a.dbias, "dbias");
      if (act) need(a.weight, "weight"), optional(a.bias, "bias");
      break;
  }
  // No output overlaps an input or another output: an in-place convolution reads values another
  // thread already overwrote. Pointers the direction does not use are ignored.
  using detail::byte_range;
  const auto bytes = [elem](std::int64_t elements) { return elements * static_cast<std::int64_t>(elem); };
  const std::int64_t in_elements = a.n * a.c * a.h * a.w, out_elements = a.n * a.c * p.out_h() * p.out_w();
  const auto weight = byte_range("weight", a.weight, bytes(a.c * a.kernel_h * a.kernel_w));
  std::optional<std::pair<detail::ByteRange, detail::ByteRange>> hit;
  switch (a.direction) {
    case DwDirection::forward:
      hit = detail::first_overlap({byte_range("y", a.y, bytes(out_elements))},
                                  {byte_range("x", a.x, bytes(in_elements)), weight, byte_range("bias", a.bias, bytes(a.c))});
      break;
    case DwDirection::backward_data:
      // With an activation, x and bias are inputs too (null ranges are empty).
      hit = detail::first_overlap({byte_range("dx", a.dx, bytes(in_elements))},
                                  {byte_range("dy", a.dy, bytes(out_elements)), weight,
                                   byte_range("x", act ? a.x : nullptr, bytes(in_elements)),
                                   byte_range("bias", act ? a.bias : nullptr, bytes(a.c))});
      break;
    case DwDirection::backward_weight:
      hit = detail::first_overlap(
          {byte_range("dweight", a.dweight, bytes(a.c * a.kernel_h * a.kernel_w)), byte_range("dbias", a.dbias, bytes(a.c))},
          {byte_range("x", a.x, bytes(in_elements)), byte_range("dy", a.dy, bytes(out_elements)),
           byte_range("weight", act ? a.weight : nullptr, bytes(a.c * a.kernel_h * a.kernel_w)),
           byte_range("bias", act ? a.bias : nullptr, bytes(a.c))});
      break;
  }
  if (hit) throw invalid(a, hit->first.field, fmt::format("{} overlaps {}", hit->first.field, hit->second.field));
}

Problem make_problem(const DwConvArgs& a, const detail::Buckets& buckets) {
  Problem p;
  p.direction = a.direction;
  p.layout = a.layout;
  p.dtype = a.dtype;
  p.n = buckets.bucket(a.n);
  p.n_exact = buckets.exact();
  p.c = a.c;
  p.h = a.h;
  p.w = a.w;
  p.kh = a.kernel_h;
  p.kw = a.kernel_w;
  p.sh = a.stride_h;
  p.sw = a.stride_w;
  p.dh = a.dilation_h;
  p.dw = a.dilation_w;
  p.pad_top = a.pad_top;
  p.pad_bottom = a.pad_bottom;
  p.pad_left = a.causal ? (a.kernel_w - 1) * a.dilation_w : a.pad_left;
  p.pad_right = a.causal ? 0 : a.pad_right;
  p.bias = a.direction == DwDirection::forward ? a.bias != nullptr
           : a.direction == DwDirection::backward_weight ? a.dbias != nullptr
                                                        : false;
  p.deterministic = a.direction != DwDirection::backward_weight || a.deterministic;
  // A backward direction with an activation is the plain problem run on the gradient prep's output
  // (workspace, 256-byte aligned) in place of dy; backward_data then reads no x. The fused 1D forms
  // (weight and data gradients) read x and dy themselves.
  const bool fused = fused_weight_gradient(a) || fused_data_gradient(a);
  const bool prepped = a.direction != DwDirection::forward && a.activation != Activation::none && !fused;
  p.activation = a.direction == DwDirection::forward || fused ? a.activation : Activation::none;
  p.seq_idx = in_kernel_seq_idx(a);
  const void* x = prepped && a.direction == DwDirection::backward_data ? nullptr : a.x;
  const void* dy = prepped ? nullptr : a.dy;
  const int elem = p.element_bytes();
  p.align_bytes = elem;
  for (int v = 16; v > elem; v /= 2) {
    const auto ok = [v](const void* ptr) { return ptr == nullptr || address(ptr) % v == 0; };
    if (ok(x) && ok(a.y) && ok(dy) && ok(a.dx) && (p.c * elem) % v == 0) {
      p.align_bytes = v;
      break;
    }
  }
  return p;
}

bool fused_weight_gradient(const DwConvArgs& a) {
  if (a.direction != DwDirection::backward_weight || a.activation == Activation::none || a.initial_state != nullptr)
    return false;
  if (a.layout != DwLayout::ncl && a.layout != DwLayout::nlc) return false;
  // A run of 4 outputs with every tap: its window plus one scalar "vector" within the register
  // budget, and rows of 4 outputs or more (dwconv_family.cpp's check_wgrad).
  constexpr int kRun = 4;
  const std::int64_t pad_left = a.causal ? std::int64_t(a.kernel_w - 1) * a.dilation_w : a.pad_left;
  const std::int64_t pad_right = a.causal ? 0 : a.pad_right;
  const std::int64_t span = std::int64_t(a.kernel_w - 1) * a.dilation_w;
  const std::int64_t out_w = (a.w + pad_left + pad_right - span - 1) / a.stride_w + 1;
  return sizes::window(0, a.kernel_w, a.stride_w, a.dilation_w, 0, kRun) + 1 <= sizes::kMaxWindowRegisters &&
         out_w >= kRun;
}

namespace {

// 1D stride-1 rows the tiled kernel's one-row forms take: registers for a run of one output's windows
// (`windows` spans besides it) within the budget (dwconv_family.cpp's check_tiled), rows of 32 or
// more (the smallest channel-first tiles are 64 threads wide; shorter rows are launch-bound either way).
bool one_row_tiles_fit(const DwConvArgs& a, int windows) {
  const std::int64_t span = std::int64_t(a.kernel_w - 1) * a.dilation_w;
  return (a.layout == DwLayout::ncl || a.layout == DwLayout::nlc) && a.stride_w == 1 &&
         1 + windows * span <= sizes::kMaxWindowRegisters && a.w >= 32;
}

}  // namespace

bool fused_data_gradient(const DwConvArgs& a) {
  if (a.direction != DwDirection::backward_data || a.activation == Activation::none) return false;
  // States fix the gradient prep's output up (dwconv_states): they need it in memory. seq_idx is
  // masked in the kernel.
  if (a.initial_state != nullptr || a.dinitial_state != nullptr || a.final_state != nullptr) return false;
  return one_row_tiles_fit(a, 2);  // the x window: 1 + 2 span
}

bool in_kernel_seq_idx(const DwConvArgs& a) {
  if (a.seq_idx == nullptr || a.initial_state != nullptr || a.final_state != nullptr || a.dinitial_state != nullptr)
    return false;
  if (fused_weight_gradient(a) || fused_data_gradient(a)) return true;
  // Forward (seq_idx implies causal: dwconv_states::validate).
  return a.direction == DwDirection::forward && a.causal && one_row_tiles_fit(a, 1);
}

std::optional<Problem> gradient_prep_problem(const DwConvArgs& a, const detail::Buckets& buckets) {
  if (a.direction == DwDirection::forward || a.activation == Activation::none || fused_weight_gradient(a) ||
      fused_data_gradient(a))
    return std::nullopt;
  // The forward convolution of the same x, weight and bias, reading dy; its output is workspace.
  DwConvArgs f = a;
  f.direction = DwDirection::forward;
  f.y = f.dx = f.dweight = f.dbias = nullptr;
  Problem p = make_problem(f, buckets);
  p.gradient_prep = true;
  return p;
}

std::size_t gradient_prep_bytes(const DwConvArgs& a) {
  DwConvArgs f = a;
  f.direction = DwDirection::forward;
  const Problem p = make_problem(f, detail::Buckets{});
  const std::size_t bytes = std::size_t(a.n * a.c * p.out_h() * p.out_w()) * std::size_t(p.element_bytes());
  return (bytes + 255) / 256 * 256;
}

void set_placeholders(DwConvArgs& a, bool bias) {
  // Tensors at least 2^44 bytes apart: disjoint for every size validate() accepts (2^42 bytes).
  const auto at = [](std::uintptr_t slot) { return reinterpret_cast<void*>(slot << 44); };
  a.x = a.weight = a.dy = nullptr;
  a.y = a.dx = a.dweight = a.dbias = nullptr;
  a.bias = nullptr;
  switch (a.direction) {
    case DwDirection::forward:
      a.x = at(1), a.weight = at(2), a.y = at(3);
      if (bias) a.bias = at(4);
      break;
    case DwDirection::backward_data:
      a.dy = at(1), a.weight = at(2), a.dx = at(3);
      if (a.activation != Activation::none) a.x = at(5);  // z recomputed from x
      break;
    case DwDirection::backward_weight:
      a.x = at(1), a.dy = at(2), a.dweight = at(3);
      if (bias) a.dbias = at(4);
      if (a.activation != Activation::none) a.weight = at(5);  // z recomputed with the weight
      break;
  }
}

std::optional<Problem> problem_from_key(const std::string& key) {
  using detail::key_number;
  using detail::key_value;
  const std::vector<std::string> parts = detail::split_key(key);
  if (parts.size() < 18 || parts.size() > 20 || parts[0] != "dwconv") return std::nullopt;
  // "AxB" with small numbers.
  const auto two = [](const std::optional<std::string>& text) -> std::optional<std::pair<int, int>> {
    if (!text) return std::nullopt;
    const auto x = text->find('x');
    if (x == std::string::npos) return std::nullopt;
    const auto a = key_number(text->substr(0, x)), b = key_number(text->substr(x + 1));
    if (!a || !b || *a > 65536 || *b > 65536) return std::nullopt;
    return std::pair{static_cast<int>(*a), static_cast<int>(*b)};
  };
  static constexpr DwDirection kDirections[] = {DwDirection::forward, DwDirection::backward_data,
                                                DwDirection::backward_weight};
  static constexpr DwLayout kLayouts[] = {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc};
  static constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
  const auto direction = detail::key_enum(parts[1], kDirections);
  const auto layout = detail::key_enum(parts[2], kLayouts);
  const auto dtype = detail::key_enum(parts[3], kDTypes);
  auto n = key_number(key_value(parts[4], "n<="));
  const bool exact = !n;
  if (exact) n = key_number(key_value(parts[4], "n="));
  const auto c = key_number(key_value(parts[5], "c="));
  const auto h = key_number(key_value(parts[6], "h="));
  const auto w = key_number(key_value(parts[7], "w="));
  const auto k = two(key_value(parts[8], "k="));
  const auto s = two(key_value(parts[9], "s="));
  const auto d = two(key_value(parts[10], "d="));
  const auto top = key_number(key_value(parts[11], "pad="));
  const auto bottom = key_number(parts[12]), left = key_number(parts[13]), right = key_number(parts[14]);
  const auto bias = key_number(key_value(parts[15], "bias="));
  const auto det = key_number(key_value(parts[16], "det="));
  const auto align = key_number(key_value(parts[17], "align="));
  if (!direction || !layout || !dtype || !n || !c || !h || !w || !k || !s || !d || !top || !bottom || !left ||
      !right || !bias || !det || !align)
    return std::nullopt;
  for (std::int64_t v : {*top, *bottom, *left, *right, *align})
    if (v > 65536) return std::nullopt;
  if (*n < 1 || (!exact && (*n & (*n - 1)) != 0) || *bias > 1 || *det > 1) return std::nullopt;
  Problem p;
  p.direction = *direction, p.layout = *layout, p.dtype = *dtype;
  p.n = *n, p.n_exact = exact, p.c = *c, p.h = *h, p.w = *w;
  p.kh = k->first, p.kw = k->second, p.sh = s->first, p.sw = s->second, p.dh = d->first, p.dw = d->second;
  p.pad_top = static_cast<int>(*top), p.pad_bottom = static_cast<int>(*bottom);
  p.pad_left = static_cast<int>(*left), p.pad_right = static_cast<int>(*right);
  p.bias = *bias == 1;
  p.deterministic = *det == 1;
  p.align_bytes = static_cast<int>(*align);
  // ",act=silu" (forward, or a fused 1D weight or data gradient) or ",act=silu_grad" (a backward
  // direction's gradient prep); then ",seq=1" (seq_idx masked in the kernel: in_kernel_seq_idx()).
  std::size_t next = 18;
  if (next < parts.size() && key_value(parts[next], "act=")) {
    const std::string act = *key_value(parts[next++], "act=");
    for (Activation a : {Activation::silu, Activation::gelu_tanh, Activation::gelu_erf, Activation::relu})
      for (bool grad : {false, true})
        if (act == std::string(to_string(a)) + (grad ? "_grad" : "")) p.activation = a, p.gradient_prep = grad;
    if (p.activation == Activation::none) return std::nullopt;
    if (p.direction != DwDirection::forward && p.gradient_prep) return std::nullopt;
  }
  if (next < parts.size()) {
    if (parts[next++] != "seq=1" || p.gradient_prep) return std::nullopt;
    p.seq_idx = true;
  }
  if (next != parts.size()) return std::nullopt;
  if (p.key() != key) return std::nullopt;
  // What the library would accept: its argument checks, and the fields make_problem fixes.
  if (p.bias && p.direction == DwDirection::backward_data) return std::nullopt;
  if (!p.deterministic && p.direction != DwDirection::backward_weight) return std::nullopt;
  if (p.align_bytes < p.element_bytes() || p.align_bytes > 16 || (p.align_bytes & (p.align_bytes - 1)) != 0 ||
      (p.c * p.element_bytes()) % p.align_bytes != 0)
    return std::nullopt;
  DwConvArgs a;
  a.direction = p.direction, a.layout = p.layout, a.dtype = p.dtype;
  a.n = p.n, a.c = p.c, a.h = p.h, a.w = p.w;
  a.kernel_h = p.kh, a.kernel_w = p.kw, a.stride_h = p.sh, a.stride_w = p.sw, a.dilation_h = p.dh,
  a.dilation_w = p.dw;
  a.pad_top = p.pad_top, a.pad_bottom = p.pad_bottom, a.pad_left = p.pad_left, a.pad_right = p.pad_right;
  a.deterministic = p.deterministic;
  a.activation = p.activation;
  set_placeholders(a, p.bias);
  const bool fused = p.direction != DwDirection::forward && p.activation != Activation::none;
  // seq_idx takes causal convolutions of stride 1 (dwconv_states::validate); causal is the padding.
  if (p.seq_idx && (p.sw != 1 || p.pad_left != (p.kw - 1) * p.dw || p.pad_right != 0)) return std::nullopt;
  if (p.seq_idx) a.causal = true, a.pad_left = a.pad_right = 0;
  try {
    validate(a);
  } catch (const Error&) {
    return std::nullopt;
  }
  // A backward call with an activation makes this key only where it is fused; a call with seq_idx
  // keys it only where the kernel masks it.
  if (fused != (fused_weight_gradient(a) || fused_data_gradient(a))) return std::nullopt;
  if (p.seq_idx) a.seq_idx = reinterpret_cast<const std::int32_t*>(std::uintptr_t(6) << 44);
  if (p.seq_idx != in_kernel_seq_idx(a)) return std::nullopt;
  return p;
}

}  // namespace kvtune::dwconv
