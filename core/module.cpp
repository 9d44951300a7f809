#include "core/module.h"

#include "core/cuda_check.h"

namespace kvtune::detail {

LoadedKernel LoadedKernel::load(const std::string& image, const std::string& lowered_name) {
  cudaLibrary_t library = nullptr;
  cuda_check(cudaLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
             "cudaLibraryLoadData", Error::Context{"module", "", lowered_name, "", ""});
  LoadedKernel loaded;
  loaded.library_ = std::shared_ptr<CUlib_st>(library, [](cudaLibrary_t l) { cudaLibraryUnload(l); });
  cuda_check(cudaLibraryGetKernel(&loaded.kernel_, library, lowered_name.c_str()), "cudaLibraryGetKernel",
             Error::Context{"module", "", lowered_name, "", ""});
  cudaFuncAttributes attributes{};
  cuda_check(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(loaded.kernel_)),
             "cudaFuncGetAttributes", Error::Context{"module", "", lowered_name, "", ""});
  loaded.attributes_.num_regs = attributes.numRegs;
  loaded.attributes_.max_threads_per_block = attributes.maxThreadsPerBlock;
  loaded.attributes_.static_smem = attributes.sharedSizeBytes;
  loaded.attributes_.local_bytes = attributes.localSizeBytes;
  loaded.co_resident_ = std::make_shared<std::array<std::atomic<int>, kMaxDevices>>();
  for (auto& blocks : *loaded.co_resident_) blocks.store(0, std::memory_order_relaxed);
  return loaded;
}

cudaError_t LoadedKernel::co_resident_blocks(unsigned block, std::size_t smem, int* blocks) const {
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  const bool cached = co_resident_ != nullptr && device >= 0 && device < kMaxDevices;
  if (cached) {
    const int known = (*co_resident_)[std::size_t(device)].load(std::memory_order_relaxed);
    if (known > 0) {
      *blocks = known - 1;
      return cudaSuccess;
    }
  }
  int cooperative = 0, sms = 0, per_sm = 0;
  if ((status = cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device)) != cudaSuccess ||
      (status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
      (status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(kernel_),
                                                              static_cast<int>(block), smem)) != cudaSuccess)
    return status;
  *blocks = cooperative != 0 ? sms * per_sm : 0;
  if (cached) (*co_resident_)[std::size_t(device)].store(*blocks + 1, std::memory_order_relaxed);
  return cudaSuccess;
}

void LoadedKernel::allow_dynamic_smem(std::size_t bytes) const {
  if (bytes == 0) return;
  // Without the opt-in, static plus dynamic shared memory must fit in 48 KiB (a kernel with 17 KiB
  // of static arrays fails to launch with 32 KiB of dynamic memory).
  if (attributes_.static_smem + bytes <= 48 * 1024) return;
  cuda_check(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel_),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

}  // namespace kvtune::detail
