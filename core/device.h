#pragma once
// The identity of a GPU as far as tuning results are concerned.

#include <cstdint>
#include <string>

namespace kvtune::detail {

/// The model of a GPU and the software that tunes on it: what the fingerprint read from a device
/// and the cache's row of a device (cache::DeviceRow) both hold.
struct DeviceModel {
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
  int driver_version = 0;  // cudaDriverGetVersion
  int nvrtc_version = 0;   // major * 1000 + minor * 10
  std::string kvtune_version;
};

struct DeviceFingerprint : DeviceModel {
  int ordinal = 0;
  int memory_bus_bits = 0;
  int max_smem_per_block_optin = 0;

  /// Stable id: a hash of the model and the memory bus width (not the ordinal). Results are keyed
  /// by it.
  std::string id() const;
  /// "sm_90"
  std::string arch() const;
  std::string to_json() const;
};

/// Reads the fingerprint of `ordinal`; throws kvtune::Error with a clear "no CUDA device" message
/// where there is no device or driver.
DeviceFingerprint read_fingerprint(int ordinal);

/// Number of CUDA devices; throws kvtune::Error when the driver is missing or too old.
int device_count();

/// The current device of the calling thread.
int current_device();

}  // namespace kvtune::detail
