// The store's schema (contract in cache/schema.h; SQL text in sql.h): creation in one transaction,
// the meta table, migrations from older schema versions, the inspection that tells a usable
// kvtune file from a corrupt, foreign or newer one, and the whole-file calls (schema_version,
// integrity_check, clear).

#include "cache/schema.h"

#include <algorithm>
#include <vector>

#include "cache/store_impl.h"

namespace kvtune::cache {
namespace internal {

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

}  // namespace internal

using internal::Call;
using internal::Statement;

int Store::schema_version() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Call call{"schema_version", "", ""};
  const auto version = internal::read_meta(*impl_->db, sql::kMetaSchemaVersion, call);
  return version ? static_cast<int>(*version) : 0;
}

std::vector<std::string> Store::integrity_check() {
  std::vector<std::string> problems;
  impl_->select(Call{"integrity_check", "", ""}, sql::kIntegrityCheck, [](Statement&) {},
                [&](const Statement& check) {
                  std::string line = check.text(0);
                  if (line != "ok") problems.push_back(std::move(line));
                });
  return problems;
}

void Store::clear() {
  const Call call{"clear", "", ""};
  impl_->write(call, [&](internal::Database& db) {
    for (const char* remove : sql::kDeleteEverything) Statement(db, remove, call).run();
  });
}

}  // namespace kvtune::cache
