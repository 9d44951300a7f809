#pragma once
// The family-agnostic tuner: choose what to try (everything, or within a budget the cost model's
// best plus exploration), compile on all cores while the GPU verifies and times what is ready
// (reusing stored cubins), re-measure the finalists interleaved, and pick the winner; an
// incumbent is replaced only by a variant faster beyond the noise. Failed variants are data (a
// Trial with a status), not exceptions.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/store.h"
#include "core/compile_workers.h"
#include "core/module.h"
#include "core/nvrtc.h"

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
  /// The family's cost model (seconds, for ranking only); 0 when unknown.
  double predicted_seconds = 0;
  /// The family's estimate of this variant's compile time, in its own units (only the order
  /// matters); 0 when unknown. The costliest compiles start first, so that a slow program does not
  /// start in a later round of compiles and end last.
  double compile_cost = 0;
  /// The kernels launched as phases of this variant: its request names one per phase.
  int phases() const { return static_cast<int>(request.name_expressions.size()); }
};

struct Compiled {
  Status status = Status::ok;
  std::string message;
  std::string cubin;
  std::string lowered_name;
  std::string binary_hash;
  double seconds = 0;
  bool reused = false;  // came from the store instead of NVRTC
  int queued = -1;      // its program's place in the compile queue (0: started first); -1 reused
};

/// Compiles every candidate on `threads` threads (0: all cores), each in a compile worker process
/// started from `worker` ("": in this process; core/compile_workers.h), the costliest compiles
/// first. Never throws for a candidate that fails to compile: its result has status
/// compile_failed and the NVRTC log.
std::vector<Compiled> compile_all(const std::vector<Candidate>& candidates, int threads,
                                  const std::string& worker = detail::find_compile_worker());

struct Verdict {
  bool ok = false;
  double relative_error = 0;  // ||out - ref|| / ||ref||
  double bad_elements = 0;    // unwritten (poisoned) or non-finite where the reference is finite
  std::string message;
};

/// How a verdict's message starts when the device refused the candidate's launch for what it asks
/// (a cooperative grid that cannot be co-resident, too many registers a block): the tuner records
/// the variant as resources_exceeded, not launch_failed.
inline constexpr const char* kResourcesRefused = "launch refused for resources";

/// The trial status of a failed verdict, from how its message starts: kResourcesRefused
/// (resources_exceeded), "launch" (launch_failed), "timed out" (timed_out), else wrong_result.
Status failed_status(const Verdict& verdict);

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

/// Progress of one tuning, reported after each candidate (and once per finalist at the end).
struct Progress {
  int done = 0;       // candidates finished (timed or rejected)
  int total = 0;      // candidates chosen for this run
  const cache::Trial* trial = nullptr;
  bool final = false;  // the interleaved re-measure of the finalists
};

/// How many of the recorded rankings' best variants (a family's learned_picks) a budgeted search
/// prefers after the heuristic's pick (Options::preferred; lib/src/tuning_run.h; bench/NOTES.md,
/// 2026-12-02).
inline constexpr int kLearnedPicks = 8;

struct Options {
  int samples = 15;              // timed batches per candidate; the median is kept
  double batch_ms = 0.25;        // each timed batch lasts at least this long
  double warmup_ms = 1.0;        // untimed launches first
  int compile_threads = 0;
  /// The compile worker executable (core/compile_workers.h); "" compiles in this process.
  std::string compile_worker;
  int max_dynamic_smem = 48 * 1024;  // the device's opt-in limit per block
  /// Search budget: at most this many candidates (0: all). Beyond it the cost model's best
  /// (1 - explore) share plus random picks (seeded by `seed`) are tried; `required` always are.
  int budget_variants = 0;
  /// With a budget, spaces are also cut to this share of their size (never below
  /// `min_variants`): a 35-variant space is not tried whole under a budget of 40.
  double budget_fraction = 0.25;
  int min_variants = 12;
  /// Stop starting new candidates after this many milliseconds of tuning (0: no limit); at least
  /// one candidate is always timed.
  double budget_ms = 0;
  double explore = 0.2;
  std::uint64_t seed = 0;
  std::vector<int> required;  // candidate indices always tried (the heuristic, the incumbent)
  /// Candidate indices tried next, in order, before the cost model's best, within the budget's
  /// (1 - explore) share (the learned tables' picks).
  std::vector<int> preferred;
  /// Kernels faster than this are timed as CUDA-graph replays of a captured batch (no launch gaps).
  /// 100 µs, as kvtune-bench: a launch whose host path makes two API calls (a counter memset and the
  /// kernel) costs ~10 µs of host time a launch, so plain batches timed kernels of 9–12 µs alike.
  double graph_below_ms = 0.100;
  /// Interleaved re-measure: the best `finalists` by median, `final_rounds` rounds of one batch each.
  int finalists = 4;
  int final_rounds = 9;
  /// The currently stored winner (a candidate index, -1 none): it keeps its place unless the best
  /// is faster by more than the measured noise.
  int incumbent = -1;
  /// Cubins already stored, looked up by compile hash (returns those found); null: compile all.
  std::function<std::vector<cache::Binary>(const std::vector<std::string>&)> find_binaries;
  std::function<void(const Progress&)> on_progress;
  std::function<void(const std::string&)> debug;  // optional log of each decision
};

