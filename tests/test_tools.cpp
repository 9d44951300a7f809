// Tools: kvtune-tune and kvtune-cache run as a user runs them (separate processes, exit codes,
// stdout and stderr), on caches populated by importing tests/data/export-example.json; plus
// the pieces behind them (staleness rules, shapes parsing, JSON positions) as unit tests.
// No GPU is needed except in the [gpu] cases at the end, which skip without one.

#if defined(KVTUNE_TUNE_EXE) && defined(KVTUNE_CACHE_EXE)

#include <fcntl.h>
#include <spawn.h>
#include <sqlite3.h>  // damages a binary by hand, as another program would
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "cache_fixtures.h"
#include "gpu_support.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kvtune/kvtune.h"
#include "core/device.h"
#include "lib/src/families.h"
#include "core/nvrtc.h"
#include "tools/cache_view.h"
#include "tools/common.h"
#include "tools/ops.h"

extern char** environ;

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using kvtune::test::TempDir;

struct Run {
  int code = -1;
  std::string out;
  std::string err;
  std::vector<std::string> out_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  json out_json() const {
    INFO("stdout: " << out << "\nstderr: " << err);
    return json::parse(out);
  }
};

using kvtune::test::read_bytes;
using kvtune::test::write_bytes;

// Runs a tool with `args`; `env` entries "NAME=value" replace the environment's, "NAME" unsets it.
Run run(const std::string& exe, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  static std::atomic<int> counter{0};
  const std::string base =
      (fs::temp_directory_path() / ("kvtune-tools-run-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
          .string();
  const std::string out_path = base + ".out", err_path = base + ".err";
  std::vector<std::string> argv_storage = {exe};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (std::none_of(env.begin(), env.end(),
                     [&](const std::string& o) { return o == name || o.rfind(name + "=", 0) == 0; }))
      env_storage.push_back(entry);
  }
  for (const auto& e : env)
    if (e.find('=') != std::string::npos) env_storage.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_bytes(out_path);
  r.err = read_bytes(err_path);
  ::unlink(out_path.c_str());
  ::unlink(err_path.c_str());
  return r;
}

Run tune(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return run(KVTUNE_TUNE_EXE, args, env);
}
Run cache(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return run(KVTUNE_CACHE_EXE, args, env);
}

// A bad-input failure: exit status 2 and exactly one line on stderr that says `what`.
void check_usage_error(const Run& r, const std::string& what) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains(what));
  CHECK_THAT(r.err, !Catch::Contains("terminate called"));
}

void check_ok(const Run& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
}

std::string example_path() { return std::string(KVTUNE_SOURCE_DIR) + "/tests/data/export-example.json"; }

// The checked-in example (normalize entries on an H200 and an H100, two dwconv entries on the H200),
// brought to this build's NVRTC, kvtune and template versions (so that
// its entries are fresh here), with creation times spread over the last 20 days.
json current_example() {
  json doc = json::parse(read_bytes(example_path()));
  for (auto& d : doc["devices"]) {
    d["nvrtc_version"] = kvtune::detail::nvrtc_version();
    d["kvtune_version"] = kvtune::version();
  }
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  int i = 0;
  for (auto& e : doc["entries"]) {
    e["template_hash"] = kvtune::tools::find_handler(e["op"].get<std::string>())->template_hash();
    e["created_at"] = now - (i++ % 2 == 0 ? 10 : 1) * 86400;  // even entries 10 days old, odd ones 1 day
  }
  return doc;
}

std::string write_example(const TempDir& dir, const json& doc, const std::string& name = "example.json") {
  const std::string path = dir.file(name);
  write_bytes(path, doc.dump(1));
  return path;
}

// A cache holding the example.
std::string example_cache(const TempDir& dir, const json& doc, const std::string& name = "cache.db") {
  const std::string db = dir.file(name);
  check_ok(cache({"import", write_example(dir, doc, name + ".json"), "--cache", db}));
  return db;
}

std::size_t trial_count(const json& doc) {
  std::size_t n = 0;
  for (const auto& e : doc["entries"]) n += e["trials"].size();
  return n;
}

json list_json(const std::string& db, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"list", "--cache", db, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const Run r = cache(args);
  check_ok(r);
  return r.out_json()["entries"];
}

std::string shapes_file(const TempDir& dir, const std::string& text, const std::string& name = "shapes.json") {
  const std::string path = dir.file(name);
  write_bytes(path, text);
  return path;
}

// Two problems with few variants: CI compiles them in seconds.
constexpr char kSmallShapes[] = R"({"problems": [
  {"op": "normalize", "rows": 4096, "cols": 65536, "dtype": "f32", "mode": "rmsnorm"},
  {"op": "normalize", "rows": 1024, "cols": 1, "dtype": "f32", "mode": "standardize"}
]})";

}  // namespace

// --- help and usage -------------------------------------------------------------------------------

TEST_CASE("tools: every command has --help and exits 0", "[tools]") {
  for (const auto& r : {tune({"--help"}), cache({"--help"})}) {
    check_ok(r);
    CHECK_THAT(r.out, Catch::Contains("Exit status"));
  }
  for (const char* sub : {"list", "show", "stats", "recorded", "leases", "export", "import", "merge", "prune", "verify",
                          "clear", "report"}) {
    const Run r = cache({sub, "--help"});
    INFO(sub);
    check_ok(r);
    CHECK_THAT(r.out, Catch::Contains("--cache"));
  }
}

TEST_CASE("tools: bad usage is one line on stderr and exit status 2", "[tools]") {
  check_usage_error(tune({}), "no problems");
  check_usage_error(tune({"--bogus"}), "--bogus");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--compile-only"}), "exclude each other");
  check_usage_error(tune({"--suite", "nosuch", "--dry-run"}), "unknown suite 'nosuch'");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--shard", "3/3"}), "--shard");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--shard", "x"}), "--shard");
  check_usage_error(cache({}), "");
  check_usage_error(cache({"frobnicate"}), "frobnicate");
  check_usage_error(cache({"show"}), "id");
  check_usage_error(cache({"clear", "--cache", "/nonexistent/x.db"}), "--yes");
}

// --- kvtune-tune --dry-run --------------------------------------------------------------------------

TEST_CASE("tools: --dry-run sizes every problem's space without a GPU", "[tools]") {
  const Run r = tune({"--suite", "ids", "--dry-run", "--json"});
  check_ok(r);
  const json doc = r.out_json();
  REQUIRE(doc["problems"].size() == 10);
  std::int64_t total = 0;
  for (const auto& p : doc["problems"]) {
    const auto problems = kvtune::tools::parse_entries(json::array({p["problem"]}), "test");
    const auto* problem = problems.front().get();
    CHECK(p["key"] == problem->key());
    CHECK(p["template_hash"] == kvtune::normalize::template_hash());
    // After pruning: exactly what the library would tune.
    const auto& j = p["problem"];
    kvtune::normalize::Problem np;
    np.dtype = j["dtype"] == "f32" ? kvtune::DType::f32 : j["dtype"] == "f16" ? kvtune::DType::f16 : kvtune::DType::bf16;
    np.mode = j["mode"] == "standardize" ? kvtune::NormMode::standardize
              : j["mode"] == "layernorm" ? kvtune::NormMode::layernorm
                                         : kvtune::NormMode::rmsnorm;
    np.cols = j["cols"];
    np.rows = kvtune::normalize::rows_bucket(j["rows"]);
    np.align_bytes = j["align"];
    np.gamma = j["gamma"];
    np.beta = j["beta"];
    np.mean_out = j["mean"];
    np.rstd_out = j["rstd"];
    CHECK(np.key() == p["key"]);
    const auto expected = kvtune::detail::tuning_configs<kvtune::detail::NormalizeFamily>(np, 0).size();
    CHECK(p["space"]["tuned"].get<std::size_t>() == expected);
    CHECK(p["space"]["tuned"] <= p["space"]["runnable"]);
    CHECK(p["space"]["runnable"] <= p["space"]["total"]);
    total += p["space"]["tuned"].get<std::int64_t>();
  }
  CHECK(doc["variants"] == total);

  // The human form: a table and a total.
  const Run human = tune({"--suite", "ids", "--dry-run"});
  check_ok(human);
  CHECK_THAT(human.out, Catch::Contains("16384x1024 f32 standardize"));
  CHECK_THAT(human.out, Catch::Contains(std::to_string(total) + " variants to tune"));
}

TEST_CASE("tools: suites large and narrow are what they say", "[tools]") {
  const Run large = tune({"--suite", "large", "--dry-run", "--json"});
  check_ok(large);
  const json large_doc = large.out_json();  // kept alive: a range-for does not extend a temporary's member
  for (const auto& p : large_doc["problems"]) {
    const auto& j = p["problem"];
    const double elem = j["dtype"] == "f32" ? 4 : 2;
    const double bytes = 2.0 * j["rows"].get<double>() * j["cols"].get<double>() * elem;
    INFO(p["describe"]);
    CHECK(bytes >= 256.0 * 1024 * 1024);
  }
  const Run narrow = tune({"--suite", "narrow", "--dry-run", "--json"});
  check_ok(narrow);
  const json narrow_doc = narrow.out_json();
  for (const auto& p : narrow_doc["problems"]) CHECK(p["problem"]["cols"].get<int>() < 64);
  // Several suites at once, comma-separated or repeated; duplicate keys are dropped.
  const Run both = tune({"--suite", "ids,narrow", "--suite", "ids", "--dry-run", "--json"});
  check_ok(both);
  CHECK(both.out_json()["duplicates"].get<int>() >= 10);
}

TEST_CASE("tools: --shard i/n slices are disjoint and cover the list", "[tools]") {
  const json all = tune({"--suite", "ids,narrow,large", "--dry-run", "--json"}).out_json();
  std::multiset<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    const Run r = tune({"--suite", "ids,narrow,large", "--dry-run", "--json", "--shard", std::to_string(i) + "/3"});
    check_ok(r);
    const json slice = r.out_json();
    for (const auto& p : slice["problems"]) seen.insert(p["key"].get<std::string>());
    // Deterministic: the same slice twice is the same list.
    CHECK(r.out_json()["problems"] ==
          tune({"--suite", "ids,narrow,large", "--dry-run", "--json", "--shard", std::to_string(i) + "/3"})
              .out_json()["problems"]);
  }
  std::multiset<std::string> expected;
  for (const auto& p : all["problems"]) expected.insert(p["key"].get<std::string>());
  CHECK(seen == expected);
}

