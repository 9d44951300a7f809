#include "kernel_templates/dwconv_states/dwconv_states_family.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/buckets.h"
#include "core/byte_range.h"
#include "core/embedded.h"
#include "core/hash.h"
#include "core/json_fields.h"
#include "core/key_text.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_params.h"

namespace kvtune::dwconv_states {
namespace {

constexpr int kDescriptionVersion = 1;
constexpr int kBlockSizes[] = {32, 64, 128, 256, 512, 1024};
constexpr int kChunkPositions[] = {32, 128, 512};
constexpr std::int64_t kMaxGridX = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kMaxGridY = 65535;
constexpr std::size_t kMaxStaticSmem = 48 * 1024;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

const char* kernel_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f16: return "kvt_f16";
    case DType::bf16: return "kvt_bf16";
  }
  return "?";
}

Error invalid(const DwConvArgs& a, const char* field, const std::string& why) {
  return Error(Error::Context{"dwconv",
                              fmt::format("{} {} {} n={} c={} w={} k={} causal={}", to_string(a.direction),
                                          to_string(a.layout), to_string(a.dtype), a.n, a.c, a.w, a.kernel_w,
                                          a.causal ? 1 : 0),
                              "", "", field},
               why);
}

}  // namespace

bool Config::operator==(const Config& o) const {
  return block_threads == o.block_threads && chunk_positions == o.chunk_positions;
}

std::string Config::label() const { return fmt::format("bt={},p={}", block_threads, chunk_positions); }

nlohmann::json Config::to_json() const { return {{"bt", block_threads}, {"p", chunk_positions}}; }

Config Config::from_json(const nlohmann::json& j) {
  try {
    Config c;
    c.block_threads = detail::json_int(j, "bt");
    c.chunk_positions = detail::json_int(j, "p");
    return c;
  } catch (const std::exception& e) {
    throw Error(Error::Context{"dwconv_states", "", j.dump(), "", "config"}, std::string("malformed config: ") + e.what());
  }
}

bool Problem::operator==(const Problem& o) const {
  return direction == o.direction && layout == o.layout && dtype == o.dtype && n == o.n && n_exact == o.n_exact &&
         c == o.c && w == o.w && k == o.k && d == o.d && bias == o.bias && activation == o.activation &&
         gradient_prep == o.gradient_prep && initial_state == o.initial_state && state_out == o.state_out &&
         seq_idx == o.seq_idx;
}

std::string Problem::key() const {
  return fmt::format("dwconv_states,{},{},{},n{}{},c={},w={},k={},d={},bias={},act={}{},init={},state={},seq={}",
                     to_string(direction), to_string(layout), to_string(dtype), n_exact ? "=" : "<=", n, c, w, k, d,
                     bias ? 1 : 0, to_string(activation), gradient_prep ? "_grad" : "", initial_state ? 1 : 0,
                     state_out ? 1 : 0, seq_idx ? 1 : 0);
}

