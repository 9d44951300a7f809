// Cache store: round trips in memory and on disk, replacement, schema bookkeeping and migration
// from schema-1 and schema-2 files, file modes, the failure model (corrupt, truncated, foreign,
// newer, untrusted, unwritable files), damaged binaries, several threads and processes writing one
// file at once, and what the production tuner needs: leases (within and across processes),
// recorded problems, winners of one op, batch binaries, tuning runs.

#include <fcntl.h>
#include <sqlite3.h>  // tests build damaged and foreign databases by hand
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/store.h"
#include "kvtune/error.h"
#include "core/hash.h"
#include "cache_fixtures.h"

namespace fs = std::filesystem;
using kvtune::test::exec_sql;
using kvtune::test::LogCapture;
using kvtune::test::read_bytes;
using kvtune::test::TempDir;
using kvtune::test::write_bytes;
using kvtune::cache::Binary;
using kvtune::cache::DeviceRow;
using kvtune::cache::Lease;
using kvtune::cache::RecordedProblem;
using kvtune::cache::Store;
using kvtune::cache::Trial;
using kvtune::cache::TuningRun;
using kvtune::cache::Winner;

namespace {

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Files in `dir` named `<name>.<kind>-<seconds>[...]`, without their -wal/-shm siblings.
std::vector<std::string> set_aside_files(const fs::path& dir, const std::string& name,
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

DeviceRow sample_device() {
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

Binary sample_binary(const std::string& hash, unsigned seed = 1, std::size_t size = 3000) {
  Binary b;
  b.hash = hash;
  b.arch = "sm_90";
  b.lowered_name = "_Z9normalizeILi32EEvPKfPf";
  b.image = random_bytes(size, seed);
  b.image[100] = '\0';  // blobs carry NULs
  b.image_hash = kvtune::detail::hash_hex(b.image);
  return b;
}

Winner sample_winner(const std::string& problem_key, const std::string& binary_hash = "b1") {
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

std::vector<Trial> sample_trials() {
  Trial ok{"tpr=32,rpb=4", R"({"tpr":32})", "ok", "", 0.0123, 0.02, 2891.5};
  Trial failed{
      "tpr=64,rpb=8", R"({"tpr":64})", "compile_failed", "error: too many resources", -1, 0, 0};
  Trial slow{"tpr=8,rpb=1", R"({"tpr":8})", "ok", "", 0.5, 0.1, 70.25};
  return {ok, failed, slow};
}

// Writes a kvtune cache with a few results and closes it.
void make_cache(const std::string& path, int results = 3) {
  auto store = Store::open(path);
  REQUIRE_FALSE(store->in_memory());
  for (int i = 0; i < results; ++i) {
    const std::string b = "b" + std::to_string(i);
    store->put_result(sample_winner("key" + std::to_string(i), b),
                      sample_binary(b, static_cast<unsigned>(i), 8000), sample_trials());
  }
}

// Opening `path` must set the file aside as `kind`, keep its bytes, and start a working cache.
void check_set_aside(const TempDir& dir, const std::string& path, const std::string& bytes,
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

bool same_winner(const Winner& a, const Winner& b) {
  return a.op == b.op && a.problem_key == b.problem_key && a.device_id == b.device_id &&
         a.template_hash == b.template_hash && a.label == b.label &&
         a.config_json == b.config_json && a.binary_hash == b.binary_hash && a.origin == b.origin &&
         a.median_ms == b.median_ms && a.gbps == b.gbps && a.created_at == b.created_at;
}

void check_trials_equal(const std::vector<Trial>& got, const std::vector<Trial>& want) {
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

}  // namespace

TEST_CASE("cache: in-memory round trip of device, winner, binary and trials", "[cache]") {
  for (const std::string path : {"", ":memory:"}) {
    auto store = Store::open(path);
    CHECK(store->in_memory());
    CHECK(store->path().empty());

    CHECK_FALSE(store->find_device("dev-h100").has_value());
    const DeviceRow device = sample_device();
    store->put_device(device);
    const auto found_device = store->find_device("dev-h100");
    REQUIRE(found_device.has_value());
    CHECK(found_device->name == device.name);
    CHECK(found_device->cc_major == 9);
    CHECK(found_device->cc_minor == 0);
    CHECK(found_device->sm_count == 132);
    CHECK(found_device->l2_bytes == device.l2_bytes);
    CHECK(found_device->memory_bytes == device.memory_bytes);
    CHECK(found_device->driver_version == 12040);
    CHECK(found_device->nvrtc_version == 12040);
    CHECK(found_device->kvtune_version == "0.1.0");
    CHECK(found_device->json == device.json);

    DeviceRow updated = device;
    updated.driver_version = 12050;
    store->put_device(updated);
    CHECK(store->find_device("dev-h100")->driver_version == 12050);

    const Winner winner = sample_winner("normalize:rows=4096,cols=768");
    const Binary binary = sample_binary("b1");
    store->put_result(winner, binary, sample_trials());

    const auto found = store->find_winner(winner.problem_key, "dev-h100", "t1");
    REQUIRE(found.has_value());
    CHECK(same_winner(*found, winner));
    CHECK_FALSE(store->find_winner(winner.problem_key, "dev-h100", "t2").has_value());
    CHECK_FALSE(store->find_winner(winner.problem_key, "dev-other", "t1").has_value());

    const auto found_binary = store->find_binary("b1");
    REQUIRE(found_binary.has_value());
    CHECK(found_binary->hash == "b1");
    CHECK(found_binary->arch == "sm_90");
    CHECK(found_binary->lowered_name == binary.lowered_name);
    CHECK(found_binary->image == binary.image);
    CHECK(found_binary->image_hash == binary.image_hash);
    CHECK_FALSE(store->find_binary("nope").has_value());

    check_trials_equal(store->trials(winner.problem_key, "dev-h100", "t1"), sample_trials());
    CHECK(store->trials(winner.problem_key, "dev-h100", "t2").empty());
    REQUIRE(store->winners().size() == 1);
  }
}

TEST_CASE("cache: result without binary, image_hash filled in, bad binaries refused", "[cache]") {
  auto store = Store::open("");
  Winner imported = sample_winner("k", "");
  imported.origin = "imported";
  imported.created_at = 0;  // the store stamps it
  store->put_result(imported, std::nullopt, {});
  const auto found = store->find_winner("k", "dev-h100", "t1");
  REQUIRE(found.has_value());
  CHECK(found->binary_hash.empty());
  CHECK(found->origin == "imported");
  CHECK(found->created_at > 1600000000);
  CHECK(store->trials("k", "dev-h100", "t1").empty());

  Binary unhashed = sample_binary("b2");
  unhashed.image_hash.clear();
  store->put_binary(unhashed);
  const auto b2 = store->find_binary("b2");
  REQUIRE(b2.has_value());
  CHECK(b2->image_hash == kvtune::detail::hash_hex(unhashed.image));

  Binary wrong = sample_binary("b3");
  wrong.image_hash = "0000000000000000";
  CHECK_THROWS_AS(store->put_binary(wrong), kvtune::Error);
  // The whole result is one transaction: a refused binary stores nothing.
  CHECK_THROWS_AS(store->put_result(sample_winner("k3", "b3"), wrong, sample_trials()),
                  kvtune::Error);
  CHECK_FALSE(store->find_winner("k3", "dev-h100", "t1").has_value());
  CHECK(store->trials("k3", "dev-h100", "t1").empty());
  CHECK_FALSE(store->find_binary("b3").has_value());
}

TEST_CASE("cache: a newer winner replaces the old one and trials accumulate", "[cache]") {
  auto store = Store::open("");
  store->put_result(sample_winner("k"), sample_binary("b1"), sample_trials());
  Winner newer = sample_winner("k", "b2");
  newer.label = "tpr=64,rpb=2";
  newer.median_ms = 0.01;
  newer.origin = "heuristic";
  store->put_result(newer, sample_binary("b2", 2), {sample_trials()[2]});

  const auto found = store->find_winner("k", "dev-h100", "t1");
  REQUIRE(found.has_value());
  CHECK(same_winner(*found, newer));
  CHECK(store->winners().size() == 1);
  const auto trials = store->trials("k", "dev-h100", "t1");
  REQUIRE(trials.size() == 4);
  CHECK(trials[0].label == sample_trials()[0].label);
  CHECK(trials[3].label == sample_trials()[2].label);
  CHECK(store->find_binary("b1").has_value());  // binaries stay; they are keyed by content
  CHECK(store->find_binary("b2").has_value());
}

TEST_CASE("cache: winners() is ordered by op, then problem key", "[cache]") {
  auto store = Store::open("");
  for (const auto& [op, key] : std::vector<std::pair<std::string, std::string>>{
           {"normalize", "n-b"}, {"dwconv", "d-z"}, {"normalize", "n-a"}, {"dwconv", "d-a"}}) {
    Winner w = sample_winner(key, "");
    w.op = op;
    store->put_result(w, std::nullopt, {});
  }
  std::vector<std::string> order;
  for (const auto& w : store->winners()) order.push_back(w.op + "/" + w.problem_key);
  CHECK(order ==
        std::vector<std::string>{"dwconv/d-a", "dwconv/d-z", "normalize/n-a", "normalize/n-b"});
}

TEST_CASE("cache: a file survives its Store (second process reads it)", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  const Winner winner = sample_winner("normalize:rows=1024,cols=37");
  const Binary binary = sample_binary("b1", 7, 50000);
  {
    LogCapture log;
    auto store = Store::open(path, log.fn());
    REQUIRE_FALSE(store->in_memory());
    CHECK(store->path() == path);
    CHECK_FALSE(log.has("warn", ""));
    store->put_device(sample_device());
    store->put_result(winner, binary, sample_trials());
  }
  REQUIRE(fs::exists(path));
  LogCapture log;
  auto store = Store::open(path, log.fn());
  REQUIRE_FALSE(store->in_memory());
  CHECK_FALSE(log.has("warn", ""));
  CHECK(store->find_device("dev-h100").has_value());
  const auto found = store->find_winner(winner.problem_key, "dev-h100", "t1");
  REQUIRE(found.has_value());
  CHECK(same_winner(*found, winner));
  const auto found_binary = store->find_binary("b1");
  REQUIRE(found_binary.has_value());
  CHECK(found_binary->image == binary.image);
  check_trials_equal(store->trials(winner.problem_key, "dev-h100", "t1"), sample_trials());
  CHECK(set_aside_files(dir.path(), "cache.db", "corrupt").empty());
}

TEST_CASE("cache: schema version is recorded in meta", "[cache]") {
  CHECK(Store::open("")->schema_version() == Store::kSchemaVersion);

  TempDir dir;
  const std::string path = dir.file("cache.db");
  CHECK(Store::open(path)->schema_version() == Store::kSchemaVersion);

  // Read it as another program would.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT key, value FROM meta ORDER BY key", -1, &select,
                             nullptr) == SQLITE_OK);
  std::vector<std::pair<std::string, int>> meta;
  while (sqlite3_step(select) == SQLITE_ROW) {
    meta.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(select, 0)),
                      sqlite3_column_int(select, 1));
  }
  sqlite3_finalize(select);
  sqlite3_close(db);
  REQUIRE(meta.size() == 2);
  CHECK(meta[0].first == "oldest_compatible_version");
  CHECK(meta[0].second >= 1);
  CHECK(meta[0].second <= Store::kSchemaVersion);
  CHECK(meta[1].first == "schema_version");
  CHECK(meta[1].second == Store::kSchemaVersion);
}

TEST_CASE("cache: new directories are 0700 and the file 0600 whatever the umask", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("a/b/cache.db");
  const mode_t old_umask = ::umask(0);
  std::unique_ptr<Store> store;
  try {
    store = Store::open(path);
    store->put_result(sample_winner("k"), sample_binary("b1"), sample_trials());
  } catch (...) {
    ::umask(old_umask);
    throw;
  }
  ::umask(old_umask);
  REQUIRE_FALSE(store->in_memory());
  CHECK(mode_of(dir.file("a")) == 0700);
  CHECK(mode_of(dir.file("a/b")) == 0700);
  CHECK(mode_of(path) == 0600);
  if (fs::exists(path + "-wal")) CHECK(mode_of(path + "-wal") == 0600);
  if (fs::exists(path + "-shm")) CHECK(mode_of(path + "-shm") == 0600);
}

TEST_CASE("cache: a file of random bytes is set aside", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  const std::string bytes = random_bytes(16384, 42);
  write_bytes(path, bytes);
  ::chmod(path.c_str(), 0600);
  check_set_aside(dir, path, bytes, "corrupt");
}

TEST_CASE("cache: a truncated database is set aside", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  make_cache(path, 20);
  REQUIRE_FALSE(fs::exists(path + "-wal"));  // the last close checkpointed everything
  const std::string whole = read_bytes(path);
  REQUIRE(whole.size() > 100000);
  const std::string truncated = whole.substr(0, whole.size() / 2);
  write_bytes(path, truncated);
  check_set_aside(dir, path, truncated, "corrupt");
}

TEST_CASE("cache: damage that only quick_check sees is set aside", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  make_cache(path, 20);
  // Overwrite the first bytes of an index page that opening never reads.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db,
                             "SELECT rootpage, (SELECT page_size FROM pragma_page_size) "
                             "FROM sqlite_master WHERE name = 'winners_by_op'",
                             -1, &select, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(select) == SQLITE_ROW);
  const long page = sqlite3_column_int(select, 0), page_size = sqlite3_column_int(select, 1);
  sqlite3_finalize(select);
  sqlite3_close(db);
  REQUIRE(page > 1);
  std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= static_cast<std::size_t>(page * page_size));
  const auto page_start = static_cast<std::size_t>((page - 1) * page_size);
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(page_start), 64, '\xee');
  write_bytes(path, bytes);
  check_set_aside(dir, path, bytes, "corrupt");
}

