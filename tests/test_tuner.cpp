// CPU tests of the production tuner's pieces: batch buckets, key decoding, the candidate choice
// of a budgeted search, and the budgeted search replayed on recorded exhaustive trials of an H200
// (tests/data/trials/2026-11-22-h200-exhaustive): does the cost model's choice contain a variant
// within 3 % of the exhaustive winner, at what share of the candidates?
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "env_guard.h"
#include "core/buckets.h"
#include "core/parallel.h"
#include "lib/src/dispatch_table.h"
#include "lib/src/families.h"
#include "tuner/harness_support.h"
#include "tuner/tuner.h"

using namespace kvtune;

TEST_CASE("buckets: powers of two, exact, explicit bounds, bad specs name the field", "[tuner]") {
  const detail::Buckets pow2;
  CHECK(pow2.bucket(1) == 1);
  CHECK(pow2.bucket(1000) == 1024);
  CHECK(pow2.bucket(1024) == 1024);
  CHECK(pow2.spec() == "pow2");
  const auto exact = detail::Buckets::parse("exact");
  CHECK(exact.exact());
  CHECK(exact.bucket(1000) == 1000);
  const auto list = detail::Buckets::parse("1,8,64,512");
  CHECK(list.bucket(1) == 1);
  CHECK(list.bucket(2) == 8);
  CHECK(list.bucket(64) == 64);
  CHECK(list.bucket(65) == 512);
  CHECK(list.bucket(513) == 1024);  // beyond the last bound: powers of two
  CHECK(list.spec() == "1,8,64,512");
  // A stream of 1000 different batch sizes tunes a dozen buckets.
  std::set<std::int64_t> seen;
  for (std::int64_t rows = 1; rows <= 1000; ++rows) seen.insert(pow2.bucket(rows * 7));
  CHECK(seen.size() <= 14);
  for (const char* bad : {"", "8,1", "1,,8", "0,4", "x", "1.5", "-4"}) {
    if (std::string(bad).empty()) continue;  // "" means the default
    try {
      detail::Buckets::parse(bad, "KVTUNE_BUCKETS");
      FAIL("accepted " << bad);
    } catch (const Error& e) {
      CHECK(e.context().field == "KVTUNE_BUCKETS");
    }
  }
}

TEST_CASE("problem keys decode back to the same problem (bucketed and exact)", "[tuner]") {
  NormalizeArgs a;
  a.rows = 1000, a.cols = 37, a.dtype = DType::bf16, a.mode = NormMode::layernorm;
  a.x = reinterpret_cast<const void*>(0x10000), a.y = reinterpret_cast<void*>(0x20000);
  a.gamma = reinterpret_cast<const void*>(0x30000);
  for (const char* spec : {"pow2", "exact", "1,8,4096"}) {
    const auto p = normalize::make_problem(a, detail::Buckets::parse(spec));
    const auto back = normalize::problem_from_key(p.key());
    REQUIRE(back);
    CHECK(*back == p);
    CHECK(back->key() == p.key());
  }
  CHECK(normalize::make_problem(a, detail::Buckets::parse("exact")).key().find("rows=1000,") != std::string::npos);
  DwConvArgs d;
  d.direction = DwDirection::backward_weight, d.layout = DwLayout::nhwc, d.dtype = DType::f16;
  d.n = 3, d.c = 64, d.h = 14, d.w = 14, d.kernel_h = d.kernel_w = 3, d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
  dwconv::set_placeholders(d, true);
  for (const char* spec : {"pow2", "exact"}) {
    const auto p = dwconv::make_problem(d, detail::Buckets::parse(spec));
    const auto back = dwconv::problem_from_key(p.key());
    REQUIRE(back);
    CHECK(*back == p);
  }
  for (const char* bad : {"", "normalize", "normalize,f32,layernorm,cols=0,rows<=8,align=16,affine=,stats=",
                          "normalize,f32,layernorm,cols=8,rows<=8,align=16,affine=,stats=,x",
                          "normalize,f99,layernorm,cols=8,rows<=8,align=16,affine=,stats=",
                          "dwconv,forward,nchw,f32,n<=3,c=4,h=4,w=4,k=3x3,s=1x1,d=1x1,pad=1,1,1,1,bias=0,det=1,align=16"}) {
    CHECK_FALSE(normalize::problem_from_key(bad));
    CHECK_FALSE(dwconv::problem_from_key(bad));
  }
}

namespace {

std::vector<tuner::Candidate> fake_candidates(int n) {
  std::vector<tuner::Candidate> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    out[std::size_t(i)].index = i;
    out[std::size_t(i)].label = fmt::format("v{}", i);
    out[std::size_t(i)].predicted_seconds = double((i * 7919) % n);  // a permutation of 0..n-1
  }
  return out;
}

}  // namespace

