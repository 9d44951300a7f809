#include "tools/cache_view.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "kvtune/kvtune.h"
#include "lib/src/families.h"
#include "core/hash.h"
#include "core/json_fields.h"
#include "core/nvrtc.h"
#include "lib/src/stored_entry.h"
#include "tools/common.h"
#include "tools/ops.h"

namespace kvtune::tools {
namespace {

bool same_model(const cache::DeviceRow& a, const cache::DeviceRow& b) {
  return a.name == b.name && a.cc_major == b.cc_major && a.cc_minor == b.cc_minor && a.sm_count == b.sm_count &&
         a.l2_bytes == b.l2_bytes && a.memory_bytes == b.memory_bytes;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// --- JSON checking for import: every message names the file and the path inside it ------------

class Checker {
 public:
  Checker(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) fail(fmt::format("expected an object, got {}", j_.type_name()));
  }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(where_ + ": " + what); }
  const std::string& where() const { return where_; }

  void only(std::initializer_list<const char*> fields) const {
    for (const auto& item : j_.items()) {
      const std::string& name = item.key();
      if (std::none_of(fields.begin(), fields.end(), [&](const char* f) { return name == f; }))
        fail(fmt::format("unknown field '{}'", name));
    }
  }
  const nlohmann::json& at(const char* field) const {
    const auto it = j_.find(field);
    if (it == j_.end()) fail(fmt::format("missing field '{}'", field));
    return *it;
  }
  bool has(const char* field) const { return j_.contains(field); }
  std::string text(const char* field) const {
    const auto& v = at(field);
    if (!v.is_string()) fail(fmt::format("'{}' must be a string", field));
    return v.get<std::string>();
  }
  std::string text_or(const char* field, const std::string& fallback) const {
    return has(field) ? text(field) : fallback;
  }
  std::int64_t integer(const char* field) const {
    const auto& v = at(field);
    if (!v.is_number_integer()) fail(fmt::format("'{}' must be an integer", field));
    return v.get<std::int64_t>();
  }
  std::int64_t integer_or(const char* field, std::int64_t fallback) const {
    return has(field) ? integer(field) : fallback;
  }
  double number(const char* field) const {
    const auto& v = at(field);
    if (!v.is_number()) fail(fmt::format("'{}' must be a number", field));
    return v.get<double>();
  }
  double number_or(const char* field, double fallback) const { return has(field) ? number(field) : fallback; }
  const nlohmann::json& array(const char* field) const {
    const auto& v = at(field);
    if (!v.is_array()) fail(fmt::format("'{}' must be an array", field));
    return v;
  }

