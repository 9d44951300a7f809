#include "core/module.h"

#include "core/cuda_check.h"

#include <algorithm>

namespace kvtune::detail {

std::string phase_kernel_name(const std::string& phase0, int phase) {
  // Itanium mangling: "_Z" <length> <name> "I" <template args> "E" ...; an int literal 0 is "Li0E".
  if (phase0.rfind("_Z", 0) != 0) return {};
  std::size_t at = 2, length = 0;
  while (at < phase0.size() && at < 8 && phase0[at] >= '0' && phase0[at] <= '9') length = length * 10 + (phase0[at++] - '0');
  if (length == 0 || at + length > phase0.size()) return {};
  at += length;
  if (phase0.compare(at, 5, "ILi0E") != 0) return {};
  return phase0.substr(0, at) + "ILi" + std::to_string(phase) + "E" + phase0.substr(at + 5);
}

LoadedKernel LoadedKernel::load(const std::string& image, const std::string& lowered_name, int phases) {
  const Error::Context where{"module", "", lowered_name, "", ""};
  if (phases < 1 || phases > kMaxPhases || (phases > 1 && phase_kernel_name(lowered_name, 1).empty()))
    throw Error(where, "cannot load " + std::to_string(phases) + " phases of " + lowered_name +
                           ": 1 to " + std::to_string(kMaxPhases) +
                           " phases of a kernel template whose first argument is its phase");
  cudaLibrary_t library = nullptr;
  cuda_check(cudaLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
             "cudaLibraryLoadData", where);
  LoadedKernel loaded;
  loaded.library_ = std::shared_ptr<CUlib_st>(library, [](cudaLibrary_t l) { cudaLibraryUnload(l); });
  cuda_check(cudaLibraryGetKernel(&loaded.phase_kernels_[0], library, lowered_name.c_str()), "cudaLibraryGetKernel",
             where);
  loaded.phase_count_ = phases;
  for (int k = 1; k < phases; ++k)
    cuda_check(cudaLibraryGetKernel(&loaded.phase_kernels_[std::size_t(k)], library,
                                    phase_kernel_name(lowered_name, k).c_str()),
               "cudaLibraryGetKernel (a phase)", where);
  for (int k = 0; k < loaded.phase_count_; ++k) {
    cudaFuncAttributes attributes{};
    cuda_check(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(loaded.phase_kernels_[std::size_t(k)])),
               "cudaFuncGetAttributes", where);
    KernelAttributes& a = loaded.attributes_;
    a.num_regs = std::max(a.num_regs, attributes.numRegs);
    a.max_threads_per_block = k == 0 ? attributes.maxThreadsPerBlock : std::min(a.max_threads_per_block, attributes.maxThreadsPerBlock);
    a.static_smem = std::max(a.static_smem, attributes.sharedSizeBytes);
    a.local_bytes = std::max(a.local_bytes, attributes.localSizeBytes);
    a.binary_version = attributes.binaryVersion;
  }
  loaded.co_resident_ = std::make_shared<std::array<std::atomic<int>, kMaxDevices>>();
  for (auto& blocks : *loaded.co_resident_) blocks.store(0, std::memory_order_relaxed);
  loaded.active_clusters_ = std::make_shared<std::array<std::atomic<int>, kMaxDevices>>();
  for (auto& clusters : *loaded.active_clusters_) clusters.store(0, std::memory_order_relaxed);
  return loaded;
}

namespace {

// A count per device (co-resident blocks, clusters) kept in `cache` (the value plus one; 0: not yet
// asked): `ask(device, value)` runs once per device and kernel.
template <std::size_t N, class Ask>
cudaError_t cached_per_device(std::array<std::atomic<int>, N>* cache, int* value, Ask ask) {
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  const bool cached = cache != nullptr && device >= 0 && device < static_cast<int>(N);
  if (cached) {
    const int known = (*cache)[std::size_t(device)].load(std::memory_order_relaxed);
    if (known > 0) {
      *value = known - 1;
      return cudaSuccess;
    }
  }
  if ((status = ask(device, value)) != cudaSuccess) return status;
  if (cached) (*cache)[std::size_t(device)].store(*value + 1, std::memory_order_relaxed);
  return cudaSuccess;
}

}  // namespace

cudaError_t LoadedKernel::co_resident_blocks(unsigned block, std::size_t smem, int* blocks) const {
  return cached_per_device(co_resident_.get(), blocks, [&](int device, int* out) {
    int cooperative = 0, sms = 0, per_sm = 0;
    cudaError_t status = cudaSuccess;
    if ((status = cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device)) != cudaSuccess ||
        (status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
        (status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(kernel()),
                                                                static_cast<int>(block), smem)) != cudaSuccess)
      return status;
    *out = cooperative != 0 ? sms * per_sm : 0;
    return cudaSuccess;
  });
}

cudaError_t LoadedKernel::active_clusters(unsigned grid, unsigned block, std::size_t smem, unsigned cluster,
                                          int* clusters) const {
  return cached_per_device(active_clusters_.get(), clusters, [&](int device, int* out) {
    int supported = 0;
    cudaError_t status = cudaDeviceGetAttribute(&supported, cudaDevAttrClusterLaunch, device);
    if (status != cudaSuccess) return status;
    *out = 0;
    if (supported == 0 || attributes_.binary_version < 90 || cluster == 0) return cudaSuccess;
    // The query counts the dynamic shared memory only once the kernel may take it (as a launch).
    if ((status = opt_in_dynamic_smem(smem)) != cudaSuccess) return status;
    cudaLaunchAttribute attribute = cluster_attribute(cluster);
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(block);
    config.dynamicSmemBytes = smem;
    config.attrs = &attribute;
    config.numAttrs = 1;
    status = cudaOccupancyMaxActiveClusters(out, reinterpret_cast<const void*>(kernel()), &config);
    if (status == cudaErrorInvalidClusterSize) {  // more blocks than this device's clusters take: none fits
      cudaGetLastError();
      *out = 0;
      return cudaSuccess;
    }
    return status;
  });
}

cudaError_t LoadedKernel::opt_in_dynamic_smem(std::size_t bytes) const {
  // Without the opt-in, static plus dynamic shared memory must fit in 48 KiB (a kernel with 17 KiB
  // of static arrays fails to launch with 32 KiB of dynamic memory).
  if (bytes == 0 || attributes_.static_smem + bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel()), cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

void LoadedKernel::allow_dynamic_smem(std::size_t bytes) const {
  cuda_check(opt_in_dynamic_smem(bytes), "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

}  // namespace kvtune::detail
