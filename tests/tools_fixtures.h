#pragma once
// Fixtures of the tools tests (test_tools.cpp, test_tools_cache.cpp): running kvtune-tune and
// kvtune-cache as separate processes (exit code, stdout, stderr), the checked-in export brought to
// this build's versions, caches holding it, and shapes files.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache_fixtures.h"
#include "core/nvrtc.h"
#include "kvtune/kvtune.h"
#include "tools/ops.h"

extern char** environ;

namespace kvtune::test {

namespace fs = std::filesystem;
using nlohmann::json;

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

// Runs a tool with `args`; `env` entries "NAME=value" replace the environment's, "NAME" unsets it.
inline Run run(const std::string& exe, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
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

inline Run tune(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return run(KVTUNE_TUNE_EXE, args, env);
}
inline Run cache(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return run(KVTUNE_CACHE_EXE, args, env);
}

// A bad-input failure: exit status 2 and exactly one line on stderr that says `what`.
inline void check_usage_error(const Run& r, const std::string& what) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains(what));
  CHECK_THAT(r.err, !Catch::Contains("terminate called"));
}

inline void check_ok(const Run& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
}

inline std::string example_path() { return std::string(KVTUNE_SOURCE_DIR) + "/tests/data/export-example.json"; }

// The checked-in example (normalize entries on an H200 and an H100, two dwconv entries on the H200),
// brought to this build's NVRTC, kvtune and template versions (so that
// its entries are fresh here), with creation times spread over the last 20 days.
inline json current_example() {
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

inline std::string write_example(const TempDir& dir, const json& doc, const std::string& name = "example.json") {
  const std::string path = dir.file(name);
  write_bytes(path, doc.dump(1));
  return path;
}

// A cache holding the example.
inline std::string example_cache(const TempDir& dir, const json& doc, const std::string& name = "cache.db") {
  const std::string db = dir.file(name);
  check_ok(cache({"import", write_example(dir, doc, name + ".json"), "--cache", db}));
  return db;
}

inline std::size_t trial_count(const json& doc) {
  std::size_t n = 0;
  for (const auto& e : doc["entries"]) n += e["trials"].size();
  return n;
}

inline json list_json(const std::string& db, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"list", "--cache", db, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const Run r = cache(args);
  check_ok(r);
  return r.out_json()["entries"];
}

inline std::string shapes_file(const TempDir& dir, const std::string& text, const std::string& name = "shapes.json") {
  const std::string path = dir.file(name);
  write_bytes(path, text);
  return path;
}

// Two problems with few variants: CI compiles them in seconds.
inline constexpr char kSmallShapes[] = R"({"problems": [
  {"op": "normalize", "rows": 4096, "cols": 65536, "dtype": "f32", "mode": "rmsnorm"},
  {"op": "normalize", "rows": 1024, "cols": 1, "dtype": "f32", "mode": "standardize"}
]})";

}  // namespace kvtune::test
