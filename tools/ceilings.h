#pragma once
// The two ceilings of the roofline, measured on the current device the way DESIGN.md describes:
// a device-to-device cudaMemcpyAsync of 1 GiB (bytes read + written per second) and a kernel of
// independent f32 FMA chains (2 FLOPs per FMA).

#include <string>

namespace kvtune::tools {

struct MeasuredCeilings {
  double copy_gbps = 0;   ///< 0 when it could not be measured (see `note`)
  double fma_gflops = 0;  ///< 0 when it could not be measured
  std::string note;       ///< why a value is missing, empty when both were measured
};

/// Measures on the calling thread's current device (`arch` as "sm_90" for the FMA kernel).
/// Never throws for a failed measurement: the value stays 0 and `note` says why.
MeasuredCeilings measure_ceilings(const std::string& arch);

}  // namespace kvtune::tools
