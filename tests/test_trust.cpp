// The cache as a trust boundary (docs/RELIABILITY.md, "Trust model"): a stored binary is loaded
// only when it is what this build compiles for its problem, config and architecture; stored
// configs and rows are read within the limits of user input; the cache's location must be
// private; `kvtune-cache merge` brings binaries only when asked and `verify` names every binary
// that does not match its entry. Also the argument checks this review added: ContextOptions
// ranges, outputs overlapping inputs, the dwconv output bound, the test-only fault hook.

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include <fmt/format.h>

#include "cache/store.h"
#include "cache_fixtures.h"
#include "env_guard.h"
#include "gpu_check.h"
#include "gpu_support.h"
#include "kvtune/kvtune.h"
#include "lib/src/families.h"
#include "core/hash.h"
#include "core/nvrtc.h"
#include "lib/src/stored_entry.h"
#include "tools/cache_view.h"

using namespace kvtune;
namespace fs = std::filesystem;
using kvtune::test::exec_sql;
using kvtune::test::LogCapture;
using kvtune::test::TempDir;

namespace {

normalize::Problem norm_problem(std::int64_t cols, DType dtype = DType::f32) {
  normalize::Problem p;
  p.dtype = dtype;
  p.mode = NormMode::layernorm;
  p.cols = cols;
  p.rows = 4096;
  return p;
}

// A binary as the library stores it, compiled here by NVRTC for sm_90 (no GPU needed).
cache::Binary compiled_binary(const detail::CompileRequest& request) {
  const auto compiled = detail::nvrtc_compile(request);
  return cache::Binary{detail::compile_hash(request), request.arch, compiled.lowered_names.at(0), compiled.cubin,
                       detail::hash_hex(compiled.cubin)};
}

cache::Winner winner_of(const normalize::Problem& p, const normalize::Config& c, const std::string& binary_hash) {
  cache::Winner w;
  w.op = "normalize";
  w.problem_key = p.key();
  w.device_id = "dev";
  w.template_hash = normalize::template_hash();
  w.label = c.label();
  w.config_json = c.to_json().dump();
  w.binary_hash = binary_hash;
  w.origin = "tuned";
  w.median_ms = 0.01;
  w.created_at = 1700000000;
  return w;
}

std::string nested(int depth) { return std::string(std::size_t(depth), '[') + std::string(std::size_t(depth), ']'); }

}  // namespace