TEST_CASE("tools: dwconv suites size their problems without a GPU", "[tools][heavy]") {
  for (const char* suite : {"mobilenetv2", "convnext", "mamba", "s4", "large31"}) {
    INFO(suite);
    const Run r = tune({"--suite", suite, "--dry-run", "--json"});
    check_ok(r);
    const json doc = r.out_json();
    REQUIRE(doc["problems"].size() >= 4);
    REQUIRE(doc["problems"].size() <= 6);
    std::set<std::string> directions;
    std::int64_t total = 0;
    for (const auto& p : doc["problems"]) {
      INFO(p["describe"]);
      CHECK(p["op"] == "dwconv");
      CHECK(p["template_hash"] == kvtune::tools::find_handler("dwconv")->template_hash());
      CHECK(p["space"]["tuned"].get<std::int64_t>() > 0);
      CHECK(p["space"]["tuned"] <= p["space"]["runnable"]);
      CHECK(p["space"]["runnable"] <= p["space"]["total"]);
      directions.insert(p["problem"]["direction"].get<std::string>());
      total += p["space"]["tuned"].get<std::int64_t>();
      // The explicit entry parses back to the same key.
      const auto again = kvtune::tools::parse_entries(json::array({p["problem"]}), "test");
      CHECK(again.front()->key() == p["key"]);
      const auto info = kvtune::tools::find_handler("dwconv")->key_info(p["key"], 9);
      REQUIRE(info);
      CHECK(info->describe == p["describe"]);
      CHECK_FALSE(info->seed_label.empty());
      CHECK_FALSE(info->heuristic_label.empty());
      CHECK(info->model_bytes > 0);
      CHECK(info->model_flops > 0);
    }
    CHECK(doc["variants"] == total);
    if (std::string(suite) != "large31") CHECK(directions.size() == 3);
  }
  const json mamba = tune({"--suite", "mamba", "--dry-run", "--json"}).out_json();
  for (const auto& p : mamba["problems"]) {
    CHECK(p["problem"]["layout"] == "ncl");
    CHECK(p["problem"]["causal"] == true);
    CHECK(p["problem"]["kernel"] == 4);
  }
  const Run convnext = tune({"--suite", "convnext", "--dry-run"});
  check_ok(convnext);
  CHECK_THAT(convnext.out, Catch::Contains("forward nchw f32 32x96x56x56 k=7x7 pad=3 +bias"));
}

TEST_CASE("tools: dwconv shapes entries parse, bad ones are refused with the field", "[tools]") {
  TempDir dir;
  const auto shapes = shapes_file(dir, R"({"problems": [
    {"op": "normalize", "rows": 8, "cols": 8},
    {"op": "dwconv", "direction": "backward_data", "layout": "nhwc", "dtype": "bf16", "n": 3, "c": 64, "h": 28,
     "w": 28, "kernel": [3, 5], "stride": [1, 2], "dilation": 1, "padding": [1, 1, 2, 2]},
    {"op": "dwconv", "direction": "backward_weight", "layout": "nlc", "n": 4, "c": 256, "l": 1024, "kernel": 4,
     "causal": true, "bias": true, "deterministic": false}
  ]})");
  const Run r = tune({"--shapes", shapes, "--dry-run", "--json"});
  check_ok(r);
  const json doc = r.out_json();
  REQUIRE(doc["problems"].size() == 3);
  CHECK(doc["problems"][1]["key"] ==
        "dwconv,backward_data,nhwc,bf16,n<=4,c=64,h=28,w=28,k=3x5,s=1x2,d=1x1,pad=1,1,2,2,bias=0,det=1,align=16");
  CHECK(doc["problems"][2]["key"] ==
        "dwconv,backward_weight,nlc,f32,n<=4,c=256,h=1,w=1024,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=0,align=16");
  CHECK(doc["problems"][2]["describe"] == "backward_weight nlc f32 4x256x1024 k=4 causal +dbias nondet");
  for (int i : {1, 2}) {
    CHECK(doc["problems"][i]["space"]["tuned"].get<std::int64_t>() > 0);
    const auto again = kvtune::tools::parse_entries(json::array({doc["problems"][i]["problem"]}), "test");
    CHECK(again.front()->key() == doc["problems"][i]["key"]);
  }

  const auto bad = [&](const std::string& entry, const std::string& what) {
    INFO(entry);
    check_usage_error(tune({"--shapes", shapes_file(dir, "[" + entry + "]", "bad.json"), "--dry-run"}),
                      "problems[0]: " + what);
  };
  const std::string ncl = R"("op": "dwconv", "layout": "ncl", "n": 2, "c": 64, "l": 256)";
  bad("{" + ncl + R"(, "kernel": 3, "colour": "red"})", "unknown field 'colour' for operator dwconv");
  bad("{" + ncl + R"(, "kernel": 0})", "'kernel' must be at least 1");
  bad(R"({"op": "dwconv", "layout": "ncl", "n": 2, "c": 64, "l": 8, "kernel": 11, "padding": 1})",
      "'kernel': the dilated kernel is larger than the padded input");
  bad("{" + ncl + R"(, "h": 4, "kernel": 3})", "'h' must be omitted or 1");
  bad(R"({"op": "dwconv", "layout": "nchv", "n": 2, "c": 64, "h": 8, "w": 8, "kernel": 3})", "unknown layout 'nchv'");
  bad("{" + ncl + R"(})", "missing field 'kernel'");
  bad("{" + ncl + R"(, "kernel": 64})", "'kernel': kernel_w must be in 1..63");
  bad("{" + ncl + R"(, "kernel": [3, 3]})", "'kernel' must be an integer or [k] (1D)");
  bad("{" + ncl + R"(, "kernel": 3, "direction": "sideways"})", "unknown direction 'sideways'");
  bad("{" + ncl + R"(, "kernel": 3, "direction": "backward_data", "bias": true})", "'bias' is for forward");
  bad("{" + ncl + R"(, "kernel": 3, "causal": true, "padding": [1, 0]})", "'causal' sets the padding itself");
  bad(R"({"op": "dwconv", "layout": "nchw", "n": 2, "c": 64, "h": 8, "w": 8, "kernel": 3, "causal": true})",
      "'causal' applies to the 1D layouts");
  bad(R"({"op": "dwconv", "layout": "nchw", "n": 2, "c": 64, "w": 8, "kernel": 3})", "missing field 'h'");
  bad(R"({"op": "dwconv", "layout": "nchw", "n": 1000000, "c": 100000, "h": 1000, "w": 1000, "kernel": 3})",
      "1000000 x 100000 x 1000 x 1000 = 1e+17 elements is absurd");
  bad("{" + ncl + R"(, "kernel": 3, "stride": -2})", "'stride' must be at least 1");
  bad(R"({"op": "dwconv", "layout": "ncl", "n": -2, "c": 64, "l": 256, "kernel": 3})", "'n' must be positive");

  // An operator nobody has announced is unknown, listing the known ones.
  check_usage_error(tune({"--shapes", shapes_file(dir, R"([{"op": "matmul", "m": 8}])", "mm.json"), "--dry-run"}),
                    "problems[0]: unknown operator 'matmul' (known: normalize, dwconv, dwconv_decode, dwconv_states)");
}

TEST_CASE("tools: dwconv keys and configs are checked strictly", "[tools]") {
  const auto* h = kvtune::tools::find_handler("dwconv");
  REQUIRE(h != nullptr);
  const std::string key =
      "dwconv,forward,ncl,bf16,n<=8,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16";
  const auto info = h->key_info(key, 9);
  REQUIRE(info);
  CHECK(info->describe == "forward ncl bf16 8x2048x2048 k=4 causal +bias");
  CHECK(info->seed_label == "tiled,rw=1,tx=32,ty=8,vc=1,halo=smem,filter=smem");  // smem-blocked
  for (const std::string& not_a_key : std::vector<std::string>{"dwconv,forward", key + ",", "normalize" + key.substr(6),
        "dwconv,forward,ncl,bf16,n<=08,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16",
        "dwconv,forward,ncl,bf16,n<=6,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16",
        "dwconv,forward,ncl,bf16,n<=8,c=2048,h=2,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16",
        "dwconv,forward,ncl,bf16,n<=8,c=2048,h=1,w=2048,k=1x0,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16",
        "dwconv,forward,ncl,bf16,n<=8,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=2,det=1,align=16",
        "dwconv,forward,ncl,bf16,n<=8,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=32",
        "dwconv,forward,ncl,bf16,n<=8,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=0,align=16",
        "dwconv,forward,ncl,bf16,n<=8,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16 "}) {
    INFO(not_a_key);
    CHECK_FALSE(h->key_info(not_a_key, 9));
  }
  const json seed = {{"kernel", "direct"}, {"rw", 0}, {"tx", 0}, {"ty", 0}, {"vc", 0}, {"halo", 0}, {"filter", 0},
                     {"coalesced", 1}, {"ct", 0}, {"py", 0}, {"tg", 0}, {"splits", 0}, {"atomic", 0}};
  CHECK(h->check_config(key, seed) == "direct,order=coalesced");
  // Pruned (a tile 8x wider than the rows) but correct: accepted, as the cache accepts it.
  const json wide = {{"kernel", "tiled"}, {"rw", 16}, {"tx", 1024}, {"ty", 1}, {"vc", 1}, {"halo", 0}, {"filter", 0},
                     {"coalesced", 0}, {"ct", 0}, {"py", 0}, {"tg", 0}, {"splits", 0}, {"atomic", 0}};
  const auto wide_problem = kvtune::dwconv::problem_from_key(key);
  REQUIRE(wide_problem);
  CHECK_FALSE(kvtune::dwconv::is_valid(*wide_problem, kvtune::dwconv::Config::from_json(wide)));
  CHECK(h->check_config(key, wide) == "tiled,rw=16,tx=1024,ty=1,vc=1,halo=global,filter=reg");
  json wgrad = seed;
  wgrad["kernel"] = "wgrad";
  CHECK_THROWS_AS(h->check_config(key, wgrad), kvtune::tools::InputError);
  // Tensor-core tiles: channel-last 16-bit problems only.
  const json mma = kvtune::dwconv::Config(kvtune::dwconv::mma_config(16, 1, 4, 4)).to_json();
  CHECK_THROWS_AS(h->check_config(key, mma), kvtune::tools::InputError);
  const std::string nlc = "dwconv,forward,nlc,bf16,n<=8,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16";
  CHECK(h->check_config(nlc, mma) == "mma,cb=16,tr=1,nt=4,warps=4");
  CHECK_THROWS_AS(h->check_config(key, json{{"kernel", "tiled"}}), kvtune::tools::InputError);
  CHECK_THROWS_AS(h->check_config("dwconv,nonsense", seed), kvtune::tools::InputError);
}

TEST_CASE("tools: dwconv SPACE is the declared axes, every tuned variant inside them", "[tools]") {
  // --dry-run's SPACE: tiled 32 runs x 11 x 11 thread shapes x 4 vectors x halo x filter x 4 row counts
  // x 4 run counts, plus flat items (32 runs x 6 block sizes of 32..1024 x 4 vectors x 4 row counts), 2
  // direct designs and tensor-core tiles (8 channel counts x 5 warp counts x 5 row counts x 16 n-tiles); wgrad 11 x 11 block shapes x 64 tap groups x 16 splits x 2 reductions x 29
  // (runs, vectors, rows) points, plus staged x planes: 11 thread counts x 64 tap groups x 64 splits x 2
  // reductions x 29 points. A tuned variant outside the axes would add to it (weight gradients' vectors
  // and rows once did, uncounted; the staged planes' splits too, before they were declared).
  const auto* h = kvtune::tools::find_handler("dwconv");
  REQUIRE(h != nullptr);
  const std::string rest = ",nchw,f32,n<=32,c=144,h=56,w=56,k=3x3,s=1x1,d=1x1,pad=1,1,1,1,bias=0,det=1,align=16";
  for (const auto& [direction, total] : {std::pair<std::string, std::int64_t>{"forward", 32 * 11 * 11 * 4 * 2 * 2 * 4 * 4 + 32 * 6 * 4 * 4 + 2 + 8 * 5 * 5 * 16},
                                         {"backward_weight", 11LL * 11 * 64 * 16 * 2 * 29 + 11LL * 64 * 64 * 2 * 29}}) {
    std::string why;
    const auto problem = h->from_key("dwconv," + direction + rest, &why);
    REQUIRE(problem != nullptr);
    const auto space = problem->space();
    INFO(direction);
    CHECK(space.total == total);
    CHECK(space.runnable >= space.tuned);
    CHECK(space.runnable < space.total);
    CHECK(space.tuned > 30);
  }
}

