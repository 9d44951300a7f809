#pragma once
// The family-agnostic tuner: compile every candidate in parallel, verify each against the
// family's reference, time the survivors with CUDA events on scratch buffers the family's harness
// owns, and pick the winner. Failed variants are data (a Trial with a status), not exceptions.

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "cache/store.h"
#include "lib/src/module.h"
#include "lib/src/nvrtc.h"

namespace kvtune::tuner {

enum class Status { ok, compile_failed, resources_exceeded, launch_failed, wrong_result, timed_out };
const char* to_string(Status status);

/// One variant of one problem, as the tuner sees it.
struct Candidate {
  std::string label;
  std::string config_json;
  detail::CompileRequest request;  // architecture already set
  unsigned block_threads = 0;
  std::size_t dynamic_smem = 0;
  /// Static preference used to break ties inside the timing noise (lower wins).
  double tie_rank = 0;
  /// The family's index of this variant's config (the harness looks the config up by it).
  int index = -1;
};

struct Compiled {
  Status status = Status::ok;
  std::string message;
  std::string cubin;
  std::string lowered_name;
  std::string binary_hash;
  double seconds = 0;
};

/// Compiles every candidate on `threads` threads (0: all cores). Never throws for a candidate
/// that fails to compile: its result has status compile_failed and the NVRTC log.
std::vector<Compiled> compile_all(const std::vector<Candidate>& candidates, int threads);

struct Verdict {
  bool ok = false;
  double relative_error = 0;  // ||out - ref|| / ||ref||
  double bad_elements = 0;    // unwritten (poisoned) or non-finite where the reference is finite
  std::string message;
};

/// What a family provides to benchmark one problem. It owns every buffer it touches.
class Harness {
 public:
  virtual ~Harness() = default;
  /// Independent input/output sets rotated between launches (sized to exceed L2).
  virtual int slots() const = 0;
  /// Launches the candidate on buffer set `slot`; returns the launch status.
  virtual cudaError_t launch(const Candidate& candidate, const detail::LoadedKernel& kernel, int slot,
                             cudaStream_t stream) = 0;
  /// Poisons the outputs, runs the candidate once, compares with the reference.
  virtual Verdict verify(const Candidate& candidate, const detail::LoadedKernel& kernel, cudaStream_t stream) = 0;
  /// Bytes the problem must move (for GB/s in trials).
  virtual double model_bytes() const = 0;
};

struct Options {
  int samples = 15;              // timed batches per candidate; the median is kept
  double batch_ms = 0.25;        // each timed batch lasts at least this long
  double warmup_ms = 1.0;        // untimed launches first
  int compile_threads = 0;
  int max_dynamic_smem = 48 * 1024;  // the device's opt-in limit per block
  std::function<void(const std::string&)> debug;  // optional log of each decision
};

struct Outcome {
  int winner = -1;  // index into the candidates, -1 when none survived
  std::vector<cache::Trial> trials;
  std::vector<Compiled> compiled;
  double compile_seconds = 0;  // wall time of the parallel compile
  double bench_seconds = 0;
  int compiles = 0;
};

/// Tunes. Throws kvtune::Error only for broken infrastructure (a sticky CUDA error, no memory).
Outcome tune(const std::vector<Candidate>& candidates, Harness& harness, const Options& options,
             cudaStream_t stream);

/// Times one loaded kernel: median milliseconds per launch over `options.samples` batches, and
/// the relative spread (p90 - p10) / median.
struct Timing {
  double median_ms = 0;
  double spread = 0;
};
Timing time_kernel(const Candidate& candidate, const detail::LoadedKernel& kernel, Harness& harness,
                   const Options& options, cudaStream_t stream);

}  // namespace kvtune::tuner
