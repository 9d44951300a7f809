// kvtune-cache: inspect and manage the kvtune cache. list, show, stats, recorded, leases, export,
// import, merge, prune, verify, clear, report (docs/TOOLS.md). Human tables by default, --json for machines;
// --cache PATH before or after the subcommand.

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cache/store.h"
#include "kvtune/kvtune.h"
#include "core/json_fields.h"
#include "tools/cache_view.h"
#include "tools/common.h"
#include "tools/ops.h"
#include "tools/report.h"

namespace kvtune::tools {
namespace {

constexpr const char* kTool = "kvtune-cache";

struct Settings {
  std::string cache;
  bool json = false;
  // list / report / prune filters
  std::string op;
  std::string device;
  bool stale = false;
  bool fresh = false;
  // show
  std::string id;
  // export / import / report
  std::string file;
  bool overwrite = false;
  bool runs = false;  // export --runs
  // merge
  std::vector<std::string> sources;
  bool with_binaries = false;
  // prune
  double older_than_days = -1;
  bool dry_run = false;
  // clear
  bool yes = false;
};

std::string cache_path(const Settings& s) {
  if (!s.cache.empty()) return s.cache;
  try {
    const std::string path = ContextOptions::from_environment().cache_path;
    if (path.empty()) throw InputError("no cache file: KVTUNE_CACHE is empty and --cache was not given");
    return path;
  } catch (const Error& e) {
    throw InputError(e.what());
  }
}

std::unique_ptr<cache::Store> open(const Settings& s, bool create = false) {
  return cache::Store::open_existing(cache_path(s), create);
}

void print_json(const nlohmann::json& j) { std::printf("%s\n", json_text(j, 2).c_str()); }

std::string describe_entry(const CacheEntry& e) {
  if (const OpHandler* h = find_handler(e.winner.op))
    if (const auto info = h->key_info(e.winner.problem_key, e.device ? e.device->cc_major : 0)) return info->describe;
  return e.winner.problem_key;
}

std::string stale_text(const CacheEntry& e) {
  std::string s;
  for (const auto& r : e.stale_reasons) s += (s.empty() ? "" : "; ") + r;
  return s;
}

nlohmann::json entry_json(const CacheEntry& e) {
  const auto& w = e.winner;
  nlohmann::json config = detail::parse_json_or_discarded(w.config_json);
  return {{"id", e.id},
          {"op", w.op},
          {"problem_key", w.problem_key},
          {"describe", describe_entry(e)},
          {"device_id", w.device_id},
          {"device_name", e.device ? e.device->name : ""},
          {"template_hash", w.template_hash},
          {"variant", w.label},
          {"config", config.is_discarded() ? nlohmann::json() : config},
          {"binary_hash", w.binary_hash},
          {"origin", w.origin},
          {"median_ms", w.median_ms},
          {"gbps", w.gbps},
          {"created_at", w.created_at},
          {"stale", e.stale()},
          {"stale_reasons", e.stale_reasons},
          {"op_available", e.op_available}};
}

std::vector<const CacheEntry*> select(const CacheView& view, const Settings& s) {
  std::vector<const CacheEntry*> out;
  for (const auto& e : view.entries) {
    if (!s.op.empty() && e.winner.op != s.op) continue;
    if (!device_matches(e.winner.device_id, e.device, s.device)) continue;
    if (s.stale && !e.stale()) continue;
    if (s.fresh && e.stale()) continue;
    out.push_back(&e);
  }
  return out;
}

void check_op_filter(const Settings& s) {
  if (s.op.empty() || find_handler(s.op) != nullptr) return;
  throw InputError(fmt::format("--op: unknown operator '{}' (known: {})", s.op, describe_operators()));
}

// --- commands -------------------------------------------------------------------------------------

// A lease is live until its expiry (whole seconds, rounded up by the store).
bool lease_live(const cache::Lease& lease, std::int64_t now) { return lease.expires_at > now; }

int cmd_list(const Settings& s) {
  if (s.stale && s.fresh) throw InputError("--stale and --fresh exclude each other");
  check_op_filter(s);
  auto store = open(s);
  const CacheView view = load_view(*store);
  const auto entries = select(view, s);
  if (s.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto* e : entries) list.push_back(entry_json(*e));
    print_json({{"cache", store->path()}, {"entries", list}});
    return kExitOk;
  }
  Table table({"ID", "OP", "PROBLEM", "DEVICE", "VARIANT", "US", "GB/S", "ORIGIN", "STALE"});
  for (const auto* e : entries) {
    const auto& w = e->winner;
    table.add({e->id, w.op, describe_entry(*e), device_label(*e), w.label, format_us(w.median_ms),
               w.gbps > 0 ? fmt::format("{:.0f}", w.gbps) : "-", w.origin,
               e->stale() ? e->stale_reasons.front().substr(0, e->stale_reasons.front().find(' ')) : "-"});
  }
  if (!table.empty()) std::fputs(table.render().c_str(), stdout);
  std::printf("%zu of %zu entries\n", entries.size(), view.entries.size());
  return kExitOk;
}

std::string number_or_dash(double value, const char* format) {
  return value >= 0 ? fmt::format(format, value) : "-";
}

// The tuning runs of an entry, oldest first: when, how long, how the space was searched, what was
// compiled, the GPU's state, and what happened to the incumbent.
void print_runs(const std::vector<cache::TuningRun>& runs) {
  std::printf("\ntuning runs (%zu)\n", runs.size());
  if (runs.empty()) {
    std::printf("none recorded (an imported winner, or a cache written before kvtune stored runs)\n");
    return;
  }
  Table table({"WHEN (UTC)", "WALL S", "COMPILE S", "BENCH S", "SEARCH", "VARIANTS", "COMPILED", "REUSED", "SM MHZ",
               "MEM MHZ", "TEMP C", "POWER W", "WINNER", "US", "INCUMBENT"});
  for (const auto& r : runs) {
    std::string incumbent = "-";
    if (!r.incumbent_label.empty())
      incumbent = fmt::format("{} {} ({} us)", r.replaced_incumbent ? "replaced" : "kept", r.incumbent_label,
                              format_us(r.incumbent_ms));
    table.add({format_time(r.started_at), fmt::format("{:.2f}", r.wall_seconds), fmt::format("{:.2f}", r.compile_seconds),
               fmt::format("{:.2f}", r.bench_seconds), r.search.empty() ? "-" : r.search,
               fmt::format("{}/{}", r.variants_timed, r.variants_total), std::to_string(r.compiles),
               std::to_string(r.binaries_reused), number_or_dash(r.sm_clock_mhz, "{:.0f}"),
               number_or_dash(r.mem_clock_mhz, "{:.0f}"), number_or_dash(r.temperature_c, "{:.0f}"),
               number_or_dash(r.power_w, "{:.0f}"), r.winner_label, format_us(r.winner_ms), incumbent});
  }
  std::fputs(table.render().c_str(), stdout);
}

int cmd_show(const Settings& s) {
  auto store = open(s);
  const CacheView view = load_view(*store);
  const CacheEntry& e = find_entry(view, s.id);
  const auto& w = e.winner;
  const auto trials = store->trials(w.problem_key, w.device_id, w.template_hash);
  const auto run = latest_run(trials);
  const auto runs = runs_of(*store, w);
  std::optional<KeyInfo> info;
  if (const OpHandler* h = find_handler(w.op))
    info = h->key_info(w.problem_key, e.device ? e.device->cc_major : 0, e.device ? e.device->name : std::string());
  const auto ceilings = view.ceilings.find(w.device_id);
  const double copy = ceilings == view.ceilings.end() ? 0 : ceilings->second.copy_gbps;
  bool binary_ok = false;
  if (!w.binary_hash.empty()) binary_ok = store->find_binary(w.binary_hash).has_value();
  const std::string binary_state = w.binary_hash.empty() ? "none (compiled on first use)"
                                   : binary_ok            ? w.binary_hash + " (intact)"
                                                          : w.binary_hash + " (missing or damaged: recompiled or retuned)";
  const auto role = [&](const std::string& label) {
    std::string r;
    if (label == w.label) r = "winner";
    if (info && label == info->seed_label) r += r.empty() ? "seed" : ",seed";
    if (info && label == info->heuristic_label) r += r.empty() ? "heuristic" : ",heuristic";
    return r;
  };
  if (s.json) {
    nlohmann::json j = entry_json(e);
    j["binary"] = binary_state;
    j["seed_variant"] = info ? info->seed_label : "";
    j["heuristic_variant"] = info ? info->heuristic_label : "";
    j["copy_gbps"] = copy;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : run)
      list.push_back({{"variant", t.label},
                      {"status", t.status},
                      {"median_ms", t.median_ms},
                      {"spread", t.spread},
                      {"gbps", t.gbps},
                      {"role", role(t.label)},
                      {"message", t.message}});
    j["trials"] = list;
    j["older_trials"] = trials.size() - run.size();
    nlohmann::json run_list = nlohmann::json::array();
    for (const auto& r : runs) run_list.push_back(run_to_json(r));
    j["runs"] = run_list;
    print_json(j);
    return kExitOk;
  }
  std::printf("entry      %s\n", e.id.c_str());
  std::printf("operator   %s%s\n", w.op.c_str(), e.op_available ? "" : " (not available in this build)");
  std::printf("problem    %s\n", describe_entry(e).c_str());
  std::printf("key        %s\n", w.problem_key.c_str());
  std::printf("device     %s, id %s\n", e.device ? e.device->name.c_str() : "unknown", w.device_id.c_str());
  if (e.device)
    std::printf("           compute capability %d.%d, %d SMs, driver %d, NVRTC %d, kvtune %s\n", e.device->cc_major,
                e.device->cc_minor, e.device->sm_count, e.device->driver_version, e.device->nvrtc_version,
                e.device->kvtune_version.c_str());
  std::printf("template   %s\n", w.template_hash.c_str());
  std::printf("stale      %s\n", e.stale() ? stale_text(e).c_str() : "no");
  std::printf("winner     %s (%s, %s UTC)\n", w.label.c_str(), w.origin.c_str(), format_time(w.created_at).c_str());
  std::printf("config     %s\n", w.config_json.c_str());
  std::printf("time       %s us, %s GB/s%s\n", format_us(w.median_ms).c_str(),
              w.gbps > 0 ? fmt::format("{:.0f}", w.gbps).c_str() : "-",
              copy > 0 && w.gbps > 0 ? fmt::format(" ({:.1f}% of the {:.0f} GB/s copy)", 100 * w.gbps / copy, copy).c_str()
                                     : "");
  std::printf("binary     %s\n", binary_state.c_str());
  if (info) std::printf("seed       %s\nheuristic  %s\n", info->seed_label.c_str(), info->heuristic_label.c_str());
  std::printf("\ntrials of the newest run (%zu; %zu older)\n", run.size(), trials.size() - run.size());
  std::vector<cache::Trial> sorted = run;
  std::stable_sort(sorted.begin(), sorted.end(), [](const cache::Trial& a, const cache::Trial& b) {
    return (a.status == "ok" ? a.median_ms : 1e300) < (b.status == "ok" ? b.median_ms : 1e300);
  });
  Table table({"#", "VARIANT", "STATUS", "US", "GB/S", "SPREAD", "ROLE", "MESSAGE"});
  int i = 0;
  for (const auto& t : sorted)
    table.add({std::to_string(++i), t.label, t.status, format_us(t.median_ms),
               t.gbps > 0 ? fmt::format("{:.0f}", t.gbps) : "-",
               t.status == "ok" ? fmt::format("{:.1f}%", 100 * t.spread) : "-", role(t.label),
               t.message.substr(0, t.message.find('\n')).substr(0, 80)});
  std::fputs(table.render().c_str(), stdout);
  print_runs(runs);
  return kExitOk;
}

