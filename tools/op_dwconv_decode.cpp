// The tools' handler of the dwconv_decode operator (the causal conv1d decode step with a state):
// shapes entries, the mamba-inference suite, space sizes, variants, tuning through the library, and
// stored keys.

#include <cuda_runtime_api.h>

#include <numeric>
#include <set>

#include <fmt/format.h>

#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "core/cuda_check.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/mamba_inference_shapes.h"
#include "tools/op_family.h"
#include "tools/ops.h"

namespace kvtune::tools {
namespace {

namespace dd = kvtune::dwconv_decode;
using Family = detail::DwConvDecodeFamily;

const std::set<std::string> kFields = {"op",        "batch", "channels", "seqlen", "k",          "dtype",
                                       "state_len", "circular", "indices", "bias", "activation", "align",
                                       "early"};

struct Entry {
  dd::Problem problem;      // n is the bucket, as in the library
  std::int64_t batch = 0;   // the rows of the call the tool makes
};

Entry parse_entry(const nlohmann::json& entry, const std::string& where) {
  for (const auto& [name, value] : entry.items()) {
    (void)value;
    if (kFields.count(name) == 0) {
      std::string known;
      for (const auto& f : kFields) known += (known.empty() ? "" : ", ") + f;
      throw InputError(
          fmt::format("{}: unknown field '{}' for operator dwconv_decode (known: {})", where, name, known));
    }
  }
  for (const char* field : {"batch", "channels"})
    if (!entry.contains(field)) throw InputError(fmt::format("{}: missing field '{}'", where, field));
  Entry e;
  dd::Problem& p = e.problem;
  e.batch = json_integer(entry.at("batch"), "batch", where);
  p.c = json_integer(entry.at("channels"), "channels", where);
  p.seqlen = static_cast<int>(entry.contains("seqlen") ? json_integer(entry.at("seqlen"), "seqlen", where) : 1);
  p.k = static_cast<int>(entry.contains("k") ? json_integer(entry.at("k"), "k", where) : 4);
  p.dtype = parse_dtype_name(json_string(entry, "dtype", where, "bf16"), where);
  p.circular = json_bool(entry, "circular", where, false);
  p.indices = json_bool(entry, "indices", where, false);
  p.bias = json_bool(entry, "bias", where, false);
  p.activation = parse_activation(json_string(entry, "activation", where, "none"), where);
  p.early = json_bool(entry, "early", where, false);
  const std::int64_t state_len = entry.contains("state_len") ? json_integer(entry.at("state_len"), "state_len", where) : 0;
  p.align_bytes = static_cast<int>(entry.contains("align") ? json_integer(entry.at("align"), "align", where) : 16);
  if (p.align_bytes != 2 && p.align_bytes != 4 && p.align_bytes != 8 && p.align_bytes != 16)
    throw InputError(fmt::format("{}: 'align' must be 2, 4, 8 or 16 bytes, got {}", where, p.align_bytes));
  if (p.align_bytes < p.element_bytes())
    throw InputError(fmt::format("{}: 'align' {} is below the {}-byte element of {}", where, p.align_bytes,
                                 p.element_bytes(), to_string(p.dtype)));
  // The library's own rules, named as its fields.
  DwConvDecodeArgs a;
  a.dtype = p.dtype, a.batch = e.batch, a.channels = p.c, a.seqlen = p.seqlen, a.kernel_w = p.k;
  a.state_len = state_len, a.activation = p.activation;
  p.state_len = state_len == 0 ? p.k - 1 : state_len;
  p.n = e.batch;
  dd::set_placeholders(a, p);
  try {
    dd::validate(a);
  } catch (const Error& error) {
    throw InputError(fmt::format("{}: {}", where, error.cause()));
  }
  p.n = pow2_bucket(e.batch);
  return e;
}

std::string describe_problem(const dd::Problem& p, std::int64_t batch) {
  std::string s = fmt::format("{}x{} {} K={} seq={}", batch, p.c, to_string(p.dtype), p.k, p.seqlen);
  if (p.circular) s += fmt::format(" circular={}", p.state_len);
  if (p.indices) s += " +indices";
  if (p.bias) s += " +bias";
  if (p.activation != Activation::none) s += std::string(" ") + to_string(p.activation);
  if (p.align_bytes != 16) s += fmt::format(" align={}", p.align_bytes);
  if (p.early) s += " early";
  return s;
}

nlohmann::json entry_of(const dd::Problem& p, std::int64_t batch) {
  return {{"op", "dwconv_decode"}, {"batch", batch},
          {"channels", p.c},       {"seqlen", p.seqlen},
          {"k", p.k},              {"dtype", to_string(p.dtype)},
          {"state_len", p.state_len}, {"circular", p.circular},
          {"indices", p.indices},  {"bias", p.bias},
          {"activation", to_string(p.activation)}, {"align", p.align_bytes}, {"early", p.early}};
}

nlohmann::json decode_entry(std::int64_t batch, std::int64_t channels, bool circular, int seqlen = 1) {
  return {{"op", "dwconv_decode"}, {"batch", batch},   {"channels", channels}, {"seqlen", seqlen},
          {"k", 4},                {"dtype", "bf16"},   {"state_len", circular ? 256 : 0},
          {"circular", circular},  {"indices", true},   {"bias", true},         {"activation", "silu"}};
}

// The tools' side of the family (tools/op_family.h, FamilyProblem).
struct DecodeSide {
  using Entry = tools::Entry;
  static std::int64_t call_size(const Entry& e) { return e.batch; }
  static std::string describe(const dd::Problem& p, std::int64_t batch) { return describe_problem(p, batch); }
  static nlohmann::json entry_of(const Entry& e) { return tools::entry_of(e.problem, e.batch); }
  static nlohmann::json entry_of_key(const dd::Problem& p) { return tools::entry_of(p, p.n); }
  static Entry parse(const nlohmann::json& entry, const std::string& where) { return parse_entry(entry, where); }
  // No seed study for this family: the "seed" is the plainest point, one channel and one token a
  // thread in blocks of 128.
  static std::string seed_label(const dd::Problem&) { return dd::Config{128, 1, 1}.label(); }
  static std::vector<std::string> suite_names() { return {"mamba-inference"}; }
  static std::vector<nlohmann::json> suite(const std::string& name) {
    if (name == "mamba-inference") {
      std::vector<nlohmann::json> out;  // tools/mamba_inference_shapes.h
      for (const auto& s : mamba_inference_shapes())
        out.push_back(decode_entry(s.batch, s.channels, s.circular, s.seqlen));
      return out;
    }
    throw InputError(fmt::format("dwconv_decode has no suite '{}'", name));
  }
  static std::string fields() {
    return "batch, channels (required), seqlen (1..64), k (2..63), dtype (f32|f16|bf16), state_len (0: k - 1), "
           "circular, indices, bias (booleans), activation (none|silu|gelu_tanh|gelu_erf|relu), align (2|4|8|16), "
           "early (boolean: overlap_prologue)";
  }
  static SpaceSize space(const dd::Problem& p) {
    // The declared axes: threads per block 32..1024, channels per thread 1..8, tokens per thread
    // 1..seqlen (powers of two and seqlen).
    SpaceSize s;
    for (int bt = 32; bt <= 1024; bt *= 2)
      for (int vc = 1; vc <= 8; vc *= 2)
        for (int tt = 1; tt <= p.seqlen; tt = tt * 2 > p.seqlen && tt < p.seqlen ? p.seqlen : tt * 2) {
          ++s.total;
          if (dd::is_runnable(p, dd::Config{bt, vc, tt})) ++s.runnable;
        }
    s.tuned = static_cast<std::int64_t>(detail::tuning_configs<Family>(p, 0).size());
    return s;
  }
  static std::string run_library(const Entry& e, const OpProblem& self, Context& context) {
    // Zero-filled tensors (positions 0: fresh sequences), one slot a row; below 16 bytes every tensor
    // is offset by `align` bytes from cudaMalloc's 256, so that the library sees exactly this class.
    const dd::Problem& p = e.problem;
    const std::size_t elem = std::size_t(p.element_bytes());
    const std::size_t offset = p.align_bytes < 16 ? std::size_t(p.align_bytes) : 0;
    const std::size_t tokens = std::size_t(e.batch * p.c * p.seqlen);
    DeviceMemory x(tokens * elem + 256, 0), y(tokens * elem + 256, 0);
    DeviceMemory state(std::size_t(e.batch * p.c * p.state_len) * elem + 256, 0);
    DeviceMemory weight(std::size_t(p.c * p.k) * elem + 256, 0), bias(std::size_t(p.c) * elem + 256, 0);
    DeviceMemory positions(std::size_t(e.batch) * 4, 0), slots(std::size_t(e.batch) * 4, 0);
    std::vector<std::int32_t> rows(std::size_t(e.batch));
    std::iota(rows.begin(), rows.end(), 0);
    detail::cuda_check(cudaMemcpy(slots.ptr(), rows.data(), rows.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    DwConvDecodeArgs a;
    a.dtype = p.dtype, a.batch = e.batch, a.channels = p.c, a.seqlen = p.seqlen, a.kernel_w = p.k;
    a.state_len = p.state_len, a.activation = p.activation, a.overlap_prologue = p.early;
    a.x = x.bytes() + offset, a.y = y.bytes() + offset, a.state = state.bytes() + offset;
    a.weight = weight.bytes() + offset, a.bias = p.bias ? bias.bytes() + offset : nullptr;
    a.cache_seqlens = p.circular ? static_cast<const std::int32_t*>(positions.ptr()) : nullptr;
    a.state_indices = p.indices ? static_cast<const std::int32_t*>(slots.ptr()) : nullptr;
    dd::validate(a);
    return call_library(
        self, dd::make_problem(a, detail::Buckets::parse(self.buckets())).key(),
        [&] { return context.dwconv_decode_variant(a); }, [&] { context.dwconv_decode(a); });
  }
};

}  // namespace

template <>
std::unique_ptr<OpHandler> make_handler<detail::DwConvDecodeFamily>() {
  return std::make_unique<FamilyHandler<Family, DecodeSide>>();
}

}  // namespace kvtune::tools
