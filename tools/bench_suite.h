#pragma once
// kvtune-bench's problem suites: the one source of truth for the shapes that kvtune-bench and the
// PyTorch peers script (bench/peers/torch_peers.py, through `kvtune-bench --list-suite`) time.
// No CUDA here: the suites, their JSON form and each problem's bytes and FLOPs model.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtune/kvtune.h"

namespace kvtune::bench {

enum class Family { normalize, dwconv };

/// One timed problem: the arguments of one kvtune call with null pointers (the bench fills them).
struct BenchProblem {
  std::string id;      // "<suite>/<short name>", unique across all suites; the key peers are merged by
  std::string suite;
  std::string what;    // readable description: shape, dtype, layout, direction
  std::string source;  // where the shape comes from
  Family family = Family::normalize;
  NormalizeArgs normalize;  // family == normalize
  DwConvArgs dwconv;        // family == dwconv
  bool bias = false;        // dwconv forward: y = act(conv(x) + bias), with dwconv.activation

  /// "normalize", "dwconv forward", "dwconv backward_data", "dwconv backward_weight": the
  /// groups geometric means are taken over.
  std::string group() const;
  /// Bytes the call must move (kvtune's model: each input read once, each output written once).
  double model_bytes() const;
  /// Floating-point operations of the call (kvtune's model).
  double model_flops() const;
};

/// Suite names accepted by --suite and --list-suite (without "all").
const std::vector<std::string>& suite_names();
/// The problems of `name`: one suite, "all" (every suite in order) or a comma-separated list.
/// `quick` keeps the first two of each suite. Throws kvtune::Error for an unknown name.
std::vector<BenchProblem> suite(const std::string& name, bool quick);

nlohmann::json to_json(const BenchProblem& problem);
/// The document `kvtune-bench --list-suite NAME --json FILE` writes (schema "kvtune-bench-suite/1").
nlohmann::json suite_document(const std::string& name, bool quick);

}  // namespace kvtune::bench
