#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/byte_range.h"
#include "core/embedded.h"
#include "core/hash.h"
#include "core/json_fields.h"
#include "core/key_text.h"

namespace kvtune::dwconv_decode {
namespace {

constexpr int kDescriptionVersion = 1;
constexpr std::int64_t kMaxElements = std::int64_t(1) << 40;
constexpr std::int64_t kMaxRowsTimesChannels = std::numeric_limits<std::int32_t>::max();  // the grid's blocks
// Floats a thread keeps for its window and taps: VC x (TT + K - 1) + VC x K. 160 leaves every problem
// a variant (VC 1, TT 1: at most 125 at K = 63) without spilling.
constexpr int kMaxRegisterValues = 160;
constexpr int kBlockSizes[] = {32, 64, 128, 256, 512};
constexpr int kChannelsPerThread[] = {1, 2, 4, 8};

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

Error invalid(const DwConvDecodeArgs& a, const char* field, const std::string& why) {
  return Error(Error::Context{"dwconv_decode",
                              fmt::format("{} batch={} channels={} seqlen={} k={} state_len={}", to_string(a.dtype),
                                          a.batch, a.channels, a.seqlen, a.kernel_w, a.state_len),
                              "", "", field},
               why);
}

int groups(const Problem& p, const Config& c) {
  return static_cast<int>(ceil_div(p.seqlen, std::max(1, c.tokens_per_thread)));
}

}  // namespace

bool Config::operator==(const Config& o) const {
  return block_threads == o.block_threads && channels_per_thread == o.channels_per_thread &&
         tokens_per_thread == o.tokens_per_thread;
}

std::string Config::label() const {
  return fmt::format("bt={},vc={},tt={}", block_threads, channels_per_thread, tokens_per_thread);
}

nlohmann::json Config::to_json() const {
  return {{"bt", block_threads}, {"vc", channels_per_thread}, {"tt", tokens_per_thread}};
}

Config Config::from_json(const nlohmann::json& j) {
  try {
    Config c;
    c.block_threads = detail::json_int(j, "bt");
    c.channels_per_thread = detail::json_int(j, "vc");
    c.tokens_per_thread = detail::json_int(j, "tt");
    return c;
  } catch (const std::exception& e) {
    throw Error(Error::Context{"dwconv_decode", "", j.dump(), "", "config"}, std::string("malformed config: ") + e.what());
  }
}

bool Problem::operator==(const Problem& o) const {
  return dtype == o.dtype && n == o.n && n_exact == o.n_exact && c == o.c && k == o.k && seqlen == o.seqlen &&
         state_len == o.state_len && circular == o.circular && indices == o.indices && bias == o.bias &&
         activation == o.activation && align_bytes == o.align_bytes && early == o.early;
}

std::string Problem::key() const {
  return fmt::format("dwconv_decode,{},n{}{},c={},k={},seq={},state={},circular={},indices={},bias={},act={},align={}",
                     to_string(dtype), n_exact ? "=" : "<=", n, c, k, seqlen, state_len, circular ? 1 : 0,
                     indices ? 1 : 0, bias ? 1 : 0, to_string(activation), align_bytes) +
         (early ? ",early=1" : "");
}

std::size_t ProblemHash::operator()(const Problem& p) const {
  // Over the fields, not key(): this runs on every dispatch, which must not format strings.
  std::uint64_t h = detail::kFnvOffset;
  for (std::int64_t v : {std::int64_t(p.dtype), p.n, std::int64_t(p.n_exact), p.c, std::int64_t(p.k),
                         std::int64_t(p.seqlen), p.state_len, std::int64_t(p.circular), std::int64_t(p.indices),
                         std::int64_t(p.bias), std::int64_t(p.activation), std::int64_t(p.align_bytes),
                         std::int64_t(p.early)})
    h ^= static_cast<std::uint64_t>(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return static_cast<std::size_t>(h);
}

void validate(const DwConvDecodeArgs& a) {
  if (static_cast<unsigned>(a.dtype) > static_cast<unsigned>(DType::bf16))
    throw invalid(a, "dtype", fmt::format("unknown dtype value {}", static_cast<int>(a.dtype)));
  if (static_cast<unsigned>(a.activation) > static_cast<unsigned>(Activation::relu))
    throw invalid(a, "activation", fmt::format("unknown activation value {}", static_cast<int>(a.activation)));
  for (auto [value, field] : {std::pair{a.batch, "batch"}, std::pair{a.channels, "channels"}})
    if (value <= 0) throw invalid(a, field, fmt::format("{} must be positive, got {}", field, value));
  if (a.seqlen < 1 || a.seqlen > kMaxSeqlen)
    throw invalid(a, "seqlen", fmt::format("seqlen must be in 1..{}, got {}", kMaxSeqlen, a.seqlen));
  if (a.kernel_w < 2 || a.kernel_w > kMaxKernel)
    throw invalid(a, "kernel_w", fmt::format("kernel_w must be in 2..{} (a state of kernel_w - 1 inputs), got {}",
                                             kMaxKernel, a.kernel_w));
  if (a.channels > kMaxRowsTimesChannels / a.batch)
    throw invalid(a, "batch", fmt::format("batch x channels must be below 2^31, got {} x {}", a.batch, a.channels));
  const bool circular = a.cache_seqlens != nullptr;
  const std::int64_t history = a.kernel_w - 1;
  if (a.state_len < 0) throw invalid(a, "state_len", fmt::format("state_len must be >= 0, got {}", a.state_len));
  const std::int64_t state_len = a.state_len == 0 ? history : a.state_len;
  if (!circular && state_len != history)
    throw invalid(a, "state_len",
                  fmt::format("without cache_seqlens the state holds exactly kernel_w - 1 = {} inputs (state_len 0 "
                              "or {}), got {}",
                              history, history, a.state_len));
  if (circular && (state_len < history || state_len < a.seqlen || state_len > std::numeric_limits<std::int32_t>::max()))
    throw invalid(a, "state_len",
                  fmt::format("a circular state (cache_seqlens) needs kernel_w - 1 <= state_len, seqlen <= state_len "
                              "and state_len < 2^31; got state_len {} with kernel_w {} and seqlen {}",
                              state_len, a.kernel_w, a.seqlen));
  if (a.state_slots < 0) throw invalid(a, "state_slots", fmt::format("state_slots must be >= 0, got {}", a.state_slots));
  const std::int64_t slots = a.state_slots == 0 ? a.batch : a.state_slots;
  if (a.state_indices == nullptr && slots < a.batch)
    throw invalid(a, "state_slots",
                  fmt::format("without state_indices row b uses slot b: state_slots must be >= batch, got {} < {}",
                              slots, a.batch));
  if (slots > std::numeric_limits<std::int32_t>::max())
    throw invalid(a, "state_slots", fmt::format("state_slots must be below 2^31 (int32 indices), got {}", slots));
  if (a.channels > kMaxElements / slots || state_len > kMaxElements / (slots * a.channels))
    throw invalid(a, "state_len", "state_slots x channels x state_len exceeds 2^40 elements");
  if (a.seqlen > kMaxElements / (a.batch * a.channels))
    throw invalid(a, "seqlen", "batch x channels x seqlen exceeds 2^40 elements");
  const std::size_t elem = a.dtype == DType::f32 ? 4 : 2;
  const auto need = [&](const void* ptr, const char* field, std::size_t align) {
    if (ptr == nullptr) throw invalid(a, field, fmt::format("{} is a null pointer", field));
    if (address(ptr) % align != 0) throw invalid(a, field, fmt::format("{} must be aligned to {} bytes", field, align));
  };
  const auto optional = [&](const void* ptr, const char* field, std::size_t align) {
    if (ptr != nullptr && address(ptr) % align != 0)
      throw invalid(a, field, fmt::format("{} must be aligned to {} bytes", field, align));
  };
  need(a.x, "x", elem), need(a.weight, "weight", elem), need(a.y, "y", elem), need(a.state, "state", elem);
  optional(a.bias, "bias", elem), optional(a.cache_seqlens, "cache_seqlens", 4);
  optional(a.state_indices, "state_indices", 4);
  // Outputs (y, state) overlap no input and not each other: the kernel reads every input before
  // writing, but across threads an overlap would race.
  using detail::byte_range;
  const auto bytes = [elem](std::int64_t elements) { return elements * static_cast<std::int64_t>(elem); };
  const std::int64_t tokens = a.batch * a.channels * a.seqlen;
  const auto hit = detail::first_overlap(
      {byte_range("y", a.y, bytes(tokens)), byte_range("state", a.state, bytes(slots * a.channels * state_len))},
      {byte_range("x", a.x, bytes(tokens)), byte_range("weight", a.weight, bytes(a.channels * a.kernel_w)),
       byte_range("bias", a.bias, bytes(a.channels)), byte_range("cache_seqlens", a.cache_seqlens, a.batch * 4),
       byte_range("state_indices", a.state_indices, a.batch * 4)});
  if (hit) throw invalid(a, hit->first.field, fmt::format("{} overlaps {}", hit->first.field, hit->second.field));
}

Problem make_problem(const DwConvDecodeArgs& a, const detail::Buckets& buckets) {
  Problem p;
  p.dtype = a.dtype;
  p.n = buckets.bucket(a.batch);
  p.n_exact = buckets.exact();
  p.c = a.channels;
  p.k = a.kernel_w;
  p.seqlen = static_cast<int>(a.seqlen);
  p.circular = a.cache_seqlens != nullptr;
  p.state_len = a.state_len == 0 ? a.kernel_w - 1 : a.state_len;
  p.indices = a.state_indices != nullptr;
  p.bias = a.bias != nullptr;
  p.activation = a.activation;
  p.early = a.overlap_prologue;
  const int elem = p.element_bytes();
  p.align_bytes = elem;
  for (int v = 16; v > elem; v /= 2) {
    const auto ok = [v](const void* ptr) { return ptr == nullptr || address(ptr) % v == 0; };
    if (ok(a.x) && ok(a.y) && ok(a.state) && ok(a.weight) && ok(a.bias)) {
      p.align_bytes = v;
      break;
    }
  }
  return p;
}

void set_placeholders(DwConvDecodeArgs& a, const Problem& p) {
  // Tensors at least 2^44 bytes apart: disjoint for every size validate() accepts (2^42 bytes).
  const auto at = [](std::uintptr_t slot) { return reinterpret_cast<void*>(slot << 44); };
  a.x = at(1), a.weight = at(2), a.y = at(3), a.state = at(4);
  a.bias = p.bias ? at(5) : nullptr;
  a.cache_seqlens = p.circular ? static_cast<const std::int32_t*>(at(6)) : nullptr;
  a.state_indices = p.indices ? static_cast<const std::int32_t*>(at(7)) : nullptr;
}

std::optional<Problem> problem_from_key(const std::string& key) {
  using detail::key_number;
  using detail::key_value;
  std::vector<std::string> parts = detail::split_key(key);
  const bool early = parts.size() == 13 && parts[12] == "early=1";
  if (early) parts.pop_back();
  if (parts.size() != 12 || parts[0] != "dwconv_decode") return std::nullopt;
  static constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
  static constexpr Activation kActivations[] = {Activation::none, Activation::silu, Activation::gelu_tanh,
                                                Activation::gelu_erf, Activation::relu};
  const auto dtype = detail::key_enum(parts[1], kDTypes);
  auto n = key_number(key_value(parts[2], "n<="));
  const bool exact = !n;
  if (exact) n = key_number(key_value(parts[2], "n="));
  const auto c = key_number(key_value(parts[3], "c="));
  const auto k = key_number(key_value(parts[4], "k="));
  const auto seq = key_number(key_value(parts[5], "seq="));
  const auto state = key_number(key_value(parts[6], "state="));
  const auto circular = key_number(key_value(parts[7], "circular="));
  const auto indices = key_number(key_value(parts[8], "indices="));
  const auto bias = key_number(key_value(parts[9], "bias="));
  const auto act_text = key_value(parts[10], "act=");
  const auto align = key_number(key_value(parts[11], "align="));
  if (!dtype || !n || !c || !k || !seq || !state || !circular || !indices || !bias || !act_text || !align)
    return std::nullopt;
  const auto act = detail::key_enum(*act_text, kActivations);
  if (!act || *n < 1 || (!exact && (*n & (*n - 1)) != 0) || *circular > 1 || *indices > 1 || *bias > 1 ||
      *k > kMaxKernel || *seq > kMaxSeqlen || *align > 16)
    return std::nullopt;
  Problem p;
  p.dtype = *dtype, p.n = *n, p.n_exact = exact, p.c = *c, p.k = static_cast<int>(*k), p.seqlen = static_cast<int>(*seq);
  p.state_len = *state, p.circular = *circular == 1, p.indices = *indices == 1, p.bias = *bias == 1;
  p.activation = *act, p.align_bytes = static_cast<int>(*align);
  p.early = early;
  if (p.key() != key) return std::nullopt;
  if (p.align_bytes < p.element_bytes() || (p.align_bytes & (p.align_bytes - 1)) != 0) return std::nullopt;
  DwConvDecodeArgs a;
  a.dtype = p.dtype, a.batch = p.n, a.channels = p.c, a.seqlen = p.seqlen, a.kernel_w = p.k;
  a.state_len = p.state_len, a.activation = p.activation, a.overlap_prologue = p.early;
  set_placeholders(a, p);
  try {
    validate(a);
  } catch (const Error&) {
    return std::nullopt;
  }
  return p;
}

namespace {

bool check(const Problem& p, const Config& c, std::string* why, bool prune) {
  const auto fail = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (std::find(std::begin(kBlockSizes), std::end(kBlockSizes), c.block_threads) == std::end(kBlockSizes))
    return fail("threads per block: 32, 64, 128, 256 or 512");
  if (std::find(std::begin(kChannelsPerThread), std::end(kChannelsPerThread), c.channels_per_thread) ==
      std::end(kChannelsPerThread))
    return fail("channels per thread: 1, 2, 4 or 8");
  if (p.c % c.channels_per_thread != 0) return fail("channels per thread must divide the channels");
  if (c.tokens_per_thread < 1 || c.tokens_per_thread > p.seqlen) return fail("tokens per thread: 1..seqlen");
  const int g = groups(p, c);
  if (g > c.block_threads) return fail("every token group of a channel vector must fit in one block");
  if (c.channels_per_thread * (c.tokens_per_thread + p.k - 1) + c.channels_per_thread * p.k > kMaxRegisterValues)
    return fail(fmt::format("window and taps over {} registers", kMaxRegisterValues));
  const std::int64_t vectors = p.c / c.channels_per_thread;
  const std::int64_t per_block = c.block_threads / g;
  // Pruning: a block more than half idle on every row (a smaller block does the same work).
  if (prune && c.block_threads > 32 && per_block >= 2 * vectors) return fail("more than half of every block idle");
  if (ceil_div(vectors, per_block) > kMaxRowsTimesChannels / p.n) return fail("grid over 2^31 blocks");
  return true;
}

}  // namespace

bool is_runnable(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, false); }

bool is_valid(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, true); }