TEST_CASE("trust: a stored binary must be what this build compiles for the problem, config and arch", "[trust]") {
  // cols is a run-time argument of the kernel: another width may share a binary; another dtype may not.
  const auto p = norm_problem(1024), q = norm_problem(1024, DType::bf16);
  const auto configs = normalize::enumerate(p);
  REQUIRE(configs.size() >= 2);
  const auto request = normalize::compile_request(p, configs[0], "sm_90");
  const cache::Binary good = compiled_binary(request);
  std::string why;
  CHECK(detail::binary_matches_request(good.hash, good.arch, good.lowered_name, request, &why));
  CHECK(detail::trusted_binary<detail::NormalizeFamily>(good, p, configs[0], "sm_90", why));

  // Another problem's (or config's) binary: its compile key is not this variant's.
  CHECK_FALSE(detail::trusted_binary<detail::NormalizeFamily>(good, q, configs[0], "sm_90", why));
  CHECK_THAT(why, Catch::Contains("compile key"));
  CHECK_FALSE(detail::trusted_binary<detail::NormalizeFamily>(good, p, configs[1], "sm_90", why));
  CHECK_THAT(why, Catch::Contains("compile key"));
  // Stored under the right key, but for another architecture.
  cache::Binary other_arch = good;
  other_arch.arch = "sm_80";
  CHECK_FALSE(detail::trusted_binary<detail::NormalizeFamily>(other_arch, p, configs[0], "sm_90", why));
  CHECK_THAT(why, Catch::Contains("sm_80"));
  // Stored under the right key, but its kernel is another one (a crafted row: the image of another
  // variant, or something that is no kernel of ours at all).
  const cache::Binary other = compiled_binary(normalize::compile_request(p, configs[1], "sm_90"));
  cache::Binary swapped = other;
  swapped.hash = good.hash;
  CHECK_FALSE(detail::trusted_binary<detail::NormalizeFamily>(swapped, p, configs[0], "sm_90", why));
  CHECK_THAT(why, Catch::Contains("is not kvt_normalize<"));
  for (const char* name : {"main", "_Z4evilv", "_Zgarbage", ""}) {
    cache::Binary crafted = good;
    crafted.lowered_name = name;
    CHECK_FALSE(detail::trusted_binary<detail::NormalizeFamily>(crafted, p, configs[0], "sm_90", why));
  }
  // Every kernel kind of both families: the binary NVRTC makes for a variant matches it (defaulted
  // template arguments after the named ones included).
  dwconv::Problem d;
  d.n = 2, d.c = 64, d.h = 16, d.w = 16, d.kh = 3, d.kw = 3, d.layout = DwLayout::nhwc, d.dtype = DType::bf16;
  d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
  const auto dw_configs = dwconv::enumerate(d);
  REQUIRE(!dw_configs.empty());
  std::set<std::string> kinds;
  for (const auto& c : dw_configs) {
    const auto r = dwconv::compile_request(d, c, "sm_90");
    const std::string kind = r.name_expressions[0].substr(0, r.name_expressions[0].find('<'));
    if (!kinds.insert(kind).second) continue;
    const cache::Binary b = compiled_binary(r);
    INFO(kind << " " << c.label());
    CHECK(detail::trusted_binary<detail::DwConvFamily>(b, d, c, "sm_90", why));
  }
  CHECK(kinds.size() >= 3);
}

namespace {

// A channel-last binary compiled with the shape as constants (Problem::fixed_shape): the variant of
// The first variant of `kernel` in `d`'s space (whose label holds `label_part`), its name ending in
// `shape`, is trusted for `d` and for another batch (a run-time argument), never for another channel
// count or plane, also when stored under that problem's key.
dwconv::Config check_bound_to_shape(const dwconv::Problem& d, dwconv::Kernel kernel, const std::string& shape,
                                    const std::string& label_part = "") {
  REQUIRE(d.fixed_shape());
  std::optional<dwconv::Config> config;
  for (const auto& c : dwconv::enumerate(d))
    if (!config && c.kernel() == kernel && c.label().find(label_part) != std::string::npos) config = c;
  REQUIRE(config);
  const auto request = dwconv::compile_request(d, *config, "sm_90");
  const std::string name = request.name_expressions[0];
  CHECK_THAT(name, Catch::EndsWith(shape));
  const cache::Binary good = compiled_binary(request);
  std::string why;
  CHECK(detail::trusted_binary<detail::DwConvFamily>(good, d, *config, "sm_90", why));
  dwconv::Problem fewer = d, wider = d, taller = d, larger_batch = d;
  fewer.c = d.c / 2;
  wider.w = d.w + 2;
  taller.h = d.h + 2;
  larger_batch.n = 64;  // the batch stays a run-time argument
  for (const auto& other : {fewer, wider, taller}) {
    INFO(other.key());
    CHECK_FALSE(detail::trusted_binary<detail::DwConvFamily>(good, other, *config, "sm_90", why));
    CHECK_THAT(why, Catch::Contains("compile key"));
    // Stored under the other shape's key: its kernel is still this shape's, and is refused.
    cache::Binary swapped = good;
    swapped.hash = detail::compile_hash(dwconv::compile_request(other, *config, "sm_90"));
    CHECK_FALSE(detail::trusted_binary<detail::DwConvFamily>(swapped, other, *config, "sm_90", why));
    CHECK_THAT(why, Catch::Contains("is not " + name.substr(0, name.find('<') + 1)));
  }
  CHECK(detail::trusted_binary<detail::DwConvFamily>(good, larger_batch, *config, "sm_90", why));
  return *config;
}

}  // namespace

