// Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from what the project already has:
// the built-in suites of every operator (shapes files, problem keys and some of their variants'
// configs), tests/data/export-example.json cut into small export documents, and a few
// near-valid inputs that each break one rule. Run by hand after a change of the formats:
//   cmake --build build-fuzz --target kvtune_fuzz_corpus && ./build-fuzz/fuzz/kvtune_fuzz_corpus . fuzz/corpus
// The output is deterministic; files are named by what they hold.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "cache/store.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "core/hash.h"
#include "core/nvrtc.h"
#include "tools/common.h"
#include "tools/ops.h"

namespace {

namespace fs = std::filesystem;
namespace tools = kvtune::tools;
using nlohmann::json;

void write(const fs::path& dir, const std::string& name, const std::string& text) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << text;
}

void shapes_corpus(const fs::path& out) {
  for (const auto& handler : tools::handlers()) {
    for (const auto& suite : handler->suite_names()) {
      json entries = json::array();
      for (auto& entry : handler->suite(suite)) entries.push_back(std::move(entry));
      write(out, "suite-" + suite + ".json", json{{"problems", entries}}.dump(1) + "\n");
      // The same problems as every field spelled out (to_json), as a bare array.
      json canonical = json::array();
      for (const auto& problem : tools::load_suite(suite)) canonical.push_back(problem->to_json());
      write(out, "canonical-" + suite + ".json", canonical.dump() + "\n");
    }
  }
  // Near-valid: each breaks one rule of the format.
  const std::vector<std::pair<const char*, const char*>> near = {
      {"empty-problems", R"({"problems": []})"},
      {"unknown-top-field", R"({"problems": [], "shapes": 1})"},
      {"missing-op", R"([{"rows": 4, "cols": 8}])"},
      {"unknown-op", R"([{"op": "softmax", "rows": 4, "cols": 8}])"},
      {"normalize-float-rows", R"([{"op": "normalize", "rows": 4.0, "cols": 8.5}])"},
      {"normalize-rmsnorm-beta", R"([{"op": "normalize", "rows": 4, "cols": 8, "mode": "rmsnorm", "beta": true}])"},
      {"normalize-align", R"([{"op": "normalize", "rows": 3, "cols": 7, "dtype": "f16", "align": 2, "ddof": 1}])"},
      {"normalize-absurd", R"([{"op": "normalize", "rows": 2147483648, "cols": 17179869184}])"},
      {"dwconv-1d-with-h", R"([{"op": "dwconv", "layout": "ncl", "n": 1, "c": 4, "h": 2, "l": 16, "kernel": 3}])"},
      {"dwconv-causal-padding",
       R"([{"op": "dwconv", "layout": "nlc", "n": 2, "c": 8, "l": 9, "kernel": 4, "causal": true, "padding": [1, 0]}])"},
      {"dwconv-no-output", R"([{"op": "dwconv", "n": 1, "c": 1, "h": 2, "w": 2, "kernel": [5, 5], "dilation": 2}])"},
      {"dwconv-padding-arity", R"([{"op": "dwconv", "n": 1, "c": 3, "h": 5, "w": 5, "kernel": 3, "padding": [1, 1]}])"},
      {"malformed", "[{\"op\": \"normalize\", \"rows\": 4,\n \"cols\": }]"},
  };
  for (const auto& [name, text] : near) write(out, std::string("near-") + name + ".json", std::string(text) + "\n");
}

