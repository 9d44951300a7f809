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
  int binary_version = 0;       // the cubin's architecture, major * 10 + minor (90 for sm_90)
};

/// The lowered name of phase `phase` of a phased kernel template, from its phase 0's: a kernel
/// template whose first template argument is an int, its phase ("_Z<n><name>ILi0E..." becomes
/// "_Z<n><name>ILi<phase>E..."). Empty when `phase0` is not of that form.
std::string phase_kernel_name(const std::string& phase0, int phase);

/// A loaded cubin and one kernel in it, or the phases 0 .. n - 1 of one variant's phased kernel
/// template (phase_kernel_name; the binary names phase 0, its compile request every phase):
/// launch_phase(k) runs phase k, each phase with its own registers. Unloads the library when the
/// last copy goes.
class LoadedKernel {
 public:
  static constexpr int kMaxPhases = 8;

  LoadedKernel() = default;
  /// Loads `image` and looks up `lowered_name` and, for `phases` > 1, phases 1 .. phases - 1 of its
  /// template; throws kvtune::Error on failure.
  static LoadedKernel load(const std::string& image, const std::string& lowered_name, int phases = 1);

  cudaKernel_t kernel() const { return phase_kernels_[0]; }
  /// Over every phase: the fewest threads a block allows, the most registers, shared memory and stack.
  const KernelAttributes& attributes() const { return attributes_; }
  explicit operator bool() const { return phase_kernels_[0] != nullptr; }
  /// The phases loaded (1 for a kernel that is not phased).
  int phases() const { return phase_count_; }

  /// Allows `bytes` of dynamic shared memory on the current device where, with the kernel's static
  /// shared memory, they exceed the 48 KiB a launch may use without opting in.
  void allow_dynamic_smem(std::size_t bytes) const;
  /// The same, returning the runtime's status instead of throwing.
  cudaError_t opt_in_dynamic_smem(std::size_t bytes) const;

  /// Launches with by-value argument structs (one per kernel parameter).
  template <class... Params>
  cudaError_t launch(dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, const Params&... params) const {
    return launch_phase(0, grid, block, smem, stream, params...);
  }
  /// Launches phase `phase` (cudaErrorInvalidValue where the binary has no such phase).
  template <class... Params>
  cudaError_t launch_phase(int phase, dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                           const Params&... params) const {
    if (phase < 0 || phase >= phase_count_) return cudaErrorInvalidValue;
    void* args[] = {const_cast<Params*>(&params)...};
    return cudaLaunchKernel(reinterpret_cast<const void*>(phase_kernels_[phase]), grid, block, args, smem, stream);
  }

  /// A launch with programmatic stream serialization (programmatic dependent launch, sm_90 and
  /// later): the grid may start while the stream's previous kernel is still running, and the
  /// kernel must execute griddepcontrol.wait before it touches memory that kernel may write (then it
  /// sees all of it, as after an ordinary launch); it may execute griddepcontrol.launch_dependents
  /// to let the stream's next kernel start early in turn. Graph capture keeps the relation.
  template <class... Params>
  cudaError_t launch_programmatic(dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                                  const Params&... params) const {
    void* args[] = {const_cast<Params*>(&params)...};
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    return launch_with(attribute, grid, block, smem, stream, args);
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
    return launch_with(attribute, grid, block, smem, stream, args);
  }

  /// Clusters of `cluster` blocks (of `block` threads, `smem` dynamic bytes) the current device holds
  /// at once (cudaOccupancyMaxActiveClusters for a grid of `grid` blocks); 0 where it has no cluster
  /// launch (before sm_90) or the kernel was not built for sm_90 or later. Allows the kernel `smem`
  /// dynamic bytes first where that needs the opt-in. Kept per device: call it with one block size,
  /// shared memory and cluster size per kernel (a variant's).
  cudaError_t active_clusters(unsigned grid, unsigned block, std::size_t smem, unsigned cluster, int* clusters) const;
  /// A launch in thread-block clusters of `cluster` blocks along x (grid.x a multiple of it).
  template <class... Params>
  cudaError_t launch_cluster(dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream, unsigned cluster,
                             const Params&... params) const {
    void* args[] = {const_cast<Params*>(&params)...};
    return launch_with(cluster_attribute(cluster), grid, block, smem, stream, args);
  }

 private:
  /// Thread-block clusters of `cluster` blocks along x (the launch's and the occupancy query's).
  static cudaLaunchAttribute cluster_attribute(unsigned cluster) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    return attribute;
  }
  /// cudaLaunchKernelExC of phase 0 with one launch attribute.
  cudaError_t launch_with(const cudaLaunchAttribute& attribute, dim3 grid, dim3 block, std::size_t smem,
                          cudaStream_t stream, void** args) const {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = const_cast<cudaLaunchAttribute*>(&attribute);
    config.numAttrs = 1;
    return cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel()), args);
  }

  static constexpr int kMaxDevices = 64;
  std::shared_ptr<CUlib_st> library_;
  std::array<cudaKernel_t, kMaxPhases> phase_kernels_ = {};  // [0]: the kernel the binary names
  int phase_count_ = 0;
  KernelAttributes attributes_;
  // co_resident_blocks per device ordinal, plus one (0: not yet asked); shared by copies.
  std::shared_ptr<std::array<std::atomic<int>, kMaxDevices>> co_resident_;
  // active_clusters per device ordinal, plus one (0: not yet asked); shared by copies.
  std::shared_ptr<std::array<std::atomic<int>, kMaxDevices>> active_clusters_;
};

}  // namespace kvtune::detail
