#pragma once
// The registry of the kernel families the Context dispatches. Each family's traits struct (the
// interface the generic miss path, the tuner and the tools' family helpers are written against) lives
// in its folder, kernel_templates/<family>/<family>_traits.h. Adding a family adds that folder (its
// template and headers embedded: CMakeLists.txt's kvtune_embed lines, core/embedded.h), one entry in
// the Families tuple below, its public entry point, and its tools handler (tools/op_<family>.cpp;
// a CPU test fails without it).

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <vector>

#include "kernel_templates/dwconv/dwconv_traits.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_traits.h"
#include "kernel_templates/dwconv_states/dwconv_states_traits.h"
#include "kernel_templates/normalize/normalize_traits.h"

namespace kvtune::detail {

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
std::vector<typename F::Config> tuning_configs(const typename F::Problem& p, int cc_major,
                                              const std::string& gpu_model = {}) {
  auto configs = F::enumerate(p);
  if (configs.empty()) return configs;
  const auto heuristic = F::heuristic(p, cc_major, gpu_model);
  if (std::find(configs.begin(), configs.end(), heuristic) == configs.end() && F::is_valid(p, heuristic))
    configs.push_back(heuristic);
  return configs;
}

}  // namespace kvtune::detail
