#pragma once
// Fixtures of the tests that work on files (cache, tools, bench): a private temporary directory, a
// log recorder, byte and SQL access to a file the way another program would have it.

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cache/store.h"

namespace kvtune::test {

namespace fs = std::filesystem;

// A fresh directory under the system temp directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device entropy;
    path_ =
        fs::temp_directory_path() / ("kvtune-cache-test-" + std::to_string(::getpid()) + "-" +
                                     std::to_string(counter++) + "-" + std::to_string(entropy()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    // A forked child that exits runs the destructors of what its parent made (a static TempDir,
    // a test's own): only the process that made the folder removes it.
    if (::getpid() != owner_) return;
    std::error_code ignored;
    // Restore write permission where a test took it away, so that everything can be removed.
    for (auto it = fs::recursive_directory_iterator(path_, ignored);
         it != fs::recursive_directory_iterator(); it.increment(ignored)) {
      if (it->is_directory(ignored)) ::chmod(it->path().c_str(), 0700);
    }
    ::chmod(path_.c_str(), 0700);
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
  pid_t owner_ = ::getpid();
};

// Records what the store logs.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> entries;

  kvtune::cache::LogFn fn() {
    return [this](const char* level, const std::string& message) {
      std::lock_guard<std::mutex> lock(mutex);
      entries.emplace_back(level, message);
    };
  }
  bool has(const std::string& level, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [l, m] : entries) {
      if (l == level && m.find(text) != std::string::npos) return true;
    }
    return false;
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string s;
    for (const auto& [l, m] : entries) s += l + ": " + m + "\n";
    return s;
  }
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs SQL on a file through the plain SQLite API, the way another program would.
inline void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  INFO(message);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace kvtune::test