TEST_CASE("cache: two set-asides in a row keep both files", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  const std::string first = random_bytes(5000, 1), second = random_bytes(7000, 2);
  write_bytes(path, first);
  ::chmod(path.c_str(), 0600);
  Store::open(path).reset();
  fs::remove(path);
  write_bytes(path, second);
  ::chmod(path.c_str(), 0600);
  Store::open(path).reset();
  auto aside = set_aside_files(dir.path(), "cache.db", "corrupt");
  REQUIRE(aside.size() == 2);
  std::vector<std::string> contents{read_bytes(aside[0]), read_bytes(aside[1])};
  std::sort(contents.begin(), contents.end(),
            [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  CHECK(contents[0] == first);
  CHECK(contents[1] == second);
}

TEST_CASE("cache: another program's SQLite database is set aside", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  exec_sql(path, "CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1), (2);");
  ::chmod(path.c_str(), 0600);
  check_set_aside(dir, path, read_bytes(path), "foreign");

  SECTION("even with a table called meta") {
    TempDir other;
    const std::string path2 = other.file("cache.db");
    exec_sql(path2, "CREATE TABLE meta (name TEXT, data BLOB);");
    ::chmod(path2.c_str(), 0600);
    check_set_aside(other, path2, read_bytes(path2), "foreign");
  }
}

TEST_CASE("cache: a database of a newer, incompatible schema is set aside", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  make_cache(path);
  const int newer = Store::kSchemaVersion + 1;
  exec_sql(path, "UPDATE meta SET value = " + std::to_string(newer) +
                     " WHERE key IN ('schema_version', 'oldest_compatible_version');");
  check_set_aside(dir, path, read_bytes(path), "newer");
}

TEST_CASE("cache: a newer schema that declares itself compatible is used", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  make_cache(path);
  exec_sql(path, "UPDATE meta SET value = " + std::to_string(Store::kSchemaVersion + 1) +
                     " WHERE key = 'schema_version';");
  LogCapture log;
  auto store = Store::open(path, log.fn());
  INFO(log.all());
  REQUIRE_FALSE(store->in_memory());
  CHECK_FALSE(log.has("warn", ""));
  CHECK(store->schema_version() == Store::kSchemaVersion + 1);
  CHECK(store->find_winner("key0", "dev-h100", "t1").has_value());
  CHECK(set_aside_files(dir.path(), "cache.db", "newer").empty());
}

TEST_CASE("cache: a file others can write is not trusted and not touched", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  make_cache(path);
  for (const mode_t mode : {mode_t{0660}, mode_t{0602}}) {
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    const std::string bytes = read_bytes(path);
    LogCapture log;
    auto store = Store::open(path, log.fn());
    INFO(log.all());
    CHECK(store->in_memory());
    CHECK(store->path().empty());
    CHECK(log.has("warn", "writable by group or others"));
    CHECK(log.has("warn", "in-memory"));
    CHECK_FALSE(store->find_winner("key0", "dev-h100", "t1").has_value());
    store->put_result(sample_winner("mem"), std::nullopt, {});  // works, in memory
    CHECK(store->find_winner("mem", "dev-h100", "t1").has_value());
    store.reset();
    CHECK(read_bytes(path) == bytes);
    CHECK(mode_of(path) == mode);
    CHECK_FALSE(fs::exists(path + "-wal"));
    CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
  }
}

TEST_CASE("cache: where no file can be made, the store runs in memory", "[cache]") {
  TempDir dir;

  SECTION("a missing parent directory is created") {
    const std::string path = dir.file("x/y/z/cache.db");
    LogCapture log;
    auto store = Store::open(path, log.fn());
    CHECK_FALSE(store->in_memory());
    CHECK(fs::is_directory(dir.file("x/y/z")));
    CHECK_FALSE(log.has("warn", ""));
  }

  SECTION("a parent that is a file") {
    write_bytes(dir.file("plain"), "not a directory");
    LogCapture log;
    auto store = Store::open(dir.file("plain/cache.db"), log.fn());
    INFO(log.all());
    CHECK(store->in_memory());
    CHECK(log.has("warn", "in-memory"));
    store->put_device(sample_device());
    CHECK(store->find_device("dev-h100").has_value());
    CHECK(read_bytes(dir.file("plain")) == "not a directory");
  }

  SECTION("a path that is a directory") {
    fs::create_directories(dir.file("cache.db"));
    LogCapture log;
    auto store = Store::open(dir.file("cache.db"), log.fn());
    CHECK(store->in_memory());
    CHECK(log.has("warn", "not a regular file"));
    CHECK(fs::is_directory(dir.file("cache.db")));
  }

  // A read-only directory: tests/test_trust.cpp (opened by a child that gave root up, so that it
  // is read-only also when the tests run as root).
}

TEST_CASE("cache: a binary whose stored image was damaged is never returned", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  const Binary binary = sample_binary("b1", 3, 20000);
  {
    auto store = Store::open(path);
    store->put_result(sample_winner("k"), binary, {});
    store->put_binary(sample_binary("b2", 4));
  }
  exec_sql(path, "UPDATE binaries SET image = zeroblob(20000) WHERE hash = 'b1';");
  exec_sql(path, "UPDATE binaries SET image_hash = '0123456789abcdef' WHERE hash = 'b2';");

  LogCapture log;
  auto store = Store::open(path, log.fn());
  REQUIRE_FALSE(store->in_memory());
  CHECK_FALSE(store->find_binary("b1").has_value());
  CHECK(log.has("warn", "b1"));
  CHECK_FALSE(store->find_binary("b2").has_value());
  CHECK(log.has("warn", "b2"));
  CHECK(store->find_winner("k", "dev-h100", "t1").has_value());  // the winner itself is fine

  // Storing the binary again (after a recompile) repairs the row.
  store->put_binary(binary);
  const auto repaired = store->find_binary("b1");
  REQUIRE(repaired.has_value());
  CHECK(repaired->image == binary.image);
}

TEST_CASE("cache: one Store shared by four threads", "[cache]") {
  TempDir dir;
  auto store = Store::open(dir.file("cache.db"));
  REQUIRE_FALSE(store->in_memory());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 25; ++i) {
          const std::string key = "t" + std::to_string(t) + "-k" + std::to_string(i);
          store->put_result(sample_winner(key, ""), std::nullopt, sample_trials());
          if (!store->find_winner(key, "dev-h100", "t1")) ++failures;
          if (store->trials(key, "dev-h100", "t1").size() != 3) ++failures;
          store->winners();
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(store->winners().size() == 100);
}

TEST_CASE("cache: four threads, each with its own Store, write one file", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  constexpr int kThreads = 4, kResults = 50;
  std::atomic<int> failures{0}, fallbacks{0};
  std::mutex errors_mutex;
  std::string errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto store = Store::open(path);
        if (store->in_memory()) ++fallbacks;
        for (int i = 0; i < kResults; ++i) {
          const std::string key = "t" + std::to_string(t) + "-k" + std::to_string(i);
          const std::string b = "b" + std::to_string(i % 10);  // shared binaries: IGNORE path
          store->put_result(sample_winner(key, b), sample_binary(b, static_cast<unsigned>(i % 10)),
                            sample_trials());
          if (!store->find_winner(key, "dev-h100", "t1")) ++failures;
        }
      } catch (const std::exception& e) {
        ++failures;
        std::lock_guard<std::mutex> lock(errors_mutex);
        errors += std::string(e.what()) + "\n";
      }
    });
  }
  for (auto& thread : threads) thread.join();
  INFO(errors);
  CHECK(failures == 0);
  CHECK(fallbacks == 0);

  auto store = Store::open(path);
  REQUIRE_FALSE(store->in_memory());
  CHECK(store->winners().size() == kThreads * kResults);
  CHECK(store->trials("t3-k49", "dev-h100", "t1").size() == sample_trials().size());
  for (int i = 0; i < 10; ++i) CHECK(store->find_binary("b" + std::to_string(i)).has_value());
}

