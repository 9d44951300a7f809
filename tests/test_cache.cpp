// Cache store: round trips in memory and on disk, replacement, schema bookkeeping, file modes, the
// failure model (corrupt, truncated, foreign, newer, untrusted, unwritable files), damaged
// binaries, several threads and processes writing one file at once, ceilings and removal.
// Migrations and what the production tuner needs (leases, recorded problems, winners of one op,
// batch binaries, tuning runs): test_cache_schema.cpp.

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
#include "store_fixtures.h"

namespace fs = std::filesystem;
using namespace kvtune::test;


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