std::size_t ProblemHash::operator()(const Problem& p) const {
  // Over the fields, not key(): this runs on every dispatch, which must not format strings.
  std::uint64_t h = detail::kFnvOffset;
  for (std::int64_t v : {std::int64_t(p.direction), std::int64_t(p.layout), std::int64_t(p.dtype), p.n,
                         std::int64_t(p.n_exact), p.c, p.w, std::int64_t(p.k), std::int64_t(p.d), std::int64_t(p.bias),
                         std::int64_t(p.epilogue()), std::int64_t(p.initial_state), std::int64_t(p.state_out),
                         std::int64_t(p.seq_idx)})
    h ^= static_cast<std::uint64_t>(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return static_cast<std::size_t>(h);
}

bool uses_states(const DwConvArgs& a) {
  return a.initial_state != nullptr || a.final_state != nullptr || a.dinitial_state != nullptr || a.seq_idx != nullptr;
}

void validate(const DwConvArgs& a) {
  if (!uses_states(a)) return;
  const bool one_d = a.layout == DwLayout::ncl || a.layout == DwLayout::nlc;
  for (auto [ptr, field] : {std::pair<const void*, const char*>{a.initial_state, "initial_state"},
                            {a.final_state, "final_state"}, {a.dinitial_state, "dinitial_state"}, {a.seq_idx, "seq_idx"}}) {
    if (ptr == nullptr) continue;
    if (!a.causal || !one_d)
      throw invalid(a, field, fmt::format("{} needs a causal 1D convolution (causal = true, layout ncl or nlc)", field));
    if (a.stride_w != 1) throw invalid(a, field, fmt::format("{} needs stride_w = 1, got {}", field, a.stride_w));
  }
  if (a.kernel_w < 2) {
    const char* field = a.initial_state ? "initial_state" : a.final_state ? "final_state" : a.dinitial_state ? "dinitial_state" : nullptr;
    if (field != nullptr)
      throw invalid(a, field, fmt::format("{} needs kernel_w >= 2 (a state of (kernel_w - 1) x dilation_w inputs)", field));
  }
  if (a.final_state != nullptr && a.direction != DwDirection::forward)
    throw invalid(a, "final_state", "final_state is an output of the forward direction");
  if (a.dinitial_state != nullptr && a.direction != DwDirection::backward_data)
    throw invalid(a, "dinitial_state", "dinitial_state is an output of backward_data");
  if (a.seq_idx != nullptr && (a.initial_state != nullptr || a.dinitial_state != nullptr))
    throw invalid(a, "seq_idx",
                  "seq_idx cannot be combined with an initial state (initial_state / dinitial_state): packed sequences "
                  "start from zeros, as in causal-conv1d");
  // The fix-up kernel's grid; a call whose kernel masks seq_idx runs none.
  const bool fixed_up = !dwconv::in_kernel_seq_idx(a);
  if (fixed_up && a.c > kMaxGridY * 32)
    throw invalid(a, "c", fmt::format("states and seq_idx take up to {} channels", kMaxGridY * 32));
  if (fixed_up && a.n > kMaxGridX / (ceil_div(a.w, 32) + 1))
    throw invalid(a, "w", "n x (w / 32 + 1) must stay below 2^31 with states or seq_idx");
  const std::size_t elem = a.dtype == DType::f32 ? 4 : 2;
  for (auto [ptr, field, align] : {std::tuple<const void*, const char*, std::size_t>{a.initial_state, "initial_state", elem},
                                   {a.final_state, "final_state", elem}, {a.dinitial_state, "dinitial_state", elem},
                                   {a.seq_idx, "seq_idx", 4}})
    if (ptr != nullptr && address(ptr) % align != 0)
      throw invalid(a, field, fmt::format("{} must be aligned to {} bytes", field, align));
  // Outputs overlap no input and no other output (dwconv::validate checked y / dx / dweight against
  // the convolution's own tensors).
  using detail::byte_range;
  const auto bytes = [elem](std::int64_t elements) { return elements * static_cast<std::int64_t>(elem); };
  const std::int64_t state = a.n * a.c * std::int64_t(a.kernel_w - 1) * a.dilation_w;
  const std::int64_t tensor = a.n * a.c * a.w;  // x, y, dy, dx: causal, stride 1
  const bool act = a.activation != Activation::none;
  const void* init = a.direction == DwDirection::backward_data && !act ? nullptr : a.initial_state;
  const bool fwd = a.direction == DwDirection::forward, data = a.direction == DwDirection::backward_data;
  const auto hit = detail::first_overlap(
      {byte_range("y", fwd ? a.y : nullptr, bytes(tensor)), byte_range("dx", data ? a.dx : nullptr, bytes(tensor)),
       byte_range("dweight", a.direction == DwDirection::backward_weight ? a.dweight : nullptr, bytes(a.c * a.kernel_w)),
       byte_range("final_state", a.final_state, bytes(state)), byte_range("dinitial_state", a.dinitial_state, bytes(state))},
      {byte_range("initial_state", init, bytes(state)), byte_range("seq_idx", a.seq_idx, a.n * a.w * 4),
       byte_range("x", fwd || act || !data ? a.x : nullptr, bytes(tensor)),
       byte_range("dy", fwd ? nullptr : a.dy, bytes(tensor)), byte_range("weight", a.weight, bytes(a.c * a.kernel_w)),
       byte_range("bias", fwd || act ? a.bias : nullptr, bytes(a.c))});
  if (hit) throw invalid(a, hit->first.field, fmt::format("{} overlaps {}", hit->first.field, hit->second.field));
}

Plan make_plan(const DwConvArgs& a, const detail::Buckets& buckets) {
  Plan plan;
  if (!uses_states(a)) return plan;
  Problem base;
  base.direction = a.direction;
  base.layout = a.layout;
  base.dtype = a.dtype;
  base.n = buckets.bucket(a.n);
  base.n_exact = buckets.exact();
  base.c = a.c;
  base.w = a.w;
  base.k = a.kernel_w;
  base.d = a.dilation_w;
  base.seq_idx = a.seq_idx != nullptr;
  const bool act = a.activation != Activation::none;
  // The forward kernel and the fused 1D gradients mask seq_idx's taps themselves (without states).
  if (dwconv::in_kernel_seq_idx(a)) return plan;
  switch (a.direction) {
    case DwDirection::forward:
      base.bias = a.bias != nullptr;
      base.activation = a.activation;
      base.initial_state = a.initial_state != nullptr;
      base.state_out = a.final_state != nullptr;
      plan.fix = base;
      break;
    case DwDirection::backward_data:
    case DwDirection::backward_weight: {
      const bool init = a.initial_state != nullptr && (act || a.direction == DwDirection::backward_weight);
      if (act && (base.seq_idx || a.initial_state != nullptr)) {
        // The gradient prep's z reads the initial state or crosses sequences: fix it first.
        Problem prep = base;
        prep.direction = DwDirection::forward;
        prep.bias = a.bias != nullptr;
        prep.activation = a.activation;
        prep.gradient_prep = true;
        prep.initial_state = a.initial_state != nullptr;
        plan.prep = prep;
      }
      Problem fix = base;
      if (a.direction == DwDirection::backward_data) {
        fix.state_out = a.dinitial_state != nullptr;
        if (fix.state_out || fix.seq_idx) plan.fix = fix;
      } else {
        fix.initial_state = init;
        if (fix.initial_state || fix.seq_idx) plan.fix = fix;
      }
      break;
    }
  }
  return plan;
}

std::optional<Problem> problem_from_key(const std::string& key) {
  using detail::key_number;
  using detail::key_value;
  const std::vector<std::string> parts = detail::split_key(key);
  if (parts.size() != 14 || parts[0] != "dwconv_states") return std::nullopt;
  static constexpr DwDirection kDirections[] = {DwDirection::forward, DwDirection::backward_data,
                                                DwDirection::backward_weight};
  static constexpr DwLayout kLayouts[] = {DwLayout::ncl, DwLayout::nlc};
  static constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
  static constexpr Activation kActivations[] = {Activation::none, Activation::silu, Activation::gelu_tanh,
                                                Activation::gelu_erf, Activation::relu};
  const auto direction = detail::key_enum(parts[1], kDirections);
  const auto layout = detail::key_enum(parts[2], kLayouts);
  const auto dtype = detail::key_enum(parts[3], kDTypes);
  auto n = key_number(key_value(parts[4], "n<="));
  const bool exact = !n;
  if (exact) n = key_number(key_value(parts[4], "n="));
  const auto c = key_number(key_value(parts[5], "c="));
  const auto w = key_number(key_value(parts[6], "w="));
  const auto k = key_number(key_value(parts[7], "k="));
  const auto d = key_number(key_value(parts[8], "d="));
  const auto bias = key_number(key_value(parts[9], "bias="));
  auto act_text = key_value(parts[10], "act=");
  const auto init = key_number(key_value(parts[11], "init="));
  const auto state = key_number(key_value(parts[12], "state="));
  const auto seq = key_number(key_value(parts[13], "seq="));
  if (!direction || !layout || !dtype || !n || !c || !w || !k || !d || !bias || !act_text || !init || !state || !seq)
    return std::nullopt;
  bool grad = false;
  if (act_text->size() > 5 && act_text->compare(act_text->size() - 5, 5, "_grad") == 0) {
    grad = true;
    act_text->resize(act_text->size() - 5);
  }
  const auto act = detail::key_enum(*act_text, kActivations);
  if (!act || *n < 1 || (!exact && (*n & (*n - 1)) != 0) || *c < 1 || *c > kMaxGridY * 32 || *w < 1 ||
      *w > (std::int64_t(1) << 40) || *k < 2 || *k > 63 || *d < 1 || *d > 64 || *bias > 1 || *init > 1 || *state > 1 ||
      *seq > 1)
    return std::nullopt;
  Problem p;
  p.direction = *direction, p.layout = *layout, p.dtype = *dtype, p.n = *n, p.n_exact = exact, p.c = *c, p.w = *w;
  p.k = static_cast<int>(*k), p.d = static_cast<int>(*d), p.bias = *bias == 1, p.activation = *act;
  p.gradient_prep = grad, p.initial_state = *init == 1, p.state_out = *state == 1, p.seq_idx = *seq == 1;
  if (p.key() != key) return std::nullopt;
  const bool fwd = p.direction == DwDirection::forward;
  // The combinations make_plan() produces.
  if ((!fwd && (p.bias || p.activation != Activation::none)) || (grad && (p.activation == Activation::none || p.state_out)) ||
      (p.seq_idx && p.initial_state) || (p.direction == DwDirection::backward_data && p.initial_state) ||
      (p.direction == DwDirection::backward_weight && p.state_out) || (p.seq_idx && p.state_out && !fwd) ||
      (!p.initial_state && !p.state_out && !p.seq_idx) || p.n > kMaxGridX / (ceil_div(p.w, 32) + 1) ||
      p.c > (std::int64_t(1) << 40) / p.n / p.w)
    return std::nullopt;
  return p;
}

std::optional<DwConvArgs> call_for(const Problem& p, std::int64_t batch, std::string* why) {
  const auto fail = [why](std::string reason) -> std::optional<DwConvArgs> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  // Tensors at least 2^44 bytes apart, as dwconv::set_placeholders: disjoint for every size.
  const auto at = [](std::uintptr_t slot) { return reinterpret_cast<void*>(slot << 44); };
  DwConvArgs a;
  a.layout = p.layout, a.dtype = p.dtype, a.n = batch, a.c = p.c, a.h = 1, a.w = p.w;
  a.kernel_w = p.k, a.dilation_w = p.d, a.causal = true;
  if (p.seq_idx) a.seq_idx = static_cast<const std::int32_t*>(at(8));
  if (p.gradient_prep) {
    // The prep of a backward call with an activation: backward_data reads dy, weight, x and bias (the
    // fused weight gradient of backward_weight runs no prep).
    if (p.direction != DwDirection::forward) return fail("a gradient prep is a forward problem");
    if (p.activation == Activation::none) return fail("a gradient prep needs an activation");
    a.direction = DwDirection::backward_data, a.activation = p.activation;
    a.x = at(1), a.dy = at(2), a.dx = at(3), a.weight = at(4);
    if (p.bias) a.bias = at(5);
    if (p.initial_state) a.initial_state = at(6);
    if (p.state_out) return fail("a gradient prep writes no state");
  } else {
    a.direction = p.direction;
    dwconv::set_placeholders(a, p.direction == DwDirection::forward && p.bias);
    if (p.direction == DwDirection::forward) {
      a.activation = p.activation;
      if (p.initial_state) a.initial_state = at(6);
      if (p.state_out) a.final_state = at(7);
    } else {
      if (p.bias || p.activation != Activation::none)
        return fail("a backward fix-up reads no bias and applies no activation (bias=0, act=none)");
      if (p.direction == DwDirection::backward_weight && p.state_out)
        return fail("a backward_weight fix-up writes no state (state=0)");
      if (p.direction == DwDirection::backward_data && p.initial_state)
        return fail("a backward_data fix-up reads no initial state (init=0)");
      if (p.initial_state) a.initial_state = at(6);
      if (p.state_out) a.dinitial_state = at(7);
    }
  }
  if (!uses_states(a)) return fail("no initial_state, state output or seq_idx: such a call needs no fix-up");
  try {
    dwconv::validate(a);
    validate(a);
  } catch (const Error& e) {
    return fail(e.cause());
  }
  const Plan plan = make_plan(a, detail::Buckets::parse("exact"));
  std::optional<Problem> made = p.gradient_prep ? plan.prep : plan.fix;
  if (made) made->n = p.n, made->n_exact = p.n_exact;
  if (!made || !(*made == p))
    return fail(made ? fmt::format("no call makes this problem (the nearest call makes {})", made->key())
                     : "no call makes this problem");
  return a;
}

Geometry geometry(const Problem& p, const Config& c, std::int64_t batch) {
  Geometry g;
  g.block = static_cast<unsigned>(c.block_threads);
  g.grid_y = static_cast<unsigned>(ceil_div(p.c, c.block_threads));
  const std::int64_t state = p.state_len();
  // Positions whose output may change: every position with seq_idx; else those reading the initial state.
  const std::int64_t positions = p.seq_idx ? p.w : p.initial_state && p.direction != DwDirection::backward_data ? std::min(state, p.w) : 0;
  g.chunks = ceil_div(positions, c.chunk_positions);
  const bool state_chunk = p.state_out && p.direction != DwDirection::backward_weight;
  g.grid_x = p.direction == DwDirection::backward_weight ? 1u : static_cast<unsigned>(batch * (g.chunks + (state_chunk ? 1 : 0)));
  g.block_y = static_cast<unsigned>(kvt_states_groups(static_cast<int>(p.direction), c.block_threads, c.chunk_positions,
                                                      static_cast<int>(p.state_len()), p.seq_idx ? 1 : 0));
  return g;
}

namespace {

bool check(const Problem& p, const Config& c, std::string* why, bool prune) {
  const auto fail = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (std::find(std::begin(kBlockSizes), std::end(kBlockSizes), c.block_threads) == std::end(kBlockSizes))
    return fail("threads per block: 32, 64, 128, 256, 512 or 1024");
  if (c.block_threads > 256 && p.state_len() > 4)
    return fail("over 256 threads a block: states of up to 4 inputs (64 registers a thread)");
  if (std::find(std::begin(kChunkPositions), std::end(kChunkPositions), c.chunk_positions) == std::end(kChunkPositions))
    return fail("positions per chunk: 32, 128 or 512");
  if (ceil_div(p.c, c.block_threads) > kMaxGridY) return fail("more than 65535 channel blocks");
  const Geometry g = geometry(p, c, p.n);
  if (p.direction != DwDirection::backward_weight && p.n * (g.chunks + 1) > kMaxGridX) return fail("grid over 2^31 blocks");
  if (std::size_t(c.chunk_positions + p.state_len()) * 4 + std::size_t(c.chunk_positions) > kMaxStaticSmem)
    return fail("seq_idx window over 48 KiB of shared memory");
  // Pruning: a chunk longer than the positions it decides on, or a block more than half idle.
  if (prune && c.chunk_positions > 32 && !p.seq_idx) return fail("without seq_idx only the first S positions change");
  if (prune && c.chunk_positions > 32 && c.chunk_positions / 2 >= p.w) return fail("chunks longer than the rows");
  if (prune && c.block_threads > 32 && c.block_threads / 2 >= p.c) return fail("more than half of every block idle");
  if (prune && c.block_threads > 256 && p.direction == DwDirection::backward_weight)
    return fail("backward_weight: one group of this many threads walks every chunk alone");
  if (prune && c.chunk_positions == 32 && p.seq_idx && p.direction == DwDirection::backward_weight && p.w > 256)
    return fail("backward_weight walks every chunk in turn: short chunks add barriers");
  return true;
}

}  // namespace

bool is_runnable(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, false); }
bool is_valid(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, true); }

