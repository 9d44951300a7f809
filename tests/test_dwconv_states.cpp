// CPU tests of the causal conv1d's states and packed sequences (DwConvArgs initial_state, final_state,
// dinitial_state, seq_idx; the dwconv_states family): argument rules (every field named), keys (the
// convolution's own keys unchanged, the fix-up's parsed back), plans, the space, the float64 reference
// (against the plain reference on the concatenated sequence and on each packed sequence alone, finite
// differences for every gradient, prefill handing over to the decode step), and NVRTC compilation of
// every variant of problems that together take every option, for sm_90.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>

#include "compile_batches.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_reference.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_reference.h"
#include "kernel_templates/dwconv_states/dwconv_states_family.h"
#include "kernel_templates/dwconv_states/dwconv_states_reference.h"
#include "kernel_templates/dwconv_states/dwconv_states_tuning.h"
#include "lib/src/families.h"

using namespace kvtune;
using dwconv_states::Config;
using dwconv_states::Problem;

namespace {

void* fake(std::uintptr_t offset) { return reinterpret_cast<void*>((std::uintptr_t(1) << 24) + offset); }

// A Mamba prefill: bf16 NLC, 2 rows x 64 channels x 100 positions, K = 4, tensors 1 MiB apart.
DwConvArgs causal_args(DwDirection direction = DwDirection::forward) {
  DwConvArgs a;
  a.direction = direction;
  a.layout = DwLayout::nlc;
  a.dtype = DType::bf16;
  a.n = 2, a.c = 64, a.h = 1, a.w = 100, a.kernel_w = 4, a.causal = true;
  a.x = fake(0), a.weight = fake(1 << 20), a.y = fake(2 << 20), a.dy = fake(3 << 20), a.dx = fake(4 << 20);
  a.dweight = fake(5 << 20);
  return a;
}

void check_invalid(const DwConvArgs& a, const std::string& field, const std::string& part) {
  try {
    dwconv::validate(a);
    dwconv_states::validate(a);
    FAIL("accepted; expected an error naming " << field);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.context().field == field);
    CHECK(e.context().op == "dwconv");
    CHECK(std::string(e.what()).find(part) != std::string::npos);
  }
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

Problem shape(DwLayout layout, std::int64_t c, std::int64_t w, int k, int d, Activation act = Activation::none) {
  Problem p;
  p.layout = layout, p.c = c, p.w = w, p.k = k, p.d = d, p.activation = act;
  return p;
}

// The plain causal convolution (dwconv's reference) of one row's channels over `length` positions.
dwconv::Problem plain_conv(const Problem& p, std::int64_t length, bool bias) {
  dwconv::Problem q;
  q.direction = DwDirection::forward, q.layout = p.layout, q.n = 1, q.c = p.c, q.h = 1, q.w = length;
  q.kw = p.k, q.dw = p.d, q.pad_left = p.state_len(), q.bias = bias, q.activation = p.activation;
  return q;
}

std::size_t at(const Problem& p, std::int64_t length, std::int64_t b, std::int64_t c, std::int64_t t) {
  return std::size_t(p.layout == DwLayout::nlc ? (b * length + t) * p.c + c : (b * p.c + c) * length + t);
}

}  // namespace

