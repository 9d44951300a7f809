#include "core/nvml.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>

namespace kvtune::detail {
namespace {

// The few NVML entry points used, with the C ABI the driver's library exports (nvml.h).
using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlByBusId = int (*)(const char*, NvmlDevice*);
using NvmlClock = int (*)(NvmlDevice, int, unsigned*);
using NvmlTemperature = int (*)(NvmlDevice, int, unsigned*);
using NvmlPower = int (*)(NvmlDevice, unsigned*);
constexpr int kNvmlSuccess = 0;
constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;

struct Nvml {
  NvmlByBusId by_bus_id = nullptr;
  NvmlClock clock = nullptr;
  NvmlTemperature temperature = nullptr;
  NvmlPower power = nullptr;
  bool ready = false;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    const auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
    n.by_bus_id = reinterpret_cast<NvmlByBusId>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock = reinterpret_cast<NvmlClock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    n.temperature = reinterpret_cast<NvmlTemperature>(dlsym(lib, "nvmlDeviceGetTemperature"));
    n.power = reinterpret_cast<NvmlPower>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    n.ready = init != nullptr && n.by_bus_id != nullptr && init() == kNvmlSuccess;
    // The library stays loaded and initialized for the process (NVML is reference counted).
  });
  return n;
}

}  // namespace

GpuConditions read_gpu_conditions(int ordinal) {
  GpuConditions c;
  const Nvml& n = nvml();
  if (!n.ready) return c;
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return c;
  }
  NvmlDevice device = nullptr;
  if (n.by_bus_id(bus_id, &device) != kNvmlSuccess) return c;
  unsigned v = 0;
  if (n.clock != nullptr && n.clock(device, kClockSm, &v) == kNvmlSuccess) c.sm_clock_mhz = static_cast<int>(v);
  if (n.clock != nullptr && n.clock(device, kClockMem, &v) == kNvmlSuccess) c.mem_clock_mhz = static_cast<int>(v);
  if (n.temperature != nullptr && n.temperature(device, kTemperatureGpu, &v) == kNvmlSuccess)
    c.temperature_c = static_cast<int>(v);
  if (n.power != nullptr && n.power(device, &v) == kNvmlSuccess) c.power_w = v / 1000.0;
  return c;
}

}  // namespace kvtune::detail
