#pragma once
// The one CUDA-event timer: the tuner, the roofline ceilings (tools/ceilings.h), kvtune-bench and
// kvtune-demo time GPU work on a stream with it.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "core/cuda_check.h"

namespace kvtune::tuner {

/// A pair of CUDA events around work enqueued on one stream. Failures throw kvtune::Error.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  /// Records the start event on `stream`.
  void start(cudaStream_t stream);
  /// Records the stop event on `stream`.
  void stop(cudaStream_t stream);
  /// Waits for the stop event; the milliseconds between start and stop.
  double elapsed_ms() const;

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

/// Median milliseconds per call of `body` (which enqueues its work on `stream`): one untimed call
/// and a wait, then `samples` timed batches of `batch` calls each.
template <class Body>
double median_ms(Body&& body, cudaStream_t stream, int batch, int samples) {
  EventTimer timer;
  body();
  detail::cuda_check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> times;
  for (int s = 0; s < samples; ++s) {
    timer.start(stream);
    for (int i = 0; i < batch; ++i) body();
    timer.stop(stream);
    times.push_back(timer.elapsed_ms() / batch);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace kvtune::tuner
