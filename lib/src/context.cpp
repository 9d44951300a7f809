// Context: the path of one call. Validate -> key -> lock-free table -> launch. A miss goes down the
// fallback ladder (fallback_ladder.h). The parts: context_state.h (what they share), devices.h
// (per-device state and pools), fallback_ladder.h, tuning_run.h, background_worker.h.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/cuda_check.h"
#include "core/device.h"
#include "kvtune/kvtune.h"
#include "lib/src/background_worker.h"
#include "lib/src/context_state.h"
#include "lib/src/devices.h"
#include "lib/src/fallback_ladder.h"
#include "lib/src/families.h"

namespace kvtune {

struct Context::Impl {
  explicit Impl(ContextOptions o)
      : state(std::move(o)),
        devices(state),
        worker([this](const char* level, const std::string& message) { state.log(level, message); }),
        ladder(state, worker) {}
  ~Impl() { worker.stop(); }  // before the ladder and the devices its jobs use go

  detail::ContextState state;
  detail::Devices devices;
  detail::BackgroundWorker worker;
  detail::FallbackLadder ladder;

  // The hot path: key -> lock-free table -> entry. Misses go down the ladder.
  template <class F>
  const detail::Entry<F>& entry_for(const typename F::Problem& problem, std::int64_t batch, Stream stream) {
    int ordinal = 0;
    const cudaError_t status = cudaGetDevice(&ordinal);
    if (status != cudaSuccess) detail::device_count();  // throws the clear "no CUDA device" error
    detail::DeviceState& dev = devices.get(ordinal);
    ++state.counters.calls;
    auto& table = dev.table<F>();
    if (dev.exact_published<F>().load(std::memory_order_acquire) && !state.buckets.exact())
      if (const detail::Entry<F>* entry = table.find(F::with_batch(problem, batch, true))) {
        ++state.counters.table_hits;
        return *entry;
      }
    if (const detail::Entry<F>* entry = table.find(problem)) {
      ++state.counters.table_hits;
      if (entry->provisional) ladder.recheck<F>(dev, problem, *entry);
      return *entry;
    }
    return ladder.resolve<F>(dev, problem, batch, stream);
  }
};

Context::Context(ContextOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Context::~Context() = default;

namespace {

// The scratch of one call: the caller's workspace when given (a framework's allocator owns all
// memory), checked for size and alignment, else an allocation from the device's stream-ordered
// pool, freed in stream order when this goes: no synchronization, capture-safe (a captured
// allocation becomes a graph memory node).
class CallWorkspace {
 public:
  // `where` makes the call's Error::Context, only when an error is thrown.
  template <class Where>
  CallWorkspace(Context::Impl& impl, std::size_t bytes, void* given, std::size_t given_bytes, cudaStream_t stream,
                const Where& where, const char* size_query)
      : stream_(stream) {
    if (bytes == 0) return;
    if (given != nullptr) {
      Error::Context at = where();
      at.field = "workspace_bytes";
      if (given_bytes < bytes)
        throw Error(at, fmt::format("the workspace holds {} bytes; this variant needs {} ({})", given_bytes, bytes,
                                    size_query));
      at.field = "workspace";
      if (reinterpret_cast<std::uintptr_t>(given) % 256 != 0) throw Error(at, "workspace must be aligned to 256 bytes");
      pointer_ = given;
      return;
    }
    int ordinal = 0;
    if (cudaError_t s = cudaGetDevice(&ordinal); s != cudaSuccess) detail::cuda_check(s, "cudaGetDevice", where());
    const cudaMemPool_t pool = impl.devices.workspace_pool(ordinal);
    const cudaError_t s = pool != nullptr ? cudaMallocFromPoolAsync(&pointer_, bytes, pool, stream)
                                          : cudaMallocAsync(&pointer_, bytes, stream);
    if (s != cudaSuccess) detail::cuda_check(s, "cudaMallocAsync (workspace)", where());
    owned_ = true;
  }
  ~CallWorkspace() {
    if (owned_) cudaFreeAsync(pointer_, stream_);
  }
  CallWorkspace(const CallWorkspace&) = delete;
  CallWorkspace& operator=(const CallWorkspace&) = delete;
  void* get() const { return pointer_; }

 private:
  cudaStream_t stream_;
  void* pointer_ = nullptr;
  bool owned_ = false;
};

}  // namespace

void Context::normalize(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->state.buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  // The error context is built only on an error: the cached path formats no strings.
  const auto where = [&] { return Error::Context{"normalize", problem.key(), entry.config.label(), "", ""}; };
  // Split rows only: the slices' partial statistics (normalize_workspace_size).
  const CallWorkspace workspace(*impl_, normalize::geometry(problem, entry.config, args.rows).workspace_bytes,
                                args.workspace, args.workspace_bytes, cuda_stream, where, "normalize_workspace_size");
  const auto ld = [&args](std::int64_t v) { return v == 0 ? args.cols : v; };
  const normalize::LaunchArgs launch_args{args.x,
                                          args.y,
                                          args.gamma,
                                          args.beta,
                                          args.mean,
                                          args.rstd,
                                          args.rows,
                                          ld(args.ld_x),
                                          ld(args.ld_y),
                                          args.eps,
                                          args.ddof,
                                          workspace.get(),
                                          args.residual,
                                          args.residual_out,
                                          ld(args.ld_residual),
                                          ld(args.ld_residual_out)};
  const cudaError_t status = normalize::launch(entry.kernel, problem, entry.config, launch_args, cuda_stream);
  if (status != cudaSuccess)
    detail::cuda_check(status,
                       entry.config.cooperative ? "cooperative launch (a row's slices must all be co-resident)"
                                                : "cudaLaunchKernel",
                       where());
}

std::size_t Context::normalize_workspace_size(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->state.buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  return normalize::geometry(problem, entry.config, args.rows).workspace_bytes;
}

std::string Context::normalize_variant(const NormalizeArgs& args, Stream stream) {
  normalize::validate(args);
  return impl_->entry_for<detail::NormalizeFamily>(normalize::make_problem(args, impl_->state.buckets), args.rows, stream)
      .config.label();
}


void Context::normalize_backward(const NormalizeBackwardArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->state.buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  const auto where = [&] { return Error::Context{"normalize_backward", problem.key(), entry.config.label(), "", ""}; };
  const CallWorkspace workspace(*impl_, normalize::geometry(problem, entry.config, args.rows).workspace_bytes,
                                args.workspace, args.workspace_bytes, cuda_stream, where,
                                "normalize_backward_workspace_size");
  const normalize::BackwardLaunchArgs launch_args{args.x,
                                                  args.dy,
                                                  args.dx,
                                                  args.gamma,
                                                  args.mean,
                                                  args.rstd,
                                                  args.dgamma,
                                                  args.dbeta,
                                                  workspace.get(),
                                                  args.rows,
                                                  args.ld_x == 0 ? args.cols : args.ld_x,
                                                  args.ld_dy == 0 ? args.cols : args.ld_dy,
                                                  args.ld_dx == 0 ? args.cols : args.ld_dx,
                                                  args.eps,
                                                  args.ddof,
                                                  args.dresidual_out,
                                                  args.ld_dresidual_out == 0 ? args.cols : args.ld_dresidual_out};
  const cudaError_t status = normalize::launch_backward(entry.kernel, problem, entry.config, launch_args, cuda_stream);
  if (status != cudaSuccess)
    detail::cuda_check(status,
                       entry.config.cooperative ? "cooperative launch (the grid's blocks must all be co-resident)"
                                                : "cudaLaunchKernel",
                       where());
}

std::string Context::normalize_backward_variant(const NormalizeBackwardArgs& args, Stream stream) {
  normalize::validate(args);
  return impl_->entry_for<detail::NormalizeFamily>(normalize::make_problem(args, impl_->state.buckets), args.rows, stream)
      .config.label();
}

std::size_t Context::normalize_backward_workspace_size(const NormalizeBackwardArgs& args, Stream stream) {
  normalize::validate(args);
  const normalize::Problem problem = normalize::make_problem(args, impl_->state.buckets);
  const auto& entry = impl_->entry_for<detail::NormalizeFamily>(problem, args.rows, stream);
  return normalize::geometry(problem, entry.config, args.rows).workspace_bytes;
}

void Context::dwconv(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  dwconv_states::validate(args);
  const dwconv::Problem problem = dwconv::make_problem(args, impl_->state.buckets);
  // States and seq_idx: the fix-up problems around the unchanged tuned kernels (dwconv_states).
  const dwconv_states::Plan plan = dwconv_states::make_plan(args, impl_->state.buckets);
  using States = detail::DwConvStatesFamily;
  const auto* states_prep = plan.prep ? &impl_->entry_for<States>(*plan.prep, args.n, stream) : nullptr;
  const auto* states_fix = plan.fix ? &impl_->entry_for<States>(*plan.fix, args.n, stream) : nullptr;
  // backward_data / backward_weight with an activation: the gradient prep dy * act'(z) into the front
  // of the workspace first, then the plain backward problem on it in place of dy (two tuned problems).
  const std::optional<dwconv::Problem> prep = dwconv::gradient_prep_problem(args, impl_->state.buckets);
  const auto* prep_entry = prep ? &impl_->entry_for<detail::DwConvFamily>(*prep, args.n, stream) : nullptr;
  const auto& entry = impl_->entry_for<detail::DwConvFamily>(problem, args.n, stream);
  dwconv::LaunchArgs launch_args = dwconv::launch_args(args);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  const std::size_t prep_bytes = prep ? dwconv::gradient_prep_bytes(args) : 0;
  const std::size_t variant_bytes = dwconv::geometry(problem, entry.config, args.n).workspace_bytes;
  const auto where = [&] {
    const std::string label = prep ? prep_entry->config.label() + " then " + entry.config.label() : entry.config.label();
    return Error::Context{"dwconv", problem.key(), label, "", ""};
  };
  // backward_weight partials, and in front of them an activation's gradient prep output (its
  // size rounded to 256 bytes): the caller's workspace or the context's pool.
  const CallWorkspace workspace(*impl_, prep_bytes + variant_bytes, args.workspace, args.workspace_bytes, cuda_stream,
                                where, "dwconv_workspace_size");
  if (variant_bytes > 0) launch_args.workspace = static_cast<char*>(workspace.get()) + prep_bytes;
  cudaError_t status = cudaSuccess;
  if (prep) {
    // The forward convolution of x, weight and bias, reading dy, writing dy * act'(z) to the workspace.
    dwconv::LaunchArgs prep_args{};
    prep_args.src = args.x, prep_args.dst = workspace.get(), prep_args.weight = args.weight, prep_args.bias = args.bias;
    prep_args.aux = args.dy, prep_args.batch = args.n;
    status = dwconv::launch(prep_entry->kernel, *prep, prep_entry->config, prep_args, cuda_stream);
    if (status == cudaSuccess && states_prep != nullptr)
      status = dwconv_states::launch(states_prep->kernel, *plan.prep, states_prep->config,
                                     dwconv_states::launch_args(args, *plan.prep, nullptr, workspace.get()), cuda_stream);
    if (args.direction == DwDirection::backward_data) launch_args.src = workspace.get();
    else launch_args.aux = workspace.get();
  }
  if (status == cudaSuccess) status = dwconv::launch(entry.kernel, problem, entry.config, launch_args, cuda_stream);
  if (status == cudaSuccess && states_fix != nullptr)
    status = dwconv_states::launch(states_fix->kernel, *plan.fix, states_fix->config,
                                   dwconv_states::launch_args(args, *plan.fix, prep ? workspace.get() : args.dy, nullptr),
                                   cuda_stream);
  if (status != cudaSuccess) detail::cuda_check(status, "cudaLaunchKernel", where());
}

std::string Context::dwconv_variant(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  dwconv_states::validate(args);
  const dwconv_states::Plan plan = dwconv_states::make_plan(args, impl_->state.buckets);
  const auto states = [&](const std::optional<dwconv_states::Problem>& p) {
    return p ? " then states " + impl_->entry_for<detail::DwConvStatesFamily>(*p, args.n, stream).config.label() : "";
  };
  std::string label;
  if (const auto prep = dwconv::gradient_prep_problem(args, impl_->state.buckets))
    label = impl_->entry_for<detail::DwConvFamily>(*prep, args.n, stream).config.label() + states(plan.prep) + " then ";
  return label +
         impl_->entry_for<detail::DwConvFamily>(dwconv::make_problem(args, impl_->state.buckets), args.n, stream).config.label() +
         states(plan.fix);
}

std::size_t Context::dwconv_workspace_size(const DwConvArgs& args, Stream stream) {
  dwconv::validate(args);
  dwconv_states::validate(args);  // the fix-ups take no workspace
  const dwconv::Problem problem = dwconv::make_problem(args, impl_->state.buckets);
  std::size_t prep_bytes = 0;
  if (const auto prep = dwconv::gradient_prep_problem(args, impl_->state.buckets)) {
    impl_->entry_for<detail::DwConvFamily>(*prep, args.n, stream);  // tunes or loads as a call would
    prep_bytes = dwconv::gradient_prep_bytes(args);
  }
  const auto& entry = impl_->entry_for<detail::DwConvFamily>(problem, args.n, stream);
  return prep_bytes + dwconv::geometry(problem, entry.config, args.n).workspace_bytes;
}

void Context::dwconv_decode(const DwConvDecodeArgs& args, Stream stream) {
  dwconv_decode::validate(args);
  const dwconv_decode::Problem problem = dwconv_decode::make_problem(args, impl_->state.buckets);
  const auto& entry = impl_->entry_for<detail::DwConvDecodeFamily>(problem, args.batch, stream);
  const cudaError_t status = dwconv_decode::launch(entry.kernel, problem, entry.config, dwconv_decode::launch_args(args),
                                                   reinterpret_cast<cudaStream_t>(stream));
  if (status != cudaSuccess)
    detail::cuda_check(status, "cudaLaunchKernel",
                       Error::Context{"dwconv_decode", problem.key(), entry.config.label(), "", ""});
}

std::string Context::dwconv_decode_variant(const DwConvDecodeArgs& args, Stream stream) {
  dwconv_decode::validate(args);
  return impl_->entry_for<detail::DwConvDecodeFamily>(dwconv_decode::make_problem(args, impl_->state.buckets), args.batch,
                                                      stream)
      .config.label();
}

Counters Context::counters() const { return impl_->state.counters.snapshot(); }

void Context::wait_background() { impl_->worker.wait_idle(); }

const ContextOptions& Context::options() const { return impl_->state.options; }

std::string Context::cache_path_in_use() const { return impl_->state.store->path(); }

Context& default_context() {
  // Intentionally never destroyed: kernels must not be unloaded after the CUDA runtime shut down.
  static Context* context = new Context(ContextOptions::from_environment());
  return *context;
}

void tuned_normalize(const NormalizeArgs& args, Stream stream) { default_context().normalize(args, stream); }

void tuned_normalize_backward(const NormalizeBackwardArgs& args, Stream stream) {
  default_context().normalize_backward(args, stream);
}

std::size_t tuned_normalize_workspace_size(const NormalizeArgs& args, Stream stream) {
  return default_context().normalize_workspace_size(args, stream);
}

std::size_t tuned_normalize_backward_workspace_size(const NormalizeBackwardArgs& args, Stream stream) {
  return default_context().normalize_backward_workspace_size(args, stream);
}

void tuned_dwconv(const DwConvArgs& args, Stream stream) { default_context().dwconv(args, stream); }

void tuned_dwconv_decode(const DwConvDecodeArgs& args, Stream stream) { default_context().dwconv_decode(args, stream); }

std::size_t tuned_dwconv_workspace_size(const DwConvArgs& args, Stream stream) {
  return default_context().dwconv_workspace_size(args, stream);
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "unknown";
}

const char* to_string(NormMode mode) {
  switch (mode) {
    case NormMode::standardize: return "standardize";
    case NormMode::layernorm: return "layernorm";
    case NormMode::rmsnorm: return "rmsnorm";
  }
  return "unknown";
}

const char* to_string(Policy policy) {
  switch (policy) {
    case Policy::tune: return "tune";
    case Policy::heuristic: return "heuristic";
    case Policy::cached: return "cached";
    case Policy::background: return "background";
    case Policy::record: return "record";
  }
  return "unknown";
}

const char* to_string(DwLayout layout) {
  switch (layout) {
    case DwLayout::ncl: return "ncl";
    case DwLayout::nlc: return "nlc";
    case DwLayout::nchw: return "nchw";
    case DwLayout::nhwc: return "nhwc";
  }
  return "unknown";
}

const char* to_string(DwDirection direction) {
  switch (direction) {
    case DwDirection::forward: return "forward";
    case DwDirection::backward_data: return "backward_data";
    case DwDirection::backward_weight: return "backward_weight";
  }
  return "unknown";
}

const char* to_string(Activation activation) {
  switch (activation) {
    case Activation::none: return "none";
    case Activation::silu: return "silu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::gelu_erf: return "gelu_erf";
    case Activation::relu: return "relu";
  }
  return "unknown";
}

Policy parse_policy(const std::string& text) {
  for (Policy p : {Policy::tune, Policy::heuristic, Policy::cached, Policy::background, Policy::record})
    if (text == to_string(p)) return p;
  throw Error(Error::Context{"context", "", "", "", "policy"},
              fmt::format("unknown policy '{}': expected tune, heuristic, cached, background or record", text));
}

const char* version() { return KVTUNE_VERSION; }

}  // namespace kvtune
