#include "kernel_templates/normalize/normalize_family.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernel_templates/normalize/normalize_split.h"
#include "core/embedded.h"
#include "core/hash.h"
#include "core/byte_range.h"
#include "core/json_fields.h"
#include "core/key_text.h"

namespace kvtune::normalize {
namespace {

// Bump when this description changes in a way that changes generated code or its meaning.
constexpr int kDescriptionVersion = 4;
constexpr std::int64_t kMaxIterations = 64;          // vectors one thread handles per row
constexpr int kMaxRegisterRowBytes = 128;            // row bytes one thread may keep in registers
constexpr std::size_t kMaxSharedBytes = 160 * 1024;  // the device limit is checked again when tuning

const char* keep_name(Keep k) {
  switch (k) {
    case Keep::registers: return "reg";
    case Keep::shared: return "smem";
    case Keep::reread: return "reread";
    case Keep::staged: return "stage";
  }
  return "?";
}
const char* stat_name(Stat s) { return s == Stat::two_pass ? "twopass" : "welford"; }
const char* kernel_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f16: return "kvt_f16";
    case DType::bf16: return "kvt_bf16";
  }
  return "?";
}

bool is_pow2(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

Error invalid(const NormalizeArgs& args, const char* field, const std::string& why) {
  return Error(Error::Context{"normalize", fmt::format("rows={} cols={} dtype={} mode={}", args.rows, args.cols,
                                                       to_string(args.dtype), to_string(args.mode)),
                              "", "", field},
               why);
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The largest vector access (bytes, down to one element) that every pointer and every row start allows.
int common_alignment(std::int64_t elem, std::initializer_list<const void*> pointers,
                     std::initializer_list<std::int64_t> leading_dimensions) {
  for (int v = 16; v > elem; v /= 2) {
    bool ok = true;
    for (const void* ptr : pointers) ok = ok && (ptr == nullptr || address(ptr) % v == 0);
    for (const std::int64_t ld : leading_dimensions) ok = ok && (ld * elem) % v == 0;
    if (ok) return v;
  }
  return static_cast<int>(elem);
}

int mode_index(NormMode m) { return static_cast<int>(m); }
int affine_bits(const Problem& p) { return (p.gamma ? 1 : 0) | (p.beta ? 2 : 0); }
int stats_bits(const Problem& p) { return (p.mean_out ? 1 : 0) | (p.rstd_out ? 2 : 0); }
// The forward kernels' template argument RES: 0, 1 (residual), 2 (and residual_out).
int residual_form(const Problem& p) { return p.residual ? (p.residual_out ? 2 : 1) : 0; }
// RES as the kernels' last template argument, appended only when set: the names (and code) of calls
// without a residual are unchanged.
std::string residual_argument(const Problem& p) {
  return p.residual ? fmt::format(", {}", residual_form(p)) : std::string();
}

std::vector<detail::HeaderSource> headers() {
  return {{"common.cuh", embedded::common_cuh},
          {"normalize_params.h", embedded::normalize_params_h},
          {"normalize_backward.cuh", embedded::normalize_backward_cuh},
          {"normalize_split.cuh", embedded::normalize_split_cuh}};
}

}  // namespace

bool Config::operator==(const Config& o) const {
  return threads_per_row == o.threads_per_row && rows_per_block == o.rows_per_block &&
         vector_bytes == o.vector_bytes && items == o.items && keep == o.keep && stat == o.stat &&
         row_loop == o.row_loop && recompute == o.recompute && splits == o.splits && row_chunk == o.row_chunk &&
         cooperative == o.cooperative && cluster == o.cluster;
}

std::string Config::label() const {
  std::string label = fmt::format("tpr={},rpb={},vw={}B,keep={},stat={}", threads_per_row, rows_per_block,
                                  vector_bytes, keep_name(keep), stat_name(stat));
  if (row_loop != 1) label += fmt::format(",loop={}", row_loop);
  if (recompute) label += ",recompute";
  if (splits != 1) label += fmt::format(",split={}", splits);
  if (row_chunk != 0) label += fmt::format(",chunk={}", row_chunk);
  if (cooperative) label += ",coop";
  if (cluster) label += ",cluster";
  return label;
}

nlohmann::json Config::to_json() const {
  nlohmann::json j = {{"tpr", threads_per_row}, {"rpb", rows_per_block}, {"vw", vector_bytes},
                      {"items", items},         {"keep", keep_name(keep)}, {"stat", stat_name(stat)}};
  // The backward's fields only where they differ from the forward's (stored forward configs keep their form).
  if (row_loop != 1) j["loop"] = row_loop;
  if (recompute) j["recompute"] = true;
  if (splits != 1) j["split"] = splits;
  if (row_chunk != 0) j["chunk"] = row_chunk;
  if (cooperative) j["coop"] = true;
  if (cluster) j["cluster"] = true;
  return j;
}

Config Config::from_json(const nlohmann::json& j) {
  try {
    Config c;
    c.threads_per_row = detail::json_int(j, "tpr");
    c.rows_per_block = detail::json_int(j, "rpb");
    c.vector_bytes = detail::json_int(j, "vw");
    c.items = detail::json_int(j, "items");
    const auto keep = j.at("keep").get<std::string>();
    if (keep == "reg") c.keep = Keep::registers;
    else if (keep == "smem") c.keep = Keep::shared;
    else if (keep == "reread") c.keep = Keep::reread;
    else if (keep == "stage") c.keep = Keep::staged;
    else throw Error("unknown keep '" + keep + "'");
    const auto stat = j.at("stat").get<std::string>();
    if (stat == "twopass") c.stat = Stat::two_pass;
    else if (stat == "welford") c.stat = Stat::welford;
    else throw Error("unknown stat '" + stat + "'");
    if (j.contains("loop")) c.row_loop = detail::json_int(j, "loop");
    if (j.contains("recompute")) c.recompute = j.at("recompute").get<bool>();
    if (j.contains("split")) c.splits = detail::json_int(j, "split");
    if (j.contains("chunk")) c.row_chunk = detail::json_int(j, "chunk");
    if (j.contains("coop")) c.cooperative = j.at("coop").get<bool>();
    if (j.contains("cluster")) c.cluster = j.at("cluster").get<bool>();
    return c;
  } catch (const std::exception& e) {
    throw Error(Error::Context{"normalize", "", j.dump(), "", "config"}, std::string("malformed config: ") + e.what());
  }
}

bool Problem::operator==(const Problem& o) const {
  return dtype == o.dtype && mode == o.mode && cols == o.cols && rows == o.rows && rows_exact == o.rows_exact &&
         align_bytes == o.align_bytes && gamma == o.gamma && beta == o.beta && mean_out == o.mean_out && rstd_out == o.rstd_out &&
         backward == o.backward && dgamma == o.dgamma && dbeta == o.dbeta && saved_stats == o.saved_stats &&
         residual == o.residual && residual_out == o.residual_out && dresidual == o.dresidual;
}

std::string Problem::key() const {
  if (backward)
    return fmt::format("normalize,{},{},backward,cols={},rows{}{},align={},gamma={},grads={}{},stats={}{}",
                       to_string(dtype), to_string(mode), cols, rows_exact ? "=" : "<=", rows, align_bytes,
                       gamma ? "g" : "", dgamma ? "g" : "", dbeta ? "b" : "", saved_stats ? "saved" : "recompute",
                       dresidual ? ",dres=1" : "");
  return fmt::format("normalize,{},{},cols={},rows{}{},align={},affine={}{},stats={}{}{}", to_string(dtype),
                     to_string(mode), cols, rows_exact ? "=" : "<=", rows, align_bytes, gamma ? "g" : "", beta ? "b" : "",
                     mean_out ? "m" : "", rstd_out ? "r" : "", residual ? (residual_out ? ",res=rs" : ",res=r") : "");
}

int Problem::element_bytes() const { return dtype == DType::f32 ? 4 : 2; }

std::size_t ProblemHash::operator()(const Problem& p) const {
  std::uint64_t h = static_cast<std::uint64_t>(p.cols) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<std::uint64_t>(p.rows) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
  const std::uint64_t small = static_cast<std::uint64_t>(p.dtype) | (static_cast<std::uint64_t>(p.mode) << 4) |
                              (static_cast<std::uint64_t>(p.align_bytes) << 8) | (std::uint64_t(p.gamma) << 16) |
                              (std::uint64_t(p.beta) << 17) | (std::uint64_t(p.mean_out) << 18) |
                              (std::uint64_t(p.rstd_out) << 19) | (std::uint64_t(p.rows_exact) << 20) |
                              (std::uint64_t(p.backward) << 21) | (std::uint64_t(p.dgamma) << 22) |
                              (std::uint64_t(p.dbeta) << 23) | (std::uint64_t(p.saved_stats) << 24) |
                              (std::uint64_t(p.residual) << 25) | (std::uint64_t(p.residual_out) << 26) |
                              (std::uint64_t(p.dresidual) << 27);
  h ^= small + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return static_cast<std::size_t>(h);
}

std::int64_t rows_bucket(std::int64_t rows) {
  std::int64_t b = 1;
  while (b < rows) b <<= 1;
  return b;
}

namespace {

struct LeadingDimension {
  const char* field;
  std::int64_t value;  // as given: 0 means cols
};

// The checks the forward and the backward share: dtype, mode, sizes, leading dimensions, eps and
// ddof. `invalid(field, why)` makes the error.
template <class Invalid>
void check_rows(DType dtype, NormMode mode, std::int64_t rows, std::int64_t cols, float eps, int ddof,
                std::initializer_list<LeadingDimension> lds, const Invalid& invalid) {
  if (static_cast<unsigned>(dtype) > static_cast<unsigned>(DType::bf16))
    throw invalid("dtype", fmt::format("unknown dtype value {}", static_cast<int>(dtype)));
  if (static_cast<unsigned>(mode) > static_cast<unsigned>(NormMode::rmsnorm))
    throw invalid("mode", fmt::format("unknown mode value {}", static_cast<int>(mode)));
  if (rows <= 0) throw invalid("rows", fmt::format("rows must be positive, got {}", rows));
  if (cols <= 0) throw invalid("cols", fmt::format("cols must be positive, got {}", cols));
  if (cols > (std::int64_t(1) << 31)) throw invalid("cols", "cols above 2^31 are not supported");
  // Element offsets and byte sizes stay far inside int64 (kernels index with 64-bit integers).
  constexpr std::int64_t kMaxElements = std::int64_t(1) << 56;
  for (const LeadingDimension& ld : lds) {
    const std::int64_t value = ld.value == 0 ? cols : ld.value;
    if (value < cols)
      throw invalid(ld.field, fmt::format("{} ({}) must be 0 or >= cols ({})", ld.field, ld.value, cols));
    if (value > kMaxElements / rows)
      throw invalid("rows", "rows x leading dimension overflows the addressable element count");
  }
  if (!(eps >= 0.f) || !std::isfinite(eps)) throw invalid("eps", fmt::format("eps must be finite and >= 0, got {}", eps));
  if (ddof != 0 && ddof != 1) throw invalid("ddof", fmt::format("ddof must be 0 or 1, got {}", ddof));
  if (ddof != 0 && mode != NormMode::standardize) throw invalid("ddof", "ddof applies to standardize only");
}

// The outputs y and residual_out may each be an input (x, residual) itself, with the same leading
// dimension (each element is read before it is written, by the thread that writes it), or lie apart
// from every input; never a part of one, and never each other.
void validate_aliasing(const NormalizeArgs& a, std::int64_t elem) {
  using detail::byte_range;
  const auto ld = [&a](std::int64_t v) { return v == 0 ? a.cols : v; };
  const auto range = [&](const char* field, const void* p, std::int64_t ld_p) {
    return byte_range(field, p, ((a.rows - 1) * ld_p + a.cols) * elem);
  };
  struct Operand {
    const char* field;
    const void* pointer;
    std::int64_t ld;
    const char* ld_field;
  };
  const Operand inputs[] = {{"x", a.x, ld(a.ld_x), "ld_x"}, {"residual", a.residual, ld(a.ld_residual), "ld_residual"}};
  const Operand outputs[] = {{"y", a.y, ld(a.ld_y), "ld_y"},
                             {"residual_out", a.residual_out, ld(a.ld_residual_out), "ld_residual_out"}};
  for (const Operand& out : outputs) {
    if (out.pointer == nullptr) continue;
    for (const Operand& in : inputs) {
      if (in.pointer == nullptr) continue;
      if (out.pointer == in.pointer) {
        if (out.ld != in.ld)
          throw invalid(a, out.ld_field, fmt::format("{} == {} needs {} == {}", out.field, in.field, out.ld_field, in.ld_field));
      } else if (range(out.field, out.pointer, out.ld).overlaps(range(in.field, in.pointer, in.ld))) {
        throw invalid(a, out.field,
                      fmt::format("{} partially overlaps {} (only {} == {} is allowed)", out.field, in.field, out.field, in.field));
      }
    }
  }
  if (range("y", a.y, ld(a.ld_y)).overlaps(range("residual_out", a.residual_out, ld(a.ld_residual_out))))
    throw invalid(a, "residual_out", "residual_out overlaps y (two outputs)");
}

}  // namespace

void validate(const NormalizeArgs& a) {
  const auto fail = [&a](const char* field, const std::string& why) { return invalid(a, field, why); };
  check_rows(a.dtype, a.mode, a.rows, a.cols, a.eps, a.ddof,
             {{"ld_x", a.ld_x}, {"ld_y", a.ld_y}, {"ld_residual", a.ld_residual}, {"ld_residual_out", a.ld_residual_out}},
             fail);
  if (a.x == nullptr) throw invalid(a, "x", "x is a null pointer");
  if (a.y == nullptr) throw invalid(a, "y", "y is a null pointer");
  const std::int64_t elem = a.dtype == DType::f32 ? 4 : 2;
  if (a.workspace != nullptr && address(a.workspace) % 256 != 0)
    throw invalid(a, "workspace", "workspace must be aligned to 256 bytes");
  if (a.mode == NormMode::rmsnorm && a.beta != nullptr) throw invalid(a, "beta", "rmsnorm takes no beta");
  if (a.mode == NormMode::rmsnorm && a.mean != nullptr) throw invalid(a, "mean", "rmsnorm has no mean output");
  const auto check_aligned = [&](const void* p, std::int64_t to, const char* field) {
    if (p != nullptr && address(p) % static_cast<std::uintptr_t>(to) != 0)
      throw invalid(a, field, fmt::format("{} must be aligned to {} bytes", field, to));
  };
  check_aligned(a.x, elem, "x");
  check_aligned(a.y, elem, "y");
  check_aligned(a.gamma, elem, "gamma");
  check_aligned(a.beta, elem, "beta");
  check_aligned(a.mean, 4, "mean");
  check_aligned(a.rstd, 4, "rstd");
  check_aligned(a.residual, elem, "residual");
  check_aligned(a.residual_out, elem, "residual_out");
  if (a.residual_out != nullptr && a.residual == nullptr)
    throw invalid(a, "residual_out", "residual_out (s = x + residual) needs a residual");
  validate_aliasing(a, elem);
  // The statistics overlap neither x, y, gamma, beta, the residual nor each other; gamma and beta
  // are inputs: they may share memory with each other or with x, not with an output.
  using detail::byte_range;
  const auto span = [&](std::int64_t ld) { return ((a.rows - 1) * (ld == 0 ? a.cols : ld) + a.cols) * elem; };
  const auto y_range = byte_range("y", a.y, span(a.ld_y));
  const auto r_range = byte_range("residual", a.residual, span(a.ld_residual));
  const auto s_range = byte_range("residual_out", a.residual_out, span(a.ld_residual_out));
  if (const auto hit = detail::first_overlap(
          {byte_range("mean", a.mean, a.rows * 4), byte_range("rstd", a.rstd, a.rows * 4)},
          {byte_range("x", a.x, span(a.ld_x)), y_range, byte_range("gamma", a.gamma, a.cols * elem),
           byte_range("beta", a.beta, a.cols * elem), r_range, s_range}))
    throw invalid(a, hit->first.field, fmt::format("{} overlaps {}", hit->first.field, hit->second.field));
  if (const auto hit = detail::first_overlap(
          {y_range, s_range}, {byte_range("gamma", a.gamma, a.cols * elem), byte_range("beta", a.beta, a.cols * elem)}))
    throw invalid(a, hit->second.field, fmt::format("{} overlaps the output {}", hit->second.field, hit->first.field));
}

namespace {

// The fields the forward's and the backward's keys share.
template <class Args>
Problem row_problem(const Args& a, const detail::Buckets& buckets) {
  Problem p;
  p.dtype = a.dtype;
  p.mode = a.mode;
  p.cols = a.cols;
  p.rows = buckets.bucket(a.rows);
  p.rows_exact = buckets.exact();
  p.gamma = a.gamma != nullptr;
  return p;
}

}  // namespace

Problem make_problem(const NormalizeArgs& a, const detail::Buckets& buckets) {
  Problem p = row_problem(a, buckets);
  p.beta = a.beta != nullptr;
  p.mean_out = a.mean != nullptr;
  p.rstd_out = a.rstd != nullptr;
  p.residual = a.residual != nullptr;
  p.residual_out = a.residual_out != nullptr;
  const auto ld = [&a](std::int64_t v) { return v == 0 ? a.cols : v; };
  p.align_bytes = common_alignment(p.element_bytes(), {a.x, a.y, a.gamma, a.beta, a.residual, a.residual_out},
                                   {ld(a.ld_x), ld(a.ld_y), p.residual ? ld(a.ld_residual) : a.cols,
                                    p.residual_out ? ld(a.ld_residual_out) : a.cols});
  return p;
}

void validate(const NormalizeBackwardArgs& a) {
  const auto invalid = [&a](const char* field, const std::string& why) {
    return Error(Error::Context{"normalize_backward",
                                fmt::format("rows={} cols={} dtype={} mode={}", a.rows, a.cols,
                                            to_string(a.dtype), to_string(a.mode)),
                                "", "", field},
                 why);
  };
  check_rows(a.dtype, a.mode, a.rows, a.cols, a.eps, a.ddof,
             {{"ld_x", a.ld_x}, {"ld_dy", a.ld_dy}, {"ld_dx", a.ld_dx}, {"ld_dresidual_out", a.ld_dresidual_out}},
             invalid);
  if (a.x == nullptr) throw invalid("x", "x is a null pointer");
  if (a.dy == nullptr) throw invalid("dy", "dy is a null pointer");
  if (a.dx == nullptr) throw invalid("dx", "dx is a null pointer");
  const std::int64_t ld_x = a.ld_x == 0 ? a.cols : a.ld_x;
  const std::int64_t ld_dy = a.ld_dy == 0 ? a.cols : a.ld_dy;
  const std::int64_t ld_dx = a.ld_dx == 0 ? a.cols : a.ld_dx;
  if (a.workspace != nullptr && address(a.workspace) % 256 != 0)
    throw invalid("workspace", "workspace must be aligned to 256 bytes");
  if (a.dgamma != nullptr && a.gamma == nullptr)
    throw invalid("dgamma", "dgamma needs the forward's gamma (without gamma there is no dgamma)");
  if (a.mode == NormMode::rmsnorm && a.dbeta != nullptr) throw invalid("dbeta", "rmsnorm has no beta, so no dbeta");
  if (a.mode == NormMode::rmsnorm && a.mean != nullptr) throw invalid("mean", "rmsnorm saves no mean");
  if (a.mode != NormMode::rmsnorm && (a.mean == nullptr) != (a.rstd == nullptr))
    throw invalid(a.mean == nullptr ? "mean" : "rstd", "the saved mean and rstd are given together (or neither)");
  const std::int64_t elem = a.dtype == DType::f32 ? 4 : 2;
  const auto check_aligned = [&](const void* p, std::int64_t to, const char* field) {
    if (p != nullptr && address(p) % static_cast<std::uintptr_t>(to) != 0)
      throw invalid(field, fmt::format("{} must be aligned to {} bytes", field, to));
  };
  check_aligned(a.x, elem, "x");
  check_aligned(a.dy, elem, "dy");
  check_aligned(a.dx, elem, "dx");
  check_aligned(a.gamma, elem, "gamma");
  check_aligned(a.dgamma, elem, "dgamma");
  check_aligned(a.dbeta, elem, "dbeta");
  check_aligned(a.mean, 4, "mean");
  check_aligned(a.rstd, 4, "rstd");
  check_aligned(a.dresidual_out, elem, "dresidual_out");
  using detail::byte_range;
  const auto span = [&](std::int64_t ld) { return ((a.rows - 1) * ld + a.cols) * elem; };
  const auto dx = byte_range("dx", a.dx, span(ld_dx));
  const auto dy = byte_range("dy", a.dy, span(ld_dy));
  const std::int64_t ld_ds = a.ld_dresidual_out == 0 ? a.cols : a.ld_dresidual_out;
  const auto ds = byte_range("dresidual_out", a.dresidual_out, span(ld_ds));
  // dx may be dy or dresidual_out itself (each element is read before it is written), never a part of one.
  for (const auto& [in, ld_in, ld_field] :
       {std::tuple{dy, ld_dy, "ld_dy"}, std::tuple{ds, ld_ds, "ld_dresidual_out"}}) {
    if (in.empty()) continue;
    if (address(a.dx) == in.begin) {
      if (ld_dx != ld_in) throw invalid("ld_dx", fmt::format("dx == {} needs ld_dx == {}", in.field, ld_field));
    } else if (dx.overlaps(in)) {
      throw invalid("dx", fmt::format("dx partially overlaps {} (only dx == {} is allowed)", in.field, in.field));
    }
  }
  const auto inputs = {byte_range("x", a.x, span(ld_x)), byte_range("gamma", a.gamma, a.cols * elem),
                       byte_range("mean", a.mean, a.rows * 4), byte_range("rstd", a.rstd, a.rows * 4)};
  if (const auto hit = detail::first_overlap({dx}, inputs))
    throw invalid("dx", fmt::format("dx overlaps {}", hit->second.field));
  for (const auto& out : {byte_range("dgamma", a.dgamma, a.cols * elem), byte_range("dbeta", a.dbeta, a.cols * elem)}) {
    for (const auto& other : inputs)
      if (out.overlaps(other)) throw invalid(out.field, fmt::format("{} overlaps {}", out.field, other.field));
    for (const auto& other : {dx, dy, ds})
      if (out.overlaps(other)) throw invalid(out.field, fmt::format("{} overlaps {}", out.field, other.field));
  }
  if (byte_range("dgamma", a.dgamma, a.cols * elem).overlaps(byte_range("dbeta", a.dbeta, a.cols * elem)))
    throw invalid("dbeta", "dbeta overlaps dgamma");
}

Problem make_problem(const NormalizeBackwardArgs& a, const detail::Buckets& buckets) {
  Problem p = row_problem(a, buckets);
  p.backward = true;
  p.dgamma = a.dgamma != nullptr;
  p.dbeta = a.dbeta != nullptr;
  p.saved_stats = a.rstd != nullptr;
  p.dresidual = a.dresidual_out != nullptr;
  // dgamma/dbeta are written element by element: their alignment does not limit the vectors.
  const auto ld = [&a](std::int64_t v) { return v == 0 ? a.cols : v; };
  p.align_bytes = common_alignment(p.element_bytes(), {a.x, a.dy, a.dx, a.gamma, a.dresidual_out},
                                   {ld(a.ld_x), ld(a.ld_dy), ld(a.ld_dx), p.dresidual ? ld(a.ld_dresidual_out) : a.cols});
  return p;
}

namespace {

// Hard constraints decide whether a variant can run correctly; pruning rules (prune = true) drop
// variants that can run but waste the machine (idle lanes, narrow accesses, oversized vectors).
// The backward kernel's static `fold` array (normalize.cu): one float a column of a block's row
// groups' stride, where the row groups fold their dgamma/dbeta accumulators on chip.
// One gradient's slab of the fold: a float a column of the block's row groups' stride.
std::size_t fold_slab_floats(const Problem& p, const Config& c) {
  return std::size_t(c.rows_per_block) * std::size_t(c.threads_per_row) * std::size_t(c.vector_bytes / p.element_bytes());
}

// Whether one fold round takes both gradients: their two slabs fit 16 KiB (normalize.cu's kFoldPair).
bool fold_pair(const Problem& p, const Config& c) {
  return p.dgamma && p.dbeta && 2 * fold_slab_floats(p, c) * 4 <= 16384;
}

std::size_t fold_bytes(const Problem& p, const Config& c) {
  if (c.splits != 1 || !p.backward || !(p.dgamma || p.dbeta)) return 0;
  const std::size_t block = std::size_t(c.rows_per_block) * std::size_t(c.threads_per_row);
  const bool fold = c.rows_per_block > 1 && partial_rows_per_block(p, c) == 1;
  // The array also holds the cooperative form's warp sums: a float a thread.
  return std::max(fold ? (fold_pair(p, c) ? 2 : 1) * fold_slab_floats(p, c) : 1, block) * 4;
}

bool check(const Problem& p, const Config& c, std::string* why, bool prune) {
  const auto fail = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (c.splits != 1) {
    if (c.splits < 1) return fail("splits: at least 1");
    return split_rows::check(p, c, why, prune);
  }
  if (c.row_chunk != 0) return fail("row chunks are a field of split rows");
  if (c.cluster) return fail("cluster: the split rows' one-pass form");
  if (c.cooperative && !(p.backward && (p.dgamma || p.dbeta)))
    return fail("cooperative: the split rows' one-pass form or the backward's dgamma/dbeta sums");
  const int elem = p.element_bytes();
  if (!is_pow2(c.threads_per_row) || c.threads_per_row > 1024) return fail("threads per row: power of two <= 1024");
  if (!is_pow2(c.rows_per_block)) return fail("rows per block: power of two");
  const std::int64_t block = std::int64_t(c.threads_per_row) * c.rows_per_block;
  if (block < 32 || block > 1024) return fail("block size outside 32..1024");
  if (!is_pow2(c.vector_bytes) || c.vector_bytes > 16 || c.vector_bytes < elem)
    return fail("vector width: 1..16 bytes, at least one element");
  if (c.vector_bytes > p.align_bytes) return fail("vector width exceeds the pointers' alignment");
  if (!p.backward && (c.row_loop != 1 || c.recompute)) return fail("row loop and recompute are backward fields");
  if (p.backward) {
    if (c.stat != Stat::two_pass) return fail("the backward recomputes statistics in two passes");
    if (!is_pow2(c.row_loop) || c.row_loop > 1024) return fail("row loop: power of two <= 1024");
    if (!p.saved_stats && !c.recompute) return fail("no saved statistics: the backward recomputes them");
    const std::int64_t blocks = ceil_div(p.rows, std::int64_t(c.rows_per_block) * c.row_loop);
    if (prune && (p.dgamma || p.dbeta) && blocks > 2048) return fail("more than 2048 blocks of dgamma/dbeta partials");
    if (prune && c.row_loop > 1 && blocks < 128) return fail("a row loop that leaves fewer than 128 blocks");
  }
  // The backward keeps x and dy (and, in registers, two accumulators): half the row per thread.
  const int kept_rows = p.backward ? 2 : 1;
  if (prune && c.vector_bytes < std::min(4, p.align_bytes) && p.cols >= 4)
    return fail("2-byte accesses only where alignment forces them");
  const std::int64_t vector_elems = c.vector_bytes / elem;
  if (prune && vector_elems > 1 && (vector_elems / 2) >= p.cols) return fail("vector wider than the row");
  const std::int64_t iterations = ceil_div(p.cols, c.threads_per_row * vector_elems);
  if (iterations > kMaxIterations) return fail("too many vectors per thread");
  if (prune && c.threads_per_row > 1 && (c.threads_per_row / 2) * vector_elems >= p.cols)
    return fail("more than half of a row's threads would be idle");
  if (prune && p.mode == NormMode::rmsnorm && c.stat != Stat::two_pass)
    return fail("rmsnorm needs no variance algorithm");
  if (c.keep == Keep::staged) {
    if (!p.backward) return fail("staged rows are a backward keep (its row loop)");
    if (c.vector_bytes < 4) return fail("staged rows copy 4, 8 or 16 bytes a vector");
    if (prune && c.row_loop < 4) return fail("staged rows need a row loop to overlap");
    // Measured on an H100 (2026-11-28): staging won on rows of 4 KiB and more and on none narrower,
    // whose many row groups keep enough loads in flight; there its twins of the register variants
    // only crowded the budgeted search (65536 x 128 bf16: the winner pushed from rank 28 to 54).
    if (prune && p.cols * elem < 4096) return fail("staged rows only for rows of 4 KiB or more");
    if (std::size_t(2 * kept_rows) * std::size_t(c.rows_per_block) *
                std::size_t(ceil_div(p.cols, vector_elems) * vector_elems) * elem +
            fold_bytes(p, c) >
        kMaxSharedBytes)
      return fail("two stages of rows (and the dgamma/dbeta fold) do not fit in shared memory");
  }
  if (in_registers(c.keep)) {
    if (c.items != iterations) return fail("items must equal the vectors per thread");
    if (c.items * c.vector_bytes * kept_rows > kMaxRegisterRowBytes) return fail("row slice too large for registers");
  } else if (c.items != 0) {
    return fail("items apply to register keep only");
  }
  if (c.keep == Keep::shared &&
      std::size_t(kept_rows) * std::size_t(c.rows_per_block) * std::size_t(ceil_div(p.cols, vector_elems) * vector_elems) *
              elem >
          kMaxSharedBytes)
    return fail("rows do not fit in shared memory");
  return true;
}

}  // namespace

bool is_valid(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, true); }
bool is_runnable(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, false); }

