#ifndef KVTUNE_KVTUNE_C_H_
#define KVTUNE_KVTUNE_C_H_
/** @file kvtune_c.h
 * kvtune's stable C ABI: plain C types only, no exception crosses it. What the Python package
 * (ctypes) and any other FFI link.
 *
 * Conventions:
 * - Every function that can fail returns a kvt_status; on failure kvt_last_error_message() and
 *   kvt_last_error_field() describe it. Both are thread-local and stay valid until the thread's next
 *   failing kvtune call; a successful call leaves them as they were.
 * - Every struct passed in or out starts with `struct_size`: set it to sizeof(the struct) (the
 *   *_init functions do). The library reads the fields it knows from a smaller (older) struct and
 *   refuses a larger one whose unknown tail is not zero (KVT_ERROR_INVALID_ARGUMENT, field
 *   "struct_size"), so fields can be appended without breaking old callers.
 * - A null kvt_context* means the process-wide default context (created from the environment on
 *   first use). Streams are cudaStream_t (CUstream) passed as void*; null is the legacy default stream.
 * - Pointers in the args structs are device pointers, sizes are in elements; the semantics are those
 *   of kvtune::NormalizeArgs and kvtune::DwConvArgs (kvtune/kvtune.h), field for field.
 *
 * @code
 *   kvt_normalize_args a;
 *   kvt_normalize_args_init(&a);
 *   a.x = d_x; a.y = d_y; a.rows = 4096; a.cols = 1024; a.mode = KVT_NORM_LAYERNORM;
 *   if (kvt_normalize(NULL, &a, stream) != KVT_OK) fprintf(stderr, "%s\n", kvt_last_error_message());
 * @endcode
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KVT_API __declspec(dllexport)
#else
#define KVT_API __attribute__((visibility("default")))
#endif

/** Bumped when a function's meaning changes; appending struct fields does not bump it. */
#define KVT_ABI_VERSION 1

/** Status codes. New codes may be added; treat unknown nonzero values as errors. */
typedef enum kvt_status {
  KVT_OK = 0,
  KVT_ERROR_INVALID_ARGUMENT = 1,  /**< a field is invalid: kvt_last_error_field() names it */
  KVT_ERROR_NO_GPU = 2,            /**< no CUDA device or driver */
  KVT_ERROR_UNSUPPORTED_DEVICE = 3,/**< a device kvtune does not support (compute capability < 8.0) */
  KVT_ERROR_CUDA = 4,              /**< a CUDA runtime or driver call failed (launch, memory, module) */
  KVT_ERROR_OUT_OF_MEMORY = 5,     /**< host or device allocation failed */
  KVT_ERROR_COMPILE = 6,           /**< NVRTC failed to compile a variant kvtune needed */
  KVT_ERROR_CACHE = 7,             /**< the SQLite cache failed in a way kvtune could not route around */
  KVT_ERROR_CAPTURE = 8,           /**< the stream is being captured and the problem is not loaded yet */
  KVT_ERROR_TUNING = 9,            /**< every variant tried failed */
  KVT_ERROR_INTERNAL = 10          /**< anything else (a bug: please report the message) */
} kvt_status;

typedef enum kvt_dtype { KVT_F32 = 0, KVT_F16 = 1, KVT_BF16 = 2 } kvt_dtype;
typedef enum kvt_norm_mode { KVT_NORM_STANDARDIZE = 0, KVT_NORM_LAYERNORM = 1, KVT_NORM_RMSNORM = 2 } kvt_norm_mode;
typedef enum kvt_policy {
  KVT_POLICY_DEFAULT = -1,  /**< the environment's (KVTUNE_POLICY), else tune */
  KVT_POLICY_TUNE = 0,
  KVT_POLICY_HEURISTIC = 1,
  KVT_POLICY_CACHED = 2,
  KVT_POLICY_BACKGROUND = 3,
  KVT_POLICY_RECORD = 4
} kvt_policy;
typedef enum kvt_dw_layout { KVT_DW_NCL = 0, KVT_DW_NLC = 1, KVT_DW_NCHW = 2, KVT_DW_NHWC = 3 } kvt_dw_layout;
typedef enum kvt_dw_direction {
  KVT_DW_FORWARD = 0,
  KVT_DW_BACKWARD_DATA = 1,
  KVT_DW_BACKWARD_WEIGHT = 2
} kvt_dw_direction;
typedef enum kvt_activation {
  KVT_ACT_NONE = 0,
  KVT_ACT_SILU = 1,
  KVT_ACT_GELU_TANH = 2,
  KVT_ACT_GELU_ERF = 3,
  KVT_ACT_RELU = 4
} kvt_activation;