TEST_CASE("trust: a 2D tiled binary is for its problem's channels and planes only", "[trust]") {
  // The tiled kernel's NHWC variants are compiled with the shape as constants (Problem::fixed_shape):
  // a binary made for C = 64 on 16 x 16 planes must never serve another C or plane.
  dwconv::Problem d;
  d.n = 2, d.c = 64, d.h = 16, d.w = 16, d.kh = 3, d.kw = 3, d.layout = DwLayout::nhwc, d.dtype = DType::bf16;
  d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
  d.sh = d.sw = 2;  // planes of 16 x 16 into 8 x 8
  const auto tiled = check_bound_to_shape(d, dwconv::Kernel::tiled, ", 64, 16, 16, 8, 8>");
  // Sizes past int (no template argument holds them) keep the shape at run time too.
  dwconv::Problem tall = d;
  tall.h = std::int64_t(1) << 31;
  CHECK_FALSE(tall.fixed_shape());
  CHECK_THAT(dwconv::compile_request(tall, tiled, "sm_90").name_expressions[0], !Catch::Contains("2147483648"));
  // NCHW too (planes, flat items and their tiles); 1D variants keep the shape at run time (and their
  // names): a row's length changes from call to call.
  dwconv::Problem nchw = d, nlc = d, ncl;
  nchw.layout = DwLayout::nchw;
  check_bound_to_shape(nchw, dwconv::Kernel::tiled, ", 64, 16, 16, 8, 8>");
  check_bound_to_shape(nchw, dwconv::Kernel::tiled, ", 64, 16, 16, 8, 8>", ",flat");
  nlc.layout = DwLayout::nlc, nlc.h = 1, nlc.kh = 1, nlc.sh = 1, nlc.pad_top = nlc.pad_bottom = 0;
  ncl = nlc;
  ncl.layout = DwLayout::ncl;
  for (const auto& other : {nlc, ncl}) {
    CHECK_FALSE(other.fixed_shape());
    for (const auto& c : dwconv::enumerate(other))
      if (std::holds_alternative<dwconv::TiledConfig>(c.variant())) {
        const auto name = dwconv::compile_request(other, c, "sm_90").name_expressions[0];
        CHECK_THAT(name, !Catch::Contains(", 64, 16, 16"));
      }
  }
}

TEST_CASE("trust: a 2D weight-gradient binary is for its problem's channels and planes only", "[trust]") {
  // backward_weight of 64 channels, x 16 x 16 and dy 14 x 14 (3x3, no padding): the shape constants
  // C, x's plane, dy's plane close the name.
  dwconv::Problem d;
  d.direction = DwDirection::backward_weight;
  d.n = 2, d.c = 64, d.h = 16, d.w = 16, d.kh = 3, d.kw = 3, d.layout = DwLayout::nhwc, d.dtype = DType::f32;
  check_bound_to_shape(d, dwconv::Kernel::wgrad, ", 64, 16, 16, 14, 14>");
  // Channel-first weight gradients, plain and staged, the same.
  dwconv::Problem nchw = d;
  nchw.layout = DwLayout::nchw;
  check_bound_to_shape(nchw, dwconv::Kernel::wgrad, ", 64, 16, 16, 14, 14>");
  const auto staged = check_bound_to_shape(nchw, dwconv::Kernel::wgrad, ", 64, 16, 16, 14, 14>", ",staged");
  CHECK_THAT(dwconv::compile_request(nchw, staged, "sm_90").name_expressions[0],
             Catch::StartsWith("kvt_dwconv_wgrad_staged<"));
  // 1D weight gradients keep the shape at run time.
  dwconv::Problem ncl = nchw;
  ncl.layout = DwLayout::ncl, ncl.h = 1, ncl.kh = 1, ncl.w = 64;
  REQUIRE_FALSE(ncl.fixed_shape());
  for (const auto& c : dwconv::enumerate(ncl))
    CHECK_THAT(dwconv::compile_request(ncl, c, "sm_90").name_expressions[0], !Catch::EndsWith(", 1, 64, 1, 62>"));
}

