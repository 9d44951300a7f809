// The tools' handler of the dwconv_states operator: the fix-up of the causal conv1d's states and
// packed sequences (DwConvArgs::initial_state, final_state, dinitial_state, seq_idx). A shapes entry
// names the fix-up problem field by field (as its key does); the tool tunes it through a dwconv call
// that makes it (dwconv_states::call_for), which tunes the convolution's own problems too.

#include <cuda_runtime_api.h>

#include <memory>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "core/buckets.h"
#include "core/cuda_check.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/op_family.h"
#include "tools/ops.h"

namespace kvtune::tools {
namespace {

namespace ds = kvtune::dwconv_states;
using Family = detail::DwConvStatesFamily;

const std::set<std::string> kFields = {"op",         "direction",     "layout",        "dtype",     "batch",
                                       "channels",   "width",         "k",             "dilation",  "bias",
                                       "activation", "gradient_prep", "initial_state", "state_out", "seq_idx"};

struct Entry {
  ds::Problem problem;     // n is the bucket, as in the library
  std::int64_t batch = 0;  // the rows of the call the tool makes
};

Entry parse_entry(const nlohmann::json& entry, const std::string& where) {
  for (const auto& [name, value] : entry.items()) {
    (void)value;
    if (kFields.count(name) == 0) {
      std::string known;
      for (const auto& f : kFields) known += (known.empty() ? "" : ", ") + f;
      throw InputError(
          fmt::format("{}: unknown field '{}' for operator dwconv_states (known: {})", where, name, known));
    }
  }
  for (const char* field : {"batch", "channels", "width"})
    if (!entry.contains(field)) throw InputError(fmt::format("{}: missing field '{}'", where, field));
  Entry e;
  ds::Problem& p = e.problem;
  p.direction = parse_direction(json_string(entry, "direction", where, "forward"), where);
  p.layout = parse_layout(json_string(entry, "layout", where, "ncl"), where);
  if (p.layout != DwLayout::ncl && p.layout != DwLayout::nlc)
    throw InputError(fmt::format("{}: 'layout' must be ncl or nlc (a causal conv1d), got {}", where,
                                 to_string(p.layout)));
  p.dtype = parse_dtype_name(json_string(entry, "dtype", where, "bf16"), where);
  e.batch = json_integer(entry.at("batch"), "batch", where);
  if (e.batch < 1) throw InputError(fmt::format("{}: 'batch' must be positive, got {}", where, e.batch));
  p.c = json_integer(entry.at("channels"), "channels", where);
  p.w = json_integer(entry.at("width"), "width", where);
  const auto small = [&](const char* field, std::int64_t fallback) {
    const std::int64_t v = entry.contains(field) ? json_integer(entry.at(field), field, where) : fallback;
    if (v < 1 || v > 64) throw InputError(fmt::format("{}: '{}' must be in 1..64, got {}", where, field, v));
    return static_cast<int>(v);
  };
  p.k = small("k", 4);
  p.d = small("dilation", 1);
  p.bias = json_bool(entry, "bias", where, false);
  p.activation = parse_activation(json_string(entry, "activation", where, "none"), where);
  p.gradient_prep = json_bool(entry, "gradient_prep", where, false);
  p.initial_state = json_bool(entry, "initial_state", where, false);
  p.state_out = json_bool(entry, "state_out", where, false);
  p.seq_idx = json_bool(entry, "seq_idx", where, false);
  p.n = e.batch;
  p.n_exact = true;
  // The library's own rules, on the call that makes this problem.
  std::string why;
  if (!ds::call_for(p, e.batch, &why)) throw InputError(fmt::format("{}: {}", where, why));
  p.n = pow2_bucket(e.batch);
  p.n_exact = false;
  return e;
}

std::string describe_problem(const ds::Problem& p, std::int64_t batch) {
  std::string s = fmt::format("{} {} {} {}x{}x{} K={}", to_string(p.direction), to_string(p.layout), to_string(p.dtype),
                              batch, p.c, p.w, p.k);
  if (p.d != 1) s += fmt::format(" d={}", p.d);
  if (p.bias) s += " +bias";
  if (p.activation != Activation::none) s += std::string(" ") + to_string(p.activation);
  if (p.gradient_prep) s += " gradient-prep";
  if (p.initial_state) s += " +initial_state";
  if (p.state_out) s += p.direction == DwDirection::forward ? " +final_state" : " +dinitial_state";
  if (p.seq_idx) s += " +seq_idx";
  return s;
}

nlohmann::json entry_of(const ds::Problem& p, std::int64_t batch) {
  return {{"op", "dwconv_states"},
          {"direction", to_string(p.direction)},
          {"layout", to_string(p.layout)},
          {"dtype", to_string(p.dtype)},
          {"batch", batch},
          {"channels", p.c},
          {"width", p.w},
          {"k", p.k},
          {"dilation", p.d},
          {"bias", p.bias},
          {"activation", to_string(p.activation)},
          {"gradient_prep", p.gradient_prep},
          {"initial_state", p.initial_state},
          {"state_out", p.state_out},
          {"seq_idx", p.seq_idx}};
}

nlohmann::json states_entry(const char* direction, std::int64_t batch, std::int64_t width, bool initial_state,
                            bool state_out, bool seq_idx, bool gradient_prep = false) {
  const bool fwd = std::string(direction) == "forward" && !gradient_prep;
  return {{"op", "dwconv_states"},
          {"direction", direction},
          {"layout", "ncl"},
          {"dtype", "bf16"},
          {"batch", batch},
          {"channels", 4096},
          {"width", width},
          {"k", 4},
          {"bias", fwd || gradient_prep},
          {"activation", fwd || gradient_prep ? "silu" : "none"},
          {"gradient_prep", gradient_prep},
          {"initial_state", initial_state},
          {"state_out", state_out},
          {"seq_idx", seq_idx}};
}

// The tools' side of the family (tools/op_family.h, FamilyProblem).
struct StatesSide {
  using Entry = tools::Entry;
  static std::int64_t call_size(const Entry& e) { return e.batch; }
  static std::string describe(const ds::Problem& p, std::int64_t batch) { return describe_problem(p, batch); }
  static nlohmann::json entry_of(const Entry& e) { return tools::entry_of(e.problem, e.batch); }
  static nlohmann::json entry_of_key(const ds::Problem& p) { return tools::entry_of(p, p.n); }
  static Entry parse(const nlohmann::json& entry, const std::string& where) { return parse_entry(entry, where); }
  // No seed study for this family: the "seed" is the plainest point, blocks of 128 channels and
  // chunks of 32 positions.
  static std::string seed_label(const ds::Problem&) { return ds::Config{128, 32}.label(); }
  static std::vector<std::string> suite_names() { return {"mamba-states"}; }
  static std::vector<nlohmann::json> suite(const std::string& name) {
    if (name == "mamba-states") {
      // Mamba's conv1d (bf16, 4096 channels, K = 4, bias, SiLU) around the tuned convolution: a
      // prefill that hands its final state to decode, a chunked prefill that starts from one, packed
      // variable-length sequences (seq_idx) forward with the last sequence's state and in training
      // without an activation (the kernels mask seq_idx themselves elsewhere), a chunk's gradient
      // prep from an initial state, and an initial state's gradient.
      return {states_entry("forward", 8, 2048, false, true, false),
              states_entry("forward", 8, 2048, true, true, false),
              states_entry("forward", 1, 16384, false, true, true),
              states_entry("forward", 8, 2048, true, false, false, true),
              states_entry("backward_data", 1, 16384, false, false, true),
              states_entry("backward_weight", 1, 16384, false, false, true),
              states_entry("backward_data", 8, 2048, false, true, false),
              states_entry("backward_weight", 8, 2048, true, false, false)};
    }
    throw InputError(fmt::format("dwconv_states has no suite '{}'", name));
  }
  static std::string fields() {
    return "batch, channels, width (required), direction (forward|backward_data|backward_weight), layout "
           "(ncl|nlc), dtype (f32|f16|bf16), k (2..63), dilation, bias, activation "
           "(none|silu|gelu_tanh|gelu_erf|relu), gradient_prep, initial_state, state_out, seq_idx (booleans)";
  }
  static SpaceSize space(const ds::Problem& p) {
    // The declared axes: threads per block 32..256 (one channel each), positions a chunk 32, 128, 512.
    SpaceSize s;
    for (int bt : {32, 64, 128, 256})
      for (int pos : {32, 128, 512}) {
        ++s.total;
        if (ds::is_runnable(p, ds::Config{bt, pos})) ++s.runnable;
      }
    s.tuned = static_cast<std::int64_t>(detail::tuning_configs<Family>(p, 0).size());
    return s;
  }
  static std::string run_library(const Entry& e, const OpProblem& self, Context& context) {
    // The call that makes this problem, its placeholders replaced by device buffers: tensors
    // filled with a small non-zero value, seq_idx all zero (one sequence a row).
    const ds::Problem& p = e.problem;
    std::string why;
    auto call = ds::call_for(p, e.batch, &why);
    if (!call) throw Error(Error::Context{"dwconv_states", self.key(), "", "", ""}, why);
    DwConvArgs a = *call;
    const std::size_t elem = std::size_t(p.element_bytes());
    const std::size_t tensor = std::size_t(e.batch * p.c * p.w) * elem;
    const std::size_t weight = std::size_t(p.c * p.k) * elem, bias = std::size_t(p.c) * elem;
    const std::size_t state = std::size_t(e.batch * p.c * p.state_len()) * elem;
    std::vector<std::unique_ptr<DeviceMemory>> buffers;
    const auto place = [&](auto*& field, std::size_t bytes, int fill) {
      if (field == nullptr) return;
      buffers.push_back(std::make_unique<DeviceMemory>(bytes, fill));
      field = static_cast<std::remove_reference_t<decltype(field)>>(buffers.back()->ptr());
    };
    place(a.x, tensor, 0x3c), place(a.y, tensor, 0), place(a.dy, tensor, 0x3c), place(a.dx, tensor, 0);
    place(a.weight, weight, 0x3c), place(a.bias, bias, 0x3c), place(a.dweight, weight, 0), place(a.dbias, bias, 0);
    place(a.initial_state, state, 0x3c), place(a.final_state, state, 0), place(a.dinitial_state, state, 0);
    place(a.seq_idx, std::size_t(e.batch * p.w) * 4, 0);
    const ds::Plan plan = ds::make_plan(a, detail::Buckets::parse(self.buckets()));
    const auto& made = p.gradient_prep ? plan.prep : plan.fix;
    // The call runs the convolution and its fix-ups.
    return call_library(
        self, made ? made->key() : "(none)", [&] { return context.dwconv_variant(a); }, [&] { context.dwconv(a); });
  }
};

}  // namespace

template <>
std::unique_ptr<OpHandler> make_handler<detail::DwConvStatesFamily>() {
  return std::make_unique<FamilyHandler<Family, StatesSide>>();
}

}  // namespace kvtune::tools