TEST_CASE("choose: exhaustive when the space fits, else required + model's best + seeded exploration", "[tuner]") {
  const auto candidates = fake_candidates(100);
  tuner::Options o;
  CHECK(tuner::choose(candidates, o).size() == 100);  // no budget
  o.budget_variants = 40;
  CHECK(tuner::choose(candidates, o).size() == 25);   // a quarter of the space, under the budget
  o.budget_fraction = 1.0;
  o.budget_variants = 100;
  CHECK(tuner::choose(candidates, o).size() == 100);  // the space fits
  CHECK(tuner::choose(fake_candidates(10), o).size() == 10);
  o.budget_fraction = 0.25;
  CHECK(tuner::choose(fake_candidates(30), o).size() == 12);  // never below min_variants
  o.budget_variants = 20;
  o.explore = 0.25;
  o.required = {3, 97};
  o.seed = 42;
  const auto chosen = tuner::choose(candidates, o);
  REQUIRE(chosen.size() == 20);
  const std::set<int> set(chosen.begin(), chosen.end());
  CHECK(set.size() == 20);
  CHECK(set.count(3) == 1);
  CHECK(set.count(97) == 1);
  // The 13 best predicted (15 exploited minus the 2 required) are all in.
  int best_in = 0;
  for (int i : chosen)
    if (candidates[std::size_t(i)].predicted_seconds < 13) ++best_in;
  CHECK(best_in >= 13);
  // Sorted by prediction, and reproducible for a seed.
  for (std::size_t k = 1; k < chosen.size(); ++k)
    CHECK(candidates[std::size_t(chosen[k - 1])].predicted_seconds <= candidates[std::size_t(chosen[k])].predicted_seconds);
  CHECK(tuner::choose(candidates, o) == chosen);
  o.seed = 43;
  CHECK(tuner::choose(candidates, o) != chosen);  // exploration differs
  // Preferred candidates (the learned picks) come after the required ones, in order, within the
  // exploited share (15 of 20 here), before the cost model's best; never beyond the budget.
  o.preferred = {90, 80, 70};
  const auto preferred = tuner::choose(candidates, o);
  const std::set<int> with(preferred.begin(), preferred.end());
  CHECK(preferred.size() == 20);
  CHECK((with.count(90) && with.count(80) && with.count(70) && with.count(3) && with.count(97)));
  o.preferred = {90, 80, 70, 60, 50, 40, 30, 20, 10, 99, 98, 96, 95, 94, 93, 92};  // more than 15 - 2
  const auto capped = tuner::choose(candidates, o);
  const std::set<int> in(capped.begin(), capped.end());
  CHECK(capped.size() == 20);
  for (int i : {3, 97, 90, 80, 70, 60, 50, 40, 30, 20, 10, 99, 98, 96, 95}) CHECK(in.count(i) == 1);  // the first 13 preferred
  int model_best = 0;
  for (int i : capped)
    if (candidates[std::size_t(i)].predicted_seconds < 13) ++model_best;
  CHECK(model_best < 13);  // the cost model's share went to the preferred
}

namespace {

struct Replay {
  int problems = 0, hits = 0;
  double chosen = 0, total = 0;
  std::vector<std::string> misses;
  std::vector<std::string> ranks;  // per problem: where the cost model ranks the measured winner
};

// The variants a replayed search times first (the heuristic's, then the learned picks); empty: those
// Context::tune adds, from the shipped tables (in-sample where they were fitted on the replayed
// trials).
template <class F>
using Picks = std::function<std::vector<typename F::Config>(const typename F::Problem&)>;

// Replays the default budgeted search of family F on recorded exhaustive trials.
template <class F>
void replay(const nlohmann::json& entry, int budget, Replay& r, double copy_bytes_per_s = 4.24e12,
            const Picks<F>& picks = {}) {
  const auto problem = F::from_key(entry.at("problem_key").get<std::string>());
  REQUIRE(problem);
  std::map<std::string, double> measured;
  for (const auto& t : entry.at("trials"))
    if (t.at("status") == "ok") measured[t.at("label").get<std::string>()] = t.at("median_ms").get<double>();
  // The trials predate later additions to the space (dwconv rows per thread, runs of 8 for 1D
  // channel-last, weight gradients by kernel row): replay the search over the variants they measured.
  auto configs = detail::tuning_configs<F>(*problem, 9);  // as Context::tune
  {
    const auto all = F::candidates(*problem, configs, "sm_90");
    decltype(configs) recorded;
    for (std::size_t i = 0; i < configs.size(); ++i)
      if (measured.count(all[i].label)) recorded.push_back(configs[i]);
    configs = recorded;
  }
  auto candidates = F::candidates(*problem, configs, "sm_90");
  constexpr int kSms = 132;  // H200 and H100 SXM
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].predicted_seconds = F::predicted_seconds(*problem, configs[i], kSms, copy_bytes_per_s);
  tuner::Options o;
  o.budget_variants = budget;
  o.seed = std::hash<std::string>{}(problem->key());
  // The heuristic is required, the learned picks preferred (as Context::tune).
  std::vector<typename F::Config> always;
  if (picks) {
    always = picks(*problem);
  } else {
    always = F::learned_picks(*problem, 9, "", tuner::kLearnedPicks);
    always.insert(always.begin(), F::heuristic(*problem, 9));
  }
  for (std::size_t k = 0; k < always.size(); ++k)
    for (std::size_t i = 0; i < configs.size(); ++i)
      if (configs[i] == always[k]) (k == 0 ? o.required : o.preferred).push_back(int(i));
  const auto chosen = tuner::choose(candidates, o);
  double best = 1e30, got = 1e30;
  std::string winner;
  for (const auto& [label, ms] : measured)
    if (ms < best) best = ms, winner = label;
  const auto winner_at = std::find_if(candidates.begin(), candidates.end(), [&](const auto& x) { return x.label == winner; });
  REQUIRE(winner_at != candidates.end());
  const auto rank = std::count_if(candidates.begin(), candidates.end(), [&](const auto& x) {
    return x.predicted_seconds < winner_at->predicted_seconds;
  });
  r.ranks.push_back(fmt::format("{} {}/{}", problem->key().substr(0, 40), rank + 1, candidates.size()));
  for (int i : chosen)
    if (auto it = measured.find(candidates[std::size_t(i)].label); it != measured.end()) got = std::min(got, it->second);
  ++r.problems;
  r.chosen += double(chosen.size());
  r.total += double(candidates.size());
  if (got <= best * 1.03) ++r.hits;
  else r.misses.push_back(fmt::format("{}: {:.1f}% slower", problem->key(), (got / best - 1) * 100));
}