TEST_CASE("tools: --compile-only compiles a dwconv problem's variants without a GPU", "[tools]") {
  TempDir dir;
  const auto shapes = shapes_file(
      dir, R"([{"op": "dwconv", "direction": "forward", "layout": "ncl", "n": 2, "c": 64, "l": 256, "kernel": 3}])");
  const json dry = tune({"--shapes", shapes, "--dry-run", "--json"}).out_json();
  const auto variants = dry["variants"].get<std::int64_t>();
  REQUIRE(variants > 0);
  const Run r = tune({"--shapes", shapes, "--compile-only", "--arch", "sm_90", "--cache", dir.file("dw.db")});
  check_ok(r);
  REQUIRE_FALSE(r.out_lines().empty());
  CHECK(r.out_lines().back() == "compiled " + std::to_string(variants) + " variants, 0 failed");
}

// --- kvtune-tune --compile-only ---------------------------------------------------------------------

TEST_CASE("tools: --compile-only stores every variant's cubin without a GPU", "[tools][heavy]") {
  TempDir dir;
  const auto shapes = shapes_file(dir, kSmallShapes);
  const std::string db = dir.file("cubins.db");
  const json dry = tune({"--shapes", shapes, "--dry-run", "--json"}).out_json();
  REQUIRE(dry["variants"].get<std::int64_t>() > 0);
  // One cubin per distinct kernel: variants that differ only in how the host launches them (the
  // row chunk of split rows) share one.
  std::set<std::string> kernels;
  for (const auto& problem : kvtune::tools::parse_entries(json::parse(kSmallShapes)["problems"], "test"))
    for (const auto& v : problem->variants("sm_90")) kernels.insert(kvtune::detail::compile_hash(v.request));
  const auto variants = static_cast<std::int64_t>(kernels.size());
  REQUIRE(variants > 0);
  CHECK(variants <= dry["variants"].get<std::int64_t>());
  const std::string last = "compiled " + std::to_string(variants) + " variants, 0 failed";

  const Run first = tune({"--shapes", shapes, "--compile-only", "--arch", "sm_90", "--cache", db});
  check_ok(first);
  REQUIRE_FALSE(first.out_lines().empty());
  CHECK(first.out_lines().back() == last);
  auto store = kvtune::cache::Store::open_existing(db, false);
  const auto binaries = store->binary_infos();
  CHECK(static_cast<std::int64_t>(binaries.size()) == variants);
  for (const auto& b : binaries) {
    CHECK(b.arch == "sm_90");
    CHECK(store->find_binary(b.hash).has_value());  // intact
  }
  // Again: everything is already there, nothing is compiled twice.
  const Run second = tune({"--shapes", shapes, "--compile-only", "--arch", "sm_90", "--cache", db, "--json"});
  check_ok(second);
  const json j = second.out_json();
  CHECK(j["variants"] == variants);
  CHECK(j["already_cached"] == variants);
  CHECK(j["failed"] == 0);

  // --cache after the flags or before: the same file.
  CHECK(kvtune::cache::Store::open_existing(db, false)->binary_infos().size() == binaries.size());
}

TEST_CASE("tools: --compile-only refuses a bad --arch", "[tools]") {
  TempDir dir;
  const auto shapes = shapes_file(dir, kSmallShapes);
  const std::string db = dir.file("c.db");
  check_usage_error(tune({"--shapes", shapes, "--compile-only", "--cache", db}), "needs --arch");
  for (const char* arch : {"sm_12", "sm_75", "banana", "compute_90"}) {
    INFO(arch);
    check_usage_error(tune({"--shapes", shapes, "--compile-only", "--arch", arch, "--cache", db}),
                      std::string("--arch ") + arch);
  }
  CHECK_FALSE(fs::exists(db));  // refused before the cache was created
}

// --- bad input ---------------------------------------------------------------------------------------

TEST_CASE("tools: JSON positions are line and column", "[tools]") {
  using kvtune::tools::position_of;
  const std::string text = "{\n  \"a\": 1,\n  \"b\": x\n}";
  const auto at = position_of(text, text.find('x'));
  CHECK(at.line == 3);
  CHECK(at.column == 8);
  CHECK(position_of(text, 0).line == 1);
  CHECK(position_of(text, 0).column == 1);
  CHECK(position_of("ä\nb", 3).column == 1);  // UTF-8 continuation bytes are not columns
}

TEST_CASE("tools: bad shapes files are refused with the reason", "[tools]") {
  TempDir dir;
  const auto bad = [&](const std::string& text, const std::string& what) {
    INFO(text);
    check_usage_error(tune({"--shapes", shapes_file(dir, text), "--dry-run"}), what);
  };
  check_usage_error(tune({"--shapes", dir.file("missing.json"), "--dry-run"}), "cannot read");
  bad("{\"problems\": [\n  {\"op\": \"normalize\", \"rows\": 8,\n   \"cols\": ,}\n]}", "shapes.json:3:12: malformed JSON");
  bad("[{\"op\": \"normalize\", \"rows\": 8, \"cols\": 8}", "shapes.json:1:43: malformed JSON");
  bad("", "shapes.json:1:1: malformed JSON");
  // Found by fuzz_shapes (fuzz/regressions/): a number beyond double range, and nesting deep
  // enough that printing the value would overflow the stack.
  bad(R"([{"op": "normalize", "rows": 8, "cols": 1e999}])", "shapes.json: malformed JSON: number overflow");
  bad("[{\"op\": \"normalize\", \"rows\": 8, \"cols\": 8, \"gamma\": " + std::string(100000, '[') +
          std::string(100000, ']') + "}]",
      "shapes.json: malformed JSON: nested deeper than 64 levels");
  bad(R"([{"op": "conv3d", "rows": 8}])", "unknown operator 'conv3d'");
  bad(R"([{"rows": 8, "cols": 8}])", "missing field 'op'");
  bad(R"([{"op": "normalize", "rows": 8, "colz": 8}])", "unknown field 'colz'");
  bad(R"([{"op": "normalize", "rows": 8}])", "missing field 'cols'");
  bad(R"([{"op": "normalize", "rows": -4, "cols": 8}])", "'rows' must be positive");
  bad(R"([{"op": "normalize", "rows": 0, "cols": 8}])", "'rows' must be positive");
  bad(R"([{"op": "normalize", "rows": 1000000000000, "cols": 1000000}])", "absurd");
  bad(R"([{"op": "normalize", "rows": 4096, "cols": 1e300}])", "must be an integer");
  bad(R"([{"op": "normalize", "rows": 18446744073709551615, "cols": 8}])", "absurd");
  bad(R"([{"op": "normalize", "rows": "8", "cols": 8}])", "'rows' must be an integer");
  bad(R"([{"op": "normalize", "rows": 8.5, "cols": 8}])", "'rows' must be an integer");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "dtype": "f64"}])", "unknown dtype 'f64'");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "mode": "batchnorm"}])", "unknown mode 'batchnorm'");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "align": 3}])", "'align' must be 2, 4, 8 or 16");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "align": 2}])", "below the 4-byte element");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "mode": "rmsnorm", "beta": true}])", "rmsnorm takes no beta");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "gamma": "yes"}])", "'gamma' must be true or false");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "direction": "backward_data"}])", "directions 'forward' and 'backward'");
  bad(R"({"problems": [], "extra": 1})", "unknown top-level field 'extra'");
  bad(R"("just a string")", "expected an array");
  bad(R"([42])", "problems[0]: expected an object");
}

TEST_CASE("tools: shapes entries round-trip and keep alignment", "[tools]") {
  TempDir dir;
  const auto shapes = shapes_file(dir, R"({"problems": [
    {"op": "normalize", "rows": 100000, "cols": 37},
    {"op": "normalize", "rows": 1000, "cols": 37, "align": 16, "dtype": "f16", "mode": "layernorm",
     "gamma": true, "beta": true, "mean": true, "rstd": true, "eps": 1e-6},
    {"op": "normalize", "direction": "forward", "layout": "row_major", "rows": 3, "cols": 1024, "align": 4,
     "mode": "standardize", "ddof": 1}]})");
  const auto problems = kvtune::tools::load_shapes(shapes);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0]->key() == "normalize,f32,standardize,cols=37,rows<=131072,align=4,affine=,stats=");
  CHECK(problems[1]->key() == "normalize,f16,layernorm,cols=37,rows<=1024,align=16,affine=gb,stats=mr");
  CHECK(problems[2]->key() == "normalize,f32,standardize,cols=1024,rows<=4,align=4,affine=,stats=");
  for (const auto& p : problems) {
    const auto again = kvtune::tools::parse_entries(json::array({p->to_json()}), "again");
    CHECK(again.front()->key() == p->key());
    CHECK(again.front()->to_json() == p->to_json());
  }
}

TEST_CASE("tools: backward shapes entries, their suite and their checks", "[tools]") {
  TempDir dir;
  const auto shapes = shapes_file(dir, R"({"problems": [
    {"op": "normalize", "direction": "backward", "rows": 4096, "cols": 1024, "dtype": "bf16", "mode": "layernorm",
     "gamma": true, "dgamma": true, "dbeta": true, "saved": true},
    {"op": "normalize", "direction": "backward", "rows": 100, "cols": 37, "mode": "standardize", "ddof": 1}]})");
  const auto problems = kvtune::tools::load_shapes(shapes);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0]->key() ==
        "normalize,bf16,layernorm,backward,cols=1024,rows<=4096,align=16,gamma=g,grads=gb,stats=saved");
  CHECK(problems[1]->key() ==
        "normalize,f32,standardize,backward,cols=37,rows<=128,align=4,gamma=,grads=,stats=recompute");
  for (const auto& p : problems) {
    const auto again = kvtune::tools::parse_entries(json::array({p->to_json()}), "again");
    CHECK(again.front()->key() == p->key());
    CHECK(again.front()->to_json() == p->to_json());
    CHECK(p->space().tuned > 0);
    CHECK_FALSE(p->variants("sm_90").empty());
  }
  const auto bad = [&](const std::string& text, const std::string& what) {
    INFO(text);
    CHECK_THROWS_WITH(kvtune::tools::parse_entries(json::parse(text), "shapes"), Catch::Contains(what));
  };
  bad(R"([{"op": "normalize", "direction": "backward", "rows": 8, "cols": 8, "dgamma": true}])", "dgamma needs gamma");
  bad(R"([{"op": "normalize", "direction": "backward", "rows": 8, "cols": 8, "mode": "rmsnorm", "dbeta": true}])",
      "rmsnorm has no dbeta");
  bad(R"([{"op": "normalize", "direction": "backward", "rows": 8, "cols": 8, "mean": true}])", "forward field");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "saved": true}])", "backward field");
  // kvtune-tune sizes the backward suite's spaces without a GPU.
  const auto r = tune({"--suite", "backward", "--dry-run"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("layernorm backward"));
}