TEST_CASE("trust: stored configs are read within the limits of user input", "[trust]") {
  const auto p = norm_problem(1024);
  const auto config = normalize::enumerate(p).front();
  std::string why;
  CHECK(detail::stored_config<detail::NormalizeFamily>(config.to_json().dump(), p, why).has_value());
  // Nested deeper than a config is (a flat object): refused while parsing, never walked.
  CHECK_FALSE(detail::stored_config<detail::NormalizeFamily>(nested(100000), p, why));
  CHECK_THAT(why, Catch::Contains("bytes"));
  CHECK_FALSE(detail::stored_config<detail::NormalizeFamily>(nested(1000), p, why));
  CHECK_THAT(why, Catch::Contains("nested deeper"));
  CHECK_FALSE(detail::stored_config<detail::NormalizeFamily>(R"({"tpr":[[[1]]]})", p, why));
  CHECK_THAT(why, Catch::Contains("nested deeper"));
  CHECK_FALSE(detail::stored_config<detail::NormalizeFamily>("[1,2]", p, why));
  CHECK_FALSE(detail::stored_config<detail::NormalizeFamily>(R"({"tpr":1e300})", p, why));
  CHECK_FALSE(detail::stored_config<detail::NormalizeFamily>("{", p, why));
  // A well-formed config that is not a valid variant of the problem.
  auto bad = config.to_json();
  bad["tpr"] = 3;
  CHECK_FALSE(detail::stored_config<detail::NormalizeFamily>(bad.dump(), p, why));
}

TEST_CASE("trust: hostile cache rows are skipped with a warning, never a crash", "[trust][cache]") {
  TempDir dir;
  const std::string path = dir.file("cache.db");
  const auto p = norm_problem(1024);
  const auto config = normalize::enumerate(p).front();
  {
    auto store = cache::Store::open(path);
    store->put_result(winner_of(p, config, ""), std::nullopt, {});
    auto huge = winner_of(norm_problem(2048), config, "");
    store->put_result(huge, std::nullopt, {cache::Trial{"t", "{}", "ok", "", 1, 0, 1}});
  }
  // Another program writes rows beyond the limits: a label of 10 kB, a 200 kB config nested 100,000
  // deep, a trial message of 1 MB, a 100 MB image.
  const std::string big_key = norm_problem(2048).key();
  exec_sql(path, "UPDATE winners SET config_json = '" + nested(100000) + "' WHERE problem_key = '" + big_key + "';");
  exec_sql(path, "INSERT INTO winners SELECT 'k2', device_id, template_hash, op, printf('%.10000c', 'x'), config_json, "
                 "binary_hash, origin, median_ms, gbps, created_at FROM winners WHERE problem_key = '" + p.key() + "';");
  exec_sql(path, "UPDATE trials SET message = printf('%.1000000c', 'm');");
  exec_sql(path, "INSERT INTO binaries (hash, arch, lowered_name, image, image_hash, created_at) VALUES "
                 "('big', 'sm_90', '_Z1fv', zeroblob(100000000), 'x', 0);");
  LogCapture log;
  auto store = cache::Store::open(path, log.fn());
  REQUIRE_FALSE(store->in_memory());
  const auto all = store->winners();
  INFO(log.all());
  REQUIRE(all.size() == 1);
  CHECK(all[0].problem_key == p.key());
  CHECK(log.has("warn", "config of 200000 bytes"));
  CHECK(log.has("warn", "label of 10000 bytes"));
  CHECK_FALSE(store->find_winner(big_key, "dev", normalize::template_hash()).has_value());
  CHECK(store->trials(big_key, "dev", normalize::template_hash()).empty());
  CHECK(log.has("warn", "message of 1000000 bytes"));
  CHECK_FALSE(store->find_binary("big").has_value());
  CHECK(log.has("warn", "an image of 100000000 bytes"));
}

