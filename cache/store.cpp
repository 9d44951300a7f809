// kvtune's persistent store (contract in store.h, SQL text in sql.h). The only file that includes
// sqlite3.h.
//
// Opening a file, one attempt:
//   1. create missing parent directories (0700) and the file (0600);
//   2. refuse a file that group or others may write, or that is not a regular file;
//   3. open it read-write (a file SQLite can only open read-only is refused);
//   4. inspect it: PRAGMA quick_check, then no tables = new, a meta table with a schema version =
//      ours (or newer), anything else = not ours;
//   5. a file that is corrupt, not ours, or newer than we understand is renamed aside and the
//      attempt starts over; a usable one is switched to WAL and given the schema when new.
// What stops a file from being used without being the file's fault (permissions, I/O errors,
// locks held past the busy timeout) leaves the file alone, and the store runs in memory. Each
// such event goes to the LogFn; open() itself does not throw.

#include "cache/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "cache/sql.h"
#include "kvtune/error.h"
#include "lib/src/hash.h"

namespace kvtune::cache {
namespace {

using Clock = std::chrono::steady_clock;

// Several processes tuning at once each hold the write lock for one short transaction; 15 s is far
// above any wait that is not a stuck process.
constexpr int kBusyTimeoutMs = 15000;
constexpr auto kBusyTimeout = std::chrono::milliseconds(kBusyTimeoutMs);

std::int64_t unix_now() { return static_cast<std::int64_t>(std::time(nullptr)); }

// Leases live about a second, so they need a finer clock; the wall clock, so that processes agree.
double unix_now_fractional() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string errno_text(int error) { return std::generic_category().message(error); }

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool is_corruption(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

bool is_busy(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

// A few milliseconds, growing, for retries that SQLite's own busy handler did not absorb.
void back_off(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 << std::min(attempt, 6), 50)));
}

// Forwards to the user's LogFn; a callback that throws must not make open() throw.
class Logger {
 public:
  explicit Logger(LogFn fn) : fn_(std::move(fn)) {}
  void operator()(const char* level, const std::string& message) const noexcept {
    if (!fn_) return;
    try {
      fn_(level, message);
    } catch (...) {
    }
  }

 private:
  LogFn fn_;
};

// Names the public call in error messages.
struct Call {
  const char* operation;
  std::string problem;  // problem key, when the call has one
  std::string device;   // device id, when the call has one
};

struct ConnectionCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Connection = std::unique_ptr<sqlite3, ConnectionCloser>;

struct StatementFinalizer {
  void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};
using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementFinalizer>;

// One connection and its prepared statements, each prepared on first use and kept.
class Database {
 public:
  Database(Connection connection, std::string path)
      : connection_(std::move(connection)), path_(std::move(path)) {
    sqlite3_extended_result_codes(connection_.get(), 1);
    sqlite3_busy_timeout(connection_.get(), kBusyTimeoutMs);
  }

  sqlite3* get() const { return connection_.get(); }
  const std::string& path() const { return path_; }  // "" in memory
  int last_error() const { return last_error_; }

  // `sql` is one of sql.h's constants; its address is the key.
  sqlite3_stmt* statement(const char* sql, const Call& call) {
    auto found = statements_.find(sql);
    if (found != statements_.end()) return found->second.get();
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v3(get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    if (rc != SQLITE_OK) fail(call, rc);
    return statements_.emplace(sql, StatementPtr(raw)).first->second.get();
  }

  // Throws kvtune::Error with SQLite's text for the connection's last failure.
  [[noreturn]] void fail(const Call& call, int rc) {
    last_error_ = rc;
    const std::string where = path_.empty() ? "in-memory cache" : path_;
    throw Error(Error::Context{"cache", call.problem, "", call.device, ""},
                std::string(call.operation) + " (" + where + "): " + sqlite3_errmsg(get()) +
                    " [sqlite code " + std::to_string(rc) + "]");
  }

 private:
  Connection connection_;  // declared first, so destroyed after the statements that need it
  std::string path_;
  std::unordered_map<const char*, StatementPtr> statements_;
  int last_error_ = SQLITE_OK;
};

// A cached statement in use: bound, stepped, then reset and unbound when it goes out of scope.
class Statement {
 public:
  Statement(Database& db, const char* sql, const Call& call)
      : db_(db), call_(call), statement_(db.statement(sql, call)) {}
  ~Statement() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind_text(int index, const std::string& text) {
    return check(sqlite3_bind_text64(statement_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8));
  }
  Statement& bind_blob(int index, const std::string& bytes) {
    return check(
        sqlite3_bind_blob64(statement_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT));
  }
  Statement& bind_int(int index, std::int64_t value) {
    return check(sqlite3_bind_int64(statement_, index, value));
  }
  Statement& bind_real(int index, double value) {
    return check(sqlite3_bind_double(statement_, index, value));
  }

  // True when a row is ready. A busy answer before the first row is retried up to the busy timeout.
  bool step() {
    const auto deadline = Clock::now() + kBusyTimeout;
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_step(statement_);
      if (rc == SQLITE_ROW) {
        ++rows_;
        return true;
      }
      if (rc == SQLITE_DONE) return false;
      if (!is_busy(rc) || rows_ > 0 || Clock::now() >= deadline) db_.fail(call_, rc);
      sqlite3_reset(statement_);  // keeps the bindings
      back_off(attempt);
    }
  }
  // Steps to the end, ignoring any rows (writes, pragmas).
  void run() {
    while (step()) {
    }
  }

  std::string text(int column) const {
    const auto* bytes = sqlite3_column_text(statement_, column);
    if (bytes == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(bytes),
                       static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
  }
  std::string blob(int column) const {
    const void* bytes = sqlite3_column_blob(statement_, column);
    if (bytes == nullptr) return {};
    return std::string(static_cast<const char*>(bytes),
                       static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)));
  }
  std::int64_t integer(int column) const { return sqlite3_column_int64(statement_, column); }
  double real(int column) const { return sqlite3_column_double(statement_, column); }

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) db_.fail(call_, rc);
    return *this;
  }

  Database& db_;
  const Call& call_;
  sqlite3_stmt* statement_;
  int rows_ = 0;
};

