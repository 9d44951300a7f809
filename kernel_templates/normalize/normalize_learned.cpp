// The learned part of the normalize heuristic: variant rankings measured by exhaustive tuning runs
// (normalize_learned_<arch>.json, written by bench/fit_learned_heuristic.py; tuner/learned_rankings.h), transferred to a new
// problem from its nearest recorded problems. bench/NOTES.md ("a heuristic that learns from
// trials") has the fit, the held-out evaluation and why the parameters below are what they are.
#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/embedded.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "tuner/learned_rankings.h"

namespace kvtune::normalize {
namespace {

constexpr double kReach = 2.0;     // the nearest recorded problem must be closer than this
constexpr int kNeighbours = 4;     // recorded problems whose rankings are averaged
constexpr double kRowsWeight = 0.25;  // rows matter less than columns and element size
// Backward: less again, since a variant's row loop is read at a neighbour scaled to its rows (choose()).
// Held out on the H200's 24 recorded backward problems (2026-12-02): 0.25 gave each from the other 23
// 1.052x, 0.125 1.048x; the bench rows from the training rows 1.038x with either; 0.5 and up left
// 1024-row problems without a neighbour in reach.
constexpr double kBackwardRowsWeight = 0.125;
constexpr double kFlagWeight = 0.5;   // backward: each of gamma, dgamma, dbeta, saved statistics, dresidual

// Distance between problems of one direction in the units the rankings change with: octaves of
// columns, of the element size and (a quarter; an eighth between backward problems) of rows, half
// an octave for another mode and, between backward problems, half an octave for each optional
// tensor one has and the other lacks (they decide the reductions a row does and whether
// dgamma/dbeta partials are written). Problems of different directions are never neighbours
// (infinite distance): their spaces share no kernel.
double distance(const Problem& a, const Problem& b) {
  if (a.backward != b.backward) return std::numeric_limits<double>::infinity();
  const double flags = a.backward ? kFlagWeight * ((a.gamma != b.gamma) + (a.dgamma != b.dgamma) + (a.dbeta != b.dbeta) +
                                                   (a.saved_stats != b.saved_stats) + (a.dresidual != b.dresidual))
                                  : 0.0;
  using tuner::octaves;
  const double rows_weight = a.backward ? kBackwardRowsWeight : kRowsWeight;
  return octaves(double(a.cols), double(b.cols)) + rows_weight * octaves(double(a.rows), double(b.rows)) +
         octaves(a.element_bytes(), b.element_bytes()) + (a.mode != b.mode ? 0.5 : 0.0) + flags;
}

using Rankings = tuner::RecordedRankings<Problem>;

Rankings parse(const nlohmann::json& doc) { return Rankings::parse(doc, problem_from_key); }

const Rankings* shipped(int cc_major) {
  if (cc_major != 9) return nullptr;  // recorded: sm_90 (H200 forward 2026-11-22, backward 2026-12-01; H100 forward 2026-11-27)
  static const Rankings data = parse(nlohmann::json::parse(embedded::normalize_learned_sm90_json));
  return &data;
}

// Up to `count` variants, best transferred score first.
std::vector<Config> choose(const Problem& p, const Rankings& data, const std::string& exclude,
                           const std::string& gpu_model, int count) {
  const auto near = tuner::nearest(p, data, exclude, gpu_model, distance, kNeighbours, kReach);
  if (near.rows.empty()) return {};
  const std::vector<Config> space = enumerate(p);
  const auto accept = [&](const Config& c) {
    // One-block rows; the backward's cooperative dgamma/dbeta sums too (their launch takes at most
    // the co-resident blocks, so they run wherever the device has cooperative launches, as sm_90 has).
    if (c.splits != 1 || (c.cooperative && !p.backward)) return false;
    return &c != &space.front() || is_valid(p, c);  // the seed leads, runnable but perhaps not valid
  };
  // A variant is read at a neighbour of another width as the same work a thread and the same block:
  // threads per row scaled by the width ratio (rounded to a power of two), rows per block by its
  // inverse; where that is no variant, the neighbour counts as the cap. Held out on the recorded
  // trials this took H200 forward 1.056 -> 1.039x, H100 1.059 -> 1.046x, backward 1.089 -> 1.041x
  // (each problem from the others) against reading the same label everywhere (bench/NOTES.md).
  // The backward's row loop likewise, as the same number of row chunks (blocks, or a cooperative
  // block's loop trips): scaled by the ratio of rows and of rows per block, to the nearest of the
  // space's loops (1, 4, ..., 256). Reading the label unchanged took a 16384-row neighbour's loop of
  // 16 to 4096 rows, 128 chunks for 132 SMs: 1.67x (H200, 2026-12-02, bench/NOTES.md).
  const auto label_at = [&](const Config& c, const Rankings::Row& row) -> std::string {
    const int octaves = static_cast<int>(std::lround(std::log2(double(row.problem.cols) / double(p.cols))));
    Config at = c;
    if (octaves != 0) {
      const double scale = std::ldexp(1.0, octaves);
      const double tpr = c.threads_per_row * scale, rpb = c.rows_per_block / scale;
      if (tpr < 1 || tpr > 1024 || rpb < 1 || tpr != std::floor(tpr) || rpb != std::floor(rpb)) return {};
      at.threads_per_row = static_cast<int>(tpr);
      at.rows_per_block = static_cast<int>(rpb);
    }
    if (p.backward && (p.dgamma || p.dbeta)) {  // (row loops exist only where partial rows are written)
      const double loop = c.row_loop * (double(row.problem.rows) / double(p.rows)) *
                          (double(c.rows_per_block) / double(at.rows_per_block));
      const long quarters = std::lround(std::log2(std::max(loop, 1.0)) / 2);  // octaves of 4
      at.row_loop = 1 << (2 * std::min(quarters, 4L));
    }
    return at.label();
  };
  std::vector<Config> out;
  for (auto& [c, score] : near.best_n(space, accept, label_at, count)) out.push_back(std::move(c));
  return out;
}

std::optional<Config> first(std::vector<Config> v) {
  if (v.empty()) return std::nullopt;
  return std::move(v.front());
}

}  // namespace

std::optional<Config> learned_config(const Problem& p, int cc_major, const std::string& gpu_model) {
  return first(learned_configs(p, cc_major, gpu_model, 1));
}

std::optional<Config> learned_config(const Problem& p, const nlohmann::json& data, const std::string& exclude,
                                     const std::string& gpu_model) {
  return first(learned_configs(p, data, exclude, gpu_model, 1));
}

std::vector<Config> learned_configs(const Problem& p, int cc_major, const std::string& gpu_model, int count) {
  const Rankings* data = shipped(cc_major);
  return data != nullptr ? choose(p, *data, "", gpu_model, count) : std::vector<Config>{};
}

std::vector<Config> learned_configs(const Problem& p, const nlohmann::json& data, const std::string& exclude,
                                    const std::string& gpu_model, int count) {
  return choose(p, parse(data), exclude, gpu_model, count);
}

}  // namespace kvtune::normalize
