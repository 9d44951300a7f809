#pragma once
// Kernel template sources embedded at build time (see cmake/embed.cmake).
#include <string_view>

namespace kvtune::embedded {
extern const std::string_view common_cuh;
extern const std::string_view normalize_cu;
extern const std::string_view normalize_params_h;
extern const std::string_view normalize_backward_cuh;
extern const std::string_view normalize_split_cuh;
/// The normalize heuristic's recorded rankings for sm_90 (data, not a kernel: not in any template hash).
extern const std::string_view normalize_learned_sm90_json;
/// The dwconv heuristic's recorded rankings for sm_90 (data, like the above).
extern const std::string_view dwconv_learned_sm90_json;
extern const std::string_view dwconv_cu;
extern const std::string_view dwconv_params_h;
extern const std::string_view dwconv_mma_cuh;
extern const std::string_view dwconv_tiled_cuh;
extern const std::string_view dwconv_tiled_first_cuh;
extern const std::string_view dwconv_tiled_last_cuh;
extern const std::string_view dwconv_activation_cuh;
extern const std::string_view dwconv_decode_cu;
extern const std::string_view dwconv_decode_params_h;
extern const std::string_view dwconv_states_cu;
extern const std::string_view dwconv_states_params_h;
}  // namespace kvtune::embedded
