#pragma once
// The store's schema (cache/schema.cpp): creating it, reading the meta table, migrating older
// files, and judging whether an open file is a usable kvtune cache.

#include <cstdint>
#include <optional>
#include <string>

#include "cache/database.h"

namespace kvtune::cache::internal {

void create_schema(Database& db);

std::optional<std::int64_t> read_meta(Database& db, const char* key, const Call& call);

// What inspecting an open file found.
struct Inspection {
  enum Verdict { kUsable, kCorrupt, kForeign, kNewer };
  Verdict verdict = kUsable;
  std::string reason;  // for the log, when not usable
  bool empty = false;  // usable and without tables: needs the schema
};

Inspection inspect(Database& db);

// WAL, synchronous NORMAL, then the schema for a new file or the migration of an older one.
void set_up_usable(Database& db, const Inspection& found);

}  // namespace kvtune::cache::internal
