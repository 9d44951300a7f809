// The learned part of the dwconv heuristic: variant rankings measured by exhaustive tuning runs
// (dwconv_learned_<arch>.json, written by bench/fit_learned_heuristic.py --op dwconv;
// tuner/learned_rankings.h), transferred to a new problem from its nearest recorded problems and
// taken only where they say the analytic rule is slower by a margin. bench/NOTES.md ("the dwconv
// heuristic learns") has the fit, the held-out evaluation and why the parameters are what they are.
#include <cmath>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/embedded.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "tuner/learned_rankings.h"

namespace kvtune::dwconv {
namespace {

constexpr double kReach = 2.0;        // the nearest recorded problem must be closer than this
constexpr int kNeighbours = 4;        // recorded problems whose rankings are averaged
constexpr double kSizeWeight = 0.25;  // octaves of positions, channels and batch matter less than taps
constexpr double kFlagWeight = 0.5;   // bias, activation, gradient prep, deterministic
// The learned variant replaces the rule only where its mean log ratio is lower by more than this:
// the rule carries the exhaustive winners' shapes and falls back sensibly, the rankings are
// one measurement each. Held out on the recorded trials (tests/test_heuristic_trials.cpp), with the
// rule as it was before the corrections of 2026-12-01 (bench/NOTES.md, "ragged rows"), margins of 0,
// 0.02, 0.05, 0.1 and 0.2 gave 1.122, 1.085, 1.062, 1.029 and 1.052 on the bench rows (that rule
// 1.052): 0.1 is chosen on those numbers, so they are not quite held out.
constexpr double kMargin = 0.1;

// Distance between problems in the units the rankings change with: octaves of taps, of stride and
// dilation on each axis and of the element size, a quarter per octave of output-plane positions,
// channels and batch, and a half for each option one has and the other lacks. Problems of another
// direction or layout are never neighbours: their spaces share no kernel. Nor are problems with and
// without seq_idx: its masking reshapes the inner loop, and the rankings do not carry over (H200,
// 2026-12-02: the mamba-train rows with seq_idx took their non-seq_idx neighbours' runs of 4 and
// ran 1.11x and 1.37x their tuned winners, which are the rule's choices; bench/NOTES.md).
double distance(const Problem& a, const Problem& b) {
  if (a.direction != b.direction || a.layout != b.layout || a.seq_idx != b.seq_idx)
    return std::numeric_limits<double>::infinity();
  using tuner::octaves;
  const int flags = (a.bias != b.bias) + (a.activation != b.activation) + (a.gradient_prep != b.gradient_prep) +
                    (a.deterministic != b.deterministic);
  return octaves(double(a.kh) * a.kw, double(b.kh) * b.kw) + octaves(a.sh, b.sh) + octaves(a.sw, b.sw) +
         octaves(a.dh, b.dh) + octaves(a.dw, b.dw) + octaves(a.element_bytes(), b.element_bytes()) +
         kSizeWeight * (octaves(double(a.h) * double(a.w), double(b.h) * double(b.w)) + octaves(double(a.c), double(b.c)) +
                        octaves(double(a.n), double(b.n))) +
         kFlagWeight * flags;
}

using Rankings = tuner::RecordedRankings<Problem>;

Rankings parse(const nlohmann::json& doc) { return Rankings::parse(doc, problem_from_key); }

const Rankings* shipped(int cc_major) {
  if (cc_major != 9) return nullptr;  // recorded: sm_90 (H200, 2026-12-01)
  static const Rankings data = parse(nlohmann::json::parse(embedded::dwconv_learned_sm90_json));
  return &data;
}

std::optional<Config> choose(const Problem& p, const Config& rule, const Rankings& data, const std::string& exclude,
                             const std::string& gpu_model) {
  const auto near = tuner::nearest(p, data, exclude, gpu_model, distance, kNeighbours, kReach);
  if (near.rows.empty()) return std::nullopt;
  const auto best = near.best(enumerate(p), [&](const Config& c) { return is_valid(p, c); });
  if (!best || best->first == rule || best->second >= near.score(rule.label()) - kMargin) return std::nullopt;
  return best->first;
}

// Up to `count` variants by their transferred scores alone (no margin against the rule).
std::vector<Config> ranked(const Problem& p, const Rankings& data, const std::string& exclude,
                           const std::string& gpu_model, int count) {
  const auto near = tuner::nearest(p, data, exclude, gpu_model, distance, kNeighbours, kReach);
  if (near.rows.empty()) return {};
  std::vector<Config> out;
  const auto accept = [&](const Config& c) { return is_valid(p, c); };
  const auto own_label = [](const Config& c, const Rankings::Row&) { return c.label(); };
  for (auto& [c, score] : near.best_n(enumerate(p), accept, own_label, count)) out.push_back(std::move(c));
  return out;
}

}  // namespace

std::vector<Config> learned_configs(const Problem& p, int cc_major, const std::string& gpu_model, int count) {
  const Rankings* data = shipped(cc_major);
  return data != nullptr ? ranked(p, *data, "", gpu_model, count) : std::vector<Config>{};
}

std::vector<Config> learned_configs(const Problem& p, const nlohmann::json& data, const std::string& exclude,
                                    const std::string& gpu_model, int count) {
  return ranked(p, parse(data), exclude, gpu_model, count);
}

std::optional<Config> learned_config(const Problem& p, const Config& rule, int cc_major, const std::string& gpu_model) {
  const Rankings* data = shipped(cc_major);
  return data != nullptr ? choose(p, rule, *data, "", gpu_model) : std::nullopt;
}

std::optional<Config> learned_config(const Problem& p, const Config& rule, const nlohmann::json& data,
                                     const std::string& exclude, const std::string& gpu_model) {
  return choose(p, rule, parse(data), exclude, gpu_model);
}

}  // namespace kvtune::dwconv
