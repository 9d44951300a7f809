#pragma once
/// @file kvtune.h
/// kvtune: JIT-compiled, autotuned CUDA kernels for row normalization and depthwise convolution,
/// with a persistent cache.
///
/// @code
///   kvtune::NormalizeArgs args;
///   args.x = d_x; args.y = d_y; args.rows = 4096; args.cols = 1024;
///   args.mode = kvtune::NormMode::layernorm;
///   kvtune::tuned_normalize(args, stream);  // tunes once per shape and GPU, then dispatches
/// @endcode

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kvtune/error.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; no CUDA header is needed to use kvtune

namespace kvtune {

/// A CUDA stream (same type as cudaStream_t).
using Stream = CUstream_st*;

/// Element types of tensors. Statistics and accumulation are always f32 (or wider).
enum class DType : std::uint8_t { f32, f16, bf16 };

/// Row normalization modes.
enum class NormMode : std::uint8_t {
  standardize,  ///< y = (x - mean) / (std + eps), std with `ddof`
  layernorm,    ///< y = (x - mean) * rsqrt(var + eps) [* gamma + beta]
  rmsnorm,      ///< y = x * rsqrt(mean(x^2) + eps) [* gamma]
};

/// What to do when no tuned variant is stored for a problem. Every policy first looks for a
/// stored winner of the exact size, then of its bucket; what happens next is the policy's:
enum class Policy : std::uint8_t {
  tune,        ///< tune now (compile, benchmark, verify), store, launch (default). When another
               ///< process holds the tuning lease for the key, use the fallback until its winner lands.
  heuristic,   ///< built-in per-architecture choice, compiled once, never benchmarked
  cached,      ///< the nearest tuned shape, else the heuristic; never tunes (production)
  background,  ///< launch the fallback now; tune on a worker thread and swap the winner in
  record,      ///< as cached, and log the problem in the cache for a later `kvtune-tune --recorded`
};

/// Arguments of tuned_normalize. Pointers are device pointers; sizes and leading dimensions are in
/// elements. y may equal x (in place, with ld_y == ld_x). gamma and beta have x's dtype.
struct NormalizeArgs {
  const void* x = nullptr;
  void* y = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld_x = 0;  ///< 0 means cols
  std::int64_t ld_y = 0;  ///< 0 means cols
  DType dtype = DType::f32;
  NormMode mode = NormMode::standardize;
  float eps = 1e-5f;
  int ddof = 0;                  ///< standardize only: 0 (population) or 1 (torch.std)
  const void* gamma = nullptr;   ///< optional per-column scale
  const void* beta = nullptr;    ///< optional per-column shift (not with rmsnorm)
  float* mean = nullptr;         ///< optional per-row mean output (f32; not with rmsnorm)
  float* rstd = nullptr;         ///< optional per-row 1/(std+eps) or rsqrt(var+eps) output (f32)
  /// Optional caller-owned scratch of at least normalize_workspace_size(args) bytes, 256-byte
  /// aligned, used in stream order; only variants that split rows across blocks (wide rows) use
  /// one. Null: kvtune's stream-ordered pool.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  /// Fused residual add (pre-norm transformers): with `residual`, the rows normalized are
  /// s = x + residual (added in f32 and rounded to the dtype, as a separate add would), and
  /// `residual_out`, when given, receives s. Both have x's dtype and shape. y and residual_out may
  /// each equal x or residual (same leading dimension), never each other.
  const void* residual = nullptr;
  std::int64_t ld_residual = 0;      ///< 0 means cols
  void* residual_out = nullptr;      ///< optional s = x + residual (needs residual)
  std::int64_t ld_residual_out = 0;  ///< 0 means cols
};

/// Arguments of tuned_normalize_backward: the gradients of tuned_normalize with the same x, dtype,
/// mode, eps, ddof and gamma. From dy (the gradient of y) it computes dx, and the gradients of
/// gamma and beta, summed over all rows, when asked. The forward's saved mean and rstd may be
/// passed (both, or rstd alone for rmsnorm); without them the statistics are recomputed from x.
/// dx may equal dy (same leading dimension); no other output overlaps anything. dgamma/dbeta are
/// deterministic: per-row-group partials summed in a fixed order, in a workspace (see
/// Context::normalize_backward_workspace_size) taken from `workspace` or kvtune's pool.
struct NormalizeBackwardArgs {
  const void* x = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld_x = 0;   ///< 0 means cols
  std::int64_t ld_dy = 0;  ///< 0 means cols
  std::int64_t ld_dx = 0;  ///< 0 means cols
  DType dtype = DType::f32;
  NormMode mode = NormMode::standardize;
  float eps = 1e-5f;
  int ddof = 0;
  const void* gamma = nullptr;  ///< the forward's gamma, or null
  const float* mean = nullptr;  ///< the forward's saved mean (f32 per row), or null
  const float* rstd = nullptr;  ///< the forward's saved rstd (f32 per row), or null
  void* dgamma = nullptr;       ///< optional [cols] in x's dtype (needs gamma)
  void* dbeta = nullptr;        ///< optional [cols] in x's dtype (not with rmsnorm)
  /// Optional caller-owned scratch of at least normalize_backward_workspace_size(args) bytes,
  /// 256-byte aligned, used in stream order. Null: kvtune's stream-ordered pool.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  /// Fused residual add: after a forward with a residual, x here is its s = x + residual (what it
  /// normalized), and dx is the gradient of both x and residual. `dresidual_out`, when given, is
  /// the gradient flowing into s from its other uses (the forward's residual_out), added to dx.
  /// It has x's dtype and shape and may equal dx (same leading dimension).
  const void* dresidual_out = nullptr;
  std::int64_t ld_dresidual_out = 0;  ///< 0 means cols
};

/// Depthwise convolution layouts: 1D (NCL, NLC) and 2D (NCHW, NHWC). Tensors are dense.
enum class DwLayout : std::uint8_t { ncl, nlc, nchw, nhwc };
/// Depthwise convolution directions.
enum class DwDirection : std::uint8_t { forward, backward_data, backward_weight };
/// Activations fused into depthwise convolution (as PyTorch's silu, gelu(approximate="tanh"),
/// gelu(approximate="none") and relu; relu'(0) = 0).
enum class Activation : std::uint8_t { none, silu, gelu_tanh, gelu_erf, relu };

/// Arguments of tuned_dwconv (groups = channels, one filter per channel). Shapes are the input
/// x's: [n, c, l] / [n, l, c] in 1D (set h = 1, kernel_h = 1, stride_h = dilation_h = 1, no
/// top/bottom padding), [n, c, h, w] / [n, h, w, c] in 2D; w is [c, kernel_h, kernel_w]; the output
/// size follows PyTorch: (in + pad_before + pad_after - dilation * (kernel - 1) - 1) / stride + 1.
///   forward:          y = conv(x, weight) + bias        (x, weight, bias? -> y)
///   backward_data:    dx from dy and weight             (dy, weight -> dx)
///   backward_weight:  dweight (and dbias) from x and dy (x, dy -> dweight, dbias?)
/// With an activation (z = conv(x, weight) + bias):
///   forward:          y = act(z)                                   (x, weight, bias? -> y)
///   backward_data:    dx from dy * act'(z)                         (dy, x, weight, bias? -> dx)
///   backward_weight:  dweight (and dbias) from x and dy * act'(z)  (dy, x, weight, bias? -> dweight, dbias?)
/// where dy is the gradient with respect to y = act(z), and the backward directions recompute z from
/// x, weight and bias (pass the forward's bias when it had one: nothing can tell its absence), so a
/// training step keeps no pre-activation tensor. 1D calls run one fused kernel that forms
/// dy * act'(z) in registers: backward_weight without initial_state, and backward_data of stride 1
/// without states or seq_idx (both for (kernel_w - 1) x dilation_w up to 31; the weight gradient up
/// to 59). Other calls run two tuned kernels: the gradient prep dy * act'(z) into workspace, then the
/// plain backward direction on it (the workspace query counts both; the prep's part, the output's
/// size rounded up to 256 bytes, comes first).
struct DwConvArgs {
  DwDirection direction = DwDirection::forward;
  DwLayout layout = DwLayout::nchw;
  DType dtype = DType::f32;
  std::int64_t n = 0, c = 0, h = 1, w = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  /// 1D causal: pad_left = (kernel_w - 1) * dilation_w, pad_right = 0 (explicit pads must be 0).
  bool causal = false;
  /// backward_weight: false allows float atomics (faster, not bitwise reproducible).
  bool deterministic = true;
  /// Fused activation; see above for what each direction then computes and needs.
  Activation activation = Activation::none;
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dweight = nullptr;
  void* dbias = nullptr;
  /// Optional caller-owned device scratch for the calls that need one (backward_weight with split
  /// partials; backward directions with an activation), at least Context::dwconv_workspace_size(args)
  /// bytes, 256-byte aligned, used in stream order on the call's stream. Null: kvtune's own
  /// stream-ordered pool.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  /// States and packed sequences of the 1D causal convolution (causal = true, layout ncl or nlc,
  /// stride_w = 1; any other problem given one of these throws kvtune::Error naming it). A state is
  /// the S = (kernel_w - 1) * dilation_w inputs before a row's position 0, dense [n, c, S] in x's
  /// dtype, channel-first for both layouts: the layout of the decode step's state
  /// (DwConvDecodeArgs::state, dilation 1), so a prefill's final_state is the decode step's state as
  /// it is. With u = [initial_state, x] along the length (zeros when no initial state):
  ///   forward:          y[t] = act(bias + sum_k w[k] u[S + t - (K-1-k) dilation])
  ///   initial_state     (in)  forward, backward_weight (the taps that read it count in dweight), and
  ///                           backward_data with an activation (z is recomputed, as with bias)
  ///   final_state       (out) forward: the last S entries of u (x's last S inputs once w >= S)
  ///   dinitial_state    (out) backward_data: the gradient of initial_state
  ///   seq_idx           (in)  int32 [n, w], every direction: position t of a row reads position t'
  ///                           only when seq_idx[t'] == seq_idx[t] (zero otherwise), so no window
  ///                           crosses from one packed sequence into another (causal-conv1d's
  ///                           seq_idx). Not with initial_state or dinitial_state. With final_state,
  ///                           entries of an earlier sequence than the row's last position are zero
  ///                           (the state of the last sequence, which a decode step continues).
  /// The tuned kernel runs unchanged; a small tuned fix-up kernel (family dwconv_states) recomputes
  /// the outputs whose window reaches the initial state or crosses a sequence boundary and writes the
  /// state (bench/NOTES.md, "states and packed sequences"). Calls with seq_idx and no state run no
  /// fix-up where their kernel masks seq_idx's taps itself: forward (rows of 32 or more), and the
  /// fused 1D data and weight gradients (backward directions with an activation).
  const void* initial_state = nullptr;
  void* final_state = nullptr;
  void* dinitial_state = nullptr;
  const std::int32_t* seq_idx = nullptr;
};

/// Arguments of tuned_dwconv_decode: one decode step of a causal depthwise conv1d (Mamba-style
/// inference) with a rolling state of each sequence's previous inputs, updated in place. Dense
/// tensors, channel-first like DwLayout::ncl:
///   x      [batch, channels, seqlen] (seqlen 1: [batch, channels]), the new tokens
///   weight [channels, kernel_w], bias [channels] (optional), y as x (must not overlap any input)
///   state  [state_slots, channels, state_len], the inputs before each row's first new token
/// For token t of row b, y[b, :, t] = act(bias + sum_k weight[:, k] * u[t + k]) where u is the row's
/// previous kernel_w - 1 inputs followed by its new tokens (PyTorch's causal conv1d on that history).
///   - Without cache_seqlens the state holds exactly the last kernel_w - 1 inputs (state_len 0 or
///     kernel_w - 1) and is shifted by seqlen: afterwards it holds the last kernel_w - 1 inputs of u.
///   - With cache_seqlens (int32 [batch]) the state is a circular buffer: input position q lives at
///     q % state_len, cache_seqlens[b] is the position of row b's first new token, and the call
///     writes the new tokens at their positions (state_len >= kernel_w - 1 and >= seqlen). Positions
///     before 0 read as zero, so a fresh sequence needs no cleared slot. The caller advances
///     cache_seqlens itself.
///   - state_indices (int32 [batch], optional): the state slot of each row (continuous batching); a
///     negative index is padding: nothing of that row is written. Without it row b uses slot b
///     (state_slots >= batch). Two rows must not name the same slot (their updates would race).
/// Device-side values cannot be checked before the launch: a row whose index is >= state_slots or
/// whose cache_seqlens entry is negative gets NaN outputs and leaves the state alone.
///   - overlap_prologue: on sm_90 and later a step is a programmatic dependent launch whose grid
///     starts while the stream's previous kernel still runs and waits for it before its first read.
///     Set overlap_prologue and it reads weight, bias and state_indices before that wait (about 0.5 us
///     less a step on an H200): only correct when the kernel launched just before on the stream does
///     not write them, as in a decode loop whose weights are fixed and whose indices the host copies
///     in. x, the state and cache_seqlens are always read after the wait. No effect before sm_90.
struct DwConvDecodeArgs {
  DType dtype = DType::f32;
  std::int64_t batch = 0;
  std::int64_t channels = 0;
  std::int64_t seqlen = 1;       ///< new tokens per row, 1..64
  int kernel_w = 4;              ///< taps, 2..63
  std::int64_t state_len = 0;    ///< 0 means kernel_w - 1 (required without cache_seqlens)
  std::int64_t state_slots = 0;  ///< rows of state; 0 means batch
  Activation activation = Activation::none;
  const void* x = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  void* state = nullptr;
  const std::int32_t* cache_seqlens = nullptr;
  const std::int32_t* state_indices = nullptr;
  bool overlap_prologue = false;
};

/// Counters of a Context, for tests and observability. Every dispatch-table miss ends in exactly
/// one of the fallback_* steps or in `tunes`.
struct Counters {
  std::uint64_t calls = 0;             ///< tuned_* calls (a dwconv backward direction with an
                                       ///< activation counts its two problems)
  std::uint64_t table_hits = 0;        ///< served from the in-memory dispatch table
  std::uint64_t cache_hits = 0;        ///< served from the SQLite cache (module loaded from a stored cubin)
  std::uint64_t tunes = 0;             ///< problems tuned in process
  std::uint64_t heuristic_uses = 0;    ///< problems dispatched to the heuristic variant
  std::uint64_t compiles = 0;          ///< NVRTC compilations
  std::uint64_t variants_timed = 0;    ///< candidates benchmarked
  std::uint64_t variants_rejected = 0; ///< candidates that failed to compile, launch or verify
  std::uint64_t fallback_exact = 0;    ///< misses served by a stored winner of the exact size
  std::uint64_t fallback_bucket = 0;   ///< ... by a stored winner of the size's bucket
  std::uint64_t fallback_nearest = 0;  ///< ... by the nearest tuned shape (same op, dtype, layout)
  std::uint64_t fallback_heuristic = 0;  ///< ... by the heuristic variant
  std::uint64_t binaries_reused = 0;   ///< cubins a tuning took from the cache instead of NVRTC
  std::uint64_t lease_waits = 0;       ///< tunings left to another process holding the key's lease
  std::uint64_t background_swaps = 0;  ///< winners a background tuning swapped in
  std::uint64_t records = 0;           ///< problems logged by the record policy
  /// Stored entries not used because the cache row could not be trusted: a config that does not
  /// parse within the limits or is not valid for its problem, or a binary that is not the one this
  /// build compiles for the problem, config and architecture (recompiled instead).
  std::uint64_t cache_rows_rejected = 0;
};

/// Progress of an in-process tuning, after each candidate (for tools and progress bars).
struct TuningProgress {
  const char* op = "";
  std::string problem_key;
  int done = 0;         ///< candidates finished
  int total = 0;        ///< candidates chosen for this run
  std::string label;    ///< the candidate just finished
  std::string status;   ///< "ok", "compile_failed", "wrong_result", ...
  double median_ms = -1;
  bool final = false;   ///< the interleaved re-measure of a finalist
};

/// Logging sink: level is "warn", "info" or "debug".
using LogCallback = std::function<void(const char* level, const std::string& message)>;

/// Settings of a Context. Environment variables override the defaults (not explicit settings made
/// through a ContextOptions the caller builds): KVTUNE_POLICY, KVTUNE_CACHE, KVTUNE_LOG,
/// KVTUNE_BUDGET_VARIANTS, KVTUNE_BUDGET_MS, KVTUNE_BUCKETS, KVTUNE_COMPILE_WORKER.
struct ContextOptions {
  Policy policy = Policy::tune;
  /// SQLite cache file; "" for in-memory. Default: $XDG_CACHE_HOME/kvtune/cache.sqlite
  /// (else ~/.cache/kvtune/cache.sqlite).
  std::string cache_path;
  /// Log level: "" (off), "warn", "info", "debug".
  std::string log_level;
  /// Where log lines go; default: stderr, only when log_level is set.
  LogCallback log;
  /// Benchmark repetitions (median of this many timed batches) per candidate.
  int timing_samples = 15;
  /// Threads compiling candidates in parallel; 0 means all cores.
  int compile_threads = 0;
  /// Where tuning runs compile: "" finds kvtune-compile-worker beside the library (same folder, its
  /// parent, or ../libexec/kvtune/) and compiles in those helper processes, which scale with the
  /// cores where threads of one process do not; "off" compiles on threads of this process; any
  /// other value is the path of the worker executable. Without a worker, or when one fails, the
  /// compile runs in this process: the same cubin either way.
  std::string compile_worker;
  /// Search budget per problem: at most this many variants are compiled and timed (the cost
  /// model's best plus exploration, always with the heuristic); 0 means exhaustive.
  int budget_variants = 32;
  /// Time budget per tuning in milliseconds (no new candidate starts after it); 0: none.
  double budget_ms = 0;
  /// Batch bucketing (normalize rows, dwconv n): "pow2", "exact" or ascending sizes "1,8,64,512".
  std::string buckets = "pow2";
  /// Time candidates on hot L2 (inputs not rotated) instead of on data beyond L2.
  bool hot_l2 = false;
  /// Tune problems even when a tuned winner is stored; the stored winner is the incumbent and is
  /// replaced only by a variant faster beyond the measured noise.
  bool retune = false;
  /// Seconds a tuning process holds a key's lease before others may take over (a crashed tuner).
  double lease_seconds = 120;
  /// Called on the tuning thread after each candidate.
  std::function<void(const TuningProgress&)> on_progress;
  /// Test-only: adds one deliberately broken normalize variant, tried first, to every normalize
  /// tuning: "wrong" (a wrong result), "oob" (an out-of-bounds write: the CUDA context is lost),
  /// "hang" (one launch spins for about 8 s). "" (the default) adds none. Read from
  /// KVTUNE_TEST_FAULT only by builds configured with -DKVTUNE_TEST_HOOKS=ON.
  std::string test_fault;