TEST_CASE("trust: the cache's location must be private", "[trust][cache]") {
  TempDir dir;
  const auto expect_refused = [](const std::string& path, const std::string& reason) {
    LogCapture log;
    auto store = cache::Store::open(path, log.fn());
    INFO(log.all());
    CHECK(store->in_memory());
    CHECK(log.has("warn", reason));
    CHECK(log.has("warn", "in-memory"));
    CHECK_THROWS_WITH(cache::Store::open_existing(path, true), Catch::Contains(reason));
  };
  const bool root = ::geteuid() == 0;

  SECTION("a directory others can write") {
    const std::string shared = dir.file("shared");
    fs::create_directories(shared);
    for (const mode_t mode : {mode_t{0770}, mode_t{0707}, mode_t{01777}}) {
      REQUIRE(::chmod(shared.c_str(), mode) == 0);
      expect_refused(shared + "/cache.db", "writable by group or others");
      CHECK_FALSE(fs::exists(shared + "/cache.db"));
    }
  }
  SECTION("an ancestor others can write (not sticky)") {
    const std::string open_dir = dir.file("open");
    fs::create_directories(open_dir + "/private");
    REQUIRE(::chmod(open_dir.c_str(), 0777) == 0);
    expect_refused(open_dir + "/private/cache.db", "writable by group or others");
  }
  SECTION("a sticky ancestor such as /tmp is fine, a private directory below it is used") {
    const std::string sticky = dir.file("sticky");
    fs::create_directories(sticky + "/mine");
    REQUIRE(::chmod(sticky.c_str(), 01777) == 0);
    LogCapture log;
    auto store = cache::Store::open(sticky + "/mine/cache.db", log.fn());
    INFO(log.all());
    CHECK_FALSE(store->in_memory());
  }
  SECTION("a cache file, -wal or -shm that is a symbolic link") {
    const std::string real = dir.file("real.db");
    cache::Store::open(real);
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      const std::string path = dir.file("linked.db");
      std::error_code ignored;
      for (const char* s : {"", "-wal", "-shm", "-journal"}) fs::remove(path + s, ignored);
      if (*suffix != '\0') cache::Store::open(path);  // a real database with a linked sibling
      fs::remove(path + suffix, ignored);
      fs::create_symlink(real, path + suffix);
      expect_refused(path, "symbolic link");
    }
  }
  SECTION("a -wal or -shm written by someone else is never replayed") {
    const std::string path = dir.file("cache.db");
    {
      auto store = cache::Store::open(path);
      store->put_result(winner_of(norm_problem(1024), normalize::enumerate(norm_problem(1024)).front(), ""),
                        std::nullopt, {});
    }
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
      const std::string sibling = path + suffix;
      test::write_bytes(sibling, "not ours");
      if (root) {
        REQUIRE(::chown(sibling.c_str(), 65534, 65534) == 0);  // nobody's
        REQUIRE(::chmod(sibling.c_str(), 0600) == 0);
        expect_refused(path, "belongs to another user");
      } else {
        REQUIRE(::chmod(sibling.c_str(), 0666) == 0);
        expect_refused(path, "writable by group or others");
      }
      fs::remove(sibling);
    }
    auto store = cache::Store::open(path);  // all removed: used again
    CHECK_FALSE(store->in_memory());
    CHECK(store->winners().size() == 1);
  }
  SECTION("a directory or file of another user (as root: chown)") {
    if (!root) {
      WARN("not root: cannot give a file to another user here; checked with group/other write instead");
      return;
    }
    const std::string theirs = dir.file("theirs");
    fs::create_directories(theirs);
    REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);
    expect_refused(theirs + "/cache.db", "belongs to another user");
    const std::string file = dir.file("their.db");
    cache::Store::open(file);
    REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
    expect_refused(file, "belongs to another user");
  }
}