// Replays entry `e` with the registered family (lib/src/families.h) its op names; an op that no
// family registers fails the test.
template <class... F>
void replay_registered(std::tuple<F...>*, const nlohmann::json& e, int budget, std::map<std::string, Replay>& by_op) {
  const std::string op = e.at("op").get<std::string>();
  const bool registered = ((op == F::kOp ? (replay<F>(e, budget, by_op[op]), true) : false) || ...);
  INFO(op);
  REQUIRE(registered);
}

}  // namespace

TEST_CASE("budgeted search on recorded H200 trials: within 3% of the exhaustive winner on >= 90%", "[tuner]") {
  // The suites of the tuner's targets (2026-11-22). Normalize's kernels are still those; the dwconv
  // kernels these trials timed were replaced since (rows per thread, vectors, the halo exchange,
  // pipelined rows, runs per thread), and the dwconv cost models were refit on the trials of the
  // kernels as built: dwconv is held to the next test's trials, and only reported here (46/48 with
  // the models fitted on these trials, 42/48 with the refit ones).
  std::ifstream in(std::string(KVTUNE_SOURCE_DIR) + "/tests/data/trials/2026-11-22-h200-exhaustive/export.json");
  REQUIRE(in);
  const auto doc = nlohmann::json::parse(in);
  const int budget = ContextOptions{}.budget_variants;
  std::map<std::string, Replay> by_op;
  for (const auto& e : doc.at("entries")) replay_registered(static_cast<detail::Families*>(nullptr), e, budget, by_op);
  CHECK(by_op.size() == 2);  // the recorded trials hold normalize and dwconv entries
  const Replay& norm = by_op["normalize"];
  const Replay& dw = by_op["dwconv"];
  const int problems = norm.problems + dw.problems;
  const int hits = norm.hits + dw.hits;
  const double share = (norm.chosen + dw.chosen) / (norm.total + dw.total);
  std::vector<std::string> misses = norm.misses;
  misses.insert(misses.end(), dw.misses.begin(), dw.misses.end());
  WARN(fmt::format("budget {}: normalize {}/{} within 3% ({:.0f}% of the variants), dwconv {}/{} ({:.0f}%); all {}/{} "
                   "({:.0f}% of the variants); misses: {}",
                   budget, norm.hits, norm.problems, 100 * norm.chosen / norm.total, dw.hits, dw.problems,
                   100 * dw.chosen / dw.total, hits, problems, 100 * share, fmt::join(misses, "; ")));
  CHECK(problems == 48);
  CHECK(norm.hits >= 0.9 * norm.problems);
  CHECK(share <= 0.30);
}

TEST_CASE("budgeted search on the latest exhaustive H200 dwconv trials: within 3% on >= 90%", "[tuner]") {
  // The newest exhaustive run of each problem whose trials time the kernels as they are now (each
  // folder's README says which commit): 2D channel-first with the halo exchange; 1D channel-first
  // with runs per thread and 1D channel-last with runs of 16 and 32 (their carried-window variants,
  // since taken out, are not in the space and drop out); 2D channel-last with the flat mapping, the
  // 31x31 with runs of 16; weight gradients with pipelined rows up to 32 taps, one buffer above.
  const std::string dir = std::string(KVTUNE_SOURCE_DIR) + "/tests/data/trials/";
  struct Source {
    const char* file;
    std::function<bool(const dwconv::Problem&)> take;
  };
  const auto taps = [](const dwconv::Problem& p) { return p.kh * p.kw; };
  const auto weights = [](const dwconv::Problem& p) { return p.direction == DwDirection::backward_weight; };
  const Source sources[] = {
      {"2026-11-23-h200-halo-exchange/export.json", [](const dwconv::Problem& p) { return p.layout == DwLayout::nchw; }},
      {"2026-11-25-h100-runs-per-thread/h200-second/export.json", [](const dwconv::Problem&) { return true; }},
      {"2026-11-23-h200-channel-last-flat/first/export.json", [](const dwconv::Problem& p) { return p.layout == DwLayout::nhwc; }},
      {"2026-11-25-h200-bench/tune-31x31-runs-of-16/export.json", [](const dwconv::Problem&) { return true; }},
      {"2026-11-23-h200-pipelined-rows/export.json", [&](const dwconv::Problem& p) { return weights(p) && taps(p) <= 32; }},
      {"2026-11-23-h200-wgrad-vectors/export.json", [&](const dwconv::Problem& p) { return weights(p) && taps(p) > 32; }}};
  Replay dw;
  for (const auto& source : sources) {
    std::ifstream in(dir + source.file);
    REQUIRE(in);
    const auto doc = nlohmann::json::parse(in);
    for (const auto& e : doc.at("entries")) {
      const auto problem = dwconv::problem_from_key(e.at("problem_key").get<std::string>());
      REQUIRE(problem);
      if (e.at("trials").size() > 8 && source.take(*problem)) replay<detail::DwConvFamily>(e, ContextOptions{}.budget_variants, dw);
    }
  }
  WARN(fmt::format("dwconv {}/{} within 3%; misses: {}; the cost model's rank of each winner: {}", dw.hits,
                   dw.problems, fmt::join(dw.misses, "; "), fmt::join(dw.ranks, "; ")));
  CHECK(dw.problems == 20);
  CHECK(dw.hits >= 0.9 * dw.problems);
}

