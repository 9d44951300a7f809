// Per-device state of a Context (devices.h).

#include "lib/src/devices.h"

#include <limits>

#include <fmt/format.h>

namespace kvtune::detail {

Devices::~Devices() {
  for (const auto& d : storage_)
    if (d->workspace_pool != nullptr) cudaMemPoolDestroy(d->workspace_pool);
}

DeviceState& Devices::set_up(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxDevices)
    throw Error(Error::Context{"context", "", "", "", "device"},
                fmt::format("device ordinal {} out of range", ordinal));
  DeviceState* d = devices_[ordinal].load(std::memory_order_acquire);
  if (d == nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    d = devices_[ordinal].load(std::memory_order_relaxed);
    if (d == nullptr) {
      storage_.push_back(std::make_unique<DeviceState>());
      d = storage_.back().get();
      d->ordinal = ordinal;
      devices_[ordinal].store(d, std::memory_order_release);
    }
  }
  std::call_once(d->init, [&] {
    d->fingerprint = read_fingerprint(ordinal);
    d->device_id = d->fingerprint.id();
    cache::DeviceRow row;
    row.id = d->device_id;
    row.name = d->fingerprint.name;
    row.cc_major = d->fingerprint.cc_major;
    row.cc_minor = d->fingerprint.cc_minor;
    row.sm_count = d->fingerprint.sm_count;
    row.l2_bytes = d->fingerprint.l2_bytes;
    row.memory_bytes = d->fingerprint.memory_bytes;
    row.driver_version = d->fingerprint.driver_version;
    row.nvrtc_version = d->fingerprint.nvrtc_version;
    row.kvtune_version = d->fingerprint.kvtune_version;
    row.json = d->fingerprint.to_json();
    try {
      state_.store->put_device(row);
      if (auto ceilings = state_.store->find_ceilings(d->device_id); ceilings && ceilings->copy_gbps > 0)
        d->bandwidth = ceilings->copy_gbps * 1e9;
    } catch (const Error& e) {
      state_.log("warn", std::string("could not record the device in the cache: ") + e.what());
    }
    d->ready.store(true, std::memory_order_release);
  });
  return *d;
}

cudaMemPool_t Devices::workspace_pool(int ordinal) {
  DeviceState& d = get(ordinal);
  std::call_once(d.pool_init, [&] {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = ordinal;
    cudaMemPool_t pool = nullptr;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
      cudaGetLastError();
      state_.log("warn", fmt::format("device {}: no memory pool of kvtune's own; workspaces use the default pool",
                                     ordinal));
      return;
    }
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    d.workspace_pool = pool;
  });
  return d.workspace_pool;
}

}  // namespace kvtune::detail