TEST_CASE("cache: four processes write one file", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("shared/cache.db");
  constexpr int kProcesses = 4, kResults = 50;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        auto store = Store::open(path);
        if (store->in_memory()) status = 2;
        for (int i = 0; i < kResults && status == 0; ++i) {
          const std::string key = "p" + std::to_string(p) + "-k" + std::to_string(i);
          const std::string b = "b" + std::to_string(i);
          store->put_result(sample_winner(key, b), sample_binary(b, static_cast<unsigned>(i)),
                            sample_trials());
        }
      } catch (...) {
        status = 1;
      }
      ::_exit(status);  // no Catch2 teardown in the child
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto store = Store::open(path);
  REQUIRE_FALSE(store->in_memory());
  const auto winners = store->winners();
  CHECK(winners.size() == kProcesses * kResults);
  for (int p = 0; p < kProcesses; ++p) {
    CHECK(store->find_winner("p" + std::to_string(p) + "-k0", "dev-h100", "t1").has_value());
    CHECK(store->trials("p" + std::to_string(p) + "-k49", "dev-h100", "t1").size() == 3);
  }
  CHECK(store->find_binary("b49").has_value());
}

// --- What the tools need: strict opening, schema 2, listing and removing --------------------------

TEST_CASE("cache: open_existing refuses what open would set aside, and touches nothing", "[cache]") {
  using Reason = kvtune::cache::OpenError::Reason;
  TempDir dir;
  const auto refused = [](const std::string& path, bool create) -> Reason {
    try {
      Store::open_existing(path, create);
    } catch (const kvtune::cache::OpenError& e) {
      return e.reason();
    }
    FAIL("open_existing accepted " << path);
    return Reason::unusable;
  };
  const std::string missing = dir.file("missing.db");
  CHECK(refused(missing, false) == Reason::missing);
  CHECK_FALSE(fs::exists(missing));
  CHECK(Store::open_existing(dir.file("sub/new.db"), true)->schema_version() == Store::kSchemaVersion);
  CHECK(mode_of(dir.file("sub/new.db")) == 0600);

  const std::string random = dir.file("random.db");
  write_bytes(random, random_bytes(8192, 3));
  ::chmod(random.c_str(), 0600);
  CHECK(refused(random, true) == Reason::not_kvtune);

  const std::string foreign = dir.file("foreign.db");
  exec_sql(foreign, "CREATE TABLE albums(id INTEGER PRIMARY KEY, title TEXT);");
  ::chmod(foreign.c_str(), 0600);
  CHECK(refused(foreign, false) == Reason::not_kvtune);

  const std::string newer = dir.file("newer.db");
  make_cache(newer);
  exec_sql(newer, "UPDATE meta SET value = 99 WHERE key IN ('schema_version', 'oldest_compatible_version');");
  CHECK(refused(newer, false) == Reason::newer);

  const std::string shared = dir.file("shared.db");
  make_cache(shared);
  ::chmod(shared.c_str(), 0664);
  CHECK(refused(shared, false) == Reason::unusable);

  CHECK(refused(dir.file("sub"), false) == Reason::unusable);  // a directory

  // Nothing was renamed or replaced.
  for (const char* kind : {"corrupt", "foreign", "newer"}) {
    CHECK(set_aside_files(dir.path(), "random.db", kind).empty());
    CHECK(set_aside_files(dir.path(), "foreign.db", kind).empty());
    CHECK(set_aside_files(dir.path(), "newer.db", kind).empty());
  }
  CHECK(read_bytes(random) == random_bytes(8192, 3));
}

