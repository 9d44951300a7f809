#pragma once
// The dwconv family's C++ description: problem key, constraints, launch geometry, bytes
// and FLOPs model, NVRTC requests. Kernels: dwconv.cu. CPU reference: dwconv_reference.h.

#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvtune/kvtune.h"
#include "core/buckets.h"
#include "core/nvrtc.h"
#include "kernel_templates/dwconv/dwconv_config.h"

namespace kvtune::dwconv {

/// Everything about a call that changes which variant wins; the batch is bucketed.
struct Problem {
  DwDirection direction = DwDirection::forward;
  DwLayout layout = DwLayout::nchw;
  DType dtype = DType::f32;
  std::int64_t n = 1;  // the batch bucket's upper bound (or the exact batch, with n_exact)
  bool n_exact = false;  // "n=N" keys (exact bucketing) instead of "n<=N"
  std::int64_t c = 0, h = 1, w = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  bool bias = false;           // forward: bias input; backward_weight: dbias output
  bool deterministic = true;
  int align_bytes = 16;        // largest vector access every tensor pointer allows
  // Forward kernels' epilogue (dwconv_activation.cuh): act(z), or with gradient_prep dy * act'(z),
  // the first of the two problems a backward direction with an activation runs (key ",act=silu" or
  // ",act=silu_grad"; keys without an activation are as before). backward_weight with an activation
  // (",act=silu"): the fused 1D weight gradient (fused_weight_gradient()), which forms dy * act'(z)
  // itself. backward_data with an activation (",act=silu"): the fused 1D data gradient
  // (fused_data_gradient()). ",seq=1": the kernel masks the taps that cross packed sequences
  // (in_kernel_seq_idx(): the fused gradients and forward).
  Activation activation = Activation::none;
  bool gradient_prep = false;
  bool seq_idx = false;

