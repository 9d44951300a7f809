// Tools: kvtune-tune as a user runs it (separate processes, exit codes, stdout and stderr):
// shapes files and suites, dry runs and space sizes, --compile-only; plus the pieces behind it
// (shapes parsing, JSON positions) as unit tests. kvtune-cache's commands on caches populated by
// importing tests/data/export-example.json: test_tools_cache.cpp; recorded problems, stored keys,
// budgets, leases and runs: test_tools_recorded.cpp.
// No GPU is needed except in the [gpu] cases at the end, which skip without one.

#if defined(KVTUNE_TUNE_EXE) && defined(KVTUNE_CACHE_EXE)

#include <sys/stat.h>
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
#include "tools_fixtures.h"
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

namespace fs = std::filesystem;
using nlohmann::json;

using namespace kvtune::test;

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

TEST_CASE("tools: dwconv entries with an activation and seq_idx (the fused weight gradient), from entries and keys", "[tools]") {
  TempDir dir;
  const auto shapes = shapes_file(dir, R"([
    {"op": "dwconv", "direction": "forward", "layout": "ncl", "dtype": "bf16", "n": 8, "c": 64, "l": 512, "kernel": 4,
     "causal": true, "bias": true, "activation": "silu"},
    {"op": "dwconv", "direction": "backward_weight", "layout": "ncl", "dtype": "bf16", "n": 8, "c": 64, "l": 512,
     "kernel": 4, "causal": true, "bias": true, "activation": "silu", "seq_idx": true},
    {"op": "dwconv", "direction": "backward_data", "layout": "nlc", "dtype": "f16", "n": 2, "c": 64, "l": 512,
     "kernel": 4, "causal": true, "activation": "gelu_tanh"},
    {"op": "dwconv", "direction": "backward_data", "layout": "nlc", "dtype": "f16", "n": 2, "c": 64, "l": 512,
     "kernel": 3, "stride": 2, "padding": [1, 1], "activation": "relu"},
    {"op": "dwconv", "direction": "forward", "layout": "nlc", "dtype": "bf16", "n": 8, "c": 64, "l": 512,
     "kernel": 4, "causal": true, "seq_idx": true}
  ])");
  const Run r = tune({"--shapes", shapes, "--dry-run", "--json"});
  check_ok(r);
  const json doc = r.out_json();
  REQUIRE(doc["problems"].size() == 5);
  // seq_idx masked in the forward kernel.
  CHECK(doc["problems"][4]["key"] ==
        "dwconv,forward,nlc,bf16,n<=8,c=64,h=1,w=512,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=0,det=1,align=16,seq=1");
  const std::string ncl = ",ncl,bf16,n<=8,c=64,h=1,w=512,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,align=16";
  CHECK(doc["problems"][0]["key"] == "dwconv,forward" + ncl + ",act=silu");
  CHECK(doc["problems"][1]["key"] == "dwconv,backward_weight" + ncl + ",act=silu,seq=1");
  CHECK(doc["problems"][1]["describe"] == "backward_weight ncl bf16 8x64x512 k=4 causal +dbias silu seq_idx");
  // backward_data with an activation: 1D stride 1 is the fused data gradient (its own key); otherwise
  // it is keyed as the plain problem (its gradient prep is a second problem the call tunes), and its
  // entry keeps the activation.
  CHECK(doc["problems"][2]["key"] ==
        "dwconv,backward_data,nlc,f16,n<=2,c=64,h=1,w=512,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=0,det=1,align=16,act=gelu_tanh");
  CHECK(doc["problems"][3]["key"].get<std::string>().find("act=") == std::string::npos);
  CHECK(doc["problems"][3]["problem"]["activation"] == "relu");
  for (int i : {0, 1, 2, 3, 4}) {
    INFO(i);
    CHECK(doc["problems"][i]["space"]["tuned"].get<std::int64_t>() > 0);
    const auto again = kvtune::tools::parse_entries(json::array({doc["problems"][i]["problem"]}), "test");
    CHECK(again.front()->key() == doc["problems"][i]["key"]);
  }
  // Stored keys come back as entries (what --recorded and the cache commands rebuild); a gradient
  // prep's is refused with the reason.
  const auto* h = kvtune::tools::find_handler("dwconv");
  REQUIRE(h != nullptr);
  for (int i : {0, 1, 2, 4}) {
    std::string why;
    const auto p = h->from_key(doc["problems"][i]["key"], &why);
    INFO(why);
    REQUIRE(p != nullptr);
    CHECK(p->key() == doc["problems"][i]["key"]);
  }
  std::string why;
  CHECK(h->from_key("dwconv,forward" + ncl + ",act=silu_grad", &why) == nullptr);
  CHECK(why.find("gradient prep") != std::string::npos);
  // seq_idx only where the call is the fused weight gradient.
  const auto bad = [&](const std::string& entry, const std::string& what) {
    INFO(entry);
    check_usage_error(tune({"--shapes", shapes_file(dir, "[" + entry + "]", "bad.json"), "--dry-run"}),
                      "problems[0]: " + what);
  };
  const std::string base = R"("op": "dwconv", "layout": "ncl", "n": 2, "c": 64, "l": 256, "kernel": 4, "causal": true)";
  bad("{" + base + R"(, "direction": "backward_weight", "seq_idx": true})", "'seq_idx' is for causal 1D calls whose kernel masks it");
  bad("{" + base + R"(, "direction": "backward_data", "seq_idx": true})", "'seq_idx' is for causal 1D calls");
  bad(R"({"op": "dwconv", "layout": "ncl", "n": 2, "c": 64, "l": 24, "kernel": 4, "causal": true, "direction": "forward", "seq_idx": true})",
      "'seq_idx' is for causal 1D calls");
  bad("{" + base + R"(, "activation": "tanh"})", "unknown activation 'tanh'");
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

