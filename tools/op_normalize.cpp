// The tools' handler of the normalize operator: shapes entries, suites, space sizes, variants,
// tuning through the library, and stored keys.

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_split.h"
#include "core/cuda_check.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/op_family.h"
#include "tools/ops.h"

namespace kvtune::tools {
namespace {

namespace nz = kvtune::normalize;

// Sizes beyond these are refused as absurd before anything is allocated: the library's own limit
// on a dimension, and 2^34 elements per tensor (64 GiB of f32, more than any GPU holds twice).
constexpr std::int64_t kMaxDimension = std::int64_t(1) << 31;
constexpr std::int64_t kMaxElements = std::int64_t(1) << 34;

const std::set<std::string> kFields = {"op",   "direction", "layout", "rows", "cols", "dtype", "mode",   "gamma",
                                       "beta", "mean",      "rstd",   "align", "eps", "ddof",  "dgamma", "dbeta",
                                       "saved", "residual", "residual_out", "dresidual"};

struct Entry {
  nz::Problem problem;     // rows is the bucket, as in the library
  std::int64_t rows = 0;   // the rows of the call the tool makes
  float eps = 1e-5f;
  int ddof = 0;
};

int natural_align(DType dtype, std::int64_t cols) {
  const int elem = dtype == DType::f32 ? 4 : 2;
  for (int v = 16; v > elem; v /= 2)
    if ((cols * elem) % v == 0) return v;
  return elem;
}

std::string dtype_name(DType d) { return to_string(d); }

NormMode parse_mode(const std::string& text, const std::string& where) {
  for (NormMode m : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm})
    if (text == to_string(m)) return m;
  throw InputError(fmt::format("{}: unknown mode '{}' (standardize, layernorm, rmsnorm)", where, text));
}

Entry parse_entry(const nlohmann::json& entry, const std::string& where) {
  for (const auto& [name, value] : entry.items()) {
    (void)value;
    if (kFields.count(name) == 0) {
      std::string known;
      for (const auto& f : kFields) known += (known.empty() ? "" : ", ") + f;
      throw InputError(fmt::format("{}: unknown field '{}' for operator normalize (known: {})", where, name, known));
    }
  }
  const std::string direction = json_string(entry, "direction", where, "forward");
  if (direction != "forward" && direction != "backward")
    throw InputError(fmt::format("{}: normalize has directions 'forward' and 'backward', got '{}'", where, direction));
  if (const std::string l = json_string(entry, "layout", where, "row_major"); l != "row_major")
    throw InputError(fmt::format("{}: normalize has layout 'row_major' only, got '{}'", where, l));
  for (const char* field : {"rows", "cols"})
    if (!entry.contains(field)) throw InputError(fmt::format("{}: missing field '{}'", where, field));

  Entry e;
  e.rows = json_integer(entry.at("rows"), "rows", where);
  const std::int64_t cols = json_integer(entry.at("cols"), "cols", where);
  if (e.rows <= 0) throw InputError(fmt::format("{}: 'rows' must be positive, got {}", where, e.rows));
  if (cols <= 0) throw InputError(fmt::format("{}: 'cols' must be positive, got {}", where, cols));
  if (e.rows > kMaxDimension || cols > kMaxDimension)
    throw InputError(fmt::format("{}: {} x {} is absurd: each dimension is at most 2^31", where, e.rows, cols));
  if (e.rows > kMaxElements / cols)
    throw InputError(fmt::format("{}: {} x {} = {:.3g} elements is absurd: at most 2^34 per tensor", where, e.rows,
                                 cols, double(e.rows) * double(cols)));

  nz::Problem& p = e.problem;
  p.dtype = parse_dtype_name(json_string(entry, "dtype", where, "f32"), where);
  p.mode = parse_mode(json_string(entry, "mode", where, "standardize"), where);
  p.cols = cols;
  p.rows = nz::rows_bucket(e.rows);
  p.backward = direction == "backward";
  p.gamma = json_bool(entry, "gamma", where, false);
  p.beta = json_bool(entry, "beta", where, false);
  p.mean_out = json_bool(entry, "mean", where, false);
  p.rstd_out = json_bool(entry, "rstd", where, false);
  p.dgamma = json_bool(entry, "dgamma", where, false);
  p.dbeta = json_bool(entry, "dbeta", where, false);
  p.saved_stats = json_bool(entry, "saved", where, false);
  p.residual = json_bool(entry, "residual", where, false);
  p.residual_out = json_bool(entry, "residual_out", where, false);
  p.dresidual = json_bool(entry, "dresidual", where, false);
  if (p.residual_out && !p.residual) throw InputError(fmt::format("{}: residual_out needs residual", where));
  if (p.backward) {
    for (const char* field : {"residual", "residual_out"})
      if (entry.contains(field) && json_bool(entry, field, where, false))
        throw InputError(fmt::format("{}: '{}' is a forward field; the backward takes dresidual", where, field));
    // The backward reads gamma (the forward's), optionally the saved statistics, and writes dx,
    // dgamma and dbeta: beta, mean and rstd as outputs belong to the forward.
    for (const char* field : {"beta", "mean", "rstd"})
      if (entry.contains(field) && json_bool(entry, field, where, false))
        throw InputError(fmt::format("{}: '{}' is a forward field; the backward takes gamma, dgamma, dbeta, saved",
                                     where, field));
    if (p.dgamma && !p.gamma) throw InputError(fmt::format("{}: dgamma needs gamma", where));
    if (p.mode == NormMode::rmsnorm && p.dbeta) throw InputError(fmt::format("{}: rmsnorm has no dbeta", where));
  } else {
    for (const char* field : {"dgamma", "dbeta", "saved", "dresidual"})
      if (entry.contains(field)) throw InputError(fmt::format("{}: '{}' is a backward field", where, field));
  }
  if (p.mode == NormMode::rmsnorm && p.beta) throw InputError(fmt::format("{}: rmsnorm takes no beta", where));
  if (p.mode == NormMode::rmsnorm && p.mean_out) throw InputError(fmt::format("{}: rmsnorm has no mean output", where));
  p.align_bytes = natural_align(p.dtype, cols);
  if (entry.contains("align")) {
    const std::int64_t align = json_integer(entry.at("align"), "align", where);
    if (align != 2 && align != 4 && align != 8 && align != 16)
      throw InputError(fmt::format("{}: 'align' must be 2, 4, 8 or 16 bytes, got {}", where, align));
    if (align < p.element_bytes())
      throw InputError(fmt::format("{}: 'align' {} is below the {}-byte element of {}", where, align,
                                   p.element_bytes(), dtype_name(p.dtype)));
    p.align_bytes = static_cast<int>(align);
  }
  if (entry.contains("eps")) {
    const auto& v = entry.at("eps");
    if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
      throw InputError(fmt::format("{}: 'eps' must be a finite number >= 0, got {}", where, v.dump()));
    e.eps = v.get<float>();
  }
  if (entry.contains("ddof")) {
    const std::int64_t ddof = json_integer(entry.at("ddof"), "ddof", where);
    if (ddof != 0 && ddof != 1) throw InputError(fmt::format("{}: 'ddof' must be 0 or 1, got {}", where, ddof));
    if (ddof != 0 && p.mode != NormMode::standardize)
      throw InputError(fmt::format("{}: 'ddof' applies to standardize only", where));
    e.ddof = static_cast<int>(ddof);
  }
  return e;
}

std::string describe_problem(const nz::Problem& p, std::int64_t rows) {
  std::string s = fmt::format("{}x{} {} {}{}", rows, p.cols, dtype_name(p.dtype), to_string(p.mode),
                              p.backward ? " backward" : "");
  if (p.gamma) s += " +gamma";
  if (p.dgamma) s += " +dgamma";
  if (p.dbeta) s += " +dbeta";
  if (p.backward) s += p.saved_stats ? " saved" : " recompute";
  if (p.beta) s += " +beta";
  if (p.mean_out) s += " +mean";
  if (p.rstd_out) s += " +rstd";
  if (p.residual) s += p.residual_out ? " +residual(+out)" : " +residual";
  if (p.dresidual) s += " +dresidual";
  if (p.align_bytes != natural_align(p.dtype, p.cols)) s += fmt::format(" align={}", p.align_bytes);
  return s;
}

nlohmann::json backward_entry(std::int64_t rows, std::int64_t cols, const char* dtype, const char* mode, bool gamma,
                              bool dgamma, bool dbeta, bool saved) {
  return {{"op", "normalize"}, {"direction", "backward"}, {"rows", rows},     {"cols", cols},
          {"dtype", dtype},    {"mode", mode},            {"gamma", gamma},   {"dgamma", dgamma},
          {"dbeta", dbeta},    {"saved", saved}};
}

nlohmann::json entry(std::int64_t rows, std::int64_t cols, const char* dtype, const char* mode, bool gamma = false,
                     bool beta = false, bool mean = false, bool rstd = false) {
  return {{"op", "normalize"}, {"rows", rows}, {"cols", cols}, {"dtype", dtype}, {"mode", mode},
          {"gamma", gamma},     {"beta", beta}, {"mean", mean}, {"rstd", rstd}};
}

// The fused residual's fields, present only when set (entries without them are unchanged).
void add_residual_fields(const nz::Problem& p, nlohmann::json& j) {
  if (p.residual) j["residual"] = true;
  if (p.residual_out) j["residual_out"] = true;
  if (p.dresidual) j["dresidual"] = true;
}

// The tools' side of the family (tools/op_family.h, FamilyProblem).
struct NormalizeSide {
  using Entry = tools::Entry;
  static std::int64_t call_size(const Entry& e) { return e.rows; }
  static std::string describe(const nz::Problem& p, std::int64_t rows) { return describe_problem(p, rows); }
  static Entry parse(const nlohmann::json& entry, const std::string& where) { return parse_entry(entry, where); }
  static std::string seed_label(const nz::Problem& p) { return nz::seed_config(p).label(); }
  static std::vector<std::string> suite_names() { return {"ids", "large", "narrow", "backward", "wide", "residual"}; }
  static nlohmann::json entry_of(const Entry& e) {
    const nz::Problem& p = e.problem;
    nlohmann::json j = {{"op", "normalize"}, {"rows", e.rows},          {"cols", p.cols},
                        {"dtype", dtype_name(p.dtype)}, {"mode", to_string(p.mode)}, {"gamma", p.gamma},
                        {"beta", p.beta},      {"mean", p.mean_out},     {"rstd", p.rstd_out},
                        {"align", p.align_bytes}};
    if (p.backward) {
      j["direction"] = "backward";
      j.erase("beta");
      j.erase("mean");
      j.erase("rstd");
      j["dgamma"] = p.dgamma;
      j["dbeta"] = p.dbeta;
      j["saved"] = p.saved_stats;
    }
    if (e.eps != 1e-5f) j["eps"] = e.eps;
    if (e.ddof != 0) j["ddof"] = e.ddof;
    add_residual_fields(p, j);
    return j;
  }