std::vector<Config> enumerate(const Problem& p) {
  std::vector<Config> out;
  for (int bt : kBlockSizes)
    for (int cp : kChunkPositions) {
      const Config c{bt, cp};
      if (is_valid(p, c)) out.push_back(c);
    }
  return out;
}

Config heuristic_config(const Problem& p, int /*cc_major*/) {
  // 128 channels a block (coalesced 256-byte rows of NLC, enough blocks for few channels); chunks of
  // 128 positions with seq_idx (a barrier per 128 decisions), else 32 (the state's few positions).
  const int chunk = p.seq_idx ? 128 : 32;
  for (int bt : {128, 64, 32, 256}) {
    const Config c{bt, chunk};
    if (is_valid(p, c)) return c;
  }
  for (const Config& c : enumerate(p)) return c;
  return Config{32, 32};
}

double fixup_bytes(const Problem& p, std::int64_t batch, double marked_per_row) {
  const double elem = p.element_bytes();
  const double rows = double(batch) * double(p.c);
  double bytes = double(p.c) * (p.k + (p.bias ? 1 : 0)) * elem;          // weight, bias
  if (p.seq_idx) bytes += double(batch) * double(p.w) * 4;               // the scan of seq_idx
  const double state = double(p.state_len());
  if (p.state_out) bytes += rows * state * elem * (p.direction == DwDirection::forward ? (p.initial_state ? 2 : 1) : 1);
  // A marked output reads its window (inputs, and dy for the gradient prep) and writes one element;
  // backward_weight reads dy and the window and writes dweight once.
  const double per_output = (p.k + 1 + (p.gradient_prep ? 1 : 0)) * elem;
  bytes += rows * marked_per_row * per_output;
  if (p.direction == DwDirection::backward_weight) bytes += double(p.c) * p.k * 2 * elem;
  return bytes;
}