 private:
  const nlohmann::json& j_;
  std::string where_;
};

const std::set<std::string> kStatuses = {"ok",           "compile_failed", "resources_exceeded",
                                         "launch_failed", "wrong_result",  "timed_out"};

cache::DeviceRow parse_device(const Checker& c) {
  c.only({"id", "name", "cc_major", "cc_minor", "sm_count", "l2_bytes", "memory_bytes", "driver_version",
          "nvrtc_version", "kvtune_version", "fingerprint", "ceilings", "updated_at"});
  cache::DeviceRow d;
  d.id = c.text("id");
  if (d.id.empty()) c.fail("'id' is empty");
  d.name = c.text("name");
  d.cc_major = static_cast<int>(c.integer("cc_major"));
  d.cc_minor = static_cast<int>(c.integer("cc_minor"));
  d.sm_count = static_cast<int>(c.integer("sm_count"));
  d.l2_bytes = c.integer("l2_bytes");
  d.memory_bytes = c.integer("memory_bytes");
  d.driver_version = static_cast<int>(c.integer("driver_version"));
  d.nvrtc_version = static_cast<int>(c.integer("nvrtc_version"));
  d.kvtune_version = c.text("kvtune_version");
  d.updated_at = c.integer_or("updated_at", 0);
  if (c.has("fingerprint")) {
    if (!c.at("fingerprint").is_object()) c.fail("'fingerprint' must be an object");
    d.json = c.at("fingerprint").dump();
  } else {
    d.json = "{}";
  }
  return d;
}

std::optional<cache::Ceilings> parse_ceilings(const Checker& device, const std::string& device_id) {
  if (!device.has("ceilings")) return std::nullopt;
  const Checker c(device.at("ceilings"), device.where() + ".ceilings");
  c.only({"copy_gbps", "fma_gflops", "measured_at"});
  cache::Ceilings ceilings;
  ceilings.device_id = device_id;
  ceilings.copy_gbps = c.number_or("copy_gbps", 0);
  ceilings.fma_gflops = c.number_or("fma_gflops", 0);
  if (ceilings.copy_gbps < 0 || ceilings.fma_gflops < 0) c.fail("ceilings must not be negative");
  ceilings.measured_at = c.integer_or("measured_at", 0);
  return ceilings;
}

cache::Trial parse_trial(const Checker& c) {
  c.only({"label", "config", "status", "message", "median_ms", "spread", "gbps", "created_at"});
  cache::Trial t;
  t.label = c.text("label");
  if (c.has("config")) {
    if (!c.at("config").is_object()) c.fail("'config' must be an object");
    t.config_json = c.at("config").dump();
  }
  t.status = c.text("status");
  if (kStatuses.count(t.status) == 0) c.fail(fmt::format("unknown status '{}'", t.status));
  t.message = c.text_or("message", "");
  t.median_ms = c.number_or("median_ms", -1);
  t.spread = c.number_or("spread", 0);
  t.gbps = c.number_or("gbps", 0);
  if (t.status == "ok" && !(t.median_ms > 0)) c.fail("a trial with status ok needs a positive 'median_ms'");
  return t;
}

// A tuning run of an export made with --runs: checked, then ignored (imports are configs only).
void check_run(const Checker& c) {
  c.only({"started_at", "wall_seconds", "compile_seconds", "bench_seconds", "variants_total", "variants_timed",
          "compiles", "binaries_reused", "search", "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w",
          "winner_label", "winner_ms", "incumbent_label", "incumbent_ms", "replaced_incumbent", "extra"});
  for (const char* field : {"started_at", "variants_total", "variants_timed", "compiles", "binaries_reused",
                            "sm_clock_mhz", "mem_clock_mhz", "temperature_c"})
    if (c.has(field)) (void)c.integer(field);
  for (const char* field : {"wall_seconds", "compile_seconds", "bench_seconds", "power_w", "winner_ms", "incumbent_ms"})
    if (c.has(field)) (void)c.number(field);
  for (const char* field : {"winner_label", "incumbent_label"})
    if (c.has(field)) (void)c.text(field);
  if (c.has("search")) {
    const std::string search = c.text("search");
    if (search != "exhaustive" && search != "budgeted" && !search.empty())
      c.fail(fmt::format("unknown search '{}' (exhaustive, budgeted)", search));
  }
  if (c.has("replaced_incumbent") && !c.at("replaced_incumbent").is_boolean())
    c.fail("'replaced_incumbent' must be true or false");
  if (c.has("extra") && !c.at("extra").is_object()) c.fail("'extra' must be an object");
}

struct ImportedEntry {
  cache::Winner winner;
  std::vector<cache::Trial> trials;
};

ImportedEntry parse_entry(const Checker& c, const std::set<std::string>& device_ids) {
  c.only({"op", "problem_key", "device_id", "template_hash", "label", "config", "origin", "median_ms", "gbps",
          "created_at", "trials", "runs"});
  ImportedEntry e;
  cache::Winner& w = e.winner;
  w.op = c.text("op");
  const OpHandler& handler = require_handler(w.op, c.where());
  w.problem_key = c.text("problem_key");
  if (!handler.key_info(w.problem_key, 0))
    c.fail(fmt::format("'{}' is not a problem key of operator {}", w.problem_key, w.op));
  w.device_id = c.text("device_id");
  if (device_ids.count(w.device_id) == 0) c.fail(fmt::format("device '{}' is not among the file's devices", w.device_id));
  w.template_hash = c.text("template_hash");
  if (w.template_hash.empty()) c.fail("'template_hash' is empty");
  const auto& config = c.at("config");
  if (!config.is_object()) c.fail("'config' must be an object");
  try {
    w.label = handler.check_config(w.problem_key, config);
  } catch (const InputError& error) {
    c.fail(error.what());
  }
  if (c.has("label") && c.text("label") != w.label)
    c.fail(fmt::format("'label' {} does not match its config ({})", c.text("label"), w.label));
  w.config_json = config.dump();
  w.origin = "imported";
  w.median_ms = c.number_or("median_ms", -1);
  w.gbps = c.number_or("gbps", 0);
  w.created_at = c.integer_or("created_at", 0);
  if (c.has("origin")) (void)c.text("origin");  // recorded by the exporter; here it becomes "imported"
  if (c.has("trials")) {
    const auto& trials = c.array("trials");
    for (std::size_t i = 0; i < trials.size(); ++i)
      e.trials.push_back(parse_trial(Checker(trials[i], fmt::format("{}.trials[{}]", c.where(), i))));
  }
  if (c.has("runs")) {
    const auto& runs = c.array("runs");
    for (std::size_t i = 0; i < runs.size(); ++i) check_run(Checker(runs[i], fmt::format("{}.runs[{}]", c.where(), i)));
  }
  return e;
}

}  // namespace

