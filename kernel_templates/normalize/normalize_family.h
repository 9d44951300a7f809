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
#include "core/buckets.h"
#include "core/nvrtc.h"

namespace kvtune::normalize {

/// Where a row lives between the statistics pass and the output pass. `staged` (backward only):
/// in registers, as `registers`, but copied to shared memory asynchronously one row of the row
/// loop ahead, so that a row's loads overlap the previous row's reductions.
enum class Keep : std::uint8_t { registers, shared, reread, staged };
/// Whether the row is held in registers during its passes (`items` vectors a thread).
constexpr bool in_registers(Keep keep) { return keep == Keep::registers || keep == Keep::staged; }
/// How the mean and variance are computed.
enum class Stat : std::uint8_t { two_pass, welford };

/// One variant. Equality and hash are over every field; `label()` is the one printable form.
struct Config {
  int threads_per_row = 32;  // 1 .. 1024, power of two
  int rows_per_block = 4;    // threads per block = threads_per_row * rows_per_block
  int vector_bytes = 16;     // bytes per vector access: 2, 4, 8, 16 (at least the element size)
  int items = 0;             // vectors per thread kept in registers (Keep::registers, staged), else 0
  Keep keep = Keep::registers;
  Stat stat = Stat::two_pass;
  int row_loop = 1;         // backward: rows each row group handles in turn (grid = rows / (rpb * row_loop))
  bool recompute = false;   // backward: statistics recomputed from x instead of read from mean/rstd
  // Split rows (normalize_split.cuh): each row is `splits` slices of items * threads_per_row vectors,
  // one block each (rows_per_block 1, registers, two-pass within a slice), merged in later phases.
  // 1: the one-block kernel. The backward's row_loop is then the rows a dx block handles in turn.
  int splits = 1;
  // Split rows, forward: rows per group of phase launches (0: every row at once). A group whose x
  // fits in L2 is re-read from L2 by its output phase instead of from DRAM.
  int row_chunk = 0;
  // Split rows, forward: one pass in one cooperative launch of co-resident blocks (each slice waits
  // for its row's other slices, x read once) instead of the phases. The launch is refused where a
  // row's slices cannot all be co-resident on the device.
  // One-block backward with dgamma/dbeta: one cooperative launch of at most the co-resident blocks,
  // each looping over its chunks of rows (row_loop * rows_per_block each), whose partial rows all
  // blocks then sum together after one grid-wide arrival, instead of the two-level arrival tree.
  bool cooperative = false;
  // Split rows, forward, sm_90: one pass in thread-block clusters, one a row (cluster dimension =
  // splits, at most 8): each slice waits at the cluster's barrier for its row's other slices, and
  // clusters take rows independently; its row_loop 4 keeps a block's gamma / beta in registers for
  // all its rows (1: loaded with each row). Refused where the device has no cluster launch or cannot
  // hold one cluster.
  bool cluster = false;

  bool operator==(const Config& o) const;
  bool operator!=(const Config& o) const { return !(*this == o); }
  /// "tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass" (items are derived and not shown); backward
  /// variants add ",loop=N" (row_loop above 1) and ",recompute"; split rows ",split=N" (and
  /// ",chunk=N", ",coop" or ",cluster"); the cooperative backward ",coop".
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
  // Fused residual add: the forward normalizes s = x + residual (and writes s with residual_out);
  // the backward adds the gradient flowing into s (dresidual).
  bool residual = false;
  bool residual_out = false;
  bool dresidual = false;

