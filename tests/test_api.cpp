// CPU tests of the public API: options from the environment, policies, the no-GPU path.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "kvtune/kvtune.h"
#include "core/device.h"
#include "lib/src/dispatch_table.h"
#include "env_guard.h"
#include "gpu_support.h"

using namespace kvtune;

using test::EnvGuard;

TEST_CASE("policies parse and print", "[api]") {
  for (Policy p : {Policy::tune, Policy::heuristic, Policy::cached}) CHECK(parse_policy(to_string(p)) == p);
  CHECK_THROWS_WITH(parse_policy("fast"), Catch::Contains("unknown policy 'fast'"));
  CHECK(std::string(version()) == KVTUNE_VERSION);
}

TEST_CASE("environment overrides the defaults", "[api]") {
  {
    EnvGuard policy("KVTUNE_POLICY", "cached");
    EnvGuard cache("KVTUNE_CACHE", "/tmp/kvtune-test-env.sqlite");
    EnvGuard log("KVTUNE_LOG", "debug");
    const auto o = ContextOptions::from_environment();
    CHECK(o.policy == Policy::cached);
    CHECK(o.cache_path == "/tmp/kvtune-test-env.sqlite");
    CHECK(o.log_level == "debug");
  }
  {
    EnvGuard xdg("XDG_CACHE_HOME", "/tmp/xdg-kvtune");
    CHECK(ContextOptions::from_environment().cache_path == "/tmp/xdg-kvtune/kvtune/cache.sqlite");
  }
  {
    EnvGuard home("HOME", "/tmp/home-kvtune");
    EnvGuard no_xdg("XDG_CACHE_HOME", nullptr);
    CHECK(ContextOptions::from_environment().cache_path == "/tmp/home-kvtune/.cache/kvtune/cache.sqlite");
  }
  {
    EnvGuard bad("KVTUNE_POLICY", "sometimes");
    CHECK_THROWS_WITH(ContextOptions::from_environment(), Catch::Contains("unknown policy"));
  }
  {
    EnvGuard bad("KVTUNE_LOG", "loud");
    CHECK_THROWS_WITH(ContextOptions::from_environment(), Catch::Contains("KVTUNE_LOG"));
  }
}

TEST_CASE("invalid arguments fail before touching the GPU", "[api]") {
  ContextOptions o;
  o.cache_path = "";
  Context context(o);
  NormalizeArgs a;  // null pointers
  a.rows = 4;
  a.cols = 4;
  CHECK_THROWS_WITH(context.normalize(a), Catch::Contains("[field x]"));
  CHECK(context.counters().calls == 0);
  CHECK(context.cache_path_in_use().empty());
}

TEST_CASE("without a GPU a call gives a clear error", "[api]") {
  if (test::gpu_available()) {
    WARN("a GPU is present: the no-GPU path is not exercised here");
    return;
  }
  ContextOptions o;
  o.cache_path = "";
  Context context(o);
  NormalizeArgs a;
  a.x = reinterpret_cast<const void*>(std::uintptr_t(1) << 20);
  a.y = reinterpret_cast<void*>(std::uintptr_t(1) << 21);
  a.rows = 4;
  a.cols = 4;
  try {
    context.normalize(a);
    FAIL("expected kvtune::Error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("no CUDA device available"));
  }
  CHECK_THROWS_WITH(detail::device_count(), Catch::Contains("no CUDA device available"));
}

TEST_CASE("dispatch table: lookups see inserts, old entries stay valid", "[api]") {
  struct H {
    std::size_t operator()(int v) const { return std::hash<int>()(v); }
  };
  detail::DispatchTable<int, std::string, H> table;
  CHECK(table.find(1) == nullptr);
  table.insert(1, std::make_shared<const std::string>("one"));
  const std::string* one = table.find(1);
  REQUIRE(one != nullptr);
  for (int i = 2; i < 200; ++i) table.insert(i, std::make_shared<const std::string>(std::to_string(i)));
  CHECK(*one == "one");  // the old map (and the value) are still alive
  CHECK(*table.find(150) == "150");
  CHECK(table.size() == 199);
  table.insert(1, std::make_shared<const std::string>("uno"));
  CHECK(*table.find(1) == "uno");
  CHECK(*one == "one");
}
