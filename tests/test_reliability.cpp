// Reliability of the cache under a writer killed with SIGKILL at random points: the database
// must open (not set aside), and every result the writer reported as committed must be there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <random>
#include <set>
#include <string>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/store.h"
#include "cache_fixtures.h"
#include "core/hash.h"

using namespace kvtune;

namespace {

cache::Winner winner_for(int i) {
  cache::Winner w;
  w.op = "normalize";
  w.problem_key = "normalize,f32,layernorm,cols=" + std::to_string(1 + i) + ",rows<=1024,align=16,affine=,stats=";
  w.device_id = "crash-test-device";
  w.template_hash = "0123456789abcdef";
  w.label = "tpr=32,rpb=4,vw=16B,keep=reg,stat=twopass";
  w.config_json = R"({"tpr":32})";
  w.binary_hash = "binary-" + std::to_string(i);
  w.origin = "tuned";
  w.median_ms = 0.01 * (i + 1);
  return w;
}

// The writer: opens the store, writes -1 to `fd` (ready), then stores result after result and
// after each commit writes its index to `fd`.
[[noreturn]] void writer(const std::string& path, int fd, int first) {
  auto store = cache::Store::open(path);
  const int ready = -1;
  if (write(fd, &ready, sizeof ready) != sizeof ready) _exit(3);
  for (int i = first;; ++i) {
    const cache::Winner w = winner_for(i);
    const std::string image(4096 + i % 512, static_cast<char>('a' + i % 26));
    cache::Binary b{w.binary_hash, "sm_90", "_Zkernel", image, detail::hash_hex(image)};
    std::vector<cache::Trial> trials(3);
    for (auto& t : trials) t.label = w.label, t.status = "ok", t.median_ms = w.median_ms;
    store->put_result(w, b, trials);
    if (write(fd, &i, sizeof i) != sizeof i) _exit(3);
  }
}

}  // namespace

TEST_CASE("a cache writer killed with SIGKILL at random points loses nothing committed", "[reliability][cache]") {
  const test::TempDir dir;
  const std::string path = dir.file("cache.sqlite");
  std::mt19937 rng(20261122);  // fixed seed: the kill points are reproducible
  std::uniform_int_distribution<int> delay_us(200, 20000);
  std::set<int> committed;
  int rounds_with_commits = 0;
  int next = 0;
  constexpr int kKills = 60;
  for (int round = 0; round < kKills; ++round) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(fds[0]);
      writer(path, fds[1], next);
    }
    close(fds[1]);
    // The kill lands at a random point of the writing, not of opening the store: under a sanitizer
    // on a busy machine, opening took longer than the whole delay and no round committed anything.
    int ready = 0;
    REQUIRE(read(fds[0], &ready, sizeof ready) == sizeof ready);
    REQUIRE(ready == -1);
    usleep(static_cast<useconds_t>(delay_us(rng)));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    INFO("round " << round);
    CHECK(WIFSIGNALED(status));
    int index = 0;
    const std::size_t before = committed.size();
    while (read(fds[0], &index, sizeof index) == sizeof index) committed.insert(index);
    if (committed.size() > before) ++rounds_with_commits;
    close(fds[0]);
    // Keys a killed round may have used are never used again, whether its commits were reported
    // or not (a result committed just before the kill is in the file but not in `committed`).
    next = std::max(next, committed.empty() ? 0 : *committed.rbegin() + 1) + 1000;
  }
  std::vector<std::string> logs;
  auto store = cache::Store::open(path, [&](const char* level, const std::string& m) { logs.push_back(std::string(level) + " " + m); });
  INFO("store log: " << (logs.empty() ? "" : logs.front()));
  REQUIRE_FALSE(store->in_memory());
  REQUIRE(store->path() == path);  // opened, not set aside
  // Every result the writer reported as committed is whole: its row, its three trials, and its
  // binary byte for byte. No sample: all of them.
  std::set<std::string> keys;
  for (const auto& w : store->winners()) keys.insert(w.problem_key);
  std::size_t missing_rows = 0, missing_trials = 0, missing_binaries = 0;
  for (int i : committed) {
    const cache::Winner w = winner_for(i);
    if (keys.count(w.problem_key) == 0) ++missing_rows;
    if (store->trials(w.problem_key, w.device_id, w.template_hash).size() != 3) ++missing_trials;
    const auto binary = store->find_binary(w.binary_hash);
    if (!binary || binary->image != std::string(4096 + i % 512, static_cast<char>('a' + i % 26))) ++missing_binaries;
  }
  CHECK(missing_rows == 0);
  CHECK(missing_trials == 0);
  CHECK(missing_binaries == 0);
  // The kills landed while the writer was committing: at least a quarter of the 60 rounds committed
  // something before their kill (so that the check above is about interrupted writes).
  CHECK(rounds_with_commits >= kKills / 4);
  WARN(kKills << " SIGKILLs; " << committed.size() << " committed results in " << rounds_with_commits
              << " rounds, every row, trial and binary present; " << keys.size() << " rows in the database");
  store.reset();
}