  /// The defaults with the environment applied (what the process-wide context uses).
  static ContextOptions from_environment();
};

/// Device and cache state: dispatch tables, loaded modules, counters. Thread-safe.
class Context {
 public:
  explicit Context(ContextOptions options = ContextOptions::from_environment());
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// Normalizes rows on `stream` (see NormalizeArgs), tuning on the first call for a problem when
  /// the policy says so. Throws kvtune::Error on invalid arguments or a failed launch.
  void normalize(const NormalizeArgs& args, Stream stream = nullptr);
  /// Bytes of workspace the dispatched variant needs (0 unless it splits rows across blocks);
  /// tunes or loads as a call would.
  std::size_t normalize_workspace_size(const NormalizeArgs& args, Stream stream = nullptr);

  /// The gradients of normalize (see NormalizeBackwardArgs), tuned per problem as the forward.
  void normalize_backward(const NormalizeBackwardArgs& args, Stream stream = nullptr);
  /// The config label dispatched for these arguments (tunes or loads as a call would).
  std::string normalize_backward_variant(const NormalizeBackwardArgs& args, Stream stream = nullptr);
  /// Bytes of workspace the dispatched variant needs (0 without dgamma/dbeta unless it splits rows
  /// across blocks); tunes or loads as a call would.
  std::size_t normalize_backward_workspace_size(const NormalizeBackwardArgs& args, Stream stream = nullptr);