void keys_corpus(const fs::path& out) {
  int index = 0;
  for (const auto& handler : tools::handlers()) {
    for (const auto& suite : handler->suite_names()) {
      for (const auto& problem : tools::load_suite(suite)) {
        const auto variants = problem->variants("sm_90");
        // Alternately the first and the last variant tuning would try.
        const json config = variants.empty() ? json::object()
                                             : (index % 2 == 0 ? variants.front() : variants.back()).config;
        write(out, "suite-" + suite + "-" + std::to_string(index++) + ".txt", problem->key() + "\n" + config.dump());
      }
    }
  }
  const std::vector<std::pair<const char*, const char*>> near = {
      {"normalize-no-config", "normalize,f32,standardize,cols=37,rows<=2048,align=4,affine=,stats="},
      {"normalize-align-3", "normalize,f32,standardize,cols=37,rows<=2048,align=3,affine=gb,stats=mr\n{}"},
      {"normalize-rows-0", "normalize,bf16,rmsnorm,cols=8,rows<=0,align=16,affine=g,stats=r"},
      {"normalize-bad-config",
       "normalize,f16,layernorm,cols=1024,rows<=65536,align=16,affine=gb,stats=\n"
       R"({"tpr": 3, "rpb": 1, "vw": 16, "keep": "reg", "stat": "twopass", "items": 1})"},
      {"dwconv-no-config", "dwconv,forward,nchw,f32,n<=32,c=96,h=56,w=56,k=7x7,s=1x1,d=1x1,pad=3,3,3,3,bias=1,det=1,align=16"},
      {"dwconv-nondet-forward",
       "dwconv,forward,nlc,f16,n<=4,c=10,h=1,w=33,k=1x5,s=1x2,d=1x3,pad=0,0,12,0,bias=0,det=0,align=4\n{}"},
      {"dwconv-huge", "dwconv,backward_weight,nhwc,bf16,n<=1,c=999999999999999999,h=1,w=1,k=63x63,s=1x1,d=1x1,"
                      "pad=0,0,0,0,bias=1,det=0,align=2\n{\"kernel\": \"wgrad\"}"},
      {"dwconv-activation", "dwconv,forward,nlc,bf16,n<=16,c=1024,h=1,w=4096,k=1x4,s=1x1,d=1x1,pad=0,0,3,0,bias=1,det=1,"
                            "align=16,act=silu"},
      {"dwconv-gradient-prep", "dwconv,forward,nhwc,f16,n<=8,c=24,h=15,w=14,k=5x5,s=1x1,d=1x1,pad=2,2,2,2,bias=0,det=1,"
                               "align=16,act=gelu_erf_grad\n{\"kernel\": \"mma\"}"},
      {"empty", ""},
  };
  for (const auto& [name, text] : near) write(out, std::string("near-") + name + ".txt", text);
}

void import_corpus(const fs::path& source, const fs::path& out) {
  const json example = tools::parse_json_file((source / "tests/data/export-example.json").string());
  json base = example;
  base["devices"] = json::array();
  base["entries"] = json::array();
  write(out, "empty-export.json", base.dump() + "\n");

  // One document per example entry: its device and its first three trials.
  const auto& entries = example.at("entries");
  json all = base;
  all["devices"] = example.at("devices");
  json first;  // a valid one-entry document, for the near-valid ones
  for (std::size_t i = 0; i < entries.size(); ++i) {
    json entry = entries[i];
    json trials = json::array();
    for (std::size_t t = 0; t < entry["trials"].size() && t < 3; ++t) trials.push_back(entry["trials"][t]);
    entry["trials"] = trials;
    json one = base;
    for (const auto& device : example.at("devices"))
      if (device.at("id") == entry.at("device_id")) one["devices"].push_back(device);
    one["entries"].push_back(entry);
    write(out, "entry-" + std::to_string(i) + ".json", one.dump() + "\n");
    if (i == 0) first = one;
    entry["trials"] = json::array();
    all["entries"].push_back(entry);
  }
  write(out, "all-entries-no-trials.json", all.dump() + "\n");

  // Near-valid: each breaks one rule of the format.
  const auto near = [&](const std::string& name, const std::function<void(json&)>& change) {
    json doc = first;
    change(doc);
    write(out, "near-" + name + ".json", doc.dump() + "\n");
  };
  near("format-2", [](json& d) { d["kvtune_export"] = 2; });
  near("unknown-device", [](json& d) { d["entries"][0]["device_id"] = "0000000000000000"; });
  near("label-mismatch", [](json& d) { d["entries"][0]["label"] = "tpr=1,rpb=1,vw=4B,keep=reg,stat=twopass"; });
  near("bad-status", [](json& d) { d["entries"][0]["trials"][0]["status"] = "fine"; });
  near("duplicate-entry", [](json& d) { d["entries"].push_back(d["entries"][0]); });
  near("duplicate-device", [](json& d) { d["devices"].push_back(d["devices"][0]); });
  near("negative-ceiling", [](json& d) { d["devices"][0]["ceilings"]["copy_gbps"] = -1; });
  near("unknown-op", [](json& d) { d["entries"][0]["op"] = "softmax"; });
}

}  // namespace

