#pragma once
// The tools' reading of a cache: every winner with a short id, its device row and whether it is
// stale; export to and import from JSON; merging another cache file.
//
// Staleness (docs/TOOLS.md gives the user's version): an entry is stale when at least one holds:
//   template  its operator is available in this build and its template hash differs from the
//             operator's current one (the kernel source or its description changed);
//   nvrtc     its device row's NVRTC version differs from the NVRTC this build loads;
//   kvtune    its device row's kvtune version differs from this build's;
//   driver    another device row describes the same GPU model (name, compute capability, SMs, L2,
//             memory) with a different driver version and was recorded later: the driver moved on.
// The library keys winners by a device id that hashes the driver, NVRTC and kvtune versions, so
// a stale entry is one no current process will look up again. An entry without a device row has
// no basis for the last three rules and is reported as "device unknown", not stale.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/store.h"

namespace kvtune::tools {

struct CacheEntry {
  cache::Winner winner;
  std::string id;                          ///< 10 hex digits of (problem key, device, template)
  std::optional<cache::DeviceRow> device;  ///< nullopt when the cache has no row for device_id
  std::vector<std::string> stale_reasons;  ///< empty when fresh; "template", "nvrtc", "kvtune", "driver"
  bool op_available = false;               ///< this build has a handler for winner.op

  bool stale() const { return !stale_reasons.empty(); }
};

struct CacheView {
  std::vector<cache::DeviceRow> devices;
  std::map<std::string, cache::Ceilings> ceilings;  ///< by device id
  std::vector<CacheEntry> entries;                  ///< by op, problem key, device
};

/// The versions staleness compares with: this build's.
struct CurrentVersions {
  int nvrtc_version = 0;
  std::string kvtune_version;
};
CurrentVersions current_versions();

std::string entry_id(const cache::Winner& winner);
CacheView load_view(cache::Store& store);
/// Staleness reasons of one winner (see above), each with its detail, e.g. "template (a1b2.. -> c3d4..)".
std::vector<std::string> stale_reasons(const cache::Winner& winner, const cache::DeviceRow* device,
                                       const std::vector<cache::DeviceRow>& devices, const CurrentVersions& current);
/// The entry whose id starts with `id` (at least 4 digits) or whose problem key is `id`;
/// InputError when none or several match.
const CacheEntry& find_entry(const CacheView& view, const std::string& id);
/// A device's short name for tables: "NVIDIA H200 (3f2a9c)".
std::string device_label(const CacheEntry& entry);
std::string device_label(const cache::DeviceRow& device);
/// Whether `filter` selects the device: a prefix of its id or a case-insensitive part of its name.
bool device_matches(const std::string& device_id, const std::optional<cache::DeviceRow>& device,
                    const std::string& filter);

/// The trials of the newest tuning run of an entry (trials stored by one put_result share their
/// created_at; older runs stay in the cache but are not what the winner was chosen from).
std::vector<cache::Trial> latest_run(const std::vector<cache::Trial>& trials);

/// The tuning runs of one entry (its problem key, device and template), oldest first.
std::vector<cache::TuningRun> runs_of(cache::Store& store, const cache::Winner& winner);
/// Every field of a tuning run but the entry's identity; "extra" holds its free-form JSON.
nlohmann::json run_to_json(const cache::TuningRun& run);

// --- Export / import ---------------------------------------------------------------------------

/// Version of the export format written under "kvtune_export".
constexpr int kExportFormat = 1;

/// Devices (with ceilings), winners and their trials; never binaries. With `runs`, each entry also
/// carries its tuning runs ("runs", oldest first); import checks them and stores nothing of them.
nlohmann::json export_cache(cache::Store& store, bool runs = false);

struct ImportSummary {
  int devices = 0;
  int imported = 0;
  int replaced = 0;
  int skipped = 0;  ///< already present (same key, device and template) and not replaced
  int stale = 0;    ///< imported entries that are stale here
};
/// Checks the whole document first (InputError naming the first problem; nothing is written then),
/// then imports: every winner becomes origin "imported" without a binary, so the machine that
/// uses it compiles it once. Existing entries are kept unless `overwrite`.
ImportSummary import_cache(cache::Store& store, const nlohmann::json& document, const std::string& source,
                           bool overwrite);

struct MergeSummary {
  int devices = 0;
  int ceilings = 0;
  int added = 0;
  int replaced = 0;  ///< the source's entry was newer
  int kept = 0;      ///< the target's entry was as new or newer
  int binaries = 0;  ///< binaries copied (intact ones only)
  int damaged_binaries = 0;
  int runs = 0;  ///< tuning runs copied with the entries added or replaced
};
/// Merges `source` into `target`: devices, ceilings, every winner with its trials and tuning runs,
/// the newer one (created_at) winning a conflict, and with `with_binaries` every binary whose image
/// matches its hash. Without it no binary is copied and the winners the merge writes name none: each
/// is compiled on the first call that needs it (a cubin is code; docs/RELIABILITY.md, "Trust model").
/// Leases and recorded problems stay where they are (they belong to the machines that use the file).
MergeSummary merge_cache(cache::Store& target, cache::Store& source, bool with_binaries);

/// Why `binary` is not the one this build compiles for `winner`'s problem and config on the
/// binary's architecture (compile key, architecture, kernel name); "" when it is. An operator this
/// build does not have, or an unreadable key or config, is a mismatch too.
std::string binary_mismatch(const cache::Winner& winner, const cache::Binary& binary);

}  // namespace kvtune::tools