// BEGIN IMMEDIATE ... COMMIT; rolled back when destroyed uncommitted. BEGIN and COMMIT are retried
// on SQLITE_BUSY until the busy timeout, so concurrent writers wait rather than fail.
class Transaction {
 public:
  Transaction(Database& db, const Call& call) : db_(db), call_(call) { run(sql::kBeginImmediate); }
  ~Transaction() {
    if (committed_ || sqlite3_get_autocommit(db_.get())) return;
    try {
      Statement(db_, sql::kRollback, call_).run();
    } catch (...) {
      // The connection stays usable: SQLite rolls back on the next BEGIN failure at the latest.
    }
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit() {
    run(sql::kCommit);
    committed_ = true;
  }

 private:
  void run(const char* sql) {
    const auto deadline = Clock::now() + kBusyTimeout;
    sqlite3_stmt* statement = db_.statement(sql, call_);
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_step(statement);
      if (rc == SQLITE_DONE) {
        sqlite3_reset(statement);
        return;
      }
      if (!is_busy(rc) || Clock::now() >= deadline) {
        try {
          db_.fail(call_, rc);
        } catch (...) {
          sqlite3_reset(statement);
          throw;
        }
      }
      sqlite3_reset(statement);
      back_off(attempt);
    }
  }

  Database& db_;
  const Call& call_;
  bool committed_ = false;
};

void create_schema(Database& db) {
  const Call call{"create schema", "", ""};
  Transaction transaction(db, call);
  for (const char* create : sql::kCreateSchema) Statement(db, create, call).run();
  Statement(db, sql::kInsertMetaValueIfAbsent, call)
      .bind_text(1, sql::kMetaSchemaVersion)
      .bind_int(2, Store::kSchemaVersion)
      .run();
  Statement(db, sql::kInsertMetaValueIfAbsent, call)
      .bind_text(1, sql::kMetaOldestCompatibleVersion)
      .bind_int(2, sql::kOldestCompatibleVersion)
      .run();
  Statement(db, sql::kSetApplicationId, call).run();
  transaction.commit();
}

std::optional<std::int64_t> read_meta(Database& db, const char* key, const Call& call) {
  Statement select(db, sql::kSelectMetaValue, call);
  select.bind_text(1, key);
  if (!select.step()) return std::nullopt;
  return select.integer(0);
}

// Brings an older file to our schema, one version at a time, in one transaction. Another process
// may migrate at the same time: the version is read again inside the write transaction and every
// step is idempotent.
void migrate(Database& db) {
  const Call call{"migrate schema", "", ""};
  const auto version = read_meta(db, sql::kMetaSchemaVersion, call);
  if (!version || *version >= Store::kSchemaVersion) return;
  Transaction transaction(db, call);
  const auto current = read_meta(db, sql::kMetaSchemaVersion, call);
  const auto step_to = [&](int target, auto& statements) {
    if (!current || *current >= target) return;
    for (const char* step : statements) Statement(db, step, call).run();
    Statement(db, sql::kRaiseSchemaVersion, call).bind_int(1, target).run();
  };
  step_to(2, sql::kMigrate1To2);
  step_to(3, sql::kMigrate2To3);
  static_assert(Store::kSchemaVersion == 3, "add the migration step to the new schema version");
  transaction.commit();
}

// --- Opening a file ---------------------------------------------------------------------------

// What inspecting an open file found.
struct Inspection {
  enum Verdict { kUsable, kCorrupt, kForeign, kNewer };
  Verdict verdict = kUsable;
  std::string reason;  // for the log, when not usable
  bool empty = false;  // usable and without tables: needs the schema
};

Inspection inspect(Database& db) {
  const Call call{"inspect", "", ""};
  {
    Statement check(db, sql::kQuickCheck, call);
    const std::string first = check.step() ? check.text(0) : std::string("no result");
    if (first != "ok") return {Inspection::kCorrupt, "quick_check: " + first, false};
  }
  std::vector<std::string> tables;
  {
    Statement list(db, sql::kListUserTables, call);
    while (list.step()) tables.push_back(list.text(0));
  }
  if (tables.empty()) return {Inspection::kUsable, "", true};

  std::string names;
  for (const auto& table : tables) names += (names.empty() ? "" : ", ") + table;
  const Inspection foreign{Inspection::kForeign,
                           "it has tables " + names + " and no kvtune schema version", false};
  if (std::find(tables.begin(), tables.end(), "meta") == tables.end()) return foreign;

  std::optional<std::int64_t> version, oldest_compatible;
  try {
    version = read_meta(db, sql::kMetaSchemaVersion, call);
    oldest_compatible = read_meta(db, sql::kMetaOldestCompatibleVersion, call);
  } catch (const Error&) {
    // A `meta` table of another shape is someone else's; corruption and I/O go to the caller.
    if ((db.last_error() & 0xff) == SQLITE_ERROR) return foreign;
    throw;
  }
  if (!version || *version < 1) return foreign;
  if (*version > Store::kSchemaVersion &&
      oldest_compatible.value_or(*version) > Store::kSchemaVersion) {
    return {Inspection::kNewer,
            "it was written by a newer kvtune: schema " + std::to_string(*version) +
                ", usable from schema " + std::to_string(oldest_compatible.value_or(*version)) +
                " on, and this kvtune has schema " + std::to_string(Store::kSchemaVersion),
            false};
  }
  // Schema 1 is the first; migrations from older versions will go here.
  return {Inspection::kUsable, "", false};
}

// WAL, synchronous NORMAL, then the schema for a new file or the migration of an older one.
void set_up_usable(Database& db, const Inspection& found) {
  const Call call{"open", "", ""};
  Statement(db, sql::kSetJournalModeWal, call).run();
  Statement(db, sql::kSetSynchronousNormal, call).run();
  if (found.empty) create_schema(db);
  else migrate(db);
}

// The result of one attempt at opening a file.
struct Attempt {
  std::unique_ptr<Database> db;  // the file is in use
  bool retry = false;            // the file was set aside (or replaced under us): start over
  std::string problem;           // otherwise: why the file cannot be used
};

Attempt unusable(std::string problem) {
  Attempt attempt;
  attempt.problem = std::move(problem);
  return attempt;
}

