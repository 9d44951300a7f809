#pragma once
// Every SQL statement the cache runs, one named constant per operation; the store (cache/*.cpp) is
// the only user and prepares each once per connection. Changing a table here means bumping
// Store::kSchemaVersion, and kOldestCompatibleVersion too when older code can no longer use the
// file.
//
// No foreign keys on purpose: winners are imported from JSON without their device or binary, and a
// binary may be pruned while a winner that names it stays (the winner is then recompiled).

namespace kvtune::cache::sql {

/// The oldest schema version whose code can still read and write a file of our schema. Written
/// into every new file; a file whose value is above the running Store::kSchemaVersion is newer
/// than we can handle and is set aside.
inline constexpr int kOldestCompatibleVersion = 1;

/// PRAGMA application_id of a kvtune cache ("kvtn"), so that `file` and sqlite tools can tell.
/// Informative only: a kvtune database is recognized by its meta table.
inline constexpr char kSetApplicationId[] = "PRAGMA application_id = 1802925166";

// --- Keys of the meta table -----------------------------------------------------------------
inline constexpr char kMetaSchemaVersion[] = "schema_version";
inline constexpr char kMetaOldestCompatibleVersion[] = "oldest_compatible_version";

// --- Schema ---------------------------------------------------------------------------------
inline constexpr char kCreateMeta[] = R"sql(
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value NOT NULL
))sql";

inline constexpr char kCreateDevices[] = R"sql(
CREATE TABLE IF NOT EXISTS devices (
  id             TEXT PRIMARY KEY NOT NULL,
  name           TEXT NOT NULL,
  cc_major       INTEGER NOT NULL,
  cc_minor       INTEGER NOT NULL,
  sm_count       INTEGER NOT NULL,
  l2_bytes       INTEGER NOT NULL,
  memory_bytes   INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_version  INTEGER NOT NULL,
  kvtune_version TEXT NOT NULL,
  json           TEXT NOT NULL,
  updated_at     INTEGER NOT NULL
))sql";

inline constexpr char kCreateBinaries[] = R"sql(
CREATE TABLE IF NOT EXISTS binaries (
  hash         TEXT PRIMARY KEY NOT NULL,
  arch         TEXT NOT NULL,
  lowered_name TEXT NOT NULL,
  image        BLOB NOT NULL,
  image_hash   TEXT NOT NULL,
  created_at   INTEGER NOT NULL
))sql";

inline constexpr char kCreateWinners[] = R"sql(
CREATE TABLE IF NOT EXISTS winners (
  problem_key   TEXT NOT NULL,
  device_id     TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  op            TEXT NOT NULL,
  label         TEXT NOT NULL,
  config_json   TEXT NOT NULL,
  binary_hash   TEXT NOT NULL,
  origin        TEXT NOT NULL,
  median_ms     REAL NOT NULL,
  gbps          REAL NOT NULL,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (problem_key, device_id, template_hash)
))sql";

// winners() lists by operator, then problem.
inline constexpr char kCreateWinnersByOp[] =
    "CREATE INDEX IF NOT EXISTS winners_by_op ON winners(op, problem_key)";

// `id` is the rowid, so ORDER BY id is insertion order.
inline constexpr char kCreateTrials[] = R"sql(
CREATE TABLE IF NOT EXISTS trials (
  id            INTEGER PRIMARY KEY,
  problem_key   TEXT NOT NULL,
  device_id     TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  label         TEXT NOT NULL,
  config_json   TEXT NOT NULL,
  status        TEXT NOT NULL,
  message       TEXT NOT NULL,
  median_ms     REAL NOT NULL,
  spread        REAL NOT NULL,
  gbps          REAL NOT NULL,
  created_at    INTEGER NOT NULL
))sql";

inline constexpr char kCreateTrialsByKey[] =
    "CREATE INDEX IF NOT EXISTS trials_by_key ON trials(problem_key, device_id, template_hash, id)";

