#pragma once
// The normalize family's C++ description: problem key, config (one point of the tuning space),
// constraints, launch geometry, bytes model and the NVRTC compile request of a variant.
// The kernel itself is normalize.cu; its float64 CPU reference is normalize_reference.h.

#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvtune/kvtune.h"
#include "lib/src/buckets.h"
#include "lib/src/nvrtc.h"

namespace kvtune::normalize {

/// Where a row lives between the statistics pass and the output pass.
enum class Keep : std::uint8_t { registers, shared, reread };
/// How the mean and variance are computed.
enum class Stat : std::uint8_t { two_pass, welford };

/// One variant. Equality and hash are over every field; `label()` is the one printable form.
struct Config {
  int threads_per_row = 32;  // 1 .. 1024, power of two
  int rows_per_block = 4;    // threads per block = threads_per_row * rows_per_block
  int vector_bytes = 16;     // bytes per vector access: 2, 4, 8, 16 (at least the element size)
  int items = 0;             // vectors per thread kept in registers (Keep::registers), else 0
  Keep keep = Keep::registers;
  Stat stat = Stat::two_pass;
  int row_loop = 1;         // backward: rows each row group handles in turn (grid = rows / (rpb * row_loop))
  bool recompute = false;   // backward: statistics recomputed from x instead of read from mean/rstd

  bool operator==(const Config& o) const;
  bool operator!=(const Config& o) const { return !(*this == o); }
  /// "tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass" (items are derived and not shown); backward
  /// variants add ",loop=N" (row_loop above 1) and ",recompute".
  std::string label() const;
  nlohmann::json to_json() const;
  /// Throws kvtune::Error on a malformed object.
  static Config from_json(const nlohmann::json& j);
};

/// Everything about a call that can change which variant wins. Rows are bucketed.
struct Problem {
  DType dtype = DType::f32;
  NormMode mode = NormMode::standardize;
  std::int64_t cols = 0;
  std::int64_t rows = 0;   // the bucket's upper bound (or the exact rows, with rows_exact)
  bool rows_exact = false;  // "rows=N" keys (exact bucketing) instead of "rows<=N"
  int align_bytes = 16;    // largest vector access (2..16 bytes) every pointer and row start allows
  bool gamma = false;
  bool beta = false;
  bool mean_out = false;
  bool rstd_out = false;
  // The backward direction: dx from x and dy (gamma above: the forward had one).
  bool backward = false;
  bool dgamma = false;       // backward: dgamma requested
  bool dbeta = false;        // backward: dbeta requested
  bool saved_stats = false;  // backward: the forward's mean/rstd are given (else recomputed)

  bool operator==(const Problem& o) const;
  /// Canonical text used as the cache key, e.g.
  /// "normalize,f32,layernorm,cols=1024,rows<=4096,align=16,affine=gb,stats=mr"; the backward:
  /// "normalize,f32,layernorm,backward,cols=1024,rows<=4096,align=16,gamma=g,grads=gb,stats=saved".
  std::string key() const;
  int element_bytes() const;
};

struct ProblemHash {
  std::size_t operator()(const Problem& p) const;
};

/// Checks every field (before touching the GPU); throws kvtune::Error naming the field.
void validate(const NormalizeArgs& args);
void validate(const NormalizeBackwardArgs& args);
/// The key of validated arguments; rows bucketed by `buckets` (powers of two by default).
Problem make_problem(const NormalizeArgs& args, const detail::Buckets& buckets = {});
Problem make_problem(const NormalizeBackwardArgs& args, const detail::Buckets& buckets = {});
/// Smallest power of two >= rows (the default rows bucket).
std::int64_t rows_bucket(std::int64_t rows);
/// The problem whose key() is `key`; nullopt for anything else (never throws).
std::optional<Problem> problem_from_key(const std::string& key);

/// Whether `config` is a valid variant for `problem`; `why` gets the violated constraint.
bool is_valid(const Problem& problem, const Config& config, std::string* why = nullptr);
/// Hard constraints only: whether `config` runs correctly (the seed design must only be runnable).
bool is_runnable(const Problem& problem, const Config& config, std::string* why = nullptr);
/// Every valid variant, the seed design first when it is runnable.
std::vector<Config> enumerate(const Problem& problem);
/// The seed design: one 256-thread block per row, 16-byte vectors where alignment allows,
/// re-read, Welford. Valid for every problem whose alignment allows its vector width.
Config seed_config(const Problem& problem);
/// A sensible variant chosen without benchmarking (architecture major version, e.g. 9).
Config heuristic_config(const Problem& problem, int cc_major);

struct Geometry {
  unsigned grid = 0;
  unsigned block = 0;
  std::size_t dynamic_smem = 0;
  // Backward with dgamma/dbeta: the workspace (partials, level-1 rows, arrival counters).
  std::size_t workspace_bytes = 0;
  std::size_t level1_offset = 0;   // bytes from the workspace's start
  std::size_t counter_offset = 0;  // bytes; (level1_rows + 1) counters, zeroed before each launch
  int group_blocks = 1;
  int level1_rows = 1;
};
/// The one place that computes grid, block and dynamic shared memory of a launch.
Geometry geometry(const Problem& problem, const Config& config, std::int64_t rows);

/// Bytes a call must move at least: x read once, y written once, gamma/beta, per-row stats; the
/// backward: x and dy read once, dx written once, gamma, saved stats, dgamma/dbeta.
double model_bytes(const Problem& problem, std::int64_t rows);
/// Floating-point operations of a call (about 7 per element), for the roofline.
double model_flops(const Problem& problem, std::int64_t rows);
/// The budgeted search's analytic estimate of a variant's time (seconds): memory time with a
/// latency-hiding factor (bytes in flight vs. bandwidth x latency), against a per-row dependency
/// chain (loads, reductions, passes) times the waves of resident rows. Only its ranking matters;
/// its constants were calibrated on an H200 (bench/NOTES.md, "cost model").
double predicted_seconds(const Problem& problem, const Config& config, int sm_count, double bandwidth);

/// The NVRTC request that compiles `config` for `problem` on `arch` ("sm_90").
detail::CompileRequest compile_request(const Problem& problem, const Config& config, const std::string& arch);
/// The float64 reference kernel and the comparison kernel, in one request.
detail::CompileRequest reference_request(const Problem& problem, const std::string& arch);
/// Hash of the template sources and this description's version: part of every cache key.
std::string template_hash();

}  // namespace kvtune::normalize