// mkdir -p, giving every directory it creates mode 0700; existing directories are left as they are.
bool make_parent_directories(const std::string& path, std::string& problem) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::filesystem::path current;
  for (const auto& part : parent) {
    current /= part;
    if (::mkdir(current.c_str(), 0700) == 0) {
      ::chmod(current.c_str(), 0700);  // in case the umask took owner bits away
      continue;
    }
    const int error = errno;
    struct stat st {};
    if (error == EEXIST && ::stat(current.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    problem = "cannot create directory " + current.string() + ": " +
              (error == EEXIST ? std::string("a file of that name exists") : errno_text(error));
    return false;
  }
  return true;
}

// Creates an empty file with mode 0600 (an empty file is an empty SQLite database; SQLite itself
// would create it 0644). Another process creating it first is fine.
bool create_private_file(const std::string& path, std::string& problem) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return true;
    problem = "cannot create it: " + errno_text(errno);
    return false;
  }
  ::fchmod(fd, 0600);
  ::close(fd);
  return true;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Renames `path` and its -wal, -shm and -journal siblings to `<path>.<kind>-<unix seconds>` (plus
// a counter should that name be taken). The siblings go first: a WAL left behind would be
// replayed into the new database.
Attempt set_aside(std::unique_ptr<Database> db, const std::string& path, const struct stat& opened,
                  const Inspection& found, const Logger& log) {
  // Leave the WAL exactly as found: it is part of what is set aside.
  sqlite3_db_config(db->get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  db.reset();

  Attempt attempt;
  attempt.retry = true;
  struct stat now {};
  if (::stat(path.c_str(), &now) != 0 || now.st_dev != opened.st_dev ||
      now.st_ino != opened.st_ino) {
    return attempt;  // another process set it aside already
  }

  const char* kind = found.verdict == Inspection::kCorrupt   ? "corrupt"
                     : found.verdict == Inspection::kForeign ? "foreign"
                                                             : "newer";
  const std::string base = path + "." + kind + "-" + std::to_string(unix_now());
  std::string aside = base;
  for (int n = 1; exists(aside) || exists(aside + "-wal") || exists(aside + "-shm"); ++n) {
    aside = base + "-" + std::to_string(n);
  }
  for (const char* sibling : {"-wal", "-shm", "-journal"}) {
    const std::string from = path + sibling;
    if (exists(from) && std::rename(from.c_str(), (aside + sibling).c_str()) != 0) {
      return unusable("it needs to be set aside (" + found.reason + ") but renaming " + from +
                      " failed: " + errno_text(errno));
    }
  }
  if (std::rename(path.c_str(), aside.c_str()) != 0) {
    return unusable("it needs to be set aside (" + found.reason +
                    ") but renaming it failed: " + errno_text(errno));
  }
  const char* what = found.verdict == Inspection::kCorrupt   ? "is corrupt"
                     : found.verdict == Inspection::kForeign ? "is not a kvtune cache"
                                                             : "has a newer schema";
  log("warn", "cache: " + path + " " + what + " (" + found.reason + "); moved it to " + aside +
                  " and started a new cache");
  return attempt;
}

// Whether a directory on the way to the cache may be trusted: owned by root or by us, and writable
// by nobody else, except (`sticky_ok`, the ancestors) a sticky directory such as /tmp, where others
// can add entries but not rename or remove ours.
bool trusted_directory(const std::string& dir, bool sticky_ok, std::string& problem) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    problem = "cannot stat directory " + dir + ": " + errno_text(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    problem = dir + " is not a directory";
    return false;
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    problem = "directory " + dir + " belongs to another user (uid " + std::to_string(st.st_uid) + ")";
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky_ok && (st.st_mode & S_ISVTX) != 0)) {
    problem = "directory " + dir + " is writable by group or others (mode " + octal_mode(st.st_mode) +
              "): another user could place files in it";
    return false;
  }
  return true;
}

// The cache file's location may be trusted (docs/RELIABILITY.md, "Trust model"): every directory
// from / down to the cache's is trusted_directory(), the cache's own not even sticky, so nobody
// else can swap what the path names between this check and SQLite's open; the file and the -wal,
// -shm and -journal files SQLite would read with it, where present, are regular files (not
// symbolic links) of ours writable by nobody else. `real` gets the path with the directory's
// symbolic links resolved (SQLite is then told not to follow any).
bool trusted_location(const std::string& path, std::string& real, std::string& problem) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error || !absolute.has_filename()) {
    problem = "cannot resolve the path: " + (error ? error.message() : std::string("it names no file"));
    return false;
  }
  const std::filesystem::path dir = std::filesystem::canonical(absolute.parent_path(), error);
  if (error) {
    problem = "cannot resolve directory " + absolute.parent_path().string() + ": " + error.message();
    return false;
  }
  std::filesystem::path walk;
  for (const auto& part : dir) {
    walk /= part;
    if (!trusted_directory(walk.string(), walk != dir, problem)) return false;
  }
  real = (dir / absolute.filename()).string();
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = real + suffix;
    struct stat st {};
    if (::lstat(file.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      problem = "cannot stat " + file + ": " + errno_text(errno);
      return false;
    }
    if (S_ISLNK(st.st_mode)) {
      problem = file + " is a symbolic link (kvtune opens no cache file through one)";
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      problem = file + " is not a regular file";
      return false;
    }
    if (st.st_uid != ::geteuid()) {
      problem = file + " belongs to another user (uid " + std::to_string(st.st_uid) + "), so it is not trusted";
      return false;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      problem = file + " is writable by group or others (mode " + octal_mode(st.st_mode) +
                "), so it is not trusted; chmod 600 it to use it";
      return false;
    }
  }
  return true;
}