TEST_CASE("dwconv states: argument rules name the field", "[dwconv][states]") {
  const auto state = fake(6 << 20);
  DwConvArgs a = causal_args();
  a.initial_state = state;
  dwconv::validate(a);
  dwconv_states::validate(a);  // accepted

  DwConvArgs b = a;
  b.causal = false;
  check_invalid(b, "initial_state", "causal 1D");
  b = causal_args(), b.layout = DwLayout::nhwc, b.causal = false, b.h = 1, b.final_state = fake(6 << 20);
  check_invalid(b, "final_state", "causal 1D");
  b = causal_args(), b.seq_idx = static_cast<const std::int32_t*>(fake(6 << 20)), b.causal = false;
  check_invalid(b, "seq_idx", "causal 1D");
  b = causal_args(), b.stride_w = 2, b.final_state = fake(6 << 20);
  check_invalid(b, "final_state", "stride_w = 1");
  b = causal_args(), b.kernel_w = 1, b.initial_state = state;
  check_invalid(b, "initial_state", "kernel_w >= 2");
  b = causal_args(DwDirection::backward_data), b.final_state = state;
  check_invalid(b, "final_state", "forward");
  b = causal_args(), b.dinitial_state = fake(6 << 20);
  check_invalid(b, "dinitial_state", "backward_data");
  b = causal_args(DwDirection::backward_weight), b.dinitial_state = fake(6 << 20);
  check_invalid(b, "dinitial_state", "backward_data");
  b = a, b.seq_idx = static_cast<const std::int32_t*>(fake(7 << 20));
  check_invalid(b, "seq_idx", "initial state");
  b = causal_args(DwDirection::backward_data), b.dinitial_state = state;
  b.seq_idx = static_cast<const std::int32_t*>(fake(7 << 20));
  check_invalid(b, "seq_idx", "initial state");
  b = a, b.initial_state = fake((6 << 20) + 1);
  check_invalid(b, "initial_state", "aligned to 2 bytes");
  b = causal_args(), b.seq_idx = static_cast<const std::int32_t*>(fake((6 << 20) + 2));
  check_invalid(b, "seq_idx", "aligned to 4 bytes");
  // Overlaps: a state output with an input or another output; an output with the new inputs.
  b = causal_args(), b.final_state = fake((0) + 64);
  check_invalid(b, "final_state", "overlaps x");
  b = a, b.final_state = state;
  check_invalid(b, "final_state", "overlaps initial_state");
  b = causal_args(), b.final_state = fake((2 << 20) + 128);
  check_invalid(b, "final_state", "overlaps y");
  b = causal_args(), b.seq_idx = static_cast<const std::int32_t*>(fake((2 << 20) + 64));
  check_invalid(b, "y", "overlaps seq_idx");
  b = causal_args(DwDirection::backward_data), b.dinitial_state = fake((3 << 20) + 8);
  check_invalid(b, "dinitial_state", "overlaps dy");
  b = causal_args(DwDirection::backward_weight), b.initial_state = fake((5 << 20) + 2);
  check_invalid(b, "dweight", "overlaps initial_state");
  // backward_data reads the initial state only with an activation: without one it is ignored.
  b = causal_args(DwDirection::backward_data), b.initial_state = fake((4 << 20) + 2);
  dwconv_states::validate(b);
  b.activation = Activation::silu;
  check_invalid(b, "dx", "overlaps initial_state");
}