TEST_CASE("cache: ceilings, devices, trial times and removal", "[cache]") {
  auto store = Store::open("");
  DeviceRow d = sample_device();
  store->put_device(d);
  DeviceRow other = sample_device();
  other.id = "dev-a100";
  other.name = "NVIDIA A100";
  other.updated_at = 12345;  // kept as given (imports and merges keep the source's time)
  store->put_device(other);
  const auto devices = store->devices();
  REQUIRE(devices.size() == 2);
  CHECK(devices[0].name == "NVIDIA A100");  // by name
  CHECK(devices[0].updated_at == 12345);
  CHECK(devices[1].updated_at > 1700000000);  // 0 means now

  CHECK_FALSE(store->find_ceilings("dev-h100").has_value());
  store->put_ceilings({"dev-h100", 3350.5, 61000, 777});
  store->put_ceilings({"dev-a100", 1500, 0, 0});
  store->put_ceilings({"dev-h100", 3360.5, 62000, 778});
  const auto c = store->find_ceilings("dev-h100");
  REQUIRE(c.has_value());
  CHECK(c->copy_gbps == 3360.5);
  CHECK(c->fma_gflops == 62000);
  CHECK(c->measured_at == 778);
  CHECK(store->all_ceilings().size() == 2);

  store->put_result(sample_winner("k1", "b1"), sample_binary("b1"), sample_trials());
  store->put_result(sample_winner("k2", "b2"), sample_binary("b2", 2), sample_trials());
  for (const auto& t : store->trials("k1", "dev-h100", "t1")) CHECK(t.created_at > 1700000000);
  const auto infos = store->binary_infos();
  REQUIRE(infos.size() == 2);
  CHECK(infos[0].hash == "b1");
  CHECK(infos[0].size == 3000);
  CHECK(infos[0].arch == "sm_90");

  CHECK(store->remove_result("k1", "dev-h100", "t1"));
  CHECK_FALSE(store->remove_result("k1", "dev-h100", "t1"));
  CHECK_FALSE(store->find_winner("k1", "dev-h100", "t1").has_value());
  CHECK(store->trials("k1", "dev-h100", "t1").empty());
  CHECK(store->trials("k2", "dev-h100", "t1").size() == 3);
  CHECK(store->find_binary("b1").has_value());  // binaries stay

  CHECK(store->remove_binaries({"b1", "nope"}) == 1);
  CHECK_FALSE(store->find_binary("b1").has_value());
  CHECK(store->integrity_check().empty());

  store->clear();
  CHECK(store->winners().empty());
  CHECK(store->devices().empty());
  CHECK(store->binary_infos().empty());
  CHECK(store->all_ceilings().empty());
  CHECK(store->trials("k2", "dev-h100", "t1").empty());
  CHECK(store->schema_version() == Store::kSchemaVersion);
}

// --- Schema 3: migration of older files ----------------------------------------------------------

namespace {

// The schema as kvtune's schema-1 code created it, frozen here: a migration test must not follow
// later edits of sql.h.
constexpr char kSchema1Sql[] = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value NOT NULL);
CREATE TABLE devices (
  id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL, sm_count INTEGER NOT NULL, l2_bytes INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL, driver_version INTEGER NOT NULL, nvrtc_version INTEGER NOT NULL,
  kvtune_version TEXT NOT NULL, json TEXT NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE binaries (
  hash TEXT PRIMARY KEY NOT NULL, arch TEXT NOT NULL, lowered_name TEXT NOT NULL,
  image BLOB NOT NULL, image_hash TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE winners (
  problem_key TEXT NOT NULL, device_id TEXT NOT NULL, template_hash TEXT NOT NULL,
  op TEXT NOT NULL, label TEXT NOT NULL, config_json TEXT NOT NULL, binary_hash TEXT NOT NULL,
  origin TEXT NOT NULL, median_ms REAL NOT NULL, gbps REAL NOT NULL, created_at INTEGER NOT NULL,
  PRIMARY KEY (problem_key, device_id, template_hash));
CREATE INDEX winners_by_op ON winners(op, problem_key);
CREATE TABLE trials (
  id INTEGER PRIMARY KEY, problem_key TEXT NOT NULL, device_id TEXT NOT NULL,
  template_hash TEXT NOT NULL, label TEXT NOT NULL, config_json TEXT NOT NULL,
  status TEXT NOT NULL, message TEXT NOT NULL, median_ms REAL NOT NULL, spread REAL NOT NULL,
  gbps REAL NOT NULL, created_at INTEGER NOT NULL);
CREATE INDEX trials_by_key ON trials(problem_key, device_id, template_hash, id);
INSERT INTO meta VALUES ('schema_version', 1), ('oldest_compatible_version', 1);
)sql";

// What schema 2 added.
constexpr char kSchema2AddedSql[] = R"sql(
CREATE TABLE ceilings (
  device_id TEXT PRIMARY KEY NOT NULL, copy_gbps REAL NOT NULL, fma_gflops REAL NOT NULL,
  measured_at INTEGER NOT NULL);
UPDATE meta SET value = 2 WHERE key = 'schema_version';
INSERT INTO ceilings VALUES ('dev-h100', 3350.5, 61000, 777);
)sql";

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789ABCDEF";
  std::string text;
  for (unsigned char c : bytes) {
    text += digits[c >> 4];
    text += digits[c & 15];
  }
  return text;
}