  // The shapes entry of a call of the key's size (its rows key is made the stored one afterwards).
  static nlohmann::json entry_of_key(const nz::Problem& p) {
    nlohmann::json entry = {{"op", "normalize"}, {"rows", p.rows},        {"cols", p.cols},
                            {"dtype", dtype_name(p.dtype)}, {"mode", to_string(p.mode)},
                            {"gamma", p.gamma}, {"beta", p.beta},        {"mean", p.mean_out},
                            {"rstd", p.rstd_out}, {"align", p.align_bytes}};
    if (p.backward) {
      entry = backward_entry(p.rows, p.cols, dtype_name(p.dtype).c_str(), to_string(p.mode), p.gamma, p.dgamma,
                             p.dbeta, p.saved_stats);
      entry["align"] = p.align_bytes;
    }
    add_residual_fields(p, entry);
    return entry;
  }
  static std::vector<nlohmann::json> suite(const std::string& name) {
    if (name == "ids") {
      // Packet normalization for intrusion detection: per-row standardize of feature vectors,
      // batches of 1k-100k packets, 37-1024 features (37 and 78: common flow-feature sets).
      std::vector<nlohmann::json> out;
      for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
               {1024, 128}, {4096, 256}, {8192, 512}, {16384, 1024}, {1024, 37},
               {2048, 37}, {16384, 37}, {100000, 37}, {4096, 78}, {1500, 1024}})
        out.push_back(entry(rows, cols, "f32", "standardize"));
      return out;
    }
    if (name == "large") {
      // At least 256 MiB moved per call: bandwidth-bound at full occupancy.
      return {entry(65536, 1024, "f32", "layernorm", true, true),
              entry(32768, 4096, "bf16", "rmsnorm", true),
              entry(16384, 8192, "f16", "layernorm", true, true),
              entry(262144, 256, "f32", "standardize"),
              entry(1048576, 37, "f32", "standardize", false, false, true, true),
              entry(131072, 1024, "bf16", "layernorm", true, true, true, true),
              entry(2048, 65536, "f32", "rmsnorm")};
    }
    if (name == "narrow") {
      // Fewer than 64 columns: many rows per block, short vectors, idle-lane pruning at work.
      return {entry(100000, 37, "f32", "standardize"),
              entry(65536, 1, "f32", "standardize"),
              entry(131072, 3, "f32", "layernorm"),
              entry(262144, 7, "f16", "rmsnorm"),
              entry(65536, 16, "bf16", "layernorm", true, true),
              entry(32768, 33, "f32", "standardize", false, false, true, true),
              entry(16384, 63, "bf16", "rmsnorm", true),
              entry(1000000, 8, "f32", "standardize")};
    }
    if (name == "backward") {
      // Training: LayerNorm / RMSNorm gradients of transformer widths from the saved statistics,
      // and the packet standardization's (recomputed, no affine).
      return {backward_entry(4096, 1024, "bf16", "layernorm", true, true, true, true),
              backward_entry(16384, 768, "bf16", "layernorm", true, true, true, true),
              backward_entry(8192, 4096, "bf16", "layernorm", true, true, true, true),
              backward_entry(8192, 1024, "f32", "layernorm", true, true, true, true),
              backward_entry(8192, 4096, "bf16", "rmsnorm", true, true, false, true),
              backward_entry(4096, 1024, "f32", "rmsnorm", true, true, false, false),
              backward_entry(16384, 128, "f32", "standardize", false, false, false, false),
              backward_entry(1024, 128, "f32", "standardize", false, false, false, true)};
    }
    if (name == "residual") {
      // The fused residual add of pre-norm transformers: s = x + residual written and normalized, and
      // the backward with the gradient flowing into s.
      std::vector<nlohmann::json> out = {entry(16384, 1024, "bf16", "layernorm", true, true),
                                         entry(8192, 4096, "bf16", "layernorm", true, true),
                                         entry(16384, 2048, "bf16", "rmsnorm", true),
                                         entry(16384, 128, "f32", "standardize"),
                                         entry(4, 1 << 20, "f32", "rmsnorm", true)};
      for (auto& e : out) e["residual"] = e["residual_out"] = true;
      for (auto e : {backward_entry(16384, 1024, "bf16", "layernorm", true, true, true, true),
                     backward_entry(16384, 2048, "bf16", "rmsnorm", true, true, false, true)}) {
        e["dresidual"] = true;
        out.push_back(e);
      }
      return out;
    }
    if (name == "wide") {
      // Rows one block cannot hold or few rows one block per row would leave the GPU idle: split rows
      // (2^20 and 2^22 columns, few rows and many), forward and backward.
      return {entry(2, 1 << 20, "f32", "layernorm", true, true),
              entry(128, 1 << 20, "f32", "layernorm", true, true),
              entry(4, 1 << 22, "bf16", "rmsnorm", true),
              entry(64, 1 << 22, "bf16", "layernorm", true, true, true, true),
              entry(16, 1 << 22, "f32", "standardize"),
              backward_entry(4, 1 << 20, "bf16", "layernorm", true, true, true, true),
              backward_entry(64, 1 << 20, "f32", "rmsnorm", true, true, false, true)};
    }
    throw InputError(fmt::format("normalize has no suite '{}'", name));
  }

  static std::string fields() {
    return "rows, cols (required), dtype (f32|f16|bf16), mode (standardize|layernorm|rmsnorm), gamma, beta, mean, "
           "rstd, residual, residual_out (booleans), align (2|4|8|16), eps, ddof, direction (forward|backward; "
           "backward: gamma, dgamma, dbeta, saved, dresidual), layout (row_major)";
  }

  static SpaceSize space(const nz::Problem& p) {
    // The declared axes: threads per row and rows per block 1..1024 (powers of two), vector
    // width 2..16 bytes, four places to keep the row (the fourth, staged, backward only), two
    // statistics algorithms; the backward:
    // two-pass statistics, saved or recomputed, rows per row group 1..256 (powers of four); then
    // the split-row forms.
    SpaceSize s;
    const std::vector<nz::Stat> stats = p.backward ? std::vector<nz::Stat>{nz::Stat::two_pass}
                                                   : std::vector<nz::Stat>{nz::Stat::two_pass, nz::Stat::welford};
    const std::vector<int> loops = p.backward ? std::vector<int>{1, 4, 16, 64, 256} : std::vector<int>{1};
    const std::vector<bool> recomputes = p.backward ? std::vector<bool>{false, true} : std::vector<bool>{false};
    for (int tpr = 1; tpr <= 1024; tpr *= 2)
      for (int rpb = 1; rpb <= 1024; rpb *= 2)
        for (int vb = 2; vb <= 16; vb *= 2)
          for (nz::Keep keep : {nz::Keep::registers, nz::Keep::shared, nz::Keep::reread, nz::Keep::staged})
            for (nz::Stat stat : stats)
              for (int loop : loops)
                for (bool recompute : recomputes) {
                  nz::Config c;
                  c.threads_per_row = tpr;
                  c.rows_per_block = rpb;
                  c.vector_bytes = vb;
                  c.keep = keep;
                  c.stat = stat;
                  c.row_loop = loop;
                  c.recompute = recompute;
                  const std::int64_t ve = std::max(1, vb / p.element_bytes());
                  c.items = nz::in_registers(keep) ? static_cast<int>((p.cols + tpr * ve - 1) / (tpr * ve)) : 0;
                  ++s.total;
                  if (nz::is_runnable(p, c)) ++s.runnable;
                }
    // Split rows: threads per slice, vector width, vectors per thread (up to 128 bytes), and the
    // backward's row loop (up to 4^7) and recompute, or the forward's row chunk (0, powers of two)
    // and one-pass cooperative form (chunk -1 below).
    std::vector<int> chunks = {0};
    if (!p.backward) chunks.push_back(-1);
    if (!p.backward)
      for (int chunk = 1; chunk < p.rows && chunks.size() < 16; chunk *= 2) chunks.push_back(chunk);
    const std::vector<int> split_loops =
        p.backward ? std::vector<int>{1, 4, 16, 64, 256, 1024, 4096, 16384} : std::vector<int>{1};
    for (int tpr = 32; tpr <= 1024; tpr *= 2)
      for (int vb = 2; vb <= 16; vb *= 2)
        for (int items = 1; items * vb <= 128; items *= 2)
          for (int loop : split_loops)
            for (bool recompute : recomputes)
              for (int chunk : chunks) {
                nz::Config c = nz::split_rows::make(p, tpr, vb, items, loop, recompute);
                c.row_chunk = std::max(chunk, 0);
                c.cooperative = chunk < 0;
                ++s.total;
                if (nz::is_runnable(p, c)) ++s.runnable;
              }
    s.tuned = static_cast<std::int64_t>(detail::tuning_configs<detail::NormalizeFamily>(p, 0).size());
    return s;
  }

  // Leading dimension padded to the alignment class; below 16 bytes the pointers are offset by
  // `align` bytes from cudaMalloc's 256, so that the library sees exactly this class.
  struct RowLayout {
    std::int64_t ld = 0;
    std::size_t offset = 0, plane = 0, vector_bytes = 0;  // bytes: pointer offset, a rows x ld plane, a row
  };
  static RowLayout row_layout(const nz::Problem& p, std::int64_t rows) {
    const std::int64_t elem = p.element_bytes();
    const std::int64_t align_elems = std::max<std::int64_t>(1, p.align_bytes / elem);
    RowLayout l;
    l.ld = (p.cols + align_elems - 1) / align_elems * align_elems;
    l.offset = p.align_bytes < 16 ? static_cast<std::size_t>(p.align_bytes) : 0;
    l.plane = static_cast<std::size_t>(rows) * static_cast<std::size_t>(l.ld * elem) + 256;
    l.vector_bytes = static_cast<std::size_t>(p.cols * elem) + 256;
    return l;
  }

  // The backward's call: zero-filled buffers (finite statistics: constant rows take the sigma
  // term as 0), the saved statistics when the entry says so.
  static std::string run_backward(const Entry& e, const OpProblem& self, Context& context) {
    const nz::Problem& p = e.problem;
    const auto [ld, offset, plane, vector_bytes] = row_layout(p, e.rows);
    DeviceMemory x(plane, 0), dy(plane, 0), dx(plane, 0), stats(static_cast<std::size_t>(e.rows) * 8, 0);
    std::unique_ptr<DeviceMemory> gamma, dgamma, dbeta, dresidual;
    if (p.gamma) gamma = std::make_unique<DeviceMemory>(vector_bytes, 0);
    if (p.dresidual) dresidual = std::make_unique<DeviceMemory>(plane, 0);
    if (p.dgamma) dgamma = std::make_unique<DeviceMemory>(vector_bytes, 0);
    if (p.dbeta) dbeta = std::make_unique<DeviceMemory>(vector_bytes, 0);
    NormalizeBackwardArgs args;
    args.x = x.bytes() + offset;
    args.dy = dy.bytes() + offset;
    args.dx = dx.bytes() + offset;
    args.rows = e.rows;
    args.cols = p.cols;
    args.ld_x = args.ld_dy = args.ld_dx = ld;
    args.dtype = p.dtype;
    args.mode = p.mode;
    args.eps = e.eps;
    args.ddof = e.ddof;
    args.gamma = gamma ? gamma->bytes() + offset : nullptr;
    args.dgamma = dgamma ? dgamma->bytes() : nullptr;
    args.dbeta = dbeta ? dbeta->bytes() : nullptr;
    args.dresidual_out = dresidual ? dresidual->bytes() + offset : nullptr;
    args.ld_dresidual_out = ld;
    if (p.saved_stats) {
      args.rstd = reinterpret_cast<const float*>(stats.bytes());
      if (p.mode != NormMode::rmsnorm) args.mean = reinterpret_cast<const float*>(stats.bytes() + e.rows * 4);
    }
    nz::validate(args);
    return call_library(
        self, nz::make_problem(args, detail::Buckets::parse(self.buckets())).key(),
        [&] { return context.normalize_backward_variant(args); }, [&] { context.normalize_backward(args); });
  }

  static std::string run_library(const Entry& e, const OpProblem& self, Context& context) {
    if (e.problem.backward) return run_backward(e, self, context);
    const nz::Problem& p = e.problem;
    const auto [ld, offset, plane, vector_bytes] = row_layout(p, e.rows);
    DeviceMemory x(plane, 0), y(plane, 0);
    std::unique_ptr<DeviceMemory> gamma, beta, mean, rstd, residual, residual_out;
    if (p.residual) residual = std::make_unique<DeviceMemory>(plane, 0);
    if (p.residual_out) residual_out = std::make_unique<DeviceMemory>(plane, 0);
    if (p.gamma) gamma = std::make_unique<DeviceMemory>(vector_bytes, 0);
    if (p.beta) beta = std::make_unique<DeviceMemory>(vector_bytes, 0);
    if (p.mean_out) mean = std::make_unique<DeviceMemory>(static_cast<std::size_t>(e.rows) * 4, 0);
    if (p.rstd_out) rstd = std::make_unique<DeviceMemory>(static_cast<std::size_t>(e.rows) * 4, 0);

    NormalizeArgs args;
    args.x = x.bytes() + offset;
    args.y = y.bytes() + offset;
    args.rows = e.rows;
    args.cols = p.cols;
    args.ld_x = ld;
    args.ld_y = ld;
    args.dtype = p.dtype;
    args.mode = p.mode;
    args.eps = e.eps;
    args.ddof = e.ddof;
    args.gamma = gamma ? gamma->bytes() + offset : nullptr;
    args.beta = beta ? beta->bytes() + offset : nullptr;
    args.mean = mean ? reinterpret_cast<float*>(mean->bytes()) : nullptr;
    args.rstd = rstd ? reinterpret_cast<float*>(rstd->bytes()) : nullptr;
    args.residual = residual ? residual->bytes() + offset : nullptr;
    args.residual_out = residual_out ? residual_out->bytes() + offset : nullptr;
    args.ld_residual = args.ld_residual_out = ld;
    nz::validate(args);
    return call_library(
        self, nz::make_problem(args, detail::Buckets::parse(self.buckets())).key(),
        [&] { return context.normalize_variant(args); }, [&] { context.normalize(args); });
  }
};

}  // namespace

template <>
std::unique_ptr<OpHandler> make_handler<detail::NormalizeFamily>() {
  return std::make_unique<FamilyHandler<detail::NormalizeFamily, NormalizeSide>>();
}

}  // namespace kvtune::tools