int cmd_stats(const Settings& s) {
  auto store = open(s);
  const CacheView view = load_view(*store);
  std::map<std::string, int> by_op, by_origin, by_device, by_status;
  int stale = 0, trials = 0;
  for (const auto& e : view.entries) {
    ++by_op[e.winner.op];
    ++by_origin[e.winner.origin];
    ++by_device[device_label(e)];
    if (e.stale()) ++stale;
    for (const auto& t : store->trials(e.winner.problem_key, e.winner.device_id, e.winner.template_hash)) {
      ++by_status[t.status];
      ++trials;
    }
  }
  const auto binaries = store->binary_infos();
  double binary_bytes = 0;
  for (const auto& b : binaries) binary_bytes += double(b.size);
  std::error_code ignored;
  const auto file_size = store->in_memory() ? 0 : std::filesystem::file_size(store->path(), ignored);
  const std::int64_t now = unix_now();
  int live_leases = 0, expired_leases = 0;
  for (const auto& lease : store->leases()) (lease_live(lease, now) ? live_leases : expired_leases)++;
  const auto recorded = store->recorded_problems();
  std::int64_t recorded_calls = 0;
  for (const auto& r : recorded) recorded_calls += r.count;
  const auto runs = store->tuning_runs();
  std::map<std::string, int> runs_by_search;
  int replaced = 0;
  for (const auto& r : runs) {
    ++runs_by_search[r.search.empty() ? "unknown" : r.search];
    if (r.replaced_incumbent) ++replaced;
  }
  if (s.json) {
    print_json({{"cache", store->path()},
                {"file_bytes", file_size},
                {"schema_version", store->schema_version()},
                {"devices", view.devices.size()},
                {"entries", view.entries.size()},
                {"stale", stale},
                {"by_op", by_op},
                {"by_origin", by_origin},
                {"by_device", by_device},
                {"trials", trials},
                {"trials_by_status", by_status},
                {"binaries", binaries.size()},
                {"binary_bytes", binary_bytes},
                {"leases", {{"live", live_leases}, {"expired", expired_leases}}},
                {"recorded", recorded.size()},
                {"recorded_calls", recorded_calls},
                {"tuning_runs", runs.size()},
                {"tuning_runs_by_search", runs_by_search},
                {"incumbents_replaced", replaced}});
    return kExitOk;
  }
  std::printf("cache        %s (%s, schema %d)\n", store->path().c_str(), format_bytes(double(file_size)).c_str(),
              store->schema_version());
  std::printf("devices      %zu\n", view.devices.size());
  std::printf("entries      %zu (%d stale)\n", view.entries.size(), stale);
  const auto line = [](const char* name, const std::map<std::string, int>& counts) {
    std::string text;
    for (const auto& [k, v] : counts) text += (text.empty() ? "" : ", ") + fmt::format("{} {}", k, v);
    std::printf("%-12s %s\n", name, text.empty() ? "-" : text.c_str());
  };
  line("by operator", by_op);
  line("by origin", by_origin);
  line("by device", by_device);
  std::printf("trials       %d\n", trials);
  line("by status", by_status);
  std::printf("binaries     %zu (%s)\n", binaries.size(), format_bytes(binary_bytes).c_str());
  std::printf("tuning runs  %zu (%d replaced the incumbent)\n", runs.size(), replaced);
  line("by search", runs_by_search);
  std::printf("recorded     %zu problems (%lld calls)\n", recorded.size(), static_cast<long long>(recorded_calls));
  std::printf("leases       %d live, %d expired\n", live_leases, expired_leases);
  return kExitOk;
}