/** Opaque context: dispatch tables, loaded modules, cache connection, counters. Thread-safe. */
typedef struct kvt_context kvt_context;

/** Settings of a new context. kvt_context_options_init sets every field to "default", which means
 *  the environment's value where one is set (KVTUNE_POLICY, KVTUNE_CACHE, ...), else the library
 *  default; fields set explicitly win over the environment. */
typedef struct kvt_context_options {
  uint32_t struct_size;
  int32_t policy;           /**< kvt_policy */
  const char* cache_path;   /**< NULL: default; "": in-memory cache */
  const char* log_level;    /**< NULL: default; "", "warn", "info", "debug" (to stderr) */
  const char* buckets;      /**< NULL: default; "pow2", "exact" or "1,8,64" */
  int32_t timing_samples;   /**< <= 0: default (15) */
  int32_t compile_threads;  /**< < 0: default (0, all cores) */
  int32_t budget_variants;  /**< < 0: default (32); 0: exhaustive */
  int32_t hot_l2;           /**< < 0: default (no); 0 or 1 */
  double budget_ms;         /**< < 0: default (0, none) */
  int32_t retune;           /**< < 0: default (no); 0 or 1 */
  int32_t reserved0;        /**< 0 */
  double lease_seconds;     /**< <= 0: default (120) */
  const char* compile_worker; /**< NULL: default; "": beside the library; "off"; or a path (ContextOptions) */
} kvt_context_options;

/** Arguments of kvt_normalize (kvtune::NormalizeArgs). */
typedef struct kvt_normalize_args {
  uint32_t struct_size;
  int32_t dtype;            /**< kvt_dtype */
  int32_t mode;             /**< kvt_norm_mode */
  int32_t ddof;             /**< standardize: 0 or 1 */
  float eps;                /**< default 1e-5 */
  int32_t reserved0;        /**< 0 */
  const void* x;
  void* y;                  /**< may equal x (in place, same leading dimension) */
  int64_t rows;
  int64_t cols;
  int64_t ld_x;             /**< 0: cols */
  int64_t ld_y;             /**< 0: cols */
  const void* gamma;        /**< optional, x's dtype */
  const void* beta;         /**< optional, x's dtype, not with rmsnorm */
  float* mean;              /**< optional per-row f32 output, not with rmsnorm */
  float* rstd;              /**< optional per-row f32 output */
  void* workspace;          /**< optional caller scratch (kvt_normalize_workspace_size bytes, 256-byte
                                 aligned; only variants that split wide rows use it); NULL: kvtune's pool */
  size_t workspace_bytes;
  /* Fused residual add (appended in 0.1; older callers' smaller struct_size leaves them NULL). */
  const void* residual;     /**< optional: the rows normalized are s = x + residual (x's dtype) */
  int64_t ld_residual;      /**< 0: cols */
  void* residual_out;       /**< optional output s (needs residual); y and residual_out may each equal
                                 x or residual (same leading dimension), never each other */
  int64_t ld_residual_out;  /**< 0: cols */
} kvt_normalize_args;

/** Arguments of kvt_normalize_backward (kvtune::NormalizeBackwardArgs). */
typedef struct kvt_normalize_backward_args {
  uint32_t struct_size;
  int32_t dtype;            /**< kvt_dtype */
  int32_t mode;             /**< kvt_norm_mode */
  int32_t ddof;             /**< standardize: 0 or 1, as in the forward */
  float eps;                /**< as in the forward; default 1e-5 */
  int32_t reserved0;        /**< 0 */
  const void* x;            /**< the forward's input */
  const void* dy;           /**< the gradient of the forward's output */
  void* dx;                 /**< may equal dy (same leading dimension) */
  int64_t rows;
  int64_t cols;
  int64_t ld_x;             /**< 0: cols */
  int64_t ld_dy;            /**< 0: cols */
  int64_t ld_dx;            /**< 0: cols */
  const void* gamma;        /**< the forward's gamma, or NULL */
  const float* mean;        /**< the forward's saved mean, or NULL (recomputed) */
  const float* rstd;        /**< the forward's saved rstd, or NULL (recomputed) */
  void* dgamma;             /**< optional [cols] output in x's dtype (needs gamma) */
  void* dbeta;              /**< optional [cols] output in x's dtype (not rmsnorm) */
  void* workspace;          /**< optional caller scratch (kvt_normalize_backward_workspace_size bytes,
                                 256-byte aligned); NULL: kvtune's own pool */
  size_t workspace_bytes;
  /* Fused residual add: x is the forward's s = x + residual, dx the gradient of both. */
  const void* dresidual_out; /**< optional gradient flowing into the forward's residual_out, added
                                  to dx (may equal dx, same leading dimension) */
  int64_t ld_dresidual_out;  /**< 0: cols */
} kvt_normalize_backward_args;