TEST_CASE("budgeted search on the recorded H200 normalize backward trials: within 3% on 20 of 24", "[tuner]") {
  // The 24 backward problems recorded exhaustively (2026-12-04-h200-backward-exhaustive: 18 training
  // shapes and kvtune-bench's 6 rows, in one sitting; first recorded 2026-12-02 after the backward
  // kept gamma in registers). The heuristic the search always times is the learned one, fitted on
  // these very trials: in-sample. On the 2026-12-02 recording, with the heuristic alone the target
  // (>= 90 % of the problems within 3 %) was missed: 20 of 24, the misses 3.3-5.4 %; the search now
  // also times the table's 8 best (learned_picks): 23 of 24 on the 2026-12-04 recording (held out,
  // 22 of 24: the next case). This case holds the line where it was.
  const std::string dir = std::string(KVTUNE_SOURCE_DIR) + "/tests/data/trials/2026-12-04-h200-backward-exhaustive/";
  Replay norm;
  for (const char* file : {"export-bench.json", "export-train-shard0.json", "export-train-shard1.json"}) {
    std::ifstream in(dir + file);
    REQUIRE(in);
    const auto doc = nlohmann::json::parse(in);
    for (const auto& e : doc.at("entries")) replay<detail::NormalizeFamily>(e, ContextOptions{}.budget_variants, norm);
  }
  WARN(fmt::format("normalize backward {}/{} within 3% ({:.0f}% of the variants); misses: {}", norm.hits, norm.problems,
                   100 * norm.chosen / norm.total, fmt::join(norm.misses, "; ")));
  CHECK(norm.problems == 24);
  CHECK(norm.hits >= 20);
}

TEST_CASE("budgeted search on the recorded H200 cluster-row trials: within 3% on 5 of 6", "[tuner]") {
  // Six forward problems of rows from 256 KiB to 1 MiB (bench/examples/normalize_cluster_rows.json),
  // recorded exhaustively with the split rows' one-pass cluster form in the space
  // (2026-12-03-h200-cluster-rows). On the GPU the first cluster cost model's ranking pushed
  // 1024 x 131072 bf16 layernorm's phased winner out of the budget: 310.9 against 255.6 us (here
  // 22 % slower). With the model fitted on these trials that problem misses by 6.7 %, as it does
  // with every cluster variant ranked last: its phased twins are all predicted alike (230 us), and
  // the search times the winner's neighbours, not it.
  std::ifstream in(std::string(KVTUNE_SOURCE_DIR) + "/tests/data/trials/2026-12-03-h200-cluster-rows/export.json");
  REQUIRE(in);
  const auto doc = nlohmann::json::parse(in);
  Replay norm;
  for (const auto& e : doc.at("entries")) replay<detail::NormalizeFamily>(e, ContextOptions{}.budget_variants, norm);
  WARN(fmt::format("cluster rows {}/{} within 3% ({:.0f}% of the variants); misses: {}; the cost model's rank of each "
                   "winner: {}",
                   norm.hits, norm.problems, 100 * norm.chosen / norm.total, fmt::join(norm.misses, "; "),
                   fmt::join(norm.ranks, "; ")));
  CHECK(norm.problems == 6);
  CHECK(norm.hits >= 5);
}

