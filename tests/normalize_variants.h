#pragma once
// The normalize [gpu] variant checks' common loop: load the compiled candidates (the caller compiles
// them, a sample in one batch), then verify each against the float64 reference at a row count,
// skipping what exceeds the device's shared memory (resources_exceeded: the tuner skips it alike).
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/module.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_tuning.h"
#include "sample.h"
#include "tuner/tuner.h"

namespace kvtune::test_normalize {

// Whether a candidate's shared memory (dynamic and the kernel's static) fits the device.
inline bool fits(const tuner::Candidate& candidate, const detail::LoadedKernel& kernel,
                 const detail::DeviceFingerprint& fingerprint) {
  return candidate.dynamic_smem + kernel.attributes().static_smem <= std::size_t(fingerprint.max_smem_per_block_optin);
}

/// Each compiled candidate loaded (REQUIRE: it compiled), its dynamic shared memory allowed where it
/// fits the device (the others are skipped by verify_variants).
inline std::vector<detail::LoadedKernel> load_variants(const normalize::Problem& p,
                                                       const std::vector<tuner::Candidate>& candidates,
                                                       const std::vector<tuner::Compiled>& compiled,
                                                       const detail::DeviceFingerprint& fingerprint) {
  std::vector<detail::LoadedKernel> kernels;
  for (std::size_t i = 0; i < compiled.size(); ++i) {
    INFO(p.key() << " " << candidates[i].label << " " << compiled[i].message);
    REQUIRE(compiled[i].status == tuner::Status::ok);
    kernels.push_back(detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name, candidates[i].phases()));
    if (fits(candidates[i], kernels.back(), fingerprint)) kernels.back().allow_dynamic_smem(candidates[i].dynamic_smem);
  }
  return kernels;
}

/// A sample of a problem's variants, compiled in one batch and loaded (load_variants).
struct SampledVariants {
  std::vector<normalize::Config> configs;
  std::vector<tuner::Candidate> candidates;
  std::vector<detail::LoadedKernel> kernels;
};

/// `sample` applied to `configs` (keyed by the problem, always keeping index `always`), then
/// compiled and loaded.
inline SampledVariants sample_variants(const normalize::Problem& p, const std::vector<normalize::Config>& configs,
                                       const test::Sample& sample, const detail::DeviceFingerprint& fingerprint,
                                       std::size_t always = SIZE_MAX) {
  SampledVariants out;
  out.configs = sample.apply(configs, p.key(), always);
  out.candidates = normalize::make_candidates(p, out.configs, fingerprint.arch());
  out.kernels = load_variants(p, out.candidates, tuner::compile_all(out.candidates, 0), fingerprint);
  return out;
}

/// Verifies every loaded candidate on `rows` rows of `p` (configs: the candidates' configs, in
/// order); returns how many were checked.
inline std::size_t verify_variants(normalize::Problem p, std::int64_t rows, const std::vector<normalize::Config>& configs,
                                   const std::vector<tuner::Candidate>& candidates,
                                   const std::vector<detail::LoadedKernel>& kernels,
                                   const detail::DeviceFingerprint& fingerprint, cudaStream_t stream) {
  p.rows = rows;
  auto harness = normalize::make_harness(p, configs, fingerprint.arch(), 0, stream);
  std::size_t checked = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!fits(candidates[i], kernels[i], fingerprint)) continue;
    const auto verdict = harness->verify(candidates[i], kernels[i], stream);
    INFO(p.key() << " rows=" << rows << " " << candidates[i].label << ": " << verdict.message);
    CHECK(verdict.ok);
    ++checked;
  }
  return checked;
}

inline std::size_t verify_variants(const normalize::Problem& p, std::int64_t rows, const SampledVariants& v,
                                   const detail::DeviceFingerprint& fingerprint, cudaStream_t stream) {
  return verify_variants(p, rows, v.configs, v.candidates, v.kernels, fingerprint, stream);
}

}  // namespace kvtune::test_normalize
