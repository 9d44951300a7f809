#pragma once
// The kernel families the Context dispatches, as traits the generic miss path (context.cpp) is
// written against. Adding a family adds its folder under kernel_templates/ (its template and headers
// embedded: CMakeLists.txt's kvtune_embed lines, embedded.h), one traits struct here, one entry in
// the Families tuple, and its public entry point.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_tuning.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"
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
  static Config heuristic(const Problem& p, int cc_major) { return normalize::heuristic_config(p, cc_major); }
  static bool is_valid(const Problem& p, const Config& c) { return normalize::is_runnable(p, c); }
  static CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
    return normalize::compile_request(p, c, arch);
  }
  static std::size_t dynamic_smem(const Problem& p, const Config& c) {
    return normalize::geometry(p, c, 1).dynamic_smem;
  }
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

struct DwConvFamily {
  static constexpr const char* kOp = "dwconv";
  using Problem = dwconv::Problem;
  using Config = dwconv::Config;
  using ProblemHash = dwconv::ProblemHash;
  static std::string template_hash() { return dwconv::template_hash(); }
  static std::vector<Config> enumerate(const Problem& p) { return dwconv::enumerate(p); }
  static Config heuristic(const Problem& p, int cc_major) { return dwconv::heuristic_config(p, cc_major); }
  static bool is_valid(const Problem& p, const Config& c) { return dwconv::is_runnable(p, c); }
  static CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
    return dwconv::compile_request(p, c, arch);
  }
  static std::size_t dynamic_smem(const Problem& p, const Config& c) { return dwconv::geometry(p, c, 1).dynamic_smem; }
  static std::vector<tuner::Candidate> candidates(const Problem& p, const std::vector<Config>& c,
                                                  const std::string& arch) {
    return dwconv::make_candidates(p, c, arch);
  }
  static std::unique_ptr<tuner::Harness> harness(const Problem& p, std::vector<Config> c, const std::string& arch,
                                                 std::int64_t l2, cudaStream_t s) {
    return dwconv::make_harness(p, std::move(c), arch, l2, s);
  }
  static double predicted_seconds(const Problem& p, const Config& c, int sms, double bandwidth) {
    return dwconv::predicted_seconds(p, c, sms, bandwidth);
  }
  static std::optional<Problem> from_key(const std::string& key) { return dwconv::problem_from_key(key); }
  static std::int64_t batch(const Problem& p) { return p.n; }
  static bool exact(const Problem& p) { return p.n_exact; }
  static Problem with_batch(Problem p, std::int64_t n, bool exact) {
    p.n = n;
    p.n_exact = exact;
    return p;
  }
  /// As NormalizeFamily::distance: finite only for the same direction, layout, dtype, filter
  /// geometry, bias, determinism, alignment and epilogue.
  static double distance(const Problem& p, const Problem& q) {
    if (p.direction != q.direction || p.layout != q.layout || p.dtype != q.dtype || p.kh != q.kh || p.kw != q.kw ||
        p.sh != q.sh || p.sw != q.sw || p.dh != q.dh || p.dw != q.dw || p.pad_top != q.pad_top ||
        p.pad_bottom != q.pad_bottom || p.pad_left != q.pad_left || p.pad_right != q.pad_right || p.bias != q.bias ||
        p.deterministic != q.deterministic || p.align_bytes != q.align_bytes || p.activation != q.activation ||
        p.gradient_prep != q.gradient_prep)
      return std::numeric_limits<double>::infinity();
    const auto ratio = [](double a, double b) { return std::fabs(std::log2(a / b)); };
    return ratio(double(p.n), double(q.n)) + 2 * ratio(double(p.c), double(q.c)) +
           2 * ratio(double(p.h * p.w), double(q.h * q.w));
  }
};