  /// Depthwise convolution on `stream` (see DwConvArgs). backward_weight with more than one split
  /// takes its scratch from args.workspace when given, else from the device's stream-ordered
  /// memory pool (cudaMallocAsync).
  void dwconv(const DwConvArgs& args, Stream stream = nullptr);
  /// The config label dispatched for these arguments (tunes or loads as a call would).
  std::string dwconv_variant(const DwConvArgs& args, Stream stream = nullptr);
  /// Bytes of workspace the variant dispatched for these arguments needs (0 for most); tunes or
  /// loads as a call would. Pass a buffer of this size as DwConvArgs::workspace.
  std::size_t dwconv_workspace_size(const DwConvArgs& args, Stream stream = nullptr);

  /// One decode step of a causal depthwise conv1d with its state (see DwConvDecodeArgs), tuned per
  /// problem like dwconv (the batch bucketed). Capture-safe once loaded: no allocation, no workspace.
  void dwconv_decode(const DwConvDecodeArgs& args, Stream stream = nullptr);
  /// The config label dispatched for these arguments (tunes or loads as a call would).
  std::string dwconv_decode_variant(const DwConvDecodeArgs& args, Stream stream = nullptr);

  Counters counters() const;
  const ContextOptions& options() const;
  /// The cache file in use ("" when in memory, e.g. after falling back from an unusable file).
  std::string cache_path_in_use() const;