std::vector<Config> enumerate(const Problem& p) {
  std::vector<int> tokens;
  for (int t = 1; t < p.seqlen; t *= 2) tokens.push_back(t);
  tokens.push_back(p.seqlen);
  std::vector<Config> out;
  for (int bt : kBlockSizes)
    for (int vc : kChannelsPerThread)
      for (int tt : tokens) {
        const Config c{bt, vc, tt};
        if (is_valid(p, c)) out.push_back(c);
      }
  return out;
}

Config heuristic_config(const Problem& p, int /*cc_major*/) {
  // From the H200's exhaustive trials of the mamba-inference suite (2026-12-02,
  // tests/data/trials/2026-12-02-h200-decode-exhaustive/): vectors of at most 8 bytes (16-byte
  // ones, 8 bf16 channels a thread, ran 1.15-1.9x the winner on every problem), the widest that
  // still leaves 2^17 threads (wider vectors on fewer threads leave SMs with too few loads in
  // flight: one channel a thread at 8 x 4096, two at 64 x 4096, four from 64 x 8192), all of a
  // row's tokens in one thread when the registers allow (no block barrier), 128 threads a block.
  // A circular state is a row of state_len entries a channel, so no two channels' entries share a
  // sector: one channel a thread in blocks of 512 (the winner; 128 threads ran 1.10x).
  constexpr std::int64_t kThreadsWanted = std::int64_t(1) << 17;
  const std::array<int, 5> blocks = p.circular ? std::array<int, 5>{512, 256, 128, 64, 32}
                                               : std::array<int, 5>{128, 256, 512, 64, 32};
  for (int vc : {4, 2, 1}) {
    if (vc > 1 && (p.circular || vc * p.element_bytes() > 8 || p.c % vc != 0 || p.n * p.c / vc < kThreadsWanted))
      continue;
    for (int tt : {p.seqlen, 8, 4, 2, 1})
      for (int bt : blocks) {
        const Config c{bt, vc, std::min(tt, p.seqlen)};
        if (is_valid(p, c)) return c;
      }
  }
  const auto all = enumerate(p);  // not reached: one channel and one token a thread always fit
  return all.empty() ? Config{128, 1, 1} : all.front();
}