// Root ignores file modes, so a read-only directory would not be read-only to the tests CI runs
// as root: the store is opened in a child that has given root up (user nobody), on a directory
// nobody can read and traverse but not write.
TEST_CASE("trust: a read-only directory gives an in-memory cache, also when the tests run as root", "[trust][cache]") {
  TempDir dir;
  const std::string locked = dir.file("locked");
  fs::create_directories(locked);
  REQUIRE(::chmod(locked.c_str(), 0555) == 0);
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    if (::geteuid() == 0) ::_exit(4);
    bool warned = false;
    auto store = cache::Store::open(locked + "/cache.db", [&](const char* level, const std::string& message) {
      if (std::string(level) == "warn" && message.find("in-memory") != std::string::npos) warned = true;
    });
    ::_exit(store->in_memory() && warned ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(fs::exists(locked + "/cache.db"));
}

TEST_CASE("trust: merge copies binaries only when asked, verify names binaries that do not match their entry",
          "[trust][tools]") {
  TempDir dir;
  const auto p = norm_problem(1024), q = norm_problem(512, DType::f16);
  const auto cp = normalize::enumerate(p).front(), cq = normalize::enumerate(q).front();
  const cache::Binary bp = compiled_binary(normalize::compile_request(p, cp, "sm_90"));
  const cache::Binary bq = compiled_binary(normalize::compile_request(q, cq, "sm_90"));
  const std::string shard = dir.file("shard.db");
  {
    auto store = cache::Store::open(shard);
    store->put_result(winner_of(p, cp, bp.hash), bp, {});
    store->put_result(winner_of(q, cq, bp.hash), bq, {});  // q's entry names p's binary: crafted
  }
  auto source = cache::Store::open_existing(shard, false);
  CHECK(tools::binary_mismatch(winner_of(p, cp, bp.hash), bp).empty());
  CHECK_THAT(tools::binary_mismatch(winner_of(q, cq, bp.hash), bp), Catch::Contains("compile key"));
  cache::Winner unknown = winner_of(p, cp, bp.hash);
  unknown.op = "softmax";
  CHECK_THAT(tools::binary_mismatch(unknown, bp), Catch::Contains("not in this build"));

  {
    auto target = cache::Store::open(dir.file("plain.db"));
    const auto m = tools::merge_cache(*target, *source, false);
    CHECK(m.added == 2);
    CHECK(m.binaries == 0);
    CHECK(target->binary_infos().empty());
    for (const auto& w : target->winners()) CHECK(w.binary_hash.empty());  // compiled where used
  }
  {
    auto target = cache::Store::open(dir.file("with.db"));
    const auto m = tools::merge_cache(*target, *source, true);
    CHECK(m.added == 2);
    CHECK(m.binaries == 2);
    CHECK(target->binary_infos().size() == 2);
  }
#ifdef KVTUNE_CACHE_EXE
  const std::string out = dir.file("verify.txt");
  const int status = std::system(
      fmt::format("{} verify --cache {} > {} 2>&1", KVTUNE_CACHE_EXE, dir.file("with.db"), out).c_str());
  const std::string text = test::read_bytes(out);
  INFO(text);
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_THAT(text, Catch::Contains("is not what this build compiles for it") && Catch::Contains("compile key"));
  CHECK_THAT(text, Catch::Contains("1 problems"));
  const int merged = std::system(fmt::format("{} merge --cache {} {} > {} 2>&1", KVTUNE_CACHE_EXE,
                                             dir.file("cli.db"), shard, out)
                                     .c_str());
  CHECK(WEXITSTATUS(merged) == 0);
  CHECK_THAT(test::read_bytes(out), Catch::Contains("no binaries"));
#endif
}

TEST_CASE("trust: every ContextOptions number out of range is an error naming the field", "[trust][api]") {
  const auto refused = [](auto change, const char* field) {
    ContextOptions o;
    o.cache_path = "";
    change(o);
    INFO(field);
    try {
      Context context(o);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.context().field == field);
    }
  };
  refused([](ContextOptions& o) { o.timing_samples = 0; }, "timing_samples");
  refused([](ContextOptions& o) { o.timing_samples = -3; }, "timing_samples");
  refused([](ContextOptions& o) { o.timing_samples = 1 << 30; }, "timing_samples");
  refused([](ContextOptions& o) { o.compile_threads = -1; }, "compile_threads");
  refused([](ContextOptions& o) { o.budget_variants = -1; }, "budget_variants");
  refused([](ContextOptions& o) { o.budget_ms = -1; }, "budget_ms");
  refused([](ContextOptions& o) { o.budget_ms = 1.0 / 0.0; }, "budget_ms");
  refused([](ContextOptions& o) { o.lease_seconds = 0; }, "lease_seconds");
  refused([](ContextOptions& o) { o.lease_seconds = -5; }, "lease_seconds");
  refused([](ContextOptions& o) { o.lease_seconds = 0.0 / 0.0; }, "lease_seconds");
  refused([](ContextOptions& o) { o.lease_seconds = 1e12; }, "lease_seconds");
  refused([](ContextOptions& o) { o.policy = static_cast<Policy>(17); }, "policy");
  refused([](ContextOptions& o) { o.log_level = "loud"; }, "log_level");
  refused([](ContextOptions& o) { o.test_fault = "segv"; }, "test_fault");
  refused([](ContextOptions& o) { o.compile_worker = "/nonexistent/kvtune-compile-worker"; }, "compile_worker");
  refused([](ContextOptions& o) { o.buckets = "8,4"; }, "buckets");
  ContextOptions fine;
  fine.cache_path = "";
  fine.timing_samples = 1;
  fine.lease_seconds = 0.5;
  CHECK_NOTHROW(Context(fine));
}

