#pragma once
// kvtune-tune's GPU part: one worker thread per selected GPU, each with its own kvtune::Context,
// pulling problems from a queue shared by the GPUs of one model (same fingerprint id: a problem is
// tuned once per model, by whichever of its GPUs is free). With isolation, each problem is tuned
// by a child process (this executable, re-run with a hidden flag) under a watchdog, so a crash or
// a hang costs one problem, not the run.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/ops.h"

namespace kvtune::tools {

struct TuneOptions {
  std::string cache_path;
  std::vector<int> devices;       ///< CUDA ordinals, already checked
  bool force = false;             ///< re-tune problems that have a winner, the winner as incumbent
  bool isolate = false;           ///< one child process per problem
  double timeout_seconds = 1800;  ///< per problem, with isolate
  int samples = 0;                ///< timing samples per variant; 0: the library's default
  int budget_variants = 32;       ///< ContextOptions::budget_variants (0: exhaustive), resolved
  double budget_ms = 0;           ///< ContextOptions::budget_ms (0: none), resolved
  bool progress_bar = false;      ///< stdout is a terminal
  bool quiet = false;             ///< no progress at all (--json)
  std::string self_path;          ///< this executable, for isolate
};

/// One problem to tune: on every selected GPU model, or, for a recorded problem, only on the GPUs
/// whose fingerprint id is the device it was recorded on.
struct TuneTask {
  const OpProblem* problem = nullptr;
  std::string device_id;  ///< "" for every model
};

/// The newest tuning run the library stored for a result's entry (cache::TuningRun, abridged).
struct RunSummary {
  std::int64_t started_at = 0;
  double wall_seconds = 0;
  int variants_total = 0;  ///< in the space after the constraints
  int variants_timed = 0;  ///< tried (benchmarked or failed)
  int compiles = 0;
  int binaries_reused = 0;
  std::string search;  ///< "exhaustive" or "budgeted"
  int sm_clock_mhz = -1;
  std::string incumbent_label;  ///< empty when there was none
  bool replaced_incumbent = false;
};

struct TuneResult {
  int index = 0;  ///< position in the task list
  std::string op;
  std::string key;
  std::string describe;
  int device = -1;  ///< -1: no selected GPU could take it (a recorded problem of another device)
  std::string device_name;
  std::string status;  ///< "tuned", "skipped" (had a winner, or not for these GPUs), "failed"
  std::string label;
  std::string origin;
  double median_ms = -1;
  double gbps = 0;
  double copy_fraction = 0;  ///< gbps / measured copy bandwidth, 0 when not measured
  int variants_ok = 0;
  int variants_failed = 0;
  std::optional<RunSummary> run;  ///< the entry's newest tuning run, when the cache has one
  double seconds = 0;
  std::string message;  ///< why it failed or was skipped, or a warning
};

struct DeviceSummary {
  int ordinal = 0;
  std::string name;
  std::string id;
  double copy_gbps = 0;
  double fma_gflops = 0;
  std::string note;
};

struct TuneRun {
  std::vector<TuneResult> results;  ///< by task, then device
  std::vector<DeviceSummary> devices;
};

/// Tunes every task on every GPU model among options.devices that it applies to. Throws
/// kvtune::Error when there is no usable GPU.
TuneRun run_tuning(const std::vector<TuneTask>& tasks, const TuneOptions& options);

/// What the child side of --isolate is told (hidden flags).
struct ChildRequest {
  std::string cache_path;
  int device = 0;
  std::string problem_json;  ///< the shapes entry, or, with `key`, the op's name
  std::string key;           ///< a stored key to rebuild the problem from (buckets other than pow2)
  std::string result_path;
  std::string progress_path;  ///< where each finished candidate is appended as a line
  int samples = 0;
  int budget_variants = 32;
  double budget_ms = 0;
  bool retune = false;
};

/// The child side of --isolate: tunes one problem on `device` and writes what it saw to
/// `result_path` as JSON. Returns the exit status.
int run_isolated_child(const ChildRequest& request);

/// The hidden flag that makes kvtune-tune a child.
inline constexpr const char* kChildFlag = "--isolated-child";

}  // namespace kvtune::tools
