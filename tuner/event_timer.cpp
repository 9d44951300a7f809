#include "tuner/event_timer.h"

#include "core/cuda_check.h"

namespace kvtune::tuner {

EventTimer::EventTimer() {
  detail::cuda_check(cudaEventCreate(&start_), "cudaEventCreate");
  try {
    detail::cuda_check(cudaEventCreate(&stop_), "cudaEventCreate");
  } catch (...) {
    cudaEventDestroy(start_);
    throw;
  }
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void EventTimer::start(cudaStream_t stream) { detail::cuda_check(cudaEventRecord(start_, stream), "cudaEventRecord"); }

void EventTimer::stop(cudaStream_t stream) { detail::cuda_check(cudaEventRecord(stop_, stream), "cudaEventRecord"); }

double EventTimer::elapsed_ms() const {
  float ms = 0;
  detail::cuda_check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
  detail::cuda_check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
  return ms;
}

}  // namespace kvtune::tuner