TEST_CASE("trust: the fault injection is read from the environment by test builds only", "[trust][api]") {
  test::EnvGuard fault("KVTUNE_TEST_FAULT", "wrong");
#if defined(KVTUNE_TEST_HOOKS)
  CHECK(ContextOptions::from_environment().test_fault == "wrong");
#else
  CHECK(ContextOptions::from_environment().test_fault.empty());
#endif
}

TEST_CASE("trust: outputs overlapping inputs or each other are refused", "[trust][api]") {
  const auto at = [](std::uintptr_t v) { return reinterpret_cast<void*>(v); };
  const auto field_of = [](auto call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.context().field;
    }
    return "(accepted)";
  };
  SECTION("normalize") {
    NormalizeArgs a;
    a.x = at(0x100000), a.y = at(0x200000), a.rows = 16, a.cols = 64;  // x, y: 4 kB each
    a.mode = NormMode::layernorm;
    CHECK(field_of([&] { normalize::validate(a); }) == "(accepted)");
    NormalizeArgs b = a;
    b.mean = static_cast<float*>(at(0x100000 + 128));  // inside x
    CHECK(field_of([&] { normalize::validate(b); }) == "mean");
    b = a;
    b.rstd = static_cast<float*>(at(0x200000 + 4000));  // the last bytes of y
    CHECK(field_of([&] { normalize::validate(b); }) == "rstd");
    b = a;
    b.mean = static_cast<float*>(at(0x300000)), b.rstd = static_cast<float*>(at(0x300000 + 32));  // overlap
    CHECK(field_of([&] { normalize::validate(b); }) == "rstd");
    b = a;
    b.gamma = at(0x200000 + 256);  // inside the output y
    CHECK(field_of([&] { normalize::validate(b); }) == "gamma");
    b = a;
    b.gamma = at(0x100000), b.beta = at(0x100000);  // inputs may share memory with x and each other
    CHECK(field_of([&] { normalize::validate(b); }) == "(accepted)");
    b = a;
    b.y = const_cast<void*>(a.x), b.mean = static_cast<float*>(at(0x300000));  // in place is fine
    CHECK(field_of([&] { normalize::validate(b); }) == "(accepted)");
    b.mean = static_cast<float*>(at(0x100000 + 64));  // in place, mean inside x = y
    CHECK(field_of([&] { normalize::validate(b); }) == "mean");
  }
  SECTION("dwconv") {
    DwConvArgs a;
    a.layout = DwLayout::nchw, a.n = 2, a.c = 8, a.h = 16, a.w = 16, a.kernel_h = a.kernel_w = 3;
    a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;  // x, y: 16 kB each
    a.x = at(0x100000), a.weight = at(0x200000), a.y = at(0x300000), a.bias = at(0x400000);
    CHECK(field_of([&] { dwconv::validate(a); }) == "(accepted)");
    DwConvArgs b = a;
    b.y = const_cast<void*>(a.x);  // in place
    CHECK(field_of([&] { dwconv::validate(b); }) == "y");
    b.y = at(0x100000 + 8192);  // half over x
    CHECK(field_of([&] { dwconv::validate(b); }) == "y");
    b = a;
    b.bias = at(0x300000 + 64);  // bias inside y
    CHECK(field_of([&] { dwconv::validate(b); }) == "y");
    b = DwConvArgs(a);
    b.direction = DwDirection::backward_data, b.x = nullptr, b.y = nullptr, b.bias = nullptr;
    b.dy = at(0x100000), b.dx = at(0x200000 - 64);  // dx's end runs into weight
    CHECK(field_of([&] { dwconv::validate(b); }) == "dx");
    b.dx = at(0x500000);
    CHECK(field_of([&] { dwconv::validate(b); }) == "(accepted)");
    b = DwConvArgs(a);
    b.direction = DwDirection::backward_weight, b.weight = nullptr, b.y = nullptr, b.bias = nullptr;
    b.dy = at(0x300000), b.dweight = at(0x500000), b.dbias = at(0x500000 + 16);  // dbias inside dweight
    CHECK(field_of([&] { dwconv::validate(b); }) == "dbias");
    b.dbias = at(0x600000), b.dweight = at(0x300000 + 128);  // dweight inside dy
    CHECK(field_of([&] { dwconv::validate(b); }) == "dweight");
  }
  SECTION("the dwconv output is bounded like the input") {
    DwConvArgs a;
    a.layout = DwLayout::nchw, a.n = 1 << 10, a.c = 1 << 10, a.h = 1 << 9, a.w = 1 << 9;  // 2^38 in
    a.kernel_h = a.kernel_w = 1, a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 4096;  // ~2^43 out
    a.x = at(std::uintptr_t(1) << 44), a.weight = at(std::uintptr_t(2) << 44), a.y = at(std::uintptr_t(3) << 44);
    CHECK_THROWS_WITH(dwconv::validate(a), Catch::Contains("exceeds 2^40 elements"));
  }
}