double model_bytes(const Problem& p, std::int64_t batch) {
  const double marked = std::min<double>(double(p.w), double(p.state_len()));
  return fixup_bytes(p, batch, p.initial_state || p.seq_idx ? marked : 0.0);
}

double model_flops(const Problem& p, std::int64_t batch) {
  const double marked = std::min<double>(double(p.w), double(p.state_len()));
  return 2.0 * double(batch) * double(p.c) * marked * p.k;
}

double predicted_seconds(const Problem& p, const Config& c, int sm_count, double bandwidth) {
  constexpr double kLaunch = 2.0e-6;
  constexpr double kChunkLatency = 1.0e-6;  // a chunk's seq_idx loads, barrier and marked positions
  const Geometry g = geometry(p, c, p.n);
  const double blocks = double(g.grid_x) * double(g.grid_y);
  const double per_sm = std::max(1.0, std::floor(2048.0 / (c.block_threads * g.block_y)));
  const double waves = std::ceil(blocks / (double(std::max(1, sm_count)) * per_sm));
  // The weight gradient walks a row's chunks in turn, block_y groups side by side.
  const double serial =
      p.direction == DwDirection::backward_weight ? std::ceil(double(p.n) * double(g.chunks) / g.block_y) : 1.0;
  return kLaunch + std::max(model_bytes(p, p.n) / bandwidth, waves * serial * kChunkLatency);
}

