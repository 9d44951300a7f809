// The background policy's worker (background_worker.h).

#include "lib/src/background_worker.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <vector>

#include <fmt/format.h>

namespace kvtune::detail {
namespace {

// Background workers still running at exit are stopped before the CUDA runtime tears down.
std::mutex g_workers_mutex;
std::vector<std::function<void()>*> g_worker_stops;
void stop_all_workers() {
  std::vector<std::function<void()>*> stops;
  {
    std::lock_guard<std::mutex> lock(g_workers_mutex);
    stops.swap(g_worker_stops);
  }
  for (auto* stop : stops) (*stop)();
}

}  // namespace

void BackgroundWorker::enqueue(const std::string& key, std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || !queued_keys_.insert(key).second) return;
  if (!thread_.joinable()) start();
  queue_.emplace_back(key, std::move(job));
  queue_cv_.notify_one();
}

void BackgroundWorker::start() {
  thread_ = std::thread([this] { run(); });
  stop_at_exit_ = [this] { stop(); };
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(stop_all_workers); });
  g_worker_stops.push_back(&stop_at_exit_);
}

void BackgroundWorker::run() {
  for (;;) {
    std::pair<std::string, std::function<void()>> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    try {
      job.second();
    } catch (const std::exception& e) {
      log_("warn", fmt::format("background tuning of {} failed: {}", job.first, e.what()));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
    idle_cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  busy_ = false;
  idle_cv_.notify_all();
}

void BackgroundWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
    queue_cv_.notify_all();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  std::lock_guard<std::mutex> lock(g_workers_mutex);
  g_worker_stops.erase(std::remove(g_worker_stops.begin(), g_worker_stops.end(), &stop_at_exit_),
                       g_worker_stops.end());
}

void BackgroundWorker::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] { return stopping_ || (queue_.empty() && !busy_); });
}

}  // namespace kvtune::detail
