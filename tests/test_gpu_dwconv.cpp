// [gpu] tests of the dwconv family: the float64 GPU reference against the CPU reference, every
// variant against the reference on random data (edge shapes on purpose), tuned calls on misaligned
// pointers, tune -> cache -> dispatch, and the seed designs timed beside the tuned winner.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>

#include <fmt/format.h>
#include <unistd.h>

#include "gpu_support.h"
#include "sample.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kernel_templates/dwconv/dwconv_sizes.h"
#include "kernel_templates/dwconv/dwconv_tuning.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "tuner/harness_support.h"

using namespace kvtune;

namespace {

std::size_t esize(DType d) { return d == DType::f32 ? 4 : 2; }
void put(DType d, double v, unsigned char* out) {
  if (d == DType::f32) *reinterpret_cast<float*>(out) = float(v);
  else if (d == DType::f16) *reinterpret_cast<__half*>(out) = __float2half_rn(float(v));
  else *reinterpret_cast<__nv_bfloat16*>(out) = __float2bfloat16_rn(float(v));
}
double get(DType d, const unsigned char* in) {
  if (d == DType::f32) return *reinterpret_cast<const float*>(in);
  if (d == DType::f16) return __half2float(*reinterpret_cast<const __half*>(in));
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(in));
}

// Encoded bytes and the decoded values the reference sees.
struct Host {
  std::vector<unsigned char> bytes;
  std::vector<double> values;
};
Host random_host(DType d, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Host h;
  h.bytes.resize(n * esize(d));
  h.values.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    put(d, u(rng), h.bytes.data() + i * esize(d));
    h.values[i] = get(d, h.bytes.data() + i * esize(d));
  }
  return h;
}