Geometry geometry(const Problem& p, const Config& c, std::int64_t batch) {
  const int g = groups(p, c);
  const std::int64_t per_block = c.block_threads / g;
  Geometry out;
  out.block = static_cast<unsigned>(per_block * g);
  out.grid = static_cast<unsigned>(batch * ceil_div(p.c / c.channels_per_thread, per_block));
  return out;
}

double model_bytes(const Problem& p, std::int64_t batch) {
  const double elem = p.element_bytes();
  const double rows = double(batch) * double(p.c);
  const double history = p.k - 1;
  // Circular: k - 1 entries read, seqlen written; shifted: k - 1 read and k - 1 written.
  const double state = rows * (history + (p.circular ? p.seqlen : history));
  const double params = double(p.c) * (p.k + (p.bias ? 1 : 0));
  const double indices = (p.circular ? 4.0 : 0.0) + (p.indices ? 4.0 : 0.0);
  return elem * (2 * rows * p.seqlen + state + params) + double(batch) * indices;
}

double model_flops(const Problem& p, std::int64_t batch) {
  return 2.0 * double(batch) * double(p.c) * p.seqlen * p.k;
}

double predicted_seconds(const Problem& p, const Config& c, int sm_count, double bandwidth) {
  constexpr double kLaunch = 2.0e-6;         // a launch's fixed latency
  constexpr double kThreadLatency = 1.0e-6;  // one dependent round of loads, FMAs and stores per resident wave
  const Geometry g = geometry(p, c, p.n);
  const double blocks_per_sm = std::max(1.0, std::floor(2048.0 / g.block));
  const double waves = std::ceil(double(g.grid) / (double(std::max(1, sm_count)) * blocks_per_sm));
  // Values a thread keeps: more registers lower occupancy and lengthen its serial chain.
  const double per_thread = c.channels_per_thread * (c.tokens_per_thread + 2.0 * p.k);
  return kLaunch + std::max(model_bytes(p, p.n) / bandwidth, waves * kThreadLatency) + per_thread * 2e-10 +
         (groups(p, c) > 1 ? 2e-7 : 0.0);
}