TEST_CASE("dwconv states: the convolution's keys stay, the fix-up's parse back", "[dwconv][states]") {
  for (DwDirection dir : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight}) {
    DwConvArgs plain = causal_args(dir);
    plain.activation = Activation::silu;
    DwConvArgs with = plain;
    with.seq_idx = static_cast<const std::int32_t*>(fake(7 << 20));
    if (dir == DwDirection::forward) with.final_state = fake(6 << 20);
    CHECK(!dwconv_states::make_plan(plain).fix);
    const auto plan = dwconv_states::make_plan(with);
    if (dir == DwDirection::backward_weight) {
      // The fused 1D weight gradient masks seq_idx itself: its own key, no fix-up.
      CHECK(dwconv::make_problem(with).key() == dwconv::make_problem(plain).key() + ",seq=1");
      CHECK(!plan.fix);
      CHECK(!plan.prep);
      continue;
    }
    if (dir == DwDirection::backward_data) {
      // The fused 1D data gradient masks seq_idx itself too.
      DwConvArgs none = plain;
      none.activation = Activation::none;
      CHECK(dwconv::make_problem(plain).key() == dwconv::make_problem(none).key() + ",act=silu");
      CHECK(dwconv::make_problem(with).key() == dwconv::make_problem(plain).key() + ",seq=1");
      CHECK(!plan.fix);
      CHECK(!plan.prep);
      continue;
    }
    // Forward with a final state: byte for byte the same key for the tuned kernel, which runs unchanged.
    CHECK(dwconv::make_problem(with).key() == dwconv::make_problem(plain).key());
    CHECK_FALSE(dwconv::gradient_prep_problem(with));
    REQUIRE(plan.fix);
    CHECK(plan.prep.has_value() == (dir != DwDirection::forward));
    for (const auto& p : {plan.prep, plan.fix}) {
      if (!p) continue;
      INFO(p->key());
      CHECK(dwconv_states::problem_from_key(p->key()) == *p);
      CHECK(p->key().rfind("dwconv_states,", 0) == 0);
    }
  }
  DwConvArgs a = causal_args();
  a.initial_state = fake(6 << 20), a.final_state = fake(7 << 20), a.bias = fake(8 << 20), a.dilation_w = 2;
  const Problem p = *dwconv_states::make_plan(a).fix;
  CHECK(p.key() == "dwconv_states,forward,nlc,bf16,n<=2,c=64,w=100,k=4,d=2,bias=1,act=none,init=1,state=1,seq=0");
  CHECK(p.state_len() == 6);
  // Plans: backward_data without seq_idx or dinitial_state needs no fix-up; with an activation and an
  // initial state the gradient prep is fixed (z reads the state).
  DwConvArgs d = causal_args(DwDirection::backward_data);
  d.initial_state = fake(6 << 20);
  CHECK(!dwconv_states::make_plan(d).fix);
  CHECK(!dwconv_states::make_plan(d).prep);
  d.activation = Activation::gelu_tanh;
  const auto plan = dwconv_states::make_plan(d);
  REQUIRE(plan.prep);
  CHECK(!plan.fix);
  CHECK(plan.prep->key() == "dwconv_states,forward,nlc,bf16,n<=2,c=64,w=100,k=4,d=1,bias=0,act=gelu_tanh_grad,init=1,state=0,seq=0");
  DwConvArgs g = causal_args(DwDirection::backward_weight);
  g.initial_state = fake(6 << 20);
  CHECK(dwconv_states::make_plan(g).fix->key() ==
        "dwconv_states,backward_weight,nlc,bf16,n<=2,c=64,w=100,k=4,d=1,bias=0,act=none,init=1,state=0,seq=0");
  for (const char* bad : {"dwconv_states,forward,nchw,bf16,n<=2,c=64,w=100,k=4,d=1,bias=0,act=none,init=1,state=0,seq=0",
                          "dwconv_states,forward,ncl,bf16,n<=3,c=64,w=100,k=4,d=1,bias=0,act=none,init=1,state=0,seq=0",
                          "dwconv_states,forward,ncl,bf16,n<=2,c=64,w=100,k=4,d=1,bias=0,act=none,init=0,state=0,seq=0",
                          "dwconv_states,forward,ncl,bf16,n<=2,c=64,w=100,k=4,d=1,bias=0,act=none,init=1,state=0,seq=1",
                          "dwconv_states,backward_data,ncl,bf16,n<=2,c=64,w=100,k=4,d=1,bias=0,act=none,init=1,state=0,seq=0",
                          "dwconv_states,forward,ncl,bf16,n<=2,c=64,w=100,k=1,d=1,bias=0,act=none,init=1,state=0,seq=0",
                          "dwconv,forward,ncl,bf16"})
    CHECK(!dwconv_states::problem_from_key(bad));
}

TEST_CASE("dwconv states: space, geometry and heuristic", "[dwconv][states]") {
  Problem p = shape(DwLayout::nlc, 4096, 2048, 4, 1);
  p.n = 8, p.initial_state = true, p.state_out = true;
  const auto space = dwconv_states::enumerate(p);
  REQUIRE(!space.empty());
  for (const Config& c : space) CHECK(c.chunk_positions == 32);  // only the first 3 positions change
  CHECK(dwconv_states::is_valid(p, dwconv_states::heuristic_config(p, 9)));
  auto g = dwconv_states::geometry(p, Config{128, 32}, 8);
  CHECK(g.chunks == 1);
  CHECK(g.grid_x == 8 * 2);  // a chunk and the state a row
  CHECK(g.grid_y == 32);
  p.initial_state = false, p.seq_idx = true;
  g = dwconv_states::geometry(p, Config{128, 128}, 8);
  CHECK(g.chunks == 16);
  CHECK(g.grid_x == 8 * 17);
  p.direction = DwDirection::backward_weight, p.state_out = false;
  g = dwconv_states::geometry(p, Config{64, 512}, 8);
  CHECK(g.grid_x == 1);
  CHECK(g.grid_y == 64);
  std::string why;
  CHECK(!dwconv_states::is_runnable(p, Config{48, 32}, &why));
  CHECK(why.find("threads per block") != std::string::npos);
  // Only the first S outputs a row change: about 1.4 MB against the 134 MB the convolution moves.
  Problem f = shape(DwLayout::nlc, 4096, 2048, 4, 1);
  f.dtype = DType::bf16, f.n = 8, f.initial_state = true, f.state_out = true;
  CHECK(dwconv_states::model_bytes(f, 8) < 0.02 * 134e6);
  CHECK(detail::FamilyIndex<detail::DwConvStatesFamily>::value == 3);
}