TEST_CASE("tools: the wide suite's rows of 2^20 and more have spaces of split rows", "[tools][wide]") {
  const Run r = tune({"--suite", "wide", "--dry-run", "--json"});
  check_ok(r);
  const json doc = r.out_json();
  REQUIRE(doc["problems"].size() >= 6);
  bool backward = false;
  for (const auto& p : doc["problems"]) {
    INFO(p.dump());
    CHECK(p["problem"]["cols"].get<std::int64_t>() >= (1 << 20));
    backward |= p["problem"].value("direction", "forward") == "backward";
    const auto key = p["key"].get<std::string>();
    const auto problem = kvtune::normalize::problem_from_key(key);
    REQUIRE(problem.has_value());
    const auto space = kvtune::normalize::enumerate(*problem);
    REQUIRE_FALSE(space.empty());
    for (const auto& c : space) CHECK(c.splits > 1);  // no one-block variant holds such a row
  }
  CHECK(backward);
}

TEST_CASE("tools: a cache file that is not a kvtune database is refused, not replaced", "[tools]") {
  TempDir dir;
  const std::string text = dir.file("notes.txt");
  write_bytes(text, "these are my notes, not a database\n");
  ::chmod(text.c_str(), 0600);
  check_usage_error(cache({"list", "--cache", text}), "is not a kvtune cache");
  check_usage_error(tune({"--suite", "ids", "--compile-only", "--arch", "sm_90", "--cache", text}),
                    "is not a kvtune cache");
  CHECK(read_bytes(text) == "these are my notes, not a database\n");  // untouched, not set aside

  const std::string other = dir.file("other.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(other.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "CREATE TABLE photos(id INTEGER, path TEXT)", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  ::chmod(other.c_str(), 0600);
  check_usage_error(cache({"stats", "--cache", other}), "is not a kvtune cache");
  check_usage_error(cache({"import", example_path(), "--cache", other}), "is not a kvtune cache");

  check_usage_error(cache({"list", "--cache", dir.file("absent.db")}), "does not exist");
  CHECK_FALSE(fs::exists(dir.file("absent.db")));

  const std::string shared = dir.file("shared.db");
  check_ok(cache({"import", example_path(), "--cache", shared}));
  ::chmod(shared.c_str(), 0666);
  check_usage_error(cache({"list", "--cache", shared}), "writable by group or others");
}

TEST_CASE("tools: bad export files import nothing", "[tools]") {
  TempDir dir;
  const json good = current_example();
  const std::string db = example_cache(dir, good);
  const auto before = list_json(db).size();
  const auto bad = [&](const json& doc, const std::string& what) {
    INFO(what);
    check_usage_error(cache({"import", write_example(dir, doc, "bad.json"), "--cache", db, "--overwrite"}), what);
    CHECK(list_json(db).size() == before);
  };
  check_usage_error(cache({"import", dir.file("missing.json"), "--cache", db}), "cannot read");
  write_bytes(dir.file("broken.json"), "{\n \"kvtune_export\": 1,\n \"devices\": [}\n");
  check_usage_error(cache({"import", dir.file("broken.json"), "--cache", db}), "broken.json:3:14: malformed JSON");

  json doc = good;
  doc["kvtune_export"] = 99;
  bad(doc, "export format 99");
  doc = good;
  doc["entries"][3]["op"] = "conv3d";
  bad(doc, "entries[3]: unknown operator 'conv3d'");
  doc = good;
  doc["entries"][3]["op"] = "dwconv";  // a normalize key under the dwconv operator
  bad(doc, "is not a problem key of operator dwconv");
  doc = good;
  doc["entries"][2]["config"]["tpr"] = 3;
  bad(doc, "entries[2]");
  doc = good;
  doc["entries"][2]["problem_key"] = "normalize,f32,nonsense";
  bad(doc, "is not a problem key of operator normalize");
  doc = good;
  doc["entries"][1]["label"] = "tpr=1,rpb=1,vw=4B,keep=reg,stat=twopass";
  bad(doc, "does not match its config");
  doc = good;
  doc["entries"][1]["device_id"] = "feedfeedfeedfeed";
  bad(doc, "is not among the file's devices");
  doc = good;
  doc["entries"][0]["trials"][0]["status"] = "fine";
  bad(doc, "entries[0].trials[0]: unknown status 'fine'");
  doc = good;
  doc["devices"][0]["colour"] = "green";
  bad(doc, "devices[0]: unknown field 'colour'");
}

// --- kvtune-cache on an imported example ---------------------------------------------------------------

TEST_CASE("tools: import, list, show, stats and export of the example", "[tools]") {
  TempDir dir;
  const json doc = current_example();
  const std::string db = dir.file("cache.db");
  const Run imported = cache({"import", write_example(dir, doc), "--cache", db});
  check_ok(imported);
  CHECK_THAT(imported.out, Catch::Contains("imported 16 entries"));

  const json entries = list_json(db);
  REQUIRE(entries.size() == doc["entries"].size());
  for (const auto& e : entries) {
    CHECK(e["origin"] == "imported");
    CHECK(e["binary_hash"] == "");  // never binaries: the importing machine compiles
    CHECK(e["stale"] == false);
  }
  // --cache before or after the subcommand.
  CHECK(cache({"--cache", db, "list"}).out == cache({"list", "--cache", db}).out);
  CHECK(cache({"--cache", db, "--json", "list"}).out == cache({"list", "--json", "--cache", db}).out);
  const Run human = cache({"list", "--cache", db});
  check_ok(human);
  CHECK(human.out_lines().size() == entries.size() + 2);  // header, rows, count
  CHECK_THAT(human.out, Catch::Contains("16384x1024 f32 standardize"));

  // Filters.
  CHECK(list_json(db, {"--device", "H100"}).size() == 4);
  CHECK(list_json(db, {"--device", entries[0]["device_id"].get<std::string>().substr(0, 6)}).size() >= 1);
  CHECK(list_json(db, {"--op", "normalize"}).size() == entries.size() - 2);
  const json dwconv = list_json(db, {"--op", "dwconv"});
  REQUIRE(dwconv.size() == 2);
  for (const auto& e : dwconv) CHECK(e["stale"] == false);
  CHECK_THAT(human.out, Catch::Contains("forward ncl bf16 8x2048x2048 k=4 causal +bias"));
  CHECK(list_json(db, {"--stale"}).empty());
  CHECK(list_json(db, {"--fresh"}).size() == entries.size());
  check_usage_error(cache({"list", "--cache", db, "--op", "conv3d"}), "unknown operator");

  // show: by id prefix, with every trial of the run.
  const json& first = doc["entries"][0];
  std::string id;
  for (const auto& e : entries)
    if (e["problem_key"] == first["problem_key"] && e["device_id"] == first["device_id"]) id = e["id"];
  REQUIRE_FALSE(id.empty());
  const Run show = cache({"show", id.substr(0, 6), "--cache", db, "--json"});
  check_ok(show);
  const json shown = show.out_json();
  CHECK(shown["variant"] == first["label"]);
  CHECK(shown["trials"].size() == first["trials"].size());
  int winners = 0;
  for (const auto& t : shown["trials"]) {
    if (t["role"].get<std::string>().find("winner") != std::string::npos) ++winners;
    CHECK(!t["status"].get<std::string>().empty());
  }
  CHECK(winners == 1);
  CHECK(shown["seed_variant"] != "");
  const Run show_human = cache({"show", id, "--cache", db});
  check_ok(show_human);
  CHECK_THAT(show_human.out, Catch::Contains("winner") && Catch::Contains("resources_exceeded"));
  // The same key on two devices is ambiguous; an unknown id is an error.
  check_usage_error(cache({"show", "normalize,f32,standardize,cols=128,rows<=1024,align=16,affine=,stats=", "--cache", db}),
                    "matches 2 entries");
  check_usage_error(cache({"show", "zzzzzz", "--cache", db}), "no cache entry");

  // stats
  const Run stats = cache({"stats", "--cache", db, "--json"});
  check_ok(stats);
  const json s = stats.out_json();
  CHECK(s["entries"] == entries.size());
  CHECK(s["devices"] == 2);
  CHECK(s["trials"] == trial_count(doc));
  CHECK(s["schema_version"] == kvtune::cache::Store::kSchemaVersion);
  check_ok(cache({"stats", "--cache", db}));

  // export -> import elsewhere gives the same entries, times and trials.
  const std::string exported = dir.file("exported.json");
  check_ok(cache({"export", exported, "--cache", db}));
  const json again = json::parse(read_bytes(exported));
  CHECK(again["entries"].size() == doc["entries"].size());
  CHECK_THAT(read_bytes(exported), !Catch::Contains("image"));
  const std::string db2 = dir.file("second.db");
  check_ok(cache({"import", exported, "--cache", db2}));
  const json entries2 = list_json(db2);
  REQUIRE(entries2.size() == entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    CHECK(entries2[i]["id"] == entries[i]["id"]);
    CHECK(entries2[i]["variant"] == entries[i]["variant"]);
    CHECK(entries2[i]["median_ms"] == entries[i]["median_ms"]);
  }
  CHECK(cache({"stats", "--cache", db2, "--json"}).out_json()["trials"] == trial_count(doc));
  const Run to_stdout = cache({"export", "-", "--cache", db});
  check_ok(to_stdout);
  CHECK(json::parse(to_stdout.out)["entries"].size() == entries.size());

  // Importing again: present entries are kept unless --overwrite.
  const Run twice = cache({"import", exported, "--cache", db, "--json"});
  check_ok(twice);
  CHECK(twice.out_json()["skipped"] == entries.size());
  const Run overwrite = cache({"import", exported, "--cache", db, "--json", "--overwrite"});
  check_ok(overwrite);
  CHECK(overwrite.out_json()["replaced"] == entries.size());
  CHECK(cache({"stats", "--cache", db, "--json"}).out_json()["trials"] == trial_count(doc));
}

TEST_CASE("tools: the default cache is the library's", "[tools]") {
  TempDir dir;
  const std::string xdg = dir.file("xdg");
  const std::vector<std::string> env = {"XDG_CACHE_HOME=" + xdg, "KVTUNE_CACHE"};
  check_ok(cache({"import", example_path()}, env));
  const Run r = cache({"stats", "--json"}, env);
  check_ok(r);
  CHECK(r.out_json()["cache"] == xdg + "/kvtune/cache.sqlite");
  CHECK(r.out_json()["entries"] == json::parse(read_bytes(example_path()))["entries"].size());
  // KVTUNE_CACHE="" is the library's in-memory cache: there is no file to inspect.
  check_usage_error(cache({"list"}, {"XDG_CACHE_HOME=" + xdg, "KVTUNE_CACHE="}), "KVTUNE_CACHE is empty");
  const std::string explicit_path = dir.file("explicit.db");
  check_ok(cache({"import", example_path()}, {"KVTUNE_CACHE=" + explicit_path}));
  CHECK(fs::exists(explicit_path));
}

TEST_CASE("tools: staleness rules", "[tools]") {
  using kvtune::cache::DeviceRow;
  using kvtune::cache::Winner;
  const kvtune::tools::CurrentVersions now{13000, "0.1.0"};
  DeviceRow h200;
  h200.id = "a";
  h200.name = "NVIDIA H200";
  h200.cc_major = 9;
  h200.sm_count = 132;
  h200.driver_version = 13000;
  h200.nvrtc_version = 13000;
  h200.kvtune_version = "0.1.0";
  h200.updated_at = 100;
  Winner w;
  w.op = "normalize";
  w.problem_key = "normalize,f32,standardize,cols=8,rows<=8,align=16,affine=,stats=";
  w.device_id = "a";
  w.template_hash = kvtune::normalize::template_hash();

  using kvtune::tools::stale_reasons;
  CHECK(stale_reasons(w, &h200, {h200}, now).empty());
  Winner old_template = w;
  old_template.template_hash = "0123456789abcdef";
  REQUIRE(stale_reasons(old_template, &h200, {h200}, now).size() == 1);
  CHECK(stale_reasons(old_template, &h200, {h200}, now)[0].rfind("template", 0) == 0);
  DeviceRow old_nvrtc = h200;
  old_nvrtc.nvrtc_version = 12040;
  CHECK(stale_reasons(w, &old_nvrtc, {old_nvrtc}, now).at(0).rfind("nvrtc", 0) == 0);
  DeviceRow old_kvtune = h200;
  old_kvtune.kvtune_version = "0.0.9";
  CHECK(stale_reasons(w, &old_kvtune, {old_kvtune}, now).at(0).rfind("kvtune", 0) == 0);
  // The same GPU model recorded later with another driver supersedes the row.
  DeviceRow newer_driver = h200;
  newer_driver.id = "b";
  newer_driver.driver_version = 13010;
  newer_driver.updated_at = 200;
  CHECK(stale_reasons(w, &h200, {h200, newer_driver}, now).at(0).rfind("driver", 0) == 0);
  CHECK(stale_reasons(w, &newer_driver, {h200, newer_driver}, now).empty());
  // Another model with another driver does not.
  DeviceRow other_model = newer_driver;
  other_model.name = "NVIDIA H100";
  CHECK(stale_reasons(w, &h200, {h200, other_model}, now).empty());
  // No device row: only the template can be judged.
  CHECK(stale_reasons(w, nullptr, {}, now).empty());
  // An operator this build does not have: its template cannot be judged.
  Winner foreign = old_template;
  foreign.op = "matmul";
  CHECK(stale_reasons(foreign, &h200, {h200}, now).empty());
  // dwconv's template is judged like normalize's.
  Winner dwconv = old_template;
  dwconv.op = "dwconv";
  REQUIRE(stale_reasons(dwconv, &h200, {h200}, now).size() == 1);
  dwconv.template_hash = kvtune::tools::find_handler("dwconv")->template_hash();
  CHECK(stale_reasons(dwconv, &h200, {h200}, now).empty());
}

TEST_CASE("tools: list --stale, prune and verify", "[tools]") {
  TempDir dir;
  json doc = current_example();
  doc["entries"][0]["template_hash"] = "0123456789abcdef";  // an older template
  const std::string db = example_cache(dir, doc);
  const std::size_t total = doc["entries"].size();

  const json stale = list_json(db, {"--stale"});
  REQUIRE(stale.size() == 1);
  CHECK(stale[0]["stale_reasons"][0].get<std::string>().rfind("template", 0) == 0);
  const Run listed = cache({"list", "--cache", db});
  CHECK_THAT(listed.out, Catch::Contains("template"));

  const Run verify_stale = cache({"verify", "--cache", db});
  INFO(verify_stale.out);
  CHECK(verify_stale.code == 1);
  CHECK_THAT(verify_stale.out, Catch::Contains("stale: template"));

  check_usage_error(cache({"prune", "--cache", db}), "at least one of");
  const Run dry = cache({"prune", "--stale", "--dry-run", "--cache", db});
  check_ok(dry);
  CHECK_THAT(dry.out, Catch::Contains("would prune 1 entries"));
  CHECK(list_json(db).size() == total);
  check_ok(cache({"prune", "--stale", "--cache", db}));
  CHECK(list_json(db).size() == total - 1);
  CHECK(list_json(db, {"--stale"}).empty());

  const Run verify_clean = cache({"verify", "--cache", db});
  INFO(verify_clean.out);
  CHECK(verify_clean.code == 0);
  CHECK_THAT(verify_clean.out, Catch::Contains("0 problems"));

  // --older-than: the example's even entries are 10 days old, odd ones 1 day.
  const Run old = cache({"prune", "--older-than", "5", "--cache", db, "--json"});
  check_ok(old);
  const auto after_age = list_json(db);
  CHECK(after_age.size() == (total - 1) - old.out_json()["entries"].size());
  CHECK(old.out_json()["entries"].size() == total / 2 - 1);  // entry 0 (even) was pruned as stale already
  for (const auto& e : after_age) CHECK(e["created_at"].get<std::int64_t>() > std::time(nullptr) - 5 * 86400);

  // --device, combined with nothing else: every entry of that device.
  check_ok(cache({"prune", "--device", "H100", "--cache", db}));
  CHECK(list_json(db, {"--device", "H100"}).empty());

  // clear
  check_ok(cache({"clear", "--yes", "--cache", db}));
  CHECK(list_json(db).empty());
  CHECK(cache({"stats", "--cache", db, "--json"}).out_json()["devices"] == 0);
}

TEST_CASE("tools: verify finds a damaged binary", "[tools]") {
  TempDir dir;
  const std::string db = dir.file("bins.db");
  check_ok(tune({"--shapes", shapes_file(dir, kSmallShapes), "--compile-only", "--arch", "sm_90", "--cache", db}));
  check_ok(cache({"verify", "--cache", db}));
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &raw) == SQLITE_OK);
  REQUIRE(sqlite3_exec(raw, "UPDATE binaries SET image = X'00010203' WHERE rowid = (SELECT min(rowid) FROM binaries)",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(raw);
  const Run r = cache({"verify", "--cache", db, "--json"});
  CHECK(r.code == 1);
  const json j = r.out_json();
  CHECK(j["ok"] == false);
  REQUIRE(j["problems"].size() == 1);
  CHECK_THAT(j["problems"][0].get<std::string>(), Catch::Contains("does not match its hash"));
}

TEST_CASE("tools: merge joins shards, the newer entry wins", "[tools]") {
  TempDir dir;
  const json doc = current_example();
  const std::string a = example_cache(dir, doc, "a.db");

  // Shard b: the H100 entries only, one of them re-tuned later with another winner, plus cubins.
  json shard = doc;
  shard["entries"] = json::array();
  std::string h100_id;
  for (const auto& d : doc["devices"])
    if (d["name"].get<std::string>().find("H100") != std::string::npos) h100_id = d["id"];
  std::string changed_key, changed_label;
  for (const auto& e : doc["entries"]) {
    if (e["device_id"] != h100_id) continue;
    json copy = e;
    if (changed_key.empty()) {
      // Take the H200's winner of the same problem: a valid, different config.
      for (const auto& other : doc["entries"])
        if (other["problem_key"] == e["problem_key"] && other["device_id"] != h100_id) {
          copy["label"] = other["label"];
          copy["config"] = other["config"];
          changed_label = other["label"];
        }
      REQUIRE(changed_label != e["label"]);
      copy["created_at"] = e["created_at"].get<std::int64_t>() + 1000;
      changed_key = e["problem_key"];
    }
    shard["entries"].push_back(copy);
  }
  const std::string b = example_cache(dir, shard, "b.db");
  check_ok(tune({"--shapes", shapes_file(dir, kSmallShapes), "--compile-only", "--arch", "sm_90", "--cache", b}));
  const auto binaries = kvtune::cache::Store::open_existing(b, false)->binary_infos().size();

  // Without --with-binaries no code comes along (docs/RELIABILITY.md, "Trust model").
  const std::string a_copy = dir.file("a-copy.db");
  std::filesystem::copy_file(a, a_copy);
  const Run configs_only = cache({"merge", b, "--cache", a_copy, "--json"});
  check_ok(configs_only);
  CHECK(configs_only.out_json()["sources"][0]["binaries"] == 0);
  CHECK(configs_only.out_json()["sources"][0]["replaced"] == 1);
  CHECK(kvtune::cache::Store::open_existing(a_copy, false)->binary_infos().empty());

  const Run merged = cache({"merge", b, "--with-binaries", "--cache", a, "--json"});
  check_ok(merged);
  const json m = merged.out_json()["sources"][0];
  CHECK(m["added"] == 0);
  CHECK(m["replaced"] == 1);
  CHECK(m["kept"] == shard["entries"].size() - 1);
  CHECK(m["binaries"] == binaries);
  const json entries = list_json(a);
  CHECK(entries.size() == doc["entries"].size());
  int found = 0;
  for (const auto& e : entries)
    if (e["problem_key"] == changed_key && e["device_id"] == h100_id) {
      CHECK(e["variant"] == changed_label);
      ++found;
    }
  CHECK(found == 1);
  CHECK(kvtune::cache::Store::open_existing(a, false)->binary_infos().size() == binaries);

  // Into an empty cache: everything is added.
  const std::string c = dir.file("c.db");
  const Run into_new = cache({"merge", a, b, "--cache", c, "--json"});
  check_ok(into_new);
  CHECK(into_new.out_json()["sources"][0]["added"] == doc["entries"].size());
  CHECK(list_json(c).size() == doc["entries"].size());

  check_usage_error(cache({"merge", dir.file("nope.db"), "--cache", a}), "does not exist");
  check_usage_error(cache({"merge", a, "--cache", a}), "is the target cache itself");
  write_bytes(dir.file("junk.db"), "junk junk junk junk");
  ::chmod(dir.file("junk.db").c_str(), 0600);
  check_usage_error(cache({"merge", dir.file("junk.db"), "--cache", a}), "is not a kvtune cache");
}

TEST_CASE("tools: report is one self-contained HTML file with its charts", "[tools]") {
  TempDir dir;
  const json doc = current_example();
  const std::string db = example_cache(dir, doc);
  const std::string out = dir.file("report.html");
  const Run r = cache({"report", "--html", out, "--cache", db});
  check_ok(r);
  const std::string html = read_bytes(out);
  const auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count("<svg class=\"roofline\"") == 2);  // one per device
  CHECK(count("<svg class=\"bandwidth\"") == 2);
  CHECK(count("<svg class=\"speedup\"") == 2);
  CHECK(count("<svg class=\"distribution\"") == doc["entries"].size());
  CHECK(count("class=\"point winner\"") == doc["entries"].size());
  CHECK(count("<path class=\"winner\"") == doc["entries"].size());  // marked in each distribution
  CHECK(count("<path class=\"seed\"") >= 10);
  CHECK(count("ceiling copy") >= 2);      // the H200's measured ceilings, in two charts
  CHECK(count("ceiling not measured") >= 1);  // the H100 has none
  CHECK(count("<table class=\"winners\"") == 2);
  // Self-contained: no script, no external resource.
  CHECK(count("<script") == 0);
  CHECK(count("src=") == 0);
  CHECK(count("href=\"http") == 0);
  CHECK(count("@import") == 0);

  // Filters narrow it to one device.
  const std::string h100 = dir.file("h100.html");
  check_ok(cache({"report", "--html", h100, "--device", "H100", "--cache", db}));
  CHECK(read_bytes(h100).find("<svg class=\"roofline\"") != std::string::npos);
  CHECK(read_bytes(h100).find("NVIDIA H200") == std::string::npos);

  // An empty cache still gives a page.
  const std::string empty_db = dir.file("empty.db");
  kvtune::cache::Store::open_existing(empty_db, true);
  const std::string empty = dir.file("empty.html");
  check_ok(cache({"report", "--html", empty, "--cache", empty_db}));
  CHECK_THAT(read_bytes(empty), Catch::Contains("no tuned problems"));

  check_usage_error(cache({"report", "--cache", db}), "--html");
}

