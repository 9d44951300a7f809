#pragma once
// Store::Impl, shared by the store's units (cache/store_open.cpp, schema.cpp, store_reads.cpp,
// store_writes.cpp): the connection, the log and the lock, and the two shapes every public call
// takes — a read under the lock, a write under the lock in one transaction.

#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cache/database.h"
#include "cache/store.h"

namespace kvtune::cache {

struct Store::Impl {
  Impl(std::unique_ptr<internal::Database> database, internal::Logger logger)
      : db(std::move(database)), log(std::move(logger)) {}
  std::unique_ptr<internal::Database> db;
  internal::Logger log;
  std::mutex mutex;  // one connection, used by one thread at a time

  // The cache as log messages name it.
  std::string where() const { return db->path().empty() ? std::string("the in-memory cache") : db->path(); }

  // body(db) under the lock, in one transaction committed when it returns (rolled back when it
  // throws); returns what body returns.
  template <class Body>
  auto write(const internal::Call& call, Body&& body) {
    std::lock_guard<std::mutex> lock(mutex);
    internal::Transaction transaction(*db, call);
    if constexpr (std::is_void_v<decltype(body(*db))>) {
      body(*db);
      transaction.commit();
    } else {
      auto result = body(*db);
      transaction.commit();
      return result;
    }
  }

  // Under the lock: `bind` binds the parameters of `sql`, then `each` gets every row.
  template <class Bind, class Each>
  void select(const internal::Call& call, const char* sql, Bind&& bind, Each&& each) {
    std::lock_guard<std::mutex> lock(mutex);
    internal::Statement statement(*db, sql, call);
    bind(statement);
    while (statement.step()) each(statement);
  }

  // Every row of `sql`, each made by `read`.
  template <class Row, class Read, class Bind>
  std::vector<Row> select_all(const internal::Call& call, const char* sql, Read&& read, Bind&& bind) {
    std::vector<Row> rows;
    select(call, sql, bind, [&](const internal::Statement& row) { rows.push_back(read(row)); });
    return rows;
  }
  template <class Row, class Read>
  std::vector<Row> select_all(const internal::Call& call, const char* sql, Read&& read) {
    return select_all<Row>(call, sql, read, [](internal::Statement&) {});
  }

  // select_all's rows that keep the limits a file's rows must keep (store_reads.cpp, for winners,
  // trials and binaries); the skipped ones are logged, once the lock is released, as `what` rows.
  template <class Row, class Bind, class Read>
  std::vector<Row> select_kept(const internal::Call& call, const char* sql, const char* what, Bind bind, Read read);

  // The first row of `sql`, made by `read`; nullopt when there is none.
  template <class Row, class Read, class Bind>
  std::optional<Row> select_first(const internal::Call& call, const char* sql, Read&& read, Bind&& bind) {
    std::lock_guard<std::mutex> lock(mutex);
    internal::Statement statement(*db, sql, call);
    bind(statement);
    if (!statement.step()) return std::nullopt;
    return read(statement);
  }
};

namespace internal {

// kSelectBinary's row.
inline Binary read_binary(const Statement& row) {
  return Binary{row.text(0), row.text(1), row.text(2), row.blob(3), row.text(4)};
}

// The rule by which every reader refuses a damaged binary.
bool image_intact(const Binary& binary);

}  // namespace internal
}  // namespace kvtune::cache