// Schema 2: ceilings measured on a device (copy bandwidth, f32 FMA rate) for the roofline.
// Either value is 0 when it was not measured.
inline constexpr char kCreateCeilings[] = R"sql(
CREATE TABLE IF NOT EXISTS ceilings (
  device_id   TEXT PRIMARY KEY NOT NULL,
  copy_gbps   REAL NOT NULL,
  fma_gflops  REAL NOT NULL,
  measured_at INTEGER NOT NULL
))sql";

// Schema 3: leases, so that processes tuning the same entry elect one tuner. Times are unix
// seconds with a fraction (a lease may live about a second). A row past expires_at is free to take.
inline constexpr char kCreateLeases[] = R"sql(
CREATE TABLE IF NOT EXISTS leases (
  problem_key   TEXT NOT NULL,
  device_id     TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  owner         TEXT NOT NULL,
  acquired_at   REAL NOT NULL,
  expires_at    REAL NOT NULL,
  PRIMARY KEY (problem_key, device_id, template_hash)
))sql";

// Schema 3: problems the library met without a tuned entry (policy "record"), for an offline run.
inline constexpr char kCreateRecordedProblems[] = R"sql(
CREATE TABLE IF NOT EXISTS recorded_problems (
  problem_key   TEXT NOT NULL,
  device_id     TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  op            TEXT NOT NULL,
  count         INTEGER NOT NULL,
  first_seen    INTEGER NOT NULL,
  last_seen     INTEGER NOT NULL,
  PRIMARY KEY (problem_key, device_id, template_hash)
))sql";

// Schema 3: one row per tuning. `id` is the rowid; the clocks, temperature and power are -1 when
// they were not read.
inline constexpr char kCreateTuningRuns[] = R"sql(
CREATE TABLE IF NOT EXISTS tuning_runs (
  id                 INTEGER PRIMARY KEY,
  op                 TEXT NOT NULL,
  problem_key        TEXT NOT NULL,
  device_id          TEXT NOT NULL,
  template_hash      TEXT NOT NULL,
  started_at         INTEGER NOT NULL,
  wall_seconds       REAL NOT NULL,
  compile_seconds    REAL NOT NULL,
  bench_seconds      REAL NOT NULL,
  variants_total     INTEGER NOT NULL,
  variants_timed     INTEGER NOT NULL,
  compiles           INTEGER NOT NULL,
  binaries_reused    INTEGER NOT NULL,
  search             TEXT NOT NULL,
  sm_clock_mhz       INTEGER NOT NULL,
  mem_clock_mhz      INTEGER NOT NULL,
  temperature_c      INTEGER NOT NULL,
  power_w            REAL NOT NULL,
  winner_label       TEXT NOT NULL,
  winner_ms          REAL NOT NULL,
  incumbent_label    TEXT NOT NULL,
  incumbent_ms       REAL NOT NULL,
  replaced_incumbent INTEGER NOT NULL,
  json               TEXT NOT NULL
))sql";

// tuning_runs(key) lists one problem's runs, oldest first.
inline constexpr char kCreateTuningRunsByKey[] =
    "CREATE INDEX IF NOT EXISTS tuning_runs_by_key ON tuning_runs(problem_key, started_at, id)";

/// Run in order, in one transaction, when a file has no tables yet.
inline constexpr const char* kCreateSchema[] = {
    kCreateMeta,        kCreateDevices,         kCreateBinaries,    kCreateWinners,
    kCreateWinnersByOp, kCreateTrials,          kCreateTrialsByKey, kCreateCeilings,
    kCreateLeases,      kCreateRecordedProblems, kCreateTuningRuns, kCreateTuningRunsByKey,
};

/// Run in order, in one transaction, on a schema-1 file. Schema-1 code ignores the new table, so
/// the oldest compatible version stays 1.
inline constexpr const char* kMigrate1To2[] = {kCreateCeilings};
/// Run in order, in one transaction, on a schema-2 file (after kMigrate1To2 on a schema-1 one).
/// Only new tables: older code ignores them (it neither takes leases nor drops recorded rows when
/// it stores a result), so the oldest compatible version stays 1.
inline constexpr const char* kMigrate2To3[] = {kCreateLeases, kCreateRecordedProblems,
                                               kCreateTuningRuns, kCreateTuningRunsByKey};
