// Opening the store (contract in store.h): where the file may be, whether it may be trusted, and
// what happens to one that cannot be used.
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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "cache/schema.h"
#include "cache/store_impl.h"

namespace kvtune::cache {
namespace {

using internal::Connection;
using internal::create_schema;
using internal::Database;
using internal::inspect;
using internal::Inspection;
using internal::is_corruption;
using internal::Logger;
using internal::set_up_usable;
using internal::unix_now;

std::string errno_text(int error) { return std::generic_category().message(error); }

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
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

}  // namespace kvtune::cache