namespace {

// The backward's rows per row group: 1 without dgamma/dbeta, else the fewest (from 1, 4, 16, ...)
// that leave at most 1,024 blocks of partials.
int default_row_loop(const Problem& p, int rows_per_block) {
  if (!p.backward || !(p.dgamma || p.dbeta)) return 1;
  int loop = 1;
  while (loop < 1024 && ceil_div(p.rows, std::int64_t(rows_per_block) * loop) > 1024) loop *= 4;
  return loop;
}

}  // namespace

Config seed_config(const Problem& p) {
  Config c;
  c.threads_per_row = 256;
  c.rows_per_block = 1;
  c.vector_bytes = std::min(16, p.align_bytes);
  c.items = 0;
  c.keep = Keep::reread;
  c.stat = p.mode == NormMode::rmsnorm || p.backward ? Stat::two_pass : Stat::welford;
  c.row_loop = default_row_loop(p, c.rows_per_block);
  c.recompute = p.backward && !p.saved_stats;
  return c;
}

std::vector<Config> enumerate(const Problem& p) {
  std::vector<Config> out;
  const Config seed = seed_config(p);
  if (is_runnable(p, seed)) out.push_back(seed);
  const int elem = p.element_bytes();
  for (int vb = elem; vb <= std::min(16, p.align_bytes); vb *= 2) {
    const std::int64_t ve = vb / elem;
    for (int tpr = 1; tpr <= 1024; tpr *= 2) {
      const std::int64_t iterations = ceil_div(p.cols, tpr * ve);
      for (int block : {128, 256, 512, 1024}) {
        if (block < tpr || (block == 1024 && tpr != 1024) || (tpr >= 512 && block != tpr)) continue;
        for (Keep keep : {Keep::registers, Keep::shared, Keep::reread, Keep::staged}) {
          for (Stat stat : {Stat::two_pass, Stat::welford}) {
            for (int loop : {1, 4, 16, 64, 256}) {
              for (bool recompute : {false, true}) {
                Config c;
                c.threads_per_row = tpr;
                c.rows_per_block = block / tpr;
                c.vector_bytes = vb;
                c.items = in_registers(keep) ? static_cast<int>(std::min<std::int64_t>(iterations, 1 << 20)) : 0;
                c.keep = keep;
                c.stat = stat;
                c.row_loop = loop;
                c.recompute = recompute;
                if (is_valid(p, c) && c != seed) out.push_back(c);
                c.cooperative = true;  // the backward's dgamma/dbeta summed by the whole grid
                if (is_valid(p, c)) out.push_back(c);
              }
            }
          }
        }
      }
    }
  }
  split_rows::enumerate(p, out);
  return out;
}