inline constexpr char kRaiseSchemaVersion[] =
    "UPDATE meta SET value = ?1 WHERE key = 'schema_version' AND value < ?1";

// --- Connection set-up and inspection -------------------------------------------------------
inline constexpr char kQuickCheck[] = "PRAGMA quick_check";
inline constexpr char kIntegrityCheck[] = "PRAGMA integrity_check";
inline constexpr char kSetJournalModeWal[] = "PRAGMA journal_mode = WAL";
inline constexpr char kSetSynchronousNormal[] = "PRAGMA synchronous = NORMAL";
inline constexpr char kListUserTables[] = R"sql(
SELECT name FROM sqlite_master
WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
ORDER BY name)sql";

// --- Transactions ---------------------------------------------------------------------------
// IMMEDIATE takes the write lock up front, so two writers never deadlock upgrading a read lock.
inline constexpr char kBeginImmediate[] = "BEGIN IMMEDIATE";
inline constexpr char kCommit[] = "COMMIT";
inline constexpr char kRollback[] = "ROLLBACK";

// --- meta -----------------------------------------------------------------------------------
inline constexpr char kSelectMetaValue[] = "SELECT value FROM meta WHERE key = ?1";
// Another process may have created the schema between our inspection and our transaction.
inline constexpr char kInsertMetaValueIfAbsent[] =
    "INSERT OR IGNORE INTO meta(key, value) VALUES (?1, ?2)";

// --- devices --------------------------------------------------------------------------------
inline constexpr char kUpsertDevice[] = R"sql(
INSERT INTO devices(id, name, cc_major, cc_minor, sm_count, l2_bytes, memory_bytes,
                    driver_version, nvrtc_version, kvtune_version, json, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
ON CONFLICT(id) DO UPDATE SET
  name = excluded.name, cc_major = excluded.cc_major, cc_minor = excluded.cc_minor,
  sm_count = excluded.sm_count, l2_bytes = excluded.l2_bytes,
  memory_bytes = excluded.memory_bytes, driver_version = excluded.driver_version,
  nvrtc_version = excluded.nvrtc_version, kvtune_version = excluded.kvtune_version,
  json = excluded.json, updated_at = excluded.updated_at)sql";

// The column order of kSelectDevice and kSelectAllDevices is the same (read_device relies on it).
inline constexpr char kSelectDevice[] = R"sql(
SELECT id, name, cc_major, cc_minor, sm_count, l2_bytes, memory_bytes, driver_version,
       nvrtc_version, kvtune_version, json, updated_at
FROM devices WHERE id = ?1)sql";

inline constexpr char kSelectAllDevices[] = R"sql(
SELECT id, name, cc_major, cc_minor, sm_count, l2_bytes, memory_bytes, driver_version,
       nvrtc_version, kvtune_version, json, updated_at
FROM devices ORDER BY name, id)sql";

// --- ceilings -------------------------------------------------------------------------------
inline constexpr char kUpsertCeilings[] = R"sql(
INSERT INTO ceilings(device_id, copy_gbps, fma_gflops, measured_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT(device_id) DO UPDATE SET
  copy_gbps = excluded.copy_gbps, fma_gflops = excluded.fma_gflops,
  measured_at = excluded.measured_at)sql";

inline constexpr char kSelectCeilings[] =
    "SELECT device_id, copy_gbps, fma_gflops, measured_at FROM ceilings WHERE device_id = ?1";
inline constexpr char kSelectAllCeilings[] =
    "SELECT device_id, copy_gbps, fma_gflops, measured_at FROM ceilings ORDER BY device_id";

