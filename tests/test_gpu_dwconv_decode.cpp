// [gpu] tests of the dwconv_decode family: (1) every variant of option problems (dtype x shifted or
// circular state x state indices x tokens x taps x bias x activation, odd sizes) against the float64
// CPU reference: outputs, the updated state bit for bit, padding rows untouched, broken rows (an index
// past the slots, a negative position) NaN with their state untouched; (2) Context calls: tuning, a
// chain of steps carrying the state, the tuning harness's verification of every variant, and the step
// captured in a CUDA graph and replayed. The hidden [gpu-bench][decode] times a step under graph
// replay against an empty kernel and a copy of the same bytes.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "gpu_support.h"
#include "sample.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_reference.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_tuning.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/module.h"
#include "core/nvrtc.h"
#include "tuner/harness_support.h"

using namespace kvtune;
using dwconv_decode::Config;
using dwconv_decode::Problem;

namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
constexpr Activation kActivations[] = {Activation::none, Activation::silu, Activation::gelu_tanh, Activation::gelu_erf,
                                       Activation::relu};

std::size_t esize(DType d) { return d == DType::f32 ? 4 : 2; }

double decode_value(DType d, const unsigned char* in) {
  if (d == DType::f32) {
    float f;
    std::memcpy(&f, in, 4);
    return f;
  }
  if (d == DType::f16) return __half2float(*reinterpret_cast<const __half*>(in));
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(in));
}

// Values exact in every dtype (multiples of 1/64), on the host and on the device.
struct Tensor {
  DType dtype = DType::f32;
  std::vector<double> values;
  tuner::DeviceBuffer device;