  bool operator==(const Problem& o) const;
  std::string key() const;
  int element_bytes() const;
  bool channel_last() const { return layout == DwLayout::nlc || layout == DwLayout::nhwc; }
  std::int64_t out_h() const;
  std::int64_t out_w() const;
  /// Spatial size of the kernels' source / destination (see dwconv_params.h).
  std::int64_t src_h() const;
  std::int64_t src_w() const;
  std::int64_t dst_h() const;
  std::int64_t dst_w() const;
  /// EPI of the forward kernels: 0, the activation (1-4), or 8 + it for the gradient prep.
  int epilogue() const { return static_cast<int>(activation) + (gradient_prep ? 8 : 0); }
  /// The fused 1D gradients: a backward problem with an activation (only those calls make one).
  bool fused_data() const { return direction == DwDirection::backward_data && activation != Activation::none; }
  bool fused_weight() const { return direction == DwDirection::backward_weight && activation != Activation::none; }
  /// Whether the tiled, tensor-core and weight-gradient variants of this problem are compiled for its
  /// exact channels and planes (kvt_shape_fits's constants; the batch stays a run-time argument): 2D
  /// problems (NHWC and NCHW), every size within int. A 1D row's length changes from call to call
  /// (prefill), an image layer's plane does not; such a binary serves no other shape.
  bool fixed_shape() const;
};

struct ProblemHash {
  std::size_t operator()(const Problem& p) const;
};

void validate(const DwConvArgs& args);
/// The key of validated arguments; the batch bucketed by `buckets` (powers of two by default).
Problem make_problem(const DwConvArgs& args, const detail::Buckets& buckets = {});
/// Whether a validated call is the fused 1D weight gradient: backward_weight with an activation, 1D,
/// no initial_state, and a register window that holds a run of 4 outputs with every tap (dilated
/// kernels up to (k - 1) x dilation = 59, outputs of 4 or more). It reads x, dy, weight, bias and
/// seq_idx and needs no gradient prep nor (with seq_idx) a dwconv_states fix-up.
bool fused_weight_gradient(const DwConvArgs& args);
/// Whether a validated call is the fused 1D data gradient: backward_data with an activation, 1D,
/// stride 1, no states, (k - 1) x dilation <= 31, rows of 32 or more. The tiled kernel forms dy * act'(z)
/// from an x window beside each dy window: no gradient prep.
bool fused_data_gradient(const DwConvArgs& args);
/// Whether a validated call's seq_idx is masked in its dwconv kernel (key ",seq=1"; no dwconv_states
/// fix-up): no states, and the fused weight or data gradient, or a forward call (1D causal stride 1,
/// rows of 32 or more, (k - 1) x dilation <= 63). Other calls with seq_idx run the plain kernel and a
/// fix-up.
bool in_kernel_seq_idx(const DwConvArgs& args);
/// backward_data / backward_weight with an activation: the gradient prep, a forward problem of the
/// same convolution that stores dy * act'(z) (into workspace, so y's alignment is the workspace's).
/// nullopt for the other calls. make_problem() of such arguments is the plain backward problem run
/// on the prep's output: no activation in its key, and its alignment class ignores dy (and, for
/// backward_data, x), which it does not read.
std::optional<Problem> gradient_prep_problem(const DwConvArgs& args, const detail::Buckets& buckets = {});
/// Bytes of the gradient prep's output in workspace (n x c x out_h x out_w, rounded up to 256).
std::size_t gradient_prep_bytes(const DwConvArgs& args);
/// The problem whose key() is `key` and which the library accepts; nullopt otherwise (never throws).
std::optional<Problem> problem_from_key(const std::string& key);
/// Arguments with placeholder (never dereferenced) pointers for the tensors `direction` uses (with
/// args.activation, a backward direction's x or weight too), for checking a problem with validate()
/// without memory.
void set_placeholders(DwConvArgs& args, bool bias);

/// A tiled-kernel config from its axes (rh <= 1: one row per thread; rt <= 1: one run).
TiledConfig tiled_config(int rw, int tx, int ty, int vc, int halo, int filter, int rh, int rt = 0);
/// A channel-first flat-items config: blocks of `block` threads, runs of rw, rows rh, vectors vc.
TiledConfig flat_config(int rw, int block, int vc, int rh);
/// A weight-gradient config: channels and position threads per block, taps per block column, splits of
/// the reduction, atomic partials, register-tiled runs (0: none), their vectors along W and rows (0: 1).
WgradConfig wgrad_config(int ct, int py, int tg, int splits, int atomic, int rw, int vc, int rh);
/// A tensor-core config: `cb` channels a block, 16 segments as `tr` rows x 16 / tr runs of 8 * nt outputs.
MmaConfig mma_config(int cb, int tr, int nt, int warps);
/// Whether `config` is a variant tuning may try (hard constraints and pruning); `why` gets the reason.
bool is_valid(const Problem& problem, const Config& config, std::string* why = nullptr);
/// Hard constraints only: whether `config` runs correctly (the seed designs must only be runnable).
bool is_runnable(const Problem& problem, const Config& config, std::string* why = nullptr);
/// Every valid variant; the seed study's designs first.
std::vector<Config> enumerate(const Problem& problem);
/// The seed study's four designs for this problem: naive, coalesced, smem-blocked, warp-tiled.
std::vector<std::pair<std::string, Config>> seed_configs(const Problem& problem);
/// A sensible variant chosen without benchmarking (architecture major version; the GPU's model name
/// where known): the learned choice where the recorded rankings say the analytic rule is slower by
/// a margin (learned_config), else the analytic rule.
Config heuristic_config(const Problem& problem, int cc_major, const std::string& gpu_model = {});
/// The learned part of the heuristic (dwconv_learned.cpp): on an architecture with recorded
/// exhaustive trials (dwconv_learned_sm90.json for cc 9), a problem within reach of recorded ones
/// of its direction, layout and seq_idx gets the valid variant whose time ratios to the winner, averaged over
/// its four nearest recorded problems (weights 1 / (1 + distance)), are lowest, if that mean is
/// below the analytic rule's `rule` by more than the margin (a tenth in log ratio); else nullopt.
/// The recorded problems are those of `gpu_model` where the table has that model, else every model's.
std::optional<Config> learned_config(const Problem& problem, const Config& rule, int cc_major,
                                     const std::string& gpu_model = {});
/// The same from a parsed dwconv_learned document, without the recorded problem whose key is
/// `exclude` (held-out evaluation; tests).
std::optional<Config> learned_config(const Problem& problem, const Config& rule, const nlohmann::json& data,
                                     const std::string& exclude, const std::string& gpu_model = {});
/// The `count` valid variants with the lowest of those means, lowest first, without the margin
/// (only those the neighbours saw within the cap): the budgeted search times them all
/// (lib/src/tuning_run.h). Empty for other architectures and problems far from every recorded one.
std::vector<Config> learned_configs(const Problem& problem, int cc_major, const std::string& gpu_model, int count);
/// The same from a parsed document, without the recorded problem keyed `exclude` (held-out replays).
std::vector<Config> learned_configs(const Problem& problem, const nlohmann::json& data, const std::string& exclude,
                                    const std::string& gpu_model, int count);

struct Geometry {
  unsigned grid_x = 0, grid_y = 1;
  unsigned block = 0;
  std::size_t dynamic_smem = 0;
  std::size_t workspace_bytes = 0;  // backward_weight partials + counters
  std::size_t counter_bytes = 0;    // the part zeroed before every call (counters, accumulator)
};
Geometry geometry(const Problem& problem, const Config& config, std::int64_t batch);

double model_bytes(const Problem& problem, std::int64_t batch);
double model_flops(const Problem& problem, std::int64_t batch);
/// The budgeted search's analytic estimate of a variant's time (seconds): useful-lane fraction of
/// the tiles, loads and FMAs per output against the memory time, register-limited occupancy.
/// Only its ranking matters; constants calibrated on an H200 (bench/NOTES.md, "cost model").
double predicted_seconds(const Problem& problem, const Config& config, int sm_count, double bandwidth);
/// A variant's relative compile time (tuner::Candidate::compile_cost): the multiply-adds of one
/// thread's unrolled body, on top of a fixed part. Only its order matters.
double compile_cost(const Problem& problem, const Config& config);

detail::CompileRequest compile_request(const Problem& problem, const Config& config, const std::string& arch);
/// The float64 reference kernel, comparison and fill kernels.
detail::CompileRequest reference_request(const Problem& problem, const std::string& arch);
std::string template_hash();

}  // namespace kvtune::dwconv
