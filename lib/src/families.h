#pragma once
// The kernel families the Context dispatches, as traits the generic miss path (context.cpp) is
// written against. Adding a family adds its folder under kernel_templates/, one traits struct
// here, one entry in kFamilies' tuple, and its public entry point.

#include <tuple>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
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
};

struct DwConvFamily {
  static constexpr const char* kOp = "dwconv";
  using Problem = dwconv::Problem;
  using Config = dwconv::Config;
  using ProblemHash = dwconv::ProblemHash;
  static std::string template_hash() { return dwconv::template_hash(); }
  static std::vector<Config> enumerate(const Problem& p) { return dwconv::enumerate(p); }
  static Config heuristic(const Problem& p, int cc_major) { return dwconv::heuristic_config(p, cc_major); }
  static bool is_valid(const Problem& p, const Config& c) {
    if (dwconv::is_valid(p, c)) return true;
    for (const auto& seed : dwconv::seed_configs(p))  // seeds are runnable even where pruned
      if (seed.second == c) return true;
    return false;
  }
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
};

using Families = std::tuple<NormalizeFamily, DwConvFamily>;

}  // namespace kvtune::detail