Attempt open_file(const std::string& user_path, const Logger& log) {
  std::string problem;
  if (!make_parent_directories(user_path, problem)) return unusable(problem);
  std::string path;  // user_path with its directory's links resolved: what is opened and renamed
  if (!trusted_location(user_path, path, problem)) return unusable(problem);

  struct stat st {};
  bool created = false;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return unusable("cannot stat it: " + errno_text(errno));
    if (!create_private_file(path, problem)) return unusable(problem);
    if (::stat(path.c_str(), &st) != 0) return unusable("cannot stat it: " + errno_text(errno));
    created = true;
  }
  if (!S_ISREG(st.st_mode)) return unusable("it is not a regular file");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return unusable("it is writable by group or others (mode " + octal_mode(st.st_mode) +
                    "), so it is not trusted; chmod 600 it to use it");
  }

  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
  Connection connection(raw);
  if (rc != SQLITE_OK) {
    return unusable(std::string("cannot open it: ") +
                    (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  if (sqlite3_db_readonly(raw, "main") == 1) return unusable("it can be opened read-only only");

  auto db = std::make_unique<Database>(std::move(connection), user_path);
  Inspection found;
  try {
    found = inspect(*db);
    if (found.verdict == Inspection::kUsable) {
      set_up_usable(*db, found);
      if (created) log("info", "cache: created " + user_path);
      Attempt attempt;
      attempt.db = std::move(db);
      return attempt;
    }
  } catch (const Error& e) {
    if (!is_corruption(db->last_error())) return unusable(e.cause());
    found = {Inspection::kCorrupt, sqlite3_errstr(db->last_error()), false};
  }
  return set_aside(std::move(db), path, st, found, log);
}

std::unique_ptr<Database> open_in_memory() {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(
      ":memory:", &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  Connection connection(raw);
  if (rc != SQLITE_OK) {  // out of memory: nothing left to fall back to
    throw Error(Error::Context{"cache", "", "", "", ""},
                std::string("cannot open an in-memory database: ") + sqlite3_errstr(rc));
  }
  auto db = std::make_unique<Database>(std::move(connection), "");
  create_schema(*db);
  return db;
}

DeviceRow read_device(const Statement& row) {
  DeviceRow device;
  device.id = row.text(0);
  device.name = row.text(1);
  device.cc_major = static_cast<int>(row.integer(2));
  device.cc_minor = static_cast<int>(row.integer(3));
  device.sm_count = static_cast<int>(row.integer(4));
  device.l2_bytes = row.integer(5);
  device.memory_bytes = row.integer(6);
  device.driver_version = static_cast<int>(row.integer(7));
  device.nvrtc_version = static_cast<int>(row.integer(8));
  device.kvtune_version = row.text(9);
  device.json = row.text(10);
  device.updated_at = row.integer(11);
  return device;
}

Ceilings read_ceilings(const Statement& row) {
  Ceilings ceilings;
  ceilings.device_id = row.text(0);
  ceilings.copy_gbps = row.real(1);
  ceilings.fma_gflops = row.real(2);
  ceilings.measured_at = row.integer(3);
  return ceilings;
}

Winner read_winner(const Statement& row) {
  Winner winner;
  winner.op = row.text(0);
  winner.problem_key = row.text(1);
  winner.device_id = row.text(2);
  winner.template_hash = row.text(3);
  winner.label = row.text(4);
  winner.config_json = row.text(5);
  winner.binary_hash = row.text(6);
  winner.origin = row.text(7);
  winner.median_ms = row.real(8);
  winner.gbps = row.real(9);
  winner.created_at = row.integer(10);
  return winner;
}

// The limits a row read back from a file must keep, as user input must (a cache file is data
// another process, a merge or a hand may have written). A row beyond them is skipped with a
// warning, never parsed further. Sizes in bytes.
constexpr std::size_t kMaxKeyBytes = 4096;       // problem keys, device ids, hashes, ops, origins
constexpr std::size_t kMaxLabelBytes = 1024;     // config labels
constexpr std::size_t kMaxConfigBytes = 4096;    // a config's JSON (a flat object)
constexpr std::size_t kMaxMessageBytes = 65536;  // a trial's failure text
constexpr std::size_t kMaxImageBytes = std::size_t(64) << 20;  // a cubin (kvtune's are < 1 MiB)

// Why `w` breaks the limits, "" when it keeps them.
std::string beyond_limits(const Winner& w) {
  for (const auto& [text, limit, name] :
       {std::tuple{&w.problem_key, kMaxKeyBytes, "problem key"}, std::tuple{&w.device_id, kMaxKeyBytes, "device id"},
        std::tuple{&w.template_hash, kMaxKeyBytes, "template hash"}, std::tuple{&w.op, kMaxKeyBytes, "op"},
        std::tuple{&w.origin, kMaxKeyBytes, "origin"}, std::tuple{&w.binary_hash, kMaxKeyBytes, "binary hash"},
        std::tuple{&w.label, kMaxLabelBytes, "label"}, std::tuple{&w.config_json, kMaxConfigBytes, "config"}})
    if (text->size() > limit) return std::string(name) + " of " + std::to_string(text->size()) + " bytes";
  if (std::isnan(w.median_ms) || std::isnan(w.gbps)) return "a NaN time";
  return "";
}

std::string beyond_limits(const Trial& t) {
  if (t.label.size() > kMaxLabelBytes) return "label of " + std::to_string(t.label.size()) + " bytes";
  if (t.config_json.size() > kMaxConfigBytes) return "config of " + std::to_string(t.config_json.size()) + " bytes";
  if (t.status.size() > kMaxKeyBytes) return "status of " + std::to_string(t.status.size()) + " bytes";
  if (t.message.size() > kMaxMessageBytes) return "message of " + std::to_string(t.message.size()) + " bytes";
  return "";
}

std::string beyond_limits(const Binary& b) {
  if (b.hash.size() > kMaxKeyBytes || b.arch.size() > kMaxKeyBytes || b.lowered_name.size() > kMaxKeyBytes ||
      b.image_hash.size() > kMaxKeyBytes)
    return "a name or hash over " + std::to_string(kMaxKeyBytes) + " bytes";
  if (b.image.size() > kMaxImageBytes) return "an image of " + std::to_string(b.image.size()) + " bytes";
  return "";
}

// Collects the rows a read skipped, to be logged once the store's lock is released (the log
// callback is user code).
struct Skipped {
  std::vector<std::string> reasons;
  template <class Row>
  bool keep(const Row& row, const char* what) {
    std::string why = beyond_limits(row);
    if (why.empty()) return true;
    reasons.push_back(std::string(what) + " row with " + why);
    return false;
  }
  void report(const Logger& log, const Store& store) const {
    for (const auto& why : reasons)
      log("warn", "cache: skipped a " + why + " in " + (store.in_memory() ? std::string("the in-memory cache") : store.path()) +
                      " (beyond the limits kvtune reads)");
  }
};

// The image hash to store: the caller's, which must match the image, or computed when empty.
std::string checked_image_hash(const Binary& binary, const Call& call) {
  const std::string actual = detail::hash_hex(binary.image);
  if (binary.hash.empty() || (!binary.image_hash.empty() && binary.image_hash != actual)) {
    throw Error(Error::Context{"cache", call.problem, "", call.device, ""},
                std::string(call.operation) + ": binary '" + binary.hash + "' " +
                    (binary.hash.empty() ? "has no hash"
                                         : "has image_hash " + binary.image_hash +
                                               " but its image hashes to " + actual));
  }
  return actual;
}

// kSelectBinary's row.
Binary read_binary(const Statement& row) {
  return Binary{row.text(0), row.text(1), row.text(2), row.blob(3), row.text(4)};
}

// The rule by which every reader refuses a damaged binary.
bool image_intact(const Binary& binary) {
  return detail::hash_hex(binary.image) == binary.image_hash;
}

void write_binary(Database& db, const Binary& binary, const std::string& image_hash,
                  const Call& call) {
  Statement(db, sql::kPutBinary, call)
      .bind_text(1, binary.hash)
      .bind_text(2, binary.arch)
      .bind_text(3, binary.lowered_name)
      .bind_blob(4, binary.image)
      .bind_text(5, image_hash)
      .bind_int(6, unix_now())
      .run();
}

// put_binary's rule: whatever differs is overwritten.
void insert_binary(Database& db, const Binary& binary, const Call& call) {
  write_binary(db, binary, checked_image_hash(binary, call), call);
}

// put_binaries' rule: an intact row of the same hash is the same cubin and stays as it is; a
// missing one is inserted and a damaged one replaced.
void keep_or_insert_binary(Database& db, const Binary& binary, const Call& call) {
  const std::string image_hash = checked_image_hash(binary, call);
  {
    Statement select(db, sql::kSelectBinary, call);
    select.bind_text(1, binary.hash);
    if (select.step() && image_intact(read_binary(select))) return;
  }
  write_binary(db, binary, image_hash, call);
}

Lease read_lease(const Statement& row) {
  Lease lease;
  lease.problem_key = row.text(0);
  lease.device_id = row.text(1);
  lease.template_hash = row.text(2);
  lease.owner = row.text(3);
  lease.acquired_at = static_cast<std::int64_t>(std::floor(row.real(4)));
  lease.expires_at = static_cast<std::int64_t>(std::ceil(row.real(5)));
  return lease;
}

RecordedProblem read_recorded_problem(const Statement& row) {
  RecordedProblem problem;
  problem.op = row.text(0);
  problem.problem_key = row.text(1);
  problem.device_id = row.text(2);
  problem.template_hash = row.text(3);
  problem.count = row.integer(4);
  problem.first_seen = row.integer(5);
  problem.last_seen = row.integer(6);
  return problem;
}

TuningRun read_tuning_run(const Statement& row) {
  TuningRun run;
  run.op = row.text(0);
  run.problem_key = row.text(1);
  run.device_id = row.text(2);
  run.template_hash = row.text(3);
  run.started_at = row.integer(4);
  run.wall_seconds = row.real(5);
  run.compile_seconds = row.real(6);
  run.bench_seconds = row.real(7);
  run.variants_total = static_cast<int>(row.integer(8));
  run.variants_timed = static_cast<int>(row.integer(9));
  run.compiles = static_cast<int>(row.integer(10));
  run.binaries_reused = static_cast<int>(row.integer(11));
  run.search = row.text(12);
  run.sm_clock_mhz = static_cast<int>(row.integer(13));
  run.mem_clock_mhz = static_cast<int>(row.integer(14));
  run.temperature_c = static_cast<int>(row.integer(15));
  run.power_w = row.real(16);
  run.winner_label = row.text(17);
  run.winner_ms = row.real(18);
  run.incumbent_label = row.text(19);
  run.incumbent_ms = row.real(20);
  run.replaced_incumbent = row.integer(21) != 0;
  run.json = row.text(22);
  return run;
}

void insert_tuning_run(Database& db, const TuningRun& run, const Call& call) {
  Statement(db, sql::kInsertTuningRun, call)
      .bind_text(1, run.op)
      .bind_text(2, run.problem_key)
      .bind_text(3, run.device_id)
      .bind_text(4, run.template_hash)
      .bind_int(5, run.started_at != 0 ? run.started_at : unix_now())
      .bind_real(6, run.wall_seconds)
      .bind_real(7, run.compile_seconds)
      .bind_real(8, run.bench_seconds)
      .bind_int(9, run.variants_total)
      .bind_int(10, run.variants_timed)
      .bind_int(11, run.compiles)
      .bind_int(12, run.binaries_reused)
      .bind_text(13, run.search)
      .bind_int(14, run.sm_clock_mhz)
      .bind_int(15, run.mem_clock_mhz)
      .bind_int(16, run.temperature_c)
      .bind_real(17, run.power_w)
      .bind_text(18, run.winner_label)
      .bind_real(19, run.winner_ms)
      .bind_text(20, run.incumbent_label)
      .bind_real(21, run.incumbent_ms)
      .bind_int(22, run.replaced_incumbent ? 1 : 0)
      .bind_text(23, run.json)
      .run();
}

// The run put_result stores: empty key fields are the winner's; other values must be.
TuningRun run_of(const Winner& winner, TuningRun run, const Call& call) {
  const auto take = [&](std::string& field, const std::string& value, const char* name) {
    if (field.empty()) field = value;
    if (field == value) return;
    throw Error(Error::Context{"cache", call.problem, "", call.device, ""},
                std::string(call.operation) + ": the tuning run's " + name + " '" + field +
                    "' is not the winner's '" + value + "'");
  };
  take(run.op, winner.op, "op");
  take(run.problem_key, winner.problem_key, "problem_key");
  take(run.device_id, winner.device_id, "device_id");
  take(run.template_hash, winner.template_hash, "template_hash");
  return run;
}

}  // namespace

// --- Store ------------------------------------------------------------------------------------

struct Store::Impl {
  Impl(std::unique_ptr<Database> database, Logger logger)
      : db(std::move(database)), log(std::move(logger)) {}
  std::unique_ptr<Database> db;
  Logger log;
  std::mutex mutex;  // one connection, used by one thread at a time
};

namespace {

// find_binary's and find_binaries' check, run without the lock: the log callback is user code.
bool usable_binary(const Binary& binary, const Store& store, const Logger& log) {
  Skipped skipped;
  if (!skipped.keep(binary, "binary")) {
    skipped.report(log, store);
    return false;
  }
  if (image_intact(binary)) return true;
  log("warn", "cache: binary " + binary.hash + " in " +
                  (store.in_memory() ? std::string("the in-memory cache") : store.path()) +
                  " is damaged (its image no longer matches its hash); ignoring it");
  return false;
}

// The rows of `sql` (bound by `bind`, each read by `read`) that keep the limits; the skipped
// ones are logged once the lock is released (the log callback is user code).
template <class Row, class Bind, class Read>
std::vector<Row> select_kept(std::mutex& mutex, Database& db, const Logger& log, const Store& store, const char* sql,
                             const Call& call, const char* what, Bind bind, Read read) {
  Skipped skipped;
  std::vector<Row> rows;
  {
    std::lock_guard<std::mutex> lock(mutex);
    Statement select(db, sql, call);
    bind(select);
    while (select.step())
      if (Row row = read(select); skipped.keep(row, what)) rows.push_back(std::move(row));
  }
  skipped.report(log, store);
  return rows;
}

}  // namespace

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

std::unique_ptr<Store> Store::open(const std::string& path, LogFn log_fn) {
  Logger log(std::move(log_fn));
  if (path.empty() || path == ":memory:") {
    return std::unique_ptr<Store>(new Store(std::make_unique<Impl>(open_in_memory(), log)));
  }
  // Each retry follows a file set aside; three cover a race with another process doing the same.
  std::string problem = "it was set aside repeatedly";
  for (int attempt = 0; attempt < 3; ++attempt) {
    Attempt result = open_file(path, log);
    if (result.db) {
      return std::unique_ptr<Store>(new Store(std::make_unique<Impl>(std::move(result.db), log)));
    }
    if (!result.retry) {
      problem = result.problem;
      break;
    }
  }
  log("warn",
      "cache: cannot use " + path + ": " + problem + "; using an in-memory cache for this process");
  return std::unique_ptr<Store>(new Store(std::make_unique<Impl>(open_in_memory(), log)));
}

std::unique_ptr<Store> Store::open_existing(const std::string& path, bool create, LogFn log_fn) {
  using Reason = OpenError::Reason;
  Logger log(std::move(log_fn));
  if (path.empty() || path == ":memory:") {
    return std::unique_ptr<Store>(new Store(std::make_unique<Impl>(open_in_memory(), log)));
  }
  struct stat st {};
  std::string real, problem;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) throw OpenError(Reason::unusable, path + ": cannot stat it: " + errno_text(errno));
    if (!create) throw OpenError(Reason::missing, "cache file " + path + " does not exist");
    if (!make_parent_directories(path, problem) || !trusted_location(path, real, problem) ||
        !create_private_file(real, problem))
      throw OpenError(Reason::unusable, path + ": " + problem);
    if (::stat(real.c_str(), &st) != 0)
      throw OpenError(Reason::unusable, path + ": cannot stat it: " + errno_text(errno));
    log("info", "cache: created " + path);
  }
  if (!S_ISREG(st.st_mode)) throw OpenError(Reason::unusable, path + " is not a regular file");
  if (!trusted_location(path, real, problem)) throw OpenError(Reason::unusable, path + ": " + problem);
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(real.c_str(), &raw,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
  Connection connection(raw);
  if (rc != SQLITE_OK) {
    throw OpenError(Reason::unusable,
                    path + ": cannot open it: " + (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  if (sqlite3_db_readonly(raw, "main") == 1) throw OpenError(Reason::unusable, path + " can be opened read-only only");

  auto db = std::make_unique<Database>(std::move(connection), path);
  Inspection found;
  try {
    found = inspect(*db);
  } catch (const Error& e) {
    const int primary = db->last_error() & 0xff;
    if (primary == SQLITE_NOTADB) throw OpenError(Reason::not_kvtune, path + " is not a kvtune cache (not an SQLite database)");
    if (primary == SQLITE_CORRUPT) throw OpenError(Reason::corrupt, path + " is a corrupt database: " + e.cause());
    throw OpenError(Reason::unusable, path + ": " + e.cause());
  }
  switch (found.verdict) {
    case Inspection::kUsable: break;
    case Inspection::kCorrupt: throw OpenError(Reason::corrupt, path + " is a corrupt database (" + found.reason + ")");
    case Inspection::kForeign: throw OpenError(Reason::not_kvtune, path + " is not a kvtune cache (" + found.reason + ")");
    case Inspection::kNewer: throw OpenError(Reason::newer, path + " cannot be used: " + found.reason);
  }
  try {
    set_up_usable(*db, found);
  } catch (const Error& e) {
    throw OpenError(is_corruption(db->last_error()) ? Reason::corrupt : Reason::unusable, path + ": " + e.cause());
  }
  return std::unique_ptr<Store>(new Store(std::make_unique<Impl>(std::move(db), log)));
}

const std::string& Store::path() const { return impl_->db->path(); }

bool Store::in_memory() const { return impl_->db->path().empty(); }

int Store::schema_version() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"schema_version", "", ""};
  const auto version = read_meta(*impl_->db, sql::kMetaSchemaVersion, call);
  return version ? static_cast<int>(*version) : 0;
}

void Store::put_device(const DeviceRow& device) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"put_device", "", device.id};
  Transaction transaction(db, call);
  Statement(db, sql::kUpsertDevice, call)
      .bind_text(1, device.id)
      .bind_text(2, device.name)
      .bind_int(3, device.cc_major)
      .bind_int(4, device.cc_minor)
      .bind_int(5, device.sm_count)
      .bind_int(6, device.l2_bytes)
      .bind_int(7, device.memory_bytes)
      .bind_int(8, device.driver_version)
      .bind_int(9, device.nvrtc_version)
      .bind_text(10, device.kvtune_version)
      .bind_text(11, device.json)
      .bind_int(12, device.updated_at != 0 ? device.updated_at : unix_now())
      .run();
  transaction.commit();
}