TEST_CASE("dwconv states reference: an initial state is the concatenated sequence's start", "[dwconv][states]") {
  for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc})
    for (int d : {1, 3})
      for (Activation act : {Activation::none, Activation::silu}) {
        const std::int64_t n = 2, c = 3, w = 11;
        const int k = 4;
        Problem p = shape(layout, c, w, k, d, act);
        const std::int64_t s = p.state_len();
        const auto x = random_vector(std::size_t(n * c * w), 1);
        const auto init = random_vector(std::size_t(n * c * s), 2);
        const auto wt = random_vector(std::size_t(c * k), 3);
        const auto bias = random_vector(std::size_t(c), 4);
        std::vector<double> final_state;
        const auto y = dwconv_states::reference_forward(p, n, x, wt, bias, init, {}, {}, &final_state);
        const dwconv::Problem q = plain_conv(p, s + w, true);
        for (std::int64_t b = 0; b < n; ++b) {
          std::vector<double> u(std::size_t(c * (s + w)));
          for (std::int64_t ch = 0; ch < c; ++ch) {
            for (std::int64_t j = 0; j < s; ++j) u[at(p, s + w, 0, ch, j)] = init[std::size_t((b * c + ch) * s + j)];
            for (std::int64_t t = 0; t < w; ++t) u[at(p, s + w, 0, ch, s + t)] = x[at(p, w, b, ch, t)];
          }
          const auto full = dwconv::reference_forward(q, 1, u, wt, bias);
          for (std::int64_t ch = 0; ch < c; ++ch) {
            for (std::int64_t t = 0; t < w; ++t) CHECK(y[at(p, w, b, ch, t)] == Approx(full[at(p, s + w, 0, ch, s + t)]));
            for (std::int64_t j = 0; j < s; ++j)  // the last S inputs of [state, x]
              CHECK(final_state[std::size_t((b * c + ch) * s + j)] == u[at(p, s + w, 0, ch, w + j)]);
          }
        }
      }
}

TEST_CASE("dwconv states reference: seq_idx runs each packed sequence alone", "[dwconv][states]") {
  for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc})
    for (int d : {1, 2}) {
      const std::int64_t n = 2, c = 2, w = 23;
      const int k = 3;
      Problem p = shape(layout, c, w, k, d, Activation::gelu_erf);
      const std::int64_t s = p.state_len();
      const auto x = random_vector(std::size_t(n * c * w), 5);
      const auto wt = random_vector(std::size_t(c * k), 6);
      const auto seq = dwconv_states::packed_seq_idx(n, w, 3, 7);
      std::vector<double> final_state;
      const auto y = dwconv_states::reference_forward(p, n, x, wt, {}, {}, seq, {}, &final_state);
      for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t start = 0; start < w;) {
          std::int64_t end = start;
          while (end < w && seq[std::size_t(b * w + end)] == seq[std::size_t(b * w + start)]) ++end;
          const std::int64_t len = end - start;
          std::vector<double> part(std::size_t(c * len));
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t t = 0; t < len; ++t) part[at(p, len, 0, ch, t)] = x[at(p, w, b, ch, start + t)];
          const auto alone = dwconv::reference_forward(plain_conv(p, len, false), 1, part, wt, {});
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t t = 0; t < len; ++t) CHECK(y[at(p, w, b, ch, start + t)] == Approx(alone[at(p, len, 0, ch, t)]));
          if (end == w)  // the last sequence's state: its inputs, zeros before its start
            for (std::int64_t ch = 0; ch < c; ++ch)
              for (std::int64_t j = 0; j < s; ++j) {
                const std::int64_t q = w - s + j;
                CHECK(final_state[std::size_t((b * c + ch) * s + j)] == (q >= start ? x[at(p, w, b, ch, q)] : 0.0));
              }
          start = end;
        }
    }
}