// --- recorded problems and leases -----------------------------------------------------------------

std::map<std::string, cache::DeviceRow> devices_by_id(cache::Store& store) {
  std::map<std::string, cache::DeviceRow> out;
  for (auto& d : store.devices()) out[d.id] = d;
  return out;
}

std::string device_text(const std::string& id, const std::map<std::string, cache::DeviceRow>& devices) {
  const auto it = devices.find(id);
  return it != devices.end() ? device_label(it->second) : fmt::format("unknown ({})", id.substr(0, 6));
}

std::optional<cache::DeviceRow> device_row(const std::string& id, const std::map<std::string, cache::DeviceRow>& devices) {
  const auto it = devices.find(id);
  if (it == devices.end()) return std::nullopt;
  return it->second;
}

int cmd_recorded(const Settings& s) {
  check_op_filter(s);
  auto store = open(s);
  const auto devices = devices_by_id(*store);
  nlohmann::json list = nlohmann::json::array();
  Table table({"OP", "PROBLEM", "DEVICE", "COUNT", "FIRST SEEN", "LAST SEEN", "KVTUNE-TUNE --RECORDED"});
  std::size_t shown = 0, total = 0;
  for (const auto& r : store->recorded_problems()) {
    ++total;
    if (!s.op.empty() && r.op != s.op) continue;
    if (!device_matches(r.device_id, device_row(r.device_id, devices), s.device)) continue;
    ++shown;
    // What kvtune-tune --recorded would do with it.
    std::string why;
    const auto problem = problem_from_stored_key(r.op, r.problem_key, r.template_hash, why);
    const std::string describe = problem ? problem->describe() : r.problem_key;
    list.push_back({{"op", r.op},
                    {"problem_key", r.problem_key},
                    {"describe", describe},
                    {"device_id", r.device_id},
                    {"device_name", devices.count(r.device_id) != 0 ? devices.at(r.device_id).name : ""},
                    {"template_hash", r.template_hash},
                    {"count", r.count},
                    {"first_seen", r.first_seen},
                    {"last_seen", r.last_seen},
                    {"tunable", problem != nullptr},
                    {"reason", why}});
    table.add({r.op, describe, device_text(r.device_id, devices), std::to_string(r.count), format_time(r.first_seen),
               format_time(r.last_seen), problem ? "tunes it" : "skips it: " + why});
  }
  if (s.json) {
    print_json({{"cache", store->path()}, {"recorded", list}});
    return kExitOk;
  }
  if (!table.empty()) std::fputs(table.render().c_str(), stdout);
  std::printf("%zu of %zu recorded problems\n", shown, total);
  return kExitOk;
}

