#include "tuner/harness_support.h"

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

namespace kvtune::tuner {

void launch_raw(const detail::LoadedKernel& kernel, unsigned grid, unsigned block, cudaStream_t stream,
                std::vector<void*> args, const char* what) {
  detail::cuda_check(
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel.kernel()), dim3(grid), dim3(block), args.data(), 0, stream),
      what);
}

const std::vector<detail::LoadedKernel>& support_kernels(const detail::CompileRequest& request) {
  static std::mutex mutex;
  static std::map<std::string, detail::CompileResult> compiled;
  static std::map<std::pair<std::string, int>, std::vector<detail::LoadedKernel>> loaded;
  const std::string hash = detail::compile_hash(request);
  int device = 0;
  detail::cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = compiled.find(hash);
  if (it == compiled.end()) it = compiled.emplace(hash, detail::nvrtc_compile(request)).first;
  auto& kernels = loaded[{hash, device}];
  if (kernels.empty())
    for (const auto& name : it->second.lowered_names)
      kernels.push_back(detail::LoadedKernel::load(it->second.cubin, name));
  return kernels;
}

void fill_random(const detail::LoadedKernel& fill, void* out, long long n, unsigned long long seed, float offset,
                 float scale, cudaStream_t stream) {
  launch_raw(fill, 2048, 256, stream, {&out, &n, &seed, &offset, &scale}, "fill kernel");
}

double compare_on_device(const detail::LoadedKernel& compare, const void* out, long long ld_out, const float* ref,
                         long long ld_ref, long long rows, long long cols, double* bad, cudaStream_t stream) {
  DeviceBuffer acc(3 * sizeof(double));
  detail::cuda_check(cudaMemsetAsync(acc.get(), 0, 3 * sizeof(double), stream), "cudaMemsetAsync");
  double* acc_ptr = acc.as<double>();
  launch_raw(compare, 1024, 256, stream, {&out, &ld_out, &ref, &ld_ref, &rows, &cols, &acc_ptr}, "compare kernel");
  double host[3] = {0, 0, 0};
  detail::cuda_check(cudaMemcpyAsync(host, acc.get(), sizeof(host), cudaMemcpyDeviceToHost, stream), "cudaMemcpy");
  detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (compare)");
  *bad += host[2];
  return host[1] > 0 ? std::sqrt(host[0] / host[1]) : std::sqrt(host[0]);
}

bool finish_candidate(cudaError_t launch_status, cudaStream_t stream, const Error::Context& where, Verdict& verdict) {
  if (launch_status != cudaSuccess) {
    cudaGetLastError();
    // Refused for what the launch asks of this device (a cooperative grid that cannot be co-resident,
    // too many registers or threads): resources_exceeded to the tuner, as its load-time checks say.
    const bool resources = launch_status == cudaErrorCooperativeLaunchTooLarge ||
                           launch_status == cudaErrorLaunchOutOfResources;
    verdict.message =
        fmt::format("{}: {}", resources ? kResourcesRefused : "launch failed", cudaGetErrorString(launch_status));
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kVerifyTimeoutSeconds);
  cudaError_t status = cudaErrorNotReady;
  bool timed_out = false;
  while ((status = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      status = cudaStreamSynchronize(stream);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (status != cudaSuccess) detail::cuda_check(status, "candidate kernel", where);
  if (timed_out) verdict.message = fmt::format("timed out: one launch ran past {} s", kVerifyTimeoutSeconds);
  return !timed_out;
}

std::vector<double> exact_values(std::size_t n, std::uint64_t seed, int range) {
  constexpr std::int64_t kChunk = std::int64_t(1) << 16;
  std::vector<double> v(n);
  detail::parallel_for((std::int64_t(n) + kChunk - 1) / kChunk, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t chunk = begin; chunk < end; ++chunk) {
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + std::uint64_t(chunk));
      std::uniform_int_distribution<int> k(-range, range);
      const std::int64_t last = std::min<std::int64_t>(std::int64_t(n), (chunk + 1) * kChunk);
      for (std::int64_t i = chunk * kChunk; i < last; ++i) v[std::size_t(i)] = k(rng) / 64.0;
    }
  });
  return v;
}

DeviceBuffer upload_floats(const std::vector<double>& values) {
  std::vector<float> f(values.size());
  detail::parallel_for(
      std::int64_t(values.size()),
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) f[std::size_t(i)] = static_cast<float>(values[std::size_t(i)]);
      },
      std::int64_t(1) << 16);
  return upload_raw(f);
}

}  // namespace kvtune::tuner
