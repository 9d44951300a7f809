#include "core/device.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/cuda_check.h"
#include "core/hash.h"
#include "core/nvrtc.h"

namespace kvtune::detail {

std::string DeviceFingerprint::id() const {
  return hash_hex(fmt::format("{}|{}.{}|{}|{}|{}|{}|{}|{}|{}", name, cc_major, cc_minor, sm_count, l2_bytes,
                              memory_bytes, memory_bus_bits, driver_version, nvrtc_version, kvtune_version));
}

std::string DeviceFingerprint::arch() const { return fmt::format("sm_{}{}", cc_major, cc_minor); }

std::string DeviceFingerprint::to_json() const {
  return nlohmann::json{{"id", id()},
                        {"name", name},
                        {"compute_capability", fmt::format("{}.{}", cc_major, cc_minor)},
                        {"sm_count", sm_count},
                        {"l2_bytes", l2_bytes},
                        {"memory_bytes", memory_bytes},
                        {"memory_bus_bits", memory_bus_bits},
                        {"max_smem_per_block_optin", max_smem_per_block_optin},
                        {"driver_version", driver_version},
                        {"nvrtc_version", nvrtc_version},
                        {"kvtune_version", kvtune_version}}
      .dump();
}

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(Error::Context{"device", "", "", "", ""},
                fmt::format("no CUDA device available: {} ({}); kvtune needs an NVIDIA GPU and driver "
                            "(compute capability 8.0 or newer)",
                            cudaGetErrorString(status), cudaGetErrorName(status)));
  }
  if (count == 0)
    throw Error(Error::Context{"device", "", "", "", ""}, "no CUDA device available: the driver reports 0 devices");
  return count;
}

int current_device() {
  device_count();
  int ordinal = 0;
  cuda_check(cudaGetDevice(&ordinal), "cudaGetDevice");
  return ordinal;
}

DeviceFingerprint read_fingerprint(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count)
    throw Error(Error::Context{"device", "", "", "", "device"},
                fmt::format("device ordinal {} out of range (0..{})", ordinal, count - 1));
  DeviceFingerprint f;
  f.ordinal = ordinal;
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  f.name = prop.name;
  f.cc_major = prop.major;
  f.cc_minor = prop.minor;
  f.sm_count = prop.multiProcessorCount;
  f.l2_bytes = prop.l2CacheSize;
  f.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  f.memory_bus_bits = prop.memoryBusWidth;
  f.max_smem_per_block_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
  cuda_check(cudaDriverGetVersion(&f.driver_version), "cudaDriverGetVersion");
  f.nvrtc_version = nvrtc_version();
  f.kvtune_version = KVTUNE_VERSION;
  if (f.cc_major < 8)
    throw Error(Error::Context{"device", "", "", device_label(ordinal), ""},
                fmt::format("compute capability {}.{} is not supported: kvtune needs 8.0 or newer", f.cc_major,
                            f.cc_minor));
  return f;
}

}  // namespace kvtune::detail