// A schema-1 (or, with `version` 2, schema-2) file with one device, two winners, their trials and
// binaries, written by plain SQL the way that code wrote it.
void make_old_cache(const std::string& path, int version) {
  std::string sql = kSchema1Sql;
  sql += R"sql(
INSERT INTO devices VALUES ('dev-h100', 'NVIDIA H100 80GB HBM3', 9, 0, 132, 50331648, 85045870592,
                            12040, 12040, '0.1.0', '{}', 1700000000);
)sql";
  for (int i = 0; i < 2; ++i) {
    const Winner w = sample_winner("key" + std::to_string(i), "b" + std::to_string(i));
    const Binary b = sample_binary(w.binary_hash, static_cast<unsigned>(i));
    sql += "INSERT INTO winners VALUES ('" + w.problem_key + "', '" + w.device_id + "', '" +
           w.template_hash + "', '" + w.op + "', '" + w.label + "', '" + w.config_json + "', '" +
           w.binary_hash + "', '" + w.origin + "', 0.0123, 2891.5, 1700000000);\n";
    sql += "INSERT INTO binaries VALUES ('" + b.hash + "', '" + b.arch + "', '" + b.lowered_name +
           "', X'" + hex(b.image) + "', '" + b.image_hash + "', 1700000000);\n";
    for (const Trial& t : sample_trials()) {
      sql += "INSERT INTO trials(problem_key, device_id, template_hash, label, config_json, "
             "status, message, median_ms, spread, gbps, created_at) VALUES ('" +
             w.problem_key + "', 'dev-h100', 't1', '" + t.label + "', '" + t.config_json + "', '" +
             t.status + "', '" + t.message + "', " + std::to_string(t.median_ms) + ", " +
             std::to_string(t.spread) + ", " + std::to_string(t.gbps) + ", 1700000000);\n";
    }
  }
  if (version >= 2) sql += kSchema2AddedSql;
  exec_sql(path, sql);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
}

// name -> CREATE statement of every table and index in the file.
std::map<std::string, std::string> schema_of(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL", -1,
                             &select, nullptr) == SQLITE_OK);
  std::map<std::string, std::string> schema;
  while (sqlite3_step(select) == SQLITE_ROW) {
    schema[reinterpret_cast<const char*>(sqlite3_column_text(select, 0))] =
        reinterpret_cast<const char*>(sqlite3_column_text(select, 1));
  }
  sqlite3_finalize(select);
  sqlite3_close(db);
  return schema;
}

std::int64_t meta_value(const std::string& path, const std::string& key) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* select = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?1", -1, &select, nullptr) ==
          SQLITE_OK);
  sqlite3_bind_text(select, 1, key.c_str(), -1, SQLITE_TRANSIENT);
  const std::int64_t value =
      sqlite3_step(select) == SQLITE_ROW ? sqlite3_column_int64(select, 0) : -1;
  sqlite3_finalize(select);
  sqlite3_close(db);
  return value;
}

}  // namespace

TEST_CASE("cache: schema-1 and schema-2 files are migrated to schema 3 in place", "[cache]") {
  for (const int version : {1, 2}) {
    for (const bool strict : {false, true}) {
      INFO("schema " << version << (strict ? ", open_existing" : ", open"));
      TempDir dir;
      const std::string path = dir.file("old.db");
      make_old_cache(path, version);
      const auto before = schema_of(path);
      REQUIRE(before.count("winners") == 1);
      REQUIRE(before.count("ceilings") == (version >= 2 ? 1u : 0u));

      LogCapture log;
      auto store =
          strict ? Store::open_existing(path, false, log.fn()) : Store::open(path, log.fn());
      INFO(log.all());
      REQUIRE_FALSE(store->in_memory());
      CHECK_FALSE(log.has("warn", ""));
      CHECK(store->schema_version() == 3);
      CHECK(Store::kSchemaVersion == 3);

      // Only additions: every table and index of the old file is as it was, and older code may
      // still use the file.
      const auto after = schema_of(path);
      for (const auto& [name, create] : before) CHECK(after.at(name) == create);
      for (const char* added : {"leases", "recorded_problems", "tuning_runs", "tuning_runs_by_key",
                                "ceilings"}) {
        CHECK(after.count(added) == 1);
      }
      CHECK(meta_value(path, "oldest_compatible_version") == 1);

      // The data survives.
      const auto winners = store->winners();
      REQUIRE(winners.size() == 2);
      for (int i = 0; i < 2; ++i) {
        const std::string b = "b" + std::to_string(i);
        CHECK(same_winner(winners[i], sample_winner("key" + std::to_string(i), b)));
        const auto binary = store->find_binary(b);
        REQUIRE(binary.has_value());
        CHECK(binary->image == sample_binary(b, static_cast<unsigned>(i)).image);
        check_trials_equal(store->trials("key" + std::to_string(i), "dev-h100", "t1"),
                           sample_trials());
      }
      REQUIRE(store->find_device("dev-h100").has_value());
      CHECK(store->find_device("dev-h100")->updated_at == 1700000000);
      if (version >= 2) {
        const auto ceilings = store->find_ceilings("dev-h100");
        REQUIRE(ceilings.has_value());
        CHECK(ceilings->copy_gbps == 3350.5);
        CHECK(ceilings->measured_at == 777);
      } else {
        CHECK(store->all_ceilings().empty());
      }

      // The new tables work.
      store->put_ceilings({"dev-a100", 1500, 0, 0});
      CHECK(store->try_acquire_lease("key9", "dev-h100", "t1", "me", 30));
      store->record_problem("normalize", "key9", "dev-h100", "t1");
      TuningRun run;
      run.problem_key = "key0";
      store->put_tuning_run(run);
      CHECK(store->leases().size() == 1);
      CHECK(store->recorded_problems().size() == 1);
      CHECK(store->tuning_runs("key0").size() == 1);
      store.reset();

      // Opening again finds schema 3 and changes nothing.
      const auto migrated = schema_of(path);
      auto again = Store::open(path);
      CHECK(again->schema_version() == 3);
      CHECK(again->leases().size() == 1);
      CHECK(schema_of(path) == migrated);
      CHECK(set_aside_files(dir.path(), "old.db", "newer").empty());
      CHECK(set_aside_files(dir.path(), "old.db", "foreign").empty());
    }
  }
}

TEST_CASE("cache: a new file is schema 3 and stays readable by schema-1 code", "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  make_cache(path, 1);
  CHECK(meta_value(path, "schema_version") == 3);
  CHECK(meta_value(path, "oldest_compatible_version") == 1);
  // What schema-1 code creates is a subset of what is there, table by table.
  TempDir old_dir;
  make_old_cache(old_dir.file("v1.db"), 1);
  const auto current = schema_of(path);
  for (const auto& [name, create] : schema_of(old_dir.file("v1.db"))) {
    INFO(name);
    CHECK(current.count(name) == 1);
  }
}