TEST_CASE("dwconv states reference: the plain result from the whole operation's, bit for bit", "[dwconv][states]") {
  // The tuning harness's fix-up input: the whole operation's reference with the outputs the options
  // change recomputed without them must equal the reference run without them.
  for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc})
    for (DwDirection direction : {DwDirection::forward, DwDirection::backward_data})
      for (int k : {2, 4})
        for (int d : {1, 3})
          for (int options : {1, 2, 3}) {  // bit 0: initial state, bit 1: seq_idx
            const bool init_on = (options & 1) != 0, seq_on = (options & 2) != 0;
            const std::int64_t n = 2, c = 3, w = 29;
            Problem p = shape(layout, c, w, k, d, direction == DwDirection::forward ? Activation::silu : Activation::none);
            p.direction = direction;
            p.gradient_prep = direction == DwDirection::forward && k == 4;
            INFO(p.key() << " options " << options);
            const auto src = random_vector(std::size_t(n * c * w), 8);
            const auto wt = random_vector(std::size_t(c * k), 9);
            const auto bias = random_vector(std::size_t(c), 10);
            const auto dy = random_vector(std::size_t(n * c * w), 11);
            const auto init = init_on ? random_vector(std::size_t(n * c * p.state_len()), 12) : std::vector<double>{};
            const auto seq = seq_on ? dwconv_states::packed_seq_idx(n, w, 3, 13) : std::vector<std::int32_t>{};
            const bool fwd = direction == DwDirection::forward;
            auto values = fwd ? dwconv_states::reference_forward(p, n, src, wt, bias, init, seq, dy, nullptr)
                              : dwconv_states::reference_backward_data(p, n, src, wt, seq, nullptr);
            const auto plain = fwd ? dwconv_states::reference_forward(p, n, src, wt, bias, {}, {}, dy, nullptr)
                                   : dwconv_states::reference_backward_data(p, n, src, wt, {}, nullptr);
            // The options change something (backward_data reads no initial state: seq_idx alone).
            if (fwd || seq_on) CHECK(values != plain);
            dwconv_states::plain_from_full(p, n, values, src, wt, bias, seq, dy);
            CHECK(values == plain);
          }
}

// Finite differences of L = sum(r * y) for every input a gradient exists for, through the composition
// the library runs: g = dy * act'(z) (the gradient prep), then backward_data / backward_weight on g.
TEST_CASE("dwconv states reference: gradients match finite differences", "[dwconv][states]") {
  for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc})
    for (bool packed : {false, true})
      for (Activation act : {Activation::none, Activation::silu}) {
        INFO("layout=" << to_string(layout) << " packed=" << packed << " act=" << to_string(act));
        const std::int64_t n = 2, c = 2, w = 9;
        const int k = 3, d = packed ? 1 : 2;
        Problem p = shape(layout, c, w, k, d, act);
        const std::int64_t s = p.state_len();
        auto x = random_vector(std::size_t(n * c * w), 8);
        auto init = packed ? std::vector<double>{} : random_vector(std::size_t(n * c * s), 9);
        auto wt = random_vector(std::size_t(c * k), 10);
        auto bias = random_vector(std::size_t(c), 11);
        const auto r = random_vector(std::size_t(n * c * w), 12);
        const auto seq = packed ? dwconv_states::packed_seq_idx(n, w, 2, 13) : std::vector<std::int32_t>{};
        const auto loss = [&] {
          const auto y = dwconv_states::reference_forward(p, n, x, wt, bias, init, seq, {}, nullptr);
          double l = 0;
          for (std::size_t i = 0; i < y.size(); ++i) l += r[i] * y[i];
          return l;
        };
        Problem prep = p;
        prep.gradient_prep = true;
        const auto g = dwconv_states::reference_forward(prep, n, x, wt, bias, init, seq, r, nullptr);
        std::vector<double> dinit;
        const auto dx = dwconv_states::reference_backward_data(p, n, g, wt, seq, packed ? nullptr : &dinit);
        std::vector<double> dw, db;
        dwconv_states::reference_backward_weight(p, n, x, g, init, seq, dw, db);
        const auto numeric = [&](std::vector<double>& v, std::size_t i) {
          const double h = 1e-6, keep = v[i];
          v[i] = keep + h;
          const double up = loss();
          v[i] = keep - h;
          const double down = loss();
          v[i] = keep;
          return (up - down) / (2 * h);
        };
        for (std::size_t i = 0; i < x.size(); ++i) CHECK(dx[i] == Approx(numeric(x, i)).margin(1e-7));
        for (std::size_t i = 0; i < init.size(); ++i) CHECK(dinit[i] == Approx(numeric(init, i)).margin(1e-7));
        for (std::size_t i = 0; i < wt.size(); ++i) CHECK(dw[i] == Approx(numeric(wt, i)).margin(1e-7));
        for (std::size_t i = 0; i < bias.size(); ++i) CHECK(db[i] == Approx(numeric(bias, i)).margin(1e-7));
      }
}