  bool operator==(const Problem& o) const;
  /// Canonical text used as the cache key, e.g.
  /// "normalize,f32,layernorm,cols=1024,rows<=4096,align=16,affine=gb,stats=mr"; the backward:
  /// "normalize,f32,layernorm,backward,cols=1024,rows<=4096,align=16,gamma=g,grads=gb,stats=saved".
  /// A residual appends ",res=r" (",res=rs" with residual_out); the backward's ",dres=1".
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
/// A sensible variant chosen without benchmarking (architecture major version, e.g. 9; the GPU's
/// model name where known, e.g. "NVIDIA H100 80GB HBM3"): the learned choice where there is one
/// (learned_config), else the analytic rule.
Config heuristic_config(const Problem& problem, int cc_major, const std::string& gpu_model = {});
/// The learned part of the heuristic (normalize_learned.cpp): on an architecture with recorded
/// exhaustive trials (normalize_learned_sm90.json for cc 9), a problem within reach of a recorded
/// one of its direction gets the one-block variant of its space (for the backward, cooperative
/// dgamma/dbeta sums included) whose time ratios to the winner, averaged over its four nearest
/// recorded problems (weights 1 / (1 + distance)), are lowest; nullopt for other architectures and
/// problems far from every recorded one. The recorded problems are those of `gpu_model` where the
/// table has that model in the problem's direction, else every model's.
std::optional<Config> learned_config(const Problem& problem, int cc_major, const std::string& gpu_model = {});
/// The same from a parsed normalize_learned document, without the recorded problem whose key is
/// `exclude` (held-out evaluation; tests).
std::optional<Config> learned_config(const Problem& problem, const nlohmann::json& data, const std::string& exclude,
                                     const std::string& gpu_model = {});
/// The `count` best variants by the same transferred scores, best first (learned_config's is the
/// first), only those the neighbours saw within the cap: the budgeted search times them all
/// (lib/src/tuning_run.h). Empty where learned_config is nullopt.
std::vector<Config> learned_configs(const Problem& problem, int cc_major, const std::string& gpu_model, int count);
/// The same from a parsed document, without the recorded problem keyed `exclude` (held-out replays).
std::vector<Config> learned_configs(const Problem& problem, const nlohmann::json& data, const std::string& exclude,
                                    const std::string& gpu_model, int count);

struct Geometry {
  unsigned grid = 0;
  unsigned block = 0;
  std::size_t dynamic_smem = 0;
  // Backward with dgamma/dbeta, and split rows: the workspace (partials, level-1 rows, the arrival
  // tree's counters; see below for split rows). Forward calls need one only when their rows are split.
  std::size_t workspace_bytes = 0;
  std::size_t level1_offset = 0;   // bytes from the workspace's start
  std::size_t counter_offset = 0;  // bytes; (level1_rows + 1) counters, zeroed before each launch of the tree form
  int group_blocks = 1;
  int level1_rows = 1;
  // Split rows: every phase's grid, and where each array lies in the workspace (bytes from its
  // start; the forward's partials and merged rows, the backward's statistics, sums and dgamma /
  // dbeta partial rows). Offsets of arrays a call does not use are 0.
  int phase_count = 0;           // phases launched, in order (normalize_split.cuh); 0: one launch
  int phases[6] = {};
  unsigned phase_grid[6] = {};
  bool direct = true;                // backward: the output phases merge the partials themselves (the forward: false)
  std::int64_t row_chunk = 0;        // forward: rows per group of phase launches (the workspace's rows)
  bool cooperative = false;          // one cooperative launch; grid is its upper bound (the launch takes
                                     // the co-resident blocks or row slots); its barrier is the driver's
  int cluster = 0;                   // > 0: one launch of thread-block clusters of this many blocks
  int grad_groups = 1;               // backward: groups of row_loop rows with their own dgamma/dbeta rows
  std::size_t stat_final_offset = 0;
  std::size_t sum_partials_offset = 0;
  std::size_t sum_final_offset = 0;
  std::size_t grad_partials_offset = 0;
};
/// The one place that computes grid, block and dynamic shared memory of a launch.
Geometry geometry(const Problem& problem, const Config& config, std::int64_t rows);
/// The backward's dgamma/dbeta partial rows a block writes: 1 where its row groups' register
/// accumulators are folded on chip (row kept in registers, several row groups, a gradient asked),
/// else one a row group.
int partial_rows_per_block(const Problem& problem, const Config& config);

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
/// The kernels of `config`'s binary, launched one after another as phases (LoadedKernel::load): 3 for
/// the phased split-row forward (normalize_split.cuh), else 1. compile_request names one per phase.
int kernel_phases(const Problem& problem, const Config& config);
/// The float64 reference kernel and the comparison kernel, in one request.
detail::CompileRequest reference_request(const Problem& problem, const std::string& arch);
/// Hash of the template sources and this description's version: part of every cache key.
std::string template_hash();

}  // namespace kvtune::normalize
