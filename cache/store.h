#pragma once
// kvtune's persistent store: the only module that talks to SQLite (sqlite3.h is included by
// store.cpp alone; the SQL text lives in sql.h). One database file per user by default, WAL mode,
// a busy timeout, every write one transaction, safe with several processes at once.
//
// Failure model: opening never fails the caller. A file that is corrupt, not a kvtune database,
// of a newer schema, or unreadable is set aside (renamed, never deleted) and a fresh one is
// created; where no file can be created the store runs in memory. Each such event is reported
// through the log callback. Errors of individual reads/writes after a successful open throw
// kvtune::Error (op "cache"); callers on the dispatch path catch and log them.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvtune::cache {

/// Severity-tagged message sink (level: "info", "warn", "debug").
using LogFn = std::function<void(const char* level, const std::string& message)>;

/// A GPU as the cache identifies it. `id` is a hash of every field below except `json`.
struct DeviceRow {
  std::string id;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
  int driver_version = 0;  // cudaDriverGetVersion
  int nvrtc_version = 0;   // major * 1000 + minor * 10
  std::string kvtune_version;
  std::string json;  // the whole fingerprint as JSON, for tools
};

/// A compiled kernel image (cubin) for one variant and architecture.
struct Binary {
  std::string hash;          // hash of (source, options, name expression, NVRTC version, arch)
  std::string arch;          // "sm_90"
  std::string lowered_name;  // mangled kernel name inside the image
  std::string image;         // the cubin bytes
  std::string image_hash;    // hash of `image`; a binary whose image does not match is never returned
};

/// One measured (or failed) candidate of a tuning run.
struct Trial {
  std::string label;        // config label, e.g. "tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass"
  std::string config_json;  // the config as JSON
  std::string status;       // ok, compile_failed, resources_exceeded, launch_failed, wrong_result, timed_out
  std::string message;      // failure text, empty when ok
  double median_ms = -1;    // -1 when not timed
  double spread = 0;        // (p90 - p10) / median of the timing samples
  double gbps = 0;          // model bytes / median time
};

/// The chosen variant for (problem key, device, template hash).
struct Winner {
  std::string op;             // "normalize", "dwconv"
  std::string problem_key;    // canonical text form of the problem key
  std::string device_id;      // DeviceRow::id
  std::string template_hash;  // hash of the family's template source and description version
  std::string label;
  std::string config_json;
  std::string binary_hash;    // Binary::hash, may be empty when only the config is known (import)
  std::string origin;         // "tuned", "heuristic", "imported"
  double median_ms = -1;
  double gbps = 0;
  std::int64_t created_at = 0;  // unix seconds
};

class Store {
 public:
  /// Opens (creating if needed) the database at `path`; "" or ":memory:" opens an in-memory one.
  /// Never throws for a bad file: see the failure model above.
  static std::unique_ptr<Store> open(const std::string& path, LogFn log = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// The path actually in use ("" when in memory).
  const std::string& path() const;
  bool in_memory() const;
  static constexpr int kSchemaVersion = 1;
  int schema_version() const;

  void put_device(const DeviceRow& device);
  std::optional<DeviceRow> find_device(const std::string& id);

  std::optional<Winner> find_winner(const std::string& problem_key, const std::string& device_id,
                                    const std::string& template_hash);
  /// Stores the winner, its binary (when given) and every trial in one transaction, replacing a
  /// previous winner for the same (problem_key, device_id, template_hash).
  void put_result(const Winner& winner, const std::optional<Binary>& binary,
                  const std::vector<Trial>& trials);
  std::vector<Winner> winners();
  std::vector<Trial> trials(const std::string& problem_key, const std::string& device_id,
                            const std::string& template_hash);

  /// Returns the binary only when its stored image still hashes to its image_hash.
  std::optional<Binary> find_binary(const std::string& hash);
  void put_binary(const Binary& binary);

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtune::cache