namespace {

std::vector<detail::HeaderSource> headers() {
  return {{"common.cuh", embedded::common_cuh},
          {"dwconv_params.h", embedded::dwconv_params_h},
          {"dwconv_activation.cuh", embedded::dwconv_activation_cuh},
          {"dwconv_states_params.h", embedded::dwconv_states_params_h}};
}

}  // namespace

detail::CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "dwconv_states.cu";
  r.source = embedded::dwconv_states_cu;
  r.headers = headers();
  r.arch = arch;
  r.name_expressions = {fmt::format("kvt_dwconv_states<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}>",
                                    kernel_type(p.dtype), p.layout == DwLayout::nlc ? 1 : 0,
                                    static_cast<int>(p.direction), p.k, p.d, p.epilogue(), p.bias ? 1 : 0,
                                    p.initial_state ? 1 : 0, p.state_out ? 1 : 0, p.seq_idx ? 1 : 0, c.block_threads,
                                    c.chunk_positions)};
  return r;
}

detail::CompileRequest support_request(const Problem& p, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "dwconv_states.cu";
  r.source = embedded::dwconv_states_cu;
  r.headers = headers();
  r.arch = arch;
  r.name_expressions = {fmt::format("kvt_compare<{}>", kernel_type(p.dtype))};
  return r;
}

std::string template_hash() {
  return detail::sources_hash({embedded::dwconv_states_cu, embedded::common_cuh, embedded::dwconv_params_h,
                              embedded::dwconv_activation_cuh, embedded::dwconv_states_params_h},
                              kDescriptionVersion);
}

}  // namespace kvtune::dwconv_states