// --- Schema 3: leases ----------------------------------------------------------------------------

TEST_CASE("cache: leases: acquire, contend, renew, expire, take over, release", "[cache][lease]") {
  auto store = Store::open("");
  const auto now = static_cast<std::int64_t>(std::time(nullptr));

  CHECK(store->leases().empty());
  CHECK(store->try_acquire_lease("k", "dev", "t1", "alice", 60));
  CHECK_FALSE(store->try_acquire_lease("k", "dev", "t1", "bob", 60));
  auto leases = store->leases();
  REQUIRE(leases.size() == 1);
  CHECK(leases[0].owner == "alice");
  CHECK(leases[0].problem_key == "k");
  CHECK(leases[0].device_id == "dev");
  CHECK(leases[0].template_hash == "t1");
  CHECK(leases[0].acquired_at >= now - 1);
  CHECK(leases[0].acquired_at <= now + 2);
  CHECK(leases[0].expires_at >= now + 59);
  CHECK(leases[0].expires_at <= now + 62);

  // The holder renews; acquired_at stays, expires_at moves.
  CHECK(store->try_acquire_lease("k", "dev", "t1", "alice", 600));
  leases = store->leases();
  REQUIRE(leases.size() == 1);
  CHECK(leases[0].owner == "alice");
  CHECK(leases[0].acquired_at <= now + 2);
  CHECK(leases[0].expires_at >= now + 599);

  // Every part of the entry counts: another template or device is another lease.
  CHECK(store->try_acquire_lease("k", "dev", "t2", "bob", 60));
  CHECK(store->try_acquire_lease("k", "dev2", "t1", "bob", 60));
  CHECK(store->try_acquire_lease("k2", "dev", "t1", "bob", 60));
  CHECK(store->leases().size() == 4);

  // Release by someone else does nothing.
  store->release_lease("k", "dev", "t1", "bob");
  CHECK_FALSE(store->try_acquire_lease("k", "dev", "t1", "bob", 60));
  CHECK(store->leases().size() == 4);
  // Release by the holder frees it.
  store->release_lease("k", "dev", "t1", "alice");
  CHECK(store->leases().size() == 3);
  CHECK(store->try_acquire_lease("k", "dev", "t1", "bob", 60));
  CHECK_FALSE(store->try_acquire_lease("k", "dev", "t1", "alice", 60));

  // Expiry: a short lease blocks others while live, then anyone may take it over.
  CHECK(store->try_acquire_lease("short", "dev", "t1", "alice", 0.5));
  CHECK(store->try_acquire_lease("gone", "dev", "t1", "carol", 0.3));
  CHECK_FALSE(store->try_acquire_lease("short", "dev", "t1", "bob", 60));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // expiry is about time, not ordering
  const auto before_takeover = static_cast<std::int64_t>(std::time(nullptr));
  CHECK(store->try_acquire_lease("short", "dev", "t1", "bob", 60));
  CHECK_FALSE(store->try_acquire_lease("short", "dev", "t1", "alice", 60));
  leases = store->leases();
  REQUIRE(leases.size() == 6);
  const auto find = [&](const std::string& key) {
    for (const Lease& lease : leases) {
      if (lease.problem_key == key) return lease;
    }
    FAIL("no lease for " << key);
    return Lease{};
  };
  const Lease taken = find("short");
  CHECK(taken.owner == "bob");
  CHECK(taken.acquired_at >= before_takeover);  // a new holder, a new acquisition time
  const Lease expired = find("gone");           // listed although expired
  CHECK(expired.owner == "carol");
  CHECK(expired.expires_at <= before_takeover + 1);
  // An expired lease is taken over by its own holder as well, like a renewal.
  CHECK(store->try_acquire_lease("gone", "dev", "t1", "carol", 60));

  // Misuse.
  CHECK_THROWS_AS(store->try_acquire_lease("k", "dev", "t1", "", 60), kvtune::Error);
  CHECK_THROWS_AS(store->try_acquire_lease("k", "dev", "t1", "alice", 0), kvtune::Error);
  CHECK_THROWS_AS(store->try_acquire_lease("k", "dev", "t1", "alice", -1), kvtune::Error);
  CHECK_THROWS_AS(store->try_acquire_lease("k", "dev", "t1", "alice", std::nan("")),
                  kvtune::Error);
}

