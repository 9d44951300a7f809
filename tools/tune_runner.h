#pragma once
// kvtune-tune's GPU part: one worker thread per selected GPU, each with its own kvtune::Context,
// pulling problems from a queue shared by the GPUs of one model (same fingerprint id: a problem is
// tuned once per model, by whichever of its GPUs is free). With isolation, each problem is tuned
// by a child process (this executable, re-run with a hidden flag) under a watchdog, so a crash or
// a hang costs one problem, not the run.

#include <string>
#include <vector>

#include "tools/ops.h"

namespace kvtune::tools {

struct TuneOptions {
  std::string cache_path;
  std::vector<int> devices;       ///< CUDA ordinals, already checked
  bool force = false;             ///< re-tune problems that have a winner
  bool isolate = false;           ///< one child process per problem
  double timeout_seconds = 1800;  ///< per problem, with isolate
  int samples = 0;                ///< timing samples per variant; 0: the library's default
  bool progress_bar = false;      ///< stdout is a terminal
  bool quiet = false;             ///< no progress at all (--json)
  std::string self_path;          ///< this executable, for isolate
};

struct TuneResult {
  int index = 0;  ///< position in the problem list
  std::string op;
  std::string key;
  std::string describe;
  int device = -1;
  std::string device_name;
  std::string status;  ///< "tuned", "skipped" (had a winner), "failed"
  std::string label;
  std::string origin;
  double median_ms = -1;
  double gbps = 0;
  double copy_fraction = 0;  ///< gbps / measured copy bandwidth, 0 when not measured
  int variants_ok = 0;
  int variants_failed = 0;
  double seconds = 0;
  std::string message;  ///< why it failed, or a warning
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
  std::vector<TuneResult> results;  ///< by problem, then device
  std::vector<DeviceSummary> devices;
};

/// Tunes every problem on every GPU model among options.devices. Throws kvtune::Error when there
/// is no usable GPU.
TuneRun run_tuning(const std::vector<const OpProblem*>& problems, const TuneOptions& options);

/// The child side of --isolate: tunes one problem (a shapes entry as JSON text) on `device` and
/// writes what it saw to `result_path` as JSON. Returns the exit status.
int run_isolated_child(const std::string& cache_path, int device, const std::string& problem_json,
                       const std::string& result_path, int samples);

/// The hidden flag that makes kvtune-tune a child.
inline constexpr const char* kChildFlag = "--isolated-child";

}  // namespace kvtune::tools