// --- recorded problems, leases, tuning runs, search budget ----------------------------------------------

namespace {

using kvtune::cache::Store;

std::string normalize_hash() { return kvtune::tools::find_handler("normalize")->template_hash(); }
std::string dwconv_hash() { return kvtune::tools::find_handler("dwconv")->template_hash(); }

// Keys of both operators, exact ("rows=1000", "n=3") and bucketed, one of a custom bucket bound.
const char kExactNormalize[] = "normalize,f32,standardize,cols=37,rows=1000,align=4,affine=,stats=";
const char kBucketNormalize[] = "normalize,f32,layernorm,cols=1024,rows<=4096,align=16,affine=gb,stats=";
const char kCustomBucketNormalize[] = "normalize,f16,rmsnorm,cols=512,rows<=1000,align=16,affine=g,stats=";
const char kExactDwconv[] =
    "dwconv,forward,ncl,bf16,n=3,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16";
const char kBucketDwconv[] =
    "dwconv,backward_data,nhwc,bf16,n<=4,c=64,h=28,w=28,k=3x5,s=1x2,d=1x1,pad=1,1,2,2,bias=0,det=1,align=16";

kvtune::cache::DeviceRow device_row(const std::string& id, const std::string& name) {
  kvtune::cache::DeviceRow d;
  d.id = id;
  d.name = name;
  d.cc_major = 9;
  d.sm_count = 132;
  d.driver_version = 13000;
  d.nvrtc_version = kvtune::detail::nvrtc_version();
  d.kvtune_version = kvtune::version();
  d.json = "{}";
  return d;
}

// A cache with recorded problems of both operators on device "a1" (an H200 row) and one on "b2"
// (no device row), plus three that this build cannot tune.
std::string recorded_cache(const TempDir& dir) {
  const std::string db = dir.file("recorded.db");
  auto store = Store::open_existing(db, true);
  store->put_device(device_row("a1a1a1a1a1a1a1a1", "NVIDIA H200"));
  for (const char* key : {kExactNormalize, kBucketNormalize, kCustomBucketNormalize})
    store->record_problem("normalize", key, "a1a1a1a1a1a1a1a1", normalize_hash());
  for (int i = 0; i < 2; ++i) store->record_problem("normalize", kBucketNormalize, "a1a1a1a1a1a1a1a1", normalize_hash());
  store->record_problem("normalize", kBucketNormalize, "b2b2b2b2b2b2b2b2", normalize_hash());
  for (const char* key : {kExactDwconv, kBucketDwconv})
    store->record_problem("dwconv", key, "a1a1a1a1a1a1a1a1", dwconv_hash());
  store->record_problem("normalize", "normalize,f32,nonsense", "a1a1a1a1a1a1a1a1", normalize_hash());
  store->record_problem("normalize", kExactNormalize, "a1a1a1a1a1a1a1a1", "0123456789abcdef");
  store->record_problem("matmul", "matmul,m=8,n=8,k=8", "a1a1a1a1a1a1a1a1", "feedfeedfeedfeed");
  return db;
}

}  // namespace

