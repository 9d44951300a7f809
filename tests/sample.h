#pragma once
// Which variants a sweep checks. The quick [gpu] tier checks a seeded sample of each space (every
// k-th variant from an offset drawn from the seed and the problem, plus the heuristic's choice);
// the exhaustive tier ([gpu-exhaustive], parts [exhaustive-1] ...) checks every variant. Likewise
// the CPU NVRTC sweeps: a sample in the release stage, every variant in [sweep-full].
// KVTUNE_TEST_SEED=<n> draws another sample; the seed is printed once per process.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/nvrtc.h"
#include "tuner/tuner.h"

namespace kvtune::test {

inline std::uint64_t sample_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("KVTUNE_TEST_SEED");
    const std::uint64_t s = env && *env ? std::strtoull(env, nullptr, 10) : 20261126;
    std::printf("variant sample: seed %llu (KVTUNE_TEST_SEED=<n> draws another)\n",
                static_cast<unsigned long long>(s));
    std::fflush(stdout);
    return s;
  }();
  return seed;
}

struct Sample {
  std::size_t every = 1;  // 1: every variant (the exhaustive tier)

  bool all() const { return every <= 1; }

  /// The indices of `n` variants to check for the problem named `key`: all of them, or every
  /// `every`-th from a seeded offset plus `always` (the heuristic's index, if in range).
  std::vector<std::size_t> pick(std::size_t n, const std::string& key, std::size_t always = SIZE_MAX) const {
    std::vector<std::size_t> out;
    if (all()) {
      for (std::size_t i = 0; i < n; ++i) out.push_back(i);
      return out;
    }
    // splitmix64 of the seed and the key's FNV-1a hash: a different residue per problem.
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : key) h = (h ^ ch) * 0x100000001b3ull;
    std::uint64_t z = sample_seed() ^ h;
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const std::size_t offset = std::size_t(z % every);
    for (std::size_t i = 0; i < n; ++i)
      if (i % every == offset || i == always) out.push_back(i);
    return out;
  }

  /// `items` reduced to pick()'s choice.
  template <class T>
  std::vector<T> apply(const std::vector<T>& items, const std::string& key, std::size_t always = SIZE_MAX) const {
    std::vector<T> out;
    for (std::size_t i : pick(items.size(), key, always)) out.push_back(items[i]);
    return out;
  }
};

/// Every variant.
inline constexpr Sample kEveryVariant{1};

/// A sampled sweep checks a few variants of each of many problems: compiled problem by problem, the
/// NVRTC latency of each problem's few programs adds up while most threads idle. A sweep first
/// add()s the candidates of every problem, compile_pending() compiles them all at once, then
/// compile() hands each problem's results back (compiling whatever was not added, as
/// tuner::compile_all does). Keyed by compile hash, so identical programs compile once.
class CompileMemo {
 public:
  void add(const std::vector<tuner::Candidate>& candidates) {
    for (const auto& c : candidates) {
      const std::string key = detail::compile_hash(c.request);
      if (done_.count(key) == 0 && queued_.insert({key, pending_.size()}).second) pending_.push_back(c);
    }
  }
  void compile_pending() {
    const auto compiled = tuner::compile_all(pending_, 0);
    for (const auto& [key, index] : queued_) done_[key] = compiled[index];
    pending_.clear();
    queued_.clear();
  }
  std::vector<tuner::Compiled> compile(const std::vector<tuner::Candidate>& candidates) {
    add(candidates);
    if (!pending_.empty()) compile_pending();
    std::vector<tuner::Compiled> out;
    for (const auto& c : candidates) out.push_back(done_.at(detail::compile_hash(c.request)));
    return out;
  }

 private:
  std::vector<tuner::Candidate> pending_;
  std::map<std::string, std::size_t> queued_;
  std::map<std::string, tuner::Compiled> done_;
};

}  // namespace kvtune::test