int cmd_leases(const Settings& s) {
  auto store = open(s);
  const auto devices = devices_by_id(*store);
  const std::int64_t now = unix_now();
  nlohmann::json list = nlohmann::json::array();
  Table table({"PROBLEM", "DEVICE", "OWNER", "ACQUIRED", "EXPIRES", "STATE"});
  int live = 0;
  const auto leases = store->leases();
  for (const auto& l : leases) {
    const bool is_live = lease_live(l, now);
    if (is_live) ++live;
    list.push_back({{"problem_key", l.problem_key},
                    {"device_id", l.device_id},
                    {"device_name", devices.count(l.device_id) != 0 ? devices.at(l.device_id).name : ""},
                    {"template_hash", l.template_hash},
                    {"owner", l.owner},
                    {"acquired_at", l.acquired_at},
                    {"expires_at", l.expires_at},
                    {"live", is_live}});
    table.add({l.problem_key, device_text(l.device_id, devices), l.owner, format_time(l.acquired_at),
               format_time(l.expires_at),
               is_live ? fmt::format("live, {} left", format_duration(double(l.expires_at - now)))
                       : fmt::format("expired {} ago", format_duration(double(now - l.expires_at)))});
  }
  if (s.json) {
    print_json({{"cache", store->path()}, {"now", now}, {"leases", list}});
    return kExitOk;
  }
  if (!table.empty()) std::fputs(table.render().c_str(), stdout);
  std::printf("%zu leases: %d live, %zu expired\n", leases.size(), live, leases.size() - static_cast<std::size_t>(live));
  return kExitOk;
}