/** Arguments of kvt_dwconv (kvtune::DwConvArgs). */
typedef struct kvt_dwconv_args {
  uint32_t struct_size;
  int32_t direction;        /**< kvt_dw_direction */
  int32_t layout;           /**< kvt_dw_layout */
  int32_t dtype;            /**< kvt_dtype */
  int64_t n, c, h, w;       /**< the input x's shape; 1D: h = 1 */
  int32_t kernel_h, kernel_w;
  int32_t stride_h, stride_w;
  int32_t dilation_h, dilation_w;
  int32_t pad_top, pad_bottom, pad_left, pad_right;
  int32_t causal;           /**< 1D: left pad (kernel_w - 1) * dilation_w, explicit pads 0 */
  int32_t deterministic;    /**< backward_weight: 0 allows float atomics; default 1 */
  const void* x;
  const void* weight;       /**< [c, kernel_h, kernel_w] */
  const void* bias;
  void* y;
  const void* dy;
  void* dx;
  void* dweight;
  void* dbias;
  void* workspace;          /**< optional caller scratch (kvt_dwconv_workspace_size bytes, 256-byte
                                 aligned), used in stream order; NULL: kvtune's own pool */
  size_t workspace_bytes;
  int32_t activation;       /**< kvt_activation (kvtune::DwConvArgs::activation: what each direction
                                 then computes and needs); default KVT_ACT_NONE */
  int32_t reserved1;        /**< 0 */
  /* States and packed sequences of the causal conv1d (kvtune::DwConvArgs: [n, c, (kernel_w - 1) *
     dilation_w] states in x's dtype, channel-first; seq_idx int32 [n, w]); NULL: none. */
  const void* initial_state;
  void* final_state;        /**< forward output: the last inputs, the decode step's state */
  void* dinitial_state;     /**< backward_data output: the initial state's gradient */
  const int32_t* seq_idx;   /**< packed sequences: no window crosses a change of seq_idx */
} kvt_dwconv_args;

/** Arguments of kvt_dwconv_decode (kvtune::DwConvDecodeArgs): one decode step of a causal depthwise
 *  conv1d with a rolling state, updated in place. x [batch, channels, seqlen], weight [channels,
 *  kernel_w], state [state_slots, channels, state_len]; cache_seqlens and state_indices are int32
 *  [batch] device arrays or NULL. */
typedef struct kvt_dwconv_decode_args {
  uint32_t struct_size;
  int32_t dtype;            /**< kvt_dtype */
  int64_t batch;
  int64_t channels;
  int64_t seqlen;           /**< new tokens per row, 1..64; default 1 */
  int32_t kernel_w;         /**< 2..63; default 4 */
  int32_t activation;       /**< kvt_activation; default KVT_ACT_NONE */
  int64_t state_len;        /**< 0: kernel_w - 1 (required without cache_seqlens) */
  int64_t state_slots;      /**< 0: batch */
  const void* x;
  const void* weight;
  const void* bias;         /**< optional */
  void* y;
  void* state;
  const int32_t* cache_seqlens;  /**< optional: circular state, each row's first new position */
  const int32_t* state_indices;  /**< optional: each row's state slot; negative = padding */
  /* Appended in 0.1 (older callers' smaller struct_size leave it 0). */
  int32_t overlap_prologue; /**< nonzero: weight, bias and state_indices may be read before the
                                 stream's previous kernel ends (DwConvDecodeArgs::overlap_prologue) */
} kvt_dwconv_decode_args;
/** Counters of a context (kvtune::Counters). */
typedef struct kvt_counters {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t calls, table_hits, cache_hits, tunes, heuristic_uses, compiles, variants_timed, variants_rejected;
  uint64_t fallback_exact, fallback_bucket, fallback_nearest, fallback_heuristic, binaries_reused, lease_waits;
  uint64_t background_swaps, records;
  uint64_t cache_rows_rejected; /**< cache rows (configs, binaries) not trusted and not used */
} kvt_counters;

/** Library version "major.minor.patch" and KVT_ABI_VERSION of the library loaded. */
KVT_API const char* kvt_version(void);
KVT_API uint32_t kvt_abi_version(void);

