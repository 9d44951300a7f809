#pragma once
// The dwconv family's traits: everything the generic parts (the Context's miss path, the tuner, the
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

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"

namespace kvtune::detail {

struct DwConvFamily {
  static constexpr const char* kOp = "dwconv";
  using Problem = dwconv::Problem;
  using Config = dwconv::Config;
  using ProblemHash = dwconv::ProblemHash;
  static std::string template_hash() { return dwconv::template_hash(); }
  static std::vector<Config> enumerate(const Problem& p) { return dwconv::enumerate(p); }
  // The learned rankings are per GPU model (dwconv_learned.cpp).
  static Config heuristic(const Problem& p, int cc_major, const std::string& gpu_model = {}) {
    return dwconv::heuristic_config(p, cc_major, gpu_model);
  }
  /// The variants the recorded rankings rank best (learned_configs), timed by every budgeted search.
  static std::vector<Config> learned_picks(const Problem& p, int cc_major, const std::string& gpu_model, int count) {
    return dwconv::learned_configs(p, cc_major, gpu_model, count);
  }
  static bool is_valid(const Problem& p, const Config& c) { return dwconv::is_runnable(p, c); }
  static CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
    return dwconv::compile_request(p, c, arch);
  }
  static std::size_t dynamic_smem(const Problem& p, const Config& c) { return dwconv::geometry(p, c, 1).dynamic_smem; }
  static int kernel_phases(const Problem&, const Config&) { return 1; }
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

}  // namespace kvtune::detail