  void upload() {
    std::vector<unsigned char> bytes(values.size() * esize(dtype));
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint32_t bits = dwconv_decode::exact_bits(dtype, values[i]);
      std::memcpy(bytes.data() + i * esize(dtype), &bits, esize(dtype));
    }
    detail::cuda_check(cudaMemcpy(device.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  std::vector<double> download() const {
    std::vector<unsigned char> bytes(values.size() * esize(dtype));
    detail::cuda_check(cudaMemcpy(bytes.data(), device.get(), bytes.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::vector<double> out(values.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = decode_value(dtype, bytes.data() + i * esize(dtype));
    return out;
  }
};

Tensor exact_tensor(DType d, std::size_t n, std::uint64_t seed, int range = 64) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(-range, range);
  Tensor t;
  t.dtype = d;
  t.values.resize(n);
  for (auto& v : t.values) v = k(rng) / 64.0;
  t.device = tuner::DeviceBuffer(std::max<std::size_t>(n * esize(d), 16));
  t.upload();
  return t;
}

tuner::DeviceBuffer upload_ints(const std::vector<std::int32_t>& v) {
  tuner::DeviceBuffer d(std::max<std::size_t>(v.size() * 4, 16));
  detail::cuda_check(cudaMemcpy(d.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

double tolerance(DType d) { return d == DType::f32 ? 1e-5 : d == DType::f16 ? 2e-3 : 1e-2; }

// One decode step's tensors for `batch` rows of `p` over `slots` state slots: with indices, row 1 is
// padding, row 2 (when there are 4 rows or more) names slot `slots` (out of range), the others
// distinct slots in reverse order; circular positions 0, 1, past one turn, and row 3 negative.
struct Step {
  Problem p;
  std::int64_t batch = 0, slots = 0;
  Tensor x, w, bias, state, y;
  std::vector<std::int32_t> positions, indices;
  tuner::DeviceBuffer positions_device, indices_device;

  Step(const Problem& problem, std::int64_t rows, std::uint64_t seed) : p(problem), batch(rows) {
    slots = p.indices ? batch + 3 : batch;
    x = exact_tensor(p.dtype, std::size_t(batch * p.c * p.seqlen), seed);
    w = exact_tensor(p.dtype, std::size_t(p.c * p.k), seed + 1, 32);
    bias = exact_tensor(p.dtype, std::size_t(p.c), seed + 2);
    state = exact_tensor(p.dtype, std::size_t(slots * p.c * p.state_len), seed + 3);
    y = exact_tensor(p.dtype, std::size_t(batch * p.c * p.seqlen), seed + 4);  // padding rows must keep these
    if (p.indices)
      for (std::int64_t b = 0; b < batch; ++b)
        indices.push_back(b == 1 ? -1 : (b == 2 && batch >= 4) ? std::int32_t(slots) : std::int32_t(slots - 1 - b));
    if (p.circular)
      for (std::int64_t b = 0; b < batch; ++b)
        positions.push_back(b == 3 ? -5 : std::int32_t((b * 29) % (3 * p.state_len + 2)));
    positions_device = upload_ints(positions);
    indices_device = upload_ints(indices);
  }

  dwconv_decode::LaunchArgs launch_args() const {
    dwconv_decode::LaunchArgs a{};
    a.x = x.device.get(), a.weight = w.device.get(), a.bias = p.bias ? bias.device.get() : nullptr;
    a.y = y.device.get(), a.state = state.device.get();
    a.cache_seqlens = p.circular ? positions_device.as<std::int32_t>() : nullptr;
    a.state_indices = p.indices ? indices_device.as<std::int32_t>() : nullptr;
    a.batch = batch, a.state_len = p.state_len, a.state_slots = slots;
    return a;
  }

  DwConvDecodeArgs args() const {
    DwConvDecodeArgs a;
    a.dtype = p.dtype, a.batch = batch, a.channels = p.c, a.seqlen = p.seqlen, a.kernel_w = p.k;
    a.state_len = p.state_len, a.state_slots = slots, a.activation = p.activation;
    const auto l = launch_args();
    a.x = l.x, a.weight = l.weight, a.bias = l.bias, a.y = l.y, a.state = l.state;
    a.cache_seqlens = l.cache_seqlens, a.state_indices = l.state_indices;
    a.overlap_prologue = p.early;
    return a;
  }

  // The reference of one step from the current host values (advancing them as the kernel does);
  // then checks the device's y and state against it.
  void reference(std::vector<double>& ref_y, std::vector<double>& ref_state) const {
    ref_y = y.values;
    ref_state = state.values;
    dwconv_decode::reference_decode(p, batch, slots, x.values, w.values, p.bias ? bias.values : std::vector<double>{},
                                    positions, indices, ref_state, ref_y);
  }
};

// Relative L2 error of y (NaN where the reference is NaN, required), and whether the state matches exactly.
void check_step(const Step& s, const std::vector<double>& ref_y, const std::vector<double>& ref_state,
                std::size_t* nan_rows = nullptr) {
  const auto y = s.y.download();
  double err = 0, norm = 0;
  std::size_t mismatched_nan = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(ref_y[i]) || std::isnan(y[i])) {
      mismatched_nan += std::isnan(ref_y[i]) != std::isnan(y[i]);
      if (nan_rows != nullptr && std::isnan(y[i])) ++*nan_rows;
      continue;
    }
    err += (y[i] - ref_y[i]) * (y[i] - ref_y[i]);
    norm += ref_y[i] * ref_y[i];
  }
  CHECK(mismatched_nan == 0);
  CHECK(std::sqrt(err / std::max(norm, 1e-30)) <= tolerance(s.p.dtype));
  const auto state = s.state.download();
  std::size_t state_diffs = 0;
  for (std::size_t i = 0; i < state.size(); ++i) state_diffs += state[i] != ref_state[i];
  CHECK(state_diffs == 0);
}

}  // namespace

TEST_CASE("every dwconv_decode variant of the option problems matches the float64 reference", "[gpu][dwconv][decode]") {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  // dtype x state form x indices, each with tokens, taps, channels, batch, bias and activation rotating:
  // odd channel counts (one channel a thread only), K up to 33, 1-9 tokens, batches of 1-13 rows.
  struct Case {
    Problem problem;
    std::int64_t batch;
    std::vector<Config> configs;
    std::vector<tuner::Candidate> candidates;
  };
  std::vector<Case> cases;
  test::CompileMemo memo;
  int i = 0;
  for (DType t : kDTypes)
    for (bool circular : {false, true})
      for (bool indices : {false, true})
        for (int variant = 0; variant < 2; ++variant, ++i) {
          Problem p;
          p.dtype = t, p.circular = circular, p.indices = indices;
          p.seqlen = std::vector<int>{1, 3, 1, 9, 2}[std::size_t(i % 5)];
          p.k = std::vector<int>{4, 2, 3, 5, 4, 33}[std::size_t(i % 6)];
          p.c = std::vector<std::int64_t>{24, 37, 200, 8}[std::size_t(i % 4)];
          p.state_len = circular ? std::max<std::int64_t>(p.k - 1 + i % 7, p.seqlen) : p.k - 1;
          p.bias = i % 3 != 1;
          p.activation = kActivations[std::size_t(i % 5)];
          p.early = i % 3 == 2;  // weight, bias and indices read before the wait (overlap_prologue)
          const std::int64_t batch = std::vector<std::int64_t>{5, 1, 13, 4}[std::size_t(i % 4)];
          p.n = batch;
          p.n_exact = true;
          p.align_bytes = 16;
          const auto configs = dwconv_decode::enumerate(p);
          REQUIRE_FALSE(configs.empty());
          Case c{p, batch, configs, dwconv_decode::make_candidates(p, configs, fp.arch())};
          memo.add(c.candidates);
          cases.push_back(std::move(c));
        }
  memo.compile_pending();
  std::size_t variants = 0;
  for (const Case& c : cases) variants += c.configs.size();
  std::size_t verified = 0, nan_rows = 0;
  for (const Case& c : cases) {
    INFO(c.problem.key());
    const auto compiled = memo.compile(c.candidates);
    Step step(c.problem, c.batch, 100 + verified);
    std::vector<double> ref_y, ref_state;
    step.reference(ref_y, ref_state);
    for (std::size_t v = 0; v < c.candidates.size(); ++v) {
      INFO(c.candidates[v].label << " " << compiled[v].message.substr(0, 2000));
      REQUIRE(compiled[v].status == tuner::Status::ok);
      auto kernel = detail::LoadedKernel::load(compiled[v].cubin, compiled[v].lowered_name);
      step.state.upload();
      step.y.upload();
      REQUIRE(dwconv_decode::launch(kernel, c.problem, c.configs[v], step.launch_args(), nullptr) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      check_step(step, ref_y, ref_state, &nan_rows);
      ++verified;
    }
    // The tuning harness's own verification accepts every variant (its reference, state restore, padding).
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
    Problem bucket = c.problem;
    auto harness = dwconv_decode::make_harness(bucket, c.configs, fp.arch(), 0, stream);
    for (std::size_t v = 0; v < c.candidates.size(); v += 3) {
      auto kernel = detail::LoadedKernel::load(compiled[v].cubin, compiled[v].lowered_name);
      const auto verdict = harness->verify(c.candidates[v], kernel, stream);
      INFO(c.candidates[v].label << ": " << verdict.message);
      CHECK(verdict.ok);
    }
    harness.reset();
    cudaStreamDestroy(stream);
  }
  WARN("verified " << verified << " dwconv_decode variants of " << cases.size() << " problems; " << nan_rows
                   << " NaN outputs of broken rows");
  CHECK(verified == variants);
  CHECK(nan_rows > 0);
}

TEST_CASE("dwconv_decode through the Context: tuned, a chain of steps, graph replay", "[gpu][dwconv][decode]") {
  KVTUNE_REQUIRE_GPU();
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::tune;
  o.budget_variants = 8;
  Context context(o);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  for (DType t : kDTypes)
    for (bool circular : {false, true}) {
      Problem p;
      p.dtype = t, p.c = 96, p.k = 4, p.seqlen = circular ? 2 : 1, p.circular = circular, p.indices = true;
      p.state_len = circular ? 6 : 3, p.bias = true, p.activation = Activation::silu;
      INFO(to_string(t) << " circular=" << circular);
      Step step(p, 7, 7);
      const auto before = context.counters();
      // Four steps carry the state: each a fresh x, positions advanced by seqlen.
      for (int s = 0; s < 4; ++s) {
        if (s > 0) {
          step.x = exact_tensor(p.dtype, step.x.values.size(), 50 + s);
          for (auto& q : step.positions) q = q < 0 ? q : q + p.seqlen;
          step.positions_device = upload_ints(step.positions);
        }
        std::vector<double> ref_y, ref_state;
        step.reference(ref_y, ref_state);
        context.dwconv_decode(step.args(), stream);
        REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
        check_step(step, ref_y, ref_state);
        step.y.values = ref_y;  // the host copies follow the device
        for (auto& v : step.y.values)
          if (std::isnan(v)) v = 0;
        step.y.upload();
        step.state.values = ref_state;
      }
      const auto after = context.counters();
      CHECK(after.tunes - before.tunes == 1);
      CHECK(after.table_hits - before.table_hits == 3);
      CHECK_FALSE(context.dwconv_decode_variant(step.args(), stream).empty());
      // Captured once loaded: the graph replays the step with the same result as a call.
      std::vector<double> ref_y, ref_state;
      step.reference(ref_y, ref_state);
      REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
      context.dwconv_decode(step.args(), stream);
      cudaGraph_t graph = nullptr;
      REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
      cudaGraphExec_t exec = nullptr;
      REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
      REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
      check_step(step, ref_y, ref_state);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  // An unloaded problem under capture is a clear error, not a tuning.
  Problem p;
  p.dtype = DType::bf16, p.c = 40, p.k = 3, p.state_len = 2;
  Step step(p, 3, 9);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK_THROWS_WITH(context.dwconv_decode(step.args(), stream), Catch::Contains("being captured"));
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  cudaStreamDestroy(stream);
}

namespace {

// `name` (extern "C") of `source`, compiled for the current device.
detail::LoadedKernel load_source_kernel(const char* source, const char* name) {
  detail::CompileRequest r;
  r.program_name = std::string(name) + ".cu";
  r.source = source;
  r.arch = detail::read_fingerprint(detail::current_device()).arch();
  r.name_expressions = {name};
  const auto compiled = detail::nvrtc_compile(r);
  return detail::LoadedKernel::load(compiled.cubin, compiled.lowered_names[0]);
}

// Lets the stream's next kernel start at once (griddepcontrol.launch_dependents on sm_90), then
// spins for `spin` clocks, then copies `bytes` from src to dst: a kernel before a decode step that
// writes its inputs late, so that a step reading them before its wait would see the old values.
constexpr const char* kLateCopy = R"(extern "C" __global__ void kvt_late_copy(const unsigned char* src, unsigned char* dst,
                                                 unsigned long long bytes, long long spin) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long start = clock64();
  while (clock64() - start < spin) {
  }
  for (unsigned long long i = threadIdx.x + blockIdx.x * (unsigned long long)blockDim.x; i < bytes;
       i += (unsigned long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}
)";

}  // namespace

TEST_CASE("dwconv_decode waits for what the stream's previous kernel writes", "[gpu][dwconv][decode]") {
  // The step is a programmatic dependent launch on sm_90: its grid starts while the kernel before
  // it runs. That kernel here releases its dependents first, then writes x and the state 200k clocks
  // later (about 0.1 ms): the step must read the new values, with and without overlap_prologue
  // (which reads only weight, bias and the indices early).
  KVTUNE_REQUIRE_GPU();
  const auto late_copy = load_source_kernel(kLateCopy, "kvt_late_copy");
  Context context(test::in_memory(Policy::heuristic));
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  for (bool early : {false, true})
    for (DType t : {DType::f32, DType::bf16}) {
      Problem p;
      p.dtype = t, p.c = 1000, p.k = 4, p.state_len = 3, p.indices = true, p.bias = true;
      p.activation = Activation::silu, p.early = early;
      INFO(to_string(t) << " overlap_prologue=" << early);
      Step step(p, 6, 21);
      context.dwconv_decode(step.args(), stream);  // loads the variant: the timed call below launches only
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
      step.y.upload();
      step.state.upload();
      // New x and state, staged in buffers of their own; the device's x and state stay the old ones
      // until the late copy.
      Tensor x_new = exact_tensor(t, step.x.values.size(), 77), state_new = exact_tensor(t, step.state.values.size(), 78);
      step.x.values = x_new.values;
      step.state.values = state_new.values;
      std::vector<double> ref_y, ref_state;
      step.reference(ref_y, ref_state);
      const unsigned long long spin = 200000;
      // The state first, x last: x is what the kernel before a step usually writes.
      for (auto [src, dst, bytes] : {std::tuple{state_new.device.get(), step.state.device.get(),
                                                step.state.values.size() * esize(t)},
                                     std::tuple{x_new.device.get(), step.x.device.get(), step.x.values.size() * esize(t)}}) {
        const auto* from = static_cast<const unsigned char*>(src);
        auto* to = static_cast<unsigned char*>(dst);
        const unsigned long long n = bytes;
        const long long clocks = (long long)spin;
        REQUIRE(late_copy.launch(dim3(4), dim3(256), 0, stream, from, to, n, clocks) == cudaSuccess);
      }
      context.dwconv_decode(step.args(), stream);
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
      check_step(step, ref_y, ref_state);
    }
  cudaStreamDestroy(stream);
}

namespace {

// Microseconds per step: `steps` launches captured in one graph, replayed `reps` times.
double graph_us(cudaStream_t stream, int steps, int reps, const std::function<void()>& launch) {
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  for (int i = 0; i < steps; ++i) launch();
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int i = 0; i < 3; ++i) REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(start, stream);
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    cudaEventRecord(stop, stream);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms * 1000.0 / steps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

constexpr const char* kEmpty = "extern \"C\" __global__ void kvt_empty(int) {}\n";

}  // namespace

TEST_CASE("dwconv_decode step against an empty kernel and a copy under graph replay", "[.][gpu-bench][decode]") {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::tune;
  o.budget_variants = 0;  // the whole space: at most 20 variants for one token
  Context context(o);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  const auto empty = load_source_kernel(kEmpty, "kvt_empty");
  const double empty_us = graph_us(stream, 20, 50, [&] { REQUIRE(empty.launch(dim3(1), dim3(32), 0, stream, 0) == cudaSuccess); });
  std::string table = fmt::format("dwconv_decode, bf16, K = 4, silu, bias, state indices, one token; {}; empty kernel "
                                  "{:.2f} us a launch (graph replay, 20 a graph)\n",
                                  fp.name, empty_us);
  table += "| batch x channels | variant | step us | x empty | overlap_prologue: variant | step us | x empty | copy us | "
           "step GB/s | % of copy |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto [batch, channels] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 2048}, {8, 4096}, {64, 4096}, {64, 8192}, {256, 8192}, {1024, 8192}, {4096, 8192}}) {
    Problem p;
    p.dtype = DType::bf16, p.c = channels, p.k = 4, p.state_len = 3, p.indices = true, p.bias = true;
    p.activation = Activation::silu;
    Step step(p, batch, 3);
    std::iota(step.indices.begin(), step.indices.end(), 0);  // every row a slot: no padding in the timing
    step.indices_device = upload_ints(step.indices);
    const DwConvDecodeArgs a = step.args();
    context.dwconv_decode(a, stream);  // tune
    const double step_us = graph_us(stream, 20, 50, [&] { context.dwconv_decode(a, stream); });
    DwConvDecodeArgs early = a;
    early.overlap_prologue = true;  // only the step itself runs before a step here: nothing writes weight or indices
    context.dwconv_decode(early, stream);  // tune
    const double early_us = graph_us(stream, 20, 50, [&] { context.dwconv_decode(early, stream); });
    const double bytes = dwconv_decode::model_bytes(dwconv_decode::make_problem(a), batch);
    tuner::DeviceBuffer src(std::size_t(bytes / 2)), dst(std::size_t(bytes / 2));
    const double copy_us = graph_us(stream, 20, 50, [&] {
      REQUIRE(cudaMemcpyAsync(dst.get(), src.get(), std::size_t(bytes / 2), cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
    });
    table += fmt::format("| {} x {} | {} | {:.2f} | {:.2f} | {} | {:.2f} | {:.2f} | {:.2f} | {:.0f} | {:.0f} % |\n", batch,
                         channels, context.dwconv_decode_variant(a, stream), step_us, step_us / empty_us,
                         context.dwconv_decode_variant(early, stream), early_us, early_us / empty_us, copy_us,
                         bytes / step_us * 1e-3, 100 * copy_us / step_us);
  }
  WARN(table);
  cudaStreamDestroy(stream);
}