/** Sets struct_size and every field to its default. */
KVT_API void kvt_context_options_init(kvt_context_options* options);
KVT_API void kvt_normalize_args_init(kvt_normalize_args* args);
KVT_API void kvt_dwconv_args_init(kvt_dwconv_args* args);
KVT_API void kvt_normalize_backward_args_init(kvt_normalize_backward_args* args);
KVT_API void kvt_dwconv_decode_args_init(kvt_dwconv_decode_args* args);

/** Creates a context (options NULL: the environment's defaults). *out is NULL on failure. */
KVT_API kvt_status kvt_context_create(const kvt_context_options* options, kvt_context** out);
/** Destroys a context made by kvt_context_create (NULL and the default context: no-op). */
KVT_API void kvt_context_destroy(kvt_context* context);
/** The process-wide default context (created on first use; never destroyed). */
KVT_API kvt_status kvt_default_context(kvt_context** out);

/** Row normalization on `stream` (kvtune::Context::normalize). */
KVT_API kvt_status kvt_normalize(kvt_context* context, const kvt_normalize_args* args, void* stream);

/** Bytes of workspace the variant dispatched for `args` needs (0 unless it splits rows across
 *  blocks); tunes or loads as a call would. The workspace fields of args are ignored. */
KVT_API kvt_status kvt_normalize_workspace_size(kvt_context* context, const kvt_normalize_args* args, void* stream,
                                                size_t* bytes);

/** The gradients of kvt_normalize: dx, and dgamma/dbeta when asked (kvtune::Context::normalize_backward). */
KVT_API kvt_status kvt_normalize_backward(kvt_context* context, const kvt_normalize_backward_args* args, void* stream);
/** Bytes of workspace the backward variant dispatched for `args` needs (0 without dgamma/dbeta,
 *  unless it splits rows across blocks). */
KVT_API kvt_status kvt_normalize_backward_workspace_size(kvt_context* context, const kvt_normalize_backward_args* args,
                                                         void* stream, size_t* bytes);
KVT_API kvt_status kvt_normalize_backward_variant(kvt_context* context, const kvt_normalize_backward_args* args,
                                                  void* stream, char* label, size_t capacity, size_t* length);

/** Depthwise convolution on `stream` (kvtune::Context::dwconv), any direction. */
KVT_API kvt_status kvt_dwconv(kvt_context* context, const kvt_dwconv_args* args, void* stream);
/** One decode step of a causal depthwise conv1d with its state (kvtune::Context::dwconv_decode). */
KVT_API kvt_status kvt_dwconv_decode(kvt_context* context, const kvt_dwconv_decode_args* args, void* stream);
KVT_API kvt_status kvt_dwconv_decode_variant(kvt_context* context, const kvt_dwconv_decode_args* args, void* stream,
                                             char* label, size_t capacity, size_t* length);
/** Bytes of workspace the variant dispatched for `args` needs (0 for most problems); tunes or
 *  loads as a call would. The workspace fields of args are ignored. */
KVT_API kvt_status kvt_dwconv_workspace_size(kvt_context* context, const kvt_dwconv_args* args, void* stream,
                                             size_t* bytes);

/** The config label dispatched for args, tuning or loading as a call would. Writes at most
 *  `capacity` bytes including the terminating NUL into `label` (truncating) and the full length
 *  (without NUL) into *length when length is not NULL. */
KVT_API kvt_status kvt_normalize_variant(kvt_context* context, const kvt_normalize_args* args, void* stream,
                                         char* label, size_t capacity, size_t* length);
KVT_API kvt_status kvt_dwconv_variant(kvt_context* context, const kvt_dwconv_args* args, void* stream,
                                      char* label, size_t capacity, size_t* length);

/** Reads the context's counters into *out (set out->struct_size first, or use sizeof). */
KVT_API kvt_status kvt_get_counters(kvt_context* context, kvt_counters* out);
/** Blocks until the background policy's queued tunings are done. */
KVT_API kvt_status kvt_wait_background(kvt_context* context);

/** The calling thread's last error: message ("" when none), the offending argument field ("" when
 *  the error is not about one field), and its status. */
KVT_API const char* kvt_last_error_message(void);
KVT_API const char* kvt_last_error_field(void);
KVT_API kvt_status kvt_last_error_status(void);
/** A short name for a status ("KVT_ERROR_CUDA"). */
KVT_API const char* kvt_status_name(int32_t status);  /* an int: any value, also one no kvt_status names */

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // KVTUNE_KVTUNE_C_H_
