#pragma once
// Recorded variant rankings, transferred to a new problem from its nearest recorded problems: the
// learned part of a family's heuristic (normalize_learned.cpp, dwconv_learned.cpp). A rankings
// document (written by bench/fit_learned_heuristic.py from exports of exhaustive tuning runs) holds,
// per recorded problem and GPU model, the time of every variant that ran within `cap` of that
// problem's winner, as a ratio to the winner. A family supplies the distance between its problems
// (infinite where two problems' spaces share nothing) and decides what to do with the ranking.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtune::tuner {

/// Octaves between two positive sizes: the unit of the families' distances between problems.
inline double octaves(double a, double b) { return std::fabs(std::log2(a / b)); }

template <class Problem>
struct RecordedRankings {
  struct Row {
    std::string key;
    std::string device;  // the GPU model the trials ran on
    Problem problem;
    nlohmann::json ratios;  // label -> time / the problem's winner time, for those within `cap`
  };
  double cap = 1.3;
  std::vector<Row> rows;

  /// The rows of `doc` whose keys `from_key` (key -> std::optional<Problem>) reads.
  template <class FromKey>
  static RecordedRankings parse(const nlohmann::json& doc, FromKey from_key) {
    RecordedRankings r;
    r.cap = doc.at("cap").get<double>();
    for (const auto& e : doc.at("problems")) {
      const std::string key = e.at("key").get<std::string>();
      if (auto p = from_key(key)) r.rows.push_back(Row{key, e.value("device", std::string()), *p, e.at("ratios")});
    }
    return r;
  }
};

/// The recorded rows nearest to a problem: (distance, row), nearest first.
template <class Problem>
struct Neighbours {
  std::vector<std::pair<double, const typename RecordedRankings<Problem>::Row*>> rows;
  double cap = 1.3;

  /// The mean log ratio over the neighbours of the label `label_at(row)` names at each (the same
  /// variant may carry another label at a neighbour of another size), weighted 1 / (1 + distance);
  /// a label absent at a neighbour (slower than the cap there, not in its space, or empty) counts as
  /// the cap.
  template <class LabelAt>
  double score_at(LabelAt label_at) const {
    const double absent = std::log(cap);
    double sum = 0, weights = 0;
    for (const auto& [d, row] : rows) {
      const double w = 1.0 / (1.0 + d);
      const std::string label = label_at(*row);
      const auto it = label.empty() ? row->ratios.end() : row->ratios.find(label);
      sum += w * (it != row->ratios.end() ? std::log(it->template get<double>()) : absent);
      weights += w;
    }
    return sum / weights;
  }
  /// The same for one label at every neighbour.
  double score(const std::string& label) const {
    return score_at([&](const typename RecordedRankings<Problem>::Row&) { return label; });
  }
  /// Up to `count` configs of `space` that `accept` takes, lowest score first (the first among
  /// equals), each with its score, its label at a neighbour `label_at(config, row)`; only those the
  /// neighbours saw within the cap somewhere (a lower score than the cap's).
  template <class Config, class Accept, class LabelAt>
  std::vector<std::pair<Config, double>> best_n(const std::vector<Config>& space, Accept accept, LabelAt label_at,
                                                int count) const {
    std::vector<std::pair<Config, double>> out;
    for (const Config& c : space) {
      if (!accept(c)) continue;
      const double s = score_at([&](const typename RecordedRankings<Problem>::Row& row) { return label_at(c, row); });
      if (s < std::log(cap) - 1e-12) out.emplace_back(c, s);  // else the rankings say nothing of it
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (out.size() > std::size_t(std::max(count, 0))) out.resize(std::size_t(std::max(count, 0)));
    return out;
  }
  /// The lowest-scoring config of `space` that `accept` takes (the first among equals) and its score,
  /// its label at a neighbour `label_at(config, row)`; nullopt where the neighbours saw none of them
  /// within the cap.
  template <class Config, class Accept, class LabelAt>
  std::optional<std::pair<Config, double>> best(const std::vector<Config>& space, Accept accept,
                                                LabelAt label_at) const {
    auto top = best_n(space, accept, label_at, 1);
    if (top.empty()) return std::nullopt;
    return std::move(top.front());
  }
  /// The same with each config's own label at every neighbour.
  template <class Config, class Accept>
  std::optional<std::pair<Config, double>> best(const std::vector<Config>& space, Accept accept) const {
    return best(space, accept, [](const Config& c, const typename RecordedRankings<Problem>::Row&) { return c.label(); });
  }
};

/// Up to `count` recorded rows nearest to `p` (`distance(p, row.problem)`; infinite: never a
/// neighbour), without the row keyed `exclude`; empty when the nearest is `reach` or farther.
/// Rankings move with the GPU model as much as with the shape (H100 and H200 share sm_90 but not
/// their memory systems): a model with any comparable row sees only its own rows; another model, or
/// an unknown one (empty), sees every model's.
template <class Problem, class Distance>
Neighbours<Problem> nearest(const Problem& p, const RecordedRankings<Problem>& data, const std::string& exclude,
                            const std::string& gpu_model, Distance distance, int count, double reach) {
  constexpr double kFar = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, const typename RecordedRankings<Problem>::Row*>> all;
  bool own = false;
  for (const auto& r : data.rows) {
    if (r.key == exclude) continue;
    const double d = distance(p, r.problem);
    if (d == kFar) continue;
    all.emplace_back(d, &r);
    own = own || (!gpu_model.empty() && r.device == gpu_model);
  }
  if (own)
    all.erase(std::remove_if(all.begin(), all.end(), [&](const auto& n) { return n.second->device != gpu_model; }),
              all.end());
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Neighbours<Problem> out;
  out.cap = data.cap;
  if (all.empty() || all.front().first >= reach) return out;
  all.resize(std::min<std::size_t>(all.size(), std::size_t(count)));
  out.rows = std::move(all);
  return out;
}

}  // namespace kvtune::tuner