namespace {

std::vector<detail::HeaderSource> headers() {
  return {{"common.cuh", embedded::common_cuh},
          {"dwconv_params.h", embedded::dwconv_params_h},
          {"dwconv_activation.cuh", embedded::dwconv_activation_cuh},
          {"dwconv_decode_params.h", embedded::dwconv_decode_params_h}};
}

}  // namespace

detail::CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "dwconv_decode.cu";
  r.source = embedded::dwconv_decode_cu;
  r.headers = headers();
  r.arch = arch;
  r.name_expressions = {fmt::format("kvt_dwconv_decode<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}>",
                                    kernel_type(p.dtype), p.k, p.seqlen, p.align_bytes, p.circular ? 1 : 0,
                                    p.indices ? 1 : 0, p.bias ? 1 : 0, static_cast<int>(p.activation),
                                    p.early ? 1 : 0, c.block_threads, c.channels_per_thread, c.tokens_per_thread)};
  return r;
}

detail::CompileRequest support_request(const Problem& p, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "dwconv_decode.cu";
  r.source = embedded::dwconv_decode_cu;
  r.headers = headers();
  r.arch = arch;
  r.name_expressions = {fmt::format("kvt_compare<{}>", kernel_type(p.dtype))};
  return r;
}

std::string template_hash() {
  return detail::sources_hash({embedded::dwconv_decode_cu, embedded::common_cuh, embedded::dwconv_params_h,
                              embedded::dwconv_activation_cuh, embedded::dwconv_decode_params_h},
                              kDescriptionVersion);
}

}  // namespace kvtune::dwconv_decode