namespace {

// The heuristic's one-block variant, if any is valid.
std::optional<Config> one_block_heuristic(const Problem& p) {
  const int elem = p.element_bytes();
  // Widest vector first; enough threads that each keeps at most 4 vectors, at most a block;
  // the row in registers, else shared memory, else re-read.
  for (int vb = std::min(16, p.align_bytes); vb >= elem; vb /= 2) {
    Config c;
    c.vector_bytes = vb;
    const std::int64_t ve = vb / elem;
    int tpr = 1;
    while (tpr < 1024 && tpr * ve * 4 < p.cols) tpr *= 2;
    while (tpr > 1 && (tpr / 2) * ve >= p.cols) tpr /= 2;
    c.threads_per_row = tpr;
    c.rows_per_block = std::max(1, 256 / tpr);
    c.stat = Stat::two_pass;
    c.row_loop = default_row_loop(p, c.rows_per_block);
    c.recompute = p.backward && !p.saved_stats;
    c.keep = Keep::registers;
    c.items = static_cast<int>(ceil_div(p.cols, tpr * ve));
    if (is_valid(p, c)) return c;
    c.items = 0;
    for (Keep keep : {Keep::shared, Keep::reread}) {
      c.keep = keep;
      if (is_valid(p, c)) return c;
    }
  }
  return std::nullopt;
}

}  // namespace