std::optional<DeviceRow> Store::find_device(const std::string& id) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"find_device", "", id};
  Statement select(*impl_->db, sql::kSelectDevice, call);
  select.bind_text(1, id);
  if (!select.step()) return std::nullopt;
  return read_device(select);
}

std::vector<DeviceRow> Store::devices() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"devices", "", ""};
  Statement select(*impl_->db, sql::kSelectAllDevices, call);
  std::vector<DeviceRow> all;
  while (select.step()) all.push_back(read_device(select));
  return all;
}

void Store::put_ceilings(const Ceilings& ceilings) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"put_ceilings", "", ceilings.device_id};
  Transaction transaction(db, call);
  Statement(db, sql::kUpsertCeilings, call)
      .bind_text(1, ceilings.device_id)
      .bind_real(2, ceilings.copy_gbps)
      .bind_real(3, ceilings.fma_gflops)
      .bind_int(4, ceilings.measured_at != 0 ? ceilings.measured_at : unix_now())
      .run();
  transaction.commit();
}

std::optional<Ceilings> Store::find_ceilings(const std::string& device_id) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"find_ceilings", "", device_id};
  Statement select(*impl_->db, sql::kSelectCeilings, call);
  select.bind_text(1, device_id);
  if (!select.step()) return std::nullopt;
  return read_ceilings(select);
}