CurrentVersions current_versions() { return CurrentVersions{detail::nvrtc_version(), kvtune::version()}; }

std::string entry_id(const cache::Winner& w) {
  return detail::hash_hex(w.problem_key + "|" + w.device_id + "|" + w.template_hash).substr(0, 10);
}

std::vector<std::string> stale_reasons(const cache::Winner& winner, const cache::DeviceRow* device,
                                       const std::vector<cache::DeviceRow>& devices, const CurrentVersions& current) {
  std::vector<std::string> reasons;
  if (const OpHandler* handler = find_handler(winner.op)) {
    const std::string now = handler->template_hash();
    if (winner.template_hash != now) reasons.push_back(fmt::format("template ({} now {})", winner.template_hash, now));
  }
  if (device == nullptr) return reasons;
  if (device->nvrtc_version != current.nvrtc_version)
    reasons.push_back(fmt::format("nvrtc ({} now {})", device->nvrtc_version, current.nvrtc_version));
  if (device->kvtune_version != current.kvtune_version)
    reasons.push_back(fmt::format("kvtune ({} now {})", device->kvtune_version, current.kvtune_version));
  for (const auto& other : devices) {
    if (other.id != device->id && same_model(other, *device) && other.driver_version != device->driver_version &&
        other.updated_at > device->updated_at) {
      reasons.push_back(fmt::format("driver ({} superseded by {})", device->driver_version, other.driver_version));
      break;
    }
  }
  return reasons;
}

CacheView load_view(cache::Store& store) {
  CacheView view;
  view.devices = store.devices();
  for (auto& c : store.all_ceilings()) view.ceilings[c.device_id] = c;
  const CurrentVersions current = current_versions();
  for (auto& w : store.winners()) {
    CacheEntry e;
    e.id = entry_id(w);
    for (const auto& d : view.devices)
      if (d.id == w.device_id) e.device = d;
    e.stale_reasons = stale_reasons(w, e.device ? &*e.device : nullptr, view.devices, current);
    e.op_available = find_handler(w.op) != nullptr;
    e.winner = std::move(w);
    view.entries.push_back(std::move(e));
  }
  return view;
}