int cmd_export(const Settings& s) {
  auto store = open(s);
  const nlohmann::json document = export_cache(*store, s.runs);
  const std::string text = json_text(document, 1) + "\n";
  if (s.file == "-") {
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  write_text_file(s.file, text);
  if (s.json)
    print_json({{"file", s.file}, {"entries", document["entries"].size()}, {"devices", document["devices"].size()}});
  else
    std::printf("exported %zu entries of %zu devices to %s (configs and trials%s; no binaries)\n",
                document["entries"].size(), document["devices"].size(), s.file.c_str(),
                s.runs ? ", tuning runs" : "");
  return kExitOk;
}

int cmd_import(const Settings& s) {
  const nlohmann::json document = parse_json_file(s.file);  // bad input before the cache is touched
  auto store = open(s, true);
  const ImportSummary r = import_cache(*store, document, s.file, s.overwrite);
  if (s.json) {
    print_json({{"file", s.file},
                {"devices", r.devices},
                {"imported", r.imported},
                {"replaced", r.replaced},
                {"skipped", r.skipped},
                {"stale", r.stale}});
  } else {
    std::printf("imported %d entries (%d replaced, %d skipped as already present) and %d devices from %s\n",
                r.imported + r.replaced, r.replaced, r.skipped, r.devices, s.file.c_str());
    if (r.stale > 0)
      std::printf("%d imported entries are stale for this kvtune (see `kvtune-cache list --stale`)\n", r.stale);
    std::printf("imported winners carry no binary: each is compiled once, on the first call that needs it\n");
  }
  return kExitOk;
}

int cmd_merge(const Settings& s) {
  const std::string target_path = cache_path(s);
  // Check every source before writing anything.
  std::vector<std::unique_ptr<cache::Store>> sources;
  for (const auto& path : s.sources) {
    std::error_code ignored;
    if (std::filesystem::equivalent(path, target_path, ignored))
      throw InputError(fmt::format("{} is the target cache itself", path));
    sources.push_back(cache::Store::open_existing(path, false));
  }
  auto target = open(s, true);
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const MergeSummary m = merge_cache(*target, *sources[i], s.with_binaries);
    list.push_back({{"source", s.sources[i]},
                    {"added", m.added},
                    {"replaced", m.replaced},
                    {"kept", m.kept},
                    {"devices", m.devices},
                    {"ceilings", m.ceilings},
                    {"binaries", m.binaries},
                    {"damaged_binaries", m.damaged_binaries},
                    {"runs", m.runs}});
    if (!s.json)
      std::printf("%s: %d entries added, %d replaced by newer, %d kept (target as new or newer); %d tuning runs "
                  "and %s%s\n",
                  s.sources[i].c_str(), m.added, m.replaced, m.kept, m.runs,
                  s.with_binaries ? fmt::format("{} binaries copied", m.binaries).c_str()
                                  : "no binaries (each is compiled on first use; --with-binaries copies them)",
                  m.damaged_binaries > 0 ? fmt::format(", {} damaged ones skipped", m.damaged_binaries).c_str() : "");
  }
  if (s.json) print_json({{"target", target->path()}, {"sources", list}});
  return kExitOk;
}

