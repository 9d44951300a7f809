#pragma once
// What a cache row may make kvtune run. A cache file is data that another process, a merge or an
// import wrote; a cubin is code that runs in the caller's process. So a stored winner is used only
// when its config parses within the limits of user input and is a valid variant of its problem,
// and a stored binary only when it is the one this build compiles for that problem, config and
// architecture (docs/RELIABILITY.md, "Trust model"). The Context's load path and the fuzz target
// fuzz_cache_db both go through these functions.

#include <exception>
#include <optional>
#include <string>

#include "cache/store.h"
#include "lib/src/json_fields.h"
#include "lib/src/nvrtc.h"

namespace kvtune::detail {

/// The config a stored row names, parsed as parse_stored_config does and valid for `problem`
/// (F::is_valid: every hard constraint); nullopt with `why` set otherwise. Never throws.
template <class F>
std::optional<typename F::Config> stored_config(const std::string& json, const typename F::Problem& problem,
                                                std::string& why) {
  try {
    auto config = F::Config::from_json(parse_stored_config(json));
    if (F::is_valid(problem, config)) return config;
    why = "its config " + config.label() + " is not a valid variant of the problem";
  } catch (const std::exception& e) {
    why = std::string("its config does not parse: ") + e.what();
  }
  return std::nullopt;
}

/// Whether `binary` is the one this build compiles for (problem, config, arch); `why` otherwise.
template <class F>
bool trusted_binary(const cache::Binary& binary, const typename F::Problem& problem,
                    const typename F::Config& config, const std::string& arch, std::string& why) {
  return binary_matches_request(binary.hash, binary.arch, binary.lowered_name,
                                F::compile_request(problem, config, arch), &why);
}

}  // namespace kvtune::detail