namespace {

// The search's always-timed picks for a recorded problem as Context::tune makes them (the
// heuristic, then learned_picks), with the problem's own row left out of the learned tables: held
// out, where the shipped tables were fitted on the replayed trials. `count` learned picks (0: the
// heuristic alone). The analytic rule is the heuristic on an architecture without tables (cc 8).
template <class F>
std::vector<typename F::Config> held_out_picks(const typename F::Problem& p, const nlohmann::json& table,
                                               const std::string& model, int count) {
  const std::string key = p.key();
  const typename F::Config rule = F::heuristic(p, 8);
  std::vector<typename F::Config> out;
  if constexpr (std::is_same_v<F, detail::NormalizeFamily>) {
    const auto learned = normalize::learned_config(p, table, key, model);
    // (outside the one-block space the heuristic is the split rule's, which the table never overrides)
    const bool one_block = F::heuristic(p, 9, model).splits == 1;
    out.push_back(learned && one_block ? *learned : rule);
    if (one_block)
      for (auto& c : normalize::learned_configs(p, table, key, model, count)) out.push_back(std::move(c));
  } else {
    const auto learned = dwconv::learned_config(p, rule, table, key, model);
    out.push_back(learned ? *learned : rule);
    for (auto& c : dwconv::learned_configs(p, table, key, model, count)) out.push_back(std::move(c));
  }
  return out;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(std::string(KVTUNE_SOURCE_DIR) + "/" + path);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("budgeted search with the learned picks, held out: within 3% on more problems", "[tuner]") {
  // Every recorded exhaustive run the shipped tables were fitted on, replayed with each problem's
  // own row out of the tables, with and without tuner::kLearnedPicks learned picks besides the
  // heuristic (bench/NOTES.md, 2026-12-02 evening).
  const char* norm_table = "kernel_templates/normalize/normalize_learned_sm90.json";
  const char* dw_table = "kernel_templates/dwconv/dwconv_learned_sm90.json";
  const std::string h200 = "NVIDIA H200", h100 = "NVIDIA H100 80GB HBM3";
  const std::string b = "tests/data/trials/2026-12-04-h200-backward-exhaustive/";
  const std::string d = "tests/data/trials/2026-12-01-h200-dwconv-exhaustive/";
  // The NHWC rows re-recorded with the shape constants (the 2026-12-01 exports' NHWC rows, of the
  // kernels before them, are skipped: a dwconv problem replays from its first source, as the table's
  // fit takes it).
  const std::string n = "tests/data/trials/2026-12-03-h200-nhwc-shape-constants/";
  std::set<std::string> replayed;
  const std::string a = "tests/data/trials/2026-11-27-h100-affine-narrow/";
  const std::vector<std::tuple<std::string, std::string, std::string, double>> sources = {
      {norm_table, "tests/data/trials/2026-11-22-h200-exhaustive/export.json", h200, 4.24e12},
      {norm_table, a + "export-recorded.json", h100, 3.0e12},
      {norm_table, a + "export-affine.json", h100, 3.0e12},
      {norm_table, b + "export-bench.json", h200, 4.24e12},
      {norm_table, b + "export-train-shard0.json", h200, 4.24e12},
      {norm_table, b + "export-train-shard1.json", h200, 4.24e12},
      {dw_table, n + "export-nhwc-bench.json", h200, 4.24e12},
      {dw_table, n + "export-nhwc-train.json", h200, 4.24e12},
      {dw_table, d + "export-bench.json", h200, 4.24e12},
      {dw_table, d + "export-train-shard0.json", h200, 4.24e12},
      {dw_table, d + "export-train-shard1.json", h200, 4.24e12},
      {dw_table, d + "export-train-shard2.json", h200, 4.24e12}};
  std::map<std::string, nlohmann::json> tables;
  std::map<int, std::map<std::string, Replay>> by_count;  // learned picks -> "normalize" / "normalize backward" / "dwconv"
  for (const auto& source : sources) {
    // (named copies: a lambda cannot capture a structured binding in C++17)
    const std::string table = std::get<0>(source), file = std::get<1>(source), model = std::get<2>(source);
    const double copy = std::get<3>(source);
    if (!tables.count(table)) tables[table] = read_json(table);
    const auto doc = read_json(file);
    for (const auto& e : doc.at("entries")) {
      const std::string op = e.at("op").get<std::string>();
      if (e.at("trials").size() <= 8) continue;  // (budgeted runs: nothing to replay)
      if (table == dw_table && !replayed.insert(e.at("problem_key").get<std::string>()).second) continue;
      for (int count : {0, tuner::kLearnedPicks}) {
        if (op == "normalize") {
          const auto p = normalize::problem_from_key(e.at("problem_key").get<std::string>());
          REQUIRE(p);
          const Picks<detail::NormalizeFamily> picks = [&](const normalize::Problem& q) {
            return held_out_picks<detail::NormalizeFamily>(q, tables[table], model, count);
          };
          replay<detail::NormalizeFamily>(e, ContextOptions{}.budget_variants,
                                          by_count[count][p->backward ? "normalize backward" : "normalize"], copy, picks);
        } else if (op == "dwconv") {
          const Picks<detail::DwConvFamily> picks = [&](const dwconv::Problem& q) {
            return held_out_picks<detail::DwConvFamily>(q, tables[table], model, count);
          };
          replay<detail::DwConvFamily>(e, ContextOptions{}.budget_variants, by_count[count]["dwconv"], copy, picks);
        }
      }
    }
  }
  for (const char* op : {"normalize", "normalize backward", "dwconv"}) {
    const Replay& without = by_count[0][op];
    const Replay& with = by_count[tuner::kLearnedPicks][op];
    INFO(op);
    WARN(fmt::format("{}, held out: heuristic alone {}/{} within 3% ({:.0f}% of the variants), with {} learned picks "
                     "{}/{} ({:.0f}%); misses with: {}",
                     op, without.hits, without.problems, 100 * without.chosen / without.total, tuner::kLearnedPicks,
                     with.hits, with.problems, 100 * with.chosen / with.total, fmt::join(with.misses, "; ")));
    CHECK(with.problems == without.problems);
    CHECK(with.problems > 0);
    CHECK(with.hits >= without.hits);
  }
  // When written (8 picks): normalize 57/57 (heuristic alone 56), backward 21/24 (18), dwconv 96/104
  // (93): 174 of 185, 94 %, against 167 (90 %) with the heuristic alone. With the backward rows
  // recorded again (2026-12-04): backward 22/24 with and without the picks, 175 of 185.
  int hits = 0, problems = 0;
  for (const auto& [op, r] : by_count[tuner::kLearnedPicks]) hits += r.hits, problems += r.problems;
  CHECK(problems == 185);
  CHECK(hits >= 0.9 * problems);
}

TEST_CASE("budgeted search on exhaustive H100 trials (flat items, staged tiles): within 3% on >= 90%", "[tuner]") {
  // Ten channel-first 2D problems timed with flat items in the space (H100, copy ~3.0 TB/s): the two
  // 56 x 56 suites' and six more planes of 14 to 128 (tests/data/trials/*-h100-flat-items, -flat-heuristic);
  // the benchmark's five channel-last forward problems with staged tiles (-staged-channel-last; the
  // K=31 one twice: before and after runs of 16 and 32 joined the staged tiles).
  const std::string dir = std::string(KVTUNE_SOURCE_DIR) + "/tests/data/trials/";
  Replay dw;
  for (const char* file : {"2026-11-25-h100-flat-items/export.json", "2026-11-25-h100-flat-heuristic/export.json",
                           "2026-11-25-h100-staged-channel-last/export.json",
                           "2026-11-25-h100-staged-channel-last/export-k31.json",
                           "2026-11-25-h100-tensor-core/export.json"}) {
    std::ifstream in(dir + file);
    REQUIRE(in);
    const auto doc = nlohmann::json::parse(in);
    for (const auto& e : doc.at("entries")) replay<detail::DwConvFamily>(e, ContextOptions{}.budget_variants, dw, 3.0e12);
  }
  WARN(fmt::format("dwconv {}/{} within 3%; misses: {}; the cost model's rank of each winner: {}", dw.hits,
                   dw.problems, fmt::join(dw.misses, "; "), fmt::join(dw.ranks, "; ")));
  CHECK(dw.problems == 21);
  CHECK(dw.hits >= 0.9 * dw.problems);
}

namespace {

// The cost model alone (no heuristic, no exploration) picks as many variants as a budgeted search
// may time; returns the best of their recorded times over the recorded best.
double model_picks(const dwconv::Problem& problem, const nlohmann::json& entry) {
  std::map<std::string, double> measured;
  for (const auto& t : entry.at("trials"))
    if (t.at("status") == "ok") measured[t.at("label").get<std::string>()] = t.at("median_ms").get<double>();
  std::vector<dwconv::Config> configs;
  for (const auto& c : dwconv::enumerate(problem))
    if (measured.count(c.label())) configs.push_back(c);
  auto candidates = detail::DwConvFamily::candidates(problem, configs, "sm_90");
  for (std::size_t i = 0; i < candidates.size(); ++i)
    candidates[i].predicted_seconds = dwconv::predicted_seconds(problem, configs[i], 132, 4.24e12);
  tuner::Options o;
  o.budget_variants = ContextOptions{}.budget_variants;
  o.explore = 0;
  double best = 1e30, got = 1e30;
  for (const auto& [label, ms] : measured) best = std::min(best, ms);
  for (int i : tuner::choose(candidates, o)) got = std::min(got, measured.at(candidates[std::size_t(i)].label));
  return got / best;
}

// model_picks over the entries of `file` (under tests/data/trials/) that `take` accepts.
std::vector<std::pair<std::string, double>> model_picks_of(const std::string& file,
                                                           const std::function<bool(const dwconv::Problem&)>& take) {
  std::ifstream in(std::string(KVTUNE_SOURCE_DIR) + "/tests/data/trials/" + file);
  REQUIRE(in);
  const auto doc = nlohmann::json::parse(in);  // kept alive: a range-for does not extend a temporary's member
  std::vector<std::pair<std::string, double>> out;
  for (const auto& e : doc.at("entries")) {
    const auto problem = dwconv::problem_from_key(e.at("problem_key").get<std::string>());
    REQUIRE(problem);
    if (take(*problem)) out.emplace_back(problem->key().substr(7, 48), model_picks(*problem, e));
  }
  return out;
}

// Every problem's picks within 3 % of its winner, and as many problems as expected.
void check_model_picks(const std::vector<std::pair<std::string, double>>& picks, std::size_t problems) {
  std::vector<std::string> lines;
  for (const auto& [key, ratio] : picks) lines.push_back(fmt::format("{}: {:.3f}x", key, ratio));
  WARN(fmt::format("{}", fmt::join(lines, "; ")));
  CHECK(picks.size() == problems);
  for (const auto& [key, ratio] : picks) {
    INFO(key);
    CHECK(ratio <= 1.03);
  }
}

}  // namespace

TEST_CASE("weight-gradient cost model: its first picks hold the exhaustive winner of the kernels as built", "[tuner]") {
  // Exhaustive H200 trials of the weight-gradient kernels as they are now: pipelined row windows up
  // to 32 taps (2026-11-23-h200-pipelined-rows), one buffer above (-wgrad-vectors). The model before
  // this one ranked the winners 19th of 28 (K=3; its 12 first were 13.7 % slower), 33rd of 74 (7x7;
  // 13.8 %) and 11th of 29 (31x31), and only the always-timed heuristic saved them.
  const auto weights = [](const dwconv::Problem& p) { return p.direction == DwDirection::backward_weight; };
  auto picks = model_picks_of("2026-11-23-h200-pipelined-rows/export.json",
                              [&](const dwconv::Problem& p) { return weights(p) && p.kh * p.kw <= 32; });
  for (auto& more : model_picks_of("2026-11-23-h200-wgrad-vectors/export.json",
                                   [&](const dwconv::Problem& p) { return weights(p) && p.kh * p.kw > 32; }))
    picks.push_back(more);
  check_model_picks(picks, 5);
}

TEST_CASE("channel-first cost model: its first picks hold the exhaustive winner of the kernels as built", "[tuner]") {
  // 2D with the halo exchange (2026-11-23-h200-halo-exchange) and 1D with runs per thread
  // (2026-11-25-h100-runs-per-thread/h200-second). The model before this one ranked the 2D winners
  // 62nd, 77th and 151st and its first picks were 5.5 %, 5.8 % and 41.9 % slower (3x3 backward_data
  // and forward, 7x7); fitted on 7 of these 8 problems, the refit one held the 8th within 2 %.
  const auto tiled_first = [](const dwconv::Problem& p) {
    return p.direction != DwDirection::backward_weight && !p.channel_last();
  };
  auto picks = model_picks_of("2026-11-23-h200-halo-exchange/export.json",
                              [&](const dwconv::Problem& p) { return tiled_first(p) && p.kh > 1; });
  for (auto& more : model_picks_of("2026-11-25-h100-runs-per-thread/h200-second/export.json", tiled_first))
    picks.push_back(more);
  check_model_picks(picks, 8);
}

TEST_CASE("tuning always times the heuristic, also outside the enumerated space", "[tuner]") {
  // H3's causal K=3 weight gradient [16, 512, 4096]: the heuristic splits the reduction in 2, the
  // space in 1, 8, 32 or 128 (the benchmark timed the heuristic at 70.2 us against the tuned 74.7 us,
  // bench/NOTES.md, "the heuristic that was never timed").
  const auto k3 = dwconv::problem_from_key(
      "dwconv,backward_weight,ncl,f32,n<=16,c=512,h=1,w=4096,k=1x3,s=1x1,d=1x1,pad=0,0,2,0,bias=0,det=1,align=16");
  REQUIRE(k3);
  const auto heuristic = dwconv::heuristic_config(*k3, 8);
  const auto space = dwconv::enumerate(*k3);
  CHECK(std::find(space.begin(), space.end(), heuristic) == space.end());
  // sm_80: the analytic rule (on sm_90 the recorded rankings may choose, always from the space).
  const auto tuned = detail::tuning_configs<detail::DwConvFamily>(*k3, 8);
  REQUIRE(tuned.size() == space.size() + 1);
  CHECK(tuned.back() == heuristic);
  // Where the space holds it, nothing is added.
  const auto mobile = dwconv::problem_from_key(
      "dwconv,forward,nchw,f32,n<=32,c=144,h=56,w=56,k=3x3,s=1x1,d=1x1,pad=1,1,1,1,bias=0,det=1,align=16");
  REQUIRE(mobile);
  CHECK(detail::tuning_configs<detail::DwConvFamily>(*mobile, 8).size() == dwconv::enumerate(*mobile).size());
  CHECK(detail::tuning_configs<detail::DwConvFamily>(*k3, 9).size() >= space.size());
}

TEST_CASE("dispatch table: readers never block while writers insert and replace", "[tuner]") {
  detail::DispatchTable<int, int, std::hash<int>> table;
  std::atomic<bool> stop{false};
  std::atomic<long> reads{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&] {
      while (!stop) {
        for (int k = 0; k < 64; ++k)
          if (const int* v = table.find(k)) {
            if (*v % 1000 != k) ++wrong;  // values are k + 1000 * version
            ++reads;
          }
      }
    });
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t)
    writers.emplace_back([&, t] {
      for (int version = 0; version < 50; ++version)
        for (int k = t; k < 64; k += 2) table.insert(k, std::make_shared<const int>(k + 1000 * version));
    });
  for (auto& w : writers) w.join();
  stop = true;
  for (auto& r : readers) r.join();
  CHECK(wrong == 0);
  CHECK(table.size() == 64);
  for (int k = 0; k < 64; ++k) CHECK(*table.find(k) == k + 1000 * 49);
}

