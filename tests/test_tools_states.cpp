// The tools' dwconv_states operator (tools/op_dwconv_states.cpp) and the family registry's reach
// into the tools, without a GPU: every registered family has a handler; shapes entries and their
// errors; the mamba-states suite; every fix-up problem a call makes is reproduced from its key.
#include <catch2/catch.hpp>

#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/ops.h"

using namespace kvtune;
using nlohmann::json;

namespace {

const tools::OpHandler& states_handler() { return tools::require_handler("dwconv_states", "test"); }

void check_refused(const json& entry, const std::string& part) {
  INFO(entry.dump());
  try {
    states_handler().parse(entry, "shapes.json: problems[0]");
    FAIL("accepted");
  } catch (const tools::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("shapes.json: problems[0]: ") && Catch::Contains(part));
  }
}

template <class... F>
std::vector<std::pair<std::string, std::string>> registered(std::tuple<F...>*) {
  return {{F::kOp, F::template_hash()}...};
}

}  // namespace

TEST_CASE("tools: every registered family has an operator handler, and every handler a family", "[tools]") {
  const auto families = registered(static_cast<detail::Families*>(nullptr));
  std::set<std::string> names;
  for (const auto& [op, template_hash] : families) {
    INFO(op);
    names.insert(op);
    const tools::OpHandler* handler = tools::find_handler(op);
    REQUIRE(handler != nullptr);
    CHECK(handler->template_hash() == template_hash);
    CHECK_FALSE(handler->suite_names().empty());
  }
  for (const auto& handler : tools::handlers()) CHECK(names.count(handler->name()) == 1);
  CHECK(tools::handlers().size() == families.size());
}

TEST_CASE("tools: dwconv_states entries parse with defaults, bad ones are refused naming the field", "[tools][states]") {
  // (Rows under 32: the forward kernel masks seq_idx itself on longer ones, which need no fix-up.)
  const json plain = {{"op", "dwconv_states"}, {"batch", 6}, {"channels", 96}, {"width", 24}, {"seq_idx", true}};
  const auto p = states_handler().parse(plain, "here");
  CHECK(p->op() == "dwconv_states");
  CHECK(p->key() == "dwconv_states,forward,ncl,bf16,n<=8,c=96,w=24,k=4,d=1,bias=0,act=none,init=0,state=0,seq=1");
  CHECK(p->describe() == "forward ncl bf16 6x96x24 K=4 +seq_idx");
  CHECK(p->buckets() == "pow2");
  CHECK(states_handler().parse(p->to_json(), "again")->key() == p->key());

  const json full = {{"op", "dwconv_states"}, {"direction", "forward"}, {"layout", "nlc"},    {"dtype", "f16"},
                     {"batch", 3},            {"channels", 40},         {"width", 77},        {"k", 3},
                     {"dilation", 2},         {"bias", true},           {"activation", "gelu_erf"},
                     {"initial_state", true}, {"state_out", true}};
  const auto q = states_handler().parse(full, "here");
  CHECK(q->key() == "dwconv_states,forward,nlc,f16,n<=4,c=40,w=77,k=3,d=2,bias=1,act=gelu_erf,init=1,state=1,seq=0");
  CHECK(q->describe() == "forward nlc f16 3x40x77 K=3 d=2 +bias gelu_erf +initial_state +final_state");
  const auto space = q->space();
  CHECK(space.tuned == std::int64_t(dwconv_states::enumerate(*dwconv_states::problem_from_key(q->key())).size()));
  CHECK(space.runnable >= space.tuned);
  CHECK(space.total == 4 * 3);
  CHECK(std::int64_t(q->variants("sm_90").size()) == space.tuned);
  // The gradient prep of a backward call with an activation (rows under 32: longer ones are the fused
  // data gradient, which masks seq_idx itself).
  const json prep = {{"op", "dwconv_states"}, {"batch", 2},         {"channels", 64},        {"width", 20},
                     {"bias", true},          {"activation", "silu"}, {"gradient_prep", true}, {"seq_idx", true}};
  CHECK(states_handler().parse(prep, "here")->key() ==
        "dwconv_states,forward,ncl,bf16,n<=2,c=64,w=20,k=4,d=1,bias=1,act=silu_grad,init=0,state=0,seq=1");

  json e = plain;
  e.erase("width");
  check_refused(e, "missing field 'width'");
  e = plain, e["l"] = 3;
  check_refused(e, "unknown field 'l' for operator dwconv_states");
  e = plain, e["layout"] = "nchw";
  check_refused(e, "'layout' must be ncl or nlc");
  e = plain, e["seq_idx"] = false;
  check_refused(e, "needs no fix-up");
  e = plain, e["initial_state"] = true;  // packed sequences start from zeros
  check_refused(e, "seq_idx cannot be combined with an initial state");
  e = plain, e["k"] = 1, e["seq_idx"] = false, e["state_out"] = true;
  check_refused(e, "kernel_w >= 2");
  e = plain, e["direction"] = "backward_weight", e["state_out"] = true, e["seq_idx"] = false;
  check_refused(e, "writes no state");
  e = plain, e["direction"] = "backward_data", e["initial_state"] = true, e["seq_idx"] = false;
  check_refused(e, "reads no initial state");
  e = plain, e["direction"] = "backward_data", e["bias"] = true;
  check_refused(e, "reads no bias");
  e = prep, e["activation"] = "none";
  check_refused(e, "needs an activation");
  e = plain, e["batch"] = 0;
  check_refused(e, "'batch' must be positive");
  e = plain, e["channels"] = 1 << 22;
  check_refused(e, "channels");
}