Config heuristic_config(const Problem& p, int cc_major, const std::string& gpu_model) {
  std::optional<Config> one_block = one_block_heuristic(p);
  const std::vector<Config> space = one_block ? std::vector<Config>{} : enumerate(p);
  for (const auto& c : space)
    if (!one_block && c.splits == 1) one_block = c;
  if (const auto split = split_rows::heuristic(p, one_block.has_value())) return *split;
  if (one_block) {
    if (const auto learned = learned_config(p, cc_major, gpu_model)) return *learned;
    return *one_block;
  }
  for (const auto& c : space)
    if (is_valid(p, c)) return c;
  throw Error(Error::Context{"normalize", p.key(), "", "", ""}, "no valid variant for this problem");
}

int partial_rows_per_block(const Problem& p, const Config& c) {
  const bool fold = p.backward && (p.dgamma || p.dbeta) && in_registers(c.keep) && c.rows_per_block > 1;
  return fold ? 1 : c.rows_per_block;
}

Geometry geometry(const Problem& p, const Config& c, std::int64_t rows) {
  Geometry g;
  if (c.splits != 1) {
    split_rows::geometry(p, c, rows, g);
    return g;
  }
  g.block = static_cast<unsigned>(c.threads_per_row * c.rows_per_block);
  const std::int64_t blocks = ceil_div(rows, std::int64_t(c.rows_per_block) * c.row_loop);
  g.grid = static_cast<unsigned>(blocks);
  if (c.keep == Keep::shared || c.keep == Keep::staged) {
    const std::int64_t ve = c.vector_bytes / p.element_bytes();
    g.dynamic_smem = std::size_t(c.keep == Keep::staged ? 2 : 1) * std::size_t(p.backward ? 2 : 1) *
                     std::size_t(c.rows_per_block) * std::size_t(ceil_div(p.cols, ve) * ve) * p.element_bytes();
  }
  if (p.backward && (p.dgamma || p.dbeta)) {
    const auto align256 = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
    const std::size_t grads = std::size_t(p.dgamma) + std::size_t(p.dbeta);
    g.group_blocks = std::max(1, static_cast<int>(std::ceil(std::sqrt(double(blocks)))));  // rows = 0: no blocks
    g.level1_rows = static_cast<int>(ceil_div(blocks, g.group_blocks));
    const std::size_t partial_rows = std::size_t(blocks) * std::size_t(partial_rows_per_block(p, c));
    g.level1_offset = align256(grads * partial_rows * std::size_t(p.cols) * 4);
    g.counter_offset = align256(g.level1_offset + grads * std::size_t(g.level1_rows) * std::size_t(p.cols) * 4);
    g.workspace_bytes = align256(g.counter_offset + std::size_t(g.level1_rows + 1) * 4);
    g.cooperative = c.cooperative;
  }
  return g;
}

