#pragma once
// The two ceilings of the roofline, measured on the current device the way DESIGN.md describes:
// a device-to-device cudaMemcpyAsync of 1 GiB (bytes read + written per second) and a kernel of
// independent f32 FMA chains (2 FLOPs per FMA). kvtune-tune stores them in the cache; kvtune-bench
// and kvtune-demo measure with the same two functions.

#include <cuda_runtime_api.h>

#include <string>

namespace kvtune::tools {

struct MeasuredCeilings {
  double copy_gbps = 0;   ///< 0 when it could not be measured (see `note`)
  double fma_gflops = 0;  ///< 0 when it could not be measured
  std::string note;       ///< why a value is missing, empty when both were measured
};

/// Device-to-device cudaMemcpyAsync of 1 GiB on `stream`: bytes read + written per second, in GB/s
/// (the median of `samples` timed copies after one untimed). Throws kvtune::Error.
double measure_copy_gbps(cudaStream_t stream, int samples = 7);

/// f32 FMA rate of the current device in GFLOP/s: 8 independent FMA chains per thread at full
/// occupancy, compiled for `arch` ("sm_90"); the median of `samples` timed launches after one
/// untimed. Throws kvtune::Error.
double measure_fma_gflops(const std::string& arch, cudaStream_t stream, int samples = 5);

/// Both, on the calling thread's current device (`arch` as "sm_90" for the FMA kernel).
/// Never throws for a failed measurement: the value stays 0 and `note` says why.
MeasuredCeilings measure_ceilings(const std::string& arch);

}  // namespace kvtune::tools