std::vector<Ceilings> Store::all_ceilings() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"all_ceilings", "", ""};
  Statement select(*impl_->db, sql::kSelectAllCeilings, call);
  std::vector<Ceilings> all;
  while (select.step()) all.push_back(read_ceilings(select));
  return all;
}

std::optional<Winner> Store::find_winner(const std::string& problem_key,
                                         const std::string& device_id,
                                         const std::string& template_hash) {
  auto found = select_kept<Winner>(
      impl_->mutex, *impl_->db, impl_->log, *this, sql::kSelectWinner, Call{"find_winner", problem_key, device_id},
      "winner", [&](Statement& s) { s.bind_text(1, problem_key).bind_text(2, device_id).bind_text(3, template_hash); },
      read_winner);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

void Store::put_result(const Winner& winner, const std::optional<Binary>& binary,
                       const std::vector<Trial>& trials) {
  put_result(winner, binary ? std::vector<Binary>{*binary} : std::vector<Binary>{}, trials,
             std::nullopt);
}

void Store::put_result(const Winner& winner, const std::vector<Binary>& binaries,
                       const std::vector<Trial>& trials, const std::optional<TuningRun>& run) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"put_result", winner.problem_key, winner.device_id};
  const std::int64_t now = unix_now();
  const std::optional<TuningRun> stored_run =
      run ? std::optional<TuningRun>(run_of(winner, *run, call)) : std::nullopt;
  Transaction transaction(db, call);
  for (const Binary& binary : binaries) keep_or_insert_binary(db, binary, call);
  Statement(db, sql::kUpsertWinner, call)
      .bind_text(1, winner.problem_key)
      .bind_text(2, winner.device_id)
      .bind_text(3, winner.template_hash)
      .bind_text(4, winner.op)
      .bind_text(5, winner.label)
      .bind_text(6, winner.config_json)
      .bind_text(7, winner.binary_hash)
      .bind_text(8, winner.origin)
      .bind_real(9, winner.median_ms)
      .bind_real(10, winner.gbps)
      .bind_int(11, winner.created_at != 0 ? winner.created_at : now)
      .run();
  for (const Trial& trial : trials) {
    Statement(db, sql::kInsertTrial, call)
        .bind_text(1, winner.problem_key)
        .bind_text(2, winner.device_id)
        .bind_text(3, winner.template_hash)
        .bind_text(4, trial.label)
        .bind_text(5, trial.config_json)
        .bind_text(6, trial.status)
        .bind_text(7, trial.message)
        .bind_real(8, trial.median_ms)
        .bind_real(9, trial.spread)
        .bind_real(10, trial.gbps)
        .bind_int(11, now)
        .run();
  }
  // A tuned (or imported) winner answers the recorded problem; a heuristic stand-in does not.
  if (winner.origin != "heuristic")
    Statement(db, sql::kDeleteRecordedProblem, call)
        .bind_text(1, winner.problem_key)
        .bind_text(2, winner.device_id)
        .bind_text(3, winner.template_hash)
        .run();
  if (stored_run) insert_tuning_run(db, *stored_run, call);
  transaction.commit();
}

