#pragma once
// kvtune-bench's results, the peers file merge, and the JSON and Markdown writers. No CUDA here, so
// the tests exercise all of it on synthetic timings.

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/bench_suite.h"

namespace kvtune::bench {

/// One measured (or failed) implementation of one problem.
struct Timing {
  std::string status = "not run";  // "ok", "failed", "unsupported", "skipped", "not run"
  double median_ms = 0;            // per call; valid when status == "ok"
  double spread = 0;               // (p90 - p10) / median over the samples
  std::string mode;                // "events" or "graph" (CUDA-graph replay)
  std::string label;               // variant label, algorithm, or op name
  std::string message;             // why it failed or was skipped

  bool ok() const { return status == "ok" && median_ms > 0; }
  static Timing failed(std::string why, std::string status = "failed");
};

struct ProblemResult {
  BenchProblem problem;
  double model_bytes = 0;
  double model_flops = 0;
  int slots = 0;                                  // input/output sets rotated between calls
  double slot_bytes = 0;                          // bytes of one set
  Timing kvtune;                                  // the tuned winner through kvtune::Context
  Timing heuristic;                               // Policy::heuristic through kvtune::Context
  std::vector<std::pair<std::string, Timing>> seeds;  // seed design name -> timing
  Timing cudnn;
  Timing copy;                                    // cudaMemcpyAsync of model_bytes / 2
  std::map<std::string, Timing> peers;            // peer name ("torch-eager", ...) -> timing

  /// The fastest seed that ran (nullptr when none did).
  const std::pair<std::string, Timing>* best_seed() const;
};

struct MachineInfo {
  std::string device;
  int sm_count = 0;
  long long l2_bytes = 0;
  std::string driver;
  std::string kvtune_version;
  std::string cudnn;           // "9.14.0 (built against 9.19.0)" or why it is absent
  double copy_gbps = 0;        // 1 GiB device-to-device, bytes read + written
  double fma_tflops = 0;       // f32 FMA chain kernel
  double launch_us_events = 0; // empty kernel, per launch, event timing of back-to-back launches
  double launch_us_graph = 0;  // empty kernel, per launch, CUDA-graph replay
  std::string date;
  std::string command;
  std::string cache;           // kvtune cache in use ("in memory" or a path)
};

struct Report {
  MachineInfo machine;
  std::vector<ProblemResult> problems;
  std::vector<std::string> notes;
  std::vector<std::string> peer_sources;  // peers files merged, with their header
};

/// A malformed or unusable peers file; kvtune-bench exits with status 2.
class PeersError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads and validates a peers file (schema "kvtune-bench-peers/1", docs/PERFORMANCE.md).
nlohmann::json read_peers_file(const std::string& path);
/// Checks a parsed peers document; throws PeersError naming `origin` and the offending entry.
void validate_peers(const nlohmann::json& peers, const std::string& origin);
/// Merges validated peers into the report by problem id; returns how many entries matched no
/// problem of the report (other suites).
int merge_peers(Report& report, const nlohmann::json& peers, const std::string& origin);

/// floor = max(model bytes / copy bandwidth, model FLOPs / FMA rate), in milliseconds (0 when
/// the machine numbers are missing).
double floor_ms(const ProblemResult& result, const MachineInfo& machine);

nlohmann::json to_json(const Timing& timing);
nlohmann::json to_json(const Report& report);
/// The Markdown report: machine header, one table per group, geometric-mean speedups, notes.
std::string to_markdown(const Report& report);

}  // namespace kvtune::bench