TEST_CASE("tools: handlers rebuild problems from exact and bucket keys", "[tools]") {
  struct Case {
    const char* op;
    const char* key;
    const char* buckets;
    const char* describe;
  };
  for (const Case& c : {Case{"normalize", kExactNormalize, "exact", "1000x37 f32 standardize"},
                        Case{"normalize", kBucketNormalize, "pow2", "4096x1024 f32 layernorm +gamma +beta"},
                        Case{"normalize", kCustomBucketNormalize, "1000", "1000x512 f16 rmsnorm +gamma"},
                        Case{"dwconv", kExactDwconv, "exact", "forward ncl bf16 3x2048x2048 k=4 causal +bias"},
                        Case{"dwconv", kBucketDwconv, "pow2", "backward_data nhwc bf16 4x64x28x28 k=3x5 s=1x2 pad=1,1,2,2"}}) {
    INFO(c.key);
    std::string why;
    const auto problem = kvtune::tools::find_handler(c.op)->from_key(c.key, &why);
    REQUIRE(problem != nullptr);
    CHECK(why.empty());
    CHECK(problem->key() == c.key);
    CHECK(problem->op() == c.op);
    CHECK(problem->buckets() == c.buckets);
    CHECK(problem->describe() == c.describe);
    CHECK(problem->space().tuned > 0);
    // A pow2 key's shapes entry is the same problem again (the child of --isolate relies on it).
    if (std::string(c.buckets) == "pow2")
      CHECK(kvtune::tools::parse_entries(json::array({problem->to_json()}), "again").front()->key() == c.key);
  }
  CHECK(kvtune::tools::bucket_spec(64, false) == "pow2");
  CHECK(kvtune::tools::bucket_spec(100, false) == "100");
  CHECK(kvtune::tools::bucket_spec(64, true) == "exact");

  // Keys the tool cannot read or reproduce: nullptr and a reason, never an exception.
  const auto refused = [](const char* op, const std::string& key, const std::string& reason) {
    INFO(key);
    std::string why;
    CHECK(kvtune::tools::find_handler(op)->from_key(key, &why) == nullptr);
    CHECK_THAT(why, Catch::Contains(reason));
    CHECK(kvtune::tools::find_handler(op)->from_key(key, nullptr) == nullptr);
  };
  refused("normalize", "", "not a normalize problem key");
  refused("normalize", "normalize,f32,nonsense", "not a normalize problem key");
  refused("normalize", kExactDwconv, "not a normalize problem key");
  refused("normalize", "normalize,f32,rmsnorm,cols=8,rows<=8,align=16,affine=gb,stats=", "rmsnorm takes no beta");
  refused("normalize", "normalize,f32,standardize,cols=1024,rows<=4398046511104,align=16,affine=,stats=", "absurd");
  refused("normalize", "normalize,f32,standardize,cols=8,rows<=8,align=2,affine=,stats=", "below the 4-byte element");
  refused("dwconv", "dwconv,forward", "not a dwconv problem key");
  refused("dwconv", kBucketNormalize, "not a dwconv problem key");
  // cudaMalloc'd channels-first bf16 tensors of 2048 channels are 16-byte aligned: align=4 is another call's key.
  refused("dwconv", "dwconv,forward,ncl,bf16,n<=4,c=2048,h=1,w=2048,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=4",
          "cannot reproduce this key");
  std::string why;
  CHECK(kvtune::tools::problem_from_stored_key("normalize", kExactNormalize, "0123456789abcdef", why) == nullptr);
  CHECK_THAT(why, Catch::Contains("another normalize template"));
  CHECK(kvtune::tools::problem_from_stored_key("matmul", "matmul,m=8", "x", why) == nullptr);
  CHECK_THAT(why, Catch::Contains("operator matmul is not available in this build"));
  CHECK(kvtune::tools::problem_from_stored_key("dwconv", kExactDwconv, dwconv_hash(), why) != nullptr);
}

TEST_CASE("tools: --recorded --dry-run lists the recorded problems with their counts", "[tools]") {
  TempDir dir;
  const std::string db = recorded_cache(dir);
  const Run r = tune({"--recorded", "--dry-run", "--json", "--cache", db});
  check_ok(r);
  const json doc = r.out_json();
  // One task per (key, device): the bucket key recorded on two devices is two problems.
  std::multiset<std::string> keys;
  std::map<std::string, std::int64_t> counts;
  for (const auto& p : doc["problems"]) {
    INFO(p.dump());
    keys.insert(p["key"].get<std::string>());
    REQUIRE(p["recorded"].is_object());
    counts[p["key"].get<std::string>() + "|" + p["recorded"]["device_id"].get<std::string>()] = p["recorded"]["count"];
    CHECK(p["space"]["tuned"].get<std::int64_t>() > 0);
    CHECK(p["recorded"]["first_seen"].get<std::int64_t>() > 0);
  }
  CHECK(keys == std::multiset<std::string>{kExactNormalize, kBucketNormalize, kBucketNormalize, kCustomBucketNormalize,
                                           kExactDwconv, kBucketDwconv});
  CHECK(counts[std::string(kBucketNormalize) + "|a1a1a1a1a1a1a1a1"] == 3);
  CHECK(counts[std::string(kBucketNormalize) + "|b2b2b2b2b2b2b2b2"] == 1);
  CHECK(counts[std::string(kExactDwconv) + "|a1a1a1a1a1a1a1a1"] == 1);
  for (const auto& p : doc["problems"])
    if (p["recorded"]["device_id"] == "a1a1a1a1a1a1a1a1") CHECK(p["recorded"]["device_name"] == "NVIDIA H200");

  // The three this build cannot tune are reported with their reasons, not dropped silently.
  const json& skipped = doc["recorded_skipped"];
  REQUIRE(skipped.size() == 3);
  std::set<std::string> reasons;
  for (const auto& s : skipped) reasons.insert(s["reason"].get<std::string>());
  const auto has_reason = [&](const std::string& what) {
    return std::any_of(reasons.begin(), reasons.end(), [&](const std::string& r) { return r.find(what) != std::string::npos; });
  };
  CHECK(has_reason("not a normalize problem key"));
  CHECK(has_reason("another normalize template"));
  CHECK(has_reason("operator matmul is not available"));

  // The human form: counts and devices in the table, the skipped ones below it.
  const Run human = tune({"--recorded", "--dry-run", "--cache", db});
  check_ok(human);
  CHECK_THAT(human.out, Catch::Contains("COUNT") && Catch::Contains("NVIDIA H200 (a1a1a1)") &&
                            Catch::Contains("unknown (b2b2b2)") && Catch::Contains("1000x37 f32 standardize"));
  CHECK_THAT(human.out, Catch::Contains("skipped recorded normalize,f32,nonsense on NVIDIA H200 (a1a1a1) (count 1)"));
  CHECK_THAT(human.out, Catch::Contains("6 problems"));

  // With a suite: a recorded key the suite has already is a duplicate of it.
  {
    auto store = Store::open_existing(db, false);
    store->record_problem("normalize", "normalize,f32,standardize,cols=128,rows<=1024,align=16,affine=,stats=",
                          "a1a1a1a1a1a1a1a1", normalize_hash());
  }
  const json both = tune({"--suite", "ids", "--recorded", "--dry-run", "--json", "--cache", db}).out_json();
  CHECK(both["problems"].size() == 10 + 6);
  CHECK(both["duplicates"] == 1);
  CHECK(both["problems"][0]["recorded"].is_null());

  // Sharding covers recorded problems too.
  std::size_t sharded = 0;
  for (const char* shard : {"0/2", "1/2"})
    sharded += tune({"--recorded", "--dry-run", "--json", "--cache", db, "--shard", shard}).out_json()["problems"].size();
  CHECK(sharded == 7);

  check_usage_error(tune({"--recorded", "--dry-run", "--cache", dir.file("absent.db")}), "does not exist");
  check_usage_error(tune({"--recorded", "--dry-run"}, {"KVTUNE_CACHE="}), "not an in-memory one");
}

