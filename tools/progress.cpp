#include "tools/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "tools/common.h"

namespace kvtune::tools {

Progress::Progress(int total, bool bar, bool quiet, std::FILE* out)
    : out_(out), total_(total), bar_(bar && !quiet), quiet_(quiet) {}

Progress::~Progress() { close(); }

void Progress::start(int worker, const std::string& what, long variants) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_[worker] = InFlight{what, variants, 0, ""};
  draw(true);
}

void Progress::candidate(int worker, long done, long total, const std::string& last) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(worker);
  if (it == in_flight_.end()) return;
  it->second.done = done;
  if (total > 0) it->second.variants = total;
  it->second.last = last;
  draw(false);
}

void Progress::finish(int worker, const std::string& line, bool skipped) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.erase(worker);
  ++finished_;
  if (skipped) ++skipped_;
  if (quiet_) return;
  if (bar_visible_) std::fputs("\r\033[K", out_);
  bar_visible_ = false;
  std::fprintf(out_, "%s\n", line.c_str());
  draw(true);
}

void Progress::note(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (quiet_) return;
  if (bar_visible_) std::fputs("\r\033[K", out_);
  bar_visible_ = false;
  std::fprintf(out_, "%s\n", line.c_str());
  draw(true);
}

void Progress::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bar_visible_) {
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
  }
  bar_visible_ = false;
  bar_ = false;
}

std::string Progress::bar_text() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // Work is counted in problems; a problem in flight counts by its share of variants done.
  double done = finished_ - skipped_;
  for (const auto& [worker, f] : in_flight_) {
    (void)worker;
    if (f.variants > 0) done += std::min(1.0, double(f.done) / double(f.variants));
  }
  const double remaining = double(total_ - finished_) - (done - double(finished_ - skipped_));
  const std::string eta = done > 0.05 ? format_duration(elapsed / done * remaining) : "?";
  constexpr int kWidth = 24;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * finished_ / total_) : kWidth;
  // Elapsed time and ETA before the problems in flight: a long line is cut at the terminal's width.
  std::string text = fmt::format("[{}{}] {}/{} problems, {} elapsed, ETA {}", std::string(filled, '#'),
                                 std::string(kWidth - filled, '.'), finished_, total_, format_duration(elapsed), eta);
  for (const auto& [worker, f] : in_flight_) {
    text += fmt::format(" | gpu{}: {}", worker, f.what);
    if (f.variants > 0) text += fmt::format(" [{}/{}]", f.done, f.variants);
    if (!f.last.empty()) text += " " + f.last;
  }
  return text;
}

void Progress::draw(bool force) {
  if (!bar_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  // One terminal row: a wrapped bar could not be redrawn in place.
  std::string text = bar_text();
  struct winsize size {};
  const std::size_t columns =
      ::ioctl(::fileno(out_), TIOCGWINSZ, &size) == 0 && size.ws_col > 1 ? size.ws_col - 1 : 159;
  if (text.size() > columns) text.resize(columns);
  std::fprintf(out_, "\r\033[K%s", text.c_str());
  std::fflush(out_);
  bar_visible_ = true;
}

}  // namespace kvtune::tools
