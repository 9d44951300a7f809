#pragma once
// The dwconv_states family's traits: everything the generic parts (the Context's miss path, the tuner, the
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

#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"

namespace kvtune::detail {

struct DwConvStatesFamily {
  static constexpr const char* kOp = "dwconv_states";
  using Problem = dwconv_states::Problem;
  using Config = dwconv_states::Config;
  using ProblemHash = dwconv_states::ProblemHash;
  static std::string template_hash() { return dwconv_states::template_hash(); }
  static std::vector<Config> enumerate(const Problem& p) { return dwconv_states::enumerate(p); }
  // The GPU model does not change this family's heuristic (normalize's learned table is per model).
  static Config heuristic(const Problem& p, int cc_major, const std::string& /*gpu_model*/ = {}) {
    return dwconv_states::heuristic_config(p, cc_major);
  }
  /// No recorded rankings for this family: the budgeted search times the heuristic's pick alone.
  static std::vector<Config> learned_picks(const Problem&, int, const std::string&, int) { return {}; }
  static bool is_valid(const Problem& p, const Config& c) { return dwconv_states::is_runnable(p, c); }
  static CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
    return dwconv_states::compile_request(p, c, arch);
  }
  static std::size_t dynamic_smem(const Problem&, const Config&) { return 0; }
  static int kernel_phases(const Problem&, const Config&) { return 1; }
  static std::vector<tuner::Candidate> candidates(const Problem& p, const std::vector<Config>& c,
                                                  const std::string& arch) {
    return dwconv_states::make_candidates(p, c, arch);
  }
  static std::unique_ptr<tuner::Harness> harness(const Problem& p, std::vector<Config> c, const std::string& arch,
                                                 std::int64_t l2, cudaStream_t s) {
    return dwconv_states::make_harness(p, std::move(c), arch, l2, s);
  }
  static double predicted_seconds(const Problem& p, const Config& c, int sms, double bandwidth) {
    return dwconv_states::predicted_seconds(p, c, sms, bandwidth);
  }
  static std::optional<Problem> from_key(const std::string& key) { return dwconv_states::problem_from_key(key); }
  static std::int64_t batch(const Problem& p) { return p.n; }
  static bool exact(const Problem& p) { return p.n_exact; }
  static Problem with_batch(Problem p, std::int64_t n, bool exact) {
    p.n = n;
    p.n_exact = exact;
    return p;
  }
  /// Finite for the same fix-up (direction, layout, dtype, taps, dilation, epilogue, options).
  static double distance(const Problem& p, const Problem& q) {
    if (p.direction != q.direction || p.layout != q.layout || p.dtype != q.dtype || p.k != q.k || p.d != q.d ||
        p.bias != q.bias || p.epilogue() != q.epilogue() || p.initial_state != q.initial_state ||
        p.state_out != q.state_out || p.seq_idx != q.seq_idx)
      return std::numeric_limits<double>::infinity();
    return std::fabs(std::log2(double(p.n) / double(q.n))) + 2 * std::fabs(std::log2(double(p.c) / double(q.c))) +
           std::fabs(std::log2(double(p.w) / double(q.w)));
  }
};

}  // namespace kvtune::detail