struct Outcome {
  int winner = -1;  // index into the candidates, -1 when none survived
  std::vector<cache::Trial> trials;  // one per chosen candidate, in `chosen` order
  std::vector<int> chosen;           // candidate indices tried (all of them when exhaustive), in the
                                     // order they were timed: as their compiles finished
  std::vector<int> trial_index;      // per candidate: its index in `trials`, -1 when not tried
  std::vector<Compiled> compiled;    // per candidate index; empty cubin for those not chosen
  bool budgeted = false;             // a budget left candidates out
  bool kept_incumbent = false;       // the incumbent stayed (within noise of the best)
  double winner_ms = -1, winner_spread = 0;
  double incumbent_ms = -1;
  double compile_seconds = 0;  // CPU-side wall time until the last compile finished
  double bench_seconds = 0;    // wall time from the first candidate's turn to the end
  // Where bench_seconds went, on the thread that drives the GPU (the rest: loading, bookkeeping):
  double wait_seconds = 0;    // waiting for a candidate's compile to finish
  double verify_seconds = 0;  // loading each kernel and checking its output against the reference
  double time_seconds = 0;    // warming up and timing the candidates
  double final_seconds = 0;   // the finalists' interleaved re-measure
  int compiles = 0;            // NVRTC compilations done
  int reused = 0;              // cubins taken from the store
  std::vector<std::string> rejected_binaries;  // stored cubins refused: not what this build makes for
                                               // the candidate (binary_matches_request's reason)
};

/// The candidates a run tries, best predicted first: every one when the budget allows, else
/// `required`, the cost model's top share and seeded random exploration. They compile costliest
/// first (Candidate::compile_cost; in this order under a time budget, so that the likely winners
/// are timed before it runs out) and are timed as their compiles finish, in this order among
/// those ready.
std::vector<int> choose(const std::vector<Candidate>& candidates, const Options& options);

/// A tuning's choice of candidates, its stored binaries and its compiles, started before the
/// harness exists: the harness's buffers and float64 reference are then built while the candidates
/// compile. Give it to tune() with the same candidates and options; tune() starts its own without.
class StartedCompiles {
 public:
  StartedCompiles(const std::vector<Candidate>& candidates, const Options& options);
  ~StartedCompiles();
  StartedCompiles(const StartedCompiles&) = delete;
  StartedCompiles& operator=(const StartedCompiles&) = delete;

 private:
  friend Outcome tune(const std::vector<Candidate>&, Harness&, const Options&, cudaStream_t, StartedCompiles*);
  struct State;
  std::unique_ptr<State> state_;
};

/// Tunes. Throws kvtune::Error only for broken infrastructure (a sticky CUDA error, no memory).
Outcome tune(const std::vector<Candidate>& candidates, Harness& harness, const Options& options,
             cudaStream_t stream, StartedCompiles* started = nullptr);

/// Times one loaded kernel: median milliseconds per launch over `options.samples` batches, and
/// the relative spread (p90 - p10) / median. Kernels under options.graph_below_ms are timed as
/// graph replays (a captured batch launched as one graph).
struct Timing {
  double median_ms = 0;
  double spread = 0;
  int batch = 1;
  bool graph = false;
};
Timing time_kernel(const Candidate& candidate, const detail::LoadedKernel& kernel, Harness& harness,
                   const Options& options, cudaStream_t stream);

}  // namespace kvtune::tuner
