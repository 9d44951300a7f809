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
#include "core/json_fields.h"
#include "core/nvrtc.h"

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

/// A stored winner as the load path may use it.
template <class F>
struct StoredEntry {
  cache::Winner winner;
  typename F::Config config;
  std::optional<cache::Binary> binary;  // the trusted binary; nullopt: none stored, missing or refused
};

/// The stored winner of (key, device, template) for `problem`, read as the Context's load path
/// reads it: nullopt when there is none or its row cannot be trusted; a binary that is not what
/// this build compiles for (problem, config, arch) is dropped. `refused` gets why a row or a binary
/// was refused ("" when none was). Errors of the store itself (I/O) propagate.
template <class F>
std::optional<StoredEntry<F>> read_stored(cache::Store& store, const typename F::Problem& problem,
                                          const std::string& key, const std::string& device_id,
                                          const std::string& template_hash, const std::string& arch,
                                          std::string& refused) {
  refused.clear();
  auto winner = store.find_winner(key, device_id, template_hash);
  if (!winner) return std::nullopt;
  std::string why;
  auto config = stored_config<F>(winner->config_json, problem, why);
  if (!config) {
    refused = "winner " + winner->label.substr(0, 200) + ": " + why;
    return std::nullopt;
  }
  StoredEntry<F> entry{std::move(*winner), std::move(*config), std::nullopt};
  if (!entry.winner.binary_hash.empty()) entry.binary = store.find_binary(entry.winner.binary_hash);
  if (entry.binary && !trusted_binary<F>(*entry.binary, problem, entry.config, arch, why)) {
    refused = "the binary of winner " + entry.config.label() + ": " + why;
    entry.binary.reset();
  }
  return entry;
}

}  // namespace kvtune::detail
