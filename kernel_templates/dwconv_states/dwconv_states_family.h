#pragma once
// The dwconv_states family's C++ description: the fix-up kernel of the causal depthwise conv1d's
// states and packed sequences (DwConvArgs::initial_state, final_state, dinitial_state, seq_idx). The
// tuned dwconv kernels run unchanged on such a call; this family's kernel (dwconv_states.cu) then
// recomputes the few outputs those options change, writes the state, or corrects the weight gradient.
// A family of its own, so that the convolution's problems, keys and spaces stay as they are. CPU
// reference of the whole operation: dwconv_states_reference.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvtune/kvtune.h"
#include "core/buckets.h"
#include "core/nvrtc.h"

namespace kvtune::dwconv_states {

/// One variant (label "bt=128,p=32"): BLOCK threads a block (one channel each), P positions a chunk.
struct Config {
  int block_threads = 0;
  int chunk_positions = 0;

  bool operator==(const Config& o) const;
  bool operator!=(const Config& o) const { return !(*this == o); }
  std::string label() const;
  nlohmann::json to_json() const;
  static Config from_json(const nlohmann::json& j);
};

/// One fix-up launch. Key: "dwconv_states,forward,nlc,bf16,n<=8,c=4096,w=2048,k=4,d=1,bias=1,act=silu,
/// init=1,state=1,seq=0" (act=silu_grad: the fix-up of an activation's gradient prep, a forward problem
/// whose output is dy * act'(z)).
struct Problem {
  DwDirection direction = DwDirection::forward;
  DwLayout layout = DwLayout::ncl;
  DType dtype = DType::f32;
  std::int64_t n = 1;  // the batch bucket's upper bound (or the exact batch, with n_exact)
  bool n_exact = false;
  std::int64_t c = 0, w = 0;
  int k = 2, d = 1;
  bool bias = false;                          // forward: bias read
  Activation activation = Activation::none;   // forward only
  bool gradient_prep = false;                 // forward with an activation: dy * act'(z)
  bool initial_state = false;                 // read (forward, backward_weight)
  bool state_out = false;                     // final_state (forward) or dinitial_state (backward_data)
  bool seq_idx = false;

  bool operator==(const Problem& o) const;
  std::string key() const;
  int element_bytes() const { return dtype == DType::f32 ? 4 : 2; }
  int state_len() const { return (k - 1) * d; }
  /// EPI of the kernel (dwconv_activation.cuh).
  int epilogue() const { return static_cast<int>(activation) + (gradient_prep ? 8 : 0); }
};

struct ProblemHash {
  std::size_t operator()(const Problem& p) const;
};

/// Whether a call uses states or seq_idx at all.
bool uses_states(const DwConvArgs& args);
/// Throws kvtune::Error naming the field for states / seq_idx the call cannot take (after
/// dwconv::validate accepted the rest). Does nothing for calls without them.
void validate(const DwConvArgs& args);

/// The fix-up problems of a validated call, in launch order around the tuned dwconv kernels:
/// `prep`, after the gradient prep of an activation (backward directions whose z reads the initial state
/// or crosses sequences), and `fix`, after the plain kernel. Either may be absent.
struct Plan {
  std::optional<Problem> prep;
  std::optional<Problem> fix;
};
Plan make_plan(const DwConvArgs& args, const detail::Buckets& buckets = {});
/// The problem whose key() is `key` and which the library accepts; nullopt otherwise (never throws).
std::optional<Problem> problem_from_key(const std::string& key);
/// A call of `batch` rows (placeholder pointers, as dwconv::set_placeholders) whose plan holds
/// `problem`: as its prep when problem.gradient_prep (a backward_weight call with the activation),
/// else as its fix. nullopt, with `why`, when no call makes this problem (never throws). The tools
/// tune a stored or written problem through such a call.
std::optional<DwConvArgs> call_for(const Problem& problem, std::int64_t batch, std::string* why = nullptr);

bool is_runnable(const Problem& problem, const Config& config, std::string* why = nullptr);
bool is_valid(const Problem& problem, const Config& config, std::string* why = nullptr);
std::vector<Config> enumerate(const Problem& problem);
Config heuristic_config(const Problem& problem, int cc_major);

struct Geometry {
  unsigned grid_x = 0, grid_y = 0;
  unsigned block = 0;        // threads along channels (the config's block_threads)
  unsigned block_y = 1;      // thread groups of the weight gradient's correction (kvt_states_groups)
  std::int64_t chunks = 0;  // position chunks a row whose outputs may need fixing
};
Geometry geometry(const Problem& problem, const Config& config, std::int64_t batch);

/// Bytes a fix-up moves when `marked` outputs of every row need recomputing (the whole-length scan of
/// seq_idx included); model_bytes() assumes one sequence boundary a row.
double fixup_bytes(const Problem& problem, std::int64_t batch, double marked_per_row);
double model_bytes(const Problem& problem, std::int64_t batch);
double model_flops(const Problem& problem, std::int64_t batch);
double predicted_seconds(const Problem& problem, const Config& config, int sm_count, double bandwidth);

detail::CompileRequest compile_request(const Problem& problem, const Config& config, const std::string& arch);
/// kvt_compare for the problem's dtype (verification in the tuning harness).
detail::CompileRequest support_request(const Problem& problem, const std::string& arch);
std::string template_hash();

}  // namespace kvtune::dwconv_states
