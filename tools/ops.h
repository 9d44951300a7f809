#pragma once
// The tools' view of an operator. Everything kvtune-tune and kvtune-cache need to know about one
// operator family sits behind OpHandler: parsing a problem from a shapes-file entry, its built-in
// suites, the size of its tuning space, its variants as NVRTC requests, calling the library on a
// GPU so that it tunes, and interpreting stored cache keys for the report. The tools themselves
// never name an operator.
//
// Adding an operator = its family in the registry (lib/src/families.h) and its tools side: a file
// tools/op_<family>.cpp with the shapes entry, the suites and the library call (FamilyHandler in
// tools/op_family.h is the handler) and its make_handler<F>() (ops.cpp builds one per family).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtune/kvtune.h"
#include "core/nvrtc.h"

namespace kvtune::tools {

/// Sizes of a problem's tuning space, for --dry-run.
struct SpaceSize {
  std::int64_t total = 0;     ///< the cross product of every axis of the operator's config
  std::int64_t runnable = 0;  ///< after the hard constraints (what could run correctly)
  std::int64_t tuned = 0;     ///< after pruning: the variants tuning compiles and benchmarks
};

/// One variant of one problem, ready to compile.
struct Variant {
  std::string label;
  nlohmann::json config;
  detail::CompileRequest request;
};

/// One problem of one operator, parsed from a shapes entry or a built-in suite.
class OpProblem {
 public:
  virtual ~OpProblem() = default;
  virtual std::string op() const = 0;
  /// The library's cache key of this problem.
  virtual std::string key() const = 0;
  /// One short human line, e.g. "16384x1024 f32 layernorm +gamma+beta".
  virtual std::string describe() const = 0;
  /// The shapes-file entry (every field explicit) of a call of this size. Parsing it gives the same
  /// problem when buckets() is "pow2" (shapes entries are always bucketed by powers of two).
  virtual nlohmann::json to_json() const = 0;
  /// The batch bucketing (ContextOptions::buckets) under which the library keys this problem's call
  /// as key(): "pow2" for shapes entries; "exact" for an exact stored key ("rows=1000"); the bound
  /// itself ("1000") for a bucket of custom bounds ("rows<=1000").
  virtual std::string buckets() const = 0;
  virtual SpaceSize space() const = 0;
  /// Every variant tuning would try, for `arch` ("sm_90").
  virtual std::vector<Variant> variants(const std::string& arch) const = 0;
  /// Bytes one call must move (the model the library uses for GB/s).
  virtual double model_bytes() const = 0;
  /// On the calling thread's current device: allocates the problem's tensors and calls the
  /// library through `context`, so that it tunes (or loads) this problem and stores the result.
  /// Returns the label of the variant the library dispatched. Throws kvtune::Error.
  virtual std::string run_library(Context& context) const = 0;
};

/// What an operator knows about one of its stored problem keys (for reports and imports).
struct KeyInfo {
  std::string describe;         ///< as OpProblem::describe
  std::string seed_label;       ///< the operator's seed design for this problem
  std::string heuristic_label;  ///< the library's heuristic choice on the device
  double model_bytes = 0;       ///< per call
  double model_flops = 0;       ///< per call
};

class OpHandler {
 public:
  virtual ~OpHandler() = default;
  virtual std::string name() const = 0;
  /// Hash of the operator's template and description: part of every cache key.
  virtual std::string template_hash() const = 0;
  /// Built-in suites and their entries (shapes-file objects, parsed like a file's).
  virtual std::vector<std::string> suite_names() const = 0;
  virtual std::vector<nlohmann::json> suite(const std::string& name) const = 0;
  /// Documents the entry fields for error messages: "rows, cols, dtype, ...".
  virtual std::string fields() const = 0;
  /// Parses one shapes entry. `where` (e.g. "shapes.json: problems[3]") starts every message.
  /// Throws InputError.
  virtual std::unique_ptr<OpProblem> parse(const nlohmann::json& entry, const std::string& where) const = 0;
  /// Interprets a stored key; nullopt when it is not a well-formed key of this operator.
  /// `cc_major` and `gpu_model` are the device's, for the heuristic choice (0 and "" when unknown).
  virtual std::optional<KeyInfo> key_info(const std::string& problem_key, int cc_major,
                                          const std::string& gpu_model = {}) const = 0;
  /// Checks a stored config against its problem key and returns the config's canonical label;
  /// throws InputError naming what is wrong.
  virtual std::string check_config(const std::string& problem_key, const nlohmann::json& config) const = 0;
  /// The problem of a stored key (one the record policy logged, say), whose key() is exactly
  /// `problem_key`: a bucket key ("rows<=1024") at the bucket's upper size, an exact key
  /// ("rows=1000") at its size. nullptr when this tool cannot read or reproduce the key; then
  /// `why` (when not null) says why.
  virtual std::unique_ptr<OpProblem> from_key(const std::string& problem_key, std::string* why) const = 0;
};

/// The handler of family F (lib/src/families.h), defined by its tools side (tools/op_<family>.cpp).
template <class F>
std::unique_ptr<OpHandler> make_handler();

/// Every registered handler: one per family of the registry, in its order.
const std::vector<std::unique_ptr<OpHandler>>& handlers();
/// The handler of `op`, or nullptr.
const OpHandler* find_handler(const std::string& op);
/// The handler of `op`; InputError "WHERE: unknown operator" (listing the known ones) otherwise.
const OpHandler& require_handler(const std::string& op, const std::string& where);
/// The handler that owns `suite`; InputError for an unknown name.
const OpHandler& handler_for_suite(const std::string& suite);
/// Every suite name ("ids, large, narrow, mobilenetv2, ...").
std::string describe_suites();
/// Every operator name ("normalize, dwconv").
std::string describe_operators();

/// Reads every problem of a shapes file: {"problems": [ENTRY, ...]} or a bare [ENTRY, ...].
/// InputError for a missing file, malformed JSON (with line and column) or a bad entry.
std::vector<std::unique_ptr<OpProblem>> load_shapes(const std::string& path);
/// Parses entries (a file's or a suite's); `source` names them in messages.
std::vector<std::unique_ptr<OpProblem>> parse_entries(const nlohmann::json& entries, const std::string& source);
/// The entries of a built-in suite, parsed.
std::vector<std::unique_ptr<OpProblem>> load_suite(const std::string& suite);

/// A stored problem (a recorded one) as kvtune-tune --recorded takes it: its problem, or nullptr
/// with the reason it cannot be tuned by this build in `why` (an operator this build does not have,
/// another template than this build's, a key the operator cannot read or reproduce).
std::unique_ptr<OpProblem> problem_from_stored_key(const std::string& op, const std::string& problem_key,
                                                   const std::string& template_hash, std::string& why);

/// OpProblem::buckets() of a problem keyed by `size`: "exact" when `exact`, "pow2" when `size` is a
/// power of two, else the size itself (a bucket bound of its own).
std::string bucket_spec(std::int64_t size, bool exact);

}  // namespace kvtune::tools