TEST_CASE("policies and budgets from the environment, bad values name the variable", "[tuner]") {
  CHECK(parse_policy("background") == Policy::background);
  CHECK(parse_policy("record") == Policy::record);
  CHECK(std::string(to_string(Policy::record)) == "record");
  CHECK_THROWS_AS(parse_policy("fast"), Error);
  test::EnvGuard variants("KVTUNE_BUDGET_VARIANTS", "12");
  test::EnvGuard ms("KVTUNE_BUDGET_MS", "1500");
  test::EnvGuard buckets("KVTUNE_BUCKETS", "1,16,256");
  auto o = ContextOptions::from_environment();
  CHECK(o.budget_variants == 12);
  CHECK(o.budget_ms == 1500);
  CHECK(o.buckets == "1,16,256");
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"KVTUNE_BUDGET_VARIANTS", "-1"}, {"KVTUNE_BUDGET_MS", "soon"}, {"KVTUNE_BUCKETS", "16,1"}}) {
    test::EnvGuard bad(name, value);
    try {
      ContextOptions::from_environment();
      FAIL(name << "=" << value << " accepted");
    } catch (const Error& e) {
      CHECK(e.context().field == name);
    }
  }
}

TEST_CASE("the fallback ladder's nearest shape: same dtype/mode/layout only, closest size", "[tuner]") {
  using F = detail::NormalizeFamily;
  const auto p = *F::from_key("normalize,f32,layernorm,cols=1024,rows<=4096,align=16,affine=gb,stats=");
  const auto near = *F::from_key("normalize,f32,layernorm,cols=1024,rows<=65536,align=16,affine=gb,stats=");
  const auto far = *F::from_key("normalize,f32,layernorm,cols=128,rows<=4096,align=16,affine=gb,stats=");
  const auto other = *F::from_key("normalize,bf16,layernorm,cols=1024,rows<=4096,align=16,affine=gb,stats=");
  CHECK(F::distance(p, near) < F::distance(p, far));
  CHECK(std::isinf(F::distance(p, other)));
  using D = detail::DwConvFamily;
  const auto a = *D::from_key("dwconv,forward,nchw,f32,n<=32,c=96,h=56,w=56,k=3x3,s=1x1,d=1x1,pad=1,1,1,1,bias=0,det=1,align=16");
  const auto b = *D::from_key("dwconv,forward,nchw,f32,n<=8,c=96,h=56,w=56,k=3x3,s=1x1,d=1x1,pad=1,1,1,1,bias=0,det=1,align=16");
  const auto c = *D::from_key("dwconv,forward,nhwc,f32,n<=32,c=96,h=56,w=56,k=3x3,s=1x1,d=1x1,pad=1,1,1,1,bias=0,det=1,align=16");
  CHECK(D::distance(a, b) == Approx(2.0));
  CHECK(std::isinf(D::distance(a, c)));
}