TEST_CASE("tools: --recorded without a GPU: nothing to do is fine, something to do needs one", "[tools]") {
  if (kvtune::test::gpu_available()) {
    WARN("a GPU is present: the no-GPU path is not exercised here");
    return;
  }
  TempDir dir;
  const std::string empty = dir.file("empty.db");
  Store::open_existing(empty, true);
  const Run nothing = tune({"--recorded", "--cache", empty});
  check_ok(nothing);
  CHECK_THAT(nothing.out, Catch::Contains("nothing to tune"));
  const Run nothing_json = tune({"--recorded", "--cache", empty, "--json"});
  check_ok(nothing_json);
  CHECK(nothing_json.out_json()["results"].empty());

  const Run r = tune({"--recorded", "--cache", recorded_cache(dir)});
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("no CUDA device available"));
}

TEST_CASE("tools: --budget-variants, --budget-ms and --exhaustive", "[tools]") {
  const std::vector<std::string> dry = {"--suite", "ids", "--dry-run", "--json"};
  const auto with = [&](std::vector<std::string> extra, const std::vector<std::string>& env = {"KVTUNE_BUDGET_VARIANTS",
                                                                                                 "KVTUNE_BUDGET_MS"}) {
    extra.insert(extra.begin(), dry.begin(), dry.end());
    const Run r = tune(extra, env);
    check_ok(r);
    return r.out_json();
  };
  // The library's defaults, its environment, then the flags.
  const json defaults = with({});
  CHECK(defaults["budget_variants"] == kvtune::ContextOptions{}.budget_variants);
  CHECK(defaults["budget_ms"] == 0);
  CHECK(with({}, {"KVTUNE_BUDGET_VARIANTS=7", "KVTUNE_BUDGET_MS=250"})["budget_variants"] == 7);
  CHECK(with({}, {"KVTUNE_BUDGET_VARIANTS=7", "KVTUNE_BUDGET_MS=250"})["budget_ms"] == 250);
  CHECK(with({"--budget-variants", "9"}, {"KVTUNE_BUDGET_VARIANTS=7"})["budget_variants"] == 9);
  const json five = with({"--budget-variants", "5", "--budget-ms", "1500"});
  CHECK(five["budget_variants"] == 5);
  CHECK(five["budget_ms"] == 1500);
  std::int64_t expected = 0;
  for (const auto& p : five["problems"]) expected += std::min<std::int64_t>(5, p["space"]["tuned"]);
  CHECK(five["variants_to_try"] == expected);
  const json exhaustive = with({"--exhaustive"});
  CHECK(exhaustive["budget_variants"] == 0);
  CHECK(exhaustive["variants_to_try"] == exhaustive["variants"]);
  CHECK(with({"--budget-variants", "0"})["budget_variants"] == 0);
  const Run human = tune({"--suite", "ids", "--dry-run", "--exhaustive"});
  check_ok(human);
  CHECK_THAT(human.out, Catch::Contains("search: exhaustive"));
  const Run budgeted = tune({"--suite", "ids", "--dry-run", "--budget-variants", "5"});
  CHECK_THAT(budgeted.out, Catch::Contains("search budget: at most 5 variants per problem, " + std::to_string(expected)));

  // Refused: negative or not a number (exit 2, one line), both spellings of the same setting,
  // and a budget with --compile-only (which compiles every variant).
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--budget-variants", "-1"}), "--budget-variants");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--budget-variants=-3"}), "--budget-variants");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--budget-variants", "many"}), "--budget-variants");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--budget-ms", "-5"}), "--budget-ms");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--exhaustive", "--budget-variants", "10"}),
                    "--exhaustive and --budget-variants exclude each other");
  check_usage_error(tune({"--suite", "ids", "--dry-run", "--exhaustive", "--budget-variants", "0"}),
                    "exclude each other");
  TempDir dir;
  check_usage_error(tune({"--suite", "ids", "--compile-only", "--arch", "sm_90", "--budget-variants", "4", "--cache",
                          dir.file("c.db")}),
                    "--compile-only compiles every variant");
  check_usage_error(tune({"--suite", "ids", "--dry-run"}, {"KVTUNE_BUDGET_VARIANTS=lots"}), "KVTUNE_BUDGET_VARIANTS");
  CHECK_FALSE(fs::exists(dir.file("c.db")));
}

TEST_CASE("tools: kvtune-cache recorded, leases, stats and show of runs", "[tools]") {
  TempDir dir;
  const json doc = current_example();
  const std::string db = example_cache(dir, doc);
  const json& first = doc["entries"][0];
  const std::string key = first["problem_key"], device = first["device_id"], hash = first["template_hash"];
  {
    auto store = Store::open_existing(db, false);
    // Two tuning runs of the first entry: a budgeted first tuning, then a forced one that kept it.
    kvtune::cache::TuningRun run;
    run.op = first["op"];
    run.problem_key = key;
    run.device_id = device;
    run.template_hash = hash;
    run.started_at = 1795251600;
    run.wall_seconds = 12.5;
    run.compile_seconds = 9.25;
    run.bench_seconds = 3.0;
    run.variants_total = 1234;
    run.variants_timed = 40;
    run.compiles = 31;
    run.binaries_reused = 9;
    run.search = "budgeted";
    run.sm_clock_mhz = 1980;
    run.mem_clock_mhz = 3201;
    run.temperature_c = 41;
    run.power_w = 118.5;
    run.winner_label = first["label"];
    run.winner_ms = 0.0125;
    run.json = R"({"winner_spread": 0.01})";
    store->put_tuning_run(run);
    run.started_at += 3600;
    run.search = "exhaustive";
    run.variants_timed = 1234;
    run.incumbent_label = first["label"];
    run.incumbent_ms = 0.0125;
    run.replaced_incumbent = false;
    store->put_tuning_run(run);
    // A run of another device with the same key: not this entry's.
    run.device_id = "ffffffffffffffff";
    store->put_tuning_run(run);
    // Leases: one live, one that expires within two seconds.
    REQUIRE(store->try_acquire_lease(key, device, hash, "host-a:123:0x1", 3600));
    REQUIRE(store->try_acquire_lease(doc["entries"][1]["problem_key"], doc["entries"][1]["device_id"], hash,
                                     "host-b:456:0x2", 1));
    store->record_problem("normalize", kBucketNormalize, device, normalize_hash());
    store->record_problem("normalize", kBucketNormalize, device, normalize_hash());
    store->record_problem("dwconv", kExactDwconv, device, dwconv_hash());
    store->record_problem("normalize", "normalize,f32,nonsense", device, normalize_hash());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));

  // show: the entry's runs, oldest first, with the incumbent's fate.
  kvtune::cache::Winner entry;
  entry.problem_key = key;
  entry.device_id = device;
  entry.template_hash = hash;
  const std::string id = kvtune::tools::entry_id(entry);
  const Run show = cache({"show", id, "--cache", db});
  check_ok(show);
  CHECK_THAT(show.out, Catch::Contains("tuning runs (2)"));
  CHECK_THAT(show.out, Catch::Contains("budgeted") && Catch::Contains("exhaustive") && Catch::Contains("40/1234") &&
                           Catch::Contains("1234/1234") && Catch::Contains("1980") && Catch::Contains("3201") &&
                           Catch::Contains("kept " + first["label"].get<std::string>()) && Catch::Contains("12.50") &&
                           Catch::Contains("9.25"));
  const json shown = cache({"show", id, "--cache", db, "--json"}).out_json();
  REQUIRE(shown["runs"].size() == 2);
  CHECK(shown["runs"][0]["search"] == "budgeted");
  CHECK(shown["runs"][0]["compiles"] == 31);
  CHECK(shown["runs"][0]["binaries_reused"] == 9);
  CHECK(shown["runs"][0]["temperature_c"] == 41);
  CHECK(shown["runs"][0]["power_w"] == 118.5);
  CHECK(shown["runs"][0]["incumbent_label"] == "");
  CHECK(shown["runs"][0]["extra"]["winner_spread"] == 0.01);
  CHECK(shown["runs"][1]["incumbent_label"] == first["label"]);
  CHECK(shown["runs"][1]["replaced_incumbent"] == false);
  // An entry without runs says so.
  kvtune::cache::Winner other;
  other.problem_key = doc["entries"][2]["problem_key"];
  other.device_id = doc["entries"][2]["device_id"];
  other.template_hash = doc["entries"][2]["template_hash"];
  CHECK_THAT(cache({"show", kvtune::tools::entry_id(other), "--cache", db}).out, Catch::Contains("tuning runs (0)"));

  // stats
  const json stats = cache({"stats", "--cache", db, "--json"}).out_json();
  CHECK(stats["leases"]["live"] == 1);
  CHECK(stats["leases"]["expired"] == 1);
  CHECK(stats["recorded"] == 3);
  CHECK(stats["recorded_calls"] == 4);
  CHECK(stats["tuning_runs"] == 3);
  CHECK(stats["tuning_runs_by_search"]["exhaustive"] == 2);
  const Run stats_human = cache({"stats", "--cache", db});
  check_ok(stats_human);
  CHECK_THAT(stats_human.out, Catch::Contains("leases       1 live, 1 expired") &&
                                  Catch::Contains("recorded     3 problems (4 calls)") &&
                                  Catch::Contains("tuning runs  3"));

  // leases
  const json leases = cache({"leases", "--cache", db, "--json"}).out_json()["leases"];
  REQUIRE(leases.size() == 2);
  int live = 0;
  for (const auto& l : leases) {
    if (l["live"] == true) {
      ++live;
      CHECK(l["owner"] == "host-a:123:0x1");
      CHECK(l["problem_key"] == key);
      CHECK(l["device_name"] != "");
    }
    CHECK(l["expires_at"] > l["acquired_at"]);
  }
  CHECK(live == 1);
  const Run leases_human = cache({"leases", "--cache", db});
  check_ok(leases_human);
  CHECK_THAT(leases_human.out, Catch::Contains("host-a:123:0x1") && Catch::Contains("live, ") &&
                                   Catch::Contains("expired ") && Catch::Contains("2 leases: 1 live, 1 expired"));

  // recorded
  const json recorded = cache({"recorded", "--cache", db, "--json"}).out_json()["recorded"];
  REQUIRE(recorded.size() == 3);
  for (const auto& r : recorded) {
    INFO(r.dump());
    if (r["problem_key"] == kBucketNormalize) {
      CHECK(r["count"] == 2);
      CHECK(r["tunable"] == true);
      CHECK(r["describe"] == "4096x1024 f32 layernorm +gamma +beta");
    } else if (r["problem_key"] == kExactDwconv) {
      CHECK(r["tunable"] == true);
    } else {
      CHECK(r["tunable"] == false);
      CHECK_THAT(r["reason"].get<std::string>(), Catch::Contains("not a normalize problem key"));
    }
  }
  CHECK(cache({"recorded", "--cache", db, "--json", "--op", "dwconv"}).out_json()["recorded"].size() == 1);
  CHECK(cache({"recorded", "--cache", db, "--json", "--device", "nosuchgpu"}).out_json()["recorded"].empty());
  const Run recorded_human = cache({"recorded", "--cache", db});
  check_ok(recorded_human);
  CHECK_THAT(recorded_human.out, Catch::Contains("tunes it") && Catch::Contains("skips it: not a normalize problem key") &&
                                     Catch::Contains("3 of 3 recorded problems"));
  check_usage_error(cache({"recorded", "--cache", db, "--op", "conv3d"}), "unknown operator");

  // verify notes the recorded problem it cannot tune, without failing.
  const Run verify = cache({"verify", "--cache", db});
  CHECK(verify.code == 0);
  CHECK_THAT(verify.out, Catch::Contains("note: recorded problem normalize,f32,nonsense"));

  // export --runs carries them; import checks and ignores them (configs only); merge copies them.
  const std::string with_runs = dir.file("runs.json");
  check_ok(cache({"export", with_runs, "--runs", "--cache", db}));
  const json exported = json::parse(read_bytes(with_runs));
  std::size_t exported_runs = 0;
  for (const auto& e : exported["entries"]) exported_runs += e["runs"].size();
  CHECK(exported_runs == 2);
  check_ok(cache({"export", dir.file("plain.json"), "--cache", db}));
  CHECK_FALSE(json::parse(read_bytes(dir.file("plain.json")))["entries"][0].contains("runs"));
  const std::string imported = dir.file("imported.db");
  check_ok(cache({"import", with_runs, "--cache", imported}));
  CHECK(cache({"stats", "--cache", imported, "--json"}).out_json()["tuning_runs"] == 0);
  json bad = exported;
  for (auto& e : bad["entries"])
    if (!e["runs"].empty()) e["runs"][0]["search"] = "sideways";
  check_usage_error(cache({"import", write_example(dir, bad, "bad-runs.json"), "--cache", imported}),
                    "runs[0]: unknown search 'sideways'");
  const std::string merged = dir.file("merged.db");
  const Run merge = cache({"merge", db, "--cache", merged, "--json"});
  check_ok(merge);
  CHECK(merge.out_json()["sources"][0]["runs"] == 2);
  CHECK(cache({"merge", db, "--cache", merged, "--json"}).out_json()["sources"][0]["runs"] == 0);  // kept entries
  CHECK(cache({"stats", "--cache", merged, "--json"}).out_json()["tuning_runs"] == 2);
  CHECK(cache({"stats", "--cache", merged, "--json"}).out_json()["recorded"] == 0);  // recorded stay where they are

  // clear takes everything.
  const Run cleared = cache({"clear", "--yes", "--cache", db, "--json"});
  check_ok(cleared);
  CHECK(cleared.out_json()["removed_tuning_runs"] == 3);
  CHECK(cleared.out_json()["removed_recorded"] == 3);
  CHECK(cleared.out_json()["removed_leases"] == 2);
  const json after = cache({"stats", "--cache", db, "--json"}).out_json();
  CHECK(after["tuning_runs"] == 0);
  CHECK(after["recorded"] == 0);
  CHECK(after["leases"]["live"] == 0);
  CHECK(after["leases"]["expired"] == 0);
}

