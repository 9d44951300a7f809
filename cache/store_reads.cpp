// The store's reads (contract in store.h): every row read back is checked against the limits a
// file's rows must keep (a cache file is data another process, a merge or a hand may have written);
// binaries also against their image hash. Rows beyond them are skipped and logged once the lock is
// released (the log callback is user code).

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_set>

#include "cache/store_impl.h"
#include "core/hash.h"

namespace kvtune::cache {
namespace internal {

bool image_intact(const Binary& binary) { return detail::hash_hex(binary.image) == binary.image_hash; }

}  // namespace internal

namespace {

using internal::Call;
using internal::Logger;
using internal::Statement;

DeviceRow read_device(const Statement& row) {
  DeviceRow device;
  device.id = row.text(0);
  device.name = row.text(1);
  device.cc_major = static_cast<int>(row.integer(2));
  device.cc_minor = static_cast<int>(row.integer(3));
  device.sm_count = static_cast<int>(row.integer(4));
  device.l2_bytes = row.integer(5);
  device.memory_bytes = row.integer(6);
  device.driver_version = static_cast<int>(row.integer(7));
  device.nvrtc_version = static_cast<int>(row.integer(8));
  device.kvtune_version = row.text(9);
  device.json = row.text(10);
  device.updated_at = row.integer(11);
  return device;
}

Ceilings read_ceilings(const Statement& row) {
  Ceilings ceilings;
  ceilings.device_id = row.text(0);
  ceilings.copy_gbps = row.real(1);
  ceilings.fma_gflops = row.real(2);
  ceilings.measured_at = row.integer(3);
  return ceilings;
}

Winner read_winner(const Statement& row) {
  Winner winner;
  winner.op = row.text(0);
  winner.problem_key = row.text(1);
  winner.device_id = row.text(2);
  winner.template_hash = row.text(3);
  winner.label = row.text(4);
  winner.config_json = row.text(5);
  winner.binary_hash = row.text(6);
  winner.origin = row.text(7);
  winner.median_ms = row.real(8);
  winner.gbps = row.real(9);
  winner.created_at = row.integer(10);
  return winner;
}

// The limits a row read back from a file must keep, as user input must (a cache file is data
// another process, a merge or a hand may have written). A row beyond them is skipped with a
// warning, never parsed further. Sizes in bytes.
constexpr std::size_t kMaxKeyBytes = 4096;       // problem keys, device ids, hashes, ops, origins
constexpr std::size_t kMaxLabelBytes = 1024;     // config labels
constexpr std::size_t kMaxConfigBytes = 4096;    // a config's JSON (a flat object)
constexpr std::size_t kMaxMessageBytes = 65536;  // a trial's failure text
constexpr std::size_t kMaxImageBytes = std::size_t(64) << 20;  // a cubin (kvtune's are < 1 MiB)

// Why `w` breaks the limits, "" when it keeps them.
std::string beyond_limits(const Winner& w) {
  for (const auto& [text, limit, name] :
       {std::tuple{&w.problem_key, kMaxKeyBytes, "problem key"}, std::tuple{&w.device_id, kMaxKeyBytes, "device id"},
        std::tuple{&w.template_hash, kMaxKeyBytes, "template hash"}, std::tuple{&w.op, kMaxKeyBytes, "op"},
        std::tuple{&w.origin, kMaxKeyBytes, "origin"}, std::tuple{&w.binary_hash, kMaxKeyBytes, "binary hash"},
        std::tuple{&w.label, kMaxLabelBytes, "label"}, std::tuple{&w.config_json, kMaxConfigBytes, "config"}})
    if (text->size() > limit) return std::string(name) + " of " + std::to_string(text->size()) + " bytes";
  if (std::isnan(w.median_ms) || std::isnan(w.gbps)) return "a NaN time";
  return "";
}

std::string beyond_limits(const Trial& t) {
  if (t.label.size() > kMaxLabelBytes) return "label of " + std::to_string(t.label.size()) + " bytes";
  if (t.config_json.size() > kMaxConfigBytes) return "config of " + std::to_string(t.config_json.size()) + " bytes";
  if (t.status.size() > kMaxKeyBytes) return "status of " + std::to_string(t.status.size()) + " bytes";
  if (t.message.size() > kMaxMessageBytes) return "message of " + std::to_string(t.message.size()) + " bytes";
  return "";
}

std::string beyond_limits(const Binary& b) {
  if (b.hash.size() > kMaxKeyBytes || b.arch.size() > kMaxKeyBytes || b.lowered_name.size() > kMaxKeyBytes ||
      b.image_hash.size() > kMaxKeyBytes)
    return "a name or hash over " + std::to_string(kMaxKeyBytes) + " bytes";
  if (b.image.size() > kMaxImageBytes) return "an image of " + std::to_string(b.image.size()) + " bytes";
  return "";
}

// Collects the rows a read skipped, to be logged once the store's lock is released (the log
// callback is user code).
struct Skipped {
  std::vector<std::string> reasons;
  template <class Row>
  bool keep(const Row& row, const char* what) {
    std::string why = beyond_limits(row);
    if (why.empty()) return true;
    reasons.push_back(std::string(what) + " row with " + why);
    return false;
  }
  void report(const Logger& log, const std::string& where) const {
    for (const auto& why : reasons)
      log("warn", "cache: skipped a " + why + " in " + where + " (beyond the limits kvtune reads)");
  }
};

Lease read_lease(const Statement& row) {
  Lease lease;
  lease.problem_key = row.text(0);
  lease.device_id = row.text(1);
  lease.template_hash = row.text(2);
  lease.owner = row.text(3);
  lease.acquired_at = static_cast<std::int64_t>(std::floor(row.real(4)));
  lease.expires_at = static_cast<std::int64_t>(std::ceil(row.real(5)));
  return lease;
}

RecordedProblem read_recorded_problem(const Statement& row) {
  RecordedProblem problem;
  problem.op = row.text(0);
  problem.problem_key = row.text(1);
  problem.device_id = row.text(2);
  problem.template_hash = row.text(3);
  problem.count = row.integer(4);
  problem.first_seen = row.integer(5);
  problem.last_seen = row.integer(6);
  return problem;
}

TuningRun read_tuning_run(const Statement& row) {
  TuningRun run;
  run.op = row.text(0);
  run.problem_key = row.text(1);
  run.device_id = row.text(2);
  run.template_hash = row.text(3);
  run.started_at = row.integer(4);
  run.wall_seconds = row.real(5);
  run.compile_seconds = row.real(6);
  run.bench_seconds = row.real(7);
  run.variants_total = static_cast<int>(row.integer(8));
  run.variants_timed = static_cast<int>(row.integer(9));
  run.compiles = static_cast<int>(row.integer(10));
  run.binaries_reused = static_cast<int>(row.integer(11));
  run.search = row.text(12);
  run.sm_clock_mhz = static_cast<int>(row.integer(13));
  run.mem_clock_mhz = static_cast<int>(row.integer(14));
  run.temperature_c = static_cast<int>(row.integer(15));
  run.power_w = row.real(16);
  run.winner_label = row.text(17);
  run.winner_ms = row.real(18);
  run.incumbent_label = row.text(19);
  run.incumbent_ms = row.real(20);
  run.replaced_incumbent = row.integer(21) != 0;
  run.json = row.text(22);
  return run;
}

Trial read_trial(const Statement& row) {
  return Trial{row.text(0), row.text(1), row.text(2), row.text(3), row.real(4), row.real(5), row.real(6),
               row.integer(7)};
}

BinaryInfo read_binary_info(const Statement& row) {
  return BinaryInfo{row.text(0), row.text(1), row.text(2), row.integer(3), row.text(4), row.integer(5)};
}

// Binds an entry's key (Statement::bind_entry).
auto entry_key(const std::string& key, const std::string& device_id, const std::string& template_hash) {
  return [k = &key, d = &device_id, t = &template_hash](Statement& s) { s.bind_entry(*k, *d, *t); };
}

// find_binary's and find_binaries' check, run without the lock: the log callback is user code.
bool usable_binary(const Binary& binary, const Logger& log, const std::string& where) {
  Skipped skipped;
  if (!skipped.keep(binary, "binary")) {
    skipped.report(log, where);
    return false;
  }
  if (internal::image_intact(binary)) return true;
  log("warn", "cache: binary " + binary.hash + " in " + where +
                  " is damaged (its image no longer matches its hash); ignoring it");
  return false;
}

}  // namespace

template <class Row, class Bind, class Read>
std::vector<Row> Store::Impl::select_kept(const Call& call, const char* sql, const char* what, Bind bind, Read read) {
  Skipped skipped;
  std::vector<Row> rows;
  select(call, sql, bind, [&](const Statement& row) {
    if (Row kept = read(row); skipped.keep(kept, what)) rows.push_back(std::move(kept));
  });
  skipped.report(log, where());
  return rows;
}

std::optional<DeviceRow> Store::find_device(const std::string& id) {
  return impl_->select_first<DeviceRow>(Call{"find_device", "", id}, sql::kSelectDevice, read_device,
                                        [&](Statement& s) { s.bind_text(1, id); });
}

std::vector<DeviceRow> Store::devices() {
  return impl_->select_all<DeviceRow>(Call{"devices", "", ""}, sql::kSelectAllDevices, read_device);
}

std::optional<Ceilings> Store::find_ceilings(const std::string& device_id) {
  return impl_->select_first<Ceilings>(Call{"find_ceilings", "", device_id}, sql::kSelectCeilings, read_ceilings,
                                       [&](Statement& s) { s.bind_text(1, device_id); });
}

std::vector<Ceilings> Store::all_ceilings() {
  return impl_->select_all<Ceilings>(Call{"all_ceilings", "", ""}, sql::kSelectAllCeilings, read_ceilings);
}

std::optional<Winner> Store::find_winner(const std::string& problem_key, const std::string& device_id,
                                         const std::string& template_hash) {
  auto found = impl_->select_kept<Winner>(Call{"find_winner", problem_key, device_id}, sql::kSelectWinner, "winner",
                                         entry_key(problem_key, device_id, template_hash), read_winner);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<Winner> Store::winners() {
  return impl_->select_kept<Winner>(Call{"winners", "", ""}, sql::kSelectAllWinners, "winner", [](Statement&) {},
                                    read_winner);
}

std::vector<Winner> Store::winners_for(const std::string& op, const std::string& device_id,
                                      const std::string& template_hash) {
  return impl_->select_kept<Winner>(Call{"winners_for", "", device_id}, sql::kSelectWinnersFor, "winner",
                                    entry_key(op, device_id, template_hash), read_winner);
}

std::vector<Trial> Store::trials(const std::string& problem_key, const std::string& device_id,
                                 const std::string& template_hash) {
  return impl_->select_kept<Trial>(Call{"trials", problem_key, device_id}, sql::kSelectTrials, "trial",
                                   entry_key(problem_key, device_id, template_hash), read_trial);
}

std::optional<Binary> Store::find_binary(const std::string& hash) {
  std::optional<Binary> binary = impl_->select_first<Binary>(
      Call{"find_binary", "", ""}, sql::kSelectBinary, internal::read_binary,
      [&](Statement& s) { s.bind_text(1, hash); });
  // Hashed outside the lock.
  if (!binary || !usable_binary(*binary, impl_->log, impl_->where())) return std::nullopt;
  return binary;
}

std::vector<Binary> Store::find_binaries(const std::vector<std::string>& hashes) {
  std::vector<Binary> found;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    const Call call{"find_binaries", "", ""};
    std::unordered_set<std::string> seen;
    for (const std::string& hash : hashes) {
      if (!seen.insert(hash).second) continue;
      Statement select(*impl_->db, sql::kSelectBinary, call);
      select.bind_text(1, hash);
      if (select.step()) found.push_back(internal::read_binary(select));
    }
  }
  // Hashed outside the lock.
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](const Binary& binary) { return !usable_binary(binary, impl_->log, impl_->where()); }),
              found.end());
  return found;
}

std::vector<BinaryInfo> Store::binary_infos() {
  return impl_->select_all<BinaryInfo>(Call{"binary_infos", "", ""}, sql::kSelectBinaryInfos, read_binary_info);
}

std::vector<Lease> Store::leases() {
  return impl_->select_all<Lease>(Call{"leases", "", ""}, sql::kSelectAllLeases, read_lease);
}

std::vector<RecordedProblem> Store::recorded_problems() {
  return impl_->select_all<RecordedProblem>(Call{"recorded_problems", "", ""}, sql::kSelectRecordedProblems,
                                            read_recorded_problem);
}

std::vector<TuningRun> Store::tuning_runs(const std::string& problem_key) {
  return impl_->select_all<TuningRun>(
      Call{"tuning_runs", problem_key, ""},
      problem_key.empty() ? sql::kSelectAllTuningRuns : sql::kSelectTuningRuns, read_tuning_run,
      [&](Statement& s) {
        if (!problem_key.empty()) s.bind_text(1, problem_key);
      });
}

}  // namespace kvtune::cache