  /// The config label dispatched for these arguments, tuning or loading as a call would; for
  /// tools and tests ("tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass").
  std::string normalize_variant(const NormalizeArgs& args, Stream stream = nullptr);

  /// Blocks until the background policy's queued tunings are done (tests, orderly shutdown).
  void wait_background();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// The process-wide context, created on first use from the environment.
Context& default_context();

/// tuned_normalize on the default context.
void tuned_normalize(const NormalizeArgs& args, Stream stream = nullptr);

/// Context::normalize_workspace_size on the default context.
std::size_t tuned_normalize_workspace_size(const NormalizeArgs& args, Stream stream = nullptr);

/// Context::normalize_backward on the default context.
void tuned_normalize_backward(const NormalizeBackwardArgs& args, Stream stream = nullptr);

/// Context::normalize_backward_workspace_size on the default context.
std::size_t tuned_normalize_backward_workspace_size(const NormalizeBackwardArgs& args, Stream stream = nullptr);

/// tuned_dwconv on the default context.
void tuned_dwconv(const DwConvArgs& args, Stream stream = nullptr);

/// Context::dwconv_decode on the default context.
void tuned_dwconv_decode(const DwConvDecodeArgs& args, Stream stream = nullptr);

/// Context::dwconv_workspace_size on the default context.
std::size_t tuned_dwconv_workspace_size(const DwConvArgs& args, Stream stream = nullptr);

/// Names for printing and parsing.
const char* to_string(DType dtype);
const char* to_string(NormMode mode);
const char* to_string(Policy policy);
const char* to_string(DwLayout layout);
const char* to_string(DwDirection direction);
const char* to_string(Activation activation);
/// Parses "tune", "heuristic", "cached", "background", "record"; throws kvtune::Error otherwise.
Policy parse_policy(const std::string& text);

/// Library version "major.minor.patch".
const char* version();

}  // namespace kvtune