int cmd_prune(const Settings& s) {
  if (!s.stale && s.device.empty() && s.older_than_days < 0)
    throw InputError("prune needs at least one of --stale, --device D, --older-than DAYS");
  auto store = open(s);
  const CacheView view = load_view(*store);
  const std::int64_t cutoff =
      s.older_than_days >= 0 ? unix_now() - static_cast<std::int64_t>(s.older_than_days * 86400) : 0;
  std::vector<const CacheEntry*> doomed;
  for (const auto& e : view.entries) {
    if (s.stale && !e.stale()) continue;
    if (!s.device.empty() && !device_matches(e.winner.device_id, e.device, s.device)) continue;
    if (s.older_than_days >= 0 && e.winner.created_at >= cutoff) continue;
    doomed.push_back(&e);
  }
  // Binaries only the pruned winners used go with them; binaries no winner names (pre-compiled by
  // kvtune-tune --compile-only) stay.
  std::set<std::string> kept_refs, doomed_refs;
  for (const auto& e : view.entries) {
    const bool going = std::find(doomed.begin(), doomed.end(), &e) != doomed.end();
    if (!e.winner.binary_hash.empty()) (going ? doomed_refs : kept_refs).insert(e.winner.binary_hash);
  }
  std::vector<std::string> binaries;
  for (const auto& hash : doomed_refs)
    if (kept_refs.count(hash) == 0) binaries.push_back(hash);
  int removed_binaries = 0;
  if (!s.dry_run) {
    for (const auto* e : doomed) store->remove_result(e->winner.problem_key, e->winner.device_id, e->winner.template_hash);
    removed_binaries = store->remove_binaries(binaries);
  }
  if (s.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto* e : doomed) list.push_back(entry_json(*e));
    print_json({{"dry_run", s.dry_run},
                {"entries", list},
                {"binaries", s.dry_run ? static_cast<int>(binaries.size()) : removed_binaries}});
    return kExitOk;
  }
  for (const auto* e : doomed)
    std::printf("%s %s %s %s%s\n", s.dry_run ? "would prune" : "pruned", e->id.c_str(), describe_entry(*e).c_str(),
                device_label(*e).c_str(), e->stale() ? (" (stale: " + stale_text(*e) + ")").c_str() : "");
  std::printf("%s %zu entries and %zu binaries\n", s.dry_run ? "would prune" : "pruned", doomed.size(),
              s.dry_run ? binaries.size() : static_cast<std::size_t>(removed_binaries));
  return kExitOk;
}