const CacheEntry& find_entry(const CacheView& view, const std::string& id) {
  std::vector<const CacheEntry*> found;
  for (const auto& e : view.entries)
    if (e.winner.problem_key == id) found.push_back(&e);
  if (found.empty() && id.size() >= 4)
    for (const auto& e : view.entries)
      if (e.id.rfind(lower(id), 0) == 0) found.push_back(&e);
  if (found.size() == 1) return *found.front();
  if (found.empty())
    throw InputError(fmt::format("no cache entry '{}' (ids are listed by `kvtune-cache list`; give at least 4 digits)",
                                 id));
  std::string ids;
  for (const auto* e : found) ids += (ids.empty() ? "" : ", ") + e->id;
  throw InputError(fmt::format("'{}' matches {} entries ({}): give more of the id", id, found.size(), ids));
}

std::string device_label(const cache::DeviceRow& device) {
  return fmt::format("{} ({})", device.name, device.id.substr(0, 6));
}

std::string device_label(const CacheEntry& entry) {
  return entry.device ? device_label(*entry.device) : fmt::format("unknown ({})", entry.winner.device_id.substr(0, 6));
}

bool device_matches(const std::string& device_id, const std::optional<cache::DeviceRow>& device,
                    const std::string& filter) {
  if (filter.empty()) return true;
  if (device_id.rfind(lower(filter), 0) == 0) return true;
  return device && lower(device->name).find(lower(filter)) != std::string::npos;
}

std::vector<cache::Trial> latest_run(const std::vector<cache::Trial>& trials) {
  std::int64_t newest = 0;
  for (const auto& t : trials) newest = std::max(newest, t.created_at);
  std::vector<cache::Trial> out;
  for (const auto& t : trials)
    if (t.created_at == newest) out.push_back(t);
  return out;
}

std::vector<cache::TuningRun> runs_of(cache::Store& store, const cache::Winner& winner) {
  std::vector<cache::TuningRun> out;
  for (auto& run : store.tuning_runs(winner.problem_key))
    if (run.device_id == winner.device_id && run.template_hash == winner.template_hash) out.push_back(std::move(run));
  return out;
}

nlohmann::json run_to_json(const cache::TuningRun& run) {
  nlohmann::json j = {{"started_at", run.started_at},
                      {"wall_seconds", run.wall_seconds},
                      {"compile_seconds", run.compile_seconds},
                      {"bench_seconds", run.bench_seconds},
                      {"variants_total", run.variants_total},
                      {"variants_timed", run.variants_timed},
                      {"compiles", run.compiles},
                      {"binaries_reused", run.binaries_reused},
                      {"search", run.search},
                      {"sm_clock_mhz", run.sm_clock_mhz},
                      {"mem_clock_mhz", run.mem_clock_mhz},
                      {"temperature_c", run.temperature_c},
                      {"power_w", run.power_w},
                      {"winner_label", run.winner_label},
                      {"winner_ms", run.winner_ms},
                      {"incumbent_label", run.incumbent_label},
                      {"incumbent_ms", run.incumbent_ms},
                      {"replaced_incumbent", run.replaced_incumbent}};
  const auto extra = detail::parse_json_or_discarded(run.json.empty() ? "null" : run.json);
  if (extra.is_object()) j["extra"] = extra;
  return j;
}