TEST_CASE("trust: a cache row whose binary is another problem's is not loaded: recompiled, logged, counted",
          "[gpu][trust]") {
  KVTUNE_REQUIRE_GPU();
  TempDir dir;
  const std::string path = dir.file("cache.db");
  ContextOptions o;
  o.cache_path = path;
  o.budget_variants = 12;
  o.timing_samples = 5;
  test::LayerNormCase a(4096, 1024, 7), b(4096, 512, 8);
  std::string key_a, key_b;
  {
    Context tuner(o);
    tuner.normalize(a.args());
    tuner.normalize(b.args());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    key_a = normalize::make_problem(a.args()).key();
    key_b = normalize::make_problem(b.args()).key();
  }
  // Another program points a's entry at b's binary (a merge of a crafted file could), and a's own
  // binary is gone, so that the one the library loads must be compiled.
  exec_sql(path, "DELETE FROM binaries WHERE hash = (SELECT binary_hash FROM winners WHERE problem_key = '" + key_a + "');");
  exec_sql(path, "UPDATE winners SET binary_hash = (SELECT binary_hash FROM winners WHERE problem_key = '" + key_b +
                     "') WHERE problem_key = '" + key_a + "';");
  std::string warnings;
  o.policy = Policy::cached;
  o.log_level = "warn";
  o.log = [&](const char*, const std::string& m) { warnings += m + "\n"; };
  Context context(o);
  context.normalize(a.args());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  INFO(warnings);
  CHECK(a.max_error() < 1e-4);
  CHECK(context.counters().cache_rows_rejected == 1);
  CHECK(context.counters().compiles == 1);
  CHECK_THAT(warnings, Catch::Contains("compile key"));
  // The entry was repaired: the next process loads its own binary without a rejection.
  Context again(o);
  again.normalize(a.args());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(again.counters().cache_rows_rejected == 0);
  CHECK(again.counters().compiles == 0);
  CHECK(a.max_error() < 1e-4);
}
