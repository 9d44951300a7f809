// kvtune-bench without a GPU: the suite listing, the report writers on synthetic timings, the peers
// merge and its errors, and the executable's exit statuses.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "cache_fixtures.h"
#include "gpu_support.h"
#include "lib/src/families.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "tools/bench_report.h"
#include "tools/bench_suite.h"
#include "tools/bench_tensors.h"

using namespace kvtune;
using namespace kvtune::bench;

namespace {

using kvtune::test::read_bytes;
using kvtune::test::write_bytes;

// One private directory for the whole test run, removed at exit.
const std::filesystem::path& temp_dir() {
  static const kvtune::test::TempDir dir;
  return dir.path();
}

// Runs kvtune-bench with `arguments`; returns its exit status and puts stderr in `err`.
int run_bench(const std::string& arguments, std::string* err = nullptr) {
  const auto err_path = temp_dir() / "stderr.txt";
  const std::string command =
      std::string("'") + KVTUNE_BENCH_EXE + "' " + arguments + " > /dev/null 2> '" + err_path.string() + "'";
  const int status = std::system(command.c_str());
  if (err) *err = read_bytes(err_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Timing ok(double ms, const char* mode = "events", const char* label = "") {
  Timing t;
  t.status = "ok";
  t.median_ms = ms;
  t.mode = mode;
  t.label = label;
  return t;
}

// A report over the quick normalize-ids and mamba problems with made-up times.
Report synthetic_report() {
  Report report;
  report.machine.device = "Synthetic GPU";
  report.machine.sm_count = 100;
  report.machine.l2_bytes = 50ll << 20;
  report.machine.copy_gbps = 4000;
  report.machine.fma_tflops = 50;
  report.machine.launch_us_events = 2.5;
  report.machine.launch_us_graph = 1.25;
  report.machine.date = "2026-01-01 00:00 UTC";
  report.machine.command = "kvtune-bench --suite normalize-ids,mamba --quick";
  for (const auto& name : {"normalize-ids", "mamba"})
    for (const auto& p : suite(name, true)) {
      ProblemResult r;
      r.problem = p;
      r.model_bytes = p.model_bytes();
      r.model_flops = p.model_flops();
      r.kvtune = ok(0.1, "graph", "tuned-label");
      r.heuristic = ok(0.15);
      r.seeds.emplace_back("naive", ok(0.4));
      r.seeds.emplace_back("warp-tiled", ok(0.3));
      if (p.family == "dwconv") r.cudnn = ok(0.5);
      r.copy = ok(0.09);
      report.problems.push_back(r);
    }
  return report;
}

}  // namespace

TEST_CASE("bench suites: ids unique, models positive, shapes valid", "[bench-cli]") {
  std::set<std::string> ids;
  const auto all = suite("all", false);
  CHECK(all.size() >= 30);
  CHECK(all.size() <= 70);  // the --suite all runtime budget: ~7-10 s of tuning per problem (decode steps: ~1 s)
  for (const auto& p : all) {
    INFO(p.id);
    CHECK(ids.insert(p.id).second);
    CHECK(p.model_bytes() > 0);
    CHECK(p.model_flops() > 0);
    CHECK(p.id.rfind(p.suite + "/", 0) == 0);
  }
  for (const auto& name : suite_names()) {
    INFO(name);
    const auto full = suite(name, false);
    CHECK(full.size() >= 4);
    CHECK(full.size() <= 8);
    CHECK(suite(name, true).size() <= 2);
  }
  CHECK_THROWS_AS(suite("no-such-suite", false), Error);
}

namespace {
template <class... F>
std::vector<std::string> registered_ops(std::tuple<F...>*) {
  return {F::kOp...};
}
}  // namespace

TEST_CASE("bench suites: every registered family has rows in `--list-suite all`, each row's family is registered",
          "[bench-cli]") {
  const auto ops = registered_ops(static_cast<detail::Families*>(nullptr));
  const auto listing = suite_document("all", false).at("problems");
  std::set<std::string> listed;
  for (const auto& p : listing) listed.insert(p.at("family").get<std::string>());
  for (const auto& op : ops) {
    INFO(op);
    CHECK(listed.count(op) == 1);
  }
  CHECK(listed.size() == ops.size());
}

namespace {
void check_call(const NormalizeArgs& a) { normalize::validate(a); }
void check_call(const NormalizeBackwardArgs& a) { normalize::validate(a); }
void check_call(const DwConvArgs& a) {
  dwconv::validate(a);
  dwconv_states::validate(a);
}
void check_call(const DwConvDecodeArgs& a) { dwconv_decode::validate(a); }

bool is_marker(const void* ptr) { return ptr == passed(); }
bool has_marker(const NormalizeArgs& a) {
  return is_marker(a.x) || is_marker(a.y) || is_marker(a.gamma) || is_marker(a.beta) || is_marker(a.mean) ||
         is_marker(a.rstd) || is_marker(a.residual) || is_marker(a.residual_out);
}
bool has_marker(const NormalizeBackwardArgs& a) {
  for (const void* ptr : {a.x, a.dy, static_cast<const void*>(a.dx), a.gamma, static_cast<const void*>(a.mean),
                          static_cast<const void*>(a.rstd), static_cast<const void*>(a.dgamma),
                          static_cast<const void*>(a.dbeta), a.dresidual_out})
    if (is_marker(ptr)) return true;
  return false;
}
bool has_marker(const DwConvArgs& a) {
  for (const void* ptr : {a.x, a.weight, a.bias, static_cast<const void*>(a.y), a.dy, static_cast<const void*>(a.dx),
                          static_cast<const void*>(a.dweight), static_cast<const void*>(a.dbias), a.initial_state,
                          static_cast<const void*>(a.final_state), static_cast<const void*>(a.dinitial_state),
                          static_cast<const void*>(a.seq_idx)})
    if (is_marker(ptr)) return true;
  return false;
}
bool has_marker(const DwConvDecodeArgs& a) {
  for (const void* ptr : {a.x, a.weight, a.bias, static_cast<const void*>(a.y), static_cast<const void*>(a.state),
                          static_cast<const void*>(a.cache_seqlens), static_cast<const void*>(a.state_indices)})
    if (is_marker(ptr)) return true;
  return false;
}
}  // namespace

TEST_CASE("kvtune-bench's tensors: every row's call, bound, passes the library's argument rules", "[bench-cli]") {
  int rows = 0;
  for (const auto& p : suite("all", false)) {
    INFO(p.id);
    BenchCall call = p.call;
    std::vector<TensorSpec> specs;
    std::uintptr_t next = 16;  // passed() is 3 << 36
    std::visit(
        [&](auto& a) {
          each_tensor(a, [&](auto& field, const TensorSpec& spec) {
            specs.push_back(spec);
            bind(field, reinterpret_cast<void*>(next++ << 36));  // distinct, 256-byte aligned, far apart
          });
        },
        call);
    REQUIRE_FALSE(specs.empty());
    double bytes = 0;
    for (const auto& spec : specs) {
      CHECK(spec.elements > 0);
      if (spec.fill == Fill::sequences) CHECK(p.sequences > 1);
      bytes += double(spec.elements) * spec.element_bytes;
    }
    // Every tensor the model counts is allocated (the decode state is one buffer read and written).
    const double model = p.model_bytes();
    CHECK(bytes >= (std::holds_alternative<DwConvDecodeArgs>(call) ? 0.5 : 0.999) * model);
    CHECK_NOTHROW(std::visit([](const auto& a) { check_call(a); }, call));
    // A marker left unbound would be a tensor the call passes that the bench never allocates.
    CHECK_FALSE(std::visit([](const auto& a) { return has_marker(a); }, call));
    ++rows;
  }
  CHECK(rows == int(suite("all", false).size()));
  // The seq_idx rows' runs: position t of a row of w is in sequence t * S / w.
  for (const auto& p : suite("mamba-train", false))
    if (p.sequences > 0) {
      const auto ids = index_values(Fill::sequences, std::size_t(2 * p.dwconv().w), p);
      CHECK(ids.front() == 0);
      CHECK(ids[std::size_t(p.dwconv().w) - 1] == p.sequences - 1);
      CHECK(ids[std::size_t(p.dwconv().w)] == 0);  // the next row starts again
    }
}

TEST_CASE("bench suites: mamba-train times the fused training directions, with seq_idx and states", "[bench-cli]") {
  const auto problems = suite("mamba-train", false);
  int seq_idx = 0, states = 0;
  std::set<DwDirection> directions;
  for (const auto& p : problems) {
    INFO(p.id);
    const DwConvArgs& a = p.dwconv();
    CHECK(a.activation == Activation::silu);
    CHECK(a.bias != nullptr);
    CHECK(a.causal);
    CHECK(p.group == "mamba-train");
    CHECK((a.direction == DwDirection::backward_weight) == (a.dbias != nullptr));
    directions.insert(a.direction);
    const bool uses_states = a.seq_idx != nullptr || a.initial_state != nullptr;
    CHECK(p.family == (uses_states ? "dwconv_states" : "dwconv"));
    if (a.seq_idx != nullptr) {
      ++seq_idx;
      CHECK(p.sequences > 1);
      CHECK(to_json(p).at("sequences") == p.sequences);
    }
    if (a.initial_state != nullptr) {
      ++states;
      CHECK((a.direction == DwDirection::forward) == (a.final_state != nullptr));
      CHECK((a.direction == DwDirection::backward_data) == (a.dinitial_state != nullptr));
    }
    // The fused backward reads what the plain one does and more (x for z, the bias; dbias written).
    if (a.direction != DwDirection::forward && !uses_states) {
      BenchProblem plain = p;
      DwConvArgs& b = std::get<DwConvArgs>(plain.call);
      b.activation = Activation::none, b.bias = nullptr, b.dbias = nullptr;
      CHECK(p.model_bytes() > plain.model_bytes());
    }
  }
  CHECK(directions.size() == 3);
  CHECK(seq_idx == 3);
  CHECK(states == 2);
}

TEST_CASE("bench suites: mamba-inference times decode steps with state indices, bias and SiLU", "[bench-cli]") {
  const auto problems = suite("mamba-inference", false);
  REQUIRE(problems.size() >= 6);
  bool circular = false, speculative = false;
  for (const auto& p : problems) {
    INFO(p.id);
    const DwConvDecodeArgs& a = p.decode();
    CHECK(p.family == "dwconv_decode");
    CHECK(a.state_indices != nullptr);
    CHECK(a.bias != nullptr);
    CHECK(a.activation == Activation::silu);
    circular = circular || a.cache_seqlens != nullptr;
    speculative = speculative || a.seqlen > 1;
    const auto j = to_json(p);
    CHECK(j.at("call") == "dwconv_decode");
    CHECK(j.at("state_len") == (a.cache_seqlens != nullptr ? 256 : 3));
    // x and y once, the state read and written, the parameters, the indices.
    CHECK(p.model_bytes() >= 2.0 * 2 * double(a.batch * a.channels * a.seqlen));
  }
  CHECK(circular);
  CHECK(speculative);
}

TEST_CASE("bench suites: fused-activation rows run forward with bias, each beside its plain twin", "[bench-cli]") {
  int fused = 0;
  for (const auto& name : {"mamba", "convnext", "mobilenetv2"}) {
    INFO(name);
    const auto problems = suite(name, false);
    for (const auto& p : problems) {
      if (p.dwconv().activation == Activation::none) {
        CHECK(p.dwconv().bias == nullptr);
        continue;
      }
      INFO(p.id);
      ++fused;
      CHECK(p.dwconv().bias != nullptr);
      CHECK(p.dwconv().direction == DwDirection::forward);
      const auto j = to_json(p);
      CHECK(j.at("bias") == true);
      CHECK(j.at("activation") == to_string(p.dwconv().activation));
      // The plain row of the same shape, dtype and layout: the fused form's overhead is read off it.
      const auto twin = std::find_if(problems.begin(), problems.end(), [&](const BenchProblem& q) {
        const DwConvArgs &a = p.dwconv(), &b = q.dwconv();
        return b.activation == Activation::none && b.direction == DwDirection::forward && b.layout == a.layout &&
               b.dtype == a.dtype && b.c == a.c && b.w == a.w && b.kernel_w == a.kernel_w;
      });
      CHECK(twin != problems.end());
      CHECK(p.model_bytes() > twin->model_bytes());  // the bias is read
    }
  }
  CHECK(fused == 3);
}

TEST_CASE("bench suites: the large normalize suite moves >= 256 MB, the narrow one has cols < 64", "[bench-cli]") {
  for (const auto& p : suite("normalize-large", false)) CHECK(p.model_bytes() >= 256e6);
  for (const auto& p : suite("normalize-narrow", false)) CHECK(p.normalize().cols < 64);
  // normalize-wide: rows of 2^20 and 2^22 columns, f32 and bf16, few rows and many.
  std::set<std::int64_t> wide_cols, wide_rows;
  std::set<DType> wide_dtypes;
  for (const auto& p : suite("normalize-wide", false)) {
    wide_cols.insert(p.normalize().cols);
    wide_rows.insert(p.normalize().rows);
    wide_dtypes.insert(p.normalize().dtype);
  }
  CHECK(wide_cols == std::set<std::int64_t>{1 << 20, 1 << 22});
  CHECK(wide_dtypes == std::set<DType>{DType::f32, DType::bf16});
  CHECK(*wide_rows.begin() <= 4);
  CHECK(*wide_rows.rbegin() >= 128);
  for (const auto& p : suite("large-kernel", false)) CHECK(p.dwconv().kernel_w == 31);
  // normalize-residual: every row reads x and the residual and writes y and s (four planes), and
  // its listing tells the peers so (they run the add, then the norm).
  const auto residual = suite("normalize-residual", false);
  CHECK(residual.size() >= 4);
  for (const auto& p : residual) {
    const NormalizeArgs& a = p.normalize();
    INFO(p.id);
    CHECK((a.residual != nullptr && a.residual_out != nullptr));
    const double plane = double(a.rows) * double(a.cols) * (a.dtype == DType::f32 ? 4 : 2);
    CHECK(p.model_bytes() >= 4 * plane);
    CHECK(p.model_bytes() < 4 * plane + 1e6);
  }
  const auto listing = suite_document("normalize-residual", false).at("problems");
  for (const auto& j : listing) CHECK((j.at("residual") == true && j.at("residual_out") == true));
}

TEST_CASE("bench suites: normalize-backward times dx, dgamma and dbeta from saved statistics", "[bench-cli]") {
  const auto problems = suite("normalize-backward", false);
  REQUIRE(problems.size() >= 4);
  std::set<NormMode> modes;
  for (const auto& p : problems) {
    INFO(p.id);
    const NormalizeBackwardArgs& a = p.normalize_backward();
    CHECK(p.group == "normalize backward");
    CHECK(a.gamma != nullptr);
    CHECK(a.dgamma != nullptr);
    CHECK((a.dbeta != nullptr) == (a.mode == NormMode::layernorm));
    CHECK(a.rstd != nullptr);
    CHECK((a.mean != nullptr) == (a.mode != NormMode::rmsnorm));
    // x and dy read, dx written: three planes, more than twice the L2 but for the small row.
    CHECK(p.model_bytes() >= 3.0 * double(a.rows * a.cols) * element_bytes(a.dtype));
    modes.insert(a.mode);
  }
  CHECK(modes == std::set<NormMode>{NormMode::layernorm, NormMode::rmsnorm});
}

TEST_CASE("kvtune-bench --list-suite: well-formed JSON, identical across runs, no GPU needed", "[bench-cli]") {
  const auto dir = temp_dir();
  const auto a = dir / "suite-a.json", b = dir / "suite-b.json";
  REQUIRE(run_bench("--list-suite all --json '" + a.string() + "'") == 0);
  REQUIRE(run_bench("--list-suite all --json '" + b.string() + "'") == 0);
  const std::string text = read_bytes(a);
  CHECK(text == read_bytes(b));
  const auto doc = nlohmann::json::parse(text);
  CHECK(doc.at("schema") == "kvtune-bench-suite/1");
  CHECK(doc.at("suite") == "all");
  CHECK(doc.at("quick") == false);
  const auto& problems = doc.at("problems");
  REQUIRE(problems.size() == suite("all", false).size());
  for (const auto& p : problems) {
    CHECK(p.at("id").is_string());
    CHECK(p.at("model_bytes").get<double>() > 0);
    const std::string call = p.at("call");
    if (call == "normalize") {
      for (const char* field : {"rows", "cols", "mode", "dtype", "eps", "ddof", "gamma", "beta"}) CHECK(p.contains(field));
    } else if (call == "normalize_backward") {
      for (const char* field : {"rows", "cols", "mode", "dtype", "eps", "ddof", "gamma", "saved", "dgamma", "dbeta"})
        CHECK(p.contains(field));
    } else if (call == "dwconv") {
      for (const char* field : {"direction", "layout", "n", "c", "h", "w", "kernel_h", "kernel_w", "stride_h",
                                "stride_w", "dilation_h", "dilation_w", "pad_top", "pad_bottom", "pad_left",
                                "pad_right", "causal", "bias", "dbias", "activation", "initial_state", "final_state",
                                "dinitial_state", "seq_idx"})
        CHECK(p.contains(field));
    } else {
      REQUIRE(call == "dwconv_decode");
      for (const char* field : {"batch", "channels", "seqlen", "kernel_w", "state_len", "circular", "state_indices",
                                "bias", "activation", "dtype"})
        CHECK(p.contains(field));
    }
  }
  // The same document as the library function, and --quick keeps at most two per suite.
  CHECK(doc == suite_document("all", false));
  const auto q = dir / "quick.json";
  REQUIRE(run_bench("--list-suite mamba --quick --json '" + q.string() + "'") == 0);
  CHECK(nlohmann::json::parse(read_bytes(q)).at("problems").size() == 2);
  std::string err;
  CHECK(run_bench("--list-suite nope", &err) == 2);
  CHECK(err.find("unknown suite 'nope'") != std::string::npos);
}

TEST_CASE("bench report: Markdown and JSON from synthetic timings", "[bench-cli]") {
  Report report = synthetic_report();
  const std::string md = to_markdown(report);
  CHECK(md.find("# kvtune-bench — Synthetic GPU (100 SMs, 50 MiB L2)") != std::string::npos);
  CHECK(md.find("## normalize") != std::string::npos);
  CHECK(md.find("## dwconv forward") != std::string::npos);
  CHECK(md.find("| 1024 x 128 standardize f32 | tuned-label | 100.0 | graph |") != std::string::npos);
  // Speedups: heuristic 1.5x, best seed (warp-tiled) 3x, cuDNN 5x.
  CHECK(md.find("150.0 µs · 1.50×") != std::string::npos);
  CHECK(md.find("300.0 µs · 3.00× (warp-tiled)") != std::string::npos);
  CHECK(md.find("500.0 µs · 5.00×") != std::string::npos);
  CHECK(md.find("over the best seed 3.00× (2 problems)") != std::string::npos);

  const auto j = to_json(report);
  CHECK(j.at("schema") == "kvtune-bench-report/1");
  REQUIRE(j.at("problems").size() == report.problems.size());
  const auto& first = j.at("problems").at(0);
  const double bytes = report.problems[0].model_bytes;
  CHECK(first.at("kvtune").at("median_ms") == Approx(0.1));
  CHECK(first.at("derived").at("gbps") == Approx(bytes / 1e-4 / 1e9));
  CHECK(first.at("derived").at("pct_copy") == Approx(100 * bytes / 1e-4 / 1e9 / 4000));
  const double floor = std::max(bytes / 4000e9, report.problems[0].model_flops / 50e12) * 1e3;
  CHECK(first.at("derived").at("floor_ms") == Approx(floor));
  CHECK(first.at("derived").at("pct_floor") == Approx(100 * floor / 0.1));
  CHECK(first.at("derived").at("speedup").at("best_seed") == Approx(3.0));
  CHECK(first.at("derived").at("speedup").at("heuristic") == Approx(1.5));
  CHECK(floor_ms(report.problems[0], report.machine) == Approx(floor));

  // A failed variant is data: it appears with its status, and the speedups skip it.
  report.problems[0].heuristic = Timing::failed("launch failed");
  const std::string md2 = to_markdown(report);
  CHECK(md2.find("| failed |") != std::string::npos);
  CHECK(to_json(report).at("problems").at(0).at("heuristic").at("status") == "failed");
  CHECK_FALSE(to_json(report).at("problems").at(0).at("derived").at("speedup").contains("heuristic"));
}

TEST_CASE("bench report: peers merge by problem id", "[bench-cli]") {
  Report report = synthetic_report();
  const std::string id0 = report.problems[0].problem.id;
  const std::string dw_id = report.problems.back().problem.id;
  const nlohmann::json peers = {
      {"schema", "kvtune-bench-peers/1"},
      {"source", "torch_peers.py"},
      {"torch_version", "2.11.0"},
      {"results",
       {{{"id", id0}, {"peer", "torch-eager"}, {"status", "ok"}, {"median_ms", 0.2}, {"mode", "graph"}, {"op", "3-op"}},
        {{"id", id0}, {"peer", "torch-compile"}, {"status", "failed"}, {"message", "inductor error"}},
        {{"id", dw_id}, {"peer", "torch-eager"}, {"status", "ok"}, {"median_ms", 0.4}},
        {{"id", "other-suite/x"}, {"peer", "torch-eager"}, {"status", "ok"}, {"median_ms", 1.0}}}}};
  CHECK(merge_peers(report, peers, "test") == 1);
  REQUIRE(report.problems[0].peers.count("torch-eager") == 1);
  CHECK(report.problems[0].peers.at("torch-eager").median_ms == Approx(0.2));
  CHECK(report.problems[0].peers.at("torch-compile").status == "failed");
  const std::string md = to_markdown(report);
  CHECK(md.find("| torch-compile | torch-eager |") != std::string::npos);
  CHECK(md.find("200.0 µs · 2.00×") != std::string::npos);
  CHECK(md.find("over torch-eager 2.00× (1 problems)") != std::string::npos);
  CHECK(to_json(report).at("problems").at(0).at("derived").at("speedup").at("torch-eager") == Approx(2.0));
  // The best of cuDNN (0.5 ms) and the peers (0.4 ms) for the dwconv problem: 4x.
  CHECK(to_json(report).at("problems").back().at("derived").at("speedup").at("best_of_cudnn_and_peers") ==
        Approx(4.0));
  CHECK(report.peer_sources.at(0).find("torch_version 2.11.0") != std::string::npos);
}

TEST_CASE("bench report: malformed peers are rejected with the entry named", "[bench-cli]") {
  const auto bad = [](nlohmann::json doc) -> std::string {
    try {
      validate_peers(doc, "peers file 'p.json'");
    } catch (const PeersError& e) {
      return e.what();
    }
    return "";
  };
  const nlohmann::json good_entry = {{"id", "a"}, {"peer", "torch-eager"}, {"status", "ok"}, {"median_ms", 1.0}};
  CHECK(bad({{"schema", "kvtune-bench-peers/1"}, {"results", {good_entry}}}).empty());
  CHECK(bad(nlohmann::json::array()).find("top level") != std::string::npos);
  CHECK(bad({{"schema", "other/1"}, {"results", nlohmann::json::array()}}).find("'schema'") != std::string::npos);
  CHECK(bad({{"schema", "kvtune-bench-peers/1"}}).find("'results' must be an array") != std::string::npos);
  auto entry = good_entry;
  entry["median_ms"] = -1;
  CHECK(bad({{"schema", "kvtune-bench-peers/1"}, {"results", {good_entry, entry}}}).find("results[1]: 'median_ms'") !=
        std::string::npos);
  entry = good_entry;
  entry.erase("id");
  CHECK(bad({{"schema", "kvtune-bench-peers/1"}, {"results", {entry}}}).find("results[0]: 'id'") != std::string::npos);
  entry = good_entry;
  entry["status"] = "great";
  CHECK(bad({{"schema", "kvtune-bench-peers/1"}, {"results", {entry}}}).find("'status'") != std::string::npos);

  // The executable: exit 2 with a clear message, before looking for a GPU.
  const auto dir = temp_dir();
  write_bytes(dir / "truncated.json", "{\"schema\": \"kvtune-bench-peers/1\", \"results\": [");
  std::string err;
  CHECK(run_bench("--suite normalize-ids --peers '" + (dir / "truncated.json").string() + "'", &err) == 2);
  CHECK(err.find("not valid JSON") != std::string::npos);
  write_bytes(dir / "wrong.json", R"({"schema": "kvtune-bench-peers/1", "results": [{"id": "x", "peer": "p", "status": "ok"}]})");
  CHECK(run_bench("--suite normalize-ids --peers '" + (dir / "wrong.json").string() + "'", &err) == 2);
  CHECK(err.find("results[0]: 'median_ms'") != std::string::npos);
  CHECK(run_bench("--peers '" + (dir / "missing.json").string() + "'", &err) == 2);
  CHECK(err.find("cannot be opened") != std::string::npos);
  CHECK(run_bench("--suite nope", &err) == 2);
}

TEST_CASE("kvtune-bench without a GPU exits 1 with a clear message", "[bench-cli]") {
  std::string why;
  if (test::gpu_available(&why)) KVTUNE_SKIP("(a GPU is present; this test checks the no-GPU path)");
  std::string err;
  CHECK(run_bench("--suite normalize-ids --quick", &err) == 1);
  CHECK(err.find("no CUDA GPU available") != std::string::npos);
}

TEST_CASE("kvtune-bench --outputs takes held or reused only", "[bench-cli]") {
  std::string err;
  CHECK(run_bench("--suite normalize-ids --quick --outputs sometimes", &err) != 0);
  CHECK(err.find("--outputs") != std::string::npos);
  CHECK(err.find("held") != std::string::npos);
}
