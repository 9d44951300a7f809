#pragma once
// kvtune-bench's measurements: CUDA-event timing with warm-up and medians, CUDA-graph replay for
// short calls and an empty kernel's launch time, plus the random fill of input buffers
// (NVRTC-compiled support kernels, through kvtune's compiler). The roofline's ceilings (copy
// bandwidth, FMA rate) are tools/ceilings.h's, as kvtune-tune measures them.

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "kvtune/kvtune.h"
#include "core/module.h"
#include "tools/bench_report.h"

namespace kvtune::bench {

struct TimingOptions {
  int samples = 21;                 // timed batches; the median is reported
  double warmup_ms = 2.0;           // untimed calls first (at least one per slot)
  double batch_ms = 1.0;            // each event-timed batch lasts at least this long
  bool graphs = true;               // CUDA-graph replay for short calls
  double graph_threshold_us = 100;  // calls shorter than this are timed by graph replay (device time,
                                    // not a host-bound dispatch rate; peers use the same)
  double graph_batch_ms = 0.5;      // calls captured into one graph: at least this long
};

/// One call of the timed operation on input/output set `slot`; throws on failure.
using Call = std::function<void(int slot, cudaStream_t stream)>;

/// Times `call`, rotating over `slots` sets: warm-up, an estimate, then `samples` batches timed
/// with CUDA events; by CUDA-graph replay (batch captured once) when the estimate is below the
/// threshold or `force_graph`. Falls back to events, noted in the message, when capture fails.
Timing measure(const Call& call, int slots, cudaStream_t stream, const TimingOptions& options, bool force_graph = false);

/// Throws kvtune::Error naming `what` when `status` is an error.
void check(cudaError_t status, const char* what);

/// Kernels kvtune-bench needs besides kvtune's: random fill, empty kernel.
class SupportKernels {
 public:
  explicit SupportKernels(const std::string& arch);
  /// offset + scale * U[-1, 1) in `dtype`, a hash of (seed, index): never all zeros.
  void fill(void* out, long long count, DType dtype, unsigned long long seed, float offset, float scale,
            cudaStream_t stream) const;
  /// Per-launch time of an empty kernel, by graph replay or by back-to-back launches.
  Timing empty_launch(cudaStream_t stream, const TimingOptions& options, bool graph) const;

 private:
  detail::LoadedKernel fill_, empty_;
};

}  // namespace kvtune::bench
