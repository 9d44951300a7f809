#pragma once
// Fixtures of the cache store's tests (test_cache.cpp, test_cache_schema.cpp): sample devices,
// winners, binaries and trials, a populated cache file, and comparisons of what a store returns.

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "cache/store.h"
#include "cache_fixtures.h"

namespace kvtune::test {

using kvtune::cache::Binary;
using kvtune::cache::DeviceRow;
using kvtune::cache::Lease;
using kvtune::cache::RecordedProblem;
using kvtune::cache::Store;
using kvtune::cache::Trial;
using kvtune::cache::TuningRun;
using kvtune::cache::Winner;

inline std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

inline mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Files in `dir` named `<name>.<kind>-<seconds>[...]`, without their -wal/-shm siblings.
inline std::vector<std::string> set_aside_files(const fs::path& dir, const std::string& name,
                                                const std::string& kind) {
  std::vector<std::string> found;
  const std::string prefix = name + "." + kind + "-";
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) != 0) continue;
    if (file.size() > 4 &&
        (file.substr(file.size() - 4) == "-wal" || file.substr(file.size() - 4) == "-shm")) {
      continue;
    }
    found.push_back(entry.path().string());
  }
  return found;
}

inline DeviceRow sample_device() {
  DeviceRow d;
  d.id = "dev-h100";
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.l2_bytes = 50331648;
  d.memory_bytes = 85045870592;
  d.driver_version = 12040;
  d.nvrtc_version = 12040;
  d.kvtune_version = "0.1.0";
  d.json = R"({"name":"NVIDIA H100 80GB HBM3"})";
  return d;
}

inline Binary sample_binary(const std::string& hash, unsigned seed = 1, std::size_t size = 3000) {
  Binary b;
  b.hash = hash;
  b.arch = "sm_90";
  b.lowered_name = "_Z9normalizeILi32EEvPKfPf";
  b.image = random_bytes(size, seed);
  b.image[100] = '\0';  // blobs carry NULs
  b.image_hash = kvtune::detail::hash_hex(b.image);
  return b;
}

inline Winner sample_winner(const std::string& problem_key, const std::string& binary_hash = "b1") {
  Winner w;
  w.op = "normalize";
  w.problem_key = problem_key;
  w.device_id = "dev-h100";
  w.template_hash = "t1";
  w.label = "tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass";
  w.config_json = R"({"tpr":32,"rpb":4})";
  w.binary_hash = binary_hash;
  w.origin = "tuned";
  w.median_ms = 0.0123;
  w.gbps = 2891.5;
  w.created_at = 1700000000;
  return w;
}

inline std::vector<Trial> sample_trials() {
  Trial ok{"tpr=32,rpb=4", R"({"tpr":32})", "ok", "", 0.0123, 0.02, 2891.5};
  Trial failed{
      "tpr=64,rpb=8", R"({"tpr":64})", "compile_failed", "error: too many resources", -1, 0, 0};
  Trial slow{"tpr=8,rpb=1", R"({"tpr":8})", "ok", "", 0.5, 0.1, 70.25};
  return {ok, failed, slow};
}

// Writes a kvtune cache with a few results and closes it.
inline void make_cache(const std::string& path, int results = 3) {
  auto store = Store::open(path);
  REQUIRE_FALSE(store->in_memory());
  for (int i = 0; i < results; ++i) {
    const std::string b = "b" + std::to_string(i);
    store->put_result(sample_winner("key" + std::to_string(i), b),
                      sample_binary(b, static_cast<unsigned>(i), 8000), sample_trials());
  }
}

// Opening `path` must set the file aside as `kind`, keep its bytes, and start a working cache.
inline void check_set_aside(const TempDir& dir, const std::string& path, const std::string& bytes,
                     const std::string& kind) {
  LogCapture log;
  auto store = Store::open(path, log.fn());
  INFO(log.all());
  REQUIRE_FALSE(store->in_memory());
  CHECK(store->path() == path);
  CHECK(log.has("warn", path));
  const auto aside = set_aside_files(dir.path(), fs::path(path).filename().string(), kind);
  REQUIRE(aside.size() == 1);
  CHECK(read_bytes(aside[0]) == bytes);
  CHECK(log.has("warn", aside[0]));

  // The new cache works and is a kvtune cache.
  CHECK(store->schema_version() == Store::kSchemaVersion);
  CHECK(store->winners().empty());
  store->put_result(sample_winner("after"), sample_binary("b1"), sample_trials());
  store.reset();
  auto reopened = Store::open(path);
  CHECK(reopened->find_winner("after", "dev-h100", "t1").has_value());
  CHECK(set_aside_files(dir.path(), fs::path(path).filename().string(), kind).size() == 1);
}

inline bool same_winner(const Winner& a, const Winner& b) {
  return a.op == b.op && a.problem_key == b.problem_key && a.device_id == b.device_id &&
         a.template_hash == b.template_hash && a.label == b.label &&
         a.config_json == b.config_json && a.binary_hash == b.binary_hash && a.origin == b.origin &&
         a.median_ms == b.median_ms && a.gbps == b.gbps && a.created_at == b.created_at;
}

inline void check_trials_equal(const std::vector<Trial>& got, const std::vector<Trial>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].label == want[i].label);
    CHECK(got[i].config_json == want[i].config_json);
    CHECK(got[i].status == want[i].status);
    CHECK(got[i].message == want[i].message);
    CHECK(got[i].median_ms == want[i].median_ms);
    CHECK(got[i].spread == want[i].spread);
    CHECK(got[i].gbps == want[i].gbps);
  }
}

}  // namespace kvtune::test