double model_bytes(const Problem& p, std::int64_t rows) {
  const double elem = p.element_bytes();
  if (p.backward) {
    double bytes = 3.0 * double(rows) * double(p.cols) * elem;
    bytes += (p.gamma + p.dgamma + p.dbeta) * double(p.cols) * elem;
    if (p.saved_stats) bytes += (p.mode == NormMode::rmsnorm ? 4.0 : 8.0) * double(rows);
    if (p.dresidual) bytes += double(rows) * double(p.cols) * elem;
    return bytes;
  }
  double bytes = (2.0 + p.residual + p.residual_out) * double(rows) * double(p.cols) * elem;
  bytes += (p.gamma + p.beta) * double(p.cols) * elem;
  bytes += (p.mean_out + p.rstd_out) * double(rows) * 4.0;
  return bytes;
}

double model_flops(const Problem& p, std::int64_t rows) {
  if (p.backward) return 14.0 * double(rows) * double(p.cols);
  return 7.0 * double(rows) * double(p.cols) + 2.0 * (p.gamma + p.beta) * double(rows) * double(p.cols);
}

int kernel_phases(const Problem& p, const Config& c) {
  return c.splits != 1 && !p.backward && !c.cooperative && !c.cluster ? 3 : 1;
}

detail::CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "normalize.cu";
  r.source = embedded::normalize_cu;
  r.headers = headers();
  r.arch = arch;
  const std::int64_t ve = c.vector_bytes / p.element_bytes();
  // FULL: the register-kept row is covered exactly, so the kernel needs no per-element masks.
  const bool full = in_registers(c.keep) && p.cols == std::int64_t(c.items) * c.threads_per_row * ve;
  if (c.splits != 1) {
    if (p.backward)
      r.name_expressions = {fmt::format("kvt_normalize_backward_split<{}, {}, {}, {}, {}, {}, {}, {}{}>",
                                        kernel_type(p.dtype), c.threads_per_row, ve, c.items, mode_index(p.mode),
                                        p.gamma ? 1 : 0, (p.dgamma ? 1 : 0) | (p.dbeta ? 2 : 0), c.recompute ? 1 : 0,
                                        p.dresidual ? ", 1" : "")};
    else if (c.cluster)  // loop=4: gamma / beta held (HOLD); keep=stage: the next row staged (STAGE)
      r.name_expressions = {fmt::format("kvt_normalize_split_cluster<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}>",
                                        kernel_type(p.dtype), c.threads_per_row, ve, c.items, mode_index(p.mode),
                                        affine_bits(p), stats_bits(p), residual_form(p),
                                        c.row_loop > 1 ? 1 : 0, c.keep == Keep::staged ? 1 : 0)};
    else if (c.cooperative)
      r.name_expressions = {fmt::format("kvt_normalize_split_coop<{}, {}, {}, {}, {}, {}, {}{}>", kernel_type(p.dtype),
                                        c.threads_per_row, ve, c.items, mode_index(p.mode), affine_bits(p),
                                        stats_bits(p), residual_argument(p))};
    else  // one kernel per phase, each with its own registers
      for (int phase = 0; phase < kernel_phases(p, c); ++phase)
        r.name_expressions.push_back(fmt::format(
            "kvt_normalize_split<{}, {}, {}, {}, {}, {}, {}, {}{}>", phase, kernel_type(p.dtype), c.threads_per_row, ve,
            c.items, mode_index(p.mode), affine_bits(p), stats_bits(p),
            c.row_loop > 1 ? fmt::format(", {}, 1", residual_form(p)) : residual_argument(p)));
    return r;
  }
  if (p.backward) {
    r.name_expressions = {fmt::format("kvt_normalize_backward<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}{}>",
                                      kernel_type(p.dtype), c.threads_per_row, c.rows_per_block, ve, c.items,
                                      static_cast<int>(c.keep), mode_index(p.mode), p.gamma ? 1 : 0,
                                      (p.dgamma ? 1 : 0) | (p.dbeta ? 2 : 0), c.recompute ? 1 : 0,
                                      full ? "true" : "false", p.dresidual ? ", 1" : "")};
    return r;
  }
  r.name_expressions = {fmt::format("kvt_normalize<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}{}>", kernel_type(p.dtype),
                                    c.threads_per_row, c.rows_per_block, ve, c.items, static_cast<int>(c.keep),
                                    static_cast<int>(c.stat), mode_index(p.mode), affine_bits(p), stats_bits(p),
                                    full ? "true" : "false", residual_argument(p))};
  return r;
}