// fuzz_cache_db: a real cache file (a normalize winner with the binary NVRTC makes for it, a second
// winner naming that binary for another problem, trials), as a raw file (first byte 0), and the
// same rows written through plain SQLite (first byte 1; fuzz_cache_db.cpp describes the format).
void cache_db_corpus(const fs::path& out) {
  namespace cache = kvtune::cache;
  namespace nz = kvtune::normalize;
  nz::Problem p;
  p.mode = kvtune::NormMode::layernorm;
  p.cols = 1024;
  p.rows = 4096;
  const nz::Config config = nz::enumerate(p).front();
  const auto request = nz::compile_request(p, config, "sm_90");
  const auto compiled = kvtune::detail::nvrtc_compile(request);
  const cache::Binary binary{kvtune::detail::compile_hash(request), "sm_90", compiled.lowered_names.at(0),
                             compiled.cubin, kvtune::detail::hash_hex(compiled.cubin)};
  cache::Winner w;
  w.op = "normalize", w.problem_key = p.key(), w.device_id = "dev", w.template_hash = nz::template_hash();
  w.label = config.label(), w.config_json = config.to_json().dump(), w.binary_hash = binary.hash, w.origin = "tuned";
  w.median_ms = 0.01, w.gbps = 1000, w.created_at = 1700000000;
  cache::Winner other = w;
  other.problem_key = "normalize,bf16,layernorm,cols=1024,rows<=4096,align=16,affine=,stats=";
  const fs::path dir = fs::temp_directory_path() / "kvtune-corpus-cache";  // private: /tmp itself is not
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  const fs::path file = dir / "cache.db";
  {
    auto store = cache::Store::open_existing(file.string(), true);
    store->put_result(w, binary, {cache::Trial{config.label(), w.config_json, "ok", "", 0.01, 0.02, 1000}});
    store->put_result(other, std::nullopt, {});
  }
  std::ifstream in(file, std::ios::binary);
  write(out, "raw-cache.db", std::string(1, '\0') + std::string(std::istreambuf_iterator<char>(in), {}));
  fs::remove_all(dir);
  const auto row = [](std::vector<std::string> fields) {
    std::string text;
    for (const auto& f : fields) text += (text.empty() ? "" : "\x1f") + f;
    return text;
  };
  const std::string winner_row = row({"w", "t" + w.problem_key, "tdev", "t" + w.template_hash, "tnormalize",
                                      "t" + w.label, "t" + w.config_json, "t" + binary.hash, "ttuned", "r0.01",
                                      "r1000", "i1700000000"});
  const std::string binary_row = row({"b", "t" + binary.hash, "tsm_90", "t" + binary.lowered_name, "bcubin",
                                      "t" + kvtune::detail::hash_hex("cubin"), "i0"});
  const std::string trial_row = row({"t", "t" + w.problem_key, "tdev", "t" + w.template_hash, "t" + w.label,
                                     "t" + w.config_json, "tok", "t", "r0.01", "r0", "r1000", "i0"});
  write(out, "rows-winner-binary-trial.txt", "\x01" + winner_row + "\x1e" + binary_row + "\x1e" + trial_row);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR OUT_DIR (e.g. . fuzz/corpus)\n", argv[0]);
    return 2;
  }
  return tools::guarded_main("kvtune_fuzz_corpus", [&] {
    const fs::path source = argv[1], out = argv[2];
    shapes_corpus(out / "fuzz_shapes");
    keys_corpus(out / "fuzz_keys");
    import_corpus(source, out / "fuzz_import");
    cache_db_corpus(out / "fuzz_cache_db");
    return 0;
  });
}