struct DwConvDecodeFamily {
  static constexpr const char* kOp = "dwconv_decode";
  using Problem = dwconv_decode::Problem;
  using Config = dwconv_decode::Config;
  using ProblemHash = dwconv_decode::ProblemHash;
  static std::string template_hash() { return dwconv_decode::template_hash(); }
  static std::vector<Config> enumerate(const Problem& p) { return dwconv_decode::enumerate(p); }
  static Config heuristic(const Problem& p, int cc_major) { return dwconv_decode::heuristic_config(p, cc_major); }
  static bool is_valid(const Problem& p, const Config& c) { return dwconv_decode::is_runnable(p, c); }
  static CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
    return dwconv_decode::compile_request(p, c, arch);
  }
  static std::size_t dynamic_smem(const Problem&, const Config&) { return 0; }
  static std::vector<tuner::Candidate> candidates(const Problem& p, const std::vector<Config>& c,
                                                  const std::string& arch) {
    return dwconv_decode::make_candidates(p, c, arch);
  }
  static std::unique_ptr<tuner::Harness> harness(const Problem& p, std::vector<Config> c, const std::string& arch,
                                                 std::int64_t l2, cudaStream_t s) {
    return dwconv_decode::make_harness(p, std::move(c), arch, l2, s);
  }
  static double predicted_seconds(const Problem& p, const Config& c, int sms, double bandwidth) {
    return dwconv_decode::predicted_seconds(p, c, sms, bandwidth);
  }
  static std::optional<Problem> from_key(const std::string& key) { return dwconv_decode::problem_from_key(key); }
  static std::int64_t batch(const Problem& p) { return p.n; }
  static bool exact(const Problem& p) { return p.n_exact; }
  static Problem with_batch(Problem p, std::int64_t n, bool exact) {
    p.n = n;
    p.n_exact = exact;
    return p;
  }
  /// Finite for the same dtype, taps, tokens, state form, optional tensors, activation and alignment.
  static double distance(const Problem& p, const Problem& q) {
    if (p.dtype != q.dtype || p.k != q.k || p.seqlen != q.seqlen || p.circular != q.circular ||
        p.indices != q.indices || p.bias != q.bias || p.activation != q.activation || p.align_bytes != q.align_bytes)
      return std::numeric_limits<double>::infinity();
    return std::fabs(std::log2(double(p.n) / double(q.n))) + 2 * std::fabs(std::log2(double(p.c) / double(q.c)));
  }
};

struct DwConvStatesFamily {
  static constexpr const char* kOp = "dwconv_states";
  using Problem = dwconv_states::Problem;
  using Config = dwconv_states::Config;
  using ProblemHash = dwconv_states::ProblemHash;
  static std::string template_hash() { return dwconv_states::template_hash(); }
  static std::vector<Config> enumerate(const Problem& p) { return dwconv_states::enumerate(p); }
  static Config heuristic(const Problem& p, int cc_major) { return dwconv_states::heuristic_config(p, cc_major); }
  static bool is_valid(const Problem& p, const Config& c) { return dwconv_states::is_runnable(p, c); }
  static CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
    return dwconv_states::compile_request(p, c, arch);
  }
  static std::size_t dynamic_smem(const Problem&, const Config&) { return 0; }
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

using Families = std::tuple<NormalizeFamily, DwConvFamily, DwConvDecodeFamily, DwConvStatesFamily>;

/// F's position in Families (per-family arrays of the Context).
template <class F, class Tuple = Families> struct FamilyIndex;
template <class F, class... Rest> struct FamilyIndex<F, std::tuple<F, Rest...>> {
  static constexpr std::size_t value = 0;
};
template <class F, class First, class... Rest> struct FamilyIndex<F, std::tuple<First, Rest...>> {
  static constexpr std::size_t value = 1 + FamilyIndex<F, std::tuple<Rest...>>::value;
};

/// The variants a tuning of `p` times: the family's space, and the heuristic where the space lacks it
/// (the heuristic is always timed; the weight gradient's splits the reduction by powers of two, its
/// space by 1, 8, 32 and 128).
template <class F>
std::vector<typename F::Config> tuning_configs(const typename F::Problem& p, int cc_major) {
  auto configs = F::enumerate(p);
  if (configs.empty()) return configs;
  const auto heuristic = F::heuristic(p, cc_major);
  if (std::find(configs.begin(), configs.end(), heuristic) == configs.end() && F::is_valid(p, heuristic))
    configs.push_back(heuristic);
  return configs;
}

}  // namespace kvtune::detail