detail::CompileRequest reference_request(const Problem& p, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "normalize.cu";
  r.source = embedded::normalize_cu;
  r.headers = headers();
  r.arch = arch;
  if (p.backward) {
    r.name_expressions = {fmt::format("kvt_normalize_backward_reference<{}, {}, {}>", kernel_type(p.dtype),
                                      mode_index(p.mode), p.gamma ? 1 : 0),
                          fmt::format("kvt_compare<{}>", kernel_type(p.dtype)), "kvt_compare<float>"};
    return r;
  }
  r.name_expressions = {
      fmt::format("kvt_normalize_reference<{}, {}, {}>", kernel_type(p.dtype), mode_index(p.mode), affine_bits(p)),
      fmt::format("kvt_compare<{}>", kernel_type(p.dtype)), "kvt_compare<float>"};
  return r;
}

std::string template_hash() {
  return detail::sources_hash({embedded::normalize_cu, embedded::common_cuh, embedded::normalize_params_h,
                              embedded::normalize_backward_cuh, embedded::normalize_split_cuh}, kDescriptionVersion);
}

}  // namespace kvtune::normalize

namespace kvtune::normalize {

std::optional<Problem> problem_from_key(const std::string& key) {
  using detail::key_number;
  using detail::key_value;
  std::vector<std::string> parts = detail::split_key(key);
  static constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
  static constexpr NormMode kModes[] = {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm};
  // The optional last parts: ",dres=1" (backward) and ",res=r" / ",res=rs" (forward).
  bool dresidual = false, residual = false, residual_out = false;
  if (parts.size() == 11 && parts[10] == "dres=1") {
    dresidual = true;
    parts.pop_back();
  } else if (parts.size() == 9 && (parts[8] == "res=r" || parts[8] == "res=rs")) {
    residual = true;
    residual_out = parts[8] == "res=rs";
    parts.pop_back();
  }
  if (parts.size() == 10 && parts[0] == "normalize" && parts[3] == "backward") {
    const auto dtype = detail::key_enum(parts[1], kDTypes);
    const auto mode = detail::key_enum(parts[2], kModes);
    const auto cols = key_number(key_value(parts[4], "cols="));
    auto rows = key_number(key_value(parts[5], "rows<="));
    const bool exact = !rows;
    if (exact) rows = key_number(key_value(parts[5], "rows="));
    const auto align = key_number(key_value(parts[6], "align="));
    const auto gamma = key_value(parts[7], "gamma=");
    const auto grads = key_value(parts[8], "grads=");
    const auto stats = key_value(parts[9], "stats=");
    if (!dtype || !mode || !cols || !rows || !align || !gamma || !grads || !stats || *cols <= 0 || *rows <= 0 ||
        *align > 16)
      return std::nullopt;
    Problem p;
    p.backward = true;
    p.dtype = *dtype;
    p.mode = *mode;
    p.cols = *cols;
    p.rows = *rows;
    p.rows_exact = exact;
    p.align_bytes = static_cast<int>(*align);
    p.gamma = *gamma == "g";
    p.dgamma = grads->find('g') != std::string::npos;
    p.dbeta = grads->find('b') != std::string::npos;
    p.saved_stats = *stats == "saved";
    p.dresidual = dresidual;
    if (p.key() != key) return std::nullopt;
    return p;
  }
  if (parts.size() != 8 || parts[0] != "normalize") return std::nullopt;
  const auto dtype = detail::key_enum(parts[1], kDTypes);
  const auto mode = detail::key_enum(parts[2], kModes);
  const auto cols = key_number(key_value(parts[3], "cols="));
  auto rows = key_number(key_value(parts[4], "rows<="));
  const bool exact = !rows;
  if (exact) rows = key_number(key_value(parts[4], "rows="));
  const auto align = key_number(key_value(parts[5], "align="));
  const auto affine = key_value(parts[6], "affine=");
  const auto stats = key_value(parts[7], "stats=");
  if (!dtype || !mode || !cols || !rows || !align || !affine || !stats || *cols <= 0 || *rows <= 0 || *align > 16)
    return std::nullopt;
  Problem p;
  p.dtype = *dtype;
  p.mode = *mode;
  p.cols = *cols;
  p.rows = *rows;
  p.rows_exact = exact;
  p.align_bytes = static_cast<int>(*align);
  p.gamma = affine->find('g') != std::string::npos;
  p.beta = affine->find('b') != std::string::npos;
  p.mean_out = stats->find('m') != std::string::npos;
  p.rstd_out = stats->find('r') != std::string::npos;
  p.residual = residual;
  p.residual_out = residual_out;
  if (p.key() != key) return std::nullopt;
  return p;
}

double predicted_seconds(const Problem& p, const Config& c, int sm_count, double bandwidth) {
  if (c.splits != 1) return split_rows::predicted_seconds(p, c, sm_count, bandwidth);
  // Calibration (H200, the exhaustive trials of 2026-11-22; bench/NOTES.md, "cost model"):
  constexpr double kLatency = 0.7e-6;       // DRAM load latency, s
  constexpr double kShuffle = 10e-9;        // one warp-shuffle step of a reduction
  constexpr double kBlockSync = 50e-9;      // a block-level reduction stage (threads per row > 32)
  constexpr double kIteration = 60e-9;      // one vector iteration of a row pass, per thread
  constexpr double kWelford = 5.0;          // Welford's per-element cost relative to two-pass
  constexpr double kSharedPass = 100e-9;    // staging a row in shared memory
  constexpr double kRereadFraction = 0.5;   // a re-read pass misses L2 about half the time
  const double cols = double(p.cols), rows = double(p.rows), elem = p.element_bytes();
  const std::int64_t ve = c.vector_bytes / p.element_bytes();
  const std::int64_t iterations = ceil_div(p.cols, c.threads_per_row * ve);
  const std::int64_t block = std::int64_t(c.threads_per_row) * c.rows_per_block;
  const bool registers = in_registers(c.keep);
  const std::int64_t regs = 32 + (registers ? iterations * c.vector_bytes / 4 : 0);
  const std::int64_t threads_per_sm = std::min<std::int64_t>(2048, 65536 / regs / 32 * 32);
  std::int64_t blocks_per_sm = block <= threads_per_sm ? std::min<std::int64_t>(32, threads_per_sm / block) : 0;
  if (c.keep == Keep::staged)  // two stages of x and dy a row group, the fold and 1 KiB reserved a block (228 KiB an SM on sm_90)
    blocks_per_sm = std::min<std::int64_t>(
        blocks_per_sm, std::int64_t(228 * 1024) / std::int64_t(geometry(p, c, 0).dynamic_smem + fold_bytes(p, c) + 1024));
  if (blocks_per_sm == 0) return 1.0;  // cannot be resident: last
  const double blocks = std::ceil(rows / (c.rows_per_block * c.row_loop));
  const double resident_blocks = std::min(blocks, double(sm_count * blocks_per_sm));
  const double waves = blocks / double(sm_count * blocks_per_sm);
  // The backward reads x and dy and writes dx; re-read variants read x (and dy) again; partials
  // not kept in registers are updated in place (in L2) once per row.
  const double tensors = p.backward ? 3 : 2;
  double bytes = tensors * rows * cols * elem;
  if (c.keep == Keep::reread) bytes += rows * cols * elem * kRereadFraction * (p.backward ? 3 : 1);
  if (p.backward && !registers) bytes += (p.dgamma + p.dbeta) * rows * cols * 8 * kRereadFraction;
  // The cooperative backward launches at most the resident blocks: one partial row set each.
  const double grid = c.cooperative ? std::max(1.0, std::min(blocks, double(sm_count * blocks_per_sm))) : blocks;
  if (p.backward && (p.dgamma || p.dbeta)) bytes += (p.dgamma + p.dbeta) * 8.0 * cols * grid * partial_rows_per_block(p, c);
  const double unrolled = registers ? double(iterations) : 1.0;
  const double lanes_used = std::min(1.0, cols / double(c.threads_per_row * ve));
  const double in_flight = resident_blocks * double(block) * unrolled * c.vector_bytes * lanes_used;
  const double memory = bytes / bandwidth * std::max(1.0, bandwidth * kLatency / std::max(in_flight, 1.0));
  const double reduction = std::log2(double(c.threads_per_row)) * kShuffle + (c.threads_per_row > 32 ? kBlockSync : 0);
  int reductions = p.mode == NormMode::rmsnorm ? 1 : c.stat == Stat::two_pass ? 2 : 1;
  if (p.backward) reductions = (c.recompute ? reductions : 0) + 1;
  const double chain = kLatency * (c.keep == Keep::reread ? 2 : 1) + reductions * reduction +
                       double(iterations) * kIteration * (c.stat == Stat::welford ? kWelford : 1.0) +
                       (c.keep == Keep::shared ? kSharedPass : 0);
  // The backward's dgamma/dbeta tail: two arrival levels, each a last block summing its rows (eight
  // rows of four columns in flight a thread) over the columns its threads cover; folding the row
  // groups on chip costs two block syncs an item and gradient.
  // The cooperative form: one grid-wide arrival, then each block sums its tiles of 32 columns over
  // the grid's partial rows, each warp 32 rows in flight (kGridRows in normalize_backward.cuh).
  double tail = 0;
  if (p.backward && (p.dgamma || p.dbeta) && c.cooperative) {
    constexpr double kGridRows = 32;
    const double tiles = std::ceil(cols / 32) * (p.dgamma + p.dbeta);
    tail = 2 * kLatency + std::ceil(tiles / grid) *
                              std::ceil(grid * partial_rows_per_block(p, c) / (double(block) / 32 * kGridRows)) *
                              kLatency * 0.5;
  } else if (p.backward && (p.dgamma || p.dbeta)) {
    const double group = std::ceil(std::sqrt(blocks));
    const double column_passes = std::ceil(cols / double(4 * block)) * (p.dgamma + p.dbeta);
    tail = (std::ceil(group * partial_rows_per_block(p, c) / 8) + std::ceil(std::ceil(blocks / group) / 8)) *
           kLatency * 0.5 * column_passes;
  }
  if (p.backward && (p.dgamma || p.dbeta) && partial_rows_per_block(p, c) != c.rows_per_block) {
    tail += 2.0 * kBlockSync * double(iterations) * (fold_pair(p, c) ? 1 : p.dgamma + p.dbeta);
  }
  // Staged rows: a row's loads were issued during the previous row, so the row loop's steps wait
  // for its reductions and a pass over shared memory, not for DRAM (the first row still does).
  const double step = c.keep == Keep::staged ? chain - kLatency + kSharedPass : chain;
  return std::max(memory, std::ceil(waves) * c.row_loop * step) + chain + tail;
}

}  // namespace kvtune::normalize