TEST_CASE("dwconv states reference: prefill's final state hands over to the decode step", "[dwconv][states]") {
  // Prefill the first `prompt` inputs (from an initial state or from zeros), then decode the rest one
  // or three tokens at a time from the final state: the full causal convolution of the whole sequence.
  const std::int64_t c = 3, total = 20;
  const int k = 4;
  for (std::int64_t prompt : {2, 3, 12})
    for (bool from_state : {false, true})
      for (int step : {1, 3}) {
        INFO("prompt=" << prompt << " from_state=" << from_state << " step=" << step);
        Problem p = shape(DwLayout::ncl, c, prompt, k, 1, Activation::silu);
        const std::int64_t s = p.state_len();
        const auto seqx = random_vector(std::size_t(c * (s + total)), 14);  // [c, s + total]: state, then x
        const auto wt = random_vector(std::size_t(c * k), 15);
        const auto bias = random_vector(std::size_t(c), 16);
        const dwconv::Problem whole = plain_conv(p, s + total, true);
        std::vector<double> u = seqx;
        if (!from_state)
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t j = 0; j < s; ++j) u[std::size_t(ch * (s + total) + j)] = 0;
        const auto full = dwconv::reference_forward(whole, 1, u, wt, bias);
        std::vector<double> x(std::size_t(c * prompt)), init(std::size_t(c * s));
        for (std::int64_t ch = 0; ch < c; ++ch) {
          for (std::int64_t t = 0; t < prompt; ++t) x[std::size_t(ch * prompt + t)] = u[std::size_t(ch * (s + total) + s + t)];
          for (std::int64_t j = 0; j < s; ++j) init[std::size_t(ch * s + j)] = u[std::size_t(ch * (s + total) + j)];
        }
        std::vector<double> state;
        const auto y = dwconv_states::reference_forward(p, 1, x, wt, bias, from_state ? init : std::vector<double>{}, {},
                                                        {}, &state);
        for (std::int64_t ch = 0; ch < c; ++ch)
          for (std::int64_t t = 0; t < prompt; ++t)
            CHECK(y[std::size_t(ch * prompt + t)] == Approx(full[std::size_t(ch * (s + total) + s + t)]));
        dwconv_decode::Problem dp;
        dp.c = c, dp.k = k, dp.seqlen = step, dp.state_len = s, dp.bias = true, dp.activation = Activation::silu;
        for (std::int64_t t0 = prompt; t0 + step <= total; t0 += step) {
          std::vector<double> xs(std::size_t(c * step)), ys(std::size_t(c * step));
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (int t = 0; t < step; ++t) xs[std::size_t(ch * step + t)] = u[std::size_t(ch * (s + total) + s + t0 + t)];
          dwconv_decode::reference_decode(dp, 1, 1, xs, wt, bias, {}, {}, state, ys);
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (int t = 0; t < step; ++t)
              CHECK(ys[std::size_t(ch * step + t)] == Approx(full[std::size_t(ch * (s + total) + s + t0 + t)]));
        }
      }
}