TEST_CASE("tools: shapes entries of the fused residual add round-trip and are checked", "[tools][residual]") {
  TempDir dir;
  const auto shapes = shapes_file(dir, R"({"problems": [
    {"op": "normalize", "rows": 4096, "cols": 1024, "dtype": "bf16", "mode": "layernorm", "gamma": true,
     "beta": true, "residual": true, "residual_out": true},
    {"op": "normalize", "rows": 4, "cols": 1048576, "mode": "rmsnorm", "residual": true},
    {"op": "normalize", "direction": "backward", "rows": 4096, "cols": 1024, "dtype": "bf16", "mode": "layernorm",
     "gamma": true, "dgamma": true, "saved": true, "dresidual": true}]})");
  const auto problems = kvtune::tools::load_shapes(shapes);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0]->key() == "normalize,bf16,layernorm,cols=1024,rows<=4096,align=16,affine=gb,stats=,res=rs");
  CHECK(problems[1]->key() == "normalize,f32,rmsnorm,cols=1048576,rows<=4,align=16,affine=,stats=,res=r");
  CHECK(problems[2]->key() ==
        "normalize,bf16,layernorm,backward,cols=1024,rows<=4096,align=16,gamma=g,grads=g,stats=saved,dres=1");
  for (const auto& p : problems) {
    const auto again = kvtune::tools::parse_entries(json::array({p->to_json()}), "again");
    CHECK(again.front()->key() == p->key());
    CHECK(again.front()->to_json() == p->to_json());
    CHECK(p->space().tuned > 0);
  }
  const auto bad = [&](const std::string& text, const std::string& what) {
    INFO(text);
    CHECK_THROWS_WITH(kvtune::tools::parse_entries(json::parse(text), "shapes"), Catch::Contains(what));
  };
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "residual_out": true}])", "residual_out needs residual");
  bad(R"([{"op": "normalize", "rows": 8, "cols": 8, "dresidual": true}])", "backward field");
  bad(R"([{"op": "normalize", "direction": "backward", "rows": 8, "cols": 8, "residual": true}])", "forward field");
  // kvtune-tune's residual suite: forward with s and backward with ds, sized without a GPU.
  const auto r = tune({"--suite", "residual", "--dry-run"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains(",res=rs") && Catch::Contains(",dres=1"));
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
  // A child that runs out of time is recorded as failed and the run goes on. Exhaustive: every
  // variant of 65536 x 1024 layernorm (seconds of compiles alone), as a budgeted search of it now
  // finishes in 0.7 s (H200, 2026-12-03).
  const Run slow = tune({"--suite", "large", "--shard", "0/7", "--cache", db, "--json", "--devices", "0", "--isolate",
                         "--exhaustive", "--timeout", "1"});
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