// --- tuning ------------------------------------------------------------------------------------------

TEST_CASE("tools: tuning without a GPU says so and exits 1", "[tools]") {
  if (kvtune::test::gpu_available()) {
    WARN("a GPU is present: the no-GPU path is not exercised here");
    return;
  }
  TempDir dir;
  for (const auto& extra : {std::vector<std::string>{}, std::vector<std::string>{"--isolate"}}) {
    std::vector<std::string> args = {"--suite", "ids", "--cache", dir.file("t.db")};
    args.insert(args.end(), extra.begin(), extra.end());
    const Run r = tune(args);
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Catch::Contains("no CUDA device available"));
  }
  CHECK_FALSE(fs::exists(dir.file("t.db")));
  // Bad input still comes first, with status 2.
  check_usage_error(tune({"--suite", "ids", "--arch", "sm_90", "--cache", dir.file("t.db")}), "--arch applies");
}

// --- [gpu]: the library side of imports, tuning, resume, isolation ----------------------------------------

TEST_CASE("tools: an imported winner is compiled once and used without tuning", "[tools][gpu]") {
  KVTUNE_REQUIRE_GPU();
  TempDir dir;
  const auto fp = kvtune::detail::read_fingerprint(kvtune::detail::current_device());
  json doc = current_example();
  // Pretend the H200 entries were tuned on this very GPU model.
  const std::string from = doc["devices"][0]["id"];
  doc["devices"][0]["id"] = fp.id();
  for (auto& e : doc["entries"])
    if (e["device_id"] == from) e["device_id"] = fp.id();
  const std::string db = example_cache(dir, doc);

  kvtune::ContextOptions options;
  options.cache_path = db;
  options.policy = kvtune::Policy::tune;
  const auto problems = kvtune::tools::load_suite("ids");
  const kvtune::tools::OpProblem* p = nullptr;
  for (const auto& candidate : problems)
    if (candidate->key() == doc["entries"][0]["problem_key"]) p = candidate.get();
  REQUIRE(p != nullptr);
  {
    kvtune::Context context(options);
    CHECK(p->run_library(context) == doc["entries"][0]["label"]);
    CHECK(context.counters().tunes == 0);
    CHECK(context.counters().compiles == 1);
  }
  kvtune::Context again(options);
  CHECK(p->run_library(again) == doc["entries"][0]["label"]);
  CHECK(again.counters().compiles == 0);  // the binary was stored
  const auto winner =
      kvtune::cache::Store::open_existing(db, false)->find_winner(p->key(), fp.id(), kvtune::normalize::template_hash());
  REQUIRE(winner);
  CHECK(winner->origin == "imported");
  CHECK_FALSE(winner->binary_hash.empty());
}

TEST_CASE("tools: kvtune-tune tunes, resumes, forces, isolates and reports", "[tools][gpu]") {
  KVTUNE_REQUIRE_GPU();
  TempDir dir;
  const std::string db = dir.file("tuned.db");
  const auto shapes = shapes_file(dir, R"([{"op": "normalize", "rows": 2048, "cols": 37},
                                           {"op": "normalize", "rows": 1024, "cols": 1}])");
  const Run first = tune({"--shapes", shapes, "--cache", db, "--json", "--devices", "0", "--samples", "3"});
  INFO(first.out << first.err);
  REQUIRE(first.code == 0);
  const json j = first.out_json();
  CHECK(j["tuned"] == 2);
  CHECK(j["devices"][0]["copy_gbps"].get<double>() > 0);
  CHECK(j["devices"][0]["fma_gflops"].get<double>() > 0);
  for (const auto& r : j["results"]) {
    INFO(r.dump());
    REQUIRE(r["run"].is_object());  // the newest tuning run's summary
    CHECK(r["run"]["variants_timed"].get<int>() > 0);
    CHECK(r["run"]["variants_timed"] <= r["run"]["variants_total"]);
    CHECK(r["run"]["compiles"].get<int>() + r["run"]["binaries_reused"].get<int>() > 0);
    CHECK((r["run"]["search"] == "budgeted" || r["run"]["search"] == "exhaustive"));
    CHECK(r["run"]["incumbent"] == "");
  }
  // Resumable: a second run skips both; --force tunes again, the stored winner as the incumbent
  // (kept unless beaten beyond noise), not deleted first.
  CHECK(tune({"--shapes", shapes, "--cache", db, "--json", "--devices", "0"}).out_json()["skipped"] == 2);
  const Run forced =
      tune({"--shapes", shapes, "--cache", db, "--json", "--devices", "0", "--force", "--isolate", "--samples", "3",
            "--budget-variants", "4"});
  INFO(forced.out << forced.err);
  REQUIRE(forced.code == 0);
  const json forced_doc = forced.out_json();
  CHECK(forced_doc["tuned"] == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const json& r = forced_doc["results"][i];
    REQUIRE(r["run"].is_object());
    CHECK(r["run"]["incumbent"] == j["results"][i]["variant"]);
    if (r["run"]["replaced_incumbent"] == false) CHECK(r["variant"] == j["results"][i]["variant"]);
  }
  // --exhaustive tries every variant of a small problem.
  const Run every = tune({"--shapes", shapes_file(dir, R"([{"op": "normalize", "rows": 64, "cols": 1}])", "one.json"),
                          "--cache", db, "--json", "--devices", "0", "--samples", "3", "--exhaustive"});
  INFO(every.out << every.err);
  REQUIRE(every.code == 0);
  const json every_run = every.out_json()["results"][0]["run"];
  CHECK(every_run["search"] == "exhaustive");
  CHECK(every_run["variants_timed"] == every_run["variants_total"]);
  // A child that runs out of time is recorded as failed and the run goes on.
  const Run slow = tune({"--suite", "large", "--shard", "0/7", "--cache", db, "--json", "--devices", "0", "--isolate",
                         "--timeout", "1"});
  CHECK(slow.code == 1);
  CHECK_THAT(slow.out_json()["results"][0]["message"].get<std::string>(), Catch::Contains("timed out"));
  // The report shows the measured ceilings.
  check_ok(cache({"report", "--html", dir.file("r.html"), "--cache", db}));
  CHECK_THAT(read_bytes(dir.file("r.html")), !Catch::Contains("ceiling not measured"));
}

TEST_CASE("tools: kvtune-tune --recorded tunes what the record policy logged", "[tools][gpu]") {
  KVTUNE_REQUIRE_GPU();
  TempDir dir;
  const std::string db = dir.file("recorded.db");
  const auto fp = kvtune::detail::read_fingerprint(kvtune::detail::current_device());
  // A program under the record policy meets two problems: one keyed exactly, one by bucket.
  const auto problems = kvtune::tools::load_shapes(shapes_file(dir, R"([{"op": "normalize", "rows": 1000, "cols": 37},
      {"op": "dwconv", "layout": "ncl", "n": 3, "c": 64, "l": 256, "kernel": 4, "causal": true}])"));
  std::vector<std::string> keys;
  for (const char* buckets : {"exact", "pow2"}) {
    kvtune::ContextOptions options;
    options.cache_path = db;
    options.policy = kvtune::Policy::record;
    options.buckets = buckets;
    kvtune::Context context(options);
    const auto& problem = *problems[std::string(buckets) == "exact" ? 0 : 1];
    problem.run_library(context);
    CHECK(context.counters().records == 1);
  }
  const auto recorded = kvtune::cache::Store::open_existing(db, false)->recorded_problems();
  REQUIRE(recorded.size() == 2);
  for (const auto& r : recorded) {
    CHECK(r.device_id == fp.id());
    keys.push_back(r.problem_key);
  }
  CHECK(std::count(keys.begin(), keys.end(), "normalize,f32,standardize,cols=37,rows=1000,align=4,affine=,stats=") == 1);

  const Run listed = tune({"--recorded", "--dry-run", "--json", "--cache", db});
  check_ok(listed);
  CHECK(listed.out_json()["problems"].size() == 2);
  // Tuned here and in an isolated child (the exact key is rebuilt from the key there).
  const Run r = tune({"--recorded", "--cache", db, "--json", "--devices", "0", "--samples", "3", "--budget-variants",
                      "6", "--isolate"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json doc = r.out_json();
  CHECK(doc["tuned"] == 2);
  for (const auto& result : doc["results"]) {
    CHECK(result["recorded"]["count"] == 1);
    CHECK(std::find(keys.begin(), keys.end(), result["key"].get<std::string>()) != keys.end());
    CHECK(result["run"]["variants_timed"].get<int>() <= 6);  // the budget (the heuristic included)
  }
  // Tuned entries leave the record (the library removes the row when it stores the winner).
  CHECK(kvtune::cache::Store::open_existing(db, false)->recorded_problems().empty());
  const Run again = tune({"--recorded", "--cache", db});
  check_ok(again);
  CHECK_THAT(again.out, Catch::Contains("nothing to tune"));
}

#endif  // KVTUNE_TUNE_EXE && KVTUNE_CACHE_EXE
