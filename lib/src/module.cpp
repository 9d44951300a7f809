#include "lib/src/module.h"

#include "lib/src/cuda_check.h"

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
  return loaded;
}

void LoadedKernel::allow_dynamic_smem(std::size_t bytes) const {
  if (bytes <= 48 * 1024) return;
  cuda_check(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel_),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

}  // namespace kvtune::detail
