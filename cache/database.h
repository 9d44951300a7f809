#pragma once
// The SQLite layer under the store (cache/ only; sqlite3.h is included by cache/ alone): one
// connection and its prepared statements, a statement in use, a write transaction, and what every
// part of the store shares (the clocks, the busy timeout, the Call named in error messages, the
// guarded log callback). Statements and transactions retry SQLITE_BUSY up to the busy timeout.

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "cache/sql.h"
#include "cache/store.h"
#include "kvtune/error.h"

namespace kvtune::cache::internal {

using Clock = std::chrono::steady_clock;

// Several processes tuning at once each hold the write lock for one short transaction; 15 s is far
// above any wait that is not a stuck process.
constexpr int kBusyTimeoutMs = 15000;
constexpr auto kBusyTimeout = std::chrono::milliseconds(kBusyTimeoutMs);

inline std::int64_t unix_now() { return static_cast<std::int64_t>(std::time(nullptr)); }

// Leases live about a second, so they need a finer clock; the wall clock, so that processes agree.
inline double unix_now_fractional() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline bool is_corruption(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

inline bool is_busy(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

// A few milliseconds, growing, for retries that SQLite's own busy handler did not absorb.
inline void back_off(int attempt) {
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
  // Rows the last INSERT, UPDATE or DELETE changed.
  int changes() const { return sqlite3_changes(get()); }

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
  // Parameters 1 to 3: an entry's (problem key or op, device id, template hash).
  Statement& bind_entry(const std::string& key, const std::string& device_id, const std::string& template_hash) {
    return bind_text(1, key).bind_text(2, device_id).bind_text(3, template_hash);
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

}  // namespace kvtune::cache::internal