double rel_error(DType d, const void* device, const std::vector<double>& ref) {
  std::vector<unsigned char> host(ref.size() * esize(d));
  detail::cuda_check(cudaMemcpy(host.data(), device, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double o = get(d, host.data() + i * esize(d));
    if (!std::isfinite(o)) return INFINITY;
    err += (o - ref[i]) * (o - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

// Outputs out(e) against a float64 reference that holds Inf or NaN: how many reference values are
// not finite, how many outputs differ from them there (NaN for NaN, the same infinity) or are not
// finite where the reference is, and the relative L2 error over the rest.
struct NonfiniteCompare {
  std::size_t nonfinite = 0, mismatched = 0;
  double rel_error = 0;
};
NonfiniteCompare compare_nonfinite(const std::vector<double>& ref, const std::function<double(std::size_t)>& out) {
  NonfiniteCompare c;
  double err = 0, norm = 0;
  for (std::size_t e = 0; e < ref.size(); ++e) {
    const double o = out(e);
    if (!std::isfinite(ref[e])) {
      ++c.nonfinite;
      c.mismatched += std::isnan(ref[e]) ? !std::isnan(o) : o != ref[e];
    } else if (!std::isfinite(o)) {
      ++c.mismatched;
    } else {
      err += (o - ref[e]) * (o - ref[e]);
      norm += ref[e] * ref[e];
    }
  }
  c.rel_error = std::sqrt(err / norm);
  return c;
}

double tolerance(DType d) { return d == DType::f32 ? 1e-4 : d == DType::f16 ? 3e-3 : 1.5e-2; }

struct Shape {
  const char* what;
  DwLayout layout;
  DType dtype;
  std::int64_t n, c, h, w;
  int k_h, k_w, s, d, pad_before, pad_after;
  bool causal, bias;
};

const Shape kShapes[] = {
    {"mamba-like causal K=4", DwLayout::ncl, DType::bf16, 2, 64, 1, 1000, 1, 4, 1, 1, 0, 0, true, true},
    {"NLC, C not a multiple of the vector", DwLayout::nlc, DType::f16, 2, 100, 1, 257, 1, 4, 1, 1, 0, 0, true, true},
    {"L = 1", DwLayout::ncl, DType::f32, 3, 16, 1, 1, 1, 3, 1, 1, 1, 1, false, true},
    {"K > L with padding", DwLayout::nlc, DType::f32, 2, 32, 1, 5, 1, 7, 1, 1, 3, 3, false, false},
    {"1D stride 2 dilation 2", DwLayout::ncl, DType::f32, 2, 24, 1, 301, 1, 5, 2, 2, 4, 3, false, true},
    {"odd H/W, stride 2", DwLayout::nchw, DType::f32, 2, 24, 15, 17, 3, 3, 2, 1, 1, 1, false, true},
    {"NHWC 7x7 dilation 2", DwLayout::nhwc, DType::f32, 2, 48, 20, 19, 7, 7, 1, 2, 6, 6, false, true},
    {"NHWC C = 1", DwLayout::nhwc, DType::f32, 2, 1, 13, 11, 3, 3, 1, 1, 1, 1, false, false},
    {"large N, bf16", DwLayout::nchw, DType::bf16, 64, 32, 28, 28, 3, 3, 1, 1, 1, 1, false, true},
    {"N = 1, 31x31", DwLayout::nchw, DType::f32, 1, 8, 40, 36, 31, 31, 1, 1, 15, 15, false, false},
    {"NHWC f16 stride 2", DwLayout::nhwc, DType::f16, 4, 40, 14, 14, 3, 3, 2, 1, 1, 1, false, true},
    {"NHWC bf16 9x9 (over 64 taps: blocks of 8 rows)", DwLayout::nhwc, DType::bf16, 2, 24, 12, 10, 9, 9, 1, 1, 4, 4, false, false},
    {"NHWC bf16 15x15 (runs of 8, opt-in shared filters)", DwLayout::nhwc, DType::bf16, 2, 32, 19, 20, 15, 15, 1, 1, 7, 7, false, false},
    // Weight gradients with vectors along W and rows per thread: partial runs and row groups.
    {"NCHW 5x5 dilation 2, W = 20", DwLayout::nchw, DType::f32, 2, 16, 13, 20, 5, 5, 1, 2, 4, 4, false, true},
    {"NCHW f16 stride 2, W = 32", DwLayout::nchw, DType::f16, 2, 8, 10, 32, 3, 3, 2, 1, 1, 1, false, false},
    {"NCHW 7x7, 18 x 16 (49 taps a thread)", DwLayout::nchw, DType::f32, 3, 8, 18, 16, 7, 7, 1, 1, 3, 3, false, true},
    // Runs per thread over both row edges and a partial last tile; 1D channel-last runs of 16 and 32.
    {"NCL f16 K=3 pad 1, L = 520 (runs per thread)", DwLayout::ncl, DType::f16, 3, 8, 1, 520, 1, 3, 1, 1, 1, 1, false, true},
    {"NLC bf16 K=31 pad 15, L = 200 (runs of 32)", DwLayout::nlc, DType::bf16, 2, 16, 1, 200, 1, 31, 1, 1, 15, 15, false, true},
};

DwConvArgs make_args(const Shape& s, DwDirection dir) {
  DwConvArgs a;
  a.direction = dir;
  a.layout = s.layout;
  a.dtype = s.dtype;
  a.n = s.n;
  a.c = s.c;
  a.h = s.h;
  a.w = s.w;
  a.kernel_h = s.k_h;
  a.kernel_w = s.k_w;
  const bool two_d = s.layout == DwLayout::nchw || s.layout == DwLayout::nhwc;
  a.stride_w = s.s;
  a.dilation_w = s.d;
  a.causal = s.causal;
  if (!s.causal) a.pad_left = s.pad_before, a.pad_right = s.pad_after;
  if (two_d) {
    a.stride_h = s.s;
    a.dilation_h = s.d;
    a.pad_top = s.pad_before;
    a.pad_bottom = s.pad_after;
  }
  return a;
}

// A sweep's sample and, when sampled, its candidates compiled together (run_sweep).
struct Sweep {
  test::Sample sample;
  test::CompileMemo memo;
  bool collecting = false;  // the first pass of a sampled sweep: add candidates, verify nothing
};

// Runs `loops` (verify_variants calls with `sweep`) once, or, for a sample, twice: first to gather
// every problem's candidates and compile them together, then to verify.
void run_sweep(Sweep& sweep, const std::function<void()>& loops) {
  if (!sweep.sample.all()) {
    sweep.collecting = true;
    loops();
    sweep.collecting = false;
    sweep.memo.compile_pending();
  }
  loops();
}

// Counts of verify_variants().
struct Verified {
  std::size_t verified = 0, opted_in = 0, over_device_smem = 0;
};

// The variants of `shape` in direction `dir` that `keep` accepts (all, or `sample`'s choice of them
// with the heuristic's), against the float64 reference (itself first checked against the CPU one).
void verify_variants(const Shape& shape, DwDirection dir, bool deterministic, const detail::DeviceFingerprint& fp,
                     cudaStream_t stream, const std::function<bool(const dwconv::Config&)>& keep, Verified& counts,
                     Sweep& sweep) {
  const test::Sample& sample = sweep.sample;
  DwConvArgs a = make_args(shape, dir);
  a.deterministic = deterministic;
  // Pointers only mark which optional tensors exist (the harness owns the buffers).
  a.x = a.weight = a.dy = reinterpret_cast<void*>(std::uintptr_t(1) << 30);
  a.y = a.dx = a.dweight = reinterpret_cast<void*>(std::uintptr_t(2) << 30);
  if (shape.bias) {
    a.dbias = reinterpret_cast<void*>(std::uintptr_t(3) << 30);
    a.bias = a.dbias;
  }
  dwconv::validate(a);
  dwconv::Problem p = dwconv::make_problem(a);
  p.n = a.n;  // the exact batch
  INFO(shape.what << ": " << p.key());
  std::vector<dwconv::Config> configs;
  for (const auto& c : dwconv::enumerate(p))
    if (keep(c)) configs.push_back(c);
  if (!sample.all()) {
    const auto heuristic = dwconv::heuristic_config(p, fp.cc_major);
    configs = sample.apply(configs, p.key() + (deterministic ? "" : " atomic"),
                           std::size_t(std::find(configs.begin(), configs.end(), heuristic) - configs.begin()));
  }
  const auto candidates =
      configs.empty() ? std::vector<tuner::Candidate>{} : dwconv::make_candidates(p, configs, fp.arch());
  if (sweep.collecting) return sweep.memo.add(candidates);

  // The GPU float64 reference against the CPU one on this shape.
  {
    const auto src = random_host(p.dtype, std::size_t(p.n * p.c * p.src_h() * p.src_w()), 1);
    const auto wt = random_host(p.dtype, std::size_t(p.c * p.kh * p.kw), 2);
    const auto bias = random_host(p.dtype, std::size_t(p.c), 3);
    const auto aux = random_host(p.dtype, std::size_t(p.n * p.c * p.dst_h() * p.dst_w()), 4);
    tuner::DeviceBuffer dsrc(src.bytes.size()), dwt(wt.bytes.size()), dbias(bias.bytes.size()),
        daux(aux.bytes.size());
    cudaMemcpy(dsrc.get(), src.bytes.data(), src.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dwt.get(), wt.bytes.data(), wt.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dbias.get(), bias.bytes.data(), bias.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(daux.get(), aux.bytes.data(), aux.bytes.size(), cudaMemcpyHostToDevice);
    dwconv::LaunchArgs la{};
    la.src = dsrc.get();
    la.weight = dwt.get();
    la.bias = p.bias && dir == DwDirection::forward ? dbias.get() : nullptr;
    la.aux = daux.get();
    la.batch = p.n;
    std::vector<double> ref, ref_bias;
    if (dir == DwDirection::forward)
      ref = dwconv::reference_forward(p, p.n, src.values, wt.values, p.bias ? bias.values : std::vector<double>{});
    else if (dir == DwDirection::backward_data)
      ref = dwconv::reference_backward_data(p, p.n, src.values, wt.values);
    else
      dwconv::reference_backward_weight(p, p.n, src.values, aux.values, ref, ref_bias);
    tuner::DeviceBuffer out(ref.size() * 4), out_bias(std::size_t(p.c) * 4);
    dwconv::run_reference(p, fp.arch(), la, out.as<float>(), out_bias.as<float>(), stream);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(rel_error(DType::f32, out.get(), ref) < 1e-6);
    if (dir == DwDirection::backward_weight && p.bias) CHECK(rel_error(DType::f32, out_bias.get(), ref_bias) < 1e-6);
  }
  if (configs.empty()) return;

  const auto compiled = sample.all() ? tuner::compile_all(candidates, 0) : sweep.memo.compile(candidates);
  auto harness = dwconv::make_harness(p, configs, fp.arch(), 0, stream);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    INFO(candidates[i].label << " " << compiled[i].message.substr(0, 2000));
    REQUIRE(compiled[i].status == tuner::Status::ok);
    // Shared filters over 48 KiB opt in, as the tuner and the dispatch do; a device with less
    // opt-in memory than a variant asks for never runs it (the tuner drops it).
    if (candidates[i].dynamic_smem > std::size_t(fp.max_smem_per_block_optin)) {
      ++counts.over_device_smem;
      continue;
    }
    auto kernel = detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name);
    kernel.allow_dynamic_smem(candidates[i].dynamic_smem);
    counts.opted_in += candidates[i].dynamic_smem > 48 * 1024;
    const auto verdict = harness->verify(candidates[i], kernel, stream);
    INFO(verdict.message);
    CHECK(verdict.ok);
    ++counts.verified;
  }
}

// The channel-first shapes of kShapes plus `extra`: the variants `keep` accepts in each direction of
// `directions` (backward_weight: both reductions).
Verified verify_channel_first(const std::vector<Shape>& extra, std::initializer_list<DwDirection> directions,
                              const std::function<bool(const dwconv::Config&)>& keep, const test::Sample& sample) {
  Sweep sweep{sample};
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  std::vector<Shape> shapes = extra;
  for (const auto& s : kShapes)
    if (s.layout == DwLayout::nchw) shapes.push_back(s);
  Verified counts;
  run_sweep(sweep, [&] {
    for (const auto& shape : shapes)
      for (DwDirection dir : directions)
        for (bool deterministic : {true, false})
          if (deterministic || dir == DwDirection::backward_weight)
            verify_variants(shape, dir, deterministic, fp, stream, keep, counts, sweep);
  });
  cudaStreamDestroy(stream);
  return counts;
}

}  // namespace

// The sweep: every shape of kShapes, each of `directions` (backward_weight: both reductions).
static void check_dwconv_variants(const test::Sample& sample,
                                  std::initializer_list<DwDirection> directions = {DwDirection::forward,
                                                                                   DwDirection::backward_data,
                                                                                   DwDirection::backward_weight}) {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  Verified counts;
  Sweep sweep{sample};
  run_sweep(sweep, [&] {
    for (const auto& shape : kShapes)
      for (DwDirection dir : directions)
        for (bool deterministic : {true, false}) {
          if (!deterministic && dir != DwDirection::backward_weight) continue;
          verify_variants(shape, dir, deterministic, fp, stream, [](const dwconv::Config&) { return true; }, counts,
                          sweep);
        }
  });
  cudaStreamDestroy(stream);
  WARN("verified " << counts.verified << " dwconv variants, " << counts.opted_in << " with over 48 KiB of shared memory; "
                    << counts.over_device_smem << " over this device's opt-in limit skipped");
  CHECK(counts.verified > 500 / sample.every / directions.size());
  if (sample.all() && fp.max_smem_per_block_optin >= 100 * 1024) CHECK(counts.opted_in > 0);
}

TEST_CASE("a sample of dwconv variants matches the float64 reference", "[gpu][dwconv]") {
  check_dwconv_variants(test::Sample{32});
}

// Two cases of one tier, side by side: one case took 503 s on an H100 (7,246 variants, 2026-11-27), over
// the 8 minutes a part may take.
TEST_CASE("every forward dwconv variant matches the float64 reference", "[.][gpu-exhaustive][exhaustive-1][dwconv]") {
  check_dwconv_variants(test::kEveryVariant, {DwDirection::forward});
}

TEST_CASE("every backward dwconv variant matches the float64 reference", "[.][gpu-exhaustive][exhaustive-1][dwconv]") {
  check_dwconv_variants(test::kEveryVariant, {DwDirection::backward_data, DwDirection::backward_weight});
}

static void check_flat_variants(const test::Sample& sample) {
  // The channel-first 2D shapes of the sweep above plus planes no tile divides, where a grid's last
  // block is partial and warps straddle row groups and planes (the halo exchange's edge lanes).
  KVTUNE_REQUIRE_GPU();
  const std::vector<Shape> extra = {
      {"NCHW 7x7, 3 x 5 planes of 23 x 21", DwLayout::nchw, DType::f32, 3, 5, 23, 21, 7, 7, 1, 1, 3, 3, false, true},
      {"NCHW f32 7x7, 3 x 8 planes of 23 x 28 (vectors, halo exchange)", DwLayout::nchw, DType::f32, 3, 8, 23, 28, 7, 7, 1, 1, 3, 3, false, false},
      {"NCHW bf16 3x3, 2 x 8 planes of 56 x 56", DwLayout::nchw, DType::bf16, 2, 8, 56, 56, 3, 3, 1, 1, 1, 1, false, false},
      {"NCHW f16 5x5 stride 2, 9 x 13", DwLayout::nchw, DType::f16, 1, 7, 9, 13, 5, 5, 2, 1, 2, 2, false, true},
  };
  const Verified counts = verify_channel_first(extra, {DwDirection::forward, DwDirection::backward_data},
                                               [](const dwconv::Config& c) { return c.kernel() == dwconv::Kernel::tiled && c.tiled().flat; }, sample);
  WARN("verified " << counts.verified << " flat-item dwconv variants");
  CHECK(counts.verified > 100 / sample.every);
}

TEST_CASE("a sample of flat-item dwconv variants matches the float64 reference", "[gpu][dwconv][flat]") {
  check_flat_variants(test::Sample{8});
}

TEST_CASE("flat-item dwconv variants match the float64 reference", "[.][gpu-exhaustive][exhaustive-3][dwconv][flat]") {
  check_flat_variants(test::kEveryVariant);
}

static void check_wgrad_variants(const test::Sample& sample) {
  // The channel-first 2D shapes of the sweep above plus planes whose last row group is partial (13, 9
  // and 11 output rows), a last run of 8 that is half full with 4-element vectors (W = 28) and
  // 2-element ones (stride 2: 18 outputs), both reductions; then the staged x planes (smem_halo),
  // counted apart.
  KVTUNE_REQUIRE_GPU();
  const std::vector<Shape> extra = {
      {"NCHW f32 7x7, 2 x 8 planes of 13 x 28", DwLayout::nchw, DType::f32, 2, 8, 13, 28, 7, 7, 1, 1, 3, 3, false, true},
      {"NCHW bf16 3x3, 3 x 8 planes of 9 x 40", DwLayout::nchw, DType::bf16, 3, 8, 9, 40, 3, 3, 1, 1, 1, 1, false, false},
      {"NCHW f32 5x5 stride 2, 2 x 4 planes of 21 x 36", DwLayout::nchw, DType::f32, 2, 4, 21, 36, 5, 5, 2, 1, 2, 2, false, true},
      // Staged x planes: dilation; 9 images, whose 4 splits of 3 leave the fourth block none; 16-bit copies.
      {"NCHW f32 3x3 dilation 2, 9 x 4 planes of 17 x 20", DwLayout::nchw, DType::f32, 9, 4, 17, 20, 3, 3, 1, 2, 2, 2, false, true},
      {"NCHW f16 7x7, 3 x 4 planes of 30 x 32", DwLayout::nchw, DType::f16, 3, 4, 30, 32, 7, 7, 1, 1, 3, 3, false, false},
  };
  const Verified counts = verify_channel_first(extra, {DwDirection::backward_weight}, [](const dwconv::Config& c) {
    return c.wgrad().rows_per_thread > 1 && !c.wgrad().staged;
  }, sample);
  WARN("verified " << counts.verified << " weight-gradient variants with rows per thread from global memory");
  CHECK(counts.verified > 200 / sample.every);
  const Verified staged = verify_channel_first(extra, {DwDirection::backward_weight},
                                               [](const dwconv::Config& c) { return c.wgrad().staged; }, sample);
  WARN("verified " << staged.verified << " weight-gradient variants with staged x planes");
  CHECK(staged.verified > 100 / sample.every);
}

TEST_CASE("a sample of register-tiled weight gradients with rows per thread matches the float64 reference",
          "[gpu][dwconv][wgrad]") {
  check_wgrad_variants(test::Sample{8});
}

TEST_CASE("register-tiled weight gradients with rows per thread match the float64 reference",
          "[.][gpu-exhaustive][exhaustive-3][dwconv][wgrad]") {
  check_wgrad_variants(test::kEveryVariant);
}

TEST_CASE("register-tiled weight gradients: Inf and NaN in an edge tile's window reach only the taps that read them",
          "[gpu][dwconv][wgrad]") {
  // A tile past the row or the image has no dy for its missing outputs: were their products taken
  // with a dy of 0, an Inf or NaN in the window would put 0 * inf = NaN into taps whose definition
  // never reads that value (the kernels skip those products). Every register-tiled variant (global
  // and staged x, both reductions) against the float64 reference: non-finite exactly where it is,
  // the rest within tolerance.
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  const Shape shapes[] = {
      // 13 rows: the last row group is partial; W = 28: a last run of 8 half full.
      {"NCHW f32 7x7, 2 x 8 planes of 13 x 28", DwLayout::nchw, DType::f32, 2, 8, 13, 28, 7, 7, 1, 1, 3, 3, false, true},
      {"NHWC f32 7x7, C = 40, 14 x 14", DwLayout::nhwc, DType::f32, 2, 40, 14, 14, 7, 7, 1, 1, 3, 3, false, true},
  };
  std::size_t variants = 0;
  for (const auto& s : shapes)
    for (bool deterministic : {true, false}) {
      DwConvArgs a = make_args(s, DwDirection::backward_weight);
      a.deterministic = deterministic;
      void* any = reinterpret_cast<void*>(std::uintptr_t(1) << 30);
      a.x = a.dy = a.dweight = a.dbias = any;
      dwconv::Problem p = dwconv::make_problem(a);
      p.n = a.n;
      INFO(s.what << ": " << p.key());
      auto x = random_host(p.dtype, std::size_t(p.n * p.c * p.src_h() * p.src_w()), 31);
      const auto dy = random_host(p.dtype, std::size_t(p.n * p.c * p.dst_h() * p.dst_w()), 32);
      const auto poison = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, double v) {
        const std::size_t i = std::size_t(p.layout == DwLayout::nchw ? ((n * p.c + c) * p.src_h() + h) * p.src_w() + w
                                                                     : ((n * p.src_h() + h) * p.src_w() + w) * p.c + c);
        put(p.dtype, v, x.bytes.data() + i * 4);
        x.values[i] = v;
      };
      // The last column and row: taps kw <= 2 (kh <= 2) read it only for outputs past the row (the
      // image), so their sums stay finite; a NaN inside; -Inf and +Inf whose windows overlap.
      const std::int64_t H = p.src_h(), W = p.src_w();
      poison(0, 3, H - 1, W - 1, INFINITY);
      poison(1, 5, H - 3, W - 2, NAN);
      poison(1, 6, 2, W - 1, -INFINITY);
      poison(1, 6, 5, W - 1, INFINITY);
      std::vector<double> ref, ref_bias;
      dwconv::reference_backward_weight(p, p.n, x.values, dy.values, ref, ref_bias);
      std::vector<dwconv::Config> configs;
      for (const auto& c : dwconv::enumerate(p))
        if (c.kernel() == dwconv::Kernel::wgrad && c.wgrad().outputs_per_thread > 1) configs.push_back(c);
      REQUIRE(configs.size() > 4);
      const auto candidates = dwconv::make_candidates(p, configs, fp.arch());
      const auto compiled = tuner::compile_all(candidates, 0);
      tuner::DeviceBuffer dx(x.bytes.size()), ddy(dy.bytes.size()), dw(ref.size() * 4), db(std::size_t(p.c) * 4);
      cudaMemcpy(dx.get(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
      cudaMemcpy(ddy.get(), dy.bytes.data(), dy.bytes.size(), cudaMemcpyHostToDevice);
      std::size_t nonfinite_taps = 0;
      for (double r : ref) nonfinite_taps += !std::isfinite(r);
      CHECK(nonfinite_taps > 0);
      CHECK(nonfinite_taps < 4 * 49);  // most taps of the poisoned channels stay finite
      for (std::size_t i = 0; i < configs.size(); ++i) {
        INFO(candidates[i].label);
        REQUIRE(compiled[i].status == tuner::Status::ok);
        if (candidates[i].dynamic_smem > std::size_t(fp.max_smem_per_block_optin)) continue;
        auto kernel = detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name);
        kernel.allow_dynamic_smem(candidates[i].dynamic_smem);
        const auto geo = dwconv::geometry(p, configs[i], p.n);
        tuner::DeviceBuffer ws(std::max<std::size_t>(geo.workspace_bytes, 1));
        dwconv::LaunchArgs la{};
        la.src = dx.get(), la.aux = ddy.get(), la.dst = dw.get(), la.bias_grad = db.get(), la.batch = p.n;
        la.workspace = geo.workspace_bytes ? ws.get() : nullptr;
        REQUIRE(cudaMemset(dw.get(), 0, ref.size() * 4) == cudaSuccess);
        REQUIRE(dwconv::launch(kernel, p, configs[i], la, nullptr) == cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        std::vector<float> out(ref.size());
        cudaMemcpy(out.data(), dw.get(), out.size() * 4, cudaMemcpyDeviceToHost);
        const auto c = compare_nonfinite(ref, [&](std::size_t e) { return double(out[e]); });
        CHECK(c.mismatched == 0);
        CHECK(c.rel_error < tolerance(p.dtype));
        ++variants;
      }
    }
  WARN("checked " << variants << " register-tiled weight-gradient variants with Inf and NaN in edge tiles");
}

static void check_staged_variants(const test::Sample& sample) {
  // The channel-last shapes of the sweep above plus tiles the channels do not fill, strides,
  // dilation, a 1D K=31 and blocks whose last tiles run out (tiles per block).
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  const Shape extra[] = {
      {"NHWC bf16 7x7, C = 40 (partial channel tiles), 17 x 19", DwLayout::nhwc, DType::bf16, 2, 40, 17, 19, 7, 7, 1, 1, 3, 3, false, true},
      {"NHWC f32 3x3 stride 2, C = 20 (a partial tile of 32 channels)", DwLayout::nhwc, DType::f32, 3, 20, 15, 13, 3, 3, 2, 1, 1, 1, false, true},
      {"NHWC bf16 3x3, C = 144, 28 x 28", DwLayout::nhwc, DType::bf16, 2, 144, 28, 28, 3, 3, 1, 1, 1, 1, false, false},
      {"NHWC f16 5x5 stride 2, C = 24, 9 x 13", DwLayout::nhwc, DType::f16, 1, 24, 9, 13, 5, 5, 2, 1, 2, 2, false, true},
      {"NHWC f32 7x7, C = 384, 14 x 14", DwLayout::nhwc, DType::f32, 2, 384, 14, 14, 7, 7, 1, 1, 3, 3, false, true},
      {"NLC bf16 K=31 causal, C = 48, L = 300", DwLayout::nlc, DType::bf16, 2, 48, 1, 300, 1, 31, 1, 1, 0, 0, true, false},
  };
  std::vector<Shape> shapes(std::begin(extra), std::end(extra));
  for (const auto& s : kShapes)
    if (s.layout == DwLayout::nhwc || s.layout == DwLayout::nlc) shapes.push_back(s);
  Verified counts;
  Sweep sweep{sample};
  run_sweep(sweep, [&] {
    for (const auto& shape : shapes)
      for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data})
        verify_variants(shape, dir, true, fp, stream,
                        [](const dwconv::Config& c) { return c.kernel() == dwconv::Kernel::tiled && c.tiled().smem_halo; }, counts,
                        sweep);
  });
  cudaStreamDestroy(stream);
  WARN("verified " << counts.verified << " staged channel-last dwconv variants");
  CHECK(counts.verified > 200 / sample.every);
}

TEST_CASE("a sample of staged channel-last dwconv variants matches the float64 reference", "[gpu][dwconv][staged]") {
  check_staged_variants(test::Sample{16});
}

TEST_CASE("staged channel-last dwconv variants match the float64 reference",
          "[.][gpu-exhaustive][exhaustive-3][dwconv][staged]") {
  check_staged_variants(test::kEveryVariant);
}

// Long 1D kernels whose windows exceed 64 registers (channel-last rows from global memory; 1D
// register-tiled weight gradients): runs over both row ends, channels no block fills (C = 40),
// dilation, stride 2 (backward_data runs a multiple of it), 16-bit types, both reductions.
static void check_long_window_variants(const test::Sample& sample) {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  const Shape shapes[] = {
      {"NLC f32 K=63 pad 31, C = 40, L = 300", DwLayout::nlc, DType::f32, 2, 40, 1, 300, 1, 63, 1, 1, 31, 31, false, true},
      {"NLC bf16 K=63 causal, C = 48, L = 257", DwLayout::nlc, DType::bf16, 2, 48, 1, 257, 1, 63, 1, 1, 0, 0, true, false},
      {"NLC f32 K=33 dilation 2 pad 32, C = 16, L = 190", DwLayout::nlc, DType::f32, 3, 16, 1, 190, 1, 33, 1, 2, 32, 32, false, true},
      {"NLC f16 K=47 stride 2 pad 23, C = 24, L = 181", DwLayout::nlc, DType::f16, 2, 24, 1, 181, 1, 47, 2, 1, 23, 23, false, true},
  };
  Verified counts;
  Sweep sweep{sample};
  run_sweep(sweep, [&] {
    for (const auto& shape : shapes)
      for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
        for (bool deterministic : {true, false}) {
          if (!deterministic && dir != DwDirection::backward_weight) continue;
          DwConvArgs a = make_args(shape, dir);
          const dwconv::Problem p = dwconv::make_problem(a);
          const auto window = [&](int rw) {
            return dwconv::sizes::window(static_cast<int>(dir == DwDirection::backward_data), p.kw, p.sw, p.dw, p.pad_left, rw);
          };
          verify_variants(shape, dir, deterministic, fp, stream, [&](const dwconv::Config& c) {
            if (const auto* t = std::get_if<dwconv::TiledConfig>(&c.variant()))
              return window(t->outputs_per_thread) * t->vector_channels > dwconv::sizes::kMaxWindowRegisters;
            if (const auto* w = std::get_if<dwconv::WgradConfig>(&c.variant()))
              return w->outputs_per_thread > 1 && window(w->outputs_per_thread) + w->vector_channels > dwconv::sizes::kMaxWindowRegisters;
            return false;
          }, counts, sweep);
        }
  });
  cudaStreamDestroy(stream);
  WARN("verified " << counts.verified << " long-window dwconv variants");
  CHECK(counts.verified > 100 / sample.every);
}

TEST_CASE("a sample of long-window 1D dwconv variants matches the float64 reference", "[gpu][dwconv][long]") {
  check_long_window_variants(test::Sample{8});
}

TEST_CASE("long-window 1D dwconv variants match the float64 reference", "[.][gpu-exhaustive][exhaustive-3][dwconv][long]") {
  check_long_window_variants(test::kEveryVariant);
}

static void check_mma_variants(const test::Sample& sample) {
  // 16-bit channel-last shapes: channel tiles the channels do not fill (C = 40: a tile of 32 holds 8),
  // outputs that fill no tile, strides and dilation (forward), kernels of one, two and three 16-column
  // steps, 1D runs over both ends of the row, and the channel-last shapes of the sweep above.
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  const Shape extra[] = {
      {"NHWC bf16 7x7, C = 40, 17 x 19", DwLayout::nhwc, DType::bf16, 2, 40, 17, 19, 7, 7, 1, 1, 3, 3, false, true},
      {"NHWC bf16 3x3, C = 144, 28 x 28", DwLayout::nhwc, DType::bf16, 2, 144, 28, 28, 3, 3, 1, 1, 1, 1, false, false},
      {"NHWC f16 5x5 stride 2, C = 24, 9 x 13", DwLayout::nhwc, DType::f16, 1, 24, 9, 13, 5, 5, 2, 1, 2, 2, false, true},
      {"NHWC f16 7x7 dilation 2, C = 16, 21 x 30", DwLayout::nhwc, DType::f16, 2, 16, 21, 30, 7, 7, 1, 2, 6, 5, false, true},
      {"NHWC bf16 15x15 (two steps), C = 32, 19 x 20", DwLayout::nhwc, DType::bf16, 1, 32, 19, 20, 15, 15, 1, 1, 7, 7, false, false},
      {"NHWC bf16 31x31 (three steps), C = 16, 22 x 37", DwLayout::nhwc, DType::bf16, 1, 16, 22, 37, 31, 31, 1, 1, 15, 15, false, true},
      {"NLC bf16 K=31 causal, C = 48, L = 300", DwLayout::nlc, DType::bf16, 2, 48, 1, 300, 1, 31, 1, 1, 0, 0, true, false},
      {"NLC f16 K=4 causal, C = 64, L = 1000", DwLayout::nlc, DType::f16, 2, 64, 1, 1000, 1, 4, 1, 1, 0, 0, true, true},
      {"NLC bf16 K=3 stride 3, C = 8, L = 77", DwLayout::nlc, DType::bf16, 3, 8, 1, 77, 1, 3, 3, 1, 1, 1, false, true},
  };
  std::vector<Shape> shapes(std::begin(extra), std::end(extra));
  for (const auto& s : kShapes)
    if ((s.layout == DwLayout::nhwc || s.layout == DwLayout::nlc) && s.dtype != DType::f32) shapes.push_back(s);
  Verified counts;
  Sweep sweep{sample};
  run_sweep(sweep, [&] {
    for (const auto& shape : shapes)
      for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data})
        verify_variants(shape, dir, true, fp, stream,
                        [](const dwconv::Config& c) { return c.kernel() == dwconv::Kernel::mma; }, counts, sweep);
  });
  cudaStreamDestroy(stream);
  WARN("verified " << counts.verified << " tensor-core dwconv variants");
  CHECK(counts.verified > 100 / sample.every);
}