std::vector<Winner> Store::winners() {
  return select_kept<Winner>(impl_->mutex, *impl_->db, impl_->log, *this, sql::kSelectAllWinners,
                             Call{"winners", "", ""}, "winner", [](Statement&) {}, read_winner);
}

std::vector<Winner> Store::winners_for(const std::string& op, const std::string& device_id,
                                      const std::string& template_hash) {
  return select_kept<Winner>(
      impl_->mutex, *impl_->db, impl_->log, *this, sql::kSelectWinnersFor, Call{"winners_for", "", device_id}, "winner",
      [&](Statement& s) { s.bind_text(1, op).bind_text(2, device_id).bind_text(3, template_hash); }, read_winner);
}

std::vector<Trial> Store::trials(const std::string& problem_key, const std::string& device_id,
                                 const std::string& template_hash) {
  return select_kept<Trial>(
      impl_->mutex, *impl_->db, impl_->log, *this, sql::kSelectTrials, Call{"trials", problem_key, device_id}, "trial",
      [&](Statement& s) { s.bind_text(1, problem_key).bind_text(2, device_id).bind_text(3, template_hash); },
      [](const Statement& row) {
        return Trial{row.text(0), row.text(1), row.text(2), row.text(3), row.real(4), row.real(5), row.real(6),
                     row.integer(7)};
      });
}

bool Store::remove_result(const std::string& problem_key, const std::string& device_id,
                          const std::string& template_hash) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"remove_result", problem_key, device_id};
  Transaction transaction(db, call);
  Statement(db, sql::kDeleteWinner, call)
      .bind_text(1, problem_key)
      .bind_text(2, device_id)
      .bind_text(3, template_hash)
      .run();
  const bool removed = sqlite3_changes(db.get()) > 0;
  Statement(db, sql::kDeleteTrials, call)
      .bind_text(1, problem_key)
      .bind_text(2, device_id)
      .bind_text(3, template_hash)
      .run();
  transaction.commit();
  return removed;
}

std::optional<Binary> Store::find_binary(const std::string& hash) {
  std::optional<Binary> binary;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    const Call call{"find_binary", "", ""};
    Statement select(*impl_->db, sql::kSelectBinary, call);
    select.bind_text(1, hash);
    if (!select.step()) return std::nullopt;
    binary = read_binary(select);
  }
  // Hashed outside the lock.
  if (!usable_binary(*binary, *this, impl_->log)) return std::nullopt;
  return binary;
}