int cmd_verify(const Settings& s) {
  std::vector<std::string> problems, notes;
  std::unique_ptr<cache::Store> store;
  try {
    store = open(s);
  } catch (const cache::OpenError& e) {
    if (e.reason() != cache::OpenError::Reason::corrupt) throw;
    problems.push_back(e.cause());
  }
  std::size_t entries = 0, binaries = 0;
  if (store) {
    for (const auto& line : store->integrity_check()) problems.push_back("integrity: " + line);
    const CacheView view = load_view(*store);
    entries = view.entries.size();
    std::set<std::string> present;
    const auto infos = store->binary_infos();
    binaries = infos.size();
    for (const auto& b : infos) {
      present.insert(b.hash);
      if (!store->find_binary(b.hash))
        problems.push_back(fmt::format("binary {} ({}, {}): its image does not match its hash", b.hash, b.arch,
                                       format_bytes(double(b.size))));
    }
    for (const auto& e : view.entries) {
      const auto& w = e.winner;
      const std::string who = fmt::format("entry {} ({} on {})", e.id, describe_entry(e), device_label(e));
      if (e.stale()) problems.push_back(fmt::format("{}: stale: {}", who, stale_text(e)));
      if (!e.device) notes.push_back(fmt::format("{}: device unknown (no device row {})", who, w.device_id));
      if (const OpHandler* h = find_handler(w.op)) {
        try {
          const nlohmann::json config = parse_json_text(w.config_json, "config");
          const std::string label = h->check_config(w.problem_key, config);
          if (label != w.label) problems.push_back(fmt::format("{}: label {} but its config is {}", who, w.label, label));
        } catch (const InputError& error) {
          problems.push_back(fmt::format("{}: {}", who, error.what()));
        }
      } else {
        notes.push_back(fmt::format("{}: operator {} is not available in this build; not checked", who, w.op));
      }
      if (!w.binary_hash.empty() && present.count(w.binary_hash) == 0)
        notes.push_back(fmt::format("{}: its binary {} is gone; the library will tune it again", who, w.binary_hash));
      if (!w.binary_hash.empty() && present.count(w.binary_hash) != 0)
        if (const auto binary = store->find_binary(w.binary_hash))
          if (const std::string why = binary_mismatch(w, *binary); !why.empty())
            problems.push_back(fmt::format("{}: its binary {} is not what this build compiles for it: {} (the library "
                                           "will not load it; it recompiles the variant)",
                                           who, w.binary_hash, why));
    }
    // Recorded problems kvtune-tune --recorded will not tune (another template, an unreadable key).
    for (const auto& r : store->recorded_problems()) {
      std::string why;
      if (!problem_from_stored_key(r.op, r.problem_key, r.template_hash, why))
        notes.push_back(fmt::format("recorded problem {} ({}): not tunable by this build: {}", r.problem_key,
                                    r.device_id.substr(0, 6), why));
    }
  }
  if (s.json) {
    print_json({{"cache", cache_path(s)},
                {"ok", problems.empty()},
                {"entries", entries},
                {"binaries", binaries},
                {"problems", problems},
                {"notes", notes}});
  } else {
    for (const auto& p : problems) std::printf("problem: %s\n", p.c_str());
    for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
    std::printf("%s: %zu entries, %zu binaries checked, %zu problems\n", cache_path(s).c_str(), entries, binaries,
                problems.size());
    if (!problems.empty() && store)
      std::printf("stale entries go with `kvtune-cache prune --stale`; damaged binaries are recompiled on use\n");
  }
  return problems.empty() ? kExitOk : kExitFailure;
}

int cmd_clear(const Settings& s) {
  if (!s.yes)
    throw InputError("clear removes every entry, trial, binary, tuning run, recorded problem and lease: add --yes to "
                     "confirm");
  auto store = open(s);
  const std::size_t entries = store->winners().size();
  const std::size_t runs = store->tuning_runs().size();
  const std::size_t recorded = store->recorded_problems().size();
  const std::size_t leases = store->leases().size();
  store->clear();
  if (s.json)
    print_json({{"cache", store->path()},
                {"removed_entries", entries},
                {"removed_tuning_runs", runs},
                {"removed_recorded", recorded},
                {"removed_leases", leases}});
  else
    std::printf("cleared %s (%zu entries, %zu tuning runs, %zu recorded problems, %zu leases removed)\n",
                store->path().c_str(), entries, runs, recorded, leases);
  return kExitOk;
}

int cmd_report(const Settings& s) {
  check_op_filter(s);
  auto store = open(s);
  const CacheView view = load_view(*store);
  ReportOptions options;
  options.source = store->path();
  options.op = s.op;
  options.device = s.device;
  const std::string html = render_report(*store, view, options);
  write_text_file(s.file, html);
  if (s.json) print_json({{"file", s.file}, {"bytes", html.size()}});
  else std::printf("wrote %s (%s)\n", s.file.c_str(), format_bytes(double(html.size())).c_str());
  return kExitOk;
}

