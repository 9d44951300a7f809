// Fuzz target: crafted cache databases through the store and the library's load path. A cache file
// is data another process, a merge or a hand may have written (docs/RELIABILITY.md, "Trust
// model"); whatever it holds, kvtune reads it without crashing and never hands the load path a
// binary that is not what this build compiles for the row's problem and config.
//
// The input's first byte picks how the rest becomes a database file:
//   even: the rest is the file itself (SQLite's header, pages, anything);
//   odd:  rows written into a fresh kvtune cache with plain SQLite, as another program would: the
//         rest is split at 0x1e into rows and each row at 0x1f into fields; a row's first field
//         names the table ("w" winners, "b" binaries, "t" trials, "d" devices), each other field
//         starts with its SQLite type (i integer, r real, t text, b blob, n null), so that a
//         column can hold a type it was not declared with.
// Then Store::open (a file it cannot use becomes an in-memory cache), and for every stored
// winner: its trials, the family's key parser, detail::read_stored (the Context's load path, with
// the binary check), tools::binary_mismatch and the tools' view and export.
//
// Contracts checked:
//   - no crash, hang or sanitizer report; only kvtune::Error (a store read of a damaged file) may
//     be thrown;
//   - a binary read_stored returns matches the request this build makes for the row's problem and
//     config on sm_90 (binary_matches_request), and its config is a valid variant of the problem;
//   - binary_mismatch agrees with read_stored about that binary.

#include <sqlite3.h>  // writes rows the way another program would
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "cache/store.h"
#include "fuzz/fuzz_support.h"
#include "lib/src/families.h"
#include "core/nvrtc.h"
#include "lib/src/stored_entry.h"
#include "tools/cache_view.h"
#include "tools/common.h"

namespace {

using kvtune::fuzz::expect;
using kvtune::fuzz::finding;
namespace cache = kvtune::cache;
namespace detail = kvtune::detail;

constexpr char kArch[] = "sm_90";

// A private directory of this process for the database under test.
const std::string& directory() {
  static const std::string dir = [] {
    const auto path = std::filesystem::temp_directory_path() / ("kvtune-fuzz-cache-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    ::chmod(path.c_str(), 0700);
    return path.string();
  }();
  return dir;
}

std::string db_path() { return directory() + "/cache.db"; }

// Everything in the directory: the database, its -wal/-shm/-journal, and files set aside.
void remove_files() {
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(directory(), ignored))
    std::filesystem::remove(entry.path(), ignored);
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The bytes of an empty kvtune cache, made once.
const std::string& empty_cache() {
  static const std::string bytes = [] {
    remove_files();
    cache::Store::open_existing(db_path(), true).reset();
    std::ifstream in(db_path(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  return bytes;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

void bind_field(sqlite3_stmt* statement, int index, const std::string& field) {
  const std::string value = field.empty() ? std::string() : field.substr(1);
  switch (field.empty() ? 'n' : field[0]) {
    case 'i': sqlite3_bind_int64(statement, index, std::strtoll(value.c_str(), nullptr, 10)); break;
    case 'r': sqlite3_bind_double(statement, index, std::strtod(value.c_str(), nullptr)); break;
    case 'b': sqlite3_bind_blob(statement, index, value.data(), int(value.size()), SQLITE_TRANSIENT); break;
    case 't': sqlite3_bind_text(statement, index, value.data(), int(value.size()), SQLITE_TRANSIENT); break;
    default: sqlite3_bind_null(statement, index); break;
  }
}

// Writes `rows` into a fresh cache file with plain SQLite (failed inserts are simply not there).
void write_rows(const std::string& rows) {
  write_file(db_path(), empty_cache());
  sqlite3* db = nullptr;
  if (sqlite3_open(db_path().c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  for (const std::string& row : split(rows, '\x1e')) {
    const auto fields = split(row, '\x1f');
    const char* sql = nullptr;
    const std::string& table = fields[0];
    if (table == "w") sql = "INSERT OR REPLACE INTO winners VALUES (?,?,?,?,?,?,?,?,?,?,?)";
    else if (table == "b") sql = "INSERT OR REPLACE INTO binaries VALUES (?,?,?,?,?,?)";
    else if (table == "t")
      sql = "INSERT INTO trials (problem_key, device_id, template_hash, label, config_json, status, message, "
            "median_ms, spread, gbps, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)";
    else if (table == "d") sql = "INSERT OR REPLACE INTO devices VALUES (?,?,?,?,?,?,?,?,?,?,?,?)";
    else continue;
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) != SQLITE_OK) {
      sqlite3_finalize(statement);
      continue;
    }
    const int columns = sqlite3_bind_parameter_count(statement);
    for (int i = 1; i <= columns; ++i) bind_field(statement, i, i < int(fields.size()) ? fields[std::size_t(i)] : "n");
    sqlite3_step(statement);
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
}

// The load path for one stored winner of family F.
template <class F>
void load(cache::Store& store, const cache::Winner& w) {
  const auto problem = F::from_key(w.problem_key);
  if (!problem) return;
  std::string refused;
  const auto stored = detail::read_stored<F>(store, *problem, w.problem_key, w.device_id, w.template_hash, kArch, refused);
  if (!stored) return;
  expect(F::is_valid(*problem, stored->config), "read_stored returned a config that is not valid for its problem: " +
                                                    stored->config.label() + " for " + w.problem_key);
  if (!stored->binary) return;
  const auto& b = *stored->binary;
  const auto request = F::compile_request(*problem, stored->config, kArch);
  expect(detail::binary_matches_request(b.hash, b.arch, b.lowered_name, request),
         "read_stored returned a binary that is not this build's for " + w.problem_key);
  expect(kvtune::tools::binary_mismatch(stored->winner, b).empty(),
         "binary_mismatch refuses a binary read_stored accepted: " + kvtune::tools::binary_mismatch(stored->winner, b));
}

void exercise(cache::Store& store) {
  for (const auto& w : store.winners()) {
    store.trials(w.problem_key, w.device_id, w.template_hash);
    std::apply([&](auto... family) { ((w.op == decltype(family)::kOp ? load<decltype(family)>(store, w) : void()), ...); },
               detail::Families{});
    if (!w.binary_hash.empty())
      if (const auto binary = store.find_binary(w.binary_hash)) kvtune::tools::binary_mismatch(w, *binary);
  }
  store.devices();
  store.binary_infos();
  kvtune::tools::load_view(store);
  kvtune::tools::json_text(kvtune::tools::export_cache(store, true), 1);  // as kvtune-cache export writes it
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  empty_cache();  // made before the first input's files
  remove_files();
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) write_file(db_path(), rest);
  else write_rows(rest);
  try {
    auto store = cache::Store::open(db_path(), [](const char*, const std::string&) {});
    exercise(*store);
  } catch (const kvtune::Error&) {
    // A read of a damaged file: documented (cache/store.h), and the Context catches and logs it.
  } catch (const std::exception& e) {
    finding(std::string("an exception other than kvtune::Error: ") + e.what());
  }
  remove_files();
  return 0;
}
