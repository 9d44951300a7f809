#pragma once
// The normalize family's traits: everything the generic parts (the Context's miss path, the tuner, the
// tools' family helpers) call, written against this folder's description and tuning harness.
// Registered in lib/src/families.h.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_tuning.h"

namespace kvtune::detail {

struct NormalizeFamily {
  static constexpr const char* kOp = "normalize";
  using Problem = normalize::Problem;
  using Config = normalize::Config;
  using ProblemHash = normalize::ProblemHash;
  static std::string template_hash() { return normalize::template_hash(); }
  static std::vector<Config> enumerate(const Problem& p) { return normalize::enumerate(p); }
  static Config heuristic(const Problem& p, int cc_major, const std::string& gpu_model = {}) {
    return normalize::heuristic_config(p, cc_major, gpu_model);
  }
  /// The variants the recorded rankings rank best (learned_configs), timed by every budgeted search.
  static std::vector<Config> learned_picks(const Problem& p, int cc_major, const std::string& gpu_model, int count) {
    return normalize::learned_configs(p, cc_major, gpu_model, count);
  }
  static bool is_valid(const Problem& p, const Config& c) { return normalize::is_runnable(p, c); }
  static CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
    return normalize::compile_request(p, c, arch);
  }
  static std::size_t dynamic_smem(const Problem& p, const Config& c) {
    return normalize::geometry(p, c, 1).dynamic_smem;
  }
  static int kernel_phases(const Problem& p, const Config& c) { return normalize::kernel_phases(p, c); }
  static std::vector<tuner::Candidate> candidates(const Problem& p, const std::vector<Config>& c,
                                                  const std::string& arch) {
    return normalize::make_candidates(p, c, arch);
  }
  static std::unique_ptr<tuner::Harness> harness(const Problem& p, std::vector<Config> c, const std::string& arch,
                                                 std::int64_t l2, cudaStream_t s) {
    return normalize::make_harness(p, std::move(c), arch, l2, s);
  }
  static double predicted_seconds(const Problem& p, const Config& c, int sms, double bandwidth) {
    return normalize::predicted_seconds(p, c, sms, bandwidth);
  }
  static std::optional<Problem> from_key(const std::string& key) { return normalize::problem_from_key(key); }
  static std::int64_t batch(const Problem& p) { return p.rows; }
  static bool exact(const Problem& p) { return p.rows_exact; }
  static Problem with_batch(Problem p, std::int64_t rows, bool exact) {
    p.rows = rows;
    p.rows_exact = exact;
    return p;
  }
  /// How far a tuned shape is from `p` for the fallback ladder; infinity when its winner cannot
  /// stand in (another dtype, mode, alignment or set of optional tensors).
  static double distance(const Problem& p, const Problem& q) {
    if (p.dtype != q.dtype || p.mode != q.mode || p.align_bytes != q.align_bytes || p.gamma != q.gamma ||
        p.beta != q.beta || p.mean_out != q.mean_out || p.rstd_out != q.rstd_out || p.backward != q.backward ||
        p.dgamma != q.dgamma || p.dbeta != q.dbeta || p.saved_stats != q.saved_stats)
      return std::numeric_limits<double>::infinity();
    return 4 * std::fabs(std::log2(double(p.cols) / double(q.cols))) + std::fabs(std::log2(double(p.rows) / double(q.rows)));
  }
};

}  // namespace kvtune::detail