TEST_CASE("tools: every fix-up problem a call makes is reproduced from its key", "[tools][states]") {
  // Every option combination the library accepts, in each direction and with or without an
  // activation: the plan's problems come back from their keys through the tool (call_for).
  int problems = 0;
  for (DwDirection direction : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    for (Activation act : {Activation::none, Activation::silu})
      for (int options = 0; options < 16; ++options) {
        DwConvArgs a;
        a.direction = direction, a.layout = DwLayout::nlc, a.dtype = DType::f32;
        a.n = 5, a.c = 24, a.h = 1, a.w = 40, a.kernel_w = 4, a.dilation_w = 1, a.causal = true, a.activation = act;
        dwconv::set_placeholders(a, true);
        const auto slot = [](std::uintptr_t s) { return reinterpret_cast<void*>(s << 44); };
        if (direction != DwDirection::forward && act != Activation::none)  // z recomputed: x, weight, bias
          a.x = slot(9), a.weight = slot(10), a.bias = slot(11);
        if (options & 1) a.initial_state = slot(12);
        if (options & 2) a.final_state = slot(13);
        if (options & 4) a.dinitial_state = slot(14);
        if (options & 8) a.seq_idx = static_cast<const std::int32_t*>(slot(15));
        try {
          dwconv::validate(a);
          dwconv_states::validate(a);
        } catch (const Error&) {
          continue;  // a combination the library refuses
        }
        const dwconv_states::Plan plan = dwconv_states::make_plan(a);
        for (const auto& made : {plan.prep, plan.fix}) {
          if (!made) continue;
          INFO(made->key());
          ++problems;
          std::string why;
          const auto back = states_handler().from_key(made->key(), &why);
          INFO(why);
          REQUIRE(back != nullptr);
          CHECK(back->key() == made->key());
          CHECK(states_handler().key_info(made->key(), 9).has_value());
        }
      }
  CHECK(problems >= 12);
}

TEST_CASE("tools: the mamba-states suite and dwconv_states stored keys", "[tools][states]") {
  CHECK(&tools::handler_for_suite("mamba-states") == &states_handler());
  const auto problems = tools::load_suite("mamba-states");
  REQUIRE(problems.size() == 8);
  std::set<std::string> keys;
  for (const auto& p : problems) {
    INFO(p->key());
    keys.insert(p->key());
    CHECK(p->op() == "dwconv_states");
    CHECK(p->space().tuned > 0);
    const auto again = states_handler().from_key(p->key(), nullptr);
    REQUIRE(again != nullptr);
    CHECK(again->key() == p->key());
    const auto info = states_handler().key_info(p->key(), 9);
    REQUIRE(info);
    CHECK(info->model_bytes == p->model_bytes());
    CHECK_FALSE(info->heuristic_label.empty());
  }
  CHECK(keys.size() == problems.size());
  // Exact keys too; foreign ones are refused with a reason.
  const std::string exact = "dwconv_states,backward_weight,ncl,f32,n=1000,c=96,w=64,k=3,d=1,bias=0,act=none,init=1,state=0,seq=0";
  const auto p = states_handler().from_key(exact, nullptr);
  REQUIRE(p != nullptr);
  CHECK(p->buckets() == "exact");
  std::string why;
  CHECK(states_handler().from_key("dwconv,forward,ncl,f32,n<=1,c=1", &why) == nullptr);
  CHECK_THAT(why, Catch::Contains("not a dwconv_states problem key"));
  CHECK(states_handler().check_config(exact, json{{"bt", 64}, {"p", 128}}) == "bt=64,p=128");
  CHECK_THROWS_WITH(states_handler().check_config(exact, json{{"bt", 64}}), Catch::Contains("malformed config"));
}
