// Tools: problems the record policy logged (kvtune-tune --recorded, kvtune-cache recorded), the
// handlers rebuilding problems from stored keys, tuning budgets, leases and runs in kvtune-cache;
// as a user runs the tools (separate processes), without a GPU. kvtune-tune's shapes and suites:
// test_tools.cpp; kvtune-cache's other commands: test_tools_cache.cpp.

#if defined(KVTUNE_TUNE_EXE) && defined(KVTUNE_CACHE_EXE)

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "cache_fixtures.h"
#include "core/nvrtc.h"
#include "gpu_support.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kvtune/kvtune.h"
#include "lib/src/families.h"
#include "tools/cache_view.h"
#include "tools/common.h"
#include "tools/ops.h"
#include "tools_fixtures.h"

using namespace kvtune::test;

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

#endif  // KVTUNE_TUNE_EXE && KVTUNE_CACHE_EXE
