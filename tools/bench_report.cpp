// kvtune-bench's report: derived numbers (bandwidth, % of copy, roofline floor, speedups), the
// peers merge, and the JSON and Markdown writers.
#include "tools/bench_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace kvtune::bench {
namespace {

constexpr const char* kPeersSchema = "kvtune-bench-peers/1";

std::string us(double ms) {
  const double v = ms * 1e3;
  if (v < 10) return fmt::format("{:.2f}", v);
  if (v < 1000) return fmt::format("{:.1f}", v);
  return fmt::format("{:.0f}", v);
}

// "12.3 µs · 1.52×": the other implementation's time and kvtune's speedup over it.
std::string versus(const Timing& other, const Timing& kvtune, const std::string& suffix = "") {
  if (!other.ok()) return other.status == "not run" ? "" : other.status;
  std::string cell = us(other.median_ms) + " µs";
  if (kvtune.ok()) cell += fmt::format(" · {:.2f}×", other.median_ms / kvtune.median_ms);
  return cell + suffix;
}

// The fastest of cuDNN and every peer (the "best of PyTorch and cuDNN" the targets name).
const Timing* best_other(const ProblemResult& r) {
  const Timing* best = r.cudnn.ok() ? &r.cudnn : nullptr;
  for (const auto& [name, t] : r.peers)
    if (t.ok() && (best == nullptr || t.median_ms < best->median_ms)) best = &t;
  return best;
}

std::vector<std::string> groups_in_order(const Report& report) {
  std::vector<std::string> groups;
  for (const auto& r : report.problems)
    if (std::find(groups.begin(), groups.end(), r.problem.group) == groups.end())
      groups.push_back(r.problem.group);
  return groups;
}

std::vector<std::string> peer_names(const Report& report, const std::string& group) {
  std::set<std::string> names;
  for (const auto& r : report.problems)
    if (r.problem.group == group)
      for (const auto& [name, t] : r.peers) names.insert(name);
  return {names.begin(), names.end()};
}

struct Geomean {
  double log_sum = 0;
  int count = 0;
  void add(const Timing* other, const Timing& kvtune) {
    if (other == nullptr || !other->ok() || !kvtune.ok()) return;
    log_sum += std::log(other->median_ms / kvtune.median_ms);
    ++count;
  }
  std::string text() const {
    return count == 0 ? "–" : fmt::format("{:.2f}× ({} problems)", std::exp(log_sum / count), count);
  }
};

std::string require_string(const nlohmann::json& entry, const char* field, const std::string& where) {
  const auto it = entry.find(field);
  if (it == entry.end() || !it->is_string() || it->get<std::string>().empty())
    throw PeersError(fmt::format("{}: '{}' must be a non-empty string", where, field));
  return it->get<std::string>();
}

}  // namespace

Timing Timing::failed(std::string why, std::string status) {
  Timing t;
  t.status = std::move(status);
  t.message = std::move(why);
  return t;
}

const std::pair<std::string, Timing>* ProblemResult::best_seed() const {
  const std::pair<std::string, Timing>* best = nullptr;
  for (const auto& s : seeds)
    if (s.second.ok() && (best == nullptr || s.second.median_ms < best->second.median_ms)) best = &s;
  return best;
}

double floor_ms(const ProblemResult& r, const MachineInfo& m) {
  if (m.copy_gbps <= 0 || m.fma_tflops <= 0) return 0;
  const double memory_ms = r.model_bytes / (m.copy_gbps * 1e9) * 1e3;
  const double compute_ms = r.model_flops / (m.fma_tflops * 1e12) * 1e3;
  return std::max(memory_ms, compute_ms);
}

nlohmann::json read_peers_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw PeersError(fmt::format("peers file '{}': cannot be opened", path));
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const nlohmann::json::exception& e) {
    throw PeersError(fmt::format("peers file '{}': not valid JSON: {}", path, e.what()));
  }
  validate_peers(doc, fmt::format("peers file '{}'", path));
  return doc;
}

void validate_peers(const nlohmann::json& doc, const std::string& origin) {
  if (!doc.is_object()) throw PeersError(origin + ": the top level must be an object");
  const auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_string() || schema->get<std::string>() != kPeersSchema)
    throw PeersError(fmt::format("{}: 'schema' must be \"{}\"", origin, kPeersSchema));
  const auto results = doc.find("results");
  if (results == doc.end() || !results->is_array()) throw PeersError(origin + ": 'results' must be an array");
  static const std::set<std::string> statuses = {"ok", "failed", "unsupported", "skipped"};
  for (std::size_t i = 0; i < results->size(); ++i) {
    const auto& e = (*results)[i];
    const std::string where = fmt::format("{}: results[{}]", origin, i);
    if (!e.is_object()) throw PeersError(where + ": must be an object");
    require_string(e, "id", where);
    require_string(e, "peer", where);
    const std::string status = require_string(e, "status", where);
    if (statuses.count(status) == 0)
      throw PeersError(fmt::format("{}: 'status' must be ok, failed, unsupported or skipped (got \"{}\")", where, status));
    if (status == "ok") {
      const auto t = e.find("median_ms");
      if (t == e.end() || !t->is_number() || !std::isfinite(t->get<double>()) || t->get<double>() <= 0)
        throw PeersError(where + ": 'median_ms' must be a positive number when status is ok");
    }
    for (const char* field : {"mode", "op", "message"}) {
      const auto f = e.find(field);
      if (f != e.end() && !f->is_string()) throw PeersError(fmt::format("{}: '{}' must be a string", where, field));
    }
    const auto spread = e.find("spread");
    if (spread != e.end() && !spread->is_number()) throw PeersError(where + ": 'spread' must be a number");
  }
}