namespace {

// Verifies nothing: every loaded candidate is a wrong result (no GPU: none loads).
TEST_CASE("a failed verdict's status: refused for resources, launch failed, timed out, wrong result", "[tuner]") {
  const auto status = [](std::string message) {
    tuner::Verdict v;
    v.message = std::move(message);
    return tuner::failed_status(v);
  };
  CHECK(status(std::string(tuner::kResourcesRefused) + ": too many blocks in cooperative launch") ==
        tuner::Status::resources_exceeded);
  CHECK(status("launch failed: invalid argument") == tuner::Status::launch_failed);
  CHECK(status("timed out: one launch ran past 2 s") == tuner::Status::timed_out);
  CHECK(status("relative error 0.5 > 1e-4") == tuner::Status::wrong_result);
  CHECK(status("") == tuner::Status::wrong_result);
}

class RejectingHarness : public tuner::Harness {
 public:
  int slots() const override { return 1; }
  cudaError_t launch(const tuner::Candidate&, const detail::LoadedKernel&, int, cudaStream_t) override {
    ++launches;
    return cudaErrorUnknown;
  }
  tuner::Verdict verify(const tuner::Candidate&, const detail::LoadedKernel&, cudaStream_t) override {
    ++verified;
    return tuner::Verdict{false, 1.0, 1.0, "wrong: this harness rejects every output"};
  }
  double model_bytes() const override { return 1; }
  int launches = 0, verified = 0;
};

}  // namespace