TEST_CASE("a sample of tensor-core dwconv variants matches the float64 reference", "[gpu][dwconv][mma]") {
  check_mma_variants(test::Sample{4});
}

TEST_CASE("tensor-core dwconv variants match the float64 reference", "[.][gpu-exhaustive][exhaustive-3][dwconv][mma]") {
  check_mma_variants(test::kEveryVariant);
}

TEST_CASE("tensor-core dwconv: Inf and NaN reach only the outputs whose window holds them", "[gpu][dwconv][mma]") {
  // In an MMA every source value of 16 columns meets all 8 outputs of an n-tile (most times a zero
  // Toeplitz entry), so a tile holding Inf or NaN takes the plain-FMA path; the outputs must be those
  // of the direct convolution: non-finite exactly where the reference is, the rest within tolerance.
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  const Shape s = {"NHWC bf16 7x7", DwLayout::nhwc, DType::bf16, 2, 64, 20, 40, 7, 7, 1, 1, 3, 3, false, true};
  for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data}) {
    DwConvArgs a = make_args(s, dir);
    void* any = reinterpret_cast<void*>(std::uintptr_t(1) << 30);
    a.x = a.weight = a.dy = a.y = a.dx = any;
    a.bias = dir == DwDirection::forward ? any : nullptr;
    const dwconv::Problem p = dwconv::make_problem(a);
    const std::size_t src_count = std::size_t(p.n * p.c * p.src_h() * p.src_w());
    auto x = random_host(p.dtype, src_count, 21);
    const auto w = random_host(p.dtype, std::size_t(p.c * 49), 22);
    const auto b = random_host(p.dtype, std::size_t(p.c), 23);
    // Image 0, channel 5: +Inf at (4, 9); image 1, channel 17: NaN at (12, 30); channel 0: -Inf and
    // +Inf three columns apart (their windows overlap: NaN there, Inf beside).
    const auto poison = [&](std::int64_t n, std::int64_t h, std::int64_t col, std::int64_t c, double v) {
      const std::size_t i = std::size_t(((n * p.src_h() + h) * p.src_w() + col) * p.c + c);
      put(p.dtype, v, x.bytes.data() + i * 2);
      x.values[i] = v;
    };
    poison(0, 4, 9, 5, INFINITY);
    poison(1, 12, 30, 17, NAN);
    poison(0, 10, 20, 0, -INFINITY);
    poison(0, 10, 23, 0, INFINITY);
    const std::vector<double> ref =
        dir == DwDirection::forward ? dwconv::reference_forward(p, p.n, x.values, w.values, b.values)
                                    : dwconv::reference_backward_data(p, p.n, x.values, w.values);
    tuner::DeviceBuffer dsrc(x.bytes.size()), dwt(w.bytes.size()), dbias(b.bytes.size()), dout(ref.size() * 2);
    cudaMemcpy(dsrc.get(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dwt.get(), w.bytes.data(), w.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dbias.get(), b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
    // Tiles of every shape the space has (rows 4, 8, 16; 1-8 n-tiles; 16 or 32 channels; 4 or 8 warps),
    // and two of 64 channels the rules allow (8 plane groups) — this test checks every output.
    std::vector<dwconv::Config> configs;
    for (int tr : {4, 8, 16})
      for (int nt : {1, 2, 3, 5, 8}) {
        const auto c = dwconv::mma_config(nt % 2 ? 16 : 32, tr, nt, tr == 8 ? 8 : 4);
        if (dwconv::is_runnable(p, c)) configs.push_back(c);
      }
    for (const auto& c : {dwconv::mma_config(64, 16, 3, 8), dwconv::mma_config(64, 8, 2, 4)})
      if (dwconv::is_runnable(p, c)) configs.push_back(c);
    REQUIRE(configs.size() == 17);
    const auto candidates = dwconv::make_candidates(p, configs, fp.arch());
    const auto compiled = tuner::compile_all(candidates, 0);
    for (std::size_t i = 0; i < configs.size(); ++i) {
      INFO(p.key() << " " << candidates[i].label);
      REQUIRE(compiled[i].status == tuner::Status::ok);
      auto kernel = detail::LoadedKernel::load(compiled[i].cubin, compiled[i].lowered_name);
      kernel.allow_dynamic_smem(candidates[i].dynamic_smem);
      dwconv::LaunchArgs la{};
      la.src = dsrc.get(), la.weight = dwt.get(), la.dst = dout.get(), la.batch = p.n;
      la.bias = dir == DwDirection::forward ? dbias.get() : nullptr;
      REQUIRE(cudaMemset(dout.get(), 0, ref.size() * 2) == cudaSuccess);
      REQUIRE(dwconv::launch(kernel, p, configs[i], la, nullptr) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      std::vector<unsigned char> host(ref.size() * 2);
      cudaMemcpy(host.data(), dout.get(), host.size(), cudaMemcpyDeviceToHost);
      const auto c = compare_nonfinite(ref, [&](std::size_t e) { return get(p.dtype, host.data() + e * 2); });
      CHECK(c.nonfinite > 100);
      CHECK(c.mismatched == 0);
      CHECK(c.rel_error < tolerance(p.dtype));
    }
  }
}

TEST_CASE("tuned dwconv: misaligned pointers, tune -> cache -> dispatch", "[gpu][dwconv]") {
  KVTUNE_REQUIRE_GPU();
  const auto dir_path = std::filesystem::temp_directory_path() / ("kvtune-dw-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir_path);
  ContextOptions o;
  o.cache_path = (dir_path / "cache.sqlite").string();
  for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight}) {
    const Shape s = {"nhwc", DwLayout::nhwc, DType::f16, 3, 40, 12, 13, 3, 3, 1, 1, 1, 1, false, true};
    DwConvArgs a = make_args(s, dir);
    const dwconv::Problem shape_only = [&] {
      DwConvArgs t = a;
      void* any = reinterpret_cast<void*>(std::uintptr_t(1) << 30);
      t.x = t.weight = t.dy = any;
      t.y = t.dx = t.dweight = any;
      return dwconv::make_problem(t);
    }();
    const std::size_t e = esize(a.dtype);
    const auto x = random_host(a.dtype, std::size_t(a.n * a.c * a.h * a.w), 11);
    const auto g = random_host(a.dtype, std::size_t(a.n * a.c * shape_only.out_h() * shape_only.out_w()), 12);
    const auto w = random_host(a.dtype, std::size_t(a.c * 9), 13);
    const auto b = random_host(a.dtype, std::size_t(a.c), 14);
    tuner::DeviceBuffer dx(x.bytes.size() + 64), dg(g.bytes.size() + 64), dw(w.bytes.size() + 64),
        db(b.bytes.size() + 64), out(std::max(x.bytes.size(), g.bytes.size()) + 64), out_bias(b.bytes.size() + 64);
    // One element past the allocation start: 2-byte aligned only.
    auto at = [e](const tuner::DeviceBuffer& buf) { return static_cast<unsigned char*>(buf.get()) + e; };
    cudaMemcpy(at(dx), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(at(dg), g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(at(dw), w.bytes.data(), w.bytes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(at(db), b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
    a.x = at(dx), a.dy = at(dg), a.weight = at(dw), a.bias = at(db);
    a.y = at(out), a.dx = at(out), a.dweight = at(out), a.dbias = at(out_bias);
    if (dir != DwDirection::forward) a.bias = nullptr;
    if (dir != DwDirection::backward_weight) a.dbias = nullptr;
    const dwconv::Problem p = dwconv::make_problem(a);
    CHECK(p.align_bytes == 2);
    std::vector<double> ref, ref_bias;
    if (dir == DwDirection::forward) ref = dwconv::reference_forward(p, a.n, x.values, w.values, b.values);
    else if (dir == DwDirection::backward_data) ref = dwconv::reference_backward_data(p, a.n, g.values, w.values);
    else dwconv::reference_backward_weight(p, a.n, x.values, g.values, ref, ref_bias);
    std::string first_variant;
    for (int process = 0; process < 2; ++process) {
      Context context(o);  // a second Context stands for a second process: same cache file
      context.dwconv(a);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      INFO(p.key() << " " << context.dwconv_variant(a));
      CHECK(rel_error(a.dtype, at(out), ref) < tolerance(a.dtype));
      if (dir == DwDirection::backward_weight) CHECK(rel_error(a.dtype, at(out_bias), ref_bias) < tolerance(a.dtype));
      const auto c = context.counters();
      if (process == 0) {
        CHECK(c.tunes == 1);
        first_variant = context.dwconv_variant(a);
      } else {
        CHECK(c.tunes == 0);
        CHECK(c.compiles == 0);
        CHECK(c.cache_hits == 1);
        CHECK(context.dwconv_variant(a) == first_variant);
      }
    }
  }
  std::filesystem::remove_all(dir_path);
}

// The seed study's four designs and the tuned winner, side by side (prints a Markdown table).
TEST_CASE("dwconv weight gradients with a split workspace: repeated calls and graph capture", "[gpu][dwconv]") {
  KVTUNE_REQUIRE_GPU();
  // 4 channels, 8 x 64 x 64 positions: the heuristic splits the reduction (a workspace per call).
  const Shape s = {"split", DwLayout::nchw, DType::f32, 8, 4, 64, 64, 3, 3, 1, 1, 1, 1, false, true};
  DwConvArgs a = make_args(s, DwDirection::backward_weight);
  const std::size_t positions = std::size_t(a.n * a.c * a.h * a.w);
  const auto x = random_host(a.dtype, positions, 21);
  const auto g = random_host(a.dtype, positions, 22);
  tuner::DeviceBuffer dx(x.bytes.size()), dg(g.bytes.size()), dw(std::size_t(a.c) * 9 * 4), db(std::size_t(a.c) * 4);
  cudaMemcpy(dx.get(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dg.get(), g.bytes.data(), g.bytes.size(), cudaMemcpyHostToDevice);
  a.x = dx.get(), a.dy = dg.get(), a.dweight = dw.get(), a.dbias = db.get();
  const dwconv::Problem p = dwconv::make_problem(a);
  std::vector<double> ref, ref_bias;
  dwconv::reference_backward_weight(p, a.n, x.values, g.values, ref, ref_bias);
  ContextOptions o;
  o.cache_path = ":memory:";
  o.policy = Policy::heuristic;
  Context context(o);
  const auto config = dwconv::heuristic_config(p, detail::read_fingerprint(detail::current_device()).cc_major);
  INFO(config.label());
  REQUIRE(dwconv::geometry(p, config, a.n).workspace_bytes > 0);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  const auto poison_and_check = [&](auto&& run) {
    cudaMemsetAsync(dw.get(), 0xFF, std::size_t(a.c) * 9 * 4, stream);
    cudaMemsetAsync(db.get(), 0xFF, std::size_t(a.c) * 4, stream);
    run();
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(rel_error(a.dtype, dw.get(), ref) < tolerance(a.dtype));
    CHECK(rel_error(a.dtype, db.get(), ref_bias) < tolerance(a.dtype));
  };
  for (int call = 0; call < 3; ++call) poison_and_check([&] { context.dwconv(a, stream); });
  CHECK(context.dwconv_variant(a, stream) == config.label());
  // Captured: the workspace becomes a graph allocation; the graph replays correctly, twice.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  context.dwconv(a, stream);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) poison_and_check([&] { REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// A benchmark (tunes the whole space of six problems: about 40 s on an H100), in the exhaustive tier.
TEST_CASE("dwconv seed designs against the tuned winner", "[.][gpu-exhaustive][exhaustive-3][dwconv][bench]") {
  KVTUNE_REQUIRE_GPU();
  const auto fp = detail::read_fingerprint(detail::current_device());
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  const Shape problems[] = {
      {"1D causal K=4 (Mamba)", DwLayout::ncl, DType::f32, 8, 1024, 1, 4096, 1, 4, 1, 1, 0, 0, true, true},
      {"2D 3x3 NCHW (MobileNet)", DwLayout::nchw, DType::f32, 32, 96, 56, 56, 3, 3, 1, 1, 1, 1, false, true},
  };
  std::string table = fmt::format(
      "\n{} ({} SMs), fp32, inputs rotated beyond L2\n| problem | direction | design | variant | time us | GB/s |\n"
      "|---|---|---|---|---|---|\n",
      fp.name, fp.sm_count);
  for (const auto& shape : problems)
    for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight}) {
      DwConvArgs a = make_args(shape, dir);
      a.x = a.weight = a.dy = reinterpret_cast<void*>(std::uintptr_t(1) << 30);
      a.y = a.dx = a.dweight = reinterpret_cast<void*>(std::uintptr_t(2) << 30);
      if (shape.bias && dir == DwDirection::forward) a.bias = reinterpret_cast<void*>(std::uintptr_t(3) << 30);
      const dwconv::Problem p = dwconv::make_problem(a);
      const auto configs = dwconv::enumerate(p);
      const auto candidates = dwconv::make_candidates(p, configs, fp.arch());
      auto harness = dwconv::make_harness(p, configs, fp.arch(), fp.l2_bytes, stream);
      tuner::Options options;
      options.max_dynamic_smem = fp.max_smem_per_block_optin;
      const auto outcome = tuner::tune(candidates, *harness, options, stream);
      REQUIRE(outcome.winner >= 0);
      const auto seeds = dwconv::seed_configs(p);
      double best_seed = 1e30;
      for (const auto& seed : seeds) {
        const auto it = std::find(configs.begin(), configs.end(), seed.second);
        const int t = outcome.trial_index[std::size_t(it - configs.begin())];
        REQUIRE(t >= 0);
        const auto& trial = outcome.trials[std::size_t(t)];
        CHECK(trial.status == "ok");
        best_seed = std::min(best_seed, trial.median_ms);
        table += fmt::format("| {} | {} | {} | {} | {:.1f} | {:.0f} |\n", shape.what, to_string(dir), seed.first,
                             seed.second.label(), trial.median_ms * 1e3, trial.gbps);
      }
      const auto& win = outcome.trials[std::size_t(outcome.trial_index[std::size_t(outcome.winner)])];
      table += fmt::format("| {} | {} | **tuned** | {} | {:.1f} | {:.0f} ({:.2f}x best seed) |\n", shape.what,
                           to_string(dir), win.label, win.median_ms * 1e3, win.gbps, best_seed / win.median_ms);
    }
  std::printf("%s\n", table.c_str());
  cudaStreamDestroy(stream);
}