int merge_peers(Report& report, const nlohmann::json& doc, const std::string& origin) {
  validate_peers(doc, origin);
  int unmatched = 0;
  for (const auto& e : doc.at("results")) {
    const std::string id = e.at("id").get<std::string>();
    auto it = std::find_if(report.problems.begin(), report.problems.end(),
                           [&](const ProblemResult& r) { return r.problem.id == id; });
    if (it == report.problems.end()) {
      ++unmatched;
      continue;
    }
    Timing t;
    t.status = e.at("status").get<std::string>();
    t.median_ms = t.status == "ok" ? e.at("median_ms").get<double>() : 0;
    t.spread = e.value("spread", 0.0);
    t.mode = e.value("mode", "");
    t.label = e.value("op", "");
    t.message = e.value("message", "");
    it->peers[e.at("peer").get<std::string>()] = t;
  }
  std::string header = origin;
  for (const char* field : {"source", "torch_version", "device"})
    if (doc.contains(field) && doc[field].is_string()) header += fmt::format(", {} {}", field, doc[field].get<std::string>());
  report.peer_sources.push_back(header);
  return unmatched;
}

nlohmann::json to_json(const Timing& t) {
  nlohmann::json j = {{"status", t.status}};
  if (t.ok()) {
    j["median_ms"] = t.median_ms;
    j["spread"] = t.spread;
    j["mode"] = t.mode;
  }
  if (!t.label.empty()) j["label"] = t.label;
  if (!t.message.empty()) j["message"] = t.message;
  return j;
}

nlohmann::json to_json(const Report& report) {
  const MachineInfo& m = report.machine;
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& r : report.problems) {
    nlohmann::json p = to_json(r.problem);
    p["model_bytes"] = r.model_bytes;
    p["model_flops"] = r.model_flops;
    p["rotation"] = {{"slots", r.slots}, {"slot_bytes", r.slot_bytes}};
    p["kvtune"] = to_json(r.kvtune);
    p["heuristic"] = to_json(r.heuristic);
    nlohmann::json seeds = nlohmann::json::object();
    for (const auto& [name, t] : r.seeds) seeds[name] = to_json(t);
    p["seeds"] = seeds;
    p["cudnn"] = to_json(r.cudnn);
    p["copy"] = to_json(r.copy);
    nlohmann::json peers = nlohmann::json::object();
    for (const auto& [name, t] : r.peers) peers[name] = to_json(t);
    p["peers"] = peers;
    nlohmann::json derived = nlohmann::json::object();
    const double floor = floor_ms(r, m);
    if (floor > 0) derived["floor_ms"] = floor;
    if (r.kvtune.ok()) {
      const double gbps = r.model_bytes / (r.kvtune.median_ms * 1e-3) / 1e9;
      derived["gbps"] = gbps;
      if (m.copy_gbps > 0) derived["pct_copy"] = 100 * gbps / m.copy_gbps;
      if (floor > 0) derived["pct_floor"] = 100 * floor / r.kvtune.median_ms;
      nlohmann::json speedups = nlohmann::json::object();
      auto add = [&](const std::string& name, const Timing* t) {
        if (t != nullptr && t->ok()) speedups[name] = t->median_ms / r.kvtune.median_ms;
      };
      add("heuristic", &r.heuristic);
      if (const auto* best = r.best_seed()) add("best_seed", &best->second);
      add("cudnn", &r.cudnn);
      add("copy", &r.copy);
      for (const auto& [name, t] : r.peers) add(name, &t);
      add("best_of_cudnn_and_peers", best_other(r));
      derived["speedup"] = speedups;
    }
    p["derived"] = derived;
    problems.push_back(p);
  }
  return {{"schema", "kvtune-bench-report/1"},
          {"machine",
           {{"device", m.device},
            {"sm_count", m.sm_count},
            {"l2_bytes", m.l2_bytes},
            {"driver", m.driver},
            {"kvtune_version", m.kvtune_version},
            {"cudnn", m.cudnn},
            {"copy_gbps", m.copy_gbps},
            {"fma_tflops", m.fma_tflops},
            {"launch_us_events", m.launch_us_events},
            {"launch_us_graph", m.launch_us_graph},
            {"date", m.date},
            {"command", m.command},
            {"cache", m.cache}}},
          {"problems", problems},
          {"peer_sources", report.peer_sources},
          {"notes", report.notes}};
}

