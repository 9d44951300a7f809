// The learned part of the normalize heuristic: variant rankings measured by exhaustive tuning runs
// (normalize_learned_<arch>.json, written by bench/fit_normalize_heuristic.py), transferred to a new
// problem from its nearest recorded problems. bench/NOTES.md ("a heuristic that learns from
// trials") has the fit, the held-out evaluation and why the parameters below are what they are.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/embedded.h"
#include "kernel_templates/normalize/normalize_family.h"

namespace kvtune::normalize {
namespace {

constexpr double kReach = 2.0;     // the nearest recorded problem must be closer than this
constexpr int kNeighbours = 4;     // recorded problems whose rankings are averaged
constexpr double kRowsWeight = 0.25;  // rows matter less than columns and element size
constexpr double kFlagWeight = 0.5;   // backward: each of gamma, dgamma, dbeta, saved statistics, dresidual

// Distance between problems of one direction in the units the rankings change with: octaves of
// columns, of the element size and (a quarter) of rows, half an octave for another mode and, between
// backward problems, half an octave for each optional tensor one has and the other lacks (they
// decide the reductions a row does and whether dgamma/dbeta partials are written). Problems of
// different directions are never neighbours (infinite distance): their spaces share no kernel.
double distance(const Problem& a, const Problem& b) {
  if (a.backward != b.backward) return std::numeric_limits<double>::infinity();
  const double flags = a.backward ? kFlagWeight * ((a.gamma != b.gamma) + (a.dgamma != b.dgamma) + (a.dbeta != b.dbeta) +
                                                   (a.saved_stats != b.saved_stats) + (a.dresidual != b.dresidual))
                                  : 0.0;
  return std::fabs(std::log2(double(a.cols) / double(b.cols))) +
         kRowsWeight * std::fabs(std::log2(double(a.rows) / double(b.rows))) +
         std::fabs(std::log2(double(a.element_bytes()) / double(b.element_bytes()))) + (a.mode != b.mode ? 0.5 : 0.0) +
         flags;
}

struct Recorded {
  std::string key;
  std::string device;  // the GPU model the trials ran on
  Problem problem;
  nlohmann::json ratios;  // label -> time / the problem's winner time, for those within `cap`
};

struct LearnedData {
  double cap = 1.3;
  std::vector<Recorded> problems;
};

LearnedData parse(const nlohmann::json& doc) {
  LearnedData d;
  d.cap = doc.at("cap").get<double>();
  for (const auto& e : doc.at("problems")) {
    const std::string key = e.at("key").get<std::string>();
    const auto p = problem_from_key(key);
    if (!p) continue;
    d.problems.push_back(Recorded{key, e.value("device", std::string()), *p, e.at("ratios")});
  }
  return d;
}

const LearnedData* shipped(int cc_major) {
  if (cc_major != 9) return nullptr;  // recorded: sm_90 (H200 forward 2026-11-22, backward 2026-12-01; H100 forward 2026-11-27)
  static const LearnedData data = parse(nlohmann::json::parse(embedded::normalize_learned_sm90_json));
  return &data;
}

// Rankings move with the GPU model as much as with the shape (H100 and H200 share sm_90 but not their
// memory systems): a model the table has recorded in the problem's direction sees only its own
// problems; another model, or an unknown one (empty), sees every model's.
std::optional<Config> choose(const Problem& p, const LearnedData& data, const std::string& exclude,
                             const std::string& gpu_model) {
  const bool own = !gpu_model.empty() && std::any_of(data.problems.begin(), data.problems.end(), [&](const Recorded& r) {
                     return r.device == gpu_model && r.problem.backward == p.backward;
                   });
  std::vector<std::pair<double, const Recorded*>> near;
  for (const auto& r : data.problems)
    if (r.key != exclude && r.problem.backward == p.backward && (!own || r.device == gpu_model))
      near.emplace_back(distance(p, r.problem), &r);
  if (near.empty()) return std::nullopt;
  std::sort(near.begin(), near.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (near.front().first >= kReach) return std::nullopt;
  near.resize(std::min<std::size_t>(near.size(), kNeighbours));
  const double absent = std::log(data.cap);  // slower than the cap there, or not in its space
  std::optional<Config> best;
  double best_score = std::numeric_limits<double>::infinity();
  const std::vector<Config> space = enumerate(p);
  for (const Config& c : space) {
    // One-block rows; the backward's cooperative dgamma/dbeta sums too (their launch takes at most the
    // co-resident blocks, so they run wherever the device has cooperative launches, as sm_90 has).
    if (c.splits != 1 || (c.cooperative && !p.backward)) continue;
    if (&c == &space.front() && !is_valid(p, c)) continue;  // the seed leads, runnable but perhaps not valid
    const std::string label = c.label();
    double score = 0, weights = 0;
    for (const auto& [d, r] : near) {
      const double w = 1.0 / (1.0 + d);
      const auto it = r->ratios.find(label);
      score += w * (it != r->ratios.end() ? std::log(it->get<double>()) : absent);
      weights += w;
    }
    score /= weights;
    if (score < best_score) best_score = score, best = c;  // ties: the first in enumeration order
  }
  // No candidate ran within the cap on any neighbour: the rankings say nothing here.
  if (best_score >= absent - 1e-12) return std::nullopt;
  return best;
}

}  // namespace

std::optional<Config> learned_config(const Problem& p, int cc_major, const std::string& gpu_model) {
  const LearnedData* data = shipped(cc_major);
  return data != nullptr ? choose(p, *data, "", gpu_model) : std::nullopt;
}

std::optional<Config> learned_config(const Problem& p, const nlohmann::json& data, const std::string& exclude,
                                     const std::string& gpu_model) {
  return choose(p, parse(data), exclude, gpu_model);
}

}  // namespace kvtune::normalize