int main_body(int argc, char** argv) {
  Settings s;
  CLI::App app{"kvtune-cache: inspect and manage the kvtune cache (see docs/TOOLS.md)"};
  app.require_subcommand(1);
  app.footer("Exit status: 0 ok, 1 failure (verify found problems, I/O), 2 bad usage or input.");
  const auto common = [&s](CLI::App* cmd) {
    cmd->add_option("--cache", s.cache, "cache file (default: the library's, $KVTUNE_CACHE or ~/.cache/kvtune)")
        ->type_name("PATH");
    cmd->add_flag("--json", s.json, "machine-readable output on stdout");
  };
  common(&app);
  std::map<std::string, std::function<int(const Settings&)>> commands;
  const auto add = [&](const char* name, const char* help, std::function<int(const Settings&)> run) {
    CLI::App* cmd = app.add_subcommand(name, help);
    common(cmd);
    commands[name] = std::move(run);
    return cmd;
  };
  auto* list = add("list", "list the winners", cmd_list);
  list->add_option("--op", s.op, "only this operator");
  list->add_option("--device", s.device, "only devices whose id starts with, or name contains, this");
  list->add_flag("--stale", s.stale, "only stale entries");
  list->add_flag("--fresh", s.fresh, "only entries that are not stale");
  add("show", "one entry: winner and every trial", cmd_show)
      ->add_option("id", s.id, "entry id (from list; 4 digits or more) or problem key")
      ->required();
  add("stats", "counts and sizes", cmd_stats);
  auto* recorded = add("recorded", "the problems the record policy logged, for kvtune-tune --recorded", cmd_recorded);
  recorded->add_option("--op", s.op, "only this operator");
  recorded->add_option("--device", s.device, "only devices whose id starts with, or name contains, this");
  add("leases", "the tuning leases, live or expired", cmd_leases);
  auto* exporter = add("export", "write winners and trials (no binaries) as JSON", cmd_export);
  exporter->add_option("file", s.file, "output file, - for stdout")->required();
  exporter->add_flag("--runs", s.runs, "also every tuning run of each entry");
  auto* import = add("import", "read an export: configs only, never binaries", cmd_import);
  import->add_option("file", s.file, "a file written by export")->required();
  import->add_flag("--overwrite", s.overwrite, "replace entries that are already present");
  auto* merge = add("merge", "merge other cache files (shards) into this one: configs, trials and runs", cmd_merge);
  merge->add_option("sources", s.sources, "cache files to merge in")->required();
  merge->add_flag("--with-binaries", s.with_binaries,
                  "also copy the compiled kernels (code that runs in every process using the cache: only from "
                  "files you trust; each is still checked against what this build compiles before it is loaded)");
  auto* prune = add("prune", "remove entries that match every given filter", cmd_prune);
  prune->add_flag("--stale", s.stale, "stale entries");
  prune->add_option("--device", s.device, "entries of devices whose id starts with, or name contains, this");
  prune->add_option("--older-than", s.older_than_days, "entries tuned more than DAYS days ago")
      ->check(CLI::Range(0.0, 1e6))
      ->type_name("DAYS");
  prune->add_flag("--dry-run", s.dry_run, "only say what would go");
  add("verify", "integrity check, staleness, every binary's hash; exit 1 on problems", cmd_verify);
  add("clear", "remove every entry, trial, binary, tuning run, recorded problem and lease", cmd_clear)->add_flag("--yes", s.yes, "confirm");
  auto* report = add("report", "write the HTML report", cmd_report);
  report->add_option("--html", s.file, "output file")->required()->type_name("OUT.html");
  report->add_option("--op", s.op, "only this operator");
  report->add_option("--device", s.device, "only devices whose id starts with, or name contains, this");

  // CLI11 reports an unknown command as a missing one; name it instead.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cache") {
      ++i;
      continue;
    }
    if (arg.rfind("-", 0) == 0) continue;
    if (commands.count(arg) == 0) {
      std::string names;
      for (const auto& [name, run] : commands) names += (names.empty() ? "" : ", ") + name;
      throw InputError(fmt::format("unknown command '{}' (commands: {})", arg, names));
    }
    break;
  }
  if (const int code = parse_command_line(app, argc, argv, kTool); code >= 0) return code;
  for (const CLI::App* cmd : app.get_subcommands()) return commands.at(cmd->get_name())(s);
  throw InputError("no command given");
}

}  // namespace
}  // namespace kvtune::tools

int main(int argc, char** argv) {
  return kvtune::tools::guarded_main("kvtune-cache", [&] { return kvtune::tools::main_body(argc, argv); });
}