TEST_CASE("dwconv states: harness values round to nearest even", "[dwconv][states]") {
  CHECK(dwconv_states::round_bits(DType::f32, 1.0) == 0x3f800000u);
  CHECK(dwconv_states::round_bits(DType::bf16, 1.0 + 1.0 / 256) == 0x3f80u);          // a tie: to even
  CHECK(dwconv_states::round_bits(DType::bf16, 1.0 + 3.0 / 256) == 0x3f82u);          // a tie: to even (up)
  CHECK(dwconv_states::round_bits(DType::f16, 1.0) == 0x3c00u);
  CHECK(dwconv_states::round_bits(DType::f16, -2.0) == 0xc000u);
  CHECK(dwconv_states::round_bits(DType::f16, 1.0 + 1.0 / 2048) == 0x3c00u);           // a tie: to even
  CHECK(dwconv_states::round_bits(DType::f16, 1.0 + 3.0 / 2048) == 0x3c02u);
  CHECK(dwconv_states::round_bits(DType::f16, 1.0 / 64) == 0x2400u);
  CHECK(dwconv_states::round_bits(DType::f16, std::ldexp(1.0, -24)) == 0x0001u);       // the smallest subnormal
  CHECK(dwconv_states::round_bits(DType::f16, 70000.0) == 0x7c00u);
  const auto seq = dwconv_states::packed_seq_idx(3, 50, 4, 1);
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t t = 1; t < 50; ++t) {
      const auto step = seq[std::size_t(r * 50 + t)] - seq[std::size_t(r * 50 + t - 1)];
      CHECK((step == 0 || step == 1));
    }
}

// Every variant of problems that together take every option (direction, layout, dtype, taps,
// dilation, bias, activation and gradient prep, initial state, state output, seq_idx) compiles for sm_90.
TEST_CASE("every dwconv_states variant of the option problems compiles for sm_90", "[dwconv][states][nvrtc][compiles]") {
  std::vector<Problem> problems;
  const Activation acts[] = {Activation::silu, Activation::gelu_tanh, Activation::gelu_erf, Activation::relu};
  int i = 0;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (DwLayout layout : {DwLayout::ncl, DwLayout::nlc}) {
      const int k = i % 3 == 2 ? 33 : 2 + i % 3;
      const int d = i % 2 == 0 ? 1 : 3;
      Problem fwd = shape(layout, 24, 77, k, d);
      fwd.dtype = t, fwd.n = 4, fwd.bias = i % 2 == 0, fwd.activation = i % 3 == 0 ? Activation::none : acts[i % 4];
      Problem a = fwd, b = fwd;
      a.initial_state = true, a.state_out = i % 2 == 1;
      b.seq_idx = true, b.state_out = i % 2 == 0;
      Problem prep = fwd;
      prep.activation = acts[i % 4], prep.gradient_prep = true, prep.bias = true;
      (i % 2 == 0 ? prep.initial_state : prep.seq_idx) = true;
      Problem data = shape(layout, 24, 77, k, d);
      data.dtype = t, data.n = 4, data.direction = DwDirection::backward_data;
      (i % 2 == 0 ? data.state_out : data.seq_idx) = true;
      Problem wgrad = data;
      wgrad.direction = DwDirection::backward_weight, wgrad.state_out = false, wgrad.seq_idx = i % 2 == 0;
      wgrad.initial_state = !wgrad.seq_idx;
      for (const Problem& p : {a, b, prep, data, wgrad}) problems.push_back(p);
      ++i;
    }
  std::vector<detail::CompileRequest> batches;
  std::size_t expected = 0;
  for (const Problem& p : problems) {
    INFO(p.key());
    CHECK(dwconv_states::problem_from_key(p.key()) == p);
    std::vector<detail::CompileRequest> requests{dwconv_states::support_request(p, "sm_90")};
    for (const Config& c : dwconv_states::enumerate(p)) requests.push_back(dwconv_states::compile_request(p, c, "sm_90"));
    expected += requests.size();
    test::add_batched(batches, requests, 32);
  }
  const std::size_t compiled = test::check_compiled(batches, expected);
  WARN(compiled << " dwconv_states kernels of " << problems.size() << " problems compiled for sm_90");
}