nlohmann::json export_cache(cache::Store& store, bool runs) {
  nlohmann::json devices = nlohmann::json::array();
  std::map<std::string, cache::Ceilings> ceilings;
  for (auto& c : store.all_ceilings()) ceilings[c.device_id] = c;
  for (const auto& d : store.devices()) {
    nlohmann::json fingerprint = detail::parse_json_or_discarded(d.json.empty() ? "{}" : d.json);
    if (fingerprint.is_discarded() || !fingerprint.is_object()) fingerprint = nlohmann::json::object();
    nlohmann::json j = {{"id", d.id},
                        {"name", d.name},
                        {"cc_major", d.cc_major},
                        {"cc_minor", d.cc_minor},
                        {"sm_count", d.sm_count},
                        {"l2_bytes", d.l2_bytes},
                        {"memory_bytes", d.memory_bytes},
                        {"driver_version", d.driver_version},
                        {"nvrtc_version", d.nvrtc_version},
                        {"kvtune_version", d.kvtune_version},
                        {"updated_at", d.updated_at},
                        {"fingerprint", fingerprint}};
    if (const auto it = ceilings.find(d.id); it != ceilings.end())
      j["ceilings"] = {{"copy_gbps", it->second.copy_gbps},
                       {"fma_gflops", it->second.fma_gflops},
                       {"measured_at", it->second.measured_at}};
    devices.push_back(std::move(j));
  }
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& w : store.winners()) {
    nlohmann::json trials = nlohmann::json::array();
    for (const auto& t : latest_run(store.trials(w.problem_key, w.device_id, w.template_hash))) {
      nlohmann::json tj = {{"label", t.label}, {"status", t.status}, {"median_ms", t.median_ms},
                           {"spread", t.spread}, {"gbps", t.gbps}};
      const auto config = detail::parse_json_or_discarded(t.config_json.empty() ? "null" : t.config_json);
      if (config.is_object()) tj["config"] = config;
      if (!t.message.empty()) tj["message"] = t.message;
      trials.push_back(std::move(tj));
    }
    const auto config = detail::parse_json_or_discarded(w.config_json);
    nlohmann::json run_list = nlohmann::json::array();
    if (runs)
      for (const auto& run : runs_of(store, w)) run_list.push_back(run_to_json(run));
    entries.push_back({{"op", w.op},
                       {"problem_key", w.problem_key},
                       {"device_id", w.device_id},
                       {"template_hash", w.template_hash},
                       {"label", w.label},
                       {"config", config.is_discarded() ? nlohmann::json::object() : config},
                       {"origin", w.origin},
                       {"median_ms", w.median_ms},
                       {"gbps", w.gbps},
                       {"created_at", w.created_at},
                       {"trials", std::move(trials)}});
    if (runs) entries.back()["runs"] = std::move(run_list);
  }
  return {{"kvtune_export", kExportFormat},
          {"kvtune_version", kvtune::version()},
          {"exported_at", unix_now()},
          {"devices", std::move(devices)},
          {"entries", std::move(entries)}};
}

ImportSummary import_cache(cache::Store& store, const nlohmann::json& document, const std::string& source,
                           bool overwrite) {
  // Check everything first: a file with one bad entry imports nothing.
  const Checker top(document, source);
  top.only({"kvtune_export", "kvtune_version", "exported_at", "devices", "entries"});
  const std::int64_t format = top.integer("kvtune_export");
  if (format < 1 || format > kExportFormat)
    top.fail(fmt::format("export format {} is not one this kvtune reads (1..{})", format, kExportFormat));
  std::vector<cache::DeviceRow> devices;
  std::vector<cache::Ceilings> ceilings;
  std::set<std::string> device_ids;
  const auto& device_list = top.array("devices");
  for (std::size_t i = 0; i < device_list.size(); ++i) {
    const Checker c(device_list[i], fmt::format("{}: devices[{}]", source, i));
    devices.push_back(parse_device(c));
    if (!device_ids.insert(devices.back().id).second) c.fail(fmt::format("device '{}' appears twice", devices.back().id));
    if (auto ceiling = parse_ceilings(c, devices.back().id)) ceilings.push_back(*ceiling);
  }
  std::vector<ImportedEntry> entries;
  std::set<std::string> seen;
  const auto& entry_list = top.array("entries");
  for (std::size_t i = 0; i < entry_list.size(); ++i) {
    const Checker c(entry_list[i], fmt::format("{}: entries[{}]", source, i));
    entries.push_back(parse_entry(c, device_ids));
    const auto& w = entries.back().winner;
    if (!seen.insert(w.problem_key + "|" + w.device_id + "|" + w.template_hash).second)
      c.fail("the same (problem_key, device_id, template_hash) appears twice");
  }

  ImportSummary summary;
  for (const auto& d : devices) {
    store.put_device(d);
    ++summary.devices;
  }
  for (const auto& c : ceilings) {
    const auto local = store.find_ceilings(c.device_id);
    if (!local || local->measured_at < c.measured_at) store.put_ceilings(c);
  }
  const CurrentVersions current = current_versions();
  const auto all_devices = store.devices();
  for (auto& e : entries) {
    const auto& w = e.winner;
    if (store.find_winner(w.problem_key, w.device_id, w.template_hash)) {
      if (!overwrite) {
        ++summary.skipped;
        continue;
      }
      store.remove_result(w.problem_key, w.device_id, w.template_hash);
      ++summary.replaced;
    } else {
      ++summary.imported;
    }
    store.put_result(w, std::nullopt, e.trials);
    const auto device = store.find_device(w.device_id);
    if (!stale_reasons(w, device ? &*device : nullptr, all_devices, current).empty()) ++summary.stale;
  }
  return summary;
}