// --- binaries -------------------------------------------------------------------------------
// Insert if absent. A row that is present but differs (its image was damaged, so find_binary
// refuses it and the caller recompiles) is overwritten; an identical row is left untouched, so
// storing the same binary again costs no write. (put_binaries and put_result first look the hash
// up with kSelectBinary and run this only when no intact row is there.)
inline constexpr char kPutBinary[] = R"sql(
INSERT INTO binaries(hash, arch, lowered_name, image, image_hash, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT(hash) DO UPDATE SET
  arch = excluded.arch, lowered_name = excluded.lowered_name, image = excluded.image,
  image_hash = excluded.image_hash, created_at = excluded.created_at
WHERE binaries.image_hash IS NOT excluded.image_hash OR binaries.image IS NOT excluded.image
   OR binaries.arch IS NOT excluded.arch OR binaries.lowered_name IS NOT excluded.lowered_name)sql";

inline constexpr char kSelectBinary[] =
    "SELECT hash, arch, lowered_name, image, image_hash FROM binaries WHERE hash = ?1";

// Everything but the image itself (its size instead).
inline constexpr char kSelectBinaryInfos[] = R"sql(
SELECT hash, arch, lowered_name, length(image), image_hash, created_at
FROM binaries ORDER BY hash)sql";

inline constexpr char kDeleteBinary[] = "DELETE FROM binaries WHERE hash = ?1";

// --- winners --------------------------------------------------------------------------------
inline constexpr char kUpsertWinner[] = R"sql(
INSERT INTO winners(problem_key, device_id, template_hash, op, label, config_json, binary_hash,
                    origin, median_ms, gbps, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
ON CONFLICT(problem_key, device_id, template_hash) DO UPDATE SET
  op = excluded.op, label = excluded.label, config_json = excluded.config_json,
  binary_hash = excluded.binary_hash, origin = excluded.origin, median_ms = excluded.median_ms,
  gbps = excluded.gbps, created_at = excluded.created_at)sql";

// The column order of kSelectWinner, kSelectWinnersFor and kSelectAllWinners is the same
// (read_winner relies on it).
inline constexpr char kSelectWinner[] = R"sql(
SELECT op, problem_key, device_id, template_hash, label, config_json, binary_hash, origin,
       median_ms, gbps, created_at
FROM winners WHERE problem_key = ?1 AND device_id = ?2 AND template_hash = ?3)sql";

// Every winner of one operator on one device and template, by problem (winners_by_op serves it).
inline constexpr char kSelectWinnersFor[] = R"sql(
SELECT op, problem_key, device_id, template_hash, label, config_json, binary_hash, origin,
       median_ms, gbps, created_at
FROM winners WHERE op = ?1 AND device_id = ?2 AND template_hash = ?3 ORDER BY problem_key)sql";

inline constexpr char kSelectAllWinners[] = R"sql(
SELECT op, problem_key, device_id, template_hash, label, config_json, binary_hash, origin,
       median_ms, gbps, created_at
FROM winners ORDER BY op, problem_key, device_id, template_hash)sql";

inline constexpr char kDeleteWinner[] =
    "DELETE FROM winners WHERE problem_key = ?1 AND device_id = ?2 AND template_hash = ?3";

// --- trials ---------------------------------------------------------------------------------
inline constexpr char kInsertTrial[] = R"sql(
INSERT INTO trials(problem_key, device_id, template_hash, label, config_json, status, message,
                   median_ms, spread, gbps, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11))sql";

inline constexpr char kSelectTrials[] = R"sql(
SELECT label, config_json, status, message, median_ms, spread, gbps, created_at
FROM trials WHERE problem_key = ?1 AND device_id = ?2 AND template_hash = ?3
ORDER BY id)sql";

inline constexpr char kDeleteTrials[] =
    "DELETE FROM trials WHERE problem_key = ?1 AND device_id = ?2 AND template_hash = ?3";

