#pragma once
// Loading compiled kernels through the CUDA runtime (cudaLibraryLoadData): no libcuda link, so a
// machine without a driver still loads kvtune and gets a clear error.

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>

namespace kvtune::detail {

struct KernelAttributes {
  int num_regs = 0;
  int max_threads_per_block = 0;
  std::size_t static_smem = 0;
  std::size_t local_bytes = 0;  // spills and stack
};

/// A loaded cubin and one kernel in it. Unloads the library when the last copy goes.
class LoadedKernel {
 public:
  LoadedKernel() = default;
  /// Loads `image` and looks up `lowered_name`; throws kvtune::Error on failure.
  static LoadedKernel load(const std::string& image, const std::string& lowered_name);

  cudaKernel_t kernel() const { return kernel_; }
  const KernelAttributes& attributes() const { return attributes_; }
  explicit operator bool() const { return kernel_ != nullptr; }

  /// Allows `bytes` of dynamic shared memory on the current device where, with the kernel's static
  /// shared memory, they exceed the 48 KiB a launch may use without opting in.
  void allow_dynamic_smem(std::size_t bytes) const;

  /// Launches with by-value argument structs (one per kernel parameter).
  template <class... Params>
  cudaError_t launch(dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, const Params&... params) const {
    void* args[] = {const_cast<Params*>(&params)...};
    return cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), grid, block, args, smem, stream);
  }

  /// Blocks of `block` threads (and `smem` dynamic bytes) the current device holds at once (SMs x
  /// occupancy); 0 where it has no cooperative launch. Kept per device: call it with one block size
  /// and shared memory per kernel (a variant's).
  cudaError_t co_resident_blocks(unsigned block, std::size_t smem, int* blocks) const;
  /// A cooperative launch (all blocks co-resident, or cudaErrorCooperativeLaunchTooLarge).
  template <class... Params>
  cudaError_t launch_cooperative(dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                                 const Params&... params) const {
    void* args[] = {const_cast<Params*>(&params)...};
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel_), args);
  }

 private:
  static constexpr int kMaxDevices = 64;
  std::shared_ptr<CUlib_st> library_;
  cudaKernel_t kernel_ = nullptr;
  KernelAttributes attributes_;
  // co_resident_blocks per device ordinal, plus one (0: not yet asked); shared by copies.
  std::shared_ptr<std::array<std::atomic<int>, kMaxDevices>> co_resident_;
};

}  // namespace kvtune::detail