std::vector<Binary> Store::find_binaries(const std::vector<std::string>& hashes) {
  std::vector<Binary> found;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    const Call call{"find_binaries", "", ""};
    std::unordered_set<std::string> seen;
    for (const std::string& hash : hashes) {
      if (!seen.insert(hash).second) continue;
      Statement select(*impl_->db, sql::kSelectBinary, call);
      select.bind_text(1, hash);
      if (select.step()) found.push_back(read_binary(select));
    }
  }
  // Hashed outside the lock.
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](const Binary& binary) {
                               return !usable_binary(binary, *this, impl_->log);
                             }),
              found.end());
  return found;
}

void Store::put_binary(const Binary& binary) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"put_binary", "", ""};
  Transaction transaction(db, call);
  insert_binary(db, binary, call);
  transaction.commit();
}

void Store::put_binaries(const std::vector<Binary>& binaries) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"put_binaries", "", ""};
  Transaction transaction(db, call);
  for (const Binary& binary : binaries) keep_or_insert_binary(db, binary, call);
  transaction.commit();
}

std::vector<BinaryInfo> Store::binary_infos() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"binary_infos", "", ""};
  Statement select(*impl_->db, sql::kSelectBinaryInfos, call);
  std::vector<BinaryInfo> all;
  while (select.step()) {
    all.push_back(BinaryInfo{select.text(0), select.text(1), select.text(2), select.integer(3),
                             select.text(4), select.integer(5)});
  }
  return all;
}

int Store::remove_binaries(const std::vector<std::string>& hashes) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"remove_binaries", "", ""};
  Transaction transaction(db, call);
  int removed = 0;
  for (const std::string& hash : hashes) {
    Statement(db, sql::kDeleteBinary, call).bind_text(1, hash).run();
    removed += sqlite3_changes(db.get());
  }
  transaction.commit();
  return removed;
}

bool Store::try_acquire_lease(const std::string& problem_key, const std::string& device_id,
                              const std::string& template_hash, const std::string& owner,
                              double ttl_seconds) {
  const Call call{"try_acquire_lease", problem_key, device_id};
  if (owner.empty() || !(ttl_seconds > 0) || !std::isfinite(ttl_seconds)) {
    throw Error(Error::Context{"cache", problem_key, "", device_id, ""},
                "try_acquire_lease: " +
                    (owner.empty() ? std::string("the owner is empty")
                                   : "ttl_seconds is " + std::to_string(ttl_seconds) +
                                         "; it must be a positive number of seconds"));
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  Transaction transaction(db, call);
  // Read the clock once the write lock is held: time spent waiting for it must not count.
  const double now = unix_now_fractional();
  Statement(db, sql::kAcquireLease, call)
      .bind_text(1, problem_key)
      .bind_text(2, device_id)
      .bind_text(3, template_hash)
      .bind_text(4, owner)
      .bind_real(5, now)
      .bind_real(6, now + ttl_seconds)
      .run();
  const bool acquired = sqlite3_changes(db.get()) > 0;
  transaction.commit();
  return acquired;
}

void Store::release_lease(const std::string& problem_key, const std::string& device_id,
                          const std::string& template_hash, const std::string& owner) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"release_lease", problem_key, device_id};
  Transaction transaction(db, call);
  Statement(db, sql::kReleaseLease, call)
      .bind_text(1, problem_key)
      .bind_text(2, device_id)
      .bind_text(3, template_hash)
      .bind_text(4, owner)
      .run();
  transaction.commit();
}

std::vector<Lease> Store::leases() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"leases", "", ""};
  Statement select(*impl_->db, sql::kSelectAllLeases, call);
  std::vector<Lease> all;
  while (select.step()) all.push_back(read_lease(select));
  return all;
}

void Store::record_problem(const std::string& op, const std::string& problem_key,
                           const std::string& device_id, const std::string& template_hash) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"record_problem", problem_key, device_id};
  Transaction transaction(db, call);
  Statement(db, sql::kRecordProblem, call)
      .bind_text(1, problem_key)
      .bind_text(2, device_id)
      .bind_text(3, template_hash)
      .bind_text(4, op)
      .bind_int(5, unix_now())
      .run();
  transaction.commit();
}

std::vector<RecordedProblem> Store::recorded_problems() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"recorded_problems", "", ""};
  Statement select(*impl_->db, sql::kSelectRecordedProblems, call);
  std::vector<RecordedProblem> all;
  while (select.step()) all.push_back(read_recorded_problem(select));
  return all;
}

bool Store::remove_recorded(const std::string& problem_key, const std::string& device_id,
                            const std::string& template_hash) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"remove_recorded", problem_key, device_id};
  Transaction transaction(db, call);
  Statement(db, sql::kDeleteRecordedProblem, call)
      .bind_text(1, problem_key)
      .bind_text(2, device_id)
      .bind_text(3, template_hash)
      .run();
  const bool removed = sqlite3_changes(db.get()) > 0;
  transaction.commit();
  return removed;
}

void Store::put_tuning_run(const TuningRun& run) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"put_tuning_run", run.problem_key, run.device_id};
  Transaction transaction(db, call);
  insert_tuning_run(db, run, call);
  transaction.commit();
}

std::vector<TuningRun> Store::tuning_runs(const std::string& problem_key) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"tuning_runs", problem_key, ""};
  Statement select(*impl_->db,
                   problem_key.empty() ? sql::kSelectAllTuningRuns : sql::kSelectTuningRuns, call);
  if (!problem_key.empty()) select.bind_text(1, problem_key);
  std::vector<TuningRun> all;
  while (select.step()) all.push_back(read_tuning_run(select));
  return all;
}

std::vector<std::string> Store::integrity_check() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"integrity_check", "", ""};
  Statement check(*impl_->db, sql::kIntegrityCheck, call);
  std::vector<std::string> problems;
  while (check.step()) {
    std::string line = check.text(0);
    if (line != "ok") problems.push_back(std::move(line));
  }
  return problems;
}

void Store::clear() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Database& db = *impl_->db;
  const Call call{"clear", "", ""};
  Transaction transaction(db, call);
  for (const char* remove : sql::kDeleteEverything) Statement(db, remove, call).run();
  transaction.commit();
}

}  // namespace kvtune::cache
