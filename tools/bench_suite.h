#pragma once
// kvtune-bench's problem suites: the one source of truth for the shapes that kvtune-bench and the
// PyTorch peers script (bench/peers/torch_peers.py, through `kvtune-bench --list-suite`) time.
// No CUDA here: the suites, their JSON form and each problem's bytes and FLOPs model.
//
// Each registered family (lib/src/families.h) contributes its suites through bench_suites<F>(),
// defined in tools/bench_<family>.cpp; the listing iterates the registry, so a family without its
// bench side does not link, and a CPU test fails when a family has no row in `--list-suite all`.

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtune/kvtune.h"

namespace kvtune::bench {

/// The public call a row times, its tensors null: a non-null optional tensor (bias, gamma,
/// seq_idx, state_indices, ...) is a marker meaning "the call passes it"; the bench allocates it.
using BenchCall = std::variant<NormalizeArgs, NormalizeBackwardArgs, DwConvArgs, DwConvDecodeArgs>;

/// The marker of an optional tensor the call passes (never dereferenced).
void* passed();
/// `a` with stand-ins (distinct, 256-byte aligned, never dereferenced) for the tensors every call of
/// its direction reads and writes, markers kept: what the models and make_problem need.
DwConvArgs with_stand_in_tensors(DwConvArgs a);

/// One timed problem.
struct BenchProblem {
  std::string id;      // "<suite>/<short name>", unique across all suites; the key peers are merged by
  std::string suite;
  std::string what;    // readable description: shape, dtype, layout, direction
  std::string source;  // where the shape comes from
  std::string family;  // the registry family (F::kOp) whose kernels the row is about
  std::string group;   // the rows geometric means are taken over ("normalize", "dwconv forward", ...)
  BenchCall call;
  int sequences = 0;   // packed sequences per row when the call passes seq_idx

  const NormalizeArgs& normalize() const { return std::get<NormalizeArgs>(call); }
  const NormalizeBackwardArgs& normalize_backward() const { return std::get<NormalizeBackwardArgs>(call); }
  const DwConvArgs& dwconv() const { return std::get<DwConvArgs>(call); }
  const DwConvDecodeArgs& decode() const { return std::get<DwConvDecodeArgs>(call); }
  /// Bytes the call must move (kvtune's model: each input read once, each output written once).
  double model_bytes() const;
  /// Floating-point operations of the call (kvtune's model).
  double model_flops() const;
};

/// One suite of one family: its name and its rows.
struct BenchSuite {
  std::string name;
  std::function<std::vector<BenchProblem>()> build;
};

/// Family F's suites (tools/bench_<family>.cpp); every family of lib/src/families.h has one.
template <class F>
std::vector<BenchSuite> bench_suites();

/// Every registered family's suites, in registry order.
const std::vector<BenchSuite>& all_suites();
/// Suite names accepted by --suite and --list-suite (without "all").
std::vector<std::string> suite_names();
/// The problems of `name`: one suite, "all" (every suite in order) or a comma-separated list.
/// `quick` keeps the first two of each suite. Throws kvtune::Error for an unknown name.
std::vector<BenchProblem> suite(const std::string& name, bool quick);

nlohmann::json to_json(const BenchProblem& problem);
/// The document `kvtune-bench --list-suite NAME --json FILE` writes (schema "kvtune-bench-suite/1").
nlohmann::json suite_document(const std::string& name, bool quick);

}  // namespace kvtune::bench