TEST_CASE("cache: six processes race for one lease, exactly one holds it", "[cache][lease]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  Store::open(path).reset();  // the file exists before the race; no connection crosses fork()
  constexpr int kProcesses = 6, kAttempts = 20;
  // Exit codes of a child.
  constexpr int kWon = 10, kLost = 11, kLostAfterWinning = 12, kFailed = 13;

  // A barrier of two pipes: each child reports on `ready` once its store is open, and all start
  // together when the parent, having heard from every one, closes `start`.
  int start[2], ready[2];
  REQUIRE(::pipe(start) == 0);
  REQUIRE(::pipe(ready) == 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = kFailed;
      try {
        ::close(start[1]);
        ::close(ready[0]);
        auto store = Store::open(path);
        const char opened = store->in_memory() ? 'm' : 'f';
        const bool reported = ::write(ready[1], &opened, 1) == 1;
        ::close(ready[1]);
        char go = 0;
        if (reported && opened == 'f' && ::read(start[0], &go, 1) == 0) {  // EOF: everyone starts
          bool won = false;
          status = kLost;
          for (int i = 0; i < kAttempts && status != kLostAfterWinning; ++i) {
            const bool acquired =
                store->try_acquire_lease("key", "dev", "t1", "proc-" + std::to_string(p), 30);
            if (won && !acquired) status = kLostAfterWinning;
            if (acquired && !won) status = kWon;
            won = won || acquired;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
        }
      } catch (...) {
        status = kFailed;
      }
      ::_exit(status);  // no Catch2 teardown in the child
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  ::close(ready[1]);
  for (int p = 0; p < kProcesses; ++p) {
    char opened = 0;
    REQUIRE(::read(ready[0], &opened, 1) == 1);  // every child has its store open
    CHECK(opened == 'f');
  }
  ::close(ready[0]);
  ::close(start[1]);

  int winner = -1, losers = 0;
  for (int p = 0; p < kProcesses; ++p) {
    int status = 0;
    REQUIRE(::waitpid(children[p], &status, 0) == children[p]);
    REQUIRE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    INFO("process " << p << " exited " << code);
    CHECK((code == kWon || code == kLost));
    if (code == kWon) {
      CHECK(winner == -1);
      winner = p;
    }
    if (code == kLost) ++losers;
  }
  REQUIRE(winner >= 0);
  CHECK(losers == kProcesses - 1);

  auto store = Store::open(path);
  const auto leases = store->leases();
  REQUIRE(leases.size() == 1);
  const std::string owner = "proc-" + std::to_string(winner);
  CHECK(leases[0].owner == owner);
  CHECK_FALSE(store->try_acquire_lease("key", "dev", "t1", "parent", 30));
  store->release_lease("key", "dev", "t1", owner);
  CHECK(store->try_acquire_lease("key", "dev", "t1", "parent", 30));
}

// --- Schema 3: recorded problems, winners of one op ----------------------------------------------

TEST_CASE("cache: recorded problems count sightings, storing a result removes its row",
          "[cache][record]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  auto store = Store::open(path);
  REQUIRE_FALSE(store->in_memory());
  const auto now = static_cast<std::int64_t>(std::time(nullptr));

  store->record_problem("normalize", "n1", "dev-h100", "t1");
  store->record_problem("dwconv", "d1", "dev-h100", "t1");
  store->record_problem("normalize", "n0", "dev-h100", "t1");
  // Pretend the first sightings were long ago, then see n1 twice more.
  exec_sql(path, "UPDATE recorded_problems SET first_seen = 1000, last_seen = 1000;");
  store->record_problem("normalize", "n1", "dev-h100", "t1");
  store->record_problem("normalize", "n1", "dev-h100", "t1");

  auto recorded = store->recorded_problems();
  REQUIRE(recorded.size() == 3);
  // By op, then key.
  CHECK(recorded[0].op == "dwconv");
  CHECK(recorded[1].problem_key == "n0");
  CHECK(recorded[2].problem_key == "n1");
  CHECK(recorded[0].count == 1);
  CHECK(recorded[1].count == 1);
  CHECK(recorded[2].count == 3);
  CHECK(recorded[2].op == "normalize");
  CHECK(recorded[2].device_id == "dev-h100");
  CHECK(recorded[2].template_hash == "t1");
  CHECK(recorded[2].first_seen == 1000);  // kept
  CHECK(recorded[2].last_seen >= now);    // moved
  CHECK(recorded[1].last_seen == 1000);   // untouched

  // A result for another template or device is another entry: n1's row stays.
  Winner other_template = sample_winner("n1");
  other_template.template_hash = "t2";
  store->put_result(other_template, std::nullopt, {});
  Winner other_device = sample_winner("n1");
  other_device.device_id = "dev-a100";
  store->put_result(other_device, std::nullopt, {});
  CHECK(store->recorded_problems().size() == 3);
  // Its own result removes it.
  store->put_result(sample_winner("n1"), std::nullopt, sample_trials());
  recorded = store->recorded_problems();
  REQUIRE(recorded.size() == 2);
  CHECK(recorded[1].problem_key == "n0");

  CHECK(store->remove_recorded("n0", "dev-h100", "t1"));
  CHECK_FALSE(store->remove_recorded("n0", "dev-h100", "t1"));
  CHECK_FALSE(store->remove_recorded("d1", "dev-h100", "t2"));
  REQUIRE(store->recorded_problems().size() == 1);
  CHECK(store->recorded_problems()[0].problem_key == "d1");
}

TEST_CASE("cache: winners_for filters by op, device and template", "[cache]") {
  auto store = Store::open("");
  const auto put = [&](const std::string& op, const std::string& key, const std::string& device,
                       const std::string& template_hash) {
    Winner w = sample_winner(key);
    w.op = op;
    w.device_id = device;
    w.template_hash = template_hash;
    store->put_result(w, std::nullopt, {});
  };
  put("normalize", "n3", "dev-h100", "t1");
  put("normalize", "n1", "dev-h100", "t1");
  put("normalize", "n2", "dev-h100", "t2");
  put("normalize", "n2", "dev-a100", "t1");
  put("dwconv", "d1", "dev-h100", "t1");
  put("normalize", "n2", "dev-h100", "t1");

  const auto keys = [&](const std::string& op, const std::string& device,
                        const std::string& template_hash) {
    std::vector<std::string> found;
    for (const Winner& w : store->winners_for(op, device, template_hash)) {
      CHECK(w.op == op);
      CHECK(w.device_id == device);
      CHECK(w.template_hash == template_hash);
      found.push_back(w.problem_key);
    }
    return found;
  };
  CHECK(keys("normalize", "dev-h100", "t1") == std::vector<std::string>{"n1", "n2", "n3"});
  CHECK(keys("normalize", "dev-h100", "t2") == std::vector<std::string>{"n2"});
  CHECK(keys("normalize", "dev-a100", "t1") == std::vector<std::string>{"n2"});
  CHECK(keys("dwconv", "dev-h100", "t1") == std::vector<std::string>{"d1"});
  CHECK(keys("dwconv", "dev-a100", "t1").empty());
  const auto full = store->winners_for("normalize", "dev-h100", "t1");
  REQUIRE(full.size() == 3);
  CHECK(same_winner(full[0], sample_winner("n1")));
}

// --- Schema 3: binaries in batches ---------------------------------------------------------------

TEST_CASE("cache: find_binaries skips damaged and missing ones, put_binaries keeps what is there",
          "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  LogCapture log;
  auto store = Store::open(path, log.fn());
  REQUIRE_FALSE(store->in_memory());
  store->put_binaries({sample_binary("b1", 1), sample_binary("b2", 2), sample_binary("b3", 3)});
  exec_sql(path, "UPDATE binaries SET image = zeroblob(3000) WHERE hash = 'b2';");

  const auto hashes_of = [](std::vector<Binary> binaries) {
    std::vector<std::string> hashes;
    for (const Binary& b : binaries) hashes.push_back(b.hash);
    std::sort(hashes.begin(), hashes.end());
    return hashes;
  };
  const auto found = store->find_binaries({"b3", "b2", "missing", "b1", "b3"});
  CHECK(hashes_of(found) == std::vector<std::string>{"b1", "b3"});  // each once
  for (const Binary& b : found) {
    const unsigned seed = b.hash == "b1" ? 1 : 3;
    CHECK(b.image == sample_binary(b.hash, seed).image);
    CHECK(b.arch == "sm_90");
    CHECK(b.lowered_name == sample_binary(b.hash).lowered_name);
    CHECK(b.image_hash == kvtune::detail::hash_hex(b.image));
  }
  CHECK(log.has("warn", "binary b2"));
  CHECK(store->find_binaries({}).empty());

  // An intact row stays as it is even when offered other bytes under its hash; a damaged row is
  // replaced; a new one is added.
  store->put_binaries({sample_binary("b1", 99), sample_binary("b2", 2), sample_binary("b4", 4)});
  CHECK(store->find_binary("b1")->image == sample_binary("b1", 1).image);
  const auto repaired = store->find_binary("b2");
  REQUIRE(repaired.has_value());
  CHECK(repaired->image == sample_binary("b2", 2).image);
  CHECK(store->find_binary("b4").has_value());
  CHECK(store->binary_infos().size() == 4);

  // One transaction: a bad binary stores none of them.
  Binary bad = sample_binary("b6", 6);
  bad.image_hash = "0000000000000000";
  CHECK_THROWS_AS(store->put_binaries({sample_binary("b5", 5), bad}), kvtune::Error);
  CHECK_FALSE(store->find_binary("b5").has_value());
  CHECK(store->binary_infos().size() == 4);
}

// --- Schema 3: tuning runs -----------------------------------------------------------------------

namespace {

TuningRun sample_run(const std::string& problem_key, std::int64_t started_at) {
  TuningRun run;
  run.op = "normalize";
  run.problem_key = problem_key;
  run.device_id = "dev-h100";
  run.template_hash = "t1";
  run.started_at = started_at;
  run.wall_seconds = 12.5;
  run.compile_seconds = 8.25;
  run.bench_seconds = 3.125;
  run.variants_total = 480;
  run.variants_timed = 96;
  run.compiles = 90;
  run.binaries_reused = 6;
  run.search = "budgeted";
  run.sm_clock_mhz = 1980;
  run.mem_clock_mhz = 2619;
  run.temperature_c = 41;
  run.power_w = 312.5;
  run.winner_label = "tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass";
  run.winner_ms = 0.0123;
  run.incumbent_label = "tpr=64,rpb=2,vw=8B,keep=reg,stat=welford";
  run.incumbent_ms = 0.0150;
  run.replaced_incumbent = true;
  run.json = R"({"seed":7,"budget":96})";
  return run;
}

void check_run_equal(const TuningRun& got, const TuningRun& want) {
  CHECK(got.op == want.op);
  CHECK(got.problem_key == want.problem_key);
  CHECK(got.device_id == want.device_id);
  CHECK(got.template_hash == want.template_hash);
  CHECK(got.started_at == want.started_at);
  CHECK(got.wall_seconds == want.wall_seconds);
  CHECK(got.compile_seconds == want.compile_seconds);
  CHECK(got.bench_seconds == want.bench_seconds);
  CHECK(got.variants_total == want.variants_total);
  CHECK(got.variants_timed == want.variants_timed);
  CHECK(got.compiles == want.compiles);
  CHECK(got.binaries_reused == want.binaries_reused);
  CHECK(got.search == want.search);
  CHECK(got.sm_clock_mhz == want.sm_clock_mhz);
  CHECK(got.mem_clock_mhz == want.mem_clock_mhz);
  CHECK(got.temperature_c == want.temperature_c);
  CHECK(got.power_w == want.power_w);
  CHECK(got.winner_label == want.winner_label);
  CHECK(got.winner_ms == want.winner_ms);
  CHECK(got.incumbent_label == want.incumbent_label);
  CHECK(got.incumbent_ms == want.incumbent_ms);
  CHECK(got.replaced_incumbent == want.replaced_incumbent);
  CHECK(got.json == want.json);
}

}  // namespace

TEST_CASE("cache: tuning runs round trip, all or by key, oldest first", "[cache]") {
  auto store = Store::open("");
  CHECK(store->tuning_runs().empty());
  const TuningRun late = sample_run("k1", 1700000200);
  TuningRun early = sample_run("k1", 1700000100);
  early.search = "exhaustive";
  early.replaced_incumbent = false;
  early.incumbent_label.clear();
  TuningRun unread = sample_run("k2", 0);  // stamped now; nothing read from the device
  unread.sm_clock_mhz = unread.mem_clock_mhz = unread.temperature_c = -1;
  unread.power_w = -1;
  store->put_tuning_run(late);
  store->put_tuning_run(early);
  store->put_tuning_run(unread);

  const auto k1 = store->tuning_runs("k1");
  REQUIRE(k1.size() == 2);
  check_run_equal(k1[0], early);
  check_run_equal(k1[1], late);
  const auto all = store->tuning_runs();
  REQUIRE(all.size() == 3);
  CHECK(all[0].started_at == early.started_at);
  CHECK(all[2].problem_key == "k2");
  CHECK(all[2].started_at >= static_cast<std::int64_t>(std::time(nullptr)) - 1);
  TuningRun stamped = unread;
  stamped.started_at = all[2].started_at;
  check_run_equal(all[2], stamped);
  CHECK(store->tuning_runs("k3").empty());
}

TEST_CASE("cache: put_result with a run stores everything of one tuning in one transaction",
          "[cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  auto store = Store::open(path);
  REQUIRE_FALSE(store->in_memory());

  // Everything lands, and the run takes the winner's entry where it names none.
  store->record_problem("normalize", "k1", "dev-h100", "t1");
  TuningRun run = sample_run("", 1700000300);
  run.op.clear();
  run.device_id.clear();
  run.template_hash.clear();
  store->put_result(sample_winner("k1", "b1"), {sample_binary("b1", 1), sample_binary("b7", 7)},
                    sample_trials(), run);
  CHECK(store->find_winner("k1", "dev-h100", "t1").has_value());
  CHECK(store->find_binaries({"b1", "b7"}).size() == 2);
  check_trials_equal(store->trials("k1", "dev-h100", "t1"), sample_trials());
  CHECK(store->recorded_problems().empty());
  const auto runs = store->tuning_runs("k1");
  REQUIRE(runs.size() == 1);
  check_run_equal(runs[0], sample_run("k1", 1700000300));

  // A run of another entry is refused before anything is written.
  store->record_problem("normalize", "k2", "dev-h100", "t1");
  CHECK_THROWS_AS(store->put_result(sample_winner("k2", "b2"), {sample_binary("b2", 2)},
                                    sample_trials(), sample_run("k3", 1)),
                  kvtune::Error);
  CHECK_FALSE(store->find_winner("k2", "dev-h100", "t1").has_value());
  CHECK_FALSE(store->find_binary("b2").has_value());

  // The last write fails (a trigger makes it): nothing of the tuning is left, and the recorded
  // problem is still there.
  exec_sql(path,
           "CREATE TRIGGER refuse_runs BEFORE INSERT ON tuning_runs "
           "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;");
  const auto put_k2 = [&] {
    store->put_result(sample_winner("k2", "b2"), {sample_binary("b2", 2), sample_binary("b8", 8)},
                      sample_trials(), sample_run("k2", 1700000400));
  };
  CHECK_THROWS_WITH(put_k2(), Catch::Contains("refused by the test"));
  CHECK_FALSE(store->find_winner("k2", "dev-h100", "t1").has_value());
  CHECK(store->find_binaries({"b2", "b8"}).empty());
  CHECK(store->trials("k2", "dev-h100", "t1").empty());
  CHECK(store->tuning_runs("k2").empty());
  REQUIRE(store->recorded_problems().size() == 1);
  CHECK(store->recorded_problems()[0].problem_key == "k2");

  // Without the trigger the same call succeeds; the connection is fine after the rollback.
  exec_sql(path, "DROP TRIGGER refuse_runs;");
  put_k2();
  CHECK(store->find_winner("k2", "dev-h100", "t1").has_value());
  CHECK(store->tuning_runs("k2").size() == 1);
  CHECK(store->recorded_problems().empty());
  CHECK(store->tuning_runs().size() == 2);
}

TEST_CASE("cache: clear() empties leases, recorded problems and tuning runs too", "[cache]") {
  auto store = Store::open("");
  store->put_result(sample_winner("k1", "b1"), {sample_binary("b1")}, sample_trials(),
                    sample_run("k1", 0));
  CHECK(store->try_acquire_lease("k2", "dev-h100", "t1", "me", 60));
  store->record_problem("normalize", "k2", "dev-h100", "t1");
  store->put_tuning_run(sample_run("k2", 0));
  REQUIRE(store->tuning_runs().size() == 2);
  store->clear();
  CHECK(store->leases().empty());
  CHECK(store->recorded_problems().empty());
  CHECK(store->tuning_runs().empty());
  CHECK(store->winners().empty());
  CHECK(store->binary_infos().empty());
  // A cleared lease is free.
  CHECK(store->try_acquire_lease("k2", "dev-h100", "t1", "other", 60));
}

TEST_CASE("a heuristic stand-in does not clear a recorded problem, a tuned winner does", "[cache][record]") {
  auto store = Store::open("");
  store->record_problem("normalize", "k", "dev", "tpl");
  Winner w;
  w.op = "normalize", w.problem_key = "k", w.device_id = "dev", w.template_hash = "tpl";
  w.label = "l", w.config_json = "{}", w.origin = "heuristic";
  store->put_result(w, std::nullopt, {});
  CHECK(store->recorded_problems().size() == 1);
  w.origin = "tuned";
  store->put_result(w, std::nullopt, {});
  CHECK(store->recorded_problems().empty());
}
