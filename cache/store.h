#pragma once
// kvtune's persistent store: the only module that talks to SQLite (sqlite3.h is included by
// cache/database.h alone; the SQL text lives in sql.h). One database file per user by default, WAL mode,
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
#include "core/device.h"

namespace kvtune::cache {

/// Severity-tagged message sink (level: "info", "warn", "debug").
using LogFn = std::function<void(const char* level, const std::string& message)>;

/// A GPU as the cache identifies it: its model (name, compute capability, SM count, L2, memory,
/// driver, NVRTC and kvtune versions) and the fingerprint's id (detail::DeviceFingerprint::id).
struct DeviceRow : detail::DeviceModel {
  std::string id;
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

/// The right to tune one entry (problem key, device, template hash), so that processes meeting the
/// same miss elect one tuner; the others wait for its result or fall back. Times are unix seconds,
/// whole here and rounded outward (acquired_at down, expires_at up); the store keeps fractions.
struct Lease {
  std::string problem_key;
  std::string device_id;
  std::string template_hash;
  std::string owner;  // whatever identifies the holder, e.g. "host:pid:thread"
  std::int64_t acquired_at = 0;  // when this owner took it (a renewal keeps it)
  std::int64_t expires_at = 0;   // after this anyone may take it
};

/// A problem the library met without a tuned entry (policy "record"), for an offline run to tune.
struct RecordedProblem {
  std::string op;
  std::string problem_key;
  std::string device_id;
  std::string template_hash;
  std::int64_t count = 0;       // how many times it was recorded
  std::int64_t first_seen = 0;  // unix seconds
  std::int64_t last_seen = 0;   // unix seconds
};

/// One tuning of one entry, for observability and reproducibility. Clocks, temperature and power
/// are what the device reported when the tuning started; -1 where they were not read.
struct TuningRun {
  std::string op;
  std::string problem_key;
  std::string device_id;
  std::string template_hash;
  std::int64_t started_at = 0;  // unix seconds; 0 means now when stored
  double wall_seconds = 0;      // the whole tuning
  double compile_seconds = 0;   // of which compiling
  double bench_seconds = 0;     // of which benchmarking
  int variants_total = 0;       // variants in the space after the constraints
  int variants_timed = 0;       // variants that were benchmarked
  int compiles = 0;             // NVRTC compilations run
  int binaries_reused = 0;      // cubins taken from the cache instead of compiled
  std::string search;           // "exhaustive" or "budgeted"
  int sm_clock_mhz = -1;
  int mem_clock_mhz = -1;
  int temperature_c = -1;
  double power_w = -1;
  std::string winner_label;
  double winner_ms = -1;
  std::string incumbent_label;  // the entry's winner before this tuning; empty when there was none
  double incumbent_ms = -1;
  bool replaced_incumbent = false;
  std::string json;  // anything else, as JSON text
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
  /// 1: meta, devices, binaries, winners, trials. 2: + ceilings. 3: + leases, recorded_problems,
  /// tuning_runs. Older files are migrated in place when opened; each step only adds tables, so
  /// older kvtune builds still read and write a file of this schema.
  static constexpr int kSchemaVersion = 3;
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
  /// previous winner for the same (problem_key, device_id, template_hash). The same as the overload
  /// below with no run.
  void put_result(const Winner& winner, const std::optional<Binary>& binary,
                  const std::vector<Trial>& trials);
  /// Everything one tuning produced, in one transaction: the binaries (the winner's and any others
  /// worth keeping; stored as put_binaries does), the winner (replacing a previous one for its
  /// entry), every trial, and the run when given. The entry's recorded problem, if any, is removed
  /// unless the winner is a heuristic stand-in: it has been tuned (or imported). A run whose op, problem_key, device_id or template_hash is empty takes the
  /// winner's; one that names another entry is refused (kvtune::Error) and nothing is stored.
  void put_result(const Winner& winner, const std::vector<Binary>& binaries,
                  const std::vector<Trial>& trials, const std::optional<TuningRun>& run);
  std::vector<Winner> winners();
  /// Every winner of `op` on one device and template, by problem key (the candidates of the
  /// "nearest tuned shape" step of the fallback ladder).
  std::vector<Winner> winners_for(const std::string& op, const std::string& device_id,
                                  const std::string& template_hash);
  /// Every trial stored for the entry, oldest first (each put_result appends its trials).
  std::vector<Trial> trials(const std::string& problem_key, const std::string& device_id,
                            const std::string& template_hash);
  /// Removes the winner and every trial of (problem_key, device_id, template_hash), in one
  /// transaction; binaries stay. Returns whether a winner was there.
  bool remove_result(const std::string& problem_key, const std::string& device_id,
                     const std::string& template_hash);

