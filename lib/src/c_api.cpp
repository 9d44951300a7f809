// The C ABI (kvtune/kvtune_c.h) over the C++ API. Every entry point catches every exception and
// turns it into a status plus the thread's last error; the structs are copied field by field into
// their C++ twins, so the two sides can grow independently.

#include "kvtune/kvtune_c.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "kvtune/kvtune.h"

struct kvt_context {
  kvtune::Context* context = nullptr;
  std::unique_ptr<kvtune::Context> owned;  // null for the default context
};

namespace {

struct LastError {
  kvt_status status = KVT_OK;
  std::string message;
  std::string field;
};
thread_local LastError t_last_error;

kvt_status set_error(kvt_status status, std::string message, std::string field = {}) {
  t_last_error.status = status;
  t_last_error.message = std::move(message);
  t_last_error.field = std::move(field);
  return status;
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

// kvtune::Error carries no code: its context (op, field) and cause say what kind of failure it is.
kvt_status classify(const kvtune::Error& e) {
  const auto& c = e.context();
  const std::string& cause = e.cause();
  if (!c.field.empty()) return KVT_ERROR_INVALID_ARGUMENT;
  if (dynamic_cast<const kvtune::CompileError*>(&e) != nullptr || c.op == "nvrtc") return KVT_ERROR_COMPILE;
  if (c.op == "device") return contains(cause, "no CUDA device") ? KVT_ERROR_NO_GPU : KVT_ERROR_UNSUPPORTED_DEVICE;
  if (contains(cause, "being captured")) return KVT_ERROR_CAPTURE;
  if (contains(cause, "cudaErrorMemoryAllocation") || contains(cause, "out of memory")) return KVT_ERROR_OUT_OF_MEMORY;
  if (c.op == "cache") return KVT_ERROR_CACHE;
  if (contains(cause, "variants tried failed")) return KVT_ERROR_TUNING;
  if (contains(cause, "cuda") || contains(cause, "CUDA") || c.op == "module") return KVT_ERROR_CUDA;
  return KVT_ERROR_INTERNAL;
}

// Runs body, turning every exception into a status and the thread's last error.
template <class Body>
kvt_status guarded(Body&& body) noexcept {
  try {
    body();
    return KVT_OK;
  } catch (const kvtune::Error& e) {
    return set_error(classify(e), e.what(), e.context().field);
  } catch (const std::bad_alloc&) {
    return set_error(KVT_ERROR_OUT_OF_MEMORY, "kvtune: out of host memory");
  } catch (const std::exception& e) {
    return set_error(KVT_ERROR_INTERNAL, std::string("kvtune: ") + e.what());
  } catch (...) {
    return set_error(KVT_ERROR_INTERNAL, "kvtune: unknown exception");
  }
}

kvtune::Error invalid(const char* op, const char* field, const std::string& why) {
  return kvtune::Error(kvtune::Error::Context{op, "", "", "", field}, why);
}

// Copies a caller's struct of `struct_size` bytes over `out` (the defaults of the *_init function):
// an older (smaller) struct keeps the defaults of the fields it lacks; a newer (larger) one must
// have a zero tail, since this library cannot honour fields it does not know.
template <class T>
T read_struct(const T* in, T out, const char* op, const char* name) {
  if (in == nullptr) throw invalid(op, name, std::string(name) + " is a null pointer");
  const std::size_t size = in->struct_size;
  if (size < sizeof(std::uint32_t))
    throw invalid(op, "struct_size", std::string(name) + ".struct_size is " + std::to_string(size) + ": set it to sizeof");
  if (size > sizeof(T)) {
    const auto* tail = reinterpret_cast<const unsigned char*>(in) + sizeof(T);
    if (std::any_of(tail, tail + (size - sizeof(T)), [](unsigned char b) { return b != 0; }))
      throw invalid(op, "struct_size",
                    std::string(name) + " is larger than this kvtune knows (" + std::to_string(size) + " > " +
                        std::to_string(sizeof(T)) + " bytes) and sets fields it cannot honour: use a newer libkvtune");
  }
  std::memcpy(&out, in, std::min(size, sizeof(T)));
  return out;
}

template <class T, void (*Init)(T*)>
T defaults() {
  T t;
  Init(&t);
  return t;
}

template <class E>
E enum_field(std::int32_t value, std::int32_t last, const char* op, const char* field) {
  if (value < 0 || value > last)
    throw invalid(op, field, std::string(field) + " has no meaning for value " + std::to_string(value));
  return static_cast<E>(value);
}

kvtune::Context& context_of(kvt_context* context) {
  return context != nullptr ? *context->context : kvtune::default_context();
}

kvtune::NormalizeArgs to_cpp(const kvt_normalize_args* in) {
  static const kvt_normalize_args kDefaults = defaults<kvt_normalize_args, kvt_normalize_args_init>();
  const kvt_normalize_args a = read_struct(in, kDefaults, "normalize", "args");
  kvtune::NormalizeArgs out;
  out.dtype = enum_field<kvtune::DType>(a.dtype, KVT_BF16, "normalize", "dtype");
  out.mode = enum_field<kvtune::NormMode>(a.mode, KVT_NORM_RMSNORM, "normalize", "mode");
  out.x = a.x;
  out.y = a.y;
  out.rows = a.rows;
  out.cols = a.cols;
  out.ld_x = a.ld_x;
  out.ld_y = a.ld_y;
  out.eps = a.eps;
  out.ddof = a.ddof;
  out.gamma = a.gamma;
  out.beta = a.beta;
  out.mean = a.mean;
  out.rstd = a.rstd;
  out.workspace = a.workspace;
  out.workspace_bytes = a.workspace_bytes;
  out.residual = a.residual;
  out.ld_residual = a.ld_residual;
  out.residual_out = a.residual_out;
  out.ld_residual_out = a.ld_residual_out;
  return out;
}

kvtune::NormalizeBackwardArgs to_cpp(const kvt_normalize_backward_args* in) {
  static const kvt_normalize_backward_args kDefaults =
      defaults<kvt_normalize_backward_args, kvt_normalize_backward_args_init>();
  const kvt_normalize_backward_args a = read_struct(in, kDefaults, "normalize_backward", "args");
  kvtune::NormalizeBackwardArgs out;
  out.dtype = enum_field<kvtune::DType>(a.dtype, KVT_BF16, "normalize_backward", "dtype");
  out.mode = enum_field<kvtune::NormMode>(a.mode, KVT_NORM_RMSNORM, "normalize_backward", "mode");
  out.x = a.x;
  out.dy = a.dy;
  out.dx = a.dx;
  out.rows = a.rows;
  out.cols = a.cols;
  out.ld_x = a.ld_x;
  out.ld_dy = a.ld_dy;
  out.ld_dx = a.ld_dx;
  out.eps = a.eps;
  out.ddof = a.ddof;
  out.gamma = a.gamma;
  out.mean = a.mean;
  out.rstd = a.rstd;
  out.dgamma = a.dgamma;
  out.dbeta = a.dbeta;
  out.workspace = a.workspace;
  out.workspace_bytes = a.workspace_bytes;
  out.dresidual_out = a.dresidual_out;
  out.ld_dresidual_out = a.ld_dresidual_out;
  return out;
}

kvtune::DwConvArgs to_cpp(const kvt_dwconv_args* in) {
  static const kvt_dwconv_args kDefaults = defaults<kvt_dwconv_args, kvt_dwconv_args_init>();
  const kvt_dwconv_args a = read_struct(in, kDefaults, "dwconv", "args");
  kvtune::DwConvArgs out;
  out.direction = enum_field<kvtune::DwDirection>(a.direction, KVT_DW_BACKWARD_WEIGHT, "dwconv", "direction");
  out.layout = enum_field<kvtune::DwLayout>(a.layout, KVT_DW_NHWC, "dwconv", "layout");
  out.dtype = enum_field<kvtune::DType>(a.dtype, KVT_BF16, "dwconv", "dtype");
  out.n = a.n, out.c = a.c, out.h = a.h, out.w = a.w;
  out.kernel_h = a.kernel_h, out.kernel_w = a.kernel_w;
  out.stride_h = a.stride_h, out.stride_w = a.stride_w;
  out.dilation_h = a.dilation_h, out.dilation_w = a.dilation_w;
  out.pad_top = a.pad_top, out.pad_bottom = a.pad_bottom, out.pad_left = a.pad_left, out.pad_right = a.pad_right;
  out.causal = a.causal != 0;
  out.deterministic = a.deterministic != 0;
  out.x = a.x, out.weight = a.weight, out.bias = a.bias, out.y = a.y;
  out.dy = a.dy, out.dx = a.dx, out.dweight = a.dweight, out.dbias = a.dbias;
  out.workspace = a.workspace;
  out.workspace_bytes = a.workspace_bytes;
  out.activation = enum_field<kvtune::Activation>(a.activation, KVT_ACT_RELU, "dwconv", "activation");
  out.initial_state = a.initial_state, out.final_state = a.final_state, out.dinitial_state = a.dinitial_state;
  out.seq_idx = a.seq_idx;
  return out;
}

kvtune::DwConvDecodeArgs to_cpp(const kvt_dwconv_decode_args* in) {
  static const kvt_dwconv_decode_args kDefaults = defaults<kvt_dwconv_decode_args, kvt_dwconv_decode_args_init>();
  const kvt_dwconv_decode_args a = read_struct(in, kDefaults, "dwconv_decode", "args");
  kvtune::DwConvDecodeArgs out;
  out.dtype = enum_field<kvtune::DType>(a.dtype, KVT_BF16, "dwconv_decode", "dtype");
  out.activation = enum_field<kvtune::Activation>(a.activation, KVT_ACT_RELU, "dwconv_decode", "activation");
  out.batch = a.batch, out.channels = a.channels, out.seqlen = a.seqlen, out.kernel_w = a.kernel_w;
  out.state_len = a.state_len, out.state_slots = a.state_slots;
  out.x = a.x, out.weight = a.weight, out.bias = a.bias, out.y = a.y, out.state = a.state;
  out.cache_seqlens = a.cache_seqlens, out.state_indices = a.state_indices;
  out.overlap_prologue = a.overlap_prologue != 0;
  return out;
}

kvtune::Stream stream_of(void* stream) { return static_cast<kvtune::Stream>(stream); }

void write_label(const std::string& text, char* label, std::size_t capacity, std::size_t* length) {
  if (length != nullptr) *length = text.size();
  if (label != nullptr && capacity > 0) {
    const std::size_t n = std::min(text.size(), capacity - 1);
    std::memcpy(label, text.data(), n);
    label[n] = '\0';
  }
}

}  // namespace

extern "C" {

const char* kvt_version(void) { return kvtune::version(); }

uint32_t kvt_abi_version(void) { return KVT_ABI_VERSION; }

void kvt_context_options_init(kvt_context_options* options) {
  if (options == nullptr) return;
  *options = kvt_context_options{};
  options->struct_size = sizeof(kvt_context_options);
  options->policy = KVT_POLICY_DEFAULT;
  options->timing_samples = 0;
  options->compile_threads = -1;
  options->budget_variants = -1;
  options->hot_l2 = -1;
  options->budget_ms = -1;
  options->retune = -1;
  options->lease_seconds = 0;
}

void kvt_normalize_args_init(kvt_normalize_args* args) {
  if (args == nullptr) return;
  *args = kvt_normalize_args{};
  args->struct_size = sizeof(kvt_normalize_args);
  args->eps = 1e-5f;
}

void kvt_normalize_backward_args_init(kvt_normalize_backward_args* args) {
  if (args == nullptr) return;
  *args = kvt_normalize_backward_args{};
  args->struct_size = sizeof(kvt_normalize_backward_args);
  args->eps = 1e-5f;
}

void kvt_dwconv_args_init(kvt_dwconv_args* args) {
  if (args == nullptr) return;
  *args = kvt_dwconv_args{};
  args->struct_size = sizeof(kvt_dwconv_args);
  args->layout = KVT_DW_NCHW;
  args->h = 1;
  args->kernel_h = args->kernel_w = 1;
  args->stride_h = args->stride_w = 1;
  args->dilation_h = args->dilation_w = 1;
  args->deterministic = 1;
}

void kvt_dwconv_decode_args_init(kvt_dwconv_decode_args* args) {
  if (args == nullptr) return;
  *args = kvt_dwconv_decode_args{};
  args->struct_size = sizeof(kvt_dwconv_decode_args);
  args->seqlen = 1;
  args->kernel_w = 4;
}

kvt_status kvt_context_create(const kvt_context_options* options, kvt_context** out) {
  return guarded([&] {
    if (out == nullptr) throw invalid("context", "out", "out is a null pointer");
    *out = nullptr;
    kvtune::ContextOptions o = kvtune::ContextOptions::from_environment();
    if (options != nullptr) {
      const kvt_context_options s =
          read_struct(options, defaults<kvt_context_options, kvt_context_options_init>(), "context", "options");
      if (s.policy != KVT_POLICY_DEFAULT)
        o.policy = enum_field<kvtune::Policy>(s.policy, KVT_POLICY_RECORD, "context", "policy");
      if (s.cache_path != nullptr) o.cache_path = s.cache_path;
      if (s.log_level != nullptr) {
        const std::string level = s.log_level;
        if (!level.empty() && level != "warn" && level != "info" && level != "debug")
          throw invalid("context", "log_level", "log_level must be \"\", warn, info or debug, got '" + level + "'");
        o.log_level = level;
      }
      if (s.buckets != nullptr) o.buckets = s.buckets;
      if (s.timing_samples > 0) o.timing_samples = s.timing_samples;
      if (s.compile_threads >= 0) o.compile_threads = s.compile_threads;
      if (s.budget_variants >= 0) o.budget_variants = s.budget_variants;
      if (s.hot_l2 >= 0) o.hot_l2 = s.hot_l2 != 0;
      if (std::isnan(s.budget_ms)) throw invalid("context", "budget_ms", "budget_ms is NaN");
      if (std::isnan(s.lease_seconds)) throw invalid("context", "lease_seconds", "lease_seconds is NaN");
      if (s.budget_ms >= 0) o.budget_ms = s.budget_ms;
      if (s.retune >= 0) o.retune = s.retune != 0;
      if (s.lease_seconds > 0) o.lease_seconds = s.lease_seconds;
      if (s.compile_worker != nullptr) o.compile_worker = s.compile_worker;
    }
    auto handle = std::make_unique<kvt_context>();
    handle->owned = std::make_unique<kvtune::Context>(std::move(o));
    handle->context = handle->owned.get();
    *out = handle.release();
  });
}

void kvt_context_destroy(kvt_context* context) {
  if (context == nullptr || context->owned == nullptr) return;
  try {
    delete context;
  } catch (...) {  // a destructor should not throw; if one does, it must not cross the ABI
  }
}

kvt_status kvt_default_context(kvt_context** out) {
  return guarded([&] {
    if (out == nullptr) throw invalid("context", "out", "out is a null pointer");
    static kvt_context handle = [] {
      kvt_context h;
      h.context = &kvtune::default_context();  // refers to the default context, never owns it
      return h;
    }();
    *out = &handle;
  });
}

kvt_status kvt_normalize(kvt_context* context, const kvt_normalize_args* args, void* stream) {
  return guarded([&] { context_of(context).normalize(to_cpp(args), stream_of(stream)); });
}

kvt_status kvt_normalize_workspace_size(kvt_context* context, const kvt_normalize_args* args, void* stream,
                                        size_t* bytes) {
  return guarded([&] {
    if (bytes == nullptr) throw invalid("normalize", "bytes", "bytes is a null pointer");
    *bytes = 0;
    *bytes = context_of(context).normalize_workspace_size(to_cpp(args), stream_of(stream));
  });
}

kvt_status kvt_normalize_backward(kvt_context* context, const kvt_normalize_backward_args* args, void* stream) {
  return guarded([&] { context_of(context).normalize_backward(to_cpp(args), stream_of(stream)); });
}

kvt_status kvt_normalize_backward_workspace_size(kvt_context* context, const kvt_normalize_backward_args* args,
                                                 void* stream, size_t* bytes) {
  return guarded([&] {
    if (bytes == nullptr) throw invalid("normalize_backward", "bytes", "bytes is a null pointer");
    *bytes = 0;
    *bytes = context_of(context).normalize_backward_workspace_size(to_cpp(args), stream_of(stream));
  });
}

kvt_status kvt_normalize_backward_variant(kvt_context* context, const kvt_normalize_backward_args* args, void* stream,
                                          char* label, size_t capacity, size_t* length) {
  return guarded([&] {
    write_label(context_of(context).normalize_backward_variant(to_cpp(args), stream_of(stream)), label, capacity,
                length);
  });
}

kvt_status kvt_dwconv(kvt_context* context, const kvt_dwconv_args* args, void* stream) {
  return guarded([&] { context_of(context).dwconv(to_cpp(args), stream_of(stream)); });
}

kvt_status kvt_dwconv_workspace_size(kvt_context* context, const kvt_dwconv_args* args, void* stream,
                                     size_t* bytes) {
  return guarded([&] {
    if (bytes == nullptr) throw invalid("dwconv", "bytes", "bytes is a null pointer");
    *bytes = 0;
    *bytes = context_of(context).dwconv_workspace_size(to_cpp(args), stream_of(stream));
  });
}

kvt_status kvt_dwconv_decode(kvt_context* context, const kvt_dwconv_decode_args* args, void* stream) {
  return guarded([&] { context_of(context).dwconv_decode(to_cpp(args), stream_of(stream)); });
}

kvt_status kvt_dwconv_decode_variant(kvt_context* context, const kvt_dwconv_decode_args* args, void* stream,
                                     char* label, size_t capacity, size_t* length) {
  return guarded([&] {
    write_label(context_of(context).dwconv_decode_variant(to_cpp(args), stream_of(stream)), label, capacity, length);
  });
}

kvt_status kvt_normalize_variant(kvt_context* context, const kvt_normalize_args* args, void* stream, char* label,
                                 size_t capacity, size_t* length) {
  return guarded([&] {
    write_label(context_of(context).normalize_variant(to_cpp(args), stream_of(stream)), label, capacity, length);
  });
}

kvt_status kvt_dwconv_variant(kvt_context* context, const kvt_dwconv_args* args, void* stream, char* label,
                              size_t capacity, size_t* length) {
  return guarded([&] {
    write_label(context_of(context).dwconv_variant(to_cpp(args), stream_of(stream)), label, capacity, length);
  });
}

kvt_status kvt_get_counters(kvt_context* context, kvt_counters* out) {
  return guarded([&] {
    if (out == nullptr) throw invalid("context", "out", "out is a null pointer");
    const std::size_t size = out->struct_size;
    if (size < offsetof(kvt_counters, calls))
      throw invalid("context", "struct_size", "out.struct_size is " + std::to_string(size) + ": set it to sizeof");
    const kvtune::Counters c = context_of(context).counters();
    kvt_counters full{};
    full.struct_size = static_cast<std::uint32_t>(std::min(size, sizeof(kvt_counters)));
    full.calls = c.calls, full.table_hits = c.table_hits, full.cache_hits = c.cache_hits, full.tunes = c.tunes;
    full.heuristic_uses = c.heuristic_uses, full.compiles = c.compiles, full.variants_timed = c.variants_timed;
    full.variants_rejected = c.variants_rejected, full.fallback_exact = c.fallback_exact;
    full.fallback_bucket = c.fallback_bucket, full.fallback_nearest = c.fallback_nearest;
    full.fallback_heuristic = c.fallback_heuristic, full.binaries_reused = c.binaries_reused;
    full.lease_waits = c.lease_waits, full.background_swaps = c.background_swaps, full.records = c.records;
    full.cache_rows_rejected = c.cache_rows_rejected;
    // An older caller gets the fields it knows; a newer one's extra fields are left as it set them.
    std::memcpy(out, &full, std::min(size, sizeof(kvt_counters)));
  });
}

kvt_status kvt_wait_background(kvt_context* context) {
  return guarded([&] { context_of(context).wait_background(); });
}

const char* kvt_last_error_message(void) { return t_last_error.message.c_str(); }

const char* kvt_last_error_field(void) { return t_last_error.field.c_str(); }

kvt_status kvt_last_error_status(void) { return t_last_error.status; }

const char* kvt_status_name(std::int32_t status) {
  // An int, not kvt_status: a value outside the enumeration is undefined behaviour in C++.
  switch (status) {
    case KVT_OK: return "KVT_OK";
    case KVT_ERROR_INVALID_ARGUMENT: return "KVT_ERROR_INVALID_ARGUMENT";
    case KVT_ERROR_NO_GPU: return "KVT_ERROR_NO_GPU";
    case KVT_ERROR_UNSUPPORTED_DEVICE: return "KVT_ERROR_UNSUPPORTED_DEVICE";
    case KVT_ERROR_CUDA: return "KVT_ERROR_CUDA";
    case KVT_ERROR_OUT_OF_MEMORY: return "KVT_ERROR_OUT_OF_MEMORY";
    case KVT_ERROR_COMPILE: return "KVT_ERROR_COMPILE";
    case KVT_ERROR_CACHE: return "KVT_ERROR_CACHE";
    case KVT_ERROR_CAPTURE: return "KVT_ERROR_CAPTURE";
    case KVT_ERROR_TUNING: return "KVT_ERROR_TUNING";
    case KVT_ERROR_INTERNAL: return "KVT_ERROR_INTERNAL";
  }
  return "KVT_ERROR_UNKNOWN";
}

}  // extern "C"