// --- leases ---------------------------------------------------------------------------------
// ?1-?3 the entry, ?4 the owner, ?5 now, ?6 now + ttl. Takes a free or expired lease, or renews the
// owner's own (keeping when it was first acquired); a live lease of another owner is left as it is
// and the statement changes no row, which is how the caller tells.
inline constexpr char kAcquireLease[] = R"sql(
INSERT INTO leases(problem_key, device_id, template_hash, owner, acquired_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT(problem_key, device_id, template_hash) DO UPDATE SET
  acquired_at = CASE WHEN leases.owner = excluded.owner THEN leases.acquired_at
                     ELSE excluded.acquired_at END,
  owner = excluded.owner, expires_at = excluded.expires_at
WHERE leases.owner = excluded.owner OR leases.expires_at <= excluded.acquired_at)sql";

inline constexpr char kReleaseLease[] = R"sql(
DELETE FROM leases
WHERE problem_key = ?1 AND device_id = ?2 AND template_hash = ?3 AND owner = ?4)sql";

inline constexpr char kSelectAllLeases[] = R"sql(
SELECT problem_key, device_id, template_hash, owner, acquired_at, expires_at
FROM leases ORDER BY problem_key, device_id, template_hash)sql";

// --- recorded problems ----------------------------------------------------------------------
// ?5 now: the first sighting inserts count 1, every later one counts and moves last_seen.
inline constexpr char kRecordProblem[] = R"sql(
INSERT INTO recorded_problems(problem_key, device_id, template_hash, op, count, first_seen,
                              last_seen)
VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5)
ON CONFLICT(problem_key, device_id, template_hash) DO UPDATE SET
  op = excluded.op, count = recorded_problems.count + 1, last_seen = excluded.last_seen)sql";

inline constexpr char kSelectRecordedProblems[] = R"sql(
SELECT op, problem_key, device_id, template_hash, count, first_seen, last_seen
FROM recorded_problems ORDER BY op, problem_key, device_id, template_hash)sql";

inline constexpr char kDeleteRecordedProblem[] = R"sql(
DELETE FROM recorded_problems
WHERE problem_key = ?1 AND device_id = ?2 AND template_hash = ?3)sql";

// --- tuning runs ----------------------------------------------------------------------------
inline constexpr char kInsertTuningRun[] = R"sql(
INSERT INTO tuning_runs(op, problem_key, device_id, template_hash, started_at, wall_seconds,
                        compile_seconds, bench_seconds, variants_total, variants_timed, compiles,
                        binaries_reused, search, sm_clock_mhz, mem_clock_mhz, temperature_c,
                        power_w, winner_label, winner_ms, incumbent_label, incumbent_ms,
                        replaced_incumbent, json)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
        ?20, ?21, ?22, ?23))sql";

// The column order of kSelectAllTuningRuns and kSelectTuningRuns is the same (read_tuning_run
// relies on it), and that of kInsertTuningRun.
inline constexpr char kSelectAllTuningRuns[] = R"sql(
SELECT op, problem_key, device_id, template_hash, started_at, wall_seconds, compile_seconds,
       bench_seconds, variants_total, variants_timed, compiles, binaries_reused, search,
       sm_clock_mhz, mem_clock_mhz, temperature_c, power_w, winner_label, winner_ms,
       incumbent_label, incumbent_ms, replaced_incumbent, json
FROM tuning_runs ORDER BY started_at, id)sql";

inline constexpr char kSelectTuningRuns[] = R"sql(
SELECT op, problem_key, device_id, template_hash, started_at, wall_seconds, compile_seconds,
       bench_seconds, variants_total, variants_timed, compiles, binaries_reused, search,
       sm_clock_mhz, mem_clock_mhz, temperature_c, power_w, winner_label, winner_ms,
       incumbent_label, incumbent_ms, replaced_incumbent, json
FROM tuning_runs WHERE problem_key = ?1 ORDER BY started_at, id)sql";

// --- clear ----------------------------------------------------------------------------------
/// Run in order, in one transaction: every row except the meta table's.
inline constexpr const char* kDeleteEverything[] = {
    "DELETE FROM trials",      "DELETE FROM winners",           "DELETE FROM binaries",
    "DELETE FROM ceilings",    "DELETE FROM devices",           "DELETE FROM leases",
    "DELETE FROM tuning_runs", "DELETE FROM recorded_problems",
};

}  // namespace kvtune::cache::sql
