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

#include "kvtune/error.h"

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
  std::int64_t updated_at = 0;  // unix seconds of the last put_device; 0 when storing means now
};

/// Performance ceilings measured on a device, for the roofline: device-to-device copy bandwidth
/// (bytes read + written per second) and the f32 FMA rate (2 FLOPs per FMA). 0 = not measured.
struct Ceilings {
  std::string device_id;
  double copy_gbps = 0;
  double fma_gflops = 0;
  std::int64_t measured_at = 0;  // unix seconds; 0 means now when stored
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
  std::int64_t created_at = 0;  // unix seconds of the put_result that stored it (set by the store)
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

/// A stored binary without its image.
struct BinaryInfo {
  std::string hash;
  std::string arch;
  std::string lowered_name;
  std::int64_t size = 0;  // bytes of the image
  std::string image_hash;
  std::int64_t created_at = 0;
};

/// Why Store::open_existing refused a file.
class OpenError : public Error {
 public:
  enum class Reason {
    missing,     ///< the file does not exist (and creating it was not asked for)
    unusable,    ///< it exists but cannot be used: permissions, not a regular file, I/O
    not_kvtune,  ///< not an SQLite database, or another program's database
    corrupt,     ///< a kvtune database that SQLite reports as damaged
    newer,       ///< written by a newer kvtune with an incompatible schema
  };
  OpenError(Reason reason, const std::string& cause)
      : Error(Error::Context{"cache", "", "", "", ""}, cause), reason_(reason) {}
  Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

class Store {
 public:
  /// Opens (creating if needed) the database at `path`; "" or ":memory:" opens an in-memory one.
  /// Never throws for a bad file: see the failure model above.
  static std::unique_ptr<Store> open(const std::string& path, LogFn log = {});
  /// For tools: opens `path` as it is or throws OpenError; never sets a file aside and never falls
  /// back to memory. A missing file is created (with the schema) only when `create` is true.
  /// "" or ":memory:" opens an in-memory database.
  static std::unique_ptr<Store> open_existing(const std::string& path, bool create, LogFn log = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// The path actually in use ("" when in memory).
  const std::string& path() const;
  bool in_memory() const;
  /// 1: meta, devices, binaries, winners, trials. 2: + ceilings.
  static constexpr int kSchemaVersion = 2;
  int schema_version() const;

  void put_device(const DeviceRow& device);
  std::optional<DeviceRow> find_device(const std::string& id);
  /// Every device, by name then id.
  std::vector<DeviceRow> devices();

  void put_ceilings(const Ceilings& ceilings);
  std::optional<Ceilings> find_ceilings(const std::string& device_id);
  std::vector<Ceilings> all_ceilings();

  std::optional<Winner> find_winner(const std::string& problem_key, const std::string& device_id,
                                    const std::string& template_hash);
  /// Stores the winner, its binary (when given) and every trial in one transaction, replacing a
  /// previous winner for the same (problem_key, device_id, template_hash).
  void put_result(const Winner& winner, const std::optional<Binary>& binary,
                  const std::vector<Trial>& trials);
  std::vector<Winner> winners();
  /// Every trial stored for the entry, oldest first (each put_result appends its trials).
  std::vector<Trial> trials(const std::string& problem_key, const std::string& device_id,
                            const std::string& template_hash);
  /// Removes the winner and every trial of (problem_key, device_id, template_hash), in one
  /// transaction; binaries stay. Returns whether a winner was there.
  bool remove_result(const std::string& problem_key, const std::string& device_id,
                     const std::string& template_hash);

  /// Returns the binary only when its stored image still hashes to its image_hash.
  std::optional<Binary> find_binary(const std::string& hash);
  void put_binary(const Binary& binary);
  /// Every binary's metadata, by hash.
  std::vector<BinaryInfo> binary_infos();
  /// Removes the binaries with these hashes in one transaction; returns how many were there.
  int remove_binaries(const std::vector<std::string>& hashes);

  /// PRAGMA integrity_check: empty when the file is sound, else SQLite's messages.
  std::vector<std::string> integrity_check();
  /// Removes every device, ceiling, winner, trial and binary (one transaction); keeps the schema.
  void clear();

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtune::cache