std::string binary_mismatch(const cache::Winner& winner, const cache::Binary& binary) {
  std::string why = "operator " + winner.op + " is not in this build";
  std::apply(
      [&](auto... family) {
        const auto check = [&](auto f) {
          using F = decltype(f);
          if (winner.op != F::kOp) return;
          const auto problem = F::from_key(winner.problem_key);
          if (!problem) {
            why = "its entry's problem key does not parse";
            return;
          }
          const auto config = detail::stored_config<F>(winner.config_json, *problem, why);
          if (!config) return;
          if (detail::trusted_binary<F>(binary, *problem, *config, binary.arch, why)) why.clear();
        };
        (check(family), ...);
      },
      detail::Families{});
  return why;
}

MergeSummary merge_cache(cache::Store& target, cache::Store& source, bool with_binaries) {
  MergeSummary summary;
  for (const auto& d : source.devices()) {
    target.put_device(d);
    ++summary.devices;
  }
  for (const auto& c : source.all_ceilings()) {
    const auto local = target.find_ceilings(c.device_id);
    if (!local || local->measured_at < c.measured_at) {
      target.put_ceilings(c);
      ++summary.ceilings;
    }
  }
  std::set<std::string> present;
  for (const auto& b : target.binary_infos()) present.insert(b.hash);
  for (const auto& info : with_binaries ? source.binary_infos() : std::vector<cache::BinaryInfo>{}) {
    if (present.count(info.hash) != 0) continue;
    const auto binary = source.find_binary(info.hash);  // refuses an image that no longer matches its hash
    if (!binary) {
      ++summary.damaged_binaries;
      continue;
    }
    target.put_binary(*binary);
    ++summary.binaries;
  }
  for (const auto& w : source.winners()) {
    const auto local = target.find_winner(w.problem_key, w.device_id, w.template_hash);
    if (local && local->created_at >= w.created_at) {
      ++summary.kept;
      continue;
    }
    if (local) {
      target.remove_result(w.problem_key, w.device_id, w.template_hash);
      ++summary.replaced;
    } else {
      ++summary.added;
    }
    cache::Winner copy = w;
    if (!with_binaries) copy.binary_hash.clear();  // compiled where it is used
    target.put_result(copy, std::nullopt, latest_run(source.trials(w.problem_key, w.device_id, w.template_hash)));
    // The entry's tuning history comes with it; runs the target has already (an earlier merge of
    // the same shard) are not copied twice.
    const auto present_runs = runs_of(target, w);
    for (const auto& run : runs_of(source, w)) {
      const bool present = std::any_of(present_runs.begin(), present_runs.end(), [&](const cache::TuningRun& r) {
        return r.started_at == run.started_at && r.wall_seconds == run.wall_seconds && r.winner_label == run.winner_label;
      });
      if (present) continue;
      target.put_tuning_run(run);
      ++summary.runs;
    }
  }
  return summary;
}

}  // namespace kvtune::tools