TEST_CASE("tune: compiles started before the harness, each candidate a trial, no winner without a verified output",
          "[tuner]") {
  static constexpr const char* kSource = "template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= N; }";
  static constexpr const char* kBroken = "template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= M; }";
  std::vector<tuner::Candidate> candidates;
  for (int i = 0; i < 6; ++i) {
    tuner::Candidate c;
    c.label = fmt::format("v{}", i);
    c.request.program_name = "scale.cu";
    c.request.source = i == 5 ? kBroken : kSource;
    c.request.name_expressions = {fmt::format("scale<{}>", i == 4 ? 3 : i)};  // v4 is v3's program
    c.request.arch = "sm_90";
    c.block_threads = 32;
    c.predicted_seconds = double(i);
    candidates.push_back(std::move(c));
  }
  tuner::Options o;
  o.samples = 1;
  for (const bool early : {true, false}) {
    INFO("compiles started before the harness: " << early);
    std::optional<tuner::StartedCompiles> started;
    if (early) started.emplace(candidates, o);
    RejectingHarness harness;
    const auto outcome = tuner::tune(candidates, harness, o, nullptr, early ? &*started : nullptr);
    CHECK(outcome.winner == -1);
    // Every candidate tried once, in the order its compile finished.
    auto chosen = outcome.chosen;
    std::sort(chosen.begin(), chosen.end());
    CHECK(chosen == std::vector<int>{0, 1, 2, 3, 4, 5});
    REQUIRE(outcome.trials.size() == 6);
    const auto trial = [&](int i) -> const cache::Trial& {
      REQUIRE(outcome.trial_index[std::size_t(i)] >= 0);
      return outcome.trials[std::size_t(outcome.trial_index[std::size_t(i)])];
    };
    CHECK(outcome.compiles == 5);  // v3 and v4 share one program
    CHECK(outcome.compiled[3].cubin == outcome.compiled[4].cubin);
    for (int i = 0; i < 5; ++i) {
      CHECK_FALSE(outcome.compiled[std::size_t(i)].cubin.empty());
      CHECK(trial(i).label == candidates[std::size_t(i)].label);
      // No GPU: the load fails; with one, the harness rejects the output.
      CHECK((trial(i).status == "launch_failed" || trial(i).status == "wrong_result"));
    }
    CHECK(trial(5).status == "compile_failed");
    CHECK(trial(5).message.find("identifier \"M\" is undefined") != std::string::npos);
    CHECK(harness.launches == 0);  // nothing unverified is timed
  }

  // The costliest compiles are queued first (ties: best predicted first); under a time budget the
  // best predicted first. v4 shares v3's program.
  candidates[2].compile_cost = 10;
  candidates[0].compile_cost = 5;
  const auto queue = [](const tuner::Outcome& outcome) {
    std::vector<int> q;
    for (const auto& c : outcome.compiled) q.push_back(c.queued);
    return q;
  };
  for (const double budget_ms : {0.0, 1e6}) {
    INFO("time budget " << budget_ms << " ms");
    o.budget_ms = budget_ms;
    RejectingHarness harness;
    const auto outcome = tuner::tune(candidates, harness, o, nullptr);
    CHECK(queue(outcome) == (budget_ms > 0 ? std::vector<int>{0, 1, 2, 3, 3, 4} : std::vector<int>{1, 2, 0, 3, 3, 4}));
    CHECK(outcome.compiles == 5);
  }
  // A stored binary is ready before any compile: it is taken first (the others as their compiles end).
  o.budget_ms = 0;
  const auto v1 = tuner::compile_all({candidates[1]}, 1, "").at(0);
  REQUIRE(v1.status == tuner::Status::ok);
  o.find_binaries = [&](const std::vector<std::string>& hashes) {
    std::vector<cache::Binary> found;
    for (const auto& h : hashes)
      if (h == v1.binary_hash) found.push_back(cache::Binary{h, "sm_90", v1.lowered_name, v1.cubin, ""});
    return found;
  };
  RejectingHarness harness;
  const auto outcome = tuner::tune(candidates, harness, o, nullptr);
  CHECK(outcome.reused == 1);
  CHECK(outcome.compiles == 4);
  CHECK(queue(outcome) == std::vector<int>{1, -1, 0, 2, 2, 3});
  REQUIRE(outcome.chosen.size() == 6);
  CHECK(outcome.chosen.front() == 1);
}

TEST_CASE("harness host work on all cores: every item once, exceptions rethrown, inputs reproducible", "[tuner]") {
  for (const std::int64_t n : {0, 1, 7, 1000, 100003}) {
    INFO("n = " << n);
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
    std::atomic<int> slices{0};
    detail::parallel_for(
        n,
        [&](std::int64_t begin, std::int64_t end) {
          CHECK(begin < end);
          ++slices;
          for (std::int64_t i = begin; i < end; ++i) ++seen[std::size_t(i)];
        },
        64);
    CHECK(std::count_if(seen.begin(), seen.end(), [](const std::atomic<int>& k) { return k != 1; }) == 0);
    CHECK(slices <= std::max<std::int64_t>(1, n / 64));
  }
  // The slice that holds the last item throws (on a thread of its own wherever there are two cores).
  CHECK_THROWS_WITH(detail::parallel_for(1 << 20,
                                         [](std::int64_t, std::int64_t end) {
                                           if (end == (1 << 20)) throw Error("slice failed");
                                         }),
                    Catch::Contains("slice failed"));

  // Drawn in chunks on several threads, the values depend on (n, seed, range) alone.
  const auto a = tuner::exact_values(300000, 7, 64), b = tuner::exact_values(300000, 7, 64);
  CHECK(a == b);
  CHECK(tuner::exact_values(300000, 8, 64) != a);
  const auto prefix = tuner::exact_values(1000, 7, 64);
  CHECK(std::equal(prefix.begin(), prefix.end(), a.begin()));
  CHECK(std::count_if(a.begin(), a.end(), [](double v) { return std::fabs(v) > 1.0 || v * 64 != std::round(v * 64); }) == 0);
}
