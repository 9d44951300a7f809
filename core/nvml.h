#pragma once
// Read-only GPU clocks, temperature and power through NVML, recorded with each tuning run so that
// a result can be judged against the conditions it was measured in. NVML is the driver's library
// (libnvidia-ml.so.1), opened at run time: a machine without it reads -1 everywhere. kvtune never
// changes clocks or any other GPU setting.

namespace kvtune::detail {

struct GpuConditions {
  int sm_clock_mhz = -1;
  int mem_clock_mhz = -1;
  int temperature_c = -1;
  double power_w = -1;
};

/// The current conditions of CUDA device `ordinal`; fields NVML cannot give stay -1.
GpuConditions read_gpu_conditions(int ordinal);

}  // namespace kvtune::detail
