// Cache store: migration of schema-1 and schema-2 files in place, and what the production tuner
// needs: leases (within and across processes), recorded problems, winners of one op, batch
// binaries, tuning runs. Round trips and the failure model: test_cache.cpp.
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
