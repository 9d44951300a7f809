// Tools: kvtune-cache as a user runs it (separate processes, exit codes, stdout and stderr) on
// caches populated by importing tests/data/export-example.json: files that are not caches, bad
// exports, import, list, show, stats, export, staleness, prune, verify, merge and the report.
// kvtune-tune: test_tools.cpp.

#if defined(KVTUNE_TUNE_EXE) && defined(KVTUNE_CACHE_EXE)

#include <sqlite3.h>  // damages a binary by hand, as another program would

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "cache_fixtures.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kvtune/kvtune.h"
#include "tools/cache_view.h"
#include "tools/common.h"
#include "tools/ops.h"
#include "tools_fixtures.h"

using namespace kvtune::test;

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

#endif  // KVTUNE_TUNE_EXE && KVTUNE_CACHE_EXE