  /// Returns the binary only when its stored image still hashes to its image_hash.
  std::optional<Binary> find_binary(const std::string& hash);
  /// Stores the binary in one transaction; a row of the same hash that differs is overwritten.
  void put_binary(const Binary& binary);
  /// The binaries of these hashes that are present and whose image still hashes to its image_hash
  /// (find_binary's rule; a damaged one is logged and left out), in any order, each once.
  std::vector<Binary> find_binaries(const std::vector<std::string>& hashes);
  /// Stores the binaries in one transaction. A hash already present with an intact image is left as
  /// it is (the hash names the image, so it is the same cubin); a damaged one is replaced. Throws,
  /// storing none, when one of them has no hash or an image_hash its image does not match.
  void put_binaries(const std::vector<Binary>& binaries);
  /// Every binary's metadata, by hash.
  std::vector<BinaryInfo> binary_infos();
  /// Removes the binaries with these hashes in one transaction; returns how many were there.
  int remove_binaries(const std::vector<std::string>& hashes);

  /// Takes the lease on (problem_key, device_id, template_hash) for `owner` until ttl_seconds
  /// from now: true when there was none, the existing one has expired, or `owner` holds it already
  /// (it is then renewed; acquired_at stays). Atomic across processes (one BEGIN IMMEDIATE
  /// transaction); the clock is the wall clock, so processes on one host agree. A store that fell
  /// back to memory elects within its process only. Throws kvtune::Error for an empty owner or a
  /// ttl that is not a positive number.
  bool try_acquire_lease(const std::string& problem_key, const std::string& device_id,
                         const std::string& template_hash, const std::string& owner,
                         double ttl_seconds);
  /// Removes the lease when `owner` holds it; otherwise does nothing.
  void release_lease(const std::string& problem_key, const std::string& device_id,
                     const std::string& template_hash, const std::string& owner);
  /// Every lease row, expired ones included (they stay until taken over, released or cleared), by
  /// problem key, device, template.
  std::vector<Lease> leases();

  /// Records a problem met without a tuned entry: count 1 the first time, then count + 1 and
  /// last_seen = now. One transaction.
  void record_problem(const std::string& op, const std::string& problem_key,
                      const std::string& device_id, const std::string& template_hash);
  /// Every recorded problem, by op, then problem key, device, template.
  std::vector<RecordedProblem> recorded_problems();
  /// Removes one recorded problem; returns whether it was there.
  bool remove_recorded(const std::string& problem_key, const std::string& device_id,
                       const std::string& template_hash);

  /// Stores one tuning run (one transaction).
  void put_tuning_run(const TuningRun& run);
  /// Every tuning run, or those of one problem key (on every device and template), oldest first.
  std::vector<TuningRun> tuning_runs(const std::string& problem_key = "");

  /// PRAGMA integrity_check: empty when the file is sound, else SQLite's messages.
  std::vector<std::string> integrity_check();
  /// Removes every device, ceiling, winner, trial, binary, lease, recorded problem and tuning run
  /// (one transaction); keeps the schema.
  void clear();

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtune::cache
