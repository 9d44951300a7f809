#pragma once
// The dwconv_decode family's C++ description: the decode step of a causal depthwise conv1d with a
// rolling state (kvtune::DwConvDecodeArgs). A family of its own, not a direction of dwconv: its loop
// structure (one row of a few tokens, a state read and written in place) shares nothing with the
// convolution kernels but the activations (dwconv_activation.cuh). Kernel: dwconv_decode.cu. CPU
// reference: dwconv_decode_reference.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvtune/kvtune.h"
#include "core/buckets.h"
#include "core/nvrtc.h"

namespace kvtune::dwconv_decode {

/// The limits validate() enforces.
inline constexpr int kMaxKernel = 63;   // dwconv's 1D limit
inline constexpr int kMaxSeqlen = 64;   // new tokens per call: a decode step, or a few speculative ones

/// One variant (label "bt=128,vc=4,tt=1").
struct Config {
  int block_threads = 0;        // BLOCK: threads per block (CVB = BLOCK / G along channels are launched x G groups)
  int channels_per_thread = 0;  // VC: consecutive channels a thread computes (one vector of x / y when seqlen = 1)
  int tokens_per_thread = 0;    // TT: consecutive new tokens a thread computes; G = ceil(seqlen / TT) groups

  bool operator==(const Config& o) const;
  bool operator!=(const Config& o) const { return !(*this == o); }
  std::string label() const;
  nlohmann::json to_json() const;
  static Config from_json(const nlohmann::json& j);
};

/// Everything about a call that changes which variant wins; the batch is bucketed. Key:
/// "dwconv_decode,bf16,n<=64,c=4096,k=4,seq=1,state=3,circular=0,indices=1,bias=1,act=silu,align=16",
/// then ",early=1" with overlap_prologue (weight, bias and the indices read before the wait).
struct Problem {
  DType dtype = DType::f32;
  std::int64_t n = 1;      // the batch bucket's upper bound (or the exact batch, with n_exact)
  bool n_exact = false;
  std::int64_t c = 0;
  int k = 4;
  int seqlen = 1;
  std::int64_t state_len = 3;  // k - 1 unless circular
  bool circular = false;       // cache_seqlens given
  bool indices = false;        // state_indices given
  bool bias = false;
  Activation activation = Activation::none;
  int align_bytes = 16;  // largest vector access every tensor pointer allows
  bool early = false;    // overlap_prologue: weight, bias and state_indices read before griddepcontrol.wait

  bool operator==(const Problem& o) const;
  std::string key() const;
  int element_bytes() const { return dtype == DType::f32 ? 4 : 2; }
};

struct ProblemHash {
  std::size_t operator()(const Problem& p) const;
};

/// Throws kvtune::Error naming the field for anything the kernels cannot take.
void validate(const DwConvDecodeArgs& args);
/// The key of validated arguments; the batch bucketed by `buckets` (powers of two by default).
Problem make_problem(const DwConvDecodeArgs& args, const detail::Buckets& buckets = {});
/// The problem whose key() is `key` and which the library accepts; nullopt otherwise (never throws).
std::optional<Problem> problem_from_key(const std::string& key);
/// Placeholder (never dereferenced, disjoint) pointers for every tensor `p` uses, for validate().
void set_placeholders(DwConvDecodeArgs& args, const Problem& p);

/// Hard constraints only: whether `config` runs correctly on `problem`; `why` gets the reason.
bool is_runnable(const Problem& problem, const Config& config, std::string* why = nullptr);
/// is_runnable, and not pruned (a block more than half idle on every row): a variant of the space,
/// small enough to be tried whole.
bool is_valid(const Problem& problem, const Config& config, std::string* why = nullptr);
/// Every valid variant.
std::vector<Config> enumerate(const Problem& problem);
Config heuristic_config(const Problem& problem, int cc_major);

struct Geometry {
  unsigned grid = 0;
  unsigned block = 0;  // CVB x G threads
};
Geometry geometry(const Problem& problem, const Config& config, std::int64_t batch);

/// Bytes one step moves: x and y, the state entries read and written, weight and bias.
double model_bytes(const Problem& problem, std::int64_t batch);
double model_flops(const Problem& problem, std::int64_t batch);
/// Ranking only: a launch latency plus the memory time of the busiest SM's blocks, with a penalty
/// for threads that keep many values in registers.
double predicted_seconds(const Problem& problem, const Config& config, int sm_count, double bandwidth);

detail::CompileRequest compile_request(const Problem& problem, const Config& config, const std::string& arch);
/// kvt_compare and kvt_fill_random for the problem's dtype (verification in the tuning harness).
detail::CompileRequest support_request(const Problem& problem, const std::string& arch);
std::string template_hash();

}  // namespace kvtune::dwconv_decode
