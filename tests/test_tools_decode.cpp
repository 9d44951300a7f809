// The tools' dwconv_decode operator (tools/op_dwconv_decode.cpp) without a GPU: shapes entries and
// their errors, the mamba-inference suite, space sizes against the family's, stored keys and configs.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/ops.h"

using namespace kvtune;
using nlohmann::json;

namespace {

const tools::OpHandler& decode_handler() { return tools::require_handler("dwconv_decode", "test"); }

void check_refused(const json& entry, const std::string& part) {
  INFO(entry.dump());
  try {
    decode_handler().parse(entry, "shapes.json: problems[0]");
    FAIL("accepted");
  } catch (const tools::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("shapes.json: problems[0]: ") && Catch::Contains(part));
  }
}

}  // namespace

TEST_CASE("tools: dwconv_decode entries parse with defaults, bad ones are refused naming the field", "[tools][decode]") {
  const auto p = decode_handler().parse(json{{"op", "dwconv_decode"}, {"batch", 48}, {"channels", 4096}}, "here");
  CHECK(p->op() == "dwconv_decode");
  CHECK(p->key() == "dwconv_decode,bf16,n<=64,c=4096,k=4,seq=1,state=3,circular=0,indices=0,bias=0,act=none,align=16");
  CHECK(p->describe() == "48x4096 bf16 K=4 seq=1");
  CHECK(p->buckets() == "pow2");
  // The entry it writes parses back to the same key.
  CHECK(decode_handler().parse(p->to_json(), "again")->key() == p->key());
  const json full = {{"op", "dwconv_decode"}, {"batch", 5},        {"channels", 40},       {"seqlen", 3},
                     {"k", 7},                {"dtype", "f16"},    {"state_len", 12},      {"circular", true},
                     {"indices", true},       {"bias", true},      {"activation", "gelu_erf"}, {"align", 4}};
  const auto q = decode_handler().parse(full, "here");
  CHECK(q->key() == "dwconv_decode,f16,n<=8,c=40,k=7,seq=3,state=12,circular=1,indices=1,bias=1,act=gelu_erf,align=4");
  CHECK(q->describe() == "5x40 f16 K=7 seq=3 circular=12 +indices +bias gelu_erf align=4");
  const auto space = q->space();
  CHECK(space.tuned == std::int64_t(dwconv_decode::enumerate(*dwconv_decode::problem_from_key(q->key())).size()));
  CHECK(space.runnable >= space.tuned);
  CHECK(space.total == 6 * 4 * 3);  // 32..1024 x 1..8 x tokens 1, 2, 3
  CHECK(std::int64_t(q->variants("sm_90").size()) == space.tuned);

  json e = full;
  e.erase("channels");
  check_refused(e, "missing field 'channels'");
  e = full, e["kernel"] = 3;
  check_refused(e, "unknown field 'kernel' for operator dwconv_decode");
  e = full, e["activation"] = "tanh";
  check_refused(e, "unknown activation 'tanh'");
  e = full, e["align"] = 3;
  check_refused(e, "'align' must be 2, 4, 8 or 16 bytes");
  e = full, e["dtype"] = "f32", e["align"] = 2;
  check_refused(e, "'align' 2 is below the 4-byte element of f32");
  e = full, e["state_len"] = 2;  // circular: at least seqlen and k - 1
  check_refused(e, "state_len");
  e = full, e["circular"] = false;  // shifted: exactly k - 1
  check_refused(e, "exactly kernel_w - 1");
  e = full, e["seqlen"] = 65;
  check_refused(e, "seqlen must be in 1..64");
  e = full, e["k"] = 1;
  check_refused(e, "kernel_w must be in 2..63");
  e = full, e["batch"] = 0;
  check_refused(e, "batch must be positive");
}

TEST_CASE("tools: the mamba-inference suite and dwconv_decode stored keys", "[tools][decode]") {
  CHECK(&tools::handler_for_suite("mamba-inference") == &decode_handler());
  const auto problems = tools::load_suite("mamba-inference");
  REQUIRE(problems.size() == 8);
  for (const auto& p : problems) {
    INFO(p->key());
    CHECK(p->op() == "dwconv_decode");
    CHECK(p->space().tuned > 0);
    // A stored key is read back as the same problem, and its heuristic is reported.
    const auto again = decode_handler().from_key(p->key(), nullptr);
    REQUIRE(again != nullptr);
    CHECK(again->key() == p->key());
    const auto info = decode_handler().key_info(p->key(), 9);
    REQUIRE(info);
    CHECK(info->model_bytes == p->model_bytes());
    CHECK_FALSE(info->heuristic_label.empty());
  }
  // Exact keys too; foreign and unreproducible ones are refused with a reason.
  const std::string exact = "dwconv_decode,f32,n=1000,c=96,k=3,seq=1,state=2,circular=0,indices=1,bias=0,act=relu,align=16";
  const auto p = decode_handler().from_key(exact, nullptr);
  REQUIRE(p != nullptr);
  CHECK(p->buckets() == "exact");
  std::string why;
  CHECK(decode_handler().from_key("dwconv,forward,ncl,f32,n<=1,c=1", &why) == nullptr);
  CHECK_THAT(why, Catch::Contains("not a dwconv_decode problem key"));
  // Stored configs: the canonical label of a runnable one, an InputError naming what is wrong otherwise.
  CHECK(decode_handler().check_config(exact, json{{"bt", 64}, {"vc", 4}, {"tt", 1}}) == "bt=64,vc=4,tt=1");
  CHECK_THROWS_WITH(decode_handler().check_config(exact, json{{"bt", 64}, {"vc", 5}, {"tt", 1}}),
                    Catch::Contains("channels per thread"));
  CHECK_THROWS_WITH(decode_handler().check_config(exact, json{{"bt", 64}}), Catch::Contains("malformed config"));
}
