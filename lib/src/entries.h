// How a dispatch entry is made, shared by the fallback ladder and the tuning run: a binary loaded
// for a variant, the binary of a variant (from the store, else compiled and stored), and the
// winner row of a result.
#pragma once

#include <ctime>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/hash.h"
#include "core/nvrtc.h"
#include "lib/src/context_state.h"
#include "lib/src/devices.h"
#include "lib/src/stored_entry.h"

namespace kvtune::detail {

template <class F>
std::shared_ptr<Entry<F>> make_entry(const typename F::Problem& problem, const typename F::Config& config,
                                     const std::string& image, const std::string& lowered_name, const char* origin) {
  auto entry = std::make_shared<Entry<F>>();
  entry->config = config;
  entry->origin = origin;
  entry->kernel = LoadedKernel::load(image, lowered_name, F::kernel_phases(problem, config));
  entry->kernel.allow_dynamic_smem(F::dynamic_smem(problem, config));
  return entry;
}

// The binary of `config` for `problem`: from the store by compile hash when it is the one this
// build makes, else compiled and stored.
template <class F>
cache::Binary binary_for(ContextState& s, DeviceState& dev, const typename F::Problem& problem,
                         const typename F::Config& config) {
  const auto request = F::compile_request(problem, config, dev.fingerprint.arch());
  const std::string hash = compile_hash(request);
  if (auto found = s.store->find_binary(hash)) {
    std::string why;
    if (binary_matches_request(found->hash, found->arch, found->lowered_name, request, &why)) return *found;
    s.reject_row(F::kOp, problem.key(), fmt::format("binary {} of {}: {}; compiling it", hash, config.label(), why));
  }
  auto compiled = nvrtc_compile(request);
  ++s.counters.compiles;
  cache::Binary binary{hash, dev.fingerprint.arch(), compiled.lowered_names.at(0), compiled.cubin,
                       hash_hex(compiled.cubin)};
  try {
    s.store->put_binary(binary);
  } catch (const std::exception& e) {
    s.log("warn", fmt::format("could not store a binary: {}", e.what()));
  }
  return binary;
}

template <class F>
cache::Winner make_winner(const DeviceState& dev, const std::string& key, const std::string& template_hash,
                          const typename F::Config& config, const std::string& binary_hash, const char* origin) {
  cache::Winner w;
  w.op = F::kOp;
  w.problem_key = key;
  w.device_id = dev.device_id;
  w.template_hash = template_hash;
  w.label = config.label();
  w.config_json = config.to_json().dump();
  w.binary_hash = binary_hash;
  w.origin = origin;
  w.created_at = static_cast<std::int64_t>(std::time(nullptr));
  return w;
}

}  // namespace kvtune::detail
