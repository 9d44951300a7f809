// The background policy's worker: one thread per context, started on its first job, running
// queued tunings one at a time. A key is queued at most once in a context's life (a tuning that
// failed is not retried by this context). Workers still running at process exit are stopped
// (atexit) before the CUDA runtime tears down.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace kvtune::detail {

class BackgroundWorker {
 public:
  using Log = std::function<void(const char* level, const std::string& message)>;
  explicit BackgroundWorker(Log log) : log_(std::move(log)) {}
  ~BackgroundWorker() { stop(); }
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  // Queues `job` under `key` unless that key is queued already or the worker stopped; a job
  // that throws is logged and the worker goes on.
  void enqueue(const std::string& key, std::function<void()> job);
  // Returns once the queue is empty and no job runs (or the worker stopped).
  void wait_idle();
  // Drops the queue, lets a running job finish and joins the thread. Idempotent.
  void stop();

 private:
  void start();  // under mutex_
  void run();

  Log log_;
  std::mutex mutex_;
  std::condition_variable queue_cv_, idle_cv_;
  std::deque<std::pair<std::string, std::function<void()>>> queue_;  // (key, job)
  std::set<std::string> queued_keys_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
  std::function<void()> stop_at_exit_;
};

}  // namespace kvtune::detail