std::string to_markdown(const Report& report) {
  const MachineInfo& m = report.machine;
  std::ostringstream out;
  out << fmt::format("# kvtune-bench — {} ({} SMs, {} MiB L2), {}\n\n", m.device, m.sm_count, m.l2_bytes >> 20, m.date);
  out << fmt::format("- command: `{}`\n", m.command);
  out << fmt::format("- kvtune {}, driver {}, cuDNN {}, cache {}\n", m.kvtune_version, m.driver, m.cudnn, m.cache);
  out << fmt::format("- copy bandwidth (1 GiB device-to-device cudaMemcpyAsync, read + write): {:.0f} GB/s; "
                     "f32 FMA rate: {:.1f} TFLOP/s\n",
                     m.copy_gbps, m.fma_tflops);
  out << fmt::format("- empty-kernel launch: {:.2f} µs (events, back-to-back), {:.2f} µs (CUDA-graph replay)\n",
                     m.launch_us_events, m.launch_us_graph);
  for (const auto& source : report.peer_sources) out << "- peers: " << source << "\n";
  out << "- floor = max(model bytes / copy bandwidth, model FLOPs / FMA rate); `a · s×` is another "
         "implementation's time and kvtune's speedup over it; timing `graph` is CUDA-graph replay\n";

  for (const auto& group : groups_in_order(report)) {
    // The cuDNN column where a row of the group has a cuDNN counterpart (timed, skipped or refused).
    const bool dwconv = std::any_of(report.problems.begin(), report.problems.end(), [&](const ProblemResult& r) {
      return r.problem.group == group && r.cudnn.status != "not run";
    });
    const auto peers = peer_names(report, group);
    out << "\n## " << group << "\n\n";
    std::string head = "| problem | kvtune variant | µs | timing | GB/s | % copy | floor µs | % floor | heuristic | best seed";
    std::string rule = "|---|---|---|---|---|---|---|---|---|---";
    if (dwconv) head += " | cuDNN", rule += "|---";
    for (const auto& name : peers) head += " | " + name, rule += "|---";
    head += " | copy µs |\n";
    rule += "|---|\n";
    out << head << rule;
    Geomean vs_heuristic, vs_seed, vs_cudnn, vs_best_other;
    std::map<std::string, Geomean> vs_peer;
    for (const auto& r : report.problems) {
      if (r.problem.group != group) continue;
      const double floor = floor_ms(r, m);
      const Timing& k = r.kvtune;
      std::string row = fmt::format("| {} | {} | ", r.problem.what, k.ok() ? k.label : k.status + ": " + k.message);
      if (k.ok()) {
        const double gbps = r.model_bytes / (k.median_ms * 1e-3) / 1e9;
        row += fmt::format("{} | {} | {:.0f} | {} | {} | {} | ", us(k.median_ms), k.mode, gbps,
                           m.copy_gbps > 0 ? fmt::format("{:.1f}", 100 * gbps / m.copy_gbps) : "–",
                           floor > 0 ? us(floor) : "–", floor > 0 ? fmt::format("{:.1f}", 100 * floor / k.median_ms) : "–");
      } else {
        row += fmt::format("– | – | – | – | {} | – | ", floor > 0 ? us(floor) : "–");
      }
      row += versus(r.heuristic, k) + " | ";
      const auto* seed = r.best_seed();
      row += seed != nullptr ? versus(seed->second, k, " (" + seed->first + ")") : "–";
      if (dwconv) row += " | " + versus(r.cudnn, k);
      for (const auto& name : peers) {
        const auto it = r.peers.find(name);
        row += " | " + (it == r.peers.end() ? std::string("–") : versus(it->second, k));
        if (it != r.peers.end()) vs_peer[name].add(&it->second, k);
      }
      row += " | " + (r.copy.ok() ? us(r.copy.median_ms) : r.copy.status) + " |\n";
      out << row;
      vs_heuristic.add(&r.heuristic, k);
      vs_seed.add(seed != nullptr ? &seed->second : nullptr, k);
      vs_cudnn.add(&r.cudnn, k);
      vs_best_other.add(best_other(r), k);
    }
    out << "\nGeometric-mean speedup of kvtune: over the heuristic " << vs_heuristic.text() << "; over the best seed "
        << vs_seed.text();
    if (dwconv) out << "; over cuDNN " << vs_cudnn.text();
    for (const auto& name : peers) out << "; over " << name << " " << vs_peer[name].text();
    if (dwconv) out << "; over the best of cuDNN and the peers " << vs_best_other.text();
    out << ".\n";
  }
  if (!report.notes.empty()) {
    out << "\n## Notes\n\n";
    for (const auto& note : report.notes) out << "- " << note << "\n";
  }
  return out.str();
}

}  // namespace kvtune::bench
